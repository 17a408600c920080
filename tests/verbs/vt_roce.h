/* vt_roce.h - RoCEv2 packets built by hand, for the verbs tests that act
 * as a peer on the wire (test_errors' garbage datagrams, test_mw's raw
 * Write through a memory window): the ICRC (annex A17), BTH/RETH/DETH
 * and AETH packets, and UDP sockets on loopback addresses. */
#ifndef VT_ROCE_H
#define VT_ROCE_H

#include "vt.h"

#include <netinet/in.h>
#include <netpacket/packet.h>
#include <net/ethernet.h>
#include <net/if.h>
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
VT_STATIC uint32_t vt_icrc_v4(const uint8_t src[4], const uint8_t dst[4], uint16_t ip_id, uint16_t flags_frag,
			      uint16_t sport, uint16_t dport, const uint8_t *pkt, size_t len)
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

VT_STATIC uint32_t vt_le32(const uint8_t *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
VT_STATIC uint16_t vt_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* ---- packet building ---- */

VT_STATIC const uint8_t VT_LO[4] = { 127, 0, 0, 1 };
VT_STATIC const uint8_t VT_LO2[4] = { 127, 0, 0, 2 };
/* The source address the packets built here are sealed for (their ICRC
 * covers it): 127.0.0.1 unless a test plays a peer at another address. */
VT_STATIC const uint8_t *vt_src_ip = VT_LO;

VT_STATIC size_t vt_put_bth(uint8_t *p, uint8_t opcode, uint8_t pad, uint16_t pkey, uint32_t dqpn, bool ackreq,
			    uint32_t psn)
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
	uint32_t c = vt_icrc_v4(vt_src_ip, VT_LO, 0, 0x4000 /* DF */, sport, 4791, pkt, n + 4);
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

VT_STATIC size_t vt_mk_send_only(uint8_t *p, uint8_t base, uint16_t pkey, uint32_t dqpn, uint32_t psn,
				 const uint8_t *data, uint32_t len, uint16_t sport, bool good)
{
	uint32_t pad = (4 - len % 4) % 4;
	size_t n = vt_put_bth(p, base + 0x04, (uint8_t)pad, pkey, dqpn, true, psn);
	memcpy(p + n, data, len);
	n += len;
	memset(p + n, 0, pad);
	n += pad;
	return vt_seal(p, n, sport, good);
}

VT_STATIC size_t vt_mk_ud_send(uint8_t *p, uint16_t pkey, uint32_t dqpn, uint32_t qkey, uint32_t sqpn,
			       const uint8_t *data, uint32_t len, uint16_t sport, bool good)
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

/* A UDP socket bound to vt_src_ip:bind_port (0: any port). */
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
	memcpy(&a.sin_addr, vt_src_ip, 4);
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

/* ---- a peer on the wire: the test plays a QP's peer ----
 * The QP is connected (RTS) to QPN qpn at 127.0.0.2; tx is the test's
 * socket there (the QP learns its port from the first packet in
 * sequence), rx is bound to 127.0.0.2:4791 and gets the QP's answers
 * (the more specific address wins over softrdmad's wildcard socket; the
 * same user as the daemon's may join its SO_REUSEPORT port).  Packets are
 * built with vt_src_ip set to 127.0.0.2 (vt_wire_peer_open sets it,
 * vt_wire_peer_close puts it back). */
struct vt_wire_peer {
	int tx, rx;
	uint16_t sport; /* tx's port */
	uint32_t qpn;	/* the peer QPN the QP is connected to */
};

VT_STATIC bool vt_wire_peer_open(struct vt_wire_peer *w, struct vt_dev *d, struct ibv_qp *qp, const struct vt_qp_cfg *c,
				 uint32_t rq_psn, uint32_t sq_psn)
{
	union ibv_gid gid = { .raw = { [10] = 0xff, [11] = 0xff, [12] = 127, [13] = 0, [14] = 0, [15] = 2 } };
	struct sockaddr_in l = { .sin_family = AF_INET, .sin_port = htons(4791) };
	int one = 1;

	vt_src_ip = VT_LO2;
	w->qpn = 0x100000 + (uint32_t)vt_rand(0xeffff);
	w->tx = vt_udp_socket(0);
	w->sport = w->tx >= 0 ? vt_local_port(w->tx) : 0;
	w->rx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	memcpy(&l.sin_addr, VT_LO2, 4);
	if (w->rx >= 0)
		setsockopt(w->rx, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (!CHECK(w->tx >= 0 && w->rx >= 0 && !bind(w->rx, (struct sockaddr *)&l, sizeof(l)),
		   "this test's sockets as the QP's peer at 127.0.0.2 (one on 127.0.0.2:4791 for its answers)\t(%s)",
		   strerror(errno)))
		return false;
	return CHECK(!vt_qp_connect(qp, c, IBV_QPS_RTS, w->qpn, rq_psn, sq_psn, &gid, d->gid_index),
		     "the QP connected to the peer on the wire (QPN %u at 127.0.0.2)", w->qpn);
}

VT_STATIC void vt_wire_peer_close(struct vt_wire_peer *w)
{
	if (w->tx >= 0)
		close(w->tx);
	if (w->rx >= 0)
		close(w->rx);
	w->tx = w->rx = -1;
	vt_src_ip = VT_LO;
}

/* The QP's next answer (BTH on), or -1 if none within ms. */
VT_STATIC ssize_t vt_wire_recv(struct vt_wire_peer *w, uint8_t *buf, size_t cap, int ms)
{
	struct pollfd pf = { .fd = w->rx, .events = POLLIN };
	return poll(&pf, 1, ms) == 1 ? recv(w->rx, buf, cap, 0) : -1;
}

/* ---- as a QP's peer on its own port: raw sockets (CAP_NET_RAW) ----
 * No other socket can bind a QP's source port (roce/sockets.c), so a test
 * that plays a QP's peer from its port sniffs the port off lo and sends
 * with IP and UDP headers of its own. */

/* The UDP source port of the next RoCE datagram on lo to QPN dqpn, as a
 * packet socket sees it: call before the traffic starts, then read with
 * vt_sniff_port.  -1 without CAP_NET_RAW. */
VT_STATIC int vt_sniff_open(void)
{
	int fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_IP));
	if (fd < 0)
		return -1;
	struct sockaddr_ll a = { .sll_family = AF_PACKET,
				 .sll_protocol = htons(ETH_P_IP),
				 .sll_ifindex = (int)if_nametoindex("lo") };
	if (bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* 0 if none was seen within ms */
VT_STATIC uint16_t vt_sniff_port(int fd, uint32_t dqpn, int ms)
{
	uint8_t b[9200];
	uint64_t end = vt_now_ms() + (uint64_t)ms;

	while (vt_now_ms() < end) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, 50) != 1)
			continue;
		ssize_t n;
		while ((n = recv(fd, b, sizeof(b), 0)) > 0) {
			size_t ihl = (size_t)(b[0] & 15) * 4;
			if (n < (ssize_t)(ihl + 8 + 12) || b[9] != 17 || vt_be16(b + ihl + 2) != 4791)
				continue;
			const uint8_t *bth = b + ihl + 8;
			if (((uint32_t)bth[5] << 16 | (uint32_t)bth[6] << 8 | bth[7]) == dqpn)
				return vt_be16(b + ihl);
		}
	}
	return 0;
}

