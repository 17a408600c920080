/* Protection domains, memory regions and the key table.
 *
 * A key is 32 random bits (core/loc.h, sr_key_slot): its upper 24 are unique
 * among the context's live keys and find the region's slot through a
 * hash map, so no table index shows in a key (rxe builds its keys from
 * the index and 8 random bits).  A peer that saw keys cannot guess the
 * next, and a stale key of a deregistered region fails: its tag left the
 * map, and a reused slot never gets the key it had last.  lkey == rkey. */
#include <errno.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
#include <time.h>
#include <sys/random.h>

#include "core/guard.h"
#include "core/sr.h"

struct ibv_pd *sr_alloc_pd(struct ibv_context *c)
{
	struct sr_pd *pd = calloc(1, sizeof(*pd));
	int err;

	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->ibpd.context = c;
	pd->real = pd;
	if ((err = sr_obj_add(to_sctx(c), &pd->obj, &pd->ibpd, SR_OBJ_PD))) {
		free(pd);
		errno = err;
		return NULL;
	}
	return &pd->ibpd;
}

int sr_dealloc_pd(struct ibv_pd *ibpd)
{
	int err;
	struct sr_obj *o = sr_obj_claim(ibpd, SR_OBJ_PD, &err);

	if (!o)
		return err;
	if (sr_parent_domain(ibpd))
		return sr_dealloc_parent_domain(sr_parent_domain(ibpd), o);
	if (o->alias == SR_ALIAS_IMPORT)
		return sr_destroy_import(o, SR_OBJ_PD);
	/* as uverbs: a PD still used by an MR, QP, SRQ or AH can't go (nor,
	 * as mlx5's, one that a parent domain was made on) */
	if (atomic_load(&to_spd(ibpd)->usecnt)) {
		sr_obj_put(o);
		return EBUSY;
	}
	sr_obj_del(o);
	free(to_spd(ibpd));
	return 0;
}

static uint32_t key_random(void)
{
	uint32_t r;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		/* only before the kernel's pool is ready (early boot) */
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = (uint32_t)ts.tv_nsec * 0x9E3779B1u ^ (uint32_t)(uintptr_t)&ts;
	}
	return r;
}

static void key_map_put(struct sr_key_ent *map, uint32_t mask, uint32_t tag, uint32_t slot)
{
	uint32_t i = tag & mask;

	while (map[i].slot)
		i = (i + 1) & mask;
	map[i].tag = tag;
	map[i].slot = slot;
}

/* Room for one more key at load <= 1/2; false when out of memory. */
static bool key_map_reserve(struct sr_context *ctx)
{
	uint32_t cap = ctx->key_map ? ctx->key_map_mask + 1 : 0;

	if (2 * (ctx->key_map_n + 1) <= cap)
		return true;
	uint32_t ncap = cap ? 2 * cap : 512;
	struct sr_key_ent *m = calloc(ncap, sizeof(*m));
	if (!m)
		return false;
	for (uint32_t i = 0; i < cap; i++)
		if (ctx->key_map[i].slot)
			key_map_put(m, ncap - 1, ctx->key_map[i].tag, ctx->key_map[i].slot);
	free(ctx->key_map);
	ctx->key_map = m;
	ctx->key_map_mask = ncap - 1;
	return true;
}

/* A window's tag served every key byte its binds gave it: the tag, not
 * the key, stays retired. */
static bool key_retired(const struct sr_context *ctx, uint32_t key)
{
	for (int i = 0; i < SR_KEY_RETIRED; i++)
		if (ctx->key_retired[i] >> 8 == key >> 8)
			return true;
	return false;
}

uint32_t sr_key_make(struct sr_context *ctx, uint32_t idx)
{
	if (!key_map_reserve(ctx))
		return 0;
	for (;;) {
		uint32_t key = key_random();

		/* tag 0 is never handed out, so that key 0 is never valid */
		if (!(key >> 8) || key == ctx->key_last[idx] || sr_key_slot(ctx, key) || key_retired(ctx, key))
			continue;
		key_map_put(ctx->key_map, ctx->key_map_mask, key >> 8, idx);
		ctx->key_map_n++;
		ctx->key_last[idx] = key;
		return key;
	}
}

