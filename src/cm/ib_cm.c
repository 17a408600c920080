/* The IB Communication Manager over RoCEv2, the protocol under rdma_cm on
 * a Soft-RoCE device: connection (REQ, MRA, REP, RTU, REJ), disconnection
 * (DREQ, DREP) and service ID resolution for UD (SIDR_REQ, SIDR_REP), as
 * 256-byte MADs in UD datagrams from QP1 to QP1 (see cm_mad.h for the
 * field meanings on RoCE).
 *
 * Sending needs no daemon: MADs leave from this process's own UDP socket
 * for the peer's port 4791, with DETH SrcQP 1 so the peer answers QP1.
 * Receiving does: softrdmad owns port 4791 and routes each MAD to the
 * process owning the Communication ID it names, or, for a REQ/SIDR_REQ, to
 * the process listening on its Service ID (see common/ipc.h).  They arrive
 * in cm_pkt(), called by the daemon client in the CM thread.
 *
 * Retries as the kernel's CM: a REQ, REP or DREQ (and SIDR_REQ) is resent
 * every CM response timeout plus twice the packet lifetime until an answer
 * comes, max_cm_retries times; then the connection fails with
 * UNREACHABLE / DISCONNECTED.  An MRA stretches the wait.  A duplicate REQ
 * gets the REP again; a duplicate REP the RTU again; a duplicate DREQ the
 * DREP again. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/ip.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "cm/cm.h"
#include "common/udp_port.h"
#include "common/ipc_client.h"
#include "common/env.h"
#include "common/thread.h"
#include "roce/wire/roce_hdr.h"
#include "common/sock.h"
#include "common/cmsg.h"

#define CM_PKT_BYTES (SR_BTH_BYTES + SR_DETH_BYTES + SR_MAD_BYTES + SR_ICRC_BYTES)

uint64_t sr_cm_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* How long to wait for an answer before resending: the peer's response
 * time plus a round trip of packet lifetimes (the kernel's cm timeout_ms). */
uint64_t sr_cm_retry_ns(uint8_t response_timeout)
{
	return sr_cm_timeout_ns(response_timeout) + 2 * sr_cm_timeout_ns(SR_CMA_PACKET_LIFETIME);
}

void sr_cm_wake(void)
{
	uint64_t one = 1;
	if (sr_cm.wake_fd >= 0 && write(sr_cm.wake_fd, &one, sizeof(one)) < 0) {
		/* the counter saturating is harmless: the thread is awake */
	}
}

void sr_cm_arm(struct sr_cm_id *id, enum sr_cm_timer t, uint64_t ns)
{
	id->timer = t;
	id->deadline = t == CM_T_NONE ? 0 : sr_cm_now() + ns;
	if (t != CM_T_NONE)
		sr_cm_wake();
}

uint64_t sr_cm_new_tid(uint32_t lcid)
{
	/* as the kernel: agent's hi_tid above, the comm ID below */
	return sr_cm.hi_tid << 32 | lcid;
}

/* ---- sending ---- */

static int tx_socket(bool v4)
{
	int *fdp = v4 ? &sr_cm.tx4 : &sr_cm.tx6;
	uint16_t *portp = v4 ? &sr_cm.tx4_port : &sr_cm.tx6_port;
	int one = 1, fd;

	if (*fdp >= 0)
		return *fdp;
	fd = sr_socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (v4) {
		int pmtu = IP_PMTUDISC_DO; /* DF: IPv4 ID 0, which the ICRC covers */
		struct sockaddr_in s = { .sin_family = AF_INET };
		socklen_t l = sizeof(s);
		setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
		if (sr_udp_bind_low(fd, (struct sockaddr *)&s, sizeof(s)) || getsockname(fd, (struct sockaddr *)&s, &l))
			goto err;
		*portp = ntohs(s.sin_port);
	} else {
		int pmtu = IPV6_PMTUDISC_DO;
		struct sockaddr_in6 s = { .sin6_family = AF_INET6 };
		socklen_t l = sizeof(s);
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof(pmtu));
		if (sr_udp_bind_low(fd, (struct sockaddr *)&s, sizeof(s)) || getsockname(fd, (struct sockaddr *)&s, &l))
			goto err;
		*portp = ntohs(s.sin6_port);
	}
	*fdp = fd;
	return fd;
err : {
	int e = errno;
	close(fd);
	return -e;
}
}

static bool dev_crc(const struct sockaddr_in6 *local)
{
	struct sr_cm_dev *d = sr_cm_dev_by_addr(local, NULL);
	return d ? d->crc : true;
}

/* One MAD from QP1 at src to QP1 at dst:4791 (ports of src/dst ignored),
 * with IPv4 TOS / IPv6 traffic class tclass: the kernel's CM sends on the
 * connection's path, or answers with the request's. */
int sr_cm_send_mad(const struct sockaddr_in6 *src, const struct sockaddr_in6 *dst, const uint8_t *mad, uint8_t tclass)
{
	static uint32_t psn;
	bool v4 = IN6_IS_ADDR_V4MAPPED(&dst->sin6_addr);
	int fd = tx_socket(v4);
	uint8_t pkt[CM_PKT_BYTES];
	struct sr_pkt h = {
		.opcode = IBV_OPCODE_UD_SEND_ONLY,
		.mask = sr_opcode[IBV_OPCODE_UD_SEND_ONLY].mask,
		.pkey = SR_DEFAULT_PKEY,
		.dqpn = 1,
		.psn = psn++ & SR_PSN_MASK,
		.deth_qkey = SR_GSI_QKEY,
		.deth_sqpn = 1,
	};
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct msghdr msg = { 0 };
	struct iovec iov = { pkt, sizeof(pkt) };
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;

	if (fd < 0)
		return fd;
	uint32_t hlen = sr_pkt_build_hdr(pkt, &h);
	memcpy(pkt + hlen, mad, SR_MAD_BYTES);
	uint32_t icrc = 0;
	if (dev_crc(src)) {
		struct sr_icrc_env env = {
			.ipv6 = !v4,
			.saddr = src->sin6_addr,
			.daddr = dst->sin6_addr,
			.sport = v4 ? sr_cm.tx4_port : sr_cm.tx6_port,
			.dport = 4791,
			.ipv4_df = true,
		};
		icrc = sr_icrc_compute(&env, pkt, hlen + SR_MAD_BYTES + SR_ICRC_BYTES);
	}
	sr_icrc_store(pkt + hlen + SR_MAD_BYTES, icrc);

	memset(&cbuf, 0, sizeof(cbuf));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf.buf;
	struct cmsghdr *cm = (struct cmsghdr *)cbuf.buf;
	if (v4) {
		struct in_pktinfo pi = { 0 };
		memcpy(&pi.ipi_spec_dst, &src->sin6_addr.s6_addr[12], 4);
		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
		msg.msg_controllen = CMSG_SPACE(sizeof(pi));
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_port = htons(4791);
		memcpy(&sin.sin_addr, &dst->sin6_addr.s6_addr[12], 4);
		msg.msg_name = &sin;
		msg.msg_namelen = sizeof(sin);
	} else {
		struct in6_pktinfo pi = { 0 };
		pi.ipi6_addr = src->sin6_addr;
		cm->cmsg_level = IPPROTO_IPV6;
		cm->cmsg_type = IPV6_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
		msg.msg_controllen = CMSG_SPACE(sizeof(pi));
		sin6 = *dst;
		sin6.sin6_port = htons(4791);
		msg.msg_name = &sin6;
		msg.msg_namelen = sizeof(sin6);
	}
	sr_cmsg_put_tclass(&msg, v4, tclass);
	if (sendmsg(fd, &msg, MSG_DONTWAIT) < 0)
		return -errno; /* lost like a dropped packet: the retry timer resends */
	return 0;
}

