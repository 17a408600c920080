/* The completer: what comes back to a requester.  ACKs retire send and
 * write WQEs; read responses are placed into the WQE's local SGEs;
 * atomic ACKs deliver the original value; NAKs rewind (sequence error),
 * wait (RNR) or fail the WQE (remote access / invalid request / remote
 * operational error).  Also the retransmission and RNR timers. */
#include <string.h>

#include "roce/roce.h"

uint64_t sr_timeout_ns(uint8_t timeout)
{
	/* 4.096 us * 2^timeout (IBTA 9.7.6.1.3); 0 means infinite.  Below a
	 * few milliseconds a software peer that is merely descheduled would
	 * trigger spurious retries, so we clamp as rxe's jiffy timers do. */
	if (!timeout)
		return 0;
	uint64_t ns = 4096ull << timeout;
	if (ns < 4000000ull)
		ns = 4000000ull;
	return ns;
}

__thread uint64_t sr_rx_batch_ns;

/* The retransmission timer's deadline is d.  A deadline that only moves
 * later, of a QP the timer pass visits already, is not armed again:
 * arming tells the progress thread (an atomic flag, a full barrier, per
 * response packet), which, due to look by the earlier deadline, finds it
 * then.  It may fire a tick late (no wake-up of the progress thread per
 * post: the application's posts keep it ticking), which the waits'
 * floors allow for (recovery.h). */
static void set_retrans(struct sr_qp *qp, uint64_t now, uint64_t wait)
{
	struct sr_roce_qp *r = rqp(qp);
	uint64_t d = now + wait;
	bool later = r->retrans_deadline && d >= r->retrans_deadline && sr_qp_timer_set(qp);
	r->retrans_deadline = d;
	if (!later)
		sr_qp_timer_arm_slack(qp, d, SR_PROGRESS_TICK_NS);
}

/* The clock of what is handled now: within a receive batch the batch's
 * (sr_rx_batch_ns, read once per recvmmsg in roce/recv.c) rather than a
 * clock read per packet, which a stream of Read responses would pay per
 * response; it is at most one batch's handling early. */
static uint64_t comp_now(void)
{
	return sr_rx_batch_ns ? sr_rx_batch_ns : sr_now_ns();
}

/* How long the retransmission timer runs (to: the QP's timeout,
 * recovery.h).  A tail-loss probe re-sends a SEND or WRITE packet
 * (sr_req_probe): while a READ or atomic awaits its response, the next
 * step is the retransmission timeout, which asks again from the oldest
 * unanswered PSN, each READ within the one it repeats (sr_rec_read_piece). */
static uint64_t retrans_wait(struct sr_qp *qp, uint64_t to, bool probe)
{
	return sr_rec_wait(&rqp(qp)->rec, to, probe && !rqp(qp)->rd_outstanding);
}

/* Arms the retransmission timer while packets are outstanding (recovery.h
 * says how long it runs); restart: progress was made, it starts again.
 * Started from idle, the QP's timeout counts from now. */
static void arm_retrans(struct sr_qp *qp, bool restart)
{
	struct sr_roce_qp *r = rqp(qp);
	uint64_t to = sr_timeout_ns(qp->attr.timeout);
	bool outstanding = r->next_psn != r->una_psn; /* up to 2^23 PSNs: psn_diff would say -2^23 */

	if (!outstanding || !to) {
		r->retrans_deadline = 0;
		return;
	}
	if (r->retrans_deadline && !restart)
		return;
	uint64_t now = comp_now();
	if (!r->retrans_deadline && !restart)
		r->rec.epoch_ns = now;
	set_retrans(qp, now, retrans_wait(qp, to, true));
}

void sr_comp_arm_timer(struct sr_qp *qp)
{
	arm_retrans(qp, false);
}

static void restart_timer(struct sr_qp *qp)
{
	arm_retrans(qp, true);
}

uint64_t sr_comp_deadline(struct sr_qp *qp)
{
	struct sr_roce_qp *r = rqp(qp);
	if (qp->attr.qp_state != IBV_QPS_RTS && qp->attr.qp_state != IBV_QPS_SQD)
		return 0;
	uint64_t d = 0, c[3] = { r->retrans_deadline, r->rnr_deadline, r->pace_deadline };
	for (int i = 0; i < 3; i++)
		if (c[i] && (!d || c[i] < d))
			d = c[i]; /* the earliest, 0 = none */
	return d;
}

