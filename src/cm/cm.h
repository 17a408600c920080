/* librdmacm internals: rdma_cm ids, event channels, devices, and the IB CM
 * protocol engine that connects them over RoCEv2 (MADs on QP1).
 *
 * Files:
 *   cma.c      the rdma_cm API (ids, channels, events, connect/accept/...)
 *   ib_cm.c    IB CM on RoCE: building, sending, receiving and retrying
 *              REQ/REP/RTU/REJ/MRA/DREQ/DREP/SIDR MADs; the CM thread
 *   cm_addr.c  devices, address -> device/GID, route, rdma_getaddrinfo
 *   cm_mad.c   the MAD codec (bit layouts; no state)
 *   iw_cm.c    rdma_cm on Soft-iWARP devices: TCP listen/connect on the
 *              rdma_cm port, the MPA Request/Reply exchange, the socket
 *              handed to the QP, disconnection through the QP
 *
 * Threading: one mutex (sr_cm.lock) guards every id, channel and event
 * list.  One CM thread per process reads the softrdmad connection (MADs
 * routed to this process; only when a RoCE device is configured), accepts
 * iWARP TCP connections and reads their MPA frames, and runs the
 * retransmission and MPA timers.  API calls
 * take the lock, never hold it across a daemon request (the daemon
 * client's packet callback takes it) nor across a blocking read of an
 * event channel. */
#ifndef SR_CM_CM_H
#define SR_CM_CM_H

#include <endian.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include "cm/cm_mad.h"
#include "iwarp/wire/iwarp_wire.h"

#define SR_CM_MAX_DEVS 32
#define SR_CM_MAX_GIDS 32

/* rdma_cm's defaults for RoCE, as the kernel's cma.c has them */
#define SR_CMA_RESPONSE_TIMEOUT 20 /* 4.096us * 2^20 = 4.3 s */
#define SR_CMA_MAX_CM_RETRIES 15
#define SR_CMA_PACKET_LIFETIME 18 /* RoCE: 2^18 * 4.096us, ~1.07 s */
#define SR_CMA_QKEY 0x01234567u	  /* RDMA_UDP_QKEY */
#define SR_CMA_HOP_LIMIT 64

struct sr_cm_dev {
	struct ibv_context *verbs;
	struct ibv_pd *pd; /* default PD, allocated on first use */
	uint64_t guid;	   /* node GUID, network order */
	bool iwarp;
	bool crc; /* ICRC on (the device's config) */
	enum ibv_mtu active_mtu;
	uint8_t max_rd_atomic, max_dest_rd_atomic;
};

struct sr_cm_event {
	struct rdma_cm_event ev; /* first: rdma_cm_event * <-> sr_cm_event * */
	struct sr_cm_id *owner;	 /* id whose events_pending counts it */
	struct sr_cm_event *next;
	uint8_t pdata[256];
};

struct sr_cm_chan {
	struct rdma_event_channel ch; /* ch.fd: read end, one byte per event */
	int wfd;		      /* -1 once the channel is destroyed */
	struct sr_cm_event *head, *tail;
	/* threads inside rdma_get_cm_event: a channel destroyed under them
	 * lives (and keeps ch.fd open) until the last of them leaves */
	unsigned readers;
	bool dead;
	struct sr_cm_chan *next_live; /* the live channels (cma.c) */
};

enum sr_cm_state {
	CM_IDLE,
	CM_BOUND,
	CM_ADDR_RESOLVED,
	CM_ROUTE_RESOLVED,
	CM_LISTEN,
	CM_REQ_SENT, /* active: REQ out, waiting for REP */
	CM_REP_RCVD, /* active, no QP: CONNECT_RESPONSE given, RTU on rdma_establish */
	CM_REQ_RCVD, /* passive: CONNECT_REQUEST given, waiting for accept/reject */
	CM_REP_SENT, /* passive: REP out, waiting for RTU */
	CM_ESTABLISHED,
	CM_DREQ_SENT,
	CM_DREQ_RCVD, /* DISCONNECTED given; DREP on rdma_disconnect/destroy */
	CM_TIMEWAIT,
	CM_DISCONNECTED, /* after timewait, or a connection that failed */
	CM_SIDR_REQ_SENT,
	CM_SIDR_REQ_RCVD,
	CM_SIDR_DONE,
	CM_MPA_REQ_WAIT, /* passive iWARP: TCP accepted, MPA Request not complete (no event yet) */
};

