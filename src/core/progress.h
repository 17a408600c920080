/* The progress engine of a context, file by file:
 *   progress.c     the progress thread: its loop, start, stop, wake-ups
 *   poller.c       how the thread and application threads polling CQs
 *                  share the receiving, and when each naps
 *   timers.c       the set of QPs with a deadline, and the timer pass
 *   park.c         the set of QPs whose sends are parked for the next poll
 *   burst.c        whether a post is part of a burst (which may park)
 *   fd_registry.c  the QPs' sockets (data_epfd), and the receive pass
 *   daemon_conn.c  the context's connection to softrdmad, and the
 *                  datagrams that arrive through it
 * Their state is struct sr_progress, a context's prog.  Included by
 * core/sr.h. */
#ifndef SR_CORE_PROGRESS_H
#define SR_CORE_PROGRESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

struct sr_context;
struct sr_qp;
struct sr_ipc_pkt;
struct sr_daemon_conn;

#define SR_PARKED_QPS 16 /* QPs of a context whose sends may be parked for the next poll */

/* A context's progress engine (ctx->prog).  lock is held by whoever is
 * receiving: the thread or a poller. */
struct sr_progress {
	/* progress.c */
	pthread_t thread;
	bool thread_started;
	atomic_bool stop;
	int epfd;      /* the progress thread's: doorbell, daemon, data_epfd */
	int data_epfd; /* fd_registry.c: the QPs' sockets, what pollers and the thread receive from */
	int doorbell;  /* eventfd: wake the progress thread */
	pthread_mutex_t lock;
	/* timers.c: timer_lock protects timer_qps, the QPs whose transport
	 * may have a deadline (sr_qp_timer_arm), the only ones the progress
	 * thread's timer pass visits.  Taken inside qp->lock. */
	pthread_mutex_t timer_lock;
	struct sr_qp **timer_qps;
	uint32_t n_timer_qps, timer_qps_cap;
	struct sr_qp **timer_snap; /* the progress thread's copy of timer_qps */
	uint64_t input_asked_ns;   /* the timer pass that last asked sr_timers_input_waiting */
	bool input_waiting;	   /* ... and its answer */
	/* park.c: park_lock protects parked, the QPs whose transport parks
	 * posted sends for a batch (sr_qp_park) until the application's next
	 * poll or CQ arming, or the progress thread, releases them.  Taken
	 * inside qp->lock. */
	pthread_mutex_t park_lock;
	struct sr_qp *parked[SR_PARKED_QPS];
	_Atomic uint32_t n_parked;
	_Atomic uint64_t parked_since; /* the set last became non-empty */
	uint32_t timer_snap_cap;
	/* poller.c, burst.c: what the application threads do */
	_Atomic uint64_t last_poll_ns;	    /* an application thread polled an empty CQ */
	_Atomic uint64_t last_reap_ns;	    /* an application thread's poll returned completions */
	_Atomic uint64_t last_bulk_poll_ns; /* a poll received a stream's worth */
	_Atomic uint64_t last_poll_rx_ns;   /* a poll received something (data_left) */
	_Atomic uint64_t poll_nap_until;    /* pollers leave the sockets alone until then */
	_Atomic uint64_t last_post_ns;	    /* an application thread posted a send WR (sr_timers_tick) */
	atomic_uint n_chan_waiters;	    /* threads asleep in ibv_get_cq_event on a channel (sr_chan_wait) */
	_Atomic uint64_t last_chan_rx_ns;   /* a channel's reader received input (sr_chan_receive) */
	_Atomic uint64_t sleep_until;	    /* the progress thread's next timer, UINT64_MAX = none */
	atomic_bool timers_dirty;	    /* a timer was armed since the thread last looked (sr_progress_deadline) */
	atomic_bool data_armed;		    /* the progress thread waits for the sockets' input */
	atomic_bool pollers_own;	    /* ... it does not, for pollers take it (not channel readers) */
	bool poll_drive;		    /* it may stop while pollers receive (SOFTRDMA_POLL_DRIVE) */
	uint64_t rx_coalesce_ns; /* its and pollers' nap after a large receive pass (SOFTRDMA_RX_COALESCE_US) */
	/* fd_registry.c */
	atomic_uint n_data_fds;	  /* sockets in data_epfd */
	atomic_uint data_fds_gen; /* changes whenever one comes or goes */
	struct sr_qp *sole_qp;	  /* the QP of the only socket, as of sole_qp_gen (lock) */
	uint32_t sole_qp_gen;
	/* daemon_conn.c */
	atomic_int n_ud_qps; /* QPs whose datagrams come through the daemon: UD, and RC/UC
	                            * without a flow socket (roce/sockets.c) */
};

