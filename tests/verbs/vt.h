/* vt.h - shared helpers for the verbs-level tests (tests/verbs/test_*.c).
 *
 * Only the public verbs API is used, so the tests run unchanged against
 * rdma-core + the kernel's rxe as well as against softrdma.  Everything
 * here is static: each test is one translation unit.
 *
 *  - CHECK-style macros that print every check ("  ok   ..." or a loud
 *    "  FAIL file:line: ..."), KNOWN_BUG() for checks that document a
 *    library bug (they still fail), NOTE() for information;
 *  - vt_begin()/vt_end(): a watchdog (alarm) so a test never hangs, and the
 *    final "<name>: N passed, M failed" line; exit status 1 on any failure;
 *  - cases: VT_RUN(call) runs one case unless the name filter (-f FILTER
 *    or VT_FILTER, as gtest's --gtest_filter) leaves it out; -l lists them;
 *    each case draws its random numbers from VT_SEED and its own name;
 *  - device, PD, CQs, and RC/UC/UD QP pairs connected to each other in one
 *    process over the loopback GID (index 0, is_global = 1);
 *  - polling a CQ with a timeout, expecting a completion;
 *  - buffers with canary guard bytes around the registered range;
 *  - waiting for an async event with a timeout.
 */
#ifndef VT_H
#define VT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "common/stats.h"

/* everything here is static; not every test uses every helper */
#define VT_STATIC static __attribute__((unused))

/* ------------------------------------------------------------------ */
/* reporting                                                            */
/* ------------------------------------------------------------------ */

VT_STATIC const char *vt_name = "vt";
VT_STATIC int vt_npass, vt_nfail, vt_nknown;
VT_STATIC pthread_mutex_t vt_print_lock = PTHREAD_MUTEX_INITIALIZER;
/* -l: print the names of the cases, run none and report nothing else */
VT_STATIC bool vt_list;

/* Text after a TAB in a message is diagnostics: printed only on failure. */
__attribute__((format(printf, 5, 6))) VT_STATIC bool vt_report(bool ok, const char *file, int line, const char *tag,
							       const char *fmt, ...)
{
	va_list ap;
	char msg[2048];
	char *tab;
	const char *base = strrchr(file, '/');

	base = base ? base + 1 : file;
	if (vt_list)
		return ok;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	while ((tab = strchr(msg, '\t'))) {
		if (ok) {
			*tab = 0;
			break;
		}
		*tab = ' ';
	}
	pthread_mutex_lock(&vt_print_lock);
	if (ok) {
		vt_npass++;
		printf("  ok    %s\n", msg);
	} else {
		vt_nfail++;
		if (tag && !strcmp(tag, "KNOWN-BUG"))
			vt_nknown++;
		printf("  FAIL  %s:%d: %s%s%s\n", base, line, tag ? tag : "", tag ? ": " : "", msg);
	}
	fflush(stdout);
	pthread_mutex_unlock(&vt_print_lock);
	return ok;
}

/* CHECK(cond, fmt, ...): one check; the message says what is expected. */
#define CHECK(cond, ...) vt_report(!!(cond), __FILE__, __LINE__, NULL, __VA_ARGS__)
/* A check that currently fails because of a known library bug: it still
 * counts as a failure, but is labelled so nobody mistakes it for a flake. */
#define KNOWN_BUG(cond, ...) vt_report(!!(cond), __FILE__, __LINE__, "KNOWN-BUG", __VA_ARGS__)

#define NOTE(...)                                     \
	do {                                          \
		if (vt_list)                          \
			break;                        \
		pthread_mutex_lock(&vt_print_lock);   \
		printf("  note  ");                   \
		printf(__VA_ARGS__);                  \
		printf("\n");                         \
		fflush(stdout);                       \
		pthread_mutex_unlock(&vt_print_lock); \
	} while (0)

#define SECTION(...)                 \
	do {                         \
		if (vt_list)         \
			break;       \
		printf("\n== ");     \
		printf(__VA_ARGS__); \
		printf("\n");        \
		fflush(stdout);      \
	} while (0)

/* An integer comparison that prints both values. */
#define CHECK_INT(got, want, ...)                                                                                      \
	({                                                                                                             \
		long long vt_g_ = (long long)(got), vt_w_ = (long long)(want);                                         \
		char vt_m_[512];                                                                                       \
		snprintf(vt_m_, sizeof(vt_m_), __VA_ARGS__);                                                           \
		vt_report(vt_g_ == vt_w_, __FILE__, __LINE__, NULL, "%s\t(got %lld, want %lld)", vt_m_, vt_g_, vt_w_); \
	})

/* A verb returning an errno value (0 on success). */
#define CHECK_RC(rc, want, ...)                                                                     \
	({                                                                                          \
		int vt_r_ = (rc), vt_e_ = (want);                                                   \
		char vt_m_[512];                                                                    \
		snprintf(vt_m_, sizeof(vt_m_), __VA_ARGS__);                                        \
		vt_report(vt_r_ == vt_e_, __FILE__, __LINE__, NULL, "%s -> %s\t(got %d %s)", vt_m_, \
			  vt_e_ ? strerror(vt_e_) : "0", vt_r_, vt_r_ > 0 ? strerror(vt_r_) : "");  \
	})

/* A verb returning a pointer: NULL with errno == want (want 0: non-NULL). */
#define CHECK_PTR_ERR(ptr, err_snapshot, want, ...)                                                              \
	({                                                                                                       \
		bool vt_ok_;                                                                                     \
		char vt_m_[512];                                                                                 \
		snprintf(vt_m_, sizeof(vt_m_), __VA_ARGS__);                                                     \
		if (want)                                                                                        \
			vt_ok_ = vt_report(!(ptr) && (err_snapshot) == (want), __FILE__, __LINE__, NULL,         \
					   "%s -> NULL, errno %s\t(got %p, errno %d %s)", vt_m_, strerror(want), \
					   (void *)(ptr), (err_snapshot), strerror(err_snapshot));               \
		else                                                                                             \
			vt_ok_ = vt_report(!!(ptr), __FILE__, __LINE__, NULL,                                    \
					   "%s -> success\t(got NULL, errno %d %s)", vt_m_, (err_snapshot),      \
					   strerror(err_snapshot));                                              \
		vt_ok_;                                                                                          \
	})

