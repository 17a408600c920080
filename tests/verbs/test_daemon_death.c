/* test_daemon_death: softrdmad dies under a verbs context (issue 15 item
 * 7).  The context must say so and fail its work, never hang: the async
 * events IBV_EVENT_QP_FATAL for each QP and IBV_EVENT_DEVICE_FATAL, posted
 * receives completed with IBV_WC_WR_FLUSH_ERR, QPs in ERR, the port DOWN,
 * ibv_create_qp and modifies out of RESET failing with EIO; and a context
 * opened afterwards works with the daemon the library starts again.
 *
 * The test uses a daemon of its own (SOFTRDMA_DAEMON_SOCK), so that the
 * one it kills serves no other test, in a network namespace of its own
 * where it can have one (root): an RC QP learns its peer's source port
 * from the first packets, which come through the daemon on UDP port 4791,
 * and another daemon sharing that port would get them instead. */
#include "vt.h"

#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

/* A network namespace of this process's own, lo up; false if not allowed. */
static bool own_netns(void)
{
	struct ifreq ifr;
	int fd;
	bool ok;

	if (unshare(CLONE_NEWNET))
		return false;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	ok = fd >= 0 && !ioctl(fd, SIOCGIFFLAGS, &ifr);
	ifr.ifr_flags |= IFF_UP;
	ok = ok && !ioctl(fd, SIOCSIFFLAGS, &ifr);
	if (fd >= 0)
		close(fd);
	return ok;
}

/* The pid of the daemon on our socket, from softrdma-cfg status; 0 if none. */
static pid_t daemon_pid(void)
{
	const char *b = getenv("SR_BUILD_DIR");
	char cmd[4096], line[256];
	long pid = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "'%s/bin/softrdma-cfg' status 2>/dev/null", b ? b : "build");
	f = popen(cmd, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Daemon: running (pid %ld)", &pid) == 1)
			break;
	pclose(f);
	return (pid_t)pid;
}

/* An RC WRITE from side 0 to side 1 of p arrives intact. */
static bool write_works(struct vt_pair *p, const char *what)
{
	struct vt_buf s, t;
	bool ok;

	vt_buf_alloc(&s, p->d->pd, 8192, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&t, p->d->pd, 8192, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	vt_fill(s.p, 8192, 7);
	vt_post_send(p->qp[0], 1, IBV_WR_RDMA_WRITE, s.p, 8192, s.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)t.p,
		     t.mr->rkey, 0);
	ok = EXPECT_WC(p->scq[0], 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL, "%s: an RC WRITE completes", what);
	ok &= CHECK(vt_verify(t.p, 8192, 7) < 0, "  and the data arrived");
	vt_buf_free(&s);
	vt_buf_free(&t);
	return ok;
}

