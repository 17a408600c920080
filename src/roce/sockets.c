/* RoCEv2 over UDP: a QP's sockets -- opening and binding them, learning
 * the peer's source port, closing them, and giving up send sockets when
 * the process runs out of descriptors.
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

#include "common/sock.h"
#include "roce/net.h"

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
uint16_t sr_roce_random_sport(void)
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
		*port = sr_roce_random_sport();
	}
	set_sa_port(sa, 0);
	if (bind(fd, sa, len) || getsockname(fd, (struct sockaddr *)&ss, &l))
		return -1;
	*port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port :
						((struct sockaddr_in6 *)&ss)->sin6_port);
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

void sr_roce_txs_unlink(struct sr_context *ctx, struct sr_qp *qp) /* txs_lock held */
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
		sr_roce_txs_unlink(ctx, q);
		pthread_mutex_unlock(&q->lock);
		freed = true;
	}
	pthread_mutex_unlock(&ctx->txs_lock);
	SR_DBG("QP %u: out of file descriptors; %s", sr_roce_qpn(self),
	       freed ? "closed the send sockets of the QP that opened them longest ago" :
		       "no QP's send socket to close");
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

int sr_roce_tx_socket(struct sr_qp *qp, bool v4)
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
err : {
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

void sr_roce_via_daemon(struct sr_qp *qp, bool on)
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

/* RTR: the peer's packets come through the daemon until the first one in
 * sequence tells its source port (sr_roce_peer_port_learn); for a peer on this
 * host the daemon may have told it already (roce_modify_prepare). */
void sr_roce_rx_socket_open(struct sr_qp *qp)
{
	struct sr_roce_qp *r = rqp(qp);
	uint16_t hint = atomic_exchange(&r->peer_sport_hint, 0);

	r->peer_sport = 0;
	r->rcvbuf = rcvbuf_grant();
	sr_roce_via_daemon(qp, true);
	if (hint)
		sr_roce_peer_port_learn(qp, hint);
}

/* The peer sends from port (qp->lock held): the flow socket is connected
 * to it from now on (again, if the peer moved). */
void sr_roce_peer_port_learn(struct sr_qp *qp, uint16_t port)
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
		sr_roce_via_daemon(qp, false);
		return;
	}
	sr_roce_via_daemon(qp, true);
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
 * QP comes through the daemon (sr_roce_ud_flow_learn) and tells its source port.
 * Not for QP1 (the CM's, routed by the daemon), multicast, or beyond
 * SR_UD_FLOWS_MAX peers: those keep going through the daemon. */
void sr_roce_ud_flow(struct sr_qp *qp, const struct sr_av *av, uint32_t dqpn)
{
	struct sr_roce_qp *r = rqp(qp);
	if (r->ud_flows_off || dqpn == SR_MCAST_QPN || dqpn <= 1 || sr_roce_qpn(qp) <= 1)
		return;
	for (int i = 0; i < r->n_ud_flows; i++)
		if (r->ud_flows[i].dqpn == dqpn &&
		    IN6_ARE_ADDR_EQUAL(&r->ud_flows[i].peer.sin6_addr, &av->dst.sin6_addr) &&
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
void sr_roce_ud_flow_learn(struct sr_qp *qp, uint32_t sqpn, const struct sr_rx_env *env)
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

void sr_roce_rx_socket_close(struct sr_qp *qp)
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
	sr_roce_via_daemon(qp, false);
	r->rx_flow_refused = false;
	r->peer_sport = 0;
	if (r->rx_fd >= 0) {
		sr_progress_del_fd(qp->ctx, r->rx_fd);
		close(r->rx_fd);
		r->rx_fd = -1;
	}
}
