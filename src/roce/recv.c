/* RoCEv2 over UDP: receiving -- draining a flow socket in recvmmsg
 * batches (UDP GRO), checking each packet (ICRC, P_Key, sequence) and
 * dispatching it to the requester's completer or the responder; the
 * datagrams the daemon routes to us, and those a flow socket caught for
 * another QP. */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include "common/ipc_client.h"
#include "common/cmsg.h"
#include "roce/net.h"

static bool icrc_ok(struct sr_qp *qp, const uint8_t *buf, size_t len, const struct sr_rx_env *env)
{
	if (!qp->ctx->dev->crc)
		return true;
	struct sr_icrc_env e = {
		.ipv6 = !is_v4(&env->src),
		.saddr = env->src.sin6_addr,
		.daddr = env->dst.sin6_addr,
		.sport = ntohs(env->src.sin6_port),
		.dport = SR_ROCE_UDP_PORT,
		.ipv4_id = env->ipv4_id_guess,
		.ipv4_df = true,
	};
	return sr_icrc_verify(&e, buf, len);
}

static bool pkey_ok(uint16_t pkey)
{
	return (pkey & 0x7fff) == 0x7fff;
}

/* A request with the PSN the responder expects, or a response to a PSN
 * the requester has sent and not seen acknowledged. */
static bool in_sequence(struct sr_qp *qp, const struct sr_pkt *pkt)
{
	struct sr_roce_qp *r = rqp(qp);

	if (pkt->mask & SR_OP_REQ)
		return pkt->psn == r->epsn;
	return qp->attr.qp_state != IBV_QPS_RTR && psn_diff(pkt->psn, r->una_psn) >= 0 &&
	       psn_diff(pkt->psn, r->next_psn) < 0;
}

/* One datagram addressed to this QP (qp->lock held). */
static void roce_rx_one(struct sr_qp *qp, const uint8_t *buf, size_t len, const struct sr_rx_env *env)
{
	struct sr_roce_qp *r = rqp(qp);
	struct sr_pkt pkt;
	enum ibv_qp_type t = sr_qp_transport(qp);

	sr_stat_add(qp->stats, SR_STAT_RCVD_PKTS, 1);
	sr_stat_add(qp->stats, SR_STAT_RCVD_BYTES, len);
	if (sr_pkt_parse(&pkt, buf, len) || !pkey_ok(pkt.pkey)) {
		r->stat_drop++;
		return;
	}
	if (!icrc_ok(qp, buf, len, env)) {
		sr_stat_add(qp->stats, SR_STAT_CRC_ERR, 1);
		r->stat_drop++;
		return;
	}
	/* the opcode must belong to this QP's transport */
	uint32_t need = sr_qp_is_xrc(qp) ? SR_OP_XRC :
			t == IBV_QPT_RC	 ? SR_OP_RC :
			t == IBV_QPT_UC	 ? SR_OP_UC :
					   SR_OP_UD;
	/* ... and its end: an XRC INI end takes responses, a TGT end requests */
	enum ibv_qp_type qt = qp->ibqp.qp_base.qp_type;
	if (!(pkt.mask & need) || (qt == IBV_QPT_XRC_SEND && (pkt.mask & SR_OP_REQ)) ||
	    (qt == IBV_QPT_XRC_RECV && !(pkt.mask & SR_OP_REQ))) {
		r->stat_drop++;
		return;
	}
	enum ibv_qp_state st = qp->attr.qp_state;
	if (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_ERR) {
		r->stat_drop++;
		return;
	}
	if (t == IBV_QPT_UD) {
		if (env->via_daemon && r->n_ud_flows)
			sr_roce_ud_flow_learn(qp, pkt.deth_sqpn, env);
		sr_resp_rx(qp, &pkt, env);
		return;
	}
	if (memcmp(&env->src.sin6_addr, &qp->av.dst.sin6_addr, 16)) {
		r->stat_drop++; /* not from our connected peer */
		return;
	}
	/* The peer's port is learnt from its first packet in sequence (any
	 * first packet for UC, which follows the sender's PSN).  Once known,
	 * a packet from the peer's address but another port is dropped
	 * without an answer unless it is in sequence: then the peer moved
	 * (its send socket was reopened on another port); or unless it is an
	 * RC request already taken (a retry), which is answered but teaches
	 * nothing: a peer that moved after its ACK was lost gets it only so,
	 * and the answer goes to the peer's port 4791, not to the sender. */
	uint16_t port = ntohs(env->src.sin6_port);
	bool learn = false;
	if (port != r->peer_sport) {
		bool in_seq = in_sequence(qp, &pkt);
		bool retry = t == IBV_QPT_RC && (pkt.mask & SR_OP_REQ) && psn_diff(pkt.psn, r->epsn) < 0;
		if (r->peer_sport && !in_seq && !retry) {
			r->stat_wrong_port++;
			r->stat_drop++;
			return;
		}
		learn = in_seq || t == IBV_QPT_UC;
	}
	if ((pkt.mask & SR_OP_REQ) && qt == IBV_QPT_XRC_RECV)
		sr_roce_xrc_resp_rx(qp, &pkt, env);
	else if (pkt.mask & SR_OP_REQ)
		sr_resp_rx(qp, &pkt, env);
	else if (st != IBV_QPS_RTR)
		sr_comp_rx(qp, &pkt);
	if (learn && qp->attr.qp_state != IBV_QPS_ERR && !qp->dead)
		sr_roce_peer_port_learn(qp, port);
}

