/* test_state_machine: the QP state machine and argument checking of the
 * verbs, with the errno values rdma-core and the kernel's rxe give.
 *
 *  - device, port, GID and P_Key queries;
 *  - object creation limits (CQ, MR access flags, QP caps, SRQ);
 *  - for RC, UC and UD: RESET->INIT->RTR->RTS with exactly the required
 *    attribute masks of the kernel's ib_modify_qp_is_ok() table; each
 *    required attribute missing -> EINVAL; attributes not allowed in a
 *    transition -> EINVAL; invalid transitions -> EINVAL; a failed modify
 *    changes nothing; ibv_query_qp returns what was set;
 *  - to ERR and to RESET from every state, and a QP reused after RESET;
 *  - posting: post_send before RTS, post_recv in RESET, too many SGEs,
 *    SQ/RQ overflow, inline data too long, misaligned atomics; a bad WR in
 *    the middle of a chain (a UD message larger than the MTU is posted and
 *    fails: test_wr_errors);
 *  - destroying objects still in use -> EBUSY;
 *  - errno set by failing verbs, ibv_rereg_mr's return codes, ibv_reg_mr of
 *    no pages or unmapped pages, AV port/GID index, ALT_PATH, privileged
 *    Q_Keys, QP types, ibv_wr_* ENOSPC: as rdma-core + the kernel's rxe. */
#include "vt.h"
#include "common/tsan.h"

#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/syscall.h>

static struct vt_dev D;

/* ------------------------------------------------------------------ */

static const struct {
	int bit;
	const char *name;
} mask_names[] = {
	{ IBV_QP_STATE, "STATE" },
	{ IBV_QP_CUR_STATE, "CUR_STATE" },
	{ IBV_QP_EN_SQD_ASYNC_NOTIFY, "EN_SQD_ASYNC_NOTIFY" },
	{ IBV_QP_ACCESS_FLAGS, "ACCESS_FLAGS" },
	{ IBV_QP_PKEY_INDEX, "PKEY_INDEX" },
	{ IBV_QP_PORT, "PORT" },
	{ IBV_QP_QKEY, "QKEY" },
	{ IBV_QP_AV, "AV" },
	{ IBV_QP_PATH_MTU, "PATH_MTU" },
	{ IBV_QP_TIMEOUT, "TIMEOUT" },
	{ IBV_QP_RETRY_CNT, "RETRY_CNT" },
	{ IBV_QP_RNR_RETRY, "RNR_RETRY" },
	{ IBV_QP_RQ_PSN, "RQ_PSN" },
	{ IBV_QP_MAX_QP_RD_ATOMIC, "MAX_QP_RD_ATOMIC" },
	{ IBV_QP_ALT_PATH, "ALT_PATH" },
	{ IBV_QP_MIN_RNR_TIMER, "MIN_RNR_TIMER" },
	{ IBV_QP_SQ_PSN, "SQ_PSN" },
	{ IBV_QP_MAX_DEST_RD_ATOMIC, "MAX_DEST_RD_ATOMIC" },
	{ IBV_QP_PATH_MIG_STATE, "PATH_MIG_STATE" },
	{ IBV_QP_CAP, "CAP" },
	{ IBV_QP_DEST_QPN, "DEST_QPN" },
};

static const char *mask_name(unsigned bit)
{
	for (size_t i = 0; i < sizeof(mask_names) / sizeof(mask_names[0]); i++)
		if ((unsigned)mask_names[i].bit == bit)
			return mask_names[i].name;
	return "?";
}

/* Every attribute filled with a value that is valid on its own, so that a
 * failure can only come from the mask / the transition. */
static void full_attr(const struct vt_qp_cfg *c, enum ibv_qp_state to, uint32_t dest_qpn, struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = to;
	a->cur_qp_state = IBV_QPS_RESET;
	a->path_mtu = c->mtu;
	a->qkey = c->qkey;
	a->rq_psn = c->psn[1];
	a->sq_psn = c->psn[0];
	a->dest_qp_num = dest_qpn;
	a->qp_access_flags = c->access;
	a->ah_attr.is_global = 1;
	a->ah_attr.port_num = 1;
	a->ah_attr.grh.dgid = D.gid;
	a->ah_attr.grh.sgid_index = (uint8_t)D.gid_index;
	a->ah_attr.grh.hop_limit = 64;
	a->pkey_index = 0;
	a->port_num = 1;
	a->max_rd_atomic = c->max_rd_atomic;
	a->max_dest_rd_atomic = c->max_dest_rd_atomic;
	a->min_rnr_timer = c->min_rnr_timer;
	a->timeout = c->timeout;
	a->retry_cnt = c->retry_cnt;
	a->rnr_retry = c->rnr_retry;
	a->path_mig_state = IBV_MIG_MIGRATED;
}

static int req_mask(const struct vt_qp_cfg *c, enum ibv_qp_state to)
{
	struct ibv_qp_attr a;
	return vt_trans_attr(c, to, 1, 0, 0, &D.gid, D.gid_index, &a);
}

static bool check_state(struct ibv_qp *qp, enum ibv_qp_state want, const char *what)
{
	int s = vt_qp_state(qp);
	return CHECK(s == (int)want, "%s: ibv_query_qp state is %s\t(got %s)", what, vt_state_str(want),
		     vt_state_str(s));
}

/* Drives qp from RESET to `to` along the normal path (RTS -> SQD too). */
static bool drive_to(struct ibv_qp *qp, const struct vt_qp_cfg *c, uint32_t dest_qpn, enum ibv_qp_state to)
{
	enum ibv_qp_state upto = to == IBV_QPS_SQD ? IBV_QPS_RTS : to;
	if (to == IBV_QPS_RESET)
		return true;
	if (vt_qp_connect(qp, c, upto, dest_qpn, c->psn[1], c->psn[0], &D.gid, D.gid_index))
		return false;
	if (to == IBV_QPS_SQD) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_SQD };
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
			return false;
	}
	return true;
}

/* In SQD the kernel's rxe refuses further modifies while the SQ drains. */
static void wait_sq_drained(struct ibv_qp *qp)
{
	uint64_t end = vt_now_ms() + 2000;
	do {
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;
		if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) || !a.sq_draining)
			return;
		vt_sleep_ms(1);
	} while (vt_now_ms() < end);
}

/* ------------------------------------------------------------------ */

static void test_queries(void)
{
	SECTION("device, port, GID and P_Key queries");
	struct ibv_device **list;
	int n = 0;
	bool have_rxe0 = false;

	list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "rxe0"))
			have_rxe0 = true;
	CHECK(have_rxe0, "a device named rxe0 is listed (%d devices, first %s)", n, D.name);
	if (list)
		ibv_free_device_list(list);

	struct ibv_device_attr *a = &D.attr;
	NOTE("device %s: max_qp %d max_qp_wr %d max_sge %d max_cqe %d max_mr_size 0x%" PRIx64
	     " max_qp_rd_atom %d max_srq_wr %d max_srq_sge %d atomic_cap %d vendor 0x%x",
	     D.name, a->max_qp, a->max_qp_wr, a->max_sge, a->max_cqe, a->max_mr_size, a->max_qp_rd_atom, a->max_srq_wr,
	     a->max_srq_sge, a->atomic_cap, a->vendor_id);
	CHECK(a->max_qp > 0 && a->max_qp_wr >= 1024 && a->max_sge >= 4 && a->max_cqe >= 4096 && a->max_mr_size > 0,
	      "ibv_query_device: sane limits (max_qp, max_qp_wr >= 1024, max_sge >= 4, max_cqe >= 4096)");
	CHECK_INT(a->phys_port_cnt, 1, "ibv_query_device: one physical port");
	CHECK(a->atomic_cap == IBV_ATOMIC_HCA || a->atomic_cap == IBV_ATOMIC_GLOB,
	      "ibv_query_device: atomics supported (atomic_cap %d)", a->atomic_cap);
	CHECK(a->max_srq > 0 && a->max_srq_wr > 0 && a->max_srq_sge > 0, "ibv_query_device: SRQs supported");
	CHECK(a->max_qp_rd_atom > 0 && a->max_qp_init_rd_atom > 0, "ibv_query_device: RDMA READ/atomic depth > 0");
	CHECK(a->node_guid != 0, "ibv_query_device: node GUID set");

	struct ibv_device_attr_ex ax;
	memset(&ax, 0, sizeof(ax));
	CHECK_RC(ibv_query_device_ex(D.ctx, NULL, &ax), 0, "ibv_query_device_ex");
	CHECK(ax.orig_attr.max_qp_wr == a->max_qp_wr && ax.orig_attr.max_cqe == a->max_cqe,
	      "ibv_query_device_ex: orig_attr matches ibv_query_device");

	struct ibv_port_attr *p = &D.port;
	CHECK(p->state == IBV_PORT_ACTIVE, "port 1 state PORT_ACTIVE\t(got %s)", ibv_port_state_str(p->state));
	CHECK_INT(p->link_layer, IBV_LINK_LAYER_ETHERNET, "port 1 link layer Ethernet");
	CHECK_INT(p->max_mtu, IBV_MTU_4096, "port 1 max_mtu 4096");
	CHECK_INT(p->active_mtu, IBV_MTU_4096, "port 1 active_mtu 4096 on loopback");
	CHECK(p->gid_tbl_len >= 1 && p->pkey_tbl_len >= 1, "port 1 gid_tbl_len %d >= 1, pkey_tbl_len %d >= 1",
	      p->gid_tbl_len, p->pkey_tbl_len);
	CHECK(p->max_msg_sz >= (1u << 30), "port 1 max_msg_sz >= 1 GiB\t(got %u)", p->max_msg_sz);

	struct ibv_port_attr p2;
	CHECK(ibv_query_port(D.ctx, 2, &p2) != 0, "ibv_query_port(port 2) fails: there is only port 1");

	static const uint8_t lo[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1 };
	char s[INET6_ADDRSTRLEN];
	inet_ntop(AF_INET6, D.gid.raw, s, sizeof(s));
	CHECK(!memcmp(D.gid.raw, lo, 16), "GID index 0 is ::ffff:127.0.0.1\t(got %s)", s);

	struct ibv_gid_entry ge;
	memset(&ge, 0, sizeof(ge));
	int rc = ibv_query_gid_ex(D.ctx, 1, 0, &ge, 0);
	CHECK_RC(rc, 0, "ibv_query_gid_ex(port 1, index 0)");
	if (!rc) {
		CHECK(!memcmp(ge.gid.raw, lo, 16) && ge.gid_index == 0 && ge.port_num == 1,
		      "ibv_query_gid_ex: gid, index and port match");
		CHECK_INT(ge.gid_type, IBV_GID_TYPE_ROCE_V2, "ibv_query_gid_ex: GID type RoCE v2");
	}

	__be16 pkey = 0;
	CHECK_RC(ibv_query_pkey(D.ctx, 1, 0, &pkey), 0, "ibv_query_pkey(port 1, index 0)");
	CHECK_INT(be16toh(pkey), 0xffff, "P_Key index 0 is the default 0xffff");
}

/* ------------------------------------------------------------------ */

/* ibv_create_qp_ex with IBV_QP_INIT_ATTR_CREATE_FLAGS: no flags is fine
 * (rdma-core's tests set the mask so on devices other than mlx4/mlx5), any
 * flag EOPNOTSUPP, as rxe answers. */
static void test_create_flags(void)
{
	SECTION("ibv_create_qp_ex: IBV_QP_INIT_ATTR_CREATE_FLAGS");
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	if (!CHECK(cq, "ibv_create_cq"))
		return;
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_RC,
		.send_cq = cq,
		.recv_cq = cq,
		.pd = D.pd,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(D.ctx, &ia);
	int e = errno;
	CHECK_PTR_ERR(qp, e, 0, "create flags 0");
	if (qp)
		ibv_destroy_qp(qp);
	ia.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
	errno = 0;
	qp = ibv_create_qp_ex(D.ctx, &ia);
	e = errno;
	CHECK_PTR_ERR(qp, e, EOPNOTSUPP, "create flags BLOCK_SELF_MCAST_LB");
	if (qp)
		ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
}

