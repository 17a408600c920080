/* rdma_cm on Soft-iWARP devices, as the Linux kernel's iw_cm does it with
 * siw: a connection is a TCP connection on the rdma_cm port, begun by an
 * MPA Request/Reply exchange (RFC 5044 7, RFC 6581) that carries the
 * rdma_cm private data and negotiates CRC, IRD/ORD and the ready-to-
 * receive message; the connected socket is then handed to the QP
 * (sr_iw_qp_connect in libibverbs), which owns it from then on.
 * Disconnection is the QP's business: rdma_disconnect moves it to SQD (as
 * rdma-core does on iWARP), the QP finishes what is on the wire and closes
 * the stream, and the QP's close notification -- our close, the peer's FIN,
 * a Terminate, a reset -- becomes RDMA_CM_EVENT_DISCONNECTED.
 *
 * Behaviour follows siw and rdma-core:
 *  - rdma_connect starts the TCP connect and returns; the CM thread sends
 *    the MPA Request once TCP is up and waits up to 10 s for the Reply
 *    (UNREACHABLE, status -ETIMEDOUT).  A connect the peer refuses
 *    (nobody listening) is retried for up to 1 s, then ends in REJECTED,
 *    status -ECONNREFUSED; a TCP timeout in UNREACHABLE -ETIMEDOUT; other
 *    TCP errors in CONNECT_ERROR.  siw fails rdma_connect itself instead,
 *    which leaves programs like rping waiting for completions that never
 *    come: as on RoCE, a failed connect is an event here, and the QP is
 *    moved to ERR (as rdma-core does on REJECTED) so its work flushes;
 *  - a listener accepts TCP at once and waits up to 5 s for a complete MPA
 *    Request before the application hears of it (CONNECT_REQUEST);
 *  - a Reply with the Reject bit gives REJECTED, status -ECONNRESET, with
 *    the peer's private data; a peer that closes before replying gives
 *    REJECTED -ECONNRESET too; a Reply we cannot honour (markers) gives
 *    REJECTED -ECONNREFUSED; a malformed one CONNECT_ERROR -EPROTO;
 *  - IRD/ORD negotiation is "relaxed" as siw's: the responder lowers its
 *    ORD to the initiator's IRD and raises its IRD to the initiator's ORD
 *    (up to the device maximum), the initiator takes the Reply's values;
 *  - MPA revision 2 with the RFC 6581 block, no peer-to-peer RTR unless
 *    asked for (SOFTRDMA_IW_RTR), CRC by the configuration ("crc"): used
 *    when either side asks for it; markers never.
 *
 * Frames are read in the CM thread (passive: the Request; active: the
 * Reply) with exact lengths, never past their end: the peer's first FPDU
 * may follow a Reply at once, and belongs to the QP.  Everything runs with
 * sr_cm.lock held unless a function says otherwise. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "cm/cm.h"
#include "common/env.h"
#include "iwarp/iwarp_cm.h"
#include "common/sock.h"

/* siw's MPA timeouts: the initiator waits 10 s for the Reply, the
 * responder 5 s for the Request once TCP is up.  SOFTRDMA_IW_MPA_TIMEOUT_MS
 * sets the first (the second is half of it). */
#define IW_REPLY_TIMEOUT_MS 10000

/* ---- tunables (environment, read once) ---- */

static int env_rev = -1;
static int env_rtr = -1;
static int env_retry_ms = -1;
static int env_mpa_ms = -1;

static int env_ms(const char *name, int dflt)
{
	return (int)sr_env_range(name, dflt, 600000, "milliseconds");
}

static uint64_t reply_timeout_ns(void)
{
	if (env_mpa_ms < 0)
		env_mpa_ms = env_ms("SOFTRDMA_IW_MPA_TIMEOUT_MS", IW_REPLY_TIMEOUT_MS);
	return (uint64_t)env_mpa_ms * 1000000ull;
}

/* SOFTRDMA_IW_CONNECT_RETRY_MS (default 1000): how long rdma_connect keeps
 * retrying a TCP connect the peer refuses (nobody listening yet) before it
 * fails with ECONNREFUSED; 0 fails at once, as siw does.  Applications
 * often connect a moment before their peer's rdma_listen: perftest -R's
 * server listens again for its second connection after the first, and
 * perftest's own retry after a refusal reuses destroyed ids. */
static int connect_retry_ms(void)
{
	if (env_retry_ms < 0)
		env_retry_ms = env_ms("SOFTRDMA_IW_CONNECT_RETRY_MS", 1000);
	return env_retry_ms;
}

/* SOFTRDMA_IW_MPA_REV=1|2: the MPA revision our Requests use (siw's
 * mpa_version); a responder answers with the lower of the two. */
static uint8_t our_rev(void)
{
	if (env_rev < 0) {
		const char *s = getenv("SOFTRDMA_IW_MPA_REV");
		env_rev = s && *s == '1' ? 1 : 2;
	}
	return (uint8_t)env_rev;
}

/* SOFTRDMA_IW_RTR=send|write|read: the initiator asks for RFC 6581
 * peer-to-peer mode with that ready-to-receive message (siw's
 * peer_to_peer); default none. */
