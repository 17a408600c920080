/* The responder: requests arriving at a QP.  Checks the PSN (duplicate,
 * in order, gap), the opcode sequence, the R_Key and bounds, then places
 * SEND payload into the receive WQE or WRITE payload into the target
 * region, executes reads and atomics, and answers with (coalesced) ACKs,
 * NAKs, read responses and atomic ACKs. */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/guard.h"
#include "roce/roce.h"

void sr_resp_reset(struct sr_qp *qp)
{
	struct sr_roce_qp *r = rqp(qp);
	r->nak_seq_sent = false;
	r->in_send = r->in_write = false;
	r->rwqe_valid = false;
	r->rwqe_off = 0;
	r->ack_pending = false;
	r->ack_deadline = 0;
	r->uc_drop = false;
	r->msn = 0;
	if (r->res)
		memset(r->res, 0, SR_RESP_RES * sizeof(*r->res));
	r->dup_ack_ns = 0;
}

/* The PSNs around the expected one a request of the peer's can carry.
 * Ahead: the gap a lost request leaves, at most what the requester has
 * outstanding -- here at most 512 packets (ops.c, window_for) plus the
 * responses of its outstanding READs, rxe 128 unacknowledged PSNs plus
 * those; 2^16 leaves room for READs of 64 MiB at MTU 1024.  Behind: what
 * it may retransmit, as much.  A request further ahead gets no sequence
 * NAK and one further behind no ACK (IBTA 9.7.5.1.2 would NAK or ACK
 * anything in the half of the PSN space on either side): a forger who
 * does not know the PSN gets an answer for 1 in 128 instead of every
 * one.  The requester's retransmission timer recovers the rare gap that
 * is wider (a lost request before a READ larger than that). */
#define SR_RESP_PSN_WINDOW (1u << 16)

static void aeth_hdr(struct sr_qp *qp, struct sr_pkt *h, uint32_t psn, uint8_t syndrome)
{
	memset(h, 0, sizeof(*h));
	h->opcode = sr_roce_opcode(qp, IBV_OPCODE_RC_ACKNOWLEDGE);
	h->pkey = SR_DEFAULT_PKEY;
	h->dqpn = qp->attr.dest_qp_num;
	h->psn = psn;
	h->aeth_syndrome = syndrome;
	h->aeth_msn = rqp(qp)->msn;
}

/* Responses to small READs and atomic ACKs, deferred while a receive
 * batch lasts (sr_resp_defer_reads).  A requester batches its READs (perftest posts
 * dozens back to back) and they arrive in one recvmmsg; answering each
 * with its own sendmmsg made small READs run at a fifth of the WRITE
 * rate.  The payload is copied here when the request is served, so the
 * batch holds no pointer into registered memory and no lock across the
 * batch (the key table may change meanwhile: a received SEND with
 * Invalidate, a bind on our own send queue). */
#define SR_RESP_DEFER_BYTES 16384u /* READs this small are deferred... */
#define SR_RESP_DEFER_PKTS 16u	   /* ... if their response is this many packets */
#define SR_RESP_STAGE_BYTES (16u * SR_RESP_DEFER_BYTES)
struct resp_tx {
	struct sr_tx_batch b;
	struct sr_qp *defer; /* the QP receiving a batch on this thread */
	uint32_t stage_used; /* bytes of stage the batch's packets point into */
	uint8_t stage[SR_RESP_STAGE_BYTES];
};

/* This thread's; its state starts empty (the stage is scratch) */
static struct resp_tx *resp_tx(void)
{
	static __thread struct resp_tx *t;
	if (!t && (t = sr_tls_buf(SR_TLS_RESP_BATCH, sizeof(*t))))
		memset(t, 0, offsetof(struct resp_tx, stage));
	return t;
}

/* Every send of the batch goes through here: once sent, the stage it
 * pointed into is free again. */
static void resp_tx_send(struct resp_tx *t)
{
	sr_tx_batch_flush(&t->b);
	t->stage_used = 0;
}

/* Sends qp's deferred responses: before any other packet of its
 * responder, which must not overtake them (an ACK past a READ's PSN tells
 * the requester that the READ's response was lost). */
static void resp_tx_flush(struct sr_qp *qp)
{
	struct resp_tx *t = resp_tx();
	if (t && t->b.qp == qp && t->b.npkts)
		resp_tx_send(t);
}

/* The batch, made qp's: what waits for another QP leaves first (only the
 * QP this thread receives for defers, and its lock is held up the stack;
 * this is a guard, no path mixes them). */
static struct sr_tx_batch *resp_batch(struct resp_tx *t, struct sr_qp *qp)
{
	if (t->b.npkts && t->b.qp != qp)
		resp_tx_send(t);
	if (!t->b.npkts)
		sr_tx_batch_init(&t->b, qp, &qp->av);
	return &t->b;
}

void sr_resp_defer_reads(struct sr_qp *qp)
{
	struct resp_tx *t = resp_tx();
	if (!t)
		return;
	if (t->b.npkts)
		resp_tx_send(t);
	t->defer = qp;
}

