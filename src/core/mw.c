/* Memory windows, as the kernel's rxe implements them (rxe_mw.c), and the
 * send queue's local operations: IBV_WR_BIND_MW and IBV_WR_LOCAL_INV.
 *
 * A window's rkey is a key of the context's key table (mr.c): its slot
 * comes from the slots of the MRs, so the responder tells an MR's rkey
 * from an MW's by the table that holds the slot.  Its upper 24 bits stay
 * for the window's life; a bind sets the low 8.  On the wire an MW's rkey
 * is just an rkey.
 *
 *  - Type 1: allocated VALID and unbound; ibv_bind_mw posts a BIND_MW
 *    work request with the next key (ibv_inc_rkey) and sets mw->rkey to
 *    it, as rdma-core's rxe provider does; a bind of length 0 unbinds.
 *    It cannot be invalidated.
 *  - Type 2 (2B): allocated FREE; a BIND_MW work request binds it to a
 *    region and to the QP that posted it, with the low 8 key bits the
 *    request names; IBV_WR_LOCAL_INV or a peer's Send with Invalidate
 *    make it FREE again.
 *
 * Bind, invalidate and deallocation hold ctx->mr_lock for writing; the
 * responder's lookup holds it for reading, so a window never changes
 * under a packet being placed through it.  A region with windows bound
 * cannot be deregistered (EINVAL, as rxe). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/sr.h"

/* What a window may grant: rxe's RXE_ACCESS_SUPPORTED_MW. */
#define SR_MW_ACCESS                                                                                            \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_RELAXED_ORDERING)

struct ibv_mw *sr_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct sr_context *ctx = to_sctx(pd->context);
	struct sr_obj *pdo;
	struct sr_mw *mw;
	uint32_t idx = 0;
	int err;

	/* siw has no memory windows: the verb is not there (rdma-core's
	 * answer for a provider without alloc_mw) */
	if (ctx->dev->conf.type == SR_DEV_IWARP) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(pdo = sr_obj_get(pd, SR_OBJ_PD, NULL, &err))) {
		errno = err;
		return NULL;
	}
	/* uverbs refuses any other type before the driver sees it */
	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		err = EINVAL;
		goto fail;
	}
	mw = calloc(1, sizeof(*mw));
	if (!mw) {
		err = ENOMEM;
		goto fail;
	}
	if ((err = sr_obj_add(ctx, &mw->obj, &mw->ibmw, SR_OBJ_MW))) {
		free(mw);
		goto fail;
	}
	pthread_rwlock_wrlock(&ctx->mr_lock);
	if (!(idx = sr_key_slot_alloc(ctx)))
		goto full;
	if (!ctx->mw_tab) {
		/* the first window: the table the slots' windows go in */
		ctx->mw_tab = calloc(ctx->mr_tab_size, sizeof(*ctx->mw_tab));
		if (!ctx->mw_tab)
			goto full;
	}
	if (!(mw->rkey = sr_key_make(ctx, idx)))
		goto full;
	ctx->mw_tab[idx] = mw;
	mw->index = idx;
	mw->pd = to_spd(pd);
	mw->state = type == IBV_MW_TYPE_2 ? SR_MW_FREE : SR_MW_VALID;
	pthread_rwlock_unlock(&ctx->mr_lock);

	atomic_fetch_add(&mw->pd->usecnt, 1);
	sr_obj_put(pdo);
	mw->ibmw.context = pd->context;
	mw->ibmw.pd = pd;
	mw->ibmw.rkey = mw->rkey;
	mw->ibmw.type = type;
	return &mw->ibmw;
full:
	pthread_rwlock_unlock(&ctx->mr_lock);
	sr_obj_del(&mw->obj);
	free(mw);
	err = ENOMEM;
fail:
	sr_obj_put(pdo);
	errno = err;
	return NULL;
}

/* Forget the region a window is bound to (mr_lock held for writing). */
static void mw_unbind(struct sr_mw *mw)
{
	if (mw->mr)
		mw->mr->num_mw--;
	mw->mr = NULL;
	mw->addr = 0;
	mw->length = 0;
	mw->access = 0;
	mw->qp_serial = 0;
}