VT_STATIC const char *vt_status_str(int st)
{
	return ibv_wc_status_str((enum ibv_wc_status)st);
}

VT_STATIC const char *vt_state_str(int s)
{
	static const char *n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN" };
	return s >= 0 && s <= 7 ? n[s] : "?";
}

VT_STATIC const char *vt_qpt_str(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC ? "RC" : t == IBV_QPT_UC ? "UC" : t == IBV_QPT_UD ? "UD" : "?";
}

/* ------------------------------------------------------------------ */
/* time, watchdog, start/end                                            */
/* ------------------------------------------------------------------ */

VT_STATIC uint64_t vt_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Resident memory of this process in KiB (/proc/self/statm), -1 if unknown. */
VT_STATIC long vt_rss_kib(void)
{
	long size, rss;
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f)
		return -1;
	int n = fscanf(f, "%ld %ld", &size, &rss);
	fclose(f);
	return n == 2 ? rss * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

VT_STATIC void vt_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

VT_STATIC void vt_sleep_us(unsigned us)
{
	struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000L };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* The test ran out of time: print every thread's backtrace (gdb attached
 * by a child), then fail.  A hang is reported with its cause's trace. */
VT_STATIC void vt_watchdog(int sig)
{
	char buf[256], pid[24];
	int n;
	pid_t c;
	(void)sig;
	n = snprintf(buf, sizeof(buf), "\n  FAIL  WATCHDOG: %s did not finish in time (hung?); every thread:\n",
		     vt_name);
	if (n > 0) {
		ssize_t r = write(1, buf, (size_t)n);
		(void)r;
	}
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	c = fork();
	if (c == 0) {
		char *argv[] = { "gdb", "-batch", "-nx", "-p", pid, "-ex", "thread apply all bt", NULL };
		char *envp[] = { "PATH=/usr/bin:/bin", NULL };

		dup2(1, 2);
		alarm(120);
		execve("/usr/bin/gdb", argv, envp);
		_exit(127);
	}
	if (c > 0)
		waitpid(c, NULL, 0);
	n = snprintf(buf, sizeof(buf), "%s: %d passed, %d failed\n", vt_name, vt_npass, vt_nfail + 1);
	if (n > 0) {
		ssize_t r = write(1, buf, (size_t)n);
		(void)r;
	}
	_exit(1);
}
VT_STATIC void vt_begin(const char *name, unsigned seconds)
{
	vt_name = name;
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, vt_watchdog);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY); /* the watchdog's gdb may attach (Yama) */
	alarm(seconds);
	if (!vt_list)
		printf("%s: starting (pid %d)\n", name, getpid());
}

/* The case filter (vt_begin_args) and how many cases it let through. */
VT_STATIC const char *vt_filter;
VT_STATIC int vt_ncases, vt_ncases_run;

VT_STATIC int vt_end(void)
{
	alarm(0);
	if (vt_list)
		return 0;
	if (vt_filter) {
		NOTE("%d of %d cases run (filter '%s')", vt_ncases_run, vt_ncases, vt_filter);
		CHECK(vt_ncases_run > 0, "the filter '%s' names a case (-l lists them)", vt_filter);
	}
	printf("\n%s: %d passed, %d failed", vt_name, vt_npass, vt_nfail);
	if (vt_nknown)
		printf(" (%d of them KNOWN-BUG)", vt_nknown);
	printf("\n");
	fflush(stdout);
	return vt_nfail ? 1 : 0;
}

/* vt_begin for a test made of cases (VT_RUN), with their options:
 *   -l         list the cases' names, run none
 *   -f FILTER  run only the cases FILTER selects (VT_FILTER likewise)
 * FILTER is gtest's: POSITIVE[-NEGATIVE], each a ':'-separated list of
 * shell patterns (fnmatch); a case runs if its name matches a positive
 * pattern (or there is none) and no negative one. */
VT_STATIC void vt_begin_args(const char *name, unsigned seconds, int argc, char **argv)
{
	int c;

	vt_filter = getenv("VT_FILTER");
	while ((c = getopt(argc, argv, "lf:h")) != -1) {
		if (c == 'l') {
			vt_list = true;
		} else if (c == 'f') {
			vt_filter = optarg;
		} else {
			fprintf(c == 'h' ? stdout : stderr,
				"Usage: %s [-l] [-f FILTER]\n"
				"  -l         list the cases, run none\n"
				"  -f FILTER  run the cases FILTER selects: POSITIVE[-NEGATIVE], each a\n"
				"             ':'-separated list of shell patterns (VT_FILTER likewise)\n"
				"  VT_SEED=N  repeat a run's random choices (the run prints its seed)\n",
				name);
			exit(c == 'h' ? 0 : 2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s' (-h for usage)\n", name, argv[optind]);
		exit(2);
	}
	if (vt_filter && !*vt_filter)
		vt_filter = NULL;
	vt_begin(name, seconds);
}

/* ------------------------------------------------------------------ */
/* random data and patterns                                             */
/* ------------------------------------------------------------------ */

VT_STATIC uint64_t vt_rng_state = 0x9e3779b97f4a7c15ull;
/* the test's seed; each case (VT_RUN) starts from it and its own name */
VT_STATIC uint64_t vt_seed_base;

VT_STATIC void vt_seed(uint64_t s)
{
	vt_seed_base = s;
	vt_rng_state = s ? s : 0x9e3779b97f4a7c15ull;
}

/* Seeds from VT_SEED, else from the clock and the pid, and prints the
 * seed: VT_SEED=<it> repeats a failing run. */
VT_STATIC void vt_seed_env(void)
{
	const char *e = getenv("VT_SEED");
	uint64_t s = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);

	vt_seed(s);
	NOTE("random seed %" PRIu64 " (set VT_SEED to repeat)", s);
}

VT_STATIC uint64_t vt_rand64_r(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

VT_STATIC uint64_t vt_rand64(void)
{
	return vt_rand64_r(&vt_rng_state);
}
VT_STATIC uint32_t vt_rand(uint32_t n)
{
	return n ? (uint32_t)(vt_rand64() % n) : 0;
}

/* Fill / verify a deterministic pattern that depends on seed and offset,
 * so a misplaced byte (right value, wrong place) is caught too. */
VT_STATIC uint8_t vt_pat(uint32_t seed, size_t i)
{
	uint32_t x = (uint32_t)i * 2654435761u ^ seed * 0x9E3779B1u;
	x ^= x >> 15;
	return (uint8_t)(x ^ (x >> 8) ^ (i >> 16));
}

VT_STATIC void vt_fill(void *p, size_t len, uint32_t seed)
{
	uint8_t *b = p;
	for (size_t i = 0; i < len; i++)
		b[i] = vt_pat(seed, i);
}

/* Returns the first differing offset, or -1. */
VT_STATIC long vt_verify(const void *p, size_t len, uint32_t seed)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < len; i++)
		if (b[i] != vt_pat(seed, i))
			return (long)i;
	return -1;
}

