/* Shared by the libFuzzer harnesses in tests/fuzz.
 *
 * Each fuzz_NAME.c defines LLVMFuzzerTestOneInput (and may define
 * LLVMFuzzerInitialize).  It is linked twice: with clang's libFuzzer for
 * fuzzing (tests/fuzz/CMakeLists.txt, run_fuzz.sh), and with replay_main.c
 * into an ordinary program that runs saved inputs once (the seed corpus and
 * tests/fuzz/regress/NAME: every bug a fuzzer found), so that the
 * regression inputs are checked by every build, sanitized or not, with or
 * without clang. */
#ifndef SR_FUZZ_H
#define SR_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* abort(), not assert(): a harness must check in every build mode. */
#define REQUIRE(c)                                                                                \
	do {                                                                                      \
		if (!(c)) {                                                                       \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                                  \
		}                                                                                 \
	} while (0)

/* A copy of exactly n bytes on the heap, so that ASan sees any read past
 * the end of what a parser was given. */
static inline uint8_t *fz_dup(const uint8_t *p, size_t n)
{
	uint8_t *d = n ? malloc(n) : calloc(1, 1);

	REQUIRE(d);
	if (n)
		memcpy(d, p, n);
	return d;
}

/* Structured input: harnesses that drive a sequence of operations take
 * their choices from the front of the input, one field at a time; an
 * exhausted input reads as zeros (fz_left tells when to stop). */
struct fz {
	const uint8_t *p;
	size_t n;
};

static inline size_t fz_left(const struct fz *f)
{
	return f->n;
}

static inline uint8_t fz_u8(struct fz *f)
{
	uint8_t v = 0;

	if (f->n) {
		v = *f->p++;
		f->n--;
	}
	return v;
}

static inline uint16_t fz_u16(struct fz *f)
{
	return (uint16_t)(fz_u8(f) | fz_u8(f) << 8);
}

static inline uint32_t fz_u32(struct fz *f)
{
	return (uint32_t)fz_u16(f) | (uint32_t)fz_u16(f) << 16;
}

static inline uint64_t fz_u64(struct fz *f)
{
	return (uint64_t)fz_u32(f) | (uint64_t)fz_u32(f) << 32;
}

/* Up to max bytes (fewer when the input ends): returns how many were copied. */
static inline size_t fz_bytes(struct fz *f, void *out, size_t max)
{
	size_t n = max < f->n ? max : f->n;

	memcpy(out, f->p, n);
	f->p += n;
	f->n -= n;
	return n;
}

#endif
