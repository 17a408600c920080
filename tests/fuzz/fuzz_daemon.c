/* libFuzzer harness for softrdmad's parsing of what reaches it: IPC
 * messages from local clients (client_msg: every request type and the
 * datagrams clients hand back) and datagrams from the network on UDP 4791
 * (udp_dgram: routing by QPN, CM MAD routing, the daemon's own answers),
 * interleaved as the input says, with clients of two trusted and two
 * untrusted users connecting and going away.
 *
 * The daemon's files are linked unchanged but for main.c; each client is
 * a SOCK_SEQPACKET socketpair whose far end the harness reads after every
 * step.  Datagrams the daemon sends itself (CM answers, wills) are caught
 * at sendmsg (-Wl,--wrap) and multicast joins at setsockopt: nothing
 * leaves the machine.
 *
 * Input: see fuzz_daemon.h.  Seeds: IPC sessions around the datagrams of
 * the kernel rxe captures (fuzz_seeds.c).
 *
 * Invariants (abort() on violation):
 *  - every request is answered with exactly one REPLY, unless it cost the
 *    client its connection; everything a client receives is a well-formed
 *    REPLY or PKT;
 *  - a datagram for a QPN goes to the client that allocated it, and one a
 *    client hands back never returns to it, nor reaches another user's
 *    client when the sender is not trusted;
 *  - every datagram the daemon sends is a 280-byte CM MAD to QP1 that the
 *    library's own codec decodes (REJ, SIDR_REP, DREP, or a will's DREQ),
 *    with a correct ICRC; none answers an untrusted client's datagram;
 *  - when every client is gone, nothing is left: no QPN, Communication
 *    ID, listen, REQ record, multicast group, queued will, user or quota. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "fuzz.h"
#include "fuzz_daemon.h"
#include "cm/cm_mad.h"
#include "daemon/softrdmad.h"

static struct client *cl[FZ_D_CLIENTS];
static int far_fd[FZ_D_CLIENTS];      /* the client's end of its socket */
static uint8_t *msgbuf;		      /* one client message, 8-aligned */
static const struct client *pkt_from; /* the client handing a datagram back */

/* QPNs each client was given (to check where datagrams go) */
#define MAX_QPN 1024
static uint32_t qpns[FZ_D_CLIENTS][MAX_QPN];
static int nqpn[FZ_D_CLIENTS];
static bool qpn_overflow[FZ_D_CLIENTS]; /* more than we remember: no check */

static uid_t uid_of(int k)
{
	/* clients 0 and 1 are the daemon's own user (trusted), 2 and 3 two
	 * other users (SO_PEERCRED cannot be faked on a socketpair) */
	return k < 2 ? geteuid() : (uid_t)(60000 + k);
}

/* ---- what the daemon sends itself ---- */

ssize_t __real_sendmsg(int fd, const struct msghdr *m, int flags);
ssize_t __wrap_sendmsg(int fd, const struct msghdr *m, int flags);
int __real_setsockopt(int fd, int level, int opt, const void *val, socklen_t len);
int __wrap_setsockopt(int fd, int level, int opt, const void *val, socklen_t len);

