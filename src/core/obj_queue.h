/* The queue objects: completion channels and CQs, receive queues and
 * SRQs, XRC domains, address vectors and AHs, send queues and QPs. */
#ifndef SR_CORE_OBJ_QUEUE_H
#define SR_CORE_OBJ_QUEUE_H

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "core/handle.h"
#include "core/obj_memory.h"

struct sr_context;
struct sr_device;
struct sr_fault_qp;
struct sr_stat_ctrs;
struct sr_qp;
struct sr_cq;

/* ibch.fd is an epoll instance over the event pipe's read end: readable
 * when an event waits, as rdma-core's.  Once the application has made it
 * non-blocking (so a wake-up without an event costs it an EAGAIN, never a
 * block) it watches the context's sockets too (prog.data_epfd): a thread
 * asleep on it wakes on the datagram itself, and ibv_get_cq_event
 * receives it.  wait_fd (the pipe and the sockets) is what a blocking
 * ibv_get_cq_event sleeps on (cq.c). */
struct sr_comp_channel {
	struct ibv_comp_channel ibch;
	struct sr_obj obj;
	int rd_fd; /* read end of the event pipe (non-blocking) */
	int wr_fd; /* write end of the event pipe */
	int wait_fd;
	atomic_bool fd_has_input; /* ibch.fd watches the sockets */
};

/* A completion's time: raw in the device clock (sr_dev_clock_ns: ns of
 * CLOCK_MONOTONIC, so hca_core_clock is 1 GHz), wall in ns of
 * CLOCK_REALTIME. */
struct sr_cq_ts {
	uint64_t raw, wall;
};

struct sr_cq {
	struct ibv_cq_ex ibcq; /* ibv_cq is its prefix */
	struct sr_obj obj;
	/* lock protects the ring and armed state */
	pthread_mutex_t lock;
	struct ibv_wc *ring;
	struct sr_ring_mem ring_mem; /* where ring came from */
	struct sr_pd *pdom;	     /* the parent domain it was made on, or NULL */
	uint32_t size;		     /* entries; power of two >= cqe+1 */
	uint32_t head, tail;	     /* producer writes at head, consumer reads at tail */
	int armed;		     /* 0, 1 = any, 2 = solicited only */
	bool arm_told;		     /* an empty poll since the arming told the progress thread (empty_armed in cq.c) */
	bool overflow;
	bool is_ex;
	uint64_t wc_flags_ex;
	/* Completion timestamps (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP[_WALLCLOCK]):
	 * one per ring slot, taken as the completion is written, under lock;
	 * NULL when the CQ was created without them. */
	struct sr_cq_ts *ts;
	struct sr_cq_ts last_ts;     /* the latest taken: no later one is smaller */
	struct ibv_wc cur;	     /* current entry of the ex polling API */
	struct sr_cq_ts cur_ts;	     /* ... and its timestamps */
	atomic_uint events_reported; /* completion events handed out by ibv_get_cq_event */
	atomic_uint n_qps;	     /* QPs using it (as send CQ, receive CQ or both: counted twice) */
};

struct sr_recv_wqe {
	uint64_t wr_id;
	uint64_t length;
	uint32_t num_sge;
	struct ibv_sge sge[]; /* max_recv_sge entries */
};

/* The work queues' rings have sr_ring_slots(max_wr) slots: a power of
 * two, so that free-running 32-bit indices go on naming consecutive slots
 * when they wrap (idx % max_wr would jump at 2^32 unless max_wr divides
 * it, and a WQE would land on one still outstanding) and a slot is found
 * with a mask, not a division.  max_wr stays the limit on what is posted. */
static inline uint32_t sr_ring_slots(uint32_t n)
{
	uint32_t s = 1;

	while (s < n)
		s <<= 1;
	return s;
}

struct sr_rq {
	uint8_t *buf; /* mask + 1 slots of stride bytes */
	uint32_t stride;
	uint32_t max_wr, max_sge;
	uint32_t mask;		/* sr_ring_slots(max_wr) - 1 */
	uint32_t head, tail;	/* free running; count = head - tail */
	struct sr_ring_mem mem; /* where buf came from */
};

struct sr_srq {
	struct ibv_srq ibsrq;
	struct sr_obj obj;
	pthread_mutex_t lock; /* protects rq, limit */
	struct sr_rq rq;
	uint32_t limit;
	bool error;
	atomic_uint n_qps; /* QPs attached to it */
	/* an XRC SRQ (xrc.c): its domain, number there and completion queue;
	 * the TGT QPs of the domain deliver into it by that number */
	struct sr_xrcd *xrcd; /* NULL: a basic SRQ */
	uint32_t srq_num;
	struct sr_cq *cq;
	struct sr_srq *dom_next; /* xrcd->dom->srqs (the domain's lock) */
};

