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

#include "core/guard.h"
#include "core/sr.h"
#include "common/daemon_client.h"
#include "common/env.h"
#include "common/thread.h"

#define SR_EP_DOORBELL ((void *)1)
#define SR_EP_DAEMON ((void *)2)
#define SR_EP_DATA ((void *)3)

struct sr_ep_tag {
	struct sr_qp *qp;
	int fd;
};

/* ---- daemon connection ---- */

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
			sr_tsan_release(&ctx->epfd);
			epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, sr_daemon_fd(d), &ev);
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	return d;
}

/* ---- fds ---- */

/* The QPs' sockets live in data_epfd, itself watched by the progress
 * thread's epfd: an application thread polling an empty CQ asks the
 * kernel which sockets have input (one epoll_wait) instead of trying
 * every QP, so its cost does not grow with idle QPs. */
int sr_progress_add_fd(struct sr_context *ctx, int fd, struct sr_qp *qp)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = qp };

	sr_tsan_release(&ctx->data_epfd);
	if (epoll_ctl(ctx->data_epfd, EPOLL_CTL_ADD, fd, &ev))
		return -errno;
	atomic_fetch_add(&ctx->n_data_fds, 1);
	atomic_fetch_add(&ctx->data_fds_gen, 1);
	return 0;
}

int sr_progress_mod_fd(struct sr_context *ctx, int fd, struct sr_qp *qp, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = qp };

	sr_tsan_release(&ctx->data_epfd);
	return epoll_ctl(ctx->data_epfd, EPOLL_CTL_MOD, fd, &ev) ? -errno : 0;
}

void sr_progress_del_fd(struct sr_context *ctx, int fd)
{
	if (!epoll_ctl(ctx->data_epfd, EPOLL_CTL_DEL, fd, NULL)) {
		atomic_fetch_sub(&ctx->n_data_fds, 1);
		atomic_fetch_add(&ctx->data_fds_gen, 1);
	}
}

/* The context whose progress thread this is (NULL in other threads). */
static __thread struct sr_context *tls_progress_ctx;

static void progress_deadline(struct sr_context *ctx, uint64_t when)
{
	/* A timer armed from an application thread that falls before the
	 * progress thread's wake-up time must wake it, or it fires late.
	 * timers_dirty closes the window in which the thread has looked at
	 * the timers but not yet published its new wake-up time: either it
	 * sees the flag and looks again, or we see that time. */
	atomic_store(&ctx->timers_dirty, true);
	/* the thread itself looks at its timers before it sleeps again */
	if (tls_progress_ctx != ctx && when < atomic_load(&ctx->sleep_until))
		sr_progress_wake(ctx);
}

/* ---- timers: only QPs with a deadline are visited ---- */

static bool timer_set_add(struct sr_qp *qp);

void sr_qp_timer_arm(struct sr_qp *qp, uint64_t when)
{
	if (timer_set_add(qp))
		progress_deadline(qp->ctx, when);
}

void sr_qp_timer_arm_slack(struct sr_qp *qp, uint64_t when, uint64_t slack_ns)
{
	if (timer_set_add(qp))
		progress_deadline(qp->ctx, when + slack_ns);
}

/* Puts qp in the set the timer pass visits; false if that cannot be. */
static bool timer_set_add(struct sr_qp *qp)
{
	struct sr_context *ctx = qp->ctx;

	if (!atomic_load_explicit(&qp->timer_slot, memory_order_relaxed) && !qp->dead) {
		pthread_mutex_lock(&ctx->timer_lock);
		if (ctx->n_timer_qps == ctx->timer_qps_cap) {
			uint32_t nc = ctx->timer_qps_cap ? ctx->timer_qps_cap * 2 : 64;
			struct sr_qp **t = realloc(ctx->timer_qps, nc * sizeof(*t));
			if (!t) {
				/* no room: the timer fires when the QP next is in the set */
				pthread_mutex_unlock(&ctx->timer_lock);
				sr_log("out of memory for a QP timer");
				return false;
			}
			ctx->timer_qps = t;
			ctx->timer_qps_cap = nc;
		}
		ctx->timer_qps[ctx->n_timer_qps++] = qp;
		atomic_store_explicit(&qp->timer_slot, ctx->n_timer_qps, memory_order_relaxed);
		pthread_mutex_unlock(&ctx->timer_lock);
	}
	return !qp->dead;
}

