/* test_chan_wake: applications that sleep on a completion channel.
 *
 * Ping-pongs whose every completion is taken by event: threads asleep in
 * ibv_get_cq_event, or in poll() on the channel's descriptor made
 * non-blocking (as tgt, Ceph and rsockets do), several threads on one
 * channel.  Each event must name a CQ that was armed, and only once per
 * arming (no double delivery); every message must arrive, in order (no
 * lost wake-up: a lost one stalls the ping-pong, which fails as a stall,
 * not a hang).  The sleeper does the receive work itself: the progress
 * thread, which used to receive each message and then wake the sleeper,
 * stays asleep (its context switches are counted).  And perftest's
 * bandwidth loop in event mode: unsignaled SENDs with a signaled one every
 * CW_MOD.  Every case runs on Soft-RoCE and, in a child (--iwarp), on
 * Soft-iWARP. */
#include "vt_mpa.h"
#include "common/tsan.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#define CW_PAIRS_MAX 4
#define CW_MSG 64

enum cw_mode {
	CW_GET_EVENT,
	CW_POLL_FD
};

struct cw_run;

/* One QP pair: side 0 pings, side 1 answers. */
struct cw_pair {
	struct vt_pair p; /* first: its CQs' cq_context is &p (vt_make_cq) */
	struct cw_run *run;
	struct vt_buf buf;    /* [0]: side 0's send, [1]: side 1's send, [2], [3]: receives */
	atomic_int rounds;    /* replies side 0 has received */
	atomic_bool armed[4]; /* scq[0], rcq[0], scq[1], rcq[1]: armed by us, no event since */
};

struct cw_run {
	struct ibv_comp_channel *ch;
	enum cw_mode mode;
	int npairs, nrounds;
	struct cw_pair pair[CW_PAIRS_MAX];
	atomic_bool done;
	atomic_int events; /* events taken */
	atomic_int acked;
	char err[256]; /* the first worker's error */
	pthread_mutex_t err_lock;
};

static struct vt_dev D;
static bool cw_iwarp; /* D is the Soft-iWARP device (--iwarp) */

/* Both QPs of p connected: by hand on Soft-RoCE, over TCP and MPA on Soft-iWARP. */
static bool cw_pair_setup(const struct vt_qp_cfg *c, struct vt_pair *p)
{
	if (!vt_pair_create(&D, c, p))
		return false;
	return cw_iwarp ? vt_iw_pair_connect(p) : vt_pair_connect(p);
}

static void cw_fail(struct cw_run *r, const char *what)
{
	pthread_mutex_lock(&r->err_lock);
	if (!r->err[0])
		snprintf(r->err, sizeof(r->err), "%s", what);
	pthread_mutex_unlock(&r->err_lock);
	atomic_store(&r->done, true);
}

static uint8_t *cw_slot(struct cw_pair *cp, int i)
{
	return cp->buf.p + i * CW_MSG;
}

static atomic_bool *cw_armed(struct cw_pair *cp, struct ibv_cq *cq)
{
	for (int s = 0; s < 2; s++) {
		if (cq == cp->p.scq[s])
			return &cp->armed[2 * s];
		if (cq == cp->p.rcq[s])
			return &cp->armed[2 * s + 1];
	}
	return NULL;
}

static bool cw_arm(struct cw_pair *cp, struct ibv_cq *cq)
{
	atomic_store(cw_armed(cp, cq), true);
	return ibv_req_notify_cq(cq, 0) == 0;
}

/* Sends round n (>= 1) from side s: the round's number in the first 4 bytes. */
static bool cw_send(struct cw_pair *cp, int s, uint32_t n)
{
	uint8_t *m = cw_slot(cp, s);

	memcpy(m, &n, sizeof(n));
	return vt_post_send(cp->p.qp[s], n, IBV_WR_SEND, m, CW_MSG, cp->buf.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0) == 0;
}

static bool cw_post_recv(struct cw_pair *cp, int s)
{
	return vt_post_recv(cp->p.qp[s], (uint64_t)s, cw_slot(cp, 2 + s), CW_MSG, cp->buf.mr->lkey) == 0;
}

