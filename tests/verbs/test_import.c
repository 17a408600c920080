/* test_import: ibv_import_device, ibv_import_pd, ibv_import_mr,
 * ibv_import_dm and ibv_unimport_* within one process (issue 40, item 6).
 *
 * A dup of a context's cmd_fd opens another context of the same objects
 * (EINVAL for any other descriptor); a handle imported there gives a new
 * ibv_* object for the object (ENOENT: no such handle, EINVAL: another
 * type's), usable with the context's own objects both ways (traffic
 * between a QP of each, keys of either); destroying through an import
 * destroys the object, and its other imports then name nothing;
 * unimporting forgets only the import, also while QPs are on an imported
 * PD; the objects outlive the first context's close while an import is
 * open. */
#include "vt.h"

static struct vt_dev D;

static void import_device_errors(void)
{
	errno = 0;
	struct ibv_context *c = ibv_import_device(-1);
	CHECK_PTR_ERR(c, errno, EINVAL, "ibv_import_device(-1)");
	int fd = open("/dev/null", O_RDWR);
	errno = 0;
	c = ibv_import_device(fd);
	CHECK_PTR_ERR(c, errno, EINVAL, "ibv_import_device of /dev/null");
	close(fd);
	fd = memfd_create("not-a-context", 0);
	errno = 0;
	c = ibv_import_device(fd);
	CHECK_PTR_ERR(c, errno, EINVAL, "ibv_import_device of a memfd that is no context's");
	close(fd);
	/* a closed context's descriptor is closed with it: its number names
	 * nothing (or something else) */
	struct ibv_context *c2 = ibv_open_device(D.ctx->device);
	if (CHECK(c2, "a second context")) {
		int dfd = dup(c2->cmd_fd);
		CHECK_RC(ibv_close_device(c2), 0, "closed (a dup of its cmd_fd kept)");
		errno = 0;
		c = ibv_import_device(dfd);
		CHECK_PTR_ERR(c, errno, EINVAL, "ibv_import_device of a closed context's file");
		close(dfd);
	}
}

