/* vt_mpa.h - a raw TCP peer that speaks MPA by hand, for the iWARP tests
 * (verbs/test_iwarp.c, cm/test_iwarp_cm.c): exact reads, MPA
 * Request/Reply frames, FPDUs built with the wire codec. */
#ifndef VT_MPA_H
#define VT_MPA_H

#include "vt.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "iwarp/iwarp_cm.h"
#include "iwarp/wire/iwarp_wire.h"

VT_STATIC bool vt_write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* Read exactly len bytes within timeout_ms.  Returns bytes read (less
 * on EOF or timeout). */
VT_STATIC size_t vt_read_exact(int fd, void *buf, size_t len, int timeout_ms)
{
	uint8_t *p = buf;
	size_t got = 0;
	uint64_t deadline = vt_now_ms() + (uint64_t)timeout_ms;

	while (got < len) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int left = (int)(deadline > vt_now_ms() ? deadline - vt_now_ms() : 0);
		ssize_t n;

		if (poll(&pf, 1, left) <= 0)
			break;
		n = recv(fd, p + got, len - got, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return got;
}

/* What comes next on the socket within timeout_ms: 1 data, 0 the end of
 * the stream, -errno a reset or error, -ETIME nothing. */
VT_STATIC int vt_peer_next(int fd, int timeout_ms)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	uint8_t c;
	ssize_t n;

	if (poll(&pf, 1, timeout_ms) <= 0)
		return -ETIME;
	n = recv(fd, &c, 1, MSG_DONTWAIT);
	return n > 0 ? 1 : n == 0 ? 0 : -errno;
}

/* The peer closes the stream in order (FIN, no data before it). */
VT_STATIC bool vt_peer_eof(int fd, int timeout_ms)
{
	return vt_peer_next(fd, timeout_ms) == 0;
}

/* The peer closes or resets the connection (no data, not silence). */
VT_STATIC bool vt_peer_gone(int fd, int timeout_ms)
{
	int r = vt_peer_next(fd, timeout_ms);

	return r <= 0 && r != -ETIME;
}

/* Read one MPA Request/Reply frame, exactly (the FPDUs after it belong
 * to the QP). */
VT_STATIC bool vt_read_mpa(int fd, uint8_t *buf, struct sr_mpa_rr *rr)
{
	size_t flen;

	if (vt_read_exact(fd, buf, SR_MPA_RR_HDR_LEN, 5000) != SR_MPA_RR_HDR_LEN)
		return false;
	flen = sr_mpa_rr_frame_len(buf, SR_MPA_RR_HDR_LEN);
	if (!flen || flen > SR_MPA_RR_HDR_LEN + SR_MPA_MAX_PD)
		return false;
	if (vt_read_exact(fd, buf + SR_MPA_RR_HDR_LEN, flen - SR_MPA_RR_HDR_LEN, 5000) != flen - SR_MPA_RR_HDR_LEN)
		return false;
	return sr_mpa_rr_parse(rr, buf, flen) == (int)flen;
}

/* An FPDU from a header and payload, CRC as negotiated (or corrupted). */
VT_STATIC size_t vt_fpdu(uint8_t *out, struct sr_iw_hdr *h, const void *pay, size_t paylen, bool crc, bool bad_crc)
{
	uint32_t hl = sr_iw_hdr_build(out + 2, h), ul = hl + (uint32_t)paylen, pad = sr_mpa_pad(ul);
	uint32_t c = 0;

	out[0] = (uint8_t)(ul >> 8);
	out[1] = (uint8_t)ul;
	if (paylen)
		memcpy(out + 2 + hl, pay, paylen);
	memset(out + 2 + ul, 0, pad);
	if (crc)
		c = ~sr_mpa_crc_update(~0u, out, 2 + ul + pad);
	if (bad_crc)
		c ^= 0x00010000;
	sr_mpa_crc_store(out + 2 + ul + pad, c);
	return sr_mpa_fpdu_len(ul);
}

