/* test_odp: on-demand paging (issue 40, item 1).
 *
 * odp_caps as advertised per transport; an ODP region needs no pages at
 * registration (a plain one does: EFAULT), follows what is mapped at its
 * addresses when it is accessed (a page mapped anew after registration
 * is written through it), and a page not there fails the access as a NIC
 * with ODP fails it: a peer's WRITE or READ with REM_ACCESS_ERR, a local
 * SEND from it with LOC_PROT_ERR, and the process lives; an implicit
 * region (NULL, SIZE_MAX) reaches any address, also memory mapped after
 * it was registered; ibv_advise_mr's checks, a synchronous prefetch
 * making the pages present (and writable), PREFETCH_NO_FAULT leaving
 * them be; UD and SRQ receives into ODP regions.  The API half runs on
 * the Soft-iWARP device too, in a child with its configuration. */
#include "vt.h"
#include "common/tsan.h"

static struct vt_dev D;
static bool iwarp;
static long PG;

#define ODP_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND)
#define ODP_RW (ODP_ALL | (iwarp ? 0 : IBV_ACCESS_REMOTE_ATOMIC))

static void caps(void)
{
	struct ibv_device_attr_ex a;
	uint32_t any = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;

	memset(&a, 0, sizeof(a));
	CHECK_RC(ibv_query_device_ex(D.ctx, NULL, &a), 0, "ibv_query_device_ex");
	const struct ibv_odp_caps *c = &a.odp_caps;
	CHECK(c->general_caps == (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT),
	      "general_caps: ODP and implicit ODP\t(got 0x%" PRIx64 ")", c->general_caps);
	uint32_t rc = any | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ | (iwarp ? 0 : IBV_ODP_SUPPORT_ATOMIC);
	CHECK_INT(c->per_transport_caps.rc_odp_caps, rc, "rc_odp_caps: send, receive, write, read,%s SRQ receive",
		  iwarp ? "" : " atomics,");
	CHECK_INT(c->per_transport_caps.uc_odp_caps, iwarp ? 0 : any | IBV_ODP_SUPPORT_WRITE, "uc_odp_caps: %s",
		  iwarp ? "none (no UC)" : "send, receive, write, SRQ receive");
	CHECK_INT(c->per_transport_caps.ud_odp_caps, iwarp ? 0 : any, "ud_odp_caps: %s",
		  iwarp ? "none (no UD)" : "send, receive, SRQ receive");
}

