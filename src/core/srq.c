/* Shared receive queues: creation, the limit event (ibv_modify_srq with
 * IBV_SRQ_LIMIT), posting.  Their receive WQEs use the same ring as a
 * QP's receive queue (sr_rq_init, sr_rq_post in qp.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/sr.h"

/* A new SRQ of pd (resolved); an XRC one in xrcd's domain with cq
 * (both resolved), else basic. */
static struct ibv_srq *srq_make(struct ibv_pd *pd, struct ibv_srq_init_attr *attr, struct sr_xrcd *xrcd,
				struct ibv_cq *cq, int *errp)
{
	struct sr_srq *srq;
	int err;

	/* srq_limit is "irrelevant for ibv_create_srq" (the man page): rxe
	 * takes it as it is (rxe_srq_chk_init() does not look at it) */
	if (attr->attr.max_wr == 0 || attr->attr.max_wr > SR_MAX_SRQ_WR || attr->attr.max_sge > SR_MAX_SGE) {
		*errp = EINVAL;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		*errp = ENOMEM;
		return NULL;
	}
	if ((err = sr_obj_add(to_sctx(pd->context), &srq->obj, &srq->ibsrq, SR_OBJ_SRQ)))
		goto fail;
	if (sr_rq_init(&srq->rq, pd, SR_RES_TYPE_SRQ, attr->attr.max_wr, attr->attr.max_sge)) {
		sr_obj_del(&srq->obj);
		err = ENOMEM;
		goto fail;
	}
	pthread_mutex_init(&srq->lock, NULL);
	srq->limit = attr->attr.srq_limit;
	attr->attr.max_wr = srq->rq.max_wr;
	attr->attr.max_sge = srq->rq.max_sge;
	sr_pd_use(pd, 1);
	srq->ibsrq.context = pd->context;
	srq->ibsrq.srq_context = attr->srq_context;
	srq->ibsrq.pd = pd;
	pthread_mutex_init(&srq->ibsrq.mutex, NULL);
	pthread_cond_init(&srq->ibsrq.cond, NULL);
	if (xrcd) {
		srq->xrcd = xrcd;
		srq->cq = to_scq(cq);
		atomic_fetch_add(&srq->cq->n_qps, 1); /* the CQ is busy while the SRQ completes into it */
		sr_xrc_srq_add(srq);
	}
	return &srq->ibsrq;
fail:
	free(srq);
	*errp = err;
	return NULL;
}

struct ibv_srq *sr_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct ibv_srq *srq = NULL;
	struct sr_obj *pdo;
	int err;

	if ((pdo = sr_obj_get(pd, SR_OBJ_PD, NULL, &err))) {
		srq = srq_make(pd, attr, NULL, NULL, &err);
		sr_obj_put(pdo);
	}
	if (!srq)
		errno = err;
	return srq;
}

/* As mlx5: a basic SRQ needs a PD, an XRC one a PD, an XRC domain and a
 * CQ (EINVAL without); a tag-matching one is not offered (EOPNOTSUPP). */
struct ibv_srq *sr_create_srq_ex(struct ibv_context *c, struct ibv_srq_init_attr_ex *attr)
{
	uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	struct sr_obj_refs r = { .n = 0 };
	struct ibv_srq *srq = NULL;
	enum ibv_srq_type t = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? attr->srq_type : IBV_SRQT_BASIC;
	bool xrc = t == IBV_SRQT_XRC;
	int err = 0;

	if (t == IBV_SRQT_TM || (attr->comp_mask & ~known))
		err = EOPNOTSUPP;
	else if (t != IBV_SRQT_BASIC && !xrc)
		err = EINVAL;
	else if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd ||
		 (xrc && (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd ||
			  !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq)))
		err = EINVAL;
	else if (!(err = sr_obj_ref(&r, attr->pd, SR_OBJ_PD, c)) &&
		 (!xrc || (!(err = sr_obj_ref(&r, attr->xrcd, SR_OBJ_XRCD, c)) &&
			   !(err = sr_obj_ref(&r, attr->cq, SR_OBJ_CQ, c))))) {
		struct ibv_srq_init_attr ia = { .srq_context = attr->srq_context, .attr = attr->attr };

		srq = srq_make(attr->pd, &ia, xrc ? (struct sr_xrcd *)attr->xrcd : NULL, xrc ? attr->cq : NULL, &err);
		attr->attr = ia.attr;
	}
	sr_obj_unref(&r);
	if (!srq)
		errno = err;
	return srq;
}

