/* XRC: domains (ibv_open_xrcd, ibv_close_xrcd), the numbers of XRC SRQs
 * and the TGT QPs of a domain, and ibv_open_qp.
 *
 * As the kernel's uverbs has them: every ibv_open_xrcd of one file (by
 * its inode) on a device is the same domain, an open of no file (-1) a
 * domain of its own.  An XRC SRQ has a number unique on the device
 * (ibv_get_srq_num); a request arriving at an XRC_RECV (TGT) QP names it
 * in its XRCETH, and is delivered into that SRQ if it is of the QP's
 * domain, its PD checking the request's keys and its CQ taking the
 * completion (roce/resp.c).  A TGT QP has no PD, CQs or queues of its
 * own, lives while any handle of it does (its creator's, ibv_open_qp's)
 * and can be reached by its number in its domain.  Within one process:
 * the domain's SRQs deliver into the process's memory (docs/verbs.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/sr.h"

/* The domain of (fdev, fino) on dev, one more reference taken: found,
 * or made if create; NULL with *err (EAGAIN: none and no O_CREAT;
 * EINVAL: one and O_EXCL; ENOMEM), as uverbs says. */
static struct sr_xrc_dom *dom_get(struct sr_device *dev, bool anonymous, dev_t fdev, ino_t fino, int oflags, int *err)
{
	struct sr_xrc_dom *d = NULL;

	pthread_mutex_lock(&dev->ctx_lock);
	if (!anonymous)
		for (d = dev->xrc_doms; d; d = d->next)
			if (!d->anonymous && d->fdev == fdev && d->fino == fino)
				break;
	if (d && (oflags & O_EXCL)) {
		*err = EINVAL;
		d = NULL;
	} else if (d) {
		d->refs++;
	} else if (!anonymous && !(oflags & O_CREAT)) {
		*err = EAGAIN;
	} else if (!(d = calloc(1, sizeof(*d)))) {
		*err = ENOMEM;
	} else {
		d->dev = dev;
		d->anonymous = anonymous;
		d->fdev = fdev;
		d->fino = fino;
		d->refs = 1;
		pthread_mutex_init(&d->lock, NULL);
		d->next = dev->xrc_doms;
		dev->xrc_doms = d;
	}
	pthread_mutex_unlock(&dev->ctx_lock);
	return d;
}

static void dom_put(struct sr_xrc_dom *d)
{
	struct sr_device *dev = d->dev;
	bool last;

	pthread_mutex_lock(&dev->ctx_lock);
	last = --d->refs == 0;
	if (last)
		for (struct sr_xrc_dom **p = &dev->xrc_doms; *p; p = &(*p)->next)
			if (*p == d) {
				*p = d->next;
				break;
			}
	pthread_mutex_unlock(&dev->ctx_lock);
	if (last)
		free(d);
}

/* As rdma-core and uverbs: FD and OFLAGS both given (EINVAL otherwise),
 * an unknown comp_mask bit EOPNOTSUPP, oflags O_CREAT and O_EXCL only
 * (EINVAL), a descriptor that is none EBADF. */
struct ibv_xrcd *sr_open_xrcd(struct ibv_context *c, struct ibv_xrcd_init_attr *attr)
{
	struct sr_context *ctx = to_sctx(c);
	struct sr_xrcd *x;
	struct stat st;
	int err = 0;

	if (ctx->dev->conf.type == SR_DEV_IWARP) {
		errno = EOPNOTSUPP; /* XRC is InfiniBand's (siw has none) */
		return NULL;
	}
	if (!attr || (attr->comp_mask & ~(uint32_t)(IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS))) {
		errno = attr ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) || !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) ||
	    (attr->oflags & ~(O_CREAT | O_EXCL))) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->fd != -1 && fstat(attr->fd, &st)) {
		errno = EBADF;
		return NULL;
	}
	if (!(x = calloc(1, sizeof(*x)))) {
		errno = ENOMEM;
		return NULL;
	}
	x->dom = dom_get(ctx->dev, attr->fd == -1, attr->fd == -1 ? 0 : st.st_dev, attr->fd == -1 ? 0 : st.st_ino,
			 attr->oflags, &err);
	if (!x->dom) {
		free(x);
		errno = err;
		return NULL;
	}
	x->ibxrcd.context = c;
	if ((err = sr_obj_add(ctx, &x->obj, x, SR_OBJ_XRCD))) {
		dom_put(x->dom);
		free(x);
		errno = err;
		return NULL;
	}
	return &x->ibxrcd;
}

/* As uverbs: EBUSY while an SRQ or TGT QP made through it lives. */
int sr_close_xrcd(struct ibv_xrcd *ibx)
{
	struct sr_xrcd *x = (struct sr_xrcd *)ibx;
	struct sr_obj *o;
	int err;

	if (!(o = sr_obj_claim(ibx, SR_OBJ_XRCD, &err)))
		return err;
	if (atomic_load(&x->usecnt)) {
		sr_obj_put(o);
		return EBUSY;
	}
	sr_obj_del(o);
	dom_put(x->dom);
	free(x);
	return 0;
}

/* ---- the domain's SRQs and TGT QPs ---- */

