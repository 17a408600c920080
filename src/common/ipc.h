/* Protocol between a softrdma process and the per-host daemon (softrdmad).
 *
 * RoCEv2 peers always send to UDP port 4791, so one host-wide owner of that
 * port is needed, as the kernel's rxe is.  softrdmad:
 *   - binds UDP 4791 (0.0.0.0 and [::], SO_REUSEPORT) and receives every
 *     datagram that no per-flow connected socket of a process claims;
 *   - allocates QP numbers host-wide and knows which client owns each;
 *   - forwards a datagram to the client owning its BTH destination QP
 *     (QP1 to the client that registered as the CM owner), drops the rest.
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

#include <stdint.h>
#include <netinet/in.h>

#define SR_IPC_VERSION 1
/* Abstract socket name (leading NUL not included here). $SOFTRDMA_DAEMON_SOCK overrides. */
#define SR_IPC_SOCK_NAME "softrdmad-v1"
#define SR_ROCE_UDP_PORT 4791
#define SR_IPC_MAX_PKT 9216  /* largest datagram forwarded */
/* Largest IPC message either side sends (a PKT carrying SR_IPC_MAX_PKT
 * bytes); STATUS text is cut to fit.  Receivers size buffers by it. */
#define SR_IPC_MAX_MSG (sizeof(struct sr_ipc_hdr) + sizeof(struct sr_ipc_pkt) + SR_IPC_MAX_PKT)

enum sr_ipc_type {
	SR_IPC_HELLO = 1,     /* c->d: body sr_ipc_hello; reply SR_IPC_REPLY (val = daemon pid) */
	SR_IPC_ALLOC_QPN,     /* c->d: body sr_ipc_qpn (qpn ignored); reply val = qpn or -errno */
	SR_IPC_FREE_QPN,      /* c->d: body sr_ipc_qpn; reply val = 0 or -errno */
	SR_IPC_CLAIM_QP1,     /* c->d: become the receiver of QP1 (GSI) traffic; reply 0 or -EBUSY */
	SR_IPC_PKT,           /* both ways: body sr_ipc_pkt + datagram.  d->c: deliver;
	                       * c->d: a datagram the client received on a per-flow
	                       * socket but does not own: route it by QPN. No reply. */
	SR_IPC_REPLY,         /* d->c: body sr_ipc_reply */
	SR_IPC_STATUS,        /* c->d: reply is SR_IPC_REPLY with val = number of clients,
	                       * followed by text (status report) in the same message */
};

/* Rules softrdmad follows (and clients rely on):
 *  - Every message except SR_IPC_PKT gets exactly one SR_IPC_REPLY, in
 *    request order, and the daemon never drops a reply: when the client's
 *    socket is full it keeps the reply and stops reading that client's
 *    requests until it is sent.  PKT messages to a full client are dropped.
 *  - Reply values: wrong version -EPROTO; body shorter than its struct (the
 *    ALLOC_QPN and CLAIM_QP1 bodies are optional) or
 *    hdr.len not matching the message -EINVAL; unknown type -EOPNOTSUPP.
 *    ALLOC_QPN: -ENOSPC when the QPN space (or the daemon's limit of 2^20
 *    live QPNs) is exhausted.  FREE_QPN: -ENOENT not allocated, -EPERM
 *    owned by another client; qpn 1 gives up the QP1 claim.  CLAIM_QP1 by
 *    the current owner again: 0.
 *  - QPNs are allocated round-robin from 0x11 (never 0 or 1), preferring
 *    one whose sr_qpn_src_port() no live QPN uses.  A client's QPNs and QP1
 *    claim are freed when its connection closes.
 *  - A message shorter than sr_ipc_hdr closes the connection.
 *  - STATUS text is "key value" lines (pid, uptime, socket, udp port,
 *    idle-exit, qpns, qp1 owner, clients + one line per client, received,
 *    forwarded, "dropped TOTAL reason=N ..."), for humans and test scripts. */

struct sr_ipc_hdr {
	uint16_t type;
	uint16_t version;     /* SR_IPC_VERSION */
	uint32_t len;         /* bytes of body following this header */
};

struct sr_ipc_hello {
	int32_t pid;
};

struct sr_ipc_qpn {
	uint32_t qpn;
	uint32_t qp_type;     /* enum ibv_qp_type, informational */
};

struct sr_ipc_reply {
	int64_t val;
};

struct sr_ipc_pkt {
	struct sockaddr_in6 src;   /* sender; IPv4 as IPv4-mapped IPv6 */
	struct sockaddr_in6 dst;   /* local address the datagram was sent to (port 4791) */
	uint32_t len;              /* datagram (UDP payload) length that follows */
	uint32_t pad;
};

/* Source UDP port a QP sends from, as the kernel's rxe chooses it:
 * 0xC000 + hash_32(qpn, 14) with the golden-ratio multiplicative hash.
 * Peers predict it to connect their per-flow receive socket. */
static inline uint16_t sr_qpn_src_port(uint32_t qpn)
{
	return (uint16_t)(0xC000u + (((uint32_t)(qpn * 0x61C88647u)) >> (32 - 14)));
}

#endif
