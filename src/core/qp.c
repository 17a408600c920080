/* Queue pairs: creation, the RESET-INIT-RTR-RTS-SQD-SQE-ERR state machine
 * with attribute masks checked as the kernel's ib_modify_qp_is_ok() and
 * rxe do, posting of work requests (ibv_post_send/recv), flushing.  The
 * ibv_wr_* API is in qp_ex.c, shared receive queues in srq.c, address
 * handles in ah.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/sr.h"
#include "core/fault.h"

/* ---------------- the state machine ---------------- */

#define M(x) IBV_QP_##x
struct qp_trans {
	bool valid;
	int req[5], opt[5]; /* indexed by RC, UC, UD, XRC_SEND (INI), XRC_RECV (TGT) */
};

enum {
	T_RC,
	T_UC,
	T_UD,
	T_INI,
	T_TGT
};

static int qpt_index(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC	     ? T_RC :
	       t == IBV_QPT_UC	     ? T_UC :
	       t == IBV_QPT_XRC_SEND ? T_INI :
	       t == IBV_QPT_XRC_RECV ? T_TGT :
				       T_UD;
}

/* [cur][next], as in IBTA 10.3 / the kernel's qp_state_table */
static const struct qp_trans qp_table[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[IBV_QPS_RESET] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_INIT] = { .valid = true,
			.req = { [T_RC] = M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS),
				 [T_UC] = M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS),
				 [T_UD] = M(PKEY_INDEX) | M(PORT) | M(QKEY),
				 [T_INI] = M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS),
				 [T_TGT] = M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS) } },
		[IBV_QPS_ERR] = { .valid = true },
	},
	[IBV_QPS_INIT] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_INIT] = { .valid = true,
			.opt = { [T_RC] = M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS),
				 [T_UC] = M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS),
				 [T_UD] = M(PKEY_INDEX) | M(PORT) | M(QKEY),
				 [T_INI] = M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS),
				 [T_TGT] = M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS) } },
		[IBV_QPS_RTR] = { .valid = true,
			.req = { [T_RC] = M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN) | M(MAX_DEST_RD_ATOMIC) |
					  M(MIN_RNR_TIMER),
				 [T_UC] = M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN),
				 [T_INI] = M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN),
				 [T_TGT] = M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN) | M(MAX_DEST_RD_ATOMIC) |
					   M(MIN_RNR_TIMER) },
			.opt = { [T_RC] = M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX),
				 [T_UC] = M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX),
				 [T_UD] = M(PKEY_INDEX) | M(QKEY),
				 [T_INI] = M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX),
				 [T_TGT] = M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX) } },
	},
	[IBV_QPS_RTR] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_RTS] = { .valid = true,
			.req = { [T_RC] = M(SQ_PSN) | M(TIMEOUT) | M(RETRY_CNT) | M(RNR_RETRY) | M(MAX_QP_RD_ATOMIC),
				 [T_UC] = M(SQ_PSN),
				 [T_UD] = M(SQ_PSN),
				 [T_INI] = M(SQ_PSN) | M(TIMEOUT) | M(RETRY_CNT) | M(RNR_RETRY) | M(MAX_QP_RD_ATOMIC),
				 [T_TGT] = M(TIMEOUT) | M(SQ_PSN) },
			.opt = { [T_RC] = M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(MIN_RNR_TIMER) |
					  M(PATH_MIG_STATE),
				 [T_UC] = M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(PATH_MIG_STATE),
				 [T_UD] = M(CUR_STATE) | M(QKEY),
				 [T_INI] = M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(PATH_MIG_STATE),
				 [T_TGT] = M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(MIN_RNR_TIMER) |
					   M(PATH_MIG_STATE) } },
	},
	[IBV_QPS_RTS] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_RTS] = { .valid = true,
			.opt = { [T_RC] = M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) | M(PATH_MIG_STATE) |
					  M(MIN_RNR_TIMER),
				 [T_UC] = M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) | M(PATH_MIG_STATE),
				 [T_UD] = M(CUR_STATE) | M(QKEY),
				 [T_INI] = M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) | M(PATH_MIG_STATE),
				 [T_TGT] = M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) | M(PATH_MIG_STATE) |
					   M(MIN_RNR_TIMER) } },
		[IBV_QPS_SQD] = { .valid = true,
			.opt = { [T_RC] = M(EN_SQD_ASYNC_NOTIFY), [T_UC] = M(EN_SQD_ASYNC_NOTIFY),
				 [T_UD] = M(EN_SQD_ASYNC_NOTIFY), [T_INI] = M(EN_SQD_ASYNC_NOTIFY),
				 [T_TGT] = M(EN_SQD_ASYNC_NOTIFY) } },
	},
	[IBV_QPS_SQD] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_RTS] = { .valid = true,
			.opt = { [T_RC] = M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(MIN_RNR_TIMER) |
					  M(PATH_MIG_STATE),
				 [T_UC] = M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(PATH_MIG_STATE),
				 [T_UD] = M(CUR_STATE) | M(QKEY),
				 [T_INI] = M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(PATH_MIG_STATE),
				 [T_TGT] = M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(MIN_RNR_TIMER) |
					   M(PATH_MIG_STATE) } },
		[IBV_QPS_SQD] = { .valid = true,
			.opt = { [T_RC] = M(PORT) | M(AV) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX) |
					  M(MIN_RNR_TIMER) | M(PATH_MIG_STATE) | M(TIMEOUT) | M(RETRY_CNT) | M(RNR_RETRY) |
					  M(MAX_QP_RD_ATOMIC) | M(MAX_DEST_RD_ATOMIC),
				 [T_UC] = M(AV) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX) | M(PATH_MIG_STATE),
				 [T_UD] = M(PKEY_INDEX) | M(QKEY),
				 [T_INI] = M(PORT) | M(AV) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX) |
					   M(PATH_MIG_STATE) | M(TIMEOUT) | M(RETRY_CNT) | M(RNR_RETRY) |
					   M(MAX_QP_RD_ATOMIC),
				 [T_TGT] = M(PORT) | M(AV) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX) |
					   M(MIN_RNR_TIMER) | M(PATH_MIG_STATE) | M(TIMEOUT) | M(MAX_DEST_RD_ATOMIC) } },
	},
	[IBV_QPS_SQE] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_RTS] = { .valid = true,
			.opt = { [T_UC] = M(CUR_STATE) | M(ACCESS_FLAGS), [T_UD] = M(CUR_STATE) | M(QKEY) } },
	},
	[IBV_QPS_ERR] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
	},
};
#undef M