void sr_xrc_srq_add(struct sr_srq *srq)
{
	struct sr_xrc_dom *d = srq->xrcd->dom;
	struct sr_device *dev = d->dev;

	/* one number space of the device's, from 1; 0 names no SRQ */
	do
		srq->srq_num = atomic_fetch_add(&dev->srq_num_next, 1) & 0xffffffu;
	while (!srq->srq_num);
	pthread_mutex_lock(&d->lock);
	srq->dom_next = d->srqs;
	d->srqs = srq;
	pthread_mutex_unlock(&d->lock);
	atomic_fetch_add(&srq->xrcd->usecnt, 1);
}

void sr_xrc_srq_del(struct sr_srq *srq)
{
	struct sr_xrc_dom *d = srq->xrcd->dom;

	pthread_mutex_lock(&d->lock);
	for (struct sr_srq **p = &d->srqs; *p; p = &(*p)->dom_next)
		if (*p == srq) {
			*p = srq->dom_next;
			break;
		}
	pthread_mutex_unlock(&d->lock);
	atomic_fetch_sub(&srq->xrcd->usecnt, 1);
}

struct sr_srq *sr_xrc_srq_find(struct sr_qp *tgt, uint32_t srq_num)
{
	struct sr_xrc_dom *d = tgt->xrcd->dom;
	struct sr_srq *s;

	pthread_mutex_lock(&d->lock);
	for (s = d->srqs; s && s->srq_num != srq_num; s = s->dom_next)
		;
	pthread_mutex_unlock(&d->lock);
	return s;
}

void sr_xrc_tgt_add(struct sr_qp *qp)
{
	struct sr_xrc_dom *d = qp->xrcd->dom;

	pthread_mutex_lock(&d->lock);
	qp->xrc_refs = 1;
	qp->dom_next = d->tgts;
	d->tgts = qp;
	pthread_mutex_unlock(&d->lock);
	atomic_fetch_add(&qp->xrcd->usecnt, 1);
}

bool sr_xrc_tgt_put(struct sr_qp *qp)
{
	struct sr_xrc_dom *d = qp->xrcd->dom;
	bool last;

	pthread_mutex_lock(&d->lock);
	last = --qp->xrc_refs == 0;
	if (last) /* no ibv_open_qp finds it from now on */
		for (struct sr_qp **p = &d->tgts; *p; p = &(*p)->dom_next)
			if (*p == qp) {
				*p = qp->dom_next;
				break;
			}
	pthread_mutex_unlock(&d->lock);
	if (last)
		atomic_fetch_sub(&qp->xrcd->usecnt, 1);
	return last;
}

int sr_get_srq_num(struct ibv_srq *ibsrq, uint32_t *num)
{
	struct sr_srq *srq = to_ssrq(ibsrq);
	struct sr_obj *o;
	int err;

	if (!(o = sr_obj_get(ibsrq, SR_OBJ_SRQ, NULL, &err)))
		return err;
	err = 0;
	if (srq->xrcd)
		*num = srq->srq_num;
	else
		err = EINVAL; /* a basic SRQ has none to give */
	sr_obj_put(o);
	return err;
}

/* As uverbs' ib_open_qp: QP_NUM, XRCD and TYPE given, the type XRC_RECV
 * and a TGT QP of that number in the domain (EINVAL otherwise).  The new
 * handle reaches the QP for ibv_modify_qp, ibv_query_qp and
 * ibv_destroy_qp, as the kernel's does. */
struct ibv_qp *sr_open_qp(struct ibv_context *c, struct ibv_qp_open_attr *attr)
{
	uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
	struct sr_obj_refs r = { .n = 0 };
	struct sr_qp_open *h = NULL;
	struct sr_qp *qp = NULL;
	int err;

	if (!attr || (attr->comp_mask & need) != need || (attr->comp_mask & ~(need | IBV_QP_OPEN_ATTR_CONTEXT)) ||
	    attr->qp_type != IBV_QPT_XRC_RECV) {
		errno = EINVAL;
		return NULL;
	}
	if ((err = sr_obj_ref(&r, attr->xrcd, SR_OBJ_XRCD, c)))
		goto out;
	struct sr_xrc_dom *d = ((struct sr_xrcd *)attr->xrcd)->dom;
	if (!(h = calloc(1, sizeof(*h)))) {
		err = ENOMEM;
		goto out;
	}
	pthread_mutex_lock(&d->lock);
	for (qp = d->tgts; qp && qp->ibqp.qp_base.qp_num != attr->qp_num; qp = qp->dom_next)
		;
	if (qp)
		qp->xrc_refs++;
	pthread_mutex_unlock(&d->lock);
	if (!qp) {
		err = EINVAL;
		goto out;
	}
	h->qp = qp;
	h->ibqp.context = c;
	h->ibqp.qp_context = (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? attr->qp_context : NULL;
	h->ibqp.qp_num = qp->ibqp.qp_base.qp_num;
	h->ibqp.qp_type = IBV_QPT_XRC_RECV;
	h->ibqp.state = qp->ibqp.qp_base.state;
	pthread_mutex_init(&h->ibqp.mutex, NULL);
	pthread_cond_init(&h->ibqp.cond, NULL);
	if ((err = sr_obj_add(to_sctx(c), &h->obj, &h->ibqp, SR_OBJ_QP))) {
		pthread_mutex_lock(&d->lock);
		qp->xrc_refs--;
		pthread_mutex_unlock(&d->lock);
		goto out;
	}
	h->obj.opened = true;
out:
	sr_obj_unref(&r);
	if (err) {
		free(h);
		errno = err;
		return NULL;
	}
	return &h->ibqp;
}
