/* test_wr_errors: work requests that fail on the local side, with the
 * statuses and QP states of the kernel's rxe (issue 34):
 *
 *  - UD and UC: an operation the QP's type does not carry (RDMA WRITE or
 *    READ, an atomic, Send with Invalidate, Local Invalidate on UD) is
 *    posted, as rdma-core's rxe provider takes it, and completes with
 *    LOC_QP_OP_ERR, the QP going to ERR; a BIND_MW on UD is refused at post
 *    (EINVAL), as librxe does; ibv_create_qp_ex asks only for the send
 *    operations librxe gives each type;
 *  - UD: a send longer than the MTU completes with LOC_LEN_ERR (what NICs
 *    give) and the QP goes to ERR; one of exactly the MTU arrives;
 *  - UD: a datagram longer than the posted receive is dropped and the
 *    receive stays posted (rxe's class D, IBTA 9.9.3), with its own
 *    receive queue and with an SRQ;
 *  - an SGE that runs past the end (or starts before the start) of its
 *    valid region: LOC_PROT_ERR where rxe's copy gives -EFAULT (a send's
 *    or WRITE's gather, a READ's or atomic's local buffer), LOC_QP_OP_ERR
 *    for a receive's scatter (rxe's malformed WQE: the responder's QP goes
 *    to ERR, an RC requester gets REM_OP_ERR); an lkey naming no region
 *    stays LOC_QP_OP_ERR on the send side (test_errors). */
#include "vt.h"

static struct vt_dev D;

#define ACC_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static void check_state(struct ibv_qp *qp, enum ibv_qp_state want, const char *what)
{
	int s = vt_qp_state(qp);

	CHECK(s == (int)want, "%s: the QP is in %s\t(got %s)", what, vt_state_str(want), vt_state_str(s));
}

/* Drains the async events earlier cases left. */
static void drain_async(void)
{
	struct ibv_async_event ev;

	while (vt_get_async(D.ctx, &ev, 0))
		;
}

/* ------------------------------------------------------------------ */
/* operations a QP type does not carry                                  */
/* ------------------------------------------------------------------ */

static void not_carried(enum ibv_qp_type t, enum ibv_wr_opcode op, const char *name)
{
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf b, r;
	char what[128];

	snprintf(what, sizeof(what), "%s %s", vt_qpt_str(t), name);
	vt_cfg_default(&c, t);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&b, D.pd, 4096, 4096, ACC_ALL);
	vt_buf_alloc(&r, D.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_post_recv(p.qp[1], 9, r.p, 4096, r.mr->lkey);
	int rc;
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD)
		rc = vt_post_atomic(p.qp[0], 1, op, b.p, b.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)b.p + 64, b.mr->rkey,
				    1, 2);
	else if (op == IBV_WR_LOCAL_INV) {
		struct ibv_send_wr wr = { .wr_id = 1,
					  .opcode = op,
					  .send_flags = IBV_SEND_SIGNALED,
					  .invalidate_rkey = b.mr->rkey };
		struct ibv_send_wr *bad = NULL;
		rc = ibv_post_send(p.qp[0], &wr, &bad);
	} else
		rc = vt_post_send(p.qp[0], 1, op, b.p, 100, b.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)b.p + 1024,
				  b.mr->rkey, 7);
	CHECK_RC(rc, 0, "%s: posted (as rdma-core's rxe provider takes it)", what);
	if (t == IBV_QPT_UD)
		rc = vt_post_ud_send(p.qp[0], 2, b.p, 100, b.mr->lkey, IBV_SEND_SIGNALED, p.ah[0], p.qp[1]->qp_num,
				     c.qkey);
	else
		rc = vt_post_send(p.qp[0], 2, IBV_WR_SEND, b.p, 100, b.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
	CHECK_RC(rc, 0, "%s: a SEND posted behind it", what);
	EXPECT_WC(p.scq[0], 1, IBV_WC_LOC_QP_OP_ERR, VT_ANY_OPCODE, NULL, "%s: completes with LOC_QP_OP_ERR", what);
	EXPECT_WC(p.scq[0], 2, IBV_WC_WR_FLUSH_ERR, VT_ANY_OPCODE, NULL, "%s: the SEND behind it is flushed", what);
	check_state(p.qp[0], IBV_QPS_ERR, what);
	CHECK_CQ_EMPTY(p.rcq[1], 100, "%s: nothing reaches the peer", what);
	check_state(p.qp[1], IBV_QPS_RTS, "  ...its peer");
	vt_buf_free(&b);
	vt_buf_free(&r);
	vt_pair_destroy(&p);
}