void sr_key_forget(struct sr_context *ctx, uint32_t key)
{
	uint32_t mask = ctx->key_map_mask, tag = key >> 8, i;

	if (!ctx->key_map)
		return;
	for (i = tag & mask; ctx->key_map[i].slot && ctx->key_map[i].tag != tag; i = (i + 1) & mask)
		;
	if (!ctx->key_map[i].slot)
		return;
	/* backward-shift deletion: the entries after it that probed past it
	 * move up, so that no probe stops early at the hole */
	for (uint32_t j = (i + 1) & mask; ctx->key_map[j].slot; j = (j + 1) & mask) {
		uint32_t home = ctx->key_map[j].tag & mask;
		if (((j - home) & mask) >= ((j - i) & mask)) {
			ctx->key_map[i] = ctx->key_map[j];
			i = j;
		}
	}
	ctx->key_map[i].slot = 0;
	ctx->key_map_n--;
	ctx->key_retired[ctx->key_retired_next++ % SR_KEY_RETIRED] = key;
}

/* A free slot of the key table (caller holds mr_lock for writing), grown
 * as needed; both tables (MRs and MWs) grow together.  Slots are taken
 * cyclically from mr_next on, as rxe's xa_alloc_cyclic does: a freed
 * slot, whose stale key a peer may still hold, is taken again only after
 * every other free slot has been.  Slot 0 stays unused so that key 0 is
 * never valid.  Returns the index, or 0 when the table is full. */
uint32_t sr_key_slot_alloc(struct sr_context *ctx)
{
	uint32_t n = ctx->mr_tab_size;
	uint32_t idx = ctx->mr_next >= 1 && ctx->mr_next < n ? ctx->mr_next : 1;

	for (uint32_t k = 1; k < n; k++) {
		if (!ctx->mr_tab[idx] && !(ctx->mw_tab && ctx->mw_tab[idx])) {
			ctx->mr_next = idx + 1;
			return idx;
		}
		idx = idx + 1 < n ? idx + 1 : 1;
	}
	uint32_t nn = n ? n * 2 : 256;
	if (nn > SR_KEY_SLOTS)
		return 0;
	struct sr_mr **t = realloc(ctx->mr_tab, nn * sizeof(*t));
	if (!t)
		return 0;
	memset(t + n, 0, (nn - n) * sizeof(*t));
	ctx->mr_tab = t;
	uint32_t *kl = realloc(ctx->key_last, nn * sizeof(*kl));
	if (!kl)
		return 0; /* mr_tab is larger now: harmless, it is sized by mr_tab_size */
	memset(kl + n, 0, (nn - n) * sizeof(*kl));
	ctx->key_last = kl;
	if (ctx->mw_tab) {
		struct sr_mw **w = realloc(ctx->mw_tab, nn * sizeof(*w));
		if (!w)
			return 0;
		memset(w + n, 0, (nn - n) * sizeof(*w));
		ctx->mw_tab = w;
	}
	ctx->mr_tab_size = nn;
	idx = n ? n : 1;
	ctx->mr_next = idx + 1;
	return idx;
}

static int key_slot_alloc(struct sr_context *ctx, struct sr_mr *mr)
{
	uint32_t idx = sr_key_slot_alloc(ctx);

	if (!idx)
		return -ENOMEM;
	uint32_t key = sr_key_make(ctx, idx);
	if (!key)
		return -ENOMEM;
	ctx->mr_tab[idx] = mr;
	mr->index = idx;
	mr->ibmr.lkey = mr->ibmr.rkey = key;
	return 0;
}

static int check_access(unsigned int access)
{
	unsigned int known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
			     IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING |
			     IBV_ACCESS_OPTIONAL_RANGE;
	if (access & ~known)
		return EINVAL;
	/* IB spec: remote write or atomic needs local write */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
		return EINVAL;
	/* IBV_ACCESS_MW_BIND is accepted on both devices, as the kernel does
	 * (it does not check it): siw has no windows to bind, rxe has */
	return 0;
}

/* The range of a registration, as the kernel's ib_umem_get() takes it for
 * rxe and siw: no pages (length 0) or a range that wraps is EINVAL, a
 * page that is not mapped EFAULT (it cannot be pinned).  msync() walks the
 * mappings without touching a page.  An on-demand-paging region is not
 * pinned: its pages may come later, and one at NULL of SIZE_MAX bytes is
 * implicit, the whole address space (as mlx5's: at iova 0 only). */
