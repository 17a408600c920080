/* The ibv_wr_* API (ibv_qp_ex).  Work requests are built straight into
 * the SQ between wr_start and wr_complete; wr_abort drops them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/sr.h"

static struct sr_qp *xqp(struct ibv_qp_ex *x)
{
	return (struct sr_qp *)x;
}

static struct sr_send_wqe *wr_new(struct ibv_qp_ex *x, enum ibv_wr_opcode op)
{
	struct sr_qp *qp = xqp(x);
	struct sr_sq *sq = &qp->sq;
	if (qp->wr_error)
		return NULL;
	if (!sr_qp_opcode_ok(qp, op)) {
		qp->wr_error = EINVAL;
		return NULL;
	}
	/* rdma-core's rxe provider: a full SQ, too many SGEs or too much
	 * inline data make ibv_wr_complete() return ENOSPC */
	if (sq->head - sq->tail >= sq->max_wr) {
		qp->wr_error = ENOSPC;
		return NULL;
	}
	struct sr_send_wqe *w = sr_sq_wqe(sq, sq->head);
	memset(w, 0, sizeof(*w));
	w->wr_id = x->wr_id;
	w->send_flags = x->wr_flags;
	w->opcode = op;
	w->state = SR_WQE_POSTED;
	sq->head++;
	return w;
}

static struct sr_send_wqe *wr_last(struct ibv_qp_ex *x)
{
	struct sr_qp *qp = xqp(x);
	if (qp->wr_error || qp->sq.head == qp->wr_start_head)
		return NULL;
	return sr_sq_wqe(&qp->sq, qp->sq.head - 1);
}