static void ops_not_carried(void)
{
	static const struct {
		enum ibv_wr_opcode op;
		const char *name;
		bool uc;
	} ops[] = {
		{ IBV_WR_RDMA_WRITE, "RDMA_WRITE", false },
		{ IBV_WR_RDMA_WRITE_WITH_IMM, "RDMA_WRITE_WITH_IMM", false },
		{ IBV_WR_RDMA_READ, "RDMA_READ", true },
		{ IBV_WR_ATOMIC_CMP_AND_SWP, "ATOMIC_CMP_AND_SWP", true },
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, "ATOMIC_FETCH_AND_ADD", true },
		{ IBV_WR_SEND_WITH_INV, "SEND_WITH_INV", true },
		{ IBV_WR_LOCAL_INV, "LOCAL_INV", true },
	};

	SECTION("UD and UC: operations the QP type does not carry -> LOC_QP_OP_ERR, QP to ERR (as rxe)");
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		not_carried(IBV_QPT_UD, ops[i].op, ops[i].name);
		if (ops[i].uc)
			not_carried(IBV_QPT_UC, ops[i].op, ops[i].name);
	}
	drain_async();

	struct vt_qp_cfg c;
	struct vt_pair p;
	vt_cfg_default(&c, IBV_QPT_UD);
	if (vt_pair_setup(&D, &c, &p)) {
		struct ibv_mw *mw = ibv_alloc_mw(D.pd, IBV_MW_TYPE_2);
		struct ibv_send_wr wr = { .wr_id = 3, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED };
		struct ibv_send_wr *bad = NULL;
		wr.bind_mw.mw = mw;
		CHECK_RC(ibv_post_send(p.qp[0], &wr, &bad), EINVAL, "UD BIND_MW (librxe refuses it at post)");
		CHECK(bad == &wr, "  ...bad_wr points at it");
		CHECK_CQ_EMPTY(p.scq[0], 50, "  ...and it leaves no completion");
		check_state(p.qp[0], IBV_QPS_RTS, "  ...UD");
		if (mw)
			ibv_dealloc_mw(mw);
		vt_pair_destroy(&p);
	}

	/* librxe's send_ops_flags per QP type */
	static const struct {
		enum ibv_qp_type t;
		uint64_t flags;
		int want;
		const char *what;
	} ex[] = {
		{ IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM, 0, "UD with SEND, SEND_WITH_IMM" },
		{ IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ, EOPNOTSUPP, "UD with RDMA_READ" },
		{ IBV_QPT_UD, IBV_QP_EX_WITH_RDMA_WRITE, EOPNOTSUPP, "UD with RDMA_WRITE" },
		{ IBV_QPT_UC, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_BIND_MW, 0,
		  "UC with RDMA_WRITE, SEND_WITH_INV, BIND_MW" },
		{ IBV_QPT_UC, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, EOPNOTSUPP, "UC with ATOMIC_FETCH_AND_ADD" },
	};
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	for (size_t i = 0; cq && i < sizeof(ex) / sizeof(ex[0]); i++) {
		struct ibv_qp_init_attr_ex ia = {
			.qp_type = ex[i].t,
			.send_cq = cq,
			.recv_cq = cq,
			.pd = D.pd,
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.send_ops_flags = ex[i].flags,
			.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 }
		};
		errno = 0;
		struct ibv_qp *qp = ibv_create_qp_ex(D.ctx, &ia);
		int e = errno;
		CHECK_PTR_ERR(qp, e, ex[i].want, "ibv_create_qp_ex, %s", ex[i].what);
		if (qp)
			ibv_destroy_qp(qp);
	}
	if (cq)
		ibv_destroy_cq(cq);
}

/* ------------------------------------------------------------------ */
/* UD: longer than the MTU                                              */
/* ------------------------------------------------------------------ */

