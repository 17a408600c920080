/* Soft-iWARP receive path (siw_qp_rx.c's role): FPDUs are parsed out of
 * the TCP stream and each DDP segment is checked before a byte of it is
 * placed -- STag, bounds and access for tagged segments, queue, MSN and
 * MO for untagged ones -- then its payload is read with readv straight
 * into where it belongs: the target region of a Write or Read Response,
 * the buffers of the receive WQE for a Send.  The same readv takes the
 * pad and CRC and the next FPDU's first 16 bytes, so a stream of FPDUs
 * costs about one system call each; in a run of small FPDUs it takes up
 * to 64 KiB of the stream instead, and the FPDUs in there are checked
 * and copied out one by one (SR_IW_LA_BIG).  Anything wrong is answered with a
 * Terminate (term.c) and the QP goes to ERR; nothing is ever written
 * outside a checked range. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "core/guard.h"
#include "iwarp/iwarp.h"

#define SR_IW_SCRATCH 4096

void sr_iw_rx_reset(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_iw_rx *rx = &w->rx;
	struct sr_recv_wqe *rwqe = rx->rwqe;

	memset(rx, 0, sizeof(*rx));
	rx->rwqe = rwqe;
	rx->state = SR_IW_RX_HDR;
	for (int q = 0; q < SR_DDP_NQN; q++)
		rx->msn[q] = 1;
}

static void ddp_tagged_err(struct sr_qp *qp, uint8_t ecode)
{
	sr_iw_term_rx_error(qp, SR_TERM_LAYER_DDP, SR_TERM_DDP_TAGGED, ecode, IBV_EVENT_QP_ACCESS_ERR);
}

static void ddp_untagged_err(struct sr_qp *qp, uint8_t ecode)
{
	sr_iw_term_rx_error(qp, SR_TERM_LAYER_DDP, SR_TERM_DDP_UNTAGGED, ecode, IBV_EVENT_QP_FATAL);
}

static void recv_complete(struct sr_qp *qp, enum ibv_wc_status st, enum ibv_wc_opcode op, uint32_t len, bool se)
{
	struct sr_iw_rx *rx = &iqp(qp)->rx;
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = rx->rwqe->wr_id;
	wc.status = st;
	wc.opcode = op;
	wc.byte_len = len;
	wc.qp_num = iw_qpn(qp);
	if (st == IBV_WC_SUCCESS) {
		if (op == IBV_WC_RECV_RDMA_WITH_IMM) {
			wc.wc_flags |= IBV_WC_WITH_IMM;
			memcpy(&wc.imm_data, rx->imm, 4);
		} else if (sr_rdmap_op[rx->h.opcode].inval) {
			wc.wc_flags |= IBV_WC_WITH_INV;
			wc.invalidated_rkey = rx->h.rsvdulp;
		}
	}
	rx->rwqe_valid = false;
	sr_cq_push(qp->rcq, &wc, se);
}

/* The look-ahead's buffer. */
static uint8_t *la_buf(struct sr_iw_qp *w)
{
	return w->rx.la_in_big ? w->rx_big : w->rx.la;
}

/* An empty look-ahead is to be refilled: the buffer and how much to ask
 * for (SR_IW_LA_BIG after a small FPDU, if that buffer can be had). */
static uint32_t la_refill(struct sr_iw_qp *w)
{
	struct sr_iw_rx *rx = &w->rx;

	rx->la_off = 0;
	rx->la_in_big = false;
	if (!rx->la_want_big)
		return SR_IW_LA;
	if (!w->rx_big && !(w->rx_big = malloc(SR_IW_LA_BIG)))
		return SR_IW_LA;
	rx->la_in_big = true;
	return SR_IW_LA_BIG;
}

/* Takes up to len bytes of the look-ahead. */
static const uint8_t *la_take(struct sr_iw_rx *rx, const uint8_t *la, size_t len, size_t *took)
{
	size_t k = rx->la_len < len ? rx->la_len : len;
	const uint8_t *p = la + rx->la_off;

	rx->la_off += (uint32_t)k;
	rx->la_len -= (uint32_t)k;
	if (!rx->la_len)
		rx->la_off = 0;
	*took = k;
	return p;
}

/* Read into buf: first what the look-ahead holds, then the socket (by
 * way of a refilled look-ahead after a small FPDU).  Returns bytes, 0 at
 * end of stream, -EAGAIN, or -errno. */
