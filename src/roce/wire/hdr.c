/* BTH and extension headers (IBTA vol. 1, 9.2-9.3): parse and build.
 *
 * Fields are read and written a byte at a time: the headers sit at
 * arbitrary offsets in receive buffers, and byte access is both
 * alignment-safe and endian-independent. */
#include <errno.h>
#include <string.h>

#include "roce/wire/roce_hdr.h"

/* BTH byte 1 */
#define BTH_SE 0x80
#define BTH_MIG 0x40
#define BTH_PAD_SHIFT 4
#define BTH_PAD_MASK 0x3
#define BTH_TVER_MASK 0xf
/* BTH byte 8 */
#define BTH_ACKREQ 0x80

static inline uint32_t get24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static inline uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | get24(p + 1);
}

static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void put24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

static inline void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	put24(p + 1, v);
}

static inline void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

int sr_pkt_parse(struct sr_pkt *pkt, const uint8_t *buf, size_t len)
{
	const struct sr_opcode_info *info;
	const uint8_t *p;
	size_t need;

	if (!buf || len < SR_BTH_BYTES)
		return -EINVAL;
	info = &sr_opcode[buf[0]];
	if (!info->name)
		return -EINVAL;

	memset(pkt, 0, sizeof(*pkt));
	pkt->opcode = buf[0];
	pkt->mask = info->mask;
	pkt->se = buf[1] & BTH_SE;
	pkt->mig = buf[1] & BTH_MIG;
	pkt->pad = (buf[1] >> BTH_PAD_SHIFT) & BTH_PAD_MASK;
	pkt->tver = buf[1] & BTH_TVER_MASK;
	if (pkt->tver != 0)
		return -EINVAL;
	pkt->pkey = get16(buf + 2);
	/* buf[4] is resv8a with FECN/BECN: variant, not reported. */
	pkt->dqpn = get24(buf + 5);
	pkt->ackreq = buf[8] & BTH_ACKREQ;
	pkt->psn = get24(buf + 9);

	need = (size_t)info->hdr_len + pkt->pad + SR_ICRC_BYTES;
	if (len < need)
		return -EINVAL;

	/* The order below is the order in which IBTA lays out the extension
	 * headers for every opcode that carries more than one of them
	 * (DETH before ImmDt, XRCETH before RETH, AtomicETH and ImmDt, RETH
	 * before ImmDt, AETH before AtomicAckETH). */
	p = buf + SR_BTH_BYTES;
	if (info->mask & SR_OP_DETH) {
		pkt->deth_qkey = get32(p);
		pkt->deth_sqpn = get24(p + 5);
		p += SR_DETH_BYTES;
	}
	if (info->mask & SR_OP_XRCETH) {
		pkt->xrc_srqn = get24(p + 1); /* the first byte is reserved */
		p += SR_XRCETH_BYTES;
	}
	if (info->mask & SR_OP_RETH) {
		pkt->reth_va = get64(p);
		pkt->reth_rkey = get32(p + 8);
		pkt->reth_len = get32(p + 12);
		p += SR_RETH_BYTES;
	}
	if (info->mask & SR_OP_ATMETH) {
		pkt->atm_va = get64(p);
		pkt->atm_rkey = get32(p + 8);
		pkt->atm_swap_add = get64(p + 12);
		pkt->atm_compare = get64(p + 20);
		p += SR_ATMETH_BYTES;
	}
	if (info->mask & SR_OP_AETH) {
		pkt->aeth_syndrome = p[0];
		pkt->aeth_msn = get24(p + 1);
		p += SR_AETH_BYTES;
	}
	if (info->mask & SR_OP_ATMACK) {
		pkt->atmack_orig = get64(p);
		p += SR_ATMACK_BYTES;
	}
	if (info->mask & SR_OP_IMMDT) {
		memcpy(&pkt->imm_data, p, SR_IMMDT_BYTES);
		p += SR_IMMDT_BYTES;
	}
	if (info->mask & SR_OP_IETH) {
		pkt->ieth_rkey = get32(p);
		p += SR_IETH_BYTES;
	}

	pkt->hdr_len = info->hdr_len;
	pkt->payload = buf + info->hdr_len;
	pkt->paylen = (uint32_t)(len - need);
	return 0;
}

uint32_t sr_pkt_build_hdr(uint8_t *hdr, const struct sr_pkt *pkt)
{
	const struct sr_opcode_info *info = &sr_opcode[pkt->opcode];
	uint8_t *p;

	hdr[0] = pkt->opcode;
	hdr[1] = (uint8_t)((pkt->se ? BTH_SE : 0) | (pkt->mig ? BTH_MIG : 0) |
			   (pkt->pad & BTH_PAD_MASK) << BTH_PAD_SHIFT | (pkt->tver & BTH_TVER_MASK));
	put16(hdr + 2, pkt->pkey);
	hdr[4] = 0;
	put24(hdr + 5, pkt->dqpn & SR_QPN_MASK);
	hdr[8] = pkt->ackreq ? BTH_ACKREQ : 0;
	put24(hdr + 9, pkt->psn & SR_PSN_MASK);

	p = hdr + SR_BTH_BYTES;
	if (info->mask & SR_OP_DETH) {
		put32(p, pkt->deth_qkey);
		p[4] = 0;
		put24(p + 5, pkt->deth_sqpn & SR_QPN_MASK);
		p += SR_DETH_BYTES;
	}
	if (info->mask & SR_OP_XRCETH) {
		p[0] = 0;
		put24(p + 1, pkt->xrc_srqn & SR_QPN_MASK);
		p += SR_XRCETH_BYTES;
	}
	if (info->mask & SR_OP_RETH) {
		put64(p, pkt->reth_va);
		put32(p + 8, pkt->reth_rkey);
		put32(p + 12, pkt->reth_len);
		p += SR_RETH_BYTES;
	}
	if (info->mask & SR_OP_ATMETH) {
		put64(p, pkt->atm_va);
		put32(p + 8, pkt->atm_rkey);
		put64(p + 12, pkt->atm_swap_add);
		put64(p + 20, pkt->atm_compare);
		p += SR_ATMETH_BYTES;
	}
	if (info->mask & SR_OP_AETH) {
		p[0] = pkt->aeth_syndrome;
		put24(p + 1, pkt->aeth_msn & 0xffffff);
		p += SR_AETH_BYTES;
	}
	if (info->mask & SR_OP_ATMACK) {
		put64(p, pkt->atmack_orig);
		p += SR_ATMACK_BYTES;
	}
	if (info->mask & SR_OP_IMMDT) {
		memcpy(p, &pkt->imm_data, SR_IMMDT_BYTES);
		p += SR_IMMDT_BYTES;
	}
	if (info->mask & SR_OP_IETH) {
		put32(p, pkt->ieth_rkey);
		p += SR_IETH_BYTES;
	}
	/* For an opcode the table does not know this is just the BTH, which
	 * is still a well-defined result for a caller that ignored the table. */
	return (uint32_t)(p - hdr);
}

/* IBTA vol. 1 table 45, in microseconds.  Code 0 is the longest wait,
 * not the shortest: it sits at the end of the scale, wrapped to the front. */
static const uint32_t rnr_timer_usec[32] = {
	655360, 10,    20,    30,    40,    60,	    80,	    120,    160,    240,    320,
	480,	640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240,  15360,
	20480,	30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

uint32_t sr_rnr_timer_usec(uint8_t code)
{
	/* The timer field is 5 bits wide wherever it appears (AETH syndrome,
	 * QP attribute), so only those bits count. */
	return rnr_timer_usec[code & 0x1f];
}
