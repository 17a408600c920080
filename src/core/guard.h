/* Memory guard: CPU accesses to registered memory that the application
 * may have unmapped.
 *
 * A NIC keeps writing into (and reading from) the pages of a registered
 * buffer after the application unmapped them: the kernel pinned them at
 * ibv_reg_mr.  A userspace device cannot pin, so a peer's RDMA WRITE,
 * SEND, READ or atomic aimed at such a buffer would fault in softrdma's
 * own copy and kill the process.  Under the guard the fault ends the
 * access instead: the copy reports failure and the operation fails as it
 * would for a bad key (a NAK with a remote access error for the peer, an
 * error completion here).
 *
 * How: a SIGSEGV/SIGBUS handler, installed at the first ibv_open_device,
 * that jumps back out of a guarded access of the faulting thread and
 * hands every other fault to the handler that was there before (or to
 * the default action: the process dies as it would have).  An
 * application that installs its own SIGSEGV handler afterwards replaces
 * ours; its faults are its own again and guarded accesses crash as
 * before.  The library's threads leave SIGSEGV and SIGBUS unblocked for
 * it (common/thread.c): a fault with the signal blocked kills at once. */
#ifndef SR_CORE_GUARD_H
#define SR_CORE_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Installs the handler (once per process). */
void sr_guard_init(void);

/* sr_place (core/place.h) under the guard: false if a page of dst was not
 * there to write. */
bool sr_place_guarded(void *dst, const void *src, size_t n);

/* Whether every page of [p, p + n) can be read now (one load per page,
 * under the guard): for data the kernel or a CRC pass will read. */
bool sr_probe_read(const void *p, size_t n);

/* An 8-byte atomic of a peer's on *p (compare and swap when cas, else
 * fetch and add) under the guard: false if the page was not there;
 * *orig gets the value before. */
bool sr_atomic_guarded(uint64_t *p, bool cas, uint64_t compare_add, uint64_t swap, uint64_t *orig);

/* Counts this thread as guarding from now until the matching release
 * (they nest): the accesses in between skip the per-access count, two
 * atomic read-modify-writes on a global of which the second, a full
 * barrier, waits for the access's stores to drain.  While a hold lasts,
 * another thread's own fault has the handler read that thread's slot
 * (empty: not ours, handed on), as when a guarded access is under way anywhere.
 * Hold around bounded work (a receive batch). */
void sr_guard_hold(void);
void sr_guard_release(void);

#endif
