/* The per-context progress thread: epoll over the QPs' sockets, the
 * daemon connection and a doorbell eventfd, firing the transport's timers
 * (retransmission, RNR, ACK coalescing).  It is what serves one-sided
 * READ/WRITE while the application sleeps.  The rest of the progress
 * engine is listed in progress.h. */
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
#include "common/ipc_client.h"
#include "common/thread.h"

/* The context whose progress thread this is (NULL in other threads). */
static __thread struct sr_context *tls_progress_ctx;

void sr_progress_deadline(struct sr_context *ctx, uint64_t when)
{
	/* A timer armed from an application thread that falls before the
	 * progress thread's wake-up time must wake it, or it fires late.
	 * timers_dirty closes the window in which the thread has looked at
	 * the timers but not yet published its new wake-up time: either it
	 * sees the flag and looks again, or we see that time. */
	atomic_store(&ctx->prog.timers_dirty, true);
	/* the thread itself looks at its timers before it sleeps again */
	if (tls_progress_ctx != ctx && when < atomic_load(&ctx->prog.sleep_until))
		sr_progress_wake(ctx);
}

void sr_progress_wake(struct sr_context *ctx)
{
	uint64_t one = 1;
	ssize_t r = write(ctx->prog.doorbell, &one, sizeof(one));
	(void)r;
}

/* The progress thread lets go of the QPs destroyed since its last pass:
 * they move to ctx->reaped, freed by an application thread
 * (sr_reap_zombies).  This thread frees no QP memory itself: a large ring
 * is an mmapped chunk, and a program that rewrites munmap's code while it
 * runs (libfabric's memhooks monitor, UCX's binary patching) must never
 * find a library thread executing it. */
static void release_zombies(struct sr_context *ctx)
{
	struct sr_qp *z, *last;

	pthread_mutex_lock(&ctx->lock);
	z = ctx->zombies;
	ctx->zombies = NULL;
	pthread_mutex_unlock(&ctx->lock);
	if (!z)
		return;
	/* A poller may hold a zombie's address from an epoll_wait made before
	 * its socket left data_epfd; it does so only under prog.lock. */
	pthread_mutex_lock(&ctx->prog.lock);
	pthread_mutex_unlock(&ctx->prog.lock);
	for (last = z; last->zombie_next; last = last->zombie_next)
		;
	pthread_mutex_lock(&ctx->lock);
	last->zombie_next = ctx->reaped;
	ctx->reaped = z;
	pthread_mutex_unlock(&ctx->lock);
}

static void free_qps(struct sr_qp *z)
{
	while (z) {
		struct sr_qp *n = z->zombie_next;
		sr_ring_free(z->sq.buf, &z->sq.mem);
		free(z->sq.ud_av);
		sr_ring_free(z->rq.buf, &z->rq.mem);
		free(z);
		z = n;
	}
}

void sr_reap_zombies(struct sr_context *ctx)
{
	struct sr_qp *z;

	pthread_mutex_lock(&ctx->lock);
	z = ctx->reaped;
	ctx->reaped = NULL;
	pthread_mutex_unlock(&ctx->lock);
	free_qps(z);
}

/* epoll_wait with a nanosecond timeout (NULL: none).  Kernels before 5.11
 * and valgrind lack epoll_pwait2 (ENOSYS): then the timeout is rounded up
 * to a millisecond, so a timer fires late rather than spinning early. */
static int progress_wait(int epfd, struct epoll_event *evs, int n, const struct timespec *tsp)
{
	static atomic_bool no_pwait2;

	if (!atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
		int r = epoll_pwait2(epfd, evs, n, tsp, NULL);
		if (r >= 0 || errno != ENOSYS)
			return r;
		atomic_store_explicit(&no_pwait2, true, memory_order_relaxed);
	}
	int ms = -1;
	if (tsp) {
		uint64_t up = ((uint64_t)tsp->tv_sec * 1000000000ull + (uint64_t)tsp->tv_nsec + 999999) / 1000000;
		ms = up > INT_MAX ? INT_MAX : (int)up;
	}
	return epoll_wait(epfd, evs, n, ms);
}

/* After a wake-up: receive if the sockets have input for us, read the
 * daemon's connection if it has some, else make the transport's
 * notifications due (rx_flush).  A wake-up by its timeout alone (a timer,
 * a look at the pollers) does not wait for prog.lock: a poller holding it
 * receives, and waiting would make the two trade the lock (a futex
 * wake-up each way).  Whoever asks for the notifications rings the
 * doorbell (woke). */
static void receive_pass(struct sr_context *ctx, bool data, bool daemon, bool woke)
{
	sr_rx_bytes = 0;
	if (data || daemon || woke)
		pthread_mutex_lock(&ctx->prog.lock);
	else if (pthread_mutex_trylock(&ctx->prog.lock))
		return;
	if (daemon)
		sr_ctx_daemon_readable(ctx);
	if (data)
		sr_progress_receive(ctx);
	else
		ctx->dev->tops->rx_flush(ctx);
	pthread_mutex_unlock(&ctx->prog.lock);
}

