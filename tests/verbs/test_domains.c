/* test_domains: thread domains and parent domains (issue 40, item 4).
 *
 * ibv_alloc_td/ibv_dealloc_td; ibv_alloc_parent_domain's checks (a plain
 * PD of the context, its comp_mask, both allocators or none), the parent
 * domain standing for its PD (its handle, its keys) while holding it and
 * its TD busy; the application's allocator giving the rings of the QPs,
 * SRQs and CQs made on it (with their resource types and a page of
 * alignment), its free getting each back, at once, on destroy and resize;
 * IBV_ALLOCATOR_USE_DEFAULT and NULL answers; and RC and UD traffic with
 * everything on parent domains. */
#include "vt.h"

static struct vt_dev D;

/* ---- a recording allocator ---- */

#define MAX_BUFS 64
enum alloc_mode {
	GIVE,
	USE_DEFAULT,
	REFUSE
};
struct pool {
	enum alloc_mode mode;
	struct {
		void *p;
		size_t size, align;
		uint64_t type;
		bool live;
	} b[MAX_BUFS];
	int n, allocs, frees, bad_frees;
	struct ibv_pd *pd_seen;
};

static void *pool_alloc(struct ibv_pd *pd, void *ctx, size_t size, size_t align, uint64_t type)
{
	struct pool *P = ctx;
	void *p = NULL;

	P->allocs++;
	P->pd_seen = pd;
	if (P->mode == USE_DEFAULT)
		return IBV_ALLOCATOR_USE_DEFAULT;
	if (P->mode == REFUSE || P->n == MAX_BUFS || posix_memalign(&p, align, size))
		return NULL;
	memset(p, 0xc5, size); /* the library must clear it */
	P->b[P->n].p = p;
	P->b[P->n].size = size;
	P->b[P->n].align = align;
	P->b[P->n].type = type;
	P->b[P->n].live = true;
	P->n++;
	return p;
}

static void pool_free(struct ibv_pd *pd, void *ctx, void *ptr, uint64_t type)
{
	struct pool *P = ctx;

	(void)pd;
	P->frees++;
	for (int i = 0; i < P->n; i++)
		if (P->b[i].p == ptr && P->b[i].live && P->b[i].type == type) {
			P->b[i].live = false;
			free(ptr);
			return;
		}
	P->bad_frees++;
}

static int pool_live(const struct pool *P)
{
	int n = 0;
	for (int i = 0; i < P->n; i++)
		n += P->b[i].live;
	return n;
}

static struct ibv_pd *parent(struct ibv_pd *pd, struct ibv_td *td, struct pool *P)
{
	struct ibv_parent_domain_init_attr a = { .pd = pd, .td = td };
	if (P) {
		a.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
		a.alloc = pool_alloc;
		a.free = pool_free;
		a.pd_context = P;
	}
	errno = 0;
	return ibv_alloc_parent_domain(pd->context, &a);
}

/* ---- cases ---- */

static void thread_domains(void)
{
	struct ibv_td_init_attr a = { .comp_mask = 1 };
	struct ibv_td *td;

	errno = 0;
	td = ibv_alloc_td(D.ctx, &a);
	CHECK_PTR_ERR(td, errno, EINVAL, "ibv_alloc_td with comp_mask 1");
	a.comp_mask = 0;
	td = ibv_alloc_td(D.ctx, &a);
	if (!CHECK(td, "ibv_alloc_td\t(errno %d)", errno))
		return;
	CHECK(td->context == D.ctx, "its context is the device's");
	struct ibv_pd *pd = parent(D.pd, td, NULL);
	if (CHECK(pd, "a parent domain with the thread domain\t(errno %d)", errno)) {
		CHECK_RC(ibv_dealloc_td(td), EBUSY, "ibv_dealloc_td while a parent domain uses it");
		CHECK_RC(ibv_dealloc_pd(pd), 0, "the parent domain deallocated");
	}
	CHECK_RC(ibv_dealloc_td(td), 0, "ibv_dealloc_td");
}

