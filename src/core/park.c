/* Parked sends: the context's set of QPs whose transport let posted sends
 * wait for a batch, released by the application's next poll of a CQ (or
 * its arming of one), else by the progress thread. */
#include <string.h>

#include "core/sr.h"

bool sr_qp_park(struct sr_qp *qp)
{
	struct sr_context *ctx = qp->ctx;
	bool ok = true;

	if (atomic_load_explicit(&qp->in_park, memory_order_relaxed))
		return true;
	pthread_mutex_lock(&ctx->prog.park_lock);
	uint32_t n = atomic_load_explicit(&ctx->prog.n_parked, memory_order_relaxed);
	if (n < SR_PARKED_QPS && !qp->dead) {
		uint64_t now = n ? 0 : sr_now_ns();
		if (!n)
			atomic_store_explicit(&ctx->prog.parked_since, now, memory_order_relaxed);
		ctx->prog.parked[n] = qp;
		atomic_store_explicit(&qp->in_park, true, memory_order_relaxed);
		atomic_store_explicit(&ctx->prog.n_parked, n + 1, memory_order_relaxed);
		/* The progress thread releases what no poll did: make sure it
		 * looks by then (one ticking anyway is not woken).  After the
		 * set is published: the thread that sees the deadline must
		 * also see the set, or it sleeps on without it. */
		if (!n)
			sr_progress_deadline(ctx, now + SR_PARK_MAX_NS + SR_PROGRESS_TICK_NS);
	} else {
		ok = false;
	}
	pthread_mutex_unlock(&ctx->prog.park_lock);
	return ok;
}

void sr_qp_unpark(struct sr_qp *qp)
{
	struct sr_context *ctx = qp->ctx;

	if (!atomic_load_explicit(&qp->in_park, memory_order_relaxed))
		return;
	pthread_mutex_lock(&ctx->prog.park_lock);
	uint32_t n = atomic_load_explicit(&ctx->prog.n_parked, memory_order_relaxed);
	for (uint32_t i = 0; i < n; i++) {
		if (ctx->prog.parked[i] == qp) {
			ctx->prog.parked[i] = ctx->prog.parked[n - 1];
			atomic_store_explicit(&ctx->prog.n_parked, n - 1, memory_order_relaxed);
			break;
		}
	}
	atomic_store_explicit(&qp->in_park, false, memory_order_relaxed);
	pthread_mutex_unlock(&ctx->prog.park_lock);
}

/* Under prog.lock a QP destroyed meanwhile stays allocated (a zombie
 * is freed only past that lock, release_zombies) and says so in qp->dead. */
void sr_park_release(struct sr_context *ctx)
{
	struct sr_qp *qps[SR_PARKED_QPS];
	uint32_t n;

	if (!atomic_load_explicit(&ctx->prog.n_parked, memory_order_relaxed))
		return;
	pthread_mutex_lock(&ctx->prog.park_lock);
	n = atomic_load_explicit(&ctx->prog.n_parked, memory_order_relaxed);
	memcpy(qps, ctx->prog.parked, n * sizeof(*qps));
	for (uint32_t i = 0; i < n; i++)
		atomic_store_explicit(&qps[i]->in_park, false, memory_order_relaxed);
	atomic_store_explicit(&ctx->prog.n_parked, 0, memory_order_relaxed);
	pthread_mutex_unlock(&ctx->prog.park_lock);
	for (uint32_t i = 0; i < n; i++) {
		pthread_mutex_lock(&qps[i]->lock);
		if (!qps[i]->dead && ctx->dev->tops->sq_release)
			ctx->dev->tops->sq_release(qps[i]);
		pthread_mutex_unlock(&qps[i]->lock);
	}
}

void sr_park_release_now(struct sr_context *ctx)
{
	pthread_mutex_lock(&ctx->prog.lock);
	sr_park_release(ctx);
	pthread_mutex_unlock(&ctx->prog.lock);
}

void sr_progress_reaped(struct sr_context *ctx)
{
	atomic_store_explicit(&ctx->prog.last_reap_ns, sr_now_ns(), memory_order_relaxed);
	if (atomic_load_explicit(&ctx->prog.n_parked, memory_order_relaxed) &&
	    !pthread_mutex_trylock(&ctx->prog.lock)) {
		sr_park_release(ctx);
		pthread_mutex_unlock(&ctx->prog.lock);
	}
}

uint64_t sr_park_expire(struct sr_context *ctx, uint64_t now, uint64_t wake)
{
	if (atomic_load_explicit(&ctx->prog.n_parked, memory_order_relaxed)) {
		/* sends parked for a poll that has not come */
		uint64_t due = atomic_load_explicit(&ctx->prog.parked_since, memory_order_relaxed) + SR_PARK_MAX_NS;
		if (due <= now)
			sr_park_release_now(ctx);
		else if (!wake || due + SR_PROGRESS_TICK_NS < wake)
			wake = due + SR_PROGRESS_TICK_NS;
	}
	return wake;
}
