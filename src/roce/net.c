/* RoCEv2 over UDP: the QP's sockets, sending a packet (headers + gathered
 * payload + pad + ICRC in one sendmsg), receiving in batches, dispatch to
 * the requester/completer/responder, and the transport ops core/ calls.
 *
 * Sockets of a QP:
 *  - tx4/tx6: unconnected, bound to a random port of 0xC000..0xFFFF (the
 *    range rxe's source ports take) with DF set, so the kernel writes
 *    IPv4 ID 0 and the ICRC we compute matches; the source address is set
 *    per packet with IP_PKTINFO.  No SO_REUSEADDR: no socket of another
 *    user can share the port and pose as this QP to its peer's flow
 *    socket.  The port says nothing of the QPN: a receiver (rxe, a NIC,
 *    softrdma) needs only the destination port 4791.
 *  - rx_fd (RC/UC): bound to <our ip>:4791 with SO_REUSEPORT and
 *    connected to <peer ip>:<peer's source port>, opened once the peer's
 *    first packet in sequence (a request with the expected PSN, a
 *    response to what we sent) has told that port; until then the flow
 *    comes through the daemon.  The kernel gives an exact 4-tuple match
 *    precedence over the daemon's wildcard socket, so the flow bypasses
 *    the daemon.  From then on a packet from the peer's address but
 *    another port is dropped, unless it is in sequence: then the peer
 *    moved (its send socket was reopened on another port) and rx_fd
 *    follows it.
 *  - ud_flows (UD, from the first send to a peer QP on): the same kind of
 *    socket, connected to the peer QP's address and source port once a
 *    datagram of it came through the daemon, one per peer QP this QP has
 *    sent to (up to SR_UD_FLOWS_MAX): its answers come straight to us.
 *    A datagram of another QP that a flow socket catches (two local QPs
 *    talking to one peer QP share the 4-tuple) is handed on as for RC
 *    (sr_roce_rx_flush).
 * Anything else (QP1, multicast, UD peers we have not sent to) arrives
 * through the daemon. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "roce/roce.h"
#include "common/ipc_client.h"
#include "core/fault.h"
#include "common/sock.h"
#include "common/cmsg.h"

uint32_t sr_roce_qpn(struct sr_qp *qp) { return qp->ibqp.qp_base.qp_num; }

static bool is_v4(const struct sockaddr_in6 *a) { return IN6_IS_ADDR_V4MAPPED(&a->sin6_addr); }

static void to_sin(const struct sockaddr_in6 *a, struct sockaddr_in *s)
{
	memset(s, 0, sizeof(*s));
	s->sin_family = AF_INET;
	s->sin_port = a->sin6_port;
	memcpy(&s->sin_addr, &a->sin6_addr.s6_addr[12], 4);
}

static void from_sockaddr(const struct sockaddr_storage *ss, struct sockaddr_in6 *a)
{
	memset(a, 0, sizeof(*a));
	a->sin6_family = AF_INET6;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)ss;
		a->sin6_addr.s6_addr[10] = 0xff;
		a->sin6_addr.s6_addr[11] = 0xff;
		memcpy(&a->sin6_addr.s6_addr[12], &s->sin_addr, 4);
		a->sin6_port = s->sin_port;
	} else {
		*a = *(const struct sockaddr_in6 *)ss;
	}
}

/* Multicast sends (UD to a multicast GID) leave from the device's
 * interface, and loop back to this host so that QPs attached here get
 * them too, as rxe's do.  Unicast sends ignore these options. */
static void tx_mcast_opts(int fd, bool v4, int ifindex)
{
	int one = 1;

	if (v4) {
		struct ip_mreqn mr;

		memset(&mr, 0, sizeof(mr));
		mr.imr_ifindex = ifindex;
		if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &mr, sizeof(mr)))
			SR_DBG("IP_MULTICAST_IF ifindex %d: %s", ifindex, strerror(errno));
		setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &one, sizeof(one));
	} else {
		if (setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &ifindex, sizeof(ifindex)))
			SR_DBG("IPV6_MULTICAST_IF ifindex %d: %s", ifindex, strerror(errno));
		setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &one, sizeof(one));
	}
}

/* A random source port for a QP: 0xC000 + 14 random bits, as rxe's and
 * RNICs' ports range, but unrelated to the QPN. */
static uint16_t random_src_port(void)
{
	uint16_t r;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (uint16_t)(sr_now_ns() * 0x9E3779B1u >> 16);
	return (uint16_t)(0xC000u | (r & 0x3fffu));
}

static void set_sa_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