/* Takes what cq holds (re-armed before, so nothing is missed). */
static void cw_drain(struct cw_run *r, struct cw_pair *cp, struct ibv_cq *cq)
{
	struct ibv_wc wc[8];
	int n;

	while ((n = ibv_poll_cq(cq, 8, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				cw_fail(r, ibv_wc_status_str(wc[i].status));
				return;
			}
			if (wc[i].opcode != IBV_WC_RECV)
				continue;
			int s = (int)wc[i].wr_id;
			uint32_t got;
			memcpy(&got, cw_slot(cp, 2 + s), sizeof(got));
			if (!cw_post_recv(cp, s)) {
				cw_fail(r, "ibv_post_recv");
				return;
			}
			if (s == 1) { /* answer the ping */
				if (!cw_send(cp, 1, got))
					cw_fail(r, "ibv_post_send (answer)");
				continue;
			}
			int done = atomic_load(&cp->rounds);
			if (got != (uint32_t)done + 1) {
				cw_fail(r, "a reply out of order, twice, or lost");
				return;
			}
			atomic_store(&cp->rounds, done + 1);
			if (done + 1 < r->nrounds && !cw_send(cp, 0, got + 1))
				cw_fail(r, "ibv_post_send (ping)");
		}
	}
	if (n < 0)
		cw_fail(r, "ibv_poll_cq");
}

/* One event: the CQ it names must be armed (by us, and not yet fired). */
static void cw_event(struct cw_run *r, struct ibv_cq *cq, void *cq_ctx)
{
	struct cw_pair *cp = cq_ctx;
	atomic_bool *a = cp ? cw_armed(cp, cq) : NULL;

	if (!a) {
		cw_fail(r, "an event names a CQ of no pair");
		return;
	}
	if (!atomic_exchange(a, false))
		cw_fail(r, "an event for a CQ not armed: delivered twice, or without ibv_req_notify_cq");
	atomic_fetch_add(&r->events, 1);
	ibv_ack_cq_events(cq, 1);
	atomic_fetch_add(&r->acked, 1);
	if (!cw_arm(cp, cq))
		cw_fail(r, "ibv_req_notify_cq");
	cw_drain(r, cp, cq);
}

static void cw_nosig(int sig)
{
	(void)sig;
}

/* A sleeper: in ibv_get_cq_event (woken by a signal at the end), or in
 * poll() on the non-blocking descriptor, taking every event it reports. */
static void *cw_worker(void *arg)
{
	struct cw_run *r = arg;
	struct ibv_cq *cq;
	void *ctx;

	while (!atomic_load(&r->done)) {
		if (r->mode == CW_GET_EVENT) {
			if (ibv_get_cq_event(r->ch, &cq, &ctx)) {
				if (errno != EINTR)
					cw_fail(r, "ibv_get_cq_event");
				continue;
			}
			cw_event(r, cq, ctx);
			continue;
		}
		struct pollfd pfd = { .fd = r->ch->fd, .events = POLLIN };
		int n = poll(&pfd, 1, 100);
		if (n < 0 && errno != EINTR)
			cw_fail(r, "poll");
		if (n <= 0)
			continue;
		while (!ibv_get_cq_event(r->ch, &cq, &ctx))
			cw_event(r, cq, ctx);
		if (errno != EAGAIN)
			cw_fail(r, "ibv_get_cq_event on a non-blocking channel: not EAGAIN when empty");
	}
	return NULL;
}

/* Times this process's progress threads went to sleep and were woken so
 * far (voluntary context switches: preemption by other load is not a
 * wake-up). */
static long cw_progress_switches(void)
{
	long tids[8], n = 0;
	int k = vt_progress_tids(tids, 8);

	if (k < 0)
		return -1;
	for (int i = 0; i < k && i < 8; i++) {
		char path[64], line[128];
		snprintf(path, sizeof(path), "/proc/self/task/%ld/status", tids[i]);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			long v;
			if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
				n += v;
		}
		fclose(f);
	}
	return n;
}

/* npairs ping-pongs of nrounds rounds, every completion by event, nthreads
 * sleepers on one channel. */