/* What the progress thread's epoll events point at (else a QP). */
#define SR_EP_DOORBELL ((void *)1)
#define SR_EP_DAEMON ((void *)2)
#define SR_EP_DATA ((void *)3)

/* progress.c */
int sr_progress_start(struct sr_context *ctx);
void sr_progress_stop(struct sr_context *ctx);
void sr_progress_wake(struct sr_context *ctx);
/* Frees the destroyed QPs the progress thread has let go of (an
 * application thread's call: qp_teardown, context close). */
void sr_reap_zombies(struct sr_context *ctx);
/* Something set a deadline at when (a timer, a parked send): the
 * progress thread, if it sleeps past it, is woken. */
void sr_progress_deadline(struct sr_context *ctx, uint64_t when);

/* poller.c */
/* An application thread polls an empty CQ: it receives for itself, and
 * releases what it parked.  Does nothing if the progress thread (or
 * another poller) is at work. */
void sr_progress_poll(struct sr_context *ctx);
/* An application thread is about to sleep on a completion channel (it
 * armed a CQ, or drained an armed one): its parked sends go now.  The
 * channel's descriptor wakes it on the sockets' input, so the progress
 * thread is not called back. */
void sr_progress_chan_armed(struct sr_context *ctx);
/* A thread reading a completion channel found no event: it receives what
 * waits on the sockets (as a poller does, but waiting for the lock).
 * True if it received anything. */
bool sr_chan_receive(struct sr_context *ctx);
/* ... and sleeps until the channel's descriptor epfd (events and the
 * sockets) is readable, as a channel waiter the progress thread leaves the
 * sockets to.  0, or -1 with errno (EINTR: a signal). */
int sr_chan_wait(struct sr_context *ctx, int epfd);
/* The context's poller policy, from its configuration (SOFTRDMA_POLL_DRIVE,
 * SOFTRDMA_RX_COALESCE_US), at sr_progress_start. */
void sr_poller_init(struct sr_context *ctx);
/* The progress thread is about to sleep until wake (0: no deadline):
 * while it stays out of the pollers' way, it takes the sockets back when
 * that is due, else wakes by then.  Returns the wake-up time. */
uint64_t sr_poller_recheck(struct sr_context *ctx, uint64_t now, uint64_t wake);
/* Pollers take the sockets' input (the progress thread stays out of
 * their way, or a poll was this recent): a channel's reader that does
 * not sleep in ibv_get_cq_event leaves it to them too (its descriptor is
 * readable on events alone then). */
bool sr_pollers_own_input(struct sr_context *ctx);
/* The progress thread woke for input: true if a poller is taking it. */
bool sr_poller_takes_input(struct sr_context *ctx);
/* After the progress thread's receive pass: its nap, if that took a
 * stream's worth (receive coalescing). */
void sr_rx_coalesce_nap(struct sr_context *ctx);
/* Bytes this thread has received (RoCE datagrams, iWARP streams) since
 * it last cleared the count: the progress thread's receive coalescing
 * (Soft-RoCE only) reads its own after each receive pass, and a poll's
 * count tells the thread that a poller took input. */
extern __thread uint64_t sr_rx_bytes;
static inline void sr_rx_account(size_t n)
{
	sr_rx_bytes += n;
}
/* Bytes of RDMA Read responses that the QPs this thread received for
 * since it last cleared the count still await (the most of any one QP):
 * pollers nap while a stream of them is coming. */
extern __thread uint64_t sr_rx_expected;
static inline void sr_rx_expect(uint64_t n)
{
	if (n > sr_rx_expected)
		sr_rx_expected = n;
}

/* timers.c */
/* The transport set a deadline of qp (qp->lock held): the progress
 * thread's timer pass visits qp from now on, until next_deadline says 0. */
void sr_qp_timer_arm(struct sr_qp *qp, uint64_t when);
/* The same for a deadline that may fire up to slack_ns late: it wakes the
 * progress thread only if that sleeps longer than this.  While the
 * application posts, the thread sleeps at most SR_PROGRESS_TICK_NS, so a
 * slack of that spares a system call and a thread wake-up per post. */