/* Binds a send socket to the QP's source port of its family.  A port
 * some other socket holds (an ephemeral port of some program, another
 * QP's) is drawn again; should 16 draws fail, the kernel picks one.  A
 * socket reopened after eviction (tx_evict) asks for the port it had: if
 * that is gone too, the peer learns the new one from our next packet in
 * sequence.  The ICRC covers the UDP source port, so r->sport follows the
 * socket. */
static int tx_bind(struct sr_qp *qp, int fd, struct sockaddr *sa, socklen_t len, bool v4)
{
	struct sr_roce_qp *r = rqp(qp);
	uint16_t *port = &r->sport[!v4];
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);

	for (int i = 0; i < 16; i++) {
		set_sa_port(sa, *port);
		if (!bind(fd, sa, len))
			return 0;
		if (errno != EADDRINUSE)
			return -1;
		*port = random_src_port();
	}
	set_sa_port(sa, 0);
	if (bind(fd, sa, len) || getsockname(fd, (struct sockaddr *)&ss, &l))
		return -1;
	*port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					      : ((struct sockaddr_in6 *)&ss)->sin6_port);
	SR_DBG("QP %u: 16 random UDP source ports were taken; sending from %u", sr_roce_qpn(qp), *port);
	r->stat_sport_fallback++;
	return 0;
}

/* ---- send sockets and the descriptor budget ----
 * A connected RC QP holds two sockets: its flow socket on :4791 and its
 * send socket on :sport (the peer's flow socket is connected to that
 * port, so it cannot be shared).  10,000 QPs in a process that may open
 * 20,000 files would run out: when a socket cannot be had for want of
 * descriptors, the QP that opened its send sockets longest ago gives
 * them up (it opens them again when it next sends). */

static void txs_unlink(struct sr_context *ctx, struct sr_qp *qp) /* txs_lock held */
{
	struct sr_roce_qp *r = rqp(qp);

	if (!r->txs_listed)
		return;
	if (r->txs_prev)
		rqp(r->txs_prev)->txs_next = r->txs_next;
	else
		ctx->txs_head = r->txs_next;
	if (r->txs_next)
		rqp(r->txs_next)->txs_prev = r->txs_prev;
	else
		ctx->txs_tail = r->txs_prev;
	r->txs_next = r->txs_prev = NULL;
	r->txs_listed = false;
}

static void txs_append(struct sr_qp *qp) /* qp->lock held */
{
	struct sr_context *ctx = qp->ctx;
	struct sr_roce_qp *r = rqp(qp);

	pthread_mutex_lock(&ctx->txs_lock);
	if (!r->txs_listed) {
		r->txs_prev = ctx->txs_tail;
		r->txs_next = NULL;
		if (ctx->txs_tail)
			rqp(ctx->txs_tail)->txs_next = qp;
		else
			ctx->txs_head = qp;
		ctx->txs_tail = qp;
		r->txs_listed = true;
	}
	pthread_mutex_unlock(&ctx->txs_lock);
}

/* Out of descriptors: close another QP's send sockets (self's lock held;
 * the victim's is only tried, so two QPs evicting each other cannot
 * deadlock).  True if descriptors were freed. */
static bool tx_evict(struct sr_qp *self)
{
	struct sr_context *ctx = self->ctx;
	bool freed = false;

	pthread_mutex_lock(&ctx->txs_lock);
	for (struct sr_qp *q = ctx->txs_head; q && !freed; q = rqp(q)->txs_next) {
		if (q == self || pthread_mutex_trylock(&q->lock))
			continue;
		struct sr_roce_qp *v = rqp(q);
		if (v->tx4 >= 0)
			close(v->tx4);
		if (v->tx6 >= 0)
			close(v->tx6);
		v->tx4 = v->tx6 = -1;
		txs_unlink(ctx, q);
		pthread_mutex_unlock(&q->lock);
		freed = true;
	}
	pthread_mutex_unlock(&ctx->txs_lock);
	SR_DBG("QP %u: out of file descriptors; %s", sr_roce_qpn(self),
	       freed ? "closed the send sockets of the QP that opened them longest ago" : "no QP's send socket to close");
	return freed;
}

/* socket(), giving up another QP's send sockets if the process is out of
 * descriptors. */
static int qp_socket(struct sr_qp *qp, int family, int type)
{
	int fd = sr_socket(family, type, 0);
	while (fd < 0 && (errno == EMFILE || errno == ENFILE) && tx_evict(qp))
		fd = sr_socket(family, type, 0);
	return fd;
}

