/* Soft-RoCE transport state and the functions its roles share:
 * sockets.c, xmit.c, recv.c, ops.c (the network side, roce/net.h),
 * req.c (requester), comp.c (completer: ACKs, NAKs, read responses, timers),
 * resp.c (responder). */
#ifndef SR_ROCE_ROCE_H
#define SR_ROCE_ROCE_H

#include <sys/uio.h>
#include "core/sr.h"
#include "roce/wire/roce_hdr.h"
#include "roce/recovery.h"
#include "roce/cc.h"
#include "common/ipc.h"

/* Per-packet receive context: where it came from, for ICRC and replies. */
struct sr_rx_env {
	struct sockaddr_in6 src, dst;
	uint16_t ipv4_id_guess; /* segment index within a GRO batch: what a GSO sender used */
	uint8_t tclass;		/* IPv4 TOS / IPv6 traffic class it arrived with (UD: 0 unless reported) */
	bool batch_more;	/* more of the receive batch follows this packet (resp.c, resp_read) */
	bool via_daemon;	/* routed to us by softrdmad, not caught by a flow socket */
};

/* Packets to one destination, sent with one sendmmsg: the batch is cut
 * into runs ("groups"), each one message using UDP GSO (UDP_SEGMENT), in
 * which every datagram but the last has the same size.  A large WRITE is
 * two runs (FIRST carries a RETH), a read response burst three (FIRST and
 * LAST carry an AETH the MIDDLEs do not), or two when its LAST waits to
 * lead the next response's run (resp.c, resp_read).  The kernel gives GSO segment k IPv4 ID k (DF,
 * unconnected socket), so the ICRC of a run's packet k is computed with
 * ID k; a receiver solves for the ID anyway (sr_icrc_verify_ipv4_id). */
#define SR_TX_MAX_PKTS 64
#define SR_TX_MAX_BYTES 65000 /* one run: what one UDP GSO send may carry */
#define SR_TX_MAX_IOV 512
struct sr_tx_batch {
	struct sr_qp *qp;
	const struct sr_av *av;
	int npkts;
	int ngroups;
	bool closed;	   /* a short datagram ended the current run */
	uint32_t seg_size; /* the current run's datagram size */
	uint32_t total;	   /* the current run's bytes */
	int niov;
	struct iovec iov[SR_TX_MAX_IOV];
	int first_iov[SR_TX_MAX_PKTS + 1];
	int group_first[SR_TX_MAX_PKTS + 1]; /* run g is packets [group_first[g], group_first[g + 1]) */
	uint32_t group_seg[SR_TX_MAX_PKTS];
	uint8_t hdr[SR_TX_MAX_PKTS][SR_MAX_HDR_BYTES];
	uint8_t icrc[SR_TX_MAX_PKTS][4];
};

/* A READ or atomic the responder served, as rxe keeps its responder
 * resources: a duplicate READ is served again only if it starts within
 * one of them (with its rkey), a duplicate atomic gets the saved result. */
struct sr_resp_res {
	uint32_t psn;	/* first PSN */
	uint32_t npkts; /* PSNs it took: READ response packets, 1 for an atomic */
	uint32_t rkey;
	bool valid, atomic;
	uint64_t orig; /* atomic: the original value */
};

#define SR_RESP_RES 256 /* >= max_dest_rd_atomic: every unacknowledged READ and atomic can be served again */
#define SR_RX_BATCH 32
#define SR_RX_BUF 8192

/* A UD QP's flow socket to one peer QP (see sockets.c): fd -1 until a
 * datagram of that QP tells its source port. */
struct sr_ud_flow {
	struct sockaddr_in6 local, peer; /* our address:4791, the peer's address:sport */
	uint32_t dqpn;
	int fd;
};
#define SR_UD_FLOWS_MAX 64

struct sr_roce_qp {
	int tx4, tx6; /* unconnected send sockets bound to :sport[0], :sport[1] */
	/* ctx->txs list: QPs holding send sockets, oldest first; what gives
	 * up its sockets when the process runs out of descriptors */
	struct sr_qp *txs_next, *txs_prev;
	bool txs_listed;
	int rx_fd;			  /* RC/UC: connected per-flow socket on :4791, else -1 */
	bool rx_via_daemon;		  /* RC/UC from RTR on without one: counted in ctx->prog.n_ud_qps */
	bool rx_flow_refused;		  /* RC/UC: port 4791 is another user's: never a flow socket */
	uint16_t peer_sport;		  /* RC/UC: the port the peer sends from, learnt from its first
	                          * packet in sequence; 0 until then (sockets.c) */
	_Atomic uint16_t peer_sport_hint; /* RC/UC: the port a local peer sends from, as
	                          * softrdmad knows it (modify_prepare); 0 = none */
	struct sr_ud_flow *ud_flows;	  /* UD: flow sockets to the peers we sent to */
	int n_ud_flows;
	bool ud_flows_off; /* UD: port 4791 is another user's: all through the daemon */
	uint16_t sport[2]; /* our UDP source port for IPv4, IPv6: random (sockets.c) */
	uint32_t mtu;	   /* path MTU in bytes */

