/* The requester: turns send WQEs into packets.
 *
 * Each WQE gets a PSN range when it is first started: one PSN per packet
 * for SEND/WRITE, one per expected response packet for READ, one for an
 * atomic.  Transmission is resumable at any packet (sent_pkts), which is
 * also how go-back-N retransmission works: the completer rewinds the
 * cursor to the WQE holding the first unacknowledged PSN.
 *
 * An RDMA READ is requested in pieces no larger than the send window, so
 * that the responder's burst of read responses fits the receive buffer;
 * each piece is an ordinary read request for the next PSNs of the WQE. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "roce/roce.h"

static uint32_t wqe_npkts(const struct sr_send_wqe *w, uint32_t mtu, enum ibv_qp_type t)
{
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
		return 1;
	if (t == IBV_QPT_UD || w->length == 0)
		return 1;
	return (uint32_t)((w->length + mtu - 1) / mtu);
}

struct sr_send_wqe *sr_req_wqe_for_psn(struct sr_qp *qp, uint32_t psn, uint32_t *idx)
{
	struct sr_sq *sq = &qp->sq;
	for (uint32_t i = sq->tail; i != sq->head; i++) {
		struct sr_send_wqe *w = sr_sq_wqe(sq, i);
		if (w->state == SR_WQE_POSTED)
			return NULL;
		if (w->state == SR_WQE_DONE)
			continue;
		int32_t d = psn_diff(psn, w->first_psn);
		if (d >= 0 && (uint32_t)d < w->npkts) {
			if (idx)
				*idx = i;
			return w;
		}
	}
	return NULL;
}

void sr_req_go_back(struct sr_qp *qp, uint32_t psn)
{
	sr_req_resend(qp, psn, true);
}

void sr_req_resend(struct sr_qp *qp, uint32_t psn, bool retry)
{
	struct sr_roce_qp *r = rqp(qp);
	struct sr_sq *sq = &qp->sq;
	uint32_t idx;
	struct sr_send_wqe *w = sr_req_wqe_for_psn(qp, psn, &idx);

	SR_DBG("QP %u: go back to psn %u: %s", qp->ibqp.qp_base.qp_num, psn, w ? "resending" : "no WQE holds it");
	if (!w)
		return;
	if (retry)
		sr_stat_add(qp->stats, SR_STAT_RETRANSMITS, 1);
	w->sent_pkts = (uint32_t)psn_diff(psn, w->first_psn);
	for (uint32_t i = idx + 1; i != sq->head; i++) {
		struct sr_send_wqe *x = sr_sq_wqe(sq, i);
		if (x->state == SR_WQE_POSTED)
			break;
		if (x->state == SR_WQE_PENDING)
			x->sent_pkts = 0;
	}
	sq->cur = idx;
	sr_rec_go_back(&r->rec, psn);
	r->rd_outstanding = 0;
	r->rd_resp_pkts = 0; /* what is asked again counts again */
	r->noack_pkts = 0;
}