static void cw_pingpong(enum cw_mode mode, int npairs, int nthreads, int nrounds, bool count_wakes)
{
	SECTION("%d RC ping-pong(s) of %d rounds, %d thread(s) asleep in %s on one channel", npairs, nrounds, nthreads,
		mode == CW_GET_EVENT ? "ibv_get_cq_event" : "poll() on its non-blocking fd");
	static struct cw_run r;
	pthread_t t[8];
	struct vt_qp_cfg c;
	int ok_pairs = 0;

	memset(&r, 0, sizeof(r));
	pthread_mutex_init(&r.err_lock, NULL);
	r.mode = mode;
	r.npairs = npairs;
	r.nrounds = nrounds;
	r.ch = ibv_create_comp_channel(D.ctx);
	if (!CHECK(r.ch, "ibv_create_comp_channel"))
		return;
	if (mode == CW_POLL_FD)
		CHECK_RC(fcntl(r.ch->fd, F_SETFL, fcntl(r.ch->fd, F_GETFL) | O_NONBLOCK), 0,
			 "the channel's fd made non-blocking");
	vt_cfg_default(&c, IBV_QPT_RC);
	c.ch = r.ch;
	for (int i = 0; i < npairs; i++, ok_pairs++) {
		struct cw_pair *cp = &r.pair[i];
		cp->run = &r;
		if (!cw_pair_setup(&c, &cp->p))
			break;
		vt_buf_alloc(&cp->buf, D.pd, 4 * CW_MSG, 4096, IBV_ACCESS_LOCAL_WRITE);
		bool ok = cw_post_recv(cp, 0) && cw_post_recv(cp, 1);
		for (int s = 0; s < 2; s++)
			ok = ok && cw_arm(cp, cp->p.scq[s]) && cw_arm(cp, cp->p.rcq[s]);
		if (!CHECK(ok, "pair %d: receives posted, its four CQs armed", i))
			break;
	}
	if (ok_pairs < npairs)
		goto out;
	struct sigaction sa = { .sa_handler = cw_nosig }, old;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, &old);
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, cw_worker, &r);
	long sw0 = cw_progress_switches();
	uint64_t t0 = vt_now_ms(), last_move = t0;
	int last = -1;
	for (int i = 0; i < npairs; i++)
		if (!cw_send(&r.pair[i], 0, 1))
			cw_fail(&r, "ibv_post_send (first ping)");
	for (;;) {
		int sum = 0;
		for (int i = 0; i < npairs; i++)
			sum += atomic_load(&r.pair[i].rounds);
		if (sum == npairs * nrounds || atomic_load(&r.done))
			break;
		uint64_t now = vt_now_ms();
		if (sum != last) {
			last = sum;
			last_move = now;
		} else if (now - last_move > VT_STALL_MS) {
			cw_fail(&r, "stalled: a wake-up was lost");
			break;
		}
		vt_sleep_ms(1);
	}
	uint64_t ms = vt_now_ms() - t0;
	long sw = cw_progress_switches() - sw0;
	atomic_store(&r.done, true);
	/* a signal that comes before a worker sleeps ends nothing: again until it is out */
	for (int i = 0; i < nthreads; i++) {
		struct timespec ts;
		do {
			pthread_kill(t[i], SIGUSR1);
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 10000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
		} while (pthread_timedjoin_np(t[i], NULL, &ts));
	}
	sigaction(SIGUSR1, &old, NULL);
	CHECK(!r.err[0], "no worker saw an error\t(%s)", r.err[0] ? r.err : "none");
	for (int i = 0; i < npairs; i++)
		CHECK_INT(atomic_load(&r.pair[i].rounds), nrounds, "pair %d: every reply arrived once, in order", i);
	int ev = atomic_load(&r.events);
	/* each round completes 4 WRs; events <= completions, and at least
	 * one per round trip on the pinging side's receive CQ */
	CHECK(ev >= npairs * nrounds && ev <= 4 * npairs * nrounds,
	      "events taken: at least one per round, at most one per completion\t(%d for %d rounds)", ev,
	      npairs * nrounds);
	if (count_wakes) {
		/* Before the sleeper received for itself the progress thread
		 * woke for every message (2 per round); now it only looks at
		 * its timers (once a millisecond while a sleeper waits, and for
		 * the deadlines the transport arms). */
		long allow = (long)(2 * npairs * nrounds) / 4 + (long)ms + 20;
		double load = 0;
		/* on an overloaded host the progress thread also sleeps on
		 * locks whose holders were preempted: the count then says
		 * nothing about wake-ups for messages */
		if (getloadavg(&load, 1) == 1 && load > 2.0 * (double)sysconf(_SC_NPROCESSORS_ONLN))
			NOTE("the progress thread woke %ld times for %d messages in %llu ms: not checked at load %.1f",
			     sw, 2 * npairs * nrounds, (unsigned long long)ms, load);
		else
			CHECK(sw >= 0 && sw <= allow,
			      "the sleepers receive: the progress thread woke %ld times for %d messages in %llu ms "
			      "(at most %ld)",
			      sw, 2 * npairs * nrounds, (unsigned long long)ms, allow);
	}
	struct pollfd pfd = { .fd = r.ch->fd, .events = POLLIN };
	struct ibv_cq *cq;
	void *ctx;
	int fl = fcntl(r.ch->fd, F_GETFL);
	fcntl(r.ch->fd, F_SETFL, fl | O_NONBLOCK);
	/* the last sends' completions may raise events nobody took: take them
	 * (each for an armed CQ) so that the CQs can go */
	while (poll(&pfd, 1, 200) > 0 && !ibv_get_cq_event(r.ch, &cq, &ctx))
		cw_event(&r, cq, ctx);
	CHECK(!r.err[0], "the events left at the end name armed CQs\t(%s)", r.err[0] ? r.err : "none");
