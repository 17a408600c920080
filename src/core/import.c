/* ibv_import_device, ibv_import_pd, ibv_import_mr, ibv_import_dm and the
 * ibv_unimport_* verbs, within one process.
 *
 * rdma-core imports through the uverbs file: a dup of a context's
 * cmd_fd opened as a new context reaches the same objects, and an
 * object's handle, imported there, gives a new ibv_* object for it.
 * Here a context's cmd_fd is a file of its own (a memfd), by which
 * ibv_import_device finds the context; the imported context is another
 * ibv_context of its objects (struct sr_ictx: to_sctx() is the context
 * it came from), and an imported object is an alias of the object
 * (handle.h).  The objects live until the last of the context and its
 * imports is closed.  Destroying an import destroys the object, as the
 * kernel's command on the handle would; unimporting forgets the import
 * only.  Another process cannot import: the objects are this process's
 * memory (docs/verbs.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "core/sr.h"

/* As rdma-core: a descriptor that is not a device's file is EINVAL. */
struct ibv_context *sr_import_device(int cmd_fd)
{
	struct sr_context *ctx;
	struct sr_ictx *ic;
	struct stat st;
	int async_fd;

	if (fstat(cmd_fd, &st) || !(ctx = sr_ctx_find(st.st_dev, st.st_ino))) {
		errno = EINVAL;
		return NULL;
	}
	ic = calloc(1, sizeof(*ic));
	/* its own descriptor of the context's async events, as rdma-core's
	 * imported context has */
	async_fd = fcntl(ctx->vctx.context.async_fd, F_DUPFD_CLOEXEC, 0);
	if (!ic || async_fd < 0) {
		int e = ic ? errno : ENOMEM;
		free(ic);
		sr_ctx_release(ctx);
		errno = e;
		return NULL;
	}
	ic->owner = ctx;
	sr_ctx_init_verbs(&ic->vctx, ctx->vctx.context.device, cmd_fd, async_fd);
	sr_obj_ctx_import(ctx, ic);
	return &ic->vctx.context;
}

int sr_close_import(struct ibv_context *c)
{
	struct sr_ictx *ic = SR_CONTAINER(c, struct sr_ictx, vctx.context);
	struct sr_context *ctx = ic->owner;

	sr_obj_ctx_unimport(ctx, ic);
	close(c->cmd_fd);
	close(c->async_fd);
	free(ic);
	sr_ctx_release(ctx);
	return 0;
}

/* The object of c's context that handle names, as a t (in use). */
static struct sr_obj *by_handle(struct ibv_context *c, uint32_t handle, enum sr_obj_type t)
{
	int err;
	struct sr_obj *o = sr_obj_get_handle(to_sctx(c), handle, t, &err);

	if (!o)
		errno = err;
	return o;
}

/* Registers the import (its fields set) as an alias of o, which it then
 * stops using; false (errno set, imp not freed) on failure. */
static bool add_import(struct sr_obj *imp_obj, void *imp, struct sr_obj *o)
{
	int err = sr_obj_add_alias(imp_obj, imp, o, SR_ALIAS_IMPORT);

	sr_obj_put(o);
	if (err)
		errno = err;
	return !err;
}

struct ibv_pd *sr_import_pd(struct ibv_context *c, uint32_t handle)
{
	struct sr_obj *o = by_handle(c, handle, SR_OBJ_PD);
	struct sr_pd *pd;

	if (!o)
		return NULL;
	if (!(pd = calloc(1, sizeof(*pd)))) {
		sr_obj_put(o);
		errno = ENOMEM;
		return NULL;
	}
	pd->ibpd.context = c;
	pd->real = to_spd(o->ib);
	atomic_init(&pd->usecnt, 1); /* the application's, until it unimports */
	if (!add_import(&pd->obj, &pd->ibpd, o)) {
		free(pd);
		return NULL;
	}
	return &pd->ibpd;
}

/* As rdma-core's ibv_cmd_query_mr: the keys, the length and the handle;
 * the address is NULL, the PD the one given. */
struct ibv_mr *sr_import_mr(struct ibv_pd *pd, uint32_t handle)
{
	struct sr_obj *pdo, *o;
	struct sr_mr *mr;
	int err;

	if (!(pdo = sr_obj_get(pd, SR_OBJ_PD, NULL, &err))) {
		errno = err;
		return NULL;
	}
	o = by_handle(pd->context, handle, SR_OBJ_MR);
	sr_obj_put(pdo);
	if (!o)
		return NULL;
	if (!(mr = calloc(1, sizeof(*mr)))) {
		sr_obj_put(o);
		errno = ENOMEM;
		return NULL;
	}
	mr->real = to_smr(o->ib);
	mr->ibmr.context = pd->context;
	mr->ibmr.pd = pd;
	mr->ibmr.lkey = mr->real->ibmr.lkey;
	mr->ibmr.rkey = mr->real->ibmr.rkey;
	mr->ibmr.length = mr->real->ibmr.length;
	if (!add_import(&mr->obj, &mr->ibmr, o)) {
		free(mr);
		return NULL;
	}
	return &mr->ibmr;
}

struct ibv_dm *sr_import_dm(struct ibv_context *c, uint32_t handle)
{
	struct sr_obj *o = by_handle(c, handle, SR_OBJ_DM);
	struct sr_dm *dm;

	if (!o)
		return NULL;
	if (!(dm = calloc(1, sizeof(*dm)))) {
		sr_obj_put(o);
		errno = ENOMEM;
		return NULL;
	}
	dm->real = to_sdm(o->ib);
	dm->ibdm.context = c;
	dm->ibdm.comp_mask = IBV_DM_MASK_HANDLE;
	sr_dm_ops(&dm->ibdm);
	if (!add_import(&dm->obj, &dm->ibdm, o)) {
		free(dm);
		return NULL;
	}
	return &dm->ibdm;
}

/* The import ib is forgotten (claimed as one); false if it is none. */
static bool forget_import(void *ib)
{
	int err;
	struct sr_obj *o = sr_obj_claim_alias(ib, SR_ALIAS_IMPORT, &err);

	if (o)
		sr_obj_del(o);
	return o != NULL;
}

/* A QP or SRQ still on the PD keeps it (sr_pd_use frees it after them). */
void sr_unimport_pd(struct ibv_pd *ibpd)
{
	struct sr_pd *pd = (struct sr_pd *)ibpd;

	if (forget_import(ibpd) && atomic_fetch_sub(&pd->usecnt, 1) == 1)
		free(pd);
}

void sr_unimport_mr(struct ibv_mr *mr)
{
	if (forget_import(mr))
		free(mr);
}

void sr_unimport_dm(struct ibv_dm *dm)
{
	if (forget_import(dm))
		free(dm);
}

int sr_destroy_import(struct sr_obj *o, enum sr_obj_type t)
{
	void *ib = o->ib, *target = sr_obj_alias_target(o);
	int err;

	sr_obj_put(o);
	if (!target)
		return ENOENT; /* its object is gone already */
	err = t == SR_OBJ_PD ? sr_dealloc_pd(target) : t == SR_OBJ_MR ? sr_dereg_mr(target) : sr_free_dm(target);
	if (err)
		return err;
	if (t == SR_OBJ_PD)
		sr_unimport_pd(ib);
	else if (t == SR_OBJ_MR)
		sr_unimport_mr(ib);
	else
		sr_unimport_dm(ib);
	return 0;
}