/* n pages mapped, then those of [first, first + nun) unmapped again */
static uint8_t *map_with_hole(size_t n, size_t first, size_t nun)
{
	uint8_t *m = mmap(NULL, n * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	if (nun)
		munmap(m + first * PG, nun * PG);
	return m;
}

/* The page at p gone: no access to it, and the range kept from anything
 * else that would map there (a sanitizer's allocator), as vt.h's
 * vt_unmap_reserved does.  To a NIC's page fault it is as missing as an
 * unmapped one. */
static bool page_gone(uint8_t *p)
{
	return !munmap(p, PG) && mmap(p, PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == p;
}

static void registration(void)
{
	/* a hole between two reserved pages: nothing is mapped there */
	uint8_t *r = mmap(NULL, 6 * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *m = r != MAP_FAILED && !munmap(r + PG, 4 * PG) ? r + PG : NULL;
	struct ibv_mr *mr;

	if (!CHECK(m, "an address range with nothing mapped"))
		return;
	errno = 0;
	mr = ibv_reg_mr(D.pd, m, 4 * PG, IBV_ACCESS_LOCAL_WRITE);
	CHECK_PTR_ERR(mr, errno, EFAULT, "a plain MR over unmapped pages (they cannot be pinned)");
	mr = ibv_reg_mr(D.pd, m, 4 * PG, ODP_ALL);
	if (CHECK(mr, "an ODP MR over them: no pages needed\t(errno %d)", errno))
		ibv_dereg_mr(mr);
	errno = 0;
	mr = ibv_reg_mr(D.pd, m, 0, ODP_ALL);
	CHECK_PTR_ERR(mr, errno, EINVAL, "an ODP MR of 0 bytes");
	/* only the two guard pages: the hole may be another thread's now */
	munmap(r, PG);
	munmap(r + 5 * PG, PG);
	mr = ibv_reg_mr(D.pd, NULL, SIZE_MAX, ODP_ALL);
	if (CHECK(mr, "an implicit ODP MR (NULL, SIZE_MAX)\t(errno %d)", errno)) {
		CHECK(!mr->addr && mr->length == SIZE_MAX, "its addr NULL, its length SIZE_MAX");
		ibv_dereg_mr(mr);
	}
	errno = 0;
	mr = ibv_reg_mr(D.pd, NULL, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE);
	CHECK_PTR_ERR(mr, errno, EINVAL, "(NULL, SIZE_MAX) without IBV_ACCESS_ON_DEMAND");
	errno = 0;
	mr = ibv_reg_mr_iova2(D.pd, NULL, SIZE_MAX, 4096, ODP_ALL);
	CHECK_PTR_ERR(mr, errno, EINVAL, "an implicit ODP MR at an iova other than 0");
}

static bool pair(struct vt_pair *p)
{
	struct vt_qp_cfg c;

	vt_cfg_default(&c, IBV_QPT_RC);
	c.access |= IBV_ACCESS_ON_DEMAND; /* rdma-core's tests give their QPs it too */
	return vt_pair_setup(&D, &c, p);
}

/* A peer's WRITE and READ and a local SEND on an ODP region whose page
 * is gone, then the page mapped anew: the region reaches the new one. */
static void explicit_remap(void)
{
#ifdef SR_TSAN
	NOTE("not in a ThreadSanitizer build: the memory guard is off there (src/core/guard.c)");
	return;
#endif
	struct vt_pair p;
	struct vt_buf b;
	uint8_t *m = map_with_hole(4, 0, 0);
	struct ibv_mr *mr = m ? ibv_reg_mr(D.pd, m, 4 * PG, ODP_RW) : NULL;

	memset(&p, 0, sizeof(p));
	memset(&b, 0, sizeof(b));
	if (!CHECK(mr, "an ODP MR of 4 mapped pages\t(errno %d)", errno) ||
	    vt_buf_alloc(&b, D.pd, 2 * PG, 4096, IBV_ACCESS_LOCAL_WRITE))
		goto out;
	uint64_t page2 = (uintptr_t)m + 2 * PG;
	CHECK(page_gone(m + 2 * PG), "its third page gone");
	vt_fill(b.p, 2 * PG, 3);

	if (!pair(&p))
		goto out;
	vt_post_send(p.qp[0], 1, IBV_WR_RDMA_WRITE, b.p, 64, b.mr->lkey, IBV_SEND_SIGNALED, page2 + 8, mr->rkey, 0);
	EXPECT_WC(p.scq[0], 1, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, NULL, "a WRITE into the missing page");
	vt_pair_destroy(&p);
	if (!pair(&p))
		goto out;
	vt_post_send(p.qp[0], 2, IBV_WR_RDMA_READ, b.p, 64, b.mr->lkey, IBV_SEND_SIGNALED, page2 + 8, mr->rkey, 0);
	EXPECT_WC(p.scq[0], 2, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_READ, NULL, "a READ of the missing page");
	vt_pair_destroy(&p);
	if (!pair(&p))
		goto out;
	/* a WRITE spanning a present page and the missing one */
	vt_post_send(p.qp[0], 3, IBV_WR_RDMA_WRITE, b.p, (uint32_t)PG, b.mr->lkey, IBV_SEND_SIGNALED, page2 - PG / 2,
		     mr->rkey, 0);
	EXPECT_WC(p.scq[0], 3, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, NULL,
		  "a WRITE from a present page into the missing one");
	vt_pair_destroy(&p);
	if (!pair(&p))
		goto out;
	vt_post_recv(p.qp[1], 4, b.p + PG, 128, b.mr->lkey);
	vt_post_send(p.qp[0], 5, IBV_WR_SEND, (void *)(uintptr_t)page2, 128, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
	EXPECT_WC(p.scq[0], 5, IBV_WC_LOC_PROT_ERR, IBV_WC_SEND, NULL,
		  "a SEND from the missing page (and the process lives)");
	vt_pair_destroy(&p);

	/* the page mapped anew: the same region reaches it */
	uint8_t *again = mmap(m + 2 * PG, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (!CHECK(again == m + 2 * PG, "the page mapped anew at its address"))
		goto out;
	if (!pair(&p))
		goto out;
	vt_post_send(p.qp[0], 6, IBV_WR_RDMA_WRITE, b.p, (uint32_t)PG, b.mr->lkey, IBV_SEND_SIGNALED, page2 - PG / 2,
		     mr->rkey, 0);
	EXPECT_WC(p.scq[0], 6, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL, "the WRITE across both pages now");
	CHECK(!memcmp(m + 2 * PG - PG / 2, b.p, PG), "its bytes are in the old page and the new one");
	vt_post_recv(p.qp[1], 7, b.p + PG, 128, b.mr->lkey);
	vt_post_send(p.qp[0], 8, IBV_WR_SEND, (void *)(uintptr_t)page2, 128, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
	EXPECT_WC(p.scq[0], 8, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "a SEND from the new page");
	EXPECT_WC(p.rcq[1], 7, IBV_WC_SUCCESS, IBV_WC_RECV, NULL, "received");
	CHECK(!memcmp(b.p + PG, m + 2 * PG, 128), "with the new page's bytes");
	uint64_t *word = (uint64_t *)(m + 2 * PG + 64);
	*word = 40;
	vt_post_atomic(p.qp[0], 9, IBV_WR_ATOMIC_FETCH_AND_ADD, b.p, b.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)word,
		       mr->rkey, 2, 0);
	EXPECT_WC(p.scq[0], 9, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, NULL, "a FETCH_AND_ADD on it");
	CHECK(*word == 42, "the new page's word is 42\t(got %" PRIu64 ")", *word);
out:
	vt_pair_destroy(&p);
	if (b.base)
		vt_buf_free(&b);
	if (mr)
		ibv_dereg_mr(mr);
	if (m)
		munmap(m, 4 * PG);
}

/* One implicit region reaches heap, stack, and memory mapped after it. */
static void implicit_reach(void)
{
	struct vt_pair p;
	struct ibv_mr *imr = ibv_reg_mr(D.pd, NULL, SIZE_MAX, ODP_RW);
	uint8_t *heap = malloc(4096), stack[256];
	uint8_t *later = NULL;

	memset(&p, 0, sizeof(p));
	if (!CHECK(imr && heap, "an implicit ODP MR\t(errno %d)", errno) || !pair(&p))
		goto out;
	later = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!CHECK(later != MAP_FAILED, "memory mapped after the registration")) {
		later = NULL;
		goto out;
	}
	vt_fill(stack, sizeof(stack), 9);
	vt_post_send(p.qp[0], 1, IBV_WR_RDMA_WRITE, stack, sizeof(stack), imr->lkey, IBV_SEND_SIGNALED,
		     (uintptr_t)later + PG - 100, imr->rkey, 0);
	EXPECT_WC(p.scq[0], 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL,
		  "a WRITE from the stack into the new mapping, both through the implicit keys");
	CHECK(!memcmp(later + PG - 100, stack, sizeof(stack)), "the bytes arrived");
	memset(heap, 0, 4096);
	vt_post_send(p.qp[0], 2, IBV_WR_RDMA_READ, heap, 256, imr->lkey, IBV_SEND_SIGNALED, (uintptr_t)later + PG - 100,
		     imr->rkey, 0);
	EXPECT_WC(p.scq[0], 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL, "a READ of it into the heap");
	CHECK(!memcmp(heap, stack, sizeof(stack)), "the bytes came back");
	vt_post_recv(p.qp[1], 3, later, 512, imr->lkey);
	vt_post_send(p.qp[0], 4, IBV_WR_SEND, heap, 256, imr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
	EXPECT_WC(p.rcq[1], 3, IBV_WC_SUCCESS, IBV_WC_RECV, NULL, "a SEND received into the new mapping");
	EXPECT_WC(p.scq[0], 4, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "the SEND completes");
	CHECK(!memcmp(later, heap, 256), "its bytes");
	if (!iwarp) {
		uint64_t *w = (uint64_t *)(later + 2048);
		*w = 7;
		vt_post_atomic(p.qp[0], 5, IBV_WR_ATOMIC_CMP_AND_SWP, heap, imr->lkey, IBV_SEND_SIGNALED, (uintptr_t)w,
			       imr->rkey, 7, 77);
		EXPECT_WC(p.scq[0], 5, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, NULL,
			  "a CMP_AND_SWP through the implicit rkey");
		CHECK(*w == 77, "swapped");
	}
	CHECK(page_gone(later + PG), "the new mapping's second page gone");
#ifdef SR_TSAN
	NOTE("the WRITE to a page nothing is mapped at is left out: the memory guard is off in ThreadSanitizer builds");
	goto out;
#endif
	vt_post_send(p.qp[0], 6, IBV_WR_RDMA_WRITE, stack, 16, imr->lkey, IBV_SEND_SIGNALED, (uintptr_t)later + PG + 16,
		     imr->rkey, 0);
	EXPECT_WC(p.scq[0], 6, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, NULL,
		  "a WRITE through the implicit rkey to an address nothing is mapped at");
out:
	vt_pair_destroy(&p);
	if (later)
		munmap(later, 2 * PG);
	free(heap);
	if (imr)
		ibv_dereg_mr(imr);
}

static bool resident(const uint8_t *m, size_t n)
{
	unsigned char v[16];
	if (n > sizeof(v) || mincore((void *)m, n * PG, v))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(v[i] & 1))
			return false;
	return true;
}

static bool none_resident(const uint8_t *m, size_t n)
{
	unsigned char v[16];
	if (n > sizeof(v) || mincore((void *)m, n * PG, v))
		return false;
	for (size_t i = 0; i < n; i++)
		if (v[i] & 1)
			return false;
	return true;
}

static void advise(void)
{
	enum {
		N = 8
	};
	uint8_t *m = map_with_hole(N, 0, 0);
	struct ibv_mr *mr = m ? ibv_reg_mr(D.pd, m, N * PG, ODP_ALL) : NULL;
	struct ibv_mr *plain = NULL, *ro = NULL;
	struct ibv_sge sge;

	if (!CHECK(mr, "an ODP MR of %d untouched pages\t(errno %d)", N, errno))
		goto out;
	sge = (struct ibv_sge){ .addr = (uintptr_t)m, .length = (uint32_t)(N * PG), .lkey = mr->lkey };
	CHECK_RC(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 2, &sge, 1), EINVAL, "an unknown flag");
	CHECK_RC(ibv_advise_mr(D.pd, (enum ibv_advise_mr_advice)7, 0, &sge, 1), EOPNOTSUPP, "an unknown advice");
	CHECK_RC(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 0), EINVAL, "no SGEs");
	struct ibv_sge bad = sge;
	bad.lkey ^= 0x100;
	CHECK_RC(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1), EINVAL, "an lkey naming nothing");
	bad = sge;
	bad.length += 1;
	CHECK_RC(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1), EINVAL, "a range running past the MR");
	struct ibv_pd *pd2 = ibv_alloc_pd(D.ctx);
	if (pd2) {
		CHECK_RC(ibv_advise_mr(pd2, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1), EINVAL, "an MR of another PD");
		ibv_dealloc_pd(pd2);
	}
	static uint8_t pbuf[4096] __attribute__((aligned(4096)));
	plain = ibv_reg_mr(D.pd, pbuf, sizeof(pbuf), IBV_ACCESS_LOCAL_WRITE);
	ro = ibv_reg_mr(D.pd, m, PG, IBV_ACCESS_ON_DEMAND | IBV_ACCESS_REMOTE_READ);
	if (CHECK(plain && ro, "a plain MR and a read-only ODP MR")) {
		struct ibv_sge s = { .addr = (uintptr_t)pbuf, .length = 64, .lkey = plain->lkey };
		CHECK_RC(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s, 1), EINVAL,
			 "a region that is no ODP one");
		s = (struct ibv_sge){ .addr = (uintptr_t)m, .length = 64, .lkey = ro->lkey };
		CHECK_RC(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s, 1), EINVAL,
			 "one without local write (rxe looks regions up by it)");
	}
	CHECK(none_resident(m, N), "the pages are not present before any prefetch");
	struct ibv_sge half = { .addr = (uintptr_t)m, .length = (uint32_t)(N / 2 * PG), .lkey = mr->lkey };
	CHECK_RC(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, IBV_ADVISE_MR_FLAG_FLUSH, &half, 1), 0,
		 "PREFETCH_NO_FAULT of the first half");
	CHECK(none_resident(m, N), "makes nothing present");
	CHECK_RC(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &half, 1), 0,
		 "PREFETCH_WRITE of the first half, synchronous");
	CHECK(resident(m, N / 2) && none_resident(m + N / 2 * PG, N / 2),
	      "its pages are present when it returns, the others not");
	struct ibv_sge two[2] = { { (uintptr_t)m + N / 2 * PG, (uint32_t)PG, mr->lkey },
				  { (uintptr_t)m + (N - 1) * PG, (uint32_t)PG, mr->lkey } };
	CHECK_RC(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, two, 2), 0,
		 "an asynchronous PREFETCH_WRITE of two SGEs");
	/* best effort: here it is done before the call returns */
	CHECK(resident(m + N / 2 * PG, 1) && resident(m + (N - 1) * PG, 1), "both pages are present");
	CHECK(page_gone(m + 5 * PG), "the sixth page gone");
	struct ibv_sge hole = { (uintptr_t)m + 4 * PG, (uint32_t)(3 * PG), mr->lkey };
	CHECK_RC(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &hole, 1), EFAULT,
		 "a synchronous prefetch over a page that is gone");
	CHECK_RC(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &hole, 1), 0,
		 "an asynchronous one (best effort: nothing to say)");
	struct ibv_mr *imr = ibv_reg_mr(D.pd, NULL, SIZE_MAX, ODP_ALL);
	if (CHECK(imr, "an implicit ODP MR")) {
		struct ibv_sge s = { (uintptr_t)m + 6 * PG, (uint32_t)PG, imr->lkey };
		CHECK_RC(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &s, 1), 0,
			 "PREFETCH_WRITE through it");
		CHECK(resident(m + 6 * PG, 1), "the page is present");
		ibv_dereg_mr(imr);
	}