static void resp_xmit(struct sr_qp *qp, struct sr_pkt *h)
{
	resp_tx_flush(qp);
	sr_roce_xmit(qp, h, NULL, 0, 0, &qp->av);
}

static void send_aeth(struct sr_qp *qp, uint32_t psn, uint8_t syndrome)
{
	struct sr_pkt h;
	aeth_hdr(qp, &h, psn, syndrome);
	resp_xmit(qp, &h);
}

bool sr_resp_take_ack(struct sr_qp *qp, struct sr_pkt *h)
{
	struct sr_roce_qp *r = rqp(qp);
	if (!r)
		return false;
	resp_tx_flush(qp); /* the ACK follows the READ responses before it */
	r->ack_deadline = 0;
	if (!r->ack_pending)
		return false;
	r->ack_pending = false;
	if (qp->attr.qp_state == IBV_QPS_ERR)
		return false;
	aeth_hdr(qp, h, psn_add(r->epsn, (uint32_t)-1), SR_AETH_ACK | SR_AETH_ACK_UNLIMITED);
	return true;
}

void sr_resp_flush_ack(struct sr_qp *qp)
{
	struct sr_pkt h;
	if (sr_resp_take_ack(qp, &h))
		sr_roce_xmit(qp, &h, NULL, 0, 0, &qp->av);
}

/* Longest an ACK waits for the QP's next request; an application that
 * answers a message does so within microseconds unless descheduled. */
#define SR_DELAYED_ACK_MAX_NS 50000ull
/* A QP that posted a send this recently is in a conversation. */
#define SR_ACK_CONVERSATION_NS 1000000ull

uint64_t sr_resp_deadline(struct sr_qp *qp)
{
	if (qp->attr.qp_state != IBV_QPS_RTS && qp->attr.qp_state != IBV_QPS_SQD)
		return 0;
	return rqp(qp)->ack_deadline;
}

void sr_resp_timer(struct sr_qp *qp, uint64_t now)
{
	struct sr_roce_qp *r = rqp(qp);

	if (qp->attr.qp_state != IBV_QPS_RTS && qp->attr.qp_state != IBV_QPS_SQD)
		return;
	if (r->ack_deadline && now >= r->ack_deadline)
		sr_resp_flush_ack(qp); /* no request came to carry it */
}

void sr_resp_end_batch(struct sr_qp *qp)
{
	struct sr_roce_qp *r = rqp(qp);
	resp_tx_flush(qp);
	if (!r || !r->ack_pending)
		return;
	/* Delay it only between messages (mid-message ACKs keep the peer's
	 * window open) and only on a QP whose application sends too: a
	 * one-way stream's receiver never posts, and gets its ACKs at once.
	 * What can be delayed is the ACK of plain WRITEs: a message with a
	 * receive completion was acknowledged before its completion
	 * (ack_before_completion).  A process that sees a WRITE's data and
	 * _exits within SR_DELAYED_ACK_MAX_NS without posting or destroying the QP
	 * takes the ACK with it (the peer retries, then fails): the price of
	 * a WRITE ping-pong with no thread handoff. */
	uint64_t now = sr_now_ns();
	if (r->delayed_ack_on && sr_qp_transport(qp) == IBV_QPT_RC && qp->attr.qp_state == IBV_QPS_RTS && !r->in_send &&
	    !r->in_write && r->last_post_ns && now - r->last_post_ns < SR_ACK_CONVERSATION_NS) {
		if (!r->ack_deadline) {
			r->ack_deadline = now + SR_DELAYED_ACK_MAX_NS;
			sr_qp_timer_arm_slack(qp, r->ack_deadline, 4 * SR_DELAYED_ACK_MAX_NS);
		}
		if (now < r->ack_deadline)
			return;
	}
	sr_resp_flush_ack(qp);
}

/* An acknowledgement owed for a message leaves before the message's
 * receive completion is visible.  Once the application has its
 * completion it may exit at once (fio's rdma server does, with _exit,
 * never disconnecting), killing the thread that would have sent a
 * coalesced ACK a moment later; the requester would then retry into a
 * QP that no longer exists and fail with RETRY_EXC_ERR.  An RNIC (and
 * rxe, in the kernel) acknowledges independently of the process. */
static void ack_before_completion(struct sr_qp *qp)
{
	sr_resp_flush_ack(qp);
}

/* A class of error that takes the responder's QP to the error state
 * (IBTA 9.9.3: invalid request, remote access, remote operational).  RC
 * NAKs the request and raises the async event of the requester's fault;
 * UC and UD have no one to NAK, and raise none (as rxe_qp_error). */
void sr_resp_fatal(struct sr_qp *qp, uint32_t psn, uint8_t nak)
{
	struct sr_roce_qp *r = rqp(qp);
	if (sr_qp_transport(qp) != IBV_QPT_RC) {
		sr_qp_to_error(qp, (enum ibv_event_type) - 1);
		return;
	}
	r->ack_pending = false;
	send_aeth(qp, psn, nak);
	sr_qp_to_error(qp, nak == SR_AETH_NAK_REM_ACCESS ? IBV_EVENT_QP_ACCESS_ERR : IBV_EVENT_QP_REQ_ERR);
}

