/* test_xrc: XRC (issue 40, item 5) on Soft-RoCE.
 *
 * ibv_open_xrcd's checks and file rules (O_CREAT, O_EXCL; every open of
 * one file is one domain, also from another context; fd -1 a domain of
 * its own), XRC SRQs (ibv_create_srq_ex, ibv_get_srq_num, their CQ and
 * domain busy while they live), XRC_SEND and XRC_RECV QPs and their
 * checks, and traffic: an INI QP's messages go to the SRQ each names in
 * its XRCETH (SENDs of one and many packets, with immediate data), their
 * completions to that SRQ's CQ, WRITEs, READs and atomics checked
 * against that SRQ's PD; a request naming no SRQ of the domain is a
 * remote access error.  ibv_open_qp reaches a TGT QP by its number from
 * another context, and the QP lives while any handle of it does. */
#include "vt.h"

static struct vt_dev D;
static char xfile[64];

static struct ibv_xrcd *open_xrcd(struct ibv_context *c, int fd, int oflags, uint32_t mask)
{
	struct ibv_xrcd_init_attr a = { .comp_mask = mask, .fd = fd, .oflags = oflags };
	errno = 0;
	return ibv_open_xrcd(c, &a);
}

#define FD_OFLAGS (IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS)

static struct ibv_srq *xrc_srq(struct ibv_context *c, struct ibv_pd *pd, struct ibv_xrcd *x, struct ibv_cq *cq,
			       uint32_t max_wr)
{
	struct ibv_srq_init_attr_ex a = { .attr = { .max_wr = max_wr, .max_sge = 2 },
					  .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
						       IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
					  .srq_type = IBV_SRQT_XRC,
					  .pd = pd,
					  .xrcd = x,
					  .cq = cq };
	errno = 0;
	return ibv_create_srq_ex(c, &a);
}

static struct ibv_qp *tgt_qp(struct ibv_context *c, struct ibv_xrcd *x)
{
	struct ibv_qp_init_attr_ex a = { .qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = x };
	errno = 0;
	return ibv_create_qp_ex(c, &a);
}

static struct ibv_qp *ini_qp(struct ibv_context *c, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex a = { .qp_type = IBV_QPT_XRC_SEND,
					 .comp_mask = IBV_QP_INIT_ATTR_PD,
					 .pd = pd,
					 .send_cq = cq,
					 .cap = { .max_send_wr = 64, .max_send_sge = 2 } };
	errno = 0;
	return ibv_create_qp_ex(c, &a);
}

/* RESET -> INIT -> RTR (-> RTS for the INI end), with the kernel's
 * required attributes for each end. */
static bool xrc_connect(struct ibv_qp *qp, uint32_t dest, uint32_t rq_psn, uint32_t sq_psn)
{
	bool ini = qp->qp_type == IBV_QPT_XRC_SEND;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .pkey_index = 0,
				 .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						    IBV_ACCESS_REMOTE_ATOMIC };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return false;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = rq_psn;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = D.gid;
	a.ah_attr.grh.hop_limit = 64;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 12;
	int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (!ini)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	if (ibv_modify_qp(qp, &a, mask))
		return false;
	if (!ini)
		return true;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 16;
	return !ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				      IBV_QP_MAX_QP_RD_ATOMIC);
}