static void test_object_limits(void)
{
	SECTION("creation limits: CQ, MR, QP caps");
	struct ibv_cq *cq;
	int e;

	errno = 0;
	cq = ibv_create_cq(D.ctx, 0, NULL, NULL, 0);
	e = errno;
	CHECK_PTR_ERR(cq, e, EINVAL, "ibv_create_cq(cqe 0)");
	if (cq)
		ibv_destroy_cq(cq);
	errno = 0;
	cq = ibv_create_cq(D.ctx, D.attr.max_cqe + 1, NULL, NULL, 0);
	e = errno;
	CHECK_PTR_ERR(cq, e, EINVAL, "ibv_create_cq(cqe max_cqe+1 = %d)", D.attr.max_cqe + 1);
	if (cq)
		ibv_destroy_cq(cq);
	/* libfabric's verbs;ofi_rxm opens a CQ of rx + tx * universe size
	 * (128 + 128 * 256) entries and fails if the device refuses it */
	CHECK(D.attr.max_cqe >= 65536, "max_cqe %d holds libfabric verbs;ofi_rxm's 32896-entry CQ", D.attr.max_cqe);
	long rss0 = vt_rss_kib();
	cq = ibv_create_cq(D.ctx, D.attr.max_cqe, NULL, NULL, 0);
	e = errno;
	CHECK_PTR_ERR(cq, e, 0, "ibv_create_cq(cqe max_cqe = %d)", D.attr.max_cqe);
	if (cq) {
		long grown = vt_rss_kib() - rss0;
#ifdef SR_TSAN
		/* ThreadSanitizer writes the shadow of every allocation at once */
		NOTE("  RSS after creating a max_cqe CQ not checked under ThreadSanitizer (grew %ld KiB)", grown);
#else
		CHECK(grown < 4096,
		      "  a max_cqe CQ commits its memory as it fills, not at creation\t(RSS grew %ld KiB)", grown);
#endif
		CHECK(cq->cqe >= D.attr.max_cqe, "  cq->cqe %d", cq->cqe);
		ibv_destroy_cq(cq);
	}
	errno = 0;
	cq = ibv_create_cq(D.ctx, 32896, NULL, NULL, 0);
	e = errno;
	CHECK_PTR_ERR(cq, e, 0, "ibv_create_cq(cqe 32896, verbs;ofi_rxm's)");
	if (cq)
		ibv_destroy_cq(cq);
	errno = 0;
	cq = ibv_create_cq(D.ctx, 4, NULL, NULL, D.ctx->num_comp_vectors);
	e = errno;
	CHECK_PTR_ERR(cq, e, EINVAL, "ibv_create_cq(comp_vector = num_comp_vectors %d)", D.ctx->num_comp_vectors);
	if (cq)
		ibv_destroy_cq(cq);
	cq = ibv_create_cq(D.ctx, 1, NULL, NULL, 0);
	e = errno;
	CHECK_PTR_ERR(cq, e, 0, "ibv_create_cq(cqe 1)");
	if (cq) {
		CHECK(cq->cqe >= 1, "ibv_create_cq(cqe 1): cq->cqe %d >= 1", cq->cqe);
		CHECK_RC(ibv_destroy_cq(cq), 0, "ibv_destroy_cq");
	}
	cq = ibv_create_cq(D.ctx, D.attr.max_cqe, NULL, NULL, 0);
	e = errno;
	CHECK_PTR_ERR(cq, e, 0, "ibv_create_cq(cqe max_cqe = %d)", D.attr.max_cqe);
	if (cq)
		ibv_destroy_cq(cq);

	/* MR access flags */
	static uint8_t buf[8192] __attribute__((aligned(4096)));
	struct ibv_mr *mr;
	errno = 0;
	mr = ibv_reg_mr(D.pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE);
	e = errno;
	CHECK_PTR_ERR(mr, e, EINVAL, "ibv_reg_mr(REMOTE_WRITE without LOCAL_WRITE)");
	if (mr)
		ibv_dereg_mr(mr);
	errno = 0;
	mr = ibv_reg_mr(D.pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ);
	e = errno;
	CHECK_PTR_ERR(mr, e, EINVAL, "ibv_reg_mr(REMOTE_ATOMIC without LOCAL_WRITE)");
	if (mr)
		ibv_dereg_mr(mr);
	mr = ibv_reg_mr(D.pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_READ);
	e = errno;
	CHECK_PTR_ERR(mr, e, 0, "ibv_reg_mr(REMOTE_READ only)");
	if (mr)
		ibv_dereg_mr(mr);
	mr = ibv_reg_mr(D.pd, buf, sizeof(buf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC);
	e = errno;
	if (CHECK_PTR_ERR(mr, e, 0, "ibv_reg_mr(LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC)")) {
		CHECK(mr->addr == buf && mr->length == sizeof(buf) && mr->pd == D.pd && mr->context == D.ctx,
		      "ibv_reg_mr: addr, length, pd and context filled in");
		struct ibv_mr *mr2 = ibv_reg_mr(D.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
		if (CHECK(mr2, "ibv_reg_mr of the same range twice"))
			CHECK(mr2->lkey != mr->lkey && mr2->rkey != mr->rkey, "two registrations get distinct keys");
		if (mr2)
			ibv_dereg_mr(mr2);
		CHECK_RC(ibv_dereg_mr(mr), 0, "ibv_dereg_mr");
	}

	/* QP caps over the device limits */
	struct ibv_cq *scq = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	if (!CHECK(scq, "create a CQ for the QP-cap checks"))
		return;
	struct {
		const char *what;
		uint32_t sw, rw, ss, rs, inl;
	} bad[] = {
		{ "max_send_wr = max_qp_wr + 1", (uint32_t)D.attr.max_qp_wr + 1, 4, 1, 1, 0 },
		{ "max_recv_wr = max_qp_wr + 1", 4, (uint32_t)D.attr.max_qp_wr + 1, 1, 1, 0 },
		{ "max_send_sge = max_sge + 1", 4, 4, (uint32_t)D.attr.max_sge + 1, 1, 0 },
		{ "max_recv_sge = max_sge + 1", 4, 4, 1, (uint32_t)D.attr.max_sge + 1, 0 },
		{ "max_inline_data = 1 MiB", 4, 4, 1, 1, 1u << 20 },
		{ "max_inline_data = 513 (rxe's limit is 512)", 4, 4, 1, 1, 513 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ibv_qp_init_attr ia;
		memset(&ia, 0, sizeof(ia));
		ia.qp_type = IBV_QPT_RC;
		ia.send_cq = ia.recv_cq = scq;
		ia.cap.max_send_wr = bad[i].sw;
		ia.cap.max_recv_wr = bad[i].rw;
		ia.cap.max_send_sge = bad[i].ss;
		ia.cap.max_recv_sge = bad[i].rs;
		ia.cap.max_inline_data = bad[i].inl;
		errno = 0;
		struct ibv_qp *qp = ibv_create_qp(D.pd, &ia);
		e = errno;
		CHECK_PTR_ERR(qp, e, EINVAL, "create RC QP with %s", bad[i].what);
		if (qp)
			ibv_destroy_qp(qp);
	}
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = ia.recv_cq = scq;
	ia.cap.max_send_wr = 10;
	ia.cap.max_recv_wr = 20;
	ia.cap.max_send_sge = 3;
	ia.cap.max_recv_sge = 2;
	ia.cap.max_inline_data = 32;
	ia.sq_sig_all = 1;
	struct ibv_qp *qp = ibv_create_qp(D.pd, &ia);
	e = errno;
	if (CHECK_PTR_ERR(qp, e, 0, "create RC QP with modest caps")) {
		CHECK(ia.cap.max_send_wr >= 10 && ia.cap.max_recv_wr >= 20 && ia.cap.max_send_sge >= 3 &&
			      ia.cap.max_recv_sge >= 2 && ia.cap.max_inline_data >= 32,
		      "returned caps >= requested (send_wr %u recv_wr %u send_sge %u recv_sge %u inline %u)",
		      ia.cap.max_send_wr, ia.cap.max_recv_wr, ia.cap.max_send_sge, ia.cap.max_recv_sge,
		      ia.cap.max_inline_data);
		CHECK(qp->qp_num > 1 && qp->qp_num <= 0xffffff, "QPN %u is a 24-bit number above QP1", qp->qp_num);
		CHECK(qp->state == IBV_QPS_RESET && qp->qp_type == IBV_QPT_RC && qp->pd == D.pd && qp->send_cq == scq &&
			      qp->context == D.ctx,
		      "new QP: state RESET, type, pd, cq, context set in struct ibv_qp");
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qi;
		memset(&qi, 0, sizeof(qi));
		CHECK_RC(ibv_query_qp(qp, &qa, IBV_QP_STATE | IBV_QP_CAP, &qi), 0, "ibv_query_qp on a new QP");
		CHECK_INT(qa.qp_state, IBV_QPS_RESET, "ibv_query_qp: new QP is in RESET");
		CHECK(qi.qp_type == IBV_QPT_RC && qi.send_cq == scq && qi.recv_cq == scq && qi.srq == NULL &&
			      qi.sq_sig_all == 1,
		      "ibv_query_qp init_attr: type, CQs, srq, sq_sig_all as created");
		CHECK(qa.cap.max_send_wr == ia.cap.max_send_wr && qa.cap.max_recv_wr == ia.cap.max_recv_wr &&
			      qa.cap.max_send_sge == ia.cap.max_send_sge &&
			      qa.cap.max_recv_sge == ia.cap.max_recv_sge &&
			      qa.cap.max_inline_data == ia.cap.max_inline_data,
		      "ibv_query_qp caps equal the caps create returned");
		ibv_destroy_qp(qp);
	}
	struct ibv_qp *qps[8];
	uint32_t seen[8];
	bool distinct = true;
	int made = 0;
	for (int i = 0; i < 8; i++) {
		memset(&ia, 0, sizeof(ia));
		ia.qp_type = i & 1 ? IBV_QPT_UD : IBV_QPT_RC;
		ia.send_cq = ia.recv_cq = scq;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		qps[i] = ibv_create_qp(D.pd, &ia);
		if (!qps[i])
			break;
		seen[i] = qps[i]->qp_num;
		for (int j = 0; j < i; j++)
			distinct &= seen[j] != seen[i];
		made++;
	}
	CHECK(made == 8 && distinct, "8 QPs get 8 distinct QPNs");
	for (int i = 0; i < made; i++)
		ibv_destroy_qp(qps[i]);
	ibv_destroy_cq(scq);
}

/* ------------------------------------------------------------------ */

/* Try `mask` for the transition of qp (now in `from`) to a->qp_state. */
static void expect_modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, int want, enum ibv_qp_state from,
			  const char *what)
{
	int rc = ibv_modify_qp(qp, a, mask);
	CHECK_RC(rc, want, "%s", what);
	if (want && rc)
		check_state(qp, from, "  ...and the failed modify left the QP");
}

/* Each required attribute of the transition `from` -> `to` left out -> EINVAL. */
static void check_required(struct ibv_qp *qp, const struct vt_qp_cfg *c, uint32_t dest, enum ibv_qp_state from,
			   enum ibv_qp_state to)
{
	struct ibv_qp_attr a;
	int req = req_mask(c, to) & ~IBV_QP_STATE;
	char what[160];
	for (unsigned bit = 1; bit && bit <= (1u << 30); bit <<= 1) {
		if (!(req & bit))
			continue;
		full_attr(c, to, dest, &a);
		snprintf(what, sizeof(what), "%s %s->%s without required %s", vt_qpt_str(c->type), vt_state_str(from),
			 vt_state_str(to), mask_name(bit));
		expect_modify(qp, &a, (req | IBV_QP_STATE) & ~bit, EINVAL, from, what);
	}
}

/* Each of `extra` added to the required mask of from -> to -> EINVAL. */
static void check_not_allowed(struct ibv_qp *qp, const struct vt_qp_cfg *c, uint32_t dest, enum ibv_qp_state from,
			      enum ibv_qp_state to, int extra)
{
	struct ibv_qp_attr a;
	int req = from == to ? IBV_QP_STATE : req_mask(c, to);
	char what[160];
	for (unsigned bit = 1; bit && bit <= (1u << 30); bit <<= 1) {
		if (!(extra & bit))
			continue;
		full_attr(c, to, dest, &a);
		snprintf(what, sizeof(what), "%s %s->%s with %s (not allowed in this transition)", vt_qpt_str(c->type),
			 vt_state_str(from), vt_state_str(to), mask_name(bit));
		expect_modify(qp, &a, req | bit, EINVAL, from, what);
	}
}

/* Invalid target states from `from`, each tried with that target's usual attributes. */
static void check_invalid_targets(struct ibv_qp *qp, const struct vt_qp_cfg *c, uint32_t dest, enum ibv_qp_state from,
				  const enum ibv_qp_state *to, int n)
{
	struct ibv_qp_attr a;
	char what[160];
	for (int i = 0; i < n; i++) {
		full_attr(c, to[i], dest, &a);
		int mask = to[i] == IBV_QPS_SQD ? IBV_QP_STATE : req_mask(c, to[i]);
		snprintf(what, sizeof(what), "%s %s->%s (invalid transition)", vt_qpt_str(c->type), vt_state_str(from),
			 vt_state_str(to[i]));
		expect_modify(qp, &a, mask, EINVAL, from, what);
	}
}

static void test_transitions(enum ibv_qp_type t)
{
	SECTION("%s: RESET->INIT->RTR->RTS, required and forbidden attributes", vt_qpt_str(t));
	struct vt_qp_cfg c;
	struct vt_pair p;
	vt_cfg_default(&c, t);
	c.mtu = IBV_MTU_1024;
	c.max_rd_atomic = 4;
	c.max_dest_rd_atomic = 4;
	c.timeout = 13;
	c.retry_cnt = 5;
	c.rnr_retry = 6;
	c.min_rnr_timer = 9;
	c.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (!vt_pair_create(&D, &c, &p))
		return;
	struct ibv_qp *qp = p.qp[0];
	uint32_t dest = p.qp[1]->qp_num;
	struct ibv_qp_attr a, q;
	struct ibv_qp_init_attr qi;
	const char *T = vt_qpt_str(t);
	char what[160];
	bool rc = t == IBV_QPT_RC, ud = t == IBV_QPT_UD;

	/* ---- RESET ---- */
	check_state(qp, IBV_QPS_RESET, "new QP");
	{
		enum ibv_qp_state inv[] = { IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD };
		check_invalid_targets(qp, &c, dest, IBV_QPS_RESET, inv, 3);
	}
	full_attr(&c, IBV_QPS_RESET, dest, &a);
	snprintf(what, sizeof(what), "%s RESET->RESET", T);
	expect_modify(qp, &a, IBV_QP_STATE, 0, IBV_QPS_RESET, what);
	check_required(qp, &c, dest, IBV_QPS_RESET, IBV_QPS_INIT);
	check_not_allowed(qp, &c, dest, IBV_QPS_RESET, IBV_QPS_INIT,
			  (ud ? IBV_QP_ACCESS_FLAGS : IBV_QP_QKEY) | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_SQ_PSN | IBV_QP_RQ_PSN | IBV_QP_TIMEOUT | IBV_QP_MIN_RNR_TIMER);
	full_attr(&c, IBV_QPS_INIT, dest, &a);
	a.cur_qp_state = IBV_QPS_RESET;
	snprintf(what, sizeof(what), "%s RESET->INIT with CUR_STATE (only allowed from RTR/RTS/SQD/SQE)", T);
	expect_modify(qp, &a, req_mask(&c, IBV_QPS_INIT) | IBV_QP_CUR_STATE, EINVAL, IBV_QPS_RESET, what);
	full_attr(&c, IBV_QPS_INIT, dest, &a);
	a.port_num = 2;
	snprintf(what, sizeof(what), "%s RESET->INIT with port_num 2 (no such port)", T);
	expect_modify(qp, &a, req_mask(&c, IBV_QPS_INIT), EINVAL, IBV_QPS_RESET, what);

	full_attr(&c, IBV_QPS_INIT, dest, &a);
	snprintf(what, sizeof(what), "%s RESET->INIT with exactly the required attributes", T);
	expect_modify(qp, &a, req_mask(&c, IBV_QPS_INIT), 0, IBV_QPS_RESET, what);
	check_state(qp, IBV_QPS_INIT, "after RESET->INIT");
	CHECK(qp->state == IBV_QPS_INIT, "struct ibv_qp .state follows (INIT, got %s)", vt_state_str(qp->state));
	memset(&q, 0, sizeof(q));
	ibv_query_qp(qp, &q, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_QKEY, &qi);
	if (ud)
		CHECK(q.port_num == 1 && q.pkey_index == 0 && q.qkey == c.qkey,
		      "%s INIT: query returns port 1, pkey_index 0, qkey 0x%x\t(got %u, %u, 0x%x)", T, c.qkey,
		      q.port_num, q.pkey_index, q.qkey);
	else
		CHECK(q.port_num == 1 && q.pkey_index == 0 && q.qp_access_flags == c.access,
		      "%s INIT: query returns port 1, pkey_index 0, access 0x%x\t(got %u, %u, 0x%x)", T, c.access,
		      q.port_num, q.pkey_index, q.qp_access_flags);

	/* ---- INIT ---- */
	{
		enum ibv_qp_state inv[] = { IBV_QPS_RTS, IBV_QPS_SQD };
		check_invalid_targets(qp, &c, dest, IBV_QPS_INIT, inv, 2);
	}
	full_attr(&c, IBV_QPS_INIT, dest, &a);
	if (ud)
		a.qkey = 0x22222222;
	else
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				    IBV_ACCESS_REMOTE_ATOMIC;
	snprintf(what, sizeof(what), "%s INIT->INIT changing %s", T, ud ? "QKEY" : "ACCESS_FLAGS");
	expect_modify(qp, &a, IBV_QP_STATE | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS), 0, IBV_QPS_INIT, what);
	memset(&q, 0, sizeof(q));
	ibv_query_qp(qp, &q, IBV_QP_ACCESS_FLAGS | IBV_QP_QKEY, &qi);
	if (ud)
		CHECK_INT(q.qkey, 0x22222222, "%s INIT->INIT: query returns the new qkey", T);
	else
		CHECK_INT(q.qp_access_flags, a.qp_access_flags, "%s INIT->INIT: query returns the new access flags", T);
	full_attr(&c, IBV_QPS_INIT, dest, &a);
	expect_modify(qp, &a, IBV_QP_STATE | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS), 0, IBV_QPS_INIT,
		      "  ...and back");
	if (!ud)
		check_required(qp, &c, dest, IBV_QPS_INIT, IBV_QPS_RTR);
	check_not_allowed(qp, &c, dest, IBV_QPS_INIT, IBV_QPS_RTR,
			  ud ? (IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_SQ_PSN |
				IBV_QP_ACCESS_FLAGS | IBV_QP_PORT) :
			  rc ? (IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_QKEY | IBV_QP_PORT) :
			       (IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER |
				IBV_QP_QKEY | IBV_QP_PORT));
	full_attr(&c, IBV_QPS_RTR, dest, &a);
	a.cur_qp_state = IBV_QPS_INIT;
	snprintf(what, sizeof(what), "%s INIT->RTR with CUR_STATE (not allowed from INIT)", T);
	expect_modify(qp, &a, req_mask(&c, IBV_QPS_RTR) | IBV_QP_CUR_STATE, EINVAL, IBV_QPS_INIT, what);
	if (!ud) {
		full_attr(&c, IBV_QPS_RTR, dest, &a);
		a.ah_attr.is_global = 0;
		snprintf(what, sizeof(what), "%s INIT->RTR with an AV without GRH (RoCE needs is_global)", T);
		expect_modify(qp, &a, req_mask(&c, IBV_QPS_RTR), EINVAL, IBV_QPS_INIT, what);
	}

	full_attr(&c, IBV_QPS_RTR, dest, &a);
	snprintf(what, sizeof(what), "%s INIT->RTR with exactly the required attributes", T);
	expect_modify(qp, &a, req_mask(&c, IBV_QPS_RTR), 0, IBV_QPS_INIT, what);
	check_state(qp, IBV_QPS_RTR, "after INIT->RTR");
	if (!ud) {
		memset(&q, 0, sizeof(q));
		ibv_query_qp(qp, &q,
			     IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER,
			     &qi);
		CHECK_INT(q.dest_qp_num, dest, "%s RTR: query dest_qp_num", T);
		CHECK_INT(q.rq_psn, c.psn[1], "%s RTR: query rq_psn", T);
		CHECK_INT(q.path_mtu, IBV_MTU_1024, "%s RTR: query path_mtu", T);
		CHECK(q.ah_attr.is_global == 1 && !memcmp(q.ah_attr.grh.dgid.raw, D.gid.raw, 16) &&
			      q.ah_attr.grh.sgid_index == D.gid_index && q.ah_attr.port_num == 1,
		      "%s RTR: query ah_attr: is_global, dgid, sgid_index, port\t(got global %d, sgid %d, port %d)", T,
		      q.ah_attr.is_global, q.ah_attr.grh.sgid_index, q.ah_attr.port_num);
		if (rc) {
			CHECK_INT(q.max_dest_rd_atomic, 4, "RC RTR: query max_dest_rd_atomic");
			CHECK_INT(q.min_rnr_timer, 9, "RC RTR: query min_rnr_timer");
		}
	}

	/* ---- RTR ---- */
	{
		enum ibv_qp_state inv[] = { IBV_QPS_RTR, IBV_QPS_INIT, IBV_QPS_SQD };
		check_invalid_targets(qp, &c, dest, IBV_QPS_RTR, inv, 3);
	}
	check_required(qp, &c, dest, IBV_QPS_RTR, IBV_QPS_RTS);
	check_not_allowed(qp, &c, dest, IBV_QPS_RTR, IBV_QPS_RTS,
			  ud ? (IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_DEST_QPN | IBV_QP_TIMEOUT |
				IBV_QP_AV) :
			  rc ? (IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) :
			       (IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
				IBV_QP_MIN_RNR_TIMER | IBV_QP_DEST_QPN | IBV_QP_PATH_MTU | IBV_QP_QKEY));

	/* IBV_QP_CUR_STATE is an optional attribute of RTR->RTS for every
	 * transport (IBTA 11.2.4.2; the kernel's ib_modify_qp_is_ok accepts it
	 * when the current state is RTR, RTS, SQD or SQE). */
	full_attr(&c, IBV_QPS_RTS, dest, &a);
	a.cur_qp_state = IBV_QPS_RTR;
	int rcs = ibv_modify_qp(qp, &a, req_mask(&c, IBV_QPS_RTS) | IBV_QP_CUR_STATE);
	KNOWN_BUG(rcs == 0,
		  "%s RTR->RTS with the optional IBV_QP_CUR_STATE (cur_qp_state = RTR) is accepted, as the kernel's "
		  "ib_modify_qp_is_ok() accepts CUR_STATE when the current state is RTR\t(got %d %s; softrdma's "
		  "modify_is_ok() only allows it from RTS/SQD/SQE)",
		  T, rcs, rcs ? strerror(rcs) : "");
	if (rcs) {
		full_attr(&c, IBV_QPS_RTS, dest, &a);
		snprintf(what, sizeof(what), "%s RTR->RTS with exactly the required attributes", T);
		expect_modify(qp, &a, req_mask(&c, IBV_QPS_RTS), 0, IBV_QPS_RTR, what);
	}
	check_state(qp, IBV_QPS_RTS, "after RTR->RTS");
	memset(&q, 0, sizeof(q));
	ibv_query_qp(qp, &q,
		     IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
		     &qi);
	CHECK_INT(q.sq_psn, c.psn[0], "%s RTS: query sq_psn", T);
	if (rc) {
		CHECK(q.timeout == 13 && q.retry_cnt == 5 && q.rnr_retry == 6 && q.max_rd_atomic == 4,
		      "RC RTS: query timeout 13, retry_cnt 5, rnr_retry 6, max_rd_atomic 4\t(got %u %u %u %u)",
		      q.timeout, q.retry_cnt, q.rnr_retry, q.max_rd_atomic);
	}

	/* ---- RTS ---- */
	{
		enum ibv_qp_state inv[] = { IBV_QPS_INIT, IBV_QPS_RTR };
		check_invalid_targets(qp, &c, dest, IBV_QPS_RTS, inv, 2);
	}
	full_attr(&c, IBV_QPS_RTS, dest, &a);
	a.cur_qp_state = IBV_QPS_RTS;
	a.qkey = 0x33333333;
	a.min_rnr_timer = 3;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	int opt = ud ? IBV_QP_QKEY : rc ? IBV_QP_MIN_RNR_TIMER | IBV_QP_ACCESS_FLAGS : IBV_QP_ACCESS_FLAGS;
	snprintf(what, sizeof(what), "%s RTS->RTS with CUR_STATE and optional %s", T,
		 ud ? "QKEY" :
		 rc ? "MIN_RNR_TIMER|ACCESS_FLAGS" :
		      "ACCESS_FLAGS");
	expect_modify(qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE | opt, 0, IBV_QPS_RTS, what);
	memset(&q, 0, sizeof(q));
	ibv_query_qp(qp, &q, IBV_QP_QKEY | IBV_QP_MIN_RNR_TIMER | IBV_QP_ACCESS_FLAGS, &qi);
	if (ud)
		CHECK_INT(q.qkey, 0x33333333, "UD RTS->RTS: query returns the new qkey");
	else
		CHECK(q.qp_access_flags == a.qp_access_flags && (!rc || q.min_rnr_timer == 3),
		      "%s RTS->RTS: query returns the new access flags%s", T, rc ? " and min_rnr_timer" : "");
	check_not_allowed(qp, &c, dest, IBV_QPS_RTS, IBV_QPS_RTS,
			  IBV_QP_SQ_PSN | IBV_QP_RQ_PSN | IBV_QP_DEST_QPN | IBV_QP_PATH_MTU | IBV_QP_PKEY_INDEX |
				  IBV_QP_PORT | (ud ? IBV_QP_ACCESS_FLAGS : IBV_QP_QKEY) |
				  (rc ? IBV_QP_TIMEOUT | IBV_QP_AV : IBV_QP_MIN_RNR_TIMER));
	check_state(qp, IBV_QPS_RTS, "after the rejected RTS->RTS modifies");

	/* ---- SQD ---- */
	full_attr(&c, IBV_QPS_SQD, dest, &a);
	snprintf(what, sizeof(what), "%s RTS->SQD", T);
	expect_modify(qp, &a, IBV_QP_STATE, 0, IBV_QPS_RTS, what);
	check_state(qp, IBV_QPS_SQD, "after RTS->SQD");
	wait_sq_drained(qp);
	full_attr(&c, IBV_QPS_SQD, dest, &a);
	a.timeout = 15;
	a.qkey = 0x44444444;
	snprintf(what, sizeof(what), "%s SQD->SQD with optional %s", T, ud ? "QKEY" : rc ? "TIMEOUT" : "ACCESS_FLAGS");
	expect_modify(qp, &a,
		      IBV_QP_STATE | (ud ? IBV_QP_QKEY :
				      rc ? IBV_QP_TIMEOUT :
					   IBV_QP_ACCESS_FLAGS),
		      0, IBV_QPS_SQD, what);
	if (rc) {
		full_attr(&c, IBV_QPS_SQD, dest, &a);
		int r = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT);
		KNOWN_BUG(
			r == 0,
			"RC SQD->SQD with the optional IBV_QP_PORT (port 1) is accepted, as in the kernel's qp_state_table "
			"(got %d %s; softrdma's table lacks PORT in SQD->SQD for RC)",
			r, r ? strerror(r) : "");
	}
	check_not_allowed(qp, &c, dest, IBV_QPS_SQD, IBV_QPS_SQD, IBV_QP_SQ_PSN | IBV_QP_RQ_PSN | IBV_QP_DEST_QPN);
	full_attr(&c, IBV_QPS_RTS, dest, &a);
	snprintf(what, sizeof(what), "%s SQD->RTS", T);
	expect_modify(qp, &a, IBV_QP_STATE, 0, IBV_QPS_SQD, what);
	check_state(qp, IBV_QPS_RTS, "after SQD->RTS");

	/* ---- ERR ---- */
	full_attr(&c, IBV_QPS_ERR, dest, &a);
	expect_modify(qp, &a, IBV_QP_STATE, 0, IBV_QPS_RTS, "RTS->ERR");
	check_state(qp, IBV_QPS_ERR, "after RTS->ERR");
	{
		enum ibv_qp_state inv[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD };
		check_invalid_targets(qp, &c, dest, IBV_QPS_ERR, inv, 4);
	}
	full_attr(&c, IBV_QPS_ERR, dest, &a);
	expect_modify(qp, &a, IBV_QP_STATE, 0, IBV_QPS_ERR, "ERR->ERR");
	full_attr(&c, IBV_QPS_RESET, dest, &a);
	expect_modify(qp, &a, IBV_QP_STATE, 0, IBV_QPS_ERR, "ERR->RESET");
	check_state(qp, IBV_QPS_RESET, "after ERR->RESET");
	vt_pair_destroy(&p);
}