/* What a UD completion reports about the network header, for RoCE
 * consumers: IBV_WC_GRH, and in wc.sl the L3 header type as mlx5 puts it in
 * its RoCE CQEs (0 GRH / RoCE v1, 1 IPv6, 2 IPv4).  RoCE has no service
 * level on the wire, so sl carries this instead; UCX's ud_verbs takes it
 * to know where the destination address sits in the 40-byte GRH area and
 * drops every packet whose address it cannot find there.  rdma-core's
 * ibv_init_ah_from_wc finds the version in the header itself. */
enum {
	SR_WC_NOGRH = -1,
	SR_WC_L3_IPV6 = 1,
	SR_WC_L3_IPV4 = 2
};

static void recv_complete(struct sr_qp *qp, enum ibv_wc_status st, enum ibv_wc_opcode op, uint32_t len,
			  struct sr_pkt *pkt, uint32_t src_qp, int l3)
{
	struct sr_roce_qp *r = rqp(qp);
	struct ibv_wc wc;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = r->rwqe->wr_id;
	wc.status = st;
	wc.opcode = op;
	wc.byte_len = len;
	wc.qp_num = sr_roce_qpn(qp);
	wc.src_qp = src_qp;
	if (st == IBV_WC_SUCCESS) {
		if (pkt->mask & SR_OP_IMMDT) {
			wc.wc_flags |= IBV_WC_WITH_IMM;
			wc.imm_data = pkt->imm_data;
		} else if (pkt->mask & SR_OP_IETH) {
			wc.wc_flags |= IBV_WC_WITH_INV;
			wc.invalidated_rkey = pkt->ieth_rkey;
		}
		if (l3 != SR_WC_NOGRH) {
			wc.wc_flags |= IBV_WC_GRH;
			wc.sl = (uint8_t)l3;
		}
	}
	wc.pkey_index = 0;
	r->rwqe_valid = false;
	r->rwqe_off = 0;
	sr_cq_push(qp->rcq, &wc, pkt->se);
}

/* Copy payload into the current receive WQE at rwqe_off. */
static int place_recv(struct sr_qp *qp, const void *data, uint32_t len)
{
	struct sr_roce_qp *r = rqp(qp);
	if (r->rwqe_off + len > r->rwqe->length)
		return -1; /* too long for the posted buffer */
	pthread_rwlock_rdlock(&qp->rctx->mr_lock);
	/* A UD QP takes datagrams from anyone at any time, also while the
	 * application tears down (UCX unmaps its receive buffers before it
	 * destroys the QP): its receives are placed through the kernel */
	int how = sr_qp_transport(qp) == IBV_QPT_UD ? SR_COPY_TO_SGE_CHECKED : SR_COPY_TO_SGE;
	int err = sr_sge_copy(qp->rctx, qp->rpd, r->rwqe->sge, r->rwqe->num_sge, r->rwqe_off, (void *)data, len, how);
	pthread_rwlock_unlock(&qp->rctx->mr_lock);
	if (err)
		return -2;
	r->rwqe_off += len;
	return 0;
}

/* ---------------- UD ---------------- */

/* The 40-byte GRH area of a UD receive holds the packet's IP header, as
 * rxe delivers it (IBTA Annex A17.4.5.2): for IPv4 the header sits in the
 * last 20 bytes, checksum included (rdma-core trusts an IPv4 header at
 * offset 20 by its checksum), the first 20 bytes zero; for IPv6 the whole
 * area.  The TOS / traffic class is the one it came with (IP_RECVTOS /
 * IPV6_RECVTCLASS: ibv_init_ah_from_wc answers with it); fields the UDP
 * socket does not show (IPv4 ID, TTL, flow label) are those we send with.
 * Returns the L3 type for wc.sl. */
static int ud_network_hdr(uint8_t grh[40], const struct sr_pkt *pkt, const struct sr_rx_env *env)
{
	uint32_t iplen = pkt->hdr_len + pkt->paylen + pkt->pad + SR_ICRC_BYTES + 8;
	memset(grh, 0, 40);
	if (IN6_IS_ADDR_V4MAPPED(&env->src.sin6_addr)) {
		uint8_t *ip = grh + 20;
		ip[0] = 0x45;
		ip[1] = env->tclass;
		uint16_t tl = htons((uint16_t)(iplen + 20));
		memcpy(ip + 2, &tl, 2);
		ip[6] = 0x40; /* DF */
		ip[8] = 64;
		ip[9] = 17;
		memcpy(ip + 12, &env->src.sin6_addr.s6_addr[12], 4);
		memcpy(ip + 16, &env->dst.sin6_addr.s6_addr[12], 4);
		uint32_t sum = 0;
		for (int i = 0; i < 20; i += 2)
			sum += (uint32_t)ip[i] << 8 | ip[i + 1];
		while (sum >> 16)
			sum = (sum & 0xffff) + (sum >> 16);
		ip[10] = (uint8_t)(~sum >> 8);
		ip[11] = (uint8_t)~sum;
		return SR_WC_L3_IPV4;
	}
	grh[0] = (uint8_t)(0x60 | env->tclass >> 4);
	grh[1] = (uint8_t)(env->tclass << 4);
	uint16_t pl = htons((uint16_t)iplen);
	memcpy(grh + 4, &pl, 2);
	grh[6] = 17;
	grh[7] = 64;
	memcpy(grh + 8, &env->src.sin6_addr, 16);
	memcpy(grh + 24, &env->dst.sin6_addr, 16);
	return SR_WC_L3_IPV6;
}

