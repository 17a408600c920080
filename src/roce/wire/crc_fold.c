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
 * Where the CPU has AVX-512 too, 256-byte blocks go through sixteen lanes
 * in four 512-bit registers instead (twice the bytes per step), which
 * fold together at the end by 512, 384, 256 and 128 bits rather than
 * one lane after the other.
 *
 * Used where the CPU has VPCLMULQDQ and AVX2 (checked at run time), for
 * buffers of at least SR_CRC_FOLD_MIN bytes; anything else takes the
 * byte-wise path (ISA-L or slice-by-8).  SOFTRDMA_CRC_FOLD=0 turns
 * folding off, =256 keeps it to the 256-bit registers (to compare). */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "roce/wire/roce_hdr.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define FOLD_TARGET __attribute__((target("avx2,pclmul,vpclmulqdq")))
#define FOLD512_TARGET __attribute__((target("avx512f,avx512vl,avx2,pclmul,vpclmulqdq")))

/* x^(E-1) mod P for a lane moved E bits on, for E = 64 + D and E = D:
 * the factors of its H and L halves */
struct fold_consts {
	uint64_t k2048[2]; /* one lane 2048 bits on (512-bit path): H, L */
	uint64_t k1024[2]; /* 1024 bits on */
	uint64_t k512[2];
	uint64_t k384[2];
	uint64_t k256[2];
	uint64_t k128[2];
};

/* [0] CRC-32 (0x04C11DB7), [1] CRC-32C (0x1EDC6F41) */
static struct fold_consts fold_k[2];
static bool fold_ok;
static bool fold_512; /* the AVX-512 path too */
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
		struct {
			uint64_t *k;
			unsigned int bits;
		} set[] = { { fold_k[i].k2048, 2048 }, { fold_k[i].k1024, 1024 }, { fold_k[i].k512, 512 },
			    { fold_k[i].k384, 384 },   { fold_k[i].k256, 256 },	  { fold_k[i].k128, 128 } };

		for (size_t j = 0; j < sizeof(set) / sizeof(set[0]); j++) {
			set[j].k[0] = xpow_mod(polys[i], 64 + set[j].bits - 1);
			set[j].k[1] = xpow_mod(polys[i], set[j].bits - 1);
		}
	}
	/* SOFTRDMA_CRC_FOLD=0: the byte-wise path only; =256: no AVX-512
	 * (to compare) */
	const char *e = getenv("SOFTRDMA_CRC_FOLD");

	__builtin_cpu_init();
	fold_ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul") &&
		  __builtin_cpu_supports("vpclmulqdq") && !(e && !strcmp(e, "0"));
	fold_512 = fold_ok && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
		   !(e && !strcmp(e, "256"));
}

FOLD_TARGET static inline __m256i fold256(__m256i a, __m256i k, __m256i data)
{
	return _mm256_xor_si256(
		_mm256_xor_si256(_mm256_clmulepi64_epi128(a, k, 0x00), _mm256_clmulepi64_epi128(a, k, 0x11)), data);
}

FOLD_TARGET static inline __m128i fold128(__m128i a, __m128i k, __m128i data)
{
	return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11)), data);
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
		_mm256_castsi256_si128(a0),	 _mm256_extracti128_si256(a0, 1), _mm256_castsi256_si128(a1),
		_mm256_extracti128_si256(a1, 1), _mm256_castsi256_si128(a2),	  _mm256_extracti128_si256(a2, 1),
		_mm256_castsi256_si128(a3),	 _mm256_extracti128_si256(a3, 1),
	};
	__m128i acc = lanes[0];

	for (int i = 1; i < 8; i++)
		acc = fold128(acc, k1, lanes[i]);
	_mm_storeu_si128((__m128i *)out, acc);
}

FOLD512_TARGET static inline __m512i fold512(__m512i a, __m512i k, __m512i data)
{
	/* 0x96: the XOR of all three */
	return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00), _mm512_clmulepi64_epi128(a, k, 0x11),
					 data, 0x96);
}