static void parent_errors(void)
{
	struct ibv_parent_domain_init_attr a = { .pd = NULL };
	struct ibv_pd *pd;

	errno = 0;
	pd = ibv_alloc_parent_domain(D.ctx, &a);
	CHECK_PTR_ERR(pd, errno, EINVAL, "ibv_alloc_parent_domain without a PD");
	a.pd = D.pd;
	a.comp_mask = 1u << 5;
	errno = 0;
	pd = ibv_alloc_parent_domain(D.ctx, &a);
	CHECK_PTR_ERR(pd, errno, EINVAL, "... with an unknown comp_mask bit");
	a.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
	a.alloc = pool_alloc;
	errno = 0;
	pd = ibv_alloc_parent_domain(D.ctx, &a);
	CHECK_PTR_ERR(pd, errno, EINVAL, "... with an allocator but no free");
	struct ibv_pd *p1 = parent(D.pd, NULL, NULL);
	if (CHECK(p1, "a parent domain")) {
		pd = parent(p1, NULL, NULL);
		CHECK_PTR_ERR(pd, errno, EINVAL, "a parent domain of a parent domain");
		ibv_dealloc_pd(p1);
	}
	struct ibv_context *c2 = ibv_open_device(D.ctx->device);
	struct ibv_pd *pd2 = c2 ? ibv_alloc_pd(c2) : NULL;
	struct ibv_td_init_attr ta = { .comp_mask = 0 };
	struct ibv_td *td2 = c2 ? ibv_alloc_td(c2, &ta) : NULL;
	if (CHECK(pd2 && td2, "a PD and a TD of a second context")) {
		struct ibv_parent_domain_init_attr b = { .pd = pd2 };
		errno = 0;
		pd = ibv_alloc_parent_domain(D.ctx, &b);
		CHECK(!pd && errno, "a parent domain in context 1 of context 2's PD fails\t(errno %d)", errno);
		b.pd = D.pd;
		b.td = td2;
		errno = 0;
		pd = ibv_alloc_parent_domain(D.ctx, &b);
		CHECK(!pd && errno, "... or with context 2's TD\t(errno %d)", errno);
	}
	if (td2)
		ibv_dealloc_td(td2);
	if (pd2)
		ibv_dealloc_pd(pd2);
	if (c2)
		ibv_close_device(c2);
	/* a CQ's parent_domain must be one */
	struct ibv_cq_init_attr_ex ca = { .cqe = 4,
					  .wc_flags = IBV_WC_STANDARD_FLAGS,
					  .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
					  .parent_domain = D.pd };
	errno = 0;
	struct ibv_cq_ex *cq = ibv_create_cq_ex(D.ctx, &ca);
	CHECK_PTR_ERR(cq, errno, EINVAL, "ibv_create_cq_ex with IBV_CQ_INIT_ATTR_MASK_PD naming a plain PD");
	ca.parent_domain = NULL;
	errno = 0;
	cq = ibv_create_cq_ex(D.ctx, &ca);
	CHECK_PTR_ERR(cq, errno, EINVAL, "... naming none");
}