static enum sr_mpa_rtr our_rtr(void)
{
	if (env_rtr < 0) {
		const char *s = getenv("SOFTRDMA_IW_RTR");
		env_rtr = SR_MPA_RTR_NONE;
		if (s && !strcmp(s, "send"))
			env_rtr = SR_MPA_RTR_SEND;
		else if (s && !strcmp(s, "write"))
			env_rtr = SR_MPA_RTR_WRITE;
		else if (s && !strcmp(s, "read"))
			env_rtr = SR_MPA_RTR_READ;
		else if (s && *s && strcmp(s, "none"))
			fprintf(stderr,
				"softrdma: SOFTRDMA_IW_RTR=%s: expected none, send, write or read; using none\n", s);
	}
	return (enum sr_mpa_rtr)env_rtr;
}

/* ---- helpers ---- */

static struct sr_cm_event *post(struct sr_cm_id *c, struct sr_cm_id *owner, enum rdma_cm_event_type type, int status)
{
	struct sr_cm_event *e;

	if (owner->destroyed)
		return NULL;
	e = sr_cm_event_new(c, type, status);
	if (e)
		sr_cm_event_post(owner, e);
	return e;
}

static void unpoll(struct sr_cm_id *c)
{
	if (c->iw_polled) {
		sr_cm_poll_fd(c->iw_fd, 0);
		c->iw_polled = false;
	}
}

static void close_fd(struct sr_cm_id *c)
{
	unpoll(c);
	if (c->iw_fd >= 0)
		close(c->iw_fd);
	c->iw_fd = -1;
	c->iw_have = 0;
}

/* An MPA frame is tiny; a fresh connection's send buffer takes it whole.
 * Wait briefly if it does not (the socket is non-blocking). */
static int send_all(int fd, const uint8_t *p, size_t len)
{
	int waited = 0;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && waited < 50) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };
			poll(&pfd, 1, 100);
			waited++;
			continue;
		}
		return n < 0 ? -errno : -EPIPE;
	}
	return 0;
}

static uint16_t cap16(uint32_t v, uint32_t max)
{
	return (uint16_t)(v > max ? max : v);
}

static void sockaddr_from_in6(const struct sockaddr_in6 *a, int family, struct sockaddr_storage *out, socklen_t *len)
{
	memset(out, 0, sizeof(*out));
	if (family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)out;
		s->sin_family = AF_INET;
		s->sin_port = a->sin6_port;
		memcpy(&s->sin_addr, &a->sin6_addr.s6_addr[12], 4);
		*len = sizeof(*s);
	} else {
		memcpy(out, a, sizeof(*a));
		*len = sizeof(*a);
	}
}

/* Read more of the MPA frame on c->iw_fd, never past its end.  1: the
 * frame is complete (c->iw_have bytes); 0: more to come; -errno: the
 * stream ended (-ECONNRESET) or the frame is not MPA (-EPROTO, -EMSGSIZE). */
static int frame_read(struct sr_cm_id *c)
{
	for (;;) {
		int need = sr_mpa_rr_need(c->iw_frame, c->iw_have, sizeof(c->iw_frame));
		ssize_t n;

		if (need <= 0)
			return need ? need : 1; /* -EMSGSIZE: over 512 bytes of private data */
		do {
			n = recv(c->iw_fd, c->iw_frame + c->iw_have, (size_t)need, MSG_DONTWAIT);
		} while (n < 0 && errno == EINTR);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
		c->iw_have = (uint16_t)(c->iw_have + n);
	}
}

/* ---- the QP side ---- */

static struct sr_cm_id *find_serial(uint64_t serial)
{
	for (struct sr_cm_id *o = sr_cm.ids; o; o = o->next)
		if (o->serial == serial)
			return o;
	return NULL;
}

/* The QP's stream ended (from the verbs progress thread or an application
 * thread polling a CQ, no softrdma lock held).  The id may be gone: it is
 * named by its serial, not its address. */
static void qp_closed(void *arg, enum sr_iw_close_reason reason)
{
	uint64_t serial = (uint64_t)(uintptr_t)arg;
	struct sr_cm_id *c;

	pthread_mutex_lock(&sr_cm.lock);
	c = find_serial(serial);
	if (c && (c->state == CM_ESTABLISHED || c->state == CM_DREQ_SENT)) {
		sr_cm_dbg("iWARP id %p: connection closed (reason %d)", (void *)c, (int)reason);
		c->state = CM_DISCONNECTED;
		post(c, c, RDMA_CM_EVENT_DISCONNECTED, 0);
	}
	pthread_mutex_unlock(&sr_cm.lock);
}

struct ibv_qp *sr_iwcm_qp(struct sr_cm_id *c)
{
	return c->id.qp ? c->id.qp : sr_iw_qp_lookup(c->id.verbs, c->iw_qpn);
}

/* Takes the QP an active or passive id connects: its own, or else the
 * application's own named by p->qp_num (as the kernel's iw_cm, which
 * finds it by number); false if there is none. */
static bool take_qp(struct sr_cm_id *c, const struct rdma_conn_param *p)
{
	if (!c->id.qp)
		c->iw_qpn = p ? p->qp_num : 0;
	return sr_iwcm_qp(c) != NULL;
}

/* INIT with the access an RDMA connection needs (reads and writes from the
 * peer, as the kernel's iw_cm_init_qp_attr gives), then onto the stream. */
