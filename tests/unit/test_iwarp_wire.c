/* iWARP wire layer: MPA Request/Reply frames (RFC 5044, RFC 6581), FPDU
 * framing and CRC32c, DDP/RDMAP headers (RFC 5041, RFC 5040, RFC 7306)
 * -- checked against real Linux kernel siw traffic
 * (tests/data/wire-samples/iwarp-kernel-siw, TCP streams reassembled),
 * against FPDUs whose CRCs Wireshark's iwarp_mpa dissector calls good,
 * and against the specs. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iwarp/wire/iwarp_wire.h"
#include "pcap.h"
#include "ut.h"

static size_t unhex(const char *s, uint8_t *out, size_t cap)
{
	size_t n = 0;

	while (s[0] && s[1] && n < cap) {
		unsigned v;

		sscanf(s, "%2x", &v);
		out[n++] = (uint8_t)v;
		s += 2;
	}
	return n;
}

/* Reassemble an FPDU from its parsed header and payload: the 2-byte
 * ULPDU length, our encoding of the header, the payload, zero pad and the
 * CRC (computed, or 0 when CRC is off).  Returns its length. */
static size_t build_fpdu(uint8_t *out, struct sr_iw_hdr *h, const uint8_t *pay, size_t paylen, bool crc)
{
	uint32_t hl = sr_iw_hdr_build(out + 2, h);
	uint32_t ulen = hl + (uint32_t)paylen, pad = sr_mpa_pad(ulen);

	out[0] = (uint8_t)(ulen >> 8);
	out[1] = (uint8_t)ulen;
	if (paylen)
		memcpy(out + 2 + hl, pay, paylen);
	memset(out + 2 + ulen, 0, pad);
	{
		struct iovec iov = { out, 2 + ulen + pad };

		sr_mpa_crc_store(out + 2 + ulen + pad, crc ? sr_mpa_crc_iov(&iov, 1) : 0);
	}
	return sr_mpa_fpdu_len(ulen);
}

/* ------------------------------------------------------------------ */
/* CRC32c and FPDUs Wireshark verified */

/* FPDUs with CRC32c that `tshark -V` reports as "Good CRC32" (generated
 * for this test, then checked with Wireshark 3.x's iwarp_mpa): a Send with
 * one pad byte, a tagged Write, a Read Request, a Terminate (DDP tagged
 * base/bounds, the tagged header copied), a zero-length Send with SE and
 * Invalidate. */
static const struct {
	const char *hex;
	uint8_t opcode;
	uint32_t paylen;
} good_crc[] = {
	{ "001f41430000000000000000000000010000000068656c6c6f20776f726c642121000000a7dc055c", SR_RDMAP_SEND, 13 },
	{ "0013c1401234567800007f00000010006162636465000000d09d2e8f", SR_RDMAP_WRITE, 5 },
	{ "002e4141000000000000000100000001000000000000110000000000000020000000100000002200000000000000"
	  "3000da6c2eb6",
	  SR_RDMAP_READ_REQ, 0 },
	{ "00264147000000000000000200000001000000001101c0000013c1401234567800007f0000001000a9504133",
	  SR_RDMAP_TERMINATE, 0 },
	{ "00124146abcdef0100000000000000020000000098e6879c", SR_RDMAP_SEND_SE_INV, 0 },
};

static void test_crc(void)
{
	static const uint8_t check[] = "123456789";
	uint8_t buf[256], out[256];

	/* The CRC-32C check value, and the FPDU CRC is stored little-endian. */
	CHECK(~sr_mpa_crc_update(~0u, check, 9) == 0xe3069283u);
	sr_mpa_crc_store(buf, 0x11223344u);
	CHECK(buf[0] == 0x44 && buf[3] == 0x11 && sr_mpa_crc_load(buf) == 0x11223344u);

	for (size_t i = 0; i < sizeof(good_crc) / sizeof(good_crc[0]); i++) {
		size_t len = unhex(good_crc[i].hex, buf, sizeof(buf));
		uint8_t *x = dup_exact(buf, len);
		struct sr_mpa_fpdu f;
		struct sr_iw_hdr h;
		int r = sr_mpa_fpdu_split(&f, x, len), hl;

		CHECK(r == (int)len, "vector %zu: split %d of %zu", i, r, len);
		if (r != (int)len) {
			free(x);
			continue;
		}
		CHECK(f.crc == f.crc_calc, "vector %zu: crc %08x computed %08x", i, f.crc, f.crc_calc);
		CHECK(!f.pad_nonzero);
		/* every shorter prefix is incomplete, never misread */
		for (size_t k = 0; k < len; k++) {
			uint8_t *y = dup_exact(x, k);
			struct sr_mpa_fpdu g;

			CHECK(sr_mpa_fpdu_split(&g, y, k) == -EAGAIN, "vector %zu prefix %zu", i, k);
			free(y);
		}
		hl = sr_iw_hdr_parse(&h, f.ulpdu, f.ulpdu_len, f.ulpdu_len);
		CHECK(hl > 0 && h.opcode == good_crc[i].opcode, "vector %zu: parse %d op %u", i, hl, h.opcode);
		if (hl > 0) {
			CHECK((uint32_t)hl + good_crc[i].paylen == f.ulpdu_len, "vector %zu: hdr %d", i, hl);
			CHECK(build_fpdu(out, &h, f.ulpdu + hl, f.ulpdu_len - (size_t)hl, true) == len &&
				      !memcmp(out, x, len),
			      "vector %zu does not re-encode byte-exact", i);
		}
		/* any single flipped bit is caught by the CRC */
		{
			unsigned missed = 0;

			for (size_t off = 0; off < len - 4; off++) {
				for (unsigned bit = 0; bit < 8; bit++) {
					struct sr_mpa_fpdu g;

					if (off < 2)
						continue; /* the length moves the CRC itself */
					x[off] ^= (uint8_t)(1u << bit);
					if (sr_mpa_fpdu_split(&g, x, len) == (int)len && g.crc == g.crc_calc)
						missed++;
					x[off] ^= (uint8_t)(1u << bit);
				}
			}
			CHECK(missed == 0, "vector %zu: %u bit flips pass the CRC", i, missed);
		}
		free(x);
	}
	{
		/* a few details of the vectors, read as Wireshark reads them */
		size_t len = unhex(good_crc[3].hex, buf, sizeof(buf));
		struct sr_iw_hdr h;

		CHECK(sr_iw_hdr_parse(&h, buf + 2, len - 6, len - 6) == 38);
		CHECK(h.qn == SR_DDP_QN_TERMINATE && h.msn == 1 && h.mo == 0 && h.last && !h.tagged);
		CHECK(h.term.layer == SR_TERM_LAYER_DDP && h.term.etype == SR_TERM_DDP_TAGGED &&
		      h.term.ecode == SR_TERM_DDP_T_BASE_BOUNDS);
		CHECK(h.term.hdrct == (SR_TERM_HDRCT_M | SR_TERM_HDRCT_D) && h.term.ddp_seg_len == 19 &&
		      h.term.ddp_hdr_len == 14 && h.term.ddp_hdr[0] == 0xc1);
		len = unhex(good_crc[4].hex, buf, sizeof(buf));
		CHECK(sr_iw_hdr_parse(&h, buf + 2, 18, 18) == 18 && h.rsvdulp == 0xabcdef01 && h.msn == 2);
		CHECK(sr_rdmap_op[h.opcode].inval && sr_rdmap_op[h.opcode].se);
	}
}

