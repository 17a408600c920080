/* The QPs' timers: the set of QPs whose transport has a deadline (only
 * those are visited), and the progress thread's pass over them. */
#include <stdlib.h>
#include <string.h>

#include "core/sr.h"

static bool timer_set_add(struct sr_qp *qp);

void sr_qp_timer_arm(struct sr_qp *qp, uint64_t when)
{
	if (timer_set_add(qp))
		sr_progress_deadline(qp->ctx, when);
}

void sr_qp_timer_arm_slack(struct sr_qp *qp, uint64_t when, uint64_t slack_ns)
{
	if (timer_set_add(qp))
		sr_progress_deadline(qp->ctx, when + slack_ns);
}

/* Puts qp in the set the timer pass visits; false if that cannot be. */
static bool timer_set_add(struct sr_qp *qp)
{
	struct sr_context *ctx = qp->ctx;

	if (!atomic_load_explicit(&qp->timer_slot, memory_order_relaxed) && !qp->dead) {
		pthread_mutex_lock(&ctx->prog.timer_lock);
		if (ctx->prog.n_timer_qps == ctx->prog.timer_qps_cap) {
			uint32_t nc = ctx->prog.timer_qps_cap ? ctx->prog.timer_qps_cap * 2 : 64;
			struct sr_qp **t = realloc(ctx->prog.timer_qps, nc * sizeof(*t));
			if (!t) {
				/* no room: the timer fires when the QP next is in the set */
				pthread_mutex_unlock(&ctx->prog.timer_lock);
				sr_log("out of memory for a QP timer");
				return false;
			}
			ctx->prog.timer_qps = t;
			ctx->prog.timer_qps_cap = nc;
		}
		ctx->prog.timer_qps[ctx->prog.n_timer_qps++] = qp;
		atomic_store_explicit(&qp->timer_slot, ctx->prog.n_timer_qps, memory_order_relaxed);
		pthread_mutex_unlock(&ctx->prog.timer_lock);
	}
	return !qp->dead;
}

void sr_qp_timer_disarm(struct sr_qp *qp)
{
	struct sr_context *ctx = qp->ctx;

	if (!atomic_load_explicit(&qp->timer_slot, memory_order_relaxed))
		return;
	pthread_mutex_lock(&ctx->prog.timer_lock);
	uint32_t i = atomic_load_explicit(&qp->timer_slot, memory_order_relaxed) - 1;
	struct sr_qp *last = ctx->prog.timer_qps[--ctx->prog.n_timer_qps];
	ctx->prog.timer_qps[i] = last;
	atomic_store_explicit(&last->timer_slot, i + 1, memory_order_relaxed);
	atomic_store_explicit(&qp->timer_slot, 0, memory_order_relaxed);
	pthread_mutex_unlock(&ctx->prog.timer_lock);
}

/* Only the progress thread calls it, so QPs in the snapshot stay
 * allocated: destroyed ones are freed only once this thread has let go
 * of them (release_zombies). */
uint64_t sr_timers_run(struct sr_context *ctx)
{
	uint64_t now = sr_now_ns(), next = 0;
	const struct sr_transport_ops *t = ctx->dev->tops;
	uint32_t n;
	bool truncated = false;

	pthread_mutex_lock(&ctx->prog.timer_lock);
	n = ctx->prog.n_timer_qps;
	if (n > ctx->prog.timer_snap_cap) {
		struct sr_qp **s = realloc(ctx->prog.timer_snap, n * sizeof(*s));
		if (s) {
			ctx->prog.timer_snap = s;
			ctx->prog.timer_snap_cap = n;
		} else {
			n = ctx->prog.timer_snap_cap; /* the rest next time round */
			truncated = true;
		}
	}
	if (n)
		memcpy(ctx->prog.timer_snap, ctx->prog.timer_qps, n * sizeof(*ctx->prog.timer_snap));
	pthread_mutex_unlock(&ctx->prog.timer_lock);

	for (uint32_t i = 0; i < n; i++) {
		struct sr_qp *qp = ctx->prog.timer_snap[i];
		pthread_mutex_lock(&qp->lock);
		uint64_t d = qp->dead ? 0 : t->next_deadline(qp);
		if (d && d <= now) {
			t->on_timer(qp, now);
			d = t->next_deadline(qp);
		}
		if (!d)
			sr_qp_timer_disarm(qp);
		pthread_mutex_unlock(&qp->lock);
		if (d && (!next || d < next))
			next = d;
	}
	if (truncated)
		next = now;
	return next;
}

bool sr_timers_input_waiting(struct sr_context *ctx, uint64_t now)
{
	if (ctx->prog.input_asked_ns != now) {
		ctx->prog.input_asked_ns = now;
		ctx->prog.input_waiting = sr_progress_input_waiting(ctx);
	}
	return ctx->prog.input_waiting;
}

uint64_t sr_timers_tick(struct sr_context *ctx, uint64_t now, uint64_t wake)
{
	uint64_t lpost = atomic_load_explicit(&ctx->prog.last_post_ns, memory_order_relaxed);

	if (lpost && now - lpost < SR_PROGRESS_TICK_FOR_NS && (!wake || wake > now + SR_PROGRESS_TICK_NS))
		wake = now + SR_PROGRESS_TICK_NS; /* see sr_qp_timer_arm_slack */
	return wake;
}