/* ------------------------------------------------------------------ */
/* cases                                                                */
/* ------------------------------------------------------------------ */

/* Called after each case that ran, with its name. */
VT_STATIC void (*vt_after_case)(const char *name);

/* Does name match one of the ':'-separated patterns in pats[0, len)? */
VT_STATIC bool vt_match_any(const char *pats, size_t len, const char *name)
{
	char pat[256];

	while (len) {
		const char *colon = memchr(pats, ':', len);
		size_t n = colon ? (size_t)(colon - pats) : len;

		snprintf(pat, sizeof(pat), "%.*s", (int)n, pats);
		if (n && !fnmatch(pat, name, 0))
			return true;
		pats += colon ? n + 1 : n;
		len -= colon ? n + 1 : n;
	}
	return false;
}

/* As gtest: the first '-' of the filter starts the negative patterns. */
VT_STATIC bool vt_selected(const char *name)
{
	const char *f = vt_filter, *dash;
	size_t npos;

	if (!f)
		return true;
	dash = strchr(f, '-');
	npos = dash ? (size_t)(dash - f) : strlen(f);
	return (!npos || vt_match_any(f, npos, name)) && !(dash && vt_match_any(dash + 1, strlen(dash + 1), name));
}

/* Whether case name runs; if so, its random numbers depend on the test's
 * seed and the name alone, not on which cases ran before it. */
VT_STATIC bool vt_case_begin_(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	vt_ncases++;
	if (vt_list) {
		printf("%s\n", name);
		return false;
	}
	if (!vt_selected(name))
		return false;
	vt_ncases_run++;
	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	vt_rng_state = (vt_seed_base ^ h) | 1;
	return true;
}

/* VT_CASE(name, statement): one case of the test, called name.
 * VT_RUN(call): a case named by its call as written, "test_sizes(IBV_QPT_RC)". */
#define VT_CASE(name, ...)                                    \
	do {                                                  \
		const char *vt_case_name_ = (name);           \
		if (vt_case_begin_(vt_case_name_)) {          \
			__VA_ARGS__;                          \
			if (vt_after_case)                    \
				vt_after_case(vt_case_name_); \
		}                                             \
	} while (0)
#define VT_RUN(call) VT_CASE(#call, call)

/* ------------------------------------------------------------------ */
/* buffers with guard (canary) bytes                                    */
/* ------------------------------------------------------------------ */

#define VT_GUARD_DEFAULT 4096

struct vt_buf {
	uint8_t *base; /* allocation: guard | payload | guard */
	size_t total;
	uint8_t *p; /* the payload, page aligned */
	size_t len;
	size_t guard;
	struct ibv_mr *mr;
};

VT_STATIC uint8_t vt_canary(size_t i)
{
	return (uint8_t)(0xA5 ^ (i * 29) ^ (i >> 8));
}

/* len bytes of payload with guard bytes on both sides, the payload zeroed
 * and, if access >= 0, registered (the payload only, not the guards). */
VT_STATIC int vt_buf_alloc(struct vt_buf *b, struct ibv_pd *pd, size_t len, size_t guard, int access)
{
	void *m;
	memset(b, 0, sizeof(*b));
	guard = (guard + 4095) & ~(size_t)4095;
	b->guard = guard;
	b->len = len;
	b->total = guard * 2 + ((len + 4095) & ~(size_t)4095);
	if (posix_memalign(&m, 4096, b->total))
		return ENOMEM;
	b->base = m;
	for (size_t i = 0; i < b->total; i++)
		b->base[i] = vt_canary(i);
	b->p = b->base + guard;
	memset(b->p, 0, len);
	if (access >= 0 && pd) {
		b->mr = ibv_reg_mr(pd, b->p, len ? len : 1, access);
		if (!b->mr) {
			int e = errno;
			free(b->base);
			b->base = NULL;
			return e ? e : EINVAL;
		}
	}
	return 0;
}

/* Are the bytes outside [p, p+len) untouched?  Reports one check. */
VT_STATIC bool vt_buf_guard_ok_(struct vt_buf *b, const char *file, int line, const char *what)
{
	uint8_t *end = b->p + b->len;
	for (size_t i = 0; i < b->total; i++) {
		uint8_t *q = b->base + i;
		if (q >= b->p && q < end)
			continue;
		if (*q != vt_canary(i)) {
			long off = q < b->p ? -(long)(b->p - q) : (long)(q - end);
			return vt_report(false, file, line, NULL,
					 "%s: guard bytes outside the registered range untouched\t"
					 "(byte at %s%ld changed: 0x%02x, want 0x%02x)",
					 what, q < b->p ? "start" : "end+", off, *q, vt_canary(i));
		}
	}
	return vt_report(true, file, line, NULL, "%s: guard bytes outside the registered range untouched", what);
}
#define CHECK_GUARDS(b, ...)                                      \
	({                                                        \
		char vt_m_[512];                                  \
		snprintf(vt_m_, sizeof(vt_m_), __VA_ARGS__);      \
		vt_buf_guard_ok_((b), __FILE__, __LINE__, vt_m_); \
	})

/* The payload must hold the pattern of seed (reports one check). */
#define CHECK_DATA(ptr, len, seed, ...)                                                                            \
	({                                                                                                         \
		long vt_off_ = vt_verify((ptr), (len), (seed));                                                    \
		char vt_m_[512];                                                                                   \
		snprintf(vt_m_, sizeof(vt_m_), __VA_ARGS__);                                                       \
		vt_report(vt_off_ < 0, __FILE__, __LINE__, NULL,                                                   \
			  "%s: %zu bytes correct\t(FIRST BAD BYTE AT OFFSET %ld)", vt_m_, (size_t)(len), vt_off_); \
	})

