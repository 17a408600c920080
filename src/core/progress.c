/* The per-context progress engine: one thread running epoll over the QPs'
 * sockets, the daemon connection and a doorbell eventfd, firing the
 * transport's timers (retransmission, RNR, ACK coalescing).  It is what
 * serves one-sided READ/WRITE while the application sleeps. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>

#include "core/sr.h"
#include "common/daemon_client.h"
#include "common/thread.h"

#define SR_EP_DOORBELL ((void *)1)
#define SR_EP_DAEMON ((void *)2)

struct sr_ep_tag {
	struct sr_qp *qp;
	int fd;
};

/* ---- QPN table (ctx->lock held) ---- */

static uint32_t qpn_slot(uint32_t qpn, uint32_t size) { return (qpn * 0x9E3779B1u) & (size - 1); }

struct sr_qp *sr_ctx_find_qp(struct sr_context *ctx, uint32_t qpn)
{
	if (!ctx->qpn_tab_size)
		return NULL;
	for (uint32_t i = qpn_slot(qpn, ctx->qpn_tab_size), n = 0; n < ctx->qpn_tab_size;
	     i = (i + 1) & (ctx->qpn_tab_size - 1), n++) {
		struct sr_qp *qp = ctx->qpn_tab[i];
		if (!qp)
			return NULL;
		if (qp != (struct sr_qp *)-1 && qp->ibqp.qp_base.qp_num == qpn)
			return qp;
	}
	return NULL;
}

static void qpn_tab_insert(struct sr_context *ctx, struct sr_qp *qp)
{
	uint32_t i = qpn_slot(qp->ibqp.qp_base.qp_num, ctx->qpn_tab_size);
	while (ctx->qpn_tab[i] && ctx->qpn_tab[i] != (struct sr_qp *)-1)
		i = (i + 1) & (ctx->qpn_tab_size - 1);
	ctx->qpn_tab[i] = qp;
}

void sr_ctx_add_qp(struct sr_context *ctx, struct sr_qp *qp)
{
	pthread_mutex_lock(&ctx->lock);
	uint32_t n = 0;
	for (struct sr_qp *q = ctx->qp_list; q; q = q->next)
		n++;
	if ((n + 1) * 2 > ctx->qpn_tab_size) {
		/* grow and rehash, dropping tombstones */
		uint32_t ns = ctx->qpn_tab_size ? ctx->qpn_tab_size * 2 : 64;
		struct sr_qp **t = calloc(ns, sizeof(*t));
		if (t) {
			free(ctx->qpn_tab);
			ctx->qpn_tab = t;
			ctx->qpn_tab_size = ns;
			for (struct sr_qp *q = ctx->qp_list; q; q = q->next)
				qpn_tab_insert(ctx, q);
		}
	}
	qp->next = ctx->qp_list;
	ctx->qp_list = qp;
	if (ctx->qpn_tab_size)
		qpn_tab_insert(ctx, qp);
	pthread_mutex_unlock(&ctx->lock);
}

void sr_ctx_remove_qp(struct sr_context *ctx, struct sr_qp *qp)
{
	pthread_mutex_lock(&ctx->lock);
	for (struct sr_qp **pp = &ctx->qp_list; *pp; pp = &(*pp)->next)
		if (*pp == qp) {
			*pp = qp->next;
			break;
		}
	for (uint32_t i = 0; i < ctx->qpn_tab_size; i++)
		if (ctx->qpn_tab[i] == qp)
			ctx->qpn_tab[i] = (struct sr_qp *)-1; /* tombstone keeps probe chains */
	pthread_mutex_unlock(&ctx->lock);
}

/* ---- daemon connection ---- */

void sr_ctx_deliver(struct sr_context *ctx, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len)
{
	uint32_t qpn;
	struct sr_qp *qp;

	if (len < 12)
		return;
	qpn = ((uint32_t)data[5] << 16) | ((uint32_t)data[6] << 8) | data[7];
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
			ctx->dev->tops->deliver(qp, meta, data, len);
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
			sr_tsan_release(&ctx->epfd);
			epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, sr_daemon_fd(d), &ev);
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	return d;
}

