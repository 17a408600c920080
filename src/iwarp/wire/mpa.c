/* MPA (RFC 5044): the Request/Reply frames that start an iWARP stream,
 * with the RFC 6581 enhanced connection data, and FPDU framing with its
 * CRC32c. */
#include <errno.h>
#include <string.h>

#include "iwarp/wire/iwarp_wire.h"
#include "roce/wire/roce_hdr.h" /* sr_crc32c_update: one CRC implementation for both transports */

static inline uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}
static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

enum sr_mpa_rtr sr_mpa_rr_rtr(const struct sr_mpa_rr *rr)
{
	if (!rr->enhanced || !(rr->ird_word & SR_MPA_V2_P2P))
		return SR_MPA_RTR_NONE;
	if (rr->ord_word & SR_MPA_V2_WRITE_RTR)
		return SR_MPA_RTR_WRITE;
	if (rr->ord_word & SR_MPA_V2_READ_RTR)
		return SR_MPA_RTR_READ;
	if (rr->ird_word & SR_MPA_V2_ZERO_RTR)
		return SR_MPA_RTR_SEND;
	return SR_MPA_RTR_NONE;
}

void sr_mpa_rr_set_v2(struct sr_mpa_rr *rr, uint16_t ird, uint16_t ord, bool p2p, unsigned int rtr_mask)
{
	rr->enhanced = true;
	if (rr->rev < 2)
		rr->rev = 2;
	rr->ird_word = ird > SR_MPA_IRD_ORD_MAX ? SR_MPA_IRD_ORD_MAX : ird;
	rr->ord_word = ord > SR_MPA_IRD_ORD_MAX ? SR_MPA_IRD_ORD_MAX : ord;
	if (p2p) {
		rr->ird_word |= SR_MPA_V2_P2P;
		if (rtr_mask & (1u << SR_MPA_RTR_SEND))
			rr->ird_word |= SR_MPA_V2_ZERO_RTR;
		if (rtr_mask & (1u << SR_MPA_RTR_WRITE))
			rr->ord_word |= SR_MPA_V2_WRITE_RTR;
		if (rtr_mask & (1u << SR_MPA_RTR_READ))
			rr->ord_word |= SR_MPA_V2_READ_RTR;
	}
}

static int key_kind(const uint8_t *p)
{
	if (!memcmp(p, SR_MPA_KEY_REQ, SR_MPA_KEY_LEN))
		return 0;
	if (!memcmp(p, SR_MPA_KEY_REP, SR_MPA_KEY_LEN))
		return 1;
	return -1;
}

size_t sr_mpa_rr_frame_len(const uint8_t *hdr, size_t len)
{
	if (len < SR_MPA_RR_HDR_LEN || key_kind(hdr) < 0)
		return 0;
	return SR_MPA_RR_HDR_LEN + get16(hdr + 18);
}

int sr_mpa_rr_need(const uint8_t *buf, size_t have, size_t cap)
{
	struct sr_mpa_rr rr;
	size_t len;

	if (have < SR_MPA_RR_HDR_LEN) {
		/* a wrong key shows in its first bytes: don't wait for 20 */
		if (sr_mpa_rr_parse(&rr, buf, have) == -EPROTO)
			return -EPROTO;
		return (int)(SR_MPA_RR_HDR_LEN - have);
	}
	len = sr_mpa_rr_frame_len(buf, have);
	if (!len)
		return -EPROTO;
	if (len > cap)
		return -EMSGSIZE;
	return have >= len ? 0 : (int)(len - have);
}

