/* Round-trip estimate and retransmission timing of an RC requester
 * (recovery.h). */
#include <string.h>

#include "roce/roce.h"

void sr_rec_init(struct sr_roce_rec *c, uint32_t psn)
{
	uint64_t srtt = c->srtt, rttvar = c->rttvar, rtt_min = c->rtt_min; /* the path is the same one */
	memset(c, 0, sizeof(*c));
	c->srtt = srtt;
	c->rttvar = rttvar;
	c->rtt_min = rtt_min;
	c->snd_max = psn;
}

void sr_rec_sent(struct sr_roce_rec *c, uint32_t psn, uint32_t n, bool ackreq)
{
	if (psn_diff(psn, c->snd_max) < 0)
		return; /* a retransmission: never timed (Karn) */
	c->snd_max = psn_add(psn, n);
	if (ackreq && !c->sample_on) {
		c->sample_on = true;
		c->sample_psn = psn_add(psn, n - 1);
		c->sample_ns = sr_now_ns();
	}
}

void sr_rec_read_sent(struct sr_roce_rec *c, uint32_t psn, uint32_t n)
{
	uint32_t end = psn_add(psn, n - 1);
	if (c->rd_count && psn_diff(end, c->rd_end[(c->rd_head + c->rd_count - 1) % SR_MAX_RD_ATOMIC]) <= 0)
		return; /* sent again: the first request's end stays */
	if (c->rd_count == SR_MAX_RD_ATOMIC)
		return; /* unreachable: no more READs are outstanding (qp.c) */
	c->rd_end[(c->rd_head + c->rd_count++) % SR_MAX_RD_ATOMIC] = end;
}

uint32_t sr_rec_read_room(const struct sr_roce_rec *c, uint32_t psn, uint32_t n)
{
	for (uint32_t i = 0; i < c->rd_count; i++) {
		uint32_t end = c->rd_end[(c->rd_head + i) % SR_MAX_RD_ATOMIC];
		if (psn_diff(end, psn) >= 0) {
			uint32_t room = (uint32_t)psn_diff(end, psn) + 1;
			return n < room ? n : room;
		}
	}
	return n;
}

uint32_t sr_rec_read_piece(const struct sr_roce_rec *c, uint32_t psn, uint32_t rest, uint32_t room, uint32_t cwnd)
{
	uint32_t n = sr_rec_read_room(c, psn, rest);
	if (psn_diff(psn, c->snd_max) < 0)
		return n; /* asked again: the rest of that request in one */
	/* no silly window: a piece of a packet or two costs a request, a
	 * responder pass and a sendmsg; the window drains to a quarter free */
	uint32_t min_piece = cwnd / 4 ? cwnd / 4 : 1;
	if (n > room && room < min_piece)
		return 0;
	return n > room ? room : n;
}

/* READ requests answered in full (everything before una) are forgotten. */
static void read_acked(struct sr_roce_rec *c, uint32_t una)
{
	while (c->rd_count && psn_diff(una, c->rd_end[c->rd_head]) > 0) {
		c->rd_head = (c->rd_head + 1) % SR_MAX_RD_ATOMIC;
		c->rd_count--;
	}
}

void sr_rec_go_back(struct sr_roce_rec *c, uint32_t psn)
{
	if (c->sample_on && psn_diff(c->sample_psn, psn) >= 0)
		c->sample_on = false;
}

void sr_rec_timeout(struct sr_roce_rec *c, uint64_t now)
{
	c->rto_ns = now ? now : 1;
}

bool sr_rec_progress(struct sr_roce_rec *c, uint32_t una, uint64_t now)
{
	bool spurious = c->rto_ns && c->rtt_min && now - c->rto_ns < c->rtt_min;
	c->rto_ns = 0;
	if (c->sample_on && psn_diff(una, c->sample_psn) > 0) {
		c->sample_on = false;
		uint64_t m = now > c->sample_ns ? now - c->sample_ns : 1;
		if (!c->rtt_min || m < c->rtt_min)
			c->rtt_min = m;
		if (!c->srtt) {
			c->srtt = m;
			c->rttvar = m / 2;
		} else {
			uint64_t err = m > c->srtt ? m - c->srtt : c->srtt - m;
			c->rttvar = (3 * c->rttvar + err) / 4;
			c->srtt = (7 * c->srtt + m) / 8;
		}
	}
	read_acked(c, una);
	c->backoff = 0;
	c->hold_ns = 0;
	c->tlp_sent = false;
	c->epoch_ns = now;
	if (c->in_recovery && psn_diff(una, c->recover_psn) >= 0)
		c->in_recovery = false;
	return spurious;
}

bool sr_rec_hold_expiry(struct sr_roce_rec *c, uint64_t now, uint64_t qp_to, bool input_waiting)
{
	if (!input_waiting || (c->hold_ns && now - c->hold_ns >= qp_to)) {
		c->hold_ns = 0;
		return false;
	}
	if (!c->hold_ns)
		c->hold_ns = now;
	return true;
}

uint64_t sr_rec_wait(const struct sr_roce_rec *c, uint64_t qp_to, bool probe_ok)
{
	/* the variance term at least srtt: on a steady long path rttvar
	 * falls near 0, and the timer would fire at any late ACK */
	uint64_t var = 4 * c->rttvar > c->srtt ? 4 * c->rttvar : c->srtt;
	uint64_t rto = c->srtt ? c->srtt + var : qp_to; /* no sample yet: the QP's own */
	if (rto < SR_RTO_MIN_NS)
		rto = SR_RTO_MIN_NS;
	for (uint32_t i = 0; i < c->backoff && rto < qp_to; i++)
		rto *= 2;
	if (rto > qp_to)
		rto = qp_to;
	if (probe_ok && !c->tlp_sent && c->srtt) {
		uint64_t pto = 2 * c->srtt < SR_PTO_MIN_NS ? SR_PTO_MIN_NS : 2 * c->srtt;
		if (pto < rto)
			return pto;
	}
	return rto;
}

bool sr_rec_loss(struct sr_roce_rec *c, uint32_t una, uint32_t next_psn)
{
	if (c->in_recovery && psn_diff(una, c->recover_psn) < 0)
		return false;
	c->in_recovery = true;
	c->recover_psn = next_psn;
	return true;
}