VT_STATIC void vt_buf_free(struct vt_buf *b)
{
	if (b->mr)
		ibv_dereg_mr(b->mr);
	free(b->base);
	memset(b, 0, sizeof(*b));
}

/* Registered memory the application unmaps under its MR (a NIC would
 * still reach the pinned pages; softrdma's memory guard must fail the
 * access instead).  vt_mmap_reg: len bytes of their own mapping,
 * registered with access; NULL (reported) on failure. */
VT_STATIC uint8_t *vt_mmap_reg(struct ibv_pd *pd, size_t len, int access, struct ibv_mr **mr, const char *what)
{
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	*mr = m != MAP_FAILED ? ibv_reg_mr(pd, m, len, access) : NULL;
	if (!CHECK(*mr != NULL, "%s: an mmap'ed buffer registered", what)) {
		if (m != MAP_FAILED)
			munmap(m, len);
		return NULL;
	}
	return m;
}

/* Unmaps it, its MR still registered, and keeps the range out of reach:
 * nothing else (a sanitizer's allocator) may be mapped there while the
 * peer aims at it.  munmap(m, len) after ibv_dereg_mr frees the range. */
VT_STATIC void vt_unmap_reserved(uint8_t *m, size_t len, const char *what)
{
	CHECK_RC(munmap(m, len), 0, "%s: the buffer unmapped, its MR still registered", what);
	CHECK(mmap(m, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == m,
	      "%s: its range reserved with no access\t(%s)", what, strerror(errno));
}

/* ------------------------------------------------------------------ */
/* device                                                               */
/* ------------------------------------------------------------------ */

struct vt_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	union ibv_gid gid; /* GID index 0 */
	int gid_index;
	char name[64];
};

/* Opens the first device, queries it and allocates a PD. */
VT_STATIC bool vt_open(struct vt_dev *d)
{
	int n = 0;
	struct ibv_device **list;

	memset(d, 0, sizeof(*d));
	if (vt_list) /* no case runs: nothing to open */
		return true;
	list = ibv_get_device_list(&n);
	if (!CHECK(list && n > 0, "ibv_get_device_list finds a device (got %d; SOFTRDMA_CONF=%s)", n,
		   getenv("SOFTRDMA_CONF") ? getenv("SOFTRDMA_CONF") : "(unset)")) {
		if (list)
			ibv_free_device_list(list);
		return false;
	}
	snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(list[0]));
	d->ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!CHECK(d->ctx, "ibv_open_device(%s)\t(errno %d %s)", d->name, errno, strerror(errno)))
		return false;
	if (ibv_query_device(d->ctx, &d->attr) || ibv_query_port(d->ctx, 1, &d->port) ||
	    ibv_query_gid(d->ctx, 1, 0, &d->gid)) {
		CHECK(0, "query device/port/gid of %s", d->name);
		return false;
	}
	d->gid_index = 0;
	d->pd = ibv_alloc_pd(d->ctx);
	return CHECK(d->pd, "ibv_alloc_pd");
}

VT_STATIC void vt_close(struct vt_dev *d)
{
	if (d->pd)
		CHECK_RC(ibv_dealloc_pd(d->pd), 0, "ibv_dealloc_pd");
	if (d->ctx)
		CHECK_RC(ibv_close_device(d->ctx), 0, "ibv_close_device");
	memset(d, 0, sizeof(*d));
}

VT_STATIC int vt_mtu_bytes(enum ibv_mtu m)
{
	return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128 << m : 0;
}

/* ------------------------------------------------------------------ */
/* QPs                                                                  */
/* ------------------------------------------------------------------ */

struct vt_qp_cfg {
	enum ibv_qp_type type;
	uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline;
	int cqe; /* entries per CQ */
	int sq_sig_all;
	struct ibv_srq *srq[2];	     /* per side; NULL: own receive queue */
	struct ibv_comp_channel *ch; /* completion channel for the CQs */
	uint64_t send_ops_flags;     /* != 0: ibv_create_qp_ex with these */
	bool cq_ex;		     /* CQs from ibv_create_cq_ex */
	uint64_t cq_ex_wc_flags;
	/* connection */
	enum ibv_mtu mtu;
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
	uint8_t max_rd_atomic, max_dest_rd_atomic;
	unsigned access;
	uint32_t psn[2];
	uint32_t qkey;
};

VT_STATIC void vt_cfg_default(struct vt_qp_cfg *c, enum ibv_qp_type t)
{
	memset(c, 0, sizeof(*c));
	c->type = t;
	c->max_send_wr = 64;
	c->max_recv_wr = 64;
	c->max_send_sge = 4;
	c->max_recv_sge = 4;
	c->max_inline = 64;
	c->cqe = 256;
	c->mtu = IBV_MTU_4096;
	c->timeout = 14; /* ~67 ms */
	c->retry_cnt = 7;
	c->rnr_retry = 7;      /* infinite */
	c->min_rnr_timer = 12; /* 0.64 ms */
	c->max_rd_atomic = 16;
	c->max_dest_rd_atomic = 16;
	c->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		    IBV_ACCESS_REMOTE_ATOMIC;
	/* both close below 2^24: most tests see the 24-bit PSN wrap */
	c->psn[0] = 0xffffff - (uint32_t)(vt_rand64() & 0x3ff);
	c->psn[1] = 0xfff000 + (uint32_t)(vt_rand64() & 0x7ff);
	c->qkey = 0x11111111;
}

/* The attributes and mask that move a QP of type t into state `to` along
 * RESET->INIT->RTR->RTS (the required set, nothing optional). */