/* The QP a datagram through the daemon is for (core/ routes it). */
bool sr_roce_dgram_qpn(const uint8_t *data, uint32_t len, uint32_t *qpn)
{
	if (len < SR_BTH_BYTES)
		return false;
	*qpn = sr_bth_dqpn(data);
	return true;
}

/* Datagram routed to us by the daemon (qp->lock held). */
void sr_roce_deliver(struct sr_qp *qp, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len)
{
	struct sr_rx_env env = { .src = meta->src, .dst = meta->dst, .tclass = meta->tclass, .via_daemon = true };
	roce_rx_one(qp, data, len, &env);
	sr_resp_flush_ack(qp);
	sr_req_progress(qp);
}

/* Receive buffers of the thread doing the receiving (progress thread or
 * a polling application thread); GRO hands us up to 64 KiB at once. */
#define SR_RX_GRO_BUF 65536
#define SR_RX_GRO_BATCH 8

/* Datagrams a flow socket received for another QP (two flows on one UDP
 * 4-tuple: a source-port hash collision).  They are set aside while the
 * receiving QP is locked and routed after (sr_roce_rx_flush): to a QP of
 * this context if it has one, else through the daemon. */
#define SR_REDO_MAX 64
struct sr_redo {
	struct sr_ipc_pkt meta;
	uint8_t *data;
};
static __thread struct sr_redo redo[SR_REDO_MAX];
static __thread int nredo;

static void rx_datagram(struct sr_qp *qp, const uint8_t *b, size_t len, struct sr_rx_env *env)
{
	if (len >= SR_BTH_BYTES) {
		if (sr_bth_dqpn(b) != sr_roce_qpn(qp)) {
			if (nredo < SR_REDO_MAX && (redo[nredo].data = malloc(len))) {
				memcpy(redo[nredo].data, b, len);
				redo[nredo].meta = (struct sr_ipc_pkt){ .src = env->src,
									.dst = env->dst,
									.len = (uint32_t)len,
									.tclass = env->tclass };
				nredo++;
			}
			return;
		}
	}
	roce_rx_one(qp, b, len, env);
}

void sr_roce_rx_flush(struct sr_context *ctx)
{
	while (nredo) {
		struct sr_redo x = redo[--nredo];
		uint8_t *b = x.data;
		bool local;
		pthread_mutex_lock(&ctx->lock);
		local = sr_ctx_find_qp(ctx, sr_bth_dqpn(b)) != NULL;
		pthread_mutex_unlock(&ctx->lock);
		if (local)
			sr_ctx_deliver(ctx, &x.meta, b, x.meta.len);
		else if (ctx->daemon)
			sr_daemon_forward(ctx->daemon, &x.meta, b, x.meta.len);
		free(b);
	}
}

