/* libFuzzer harness for the iWARP wire layer: MPA Request/Reply frames,
 * FPDU framing and CRC32c, DDP/RDMAP header parsing, and the
 * parse -> build round trip, on an input read as a TCP stream: an MPA
 * frame (if the input starts with one), then FPDUs.
 *
 * Invariants checked (abort() on violation, in every build mode):
 *  - no parser reads past what it is given (ASan with exact-size copies);
 *  - a parsed MPA frame or header re-encodes to the very same bytes;
 *  - sr_iw_hdr_need agrees with sr_iw_hdr_parse about the header length;
 *  - an FPDU we frame ourselves (with CRC) splits back with a good CRC.
 *
 * Seeds (fuzz_seeds.c): every TCP payload of the siw captures. */
#include <errno.h>

#include "fuzz.h"
#include "iwarp/wire/iwarp_wire.h"

static void one_mpa(const uint8_t *data, size_t size, size_t *used)
{
	uint8_t *x = fz_dup(data, size);
	struct sr_mpa_rr rr;
	int n = sr_mpa_rr_parse(&rr, x, size);

	*used = 0;
	if (n > 0) {
		uint8_t out[SR_MPA_RR_HDR_LEN + SR_MPA_MAX_PD];
		int m = sr_mpa_rr_build(out, sizeof(out), &rr);

		REQUIRE(m == n && !memcmp(out, x, (size_t)n));
		REQUIRE(sr_mpa_rr_frame_len(x, size) == (size_t)n);
		(void)sr_mpa_rr_rtr(&rr);
		*used = (size_t)n;
	} else {
		REQUIRE(n == -EAGAIN || n == -EPROTO || n == -EMSGSIZE || n == -EINVAL);
	}
	free(x);
}

static void one_ulpdu(const uint8_t *ulpdu, size_t len)
{
	uint8_t *x = fz_dup(ulpdu, len);
	struct sr_iw_hdr h;
	int r = sr_iw_hdr_parse(&h, x, len, (uint32_t)len);

	if (r > 0) {
		uint8_t out[SR_IW_MAX_HDR];
		uint32_t need = sr_iw_hdr_need(x, (uint32_t)len);

		REQUIRE((uint32_t)r <= len && r <= SR_IW_MAX_HDR);
		REQUIRE(sr_iw_hdr_build(out, &h) == (uint32_t)r && !memcmp(out, x, (size_t)r));
		REQUIRE(need >= (uint32_t)r || h.opcode == SR_RDMAP_TERMINATE);
		(void)sr_term_str(h.term.layer, h.term.etype, h.term.ecode);
		/* a Terminate about this segment is well formed too */
		{
			struct sr_iw_hdr t, back;
			uint8_t tb[SR_IW_MAX_HDR];
			uint32_t tl;

			sr_iw_term_fill(&t, SR_TERM_LAYER_DDP, h.tagged ? SR_TERM_DDP_TAGGED : SR_TERM_DDP_UNTAGGED, 1,
					x, (uint32_t)r, (uint32_t)len);
			tl = sr_iw_hdr_build(tb, &t);
			REQUIRE(sr_iw_hdr_parse(&back, tb, tl, tl) == (int)tl);
		}
	} else {
		REQUIRE(r == SR_IW_EAGAIN || r == SR_IW_EDDP_VERSION || r == SR_IW_ERDMAP_VERSION ||
			r == SR_IW_EOPCODE || r == SR_IW_ESHORT || r == SR_IW_ETERM);
		REQUIRE(r != SR_IW_EAGAIN); /* the whole ULPDU was given */
	}
	free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0, used;
	int nfpdu = 0;

	one_mpa(data, size, &used);
	off = used;
	while (off < size && nfpdu++ < 64) {
		uint8_t *x = fz_dup(data + off, size - off);
		struct sr_mpa_fpdu f;
		int n = sr_mpa_fpdu_split(&f, x, size - off);

		if (n <= 0) {
			REQUIRE(n == -EAGAIN);
			free(x);
			break;
		}
		REQUIRE((size_t)n == sr_mpa_fpdu_len(f.ulpdu_len) && (size_t)n <= size - off);
		one_ulpdu(f.ulpdu, f.ulpdu_len);
		/* framed again with a CRC of ours, it checks */
		{
			size_t tot = sr_mpa_fpdu_len(f.ulpdu_len);
			uint8_t *y = malloc(tot);
			struct sr_mpa_fpdu g;
			struct iovec iov;

			REQUIRE(y);
			memcpy(y, x, 2 + f.ulpdu_len);
			memset(y + 2 + f.ulpdu_len, 0, f.pad);
			iov.iov_base = y;
			iov.iov_len = 2 + f.ulpdu_len + f.pad;
			sr_mpa_crc_store(y + 2 + f.ulpdu_len + f.pad, sr_mpa_crc_iov(&iov, 1));
			REQUIRE(sr_mpa_fpdu_split(&g, y, tot) == (int)tot && g.crc == g.crc_calc);
			free(y);
		}
		free(x);
		off += (size_t)n;
	}
	return 0;
}