/* An XRC domain (xrc.c): what every ibv_open_xrcd of one file (or one
 * anonymous open) in the process shares; its SRQs and TGT QPs.  lock
 * protects the lists; refs (the device's ctx_lock) counts its handles. */
struct sr_xrc_dom {
	struct sr_device *dev;
	bool anonymous;
	dev_t fdev;
	ino_t fino;
	int refs;
	pthread_mutex_t lock;
	struct sr_srq *srqs;
	struct sr_qp *tgts;
	struct sr_xrc_dom *next; /* dev->xrc_doms */
};

/* An ibv_open_xrcd handle: rdma-core's verbs_xrcd, then ours. */
struct sr_xrcd {
	struct ibv_xrcd ibxrcd;
	uint32_t comp_mask;
	uint32_t handle;
	struct sr_obj obj;
	struct sr_xrc_dom *dom;
	atomic_int usecnt; /* SRQs and TGT QPs made through it */
};

/* The path to a peer, from an AH or RC/UC QP attributes. */
struct sr_av {
	struct sockaddr_in6 dst; /* IPv4 as IPv4-mapped; port 4791 */
	struct sockaddr_in6 src; /* our address (from sgid_index) */
	uint8_t sgid_index;
	union ibv_gid dgid;
	uint8_t hop_limit, traffic_class, sl;
	uint32_t flow_label;
};

struct sr_ah {
	struct ibv_ah ibah;
	struct sr_obj obj;
	struct sr_av av;
};

enum sr_wqe_state {
	SR_WQE_POSTED = 0, /* not yet started */
	SR_WQE_PENDING,	   /* packets sent, waiting for ack/response */
	SR_WQE_DONE,	   /* finished; completes when it reaches the tail */
};

/* 80 bytes and the SGEs: an idle QP's memory is mostly its SQ ring.
 * Inline data overlays the SGE array (an inlined WQE has no SGEs). */
struct sr_send_wqe {
	uint64_t wr_id;
	uint64_t remote_addr;
	uint64_t length;
	uint64_t compare_add, swap;
	uint32_t rkey;
	uint32_t imm_data;		  /* network order; or invalidate rkey (host order) */
	uint32_t remote_qpn, remote_qkey; /* UD destination (its AV: sr_sq_av) */
	uint32_t send_flags;
	uint32_t num_sge;
	/* transport state */
	uint32_t first_psn, npkts; /* PSNs first_psn .. first_psn+npkts-1 */
	uint32_t sent_pkts;	   /* packets of this WQE transmitted (go-back resets it) */
	uint8_t opcode;		   /* enum ibv_wr_opcode */
	uint8_t state;		   /* enum sr_wqe_state */
	uint8_t status;		   /* enum ibv_wc_status */
	bool inlined;		   /* payload is in the inline area */
	struct ibv_sge sge[];	   /* max(max_send_sge, inline area) entries */
};

struct sr_sq {
	uint8_t *buf;
	struct sr_av *ud_av; /* UD QPs: each slot's destination, else NULL */
	uint32_t stride;
	uint32_t max_wr, max_sge, max_inline;
	uint32_t mask;		/* sr_ring_slots(max_wr) - 1 */
	uint32_t head;		/* next slot to post (free running) */
	uint32_t tail;		/* oldest not yet completed */
	uint32_t cur;		/* next WQE to transmit */
	struct sr_ring_mem mem; /* where buf came from */
};

static inline struct sr_send_wqe *sr_sq_wqe(struct sr_sq *sq, uint32_t idx)
{
	return (struct sr_send_wqe *)(sq->buf + (size_t)(idx & sq->mask) * sq->stride);
}
static inline uint8_t *sr_wqe_inline(struct sr_sq *sq, struct sr_send_wqe *w)
{
	return (uint8_t *)w->sge;
}
/* The destination of a UD WQE. */
static inline struct sr_av *sr_sq_av(struct sr_sq *sq, const struct sr_send_wqe *w)
{
	return &sq->ud_av[((const uint8_t *)w - sq->buf) / sq->stride];
}
static inline struct sr_recv_wqe *sr_rq_wqe(struct sr_rq *rq, uint32_t idx)
{
	return (struct sr_recv_wqe *)(rq->buf + (size_t)(idx & rq->mask) * rq->stride);
}