/* Fail the WQE holding psn with status and take the QP to error. */
static void comp_fail(struct sr_qp *qp, uint32_t psn, enum ibv_wc_status st)
{
	struct sr_send_wqe *w = sr_req_wqe_for_psn(qp, psn, NULL);
	if (!w) {
		/* the oldest outstanding WQE carries the error */
		for (uint32_t i = qp->sq.tail; i != qp->sq.head; i++) {
			struct sr_send_wqe *x = sr_sq_wqe(&qp->sq, i);
			if (x->state == SR_WQE_PENDING) {
				w = x;
				break;
			}
		}
	}
	if (w) {
		w->state = SR_WQE_DONE;
		w->status = st;
	}
	rqp(qp)->retrans_deadline = 0;
	rqp(qp)->rnr_deadline = 0;
	/* the error completion tells the requester; like rxe, no async event */
	sr_qp_to_error(qp, (enum ibv_event_type) - 1);
}

/* una moved by n packets: the RTT sample, a spurious timeout undone
 * (recovery.h), the window's growth. */
static void comp_progress(struct sr_qp *qp, uint32_t n)
{
	struct sr_roce_qp *r = rqp(qp);
	if (sr_rec_progress(&r->rec, r->una_psn, comp_now())) {
		SR_DBG("QP %u: the timeout was spurious: window back to %u", sr_roce_qpn(qp), r->cc.undo_cwnd);
		sr_cc_undo(&r->cc, &r->cwnd);
	}
	sr_cc_acked(&r->cc, &r->cwnd, n, r->window, r->rec.srtt);
}

/* Everything up to and including psn has been acknowledged. Retires WQEs
 * in order; stops at a read/atomic that hasn't got its response (if the
 * ACK covers it, its response was lost: rewind to it). */
static void comp_ack_upto(struct sr_qp *qp, uint32_t psn)
{
	struct sr_roce_qp *r = rqp(qp);
	struct sr_sq *sq = &qp->sq;
	bool progress = false;
	uint32_t una0 = r->una_psn;

	for (uint32_t i = sq->tail; i != sq->head; i++) {
		struct sr_send_wqe *w = sr_sq_wqe(sq, i);
		if (w->state == SR_WQE_DONE)
			continue;
		if (w->state == SR_WQE_POSTED)
			break;
		int32_t d = psn_diff(psn, w->first_psn);
		if (d < 0)
			break;
		bool rdat = w->opcode == IBV_WR_RDMA_READ || w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
			    w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
		if (rdat) {
			/* an ACK beyond an unanswered read/atomic means its response was lost */
			int32_t have = psn_diff(r->una_psn, w->first_psn);
			if (have >= 0 && (uint32_t)have < w->npkts && psn_diff(psn, r->una_psn) >= 0 &&
			    w->sent_pkts > (uint32_t)have)
				sr_req_go_back(qp, r->una_psn);
			break;
		}
		uint32_t last = psn_add(w->first_psn, w->npkts - 1);
		/* acknowledged through its last PSN: the responder has it all, even
		 * if a go-back had started sending it again */
		if (psn_diff(psn, last) >= 0) {
			w->sent_pkts = w->npkts;
			w->state = SR_WQE_DONE;
			if (psn_diff(psn_add(last, 1), r->una_psn) > 0) {
				r->una_psn = psn_add(last, 1);
				progress = true;
			}
			continue;
		}
		/* partially acknowledged */
		if (psn_diff(psn_add(psn, 1), r->una_psn) > 0) {
			r->una_psn = psn_add(psn, 1);
			progress = true;
		}
		break;
	}
	if (progress) {
		comp_progress(qp, (uint32_t)psn_diff(r->una_psn, una0));
		r->retry_left = qp->attr.retry_cnt;
		r->rnr_retry_left = qp->attr.rnr_retry; /* both count per message, as rxe's */
		r->gap_retx_valid = false;
		restart_timer(qp);
	}
	sr_sq_complete(qp);
}