void sr_qp_timer_arm_slack(struct sr_qp *qp, uint64_t when, uint64_t slack_ns);
#define SR_PROGRESS_TICK_NS 1000000ull
#define SR_PROGRESS_TICK_FOR_NS 100000000ull /* ... for 100 ms after a post */
void sr_qp_timer_disarm(struct sr_qp *qp);   /* qp->lock held */
/* The timer pass (the progress thread only): fires the deadlines that are
 * due and returns the next one (0 = none). */
uint64_t sr_timers_run(struct sr_context *ctx);
/* In a timer pass at now (the progress thread only): whether a socket of
 * the context has input not yet received, which may hold the answer a
 * deadline waits for.  One non-blocking look per pass. */
bool sr_timers_input_waiting(struct sr_context *ctx, uint64_t now);
/* The progress thread's wake-up time, wake (0: none), made no later than
 * a tick from now while the application posts (sr_qp_timer_arm_slack). */
uint64_t sr_timers_tick(struct sr_context *ctx, uint64_t now, uint64_t wake);

/* park.c */
/* The transport parks posted sends of qp for a batch (qp->lock held):
 * the application's next poll of a CQ, or its arming of one, releases
 * them (sq_release); failing that, the progress thread does after
 * SR_PARK_MAX_NS (plus up to a tick).  False if the context's set is
 * full: then they must not wait. */
#define SR_PARK_MAX_NS 100000ull
bool sr_qp_park(struct sr_qp *qp);
void sr_qp_unpark(struct sr_qp *qp); /* qp->lock held */
/* Send what is parked (prog.lock held). */
void sr_park_release(struct sr_context *ctx);
/* The same, taking prog.lock. */
void sr_park_release_now(struct sr_context *ctx);
/* An application thread's poll returned completions: sends parked for its
 * next poll go now. */
void sr_progress_reaped(struct sr_context *ctx);
/* The progress thread releases what waited SR_PARK_MAX_NS for a poll;
 * returns its wake-up time, wake (0: none), made no later than the next
 * release is due. */
uint64_t sr_park_expire(struct sr_context *ctx, uint64_t now, uint64_t wake);

/* burst.c */
/* Is a post of qp at now_ns part of a burst by an application that polls
 * its CQs (qp->lock held)?  Then its sends may be parked for that
 * application's next poll (sr_qp_park).  A burst starts within
 * SR_TX_POLLER_NS of a poll and goes on while each post follows the
 * return of the one before (qp->post_end_ns, which the transport's
 * sq_kick sets) within SR_TX_BURST_NS.  Records the answer in
 * qp->in_burst. */
#define SR_TX_BURST_NS 2000ull	  /* a post this soon after the last one returned */
#define SR_TX_POLLER_NS 200000ull /* ... by an application that polled a CQ this recently */
bool sr_post_in_burst(struct sr_qp *qp, uint64_t now_ns);

/* fd_registry.c */
int sr_progress_add_fd(struct sr_context *ctx, int fd, struct sr_qp *qp);
/* Change what fd of qp waits for (EPOLLIN, EPOLLOUT). */
int sr_progress_mod_fd(struct sr_context *ctx, int fd, struct sr_qp *qp, uint32_t events);
void sr_progress_del_fd(struct sr_context *ctx, int fd);
/* Receive on the sockets that have input (prog.lock held). */
void sr_progress_receive(struct sr_context *ctx);
/* A socket has input now (a level-triggered look that takes nothing). */
bool sr_progress_input_waiting(struct sr_context *ctx);

/* daemon_conn.c */
/* The context's connection to softrdmad, opened on first use: NULL and
 * *err = -EIO once it is lost (or the context is fatal). */
struct sr_daemon_conn *sr_ctx_daemon(struct sr_context *ctx, int *err);
/* Deliver a datagram to the QP of this context it is addressed to (no lock held). */
void sr_ctx_deliver(struct sr_context *ctx, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len);
/* The connection is readable: the progress thread or a poller reads it
 * (prog.lock held); a lost connection makes the context fatal.  It is in
 * the thread's epfd and in data_epfd, so a receive pass reads it only when
 * it has input. */
void sr_ctx_daemon_readable(struct sr_context *ctx);

#endif