/* ---- fds ---- */

int sr_progress_add_fd(struct sr_context *ctx, int fd, struct sr_qp *qp)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = qp };

	sr_tsan_release(&ctx->epfd);
	return epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

void sr_progress_del_fd(struct sr_context *ctx, int fd)
{
	epoll_ctl(ctx->epfd, EPOLL_CTL_DEL, fd, NULL);
}

void sr_progress_deadline(struct sr_context *ctx, uint64_t when)
{
	/* a timer armed from an application thread that falls before the
	 * progress thread's wake-up time must wake it, or it fires late */
	if (when < atomic_load(&ctx->sleep_until))
		sr_progress_wake(ctx);
}

void sr_progress_wake(struct sr_context *ctx)
{
	uint64_t one = 1;
	ssize_t r = write(ctx->doorbell, &one, sizeof(one));
	(void)r;
}

/* ---- the loop ---- */

static void free_zombies(struct sr_context *ctx)
{
	struct sr_qp *z;

	pthread_mutex_lock(&ctx->lock);
	z = ctx->zombies;
	ctx->zombies = NULL;
	pthread_mutex_unlock(&ctx->lock);
	while (z) {
		struct sr_qp *n = z->zombie_next;
		free(z->sq.buf);
		free(z->rq.buf);
		free(z);
		z = n;
	}
}

static uint64_t run_timers(struct sr_context *ctx)
{
	uint64_t now = sr_now_ns(), next = 0;
	const struct sr_transport_ops *t = ctx->dev->tops;

	pthread_mutex_lock(&ctx->lock);
	for (struct sr_qp *qp = ctx->qp_list; qp; qp = qp->next) {
		pthread_mutex_lock(&qp->lock);
		uint64_t d = t->next_deadline(qp);
		if (d && d <= now) {
			t->on_timer(qp, now);
			d = t->next_deadline(qp);
		}
		pthread_mutex_unlock(&qp->lock);
		if (d && (!next || d < next))
			next = d;
	}
	pthread_mutex_unlock(&ctx->lock);
	return next;
}

/* Drive progress from an application thread that is polling an empty CQ:
 * spinning pollers then see their completions without a thread handoff.
 * Does nothing if the progress thread (or another poller) is at work. */
void sr_progress_poll(struct sr_context *ctx)
{
	atomic_store_explicit(&ctx->last_poll_ns, sr_now_ns(), memory_order_relaxed);
	if (pthread_mutex_trylock(&ctx->progress_lock))
		return;
	const struct sr_transport_ops *t = ctx->dev->tops;
	pthread_mutex_lock(&ctx->lock);
	for (struct sr_qp *qp = ctx->qp_list; qp; qp = qp->next) {
		pthread_mutex_lock(&qp->lock);
		if (!qp->dead)
			t->on_readable(qp, -1);
		pthread_mutex_unlock(&qp->lock);
	}
	pthread_mutex_unlock(&ctx->lock);
	t->rx_flush(ctx);
	/* datagrams through the daemon are UD (and rare collisions, which the
	 * progress thread serves): only UD users pay for checking it here */
	if (ctx->daemon && atomic_load(&ctx->n_ud_qps) && !sr_daemon_dead(ctx->daemon)) {
		sr_daemon_on_readable(ctx->daemon);
		if (sr_daemon_dead(ctx->daemon))
			sr_ctx_fatal(ctx, "lost the connection to softrdmad");
	}
	pthread_mutex_unlock(&ctx->progress_lock);
}

