/* CRC-32 / CRC-32C and the RoCEv2 invariant CRC (IBTA vol. 1 annex A17).
 *
 * The ICRC is the Ethernet CRC-32 (init ~0, reflected, final ~) over a
 * pseudo packet: 8 bytes of ones standing in for the LRH, the IP and UDP
 * headers with their variant fields set to ones, the BTH with its resv8a
 * byte (FECN/BECN) set to ones, then the rest of the packet up to the ICRC.
 * Kernel rxe captures show the four ICRC bytes on the wire are that value
 * in little-endian order (see sr_icrc_store).
 *
 * The IPv4 Identification is covered too, and a UDP socket never sees it.
 * Rather than guess it, sr_icrc_verify solves for it: CRC-32 is affine over
 * GF(2), so the CRCs of two messages of equal length that differ only in
 * the 4 bytes at IP offset 4..7 (ID, flags, fragment offset) differ by
 *     D = w(x) * x^32 * x^(8*tail)  mod P
 * where w is the 4-byte difference read as a reflected polynomial and tail
 * the number of message bytes after those 4.  x is invertible mod P (P has
 * a constant term), so w = D * x^-(32 + 8*tail) mod P is unique: one
 * multiplication by a constant that depends only on the packet length
 * (two table lookups and one more multiplication, see unshift_init).
 * The packet is accepted iff w changes nothing but the ID and the DF bit;
 * the other 15 bits of w (reserved, MF, fragment offset) must be zero,
 * which is what is left of the check. */
#include <endian.h>
#include <pthread.h>
#include <string.h>
#include <sys/uio.h>

#ifdef SR_HAVE_ISAL
#include <isa-l/crc.h>
#endif

#include "roce/wire/roce_hdr.h"

#define CRC32_POLY 0xedb88320u	/* 0x04C11DB7 reflected */
#define CRC32C_POLY 0x82f63b78u /* 0x1EDC6F41 reflected */

/* ---- portable slice-by-8 ---- */

/* Written once under pthread_once, read-only afterwards. */
static uint32_t crc32_tab[8][256];
static uint32_t crc32c_tab[8][256];
static pthread_once_t crc_tab_once = PTHREAD_ONCE_INIT;

static void crc_tab_fill(uint32_t tab[8][256], uint32_t poly)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (poly & -(c & 1));
		tab[0][n] = c;
	}
	for (uint32_t n = 0; n < 256; n++)
		for (int k = 1; k < 8; k++)
			tab[k][n] = (tab[k - 1][n] >> 8) ^ tab[0][tab[k - 1][n] & 0xff];
}

static void crc_tab_init(void)
{
	crc_tab_fill(crc32_tab, CRC32_POLY);
	crc_tab_fill(crc32c_tab, CRC32C_POLY);
}

static inline uint32_t load_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static uint32_t crc_slice8(const uint32_t tab[8][256], uint32_t crc, const uint8_t *p, size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		crc = tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		len--;
	}
	while (len >= 8) {
		uint32_t lo = load_le32(p) ^ crc;
		uint32_t hi = load_le32(p + 4);

		crc = tab[7][lo & 0xff] ^ tab[6][(lo >> 8) & 0xff] ^ tab[5][(lo >> 16) & 0xff] ^ tab[4][lo >> 24] ^
		      tab[3][hi & 0xff] ^ tab[2][(hi >> 8) & 0xff] ^ tab[1][(hi >> 16) & 0xff] ^ tab[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

uint32_t sr_crc32_update_sw(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_tab_once, crc_tab_init);
	return crc_slice8(crc32_tab, crc, buf, len);
}

uint32_t sr_crc32c_update_sw(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_tab_once, crc_tab_init);
	return crc_slice8(crc32c_tab, crc, buf, len);
}

/* ---- the public update functions ---- */

static uint32_t crc32_bytewise(uint32_t crc, const void *buf, size_t len)
{
#ifdef SR_HAVE_ISAL
	/* crc32_gzip_refl inverts its seed on entry and its result on exit
	 * (zlib's convention); undo both to get a plain register update. */
	if (!len)
		return crc;
	return ~crc32_gzip_refl(~crc, buf, len);
#else
	return sr_crc32_update_sw(crc, buf, len);
#endif
}

static uint32_t crc32c_bytewise(uint32_t crc, const void *buf, size_t len)
{
#ifdef SR_HAVE_ISAL
	/* crc32_iscsi is already a plain register update (no inversions),
	 * but takes an int length and a non-const pointer it does not write. */
	const uint8_t *p = buf;

	while (len) {
		int n = len > (1u << 30) ? (1 << 30) : (int)len;

		crc = crc32_iscsi((unsigned char *)p, n, crc);
		p += n;
		len -= (size_t)n;
	}
	return crc;
#else
	return sr_crc32c_update_sw(crc, buf, len);
#endif
}

uint32_t sr_crc32_update(uint32_t crc, const void *buf, size_t len)
{
	if (sr_crc_fold_update(0, &crc, buf, len, crc32_bytewise))
		return crc;
	return crc32_bytewise(crc, buf, len);
}