/* To ERR and to RESET from every state, over and over on the same QP. */
static void test_err_reset_everywhere(enum ibv_qp_type t)
{
	SECTION("%s: to ERR and back to RESET from every state", vt_qpt_str(t));
	struct vt_qp_cfg c;
	struct vt_pair p;
	vt_cfg_default(&c, t);
	if (!vt_pair_create(&D, &c, &p))
		return;
	struct ibv_qp *qp = p.qp[0];
	uint32_t dest = p.qp[1]->qp_num;
	const enum ibv_qp_state states[] = { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD };
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
		for (int via_err = 1; via_err >= 0; via_err--) {
			enum ibv_qp_state s = states[i];
			struct ibv_qp_attr a;
			char what[160];
			if (!CHECK(drive_to(qp, &c, dest, s), "%s: drive a QP from RESET to %s", vt_qpt_str(t),
				   vt_state_str(s)))
				break;
			check_state(qp, s, "  reached");
			if (s == IBV_QPS_SQD)
				wait_sq_drained(qp);
			memset(&a, 0, sizeof(a));
			if (via_err) {
				a.qp_state = IBV_QPS_ERR;
				snprintf(what, sizeof(what), "%s %s->ERR", vt_qpt_str(t), vt_state_str(s));
				CHECK_RC(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0, "%s", what);
				check_state(qp, IBV_QPS_ERR, what);
			}
			a.qp_state = IBV_QPS_RESET;
			snprintf(what, sizeof(what), "%s %s->RESET", vt_qpt_str(t), via_err ? "ERR" : vt_state_str(s));
			CHECK_RC(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0, "%s", what);
			check_state(qp, IBV_QPS_RESET, what);
		}
	}
	vt_pair_destroy(&p);
}