ssize_t __wrap_sendmsg(int fd, const struct msghdr *m, int flags)
{
	struct sr_icrc_env env = { .sport = SR_ROCE_UDP_PORT, .dport = SR_ROCE_UDP_PORT, .ipv4_df = true };
	struct sr_cm_msg msg;
	struct sr_pkt p;
	const uint8_t *dg;

	if (fd != d.udp4_fd && fd != d.udp6_fd)
		return __real_sendmsg(fd, m, flags);
	REQUIRE(m->msg_iovlen == 1 && m->msg_iov[0].iov_len == GSI_DGRAM_BYTES);
	/* answers are to datagrams from the network (or wills of clients
	 * that went away), never on an untrusted client's behalf */
	REQUIRE(!pkt_from || client_trusted(pkt_from));
	dg = m->msg_iov[0].iov_base;
	REQUIRE(!sr_pkt_parse(&p, dg, GSI_DGRAM_BYTES) && p.opcode == IBV_OPCODE_UD_SEND_ONLY && p.dqpn == 1 &&
		p.deth_sqpn == 1 && p.deth_qkey == SR_GSI_QKEY && p.paylen == SR_MAD_BYTES);
	REQUIRE(!sr_cm_msg_decode(&msg, p.payload, SR_MAD_BYTES) && msg.hdr.method == SR_MAD_METHOD_SEND);
	REQUIRE(msg.hdr.attr_id == SR_CM_ATTR_REJ || msg.hdr.attr_id == SR_CM_ATTR_SIDR_REP ||
		msg.hdr.attr_id == SR_CM_ATTR_DREP || msg.hdr.attr_id == SR_CM_ATTR_DREQ);
	/* the ICRC, for the addresses it goes from and to */
	for (struct cmsghdr *cm = CMSG_FIRSTHDR((struct msghdr *)m); cm; cm = CMSG_NXTHDR((struct msghdr *)m, cm)) {
		if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;
			const struct sockaddr_in *to = m->msg_name;

			memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
			REQUIRE(m->msg_namelen == sizeof(*to) && to->sin_family == AF_INET);
			env.saddr.s6_addr[10] = env.saddr.s6_addr[11] = 0xff;
			memcpy(&env.saddr.s6_addr[12], &pi.ipi_spec_dst, 4);
			env.daddr.s6_addr[10] = env.daddr.s6_addr[11] = 0xff;
			memcpy(&env.daddr.s6_addr[12], &to->sin_addr, 4);
		} else if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi;
			const struct sockaddr_in6 *to = m->msg_name;

			memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
			REQUIRE(m->msg_namelen == sizeof(*to) && to->sin6_family == AF_INET6);
			env.ipv6 = true;
			env.saddr = pi.ipi6_addr;
			env.daddr = to->sin6_addr;
		}
	}
	REQUIRE(sr_icrc_verify(&env, dg, GSI_DGRAM_BYTES));
	return GSI_DGRAM_BYTES;
}

/* Multicast joins: on "interface 1" they succeed, elsewhere ENODEV, and
 * the kernel never hears of them. */
int __wrap_setsockopt(int fd, int level, int opt, const void *val, socklen_t len)
{
	if (level == IPPROTO_IP && opt == IP_ADD_MEMBERSHIP) {
		const struct ip_mreqn *mr = val;

		REQUIRE(len == sizeof(*mr));
		if (mr->imr_ifindex != 1) {
			errno = ENODEV;
			return -1;
		}
		return 0;
	}
	if (level == IPPROTO_IPV6 && opt == IPV6_ADD_MEMBERSHIP) {
		const struct ipv6_mreq *mr = val;

		REQUIRE(len == sizeof(*mr));
		if (mr->ipv6mr_interface != 1) {
			errno = ENODEV;
			return -1;
		}
		return 0;
	}
	return __real_setsockopt(fd, level, opt, val, len);
}

/* ---- clients ---- */

static struct client *connect_client(int k)
{
	int sv[2];
	struct client *c;

