/* vt_roce.h - RoCEv2 packets built by hand, for the verbs tests that act
 * as a peer on the wire (test_errors' garbage datagrams, test_mw's raw
 * Write through a memory window): the ICRC (annex A17), BTH/RETH/DETH
 * and AETH packets, and UDP sockets on the loopback address, with the
 * source port a QP of a given number sends from (as softrdma and rxe
 * choose it). */
#ifndef VT_ROCE_H
#define VT_ROCE_H

#include "vt.h"

#include <netinet/in.h>
#include <sys/socket.h>

/* The RoCEv2 ICRC (IBTA vol. 1, annex A17), written for this test from the
 * spec: CRC-32 over 8 bytes of ones, the IPv4 header with TOS, TTL and
 * checksum set to ones, the UDP header with its checksum set to ones, the
 * BTH with its resv8a byte set to ones, then the rest of the packet; the
 * result goes on the wire least significant byte first (as rxe sends it).
 * test_errors checks it against the kernel rxe captures in tests/data. */
VT_STATIC uint32_t vt_crc_tab[256];

VT_STATIC void vt_crc_init(void)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		vt_crc_tab[n] = c;
	}
}

VT_STATIC uint32_t vt_crc32_upd(uint32_t c, const uint8_t *p, size_t n)
{
	while (n--)
		c = vt_crc_tab[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

/* pkt: the UDP payload, len bytes including the 4-byte ICRC slot. */
VT_STATIC uint32_t vt_icrc_v4(const uint8_t src[4], const uint8_t dst[4], uint16_t ip_id, uint16_t flags_frag, uint16_t sport,
			uint16_t dport, const uint8_t *pkt, size_t len)
{
	uint8_t ph[8 + 20 + 8 + 12];
	uint8_t *ip = ph + 8, *udp = ip + 20;
	size_t tot = 20 + 8 + len;
	memset(ph, 0xff, 8);
	ip[0] = 0x45;
	ip[1] = 0xff;
	ip[2] = (uint8_t)(tot >> 8);
	ip[3] = (uint8_t)tot;
	ip[4] = (uint8_t)(ip_id >> 8);
	ip[5] = (uint8_t)ip_id;
	ip[6] = (uint8_t)(flags_frag >> 8);
	ip[7] = (uint8_t)flags_frag;
	ip[8] = 0xff;
	ip[9] = 17;
	ip[10] = ip[11] = 0xff;
	memcpy(ip + 12, src, 4);
	memcpy(ip + 16, dst, 4);
	udp[0] = (uint8_t)(sport >> 8);
	udp[1] = (uint8_t)sport;
	udp[2] = (uint8_t)(dport >> 8);
	udp[3] = (uint8_t)dport;
	udp[4] = (uint8_t)((8 + len) >> 8);
	udp[5] = (uint8_t)(8 + len);
	udp[6] = udp[7] = 0xff;
	memcpy(udp + 8, pkt, 12);
	udp[8 + 4] = 0xff;
	uint32_t c = vt_crc32_upd(0xffffffffu, ph, sizeof(ph));
	c = vt_crc32_upd(c, pkt + 12, len - 12 - 4);
	return ~c;
}

VT_STATIC uint32_t vt_le32(const uint8_t *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
VT_STATIC uint16_t vt_be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

/* ---- packet building ---- */

VT_STATIC const uint8_t VT_LO[4] = { 127, 0, 0, 1 };

VT_STATIC size_t vt_put_bth(uint8_t *p, uint8_t opcode, uint8_t pad, uint16_t pkey, uint32_t dqpn, bool ackreq, uint32_t psn)
{
	p[0] = opcode;
	p[1] = (uint8_t)(pad << 4);
	p[2] = (uint8_t)(pkey >> 8);
	p[3] = (uint8_t)pkey;
	p[4] = 0;
	p[5] = (uint8_t)(dqpn >> 16);
	p[6] = (uint8_t)(dqpn >> 8);
	p[7] = (uint8_t)dqpn;
	p[8] = ackreq ? 0x80 : 0;
	p[9] = (uint8_t)(psn >> 16);
	p[10] = (uint8_t)(psn >> 8);
	p[11] = (uint8_t)psn;
	return 12;
}

VT_STATIC size_t vt_put_be(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
	return (size_t)bytes;
}

/* Appends pad (already counted in the BTH) and the ICRC; returns the length. */
VT_STATIC size_t vt_seal(uint8_t *pkt, size_t n, uint16_t sport, bool good_icrc)
{
	size_t pad = (4 - (n - 0) % 4) % 4; /* caller set BTH pad from the payload; n is header+payload */
	(void)pad;
	uint32_t c = vt_icrc_v4(VT_LO, VT_LO, 0, 0x4000 /* DF */, sport, 4791, pkt, n + 4);
	if (!good_icrc)
		c ^= 1u << (vt_rand64() % 32) | 1;
	pkt[n] = (uint8_t)c;
	pkt[n + 1] = (uint8_t)(c >> 8);
	pkt[n + 2] = (uint8_t)(c >> 16);
	pkt[n + 3] = (uint8_t)(c >> 24);
	return n + 4;
}

/* RC/UC WRITE_ONLY (opcode base + 0x0a) with RETH and payload. */
VT_STATIC size_t vt_mk_write_only(uint8_t *p, uint8_t base, uint16_t pkey, uint32_t dqpn, uint32_t psn, uint64_t va,
			    uint32_t rkey, const uint8_t *data, uint32_t len, uint16_t sport, bool good)
{
	uint32_t pad = (4 - len % 4) % 4;
	size_t n = vt_put_bth(p, base + 0x0a, (uint8_t)pad, pkey, dqpn, true, psn);
	n += vt_put_be(p + n, va, 8);
	n += vt_put_be(p + n, rkey, 4);
	n += vt_put_be(p + n, len, 4);
	memcpy(p + n, data, len);
	n += len;
	memset(p + n, 0, pad);
	n += pad;
	return vt_seal(p, n, sport, good);
}

VT_STATIC size_t vt_mk_send_only(uint8_t *p, uint8_t base, uint16_t pkey, uint32_t dqpn, uint32_t psn, const uint8_t *data,
			   uint32_t len, uint16_t sport, bool good)
{
	uint32_t pad = (4 - len % 4) % 4;
	size_t n = vt_put_bth(p, base + 0x04, (uint8_t)pad, pkey, dqpn, true, psn);
	memcpy(p + n, data, len);
	n += len;
	memset(p + n, 0, pad);
	n += pad;
	return vt_seal(p, n, sport, good);
}

VT_STATIC size_t vt_mk_ud_send(uint8_t *p, uint16_t pkey, uint32_t dqpn, uint32_t qkey, uint32_t sqpn, const uint8_t *data,
			 uint32_t len, uint16_t sport, bool good)
{
	uint32_t pad = (4 - len % 4) % 4;
	size_t n = vt_put_bth(p, 0x64 /* UD SEND_ONLY */, (uint8_t)pad, pkey, dqpn, false, 0);
	n += vt_put_be(p + n, qkey, 4);
	n += vt_put_be(p + n, sqpn & 0xffffff, 4);
	memcpy(p + n, data, len);
	n += len;
	memset(p + n, 0, pad);
	n += pad;
	return vt_seal(p, n, sport, good);
}

/* An ACK, NAK, read response or atomic ACK (RC responses) to a requester. */
VT_STATIC size_t vt_mk_response(uint8_t *p, int kind, uint32_t dqpn, uint32_t psn, uint16_t sport, bool good)
{
	static const uint8_t syn[] = { 0x1f, 0x60, 0x61, 0x62, 0x63, 0x20 | 12 };
	uint8_t opcode = kind < 6 ? 0x11 : kind == 6 ? 0x10 : 0x12;
	size_t n = vt_put_bth(p, opcode, 0, 0xffff, dqpn, false, psn);
	p[n++] = kind < 6 ? syn[kind] : 0x1f;
	n += vt_put_be(p + n, vt_rand64() & 0xffffff, 3);
	if (opcode == 0x10) {
		for (int i = 0; i < 256; i++)
			p[n++] = (uint8_t)vt_rand64();
	}
	if (opcode == 0x12)
		n += vt_put_be(p + n, vt_rand64(), 8);
	return vt_seal(p, n, sport, good);
}

VT_STATIC int vt_udp_socket(uint16_t bind_port)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int one = 1, sz = 4 << 20;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	/* port 0: bound now, so its port is known before the first send */
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(bind_port) };
	memcpy(&a.sin_addr, VT_LO, 4);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

VT_STATIC uint16_t vt_local_port(int fd)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);
	memset(&a, 0, sizeof(a));
	getsockname(fd, (struct sockaddr *)&a, &l);
	return ntohs(a.sin_port);
}

VT_STATIC void vt_send_to_4791(int fd, const uint8_t *p, size_t n)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(4791) };
	memcpy(&to.sin_addr, VT_LO, 4);
	for (int tries = 0; tries < 100; tries++) {
		if (sendto(fd, p, n, 0, (struct sockaddr *)&to, sizeof(to)) >= 0 || errno != ENOBUFS)
			return;
		vt_sleep_us(200);
	}
}

VT_STATIC uint16_t vt_src_port_of(uint32_t qpn) { return (uint16_t)(0xC000u + ((qpn * 0x61C88647u) >> 18)); }

#endif
