/* Soft-iWARP transport state and the functions its roles share:
 * iwarp.c (transport ops, connect, close, memory lookups), qp_tx.c (send
 * path: SQ work requests, Read Responses, segmentation into FPDUs,
 * non-blocking sendmsg), qp_rx.c (receive path: FPDUs parsed from the
 * stream, payload read straight into registered memory), term.c
 * (Terminate: sending one on an error, reacting to one received).
 *
 * A QP owns one connected, non-blocking TCP socket from sr_iw_qp_connect
 * on.  Everything here runs with qp->lock held. */
#ifndef SR_IWARP_IWARP_H
#define SR_IWARP_IWARP_H

#include <sys/uio.h>
#include "core/sr.h"
#include "iwarp/iwarp_cm.h"
#include "iwarp/wire/iwarp_wire.h"

/* Payload bytes per FPDU.  siw cuts FPDUs to the TCP MSS (RFC 5044's
 * alignment); we make them as large as a ULPDU allows (rounded to 4 KiB):
 * the receiver then needs one readv per 60 KiB, not per 1448 bytes, and
 * TCP segments the stream as it likes (siw, like any MPA receiver,
 * reassembles FPDUs that span segments). */
#define SR_IW_SEG_PAYLOAD 61440u

/* One sendmsg carries up to this much. */
#define SR_IW_TXB_FPDUS 32
#define SR_IW_TXB_IOV 320
#define SR_IW_TXB_BYTES (1u << 20)

/* Bytes of the next FPDU read together with the current one's trailer:
 * the length field plus the smallest DDP header, so that this look-ahead
 * never holds payload (which goes straight to its memory). */
#define SR_IW_LA (SR_MPA_LEN_BYTES + SR_DDP_TAGGED_HDR)

/* Where FPDUs are small, a system call each costs more than the copy it
 * saves (a null system call costs several 4 KiB copies): after two
 * FPDUs in a row whose ULPDUs are at most SR_IW_LA_BIG_MAX_PAY bytes, the look-ahead takes up to SR_IW_LA_BIG
 * bytes of the stream instead (struct sr_iw_qp.rx_big, allocated on first
 * use), and the FPDUs in it are checked and copied out of it, each byte
 * still placed only after its segment's header was checked.  Larger FPDUs
 * keep the direct readv into their memory. */
#define SR_IW_LA_BIG 65536u
#define SR_IW_LA_BIG_MAX_PAY 8192u

/* Bytes at the end of a tagged segment staged until its CRC is checked
 * (struct sr_iw_rx.tail): a cache line covers a polled byte or word. */
#define SR_IW_TAIL 64u

/* FPDUs parsed per on_readable call before other QPs get their turn. */
#define SR_IW_RX_BUDGET 64

/* A Send that finds no receive posted.  iWARP has no RNR NAK (siw ends
 * the connection at once), but nothing says when a receiver must read
 * the stream: we leave the Send in the socket, so TCP's window holds
 * the peer back, for up to SR_IW_NOBUF_WAIT_NS for the application to
 * post a receive (programs written for RoCE, such as qperf rc_bw, count
 * on RNR retries to cover a receive reposted late).  After that, the
 * Terminate siw sends.  With an SRQ (no kick from its post) we look
 * again every SR_IW_NOBUF_RECHECK_NS. */
#define SR_IW_NOBUF_WAIT_NS 1000000000ull
#define SR_IW_NOBUF_RECHECK_NS 1000000ull

/* Kernel siw, as MPA responder, sends its Reply before it hands the
 * socket to the QP (siw_accept); FPDUs that arrive in between stay
 * unread until the next segment comes.  So until the peer's first FPDU
 * shows its QP reading, an initiator that has sent FPDUs follows them
 * with a zero-length RDMA Write (its sink checks no STag, as for siw's
 * RTR) SR_IW_NUDGE_FIRST_NS after its first, then at doubling
 * intervals, at most SR_IW_NUDGE_MAX times; and once more when that
 * first FPDU arrives, for what was sent before. */