/* iwarp: siw takes any attribute mask (the connection, not these
 * attributes, makes an iWARP QP work), so only the transition is checked. */
static bool modify_is_ok(enum ibv_qp_state cur, enum ibv_qp_state next, enum ibv_qp_type type, int mask, bool iwarp)
{
	if (cur > IBV_QPS_ERR || next > IBV_QPS_ERR)
		return false;
	if ((mask & IBV_QP_CUR_STATE) && cur != IBV_QPS_RTR && cur != IBV_QPS_RTS && cur != IBV_QPS_SQD &&
	    cur != IBV_QPS_SQE)
		return false;
	const struct qp_trans *t = &qp_table[cur][next];
	if (!t->valid)
		return false;
	/* an RC or XRC QP never enters SQE */
	if ((type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV) && cur == IBV_QPS_SQE)
		return false;
	if (iwarp)
		return true;
	int q = qpt_index(type);
	int req = t->req[q], opt = t->opt[q];
	if ((mask & req) != req)
		return false;
	if (mask & ~(req | opt | IBV_QP_STATE))
		return false;
	return true;
}

/* What uverbs asks capable(CAP_NET_RAW) for: a privileged Q_Key, a raw
 * packet QP. */
static bool have_net_raw(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &h, d))
		return false;
	return d[CAP_TO_INDEX(CAP_NET_RAW)].effective & CAP_TO_MASK(CAP_NET_RAW);
}

static int check_attr(struct sr_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	struct sr_context *ctx = qp->ctx;

	/* uverbs (modify_qp): a Q_Key with the high bit set is privileged */
	if ((mask & IBV_QP_QKEY) && (attr->qkey & 0x80000000u) && !have_net_raw())
		return EPERM;
	/* _ib_modify_qp(): alternate paths (APM) are IB only, "banned in
	 * roce mode"; iWARP has none either */
	if (mask & IBV_QP_ALT_PATH)
		return EINVAL;

	if ((mask & IBV_QP_PORT) && attr->port_num != 1)
		return EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index >= SR_MAX_PKEYS)
		return EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > SR_MAX_RD_ATOMIC)
		return EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr->max_dest_rd_atomic > SR_MAX_RD_ATOMIC)
		return EINVAL;
	if ((mask & IBV_QP_PATH_MTU) && (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096))
		return EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && attr->retry_cnt > 7)
		return EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && attr->rnr_retry > 7)
		return EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31)
		return EINVAL;
	if ((mask & IBV_QP_TIMEOUT) && attr->timeout > 31)
		return EINVAL;
	/* rxe keeps the flags it is given and acts on the remote ones, mlx5
	 * ignores the others: a region's flag (rdma-core's ODP tests give a
	 * QP IBV_ACCESS_ON_DEMAND) is no error; a bit no verb knows is */
	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    (attr->qp_access_flags &
	     ~(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
	       IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB |
	       IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_OPTIONAL_RANGE)))
		return EINVAL;
	if ((mask & IBV_QP_DEST_QPN) && attr->dest_qp_num > 0xffffff)
		return EINVAL;
	if (mask & IBV_QP_AV) {
		struct sr_av av;
		int err = sr_av_from_ah_attr(ctx, &attr->ah_attr, &av);
		if (err)
			return err;
	}
	if ((mask & IBV_QP_PATH_MIG_STATE) && attr->path_mig_state != IBV_MIG_MIGRATED &&
	    attr->path_mig_state != IBV_MIG_REARM && attr->path_mig_state != IBV_MIG_ARMED)
		return EINVAL;
	return 0;
}

int sr_av_from_ah_attr(struct sr_context *ctx, const struct ibv_ah_attr *a, struct sr_av *av)
{
	/* RoCE carries every packet in IP: the GRH (global routing) is mandatory */
	if (!a->is_global)
		return EINVAL;
	/* uverbs: the AV names a valid port (1); rdma_get_gid_attr(): an
	 * index past the GID table is EINVAL, an empty entry ENODATA */
	if (a->port_num != 1)
		return EINVAL;
	if (a->grh.sgid_index >= SR_MAX_ADDRS)
		return EINVAL;
	if (a->grh.sgid_index >= ctx->ngid)
		return ENODATA;
	memset(av, 0, sizeof(*av));
	av->sgid_index = a->grh.sgid_index;
	av->dgid = a->grh.dgid;
	av->hop_limit = a->grh.hop_limit;
	av->traffic_class = a->grh.traffic_class;
	av->flow_label = a->grh.flow_label;
	av->sl = a->sl;
	sr_gid_to_sockaddr(ctx, &a->grh.dgid, &av->dst);
	sr_gid_to_sockaddr(ctx, &ctx->gid[a->grh.sgid_index].gid, &av->src);
	if (IN6_IS_ADDR_UNSPECIFIED(&av->dst.sin6_addr))
		return EINVAL;
	/* IPv4 and IPv6 do not mix on one path */
	if (IN6_IS_ADDR_V4MAPPED(&av->dst.sin6_addr) != IN6_IS_ADDR_V4MAPPED(&av->src.sin6_addr))
		return EINVAL;
	return 0;
}

/* ---------------- creation ---------------- */

static void sq_set_stride(struct sr_sq *sq)
{
	size_t area = sq->max_sge * sizeof(struct ibv_sge);
	if (area < sq->max_inline)
		area = sq->max_inline;
	size_t s = sizeof(struct sr_send_wqe) + area;
	sq->stride = (uint32_t)((s + 15) & ~(size_t)15);
}

static void rq_set_stride(struct sr_rq *rq)
{
	size_t s = sizeof(struct sr_recv_wqe) + rq->max_sge * sizeof(struct ibv_sge);
	rq->stride = (uint32_t)((s + 7) & ~(size_t)7);
}

int sr_rq_init(struct sr_rq *rq, struct ibv_pd *pd, uint64_t type, uint32_t max_wr, uint32_t max_sge)
{
	rq->max_wr = max_wr ? max_wr : 1;
	rq->max_sge = max_sge ? max_sge : 1;
	rq->mask = sr_ring_slots(rq->max_wr) - 1;
	rq_set_stride(rq);
	rq->buf = sr_ring_alloc(pd, ((size_t)rq->mask + 1) * rq->stride, type, &rq->mem);
	return rq->buf ? 0 : ENOMEM;
}