struct sr_roce_qp; /* transport private state, roce/ */

struct sr_qp {
	struct ibv_qp_ex ibqp; /* ibv_qp is its prefix */
	struct sr_obj obj;
	struct sr_context *ctx;
	/* The PD requests from the peer are checked against: the QP's own,
	 * an XRC TGT QP's that of the SRQ its message goes to (set with srq
	 * and rcq for each packet, qp->lock held; NULL between packets). */
	struct sr_pd *rpd;
	struct sr_context *rctx; /* ... and whose keys: rpd's context (a TGT QP's SRQ's may be another's) */
	/* XRC (xrc.c): an XRC_RECV QP's domain handle, its other handles
	 * (ibv_open_qp) and its place among the domain's TGT QPs */
	struct sr_xrcd *xrcd;
	int xrc_refs; /* handles of it: 1 + ibv_open_qp's (the domain's lock) */
	struct sr_qp *dom_next;
	uint64_t serial; /* unique in the process, never reused (a type 2 MW names its QP by it) */
	/* lock protects everything below, the SQ/RQ and the transport state */
	pthread_mutex_t lock;
	struct ibv_qp_attr attr; /* current attributes (state in attr.qp_state) */
	struct ibv_qp_cap cap;
	bool sq_sig_all;
	struct sr_cq *scq, *rcq;
	struct sr_srq *srq;
	struct sr_sq sq;
	struct sr_rq rq;
	struct sr_av av; /* RC/UC: the peer */
	bool has_qp_ex;
	uint64_t send_ops_flags;
	int wr_error; /* ibv_wr_* batch error: the errno ibv_wr_complete returns */
	uint32_t wr_start_head;
	bool dead; /* destroyed: progress thread must not touch */
	bool last_wqe_reached_sent;
	bool sqd_notified; /* SQ_DRAINED raised for this SQD period */
	uint32_t n_mcast;  /* multicast groups attached (ctx->mcast_lock) */
	/* 1 + index in ctx->prog.timer_qps, 0 = not there.  Set to 0 or from 0
	 * only with qp->lock and timer_lock held; another QP's disarm moves
	 * it between non-zero values under timer_lock alone, so a reader with
	 * only qp->lock sees "in the set or not" right, but reads atomically. */
	_Atomic uint32_t timer_slot;
	atomic_bool in_park; /* in ctx->prog.parked (changed under prog.park_lock) */
	/* qp->lock: the application's last post of a send WR returned at
	 * post_end_ns, and was part of a burst (sr_post_in_burst) */
	uint64_t post_end_ns;
	bool in_burst;
	struct sr_qp *next, *prev; /* ctx->qp_list */
	struct sr_qp *zombie_next;
	void *tp; /* transport private (struct sr_roce_qp) */
	/* traffic counters (common/stats.h): relaxed atomic adds, never NULL */
	struct sr_stat_ctrs *stats;
	int stats_slot;
	/* fault injection (core/fault.h): NULL unless asked for */
	struct sr_fault_qp *faults;
};

/* An ibv_open_qp handle: operates on qp; destroying the last handle of
 * a TGT QP destroys it. */
struct sr_qp_open {
	struct ibv_qp ibqp;
	struct sr_obj obj;
	struct sr_qp *qp;
};

static inline struct sr_qp *to_sqp(struct ibv_qp *q)
{
	return (struct sr_qp *)q;
}
static inline struct sr_cq *to_scq(struct ibv_cq *c)
{
	return (struct sr_cq *)c;
}
static inline struct sr_srq *to_ssrq(struct ibv_srq *s)
{
	return (struct sr_srq *)s;
}
static inline struct sr_ah *to_sah(struct ibv_ah *a)
{
	return (struct sr_ah *)a;
}
/* The transport a QP's type stands for: an XRC QP is reliable
 * connected (its INI end RC's requester, its TGT end RC's responder). */
static inline enum ibv_qp_type sr_qp_transport(const struct sr_qp *qp)
{
	enum ibv_qp_type t = qp->ibqp.qp_base.qp_type;
	return t == IBV_QPT_XRC_SEND || t == IBV_QPT_XRC_RECV ? IBV_QPT_RC : t;
}
static inline bool sr_qp_is_xrc(const struct sr_qp *qp)
{
	return qp->ibqp.qp_base.qp_type == IBV_QPT_XRC_SEND || qp->ibqp.qp_base.qp_type == IBV_QPT_XRC_RECV;
}

#endif
