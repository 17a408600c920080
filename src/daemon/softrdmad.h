/* softrdmad's shared state and the interfaces between its parts.
 *
 * softrdmad is one event-loop thread; each file below is one role:
 *   main.c          command line, start-up (sockets, --background), the event loop, exit
 *   state.c         the daemon's state, clock, random numbers and log
 *   users.c         who the clients are: the trust rules and per-user quotas
 *   ipc_server.c    the server end of the IPC (ipc.h; the client end is
 *                   common/ipc_client.c): client connections, accept, replies,
 *                   reading and parsing requests (client_msg), dropping a
 *                   client and all it owns
 *   idtab.c         the ID tables (QPNs, Communication IDs)
 *   qpn.c           host-wide QPN allocation
 *   route.c         datagram routing by destination QPN: UDP 4791 and datagrams
 *                   clients hand back
 *   cm_ids.c        CM Communication IDs and listens (the CM names clients own)
 *   cm_route.c      QP1: routing CM MADs to the process they belong to
 *   cm_answer.c     the daemon's own CM answers (REJ, SIDR_REP, DREP), rate-limited
 *   cm_will.c       CM wills: MADs sent for a client that dies
 *   mcast_groups.c  UD multicast groups and their members
 *   status.c        the STATUS report
 *
 * Everything from the wire and from clients is untrusted: every length is
 * checked, and the daemon never blocks on a client (datagram semantics:
 * a client that does not read loses packets, never stalls the others). */
#ifndef SR_DAEMON_SOFTRDMAD_H
#define SR_DAEMON_SOFTRDMAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <netinet/in.h>
#include <sys/types.h>

#include "common/ipc.h"
#include "roce/wire/roce_hdr.h"

#define QPN_FIRST 0x11u
#define QPN_LAST 0xffffffu
#define QPN_MAX_LIVE (1u << 20) /* bounds daemon memory, far above any real use */
#define UDP_BATCH 32
#define UDP_BATCHES_PER_WAKEUP 8 /* then let other sources have a turn */
#define CLIENT_MSGS_PER_WAKEUP 64
#define SOCK_BUF_BYTES (4 << 20)
#define USER_BIG_BUFFERS 16 /* connections of a user with SOCK_BUF_BYTES */
#define PKT_HDRS (sizeof(struct sr_ipc_hdr) + sizeof(struct sr_ipc_pkt))
#define SLOT_BYTES ((PKT_HDRS + SR_IPC_MAX_PKT + 8 + 7) & ~(size_t)7)

/* CM state limits: bound daemon memory whatever clients and peers do. */
#define COMM_ID_MAX_LIVE (1u << 20)
#define LISTEN_MAX 65536u
#define LISTEN_BUCKETS 1024u
#define PEER_REQ_MAX 16384u
#define PEER_REQ_BUCKETS 4096u
/* Longer than an rdma_cm REQ is retried (15 tries of ~4 s, doubled by MRA). */
#define PEER_REQ_TTL_MS (300 * 1000)
#define ANSWER_SRC_SLOTS 1024u
#define ANSWER_SRC_RATE 20 /* answers per second to one address */
#define ANSWER_SRC_BURST 40
#define ANSWER_ALL_RATE 500 /* answers per second in total */
#define ANSWER_ALL_BURST 1000
#define MCAST_MAX_GROUPS 1024u	  /* (group, interface) pairs joined host-wide */
#define MCAST_MAX_PER_CLIENT 256u /* memberships of one client */
/* Wills of dead clients go out at most this fast (ipc.h, "CM wills"). */
#define WILL_RATE 1000 /* per second */
#define WILL_BURST 1000

