/* test_handles: every verb resolves the handles of the objects it is
 * given, as uverbs resolves them in the context the command goes to, and
 * leaves an object alone when its handle does not name it (issue 34).
 *
 *  - numbering: one ID space per context for every type, the lowest free
 *    ID first (uverbs' xa_alloc): a new context's first object is 0;
 *  - a handle changed to one that names nothing: ENOENT from the verbs on
 *    the object (destroys, modify/query, req_notify, resize, multicast
 *    attach/detach, rereg) and from the creates it is an input of
 *    (reg_mr, alloc_mw, create_qp/_ex, create_srq, create_ah); with the
 *    handle set back the object works and is destroyed;
 *  - a handle changed to another type's object's: EINVAL;
 *  - another context's objects in a create: their handles are looked up
 *    in the verb's context (ENOENT, EINVAL as they name nothing or another
 *    type there); another context's completion channel is EBADF, as the
 *    kernel's lookup of its fd says; another context's window in
 *    ibv_bind_mw completes with IBV_WC_MW_BIND_ERR, as rxe's;
 *  - where softrdma is stricter than uverbs, which acts on whatever object
 *    a handle names and reads destroyed objects' memory: a handle changed
 *    to another object of the same type is ENOENT and that object is not
 *    touched; an object destroyed already is ENOENT (a channel EBADF),
 *    found out without reading its memory (the ASan build checks that). */
#include "vt.h"

#define NOWHERE 0x7ffffff0u /* a handle that names nothing */

static struct vt_dev D;
static bool roce;

/* Runs the statements with field set to val, then sets it back. */
#define WITH_HANDLE(field, val, ...)          \
	do {                                  \
		uint32_t vt_saved_ = (field); \
		(field) = (val);              \
		__VA_ARGS__;                  \
		(field) = vt_saved_;          \
	} while (0)

static struct ibv_qp *rc_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = scq,
		.recv_cq = rcq,
		.srq = srq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = srq ? 0 : 4, .max_send_sge = 1, .max_recv_sge = srq ? 0 : 1 }
	};
	return ibv_create_qp(pd, &a);
}

/* ibv_create_qp_ex with a mask that reaches the provider (only PD would
 * be ibv_create_qp of the PD's context, verbs.h). */
static struct ibv_qp *rc_qp_ex(struct ibv_context *c, struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq,
		.recv_cq = cq,
		.srq = srq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = srq ? 0 : 4, .max_send_sge = 1, .max_recv_sge = srq ? 0 : 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND
	};
	return ibv_create_qp_ex(c, &a);
}

static struct ibv_srq *make_srq(struct ibv_pd *pd)
{
	struct ibv_srq_init_attr a = { .attr = { .max_wr = 4, .max_sge = 1 } };
	return ibv_create_srq(pd, &a);
}

static struct ibv_ah *make_ah(struct ibv_pd *pd)
{
	struct ibv_ah_attr a = { .is_global = 1, .port_num = 1, .grh = { .dgid = D.gid, .hop_limit = 64 } };
	return ibv_create_ah(pd, &a);
}

static struct ibv_cq_ex *make_cq_ex(struct ibv_context *c, struct ibv_comp_channel *ch)
{
	struct ibv_cq_init_attr_ex a = { .cqe = 16, .channel = ch, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN };
	return ibv_create_cq_ex(c, &a);
}

/* A pointer verb's result: NULL with errno want (the object, if made, is
 * destroyed by kill). */
#define CHECK_MADE(expr, want, kill, ...)                         \
	do {                                                      \
		errno = 0;                                        \
		__typeof__(expr) vt_p_ = (expr);                  \
		int vt_e_ = errno;                                \
		CHECK_PTR_ERR(vt_p_, vt_e_, (want), __VA_ARGS__); \
		if (vt_p_)                                        \
			kill(vt_p_);                              \
	} while (0)

