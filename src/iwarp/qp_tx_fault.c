/* Fault injection on the iWARP send path (core/fault.h).  The unit is the
 * FPDU (siw cuts one per TCP segment; ours are up to 60 KiB).  TCP under
 * us never loses, duplicates or reorders bytes, so what a faulty network
 * does to TCP is modelled by what it does to the stream:
 *
 *   drop      the stream stalls before the FPDU for rto ms (default 200,
 *             Linux's minimum retransmission timeout): what a lost
 *             segment costs TCP.  Data arrives intact, late.
 *   corrupt   one bit of the FPDU after its MPA length field (DDP/RDMAP
 *             headers, payload, pad or CRC) is flipped after the CRC was
 *             computed: the damage TCP's checksum misses and MPA's CRC is
 *             for.  The peer must Terminate.  (With CRC off a payload bit
 *             lands unnoticed.  The length field is spared: a wrong length
 *             misframes the stream, which without markers shows only
 *             when more bytes come, or never.)
 *   reset     the connection is reset (RST) where the FPDU would start.
 *   truncate  part of the FPDU goes, then the stream ends (FIN).
 *   dup, reorder: TCP hides them; not applied.
 *   delay     (every byte) the stream's bytes wait in the QP's delay line
 *             (core/delay_line.h) for delay +- jitter before they go into
 *             the socket, in order: a long link's latency, not TCP's view
 *             of it (its round trip stays the real one).  What waits goes
 *             at once before a FIN or a Terminate; a reset discards it,
 *             as TCP's discards its send queue.
 *
 * The fates of a batch's FPDUs are drawn as they are cut (add_fpdu); a
 * stall, reset or truncation marks its FPDU, the batch ends there, and
 * txb_send stops at the mark until the fault is carried out. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "iwarp/iwarp.h"
#include "core/fault.h"

bool sr_iw_fault_before(struct sr_qp *qp, const struct sr_iw_txb *b)
{
	struct sr_fault_qp *fq = qp->faults;
	enum sr_fault_kind k;

	if (fq->iw.mark)
		return true;
	k = sr_fault_decide(qp, SR_FAULT_IWARP_KINDS, &fq->iw.aux);
	fq->iw.cur = (uint8_t)k;
	if (k == SR_FAULT_DROP || k == SR_FAULT_RESET || k == SR_FAULT_TRUNCATE) {
		fq->iw.mark = true;
		fq->iw.kind = (uint8_t)k;
		fq->iw.off = b->total;
		fq->iw.cut = 0;
	}
	return false;
}

/* Does any iovec of the batch point into the scratch buffer? */
static bool buf_in_use(const struct sr_iw_txb *b, const uint8_t *buf)
{
	for (int i = 0; i < b->niov; i++) {
		const uint8_t *p = b->iov[i].iov_base;

		if (p >= buf && p < buf + SR_FAULT_BUF)
			return true;
	}
	return false;
}

static void corrupt(struct sr_qp *qp, struct sr_iw_txb *b, struct sr_iw_fpdu_out *f, int first, uint64_t aux)
{
	uint64_t bits = (uint64_t)f->len * 8 - 8 * SR_MPA_LEN_BYTES;
	uint64_t pos = 8 * SR_MPA_LEN_BYTES + (aux % bits);
	size_t byte = (size_t)(pos / 8);
	uint8_t mask = (uint8_t)(1u << (pos % 8));
	uint8_t *buf;
	int v;

	for (v = first; v < b->niov && byte >= b->iov[v].iov_len; v++)
		byte -= b->iov[v].iov_len;
	if (v < b->niov) {
		uint8_t *p = (uint8_t *)b->iov[v].iov_base + byte;

		if (p >= (uint8_t *)f && p < (uint8_t *)(f + 1)) {
			*p ^= mask; /* the FPDU's own header, immediate data or trailer */
			return;
		}
		/* payload: application memory, never written; a copy goes instead */
		buf = sr_fault_buf(qp->faults);
		if (buf && !buf_in_use(b, buf) && b->iov[v].iov_len <= SR_FAULT_BUF) {
			sr_dma_begin(); /* the payload is read from registered memory */
			memcpy(buf, b->iov[v].iov_base, b->iov[v].iov_len);
			sr_dma_end();
			buf[byte] ^= mask;
			b->iov[v].iov_base = buf;
			f->rr_len = 0; /* a copy: nothing to look up again before a resumed send */
			return;
		}
	}
	/* no room for a copy: a bit of the CRC (the FPDU's last iovec ends
	 * with it), which the peer's check catches the same way */
	((uint8_t *)b->iov[b->niov - 1].iov_base)[b->iov[b->niov - 1].iov_len - 1] ^= mask;
}

void sr_iw_fault_built(struct sr_qp *qp, struct sr_iw_txb *b, struct sr_iw_fpdu_out *f, int first)
{
	struct sr_fault_qp *fq = qp->faults;

	if (fq->iw.cur == SR_FAULT_CORRUPT)
		corrupt(qp, b, f, first, fq->iw.aux);
	else if (fq->iw.cur == SR_FAULT_TRUNCATE)
		fq->iw.cut = 1 + (size_t)(fq->iw.aux % (f->len - 1)); /* at least a byte, never all */
	fq->iw.cur = SR_FAULT_PASS;
}