out:
	for (int i = 0; i < ok_pairs + (ok_pairs < npairs); i++) {
		if (r.pair[i].buf.p)
			vt_buf_free(&r.pair[i].buf);
		vt_pair_destroy(&r.pair[i].p);
	}
	CHECK_RC(ibv_destroy_comp_channel(r.ch), 0, "ibv_destroy_comp_channel: every event acked");
}

/* A channel, a connected pair on it and a 4 KiB buffer: side 1 has one
 * receive posted (wr_id 7, the buffer's second half) and its receive CQ
 * armed.  False (and nothing left) if any of it fails. */
static bool cw_one_recv_armed(struct ibv_comp_channel **ch, struct vt_pair *p, struct vt_buf *b)
{
	struct vt_qp_cfg c;

	*ch = ibv_create_comp_channel(D.ctx);
	if (!CHECK(*ch, "ibv_create_comp_channel"))
		return false;
	vt_cfg_default(&c, IBV_QPT_RC);
	c.ch = *ch;
	if (!cw_pair_setup(&c, p)) {
		vt_pair_destroy(p);
		ibv_destroy_comp_channel(*ch);
		return false;
	}
	vt_buf_alloc(b, D.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_post_recv(p->qp[1], 7, b->p + 2048, 2048, b->mr->lkey);
	CHECK_RC(ibv_req_notify_cq(p->rcq[1], 0), 0, "arm the receive CQ");
	return true;
}

/* With no input, the channel's fd stays quiet; a SEND to an armed CQ
 * makes it readable and ibv_get_cq_event on it returns the event. */
static void cw_fd_quiet(void)
{
	SECTION("the channel's fd: not readable without an event or input, readable for a SEND");
	struct ibv_comp_channel *ch;
	struct vt_pair p;
	struct vt_buf b;

	if (!cw_one_recv_armed(&ch, &p, &b))
		return;
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	CHECK_INT(poll(&pfd, 1, 100), 0, "poll() on the fd: nothing to read while nothing moves");
	vt_post_send(p.qp[0], 1, IBV_WR_SEND, b.p, 16, b.mr->lkey, 0, 0, 0, 0);
	struct ibv_cq *cq = NULL;
	void *ctx = NULL;
	bool got = false;
	uint64_t t0 = vt_now_ms();
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	while (!got && vt_now_ms() - t0 < VT_TIMEOUT_MS && poll(&pfd, 1, 1000) > 0)
		got = !ibv_get_cq_event(ch, &cq, &ctx);
	if (CHECK(got && cq == p.rcq[1], "poll() wakes for the SEND, ibv_get_cq_event returns its event")) {
		ibv_ack_cq_events(cq, 1);
		EXPECT_WC(p.rcq[1], 7, IBV_WC_SUCCESS, IBV_WC_RECV, NULL, "  ...and the completion is on the CQ");
	}
	errno = 0;
	CHECK(ibv_get_cq_event(ch, &cq, &ctx) == -1 && errno == EAGAIN,
	      "then ibv_get_cq_event on the non-blocking fd: -1, EAGAIN\t(errno %d)", errno);
	vt_buf_free(&b);
	vt_pair_destroy(&p);
	CHECK_RC(ibv_destroy_comp_channel(ch), 0, "ibv_destroy_comp_channel");
}

/* A signal whose handler has SA_RESTART does not end a wait in
 * ibv_get_cq_event: rdma-core's read() restarts.  (One without it ends the
 * wait with EINTR: test_transfer's test_event_eintr.) */
struct cw_kicker {
	pthread_t target;
	struct ibv_qp *qp;
	struct vt_buf *b;
};

static void *cw_kick(void *arg)
{
	struct cw_kicker *k = arg;

	vt_sleep_ms(100);
	pthread_kill(k->target, SIGUSR2);
	vt_sleep_ms(200);
	vt_post_send(k->qp, 1, IBV_WR_SEND, k->b->p, 16, k->b->mr->lkey, 0, 0, 0, 0);
	return NULL;
}

static void cw_restart(void)
{
	SECTION("a signal with SA_RESTART does not end a wait in ibv_get_cq_event");
#ifdef SR_TSAN
	NOTE("not in a ThreadSanitizer build: its runtime intercepts sigaction and delivers signals itself");
	return;
#endif
	struct ibv_comp_channel *ch;
	struct vt_pair p;
	struct vt_buf b;

	if (!cw_one_recv_armed(&ch, &p, &b))
		return;
	struct sigaction sa = { .sa_handler = cw_nosig, .sa_flags = SA_RESTART }, old;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR2, &sa, &old);
	struct cw_kicker k = { .target = pthread_self(), .qp = p.qp[0], .b = &b };
	pthread_t t;
	pthread_create(&t, NULL, cw_kick, &k);
	struct ibv_cq *cq = NULL;
	void *ctx = NULL;
	errno = 0;
	int rc = ibv_get_cq_event(ch, &cq, &ctx), e = errno;
	pthread_join(t, NULL);
	sigaction(SIGUSR2, &old, NULL);
	if (CHECK(rc == 0 && cq == p.rcq[1],
		  "the wait goes on past the signal and returns the SEND's event\t(%d, errno %d)", rc, e))
		ibv_ack_cq_events(cq, 1);
	EXPECT_WC(p.rcq[1], 7, IBV_WC_SUCCESS, IBV_WC_RECV, NULL, "  ...its completion");
	vt_buf_free(&b);
	vt_pair_destroy(&p);
	CHECK_RC(ibv_destroy_comp_channel(ch), 0, "ibv_destroy_comp_channel");
}

