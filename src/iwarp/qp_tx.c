/* Soft-iWARP send path (siw_qp_tx.c's role): the RTR message, Read
 * Responses (they go before new work requests) and SQ work requests are
 * cut into FPDUs -- header, payload gathered straight from registered
 * memory, pad, CRC32c -- and pushed with one non-blocking sendmsg per
 * batch.  The caller of ibv_post_send pushes what the socket takes; the
 * rest waits for EPOLLOUT and the progress thread.  As with siw, a
 * Send or Write completes once all of it is handed to TCP, a Read when
 * its response has arrived. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "core/guard.h"
#include "iwarp/iwarp.h"
#include "core/fault.h"

/* How long the error path waits for the socket to take what is left of
 * an FPDU and then the Terminate. */
#define SR_IW_TERM_WAIT_NS (200ull * 1000000ull)

static inline void put16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

void sr_iw_tx_reset(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);

	w->txb.n = w->txb.niov = 0;
	w->txb.total = w->txb.sent = 0;
	w->txb.acted = 0;
	w->txb.acted_bytes = 0;
	memset(&w->msg, 0, sizeof(w->msg));
	for (int q = 0; q < SR_DDP_NQN; q++)
		w->tx_msn[q] = 1; /* RFC 5041: every untagged queue's MSN starts at 1 */
	w->orq_head = w->orq_tail = 0;
	w->irq_head = w->irq_tail = w->irq_seg = 0;
	w->tx_err = false;
	if (w->in_epoll)
		sr_iw_want_out(qp, false);
	if (sr_faults_on(qp))
		sr_iw_fault_reset(qp);
}

/* A local error while preparing what to send: remembered, and handled
 * (Terminate, QP to ERR) once mr_lock is no longer held. */
static void tx_fail(struct sr_qp *qp, uint8_t layer, uint8_t etype, uint8_t ecode, uint32_t irq_idx)
{
	struct sr_iw_qp *w = iqp(qp);

	w->tx_err = true;
	w->tx_err_layer = layer;
	w->tx_err_etype = etype;
	w->tx_err_ecode = ecode;
	w->tx_err_irq = irq_idx;
}

/* An SQ work request we can't carry out: it completes in error, and the
 * stream ends with a local-catastrophic Terminate, as siw does. */
static void sq_wqe_fail(struct sr_qp *qp, struct sr_send_wqe *wqe, enum ibv_wc_status st)
{
	wqe->state = SR_WQE_DONE;
	wqe->status = st;
	tx_fail(qp, SR_TERM_LAYER_RDMAP, SR_TERM_RDMAP_CATASTROPHIC, SR_TERM_RDMAP_UNSPECIFIED, UINT32_MAX);
}

/* Pick the next message to cut: the initiator's RTR, a Read Response,
 * or the next SQ work request.  mr_lock held. */
