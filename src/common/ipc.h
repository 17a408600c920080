/* Protocol between a softrdma process and the per-host daemon (softrdmad).
 *
 * RoCEv2 peers always send to UDP port 4791, so one host-wide owner of that
 * port is needed, as the kernel's rxe is.  softrdmad:
 *   - binds UDP 4791 (0.0.0.0 and [::], SO_REUSEPORT) and receives every
 *     datagram that no per-flow connected socket of a process claims;
 *   - allocates QP numbers host-wide and knows which client owns each;
 *   - forwards a datagram to the client owning its BTH destination QP,
 *     drops the rest;
 *   - is the host's shared QP1 (GSI): it routes each CM MAD to the process
 *     it belongs to and answers, as the kernel's CM does, those that belong
 *     to nobody (see "CM routing" below).
 *
 * Transport: a SOCK_SEQPACKET Unix socket in the abstract namespace (so
 * there is one daemon per network namespace, which is what two "hosts" in
 * network namespaces need).  Each message is one packet: a struct
 * sr_ipc_hdr followed by a type-specific body.  Requests are answered in
 * order on the same socket; PKT messages from the daemon may be interleaved
 * with replies, so clients must be ready to receive PKT while waiting for a
 * reply. */
#ifndef SR_COMMON_IPC_H
#define SR_COMMON_IPC_H

#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>

#define SR_IPC_VERSION 1
/* Abstract socket name (leading NUL not included here). $SOFTRDMA_DAEMON_SOCK overrides. */
#define SR_IPC_SOCK_NAME "softrdmad-v1"
#define SR_ROCE_UDP_PORT 4791
#define SR_IPC_MAX_PKT 9216 /* largest datagram forwarded */
/* Largest IPC message either side sends (a PKT carrying SR_IPC_MAX_PKT
 * bytes); STATUS text is cut to fit.  Receivers size buffers by it. */
#define SR_IPC_MAX_MSG (sizeof(struct sr_ipc_hdr) + sizeof(struct sr_ipc_pkt) + SR_IPC_MAX_PKT)

enum sr_ipc_type {
	SR_IPC_HELLO = 1, /* c->d: body sr_ipc_hello; reply SR_IPC_REPLY (val = daemon pid) */
	SR_IPC_ALLOC_QPN, /* c->d: body sr_ipc_qpn (qpn ignored); reply val = qpn or -errno */
	SR_IPC_FREE_QPN,  /* c->d: body sr_ipc_qpn; reply val = 0 or -errno */
	SR_IPC_CLAIM_QP1, /* c->d: become the receiver of the QP1 (GSI) traffic that CM
	                       * routing does not take (below); reply 0 or -EBUSY */
	SR_IPC_PKT,	  /* both ways: body sr_ipc_pkt + datagram.  d->c: deliver;
	                       * c->d: a datagram the client received on a per-flow
	                       * socket but does not own: route it by QPN. No reply. */
	SR_IPC_REPLY,	  /* d->c: body sr_ipc_reply */
	SR_IPC_STATUS,	  /* c->d: reply is SR_IPC_REPLY with val = number of clients,
	                       * followed by text (status report) in the same message */
	/* Connection management (QP1 shared host-wide; see "CM routing" below). */
	SR_IPC_ALLOC_COMM_ID = 8, /* c->d: no body; reply val = a CM Communication ID
	                           * (1 .. 0xffffffff, host order) or -errno */
	SR_IPC_FREE_COMM_ID = 9,  /* c->d: body sr_ipc_comm_id; reply 0 or -errno */
	SR_IPC_LISTEN = 10,	  /* c->d: body sr_ipc_listen; reply 0 or -errno */
	SR_IPC_UNLISTEN = 11,	  /* c->d: body sr_ipc_listen; reply 0 or -errno */
	SR_IPC_CM_WILL = 12,	  /* c->d: body sr_ipc_cm_will; reply 0 or -errno (see "CM wills") */
	/* UD multicast (see "Multicast" below). */
	SR_IPC_MCAST_JOIN = 13,	 /* c->d: body sr_ipc_mcast; reply 0 or -errno */
	SR_IPC_MCAST_LEAVE = 14, /* c->d: body sr_ipc_mcast; reply 0 or -errno */
	/* UDP source ports of QPs (see "Ports" below). */
	SR_IPC_QP_PORT = 15,	 /* c->d: body sr_ipc_qp_port; reply 0 or -errno */
	SR_IPC_QP_PORT_GET = 16, /* c->d: body sr_ipc_qp_port (port 0); reply val = the port or -errno */
};