/* sr_qp.serial: 64 bits never wrap, so a destroyed QP's number is never
 * anyone else's (a type 2 memory window keeps naming its QP by it) */
static _Atomic uint64_t qp_serial_next = 1;

static struct ibv_qp *create_qp(struct ibv_context *c, struct ibv_qp_init_attr_ex *ia);

/* As uverbs: the PD, CQs and SRQ are resolved in c, then the driver checks
 * the attributes. */
struct ibv_qp *sr_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *ia)
{
	struct sr_obj_refs r = { .n = 0 };
	struct ibv_qp *qp = NULL;
	int err;

	/* an XRC_RECV (TGT) QP has an XRC domain and no PD (nor CQs or
	 * queues: what it receives goes to the domain's SRQs); every other
	 * type a PD */
	if (ia->qp_type == IBV_QPT_XRC_RECV) {
		if (!(ia->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !ia->xrcd) {
			errno = EINVAL;
			return NULL;
		}
		if (!(err = sr_obj_ref(&r, ia->xrcd, SR_OBJ_XRCD, c)))
			qp = create_qp(c, ia);
		else
			errno = err;
		sr_obj_unref(&r);
		return qp;
	}
	if (!(ia->comp_mask & IBV_QP_INIT_ATTR_PD) || !ia->pd) {
		errno = EINVAL;
		return NULL;
	}
	if ((err = sr_obj_ref(&r, ia->pd, SR_OBJ_PD, c)) ||
	    (ia->send_cq && (err = sr_obj_ref(&r, ia->send_cq, SR_OBJ_CQ, c))) ||
	    (ia->recv_cq && ia->recv_cq != ia->send_cq && (err = sr_obj_ref(&r, ia->recv_cq, SR_OBJ_CQ, c))) ||
	    (ia->srq && (err = sr_obj_ref(&r, ia->srq, SR_OBJ_SRQ, c))))
		errno = err;
	else
		qp = create_qp(c, ia);
	sr_obj_unref(&r);
	return qp;
}

static struct ibv_qp *create_qp(struct ibv_context *c, struct ibv_qp_init_attr_ex *app)
{
	struct sr_context *ctx = to_sctx(c);
	/* the attributes as the QP takes them (an XRC QP ignores some);
	 * the application's get the capabilities back */
	struct ibv_qp_init_attr_ex a = *app, *ia = &a;
	struct sr_qp *qp;
	int err;