static void *progress_main(void *arg)
{
	struct sr_context *ctx = arg;
	struct epoll_event evs[64];

	tls_progress_ctx = ctx;
	/* our naps and timers are in microseconds; the default 50 us slack would swamp them */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

	while (!atomic_load(&ctx->prog.stop)) {
		release_zombies(ctx);
		atomic_store(&ctx->prog.timers_dirty, false);
		uint64_t wake = sr_timers_run(ctx);
		uint64_t now = sr_now_ns();
		wake = sr_park_expire(ctx, now, wake);
		wake = sr_timers_tick(ctx, now, wake);
		wake = sr_poller_recheck(ctx, now, wake);
		struct timespec ts, *tsp = NULL;
		atomic_store(&ctx->prog.sleep_until, wake ? wake : UINT64_MAX);
		if (atomic_load(&ctx->prog.timers_dirty)) {
			atomic_store(&ctx->prog.sleep_until, 0); /* armers wake us meanwhile */
			continue;
		}
		if (wake) {
			now = sr_now_ns();
			uint64_t d = wake > now ? wake - now : 0;
			ts.tv_sec = (time_t)(d / 1000000000ull);
			ts.tv_nsec = (long)(d % 1000000000ull);
			tsp = &ts;
		}
		int n = progress_wait(ctx->prog.epfd, evs, 64, tsp);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			sr_log("progress thread: epoll wait: %s", strerror(errno));
			break;
		}
		if (n > 0)
			sr_tsan_acquire(&ctx->prog.epfd); /* what epoll_ctl published */
		bool data = false;
		for (int i = 0; i < n; i++)
			if (evs[i].data.ptr == SR_EP_DATA)
				data = true;
		if (data && sr_poller_takes_input(ctx))
			data = false;
		bool daemon = false, woke = false;
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			if (p == SR_EP_DOORBELL) {
				woke = true;
				uint64_t v;
				ssize_t r = read(ctx->prog.doorbell, &v, sizeof(v));
				(void)r;
			} else if (p == SR_EP_DAEMON) {
				daemon = true;
			}
		}
		receive_pass(ctx, data, daemon, woke);
		sr_rx_coalesce_nap(ctx);
	}
	return NULL;
}

int sr_progress_start(struct sr_context *ctx)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = SR_EP_DOORBELL };
	int err;

	struct epoll_event dev = { .events = EPOLLIN, .data.ptr = SR_EP_DATA };

	sr_poller_init(ctx);

	ctx->prog.epfd = epoll_create1(EPOLL_CLOEXEC);
	ctx->prog.data_epfd = epoll_create1(EPOLL_CLOEXEC);
	ctx->prog.doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctx->prog.epfd < 0 || ctx->prog.data_epfd < 0 || ctx->prog.doorbell < 0 ||
	    epoll_ctl(ctx->prog.epfd, EPOLL_CTL_ADD, ctx->prog.doorbell, &ev) ||
	    epoll_ctl(ctx->prog.epfd, EPOLL_CTL_ADD, ctx->prog.data_epfd, &dev))
		goto fail;
	sr_guard_init(); /* before the first packet is placed */
	err = sr_thread_start(&ctx->prog.thread, "sr-progress", false, progress_main, ctx);
	if (err) {
		errno = err;
		goto fail;
	}
	ctx->prog.thread_started = true;
	return 0;
fail:
	err = errno;
	if (ctx->prog.epfd >= 0)
		close(ctx->prog.epfd);
	if (ctx->prog.data_epfd >= 0)
		close(ctx->prog.data_epfd);
	if (ctx->prog.doorbell >= 0)
		close(ctx->prog.doorbell);
	ctx->prog.epfd = ctx->prog.data_epfd = ctx->prog.doorbell = -1;
	errno = err;
	return -1;
}

void sr_progress_stop(struct sr_context *ctx)
{
	if (ctx->prog.thread_started) {
		atomic_store(&ctx->prog.stop, true);
		sr_progress_wake(ctx);
		pthread_join(ctx->prog.thread, NULL);
		ctx->prog.thread_started = false;
	}
	/* the thread is gone: what it never saw is free too */
	sr_reap_zombies(ctx);
	free_qps(ctx->zombies);
	ctx->zombies = NULL;
	free(ctx->prog.timer_qps);
	free(ctx->prog.timer_snap);
	if (ctx->daemon)
		sr_daemon_close(ctx->daemon);
	ctx->daemon = NULL;
	close(ctx->prog.epfd);
	close(ctx->prog.data_epfd);
	close(ctx->prog.doorbell);
}
