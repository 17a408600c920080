/* On-demand paging: ibv_advise_mr.
 *
 * softrdma never pins memory: every region is reached through the
 * process's page tables when its bytes move, which is what a NIC with
 * ODP does through its own.  An ODP region (IBV_ACCESS_ON_DEMAND, mr.c)
 * needs no pages at registration, follows whatever is mapped at its
 * addresses when it is accessed, and an implicit one (NULL, SIZE_MAX)
 * covers every address.  A page that is not there when it is accessed
 * fails the access as the NIC's failed page fault does (mr.c, guard.c).
 * Prefetching makes the pages present (and writable) in the page tables
 * ahead of the access, as the NIC's prefetch fills its own. */
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/guard.h"
#include "core/sr.h"

/* What the transports serve from and into ODP regions: everything they
 * carry (odp.c's mechanism is the same for all); iWARP has no UC, UD or
 * atomics. */
void sr_odp_caps(const struct sr_device *dev, struct ibv_odp_caps *c)
{
	bool iwarp = dev->conf.type == SR_DEV_IWARP;
	uint32_t any = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;

	c->general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	c->per_transport_caps.rc_odp_caps = any | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
					    (iwarp ? 0 : IBV_ODP_SUPPORT_ATOMIC);
	c->per_transport_caps.uc_odp_caps = iwarp ? 0 : any | IBV_ODP_SUPPORT_WRITE;
	c->per_transport_caps.ud_odp_caps = iwarp ? 0 : any;
}

/* XRC's: what its INI end sends from and its TGT end's SRQs receive into */
uint32_t sr_odp_xrc_caps(const struct sr_device *dev)
{
	return dev->conf.type == SR_DEV_IWARP ? 0 :
						IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
							IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
}

/* Where sge lies in an ODP region of pd that has local write (rxe looks
 * the key up so); caller holds mr_lock for reading. */
static int odp_range(struct sr_context *ctx, struct sr_pd *pd, const struct ibv_sge *sge, uint8_t **host)
{
	uint32_t idx = sr_key_slot(ctx, sge->lkey);
	struct sr_mr *mr = idx ? ctx->mr_tab[idx] : NULL;

	if (!mr || mr->ibmr.lkey != sge->lkey || mr->pd != pd || !(mr->access & IBV_ACCESS_LOCAL_WRITE) ||
	    !(mr->access & IBV_ACCESS_ON_DEMAND))
		return EINVAL;
	if (sge->addr < mr->iova || sge->length > mr->length || sge->addr - mr->iova > mr->length - sge->length)
		return EINVAL;
	*host = mr->host + (sge->addr - mr->iova);
	return 0;
}

/* Whether the kernel populates page tables on request (MADV_POPULATE_*,
 * Linux 5.14): asked once, of a page of our own, since EINVAL is also its
 * answer for a page with no access. */
static bool can_populate(void)
{
	static _Atomic int known = -1;
	static char page[1];
	int k = atomic_load_explicit(&known, memory_order_relaxed);

	if (k < 0) {
		uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
		k = !madvise((void *)((uintptr_t)page & ~(pg - 1)), pg, MADV_POPULATE_READ);
		atomic_store_explicit(&known, k, memory_order_relaxed);
	}
	return k;
}

/* The pages of [p, p + len) present in the page tables, writable if
 * write: 0 or EFAULT (a page that cannot be had: not mapped, no access). */
static int populate(uint8_t *p, uint64_t len, bool write)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)p & ~(pg - 1), end = ((uintptr_t)p + len + pg - 1) & ~(pg - 1);

	if (!len)
		return 0;
	if (can_populate())
		return madvise((void *)start, end - start, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) ? EFAULT :
													       0;
	/* an older kernel: a read of each page, which write faults would
	 * need a store for (not made: it could race the application) */
	return sr_probe_read(p, len) ? 0 : EFAULT;
}

/* As uverbs and rxe: an unknown flag EINVAL, an advice other than the
 * three prefetches EOPNOTSUPP, no SGEs EINVAL, an SGE not inside an ODP
 * region of the PD EINVAL.  With IBV_ADVISE_MR_FLAG_FLUSH the pages are
 * there when it returns, or EFAULT says one could not be had; without,
 * it is best effort (rxe's runs later and may fail unseen), done before
 * returning here.  PREFETCH_NO_FAULT makes present only what is present:
 * nothing to do when the page tables are the NIC's. */
int sr_advise_mr(struct ibv_pd *ibpd, enum ibv_advise_mr_advice advice, uint32_t flags, struct ibv_sge *sg,
		 uint32_t num_sge)
{
	struct sr_context *ctx;
	struct sr_obj *pdo;
	int err = 0;

	if (flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH)
		return EINVAL;
	if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return EOPNOTSUPP;
	if (!num_sge || !sg)
		return EINVAL;
	if (!(pdo = sr_obj_get(ibpd, SR_OBJ_PD, NULL, &err)))
		return err;
	ctx = to_sctx(ibpd->context);
	for (uint32_t i = 0; i < num_sge && !err; i++) {
		struct ibv_sge sge = sr_app_sge(sg, (int)i);
		uint8_t *host = NULL;

		pthread_rwlock_rdlock(&ctx->mr_lock);
		err = odp_range(ctx, to_spd(ibpd), &sge, &host);
		pthread_rwlock_unlock(&ctx->mr_lock);
		if (err || advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
			continue;
		int e = populate(host, sge.length, advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE);
		if (flags & IBV_ADVISE_MR_FLAG_FLUSH)
			err = e;
	}
	sr_obj_put(pdo);
	return err;
}