/* what the id's timer does when it fires */
enum sr_cm_timer {
	CM_T_NONE,
	CM_T_RETRY,    /* resend mad[] until retries run out */
	CM_T_TIMEWAIT, /* TIMEWAIT_EXIT */
	CM_T_MPA,      /* iWARP: the MPA Request or Reply did not come in time */
};

struct sr_cm_mc {
	struct sr_cm_mc *next;
	struct sockaddr_storage addr;
	union ibv_gid mgid;
	void *context;
	bool attached;
	uint16_t join_flags;
};

struct sr_cm_id {
	struct rdma_cm_id id;  /* first: rdma_cm_id * <-> sr_cm_id * */
	struct sr_cm_id *next; /* sr_cm.ids */
	struct sr_cm_chan *chan;
	struct sr_cm_dev *dev;
	enum sr_cm_state state;
	bool sync;	/* created without a channel */
	bool destroyed; /* user gave it up; lingers to finish a DREQ */
	bool reuseaddr, afonly, registered;
	bool removed;	 /* RDMA_CM_EVENT_DEVICE_REMOVAL given (softrdmad died) */
	bool afonly_set; /* RDMA_OPTION_ID_AFONLY given; else set at bind as the kernel does */
	bool port_auto;	 /* bound to port 0: we picked it */
	uint8_t gid_index;
	unsigned events_pending; /* events given out, not yet acked */
	struct ibv_sa_path_rec path;
	int backlog;

	/* connection */
	struct sr_cm_id *listener; /* for ids created by a REQ */
	uint32_t lcid, rcid;	   /* local/remote Communication IDs, host order */
	uint64_t rguid;		   /* peer's CA GUID, network order */
	uint64_t tid;
	uint64_t service_id;
	uint32_t rqpn;
	uint32_t sq_psn, rq_psn;
	uint8_t resp_res, init_depth; /* of our QP: max_dest_rd_atomic, max_rd_atomic */
	uint8_t retry_count, rnr_retry_count;
	uint8_t peer_resp_res, peer_init_depth; /* what the peer's message said */
	bool peer_srq, peer_flow_control;
	enum ibv_mtu mtu;
	uint8_t tos, ack_timeout;
	bool ack_timeout_set;
	uint32_t flow_label;
	uint32_t qkey;
	struct sockaddr_in6 peer;  /* peer's RoCE address (port unused) */
	struct sockaddr_in6 local; /* our RoCE address */

	/* the last MAD sent that may need resending */
	uint8_t mad[SR_MAD_BYTES];
	bool mad_valid;
	int retries_left;
	uint64_t timeout_ns;
	enum sr_cm_timer timer;
	uint64_t deadline; /* CLOCK_MONOTONIC ns */
	uint8_t max_cm_retries;

	struct ibv_qp_init_attr *qp_init_attr; /* rdma_create_ep on a passive id */
	struct sr_cm_mc *mcs;
	struct ibv_ece local_ece, remote_ece;

