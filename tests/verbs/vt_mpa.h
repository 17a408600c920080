/* vt_mpa.h - a raw TCP peer that speaks MPA by hand, for the iWARP tests
 * (verbs/test_iwarp.c, cm/test_iwarp_cm.c): exact reads, MPA
 * Request/Reply frames, FPDUs built with the wire codec. */
#ifndef VT_MPA_H
#define VT_MPA_H

#include "vt.h"

#include <sys/socket.h>

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

#endif /* VT_MPA_H */