/* Encode and send msg on id's path; with retry, keep it for resending. */
int sr_cm_send_msg(struct sr_cm_id *id, const struct sr_cm_msg *msg, bool retry)
{
	uint8_t mad[SR_MAD_BYTES];
	int ret = sr_cm_msg_encode(msg, mad, sizeof(mad));

	if (ret < 0)
		return ret;
	if (retry) {
		memcpy(id->mad, mad, sizeof(mad));
		id->mad_valid = true;
		id->retries_left = id->max_cm_retries;
		id->timeout_ns = sr_cm_retry_ns(sr_cm.response_timeout);
		sr_cm_arm(id, CM_T_RETRY, id->timeout_ns);
	} else {
		/* the last message of an exchange: resent only when the peer
		 * repeats its own (duplicate REP -> RTU, DREQ -> DREP) */
		memcpy(id->mad, mad, sizeof(mad));
		id->mad_valid = true;
	}
	sr_cm_send_mad(&id->local, &id->peer, mad, id->tos);
	return 0;
}

static void fill_path(struct sr_cm_id *id, struct sr_cm_path *p)
{
	p->local_lid = 0xffff; /* permissive, as the kernel writes on RoCE */
	p->remote_lid = 0xffff;
	sr_cm_gid_from_in6(&id->local, &p->local_gid);
	sr_cm_gid_from_in6(&id->peer, &p->remote_gid);
	p->flow_label = id->flow_label;
	p->packet_rate = 0;
	p->traffic_class = id->tos;
	p->hop_limit = SR_CMA_HOP_LIMIT;
	p->sl = 0;
	p->subnet_local = false;
	p->local_ack_timeout = id->ack_timeout;
}

int sr_cm_send_req(struct sr_cm_id *id, const struct rdma_conn_param *p)
{
	struct sr_cm_msg m;
	struct sr_cma_hdr h = { 0 };

	id->tid = sr_cm_new_tid(id->lcid);
	sr_cm_msg_init(&m, SR_CM_ATTR_REQ, id->tid);
	struct sr_cm_req *r = &m.req;
	r->local_comm_id = id->lcid;
	r->service_id = id->service_id;
	r->local_ca_guid = be64toh(id->dev->guid);
	r->local_qkey = 0;
	r->local_qpn = id->id.qp ? id->id.qp->qp_num : p->qp_num;
	r->responder_resources = id->resp_res;
	r->initiator_depth = id->init_depth;
	r->remote_cm_response_timeout = sr_cm.response_timeout;
	r->transport_service_type = id->id.qp_type == IBV_QPT_UC ? SR_CM_TST_UC : SR_CM_TST_RC;
	r->end_to_end_flow_control = p->flow_control;
	r->starting_psn = id->rq_psn;
	r->local_cm_response_timeout = sr_cm.response_timeout;
	r->retry_count = id->retry_count;
	r->pkey = 0xffff;
	r->path_mtu = (uint8_t)id->mtu;
	r->rnr_retry_count = id->rnr_retry_count;
	r->max_cm_retries = id->max_cm_retries;
	r->srq = id->id.qp ? id->id.qp->srq != NULL : p->srq;
	fill_path(id, &r->primary);

	h.ip_version = IN6_IS_ADDR_V4MAPPED(&id->local.sin6_addr) ? 4 : 6;
	h.src_port = sr_cm_port(&id->id.route.addr.src_addr);
	h.src_addr = id->local.sin6_addr;
	h.dst_addr = id->peer.sin6_addr;
	sr_cma_hdr_encode(&h, r->private_data, sizeof(r->private_data));
	if (p->private_data && p->private_data_len)
		memcpy(r->private_data + SR_CMA_HDR_BYTES, p->private_data, p->private_data_len);
	id->state = CM_REQ_SENT;
	id->give_up = sr_cm_now() + sr_cm.connect_retry_ns;
	id->noln_tries = 0;
	return sr_cm_send_msg(id, &m, true);
}

int sr_cm_send_sidr_req(struct sr_cm_id *id, const struct rdma_conn_param *p)
{
	struct sr_cm_msg m;
	struct sr_cma_hdr h = { 0 };

	id->tid = sr_cm_new_tid(id->lcid);
	sr_cm_msg_init(&m, SR_CM_ATTR_SIDR_REQ, id->tid);
	m.sidr_req.request_id = id->lcid;
	m.sidr_req.pkey = 0xffff;
	m.sidr_req.service_id = id->service_id;
	h.ip_version = IN6_IS_ADDR_V4MAPPED(&id->local.sin6_addr) ? 4 : 6;
	h.src_port = sr_cm_port(&id->id.route.addr.src_addr);
	h.src_addr = id->local.sin6_addr;
	h.dst_addr = id->peer.sin6_addr;
	sr_cma_hdr_encode(&h, m.sidr_req.private_data, sizeof(m.sidr_req.private_data));
	if (p && p->private_data && p->private_data_len)
		memcpy(m.sidr_req.private_data + SR_CMA_HDR_BYTES, p->private_data, p->private_data_len);
	id->state = CM_SIDR_REQ_SENT;
	return sr_cm_send_msg(id, &m, true);
}