/* A pair taken to ERR and RESET is connected again and carries data. */
static void test_reuse_after_reset(void)
{
	SECTION("RC: a QP pair reset and connected again carries data");
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf src, dst;
	vt_cfg_default(&c, IBV_QPT_RC);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&src, D.pd, 5000, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&dst, D.pd, 5000, 4096, IBV_ACCESS_LOCAL_WRITE);
	for (int round = 0; round < 3; round++) {
		vt_fill(src.p, 5000, 100 + round);
		memset(dst.p, 0, 5000);
		CHECK_RC(vt_post_recv(p.qp[1], 7, dst.p, 5000, dst.mr->lkey), 0, "round %d: post_recv", round);
		CHECK_RC(vt_post_send(p.qp[0], 8, IBV_WR_SEND, src.p, 5000, src.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0),
			 0, "round %d: post_send 5000 B", round);
		struct ibv_wc wc;
		EXPECT_WC(p.scq[0], 8, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "round %d: send", round);
		if (EXPECT_WC(p.rcq[1], 7, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "round %d: receive", round))
			CHECK_INT(wc.byte_len, 5000, "round %d: byte_len", round);
		CHECK_DATA(dst.p, 5000, 100 + round, "round %d: received data", round);
		/* both to ERR (and the second round straight to RESET), then RESET and connect with new PSNs */
		for (int i = 0; i < 2; i++) {
			struct ibv_qp_attr a = { .qp_state = round == 1 ? IBV_QPS_RESET : IBV_QPS_ERR };
			CHECK_RC(ibv_modify_qp(p.qp[i], &a, IBV_QP_STATE), 0, "round %d: QP %d -> %s", round, i,
				 vt_state_str(a.qp_state));
			a.qp_state = IBV_QPS_RESET;
			CHECK_RC(ibv_modify_qp(p.qp[i], &a, IBV_QP_STATE), 0, "round %d: QP %d -> RESET", round, i);
		}
		CHECK_CQ_EMPTY(p.rcq[1], 10, "round %d: nothing left on the receive CQ", round);
		c.psn[0] = (c.psn[0] + 0x123457) & 0xffffff;
		c.psn[1] = (c.psn[1] + 0x54321) & 0xffffff;
		p.cfg = c;
		if (!vt_pair_connect(&p))
			break;
	}
	vt_buf_free(&src);
	vt_buf_free(&dst);
	vt_pair_destroy(&p);
}

/* ------------------------------------------------------------------ */