static bool next_work(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_iw_txmsg *m = &w->msg;
	struct sr_sq *sq = &qp->sq;
	struct sr_send_wqe *wqe;
	bool se;

	if (w->rtr_wait || w->hush_until)
		return false; /* the responder says nothing before the initiator's RTR or first FPDU */
	memset(m, 0, sizeof(*m));
	if (w->rtr_to_send) {
		/* RFC 6581: a zero-length message of the negotiated kind, not a
		 * work request of the application's (siw's siw_qp_mpa_rts) */
		w->rtr_to_send = false;
		m->src = SR_IW_SRC_RTR;
		switch (w->rtr) {
		case SR_MPA_RTR_SEND:
			m->opcode = SR_RDMAP_SEND;
			m->msn = w->tx_msn[SR_DDP_QN_SEND]++;
			break;
		case SR_MPA_RTR_WRITE:
			m->opcode = SR_RDMAP_WRITE;
			m->stag = 1; /* never checked for zero length; siw sends 1 too */
			break;
		default: {
			struct sr_iw_orq *o = &w->orq[w->orq_tail++ & w->orq_mask];

			memset(o, 0, sizeof(*o));
			o->rtr = true;
			m->opcode = SR_RDMAP_READ_REQ;
			m->qn = SR_DDP_QN_READ_REQ;
			m->msn = w->tx_msn[SR_DDP_QN_READ_REQ]++;
			m->rreq.src_stag = 1;
			break;
		}
		}
		return true;
	}
	if (w->irq_seg != w->irq_tail) {
		struct sr_iw_irq *e = &w->irq[w->irq_seg & w->irq_mask];

		m->src = SR_IW_SRC_IRQ;
		m->wqe_idx = w->irq_seg++;
		m->opcode = SR_RDMAP_READ_RESP;
		m->stag = e->sink_stag;
		m->to = e->sink_to;
		m->len = e->size;
		return true;
	}
	if (qp->attr.qp_state != IBV_QPS_RTS || sq->cur == sq->head)
		return false; /* SQD: no new work requests */
	wqe = sr_sq_wqe(sq, sq->cur);
	if ((wqe->send_flags & IBV_SEND_FENCE) && w->orq_head != w->orq_tail)
		return false; /* fenced behind our outstanding Reads */
	se = wqe->send_flags & IBV_SEND_SOLICITED;
	switch (wqe->opcode) {
	case IBV_WR_SEND:
		m->opcode = se ? SR_RDMAP_SEND_SE : SR_RDMAP_SEND;
		m->msn = w->tx_msn[SR_DDP_QN_SEND]++;
		m->len = wqe->length;
		break;
	case IBV_WR_SEND_WITH_INV:
		m->opcode = se ? SR_RDMAP_SEND_SE_INV : SR_RDMAP_SEND_INV;
		m->msn = w->tx_msn[SR_DDP_QN_SEND]++;
		m->inv = wqe->imm_data; /* the rkey to invalidate, host order */
		m->len = wqe->length;
		break;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		m->opcode = SR_RDMAP_WRITE;
		m->stag = wqe->rkey;
		m->to = wqe->remote_addr;
		m->len = wqe->length;
		if (wqe->opcode == IBV_WR_RDMA_WRITE_WITH_IMM && !wqe->length) {
			/* nothing to write: just the RFC 7306 Immediate Data */
			m->phase = 1;
			m->opcode = se ? SR_RDMAP_IMM_SE : SR_RDMAP_IMM;
			m->msn = w->tx_msn[SR_DDP_QN_SEND]++;
			m->len = SR_RDMAP_IMM_LEN;
		}
		break;
	case IBV_WR_RDMA_READ: {
		struct sr_iw_orq *o;

		/* one sink buffer per Read Request, as siw (max_sge_rd 1) */
		if (wqe->num_sge > 1 || !w->orq_size) {
			sq->cur++;
			sq_wqe_fail(qp, wqe, IBV_WC_LOC_QP_OP_ERR);
			return false;
		}
		if (w->orq_tail - w->orq_head >= w->orq_size)
			return false; /* ORD reached: wait for a response */
		if (wqe->length && !sr_mr_lookup(qp->ctx, wqe->sge[0].lkey, false, iw_pd(qp), wqe->sge[0].addr,
						 wqe->length, IBV_ACCESS_LOCAL_WRITE)) {
			sq->cur++;
			sq_wqe_fail(qp, wqe, IBV_WC_LOC_PROT_ERR);
			return false;
		}
		o = &w->orq[w->orq_tail++ & w->orq_mask];
		memset(o, 0, sizeof(*o));
		o->wqe_idx = sq->cur;
		o->sink_stag = wqe->num_sge ? wqe->sge[0].lkey : 0;
		o->sink_to = wqe->num_sge ? wqe->sge[0].addr : 0;
		o->size = (uint32_t)wqe->length;
		m->opcode = SR_RDMAP_READ_REQ;
		m->msn = w->tx_msn[SR_DDP_QN_READ_REQ]++;
		m->rreq.sink_stag = o->sink_stag;
		m->rreq.sink_to = o->sink_to;
		m->rreq.size = o->size;
		m->rreq.src_stag = wqe->rkey;
		m->rreq.src_to = wqe->remote_addr;
		wqe->state = SR_WQE_PENDING;
		break;
	}
	default:
		/* SEND_WITH_IMM and atomics are refused at post time */
		sq->cur++;
		sq_wqe_fail(qp, wqe, IBV_WC_LOC_QP_OP_ERR);
		return false;
	}
	m->qn = sr_rdmap_op[m->opcode].qn;
	m->src = SR_IW_SRC_SQ;
	m->se = se;
	m->wqe_idx = sq->cur++;
	return true;
}

/* Cut the next FPDU of the current message into the batch.  Returns 1,
 * 0 when the batch is full, -1 on a local error (tx_err).  mr_lock held. */