	uint64_t serial; /* names the id to callbacks that may outlive it */
	/* iWARP (iw_cm.c) */
	int iw_fd;			   /* TCP socket while MPA is exchanged; the QP owns it after */
	int iw_lfd;			   /* listener: its listening TCP socket */
	bool iw_polled;			   /* iw_fd is in the CM thread's epoll */
	bool iw_crc;			   /* passive: CRC the Reply will say */
	bool iw_enhanced;		   /* RFC 6581 block in the frames */
	uint8_t iw_rev;			   /* MPA revision of the connection */
	uint32_t iw_qpn;		   /* an application's own QP (conn_param's qp_num), if no id.qp */
	uint8_t iw_rtr;			   /* enum sr_mpa_rtr agreed (passive: offered by the Request) */
	uint16_t iw_peer_ird, iw_peer_ord; /* the peer's frame's IRD/ORD */
	bool iw_connecting;		   /* active: TCP connect under way (or to retry) */
	uint64_t give_up;		   /* active: no more retries of a connect nobody listened for after */
	uint8_t noln_tries;		   /* RoCE active: REQs sent again for want of a listener */
	uint16_t iw_have;		   /* bytes of the MPA frame read (active: once the Request is out) */
	uint16_t iw_req_len;		   /* active: the Request waiting in iw_frame for the connect */
	uint8_t iw_frame[SR_MPA_RR_HDR_LEN + SR_MPA_MAX_PD];
};

struct sr_cm_global {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* events acked (destroy waits on it) */
	bool inited;
	int init_err;
	struct sr_cm_dev devs[SR_CM_MAX_DEVS];
	int ndevs;
	bool have_roce, have_iwarp; /* device kinds configured */
	int epfd;		    /* the CM thread's epoll */
	uint64_t next_serial;
	struct ibv_context **dev_list; /* rdma_get_devices */
	struct sr_cm_id *ids;
	struct sr_daemon_conn *daemon;
	int tx4, tx6; /* MAD send sockets */
	uint16_t tx4_port, tx6_port;
	int wake_fd; /* eventfd: timers changed */
	pthread_t thread;
	bool thread_started;
	uint64_t hi_tid;
	uint8_t response_timeout; /* CM response timeout code */
	uint8_t max_cm_retries;
	uint64_t connect_retry_ns; /* RoCE: how long a REQ nobody listens for is sent again */
};

extern struct sr_cm_global sr_cm;

static inline struct sr_cm_id *cm_id(struct rdma_cm_id *id)
{
	return (struct sr_cm_id *)id;
}

/* cma.c */
int sr_cm_init(void);
struct sr_cm_event *sr_cm_event_new(struct sr_cm_id *id, enum rdma_cm_event_type type, int status);
void sr_cm_event_post(struct sr_cm_id *owner, struct sr_cm_event *e);
void sr_cm_fill_conn_param(struct sr_cm_event *e, const void *pdata, uint8_t len, uint8_t resp_res, uint8_t init_depth,
			   bool flow_control, uint8_t retry, uint8_t rnr_retry, bool srq, uint32_t qpn);
struct sr_cm_id *sr_cm_id_alloc(struct sr_cm_chan *chan, void *context, enum rdma_port_space ps, enum ibv_qp_type qpt);
int sr_cm_chan_sync(struct sr_cm_id *id);
struct sr_cm_id *sr_cm_child_new(struct sr_cm_id *l, enum ibv_qp_type qpt, struct sr_cm_dev *dev, uint8_t gidx,
				 const struct sockaddr_in6 *local, const struct sockaddr_in6 *peer,
				 const struct sockaddr *src, const struct sockaddr *dst);
void sr_cm_id_free(struct sr_cm_id *id);
int sr_cm_qp_to_rtr_rts(struct sr_cm_id *id);
void sr_cm_qp_to_err(struct sr_cm_id *id);
uint64_t sr_cm_now(void);

