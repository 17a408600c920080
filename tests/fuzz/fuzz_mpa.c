/* libFuzzer harness for MPA Request/Reply frames as the rdma_cm over
 * iWARP receives them (src/iwarp/wire/mpa.c, used by src/cm/iw_cm.c):
 * the frame read from a TCP stream in pieces of any size
 * (sr_mpa_rr_need decides how much to read next), then parsed, and what
 * the CM derives from it (IRD, ORD, the RTR message).
 *
 * Input: two bytes that choose how the stream is cut into reads (the TCP
 * segments a peer or the network may produce), then the stream.  The
 * seeds are the first segments of each direction of the kernel siw
 * captures (a Request or Reply, often with the first FPDUs behind it).
 *
 * Invariants (abort() on violation):
 *  - the reader never asks for more than the frame holds nor more than its
 *    buffer (the iw_cm frame buffer: 20 + 512 bytes);
 *  - the verdict (complete with length L, not MPA, too big, more needed)
 *    does not depend on how the stream was cut: reading byte by byte,
 *    in the chosen pieces, or all at once gives the same;
 *  - a complete frame parses (or is an enhanced frame too short for its
 *    IRD/ORD block, -EINVAL) and re-encodes to the very same bytes;
 *  - an error on a prefix is an error of the whole frame too (a valid
 *    frame is never refused because it arrived in small segments);
 *  - the RTR message a frame announces is one it offers. */
#include <errno.h>

#include "fuzz.h"
#include "iwarp/wire/iwarp_wire.h"

#define CAP (SR_MPA_RR_HDR_LEN + SR_MPA_MAX_PD) /* iw_cm's frame buffer */

struct verdict {
	int rc;	     /* 1 complete, 0 more needed, -EPROTO, -EMSGSIZE */
	size_t have; /* bytes consumed */
};

/* Read the frame off the stream as frame_read does, in pieces of at most
 * the next size the schedule gives (0 in the schedule: as much as asked). */
static struct verdict read_frame(const uint8_t *stream, size_t len, uint32_t sched)
{
	uint8_t *frame = malloc(CAP);
	struct verdict v = { 0, 0 };

	REQUIRE(frame);
	for (;;) {
		int need = sr_mpa_rr_need(frame, v.have, CAP);
		size_t piece;

		if (need < 0) {
			REQUIRE(need == -EPROTO || need == -EMSGSIZE);
			v.rc = need;
			break;
		}
		if (!need) {
			v.rc = 1;
			break;
		}
		REQUIRE(v.have + (size_t)need <= CAP);
		if (v.have == len)
			break; /* the stream ends: more needed */
		piece = (size_t)need;
		if (sched) {
			size_t cut = 1 + (sched & 7); /* 1..8 bytes */
			sched = sched >> 3 | sched << 29;
			piece = cut < piece ? cut : piece;
		}
		if (piece > len - v.have)
			piece = len - v.have;
		memcpy(frame + v.have, stream + v.have, piece);
		v.have += piece;
	}
	free(frame);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct verdict a, b, c;
	uint32_t sched;
	uint8_t *x;
	size_t len;

	if (size < 2)
		return 0;
	sched = (uint32_t)(data[0] | data[1] << 8) * 2654435761u | 1;
	len = size - 2;
	x = fz_dup(data + 2, len);

	a = read_frame(x, len, 0);     /* as much as asked at once */
	b = read_frame(x, len, sched); /* in the chosen pieces */
	/* byte by byte */
	{
		uint8_t *frame = malloc(CAP);
		size_t have = 0;
		int need;

		REQUIRE(frame);
		while ((need = sr_mpa_rr_need(frame, have, CAP)) > 0 && have < len) {
			frame[have] = x[have];
			have++;
		}
		c.rc = need < 0 ? need : need == 0 ? 1 : 0;
		c.have = have;
		free(frame);
	}
	REQUIRE(a.rc == b.rc && a.rc == c.rc);
	REQUIRE(a.rc <= 0 || (a.have == b.have && a.have == c.have));

	if (a.rc == 1) {
		struct sr_mpa_rr rr;
		int n = sr_mpa_rr_parse(&rr, x, a.have);

		REQUIRE(n == (int)a.have || n == -EINVAL);
		if (n > 0) {
			uint8_t out[CAP];

			REQUIRE(rr.rev == x[17] && rr.pd_len <= SR_MPA_MAX_PD);
			REQUIRE(sr_mpa_rr_build(out, sizeof(out), &rr) == n && !memcmp(out, x, (size_t)n));
			REQUIRE(sr_mpa_ird(&rr) <= SR_MPA_IRD_ORD_MAX && sr_mpa_ord(&rr) <= SR_MPA_IRD_ORD_MAX);
			switch (sr_mpa_rr_rtr(&rr)) {
			case SR_MPA_RTR_NONE:
				break;
			case SR_MPA_RTR_WRITE:
				REQUIRE(rr.enhanced && (rr.ord_word & SR_MPA_V2_WRITE_RTR));
				break;
			case SR_MPA_RTR_READ:
				REQUIRE(rr.enhanced && (rr.ord_word & SR_MPA_V2_READ_RTR));
				break;
			case SR_MPA_RTR_SEND:
				REQUIRE(rr.enhanced && (rr.ird_word & SR_MPA_V2_ZERO_RTR));
				break;
			default:
				REQUIRE(!"an RTR type that does not exist");
			}
		}
	} else if (a.rc < 0) {
		struct sr_mpa_rr rr;
		int n = sr_mpa_rr_parse(&rr, x, len);

		/* the whole input is refused too, for the same reason */
		REQUIRE(n == a.rc || (a.rc == -EPROTO && n == -EPROTO));
	} else {
		struct sr_mpa_rr rr;

		REQUIRE(a.have == len && sr_mpa_rr_parse(&rr, x, len) == -EAGAIN);
	}
	free(x);
	return 0;
}