/* Rules softrdmad follows (and clients rely on):
 *  - Every message except SR_IPC_PKT gets exactly one SR_IPC_REPLY, in
 *    request order, and the daemon never drops a reply: when the client's
 *    socket is full it keeps the reply and stops reading that client's
 *    requests until it is sent.  PKT messages to a full client are dropped.
 *  - Reply values: wrong version -EPROTO; body shorter than its struct (the
 *    ALLOC_QPN, CLAIM_QP1 and ALLOC_COMM_ID bodies are optional) or
 *    hdr.len not matching the message -EINVAL; unknown type -EOPNOTSUPP;
 *    -EDQUOT beyond the client's user's quota (below, "Users").
 *    ALLOC_QPN: -ENOSPC when the QPN space (or the daemon's limit of 2^20
 *    live QPNs) is exhausted.  FREE_QPN: -ENOENT not allocated by this
 *    client (another client's QPN looks the same: no answer tells which
 *    QPNs are live); qpn 1 gives up the QP1 claim.  CLAIM_QP1:
 *    -EPERM for a client that is not trusted ("Users"); by the current
 *    owner again: 0.
 *  - QPNs are drawn at random from 0x11 .. 0xffffff (never 0 or 1; hard to
 *    guess, as an RNIC's).  A client's QPNs and QP1 claim are freed when its connection
 *    closes.
 *  - A message shorter than sr_ipc_hdr closes the connection.
 *  - STATUS text is "key value" lines (pid, uptime, socket, udp port,
 *    idle-exit, qpns, qp1 owner, comm ids, listens, cm peers, clients,
 *    received, forwarded, "dropped TOTAL reason=N ...", cm wills sent,
 *    cm wills queued, "cm name=N ...", mcast groups), then lists: one
 *    "user uid U connections N qpns N ..." line per user, the multicast
 *    groups, the listens and one line per client; for humans and test
 *    scripts.  A text longer than a message is cut at the end.  A client
 *    that is not trusted ("Users") gets its own user's view: a "view uid
 *    U" line, its user's counts and counters (datagrams to and from its
 *    clients; one it handed over for a QPN not its user's counts as
 *    foreign_forward whether that QPN is live or not), its own user,
 *    clients, listens and multicast memberships, and the count of its
 *    connections as the reply value (else all clients).
 *  - ALLOC_COMM_ID: drawn at random (hard to guess, and a restarted daemon
 *    does not hand out its predecessor's IDs again), never 0, never one in
 *    use; -ENOSPC beyond 2^20 live IDs.  FREE_COMM_ID: -ENOENT not
 *    allocated by this client.
 *  - LISTEN: -EADDRINUSE when another client listens on the same service
 *    ID at an address that overlaps (the same one, or either is a
 *    wildcard covering the other: :: covers everything, ::ffff:0.0.0.0
 *    every IPv4 address), as TCP ports do; one client may hold overlapping
 *    listens (the same one again: 0, still one registration), and a REQ
 *    then goes to it by the most specific.  -EINVAL for nonzero flags or an
 *    address family other than 0, AF_INET, AF_INET6; -ENOSPC beyond 65536
 *    listens.  UNLISTEN: -ENOENT no such listen, -EPERM another client's.
 *  - A client's Communication IDs and listens are freed when its
 *    connection closes. */

/* Users.  One daemon serves every Unix user of its network namespace (a
 * SO_REUSEPORT group on UDP 4791 takes the sockets of one uid only, and
 * QPNs are host-wide), and it trusts none of them:
 *  - A client is the uid SO_PEERCRED gives for its connection.  It acts
 *    only on what it allocated; a datagram it hands over (PKT c->d) reaches
 *    only QPs, listeners and multicast members of its own uid, and the
 *    daemon does not answer one for it (its addresses are the client's
 *    word): dropped as foreign_forward.  Root and the daemon's own uid are
 *    trusted: they may forward anywhere, claim QP1, and have no quotas.
 *  - Each other uid holds at most 1024 connections (more are closed at
 *    once), 2^17 QPNs, 2^16 Communication IDs, 4096 listens, 16384 CM
 *    wills and 256 multicast memberships, in all its connections; beyond,
 *    -EDQUOT (logged once per uid and kind).  Only its first 16
 *    connections get the daemon's 4 MiB send buffer (datagrams queued for
 *    a client that does not read are kernel memory), the rest the
 *    kernel's default.
 *  - Clients trust the daemon only if it runs as root or as their own
 *    euid (SO_PEERCRED of the daemon's socket): it sees the datagrams of
 *    their QPs and could forge them.  A daemon started by another user is
 *    refused with a message naming its uid. */