	/* requester / completer */
	uint32_t next_psn;	 /* next PSN to assign to a new WQE */
	uint32_t una_psn;	 /* oldest PSN not yet acknowledged */
	uint32_t window;	 /* max packets outstanding: what the receive buffer holds */
	uint32_t cwnd;		 /* packets we allow outstanding now (cc.h) */
	uint32_t noack_pkts;	 /* packets sent since the last AckReq */
	uint32_t rd_outstanding; /* read/atomic requests awaiting responses */
	uint32_t rd_resp_pkts;	 /* Read response packets those requests still await */
	int retry_left, rnr_retry_left;
	uint64_t retrans_deadline; /* 0 = no timer */
	uint64_t rnr_deadline;	   /* 0 = not waiting out an RNR NAK */
	uint64_t pace_deadline;	   /* 0 = not stopped by pacing (cc.h) */
	uint32_t rnr_psn;
	uint32_t gap_retx_una; /* una at which a gap-triggered go-back was done */
	bool gap_retx_valid;
	struct sr_roce_rec rec; /* RTT, retransmission timing (recovery.h) */
	struct sr_roce_cc cc;	/* how cwnd moves (cc.h) */

	/* responder */
	uint32_t epsn;	   /* expected PSN */
	uint32_t msn;	   /* message sequence number */
	bool nak_seq_sent; /* PSN sequence NAK sent, waiting for epsn */
	bool in_send;	   /* in the middle of a multi-packet SEND */
	bool in_write;	   /* in the middle of a multi-packet WRITE */
	bool rwqe_valid;
	uint64_t rwqe_off; /* bytes placed in the current receive WQE */
	uint64_t write_va; /* next address of the current WRITE */
	uint32_t write_rkey;
	uint64_t write_resid; /* bytes the RETH announced that are still due */
	uint32_t write_len;   /* RETH length, for WRITE_WITH_IMM byte_len */
	bool ack_pending;
	/* A delayed ACK, waiting to leave behind this QP's next request (see
	 * sr_resp_end_batch): when it must go at the latest, 0 = none */
	uint64_t ack_deadline;
	uint64_t last_post_ns;	 /* the application last posted a send WR */
	bool uc_drop;		 /* UC: dropping the rest of a damaged message */
	struct sr_resp_res *res; /* SR_RESP_RES entries, from the first READ or atomic on */
	uint32_t res_next;
	uint64_t dup_ack_ns;	  /* when a duplicate last had an ACK (resp.c, resp_duplicate) */
	uint32_t dup_ack_epsn;	  /* ... and epsn then */
	struct sr_recv_wqe *rwqe; /* current receive WQE (the RQ's or SRQ's max_sge entries) */
	uint64_t stat_drop;
	uint64_t stat_sport_fallback; /* tx sockets bound to a kernel-chosen port */
	uint64_t stat_wrong_port;     /* dropped: from the peer's address, not its port */
	bool no_gso;		      /* the kernel refused UDP_SEGMENT: one datagram per sendmsg */
	bool tx_defer_on; /* small requests may be deferred for a batch (req.c, tx_defer; SOFTRDMA_TX_HOLD=0: never) */
	bool delayed_ack_on; /* ACKs may be delayed for a request (resp.c; SOFTRDMA_ACK_HOLD=0: never) */
	int rcvbuf;	     /* granted SO_RCVBUF of rx_fd */
};

static inline struct sr_roce_qp *rqp(struct sr_qp *qp)
{
	return qp->tp;
}

static inline int32_t psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

static inline uint32_t psn_add(uint32_t a, uint32_t n)
{
	return (a + n) & SR_PSN_MASK;
}

/* ops.c */
uint32_t sr_roce_qpn(struct sr_qp *qp);

/* xmit.c */
/* Send a packet: headers from h (opcode and fields set), payload as an
 * iovec, to dst.  Adds pad and ICRC.  Returns 0 or -errno. */
int sr_roce_xmit(struct sr_qp *qp, struct sr_pkt *h, const struct iovec *pay, int npay, uint32_t paylen,
		 const struct sr_av *av);
void sr_tx_batch_init(struct sr_tx_batch *b, struct sr_qp *qp, const struct sr_av *av);
/* Add a packet (it starts a new run if it cannot join the current one);
 * false when the batch is full (flush, then add). */
bool sr_tx_batch_add(struct sr_tx_batch *b, struct sr_pkt *h, const struct iovec *pay, int npay, uint32_t paylen);
int sr_tx_batch_flush(struct sr_tx_batch *b);
/* Send packets [a, z) of a batch (one sendmmsg, a message per run, GSO
 * where the kernel has it), the batch left as it is.  Used by flush and by
 * tx_fault.c. */