static void test_posting(void)
{
	SECTION("posting: state checks, SGE limits, overflow, inline, misaligned atomics");
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf b, r;
	vt_cfg_default(&c, IBV_QPT_RC);
	c.max_send_wr = 16;
	c.max_recv_wr = 16;
	c.max_send_sge = 2;
	c.max_recv_sge = 2;
	c.max_inline = 64;
	if (!vt_pair_create(&D, &c, &p))
		return;
	vt_buf_alloc(&b, D.pd, 65536, 4096,
		     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_REMOTE_ATOMIC);
	vt_buf_alloc(&r, D.pd, 65536, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_qp *qp = p.qp[0];
	struct ibv_sge sge = { .addr = (uintptr_t)b.p, .length = 16, .lkey = b.mr->lkey };
	struct ibv_send_wr wr, *bad;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_wc wc;

	/* post_send before RTS */
	const enum ibv_qp_state pre[] = { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR };
	for (int i = 0; i < 3; i++) {
		if (pre[i] != IBV_QPS_RESET)
			vt_qp_connect(qp, &c, pre[i], p.qp[1]->qp_num, c.psn[1], c.psn[0], &D.gid, D.gid_index);
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 1;
		wr.opcode = IBV_WR_SEND;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		bad = (void *)1;
		int rc = ibv_post_send(qp, &wr, &bad);
		CHECK_RC(rc, EINVAL, "post_send in %s", vt_state_str(pre[i]));
		/* rdma-core's rxe provider queues the WQE and learns of the
		 * state from the doorbell, leaving bad_wr NULL */
		CHECK(bad == &wr || bad == NULL, "post_send in %s: bad_wr is the WR\t(got %p, wr %p)",
		      vt_state_str(pre[i]), (void *)bad, (void *)&wr);
		if (bad == NULL)
			NOTE("bad_wr left NULL (as rdma-core's rxe provider does); softrdma sets it to the WR");
		if (pre[i] == IBV_QPS_RESET) {
			memset(&rwr, 0, sizeof(rwr));
			rwr.wr_id = 2;
			rwr.sg_list = &sge;
			rwr.num_sge = 1;
			CHECK_RC(ibv_post_recv(qp, &rwr, &rbad), EINVAL, "post_recv in RESET");
			struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
			ibv_modify_qp(qp, &a, IBV_QP_STATE);
		}
	}
	/* back to RESET (drops whatever rxe may have queued), then connect both */
	struct ibv_qp_attr ra = { .qp_state = IBV_QPS_RESET };
	ibv_modify_qp(qp, &ra, IBV_QP_STATE);
	if (!vt_pair_connect(&p))
		goto out;

	/* receive queue: post_recv in INIT is legal (checked on the fresh QP below); SGE limit; overflow */
	memset(&rwr, 0, sizeof(rwr));
	struct ibv_sge sges[8];
	for (int i = 0; i < 8; i++) {
		sges[i].addr = (uintptr_t)r.p + (uint64_t)i * 64;
		sges[i].length = 64;
		sges[i].lkey = r.mr->lkey;
	}
	rwr.wr_id = 3;
	rwr.sg_list = sges;
	rwr.num_sge = (int)p.cap[1].max_recv_sge + 1;
	rbad = NULL;
	CHECK_RC(ibv_post_recv(p.qp[1], &rwr, &rbad), EINVAL, "post_recv with num_sge = max_recv_sge + 1 = %d",
		 rwr.num_sge);
	CHECK(rbad == &rwr, "  ...bad_wr points at it");

	/* send: num_sge over the limit, alone and in the middle of a chain */
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.sg_list = sges;
	wr.num_sge = (int)p.cap[0].max_send_sge + 1;
	wr.wr.rdma.remote_addr = (uintptr_t)r.p;
	wr.wr.rdma.rkey = r.mr->rkey;
	bad = NULL;
	CHECK_RC(ibv_post_send(qp, &wr, &bad), EINVAL, "post_send with num_sge = max_send_sge + 1 = %d", wr.num_sge);
	CHECK(bad == &wr, "  ...bad_wr points at it");
	struct ibv_send_wr chain[3];
	for (int i = 0; i < 3; i++) {
		memset(&chain[i], 0, sizeof(chain[i]));
		chain[i].wr_id = 100 + (uint64_t)i;
		chain[i].opcode = IBV_WR_RDMA_WRITE;
		chain[i].send_flags = IBV_SEND_SIGNALED;
		chain[i].sg_list = &sges[i];
		chain[i].num_sge = 1;
		chain[i].wr.rdma.remote_addr = (uintptr_t)r.p + 4096 + (uint64_t)i * 64;
		chain[i].wr.rdma.rkey = r.mr->rkey;
		chain[i].next = i < 2 ? &chain[i + 1] : NULL;
	}
	chain[1].num_sge = (int)p.cap[0].max_send_sge + 1;
	bad = NULL;
	CHECK_RC(ibv_post_send(qp, chain, &bad), EINVAL, "post_send chain [ok, too many SGEs, ok]");
	CHECK(bad == &chain[1], "  ...bad_wr points at the second WR\t(got %s)",
	      bad == &chain[0] ? "the first" :
	      bad == &chain[2] ? "the third" :
	      bad	       ? "?" :
				 "NULL");
	EXPECT_WC(p.scq[0], 100, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL, "  ...the WR before the bad one executes");
	CHECK_CQ_EMPTY(p.scq[0], 100, "  ...the WR after the bad one is not posted");

	/* send queue overflow: a chain of max_send_wr + 1 */
	uint32_t n = p.cap[0].max_send_wr;
	struct ibv_send_wr *many = calloc(n + 1, sizeof(*many));
	for (uint32_t i = 0; i <= n; i++) {
		many[i].wr_id = 1000 + i;
		many[i].opcode = IBV_WR_RDMA_WRITE;
		many[i].send_flags = i == n - 1 ? IBV_SEND_SIGNALED : 0;
		many[i].sg_list = sges;
		many[i].num_sge = 0; /* zero-length writes */
		many[i].wr.rdma.remote_addr = (uintptr_t)r.p;
		many[i].wr.rdma.rkey = r.mr->rkey;
		many[i].next = i < n ? &many[i + 1] : NULL;
	}
	bad = NULL;
	CHECK_RC(ibv_post_send(qp, many, &bad), ENOMEM, "post_send chain of max_send_wr + 1 = %u WRs (SQ overflow)",
		 n + 1);
	CHECK(bad == &many[n], "  ...bad_wr is the first that did not fit\t(got index %ld)",
	      bad ? (long)(bad - many) : -1L);
	EXPECT_WC(p.scq[0], 1000 + n - 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL,
		  "  ...the %u that fit execute (last one signaled)", n);
	CHECK_CQ_EMPTY(p.scq[0], 50, "  ...and only the signaled one completes");
	free(many);

	/* receive queue overflow on a fresh QP in INIT (nothing consumes) */
	{
		struct vt_pair p2;
		struct vt_qp_cfg c2 = c;
		c2.max_recv_wr = 8;
		if (vt_pair_create(&D, &c2, &p2)) {
			vt_qp_connect(p2.qp[0], &c2, IBV_QPS_INIT, 0, 0, 0, &D.gid, D.gid_index);
			uint32_t m = p2.cap[0].max_recv_wr;
			struct ibv_recv_wr *rw = calloc(m + 1, sizeof(*rw));
			for (uint32_t i = 0; i <= m; i++) {
				rw[i].wr_id = i;
				rw[i].sg_list = &sges[0];
				rw[i].num_sge = 1;
				rw[i].next = i < m ? &rw[i + 1] : NULL;
			}
			rbad = NULL;
			CHECK_RC(
				ibv_post_recv(p2.qp[0], rw, &rbad), ENOMEM,
				"post_recv chain of max_recv_wr + 1 = %u in INIT (RQ overflow; posting in INIT is legal)",
				m + 1);
			CHECK(rbad == &rw[m], "  ...bad_wr is the first that did not fit\t(got index %ld)",
			      rbad ? (long)(rbad - rw) : -1L);
			free(rw);
			vt_pair_destroy(&p2);
		}
	}

	/* inline */
	uint32_t inl = p.cap[0].max_inline_data;
	CHECK(inl >= 64, "max_inline_data %u >= the 64 requested", inl);
	uint8_t *ib = calloc(1, inl + 2);
	vt_fill(ib, inl + 1, 77);
	memset(&wr, 0, sizeof(wr));
	struct ibv_sge isge = { .addr = (uintptr_t)ib, .length = inl + 1, .lkey = 0 };
	wr.wr_id = 5;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
	wr.sg_list = &isge;
	wr.num_sge = 1;
	bad = NULL;
	CHECK_RC(ibv_post_send(qp, &wr, &bad), EINVAL, "inline SEND of max_inline_data + 1 = %u bytes", inl + 1);
	CHECK(bad == &wr, "  ...bad_wr points at it");
	isge.length = inl;
	CHECK_RC(vt_post_recv(p.qp[1], 6, r.p, 65536, r.mr->lkey), 0, "post_recv for an inline SEND");
	CHECK_RC(ibv_post_send(qp, &wr, &bad), 0, "inline SEND of exactly max_inline_data = %u bytes (lkey 0)", inl);
	memset(ib, 0, inl + 1); /* inline: the buffer is free as soon as post_send returns */
	EXPECT_WC(p.scq[0], 5, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "  ...send");
	if (EXPECT_WC(p.rcq[1], 6, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "  ...receive"))
		CHECK_INT(wc.byte_len, inl, "  ...byte_len");
	CHECK_DATA(r.p, inl, 77, "  ...inline data as it was at post time");
	free(ib);

	/* atomics: misaligned remote address, short local buffer */
	memset(&wr, 0, sizeof(wr));
	struct ibv_sge asge = { .addr = (uintptr_t)b.p, .length = 8, .lkey = b.mr->lkey };
	wr.wr_id = 9;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = &asge;
	wr.num_sge = 1;
	wr.wr.atomic.remote_addr = (uintptr_t)b.p + 4;
	wr.wr.atomic.rkey = b.mr->rkey;
	wr.wr.atomic.compare_add = 1;
	bad = NULL;
	CHECK_RC(ibv_post_send(qp, &wr, &bad), EINVAL, "FETCH_AND_ADD at a remote address that is not 8-byte aligned");
	wr.wr.atomic.remote_addr = (uintptr_t)b.p + 8;
	asge.length = 4;
	CHECK_RC(ibv_post_send(qp, &wr, &bad), EINVAL, "FETCH_AND_ADD with a 4-byte local buffer");
	CHECK_CQ_EMPTY(p.scq[0], 50, "rejected WRs leave no completion");
out:
	vt_buf_free(&b);
	vt_buf_free(&r);
	vt_pair_destroy(&p);
}

/* ------------------------------------------------------------------ */

static void test_srq(void)
{
	SECTION("SRQ: create, modify and query limits");
	struct ibv_srq_init_attr sa;
	struct ibv_srq *srq;
	int e;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 0;
	sa.attr.max_sge = 1;
	errno = 0;
	srq = ibv_create_srq(D.pd, &sa);
	e = errno;
	CHECK_PTR_ERR(srq, e, EINVAL, "ibv_create_srq(max_wr 0)");
	if (srq)
		ibv_destroy_srq(srq);
	sa.attr.max_wr = (uint32_t)D.attr.max_srq_wr + 1;
	errno = 0;
	srq = ibv_create_srq(D.pd, &sa);
	e = errno;
	CHECK_PTR_ERR(srq, e, EINVAL, "ibv_create_srq(max_wr = max_srq_wr + 1 = %u)", sa.attr.max_wr);
	if (srq)
		ibv_destroy_srq(srq);
	sa.attr.max_wr = 16;
	sa.attr.max_sge = (uint32_t)D.attr.max_srq_sge + 1;
	errno = 0;
	srq = ibv_create_srq(D.pd, &sa);
	e = errno;
	CHECK_PTR_ERR(srq, e, EINVAL, "ibv_create_srq(max_sge = max_srq_sge + 1 = %u)", sa.attr.max_sge);
	if (srq)
		ibv_destroy_srq(srq);

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 16;
	sa.attr.max_sge = 2;
	sa.srq_context = &sa;
	srq = ibv_create_srq(D.pd, &sa);
	e = errno;
	if (!CHECK_PTR_ERR(srq, e, 0, "ibv_create_srq(max_wr 16, max_sge 2)"))
		return;
	CHECK(srq->pd == D.pd && srq->context == D.ctx && srq->srq_context == &sa,
	      "new SRQ: pd, context and srq_context set");
	CHECK(sa.attr.max_wr >= 16 && sa.attr.max_sge >= 2, "create returns max_wr %u >= 16, max_sge %u >= 2",
	      sa.attr.max_wr, sa.attr.max_sge);
	struct ibv_srq_attr q;
	memset(&q, 0, sizeof(q));
	CHECK_RC(ibv_query_srq(srq, &q), 0, "ibv_query_srq");
	CHECK(q.max_wr == sa.attr.max_wr && q.max_sge == sa.attr.max_sge && q.srq_limit == 0,
	      "query: max_wr %u, max_sge %u as created, srq_limit 0\t(got %u, %u, %u)", sa.attr.max_wr, sa.attr.max_sge,
	      q.max_wr, q.max_sge, q.srq_limit);

	struct ibv_srq_attr m;
	memset(&m, 0, sizeof(m));
	m.srq_limit = 4;
	CHECK_RC(ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT), 0, "ibv_modify_srq(LIMIT 4)");
	ibv_query_srq(srq, &q);
	CHECK_INT(q.srq_limit, 4, "query returns srq_limit");
	m.srq_limit = (uint32_t)D.attr.max_srq_wr + 1;
	CHECK_RC(ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT), EINVAL, "ibv_modify_srq(LIMIT max_srq_wr + 1)");
	ibv_query_srq(srq, &q);
	CHECK_INT(q.srq_limit, 4, "  ...srq_limit unchanged");
	if (D.attr.device_cap_flags & IBV_DEVICE_SRQ_RESIZE) {
		m.max_wr = 64;
		CHECK_RC(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR), 0, "ibv_modify_srq(MAX_WR 64) (SRQ_RESIZE)");
		ibv_query_srq(srq, &q);
		CHECK(q.max_wr >= 64, "query max_wr %u >= 64 after resize", q.max_wr);
		m.max_wr = (uint32_t)D.attr.max_srq_wr + 1;
		CHECK_RC(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR), EINVAL, "ibv_modify_srq(MAX_WR max_srq_wr + 1)");
	} else {
		NOTE("device has no IBV_DEVICE_SRQ_RESIZE: resize not checked");
	}

	/* posting to the SRQ: SGE limit, overflow */
	static uint8_t buf[4096] __attribute__((aligned(64)));
	struct ibv_mr *mr = ibv_reg_mr(D.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ibv_query_srq(srq, &q);
	struct ibv_sge sg[8];
	for (int i = 0; i < 8; i++)
		sg[i] = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = 16, .lkey = mr ? mr->lkey : 0 };
	struct ibv_recv_wr w, *bad = NULL;
	memset(&w, 0, sizeof(w));
	w.sg_list = sg;
	w.num_sge = (int)q.max_sge + 1;
	CHECK_RC(ibv_post_srq_recv(srq, &w, &bad), EINVAL, "post_srq_recv with num_sge = max_sge + 1 = %d", w.num_sge);
	CHECK(bad == &w, "  ...bad_wr points at it");
	struct ibv_recv_wr *rw = calloc(q.max_wr + 1, sizeof(*rw));
	for (uint32_t i = 0; i <= q.max_wr; i++) {
		rw[i].wr_id = i;
		rw[i].sg_list = sg;
		rw[i].num_sge = 1;
		rw[i].next = i < q.max_wr ? &rw[i + 1] : NULL;
	}
	bad = NULL;
	CHECK_RC(ibv_post_srq_recv(srq, rw, &bad), ENOMEM, "post_srq_recv chain of max_wr + 1 = %u (overflow)",
		 q.max_wr + 1);
	CHECK(bad == &rw[q.max_wr], "  ...bad_wr is the first that did not fit\t(got index %ld)",
	      bad ? (long)(bad - rw) : -1L);
	free(rw);

	/* a QP on the SRQ: the SRQ can't go while the QP uses it */
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 8, NULL, NULL, 0);
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = ia.recv_cq = cq;
	ia.srq = srq;
	ia.cap.max_send_wr = 4;
	ia.cap.max_send_sge = 1;
	struct ibv_qp *qp = ibv_create_qp(D.pd, &ia);
	if (CHECK(qp, "create an RC QP on the SRQ\t(errno %d)", errno)) {
		CHECK(qp->srq == srq, "  ...qp->srq is the SRQ");
		CHECK_RC(ibv_destroy_srq(srq), EBUSY, "ibv_destroy_srq while a QP uses it");
		vt_qp_connect(qp, &(struct vt_qp_cfg){ .type = IBV_QPT_RC, .access = IBV_ACCESS_LOCAL_WRITE },
			      IBV_QPS_INIT, 0, 0, 0, &D.gid, D.gid_index);
		struct ibv_recv_wr rr = { .wr_id = 1, .sg_list = sg, .num_sge = 1 }, *rbad = NULL;
		CHECK_RC(ibv_post_recv(qp, &rr, &rbad), EINVAL, "ibv_post_recv on a QP that uses an SRQ");
		ibv_destroy_qp(qp);
	}
	ibv_destroy_cq(cq);
	CHECK_RC(ibv_destroy_srq(srq), 0, "ibv_destroy_srq once no QP uses it");
	if (mr)
		ibv_dereg_mr(mr);
}

