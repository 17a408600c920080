/* AIMD window of an RC requester (cc.h). */
#include "roce/cc.h"

void sr_cc_acked(struct sr_roce_cc *c, uint32_t *cwnd, uint32_t n, uint32_t window)
{
	uint32_t w = *cwnd;
	if (!c->ssthresh || w < c->ssthresh) {
		w += n; /* slow start: doubles per round trip */
		if (c->ssthresh && w > c->ssthresh)
			w = c->ssthresh;
	} else {
		c->acked += n;
		while (c->acked >= w) {
			c->acked -= w;
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
	c->ssthresh = decreased(*cwnd);
	c->acked = 0;
	*cwnd = c->ssthresh;
}

void sr_cc_timeout(struct sr_roce_cc *c, uint32_t *cwnd)
{
	c->ssthresh = decreased(*cwnd);
	c->acked = 0;
	*cwnd = SR_CWND_MIN;
}