static int check_range(void *addr, size_t len, uint64_t iova, unsigned int access)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), start = (uintptr_t)addr & ~(pg - 1);

	if ((access & IBV_ACCESS_ON_DEMAND) && sr_mr_implicit(addr, len))
		return iova ? EINVAL : 0;
	if (len > SR_MAX_MR_SIZE || (uintptr_t)addr + len < (uintptr_t)addr || !len)
		return EINVAL;
	if (access & IBV_ACCESS_ON_DEMAND)
		return 0;
	if (msync((void *)start, (uintptr_t)addr + len - start, MS_ASYNC))
		return EFAULT;
	return 0;
}

/* A new region of pd over [host, host + len) at iova (the PD resolved,
 * access checked): a place in the device's MR limit, the pages (unless
 * dm: device memory is there), a key. */
static struct ibv_mr *mr_create(struct ibv_pd *pd, uint8_t *host, size_t len, uint64_t iova, unsigned int access,
				struct sr_dm *dm, int *errp)
{
	struct sr_context *ctx = to_sctx(pd->context);
	struct sr_mr *mr = calloc(1, sizeof(*mr));
	int err;

	if (!mr) {
		*errp = ENOMEM;
		return NULL;
	}
	if ((err = sr_obj_add(ctx, &mr->obj, &mr->ibmr, SR_OBJ_MR)))
		goto fail;
	if (!dm && (err = check_range(host, len, iova, access))) {
		sr_obj_del(&mr->obj);
		goto fail;
	}
	mr->real = mr;
	mr->pd = to_spd(pd);
	mr->host = host;
	mr->length = len;
	mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
	mr->access = access;
	mr->dm = dm;
	mr->ibmr.context = pd->context;
	mr->ibmr.pd = pd;
	mr->ibmr.addr = dm ? NULL : host;
	mr->ibmr.length = len;

	pthread_rwlock_wrlock(&ctx->mr_lock);
	err = -key_slot_alloc(ctx, mr);
	pthread_rwlock_unlock(&ctx->mr_lock);
	if (err) {
		sr_obj_del(&mr->obj);
		goto fail;
	}
	atomic_fetch_add(&mr->pd->usecnt, 1);
	if (dm)
		atomic_fetch_add(&dm->usecnt, 1);
	return &mr->ibmr;
fail:
	free(mr);
	*errp = err;
	return NULL;
}

/* As uverbs and rxe take them: the access flags, the PD's handle, a place
 * in the device's MR limit, then the pages. */
struct ibv_mr *sr_reg_mr(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova, unsigned int access)
{
	struct ibv_mr *mr = NULL;
	struct sr_obj *pdo;
	int err;

	if (!(err = check_access(access)) && (pdo = sr_obj_get(pd, SR_OBJ_PD, NULL, &err))) {
		mr = mr_create(pd, addr, len, iova, access, NULL, &err);
		sr_obj_put(pdo);
	}
	if (!mr)
		errno = err;
	return mr;
}

/* Device memory access as mlx5 allows it on a DM MR; the checks are
 * uverbs': zero-based, the range inside the DM (EINVAL). */
#define DM_MR_ACCESS                                                                                            \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
	 IBV_ACCESS_ZERO_BASED | IBV_ACCESS_OPTIONAL_RANGE)

struct ibv_mr *sr_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *ibdm, uint64_t offset, size_t len, unsigned int access)
{
	struct sr_obj_refs r = { .n = 0 };
	struct ibv_mr *mr = NULL;
	struct sr_dm *dm;
	int err;

	if ((access & ~DM_MR_ACCESS) || !(access & IBV_ACCESS_ZERO_BASED))
		err = EINVAL;
	else if (!(err = check_access(access)) && !(err = sr_obj_ref(&r, pd, SR_OBJ_PD, NULL)) &&
		 !(err = sr_obj_ref(&r, ibdm, SR_OBJ_DM, pd->context))) {
		dm = to_sdm(ibdm);
		if (offset > dm->length || len > dm->length - offset)
			err = EINVAL;
		else
			mr = mr_create(pd, dm->buf + offset, len, 0, access, dm, &err);
	}
	sr_obj_unref(&r);
	if (!mr)
		errno = err;
	return mr;
}

