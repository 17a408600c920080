/* softrdma core objects: devices, contexts, PDs, MRs, CQs, SRQs, QPs, AHs.
 *
 * core/ knows nothing of packets: the transport (roce/) is reached through
 * struct sr_transport_ops.  Every lock says what it protects; lock order is
 * qp->lock -> srq->lock -> cq->lock, and ctx->mr_lock (read) may be taken
 * inside any of them.  ctx->lock is never held while taking a qp->lock. */
#ifndef SR_CORE_SR_H
#define SR_CORE_SR_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>
#include "common/conf.h"
#include "common/stats.h"
#include "common/tsan.h"
#include "core/handle.h"
#include "core/progress.h"

#define SR_VENDOR_ID 0xffffff /* as rxe */
#define SR_MAX_QP 0x10000
#define SR_MAX_QP_WR 0x4000
#define SR_MAX_SGE 32
#define SR_MAX_INLINE 512 /* as rxe: SR_MAX_SGE SGEs' worth (older rxe: 400) */
#define SR_MAX_CQ 0x4000
/* max_cqe is 1M - 1, beyond rxe's 32767: libfabric's verbs;ofi_rxm asks
 * for rx + tx * universe (128 + 128 * 256) entries.  A CQ's ring is
 * calloc'ed, so the kernel commits its pages only as completions reach
 * them: 48 MiB at most for the largest CQ, 3 MiB for rxm's. */
#define SR_MAX_CQE 0x100000
/* The key table's slots (slot 0 unused): MRs and MWs share them, so the
 * device's max_mr is what its windows' max_mw leaves (handle.c). */
#define SR_KEY_SLOTS 0x40000
#define SR_MAX_MW 0x10000
#define SR_KEY_RETIRED 256 /* a deregistered key's tag is not handed out again for this many more */
#define SR_MAX_PD 0x10000
#define SR_MAX_SRQ 0x4000
#define SR_MAX_SRQ_WR 0x4000
#define SR_MAX_AH 0x10000
#define SR_MAX_RD_ATOMIC 128
#define SR_MAX_MR_SIZE (1ull << 40)
#define SR_MAX_MCAST_GRP 64
#define SR_MAX_MCAST_QP_ATTACH 64
#define SR_MAX_PKEYS 1
#define SR_HELD_QPS 16 /* QPs of a context whose sends may wait for the next poll */
#define SR_MAX_MSG_SIZE 0x80000000u /* 2 GiB, as rxe */
#define SR_MAX_DM_SIZE 0x40000 /* device memory of a device, as a ConnectX-6's MEMIC */
#define SR_MAX_DM_LOG_ALIGN 12

struct sr_transport_ops;
struct sr_ipc_pkt;
struct sr_fault_dev;
struct sr_fault_qp;
struct sr_mcg;

/* One configured device. Lives for the life of the process. */
struct sr_device {
	struct ibv_device ibdev; /* first: ibv_device * <-> sr_device * */
	struct sr_conf_device conf;
	bool crc;
	const struct sr_transport_ops *tops;
	struct sr_fault_dev *faults; /* fault injection (core/fault.h), NULL = none */
	uint32_t n_obj[SR_OBJ_NTYPES]; /* live objects of each type, all contexts (handle.c's lock) */
	_Atomic uint64_t dm_used;      /* bytes of device memory allocated (dm.c) */
	/* ctx_lock protects the open contexts' list and their open counts,
	 * and the XRC domains' list */
	pthread_mutex_t ctx_lock;
	struct sr_context *ctxs;       /* the process's open contexts of it (import.c finds them) */
	struct sr_xrc_dom *xrc_doms;   /* its XRC domains in the process (xrc.c) */
	_Atomic uint32_t srq_num_next; /* the next XRC SRQ's number (xrc.c) */
};

struct sr_gid_entry {
	union ibv_gid gid;
	int family; /* AF_INET / AF_INET6 */
};

struct sr_qp;
struct sr_cq;

/* Where a ring of a QP, SRQ or CQ came from: a parent domain's allocator
 * (pd set: its free gives it back, with type) or the library's. */
struct sr_ring_mem {
	struct sr_pd *pd;
	uint64_t type;
};
/* The parent domain's resource types, the second word of each being
 * rdma-core's driver id of rxe, as the devices present themselves. */
#define SR_RES_TYPE(n) (((uint64_t)RDMA_DRIVER_RXE << 32) | (n))
#define SR_RES_TYPE_SQ SR_RES_TYPE(1)
#define SR_RES_TYPE_RQ SR_RES_TYPE(2)
#define SR_RES_TYPE_SRQ SR_RES_TYPE(3)
#define SR_RES_TYPE_CQ SR_RES_TYPE(4)

struct sr_context {
	struct verbs_context vctx; /* vctx.context is the ibv_context */
	struct sr_context *owner;  /* itself: to_sctx() reads it here, and in an imported context */
	struct sr_device *dev;
	/* ibv_import_device (import.c): the contexts imported from this one
	 * (handle.c's lock), and how many of them and it are open (the
	 * device's ctx_lock): the objects live until the last one closes */
	struct sr_ictx *imports;
	int n_open;
	bool closed;               /* ibv_close_device of the context itself */
	dev_t cmd_dev;             /* its cmd_fd's file, by which an import finds it */
	ino_t cmd_ino;
	struct sr_context *dev_next; /* dev->ctxs */
	struct sr_netdev_info nd;  /* snapshot at open */
	enum ibv_mtu active_mtu;
	int ngid;
	struct sr_gid_entry gid[SR_MAX_ADDRS];
	uint64_t node_guid;        /* host order */

	int async_wr;              /* write end of the async event pipe (one token byte per event) */
	pthread_mutex_t async_lock; /* protects the async event queue */
	struct sr_async_rec *async_q;
	uint32_t async_n, async_cap;

