/* vt_sends.h: the system calls that send packets, counted per thread, for
 * tests of how many a burst of posts takes (test_transfer, test_iwarp).
 * A test program's own sendmsg and sendmmsg come before libc's for the
 * library too; these count and pass on.  ThreadSanitizer's runtime
 * defines them itself; in sanitizer builds nothing is counted and
 * VT_SENDS_COUNTED is not defined.  Include in one file per program. */
#ifndef VT_SENDS_H
#define VT_SENDS_H

#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "common/tsan.h"

/* Sanitizers slow each post enough that back-to-back posts stop looking
 * like a burst: the counts are checked in the plain build only. */
#if defined(__SANITIZE_ADDRESS__)
#define VT_SENDS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VT_SENDS_SANITIZED 1
#endif
#endif

#if !defined(SR_TSAN) && !defined(VT_SENDS_SANITIZED)
#define VT_SENDS_COUNTED 1

/* sendmsg and sendmmsg calls this thread made, and the whole process;
 * and the messages they sent (a UDP GSO run is one) */
static __thread unsigned long vt_send_calls;
static _Atomic unsigned long vt_send_calls_all;
static _Atomic unsigned long vt_send_msgs_all;

int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	static int (*next)(int, struct mmsghdr *, unsigned int, int);
	if (!next)
		next = (int (*)(int, struct mmsghdr *, unsigned int, int))dlsym(RTLD_NEXT, "sendmmsg");
	vt_send_calls++;
	vt_send_calls_all++;
	int r = next(fd, v, n, flags);
	if (r > 0)
		vt_send_msgs_all += (unsigned long)r;
	return r;
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	static ssize_t (*next)(int, const struct msghdr *, int);
	if (!next)
		next = (ssize_t(*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg");
	vt_send_calls++;
	vt_send_calls_all++;
	ssize_t r = next(fd, m, flags);
	if (r >= 0)
		vt_send_msgs_all++;
	return r;
}

#endif

/* The sendmsg calls of bursts of posts, counted only over tries in which
 * the posting thread was not preempted: a thread preempted between two
 * posts looks like one that paused, whose posts must leave at once.  The
 * window starts before the empty poll that precedes the burst, and
 * nothing that may block (a report on stdout) sits between them: a burst
 * is one only within SR_TX_POLLER_NS of a poll, and on a loaded machine
 * a thread preempted there (or blocked writing its report) posted its
 * burst after that time and sent each Write at once.
 *   for (t = 0; vt_burst_more(&b); t++) { ...; vt_burst_start(&b);
 *   post...; vt_burst_stop(&b); ... }  vt_burst_check(&b, max, what); */
#define VT_BURST_CLEAN 3  /* tries without preemption wanted */
#define VT_BURST_TRIES 30 /* at most */
struct vt_burst {
	unsigned long calls0, best;
	long preempted0;
	int clean, tries;
};

VT_STATIC bool vt_burst_more(const struct vt_burst *b)
{
	return b->clean < VT_BURST_CLEAN && b->tries < VT_BURST_TRIES;
}

#ifdef VT_SENDS_COUNTED
static long vt_preemptions(void)
{
	struct rusage u;
	return getrusage(RUSAGE_THREAD, &u) ? -1 : u.ru_nivcsw;
}
#endif

VT_STATIC void vt_burst_start(struct vt_burst *b)
{
	if (!b->tries++)
		b->best = (unsigned long)-1;
#ifdef VT_SENDS_COUNTED
	b->calls0 = vt_send_calls;
	b->preempted0 = vt_preemptions();
#endif
}

VT_STATIC void vt_burst_stop(struct vt_burst *b)
{
#ifdef VT_SENDS_COUNTED
	unsigned long calls = vt_send_calls - b->calls0;
	if (b->preempted0 < 0 || vt_preemptions() != b->preempted0)
		return;
	if (calls < b->best)
		b->best = calls;
#endif
	b->clean++;
}

/* The burst's best try took at most max calls. */
VT_STATIC void vt_burst_check(const struct vt_burst *b, unsigned long max, const char *what)
{
#ifdef VT_SENDS_COUNTED
	if (!b->clean)
		NOTE("%s: the posting thread was preempted in each of %d tries: sendmsg calls not counted", what,
		     b->tries);
	else
		CHECK(b->best <= max,
		      "%s: at most %lu sendmsg calls while posting (best of %d tries without preemption: %lu)", what,
		      max, b->clean, b->best);
#else
	NOTE("%s: sanitizer build: sendmsg calls are not counted, only the data checked", what);
#endif
}

#endif