int sr_mpa_rr_parse(struct sr_mpa_rr *rr, const uint8_t *buf, size_t len)
{
	int kind;
	uint16_t pd_len;

	memset(rr, 0, sizeof(*rr));
	/* a wrong key is known from the first bytes that differ */
	for (size_t i = 0; i < len && i < SR_MPA_KEY_LEN; i++)
		if (buf[i] != (uint8_t)SR_MPA_KEY_REQ[i] && buf[i] != (uint8_t)SR_MPA_KEY_REP[i])
			return -EPROTO;
	if (len < SR_MPA_RR_HDR_LEN)
		return -EAGAIN;
	kind = key_kind(buf);
	if (kind < 0)
		return -EPROTO;
	pd_len = get16(buf + 18);
	if (pd_len > SR_MPA_MAX_PD)
		return -EMSGSIZE;
	if (len < (size_t)SR_MPA_RR_HDR_LEN + pd_len)
		return -EAGAIN;
	rr->reply = kind == 1;
	rr->markers = buf[16] & SR_MPA_FLAG_MARKERS;
	rr->crc = buf[16] & SR_MPA_FLAG_CRC;
	rr->reject = buf[16] & SR_MPA_FLAG_REJECT;
	rr->res = buf[16] & SR_MPA_FLAG_RES_MASK;
	rr->rev = buf[17];
	rr->pd = buf + SR_MPA_RR_HDR_LEN;
	rr->pd_len = pd_len;
	if (rr->rev >= 2 && (rr->res & SR_MPA_FLAG_ENHANCED)) {
		if (pd_len < SR_MPA_V2_LEN)
			return -EINVAL;
		rr->enhanced = true;
		rr->ird_word = get16(rr->pd);
		rr->ord_word = get16(rr->pd + 2);
		rr->pd += SR_MPA_V2_LEN;
		rr->pd_len -= SR_MPA_V2_LEN;
	}
	return SR_MPA_RR_HDR_LEN + pd_len;
}

int sr_mpa_rr_build(uint8_t *buf, size_t cap, const struct sr_mpa_rr *rr)
{
	size_t v2 = rr->enhanced ? SR_MPA_V2_LEN : 0;
	size_t pd_len = v2 + rr->pd_len;
	uint8_t flags;

	if (pd_len > SR_MPA_MAX_PD)
		return -EMSGSIZE;
	if (cap < SR_MPA_RR_HDR_LEN + pd_len)
		return -ENOSPC;
	memcpy(buf, rr->reply ? SR_MPA_KEY_REP : SR_MPA_KEY_REQ, SR_MPA_KEY_LEN);
	flags = rr->res & SR_MPA_FLAG_RES_MASK;
	if (rr->markers)
		flags |= SR_MPA_FLAG_MARKERS;
	if (rr->crc)
		flags |= SR_MPA_FLAG_CRC;
	if (rr->reject)
		flags |= SR_MPA_FLAG_REJECT;
	if (rr->enhanced)
		flags |= SR_MPA_FLAG_ENHANCED;
	buf[16] = flags;
	buf[17] = rr->rev;
	put16(buf + 18, (uint16_t)pd_len);
	if (v2) {
		put16(buf + 20, rr->ird_word);
		put16(buf + 22, rr->ord_word);
	}
	if (rr->pd_len)
		memcpy(buf + SR_MPA_RR_HDR_LEN + v2, rr->pd, rr->pd_len);
	return (int)(SR_MPA_RR_HDR_LEN + pd_len);
}

/* ---- FPDU framing ---- */

uint32_t sr_mpa_crc_update(uint32_t crc, const void *buf, size_t len)
{
	return sr_crc32c_update(crc, buf, len);
}

uint32_t sr_mpa_crc_iov(const struct iovec *iov, int niov)
{
	uint32_t crc = ~0u;

	for (int i = 0; i < niov; i++)
		crc = sr_crc32c_update(crc, iov[i].iov_base, iov[i].iov_len);
	return ~crc;
}

int sr_mpa_fpdu_split(struct sr_mpa_fpdu *f, const uint8_t *buf, size_t len)
{
	uint32_t ulen, pad;
	size_t total;

	memset(f, 0, sizeof(*f));
	if (len < SR_MPA_LEN_BYTES)
		return -EAGAIN;
	ulen = get16(buf);
	pad = sr_mpa_pad(ulen);
	total = sr_mpa_fpdu_len(ulen);
	if (len < total)
		return -EAGAIN;
	f->ulpdu_len = (uint16_t)ulen;
	f->ulpdu = buf + SR_MPA_LEN_BYTES;
	f->pad = (uint8_t)pad;
	for (uint32_t i = 0; i < pad; i++)
		f->pad_nonzero |= f->ulpdu[ulen + i] != 0;
	f->crc = sr_mpa_crc_load(buf + SR_MPA_LEN_BYTES + ulen + pad);
	f->crc_calc = ~sr_crc32c_update(~0u, buf, SR_MPA_LEN_BYTES + ulen + pad);
	f->len = total;
	return (int)total;
}