static void *progress_main(void *arg)
{
	struct sr_context *ctx = arg;
	struct epoll_event evs[64];

	/* our naps and timers are in microseconds; the default 50 us slack would swamp them */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

	while (!atomic_load(&ctx->stop)) {
		free_zombies(ctx);
		/* While the timers are read, a deadline armed from another
		 * thread must wake us: after run_timers has passed its QP, the
		 * sleep_until it compares with would otherwise be the last
		 * pass's (a time long gone), no wake-up would be sent, and we
		 * would sleep past the new deadline, for ever if nothing else
		 * happens (an iWARP QP stalled by fault injection hung so). */
		atomic_store(&ctx->sleep_until, UINT64_MAX);
		uint64_t next = run_timers(ctx);
		struct timespec ts, *tsp = NULL;
		atomic_store(&ctx->sleep_until, next ? next : UINT64_MAX);
		if (next) {
			uint64_t now = sr_now_ns();
			uint64_t d = next > now ? next - now : 0;
			ts.tv_sec = (time_t)(d / 1000000000ull);
			ts.tv_nsec = (long)(d % 1000000000ull);
			tsp = &ts;
		}
		int n = epoll_pwait2(ctx->epfd, evs, 64, tsp, NULL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			sr_log("epoll_pwait2: %s", strerror(errno));
			break;
		}
		if (n > 0)
			sr_tsan_acquire(&ctx->epfd); /* what epoll_ctl published */
		/* An application spinning on its CQ is receiving for us; stepping
		 * in would only fight it for the lock (and on a busy machine get
		 * preempted while holding it).  Stay a backstop: look again soon. */
		uint64_t lp = atomic_load_explicit(&ctx->last_poll_ns, memory_order_relaxed);
		bool daemon_gone = false;
		for (int i = 0; i < n; i++)
			if (evs[i].data.ptr == SR_EP_DAEMON && (evs[i].events & (EPOLLHUP | EPOLLERR)))
				daemon_gone = true;
		/* ...except when the daemon is gone: an RC poller does not read
		 * the daemon's socket, and must hear of it (sr_ctx_fatal) */
		if (n > 0 && lp && sr_now_ns() - lp < 10000 && !daemon_gone) {
			for (int i = 0; i < n; i++)
				if (evs[i].data.ptr == SR_EP_DOORBELL) {
					uint64_t v;
					ssize_t r = read(ctx->doorbell, &v, sizeof(v));
					(void)r;
				}
			struct timespec nap = { 0, 10000 };
			nanosleep(&nap, NULL);
			continue;
		}
		pthread_mutex_lock(&ctx->progress_lock);
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			if (p == SR_EP_DOORBELL) {
				uint64_t v;
				ssize_t r = read(ctx->doorbell, &v, sizeof(v));
				(void)r;
			} else if (p == SR_EP_DAEMON) {
				sr_daemon_on_readable(ctx->daemon);
				if (sr_daemon_dead(ctx->daemon)) {
					/* EOF stays readable.  A new daemon would hand out
					 * our QPNs again, and nobody routes to us now. */
					epoll_ctl(ctx->epfd, EPOLL_CTL_DEL, sr_daemon_fd(ctx->daemon), NULL);
					sr_ctx_fatal(ctx, "lost the connection to softrdmad");
				}
			} else {
				struct sr_qp *qp = p;
				pthread_mutex_lock(&qp->lock);
				if (!qp->dead)
					ctx->dev->tops->on_readable(qp, -1);
				pthread_mutex_unlock(&qp->lock);
			}
		}
		ctx->dev->tops->rx_flush(ctx);
		pthread_mutex_unlock(&ctx->progress_lock);
	}
	return NULL;
}

int sr_progress_start(struct sr_context *ctx)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = SR_EP_DOORBELL };
	int err;

	ctx->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ctx->epfd < 0)
		return -1;
	ctx->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctx->doorbell < 0) {
		close(ctx->epfd);
		return -1;
	}
	epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, ctx->doorbell, &ev);
	err = sr_thread_start(&ctx->thread, "sr-progress", false, progress_main, ctx);
	if (err) {
		close(ctx->epfd);
		close(ctx->doorbell);
		errno = err;
		return -1;
	}
	ctx->thread_started = true;
	return 0;
}

void sr_progress_stop(struct sr_context *ctx)
{
	if (ctx->thread_started) {
		atomic_store(&ctx->stop, true);
		sr_progress_wake(ctx);
		pthread_join(ctx->thread, NULL);
		ctx->thread_started = false;
	}
	free_zombies(ctx);
	if (ctx->daemon)
		sr_daemon_close(ctx->daemon);
	ctx->daemon = NULL;
	close(ctx->epfd);
	close(ctx->doorbell);
}
