/* The RC requester's loss recovery (src/roce/recovery.c) on its own: the
 * bounds of a READ request sent again, the retransmission wait, a
 * spurious timeout undone. */
#include "../../src/roce/recovery.c"
#include "../../src/roce/cc.c"

#include "ut.h"

static uint64_t fake_now;

uint64_t sr_now_ns(void)
{
	return fake_now;
}

/* Sent again, a READ asks for no PSN beyond the end of the request it
 * repeats, however the window has changed; new ones are bounded only by
 * what the caller asks. */
static void test_read_room(void)
{
	struct sr_roce_rec c;

	memset(&c, 0, sizeof(c));
	sr_rec_init(&c, 100);
	CHECK(sr_rec_read_room(&c, 100, 64) == 64, "nothing sent: what is asked");
	sr_rec_read_sent(&c, 100, 16); /* [100, 116) */
	sr_rec_sent(&c, 100, 16, true);
	sr_rec_read_sent(&c, 116, 4); /* [116, 120) */
	sr_rec_sent(&c, 116, 4, true);
	CHECK(sr_rec_read_room(&c, 100, 64) == 16, "again from the first: its 16");
	CHECK(sr_rec_read_room(&c, 110, 64) == 6, "again from within it: up to its end");
	CHECK(sr_rec_read_room(&c, 110, 3) == 3, "fewer than that: as asked");
	CHECK(sr_rec_read_room(&c, 116, 64) == 4, "the second: its 4");
	CHECK(sr_rec_read_room(&c, 120, 64) == 64, "beyond both: new");
	/* sent again in smaller pieces: the first request's ends stay */
	sr_rec_read_sent(&c, 100, 8);
	CHECK(sr_rec_read_room(&c, 108, 64) == 8, "the rest of the first after a smaller repeat");
	/* answered through 115: the first is forgotten */
	sr_rec_progress(&c, 116, 1000);
	CHECK(c.rd_count == 1, "one request left unanswered (%u)", c.rd_count);
	CHECK(sr_rec_read_room(&c, 116, 64) == 4, "the second still bounded");
	sr_rec_progress(&c, 120, 2000);
	CHECK(c.rd_count == 0, "all answered (%u)", c.rd_count);
	/* across the PSN space's wrap */
	sr_rec_init(&c, 0xfffff8);
	sr_rec_read_sent(&c, 0xfffff8, 16); /* ends at 7 */
	CHECK(sr_rec_read_room(&c, 0xfffffc, 64) == 12, "within a request that wraps");
	CHECK(sr_rec_read_room(&c, 8, 64) == 64, "past it");
}

/* A new READ piece is cut to the window's room (none below a quarter of
 * the window, unless the rest fits); one asked again is the whole rest of
 * the request it repeats even when the window has shrunk, so that no
 * repeat of a later part can precede the repeat of a lost earlier one. */
static void test_read_piece(void)
{
	struct sr_roce_rec c;

	memset(&c, 0, sizeof(c));
	sr_rec_init(&c, 100);
	CHECK(sr_rec_read_piece(&c, 100, 64, 16, 16) == 16, "new: cut to the room");
	CHECK(sr_rec_read_piece(&c, 100, 10, 16, 16) == 10, "new: the rest when it fits");
	CHECK(sr_rec_read_piece(&c, 100, 64, 3, 16) == 0, "new: no piece below a quarter window");
	CHECK(sr_rec_read_piece(&c, 100, 3, 3, 16) == 3, "new: a small rest that fits");
	sr_rec_read_sent(&c, 100, 16); /* [100, 116) */
	sr_rec_sent(&c, 100, 16, true);
	sr_rec_read_sent(&c, 116, 16); /* [116, 132) */
	sr_rec_sent(&c, 116, 16, true);
	/* a loss: the window is 4 now */
	CHECK(sr_rec_read_piece(&c, 100, 64, 4, 4) == 16, "again from the first: all of it, not the window's 4 (%u)",
	      sr_rec_read_piece(&c, 100, 64, 4, 4));
	CHECK(sr_rec_read_piece(&c, 106, 58, 1, 4) == 10, "again from within: to its end");
	CHECK(sr_rec_read_piece(&c, 116, 48, 1, 4) == 16, "the next one again: all of it");
	CHECK(sr_rec_read_piece(&c, 132, 32, 4, 4) == 4, "past what was sent: the window again");
}

/* A QP timeout that runs out while the process has unread input is held
 * back, for at most one more QP timeout; progress or an empty input ends
 * the hold, and the next expiry gets a hold of its own. */