/* A GSI datagram: BTH, DETH, one 256-byte MAD (so no pad), ICRC. */
#define GSI_MAD_BYTES 256
#define GSI_DGRAM_BYTES (SR_BTH_BYTES + SR_DETH_BYTES + GSI_MAD_BYTES + SR_ICRC_BYTES)
/* MAD common header (IBTA vol. 1, 13.4.3) */
#define MAD_BASE_VERSION 1
#define MAD_CLASS_CM 0x07
#define MAD_CM_CLASS_VERSION 2
#define MAD_METHOD_SEND 0x03
#define MAD_OFF_TID 8
#define MAD_OFF_ATTR_ID 16
/* CM messages (IBTA vol. 1, 12.6), offsets from the start of the MAD */
enum cm_attr {
	CM_ATTR_REQ = 0x0010,
	CM_ATTR_MRA = 0x0011,
	CM_ATTR_REJ = 0x0012,
	CM_ATTR_REP = 0x0013,
	CM_ATTR_RTU = 0x0014,
	CM_ATTR_DREQ = 0x0015,
	CM_ATTR_DREP = 0x0016,
	CM_ATTR_SIDR_REQ = 0x0017,
	CM_ATTR_SIDR_REP = 0x0018,
	CM_ATTR_LAP = 0x0019,
	CM_ATTR_APR = 0x001a,
};
#define CM_OFF_LOCAL_COMM_ID 24	 /* every message but SIDR_* */
#define CM_OFF_REMOTE_COMM_ID 28 /* every message but REQ and SIDR_* */
#define CM_OFF_REQ_SERVICE_ID 32
#define CM_OFF_REQ_LOCAL_CA_GUID 40
#define CM_OFF_REJ_REASON 34
#define CM_OFF_REJ_ARI 36
#define CM_OFF_SIDR_REQUEST_ID 24 /* SIDR_REQ and SIDR_REP */
#define CM_OFF_SIDR_REQ_SERVICE_ID 32
#define CM_OFF_SIDR_REP_STATUS 28
#define CM_OFF_SIDR_REP_SERVICE_ID 36
#define CM_REJ_TIMEOUT 1
#define CM_REJ_INVALID_SERVICE_ID 8
#define CM_SIDR_UNSUPPORTED 1

enum src_kind {
	SRC_LISTEN,
	SRC_UDP4,
	SRC_UDP6,
	SRC_SIGNAL,
	SRC_CLIENT
};

struct evsrc {
	enum src_kind kind;
};

struct client {
	struct evsrc src; /* first: epoll data points here */
	int fd;
	pid_t pid; /* from SO_PEERCRED */
	uid_t uid;
	struct user *user; /* of uid; never NULL */
	int32_t hello_pid;
	uint32_t nqpn, ncomm_id, nlisten;
	uint32_t nmcast; /* multicast memberships (mc_member entries) */
	uint64_t delivered, dropped_full;
	/* A reply the socket had no room for.  While set the client's requests
	 * are not read, so at most one is ever pending. */
	uint8_t *pending;
	uint32_t pending_len;
	struct will *wills; /* CM wills (ipc.h), sent when the client dies */
	struct client *prev, *next;
};

struct will {
	struct will *next;
	struct user *user; /* charged for it until it is sent */
	struct sr_ipc_cm_will w;
};

enum drop_reason {
	DROP_SHORT,   /* shorter than a BTH */
	DROP_TOO_BIG, /* larger than SR_IPC_MAX_PKT */
	DROP_NO_QP1_OWNER,
	DROP_UNKNOWN_QPN,
	DROP_CLIENT_FULL,     /* owner's socket buffer full or a reply pending */
	DROP_CLIENT_ERR,      /* owner's socket failed (going away) */
	DROP_LOOP,	      /* client forwarded a datagram for its own QPN */
	DROP_BAD_IPC,	      /* malformed PKT message from a client */
	DROP_MCAST_NO_MEMBER, /* DestQP 0xFFFFFF to a group nobody joined there */
	DROP_FOREIGN,	      /* client forwarded it to another user's QP or listener,
	                      * or for the daemon to answer (users.c) */
	DROP_NREASONS
};

