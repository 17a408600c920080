/* ThreadSanitizer annotations: no code at all outside a TSan build.
 *
 * Two things TSan cannot see by itself:
 *  - sr_tsan_release/acquire: a happens-before edge through the kernel
 *    that TSan does not model.  The progress thread waits with
 *    epoll_pwait2, which TSan's runtime does not intercept, so an object
 *    published with epoll_ctl (a QP, the daemon connection) looks
 *    unsynchronized to it; the kernel's epoll locks do order them.
 *    And a work request posted in this process that reaches a QP of
 *    this process: the datagram (or TCP segment) orders what the
 *    application did before posting before what the responder does to
 *    its memory, but TSan sees two sockets.  sr_tsan_post() and
 *    sr_tsan_serve() mark that edge (post: release, the responder's
 *    atomic: acquire), or an application's read of an atomic's target
 *    before posting the next atomic to it looks like a race with it.
 *    The way back too: the responder's atomic (release, sr_tsan_post)
 *    orders before the requester's completion of it (acquire,
 *    sr_tsan_serve), or the application's read of the target after that
 *    completion looks like a race with the atomic (verbs/test_faults
 *    under TSan, about one run in 23).
 *  - sr_dma_begin/end: the emulated NIC placing a peer's data into
 *    registered memory (and reading it back for a CRC right after) is
 *    DMA.  Applications learn of it through completions (a lock TSan
 *    sees) or by polling the memory itself (rping, ib_write_lat,
 *    riostream, rsockets' target SGL), which C's memory model does not
 *    describe and real NICs do all the time: those accesses are left out
 *    of TSan's view, everything else of the thread stays checked. */
#ifndef SR_COMMON_TSAN_H
#define SR_COMMON_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define SR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SR_TSAN 1
#endif
#endif

#ifdef SR_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define sr_tsan_release(addr) __tsan_release(addr)
#define sr_tsan_acquire(addr) __tsan_acquire(addr)
extern char sr_tsan_wire;
#define sr_tsan_post() __tsan_release(&sr_tsan_wire)
#define sr_tsan_serve() __tsan_acquire(&sr_tsan_wire)
#define sr_dma_begin()                                         \
	do {                                                   \
		AnnotateIgnoreReadsBegin(__FILE__, __LINE__);  \
		AnnotateIgnoreWritesBegin(__FILE__, __LINE__); \
	} while (0)
#define sr_dma_end()                                         \
	do {                                                 \
		AnnotateIgnoreWritesEnd(__FILE__, __LINE__); \
		AnnotateIgnoreReadsEnd(__FILE__, __LINE__);  \
	} while (0)
#else
#define sr_tsan_release(addr) ((void)(addr))
#define sr_tsan_acquire(addr) ((void)(addr))
#define sr_tsan_post() ((void)0)
#define sr_tsan_serve() ((void)0)
#define sr_dma_begin() ((void)0)
#define sr_dma_end() ((void)0)
#endif

#endif