	/* lock protects: qp_list, qpn table, daemon connect, zombies, pd/cq counts */
	pthread_mutex_t lock;
	struct sr_qp *qp_list;     /* doubly linked: removal is O(1) */
	uint32_t n_qps;
	struct sr_qp **qpn_tab;    /* open hash qpn -> qp */
	uint32_t qpn_tab_size;
	uint32_t qpn_tab_used;     /* live entries and tombstones */
	struct sr_qp *zombies;     /* destroyed QPs freed by the progress thread */
	struct sr_daemon_conn *_Atomic daemon; /* set once, under lock; read without */
	/* The context lost what its device needs (softrdmad died): its QPs
	 * are in error, IBV_EVENT_DEVICE_FATAL was raised, new QPs and
	 * modifies out of RESET/ERR fail with EIO, the port reads DOWN. */
	atomic_bool fatal;

	/* mr_lock protects the key table; the receive path holds it for
	 * reading while it places data, so deregistration waits for it. */
	pthread_rwlock_t mr_lock;
	struct sr_mr **mr_tab;
	struct sr_mw **mw_tab;     /* the same slots' windows: NULL until the first ibv_alloc_mw */
	uint32_t mr_tab_size;      /* entries of both tables */
	uint32_t *key_last;        /* each slot's last key, so a reuse never gives it again */
	struct sr_key_ent *key_map; /* a live key's upper 24 bits -> its slot (mr.c) */
	uint32_t key_map_mask;     /* entries - 1 (a power of two), 0 before the first key */
	uint32_t key_map_n;        /* live keys in it */
	uint32_t key_retired[SR_KEY_RETIRED]; /* the keys that left the map last, not given again */
	uint32_t key_retired_next;
	uint32_t mr_next;          /* cyclic allocation cursor */

	struct sr_handle_tab handles; /* the objects' handles (handle.c's lock) */

	struct sr_progress prog;   /* the progress engine (core/progress.h) */

	/* UD multicast (mcast_attach.c).  mcast_lock serialises attach, detach and
	 * QP destruction (it is held across the daemon call that joins or
	 * leaves a group); the group list itself changes only with ctx->lock
	 * held too, so the receive path reads it under ctx->lock alone.
	 * Order: mcast_lock -> ctx->lock -> qp->lock. */
	pthread_mutex_t mcast_lock;
	struct sr_mcg *mcgs;
	uint32_t n_mcgs;

	/* txs_lock protects the list of RoCE QPs holding send sockets,
	 * oldest first (roce/net.c).  Taken inside a qp->lock; other QPs'
	 * locks are only tried under it. */
	pthread_mutex_t txs_lock;
	struct sr_qp *txs_head, *txs_tail;

	/* Transport work for rx_flush: iwarp/ counts QPs whose end of
	 * connection is to be told to the CM (with no lock held). */
	atomic_int tp_notify;
};

/* A protection domain, or a parent domain (domain.c): an ibv_pd too,
 * an alias of its protection domain (the one every key and access check
 * goes by, to_spd) with the application's allocators for the rings of
 * the QPs, SRQs and CQs made on it, and perhaps a thread domain. */
/* A context of ibv_import_device (import.c): another ibv_context of the
 * same objects, as rdma-core's on a dup of the uverbs file. */
struct sr_ictx {
	struct verbs_context vctx;
	struct sr_context *owner;  /* at the same place as sr_context's */
	struct sr_ictx *next;      /* owner->imports */
};

struct sr_pd {
	struct ibv_pd ibpd;
	struct sr_obj obj;
	/* MRs, QPs, SRQs, AHs, parent domains using it; a parent domain's:
	 * its QPs, SRQs, AHs and CQs; an import's: its QPs, SRQs and AHs, and 1 until
	 * it is unimported (it is freed at 0) */
	atomic_int usecnt;
	struct sr_pd *real; /* itself; a parent domain's: its protection domain */
	struct sr_td *td;   /* a parent domain's thread domain, or NULL */
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment, uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t resource_type);
	void *pd_context;
};

/* A thread domain (domain.c): the application keeps the objects of its
 * parent domains to one thread at a time.  Here a hint that changes
 * nothing: each QP's lock is shared with the progress thread. */
struct sr_td {
	struct ibv_td ibtd;
	struct sr_obj obj;
	atomic_int usecnt;  /* parent domains using it */
};


struct sr_mr {
	struct ibv_mr ibmr;
	struct sr_obj obj;
	struct sr_pd *pd;
	uint64_t iova;      /* address the peer uses (ibmr.addr unless iova given) */
	uint8_t *host;      /* where iova maps in our address space */
	uint64_t length;
	unsigned int access;
	uint32_t index;     /* slot in ctx->mr_tab */
	uint32_t num_mw;    /* memory windows bound to it (mr_lock) */
	struct sr_dm *dm;   /* the device memory it covers (ibv_reg_dm_mr), or NULL */
	struct sr_mr *real; /* itself; an import's: the region it names */
};

/* Device memory (dm.c): the device's own memory, which the application
 * reaches only through ibv_memcpy_to_dm/ibv_memcpy_from_dm and which its
 * MRs (ibv_reg_dm_mr, zero-based) expose to RDMA. */
struct sr_dm {
	struct ibv_dm ibdm;
	struct sr_obj obj;
	uint8_t *buf;
	uint64_t length;
	atomic_int usecnt;  /* MRs on it */
	struct sr_dm *real; /* itself; an import's: the DM it names */
};

/* A memory window (mw.c), as the kernel's rxe has them: type 1 bound by
 * ibv_bind_mw, type 2 (2B) by a BIND_MW work request and tied to the QP
 * that bound it.  Its rkey names a slot of ctx->mw_tab; the slot is taken
 * from the same index space as the MRs', so an rkey is an MR's or an MW's,
 * never both.  Everything below ibmw is protected by ctx->mr_lock. */
