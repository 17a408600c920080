/* test_poll_syscalls: what an empty ibv_poll_cq asks the kernel.  A
 * context with a UD QP receives datagrams through its connection to
 * softrdmad as well as through its sockets; an application spinning on
 * an empty CQ must not read that connection on every poll (UCX keeps a
 * ud_verbs QP beside its rc_verbs ones for the whole run: each empty poll
 * was a recvmmsg on the daemon's socket after the epoll_wait of the
 * sockets), only when it has something to read.
 *
 * The test takes the place of recvmmsg (its definition comes first in the
 * symbol lookup) and counts the calls on Unix-domain sockets made by the
 * polling thread. */
#include <dlfcn.h>
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

int main(int argc, char **argv)
{
	vt_begin_args("test_poll_syscalls", 120, argc, argv);
	main_tid = (pid_t)syscall(SYS_gettid);
	if (!vt_open(&D))
		return vt_end();
	VT_RUN(empty_polls_leave_the_daemon_socket_alone());
	vt_close(&D);
	return vt_end();
}