int sr_tx_batch_send(struct sr_tx_batch *b, int a, int z);
/* Recompute packet i's ICRC for IPv4 ID id (a no-op with CRC off). */
void sr_tx_batch_icrc(struct sr_tx_batch *b, int i, uint16_t id);
/* One datagram, gathered from iov, to av->dst. */
int sr_roce_tx_one(struct sr_qp *qp, const struct sr_av *av, struct iovec *iov, int niov);
/* A run of datagrams laid out back to back in data, each with the ICRC
 * of its place k in the run (IPv4 ID k), as one GSO message of seg-byte
 * datagrams (0: data is one datagram).  Without GSO, a sendmsg each, the
 * ICRCs redone for ID 0 (data is changed). */
int sr_roce_tx_run(struct sr_qp *qp, const struct sr_av *av, uint8_t *data, uint32_t len, uint16_t seg);

/* tx_fault.c: fault injection on the send path (core/fault.h) */
/* Flush a batch applying the QP's faults. */
int sr_roce_fault_flush(struct sr_tx_batch *b);
/* The QP's fault timer is due: a held datagram goes out, and what the
 * delay fault holds that is due. */
void sr_roce_fault_timer(struct sr_qp *qp, uint64_t now);
/* The QP is going away: everything held goes now. */
void sr_roce_fault_drain(struct sr_qp *qp);

/* req.c */
void sr_req_progress(struct sr_qp *qp);
/* kick: the application posted (a held ACK goes now, with or without requests) */
bool sr_req_progress_kick(struct sr_qp *qp, bool kick); /* true: it sent */
void sr_req_go_back(struct sr_qp *qp, uint32_t psn);
/* The same; retry false: a probe before the QP's timeout (recovery.h), not
 * counted in the retransmits statistic, which counts retries */
void sr_req_resend(struct sr_qp *qp, uint32_t psn, bool retry);
/* Tail-loss probe: the last packet sent leaves again, asking for an ACK
 * (the answer is an ACK if only ACKs were lost, else a sequence NAK or
 * the ACK of what it completed); in a loss episode (a NAK answered), the
 * oldest unacknowledged one and all after it, as the resend of the head
 * may be what was lost.  False when that is a READ's or an atomic's, or
 * one of those awaits its response. */
bool sr_req_probe(struct sr_qp *qp);
struct sr_send_wqe *sr_req_wqe_for_psn(struct sr_qp *qp, uint32_t psn, uint32_t *idx);

/* comp.c */
void sr_comp_rx(struct sr_qp *qp, struct sr_pkt *pkt);
void sr_comp_timer(struct sr_qp *qp, uint64_t now);
uint64_t sr_comp_deadline(struct sr_qp *qp);
void sr_comp_arm_timer(struct sr_qp *qp);
/* the clock of the receive batch this thread is handling, 0 outside one */
extern __thread uint64_t sr_rx_batch_ns;
uint64_t sr_timeout_ns(uint8_t timeout);

/* resp.c */
void sr_resp_rx(struct sr_qp *qp, struct sr_pkt *pkt, const struct sr_rx_env *env);
void sr_resp_flush_ack(struct sr_qp *qp);
/* After a batch of received packets: send the ACK they asked for now, or
 * delay it for the QP's next request (a conversation: the peer's next
 * message then arrives before our ACK, and a peer polling for the ACK
 * receives it too, with no thread handoff). */
void sr_resp_end_batch(struct sr_qp *qp);
/* The held ACK's deadline (0: none, or the QP neither RTS nor SQD) ... */
uint64_t sr_resp_deadline(struct sr_qp *qp);
/* ... and the QP's timer pass at now: the ACK goes if that is due. */
void sr_resp_timer(struct sr_qp *qp, uint64_t now);
/* While qp (NULL: none) receives a batch on this thread, its responses to
 * small READs and its atomic ACKs wait to leave together at
 * sr_resp_end_batch, in one sendmmsg, instead of one each; NULL also
 * sends what waits. */
void sr_resp_defer_reads(struct sr_qp *qp);
/* The pending ACK as a packet header (and no longer pending); false if none. */
bool sr_resp_take_ack(struct sr_qp *qp, struct sr_pkt *h);
void sr_resp_reset(struct sr_qp *qp);
/* A request that takes the QP to the error state: NAKed (RC) with nak. */
void sr_resp_fatal(struct sr_qp *qp, uint32_t psn, uint8_t nak);

/* xrc.c */
/* The wire opcode of RC operation op for qp: its XRC value on an XRC QP. */
static inline uint8_t sr_roce_opcode(const struct sr_qp *qp, uint8_t op)
{
	return sr_qp_is_xrc(qp) ? (uint8_t)(SR_OPCODE_XRC | op) : op;
}
void sr_roce_xrc_resp_rx(struct sr_qp *qp, struct sr_pkt *pkt, const struct sr_rx_env *env);

/* sockets.c */
void sr_roce_ud_flow(struct sr_qp *qp, const struct sr_av *av, uint32_t dqpn);

#endif