static void ud_mtu(bool wr_api)
{
	const char *how = wr_api ? "ibv_wr_send" : "ibv_post_send";
	SECTION("UD, %s: a send longer than the MTU -> LOC_LEN_ERR, QP to ERR", how);
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf s, r;
	struct ibv_wc wc;

	vt_cfg_default(&c, IBV_QPT_UD);
	if (wr_api)
		c.send_ops_flags = IBV_QP_EX_WITH_SEND;
	if (!vt_pair_setup(&D, &c, &p))
		return;
	int mtu = vt_mtu_bytes(D.port.active_mtu);
	vt_buf_alloc(&s, D.pd, (size_t)mtu + 64, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&r, D.pd, 2 * ((size_t)mtu + 104), 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_fill(s.p, (size_t)mtu + 1, 5);
	CHECK_RC(vt_post_recv(p.qp[1], 1, r.p, (uint32_t)mtu + 104, r.mr->lkey), 0, "UD post_recv");
	CHECK_RC(vt_post_recv(p.qp[1], 2, r.p + mtu + 104, (uint32_t)mtu + 104, r.mr->lkey), 0, "and a second");
	for (int k = 0; k < 2; k++) {
		uint32_t len = (uint32_t)mtu + (uint32_t)k;
		int rc;
		if (wr_api) {
			struct ibv_qp_ex *x = ibv_qp_to_qp_ex(p.qp[0]);
			ibv_wr_start(x);
			x->wr_id = 10 + (uint64_t)k;
			x->wr_flags = IBV_SEND_SIGNALED;
			ibv_wr_send(x);
			ibv_wr_set_ud_addr(x, p.ah[0], p.qp[1]->qp_num, c.qkey);
			ibv_wr_set_sge(x, s.mr->lkey, (uintptr_t)s.p, len);
			rc = ibv_wr_complete(x);
		} else {
			rc = vt_post_ud_send(p.qp[0], 10 + (uint64_t)k, s.p, len, s.mr->lkey, IBV_SEND_SIGNALED,
					     p.ah[0], p.qp[1]->qp_num, c.qkey);
		}
		CHECK_RC(rc, 0, "%s: UD send of %s = %u bytes posted", how, k ? "MTU + 1" : "the MTU", len);
	}
	EXPECT_WC(p.scq[0], 10, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "%s: the MTU-sized send", how);
	if (EXPECT_WC(p.rcq[1], 1, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "%s: ...arrives", how))
		CHECK_INT(wc.byte_len, mtu + 40, "  ...byte_len = MTU + 40 (GRH)");
	CHECK_DATA(r.p + 40, (size_t)mtu, 5, "  ...payload after the 40-byte GRH");
	EXPECT_WC(p.scq[0], 11, IBV_WC_LOC_LEN_ERR, IBV_WC_SEND, NULL, "%s: MTU + 1 completes with LOC_LEN_ERR", how);
	check_state(p.qp[0], IBV_QPS_ERR, how);
	CHECK_CQ_EMPTY(p.rcq[1], 100, "%s: nothing of MTU + 1 bytes is received", how);
	vt_buf_free(&s);
	vt_buf_free(&r);
	vt_pair_destroy(&p);
}

/* ------------------------------------------------------------------ */
/* UD: a datagram longer than the receive                               */
/* ------------------------------------------------------------------ */

static void ud_too_long(bool use_srq)
{
	const char *what = use_srq ? "UD with an SRQ" : "UD";
	SECTION("%s: a datagram longer than the posted receive is dropped, the receive stays posted", what);
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf s, r;
	struct ibv_wc wc;
	struct ibv_srq *srq = NULL;

	vt_cfg_default(&c, IBV_QPT_UD);
	if (use_srq) {
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
		srq = ibv_create_srq(D.pd, &sa);
		if (!CHECK(srq, "ibv_create_srq"))
			return;
		c.srq[1] = srq;
	}
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&s, D.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&r, D.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_fill(s.p, 4096, 31);
	vt_fill(r.p, 4096, 32);
	int rc = use_srq ? vt_post_srq_recv(srq, 1, r.p + 1000, 40 + 100, r.mr->lkey) :
			   vt_post_recv(p.qp[1], 1, r.p + 1000, 40 + 100, r.mr->lkey);
	CHECK_RC(rc, 0, "%s: a receive of 40 + 100 bytes", what);
	CHECK_RC(vt_post_ud_send(p.qp[0], 2, s.p, 101, s.mr->lkey, IBV_SEND_SIGNALED, p.ah[0], p.qp[1]->qp_num, c.qkey),
		 0, "%s: a 101-byte datagram to it", what);
	EXPECT_WC(p.scq[0], 2, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "  ...the sender completes (unreliable)");
	CHECK_CQ_EMPTY(p.rcq[1], 200, "%s: the datagram is dropped, no receive completes", what);
	check_state(p.qp[1], IBV_QPS_RTS, what);
	CHECK_RC(vt_post_ud_send(p.qp[0], 3, s.p + 200, 100, s.mr->lkey, IBV_SEND_SIGNALED, p.ah[0], p.qp[1]->qp_num,
				 c.qkey),
		 0, "%s: then a 100-byte datagram", what);
	EXPECT_WC(p.scq[0], 3, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "  ...sent");
	if (EXPECT_WC(p.rcq[1], 1, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "%s: it takes the receive left posted", what))
		CHECK_INT(wc.byte_len, 140, "  ...byte_len = 40 + 100");
	CHECK(!memcmp(r.p + 1040, s.p + 200, 100), "%s: its 100 bytes are right", what);
	bool clean = true;
	for (size_t i = 0; i < 4096; i++)
		if ((i < 1000 || i >= 1140) && r.p[i] != vt_pat(32, i))
			clean = false;
	CHECK(clean, "%s: nothing written outside the receive", what);
	CHECK_GUARDS(&r, "%s receive region", what);
	vt_buf_free(&s);
	vt_buf_free(&r);
	vt_pair_destroy(&p);
	if (srq)
		CHECK_RC(ibv_destroy_srq(srq), 0, "ibv_destroy_srq");
}

/* ------------------------------------------------------------------ */
/* SGEs past the bounds of their region                                 */
/* ------------------------------------------------------------------ */

/* Where an SGE of len bytes lies in region b (of blen bytes): past its
 * end by 50 bytes, or 50 bytes before its start (the guard bytes around
 * it are mapped: only the bounds are wrong). */
enum where {
	PAST_END,
	BEFORE_START
};
static uint8_t *sge_at(struct vt_buf *b, size_t blen, uint32_t len, enum where w)
{
	return w == PAST_END ? b->p + blen - len + 50 : b->p - 50;
}

/* The requester's own SGE (gather, or a READ's / atomic's local buffer). */
static void local_sge(enum ibv_qp_type t, enum ibv_wr_opcode op, uint32_t len, enum where where)
{
	const size_t blen = 16384;
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf l, r;
	char what[160];

	snprintf(what, sizeof(what), "%s %s of %u bytes, local SGE %s", vt_qpt_str(t),
		 op == IBV_WR_SEND	 ? "SEND" :
		 op == IBV_WR_RDMA_WRITE ? "WRITE" :
		 op == IBV_WR_RDMA_READ	 ? "READ" :
					   "FETCH_AND_ADD",
		 len, where == PAST_END ? "50 bytes past its region's end" : "starting 50 bytes before its region");
	SECTION("%s", what);
	vt_cfg_default(&c, t);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&l, D.pd, blen, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&r, D.pd, blen, 4096, ACC_ALL);
	vt_fill(r.p, blen, 3);
	uint8_t *a = sge_at(&l, blen, len, where);
	vt_post_recv(p.qp[1], 9, r.p, (uint32_t)blen, r.mr->lkey);
	int rc;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD)
		rc = vt_post_atomic(p.qp[0], 1, op, a, l.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)r.p, r.mr->rkey, 1, 0);
	else if (t == IBV_QPT_UD)
		rc = vt_post_ud_send(p.qp[0], 1, a, len, l.mr->lkey, IBV_SEND_SIGNALED, p.ah[0], p.qp[1]->qp_num,
				     c.qkey);
	else
		rc = vt_post_send(p.qp[0], 1, op, a, len, l.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)r.p, r.mr->rkey, 0);
	CHECK_RC(rc, 0, "%s: posted", what);
	EXPECT_WC(p.scq[0], 1, IBV_WC_LOC_PROT_ERR, VT_ANY_OPCODE, NULL, "%s: LOC_PROT_ERR (as rxe)", what);
	check_state(p.qp[0], IBV_QPS_ERR, what);
	CHECK_GUARDS(&l, "%s: local region", what);
	vt_buf_free(&l);
	vt_buf_free(&r);
	vt_pair_destroy(&p);
}

