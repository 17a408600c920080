/* The RC requester's congestion control (src/roce/cc.c) on its own: the
 * window's growth by round-trip time, pacing's gap and its burst. */
#include "../../src/roce/cc.c"

#include <string.h>

#include "ut.h"

/* packets of growth in congestion avoidance after acknowledging one
 * window of w packets at this srtt */
static uint32_t grown(uint32_t w, uint64_t srtt)
{
	struct sr_roce_cc c;
	uint32_t cwnd = w;

	memset(&c, 0, sizeof(c));
	c.ssthresh = w; /* in congestion avoidance */
	sr_cc_acked(&c, &cwnd, w, 4096, srtt);
	return cwnd - w;
}

static void test_growth(void)
{
	CHECK(grown(100, 0) == 1, "no RTT yet: one packet a window, as Reno (%u)", grown(100, 0));
	CHECK(grown(100, 500000) == 1, "shorter than the reference: one (%u)", grown(100, 500000));
	CHECK(grown(100, 1000000) == 1, "at the reference: one (%u)", grown(100, 1000000));
	/* 4 ms: rho 4, 16 packets a round trip (a few less: each one added
	 * makes the next window longer) */
	uint32_t g = grown(200, 4000000);
	CHECK(g >= 14 && g <= 16, "4 ms: about 16 (%u)", g);
	g = grown(1000, 100000000);
	CHECK(g >= 60 && g <= 64, "100 ms: capped at 64 (%u)", g);

	struct sr_roce_cc c;
	uint32_t cwnd = 10;
	memset(&c, 0, sizeof(c));
	sr_cc_acked(&c, &cwnd, 10, 4096, 4000000);
	CHECK(cwnd == 20, "slow start doubles, whatever the RTT (%u)", cwnd);
	cwnd = 500;
	sr_cc_acked(&c, &cwnd, 500, 512, 4000000);
	CHECK(cwnd == 512, "never beyond the window (%u)", cwnd);
}

static void test_pacing(void)
{
	struct sr_roce_cc c;
	uint64_t now = 1000000000;

	memset(&c, 0, sizeof(c));
	CHECK(sr_cc_may_send(&c, now), "nothing paced yet: at once");
	c.ssthresh = 10;
	/* congestion avoidance, cwnd 100, srtt 1 ms: 125 packets a ms */
	sr_cc_paced(&c, now, 100, 1000000);
	CHECK(c.pace_gap_ns == 8000, "gap srtt / (5/4 cwnd) (%llu)", (unsigned long long)c.pace_gap_ns);
	/* after an idle stretch at most a burst: 25 packets (a quarter of the
	 * window) leave back to back, then the gap holds */
	int n = 0;
	while (sr_cc_may_send(&c, now) && n < 1000) {
		sr_cc_paced(&c, now, 100, 1000000);
		n++;
	}
	CHECK(n == 25, "a quarter window back to back after a pause (%d)", n);
	CHECK(!sr_cc_may_send(&c, now + 7999), "then one gap later");
	CHECK(sr_cc_pace_wake(&c) >= c.pace_next_ns, "the wake-up is not before the next time");
	/* slow start paces at twice the window's rate */
	memset(&c, 0, sizeof(c));
	sr_cc_paced(&c, now, 100, 1000000);
	CHECK(c.pace_gap_ns == 5000, "slow start: srtt / (2 cwnd) (%llu)", (unsigned long long)c.pace_gap_ns);
	sr_cc_paced(&c, now, 100, 0);
	CHECK(sr_cc_may_send(&c, now), "no RTT: not paced");
}

int main(void)
{
	test_growth();
	test_pacing();
	return ut_end("test_cc");
}