	/* create flags are accepted when there are none, as rxe does (it
	 * refuses any flag with EOPNOTSUPP); rdma-core's tests set the mask
	 * with no flags for devices that are not mlx4/mlx5 */
	if ((ia->comp_mask & ~(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
			       IBV_QP_INIT_ATTR_CREATE_FLAGS)) ||
	    ((ia->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && ia->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* as uverbs then rxe: a type uverbs does not know is EINVAL, a raw
	 * packet QP needs CAP_NET_RAW, the others rxe does not have */
	switch (ia->qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		break;
	case IBV_QPT_RAW_PACKET:
	case IBV_QPT_DRIVER:
		errno = ia->qp_type == IBV_QPT_RAW_PACKET && !have_net_raw() ? EPERM : EOPNOTSUPP;
		return NULL;
	default:
		errno = EINVAL;
		return NULL;
	}
	if (ctx->dev->conf.type == SR_DEV_IWARP && ia->qp_type != IBV_QPT_RC) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	bool xrc = ia->qp_type == IBV_QPT_XRC_SEND || ia->qp_type == IBV_QPT_XRC_RECV;
	bool tgt = ia->qp_type == IBV_QPT_XRC_RECV;
	/* an XRC QP has no receive queue (its TGT end has the domain's SRQs)
	 * and only an INI end a send queue: what it is not given is ignored,
	 * as mlx5 ignores it */
	if (xrc) {
		ia->srq = NULL;
		ia->recv_cq = NULL;
		ia->cap.max_recv_wr = ia->cap.max_recv_sge = 0;
		if (tgt) {
			ia->send_cq = NULL;
			ia->pd = NULL;
			memset(&ia->cap, 0, sizeof(ia->cap));
		}
	}
	if ((!tgt && !ia->send_cq) || (!xrc && !ia->recv_cq)) {
		errno = EINVAL;
		return NULL;
	}
	struct ibv_qp_cap *cap = &ia->cap;
	if (cap->max_send_wr > SR_MAX_QP_WR || cap->max_send_sge > SR_MAX_SGE || cap->max_inline_data > SR_MAX_INLINE ||
	    (!ia->srq && (cap->max_recv_wr > SR_MAX_QP_WR || cap->max_recv_sge > SR_MAX_SGE))) {
		errno = EINVAL;
		return NULL;
	}
	if (ia->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		uint64_t ok = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
			      IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
			      IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
			      IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
		if (ctx->dev->conf.type == SR_DEV_IWARP)
			ok &= ~(uint64_t)(IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
					  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_BIND_MW |
					  IBV_QP_EX_WITH_LOCAL_INV);
		/* rdma-core's rxe provider: what each QP type may ask for */
		else if (ia->qp_type == IBV_QPT_UD)
			ok &= IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
		else if (tgt)
			ok = 0;
		else if (ia->qp_type == IBV_QPT_UC)
			ok &= IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
			      IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV;
		if (ia->send_ops_flags & ~ok) {
			errno = EOPNOTSUPP;
			return NULL;
		}
	}

	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	if ((err = sr_obj_add(ctx, &qp->obj, &qp->ibqp.qp_base, SR_OBJ_QP))) {
		free(qp);
		errno = err;
		return NULL;
	}
	qp->ctx = ctx;
	qp->serial = atomic_fetch_add(&qp_serial_next, 1);
	pthread_mutex_init(&qp->lock, NULL);
	qp->sq.max_wr = cap->max_send_wr ? cap->max_send_wr : 1;
	qp->sq.max_sge = cap->max_send_sge ? cap->max_send_sge : 1;
	/* room for at least one SGE worth of inline, rounded like rxe */
	qp->sq.max_inline = cap->max_inline_data;
	if (qp->sq.max_inline < qp->sq.max_sge * sizeof(struct ibv_sge))
		qp->sq.max_inline = qp->sq.max_sge * sizeof(struct ibv_sge);
	if (qp->sq.max_inline > SR_MAX_INLINE)
		qp->sq.max_inline = SR_MAX_INLINE;
	sq_set_stride(&qp->sq);
	qp->sq.mask = sr_ring_slots(qp->sq.max_wr) - 1;
	qp->sq.buf = sr_ring_alloc(ia->pd, ((size_t)qp->sq.mask + 1) * qp->sq.stride, SR_RES_TYPE_SQ, &qp->sq.mem);
	if (!qp->sq.buf)
		goto nomem;
	if (ia->qp_type == IBV_QPT_UD) {
		qp->sq.ud_av = calloc((size_t)qp->sq.mask + 1, sizeof(*qp->sq.ud_av));
		if (!qp->sq.ud_av)
			goto nomem;
	}
	if (!ia->srq && !xrc) {
		if (sr_rq_init(&qp->rq, ia->pd, SR_RES_TYPE_RQ, cap->max_recv_wr, cap->max_recv_sge))
			goto nomem;
	}
	qp->scq = to_scq(ia->send_cq);
	qp->rcq = to_scq(ia->recv_cq);
	qp->srq = ia->srq ? to_ssrq(ia->srq) : NULL;
	qp->sq_sig_all = ia->sq_sig_all;
	qp->cap.max_send_wr = qp->sq.max_wr;
	qp->cap.max_send_sge = qp->sq.max_sge;
	qp->cap.max_inline_data = qp->sq.max_inline;
	qp->cap.max_recv_wr = ia->srq || xrc ? 0 : qp->rq.max_wr;
	qp->cap.max_recv_sge = ia->srq || xrc ? 0 : qp->rq.max_sge;
	if (tgt)
		qp->cap.max_send_wr = qp->cap.max_send_sge = qp->cap.max_inline_data = 0;
	qp->rpd = ia->pd ? to_spd(ia->pd) : NULL;
	qp->rctx = ctx;
	qp->xrcd = tgt ? (struct sr_xrcd *)ia->xrcd : NULL;
	*cap = qp->cap;
	app->cap = qp->cap;
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->attr.cur_qp_state = IBV_QPS_RESET;
	qp->attr.path_mtu = IBV_MTU_1024;
	qp->attr.port_num = 1;
	qp->attr.timeout = 14;
	qp->attr.retry_cnt = 7;
	qp->attr.rnr_retry = 7;
	qp->attr.path_mig_state = IBV_MIG_MIGRATED;

	struct ibv_qp *q = &qp->ibqp.qp_base;
	q->context = c;
	q->qp_context = ia->qp_context;
	q->pd = ia->pd;
	q->send_cq = ia->send_cq;
	q->recv_cq = ia->recv_cq;
	q->srq = ia->srq;
	q->qp_type = ia->qp_type;
	q->state = IBV_QPS_RESET;
	pthread_mutex_init(&q->mutex, NULL);
	pthread_cond_init(&q->cond, NULL);

	if (ia->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		qp->has_qp_ex = true;
		qp->send_ops_flags = ia->send_ops_flags;
		sr_qp_ex_init(qp);
	}

	qp->stats = &sr_stats_sink;
	err = sr_fault_qp_init(qp);
	if (!err) {
		err = ctx->dev->tops->qp_create(qp);
		if (err)
			sr_fault_qp_fini(qp);
	}
	if (!err) {
		err = sr_ctx_add_qp(ctx, qp);
		if (err)
			ctx->dev->tops->qp_destroy(qp);
	}
	if (err)
		goto fail;
	qp->stats = sr_stats_qp_open(ctx->dev->conf.name, ctx->dev->conf.type, q->qp_num, q->qp_type, &qp->stats_slot);
	if (ia->pd)
		sr_pd_use(ia->pd, 1);
	if (tgt)
		sr_xrc_tgt_add(qp);
	if (ia->qp_type == IBV_QPT_UD)
		atomic_fetch_add(&ctx->prog.n_ud_qps, 1);
	/* what destroying a CQ or SRQ checks, without walking every QP */
	if (qp->scq)
		atomic_fetch_add(&qp->scq->n_qps, 1);
	if (qp->rcq)
		atomic_fetch_add(&qp->rcq->n_qps, 1);
	if (qp->srq)
		atomic_fetch_add(&qp->srq->n_qps, 1);
	return q;
nomem:
	err = ENOMEM;
fail:
	sr_obj_del(&qp->obj);
	sr_ring_free(qp->sq.buf, &qp->sq.mem);
	free(qp->sq.ud_av);
	sr_ring_free(qp->rq.buf, &qp->rq.mem);
	free(qp);
	errno = err;
	return NULL;
}

struct ibv_qp *sr_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.qp_context = attr->qp_context;
	ia.send_cq = attr->send_cq;
	ia.recv_cq = attr->recv_cq;
	ia.srq = attr->srq;
	ia.cap = attr->cap;
	ia.qp_type = attr->qp_type;
	ia.sq_sig_all = attr->sq_sig_all;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	ia.pd = pd;
	/* the command goes to the PD's context: the PD is resolved there first */
	int err;
	struct sr_obj *pdo = sr_obj_get(pd, SR_OBJ_PD, NULL, &err);
	if (!pdo) {
		errno = err;
		return NULL;
	}
	qp = sr_create_qp_ex(pd->context, &ia);
	sr_obj_put(pdo);
	if (qp)
		attr->cap = ia.cap;
	return qp;
}

/* ---------------- flushing and errors ---------------- */

static void flush_rq(struct sr_qp *qp)
{
	struct ibv_wc wc;
	if (qp->srq)
		return;
	while (qp->rq.head != qp->rq.tail) {
		struct sr_recv_wqe *w = sr_rq_wqe(&qp->rq, qp->rq.tail);
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = w->wr_id;
		wc.status = IBV_WC_WR_FLUSH_ERR;
		wc.opcode = IBV_WC_RECV;
		wc.qp_num = qp->ibqp.qp_base.qp_num;
		qp->rq.tail++;
		sr_cq_push(qp->rcq, &wc, false);
	}
}

static enum ibv_wc_opcode wc_opcode_for(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	default:
		return IBV_WC_SEND;
	}
}

/* In SQD: once no started WQE is outstanding, the drain is over. */
void sr_sq_check_drained(struct sr_qp *qp)
{
	if (qp->attr.qp_state != IBV_QPS_SQD || qp->sqd_notified)
		return;
	for (uint32_t i = qp->sq.tail; i != qp->sq.head; i++)
		if (sr_sq_wqe(&qp->sq, i)->state == SR_WQE_PENDING)
			return;
	qp->sqd_notified = true;
	if (qp->attr.en_sqd_async_notify)
		sr_post_async_event(qp->ctx, IBV_EVENT_SQ_DRAINED, &qp->ibqp.qp_base);
}

void sr_sq_complete(struct sr_qp *qp)
{
	struct sr_sq *sq = &qp->sq;
	struct ibv_wc wc;

	while (sq->tail != sq->head) {
		struct sr_send_wqe *w = sr_sq_wqe(sq, sq->tail);
		if (w->state != SR_WQE_DONE)
			break;
		sq->tail++;
		if (sq->cur == sq->tail - 1)
			sq->cur = sq->tail;
		/* errors always complete, success only when signaled */
		if (w->status == IBV_WC_SUCCESS && !qp->sq_sig_all && !(w->send_flags & IBV_SEND_SIGNALED))
			continue;
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = w->wr_id;
		wc.status = w->status;
		wc.opcode = wc_opcode_for(w->opcode);
		wc.qp_num = qp->ibqp.qp_base.qp_num;
		if (w->status == IBV_WC_SUCCESS && (w->opcode == IBV_WR_RDMA_READ))
			wc.byte_len = (uint32_t)w->length;
		if (w->status == IBV_WC_SUCCESS &&
		    (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD))
			wc.byte_len = 8;
		sr_cq_push(qp->scq, &wc, false);
	}
	sr_sq_check_drained(qp);
}

void sr_flush_sq(struct sr_qp *qp)
{
	struct sr_sq *sq = &qp->sq;
	for (uint32_t i = sq->tail; i != sq->head; i++) {
		struct sr_send_wqe *w = sr_sq_wqe(sq, i);
		if (w->state != SR_WQE_DONE) {
			w->state = SR_WQE_DONE;
			w->status = IBV_WC_WR_FLUSH_ERR;
		}
	}
	sr_sq_complete(qp);
	sq->cur = sq->head;
}

void sr_flush_qp(struct sr_qp *qp)
{
	sr_flush_sq(qp);
	flush_rq(qp);
}

void sr_qp_to_error(struct sr_qp *qp, enum ibv_event_type ev)
{
	if (qp->attr.qp_state == IBV_QPS_ERR)
		return;
	qp->attr.qp_state = IBV_QPS_ERR;
	qp->ibqp.qp_base.state = IBV_QPS_ERR;
	sr_flush_qp(qp);
	if (ev != (enum ibv_event_type) - 1)
		sr_post_async_event(qp->ctx, ev, &qp->ibqp.qp_base);
	if (qp->srq && !qp->last_wqe_reached_sent) {
		qp->last_wqe_reached_sent = true;
		sr_post_async_event(qp->ctx, IBV_EVENT_QP_LAST_WQE_REACHED, &qp->ibqp.qp_base);
	}
}

/* ---------------- modify / query / destroy ---------------- */

static int modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct sr_qp *qp = to_sqp(ibqp);
	enum ibv_qp_state cur, next;
	int err;