static int tx_socket(struct sr_qp *qp, bool v4)
{
	struct sr_roce_qp *r = rqp(qp);
	int *fdp = v4 ? &r->tx4 : &r->tx6;
	int one = 1, fd;

	if (*fdp >= 0)
		return *fdp;
	fd = qp_socket(qp, v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (v4) {
		int pmtu = IP_PMTUDISC_DO;
		setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
		struct sockaddr_in s = { .sin_family = AF_INET };
		if (tx_bind(qp, fd, (struct sockaddr *)&s, sizeof(s), true))
			goto err;
	} else {
		int pmtu = IPV6_PMTUDISC_DO;
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof(pmtu));
		struct sockaddr_in6 s = { .sin6_family = AF_INET6 };
		if (tx_bind(qp, fd, (struct sockaddr *)&s, sizeof(s), false))
			goto err;
	}
	tx_mcast_opts(fd, v4, qp->ctx->nd.ifindex);
	int sz = 4 << 20;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	*fdp = fd;
	txs_append(qp);
	return fd;
err:
	{
		int e = errno;
		close(fd);
		return -e;
	}
}

/* Returns the receive buffer the kernel granted (bytes of skb truesize). */
static int set_rcvbuf(int fd)
{
	int sz = 8 << 20;
	socklen_t l = sizeof(sz);
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, &l))
		sz = 212992;
	return sz;
}

/* A socket bound to local:4791 and connected to peer (whose port is set):
 * returns the descriptor, -EADDRINUSE if port 4791 is another user's (a
 * SO_REUSEPORT group takes sockets of one uid only), or -errno. */
static int flow_socket_open(struct sr_qp *qp, const struct sockaddr_in6 *local, const struct sockaddr_in6 *peer)
{
	bool v4 = is_v4(peer);
	int one = 1, fd;

	fd = qp_socket(qp, v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	/* a GSO burst from the peer arrives as one buffer: one copy, one syscall */
	setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one));
	int rcvbuf = set_rcvbuf(fd);
	if (sr_qp_transport(qp) != IBV_QPT_UD)
		rqp(qp)->rcvbuf = rcvbuf;
	else if (setsockopt(fd, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_RECVTOS : IPV6_RECVTCLASS, &one, sizeof(one)))
		SR_DBG("UD QP %u: no IP_RECVTOS/IPV6_RECVTCLASS: %s", sr_roce_qpn(qp), strerror(errno));
	int rc;
	if (v4) {
		struct sockaddr_in l, p;
		to_sin(local, &l);
		l.sin_port = htons(SR_ROCE_UDP_PORT);
		to_sin(peer, &p);
		rc = bind(fd, (struct sockaddr *)&l, sizeof(l));
		if (!rc)
			rc = connect(fd, (struct sockaddr *)&p, sizeof(p)) ? -2 : 0;
	} else {
		struct sockaddr_in6 l = *local;
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		l.sin6_port = htons(SR_ROCE_UDP_PORT);
		rc = bind(fd, (struct sockaddr *)&l, sizeof(l));
		if (!rc)
			rc = connect(fd, (const struct sockaddr *)peer, sizeof(*peer)) ? -2 : 0;
	}
	if (rc) {
		int e = errno;
		close(fd);
		return rc == -1 && e == EADDRINUSE ? -EADDRINUSE : -e;
	}
	int err = sr_progress_add_fd(qp->ctx, fd, qp);
	if (err) {
		close(fd);
		return err > 0 ? -err : err;
	}
	return fd;
}

/* The receive buffer a flow socket will be granted, before there is one
 * (the window is sized by it at RTR): asked of a throwaway socket once. */
static int rcvbuf_grant(void)
{
	static atomic_int granted;
	int g = atomic_load_explicit(&granted, memory_order_relaxed);

	if (!g) {
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		g = fd >= 0 ? set_rcvbuf(fd) : 212992;
		if (fd >= 0)
			close(fd);
		atomic_store_explicit(&granted, g, memory_order_relaxed);
	}
	return g;
}

static void via_daemon(struct sr_qp *qp, bool on)
{
	struct sr_roce_qp *r = rqp(qp);

	if (r->rx_via_daemon == on)
		return;
	r->rx_via_daemon = on;
	if (on)
		atomic_fetch_add(&qp->ctx->prog.n_ud_qps, 1);
	else
		atomic_fetch_sub(&qp->ctx->prog.n_ud_qps, 1);
}

static void peer_port_learn(struct sr_qp *qp, uint16_t port);

/* RTR: the peer's packets come through the daemon until the first one in
 * sequence tells its source port (peer_port_learn); for a peer on this
 * host the daemon may have told it already (roce_modify_prepare). */
static void rx_socket_open(struct sr_qp *qp)
{
	struct sr_roce_qp *r = rqp(qp);
	uint16_t hint = atomic_exchange(&r->peer_sport_hint, 0);

	r->peer_sport = 0;
	r->rcvbuf = rcvbuf_grant();
	via_daemon(qp, true);
	if (hint)
		peer_port_learn(qp, hint);
}