/* The responder's receive SGE. */
static void recv_sge(enum ibv_qp_type t)
{
	const size_t blen = 8192;
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf s, r;
	char what[128];

	snprintf(what, sizeof(what), "%s SEND into a receive SGE 50 bytes past its region's end", vt_qpt_str(t));
	SECTION("%s", what);
	drain_async();
	vt_cfg_default(&c, t);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&s, D.pd, blen, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&r, D.pd, blen, 4096, IBV_ACCESS_LOCAL_WRITE);
	uint32_t room = t == IBV_QPT_UD ? 40 + 200 : 200;
	vt_post_recv(p.qp[1], 5, sge_at(&r, blen, room, PAST_END), room, r.mr->lkey);
	vt_post_recv(p.qp[1], 6, r.p, room, r.mr->lkey);
	/* 200 bytes fill the receive: its last 50 are written past the region
	 * (only what is written is checked, as rxe's copy checks it) */
	int rc = t == IBV_QPT_UD ?
			 vt_post_ud_send(p.qp[0], 1, s.p, 200, s.mr->lkey, IBV_SEND_SIGNALED, p.ah[0], p.qp[1]->qp_num,
					 c.qkey) :
			 vt_post_send(p.qp[0], 1, IBV_WR_SEND, s.p, 200, s.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
	CHECK_RC(rc, 0, "%s: posted", what);
	EXPECT_WC(p.scq[0], 1, t == IBV_QPT_RC ? IBV_WC_REM_OP_ERR : IBV_WC_SUCCESS, VT_ANY_OPCODE, NULL,
		  "%s: the requester (%s)", what, t == IBV_QPT_RC ? "NAK remote operational error" : "unreliable");
	EXPECT_WC(p.rcq[1], 5, IBV_WC_LOC_QP_OP_ERR, IBV_WC_RECV, NULL, "%s: the receive (as rxe)", what);
	EXPECT_WC(p.rcq[1], 6, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, NULL, "%s: the next receive is flushed", what);
	check_state(p.qp[1], IBV_QPS_ERR, "  ...the responder");
	if (t != IBV_QPT_RC) {
		/* no requester's fault to report: rxe raises no event either */
		struct ibv_async_event ev;
		bool got = vt_get_async(D.ctx, &ev, 100);
		CHECK(!got, "%s: no async event	(got %s)", what, got ? ibv_event_type_str(ev.event_type) : "");
	}
	CHECK_GUARDS(&r, "%s: receive region", what);
	vt_buf_free(&s);
	vt_buf_free(&r);
	vt_pair_destroy(&p);
}