int sr_cm_send_rep(struct sr_cm_id *id, const struct rdma_conn_param *p)
{
	struct sr_cm_msg m;

	sr_cm_msg_init(&m, SR_CM_ATTR_REP, id->tid);
	struct sr_cm_rep *r = &m.rep;
	r->local_comm_id = id->lcid;
	r->remote_comm_id = id->rcid;
	r->local_qkey = 0;
	r->local_qpn = id->id.qp ? id->id.qp->qp_num : (p ? p->qp_num : 0);
	r->starting_psn = id->rq_psn;
	r->responder_resources = id->resp_res;
	r->initiator_depth = id->init_depth;
	r->target_ack_delay = 15;
	r->failover_accepted = 0;
	r->end_to_end_flow_control = p ? p->flow_control : 0;
	r->rnr_retry_count = id->rnr_retry_count;
	r->srq = id->id.qp ? id->id.qp->srq != NULL : (p ? p->srq : 0);
	r->local_ca_guid = be64toh(id->dev->guid);
	if (p && p->private_data && p->private_data_len)
		memcpy(r->private_data, p->private_data, p->private_data_len);
	id->state = CM_REP_SENT;
	return sr_cm_send_msg(id, &m, true);
}

int sr_cm_send_sidr_rep(struct sr_cm_id *id, int status, const void *pdata, uint8_t len)
{
	struct sr_cm_msg m;

	sr_cm_msg_init(&m, SR_CM_ATTR_SIDR_REP, id->tid);
	m.sidr_rep.request_id = id->rcid;
	m.sidr_rep.status = (uint8_t)status;
	m.sidr_rep.qpn = status ? 0 : (id->id.qp ? id->id.qp->qp_num : 0);
	m.sidr_rep.service_id = id->service_id;
	m.sidr_rep.qkey = id->qkey;
	if (pdata && len)
		memcpy(m.sidr_rep.private_data, pdata, len);
	id->state = CM_SIDR_DONE;
	return sr_cm_send_msg(id, &m, false);
}

int sr_cm_send_rej(struct sr_cm_id *id, uint16_t reason, const void *pdata, uint8_t len)
{
	struct sr_cm_msg m;

	sr_cm_msg_init(&m, SR_CM_ATTR_REJ, id->tid);
	m.rej.local_comm_id = id->lcid;
	m.rej.remote_comm_id = id->rcid;
	m.rej.message_rejected = id->state == CM_REQ_RCVD			      ? SR_CM_MSG_REQ :
				 id->state == CM_REP_RCVD || id->state == CM_REQ_SENT ? SR_CM_MSG_REP :
											SR_CM_MSG_OTHER;
	m.rej.reason = reason;
	if (reason == SR_CM_REJ_TIMEOUT) {
		/* the ARI names our CA GUID, so that the daemon of a peer that
		 * never answered routes this REJ to where our REQ went */
		uint64_t g = id->dev->guid;
		memcpy(m.rej.ari, &g, 8);
		m.rej.ari_length = 8;
	}
	if (pdata && len)
		memcpy(m.rej.private_data, pdata, len);
	return sr_cm_send_msg(id, &m, false);
}

int sr_cm_send_rtu(struct sr_cm_id *id)
{
	struct sr_cm_msg m;

	sr_cm_msg_init(&m, SR_CM_ATTR_RTU, id->tid);
	m.rtu.local_comm_id = id->lcid;
	m.rtu.remote_comm_id = id->rcid;
	sr_cm_arm(id, CM_T_NONE, 0);
	return sr_cm_send_msg(id, &m, false);
}

int sr_cm_send_dreq(struct sr_cm_id *id)
{
	struct sr_cm_msg m;

	id->tid = sr_cm_new_tid(id->lcid) ^ ((uint64_t)1 << 31);
	sr_cm_msg_init(&m, SR_CM_ATTR_DREQ, id->tid);
	m.dreq.local_comm_id = id->lcid;
	m.dreq.remote_comm_id = id->rcid;
	m.dreq.remote_qpn_eecn = id->rqpn;
	id->state = CM_DREQ_SENT;
	return sr_cm_send_msg(id, &m, true);
}

int sr_cm_send_drep(struct sr_cm_id *id)
{
	struct sr_cm_msg m;

	sr_cm_msg_init(&m, SR_CM_ATTR_DREP, id->tid);
	m.drep.local_comm_id = id->lcid;
	m.drep.remote_comm_id = id->rcid;
	return sr_cm_send_msg(id, &m, false);
}

/* Answer a message that names no connection of ours (a REJ with the
 * reason given, or a DREP for a stray DREQ), to where meta says it came
 * from, with its traffic class. */
static void answer_stray(const struct sr_cm_msg *in, const struct sr_ipc_pkt *meta, uint16_t attr, uint16_t reason)
{
	struct sr_cm_msg m;
	uint8_t mad[SR_MAD_BYTES];

	sr_cm_msg_init(&m, attr, in->hdr.tid);
	if (attr == SR_CM_ATTR_DREP) {
		m.drep.local_comm_id = in->dreq.remote_comm_id;
		m.drep.remote_comm_id = in->dreq.local_comm_id;
	} else {
		m.rej.local_comm_id = 0;
		m.rej.remote_comm_id = in->req.local_comm_id; /* REQ/REP: same offset */
		m.rej.message_rejected = in->hdr.attr_id == SR_CM_ATTR_REQ ? SR_CM_MSG_REQ : SR_CM_MSG_REP;
		m.rej.reason = reason;
	}
	if (sr_cm_msg_encode(&m, mad, sizeof(mad)) > 0)
		sr_cm_send_mad(&meta->dst, &meta->src, mad, meta->tclass);
}

/* ---- wills: the DREQ softrdmad sends for us if this process dies ---- */

struct pending_will {
	struct pending_will *next;
	uint32_t comm_id;
	struct sockaddr_in6 local, peer;
	uint8_t mad[SR_MAD_BYTES];
};
static struct pending_will *wills;

/* Queue the DREQ of id's connection (lock held); sr_cm_wills_flush hands
 * it to the daemon once the lock is dropped. */
void sr_cm_will_queue(struct sr_cm_id *id)
{
	struct pending_will *w = calloc(1, sizeof(*w));
	struct sr_cm_msg m;

	if (!w)
		return;
	sr_cm_msg_init(&m, SR_CM_ATTR_DREQ, sr_cm_new_tid(id->lcid) ^ ((uint64_t)1 << 31));
	m.dreq.local_comm_id = id->lcid;
	m.dreq.remote_comm_id = id->rcid;
	m.dreq.remote_qpn_eecn = id->rqpn;
	if (sr_cm_msg_encode(&m, w->mad, sizeof(w->mad)) < 0) {
		free(w);
		return;
	}
	w->comm_id = id->lcid;
	w->local = id->local;
	w->peer = id->peer;
	w->next = wills;
	wills = w;
}

/* Lock not held. */
void sr_cm_wills_flush(void)
{
	for (;;) {
		pthread_mutex_lock(&sr_cm.lock);
		struct pending_will *w = wills;
		if (w)
			wills = w->next;
		pthread_mutex_unlock(&sr_cm.lock);
		if (!w)
			return;
		if (sr_cm.daemon)
			sr_daemon_cm_will(sr_cm.daemon, w->comm_id, &w->local, &w->peer, w->mad);
		free(w);
	}
}