/* The peer sends from port (qp->lock held): the flow socket is connected
 * to it from now on (again, if the peer moved). */
static void peer_port_learn(struct sr_qp *qp, uint16_t port)
{
	struct sr_roce_qp *r = rqp(qp);
	struct sockaddr_in6 peer = qp->av.dst;

	SR_DBG("QP %u: the peer sends from UDP port %u%s", sr_roce_qpn(qp), port, r->peer_sport ? " now" : "");
	r->peer_sport = port;
	if (r->rx_flow_refused)
		return;
	if (r->rx_fd >= 0) {
		sr_progress_del_fd(qp->ctx, r->rx_fd);
		close(r->rx_fd);
		r->rx_fd = -1;
	}
	peer.sin6_port = htons(port);
	int fd = flow_socket_open(qp, &qp->av.src, &peer);
	if (fd >= 0) {
		r->rx_fd = fd;
		via_daemon(qp, false);
		return;
	}
	via_daemon(qp, true);
	if (fd == -EADDRINUSE) {
		/* Port 4791 belongs to a daemon of another user (root's).  The
		 * flow then reaches us through that daemon, which routes it by
		 * QPN: slower, still correct. */
		SR_DBG("QP %u: no flow socket (UDP 4791 is another user's): receiving through softrdmad",
		       sr_roce_qpn(qp));
		r->rx_flow_refused = true;
		return;
	}
	sr_log("QP %u: cannot open flow socket to peer: %s (receiving through softrdmad)", sr_roce_qpn(qp),
	       strerror(-fd));
}

/* UD: before sending to peer QP dqpn at av->dst, ask for its answers to
 * reach this QP directly: a flow socket, opened when a datagram of that
 * QP comes through the daemon (ud_flow_learn) and tells its source port.
 * Not for QP1 (the CM's, routed by the daemon), multicast, or beyond
 * SR_UD_FLOWS_MAX peers: those keep going through the daemon. */
void sr_roce_ud_flow(struct sr_qp *qp, const struct sr_av *av, uint32_t dqpn)
{
	struct sr_roce_qp *r = rqp(qp);
	if (r->ud_flows_off || dqpn == SR_MCAST_QPN || dqpn <= 1 || sr_roce_qpn(qp) <= 1)
		return;
	for (int i = 0; i < r->n_ud_flows; i++)
		if (r->ud_flows[i].dqpn == dqpn && IN6_ARE_ADDR_EQUAL(&r->ud_flows[i].peer.sin6_addr, &av->dst.sin6_addr) &&
		    IN6_ARE_ADDR_EQUAL(&r->ud_flows[i].local.sin6_addr, &av->src.sin6_addr))
			return;
	if (r->n_ud_flows >= SR_UD_FLOWS_MAX || sr_in6_is_mcast(&av->dst.sin6_addr))
		return;
	if (!r->ud_flows && !(r->ud_flows = calloc(SR_UD_FLOWS_MAX, sizeof(*r->ud_flows))))
		return;
	struct sr_ud_flow *f = &r->ud_flows[r->n_ud_flows++];
	f->fd = -1;
	f->dqpn = dqpn;
	f->peer = av->dst;
	f->local = av->src;
}

/* UD: a datagram from QP sqpn came through the daemon: if this QP has
 * sent to that QP there, its flow socket is opened now. */
static void ud_flow_learn(struct sr_qp *qp, uint32_t sqpn, const struct sr_rx_env *env)
{
	struct sr_roce_qp *r = rqp(qp);

	for (int i = 0; i < r->n_ud_flows && !r->ud_flows_off; i++) {
		struct sr_ud_flow *f = &r->ud_flows[i];

		if (f->fd >= 0 || f->dqpn != sqpn || !IN6_ARE_ADDR_EQUAL(&f->peer.sin6_addr, &env->src.sin6_addr) ||
		    !IN6_ARE_ADDR_EQUAL(&f->local.sin6_addr, &env->dst.sin6_addr))
			continue;
		f->peer.sin6_port = env->src.sin6_port;
		int fd = flow_socket_open(qp, &f->local, &f->peer);
		if (fd >= 0) {
			f->fd = fd;
		} else {
			if (fd == -EADDRINUSE)
				r->ud_flows_off = true;
			SR_DBG("UD QP %u: no flow socket to QP %u: %s", sr_roce_qpn(qp), sqpn, strerror(-fd));
		}
		return;
	}
}