/* CM routing.  On RoCE the IB CM runs over QP1: a CM MAD is a UD SEND_ONLY
 * to BTH DestQP 1 (BTH + DETH with Q_Key 0x80010000 + 256-byte MAD + ICRC,
 * 280 bytes) and always goes to UDP port 4791, so every process's
 * connections share one endpoint per host.  softrdmad checks the envelope
 * (length, opcode, pad, P_Key 0xffff/0x7fff, Q_Key, MAD base version 1,
 * class 0x07, class version 2, method Send) and routes by IDs it hands out
 * host-wide:
 *  - REQ and SIDR_REQ: a REQ that repeats one already routed (same Local
 *    Communication ID and Local CA GUID, within 5 minutes) goes where the
 *    first went; otherwise both go to the LISTEN for their Service ID whose
 *    address matches the datagram's destination address: an exact address
 *    beats ::ffff:0.0.0.0, which beats ::.  No listener (and no CLAIM_QP1
 *    holder): the daemon answers REJ reason 8 (invalid service ID) to a REQ
 *    and SIDR_REP status 1 (service unsupported) to a SIDR_REQ.
 *  - REP, RTU, MRA, REJ, DREQ, DREP, LAP, APR: to the owner of the Remote
 *    Communication ID, which names the recipient in all of them.  A REJ
 *    with reason 1 (timeout) and Remote Communication ID 0 comes from an
 *    active side that never saw a REP: it goes where that side's REQ went,
 *    found by its Local Communication ID and the CA GUID in the first 8
 *    bytes of its ARI (so, as the kernel's CM does, put the node GUID both
 *    in a REQ's Local CA GUID and in such a REJ's ARI).  A DREQ for an ID
 *    nobody owns (and no CLAIM_QP1 holder) is answered with a DREP, as the
 *    kernel's CM does, so that the peer of a process that died disconnects
 *    at once.
 *  - SIDR_REP: to the owner of its Request ID (SIDR_REQ Request IDs come
 *    from ALLOC_COMM_ID too).
 *  - Anything else (other attributes, other management classes, malformed
 *    datagrams, unknown IDs) goes to the client holding CLAIM_QP1, if any,
 *    else it is dropped: counted as dropped no_qp1_owner, and by cause on
 *    the STATUS "cm" line.
 * Routed MADs reach the client unchanged as SR_IPC_PKT (meta src = the
 * sender, dst = the local address it was sent to): the client parses the
 * MAD and checks the ICRC itself.  The daemon's own answers leave from UDP
 * port 4791 of the local address the request was sent to, for the sender's
 * address, port 4791, with DETH SrcQP 1; they are rate-limited per source
 * address and in total.
 *
 * Sending CM MADs needs no daemon: a receiver of QP1 traffic ignores the
 * UDP source port, so a client sends from a socket of its own bound to any
 * port (an ephemeral one is fine), to the peer's port 4791, with BTH
 * DestQP 1, DETH SrcQP 1, Q_Key 0x80010000, and the ICRC computed for that
 * source port (for IPv4 with DF set, so that the IPv4 ID is 0). */

struct sr_ipc_hdr {
	uint16_t type;
	uint16_t version; /* SR_IPC_VERSION */
	uint32_t len;	  /* bytes of body following this header */
};

struct sr_ipc_hello {
	int32_t pid;
};

struct sr_ipc_qpn {
	uint32_t qpn;
	uint32_t qp_type; /* enum ibv_qp_type, informational */
};

struct sr_ipc_reply {
	int64_t val;
};

struct sr_ipc_comm_id {
	uint32_t comm_id; /* host order, as ALLOC_COMM_ID returned it */
	uint32_t pad;	  /* 0 */
};

struct sr_ipc_listen {
	uint64_t service_id; /* host order (the wire carries it big-endian) */
	/* Local address the listener is bound to.  sin6_family 0, or the
	 * address :: = every local address (IPv4 and IPv6); ::ffff:0.0.0.0 =
	 * every IPv4 address; anything else (IPv4 as IPv4-mapped) = that
	 * address only.  A struct sockaddr_in (AF_INET) stored here is
	 * accepted too.  Port and scope are ignored. */
	struct sockaddr_in6 local;
	uint32_t flags; /* 0; anything else -EINVAL */
	uint32_t pad;
};

/* CM wills: a MAD the daemon sends for a client that dies, so that the
 * peers of a killed process learn of it at once, as they do when the
 * kernel's CM destroys a dead process's ids (a DREQ for each established
 * connection).  Registered per Communication ID the client owns (-ENOENT
 * otherwise); a new will replaces the old; len 0 withdraws it; FREE_COMM_ID
 * withdraws it too.  The MAD must be a CM DREQ (MAD version 1, class 0x07
 * version 2, method Send) whose Local Communication ID is comm_id, else
 * -EINVAL; -EDQUOT beyond the user's quota.  When the client's connection
 * closes, each will is sent once from local:4791 to peer:4791 (BTH + DETH
 * from QP1 to QP1 + the MAD + ICRC), at most 1000 a second host-wide
 * (STATUS "cm wills queued" counts those waiting; the daemon does not
 * idle-exit before they are out). */
