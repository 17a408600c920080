/* A context's connection to softrdmad (common/ipc_client.h), opened
 * on first use, and the datagrams that arrive through it: each to the QP
 * its transport says it is for, multicast to the group's QPs. */
#include <errno.h>
#include <sys/epoll.h>

#include "core/sr.h"
#include "common/ipc_client.h"

void sr_ctx_deliver(struct sr_context *ctx, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len)
{
	const struct sr_transport_ops *t = ctx->dev->tops;
	uint32_t qpn;
	struct sr_qp *qp;

	if (!t->dgram_qpn || !t->dgram_qpn(data, len, &qpn))
		return;
	if (qpn == SR_MCAST_QPN) {
		sr_mcast_deliver(ctx, meta, data, len);
		return;
	}
	/* ctx->lock is held across delivery so the QP can't be freed under us */
	pthread_mutex_lock(&ctx->lock);
	qp = sr_ctx_find_qp(ctx, qpn);
	if (qp) {
		pthread_mutex_lock(&qp->lock);
		if (!qp->dead)
			t->deliver(qp, meta, data, len);
		pthread_mutex_unlock(&qp->lock);
	}
	pthread_mutex_unlock(&ctx->lock);
}

static void daemon_pkt(void *arg, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len)
{
	sr_ctx_deliver(arg, meta, data, len);
}

struct sr_daemon_conn *sr_ctx_daemon(struct sr_context *ctx, int *err)
{
	struct sr_daemon_conn *d;

	pthread_mutex_lock(&ctx->lock);
	d = ctx->daemon;
	if (atomic_load(&ctx->fatal) || (d && sr_daemon_dead(d))) {
		/* its QPNs may be handed out again by a new daemon */
		pthread_mutex_unlock(&ctx->lock);
		*err = -EIO;
		return NULL;
	}
	if (!d) {
		d = sr_daemon_open(daemon_pkt, ctx, err);
		if (d) {
			struct epoll_event ev = { .events = EPOLLIN, .data.ptr = SR_EP_DAEMON };
			ctx->daemon = d;
			sr_tsan_release(&ctx->prog.epfd);
			sr_tsan_release(&ctx->prog.data_epfd);
			epoll_ctl(ctx->prog.epfd, EPOLL_CTL_ADD, sr_daemon_fd(d), &ev);
			/* pollers learn of its input with their sockets' (sr_progress_receive) */
			epoll_ctl(ctx->prog.data_epfd, EPOLL_CTL_ADD, sr_daemon_fd(d), &ev);
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	return d;
}

void sr_ctx_daemon_readable(struct sr_context *ctx)
{
	if (!ctx->daemon || sr_daemon_dead(ctx->daemon))
		return; /* a receive pass's stale look */
	sr_daemon_on_readable(ctx->daemon);
	if (sr_daemon_dead(ctx->daemon)) {
		/* EOF stays readable.  A new daemon would hand out
		 * our QPNs again, and nobody routes to us now. */
		epoll_ctl(ctx->prog.epfd, EPOLL_CTL_DEL, sr_daemon_fd(ctx->daemon), NULL);
		epoll_ctl(ctx->prog.data_epfd, EPOLL_CTL_DEL, sr_daemon_fd(ctx->daemon), NULL);
		sr_ctx_fatal(ctx, "lost the connection to softrdmad");
	}
}