/* A gap in what came back: go back to una once per una value. */
static void comp_gap(struct sr_qp *qp)
{
	struct sr_roce_qp *r = rqp(qp);
	if (r->gap_retx_valid && r->gap_retx_una == r->una_psn)
		return;
	r->gap_retx_valid = true;
	r->gap_retx_una = r->una_psn;
	SR_DBG("QP %u: response gap, going back to psn %u", sr_roce_qpn(qp), r->una_psn);
	sr_req_go_back(qp, r->una_psn);
}

/* A read response or atomic ACK must carry the next PSN we await, for a
 * WQE of the right kind.  Returns that WQE, or NULL when the packet is to
 * be ignored (duplicate; a gap triggers a go-back) or was fatal. */
static struct sr_send_wqe *comp_expect(struct sr_qp *qp, struct sr_pkt *pkt, bool atomic)
{
	struct sr_roce_qp *r = rqp(qp);
	uint32_t idx;
	struct sr_send_wqe *w;

	if (pkt->psn != r->una_psn) {
		if (psn_diff(pkt->psn, r->una_psn) > 0)
			comp_gap(qp);
		return NULL;
	}
	w = sr_req_wqe_for_psn(qp, pkt->psn, &idx);
	bool kind_ok = w &&
		       (atomic ? (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) :
				 w->opcode == IBV_WR_RDMA_READ);
	if (!kind_ok) {
		comp_fail(qp, pkt->psn, IBV_WC_BAD_RESP_ERR);
		return NULL;
	}
	/* earlier sends/writes are implicitly acknowledged by this response */
	if (idx != qp->sq.tail)
		comp_ack_upto(qp, psn_add(pkt->psn, (uint32_t)-1));
	return w;
}

/* Copy response data into the WQE's local SGEs at off; false if fatal. */
static bool comp_place(struct sr_qp *qp, struct sr_send_wqe *w, struct sr_pkt *pkt, uint64_t off, const void *data,
		       uint32_t len)
{
	pthread_rwlock_rdlock(&qp->ctx->mr_lock);
	int err = sr_sge_copy(qp->ctx, to_spd(qp->ibqp.qp_base.pd), w->sge, w->num_sge, off, (void *)data, len,
			      SR_COPY_TO_SGE);
	pthread_rwlock_unlock(&qp->ctx->mr_lock);
	if (err) /* rxe: a response that can't be placed is a local protection error */
		comp_fail(qp, pkt->psn, IBV_WC_LOC_PROT_ERR);
	return !err;
}

/* The awaited PSN arrived: progress, and one read/atomic slot freed when
 * the request piece is complete. */
static void comp_advance(struct sr_qp *qp, struct sr_send_wqe *w, struct sr_pkt *pkt, bool piece_done)
{
	struct sr_roce_qp *r = rqp(qp);
	r->una_psn = psn_add(pkt->psn, 1);
	r->retry_left = qp->attr.retry_cnt;
	r->rnr_retry_left = qp->attr.rnr_retry;
	r->gap_retx_valid = false;
	if (piece_done && r->rd_outstanding)
		r->rd_outstanding--;
	comp_progress(qp, 1);
	if ((uint32_t)psn_diff(r->una_psn, w->first_psn) >= w->npkts)
		w->state = SR_WQE_DONE;
	restart_timer(qp);
	sr_sq_complete(qp);
}

static void comp_read_resp(struct sr_qp *qp, struct sr_pkt *pkt)
{
	struct sr_send_wqe *w = comp_expect(qp, pkt, false);
	if (!w)
		return;
	uint64_t off = (uint64_t)psn_diff(pkt->psn, w->first_psn) * rqp(qp)->mtu;
	bool last_of_piece = (pkt->mask & SR_OP_LAST) != 0;
	if (off + pkt->paylen > w->length || (!last_of_piece && pkt->paylen != rqp(qp)->mtu)) {
		comp_fail(qp, pkt->psn, IBV_WC_BAD_RESP_ERR);
		return;
	}
	if (comp_place(qp, w, pkt, off, pkt->payload, pkt->paylen)) {
		if (rqp(qp)->rd_resp_pkts)
			rqp(qp)->rd_resp_pkts--;
		comp_advance(qp, w, pkt, last_of_piece);
	}
}