struct sr_ipc_cm_will {
	uint32_t comm_id;
	uint32_t len;		   /* 256, or 0 to withdraw */
	struct sockaddr_in6 local; /* IPv4 as IPv4-mapped */
	struct sockaddr_in6 peer;
	uint8_t mad[256];
};

/* Multicast.  A RoCEv2 multicast datagram is a UD packet with BTH DestQP
 * 0xFFFFFF sent to an IP multicast group (a multicast GID is the group's
 * address: ::ffff:224.0.0.0/100 for IPv4, ff00::/8 for IPv6) on UDP port
 * 4791, so it reaches the daemon's socket like any other datagram; the
 * kernel lets it in only for groups some socket joined on the interface it
 * arrives on.  A client that attaches QPs to a group asks the daemon to
 * join it on its device's interface (MCAST_JOIN); the daemon then hands
 * each datagram with DestQP 0xFFFFFF whose destination address (from
 * IP_PKTINFO) is that group, received on that interface, to every client
 * that joined it there: one SR_IPC_PKT per client, meta dst = the group.
 * The client passes it to each of its QPs attached to the group (which
 * checks the Q_Key, as rxe does).  Rules:
 *  - JOIN: -EINVAL for a group address that is not multicast, ifindex <= 0
 *    or nonzero flags; -EAFNOSUPPORT for an IPv6 group when the daemon has
 *    no IPv6 socket; -ENOSPC beyond 1024 (group, interface) pairs host-wide
 *    or 256 per client; else what the kernel's IP_ADD_MEMBERSHIP /
 *    IPV6_ADD_MEMBERSHIP answered (-ENODEV: no such interface).  The same
 *    client joining again counts one more reference (reply 0).
 *  - LEAVE: -ENOENT when the client holds no reference to that (group,
 *    interface); the last reference of the last client leaves the group.
 *  - A client's memberships are dropped when its connection closes.
 *  - Datagrams with DestQP 0xFFFFFF that match no membership are dropped
 *    (STATUS "dropped ... no_mcast_member=N"); STATUS lists "mcast groups N"
 *    and one "mcast group ADDR ifindex N clients N delivered N" line each.
 *  - The daemon joins on a socket of its own per (group, interface), so the
 *    kernel's per-socket limit (net.ipv4.igmp_max_memberships, 20) does not
 *    bound the host; its UDP 4791 sockets receive the groups because
 *    IP_MULTICAST_ALL / IPV6_MULTICAST_ALL are on (the Linux default). */
struct sr_ipc_mcast {
	struct in6_addr group; /* IPv4 as IPv4-mapped */
	int32_t ifindex;       /* interface to join on: the device's netdev */
	uint32_t flags;	       /* 0 */
};

#define SR_MCAST_QPN 0xffffffu /* BTH DestQP of every multicast datagram */

/* Ports.  A QP sends from a random UDP port (roce/sockets.c), and a peer's
 * flow socket is connected to that port once its first packet came.  For
 * a peer on this host a client may ask instead, at RTR, and skip the trip
 * of the first packets through the daemon:
 *  - QP_PORT: the port a QPN of this client sends from (0 forgets it).
 *    -ENOENT if the QPN is not the client's, -EINVAL for port 0 .. 1023.
 *  - QP_PORT_GET: the port a QPN sends from, if the QPN is a client's of
 *    the asker's user (any user's for a trusted asker); -ENOENT otherwise,
 *    and for a QPN nobody holds or whose port is not known: the answer
 *    tells no other user which QPNs are live, nor their ports. */
struct sr_ipc_qp_port {
	uint32_t qpn;
	uint16_t port;
	uint16_t pad;
};

/* A multicast GID: an IPv4-mapped 224.0.0.0/4 address or IPv6 ff00::/8
 * (what the kernel's rdma_is_multicast_addr() accepts). */
static inline bool sr_in6_is_mcast(const struct in6_addr *a)
{
	if (IN6_IS_ADDR_V4MAPPED(a))
		return (a->s6_addr[12] & 0xf0) == 0xe0;
	return a->s6_addr[0] == 0xff;
}

struct sr_ipc_pkt {
	struct sockaddr_in6 src; /* sender; IPv4 as IPv4-mapped IPv6 */
	struct sockaddr_in6 dst; /* local address the datagram was sent to (port 4791) */
	uint32_t len;		 /* datagram (UDP payload) length that follows */
	uint8_t tclass;		 /* the IPv4 TOS / IPv6 traffic class it arrived with */
	uint8_t pad[3];		 /* 0 */
};

#endif