static int qp_go(struct sr_cm_id *c, bool initiator, bool crc, uint16_t ird, uint16_t ord, enum sr_mpa_rtr rtr)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						    IBV_ACCESS_REMOTE_ATOMIC };
	struct sr_iw_conn_params p = {
		.fd = c->iw_fd,
		.crc = crc,
		.mpa_rev = c->iw_rev,
		.ird = ird,
		.ord = ord,
		.rtr = (int)rtr,
		.initiator = initiator,
		.on_close = qp_closed,
		.close_arg = (void *)(uintptr_t)c->serial,
	};
	struct ibv_qp *qp = sr_iwcm_qp(c);
	int err;

	if (!qp)
		return -EINVAL;
	/* an application's own QP may still be in RESET, which siw connects too */
	if (qp->state == IBV_QPS_RESET)
		ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT);
	else if (qp->state == IBV_QPS_INIT)
		ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS);
	unpoll(c);
	err = sr_iw_qp_connect(qp, &p);
	if (err)
		return -err;
	c->iw_fd = -1; /* the QP's now */
	c->iw_have = 0;
	c->resp_res = (uint8_t)(ird > 255 ? 255 : ird);
	c->init_depth = (uint8_t)(ord > 255 ? 255 : ord);
	return 0;
}

static void fill_conn(struct sr_cm_event *e, const struct sr_mpa_rr *rr, uint16_t ird, uint16_t ord)
{
	/* rdma_cm's iWARP mapping: initiator_depth <- IRD, responder_resources <- ORD */
	sr_cm_fill_conn_param(e, rr ? rr->pd : NULL, rr ? (uint8_t)(rr->pd_len > 255 ? 255 : rr->pd_len) : 0,
			      (uint8_t)(ord > 255 ? 255 : ord), (uint8_t)(ird > 255 ? 255 : ird), false, 0, 0, false,
			      0);
}

/* ---- listening ---- */

/* rdma_cm's RDMA_OPTION_ID_TOS on the TCP socket of an iWARP id (the
 * kernel's iw_cm hands it to the device as the connection's TOS): its
 * DSCP bits, the ECN field being TCP's.  An IPv6 socket may carry IPv4
 * too (mapped), so it gets both.  An accepted socket inherits its
 * listener's. */
static void tcp_set_tos(int fd, int fam, uint8_t tos)
{
	int v = tos;

	if (!tos)
		return;
	if (setsockopt(fd, IPPROTO_IP, IP_TOS, &v, sizeof(v)) && fam == AF_INET)
		sr_cm_dbg("IP_TOS 0x%x: %s", tos, strerror(errno));
	if (fam == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &v, sizeof(v)))
		sr_cm_dbg("IPV6_TCLASS 0x%x: %s", tos, strerror(errno));
}

/* Lock not held.  A TCP listener on the id's address and port (the
 * wildcard takes every address; connections to addresses of no iWARP
 * device are closed when they arrive).  With a port chosen for the
 * application, another is tried if the kernel's TCP has it. */
int sr_iwcm_listen(struct sr_cm_id *c, int backlog)
{
	struct sockaddr_storage ss;
	socklen_t len = (socklen_t)sr_cm_addr_len(&c->id.route.addr.src_addr);
	int fam = c->id.route.addr.src_addr.sa_family, one = 1, fd;

	if (c->iw_lfd >= 0)
		return 0;
	fd = sr_socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fam == AF_INET6) {
		int v6only = c->afonly ? 1 : 0;
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
	}
	tcp_set_tos(fd, fam, c->tos);
	memcpy(&ss, &c->id.route.addr.src_addr, len);
	for (int tries = 0;; tries++) {
		if (!bind(fd, (struct sockaddr *)&ss, len))
			break;
		if (errno != EADDRINUSE || !c->port_auto || tries > 64) {
			int e = errno;
			close(fd);
			return -e;
		}
		sr_cm_set_port((struct sockaddr *)&ss, (uint16_t)(32768 + random() % (61000 - 32768)));
	}
	if (listen(fd, backlog > 0 ? backlog : 128)) {
		int e = errno;
		close(fd);
		return -e;
	}
	pthread_mutex_lock(&sr_cm.lock);
	if (c->port_auto) {
		uint16_t port = sr_cm_port((struct sockaddr *)&ss);
		sr_cm_set_port(&c->id.route.addr.src_addr, port);
		c->service_id = sr_cma_service_id((uint16_t)c->id.ps, port);
	}
	c->iw_lfd = fd;
	sr_cm_poll_fd(fd, EPOLLIN);
	pthread_mutex_unlock(&sr_cm.lock);
	sr_cm_dbg("iWARP id %p: listening on TCP port %u", (void *)c, sr_cm_port(&c->id.route.addr.src_addr));
	return 0;
}

void sr_iwcm_unlisten(struct sr_cm_id *c)
{
	if (c->iw_lfd < 0)
		return;
	sr_cm_poll_fd(c->iw_lfd, 0);
	close(c->iw_lfd);
	c->iw_lfd = -1;
	/* connections whose Request the application never saw go with it */
	for (struct sr_cm_id *o = sr_cm.ids; o; o = o->next)
		if (o->listener == c && o->state == CM_MPA_REQ_WAIT) {
			close_fd(o);
			o->state = CM_DISCONNECTED;
			o->destroyed = true;
			sr_cm_arm(o, CM_T_MPA, 0); /* freed by the timer pass */
		}
}