enum sr_mw_state { SR_MW_FREE, SR_MW_VALID };
struct sr_mw {
	struct ibv_mw ibmw;
	struct sr_obj obj;
	struct sr_pd *pd;
	uint32_t rkey;      /* the key as the last bind set its low 8 bits */
	uint32_t index;     /* slot in ctx->mw_tab */
	enum sr_mw_state state; /* type 1: always VALID; type 2: FREE until bound */
	struct sr_mr *mr;   /* the region it is bound to, or NULL */
	uint64_t addr;      /* the window's start in the region's iova space */
	uint64_t length;
	unsigned int access;
	uint64_t qp_serial; /* type 2: the QP it is bound to (sr_qp.serial) */
};

struct sr_comp_channel {
	struct ibv_comp_channel ibch;
	struct sr_obj obj;
	int wr_fd;          /* write end of the event pipe */
};

/* A completion's time: raw in the device clock (sr_dev_clock_ns: ns of
 * CLOCK_MONOTONIC, so hca_core_clock is 1 GHz), wall in ns of
 * CLOCK_REALTIME. */
struct sr_cq_ts {
	uint64_t raw, wall;
};

struct sr_cq {
	struct ibv_cq_ex ibcq;  /* ibv_cq is its prefix */
	struct sr_obj obj;
	/* lock protects the ring and armed state */
	pthread_mutex_t lock;
	struct ibv_wc *ring;
	struct sr_ring_mem ring_mem; /* where ring came from */
	struct sr_pd *pdom;     /* the parent domain it was made on, or NULL */
	uint32_t size;          /* entries; power of two >= cqe+1 */
	uint32_t head, tail;    /* producer writes at head, consumer reads at tail */
	int armed;              /* 0, 1 = any, 2 = solicited only */
	bool arm_told;          /* an empty poll since the arming told the progress thread (empty_armed in cq.c) */
	bool overflow;
	bool is_ex;
	uint64_t wc_flags_ex;
	/* Completion timestamps (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP[_WALLCLOCK]):
	 * one per ring slot, taken as the completion is written, under lock;
	 * NULL when the CQ was created without them. */
	struct sr_cq_ts *ts;
	struct sr_cq_ts last_ts; /* the latest taken: no later one is smaller */
	struct ibv_wc cur;      /* current entry of the ex polling API */
	struct sr_cq_ts cur_ts; /* ... and its timestamps */
	atomic_uint events_reported; /* completion events handed out by ibv_get_cq_event */
	atomic_uint n_qps;      /* QPs using it (as send CQ, receive CQ or both: counted twice) */
};

struct sr_recv_wqe {
	uint64_t wr_id;
	uint64_t length;
	uint32_t num_sge;
	struct ibv_sge sge[];   /* max_recv_sge entries */
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
	uint8_t *buf;           /* mask + 1 slots of stride bytes */
	uint32_t stride;
	uint32_t max_wr, max_sge;
	uint32_t mask;          /* sr_ring_slots(max_wr) - 1 */
	uint32_t head, tail;    /* free running; count = head - tail */
	struct sr_ring_mem mem; /* where buf came from */
};

struct sr_srq {
	struct ibv_srq ibsrq;
	struct sr_obj obj;
	pthread_mutex_t lock;   /* protects rq, limit */
	struct sr_rq rq;
	uint32_t limit;
	bool error;
	atomic_uint n_qps;      /* QPs attached to it */
	/* an XRC SRQ (xrc.c): its domain, number there and completion queue;
	 * the TGT QPs of the domain deliver into it by that number */
	struct sr_xrcd *xrcd;   /* NULL: a basic SRQ */
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
	struct sr_xrc_dom *next;  /* dev->xrc_doms */
};

/* An ibv_open_xrcd handle: rdma-core's verbs_xrcd, then ours. */
struct sr_xrcd {
	struct ibv_xrcd ibxrcd;
	uint32_t comp_mask;
	uint32_t handle;
	struct sr_obj obj;
	struct sr_xrc_dom *dom;
	atomic_int usecnt;      /* SRQs and TGT QPs made through it */
};

/* The path to a peer, from an AH or RC/UC QP attributes. */
struct sr_av {
	struct sockaddr_in6 dst;   /* IPv4 as IPv4-mapped; port 4791 */
	struct sockaddr_in6 src;   /* our address (from sgid_index) */
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
	SR_WQE_POSTED = 0,      /* not yet started */
	SR_WQE_PENDING,         /* packets sent, waiting for ack/response */
	SR_WQE_DONE,            /* finished; completes when it reaches the tail */
};

/* 80 bytes and the SGEs: an idle QP's memory is mostly its SQ ring.
 * Inline data overlays the SGE array (an inlined WQE has no SGEs). */
struct sr_send_wqe {
	uint64_t wr_id;
	uint64_t remote_addr;
	uint64_t length;
	uint64_t compare_add, swap;
	uint32_t rkey;
	uint32_t imm_data;          /* network order; or invalidate rkey (host order) */
	uint32_t remote_qpn, remote_qkey; /* UD destination (its AV: sr_sq_av) */
	uint32_t send_flags;
	uint32_t num_sge;
	/* transport state */
	uint32_t first_psn, npkts;  /* PSNs first_psn .. first_psn+npkts-1 */
	uint32_t sent_pkts;         /* packets of this WQE transmitted (go-back resets it) */
	uint8_t opcode;             /* enum ibv_wr_opcode */
	uint8_t state;              /* enum sr_wqe_state */
	uint8_t status;             /* enum ibv_wc_status */
	bool inlined;               /* payload is in the inline area */
	struct ibv_sge sge[];       /* max(max_send_sge, inline area) entries */
};