/* cm_addr.c */
int sr_cm_devs_open(void);
struct sr_cm_dev *sr_cm_dev_by_addr(const struct sockaddr_in6 *a, uint8_t *gid_index);
struct sr_cm_dev *sr_cm_dev_by_verbs(struct ibv_context *verbs);
bool sr_cm_is_loopback(const struct sockaddr_in6 *a);
struct sr_cm_dev *sr_cm_dev_loopback(const struct sockaddr_in6 *a, bool any, bool iwarp, union ibv_gid *gid);
struct ibv_pd *sr_cm_dev_pd(struct sr_cm_dev *d);
void sr_cm_to_in6(const struct sockaddr *sa, struct sockaddr_in6 *a);
void sr_cm_gid_from_in6(const struct sockaddr_in6 *a, union ibv_gid *gid);
bool sr_cm_is_any(const struct sockaddr_in6 *a);
int sr_cm_addr_len(const struct sockaddr *sa);
uint16_t sr_cm_port(const struct sockaddr *sa);
void sr_cm_set_port(struct sockaddr *sa, uint16_t port);
int sr_cm_route_src(const struct sockaddr_in6 *dst, struct sockaddr_in6 *src);
void sr_cm_fill_path(struct sr_cm_id *id);
void sr_cm_fill_ah(struct sr_cm_id *id, struct ibv_ah_attr *ah, const union ibv_gid *dgid);

/* ib_cm.c */
int sr_cm_engine_start(void);
void sr_cm_wake(void);
int sr_cm_send_mad(const struct sockaddr_in6 *src, const struct sockaddr_in6 *dst, const uint8_t *mad, uint8_t tclass);
int sr_cm_send_msg(struct sr_cm_id *id, const struct sr_cm_msg *msg, bool retry);
void sr_cm_arm(struct sr_cm_id *id, enum sr_cm_timer t, uint64_t ns);
uint64_t sr_cm_retry_ns(uint8_t response_timeout);
int sr_cm_send_req(struct sr_cm_id *id, const struct rdma_conn_param *p);
int sr_cm_send_sidr_req(struct sr_cm_id *id, const struct rdma_conn_param *p);
int sr_cm_send_rep(struct sr_cm_id *id, const struct rdma_conn_param *p);
int sr_cm_send_sidr_rep(struct sr_cm_id *id, int status, const void *pdata, uint8_t len);
int sr_cm_send_rej(struct sr_cm_id *id, uint16_t reason, const void *pdata, uint8_t len);
int sr_cm_send_rtu(struct sr_cm_id *id);
int sr_cm_send_dreq(struct sr_cm_id *id);
int sr_cm_send_drep(struct sr_cm_id *id);
uint64_t sr_cm_new_tid(uint32_t lcid);
int sr_cm_comm_est(struct sr_cm_id *id);
void sr_cm_will_queue(struct sr_cm_id *id);
void sr_cm_wills_flush(void);
void sr_cm_dbg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sr_cm_poll_fd(int fd, uint32_t events);

/* iw_cm.c.  "lock" says whether sr_cm.lock is held by the caller. */
static inline bool sr_iwcm_id(const struct sr_cm_id *c)
{
	return c->dev && c->dev->iwarp;
}
int sr_iwcm_listen(struct sr_cm_id *c, int backlog);			   /* lock not held; -errno */
void sr_iwcm_unlisten(struct sr_cm_id *c);				   /* lock held */
int sr_iwcm_connect(struct sr_cm_id *c, const struct rdma_conn_param *p);  /* lock held; -errno */
int sr_iwcm_accept(struct sr_cm_id *c, const struct rdma_conn_param *p);   /* lock held; -errno */
int sr_iwcm_reject(struct sr_cm_id *c, const void *pdata, uint8_t len);	   /* lock held; -errno */
int sr_iwcm_disconnect(struct sr_cm_id *c);				   /* lock held; -errno */
bool sr_iwcm_destroy(struct sr_cm_id *c);				   /* lock held */
void sr_iwcm_release(struct sr_cm_id *c);				   /* lock held */
bool sr_iwcm_on_fd(int fd);						   /* CM thread, lock not held */
void sr_iwcm_timeout(struct sr_cm_id *c);				   /* lock held */
int sr_iwcm_qp_attr(struct sr_cm_id *c, struct ibv_qp_attr *a, int *mask); /* lock held */
struct ibv_qp *sr_iwcm_qp(struct sr_cm_id *c); /* the QP the id connects: id.qp or the application's own */

#endif