static ssize_t rx_read(struct sr_iw_qp *w, uint8_t *buf, size_t len)
{
	struct sr_iw_rx *rx = &w->rx;
	size_t k;
	ssize_t n;

	if (rx->la_len) {
		const uint8_t *p = la_take(rx, la_buf(w), len, &k);
		memcpy(buf, p, k);
		return (ssize_t)k;
	}
	if (rx->sock_dry)
		return -EAGAIN;
	/* only the large look-ahead is refilled here: the small one never
	 * takes more than the header asks for */
	bool refill = la_refill(w) > len && rx->la_in_big;
	uint8_t *dst = refill ? la_buf(w) : buf;
	size_t ask = refill ? SR_IW_LA_BIG : len;
	do {
		n = recv(w->fd, dst, ask, MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n > 0 && (size_t)n < ask)
		rx->sock_dry = true;
	if (n > 0)
		sr_rx_account((size_t)n);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (dst == buf || !n)
		return n;
	rx->la_len = (uint32_t)n;
	const uint8_t *p = la_take(rx, dst, len, &k);
	memcpy(buf, p, k);
	return (ssize_t)k;
}

/* The stream ended (n == 0) or broke (n < 0) while reading. */
static void rx_eof(struct sr_qp *qp, ssize_t n, bool mid_fpdu)
{
	struct sr_iw_qp *w = iqp(qp);

	if (n == 0 && !mid_fpdu) {
		/* the peer closed between two FPDUs: an orderly disconnect */
		SR_DBG("iwarp QP %u: peer closed the stream", iw_qpn(qp));
		sr_iw_conn_end(qp, SR_IW_CLOSE_PEER);
		sr_iw_qp_error(qp, -1);
		return;
	}
	if (n == 0) {
		/* cut off in the middle of an FPDU: say so if we still can */
		sr_iw_term_rx_error(qp, SR_TERM_LAYER_LLP, SR_TERM_LLP_MPA, SR_TERM_MPA_TCP_LOST, IBV_EVENT_QP_FATAL);
		return;
	}
	SR_DBG("iwarp QP %u: receive failed: %s", iw_qpn(qp), strerror((int)-n));
	w->rx.state = SR_IW_RX_STOP;
	sr_iw_conn_end(qp, SR_IW_CLOSE_RESET);
	sr_iw_qp_error(qp, IBV_EVENT_QP_FATAL);
}

/* The responder's first FPDU must be the negotiated RTR message. */
static bool rtr_match(struct sr_iw_qp *w, const struct sr_iw_hdr *h, uint32_t pay_len)
{
	switch (w->rtr) {
	case SR_MPA_RTR_SEND:
		return h->opcode == SR_RDMAP_SEND && !pay_len && h->last && h->mo == 0;
	case SR_MPA_RTR_WRITE:
		return h->opcode == SR_RDMAP_WRITE && !pay_len && h->last;
	case SR_MPA_RTR_READ:
		return h->opcode == SR_RDMAP_READ_REQ && h->rreq.size == 0;
	default:
		return false;
	}
}

/* A complete header is in rx->h: check it against our state and decide
 * where the payload goes.  Returns 1 to go on, 0 when a Send waits for a
 * receive (the header stays read; it is checked again), -1 when the QP
 * has gone to ERR. */
static int rx_start(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_iw_rx *rx = &w->rx;
	struct sr_iw_hdr *h = &rx->h;
	const struct sr_rdmap_opinfo *oi = &sr_rdmap_op[h->opcode];
	bool rtr = false;
	enum sr_iw_memerr err;

	rx->dst = SR_IW_DST_NONE;
	rx->tail_len = 0;
	if (w->rtr_wait) {
		if (!rtr_match(w, h, rx->pay_len)) {
			sr_iw_term_rx_error(qp, SR_TERM_LAYER_LLP, SR_TERM_LLP_MPA, SR_TERM_MPA_NO_MATCHING_RTR,
					    IBV_EVENT_QP_FATAL);
			return -1;
		}
		w->rtr_wait = false;
		rtr = true;
	}
	if (!h->tagged && h->opcode != SR_RDMAP_TERMINATE) {
		/* the untagged buffer model: queue, MSN, MO */
		uint32_t q = oi->qn;

		if (h->qn != q) {
			ddp_untagged_err(qp, SR_TERM_DDP_U_INV_QN);
			return -1;
		}
		if (h->msn != rx->msn[q]) {
			ddp_untagged_err(qp, SR_TERM_DDP_U_MSN_RANGE);
			return -1;
		}
		if (h->mo != (q == SR_DDP_QN_SEND && rx->in_send ? rx->send_mo : 0)) {
			ddp_untagged_err(qp, SR_TERM_DDP_U_INV_MO);
			return -1;
		}
	}
	switch (h->opcode) {
	case SR_RDMAP_WRITE:
		if (rx->in_write) {
			/* the next segment of the same message (siw's checks) */
			if (h->stag != rx->w_stag) {
				ddp_tagged_err(qp, SR_TERM_DDP_T_INV_STAG);
				return -1;
			}
			if (h->to != rx->w_to + rx->w_len) {
				ddp_tagged_err(qp, SR_TERM_DDP_T_BASE_BOUNDS);
				return -1;
			}
		} else {
			rx->in_write = true;
			rx->w_stag = h->stag;
			rx->w_to = h->to;
			rx->w_len = 0;
		}
		if (rx->pay_len && !rtr) {
			/* the whole segment must fit, before any of it is placed */
			pthread_rwlock_rdlock(&qp->ctx->mr_lock);
			bool ok = sr_iw_stag_lookup(qp, h->stag, h->to, rx->pay_len, IBV_ACCESS_REMOTE_WRITE, &err);
			pthread_rwlock_unlock(&qp->ctx->mr_lock);
			if (!ok) {
				ddp_tagged_err(qp, sr_iw_memerr_ddp(err));
				return -1;
			}
			rx->dst = SR_IW_DST_WRITE;
			rx->dst_base = h->to;
			if (w->crc)
				rx->tail_len = rx->pay_len < SR_IW_TAIL ? rx->pay_len : SR_IW_TAIL;
		}
		return 1;
	case SR_RDMAP_READ_RESP: {
		struct sr_iw_orq *o;

		if (w->orq_head == w->orq_tail) {
			/* no Read outstanding: siw calls this DDP catastrophic */
			sr_iw_term_rx_error(qp, SR_TERM_LAYER_DDP, SR_TERM_DDP_CATASTROPHIC, 0, IBV_EVENT_QP_FATAL);
			return -1;
		}
		o = &w->orq[w->orq_head & w->orq_mask];
		if (h->stag != o->sink_stag) {
			ddp_tagged_err(qp, SR_TERM_DDP_T_INV_STAG);
			return -1;
		}
		if (h->to != o->sink_to + o->done || rx->pay_len > o->size - o->done ||
		    (h->last && o->done + rx->pay_len != o->size)) {
			ddp_tagged_err(qp, SR_TERM_DDP_T_BASE_BOUNDS);
			return -1;
		}
		rx->in_rresp = !h->last;
		if (rx->pay_len) {
			struct sr_send_wqe *wqe = sr_sq_wqe(&qp->sq, o->wqe_idx);

			pthread_rwlock_rdlock(&qp->ctx->mr_lock);
			bool ok = sr_iw_stag_lookup(qp, o->sink_stag, h->to, rx->pay_len, IBV_ACCESS_LOCAL_WRITE, &err);
			pthread_rwlock_unlock(&qp->ctx->mr_lock);
			if (!ok) {
				wqe->state = SR_WQE_DONE;
				wqe->status = IBV_WC_LOC_PROT_ERR;
				ddp_tagged_err(qp, sr_iw_memerr_ddp(err));
				return -1;
			}
			rx->dst = SR_IW_DST_RRESP;
			rx->dst_base = h->to;
		}
		return 1;
	}
	case SR_RDMAP_SEND:
	case SR_RDMAP_SEND_INV:
	case SR_RDMAP_SEND_SE:
	case SR_RDMAP_SEND_SE_INV:
	case SR_RDMAP_IMM:
	case SR_RDMAP_IMM_SE: {
		bool imm = h->opcode == SR_RDMAP_IMM || h->opcode == SR_RDMAP_IMM_SE;

		if (rtr) {
			/* the zero-length RTR Send takes no receive WQE */
			rx->dst = SR_IW_DST_NONE;
			return 1;
		}
		if (imm && (!h->last || h->mo || rx->pay_len != SR_RDMAP_IMM_LEN)) {
			sr_iw_term_rx_error(qp, SR_TERM_LAYER_RDMAP, SR_TERM_RDMAP_OPERATION, SR_TERM_RDMAP_UNSPECIFIED,
					    IBV_EVENT_QP_FATAL);
			return -1;
		}
		if (!rx->in_send) {
			if (!sr_rq_take(qp, rx->rwqe)) {
				if (sr_iw_rx_hold(qp) == 0)
					return 0;
				ddp_untagged_err(qp, SR_TERM_DDP_U_NO_BUF);
				return -1;
			}
			sr_iw_rx_got_buf(qp);
			rx->rwqe_valid = true;
			rx->in_send = true;
			rx->send_mo = 0;
		}
		if (imm) {
			rx->dst = SR_IW_DST_IMM;
			return 1;
		}
		if ((uint64_t)rx->send_mo + rx->pay_len > rx->rwqe->length) {
			/* RFC 5041's code for it (siw reports "no buffer") */
			recv_complete(qp, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, rx->send_mo, false);
			ddp_untagged_err(qp, SR_TERM_DDP_U_TOO_LONG);
			return -1;
		}
		rx->dst = rx->pay_len ? SR_IW_DST_RECV : SR_IW_DST_NONE;
		rx->dst_base = rx->send_mo;
		return 1;
	}
	case SR_RDMAP_READ_REQ: {
		struct sr_iw_irq *e;

		if (!h->last || rx->pay_len) {
			sr_iw_term_rx_error(qp, SR_TERM_LAYER_RDMAP, SR_TERM_RDMAP_OPERATION, SR_TERM_RDMAP_UNSPECIFIED,
					    IBV_EVENT_QP_FATAL);
			return -1;
		}
		if (w->irq_tail - w->irq_head >= w->irq_size) {
			/* more Reads than the IRD we agreed to: siw's answer */
			sr_iw_term_rx_error(qp, SR_TERM_LAYER_RDMAP, SR_TERM_RDMAP_OPERATION,
					    SR_TERM_RDMAP_CATASTROPHIC_STREAM, IBV_EVENT_QP_FATAL);
			return -1;
		}
		if (h->rreq.size && !rtr) {
			pthread_rwlock_rdlock(&qp->ctx->mr_lock);
			bool ok = sr_iw_stag_lookup(qp, h->rreq.src_stag, h->rreq.src_to, h->rreq.size,
						    IBV_ACCESS_REMOTE_READ, &err);
			pthread_rwlock_unlock(&qp->ctx->mr_lock);
			if (!ok) {
				sr_iw_term_rx_error(qp, SR_TERM_LAYER_RDMAP, SR_TERM_RDMAP_PROTECTION,
						    sr_iw_memerr_rdmap(err), IBV_EVENT_QP_ACCESS_ERR);
				return -1;
			}
		}
		e = &w->irq[w->irq_tail++ & w->irq_mask];
		e->sink_stag = h->rreq.sink_stag;
		e->sink_to = h->rreq.sink_to;
		e->size = h->rreq.size;
		e->src_stag = h->rreq.src_stag;
		e->src_to = h->rreq.src_to;
		memcpy(e->raw, rx->hbuf + SR_MPA_LEN_BYTES, sizeof(e->raw));
		rx->msn[SR_DDP_QN_READ_REQ]++;
		return 1;
	}
	case SR_RDMAP_TERMINATE:
		sr_iw_term_received(qp, h);
		return -1;
	default:
		/* RFC 7306 atomics: not offered (the device says ATOMIC_NONE) */
		sr_iw_term_rx_error(qp, SR_TERM_LAYER_RDMAP, SR_TERM_RDMAP_OPERATION, SR_TERM_RDMAP_OPCODE,
				    IBV_EVENT_QP_FATAL);
		return -1;
	}
}

/* Read the current FPDU's headers.  1: done and checked, 0: wait for
 * more, -1: the QP went to ERR. */
static int rx_header(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_iw_rx *rx = &w->rx;
	bool known = rx->hneed != 0;
	int r;

	for (;;) {
		uint32_t want;
		ssize_t n;

		if (!known && rx->hhave >= 4) {
			uint32_t need;

			rx->ulpdu_len = (uint32_t)rx->hbuf[0] << 8 | rx->hbuf[1];
			need = sr_iw_hdr_need(rx->hbuf + 2, rx->ulpdu_len);
			if (!need)
				break; /* a version or opcode we don't speak: parse says which */
			if (rx->ulpdu_len < need || ((rx->hbuf[3] & 0x0f) == SR_RDMAP_TERMINATE &&
						     rx->ulpdu_len < SR_DDP_UNTAGGED_HDR + SR_RDMAP_TERM_CTRL_LEN)) {
				/* the ULPDU can't even hold its own header: framing */
				sr_iw_term_rx_error(qp, SR_TERM_LAYER_LLP, SR_TERM_LLP_MPA, SR_TERM_MPA_FPDU,
						    IBV_EVENT_QP_FATAL);
				return -1;
			}
			rx->hneed = SR_MPA_LEN_BYTES + need;
			known = true;
		}
		if (known && rx->hhave >= rx->hneed)
			break;
		/* until the length is known read no more than the smallest
		 * header, which no valid FPDU's payload begins before */
		want = (known ? rx->hneed : SR_IW_LA) - rx->hhave;
		n = rx_read(w, rx->hbuf + rx->hhave, want);
		if (n == -EAGAIN)
			return 0;
		if (n <= 0) {
			rx_eof(qp, n, rx->hhave > 0);
			return -1;
		}
		rx->hhave += (uint32_t)n;
	}
	r = sr_iw_hdr_parse(&rx->h, rx->hbuf + SR_MPA_LEN_BYTES, rx->hhave - SR_MPA_LEN_BYTES, rx->ulpdu_len);
	switch (r) {
	case SR_IW_EDDP_VERSION:
		sr_iw_term_rx_error(qp, SR_TERM_LAYER_DDP,
				    (rx->hbuf[2] & SR_DDP_FLAG_TAGGED) ? SR_TERM_DDP_TAGGED : SR_TERM_DDP_UNTAGGED,
				    (rx->hbuf[2] & SR_DDP_FLAG_TAGGED) ? SR_TERM_DDP_T_VERSION : SR_TERM_DDP_U_VERSION,
				    IBV_EVENT_QP_FATAL);
		return -1;
	case SR_IW_ERDMAP_VERSION:
		sr_iw_term_rx_error(qp, SR_TERM_LAYER_RDMAP, SR_TERM_RDMAP_OPERATION, SR_TERM_RDMAP_VERSION,
				    IBV_EVENT_QP_FATAL);
		return -1;
	case SR_IW_EOPCODE:
		sr_iw_term_rx_error(qp, SR_TERM_LAYER_RDMAP, SR_TERM_RDMAP_OPERATION, SR_TERM_RDMAP_OPCODE,
				    IBV_EVENT_QP_FATAL);
		return -1;
	case SR_IW_ETERM:
		/* a Terminate whose optional parts don't add up: still the end */
		rx->h.opcode = SR_RDMAP_TERMINATE;
		sr_iw_term_received(qp, &rx->h);
		return -1;
	default:
		break;
	}
	if (r < 0) {
		sr_iw_term_rx_error(qp, SR_TERM_LAYER_LLP, SR_TERM_LLP_MPA, SR_TERM_MPA_FPDU, IBV_EVENT_QP_FATAL);
		return -1;
	}
	/* two small FPDUs in a row: a large message's short last segment
	 * ([60 KiB, 4 KiB] for 64 KiB Writes) is not a run of small ones */
	rx->small_run = rx->ulpdu_len <= SR_IW_LA_BIG_MAX_PAY ? rx->small_run + 1 : 0;
	rx->la_want_big = rx->small_run >= 2;
	/* what of the ULPDU is still to read (a Terminate's header read may
	 * have taken all of it) */
	rx->pay_len = rx->ulpdu_len + SR_MPA_LEN_BYTES - rx->hhave;
	rx->pay_done = 0;
	rx->trl_have = 0;
	rx->trl_need = sr_mpa_pad(rx->ulpdu_len) + SR_MPA_CRC_BYTES;
	if (w->crc)
		rx->crc = sr_mpa_crc_update(~0u, rx->hbuf, rx->hhave);
	r = rx_start(qp);
	if (r <= 0)
		return r;
	rx->state = SR_IW_RX_PAYLOAD;
	return 1;
}

/* A Send with Invalidate has arrived whole: invalidate the STag it names,
 * as siw does (a user MR's too, which stays registered but answers no
 * more).  An STag that is not there (or of another PD) completes the
 * receive with REM_INV_REQ_ERR and is answered with siw's Terminate:
 * RDMAP, remote operation (protection) error, "cannot invalidate".
 * Returns false when the stream ended so. */
static bool rx_invalidate(struct sr_qp *qp)
{
	struct sr_iw_rx *rx = &iqp(qp)->rx;
	int err = sr_mr_invalidate(qp->ctx, rx->h.rsvdulp, iw_pd(qp));

	if (!err)
		return true;
	recv_complete(qp, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV, rx->send_mo, false);
	sr_iw_term_rx_error(qp, SR_TERM_LAYER_RDMAP,
			    err == -EACCES ? SR_TERM_RDMAP_PROTECTION : SR_TERM_RDMAP_OPERATION,
			    SR_TERM_RDMAP_CANNOT_INVALIDATE,
			    err == -EACCES ? IBV_EVENT_QP_ACCESS_ERR : IBV_EVENT_QP_FATAL);
	return false;
}

/* The FPDU passed its CRC: account for it, complete what it ends. */
static void rx_complete(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_iw_rx *rx = &w->rx;
	struct sr_iw_hdr *h = &rx->h;

	w->stat_fpdus_rx++;
	sr_stat_add(qp->stats, SR_STAT_RCVD_PKTS, 1);
	if (w->nudging)
		sr_iw_nudge_end(qp);
	if (w->hush_until)
		sr_iw_hush_end(qp); /* what waits goes out after this receive pass */
	sr_stat_add(qp->stats, SR_STAT_RCVD_BYTES, SR_MPA_LEN_BYTES + rx->ulpdu_len + rx->trl_need);
	switch (h->opcode) {
	case SR_RDMAP_WRITE:
		rx->w_len += rx->pay_len;
		if (h->last) {
			rx->in_write = false;
			rx->last_write_len = rx->w_len;
		}
		break;
	case SR_RDMAP_READ_RESP: {
		struct sr_iw_orq *o = &w->orq[w->orq_head & w->orq_mask];

		o->done += rx->pay_len;
		if (h->last) {
			if (!o->rtr) {
				struct sr_send_wqe *wqe = sr_sq_wqe(&qp->sq, o->wqe_idx);

				wqe->state = SR_WQE_DONE;
				wqe->status = IBV_WC_SUCCESS;
			}
			w->orq_head++;
			sr_sq_complete(qp);
		}
		break;
	}
	case SR_RDMAP_SEND:
	case SR_RDMAP_SEND_INV:
	case SR_RDMAP_SEND_SE:
	case SR_RDMAP_SEND_SE_INV:
		rx->send_mo += rx->pay_len;
		if (h->last) {
			rx->msn[SR_DDP_QN_SEND]++;
			rx->in_send = false;
			if (rx->rwqe_valid && sr_rdmap_op[h->opcode].inval && !rx_invalidate(qp))
				return;
			if (rx->rwqe_valid)
				recv_complete(qp, IBV_WC_SUCCESS, IBV_WC_RECV, rx->send_mo, sr_rdmap_op[h->opcode].se);
		}
		break;
	case SR_RDMAP_IMM:
	case SR_RDMAP_IMM_SE:
		/* RDMA Write with Immediate: the Write's length, as rxe reports */
		rx->msn[SR_DDP_QN_SEND]++;
		rx->in_send = false;
		recv_complete(qp, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, (uint32_t)rx->last_write_len,
			      sr_rdmap_op[h->opcode].se);
		rx->last_write_len = 0;
		break;
	default:
		break;
	}
	rx->state = SR_IW_RX_HDR;
	rx->hhave = 0;
	rx->hneed = 0;
}

/* Where payload bytes [pay_done, pay_len) go, as iovecs (mr_lock held).
 * Returns their number, or -1 if the memory has gone meanwhile. */
static int rx_dst_iov(struct sr_qp *qp, struct iovec *iov, int max, uint8_t *scratch)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_iw_rx *rx = &w->rx;
	uint32_t rem = rx->pay_len - rx->pay_done;
	enum sr_iw_memerr err;
	uint8_t *host;

	switch (rx->dst) {
	case SR_IW_DST_WRITE: {
		uint32_t direct_end = rx->pay_len - rx->tail_len;

		/* the whole rest, staged tail included, must still be there */
		host = sr_iw_stag_lookup(qp, rx->h.stag, rx->dst_base + rx->pay_done, rem, IBV_ACCESS_REMOTE_WRITE,
					 &err);
		if (!host)
			return -1;
		if (rx->pay_done >= direct_end) {
			iov[0].iov_base = rx->tail + (rx->pay_done - direct_end);
			iov[0].iov_len = rem;
			return 1;
		}
		iov[0].iov_base = host;
		iov[0].iov_len = direct_end - rx->pay_done;
		if (!rx->tail_len)
			return 1;
		iov[1].iov_base = rx->tail;
		iov[1].iov_len = rx->tail_len;
		return 2;
	}
	case SR_IW_DST_RRESP:
		host = sr_iw_stag_lookup(qp, rx->h.stag, rx->dst_base + rx->pay_done, rem, IBV_ACCESS_LOCAL_WRITE,
					 &err);
		if (!host)
			return -1;
		iov[0].iov_base = host;
		iov[0].iov_len = rem;
		return 1;
	case SR_IW_DST_RECV:
		return sr_iw_sge_iov(qp, rx->rwqe->sge, rx->rwqe->num_sge, rx->dst_base + rx->pay_done, rem,
				     IBV_ACCESS_LOCAL_WRITE, iov, max);
	case SR_IW_DST_IMM:
		iov[0].iov_base = rx->imm + rx->pay_done;
		iov[0].iov_len = rem;
		return 1;
	default:
		iov[0].iov_base = scratch;
		iov[0].iov_len = rem < SR_IW_SCRATCH ? rem : SR_IW_SCRATCH;
		return 1;
	}
}