static void import_objects(void)
{
	int fd = dup(D.ctx->cmd_fd);
	struct ibv_context *ic = ibv_import_device(fd);

	if (!CHECK(ic, "ibv_import_device(dup(cmd_fd))\t(errno %d)", errno)) {
		close(fd);
		return;
	}
	CHECK(ic != D.ctx && ic->cmd_fd == fd && ic->device == D.ctx->device,
	      "a new context on the descriptor given, of the same device");
	struct ibv_device_attr a;
	CHECK_RC(ibv_query_device(ic, &a), 0, "ibv_query_device on it");
	struct ibv_pd *ipd = ibv_import_pd(ic, D.pd->handle);
	if (CHECK(ipd, "ibv_import_pd of the PD's handle\t(errno %d)", errno))
		CHECK(ipd != D.pd && ipd->handle == D.pd->handle && ipd->context == ic,
		      "a new ibv_pd with the handle, of the imported context");
	errno = 0;
	struct ibv_pd *bad = ibv_import_pd(ic, 12345);
	CHECK_PTR_ERR(bad, errno, ENOENT, "ibv_import_pd of a handle that names nothing");
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 4, NULL, NULL, 0);
	if (cq) {
		errno = 0;
		bad = ibv_import_pd(ic, cq->handle);
		CHECK_PTR_ERR(bad, errno, EINVAL, "ibv_import_pd of a CQ's handle");
	}
	struct ibv_context *other = ibv_open_device(D.ctx->device);
	struct ibv_pd *opd = other ? ibv_alloc_pd(other) : NULL;
	struct ibv_cq *ocq = other ? ibv_create_cq(other, 4, NULL, NULL, 0) : NULL;
	if (CHECK(opd && ocq, "a PD and a CQ in another context")) {
		errno = 0;
		bad = ibv_import_pd(ic, ocq->handle);
		CHECK(!bad && errno == (ocq->handle == cq->handle ? EINVAL : ENOENT),
		      "ibv_import_pd goes by the imported context's handles, not another context's\t(errno %d)", errno);
	}
	static uint8_t buf[4096];
	struct ibv_mr *mr = ibv_reg_mr(D.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_mr *imr = mr && ipd ? ibv_import_mr(ipd, mr->handle) : NULL;
	if (CHECK(imr, "ibv_import_mr of the MR's handle\t(errno %d)", errno))
		CHECK(imr != mr && imr->lkey == mr->lkey && imr->rkey == mr->rkey && imr->length == mr->length &&
			      !imr->addr && imr->pd == ipd && imr->context == ic && imr->handle == mr->handle,
		      "its keys, length and handle, addr NULL (as rdma-core's), the PD given");
	if (ipd && cq) {
		errno = 0;
		struct ibv_mr *bmr = ibv_import_mr(ipd, cq->handle);
		CHECK_PTR_ERR(bmr, errno, EINVAL, "ibv_import_mr of a CQ's handle");
	}
	/* destroying through an import destroys the object */
	if (imr) {
		uint32_t h = mr->handle;
		struct ibv_mr *imr2 = ibv_import_mr(ipd, h);
		CHECK(imr2, "a second import of the MR");
		/* the first ibv_mr is freed with the MR (rdma-core's would stay) */
		CHECK_RC(ibv_dereg_mr(imr), 0, "ibv_dereg_mr of an import");
		errno = 0;
		struct ibv_mr *again = ibv_import_mr(ipd, h);
		CHECK_PTR_ERR(again, errno, ENOENT, "the MR is gone: its handle names nothing");
		CHECK_INT(ibv_rereg_mr(imr2, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE),
			  IBV_REREG_MR_ERR_CMD, "the other import of it names nothing either (ibv_rereg_mr fails)");
		CHECK(errno == ENOENT, "... with ENOENT\t(errno %d)", errno);
		if (imr2)
			ibv_unimport_mr(imr2);
	}
	if (ocq)
		ibv_destroy_cq(ocq);
	if (opd)
		ibv_dealloc_pd(opd);
	if (other)
		ibv_close_device(other);
	if (cq)
		ibv_destroy_cq(cq);
	if (ipd)
		ibv_unimport_pd(ipd);
	CHECK_RC(ibv_close_device(ic), 0, "the imported context closed");
	CHECK(fcntl(fd, F_GETFD) < 0 && errno == EBADF, "with the descriptor it was given");
	struct ibv_pd *pd = ibv_alloc_pd(D.ctx);
	CHECK(pd, "the first context goes on");
	if (pd)
		ibv_dealloc_pd(pd);
}

/* A QP of an imported context on the imported PD talks to one of the
 * first; each side WRITEs with an MR of the other context's making. */