	REQUIRE(!socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	c = client_new(sv[0]);
	if (!c) {
		close(sv[1]);
		return NULL;
	}
	if (uid_of(k) != c->uid) {
		/* as if SO_PEERCRED had said uid_of(k) */
		quota_give(c->user, Q_CLIENTS);
		c->uid = uid_of(k);
		c->user = user_get(c->uid);
		REQUIRE(c->user && !quota_take(c->user, Q_CLIENTS));
	}
	far_fd[k] = sv[1];
	nqpn[k] = 0;
	qpn_overflow[k] = false;
	return c;
}

static int index_of(const struct client *c)
{
	for (int k = 0; k < FZ_D_CLIENTS; k++)
		if (cl[k] == c)
			return k;
	return -1;
}

static bool owns_qpn(int k, uint32_t qpn)
{
	for (int i = 0; i < nqpn[k]; i++)
		if (qpns[k][i] == qpn)
			return true;
	return false;
}

/* Everything client k received since the last look; returns the number
 * of REPLY messages.  reply (if not NULL) gets the last reply's value. */
static int drain(int k, int64_t *reply)
{
	static uint8_t in[SR_IPC_MAX_MSG + 1];
	int replies = 0;

	for (;;) {
		ssize_t n = recv(far_fd[k], in, sizeof(in), MSG_DONTWAIT);
		struct sr_ipc_hdr h;

		if (n <= 0)
			break;
		REQUIRE((size_t)n >= sizeof(h) && (size_t)n <= SR_IPC_MAX_MSG);
		memcpy(&h, in, sizeof(h));
		REQUIRE(h.version == SR_IPC_VERSION && h.len == (size_t)n - sizeof(h));
		if (h.type == SR_IPC_REPLY) {
			struct sr_ipc_reply r;

			REQUIRE(h.len >= sizeof(r));
			memcpy(&r, in + sizeof(h), sizeof(r));
			if (reply)
				*reply = r.val;
			replies++;
			continue;
		}
		REQUIRE(h.type == SR_IPC_PKT);
		{
			struct sr_ipc_pkt meta;
			const uint8_t *dg = in + PKT_HDRS;
			int from = pkt_from ? index_of(pkt_from) : -1;

			REQUIRE(h.len >= sizeof(meta));
			memcpy(&meta, in + sizeof(h), sizeof(meta));
			REQUIRE(meta.len == h.len - sizeof(meta) && meta.len <= SR_IPC_MAX_PKT);
			REQUIRE(meta.len >= SR_BTH_BYTES);
			if (pkt_from) {
				REQUIRE(from != k); /* never back to the sender */
				REQUIRE(client_trusted(pkt_from) || uid_of(from) == uid_of(k));
			}
			uint32_t qpn = (uint32_t)dg[5] << 16 | (uint32_t)dg[6] << 8 | dg[7];
			if (qpn != 1 && qpn != SR_MCAST_QPN && !qpn_overflow[k])
				REQUIRE(owns_qpn(k, qpn));
		}
	}
	return replies;
}

/* One IPC message of client k. */
static void client_step(int k, const uint8_t *p, size_t n)
{
	struct sr_ipc_hdr h = { 0 };
	bool request, alive;
	int64_t val = 0;
	int replies;
	size_t take = n > SR_IPC_MAX_MSG ? SR_IPC_MAX_MSG : n;

	if (!cl[k] && !(cl[k] = connect_client(k)))
		return;
	memcpy(msgbuf, p, take);
	if (take >= sizeof(h))
		memcpy(&h, msgbuf, sizeof(h));
	request = take >= sizeof(h) && h.type != SR_IPC_PKT;
	pkt_from = cl[k];
	alive = client_msg(cl[k], msgbuf, take, n > SR_IPC_MAX_MSG ? MSG_TRUNC : 0);
	for (int j = 0; j < FZ_D_CLIENTS; j++)
		if (cl[j] && j != k)
			REQUIRE(drain(j, NULL) == 0);
	replies = drain(k, &val);
	pkt_from = NULL;
	if (!alive) {
		cl[k] = NULL;
		/* only a message shorter than a header costs the connection */
		REQUIRE(take < sizeof(h) && !replies);
		close(far_fd[k]);
		return;
	}
	REQUIRE(replies == (request ? 1 : 0));
	if (request && h.type == SR_IPC_ALLOC_QPN && val > 0) {
		if (nqpn[k] < MAX_QPN)
			qpns[k][nqpn[k]++] = (uint32_t)val;
		else
			qpn_overflow[k] = true;
	}
	if (request && h.type == SR_IPC_FREE_QPN && val == 0 && take >= sizeof(h) + sizeof(struct sr_ipc_qpn)) {
		struct sr_ipc_qpn q;

		memcpy(&q, msgbuf + sizeof(h), sizeof(q));
		for (int i = 0; i < nqpn[k]; i++)
			if (qpns[k][i] == q.qpn)
				qpns[k][i] = qpns[k][--nqpn[k]];
	}
}

static void drop_client(int k)
{
	if (!cl[k])
		return;
	client_drop(cl[k], "fuzz");
	cl[k] = NULL;
	close(far_fd[k]);
}

/* A datagram from the network. */
static void udp_step(const uint8_t *p, size_t n)
{
	static uint8_t *slot;
	struct fz_d_env env;
	struct sr_ipc_pkt meta;
	size_t len;

	if (n < FZ_D_ENV)
		return;
	if (!slot)
		REQUIRE((slot = aligned_alloc(8, SLOT_BYTES)));
	memcpy(&env, p, sizeof(env));
	len = n - FZ_D_ENV;
	if (len > SR_IPC_MAX_PKT) {
		drop(NULL, DROP_TOO_BIG); /* what udp_read does before routing */
		return;
	}
	memset(&meta, 0, sizeof(meta));
	meta.src.sin6_family = meta.dst.sin6_family = AF_INET6;
	memcpy(&meta.src.sin6_addr, env.src, 16);
	memcpy(&meta.dst.sin6_addr, env.dst, 16);
	if (!env.v6) {
		/* the IPv4 socket only sees IPv4 addresses */
		meta.src.sin6_addr.s6_addr32[0] = meta.src.sin6_addr.s6_addr32[1] = 0;
		meta.src.sin6_addr.s6_addr32[2] = htonl(0xffff);
		meta.dst.sin6_addr.s6_addr32[0] = meta.dst.sin6_addr.s6_addr32[1] = 0;
		meta.dst.sin6_addr.s6_addr32[2] = htonl(0xffff);
	}
	meta.src.sin6_port = htons(env.sport);
	meta.dst.sin6_port = htons(SR_ROCE_UDP_PORT);
	meta.len = (uint32_t)len;
	memcpy(slot + PKT_HDRS, p + FZ_D_ENV, len);
	udp_dgram(slot, &meta, 1);
	for (int k = 0; k < FZ_D_CLIENTS; k++)
		if (cl[k])
			REQUIRE(drain(k, NULL) == 0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	d.epfd = epoll_create1(EPOLL_CLOEXEC);
	d.udp4_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	d.udp6_fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	d.udp_slots = aligned_alloc(8, UDP_BATCH * SLOT_BYTES);
	d.cbuf = aligned_alloc(8, (SR_IPC_MAX_MSG + 7) & ~(size_t)7);
	msgbuf = aligned_alloc(8, (SR_IPC_MAX_MSG + 7) & ~(size_t)7);
	REQUIRE(d.epfd >= 0 && d.udp4_fd >= 0 && d.udp6_fd >= 0 && d.udp_slots && d.cbuf && msgbuf);
	d.euid = geteuid();
	d.idle_exit = 0;
	d.answer_all.t_ms = d.will_tb.t_ms = now_ms();
	clock_gettime(CLOCK_MONOTONIC, &d.start);
	d.idle_since_ms = now_ms();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = { data, size };

	if (d.epfd < 0)
		LLVMFuzzerInitialize(NULL, NULL);
	/* every input starts with full rate-limit buckets */
	d.answer_all.milli = (uint64_t)ANSWER_ALL_BURST * 1000;
	memset(d.answer_src, 0, sizeof(d.answer_src));
	while (fz_left(&f) >= 3) {
		uint8_t who = fz_u8(&f);
		uint16_t len = fz_u16(&f);
		uint8_t *body = malloc(len ? len : 1);
		size_t n = fz_bytes(&f, body, len);

		if (who & FZ_D_UDP)
			udp_step(body, n);
		else if (who & FZ_D_DROP)
			drop_client(who % FZ_D_CLIENTS);
		else
			client_step(who % FZ_D_CLIENTS, body, n);
		free(body);
		pkt_from = NULL;
		(void)wills_pump();
	}
	for (int k = 0; k < FZ_D_CLIENTS; k++)
		drop_client(k);
	/* the wills of the clients that went, without waiting for the pace */
	for (int i = 0; i < 100 && d.will_head; i++) {
		d.will_tb.milli = (uint64_t)WILL_BURST * 1000;
		d.will_tb.t_ms = now_ms();
		(void)wills_pump();
	}
	REQUIRE(!d.clients && !d.nclients && !d.qp1_owner);
	REQUIRE(!d.qpns.n && !d.comm_ids.n && !d.nlistens && !d.rs_n && !d.nmcast && !d.mcast);
	REQUIRE(!d.will_head && !d.nwills_queued);
	/* every quota given back (a user's entry stays, with its counters) */
	for (const struct user *u = d.users; u; u = u->next) {
		for (int q = 0; q < Q_NQUOTAS; q++)
			REQUIRE(!u->n[q]);
		REQUIRE(!u->wills_queued);
	}
	return 0;
}