struct sr_sq {
	uint8_t *buf;
	struct sr_av *ud_av;        /* UD QPs: each slot's destination, else NULL */
	uint32_t stride;
	uint32_t max_wr, max_sge, max_inline;
	uint32_t mask;   /* sr_ring_slots(max_wr) - 1 */
	uint32_t head;   /* next slot to post (free running) */
	uint32_t tail;   /* oldest not yet completed */
	uint32_t cur;    /* next WQE to transmit */
	struct sr_ring_mem mem; /* where buf came from */
};

static inline struct sr_send_wqe *sr_sq_wqe(struct sr_sq *sq, uint32_t idx)
{
	return (struct sr_send_wqe *)(sq->buf + (size_t)(idx & sq->mask) * sq->stride);
}
static inline uint8_t *sr_wqe_inline(struct sr_sq *sq, struct sr_send_wqe *w)
{
	(void)sq;
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
	struct ibv_qp_ex ibqp;     /* ibv_qp is its prefix */
	struct sr_obj obj;
	struct sr_context *ctx;
	/* The PD requests from the peer are checked against: the QP's own,
	 * an XRC TGT QP's that of the SRQ its message goes to (set with srq
	 * and rcq for each packet, qp->lock held; NULL between packets). */
	struct sr_pd *rpd;
	struct sr_context *rctx;   /* ... and whose keys: rpd's context (a TGT QP's SRQ's may be another's) */
	/* XRC (xrc.c): an XRC_RECV QP's domain handle, its other handles
	 * (ibv_open_qp) and its place among the domain's TGT QPs */
	struct sr_xrcd *xrcd;
	int xrc_refs;              /* handles of it: 1 + ibv_open_qp's (the domain's lock) */
	struct sr_qp *dom_next;
	uint64_t serial;           /* unique in the process, never reused (a type 2 MW names its QP by it) */
	/* lock protects everything below, the SQ/RQ and the transport state */
	pthread_mutex_t lock;
	struct ibv_qp_attr attr;   /* current attributes (state in attr.qp_state) */
	struct ibv_qp_cap cap;
	bool sq_sig_all;
	struct sr_cq *scq, *rcq;
	struct sr_srq *srq;
	struct sr_sq sq;
	struct sr_rq rq;
	struct sr_av av;           /* RC/UC: the peer */
	bool has_qp_ex;
	uint64_t send_ops_flags;
	int wr_error;              /* ibv_wr_* batch error: the errno ibv_wr_complete returns */
	uint32_t wr_start_head;
	bool dead;                 /* destroyed: progress thread must not touch */
	bool last_wqe_reached_sent;
	bool sqd_notified;         /* SQ_DRAINED raised for this SQD period */
	uint32_t n_mcast;          /* multicast groups attached (ctx->mcast_lock) */
	/* 1 + index in ctx->prog.timer_qps, 0 = not there.  Set to 0 or from 0
	 * only with qp->lock and timer_lock held; another QP's disarm moves
	 * it between non-zero values under timer_lock alone, so a reader with
	 * only qp->lock sees "in the set or not" right, but reads atomically. */
	_Atomic uint32_t timer_slot;
	atomic_bool in_park;      /* in ctx->prog.parked (changed under prog.park_lock) */
	/* qp->lock: the application's last post of a send WR returned at
	 * post_end_ns, and was part of a burst (sr_post_in_burst) */
	uint64_t post_end_ns;
	bool in_burst;
	struct sr_qp *next, *prev; /* ctx->qp_list */
	struct sr_qp *zombie_next;
	void *tp;                  /* transport private (struct sr_roce_qp) */
	/* traffic counters (common/stats.h): relaxed atomic adds, never NULL */
	struct sr_stat_ctrs *stats;
	int stats_slot;
	/* fault injection (core/fault.h): NULL unless asked for */
	struct sr_fault_qp *faults;
};

/* What core/ asks of a transport (roce/, iwarp/). All are called
 * with qp->lock held except create/destroy and modify_prepare. */
struct sr_transport_ops {
	int (*qp_create)(struct sr_qp *qp);          /* allocate tp, QPN */
	void (*qp_destroy)(struct sr_qp *qp);
	/* Before a modify is validated, without qp->lock (it may ask the
	 * daemon, whose answer can come behind datagrams for this QP); NULL:
	 * nothing to prepare. */
	void (*modify_prepare)(struct sr_qp *qp, const struct ibv_qp_attr *attr, int mask);
	/* After core validated a modify; old_state is the state before. */
	int (*qp_modify)(struct sr_qp *qp, struct ibv_qp_attr *attr, int mask, enum ibv_qp_state old_state);
	void (*sq_kick)(struct sr_qp *qp);           /* new WQEs were posted */
	void (*rq_kick)(struct sr_qp *qp);           /* new receive WQEs (RNR wait may end) */
	void (*on_timer)(struct sr_qp *qp, uint64_t now_ns);
	uint64_t (*next_deadline)(struct sr_qp *qp); /* 0 = none */
	void (*on_readable)(struct sr_qp *qp, int fd);
	/* The destination QPN of a datagram that arrived through the daemon
	 * (false: none, it is dropped); NULL: nothing comes that way. */
	bool (*dgram_qpn)(const uint8_t *data, uint32_t len, uint32_t *qpn);
	/* a datagram for this QP that arrived through the daemon */
	void (*deliver)(struct sr_qp *qp, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len);
	/* after a round of on_readable calls, with no QP locked */
	void (*rx_flush)(struct sr_context *ctx);
	/* send what sq_kick held back for a batch (NULL: it never holds) */
	void (*sq_release)(struct sr_qp *qp);
};