static void traffic_across(void)
{
	enum {
		LEN = 1024
	};
	int fd = dup(D.ctx->cmd_fd);
	struct ibv_context *ic = ibv_import_device(fd);
	struct ibv_pd *ipd = ic ? ibv_import_pd(ic, D.pd->handle) : NULL;
	struct vt_qp_cfg c;
	struct ibv_cq *cq[2] = { NULL, NULL };
	struct ibv_qp *qp[2] = { NULL, NULL };
	struct vt_buf b[2];

	memset(b, 0, sizeof(b));
	vt_cfg_default(&c, IBV_QPT_RC);
	if (!CHECK(ipd, "an imported context and PD\t(errno %d)", errno))
		goto out;
	for (int i = 0; i < 2; i++) {
		struct ibv_context *cx = i ? ic : D.ctx;
		cq[i] = ibv_create_cq(cx, 64, NULL, NULL, 0);
		struct ibv_qp_init_attr qa = {
			.send_cq = cq[i],
			.recv_cq = cq[i],
			.qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 }
		};
		qp[i] = cq[i] ? ibv_create_qp(i ? ipd : D.pd, &qa) : NULL;
		/* side 0's buffer registered through the import, side 1's
		 * through the first context */
		if (!CHECK(qp[i] && !vt_buf_alloc(&b[i], i ? D.pd : ipd, LEN, 4096,
						  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
			   "side %d (%s context): CQ, QP and a buffer\t(errno %d)", i, i ? "imported" : "first", errno))
			goto out;
	}
	CHECK(qp[1]->context == ic && qp[1]->pd == ipd, "the imported context's QP names it and the imported PD");
	for (int i = 0; i < 2; i++)
		if (!CHECK(!vt_qp_connect(qp[i], &c, IBV_QPS_RTS, qp[!i]->qp_num, c.psn[!i], c.psn[i], &D.gid,
					  D.gid_index),
			   "QP %d to RTS", i))
			goto out;
	for (int i = 0; i < 2; i++)
		vt_fill(b[i].p, LEN, 40 + i);
	for (int i = 0; i < 2; i++) {
		vt_post_send(qp[i], 10 + i, IBV_WR_RDMA_WRITE, b[i].p, LEN / 2, b[i].mr->lkey, IBV_SEND_SIGNALED,
			     (uintptr_t)b[!i].p + LEN / 2, b[!i].mr->rkey, 0);
		EXPECT_WC(cq[i], 10 + i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL, "side %d's WRITE to the other", i);
	}
	for (int i = 0; i < 2; i++)
		CHECK(!memcmp(b[!i].p + LEN / 2, b[i].p, LEN / 2), "side %d's bytes arrived", i);
	/* the first context closes: the objects stay while the import is open */
	ibv_destroy_qp(qp[0]);
	qp[0] = NULL;
	ibv_destroy_cq(cq[0]);
	cq[0] = NULL;
	vt_buf_free(&b[0]);
	struct ibv_pd *pd0 = D.pd;
	struct ibv_context *c0 = D.ctx;
	/* unimport the PD a QP is on: the QP goes on and is destroyed later */
	ibv_unimport_pd(ipd);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK_RC(ibv_query_qp(qp[1], &qa, IBV_QP_STATE, &qi), 0, "a QP on a PD that was unimported meanwhile");
	CHECK_RC(ibv_destroy_qp(qp[1]), 0, "... destroyed");
	qp[1] = NULL;
	ipd = NULL;
	vt_buf_free(&b[1]);
	CHECK_RC(ibv_dealloc_pd(pd0), 0, "the first context's PD deallocated");
	D.pd = NULL;
	CHECK_RC(ibv_close_device(c0), 0, "the first context closed");
	D.ctx = NULL;
	struct ibv_pd *pd = ibv_alloc_pd(ic);
	struct ibv_cq *xcq = ibv_create_cq(ic, 4, NULL, NULL, 0);
	CHECK(pd && xcq, "the imported context goes on: a PD and a CQ in it");
	CHECK_RC(ibv_destroy_cq(cq[1]), 0, "the CQ it made before");
	cq[1] = NULL;
	if (xcq)
		ibv_destroy_cq(xcq);
	if (pd)
		ibv_dealloc_pd(pd);
	CHECK_RC(ibv_close_device(ic), 0, "the imported context closed too");
	ic = NULL;
	/* the device again, for the other cases */
	if (!vt_open(&D))
		return;
out:
	for (int i = 0; i < 2; i++) {
		if (qp[i])
			ibv_destroy_qp(qp[i]);
		if (cq[i])
			ibv_destroy_cq(cq[i]);
		if (b[i].base)
			vt_buf_free(&b[i]);
	}
	if (ipd)
		ibv_unimport_pd(ipd);
	if (ic)
		ibv_close_device(ic);
}

/* A PD deallocated through an import, or by its first ibv_pd while an
 * import is open: the import names nothing then. */
