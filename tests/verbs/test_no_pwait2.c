/* test_no_pwait2: the progress thread works on a kernel without
 * epoll_pwait2 (before 5.11, and under valgrind), where the call fails
 * with ENOSYS.  A seccomp filter installed before the device is opened
 * (threads inherit it) gives that ENOSYS here; the thread must keep
 * running and keep serving its timers: an RC SEND answered by an RNR NAK
 * completes only once a timer has sent it again. */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "vt.h"

#ifndef __NR_epoll_pwait2
#define __NR_epoll_pwait2 441
#endif

/* epoll_pwait2 -> ENOSYS for this thread and those it creates later */
static bool refuse_epoll_pwait2(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_epoll_pwait2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	return !prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) && !prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/* A thread of this process named sr-progress exists */
static bool progress_thread_alive(void)
{
	long tid;
	return vt_progress_tids(&tid, 1) > 0;
}

static void rnr_retry_by_timer(void)
{
	struct vt_dev d;
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct ibv_wc wc;
	char sb[256], rb[256];

	if (!vt_open(&d))
		return;
	vt_cfg_default(&c, IBV_QPT_RC);
	c.min_rnr_timer = 1; /* 0.01 ms: the retry comes from the next timer pass */
	c.rnr_retry = 7;
	if (!vt_pair_setup(&d, &c, &p))
		goto out;
	struct ibv_mr *smr = ibv_reg_mr(d.pd, sb, sizeof(sb), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *rmr = ibv_reg_mr(d.pd, rb, sizeof(rb), IBV_ACCESS_LOCAL_WRITE);
	if (!CHECK(smr && rmr, "register buffers"))
		goto out_pair;
	vt_sleep_ms(100);
	CHECK(progress_thread_alive(), "the progress thread runs with epoll_pwait2 refused");
	vt_fill(sb, sizeof(sb), 3);
	memset(rb, 0, sizeof(rb));
	CHECK_RC(vt_post_send(p.qp[0], 1, IBV_WR_SEND, sb, sizeof(sb), smr->lkey, IBV_SEND_SIGNALED, 0, 0, 0), 0,
		 "SEND with no receive posted: RNR NAK");
	vt_sleep_ms(50);
	CHECK_RC(vt_post_recv(p.qp[1], 2, rb, sizeof(rb), rmr->lkey), 0, "then the receive");
	EXPECT_WC(p.rcq[1], 2, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "  the SEND sent again arrives");
	EXPECT_WC(p.scq[0], 1, IBV_WC_SUCCESS, IBV_WC_SEND, &wc, "  and completes");
	CHECK(!memcmp(sb, rb, sizeof(sb)), "  data intact");
	CHECK(progress_thread_alive(), "the progress thread still runs");
out_pair:
	if (smr)
		ibv_dereg_mr(smr);
	if (rmr)
		ibv_dereg_mr(rmr);
	vt_pair_destroy(&p);
out:
	vt_close(&d);
}

int main(int argc, char **argv)
{
	vt_begin_args("test_no_pwait2", 60, argc, argv);
	if (!vt_list && !CHECK(refuse_epoll_pwait2(), "seccomp filter: epoll_pwait2 -> ENOSYS (%s)", strerror(errno)))
		return vt_end();
	VT_RUN(rnr_retry_by_timer());
	return vt_end();
}