/* The checked FPDU's staged tail goes to the region, each byte once and
 * front to back (sr_place), so the last byte is the last to change. */
static int tail_place(struct sr_qp *qp)
{
	struct sr_iw_rx *rx = &iqp(qp)->rx;
	enum sr_iw_memerr err;
	uint8_t *host;

	pthread_rwlock_rdlock(&qp->ctx->mr_lock);
	host = sr_iw_stag_lookup(qp, rx->h.stag, rx->dst_base + rx->pay_len - rx->tail_len, rx->tail_len,
				 IBV_ACCESS_REMOTE_WRITE, &err);
	if (host && !sr_place_guarded(host, rx->tail, rx->tail_len))
		host = NULL; /* unmapped by the application (core/guard.h) */
	pthread_rwlock_unlock(&qp->ctx->mr_lock);
	if (!host) {
		/* deregistered (or unmapped) while the segment came in */
		ddp_tagged_err(qp, SR_TERM_DDP_T_INV_STAG);
		return -1;
	}
	return 0;
}

/* Read the payload (into its destination), pad, CRC and the next FPDU's
 * first bytes.  1: the FPDU is complete, 0: wait, -1: QP in ERR. */
static int rx_payload(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_iw_rx *rx = &w->rx;
	uint8_t scratch[SR_IW_SCRATCH];
	struct iovec iov[SR_MAX_SGE + 3];
	uint32_t pad = rx->trl_need - SR_MPA_CRC_BYTES;

	while (rx->pay_done < rx->pay_len || rx->trl_have < rx->trl_need) {
		int n = 0, ndst = 0;
		bool covered = true;
		ssize_t got;

		pthread_rwlock_rdlock(&qp->ctx->mr_lock);
		if (rx->pay_done < rx->pay_len) {
			size_t cover = 0;

			ndst = rx_dst_iov(qp, iov, SR_MAX_SGE, scratch);
			if (ndst < 0) {
				pthread_rwlock_unlock(&qp->ctx->mr_lock);
				if (rx->dst == SR_IW_DST_RECV) {
					/* a receive SGE naming no region or past its
					 * bounds: siw's DDP catastrophic, and the Send
					 * completes in error with no status of its own
					 * (siw_rdmap_complete: GENERAL_ERR) */
					recv_complete(qp, IBV_WC_GENERAL_ERR, IBV_WC_RECV, rx->send_mo, false);
					sr_iw_term_rx_error(qp, SR_TERM_LAYER_DDP, SR_TERM_DDP_CATASTROPHIC, 0,
							    IBV_EVENT_QP_ACCESS_ERR);
				} else {
					/* deregistered while the segment came in */
					ddp_tagged_err(qp, SR_TERM_DDP_T_INV_STAG);
				}
				return -1;
			}
			n = ndst;
			for (int i = 0; i < ndst; i++)
				cover += iov[i].iov_len;
			/* a discard into scratch may take several rounds */
			covered = cover == rx->pay_len - rx->pay_done;
		}
		if (covered) {
			/* the rest of the trailer, then a look-ahead into the next
			 * FPDU (readv only gets there once all before is full) */
			iov[n].iov_base = rx->trl + rx->trl_have;
			iov[n++].iov_len = rx->trl_need - rx->trl_have;
			if (!rx->la_len) {
				uint32_t cap = la_refill(w);
				iov[n].iov_base = la_buf(w);
				iov[n++].iov_len = cap;
			}
		}
		if (rx->la_len) {
			/* the look-ahead still holds bytes of this FPDU (a tiny
			 * one, or one of a run of small ones): take from it first */
			size_t k = 0, want = 0, took;

			for (int i = 0; i < n; i++)
				want += iov[i].iov_len;
			const uint8_t *src = la_take(rx, la_buf(w), want, &took);
			got = (ssize_t)took;
			for (int i = 0; i < n && k < took; i++) {
				size_t c = iov[i].iov_len < took - k ? iov[i].iov_len : took - k;

				if (!sr_place_guarded(iov[i].iov_base, src + k, c)) {
					got = -EFAULT; /* unmapped by the application (core/guard.h) */
					break;
				}
				k += c;
			}
		} else if (rx->sock_dry) {
			got = -EAGAIN;
		} else {
			size_t asked = 0;

			for (int i = 0; i < n; i++)
				asked += iov[i].iov_len;
			sr_dma_begin(); /* straight into registered memory */
			do {
				got = readv(w->fd, iov, n);
			} while (got < 0 && errno == EINTR);
			sr_dma_end();
			if (got < 0)
				got = errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
			else if (got > 0 && (size_t)got < asked)
				rx->sock_dry = true;
			if (got > 0)
				sr_rx_account((size_t)got);
		}
		if (got > 0) {
			/* account: payload (CRC'd from where it landed, while it is
			 * hot and before the lock lets go), pad, CRC, look-ahead */
			size_t left = (size_t)got;

			for (int i = 0; i < ndst && left; i++) {
				size_t c = iov[i].iov_len < left ? iov[i].iov_len : left;

				if (w->crc) {
					sr_dma_begin();
					rx->crc = sr_mpa_crc_update(rx->crc, iov[i].iov_base, c);
					sr_dma_end();
				}
				rx->pay_done += (uint32_t)c;
				left -= c;
			}
			if (left) {
				size_t c = rx->trl_need - rx->trl_have < left ? rx->trl_need - rx->trl_have : left;

				if (w->crc && rx->trl_have < pad) {
					size_t p = pad - rx->trl_have < c ? pad - rx->trl_have : c;

					rx->crc = sr_mpa_crc_update(rx->crc, rx->trl + rx->trl_have, p);
				}
				rx->trl_have += (uint32_t)c;
				left -= c;
			}
			if (left)
				rx->la_len = (uint32_t)left; /* look-ahead bytes */
		}
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
		if (got == -EAGAIN)
			return 0;
		if (got <= 0) {
			rx_eof(qp, got, true);
			return -1;
		}
	}
	if (w->crc && ~rx->crc != sr_mpa_crc_load(rx->trl + pad)) {
		sr_stat_add(qp->stats, SR_STAT_CRC_ERR, 1);
		sr_iw_term_rx_error(qp, SR_TERM_LAYER_LLP, SR_TERM_LLP_MPA, SR_TERM_MPA_CRC, IBV_EVENT_QP_FATAL);
		return -1;
	}
	if (rx->tail_len && tail_place(qp) < 0)
		return -1;
	rx_complete(qp);
	return 1;
}

void sr_iw_rx_progress(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_iw_rx *rx = &w->rx;

	rx->sock_dry = false; /* called on readiness (or by a poller): look again */
	/* The budget counts FPDUs; what the look-ahead already holds is
	 * parsed whatever it says: no readiness would bring the QP back for
	 * it (the socket may be empty), and it is at most SR_IW_LA_BIG bytes. */
	for (int budget = SR_IW_RX_BUDGET; budget > 0 || rx->la_len; budget--) {
		enum ibv_qp_state st = qp->attr.qp_state;

		if (!w->connected || w->rx_held || rx->state == SR_IW_RX_STOP ||
		    (st != IBV_QPS_RTS && st != IBV_QPS_SQD))
			return;
		if (rx->state == SR_IW_RX_HDR && rx_header(qp) <= 0)
			return;
		if (rx_payload(qp) <= 0)
			return;
	}
}