static void pd_lifetimes(void)
{
	int fd = dup(D.ctx->cmd_fd);
	struct ibv_context *ic = ibv_import_device(fd);
	struct ibv_pd *pd = ibv_alloc_pd(D.ctx);
	struct ibv_pd *ipd = ic && pd ? ibv_import_pd(ic, pd->handle) : NULL;
	static uint8_t buf[256];

	if (!CHECK(ipd, "a PD and its import"))
		goto out;
	struct ibv_mr *mr = ibv_reg_mr(ipd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr && mr->pd == ipd, "ibv_reg_mr on the import");
	CHECK_RC(ibv_dealloc_pd(pd), EBUSY, "the PD is busy with an MR made through its import");
	CHECK_RC(ibv_dealloc_pd(ipd), EBUSY, "... by either ibv_pd");
	if (mr)
		ibv_dereg_mr(mr);
	uint32_t h = pd->handle;
	CHECK_RC(ibv_dealloc_pd(ipd), 0, "ibv_dealloc_pd of the import deallocates the PD (and frees both ibv_pds)");
	ipd = NULL;
	errno = 0;
	struct ibv_pd *again = ibv_import_pd(ic, h);
	CHECK(!again && (errno == ENOENT || errno == EINVAL), "its handle names no PD now\t(errno %d)", errno);
	pd = ibv_alloc_pd(D.ctx);
	ipd = pd ? ibv_import_pd(ic, pd->handle) : NULL;
	if (CHECK(ipd, "another PD and its import")) {
		CHECK_RC(ibv_dealloc_pd(pd), 0, "the PD deallocated by its first ibv_pd");
		pd = NULL;
		errno = 0;
		mr = ibv_reg_mr(ipd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
		CHECK_PTR_ERR(mr, errno, ENOENT, "ibv_reg_mr on its import: ENOENT");
		ibv_unimport_pd(ipd);
		ipd = NULL;
	}
out:
	if (ipd)
		ibv_unimport_pd(ipd);
	if (pd)
		ibv_dealloc_pd(pd);
	if (ic)
		ibv_close_device(ic);
}

static void import_dm(void)
{
	struct ibv_alloc_dm_attr da = { .length = 4096 };
	struct ibv_dm *dm = ibv_alloc_dm(D.ctx, &da);
	int fd = dup(D.ctx->cmd_fd);
	struct ibv_context *ic = ibv_import_device(fd);
	struct ibv_dm *idm = dm && ic ? ibv_import_dm(ic, dm->handle) : NULL;
	uint8_t in[4096], out[4096];

	if (!CHECK(idm, "a DM and its import\t(errno %d)", errno))
		goto out;
	CHECK(idm != dm && idm->handle == dm->handle && idm->context == ic, "a new ibv_dm with the handle");
	vt_fill(in, sizeof(in), 5);
	CHECK_RC(ibv_memcpy_to_dm(dm, 0, in, sizeof(in)), 0, "written through the DM");
	memset(out, 0, sizeof(out));
	CHECK_RC(ibv_memcpy_from_dm(out, idm, 0, sizeof(out)), 0, "read through the import");
	CHECK(!memcmp(in, out, sizeof(in)), "the same bytes");
	CHECK_RC(ibv_memcpy_to_dm(idm, 4, in, 6), EINVAL, "the import's copies have the DM's rules");
	struct ibv_mr *mr = ibv_reg_dm_mr(D.pd, idm, 0, 4096, IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE);
	if (CHECK(mr, "ibv_reg_dm_mr of the import\t(errno %d)", errno)) {
		CHECK_RC(ibv_free_dm(dm), EBUSY, "the DM is busy with it");
		ibv_dereg_mr(mr);
	}
	CHECK_RC(ibv_free_dm(idm), 0, "ibv_free_dm of the import frees the DM");
	idm = dm = NULL;
	struct ibv_device_attr_ex ax;
	memset(&ax, 0, sizeof(ax));
	ibv_query_device_ex(D.ctx, NULL, &ax);
	da.length = ax.max_dm_size;
	dm = ibv_alloc_dm(D.ctx, &da);
	CHECK(dm, "all of max_dm_size is free again");
out:
	if (idm)
		ibv_unimport_dm(idm);
	if (dm)
		ibv_free_dm(dm);
	if (ic)
		ibv_close_device(ic);
}

int main(int argc, char **argv)
{
	vt_begin_args("test_import", 120, argc, argv);
	vt_seed(0x1e);
	if (!vt_open(&D))
		return vt_end();
	VT_RUN(import_device_errors());
	VT_RUN(import_objects());
	VT_RUN(pd_lifetimes());
	VT_RUN(import_dm());
	VT_RUN(traffic_across());
	vt_close(&D);
	return vt_end();
}