static void comp_atomic_ack(struct sr_qp *qp, struct sr_pkt *pkt)
{
	struct sr_send_wqe *w = comp_expect(qp, pkt, true);
	uint64_t orig = pkt->atmack_orig;
	sr_tsan_serve(); /* after the responder's atomic (common/tsan.h) */
	if (w && comp_place(qp, w, pkt, 0, &orig, 8))
		comp_advance(qp, w, pkt, true);
}

/* Go back to psn (the oldest unacknowledged) for a loss: count: a retry
 * as IBTA counts them (a NAK sequence episode, a local ACK timeout), the
 * QP failing when none is left.  The window decreases once per window of
 * data lost from (sr_rec_loss); timeout: more, a retransmission timeout. */
static void comp_retry(struct sr_qp *qp, uint32_t psn, bool count, bool timeout)
{
	struct sr_roce_qp *r = rqp(qp);
	if (count) {
		if (r->retry_left <= 0) {
			comp_fail(qp, psn, IBV_WC_RETRY_EXC_ERR);
			return;
		}
		r->retry_left--;
	}
	if (timeout)
		sr_cc_timeout(&r->cc, &r->cwnd);
	else if (sr_rec_loss(&r->rec, r->una_psn, r->next_psn))
		sr_cc_loss(&r->cc, &r->cwnd);
	r->gap_retx_valid = true;
	r->gap_retx_una = r->una_psn;
	sr_req_resend(qp, psn, count);
}

void sr_comp_rx(struct sr_qp *qp, struct sr_pkt *pkt)
{
	struct sr_roce_qp *r = rqp(qp);

	if (sr_qp_transport(qp) != IBV_QPT_RC)
		return;
	/* responses for PSNs we never sent are bogus */
	if (psn_diff(pkt->psn, r->next_psn) >= 0)
		return;

	if (pkt->mask & SR_OP_READ) {
		if ((pkt->mask & SR_OP_AETH) && (pkt->aeth_syndrome & SR_AETH_TYPE_MASK) != SR_AETH_ACK)
			return; /* a read response carries only a positive AETH */
		comp_read_resp(qp, pkt);
		return;
	}
	if (pkt->mask & SR_OP_ATMACK) {
		comp_atomic_ack(qp, pkt);
		return;
	}
	if (!(pkt->mask & SR_OP_AETH))
		return;

	uint8_t syn = pkt->aeth_syndrome;
	switch (syn & SR_AETH_TYPE_MASK) {
	case SR_AETH_ACK:
		if (psn_diff(pkt->psn, r->una_psn) < 0)
			return; /* old duplicate */
		comp_ack_upto(qp, pkt->psn);
		break;
	case SR_AETH_RNR_NAK:
		if (psn_diff(pkt->psn, r->una_psn) < 0)
			return;
		comp_ack_upto(qp, psn_add(pkt->psn, (uint32_t)-1));
		if (qp->attr.qp_state == IBV_QPS_ERR)
			return;
		if (r->rnr_retry_left <= 0) {
			comp_fail(qp, pkt->psn, IBV_WC_RNR_RETRY_EXC_ERR);
			return;
		}
		if (qp->attr.rnr_retry != 7) /* 7 means retry forever */
			r->rnr_retry_left--;
		SR_DBG("QP %u: RNR NAK psn %u", sr_roce_qpn(qp), pkt->psn);
		sr_stat_add(qp->stats, SR_STAT_RCVD_RNR, 1);
		r->rnr_psn = pkt->psn;
		r->rnr_deadline = sr_now_ns() + (uint64_t)sr_rnr_timer_usec(syn & 0x1f) * 1000ull;
		sr_qp_timer_arm(qp, r->rnr_deadline);
		r->retrans_deadline = 0;
		sr_req_go_back(qp, pkt->psn);
		break;
	case SR_AETH_NAK:
		if (psn_diff(pkt->psn, r->una_psn) < 0)
			return;
		comp_ack_upto(qp, psn_add(pkt->psn, (uint32_t)-1));
		if (qp->attr.qp_state == IBV_QPS_ERR)
			return;
		switch (syn) {
		case SR_AETH_NAK_PSN_SEQ:
			if (r->rnr_deadline)
				break; /* waiting out an RNR NAK: the retry resends from there */
			SR_DBG("QP %u: PSN sequence NAK psn %u", sr_roce_qpn(qp), pkt->psn);
			sr_stat_add(qp->stats, SR_STAT_RCVD_SEQ_ERR, 1);
			/* one episode per gap: a NAK for the gap we resend
			 * already (a duplicate, or stray) changes nothing */
			if (r->gap_retx_valid && r->gap_retx_una == r->una_psn)
				break;
			comp_retry(qp, pkt->psn, true, false);
			if (qp->attr.qp_state == IBV_QPS_ERR)
				break;
			if (r->next_psn != r->una_psn)
				set_retrans(qp, comp_now(), retrans_wait(qp, sr_timeout_ns(qp->attr.timeout), false));
			break;
		case SR_AETH_NAK_INVALID_REQ:
			comp_fail(qp, pkt->psn, IBV_WC_REM_INV_REQ_ERR);
			break;
		case SR_AETH_NAK_REM_ACCESS:
			comp_fail(qp, pkt->psn, IBV_WC_REM_ACCESS_ERR);
			break;
		case SR_AETH_NAK_REM_OP:
			comp_fail(qp, pkt->psn, IBV_WC_REM_OP_ERR);
			break;
		default:
			comp_fail(qp, pkt->psn, IBV_WC_REM_INV_RD_REQ_ERR);
			break;
		}
		break;
	default:
		break; /* reserved syndrome: ignore */
	}
}