static void resp_ud(struct sr_qp *qp, struct sr_pkt *pkt, const struct sr_rx_env *env)
{
	struct sr_roce_qp *r = rqp(qp);
	uint8_t grh[40];

	if (pkt->deth_qkey != qp->attr.qkey) {
		r->stat_drop++; /* Q_Key violation */
		return;
	}
	/* UD has no RNR, and a datagram longer than the receive (GRH area
	 * included) is dropped with the receive left posted: both class D, as
	 * rxe's responder classes them (IBTA 9.9.3) */
	if (sr_rq_take_fit(qp, r->rwqe, 40 + (uint64_t)pkt->paylen) != SR_RQ_TAKEN) {
		r->stat_drop++;
		return;
	}
	r->rwqe_valid = true;
	r->rwqe_off = 0;
	int l3 = ud_network_hdr(grh, pkt, env);
	enum ibv_wc_opcode op = IBV_WC_RECV;
	int e = place_recv(qp, grh, 40);
	if (!e)
		e = place_recv(qp, pkt->payload, pkt->paylen);
	if (e) {
		/* a receive SGE naming no region, past its end, or unmapped
		 * since: rxe's malformed WQE (class A), the QP goes to ERR */
		recv_complete(qp, IBV_WC_LOC_QP_OP_ERR, op, 0, pkt, pkt->deth_sqpn, SR_WC_NOGRH);
		sr_resp_fatal(qp, pkt->psn, SR_AETH_NAK_REM_OP);
		return;
	}
	recv_complete(qp, IBV_WC_SUCCESS, op, 40 + pkt->paylen, pkt, pkt->deth_sqpn, l3);
}

/* ---------------- RC / UC ---------------- */

static bool qp_allows(struct sr_qp *qp, unsigned int access)
{
	return (qp->attr.qp_access_flags & access) == access;
}

/* Keep what a READ or atomic was, for its duplicates; false when out of
 * memory (most QPs never see one: the table comes with the first). */
static bool res_add(struct sr_qp *qp, uint32_t psn, uint32_t npkts, uint32_t rkey, bool atomic, uint64_t orig)
{
	struct sr_roce_qp *r = rqp(qp);

	if (!r->res && !(r->res = calloc(SR_RESP_RES, sizeof(*r->res))))
		return false;
	r->res[r->res_next++ % SR_RESP_RES] = (struct sr_resp_res){ .psn = psn,
								    .npkts = npkts,
								    .rkey = rkey,
								    .valid = true,
								    .atomic = atomic,
								    .orig = orig };
	return true;
}

/* The newest kept READ or atomic holding psn (an entry from 2^24 PSNs
 * ago may still be in the table, and is not this request's), or NULL. */
static const struct sr_resp_res *res_find(struct sr_qp *qp, uint32_t psn, bool atomic)
{
	struct sr_roce_qp *r = rqp(qp);

	for (uint32_t k = 1; r->res && k <= SR_RESP_RES; k++) {
		const struct sr_resp_res *e = &r->res[(r->res_next - k) % SR_RESP_RES];
		int32_t d = psn_diff(psn, e->psn);
		if (e->valid && e->atomic == atomic && d >= 0 && (uint32_t)d < e->npkts)
			return e;
	}
	return NULL;
}