void sr_qp_timer_disarm(struct sr_qp *qp)
{
	struct sr_context *ctx = qp->ctx;

	if (!atomic_load_explicit(&qp->timer_slot, memory_order_relaxed))
		return;
	pthread_mutex_lock(&ctx->timer_lock);
	uint32_t i = atomic_load_explicit(&qp->timer_slot, memory_order_relaxed) - 1;
	struct sr_qp *last = ctx->timer_qps[--ctx->n_timer_qps];
	ctx->timer_qps[i] = last;
	atomic_store_explicit(&last->timer_slot, i + 1, memory_order_relaxed);
	atomic_store_explicit(&qp->timer_slot, 0, memory_order_relaxed);
	pthread_mutex_unlock(&ctx->timer_lock);
}

/* ---- sends parked for a batch: released by the next poll ---- */

bool sr_qp_park(struct sr_qp *qp)
{
	struct sr_context *ctx = qp->ctx;
	bool ok = true;

	if (atomic_load_explicit(&qp->in_held, memory_order_relaxed))
		return true;
	pthread_mutex_lock(&ctx->held_lock);
	uint32_t n = atomic_load_explicit(&ctx->n_held_qps, memory_order_relaxed);
	if (n < SR_HELD_QPS && !qp->dead) {
		uint64_t now = n ? 0 : sr_now_ns();
		if (!n)
			atomic_store_explicit(&ctx->held_since, now, memory_order_relaxed);
		ctx->held_qps[n] = qp;
		atomic_store_explicit(&qp->in_held, true, memory_order_relaxed);
		atomic_store_explicit(&ctx->n_held_qps, n + 1, memory_order_relaxed);
		/* The progress thread releases what no poll did: make sure it
		 * looks by then (one ticking anyway is not woken).  After the
		 * set is published: the thread that sees the deadline must
		 * also see the set, or it sleeps on without it. */
		if (!n)
			progress_deadline(ctx, now + SR_PARK_MAX_NS + SR_PROGRESS_TICK_NS);
	} else {
		ok = false;
	}
	pthread_mutex_unlock(&ctx->held_lock);
	return ok;
}

static bool post_in_burst(struct sr_qp *qp, uint64_t now)
{
	if (!qp->post_end_ns || now - qp->post_end_ns >= SR_TX_BURST_NS)
		return false;
	if (qp->in_burst)
		return true;
	uint64_t polled = atomic_load_explicit(&qp->ctx->last_poll_ns, memory_order_relaxed);
	uint64_t reaped = atomic_load_explicit(&qp->ctx->last_reap_ns, memory_order_relaxed);

	if (reaped > polled)
		polled = reaped;
	return polled && now - polled < SR_TX_POLLER_NS;
}

bool sr_post_in_burst(struct sr_qp *qp, uint64_t now)
{
	return qp->in_burst = post_in_burst(qp, now);
}

void sr_qp_unpark(struct sr_qp *qp)
{
	struct sr_context *ctx = qp->ctx;

	if (!atomic_load_explicit(&qp->in_held, memory_order_relaxed))
		return;
	pthread_mutex_lock(&ctx->held_lock);
	uint32_t n = atomic_load_explicit(&ctx->n_held_qps, memory_order_relaxed);
	for (uint32_t i = 0; i < n; i++) {
		if (ctx->held_qps[i] == qp) {
			ctx->held_qps[i] = ctx->held_qps[n - 1];
			atomic_store_explicit(&ctx->n_held_qps, n - 1, memory_order_relaxed);
			break;
		}
	}
	atomic_store_explicit(&qp->in_held, false, memory_order_relaxed);
	pthread_mutex_unlock(&ctx->held_lock);
}

/* progress_lock held: a QP destroyed meanwhile stays allocated (a zombie
 * is freed only past that lock, free_zombies) and says so in qp->dead. */