static void test_hold_expiry(void)
{
	struct sr_roce_rec c;
	const uint64_t to = 1000000000;

	memset(&c, 0, sizeof(c));
	sr_rec_init(&c, 0);
	CHECK(!sr_rec_hold_expiry(&c, 5 * to, to, false), "nothing unread: the retry counts");
	CHECK(sr_rec_hold_expiry(&c, 5 * to, to, true), "input unread: held");
	CHECK(sr_rec_hold_expiry(&c, 5 * to + to / 2, to, true), "still unread within a QP timeout: held");
	CHECK(!sr_rec_hold_expiry(&c, 6 * to, to, true), "a QP timeout more: counts, input or not");
	CHECK(c.hold_ns == 0, "the next expiry starts a hold of its own");
	CHECK(sr_rec_hold_expiry(&c, 7 * to, to, true), "the next expiry: held again");
	sr_rec_progress(&c, 1, 7 * to + 1);
	CHECK(c.hold_ns == 0, "progress ends the hold");
	CHECK(sr_rec_hold_expiry(&c, 9 * to, to, true), "held from the start again");
	CHECK(!sr_rec_hold_expiry(&c, 9 * to + 1, to, false), "input read: counts at once");
}

/* The wait: the QP's timeout before a sample; srtt + 4 rttvar (at least
 * SR_RTO_MIN_NS) after; the probe at 2 srtt when allowed; never beyond
 * the QP's timeout. */
static void test_wait(void)
{
	struct sr_roce_rec c;
	const uint64_t to = 67000000;

	memset(&c, 0, sizeof(c));
	sr_rec_init(&c, 0);
	CHECK(sr_rec_wait(&c, to, true) == to, "no sample: the QP's timeout");
	fake_now = 1000000;
	sr_rec_sent(&c, 0, 1, true);
	sr_rec_progress(&c, 1, fake_now + 2000000); /* one 2 ms sample */
	CHECK(c.srtt == 2000000, "srtt from the sample (%llu)", (unsigned long long)c.srtt);
	CHECK(sr_rec_wait(&c, to, false) == 6000000, "srtt + 4 rttvar (%llu)",
	      (unsigned long long)sr_rec_wait(&c, to, false));
	CHECK(sr_rec_wait(&c, to, true) == 4000000, "the probe at 2 srtt");
	CHECK(sr_rec_wait(&c, 5000000, false) == 5000000, "at most the QP's timeout");
	for (int i = 0; i < 40; i++) { /* a steady 10 ms path: rttvar falls near 0 */
		sr_rec_sent(&c, (uint32_t)i + 1, 1, true);
		sr_rec_progress(&c, (uint32_t)i + 2, fake_now + 10000000);
		fake_now += 10000000;
	}
	CHECK(c.rttvar < 100000 && sr_rec_wait(&c, to, false) >= 2 * c.srtt, "a steady path: at least 2 srtt (%llu, srtt %llu)",
	      (unsigned long long)sr_rec_wait(&c, to, false), (unsigned long long)c.srtt);
}

/* A timeout on a long, lossless path (the delay line holds what is sent
 * past the RTO): the first progress after it comes sooner than a round
 * trip, so it answers the original, and the window is given back, with no
 * ssthresh (no pacing).  Progress a round trip later leaves the decrease. */
static void test_spurious_timeout(void)
{
	struct sr_roce_rec c;
	struct sr_roce_cc cc;
	uint32_t cwnd = 512;
	const uint64_t rtt = 10000000;

	memset(&c, 0, sizeof(c));
	memset(&cc, 0, sizeof(cc));
	sr_rec_init(&c, 0);
	fake_now = 1000000;
	sr_rec_sent(&c, 0, 256, true);
	CHECK(!sr_rec_progress(&c, 256, fake_now + rtt), "no timeout: not spurious");
	fake_now += rtt;
	sr_rec_sent(&c, 256, 256, true);
	fake_now += rtt + rtt / 2; /* the ACK is late: the timeout fires */
	sr_cc_timeout(&cc, &cwnd);
	sr_rec_timeout(&c, fake_now);
	CHECK(cwnd == SR_CWND_MIN && cc.ssthresh, "the timeout: the minimum window (%u)", cwnd);
	if (sr_rec_progress(&c, 512, fake_now + rtt / 10))
		sr_cc_undo(&cc, &cwnd);
	sr_cc_acked(&cc, &cwnd, 256, 512, c.srtt);
	CHECK(cwnd == 512 && !cc.ssthresh, "spurious: the window back (%u, ssthresh %u)", cwnd, cc.ssthresh);

	fake_now += rtt;
	sr_rec_sent(&c, 512, 256, true);
	fake_now += 2 * rtt;
	sr_cc_timeout(&cc, &cwnd);
	sr_rec_timeout(&c, fake_now);
	CHECK(!sr_rec_progress(&c, 768, fake_now + rtt + rtt / 10), "a round trip after it: the resend's answer");
	sr_cc_acked(&cc, &cwnd, 256, 512, c.srtt);
	CHECK(cwnd < 512 && cc.ssthresh, "a timeout that stands keeps its decrease (%u)", cwnd);
	sr_cc_undo(&cc, &cwnd);
	CHECK(cwnd < 512, "and no later undo (%u)", cwnd);
}

int main(void)
{
	test_read_room();
	test_read_piece();
	test_hold_expiry();
	test_wait();
	test_spurious_timeout();
	return ut_end("test_recovery");
}
