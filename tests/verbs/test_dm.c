/* test_dm: device memory (issue 40, item 2).
 *
 * ibv_alloc_dm within max_dm_size (shared by the device's contexts; EINVAL
 * past it or with a bad comp_mask, length or alignment, ENOMEM once it is
 * used up), ibv_memcpy_to_dm/ibv_memcpy_from_dm in 4-byte words (EFAULT
 * out of bounds, EINVAL unaligned, nothing changed either way),
 * ibv_reg_dm_mr (zero-based, inside the DM, mlx5's access flags; the DM
 * busy while an MR covers it) and RDMA on such MRs: a peer's WRITE, READ
 * and atomics land in (and come from) the device memory, SENDs are
 * received into it and sent from it.  The API half runs on the Soft-iWARP
 * device too, in a child with its configuration. */
#include "vt.h"

static struct vt_dev D;
static uint64_t max_dm;
static bool iwarp;

static struct ibv_dm *alloc_dm(struct ibv_context *c, size_t len, uint32_t log_align, uint32_t comp_mask)
{
	struct ibv_alloc_dm_attr a = { .length = len, .log_align_req = log_align, .comp_mask = comp_mask };
	errno = 0;
	return ibv_alloc_dm(c, &a);
}

static void attrs(void)
{
	struct ibv_device_attr_ex a;

	memset(&a, 0, sizeof(a));
	CHECK_RC(ibv_query_device_ex(D.ctx, NULL, &a), 0, "ibv_query_device_ex");
	max_dm = a.max_dm_size;
	CHECK(max_dm >= 4096, "max_dm_size is advertised\t(got %" PRIu64 ")", max_dm);
}

static void alloc_errors(void)
{
	struct ibv_dm *dm;

	dm = alloc_dm(D.ctx, 64, 0, 1);
	CHECK_PTR_ERR(dm, errno, EINVAL, "ibv_alloc_dm with comp_mask 1");
	dm = alloc_dm(D.ctx, 0, 0, 0);
	CHECK_PTR_ERR(dm, errno, EINVAL, "ibv_alloc_dm of 0 bytes");
	dm = alloc_dm(D.ctx, max_dm + 1, 0, 0);
	CHECK_PTR_ERR(dm, errno, EINVAL, "ibv_alloc_dm of max_dm_size + 1 bytes");
	dm = alloc_dm(D.ctx, 64, 31, 0);
	CHECK_PTR_ERR(dm, errno, EINVAL, "ibv_alloc_dm aligned to 2^31");
	for (uint32_t al = 0; al <= 6; al++) {
		dm = alloc_dm(D.ctx, 100, al, 0);
		if (!CHECK(dm, "ibv_alloc_dm(100 bytes, log_align_req %u)\t(errno %d)", al, errno))
			continue;
		CHECK(dm->comp_mask & IBV_DM_MASK_HANDLE, "the DM says it has a handle");
		CHECK_RC(ibv_free_dm(dm), 0, "ibv_free_dm");
	}
}

/* The device's memory is one budget over its contexts. */
static void budget(void)
{
	struct ibv_context *c2 = ibv_open_device(D.ctx->device);
	struct ibv_dm *a = NULL, *b = NULL, *c = NULL;

	if (!CHECK(c2, "a second context"))
		return;
	a = alloc_dm(D.ctx, max_dm / 2, 0, 0);
	CHECK(a, "half of max_dm_size in context 1\t(errno %d)", errno);
	b = alloc_dm(c2, max_dm - max_dm / 2, 0, 0);
	CHECK(b, "the other half in context 2\t(errno %d)", errno);
	c = alloc_dm(D.ctx, 4, 0, 0);
	CHECK_PTR_ERR(c, errno, ENOMEM, "4 bytes more, when all of it is taken");
	c = alloc_dm(c2, 4, 0, 0);
	CHECK_PTR_ERR(c, errno, ENOMEM, "... in the other context too");
	if (b)
		CHECK_RC(ibv_free_dm(b), 0, "context 2 frees its half");
	c = alloc_dm(D.ctx, 4, 0, 0);
	CHECK(c, "then 4 bytes can be had\t(errno %d)", errno);
	if (c)
		ibv_free_dm(c);
	CHECK_RC(ibv_close_device(c2), 0, "context 2 closed");
	if (a)
		ibv_free_dm(a);
}