#define SR_IW_NUDGE_FIRST_NS 1000000ull
#define SR_IW_NUDGE_MAX 12

/* Kernel siw, as MPA initiator, reads the Reply with 4 bytes to spare
 * and drops the connection when they come (siw_recv_mpa_rr: "peer sent
 * extra data").  So a responder says nothing until the initiator's
 * first FPDU shows the Reply read, or for at most SR_IW_HUSH_NS after
 * it (a protocol whose server speaks first waits that long once). */
#define SR_IW_HUSH_NS 100000000ull

enum sr_iw_act {
	SR_IW_ACT_NONE = 0,
	SR_IW_ACT_SQ_DONE, /* an SQ WQE's last message is out: it completes */
	SR_IW_ACT_IRQ_POP, /* a Read Response is out: free its IRQ slot */
};

/* One FPDU of a send batch. */
struct sr_iw_fpdu_out {
	uint8_t hdr[SR_MPA_LEN_BYTES + SR_IW_MAX_HDR];
	uint8_t trl[3 + SR_MPA_CRC_BYTES]; /* pad, then CRC */
	uint32_t len;			   /* whole FPDU */
	/* Read Response payload: checked again before a resumed send,
	 * since the region may have been deregistered meanwhile */
	uint32_t rr_stag, rr_len;
	uint64_t rr_to;
	int pay_iov, pay_niov;
	uint8_t imm[SR_RDMAP_IMM_LEN]; /* Immediate Data payload */
	enum sr_iw_act act;
	uint32_t act_arg;
};

struct sr_iw_txb {
	int n, niov;
	size_t total, sent;
	/* FPDUs wholly in TCP's hands whose act is done, and their bytes:
	 * acts go per FPDU, not per batch, since the peer may answer an
	 * FPDU (a Read Response frees an ORQ slot, and a new Read Request
	 * comes) while the rest of the batch still waits for the socket */
	int acted;
	size_t acted_bytes;
	struct iovec iov[SR_IW_TXB_IOV];
	struct sr_iw_fpdu_out f[SR_IW_TXB_FPDUS];
};

enum sr_iw_src {
	SR_IW_SRC_NONE = 0,
	SR_IW_SRC_SQ,
	SR_IW_SRC_IRQ,
	SR_IW_SRC_RTR,
	SR_IW_SRC_NUDGE
};

/* The message being cut into FPDUs. */
struct sr_iw_txmsg {
	enum sr_iw_src src;
	uint8_t opcode;
	uint32_t wqe_idx;  /* SQ */
	uint8_t phase;	   /* WRITE_WITH_IMM: 0 the Write, 1 the Immediate Data */
	uint64_t len, off; /* payload */
	uint32_t stag;	   /* tagged: the sink */
	uint64_t to;
	uint32_t msn, qn, inv;
	bool se;
	struct sr_rdmap_rreq rreq; /* a Read Request's fields */
};

/* An RDMA Read we sent and wait the response for (ORQ entry). */
struct sr_iw_orq {
	uint32_t wqe_idx;
	bool rtr; /* the zero-length RTR Read: no WQE */
	uint32_t sink_stag;
	uint64_t sink_to;
	uint32_t size, done;
};

/* A Read Request of the peer's to answer (IRQ entry). */
struct sr_iw_irq {
	uint32_t sink_stag, src_stag, size;
	uint64_t sink_to, src_to;
	uint8_t raw[SR_DDP_UNTAGGED_HDR + SR_RDMAP_RREQ_LEN]; /* for a Terminate */
};

enum sr_iw_rxstate {
	SR_IW_RX_HDR = 0,
	SR_IW_RX_PAYLOAD,
	SR_IW_RX_STOP
};