/* ---- receiving ---- */

static struct sr_cm_id *find_by_lcid(uint32_t lcid)
{
	if (!lcid)
		return NULL;
	for (struct sr_cm_id *id = sr_cm.ids; id; id = id->next)
		if (id->lcid == lcid)
			return id;
	return NULL;
}

static struct sr_cm_id *find_by_remote(uint32_t rcid, uint64_t guid_be)
{
	for (struct sr_cm_id *id = sr_cm.ids; id; id = id->next)
		if (id->rcid == rcid && id->rguid == guid_be && id->listener)
			return id;
	return NULL;
}

/* The listening id in this process for a Service ID and local address:
 * an exact address beats a wildcard. */
static struct sr_cm_id *find_listener(uint64_t sid, const struct sockaddr_in6 *local)
{
	struct sr_cm_id *any = NULL;
	bool v4 = IN6_IS_ADDR_V4MAPPED(&local->sin6_addr);

	for (struct sr_cm_id *id = sr_cm.ids; id; id = id->next) {
		if (id->state != CM_LISTEN || id->destroyed || id->service_id != sid)
			continue;
		struct sockaddr_in6 a;
		sr_cm_to_in6(&id->id.route.addr.src_addr, &a);
		if (!memcmp(&a.sin6_addr, &local->sin6_addr, 16))
			return id;
		if (sr_cm_is_any(&a)) {
			bool a_v4 = id->id.route.addr.src_addr.sa_family == AF_INET;
			if (a_v4 && !v4)
				continue;
			if (id->afonly && !a_v4 && v4)
				continue;
			any = id;
		}
	}
	return any;
}

/* A new id for an incoming REQ/SIDR_REQ on listener l. */
static struct sr_cm_id *child_new(struct sr_cm_id *l, const struct sr_ipc_pkt *meta, const struct sr_cma_hdr *ch)
{
	struct sockaddr_storage src = { 0 }, dst = { 0 };
	uint16_t lport = sr_cm_port(&l->id.route.addr.src_addr);
	uint8_t gidx = 0;
	struct sr_cm_dev *dev = sr_cm_dev_by_addr(&meta->dst, &gidx);
	struct sr_cm_id *c;

	if (!dev)
		return NULL;
	/* addresses as the application sees them: family of the listener */
	if (l->id.route.addr.src_addr.sa_family == AF_INET && IN6_IS_ADDR_V4MAPPED(&ch->src_addr)) {
		struct sockaddr_in *s = (struct sockaddr_in *)&src, *d = (struct sockaddr_in *)&dst;
		s->sin_family = d->sin_family = AF_INET;
		memcpy(&s->sin_addr, &ch->dst_addr.s6_addr[12], 4);
		memcpy(&d->sin_addr, &ch->src_addr.s6_addr[12], 4);
		s->sin_port = htons(lport);
		d->sin_port = htons(ch->src_port);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&src, *d = (struct sockaddr_in6 *)&dst;
		s->sin6_family = d->sin6_family = AF_INET6;
		s->sin6_addr = ch->dst_addr;
		d->sin6_addr = ch->src_addr;
		s->sin6_port = htons(lport);
		d->sin6_port = htons(ch->src_port);
	}
	c = sr_cm_child_new(l, l->id.qp_type, dev, gidx, &meta->dst, &meta->src, (struct sockaddr *)&src,
			    (struct sockaddr *)&dst);
	if (c)
		c->state = CM_BOUND;
	return c;
}

static void on_req(const struct sr_cm_msg *m, const struct sr_ipc_pkt *meta)
{
	const struct sr_cm_req *r = &m->req;
	struct sr_cma_hdr ch;
	struct sr_cm_id *dup = find_by_remote(r->local_comm_id, htobe64(r->local_ca_guid));

	if (dup) {
		sr_cm_dbg("duplicate REQ from comm ID 0x%x (state %d)", r->local_comm_id, dup->state);
		/* the peer missed our answer: resend it (REP) or wait */
		if (dup->state == CM_REP_SENT && dup->mad_valid)
			sr_cm_send_mad(&dup->local, &dup->peer, dup->mad, dup->tos);
		return;
	}
	struct sr_cm_id *l = find_listener(r->service_id, &meta->dst);
	if (!l || sr_cma_hdr_decode(&ch, r->private_data, sizeof(r->private_data))) {
		answer_stray(m, meta, SR_CM_ATTR_REJ, l ? SR_CM_REJ_CONSUMER_DEFINED : SR_CM_REJ_INVALID_SERVICE_ID);
		return;
	}
	if (l->id.qp_type == IBV_QPT_UD ||
	    (r->transport_service_type != SR_CM_TST_RC && r->transport_service_type != SR_CM_TST_UC)) {
		answer_stray(m, meta, SR_CM_ATTR_REJ, SR_CM_REJ_INVALID_TRANSPORT_TYPE);
		return;
	}
	struct sr_cm_id *c = child_new(l, meta, &ch);
	if (!c) {
		answer_stray(m, meta, SR_CM_ATTR_REJ, SR_CM_REJ_NO_RESOURCES);
		return;
	}
	c->id.qp_type = r->transport_service_type == SR_CM_TST_UC ? IBV_QPT_UC : IBV_QPT_RC;
	c->rcid = r->local_comm_id;
	c->rguid = htobe64(r->local_ca_guid);
	c->tid = m->hdr.tid;
	c->rqpn = r->local_qpn;
	c->sq_psn = r->starting_psn;
	c->rq_psn = (uint32_t)random() & SR_PSN_MASK;
	c->peer_resp_res = r->responder_resources;
	c->peer_init_depth = r->initiator_depth;
	c->peer_flow_control = r->end_to_end_flow_control;
	c->peer_srq = r->srq;
	c->retry_count = r->retry_count;
	c->rnr_retry_count = r->rnr_retry_count;
	/* the REQ's path MTU is both sides' (IBTA 12.7.23), even above our
	 * port's, as the kernel's CM takes it (cm_req_handler) */
	c->mtu = r->path_mtu >= IBV_MTU_256 && r->path_mtu <= IBV_MTU_4096 ? (enum ibv_mtu)r->path_mtu :
									     c->dev->active_mtu;
	c->flow_label = r->primary.flow_label;
	/* the path is the REQ's, as the kernel's CM takes it */
	c->tos = r->primary.traffic_class;
	c->path.traffic_class = c->tos;
	c->ack_timeout = r->primary.local_ack_timeout;
	c->max_cm_retries = r->max_cm_retries;
	/* resources for accept(NULL): what the peer asked for, capped */
	c->resp_res = r->initiator_depth < c->dev->max_dest_rd_atomic ? r->initiator_depth : c->dev->max_dest_rd_atomic;
	c->init_depth = r->responder_resources < c->dev->max_rd_atomic ? r->responder_resources : c->dev->max_rd_atomic;
	c->state = CM_REQ_RCVD;
	sr_cm_dbg("REQ from comm ID 0x%x QPN 0x%x: new id %p", r->local_comm_id, r->local_qpn, (void *)c);

	struct sr_cm_event *e = sr_cm_event_new(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!e) {
		sr_cm_id_free(c);
		return;
	}
	e->ev.listen_id = &l->id;
	sr_cm_fill_conn_param(e, r->private_data + SR_CMA_HDR_BYTES, SR_CM_REQ_PRIVATE_DATA - SR_CMA_HDR_BYTES,
			      r->initiator_depth, r->responder_resources, r->end_to_end_flow_control, r->retry_count,
			      r->rnr_retry_count, r->srq, r->local_qpn);
	sr_cm_event_post(l, e);
}

