/* The unit tests' shared harness: CHECK counts checks and prints each
 * failure with its place, rnd() gives a deterministic stream (so that a
 * failure reproduces), dup_exact() an exact-size heap copy (so that ASan
 * flags any read past its end), ut_end() the summary line and exit code. */
#ifndef SR_TESTS_UNIT_UT_H
#define SR_TESTS_UNIT_UT_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned n_pass, n_fail;

static inline void check_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
	va_list ap;

	n_fail++;
	fprintf(stderr, "FAIL %s:%d: %s", file, line, expr);
	if (fmt && *fmt) {
		fputs(": ", stderr);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
	}
	fputc('\n', stderr);
}

/* CHECK(cond) or CHECK(cond, "context %d", x): counts one check; prints on
 * failure. */
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (cond)                                                      \
			n_pass++;                                              \
		else                                                           \
			check_fail(__FILE__, __LINE__, #cond, "" __VA_ARGS__); \
	} while (0)

/* xorshift64, from a fixed seed */
static uint64_t ut_rng = 0x2545f4914f6cdd1dull;

static inline uint64_t rnd(void)
{
	ut_rng ^= ut_rng << 13;
	ut_rng ^= ut_rng >> 7;
	ut_rng ^= ut_rng << 17;
	return ut_rng;
}

static inline void rnd_fill(void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		((uint8_t *)p)[i] = (uint8_t)rnd();
}

static inline uint8_t *dup_exact(const void *p, size_t len)
{
	uint8_t *d = malloc(len ? len : 1);

	if (!d) {
		perror("malloc");
		exit(2);
	}
	if (len)
		memcpy(d, p, len);
	return d;
}

/* The summary line; main returns what this returns. */
static inline int ut_end(const char *name)
{
	printf("%s: %u passed, %u failed\n", name, n_pass, n_fail);
	return n_fail ? 1 : 0;
}

#endif