int sr_iw_fault_send(struct sr_qp *qp, size_t *left)
{
	struct sr_fault_qp *fq = qp->faults;
	struct sr_iw_qp *w = iqp(qp);
	size_t sent = w->txb.sent, stop;

	if (!fq->iw.mark)
		return 0;
	stop = fq->iw.off + (fq->iw.kind == SR_FAULT_TRUNCATE ? fq->iw.cut : 0);
	if (sent < stop) {
		if (*left > stop - sent)
			*left = stop - sent;
		return 0;
	}
	switch (fq->iw.kind) {
	case SR_FAULT_RESET: {
		/* the error path closes the socket: with a zero linger, a RST */
		struct linger l = { .l_onoff = 1, .l_linger = 0 };

		fq->iw.mark = false;
		setsockopt(w->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
		SR_DBG("iwarp QP %u: fault: resetting the connection", iw_qpn(qp));
		return -ECONNRESET;
	}
	case SR_FAULT_TRUNCATE:
		fq->iw.mark = false;
		sr_iw_fault_drain(qp, true);
		shutdown(w->fd, SHUT_WR);
		SR_DBG("iwarp QP %u: fault: stream ended %zu bytes into an FPDU", iw_qpn(qp), fq->iw.cut);
		return -EPIPE;
	default: /* SR_FAULT_DROP: a stall, ended by sr_iw_fault_timer */
		if (!fq->iw.stalling) {
			fq->iw.stalling = true;
			sr_fault_arm(qp, sr_now_ns() + (uint64_t)fq->dev->spec.rto_ms * 1000000ull);
		}
		return -ETIME;
	}
}

void sr_iw_fault_reset(struct sr_qp *qp)
{
	struct sr_fault_qp *fq = qp->faults;

	fq->iw.mark = fq->iw.stalling = fq->iw.delay_full = false;
	fq->iw.cur = SR_FAULT_PASS;
	fq->deadline = 0;
	sr_delay_clear(&fq->delay);
}

int sr_iw_fault_delay(struct sr_qp *qp, const struct iovec *iov, int n, size_t len)
{
	struct sr_fault_qp *fq = qp->faults;
	struct sr_delay_unit *u;
	uint32_t off = 0;
	bool first;

	u = sr_delay_push(&fq->delay, sr_fault_delay_due(qp, sr_now_ns()), (uint32_t)len, &first);
	if (!u) {
		/* a full line holds the stream back, as a full socket would */
		fq->iw.delay_full = true;
		return -ETIME;
	}
	sr_dma_begin(); /* the payload is read from registered memory */
	for (int i = 0; i < n; i++) {
		memcpy(u->data + off, iov[i].iov_base, iov[i].iov_len);
		off += (uint32_t)iov[i].iov_len;
	}
	sr_dma_end();
	if (first)
		sr_qp_timer_arm(qp, u->due);
	return 0;
}

/* Wait until fd takes more, or deadline; false at the deadline. */
static bool wait_writable(int fd, uint64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	uint64_t now = sr_now_ns();

	return now < deadline && poll(&p, 1, (int)((deadline - now) / 1000000 + 1)) > 0;
}

bool sr_iw_fault_drain(struct sr_qp *qp, bool block)
{
	struct sr_fault_qp *fq = qp->faults;
	struct sr_iw_qp *w = iqp(qp);
	uint64_t now = sr_now_ns(), deadline = now + 200000000ull;
	struct sr_delay_unit *u;

	if (w->fd < 0 || w->wr_shut) {
		sr_delay_clear(&fq->delay);
		return true;
	}
	while ((u = sr_delay_due(&fq->delay, block ? 0 : now))) {
		ssize_t s = send(w->fd, u->data + u->off, u->len - u->off, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (s < 0 && errno == EINTR)
			continue;
		if (s < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (block && wait_writable(w->fd, deadline))
				continue;
			if (!block)
				sr_iw_want_out(qp, true);
			return false;
		}
		if (s < 0) {
			/* the stream broke: the send path finds out */
			sr_delay_clear(&fq->delay);
			return true;
		}
		sr_stat_add(qp->stats, SR_STAT_SENT_BYTES, (uint64_t)s);
		u->off += (uint32_t)s;
		if (u->off == u->len)
			sr_delay_pop(&fq->delay);
	}
	return !fq->delay.head;
}

void sr_iw_fault_timer(struct sr_qp *qp, uint64_t now)
{
	struct sr_fault_qp *fq = qp->faults;
	bool resume = false;

	if (fq->deadline && now >= fq->deadline) {
		fq->deadline = 0;
		if (fq->iw.stalling) {
			fq->iw.stalling = fq->iw.mark = false;
			resume = true;
		}
	}
	if (sr_delay_next(&fq->delay) && sr_delay_next(&fq->delay) <= now) {
		sr_iw_fault_drain(qp, false);
		resume |= fq->iw.delay_full;
		fq->iw.delay_full = false;
	}
	if (resume)
		sr_iw_tx_progress(qp);
}
