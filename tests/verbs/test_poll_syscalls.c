/* test_poll_syscalls: what an empty ibv_poll_cq asks the kernel.  A
 * context with a UD QP receives datagrams through its connection to
 * softrdmad as well as through its sockets; an application spinning on
 * an empty CQ must not read that connection on every poll (UCX keeps a
 * ud_verbs QP beside its rc_verbs ones for the whole run: each empty poll
 * was a recvmmsg on the daemon's socket after the epoll_wait of the
 * sockets), only when it has something to read.
 *
 * Nor must the sockets' input wake a thread that sleeps in poll() on a
 * completion channel's descriptor while another thread polls the CQs and
 * receives that input: UCX's async thread watches its ud_verbs channel so,
 * and woke for every message of an rc_verbs ping-pong to find no event,
 * and received beside the polling thread.
 *
 * The test takes the place of recvmmsg (its definition comes first in the
 * symbol lookup) and counts the calls on Unix-domain sockets made by the
 * polling thread. */
#include <dlfcn.h>
#include <poll.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "vt.h"

#define EMPTY_POLLS 2000

static struct vt_dev D;
static pid_t main_tid;
static atomic_int unix_reads; /* the main thread's recvmmsg on Unix sockets */

static bool is_unix_socket(int fd)
{
	int dom = 0;
	socklen_t len = sizeof(dom);
	return !getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &len) && dom == AF_UNIX;
}

int recvmmsg(int fd, struct mmsghdr *msgs, unsigned int n, int flags, struct timespec *timeout)
{
	static int (*real)(int, struct mmsghdr *, unsigned int, int, struct timespec *);
	if (!real)
		real = (int (*)(int, struct mmsghdr *, unsigned int, int, struct timespec *))dlsym(RTLD_NEXT,
												   "recvmmsg");
	if (main_tid && (pid_t)syscall(SYS_gettid) == main_tid && is_unix_socket(fd))
		atomic_fetch_add(&unix_reads, 1);
	return real(fd, msgs, n, flags, timeout);
}

/* RC traffic first (the context's sockets in use), then empty polls with
 * a UD QP alive */
static void empty_polls_leave_the_daemon_socket_alone(void)
{
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf b;
	struct ibv_wc wc;

	vt_cfg_default(&c, IBV_QPT_RC);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	if (!CHECK_RC(vt_buf_alloc(&b, D.pd, 64, 0, IBV_ACCESS_LOCAL_WRITE), 0, "a buffer"))
		goto out;
	struct ibv_cq *ucq = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr ua = {
		.send_cq = ucq,
		.recv_cq = ucq,
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 }
	};
	struct ibv_qp *ud = ucq ? ibv_create_qp(D.pd, &ua) : NULL;
	if (!CHECK(ud, "a UD QP\t(errno %d)", errno))
		goto out_buf;
	CHECK_RC(vt_post_recv(p.qp[1], 1, b.p, 64, b.mr->lkey), 0, "post a receive");
	CHECK_RC(vt_post_send(p.qp[0], 2, IBV_WR_SEND, b.p, 8, b.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0), 0,
		 "post a send");
	EXPECT_WC(p.rcq[1], 1, IBV_WC_SUCCESS, IBV_WC_RECV, NULL, "the receive");
	EXPECT_WC(p.scq[0], 2, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "the send");

	int before = atomic_load(&unix_reads), got = 0;
	for (int i = 0; i < EMPTY_POLLS; i++)
		got += ibv_poll_cq(p.rcq[1], 1, &wc);
	int reads = atomic_load(&unix_reads) - before;
	CHECK_INT(got, 0, "%d polls of an empty CQ found nothing", EMPTY_POLLS);
	/* the daemon may have something to say meanwhile: a few reads */
	CHECK(reads < EMPTY_POLLS / 10, "reads of the daemon's socket in %d empty polls: %d, at most %d", EMPTY_POLLS,
	      reads, EMPTY_POLLS / 10 - 1);
	ibv_destroy_qp(ud);
out_buf:
	if (ucq)
		ibv_destroy_cq(ucq);
	vt_buf_free(&b);
out:
	vt_pair_destroy(&p);
}

#define ROUND_TRIPS 2000

