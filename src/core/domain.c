/* Thread domains and parent domains (ibv_alloc_td, ibv_alloc_parent_domain),
 * and the memory of the rings of the objects made on a parent domain.
 *
 * As rdma-core's mlx5 has them: a parent domain is an ibv_pd of its own
 * that stands for the protection domain it was made on (its handle, its
 * keys: an alias, handle.h) and adds the application's allocators, used
 * for the rings of the QPs, SRQs and CQs made on it, and perhaps a thread
 * domain.  Neither is a kernel object in rdma-core, nor counts against a
 * limit here. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/sr.h"

struct ibv_td *sr_alloc_td(struct ibv_context *c, struct ibv_td_init_attr *attr)
{
	struct sr_td *td;
	int err;

	if (!attr || attr->comp_mask) {
		errno = EINVAL;
		return NULL;
	}
	if (!(td = calloc(1, sizeof(*td)))) {
		errno = ENOMEM;
		return NULL;
	}
	td->ibtd.context = c;
	if ((err = sr_obj_add(to_sctx(c), &td->obj, &td->ibtd, SR_OBJ_TD))) {
		free(td);
		errno = err;
		return NULL;
	}
	return &td->ibtd;
}

/* As mlx5: EBUSY while a parent domain uses it. */
int sr_dealloc_td(struct ibv_td *ibtd)
{
	struct sr_td *td = (struct sr_td *)ibtd;
	struct sr_obj *o;
	int err;

	if (!(o = sr_obj_claim(ibtd, SR_OBJ_TD, &err)))
		return err;
	if (atomic_load(&td->usecnt)) {
		sr_obj_put(o);
		return EBUSY;
	}
	sr_obj_del(o);
	free(td);
	return 0;
}

/* As libibverbs and mlx5: a PD is required (a plain one of the context),
 * comp_mask only ALLOCATORS and PD_CONTEXT, EINVAL otherwise; with
 * ALLOCATORS both functions. */
struct ibv_pd *sr_alloc_parent_domain(struct ibv_context *c, struct ibv_parent_domain_init_attr *attr)
{
	struct sr_obj_refs r = { .n = 0 };
	struct sr_pd *pd = NULL;
	int err;

	if (!attr || !attr->pd ||
	    (attr->comp_mask &
	     ~(uint32_t)(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)) ||
	    ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) && (!attr->alloc || !attr->free))) {
		errno = EINVAL;
		return NULL;
	}
	if ((err = sr_obj_ref(&r, attr->pd, SR_OBJ_PD, c)) ||
	    (attr->td && (err = sr_obj_ref(&r, attr->td, SR_OBJ_TD, c))))
		goto out;
	if (sr_parent_domain(attr->pd)) {
		err = EINVAL; /* a parent domain of a parent domain */
		goto out;
	}
	if (!(pd = calloc(1, sizeof(*pd)))) {
		err = ENOMEM;
		goto out;
	}
	pd->ibpd.context = c;
	pd->real = to_spd(attr->pd);
	if ((err = sr_obj_add_alias(&pd->obj, &pd->ibpd, r.o[0], SR_ALIAS_PARENT))) {
		free(pd);
		pd = NULL;
		goto out;
	}
	pd->td = attr->td ? (struct sr_td *)attr->td : NULL;
	if (pd->td)
		atomic_fetch_add(&pd->td->usecnt, 1);
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		pd->alloc = attr->alloc;
		pd->free = attr->free;
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pd->pd_context = attr->pd_context;
	atomic_fetch_add(&pd->real->usecnt, 1);
out:
	sr_obj_unref(&r);
	if (!pd)
		errno = err;
	return pd ? &pd->ibpd : NULL;
}

/* As mlx5: EBUSY while a QP, SRQ or CQ made on it lives. */
int sr_dealloc_parent_domain(struct sr_pd *pd, struct sr_obj *o)
{
	if (atomic_load(&pd->usecnt)) {
		sr_obj_put(o);
		return EBUSY;
	}
	sr_obj_del(o);
	atomic_fetch_sub(&pd->real->usecnt, 1);
	if (pd->td)
		atomic_fetch_sub(&pd->td->usecnt, 1);
	free(pd);
	return 0;
}

void sr_pd_use(struct ibv_pd *p, int delta)
{
	struct sr_pd *pd = (struct sr_pd *)p;

	atomic_fetch_add(&pd->real->usecnt, delta);
	if (pd->real != pd && atomic_fetch_add(&pd->usecnt, delta) + delta == 0 && pd->obj.alias == SR_ALIAS_IMPORT)
		free(pd); /* unimported, and its last QP or SRQ is gone */
}

void *sr_ring_alloc(struct ibv_pd *ibpd, size_t size, uint64_t type, struct sr_ring_mem *m)
{
	struct sr_pd *pd = ibpd ? sr_parent_domain(ibpd) : NULL;
	void *p;

	m->pd = NULL;
	m->type = type;
	if (pd && pd->alloc) {
		p = pd->alloc(ibpd, pd->pd_context, size, (size_t)sysconf(_SC_PAGESIZE), type);
		if (p != IBV_ALLOCATOR_USE_DEFAULT) {
			if (p) {
				memset(p, 0, size);
				m->pd = pd;
			}
			return p;
		}
	}
	return calloc(1, size);
}

void sr_ring_free(void *p, const struct sr_ring_mem *m)
{
	if (!p)
		return;
	if (m->pd)
		m->pd->free(&m->pd->ibpd, m->pd->pd_context, p, m->type);
	else
		free(p);
}