static void kill_qp(struct ibv_qp *q)
{
	ibv_destroy_qp(q);
}
static void kill_mr(struct ibv_mr *m)
{
	ibv_dereg_mr(m);
}
static void kill_mw(struct ibv_mw *m)
{
	ibv_dealloc_mw(m);
}
static void kill_srq(struct ibv_srq *s)
{
	ibv_destroy_srq(s);
}
static void kill_ah(struct ibv_ah *a)
{
	ibv_destroy_ah(a);
}
static void kill_cq(struct ibv_cq *c)
{
	ibv_destroy_cq(c);
}
static void kill_cq_ex(struct ibv_cq_ex *c)
{
	ibv_destroy_cq(ibv_cq_ex_to_cq(c));
}

static void numbering(void)
{
	SECTION("handles: one ID space per context, the lowest free first");
	struct ibv_context *c = ibv_open_device(D.ctx->device);
	if (!CHECK(c, "a second context of %s", D.name))
		return;
	struct ibv_pd *pd = ibv_alloc_pd(c);
	struct ibv_cq *cq = ibv_create_cq(c, 4, NULL, NULL, 0);
	struct ibv_pd *pd2 = ibv_alloc_pd(c);
	if (!CHECK(pd && cq && pd2, "a PD, a CQ and a PD in it")) {
		ibv_close_device(c);
		return;
	}
	CHECK_INT(pd->handle, 0, "the context's first object has handle 0");
	CHECK_INT(cq->handle, 1, "the CQ after it 1 (the types share the ID space)");
	CHECK_INT(pd2->handle, 2, "the next PD 2");
	CHECK_RC(ibv_dealloc_pd(pd), 0, "the first PD deallocated");
	pd = ibv_alloc_pd(c);
	if (CHECK(pd, "a PD again"))
		CHECK_INT(pd->handle, 0, "it gets the lowest free handle, 0");
	if (pd)
		ibv_dealloc_pd(pd);
	ibv_dealloc_pd(pd2);
	ibv_destroy_cq(cq);
	CHECK_RC(ibv_close_device(c), 0, "the context closed");
}

/* One object of each type in D (a window and a UD QP on RoCE only). */
struct objs {
	struct ibv_comp_channel *ch;
	struct ibv_pd *pd;
	struct ibv_cq *cq; /* on ch */
	struct ibv_cq_ex *cqx;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	struct ibv_srq *srq;
	struct ibv_qp *qp, *ud; /* RC, UD on cq */
	struct ibv_ah *ah;
};

static bool make_objs(struct objs *o)
{
	static char buf[8192];

	memset(o, 0, sizeof(*o));
	o->ch = ibv_create_comp_channel(D.ctx);
	o->pd = ibv_alloc_pd(D.ctx);
	o->cq = ibv_create_cq(D.ctx, 16, NULL, o->ch, 0);
	o->cqx = make_cq_ex(D.ctx, NULL);
	if (o->pd) {
		o->mr = ibv_reg_mr(o->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
		o->mw = roce ? ibv_alloc_mw(o->pd, IBV_MW_TYPE_1) : NULL;
		o->srq = make_srq(o->pd);
		o->ah = make_ah(o->pd);
	}
	if (o->pd && o->cq) {
		struct ibv_qp_init_attr a = {
			.send_cq = o->cq,
			.recv_cq = o->cq,
			.qp_type = IBV_QPT_UD,
			.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 }
		};
		o->qp = rc_qp(o->pd, o->cq, o->cq, NULL);
		o->ud = roce ? ibv_create_qp(o->pd, &a) : NULL;
	}
	return CHECK(o->ch && o->pd && o->cq && o->cqx && o->mr && o->srq && o->qp && o->ah &&
			     (!roce || (o->mw && o->ud)),
		     "a channel, PD, CQ, CQ_ex, MR, %sSRQ, RC QP, AH%s\t(errno %d)", roce ? "MW, " : "",
		     roce ? ", UD QP" : "", errno);
}

