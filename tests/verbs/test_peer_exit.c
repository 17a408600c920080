/* test_peer_exit - a receiver that exits the moment it has its receive
 * completion (fio's rdma server does: it calls _exit right after the
 * client's FINISH message, never disconnecting) must still have
 * acknowledged the message: the sender's SEND completes with SUCCESS,
 * not RETRY_EXC_ERR after retrying into a QP that is gone.
 *
 * A child process receives; the parent sends one SEND and, right behind
 * it, a large RDMA WRITE, so that the child's receive path still has
 * packets to place after the SEND's completion became visible -- the
 * window in which an ACK left only after the batch dies with the child.
 * Each round forks a new child before either side opens the device (a
 * context does not survive fork); the child waits on a completion channel
 * and calls _exit as soon as ibv_get_cq_event returns. */
#include <sys/wait.h>

#include "vt.h"

#define ROUNDS 12
#define WRITE_LEN (8u << 20)

struct peer_info {
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	union ibv_gid gid;
};

static bool write_all(int fd, const void *p, size_t n)
{
	return write(fd, p, n) == (ssize_t)n;
}

static bool read_all(int fd, void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, (char *)p + got, n - got);
		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

static struct ibv_qp *make_qp(struct vt_dev *d, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 }
	};
	return ibv_create_qp(d->pd, &ia);
}

/* The receiving child: no CHECKs (its output would interleave); exit
 * status 0 when it got its completion, else the step that failed. */
static void child(int to_parent, int from_parent, const struct vt_qp_cfg *c)
{
	struct vt_dev d;
	struct peer_info me = { 0 }, peer;

	if (!vt_open(&d))
		_exit(10);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(d.ctx);
	struct ibv_cq *cq = ch ? ibv_create_cq(d.ctx, 16, NULL, ch, 0) : NULL;
	struct ibv_qp *qp = cq ? make_qp(&d, cq) : NULL;
	uint8_t *buf = malloc(WRITE_LEN);
	struct ibv_mr *mr = buf ? ibv_reg_mr(d.pd, buf, WRITE_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) :
				  NULL;
	if (!qp || !mr)
		_exit(11);
	me.qpn = qp->qp_num;
	me.psn = c->psn[1];
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	me.gid = d.gid;
	if (!write_all(to_parent, &me, sizeof(me)) || !read_all(from_parent, &peer, sizeof(peer)))
		_exit(12);
	if (vt_qp_connect(qp, c, IBV_QPS_RTS, peer.qpn, peer.psn, me.psn, &peer.gid, d.gid_index) ||
	    vt_post_recv(qp, 1, buf, 64, mr->lkey) || ibv_req_notify_cq(cq, 0))
		_exit(13);
	char ready = 1;
	if (!write_all(to_parent, &ready, 1))
		_exit(14);
	struct ibv_cq *ecq;
	void *ectx;
	if (ibv_get_cq_event(ch, &ecq, &ectx))
		_exit(15);
	_exit(0); /* at once, as fio's server job does */
}

static void round_trip(int round, const struct vt_qp_cfg *c)
{
	int up[2], down[2];
	struct peer_info me = { 0 }, peer;
	struct vt_dev dev, *d = &dev;

	if (pipe(up) || pipe(down)) {
		CHECK(0, "pipe");
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		child(up[1], down[0], c);
	}
	close(up[1]);
	close(down[0]);
	if (!vt_open(d)) {
		close(up[0]);
		close(down[1]);
		waitpid(pid, NULL, 0);
		return;
	}
	struct ibv_cq *cq = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
	struct ibv_qp *qp = cq ? make_qp(d, cq) : NULL;
	uint8_t *buf = malloc(WRITE_LEN);
	struct ibv_mr *mr = buf ? ibv_reg_mr(d->pd, buf, WRITE_LEN, IBV_ACCESS_LOCAL_WRITE) : NULL;
	char ready = 0;
	bool ok = CHECK(qp && mr, "round %d: sender QP and memory", round);
	me.qpn = qp ? qp->qp_num : 0;
	me.psn = c->psn[0];
	me.gid = d->gid;
	ok = ok && CHECK(read_all(up[0], &peer, sizeof(peer)) && write_all(down[1], &me, sizeof(me)),
			 "round %d: QPs exchanged with the child", round);
	ok = ok && CHECK(!vt_qp_connect(qp, c, IBV_QPS_RTS, peer.qpn, peer.psn, me.psn, &peer.gid, d->gid_index),
			 "round %d: sender connected", round);
	ok = ok && CHECK(read_all(up[0], &ready, 1) && ready == 1, "round %d: the child waits on its channel", round);
	if (ok) {
		struct ibv_sge s1 = { (uintptr_t)buf, 64, mr->lkey }, s2 = { (uintptr_t)buf, WRITE_LEN, mr->lkey };
		struct ibv_send_wr w2 = { .wr_id = 2,
					  .sg_list = &s2,
					  .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .wr.rdma = { peer.addr, peer.rkey } };
		struct ibv_send_wr w1 = { .wr_id = 1,
					  .next = &w2,
					  .sg_list = &s1,
					  .num_sge = 1,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		CHECK_RC(ibv_post_send(qp, &w1, &bad), 0, "round %d: SEND and an 8 MiB WRITE behind it", round);
		struct ibv_wc wc;
		if (vt_poll(cq, 1, &wc, 10000) == 1)
			CHECK(wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS,
			      "round %d: the SEND completes with SUCCESS though the receiver exited\t(wr_id %" PRIu64
			      ", %s)",
			      round, wc.wr_id, ibv_wc_status_str(wc.status));
		else
			CHECK(0, "round %d: the SEND completes within 10 s", round);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "round %d: the child had its completion\t(status %#x)", round, st);
	close(up[0]);
	close(down[1]);
	if (qp)
		ibv_destroy_qp(qp);
	if (mr)
		ibv_dereg_mr(mr);
	if (cq)
		ibv_destroy_cq(cq);
	free(buf);
	vt_close(d);
}

int main(void)
{
	struct vt_qp_cfg c;

	vt_begin("test_peer_exit", 240);
	vt_seed((uint64_t)time(NULL) ^ (uint64_t)getpid());
	vt_cfg_default(&c, IBV_QPT_RC);
	/* A SEND never acknowledged fails whatever the budget (the child is
	 * gone, no retry can reach it); the budget only has to outlast a
	 * busy machine's scheduling of the child's progress thread.  With
	 * 4 ms x 3 tries, a CI run beside two spinning ib_write_lat pairs
	 * failed one run in 40-85: the child's ACK left 12 ms after the
	 * parent had given up.  17 ms x 8 tries: 134 ms per round. */
	c.timeout = 12;
	c.retry_cnt = 7;
	SECTION("RC: the receiver _exits on its receive completion; the sender's SEND still succeeds");
	for (int r = 1; r <= ROUNDS; r++)
		round_trip(r, &c);
	return vt_end();
}