static int xrc_post(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t lkey,
		    uint32_t srqn, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { (uintptr_t)addr, len, lkey };
	struct ibv_send_wr wr = { .wr_id = id,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	wr.qp_type.xrc.remote_srqn = srqn;
	wr.imm_data = htonl(0xfeed);
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 3;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

static void caps(void)
{
	struct ibv_device_attr_ex a;

	memset(&a, 0, sizeof(a));
	CHECK_RC(ibv_query_device_ex(D.ctx, NULL, &a), 0, "ibv_query_device_ex");
	CHECK(a.orig_attr.device_cap_flags & IBV_DEVICE_XRC, "IBV_DEVICE_XRC is advertised");
	CHECK(a.xrc_odp_caps & IBV_ODP_SUPPORT_SRQ_RECV, "xrc_odp_caps: SRQ receives into ODP regions\t(0x%x)",
	      a.xrc_odp_caps);
}

static void xrcd_rules(void)
{
	struct ibv_xrcd *x, *y;
	int fd = open(xfile, O_RDONLY | O_CREAT, 0600);

	if (!CHECK(fd >= 0, "a file for the domain"))
		return;
	x = open_xrcd(D.ctx, fd, O_CREAT, IBV_XRCD_INIT_ATTR_FD);
	CHECK_PTR_ERR(x, errno, EINVAL, "ibv_open_xrcd without IBV_XRCD_INIT_ATTR_OFLAGS");
	x = open_xrcd(D.ctx, fd, O_CREAT, FD_OFLAGS | IBV_XRCD_INIT_ATTR_RESERVED);
	CHECK_PTR_ERR(x, errno, EOPNOTSUPP, "... with an unknown comp_mask bit");
	x = open_xrcd(D.ctx, 12345, O_CREAT, FD_OFLAGS);
	CHECK_PTR_ERR(x, errno, EBADF, "... of a descriptor that is none");
	x = open_xrcd(D.ctx, fd, 0, FD_OFLAGS);
	CHECK_PTR_ERR(x, errno, EAGAIN, "... of a file no domain has, without O_CREAT");
	x = open_xrcd(D.ctx, fd, O_CREAT, FD_OFLAGS);
	if (!CHECK(x, "... with O_CREAT: a new domain\t(errno %d)", errno))
		goto out;
	CHECK(x->context == D.ctx, "of the context");
	y = open_xrcd(D.ctx, fd, O_CREAT | O_EXCL, FD_OFLAGS);
	CHECK_PTR_ERR(y, errno, EINVAL, "O_CREAT | O_EXCL of a file that has one");
	y = open_xrcd(D.ctx, fd, 0, FD_OFLAGS);
	if (CHECK(y, "the file's domain opened again without O_CREAT\t(errno %d)", errno))
		CHECK_RC(ibv_close_xrcd(y), 0, "ibv_close_xrcd of one handle");
	CHECK_RC(ibv_close_xrcd(x), 0, "ibv_close_xrcd of the last");
	x = open_xrcd(D.ctx, fd, 0, FD_OFLAGS);
	CHECK_PTR_ERR(x, errno, EAGAIN, "the domain went with its last handle");
	x = open_xrcd(D.ctx, -1, 0, FD_OFLAGS);
	if (CHECK(x, "fd -1: a domain of its own\t(errno %d)", errno))
		ibv_close_xrcd(x);
out:
	close(fd);
}

static void srq_and_qp_checks(void)
{
	int fd = open(xfile, O_RDONLY | O_CREAT, 0600);
	struct ibv_xrcd *x = open_xrcd(D.ctx, fd, O_CREAT, FD_OFLAGS);
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	struct ibv_srq *s1 = NULL, *s2 = NULL, *basic = NULL;
	struct ibv_qp *t = NULL, *i = NULL;
	uint32_t n1 = 0, n2 = 0;

	if (!CHECK(x && cq, "a domain and a CQ"))
		goto out;
	struct ibv_srq_init_attr_ex a = { .attr = { .max_wr = 4, .max_sge = 1 },
					  .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
						       IBV_SRQ_INIT_ATTR_XRCD,
					  .srq_type = IBV_SRQT_XRC,
					  .pd = D.pd,
					  .xrcd = x };
	errno = 0;
	struct ibv_srq *bad = ibv_create_srq_ex(D.ctx, &a);
	CHECK_PTR_ERR(bad, errno, EINVAL, "an XRC SRQ without a CQ");
	a.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
	a.cq = cq;
	a.srq_type = IBV_SRQT_TM;
	errno = 0;
	bad = ibv_create_srq_ex(D.ctx, &a);
	CHECK_PTR_ERR(bad, errno, EOPNOTSUPP, "a tag-matching SRQ");
	s1 = xrc_srq(D.ctx, D.pd, x, cq, 4);
	s2 = xrc_srq(D.ctx, D.pd, x, cq, 4);
	if (!CHECK(s1 && s2, "two XRC SRQs\t(errno %d)", errno))
		goto out;
	CHECK(!ibv_get_srq_num(s1, &n1) && !ibv_get_srq_num(s2, &n2) && n1 && n2 && n1 != n2,
	      "ibv_get_srq_num: two numbers, neither 0\t(%u, %u)", n1, n2);
	struct ibv_srq_init_attr ba = { .attr = { .max_wr = 4, .max_sge = 1 } };
	basic = ibv_create_srq(D.pd, &ba);
	uint32_t nb;
	if (basic)
		CHECK_RC(ibv_get_srq_num(basic, &nb), EINVAL, "ibv_get_srq_num of a basic SRQ");
	CHECK_RC(ibv_close_xrcd(x), EBUSY, "ibv_close_xrcd while its SRQs live");
	CHECK_RC(ibv_destroy_cq(cq), EBUSY, "ibv_destroy_cq while an XRC SRQ completes into it");
	struct ibv_recv_wr rw = { .wr_id = 1 }, *brw;
	t = tgt_qp(D.ctx, x);
	if (CHECK(t, "an XRC_RECV QP in the domain\t(errno %d)", errno)) {
		CHECK(t->qp_type == IBV_QPT_XRC_RECV && !t->pd && !t->send_cq && !t->recv_cq && !t->srq,
		      "it has no PD, CQs or SRQ of its own");
		CHECK_RC(ibv_post_recv(t, &rw, &brw), EINVAL, "ibv_post_recv on it");
		struct ibv_send_wr sw = { .wr_id = 1, .opcode = IBV_WR_SEND }, *bsw;
		struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
		ibv_modify_qp(t, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
		CHECK_RC(ibv_post_send(t, &sw, &bsw), EINVAL, "ibv_post_send on it");
	}
	struct ibv_qp_init_attr_ex ta = { .qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = D.pd };
	errno = 0;
	struct ibv_qp *bq = ibv_create_qp_ex(D.ctx, &ta);
	CHECK_PTR_ERR(bq, errno, EINVAL, "an XRC_RECV QP without a domain");
	struct ibv_qp_init_attr_ex ia = { .qp_type = IBV_QPT_XRC_SEND,
					  .comp_mask = IBV_QP_INIT_ATTR_PD,
					  .pd = D.pd,
					  .cap = { .max_send_wr = 4, .max_send_sge = 1 } };
	errno = 0;
	bq = ibv_create_qp_ex(D.ctx, &ia);
	CHECK_PTR_ERR(bq, errno, EINVAL, "an XRC_SEND QP without a send CQ");
	i = ini_qp(D.ctx, D.pd, cq);
	if (CHECK(i, "an XRC_SEND QP\t(errno %d)", errno)) {
		CHECK(i->qp_type == IBV_QPT_XRC_SEND && i->pd == D.pd, "of its PD");
		CHECK_RC(ibv_post_recv(i, &rw, &brw), EINVAL, "ibv_post_recv on it: no receive queue");
	}
	if (t)
		CHECK_RC(ibv_close_xrcd(x), EBUSY, "ibv_close_xrcd while a TGT QP lives");
out:
	if (i)
		ibv_destroy_qp(i);
	if (t)
		ibv_destroy_qp(t);
	if (basic)
		ibv_destroy_srq(basic);
	if (s1)
		ibv_destroy_srq(s1);
	if (s2)
		ibv_destroy_srq(s2);
	if (cq)
		CHECK_RC(ibv_destroy_cq(cq), 0, "the CQ once its SRQs are gone");
	if (x)
		CHECK_RC(ibv_close_xrcd(x), 0, "the domain once its SRQs and QPs are gone");
	if (fd >= 0)
		close(fd);
}

/* Two contexts, one domain through the file: the TGT QP of context 1
 * delivers into SRQs of both, each checked against its own PD. */
static void traffic(void)
{
	enum {
		LEN = 10000
	}; /* 10 packets at MTU 1024 */
	int fd = open(xfile, O_RDONLY | O_CREAT, 0600);
	struct ibv_context *c2 = ibv_open_device(D.ctx->device);
	struct ibv_pd *pd2 = c2 ? ibv_alloc_pd(c2) : NULL;
	struct ibv_xrcd *x1 = open_xrcd(D.ctx, fd, O_CREAT, FD_OFLAGS);
	struct ibv_xrcd *x2 = c2 ? open_xrcd(c2, fd, 0, FD_OFLAGS) : NULL;
	struct ibv_cq *icq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	struct ibv_cq *cq1 = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	struct ibv_cq *cq2 = c2 ? ibv_create_cq(c2, 64, NULL, NULL, 0) : NULL;
	struct ibv_srq *s1 = NULL, *s2 = NULL;
	struct ibv_qp *ini = NULL, *tgt = NULL, *opened = NULL;
	struct vt_buf src, b1, b2;
	struct ibv_wc wc;
	uint32_t n1 = 0, n2 = 0;

	memset(&src, 0, sizeof(src));
	memset(&b1, 0, sizeof(b1));
	memset(&b2, 0, sizeof(b2));
	if (!CHECK(x1 && x2 && icq && cq1 && cq2, "one domain through the file in two contexts, and CQs"))
		goto out;
	s1 = xrc_srq(D.ctx, D.pd, x1, cq1, 16);
	s2 = xrc_srq(c2, pd2, x2, cq2, 16);
	tgt = tgt_qp(D.ctx, x1);
	ini = ini_qp(D.ctx, D.pd, icq);
	unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC;
	if (!CHECK(s1 && s2 && tgt && ini, "an SRQ in each context, a TGT and an INI QP\t(errno %d)", errno) ||
	    vt_buf_alloc(&src, D.pd, 2 * LEN, 4096, acc) || vt_buf_alloc(&b1, D.pd, 2 * LEN, 4096, acc) ||
	    vt_buf_alloc(&b2, pd2, 2 * LEN, 4096, acc))
		goto out;
	ibv_get_srq_num(s1, &n1);
	ibv_get_srq_num(s2, &n2);
	if (!CHECK(xrc_connect(tgt, ini->qp_num, 0x100, 0) && xrc_connect(ini, tgt->qp_num, 0x200, 0x100),
		   "INI and TGT connected (TGT to RTR, INI to RTS)"))
		goto out;
	for (int k = 0; k < 2; k++) {
		vt_post_srq_recv(s1, 100 + k, b1.p + k * LEN, LEN, b1.mr->lkey);
		vt_post_srq_recv(s2, 200 + k, b2.p + k * LEN, LEN, b2.mr->lkey);
	}
	vt_fill(src.p, 2 * LEN, 7);
	CHECK_RC(xrc_post(ini, 1, IBV_WR_SEND, src.p, LEN, src.mr->lkey, n2, 0, 0), 0,
		 "a SEND of %d bytes naming context 2's SRQ", LEN);
	CHECK_RC(xrc_post(ini, 2, IBV_WR_SEND_WITH_IMM, src.p + LEN, 64, src.mr->lkey, n1, 0, 0), 0,
		 "a SEND with immediate naming context 1's SRQ");
	EXPECT_WC(icq, 1, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "the first SEND completes at the INI end");
	EXPECT_WC(icq, 2, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "the second");
	if (EXPECT_WC(cq2, 200, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "context 2's SRQ received the first"))
		CHECK(wc.byte_len == LEN && wc.qp_num == tgt->qp_num && !memcmp(b2.p, src.p, LEN),
		      "all %d bytes, on the TGT QP's number\t(byte_len %u, qp_num %u)", LEN, wc.byte_len, wc.qp_num);
	if (EXPECT_WC(cq1, 100, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "context 1's SRQ the second"))
		CHECK(wc.byte_len == 64 && (wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == htonl(0xfeed) &&
			      !memcmp(b1.p, src.p + LEN, 64),
		      "with its immediate data and bytes");
	CHECK_CQ_EMPTY(cq1, 50, "nothing else in context 1's CQ");

	/* WRITE, READ, atomic: the named SRQ's PD checks the keys */
	CHECK_RC(xrc_post(ini, 3, IBV_WR_RDMA_WRITE, src.p, 512, src.mr->lkey, n2, (uintptr_t)b2.p + LEN, b2.mr->rkey),
		 0, "a WRITE into context 2's memory, naming its SRQ");
	EXPECT_WC(icq, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL, "completes");
	CHECK(!memcmp(b2.p + LEN, src.p, 512), "its bytes arrived");
	memset(src.p + LEN, 0, 512);
	CHECK_RC(xrc_post(ini, 4, IBV_WR_RDMA_READ, src.p + LEN, 512, src.mr->lkey, n2, (uintptr_t)b2.p + LEN,
			  b2.mr->rkey),
		 0, "a READ of it back");
	EXPECT_WC(icq, 4, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL, "completes");
	CHECK(!memcmp(src.p + LEN, src.p, 512), "with the bytes");
	uint64_t *word = (uint64_t *)(b1.p + LEN);
	*word = 39;
	CHECK_RC(xrc_post(ini, 5, IBV_WR_ATOMIC_FETCH_AND_ADD, src.p, 8, src.mr->lkey, n1, (uintptr_t)word,
			  b1.mr->rkey),
		 0, "a FETCH_AND_ADD naming context 1's SRQ");
	EXPECT_WC(icq, 5, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, NULL, "completes");
	CHECK(*word == 42, "the word is 42\t(%" PRIu64 ")", *word);

	/* ibv_open_qp from the other context; the creator's handle goes */
	struct ibv_qp_open_attr oa = { .comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
						    IBV_QP_OPEN_ATTR_TYPE,
				       .qp_num = tgt->qp_num,
				       .xrcd = x2,
				       .qp_type = IBV_QPT_XRC_RECV };
	opened = ibv_open_qp(c2, &oa);
	if (CHECK(opened, "ibv_open_qp of the TGT QP by its number from context 2\t(errno %d)", errno)) {
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qi;
		CHECK(opened != tgt && opened->qp_num == tgt->qp_num && opened->context == c2,
		      "a handle of context 2 with the QP's number");
		CHECK(!ibv_query_qp(opened, &qa, IBV_QP_STATE, &qi) && qa.qp_state == IBV_QPS_RTR,
		      "ibv_query_qp through it: RTR");
		CHECK_RC(ibv_destroy_qp(tgt), 0, "the creator's handle destroyed");
		tgt = NULL;
		vt_post_srq_recv(s2, 300, b2.p, 64, b2.mr->lkey);
		xrc_post(ini, 6, IBV_WR_SEND, src.p, 64, src.mr->lkey, n2, 0, 0);
		EXPECT_WC(icq, 6, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "the QP goes on: a SEND through it completes");
		EXPECT_WC(cq2, 201, IBV_WC_SUCCESS, IBV_WC_RECV, NULL, "into context 2's SRQ");
	}
	oa.qp_num ^= 1;
	errno = 0;
	struct ibv_qp *none = ibv_open_qp(c2, &oa);
	CHECK_PTR_ERR(none, errno, EINVAL, "ibv_open_qp of a number no TGT QP of the domain has");

	/* a key of another PD than the named SRQ's, then an SRQ number of no
	 * SRQ: remote access errors (the INI QP goes to ERR each time) */
	CHECK_RC(xrc_post(ini, 7, IBV_WR_RDMA_WRITE, src.p, 64, src.mr->lkey, n2, (uintptr_t)b1.p, b1.mr->rkey), 0,
		 "a WRITE with context 1's rkey naming context 2's SRQ");
	EXPECT_WC(icq, 7, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, NULL, "a remote access error");
out:
	if (ini)
		ibv_destroy_qp(ini);
	if (opened)
		CHECK_RC(ibv_destroy_qp(opened), 0, "the last handle of the TGT QP destroyed");
	if (tgt)
		ibv_destroy_qp(tgt);
	if (s1)
		ibv_destroy_srq(s1);
	if (s2)
		ibv_destroy_srq(s2);
	if (x2)
		CHECK_RC(ibv_close_xrcd(x2), 0, "context 2's handle of the domain closed");
	if (x1)
		CHECK_RC(ibv_close_xrcd(x1), 0, "context 1's");
	vt_buf_free(&src);
	vt_buf_free(&b1);
	vt_buf_free(&b2);
	if (icq)
		ibv_destroy_cq(icq);
	if (cq1)
		ibv_destroy_cq(cq1);
	if (cq2)
		ibv_destroy_cq(cq2);
	if (pd2)
		ibv_dealloc_pd(pd2);
	if (c2)
		ibv_close_device(c2);
	if (fd >= 0)
		close(fd);
}

/* A request naming no SRQ of the TGT QP's domain (another domain's). */
static void wrong_srq(void)
{
	struct ibv_xrcd *x = open_xrcd(D.ctx, -1, 0, FD_OFLAGS), *other = open_xrcd(D.ctx, -1, 0, FD_OFLAGS);
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	struct ibv_srq *s = x && other && cq ? xrc_srq(D.ctx, D.pd, other, cq, 4) : NULL;
	struct ibv_qp *tgt = s ? tgt_qp(D.ctx, x) : NULL, *ini = tgt ? ini_qp(D.ctx, D.pd, cq) : NULL;
	struct vt_buf b;
	uint32_t n = 0;

	memset(&b, 0, sizeof(b));
	if (!CHECK(ini && !vt_buf_alloc(&b, D.pd, 64, 0, IBV_ACCESS_LOCAL_WRITE), "two domains, an SRQ in one, "
										  "a TGT QP in the other") ||
	    !CHECK(xrc_connect(tgt, ini->qp_num, 0, 0) && xrc_connect(ini, tgt->qp_num, 0, 0), "connected"))
		goto out;
	ibv_get_srq_num(s, &n);
	vt_post_srq_recv(s, 1, b.p, 64, b.mr->lkey);
	xrc_post(ini, 2, IBV_WR_SEND, b.p, 8, b.mr->lkey, n, 0, 0);
	EXPECT_WC(cq, 2, IBV_WC_REM_ACCESS_ERR, IBV_WC_SEND, NULL,
		  "a SEND naming the other domain's SRQ: a remote access error, as the rxe XRC patches NAK it");
	CHECK_CQ_EMPTY(cq, 50, "and the other domain's SRQ received nothing");
out:
	if (ini)
		ibv_destroy_qp(ini);
	if (tgt)
		ibv_destroy_qp(tgt);
	if (s)
		ibv_destroy_srq(s);
	vt_buf_free(&b);
	if (cq)
		ibv_destroy_cq(cq);
	if (x)
		ibv_close_xrcd(x);
	if (other)
		ibv_close_xrcd(other);
}

int main(int argc, char **argv)
{
	vt_begin_args("test_xrc", 120, argc, argv);
	vt_seed(0x3c);
	snprintf(xfile, sizeof(xfile), "/tmp/test_xrc.%d", getpid());
	if (!vt_open(&D))
		return vt_end();
	VT_RUN(caps());
	VT_RUN(xrcd_rules());
	VT_RUN(srq_and_qp_checks());
	VT_RUN(traffic());
	VT_RUN(wrong_srq());
	vt_close(&D);
	unlink(xfile);
	return vt_end();
}