bool sr_req_probe(struct sr_qp *qp)
{
	struct sr_roce_qp *r = rqp(qp);
	uint32_t last = psn_add(r->rec.snd_max, (uint32_t)-1);
	struct sr_send_wqe *w;

	if (r->rd_outstanding || psn_diff(r->rec.snd_max, r->una_psn) <= 0 || !(w = sr_req_wqe_for_psn(qp, last, NULL)))
		return false;
	if (w->opcode == IBV_WR_RDMA_READ || w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
		return false;
	/* In a loss episode the responder NAKs a gap once: if the resent head
	 * was lost too, only a resend of the head (una) fills the gap, and
	 * the last packet would be dropped unanswered.  Go back to una, as a
	 * timeout would, without waiting out the timeout. */
	if (r->rec.in_recovery && psn_diff(r->una_psn, r->rec.recover_psn) < 0 &&
	    sr_req_wqe_for_psn(qp, r->una_psn, NULL)) {
		sr_req_resend(qp, r->una_psn, false);
		r->rec.force_ackreq = true;
		return true;
	}
	/* not while a go-back resends (the cursor is behind the last packet:
	 * the probe would skip what is still to be resent), nor beyond the
	 * window */
	if (w->sent_pkts <= (uint32_t)psn_diff(last, w->first_psn) || psn_diff(last, r->una_psn) >= (int32_t)r->cwnd)
		return false;
	sr_req_resend(qp, last, false);
	r->rec.force_ackreq = true;
	return true;
}

/* Gather the payload bytes [off, off+len) of w into iov (pointing into
 * registered memory or the inline area).  Returns iov count, -EINVAL (an
 * lkey naming no region) or -EFAULT (an SGE past its region's bounds). */
static int gather(struct sr_qp *qp, struct sr_send_wqe *w, uint64_t off, uint32_t len, struct iovec *iov)
{
	int n = 0;
	if (!len)
		return 0;
	if (w->inlined) {
		iov[0].iov_base = sr_wqe_inline(&qp->sq, w) + off;
		iov[0].iov_len = len;
		return 1;
	}
	uint32_t i = 0;
	while (i < w->num_sge && off >= w->sge[i].length) {
		off -= w->sge[i].length;
		i++;
	}
	while (len) {
		if (i >= w->num_sge)
			return -EFAULT;
		uint64_t take = w->sge[i].length - off;
		if (take > len)
			take = len;
		uint8_t *p;
		int err = sr_mr_find(qp->ctx, w->sge[i].lkey, false, to_spd(qp->ibqp.qp_base.pd), w->sge[i].addr + off,
				     take, 0, &p);
		if (err)
			return err;
		iov[n].iov_base = p;
		iov[n++].iov_len = take;
		len -= (uint32_t)take;
		off = 0;
		i++;
	}
	return n;
}

static uint8_t send_opcode(enum ibv_qp_type t, enum ibv_wr_opcode op, bool first, bool last)
{
	uint8_t base = t == IBV_QPT_UC ? IBV_OPCODE_UC : t == IBV_QPT_UD ? IBV_OPCODE_UD : IBV_OPCODE_RC;
	uint8_t o;
	switch (op) {
	case IBV_WR_SEND:
		o = first && last ? IBV_OPCODE_SEND_ONLY :
		    first	  ? IBV_OPCODE_SEND_FIRST :
		    last	  ? IBV_OPCODE_SEND_LAST :
				    IBV_OPCODE_SEND_MIDDLE;
		break;
	case IBV_WR_SEND_WITH_IMM:
		o = first && last ? IBV_OPCODE_SEND_ONLY_WITH_IMMEDIATE :
		    first	  ? IBV_OPCODE_SEND_FIRST :
		    last	  ? IBV_OPCODE_SEND_LAST_WITH_IMMEDIATE :
				    IBV_OPCODE_SEND_MIDDLE;
		break;
	case IBV_WR_SEND_WITH_INV: /* RC only */
		if (first && last)
			return SR_OPCODE_RC_SEND_ONLY_WITH_INVALIDATE;
		if (last)
			return SR_OPCODE_RC_SEND_LAST_WITH_INVALIDATE;
		o = first ? IBV_OPCODE_SEND_FIRST : IBV_OPCODE_SEND_MIDDLE;
		break;
	case IBV_WR_RDMA_WRITE:
		o = first && last ? IBV_OPCODE_RDMA_WRITE_ONLY :
		    first	  ? IBV_OPCODE_RDMA_WRITE_FIRST :
		    last	  ? IBV_OPCODE_RDMA_WRITE_LAST :
				    IBV_OPCODE_RDMA_WRITE_MIDDLE;
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		o = first && last ? IBV_OPCODE_RDMA_WRITE_ONLY_WITH_IMMEDIATE :
		    first	  ? IBV_OPCODE_RDMA_WRITE_FIRST :
		    last	  ? IBV_OPCODE_RDMA_WRITE_LAST_WITH_IMMEDIATE :
				    IBV_OPCODE_RDMA_WRITE_MIDDLE;
		break;
	default:
		o = 0;
	}
	return (uint8_t)(base + o);
}

/* A local error on this WQE: it completes with status, the QP goes to error. */
static void req_local_error(struct sr_qp *qp, struct sr_send_wqe *w, enum ibv_wc_status st)
{
	w->state = SR_WQE_DONE;
	w->status = st;
	sr_qp_to_error(qp, (enum ibv_event_type) - 1);
}

/* Adds packet h (payload pay, paylen bytes) for av to batch b, which
 * sends what it holds first when av differs or it is full: one batch, one
 * destination.  An XRC INI end's requests take the XRC opcodes here. */
static void batch_add(struct sr_tx_batch *b, const struct sr_av *av, struct sr_pkt *h, const struct iovec *pay,
		      int npay, uint32_t paylen)
{
	h->opcode = sr_roce_opcode(b->qp, h->opcode); /* an XRC INI end's requests: XRC opcodes */
	if (b->av != av && b->npkts)
		sr_tx_batch_flush(b);
	b->av = av;
	if (!sr_tx_batch_add(b, h, pay, npay, paylen)) {
		sr_tx_batch_flush(b);
		sr_tx_batch_add(b, h, pay, npay, paylen);
	}
}

/* Pacing stops the requester (cc.h): the timer resumes it. */
static void req_pace_wait(struct sr_qp *qp)
{
	struct sr_roce_qp *r = rqp(qp);

	r->pace_deadline = sr_cc_pace_wake(&r->cc);
	sr_qp_timer_arm(qp, r->pace_deadline);
}

/* Send the next packet(s) of w. Returns false when the window, pacing (now:
 * the time the pass started, 0: not paced) or the read/atomic limit stops us. */
static bool req_send_wqe(struct sr_qp *qp, struct sr_send_wqe *w, struct sr_tx_batch *b, uint64_t now)
{
	struct sr_roce_qp *r = rqp(qp);
	enum ibv_qp_type t = sr_qp_transport(qp);
	struct iovec iov[SR_MAX_SGE + 1];
	const struct sr_av *av = t == IBV_QPT_UD ? sr_sq_av(&qp->sq, w) : &qp->av;

	if (t == IBV_QPT_UD && !w->sent_pkts)
		sr_roce_ud_flow(qp, av, w->remote_qpn);
	while (w->sent_pkts < w->npkts) {
		uint32_t psn = psn_add(w->first_psn, w->sent_pkts);
		int32_t inflight = psn_diff(psn, r->una_psn);
		if (t == IBV_QPT_RC && inflight >= (int32_t)r->cwnd)
			return false;

		struct sr_pkt h;
		memset(&h, 0, sizeof(h));
		h.pkey = SR_DEFAULT_PKEY;
		h.psn = psn;
		h.dqpn = t == IBV_QPT_UD ? w->remote_qpn : qp->attr.dest_qp_num;
		h.xrc_srqn = w->remote_qpn; /* an XRC request's XRCETH (post_one_send) */

		if (w->opcode == IBV_WR_RDMA_READ) {
			if (r->rd_outstanding >= (qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1))
				return false;
			uint32_t room = r->cwnd - (uint32_t)(inflight > 0 ? inflight : 0);
			uint32_t n = sr_rec_read_piece(&r->rec, psn, w->npkts - w->sent_pkts, room, r->cwnd);
			if (!n)
				return false;
			uint64_t off = (uint64_t)w->sent_pkts * r->mtu;
			uint64_t len = w->length - off;
			if (len > (uint64_t)n * r->mtu)
				len = (uint64_t)n * r->mtu;
			h.opcode = IBV_OPCODE_RC_RDMA_READ_REQUEST;
			h.reth_va = w->remote_addr + off;
			h.reth_rkey = w->rkey;
			h.reth_len = (uint32_t)len;
			h.ackreq = true;
			batch_add(b, av, &h, NULL, 0, 0);
			sr_rec_sent(&r->rec, psn, n, true);
			sr_rec_read_sent(&r->rec, psn, n);
			w->sent_pkts += n;
			r->rd_outstanding++;
			r->rd_resp_pkts += n;
			continue;
		}
		if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			if (r->rd_outstanding >= (qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1))
				return false;
			h.opcode = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? IBV_OPCODE_RC_COMPARE_SWAP :
									    IBV_OPCODE_RC_FETCH_ADD;
			h.atm_va = w->remote_addr;
			h.atm_rkey = w->rkey;
			h.atm_swap_add = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->swap : w->compare_add;
			h.atm_compare = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->compare_add : 0;
			h.ackreq = true;
			batch_add(b, av, &h, NULL, 0, 0);
			sr_rec_sent(&r->rec, psn, 1, true);
			w->sent_pkts = 1;
			r->rd_outstanding++;
			continue;
		}

		if (now && !sr_cc_may_send(&r->cc, now)) {
			req_pace_wait(qp);
			return false;
		}
		bool first = w->sent_pkts == 0, last = w->sent_pkts + 1 == w->npkts;
		uint64_t off = (uint64_t)w->sent_pkts * r->mtu;
		uint32_t len = (uint32_t)(w->length - off < r->mtu ? w->length - off : r->mtu);
		int n = gather(qp, w, off, len, iov);
		if (n < 0) {
			/* as rxe's copy_data: a bad lkey is LOC_QP_OP_ERR, an
			 * SGE past the end of its region LOC_PROT_ERR */
			req_local_error(qp, w, n == -EFAULT ? IBV_WC_LOC_PROT_ERR : IBV_WC_LOC_QP_OP_ERR);
			return false;
		}
		h.opcode = send_opcode(t, w->opcode, first, last);
		if (first && (w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)) {
			h.reth_va = w->remote_addr;
			h.reth_rkey = w->rkey;
			h.reth_len = (uint32_t)w->length;
		}
		if (last && (w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM))
			h.imm_data = w->imm_data;
		if (last && w->opcode == IBV_WR_SEND_WITH_INV)
			h.ieth_rkey = w->imm_data;
		if (t == IBV_QPT_UD) {
			/* a Q_Key with the high bit set means "use the QP's own" */
			h.deth_qkey = (w->remote_qkey & 0x80000000u) ? qp->attr.qkey : w->remote_qkey;
			h.deth_sqpn = sr_roce_qpn(qp);
		}
		h.se = last && (w->send_flags & IBV_SEND_SOLICITED);
		r->noack_pkts++;
		/* Ask for an ACK where the requester needs one: a signaled WQE's
		 * end, the last WQE queued for now, and every half window (to
		 * keep the window open).  Unsignaled WQEs followed by more work
		 * are acknowledged together with it, as rxe coalesces. */
		bool want_ack = last && ((w->send_flags & IBV_SEND_SIGNALED) || qp->sq_sig_all ||
					 qp->sq.cur + 1 == qp->sq.head);
		if (t == IBV_QPT_RC && (want_ack || r->noack_pkts >= r->cwnd / 2 || r->rec.force_ackreq)) {
			h.ackreq = true;
			r->noack_pkts = 0;
			r->rec.force_ackreq = false;
		}
		batch_add(b, av, &h, iov, n, len);
		if (t == IBV_QPT_RC)
			sr_rec_sent(&r->rec, psn, 1, h.ackreq);
		if (now)
			sr_cc_paced(&r->cc, now, r->cwnd, r->rec.srtt);
		w->sent_pkts++;
	}
	return true;
}

