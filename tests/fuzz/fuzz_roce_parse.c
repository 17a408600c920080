/* libFuzzer harness for the RoCEv2 wire layer: sr_pkt_parse, the
 * build/parse round trip, sr_icrc_compute(_iov) and sr_icrc_verify.
 *
 * Input: a 14-byte envelope, then the UDP payload (BTH ... ICRC).
 *   [0]     flags: bit 0 IPv6, bit 1 DF guess
 *   [1..2]  IPv4 ID guess (big-endian)
 *   [3..4]  UDP source port
 *   [5..8]  source address (IPv4, or the low 32 bits of an IPv6 address)
 *   [9..12] destination address (same)
 *   [13]    selector for the bit flip and the iovec split
 * The envelope carries real addresses so that seeds taken from the kernel
 * rxe captures verify, and the fuzzer starts inside the accepting region.
 *
 * Seeds (fuzz_seeds.c): every RoCE datagram of the rxe captures. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "fuzz.h"
#include "roce/wire/roce_hdr.h"

#define ENVELOPE 14
#define ROCE_PORT 4791

static void envelope(struct sr_icrc_env *env, const uint8_t *d)
{
	memset(env, 0, sizeof(*env));
	env->ipv6 = d[0] & 1;
	env->ipv4_df = d[0] & 2;
	env->ipv4_id = (uint16_t)(d[1] << 8 | d[2]);
	env->sport = (uint16_t)(d[3] << 8 | d[4]);
	env->dport = ROCE_PORT;
	if (env->ipv6) {
		env->saddr.s6_addr[0] = env->daddr.s6_addr[0] = 0xfe;
		env->saddr.s6_addr[1] = env->daddr.s6_addr[1] = 0x80;
	} else {
		env->saddr.s6_addr[10] = env->saddr.s6_addr[11] = 0xff;
		env->daddr.s6_addr[10] = env->daddr.s6_addr[11] = 0xff;
	}
	memcpy(&env->saddr.s6_addr[12], d + 5, 4);
	memcpy(&env->daddr.s6_addr[12], d + 9, 4);
}

static bool same_fields(const struct sr_pkt *a, const struct sr_pkt *b)
{
	return a->opcode == b->opcode && a->mask == b->mask && a->se == b->se && a->mig == b->mig && a->pad == b->pad &&
	       a->tver == b->tver && a->pkey == b->pkey && a->dqpn == b->dqpn && a->ackreq == b->ackreq &&
	       a->psn == b->psn && a->reth_va == b->reth_va && a->reth_rkey == b->reth_rkey &&
	       a->reth_len == b->reth_len && a->aeth_syndrome == b->aeth_syndrome && a->aeth_msn == b->aeth_msn &&
	       a->atm_va == b->atm_va && a->atm_rkey == b->atm_rkey && a->atm_swap_add == b->atm_swap_add &&
	       a->atm_compare == b->atm_compare && a->atmack_orig == b->atmack_orig && a->imm_data == b->imm_data &&
	       a->ieth_rkey == b->ieth_rkey && a->deth_qkey == b->deth_qkey && a->deth_sqpn == b->deth_sqpn &&
	       a->xrc_srqn == b->xrc_srqn && a->paylen == b->paylen && a->hdr_len == b->hdr_len;
}

/* Reserved header bits the builder writes as zero and the parser ignores. */
static void clear_reserved(uint8_t *hdr, uint32_t mask)
{
	hdr[4] = 0;	/* BTH resv8a (FECN/BECN) */
	hdr[8] &= 0x80; /* BTH resv7 */
	if (mask & SR_OP_DETH)
		hdr[SR_BTH_BYTES + 4] = 0;
	if (mask & SR_OP_XRCETH)
		hdr[SR_BTH_BYTES] = 0; /* XRCETH resv8 before the SRQ number */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sr_icrc_env env;
	const uint8_t *in;
	size_t len;
	uint8_t sel;
	struct sr_pkt pkt, back;
	uint8_t hdr[SR_MAX_HDR_BYTES], orig[SR_MAX_HDR_BYTES];
	uint8_t *re;
	uint32_t hl;
	uint16_t id;
	bool df;
	size_t max_len;

	if (size < ENVELOPE)
		return 0;
	envelope(&env, data);
	/* what the 16-bit IP length fields can describe */
	max_len = env.ipv6 ? 0xffff - 8 : 0xffff - 28;
	sel = data[13];
	in = data + ENVELOPE;
	len = size - ENVELOPE;

	/* Any verdict is allowed on arbitrary input, but an IPv4 acceptance
	 * must name an ID/DF under which the ICRC really matches. */
	if (sr_icrc_verify_ipv4_id(&env, in, len, &id, &df)) {
		if (!env.ipv6) {
			struct sr_icrc_env e = env;

			e.ipv4_id = id;
			e.ipv4_df = df;
			REQUIRE(sr_icrc_compute(&e, in, len) == sr_icrc_load(in + len - SR_ICRC_BYTES));
		} else {
			REQUIRE(sr_icrc_compute(&env, in, len) == sr_icrc_load(in + len - SR_ICRC_BYTES));
		}
	}

	if (sr_pkt_parse(&pkt, in, len) != 0)
		return 0;

	REQUIRE(sr_opcode[pkt.opcode].name != NULL);
	REQUIRE(pkt.mask == sr_opcode[pkt.opcode].mask);
	REQUIRE(pkt.hdr_len == sr_opcode[pkt.opcode].hdr_len);
	REQUIRE(pkt.tver == 0 && pkt.pad <= 3);
	REQUIRE((size_t)pkt.hdr_len + pkt.pad + pkt.paylen + SR_ICRC_BYTES == len);
	REQUIRE(pkt.payload == in + pkt.hdr_len);

	/* Build from the parsed fields: the kernel's bytes up to reserved bits. */
	hl = sr_pkt_build_hdr(hdr, &pkt);
	REQUIRE(hl == pkt.hdr_len);
	memcpy(orig, in, hl);
	clear_reserved(orig, pkt.mask);
	REQUIRE(memcmp(orig, hdr, hl) == 0);

	/* Re-assemble, re-sign for this envelope, re-parse. */
	re = malloc(len);
	REQUIRE(re != NULL);
	memcpy(re, hdr, hl);
	memcpy(re + hl, in + hl, len - hl);
	sr_icrc_store(re + len - SR_ICRC_BYTES, sr_icrc_compute(&env, re, len));
	REQUIRE(sr_pkt_parse(&back, re, len) == 0);
	REQUIRE(same_fields(&pkt, &back));
	REQUIRE(sr_icrc_verify(&env, re, len) == (len <= max_len));
	if (!env.ipv6 && len <= max_len) {
		REQUIRE(sr_icrc_verify_ipv4_id(&env, re, len, &id, &df));
		REQUIRE(id == env.ipv4_id && df == env.ipv4_df);
	}

	/* The same ICRC from a three-piece scatter list. */
	{
		size_t covered = len - SR_ICRC_BYTES;
		size_t a = covered ? sel % (covered + 1) : 0;
		size_t b = a + (covered - a) / 2;
		struct iovec iov[3] = {
			{ re, a },
			{ re + a, b - a },
			{ re + b, covered - b },
		};

		REQUIRE(sr_icrc_compute_iov(&env, iov, 3) == sr_icrc_load(re + len - SR_ICRC_BYTES));
	}

	/* One flipped bit outside the variant BTH byte: IPv6 must reject it
	 * (CRC-32 catches every single-bit error); IPv4 may accept it only by
	 * blaming a different ID/DF. */
	if (len <= max_len) {
		size_t bit = ((size_t)sel * 2654435761u + len) % (len * 8);

		if (bit / 8 != 4) {
			re[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			if (env.ipv6)
				REQUIRE(!sr_icrc_verify(&env, re, len));
			else if (sr_icrc_verify_ipv4_id(&env, re, len, &id, &df))
				REQUIRE(id != env.ipv4_id || df != env.ipv4_df);
		}
	}
	free(re);
	return 0;
}