static void on_sidr_req(const struct sr_cm_msg *m, const struct sr_ipc_pkt *meta)
{
	const struct sr_cm_sidr_req *r = &m->sidr_req;
	struct sr_cma_hdr ch;
	struct sr_cm_msg a;
	uint8_t mad[SR_MAD_BYTES];

	for (struct sr_cm_id *id = sr_cm.ids; id; id = id->next)
		if (id->listener && id->rcid == r->request_id &&
		    !memcmp(&id->peer.sin6_addr, &meta->src.sin6_addr, 16)) {
			if (id->state == CM_SIDR_DONE && id->mad_valid)
				sr_cm_send_mad(&id->local, &id->peer, id->mad, id->tos);
			return; /* duplicate */
		}
	struct sr_cm_id *l = find_listener(r->service_id, &meta->dst);
	int status = !l ? SR_CM_SIDR_UNSUPPORTED : l->id.qp_type != IBV_QPT_UD ? SR_CM_SIDR_REJECT : 0;
	struct sr_cm_id *c = NULL;
	if (!status && !sr_cma_hdr_decode(&ch, r->private_data, sizeof(r->private_data)))
		c = child_new(l, meta, &ch);
	if (!c) {
		sr_cm_msg_init(&a, SR_CM_ATTR_SIDR_REP, m->hdr.tid);
		a.sidr_rep.request_id = r->request_id;
		a.sidr_rep.status = status ? (uint8_t)status : SR_CM_SIDR_NO_QP;
		a.sidr_rep.service_id = r->service_id;
		if (sr_cm_msg_encode(&a, mad, sizeof(mad)) > 0)
			sr_cm_send_mad(&meta->dst, &meta->src, mad, meta->tclass);
		return;
	}
	c->rcid = r->request_id;
	c->tid = m->hdr.tid;
	c->qkey = SR_CMA_QKEY;
	/* the kernel's CM answers a SIDR REQ through an AH made from its
	 * completion: with the traffic class it came with */
	c->tos = meta->tclass;
	c->path.traffic_class = c->tos;
	c->state = CM_SIDR_REQ_RCVD;
	struct sr_cm_event *e = sr_cm_event_new(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!e) {
		sr_cm_id_free(c);
		return;
	}
	e->ev.listen_id = &l->id;
	size_t n = SR_CM_SIDR_REQ_PRIVATE_DATA - SR_CMA_HDR_BYTES;
	memcpy(e->pdata, r->private_data + SR_CMA_HDR_BYTES, n);
	e->ev.param.ud.private_data = e->pdata;
	e->ev.param.ud.private_data_len = (uint8_t)n;
	union ibv_gid dgid;
	sr_cm_gid_from_in6(&c->peer, &dgid);
	sr_cm_fill_ah(c, &e->ev.param.ud.ah_attr, &dgid);
	sr_cm_event_post(l, e);
}