/* A stream of small messages: while enough of ours is unacknowledged, a
 * newly posted WQE waits to leave together with those posted after it, in
 * one sendmsg, instead of a system call each.  The ACK that comes back
 * releases them (the receive path calls sr_req_progress), as does a full
 * batch.  The last packet sent before a deferral asked for an ACK: it was the
 * last WQE queued when it left.
 *
 * With less in flight, a message goes at once (a ping-pong, the start of
 * a stream), unless it is part of a burst: posted right after the
 * previous post returned, by an application that polls its CQs.  Its next
 * poll (or arming a CQ) releases the burst (sr_qp_park), as does the ACK
 * of what is in flight.  An application that spins on memory
 * instead of polling never has its sends parked this way: the ACK it would
 * wait for may itself wait for its next request (resp.c, delayed_ack_on). */
#define SR_TX_DEFER_INFLIGHT 8 /* packets unacknowledged */
#define SR_TX_DEFER_WQES 32    /* waiting WQEs that make a batch worth sending */
#define SR_TX_DEFER_LEN 16384u /* only messages this small wait */

static bool tx_defer(struct sr_qp *qp, uint64_t now)
{
	struct sr_roce_qp *r = rqp(qp);
	struct sr_sq *sq = &qp->sq;

	if (!r->tx_defer_on || sr_qp_transport(qp) != IBV_QPT_RC || qp->attr.qp_state != IBV_QPS_RTS)
		return false;
	bool burst = sr_post_in_burst(qp, now);
	if (sq->head - sq->cur >= SR_TX_DEFER_WQES)
		return false;
	struct sr_send_wqe *w = sr_sq_wqe(sq, sq->head - 1);
	if (w->state != SR_WQE_POSTED || w->length > SR_TX_DEFER_LEN)
		return false;
	int inflight = psn_diff(r->next_psn, r->una_psn);
	if (inflight >= SR_TX_DEFER_INFLIGHT)
		return true;
	return inflight > 0 && burst && sr_qp_park(qp);
}