uint32_t sr_crc32c_update(uint32_t crc, const void *buf, size_t len)
{
#ifndef SR_HAVE_ISAL
	/* Folding only without ISA-L: ISA-L's CRC-32C (the crc32
	 * instruction) is at least as fast as folding at every length,
	 * while its CRC-32 is not, hence sr_crc32_update always folds. */
	if (sr_crc_fold_update(1, &crc, buf, len, crc32c_bytewise))
		return crc;
#endif
	return crc32c_bytewise(crc, buf, len);
}

/* ---- ICRC ---- */

#define LRH_STANDIN_BYTES 8
#define IPV4_HDR_BYTES 20
#define IPV6_HDR_BYTES 40
#define UDP_HDR_BYTES 8
#define PSEUDO_MAX (LRH_STANDIN_BYTES + IPV6_HDR_BYTES + UDP_HDR_BYTES + SR_BTH_BYTES)
#define BTH_RESV8A 4
#define IP_DF 0x4000

/* The largest UDP payloads: the ICRC covers the IPv4 total length and the
 * IPv6 payload length, 16-bit fields that must not wrap. */
#define UDP_PAYLOAD_MAX_V4 (0xffff - IPV4_HDR_BYTES - UDP_HDR_BYTES)
#define UDP_PAYLOAD_MAX_V6 (0xffff - UDP_HDR_BYTES)

static inline void put_be16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* Writes the masked LRH stand-in, IP and UDP headers for a datagram whose
 * UDP payload (BTH through ICRC) is udp_len bytes; returns their length. */
static size_t icrc_pseudo_hdr(uint8_t *ph, const struct sr_icrc_env *env, size_t udp_len, uint16_t ipv4_id,
			      bool ipv4_df)
{
	uint8_t *ip = ph + LRH_STANDIN_BYTES;
	uint8_t *udp;

	memset(ph, 0xff, LRH_STANDIN_BYTES);
	if (!env->ipv6) {
		ip[0] = 0x45;
		ip[1] = 0xff; /* TOS */
		put_be16(ip + 2, (uint32_t)(IPV4_HDR_BYTES + UDP_HDR_BYTES + udp_len));
		put_be16(ip + 4, ipv4_id);
		put_be16(ip + 6, ipv4_df ? IP_DF : 0);
		ip[8] = 0xff; /* TTL */
		ip[9] = IPPROTO_UDP;
		ip[10] = ip[11] = 0xff; /* header checksum */
		memcpy(ip + 12, &env->saddr.s6_addr[12], 4);
		memcpy(ip + 16, &env->daddr.s6_addr[12], 4);
		udp = ip + IPV4_HDR_BYTES;
	} else {
		/* version 6, then traffic class and flow label all ones */
		ip[0] = 0x6f;
		ip[1] = ip[2] = ip[3] = 0xff;
		put_be16(ip + 4, (uint32_t)(UDP_HDR_BYTES + udp_len));
		ip[6] = IPPROTO_UDP;
		ip[7] = 0xff; /* hop limit */
		memcpy(ip + 8, &env->saddr, 16);
		memcpy(ip + 24, &env->daddr, 16);
		udp = ip + IPV6_HDR_BYTES;
	}
	put_be16(udp, env->sport);
	put_be16(udp + 2, env->dport);
	put_be16(udp + 4, (uint32_t)(UDP_HDR_BYTES + udp_len));
	udp[6] = udp[7] = 0xff; /* checksum */
	return (size_t)(udp + UDP_HDR_BYTES - ph);
}

/* ICRC over iov (the packet without its ICRC, covered bytes in total).
 * The BTH is gathered into the pseudo-header buffer so that its variant
 * byte can be masked without touching the caller's memory, and the whole
 * packet still costs a single pass. */
static uint32_t icrc_iov(const struct sr_icrc_env *env, uint16_t ipv4_id, bool ipv4_df, const struct iovec *iov,
			 int iovcnt, size_t total)
{
	uint8_t ph[PSEUDO_MAX];
	size_t n = icrc_pseudo_hdr(ph, env, total + SR_ICRC_BYTES, ipv4_id, ipv4_df);
	size_t bth = 0, off = 0;
	uint32_t crc;
	int i = 0;

	while (i < iovcnt && bth < SR_BTH_BYTES) {
		size_t take = iov[i].iov_len - off;

		if (take > SR_BTH_BYTES - bth)
			take = SR_BTH_BYTES - bth;
		if (take)
			memcpy(ph + n + bth, (const uint8_t *)iov[i].iov_base + off, take);
		bth += take;
		off += take;
		if (off == iov[i].iov_len) {
			i++;
			off = 0;
		}
	}
	if (bth > BTH_RESV8A)
		ph[n + BTH_RESV8A] = 0xff;

	crc = sr_crc32_update(0xffffffffu, ph, n + bth);
	for (; i < iovcnt; i++, off = 0)
		crc = sr_crc32_update(crc, (const uint8_t *)iov[i].iov_base + off, iov[i].iov_len - off);
	return ~crc;
}