/* A parent domain is its PD to every key and access check, and holds it. */
static void stands_for_its_pd(void)
{
	struct ibv_pd *pdom = parent(D.pd, NULL, NULL);
	uint8_t buf[256];

	if (!CHECK(pdom, "ibv_alloc_parent_domain\t(errno %d)", errno))
		return;
	CHECK(pdom != D.pd && pdom->context == D.ctx && pdom->handle == D.pd->handle,
	      "a new ibv_pd of the context, with its PD's handle\t(handle %u, PD's %u)", pdom->handle, D.pd->handle);
	CHECK_RC(ibv_dealloc_pd(D.pd), EBUSY, "the PD cannot go while a parent domain stands on it");
	struct ibv_mr *mr = ibv_reg_mr(pdom, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (CHECK(mr, "ibv_reg_mr on the parent domain\t(errno %d)", errno)) {
		CHECK(mr->pd == pdom, "the MR's pd is the parent domain");
		CHECK_RC(ibv_dereg_mr(mr), 0, "ibv_dereg_mr");
	}
	CHECK_RC(ibv_dealloc_pd(pdom), 0, "the parent domain deallocated");
}

/* QP, SRQ and CQ rings come from the allocator and go back to its free. */
static void rings_from_allocator(void)
{
	struct pool P;
	long pg = sysconf(_SC_PAGESIZE);

	memset(&P, 0, sizeof(P));
	struct ibv_pd *pdom = parent(D.pd, NULL, &P);
	if (!CHECK(pdom, "a parent domain with allocators\t(errno %d)", errno))
		return;

	struct ibv_cq_init_attr_ex ca = { .cqe = 64,
					  .wc_flags = IBV_WC_STANDARD_FLAGS,
					  .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
					  .parent_domain = pdom };
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(D.ctx, &ca);
	if (!CHECK(cqx, "an extended CQ on the parent domain\t(errno %d)", errno))
		goto out;
	struct ibv_cq *cq = ibv_cq_ex_to_cq(cqx);
	CHECK(P.n == 1 && P.b[0].type == ((uint64_t)RDMA_DRIVER_RXE << 32 | 4) && P.b[0].align == (size_t)pg &&
		      P.b[0].size >= 65 * sizeof(struct ibv_wc) && P.pd_seen == pdom,
	      "its ring came from the allocator (a CQ's type, a page of alignment, room for 64 entries, the parent "
	      "domain passed)\t(n %d, type 0x%" PRIx64 ", align %zu, size %zu)",
	      P.n, P.n ? P.b[0].type : 0, P.n ? P.b[0].align : 0, P.n ? P.b[0].size : 0);
	CHECK_RC(ibv_dealloc_pd(pdom), EBUSY, "the parent domain cannot go while a CQ is on it");
	CHECK_RC(ibv_resize_cq(cq, 500), 0, "ibv_resize_cq(500)");
	CHECK(P.n == 2 && !P.b[0].live && P.b[1].live && P.b[1].size >= 501 * sizeof(struct ibv_wc),
	      "the resize took a new ring from the allocator and gave the old one back");

	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 2 } };
	struct ibv_srq *srq = ibv_create_srq(pdom, &sa);
	if (CHECK(srq, "an SRQ on the parent domain\t(errno %d)", errno)) {
		CHECK(P.n == 3 && P.b[2].type == ((uint64_t)RDMA_DRIVER_RXE << 32 | 3), "its ring from the allocator");
		struct ibv_srq_attr m = { .max_wr = 100 };
		CHECK_RC(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR), 0, "ibv_modify_srq(max_wr 100)");
		CHECK(P.n == 4 && !P.b[2].live && P.b[3].live, "a new ring from the allocator, the old one freed");
	}

	struct ibv_qp_init_attr qa = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 }
	};
	int before = P.n;
	struct ibv_qp *qp = ibv_create_qp(pdom, &qa);
	if (CHECK(qp, "an RC QP on the parent domain\t(errno %d)", errno)) {
		bool sq = false, rq = false;
		for (int i = before; i < P.n; i++) {
			sq |= P.b[i].type == ((uint64_t)RDMA_DRIVER_RXE << 32 | 1);
			rq |= P.b[i].type == ((uint64_t)RDMA_DRIVER_RXE << 32 | 2);
		}
		CHECK(P.n == before + 2 && sq && rq, "its send and receive rings from the allocator");
		CHECK(qp->pd == pdom, "the QP's pd is the parent domain");
		int frees = P.frees;
		CHECK_RC(ibv_destroy_qp(qp), 0, "ibv_destroy_qp");
		CHECK_INT(P.frees - frees, 2, "both rings given back by the time ibv_destroy_qp returns");
	}
	if (srq)
		CHECK_RC(ibv_destroy_srq(srq), 0, "ibv_destroy_srq");
	CHECK_RC(ibv_destroy_cq(cq), 0, "ibv_destroy_cq");
	CHECK(pool_live(&P) == 0 && P.bad_frees == 0,
	      "every ring given back once, with its own type\t(%d live, %d "
	      "frees of what the allocator did not give)",
	      pool_live(&P), P.bad_frees);
	for (int i = 0; i < P.n; i++)
		if (P.b[i].live)
			free(P.b[i].p);
out:
	CHECK_RC(ibv_dealloc_pd(pdom), 0, "the parent domain deallocated once its objects are gone");
}

/* IBV_ALLOCATOR_USE_DEFAULT: the library's own memory, never the free; a
 * NULL: the create fails with ENOMEM. */