static int rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct sr_mr *mr = to_smr(ibmr); /* an import's is the region it names */
	struct sr_context *ctx = to_sctx(ibmr->context);
	int err = 0;

	if (flags & ~(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS))
		return EINVAL;
	if (mr->dm)
		return EINVAL; /* uverbs re-registers no device-memory MR */
	if (!flags)
		return EINVAL;
	if ((flags & IBV_REREG_MR_CHANGE_ACCESS) && (err = check_access(access)))
		return err;
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !len))
		return EINVAL;
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) &&
	    (err = check_range(addr, len, (uintptr_t)addr,
			       (flags & IBV_REREG_MR_CHANGE_ACCESS) ? (unsigned int)access : mr->access)))
		return err;
	if ((flags & IBV_REREG_MR_CHANGE_PD) && !pd)
		return EINVAL;

	pthread_rwlock_wrlock(&ctx->mr_lock);
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr->host = addr;
		mr->length = len;
		mr->iova = (mr->access & IBV_ACCESS_ZERO_BASED) ? 0 : (uint64_t)(uintptr_t)addr;
		ibmr->addr = addr;
		ibmr->length = len;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		atomic_fetch_sub(&mr->pd->usecnt, 1);
		atomic_fetch_add(&to_spd(pd)->usecnt, 1);
		mr->pd = to_spd(pd);
		ibmr->pd = pd;
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		mr->access = access;
	/* The keys stay, as rxe's rereg_user_mr keeps them (and mlx5's for
	 * these changes): rdma-core's tests re-register both ends and go on
	 * with the rkey they exchanged before. */
	pthread_rwlock_unlock(&ctx->mr_lock);
	return 0;
}

/* As uverbs: the MR held for writing, the new PD resolved in its context. */
int sr_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct sr_obj_refs r = { .n = 0 };
	struct sr_obj *o;
	int err;

	if (!(o = sr_obj_claim(ibmr, SR_OBJ_MR, &err)))
		return err;
	if (!(flags & IBV_REREG_MR_CHANGE_PD) || !pd || !(err = sr_obj_ref(&r, pd, SR_OBJ_PD, ibmr->context)))
		err = rereg_mr(ibmr, flags, pd, addr, len, access);
	sr_obj_unref(&r);
	sr_obj_put(o);
	return err;
}

int sr_dereg_mr(struct ibv_mr *ibmr)
{
	struct sr_mr *mr;
	struct sr_context *ctx;
	struct sr_obj *o;
	int err;

	if (!(o = sr_obj_claim(ibmr, SR_OBJ_MR, &err)))
		return err;
	if (o->alias == SR_ALIAS_IMPORT)
		return sr_destroy_import(o, SR_OBJ_MR);
	mr = to_smr(ibmr); /* read only once it is known to be live */
	ctx = to_sctx(ibmr->context);
	/* the write lock waits for any in-progress placement into this region */
	pthread_rwlock_wrlock(&ctx->mr_lock);
	if (mr->num_mw) {
		/* as rxe: not while memory windows are bound to it */
		pthread_rwlock_unlock(&ctx->mr_lock);
		sr_obj_put(o);
		return EINVAL;
	}
	if (mr->index < ctx->mr_tab_size && ctx->mr_tab[mr->index] == mr) {
		ctx->mr_tab[mr->index] = NULL;
		sr_key_forget(ctx, mr->ibmr.rkey);
	}
	pthread_rwlock_unlock(&ctx->mr_lock);
	sr_obj_del(o);
	atomic_fetch_sub(&mr->pd->usecnt, 1);
	if (mr->dm)
		atomic_fetch_sub(&mr->dm->usecnt, 1);
	free(mr);
	return 0;
}

int sr_mr_invalidate(struct sr_context *ctx, uint32_t key, struct sr_pd *pd)
{
	uint32_t idx;
	struct sr_mr *mr;
	int err = 0;

	pthread_rwlock_wrlock(&ctx->mr_lock);
	idx = sr_key_slot(ctx, key);
	if (!idx || !(mr = ctx->mr_tab[idx]) || mr->ibmr.rkey != key) {
		err = -EINVAL;
	} else if (mr->pd != pd) {
		err = -EACCES;
	} else {
		/* Out of the table: every lookup of the key fails from now on,
		 * at no cost to the lookups of other keys.  ibv_dereg_mr still
		 * frees it (and finds the slot no longer its own). */
		ctx->mr_tab[idx] = NULL;
		sr_key_forget(ctx, key);
	}
	pthread_rwlock_unlock(&ctx->mr_lock);
	return err;
}