void sr_comp_timer(struct sr_qp *qp, uint64_t now)
{
	struct sr_roce_qp *r = rqp(qp);

	if (qp->attr.qp_state != IBV_QPS_RTS && qp->attr.qp_state != IBV_QPS_SQD)
		return;
	if (r->rnr_deadline && now >= r->rnr_deadline) {
		r->rnr_deadline = 0;
		sr_req_go_back(qp, r->rnr_psn);
		sr_req_progress(qp);
	}
	if (r->pace_deadline && now >= r->pace_deadline) {
		r->pace_deadline = 0;
		sr_req_progress(qp); /* pacing lets the next packet go (cc.h) */
	}
	if (r->retrans_deadline && now >= r->retrans_deadline) {
		r->retrans_deadline = 0;
		if (r->next_psn == r->una_psn)
			return;
		uint64_t to = sr_timeout_ns(qp->attr.timeout);
		/* the QP's own timeout has run out since the last progress (a
		 * timer fires up to a tick late, never early) */
		bool expired = now - r->rec.epoch_ns >= to - to / 8;
		if (expired && to && sr_rec_hold_expiry(&r->rec, now, to, sr_timers_input_waiting(qp->ctx, now))) {
			SR_DBG("QP %u: QP timeout at psn %u held: input waits to be read", sr_roce_qpn(qp), r->una_psn);
			set_retrans(qp, now, to / 8);
			return;
		}
		if (!expired && !r->rec.tlp_sent && sr_req_probe(qp)) {
			SR_DBG("QP %u: tail-loss probe", sr_roce_qpn(qp));
			r->rec.stat_tlp++;
		} else {
			SR_DBG("QP %u: timeout at psn %u (%s, srtt %lu ns, %lu ns since progress), %d retries left",
			       sr_roce_qpn(qp), r->una_psn, expired ? "QP timeout" : "early",
			       (unsigned long)r->rec.srtt, (unsigned long)(now - r->rec.epoch_ns), r->retry_left);
			comp_retry(qp, r->una_psn, expired, true);
			if (qp->attr.qp_state == IBV_QPS_ERR)
				return;
			sr_rec_timeout(&r->rec, now);
			if (expired)
				r->rec.epoch_ns = now;
			r->rec.backoff++;
			r->rec.stat_rto++;
		}
		r->rec.tlp_sent = true;
		if (to)
			set_retrans(qp, now, retrans_wait(qp, to, false));
		sr_req_progress(qp);
	}
}
