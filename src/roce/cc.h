/* Congestion control of an RC requester's window (roce.h, cwnd): slow
 * start up to ssthresh, then more per window acknowledged (below)
 * (AIMD); a loss takes it to 7/10 (once per window of data, recovery.h),
 * a retransmission timeout to the minimum, to slow-start again.  Each QP
 * keeps its own, so the QPs of a process share a bottleneck as TCP flows
 * do, and Soft-RoCE beside TCP takes a share like one more of them.
 *
 * In congestion avoidance the window grows (srtt / SR_CC_RTT_REF)^2
 * packets per round trip (at least one), as TCP Hybla grows Reno's: a
 * round trip stretched by the scheduling of two user-space ends (TCP's
 * ACKs come from the kernel) then costs no share of a bottleneck.
 *
 * Sends and writes are paced, as Linux paces TCP: at gain x cwnd / srtt
 * (gain 2 in slow start, 5/4 after), in bursts of at most a quarter of the
 * window or SR_PACE_BURST packets, so that a window opened by one ACK does
 * not reach a bottleneck's queue as one line-rate burst (a tail-drop queue
 * drops its end).  Only once a loss has shown a queue that overflows
 * (ssthresh set) and an RTT is measured; READ requests are not paced
 * (the responder sends their data). */
#ifndef SR_ROCE_CC_H
#define SR_ROCE_CC_H

#include <stdbool.h>
#include <stdint.h>

#define SR_CWND_MIN 8u		    /* packets: below, go-back-N recovers no faster */
#define SR_PACE_BURST 16u	    /* packets back to back at most, beyond the pacing rate */
#define SR_CC_RTT_REF_NS 1000000ull /* a round trip this long grows the window as Reno's */
#define SR_CC_RHO_MAX 8u	    /* ... one 8 times longer or more 64 packets per round trip */

struct sr_roce_cc {
	uint32_t ssthresh;     /* packets; 0 = the window (nothing lost yet) */
	uint64_t acked;	       /* congestion avoidance: toward the next increase (1/256 packets) */
	uint64_t pace_next_ns; /* the next packet leaves no earlier (0: at once) */
	uint64_t pace_gap_ns;  /* the pacing interval of the last packet paced */
	bool undo_ok;	       /* the last decrease was a timeout's, undone if it proves spurious */
	uint32_t undo_cwnd, undo_ssthresh;
};

/* n more packets acknowledged, srtt the smoothed RTT (ns, 0: none yet):
 * *cwnd grows, at most to window; a timeout before it is no longer undone. */
void sr_cc_acked(struct sr_roce_cc *c, uint32_t *cwnd, uint32_t n, uint32_t window, uint64_t srtt);
/* A loss (a sequence NAK, a gap in the responses) */
void sr_cc_loss(struct sr_roce_cc *c, uint32_t *cwnd);
/* A retransmission timeout; the window before it is kept for sr_cc_undo */
void sr_cc_timeout(struct sr_roce_cc *c, uint32_t *cwnd);
/* The timeout was spurious (recovery.h, sr_rec_progress; before
 * sr_cc_acked for that progress): the window and ssthresh go back to what
 * they were before it, unless a loss came since. */
void sr_cc_undo(struct sr_roce_cc *c, uint32_t *cwnd);

/* May a packet leave at now (pacing)? */
static inline bool sr_cc_may_send(const struct sr_roce_cc *c, uint64_t now)
{
	return c->pace_next_ns <= now;
}
/* A packet left at now, with the window cwnd and the smoothed RTT srtt
 * (ns, 0: none yet): the next one's time.  Paced in packets, as cwnd
 * counts them: the pacing rate is the window's rate times the gain. */
void sr_cc_paced(struct sr_roce_cc *c, uint64_t now, uint32_t cwnd, uint64_t srtt);
/* When a requester stopped by pacing is to try again: late enough for
 * SR_PACE_BURST / 2 packets, so that a wake-up sends several. */
static inline uint64_t sr_cc_pace_wake(const struct sr_roce_cc *c)
{
	return c->pace_next_ns + c->pace_gap_ns * (SR_PACE_BURST / 2);
}

#endif
