/* RoCEv2 wire layer: opcode table, header parse/build, RNR timer table,
 * CRC-32/CRC-32C, ICRC -- checked against real Linux kernel rxe traffic
 * (tests/data/wire-samples/roce-kernel-rxe) and against the spec. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <arpa/inet.h>

#include "roce/wire/roce_hdr.h"
#include "pcap.h"
#include "ut.h"

#define ROCE_PORT 4791

/* ------------------------------------------------------------------ */
/* CRC-32 / CRC-32C */

/* Bit-at-a-time reference: slow, obviously right. */
static uint32_t ref_crc_update(uint32_t poly, uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc & 1) ? (crc >> 1) ^ poly : crc >> 1;
	}
	return crc;
}

static void test_crc(void)
{
	static const uint8_t check[] = "123456789";
	static uint8_t buf[70000];
	typedef uint32_t (*upd_fn)(uint32_t, const void *, size_t);
	static const struct {
		const char *name;
		upd_fn fn;
		uint32_t poly, check_value;
	} impl[] = {
		/* The standard check values of CRC-32 and CRC-32C ("123456789"). */
		{ "sr_crc32_update", sr_crc32_update, 0xedb88320u, 0xcbf43926u },
		{ "sr_crc32_update_sw", sr_crc32_update_sw, 0xedb88320u, 0xcbf43926u },
		{ "sr_crc32c_update", sr_crc32c_update, 0x82f63b78u, 0xe3069283u },
		{ "sr_crc32c_update_sw", sr_crc32c_update_sw, 0x82f63b78u, 0xe3069283u },
	};

	/* rxe seeds its ICRC with 0xdebb20e3, "the CRC of 8 bytes of ones
	 * from ~0": the LRH stand-in the pseudo-header starts with. */
	{
		static const uint8_t ones[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

		CHECK(sr_crc32_update(~0u, ones, 8) == 0xdebb20e3u);
	}

	rnd_fill(buf, sizeof(buf));
	for (size_t i = 0; i < sizeof(impl) / sizeof(impl[0]); i++) {
		unsigned bad = 0;

		CHECK(~impl[i].fn(~0u, check, 9) == impl[i].check_value, "%s check value %08x", impl[i].name,
		      ~impl[i].fn(~0u, check, 9));
		CHECK(impl[i].fn(0x12345678u, NULL, 0) == 0x12345678u, "%s empty update", impl[i].name);

		/* Every length and alignment up to a few slices, against the
		 * reference, and the same data fed in two pieces: a plain update
		 * must not care where the split is. */
		for (size_t off = 0; off < 8; off++) {
			for (size_t len = 0; len < 200; len++) {
				uint32_t seed = (uint32_t)rnd();
				uint32_t want = ref_crc_update(impl[i].poly, seed, buf + off, len);
				size_t cut = len ? rnd() % (len + 1) : 0;
				uint32_t one = impl[i].fn(seed, buf + off, len);
				uint32_t two = impl[i].fn(impl[i].fn(seed, buf + off, cut), buf + off + cut, len - cut);

				bad += one != want || two != want;
			}
		}
		CHECK(bad == 0, "%s: %u mismatches against the bitwise reference", impl[i].name, bad);
		CHECK(impl[i].fn(~0u, buf + 3, sizeof(buf) - 3) ==
			      ref_crc_update(impl[i].poly, ~0u, buf + 3, sizeof(buf) - 3),
		      "%s long buffer", impl[i].name);
	}
}

/* The folding path (crc_fold.c) against slice-by-8: every length around
 * its minimum and its 128- and 256-byte blocks, every alignment, random
 * seeds and long buffers, for both polynomials.  Where the CPU cannot
 * fold, says so and checks that it declines.  CTest runs this program
 * three times, with SOFTRDMA_CRC_FOLD unset, =256 and =0, so that a CPU
 * with AVX-512 checks both register widths and the byte-wise path. */
static void test_crc_fold(void)
{
	static uint8_t buf[70000 + 64];
	typedef uint32_t (*upd_fn)(uint32_t, const void *, size_t);
	static const upd_fn sw[2] = { sr_crc32_update_sw, sr_crc32c_update_sw };
	static const upd_fn pub[2] = { sr_crc32_update, sr_crc32c_update };
	uint32_t probe = 1;
	bool can = sr_crc_fold_update(0, &probe, buf, 4096, sr_crc32_update_sw);

	rnd_fill(buf, sizeof(buf));
	const char *env = getenv("SOFTRDMA_CRC_FOLD");

	printf("# CRC folding (VPCLMULQDQ): %d-bit registers (0: none, for want of the CPU or SOFTRDMA_CRC_FOLD=0)\n",
	       sr_crc_fold_bits());
	CHECK(can == (sr_crc_fold_bits() > 0), "sr_crc_fold_bits says whether folding runs");
	CHECK(!env || strcmp(env, "256") || sr_crc_fold_bits() <= 256, "SOFTRDMA_CRC_FOLD=256 keeps to 256 bits");
	CHECK(!sr_crc_fold_update(0, &probe, buf, SR_CRC_FOLD_MIN - 1, sr_crc32_update_sw),
	      "buffers below SR_CRC_FOLD_MIN are left to the byte-wise path");
	for (int w = 0; w < 2; w++) {
		unsigned bad = 0, used = 0;

		for (size_t off = 0; off < 8; off++) {
			for (size_t len = SR_CRC_FOLD_MIN - 8; len < 1200; len++) {
				uint32_t seed = (uint32_t)rnd(), got = seed;

				/* declined (too short, or no folding here): the
				 * byte-wise value, so that only pub is checked */
				if (sr_crc_fold_update(w, &got, buf + off, len, sw[w]))
					used++;
				else
					got = sw[w](seed, buf + off, len);
				bad += got != sw[w](seed, buf + off, len) || pub[w](seed, buf + off, len) != got;
			}
		}
		for (int k = 0; k < 300; k++) {
			size_t off = rnd() % 64, len = rnd() % 70000;
			uint32_t seed = (uint32_t)rnd(), got = seed;

			if (!sr_crc_fold_update(w, &got, buf + off, len, sw[w]))
				got = sw[w](seed, buf + off, len);
			bad += got != sw[w](seed, buf + off, len);
		}
		CHECK(bad == 0, "%s by folding: %u mismatches against slice-by-8", w ? "CRC-32C" : "CRC-32", bad);
		CHECK(!can || used > 0, "%s: the folding path ran (%u buffers)", w ? "CRC-32C" : "CRC-32", used);
	}
}

/* ------------------------------------------------------------------ */
/* The opcode table */

struct op_expect {
	uint8_t opcode;
	uint8_t hdr_len; /* IBTA vol. 1 9.2 layouts, written out by hand */
	uint32_t mask;
};

#define P SR_OP_PAYLOAD
#define Q SR_OP_REQ
#define X SR_OP_XRCETH
static const struct op_expect op_expect[] = {
	/* RC */
	{ 0x00, 12, P | Q | SR_OP_SEND | SR_OP_FIRST | SR_OP_RWR },
	{ 0x01, 12, P | Q | SR_OP_SEND | SR_OP_MIDDLE },
	{ 0x02, 12, P | Q | SR_OP_SEND | SR_OP_LAST | SR_OP_COMP },
	{ 0x03, 16, P | Q | SR_OP_SEND | SR_OP_LAST | SR_OP_COMP | SR_OP_IMMDT },
	{ 0x04, 12, P | Q | SR_OP_SEND | SR_OP_ONLY | SR_OP_RWR | SR_OP_COMP },
	{ 0x05, 16, P | Q | SR_OP_SEND | SR_OP_ONLY | SR_OP_RWR | SR_OP_COMP | SR_OP_IMMDT },
	{ 0x06, 28, P | Q | SR_OP_WRITE | SR_OP_FIRST | SR_OP_RETH },
	{ 0x07, 12, P | Q | SR_OP_WRITE | SR_OP_MIDDLE },
	{ 0x08, 12, P | Q | SR_OP_WRITE | SR_OP_LAST },
	{ 0x09, 16, P | Q | SR_OP_WRITE | SR_OP_LAST | SR_OP_IMMDT | SR_OP_RWR | SR_OP_COMP },
	{ 0x0a, 28, P | Q | SR_OP_WRITE | SR_OP_ONLY | SR_OP_RETH },
	{ 0x0b, 32, P | Q | SR_OP_WRITE | SR_OP_ONLY | SR_OP_RETH | SR_OP_IMMDT | SR_OP_RWR | SR_OP_COMP },
	{ 0x0c, 28, Q | SR_OP_READ | SR_OP_ONLY | SR_OP_RETH },
	{ 0x0d, 16, P | SR_OP_ACK | SR_OP_READ | SR_OP_FIRST | SR_OP_AETH },
	{ 0x0e, 12, P | SR_OP_ACK | SR_OP_READ | SR_OP_MIDDLE },
	{ 0x0f, 16, P | SR_OP_ACK | SR_OP_READ | SR_OP_LAST | SR_OP_AETH },
	{ 0x10, 16, P | SR_OP_ACK | SR_OP_READ | SR_OP_ONLY | SR_OP_AETH },
	{ 0x11, 16, SR_OP_ACK | SR_OP_ONLY | SR_OP_AETH },
	{ 0x12, 24, SR_OP_ACK | SR_OP_ONLY | SR_OP_AETH | SR_OP_ATMACK },
	{ 0x13, 40, Q | SR_OP_ATOMIC | SR_OP_ONLY | SR_OP_ATMETH },
	{ 0x14, 40, Q | SR_OP_ATOMIC | SR_OP_ONLY | SR_OP_ATMETH },
	{ 0x16, 16, P | Q | SR_OP_SEND | SR_OP_LAST | SR_OP_COMP | SR_OP_IETH },
	{ 0x17, 16, P | Q | SR_OP_SEND | SR_OP_ONLY | SR_OP_RWR | SR_OP_COMP | SR_OP_IETH },
	/* UC */
	{ 0x20, 12, P | Q | SR_OP_SEND | SR_OP_FIRST | SR_OP_RWR },
	{ 0x21, 12, P | Q | SR_OP_SEND | SR_OP_MIDDLE },
	{ 0x22, 12, P | Q | SR_OP_SEND | SR_OP_LAST | SR_OP_COMP },
	{ 0x23, 16, P | Q | SR_OP_SEND | SR_OP_LAST | SR_OP_COMP | SR_OP_IMMDT },
	{ 0x24, 12, P | Q | SR_OP_SEND | SR_OP_ONLY | SR_OP_RWR | SR_OP_COMP },
	{ 0x25, 16, P | Q | SR_OP_SEND | SR_OP_ONLY | SR_OP_RWR | SR_OP_COMP | SR_OP_IMMDT },
	{ 0x26, 28, P | Q | SR_OP_WRITE | SR_OP_FIRST | SR_OP_RETH },
	{ 0x27, 12, P | Q | SR_OP_WRITE | SR_OP_MIDDLE },
	{ 0x28, 12, P | Q | SR_OP_WRITE | SR_OP_LAST },
	{ 0x29, 16, P | Q | SR_OP_WRITE | SR_OP_LAST | SR_OP_IMMDT | SR_OP_RWR | SR_OP_COMP },
	{ 0x2a, 28, P | Q | SR_OP_WRITE | SR_OP_ONLY | SR_OP_RETH },
	{ 0x2b, 32, P | Q | SR_OP_WRITE | SR_OP_ONLY | SR_OP_RETH | SR_OP_IMMDT | SR_OP_RWR | SR_OP_COMP },
	/* UD */
	{ 0x64, 20, P | Q | SR_OP_SEND | SR_OP_ONLY | SR_OP_RWR | SR_OP_COMP | SR_OP_DETH },
	{ 0x65, 24, P | Q | SR_OP_SEND | SR_OP_ONLY | SR_OP_RWR | SR_OP_COMP | SR_OP_DETH | SR_OP_IMMDT },
	/* XRC: every request BTH + XRCETH (4) + RC's, responses as RC's */
	{ 0xa0, 16, X | P | Q | SR_OP_SEND | SR_OP_FIRST | SR_OP_RWR },
	{ 0xa1, 16, X | P | Q | SR_OP_SEND | SR_OP_MIDDLE },
	{ 0xa2, 16, X | P | Q | SR_OP_SEND | SR_OP_LAST | SR_OP_COMP },
	{ 0xa3, 20, X | P | Q | SR_OP_SEND | SR_OP_LAST | SR_OP_COMP | SR_OP_IMMDT },
	{ 0xa4, 16, X | P | Q | SR_OP_SEND | SR_OP_ONLY | SR_OP_RWR | SR_OP_COMP },
	{ 0xa5, 20, X | P | Q | SR_OP_SEND | SR_OP_ONLY | SR_OP_RWR | SR_OP_COMP | SR_OP_IMMDT },
	{ 0xa6, 32, X | P | Q | SR_OP_WRITE | SR_OP_FIRST | SR_OP_RETH },
	{ 0xa7, 16, X | P | Q | SR_OP_WRITE | SR_OP_MIDDLE },
	{ 0xa8, 16, X | P | Q | SR_OP_WRITE | SR_OP_LAST },
	{ 0xa9, 20, X | P | Q | SR_OP_WRITE | SR_OP_LAST | SR_OP_IMMDT | SR_OP_RWR | SR_OP_COMP },
	{ 0xaa, 32, X | P | Q | SR_OP_WRITE | SR_OP_ONLY | SR_OP_RETH },
	{ 0xab, 36, X | P | Q | SR_OP_WRITE | SR_OP_ONLY | SR_OP_RETH | SR_OP_IMMDT | SR_OP_RWR | SR_OP_COMP },
	{ 0xac, 32, X | Q | SR_OP_READ | SR_OP_ONLY | SR_OP_RETH },
	{ 0xad, 16, P | SR_OP_ACK | SR_OP_READ | SR_OP_FIRST | SR_OP_AETH },
	{ 0xae, 12, P | SR_OP_ACK | SR_OP_READ | SR_OP_MIDDLE },
	{ 0xaf, 16, P | SR_OP_ACK | SR_OP_READ | SR_OP_LAST | SR_OP_AETH },
	{ 0xb0, 16, P | SR_OP_ACK | SR_OP_READ | SR_OP_ONLY | SR_OP_AETH },
	{ 0xb1, 16, SR_OP_ACK | SR_OP_ONLY | SR_OP_AETH },
	{ 0xb2, 24, SR_OP_ACK | SR_OP_ONLY | SR_OP_AETH | SR_OP_ATMACK },
	{ 0xb3, 44, X | Q | SR_OP_ATOMIC | SR_OP_ONLY | SR_OP_ATMETH },
	{ 0xb4, 44, X | Q | SR_OP_ATOMIC | SR_OP_ONLY | SR_OP_ATMETH },
	{ 0xb6, 20, X | P | Q | SR_OP_SEND | SR_OP_LAST | SR_OP_COMP | SR_OP_IETH },
	{ 0xb7, 20, X | P | Q | SR_OP_SEND | SR_OP_ONLY | SR_OP_RWR | SR_OP_COMP | SR_OP_IETH },
};
#undef P
#undef Q
#undef X

static const struct op_expect *op_lookup(unsigned op)
{
	for (size_t i = 0; i < sizeof(op_expect) / sizeof(op_expect[0]); i++)
		if (op_expect[i].opcode == op)
			return &op_expect[i];
	return NULL;
}

static void test_opcode_table(void)
{
	unsigned known = 0;

	/* The rdma-core constants the table is indexed by. */
	CHECK(IBV_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE == 0x0b);
	CHECK(IBV_OPCODE_UC_SEND_FIRST == 0x20);
	CHECK(IBV_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE == 0x65);
	CHECK(SR_MAX_HDR_BYTES >= 12 + 16 + 4);

	for (unsigned op = 0; op < 256; op++) {
		const struct sr_opcode_info *info = &sr_opcode[op];
		const struct op_expect *e = op_lookup(op);
		uint32_t transport = op < 0x20 ? SR_OP_RC : op < 0x40 ? SR_OP_UC : op < 0xa0 ? SR_OP_UD : SR_OP_XRC;
		const char *tname = op < 0x20 ? "RC " : op < 0x40 ? "UC " : op < 0xa0 ? "UD " : "XRC ";
		uint32_t m;
		unsigned ext;

		if (!e) {
			CHECK(info->name == NULL, "opcode 0x%02x should be unsupported, is %s", op, info->name);
			continue;
		}
		known++;
		CHECK(info->name != NULL, "opcode 0x%02x missing", op);
		if (!info->name)
			continue;
		m = info->mask;
		CHECK(strncmp(info->name, tname, strlen(tname)) == 0, "0x%02x name %s", op, info->name);
		CHECK(info->hdr_len == e->hdr_len, "0x%02x %s hdr_len %u want %u", op, info->name, info->hdr_len,
		      e->hdr_len);
		CHECK(m == (e->mask | transport), "0x%02x %s mask %#x want %#x", op, info->name, m,
		      e->mask | transport);
		ext = SR_BTH_BYTES + (m & SR_OP_DETH ? SR_DETH_BYTES : 0) + (m & SR_OP_RETH ? SR_RETH_BYTES : 0) +
		      (m & SR_OP_ATMETH ? SR_ATMETH_BYTES : 0) + (m & SR_OP_AETH ? SR_AETH_BYTES : 0) +
		      (m & SR_OP_ATMACK ? SR_ATMACK_BYTES : 0) + (m & SR_OP_IMMDT ? SR_IMMDT_BYTES : 0) +
		      (m & SR_OP_IETH ? SR_IETH_BYTES : 0) + (m & SR_OP_XRCETH ? SR_XRCETH_BYTES : 0);
		CHECK(info->hdr_len == ext, "0x%02x %s hdr_len disagrees with mask", op, info->name);
		CHECK(info->hdr_len <= SR_MAX_HDR_BYTES, "0x%02x", op);
		/* Structural rules any consumer of the table relies on. */
		CHECK(!!(m & SR_OP_REQ) + !!(m & SR_OP_ACK) == 1, "0x%02x REQ xor ACK", op);
		CHECK(!!(m & SR_OP_RC) + !!(m & SR_OP_UC) + !!(m & SR_OP_UD) + !!(m & SR_OP_XRC) == 1,
		      "0x%02x transport", op);
		CHECK(!(m & SR_OP_XRCETH) == !((m & SR_OP_XRC) && (m & SR_OP_REQ)), "0x%02x XRCETH on XRC requests",
		      op);
		CHECK(!(m & SR_OP_MIDDLE) || !(m & (SR_OP_FIRST | SR_OP_LAST)), "0x%02x position", op);
		CHECK(m & (SR_OP_FIRST | SR_OP_MIDDLE | SR_OP_LAST), "0x%02x no position", op);
		CHECK(!(m & (SR_OP_RWR | SR_OP_COMP)) || (m & SR_OP_REQ), "0x%02x RWR/COMP on ack", op);
		CHECK(!(m & SR_OP_COMP) || (m & SR_OP_LAST), "0x%02x COMP before last", op);
		CHECK(!(m & SR_OP_RETH) || (m & SR_OP_FIRST), "0x%02x RETH after first", op);
	}
	CHECK(known == sizeof(op_expect) / sizeof(op_expect[0]), "known opcodes %u", known);
}

/* ------------------------------------------------------------------ */
/* RNR timer (IBTA vol. 1 table 45, milliseconds x 100) */

/* The XRCETH's place and layout (IBTA vol. 1 9.3.x: 8 reserved bits,
 * then the 24-bit XRC SRQ number), right after the BTH, before a RETH or
 * AtomicETH; a response of an XRC QP has none. */
static void test_xrceth_layout(void)
{
	uint8_t h[SR_MAX_HDR_BYTES];
	struct sr_pkt pkt, back;

	memset(&pkt, 0, sizeof(pkt));
	pkt.opcode = 0xaa; /* XRC RDMA_WRITE_ONLY */
	pkt.xrc_srqn = 0xab1234;
	pkt.reth_va = 0x1122334455667788ull;
	pkt.reth_rkey = 0x99aabbcc;
	pkt.reth_len = 64;
	CHECK(sr_pkt_build_hdr(h, &pkt) == 32, "XRC RDMA_WRITE_ONLY: 32 header bytes");
	CHECK(h[0] == 0xaa && h[12] == 0 && h[13] == 0xab && h[14] == 0x12 && h[15] == 0x34,
	      "the XRCETH after the BTH: a reserved byte, then the SRQ number");
	CHECK(h[16] == 0x11 && h[23] == 0x88 && h[24] == 0x99 && h[31] == 64, "the RETH after the XRCETH");
	uint8_t wire[32 + 64 + 4] = { 0 };
	memcpy(wire, h, 32);
	CHECK(!sr_pkt_parse(&back, wire, sizeof(wire)) && back.xrc_srqn == 0xab1234 && back.reth_va == pkt.reth_va &&
		      back.paylen == 64,
	      "and parse reads them back");
	memset(&pkt, 0, sizeof(pkt));
	pkt.opcode = 0xb1; /* XRC ACKNOWLEDGE */
	pkt.aeth_syndrome = 0x1f;
	CHECK(sr_pkt_build_hdr(h, &pkt) == 16 && h[12] == 0x1f, "XRC ACKNOWLEDGE: BTH and AETH, no XRCETH");
}

static void test_rnr_timer(void)
{
	static const uint32_t ms_x100[32] = {
		65536, 1,   2,	 3,   4,    6,	  8,	12,   16,   24,	  32,	48,    64,    96,    128,   192,
		256,   384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
	};

	for (unsigned c = 0; c < 32; c++) {
		CHECK(sr_rnr_timer_usec((uint8_t)c) == ms_x100[c] * 10, "code %u: %u us", c,
		      sr_rnr_timer_usec((uint8_t)c));
		/* An RNR NAK syndrome carries the code in its low 5 bits. */
		CHECK(sr_rnr_timer_usec((uint8_t)(SR_AETH_RNR_NAK | c)) == ms_x100[c] * 10, "code %u", c);
	}
	CHECK(sr_rnr_timer_usec(0) == 655360);
	CHECK(sr_rnr_timer_usec(1) == 10);
	CHECK(sr_rnr_timer_usec(31) == 491520);
}

/* ------------------------------------------------------------------ */
/* Parse / build / ICRC on synthetic packets */

static void env_v4(struct sr_icrc_env *env, uint32_t s, uint32_t d, uint16_t sport)
{
	memset(env, 0, sizeof(*env));
	env->saddr.s6_addr[10] = env->saddr.s6_addr[11] = 0xff;
	env->daddr.s6_addr[10] = env->daddr.s6_addr[11] = 0xff;
	s = htonl(s);
	d = htonl(d);
	memcpy(&env->saddr.s6_addr[12], &s, 4);
	memcpy(&env->daddr.s6_addr[12], &d, 4);
	env->sport = sport;
	env->dport = ROCE_PORT;
	env->ipv4_id = 0;
	env->ipv4_df = true;
}

static void env_v6(struct sr_icrc_env *env)
{
	memset(env, 0, sizeof(*env));
	env->ipv6 = true;
	rnd_fill(env->saddr.s6_addr, 16);
	rnd_fill(env->daddr.s6_addr, 16);
	env->sport = 0xc000 | (uint16_t)(rnd() & 0x3fff);
	env->dport = ROCE_PORT;
}

/* Random values for every field, already cut to the width the wire has. */
static void random_pkt(struct sr_pkt *pkt, uint8_t opcode, uint32_t paylen)
{
	memset(pkt, 0, sizeof(*pkt));
	pkt->opcode = opcode;
	pkt->mask = sr_opcode[opcode].mask;
	pkt->se = rnd() & 1;
	pkt->mig = rnd() & 1;
	pkt->pad = (uint8_t)(-paylen & 3);
	pkt->pkey = (uint16_t)rnd();
	pkt->dqpn = (uint32_t)rnd() & SR_QPN_MASK;
	pkt->ackreq = rnd() & 1;
	pkt->psn = (uint32_t)rnd() & SR_PSN_MASK;
	if (pkt->mask & SR_OP_RETH) {
		pkt->reth_va = rnd();
		pkt->reth_rkey = (uint32_t)rnd();
		pkt->reth_len = (uint32_t)rnd();
	}
	if (pkt->mask & SR_OP_AETH) {
		pkt->aeth_syndrome = (uint8_t)rnd();
		pkt->aeth_msn = (uint32_t)rnd() & 0xffffff;
	}
	if (pkt->mask & SR_OP_ATMETH) {
		pkt->atm_va = rnd();
		pkt->atm_rkey = (uint32_t)rnd();
		pkt->atm_swap_add = rnd();
		pkt->atm_compare = rnd();
	}
	if (pkt->mask & SR_OP_ATMACK)
		pkt->atmack_orig = rnd();
	if (pkt->mask & SR_OP_IMMDT)
		pkt->imm_data = (uint32_t)rnd();
	if (pkt->mask & SR_OP_IETH)
		pkt->ieth_rkey = (uint32_t)rnd();
	if (pkt->mask & SR_OP_DETH) {
		pkt->deth_qkey = (uint32_t)rnd();
		pkt->deth_sqpn = (uint32_t)rnd() & SR_QPN_MASK;
	}
	if (pkt->mask & SR_OP_XRCETH)
		pkt->xrc_srqn = (uint32_t)rnd() & SR_QPN_MASK;
	pkt->paylen = paylen;
	pkt->hdr_len = sr_opcode[opcode].hdr_len;
}

/* Field-by-field: struct padding makes memcmp meaningless. */
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

/* hdr + payload + pad + ICRC into out; returns the UDP payload length. */
static size_t build_packet(uint8_t *out, const struct sr_pkt *pkt, const uint8_t *payload,
			   const struct sr_icrc_env *env)
{
	uint32_t h = sr_pkt_build_hdr(out, pkt);
	size_t len;

	memcpy(out + h, payload, pkt->paylen);
	memset(out + h + pkt->paylen, 0, pkt->pad);
	len = h + pkt->paylen + pkt->pad + SR_ICRC_BYTES;
	sr_icrc_store(out + len - SR_ICRC_BYTES, sr_icrc_compute(env, out, len));
	return len;
}

static void test_synthetic_roundtrip(void)
{
	static uint8_t payload[4096], wire[4096 + 64];
	unsigned bad_parse = 0, bad_fields = 0, bad_verify = 0, bad_flip = 0, bad_iov = 0;

	rnd_fill(payload, sizeof(payload));
	for (unsigned op = 0; op < 256; op++) {
		if (!sr_opcode[op].name)
			continue;
		for (unsigned iter = 0; iter < 40; iter++) {
			struct sr_pkt pkt, back;
			struct sr_icrc_env env;
			uint32_t paylen = iter < 8 ? iter : (uint32_t)(rnd() % 4097);
			size_t len;
			bool v6 = iter & 1;

			if (v6)
				env_v6(&env);
			else
				env_v4(&env, (uint32_t)rnd(), (uint32_t)rnd(), (uint16_t)rnd());
			random_pkt(&pkt, (uint8_t)op, paylen);
			len = build_packet(wire, &pkt, payload, &env);

			if (sr_pkt_parse(&back, wire, len) != 0) {
				bad_parse++;
				continue;
			}
			bad_fields += !same_fields(&pkt, &back) || back.payload != wire + back.hdr_len ||
				      memcmp(back.payload, payload, paylen) != 0;
			bad_verify += !sr_icrc_verify(&env, wire, len);

			/* compute_iov over a random scatter of the same bytes,
			 * including empty pieces and a BTH split across pieces. */
			{
				struct iovec iov[8];
				size_t pos = 0, covered = len - SR_ICRC_BYTES;
				int n = 0;

				while (n < 7 && pos < covered) {
					size_t take = rnd() % 3 == 0 ? 0 : rnd() % (covered - pos + 1);

					if (rnd() % 2)
						take = take % 7;
					iov[n].iov_base = wire + pos;
					iov[n].iov_len = take;
					pos += take;
					n++;
				}
				iov[n].iov_base = wire + pos;
				iov[n].iov_len = covered - pos;
				n++;
				bad_iov += sr_icrc_compute_iov(&env, iov, n) !=
					   sr_icrc_load(wire + len - SR_ICRC_BYTES);
			}

			/* IPv6 has no ID to solve for: the full 32-bit check holds, and
			 * CRC-32 detects every single-bit error. */
			if (v6) {
				size_t bit = rnd() % (len * 8);

				if (bit / 8 == 4)
					bit += 8;
				if (bit / 8 < len) {
					wire[bit / 8] ^= (uint8_t)(1u << (bit % 8));
					bad_flip += sr_icrc_verify(&env, wire, len);
					wire[bit / 8] ^= (uint8_t)(1u << (bit % 8));
				}
			}
		}
	}
	CHECK(bad_parse == 0, "%u synthetic packets failed to parse", bad_parse);
	CHECK(bad_fields == 0, "%u synthetic packets parsed to different fields", bad_fields);
	CHECK(bad_verify == 0, "%u synthetic packets failed ICRC verification", bad_verify);
	CHECK(bad_iov == 0, "%u iovec ICRCs differ", bad_iov);
	CHECK(bad_flip == 0, "%u IPv6 single-bit errors accepted", bad_flip);
}

/* The pseudo-header written out a second time, field by field from the
 * spec (annex A17) and rxe, and CRCed bit by bit: an independent check of
 * the masks, the only one for IPv6, which the captures do not cover. */
static uint32_t ref_icrc(const struct sr_icrc_env *env, const uint8_t *pkt, size_t len)
{
	uint8_t m[8 + 40 + 8 + 12];
	size_t n = 0;
	size_t ulen = 8 + len;
	uint32_t crc;

	memset(m, 0xff, 8); /* LRH */
	n = 8;
	if (!env->ipv6) {
		m[n++] = 0x45;
		m[n++] = 0xff; /* TOS */
		m[n++] = (uint8_t)((20 + ulen) >> 8);
		m[n++] = (uint8_t)(20 + ulen);
		m[n++] = (uint8_t)(env->ipv4_id >> 8);
		m[n++] = (uint8_t)env->ipv4_id;
		m[n++] = env->ipv4_df ? 0x40 : 0; /* flags, fragment offset */
		m[n++] = 0;
		m[n++] = 0xff; /* TTL */
		m[n++] = 17;
		m[n++] = 0xff; /* header checksum */
		m[n++] = 0xff;
		memcpy(m + n, &env->saddr.s6_addr[12], 4);
		memcpy(m + n + 4, &env->daddr.s6_addr[12], 4);
		n += 8;
	} else {
		m[n++] = 0x60 | 0xf; /* version, traffic class hi */
		m[n++] = 0xff;	     /* traffic class lo, flow label */
		m[n++] = 0xff;
		m[n++] = 0xff;
		m[n++] = (uint8_t)(ulen >> 8); /* payload length */
		m[n++] = (uint8_t)ulen;
		m[n++] = 17;
		m[n++] = 0xff; /* hop limit */
		memcpy(m + n, &env->saddr, 16);
		memcpy(m + n + 16, &env->daddr, 16);
		n += 32;
	}
	m[n++] = (uint8_t)(env->sport >> 8);
	m[n++] = (uint8_t)env->sport;
	m[n++] = (uint8_t)(env->dport >> 8);
	m[n++] = (uint8_t)env->dport;
	m[n++] = (uint8_t)(ulen >> 8);
	m[n++] = (uint8_t)ulen;
	m[n++] = 0xff; /* UDP checksum */
	m[n++] = 0xff;
	memcpy(m + n, pkt, 12);
	m[n + 4] = 0xff; /* BTH resv8a: FECN, BECN */
	n += 12;
	crc = ref_crc_update(0xedb88320u, ~0u, m, n);
	crc = ref_crc_update(0xedb88320u, crc, pkt + 12, len - 12 - 4);
	return ~crc;
}

static void test_icrc_reference(void)
{
	static uint8_t pkt[1100];
	unsigned bad = 0;

	for (unsigned iter = 0; iter < 400; iter++) {
		struct sr_icrc_env env;
		size_t len = 16 + rnd() % 1000;

		if (iter & 1) {
			env_v6(&env);
		} else {
			env_v4(&env, (uint32_t)rnd(), (uint32_t)rnd(), (uint16_t)rnd());
			env.ipv4_id = (uint16_t)rnd();
			env.ipv4_df = rnd() & 1;
		}
		rnd_fill(pkt, len);
		bad += sr_icrc_compute(&env, pkt, len) != ref_icrc(&env, pkt, len);
	}
	CHECK(bad == 0, "%u ICRCs differ from the field-by-field reference", bad);
}

/* The ID solver against every possible ID and both DF values. */
static void test_ipv4_id_solver(void)
{
	static uint8_t payload[64], wire[256];
	struct sr_icrc_env env, guess;
	struct sr_pkt pkt;
	unsigned bad = 0, bad_fast = 0;
	size_t len;

	rnd_fill(payload, sizeof(payload));
	env_v4(&env, 0xc6120103, 0xc6120102, 0xc123);
	random_pkt(&pkt, IBV_OPCODE_RC_SEND_ONLY, 37);
	guess = env;
	for (uint32_t id = 0; id < 0x10000; id++) {
		for (int df = 0; df < 2; df++) {
			uint16_t got_id = 0xdead;
			bool got_df = !df;

			env.ipv4_id = (uint16_t)id;
			env.ipv4_df = df;
			len = build_packet(wire, &pkt, payload, &env);
			guess.ipv4_id = 0;
			guess.ipv4_df = true;
			if (!sr_icrc_verify_ipv4_id(&guess, wire, len, &got_id, &got_df) || got_id != id ||
			    got_df != df)
				bad++;
			/* A right guess takes the direct path and reports the guess. */
			if (!sr_icrc_verify_ipv4_id(&env, wire, len, &got_id, &got_df) || got_id != id || got_df != df)
				bad_fast++;
		}
	}
	CHECK(bad == 0, "%u of 131072 (ID, DF) pairs not recovered", bad);
	CHECK(bad_fast == 0, "%u right guesses rejected", bad_fast);

	/* Too short to hold BTH + ICRC, or longer than IPv4 can carry. */
	CHECK(!sr_icrc_verify(&env, wire, 15));
	CHECK(!sr_icrc_verify(&env, wire, 0));
	CHECK(!sr_icrc_verify(&env, NULL, 0));
	{
		uint8_t *big = calloc(1, 0x10000);

		CHECK(big && !sr_icrc_verify(&env, big, 0xffff - 28 + 1));
		free(big);
	}
}

static void test_parse_rejects(void)
{
	uint8_t buf[128];
	struct sr_pkt pkt;
	unsigned bad = 0;

	/* Unsupported opcodes (RD, CNP, reserved, vendor) on a buffer that
	 * would be long enough for anything. */
	for (unsigned op = 0; op < 256; op++) {
		memset(buf, 0, sizeof(buf));
		buf[0] = (uint8_t)op;
		buf[2] = buf[3] = 0xff;
		if (!sr_opcode[op].name)
			bad += sr_pkt_parse(&pkt, buf, sizeof(buf)) != -EINVAL;
		else
			bad += sr_pkt_parse(&pkt, buf, sizeof(buf)) != 0;
	}
	CHECK(bad == 0, "%u opcodes with the wrong verdict", bad);

	/* TVer must be 0. */
	bad = 0;
	for (unsigned tver = 0; tver < 16; tver++) {
		memset(buf, 0, sizeof(buf));
		buf[0] = IBV_OPCODE_RC_SEND_ONLY;
		buf[1] = (uint8_t)tver;
		bad += sr_pkt_parse(&pkt, buf, sizeof(buf)) != (tver ? -EINVAL : 0);
	}
	CHECK(bad == 0, "TVer check");

	/* The pad count must fit: BTH + 3 pad + ICRC = 19 bytes. */
	memset(buf, 0, sizeof(buf));
	buf[0] = IBV_OPCODE_RC_SEND_ONLY;
	buf[1] = 3 << 4;
	CHECK(sr_pkt_parse(&pkt, buf, 18) == -EINVAL);
	CHECK(sr_pkt_parse(&pkt, buf, 19) == 0 && pkt.paylen == 0 && pkt.pad == 3);
	CHECK(sr_pkt_parse(&pkt, buf, 23) == 0 && pkt.paylen == 4);
	/* Atomic: BTH + AtomicETH + ICRC = 44. */
	buf[0] = IBV_OPCODE_RC_FETCH_ADD;
	buf[1] = 0;
	CHECK(sr_pkt_parse(&pkt, buf, 43) == -EINVAL);
	CHECK(sr_pkt_parse(&pkt, buf, 44) == 0 && pkt.paylen == 0);
	CHECK(sr_pkt_parse(&pkt, NULL, 0) == -EINVAL);

	/* Random garbage of every small length: no verdict is asserted beyond
	 * consistency, but ASan watches every read. */
	bad = 0;
	for (unsigned iter = 0; iter < 200000; iter++) {
		size_t len = rnd() % 80;
		uint8_t *g;

		rnd_fill(buf, len);
		if (iter & 1)
			buf[0] = (uint8_t)(rnd() % 0x66); /* mostly known opcodes */
		if (len > 1 && (iter & 2))
			buf[1] &= 0xf0; /* TVer 0 */
		g = dup_exact(buf, len);
		if (sr_pkt_parse(&pkt, g, len) == 0) {
			const struct sr_opcode_info *info = &sr_opcode[g[0]];

			bad += !info->name || pkt.hdr_len != info->hdr_len ||
			       pkt.hdr_len + pkt.pad + pkt.paylen + SR_ICRC_BYTES != len ||
			       pkt.payload != g + pkt.hdr_len || pkt.tver != 0;
		}
		free(g);
	}
	CHECK(bad == 0, "%u inconsistent parses of random input", bad);
}

/* ------------------------------------------------------------------ */
/* Kernel rxe captures */

/* Values read with `tshark -r FILE -V` (tshark prints the ICRC as the wire
 * bytes in order, i.e. big-endian). */
struct cap_expect {
	const char *file;
	unsigned frame;
	uint16_t ipv4_id;
	uint16_t sport;
	uint32_t icrc_wire_be;
	struct sr_pkt pkt; /* mask, payload pointer and pad are not compared */
};

static const struct cap_expect cap_expect[] = {
	{ "rc_write.pcap",
	  1,
	  0x2fbe,
	  49593,
	  0x68a8915d,
	  { .opcode = 6,
	    .pkey = 0xffff,
	    .dqpn = 0x15,
	    .psn = 14115890,
	    .reth_va = 0x0000559042461000ull,
	    .reth_rkey = 0x6c2,
	    .reth_len = 2500,
	    .paylen = 1024,
	    .hdr_len = 28 } },
	{ "rc_write.pcap",
	  16,
	  0xa21e,
	  49593,
	  0xc1ed85e7,
	  { .opcode = 17,
	    .pkey = 0xffff,
	    .dqpn = 0x15,
	    .psn = 14115892,
	    .aeth_syndrome = 31,
	    .aeth_msn = 1,
	    .paylen = 0,
	    .hdr_len = 16 } },
	{ "rc_read.pcap",
	  1,
	  0x8f59,
	  49636,
	  0x5d33861e,
	  { .opcode = 12,
	    .pkey = 0xffff,
	    .dqpn = 0x16,
	    .ackreq = true,
	    .psn = 3860937,
	    .reth_va = 0x000055bfbdd57000ull,
	    .reth_rkey = 0x74e,
	    .reth_len = 2500,
	    .paylen = 0,
	    .hdr_len = 28 } },
	{ "rc_read.pcap",
	  6,
	  0x066c,
	  49636,
	  0x5f7ecbf6,
	  { .opcode = 13,
	    .pkey = 0xffff,
	    .dqpn = 0x16,
	    .psn = 3860937,
	    .aeth_syndrome = 31,
	    .aeth_msn = 1,
	    .paylen = 1024,
	    .hdr_len = 16 } },
	{ "rc_read.pcap",
	  7,
	  0x066d,
	  49636,
	  0x4ee9768d,
	  { .opcode = 14, .pkey = 0xffff, .dqpn = 0x16, .psn = 3860938, .paylen = 1024, .hdr_len = 12 } },
	{ "rc_read.pcap",
	  8,
	  0x066e,
	  49636,
	  0x19036d65,
	  { .opcode = 15,
	    .pkey = 0xffff,
	    .dqpn = 0x16,
	    .psn = 3860939,
	    .aeth_syndrome = 31,
	    .aeth_msn = 1,
	    .paylen = 452,
	    .hdr_len = 16 } },
	{ "rc_atomic_cs.pcap",
	  1,
	  0xdbf8,
	  49728,
	  0x30be2362,
	  { .opcode = 19,
	    .pkey = 0xffff,
	    .dqpn = 0x18,
	    .ackreq = true,
	    .psn = 12815232,
	    .atm_va = 0x0000561b80b7e000ull,
	    .atm_rkey = 0x93b,
	    .atm_swap_add = 0,
	    .atm_compare = 0,
	    .paylen = 0,
	    .hdr_len = 40 } },
	{ "rc_atomic_cs.pcap",
	  6,
	  0x7154,
	  49728,
	  0x984ae415,
	  { .opcode = 18,
	    .pkey = 0xffff,
	    .dqpn = 0x18,
	    .psn = 12815232,
	    .aeth_syndrome = 31,
	    .aeth_msn = 1,
	    .atmack_orig = 0x127476cc6565daa8ull,
	    .paylen = 0,
	    .hdr_len = 24 } },
	{ "rc_atomic_fa.pcap",
	  2,
	  0xb23e,
	  49681,
	  0x281be17c,
	  { .opcode = 20,
	    .pkey = 0xffff,
	    .dqpn = 0x17,
	    .ackreq = true,
	    .psn = 16706590,
	    .atm_va = 0x000055b5dcb1b040ull,
	    .atm_rkey = 0x8d3,
	    .atm_swap_add = 1,
	    .atm_compare = 0,
	    .paylen = 0,
	    .hdr_len = 40 } },
	{ "rc_atomic_fa.pcap",
	  7,
	  0x3a15,
	  49681,
	  0x5fbfcd2d,
	  { .opcode = 18,
	    .pkey = 0xffff,
	    .dqpn = 0x17,
	    .psn = 16706590,
	    .aeth_syndrome = 31,
	    .aeth_msn = 2,
	    .atmack_orig = 0x7c126e63f2af28c4ull,
	    .paylen = 0,
	    .hdr_len = 24 } },
	{ "ud_send.pcap",
	  1,
	  0x19d9,
	  59626,
	  0x2405aecd,
	  { .opcode = 100,
	    .pkey = 0xffff,
	    .dqpn = 0x14,
	    .psn = 15896863,
	    .deth_qkey = 0x11111111,
	    .deth_sqpn = 0x14,
	    .paylen = 512,
	    .hdr_len = 20 } },
	{ "udaddy_sidr.pcap",
	  1,
	  0x418b,
	  55410,
	  0x0cf8686d,
	  { .opcode = 100,
	    .pkey = 0xffff,
	    .dqpn = 1,
	    .ackreq = true,
	    .psn = 3,
	    .deth_qkey = SR_GSI_QKEY,
	    .deth_sqpn = 1,
	    .paylen = 256,
	    .hdr_len = 20 } },
	{ "udaddy_sidr.pcap",
	  3,
	  0x418e,
	  64407,
	  0x72d2a5d8,
	  { .opcode = 101,
	    .pkey = 0xffff,
	    .dqpn = 0x1a,
	    .psn = 0,
	    .deth_qkey = 0x01234567,
	    .deth_sqpn = 0x1a,
	    .paylen = 100,
	    .hdr_len = 24 } },
	{ "rc_send.pcap",
	  1,
	  0xd2fd,
	  49476,
	  0x207b0a44,
	  { .opcode = 0, .pkey = 0xffff, .dqpn = 0x12, .psn = 13371030, .paylen = 1024, .hdr_len = 12 } },
	{ "rc_send.pcap",
	  3,
	  0xd2ff,
	  49476,
	  0xaa542279,
	  { .opcode = 2, .pkey = 0xffff, .dqpn = 0x12, .ackreq = true, .psn = 13371032, .paylen = 452, .hdr_len = 12 } },
	{ "rc_send.pcap",
	  4,
	  0x507c,
	  49476,
	  0x3bed0e58,
	  { .opcode = 17,
	    .pkey = 0xffff,
	    .dqpn = 0x12,
	    .psn = 13371032,
	    .aeth_syndrome = 31,
	    .aeth_msn = 1,
	    .paylen = 0,
	    .hdr_len = 16 } },
	{ "rping_cm.pcap",
	  4,
	  0x19ef,
	  55891,
	  0x3cbf795f,
	  { .opcode = 4, .pkey = 0xffff, .dqpn = 0x19, .ackreq = true, .psn = 6673767, .paylen = 16, .hdr_len = 12 } },
	{ "rping_cm.pcap",
	  6,
	  0x86bd,
	  55891,
	  0x99860166,
	  { .opcode = 12,
	    .pkey = 0xffff,
	    .dqpn = 0x19,
	    .ackreq = true,
	    .psn = 11245207,
	    .reth_va = 0x000055bb48c10370ull,
	    .reth_rkey = 0xddc,
	    .reth_len = 64,
	    .paylen = 0,
	    .hdr_len = 28 } },
	{ "rping_cm.pcap",
	  7,
	  0x19f0,
	  55891,
	  0xeed66458,
	  { .opcode = 16,
	    .pkey = 0xffff,
	    .dqpn = 0x19,
	    .psn = 11245207,
	    .aeth_syndrome = 31,
	    .aeth_msn = 1,
	    .paylen = 64,
	    .hdr_len = 16 } },
	{ "rping_cm.pcap",
	  12,
	  0x86c0,
	  55891,
	  0x6613df2a,
	  { .opcode = 10,
	    .pkey = 0xffff,
	    .dqpn = 0x19,
	    .ackreq = true,
	    .psn = 11245209,
	    .reth_va = 0x000055bb48c10550ull,
	    .reth_rkey = 0xcc5,
	    .reth_len = 64,
	    .paylen = 64,
	    .hdr_len = 28 } },
	{ "uc_send.pcap",
	  3,
	  0xee5c,
	  49513,
	  0x3057b72d,
	  { .opcode = 34, .pkey = 0xffff, .dqpn = 0x13, .psn = 3212037, .paylen = 452, .hdr_len = 12 } },
	{ "ucmatose_cm.pcap",
	  11,
	  0x5a76,
	  51206,
	  0x064b9ec1,
	  { .opcode = 17,
	    .pkey = 0xffff,
	    .dqpn = 0x1b,
	    .psn = 6434069,
	    .aeth_syndrome = 31,
	    .aeth_msn = 1,
	    .paylen = 0,
	    .hdr_len = 16 } },
};

#define N_CAP_EXPECT (sizeof(cap_expect) / sizeof(cap_expect[0]))

/* Single-bit errors that an ID change can mimic exactly, so that the ID
 * solver accepts them: offsets in the UDP payload (bit = 1 << b).  They
 * follow from the analysis in icrc.c -- w = x^-(192 + 8*off) * bit mod P
 * happens to touch only ID/DF bits -- and depend on the offset alone,
 * not on the packet length.  Listed up to 64 KiB. */
static const struct {
	uint32_t off;
	uint8_t bit;
} id_blind_spots[] = {
	{ 173, 3 },   { 1834, 6 },  { 26744, 6 }, { 26745, 5 }, { 28451, 2 },
	{ 36245, 6 }, { 36245, 7 }, { 37980, 0 }, { 38066, 0 }, { 43596, 5 },
};

static bool is_blind_spot(size_t off, unsigned bit)
{
	for (size_t i = 0; i < sizeof(id_blind_spots) / sizeof(id_blind_spots[0]); i++)
		if (id_blind_spots[i].off == off && id_blind_spots[i].bit == bit)
			return true;
	return false;
}

struct cap_stats {
	unsigned packets, files;
	unsigned seen_op[256];
	unsigned expect_hit[N_CAP_EXPECT];
};

/* Flip one bit of the packet (or of the ICRC) and ask the verifier; the
 * expected answer is known for every position. */
static unsigned flip_check(const struct sr_icrc_env *guess, uint8_t *pkt, size_t len, size_t byte, unsigned bit,
			   uint16_t real_id, bool real_df, const char *file, unsigned frame)
{
	uint16_t id;
	bool df, ok;
	bool variant = byte == 4; /* BTH resv8a: FECN/BECN, masked out */
	bool blind = byte < len - SR_ICRC_BYTES && is_blind_spot(byte, bit);
	unsigned bad = 0;

	pkt[byte] ^= (uint8_t)(1u << bit);
	ok = sr_icrc_verify_ipv4_id(guess, pkt, len, &id, &df);
	if (variant) {
		if (!ok || id != real_id || df != real_df)
			bad++;
	} else if (blind) {
		/* Accepted, but only by blaming a different ID/DF. */
		if (!ok || (id == real_id && df == real_df))
			bad++;
	} else if (ok) {
		bad++;
	}
	if (bad)
		fprintf(stderr, "  %s frame %u: flip byte %zu bit %u: verify %d (id %#x df %d)\n", file, frame, byte,
			bit, ok, ok ? id : 0, ok ? df : 0);
	pkt[byte] ^= (uint8_t)(1u << bit);
	return bad;
}

static void check_capture_packet(const char *file, const struct pcap_udp *u, struct cap_stats *st, bool exhaustive)
{
	struct sr_icrc_env env, guess;
	struct sr_pkt pkt;
	uint8_t hdr[SR_MAX_HDR_BYTES + 8];
	uint8_t *p = dup_exact(u->payload, u->paylen);
	size_t len = u->paylen;
	uint32_t hl, icrc;
	uint16_t id;
	bool df;
	int rc;

	st->packets++;
	CHECK(u->ipver == 4, "%s frame %u: IPv%d", file, u->frame, u->ipver);

	rc = sr_pkt_parse(&pkt, p, len);
	CHECK(rc == 0, "%s frame %u: parse %d", file, u->frame, rc);
	if (rc) {
		free(p);
		return;
	}
	st->seen_op[pkt.opcode]++;
	CHECK(pkt.tver == 0 && pkt.pkey == SR_DEFAULT_PKEY, "%s frame %u", file, u->frame);
	CHECK(pkt.mask == sr_opcode[pkt.opcode].mask, "%s frame %u", file, u->frame);
	CHECK(pkt.hdr_len == sr_opcode[pkt.opcode].hdr_len && pkt.payload == p + pkt.hdr_len &&
		      pkt.hdr_len + pkt.paylen + pkt.pad + SR_ICRC_BYTES == len,
	      "%s frame %u: lengths", file, u->frame);
	CHECK(pkt.pad == (uint8_t)(-pkt.paylen & 3), "%s frame %u: pad %u for %u bytes", file, u->frame, pkt.pad,
	      pkt.paylen);

	/* Headers rebuilt from the parsed fields must be the kernel's bytes. */
	memset(hdr, 0xa5, sizeof(hdr));
	hl = sr_pkt_build_hdr(hdr, &pkt);
	CHECK(hl == pkt.hdr_len && memcmp(hdr, p, hl) == 0, "%s frame %u: rebuilt header differs", file, u->frame);

	/* The spot checks read off tshark. */
	for (size_t i = 0; i < N_CAP_EXPECT; i++) {
		const struct cap_expect *e = &cap_expect[i];
		struct sr_pkt want;

		if (strcmp(e->file, file) || e->frame != u->frame)
			continue;
		st->expect_hit[i]++;
		want = e->pkt;
		want.mask = pkt.mask;
		want.pad = pkt.pad;
		if (want.opcode == IBV_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE) {
			/* ImmDt 0x0000001a in wire (network) order */
			static const uint8_t imm[4] = { 0, 0, 0, 0x1a };

			memcpy(&want.imm_data, imm, 4);
		}
		CHECK(same_fields(&pkt, &want), "%s frame %u: fields differ from tshark's", file, u->frame);
		CHECK(u->ipv4_id == e->ipv4_id && u->sport == e->sport && u->dport == ROCE_PORT,
		      "%s frame %u: envelope", file, u->frame);
		CHECK(((uint32_t)p[len - 4] << 24 | (uint32_t)p[len - 3] << 16 | (uint32_t)p[len - 2] << 8 |
		       p[len - 1]) == e->icrc_wire_be,
		      "%s frame %u: ICRC bytes", file, u->frame);
		CHECK(sr_icrc_load(p + len - 4) == __builtin_bswap32(e->icrc_wire_be),
		      "%s frame %u: ICRC is stored little-endian", file, u->frame);
	}

	/* ICRC with the real envelope. */
	memset(&env, 0, sizeof(env));
	env.saddr = u->saddr;
	env.daddr = u->daddr;
	env.sport = u->sport;
	env.dport = u->dport;
	env.ipv4_id = u->ipv4_id;
	env.ipv4_df = u->ipv4_df;
	icrc = sr_icrc_compute(&env, p, len);
	CHECK(icrc == sr_icrc_load(p + len - 4), "%s frame %u: ICRC %08x, packet has %08x", file, u->frame, icrc,
	      sr_icrc_load(p + len - 4));
	CHECK(sr_icrc_verify(&env, p, len), "%s frame %u: verify with the real ID", file, u->frame);
	{
		struct iovec iov[3] = {
			{ p, 5 },
			{ p + 5, pkt.hdr_len - 5 },
			{ p + pkt.hdr_len, len - pkt.hdr_len - SR_ICRC_BYTES },
		};

		CHECK(sr_icrc_compute_iov(&env, iov, 3) == icrc, "%s frame %u: iov", file, u->frame);
	}

	/* The receiver's view: no ID.  Guess 0/DF (softrdma's own) and the
	 * solver must find rxe's real, nonzero ID. */
	guess = env;
	guess.ipv4_id = 0;
	guess.ipv4_df = true;
	id = 0;
	df = false;
	CHECK(u->ipv4_id != 0, "%s frame %u: rxe ID is 0, solver not exercised", file, u->frame);
	CHECK(sr_icrc_verify(&guess, p, len), "%s frame %u: verify with ID guess 0", file, u->frame);
	CHECK(sr_icrc_verify_ipv4_id(&guess, p, len, &id, &df) && id == u->ipv4_id && df == u->ipv4_df,
	      "%s frame %u: solved ID %#x DF %d, real %#x DF %d", file, u->frame, id, df, u->ipv4_id, u->ipv4_df);
	guess.ipv4_df = false;
	guess.ipv4_id = (uint16_t)rnd();
	CHECK(sr_icrc_verify_ipv4_id(&guess, p, len, &id, &df) && id == u->ipv4_id && df == u->ipv4_df,
	      "%s frame %u: from a wrong DF guess", file, u->frame);
	guess.ipv4_id = 0;
	guess.ipv4_df = true;

	/* Single-bit errors.  Every header bit and every ICRC bit; payload
	 * bits on a stride (every bit on the exhaustive packets); and the
	 * known blind spot when the packet reaches it. */
	{
		unsigned bad = 0, tried = 0;
		size_t covered = len - SR_ICRC_BYTES;

		for (size_t byte = 0; byte < len; byte++) {
			bool all = exhaustive || byte < pkt.hdr_len || byte >= covered;

			for (unsigned bit = 0; bit < 8; bit++) {
				if (!all && (byte * 8 + bit) % 29 != 0 && !is_blind_spot(byte, bit))
					continue;
				bad += flip_check(&guess, p, len, byte, bit, u->ipv4_id, u->ipv4_df, file, u->frame);
				tried++;
			}
		}
		CHECK(bad == 0, "%s frame %u: %u of %u single-bit flips misjudged", file, u->frame, bad, tried);
	}

	/* Errors in the envelope: addresses and ports. */
	{
		unsigned bad = 0;

		for (unsigned bit = 0; bit < 32; bit++) {
			struct sr_icrc_env e = guess;

			e.saddr.s6_addr[12 + bit / 8] ^= (uint8_t)(1u << (bit % 8));
			bad += sr_icrc_verify(&e, p, len);
			e = guess;
			e.daddr.s6_addr[12 + bit / 8] ^= (uint8_t)(1u << (bit % 8));
			bad += sr_icrc_verify(&e, p, len);
		}
		for (unsigned bit = 0; bit < 16; bit++) {
			struct sr_icrc_env e = guess;

			e.sport ^= (uint16_t)(1u << bit);
			bad += sr_icrc_verify(&e, p, len);
			e = guess;
			e.dport ^= (uint16_t)(1u << bit);
			bad += sr_icrc_verify(&e, p, len);
		}
		CHECK(bad == 0, "%s frame %u: %u envelope errors accepted", file, u->frame, bad);
	}

	/* Every truncation: parse must succeed exactly when the headers,
	 * pad and ICRC still fit, and never read past the cut (exact-size
	 * copies under ASan).  verify is run for the same reason; its verdict
	 * on a truncated packet is not asserted (the solver accepts about one
	 * random packet in 2^15). */
	{
		unsigned bad = 0;
		size_t need = pkt.hdr_len + pkt.pad + SR_ICRC_BYTES;

		for (size_t cut = 0; cut < len; cut++) {
			uint8_t *t = dup_exact(p, cut);
			struct sr_pkt tp;
			int r = sr_pkt_parse(&tp, t, cut);

			if (cut >= need)
				bad += r != 0 || tp.paylen != cut - need || tp.hdr_len != pkt.hdr_len;
			else
				bad += r != -EINVAL;
			(void)sr_icrc_verify(&guess, t, cut);
			free(t);
		}
		CHECK(bad == 0, "%s frame %u: %u truncations misparsed", file, u->frame, bad);
	}
	free(p);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_captures(void)
{
	const char *dir = SR_WIRE_SAMPLES "/roce-kernel-rxe";
	struct cap_stats st;
	char *names[64];
	size_t n = 0;
	DIR *d = opendir(dir);
	struct dirent *de;

	memset(&st, 0, sizeof(st));
	CHECK(d != NULL, "opendir %s: %s", dir, strerror(errno));
	if (!d)
		return;
	while ((de = readdir(d)) && n < 64) {
		size_t l = strlen(de->d_name);

		if (l > 5 &&
		    (!strcmp(de->d_name + l - 5, ".pcap") || (l > 7 && !strcmp(de->d_name + l - 7, ".pcapng"))))
			names[n++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(names[0]), cmp_str);

	for (size_t i = 0; i < n; i++) {
		char path[4096];
		struct pcap_file f;
		struct pcap_udp u;
		unsigned roce = 0, largest_frame = 0;
		size_t largest = 0;
		int rc;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		rc = pcap_open(&f, path);
		CHECK(rc == 0, "%s: %s", path, strerror(-rc));
		if (rc)
			continue;
		st.files++;
		/* First pass: pick the largest RoCE packet to flip exhaustively. */
		while ((rc = pcap_next_udp(&f, &u)) == 1) {
			if (u.dport == ROCE_PORT && u.paylen > largest) {
				largest = u.paylen;
				largest_frame = u.frame;
			}
		}
		CHECK(rc == 0, "%s: %s", names[i], f.error);
		pcap_close(&f);
		if (pcap_open(&f, path))
			continue;
		while ((rc = pcap_next_udp(&f, &u)) == 1) {
			if (u.dport != ROCE_PORT)
				continue;
			roce++;
			check_capture_packet(names[i], &u, &st, u.frame == largest_frame);
		}
		CHECK(rc == 0, "%s: %s", names[i], f.error);
		/* Every frame in these files is RoCE: nothing may be skipped. */
		CHECK(roce == f.frame && roce > 0, "%s: %u RoCE packets of %u frames", names[i], roce, f.frame);
		pcap_close(&f);
		free(names[i]);
	}

	CHECK(st.files == 10, "%u capture files", st.files);
	CHECK(st.packets == 200, "%u RoCE packets in the captures", st.packets);
	for (size_t i = 0; i < N_CAP_EXPECT; i++)
		CHECK(st.expect_hit[i] == 1, "expected packet %s frame %u seen %u times", cap_expect[i].file,
		      cap_expect[i].frame, st.expect_hit[i]);
	{
		/* Opcodes the captures are documented to hold. */
		static const uint8_t want_ops[] = { 0,	1,  2,	4,  6,	7,  8,	10, 12, 13,  14,
						    15, 16, 17, 18, 19, 20, 32, 33, 34, 100, 101 };

		for (size_t i = 0; i < sizeof(want_ops); i++)
			CHECK(st.seen_op[want_ops[i]] > 0, "no %s in the captures", sr_opcode[want_ops[i]].name);
	}
}

/* The blind-spot table above is data; re-derive it so that it cannot
 * drift from the implementation: a flip at a listed offset must be
 * accepted by the solver on a packet long enough to hold it, and the
 * offsets just around it must not. */
static void test_blind_spots(void)
{
	static uint8_t payload[2048], wire[2100];
	struct sr_icrc_env env;
	struct sr_pkt pkt;
	size_t len;
	unsigned bad = 0, checked = 0;

	rnd_fill(payload, sizeof(payload));
	env_v4(&env, 0x0a000001, 0x0a000002, 0xc001);
	random_pkt(&pkt, IBV_OPCODE_RC_SEND_MIDDLE, 2000);
	len = build_packet(wire, &pkt, payload, &env);
	for (size_t off = 12; off < len - SR_ICRC_BYTES; off++) {
		for (unsigned bit = 0; bit < 8; bit++) {
			bool ok;

			if (off == 4)
				continue;
			wire[off] ^= (uint8_t)(1u << bit);
			ok = sr_icrc_verify(&env, wire, len);
			wire[off] ^= (uint8_t)(1u << bit);
			bad += ok != is_blind_spot(off, bit);
			checked++;
		}
	}
	CHECK(bad == 0, "%u of %u single-bit flips in a 2 KB packet disagree with the table", bad, checked);
}

int main(void)
{
	test_crc();
	test_crc_fold();
	test_opcode_table();
	test_xrceth_layout();
	test_rnr_timer();
	test_parse_rejects();
	test_synthetic_roundtrip();
	test_icrc_reference();
	test_ipv4_id_solver();
	test_blind_spots();
	test_captures();

	return ut_end("test_roce_wire");
}