/* perftest's bandwidth loop in event mode (ib_send_bw -e): 8-byte SENDs,
 * only every CW_MOD-th signaled, at most CW_TX_DEPTH (the send queue's
 * size) in flight, as many as the receiver has receives posted (iWARP has
 * no RNR retry); the receiver reposts each receive; every completion is
 * taken by event, one thread for both ends.  A signaled completion gives
 * back the slots of the unsignaled WRs before it (or ibv_post_send fails
 * with the queue full); each arming brings one event once a completion
 * comes (or the loop stalls); the messages arrive once each, in order. */
#define CW_MOD 100
#define CW_TX_DEPTH 128
#define CW_RX_DEPTH 512
#define CW_SMALL 8

struct cw_mod_run {
	struct vt_pair p;
	struct vt_buf buf; /* CW_TX_DEPTH send slots, then CW_RX_DEPTH receive slots */
	uint32_t nsends, scnt, ccnt, rcnt;
	int events;
	bool armed[2]; /* p.scq[0], p.rcq[1] */
	char err[160];
};

static uint8_t *cw_mod_slot(struct cw_mod_run *m, bool recv, uint32_t n)
{
	uint32_t i = recv ? CW_TX_DEPTH + n % CW_RX_DEPTH : n % CW_TX_DEPTH;

	return m->buf.p + (size_t)i * CW_SMALL;
}