static void rx_socket_close(struct sr_qp *qp)
{
	struct sr_roce_qp *r = rqp(qp);
	for (int i = 0; i < r->n_ud_flows; i++) {
		if (r->ud_flows[i].fd < 0)
			continue;
		sr_progress_del_fd(qp->ctx, r->ud_flows[i].fd);
		close(r->ud_flows[i].fd);
	}
	r->n_ud_flows = 0;
	free(r->ud_flows);
	r->ud_flows = NULL;
	via_daemon(qp, false);
	r->rx_flow_refused = false;
	r->peer_sport = 0;
	if (r->rx_fd >= 0) {
		sr_progress_del_fd(qp->ctx, r->rx_fd);
		close(r->rx_fd);
		r->rx_fd = -1;
	}
}

/* ---- send ---- */

static struct sr_icrc_env tx_env(struct sr_qp *qp, const struct sr_av *av, uint16_t id)
{
	struct sr_icrc_env env = {
		.ipv6 = !is_v4(&av->dst),
		.saddr = av->src.sin6_addr,
		.daddr = av->dst.sin6_addr,
		.sport = rqp(qp)->sport[!is_v4(&av->dst)],
		.dport = SR_ROCE_UDP_PORT,
		.ipv4_id = id,
		.ipv4_df = true,
	};
	return env;
}

/* One message to av->dst:4791 from av->src (IP_PKTINFO), optionally as
 * GSO segments of seg_size bytes: the msghdr and what it points to. */
struct tx_msg {
	union {
		struct sockaddr_in sin;
		struct sockaddr_in6 sin6;
	} to;
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(uint16_t)) +
			 2 * CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
};

/* Fills msg (pointing into m) for iov; returns the socket to send it on,
 * or a negative errno. */
static int tx_msg_build(struct sr_qp *qp, const struct sr_av *av, struct iovec *iov, int niov, uint16_t seg_size,
			struct tx_msg *m, struct msghdr *msg)
{
	bool v4 = is_v4(&av->dst);
	int fd = tx_socket(qp, v4);
	bool mcast = sr_in6_is_mcast(&av->dst.sin6_addr);

	if (fd < 0)
		return fd;
	memset(msg, 0, sizeof(*msg));
	memset(&m->cbuf, 0, sizeof(m->cbuf));
	msg->msg_iov = iov;
	msg->msg_iovlen = (size_t)niov;
	msg->msg_control = m->cbuf.buf;
	struct cmsghdr *cm = (struct cmsghdr *)m->cbuf.buf;
	if (v4) {
		to_sin(&av->dst, &m->to.sin);
		m->to.sin.sin_port = htons(SR_ROCE_UDP_PORT);
		msg->msg_name = &m->to.sin;
		msg->msg_namelen = sizeof(m->to.sin);
		struct in_pktinfo pi = { 0 };
		memcpy(&pi.ipi_spec_dst, &av->src.sin6_addr.s6_addr[12], 4);
		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
		msg->msg_controllen = CMSG_SPACE(sizeof(pi));
	} else {
		m->to.sin6 = av->dst;
		m->to.sin6.sin6_port = htons(SR_ROCE_UDP_PORT);
		msg->msg_name = &m->to.sin6;
		msg->msg_namelen = sizeof(m->to.sin6);
		struct in6_pktinfo pi = { 0 };
		pi.ipi6_addr = av->src.sin6_addr;
		cm->cmsg_level = IPPROTO_IPV6;
		cm->cmsg_type = IPV6_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
		msg->msg_controllen = CMSG_SPACE(sizeof(pi));
	}
	if (seg_size) {
		cm = (struct cmsghdr *)(m->cbuf.buf + msg->msg_controllen);
		cm->cmsg_level = SOL_UDP;
		cm->cmsg_type = UDP_SEGMENT;
		cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
		memcpy(CMSG_DATA(cm), &seg_size, sizeof(seg_size));
		msg->msg_controllen += CMSG_SPACE(sizeof(uint16_t));
	}
	/* the path's (AH's) traffic class: outside the ICRC (masked) */
	sr_cmsg_put_tclass(msg, v4, av->traffic_class);
	/* The AH's hop limit bounds how far the group's datagrams go (rdma_cm
	 * gives 1); 0 leaves the socket's default of 1.  TTL and hop limit
	 * are outside the ICRC. */
	if (mcast && av->hop_limit)
		sr_cmsg_put_int(msg, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_TTL : IPV6_HOPLIMIT, av->hop_limit);
	return fd;
}

static void tx_count(struct sr_qp *qp, size_t bytes, uint16_t seg_size)
{
	sr_stat_add(qp->stats, SR_STAT_SENT_PKTS, seg_size ? (bytes + seg_size - 1) / seg_size : 1);
	sr_stat_add(qp->stats, SR_STAT_SENT_BYTES, (uint64_t)bytes);
}