/* A connection accepted on listener l: an id, hidden until its Request
 * is complete. */
static void accepted(struct sr_cm_id *l, int fd)
{
	struct sockaddr_storage ls, ps;
	socklen_t ll = sizeof(ls), pl = sizeof(ps);
	struct sockaddr_in6 local, peer;
	struct sr_cm_dev *dev;
	uint8_t gidx = 0;
	struct sr_cm_id *c;
	int one = 1;

	if (getsockname(fd, (struct sockaddr *)&ls, &ll) || getpeername(fd, (struct sockaddr *)&ps, &pl)) {
		close(fd);
		return;
	}
	sr_cm_to_in6((struct sockaddr *)&ls, &local);
	sr_cm_to_in6((struct sockaddr *)&ps, &peer);
	dev = sr_cm_dev_by_addr(&local, &gidx);
	if (!dev && sr_cm_is_loopback(&local))
		dev = sr_cm_dev_loopback(&local, false, true, NULL);
	if (!dev || !dev->iwarp) {
		sr_cm_dbg("iWARP listener %p: connection to an address of no iWARP device: closed", (void *)l);
		close(fd);
		return;
	}
	/* addresses as the application sees them: the sockets' own */
	c = sr_cm_child_new(l, IBV_QPT_RC, dev, gidx, &local, &peer, (struct sockaddr *)&ls, (struct sockaddr *)&ps);
	if (!c) {
		close(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->iw_fd = fd;
	c->state = CM_MPA_REQ_WAIT;
	sr_cm_poll_fd(fd, EPOLLIN);
	c->iw_polled = true;
	sr_cm_arm(c, CM_T_MPA, reply_timeout_ns() / 2);
	sr_cm_dbg("iWARP listener %p: TCP connection accepted, id %p waits for the MPA Request", (void *)l, (void *)c);
}

static void listener_readable(struct sr_cm_id *l)
{
	for (int i = 0; i < 64; i++) {
		int fd = accept4(l->iw_lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return; /* EAGAIN, or a connection that died while queued */
		accepted(l, fd);
	}
}

/* Answer a Request we cannot take with a Reject Reply, then close. */
static void reject_request(struct sr_cm_id *c, uint8_t rev, const void *pdata, uint8_t len)
{
	struct sr_mpa_rr rr = { .reply = true, .reject = true, .rev = rev < 1 ? 1 : rev > 2 ? 2 : rev };
	uint8_t buf[SR_MPA_RR_HDR_LEN + SR_MPA_MAX_PD];
	int n;

	rr.pd = pdata;
	rr.pd_len = len;
	if (c->iw_enhanced)
		sr_mpa_rr_set_v2(&rr, 0, 0, false, 0);
	n = sr_mpa_rr_build(buf, sizeof(buf), &rr);
	if (n > 0 && c->iw_fd >= 0)
		send_all(c->iw_fd, buf, (size_t)n);
	close_fd(c);
}

/* The Request is complete: check it, then tell the application. */
static void request_done(struct sr_cm_id *c)
{
	struct sr_cm_id *l = c->listener;
	struct sr_mpa_rr rr;
	int n = sr_mpa_rr_parse(&rr, c->iw_frame, c->iw_have);

	sr_cm_arm(c, CM_T_NONE, 0);
	if (n < 0 || rr.reply || rr.rev < 1 || rr.rev > 2) {
		/* siw closes too: not MPA, or a revision we don't speak */
		sr_cm_dbg("iWARP id %p: bad MPA Request (%d, rev %u): closed", (void *)c, n, n < 0 ? 0 : rr.rev);
		goto drop;
	}
	c->iw_rev = rr.rev;
	c->iw_enhanced = rr.enhanced;
	if (rr.markers) {
		sr_cm_dbg("iWARP id %p: MPA Request asks for markers: rejected", (void *)c);
		reject_request(c, rr.rev, NULL, 0);
		goto drop;
	}
	if (!l || l->destroyed || l->state != CM_LISTEN) {
		reject_request(c, rr.rev, NULL, 0);
		goto drop;
	}
	c->iw_crc = rr.crc || c->dev->crc;
	c->iw_peer_ird = rr.enhanced ? sr_mpa_ird(&rr) : c->dev->max_rd_atomic;
	c->iw_peer_ord = rr.enhanced ? sr_mpa_ord(&rr) : c->dev->max_dest_rd_atomic;
	c->iw_rtr = SR_MPA_RTR_NONE;
	if (rr.enhanced && (rr.ird_word & SR_MPA_V2_P2P)) {
		/* the RTR we ask for, of those offered: Write, Read, then Send */
		if (rr.ord_word & SR_MPA_V2_WRITE_RTR)
			c->iw_rtr = SR_MPA_RTR_WRITE;
		else if (rr.ord_word & SR_MPA_V2_READ_RTR)
			c->iw_rtr = SR_MPA_RTR_READ;
		else if (rr.ird_word & SR_MPA_V2_ZERO_RTR)
			c->iw_rtr = SR_MPA_RTR_SEND;
		else
			c->iw_rtr = SR_MPA_RTR_WRITE; /* none named: siw proposes a Write */
	}
	/* accept(NULL) gives what the peer asked for, within our means */
	c->resp_res = (uint8_t)cap16(c->iw_peer_ord, c->dev->max_dest_rd_atomic);
	c->init_depth = (uint8_t)cap16(c->iw_peer_ird, c->dev->max_rd_atomic);
	unpoll(c); /* nothing more may come before our Reply */
	c->state = CM_REQ_RCVD;
	sr_cm_dbg("iWARP id %p: MPA Request rev %u%s, CRC %d, IRD %u ORD %u, %u bytes of private data", (void *)c,
		  rr.rev, rr.enhanced ? " enhanced" : "", rr.crc, c->iw_peer_ird, c->iw_peer_ord, rr.pd_len);
	struct sr_cm_event *e = sr_cm_event_new(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!e) {
		reject_request(c, rr.rev, NULL, 0);
		goto drop;
	}
	e->ev.listen_id = &l->id;
	/* the kernel's iWARP CONNECT_REQUEST: initiator_depth <- the peer's
	 * IRD, responder_resources <- the peer's ORD */
	sr_cm_fill_conn_param(e, rr.pd, (uint8_t)(rr.pd_len > 255 ? 255 : rr.pd_len), c->resp_res, c->init_depth, false,
			      0, 0, false, 0);
	sr_cm_event_post(l, e);
	return;
drop:
	close_fd(c);
	c->state = CM_DISCONNECTED;
	c->destroyed = true;
	sr_cm_arm(c, CM_T_MPA, 0); /* freed by the timer pass */
}

/* ---- connecting ---- */

/* Start (or retry) the active TCP connect (non-blocking; the CM thread
 * sees it finish).  0, or -errno if it failed at once. */
static int connect_start(struct sr_cm_id *c)
{
	struct sockaddr_storage la, ra;
	socklen_t llen, rlen;
	struct sockaddr_in6 local = c->local, peer = c->peer;
	int fam = IN6_IS_ADDR_V4MAPPED(&peer.sin6_addr) ? AF_INET : AF_INET6;
	int fd, one = 1, err;

	local.sin6_port = c->port_auto ? 0 : htons(sr_cm_port(&c->id.route.addr.src_addr));
	peer.sin6_port = htons(sr_cm_port(&c->id.route.addr.dst_addr));
	sockaddr_from_in6(&local, fam, &la, &llen);
	sockaddr_from_in6(&peer, fam, &ra, &rlen);
	fd = sr_socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	tcp_set_tos(fd, fam, c->tos);
	if (bind(fd, (struct sockaddr *)&la, llen) ||
	    (connect(fd, (struct sockaddr *)&ra, rlen) && errno != EINPROGRESS)) {
		err = -errno;
		close(fd);
		return err;
	}
	c->iw_fd = fd;
	c->iw_connecting = true;
	sr_cm_poll_fd(fd, EPOLLOUT);
	c->iw_polled = true;
	return 0;
}

/* The active connect failed with err: retry a refusal while the window
 * lasts, else tell the application (as the kernel's cma_iw_handler maps
 * a failed connect: refused/reset -> REJECTED, timeout -> UNREACHABLE). */
static void connect_failed(struct sr_cm_id *c, int err)
{
	close_fd(c);
	if (err == -ECONNREFUSED && sr_cm_now() < c->give_up && !c->destroyed) {
		sr_cm_arm(c, CM_T_MPA, 10000000ull); /* 10 ms, then again */
		return;
	}
	sr_cm_dbg("iWARP id %p: connect failed: %s", (void *)c, strerror(-err));
	c->iw_connecting = false;
	sr_cm_arm(c, CM_T_NONE, 0);
	sr_cm_qp_to_err(c);
	c->state = CM_DISCONNECTED;
	post(c, c,
	     err == -ECONNREFUSED || err == -ECONNRESET ? RDMA_CM_EVENT_REJECTED :
	     err == -ETIMEDOUT				? RDMA_CM_EVENT_UNREACHABLE :
							  RDMA_CM_EVENT_CONNECT_ERROR,
	     err);
}

/* Is fd connected to itself?  With nobody listening on a port of this
 * host in the ephemeral range, TCP can choose that very port for our end
 * of the connect: both SYNs meet (a simultaneous open) and the socket is
 * connected to itself.  Our MPA Request would then come back to us as
 * the "Reply".  The retries of a refused connect (connect_failed), each
 * from the next ephemeral port, make that likely enough to matter. */
static bool self_connected(int fd)
{
	struct sockaddr_storage me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);
	struct sockaddr_in6 a, b;

	if (getsockname(fd, (struct sockaddr *)&me, &ml) || getpeername(fd, (struct sockaddr *)&peer, &pl))
		return false;
	sr_cm_to_in6((struct sockaddr *)&me, &a);
	sr_cm_to_in6((struct sockaddr *)&peer, &b);
	return a.sin6_port == b.sin6_port && !memcmp(&a.sin6_addr, &b.sin6_addr, sizeof(a.sin6_addr));
}

/* The active socket is writable: TCP connected (or failed).  Send the
 * MPA Request and wait for the Reply. */
static void connect_done(struct sr_cm_id *c)
{
	struct sockaddr_storage me;
	socklen_t ml = sizeof(me), sl = sizeof(int);
	int soerr = 0, one = 1, err;

	if (getsockopt(c->iw_fd, SOL_SOCKET, SO_ERROR, &soerr, &sl))
		soerr = errno;
	if (soerr) {
		connect_failed(c, -soerr);
		return;
	}
	if (self_connected(c->iw_fd)) {
		sr_cm_dbg("iWARP id %p: TCP connected to itself: nobody listens on the port", (void *)c);
		connect_failed(c, -ECONNREFUSED);
		return;
	}
	setsockopt(c->iw_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	err = send_all(c->iw_fd, c->iw_frame, c->iw_req_len);
	if (err) {
		connect_failed(c, err == -EPIPE ? -ECONNRESET : err);
		return;
	}
	c->iw_connecting = false;
	/* what the application sees is the connection's own address */
	if (!getsockname(c->iw_fd, (struct sockaddr *)&me, &ml)) {
		struct sockaddr_in6 a;
		sr_cm_to_in6((struct sockaddr *)&me, &a);
		sr_cm_set_port(&c->id.route.addr.src_addr, ntohs(a.sin6_port));
	}
	c->iw_have = 0;
	sr_cm_poll_fd(c->iw_fd, EPOLLIN);
	sr_cm_arm(c, CM_T_MPA, reply_timeout_ns());
	sr_cm_dbg("iWARP id %p: TCP connected, MPA Request sent (%u bytes)", (void *)c, c->iw_req_len);
}

int sr_iwcm_connect(struct sr_cm_id *c, const struct rdma_conn_param *p)
{
	struct sr_mpa_rr rr = { .reply = false };
	enum sr_mpa_rtr rtr = our_rtr();
	uint16_t ird, ord;
	int n, err;

	if (c->state != CM_ROUTE_RESOLVED || !take_qp(c, p))
		return -EINVAL; /* iWARP connects a QP: siw refuses a connect without one */
	ird = c->resp_res = cap16(p->responder_resources, c->dev->max_dest_rd_atomic);
	ord = c->init_depth = cap16(p->initiator_depth, c->dev->max_rd_atomic);
	rr.rev = our_rev();
	rr.crc = c->dev->crc;
	if (rr.rev >= 2) {
		unsigned int mask = rtr ? 1u << rtr : 0;
		/* a Read RTR needs one outstanding Read of ours */
		sr_mpa_rr_set_v2(&rr, ird, rtr == SR_MPA_RTR_READ && !ord ? 1 : ord, rtr != SR_MPA_RTR_NONE, mask);
	}
	rr.pd = p->private_data;
	rr.pd_len = p->private_data ? p->private_data_len : 0;
	n = sr_mpa_rr_build(c->iw_frame, sizeof(c->iw_frame), &rr);
	if (n < 0)
		return n;
	c->iw_req_len = (uint16_t)n;
	c->iw_rev = rr.rev;
	c->iw_enhanced = rr.enhanced;
	c->iw_rtr = (uint8_t)rtr;
	c->give_up = sr_cm_now() + (uint64_t)connect_retry_ms() * 1000000ull;
	c->state = CM_REQ_SENT;
	sr_cm_dbg("iWARP id %p: connecting (MPA rev %u, CRC %d, IRD %u ORD %u, RTR %d, %u bytes of private data)",
		  (void *)c, rr.rev, rr.crc, ird, ord, (int)rtr, rr.pd_len);
	err = connect_start(c);
	if (err == -ECONNREFUSED || err == -ECONNRESET || err == -ETIMEDOUT || err == -ENETUNREACH ||
	    err == -EHOSTUNREACH) {
		connect_failed(c, err); /* the peer's answer: an event, as any other */
		return 0;
	}
	if (err)
		c->state = CM_ROUTE_RESOLVED; /* our own trouble (the local address): fails the call */
	return err;
}

/* The Reply is complete. */
static void reply_done(struct sr_cm_id *c)
{
	struct sr_mpa_rr rr;
	int n = sr_mpa_rr_parse(&rr, c->iw_frame, c->iw_have);
	int status = 0;
	enum rdma_cm_event_type ev = RDMA_CM_EVENT_ESTABLISHED;
	uint16_t ird = c->resp_res, ord = c->init_depth;
	enum sr_mpa_rtr rtr = SR_MPA_RTR_NONE;

	sr_cm_arm(c, CM_T_NONE, 0);
	if (n < 0 || !rr.reply || rr.rev < 1 || rr.rev > 2) {
		ev = RDMA_CM_EVENT_CONNECT_ERROR;
		status = -EPROTO;
		goto fail;
	}
	if (rr.reject) {
		ev = RDMA_CM_EVENT_REJECTED;
		status = -ECONNRESET;
		goto fail;
	}
	if (rr.markers) {
		ev = RDMA_CM_EVENT_REJECTED;
		status = -ECONNREFUSED;
		goto fail;
	}
	if (c->iw_enhanced) {
		if (!rr.enhanced) {
			/* RFC 6581: an enhanced Request gets an enhanced Reply */
			ev = RDMA_CM_EVENT_REJECTED;
			status = -ECONNRESET;
			goto fail;
		}
		/* relaxed, as siw: our ORD within the peer's IRD, our IRD
		 * covering the peer's ORD */
		if (sr_mpa_ord(&rr) > c->dev->max_dest_rd_atomic) {
			ev = RDMA_CM_EVENT_CONNECT_ERROR;
			status = -ENOMEM;
			goto fail;
		}
		ord = ord < sr_mpa_ird(&rr) ? ord : sr_mpa_ird(&rr);
		ird = ird > sr_mpa_ord(&rr) ? ird : sr_mpa_ord(&rr);
		if (c->iw_rtr != SR_MPA_RTR_NONE) {
			rtr = sr_mpa_rr_rtr(&rr);
			if (rtr == SR_MPA_RTR_NONE) {
				ev = RDMA_CM_EVENT_CONNECT_ERROR;
				status = -EPROTO;
				goto fail;
			}
		}
	}
	c->iw_rev = rr.rev < c->iw_rev ? rr.rev : c->iw_rev;
	int err = qp_go(c, true, rr.crc, ird, ord, rtr);
	if (err) {
		ev = RDMA_CM_EVENT_CONNECT_ERROR;
		status = err;
		goto fail;
	}
	c->state = CM_ESTABLISHED;
	sr_cm_dbg("iWARP id %p: established (CRC %d, IRD %u ORD %u, RTR %d)", (void *)c, rr.crc, ird, ord, (int)rtr);
	struct sr_cm_event *e = post(c, c, RDMA_CM_EVENT_ESTABLISHED, 0);
	if (e)
		fill_conn(e, &rr, ird, ord);
	return;
fail:
	sr_cm_dbg("iWARP id %p: connect failed: %s %d", (void *)c, rdma_event_str(ev), status);
	close_fd(c);
	sr_cm_qp_to_err(c); /* rdma-core moves the QP of a failed connect to ERR */
	c->state = CM_DISCONNECTED;
	e = post(c, c, ev, status);
	if (e && n >= 0 && ev == RDMA_CM_EVENT_REJECTED)
		fill_conn(e, &rr, 0, 0);
}

/* ---- accept, reject, disconnect ---- */

int sr_iwcm_accept(struct sr_cm_id *c, const struct rdma_conn_param *p)
{
	struct sr_mpa_rr rr = { .reply = true };
	uint8_t buf[SR_MPA_RR_HDR_LEN + SR_MPA_MAX_PD];
	uint16_t ird = c->resp_res, ord = c->init_depth;
	int n, err;

	if (c->state != CM_REQ_RCVD || !take_qp(c, p))
		return -EINVAL;
	if (c->iw_fd < 0)
		return -ECONNRESET;
	if (p) {
		if (p->responder_resources != RDMA_MAX_RESP_RES)
			ird = cap16(p->responder_resources, c->dev->max_dest_rd_atomic);
		if (p->initiator_depth != RDMA_MAX_INIT_DEPTH)
			ord = cap16(p->initiator_depth, c->dev->max_rd_atomic);
	}
	if (c->iw_enhanced) {
		if (ord > c->iw_peer_ird)
			ord = c->iw_peer_ird;
		if (ird < c->iw_peer_ord)
			ird = cap16(c->iw_peer_ord, c->dev->max_dest_rd_atomic);
	}
	/* a Read RTR is answered from an IRQ slot of ours */
	if (c->iw_rtr == SR_MPA_RTR_READ && !ird)
		ird = 1;
	rr.rev = c->iw_rev;
	rr.crc = c->iw_crc;
	if (c->iw_enhanced)
		sr_mpa_rr_set_v2(&rr, ird, ord, c->iw_rtr != SR_MPA_RTR_NONE, c->iw_rtr ? 1u << c->iw_rtr : 0);
	rr.pd = p ? p->private_data : NULL;
	rr.pd_len = p && p->private_data ? p->private_data_len : 0;
	n = sr_mpa_rr_build(buf, sizeof(buf), &rr);
	if (n < 0)
		return n;
	/* the Reply goes out before the QP may send anything on the stream */
	err = send_all(c->iw_fd, buf, (size_t)n);
	if (!err)
		err = qp_go(c, false, rr.crc, ird, ord, (enum sr_mpa_rtr)c->iw_rtr);
	if (err) {
		sr_cm_dbg("iWARP id %p: accept failed: %s", (void *)c, strerror(-err));
		close_fd(c);
		c->state = CM_DISCONNECTED;
		return err;
	}
	c->state = CM_ESTABLISHED;
	sr_cm_dbg("iWARP id %p: accepted (CRC %d, IRD %u ORD %u, RTR %d)", (void *)c, rr.crc, ird, ord, c->iw_rtr);
	struct sr_cm_event *e = post(c, c, RDMA_CM_EVENT_ESTABLISHED, 0);
	if (e)
		fill_conn(e, NULL, ird, ord);
	return 0;
}

int sr_iwcm_reject(struct sr_cm_id *c, const void *pdata, uint8_t len)
{
	if (c->state != CM_REQ_RCVD)
		return -EINVAL;
	reject_request(c, c->iw_rev, pdata, len);
	c->state = CM_DISCONNECTED;
	return 0;
}

int sr_iwcm_disconnect(struct sr_cm_id *c)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_SQD };
	struct ibv_qp *qp = sr_iwcm_qp(c);

	switch (c->state) {
	case CM_ESTABLISHED:
		/* as rdma-core on iWARP: SQD, the QP drains and closes */
		if (qp && qp->state == IBV_QPS_RTS && !ibv_modify_qp(qp, &a, IBV_QP_STATE)) {
			c->state = CM_DREQ_SENT;
			return 0;
		}
		/* no stream to close: disconnected already */
		sr_cm_qp_to_err(c);
		c->state = CM_DISCONNECTED;
		post(c, c, RDMA_CM_EVENT_DISCONNECTED, 0);
		return 0;
	case CM_DREQ_SENT:
	case CM_DISCONNECTED:
		return 0;
	case CM_REQ_SENT:
		/* not connected yet: give up the attempt */
		c->iw_connecting = false;
		close_fd(c);
		sr_cm_arm(c, CM_T_NONE, 0);
		sr_cm_qp_to_err(c);
		c->state = CM_DISCONNECTED;
		return 0;
	default:
		return -EINVAL;
	}
}

/* What destroying the id does on the wire.  Returns whether the id must
 * linger (never, on iWARP: the QP owns the stream). */
bool sr_iwcm_destroy(struct sr_cm_id *c)
{
	switch (c->state) {
	case CM_LISTEN:
		sr_iwcm_unlisten(c);
		break;
	case CM_REQ_RCVD:
		reject_request(c, c->iw_rev, NULL, 0);
		break;
	case CM_ESTABLISHED:
	case CM_DREQ_SENT:
		/* the kernel's iw_cm aborts a connection whose id goes away */
		sr_cm_qp_to_err(c);
		break;
	default:
		break;
	}
	close_fd(c);
	return false;
}

void sr_iwcm_release(struct sr_cm_id *c)
{
	if (c->iw_lfd >= 0)
		sr_iwcm_unlisten(c);
	close_fd(c);
}

/* ---- the CM thread ---- */

/* Lock not held: an fd of ours in the CM thread's epoll is ready.  A
 * stale fd number (closed meanwhile, maybe reused) is harmless: every
 * socket here is non-blocking. */
bool sr_iwcm_on_fd(int fd)
{
	struct sr_cm_id *c;
	bool found = false;

	pthread_mutex_lock(&sr_cm.lock);
	for (c = sr_cm.ids; c; c = c->next) {
		if (c->iw_lfd == fd && c->state == CM_LISTEN && !c->destroyed) {
			found = true;
			listener_readable(c);
			break;
		}
		if (c->iw_fd == fd && c->iw_polled) {
			int r;

			found = true;
			if (c->state != CM_MPA_REQ_WAIT && c->state != CM_REQ_SENT) {
				unpoll(c);
				break;
			}
			if (c->iw_connecting) {
				connect_done(c);
				break;
			}
			r = frame_read(c);
			if (r > 0 && c->state == CM_MPA_REQ_WAIT) {
				request_done(c);
			} else if (r > 0) {
				reply_done(c);
			} else if (r < 0 && c->state == CM_MPA_REQ_WAIT) {
				sr_cm_dbg("iWARP id %p: no MPA Request (%s): closed", (void *)c, strerror(-r));
				close_fd(c);
				c->state = CM_DISCONNECTED;
				c->destroyed = true;
				sr_cm_arm(c, CM_T_MPA, 0); /* freed by the timer pass */
			} else if (r < 0) {
				/* as siw: a peer gone before replying resets the connect */
				sr_cm_dbg("iWARP id %p: no MPA Reply (%s)", (void *)c, strerror(-r));
				sr_cm_arm(c, CM_T_NONE, 0);
				close_fd(c);
				sr_cm_qp_to_err(c);
				c->state = CM_DISCONNECTED;
				post(c, c, r == -ECONNRESET ? RDMA_CM_EVENT_REJECTED : RDMA_CM_EVENT_CONNECT_ERROR,
				     r == -ECONNRESET ? -ECONNRESET : r);
			}
			break;
		}
	}
	pthread_mutex_unlock(&sr_cm.lock);
	return found;
}

/* The MPA timer fired (or an id marked for freeing came due). */
void sr_iwcm_timeout(struct sr_cm_id *c)
{
	switch (c->state) {
	case CM_MPA_REQ_WAIT:
		sr_cm_dbg("iWARP id %p: no MPA Request in time: closed", (void *)c);
		close_fd(c);
		c->state = CM_DISCONNECTED;
		c->destroyed = true;
		break;
	case CM_REQ_SENT:
		if (c->iw_connecting) {
			/* the pause after a refusal is over: try again */
			int err = c->iw_fd < 0 ? connect_start(c) : 0;
			if (err)
				connect_failed(c, err);
			break;
		}
		sr_cm_dbg("iWARP id %p: no MPA Reply in time", (void *)c);
		close_fd(c);
		sr_cm_qp_to_err(c);
		c->state = CM_DISCONNECTED;
		post(c, c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
		break;
	default:
		break;
	}
}

/* rdma_init_qp_attr on iWARP, as the kernel's iw_cm_init_qp_attr: INIT and
 * RTR set the access flags, RTS only the state. */
int sr_iwcm_qp_attr(struct sr_cm_id *c, struct ibv_qp_attr *a, int *mask)
{
	enum ibv_qp_state st = a->qp_state;

	memset(a, 0, sizeof(*a));
	a->qp_state = st;
	switch (st) {
	case IBV_QPS_INIT:
	case IBV_QPS_RTR:
		a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
		a->port_num = 1;
		*mask = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | (st == IBV_QPS_INIT ? IBV_QP_PORT : 0);
		return 0;
	case IBV_QPS_RTS:
		*mask = IBV_QP_STATE;
		return 0;
	default:
		return -EINVAL;
	}
}