/* ------------------------------------------------------------------ */
/* MPA Request / Reply frames */

static void test_mpa_rr(void)
{
	uint8_t buf[600], pd[SR_MPA_MAX_PD + 1];
	struct sr_mpa_rr rr, back;
	int n;

	for (size_t i = 0; i < sizeof(pd); i++)
		pd[i] = (uint8_t)rnd();

	/* revision 1, no private data */
	memset(&rr, 0, sizeof(rr));
	rr.rev = 1;
	rr.crc = true;
	n = sr_mpa_rr_build(buf, sizeof(buf), &rr);
	CHECK(n == 20 && !memcmp(buf, "MPA ID Req Frame", 16) && buf[16] == 0x40 && buf[17] == 1 && buf[18] == 0 &&
	      buf[19] == 0);
	CHECK(sr_mpa_rr_parse(&back, buf, (size_t)n) == 20 && !back.reply && back.crc && !back.markers &&
	      !back.enhanced && back.pd_len == 0 && back.rev == 1);
	CHECK(sr_mpa_rr_rtr(&back) == SR_MPA_RTR_NONE);

	/* revision 2 reply: enhanced block, peer-to-peer with a Read RTR,
	 * private data after it */
	memset(&rr, 0, sizeof(rr));
	rr.reply = true;
	rr.rev = 2;
	sr_mpa_rr_set_v2(&rr, 16, 7, true, 1u << SR_MPA_RTR_READ);
	rr.pd = pd;
	rr.pd_len = 56;
	n = sr_mpa_rr_build(buf, sizeof(buf), &rr);
	CHECK(n == 20 + 4 + 56);
	CHECK(!memcmp(buf, "MPA ID Rep Frame", 16) && buf[16] == 0x10 && buf[17] == 2);
	CHECK(buf[18] == 0 && buf[19] == 60 && buf[20] == 0x80 && buf[21] == 16 && buf[22] == 0x40 && buf[23] == 7);
	CHECK(sr_mpa_rr_frame_len(buf, 20) == 80 && sr_mpa_rr_frame_len(buf, 19) == 0);
	CHECK(sr_mpa_rr_parse(&back, buf, (size_t)n) == n);
	CHECK(back.reply && back.enhanced && sr_mpa_ird(&back) == 16 && sr_mpa_ord(&back) == 7 && back.pd_len == 56 &&
	      back.pd == buf + 24 && !memcmp(back.pd, pd, 56));
	CHECK(sr_mpa_rr_rtr(&back) == SR_MPA_RTR_READ);
	for (int k = 0; k < n; k++) {
		uint8_t *x = dup_exact(buf, (size_t)k);

		CHECK(sr_mpa_rr_parse(&back, x, (size_t)k) == -EAGAIN, "prefix %d", k);
		free(x);
	}
	/* each RTR kind, and what a Request offering several decodes to */
	sr_mpa_rr_set_v2(&rr, 1, 1, true, 1u << SR_MPA_RTR_WRITE);
	CHECK(sr_mpa_rr_rtr(&rr) == SR_MPA_RTR_WRITE && rr.ord_word == 0x8001 && rr.ird_word == 0x8001);
	sr_mpa_rr_set_v2(&rr, 1, 1, true, 1u << SR_MPA_RTR_SEND);
	CHECK(sr_mpa_rr_rtr(&rr) == SR_MPA_RTR_SEND && rr.ird_word == 0xc001 && rr.ord_word == 1);
	sr_mpa_rr_set_v2(&rr, 0x7fff, 0x4000, false, 7);
	CHECK(rr.ird_word == 0x3fff && rr.ord_word == 0x3fff && sr_mpa_rr_rtr(&rr) == SR_MPA_RTR_NONE);

	/* limits and damage */
	rr.enhanced = false;
	rr.pd_len = SR_MPA_MAX_PD;
	CHECK(sr_mpa_rr_build(buf, sizeof(buf), &rr) == 20 + SR_MPA_MAX_PD);
	CHECK(sr_mpa_rr_build(buf, 100, &rr) == -ENOSPC);
	rr.pd_len = SR_MPA_MAX_PD + 1;
	CHECK(sr_mpa_rr_build(buf, sizeof(buf), &rr) == -EMSGSIZE);
	rr.enhanced = true;
	rr.pd_len = SR_MPA_MAX_PD - 3;
	CHECK(sr_mpa_rr_build(buf, sizeof(buf), &rr) == -EMSGSIZE);
	memcpy(buf, "MPA ID Req Frame\x10\x02\x02\x01", 20);
	CHECK(sr_mpa_rr_parse(&back, buf, 20 + 513) == -EMSGSIZE);
	memcpy(buf, "MPA ID Req Frame\x10\x02\x00\x03", 20);
	CHECK(sr_mpa_rr_parse(&back, buf, 23) == -EINVAL);
	memcpy(buf, "MPA ID Req Frame\x10\x01\x00\x03", 20); /* rev 1: the flag means nothing */
	CHECK(sr_mpa_rr_parse(&back, buf, 23) == 23 && !back.enhanced && back.res == 0x10 && back.pd_len == 3);
	memcpy(buf, "MPA ID Rex Frame\x00\x01\x00\x00", 20);
	CHECK(sr_mpa_rr_parse(&back, buf, 20) == -EPROTO);
	CHECK(sr_mpa_rr_parse(&back, (const uint8_t *)"GET /", 5) == -EPROTO);
	CHECK(sr_mpa_rr_parse(&back, (const uint8_t *)"MPA I", 5) == -EAGAIN);
	/* a reject keeps its flags and reserved bits */
	memcpy(buf, "MPA ID Rep Frame\xe7\x02\x00\x04\x00\x00\x00\x00", 24);
	CHECK(sr_mpa_rr_parse(&back, buf, 24) == 24 && back.reject && back.markers && back.crc && back.res == 0x07 &&
	      !back.enhanced);
	{
		uint8_t again[64];

		CHECK(sr_mpa_rr_build(again, sizeof(again), &back) == 24 && !memcmp(again, buf, 24));
	}
}