/* ------------------------------------------------------------------ */

static void test_busy(void)
{
	SECTION("destroying objects still in use -> EBUSY");
	struct ibv_comp_channel *ch = ibv_create_comp_channel(D.ctx);
	if (!CHECK(ch, "ibv_create_comp_channel"))
		return;
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 8, NULL, ch, 0);
	CHECK(cq && cq->channel == ch, "create a CQ on the channel");
	CHECK_RC(ibv_destroy_comp_channel(ch), EBUSY, "ibv_destroy_comp_channel while a CQ uses it");
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = ia.recv_cq = cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	struct ibv_qp *qp = cq ? ibv_create_qp(D.pd, &ia) : NULL;
	if (CHECK(qp, "create a QP on the CQ")) {
		CHECK_RC(ibv_destroy_cq(cq), EBUSY, "ibv_destroy_cq while a QP uses it");
		CHECK_RC(ibv_destroy_qp(qp), 0, "ibv_destroy_qp");
	}
	if (cq)
		CHECK_RC(ibv_destroy_cq(cq), 0, "ibv_destroy_cq once unused");
	CHECK_RC(ibv_destroy_comp_channel(ch), 0, "ibv_destroy_comp_channel once unused");

	/* arming a CQ that has no channel: rxe and mlx5 just arm it */
	struct ibv_cq *nch = ibv_create_cq(D.ctx, 8, NULL, NULL, 0);
	if (nch) {
		int rc = ibv_req_notify_cq(nch, 0);
		KNOWN_BUG(rc == 0,
			  "ibv_req_notify_cq on a CQ without a completion channel returns 0, as with rxe and mlx5 (the "
			  "notification has nowhere to go)\t(got %d %s; applications arm their CQs unconditionally)",
			  rc, rc ? strerror(rc) : "");
		ibv_destroy_cq(nch);
	}

	/* a PD with a memory region on it: the kernel refuses (EBUSY).  A
	 * scratch PD is used, and not touched again if it was freed. */
	struct ibv_pd *pd = ibv_alloc_pd(D.ctx);
	static uint8_t b[4096];
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, b, sizeof(b), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (CHECK(pd && mr, "a scratch PD with an MR")) {
		int rc = ibv_dealloc_pd(pd);
		KNOWN_BUG(rc == EBUSY,
			  "ibv_dealloc_pd on a PD that still has an MR -> EBUSY, as the kernel (uverbs usecnt) does "
			  "(got %d %s; softrdma frees the PD under the MR)",
			  rc, rc ? strerror(rc) : "0");
		ibv_dereg_mr(mr);
		if (rc == EBUSY)
			CHECK_RC(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd once the MR is gone");
	}
}

static void test_cq_resize(void)
{
	SECTION("CQ resize with completions pending");
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf t;
	vt_cfg_default(&c, IBV_QPT_RC);
	c.cqe = 16;
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&t, D.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_cq *cq = p.scq[0];
	int err = 0;
	for (int i = 0; i < 10; i++)
		err |= vt_post_send(p.qp[0], (uint64_t)i, IBV_WR_RDMA_WRITE, t.p, 8, t.mr->lkey, IBV_SEND_SIGNALED,
				    (uintptr_t)t.p + 64, t.mr->rkey, 0);
	CHECK_RC(err, 0, "10 signaled WRITEs");
	/* wait until all 10 are on the CQ without consuming them */
	vt_post_send(p.qp[0], 99, IBV_WR_RDMA_WRITE, t.p, 8, t.mr->lkey, 0, (uintptr_t)t.p + 64, t.mr->rkey, 0);
	vt_sleep_ms(200);
	CHECK_RC(ibv_resize_cq(cq, 4), EINVAL, "ibv_resize_cq below the 10 completions it holds");
	CHECK_RC(ibv_resize_cq(cq, 0), EINVAL, "ibv_resize_cq(0)");
	CHECK_RC(ibv_resize_cq(cq, D.attr.max_cqe + 1), EINVAL, "ibv_resize_cq(max_cqe + 1)");
	CHECK_RC(ibv_resize_cq(cq, 100), 0, "ibv_resize_cq(100)");
	CHECK(cq->cqe >= 100, "cq->cqe %d >= 100 after the resize", cq->cqe);
	struct ibv_wc wc[16];
	int n = vt_poll(cq, 16, wc, 500);
	bool ok = n == 10;
	for (int i = 0; i < n; i++)
		ok &= wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == (uint64_t)i;
	CHECK(ok, "the 10 completions survive the resize, in order\t(got %d)", n);
	vt_buf_free(&t);
	vt_pair_destroy(&p);
}

/* SQD (IBTA 10.3.1, "Send Queue Drain"): the message being transmitted is
 * finished, no new one is started, and once the send queue is idle
 * IBV_EVENT_SQ_DRAINED is raised; SQD->RTS resumes.  (rxe: req_next_wqe
 * keeps returning the WQE in progress while draining, starts no new one.) */
static void test_sqd_drain(void)
{
	SECTION("SQD: the message in progress finishes, no new one starts, then IBV_EVENT_SQ_DRAINED");
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf s, t;
	enum {
		BIG = 32 << 20
	};
	vt_cfg_default(&c, IBV_QPT_RC);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	if (vt_buf_alloc(&s, D.pd, BIG, 4096, IBV_ACCESS_LOCAL_WRITE) ||
	    vt_buf_alloc(&t, D.pd, BIG, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)) {
		CHECK(0, "two 32 MiB buffers");
		return;
	}
	struct ibv_async_event ev;
	while (vt_get_async(D.ctx, &ev, 0))
		;
	vt_fill(s.p, BIG, 3);
	CHECK_RC(vt_post_send(p.qp[0], 1, IBV_WR_RDMA_WRITE, s.p, BIG, s.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)t.p,
			      t.mr->rkey, 0),
		 0, "a 32 MiB RDMA_WRITE");
	CHECK_RC(vt_post_send(p.qp[0], 2, IBV_WR_RDMA_WRITE, s.p, 4096, s.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)t.p,
			      t.mr->rkey, 0),
		 0, "and a 4 KiB RDMA_WRITE behind it");
	/* wait until the big one is visibly under way, then drain */
	uint64_t end = vt_now_ms() + 10000;
	struct ibv_wc wc[2];
	int n = 0;
	while (vt_now_ms() < end && vt_verify(t.p, 4096, 3) >= 0)
		n += ibv_poll_cq(p.scq[0], 2, wc + n);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_SQD, .en_sqd_async_notify = 1 };
	int rc = ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY);
	if (n || !memcmp(t.p + BIG - 4096, s.p + BIG - 4096, 4096)) {
		NOTE("the 32 MiB WRITE finished before SQD could be entered: not checkable this time");
		goto out;
	}
	CHECK_RC(rc, 0, "RTS->SQD (EN_SQD_ASYNC_NOTIFY) while the 32 MiB WRITE is being transmitted");
	/* watch both the CQ and the async queue */
	int big_st = -1, small_st = -1;
	bool drained = false, early = false;
	end = vt_now_ms() + 10000;
	while (vt_now_ms() < end && !(big_st >= 0 && drained)) {
		int k = ibv_poll_cq(p.scq[0], 2, wc);
		for (int i = 0; i < k; i++) {
			if (wc[i].wr_id == 1)
				big_st = wc[i].status;
			if (wc[i].wr_id == 2)
				small_st = wc[i].status;
		}
		if (vt_get_async(D.ctx, &ev, 0) && ev.event_type == IBV_EVENT_SQ_DRAINED && ev.element.qp == p.qp[0]) {
			drained = true;
			if (big_st < 0) { /* one more look: the completion may just be landing */
				k = ibv_poll_cq(p.scq[0], 2, wc);
				for (int i = 0; i < k; i++)
					if (wc[i].wr_id == 1)
						big_st = wc[i].status;
				early = big_st < 0;
			}
		}
		if (big_st > 0) /* failed: the QP is in ERR, nothing more to wait for */
			break;
		if (!k)
			sched_yield();
	}
	KNOWN_BUG(
		big_st == IBV_WC_SUCCESS,
		"in SQD the WRITE in progress completes successfully\t(got %s: softrdma's sr_req_progress() sends "
		"nothing unless the QP is in RTS, so the rest of the message never goes out and, as the retransmit timer "
		"keeps running in SQD without retransmitting, the QP dies with RETRY_EXC_ERR)",
		big_st < 0 ? "no completion in 10 s" : vt_status_str(big_st));
	CHECK(small_st != IBV_WC_SUCCESS, "in SQD the WRITE behind it is not started");
	if (big_st > 0) {
		NOTE("the QP is now in %s; the rest of the SQD checks are skipped", vt_state_str(vt_qp_state(p.qp[0])));
		goto out;
	}
	KNOWN_BUG(drained && !early, "IBV_EVENT_SQ_DRAINED comes once the send queue is idle\t(%s)",
		  !drained ? "no event" :
			     "it came while the 32 MiB WRITE was still outstanding: softrdma raises it "
			     "on entering SQD");
	CHECK(big_st != IBV_WC_SUCCESS || !memcmp(t.p, s.p, BIG), "the 32 MiB WRITE placed all its data");
	a.qp_state = IBV_QPS_RTS;
	CHECK_RC(ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE), 0, "SQD->RTS");
	n = vt_poll(p.scq[0], (big_st < 0) + (small_st < 0), wc, VT_TIMEOUT_MS);
	bool all = n == (big_st < 0) + (small_st < 0);
	for (int i = 0; i < n; i++)
		all &= wc[i].status == IBV_WC_SUCCESS;
	CHECK(all, "back in RTS everything completes\t(%d more completions)", n);
out:
	while (vt_get_async(D.ctx, &ev, 0))
		;
	vt_buf_free(&s);
	vt_buf_free(&t);
	vt_pair_destroy(&p);
}

/* ------------------------------------------------------------------ */
/* invalid arguments answered as rdma-core + the kernel's rxe answer    */
/* ------------------------------------------------------------------ */

static struct ibv_qp *scratch_qp(struct ibv_cq *cq, enum ibv_qp_type t)
{
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = t;
	ia.send_cq = ia.recv_cq = cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	return ibv_create_qp(D.pd, &ia);
}