enum cm_counter {
	CM_TO_LISTENER,	 /* REQ / SIDR_REQ to the process listening */
	CM_TO_REQ_OWNER, /* REQ again, or REJ timeout: where the REQ went */
	CM_TO_ID_OWNER,	 /* to the owner of the Communication / Request ID */
	CM_TO_QP1_OWNER, /* not routed by the above: to the CLAIM_QP1 holder */
	CM_REJ_SENT,
	CM_SIDR_REP_SENT,
	CM_DREP_SENT,
	CM_ANSWER_LIMITED, /* an answer not sent: rate limit */
	CM_ANSWER_ERR,	   /* an answer not sent: no usable address, send failed */
	CM_MALFORMED,	   /* not a 280-byte UD SEND with GSI Q_Key, P_Key, MAD v1 */
	CM_NOT_CM,	   /* another management class */
	CM_UNSUPPORTED,	   /* CM MAD not routed: other attribute, method, version */
	CM_NO_LISTENER,
	CM_UNKNOWN_ID,
	CM_NCOUNTERS
};

/* What the daemon counts of the datagrams it handles: in all (d.all) and
 * per user (its clients' share: what went to them, what they handed over,
 * what was dropped on its way to them or from them).  STATUS shows a
 * client that is not trusted only its own user's (status.c): the counts
 * of datagrams to other users' QPs would tell which QPNs are live. */
struct traffic {
	uint64_t rx_udp, rx_client, forwarded, drops[DROP_NREASONS];
	uint64_t cm_rx, cm[CM_NCOUNTERS];
	uint64_t wills_sent;
};

/* What one Unix user holds, in all its connections, and its traffic
 * (users.c).  Kept once created: there are only as many as uids that
 * connected. */
enum quota {
	Q_CLIENTS,
	Q_QPN,
	Q_COMM_ID,
	Q_LISTEN,
	Q_WILL,
	Q_MCAST,
	Q_NQUOTAS
};

struct user {
	struct user *next;
	uid_t uid;
	uint32_t n[Q_NQUOTAS];
	uint32_t warned;       /* bit per quota: its refusal was logged */
	uint32_t wills_queued; /* of its dead clients, not sent yet */
	struct traffic t;
};

/* Count one event of field (a member of struct traffic) in all, and for
 * user u if not NULL. */
#define TALLY(u, field)                \
	do {                           \
		struct user *u_ = (u); \
		d.all.field++;         \
		if (u_)                \
			u_->t.field++; \
	} while (0)

struct id_ent {
	uint32_t id;   /* 0 = empty slot (0 is never handed out) */
	uint16_t port; /* QPNs: the UDP source port, 0 = not known (ipc.h, "Ports") */
	struct client *owner;
};

/* Open addressing, linear probing, load <= 1/2. */
struct idtab {
	struct id_ent *e;
	uint32_t cap, n;
};

struct listener {
	struct listener *next; /* hash chain */
	struct client *owner;
	uint64_t service_id;
	struct in6_addr addr; /* :: any, ::ffff:0.0.0.0 any IPv4, else exact */
};

/* A REQ routed to a listener, named as the peer names it. */
struct req_seen {
	struct req_seen *hnext; /* hash chain */
	struct req_seen *older, *newer;
	uint32_t comm_id;   /* the REQ's Local Communication ID */
	uint8_t ca_guid[8]; /* the REQ's Local CA GUID */
	struct client *owner;
	int64_t t_ms; /* last seen */
};

/* A multicast group joined on one interface, and the clients that asked
 * for it (ipc.h, "Multicast"). */
struct mc_member {
	struct mc_member *next;
	struct client *c;
	uint32_t refs;	    /* JOINs not yet matched by a LEAVE */
	uint64_t delivered; /* datagrams of the group handed to c */
};

struct mc_group {
	struct mc_group *next;
	struct in6_addr addr; /* IPv4 as IPv4-mapped */
	int ifindex;
	int fd; /* the socket holding the kernel membership */
	struct mc_member *members;
	uint32_t nmembers;
	uint64_t delivered; /* datagrams handed to members (one per member) */
};

struct token_bucket {
	int64_t t_ms;
	uint64_t milli;
};