static void bad_handles(void)
{
	SECTION("a handle that names nothing: ENOENT, the object untouched");
	struct objs o;
	static char buf[8192]; /* for the MRs that must not be made */

	if (!make_objs(&o))
		return;
	struct ibv_comp_channel *ch = o.ch;
	struct ibv_pd *pd = o.pd;
	struct ibv_cq *cq = o.cq;
	struct ibv_cq_ex *cqx = o.cqx;
	struct ibv_mr *mr = o.mr;
	struct ibv_mw *mw = o.mw;
	struct ibv_srq *srq = o.srq;
	struct ibv_qp *qp = o.qp, *ud = o.ud;
	struct ibv_ah *ah = o.ah;

	/* the PD */
	WITH_HANDLE(pd->handle, NOWHERE, {
		CHECK_RC(ibv_dealloc_pd(pd), ENOENT, "ibv_dealloc_pd");
		CHECK_MADE(ibv_reg_mr(pd, buf, sizeof(buf), 0), ENOENT, kill_mr, "ibv_reg_mr with it");
		if (roce)
			CHECK_MADE(ibv_alloc_mw(pd, IBV_MW_TYPE_1), ENOENT, kill_mw, "ibv_alloc_mw with it");
		CHECK_MADE(rc_qp(pd, cq, cq, NULL), ENOENT, kill_qp, "ibv_create_qp with it");
		CHECK_MADE(rc_qp_ex(D.ctx, pd, cq, NULL), ENOENT, kill_qp, "ibv_create_qp_ex with it");
		CHECK_MADE(make_srq(pd), ENOENT, kill_srq, "ibv_create_srq with it");
		CHECK_MADE(make_ah(pd), ENOENT, kill_ah, "ibv_create_ah with it");
		errno = 0;
		CHECK_INT(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, 0), IBV_REREG_MR_ERR_CMD,
			  "ibv_rereg_mr to it: IBV_REREG_MR_ERR_CMD");
		CHECK_INT(errno, ENOENT, "... errno ENOENT");
	});
	CHECK(mr->pd == pd, "the MR kept its PD");

	/* the CQs */
	WITH_HANDLE(cq->handle, NOWHERE, {
		CHECK_RC(ibv_destroy_cq(cq), ENOENT, "ibv_destroy_cq");
		CHECK_RC(ibv_req_notify_cq(cq, 0), ENOENT, "ibv_req_notify_cq");
		CHECK_RC(ibv_resize_cq(cq, 32), ENOENT, "ibv_resize_cq");
		CHECK_MADE(rc_qp(pd, cq, ibv_cq_ex_to_cq(cqx), NULL), ENOENT, kill_qp, "ibv_create_qp: send CQ");
		CHECK_MADE(rc_qp(pd, ibv_cq_ex_to_cq(cqx), cq, NULL), ENOENT, kill_qp, "ibv_create_qp: receive CQ");
	});
	CHECK_INT(cq->cqe, 16, "the CQ kept its size");
	WITH_HANDLE(ibv_cq_ex_to_cq(cqx)->handle, NOWHERE, {
		CHECK_RC(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), ENOENT, "ibv_destroy_cq of an ibv_create_cq_ex CQ");
		CHECK_RC(ibv_req_notify_cq(ibv_cq_ex_to_cq(cqx), 0), ENOENT, "ibv_req_notify_cq of it");
	});
	CHECK_RC(ibv_req_notify_cq(cq, 0), 0, "the handle set back: ibv_req_notify_cq works");

	/* the MR, the MW */
	WITH_HANDLE(mr->handle, NOWHERE, {
		CHECK_RC(ibv_dereg_mr(mr), ENOENT, "ibv_dereg_mr");
		errno = 0;
		CHECK_INT(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE),
			  IBV_REREG_MR_ERR_CMD, "ibv_rereg_mr: IBV_REREG_MR_ERR_CMD");
		CHECK_INT(errno, ENOENT, "... errno ENOENT");
	});
	if (mw)
		WITH_HANDLE(mw->handle, NOWHERE, CHECK_RC(ibv_dealloc_mw(mw), ENOENT, "ibv_dealloc_mw"));

	/* the SRQ */
	WITH_HANDLE(srq->handle, NOWHERE, {
		struct ibv_srq_attr sa = { .max_wr = 8, .srq_limit = 1 };
		CHECK_RC(ibv_destroy_srq(srq), ENOENT, "ibv_destroy_srq");
		CHECK_RC(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT), ENOENT, "ibv_modify_srq");
		CHECK_RC(ibv_query_srq(srq, &sa), ENOENT, "ibv_query_srq");
		CHECK_MADE(rc_qp(pd, cq, cq, srq), ENOENT, kill_qp, "ibv_create_qp with it");
	});
	{
		struct ibv_srq_attr sa;
		if (CHECK_RC(ibv_query_srq(srq, &sa), 0, "the handle set back: ibv_query_srq works"))
			CHECK_INT(sa.srq_limit, 0, "no limit was set");
	}

	/* the QPs */
	WITH_HANDLE(qp->handle, NOWHERE, {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
		struct ibv_qp_init_attr ia;
		CHECK_RC(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
			 ENOENT, "ibv_modify_qp");
		CHECK_RC(ibv_modify_qp(qp, &a, IBV_QP_STATE), ENOENT,
			 "ibv_modify_qp with bad attributes: the handle first");
		CHECK_RC(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), ENOENT, "ibv_query_qp");
		CHECK_RC(ibv_destroy_qp(qp), ENOENT, "ibv_destroy_qp");
	});
	CHECK_INT(vt_qp_state(qp), IBV_QPS_RESET, "the QP is still in RESET");
	if (ud) {
		union ibv_gid g = { .raw = { 0xff, 0x0e } };
		g.raw[15] = 1;
		WITH_HANDLE(ud->handle, NOWHERE, {
			CHECK_RC(ibv_attach_mcast(ud, &g, 0), ENOENT, "ibv_attach_mcast");
			CHECK_RC(ibv_detach_mcast(ud, &g, 0), ENOENT, "ibv_detach_mcast");
		});
	}

	/* the AH */
	WITH_HANDLE(ah->handle, NOWHERE, CHECK_RC(ibv_destroy_ah(ah), ENOENT, "ibv_destroy_ah"));

	SECTION("a handle that names another type's object: EINVAL");
	WITH_HANDLE(qp->handle, pd->handle, {
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;
		CHECK_RC(ibv_destroy_qp(qp), EINVAL, "ibv_destroy_qp, its handle a PD's");
		CHECK_RC(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), EINVAL, "ibv_query_qp");
	});
	WITH_HANDLE(pd->handle, cq->handle, CHECK_RC(ibv_dealloc_pd(pd), EINVAL, "ibv_dealloc_pd, its handle a CQ's"));
	WITH_HANDLE(cq->handle, srq->handle, {
		CHECK_RC(ibv_req_notify_cq(cq, 0), EINVAL, "ibv_req_notify_cq, its handle an SRQ's");
		CHECK_MADE(rc_qp(pd, cq, cq, NULL), EINVAL, kill_qp, "ibv_create_qp with that CQ");
	});
	WITH_HANDLE(mr->handle, ah->handle, CHECK_RC(ibv_dereg_mr(mr), EINVAL, "ibv_dereg_mr, its handle an AH's"));
	WITH_HANDLE(ah->handle, mr->handle, CHECK_RC(ibv_destroy_ah(ah), EINVAL, "ibv_destroy_ah, its handle an MR's"));

	SECTION("a handle that names another object of the type: refused, both untouched");
	struct ibv_qp *qp2 = rc_qp(pd, cq, cq, NULL);
	if (CHECK(qp2, "a second QP")) {
		WITH_HANDLE(qp->handle, qp2->handle, {
			struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
			CHECK_RC(ibv_destroy_qp(qp), ENOENT, "ibv_destroy_qp, its handle the other QP's");
			CHECK_RC(ibv_modify_qp(qp, &a, IBV_QP_STATE), ENOENT, "ibv_modify_qp to ERR");
		});
		CHECK_INT(vt_qp_state(qp2), IBV_QPS_RESET, "the other QP is in RESET still");
		CHECK_RC(ibv_destroy_qp(qp2), 0, "and is destroyed");
	}
	WITH_HANDLE(pd->handle, D.pd->handle,
		    CHECK_RC(ibv_dealloc_pd(pd), ENOENT, "ibv_dealloc_pd, its handle another PD's"));

	SECTION("the handles set back: every object works and is destroyed");
	{
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
		CHECK_RC(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0,
			 "ibv_modify_qp to INIT");
		CHECK_RC(ibv_resize_cq(cq, 32), 0, "ibv_resize_cq");
	}
	CHECK_RC(ibv_destroy_ah(ah), 0, "ibv_destroy_ah");
	if (ud)
		CHECK_RC(ibv_destroy_qp(ud), 0, "ibv_destroy_qp (UD)");
	CHECK_RC(ibv_destroy_qp(qp), 0, "ibv_destroy_qp");
	CHECK_RC(ibv_destroy_srq(srq), 0, "ibv_destroy_srq");
	if (mw)
		CHECK_RC(ibv_dealloc_mw(mw), 0, "ibv_dealloc_mw");
	CHECK_RC(ibv_dereg_mr(mr), 0, "ibv_dereg_mr");
	CHECK_RC(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0, "ibv_destroy_cq (CQ_ex)");
	CHECK_RC(ibv_destroy_cq(cq), 0, "ibv_destroy_cq");
	CHECK_RC(ibv_destroy_comp_channel(ch), 0, "ibv_destroy_comp_channel");
	CHECK_RC(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
}