int sr_dealloc_mw(struct ibv_mw *ibmw)
{
	struct sr_mw *mw = to_smw(ibmw);
	struct sr_context *ctx;
	struct sr_obj *o;
	int err;

	if (!(o = sr_obj_claim(ibmw, SR_OBJ_MW, &err)))
		return err;
	ctx = to_sctx(ibmw->context);
	pthread_rwlock_wrlock(&ctx->mr_lock);
	mw_unbind(mw);
	if (mw->index < ctx->mr_tab_size && ctx->mw_tab && ctx->mw_tab[mw->index] == mw) {
		ctx->mw_tab[mw->index] = NULL;
		sr_key_forget(ctx, mw->rkey);
		ctx->key_last[mw->index] = mw->rkey; /* as bound last: the slot's next key differs */
	}
	pthread_rwlock_unlock(&ctx->mr_lock);
	sr_obj_del(o);
	atomic_fetch_sub(&mw->pd->usecnt, 1);
	free(mw);
	return 0;
}

/* ibv_bind_mw: a type 1 window, bound by a BIND_MW work request with the
 * next key, as rdma-core's rxe provider does it.  ibv_bind_mw (inline in
 * verbs.h) has already refused a type 2 window (EINVAL), a region of
 * another PD (EPERM) and an address or length without a region. */