/* A CQ and (unless type is 0) one small QP on it, for the argument checks
 * below.  scratch_close() frees them; after a failed scratch_open() there
 * is nothing left to free, and closing it again is harmless. */
struct scratch {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
};

static void scratch_close(struct scratch *s)
{
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	s->qp = NULL;
	s->cq = NULL;
}

static bool scratch_open(struct scratch *s, enum ibv_qp_type t)
{
	s->cq = ibv_create_cq(D.ctx, 8, NULL, NULL, 0);
	s->qp = s->cq && t ? scratch_qp(s->cq, t) : NULL;
	bool ok = t ? CHECK(s->qp, "a CQ and a %s QP", vt_qpt_str(t)) : CHECK(s->cq, "a CQ");
	if (!ok)
		scratch_close(s);
	return ok;
}

/* CAP_NET_RAW in or out of the effective set (a root test run drops it to
 * see what an unprivileged application gets); false if that failed. */
static bool set_net_raw(bool on)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	if (syscall(SYS_capget, &h, d))
		return false;
	if (on)
		d[CAP_TO_INDEX(CAP_NET_RAW)].effective |= CAP_TO_MASK(CAP_NET_RAW);
	else
		d[CAP_TO_INDEX(CAP_NET_RAW)].effective &= ~CAP_TO_MASK(CAP_NET_RAW);
	return syscall(SYS_capset, &h, d) == 0;
}

/* rdma-core's verbs that reach the kernel fail with errno set to what
 * they return (the failed write/ioctl set it); "%m" and perror() rely on it. */
static void test_errno_set(void)
{
	SECTION("failing verbs that return an errno value set errno too, as rdma-core's");
	struct scratch sc;
	if (!scratch_open(&sc, IBV_QPT_RC))
		goto out;
	struct ibv_qp *qp = sc.qp;
	struct ibv_cq *cq = sc.cq;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 2 };
	errno = 0;
	int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	CHECK(rc == EINVAL && errno == EINVAL, "ibv_modify_qp(port 2) -> EINVAL, errno EINVAL\t(got %d, errno %d)", rc,
	      errno);
	errno = 0;
	rc = ibv_destroy_cq(cq);
	CHECK(rc == EBUSY && errno == EBUSY, "ibv_destroy_cq with a QP -> EBUSY, errno EBUSY\t(got %d, errno %d)", rc,
	      errno);
	errno = 0;
	rc = ibv_resize_cq(cq, 0);
	CHECK(rc == EINVAL && errno == EINVAL, "ibv_resize_cq(0) -> EINVAL, errno EINVAL\t(got %d, errno %d)", rc,
	      errno);
	struct ibv_port_attr pa;
	errno = 0;
	rc = ibv_query_port(D.ctx, 2, &pa);
	CHECK(rc == EINVAL && errno == EINVAL, "ibv_query_port(2) -> EINVAL, errno EINVAL\t(got %d, errno %d)", rc,
	      errno);
	union ibv_gid g;
	errno = 0;
	rc = ibv_query_gid(D.ctx, 1, D.port.gid_tbl_len, &g);
	CHECK(rc == -1 && errno == EINVAL, "ibv_query_gid(index gid_tbl_len) -> -1, errno EINVAL\t(got %d, errno %d)",
	      rc, errno);
	__be16 pk;
	errno = 0;
	rc = ibv_query_pkey(D.ctx, 1, D.port.pkey_tbl_len, &pk);
	CHECK(rc == -1 && errno == ENOENT,
	      "ibv_query_pkey(index pkey_tbl_len) -> -1, errno ENOENT (no such sysfs file)\t(got %d, errno %d)", rc,
	      errno);
out:
	scratch_close(&sc);
}

/* ibv_rereg_mr() returns enum ibv_rereg_mr_err_code, not errno values */
static void test_rereg_mr_codes(void)
{
	SECTION("ibv_rereg_mr: IBV_REREG_MR_ERR_INPUT / _CMD with errno, as libibverbs");
	static uint8_t b[8192] __attribute__((aligned(4096)));
	struct ibv_mr *mr = ibv_reg_mr(D.pd, b, sizeof(b), IBV_ACCESS_LOCAL_WRITE);
	if (!CHECK(mr, "ibv_reg_mr"))
		return;
	struct {
		const char *what;
		int flags, access, want, want_errno;
		void *addr;
		size_t len;
	} t[] = {
		{ "unknown flag 0x8", 0x8, 0, IBV_REREG_MR_ERR_INPUT, EINVAL, NULL, 0 },
		{ "CHANGE_TRANSLATION with addr NULL", IBV_REREG_MR_CHANGE_TRANSLATION, 0, IBV_REREG_MR_ERR_INPUT,
		  EINVAL, NULL, 4096 },
		{ "an access without CHANGE_ACCESS", IBV_REREG_MR_CHANGE_PD, IBV_ACCESS_REMOTE_READ,
		  IBV_REREG_MR_ERR_INPUT, EINVAL, NULL, 0 },
		{ "flags 0", 0, 0, IBV_REREG_MR_ERR_CMD, EINVAL, NULL, 0 },
		{ "CHANGE_ACCESS to REMOTE_WRITE without LOCAL_WRITE", IBV_REREG_MR_CHANGE_ACCESS,
		  IBV_ACCESS_REMOTE_WRITE, IBV_REREG_MR_ERR_CMD, EINVAL, NULL, 0 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		errno = 0;
		int rc = ibv_rereg_mr(mr, t[i].flags, t[i].flags & IBV_REREG_MR_CHANGE_PD ? D.pd : NULL, t[i].addr,
				      t[i].len, t[i].access);
		CHECK(rc == t[i].want && errno == t[i].want_errno,
		      "ibv_rereg_mr(%s) -> %d, errno %s\t(got %d, errno %d)", t[i].what, t[i].want,
		      strerror(t[i].want_errno), rc, errno);
	}
	CHECK_RC(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
		 0, "ibv_rereg_mr(CHANGE_ACCESS LOCAL_WRITE|REMOTE_READ) still works");
	CHECK_RC(ibv_dereg_mr(mr), 0, "ibv_dereg_mr");
}

/* ib_umem_get(): no pages -> EINVAL, pages it cannot pin -> EFAULT */
static void test_reg_mr_range(void)
{
	SECTION("ibv_reg_mr: length 0 -> EINVAL, memory that is not mapped -> EFAULT");
	static uint8_t b[8192] __attribute__((aligned(4096)));
	struct ibv_mr *mr;
	int e;
	errno = 0;
	mr = ibv_reg_mr(D.pd, b, 0, IBV_ACCESS_LOCAL_WRITE);
	e = errno;
	CHECK_PTR_ERR(mr, e, EINVAL, "ibv_reg_mr(length 0)");
	if (mr)
		ibv_dereg_mr(mr);
	errno = 0;
	mr = ibv_reg_mr(D.pd, NULL, 4096, IBV_ACCESS_LOCAL_WRITE);
	e = errno;
	CHECK_PTR_ERR(mr, e, EFAULT, "ibv_reg_mr(NULL, 4096)");
	if (mr)
		ibv_dereg_mr(mr);
	uint8_t *m = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!CHECK(m != MAP_FAILED, "mmap 3 pages"))
		return;
	munmap(m + 4096, 4096);
	errno = 0;
	mr = ibv_reg_mr(D.pd, m, 3 * 4096, IBV_ACCESS_LOCAL_WRITE);
	e = errno;
	CHECK_PTR_ERR(mr, e, EFAULT, "ibv_reg_mr over a hole (its middle page unmapped)");
	if (mr)
		ibv_dereg_mr(mr);
	mr = ibv_reg_mr(D.pd, m + 2 * 4096 + 100, 200, IBV_ACCESS_LOCAL_WRITE);
	e = errno;
	CHECK_PTR_ERR(mr, e, 0, "ibv_reg_mr of a mapped page next to the hole");
	if (mr)
		CHECK_RC(ibv_dereg_mr(mr), 0, "ibv_dereg_mr");
	munmap(m, 4096);
	munmap(m + 2 * 4096, 4096);
}

/* uverbs: an AV names a valid port; rdma_get_gid_attr(): an empty GID
 * table entry is ENODATA */
static void test_av_port_gid(void)
{
	SECTION("address vectors: port_num 0 -> EINVAL, an empty GID entry -> ENODATA");
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	int e;
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 0;
	aa.grh.dgid = D.gid;
	aa.grh.hop_limit = 64;
	errno = 0;
	ah = ibv_create_ah(D.pd, &aa);
	e = errno;
	CHECK_PTR_ERR(ah, e, EINVAL, "ibv_create_ah(port_num 0)");
	if (ah)
		ibv_destroy_ah(ah);
	int empty = -1;
	for (int i = 0; i < D.port.gid_tbl_len && empty < 0; i++) {
		struct ibv_gid_entry ge;
		if (ibv_query_gid_ex(D.ctx, 1, (uint32_t)i, &ge, 0) == ENODATA)
			empty = i;
	}
	if (empty >= 0) {
		aa.port_num = 1;
		aa.grh.sgid_index = (uint8_t)empty;
		errno = 0;
		ah = ibv_create_ah(D.pd, &aa);
		e = errno;
		CHECK_PTR_ERR(ah, e, ENODATA, "ibv_create_ah(sgid_index %d, an empty GID entry)", empty);
		if (ah)
			ibv_destroy_ah(ah);
	} else {
		NOTE("no empty GID table entry: ENODATA not checked");
	}
	struct vt_qp_cfg c;
	vt_cfg_default(&c, IBV_QPT_RC);
	struct scratch sc;
	struct ibv_qp *qp = scratch_open(&sc, IBV_QPT_RC) ? sc.qp : NULL;
	if (qp && CHECK(!vt_qp_connect(qp, &c, IBV_QPS_INIT, 0, 0, 0, &D.gid, 0), "to INIT")) {
		struct ibv_qp_attr a;
		int mask = vt_trans_attr(&c, IBV_QPS_RTR, qp->qp_num, 0, 0, &D.gid, 0, &a);
		a.ah_attr.port_num = 0;
		expect_modify(qp, &a, mask, EINVAL, IBV_QPS_INIT, "RC INIT->RTR with ah_attr.port_num 0");
		if (empty >= 0) {
			mask = vt_trans_attr(&c, IBV_QPS_RTR, qp->qp_num, 0, 0, &D.gid, empty, &a);
			expect_modify(qp, &a, mask, ENODATA, IBV_QPS_INIT, "RC INIT->RTR with an empty sgid_index");
		}
	}
	scratch_close(&sc);
}

/* _ib_modify_qp(): "alternate paths and APM [are] for IB. Ban them in roce mode." */
static void test_alt_path(void)
{
	SECTION("IBV_QP_ALT_PATH -> EINVAL: no APM on RoCE (nor iWARP)");
	const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC };
	for (int i = 0; i < 2; i++) {
		struct vt_qp_cfg c;
		vt_cfg_default(&c, types[i]);
		struct scratch sc;
		if (!scratch_open(&sc, types[i]))
			continue;
		struct ibv_qp *qp = sc.qp;
		if (!vt_qp_connect(qp, &c, IBV_QPS_INIT, 0, 0, 0, &D.gid, 0)) {
			struct ibv_qp_attr a;
			int mask = vt_trans_attr(&c, IBV_QPS_RTR, qp->qp_num, 0, 0, &D.gid, 0, &a);
			a.alt_ah_attr = a.ah_attr;
			a.alt_port_num = 1;
			a.alt_timeout = 14;
			char what[80];
			snprintf(what, sizeof(what), "%s INIT->RTR with the optional IBV_QP_ALT_PATH",
				 vt_qpt_str(types[i]));
			expect_modify(qp, &a, mask | IBV_QP_ALT_PATH, EINVAL, IBV_QPS_INIT, what);
		}
		scratch_close(&sc);
	}
}