struct answer_src {
	bool used;
	struct in6_addr addr;
	struct token_bucket tb;
};

/* All daemon state: one instance (state.c), owned by the event loop thread. */
struct daemon_state {
	bool background;
	int idle_exit; /* seconds, 0 = never */
	int ready_fd;  /* --background: pipe to the waiting parent, else -1 */
	const char *sock_name;
	int epfd, listen_fd, udp4_fd, udp6_fd, sig_fd;
	int reserve_fd; /* spare fd given up to accept() and close on EMFILE */
	int udp_rcvbuf;
	uid_t euid; /* the daemon's own: its clients are trusted */
	struct user *users;
	struct evsrc ev_listen, ev_udp4, ev_udp6, ev_signal;
	struct client *clients;
	unsigned nclients;
	struct client *qp1_owner;
	struct idtab qpns;
	struct idtab comm_ids;
	struct listener *listens[LISTEN_BUCKETS];
	uint32_t nlistens;
	struct req_seen *rs_hash[PEER_REQ_BUCKETS], *rs_oldest, *rs_newest;
	uint32_t rs_n;
	struct answer_src answer_src[ANSWER_SRC_SLOTS];
	struct token_bucket answer_all;
	uint32_t gsi_psn;
	struct will *will_head, *will_tail; /* of dead clients, waiting to be sent */
	uint32_t nwills_queued;
	struct token_bucket will_tb;
	struct mc_group *mcast;
	uint32_t nmcast;
	struct timespec start;
	int64_t idle_since_ms;
	struct traffic all;
	uint8_t *udp_slots; /* UDP_BATCH slots of SLOT_BYTES */
	uint8_t *cbuf;	    /* one client message */
};
extern struct daemon_state d;

extern const char *const drop_name[DROP_NREASONS];
extern const char *const cm_name[CM_NCOUNTERS];

/* The route of one datagram (route.c, cm_route.c). */
struct route {
	struct client *to;    /* NULL: not delivered */
	enum drop_reason why; /* when to is NULL and !answered */
	bool answered;	      /* the daemon answered it itself */
	bool mcast;	      /* DestQP 0xFFFFFF: to the group's members */
};

static inline void to_mapped(struct sockaddr_in6 *out, const struct sockaddr_in *in)
{
	memset(out, 0, sizeof(*out));
	out->sin6_family = AF_INET6;
	out->sin6_port = in->sin_port;
	out->sin6_addr.s6_addr[10] = 0xff;
	out->sin6_addr.s6_addr[11] = 0xff;
	memcpy(&out->sin6_addr.s6_addr[12], &in->sin_addr, 4);
}

/* Big-endian fields of MADs. */
static inline void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t rd64(const uint8_t *p)
{
	return (uint64_t)rd32(p) << 32 | rd32(p + 4);
}

/* state.c */
int64_t now_ms(void);
void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Unpredictable 32-bit numbers (getrandom), for IDs peers must not guess. */
uint32_t rand32(void);
/* Token bucket in thousandths of a token: true if a token was taken. */
bool tb_take(struct token_bucket *b, int64_t now, uint32_t rate, uint32_t burst);

/* users.c: the trust model (ipc.h, "Users") */
/* The user uid, created on first use; NULL when out of memory. */
struct user *user_get(uid_t uid);
/* Take one unit of quota q for u: 0, or -EDQUOT beyond its limit (the
 * daemon's own user has none). */
int quota_take(struct user *u, enum quota q);
/* Give it back. */
void quota_give(struct user *u, enum quota q);
/* Root and the daemon's own user: may claim QP1, forward anything. */
bool client_trusted(const struct client *c);
/* May a datagram that client from hands over reach client to? */
bool may_forward(const struct client *from, const struct client *to);

/* idtab.c: open addressing, linear probing, load <= 1/2 */
struct id_ent *it_find(const struct idtab *t, uint32_t id);
int it_insert(struct idtab *t, uint32_t id, struct client *owner);
void it_remove(struct idtab *t, struct id_ent *e);
/* Calls release on each of c's n entries (release removes the entry). */
void it_release_owner(struct idtab *t, struct client *c, uint32_t n, void (*release)(struct id_ent *));