/* ---- helpers shared across core/ and transports ---- */
/* The context whose objects c reaches: c's own, or the one it was
 * imported from. */
static inline struct sr_context *to_sctx(struct ibv_context *c)
{
	return ((struct sr_context *)((char *)c - __builtin_offsetof(struct sr_context, vctx.context)))->owner;
}
_Static_assert(__builtin_offsetof(struct sr_context, owner) == __builtin_offsetof(struct sr_ictx, owner),
	       "to_sctx reads owner at one place in both");
#define SR_CONTAINER(ptr, type, member) ((type *)((char *)(ptr) - __builtin_offsetof(type, member)))
static inline struct sr_qp *to_sqp(struct ibv_qp *q) { return (struct sr_qp *)q; }
static inline struct sr_cq *to_scq(struct ibv_cq *c) { return (struct sr_cq *)c; }
/* The protection domain of p (a parent domain's is the one it was made on). */
static inline struct sr_pd *to_spd(struct ibv_pd *p) { return ((struct sr_pd *)p)->real; }
/* A parent domain, or NULL if p is none. */
static inline struct sr_pd *sr_parent_domain(struct ibv_pd *p)
{
	struct sr_pd *pd = (struct sr_pd *)p;
	return pd->obj.alias == SR_ALIAS_PARENT ? pd : NULL;
}
/* An object made on p (a QP, SRQ, AH) uses p's protection domain, and p
 * too if p is a parent domain or an import (domain.c: an unimported PD
 * goes with its last use). */
void sr_pd_use(struct ibv_pd *p, int delta);
static inline struct sr_mr *to_smr(struct ibv_mr *m) { return ((struct sr_mr *)m)->real; }
static inline struct sr_mw *to_smw(struct ibv_mw *m) { return (struct sr_mw *)m; }
static inline struct sr_srq *to_ssrq(struct ibv_srq *s) { return (struct sr_srq *)s; }
static inline struct sr_ah *to_sah(struct ibv_ah *a) { return (struct sr_ah *)a; }
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
static inline struct sr_dm *to_sdm(struct ibv_dm *d) { return ((struct sr_dm *)d)->real; }

uint64_t sr_now_ns(void);
/* The device clock that completion timestamps and ibv_query_rt_values_ex
 * read: CLOCK_MONOTONIC in ns, a 1 GHz core clock (hca_core_clock is in
 * kHz); the mask is mlx5's, 63 bits (292 years before it wraps). */
#define sr_dev_clock_ns() sr_now_ns()
#define SR_HCA_CORE_CLOCK_KHZ 1000000ull
#define SR_TIMESTAMP_MASK 0x7fffffffffffffffull

/* Per-thread scratch buffers (receive staging, send batches) that are freed
 * when the thread exits.  Returns NULL when out of memory. */
enum sr_tls_slot { SR_TLS_RX, SR_TLS_TX_BATCH, SR_TLS_RESP_BATCH, SR_TLS_NSLOTS };
/* This thread's buffer for slot (size bytes, the same at every call for a
 * slot; not zeroed: a user keeps state in it only after setting it), or
 * NULL without memory. */
void *sr_tls_buf(enum sr_tls_slot slot, size_t size);
void sr_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern int sr_debug;
#define SR_DBG(...) do { if (sr_debug) sr_log(__VA_ARGS__); } while (0)

/* device.c */
struct sr_device **sr_devices(int *num);
struct ibv_context *sr_open_device(struct ibv_device *dev);
int sr_close_device(struct ibv_context *c);
/* The verbs part of a context or an imported one (its ops, its files). */
void sr_ctx_init_verbs(struct verbs_context *v, struct ibv_device *ibdev, int cmd_fd, int async_fd);
/* The open context whose cmd_fd is that file, counted one more open
 * (sr_ctx_release), or NULL; and the end of an open of ctx (the last
 * one destroys its objects). */
struct sr_context *sr_ctx_find(dev_t fdev, ino_t fino);
void sr_ctx_release(struct sr_context *ctx);
/* ibv_close_device of an imported context (import.c) */
int sr_close_import(struct ibv_context *c);
int sr_query_device(struct ibv_context *c, struct ibv_device_attr *a);
int sr_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
		       struct ibv_device_attr_ex *a, size_t size);
int sr_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a);
int sr_query_rt_values(struct ibv_context *c, struct ibv_values_ex *v);
int sr_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid);
int sr_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index, struct ibv_gid_entry *e);
int sr_query_pkey(struct ibv_context *c, uint8_t port, int index, __be16 *pkey);
int sr_gid_to_sockaddr(struct sr_context *ctx, const union ibv_gid *gid, struct sockaddr_in6 *sa);
void sr_post_async_event(struct sr_context *ctx, enum ibv_event_type type, void *obj);
/* The device is gone for ctx (why: for the log): every QP to ERR with
 * IBV_EVENT_QP_FATAL (outstanding work completes with WR_FLUSH_ERR), then
 * IBV_EVENT_DEVICE_FATAL, as rdma-core reports a dead device.  Once. */
void sr_ctx_fatal(struct sr_context *ctx, const char *why);
int sr_get_async_event(struct ibv_context *c, struct ibv_async_event *ev);
void sr_ack_async_event(struct ibv_async_event *ev);
/* Forget unread async events naming obj (a QP or SRQ being destroyed). */
void sr_purge_async_events(struct sr_context *ctx, void *obj);

/* mr.c */
/* A memory key (lkey = rkey, iWARP STag) is 32 random bits: the upper 24
 * name the MR or MW (its "tag", unique among the context's live keys),
 * the low 8 are the key byte a memory window's bind changes, as the verbs
 * have it.  The key holds no table index, so a peer that saw keys learns
 * nothing of the next; the key table maps a tag to its slot. */