VT_STATIC int vt_trans_attr(const struct vt_qp_cfg *c, enum ibv_qp_state to, uint32_t dest_qpn, uint32_t rq_psn,
			    uint32_t sq_psn, const union ibv_gid *dgid, int sgid_index, struct ibv_qp_attr *a)
{
	int mask = IBV_QP_STATE;
	memset(a, 0, sizeof(*a));
	a->qp_state = to;
	switch (to) {
	case IBV_QPS_INIT:
		a->pkey_index = 0;
		a->port_num = 1;
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (c->type == IBV_QPT_UD) {
			a->qkey = c->qkey;
			mask |= IBV_QP_QKEY;
		} else {
			a->qp_access_flags = c->access;
			mask |= IBV_QP_ACCESS_FLAGS;
		}
		break;
	case IBV_QPS_RTR:
		if (c->type == IBV_QPT_UD)
			break;
		a->path_mtu = c->mtu;
		a->dest_qp_num = dest_qpn;
		a->rq_psn = rq_psn;
		a->ah_attr.is_global = 1;
		a->ah_attr.port_num = 1;
		a->ah_attr.grh.dgid = *dgid;
		a->ah_attr.grh.sgid_index = (uint8_t)sgid_index;
		a->ah_attr.grh.hop_limit = 64;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (c->type == IBV_QPT_RC) {
			a->max_dest_rd_atomic = c->max_dest_rd_atomic;
			a->min_rnr_timer = c->min_rnr_timer;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
		break;
	case IBV_QPS_RTS:
		a->sq_psn = sq_psn;
		mask |= IBV_QP_SQ_PSN;
		if (c->type == IBV_QPT_RC) {
			a->timeout = c->timeout;
			a->retry_cnt = c->retry_cnt;
			a->rnr_retry = c->rnr_retry;
			a->max_rd_atomic = c->max_rd_atomic;
			mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		}
		break;
	default:
		break;
	}
	return mask;
}

/* The thread ids of this process's softrdma progress threads (named
 * sr-progress): up to max of them in tids; returns how many there are,
 * -1 if /proc cannot be read. */
VT_STATIC int vt_progress_tids(long *tids, int max)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[300], comm[32] = "";
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		bool progress = f && fgets(comm, sizeof(comm), f) && !strncmp(comm, "sr-progress", 11);
		if (f)
			fclose(f);
		if (progress && n++ < max)
			tids[n - 1] = strtol(e->d_name, NULL, 10);
	}
	closedir(d);
	return n;
}

VT_STATIC int vt_qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	memset(&a, 0, sizeof(a));
	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return -1;
	return (int)a.qp_state;
}

/* Moves one QP RESET->INIT->RTR->RTS (or fewer: up to `to`). */
VT_STATIC int vt_qp_connect(struct ibv_qp *qp, const struct vt_qp_cfg *c, enum ibv_qp_state to, uint32_t dest_qpn,
			    uint32_t rq_psn, uint32_t sq_psn, const union ibv_gid *dgid, int sgid_index)
{
	struct ibv_qp_attr a;
	int err;
	for (int s = IBV_QPS_INIT; s <= (int)to; s++) {
		int mask = vt_trans_attr(c, (enum ibv_qp_state)s, dest_qpn, rq_psn, sq_psn, dgid, sgid_index, &a);
		err = ibv_modify_qp(qp, &a, mask);
		if (err) {
			NOTE("modify_qp(%s -> %s) failed: %d %s", vt_qpt_str(c->type), vt_state_str(s), err,
			     strerror(err));
			return err;
		}
	}
	return 0;
}

struct vt_pair {
	struct vt_dev *d;
	struct vt_qp_cfg cfg;
	struct ibv_cq *scq[2], *rcq[2];
	struct ibv_cq_ex *scqx[2], *rcqx[2];
	struct ibv_qp *qp[2];
	struct ibv_ah *ah[2]; /* UD: ah[i] addresses side !i */
	struct ibv_qp_cap cap[2];
};

VT_STATIC struct ibv_cq *vt_make_cq(struct vt_dev *d, const struct vt_qp_cfg *c, struct ibv_cq_ex **cqx, void *cq_ctx)
{
	*cqx = NULL;
	if (c->cq_ex) {
		struct ibv_cq_init_attr_ex ca;
		memset(&ca, 0, sizeof(ca));
		ca.cqe = (uint32_t)c->cqe;
		ca.cq_context = cq_ctx;
		ca.channel = c->ch;
		ca.wc_flags = c->cq_ex_wc_flags ? c->cq_ex_wc_flags :
						  IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
							  IBV_WC_EX_WITH_SRC_QP;
		*cqx = ibv_create_cq_ex(d->ctx, &ca);
		return *cqx ? ibv_cq_ex_to_cq(*cqx) : NULL;
	}
	return ibv_create_cq(d->ctx, c->cqe, cq_ctx, c->ch, 0);
}

/* Creates CQs (send and receive, per side) and the two QPs, in RESET. */
VT_STATIC bool vt_pair_create(struct vt_dev *d, const struct vt_qp_cfg *c, struct vt_pair *p)
{
	memset(p, 0, sizeof(*p));
	p->d = d;
	p->cfg = *c;
	for (int i = 0; i < 2; i++) {
		p->scq[i] = vt_make_cq(d, c, &p->scqx[i], p);
		p->rcq[i] = vt_make_cq(d, c, &p->rcqx[i], p);
		if (!CHECK(p->scq[i] && p->rcq[i], "create CQs (%d entries) for side %d\t(errno %d %s)", c->cqe, i,
			   errno, strerror(errno)))
			return false;
		struct ibv_qp_init_attr_ex ia;
		memset(&ia, 0, sizeof(ia));
		ia.qp_type = c->type;
		ia.send_cq = p->scq[i];
		ia.recv_cq = p->rcq[i];
		ia.srq = c->srq[i];
		ia.sq_sig_all = c->sq_sig_all;
		ia.cap.max_send_wr = c->max_send_wr;
		ia.cap.max_recv_wr = c->srq[i] ? 0 : c->max_recv_wr;
		ia.cap.max_send_sge = c->max_send_sge;
		ia.cap.max_recv_sge = c->srq[i] ? 0 : c->max_recv_sge;
		ia.cap.max_inline_data = c->max_inline;
		ia.qp_context = p;
		ia.comp_mask = IBV_QP_INIT_ATTR_PD;
		ia.pd = d->pd;
		if (c->send_ops_flags) {
			ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			ia.send_ops_flags = c->send_ops_flags;
			p->qp[i] = ibv_create_qp_ex(d->ctx, &ia);
		} else {
			struct ibv_qp_init_attr ib;
			memset(&ib, 0, sizeof(ib));
			ib.qp_type = ia.qp_type;
			ib.send_cq = ia.send_cq;
			ib.recv_cq = ia.recv_cq;
			ib.srq = ia.srq;
			ib.sq_sig_all = ia.sq_sig_all;
			ib.cap = ia.cap;
			ib.qp_context = p;
			p->qp[i] = ibv_create_qp(d->pd, &ib);
			ia.cap = ib.cap;
		}
		if (!CHECK(p->qp[i], "create %s QP side %d\t(errno %d %s)", vt_qpt_str(c->type), i, errno,
			   strerror(errno)))
			return false;
		p->cap[i] = ia.cap;
	}
	return true;
}