enum sr_iw_rxdst {
	SR_IW_DST_NONE = 0,
	SR_IW_DST_WRITE, /* tagged: stag/to */
	SR_IW_DST_RRESP, /* tagged: the ORQ head's local buffer */
	SR_IW_DST_RECV,	 /* untagged: the receive WQE */
	SR_IW_DST_IMM,	 /* Immediate Data: 8 bytes kept */
	SR_IW_DST_DISCARD,
};

struct sr_iw_rx {
	enum sr_iw_rxstate state;
	/* A read came back short: the socket was empty then.  Until the next
	 * readiness (epoll is level-triggered: nothing that arrives meanwhile
	 * is missed) a recv would only say EAGAIN. */
	bool sock_dry;
	uint8_t la[SR_IW_LA];
	uint32_t la_off, la_len;
	bool la_in_big;	    /* the look-ahead's bytes are in rx_big, not la */
	bool la_want_big;   /* the last FPDUs were small: refill with SR_IW_LA_BIG */
	uint32_t small_run; /* FPDUs in a row of at most SR_IW_LA_BIG_MAX_PAY */
	/* current FPDU */
	uint8_t hbuf[SR_MPA_LEN_BYTES + SR_IW_MAX_HDR];
	uint32_t hhave, hneed;
	uint32_t ulpdu_len;
	struct sr_iw_hdr h;
	uint32_t pay_len, pay_done;
	enum sr_iw_rxdst dst;
	/* A tagged Write's last bytes land here, not in the region, until
	 * the FPDU's CRC is checked: an application that polls the end of
	 * its buffer for the data (ib_write_lat, riostream) and then reuses
	 * the buffer must not change bytes we have yet to checksum. */
	uint8_t tail[SR_IW_TAIL];
	uint32_t tail_len;
	uint64_t dst_base; /* WRITE: to of payload byte 0; RECV: offset in the WQE */
	uint8_t imm[SR_RDMAP_IMM_LEN];
	uint8_t trl[3 + SR_MPA_CRC_BYTES];
	uint32_t trl_have, trl_need;
	uint32_t crc; /* running CRC32c register */
	/* messages in progress, and the next MSN per untagged queue */
	uint32_t msn[SR_DDP_NQN];
	bool in_send;
	uint32_t send_mo;
	bool rwqe_valid;
	struct sr_recv_wqe *rwqe; /* max_recv_sge entries */
	bool in_write;
	uint32_t w_stag;
	uint64_t w_to, w_len, last_write_len;
	bool in_rresp;
};