FOLD512_TARGET static inline __m512i kvec512(const uint64_t k[2])
{
	return _mm512_broadcast_i32x4(_mm_set_epi64x((long long)k[1], (long long)k[0]));
}

/* One lane moved on by k, without data added. */
FOLD512_TARGET static inline __m128i moved128(__m128i a, const uint64_t k[2])
{
	__m128i kk = _mm_set_epi64x((long long)k[1], (long long)k[0]);

	return _mm_xor_si128(_mm_clmulepi64_si128(a, kk, 0x00), _mm_clmulepi64_si128(a, kk, 0x11));
}

/* fold_blocks for nblk 256-byte blocks in four 512-bit registers. */
FOLD512_TARGET static void fold_blocks512(const struct fold_consts *c, uint32_t crc, const uint8_t *p, size_t nblk,
					  uint8_t out[16])
{
	__m512i k = kvec512(c->k2048);
	__m512i a0 = _mm512_loadu_si512((const void *)p);
	__m512i a1 = _mm512_loadu_si512((const void *)(p + 64));
	__m512i a2 = _mm512_loadu_si512((const void *)(p + 128));
	__m512i a3 = _mm512_loadu_si512((const void *)(p + 192));

	a0 = _mm512_xor_si512(a0, _mm512_maskz_set1_epi32(1, (int)crc));
	for (size_t b = 1; b < nblk; b++) {
		p += 256;
		a0 = fold512(a0, k, _mm512_loadu_si512((const void *)p));
		a1 = fold512(a1, k, _mm512_loadu_si512((const void *)(p + 64)));
		a2 = fold512(a2, k, _mm512_loadu_si512((const void *)(p + 128)));
		a3 = fold512(a3, k, _mm512_loadu_si512((const void *)(p + 192)));
	}
	/* the four registers into the last (each 512 bits on), then its
	 * four lanes into its last */
	__m512i k512 = kvec512(c->k512);
	__m512i acc = fold512(fold512(fold512(a0, k512, a1), k512, a2), k512, a3);
	__m128i r = _mm512_extracti32x4_epi32(acc, 3);

	r = _mm_xor_si128(r, moved128(_mm512_extracti32x4_epi32(acc, 0), c->k384));
	r = _mm_xor_si128(r, moved128(_mm512_extracti32x4_epi32(acc, 1), c->k256));
	r = _mm_xor_si128(r, moved128(_mm512_extracti32x4_epi32(acc, 2), c->k128));
	_mm_storeu_si128((__m128i *)out, r);
}

/* The update of crc over buf by folding, or false where that is not
 * available (or buf too short: the caller's byte-wise path is quicker). */
bool sr_crc_fold_update(int which, uint32_t *crc, const void *buf, size_t len,
			uint32_t (*bytewise)(uint32_t, const void *, size_t))
{
	const uint8_t *p = buf;
	uint8_t rem[16];
	uint32_t c = *crc;
	size_t nblk;

	if (len < SR_CRC_FOLD_MIN)
		return false;
	pthread_once(&fold_once, fold_init);
	if (!fold_ok)
		return false;
	if (fold_512) {
		nblk = len / 256;
		fold_blocks512(&fold_k[which], c, p, nblk, rem);
		c = bytewise(0, rem, sizeof(rem));
		p += nblk * 256;
		len -= nblk * 256;
	}
	nblk = len / 128;
	if (nblk) {
		fold_blocks(&fold_k[which], c, p, nblk, rem);
		c = bytewise(0, rem, sizeof(rem));
		p += nblk * 128;
		len -= nblk * 128;
	}
	*crc = bytewise(c, p, len);
	return true;
}

int sr_crc_fold_bits(void)
{
	pthread_once(&fold_once, fold_init);
	return fold_512 ? 512 : fold_ok ? 256 : 0;
}

#else

int sr_crc_fold_bits(void)
{
	return 0;
}

bool sr_crc_fold_update(int which, uint32_t *crc, const void *buf, size_t len,
			uint32_t (*bytewise)(uint32_t, const void *, size_t))
{
	return false;
}

#endif