out:
	if (plain)
		ibv_dereg_mr(plain);
	if (ro)
		ibv_dereg_mr(ro);
	if (mr)
		ibv_dereg_mr(mr);
	if (m)
		munmap(m, N * PG);
}

/* UD sends from and receives into ODP regions; an SRQ's receives too. */
static void ud_and_srq(void)
{
	struct vt_qp_cfg c;
	struct vt_pair p;
	uint8_t *m = map_with_hole(2, 0, 0);
	struct ibv_mr *mr = m ? ibv_reg_mr(D.pd, m, 2 * PG, ODP_ALL) : NULL;
	struct ibv_srq *srq = NULL;

	memset(&p, 0, sizeof(p));
	if (!CHECK(mr, "an ODP MR of 2 fresh pages"))
		goto out;
	vt_cfg_default(&c, IBV_QPT_UD);
	if (!vt_pair_setup(&D, &c, &p))
		goto out;
	vt_fill(m, 256, 1);
	vt_post_recv(p.qp[1], 1, m + PG, 256 + 40, mr->lkey);
	vt_post_ud_send(p.qp[0], 2, m, 256, mr->lkey, IBV_SEND_SIGNALED, p.ah[0], p.qp[1]->qp_num, c.qkey);
	EXPECT_WC(p.scq[0], 2, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "a UD SEND from the ODP region");
	EXPECT_WC(p.rcq[1], 1, IBV_WC_SUCCESS, IBV_WC_RECV, NULL, "received into it");
	CHECK(!memcmp(m + PG + 40, m, 256), "the datagram after its GRH");
	vt_pair_destroy(&p);

	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	srq = ibv_create_srq(D.pd, &sa);
	vt_cfg_default(&c, IBV_QPT_RC);
	c.srq[1] = srq;
	if (!CHECK(srq, "an SRQ") || !vt_pair_setup(&D, &c, &p))
		goto out;
	memset(m + PG, 0, 256);
	vt_post_srq_recv(srq, 3, m + PG, 256, mr->lkey);
	vt_post_send(p.qp[0], 4, IBV_WR_SEND, m, 256, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
	EXPECT_WC(p.rcq[1], 3, IBV_WC_SUCCESS, IBV_WC_RECV, NULL,
		  "a SEND received through the SRQ into the ODP region");
	CHECK(!memcmp(m + PG, m, 256), "its bytes");
out:
	vt_pair_destroy(&p);
	if (srq)
		ibv_destroy_srq(srq);
	if (mr)
		ibv_dereg_mr(mr);
	if (m)
		munmap(m, 2 * PG);
}

int main(int argc, char **argv)
{
	iwarp = argc > 1 && !strcmp(argv[1], "--iwarp");
	if (iwarp)
		argc = 1;
	PG = sysconf(_SC_PAGESIZE);
	vt_begin_args(iwarp ? "test_odp (iWARP)" : "test_odp", 120, argc, argv);
	vt_seed(0x0d9);
	if (!vt_open(&D))
		return vt_end();
	VT_RUN(caps());
	VT_RUN(registration());
	VT_RUN(advise());
	if (!iwarp) {
		VT_RUN(explicit_remap());
		VT_RUN(implicit_reach());
		VT_RUN(ud_and_srq());
	}
	vt_close(&D);
	if (!iwarp && !vt_list)
		vt_iwarp_child(argv[0], "--iwarp", "on-demand paging");
	return vt_end();
}
