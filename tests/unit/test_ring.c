/* The work queues' rings (core/obj_queue.h): free-running 32-bit indices name
 * consecutive slots everywhere, across 2^32 too, so that no max_wr
 * outstanding WQEs ever share a slot however long a QP lives; the ring
 * has room for max_wr; a UD slot's destination is found back from its
 * WQE. */
#include <stdint.h>
#include <stdlib.h>

#include "core/limits.h"
#include "core/obj_queue.h"
#include "ut.h"

static void check_ring(uint32_t max_wr)
{
	struct sr_sq sq = { .max_wr = max_wr, .stride = 64 };
	struct sr_rq rq = { .max_wr = max_wr, .stride = 48 };
	uint32_t slots = sr_ring_slots(max_wr);

	CHECK(slots >= max_wr && (slots & (slots - 1)) == 0 && (slots == 1 || slots / 2 < max_wr),
	      "max_wr %u: %u slots", max_wr, slots);
	sq.mask = rq.mask = slots - 1;
	sq.buf = calloc(slots, sq.stride);
	rq.buf = calloc(slots, rq.stride);
	sq.ud_av = calloc(slots, sizeof(*sq.ud_av));
	if (!sq.buf || !rq.buf || !sq.ud_av)
		abort();
	/* every index from 2 rings before the wrap to 2 rings after it */
	uint32_t idx = 0u - 2 * slots, bad = 0;
	for (uint64_t n = 0; n < 4ull * slots + 1; n++, idx++) {
		size_t s = (size_t)((uint8_t *)sr_sq_wqe(&sq, idx) - sq.buf) / sq.stride;
		size_t r = (size_t)((uint8_t *)sr_rq_wqe(&rq, idx) - rq.buf) / rq.stride;
		size_t s1 = (size_t)((uint8_t *)sr_sq_wqe(&sq, idx + 1) - sq.buf) / sq.stride;
		if (s >= slots || r != s || s1 != (s + 1) % slots || sr_sq_av(&sq, sr_sq_wqe(&sq, idx)) != sq.ud_av + s)
			bad++;
	}
	CHECK(bad == 0, "max_wr %u: %u indices around 2^32 not on consecutive slots", max_wr, bad);
	free(sq.buf);
	free(rq.buf);
	free(sq.ud_av);
}

int main(void)
{
	static const uint32_t sizes[] = { 1, 2, 3, 5, 100, 127, 128, 129, 1000, 4095, SR_MAX_QP_WR - 1, SR_MAX_QP_WR };

	CHECK(sr_ring_slots(0) == 1);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		check_ring(sizes[i]);
	return ut_end("ring");
}