/* Both QPs to RTS, each addressing the other (UD: and an AH each). */
VT_STATIC bool vt_pair_connect(struct vt_pair *p)
{
	struct vt_dev *d = p->d;
	const struct vt_qp_cfg *c = &p->cfg;
	for (int i = 0; i < 2; i++) {
		int o = !i;
		int err = vt_qp_connect(p->qp[i], c, IBV_QPS_RTS, p->qp[o]->qp_num, c->psn[o], c->psn[i], &d->gid,
					d->gid_index);
		if (!CHECK(!err, "%s QP %u connected to QP %u (RESET->INIT->RTR->RTS, gid index %d)",
			   vt_qpt_str(c->type), p->qp[i]->qp_num, p->qp[o]->qp_num, d->gid_index))
			return false;
	}
	if (c->type == IBV_QPT_UD) {
		for (int i = 0; i < 2; i++) {
			struct ibv_ah_attr ah;
			memset(&ah, 0, sizeof(ah));
			ah.is_global = 1;
			ah.port_num = 1;
			ah.grh.dgid = d->gid;
			ah.grh.sgid_index = (uint8_t)d->gid_index;
			ah.grh.hop_limit = 64;
			p->ah[i] = ibv_create_ah(d->pd, &ah);
			if (!CHECK(p->ah[i], "ibv_create_ah to the loopback GID\t(errno %d %s)", errno,
				   strerror(errno)))
				return false;
		}
	}
	return true;
}

VT_STATIC bool vt_pair_setup(struct vt_dev *d, const struct vt_qp_cfg *c, struct vt_pair *p)
{
	return vt_pair_create(d, c, p) && vt_pair_connect(p);
}

VT_STATIC void vt_pair_destroy(struct vt_pair *p)
{
	for (int i = 0; i < 2; i++) {
		if (p->ah[i])
			ibv_destroy_ah(p->ah[i]);
		if (p->qp[i]) {
			int rc = ibv_destroy_qp(p->qp[i]);
			if (rc)
				CHECK_RC(rc, 0, "ibv_destroy_qp");
		}
	}
	for (int i = 0; i < 2; i++) {
		if (p->scq[i]) {
			int rc = ibv_destroy_cq(p->scq[i]);
			if (rc)
				CHECK_RC(rc, 0, "ibv_destroy_cq");
		}
		if (p->rcq[i]) {
			int rc = ibv_destroy_cq(p->rcq[i]);
			if (rc)
				CHECK_RC(rc, 0, "ibv_destroy_cq");
		}
	}
	memset(p, 0, sizeof(*p));
}

/* ------------------------------------------------------------------ */
/* posting                                                              */
/* ------------------------------------------------------------------ */

VT_STATIC int vt_post_recv(struct ibv_qp *qp, uint64_t wr_id, void *addr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = len || addr ? 1 : 0;
	return ibv_post_recv(qp, &wr, &bad);
}

VT_STATIC int vt_post_srq_recv(struct ibv_srq *srq, uint64_t wr_id, void *addr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return ibv_post_srq_recv(srq, &wr, &bad);
}

/* One-SGE send-side work request (num_sge 0 when len == 0 and !addr). */
VT_STATIC int vt_post_send(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op, void *addr, uint32_t len,
			   uint32_t lkey, unsigned flags, uint64_t raddr, uint32_t rkey, uint32_t imm_host)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.sg_list = &sge;
	wr.num_sge = len || addr ? 1 : 0;
	wr.imm_data = htonl(imm_host);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

VT_STATIC int vt_post_atomic(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op, void *res, uint32_t lkey,
			     unsigned flags, uint64_t raddr, uint32_t rkey, uint64_t cmp_add, uint64_t swap)
{
	struct ibv_sge sge = { .addr = (uintptr_t)res, .length = 8, .lkey = lkey };
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = cmp_add;
	wr.wr.atomic.swap = swap;
	return ibv_post_send(qp, &wr, &bad);
}

VT_STATIC int vt_post_ud_send(struct ibv_qp *qp, uint64_t wr_id, void *addr, uint32_t len, uint32_t lkey,
			      unsigned flags, struct ibv_ah *ah, uint32_t rqpn, uint32_t qkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = flags;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = rqpn;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* ------------------------------------------------------------------ */
/* polling                                                              */
/* ------------------------------------------------------------------ */

/* Polls until n completions were collected or timeout_ms passed; returns
 * how many.  Never blocks for long: spins, yields, then naps briefly. */
VT_STATIC int vt_poll(struct ibv_cq *cq, int n, struct ibv_wc *wc, int timeout_ms)
{
	int got = 0;
	uint64_t deadline = vt_now_ms() + (uint64_t)timeout_ms;
	unsigned empty = 0;
	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);
		if (r < 0) {
			CHECK(0, "ibv_poll_cq returned %d", r);
			return got;
		}
		if (r > 0) {
			got += r;
			empty = 0;
			continue;
		}
		if (vt_now_ms() >= deadline)
			break;
		if (++empty < 64)
			sched_yield();
		else
			vt_sleep_us(100);
	}
	return got;
}

/* Nothing arrives on cq for quiet_ms; reports one check. */
#define CHECK_CQ_EMPTY(cq, quiet_ms, ...)                                                                       \
	({                                                                                                      \
		struct ibv_wc vt_w_;                                                                            \
		int vt_n_ = vt_poll((cq), 1, &vt_w_, (quiet_ms));                                               \
		char vt_m_[512];                                                                                \
		snprintf(vt_m_, sizeof(vt_m_), __VA_ARGS__);                                                    \
		vt_report(vt_n_ == 0, __FILE__, __LINE__, NULL,                                                 \
			  "%s: no completion within %d ms\t(GOT ONE: %s wr_id %" PRIu64 ")", vt_m_, (quiet_ms), \
			  vt_status_str(vt_w_.status), vt_w_.wr_id);                                            \
	})