/* One sendmsg of iov, as GSO segments of seg_size bytes if not 0. */
static int tx_sendmsg(struct sr_qp *qp, const struct sr_av *av, struct iovec *iov, int niov, uint16_t seg_size)
{
	struct tx_msg m;
	struct msghdr msg;
	int fd = tx_msg_build(qp, av, iov, niov, seg_size, &m, &msg);
	ssize_t s;

	if (fd < 0)
		return fd;
	sr_dma_begin(); /* gathers straight from registered memory */
	do {
		s = sendmsg(fd, &msg, 0);
	} while (s < 0 && errno == EINTR);
	sr_dma_end();
	if (s < 0) {
		/* datagram semantics: a lost send is recovered by retransmission */
		SR_DBG("QP %u: sendmsg: %s", sr_roce_qpn(qp), strerror(errno));
		return -errno;
	}
	tx_count(qp, (size_t)s, seg_size);
	return 0;
}

static const uint8_t zero_pad[4];

void sr_tx_batch_init(struct sr_tx_batch *b, struct sr_qp *qp, const struct sr_av *av)
{
	b->qp = qp;
	b->av = av;
	b->npkts = 0;
	b->ngroups = 0;
	b->closed = false;
	b->seg_size = 0;
	b->total = 0;
	b->niov = 0;
}

bool sr_tx_batch_add(struct sr_tx_batch *b, struct sr_pkt *h, const struct iovec *pay, int npay, uint32_t paylen)
{
	int i = b->npkts;
	h->pad = (uint8_t)((4 - (paylen & 3)) & 3);
	uint32_t hlen = sr_opcode[h->opcode].hdr_len;
	uint32_t dlen = hlen + paylen + h->pad + SR_ICRC_BYTES;

	if (i >= SR_TX_MAX_PKTS || b->niov + npay + 3 > SR_TX_MAX_IOV)
		return false;
	/* a new run: the first packet, or one that cannot be a GSO segment
	 * of the current run (larger, after a short one, past 64 KiB) */
	bool new_run = !i || b->closed || dlen > b->seg_size || b->total + dlen > SR_TX_MAX_BYTES ||
		       rqp(b->qp)->no_gso;
	if (new_run) {
		b->group_first[b->ngroups] = i;
		b->group_seg[b->ngroups++] = dlen;
		b->seg_size = dlen;
		b->total = 0;
		b->closed = false;
	} else if (dlen < b->seg_size) {
		b->closed = true;
	}
	sr_pkt_build_hdr(b->hdr[i], h);
	int first = b->niov;
	b->first_iov[i] = first;
	b->iov[b->niov].iov_base = b->hdr[i];
	b->iov[b->niov++].iov_len = hlen;
	for (int k = 0; k < npay; k++)
		b->iov[b->niov++] = pay[k];
	if (h->pad) {
		b->iov[b->niov].iov_base = (void *)zero_pad;
		b->iov[b->niov++].iov_len = h->pad;
	}
	uint32_t icrc = 0;
	if (b->qp->ctx->dev->crc) {
		/* GSO segment k of its run gets IPv4 ID k */
		struct sr_icrc_env env = tx_env(b->qp, b->av, (uint16_t)(i - b->group_first[b->ngroups - 1]));
		sr_dma_begin(); /* the payload is read from registered memory */
		icrc = sr_icrc_compute_iov(&env, &b->iov[first], b->niov - first);
		sr_dma_end();
	}
	sr_icrc_store(b->icrc[i], icrc);
	b->iov[b->niov].iov_base = b->icrc[i];
	b->iov[b->niov++].iov_len = SR_ICRC_BYTES;
	b->first_iov[i + 1] = b->niov;
	b->group_first[b->ngroups] = i + 1;
	b->total += dlen;
	b->npkts++;
	return true;
}

/* The ICRC of packet i for the IPv4 ID it will be sent with. */
void sr_tx_batch_icrc(struct sr_tx_batch *b, int i, uint16_t id)
{
	int f = b->first_iov[i], l = b->first_iov[i + 1];

	if (b->qp->ctx->dev->crc) {
		struct sr_icrc_env env = tx_env(b->qp, b->av, id);
		sr_dma_begin(); /* the payload is read from registered memory */
		sr_icrc_store(b->icrc[i], sr_icrc_compute_iov(&env, &b->iov[f], l - f - 1));
		sr_dma_end();
	}
}

/* Packets [a, z) one datagram per sendmsg, each ICRC recomputed for the
 * ID 0 a plain send gets: where the kernel has no GSO. */
static int tx_one_by_one(struct sr_tx_batch *b, int a, int z)
{
	int err = 0;

	for (int i = a; i < z; i++) {
		int f = b->first_iov[i], l = b->first_iov[i + 1];

		sr_tx_batch_icrc(b, i, 0);
		int e = tx_sendmsg(b->qp, b->av, &b->iov[f], l - f, 0);
		if (e)
			err = e;
	}
	return err;
}