	/* rdma-core's ibv_cmd_modify_qp(), which the rxe and siw providers
	 * use: IBV_QP_RATE_LIMIT and later bits need the _ex command */
	if (mask & ~(IBV_QP_RATE_LIMIT - 1))
		return EOPNOTSUPP;
	if (qp->ctx->dev->tops->modify_prepare)
		qp->ctx->dev->tops->modify_prepare(qp, attr, mask);
	pthread_mutex_lock(&qp->lock);
	cur = qp->attr.qp_state;
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur &&
	    !(attr->cur_qp_state == IBV_QPS_SQE && cur == IBV_QPS_RTS)) {
		pthread_mutex_unlock(&qp->lock);
		return EINVAL;
	}
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if (!modify_is_ok(cur, next, ibqp->qp_type, mask, qp->ctx->dev->conf.type == SR_DEV_IWARP)) {
		pthread_mutex_unlock(&qp->lock);
		return EINVAL;
	}
	/* a dead device takes QPs to RESET and ERR only (sr_ctx_fatal) */
	if (atomic_load(&qp->ctx->fatal) && next != IBV_QPS_RESET && next != IBV_QPS_ERR) {
		pthread_mutex_unlock(&qp->lock);
		return EIO;
	}
	err = check_attr(qp, attr, mask);
	if (err) {
		pthread_mutex_unlock(&qp->lock);
		return err;
	}

	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->attr.qp_access_flags = attr->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		qp->attr.pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT)
		qp->attr.port_num = attr->port_num;
	if (mask & IBV_QP_QKEY)
		qp->attr.qkey = attr->qkey;
	if (mask & IBV_QP_AV) {
		qp->attr.ah_attr = attr->ah_attr;
		sr_av_from_ah_attr(qp->ctx, &attr->ah_attr, &qp->av);
	}
	if (mask & IBV_QP_ALT_PATH) {
		qp->attr.alt_ah_attr = attr->alt_ah_attr;
		qp->attr.alt_pkey_index = attr->alt_pkey_index;
		qp->attr.alt_port_num = attr->alt_port_num;
		qp->attr.alt_timeout = attr->alt_timeout;
	}
	/* as rxe: the path MTU is the caller's (up to 4096, checked above),
	 * even above the port's active MTU -- the CM's passive side takes the
	 * REQ's, and both ends must cut packets alike */
	if (mask & IBV_QP_PATH_MTU)
		qp->attr.path_mtu = attr->path_mtu;
	if (mask & IBV_QP_TIMEOUT)
		qp->attr.timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		qp->attr.retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		qp->attr.rnr_retry = attr->rnr_retry;
	if (mask & IBV_QP_RQ_PSN)
		qp->attr.rq_psn = attr->rq_psn & 0xffffff;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		qp->attr.max_rd_atomic = attr->max_rd_atomic ? attr->max_rd_atomic : 1;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		qp->attr.min_rnr_timer = attr->min_rnr_timer;
	if (mask & IBV_QP_SQ_PSN)
		qp->attr.sq_psn = attr->sq_psn & 0xffffff;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		qp->attr.max_dest_rd_atomic = attr->max_dest_rd_atomic ? attr->max_dest_rd_atomic : 1;
	if (mask & IBV_QP_PATH_MIG_STATE)
		qp->attr.path_mig_state = attr->path_mig_state;
	if (mask & IBV_QP_DEST_QPN)
		qp->attr.dest_qp_num = attr->dest_qp_num;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		qp->attr.en_sqd_async_notify = attr->en_sqd_async_notify;

	err = qp->ctx->dev->tops->qp_modify(qp, attr, mask, cur);
	if (err) {
		pthread_mutex_unlock(&qp->lock);
		return err;
	}
	if (mask & IBV_QP_STATE) {
		qp->attr.qp_state = next;
		qp->attr.cur_qp_state = next;
		ibqp->state = next;
		if (next == IBV_QPS_ERR) {
			sr_flush_qp(qp);
			if (qp->srq && !qp->last_wqe_reached_sent) {
				qp->last_wqe_reached_sent = true;
				sr_post_async_event(qp->ctx, IBV_EVENT_QP_LAST_WQE_REACHED, ibqp);
			}
		} else if (next == IBV_QPS_RESET) {
			/* RESET discards everything without completions, and
			 * the unread ones of the QP's past */
			qp->sq.head = qp->sq.tail = qp->sq.cur = 0;
			qp->rq.head = qp->rq.tail = 0;
			if (qp->scq)
				sr_cq_clean(qp->scq, ibqp->qp_num);
			if (qp->rcq && qp->rcq != qp->scq)
				sr_cq_clean(qp->rcq, ibqp->qp_num);
			qp->last_wqe_reached_sent = false;
		} else if (next == IBV_QPS_SQD) {
			qp->sqd_notified = false;
			sr_sq_check_drained(qp);
		} else if (next == IBV_QPS_RTS && (cur == IBV_QPS_SQD || cur == IBV_QPS_SQE)) {
			qp->ctx->dev->tops->sq_kick(qp);
		}
	}
	pthread_mutex_unlock(&qp->lock);
	return 0;
}

