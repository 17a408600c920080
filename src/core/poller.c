/* The poller policy: how the progress thread and application threads
 * polling their CQs share the receiving, and when each naps. */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include "core/sr.h"
#include "common/env.h"

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
 * later anyway.  RoCE only: a TCP stream (Soft-iWARP) already delivers
 * in large reads, and a nap only delays it.  SOFTRDMA_RX_COALESCE_US
 * sets the nap (0: off). */
#define SR_RX_COALESCE_MIN_BYTES 131072
#define SR_RX_COALESCE_DEFAULT_US 20
#define SR_RX_COALESCE_MAX_US 1000

__thread uint64_t sr_rx_bytes;

static uint64_t rx_coalesce_ns(void)
{
	return (uint64_t)sr_env_range("SOFTRDMA_RX_COALESCE_US", SR_RX_COALESCE_DEFAULT_US, SR_RX_COALESCE_MAX_US,
				      "microseconds") *
	       1000ull;
}

/* A poll that received this much: pollers take a stream (see
 * poller_recheck_ns). */
#define SR_POLLER_BULK_BYTES 16384

/* Pollers nap too, where they know a stream is coming.  After a poll
 * that received SR_POLLER_BULK_BYTES or more while the QPs it served
 * still await SR_POLLER_NAP_EXPECTED_BYTES of Read responses
 * (sr_rx_expected), pollers leave the sockets alone for rx_coalesce_ns,
 * pausing the CPU between looks at their CQ (poller_nap_relax): the
 * responses queue and are taken in larger passes.  Why: a poller that
 * never pauses takes a datagram or two per pass, and the responder's
 * sends contend with it for the socket's queue.  The threshold is chosen
 * so that what is still awaited takes longer to arrive than one nap: a
 * Read completes no later than without the nap.  A ping-pong never naps
 * (it awaits one message), nor does any stream the poller cannot foresee
 * (Sends, Write ACKs). */
#define SR_POLLER_NAP_EXPECTED_BYTES 131072

__thread uint64_t sr_rx_expected;

/* An empty poll during a nap: a moment without system calls or shared
 * cache lines, so that the application's loop of empty polls (each takes
 * the progress lock and reads the clock) runs slower. */
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
	atomic_store_explicit(&ctx->prog.last_poll_rx_ns, now, memory_order_relaxed);
	if (sr_rx_bytes < SR_POLLER_BULK_BYTES)
		return;
	atomic_store_explicit(&ctx->prog.last_bulk_poll_ns, now, memory_order_relaxed);
	if (ctx->prog.rx_coalesce_ns && sr_rx_expected >= SR_POLLER_NAP_EXPECTED_BYTES)
		atomic_store_explicit(&ctx->prog.poll_nap_until, now + ctx->prog.rx_coalesce_ns, memory_order_relaxed);
}