int sr_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *b)
{
	struct ibv_send_wr wr, *bad = NULL;
	int err;

	/* o10-36.2.2: a type 1 window is never zero based */
	if (b->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED) {
		errno = EINVAL;
		return EINVAL;
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = b->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = b->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = b->bind_info;
	err = qp->context->ops.post_send(qp, &wr, &bad);
	if (err) {
		errno = err;
		return err;
	}
	/* the key the window will have; an error completion leaves it to
	 * the application to undo (rdma-core's rxe provider, likewise) */
	mw->rkey = wr.bind_mw.rkey;
	return 0;
}

static struct sr_mw *mw_of_key(struct sr_context *ctx, uint32_t key)
{
	uint32_t idx = sr_key_slot(ctx, key);
	struct sr_mw *mw;

	if (!ctx->mw_tab || !idx || !(mw = ctx->mw_tab[idx]) || mw->rkey != key)
		return NULL;
	return mw;
}

/* The checks of rxe_check_bind_mw (IBA o10-36.2.2, o10-37.2.30, C10-72..75)
 * and two it leaves out: the region must be in the window's PD, and a
 * zero-based window must lie inside the region as a virtual one does. */
static bool bind_ok(struct sr_qp *qp, const struct sr_mw *mw, const struct sr_mr *mr, uint64_t addr, uint64_t len,
		    unsigned int access)
{
	if (access & ~SR_MW_ACCESS)
		return false;
	if (mw->ibmw.type == IBV_MW_TYPE_1) {
		if (mw->state != SR_MW_VALID || (access & IBV_ACCESS_ZERO_BASED))
			return false;
	} else {
		/* a type 2 window is bound when free, by a QP of its PD, to a region */
		if (mw->state != SR_MW_FREE || to_spd(qp->ibqp.qp_base.pd) != mw->pd || !mr || !len)
			return false;
	}
	if (!mr)
		return true; /* type 1, length 0: unbind */
	if (mr->pd != mw->pd || (mr->access & IBV_ACCESS_ZERO_BASED) || !(mr->access & IBV_ACCESS_MW_BIND))
		return false;
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return false;
	return addr >= mr->iova && len <= mr->length && addr - mr->iova <= mr->length - len;
}

/* A BIND_MW WQE (mr_lock held for writing): w->rkey names the window by
 * its current key, w->imm_data the key it is to get, remote_addr and
 * compare_add the window, swap the region's lkey (high 32 bits) and the
 * access flags (low 32). */
static enum ibv_wc_status bind_exec(struct sr_qp *qp, const struct sr_send_wqe *w)
{
	struct sr_context *ctx = qp->ctx;
	struct sr_mw *mw = mw_of_key(ctx, w->rkey);
	uint64_t addr = w->remote_addr, len = w->compare_add;
	unsigned int access = (uint32_t)w->swap;
	uint32_t lkey = (uint32_t)(w->swap >> 32), idx = sr_key_slot(ctx, lkey);
	struct sr_mr *mr = NULL;

	if (!mw)
		return IBV_WC_MW_BIND_ERR;
	if (len) {
		if (!idx || !(mr = ctx->mr_tab[idx]) || mr->ibmr.lkey != lkey)
			return IBV_WC_MW_BIND_ERR;
	}
	if (!bind_ok(qp, mw, mr, addr, len, access))
		return IBV_WC_MW_BIND_ERR;
	mw_unbind(mw);
	mw->rkey = (mw->rkey & ~0xffu) | (w->imm_data & 0xffu);
	mw->state = SR_MW_VALID;
	mw->addr = addr;
	mw->length = len;
	mw->access = access;
	if (mr) {
		mw->mr = mr;
		mr->num_mw++;
	}
	if (mw->ibmw.type == IBV_MW_TYPE_2)
		mw->qp_serial = qp->serial;
	return IBV_WC_SUCCESS;
}

/* Invalidate the window a key names (mr_lock held for writing).  rxe
 * refuses a type 1 window (o10-37.2.26) and one not bound; beyond rxe,
 * the window must be in the QP's PD, and a remote invalidation (Send with
 * Invalidate) must come to the QP the window is bound to. */
static int mw_invalidate(struct sr_qp *qp, uint32_t key, bool remote)
{
	struct sr_mw *mw = mw_of_key(remote ? qp->rctx : qp->ctx, key);

	if (!mw || mw->ibmw.type == IBV_MW_TYPE_1 || mw->state != SR_MW_VALID)
		return -EINVAL;
	if (mw->pd != (remote ? qp->rpd : to_spd(qp->ibqp.qp_base.pd)) || (remote && mw->qp_serial != qp->serial))
		return -EACCES;
	mw_unbind(mw);
	mw->state = SR_MW_FREE;
	return 0;
}

enum ibv_wc_status sr_local_op(struct sr_qp *qp, const struct sr_send_wqe *w)
{
	enum ibv_wc_status st;

	pthread_rwlock_wrlock(&qp->ctx->mr_lock);
	if (w->opcode == IBV_WR_BIND_MW)
		st = bind_exec(qp, w);
	else
		/* A region's key cannot be invalidated: rxe allows that only for
		 * fast-registration MRs, which user space has none of. */
		st = mw_invalidate(qp, w->imm_data, false) ? IBV_WC_LOC_QP_OP_ERR : IBV_WC_SUCCESS;
	pthread_rwlock_unlock(&qp->ctx->mr_lock);
	return st;
}

int sr_rkey_invalidate_remote(struct sr_qp *qp, uint32_t rkey)
{
	int err;

	pthread_rwlock_wrlock(&qp->rctx->mr_lock);
	err = mw_invalidate(qp, rkey, true);
	pthread_rwlock_unlock(&qp->rctx->mr_lock);
	return err;
}

uint8_t *sr_mw_lookup(struct sr_qp *qp, uint32_t key, uint64_t va, uint64_t len, unsigned int need_access)
{
	struct sr_mw *mw = mw_of_key(qp->rctx, key);
	struct sr_mr *mr;
	uint64_t off, at;

	if (!mw || mw->state != SR_MW_VALID || !(mr = mw->mr) || mw->pd != qp->rpd ||
	    (mw->ibmw.type == IBV_MW_TYPE_2 && mw->qp_serial != qp->serial) ||
	    (mw->access & need_access) != need_access)
		return NULL;
	/* a zero-based window is addressed from 0, a virtual one by the
	 * region's addresses; either way only inside the window (rxe checks
	 * the region's bounds alone) */
	if (mw->access & IBV_ACCESS_ZERO_BASED) {
		off = va;
	} else {
		if (va < mw->addr)
			return NULL;
		off = va - mw->addr;
	}
	if (off > mw->length || len > mw->length - off)
		return NULL;
	at = mw->addr + off;
	/* and inside the region, which ibv_rereg_mr may have moved */
	if (at < mr->iova || len > mr->length || at - mr->iova > mr->length - len)
		return NULL;
	return mr->host + (at - mr->iova);
}
