/* rsockets: rdma-core's socket-like API over RDMA, built on the public
 * rdma_cm and verbs APIs only (no librdmacm internals).
 *
 * Files:
 *   rsocket.h   the wire protocol (rdma-core's, see below) and struct rsocket
 *   rsocket.c   descriptors, connection setup and teardown (rdma_cm events),
 *               socket options, names, keepalive
 *   rs_data.c   the data path: buffers, work requests, completions,
 *               credits, waiting, rsend/rrecv and their families, riomap
 *   rs_poll.c   rpoll and rselect over rsockets and ordinary descriptors
 *   rs_dgram.c  datagram rsockets (SOCK_DGRAM): UD QPs found through a UDP
 *               exchange, rdma-core's format (described there)
 *
 * The protocol, as rdma-core's librdmacm/docs/rsocket and rsocket.c define
 * it, so that a softrdma rsocket can talk to an rdma-core one:
 *
 *  - Connection setup is rdma_cm over RDMA_PS_TCP (the port is the TCP-like
 *    port); the REQ and the REP carry struct rs_conn_data as private data.
 *  - Each side owns a receive buffer (rbuf), split in two halves, and a small
 *    "target" area the peer RDMA-writes into: two struct rs_sge describing
 *    where the peer's next data may go (the target SGL), then the target
 *    iomap (riowrite destinations).  The conn data gives the peer the target
 *    area and the first half of rbuf; the second half and every later one is
 *    advertised by an RDMA write of one rs_sge into the peer's target SGL.
 *  - Every protocol message is a 32-bit immediate of an RDMA write with
 *    immediate (a zero-length write when there is nothing to place): the
 *    op in bits 31:29, its argument in bits 28:0 (enum rs_op).
 *    Data:      op DATA, argument = bytes placed in the current target SGE.
 *    Credits:   op SGL,  argument = the sender's data sequence number up to
 *               which the receiver has room (16 bits significant), written
 *               together with a target SGE update or alone.
 *    Iomap:     op IOMAP_SGL, argument = index of the updated iomap entry.
 *    Control:   op CTRL, argument = DISCONNECT / SHUTDOWN (KEEPALIVE goes
 *               as a plain zero-length RDMA write, no immediate).
 *  - iWARP has no write with immediate: there every message is an RDMA
 *    write (if it places data) followed by a 4-byte inline send of the
 *    same 32 bits (rs->msg_send).
 *  - rs_sge contents written into the peer are in the peer's byte order
 *    (RS_CONN_FLAG_NET says the peer is big-endian); rs_conn_data is in
 *    network order.
 */
#ifndef SR_RSOCKET_H
#define SR_RSOCKET_H

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

/* ---- the wire ----------------------------------------------------------- */

#define RS_PROTO_VERSION 1
#define RS_CONN_FLAG_NET (1 << 0)   /* sender is big-endian */
#define RS_CONN_FLAG_IOMAP (1 << 1) /* target_iomap_size is valid */

struct rs_sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};

struct rs_iomap {
	uint64_t offset;
	struct rs_sge sge;
};

struct rs_conn_data {
	uint8_t version;
	uint8_t flags;
	__be16 credits; /* receive credits: the sender's rq size */
	uint8_t reserved[3];
	uint8_t target_iomap_size; /* rs_value_to_scale(entries, 8) */
	struct rs_sge target_sgl;  /* address, key and entry count of the target SGL */
	struct rs_sge data_buf;	   /* the first receive buffer (half of rbuf) */
};

_Static_assert(sizeof(struct rs_sge) == 16, "rs_sge is 16 bytes on the wire");
_Static_assert(sizeof(struct rs_iomap) == 24, "rs_iomap is 24 bytes on the wire");
_Static_assert(sizeof(struct rs_conn_data) == 40, "rs_conn_data is 40 bytes on the wire");

enum rs_op {
	RS_OP_DATA = 0,
	RS_OP_RSVD_DATA_MORE = 1,
	RS_OP_WRITE = 2, /* riowrite: a local work-request tag, never sent */
	RS_OP_RSVD_DRA_MORE = 3,
	RS_OP_SGL = 4,
	RS_OP_RSVD = 5,
	RS_OP_IOMAP_SGL = 6,
	RS_OP_CTRL = 7,
};

enum rs_ctrl {
	RS_CTRL_DISCONNECT = 0,
	RS_CTRL_KEEPALIVE = 1,
	RS_CTRL_SHUTDOWN = 2,
};

static inline uint32_t rs_msg(enum rs_op op, uint32_t data)
{
	return ((uint32_t)op << 29) | (data & 0x1fffffff);
}
static inline enum rs_op rs_msg_op(uint32_t msg)
{
	return (enum rs_op)(msg >> 29);
}
static inline uint32_t rs_msg_data(uint32_t msg)
{
	return msg & 0x1fffffff;
}