static int add_fpdu(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_iw_txb *b = &w->txb;
	struct sr_iw_txmsg *m = &w->msg;
	struct sr_iw_fpdu_out *f;
	struct sr_iw_hdr h;
	uint64_t rem = m->len - m->off;
	uint32_t seg = rem > SR_IW_SEG_PAYLOAD ? SR_IW_SEG_PAYLOAD : (uint32_t)rem;
	bool last = m->off + seg == m->len;
	uint32_t hlen, ulen, pad, crc = 0;
	int first;

	if (b->n >= SR_IW_TXB_FPDUS || b->niov + SR_MAX_SGE + 2 > SR_IW_TXB_IOV || b->total >= SR_IW_TXB_BYTES)
		return 0;
	if (sr_faults_on(qp) && sr_iw_fault_before(qp, b))
		return 0;
	f = &b->f[b->n];
	f->rr_len = 0;
	f->pay_niov = 0;
	f->act = SR_IW_ACT_NONE;
	sr_iw_hdr_init(&h, m->opcode, last);
	if (h.tagged) {
		h.stag = m->stag;
		h.to = m->to + m->off;
	} else {
		h.qn = m->qn;
		h.msn = m->msn;
		h.mo = (uint32_t)m->off;
		if (sr_rdmap_op[m->opcode].inval)
			h.rsvdulp = m->inv;
	}
	if (m->opcode == SR_RDMAP_READ_REQ)
		h.rreq = m->rreq;
	hlen = sr_iw_hdr_build(f->hdr + SR_MPA_LEN_BYTES, &h);
	ulen = hlen + seg;
	put16(f->hdr, ulen);
	first = b->niov;
	b->iov[b->niov].iov_base = f->hdr;
	b->iov[b->niov++].iov_len = SR_MPA_LEN_BYTES + hlen;
	if (seg) {
		struct iovec *pv = &b->iov[b->niov];
		int npay = 0;

		if (m->src == SR_IW_SRC_SQ) {
			struct sr_send_wqe *wqe = sr_sq_wqe(&qp->sq, m->wqe_idx);

			if (m->opcode == SR_RDMAP_IMM || m->opcode == SR_RDMAP_IMM_SE) {
				/* RFC 7306 carries 8 bytes; verbs have 4 (network order) */
				memcpy(f->imm, &wqe->imm_data, 4);
				memset(f->imm + 4, 0, 4);
				pv[0].iov_base = f->imm;
				pv[0].iov_len = SR_RDMAP_IMM_LEN;
				npay = 1;
			} else if (wqe->inlined) {
				pv[0].iov_base = sr_wqe_inline(&qp->sq, wqe) + m->off;
				pv[0].iov_len = seg;
				npay = 1;
			} else {
				npay = sr_iw_sge_iov(qp, wqe->sge, wqe->num_sge, m->off, seg, 0, pv,
						     SR_IW_TXB_IOV - b->niov - 1);
				if (npay < 0) {
					/* siw: any SGE it cannot send from (no such
					 * STag, past its bounds) is LOC_QP_OP_ERR */
					m->src = SR_IW_SRC_NONE;
					sq_wqe_fail(qp, wqe, IBV_WC_LOC_QP_OP_ERR);
					return -1;
				}
			}
		} else if (m->src == SR_IW_SRC_IRQ) {
			struct sr_iw_irq *e = &w->irq[m->wqe_idx & w->irq_mask];
			enum sr_iw_memerr err;
			uint8_t *host = sr_iw_stag_lookup(qp, e->src_stag, e->src_to + m->off, seg,
							  IBV_ACCESS_REMOTE_READ, &err);

			if (host && !sr_probe_read(host, seg)) {
				host = NULL; /* unmapped by the application (core/guard.h) */
				err = SR_IW_MEM_BOUNDS;
			}
			if (!host) {
				/* checked when the request came; deregistered since */
				m->src = SR_IW_SRC_NONE;
				tx_fail(qp, SR_TERM_LAYER_RDMAP, SR_TERM_RDMAP_PROTECTION, sr_iw_memerr_rdmap(err),
					m->wqe_idx);
				return -1;
			}
			pv[0].iov_base = host;
			pv[0].iov_len = seg;
			npay = 1;
			f->rr_stag = e->src_stag;
			f->rr_to = e->src_to + m->off;
			f->rr_len = seg;
		}
		f->pay_iov = b->niov;
		f->pay_niov = npay;
		b->niov += npay;
	}
	pad = sr_mpa_pad(ulen);
	memset(f->trl, 0, sizeof(f->trl));
	if (w->crc) {
		uint32_t c = ~0u;

		sr_dma_begin(); /* the payload is read from registered memory */
		for (int i = first; i < b->niov; i++)
			c = sr_mpa_crc_update(c, b->iov[i].iov_base, b->iov[i].iov_len);
		sr_dma_end();
		c = sr_mpa_crc_update(c, f->trl, pad);
		crc = ~c;
	}
	sr_mpa_crc_store(f->trl + pad, crc);
	b->iov[b->niov].iov_base = f->trl;
	b->iov[b->niov++].iov_len = pad + SR_MPA_CRC_BYTES;
	f->len = sr_mpa_fpdu_len(ulen);
	if (sr_faults_on(qp))
		sr_iw_fault_built(qp, b, f, first);
	b->total += f->len;
	b->n++;
	w->stat_fpdus_tx++;
	sr_stat_add(qp->stats, SR_STAT_SENT_PKTS, 1);
	if (w->nudging && !w->nudge_deadline) {
		w->nudge_deadline = sr_now_ns() + SR_IW_NUDGE_FIRST_NS;
		sr_qp_timer_arm(qp, w->nudge_deadline);
	}
	m->off += seg;
	if (!last)
		return 1;
	switch (m->src) {
	case SR_IW_SRC_SQ: {
		struct sr_send_wqe *wqe = sr_sq_wqe(&qp->sq, m->wqe_idx);

		if (wqe->opcode == IBV_WR_RDMA_WRITE_WITH_IMM && m->phase == 0) {
			/* the Write is out; the Immediate Data follows */
			m->phase = 1;
			m->opcode = m->se ? SR_RDMAP_IMM_SE : SR_RDMAP_IMM;
			m->qn = SR_DDP_QN_SEND;
			m->msn = w->tx_msn[SR_DDP_QN_SEND]++;
			m->len = SR_RDMAP_IMM_LEN;
			m->off = 0;
			return 1;
		}
		if (m->opcode != SR_RDMAP_READ_REQ) {
			f->act = SR_IW_ACT_SQ_DONE;
			f->act_arg = m->wqe_idx;
		}
		break;
	}
	case SR_IW_SRC_IRQ:
		f->act = SR_IW_ACT_IRQ_POP;
		break;
	default:
		break;
	}
	m->src = SR_IW_SRC_NONE;
	return 1;
}

