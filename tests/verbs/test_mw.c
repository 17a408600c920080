/* Memory windows on Soft-RoCE, as the kernel's rxe has them (rxe_mw.c,
 * and rdma-core's rxe provider for what happens in user space):
 *
 *  - the device (max_mw, MEM_WINDOW / MEM_WINDOW_TYPE_2B), ibv_alloc_mw
 *    and ibv_dealloc_mw of both types, the errno of a bad type;
 *  - type 1: ibv_bind_mw (the next key, IBV_WC_BIND_MW), its argument
 *    errors, Write/Read/atomics through the window, rebind, unbind by
 *    length 0, no LOCAL_INV, no deregistration of a bound MR;
 *  - binds that fail when they execute: IBV_WC_MW_BIND_ERR;
 *  - type 2: IBV_WR_BIND_MW (post errors, the key's low byte from the
 *    request, bound to the QP that posted it), zero-based windows,
 *    IBV_WR_LOCAL_INV, Send with Invalidate (the receive's WITH_INV; an
 *    MR's key or another QP's window: REM_INV_REQ_ERR), deallocation,
 *    ibv_wr_bind_mw / ibv_wr_local_inv, UC;
 *  - a Write through a window's rkey built by hand on the wire (the rkey
 *    is just an rkey in the RETH): it lands where the window says, and
 *    the ACK/NAK that comes back is rxe's.
 *
 * Where rxe is lax (it checks an access through a window against the
 * region's bounds only, and lets any QP invalidate a type 2 window), the
 * checks say so: softrdma applies the window's bounds and the IBA's
 * ownership rules (docs/verbs.md, "Memory windows and invalidation"). */
#include "vt.h"
#include "vt_roce.h"

static struct vt_dev D;

#define ACC_MR                                                                                                  \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
	 IBV_ACCESS_MW_BIND)
#define ACC_MW (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define TGT_LEN (64 * 1024)

/* A connected pair; qp[1] is the responder that owns the target region
 * and its windows, qp[0] the requester with its source region. */
struct env {
	struct vt_pair p;
	struct vt_buf src, tgt;
	uint8_t *snap; /* tgt's contents before the operation under test */
};

static bool env_up(struct env *e, enum ibv_qp_type t, unsigned tgt_access, uint64_t send_ops)
{
	struct vt_qp_cfg c;

	memset(e, 0, sizeof(*e));
	vt_cfg_default(&c, t);
	c.send_ops_flags = send_ops;
	if (!vt_pair_setup(&D, &c, &e->p))
		return false;
	if (vt_buf_alloc(&e->src, D.pd, TGT_LEN, 4096, IBV_ACCESS_LOCAL_WRITE) ||
	    vt_buf_alloc(&e->tgt, D.pd, TGT_LEN, 4096, (int)tgt_access))
		return CHECK(0, "regions (target access %#x)\t(errno %d)", tgt_access, errno);
	vt_fill(e->tgt.p, TGT_LEN, 0x7a7a);
	e->snap = malloc(TGT_LEN);
	memcpy(e->snap, e->tgt.p, TGT_LEN);
	return true;
}

static void env_down(struct env *e)
{
	vt_pair_destroy(&e->p);
	vt_buf_free(&e->src);
	vt_buf_free(&e->tgt);
	free(e->snap);
	memset(e, 0, sizeof(*e));
}

/* The target holds its snapshot but for [off, off+len), which holds the
 * pattern of seed.  Reports one check. */
static bool tgt_is(struct env *e, size_t off, size_t len, uint32_t seed, const char *what)
{
	long bad = -1;

	for (size_t i = 0; i < TGT_LEN && bad < 0; i++) {
		uint8_t want = i >= off && i < off + len ? vt_pat(seed, i - off) : e->snap[i];

		if (e->tgt.p[i] != want)
			bad = (long)i;
	}
	CHECK_GUARDS(&e->tgt, "%s: target", what);
	if (len)
		return CHECK(bad < 0,
			     "%s: %zu bytes at offset %zu, nothing else in the region changed\t(byte %ld differs)",
			     what, len, off, bad);
	return CHECK(bad < 0, "%s: nothing in the region changed\t(byte %ld differs)", what, bad);
}

static int post_bind(struct ibv_qp *qp, uint64_t wr_id, struct ibv_mw *mw, uint32_t rkey, struct ibv_mr *mr,
		     uint64_t addr, uint64_t len, unsigned access)
{
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = addr;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = access;
	return ibv_post_send(qp, &wr, &bad);
}

static int post_inv(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op, uint32_t rkey, void *buf, uint32_t len,
		    uint32_t lkey)
{
	struct ibv_sge sge = { (uintptr_t)buf, len, lkey };
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.invalidate_rkey = rkey;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	return ibv_post_send(qp, &wr, &bad);
}

/* A type 2 window of qp[1] bound to [off, off+len) of the target with
 * its key's low byte from the request; returns the key or 0. */
static uint32_t bind2(struct env *e, struct ibv_mw *mw, size_t off, uint64_t len, unsigned access, uint8_t key,
		      const char *what)
{
	uint32_t rkey = (mw->rkey & ~0xffu) | key;
	uint64_t addr = (uintptr_t)e->tgt.p + off;

	if (!CHECK_RC(post_bind(e->p.qp[1], 900, mw, rkey, e->tgt.mr, addr, len, access), 0, "%s: post BIND_MW", what))
		return 0;
	if (!EXPECT_WC(e->p.scq[1], 900, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL, "%s: bind", what))
		return 0;
	/* rxe leaves a type 2 window's ibv_mw.rkey as it was allocated; a
	 * program that binds it again names it by the key it gave it */
	mw->rkey = rkey;
	return rkey;
}

/* An RDMA WRITE of len bytes (pattern seed) from qp[0] through rkey at va. */
static bool write_st(struct env *e, uint32_t rkey, uint64_t va, uint32_t len, uint32_t seed, enum ibv_wc_status st,
		     const char *what)
{
	vt_fill(e->src.p, len, seed);
	if (!CHECK_RC(vt_post_send(e->p.qp[0], 1, IBV_WR_RDMA_WRITE, e->src.p, len, e->src.mr->lkey, IBV_SEND_SIGNALED,
				   va, rkey, 0),
		      0, "%s: post WRITE of %u bytes", what, len))
		return false;
	return EXPECT_WC(e->p.scq[0], 1, st, IBV_WC_RDMA_WRITE, NULL, "%s", what);
}

