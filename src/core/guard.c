/* Memory guard: see guard.h. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "core/guard.h"
#include "core/sr.h"

/* The guarded access in progress on this thread, if any, and how many
 * threads are in one.  The handler looks at the thread's own only while
 * some thread is in a guarded access: a fault of the application's then
 * never makes it touch the library's thread-local storage (general
 * dynamic, as a library that programs dlopen must use: initial-exec
 * would not fit the static TLS that Python and UCX leave). */
static __thread sigjmp_buf *volatile guard_jb;
static atomic_int guards_active;
/* This thread's sr_guard_hold depth: inside a hold, it is counted in
 * guards_active already */
static __thread unsigned int guard_held;

static struct sigaction prev_segv, prev_bus;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

/* Hand a fault that is not ours to whoever had the signal before. */
static void forward(int sig, siginfo_t *si, void *uc)
{
	const struct sigaction *p = sig == SIGSEGV ? &prev_segv : &prev_bus;

	if ((p->sa_flags & SA_SIGINFO) && p->sa_sigaction) {
		p->sa_sigaction(sig, si, uc);
		return;
	}
	if (!(p->sa_flags & SA_SIGINFO) && p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN) {
		p->sa_handler(sig);
		return;
	}
	/* the default action: back to it, and the faulting instruction runs
	 * again and ends the process as if we had never been here; a signal
	 * someone sent (no fault to repeat) is raised again */
	signal(sig, SIG_DFL);
	if (si->si_code <= 0)
		raise(sig);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *jb = atomic_load(&guards_active) ? guard_jb : NULL;

	if (jb && si->si_code > 0) {
		guard_jb = NULL;
		siglongjmp(*jb, 1);
	}
	forward(sig, si, uc);
}

static void guard_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	/* SA_NODEFER: the jump out of the handler restores no mask, so the
	 * signal must not be blocked while it runs; SA_ONSTACK for
	 * applications that fault on stack overflow with an alternate stack */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &prev_segv))
		SR_DBG("memory guard: sigaction(SIGSEGV): %s", strerror(errno));
	if (sigaction(SIGBUS, &sa, &prev_bus))
		SR_DBG("memory guard: sigaction(SIGBUS): %s", strerror(errno));
}

/* After the jump back from a fault: the jump restores no signal mask
 * (sigsetjmp(jb, 0): no system call per access), and a handler run by
 * a sanitizer's wrapper may have had the fault signals blocked. */
static void recovered(void)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGSEGV);
	sigaddset(&s, SIGBUS);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
}

void sr_guard_init(void)
{
#ifndef SR_TSAN
	pthread_once(&guard_once, guard_install);
#else
	/* ThreadSanitizer runs a thread's signal handlers inside its runtime,
	 * which a jump back out of a handler leaves holding its own locks (the
	 * process hangs at its next lock): no guard in TSan builds */
	(void)guard_once; /* static, and used only without TSan */
	(void)guard_install;
#endif
}

/* Each access runs in a function of its own (noinline), so that nothing
 * of the caller's lives in registers the jump back would lose.
 *
 * ThreadSanitizer intercepts memcpy and instruments loads, stores and
 * atomics with calls into its runtime, which take the runtime's own
 * locks: a jump out of a fault in there would leave them held and hang
 * the process at its next lock.  In a TSan build the accesses are plain
 * code the runtime never sees (no_sanitize), as DMA is to it anyway
 * (common/tsan.h): byte stores in address order, as sr_place's. */
#ifdef SR_TSAN
#define SR_GUARD_BODY __attribute__((noinline, no_sanitize("thread")))
static SR_GUARD_BODY void place_body(void *dst, const void *src, size_t n)
{
	volatile uint8_t *d = dst;
	const volatile uint8_t *s = src;

	for (size_t i = 0; i < n; i++)
		d[i] = s[i];
}
#else
#define SR_GUARD_BODY __attribute__((noinline))
static SR_GUARD_BODY void place_body(void *dst, const void *src, size_t n)
{
	sr_place(dst, src, n);
}
#endif

/* Counts this thread in guards_active while it holds (sr_guard_hold,
 * nesting): once per receive batch, or once per access outside one. */
void sr_guard_hold(void)
{
	if (!guard_held++)
		atomic_fetch_add(&guards_active, 1);
}

void sr_guard_release(void)
{
	if (!--guard_held)
		atomic_fetch_sub(&guards_active, 1);
}

/* Runs body(arg) under the guard: false if it faulted.  One place for
 * the jump target, the count of guarded threads and the thread's slot.
 * Inside a receive batch's hold the count costs no atomic. */
static bool run_guarded(void (*body)(void *), void *arg)
{
	sigjmp_buf jb;

	if (sigsetjmp(jb, 0)) {
		sr_guard_release();
		recovered();
		return false;
	}
	sr_guard_hold();
	guard_jb = &jb;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	body(arg);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	guard_jb = NULL;
	sr_guard_release();
	return true;
}

struct place_args {
	void *dst;
	const void *src;
	size_t n;
};

static SR_GUARD_BODY void place_run(void *a)
{
	struct place_args *p = a;

	place_body(p->dst, p->src, p->n);
}

bool sr_place_guarded(void *dst, const void *src, size_t n)
{
	struct place_args a = { dst, src, n };

	return run_guarded(place_run, &a);
}

struct probe_args {
	const volatile uint8_t *p;
	size_t n, pg;
};

static SR_GUARD_BODY void probe_run(void *a)
{
	struct probe_args *r = a;
	size_t i;

	for (i = 0; i < r->n; i += r->pg - ((uintptr_t)(r->p + i) & (r->pg - 1)))
		(void)r->p[i];
	if (r->n)
		(void)r->p[r->n - 1];
}

bool sr_probe_read(const void *p, size_t n)
{
	struct probe_args a = { p, n, (size_t)getpagesize() };

	return run_guarded(probe_run, &a);
}

struct atomic_args {
	uint64_t *p;
	bool cas;
	uint64_t compare_add, swap, orig;
};

static SR_GUARD_BODY void atomic_run(void *a)
{
	struct atomic_args *r = a;

	/* a real atomic: the target process's own threads may touch it too */
	if (r->cas) {
		r->orig = r->compare_add;
		__atomic_compare_exchange_n(r->p, &r->orig, r->swap, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	} else {
		r->orig = __atomic_fetch_add(r->p, r->compare_add, __ATOMIC_SEQ_CST);
	}
}

bool sr_atomic_guarded(uint64_t *p, bool cas, uint64_t compare_add, uint64_t swap, uint64_t *orig)
{
	struct atomic_args a = { p, cas, compare_add, swap, 0 };

	sr_tsan_serve(); /* after what the requester did before posting it */

	if (!run_guarded(atomic_run, &a))
		return false;
	sr_tsan_post(); /* before the requester's completion of it */
	*orig = a.orig;
	return true;
}