int sr_tx_batch_send(struct sr_tx_batch *b, int a, int z)
{
	struct tx_msg m[SR_TX_MAX_PKTS];
	struct mmsghdr mm[SR_TX_MAX_PKTS];
	int run_a[SR_TX_MAX_PKTS], run_z[SR_TX_MAX_PKTS];
	uint16_t seg[SR_TX_MAX_PKTS];
	int n = 0, fd = -1, err = 0;

	if (z <= a)
		return 0;
	/* a message per run, or per part of a run that [a, z) cuts */
	for (int g = 0; g < b->ngroups; g++) {
		int x = b->group_first[g] > a ? b->group_first[g] : a;
		int y = b->group_first[g + 1] < z ? b->group_first[g + 1] : z;
		if (x >= y)
			continue;
		if (x != b->group_first[g]) {
			/* the part's segment k is packet x + k: IPv4 ID k */
			for (int i = x; i < y; i++)
				sr_tx_batch_icrc(b, i, (uint16_t)(i - x));
		}
		run_a[n] = x;
		run_z[n] = y;
		seg[n] = y - x > 1 ? (uint16_t)b->group_seg[g] : 0;
		fd = tx_msg_build(b->qp, b->av, &b->iov[b->first_iov[x]], b->first_iov[y] - b->first_iov[x], seg[n], &m[n],
				  &mm[n].msg_hdr);
		if (fd < 0)
			return fd;
		n++;
	}
	for (int k = 0; k < n;) {
		sr_dma_begin(); /* gathers straight from registered memory */
		int s = sendmmsg(fd, &mm[k], (unsigned)(n - k), 0);
		int e = errno;
		sr_dma_end();
		if (s > 0) {
			for (int j = k; j < k + s; j++)
				tx_count(b->qp, mm[j].msg_len, seg[j]);
			k += s;
			continue;
		}
		if (s < 0 && e == EINTR)
			continue;
		/* message k failed: the others go on */
		if (seg[k] && (e == EINVAL || e == EOPNOTSUPP || e == EIO)) {
			/* no GSO here: from now on a datagram per send */
			rqp(b->qp)->no_gso = true;
			int e2 = tx_one_by_one(b, run_a[k], run_z[k]);
			if (e2)
				err = e2;
		} else {
			/* datagram semantics: a lost send is recovered by retransmission */
			SR_DBG("QP %u: sendmmsg: %s", sr_roce_qpn(b->qp), strerror(e));
			err = s < 0 ? -e : -EIO;
		}
		k++;
	}
	return err;
}

int sr_roce_tx_one(struct sr_qp *qp, const struct sr_av *av, struct iovec *iov, int niov)
{
	return tx_sendmsg(qp, av, iov, niov, 0);
}

int sr_roce_tx_run(struct sr_qp *qp, const struct sr_av *av, uint8_t *data, uint32_t len, uint16_t seg)
{
	struct iovec iov = { .iov_base = data, .iov_len = len };
	int err = tx_sendmsg(qp, av, &iov, 1, seg);

	if (!seg || (err != -EINVAL && err != -EOPNOTSUPP && err != -EIO))
		return err;
	/* no GSO here: a datagram per send, each ICRC that of IPv4 ID 0 */
	rqp(qp)->no_gso = true;
	err = 0;
	for (uint32_t off = 0; off < len; off += seg) {
		uint32_t n = len - off < seg ? len - off : seg;
		struct iovec one = { .iov_base = data + off, .iov_len = n - SR_ICRC_BYTES };

		if (n <= SR_ICRC_BYTES)
			break;
		if (qp->ctx->dev->crc) {
			struct sr_icrc_env env = tx_env(qp, av, 0);
			sr_icrc_store(data + off + n - SR_ICRC_BYTES, sr_icrc_compute_iov(&env, &one, 1));
		}
		one.iov_len = n;
		int e = tx_sendmsg(qp, av, &one, 1, 0);
		if (e)
			err = e;
	}
	return err;
}

int sr_tx_batch_flush(struct sr_tx_batch *b)
{
	int err;

	if (!b->npkts)
		return 0;
	if (sr_faults_on(b->qp))
		return sr_roce_fault_flush(b);
	err = sr_tx_batch_send(b, 0, b->npkts);
	sr_tx_batch_init(b, b->qp, b->av);
	return err;
}

int sr_roce_xmit(struct sr_qp *qp, struct sr_pkt *h, const struct iovec *pay, int npay, uint32_t paylen,
		 const struct sr_av *av)
{
	struct sr_tx_batch b;
	sr_tx_batch_init(&b, qp, av);
	sr_tx_batch_add(&b, h, pay, npay, paylen);
	return sr_tx_batch_flush(&b);
}