struct watcher {
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	atomic_bool stop;
	atomic_int wakes; /* the descriptor was readable */
};

/* As UCX's async thread: poll() on the channel's non-blocking descriptor,
 * take the event if there is one */
static void *watch_channel(void *arg)
{
	struct watcher *w = arg;
	struct ibv_cq *cq;
	void *cq_ctx;
	/* UCX drains the channel before it arms its interface */
	while (!ibv_get_cq_event(w->ch, &cq, &cq_ctx))
		ibv_ack_cq_events(cq, 1);
	while (!atomic_load(&w->stop)) {
		struct pollfd pfd = { .fd = w->ch->fd, .events = POLLIN };
		if (poll(&pfd, 1, 10) <= 0)
			continue;
		atomic_fetch_add(&w->wakes, 1);
		if (!ibv_get_cq_event(w->ch, &cq, &cq_ctx)) {
			ibv_ack_cq_events(cq, 1);
			ibv_req_notify_cq(cq, 0);
		}
	}
	return NULL;
}

static bool one_way(struct vt_pair *p, int from, struct vt_buf *b, int i)
{
	struct ibv_wc wc;
	int to = !from, n = 0;
	if (vt_post_recv(p->qp[to], (uint64_t)i, b->p + 64 * to, 64, b->mr->lkey) ||
	    vt_post_send(p->qp[from], (uint64_t)i, IBV_WR_SEND, b->p + 128, 8, b->mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0))
		return false;
	for (int k = 0; k < 2; k++) {
		struct ibv_cq *cq = k ? p->scq[from] : p->rcq[to];
		uint64_t t0 = vt_now_ms();
		while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && vt_now_ms() - t0 < VT_TIMEOUT_MS)
			;
		if (n != 1 || wc.status != IBV_WC_SUCCESS)
			return false;
	}
	return true;
}

/* A ping-pong, polled, beside a thread asleep on a channel of this context */
static void a_channel_watcher_sleeps_while_a_poller_receives(void)
{
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf b;
	struct watcher w = { 0 };
	pthread_t t;

	vt_cfg_default(&c, IBV_QPT_RC);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	if (!CHECK_RC(vt_buf_alloc(&b, D.pd, 4096, 0, IBV_ACCESS_LOCAL_WRITE), 0, "a buffer"))
		goto out;
	w.ch = ibv_create_comp_channel(D.ctx);
	w.cq = w.ch ? ibv_create_cq(D.ctx, 16, NULL, w.ch, 0) : NULL;
	if (!CHECK(w.cq, "a CQ with a channel	(errno %d)", errno))
		goto out_buf;
	CHECK_RC(fcntl(w.ch->fd, F_SETFL, fcntl(w.ch->fd, F_GETFL) | O_NONBLOCK), 0, "its descriptor non-blocking");
	CHECK_RC(ibv_req_notify_cq(w.cq, 0), 0, "armed");
	pthread_create(&t, NULL, watch_channel, &w);
	bool ok = true;
	for (int i = 0; i < ROUND_TRIPS && ok; i++)
		ok = one_way(&p, 0, &b, i) && one_way(&p, 1, &b, i);
	atomic_store(&w.stop, true);
	pthread_join(t, NULL);
	CHECK(ok, "%d round trips", ROUND_TRIPS);
	int wakes = atomic_load(&w.wakes);
	/* each message and its ACK made the descriptor readable before */
	CHECK(wakes < ROUND_TRIPS / 4, "the channel's watcher woke %d times in %d round trips, fewer than %d", wakes,
	      ROUND_TRIPS, ROUND_TRIPS / 4);
	ibv_destroy_cq(w.cq);
out_buf:
	if (w.ch)
		ibv_destroy_comp_channel(w.ch);
	vt_buf_free(&b);
out:
	vt_pair_destroy(&p);
}

int main(int argc, char **argv)
{
	vt_begin_args("test_poll_syscalls", 120, argc, argv);
	main_tid = (pid_t)syscall(SYS_gettid);
	if (!vt_open(&D))
		return vt_end();
	VT_RUN(empty_polls_leave_the_daemon_socket_alone());
	VT_RUN(a_channel_watcher_sleeps_while_a_poller_receives());
	vt_close(&D);
	return vt_end();
}