/* The write lands at target offset off, and nothing else moves. */
static void write_lands(struct env *e, uint32_t rkey, uint64_t va, size_t off, uint32_t len, uint32_t seed,
			const char *what)
{
	if (write_st(e, rkey, va, len, seed, IBV_WC_SUCCESS, what)) {
		/* UC completes once sent: give the bytes time to arrive */
		for (int i = 0; i < 400 && e->p.cfg.type == IBV_QPT_UC && vt_verify(e->tgt.p + off, len, seed) >= 0;
		     i++)
			vt_sleep_ms(5);
		tgt_is(e, off, len, seed, what);
	}
	memcpy(e->snap, e->tgt.p, TGT_LEN);
}

/* An access that must fail with REM_ACCESS_ERR and leave the region as it
 * was (the QP pair is in ERR afterwards). */
static void refused(struct env *e, enum ibv_wr_opcode op, uint32_t rkey, uint64_t va, uint32_t len, const char *what)
{
	int rc;

	vt_fill(e->src.p, len, 0xbad);
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD)
		rc = vt_post_atomic(e->p.qp[0], 2, op, e->src.p, e->src.mr->lkey, IBV_SEND_SIGNALED, va, rkey, 1, 0);
	else
		rc = vt_post_send(e->p.qp[0], 2, op, e->src.p, len, e->src.mr->lkey, IBV_SEND_SIGNALED, va, rkey, 0);
	if (CHECK_RC(rc, 0, "%s: post", what))
		EXPECT_WC(e->p.scq[0], 2, IBV_WC_REM_ACCESS_ERR, VT_ANY_OPCODE, NULL, "%s: REM_ACCESS_ERR", what);
	tgt_is(e, 0, 0, 0, what);
	if (op == IBV_WR_RDMA_READ)
		CHECK(vt_verify(e->src.p, len, 0xbad) < 0, "%s: nothing read into the local buffer", what);
}

static bool wait_event(struct ibv_qp *qp, enum ibv_event_type want, int ms)
{
	struct ibv_async_event ev;
	uint64_t end = vt_now_ms() + (uint64_t)ms;

	while (vt_now_ms() < end)
		if (vt_get_async(D.ctx, &ev, 50) && ev.element.qp == qp && ev.event_type == want)
			return true;
	return false;
}

static void drain_async(void)
{
	struct ibv_async_event ev;

	while (vt_get_async(D.ctx, &ev, 0))
		;
}

/* ------------------------------------------------------------------ */

static void device_and_alloc(void)
{
	SECTION("the device; ibv_alloc_mw / ibv_dealloc_mw");
	struct ibv_device_attr_ex ax;
	struct ibv_mw *mw[2];
	struct ibv_mr *mr;
	static uint8_t m[8192];

	CHECK(D.attr.max_mw > 0 && (D.attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW) &&
		      (D.attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B),
	      "max_mw > 0, MEM_WINDOW and MEM_WINDOW_TYPE_2B, as rxe\t(max_mw %d, flags %#x)", D.attr.max_mw,
	      (unsigned)D.attr.device_cap_flags);
	memset(&ax, 0, sizeof(ax));
	CHECK(!ibv_query_device_ex(D.ctx, NULL, &ax) && ax.orig_attr.max_mw == D.attr.max_mw &&
		      (ax.device_cap_flags_ex & IBV_DEVICE_MEM_WINDOW_TYPE_2B),
	      "ibv_query_device_ex says the same");
	for (int t = 0; t < 2; t++) {
		mw[t] = ibv_alloc_mw(D.pd, t ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1);
		if (CHECK(mw[t], "ibv_alloc_mw(type %d)\t(errno %d)", t + 1, errno))
			CHECK(mw[t]->type == (t ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1) && mw[t]->pd == D.pd &&
				      mw[t]->context == D.ctx && mw[t]->rkey,
			      "  ...type, PD, context and an rkey (0x%x)", mw[t]->rkey);
	}
	for (int t = 0; t < 3; t++) {
		static const int bad[] = { 0, 3, 0x7fffffff };
		struct ibv_mw *x = ibv_alloc_mw(D.pd, (enum ibv_mw_type)bad[t]);
		int e = errno;

		CHECK(!x && e == EINVAL, "ibv_alloc_mw(type %d): EINVAL, as uverbs\t(errno %d)", bad[t], e);
		if (x)
			ibv_dealloc_mw(x);
	}
	mr = ibv_reg_mr(D.pd, m, sizeof(m), ACC_MR);
	if (CHECK(mr, "ibv_reg_mr with IBV_ACCESS_MW_BIND\t(errno %d)", errno) && mw[0] && mw[1]) {
		CHECK(mw[0]->rkey >> 8 != mr->rkey >> 8 && mw[1]->rkey >> 8 != mr->rkey >> 8 &&
			      mw[0]->rkey >> 8 != mw[1]->rkey >> 8,
		      "windows and regions have keys of their own (0x%x 0x%x 0x%x)", mw[0]->rkey, mw[1]->rkey,
		      mr->rkey);
		CHECK(mw[0]->handle != mw[1]->handle, "distinct handles");
		CHECK_RC(ibv_dealloc_pd(D.pd), EBUSY, "ibv_dealloc_pd while windows exist");
	}
	for (int t = 0; t < 2; t++)
		if (mw[t])
			CHECK_RC(ibv_dealloc_mw(mw[t]), 0, "ibv_dealloc_mw(type %d)", t + 1);
	if (mr)
		CHECK_RC(ibv_dereg_mr(mr), 0, "ibv_dereg_mr");
	/* many windows: allocation and the key table grow together */
	{
		enum {
			N = 600
		};
		struct ibv_mw **many = calloc(N, sizeof(*many));
		int got = 0;

		for (int i = 0; i < N; i++) {
			many[i] = ibv_alloc_mw(D.pd, (enum ibv_mw_type)(1 + i % 2));
			got += many[i] != NULL;
			if (i % 50 == 0) {
				struct ibv_mr *r = ibv_reg_mr(D.pd, m, sizeof(m), ACC_MR);
				if (r)
					ibv_dereg_mr(r);
			}
		}
		CHECK_INT(got, N, "%d windows allocated between registrations", N);
		for (int i = 0; i < N; i++)
			if (many[i])
				ibv_dealloc_mw(many[i]);
		free(many);
	}
}