/* ------------------------------------------------------------------ */
/* headers: table, round trips, rejects */

static void test_opcode_table(void)
{
	for (unsigned op = 0; op < SR_RDMAP_NOPS; op++) {
		const struct sr_rdmap_opinfo *oi = &sr_rdmap_op[op];

		CHECK(oi->name != NULL, "opcode %u", op);
		CHECK(oi->hdr_len == (oi->tagged ? 14 : 18) + (op == SR_RDMAP_READ_REQ ? 28 : 0) +
					     (op == SR_RDMAP_TERMINATE ? 4 : 0) + (op == SR_RDMAP_ATOMIC_REQ ? 52 : 0) +
					     (op == SR_RDMAP_ATOMIC_RESP ? 12 : 0),
		      "opcode %u hdr_len", op);
		CHECK(oi->tagged == (op == SR_RDMAP_WRITE || op == SR_RDMAP_READ_RESP), "opcode %u", op);
	}
	CHECK(sr_rdmap_op[SR_RDMAP_READ_REQ].qn == 1 && sr_rdmap_op[SR_RDMAP_TERMINATE].qn == 2 &&
	      sr_rdmap_op[SR_RDMAP_SEND].qn == 0 && sr_rdmap_op[SR_RDMAP_IMM].qn == 0 &&
	      sr_rdmap_op[SR_RDMAP_ATOMIC_REQ].qn == 3);
	CHECK(sr_mpa_pad(0) == 2 && sr_mpa_pad(1) == 1 && sr_mpa_pad(2) == 0 && sr_mpa_pad(3) == 3 &&
	      sr_mpa_pad(14) == 0 && sr_mpa_pad(34) == 0 && sr_mpa_pad(20) == 2);
	CHECK(sr_mpa_fpdu_len(1442) == 1448 && sr_mpa_fpdu_len(158) == 164 && sr_mpa_fpdu_len(20) == 28);
}

static void random_hdr(struct sr_iw_hdr *h, uint8_t op)
{
	sr_iw_hdr_init(h, op, rnd() & 1);
	if (h->tagged) {
		h->stag = (uint32_t)rnd();
		h->to = rnd();
	} else {
		h->rsvdulp = sr_rdmap_op[op].inval ? (uint32_t)rnd() : 0;
		h->msn = (uint32_t)rnd();
		h->mo = (uint32_t)rnd();
	}
	switch (op) {
	case SR_RDMAP_READ_REQ:
		h->rreq.sink_stag = (uint32_t)rnd();
		h->rreq.sink_to = rnd();
		h->rreq.size = (uint32_t)rnd();
		h->rreq.src_stag = (uint32_t)rnd();
		h->rreq.src_to = rnd();
		break;
	case SR_RDMAP_ATOMIC_REQ:
		h->areq.op_word = rnd() & 1 ? SR_ATOMIC_CMP_SWAP : SR_ATOMIC_FETCH_ADD;
		h->areq.req_id = (uint32_t)rnd();
		h->areq.stag = (uint32_t)rnd();
		h->areq.to = rnd();
		h->areq.add_swap = rnd();
		h->areq.add_swap_mask = rnd();
		h->areq.cmp = rnd();
		h->areq.cmp_mask = rnd();
		break;
	case SR_RDMAP_ATOMIC_RESP:
		h->aresp.req_id = (uint32_t)rnd();
		h->aresp.orig = rnd();
		break;
	case SR_RDMAP_TERMINATE: {
		uint8_t bad[SR_IW_MAX_HDR];
		struct sr_iw_hdr b;

		random_hdr(&b, rnd() & 1 ? SR_RDMAP_READ_REQ : SR_RDMAP_WRITE);
		sr_iw_hdr_build(bad, &b);
		sr_iw_term_fill(h, (uint8_t)(rnd() % 3), (uint8_t)(rnd() & 3), (uint8_t)rnd(), bad, b.hdr_len,
				(uint32_t)rnd() & 0xffff);
		break;
	}
	default:
		break;
	}
}

static void test_roundtrip(void)
{
	uint8_t wire[SR_IW_MAX_HDR + 8];
	unsigned bad = 0, bad_prefix = 0;

	for (int iter = 0; iter < 4000; iter++) {
		uint8_t op = (uint8_t)(rnd() % SR_RDMAP_NOPS);
		struct sr_iw_hdr h, back;
		uint32_t hl;
		uint8_t again[SR_IW_MAX_HDR];

		random_hdr(&h, op);
		hl = sr_iw_hdr_build(wire, &h);
		if (op != SR_RDMAP_TERMINATE && hl != sr_rdmap_op[op].hdr_len)
			bad++;
		if (sr_iw_hdr_need(wire, hl + 100) != (op == SR_RDMAP_TERMINATE ? SR_IW_MAX_HDR : hl) ||
		    sr_iw_hdr_need(wire, hl) != hl)
			bad++;
		{
			uint8_t *x = dup_exact(wire, hl);

			if (sr_iw_hdr_parse(&back, x, hl, hl) != (int)hl)
				bad++;
			free(x);
		}
		back.hdr_len = 0;
		if (sr_iw_hdr_build(again, &back) != hl || memcmp(again, wire, hl))
			bad++;
		if (back.opcode != op || back.tagged != h.tagged || back.last != h.last || back.stag != h.stag ||
		    back.to != h.to || back.qn != h.qn || back.msn != h.msn || back.mo != h.mo ||
		    back.rsvdulp != h.rsvdulp)
			bad++;
		if (op == SR_RDMAP_READ_REQ && memcmp(&back.rreq, &h.rreq, sizeof(h.rreq)))
			bad++;
		if (op == SR_RDMAP_ATOMIC_REQ && memcmp(&back.areq, &h.areq, sizeof(h.areq)))
			bad++;
		if (op == SR_RDMAP_ATOMIC_RESP &&
		    (back.aresp.req_id != h.aresp.req_id || back.aresp.orig != h.aresp.orig))
			bad++;
		if (op == SR_RDMAP_TERMINATE &&
		    (back.term.layer != h.term.layer || back.term.etype != h.term.etype ||
		     back.term.ecode != h.term.ecode || back.term.hdrct != h.term.hdrct ||
		     back.term.ddp_seg_len != h.term.ddp_seg_len || back.term.ddp_hdr_len != h.term.ddp_hdr_len ||
		     memcmp(back.term.ddp_hdr, h.term.ddp_hdr, h.term.ddp_hdr_len) ||
		     ((h.term.hdrct & SR_TERM_HDRCT_R) && memcmp(back.term.rdma_hdr, h.term.rdma_hdr, 28))))
			bad++;
		/* prefixes: incomplete, never misparsed, never read past */
		for (uint32_t k = 0; k < hl; k++) {
			uint8_t *x = dup_exact(wire, k);
			int r = sr_iw_hdr_parse(&back, x, k, hl);

			if (r != SR_IW_EAGAIN)
				bad_prefix++;
			/* and a ULPDU that really is that short is "short" */
			if (k >= 2) {
				r = sr_iw_hdr_parse(&back, x, k, k);
				if (r != SR_IW_ESHORT && r != SR_IW_ETERM)
					bad_prefix++;
			}
			free(x);
		}
	}
	CHECK(bad == 0, "%u header round-trip mismatches", bad);
	CHECK(bad_prefix == 0, "%u truncated headers misparsed", bad_prefix);
}