static void on_rep(const struct sr_cm_msg *m)
{
	const struct sr_cm_rep *r = &m->rep;
	struct sr_cm_id *id = find_by_lcid(r->remote_comm_id);

	if (!id)
		return;
	if (id->state == CM_ESTABLISHED || id->state == CM_REP_RCVD) {
		if (id->state == CM_ESTABLISHED && id->mad_valid)
			sr_cm_send_mad(&id->local, &id->peer, id->mad, id->tos); /* RTU again */
		return;
	}
	if (id->state != CM_REQ_SENT)
		return;
	id->rcid = r->local_comm_id;
	id->rguid = htobe64(r->local_ca_guid);
	id->rqpn = r->local_qpn;
	id->sq_psn = r->starting_psn;
	id->peer_resp_res = r->responder_resources;
	id->peer_init_depth = r->initiator_depth;
	/* our QP issues at most what the peer can answer, and answers what it issues */
	id->init_depth = r->responder_resources < id->init_depth ? r->responder_resources : id->init_depth;
	id->resp_res = r->initiator_depth;
	if (id->resp_res > id->dev->max_dest_rd_atomic)
		id->resp_res = id->dev->max_dest_rd_atomic;
	id->rnr_retry_count = r->rnr_retry_count;
	sr_cm_arm(id, CM_T_NONE, 0);
	id->mad_valid = false;

	if (!id->id.qp) {
		struct sr_cm_event *e = sr_cm_event_new(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
		id->state = CM_REP_RCVD;
		if (e) {
			sr_cm_fill_conn_param(e, r->private_data, SR_CM_REP_PRIVATE_DATA, r->initiator_depth,
					      r->responder_resources, r->end_to_end_flow_control, 0, r->rnr_retry_count,
					      r->srq, r->local_qpn);
			sr_cm_event_post(id, e);
		}
		return;
	}
	int err = sr_cm_qp_to_rtr_rts(id);
	struct sr_cm_event *e;
	if (err) {
		sr_cm_send_rej(id, SR_CM_REJ_CONSUMER_DEFINED, NULL, 0);
		sr_cm_qp_to_err(id);
		id->state = CM_DISCONNECTED;
		e = sr_cm_event_new(id, RDMA_CM_EVENT_CONNECT_ERROR, -err);
	} else {
		id->state = CM_ESTABLISHED;
		sr_cm_send_rtu(id);
		sr_cm_will_queue(id);
		e = sr_cm_event_new(id, RDMA_CM_EVENT_ESTABLISHED, 0);
	}
	if (e) {
		sr_cm_fill_conn_param(e, r->private_data, SR_CM_REP_PRIVATE_DATA, r->initiator_depth,
				      r->responder_resources, r->end_to_end_flow_control, 0, r->rnr_retry_count, r->srq,
				      r->local_qpn);
		sr_cm_event_post(id, e);
	}
}

static void established_passive(struct sr_cm_id *id, const uint8_t *pdata, uint8_t len)
{
	id->state = CM_ESTABLISHED;
	sr_cm_arm(id, CM_T_NONE, 0);
	id->mad_valid = false;
	if (id->destroyed)
		return;
	struct sr_cm_event *e = sr_cm_event_new(id, RDMA_CM_EVENT_ESTABLISHED, 0);
	if (e) {
		sr_cm_fill_conn_param(e, pdata, len, id->resp_res, id->init_depth, id->peer_flow_control, 0,
				      id->rnr_retry_count, id->peer_srq, id->rqpn);
		sr_cm_event_post(id, e);
	}
}

static void on_rtu(const struct sr_cm_msg *m)
{
	struct sr_cm_id *id = find_by_lcid(m->rtu.remote_comm_id);

	if (id && id->state == CM_REP_SENT && id->rcid == m->rtu.local_comm_id)
		established_passive(id, m->rtu.private_data, SR_CM_RTU_PRIVATE_DATA);
}

/* The RTU may be lost while the peer already sends data: the QP tells
 * (rdma_notify with IBV_EVENT_COMM_EST), as in the kernel. */
int sr_cm_comm_est(struct sr_cm_id *id)
{
	if (id->state == CM_REP_SENT) {
		established_passive(id, NULL, 0);
		return 0;
	}
	return id->state == CM_ESTABLISHED ? 0 : -EINVAL;
}

static void enter_timewait(struct sr_cm_id *id)
{
	id->state = CM_TIMEWAIT;
	/* the kernel waits about a packet lifetime before reusing the QP */
	sr_cm_arm(id, CM_T_TIMEWAIT, 2 * sr_cm_timeout_ns(SR_CMA_PACKET_LIFETIME));
}

static void rejected_event(struct sr_cm_id *id, const struct sr_cm_rej *r)
{
	if (id->destroyed)
		return;
	struct sr_cm_event *e = sr_cm_event_new(id, RDMA_CM_EVENT_REJECTED, r->reason);
	if (e) {
		sr_cm_fill_conn_param(e, r->private_data, SR_CM_REJ_PRIVATE_DATA, 0, 0, 0, 0, 0, 0, 0);
		sr_cm_event_post(id, e);
	}
}

static void on_rej(const struct sr_cm_msg *m)
{
	const struct sr_cm_rej *r = &m->rej;
	struct sr_cm_id *id = find_by_lcid(r->remote_comm_id);

	if (!id && r->reason == SR_CM_REJ_TIMEOUT && r->ari_length >= 8) {
		uint64_t g;
		memcpy(&g, r->ari, 8);
		id = find_by_remote(r->local_comm_id, g);
	}
	if (!id)
		return;
	switch (id->state) {
	case CM_REQ_SENT:
	case CM_REP_RCVD:
	case CM_REP_SENT:
	case CM_REQ_RCVD:
		break;
	case CM_ESTABLISHED:
		/* The peer gave up before it took our RTU (its id went away in
		 * REP_SENT, or its REP timed out): as the kernel's CM, the
		 * connection is over and the application is told REJECTED. */
		if (r->local_comm_id != id->rcid)
			return;
		sr_cm_dbg("REJ (reason %u) for established comm ID 0x%x: REJECTED", r->reason, id->lcid);
		sr_cm_qp_to_err(id);
		enter_timewait(id);
		rejected_event(id, r);
		return;
	default:
		return;
	}
	if (id->state == CM_REQ_SENT && r->reason == SR_CM_REJ_INVALID_SERVICE_ID && id->mad_valid && !id->destroyed &&
	    sr_cm_now() < id->give_up) {
		/* Nobody listens for the service yet.  A server may tell its
		 * port before it listens (qperf: rdma_bind_addr, the port to
		 * the client over TCP, then rdma_listen), which the kernel's
		 * slower address and route resolution hides; ours does not.
		 * Send the REQ again, as Soft-iWARP retries a refused TCP
		 * connect, until SOFTRDMA_CM_CONNECT_RETRY_MS: after 10 ms,
		 * then twice as long each time, which keeps within what a
		 * daemon answers one host (ANSWER_SRC_RATE). */
		uint64_t wait = 10000000ull << (id->noln_tries < 6 ? id->noln_tries : 6);
		id->noln_tries++;
		sr_cm_dbg("REQ of comm ID 0x%x: nobody listens yet; again in %llu ms", id->lcid,
			  (unsigned long long)(wait / 1000000));
		id->retries_left++; /* the resend is not a timeout */
		sr_cm_arm(id, CM_T_RETRY, wait);
		return;
	}
	sr_cm_arm(id, CM_T_NONE, 0);
	id->mad_valid = false;
	sr_cm_qp_to_err(id);
	id->state = CM_DISCONNECTED;
	rejected_event(id, r);
}

static void on_mra(const struct sr_cm_msg *m)
{
	struct sr_cm_id *id = find_by_lcid(m->mra.remote_comm_id);

	if (!id || id->timer != CM_T_RETRY)
		return;
	if ((m->mra.message_mraed == SR_CM_MSG_REQ && id->state == CM_REQ_SENT) ||
	    (m->mra.message_mraed == SR_CM_MSG_REP && id->state == CM_REP_SENT))
		sr_cm_arm(id, CM_T_RETRY,
			  sr_cm_timeout_ns(m->mra.service_timeout) + 2 * sr_cm_timeout_ns(SR_CMA_PACKET_LIFETIME));
}

static void disconnected_event(struct sr_cm_id *id, const uint8_t *pdata, uint8_t len)
{
	if (id->destroyed)
		return;
	struct sr_cm_event *e = sr_cm_event_new(id, RDMA_CM_EVENT_DISCONNECTED, 0);
	if (e) {
		sr_cm_fill_conn_param(e, pdata, len, 0, 0, 0, 0, 0, 0, 0);
		sr_cm_event_post(id, e);
	}
}

static void on_dreq(const struct sr_cm_msg *m, const struct sr_ipc_pkt *meta)
{
	struct sr_cm_id *id = find_by_lcid(m->dreq.remote_comm_id);

	if (!id || id->rcid != m->dreq.local_comm_id) {
		answer_stray(m, meta, SR_CM_ATTR_DREP, 0);
		return;
	}
	switch (id->state) {
	case CM_REP_SENT:
	case CM_ESTABLISHED:
		id->tid = m->hdr.tid;
		sr_cm_arm(id, CM_T_NONE, 0);
		id->mad_valid = false;
		id->state = CM_DREQ_RCVD;
		if (id->destroyed) {
			sr_cm_send_drep(id);
			enter_timewait(id);
		} else {
			disconnected_event(id, m->dreq.private_data, SR_CM_DREQ_PRIVATE_DATA);
		}
		break;
	case CM_DREQ_SENT:
		/* both sides disconnected at once: answer, and we are done too */
		id->tid = m->hdr.tid;
		sr_cm_send_drep(id);
		enter_timewait(id);
		disconnected_event(id, NULL, 0);
		break;
	case CM_TIMEWAIT:
	case CM_DISCONNECTED:
		id->tid = m->hdr.tid;
		sr_cm_send_drep(id);
		break;
	default:
		break;
	}
}

static void on_drep(const struct sr_cm_msg *m)
{
	struct sr_cm_id *id = find_by_lcid(m->drep.remote_comm_id);

	if (!id || id->state != CM_DREQ_SENT)
		return;
	id->mad_valid = false;
	enter_timewait(id);
	disconnected_event(id, m->drep.private_data, SR_CM_DREP_PRIVATE_DATA);
}

static void on_sidr_rep(const struct sr_cm_msg *m)
{
	const struct sr_cm_sidr_rep *r = &m->sidr_rep;
	struct sr_cm_id *id = find_by_lcid(r->request_id);

	if (!id || id->state != CM_SIDR_REQ_SENT)
		return;
	sr_cm_arm(id, CM_T_NONE, 0);
	id->mad_valid = false;
	id->state = CM_SIDR_DONE;
	if (id->destroyed)
		return;
	struct sr_cm_event *e =
		sr_cm_event_new(id, r->status ? RDMA_CM_EVENT_UNREACHABLE : RDMA_CM_EVENT_ESTABLISHED, r->status);
	if (!e)
		return;
	memcpy(e->pdata, r->private_data, SR_CM_SIDR_REP_PRIVATE_DATA);
	e->ev.param.ud.private_data = e->pdata;
	e->ev.param.ud.private_data_len = SR_CM_SIDR_REP_PRIVATE_DATA;
	if (!r->status) {
		union ibv_gid dgid;
		sr_cm_gid_from_in6(&id->peer, &dgid);
		sr_cm_fill_ah(id, &e->ev.param.ud.ah_attr, &dgid);
		e->ev.param.ud.qp_num = r->qpn;
		e->ev.param.ud.qkey = r->qkey;
	}
	sr_cm_event_post(id, e);
}

static int debug = -1;

/* SOFTRDMA_CM_DEBUG=1: a line on stderr per CM MAD received or dropped and
 * per event handed to the application. */
void sr_cm_dbg(const char *fmt, ...)
{
	va_list ap;

	if (debug < 0) {
		const char *s = getenv("SOFTRDMA_CM_DEBUG");
		debug = s && *s && *s != '0';
	}
	if (!debug)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "softrdma-cm[%d]: ", (int)getpid());
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* A datagram the daemon routed to us: BTH + DETH + MAD + ICRC. */
static void cm_pkt(void *arg, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len)
{
	struct sr_pkt p;
	struct sr_cm_msg m;

	if (sr_pkt_parse(&p, data, len) || p.opcode != IBV_OPCODE_UD_SEND_ONLY || p.dqpn != 1 ||
	    p.deth_qkey != SR_GSI_QKEY || p.paylen != SR_MAD_BYTES) {
		sr_cm_dbg("dropped a %u-byte datagram that is not a CM MAD", len);
		return;
	}
	pthread_mutex_lock(&sr_cm.lock);
	if (dev_crc(&meta->dst)) {
		struct sr_icrc_env env = {
			.ipv6 = !IN6_IS_ADDR_V4MAPPED(&meta->src.sin6_addr),
			.saddr = meta->src.sin6_addr,
			.daddr = meta->dst.sin6_addr,
			.sport = ntohs(meta->src.sin6_port),
			.dport = 4791,
			.ipv4_df = true,
		};
		if (!sr_icrc_verify(&env, data, len)) {
			sr_cm_dbg("dropped a MAD with a bad ICRC");
			goto out;
		}
	}
	if (sr_cm_msg_decode(&m, p.payload, SR_MAD_BYTES) || m.hdr.method != SR_MAD_METHOD_SEND) {
		sr_cm_dbg("dropped a MAD of class %u attribute 0x%x method 0x%x", m.hdr.mgmt_class, m.hdr.attr_id,
			  m.hdr.method);
		goto out;
	}
	sr_cm_dbg("received %s", sr_cm_attr_name(m.hdr.attr_id) ? sr_cm_attr_name(m.hdr.attr_id) : "?");
	switch (m.hdr.attr_id) {
	case SR_CM_ATTR_REQ:
		on_req(&m, meta);
		break;
	case SR_CM_ATTR_REP:
		on_rep(&m);
		break;
	case SR_CM_ATTR_RTU:
		on_rtu(&m);
		break;
	case SR_CM_ATTR_REJ:
		on_rej(&m);
		break;
	case SR_CM_ATTR_MRA:
		on_mra(&m);
		break;
	case SR_CM_ATTR_DREQ:
		on_dreq(&m, meta);
		break;
	case SR_CM_ATTR_DREP:
		on_drep(&m);
		break;
	case SR_CM_ATTR_SIDR_REQ:
		on_sidr_req(&m, meta);
		break;
	case SR_CM_ATTR_SIDR_REP:
		on_sidr_rep(&m);
		break;
	default:
		break;
	}
out:
	pthread_mutex_unlock(&sr_cm.lock);
	sr_cm_wills_flush();
}

/* ---- timers ---- */

static void retry_expired(struct sr_cm_id *id)
{
	int ev = -1;

	id->mad_valid = false;
	switch (id->state) {
	case CM_REQ_SENT:
		sr_cm_send_rej(id, SR_CM_REJ_TIMEOUT, NULL, 0);
		ev = RDMA_CM_EVENT_UNREACHABLE;
		id->state = CM_DISCONNECTED;
		sr_cm_qp_to_err(id);
		break;
	case CM_SIDR_REQ_SENT:
		ev = RDMA_CM_EVENT_UNREACHABLE;
		id->state = CM_DISCONNECTED;
		break;
	case CM_REP_SENT:
		sr_cm_send_rej(id, SR_CM_REJ_TIMEOUT, NULL, 0);
		ev = RDMA_CM_EVENT_UNREACHABLE;
		id->state = CM_DISCONNECTED;
		sr_cm_qp_to_err(id);
		break;
	case CM_DREQ_SENT:
		enter_timewait(id);
		disconnected_event(id, NULL, 0);
		return;
	default:
		return;
	}
	if (!id->destroyed) {
		struct sr_cm_event *e = sr_cm_event_new(id, (enum rdma_cm_event_type)ev, -ETIMEDOUT);
		if (e)
			sr_cm_event_post(id, e);
	}
}

/* Runs due timers; returns the next deadline (0 = none).  Lock held. */
static uint64_t run_timers(uint64_t now)
{
	uint64_t next = 0;

again:
	for (struct sr_cm_id *id = sr_cm.ids; id; id = id->next) {
		if (id->timer == CM_T_NONE)
			continue;
		if (id->deadline > now) {
			if (!next || id->deadline < next)
				next = id->deadline;
			continue;
		}
		enum sr_cm_timer t = id->timer;
		id->timer = CM_T_NONE;
		if (t == CM_T_RETRY) {
			if (id->mad_valid && id->retries_left-- > 0) {
				sr_cm_send_mad(&id->local, &id->peer, id->mad, id->tos);
				id->timer = CM_T_RETRY;
				id->deadline = now + id->timeout_ns;
			} else {
				retry_expired(id);
			}
		} else if (t == CM_T_MPA) {
			sr_iwcm_timeout(id);
		} else if (t == CM_T_TIMEWAIT) {
			id->state = CM_DISCONNECTED;
			if (!id->destroyed) {
				struct sr_cm_event *e = sr_cm_event_new(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
				if (e)
					sr_cm_event_post(id, e);
			}
		}
		if (id->destroyed && id->timer == CM_T_NONE) {
			sr_cm_id_free(id); /* the list changed: start over */
			goto again;
		}
		if (id->timer != CM_T_NONE && (!next || id->deadline < next))
			next = id->deadline;
	}
	return next;
}

/* softrdmad is gone: nothing routes MADs to this process any more, and a
 * new daemon would give its Communication IDs and listens to others.  So
 * every RoCE id holding one gets RDMA_CM_EVENT_DEVICE_REMOVAL, as rdma_cm
 * ids do when their device goes away, and its retries stop (no answer can
 * reach it); the application destroys it.  Its QP is in error already:
 * the verbs context lost its own connection to the daemon.  Lock held. */
static void daemon_lost(void)
{
	unsigned n = 0;

	for (struct sr_cm_id *id = sr_cm.ids; id; id = id->next) {
		struct sr_cm_event *e;

		if (id->destroyed || id->removed || sr_iwcm_id(id))
			continue;
		if (!id->dev && id->state != CM_LISTEN && !id->lcid)
			continue; /* bound to nothing of the daemon's */
		id->removed = true;
		if (id->timer == CM_T_RETRY)
			id->timer = CM_T_NONE;
		e = sr_cm_event_new(id, RDMA_CM_EVENT_DEVICE_REMOVAL, 0);
		if (e) {
			sr_cm_event_post(id, e);
			n++;
		}
	}
	fprintf(stderr,
		"softrdma: lost the connection to softrdmad: %u rdma_cm id(s) on RoCE get "
		"RDMA_CM_EVENT_DEVICE_REMOVAL\n",
		n);
}

/* Watch fd for events (EPOLLIN, EPOLLOUT) in the CM thread; 0 stops. */
void sr_cm_poll_fd(int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	if (!events)
		epoll_ctl(sr_cm.epfd, EPOLL_CTL_DEL, fd, NULL);
	else if (epoll_ctl(sr_cm.epfd, EPOLL_CTL_MOD, fd, &ev) && errno == ENOENT)
		epoll_ctl(sr_cm.epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void *cm_thread(void *arg)
{
	int ep = sr_cm.epfd;
	struct epoll_event ev = { .events = EPOLLIN };
	int dfd = sr_cm.daemon ? sr_daemon_fd(sr_cm.daemon) : -1;
	bool daemon_ok = dfd >= 0;

	if (dfd >= 0) {
		ev.data.fd = dfd;
		epoll_ctl(ep, EPOLL_CTL_ADD, dfd, &ev);
	}
	ev.data.fd = sr_cm.wake_fd;
	epoll_ctl(ep, EPOLL_CTL_ADD, sr_cm.wake_fd, &ev);
	for (;;) {
		pthread_mutex_lock(&sr_cm.lock);
		uint64_t now = sr_cm_now();
		uint64_t next = run_timers(now);
		pthread_mutex_unlock(&sr_cm.lock);
		int tmo = -1;
		if (next) {
			uint64_t ms = (next - now + 999999) / 1000000;
			tmo = ms > 60000 ? 60000 : (int)ms;
		}
		struct epoll_event evs[16];
		int n = epoll_wait(ep, evs, 16, tmo);
		for (int i = 0; i < n; i++) {
			if (dfd >= 0 && evs[i].data.fd == dfd) {
				sr_daemon_on_readable(sr_cm.daemon);
				if (daemon_ok && sr_daemon_dead(sr_cm.daemon)) {
					daemon_ok = false;
					epoll_ctl(ep, EPOLL_CTL_DEL, dfd, NULL);
					pthread_mutex_lock(&sr_cm.lock);
					daemon_lost();
					pthread_mutex_unlock(&sr_cm.lock);
				}
			} else if (evs[i].data.fd == sr_cm.wake_fd) {
				uint64_t v;
				if (read(sr_cm.wake_fd, &v, sizeof(v)) < 0) {
					/* EAGAIN: someone else drained it */
				}
			} else if (!sr_iwcm_on_fd(evs[i].data.fd)) {
				/* an fd no id claims any more: stop watching it */
				epoll_ctl(ep, EPOLL_CTL_DEL, evs[i].data.fd, NULL);
			}
		}
	}
	return NULL;
}

int sr_cm_engine_start(void)
{
	int err = 0;

	sr_cm.tx4 = sr_cm.tx6 = -1;
	/* for tests and impatient users: how long a dead peer takes to notice */
	sr_cm.response_timeout = (uint8_t)sr_env_range("SOFTRDMA_CM_RESPONSE_TIMEOUT", SR_CMA_RESPONSE_TIMEOUT, 31,
						       "a CM timeout exponent");
	sr_cm.max_cm_retries = (uint8_t)sr_env_range("SOFTRDMA_CM_RETRIES", SR_CMA_MAX_CM_RETRIES, 15, "retries");
	sr_cm.connect_retry_ns =
		(uint64_t)sr_env_range("SOFTRDMA_CM_CONNECT_RETRY_MS", 1000, 600000, "milliseconds") * 1000000ull;
	sr_cm.hi_tid = ((uint64_t)getpid() & 0xffff) << 16 | 0x2;
	sr_cm.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (sr_cm.wake_fd < 0)
		return -errno;
	sr_cm.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (sr_cm.epfd < 0)
		return -errno;
	/* RoCE's CM needs softrdmad (UDP 4791 and QP1 are host-wide);
	 * iWARP's is plain TCP and needs nothing but this process */
	if (sr_cm.have_roce) {
		sr_cm.daemon = sr_daemon_open(cm_pkt, NULL, &err);
		if (!sr_cm.daemon)
			return err ? err : -ENODEV;
	}
	if (sr_thread_start(&sr_cm.thread, "sr-cm", true, cm_thread, NULL))
		return -EAGAIN;
	sr_cm.thread_started = true;
	return 0;
}