struct sr_key_ent {
	uint32_t tag;  /* key >> 8 */
	uint32_t slot; /* 0 = empty entry */
};
/* The slot of the region or window whose key has key's upper 24 bits, 0
 * if none (caller holds mr_lock): the full key is still to be compared
 * with the object's.  Open addressing, linear probing, load <= 1/2; the
 * tags are random, so their low bits index the map evenly. */
static inline uint32_t sr_key_slot(const struct sr_context *ctx, uint32_t key)
{
	uint32_t tag = key >> 8, mask = ctx->key_map_mask;

	if (!ctx->key_map)
		return 0;
	for (uint32_t i = tag & mask;; i = (i + 1) & mask) {
		const struct sr_key_ent *e = &ctx->key_map[i];
		if (!e->slot)
			return 0;
		if (e->tag == tag)
			return e->slot;
	}
}
/* The key table (caller holds mr_lock for writing): a free slot for an MR
 * or an MW (0 when full); a fresh key for slot idx, entered in the map
 * (0 when out of memory): unlike the slot's last key, the last
 * SR_KEY_RETIRED keys forgotten and every live key's tag; and a key's
 * removal from the map (its slot's object stops being reachable by it). */
uint32_t sr_key_slot_alloc(struct sr_context *ctx);
uint32_t sr_key_make(struct sr_context *ctx, uint32_t idx);
void sr_key_forget(struct sr_context *ctx, uint32_t key);
struct ibv_pd *sr_alloc_pd(struct ibv_context *c);
int sr_dealloc_pd(struct ibv_pd *pd);
struct ibv_mr *sr_reg_mr(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova, unsigned int access);
/* An implicit on-demand-paging region covers the address space. */
static inline bool sr_mr_implicit(const void *addr, size_t len)
{
	return !addr && len == SIZE_MAX;
}
/* odp.c: on-demand paging: the device's odp_caps; ibv_advise_mr */
void sr_odp_caps(const struct sr_device *dev, struct ibv_odp_caps *c);
uint32_t sr_odp_xrc_caps(const struct sr_device *dev);
int sr_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags, struct ibv_sge *sg,
		 uint32_t num_sge);
struct ibv_mr *sr_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t offset, size_t len, unsigned int access);
int sr_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t len, int access);
int sr_dereg_mr(struct ibv_mr *mr);
/* Look up a key (caller holds ctx->mr_lock for reading). Checks PD, access
 * bits and that [va, va+len) lies inside the region. Returns the host
 * address for va, or NULL. */
uint8_t *sr_mr_lookup(struct sr_context *ctx, uint32_t key, bool remote, struct sr_pd *pd,
		      uint64_t va, uint64_t len, unsigned int need_access);
/* The same, telling why nothing was found, as rxe tells its local errors
 * apart: -EINVAL no region by that key (in that PD, with that access),
 * -EFAULT one, but [va, va+len) is not inside it; 0 and *host set. */
int sr_mr_find(struct sr_context *ctx, uint32_t key, bool remote, struct sr_pd *pd, uint64_t va, uint64_t len,
	       unsigned int need_access, uint8_t **host);
/* Remote access through an rkey, as the responder makes it: an MR's key
 * (in the QP's PD) or a bound memory window's (same PD; a type 2 window
 * only from the QP it is bound to).  Caller holds ctx->mr_lock for
 * reading.  The MR path is sr_mr_lookup's; windows are looked at only
 * when no region has the key. */
uint8_t *sr_mw_lookup(struct sr_qp *qp, uint32_t key, uint64_t va, uint64_t len, unsigned int need_access);
static inline uint8_t *sr_rkey_lookup(struct sr_qp *qp, uint32_t key, uint64_t va, uint64_t len,
				      unsigned int need_access)
{
	struct sr_context *ctx = qp->rctx;
	uint8_t *p = sr_mr_lookup(ctx, key, true, qp->rpd, va, len, need_access);

	if (!p && ctx->mw_tab)
		p = sr_mw_lookup(qp, key, va, len, need_access);
	return p;
}
/* Invalidate a region's STag as siw does for Send with Invalidate (a
 * user MR's too): the key stops working, the MR stays registered until
 * ibv_dereg_mr.  0, -EINVAL (no such key) or -EACCES (another PD).
 * Takes ctx->mr_lock. */
int sr_mr_invalidate(struct sr_context *ctx, uint32_t key, struct sr_pd *pd);
/* Copy a peer's data into application memory as a NIC's DMA would: each
 * byte written once, the last ones last and in address order.  memcpy may
 * store a byte twice (glibc copies 64 bytes as two overlapping 64-byte
 * stores), so an application polling the end of its buffer (ib_write_lat,
 * riostream) could see the data arrive, write there, and have its write
 * undone by the copy's second store.  The bulk goes by memcpy; the last
 * SR_PLACE_TAIL bytes after it in ascending order, the final 8 one by one. */
#define SR_PLACE_TAIL 64u
typedef uint64_t __attribute__((may_alias, aligned(1))) sr_u64_unaligned;
static inline void sr_place(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	size_t i = n > SR_PLACE_TAIL ? n - SR_PLACE_TAIL : 0;

	sr_dma_begin();
	if (i)
		memcpy(d, s, i);
	/* the compiler keeps the bulk's stores before these volatile ones */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	for (; i + 16 <= n; i += 8) {
		uint64_t v;
		memcpy(&v, s + i, 8);
		*(volatile sr_u64_unaligned *)(d + i) = v;
	}
	for (; i < n; i++)
		((volatile uint8_t *)d)[i] = s[i];
	sr_dma_end();
}