static void test_rejects(void)
{
	uint8_t b[64];
	struct sr_iw_hdr h;

	memset(b, 0, sizeof(b));
	b[0] = 0x41;
	b[1] = 0x43;
	CHECK(sr_iw_hdr_parse(&h, b, 18, 18) == 18 && h.opcode == SR_RDMAP_SEND);
	b[0] = 0x42; /* DDP version 2 */
	CHECK(sr_iw_hdr_parse(&h, b, 18, 18) == SR_IW_EDDP_VERSION);
	CHECK(sr_iw_hdr_need(b, 18) == 0);
	b[0] = 0x40; /* DDP version 0 (the pre-RFC draft) */
	CHECK(sr_iw_hdr_parse(&h, b, 18, 18) == SR_IW_EDDP_VERSION);
	b[0] = 0x41;
	b[1] = 0x03; /* RDMAP version 0 */
	CHECK(sr_iw_hdr_parse(&h, b, 18, 18) == SR_IW_ERDMAP_VERSION);
	for (unsigned op = SR_RDMAP_NOPS; op < 16; op++) {
		b[1] = (uint8_t)(0x40 | op);
		CHECK(sr_iw_hdr_parse(&h, b, 18, 18) == SR_IW_EOPCODE, "opcode %u", op);
		CHECK(sr_iw_hdr_need(b, 18) == 0);
	}
	b[1] = 0x40; /* Write without the tagged flag */
	CHECK(sr_iw_hdr_parse(&h, b, 18, 18) == SR_IW_EOPCODE);
	b[0] = 0xc1;
	b[1] = 0x43; /* tagged Send */
	CHECK(sr_iw_hdr_parse(&h, b, 18, 18) == SR_IW_EOPCODE);
	b[1] = 0x40;
	CHECK(sr_iw_hdr_parse(&h, b, 14, 14) == 14 && h.tagged && h.last);
	CHECK(sr_iw_hdr_parse(&h, b, 13, 13) == SR_IW_ESHORT);
	CHECK(sr_iw_hdr_parse(&h, b, 1, 1) == SR_IW_ESHORT);
	CHECK(sr_iw_hdr_parse(&h, b, 0, 0) == SR_IW_ESHORT);
	CHECK(sr_iw_hdr_parse(&h, b, 13, 14) == SR_IW_EAGAIN);
	/* reserved bits survive a round trip */
	b[0] = 0xc1 | 0x3c;
	b[1] = 0x40 | 0x30;
	CHECK(sr_iw_hdr_parse(&h, b, 14, 14) == 14 && h.ddp_rsvd == 0x3c && h.rdmap_rsvd == 0x30);
	{
		uint8_t out[SR_IW_MAX_HDR];

		CHECK(sr_iw_hdr_build(out, &h) == 14 && !memcmp(out, b, 14));
	}
	/* a Terminate whose header-control bits claim more than it carries */
	memset(b, 0, sizeof(b));
	b[0] = 0x41;
	b[1] = 0x47;
	b[9] = 2;
	b[18] = 0x11;
	b[20] = 0xe0; /* M, D, R */
	CHECK(sr_iw_hdr_parse(&h, b, 22, 22) == SR_IW_ETERM);
	CHECK(sr_iw_hdr_parse(&h, b, 26, 26) == SR_IW_ETERM);
	CHECK(sr_iw_hdr_parse(&h, b, 24, 26) == SR_IW_EAGAIN);
	b[20] = 0x00;
	CHECK(sr_iw_hdr_parse(&h, b, 22, 22) == 22 && h.term.layer == 1 && h.term.etype == 1 && h.term.hdrct == 0);
	CHECK(sr_iw_hdr_need(b, 22) == 22 && sr_iw_hdr_need(b, 1000) == SR_IW_MAX_HDR);
}