/* next_work, or when there is none a nudge that is due (a segment of
 * any kind does its work). */
static bool next_msg(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_iw_txmsg *m = &w->msg;

	if (next_work(qp)) {
		w->nudge_to_send = false;
		return true;
	}
	if (!w->nudge_to_send || w->rtr_to_send || qp->attr.qp_state != IBV_QPS_RTS)
		return false;
	w->nudge_to_send = false;
	memset(m, 0, sizeof(*m));
	m->src = SR_IW_SRC_NUDGE;
	m->opcode = SR_RDMAP_WRITE;
	m->stag = 1; /* as the Write RTR's: never checked for zero length */
	return true;
}

void sr_iw_nudge_timer(struct sr_qp *qp, uint64_t now)
{
	struct sr_iw_qp *w = iqp(qp);

	if (!w->nudging || !w->nudge_deadline || now < w->nudge_deadline)
		return;
	w->nudge_to_send = true;
	if (++w->nudges < SR_IW_NUDGE_MAX) {
		w->nudge_deadline = now + (SR_IW_NUDGE_FIRST_NS << w->nudges);
	} else {
		w->nudging = false;
		w->nudge_deadline = 0;
	}
	sr_iw_tx_progress(qp);
}

void sr_iw_hush_end(struct sr_qp *qp)
{
	iqp(qp)->hush_until = 0;
}

void sr_iw_nudge_end(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);

	w->nudging = false;
	w->nudge_deadline = 0;
	w->nudge_to_send = w->stat_fpdus_tx > 0;
}

/* Fill the batch.  Returns whether anything was added.  mr_lock held. */
static bool txb_build(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	bool any = false;

	while (!w->tx_err) {
		if (w->msg.src == SR_IW_SRC_NONE && !next_msg(qp))
			break;
		if (add_fpdu(qp) <= 0)
			break;
		any = true;
	}
	return any;
}

/* The Read Response payload of a partly sent batch must still be
 * registered memory before we read it again.  mr_lock held. */