bool sr_req_progress_kick(struct sr_qp *qp, bool kick)
{
	struct sr_roce_qp *r = rqp(qp);
	struct sr_sq *sq = &qp->sq;
	enum ibv_qp_type t = sr_qp_transport(qp);
	bool sent = false, local_done = false;
	struct sr_tx_batch *b;

	/* SQD drains: WQEs already started go on, new ones wait for RTS */
	bool draining = qp->attr.qp_state == IBV_QPS_SQD;
	if (!r || (qp->attr.qp_state != IBV_QPS_RTS && !draining) || r->rnr_deadline || sq->cur == sq->head) {
		if (r && r->ack_deadline && kick)
			sr_resp_flush_ack(qp); /* the application posted: no request will carry it */
		return false;
	}
	if (kick && tx_defer(qp, r->last_post_ns)) {
		if (r->ack_deadline)
			sr_resp_flush_ack(qp); /* our requests wait: the peer's may wait for this */
		return false;
	}
	if (!(b = sr_tls_buf(SR_TLS_TX_BATCH, sizeof(*b))))
		return false;
	sr_tx_batch_init(b, qp, &qp->av);
	/* RC sends and writes are paced once the RTT is known and a loss has
	 * shown a queue that overflows (cc.h); one clock for the pass (within
	 * a receive batch, the batch's) */
	uint64_t now = 0;
	if (t == IBV_QPT_RC && r->rec.srtt && r->cc.ssthresh)
		now = sr_rx_batch_ns ? sr_rx_batch_ns : sr_now_ns();
	r->pace_deadline = 0;
	pthread_rwlock_rdlock(&qp->ctx->mr_lock);
	while (sq->cur != sq->head) {
		struct sr_send_wqe *w = sr_sq_wqe(sq, sq->cur);
		if (w->state == SR_WQE_DONE) {
			sq->cur++;
			continue;
		}
		if (w->state == SR_WQE_POSTED) {
			if (draining)
				break;
			/* a fenced WQE waits for every earlier read/atomic to finish */
			if ((w->send_flags & IBV_SEND_FENCE) && r->rd_outstanding)
				break;
			/* as rxe's requester: an operation the QP's type does not
			 * carry (posted, as librxe takes it) fails here; a UD
			 * message longer than the MTU fails as NICs fail it (rxe
			 * reports success and sends nothing) */
			bool carried = sr_qp_opcode_carried(qp, w->opcode);
			if (!carried || (t == IBV_QPT_UD && w->length > r->mtu)) {
				req_local_error(qp, w, carried ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_QP_OP_ERR);
				break;
			}
			if (sr_wr_is_local(w->opcode)) {
				/* BIND_MW, LOCAL_INV: done here, in order, no packet.
				 * They change the key table, so the batch (which
				 * points into registered memory) leaves first and
				 * the read lock is let go meanwhile. */
				sr_tx_batch_flush(b);
				pthread_rwlock_unlock(&qp->ctx->mr_lock);
				enum ibv_wc_status st = sr_local_op(qp, w);
				pthread_rwlock_rdlock(&qp->ctx->mr_lock);
				w->first_psn = r->next_psn;
				w->npkts = 0;
				if (st != IBV_WC_SUCCESS) {
					req_local_error(qp, w, st);
					break;
				}
				w->state = SR_WQE_DONE;
				local_done = true;
				sq->cur++;
				continue;
			}
			uint32_t npkts = wqe_npkts(w, r->mtu, t);
			/* psn_diff orders PSNs less than 2^23 apart: what is
			 * outstanding must stay below that (only a message near
			 * 2 GiB at MTU 256 comes close); such a WQE waits for the
			 * ACKs of those before it */
			if (t == IBV_QPT_RC && r->next_psn != r->una_psn &&
			    (uint32_t)psn_diff(r->next_psn, r->una_psn) + npkts >= (1u << 23))
				break;
			w->first_psn = r->next_psn;
			w->npkts = npkts;
			w->sent_pkts = 0;
			r->next_psn = psn_add(r->next_psn, w->npkts);
			w->state = SR_WQE_PENDING;
		}
		bool done = req_send_wqe(qp, w, b, now);
		sent = true;
		if (qp->attr.qp_state != IBV_QPS_RTS && qp->attr.qp_state != IBV_QPS_SQD)
			break;
		if (!done)
			break;
		if (t != IBV_QPT_RC) {
			/* UC and UD are unacknowledged: complete once sent */
			w->state = SR_WQE_DONE;
			r->una_psn = r->next_psn;
		}
		sq->cur++;
	}
	/* an ACK held for this moment leaves right behind the requests: the
	 * peer receives them first (roce/resp.c) */
	struct sr_pkt ack;
	if (r->ack_deadline && sr_resp_take_ack(qp, &ack))
		batch_add(b, &qp->av, &ack, NULL, 0, 0);
	/* the batch points into registered memory: send before unlocking */
	sr_tx_batch_flush(b);
	pthread_rwlock_unlock(&qp->ctx->mr_lock);
	if (t != IBV_QPT_RC || local_done)
		sr_sq_complete(qp);
	if (t == IBV_QPT_RC && sent)
		sr_comp_arm_timer(qp);
	return sent;
}

void sr_req_progress(struct sr_qp *qp)
{
	sr_req_progress_kick(qp, false);
}