/* The QP a handle names: its own, or an ibv_open_qp handle's TGT QP. */
static struct ibv_qp *handle_qp(struct sr_obj *o, struct ibv_qp *ibqp)
{
	return o->opened ? &SR_CONTAINER(o, struct sr_qp_open, obj)->qp->ibqp.qp_base : ibqp;
}

int sr_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	int err;
	struct sr_obj *o = sr_obj_get(ibqp, SR_OBJ_QP, NULL, &err);

	if (!o)
		return err;
	struct ibv_qp *q = handle_qp(o, ibqp);
	err = modify_qp(q, attr, mask);
	if (q != ibqp)
		ibqp->state = q->state; /* an opened handle shows its QP's state */
	sr_obj_put(o);
	return err;
}

static int query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init)
{
	struct sr_qp *qp = to_sqp(ibqp);

	pthread_mutex_lock(&qp->lock);
	*attr = qp->attr;
	attr->cap = qp->cap;
	attr->sq_draining = 0;
	memset(init, 0, sizeof(*init));
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = qp->cap;
	init->qp_type = ibqp->qp_type;
	init->sq_sig_all = qp->sq_sig_all;
	pthread_mutex_unlock(&qp->lock);
	return 0;
}

int sr_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init)
{
	int err;
	struct sr_obj *o = sr_obj_get(ibqp, SR_OBJ_QP, NULL, &err);

	if (!o)
		return err;
	err = query_qp(handle_qp(o, ibqp), attr, mask, init);
	if (o->opened)
		init->qp_context = ibqp->qp_context;
	sr_obj_put(o);
	return err;
}

static int qp_teardown(struct sr_qp *qp, struct sr_obj *o);

/* A TGT QP lives while a handle of it does (the creator's and those of
 * ibv_open_qp), as the kernel's shared XRC QPs. */
int sr_destroy_qp(struct ibv_qp *ibqp)
{
	struct sr_qp *qp = to_sqp(ibqp);
	struct sr_obj *o;
	int err;

	if (!(o = sr_obj_claim(ibqp, SR_OBJ_QP, &err)))
		return err;
	if (o->opened) {
		struct sr_qp_open *h = SR_CONTAINER(o, struct sr_qp_open, obj);

		qp = h->qp;
		sr_obj_del(o);
		free(h);
		return sr_xrc_tgt_put(qp) ? qp_teardown(qp, NULL) : 0;
	}
	if (ibqp->qp_type == IBV_QPT_XRC_RECV && !sr_xrc_tgt_put(qp)) {
		sr_obj_del(o); /* this handle goes; the QP stays for the others */
		return 0;
	}
	return qp_teardown(qp, o);
}

/* Destroys qp (o: its own handle, claimed; NULL once that is gone). */
static int qp_teardown(struct sr_qp *qp, struct sr_obj *o)
{
	struct ibv_qp *ibqp = &qp->ibqp.qp_base;
	struct sr_context *ctx = qp->ctx;

	/* As the kernel (uverbs): a QP still attached to a multicast group
	 * is not destroyed.  mcast_lock keeps an attach from slipping in
	 * between this check and the QP's death (mcast_attach.c). */
	pthread_mutex_lock(&ctx->mcast_lock);
	if (qp->n_mcast) {
		pthread_mutex_unlock(&ctx->mcast_lock);
		sr_obj_put(o);
		return EBUSY;
	}
	if (o)
		sr_obj_del(o);
	sr_ctx_remove_qp(ctx, qp);
	pthread_mutex_lock(&qp->lock);
	qp->dead = true;
	sr_qp_timer_disarm(qp);
	sr_qp_unpark(qp);
	pthread_mutex_unlock(&qp->lock);
	pthread_mutex_unlock(&ctx->mcast_lock);
	/* outside qp->lock: the transport talks to the daemon, and packets
	 * delivered meanwhile take ctx->lock before a qp->lock */
	ctx->dev->tops->qp_destroy(qp);
	sr_fault_qp_fini(qp);
	sr_stats_qp_close(qp->stats_slot, qp->stats);
	qp->stats = &sr_stats_sink;
	if (qp->sq.mem.pd || qp->rq.mem.pd) {
		/* the application's rings go back now, while its parent domain
		 * is sure to live (the QP itself is freed later): once receivers
		 * in flight are done, nothing touches a dead QP's rings */
		pthread_mutex_lock(&ctx->prog.lock);
		pthread_mutex_unlock(&ctx->prog.lock);
		pthread_mutex_lock(&qp->lock);
		sr_ring_free(qp->sq.buf, &qp->sq.mem);
		sr_ring_free(qp->rq.buf, &qp->rq.mem);
		qp->sq.buf = qp->rq.buf = NULL;
		pthread_mutex_unlock(&qp->lock);
	}
	if (ibqp->pd)
		sr_pd_use(ibqp->pd, -1);
	if (ibqp->qp_type == IBV_QPT_UD)
		atomic_fetch_sub(&ctx->prog.n_ud_qps, 1);
	if (qp->scq)
		atomic_fetch_sub(&qp->scq->n_qps, 1);
	if (qp->rcq)
		atomic_fetch_sub(&qp->rcq->n_qps, 1);
	if (qp->srq)
		atomic_fetch_sub(&qp->srq->n_qps, 1);
	sr_purge_async_events(ctx, ibqp);
	/* freed once the progress thread has let go of it, by the next
	 * destroy or the context's close (progress.c, release_zombies) */
	sr_reap_zombies(ctx);
	pthread_mutex_lock(&ctx->lock);
	qp->zombie_next = ctx->zombies;
	ctx->zombies = qp;
	pthread_mutex_unlock(&ctx->lock);
	sr_progress_wake(ctx);
	return 0;
}

