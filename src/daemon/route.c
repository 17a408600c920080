/* softrdmad: datagram routing by BTH destination QPN, for what arrives on
 * UDP 4791 and what clients hand back (ipc.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/softrdmad.h"
#include "common/cmsg.h"

/* ---- routing ---- */

void drop(const struct client *c, enum drop_reason r)
{
	TALLY(c ? c->user : NULL, drops[r]);
}

void deliver(struct client *c, const struct client *from, const uint8_t *msg, size_t len)
{
	/* from UDP: received for c's user (one a client hands over counts for
	 * the client's, client_pkt) */
	if (!from)
		c->user->t.rx_udp++;
	if (c->pending) {
		c->dropped_full++;
		drop(c, DROP_CLIENT_FULL);
		return;
	}
	if (send(c->fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
			c->dropped_full++;
			drop(c, DROP_CLIENT_FULL);
		} else {
			/* Its EPOLLHUP will reap it. */
			drop(c, DROP_CLIENT_ERR);
		}
		return;
	}
	c->delivered++;
	TALLY(c->user, forwarded);
}

/* from: the client that handed it over, NULL if it came from UDP. */
static struct route route(const uint8_t *dgram, uint32_t len, const struct sr_ipc_pkt *meta, const struct client *from)
{
	struct route r = { .why = DROP_UNKNOWN_QPN };
	uint32_t qpn;
	struct id_ent *e;

	if (len < SR_BTH_BYTES) {
		r.why = DROP_SHORT;
		return r;
	}
	qpn = sr_bth_dqpn(dgram);
	if (qpn == 1)
		return cm_route(dgram, len, meta, from);
	if (qpn == SR_MCAST_QPN) {
		r.mcast = true;
		r.why = DROP_MCAST_NO_MEMBER;
		return r;
	}
	e = it_find(&d.qpns, qpn);
	r.to = e ? e->owner : NULL;
	return r;
}

/* Apart from udp_read so that the fuzzer (tests/fuzz/fuzz_daemon.c) can
 * route datagrams without a socket. */
void udp_dgram(uint8_t *slot, const struct sr_ipc_pkt *meta, int ifindex)
{
	struct sr_ipc_hdr h = { .type = SR_IPC_PKT,
				.version = SR_IPC_VERSION,
				.len = (uint32_t)sizeof(*meta) + meta->len };
	struct route r = route(slot + PKT_HDRS, meta->len, meta, NULL);

	if (!r.mcast && !r.to) {
		if (!r.answered)
			drop(NULL, r.why);
		return;
	}
	memcpy(slot, &h, sizeof(h));
	memcpy(slot + sizeof(h), meta, sizeof(*meta));
	if (r.mcast) {
		if (!mc_fanout(&meta->dst.sin6_addr, ifindex, slot, PKT_HDRS + meta->len, NULL))
			drop(NULL, r.why);
		return;
	}
	deliver(r.to, NULL, slot, PKT_HDRS + meta->len);
}