static void rx_drain(struct sr_qp *qp, int fd, const struct sockaddr_in6 *local);

void sr_roce_on_readable(struct sr_qp *qp, int fd_unused)
{
	struct sr_roce_qp *r = rqp(qp);

	if (r->rx_fd >= 0)
		rx_drain(qp, r->rx_fd, &qp->av.src);
	for (int i = 0; i < r->n_ud_flows && !qp->dead; i++)
		if (r->ud_flows[i].fd >= 0)
			rx_drain(qp, r->ud_flows[i].fd, &r->ud_flows[i].local);
}

/* Receive what flow socket fd (bound to local) holds, in batches. */
static void rx_drain(struct sr_qp *qp, int fd, const struct sockaddr_in6 *local)
{
	struct mmsghdr msgs[SR_RX_GRO_BATCH];
	struct iovec iov[SR_RX_GRO_BATCH];
	struct sockaddr_storage names[SR_RX_GRO_BATCH];
	union {
		char buf[2 * CMSG_SPACE(sizeof(int))]; /* UDP_GRO, IP_TOS / IPV6_TCLASS */
		struct cmsghdr align;
	} cbufs[SR_RX_GRO_BATCH];
	struct sr_rx_env env;

	uint8_t *rx_bufs = sr_tls_buf(SR_TLS_RX, (size_t)SR_RX_GRO_BATCH * SR_RX_GRO_BUF);
	if (!rx_bufs)
		return;
	memset(&env, 0, sizeof(env));
	env.dst = *local;
	sr_resp_defer_reads(qp);
	for (int rounds = 0; rounds < 16; rounds++) {
		for (int i = 0; i < SR_RX_GRO_BATCH; i++) {
			iov[i].iov_base = rx_bufs + (size_t)i * SR_RX_GRO_BUF;
			iov[i].iov_len = SR_RX_GRO_BUF;
			memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
			msgs[i].msg_hdr.msg_name = &names[i];
			msgs[i].msg_hdr.msg_namelen = sizeof(names[i]);
			msgs[i].msg_hdr.msg_control = cbufs[i].buf;
			msgs[i].msg_hdr.msg_controllen = sizeof(cbufs[i].buf);
		}
		int n = recvmmsg(fd, msgs, SR_RX_GRO_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			break;
		sr_rx_batch_ns = sr_now_ns();
		for (int i = 0; i < n && !qp->dead && qp->attr.qp_state != IBV_QPS_ERR; i++) {
			if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC)
				continue;
			size_t len = msgs[i].msg_len, seg = len;
			sr_rx_account(len);
			const uint8_t *b = iov[i].iov_base;
			env.tclass = 0;
			for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msgs[i].msg_hdr); cm;
			     cm = CMSG_NXTHDR(&msgs[i].msg_hdr, cm)) {
				if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
					int g;
					memcpy(&g, CMSG_DATA(cm), sizeof(g));
					if (g > 0)
						seg = (size_t)g;
				} else {
					sr_cmsg_tclass(cm, &env.tclass);
				}
			}
			from_sockaddr(&names[i], &env.src);
			/* segment k of a coalesced burst was sent as GSO segment k */
			uint16_t k = 0;
			for (size_t off = 0; off < len; off += seg, k++) {
				env.ipv4_id_guess = k;
				env.batch_more = off + seg < len || i + 1 < n;
				rx_datagram(qp, b + off, len - off < seg ? len - off : seg, &env);
				if (qp->dead || qp->attr.qp_state == IBV_QPS_ERR)
					break;
			}
		}
		sr_resp_end_batch(qp);
		sr_req_progress(qp);
		if (n < SR_RX_GRO_BATCH)
			break;
	}
	/* what is still due once the socket is drained */
	sr_rx_expect((uint64_t)rqp(qp)->rd_resp_pkts * rqp(qp)->mtu);
	sr_rx_batch_ns = 0;
	sr_resp_defer_reads(NULL);
}