static void release_parked(struct sr_context *ctx)
{
	struct sr_qp *qps[SR_HELD_QPS];
	uint32_t n;

	if (!atomic_load_explicit(&ctx->n_held_qps, memory_order_relaxed))
		return;
	pthread_mutex_lock(&ctx->held_lock);
	n = atomic_load_explicit(&ctx->n_held_qps, memory_order_relaxed);
	memcpy(qps, ctx->held_qps, n * sizeof(*qps));
	for (uint32_t i = 0; i < n; i++)
		atomic_store_explicit(&qps[i]->in_held, false, memory_order_relaxed);
	atomic_store_explicit(&ctx->n_held_qps, 0, memory_order_relaxed);
	pthread_mutex_unlock(&ctx->held_lock);
	for (uint32_t i = 0; i < n; i++) {
		pthread_mutex_lock(&qps[i]->lock);
		if (!qps[i]->dead && ctx->dev->tops->sq_release)
			ctx->dev->tops->sq_release(qps[i]);
		pthread_mutex_unlock(&qps[i]->lock);
	}
}

/* The same, taking progress_lock. */
static void release_parked_now(struct sr_context *ctx)
{
	pthread_mutex_lock(&ctx->progress_lock);
	release_parked(ctx);
	pthread_mutex_unlock(&ctx->progress_lock);
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
	/* A poller may hold a zombie's address from an epoll_wait made before
	 * its socket left data_epfd; it does so only under progress_lock. */
	if (z) {
		pthread_mutex_lock(&ctx->progress_lock);
		pthread_mutex_unlock(&ctx->progress_lock);
	}
	while (z) {
		struct sr_qp *n = z->zombie_next;
		sr_ring_free(z->sq.buf, &z->sq.mem);
		free(z->sq.ud_av);
		sr_ring_free(z->rq.buf, &z->rq.mem);
		free(z);
		z = n;
	}
}

/* Fires the deadlines that are due and returns the next one (0 = none).
 * Only the progress thread calls it, so QPs in the snapshot stay
 * allocated: destroyed ones are freed by this thread (free_zombies). */