/* ---------------- posting ---------------- */

/* What a QP of this type carries, as the kernel's rxe requester turns
 * work requests into packets (next_opcode) and runs local operations. */
static bool opcode_carried(enum ibv_qp_type t, enum ibv_wr_opcode op)
{
	if (t == IBV_QPT_XRC_SEND)
		t = IBV_QPT_RC; /* the rxe XRC patches' INI: what RC carries */
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return true;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_BIND_MW: /* rxe: RC and UC */
		return t == IBV_QPT_RC || t == IBV_QPT_UC;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		return t == IBV_QPT_RC;
	default:
		return false;
	}
}

/* Soft-iWARP carries what siw does plus RDMA Write with Immediate (RFC
 * 7306 Immediate Data): no Send with Immediate, no atomics, and neither
 * of the local operations (libsiw refuses BIND_MW and LOCAL_INV). */
bool sr_qp_opcode_carried(struct sr_qp *qp, enum ibv_wr_opcode op)
{
	if (qp->ctx->dev->conf.type == SR_DEV_IWARP && (op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_ATOMIC_CMP_AND_SWP ||
							op == IBV_WR_ATOMIC_FETCH_AND_ADD || sr_wr_is_local(op)))
		return false;
	return opcode_carried(qp->ibqp.qp_base.qp_type, op);
}

/* Soft-iWARP refuses at post what it does not carry, as libsiw.  Soft-RoCE
 * takes what rdma-core's rxe provider takes: any of these opcodes on any
 * QP type but a BIND_MW on UD; one the type does not carry (a READ on UD)
 * completes with LOC_QP_OP_ERR when the send queue reaches it (roce/req.c). */
bool sr_qp_opcode_ok(struct sr_qp *qp, enum ibv_wr_opcode op)
{
	if (qp->ctx->dev->conf.type == SR_DEV_IWARP)
		return sr_qp_opcode_carried(qp, op);
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		return true;
	case IBV_WR_BIND_MW:
		return qp->ibqp.qp_base.qp_type != IBV_QPT_UD;
	default:
		return false;
	}
}

/* The WQE of a local operation: no payload, no PSN; what it needs is kept
 * in the WQE's fields as sr_local_op reads them (mw.c). */
void sr_local_wqe_fill(struct sr_send_wqe *w, enum ibv_wr_opcode op, uint32_t inv_rkey, const struct ibv_mw *mw,
		       uint32_t rkey, const struct ibv_mw_bind_info *bi)
{
	w->opcode = op;
	w->length = 0;
	w->num_sge = 0;
	if (op == IBV_WR_LOCAL_INV) {
		w->imm_data = inv_rkey;
		return;
	}
	w->rkey = mw->rkey;
	w->imm_data = rkey;
	w->remote_addr = bi->addr;
	w->compare_add = bi->length;
	w->swap = (uint64_t)(bi->mr ? bi->mr->lkey : 0) << 32 | bi->mw_access_flags;
}

/* IBV_WR_BIND_MW and IBV_WR_LOCAL_INV (qp->lock held, room checked).  A
 * bind is checked as rdma-core's rxe provider checks it at post (no
 * SGEs, no immediate data), plus what would make it crash: no window,
 * or a length without a region; the rest is checked when it executes. */
static int post_local(struct sr_qp *qp, const struct ibv_send_wr *wr)
{
	struct sr_send_wqe *w;

	if (wr->opcode == IBV_WR_BIND_MW && (wr->num_sge || wr->imm_data || !wr->bind_mw.mw ||
					     (!wr->bind_mw.bind_info.mr && wr->bind_mw.bind_info.length)))
		return EINVAL;
	w = sr_sq_wqe(&qp->sq, qp->sq.head);
	memset(w, 0, sizeof(*w));
	w->wr_id = wr->wr_id;
	w->send_flags = wr->send_flags & ~IBV_SEND_INLINE;
	sr_local_wqe_fill(w, wr->opcode, wr->invalidate_rkey, wr->bind_mw.mw, wr->bind_mw.rkey, &wr->bind_mw.bind_info);
	w->state = SR_WQE_POSTED;
	w->status = IBV_WC_SUCCESS;
	qp->sq.head++;
	return 0;
}