/* Terminate contents chosen the way RFC 5040 4.8 and siw choose them. */
static void test_term_fill(void)
{
	uint8_t bad[SR_IW_MAX_HDR], out[SR_IW_MAX_HDR];
	struct sr_iw_hdr b, t, back;
	uint32_t blen, tl;

	sr_iw_hdr_init(&b, SR_RDMAP_READ_REQ, true);
	b.msn = 5;
	b.rreq.size = 4096;
	b.rreq.src_stag = 0xdead00;
	blen = sr_iw_hdr_build(bad, &b);

	sr_iw_term_fill(&t, SR_TERM_LAYER_RDMAP, SR_TERM_RDMAP_PROTECTION, SR_TERM_RDMAP_INV_STAG, bad, blen, 46);
	tl = sr_iw_hdr_build(out, &t);
	CHECK(tl == 18 + 4 + 2 + 18 + 28 && t.qn == 2 && t.msn == 1 && t.mo == 0 && t.last);
	CHECK(t.term.hdrct == (SR_TERM_HDRCT_M | SR_TERM_HDRCT_D | SR_TERM_HDRCT_R) && t.term.ddp_seg_len == 46);
	CHECK(!memcmp(out + 24, bad, 46), "copied headers");
	CHECK(sr_iw_hdr_parse(&back, out, tl, tl) == (int)tl && back.term.ddp_hdr_len == 18 &&
	      !memcmp(back.term.rdma_hdr, bad + 18, 28));
	/* the whole Terminate FPDU needs no pad */
	CHECK(sr_mpa_pad(tl) == 0);

	sr_iw_term_fill(&t, SR_TERM_LAYER_DDP, SR_TERM_DDP_UNTAGGED, SR_TERM_DDP_U_NO_BUF, bad, blen, 46);
	CHECK(sr_iw_hdr_build(out, &t) == 18 + 4 + 2 + 18 && t.term.hdrct == (SR_TERM_HDRCT_M | SR_TERM_HDRCT_D));
	sr_iw_term_fill(&t, SR_TERM_LAYER_DDP, SR_TERM_DDP_UNTAGGED, SR_TERM_DDP_U_VERSION, bad, blen, 46);
	CHECK(sr_iw_hdr_build(out, &t) == 22 && t.term.hdrct == 0);
	sr_iw_term_fill(&t, SR_TERM_LAYER_LLP, SR_TERM_LLP_MPA, SR_TERM_MPA_CRC, bad, blen, 46);
	CHECK(sr_iw_hdr_build(out, &t) == 22 && t.term.hdrct == 0 && out[18] == 0x20 && out[19] == 0x02);
	sr_iw_term_fill(&t, SR_TERM_LAYER_RDMAP, SR_TERM_RDMAP_OPERATION, SR_TERM_RDMAP_OPCODE, bad, blen, 46);
	CHECK(sr_iw_hdr_build(out, &t) == 22 && t.term.hdrct == 0);
	sr_iw_term_fill(&t, SR_TERM_LAYER_RDMAP, SR_TERM_RDMAP_OPERATION, SR_TERM_RDMAP_CATASTROPHIC_STREAM, bad, blen,
			46);
	CHECK(sr_iw_hdr_build(out, &t) == 18 + 4 + 2 + 18 + 28);

	sr_iw_hdr_init(&b, SR_RDMAP_WRITE, false);
	b.stag = 0x1234;
	b.to = 0x5678;
	blen = sr_iw_hdr_build(bad, &b);
	sr_iw_term_fill(&t, SR_TERM_LAYER_DDP, SR_TERM_DDP_TAGGED, SR_TERM_DDP_T_BASE_BOUNDS, bad, blen, 1000);
	tl = sr_iw_hdr_build(out, &t);
	CHECK(tl == 18 + 4 + 2 + 14 && !memcmp(out + 24, bad, 14) && out[22] == 0x03 && out[23] == 0xe8);
	CHECK(sr_iw_hdr_parse(&back, out, tl, tl) == (int)tl && back.term.ddp_hdr_len == 14 &&
	      back.term.etype == SR_TERM_DDP_TAGGED && back.term.ecode == SR_TERM_DDP_T_BASE_BOUNDS);
	CHECK(strcmp(sr_term_str(1, 1, 1), "DDP tagged: base or bounds violation") == 0);
	CHECK(strcmp(sr_term_str(2, 0, 2), "MPA: CRC error") == 0);
}

/* ------------------------------------------------------------------ */
/* The kernel siw captures: TCP reassembly, then every MPA frame and
 * FPDU field by field */

struct seg {
	size_t off, len;
	unsigned frame;
};

struct dstream {
	struct in6_addr saddr, daddr;
	uint16_t sport, dport;
	bool have_isn;
	uint32_t isn;
	uint8_t *buf, *filled;
	size_t cap, end;
	struct seg *segs;
	size_t nsegs, segcap;
	bool fin;
};

struct fpdu_rec {
	unsigned frame;
	const uint8_t *raw; /* whole FPDU */
	size_t len;
	struct sr_mpa_fpdu f;
	struct sr_iw_hdr h;
	const uint8_t *pay;
	size_t paylen;
};

struct parsed {
	struct sr_mpa_rr rr;
	unsigned rr_frame;
	bool rr_ok;
	struct fpdu_rec *rec;
	size_t nrec;
	bool framing_ok;
};

static struct dstream *find_stream(struct dstream *s, size_t n, const struct pcap_tcp *t)
{
	for (size_t i = 0; i < n; i++)
		if (s[i].sport == t->sport && s[i].dport == t->dport && !memcmp(&s[i].saddr, &t->saddr, 16) &&
		    !memcmp(&s[i].daddr, &t->daddr, 16))
			return &s[i];
	return NULL;
}

static void stream_add(struct dstream *d, const struct pcap_tcp *t)
{
	uint32_t seq = t->seq;
	int32_t rel;

	if (t->flags & PCAP_TCP_SYN) {
		d->have_isn = true;
		d->isn = t->seq + 1;
		seq++;
	}
	if (t->flags & PCAP_TCP_FIN)
		d->fin = true;
	if (!t->paylen)
		return;
	if (!d->have_isn) {
		d->have_isn = true;
		d->isn = seq;
	}
	rel = (int32_t)(seq - d->isn);
	if (rel < 0)
		return;
	if ((size_t)rel + t->paylen > d->cap) {
		size_t nc = ((size_t)rel + t->paylen) * 2;

		d->buf = realloc(d->buf, nc);
		d->filled = realloc(d->filled, nc);
		memset(d->filled + d->cap, 0, nc - d->cap);
		d->cap = nc;
	}
	memcpy(d->buf + rel, t->payload, t->paylen);
	memset(d->filled + rel, 1, t->paylen);
	if ((size_t)rel + t->paylen > d->end)
		d->end = (size_t)rel + t->paylen;
	if (d->nsegs == d->segcap) {
		d->segcap = d->segcap ? d->segcap * 2 : 64;
		d->segs = realloc(d->segs, d->segcap * sizeof(*d->segs));
	}
	d->segs[d->nsegs++] = (struct seg){ (size_t)rel, t->paylen, t->frame };
}

static unsigned frame_at(const struct dstream *d, size_t off)
{
	for (size_t i = 0; i < d->nsegs; i++)
		if (off >= d->segs[i].off && off < d->segs[i].off + d->segs[i].len)
			return d->segs[i].frame;
	return 0;
}