static bool txb_revalidate(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_iw_txb *b = &w->txb;
	size_t end = 0;

	for (int k = 0; k < b->n; k++) {
		struct sr_iw_fpdu_out *f = &b->f[k];
		enum sr_iw_memerr err;

		end += f->len;
		if (end <= b->sent || !f->rr_len)
			continue;
		if (sr_iw_stag_lookup(qp, f->rr_stag, f->rr_to, f->rr_len, IBV_ACCESS_REMOTE_READ, &err) !=
		    b->iov[f->pay_iov].iov_base)
			return false;
	}
	return true;
}

/* sendmsg what is left of the batch.  0 when all of it is gone, -EAGAIN
 * when the socket is full, else -errno. */
static int txb_send(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_iw_txb *b = &w->txb;
	struct iovec iov[SR_IW_TXB_IOV];
	struct msghdr msg;
	size_t skip = b->sent, left = b->total - b->sent, want;
	int i = 0, n = 0;

	if (sr_faults_on(qp)) {
		int r = sr_iw_fault_send(qp, &left);

		if (r)
			return r;
	}
	want = left;
	while (i < b->niov && skip >= b->iov[i].iov_len) {
		skip -= b->iov[i].iov_len;
		i++;
	}
	for (; i < b->niov && left; i++) {
		iov[n] = b->iov[i];
		if (skip) {
			iov[n].iov_base = (uint8_t *)iov[n].iov_base + skip;
			iov[n].iov_len -= skip;
			skip = 0;
		}
		if (iov[n].iov_len > left)
			iov[n].iov_len = left;
		left -= iov[n].iov_len;
		n++;
	}
	if (sr_faults_on(qp) && sr_fault_delays(qp)) {
		int r = sr_iw_fault_delay(qp, iov, n, want);

		if (r)
			return r;
		b->sent += want;
		return b->sent == b->total ? 0 : -EAGAIN;
	}
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = iov;
	msg.msg_iovlen = (size_t)n;
	for (;;) {
		ssize_t s;

		sr_dma_begin(); /* gathers straight from registered memory */
		s = sendmsg(w->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
		sr_dma_end();

		if (s < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return -EAGAIN;
			return -errno;
		}
		b->sent += (size_t)s;
		sr_stat_add(qp->stats, SR_STAT_SENT_BYTES, (uint64_t)s);
		return b->sent == b->total ? 0 : -EAGAIN;
	}
}

/* Complete what the FPDUs now wholly in TCP's hands finish; once the
 * whole batch is, start a new one. */
static void txb_done(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_iw_txb *b = &w->txb;
	bool sq = false;

	for (; b->acted < b->n && b->acted_bytes + b->f[b->acted].len <= b->sent; b->acted++) {
		struct sr_iw_fpdu_out *f = &b->f[b->acted];

		b->acted_bytes += f->len;
		if (f->act == SR_IW_ACT_SQ_DONE) {
			struct sr_send_wqe *wqe = sr_sq_wqe(&qp->sq, f->act_arg);

			wqe->state = SR_WQE_DONE;
			sq = true;
		} else if (f->act == SR_IW_ACT_IRQ_POP) {
			w->irq_head++;
		}
	}
	if (b->sent == b->total) {
		b->n = b->niov = 0;
		b->total = b->sent = 0;
		b->acted = 0;
		b->acted_bytes = 0;
	}
	if (sq)
		sr_sq_complete(qp);
}

static void tx_error(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	const uint8_t *bad = NULL;
	uint32_t bad_len = 0;
	int ev = IBV_EVENT_QP_FATAL;

	w->tx_err = false;
	if (w->tx_err_irq != UINT32_MAX && w->irq_size) {
		/* the Read Request we couldn't answer goes back in the Terminate */
		bad = w->irq[w->tx_err_irq & w->irq_mask].raw;
		bad_len = SR_DDP_UNTAGGED_HDR + SR_RDMAP_RREQ_LEN;
		ev = IBV_EVENT_QP_ACCESS_ERR;
	}
	sr_iw_term_local(qp, w->tx_err_layer, w->tx_err_etype, w->tx_err_ecode, bad, bad_len, bad_len, ev);
}

void sr_iw_tx_progress(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_iw_txb *b;
	enum ibv_qp_state st = qp->attr.qp_state;
	int round, r = 0;

	if (!w || w->fd < 0 || !w->connected || w->wr_shut || (st != IBV_QPS_RTS && st != IBV_QPS_SQD))
		return;
	if (sr_faults_on(qp))
		sr_iw_fault_drain(qp, false); /* what the delay fault holds that is due */
	b = &w->txb;
	/* nothing to send (the common case of a poller spinning on its CQ):
	 * no lock, no system call */
	if (b->sent == b->total && w->msg.src == SR_IW_SRC_NONE && w->irq_seg == w->irq_tail && !w->rtr_to_send &&
	    !w->nudge_to_send && !w->tx_err && (qp->sq.cur == qp->sq.head || st != IBV_QPS_RTS)) {
		sr_iw_want_out(qp, false);
		return;
	}
	pthread_rwlock_rdlock(&qp->ctx->mr_lock);
	for (round = 0; round < 16; round++) {
		if (b->sent < b->total) {
			if (b->sent && !txb_revalidate(qp)) {
				r = -EFAULT;
				break;
			}
			r = txb_send(qp);
			txb_done(qp);
			if (r)
				break;
		}
		if (w->tx_err || !txb_build(qp))
			break;
	}
	pthread_rwlock_unlock(&qp->ctx->mr_lock);
	if (r == -EAGAIN || r == -ETIME) {
		/* -ETIME: an injected stall, which its timer ends */
		sr_iw_want_out(qp, r == -EAGAIN);
		return;
	}
	if (r) {
		/* the stream broke under us (reset by the peer), or the memory of
		 * a half-sent Read Response went away: nothing more can go */
		SR_DBG("iwarp QP %u: send failed: %s", iw_qpn(qp), strerror(-r));
		sr_iw_conn_end(qp, SR_IW_CLOSE_RESET);
		sr_iw_qp_error(qp, IBV_EVENT_QP_FATAL);
		return;
	}
	if (w->tx_err) {
		tx_error(qp);
		return;
	}
	/* out of rounds with work left: come back when the socket says so */
	sr_iw_want_out(qp, round == 16);
}

static int wait_out(int fd, uint64_t deadline)
{
	uint64_t now = sr_now_ns();
	struct pollfd p = { .fd = fd, .events = POLLOUT };

	if (now >= deadline)
		return -ETIMEDOUT;
	if (poll(&p, 1, (int)((deadline - now) / 1000000 + 1)) <= 0)
		return -ETIMEDOUT;
	return 0;
}

void sr_iw_tx_flush_term(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_iw_txb *b = &w->txb;
	uint64_t deadline = sr_now_ns() + SR_IW_TERM_WAIT_NS;
	uint8_t buf[SR_MPA_LEN_BYTES + SR_IW_MAX_HDR + 3 + SR_MPA_CRC_BYTES];
	uint32_t hlen, pad, len;
	size_t off = 0;

	if (w->fd < 0 || w->wr_shut || !w->connected)
		return;
	if (b->sent < b->total) {
		/* the peer's framing must stay whole: finish the batch first */
		int r;

		pthread_rwlock_rdlock(&qp->ctx->mr_lock);
		if (b->sent && !txb_revalidate(qp)) {
			r = -EFAULT;
		} else {
			while ((r = txb_send(qp)) == -EAGAIN)
				if (wait_out(w->fd, deadline))
					break;
		}
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
		if (r)
			return; /* an FPDU stays cut short: no Terminate can follow it */
		txb_done(qp);
	}
	if (sr_faults_on(qp))
		sr_iw_fault_drain(qp, true); /* what the delay fault holds goes first */
	hlen = sr_iw_hdr_build(buf + SR_MPA_LEN_BYTES, &w->term);
	put16(buf, hlen);
	pad = sr_mpa_pad(hlen);
	memset(buf + SR_MPA_LEN_BYTES + hlen, 0, pad);
	sr_mpa_crc_store(buf + SR_MPA_LEN_BYTES + hlen + pad,
			 w->crc ? ~sr_mpa_crc_update(~0u, buf, SR_MPA_LEN_BYTES + hlen + pad) : 0);
	len = sr_mpa_fpdu_len(hlen);
	while (off < len) {
		ssize_t s = send(w->fd, buf + off, len - off, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (s > 0) {
			off += (size_t)s;
		} else if (s < 0 && errno == EINTR) {
			continue;
		} else if (s < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (wait_out(w->fd, deadline))
				break;
		} else {
			break;
		}
	}
	if (off == len) {
		w->term_sent = true;
		w->stat_fpdus_tx++;
	}
}