static void type1(void)
{
	SECTION("type 1: ibv_bind_mw; Write, Read and atomics through the window");
	struct env e, e2;
	struct ibv_mw *mw, *mw2;
	struct ibv_mw_bind b;
	struct ibv_pd *pd2;
	struct ibv_mr *mr2;
	uint32_t old;
	int rc;

	if (!env_up(&e, IBV_QPT_RC, ACC_MR, 0))
		return;
	mw = ibv_alloc_mw(D.pd, IBV_MW_TYPE_1);
	mw2 = ibv_alloc_mw(D.pd, IBV_MW_TYPE_2);
	pd2 = ibv_alloc_pd(D.ctx);
	mr2 = pd2 ? ibv_reg_mr(pd2, e.src.p, 4096, ACC_MR) : NULL;
	if (!CHECK(mw && mw2 && mr2, "windows, and an MR of another PD")) {
		env_down(&e);
		goto out;
	}

	memset(&b, 0, sizeof(b));
	b.wr_id = 10;
	b.send_flags = IBV_SEND_SIGNALED;
	b.bind_info.mr = e.tgt.mr;
	b.bind_info.addr = (uintptr_t)e.tgt.p + 4096;
	b.bind_info.length = 20000;
	b.bind_info.mw_access_flags = ACC_MW;
	CHECK_RC(ibv_bind_mw(e.p.qp[1], mw2, &b), EINVAL, "ibv_bind_mw of a type 2 window");
	b.bind_info.mw_access_flags = ACC_MW | IBV_ACCESS_ZERO_BASED;
	old = mw->rkey;
	CHECK_RC(ibv_bind_mw(e.p.qp[1], mw, &b), EINVAL, "ibv_bind_mw zero based (o10-36.2.2)");
	b.bind_info.mw_access_flags = ACC_MW;
	b.bind_info.mr = NULL;
	CHECK_RC(ibv_bind_mw(e.p.qp[1], mw, &b), EINVAL, "ibv_bind_mw with a length and no MR");
	b.bind_info.mr = mr2;
	CHECK_RC(ibv_bind_mw(e.p.qp[1], mw, &b), EPERM, "ibv_bind_mw to an MR of another PD");
	CHECK(mw->rkey == old, "the failed calls left the key (0x%x)", mw->rkey);
	CHECK_CQ_EMPTY(e.p.scq[1], 50, "the failed calls posted nothing");

	b.bind_info.mr = e.tgt.mr;
	rc = ibv_bind_mw(e.p.qp[1], mw, &b);
	CHECK_RC(rc, 0, "ibv_bind_mw: 20000 bytes at target offset 4096, remote write/read/atomic");
	CHECK(mw->rkey == ibv_inc_rkey(old), "the window's key is the next one (0x%x -> 0x%x)", old, mw->rkey);
	EXPECT_WC(e.p.scq[1], 10, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL, "the bind completes");
	CHECK_RC(ibv_dereg_mr(e.tgt.mr), EINVAL, "ibv_dereg_mr of a region with a window bound: EINVAL, as rxe");

	write_lands(&e, mw->rkey, (uintptr_t)e.tgt.p + 4096 + 17, 4096 + 17, 100, 1, "WRITE 100 B at window offset 17");
	write_lands(&e, mw->rkey, (uintptr_t)e.tgt.p + 4096, 4096, 20000, 2, "WRITE of the whole window (5 packets)");
	{
		uint32_t n = 9000;
		memset(e.src.p, 0, n);
		CHECK_RC(vt_post_send(e.p.qp[0], 3, IBV_WR_RDMA_READ, e.src.p, n, e.src.mr->lkey, IBV_SEND_SIGNALED,
				      (uintptr_t)e.tgt.p + 4096 + 11000, mw->rkey, 0),
			 0, "post READ of 9000 B through the window");
		EXPECT_WC(e.p.scq[0], 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL, "READ through the window");
		CHECK(!memcmp(e.src.p, e.tgt.p + 4096 + 11000, n), "  ...brought the window's bytes");
	}
	{
		uint64_t *t = (uint64_t *)(e.tgt.p + 4096 + 800), orig = *t;
		CHECK_RC(vt_post_atomic(e.p.qp[0], 4, IBV_WR_ATOMIC_FETCH_AND_ADD, e.src.p, e.src.mr->lkey,
					IBV_SEND_SIGNALED, (uintptr_t)t, mw->rkey, 5, 0),
			 0, "post FETCH_ADD through the window");
		EXPECT_WC(e.p.scq[0], 4, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, NULL, "FETCH_ADD through the window");
		CHECK(*(uint64_t *)e.src.p == orig && *t == orig + 5, "  ...returned the old value, added 5");
		memcpy(e.snap, e.tgt.p, TGT_LEN);
	}
	/* rebind: a new window, read-only; the old key is gone */
	old = mw->rkey;
	b.wr_id = 11;
	b.bind_info.addr = (uintptr_t)e.tgt.p + 30000;
	b.bind_info.length = 1000;
	b.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
	CHECK_RC(ibv_bind_mw(e.p.qp[1], mw, &b), 0, "rebind: 1000 bytes at offset 30000, remote read only");
	EXPECT_WC(e.p.scq[1], 11, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL, "the rebind completes");
	CHECK(mw->rkey == ibv_inc_rkey(old), "  ...with the next key (0x%x)", mw->rkey);
	CHECK_RC(vt_post_send(e.p.qp[0], 5, IBV_WR_RDMA_READ, e.src.p, 1000, e.src.mr->lkey, IBV_SEND_SIGNALED,
			      (uintptr_t)e.tgt.p + 30000, mw->rkey, 0),
		 0, "post READ of the new window");
	EXPECT_WC(e.p.scq[0], 5, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL, "READ of the new window");
	CHECK(!memcmp(e.src.p, e.tgt.p + 30000, 1000), "  ...its bytes");
	refused(&e, IBV_WR_RDMA_WRITE, mw->rkey, (uintptr_t)e.tgt.p + 30000, 100, "WRITE to a read-only window");
	/* a window goes before its region: ibv_dealloc_mw unbinds it */
	CHECK_RC(ibv_dealloc_mw(mw), 0, "ibv_dealloc_mw of a bound type 1 window");
	CHECK_RC(ibv_dereg_mr(e.tgt.mr), 0, "  ...then its region deregisters");
	e.tgt.mr = NULL;
	env_down(&e);

	/* each refusal takes a pair of its own (the QP goes to ERR) */
	for (int k = 0; k < 6; k++) {
		static const char *what[] = { "WRITE through the key before the rebind",
					      "WRITE past the window's end, inside the region (rxe: allowed)",
					      "WRITE before the window's start, inside the region (rxe: allowed)",
					      "READ through a window unbound by a bind of length 0",
					      "FETCH_ADD through a window without remote atomic",
					      "the window's key as an lkey" };

		if (!env_up(&e, IBV_QPT_RC, ACC_MR, 0) || !(mw = ibv_alloc_mw(D.pd, IBV_MW_TYPE_1)))
			break;
		b.wr_id = 20;
		b.bind_info.mr = e.tgt.mr;
		b.bind_info.addr = (uintptr_t)e.tgt.p + 4096;
		b.bind_info.length = 8192;
		b.bind_info.mw_access_flags = k == 4 ? IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE : ACC_MW;
		old = mw->rkey;
		if (!CHECK_RC(ibv_bind_mw(e.p.qp[1], mw, &b), 0, "%s: bind", what[k]) ||
		    !EXPECT_WC(e.p.scq[1], 20, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL, "%s: bind completes", what[k]))
			goto next;
		switch (k) {
		case 0:
			b.wr_id = 21;
			CHECK_RC(ibv_bind_mw(e.p.qp[1], mw, &b), 0, "%s: rebind", what[k]);
			EXPECT_WC(e.p.scq[1], 21, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL, "%s: rebind completes",
				  what[k]);
			refused(&e, IBV_WR_RDMA_WRITE, ibv_inc_rkey(old), (uintptr_t)e.tgt.p + 4096, 64, what[k]);
			break;
		case 1:
			refused(&e, IBV_WR_RDMA_WRITE, mw->rkey, (uintptr_t)e.tgt.p + 4096 + 8192 - 10, 64, what[k]);
			break;
		case 2:
			refused(&e, IBV_WR_RDMA_WRITE, mw->rkey, (uintptr_t)e.tgt.p + 4000, 64, what[k]);
			break;
		case 3:
			b.wr_id = 22;
			b.bind_info.length = 0;
			b.bind_info.mw_access_flags = 0;
			CHECK_RC(ibv_bind_mw(e.p.qp[1], mw, &b), 0, "%s: bind of length 0", what[k]);
			EXPECT_WC(e.p.scq[1], 22, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL, "%s: it completes", what[k]);
			refused(&e, IBV_WR_RDMA_READ, mw->rkey, (uintptr_t)e.tgt.p + 4096, 64, what[k]);
			break;
		case 4:
			refused(&e, IBV_WR_ATOMIC_FETCH_AND_ADD, mw->rkey, (uintptr_t)e.tgt.p + 4096, 8, what[k]);
			break;
		default:
			/* rxe reports a bad lkey as LOC_QP_OP_ERR */
			vt_fill(e.tgt.p + 4096, 64, 5);
			CHECK_RC(vt_post_send(e.p.qp[1], 23, IBV_WR_SEND, e.tgt.p + 4096, 64, mw->rkey,
					      IBV_SEND_SIGNALED, 0, 0, 0),
				 0, "%s: post SEND", what[k]);
			EXPECT_WC(e.p.scq[1], 23, IBV_WC_LOC_QP_OP_ERR, VT_ANY_OPCODE, NULL, "%s: LOC_QP_OP_ERR",
				  what[k]);
			break;
		}
next:
		ibv_dealloc_mw(mw);
		mw = NULL;
		env_down(&e);
	}
	/* a type 1 window cannot be invalidated (o10-37.2.26) */
	if (env_up(&e, IBV_QPT_RC, ACC_MR, 0) && (mw = ibv_alloc_mw(D.pd, IBV_MW_TYPE_1))) {
		b.wr_id = 30;
		b.bind_info.mr = e.tgt.mr;
		b.bind_info.length = 8192;
		b.bind_info.addr = (uintptr_t)e.tgt.p;
		b.bind_info.mw_access_flags = ACC_MW;
		CHECK_RC(ibv_bind_mw(e.p.qp[1], mw, &b), 0, "type 1 LOCAL_INV: bind");
		EXPECT_WC(e.p.scq[1], 30, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL, "type 1 LOCAL_INV: bind completes");
		CHECK_RC(post_inv(e.p.qp[1], 31, IBV_WR_LOCAL_INV, mw->rkey, NULL, 0, 0), 0, "post LOCAL_INV of it");
		EXPECT_WC(e.p.scq[1], 31, IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOCAL_INV, NULL,
			  "LOCAL_INV of a type 1 window: LOC_QP_OP_ERR, as rxe");
		CHECK(vt_qp_state(e.p.qp[1]) == IBV_QPS_ERR, "  ...and the QP is in ERR");
		/* still bound: the key works from another pair */
		if (env_up(&e2, IBV_QPT_RC, ACC_MR, 0)) {
			/* type 1 windows are not tied to a QP: any QP of the PD */
			vt_fill(e2.src.p, 64, 9);
			CHECK_RC(vt_post_send(e2.p.qp[0], 32, IBV_WR_RDMA_WRITE, e2.src.p, 64, e2.src.mr->lkey,
					      IBV_SEND_SIGNALED, (uintptr_t)e.tgt.p + 100, mw->rkey, 0),
				 0, "another pair writes through the type 1 window");
			EXPECT_WC(e2.p.scq[0], 32, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL,
				  "a type 1 window serves any QP of its PD");
			CHECK(!memcmp(e.tgt.p + 100, e2.src.p, 64), "  ...the bytes are there");
			env_down(&e2);
		}
		CHECK_RC(ibv_dealloc_mw(mw), 0, "ibv_dealloc_mw");
		mw = NULL;
	}
	env_down(&e);
out:
	if (mw)
		ibv_dealloc_mw(mw);
	if (mw2)
		ibv_dealloc_mw(mw2);
	if (mr2)
		ibv_dereg_mr(mr2);
	if (pd2)
		ibv_dealloc_pd(pd2);
	drain_async();
}