/* A connected pair over 127.0.0.1 (fds[0] connected, fds[1] accepted). */
VT_STATIC bool vt_tcp_pair(int fds[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	fds[0] = fds[1] = -1;
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &al)) {
		if (l >= 0)
			close(l);
		return false;
	}
	fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fds[0] < 0 || connect(fds[0], (struct sockaddr *)&a, sizeof(a))) {
		close(l);
		return false;
	}
	fds[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	close(l);
	setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fds[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fds[1] >= 0;
}

struct vt_mpa_opts {
	bool crc;
	uint8_t rev;
	uint16_t ird, ord;
	int rtr;    /* enum sr_mpa_rtr: peer-to-peer with this RTR */
	int sndbuf; /* SO_SNDBUF of both sockets, 0 for the default */
};

/* The MPA exchange as the CM does it: fds[0] is the initiator.  Fills the
 * conn params of both ends from what was negotiated. */
VT_STATIC bool vt_mpa_exchange(int fds[2], const struct vt_mpa_opts *o, struct sr_iw_conn_params p[2])
{
	static const char pd_req[] = "softrdma test: request", pd_rep[] = "reply";
	uint8_t buf[600];
	struct sr_mpa_rr req, rep, got_req, got_rep;
	int n;

	memset(&req, 0, sizeof(req));
	req.rev = o->rev;
	req.crc = o->crc;
	if (o->rev >= 2)
		sr_mpa_rr_set_v2(&req, o->ird, o->ord, o->rtr != 0, o->rtr ? 1u << o->rtr : 0);
	req.pd = (const uint8_t *)pd_req;
	req.pd_len = sizeof(pd_req);
	n = sr_mpa_rr_build(buf, sizeof(buf), &req);
	if (n <= 0 || !vt_write_all(fds[0], buf, (size_t)n))
		return false;
	if (!vt_read_mpa(fds[1], buf, &got_req) || got_req.reply || got_req.pd_len != sizeof(pd_req) ||
	    memcmp(got_req.pd, pd_req, sizeof(pd_req)))
		return false;
	memset(&rep, 0, sizeof(rep));
	rep.reply = true;
	rep.rev = got_req.rev;
	rep.crc = got_req.crc;
	if (got_req.enhanced)
		sr_mpa_rr_set_v2(&rep, sr_mpa_ord(&got_req), sr_mpa_ird(&got_req), o->rtr != 0,
				 o->rtr ? 1u << sr_mpa_rr_rtr(&got_req) : 0);
	rep.pd = (const uint8_t *)pd_rep;
	rep.pd_len = sizeof(pd_rep);
	n = sr_mpa_rr_build(buf, sizeof(buf), &rep);
	if (n <= 0 || !vt_write_all(fds[1], buf, (size_t)n))
		return false;
	if (!vt_read_mpa(fds[0], buf, &got_rep) || !got_rep.reply || got_rep.pd_len != sizeof(pd_rep))
		return false;
	memset(p, 0, 2 * sizeof(*p));
	for (int i = 0; i < 2; i++) {
		p[i].fd = fds[i];
		p[i].crc = got_req.crc || got_rep.crc;
		p[i].mpa_rev = got_rep.rev;
		p[i].rtr = sr_mpa_rr_rtr(&got_rep);
		p[i].initiator = i == 0;
	}
	/* each side's IRD is what it offered, its ORD what the other offered */
	p[0].ird = sr_mpa_ird(&req);
	p[0].ord = sr_mpa_ird(&got_rep);
	p[1].ird = sr_mpa_ird(&got_rep);
	p[1].ord = sr_mpa_ird(&got_req);
	if (!got_req.enhanced) {
		p[0].ird = p[0].ord = p[1].ird = p[1].ord = 16;
	}
	return true;
}

/* Both QPs of p (in RESET, on an iWARP device) to RTS on one TCP
 * connection over 127.0.0.1, set up as the CM does it (MPA v2, CRC on):
 * vt_pair_connect's counterpart on Soft-iWARP. */
VT_STATIC bool vt_iw_pair_connect(struct vt_pair *p)
{
	const struct vt_mpa_opts o = { .crc = true, .rev = 2, .ird = 16, .ord = 16 };
	struct sr_iw_conn_params cp[2];
	int fds[2];
	bool ok;

	for (int i = 0; i < 2; i++)
		if (!CHECK(!vt_qp_connect(p->qp[i], &p->cfg, IBV_QPS_INIT, 0, 0, 0, &p->d->gid, p->d->gid_index),
			   "iWARP QP %u to INIT", p->qp[i]->qp_num))
			return false;
	ok = vt_tcp_pair(fds) && vt_mpa_exchange(fds, &o, cp);
	for (int i = 0; ok && i < 2; i++) {
		ok = !sr_iw_qp_connect(p->qp[i], &cp[i]);
		if (ok)
			fds[i] = -1; /* the QP's now */
	}
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return CHECK(ok, "iWARP QPs %u and %u connected over TCP (MPA v2, CRC)", p->qp[0]->qp_num, p->qp[1]->qp_num);
}

#endif /* VT_MPA_H */
