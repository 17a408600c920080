/* The memory objects: protection and parent domains, thread domains,
 * memory regions, device memory, memory windows; where a ring's memory
 * came from. */
#ifndef SR_CORE_OBJ_MEMORY_H
#define SR_CORE_OBJ_MEMORY_H

#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "core/handle.h"

struct sr_pd;

/* Where a ring of a QP, SRQ or CQ came from: a parent domain's allocator
 * (pd set: its free gives it back, with type) or the library's. */
struct sr_ring_mem {
	struct sr_pd *pd;
	uint64_t type;
};
/* The parent domain's resource types, the second word of each being
 * rdma-core's driver id of rxe, as the devices present themselves. */
#define SR_RES_TYPE(n) (((uint64_t)RDMA_DRIVER_RXE << 32) | (n))
#define SR_RES_TYPE_SQ SR_RES_TYPE(1)
#define SR_RES_TYPE_RQ SR_RES_TYPE(2)
#define SR_RES_TYPE_SRQ SR_RES_TYPE(3)
#define SR_RES_TYPE_CQ SR_RES_TYPE(4)

/* A protection domain, or a parent domain (domain.c): an ibv_pd too,
 * an alias of its protection domain (the one every key and access check
 * goes by, to_spd) with the application's allocators for the rings of
 * the QPs, SRQs and CQs made on it, and perhaps a thread domain. */
struct sr_pd {
	struct ibv_pd ibpd;
	struct sr_obj obj;
	/* MRs, QPs, SRQs, AHs, parent domains using it; a parent domain's:
	 * its QPs, SRQs, AHs and CQs; an import's: its QPs, SRQs and AHs, and 1 until
	 * it is unimported (it is freed at 0) */
	atomic_int usecnt;
	struct sr_pd *real; /* itself; a parent domain's: its protection domain */
	struct sr_td *td;   /* a parent domain's thread domain, or NULL */
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment, uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t resource_type);
	void *pd_context;
};

/* A thread domain (domain.c): the application keeps the objects of its
 * parent domains to one thread at a time.  Here a hint that changes
 * nothing: each QP's lock is shared with the progress thread. */
struct sr_td {
	struct ibv_td ibtd;
	struct sr_obj obj;
	atomic_int usecnt; /* parent domains using it */
};

struct sr_mr {
	struct ibv_mr ibmr;
	struct sr_obj obj;
	struct sr_pd *pd;
	uint64_t iova; /* address the peer uses (ibmr.addr unless iova given) */
	uint8_t *host; /* where iova maps in our address space */
	uint64_t length;
	unsigned int access;
	uint32_t index;	    /* slot in ctx->mr_tab */
	uint32_t num_mw;    /* memory windows bound to it (mr_lock) */
	struct sr_dm *dm;   /* the device memory it covers (ibv_reg_dm_mr), or NULL */
	struct sr_mr *real; /* itself; an import's: the region it names */
};

/* Device memory (dm.c): the device's own memory, which the application
 * reaches only through ibv_memcpy_to_dm/ibv_memcpy_from_dm and which its
 * MRs (ibv_reg_dm_mr, zero-based) expose to RDMA. */
struct sr_dm {
	struct ibv_dm ibdm;
	struct sr_obj obj;
	uint8_t *buf;
	uint64_t length;
	atomic_int usecnt;  /* MRs on it */
	struct sr_dm *real; /* itself; an import's: the DM it names */
};

/* A memory window (mw.c), as the kernel's rxe has them: type 1 bound by
 * ibv_bind_mw, type 2 (2B) by a BIND_MW work request and tied to the QP
 * that bound it.  Its rkey names a slot of ctx->mw_tab; the slot is taken
 * from the same index space as the MRs', so an rkey is an MR's or an MW's,
 * never both.  Everything below ibmw is protected by ctx->mr_lock. */
enum sr_mw_state {
	SR_MW_FREE,
	SR_MW_VALID
};
struct sr_mw {
	struct ibv_mw ibmw;
	struct sr_obj obj;
	struct sr_pd *pd;
	uint32_t rkey;		/* the key as the last bind set its low 8 bits */
	uint32_t index;		/* slot in ctx->mw_tab */
	enum sr_mw_state state; /* type 1: always VALID; type 2: FREE until bound */
	struct sr_mr *mr;	/* the region it is bound to, or NULL */
	uint64_t addr;		/* the window's start in the region's iova space */
	uint64_t length;
	unsigned int access;
	uint64_t qp_serial; /* type 2: the QP it is bound to (sr_qp.serial) */
};

/* The protection domain of p (a parent domain's is the one it was made on). */
static inline struct sr_pd *to_spd(struct ibv_pd *p)
{
	return ((struct sr_pd *)p)->real;
}
/* A parent domain, or NULL if p is none. */
static inline struct sr_pd *sr_parent_domain(struct ibv_pd *p)
{
	struct sr_pd *pd = (struct sr_pd *)p;
	return pd->obj.alias == SR_ALIAS_PARENT ? pd : NULL;
}
static inline struct sr_mr *to_smr(struct ibv_mr *m)
{
	return ((struct sr_mr *)m)->real;
}
static inline struct sr_mw *to_smw(struct ibv_mw *m)
{
	return (struct sr_mw *)m;
}
static inline struct sr_dm *to_sdm(struct ibv_dm *d)
{
	return ((struct sr_dm *)d)->real;
}

#endif
