/* AIMD window of an RC requester (cc.h). */
#include "roce/cc.h"

/* The window's growth per round trip in congestion avoidance, in 1/256
 * packets: (srtt / SR_CC_RTT_REF)^2, at least one packet, at most
 * SR_CC_RHO_MAX^2 (as TCP Hybla scales Reno's). */
static uint64_t growth_q8(uint64_t srtt)
{
	uint64_t rho_q4 = srtt * 16 / SR_CC_RTT_REF_NS;
	if (rho_q4 < 16)
		rho_q4 = 16;
	if (rho_q4 > 16 * SR_CC_RHO_MAX)
		rho_q4 = 16 * SR_CC_RHO_MAX;
	return rho_q4 * rho_q4;
}

void sr_cc_acked(struct sr_roce_cc *c, uint32_t *cwnd, uint32_t n, uint32_t window, uint64_t srtt)
{
	uint32_t w = *cwnd;
	c->undo_ok = false; /* progress after the timeout: it stands (or was undone before) */
	if (!c->ssthresh || w < c->ssthresh) {
		w += n; /* slow start: doubles per round trip */
		if (c->ssthresh && w > c->ssthresh)
			w = c->ssthresh;
	} else {
		c->acked += n * growth_q8(srtt);
		while (c->acked >= (uint64_t)w << 8) {
			c->acked -= (uint64_t)w << 8;
			w++;
		}
	}
	*cwnd = w > window ? window : w;
}

static uint32_t decreased(uint32_t w)
{
	w = w / 10 * 7 + w % 10 * 7 / 10;
	return w < SR_CWND_MIN ? SR_CWND_MIN : w;
}

void sr_cc_loss(struct sr_roce_cc *c, uint32_t *cwnd)
{
	c->undo_ok = false;
	c->ssthresh = decreased(*cwnd);
	c->acked = 0;
	*cwnd = c->ssthresh;
}

void sr_cc_timeout(struct sr_roce_cc *c, uint32_t *cwnd)
{
	if (!c->undo_ok) { /* a second timeout in a row keeps the first's window to undo to */
		c->undo_ok = true;
		c->undo_cwnd = *cwnd;
		c->undo_ssthresh = c->ssthresh;
	}
	c->ssthresh = decreased(*cwnd);
	c->acked = 0;
	*cwnd = SR_CWND_MIN;
}

void sr_cc_undo(struct sr_roce_cc *c, uint32_t *cwnd)
{
	if (!c->undo_ok)
		return;
	c->undo_ok = false;
	c->ssthresh = c->undo_ssthresh;
	c->acked = 0;
	if (*cwnd < c->undo_cwnd)
		*cwnd = c->undo_cwnd;
}

void sr_cc_paced(struct sr_roce_cc *c, uint64_t now, uint32_t cwnd, uint64_t srtt)
{
	if (!srtt || !cwnd) {
		c->pace_next_ns = 0;
		return;
	}
	/* gap = srtt / (gain * cwnd), gain = num / den */
	bool avoid = c->ssthresh && cwnd >= c->ssthresh;
	uint64_t num = avoid ? 5 : 2, den = avoid ? 4 : 1;
	uint64_t gap = srtt * den / (cwnd * num);
	uint64_t burst = gap * (cwnd / 4 > SR_PACE_BURST ? cwnd / 4 : SR_PACE_BURST);
	/* credit unused for longer than a burst is lost: after a pause, at
	 * most a burst goes back to back */
	uint64_t base = c->pace_next_ns + burst > now ? c->pace_next_ns : now - burst;
	c->pace_next_ns = base + gap;
	c->pace_gap_ns = gap;
}
