/* Burst detection: whether an application's post follows its previous
 * one closely enough, while it polls its CQs, that its sends may be
 * parked for its next poll (park.c). */
#include "core/sr.h"

static bool post_in_burst(struct sr_qp *qp, uint64_t now)
{
	if (!qp->post_end_ns || now - qp->post_end_ns >= SR_TX_BURST_NS)
		return false;
	if (qp->in_burst)
		return true;
	uint64_t polled = atomic_load_explicit(&qp->ctx->prog.last_poll_ns, memory_order_relaxed);
	uint64_t reaped = atomic_load_explicit(&qp->ctx->prog.last_reap_ns, memory_order_relaxed);

	if (reaped > polled)
		polled = reaped;
	return polled && now - polled < SR_TX_POLLER_NS;
}

bool sr_post_in_burst(struct sr_qp *qp, uint64_t now)
{
	return qp->in_burst = post_in_burst(qp, now);
}
