/* The QPs' sockets (the fd registry): the transports add, change and
 * remove them; the progress thread and pollers receive from those with
 * input. */
#include <errno.h>
#include <sys/epoll.h>

#include "core/guard.h"
#include "core/sr.h"

/* The QPs' sockets live in data_epfd, itself watched by the progress
 * thread's epfd: an application thread polling an empty CQ asks the
 * kernel which sockets have input (one epoll_wait) instead of trying
 * every QP, so its cost does not grow with idle QPs. */
bool sr_progress_input_waiting(struct sr_context *ctx)
{
	struct epoll_event ev;
	return epoll_wait(ctx->prog.data_epfd, &ev, 1, 0) > 0;
}

int sr_progress_add_fd(struct sr_context *ctx, int fd, struct sr_qp *qp)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = qp };

	sr_tsan_release(&ctx->prog.data_epfd);
	if (epoll_ctl(ctx->prog.data_epfd, EPOLL_CTL_ADD, fd, &ev))
		return -errno;
	atomic_fetch_add(&ctx->prog.n_data_fds, 1);
	atomic_fetch_add(&ctx->prog.data_fds_gen, 1);
	return 0;
}

int sr_progress_mod_fd(struct sr_context *ctx, int fd, struct sr_qp *qp, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = qp };

	sr_tsan_release(&ctx->prog.data_epfd);
	return epoll_ctl(ctx->prog.data_epfd, EPOLL_CTL_MOD, fd, &ev) ? -errno : 0;
}

void sr_progress_del_fd(struct sr_context *ctx, int fd)
{
	if (!epoll_ctl(ctx->prog.data_epfd, EPOLL_CTL_DEL, fd, NULL)) {
		atomic_fetch_sub(&ctx->prog.n_data_fds, 1);
		atomic_fetch_add(&ctx->prog.data_fds_gen, 1);
	}
}

/* Receive on the sockets that have input (prog.lock held).  With one
 * socket in the context (a ping-pong), once epoll_wait has said whose it
 * is, and as long as no socket came or went since (data_fds_gen), ask
 * that QP directly: one system call instead of epoll_wait and then the
 * receive.  Not while QPs receive through the daemon's connection, which
 * is in data_epfd too (not counted in n_data_fds): epoll_wait says when
 * it has input, so that an empty poll makes one system call. */
void sr_progress_receive(struct sr_context *ctx)
{
	const struct sr_transport_ops *t = ctx->dev->tops;
	struct epoll_event evs[64];
	uint32_t gen = atomic_load(&ctx->prog.data_fds_gen);
	int n;

	bool via_daemon = atomic_load_explicit(&ctx->prog.n_ud_qps, memory_order_relaxed) != 0;

	if (ctx->prog.sole_qp && ctx->prog.sole_qp_gen == gen && !via_daemon) {
		evs[0].data.ptr = ctx->prog.sole_qp;
		n = 1;
	} else {
		n = epoll_wait(ctx->prog.data_epfd, evs, 64, 0);
		if (n > 0)
			sr_tsan_acquire(&ctx->prog.data_epfd); /* what epoll_ctl published */
		bool sole = n == 1 && atomic_load(&ctx->prog.n_data_fds) == 1 && evs[0].data.ptr != SR_EP_DAEMON;
		ctx->prog.sole_qp = sole ? evs[0].data.ptr : NULL;
		ctx->prog.sole_qp_gen = gen;
	}
	if (n <= 0) {
		t->rx_flush(ctx);
		return;
	}
	/* the batch's placements into registered memory skip the guard's
	 * per-access count (core/guard.h) */
	sr_guard_hold();
	for (int i = 0; i < n; i++) {
		struct sr_qp *qp = evs[i].data.ptr;
		if (evs[i].data.ptr == SR_EP_DAEMON) {
			sr_ctx_daemon_readable(ctx);
			continue;
		}
		pthread_mutex_lock(&qp->lock);
		if (!qp->dead)
			t->on_readable(qp, -1);
		pthread_mutex_unlock(&qp->lock);
	}
	t->rx_flush(ctx);
	sr_guard_release();
}