struct sr_iw_qp {
	int fd;		/* -1 before connect and after close */
	bool connected; /* RTS on a stream (until the stream ends) */
	bool crc;
	bool initiator;
	uint8_t mpa_rev;
	int rtr;	  /* enum sr_mpa_rtr */
	bool rtr_to_send; /* initiator: the RTR message is still to go out */
	bool rtr_wait;	  /* responder: nothing goes out before the RTR arrived */
	/* responder: nothing goes out before this time or the peer's first
	 * FPDU (SR_IW_HUSH_NS); 0 = not hushed */
	uint64_t hush_until;
	/* initiator, until the peer's first FPDU (SR_IW_NUDGE_FIRST_NS) */
	bool nudging;
	bool nudge_to_send;	  /* a zero-length Write goes out when nothing else does */
	uint8_t nudges;		  /* sent so far */
	uint64_t nudge_deadline;  /* the next one; 0 = nothing sent yet */
	bool closing;		  /* SQD: drain, then close */
	uint64_t close_deadline;  /* ... or close anyway at this time */
	bool wr_shut;		  /* FIN sent */
	bool lingering;		  /* the stream is over for the QP, the socket waits for the peer's FIN */
	uint64_t linger_deadline; /* ns: when to look at the peer's progress again */
	int linger_outq;	  /* bytes the peer had not acknowledged at the last look */
	bool epollout;		  /* EPOLLOUT armed */
	bool in_epoll;
	/* receiving held: a Send waits for a receive WQE (SR_IW_NOBUF_WAIT_NS) */
	bool rx_held;		 /* EPOLLIN off while held */
	uint64_t nobuf_deadline; /* when the wait ends in a Terminate; 0 = not waiting */
	uint64_t nobuf_recheck;	 /* SRQ: the next look at the queue */
	/* send */
	struct sr_iw_txb txb;
	struct sr_iw_txmsg msg;
	uint32_t tx_msn[SR_DDP_NQN]; /* next MSN to send per untagged queue */
	struct sr_iw_orq *orq;
	/* ORQ and IRQ: at most orq_size / irq_size entries (the ORD and IRD)
	 * in rings of sr_ring_slots() of them, found with the mask */
	uint32_t orq_size, orq_mask, orq_head, orq_tail; /* free running */
	struct sr_iw_irq *irq;
	uint32_t irq_size, irq_mask, irq_head, irq_tail; /* free running */
	uint32_t irq_seg; /* next IRQ entry to answer; [irq_head, irq_seg) are on their way */
	/* a local error found while cutting FPDUs, handled once mr_lock is dropped */
	bool tx_err;
	uint8_t tx_err_layer, tx_err_etype, tx_err_ecode;
	uint32_t tx_err_irq; /* in a Read Response: the IRQ entry, else UINT32_MAX */
	/* Terminate to send (valid), and whether one went or came */
	bool term_pending, term_sent, term_rcvd;
	struct sr_iw_hdr term;
	/* receive */
	struct sr_iw_rx rx;
	uint8_t *rx_big; /* SR_IW_LA_BIG bytes of look-ahead, or NULL */
	/* the CM's close notification */
	void (*on_close)(void *arg, enum sr_iw_close_reason reason);
	void *close_arg;
	bool close_pending, close_fired;
	enum sr_iw_close_reason close_reason;
	uint64_t stat_fpdus_rx, stat_fpdus_tx;
	/* a burst of small posts deferred for one sendmsg (iwarp.c, iw_tx_defer) */
	bool tx_defer_on; /* allowed (SOFTRDMA_TX_HOLD=0: never) */
};

static inline struct sr_iw_qp *iqp(struct sr_qp *qp)
{
	return qp->tp;
}
static inline uint32_t iw_qpn(struct sr_qp *qp)
{
	return qp->ibqp.qp_base.qp_num;
}
static inline struct sr_pd *iw_pd(struct sr_qp *qp)
{
	return to_spd(qp->ibqp.qp_base.pd);
}

/* iwarp.c */
enum sr_iw_memerr {
	SR_IW_MEM_OK = 0,
	SR_IW_MEM_STAG,
	SR_IW_MEM_PD,
	SR_IW_MEM_ACCESS,
	SR_IW_MEM_BOUNDS,
	SR_IW_MEM_WRAP
};
/* The host address of [to, to+len) of the region named by a remote STag,
 * or NULL with *err saying why (caller holds ctx->mr_lock for reading). */
uint8_t *sr_iw_stag_lookup(struct sr_qp *qp, uint32_t stag, uint64_t to, uint64_t len, unsigned int access,
			   enum sr_iw_memerr *err);
/* [off, off+len) of a local SGE list as iovecs (at most max).  Returns
 * their number, or -1 for a bad lkey, access or range (mr_lock held). */
int sr_iw_sge_iov(struct sr_qp *qp, const struct ibv_sge *sge, uint32_t nsge, uint64_t off, uint64_t len,
		  unsigned int access, struct iovec *iov, int max);
/* Arm or disarm EPOLLOUT on the socket. */
void sr_iw_want_out(struct sr_qp *qp, bool on);
/* A Send found no receive WQE: 0 = wait for one (receiving held, see
 * SR_IW_NOBUF_WAIT_NS), -1 = the wait is over, Terminate. */