static void resp_read(struct sr_qp *qp, struct sr_pkt *pkt, bool duplicate, const struct sr_rx_env *env)
{
	struct sr_roce_qp *r = rqp(qp);
	uint32_t len = pkt->reth_len;
	uint32_t mtu = r->mtu;
	uint32_t npkts = len ? (uint32_t)(((uint64_t)len + mtu - 1) / mtu) : 1;
	uint8_t *src = NULL;
	struct resp_tx *t;

	/* beyond the largest message (2 GiB, as rxe): its packets would not
	 * fit the PSN window, nor its count 32 bits (len + mtu - 1 wrapped) */
	if (len > SR_MAX_MSG_SIZE) {
		if (!duplicate)
			sr_resp_fatal(qp, pkt->psn, SR_AETH_NAK_INVALID_REQ);
		return;
	}

	/* a separate slot: the requester's batch may be in use up the stack */
	if (!(t = resp_tx()))
		return;
	/* small, in a receive batch: copied, to leave with the batch */
	bool defer = t->defer == qp && len <= SR_RESP_DEFER_BYTES && npkts <= SR_RESP_DEFER_PKTS;
	/* larger, in a receive batch with more to come: sent now, but for
	 * its last packet (below); what waits goes first, in the same
	 * sendmmsg.  The last request of a batch (a ping-pong's only one)
	 * sends all: its last packet would only leave alone a moment later. */
	bool keep_last = !defer && t->defer == qp && env->batch_more && npkts > 1, kept = false;
	if (!defer && !keep_last)
		resp_tx_flush(qp); /* what waits goes first */
	struct sr_tx_batch *b = resp_batch(t, qp);
	if (!qp_allows(qp, IBV_ACCESS_REMOTE_READ)) {
		if (!duplicate)
			sr_resp_fatal(qp, pkt->psn, SR_AETH_NAK_INVALID_REQ);
		return;
	}
	uint8_t *stage = NULL;
	if (defer) {
		if (b->npkts + npkts > SR_TX_MAX_PKTS || t->stage_used + len > SR_RESP_STAGE_BYTES)
			resp_tx_send(t);
		stage = t->stage + t->stage_used;
		t->stage_used += len;
	}
	pthread_rwlock_rdlock(&qp->rctx->mr_lock);
	if (len) {
		src = sr_rkey_lookup(qp, pkt->reth_rkey, pkt->reth_va, len, IBV_ACCESS_REMOTE_READ);
		/* registered, but unmapped by the application since (core/guard.h) */
		if (src && !(stage ? sr_place_guarded(stage, src, len) : sr_probe_read(src, len)))
			src = NULL;
		if (!src) {
			pthread_rwlock_unlock(&qp->rctx->mr_lock);
			if (!duplicate)
				sr_resp_fatal(qp, pkt->psn, SR_AETH_NAK_REM_ACCESS);
			return;
		}
		if (stage) {
			src = stage;
			pthread_rwlock_unlock(&qp->rctx->mr_lock);
		}
	} else if (stage) {
		pthread_rwlock_unlock(&qp->rctx->mr_lock);
	}
	if (!duplicate) {
		if (!res_add(qp, pkt->psn, npkts, pkt->reth_rkey, false, 0))
			sr_log("QP %u: out of memory: a duplicate of read psn %u will not be answered", sr_roce_qpn(qp),
			       pkt->psn);
		r->epsn = psn_add(r->epsn, npkts);
		r->msn = (r->msn + 1) & 0xffffff;
	} else if (psn_diff(psn_add(pkt->psn, npkts), r->epsn) > 0) {
		/* A retried read may be cut differently from the original and
		 * reach past what we have served: the rest is new work. */
		res_add(qp, pkt->psn, npkts, pkt->reth_rkey, false, 0);
		r->epsn = psn_add(pkt->psn, npkts);
		r->msn = (r->msn + 1) & 0xffffff;
		r->nak_seq_sent = false;
	}
	for (uint32_t i = 0; i < npkts; i++) {
		struct sr_pkt h;
		memset(&h, 0, sizeof(h));
		h.pkey = SR_DEFAULT_PKEY;
		h.dqpn = qp->attr.dest_qp_num;
		h.psn = psn_add(pkt->psn, i);
		if (npkts == 1)
			h.opcode = sr_roce_opcode(qp, IBV_OPCODE_RC_RDMA_READ_RESPONSE_ONLY);
		else if (i == 0)
			h.opcode = sr_roce_opcode(qp, IBV_OPCODE_RC_RDMA_READ_RESPONSE_FIRST);
		else if (i + 1 == npkts)
			h.opcode = sr_roce_opcode(qp, IBV_OPCODE_RC_RDMA_READ_RESPONSE_LAST);
		else
			h.opcode = sr_roce_opcode(qp, IBV_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE);
		h.aeth_syndrome = SR_AETH_ACK | SR_AETH_ACK_UNLIMITED;
		h.aeth_msn = r->msn;
		uint32_t off = i * mtu;
		uint32_t n = len - off < mtu ? len - off : mtu;
		if (!len)
			n = 0;
		struct iovec iov = { .iov_base = src ? src + off : NULL, .iov_len = n };
		if (keep_last && i + 1 == npkts) {
			/* The last packet carries an AETH, as the first: 4 bytes
			 * more than the middle ones, so it cannot end their GSO
			 * run and would be a datagram of its own.  Copied, it
			 * waits for the batch, where it leads the next response's
			 * first packets ([last, first, middle] is one run) or
			 * leaves at the batch's end: a 64 KiB response is two
			 * datagrams instead of three. */
			resp_tx_send(t);
			b = resp_batch(t, qp);
			if (sr_place_guarded(t->stage, iov.iov_base, n)) {
				t->stage_used = n;
				iov.iov_base = t->stage;
				sr_tx_batch_add(b, &h, &iov, 1, n);
				kept = true;
				break;
			}
			/* unmapped since the check: the kernel's copy fails
			 * instead, and the requester's retry gets the NAK */
		}
		if (!sr_tx_batch_add(b, &h, &iov, n ? 1 : 0, n)) {
			/* only an undeferred response: a deferred one has room (above;
			 * 16 packets take at most 64 of the 512 iovecs) */
			resp_tx_send(t);
			sr_tx_batch_add(b, &h, &iov, n ? 1 : 0, n);
		}
	}
	if (stage)
		return; /* leaves at sr_resp_end_batch, or before our next responder packet */
	/* the batch points into registered memory: send before unlocking
	 * (all but a kept last packet, which points into the stage) */
	if (!kept)
		resp_tx_send(t);
	pthread_rwlock_unlock(&qp->rctx->mr_lock);
}