/* A socket to send IPv4 packets whose headers the caller writes; -1
 * without CAP_NET_RAW. */
VT_STATIC int vt_raw_socket(void)
{
	return socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
}

/* pkt (a RoCE datagram sealed for sport) from 127.0.0.1:sport to
 * 127.0.0.1:4791, with DF and IPv4 ID 0 as vt_seal assumed. */
VT_STATIC void vt_send_raw(int fd, uint16_t sport, const uint8_t *pkt, size_t n)
{
	uint8_t b[9300];
	size_t tot = 20 + 8 + n;
	if (tot > sizeof(b))
		return;
	memset(b, 0, 28);
	b[0] = 0x45;
	b[2] = (uint8_t)(tot >> 8);
	b[3] = (uint8_t)tot;
	b[6] = 0x40; /* DF */
	b[8] = 64;
	b[9] = 17;
	memcpy(b + 12, VT_LO, 4);
	memcpy(b + 16, VT_LO, 4);
	uint32_t sum = 0;
	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)b[i] << 8 | b[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	b[10] = (uint8_t)(~sum >> 8);
	b[11] = (uint8_t)~sum;
	b[20] = (uint8_t)(sport >> 8);
	b[21] = (uint8_t)sport;
	b[22] = 4791 >> 8;
	b[23] = 4791 & 255;
	b[24] = (uint8_t)((8 + n) >> 8);
	b[25] = (uint8_t)(8 + n); /* UDP checksum 0: none (IPv4) */
	memcpy(b + 28, pkt, n);
	struct sockaddr_in to = { .sin_family = AF_INET };
	memcpy(&to.sin_addr, VT_LO, 4);
	for (int tries = 0; tries < 100; tries++) {
		if (sendto(fd, b, tot, 0, (struct sockaddr *)&to, sizeof(to)) >= 0 || errno != ENOBUFS)
			return;
		vt_sleep_us(200);
	}
}

#endif