/* Binds refused when they execute: IBV_WC_MW_BIND_ERR, QP in ERR. */
static void bind_errors(void)
{
	SECTION("binds refused when they execute: MW_BIND_ERR");
	static const char *what[] = {
		"type 1 to a region without IBV_ACCESS_MW_BIND (C10-73)",
		"type 1 past the region's end (C10-75)",
		"type 1 remote write to a region without local write (C10-74)",
		"type 1 zero based by a BIND_MW request (o10-36.2.2)",
		"type 1 to a region of another PD",
		"type 1 with an access flag unknown to windows",
		"type 2 of length 0 (o10-37.2.40)",
		"type 2 from a QP of another PD (C10-72)",
		"type 2 that is bound already (o10-37.2.30)",
		"type 2 by a stale key",
		"a window deallocated meanwhile",
	};
	for (int k = 0; k < (int)(sizeof(what) / sizeof(what[0])); k++) {
		struct env e;
		struct ibv_pd *pd2 = NULL;
		struct ibv_mr *mr = NULL, *mr_other = NULL;
		struct ibv_mw *mw = NULL;
		struct ibv_qp *qp;
		uint64_t addr, len = 4096;
		unsigned acc = ACC_MW;
		bool type2 = k >= 6 && k < 10;

		if (!env_up(&e, IBV_QPT_RC, ACC_MR, 0))
			return;
		qp = e.p.qp[1];
		mr = e.tgt.mr;
		addr = (uintptr_t)e.tgt.p;
		if (k == 7) {
			/* the window of another PD, bound from qp[1] of D.pd */
			pd2 = ibv_alloc_pd(D.ctx);
			mr_other = pd2 ? ibv_reg_mr(pd2, e.tgt.p, TGT_LEN, ACC_MR) : NULL;
			mw = mr_other ? ibv_alloc_mw(pd2, IBV_MW_TYPE_2) : NULL;
			mr = mr_other;
		} else {
			mw = ibv_alloc_mw(D.pd, type2 ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1);
		}
		if (!CHECK(mw, "%s: a window", what[k]))
			goto next;
		switch (k) {
		case 0:
			mr_other = ibv_reg_mr(D.pd, e.tgt.p, TGT_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
			mr = mr_other;
			break;
		case 1:
			addr = (uintptr_t)e.tgt.p + TGT_LEN - 100;
			len = 200;
			break;
		case 2:
			mr_other = ibv_reg_mr(D.pd, e.tgt.p, TGT_LEN, IBV_ACCESS_MW_BIND | IBV_ACCESS_REMOTE_READ);
			mr = mr_other;
			acc = IBV_ACCESS_REMOTE_WRITE;
			break;
		case 3:
			acc |= IBV_ACCESS_ZERO_BASED;
			break;
		case 4:
			pd2 = ibv_alloc_pd(D.ctx);
			mr_other = pd2 ? ibv_reg_mr(pd2, e.tgt.p, TGT_LEN, ACC_MR) : NULL;
			mr = mr_other;
			break;
		case 5:
			acc |= 1u << 12;
			break;
		case 6:
			len = 0;
			break;
		case 8:
			CHECK(bind2(&e, mw, 0, 4096, ACC_MW, 1, what[k]), "%s: the first bind", what[k]);
			break;
		case 9: {
			/* the first bind changed the key's low byte: the allocation's
			 * key (which rxe leaves in ibv_mw.rkey) names it no more */
			uint32_t stale = mw->rkey, kb = bind2(&e, mw, 0, 4096, ACC_MW, (uint8_t)(stale + 7), what[k]);

			CHECK(kb, "%s: the first bind", what[k]);
			CHECK_RC(post_inv(qp, 901, IBV_WR_LOCAL_INV, kb, NULL, 0, 0), 0,
				 "%s: LOCAL_INV by the bound key", what[k]);
			EXPECT_WC(e.p.scq[1], 901, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, NULL, "%s: invalidated", what[k]);
			mw->rkey = stale;
			break;
		}
		default:
			break;
		}
		if (!CHECK(mr, "%s: the region", what[k]))
			goto next;
		if (k == 10) {
			struct ibv_mw dead = *mw;

			ibv_dealloc_mw(mw);
			mw = NULL;
			CHECK_RC(post_bind(qp, 50, &dead, ibv_inc_rkey(dead.rkey), mr, addr, len, acc), 0, "%s: post",
				 what[k]);
		} else {
			CHECK_RC(post_bind(qp, 50, mw, ibv_inc_rkey(mw->rkey), mr, addr, len, acc), 0, "%s: post",
				 what[k]);
		}
		EXPECT_WC(e.p.scq[1], 50, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW, NULL, "%s: MW_BIND_ERR", what[k]);
		CHECK(vt_qp_state(qp) == IBV_QPS_ERR, "%s: the QP is in ERR", what[k]);
next:
		if (mw)
			CHECK_RC(ibv_dealloc_mw(mw), 0, "%s: the window deallocates", what[k]);
		env_down(&e);
		if (mr_other)
			CHECK_RC(ibv_dereg_mr(mr_other), 0, "%s: the region deregisters", what[k]);
		if (pd2)
			ibv_dealloc_pd(pd2);
	}
	drain_async();
}

static void type2(void)
{
	SECTION("type 2: BIND_MW work requests, LOCAL_INV, Send with Invalidate");
	struct env e, e2;
	struct ibv_mw *mw, *mwb;
	uint32_t k1, k2;
	struct ibv_wc wc;

	mw = ibv_alloc_mw(D.pd, IBV_MW_TYPE_2);
	mwb = ibv_alloc_mw(D.pd, IBV_MW_TYPE_2);
	if (!CHECK(mw && mwb, "two type 2 windows") || !env_up(&e, IBV_QPT_RC, ACC_MR, 0)) {
		env_down(&e);
		return;
	}
	/* post-time errors, as rdma-core's rxe provider checks them */
	{
		struct ibv_sge sge = { (uintptr_t)e.src.p, 8, e.src.mr->lkey };
		struct ibv_send_wr wr, *bad = NULL;

		memset(&wr, 0, sizeof(wr));
		wr.opcode = IBV_WR_BIND_MW;
		wr.bind_mw.mw = mw;
		wr.bind_mw.bind_info.mr = e.tgt.mr;
		wr.bind_mw.bind_info.addr = (uintptr_t)e.tgt.p;
		wr.bind_mw.bind_info.length = 64;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		CHECK_RC(ibv_post_send(e.p.qp[1], &wr, &bad), EINVAL, "BIND_MW with an SGE");
		CHECK(bad == &wr, "  ...bad_wr is it");
		wr.num_sge = 0;
		wr.imm_data = htonl(1);
		CHECK_RC(ibv_post_send(e.p.qp[1], &wr, &bad), EINVAL, "BIND_MW with immediate data");
		wr.imm_data = 0;
		wr.bind_mw.mw = NULL;
		CHECK_RC(ibv_post_send(e.p.qp[1], &wr, &bad), EINVAL, "BIND_MW without a window");
		wr.bind_mw.mw = mw;
		wr.bind_mw.bind_info.mr = NULL;
		CHECK_RC(ibv_post_send(e.p.qp[1], &wr, &bad), EINVAL, "BIND_MW with a length and no region");
		CHECK_CQ_EMPTY(e.p.scq[1], 50, "nothing was posted");
	}
	k1 = bind2(&e, mw, 8192, 16384, ACC_MW, 0x5a, "bind to [8192, +16384)");
	CHECK(k1 && (k1 & 0xff) == 0x5a && (k1 & ~0xffu) == (mw->rkey & ~0xffu),
	      "the key's low byte is the request's (0x%x); the upper bits are the window's", k1);
	write_lands(&e, k1, (uintptr_t)e.tgt.p + 8192 + 5000, 8192 + 5000, 11000, 3, "WRITE through the type 2 window");
	CHECK_RC(vt_post_send(e.p.qp[0], 6, IBV_WR_RDMA_READ, e.src.p, 16384, e.src.mr->lkey, IBV_SEND_SIGNALED,
			      (uintptr_t)e.tgt.p + 8192, k1, 0),
		 0, "post READ of the whole window");
	EXPECT_WC(e.p.scq[0], 6, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL, "READ of the whole window");
	CHECK(!memcmp(e.src.p, e.tgt.p + 8192, 16384), "  ...its bytes");
	/* another QP of the same PD may not use it (type 2B: bound to a QP) */
	if (env_up(&e2, IBV_QPT_RC, ACC_MR, 0)) {
		vt_fill(e2.src.p, 64, 4);
		CHECK_RC(vt_post_send(e2.p.qp[0], 7, IBV_WR_RDMA_WRITE, e2.src.p, 64, e2.src.mr->lkey,
				      IBV_SEND_SIGNALED, (uintptr_t)e.tgt.p + 8192, k1, 0),
			 0, "another pair: post WRITE through the window");
		EXPECT_WC(e2.p.scq[0], 7, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, NULL,
			  "a QP the window is not bound to: REM_ACCESS_ERR");
		tgt_is(&e, 0, 0, 0, "a QP the window is not bound to");
		env_down(&e2);
	}
	/* a second window on the same QP, zero based: addressed from 0 */
	k2 = bind2(&e, mwb, 4096, 4096, ACC_MW | IBV_ACCESS_ZERO_BASED, 0x11, "zero-based bind to [4096, +4096)");
	write_lands(&e, k2, 100, 4096 + 100, 300, 5, "WRITE at zero-based offset 100");
	CHECK_RC(vt_post_send(e.p.qp[0], 8, IBV_WR_RDMA_READ, e.src.p, 4096, e.src.mr->lkey, IBV_SEND_SIGNALED, 0, k2,
			      0),
		 0, "post READ of the zero-based window from 0");
	EXPECT_WC(e.p.scq[0], 8, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL, "READ from zero-based offset 0");
	CHECK(!memcmp(e.src.p, e.tgt.p + 4096, 4096), "  ...the window's bytes");
	/* LOCAL_INV; then the window may be bound again, with a new key */
	CHECK_RC(post_inv(e.p.qp[1], 9, IBV_WR_LOCAL_INV, k1, NULL, 0, 0), 0, "post LOCAL_INV");
	EXPECT_WC(e.p.scq[1], 9, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, NULL, "LOCAL_INV of the bound type 2 window");
	CHECK_RC(ibv_dealloc_mw(mwb), 0, "ibv_dealloc_mw of a bound window");
	mwb = NULL;
	CHECK_RC(ibv_dereg_mr(e.tgt.mr), 0, "the region, bound no more, deregisters");
	e.tgt.mr = ibv_reg_mr(D.pd, e.tgt.p, TGT_LEN, ACC_MR);
	if (CHECK(e.tgt.mr, "registered again")) {
		k2 = bind2(&e, mw, 0, 4096, ACC_MW, 0x77, "rebind after LOCAL_INV");
		write_lands(&e, k2, (uintptr_t)e.tgt.p + 10, 10, 50, 6, "WRITE through the new key");
	}
	refused(&e, IBV_WR_RDMA_WRITE, k1, (uintptr_t)e.tgt.p + 8192, 64, "WRITE through the invalidated key");
	ibv_dealloc_mw(mw);
	env_down(&e);

	/* invalidation errors and remote invalidation, a pair each */
	for (int k = 0; k < 6; k++) {
		static const char *what[] = { "LOCAL_INV of a window invalidated already",
					      "Send with Invalidate of the window",
					      "Send with Invalidate of a region's key (rxe: not a fast-reg MR)",
					      "Send with Invalidate of another QP's window (rxe: allowed)",
					      "Send with Invalidate of a key that names nothing",
					      "WRITE through a deallocated window" };
		struct ibv_mw *m = ibv_alloc_mw(D.pd, IBV_MW_TYPE_2);
		uint32_t key = 0;

		if (!m || !env_up(&e, IBV_QPT_RC, ACC_MR, 0))
			break;
		if (k != 3)
			key = bind2(&e, m, 0, 8192, ACC_MW, (uint8_t)(0x30 + k), what[k]);
		switch (k) {
		case 0:
			CHECK_RC(post_inv(e.p.qp[1], 60, IBV_WR_LOCAL_INV, key, NULL, 0, 0), 0, "%s: first", what[k]);
			EXPECT_WC(e.p.scq[1], 60, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, NULL, "%s: first", what[k]);
			CHECK_RC(post_inv(e.p.qp[1], 61, IBV_WR_LOCAL_INV, key, NULL, 0, 0), 0, "%s: again", what[k]);
			EXPECT_WC(e.p.scq[1], 61, IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOCAL_INV, NULL, "%s: LOC_QP_OP_ERR",
				  what[k]);
			break;
		case 1:
			CHECK_RC(vt_post_recv(e.p.qp[1], 62, e.tgt.p + 32768, 1000, e.tgt.mr->lkey), 0, "post recv");
			vt_fill(e.src.p, 333, 62);
			CHECK_RC(post_inv(e.p.qp[0], 63, IBV_WR_SEND_WITH_INV, key, e.src.p, 333, e.src.mr->lkey), 0,
				 "%s: post", what[k]);
			EXPECT_WC(e.p.scq[0], 63, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "%s: the send", what[k]);
			if (EXPECT_WC(e.p.rcq[1], 62, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "%s: the receive", what[k]))
				CHECK((wc.wc_flags & IBV_WC_WITH_INV) && wc.invalidated_rkey == key &&
					      wc.byte_len == 333 && !memcmp(e.tgt.p + 32768, e.src.p, 333),
				      "%s: WITH_INV, the key, 333 bytes\t(flags %#x rkey %#x len %u)", what[k],
				      wc.wc_flags, wc.invalidated_rkey, wc.byte_len);
			memcpy(e.snap, e.tgt.p, TGT_LEN);
			refused(&e, IBV_WR_RDMA_WRITE, key, (uintptr_t)e.tgt.p, 64, "WRITE after Send with Invalidate");
			break;
		case 2:
		case 3:
		case 4: {
			uint32_t inv = k == 2 ? e.tgt.mr->rkey : k == 4 ? (e.tgt.mr->rkey ^ 0x100) : 0;

			if (k == 3 && env_up(&e2, IBV_QPT_RC, ACC_MR, 0)) {
				/* bound by the other pair's responder */
				inv = bind2(&e2, m, 0, 8192, ACC_MW, 0x44, what[k]);
			}
			CHECK_RC(vt_post_recv(e.p.qp[1], 64, e.tgt.p + 32768, 1000, e.tgt.mr->lkey), 0, "post recv");
			CHECK_RC(post_inv(e.p.qp[0], 65, IBV_WR_SEND_WITH_INV, inv, e.src.p, 100, e.src.mr->lkey), 0,
				 "%s: post", what[k]);
			/* as rxe: the Send is acknowledged, the receive fails */
			EXPECT_WC(e.p.scq[0], 65, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "%s: the send succeeds", what[k]);
			EXPECT_WC(e.p.rcq[1], 64, IBV_WC_REM_INV_REQ_ERR, VT_ANY_OPCODE, NULL,
				  "%s: the receive completes REM_INV_REQ_ERR", what[k]);
			CHECK(wait_event(e.p.qp[1], IBV_EVENT_QP_REQ_ERR, 3000) &&
				      vt_qp_state(e.p.qp[1]) == IBV_QPS_ERR,
			      "%s: the receiving QP is in ERR (IBV_EVENT_QP_REQ_ERR)", what[k]);
			if (k == 3) {
				/* the window is still valid for its own QP */
				write_lands(&e2, inv, (uintptr_t)e2.tgt.p + 64, 64, 128, 65,
					    "the other pair's window still works");
				ibv_dealloc_mw(m);
				m = NULL;
				env_down(&e2);
			}
			break;
		}
		default:
			CHECK_RC(ibv_dealloc_mw(m), 0, "%s: dealloc", what[k]);
			m = NULL;
			refused(&e, IBV_WR_RDMA_WRITE, key, (uintptr_t)e.tgt.p, 64, what[k]);
			break;
		}
		if (m)
			ibv_dealloc_mw(m);
		env_down(&e);
	}
	if (mwb)
		ibv_dealloc_mw(mwb);
	drain_async();
}

static void qp_ex_and_uc(void)
{
	SECTION("ibv_wr_bind_mw / ibv_wr_local_inv; UC");
	struct env e;
	struct ibv_mw *mw = ibv_alloc_mw(D.pd, IBV_MW_TYPE_2);
	uint64_t ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV |
		       IBV_QP_EX_WITH_SEND;

	if (!CHECK(mw, "a type 2 window") || !env_up(&e, IBV_QPT_RC, ACC_MR, ops))
		return;
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(e.p.qp[1]);
	struct ibv_mw_bind_info bi = { e.tgt.mr, (uintptr_t)e.tgt.p + 1024, 2048, ACC_MW };
	uint32_t key = ibv_inc_rkey(mw->rkey);

	if (CHECK(x && x->wr_bind_mw && x->wr_local_inv, "the QP has wr_bind_mw and wr_local_inv")) {
		ibv_wr_start(x);
		x->wr_id = 70;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_bind_mw(x, mw, key, &bi);
		CHECK_RC(ibv_wr_complete(x), 0, "ibv_wr_bind_mw");
		if (EXPECT_WC(e.p.scq[1], 70, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL, "ibv_wr_bind_mw completes"))
			mw->rkey = key; /* as bind2: the key it has now */
		write_lands(&e, key, (uintptr_t)e.tgt.p + 1024, 1024, 2048, 7, "WRITE through the window it bound");
		ibv_wr_start(x);
		x->wr_id = 71;
		ibv_wr_local_inv(x, key);
		CHECK_RC(ibv_wr_complete(x), 0, "ibv_wr_local_inv");
		EXPECT_WC(e.p.scq[1], 71, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, NULL, "ibv_wr_local_inv completes");
		ibv_wr_start(x);
		ibv_wr_bind_mw(x, NULL, key, &bi);
		CHECK_RC(ibv_wr_complete(x), EINVAL, "ibv_wr_bind_mw without a window: the batch fails");
		refused(&e, IBV_WR_RDMA_WRITE, key, (uintptr_t)e.tgt.p + 1024, 64, "WRITE after ibv_wr_local_inv");
	}
	env_down(&e);

	/* UC: a type 2 bind and a Write through it; a Write out of the window
	 * is dropped quietly (no error on UC), the QP stays up */
	if (env_up(&e, IBV_QPT_UC, ACC_MR, 0)) {
		key = bind2(&e, mw, 2048, 4096, ACC_MW, 0x21, "UC bind");
		write_lands(&e, key, (uintptr_t)e.tgt.p + 2048 + 96, 2048 + 96, 4000, 8, "UC WRITE through the window");
		write_st(&e, key, (uintptr_t)e.tgt.p + 2048 + 4000, 200, 9, IBV_WC_SUCCESS, "UC WRITE past the window");
		vt_sleep_ms(100);
		tgt_is(&e, 0, 0, 0, "UC WRITE past the window: dropped");
		write_lands(&e, key, (uintptr_t)e.tgt.p + 2048, 2048, 64, 10, "UC: the next WRITE lands");
		CHECK(vt_qp_state(e.p.qp[1]) == IBV_QPS_RTS, "UC: the responder is still in RTS");
		CHECK_RC(post_inv(e.p.qp[1], 72, IBV_WR_BIND_MW, 0, NULL, 0, 0), EINVAL,
			 "UC: BIND_MW without a window");
		/* LOCAL_INV is RC only: librxe posts it, rxe's requester fails it */
		CHECK_RC(post_inv(e.p.qp[1], 73, IBV_WR_LOCAL_INV, key, NULL, 0, 0), 0, "UC: LOCAL_INV posted");
		EXPECT_WC(e.p.scq[1], 73, IBV_WC_LOC_QP_OP_ERR, VT_ANY_OPCODE, NULL,
			  "UC: LOCAL_INV fails with LOC_QP_OP_ERR (RC only, as rxe)");
		CHECK(vt_qp_state(e.p.qp[1]) == IBV_QPS_ERR, "UC: the QP is in ERR after it");
		ibv_dealloc_mw(mw);
		mw = ibv_alloc_mw(D.pd, IBV_MW_TYPE_2);
		env_down(&e);
	}
	{
		struct vt_qp_cfg c;
		struct vt_pair p;

		vt_cfg_default(&c, IBV_QPT_UD);
		if (mw && vt_pair_setup(&D, &c, &p)) {
			CHECK_RC(post_bind(p.qp[0], 73, mw, ibv_inc_rkey(mw->rkey), NULL, 0, 0, 0), EINVAL,
				 "UD: BIND_MW refused at post (rxe: RC and UC only)");
			vt_pair_destroy(&p);
		}
	}
	if (mw)
		ibv_dealloc_mw(mw);
	drain_async();
}

/* A Write through a window's rkey, built by hand: the responder QP is
 * connected to a peer that is this test (vt_wire_peer).  The packet is
 * what rxe would send (the window's rkey in the RETH like any rkey); it
 * must land where the window says, and the answer must be rxe's: an ACK,
 * or a NAK "remote access error" (AETH syndrome 0x62) for a Write out of
 * the window. */
static void raw_write(void)
{
	SECTION("on the wire: WRITE packets through a window's rkey, hand-built");
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct vt_buf tgt;
	struct ibv_mw *mw[2];
	uint32_t key[2], peer = 0, psn = 0x123400;
	struct vt_wire_peer wp = { .tx = -1, .rx = -1 };
	uint8_t pkt[9000], data[4096];

	vt_crc_init();
	vt_cfg_default(&c, IBV_QPT_RC);
	/* of the pair only qp[1] is used: its peer is this test */
	if (!vt_pair_create(&D, &c, &p))
		return;
	qp = p.qp[1];
	cq = p.scq[1];
	mw[0] = ibv_alloc_mw(D.pd, IBV_MW_TYPE_2);
	mw[1] = ibv_alloc_mw(D.pd, IBV_MW_TYPE_1);
	if (!CHECK(mw[0] && mw[1] && !vt_buf_alloc(&tgt, D.pd, 32768, 4096, ACC_MR), "windows and a region"))
		return;
	vt_fill(tgt.p, 32768, 0x3131);
	if (!vt_wire_peer_open(&wp, &D, qp, &c, psn, 0x777))
		goto out;
	peer = wp.qpn;
	/* bind both windows through the QP (its own send queue: a type 2
	 * window is the QP's); the zero-based one covers [8192, +8192) */
	{
		struct ibv_mw_bind b = { .wr_id = 1,
					 .send_flags = IBV_SEND_SIGNALED,
					 .bind_info = { tgt.mr, (uintptr_t)tgt.p + 4096, 4096,
							IBV_ACCESS_REMOTE_WRITE } };

		key[0] = (mw[0]->rkey & ~0xffu) | 0xc3;
		CHECK_RC(post_bind(qp, 2, mw[0], key[0], tgt.mr, (uintptr_t)tgt.p + 8192, 8192,
				   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ZERO_BASED),
			 0, "post a zero-based type 2 bind");
		CHECK_RC(ibv_bind_mw(qp, mw[1], &b), 0, "ibv_bind_mw of a type 1 window to [4096, +4096)");
		key[1] = mw[1]->rkey;
		EXPECT_WC(cq, 2, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL, "the type 2 bind");
		EXPECT_WC(cq, 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL, "the type 1 bind");
	}
	for (int k = 0; k < 5; k++) {
		static const char *what[] = { "zero-based window, offset 1000, 3000 bytes",
					      "type 1 window, its last 512 bytes",
					      "zero-based window, offset 0, 1 byte",
					      "type 1 window, a Write reaching 1 byte past it",
					      "(after the NAK) a good Write is not executed" };
		static const uint32_t koff[] = { 1000, 4096 + 4096 - 512, 0, 4096 + 4096 - 511, 0 };
		static const uint32_t klen[] = { 3000, 512, 1, 512, 64 };
		static const int kk[] = { 0, 1, 0, 1, 0 };
		uint64_t va = kk[k] ? (uintptr_t)tgt.p + koff[k] : koff[k];
		size_t at = kk[k] ? koff[k] : 8192 + koff[k];
		uint8_t ans[256];
		uint8_t *snap = malloc(32768);
		ssize_t n;

		memcpy(snap, tgt.p, 32768);
		vt_fill(data, klen[k], 500 + (uint32_t)k);
		size_t len = vt_mk_write_only(pkt, 0x00, 0xffff, qp->qp_num, psn, va, key[kk[k]], data, klen[k],
					      wp.sport, true);
		/* its RETH carries the window's rkey as it is, big endian */
		CHECK(pkt[0] == 0x0a && vt_be16(pkt + 20) == key[kk[k]] >> 16 &&
			      vt_be16(pkt + 22) == (key[kk[k]] & 0xffff),
		      "%s: an RC WRITE_ONLY with the window's rkey 0x%x in its RETH", what[k], key[kk[k]]);
		vt_send_to_4791(wp.tx, pkt, len);
		n = k == 4 ? -1 : 0;
		if (k < 4) {
			n = vt_wire_recv(&wp, ans, sizeof(ans), 5000);
			CHECK(n >= 20 && ans[0] == 0x11 && ((uint32_t)vt_be16(ans + 5) << 8 | ans[7]) == peer &&
				      ((uint32_t)vt_be16(ans + 9) << 8 | ans[11]) == psn,
			      "%s: an ACKNOWLEDGE for PSN 0x%x to QP %u comes back\t(%zd bytes, opcode 0x%02x)",
			      what[k], psn, peer, n, n > 0 ? ans[0] : 0);
			if (n >= 20) {
				uint8_t syn = ans[12];
				bool good = k != 3;

				CHECK(good ? syn == 0x1f : syn == 0x62, "%s: AETH syndrome 0x%02x (%s)\t(got 0x%02x)",
				      what[k], good ? 0x1f : 0x62, good ? "ACK" : "NAK remote access error", syn);
			}
		} else {
			vt_sleep_ms(200);
		}
		long bad = -1;
		bool lands = k != 3 && k != 4;

		for (size_t i = 0; i < 32768 && bad < 0; i++) {
			uint8_t want = lands && i >= at && i < at + klen[k] ? vt_pat(500 + (uint32_t)k, i - at) :
									      snap[i];
			if (tgt.p[i] != want)
				bad = (long)i;
		}
		if (lands)
			CHECK(bad < 0, "%s: the bytes are at region offset %zu and nowhere else\t(byte %ld)", what[k],
			      at, bad);
		else
			CHECK(bad < 0, "%s: the region is unchanged\t(byte %ld changed)", what[k], bad);
		if (lands)
			psn = (psn + 1) & 0xffffff;
		free(snap);
	}
	CHECK_GUARDS(&tgt, "the region");
	CHECK(vt_qp_state(qp) == IBV_QPS_ERR, "the QP is in ERR after the remote access error");
out:
	vt_wire_peer_close(&wp);
	vt_pair_destroy(&p);
	for (int i = 0; i < 2; i++)
		if (mw[i])
			ibv_dealloc_mw(mw[i]);
	CHECK_RC(ibv_dereg_mr(tgt.mr), 0, "the region deregisters once its windows are gone");
	tgt.mr = NULL;
	vt_buf_free(&tgt);
	drain_async();
}

int main(int argc, char **argv)
{
	vt_begin_args("test_mw", 240, argc, argv);
	vt_seed(0x3e77);
	if (!vt_open(&D))
		return vt_end();
	VT_RUN(device_and_alloc());
	VT_RUN(type1());
	VT_RUN(bind_errors());
	VT_RUN(type2());
	VT_RUN(qp_ex_and_uc());
	VT_RUN(raw_write());
	vt_close(&D);
	return vt_end();
}