/* qpn.c */
int64_t qpn_alloc(struct client *c);
void qpn_release(struct id_ent *e);

/* cm_ids.c */
int64_t comm_id_alloc(struct client *c);
void comm_id_release(struct id_ent *e);
struct client *comm_id_owner(uint32_t id);
struct client *listen_match(uint64_t service_id, const struct in6_addr *dst);
int listen_add(struct client *c, const struct sr_ipc_listen *req);
int listen_del(struct client *c, const struct sr_ipc_listen *req);
void listen_release_all(struct client *c);

/* cm_route.c */
/* from: the client that forwarded it, NULL if it came from UDP. */
struct route cm_route(const uint8_t *p, uint32_t len, const struct sr_ipc_pkt *meta, const struct client *from);
void rs_release_all(struct client *c);

/* cm_answer.c */
bool cm_answer(const uint8_t *req, const struct sr_ipc_pkt *meta, uint16_t attr);
bool gsi_send(uint8_t *pkt, const struct sockaddr_in6 *local, const struct sockaddr_in6 *peer, uint8_t tclass);

/* cm_will.c */
/* A dying client's wills join the queue of those to send. */
void wills_release(struct client *c);
void will_drop(struct client *c, uint32_t comm_id);
int will_set(struct client *c, const struct sr_ipc_cm_will *req);
/* Sends queued wills as the rate allows; ms until it can send more, -1
 * when none wait. */
int wills_pump(void);

/* mcast_groups.c */
int mc_join(struct client *c, const struct sr_ipc_mcast *req);
int mc_leave(struct client *c, const struct sr_ipc_mcast *req);
void mc_release_all(struct client *c);
bool mc_fanout(const struct in6_addr *group, int ifindex, const uint8_t *msg, size_t len, const struct client *from);

/* route.c */
/* A datagram dropped on its way to or from client c (NULL: nobody's). */
void drop(const struct client *c, enum drop_reason r);
/* msg (hdr + sr_ipc_pkt + datagram) to client c; from: the client that
 * handed it over, NULL if it came from UDP. */
void deliver(struct client *c, const struct client *from, const uint8_t *msg, size_t len);
void udp_read(int fd, bool v6);
/* One datagram that arrived on UDP 4791: the datagram (meta->len bytes,
 * at most SR_IPC_MAX_PKT) at slot + PKT_HDRS, whose first PKT_HDRS bytes
 * are room for the message header; meta says where it came from and to;
 * ifindex: the interface it came in on.  Routed, delivered or dropped. */
void udp_dgram(uint8_t *slot, const struct sr_ipc_pkt *meta, int ifindex);
void client_pkt(struct client *from, uint8_t *msg, size_t len);

/* ipc_server.c */
void set_bufsize(int fd, int opt_force, int opt, int bytes);
void accept_clients(void);
/* A new client on connected socket fd (non-blocking), credentials from
 * SO_PEERCRED; NULL (fd closed) on failure. */
struct client *client_new(int fd);
void client_drop(struct client *c, const char *why);
bool client_flush(struct client *c);
void client_read(struct client *c);
/* Handles one message of n bytes a client sent (msg_flags: MSG_TRUNC if
 * it did not fit), as read from its socket into buf (at least
 * SR_IPC_MAX_MSG bytes, 8-aligned): a request is answered, a PKT routed.
 * Returns false if the client was dropped (and freed). */
bool client_msg(struct client *c, uint8_t *buf, size_t n, int msg_flags);

/* status.c */
/* The STATUS text as client c may see it: everything if it is trusted,
 * else only its own user's figures, clients, listens and groups. */
size_t status_text(const struct client *c, char *buf, size_t cap);
/* The connections c may count (STATUS's reply value). */
uint32_t status_clients(const struct client *c);

#endif