#define RS_SGL_SIZE 2	   /* entries in the target SGL */
#define RS_QP_CTRL_SIZE 4  /* control messages in flight at most */
#define RS_MAX_CTRL_MSG 16 /* largest control payload: one rs_sge */
#define RS_SNDLOWAT 2048   /* room needed in sbuf to start a send */
#define RS_OLAP_START_SIZE 2048
#define RS_MAX_TRANSFER 65536 /* largest single RDMA write */
#define RS_QP_MIN_SIZE 16
#define RS_QP_MAX_SIZE 0xfffe
#define RS_MSG_SIZE 4 /* an iWARP message send */

/* rdma-core's defaults (rsocket(7): /etc/rdma/rsocket/..., rs_config.c) */
#define RS_DEF_SQSIZE 384
#define RS_DEF_RQSIZE 384
#define RS_DEF_INLINE 64
#define RS_DEF_MEM (1u << 17)
#define RS_DEF_WMEM (1u << 17)

/* the immediate's op/argument is the low 32 bits of a work request id */
#define RS_WR_ID_RECV (1ull << 63)
#define RS_WR_ID_MSG_SEND (1ull << 62) /* the send half of an iWARP message */

/* ---- one rsocket ---------------------------------------------------------- */

enum rs_state {
	RS_INIT,
	RS_BOUND,
	RS_LISTENING,
	RS_RESOLVING_ADDR,
	RS_RESOLVING_ROUTE,
	RS_CONNECTING,	  /* REQ sent */
	RS_ACCEPTING,	  /* REP sent, waiting for the RTU */
	RS_CONNECTED,	  /* data may flow (see readable/writable) */
	RS_DISCONNECTED,  /* orderly end: queued data still readable, then EOF */
	RS_CONNECT_ERROR, /* connection setup failed: err says why */
	RS_ERROR,	  /* the connection broke: err says why */
};

struct rs_rmsg {
	uint32_t op;
	uint32_t data;
};

struct rs_iomap_mr {
	struct rs_iomap_mr *next;
	uint64_t offset;
	struct ibv_mr *mr;
	int index;    /* entry in the peer's target iomap, -1: local only */
	bool pending; /* not yet written to the peer */
};

struct rs_dgram;

struct rsocket {
	int index;	     /* the descriptor the application holds: our epoll fd */
	int domain;	     /* AF_INET or AF_INET6 */
	int type;	     /* SOCK_STREAM or SOCK_DGRAM, fixed at creation */
	struct rs_dgram *dg; /* SOCK_DGRAM: everything else of it (rs_dgram.c) */
	int users;	     /* SOCK_DGRAM: calls under way (atomic; rs_dgram.c) */
	bool closing;	     /* rclose has begun: calls under way return EBADF */
	int kick_fd;	     /* eventfd in the epoll set: wakes a sleeping thread */

	/* lock guards everything below.  One thread at a time sleeps in
	 * poll() on index (sleeping); others wait on cond for it. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool sleeping;
	int pollers; /* threads asleep in rpoll on index */

	enum rs_state state;
	bool readable, writable; /* directions still open (CONNECTED) */
	bool local_wr_shut;	 /* we shut our sending side (EPIPE, not ECONNRESET) */
	int err;		 /* SO_ERROR */
	int fs_flags;		 /* F_GETFL: O_NONBLOCK */
	int fd_flags;		 /* F_GETFD */
	uint64_t last_cm_check;	 /* us; the CM channel is polled at most every ms while spinning */

	/* options, fixed once the connection's resources exist */
	uint32_t sbuf_size, rbuf_size;
	uint16_t sq_size, rq_size, sq_inline;
	uint16_t target_iomap_size;
	uint64_t so_opts, tcp_opts, ipv6_opts; /* boolean options, bit = optname */
	int ip_tos;
	unsigned keepalive_time; /* seconds */
	int retries;

	/* rdma_cm */
	struct rdma_event_channel *cm_ch;
	struct rdma_cm_id *cm_id;
	struct sockaddr_storage dst; /* rconnect's destination */

	/* listener: accepted connections not yet returned by raccept */
	struct rsocket *acc_head, *acc_tail, *acc_next;

	/* connection resources */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cq_ch;
	struct ibv_cq *cq;
	bool cq_armed;
	bool msg_send; /* iWARP: messages as sends */
	bool swap_sgl; /* the peer's byte order differs */

	/* sending */
	uint8_t *sbuf; /* sbuf_size bytes of staging ring, then control buffers */
	struct ibv_mr *smr;
	uint32_t sbuf_head; /* where the next staged bytes go */
	uint32_t sbuf_bytes_avail;
	int sqe_avail; /* send WRs for data (control ones are counted apart) */
	unsigned ctrl_seqno, ctrl_max_seqno;
	uint16_t sseq_no, sseq_comp; /* data messages sent / allowed */
	struct rs_sge remote_sgl;    /* the peer's target SGL */
	int remote_sge;		     /* its entry our next buffer update goes to */
	struct rs_sge remote_iomap;  /* the peer's target iomap (length = entries) */

	/* the target area the peer writes into */
	void *target_buf;
	struct ibv_mr *target_mr;
	struct rs_sge *target_sgl; /* written by the peer: access with atomics */
	struct rs_iomap *target_iomap;
	int target_sge; /* entry our next data goes to */