/* Spinning pollers see their completions without a thread handoff. */
void sr_progress_poll(struct sr_context *ctx)
{
	uint64_t now = sr_now_ns();
	atomic_store_explicit(&ctx->prog.last_poll_ns, now, memory_order_relaxed);
	bool nap = now < atomic_load_explicit(&ctx->prog.poll_nap_until, memory_order_relaxed);
	if (nap)
		poller_nap_relax();
	if (pthread_mutex_trylock(&ctx->prog.lock))
		return;
	if (!nap) {
		sr_rx_bytes = 0;
		sr_rx_expected = 0;
		sr_progress_receive(ctx);
		if (sr_rx_bytes)
			poll_received(ctx);
	}
	/* the application polls an empty CQ: it has posted what it had */
	sr_park_release(ctx);
	pthread_mutex_unlock(&ctx->prog.lock);
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
 * input still waiting then, or no poll for that long, and it receives
 * again itself.  (An application going to sleep on a completion channel
 * receives for itself too: see the channel readers below.)
 *
 * Where pollers receive a stream (a poll took SR_POLLER_BULK_BYTES or
 * more in the last SR_POLLER_BULK_RECHECK_NS), the thread stays out for
 * SR_POLLER_BULK_RECHECK_NS instead: a stream's poller finds its CQ
 * stocked for longer stretches (Read responses complete in bursts), and
 * a thread that took the receiving back meanwhile would run beside the
 * poller.  A ping-pong never qualifies, so an application that spins on
 * memory between polls (a Write latency test) still has the thread back
 * within SR_POLLER_RECHECK_NS; a stream's last transfer may wait up to
 * SR_POLLER_BULK_RECHECK_NS (below the least retransmission timeout) if
 * its poller stops polling before it arrives. */
#define SR_POLLER_RECENT_NS 20000ull /* a poll this recent: a poller is at work */
#define SR_POLLER_RECHECK_NS 100000ull
#define SR_POLLER_BULK_RECHECK_NS 1000000ull

static uint64_t poller_recheck_ns(struct sr_context *ctx, uint64_t now)
{
	uint64_t b = atomic_load_explicit(&ctx->prog.last_bulk_poll_ns, memory_order_relaxed);
	return b && now - b < SR_POLLER_BULK_RECHECK_NS ? SR_POLLER_BULK_RECHECK_NS : SR_POLLER_RECHECK_NS;
}
#define SR_POLLER_GRACE_NS 10000 /* what a poller gets to take input it may have seen */

static void data_arm(struct sr_context *ctx, bool on)
{
	struct epoll_event ev = { .events = on ? EPOLLIN : 0, .data.ptr = SR_EP_DATA };

	if (atomic_load_explicit(&ctx->prog.data_armed, memory_order_relaxed) == on)
		return;
	if (on)
		atomic_store_explicit(&ctx->prog.pollers_own, false, memory_order_relaxed);
	if (!epoll_ctl(ctx->prog.epfd, EPOLL_CTL_MOD, ctx->prog.data_epfd, &ev))
		atomic_store(&ctx->prog.data_armed, on);
}

/* Is there input that pollers leave alone?  Input waiting now, and
 * still waiting after the grace time, during which no poll received
 * anything.
 * The "no poll received" test is needed because where pollers receive a
 * stream, the sockets are never empty: new datagrams come while the
 * poller takes the last ones, and waiting input alone would call every
 * stream's input left alone. */
static bool data_left(struct sr_context *ctx)
{
	struct timespec nap = { 0, SR_POLLER_GRACE_NS };

	if (!sr_progress_input_waiting(ctx))
		return false;
	uint64_t t0 = sr_now_ns();
	nanosleep(&nap, NULL);
	if (atomic_load_explicit(&ctx->prog.last_poll_rx_ns, memory_order_relaxed) >= t0 ||
	    atomic_load_explicit(&ctx->prog.poll_nap_until, memory_order_relaxed) >= t0)
		return false; /* a poller took input, or naps after a stream's pass */
	return sr_progress_input_waiting(ctx);
}

void sr_progress_chan_armed(struct sr_context *ctx)
{
	if (atomic_load_explicit(&ctx->prog.n_parked, memory_order_relaxed))
		sr_park_release_now(ctx);
}

/* Channel readers: a thread asleep on a completion channel wakes on the
 * sockets' input itself (the channel's descriptor watches data_epfd) and
 * receives it in ibv_get_cq_event: one wake-up per message, as a blocking
 * TCP reader's, where the progress thread receiving and then waking the
 * reader made two and a lock hand-off between them.  So the thread steps
 * back (data_arm off, as for pollers) while a reader waits on a channel
 * (n_chan_waiters), or took input within SR_CHAN_RECENT_NS and takes
 * what comes now (a reader that sleeps in poll() on the descriptor, out of
 * our sight).  Rechecks as for pollers bring it back for input nobody
 * takes: a one-sided request while the application is busy elsewhere. */
#define SR_CHAN_RECENT_NS 100000000ull /* a channel reader took input this recently: readers at work */
#define SR_CHAN_RECHECK_NS 1000000ull  /* the thread's look meanwhile */

bool sr_chan_receive(struct sr_context *ctx)
{
	pthread_mutex_lock(&ctx->prog.lock);
	sr_rx_bytes = 0;
	sr_rx_expected = 0;
	sr_progress_receive(ctx);
	bool got = sr_rx_bytes != 0;
	if (got) {
		uint64_t now = sr_now_ns();
		atomic_store_explicit(&ctx->prog.last_poll_rx_ns, now, memory_order_relaxed);
		atomic_store_explicit(&ctx->prog.last_chan_rx_ns, now, memory_order_relaxed);
	}
	sr_park_release(ctx);
	pthread_mutex_unlock(&ctx->prog.lock);
	return got;
}

int sr_chan_wait(struct sr_context *ctx, int epfd)
{
	struct epoll_event ev;
	int n;

	atomic_fetch_add(&ctx->prog.n_chan_waiters, 1);
	n = epoll_wait(epfd, &ev, 1, -1);
	int err = errno;
	/* the thread's recheck counts from here (sr_poller_recheck) */
	atomic_store_explicit(&ctx->prog.last_poll_ns, sr_now_ns(), memory_order_relaxed);
	atomic_fetch_sub(&ctx->prog.n_chan_waiters, 1);
	errno = err;
	return n < 0 ? -1 : 0;
}

static bool chan_readers(struct sr_context *ctx, uint64_t now)
{
	uint64_t c = atomic_load_explicit(&ctx->prog.last_chan_rx_ns, memory_order_relaxed);
	return c && now - c < SR_CHAN_RECENT_NS;
}

/* Does a channel reader take the input (the thread woke for it, or looks
 * again while out of the way)?  One asleep on data_epfd wakes for it (the
 * thread keeps out while it sleeps, for SR_CHAN_RECENT_NS at a time); one
 * that took input recently and is at work elsewhere gets the pollers'
 * grace (data_left). */
static bool chan_takes_input(struct sr_context *ctx, uint64_t now, uint64_t lp)
{
	if (atomic_load(&ctx->prog.n_chan_waiters) && (!lp || now - lp < SR_CHAN_RECENT_NS || chan_readers(ctx, now)))
		return true;
	return chan_readers(ctx, now) && !data_left(ctx);
}

void sr_poller_init(struct sr_context *ctx)
{
	atomic_store(&ctx->prog.data_armed, true);
	/* SOFTRDMA_POLL_DRIVE=0: the thread keeps waiting for input while
	 * applications poll (to compare, bench/run.sh) */
	const char *pd = getenv("SOFTRDMA_POLL_DRIVE");
	ctx->prog.poll_drive = !pd || strcmp(pd, "0");
	ctx->prog.rx_coalesce_ns = rx_coalesce_ns();
}

uint64_t sr_poller_recheck(struct sr_context *ctx, uint64_t now, uint64_t wake)
{
	uint64_t lp = atomic_load_explicit(&ctx->prog.last_poll_ns, memory_order_relaxed);

	if (!atomic_load_explicit(&ctx->prog.data_armed, memory_order_relaxed)) {
		uint64_t recheck = poller_recheck_ns(ctx, now);
		uint64_t next;
		if (lp && chan_takes_input(ctx, now, lp))
			next = now + SR_CHAN_RECHECK_NS;
		else if (!lp || now - lp >= recheck || data_left(ctx))
			next = 0;
		else
			next = lp + recheck;
		if (!next)
			data_arm(ctx, true);
		else if (!wake || next < wake)
			wake = next;
	}
	return wake;
}

bool sr_poller_takes_input(struct sr_context *ctx)
{
	/* Input while an application thread polls: it is receiving for
	 * us.  If it takes this, leave the receiving to it (above). */
	uint64_t lp = atomic_load_explicit(&ctx->prog.last_poll_ns, memory_order_relaxed);
	uint64_t now = sr_now_ns();

	bool polled = lp && now - lp < SR_POLLER_RECENT_NS && !data_left(ctx);
	if (polled || chan_takes_input(ctx, now, 0)) {
		if (ctx->prog.poll_drive) {
			data_arm(ctx, false);
			atomic_store_explicit(&ctx->prog.pollers_own, polled, memory_order_relaxed);
		}
		return true;
	}
	return false;
}

bool sr_pollers_own_input(struct sr_context *ctx)
{
	/* or will, once the thread sees it: a poller is at work */
	uint64_t lp = atomic_load_explicit(&ctx->prog.last_poll_ns, memory_order_relaxed);
	return atomic_load_explicit(&ctx->prog.pollers_own, memory_order_relaxed) ||
	       (lp && sr_now_ns() - lp < SR_POLLER_RECHECK_NS);
}

void sr_rx_coalesce_nap(struct sr_context *ctx)
{
	if (ctx->prog.rx_coalesce_ns && sr_rx_bytes >= SR_RX_COALESCE_MIN_BYTES && ctx->dev->conf.type == SR_DEV_ROCE) {
		/* a stream: let the next datagrams gather (see above) */
		struct timespec nap = { 0, (long)ctx->prog.rx_coalesce_ns };
		nanosleep(&nap, NULL);
	}
}