static int modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct sr_srq *srq = to_ssrq(ibsrq);
	int err = 0;

	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	pthread_mutex_lock(&srq->lock);
	if (mask & IBV_SRQ_MAX_WR) {
		uint32_t count = srq->rq.head - srq->rq.tail;
		if (attr->max_wr == 0 || attr->max_wr > SR_MAX_SRQ_WR || attr->max_wr < count ||
		    ((mask & IBV_SRQ_LIMIT) ? attr->srq_limit : srq->limit) > attr->max_wr) {
			err = EINVAL;
			goto out;
		}
		struct sr_rq nrq = srq->rq;
		nrq.max_wr = attr->max_wr;
		nrq.mask = sr_ring_slots(nrq.max_wr) - 1;
		nrq.buf = sr_ring_alloc(ibsrq->pd, ((size_t)nrq.mask + 1) * nrq.stride, SR_RES_TYPE_SRQ, &nrq.mem);
		if (!nrq.buf) {
			err = ENOMEM;
			goto out;
		}
		for (uint32_t i = 0; i < count; i++)
			memcpy(nrq.buf + (size_t)i * nrq.stride, sr_rq_wqe(&srq->rq, srq->rq.tail + i), nrq.stride);
		nrq.tail = 0;
		nrq.head = count;
		sr_ring_free(srq->rq.buf, &srq->rq.mem);
		srq->rq = nrq;
	}
	if (mask & IBV_SRQ_LIMIT) {
		if (attr->srq_limit > srq->rq.max_wr) {
			err = EINVAL;
			goto out;
		}
		srq->limit = attr->srq_limit;
	}
out:
	pthread_mutex_unlock(&srq->lock);
	return err;
}

int sr_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	return SR_WITH_OBJ(ibsrq, SR_OBJ_SRQ, modify_srq(ibsrq, attr, mask));
}

static int query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct sr_srq *srq = to_ssrq(ibsrq);

	pthread_mutex_lock(&srq->lock);
	attr->max_wr = srq->rq.max_wr;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = srq->limit;
	pthread_mutex_unlock(&srq->lock);
	return 0;
}

int sr_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	return SR_WITH_OBJ(ibsrq, SR_OBJ_SRQ, query_srq(ibsrq, attr));
}

int sr_destroy_srq(struct ibv_srq *ibsrq)
{
	struct sr_srq *srq = to_ssrq(ibsrq);
	struct sr_context *ctx;
	struct sr_obj *o;
	int err;

	if (!(o = sr_obj_claim(ibsrq, SR_OBJ_SRQ, &err)))
		return err;
	ctx = to_sctx(ibsrq->context);
	if (atomic_load(&srq->n_qps)) {
		sr_obj_put(o);
		return EBUSY;
	}
	if (srq->xrcd)
		sr_xrc_srq_del(srq); /* no TGT QP finds it from now on */
	pthread_mutex_lock(&ctx->prog.lock);
	pthread_mutex_unlock(&ctx->prog.lock);
	sr_obj_del(o);
	if (srq->cq)
		atomic_fetch_sub(&srq->cq->n_qps, 1);
	sr_purge_async_events(ctx, ibsrq);
	sr_ring_free(srq->rq.buf, &srq->rq.mem);
	sr_pd_use(ibsrq->pd, -1); /* after the ring: its parent domain's free may be called */
	free(srq);
	return 0;
}

int sr_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sr_srq *srq = to_ssrq(ibsrq);
	int err = 0;

	pthread_mutex_lock(&srq->lock);
	for (; wr; wr = wr->next) {
		err = sr_rq_post(&srq->rq, wr);
		if (err) {
			*bad = wr;
			break;
		}
	}
	pthread_mutex_unlock(&srq->lock);
	/* QPs waiting in RNR for this SRQ retry on their own timer */
	return err;
}