static void send_atomic_ack(struct sr_qp *qp, uint32_t psn, uint64_t orig)
{
	struct sr_roce_qp *r = rqp(qp);
	struct sr_pkt h;
	memset(&h, 0, sizeof(h));
	h.opcode = sr_roce_opcode(qp, IBV_OPCODE_RC_ATOMIC_ACKNOWLEDGE);
	h.pkey = SR_DEFAULT_PKEY;
	h.dqpn = qp->attr.dest_qp_num;
	h.psn = psn;
	h.aeth_syndrome = SR_AETH_ACK | SR_AETH_ACK_UNLIMITED;
	h.aeth_msn = r->msn;
	h.atmack_orig = orig;
	/* in a receive batch: with the READ responses (no payload to keep) */
	struct resp_tx *t = resp_tx();
	if (t && t->defer == qp) {
		struct sr_tx_batch *b = resp_batch(t, qp);
		if (b->npkts >= SR_TX_MAX_PKTS)
			resp_tx_send(t);
		if (sr_tx_batch_add(b, &h, NULL, 0, 0))
			return;
	}
	resp_xmit(qp, &h);
}

static void resp_atomic(struct sr_qp *qp, struct sr_pkt *pkt)
{
	struct sr_roce_qp *r = rqp(qp);
	uint64_t orig;

	if (!qp_allows(qp, IBV_ACCESS_REMOTE_ATOMIC)) {
		sr_resp_fatal(qp, pkt->psn, SR_AETH_NAK_INVALID_REQ);
		return;
	}
	if (pkt->atm_va & 7) {
		sr_resp_fatal(qp, pkt->psn, SR_AETH_NAK_INVALID_REQ);
		return;
	}
	pthread_rwlock_rdlock(&qp->rctx->mr_lock);
	uint64_t *p = (uint64_t *)sr_rkey_lookup(qp, pkt->atm_rkey, pkt->atm_va, 8, IBV_ACCESS_REMOTE_ATOMIC);
	if (!p) {
		pthread_rwlock_unlock(&qp->rctx->mr_lock);
		sr_resp_fatal(qp, pkt->psn, SR_AETH_NAK_REM_ACCESS);
		return;
	}
	bool cas = (pkt->opcode & ~SR_OPCODE_XRC) == IBV_OPCODE_RC_COMPARE_SWAP;
	bool done = sr_atomic_guarded(p, cas, cas ? pkt->atm_compare : pkt->atm_swap_add, pkt->atm_swap_add, &orig);
	pthread_rwlock_unlock(&qp->rctx->mr_lock);
	if (!done) {
		/* registered, but unmapped by the application (core/guard.h) */
		sr_resp_fatal(qp, pkt->psn, SR_AETH_NAK_REM_ACCESS);
		return;
	}
	if (!res_add(qp, pkt->psn, 1, pkt->atm_rkey, true, orig))
		sr_log("QP %u: out of memory: a duplicate of atomic psn %u will not be answered", sr_roce_qpn(qp),
		       pkt->psn);
	r->epsn = psn_add(r->epsn, 1);
	r->msn = (r->msn + 1) & 0xffffff;
	send_atomic_ack(qp, pkt->psn, orig);
}

/* A duplicate (PSN before the expected one).  A READ is served again if
 * it starts within a READ kept in the table (rxe: a responder resource)
 * with its rkey: a retry, which may be cut differently from the original
 * and reach on into new work; an atomic gets its saved result.  Anything
 * else gets an ACK of what we have -- once after new requests came, then
 * at most every SR_DUP_ACK_NS: a requester retransmits after far longer
 * (4 ms at least here, rxe's and RNICs' timers alike), and a stream of
 * forged duplicates gets no stream of ACKs. */
#define SR_DUP_ACK_NS 1000000ull
static void resp_duplicate(struct sr_qp *qp, struct sr_pkt *pkt, const struct sr_rx_env *env)
{
	struct sr_roce_qp *r = rqp(qp);
	if (pkt->mask & SR_OP_READ) {
		const struct sr_resp_res *e = res_find(qp, pkt->psn, false);
		if (e && e->rkey == pkt->reth_rkey)
			resp_read(qp, pkt, true, env); /* re-execute: reads are idempotent */
		else
			r->stat_drop++;
		return;
	}
	if (pkt->mask & SR_OP_ATOMIC) {
		const struct sr_resp_res *e = res_find(qp, pkt->psn, true);
		if (e)
			send_atomic_ack(qp, pkt->psn, e->orig);
		else
			r->stat_drop++; /* too old to replay */
		return;
	}
	if (psn_diff(r->epsn, pkt->psn) > (int32_t)SR_RESP_PSN_WINDOW) {
		r->stat_drop++; /* further back than any requester retransmits */
		return;
	}
	uint64_t now = sr_rx_batch_ns ? sr_rx_batch_ns : sr_now_ns();
	if (r->dup_ack_ns && r->dup_ack_epsn == r->epsn && now - r->dup_ack_ns < SR_DUP_ACK_NS) {
		r->stat_drop++;
		return;
	}
	r->dup_ack_ns = now;
	r->dup_ack_epsn = r->epsn;
	r->ack_pending = true;
}