#define VT_ANY_OPCODE (-1)
#define VT_TIMEOUT_MS 15000

/* Polls one completion and checks wr_id, status and (unless -1) opcode.
 * The completion is returned in *out (if not NULL). */
VT_STATIC bool vt_expect_wc_(const char *file, int line, struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st,
			     int opcode, struct ibv_wc *out, const char *what)
{
	struct ibv_wc wc;
	uint64_t t0 = vt_now_ms();
	memset(&wc, 0, sizeof(wc));
	int n = vt_poll(cq, 1, &wc, VT_TIMEOUT_MS);
	if (out)
		*out = wc;
	if (n != 1)
		return vt_report(false, file, line, NULL, "%s: completion wr_id %" PRIu64 " %s (NONE within %d ms)",
				 what, wr_id, vt_status_str(st), VT_TIMEOUT_MS);
	bool ok = wc.wr_id == wr_id && wc.status == st && (opcode < 0 || (int)wc.opcode == opcode);
	return vt_report(ok, file, line, NULL,
			 "%s: completion wr_id %" PRIu64 " status %s\t(got wr_id %" PRIu64
			 " status %s (%d), opcode %d, "
			 "vendor_err 0x%x, after %" PRIu64 " ms)",
			 what, wr_id, vt_status_str(st), wc.wr_id, vt_status_str(wc.status), wc.status, wc.opcode,
			 wc.vendor_err, vt_now_ms() - t0);
}
#define EXPECT_WC(cq, wr_id, st, opcode, out, ...)                                                              \
	({                                                                                                      \
		char vt_m_[512];                                                                                \
		int vt_op_ = (opcode);                                                                          \
		snprintf(vt_m_, sizeof(vt_m_), __VA_ARGS__);                                                    \
		if (vt_op_ >= 0)                                                                                \
			snprintf(vt_m_ + strlen(vt_m_), sizeof(vt_m_) - strlen(vt_m_), " [opcode %d]", vt_op_); \
		vt_expect_wc_(__FILE__, __LINE__, (cq), (wr_id), (st), vt_op_, (out), vt_m_);                   \
	})

/* 127.0.0.1:port, and a port to try for a listener (tests retry on
 * EADDRINUSE) */
VT_STATIC struct sockaddr_in vt_lo_addr(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

VT_STATIC uint16_t vt_pick_port(void)
{
	return (uint16_t)(20000 + (getpid() * 7 + rand()) % 30000);
}

/* ------------------------------------------------------------------ */
/* ping-pong by polling memory (riostream, ib_write_lat)                 */
/* ------------------------------------------------------------------ */

/* One end: RDMA-writes its len-byte buffer, last byte = the round's
 * marker, into the peer's, then spins on its own buffer's last byte for
 * the peer's marker -- and at once overwrites that byte with its next
 * one.  The library must not change the buffer after the peer's data
 * has landed (a placement that stores a byte twice, or checks a CRC over
 * memory the application already reuses, breaks this). */
struct vt_pp_end {
	struct ibv_qp *qp;
	struct ibv_cq *scq;
	volatile uint8_t *buf;
	uint32_t len, lkey;
	uint64_t raddr;
	uint32_t rkey;
	bool first;	  /* writes first */
	int rounds, done; /* rounds asked, rounds completed */
	const char *err;  /* NULL, or why it stopped */
};

/* The sum of the counters in mask (1 << SR_STAT_...) over this process's
 * devices and QPs, as the library keeps them for `softrdma-cfg statistic`
 * (its <pid>.stats file); 0 if there are none. */
VT_STATIC uint64_t vt_stat_sum(uint32_t mask)
{
	const char *dir = getenv("SOFTRDMA_RUNTIME_DIR");
	char path[512];
	struct sr_stats_file h;
	uint64_t n = 0;
	int fd;

	if (dir && dir[0])
		snprintf(path, sizeof(path), "%s/%ld.stats", dir, (long)getpid());
	else
		snprintf(path, sizeof(path), "/dev/shm/softrdma-%u/%ld.stats", (unsigned)getuid(), (long)getpid());
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) && h.magic == SR_STATS_MAGIC) {
		for (int i = 0; i < SR_MAX_DEVICES; i++)
			for (int k = 0; k < SR_STAT_N; k++)
				if (mask & (1u << k))
					n += h.dev[i].c.v[k];
		for (uint32_t i = 0; i < h.hiwater && i < h.nslots; i++) {
			struct sr_stats_qp q;

			if (pread(fd, &q, sizeof(q), (off_t)(sizeof(h) + i * sizeof(q))) != (ssize_t)sizeof(q))
				break;
			for (int k = 0; k < SR_STAT_N; k++)
				if (mask & (1u << k))
					n += q.c.v[k];
		}
	}
	close(fd);
	return n;
}

/* Packets this process has sent and received so far.  Waits use it to
 * tell a stall (nothing moves) from a loaded machine (packets keep
 * moving, slowly). */
VT_STATIC uint64_t vt_traffic(void)
{
	return vt_stat_sum(1u << SR_STAT_SENT_PKTS | 1u << SR_STAT_RCVD_PKTS);
}

/* A wait that fails only when nothing moves: no packet sent or received by
 * this process for VT_STALL_MS, or VT_WAIT_CAP_MS in all. */
#define VT_STALL_MS 5000
#define VT_WAIT_CAP_MS 120000
struct vt_stall {
	uint64_t start, last, traffic;
};

VT_STATIC void vt_stall_init(struct vt_stall *w)
{
	w->start = w->last = vt_now_ms();
	w->traffic = vt_traffic();
}

/* True once the wait has stalled (call it now and then while waiting). */
VT_STATIC bool vt_stalled(struct vt_stall *w)
{
	uint64_t now = vt_now_ms(), t = vt_traffic();

	if (t != w->traffic) {
		w->traffic = t;
		w->last = now;
	}
	return now - w->last > VT_STALL_MS || now - w->start > VT_WAIT_CAP_MS;
}