/* A type 1 window of context b bound through a QP of D: the bind names
 * it by its key, which D's QP does not know. */
static void foreign_window(struct ibv_pd *pd_b)
{
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct ibv_mw *mw = ibv_alloc_mw(pd_b, IBV_MW_TYPE_1);

	vt_cfg_default(&c, IBV_QPT_RC);
	if (!CHECK(mw, "a window in the other context") || !vt_pair_setup(&D, &c, &p)) {
		if (mw)
			ibv_dealloc_mw(mw);
		return;
	}
	struct ibv_mw_bind b = { .wr_id = 7,
				 .send_flags = IBV_SEND_SIGNALED,
				 .bind_info = { .mr = NULL, .addr = 0, .length = 0 } };
	if (CHECK_RC(ibv_bind_mw(p.qp[0], mw, &b), 0, "ibv_bind_mw of the other context's window: posted"))
		EXPECT_WC(p.scq[0], 7, IBV_WC_MW_BIND_ERR, -1, NULL, "its bind");
	vt_pair_destroy(&p);
	CHECK_RC(ibv_dealloc_mw(mw), 0, "the window deallocated in its context");
}

static void foreign(void)
{
	SECTION("another context's objects: looked up in the verb's context");
	struct ibv_context *b = ibv_open_device(D.ctx->device);
	if (!CHECK(b, "a second context"))
		return;
	/* B's first object, handle 0: D's handle 0 is its PD */
	struct ibv_cq *cq_b0 = ibv_create_cq(b, 8, NULL, NULL, 0);
	struct ibv_pd *fill[64];
	for (int i = 0; i < 64; i++)
		fill[i] = ibv_alloc_pd(b);
	struct ibv_pd *pd_b = ibv_alloc_pd(b);
	struct ibv_cq *cq_b = ibv_create_cq(b, 8, NULL, NULL, 0);
	struct ibv_srq *srq_b = pd_b ? make_srq(pd_b) : NULL;
	struct ibv_comp_channel *ch_b = ibv_create_comp_channel(b);
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 8, NULL, NULL, 0);
	if (CHECK(cq_b0 && fill[63] && pd_b && cq_b && srq_b && ch_b && cq, "objects in both contexts")) {
		CHECK_INT(cq_b0->handle, D.pd->handle, "B's first CQ has the handle of D's PD");
		CHECK(cq_b->handle > cq->handle + 8, "B's later objects have handles D has not given\t(%u, D %u)",
		      cq_b->handle, cq->handle);
		CHECK_MADE(rc_qp(D.pd, cq_b, cq, NULL), ENOENT, kill_qp, "ibv_create_qp: B's CQ as send CQ");
		CHECK_MADE(rc_qp(D.pd, cq, cq_b, NULL), ENOENT, kill_qp, "ibv_create_qp: B's CQ as receive CQ");
		CHECK_MADE(rc_qp(D.pd, cq_b0, cq, NULL), EINVAL, kill_qp,
			   "ibv_create_qp: a CQ of B whose handle is a PD's in D");
		CHECK_MADE(rc_qp(D.pd, cq, cq, srq_b), ENOENT, kill_qp, "ibv_create_qp: B's SRQ");
		CHECK_MADE(rc_qp_ex(D.ctx, pd_b, cq, NULL), ENOENT, kill_qp, "ibv_create_qp_ex in D: B's PD");
		CHECK_MADE(ibv_create_cq(D.ctx, 8, NULL, ch_b, 0), EBADF, kill_cq, "ibv_create_cq in D: B's channel");
		CHECK_MADE(make_cq_ex(D.ctx, ch_b), EBADF, kill_cq_ex, "ibv_create_cq_ex in D: B's channel");
		CHECK_MADE(rc_qp_ex(b, pd_b, cq_b, NULL), 0, kill_qp, "ibv_create_qp_ex in B with B's objects");
		if (roce)
			foreign_window(pd_b);
	}
	if (cq)
		ibv_destroy_cq(cq);
	if (ch_b)
		ibv_destroy_comp_channel(ch_b);
	if (srq_b)
		ibv_destroy_srq(srq_b);
	if (cq_b)
		ibv_destroy_cq(cq_b);
	if (pd_b)
		ibv_dealloc_pd(pd_b);
	for (int i = 0; i < 64; i++)
		if (fill[i])
			ibv_dealloc_pd(fill[i]);
	if (cq_b0)
		ibv_destroy_cq(cq_b0);
	CHECK_RC(ibv_close_device(b), 0, "the second context closed");
}