/* Opcode sequence check (IBTA 9.8.3.1): a FIRST must be followed by
 * MIDDLE/LAST of the same kind; nothing else may interleave. */
static bool seq_ok(struct sr_roce_qp *r, const struct sr_pkt *pkt)
{
	bool cont = (pkt->mask & (SR_OP_MIDDLE | SR_OP_LAST)) && !(pkt->mask & SR_OP_FIRST);
	if (r->in_send)
		return cont && (pkt->mask & SR_OP_SEND);
	if (r->in_write)
		return cont && (pkt->mask & SR_OP_WRITE);
	return !cont;
}

static void resp_rc_uc(struct sr_qp *qp, struct sr_pkt *pkt, const struct sr_rx_env *env)
{
	struct sr_roce_qp *r = rqp(qp);
	bool rc = sr_qp_transport(qp) == IBV_QPT_RC;
	int32_t d = psn_diff(pkt->psn, r->epsn);

	if (rc) {
		if (d > (int32_t)SR_RESP_PSN_WINDOW) {
			r->stat_drop++; /* no gap a requester leaves: not its request */
			return;
		}
		if (d > 0) {
			if (!r->nak_seq_sent) {
				r->nak_seq_sent = true;
				r->ack_pending = false;
				send_aeth(qp, r->epsn, SR_AETH_NAK_PSN_SEQ);
				sr_stat_add(qp->stats, SR_STAT_OUT_OF_SEQ, 1);
			}
			return;
		}
		if (d < 0) {
			resp_duplicate(qp, pkt, env);
			return;
		}
		r->nak_seq_sent = false;
	} else {
		/* UC: a gap loses the message in progress; resynchronise on the next FIRST/ONLY */
		if (d != 0) {
			if (r->in_send || r->in_write) {
				r->in_send = r->in_write = false;
				if (r->rwqe_valid)
					r->rwqe_off = 0; /* reuse the receive WQE for the next message */
			}
			r->uc_drop = !(pkt->mask & SR_OP_FIRST);
			r->epsn = pkt->psn;
		}
		if (r->uc_drop) {
			if (pkt->mask & SR_OP_FIRST)
				r->uc_drop = false;
			else {
				r->epsn = psn_add(pkt->psn, 1);
				return;
			}
		}
	}

	if (!seq_ok(r, pkt)) {
		if (rc) {
			sr_resp_fatal(qp, pkt->psn, SR_AETH_NAK_INVALID_REQ);
		} else {
			r->in_send = r->in_write = false;
			r->uc_drop = !(pkt->mask & SR_OP_FIRST);
			r->epsn = psn_add(pkt->psn, 1);
		}
		return;
	}

	if (pkt->mask & SR_OP_READ) {
		resp_read(qp, pkt, false, env);
		return;
	}
	if (pkt->mask & SR_OP_ATOMIC) {
		resp_atomic(qp, pkt);
		return;
	}

	/* receive WQE needed: SEND first/only, WRITE_WITH_IMM last/only */
	bool need_rwqe = (pkt->mask & SR_OP_SEND) ? (pkt->mask & SR_OP_FIRST) != 0 : (pkt->mask & SR_OP_RWR) != 0;
	if (need_rwqe && !r->rwqe_valid) {
		if (!sr_rq_take(qp, r->rwqe)) {
			if (rc) {
				/* RNR NAK: the requester retries after min_rnr_timer.  The
				 * rest of this message is already on its way: drop it
				 * quietly (no sequence NAK) until the retry arrives. */
				r->ack_pending = false;
				r->nak_seq_sent = true;
				send_aeth(qp, pkt->psn, SR_AETH_RNR_NAK | (qp->attr.min_rnr_timer & 0x1f));
				sr_stat_add(qp->stats, SR_STAT_SEND_RNR, 1);
				return;
			}
			/* UC: no receive buffer, the message is dropped */
			r->uc_drop = !(pkt->mask & SR_OP_LAST);
			r->epsn = psn_add(pkt->psn, 1);
			return;
		}
		r->rwqe_valid = true;
		r->rwqe_off = 0;
	}

	if (pkt->mask & SR_OP_SEND) {
		int e = place_recv(qp, pkt->payload, pkt->paylen);
		if (e) {
			enum ibv_wc_status st = e == -1 ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_QP_OP_ERR;
			recv_complete(qp, st, IBV_WC_RECV, 0, pkt, 0, SR_WC_NOGRH);
			r->in_send = false;
			/* a receive SGE that cannot be written is class A on UC
			 * too (rxe); a UC message too long for it is dropped */
			if (rc || e != -1)
				sr_resp_fatal(qp, pkt->psn, e == -1 ? SR_AETH_NAK_INVALID_REQ : SR_AETH_NAK_REM_OP);
			else {
				r->uc_drop = !(pkt->mask & SR_OP_LAST);
				r->epsn = psn_add(pkt->psn, 1);
			}
			return;
		}
		r->in_send = !(pkt->mask & SR_OP_LAST);
		r->epsn = psn_add(r->epsn, 1);
		if (rc && pkt->ackreq)
			r->ack_pending = true;
		if (pkt->mask & SR_OP_LAST) {
			/* Send with Invalidate: as rxe, the payload is placed and
			 * acknowledged whatever becomes of the invalidation; one
			 * that fails completes the receive with REM_INV_REQ_ERR and
			 * takes the QP to the error state. */
			bool inv_failed = (pkt->mask & SR_OP_IETH) && sr_rkey_invalidate_remote(qp, pkt->ieth_rkey);

			r->msn = (r->msn + 1) & 0xffffff;
			ack_before_completion(qp);
			if (inv_failed) {
				recv_complete(qp, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV, 0, pkt, 0, SR_WC_NOGRH);
				sr_qp_to_error(qp, IBV_EVENT_QP_REQ_ERR);
				return;
			}
			recv_complete(qp, IBV_WC_SUCCESS, IBV_WC_RECV, (uint32_t)r->rwqe_off, pkt, 0, SR_WC_NOGRH);
		}
		return;
	}

	/* RDMA WRITE */
	if (pkt->mask & SR_OP_FIRST) {
		if (!qp_allows(qp, IBV_ACCESS_REMOTE_WRITE)) {
			if (rc)
				sr_resp_fatal(qp, pkt->psn, SR_AETH_NAK_INVALID_REQ);
			else {
				r->uc_drop = !(pkt->mask & SR_OP_LAST);
				r->epsn = psn_add(pkt->psn, 1);
			}
			return;
		}
		r->write_va = pkt->reth_va;
		r->write_rkey = pkt->reth_rkey;
		r->write_resid = pkt->reth_len;
		r->write_len = pkt->reth_len;
		/* the whole announced range must be ours to write */
		pthread_rwlock_rdlock(&qp->rctx->mr_lock);
		bool ok = !pkt->reth_len ||
			  sr_rkey_lookup(qp, pkt->reth_rkey, pkt->reth_va, pkt->reth_len, IBV_ACCESS_REMOTE_WRITE);
		pthread_rwlock_unlock(&qp->rctx->mr_lock);
		if (!ok) {
			if (rc)
				sr_resp_fatal(qp, pkt->psn, SR_AETH_NAK_REM_ACCESS);
			else {
				r->uc_drop = !(pkt->mask & SR_OP_LAST);
				r->epsn = psn_add(pkt->psn, 1);
			}
			return;
		}
	}
	/* payload sizes: every packet but the last is exactly one MTU, and
	 * the total never exceeds the RETH length */
	if (pkt->paylen > r->write_resid || (!(pkt->mask & SR_OP_LAST) && pkt->paylen != r->mtu) ||
	    ((pkt->mask & SR_OP_LAST) && pkt->paylen != r->write_resid)) {
		if (rc)
			sr_resp_fatal(qp, pkt->psn, SR_AETH_NAK_INVALID_REQ);
		else {
			r->in_write = false;
			r->uc_drop = !(pkt->mask & SR_OP_LAST);
			r->epsn = psn_add(pkt->psn, 1);
		}
		return;
	}
	if (pkt->paylen) {
		pthread_rwlock_rdlock(&qp->rctx->mr_lock);
		uint8_t *dst = sr_rkey_lookup(qp, r->write_rkey, r->write_va, pkt->paylen, IBV_ACCESS_REMOTE_WRITE);
		if (dst && !sr_place_guarded(dst, pkt->payload, pkt->paylen))
			dst = NULL; /* unmapped by the application (core/guard.h) */
		pthread_rwlock_unlock(&qp->rctx->mr_lock);
		if (!dst) { /* deregistered or unmapped under us */
			if (rc)
				sr_resp_fatal(qp, pkt->psn, SR_AETH_NAK_REM_ACCESS);
			return;
		}
		r->write_va += pkt->paylen;
		r->write_resid -= pkt->paylen;
	}
	r->in_write = !(pkt->mask & SR_OP_LAST);
	r->epsn = psn_add(r->epsn, 1);
	if (rc && pkt->ackreq)
		r->ack_pending = true;
	if (pkt->mask & SR_OP_LAST) {
		r->msn = (r->msn + 1) & 0xffffff;
		if (pkt->mask & SR_OP_IMMDT) {
			ack_before_completion(qp);
			recv_complete(qp, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, r->write_len, pkt, 0, SR_WC_NOGRH);
		}
	}
}

void sr_resp_rx(struct sr_qp *qp, struct sr_pkt *pkt, const struct sr_rx_env *env)
{
	switch (sr_qp_transport(qp)) {
	case IBV_QPT_UD:
		resp_ud(qp, pkt, env);
		break;
	case IBV_QPT_RC:
	case IBV_QPT_UC:
		resp_rc_uc(qp, pkt, env);
		break;
	default:
		break;
	}
}