VT_STATIC void *vt_pp_thread(void *arg)
{
	struct vt_pp_end *e = arg;
	struct ibv_wc wc[16];

	for (int i = 0; i < e->rounds; i++) {
		for (int k = 0; k < 2; k++) {
			/* step k of round i carries marker 2i+k; the first end sends it
			 * at step 0, the other at step 1 */
			uint8_t m = (uint8_t)(2 * i + k);
			bool send = (k == 0) == e->first;

			if (send) {
				struct ibv_sge sge = { (uintptr_t)e->buf, e->len, e->lkey };
				struct ibv_send_wr wr = { .wr_id = (uint64_t)i,
							  .sg_list = &sge,
							  .num_sge = 1,
							  .opcode = IBV_WR_RDMA_WRITE },
						   *bad;

				for (uint32_t j = 0; j + 1 < e->len; j++)
					e->buf[j] = (uint8_t)(m + j);
				e->buf[e->len - 1] = m;
				wr.send_flags = (e->len <= 64 ? IBV_SEND_INLINE : 0) |
						((i & 15) == 15 ? IBV_SEND_SIGNALED : 0);
				wr.wr.rdma.remote_addr = e->raddr;
				wr.wr.rdma.rkey = e->rkey;
				if (ibv_post_send(e->qp, &wr, &bad)) {
					e->err = "ibv_post_send failed";
					return NULL;
				}
				int n = ibv_poll_cq(e->scq, 16, wc);
				for (int w = 0; w < n; w++)
					if (wc[w].status != IBV_WC_SUCCESS) {
						e->err = "a Write completed with an error";
						return NULL;
					}
			} else {
				struct vt_stall w;
				unsigned spins = 0;

				vt_stall_init(&w);
				while (e->buf[e->len - 1] != m) {
					if ((++spins & 0xfffff) == 0 && vt_stalled(&w)) {
						e->err = "the peer's marker never arrived (or was undone)";
						return NULL;
					}
				}
			}
		}
		e->done = i + 1;
	}
	return NULL;
}

/* Runs the ping-pong between two connected RC QPs (both ends' buffers of
 * len bytes, registered LOCAL_WRITE | REMOTE_WRITE); true if every round
 * completed. */
VT_STATIC bool vt_pingpong_poll(struct ibv_qp *qa, struct ibv_cq *ca, struct ibv_pd *pa, struct ibv_qp *qb,
				struct ibv_cq *cb, struct ibv_pd *pb, uint32_t len, int rounds, int *done,
				const char **why)
{
	uint8_t *ba = aligned_alloc(4096, 4096), *bb = aligned_alloc(4096, 4096);
	struct ibv_mr *ma = NULL, *mb = NULL;
	struct vt_pp_end e[2];
	pthread_t t[2];
	bool ok = false;

	*done = 0;
	*why = "setup failed";
	if (!ba || !bb || len > 4096 - 48)
		goto out;
	memset(ba, 0xff, 4096);
	memset(bb, 0xff, 4096);
	ma = ibv_reg_mr(pa, ba, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	mb = ibv_reg_mr(pb, bb, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!ma || !mb)
		goto out;
	/* at 48 bytes into the page, as malloc may place a buffer: a 64-byte
	 * copy then spans two cache lines */
	e[0] = (struct vt_pp_end){ .qp = qa,
				   .scq = ca,
				   .buf = ba + 48,
				   .len = len,
				   .lkey = ma->lkey,
				   .raddr = (uintptr_t)bb + 48,
				   .rkey = mb->rkey,
				   .first = true,
				   .rounds = rounds };
	e[1] = (struct vt_pp_end){ .qp = qb,
				   .scq = cb,
				   .buf = bb + 48,
				   .len = len,
				   .lkey = mb->lkey,
				   .raddr = (uintptr_t)ba + 48,
				   .rkey = ma->rkey,
				   .first = false,
				   .rounds = rounds };
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, vt_pp_thread, &e[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	*done = e[0].done < e[1].done ? e[0].done : e[1].done;
	*why = e[0].err ? e[0].err : e[1].err;
	ok = !*why && *done == rounds;
	/* reap the signaled Writes still in the CQs */
	{
		struct ibv_wc wc[16];
		while (ibv_poll_cq(ca, 16, wc) > 0 || ibv_poll_cq(cb, 16, wc) > 0)
			;
	}
out:
	if (ma)
		ibv_dereg_mr(ma);
	if (mb)
		ibv_dereg_mr(mb);
	free(ba);
	free(bb);
	return ok;
}

/* ------------------------------------------------------------------ */
/* async events                                                         */
/* ------------------------------------------------------------------ */

/* Waits up to timeout_ms for the next async event (acked before return). */
VT_STATIC bool vt_get_async(struct ibv_context *ctx, struct ibv_async_event *ev, int timeout_ms)
{
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	int r;
	do {
		r = poll(&pfd, 1, timeout_ms);
	} while (r < 0 && errno == EINTR);
	if (r <= 0)
		return false;
	if (ibv_get_async_event(ctx, ev))
		return false;
	ibv_ack_async_event(ev);
	return true;
}

/* Runs this program (self) again with argument arg in a child, with the
 * Soft-iWARP test configuration (SR_BUILD_DIR/tests/iwarp.conf) and no
 * case filter, and checks that it succeeds; what is one line saying what
 * it tested.  Without SR_BUILD_DIR (not under CTest) it says so instead. */
VT_STATIC void vt_iwarp_child(const char *self, const char *arg, const char *what)
{
	const char *dir = getenv("SR_BUILD_DIR");
	char conf[4096];

	if (!dir) {
		NOTE("SR_BUILD_DIR not set: the Soft-iWARP device is not tested");
		return;
	}
	snprintf(conf, sizeof(conf), "%s/tests/iwarp.conf", dir);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		setenv("SOFTRDMA_CONF", conf, 1);
		unsetenv("VT_FILTER");
		execl(self, self, arg, (char *)NULL);
		_exit(127);
	}
	int st = -1;
	if (pid > 0 && waitpid(pid, &st, 0) != pid)
		st = -1;
	CHECK(st == 0, "%s on the Soft-iWARP device (the child's checks above)\t(status 0x%x)", what, st);
}

#endif /* VT_H */