/* Destroys o, then again: the second time it is not there (errno again). */
#define DESTROY_TWICE(fn, o, again, what)                \
	do {                                             \
		CHECK_RC(fn(o), 0, what);                \
		CHECK_RC(fn(o), (again), what " again"); \
	} while (0)

static void destroyed(void)
{
	SECTION("an object destroyed already: ENOENT, its memory not read");
	struct objs o;

	if (!make_objs(&o))
		return;
	/* ibv_dealloc_mw is inline in verbs.h and reads the window first */
	if (o.mw)
		CHECK_RC(ibv_dealloc_mw(o.mw), 0, "ibv_dealloc_mw");
	if (o.ud)
		DESTROY_TWICE(ibv_destroy_qp, o.ud, ENOENT, "ibv_destroy_qp (UD)");
	DESTROY_TWICE(ibv_destroy_qp, o.qp, ENOENT, "ibv_destroy_qp");
	DESTROY_TWICE(ibv_destroy_ah, o.ah, ENOENT, "ibv_destroy_ah");
	DESTROY_TWICE(ibv_destroy_srq, o.srq, ENOENT, "ibv_destroy_srq");
	DESTROY_TWICE(ibv_dereg_mr, o.mr, ENOENT, "ibv_dereg_mr");
	DESTROY_TWICE(ibv_destroy_cq, ibv_cq_ex_to_cq(o.cqx), ENOENT, "ibv_destroy_cq (CQ_ex)");
	DESTROY_TWICE(ibv_destroy_cq, o.cq, ENOENT, "ibv_destroy_cq");
	DESTROY_TWICE(ibv_destroy_comp_channel, o.ch, EBADF, "ibv_destroy_comp_channel");
	DESTROY_TWICE(ibv_dealloc_pd, o.pd, ENOENT, "ibv_dealloc_pd");
}

int main(void)
{
	vt_begin("test_handles", 240);
	if (!vt_open(&D))
		return vt_end();
	roce = D.ctx->device->transport_type == IBV_TRANSPORT_IB;
	numbering();
	bad_handles();
	foreign();
	destroyed();
	vt_close(&D);
	return vt_end();
}