/* Split one direction's bytes into its MPA frame and FPDUs. */
static void parse_stream(const char *file, struct dstream *d, struct parsed *p)
{
	size_t off;
	int n;

	memset(p, 0, sizeof(*p));
	for (size_t i = 0; i < d->end; i++)
		if (!d->filled[i]) {
			CHECK(0, "%s: hole in the TCP stream at %zu", file, i);
			return;
		}
	n = sr_mpa_rr_parse(&p->rr, d->buf, d->end);
	CHECK(n > 0, "%s: MPA frame: %d", file, n);
	if (n <= 0)
		return;
	p->rr_ok = true;
	p->rr_frame = frame_at(d, 0);
	off = (size_t)n;
	p->framing_ok = true;
	while (off < d->end) {
		struct fpdu_rec r;
		int len, hl;

		memset(&r, 0, sizeof(r));
		len = sr_mpa_fpdu_split(&r.f, d->buf + off, d->end - off);
		CHECK(len > 0, "%s: FPDU at stream offset %zu: %d", file, off, len);
		if (len <= 0) {
			p->framing_ok = false;
			break;
		}
		r.frame = frame_at(d, off);
		r.raw = d->buf + off;
		r.len = (size_t)len;
		hl = sr_iw_hdr_parse(&r.h, r.f.ulpdu, r.f.ulpdu_len, r.f.ulpdu_len);
		CHECK(hl > 0, "%s frame %u: header: %d", file, r.frame, hl);
		if (hl > 0) {
			r.pay = r.f.ulpdu + hl;
			r.paylen = r.f.ulpdu_len - (size_t)hl;
			p->rec = realloc(p->rec, (p->nrec + 1) * sizeof(*p->rec));
			p->rec[p->nrec++] = r;
		}
		off += (size_t)len;
	}
}

struct cap_expect {
	const char *file;
	unsigned mpa;
	unsigned ops[SR_RDMAP_NOPS];
};

/* From `tshark --disable-protocol rpcordma`: MPA frames and RDMAP
 * messages by opcode in each capture. */
static const struct cap_expect cap_expect[] = {
	{ "read_bw.pcap", 4, { [1] = 5, [2] = 15, [3] = 32 } },
	{ "rping.pcap", 2, { [0] = 9, [1] = 3, [2] = 9, [3] = 12 } },
	{ "send_bw.pcap", 4, { [0] = 2, [3] = 37 } },
	{ "ucmatose.pcap", 2, { [3] = 10 } },
	{ "write_bw.pcap", 4, { [0] = 15, [3] = 32 } },
};

struct totals {
	unsigned files, mpa, fpdus, ops[SR_RDMAP_NOPS], spot, nonzero_pads;
	unsigned ops_file[SR_RDMAP_NOPS];
	unsigned mpa_file;
};

/* Spot checks on rping.pcap against what tshark -V shows. */
static void spot_rping(const struct fpdu_rec *r, struct totals *tot)
{
	const struct sr_iw_hdr *h = &r->h;

	switch (r->frame) {
	case 8: {
		static const uint8_t data[16] = { 0x00, 0x00, 0x55, 0x9e, 0xf9, 0x06, 0x54, 0xc0,
						  0x7a, 0x39, 0x41, 0x00, 0x00, 0x00, 0x0b, 0xb8 };

		CHECK(h->opcode == SR_RDMAP_SEND && h->last && h->qn == 0 && h->msn == 1 && h->mo == 0 &&
		      r->f.ulpdu_len == 34 && r->paylen == 16 && !memcmp(r->pay, data, 16));
		tot->spot++;
		break;
	}
	case 9:
		CHECK(h->opcode == SR_RDMAP_READ_REQ && h->qn == 1 && h->msn == 1 && h->mo == 0 && h->last &&
		      r->f.ulpdu_len == 46);
		CHECK(h->rreq.sink_stag == 0x39da4400 && h->rreq.sink_to == 0x0000563377b6a4c0ull &&
		      h->rreq.size == 3000 && h->rreq.src_stag == 0x7a394100 &&
		      h->rreq.src_to == 0x0000559ef90654c0ull);
		tot->spot++;
		break;
	case 10:
		CHECK(h->opcode == SR_RDMAP_READ_RESP && h->tagged && !h->last && h->stag == 0x39da4400 &&
		      h->to == 0x0000563377b6a4c0ull && r->f.ulpdu_len == 1442 && r->len == 1448);
		CHECK(r->paylen == 1428 && !memcmp(r->pay, "rdma-ping-0: ABCDEF", 19));
		tot->spot++;
		break;
	case 12:
		CHECK(h->opcode == SR_RDMAP_READ_RESP && h->last && h->to == 0x0000563377b6afe8ull &&
		      r->f.ulpdu_len == 158 && r->paylen == 144);
		tot->spot++;
		break;
	default:
		break;
	}
}

/* Field-by-field checks of one direction; the peer's Read Requests are
 * what its Read Responses must answer. */
static void check_direction(const char *file, const struct parsed *p, const struct parsed *peer, bool crc,
			    struct totals *tot)
{
	uint32_t msn[SR_DDP_NQN] = { 1, 1, 1, 1 };
	uint32_t mo[SR_DDP_NQN] = { 0, 0, 0, 0 };
	bool in_write = false, in_rresp = false;
	uint32_t w_stag = 0, r_stag = 0;
	uint64_t w_to = 0, r_to = 0, r_done = 0;
	size_t next_rreq = 0;
	const struct sr_rdmap_rreq *cur = NULL;
	uint8_t out[70000];