static void allocator_answers(void)
{
	struct pool P;

	memset(&P, 0, sizeof(P));
	P.mode = USE_DEFAULT;
	struct ibv_pd *pdom = parent(D.pd, NULL, &P);
	if (!CHECK(pdom, "a parent domain with allocators"))
		return;
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 }
	};
	struct ibv_qp *qp = ibv_create_qp(pdom, &qa);
	CHECK(qp && P.allocs == 2, "an allocator answering IBV_ALLOCATOR_USE_DEFAULT: the QP is made\t(allocs %d)",
	      P.allocs);
	if (qp)
		ibv_destroy_qp(qp);
	CHECK_INT(P.frees, 0, "and its free is never called for the library's memory");
	P.mode = REFUSE;
	errno = 0;
	qp = ibv_create_qp(pdom, &qa);
	CHECK_PTR_ERR(qp, errno, ENOMEM, "an allocator answering NULL: ibv_create_qp fails");
	CHECK_INT(P.frees, 0, "nothing given back that was not given");
	CHECK_RC(ibv_dealloc_pd(pdom), 0, "the failed create left no use of the parent domain");
	ibv_destroy_cq(cq);
}

/* RC (SEND, WRITE with the SRQ and extended CQs on parent domains) and
 * UD traffic, the MRs on the parent domains or their PD alike. */