/* A context closed with its DMs gives their bytes back.  In a process of
 * its own (this program again): the DM structures the application held
 * stay allocated, as rdma-core's do, and a leak checker would count them;
 * and a fork of this threaded process could start no threads under TSan. */
static void close_with_dm_child(void)
{
	struct ibv_context *c = ibv_open_device(D.ctx->device);
	struct ibv_dm *dm = c ? alloc_dm(c, max_dm, 0, 0) : NULL;

	CHECK(dm, "all of max_dm_size in a new context\t(errno %d)", errno);
	CHECK_RC(c ? ibv_close_device(c) : EINVAL, 0, "the context closed with its DM");
	c = ibv_open_device(D.ctx->device);
	dm = c ? alloc_dm(c, max_dm, 0, 0) : NULL;
	CHECK(dm, "all of max_dm_size again in another context\t(errno %d)", errno);
	if (dm)
		ibv_free_dm(dm);
	if (c)
		ibv_close_device(c);
}

static const char *self;

static void close_with_dm(void)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		execl(self, self, iwarp ? "--iwarp-close-with-dm" : "--close-with-dm", (char *)NULL);
		_exit(127);
	}
	int st = -1;
	if (pid > 0 && waitpid(pid, &st, 0) != pid)
		st = -1;
	CHECK(st == 0, "a closed context's device memory is the device's again (the child's checks)\t(status 0x%x)",
	      st);
}

static void copies(void)
{
	enum {
		LEN = 4096
	};
	struct ibv_dm *dm = alloc_dm(D.ctx, LEN, 3, 0);
	uint8_t in[LEN], out[LEN], zero[LEN];

	if (!CHECK(dm, "ibv_alloc_dm(%d)", LEN))
		return;
	memset(zero, 0, sizeof(zero));
	memset(out, 0xee, sizeof(out));
	CHECK_RC(ibv_memcpy_from_dm(out, dm, 0, LEN), 0, "ibv_memcpy_from_dm of a new DM");
	CHECK(!memcmp(out, zero, LEN), "a new DM reads as zeros");
	vt_fill(in, LEN, 11);
	/* the host side may be unaligned */
	CHECK_RC(ibv_memcpy_to_dm(dm, 0, in + 1, LEN - 4), 0, "ibv_memcpy_to_dm from an unaligned host address");
	CHECK_RC(ibv_memcpy_from_dm(out + 3, dm, 0, LEN - 4), 0, "ibv_memcpy_from_dm to an unaligned host address");
	CHECK(!memcmp(out + 3, in + 1, LEN - 4), "the bytes come back");
	vt_fill(in, LEN, 12);
	CHECK_RC(ibv_memcpy_to_dm(dm, 0, in, LEN), 0, "ibv_memcpy_to_dm of the whole DM");
	for (int i = 0; i < 200; i++) {
		uint64_t off = vt_rand(LEN / 4) * 4;
		size_t len = vt_rand((uint32_t)(LEN - off) / 4 + 1) * 4;
		memset(out, 0, len);
		if (ibv_memcpy_from_dm(out, dm, off, len) || memcmp(out, in + off, len)) {
			CHECK(0, "ibv_memcpy_from_dm(offset %" PRIu64 ", %zu bytes) reads what was written", off, len);
			break;
		}
	}
	CHECK(1, "200 reads at random aligned offsets and lengths give what was written");
	static const struct {
		uint64_t off;
		size_t len;
		int err;
		const char *what;
	} bad[] = {
		{ 2, 4, EINVAL, "an unaligned offset" },
		{ 4, 6, EINVAL, "an unaligned length" },
		{ LEN + 4, 4, EFAULT, "an offset past the end" },
		{ 0, LEN + 4, EFAULT, "a length past the end" },
		{ LEN - 4, 8, EFAULT, "a range that runs past the end" },
		{ UINT64_MAX - 3, 8, EFAULT, "a range that wraps" },
	};
	uint8_t junk[LEN + 8];
	memset(junk, 0x5a, sizeof(junk));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_RC(ibv_memcpy_to_dm(dm, bad[i].off, junk, bad[i].len), bad[i].err, "ibv_memcpy_to_dm with %s",
			 bad[i].what);
		CHECK_RC(ibv_memcpy_from_dm(junk, dm, bad[i].off, bad[i].len), bad[i].err, "ibv_memcpy_from_dm with %s",
			 bad[i].what);
	}
	CHECK_RC(ibv_memcpy_from_dm(out, dm, 0, LEN), 0, "read the whole DM");
	CHECK(!memcmp(out, in, LEN), "the refused copies changed nothing");
	CHECK_RC(ibv_free_dm(dm), 0, "ibv_free_dm");
}

