/* Placing data in application memory and reading the application's
 * SGEs, as a NIC's DMA does. */
#ifndef SR_CORE_PLACE_H
#define SR_CORE_PLACE_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "common/tsan.h"

struct sr_context;
struct sr_pd;

/* Copy a peer's data into application memory as a NIC's DMA would: each
 * byte written once, the last ones last and in address order.  memcpy may
 * store a byte twice (glibc copies 64 bytes as two overlapping 64-byte
 * stores), so an application polling the end of its buffer (ib_write_lat,
 * riostream) could see the data arrive, write there, and have its write
 * undone by the copy's second store.  The bulk goes by memcpy; the last
 * SR_PLACE_TAIL bytes after it in ascending order, the final 8 one by one. */
#define SR_PLACE_TAIL 64u
typedef uint64_t __attribute__((may_alias, aligned(1))) sr_u64_unaligned;
static inline void sr_place(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	size_t i = n > SR_PLACE_TAIL ? n - SR_PLACE_TAIL : 0;

	sr_dma_begin();
	if (i)
		memcpy(d, s, i);
	/* the compiler keeps the bulk's stores before these volatile ones */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	for (; i + 16 <= n; i += 8) {
		uint64_t v;
		memcpy(&v, s + i, 8);
		*(volatile sr_u64_unaligned *)(d + i) = v;
	}
	for (; i < n; i++)
		((volatile uint8_t *)d)[i] = s[i];
	sr_dma_end();
}

/* mr.c */
/* Copy between a local SGE list (lkeys) and a flat buffer. offset is into
 * the SGE list's total length. Returns 0 or -EFAULT (bad lkey / bounds,
 * or with SR_COPY_TO_SGE_CHECKED memory no longer mapped).  Caller holds
 * mr_lock for reading. */
enum {
	SR_COPY_FROM_SGE = 0,
	SR_COPY_TO_SGE = 1,
	/* through the kernel (a system call per piece): a page the application
	 * unmapped while still registered fails the copy, not the process */
	SR_COPY_TO_SGE_CHECKED = 2,
};
int sr_sge_copy(struct sr_context *ctx, struct sr_pd *pd, const struct ibv_sge *sge, uint32_t num_sge, uint64_t offset,
		void *buf, uint64_t len, int how);
/* The application's SGE i, read byte-wise: callers may hand in arrays
 * that are not 8-byte aligned (libiscsi's iSER keeps its receive SGE in a
 * packed descriptor), which the hardware providers read without a fault
 * on x86 and so must we (UBSan: misaligned load). */
static inline struct ibv_sge sr_app_sge(const struct ibv_sge *list, int i)
{
	struct ibv_sge s;

	memcpy(&s, (const char *)list + (size_t)i * sizeof(s), sizeof(s));
	return s;
}

#endif