static void traffic(enum ibv_qp_type type)
{
	enum {
		N = 20,
		LEN = 256
	};
	struct pool P[2];
	struct ibv_pd *pdom[2] = { NULL, NULL };
	struct ibv_cq_ex *cqx[2] = { NULL, NULL };
	struct ibv_srq *srq[2] = { NULL, NULL };
	struct ibv_qp *qp[2] = { NULL, NULL };
	struct ibv_ah *ah[2] = { NULL, NULL };
	struct ibv_mr *mr[2] = { NULL, NULL };
	uint8_t *buf[2] = { NULL, NULL };
	struct vt_qp_cfg c;
	bool rc = type == IBV_QPT_RC;

	SECTION("%s traffic on parent domains with allocators", vt_qpt_str(type));
	vt_cfg_default(&c, type);
	memset(P, 0, sizeof(P));
	for (int i = 0; i < 2; i++) {
		pdom[i] = parent(D.pd, NULL, &P[i]);
		struct ibv_cq_init_attr_ex ca = { .cqe = 4 * N,
						  .wc_flags = IBV_WC_STANDARD_FLAGS,
						  .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
						  .parent_domain = pdom[i] };
		cqx[i] = pdom[i] ? ibv_create_cq_ex(D.ctx, &ca) : NULL;
		if (rc && cqx[i]) {
			struct ibv_srq_init_attr sa = { .attr = { .max_wr = 2 * N, .max_sge = 1 } };
			srq[i] = ibv_create_srq(pdom[i], &sa);
		}
		if (posix_memalign((void **)&buf[i], 4096, 2 * LEN * N + 4096))
			buf[i] = NULL;
		/* side 0's MR on its parent domain, side 1's on the plain PD */
		mr[i] = buf[i] ? ibv_reg_mr(i ? D.pd : pdom[i], buf[i], 2 * LEN * N + 4096,
					    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) :
				 NULL;
		struct ibv_qp_init_attr qa = { .send_cq = ibv_cq_ex_to_cq(cqx[i]),
					       .recv_cq = ibv_cq_ex_to_cq(cqx[i]),
					       .srq = srq[i],
					       .qp_type = type,
					       .cap = { .max_send_wr = 2 * N,
							.max_recv_wr = rc ? 0 : 2 * N,
							.max_send_sge = 1,
							.max_recv_sge = rc ? 0 : 1 } };
		qp[i] = cqx[i] && mr[i] && (!rc || srq[i]) ? ibv_create_qp(pdom[i], &qa) : NULL;
		if (!CHECK(qp[i], "side %d: parent domain, CQ%s, MR and QP\t(errno %d)", i, rc ? ", SRQ" : "", errno))
			goto out;
	}
	for (int i = 0; i < 2; i++) {
		int err =
			vt_qp_connect(qp[i], &c, IBV_QPS_RTS, qp[!i]->qp_num, c.psn[!i], c.psn[i], &D.gid, D.gid_index);
		if (!CHECK(!err, "QP %d to RTS", i))
			goto out;
		if (!rc) {
			struct ibv_ah_attr aa = {
				.is_global = 1,
				.port_num = 1,
				.grh = { .dgid = D.gid, .sgid_index = (uint8_t)D.gid_index, .hop_limit = 64 }
			};
			ah[i] = ibv_create_ah(pdom[i], &aa);
			if (!CHECK(ah[i], "an AH on the parent domain"))
				goto out;
		}
	}
	uint32_t grh = rc ? 0 : 40;
	for (int k = 0; k < N; k++) {
		uint8_t *rbuf = buf[1] + LEN * N + k * (LEN + grh);
		if (rc)
			vt_post_srq_recv(srq[1], k, rbuf, LEN, mr[1]->lkey);
		else
			vt_post_recv(qp[1], k, rbuf, LEN + grh, mr[1]->lkey);
	}
	vt_fill(buf[0], LEN * N, 77);
	for (int k = 0; k < N; k++) {
		if (rc)
			vt_post_send(qp[0], k, IBV_WR_SEND, buf[0] + k * LEN, LEN, mr[0]->lkey, IBV_SEND_SIGNALED, 0, 0,
				     0);
		else
			vt_post_ud_send(qp[0], k, buf[0] + k * LEN, LEN, mr[0]->lkey, IBV_SEND_SIGNALED, ah[0],
					qp[1]->qp_num, c.qkey);
	}
	int got = 0, ok = 0;
	struct ibv_wc wc[2 * N];
	got += vt_poll(ibv_cq_ex_to_cq(cqx[0]), N, wc, VT_TIMEOUT_MS);
	for (int k = 0; k < got; k++)
		ok += wc[k].status == IBV_WC_SUCCESS;
	CHECK(got == N && ok == N, "%d SENDs complete\t(%d, %d successful)", N, got, ok);
	got = vt_poll(ibv_cq_ex_to_cq(cqx[1]), N, wc, VT_TIMEOUT_MS);
	ok = 0;
	for (int k = 0; k < got; k++)
		ok += wc[k].status == IBV_WC_SUCCESS && wc[k].byte_len == LEN + grh &&
		      !memcmp(buf[1] + LEN * N + wc[k].wr_id * (LEN + grh) + grh, buf[0] + wc[k].wr_id * LEN, LEN);
	CHECK(got == N && ok == N, "%d receives, each with its message\t(%d, %d right)", N, got, ok);
	if (rc) {
		/* a WRITE from an MR on the parent domain into one on the plain PD */
		vt_post_send(qp[0], 99, IBV_WR_RDMA_WRITE, buf[0], LEN, mr[0]->lkey, IBV_SEND_SIGNALED,
			     (uintptr_t)buf[1], mr[1]->rkey, 0);
		EXPECT_WC(ibv_cq_ex_to_cq(cqx[0]), 99, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL,
			  "a WRITE into the peer's MR of the plain PD");
		CHECK(!memcmp(buf[1], buf[0], LEN), "its bytes arrive");
	}
	CHECK(P[0].n >= 2 && P[1].n >= 2, "the rings came from the allocators\t(%d and %d)", P[0].n, P[1].n);
out:
	for (int i = 0; i < 2; i++) {
		if (ah[i])
			ibv_destroy_ah(ah[i]);
		if (qp[i])
			CHECK_RC(ibv_destroy_qp(qp[i]), 0, "ibv_destroy_qp");
		if (srq[i])
			ibv_destroy_srq(srq[i]);
		if (cqx[i])
			ibv_destroy_cq(ibv_cq_ex_to_cq(cqx[i]));
		if (mr[i])
			ibv_dereg_mr(mr[i]);
		free(buf[i]);
		if (pdom[i]) {
			CHECK_RC(ibv_dealloc_pd(pdom[i]), 0, "parent domain %d deallocated", i);
			CHECK(pool_live(&P[i]) == 0 && !P[i].bad_frees, "its allocator's rings all given back");
		}
	}
}

static void rc_traffic(void)
{
	traffic(IBV_QPT_RC);
}
static void ud_traffic(void)
{
	traffic(IBV_QPT_UD);
}

int main(int argc, char **argv)
{
	vt_begin_args("test_domains", 120, argc, argv);
	vt_seed(0xd0d0);
	if (!vt_open(&D))
		return vt_end();
	VT_RUN(thread_domains());
	VT_RUN(parent_errors());
	VT_RUN(stands_for_its_pd());
	VT_RUN(rings_from_allocator());
	VT_RUN(allocator_answers());
	VT_RUN(rc_traffic());
	VT_RUN(ud_traffic());
	vt_close(&D);
	return vt_end();
}