/* Copy between a local SGE list (lkeys) and a flat buffer. offset is into
 * the SGE list's total length. Returns 0 or -EFAULT (bad lkey / bounds,
 * or with SR_COPY_TO_SGE_CHECKED memory no longer mapped).  Caller holds
 * mr_lock for reading. */
enum {
	SR_COPY_FROM_SGE = 0,
	SR_COPY_TO_SGE = 1,
	/* through the kernel (a system call per piece): a page the application
	 * unmapped while still registered fails the copy, not the process */
	SR_COPY_TO_SGE_CHECKED = 2,
};
int sr_sge_copy(struct sr_context *ctx, struct sr_pd *pd, const struct ibv_sge *sge, uint32_t num_sge,
		uint64_t offset, void *buf, uint64_t len, int how);

/* domain.c: thread domains, parent domains, and the rings' memory */
struct ibv_td *sr_alloc_td(struct ibv_context *c, struct ibv_td_init_attr *attr);
int sr_dealloc_td(struct ibv_td *td);
struct ibv_pd *sr_alloc_parent_domain(struct ibv_context *c, struct ibv_parent_domain_init_attr *attr);
/* ibv_dealloc_pd of a parent domain (its object claimed) */
int sr_dealloc_parent_domain(struct sr_pd *pd, struct sr_obj *o);
/* size bytes for a ring of an object made on pd (NULL: none), zeroed:
 * from a parent domain's allocator (alignment: a page) unless it has
 * none or says IBV_ALLOCATOR_USE_DEFAULT; *m says which, for
 * sr_ring_free.  NULL without memory. */
void *sr_ring_alloc(struct ibv_pd *pd, size_t size, uint64_t type, struct sr_ring_mem *m);
void sr_ring_free(void *p, const struct sr_ring_mem *m);

/* import.c: ibv_import_device and ibv_import_pd, _mr, _dm */
struct ibv_context *sr_import_device(int cmd_fd);
struct ibv_pd *sr_import_pd(struct ibv_context *c, uint32_t handle);
void sr_unimport_pd(struct ibv_pd *pd);
struct ibv_mr *sr_import_mr(struct ibv_pd *pd, uint32_t handle);
void sr_unimport_mr(struct ibv_mr *mr);
struct ibv_dm *sr_import_dm(struct ibv_context *c, uint32_t handle);
void sr_unimport_dm(struct ibv_dm *dm);
/* Destroying an import (o claimed, of type t) destroys its object, as
 * the kernel's command on the handle does, and then the import. */
int sr_destroy_import(struct sr_obj *o, enum sr_obj_type t);

/* xrc.c: XRC domains, XRC SRQs' numbers, ibv_open_qp */
struct ibv_xrcd *sr_open_xrcd(struct ibv_context *c, struct ibv_xrcd_init_attr *attr);
int sr_close_xrcd(struct ibv_xrcd *xrcd);
/* An XRC SRQ joins its domain (a number given) / leaves it. */
void sr_xrc_srq_add(struct sr_srq *srq);
void sr_xrc_srq_del(struct sr_srq *srq);
/* A TGT QP joins its domain (one handle); a handle of it goes: true if
 * that was the last, and the QP has left the domain. */
void sr_xrc_tgt_add(struct sr_qp *qp);
bool sr_xrc_tgt_put(struct sr_qp *qp);
/* The SRQ of tgt's domain numbered srq_num, or NULL (tgt->lock held). */
struct sr_srq *sr_xrc_srq_find(struct sr_qp *tgt, uint32_t srq_num);
struct ibv_qp *sr_open_qp(struct ibv_context *c, struct ibv_qp_open_attr *attr);
int sr_get_srq_num(struct ibv_srq *srq, uint32_t *num);
/* An ibv_open_qp handle: operates on qp; destroying the last handle of
 * a TGT QP destroys it. */
struct sr_qp_open {
	struct ibv_qp ibqp;
	struct sr_obj obj;
	struct sr_qp *qp;
};

/* dm.c */
struct ibv_dm *sr_alloc_dm(struct ibv_context *c, struct ibv_alloc_dm_attr *attr);
int sr_free_dm(struct ibv_dm *dm);
/* The copy verbs of a DM (an allocated one's or an import's). */
void sr_dm_ops(struct ibv_dm *dm);
/* The DM leaves its context (freed, or its context closed; handle.c's
 * lock held): its bytes are the device's again, and what the application
 * still holds of it covers none of them. */
void sr_dm_forget(struct sr_dm *dm);

/* mw.c: memory windows (rxe's), and the local operations of the send
 * queue (IBV_WR_BIND_MW, IBV_WR_LOCAL_INV). */
struct ibv_mw *sr_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int sr_dealloc_mw(struct ibv_mw *mw);
int sr_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind);
static inline bool sr_wr_is_local(enum ibv_wr_opcode op)
{
	return op == IBV_WR_BIND_MW || op == IBV_WR_LOCAL_INV;
}
/* Execute a BIND_MW or LOCAL_INV WQE when the send queue reaches it
 * (qp->lock held, ctx->mr_lock not held).  Returns its completion status:
 * SUCCESS, MW_BIND_ERR or LOC_QP_OP_ERR, as rxe. */
enum ibv_wc_status sr_local_op(struct sr_qp *qp, const struct sr_send_wqe *w);
/* A Send with Invalidate's rkey, at the receiving QP (qp->lock held,
 * ctx->mr_lock not held): 0, or -EINVAL/-EACCES when it names nothing
 * this QP may invalidate. */
int sr_rkey_invalidate_remote(struct sr_qp *qp, uint32_t rkey);