static uint64_t run_timers(struct sr_context *ctx)
{
	uint64_t now = sr_now_ns(), next = 0;
	const struct sr_transport_ops *t = ctx->dev->tops;
	uint32_t n;
	bool truncated = false;

	pthread_mutex_lock(&ctx->timer_lock);
	n = ctx->n_timer_qps;
	if (n > ctx->timer_snap_cap) {
		struct sr_qp **s = realloc(ctx->timer_snap, n * sizeof(*s));
		if (s) {
			ctx->timer_snap = s;
			ctx->timer_snap_cap = n;
		} else {
			n = ctx->timer_snap_cap; /* the rest next time round */
			truncated = true;
		}
	}
	if (n)
		memcpy(ctx->timer_snap, ctx->timer_qps, n * sizeof(*ctx->timer_snap));
	pthread_mutex_unlock(&ctx->timer_lock);

	for (uint32_t i = 0; i < n; i++) {
		struct sr_qp *qp = ctx->timer_snap[i];
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

/* Receive on the sockets that have input (progress_lock held).  With one
 * socket in the context (a ping-pong), once epoll_wait has said whose it
 * is, and as long as no socket came or went since (data_fds_gen), ask
 * that QP directly: one system call instead of epoll_wait and then the
 * receive. */
static void receive_ready(struct sr_context *ctx)
{
	const struct sr_transport_ops *t = ctx->dev->tops;
	struct epoll_event evs[64];
	uint32_t gen = atomic_load(&ctx->data_fds_gen);
	int n;

	if (ctx->sole_qp && ctx->sole_qp_gen == gen) {
		evs[0].data.ptr = ctx->sole_qp;
		n = 1;
	} else {
		n = epoll_wait(ctx->data_epfd, evs, 64, 0);
		if (n > 0)
			sr_tsan_acquire(&ctx->data_epfd); /* what epoll_ctl published */
		bool sole = n == 1 && atomic_load(&ctx->n_data_fds) == 1;
		ctx->sole_qp = sole ? evs[0].data.ptr : NULL;
		ctx->sole_qp_gen = gen;
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
		pthread_mutex_lock(&qp->lock);
		if (!qp->dead)
			t->on_readable(qp, -1);
		pthread_mutex_unlock(&qp->lock);
	}
	t->rx_flush(ctx);
	sr_guard_release();
}

/* Receive coalescing, as a NIC's interrupt moderation (ethtool's
 * rx-usecs).  The progress thread sleeps in epoll_wait while its sockets
 * are empty, and every datagram that arrives then wakes it: in a stream
 * of large RDMA Writes, one wake-up per datagram, each paid by the
 * sender's system call (on loopback it delivers the datagram and wakes
 * the receiver) and by the receiver's switch in.  After a receive pass
 * that took at least SR_RX_COALESCE_MIN_BYTES the thread naps
 * rx_coalesce_ns instead, while the next datagrams queue without waking
 * anyone, and takes them in one pass.  A ping-pong never triggers it (one
 * message in flight, under the threshold up to 64 KiB); above, a nap
 * delays the next message's first datagrams, which come a round trip
 * later anyway.  RoCE only: on a TCP stream (Soft-iWARP) it made 4 KiB
 * Writes 16% slower.  SOFTRDMA_RX_COALESCE_US sets the nap (0: off). */
#define SR_RX_COALESCE_MIN_BYTES 131072
#define SR_RX_COALESCE_DEFAULT_US 20
#define SR_RX_COALESCE_MAX_US 1000

__thread uint64_t sr_rx_bytes;

static uint64_t rx_coalesce_ns(void)
{
	return (uint64_t)sr_env_range("SOFTRDMA_RX_COALESCE_US", SR_RX_COALESCE_DEFAULT_US, SR_RX_COALESCE_MAX_US,
				      "microseconds") * 1000ull;
}

/* A poll that received this much: pollers take a stream (see
 * poller_recheck_ns). */
#define SR_POLLER_BULK_BYTES 16384

/* Pollers nap too, where they know a stream is coming.  A requester of
 * large RDMA Reads (ib_read_bw 64 KiB: 2 MiB of responses in flight)
 * polls its CQ without pause, and each empty poll was a recvmmsg on the
 * socket the responder was filling: the poller took the responses a
 * datagram or two at a time (34 KiB per pass on average) and the
 * responder's sends, contending for that socket's queue with a thread
 * that never stopped, cost it 40-50% more CPU per response than with a
 * requester sleeping on a completion channel (933-1051 ms against
 * 613-734 ms for 40,000 responses).  So after a poll that received
 * SR_POLLER_BULK_BYTES or more while the QPs it served still await
 * SR_POLLER_NAP_EXPECTED_BYTES of Read responses (sr_rx_expected),
 * pollers leave the sockets alone for rx_coalesce_ns, pausing the CPU
 * between looks at their CQ (poller_nap_relax): the responses queue and
 * leave in larger passes.  What is still awaited arrives in more than
 * a nap at the rates of this machine (128 KiB at 4 GB/s: 32 us), so the
 * nap ends before the data does: a Read completes no later than without
 * it.  A ping-pong never naps (it awaits one message), nor does any
 * stream the poller cannot foresee (Sends, Write ACKs). */
#define SR_POLLER_NAP_EXPECTED_BYTES 131072

__thread uint64_t sr_rx_expected;

/* An empty poll during a nap: a moment without system calls or shared
 * cache lines, so that the application's loop of empty polls (each takes
 * the progress lock and reads the clock) runs slower.  With it, napping
 * pollers gave ib_read_bw 64 KiB 3047-3755 MB/s against 2959-3429
 * without (4 alternating pairs: a gain inside the runs' spread). */
static void poller_nap_relax(void)
{
	for (int i = 0; i < 32; i++) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#elif defined(__aarch64__)
		__asm__ volatile("yield");
#endif
	}
}

/* A poll's receive pass took sr_rx_bytes: tell the progress thread, and
 * nap if a stream of Read responses is still coming. */
static void poll_received(struct sr_context *ctx)
{
	uint64_t now = sr_now_ns();
	atomic_store_explicit(&ctx->last_poll_rx_ns, now, memory_order_relaxed);
	if (sr_rx_bytes < SR_POLLER_BULK_BYTES)
		return;
	atomic_store_explicit(&ctx->last_bulk_poll_ns, now, memory_order_relaxed);
	if (ctx->rx_coalesce_ns && sr_rx_expected >= SR_POLLER_NAP_EXPECTED_BYTES)
		atomic_store_explicit(&ctx->poll_nap_until, now + ctx->rx_coalesce_ns, memory_order_relaxed);
}

/* Drive progress from an application thread that is polling an empty CQ:
 * spinning pollers then see their completions without a thread handoff.
 * Does nothing if the progress thread (or another poller) is at work. */
void sr_progress_poll(struct sr_context *ctx)
{
	uint64_t now = sr_now_ns();
	atomic_store_explicit(&ctx->last_poll_ns, now, memory_order_relaxed);
	bool nap = now < atomic_load_explicit(&ctx->poll_nap_until, memory_order_relaxed);
	if (nap)
		poller_nap_relax();
	if (pthread_mutex_trylock(&ctx->progress_lock))
		return;
	if (!nap) {
		sr_rx_bytes = 0;
		sr_rx_expected = 0;
		receive_ready(ctx);
		if (sr_rx_bytes)
			poll_received(ctx);
	}
	/* the application polls an empty CQ: it has posted what it had */
	release_parked(ctx);
	/* datagrams through the daemon are UD (and rare collisions, which the
	 * progress thread serves): only UD users pay for checking it here */
	if (ctx->daemon && atomic_load(&ctx->n_ud_qps) && !sr_daemon_dead(ctx->daemon)) {
		sr_daemon_on_readable(ctx->daemon);
		if (sr_daemon_dead(ctx->daemon))
			sr_ctx_fatal(ctx, "lost the connection to softrdmad");
	}
	pthread_mutex_unlock(&ctx->progress_lock);
}

void sr_progress_reaped(struct sr_context *ctx)
{
	atomic_store_explicit(&ctx->last_reap_ns, sr_now_ns(), memory_order_relaxed);
	if (atomic_load_explicit(&ctx->n_held_qps, memory_order_relaxed) && !pthread_mutex_trylock(&ctx->progress_lock)) {
		release_parked(ctx);
		pthread_mutex_unlock(&ctx->progress_lock);
	}
}

/* How the progress thread and pollers share the receiving.
 *
 * An application thread polling an empty CQ receives for itself
 * (sr_progress_poll).  While it keeps doing so, the progress thread had
 * better stay out of the way: every packet would wake it too, and where
 * there are as many busy threads as cores that wake-up preempts the very
 * thread about to receive the packet.  So when the thread finds that a
 * poller took the input that woke it, it takes the sockets (data_epfd)
 * out of its wait and only looks again every SR_POLLER_RECHECK_NS:
 * input still waiting then, no poll for that long, or the application
 * going to sleep on a completion channel (sr_progress_need_thread), and
 * it receives again itself.
 *
 * Where pollers receive a stream (a poll took SR_POLLER_BULK_BYTES or
 * more in the last SR_POLLER_BULK_RECHECK_NS), the thread stays out for
 * SR_POLLER_BULK_RECHECK_NS instead.  A stream's poller finds its CQ
 * stocked for longer stretches (RDMA READ responses of 4-16 KiB complete
 * in bursts), and after 100 us the thread took the receiving back, then
 * ran beside the poller on two cores shared by three busy threads:
 * ib_read_bw 4 KiB moved 3194 MB/s before and 4675 after, 16 KiB 1467
 * and 1763 (alternating pairs on a quiet 2-core VM); 64 KiB and above,
 * Writes and Sends were unchanged within the spread.  A ping-pong never
 * qualifies, so an application that spins on memory between polls (a
 * Write latency test) still has the thread back within 100 us; a
 * stream's last transfer may wait up to 1 ms (the retransmission timer
 * is at least 4 ms) if its poller stops polling before it arrives. */
#define SR_POLLER_RECENT_NS 20000ull   /* a poll this recent: a poller is at work */
#define SR_POLLER_RECHECK_NS 100000ull
#define SR_POLLER_BULK_RECHECK_NS 1000000ull

static uint64_t poller_recheck_ns(struct sr_context *ctx, uint64_t now)
{
	uint64_t b = atomic_load_explicit(&ctx->last_bulk_poll_ns, memory_order_relaxed);
	return b && now - b < SR_POLLER_BULK_RECHECK_NS ? SR_POLLER_BULK_RECHECK_NS : SR_POLLER_RECHECK_NS;
}
#define SR_POLLER_GRACE_NS 10000       /* what a poller gets to take input it may have seen */

static void data_arm(struct sr_context *ctx, bool on)
{
	struct epoll_event ev = { .events = on ? EPOLLIN : 0, .data.ptr = SR_EP_DATA };

	if (atomic_load_explicit(&ctx->data_armed, memory_order_relaxed) == on)
		return;
	if (!epoll_ctl(ctx->epfd, EPOLL_CTL_MOD, ctx->data_epfd, &ev))
		atomic_store(&ctx->data_armed, on);
}

/* Is there input that pollers leave alone?  Input waiting now, and
 * still waiting after the grace time, during which no poll received
 * anything.  (A level-triggered epoll_wait that takes nothing away.)
 * Where pollers receive a stream, the sockets are never empty: new
 * datagrams come while the poller takes the last ones.  Asking only
 * whether input waits after the grace then called every stream's input
 * left alone, and the thread, armed for good, received beside the poller
 * (ib_read_bw 64 KiB: the requester's thread took 43% of the datagrams,
 * with the application polling on the other core). */
static bool data_left(struct sr_context *ctx)
{
	struct epoll_event ev;
	struct timespec nap = { 0, SR_POLLER_GRACE_NS };

	if (epoll_wait(ctx->data_epfd, &ev, 1, 0) <= 0)
		return false;
	uint64_t t0 = sr_now_ns();
	nanosleep(&nap, NULL);
	if (atomic_load_explicit(&ctx->last_poll_rx_ns, memory_order_relaxed) >= t0 ||
	    atomic_load_explicit(&ctx->poll_nap_until, memory_order_relaxed) >= t0)
		return false; /* a poller took input, or naps after a stream's pass */
	return epoll_wait(ctx->data_epfd, &ev, 1, 0) > 0;
}

void sr_progress_need_thread(struct sr_context *ctx)
{
	atomic_store_explicit(&ctx->last_poll_ns, 0, memory_order_relaxed);
	if (atomic_load_explicit(&ctx->n_held_qps, memory_order_relaxed))
		release_parked_now(ctx);
	if (!atomic_load(&ctx->data_armed)) {
		atomic_store(&ctx->want_armed, true);
		sr_progress_wake(ctx);
	}
}

static void *progress_main(void *arg)
{
	struct sr_context *ctx = arg;
	struct epoll_event evs[64];

	tls_progress_ctx = ctx;
	/* our naps and timers are in microseconds; the default 50 us slack would swamp them */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

	while (!atomic_load(&ctx->stop)) {
		free_zombies(ctx);
		atomic_store(&ctx->timers_dirty, false);
		uint64_t next = run_timers(ctx);
		uint64_t now = sr_now_ns(), wake = next;
		if (atomic_load_explicit(&ctx->n_held_qps, memory_order_relaxed)) {
			/* sends parked for a poll that has not come */
			uint64_t due = atomic_load_explicit(&ctx->held_since, memory_order_relaxed) + SR_PARK_MAX_NS;
			if (due <= now)
				release_parked_now(ctx);
			else if (!wake || due + SR_PROGRESS_TICK_NS < wake)
				wake = due + SR_PROGRESS_TICK_NS;
		}
		uint64_t lp = atomic_load_explicit(&ctx->last_poll_ns, memory_order_relaxed);
		uint64_t lpost = atomic_load_explicit(&ctx->last_post_ns, memory_order_relaxed);
		if (lpost && now - lpost < SR_PROGRESS_TICK_FOR_NS && (!wake || wake > now + SR_PROGRESS_TICK_NS))
			wake = now + SR_PROGRESS_TICK_NS; /* see sr_qp_timer_arm_slack */
		if (!atomic_load_explicit(&ctx->data_armed, memory_order_relaxed)) {
			uint64_t recheck = poller_recheck_ns(ctx, now);
			if (atomic_exchange(&ctx->want_armed, false) || !lp || now - lp >= recheck ||
			    data_left(ctx))
				data_arm(ctx, true);
			else if (!wake || lp + recheck < wake)
				wake = lp + recheck;
		}
		struct timespec ts, *tsp = NULL;
		atomic_store(&ctx->sleep_until, wake ? wake : UINT64_MAX);
		if (atomic_load(&ctx->timers_dirty)) {
			atomic_store(&ctx->sleep_until, 0); /* armers wake us meanwhile */
			continue;
		}
		if (wake) {
			now = sr_now_ns();
			uint64_t d = wake > now ? wake - now : 0;
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
		bool data = false;
		for (int i = 0; i < n; i++)
			if (evs[i].data.ptr == SR_EP_DATA)
				data = true;
		/* Input while an application thread polls: it is receiving for
		 * us.  If it takes this, leave the receiving to it (above). */
		lp = atomic_load_explicit(&ctx->last_poll_ns, memory_order_relaxed);
		if (data && lp && sr_now_ns() - lp < SR_POLLER_RECENT_NS && !data_left(ctx)) {
			if (ctx->poll_drive)
				data_arm(ctx, false);
			data = false;
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
			}
		}
		sr_rx_bytes = 0;
		if (data)
			receive_ready(ctx);
		else
			ctx->dev->tops->rx_flush(ctx);
		pthread_mutex_unlock(&ctx->progress_lock);
		if (ctx->rx_coalesce_ns && sr_rx_bytes >= SR_RX_COALESCE_MIN_BYTES &&
		    ctx->dev->conf.type == SR_DEV_ROCE) {
			/* a stream: let the next datagrams gather (see above) */
			struct timespec nap = { 0, (long)ctx->rx_coalesce_ns };
			nanosleep(&nap, NULL);
		}
	}
	return NULL;
}

int sr_progress_start(struct sr_context *ctx)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = SR_EP_DOORBELL };
	int err;

	struct epoll_event dev = { .events = EPOLLIN, .data.ptr = SR_EP_DATA };

	atomic_store(&ctx->data_armed, true);
	/* SOFTRDMA_POLL_DRIVE=0: the thread keeps waiting for input while
	 * applications poll (to compare, bench/run.sh) */
	const char *pd = getenv("SOFTRDMA_POLL_DRIVE");
	ctx->poll_drive = !pd || strcmp(pd, "0");
	ctx->rx_coalesce_ns = rx_coalesce_ns();

	ctx->epfd = epoll_create1(EPOLL_CLOEXEC);
	ctx->data_epfd = epoll_create1(EPOLL_CLOEXEC);
	ctx->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctx->epfd < 0 || ctx->data_epfd < 0 || ctx->doorbell < 0 ||
	    epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, ctx->doorbell, &ev) ||
	    epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, ctx->data_epfd, &dev))
		goto fail;
	sr_guard_init(); /* before the first packet is placed */
	err = sr_thread_start(&ctx->thread, "sr-progress", false, progress_main, ctx);
	if (err) {
		errno = err;
		goto fail;
	}
	ctx->thread_started = true;
	return 0;
fail:
	err = errno;
	if (ctx->epfd >= 0)
		close(ctx->epfd);
	if (ctx->data_epfd >= 0)
		close(ctx->data_epfd);
	if (ctx->doorbell >= 0)
		close(ctx->doorbell);
	ctx->epfd = ctx->data_epfd = ctx->doorbell = -1;
	errno = err;
	return -1;
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
	free(ctx->timer_qps);
	free(ctx->timer_snap);
	if (ctx->daemon)
		sr_daemon_close(ctx->daemon);
	ctx->daemon = NULL;
	close(ctx->epfd);
	close(ctx->data_epfd);
	close(ctx->doorbell);
}