/* uverbs modify_qp(): a Q_Key with the high bit set needs CAP_NET_RAW */
static void test_privileged_qkey(void)
{
	SECTION("UD: a privileged Q_Key (bit 31) -> EPERM without CAP_NET_RAW");
	struct scratch sc;
	if (scratch_open(&sc, IBV_QPT_UD)) {
		struct ibv_qp *qp = sc.qp;
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x80010000 };
		int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
		bool root = set_net_raw(true);
		if (set_net_raw(false)) {
			expect_modify(qp, &a, mask, EPERM, IBV_QPS_RESET,
				      "UD RESET->INIT, qkey 0x80010000, no CAP_NET_RAW");
			if (root)
				set_net_raw(true);
		} else {
			NOTE("cannot drop CAP_NET_RAW: EPERM not checked");
		}
		if (root)
			expect_modify(qp, &a, mask, 0, IBV_QPS_RESET,
				      "UD RESET->INIT, qkey 0x80010000, with CAP_NET_RAW");
		a.qkey = 0x11111111;
		a.qp_state = IBV_QPS_RESET;
		CHECK_RC(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0, "back to RESET");
		a.qp_state = IBV_QPS_INIT;
		CHECK_RC(ibv_modify_qp(qp, &a, mask), 0, "UD RESET->INIT with an ordinary qkey");
	}
	scratch_close(&sc);
}

/* uverbs create_qp(): a type it does not know is EINVAL; rxe: the others
 * are EOPNOTSUPP (a raw packet QP EPERM first, without CAP_NET_RAW); XRC
 * is test_xrc's */
static void test_qp_types(void)
{
	SECTION("ibv_create_qp: qp_type unknown -> EINVAL, not offered -> EOPNOTSUPP");
	struct scratch sc;
	if (!scratch_open(&sc, 0))
		return;
	struct ibv_cq *cq = sc.cq;
	const struct {
		int type, want;
	} t[] = { { 0, EINVAL }, { 1, EINVAL }, { 42, EINVAL }, { IBV_QPT_DRIVER, EOPNOTSUPP } };
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		errno = 0;
		struct ibv_qp *qp = scratch_qp(cq, (enum ibv_qp_type)t[i].type);
		int e = errno;
		CHECK_PTR_ERR(qp, e, t[i].want, "ibv_create_qp(qp_type %d)", t[i].type);
		if (qp)
			ibv_destroy_qp(qp);
	}
	bool root = set_net_raw(true);
	if (set_net_raw(false)) {
		errno = 0;
		struct ibv_qp *qp = scratch_qp(cq, IBV_QPT_RAW_PACKET);
		int e = errno;
		CHECK_PTR_ERR(qp, e, EPERM, "ibv_create_qp(RAW_PACKET) without CAP_NET_RAW");
		if (qp)
			ibv_destroy_qp(qp);
		if (root)
			set_net_raw(true);
	}
	scratch_close(&sc);
}

/* rdma-core's ibv_cmd_modify_qp(): IBV_QP_RATE_LIMIT and later attributes
 * only go through the _ex command */
static void test_rate_limit_mask(void)
{
	SECTION("ibv_modify_qp with IBV_QP_RATE_LIMIT -> EOPNOTSUPP");
	struct scratch sc;
	if (scratch_open(&sc, IBV_QPT_RC)) {
		struct ibv_qp *qp = sc.qp;
		struct vt_qp_cfg c;
		struct ibv_qp_attr a;
		vt_cfg_default(&c, IBV_QPT_RC);
		int mask = vt_trans_attr(&c, IBV_QPS_INIT, 0, 0, 0, &D.gid, 0, &a);
		a.rate_limit = 1000;
		expect_modify(qp, &a, mask | IBV_QP_RATE_LIMIT, EOPNOTSUPP, IBV_QPS_RESET,
			      "RC RESET->INIT with IBV_QP_RATE_LIMIT");
	}
	scratch_close(&sc);
}

/* qp_state_table: SQD->SQD takes no IB_QP_CUR_STATE (RTR/RTS/SQD->RTS do) */
static void test_sqd_cur_state(void)
{
	SECTION("RC/UC SQD->SQD with IBV_QP_CUR_STATE -> EINVAL");
	const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC };
	for (int i = 0; i < 2; i++) {
		struct vt_qp_cfg c;
		struct vt_pair p;
		vt_cfg_default(&c, types[i]);
		if (!vt_pair_create(&D, &c, &p))
			continue;
		/* no WR is ever posted: RTS and SQD send nothing */
		if (CHECK(drive_to(p.qp[0], &c, p.qp[1]->qp_num, IBV_QPS_SQD), "%s QP to SQD", vt_qpt_str(types[i]))) {
			wait_sq_drained(p.qp[0]);
			struct ibv_qp_attr a = { .qp_state = IBV_QPS_SQD, .cur_qp_state = IBV_QPS_SQD };
			char what[80];
			snprintf(what, sizeof(what), "%s SQD->SQD with CUR_STATE", vt_qpt_str(types[i]));
			expect_modify(p.qp[0], &a, IBV_QP_STATE | IBV_QP_CUR_STATE, EINVAL, IBV_QPS_SQD, what);
		}
		vt_pair_destroy(&p);
	}
}

/* srq_limit is "irrelevant for ibv_create_srq" (man page); rxe takes any */
static void test_srq_create_limit(void)
{
	SECTION("ibv_create_srq ignores srq_limit's validity");
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1, .srq_limit = 100 } };
	errno = 0;
	struct ibv_srq *srq = ibv_create_srq(D.pd, &sa);
	int e = errno;
	CHECK_PTR_ERR(srq, e, 0, "ibv_create_srq(max_wr 4, srq_limit 100)");
	if (srq)
		CHECK_RC(ibv_destroy_srq(srq), 0, "ibv_destroy_srq");
}

/* rdma-core hands IGNORE_OVERRUN to the kernel; rxe_create_cq() refuses any flag */
static void test_cq_flags(void)
{
	SECTION("ibv_create_cq_ex: IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN -> EOPNOTSUPP");
	struct ibv_cq_init_attr_ex ca = { .cqe = 8, .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS };
	ca.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	errno = 0;
	struct ibv_cq_ex *cq = ibv_create_cq_ex(D.ctx, &ca);
	int e = errno;
	CHECK_PTR_ERR(cq, e, EOPNOTSUPP, "ibv_create_cq_ex(IGNORE_OVERRUN)");
	if (cq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	ca.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
	cq = ibv_create_cq_ex(D.ctx, &ca);
	e = errno;
	CHECK_PTR_ERR(cq, e, 0, "ibv_create_cq_ex(SINGLE_THREADED)");
	if (cq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
}

/* rdma-core's rxe provider: ibv_wr_complete() is ENOSPC for a full SQ, too
 * many SGEs or too much inline data (checked before the QP state) */
static void test_wr_enospc(void)
{
	SECTION("ibv_wr_*: SQ full, too many SGEs, inline too long -> ENOSPC");
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 8, NULL, NULL, 0);
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_RC,
		.send_cq = cq,
		.recv_cq = cq,
		.pd = D.pd,
		.cap = { .max_send_wr = 2,
			 .max_recv_wr = 1,
			 .max_send_sge = 1,
			 .max_recv_sge = 1,
			 .max_inline_data = 16 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_SEND,
	};
	struct ibv_qp *qp = cq ? ibv_create_qp_ex(D.ctx, &ia) : NULL;
	struct ibv_qp_ex *x = qp ? ibv_qp_to_qp_ex(qp) : NULL;
	if (CHECK(x, "an RC QP with ibv_qp_ex (max_send_wr %u)", ia.cap.max_send_wr)) {
		static char buf[65536];
		ibv_wr_start(x);
		for (uint32_t i = 0; i <= ia.cap.max_send_wr; i++) {
			ibv_wr_send(x);
			ibv_wr_set_sge(x, 0, (uintptr_t)buf, 1);
		}
		CHECK_RC(ibv_wr_complete(x), ENOSPC, "max_send_wr + 1 sends in one batch");
		struct ibv_sge sg[2] = { { (uintptr_t)buf, 1, 0 }, { (uintptr_t)buf, 1, 0 } };
		ibv_wr_start(x);
		ibv_wr_send(x);
		ibv_wr_set_sge_list(x, ia.cap.max_send_sge + 1, sg);
		CHECK_RC(ibv_wr_complete(x), ENOSPC, "a send with max_send_sge + 1 SGEs");
		ibv_wr_start(x);
		ibv_wr_send(x);
		ibv_wr_set_inline_data(x, buf, ia.cap.max_inline_data + 1);
		CHECK_RC(ibv_wr_complete(x), ENOSPC, "max_inline_data + 1 bytes inline");
		ibv_wr_start(x);
		ibv_wr_send(x);
		ibv_wr_set_sge(x, 0, (uintptr_t)buf, 1);
		CHECK_RC(ibv_wr_complete(x), EINVAL, "a good send in RESET: EINVAL (the QP state)");
	}
	if (qp)
		ibv_destroy_qp(qp);
	if (cq)
		ibv_destroy_cq(cq);
}

/* post_one_send() once did memcpy(w->sge, NULL, 0), which a UBSan build of
 * the library reports; it copies nothing now when num_sge is 0. */
static void test_null_sg_list(void)
{
	SECTION("zero-length WRs with sg_list = NULL and num_sge = 0");
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf r;
	vt_cfg_default(&c, IBV_QPT_RC);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&r, D.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_recv_wr rw = { .wr_id = 1, .sg_list = NULL, .num_sge = 0 }, *rbad = NULL;
	CHECK_RC(ibv_post_recv(p.qp[1], &rw, &rbad), 0, "post_recv with sg_list NULL, num_sge 0");
	struct ibv_send_wr sw, *sbad = NULL;
	memset(&sw, 0, sizeof(sw));
	sw.wr_id = 2;
	sw.opcode = IBV_WR_SEND;
	sw.send_flags = IBV_SEND_SIGNALED;
	sw.sg_list = NULL;
	sw.num_sge = 0;
	CHECK_RC(ibv_post_send(p.qp[0], &sw, &sbad), 0, "zero-length SEND with sg_list NULL, num_sge 0");
	EXPECT_WC(p.scq[0], 2, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "  ...sender");
	struct ibv_wc wc;
	if (EXPECT_WC(p.rcq[1], 1, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "  ...receiver"))
		CHECK_INT(wc.byte_len, 0, "  ...byte_len");
	sw.wr_id = 3;
	sw.opcode = IBV_WR_RDMA_WRITE;
	sw.wr.rdma.remote_addr = (uintptr_t)r.p;
	sw.wr.rdma.rkey = r.mr->rkey;
	CHECK_RC(ibv_post_send(p.qp[0], &sw, &sbad), 0, "zero-length RDMA_WRITE with sg_list NULL, num_sge 0");
	EXPECT_WC(p.scq[0], 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL, "  ...completes");
	CHECK_GUARDS(&r, "zero-length RDMA_WRITE target");
	vt_buf_free(&r);
	vt_pair_destroy(&p);
}

int main(int argc, char **argv)
{
	vt_begin_args("test_state_machine", 120, argc, argv);
	vt_seed_env();
	if (!vt_open(&D))
		return vt_end();
	VT_RUN(test_queries());
	VT_RUN(test_create_flags());
	VT_RUN(test_object_limits());
	VT_RUN(test_transitions(IBV_QPT_RC));
	VT_RUN(test_transitions(IBV_QPT_UC));
	VT_RUN(test_transitions(IBV_QPT_UD));
	VT_RUN(test_err_reset_everywhere(IBV_QPT_RC));
	VT_RUN(test_err_reset_everywhere(IBV_QPT_UC));
	VT_RUN(test_err_reset_everywhere(IBV_QPT_UD));
	VT_RUN(test_reuse_after_reset());
	VT_RUN(test_posting());
	VT_RUN(test_srq());
	VT_RUN(test_busy());
	VT_RUN(test_errno_set());
	VT_RUN(test_rereg_mr_codes());
	VT_RUN(test_reg_mr_range());
	VT_RUN(test_av_port_gid());
	VT_RUN(test_alt_path());
	VT_RUN(test_privileged_qkey());
	VT_RUN(test_qp_types());
	VT_RUN(test_rate_limit_mask());
	VT_RUN(test_sqd_cur_state());
	VT_RUN(test_srq_create_limit());
	VT_RUN(test_cq_flags());
	VT_RUN(test_wr_enospc());
	VT_RUN(test_cq_resize());
	VT_RUN(test_sqd_drain());
	VT_RUN(test_null_sg_list());
	vt_close(&D);
	return vt_end();
}