int sr_iw_rx_hold(struct sr_qp *qp);
/* A receive WQE was taken: the wait (if any) is over. */
static inline void sr_iw_rx_got_buf(struct sr_qp *qp)
{
	((struct sr_iw_qp *)qp->tp)->nobuf_deadline = 0;
}
/* The stream is over: stop reading, close when we may, notify the CM. */
void sr_iw_conn_end(struct sr_qp *qp, enum sr_iw_close_reason reason);
/* Take the QP to ERR from the transport (flushing our own in-flight
 * receive WQE too); ev (enum ibv_event_type) or -1 for none. */
void sr_iw_qp_error(struct sr_qp *qp, int ev);

/* qp_tx.c */
void sr_iw_tx_progress(struct sr_qp *qp);
/* The peer's first FPDU arrived: no more nudges but one for what we
 * sent before it (qp_rx.c). */
void sr_iw_nudge_end(struct sr_qp *qp);
/* The responder may speak: the initiator's first FPDU came, or the
 * hush is over (qp_rx.c, the timer). */
void sr_iw_hush_end(struct sr_qp *qp);
/* A nudge is due (the timer). */
void sr_iw_nudge_timer(struct sr_qp *qp, uint64_t now);
void sr_iw_tx_reset(struct sr_qp *qp);
/* Push whatever is left of a partly sent FPDU, then a Terminate, with a
 * short bounded wait (error path only). */
void sr_iw_tx_flush_term(struct sr_qp *qp);

/* qp_tx_fault.c: fault injection on the send path (core/fault.h) */
/* add_fpdu, before cutting the next FPDU: its fate is drawn; true if
 * the batch must end before it. */
bool sr_iw_fault_before(struct sr_qp *qp, const struct sr_iw_txb *b);
/* add_fpdu, FPDU f complete (its iovecs from first on, f->len set). */
void sr_iw_fault_built(struct sr_qp *qp, struct sr_iw_txb *b, struct sr_iw_fpdu_out *f, int first);
/* txb_send: lowers *left to what may go now; 0, -ETIME while the stream
 * stalls (the fault timer resumes it), or the error of a stream the
 * fault ended (-ECONNRESET, -EPIPE). */
int sr_iw_fault_send(struct sr_qp *qp, size_t *left);
void sr_iw_fault_reset(struct sr_qp *qp);
void sr_iw_fault_timer(struct sr_qp *qp, uint64_t now);
/* delay: txb_send's iovecs (len bytes) go into the delay line instead of
 * the socket; 0, or -ETIME while the line is full (its timer resumes). */
int sr_iw_fault_delay(struct sr_qp *qp, const struct iovec *iov, int n, size_t len);
/* What the delay line holds that is due (all of it: block, waiting up
 * to 200 ms for the socket) goes into the socket; true when it is empty. */
bool sr_iw_fault_drain(struct sr_qp *qp, bool block);

/* qp_rx.c */
void sr_iw_rx_progress(struct sr_qp *qp);
void sr_iw_rx_reset(struct sr_qp *qp);

/* term.c */
/* An error in what the peer sent: Terminate with layer/etype/ecode and
 * the offending headers (the current FPDU's), QP to ERR with ev. */
void sr_iw_term_rx_error(struct sr_qp *qp, uint8_t layer, uint8_t etype, uint8_t ecode, int ev);
/* An error of ours while sending (bad local key and the like). */
void sr_iw_term_local(struct sr_qp *qp, uint8_t layer, uint8_t etype, uint8_t ecode, const uint8_t *bad,
		      uint32_t bad_len, uint32_t seg_len, int ev);
/* A Terminate arrived (h parsed): QP to ERR, the affected WQE failed. */
void sr_iw_term_received(struct sr_qp *qp, const struct sr_iw_hdr *h);
/* Terminate codes for a remote STag that sr_iw_stag_lookup refused:
 * DDP tagged-buffer (placement) and RDMAP protection (READ source). */
uint8_t sr_iw_memerr_ddp(enum sr_iw_memerr e);
uint8_t sr_iw_memerr_rdmap(enum sr_iw_memerr e);

extern const struct sr_transport_ops sr_iwarp_ops;

#endif
