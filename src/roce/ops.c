/* RoCEv2 over UDP: the transport ops core/ calls (struct
 * sr_transport_ops): a QP's creation, modification and destruction, its
 * kicks and timers, and the table itself. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ipc_client.h"
#include "core/fault.h"
#include "roce/net.h"

uint32_t sr_roce_qpn(struct sr_qp *qp)
{
	return qp->ibqp.qp_base.qp_num;
}
static int roce_qp_create(struct sr_qp *qp)
{
	struct sr_roce_qp *r;
	int err = 0;
	struct sr_daemon_conn *d = sr_ctx_daemon(qp->ctx, &err);

	if (!d)
		return err ? -err : EAGAIN;
	r = calloc(1, sizeof(*r));
	if (!r)
		return ENOMEM;
	/* a TGT QP's messages go to any SRQ of its domain */
	uint32_t rsge = qp->ibqp.qp_base.qp_type == IBV_QPT_XRC_RECV ? SR_MAX_SGE :
			qp->srq					     ? qp->srq->rq.max_sge :
								       qp->rq.max_sge;
	r->rwqe = calloc(1, sizeof(struct sr_recv_wqe) + rsge * sizeof(struct ibv_sge));
	if (!r->rwqe) {
		free(r);
		return ENOMEM;
	}
	struct sr_ipc_qpn req = { .qp_type = sr_qp_transport(qp) };
	int64_t qpn = sr_daemon_call(d, SR_IPC_ALLOC_QPN, &req, sizeof(req));
	if (qpn < 0) {
		free(r->rwqe);
		free(r);
		if (qpn == -EDQUOT) {
			/* ibv_create_qp's word for out of resources */
			sr_log("softrdmad refused a QP number: this user's quota of QPNs is used up");
			return ENOMEM;
		}
		return (int)-qpn;
	}
	qp->ibqp.qp_base.qp_num = (uint32_t)qpn;
	r->sport[0] = r->sport[1] = sr_roce_random_sport();
	/* for local peers' flow sockets (ipc.h, "Ports"); a daemon without
	 * it answers -EOPNOTSUPP, and peers learn the port from our packets */
	struct sr_ipc_qp_port port = { .qpn = (uint32_t)qpn, .port = r->sport[0] };
	if (sr_qp_transport(qp) != IBV_QPT_UD)
		sr_daemon_call(d, SR_IPC_QP_PORT, &port, sizeof(port));
	/* SOFTRDMA_GSO=0: one datagram per sendmsg (packet captures then show
	 * each RoCE packet as the wire carries it) */
	const char *gso = getenv("SOFTRDMA_GSO");
	r->no_gso = gso && !strcmp(gso, "0");
	/* deferring small requests for a batch and delaying ACKs can be
	 * turned off, to compare (bench/run.sh) */
	const char *th = getenv("SOFTRDMA_TX_HOLD"), *ah = getenv("SOFTRDMA_ACK_HOLD");
	r->tx_defer_on = !th || strcmp(th, "0");
	r->delayed_ack_on = !ah || strcmp(ah, "0");
	r->tx4 = r->tx6 = r->rx_fd = -1;
	qp->tp = r;
	return 0;
}

static void roce_qp_destroy(struct sr_qp *qp)
{
	struct sr_roce_qp *r = rqp(qp);
	if (!r)
		return;
	sr_resp_flush_ack(qp); /* one held for a request that will not come */
	if (sr_faults_on(qp))
		sr_roce_fault_drain(qp); /* what the delay fault holds was on its way */
	sr_roce_rx_socket_close(qp);
	/* off the list first: an eviction in progress finishes before */
	pthread_mutex_lock(&qp->ctx->txs_lock);
	sr_roce_txs_unlink(qp->ctx, qp);
	pthread_mutex_unlock(&qp->ctx->txs_lock);
	if (r->tx4 >= 0)
		close(r->tx4);
	if (r->tx6 >= 0)
		close(r->tx6);
	struct sr_daemon_conn *d = qp->ctx->daemon;
	if (d) {
		struct sr_ipc_qpn req = { .qpn = sr_roce_qpn(qp) };
		sr_daemon_call(d, SR_IPC_FREE_QPN, &req, sizeof(req));
	}
	free(r->rwqe);
	free(r->res);
	free(r);
	qp->tp = NULL;
}

static uint32_t window_for(uint32_t mtu, int rcvbuf)
{
	/* A window's worth of packets must fit the peer's socket receive
	 * buffer (skb truesize is ~mtu + 256 per datagram without GRO).  We
	 * size it by our own buffer, assuming a peer configured like us:
	 * 208 KiB (the unprivileged default) gives ~22 packets of 4 KiB. */
	if (rcvbuf <= 0)
		rcvbuf = 212992;
	uint32_t w = (uint32_t)rcvbuf / 2 / (mtu + 256);
	return w < 8 ? 8 : w > 512 ? 512 : w;
}