static void x_send(struct ibv_qp_ex *x)
{
	wr_new(x, IBV_WR_SEND);
}
static void x_send_imm(struct ibv_qp_ex *x, __be32 imm)
{
	struct sr_send_wqe *w = wr_new(x, IBV_WR_SEND_WITH_IMM);
	if (w)
		w->imm_data = imm;
}
static void x_send_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	struct sr_send_wqe *w = wr_new(x, IBV_WR_SEND_WITH_INV);
	if (w)
		w->imm_data = rkey;
}
static void x_bind_mw(struct ibv_qp_ex *x, struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *bi)
{
	struct sr_send_wqe *w = wr_new(x, IBV_WR_BIND_MW);
	if (!w)
		return;
	if (!mw || !bi || (!bi->mr && bi->length)) {
		xqp(x)->wr_error = EINVAL;
		return;
	}
	sr_local_wqe_fill(w, IBV_WR_BIND_MW, 0, mw, rkey, bi);
}
static void x_local_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	struct sr_send_wqe *w = wr_new(x, IBV_WR_LOCAL_INV);
	if (w)
		sr_local_wqe_fill(w, IBV_WR_LOCAL_INV, rkey, NULL, 0, NULL);
}
static void x_rdma(struct ibv_qp_ex *x, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr, __be32 imm)
{
	struct sr_send_wqe *w = wr_new(x, op);
	if (w) {
		w->rkey = rkey;
		w->remote_addr = addr;
		w->imm_data = imm;
	}
}
static void x_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr)
{
	x_rdma(x, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}
static void x_write_imm(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, __be32 imm)
{
	x_rdma(x, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}
static void x_read(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr)
{
	x_rdma(x, IBV_WR_RDMA_READ, rkey, addr, 0);
}
/* swap is unused by fetch-and-add (a WQE's unused fields stay 0) */
static void x_atomic(struct ibv_qp_ex *x, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr, uint64_t compare_add,
		     uint64_t swap)
{
	struct sr_send_wqe *w = wr_new(x, op);
	if (w) {
		if (addr & 7)
			xqp(x)->wr_error = EINVAL;
		w->rkey = rkey;
		w->remote_addr = addr;
		w->compare_add = compare_add;
		w->swap = swap;
	}
}
static void x_cas(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, uint64_t cmp, uint64_t swap)
{
	x_atomic(x, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, cmp, swap);
}
static void x_faa(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, uint64_t add)
{
	x_atomic(x, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}
static void x_set_ud_addr(struct ibv_qp_ex *x, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct sr_send_wqe *w = wr_last(x);
	if (!w)
		return;
	if (!ah) {
		xqp(x)->wr_error = EINVAL;
		return;
	}
	*sr_sq_av(&xqp(x)->sq, w) = to_sah(ah)->av;
	w->remote_qpn = qpn & 0xffffff;
	w->remote_qkey = qkey;
}
/* an XRC INI end's WQE: the SRQ its XRCETH names (post_one_send's place) */
static void x_set_xrc_srqn(struct ibv_qp_ex *x, uint32_t srqn)
{
	struct sr_send_wqe *w = wr_last(x);
	if (w)
		w->remote_qpn = srqn & 0xffffff;
}
static void x_set_sge_list(struct ibv_qp_ex *x, size_t n, const struct ibv_sge *sg)
{
	struct sr_qp *qp = xqp(x);
	struct sr_send_wqe *w = wr_last(x);
	if (!w)
		return;
	if (n > qp->sq.max_sge) {
		qp->wr_error = ENOSPC;
		return;
	}
	w->num_sge = (uint32_t)n;
	w->length = 0;
	for (size_t i = 0; i < n; i++) {
		w->sge[i] = sr_app_sge(sg, (int)i);
		w->length += w->sge[i].length;
	}
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		if (w->length < 8)
			qp->wr_error = EINVAL;
		w->length = 8;
	}
}
static void x_set_sge(struct ibv_qp_ex *x, uint32_t lkey, uint64_t addr, uint32_t len)
{
	struct ibv_sge s = { .addr = addr, .length = len, .lkey = lkey };
	x_set_sge_list(x, 1, &s);
}
static void x_set_inline_list(struct ibv_qp_ex *x, size_t n, const struct ibv_data_buf *b)
{
	struct sr_qp *qp = xqp(x);
	struct sr_send_wqe *w = wr_last(x);
	size_t total = 0;
	if (!w)
		return;
	for (size_t i = 0; i < n; i++)
		total += b[i].length;
	if (total > qp->sq.max_inline) {
		qp->wr_error = ENOSPC;
		return;
	}
	uint8_t *p = sr_wqe_inline(&qp->sq, w);
	for (size_t i = 0; i < n; i++) {
		memcpy(p, b[i].addr, b[i].length);
		p += b[i].length;
	}
	w->inlined = true;
	w->num_sge = 0;
	w->length = total;
}
static void x_set_inline(struct ibv_qp_ex *x, void *addr, size_t len)
{
	struct ibv_data_buf b = { .addr = addr, .length = len };
	x_set_inline_list(x, 1, &b);
}
static void x_start(struct ibv_qp_ex *x)
{
	struct sr_qp *qp = xqp(x);
	pthread_mutex_lock(&qp->lock);
	qp->wr_error = 0;
	qp->wr_start_head = qp->sq.head;
}
static void x_abort(struct ibv_qp_ex *x)
{
	struct sr_qp *qp = xqp(x);
	qp->sq.head = qp->wr_start_head;
	qp->wr_error = 0;
	pthread_mutex_unlock(&qp->lock);
}
static int x_complete(struct ibv_qp_ex *x)
{
	struct sr_qp *qp = xqp(x);
	enum ibv_qp_state st = qp->attr.qp_state;
	int err = 0;

	sr_tsan_post();

	if (qp->wr_error || st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR) {
		qp->sq.head = qp->wr_start_head;
		err = qp->wr_error ? qp->wr_error : EINVAL;
	} else {
		/* a UD send longer than the MTU fails when sent (roce/req.c) */
		for (uint32_t i = qp->wr_start_head; i != qp->sq.head; i++)
			sr_sq_wqe(&qp->sq, i)->status = IBV_WC_SUCCESS;
		if (st == IBV_QPS_ERR)
			sr_flush_sq(qp);
		else
			qp->ctx->dev->tops->sq_kick(qp);
	}
	qp->wr_error = 0;
	pthread_mutex_unlock(&qp->lock);
	return err;
}

void sr_qp_ex_init(struct sr_qp *qp)
{
	struct ibv_qp_ex *x = &qp->ibqp;
	x->wr_send = x_send;
	x->wr_send_imm = x_send_imm;
	x->wr_send_inv = x_send_inv;
	x->wr_bind_mw = x_bind_mw;
	x->wr_local_inv = x_local_inv;
	x->wr_rdma_write = x_write;
	x->wr_rdma_write_imm = x_write_imm;
	x->wr_rdma_read = x_read;
	x->wr_atomic_cmp_swp = x_cas;
	x->wr_atomic_fetch_add = x_faa;
	x->wr_set_ud_addr = x_set_ud_addr;
	x->wr_set_xrc_srqn = x_set_xrc_srqn;
	x->wr_set_sge = x_set_sge;
	x->wr_set_sge_list = x_set_sge_list;
	x->wr_set_inline_data = x_set_inline;
	x->wr_set_inline_data_list = x_set_inline_list;
	x->wr_start = x_start;
	x->wr_complete = x_complete;
	x->wr_abort = x_abort;
}
