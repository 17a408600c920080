/* CRC-32 and CRC-32C of long buffers by carry-less multiplication
 * (x86 VPCLMULQDQ on 256-bit registers): the RoCE ICRC (CRC-32), and
 * iWARP's MPA CRC-32C in builds without ISA-L, whose CRC-32C (the crc32
 * instruction) is as fast as this (icrc.c).
 *
 * The buffer is cut into 128-byte blocks held in eight 128-bit lanes.
 * Each lane A = H * x^64 + L (H the half sent first) moves D bits down
 * the message as
 *     A * x^D  =  H * (x^(64+D) mod P)  +  L * (x^D mod P)   (mod P),
 * a polynomial of fewer than 96 bits that is added to the data D bits on
 * (two carry-less products and two XORs per 16 bytes).  At the end the
 * lanes fold into one, whose 16 bytes, and the bytes after the last
 * whole block, go through the byte-wise update.  In the reflected bit
 * order of these CRCs a 64 x 64 carry-less product comes out one bit
 * short, so the constants are x^(E-1) mod P for a shift of E.  They are
 * computed from the polynomial at start-up, so one routine serves both
 * CRCs.
 *
 * Used where the CPU has VPCLMULQDQ and AVX2 (checked at run time), for
 * buffers of at least SR_CRC_FOLD_MIN bytes; anything else takes the
 * byte-wise path (ISA-L or slice-by-8). */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "roce/wire/roce_hdr.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define FOLD_TARGET __attribute__((target("avx2,pclmul,vpclmulqdq")))

struct fold_consts {
	uint64_t k1024[2]; /* one lane 1024 bits on: H, L */
	uint64_t k128[2];  /* one lane 128 bits on */
};

/* [0] CRC-32 (0x04C11DB7), [1] CRC-32C (0x1EDC6F41) */
static struct fold_consts fold_k[2];
static bool fold_ok;
static pthread_once_t fold_once = PTHREAD_ONCE_INIT;

static uint32_t bitrev32(uint32_t v)
{
	uint32_t r = 0;

	for (int i = 0; i < 32; i++)
		r |= ((v >> i) & 1u) << (31 - i);
	return r;
}

/* x^n mod P (P without its x^32 term, bit d = coefficient of x^d), as the
 * 64-bit reflected operand of a carry-less product: bit j is x^(63-j). */
static uint64_t xpow_mod(uint32_t poly, unsigned int n)
{
	uint64_t r = 1;

	while (n--) {
		r <<= 1;
		if (r & (1ull << 32))
			r ^= (1ull << 32) | poly;
	}
	return (uint64_t)bitrev32((uint32_t)r) << 32;
}

static void fold_init(void)
{
	static const uint32_t polys[2] = { 0x04c11db7u, 0x1edc6f41u };

	for (int i = 0; i < 2; i++) {
		fold_k[i].k1024[0] = xpow_mod(polys[i], 64 + 1024 - 1);
		fold_k[i].k1024[1] = xpow_mod(polys[i], 1024 - 1);
		fold_k[i].k128[0] = xpow_mod(polys[i], 64 + 128 - 1);
		fold_k[i].k128[1] = xpow_mod(polys[i], 128 - 1);
	}
	/* SOFTRDMA_CRC_FOLD=0: the byte-wise path only (to compare) */
	const char *e = getenv("SOFTRDMA_CRC_FOLD");

	__builtin_cpu_init();
	fold_ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul") &&
		  __builtin_cpu_supports("vpclmulqdq") && !(e && !strcmp(e, "0"));
}

FOLD_TARGET static inline __m256i fold256(__m256i a, __m256i k, __m256i data)
{
	return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(a, k, 0x00),
						 _mm256_clmulepi64_epi128(a, k, 0x11)),
				data);
}

FOLD_TARGET static inline __m128i fold128(__m128i a, __m128i k, __m128i data)
{
	return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11)),
			     data);
}

/* Folds the nblk 128-byte blocks at p (nblk >= 1), the register value crc
 * going in ahead of them, into 16 bytes out whose plain CRC update from 0
 * is the update of crc over the blocks. */
FOLD_TARGET static void fold_blocks(const struct fold_consts *c, uint32_t crc, const uint8_t *p, size_t nblk,
				    uint8_t out[16])
{
	__m256i k = _mm256_set_epi64x((long long)c->k1024[1], (long long)c->k1024[0], (long long)c->k1024[1],
				      (long long)c->k1024[0]);
	__m256i a0 = _mm256_loadu_si256((const __m256i *)p);
	__m256i a1 = _mm256_loadu_si256((const __m256i *)(p + 32));
	__m256i a2 = _mm256_loadu_si256((const __m256i *)(p + 64));
	__m256i a3 = _mm256_loadu_si256((const __m256i *)(p + 96));

	/* the register goes in as an XOR on the first 32 bits */
	a0 = _mm256_xor_si256(a0, _mm256_set_epi32(0, 0, 0, 0, 0, 0, 0, (int)crc));
	for (size_t b = 1; b < nblk; b++) {
		p += 128;
		a0 = fold256(a0, k, _mm256_loadu_si256((const __m256i *)p));
		a1 = fold256(a1, k, _mm256_loadu_si256((const __m256i *)(p + 32)));
		a2 = fold256(a2, k, _mm256_loadu_si256((const __m256i *)(p + 64)));
		a3 = fold256(a3, k, _mm256_loadu_si256((const __m256i *)(p + 96)));
	}
	/* eight lanes, in message order, into the last */
	__m128i k1 = _mm_set_epi64x((long long)c->k128[1], (long long)c->k128[0]);
	__m128i lanes[8] = {
		_mm256_castsi256_si128(a0), _mm256_extracti128_si256(a0, 1),
		_mm256_castsi256_si128(a1), _mm256_extracti128_si256(a1, 1),
		_mm256_castsi256_si128(a2), _mm256_extracti128_si256(a2, 1),
		_mm256_castsi256_si128(a3), _mm256_extracti128_si256(a3, 1),
	};
	__m128i acc = lanes[0];

	for (int i = 1; i < 8; i++)
		acc = fold128(acc, k1, lanes[i]);
	_mm_storeu_si128((__m128i *)out, acc);
}

/* The update of crc over buf by folding, or false where that is not
 * available (or buf too short: the caller's byte-wise path is quicker). */
bool sr_crc_fold_update(int which, uint32_t *crc, const void *buf, size_t len,
			uint32_t (*bytewise)(uint32_t, const void *, size_t))
{
	uint8_t rem[16];
	size_t nblk = len / 128;

	if (len < SR_CRC_FOLD_MIN)
		return false;
	pthread_once(&fold_once, fold_init);
	if (!fold_ok)
		return false;
	fold_blocks(&fold_k[which], *crc, buf, nblk, rem);
	*crc = bytewise(bytewise(0, rem, sizeof(rem)), (const uint8_t *)buf + nblk * 128, len - nblk * 128);
	return true;
}

#else

bool sr_crc_fold_update(int which, uint32_t *crc, const void *buf, size_t len,
			uint32_t (*bytewise)(uint32_t, const void *, size_t))
{
	(void)which;
	(void)crc;
	(void)buf;
	(void)len;
	(void)bytewise;
	return false;
}

#endif