static void sge_bounds(void)
{
	local_sge(IBV_QPT_RC, IBV_WR_SEND, 100, PAST_END);
	local_sge(IBV_QPT_RC, IBV_WR_SEND, 100, BEFORE_START);
	local_sge(IBV_QPT_RC, IBV_WR_SEND, 3 * 4096, PAST_END); /* only its last packet crosses */
	local_sge(IBV_QPT_RC, IBV_WR_RDMA_WRITE, 100, PAST_END);
	local_sge(IBV_QPT_UC, IBV_WR_SEND, 100, PAST_END);
	local_sge(IBV_QPT_UD, IBV_WR_SEND, 100, PAST_END);
	local_sge(IBV_QPT_RC, IBV_WR_RDMA_READ, 6000, PAST_END);
	local_sge(IBV_QPT_RC, IBV_WR_ATOMIC_FETCH_AND_ADD, 8, PAST_END);
	recv_sge(IBV_QPT_RC);
	recv_sge(IBV_QPT_UC);
	recv_sge(IBV_QPT_UD);
	drain_async();
}

int main(int argc, char **argv)
{
	vt_begin_args("test_wr_errors", 120, argc, argv);
	if (!vt_open(&D))
		return vt_end();
	VT_RUN(ops_not_carried());
	VT_RUN(ud_mtu(false));
	VT_RUN(ud_mtu(true));
	VT_RUN(ud_too_long(false));
	VT_RUN(ud_too_long(true));
	VT_RUN(sge_bounds());
	drain_async();
	vt_close(&D);
	return vt_end();
}