void udp_read(int fd, bool v6)
{
	static struct mmsghdr mh[UDP_BATCH];
	static struct iovec iov[UDP_BATCH];
	static struct sockaddr_storage names[UDP_BATCH];
	static union {
		/* the pktinfo and the TOS / traffic class (what a UD receive's
		 * GRH reports, and the CM answers with) */
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl[UDP_BATCH];

	for (int round = 0; round < UDP_BATCHES_PER_WAKEUP; round++) {
		int got;

		for (int i = 0; i < UDP_BATCH; i++) {
			iov[i].iov_base = d.udp_slots + (size_t)i * SLOT_BYTES + PKT_HDRS;
			/* One byte more than forwardable so oversize shows as MSG_TRUNC. */
			iov[i].iov_len = SR_IPC_MAX_PKT + 1;
			memset(&mh[i].msg_hdr, 0, sizeof(mh[i].msg_hdr));
			mh[i].msg_hdr.msg_name = &names[i];
			mh[i].msg_hdr.msg_namelen = sizeof(names[i]);
			mh[i].msg_hdr.msg_iov = &iov[i];
			mh[i].msg_hdr.msg_iovlen = 1;
			mh[i].msg_hdr.msg_control = ctl[i].buf;
			mh[i].msg_hdr.msg_controllen = sizeof(ctl[i].buf);
		}
		got = recvmmsg(fd, mh, UDP_BATCH, MSG_DONTWAIT, NULL);
		if (got <= 0)
			return;
		for (int i = 0; i < got; i++) {
			uint8_t *slot = d.udp_slots + (size_t)i * SLOT_BYTES;
			struct sr_ipc_pkt meta;
			struct msghdr *m = &mh[i].msg_hdr;
			uint32_t len = mh[i].msg_len;
			int ifindex = 0;

			d.all.rx_udp++;
			if ((m->msg_flags & MSG_TRUNC) || len > SR_IPC_MAX_PKT) {
				drop(NULL, DROP_TOO_BIG);
				continue;
			}
			/* Before routing: QP1 routing and answers need the addresses. */
			memset(&meta, 0, sizeof(meta));
			if (!v6 && m->msg_namelen >= sizeof(struct sockaddr_in))
				to_mapped(&meta.src, (const struct sockaddr_in *)&names[i]);
			else if (v6 && m->msg_namelen >= sizeof(struct sockaddr_in6))
				memcpy(&meta.src, &names[i], sizeof(meta.src));
			meta.dst.sin6_family = AF_INET6;
			meta.dst.sin6_port = htons(SR_ROCE_UDP_PORT);
			for (struct cmsghdr *cm = CMSG_FIRSTHDR(m); cm; cm = CMSG_NXTHDR(m, cm)) {
				if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO &&
				    cm->cmsg_len >= CMSG_LEN(sizeof(struct in_pktinfo))) {
					struct in_pktinfo pi;
					struct sockaddr_in sin = { .sin_family = AF_INET };

					memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
					ifindex = pi.ipi_ifindex;
					sin.sin_addr = pi.ipi_addr;
					sin.sin_port = htons(SR_ROCE_UDP_PORT);
					to_mapped(&meta.dst, &sin);
				} else if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO &&
					   cm->cmsg_len >= CMSG_LEN(sizeof(struct in6_pktinfo))) {
					struct in6_pktinfo pi;

					memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
					ifindex = (int)pi.ipi6_ifindex;
					meta.dst.sin6_addr = pi.ipi6_addr;
					if (IN6_IS_ADDR_LINKLOCAL(&pi.ipi6_addr))
						meta.dst.sin6_scope_id = (uint32_t)pi.ipi6_ifindex;
				} else {
					sr_cmsg_tclass(cm, &meta.tclass);
				}
			}
			meta.len = len;
			udp_dgram(slot, &meta, ifindex);
		}
		if (got < UDP_BATCH)
			return;
	}
}

/* A datagram from client c dropped for reason r.  What becomes of a
 * datagram an untrusted client hands over to a QPN that is not its own
 * user's must not tell it whether that QPN is live: its user's count
 * calls both foreign_forward (the daemon's total keeps them apart). */
static void drop_forwarded(const struct client *c, enum drop_reason r)
{
	d.all.drops[r]++;
	if (r == DROP_UNKNOWN_QPN && !client_trusted(c))
		r = DROP_FOREIGN;
	c->user->t.drops[r]++;
}

/* A datagram a client received on one of its sockets but does not own
 * (two flows on one UDP 4-tuple).  Its addresses are the client's word:
 * it goes only where may_forward() allows. */
void client_pkt(struct client *from, uint8_t *msg, size_t len)
{
	struct sr_ipc_pkt meta;
	struct route r;

	TALLY(from->user, rx_client);
	if (len < PKT_HDRS) {
		drop(from, DROP_BAD_IPC);
		return;
	}
	memcpy(&meta, msg + sizeof(struct sr_ipc_hdr), sizeof(meta));
	if (meta.len != len - PKT_HDRS) {
		drop(from, DROP_BAD_IPC);
		return;
	}
	if (meta.len > SR_IPC_MAX_PKT) {
		drop(from, DROP_TOO_BIG);
		return;
	}
	r = route(msg + PKT_HDRS, meta.len, &meta, from);
	if (r.mcast) {
		/* not a path multicast takes (flow sockets are bound to a
		 * unicast address), but route it the same way, never back */
		if (!mc_fanout(&meta.dst.sin6_addr, 0, msg, len, from))
			drop_forwarded(from, r.why);
		return;
	}
	if (!r.to) {
		if (!r.answered)
			drop_forwarded(from, r.why);
		return;
	}
	if (r.to == from) {
		drop(from, DROP_LOOP);
		return;
	}
	if (!may_forward(from, r.to)) {
		drop(from, DROP_FOREIGN);
		return;
	}
	deliver(r.to, from, msg, len);
}
