/* Congestion control of an RC requester's window (roce.h, cwnd): slow
 * start up to ssthresh, then one packet more per window acknowledged
 * (AIMD); a loss takes it to 7/10 (once per window of data, recovery.h),
 * a retransmission timeout to the minimum, to slow-start again.  Each QP
 * keeps its own, so the QPs of a process share a bottleneck as TCP flows
 * do, and Soft-RoCE beside TCP takes a share like one more of them. */
#ifndef SR_ROCE_CC_H
#define SR_ROCE_CC_H

#include <stdint.h>

#define SR_CWND_MIN 8u /* packets: below, go-back-N recovers no faster */

struct sr_roce_cc {
	uint32_t ssthresh; /* packets; 0 = the window (nothing lost yet) */
	uint32_t acked;	   /* congestion avoidance: packets acknowledged toward the next increase */
};

/* n more packets acknowledged: *cwnd grows, at most to window. */
void sr_cc_acked(struct sr_roce_cc *c, uint32_t *cwnd, uint32_t n, uint32_t window);
/* A loss (a sequence NAK, a gap in the responses) */
void sr_cc_loss(struct sr_roce_cc *c, uint32_t *cwnd);
/* A retransmission timeout */
void sr_cc_timeout(struct sr_roce_cc *c, uint32_t *cwnd);

#endif