	/* receiving */
	uint8_t *rbuf; /* rbuf_size bytes, then rq_size message slots (iWARP) */
	struct ibv_mr *rmr;
	uint32_t rbuf_offset;	     /* next byte to read */
	uint32_t rbuf_free_offset;   /* next half to advertise */
	uint32_t rbuf_bytes_avail;   /* read, not yet advertised */
	uint16_t rseq_no, rseq_comp; /* data messages consumed / credit point */
	struct rs_rmsg *rmsg;	     /* rq_size + 1 slots */
	int rmsg_head, rmsg_tail;
	int rbuf_msg_index; /* iWARP: next message slot to post */

	/* riomap */
	struct rs_iomap_mr *iomaps;
	uint8_t *iomap_used; /* remote_iomap.length flags */
	bool iomap_pending;

	/* keepalive service: ka_next under rs_ka_lock, ka_deadline under
	 * both rs_ka_lock and lock */
	struct rsocket *ka_next;
	uint64_t ka_deadline; /* us */
};

/* ---- shared between the files --------------------------------------------- */

/* rs_config.c: the per-host defaults of rdma-core's files (rsocket(7)) */
struct rs_config {
	uint32_t polling_time_us; /* spin this long before sleeping */
	int wake_up_interval_ms;  /* longest single sleep (a safety net) */
	uint16_t inline_default, sqsize_default, rqsize_default, iomap_size;
	uint32_t mem_default, wmem_default;
};
const struct rs_config *rs_config(void);
#define RS_POLLING_TIME_US (rs_config()->polling_time_us)
#define RS_WAKE_UP_INTERVAL (rs_config()->wake_up_interval_ms)

struct rsocket *rs_lookup(int fd);
uint64_t rs_now_us(void);

/* rsocket.c */
void rs_cm_progress(struct rsocket *rs, bool force);
struct rsocket *rs_lookup_dgram(int fd);
int rs_put_int(void *optval, socklen_t *optlen, int v);
uint32_t rs_sockbuf_size(int v);

/* rs_dgram.c: SOCK_DGRAM.  ds_enter takes a datagram rsocket (NULL if fd
 * is none) for one call, locked; ds_leave ends that call, keeping errno.
 * rclose waits for the calls under way (ds_close). */
struct rsocket *ds_enter(int fd);
ssize_t ds_leave(struct rsocket *rs, ssize_t ret);
void ds_unref(struct rsocket *rs);
int ds_create(struct rsocket *rs);
void ds_close(struct rsocket *rs);
int ds_bind(struct rsocket *rs, const struct sockaddr *addr, socklen_t addrlen);
int ds_connect(struct rsocket *rs, const struct sockaddr *addr, socklen_t addrlen);
int ds_shutdown(struct rsocket *rs, int how);
ssize_t ds_sendv(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags, const struct sockaddr *to,
		 socklen_t tolen);
ssize_t ds_recvv(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags, struct sockaddr *from,
		 socklen_t *fromlen, int *msg_flags);
int ds_getsockname(struct rsocket *rs, struct sockaddr *addr, socklen_t *addrlen);
int ds_getpeername(struct rsocket *rs, struct sockaddr *addr, socklen_t *addrlen);
int ds_setsockopt(struct rsocket *rs, int level, int optname, const void *optval, socklen_t optlen);
int ds_getsockopt(struct rsocket *rs, int level, int optname, void *optval, socklen_t *optlen);
void ds_progress(struct rsocket *rs, bool force);
bool ds_arm(struct rsocket *rs);
short ds_poll_events(struct rsocket *rs, short events);

/* rs_data.c */
int rs_create_ep(struct rsocket *rs);
int rs_epoll_add(struct rsocket *rs, int fd);
uint16_t rs_round_iomap_size(int value);
void rs_free_ep(struct rsocket *rs);
void rs_format_conn_data(struct rsocket *rs, struct rs_conn_data *c);
int rs_save_conn_data(struct rsocket *rs, const void *pdata, size_t len);
void rs_progress(struct rsocket *rs, bool force_cm);
void rs_drain_cq(struct rsocket *rs);
bool rs_arm(struct rsocket *rs);
int rs_wait(struct rsocket *rs, bool nonblock, bool (*test)(struct rsocket *rs), int timeout_ms);
void rs_kick(struct rsocket *rs);
void rs_drain_kick(struct rsocket *rs);
bool rs_can_send(struct rsocket *rs);
bool rs_have_rdata(struct rsocket *rs);
bool rs_ctrl_avail(struct rsocket *rs);
bool rs_all_sends_done(struct rsocket *rs);
int rs_post_ctrl(struct rsocket *rs, enum rs_ctrl ctrl);
int rs_post_keepalive(struct rsocket *rs);
void rs_drop_iomaps(struct rsocket *rs);
short rs_poll_events(struct rsocket *rs, short events);

static inline bool rs_nonblocking(const struct rsocket *rs, int flags)
{
	return (rs->fs_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

static inline int rs_fail(int err)
{
	errno = err;
	return -1;
}

#endif