static bool cw_mod_post_recv(struct cw_mod_run *m, uint32_t n)
{
	return vt_post_recv(m->p.qp[1], n, cw_mod_slot(m, true, n), CW_SMALL, m->buf.mr->lkey) == 0;
}

/* Posts what both windows allow; false (err set) if a post fails. */
static bool cw_mod_post_sends(struct cw_mod_run *m)
{
	while (m->scnt < m->nsends && m->scnt - m->ccnt < CW_TX_DEPTH && m->scnt - m->rcnt < CW_RX_DEPTH) {
		uint32_t n = m->scnt;
		bool sig = n % CW_MOD == CW_MOD - 1 || n == m->nsends - 1;
		uint8_t *msg = cw_mod_slot(m, false, n);

		memcpy(msg, &n, sizeof(n));
		int rc = vt_post_send(m->p.qp[0], n, IBV_WR_SEND, msg, CW_SMALL, m->buf.mr->lkey,
				      sig ? IBV_SEND_SIGNALED : 0, 0, 0, 0);
		if (rc) {
			snprintf(m->err, sizeof(m->err),
				 "ibv_post_send of SEND %u failed (%d %s) with %u posted, %u "
				 "completed: a slot was not "
				 "given back",
				 n, rc, strerror(rc), m->scnt, m->ccnt);
			return false;
		}
		m->scnt++;
	}
	return true;
}

/* Takes the completions of one CQ: sends (a signaled WR completes every
 * WR before it) or receives (each reposted). */
static bool cw_mod_drain(struct cw_mod_run *m, struct ibv_cq *cq)
{
	struct ibv_wc wc[16];
	int n;

	while ((n = ibv_poll_cq(cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			uint32_t id = (uint32_t)wc[i].wr_id, got = ~0u;
			if (wc[i].status != IBV_WC_SUCCESS) {
				snprintf(m->err, sizeof(m->err), "a completion with %s",
					 ibv_wc_status_str(wc[i].status));
				return false;
			}
			if (cq == m->p.scq[0]) {
				if (id < m->ccnt || (id % CW_MOD != CW_MOD - 1 && id != m->nsends - 1)) {
					snprintf(m->err, sizeof(m->err),
						 "a send completion for WR %u (signaled? done?)", id);
					return false;
				}
				m->ccnt = id + 1;
				continue;
			}
			memcpy(&got, cw_mod_slot(m, true, id), sizeof(got));
			if (id != m->rcnt || got != m->rcnt || wc[i].byte_len != CW_SMALL) {
				snprintf(m->err, sizeof(m->err), "receive %u: WR %u holds message %u (%u bytes)",
					 m->rcnt, id, got, wc[i].byte_len);
				return false;
			}
			m->rcnt++;
			if (!cw_mod_post_recv(m, id + CW_RX_DEPTH)) {
				snprintf(m->err, sizeof(m->err), "ibv_post_recv");
				return false;
			}
		}
	}
	return n == 0;
}

/* Waits (up to VT_STALL_MS) for one event, re-arms its CQ and drains it. */
static bool cw_mod_event(struct cw_mod_run *m, struct ibv_comp_channel *ch)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct ibv_cq *cq;
	void *ctx;

	if (poll(&pfd, 1, VT_STALL_MS) <= 0 || ibv_get_cq_event(ch, &cq, &ctx)) {
		snprintf(m->err, sizeof(m->err),
			 "stalled: no event with %u sends posted, %u completed, %u "
			 "received (armed: send CQ %d, "
			 "receive CQ %d)",
			 m->scnt, m->ccnt, m->rcnt, m->armed[0], m->armed[1]);
		return false;
	}
	int k = cq == m->p.scq[0] ? 0 : cq == m->p.rcq[1] ? 1 : -1;
	if (k < 0 || !m->armed[k]) {
		snprintf(m->err, sizeof(m->err), "an event for a CQ not armed");
		return false;
	}
	m->events++;
	ibv_ack_cq_events(cq, 1);
	m->armed[k] = !ibv_req_notify_cq(cq, 0);
	return cw_mod_drain(m, cq);
}