int sr_mr_find(struct sr_context *ctx, uint32_t key, bool remote, struct sr_pd *pd, uint64_t va, uint64_t len,
	       unsigned int need_access, uint8_t **host)
{
	uint32_t idx = sr_key_slot(ctx, key);
	struct sr_mr *mr;

	if (!idx)
		return -EINVAL;
	mr = ctx->mr_tab[idx];
	if (!mr || (remote ? mr->ibmr.rkey : mr->ibmr.lkey) != key)
		return -EINVAL;
	if (pd && mr->pd != pd)
		return -EINVAL;
	if ((mr->access & need_access) != need_access)
		return -EINVAL;
	if (va < mr->iova || len > mr->length || va - mr->iova > mr->length - len)
		return -EFAULT;
	*host = mr->host + (va - mr->iova);
	/* An ODP region's page that is not there fails a local read (a send
	 * gathering from it) as the NIC's failed page fault does, with
	 * EFAULT (LOC_PROT_ERR): the pages are read outside the guard.
	 * Writes into it are guarded (sr_place_guarded). */
	if ((mr->access & IBV_ACCESS_ON_DEMAND) && !remote && !(need_access & IBV_ACCESS_LOCAL_WRITE) &&
	    !sr_probe_read(*host, len))
		return -EFAULT;
	return 0;
}

uint8_t *sr_mr_lookup(struct sr_context *ctx, uint32_t key, bool remote, struct sr_pd *pd, uint64_t va, uint64_t len,
		      unsigned int need_access)
{
	uint8_t *host;

	return sr_mr_find(ctx, key, remote, pd, va, len, need_access, &host) ? NULL : host;
}

/* Writes n bytes into our own memory through the kernel, which reports a
 * page that is no longer mapped as EFAULT where a store would kill the
 * process.  A NIC writes into registered pages the kernel keeps pinned
 * even after the application unmapped them (UCX frees its receive
 * buffers before it destroys their QP, its registration cache
 * deregistering them later); a userspace device cannot pin, so a
 * datagram arriving in that window must fail its receive, not crash.
 * Where process_vm_writev is not allowed (a seccomp profile) the plain
 * store is the fallback. */
static bool place_checked(uint8_t *host, const uint8_t *src, size_t n)
{
	static atomic_bool unavailable;

	if (!atomic_load_explicit(&unavailable, memory_order_relaxed)) {
		struct iovec l = { (void *)(uintptr_t)src, n }, r = { host, n };
		ssize_t w = process_vm_writev(getpid(), &l, 1, &r, 1, 0);

		if (w == (ssize_t)n)
			return true;
		if (w >= 0 || errno == EFAULT)
			return false; /* a page of the range is gone */
		atomic_store_explicit(&unavailable, true, memory_order_relaxed);
	}
	return sr_place_guarded(host, src, n);
}

int sr_sge_copy(struct sr_context *ctx, struct sr_pd *pd, const struct ibv_sge *sge, uint32_t num_sge, uint64_t offset,
		void *buf, uint64_t len, int how)
{
	uint8_t *p = buf;
	uint32_t i = 0;
	bool to_sge = how != SR_COPY_FROM_SGE;

	while (i < num_sge && offset >= sge[i].length) {
		offset -= sge[i].length;
		i++;
	}
	while (len) {
		if (i >= num_sge)
			return -EFAULT;
		uint64_t n = sge[i].length - offset;
		if (n > len)
			n = len;
		uint8_t *host = sr_mr_lookup(ctx, sge[i].lkey, false, pd, sge[i].addr + offset, n,
					     to_sge ? IBV_ACCESS_LOCAL_WRITE : 0);
		if (!host)
			return -EFAULT;
		if (how == SR_COPY_TO_SGE_CHECKED) {
			if (!place_checked(host, p, n))
				return -EFAULT;
		} else if (to_sge) {
			if (!sr_place_guarded(host, p, n))
				return -EFAULT; /* unmapped by the application (core/guard.h) */
		} else {
			memcpy(p, host, n);
		}
		p += n;
		len -= n;
		offset = 0;
		i++;
	}
	return 0;
}