/* ---- receive ---- */

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

static bool pkey_ok(uint16_t pkey) { return (pkey & 0x7fff) == 0x7fff; }

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
	uint32_t need = sr_qp_is_xrc(qp) ? SR_OP_XRC : t == IBV_QPT_RC ? SR_OP_RC : t == IBV_QPT_UC ? SR_OP_UC : SR_OP_UD;
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
			ud_flow_learn(qp, pkt.deth_sqpn, env);
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
	 * (its send socket was reopened on another port). */
	uint16_t port = ntohs(env->src.sin6_port);
	bool learn = false;
	if (port != r->peer_sport) {
		bool in_seq = in_sequence(qp, &pkt);
		if (r->peer_sport && !in_seq) {
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
		peer_port_learn(qp, port);
}

/* The QP a datagram through the daemon is for (core/ routes it). */
static bool roce_dgram_qpn(const uint8_t *data, uint32_t len, uint32_t *qpn)
{
	if (len < SR_BTH_BYTES)
		return false;
	*qpn = sr_bth_dqpn(data);
	return true;
}

/* Datagram routed to us by the daemon (qp->lock held). */
static void roce_deliver(struct sr_qp *qp, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len)
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

static void roce_rx_flush(struct sr_context *ctx)
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

static void roce_on_readable(struct sr_qp *qp, int fd_unused)
{
	struct sr_roce_qp *r = rqp(qp);

	(void)fd_unused;
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

/* ---- transport ops ---- */

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
	uint32_t rsge = qp->ibqp.qp_base.qp_type == IBV_QPT_XRC_RECV ? SR_MAX_SGE
			: qp->srq				   ? qp->srq->rq.max_sge
								   : qp->rq.max_sge;
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
	r->sport[0] = r->sport[1] = random_src_port();
	/* for local peers' flow sockets (ipc.h, "Ports"); a daemon without
	 * it answers -EOPNOTSUPP, and peers learn the port from our packets */
	struct sr_ipc_qp_port port = { .qpn = (uint32_t)qpn, .port = r->sport[0] };
	if (sr_qp_transport(qp) != IBV_QPT_UD)
		sr_daemon_call(d, SR_IPC_QP_PORT, &port, sizeof(port));
	/* SOFTRDMA_GSO=0: one datagram per sendmsg (packet captures then show
	 * each RoCE packet as the wire carries it) */
	const char *gso = getenv("SOFTRDMA_GSO");
	r->no_gso = gso && !strcmp(gso, "0");
	/* the batching of small requests and the holding of ACKs can be
	 * turned off, to compare (bench/run.sh) */
	const char *th = getenv("SOFTRDMA_TX_HOLD"), *ah = getenv("SOFTRDMA_ACK_HOLD");
	r->tx_hold = !th || strcmp(th, "0");
	r->ack_hold = !ah || strcmp(ah, "0");
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
	rx_socket_close(qp);
	/* off the list first: an eviction in progress finishes before */
	pthread_mutex_lock(&qp->ctx->txs_lock);
	txs_unlink(qp->ctx, qp);
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
		rx_socket_open(qp);
	if (next == IBV_QPS_RESET) {
		if (sr_faults_on(qp))
			sr_delay_clear(&qp->faults->delay);
		rx_socket_close(qp);
		sr_resp_reset(qp);
		r->retrans_deadline = r->rnr_deadline = 0;
		r->rd_outstanding = 0;
		r->rd_resp_pkts = 0;
		r->noack_pkts = 0;
	}
	if (next == IBV_QPS_ERR) {
		r->retrans_deadline = r->rnr_deadline = 0;
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

	if (!r || !d || sr_qp_transport(qp) == IBV_QPT_UD || !(mask & IBV_QP_STATE) ||
	    attr->qp_state != IBV_QPS_RTR || !(mask & IBV_QP_DEST_QPN) || !(mask & IBV_QP_AV))
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
static void roce_rq_kick(struct sr_qp *qp) { (void)qp; }

static void roce_on_timer(struct sr_qp *qp, uint64_t now)
{
	sr_comp_timer(qp, now);
	if (sr_faults_on(qp))
		sr_roce_fault_timer(qp, now);
}

static uint64_t roce_next_deadline(struct sr_qp *qp)
{
	if (!qp->tp)
		return 0;
	if (sr_faults_on(qp))
		return sr_fault_earlier(sr_comp_deadline(qp), sr_fault_deadline(qp));
	return sr_comp_deadline(qp);
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
	.on_readable = roce_on_readable,
	.dgram_qpn = roce_dgram_qpn,
	.deliver = roce_deliver,
	.rx_flush = roce_rx_flush,
	.sq_release = sr_req_progress,
};