static void cw_moderated(uint32_t nsends)
{
	SECTION("%u SENDs of %d bytes, one in %d signaled, %d in flight, %d "
		"receives: completions by event "
		"(ib_send_bw -e)",
		nsends, CW_SMALL, CW_MOD, CW_TX_DEPTH, CW_RX_DEPTH);
	static struct cw_mod_run m;
	struct ibv_comp_channel *ch = ibv_create_comp_channel(D.ctx);
	struct vt_qp_cfg c;

	memset(&m, 0, sizeof(m));
	m.nsends = nsends;
	if (!CHECK(ch, "ibv_create_comp_channel"))
		return;
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	vt_cfg_default(&c, IBV_QPT_RC);
	c.ch = ch;
	c.max_send_wr = CW_TX_DEPTH;
	c.max_recv_wr = CW_RX_DEPTH;
	c.cqe = CW_RX_DEPTH;
	if (!cw_pair_setup(&c, &m.p))
		goto out;
	vt_buf_alloc(&m.buf, D.pd, (CW_TX_DEPTH + CW_RX_DEPTH) * CW_SMALL, 4096, IBV_ACCESS_LOCAL_WRITE);
	bool ok = true;
	for (uint32_t i = 0; i < CW_RX_DEPTH && ok; i++)
		ok = cw_mod_post_recv(&m, i);
	m.armed[0] = !ibv_req_notify_cq(m.p.scq[0], 0);
	m.armed[1] = !ibv_req_notify_cq(m.p.rcq[1], 0);
	if (!CHECK(ok && m.armed[0] && m.armed[1], "%d receives posted, both CQs armed", CW_RX_DEPTH))
		goto out;
	while ((m.ccnt < nsends || m.rcnt < nsends) && cw_mod_post_sends(&m) && cw_mod_event(&m, ch))
		;
	CHECK(!m.err[0], "no error, no stall\t(%s)", m.err[0] ? m.err : "none");
	CHECK(m.ccnt == nsends && m.rcnt == nsends, "every SEND completed and was received once, in order\t(%u, %u)",
	      m.ccnt, m.rcnt);
	/* one per signaled send at most, one per receive at most */
	CHECK(m.events >= 2 && (uint32_t)m.events <= nsends + nsends / CW_MOD + 1,
	      "events: at most one per completion\t(%d)", m.events);
out:
	if (m.buf.p)
		vt_buf_free(&m.buf);
	vt_pair_destroy(&m.p);
	CHECK_RC(ibv_destroy_comp_channel(ch), 0, "ibv_destroy_comp_channel: every event acked");
}

int main(int argc, char **argv)
{
	cw_iwarp = argc > 1 && !strcmp(argv[1], "--iwarp");
	if (cw_iwarp)
		argc = 1;
	vt_begin_args(cw_iwarp ? "test_chan_wake (iWARP)" : "test_chan_wake", 300, argc, argv);
	if (!vt_open(&D))
		return vt_end();
	VT_RUN(cw_fd_quiet());
	VT_RUN(cw_restart());
	/* the progress thread's switches are counted once, on Soft-RoCE: the bound is load-sensitive */
	VT_RUN(cw_pingpong(CW_GET_EVENT, 1, 1, 1000, !cw_iwarp));
	VT_RUN(cw_pingpong(CW_GET_EVENT, 3, 3, 300, false));
	VT_RUN(cw_pingpong(CW_POLL_FD, 1, 1, 500, false));
	VT_RUN(cw_pingpong(CW_POLL_FD, 3, 2, 300, false));
	VT_RUN(cw_moderated(5000));
	vt_close(&D);
	if (!cw_iwarp && !vt_list)
		vt_iwarp_child(argv[0], "--iwarp", "completion channels");
	return vt_end();
}