uint32_t sr_icrc_compute(const struct sr_icrc_env *env, const uint8_t *buf, size_t len)
{
	size_t covered = len > SR_ICRC_BYTES ? len - SR_ICRC_BYTES : 0;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = covered };

	return icrc_iov(env, env->ipv4_id, env->ipv4_df, &iov, 1, covered);
}

uint32_t sr_icrc_compute_iov(const struct sr_icrc_env *env, const struct iovec *iov, int iovcnt)
{
	size_t total = 0;

	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	return icrc_iov(env, env->ipv4_id, env->ipv4_df, iov, iovcnt, total);
}

/* ---- solving for the IPv4 Identification ---- */

/* Polynomials mod P in the reflected representation the CRC register
 * uses: bit 31 is x^0, bit 0 is x^31, and a right shift multiplies by x. */
#define GF2_ONE 0x80000000u
/* x^-1 mod P: since P = x*Q + 1, x*Q = 1 (mod P), so x^-1 = Q = (P - 1) / x,
 * i.e. P's coefficients shifted down one degree. */
#define GF2_X_INV 0xdb710641u

static uint32_t gf2_mulmod(uint32_t a, uint32_t b)
{
	uint32_t p = 0;

	for (int i = 0; i < 32; i++) {
		p ^= b & -((a >> (31 - i)) & 1);
		b = (b >> 1) ^ (CRC32_POLY & -(b & 1));
	}
	return p;
}

static uint32_t gf2_powmod(uint32_t a, uint32_t k)
{
	uint32_t r = GF2_ONE;

	while (k) {
		if (k & 1)
			r = gf2_mulmod(r, a);
		a = gf2_mulmod(a, a);
		k >>= 1;
	}
	return r;
}

/* The ICRC message is LRH stand-in (8) + IPv4 (20) + UDP (8) + the UDP
 * payload without the ICRC (len - 4); the ID/flags window ends at message
 * offset 8 + 8 = 16, so tail = len + 16 and the factor that undoes the
 * shift is x^-(32 + 8 * (len + 16)) = x^-160 * x^-(8 * len).
 *
 * Split len into its two bytes and the factor is the product of two table
 * entries: x^-(160 + 8 * lo) and x^-(2048 * hi).  Every length costs the
 * same two multiplications, with no per-length cache to keep coherent
 * between threads.  len < 65536 always holds (the IP length fields are 16
 * bits wide and sr_icrc_verify_ipv4_id checks it). */
static uint32_t unshift_lo[256], unshift_hi[256];
static pthread_once_t unshift_once = PTHREAD_ONCE_INIT;

static void unshift_init(void)
{
	uint32_t x_inv8 = gf2_powmod(GF2_X_INV, 8);

	unshift_lo[0] = gf2_powmod(GF2_X_INV, 160);
	for (int i = 1; i < 256; i++)
		unshift_lo[i] = gf2_mulmod(unshift_lo[i - 1], x_inv8);
	unshift_hi[0] = GF2_ONE;
	unshift_hi[1] = gf2_powmod(GF2_X_INV, 8 * 256);
	for (int i = 2; i < 256; i++)
		unshift_hi[i] = gf2_mulmod(unshift_hi[i - 1], unshift_hi[1]);
}

static uint32_t ipv4_id_unshift_factor(size_t len)
{
	pthread_once(&unshift_once, unshift_init);
	return gf2_mulmod(unshift_lo[len & 0xff], unshift_hi[(len >> 8) & 0xff]);
}

bool sr_icrc_verify_ipv4_id(const struct sr_icrc_env *env, const uint8_t *buf, size_t len, uint16_t *ipv4_id,
			    bool *ipv4_df)
{
	uint32_t got, want, w;
	uint8_t d_id_hi, d_id_lo, d_flags, d_frag;

	if (!buf || len < SR_BTH_BYTES + SR_ICRC_BYTES || len > (env->ipv6 ? UDP_PAYLOAD_MAX_V6 : UDP_PAYLOAD_MAX_V4))
		return false;
	want = sr_icrc_load(buf + len - SR_ICRC_BYTES);
	got = sr_icrc_compute(env, buf, len);
	if (got == want) {
		if (!env->ipv6) {
			*ipv4_id = env->ipv4_id;
			*ipv4_df = env->ipv4_df;
		}
		return true;
	}
	if (env->ipv6)
		return false;

	w = gf2_mulmod(got ^ want, ipv4_id_unshift_factor(len));
	d_id_hi = (uint8_t)w;
	d_id_lo = (uint8_t)(w >> 8);
	d_flags = (uint8_t)(w >> 16);
	d_frag = (uint8_t)(w >> 24);
	/* A RoCE datagram is never a fragment: only DF may differ. */
	if ((d_flags & ~(IP_DF >> 8)) || d_frag)
		return false;
	*ipv4_id = env->ipv4_id ^ (uint16_t)(d_id_hi << 8 | d_id_lo);
	*ipv4_df = env->ipv4_df ^ !!d_flags;
	return true;
}

bool sr_icrc_verify(const struct sr_icrc_env *env, const uint8_t *buf, size_t len)
{
	uint16_t id;
	bool df;

	return sr_icrc_verify_ipv4_id(env, buf, len, &id, &df);
}