int main(void)
{
	char sock[64];
	struct vt_dev d;
	struct vt_qp_cfg rc, ud;
	struct vt_pair p, u;
	struct vt_buf rb;

	bool netns = own_netns(); /* before any thread: a namespace is per thread */
	int netns_err = errno;

	vt_begin("test_daemon_death", 120);
	errno = netns_err;
	if (!netns)
		NOTE("no network namespace of its own (%s): another softrdmad on UDP 4791 here would take the "
		     "connection's first packets",
		     strerror(errno));
	snprintf(sock, sizeof(sock), "sr-t-death-%d", (int)getpid());
	setenv("SOFTRDMA_DAEMON_SOCK", sock, 1);
	if (!vt_open(&d))
		return vt_end();
	vt_cfg_default(&rc, IBV_QPT_RC);
	vt_cfg_default(&ud, IBV_QPT_UD);
	if (!vt_pair_setup(&d, &rc, &p) || !vt_pair_setup(&d, &ud, &u))
		return vt_end();
	write_works(&p, "before");
	vt_buf_alloc(&rb, d.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	for (int i = 0; i < 4; i++) {
		vt_post_recv(p.qp[1], 10 + i, rb.p + i * 512, 512, rb.mr->lkey);
		vt_post_recv(u.qp[1], 20 + i, rb.p + 2048 + i * 512, 512, rb.mr->lkey);
	}

	SECTION("softrdmad killed");
	pid_t dp = daemon_pid();
	if (!CHECK(dp > 0, "the test's own daemon runs (pid %ld, socket @%s)", (long)dp, sock))
		return vt_end();
	uint64_t t0 = vt_now_ms();
	kill(dp, SIGKILL);
	bool device_fatal = false;
	int qp_fatal = 0;
	struct ibv_async_event ev;
	while (!device_fatal && vt_now_ms() - t0 < 5000 && vt_get_async(d.ctx, &ev, 5000)) {
		if (ev.event_type == IBV_EVENT_DEVICE_FATAL)
			device_fatal = true;
		else if (ev.event_type == IBV_EVENT_QP_FATAL)
			qp_fatal++;
		else
			NOTE("async event %s", ibv_event_type_str(ev.event_type));
	}
	uint64_t ms = vt_now_ms() - t0;
	CHECK(device_fatal, "IBV_EVENT_DEVICE_FATAL within 5 s (%" PRIu64 " ms)", ms);
	CHECK_INT(qp_fatal, 4, "IBV_EVENT_QP_FATAL for each of the 4 QPs, before it");
	for (int i = 0; i < 4; i++) {
		EXPECT_WC(p.rcq[1], 10 + (uint64_t)i, IBV_WC_WR_FLUSH_ERR, VT_ANY_OPCODE, NULL,
			  "RC receive %d completes with WR_FLUSH_ERR", i);
		EXPECT_WC(u.rcq[1], 20 + (uint64_t)i, IBV_WC_WR_FLUSH_ERR, VT_ANY_OPCODE, NULL,
			  "UD receive %d completes with WR_FLUSH_ERR", i);
	}
	CHECK_INT(vt_qp_state(p.qp[0]), IBV_QPS_ERR, "the RC QP is in ERR");
	CHECK_INT(vt_qp_state(u.qp[1]), IBV_QPS_ERR, "the UD QP is in ERR");
	struct ibv_port_attr pa = { .state = IBV_PORT_NOP };
	int prc = ibv_query_port(d.ctx, 1, &pa);
	CHECK(prc == 0 && pa.state == IBV_PORT_DOWN, "the port reads DOWN (%s)", ibv_port_state_str(pa.state));
	struct ibv_qp_init_attr ia = {
		.send_cq = p.scq[0],
		.recv_cq = p.rcq[0],
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	errno = 0;
	struct ibv_qp *q = ibv_create_qp(d.pd, &ia);
	CHECK(!q && errno == EIO, "ibv_create_qp fails with EIO\t(errno %d %s)", errno, strerror(errno));
	if (q)
		ibv_destroy_qp(q);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
	CHECK_RC(ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE), 0, "modify ERR -> RESET works");
	struct ibv_qp_attr init;
	int mask = vt_trans_attr(&rc, IBV_QPS_INIT, 0, 0, 0, &d.gid, 0, &init);
	CHECK_RC(ibv_modify_qp(p.qp[0], &init, mask), EIO, "modify RESET -> INIT fails with EIO");
	vt_buf_free(&rb);
	vt_pair_destroy(&p);
	vt_pair_destroy(&u);
	vt_close(&d);

	SECTION("a context opened afterwards");
	if (vt_open(&d) && vt_pair_setup(&d, &rc, &p)) {
		write_works(&p, "after");
		dp = daemon_pid();
		CHECK(dp > 0, "the library started a daemon again (pid %ld)", (long)dp);
		vt_pair_destroy(&p);
	}
	vt_close(&d);
	dp = daemon_pid();
	if (dp > 0)
		kill(dp, SIGTERM);
	return vt_end();
}