static int roce_qp_modify(struct sr_qp *qp, struct ibv_qp_attr *attr, int mask, enum ibv_qp_state old)
{
	struct sr_roce_qp *r = rqp(qp);
	enum ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : old;
	enum ibv_qp_type t = sr_qp_transport(qp);

	r->mtu = (uint32_t)sr_mtu_enum_to_bytes(t == IBV_QPT_UD ? qp->ctx->active_mtu : qp->attr.path_mtu);
	if (mask & IBV_QP_RQ_PSN) {
		r->epsn = qp->attr.rq_psn;
	}
	if (mask & IBV_QP_SQ_PSN) {
		r->next_psn = qp->attr.sq_psn;
		r->una_psn = qp->attr.sq_psn;
		sr_rec_init(&r->rec, r->next_psn);
		r->cc = (struct sr_roce_cc){ 0 };
	}
	if (mask & IBV_QP_RETRY_CNT)
		r->retry_left = qp->attr.retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		r->rnr_retry_left = qp->attr.rnr_retry;
	/* The window follows the receive buffer, which is known only once
	 * the socket exists (RTR): a cwnd still at the window it had before
	 * (nothing lost since) follows it up. */
	uint32_t old_window = r->window;
	r->window = window_for(r->mtu, r->rcvbuf);
	if (!r->cwnd || r->cwnd > r->window || r->cwnd == old_window)
		r->cwnd = r->window;

	if (next == IBV_QPS_RTR && old == IBV_QPS_INIT && t != IBV_QPT_UD)
		sr_roce_rx_socket_open(qp);
	if (next == IBV_QPS_RESET) {
		if (sr_faults_on(qp))
			sr_delay_clear(&qp->faults->delay);
		sr_roce_rx_socket_close(qp);
		sr_resp_reset(qp);
		r->retrans_deadline = r->rnr_deadline = r->pace_deadline = 0;
		r->rd_outstanding = 0;
		r->rd_resp_pkts = 0;
		r->noack_pkts = 0;
	}
	if (next == IBV_QPS_ERR) {
		r->retrans_deadline = r->rnr_deadline = r->pace_deadline = 0;
	}
	return 0;
}

/* A modify to RTR of an RC/UC QP whose peer is on this host (its address
 * one of the device's): the port the peer sends from, if softrdmad knows
 * it (a QP of our user), for its flow socket to be there from the first
 * packet on.  Without qp->lock: the answer may come behind datagrams for
 * this QP, whose delivery takes that lock. */
static void roce_modify_prepare(struct sr_qp *qp, const struct ibv_qp_attr *attr, int mask)
{
	struct sr_roce_qp *r = rqp(qp);
	struct sr_context *ctx = qp->ctx;
	struct sr_daemon_conn *d = ctx->daemon;
	bool local = false;

	if (!r || !d || sr_qp_transport(qp) == IBV_QPT_UD || !(mask & IBV_QP_STATE) || attr->qp_state != IBV_QPS_RTR ||
	    !(mask & IBV_QP_DEST_QPN) || !(mask & IBV_QP_AV))
		return;
	for (int i = 0; i < ctx->ngid && !local; i++)
		local = !memcmp(&ctx->gid[i].gid, &attr->ah_attr.grh.dgid, sizeof(union ibv_gid));
	if (!local)
		return;
	struct sr_ipc_qp_port q = { .qpn = attr->dest_qp_num };
	int64_t port = sr_daemon_call(d, SR_IPC_QP_PORT_GET, &q, sizeof(q));
	atomic_store(&r->peer_sport_hint, port > 0 && port <= 0xffff ? (uint16_t)port : 0);
}

static void roce_sq_kick(struct sr_qp *qp)
{
	uint64_t now = sr_now_ns();
	rqp(qp)->last_post_ns = now;
	atomic_store_explicit(&qp->ctx->prog.last_post_ns, now, memory_order_relaxed);
	/* a post that sent took a system call: time the gap to the next from its end */
	qp->post_end_ns = sr_req_progress_kick(qp, true) ? sr_now_ns() : now;
}
static void roce_rq_kick(struct sr_qp *qp)
{
}

static void roce_on_timer(struct sr_qp *qp, uint64_t now)
{
	sr_resp_timer(qp, now);
	sr_comp_timer(qp, now);
	if (sr_faults_on(qp))
		sr_roce_fault_timer(qp, now);
}

static uint64_t roce_next_deadline(struct sr_qp *qp)
{
	if (!qp->tp)
		return 0;
	uint64_t d = sr_fault_earlier(sr_comp_deadline(qp), sr_resp_deadline(qp));
	if (sr_faults_on(qp))
		return sr_fault_earlier(d, sr_fault_deadline(qp));
	return d;
}

const struct sr_transport_ops sr_roce_ops = {
	.qp_create = roce_qp_create,
	.qp_destroy = roce_qp_destroy,
	.qp_modify = roce_qp_modify,
	.modify_prepare = roce_modify_prepare,
	.sq_kick = roce_sq_kick,
	.rq_kick = roce_rq_kick,
	.on_timer = roce_on_timer,
	.next_deadline = roce_next_deadline,
	.on_readable = sr_roce_on_readable,
	.dgram_qpn = sr_roce_dgram_qpn,
	.deliver = sr_roce_deliver,
	.rx_flush = sr_roce_rx_flush,
	.sq_release = sr_req_progress,
};