/* cq.c */
struct ibv_comp_channel *sr_create_comp_channel(struct ibv_context *c);
int sr_destroy_comp_channel(struct ibv_comp_channel *ch);
struct ibv_cq *sr_create_cq(struct ibv_context *c, int cqe, void *cq_context, struct ibv_comp_channel *ch, int vec);
struct ibv_cq_ex *sr_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *attr);
int sr_destroy_cq(struct ibv_cq *cq);
int sr_resize_cq(struct ibv_cq *cq, int cqe);
int sr_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int sr_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int sr_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context);
void sr_ack_cq_events(struct ibv_cq *cq, unsigned int n);
/* Add a completion; signals the channel if armed.  Returns false on overflow
 * (the CQ then raises IBV_EVENT_CQ_ERR). */
bool sr_cq_push(struct sr_cq *cq, const struct ibv_wc *wc, bool solicited);
void sr_cq_clean(struct sr_cq *cq, uint32_t qpn);

/* The application's SGE i, read byte-wise: callers may hand in arrays
 * that are not 8-byte aligned (libiscsi's iSER keeps its receive SGE in a
 * packed descriptor), which the hardware providers read without a fault
 * on x86 and so must we (UBSan: misaligned load). */
static inline struct ibv_sge sr_app_sge(const struct ibv_sge *list, int i)
{
	struct ibv_sge s;

	memcpy(&s, (const char *)list + (size_t)i * sizeof(s), sizeof(s));
	return s;
}

/* qp.c */
struct ibv_qp *sr_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
struct ibv_qp *sr_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *attr);
int sr_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
int sr_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init);
int sr_destroy_qp(struct ibv_qp *qp);
int sr_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int sr_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
/* A receive ring (a QP's RQ or an SRQ's): 0 or ENOMEM; post one work
 * request, 0 or an errno (the owner's lock held). */
int sr_rq_init(struct sr_rq *rq, struct ibv_pd *pd, uint64_t type, uint32_t max_wr, uint32_t max_sge);
int sr_rq_post(struct sr_rq *rq, const struct ibv_recv_wr *wr);
/* Flush the SQ's WQEs with IBV_WC_WR_FLUSH_ERR (qp->lock held). */
void sr_flush_sq(struct sr_qp *qp);
/* May a QP post this opcode (on this transport)?  And does its type carry
 * it (else it completes with LOC_QP_OP_ERR)? */
bool sr_qp_opcode_ok(struct sr_qp *qp, enum ibv_wr_opcode op);
bool sr_qp_opcode_carried(struct sr_qp *qp, enum ibv_wr_opcode op);
/* Fill a BIND_MW or LOCAL_INV WQE, served locally in SQ order. */
void sr_local_wqe_fill(struct sr_send_wqe *w, enum ibv_wr_opcode op, uint32_t inv_rkey, const struct ibv_mw *mw,
		       uint32_t rkey, const struct ibv_mw_bind_info *bi);
/* qp_ex.c: the ibv_wr_* entry points of a QP created with
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS */
void sr_qp_ex_init(struct sr_qp *qp);
/* srq.c */
struct ibv_srq *sr_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
struct ibv_srq *sr_create_srq_ex(struct ibv_context *c, struct ibv_srq_init_attr_ex *attr);
int sr_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask);
int sr_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr);
int sr_destroy_srq(struct ibv_srq *srq);
int sr_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
/* ah.c */
struct ibv_ah *sr_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int sr_destroy_ah(struct ibv_ah *ah);
int sr_av_from_ah_attr(struct sr_context *ctx, const struct ibv_ah_attr *a, struct sr_av *av);
/* Move a QP to the error state from inside the transport (qp->lock held):
 * flushes work requests, raises the async event. */
void sr_qp_to_error(struct sr_qp *qp, enum ibv_event_type ev);
/* Complete the send WQEs at the SQ tail that are DONE (qp->lock held). */
void sr_sq_complete(struct sr_qp *qp);
void sr_sq_check_drained(struct sr_qp *qp);
/* Take the next receive WQE (from SRQ or RQ) into out (max_sge entries).
 * Returns false when none is posted. qp->lock held. */
bool sr_rq_take(struct sr_qp *qp, struct sr_recv_wqe *out);
/* The same, only if the next WQE holds need bytes: one too short stays
 * posted (a UD datagram that does not fit is dropped, IBTA's class D). */
enum sr_rq_take {
	SR_RQ_TAKEN,
	SR_RQ_EMPTY,
	SR_RQ_SHORT
};
enum sr_rq_take sr_rq_take_fit(struct sr_qp *qp, struct sr_recv_wqe *out, uint64_t need);
void sr_flush_qp(struct sr_qp *qp);

/* Whether the timer pass visits qp (qp->lock held): then a deadline moved
 * later needs no arming; the thread, due to look by the earlier one,
 * finds the later one then. */
static inline bool sr_qp_timer_set(struct sr_qp *qp)
{
	return atomic_load_explicit(&qp->timer_slot, memory_order_relaxed) != 0;
}

/* qp_table.c: the context's QPs by number */
struct sr_qp *sr_ctx_find_qp(struct sr_context *ctx, uint32_t qpn); /* ctx->lock held */
int sr_ctx_add_qp(struct sr_context *ctx, struct sr_qp *qp); /* 0 or ENOMEM */
void sr_ctx_remove_qp(struct sr_context *ctx, struct sr_qp *qp);

/* mcast_attach.c: UD multicast groups of a context (attach/detach as rxe). */
int sr_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
int sr_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
/* A datagram with BTH DestQP 0xFFFFFF that the daemon passed us (meta dst
 * = the group): to every QP of ctx attached to that group (no lock held). */
void sr_mcast_deliver(struct sr_context *ctx, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len);
/* Free the context's group records (ibv_close_device; the daemon drops
 * the memberships with the connection). */
void sr_mcast_ctx_free(struct sr_context *ctx);

extern const struct sr_transport_ops sr_roce_ops;
extern const struct sr_transport_ops sr_iwarp_ops;

#endif