/* Validate and enqueue one send WR (qp->lock held). */
static int post_one_send(struct sr_qp *qp, const struct ibv_send_wr *wr)
{
	struct sr_sq *sq = &qp->sq;
	struct sr_send_wqe *w;
	uint64_t len = 0;

	if (!sr_qp_opcode_ok(qp, wr->opcode) || qp->ibqp.qp_base.qp_type == IBV_QPT_XRC_RECV)
		return EINVAL; /* a TGT QP has no send queue */
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > sq->max_sge)
		return EINVAL;
	/* an iWARP Read Request names one sink buffer (max_sge_rd 1) */
	if (wr->opcode == IBV_WR_RDMA_READ && wr->num_sge > 1 && qp->ctx->dev->conf.type == SR_DEV_IWARP)
		return EINVAL;
	if (sq->head - sq->tail >= sq->max_wr)
		return ENOMEM;
	if (sr_wr_is_local(wr->opcode))
		return post_local(qp, wr);
	for (int i = 0; i < wr->num_sge; i++)
		len += sr_app_sge(wr->sg_list, i).length;
	if (len > SR_MAX_MSG_SIZE)
		return EINVAL;
	bool inl = (wr->send_flags & IBV_SEND_INLINE) && wr->opcode != IBV_WR_RDMA_READ &&
		   wr->opcode != IBV_WR_ATOMIC_CMP_AND_SWP && wr->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD;
	if (inl && len > sq->max_inline)
		return EINVAL;
	if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		if (len < 8 || (wr->wr.atomic.remote_addr & 7))
			return EINVAL;
	}
	/* a UD send names its destination; one longer than the MTU fails
	 * when it is sent, with LOC_LEN_ERR (roce/req.c) */
	bool ud_send = qp->ibqp.qp_base.qp_type == IBV_QPT_UD && sr_qp_opcode_carried(qp, wr->opcode);
	if (ud_send && !wr->wr.ud.ah)
		return EINVAL;

	w = sr_sq_wqe(sq, sq->head);
	memset(w, 0, sizeof(*w));
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->send_flags = wr->send_flags;
	w->length = len;
	if (wr->opcode == IBV_WR_SEND_WITH_INV)
		w->imm_data = wr->invalidate_rkey;
	else
		w->imm_data = wr->imm_data;
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		w->remote_addr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->compare_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
		w->length = 8;
		break;
	default:
		break;
	}
	if (qp->ibqp.qp_base.qp_type == IBV_QPT_XRC_SEND)
		w->remote_qpn = wr->qp_type.xrc.remote_srqn & 0xffffff; /* the XRCETH's SRQ */
	if (ud_send) {
		*sr_sq_av(sq, w) = to_sah(wr->wr.ud.ah)->av;
		w->remote_qpn = wr->wr.ud.remote_qpn & 0xffffff;
		w->remote_qkey = wr->wr.ud.remote_qkey;
	}
	if (inl) {
		uint8_t *p = sr_wqe_inline(sq, w);
		for (int i = 0; i < wr->num_sge; i++) {
			struct ibv_sge g = sr_app_sge(wr->sg_list, i);

			memcpy(p, (void *)(uintptr_t)g.addr, g.length);
			p += g.length;
		}
		w->inlined = true;
		w->num_sge = 0;
	} else {
		w->num_sge = (uint32_t)wr->num_sge;
		if (wr->num_sge)
			memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
	}
	w->state = SR_WQE_POSTED;
	w->status = IBV_WC_SUCCESS;
	sq->head++;
	return 0;
}

#ifdef SR_TSAN
char sr_tsan_wire; /* common/tsan.h */
#endif

int sr_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sr_qp *qp = to_sqp(ibqp);
	int err = 0;

	sr_tsan_post();

	pthread_mutex_lock(&qp->lock);
	enum ibv_qp_state st = qp->attr.qp_state;
	if (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR) {
		*bad = wr;
		pthread_mutex_unlock(&qp->lock);
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		err = post_one_send(qp, wr);
		if (err) {
			*bad = wr;
			break;
		}
	}
	if (qp->attr.qp_state == IBV_QPS_ERR)
		sr_flush_sq(qp);
	else
		qp->ctx->dev->tops->sq_kick(qp);
	pthread_mutex_unlock(&qp->lock);
	return err;
}

int sr_rq_post(struct sr_rq *rq, const struct ibv_recv_wr *wr)
{
	uint64_t len = 0;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge)
		return EINVAL;
	if (rq->head - rq->tail >= rq->max_wr)
		return ENOMEM;
	struct sr_recv_wqe *w = sr_rq_wqe(rq, rq->head);
	w->wr_id = wr->wr_id;
	w->num_sge = (uint32_t)wr->num_sge;
	for (int i = 0; i < wr->num_sge; i++) {
		w->sge[i] = sr_app_sge(wr->sg_list, i);
		len += w->sge[i].length;
	}
	w->length = len;
	rq->head++;
	return 0;
}

int sr_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sr_qp *qp = to_sqp(ibqp);
	int err = 0;

	pthread_mutex_lock(&qp->lock);
	if (qp->srq || sr_qp_is_xrc(qp) || qp->attr.qp_state == IBV_QPS_RESET) {
		*bad = wr;
		pthread_mutex_unlock(&qp->lock);
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		err = sr_rq_post(&qp->rq, wr);
		if (err) {
			*bad = wr;
			break;
		}
	}
	if (qp->attr.qp_state == IBV_QPS_ERR)
		flush_rq(qp);
	else
		qp->ctx->dev->tops->rq_kick(qp);
	pthread_mutex_unlock(&qp->lock);
	return err;
}

enum sr_rq_take sr_rq_take_fit(struct sr_qp *qp, struct sr_recv_wqe *out, uint64_t need)
{
	struct sr_rq *rq;
	struct sr_srq *srq = qp->srq;
	bool limit_event = false;
	enum sr_rq_take got = SR_RQ_TAKEN;

	if (srq) {
		pthread_mutex_lock(&srq->lock);
		rq = &srq->rq;
	} else {
		rq = &qp->rq;
	}
	struct sr_recv_wqe *w = sr_rq_wqe(rq, rq->tail);
	if (rq->head == rq->tail)
		got = SR_RQ_EMPTY;
	else if (w->length < need)
		got = SR_RQ_SHORT;
	if (got != SR_RQ_TAKEN) {
		if (srq)
			pthread_mutex_unlock(&srq->lock);
		return got;
	}
	memcpy(out, w, sizeof(*w) + w->num_sge * sizeof(struct ibv_sge));
	rq->tail++;
	if (srq) {
		if (srq->limit && rq->head - rq->tail < srq->limit) {
			srq->limit = 0; /* the limit event is one-shot until re-armed */
			limit_event = true;
		}
		pthread_mutex_unlock(&srq->lock);
		if (limit_event)
			sr_post_async_event(qp->ctx, IBV_EVENT_SRQ_LIMIT_REACHED, &srq->ibsrq);
	}
	return SR_RQ_TAKEN;
}

bool sr_rq_take(struct sr_qp *qp, struct sr_recv_wqe *out)
{
	return sr_rq_take_fit(qp, out, 0) == SR_RQ_TAKEN;
}