	for (size_t i = 0; i < p->nrec; i++) {
		const struct fpdu_rec *r = &p->rec[i];
		const struct sr_iw_hdr *h = &r->h;
		const struct sr_rdmap_opinfo *oi = &sr_rdmap_op[h->opcode];
		struct sr_iw_hdr copy = *h;

		tot->fpdus++;
		tot->ops[h->opcode]++;
		tot->ops_file[h->opcode]++;
		/* MPA framing: CRC as negotiated.  RFC 5044 has the receiver
		 * ignore the pad, and siw does send stale bytes there (read_bw,
		 * send_bw and write_bw have some), so they are only counted. */
		tot->nonzero_pads += r->f.pad_nonzero;
		if (crc)
			CHECK(r->f.crc == r->f.crc_calc, "%s frame %u: CRC", file, r->frame);
		else
			CHECK(r->f.crc == 0, "%s frame %u: CRC field %08x without CRC", file, r->frame, r->f.crc);
		/* DDP and RDMAP control */
		CHECK(h->ddp_version == 1 && h->rdmap_version == 1 && h->ddp_rsvd == 0 && h->rdmap_rsvd == 0,
		      "%s frame %u: control", file, r->frame);
		CHECK(oi->payload || r->paylen == 0, "%s frame %u: %s with %zu payload bytes", file, r->frame, oi->name,
		      r->paylen);
		if (h->tagged) {
			CHECK(h->opcode == SR_RDMAP_WRITE || h->opcode == SR_RDMAP_READ_RESP);
		} else {
			CHECK(h->qn == oi->qn, "%s frame %u: QN %u for %s", file, r->frame, h->qn, oi->name);
			CHECK(oi->inval || h->rsvdulp == 0, "%s frame %u: RsvdULP", file, r->frame);
			if (h->qn < SR_DDP_NQN) {
				CHECK(h->msn == msn[h->qn], "%s frame %u: MSN %u want %u (QN %u)", file, r->frame,
				      h->msn, msn[h->qn], h->qn);
				CHECK(h->mo == mo[h->qn], "%s frame %u: MO %u want %u", file, r->frame, h->mo,
				      mo[h->qn]);
				mo[h->qn] += (uint32_t)r->paylen;
				if (h->last) {
					msn[h->qn]++;
					mo[h->qn] = 0;
				}
			}
		}
		switch (h->opcode) {
		case SR_RDMAP_WRITE:
			/* the segments of one Write continue each other */
			if (in_write)
				CHECK(h->stag == w_stag && h->to == w_to, "%s frame %u: Write continuation", file,
				      r->frame);
			w_stag = h->stag;
			w_to = h->to + r->paylen;
			in_write = !h->last;
			break;
		case SR_RDMAP_READ_REQ:
			CHECK(h->last && h->rreq.size > 0 && r->paylen == 0);
			break;
		case SR_RDMAP_READ_RESP:
			if (!in_rresp) {
				/* a new response answers the peer's next Read Request */
				cur = NULL;
				while (next_rreq < peer->nrec && peer->rec[next_rreq].h.opcode != SR_RDMAP_READ_REQ)
					next_rreq++;
				CHECK(next_rreq < peer->nrec, "%s frame %u: Read Response without request", file,
				      r->frame);
				if (next_rreq < peer->nrec)
					cur = &peer->rec[next_rreq++].h.rreq;
				r_stag = cur ? cur->sink_stag : 0;
				r_to = cur ? cur->sink_to : 0;
				r_done = 0;
			}
			CHECK(h->stag == r_stag && h->to == r_to, "%s frame %u: Read Response STag/TO", file, r->frame);
			r_to += r->paylen;
			r_done += r->paylen;
			in_rresp = !h->last;
			if (h->last && cur)
				CHECK(r_done == cur->size, "%s frame %u: Read Response total %llu of %u", file,
				      r->frame, (unsigned long long)r_done, cur->size);
			break;
		default:
			break;
		}
		if (!strcmp(file, "rping.pcap"))
			spot_rping(r, tot);
		/* byte-exact: the header and then the whole FPDU re-encoded (with
		 * the pad bytes the sender chose) */
		copy.hdr_len = 0;
		{
			size_t m = build_fpdu(out, &copy, r->pay, r->paylen, crc);
			size_t padoff = 2 + r->f.ulpdu_len;

			memcpy(out + padoff, r->raw + padoff, r->f.pad);
			if (crc) {
				struct iovec iov = { out, padoff + r->f.pad };

				sr_mpa_crc_store(out + padoff + r->f.pad, sr_mpa_crc_iov(&iov, 1));
			}
			CHECK(m == r->len && !memcmp(out, r->raw, r->len),
			      "%s frame %u: FPDU does not re-encode byte-exact", file, r->frame);
		}
		/* and with CRC on, what we'd send is what we accept */
		{
			struct sr_mpa_fpdu g;
			size_t n = build_fpdu(out, &copy, r->pay, r->paylen, true);

			CHECK(sr_mpa_fpdu_split(&g, out, n) == (int)n && g.crc == g.crc_calc && g.crc != 0);
		}
	}
	CHECK(!in_write && !in_rresp, "%s: a message is left unfinished", file);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_captures(void)
{
	const char *dir = SR_WIRE_SAMPLES "/iwarp-kernel-siw";
	struct totals tot;
	char *names[64];
	size_t n = 0;
	DIR *dd = opendir(dir);
	struct dirent *de;

	memset(&tot, 0, sizeof(tot));
	CHECK(dd != NULL, "opendir %s: %s", dir, strerror(errno));
	if (!dd)
		return;
	while ((de = readdir(dd)) && n < 64) {
		size_t l = strlen(de->d_name);

		if (l > 5 && !strcmp(de->d_name + l - 5, ".pcap"))
			names[n++] = strdup(de->d_name);
	}
	closedir(dd);
	qsort(names, n, sizeof(names[0]), cmp_str);

	for (size_t fi = 0; fi < n; fi++) {
		char path[4096];
		struct pcap_file f;
		struct pcap_tcp t;
		struct dstream st[16];
		size_t ns = 0;
		const struct cap_expect *ce = NULL;
		int rc;

		for (size_t k = 0; k < sizeof(cap_expect) / sizeof(cap_expect[0]); k++)
			if (!strcmp(cap_expect[k].file, names[fi]))
				ce = &cap_expect[k];
		CHECK(ce != NULL, "unexpected capture %s", names[fi]);
		snprintf(path, sizeof(path), "%s/%s", dir, names[fi]);
		rc = pcap_open(&f, path);
		CHECK(rc == 0, "%s: %s", path, strerror(-rc));
		if (rc)
			continue;
		tot.files++;
		memset(st, 0, sizeof(st));
		memset(tot.ops_file, 0, sizeof(tot.ops_file));
		tot.mpa_file = 0;
		while ((rc = pcap_next_tcp(&f, &t)) == 1) {
			struct dstream *d = find_stream(st, ns, &t);

			if (!d && ns < 16) {
				d = &st[ns++];
				d->saddr = t.saddr;
				d->daddr = t.daddr;
				d->sport = t.sport;
				d->dport = t.dport;
			}
			if (d)
				stream_add(d, &t);
		}
		CHECK(rc == 0, "%s: %s", names[fi], f.error);
		/* pair the two directions of each connection */
		for (size_t a = 0; a < ns; a++) {
			struct dstream *da = &st[a], *db = NULL;
			struct parsed pa, pb;
			const struct parsed *req, *rep;

			for (size_t b = 0; b < ns; b++)
				if (st[b].sport == da->dport && st[b].dport == da->sport &&
				    !memcmp(&st[b].saddr, &da->daddr, 16))
					db = &st[b];
			if (!db || db < da)
				continue; /* each pair once */
			CHECK(da->end > 0 && db->end > 0, "%s: connection without data", names[fi]);
			parse_stream(names[fi], da, &pa);
			parse_stream(names[fi], db, &pb);
			if (pa.rr_ok && pb.rr_ok) {
				bool crc;

				tot.mpa += 2;
				tot.mpa_file += 2;
				req = pa.rr.reply ? &pb : &pa;
				rep = pa.rr.reply ? &pa : &pb;
				CHECK(!req->rr.reply && rep->rr.reply, "%s: one Request, one Reply", names[fi]);
				/* siw's module defaults: revision 2, no markers, no CRC, IRD/ORD block */
				CHECK(req->rr.rev == 2 && rep->rr.rev == 2 && req->rr.enhanced && rep->rr.enhanced);
				CHECK(!req->rr.markers && !rep->rr.markers && !req->rr.crc && !rep->rr.crc &&
				      !rep->rr.reject);
				/* no peer-to-peer mode, so no RTR bits; perftest's first
				 * connection negotiates IRD = ORD = 0, its data connection 128 */
				CHECK(req->rr.ird_word <= SR_MPA_IRD_ORD_MAX &&
				      req->rr.ord_word <= SR_MPA_IRD_ORD_MAX &&
				      rep->rr.ird_word <= SR_MPA_IRD_ORD_MAX && rep->rr.ord_word <= SR_MPA_IRD_ORD_MAX);
				if (!strcmp(names[fi], "read_bw.pcap") && req->rr_frame == 21)
					CHECK(sr_mpa_ird(&req->rr) == 128 && sr_mpa_ord(&req->rr) == 128);
				if (!strcmp(names[fi], "read_bw.pcap") && req->rr_frame == 4)
					CHECK(sr_mpa_ird(&req->rr) == 0 && sr_mpa_ord(&req->rr) == 0);
				CHECK(sr_mpa_rr_rtr(&req->rr) == SR_MPA_RTR_NONE);
				if (!strcmp(names[fi], "rping.pcap"))
					CHECK(req->rr_frame == 4 && rep->rr_frame == 6 && sr_mpa_ird(&req->rr) == 1 &&
					      sr_mpa_ord(&req->rr) == 1 && req->rr.pd_len == 0 && req->rr.res == 0x10);
				/* byte-exact MPA frames */
				{
					const struct parsed *pp[2] = { &pa, &pb };
					struct dstream *ds[2] = { da, db };

					for (int k = 0; k < 2; k++) {
						uint8_t again[600];
						int m = sr_mpa_rr_build(again, sizeof(again), &pp[k]->rr);

						CHECK(m > 0 && !memcmp(again, ds[k]->buf, (size_t)m),
						      "%s: MPA frame does not re-encode byte-exact", names[fi]);
					}
				}
				crc = req->rr.crc || rep->rr.crc;
				check_direction(names[fi], &pa, &pb, crc, &tot);
				check_direction(names[fi], &pb, &pa, crc, &tot);
			}
			free(pa.rec);
			free(pb.rec);
		}
		if (ce) {
			CHECK(tot.mpa_file == ce->mpa, "%s: %u MPA frames, want %u", names[fi], tot.mpa_file, ce->mpa);
			for (unsigned op = 0; op < SR_RDMAP_NOPS; op++)
				CHECK(tot.ops_file[op] == ce->ops[op], "%s: %u %s, want %u", names[fi],
				      tot.ops_file[op], sr_rdmap_op[op].name, ce->ops[op]);
		}
		for (size_t k = 0; k < ns; k++) {
			free(st[k].buf);
			free(st[k].filled);
			free(st[k].segs);
		}
		pcap_close(&f);
		free(names[fi]);
	}
	CHECK(tot.files == 5, "%u capture files", tot.files);
	CHECK(tot.mpa == 16, "%u MPA frames", tot.mpa);
	CHECK(tot.fpdus == 181, "%u FPDUs", tot.fpdus);
	CHECK(tot.nonzero_pads > 0 && tot.nonzero_pads < tot.fpdus, "%u FPDUs with stale pad bytes", tot.nonzero_pads);
	CHECK(tot.spot == 4, "%u spot checks on rping.pcap", tot.spot);
}

/* A stream that splits FPDUs anywhere: reassembly by the parser alone. */
static void test_stream_split(void)
{
	uint8_t stream[8192], pay[3000];
	size_t len = 0, off = 0;
	unsigned got = 0, bad = 0;

	for (size_t i = 0; i < sizeof(pay); i++)
		pay[i] = (uint8_t)rnd();
	for (int k = 0; k < 8; k++) {
		struct sr_iw_hdr h;

		random_hdr(&h, k & 1 ? SR_RDMAP_WRITE : SR_RDMAP_SEND);
		len += build_fpdu(stream + len, &h, pay, (size_t)(rnd() % 700), true);
	}
	/* feed it in random slices the way recv() would */
	{
		uint8_t acc[8192];
		size_t have = 0;

		while (off < len || have) {
			size_t take = off < len ? 1 + rnd() % 97 : 0;
			struct sr_mpa_fpdu f;
			int r;

			if (take > len - off)
				take = len - off;
			memcpy(acc + have, stream + off, take);
			have += take;
			off += take;
			r = sr_mpa_fpdu_split(&f, acc, have);
			if (r == -EAGAIN) {
				if (off == len) {
					bad++;
					break;
				}
				continue;
			}
			if (r <= 0 || f.crc != f.crc_calc)
				bad++;
			got++;
			memmove(acc, acc + r, have - (size_t)r);
			have -= (size_t)r;
		}
	}
	CHECK(got == 8 && bad == 0, "%u FPDUs, %u bad", got, bad);
}

int main(void)
{
	test_crc();
	test_mpa_rr();
	test_opcode_table();
	test_roundtrip();
	test_rejects();
	test_term_fill();
	test_stream_split();
	test_captures();

	return ut_end("test_iwarp_wire");
}