static void registration(void)
{
	enum {
		LEN = 1024
	};
	unsigned rw = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_dm *dm = alloc_dm(D.ctx, LEN, 0, 0);
	struct ibv_mr *mr;

	if (!CHECK(dm, "ibv_alloc_dm(%d)", LEN))
		return;
	errno = 0;
	mr = ibv_reg_dm_mr(D.pd, dm, 0, LEN, IBV_ACCESS_LOCAL_WRITE);
	CHECK_PTR_ERR(mr, errno, EINVAL, "ibv_reg_dm_mr without IBV_ACCESS_ZERO_BASED");
	errno = 0;
	mr = ibv_reg_dm_mr(D.pd, dm, 0, LEN, rw | IBV_ACCESS_MW_BIND);
	CHECK_PTR_ERR(mr, errno, EINVAL, "ibv_reg_dm_mr with IBV_ACCESS_MW_BIND");
	errno = 0;
	mr = ibv_reg_dm_mr(D.pd, dm, 0, LEN, rw | IBV_ACCESS_ON_DEMAND);
	CHECK_PTR_ERR(mr, errno, EINVAL, "ibv_reg_dm_mr with IBV_ACCESS_ON_DEMAND");
	errno = 0;
	mr = ibv_reg_dm_mr(D.pd, dm, 0, LEN, IBV_ACCESS_ZERO_BASED | IBV_ACCESS_REMOTE_WRITE);
	CHECK_PTR_ERR(mr, errno, EINVAL, "ibv_reg_dm_mr with remote write but no local write");
	errno = 0;
	mr = ibv_reg_dm_mr(D.pd, dm, 0, LEN + 4, rw);
	CHECK_PTR_ERR(mr, errno, EINVAL, "ibv_reg_dm_mr of more than the DM");
	errno = 0;
	mr = ibv_reg_dm_mr(D.pd, dm, LEN + 4, 0, rw);
	CHECK_PTR_ERR(mr, errno, EINVAL, "ibv_reg_dm_mr at an offset past the DM");
	errno = 0;
	mr = ibv_reg_dm_mr(D.pd, dm, 512, 516, rw);
	CHECK_PTR_ERR(mr, errno, EINVAL, "ibv_reg_dm_mr of a range running past the DM's end");
	mr = ibv_reg_dm_mr(D.pd, dm, LEN, 0, rw);
	if (CHECK(mr, "ibv_reg_dm_mr of 0 bytes at the DM's end\t(errno %d)", errno))
		CHECK_RC(ibv_dereg_mr(mr), 0, "... deregistered");
	mr = ibv_reg_dm_mr(D.pd, dm, 256, 512, rw);
	if (CHECK(mr, "ibv_reg_dm_mr(offset 256, 512 bytes)\t(errno %d)", errno)) {
		CHECK(!mr->addr && mr->length == 512 && mr->pd == D.pd && mr->lkey == mr->rkey,
		      "its addr is NULL (zero-based: the address is hidden), length 512, the PD, lkey == rkey");
		CHECK_RC(ibv_free_dm(dm), EBUSY, "ibv_free_dm while an MR covers it");
		CHECK_INT(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, rw | IBV_ACCESS_REMOTE_READ),
			  IBV_REREG_MR_ERR_CMD, "ibv_rereg_mr of a device-memory MR is refused");
		CHECK_RC(ibv_dereg_mr(mr), 0, "ibv_dereg_mr");
	}
	struct ibv_context *c2 = ibv_open_device(D.ctx->device);
	struct ibv_pd *pd2 = c2 ? ibv_alloc_pd(c2) : NULL;
	if (CHECK(pd2, "a PD of a second context")) {
		errno = 0;
		mr = ibv_reg_dm_mr(pd2, dm, 0, LEN, rw);
		CHECK(!mr && errno, "ibv_reg_dm_mr of the first context's DM in the second's PD fails\t(errno %d)",
		      errno);
		if (mr)
			ibv_dereg_mr(mr);
		ibv_dealloc_pd(pd2);
	}
	if (c2)
		ibv_close_device(c2);
	CHECK_RC(ibv_free_dm(dm), 0, "ibv_free_dm once its MRs are gone");
}

