/* Device memory: ibv_alloc_dm, ibv_free_dm, ibv_memcpy_to_dm and
 * ibv_memcpy_from_dm, as mlx5 has them (its MEMIC).
 *
 * The device's memory is the library's: a buffer the application can
 * reach only through the copy verbs, and the peer only through the MRs
 * of ibv_reg_dm_mr (mr.c).  Its size, SR_MAX_DM_SIZE bytes a device
 * (max_dm_size), is shared by the device's contexts in the process, as a
 * NIC's by all of its users.  Accesses go in aligned 4-byte words, as
 * mlx5's: offset and length must be multiples of 4. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/sr.h"

/* As mlx5_access_dm: bounds first (EFAULT), then alignment (EINVAL);
 * each word stored or loaded once (the receive path may write the same
 * words), never torn. */
static int dm_check(const struct sr_dm *dm, uint64_t off, size_t len)
{
	if (off > dm->length || len > dm->length - off)
		return EFAULT;
	if ((off | len) & 3)
		return EINVAL;
	return 0;
}

static int dm_memcpy_to(struct ibv_dm *ibdm, uint64_t off, const void *host, size_t len)
{
	struct sr_dm *dm = to_sdm(ibdm);
	int err = dm_check(dm, off, len);

	if (err)
		return err;
	for (size_t i = 0; i < len; i += 4) {
		uint32_t w;
		memcpy(&w, (const uint8_t *)host + i, 4);
		__atomic_store_n((uint32_t *)(dm->buf + off + i), w, __ATOMIC_RELAXED);
	}
	return 0;
}

static int dm_memcpy_from(void *host, struct ibv_dm *ibdm, uint64_t off, size_t len)
{
	struct sr_dm *dm = to_sdm(ibdm);
	int err = dm_check(dm, off, len);

	if (err)
		return err;
	for (size_t i = 0; i < len; i += 4) {
		uint32_t w = __atomic_load_n((uint32_t *)(dm->buf + off + i), __ATOMIC_RELAXED);
		memcpy((uint8_t *)host + i, &w, 4);
	}
	return 0;
}

void sr_dm_ops(struct ibv_dm *dm)
{
	dm->memcpy_to_dm = dm_memcpy_to;
	dm->memcpy_from_dm = dm_memcpy_from;
}

/* Take len bytes of the device's memory: false when they are not left
 * (mlx5: ENOMEM when its MEMIC is used up). */
static bool dm_reserve(struct sr_device *dev, uint64_t len)
{
	uint64_t used = atomic_load(&dev->dm_used);

	do {
		if (len > SR_MAX_DM_SIZE - used)
			return false;
	} while (!atomic_compare_exchange_weak(&dev->dm_used, &used, used + len));
	return true;
}

/* As uverbs and mlx5: an unknown comp_mask bit, no length, more than
 * max_dm_size or an alignment beyond the device's is EINVAL. */
struct ibv_dm *sr_alloc_dm(struct ibv_context *c, struct ibv_alloc_dm_attr *attr)
{
	struct sr_context *ctx = to_sctx(c);
	struct sr_dm *dm;
	size_t align;
	int err;

	if (!attr || attr->comp_mask || !attr->length || attr->length > SR_MAX_DM_SIZE ||
	    attr->log_align_req > SR_MAX_DM_LOG_ALIGN) {
		errno = EINVAL;
		return NULL;
	}
	if (!dm_reserve(ctx->dev, attr->length)) {
		errno = ENOMEM;
		return NULL;
	}
	dm = calloc(1, sizeof(*dm));
	align = (size_t)1 << (attr->log_align_req > 6 ? attr->log_align_req : 6);
	if (!dm || posix_memalign((void **)&dm->buf, align, (attr->length + 3) & ~(size_t)3)) {
		err = ENOMEM;
		goto fail;
	}
	memset(dm->buf, 0, attr->length);
	dm->ibdm.context = c;
	dm->length = attr->length;
	dm->real = dm;
	sr_dm_ops(&dm->ibdm);
	dm->ibdm.comp_mask = IBV_DM_MASK_HANDLE;
	if ((err = sr_obj_add(ctx, &dm->obj, &dm->ibdm, SR_OBJ_DM)))
		goto fail;
	return &dm->ibdm;
fail:
	atomic_fetch_sub(&ctx->dev->dm_used, attr->length);
	if (dm)
		free(dm->buf);
	free(dm);
	errno = err;
	return NULL;
}

void sr_dm_forget(struct sr_dm *dm)
{
	atomic_fetch_sub(&to_sctx(dm->ibdm.context)->dev->dm_used, dm->length);
	free(dm->buf);
	dm->buf = NULL;
	dm->length = 0;
}

/* As uverbs: EBUSY while an MR covers it. */
int sr_free_dm(struct ibv_dm *ibdm)
{
	struct sr_dm *dm;
	struct sr_obj *o;
	int err;

	if (!(o = sr_obj_claim(ibdm, SR_OBJ_DM, &err)))
		return err;
	if (o->alias == SR_ALIAS_IMPORT)
		return sr_destroy_import(o, SR_OBJ_DM);
	dm = to_sdm(ibdm); /* read only once it is known to be live */
	if (atomic_load(&dm->usecnt)) {
		sr_obj_put(o);
		return EBUSY;
	}
	sr_obj_del(o); /* sr_dm_forget: its bytes are the device's again */
	free(dm);
	return 0;
}