/* A peer's RDMA on a DM MR, and SENDs in and out of device memory. */
static void traffic(void)
{
	enum {
		LEN = 4096,
		N = 16
	};
	unsigned acc = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf b;
	struct ibv_dm *dm = alloc_dm(D.ctx, LEN, 0, 0);
	struct ibv_mr *mr = dm ? ibv_reg_dm_mr(D.pd, dm, 0, LEN, acc) : NULL;
	uint8_t want[LEN], got[LEN];

	vt_cfg_default(&c, IBV_QPT_RC);
	memset(&p, 0, sizeof(p));
	memset(&b, 0, sizeof(b));
	if (!CHECK(mr, "a DM of %d bytes and its MR\t(errno %d)", LEN, errno) || !vt_pair_setup(&D, &c, &p) ||
	    vt_buf_alloc(&b, D.pd, LEN, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE))
		goto out;
	/* WRITEs from host memory into device memory, zero-based addresses */
	vt_fill(b.p, LEN, 21);
	memcpy(want, b.p, LEN);
	for (int i = 0; i < N; i++)
		vt_post_send(p.qp[0], i, IBV_WR_RDMA_WRITE, b.p + i * (LEN / N), LEN / N, b.mr->lkey, IBV_SEND_SIGNALED,
			     (uint64_t)i * (LEN / N), mr->rkey, 0);
	bool ok = true;
	for (int i = 0; i < N; i++)
		ok &= EXPECT_WC(p.scq[0], (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL, "WRITE %d into the DM",
				i);
	CHECK_RC(ibv_memcpy_from_dm(got, dm, 0, LEN), 0, "ibv_memcpy_from_dm");
	CHECK(ok && !memcmp(got, want, LEN), "the WRITEs' bytes are in the device memory");
	/* READ from device memory back into host memory */
	memset(b.p, 0, LEN);
	vt_post_send(p.qp[0], 100, IBV_WR_RDMA_READ, b.p, LEN, b.mr->lkey, IBV_SEND_SIGNALED, 0, mr->rkey, 0);
	EXPECT_WC(p.scq[0], 100, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL, "READ of the whole DM");
	CHECK(!memcmp(b.p, want, LEN), "the READ brings the device memory's bytes");
	CHECK_GUARDS(&b, "nothing written around the READ's buffer");
	/* atomics on a word of device memory */
	uint64_t v = 5;
	CHECK_RC(ibv_memcpy_to_dm(dm, 64, &v, 8), 0, "5 into device memory at 64");
	vt_post_atomic(p.qp[0], 200, IBV_WR_ATOMIC_FETCH_AND_ADD, b.p, b.mr->lkey, IBV_SEND_SIGNALED, 64, mr->rkey, 7,
		       0);
	EXPECT_WC(p.scq[0], 200, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, NULL, "FETCH_AND_ADD 7 on it");
	uint64_t orig;
	memcpy(&orig, b.p, 8);
	CHECK_RC(ibv_memcpy_from_dm(&v, dm, 64, 8), 0, "read it back");
	CHECK(orig == 5 && v == 12, "the atomic saw 5 and left 12\t(saw %" PRIu64 ", left %" PRIu64 ")", orig, v);
	vt_post_atomic(p.qp[0], 201, IBV_WR_ATOMIC_CMP_AND_SWP, b.p, b.mr->lkey, IBV_SEND_SIGNALED, 64, mr->rkey, 12,
		       99);
	EXPECT_WC(p.scq[0], 201, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, NULL, "CMP_AND_SWP 12 -> 99");
	ibv_memcpy_from_dm(&v, dm, 64, 8);
	CHECK(v == 99, "and it swapped\t(got %" PRIu64 ")", v);
	/* a WRITE past the DM MR is a remote access error, the DM unchanged */
	ibv_memcpy_from_dm(want, dm, 0, LEN);
	vt_post_send(p.qp[0], 300, IBV_WR_RDMA_WRITE, b.p, 64, b.mr->lkey, IBV_SEND_SIGNALED, LEN - 32, mr->rkey, 0);
	EXPECT_WC(p.scq[0], 300, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, NULL, "WRITE running past the DM MR");
	ibv_memcpy_from_dm(got, dm, 0, LEN);
	CHECK(!memcmp(got, want, LEN), "the device memory is untouched");
	vt_pair_destroy(&p);

	/* SENDs: received into device memory, sent from it */
	if (!vt_pair_setup(&D, &c, &p))
		goto out;
	vt_fill(b.p, 512, 31);
	{
		struct ibv_sge sge = { .addr = 1024, .length = 512, .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 }, *bad;
		CHECK_RC(ibv_post_recv(p.qp[1], &wr, &bad), 0, "a receive into device memory at 1024");
	}
	vt_post_send(p.qp[0], 3, IBV_WR_SEND, b.p, 512, b.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
	EXPECT_WC(p.rcq[1], 2, IBV_WC_SUCCESS, IBV_WC_RECV, NULL, "the SEND is received");
	EXPECT_WC(p.scq[0], 3, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "the SEND completes");
	ibv_memcpy_from_dm(got, dm, 1024, 512);
	CHECK(!memcmp(got, b.p, 512), "its bytes are in the device memory");
	{
		struct ibv_sge sge = { .addr = 1024, .length = 512, .lkey = mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 4,
					  .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		memset(b.p + 2048, 0, 512);
		vt_post_recv(p.qp[0], 5, b.p + 2048, 512, b.mr->lkey);
		CHECK_RC(ibv_post_send(p.qp[1], &wr, &bad), 0, "a SEND from device memory");
	}
	EXPECT_WC(p.rcq[0], 5, IBV_WC_SUCCESS, IBV_WC_RECV, NULL, "it is received");
	EXPECT_WC(p.scq[1], 4, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "it completes");
	CHECK(!memcmp(b.p + 2048, got, 512), "with the device memory's bytes");
out:
	vt_pair_destroy(&p);
	if (b.base)
		vt_buf_free(&b);
	if (mr)
		ibv_dereg_mr(mr);
	if (dm)
		ibv_free_dm(dm);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	bool child = strstr(mode, "close-with-dm") != NULL;

	self = argv[0];
	iwarp = !strncmp(mode, "--iwarp", 7);
	if (iwarp || child)
		argc = 1;
	vt_begin_args(child ? "test_dm (closing with a DM)" : iwarp ? "test_dm (iWARP)" : "test_dm", 120, argc, argv);
	vt_seed(0xd3);
	if (!vt_open(&D))
		return vt_end();
	if (child) {
		attrs();
		close_with_dm_child();
		fflush(stdout);
		_exit(vt_nfail != 0); /* the DM structures stay, as rdma-core's */
	}
	VT_RUN(attrs());
	VT_RUN(alloc_errors());
	VT_RUN(budget());
	VT_RUN(close_with_dm());
	VT_RUN(copies());
	VT_RUN(registration());
	if (!iwarp)
		VT_RUN(traffic());
	vt_close(&D);
	if (!iwarp && !vt_list)
		vt_iwarp_child(argv[0], "--iwarp", "device memory");
	return vt_end();
}
