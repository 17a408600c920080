/* softrdmad: the per-host (per network namespace) soft-RDMA daemon.
 *
 * RoCEv2 peers send everything to UDP port 4791, so, as with the kernel's
 * rxe, one owner per host receives what no established flow claims and
 * demultiplexes it by destination QPN; and QPNs must be unique host-wide.
 * Established RC/UC flows bypass the daemon: their per-flow sockets join
 * port 4791 with SO_REUSEPORT and connect() to the peer, and the kernel
 * prefers an exact 4-tuple match, so only the rest (QP1 MADs, UD, the first
 * packets of a flow) reaches the daemon's unconnected sockets.
 *
 * QP1 is shared the same way: every process's CM MADs arrive at the one
 * host-wide QP1, so the daemon routes them by the IDs it hands out
 * (Communication IDs, listens by Service ID) and answers, as the kernel's
 * CM does, the requests that belong to no process.
 *
 * Everything from the wire and from clients is untrusted: every length is
 * checked, and the daemon never blocks on a client (datagram semantics:
 * a client that does not read loses packets, never stalls the others). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "common/ipc.h"
#include "roce/wire/roce_hdr.h"

#define QPN_FIRST 0x11u
#define QPN_LAST 0xffffffu
#define QPN_MAX_LIVE (1u << 20)      /* bounds daemon memory, far above any real use */
#define SRC_PORT_PREF_TRIES 64
#define UDP_BATCH 32
#define UDP_BATCHES_PER_WAKEUP 8     /* then let other sources have a turn */
#define CLIENT_MSGS_PER_WAKEUP 64
#define SOCK_BUF_BYTES (4 << 20)
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
#define ANSWER_SRC_RATE 20           /* answers per second to one address */
#define ANSWER_SRC_BURST 40
#define ANSWER_ALL_RATE 500          /* answers per second in total */
#define ANSWER_ALL_BURST 1000
#define MCAST_MAX_GROUPS 1024u       /* (group, interface) pairs joined host-wide */
#define MCAST_MAX_PER_CLIENT 256u    /* memberships of one client */

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
#define CM_OFF_LOCAL_COMM_ID 24      /* every message but SIDR_* */
#define CM_OFF_REMOTE_COMM_ID 28     /* every message but REQ and SIDR_* */
#define CM_OFF_REQ_SERVICE_ID 32
#define CM_OFF_REQ_LOCAL_CA_GUID 40
#define CM_OFF_REJ_REASON 34
#define CM_OFF_REJ_ARI 36
#define CM_OFF_SIDR_REQUEST_ID 24    /* SIDR_REQ and SIDR_REP */
#define CM_OFF_SIDR_REQ_SERVICE_ID 32
#define CM_OFF_SIDR_REP_STATUS 28
#define CM_OFF_SIDR_REP_SERVICE_ID 36
#define CM_REJ_TIMEOUT 1
#define CM_REJ_INVALID_SERVICE_ID 8
#define CM_SIDR_UNSUPPORTED 1

enum src_kind { SRC_LISTEN, SRC_UDP4, SRC_UDP6, SRC_SIGNAL, SRC_CLIENT };

struct evsrc {
	enum src_kind kind;
};

struct client {
	struct evsrc src;            /* first: epoll data points here */
	int fd;
	pid_t pid;                   /* from SO_PEERCRED */
	uid_t uid;
	int32_t hello_pid;
	uint32_t nqpn, ncomm_id, nlisten;
	uint32_t nmcast;             /* multicast memberships (mc_member entries) */
	uint64_t delivered, dropped_full;
	/* A reply the socket had no room for.  While set the client's requests
	 * are not read, so at most one is ever pending. */
	uint8_t *pending;
	uint32_t pending_len;
	struct will *wills;          /* CM wills (ipc.h), sent when the client dies */
	struct client *prev, *next;
};

struct will {
	struct will *next;
	struct sr_ipc_cm_will w;
};

static void wills_send(struct client *c);

enum drop_reason {
	DROP_SHORT,          /* shorter than a BTH */
	DROP_TOO_BIG,        /* larger than SR_IPC_MAX_PKT */
	DROP_NO_QP1_OWNER,
	DROP_UNKNOWN_QPN,
	DROP_CLIENT_FULL,    /* owner's socket buffer full or a reply pending */
	DROP_CLIENT_ERR,     /* owner's socket failed (going away) */
	DROP_LOOP,           /* client forwarded a datagram for its own QPN */
	DROP_BAD_IPC,        /* malformed PKT message from a client */
	DROP_MCAST_NO_MEMBER, /* DestQP 0xFFFFFF to a group nobody joined there */
	DROP_NREASONS
};

static const char *const drop_name[DROP_NREASONS] = {
	[DROP_SHORT] = "short",
	[DROP_TOO_BIG] = "too_big",
	[DROP_NO_QP1_OWNER] = "no_qp1_owner",
	[DROP_UNKNOWN_QPN] = "unknown_qpn",
	[DROP_CLIENT_FULL] = "client_full",
	[DROP_CLIENT_ERR] = "client_error",
	[DROP_LOOP] = "loop",
	[DROP_BAD_IPC] = "bad_ipc",
	[DROP_MCAST_NO_MEMBER] = "no_mcast_member",
};

/* What happened to QP1 datagrams, for the STATUS "cm" line. */
enum cm_counter {
	CM_TO_LISTENER,      /* REQ / SIDR_REQ to the process listening */
	CM_TO_REQ_OWNER,     /* REQ again, or REJ timeout: where the REQ went */
	CM_TO_ID_OWNER,      /* to the owner of the Communication / Request ID */
	CM_TO_QP1_OWNER,     /* not routed by the above: to the CLAIM_QP1 holder */
	CM_REJ_SENT,
	CM_SIDR_REP_SENT,
	CM_DREP_SENT,
	CM_ANSWER_LIMITED,   /* an answer not sent: rate limit */
	CM_ANSWER_ERR,       /* an answer not sent: no usable address, send failed */
	CM_MALFORMED,        /* not a 280-byte UD SEND with GSI Q_Key, P_Key, MAD v1 */
	CM_NOT_CM,           /* another management class */
	CM_UNSUPPORTED,      /* CM MAD not routed: other attribute, method, version */
	CM_NO_LISTENER,
	CM_UNKNOWN_ID,
	CM_NCOUNTERS
};

static const char *const cm_name[CM_NCOUNTERS] = {
	[CM_TO_LISTENER] = "to_listener",
	[CM_TO_REQ_OWNER] = "to_req_owner",
	[CM_TO_ID_OWNER] = "to_id_owner",
	[CM_TO_QP1_OWNER] = "to_qp1_owner",
	[CM_REJ_SENT] = "rej_sent",
	[CM_SIDR_REP_SENT] = "sidr_rep_sent",
	[CM_DREP_SENT] = "drep_sent",
	[CM_ANSWER_LIMITED] = "answer_limited",
	[CM_ANSWER_ERR] = "answer_error",
	[CM_MALFORMED] = "malformed",
	[CM_NOT_CM] = "not_cm",
	[CM_UNSUPPORTED] = "unsupported",
	[CM_NO_LISTENER] = "no_listener",
	[CM_UNKNOWN_ID] = "unknown_id",
};

/* Owner of a 32-bit ID (QPN or Communication ID). */
struct id_ent {
	uint32_t id;                 /* 0 = empty slot (0 is never handed out) */
	struct client *owner;
};

/* Open addressing, linear probing, load <= 1/2. */
struct idtab {
	struct id_ent *e;
	uint32_t cap, n;
};

struct listener {
	struct listener *next;       /* hash chain */
	struct client *owner;
	uint64_t service_id;
	struct in6_addr addr;        /* :: any, ::ffff:0.0.0.0 any IPv4, else exact */
};

/* A REQ routed to a listener, named as the peer names it. */
struct req_seen {
	struct req_seen *hnext;      /* hash chain */
	struct req_seen *older, *newer;
	uint32_t comm_id;            /* the REQ's Local Communication ID */
	uint8_t ca_guid[8];          /* the REQ's Local CA GUID */
	struct client *owner;
	int64_t t_ms;                /* last seen */
};

/* A multicast group joined on one interface, and the clients that asked
 * for it (ipc.h, "Multicast"). */
struct mc_member {
	struct mc_member *next;
	struct client *c;
	uint32_t refs;               /* JOINs not yet matched by a LEAVE */
};

struct mc_group {
	struct mc_group *next;
	struct in6_addr addr;        /* IPv4 as IPv4-mapped */
	int ifindex;
	int fd;                      /* the socket holding the kernel membership */
	struct mc_member *members;
	uint32_t nmembers;
	uint64_t delivered;          /* datagrams handed to members (one per member) */
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

/* All daemon state: one instance, owned by the event loop thread. */
static struct {
	bool background;
	int idle_exit;               /* seconds, 0 = never */
	int ready_fd;                /* --background: pipe to the waiting parent, else -1 */
	const char *sock_name;
	int epfd, listen_fd, udp4_fd, udp6_fd, sig_fd;
	int reserve_fd;              /* spare fd given up to accept() and close on EMFILE */
	int udp_rcvbuf;
	struct evsrc ev_listen, ev_udp4, ev_udp6, ev_signal;
	struct client *clients;
	unsigned nclients;
	struct client *qp1_owner;
	struct idtab qpns;
	uint32_t next_qpn;
	uint32_t port_use[1u << 14]; /* live QPNs per sr_qpn_src_port() - 0xC000 */
	struct idtab comm_ids;
	uint32_t next_comm_id;
	struct listener *listens[LISTEN_BUCKETS];
	uint32_t nlistens;
	struct req_seen *rs_hash[PEER_REQ_BUCKETS], *rs_oldest, *rs_newest;
	uint32_t rs_n;
	struct answer_src answer_src[ANSWER_SRC_SLOTS];
	struct token_bucket answer_all;
	uint32_t gsi_psn;
	uint64_t wills_sent;          /* CM wills of dead clients sent */
	struct mc_group *mcast;
	uint32_t nmcast;
	uint64_t cm_rx, cm[CM_NCOUNTERS];
	struct timespec start;
	int64_t idle_since_ms;
	uint64_t rx_udp, rx_client, forwarded, drops[DROP_NREASONS];
	uint8_t *udp_slots;          /* UDP_BATCH slots of SLOT_BYTES */
	uint8_t *cbuf;               /* one client message */
} d = { .idle_exit = 30, .ready_fd = -1, .listen_fd = -1, .udp4_fd = -1, .udp6_fd = -1,
	.sig_fd = -1, .reserve_fd = -1, .epfd = -1 };

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logmsg(const char *fmt, ...)
{
	char tbuf[32];
	time_t t = time(NULL);
	struct tm tm;
	va_list ap;

	strftime(tbuf, sizeof(tbuf), "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
	fprintf(stderr, "%s softrdmad[%ld]: ", tbuf, (long)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
}

/* Startup failure: in --background mode the parent prints it. */
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg + 1, sizeof(msg) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof(msg) - 2)
		n = (int)sizeof(msg) - 2;
	if (d.ready_fd >= 0) {
		msg[0] = 'E';
		if (write(d.ready_fd, msg, (size_t)n + 1) < 0)
			_exit(1);
	} else {
		fprintf(stderr, "softrdmad: %s\n", msg + 1);
	}
	_exit(1);
}

/* ---- ID tables (QPNs, CM Communication IDs) ---- */

static uint32_t it_home(const struct idtab *t, uint32_t id)
{
	return (id * 0x9E3779B1u) & (t->cap - 1);
}

static struct id_ent *it_find(const struct idtab *t, uint32_t id)
{
	if (!t->cap || !id)
		return NULL;
	for (uint32_t i = it_home(t, id);; i = (i + 1) & (t->cap - 1)) {
		if (t->e[i].id == id)
			return &t->e[i];
		if (!t->e[i].id)
			return NULL;
	}
}

static void it_place(struct id_ent *tab, uint32_t cap, uint32_t id, struct client *owner)
{
	uint32_t i = (id * 0x9E3779B1u) & (cap - 1);

	while (tab[i].id)
		i = (i + 1) & (cap - 1);
	tab[i].id = id;
	tab[i].owner = owner;
}

static int it_insert(struct idtab *t, uint32_t id, struct client *owner)
{
	if ((t->n + 1) * 2 > t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 1024;
		struct id_ent *tab = calloc(cap, sizeof(*tab));

		if (!tab)
			return -ENOMEM;
		for (uint32_t i = 0; i < t->cap; i++)
			if (t->e[i].id)
				it_place(tab, cap, t->e[i].id, t->e[i].owner);
		free(t->e);
		t->e = tab;
		t->cap = cap;
	}
	it_place(t->e, t->cap, id, owner);
	t->n++;
	return 0;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
static void it_remove(struct idtab *t, struct id_ent *e)
{
	uint32_t mask = t->cap - 1;
	uint32_t i = (uint32_t)(e - t->e), j = i;

	for (;;) {
		uint32_t k;

		j = (j + 1) & mask;
		if (!t->e[j].id)
			break;
		k = it_home(t, t->e[j].id);
		/* Entry j may move to the hole at i only if its home is not
		 * cyclically within (i, j]. */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		t->e[i] = t->e[j];
		i = j;
	}
	t->e[i].id = 0;
	t->e[i].owner = NULL;
	t->n--;
}

/* Calls release on each of c's n entries (release removes the entry). */
static void it_release_owner(struct idtab *t, struct client *c, uint32_t n, void (*release)(struct id_ent *))
{
	uint32_t *list, got = 0;

	if (!n)
		return;
	/* Deleting shifts entries, so collect first. */
	list = malloc(n * sizeof(*list));
	if (list) {
		for (uint32_t i = 0; i < t->cap && got < n; i++)
			if (t->e[i].id && t->e[i].owner == c)
				list[got++] = t->e[i].id;
		for (uint32_t i = 0; i < got; i++) {
			struct id_ent *e = it_find(t, list[i]);

			if (e)
				release(e);
		}
		free(list);
		return;
	}
	/* Out of memory: rescan from the start after each removal. */
	for (;;) {
		uint32_t i;

		for (i = 0; i < t->cap; i++)
			if (t->e[i].id && t->e[i].owner == c)
				break;
		if (i == t->cap)
			break;
		release(&t->e[i]);
	}
}

/* ---- QPNs ---- */

static uint32_t *port_slot(uint32_t qpn)
{
	return &d.port_use[(sr_qpn_src_port(qpn) - 0xC000u) & ((1u << 14) - 1)];
}

static int64_t qpn_alloc(struct client *c)
{
	uint32_t q = d.next_qpn, fallback = 0;
	int pref = 0;

	if (d.qpns.n >= QPN_MAX_LIVE)
		return -ENOSPC;
	for (uint32_t scanned = 0; scanned <= QPN_LAST - QPN_FIRST; scanned++) {
		uint32_t cand = q;

		q = q >= QPN_LAST ? QPN_FIRST : q + 1;
		if (it_find(&d.qpns, cand))
			continue;
		/* Distinct source ports keep flows of different local QPs to the
		 * same peer on distinct 4-tuples. */
		if (*port_slot(cand) && pref < SRC_PORT_PREF_TRIES) {
			if (!fallback)
				fallback = cand;
			pref++;
			continue;
		}
		if (*port_slot(cand) && fallback) {
			cand = fallback;
			q = cand >= QPN_LAST ? QPN_FIRST : cand + 1;
		}
		if (it_insert(&d.qpns, cand, c))
			return -ENOMEM;
		d.next_qpn = q;
		(*port_slot(cand))++;
		c->nqpn++;
		return cand;
	}
	return -ENOSPC;
}

static void qpn_release(struct id_ent *e)
{
	(*port_slot(e->id))--;
	e->owner->nqpn--;
	it_remove(&d.qpns, e);
}

/* ---- CM Communication IDs ---- */

static int64_t comm_id_alloc(struct client *c)
{
	if (d.comm_ids.n >= COMM_ID_MAX_LIVE)
		return -ENOSPC;
	/* Far fewer IDs are live than exist, so this ends within n + 2 steps. */
	for (;;) {
		uint32_t id = d.next_comm_id++;

		/* 0 means "none" on the wire (a REQ's Remote Communication ID). */
		if (!id || it_find(&d.comm_ids, id))
			continue;
		if (it_insert(&d.comm_ids, id, c))
			return -ENOMEM;
		c->ncomm_id++;
		return id;
	}
}

static void comm_id_release(struct id_ent *e)
{
	e->owner->ncomm_id--;
	it_remove(&d.comm_ids, e);
}

static struct client *comm_id_owner(uint32_t id)
{
	struct id_ent *e = it_find(&d.comm_ids, id);

	return e ? e->owner : NULL;
}

static void to_mapped(struct sockaddr_in6 *out, const struct sockaddr_in *in)
{
	memset(out, 0, sizeof(*out));
	out->sin6_family = AF_INET6;
	out->sin6_port = in->sin_port;
	out->sin6_addr.s6_addr[10] = 0xff;
	out->sin6_addr.s6_addr[11] = 0xff;
	memcpy(&out->sin6_addr.s6_addr[12], &in->sin_addr, 4);
}

/* ---- CM listens ---- */

static uint32_t listen_bucket(uint64_t service_id)
{
	return (uint32_t)((service_id * 0x9E3779B97F4A7C15ull) >> 32) & (LISTEN_BUCKETS - 1);
}

static bool addr_is_any4(const struct in6_addr *a)
{
	static const struct in6_addr any4 = { .s6_addr = { [10] = 0xff, [11] = 0xff } };

	return IN6_ARE_ADDR_EQUAL(a, &any4);
}

/* The address of a LISTEN body as the daemon keeps it; -EINVAL if unusable. */
static int listen_addr(const struct sr_ipc_listen *l, struct in6_addr *out)
{
	switch (l->local.sin6_family) {
	case AF_UNSPEC:
		*out = in6addr_any;
		return 0;
	case AF_INET6:
		*out = l->local.sin6_addr;
		return 0;
	case AF_INET: {
		struct sockaddr_in sin;
		struct sockaddr_in6 m;

		memcpy(&sin, &l->local, sizeof(sin));
		to_mapped(&m, &sin);
		*out = m.sin6_addr;
		return 0;
	}
	default:
		return -EINVAL;
	}
}

static struct listener *listen_find(uint64_t service_id, const struct in6_addr *addr)
{
	for (struct listener *l = d.listens[listen_bucket(service_id)]; l; l = l->next)
		if (l->service_id == service_id && IN6_ARE_ADDR_EQUAL(&l->addr, addr))
			return l;
	return NULL;
}

/* The listener a REQ for service_id sent to dst belongs to: one bound to
 * dst itself, else to every IPv4 address (for an IPv4 dst), else to any. */
static struct client *listen_match(uint64_t service_id, const struct in6_addr *dst)
{
	struct client *best = NULL;
	int best_rank = 0;

	for (struct listener *l = d.listens[listen_bucket(service_id)]; l; l = l->next) {
		int rank;

		if (l->service_id != service_id)
			continue;
		if (IN6_ARE_ADDR_EQUAL(&l->addr, dst))
			rank = 3;
		else if (addr_is_any4(&l->addr) && IN6_IS_ADDR_V4MAPPED(dst))
			rank = 2;
		else if (IN6_IS_ADDR_UNSPECIFIED(&l->addr))
			rank = 1;
		else
			continue;
		if (rank > best_rank) {
			best_rank = rank;
			best = l->owner;
		}
	}
	return best;
}

static int listen_add(struct client *c, const struct sr_ipc_listen *req)
{
	struct in6_addr addr;
	struct listener *l;
	uint32_t b;

	if (req->flags || listen_addr(req, &addr))
		return -EINVAL;
	l = listen_find(req->service_id, &addr);
	if (l)
		return l->owner == c ? 0 : -EADDRINUSE;
	if (d.nlistens >= LISTEN_MAX)
		return -ENOSPC;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->owner = c;
	l->service_id = req->service_id;
	l->addr = addr;
	b = listen_bucket(req->service_id);
	l->next = d.listens[b];
	d.listens[b] = l;
	d.nlistens++;
	c->nlisten++;
	return 0;
}

static void listen_unlink(struct listener **pp)
{
	struct listener *l = *pp;

	*pp = l->next;
	l->owner->nlisten--;
	d.nlistens--;
	free(l);
}

static int listen_del(struct client *c, const struct sr_ipc_listen *req)
{
	struct in6_addr addr;

	if (req->flags || listen_addr(req, &addr))
		return -EINVAL;
	for (struct listener **pp = &d.listens[listen_bucket(req->service_id)]; *pp; pp = &(*pp)->next) {
		if ((*pp)->service_id != req->service_id || !IN6_ARE_ADDR_EQUAL(&(*pp)->addr, &addr))
			continue;
		if ((*pp)->owner != c)
			return -EPERM;
		listen_unlink(pp);
		return 0;
	}
	return -ENOENT;
}

static void listen_release_all(struct client *c)
{
	for (uint32_t b = 0; b < LISTEN_BUCKETS && c->nlisten; b++) {
		struct listener **pp = &d.listens[b];

		while (*pp) {
			if ((*pp)->owner == c)
				listen_unlink(pp);
			else
				pp = &(*pp)->next;
		}
	}
}

/* ---- REQs routed to a listener ----
 *
 * The passive side's process must also get what the active side sends
 * before it has learnt the passive side's Communication ID: a REQ sent
 * again (lost REP, or the REP is still being made), and a REJ "timeout"
 * when the active side gives up, which names the connection only by the
 * active side's Local Communication ID and CA GUID (in the ARI).  So
 * remember, for a while, where each REQ went.  Bounded in number and
 * age: a peer can make the daemon remember only the last PEER_REQ_MAX. */

static uint32_t rs_bucket(uint32_t comm_id, const uint8_t guid[8])
{
	uint64_t g;

	memcpy(&g, guid, sizeof(g));
	return (uint32_t)(((g ^ comm_id) * 0x9E3779B97F4A7C15ull) >> 32) & (PEER_REQ_BUCKETS - 1);
}

static void rs_age_unlink(struct req_seen *e)
{
	if (e->older)
		e->older->newer = e->newer;
	else
		d.rs_oldest = e->newer;
	if (e->newer)
		e->newer->older = e->older;
	else
		d.rs_newest = e->older;
}

static void rs_unlink(struct req_seen *e)
{
	struct req_seen **pp = &d.rs_hash[rs_bucket(e->comm_id, e->ca_guid)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	rs_age_unlink(e);
	d.rs_n--;
	free(e);
}

static void rs_append(struct req_seen *e, int64_t now)
{
	e->t_ms = now;
	e->newer = NULL;
	e->older = d.rs_newest;
	if (d.rs_newest)
		d.rs_newest->newer = e;
	else
		d.rs_oldest = e;
	d.rs_newest = e;
}

static void rs_expire(int64_t now)
{
	while (d.rs_oldest && now - d.rs_oldest->t_ms > PEER_REQ_TTL_MS)
		rs_unlink(d.rs_oldest);
}

static struct req_seen *rs_find(uint32_t comm_id, const uint8_t guid[8])
{
	rs_expire(now_ms());
	for (struct req_seen *e = d.rs_hash[rs_bucket(comm_id, guid)]; e; e = e->hnext)
		if (e->comm_id == comm_id && !memcmp(e->ca_guid, guid, 8))
			return e;
	return NULL;
}

static void rs_add(uint32_t comm_id, const uint8_t guid[8], struct client *owner)
{
	struct req_seen *e;
	uint32_t b;

	if (d.rs_n >= PEER_REQ_MAX)
		rs_unlink(d.rs_oldest);
	e = calloc(1, sizeof(*e));
	if (!e)
		return;  /* only duplicates and timeout REJs lose their way */
	e->comm_id = comm_id;
	memcpy(e->ca_guid, guid, 8);
	e->owner = owner;
	b = rs_bucket(comm_id, guid);
	e->hnext = d.rs_hash[b];
	d.rs_hash[b] = e;
	d.rs_n++;
	rs_append(e, now_ms());
}

static void rs_release_all(struct client *c)
{
	struct req_seen *e = d.rs_oldest;

	while (e) {
		struct req_seen *next = e->newer;

		if (e->owner == c)
			rs_unlink(e);
		e = next;
	}
}

/* ---- multicast memberships ---- */

static struct mc_group *mc_find(const struct in6_addr *addr, int ifindex)
{
	for (struct mc_group *g = d.mcast; g; g = g->next)
		if (g->ifindex == ifindex && !memcmp(&g->addr, addr, sizeof(*addr)))
			return g;
	return NULL;
}

/* A socket that holds the kernel membership of (addr, ifindex).  It is
 * never bound, so it receives nothing itself: the UDP 4791 sockets do
 * (IP_MULTICAST_ALL).  One per group keeps the kernel's per-socket limit
 * of memberships out of the way.  Returns the fd or -errno. */
static int mc_socket(const struct in6_addr *addr, int ifindex)
{
	bool v4 = IN6_IS_ADDR_V4MAPPED(addr);
	int fd = socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc;

	if (fd < 0)
		return -errno;
	if (v4) {
		struct ip_mreqn mr;

		memset(&mr, 0, sizeof(mr));
		memcpy(&mr.imr_multiaddr, &addr->s6_addr[12], 4);
		mr.imr_ifindex = ifindex;
		rc = setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr));
	} else {
		struct ipv6_mreq mr;

		memset(&mr, 0, sizeof(mr));
		mr.ipv6mr_multiaddr = *addr;
		mr.ipv6mr_interface = (unsigned)ifindex;
		rc = setsockopt(fd, IPPROTO_IPV6, IPV6_ADD_MEMBERSHIP, &mr, sizeof(mr));
	}
	if (rc < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

static int mc_join(struct client *c, const struct sr_ipc_mcast *req)
{
	struct mc_group *g;
	struct mc_member *m;
	char a[INET6_ADDRSTRLEN];

	if (!sr_in6_is_mcast(&req->group) || req->ifindex <= 0 || req->flags)
		return -EINVAL;
	if (!IN6_IS_ADDR_V4MAPPED(&req->group) && d.udp6_fd < 0)
		return -EAFNOSUPPORT;
	g = mc_find(&req->group, req->ifindex);
	if (g) {
		for (m = g->members; m; m = m->next)
			if (m->c == c) {
				if (m->refs == UINT32_MAX)
					return -ENOSPC;
				m->refs++;
				return 0;
			}
	} else if (d.nmcast >= MCAST_MAX_GROUPS) {
		return -ENOSPC;
	}
	if (c->nmcast >= MCAST_MAX_PER_CLIENT)
		return -ENOSPC;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	if (!g) {
		int fd;

		g = calloc(1, sizeof(*g));
		if (!g) {
			free(m);
			return -ENOMEM;
		}
		fd = mc_socket(&req->group, req->ifindex);
		if (fd < 0) {
			free(g);
			free(m);
			return fd;
		}
		g->addr = req->group;
		g->ifindex = req->ifindex;
		g->fd = fd;
		g->next = d.mcast;
		d.mcast = g;
		d.nmcast++;
		inet_ntop(AF_INET6, &g->addr, a, sizeof(a));
		logmsg("joined multicast group %s on ifindex %d", a, g->ifindex);
	}
	m->c = c;
	m->refs = 1;
	m->next = g->members;
	g->members = m;
	g->nmembers++;
	c->nmcast++;
	return 0;
}

/* Drops member *mp of g; the group goes too when it was the last. */
static void mc_unlink_member(struct mc_group *g, struct mc_member **mp)
{
	struct mc_member *m = *mp;

	*mp = m->next;
	g->nmembers--;
	m->c->nmcast--;
	free(m);
	if (!g->nmembers) {
		char a[INET6_ADDRSTRLEN];

		for (struct mc_group **gp = &d.mcast; *gp; gp = &(*gp)->next)
			if (*gp == g) {
				*gp = g->next;
				break;
			}
		d.nmcast--;
		inet_ntop(AF_INET6, &g->addr, a, sizeof(a));
		logmsg("left multicast group %s on ifindex %d", a, g->ifindex);
		close(g->fd);  /* the kernel drops the membership with the socket */
		free(g);
	}
}

static int mc_leave(struct client *c, const struct sr_ipc_mcast *req)
{
	struct mc_group *g = mc_find(&req->group, req->ifindex);

	if (!g)
		return -ENOENT;
	for (struct mc_member **mp = &g->members; *mp; mp = &(*mp)->next)
		if ((*mp)->c == c) {
			if (--(*mp)->refs == 0)
				mc_unlink_member(g, mp);
			return 0;
		}
	return -ENOENT;
}

static void mc_release_all(struct client *c)
{
	struct mc_group *g = d.mcast;

	while (g && c->nmcast) {
		/* unlinking the last member frees g: step first */
		struct mc_group *next = g->next;

		for (struct mc_member **mp = &g->members; *mp; mp = &(*mp)->next)
			if ((*mp)->c == c) {
				mc_unlink_member(g, mp);
				break;
			}
		g = next;
	}
}

/* ---- clients ---- */

static void client_set_events(struct client *c, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = &c->src };

	epoll_ctl(d.epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void client_drop(struct client *c, const char *why)
{
	logmsg("client pid %ld disconnected (%s), freeing %u QPN(s), %u comm ID(s), %u listen(s), "
	       "%u multicast membership(s)%s", (long)c->pid, why, c->nqpn, c->ncomm_id, c->nlisten, c->nmcast,
	       d.qp1_owner == c ? " and QP1" : "");
	epoll_ctl(d.epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	wills_send(c);
	it_release_owner(&d.qpns, c, c->nqpn, qpn_release);
	it_release_owner(&d.comm_ids, c, c->ncomm_id, comm_id_release);
	listen_release_all(c);
	rs_release_all(c);
	mc_release_all(c);
	if (d.qp1_owner == c)
		d.qp1_owner = NULL;
	if (c->prev)
		c->prev->next = c->next;
	else
		d.clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	d.nclients--;
	if (!d.nclients)
		d.idle_since_ms = now_ms();
	free(c->pending);
	free(c);
}

static void set_bufsize(int fd, int opt_force, int opt, int bytes)
{
	/* FORCE ignores [rw]mem_max but needs CAP_NET_ADMIN. */
	if (setsockopt(fd, SOL_SOCKET, opt_force, &bytes, sizeof(bytes)) < 0)
		setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

static void accept_clients(void)
{
	for (;;) {
		struct ucred cred;
		socklen_t clen = sizeof(cred);
		struct epoll_event ev;
		struct client *c;
		int fd = accept4(d.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if ((errno == EMFILE || errno == ENFILE) && d.reserve_fd >= 0) {
				/* Refuse one connection instead of spinning on a
				 * listener that stays readable. */
				close(d.reserve_fd);
				fd = accept4(d.listen_fd, NULL, NULL, SOCK_CLOEXEC);
				if (fd >= 0)
					close(fd);
				d.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
				logmsg("out of file descriptors: refused a client");
				continue;
			}
			return;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->src.kind = SRC_CLIENT;
		c->fd = fd;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
			c->pid = cred.pid;
			c->uid = cred.uid;
		}
		set_bufsize(fd, SO_SNDBUFFORCE, SO_SNDBUF, SOCK_BUF_BYTES);
		ev.events = EPOLLIN;
		ev.data.ptr = &c->src;
		if (epoll_ctl(d.epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			free(c);
			continue;
		}
		c->next = d.clients;
		if (d.clients)
			d.clients->prev = c;
		d.clients = c;
		d.nclients++;
		logmsg("client pid %ld (uid %ld) connected", (long)c->pid, (long)c->uid);
	}
}

/* Returns false if the client had to be dropped. */
static bool client_send_reply(struct client *c, int64_t val, const char *text, size_t tlen)
{
	uint8_t buf[SR_IPC_MAX_MSG];
	struct sr_ipc_hdr h = { .type = SR_IPC_REPLY, .version = SR_IPC_VERSION };
	struct sr_ipc_reply r = { .val = val };
	size_t max = sizeof(buf) - sizeof(h) - sizeof(r);
	size_t len;
	ssize_t n;

	if (tlen > max)
		tlen = max;
	h.len = (uint32_t)(sizeof(r) + tlen);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &r, sizeof(r));
	if (tlen)
		memcpy(buf + sizeof(h) + sizeof(r), text, tlen);
	len = sizeof(h) + h.len;
	n = send(c->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n >= 0)
		return true;
	if (errno != EAGAIN && errno != EWOULDBLOCK) {
		client_drop(c, strerror(errno));
		return false;
	}
	/* The client's queue is full of packets it has not read yet.  Replies
	 * must not be lost (the client waits for each one), so keep it and
	 * stop reading this client's requests until it is sent. */
	c->pending = malloc(len);
	if (!c->pending) {
		client_drop(c, "out of memory for a reply");
		return false;
	}
	memcpy(c->pending, buf, len);
	c->pending_len = (uint32_t)len;
	client_set_events(c, EPOLLOUT);
	logmsg("client pid %ld is not reading: reply deferred", (long)c->pid);
	return true;
}

static bool client_flush(struct client *c)
{
	ssize_t n = send(c->fd, c->pending, c->pending_len, MSG_DONTWAIT | MSG_NOSIGNAL);

	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return true;
		client_drop(c, strerror(errno));
		return false;
	}
	free(c->pending);
	c->pending = NULL;
	c->pending_len = 0;
	client_set_events(c, EPOLLIN);
	return true;
}

/* ---- routing ---- */

static void drop(enum drop_reason r)
{
	d.drops[r]++;
}

/* msg holds hdr + sr_ipc_pkt + datagram, all filled in. */
static void deliver(struct client *c, const uint8_t *msg, size_t len)
{
	if (c->pending) {
		c->dropped_full++;
		drop(DROP_CLIENT_FULL);
		return;
	}
	if (send(c->fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
			c->dropped_full++;
			drop(DROP_CLIENT_FULL);
		} else {
			/* Its EPOLLHUP will reap it. */
			drop(DROP_CLIENT_ERR);
		}
		return;
	}
	c->delivered++;
	d.forwarded++;
}

/* A multicast datagram (msg: hdr + meta + datagram, meta dst = the
 * group): one copy to each client that joined the group on the interface
 * it came in on (ifindex 0: any interface), except from.  Returns whether
 * any client had joined. */
static bool mc_fanout(const struct in6_addr *group, int ifindex, const uint8_t *msg, size_t len,
		      const struct client *from)
{
	bool any = false;

	if (!sr_in6_is_mcast(group))
		return false;
	for (struct mc_group *g = d.mcast; g; g = g->next) {
		if ((ifindex && g->ifindex != ifindex) || memcmp(&g->addr, group, sizeof(*group)))
			continue;
		/* deliver() never frees a client (a failed send leaves it to
		 * its EPOLLHUP), so the list stays valid while we walk it. */
		for (struct mc_member *m = g->members; m; m = m->next) {
			if (m->c == from)
				continue;
			any = true;
			g->delivered++;
			deliver(m->c, msg, len);
		}
	}
	return any;
}

/* ---- the daemon's own CM answers ---- */

/* Token bucket in thousandths of a token, so that rates below one per
 * millisecond still refill. */
static bool tb_take(struct token_bucket *b, int64_t now, uint32_t rate, uint32_t burst)
{
	uint64_t cap = (uint64_t)burst * 1000;

	if (now > b->t_ms) {
		uint64_t add = (uint64_t)(now - b->t_ms) * rate;

		b->milli = b->milli + add > cap ? cap : b->milli + add;
		b->t_ms = now;
	}
	if (b->milli < 1000)
		return false;
	b->milli -= 1000;
	return true;
}

/* Answers go to the address a request claims to come from, which may be
 * forged: limit them per source and in total, so the daemon cannot be
 * used to flood a third party. */
static bool answer_allowed(const struct in6_addr *src)
{
	int64_t now = now_ms();
	uint32_t h = 0;
	struct answer_src *s;

	for (int i = 0; i < 16; i += 4) {
		uint32_t w;

		memcpy(&w, &src->s6_addr[i], 4);
		h = (h ^ w) * 0x9E3779B1u;
	}
	s = &d.answer_src[(h >> 16) & (ANSWER_SRC_SLOTS - 1)];
	if (!s->used || !IN6_ARE_ADDR_EQUAL(&s->addr, src)) {
		s->used = true;
		s->addr = *src;
		s->tb.t_ms = now;
		s->tb.milli = (uint64_t)ANSWER_SRC_BURST * 1000;
	}
	if (!tb_take(&s->tb, now, ANSWER_SRC_RATE, ANSWER_SRC_BURST))
		return false;
	return tb_take(&d.answer_all, now, ANSWER_ALL_RATE, ANSWER_ALL_BURST);
}

static bool addr_unicast(const struct in6_addr *a)
{
	if (IN6_IS_ADDR_V4MAPPED(a)) {
		uint8_t b0 = a->s6_addr[12];

		/* 0/8, 224/4 (multicast) and 240/4 (with 255.255.255.255) */
		return b0 != 0 && b0 < 224;
	}
	return !IN6_IS_ADDR_UNSPECIFIED(a) && !IN6_IS_ADDR_MULTICAST(a);
}

static void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t rd64(const uint8_t *p)
{
	return (uint64_t)rd32(p) << 32 | rd32(p + 4);
}

/* Send a GSI datagram (BTH + DETH + MAD + ICRC slot, GSI_DGRAM_BYTES) from
 * local:4791 to peer:4791, filling in the ICRC.  true if sent. */
static bool gsi_send(uint8_t *pkt, const struct sockaddr_in6 *local, const struct sockaddr_in6 *peer)
{
	bool v4 = IN6_IS_ADDR_V4MAPPED(&peer->sin6_addr);
	struct sr_icrc_env env = { 0 };
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(struct in_pktinfo))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { pkt, GSI_DGRAM_BYTES };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf };
	struct cmsghdr *cm = (struct cmsghdr *)ctl.buf;
	struct sockaddr_in to4;
	struct sockaddr_in6 to6;
	int fd = v4 ? d.udp4_fd : d.udp6_fd;

	if (fd < 0 || v4 != IN6_IS_ADDR_V4MAPPED(&local->sin6_addr))
		return false;
	/* Sent from the 4791 socket, unconnected and with DF set, so IPv4 ID 0. */
	env.ipv6 = !v4;
	env.saddr = local->sin6_addr;
	env.daddr = peer->sin6_addr;
	env.sport = SR_ROCE_UDP_PORT;
	env.dport = SR_ROCE_UDP_PORT;
	env.ipv4_df = true;
	sr_icrc_store(pkt + GSI_DGRAM_BYTES - SR_ICRC_BYTES, sr_icrc_compute(&env, pkt, GSI_DGRAM_BYTES));

	memset(&ctl, 0, sizeof(ctl));
	if (v4) {
		struct in_pktinfo pi = { 0 };

		memset(&to4, 0, sizeof(to4));
		to4.sin_family = AF_INET;
		to4.sin_port = htons(SR_ROCE_UDP_PORT);
		memcpy(&to4.sin_addr, &peer->sin6_addr.s6_addr[12], 4);
		memcpy(&pi.ipi_spec_dst, &local->sin6_addr.s6_addr[12], 4);
		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
		msg.msg_controllen = CMSG_SPACE(sizeof(pi));
		msg.msg_name = &to4;
		msg.msg_namelen = sizeof(to4);
	} else {
		struct in6_pktinfo pi = { 0 };

		to6 = *peer;
		to6.sin6_port = htons(SR_ROCE_UDP_PORT);
		to6.sin6_flowinfo = 0;
		pi.ipi6_addr = local->sin6_addr;
		if (IN6_IS_ADDR_LINKLOCAL(&pi.ipi6_addr))
			pi.ipi6_ifindex = (int)local->sin6_scope_id;
		cm->cmsg_level = IPPROTO_IPV6;
		cm->cmsg_type = IPV6_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
		msg.msg_controllen = CMSG_SPACE(sizeof(pi));
		msg.msg_name = &to6;
		msg.msg_namelen = sizeof(to6);
	}
	return sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0;
}


/* What the kernel's CM sends for a request nobody here takes (cm_issue_rej,
 * SIDR_REP IB_SIDR_UNSUPPORTED, cm_issue_drep): the answer goes to the
 * sender's QP1 from the local address the request came to.  req is a
 * checked GSI datagram.  Returns true if the answer was sent. */
static bool cm_answer(const uint8_t *req, const struct sr_ipc_pkt *meta, uint16_t attr)
{
	const uint8_t *rmad = req + SR_BTH_BYTES + SR_DETH_BYTES;
	uint8_t pkt[GSI_DGRAM_BYTES];
	uint8_t *mad = pkt + SR_BTH_BYTES + SR_DETH_BYTES;
	bool v4 = IN6_IS_ADDR_V4MAPPED(&meta->src.sin6_addr);
	struct sr_pkt h = { 0 };
	int fd = v4 ? d.udp4_fd : d.udp6_fd;

	/* Without the local address the ICRC cannot be right. */
	if (meta->src.sin6_family != AF_INET6 || meta->dst.sin6_family != AF_INET6 ||
	    !addr_unicast(&meta->src.sin6_addr) || !addr_unicast(&meta->dst.sin6_addr) ||
	    v4 != IN6_IS_ADDR_V4MAPPED(&meta->dst.sin6_addr) || fd < 0) {
		d.cm[CM_ANSWER_ERR]++;
		return false;
	}
	if (!answer_allowed(&meta->src.sin6_addr)) {
		d.cm[CM_ANSWER_LIMITED]++;
		return false;
	}

	memset(pkt, 0, sizeof(pkt));
	h.opcode = IBV_OPCODE_UD_SEND_ONLY;
	h.pkey = rd16(req + 2);
	h.dqpn = 1;
	h.ackreq = true;  /* as the kernel's rxe sends MADs */
	h.psn = d.gsi_psn++ & SR_PSN_MASK;
	h.deth_qkey = SR_GSI_QKEY;
	h.deth_sqpn = 1;
	if (sr_pkt_build_hdr(pkt, &h) != SR_BTH_BYTES + SR_DETH_BYTES) {
		d.cm[CM_ANSWER_ERR]++;
		return false;
	}
	mad[0] = MAD_BASE_VERSION;
	mad[1] = MAD_CLASS_CM;
	mad[2] = MAD_CM_CLASS_VERSION;
	mad[3] = MAD_METHOD_SEND;
	memcpy(mad + MAD_OFF_TID, rmad + MAD_OFF_TID, 8);
	switch (attr) {
	case CM_ATTR_REQ:
		wr16(mad + MAD_OFF_ATTR_ID, CM_ATTR_REJ);
		/* Local Communication ID 0: no connection exists on this side.
		 * Message REJected 0 = REQ, no ARI. */
		memcpy(mad + CM_OFF_REMOTE_COMM_ID, rmad + CM_OFF_LOCAL_COMM_ID, 4);
		wr16(mad + CM_OFF_REJ_REASON, CM_REJ_INVALID_SERVICE_ID);
		d.cm[CM_REJ_SENT]++;
		break;
	case CM_ATTR_SIDR_REQ:
		wr16(mad + MAD_OFF_ATTR_ID, CM_ATTR_SIDR_REP);
		memcpy(mad + CM_OFF_SIDR_REQUEST_ID, rmad + CM_OFF_SIDR_REQUEST_ID, 4);
		mad[CM_OFF_SIDR_REP_STATUS] = CM_SIDR_UNSUPPORTED;
		memcpy(mad + CM_OFF_SIDR_REP_SERVICE_ID, rmad + CM_OFF_SIDR_REQ_SERVICE_ID, 8);
		d.cm[CM_SIDR_REP_SENT]++;
		break;
	case CM_ATTR_DREQ:
		wr16(mad + MAD_OFF_ATTR_ID, CM_ATTR_DREP);
		memcpy(mad + CM_OFF_LOCAL_COMM_ID, rmad + CM_OFF_REMOTE_COMM_ID, 4);
		memcpy(mad + CM_OFF_REMOTE_COMM_ID, rmad + CM_OFF_LOCAL_COMM_ID, 4);
		d.cm[CM_DREP_SENT]++;
		break;
	default:
		return false;
	}

	if (!gsi_send(pkt, &meta->dst, &meta->src)) {
		d.cm[CM_ANSWER_ERR]++;
		return false;
	}
	return true;
}

/* A dying client's wills (ipc.h "CM wills"): each MAD goes out once. */
static void wills_send(struct client *c)
{
	while (c->wills) {
		struct will *w = c->wills;
		uint8_t pkt[GSI_DGRAM_BYTES] = { 0 };
		struct sr_pkt h = { 0 };

		c->wills = w->next;
		h.opcode = IBV_OPCODE_UD_SEND_ONLY;
		h.pkey = 0xffff;
		h.dqpn = 1;
		h.ackreq = true;
		h.psn = d.gsi_psn++ & SR_PSN_MASK;
		h.deth_qkey = SR_GSI_QKEY;
		h.deth_sqpn = 1;
		if (sr_pkt_build_hdr(pkt, &h) == SR_BTH_BYTES + SR_DETH_BYTES) {
			memcpy(pkt + SR_BTH_BYTES + SR_DETH_BYTES, w->w.mad, sizeof(w->w.mad));
			if (gsi_send(pkt, &w->w.local, &w->w.peer))
				d.wills_sent++;
		}
		free(w);
	}
}

static void will_drop(struct client *c, uint32_t comm_id)
{
	for (struct will **pp = &c->wills; *pp; pp = &(*pp)->next)
		if ((*pp)->w.comm_id == comm_id) {
			struct will *w = *pp;
			*pp = w->next;
			free(w);
			return;
		}
}

static int will_set(struct client *c, const struct sr_ipc_cm_will *req)
{
	struct id_ent *e = it_find(&d.comm_ids, req->comm_id);

	if (!e || e->owner != c)
		return -ENOENT;
	will_drop(c, req->comm_id);
	if (!req->len)
		return 0;
	if (req->len != sizeof(req->mad) || req->local.sin6_family != AF_INET6 ||
	    req->peer.sin6_family != AF_INET6 ||
	    IN6_IS_ADDR_V4MAPPED(&req->local.sin6_addr) != IN6_IS_ADDR_V4MAPPED(&req->peer.sin6_addr))
		return -EINVAL;
	struct will *w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->w = *req;
	w->next = c->wills;
	c->wills = w;
	return 0;
}

/* ---- CM routing ---- */



/* CM_NCOUNTERS if p is a CM MAD the daemon routes by its IDs, else the
 * counter saying why not. */
static enum cm_counter cm_check(const uint8_t *p, uint32_t len)
{
	const uint8_t *mad = p + SR_BTH_BYTES + SR_DETH_BYTES;

	/* A GSI MAD is exactly 256 bytes, so no pad; TVer 0. */
	if (len != GSI_DGRAM_BYTES || p[0] != IBV_OPCODE_UD_SEND_ONLY || (p[1] & 0x3f))
		return CM_MALFORMED;
	/* The default partition is the only one; GSI takes either membership. */
	if ((rd16(p + 2) & 0x7fff) != 0x7fff || rd32(p + SR_BTH_BYTES) != SR_GSI_QKEY)
		return CM_MALFORMED;
	if (mad[0] != MAD_BASE_VERSION)
		return CM_MALFORMED;
	if (mad[1] != MAD_CLASS_CM)
		return CM_NOT_CM;
	/* ClassPortInfo Get and anything not version 2 have no owner to go to. */
	if (mad[2] != MAD_CM_CLASS_VERSION || mad[3] != MAD_METHOD_SEND)
		return CM_UNSUPPORTED;
	return CM_NCOUNTERS;
}

struct route {
	struct client *to;           /* NULL: not delivered */
	enum drop_reason why;        /* when to is NULL and !answered */
	bool answered;               /* the daemon answered it itself */
	bool mcast;                  /* DestQP 0xFFFFFF: to the group's members */
};

static struct route cm_route(const uint8_t *p, uint32_t len, const struct sr_ipc_pkt *meta)
{
	const uint8_t *mad = p + SR_BTH_BYTES + SR_DETH_BYTES;
	struct route r = { .why = DROP_NO_QP1_OWNER };
	enum cm_counter cause = cm_check(p, len);
	uint16_t attr = 0;

	d.cm_rx++;
	if (cause == CM_NCOUNTERS) {
		attr = rd16(mad + MAD_OFF_ATTR_ID);
		switch (attr) {
		case CM_ATTR_REQ: {
			uint32_t peer_id = rd32(mad + CM_OFF_LOCAL_COMM_ID);
			const uint8_t *guid = mad + CM_OFF_REQ_LOCAL_CA_GUID;
			struct req_seen *e = rs_find(peer_id, guid);

			if (e) {
				r.to = e->owner;
				/* Still connecting: keep it as long as the peer retries. */
				rs_age_unlink(e);
				rs_append(e, now_ms());
				d.cm[CM_TO_REQ_OWNER]++;
				break;
			}
			r.to = listen_match(rd64(mad + CM_OFF_REQ_SERVICE_ID), &meta->dst.sin6_addr);
			if (r.to) {
				rs_add(peer_id, guid, r.to);
				d.cm[CM_TO_LISTENER]++;
			} else {
				cause = CM_NO_LISTENER;
			}
			break;
		}
		case CM_ATTR_SIDR_REQ:
			r.to = listen_match(rd64(mad + CM_OFF_SIDR_REQ_SERVICE_ID), &meta->dst.sin6_addr);
			if (r.to)
				d.cm[CM_TO_LISTENER]++;
			else
				cause = CM_NO_LISTENER;
			break;
		case CM_ATTR_REJ:
			if (rd16(mad + CM_OFF_REJ_REASON) == CM_REJ_TIMEOUT && !rd32(mad + CM_OFF_REMOTE_COMM_ID)) {
				struct req_seen *e = rs_find(rd32(mad + CM_OFF_LOCAL_COMM_ID), mad + CM_OFF_REJ_ARI);

				if (e) {
					r.to = e->owner;
					d.cm[CM_TO_REQ_OWNER]++;
				} else {
					cause = CM_UNKNOWN_ID;
				}
				break;
			}
			/* fall through */
		case CM_ATTR_MRA:
		case CM_ATTR_REP:
		case CM_ATTR_RTU:
		case CM_ATTR_DREQ:
		case CM_ATTR_DREP:
		case CM_ATTR_LAP:
		case CM_ATTR_APR:
			r.to = comm_id_owner(rd32(mad + CM_OFF_REMOTE_COMM_ID));
			if (r.to)
				d.cm[CM_TO_ID_OWNER]++;
			else
				cause = CM_UNKNOWN_ID;
			break;
		case CM_ATTR_SIDR_REP:
			r.to = comm_id_owner(rd32(mad + CM_OFF_SIDR_REQUEST_ID));
			if (r.to)
				d.cm[CM_TO_ID_OWNER]++;
			else
				cause = CM_UNKNOWN_ID;
			break;
		default:
			cause = CM_UNSUPPORTED;
			break;
		}
	}
	if (r.to)
		return r;
	if (cause < CM_NCOUNTERS)
		d.cm[cause]++;
	if (d.qp1_owner) {
		d.cm[CM_TO_QP1_OWNER]++;
		r.to = d.qp1_owner;
		return r;
	}
	if ((cause == CM_NO_LISTENER && (attr == CM_ATTR_REQ || attr == CM_ATTR_SIDR_REQ)) ||
	    (cause == CM_UNKNOWN_ID && attr == CM_ATTR_DREQ))
		r.answered = cm_answer(p, meta, attr);
	return r;
}

static struct route route(const uint8_t *dgram, uint32_t len, const struct sr_ipc_pkt *meta)
{
	struct route r = { .why = DROP_UNKNOWN_QPN };
	uint32_t qpn;
	struct id_ent *e;

	if (len < SR_BTH_BYTES) {
		r.why = DROP_SHORT;
		return r;
	}
	/* BTH: DestQP is the low 24 bits of bytes 4..7. */
	qpn = (uint32_t)dgram[5] << 16 | (uint32_t)dgram[6] << 8 | dgram[7];
	if (qpn == 1)
		return cm_route(dgram, len, meta);
	if (qpn == SR_MCAST_QPN) {
		r.mcast = true;
		r.why = DROP_MCAST_NO_MEMBER;
		return r;
	}
	e = it_find(&d.qpns, qpn);
	r.to = e ? e->owner : NULL;
	return r;
}

static void udp_read(int fd, bool v6)
{
	static struct mmsghdr mh[UDP_BATCH];
	static struct iovec iov[UDP_BATCH];
	static struct sockaddr_storage names[UDP_BATCH];
	static union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(struct in_pktinfo))];
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
			struct sr_ipc_hdr h = { .type = SR_IPC_PKT, .version = SR_IPC_VERSION };
			struct sr_ipc_pkt meta;
			struct msghdr *m = &mh[i].msg_hdr;
			uint32_t len = mh[i].msg_len;
			struct route r;
			int ifindex = 0;

			d.rx_udp++;
			if ((m->msg_flags & MSG_TRUNC) || len > SR_IPC_MAX_PKT) {
				drop(DROP_TOO_BIG);
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
				}
			}
			meta.len = len;
			r = route(slot + PKT_HDRS, len, &meta);
			if (r.mcast) {
				h.len = (uint32_t)sizeof(meta) + len;
				memcpy(slot, &h, sizeof(h));
				memcpy(slot + sizeof(h), &meta, sizeof(meta));
				if (!mc_fanout(&meta.dst.sin6_addr, ifindex, slot, PKT_HDRS + len, NULL))
					drop(r.why);
				continue;
			}
			if (!r.to) {
				if (!r.answered)
					drop(r.why);
				continue;
			}
			h.len = (uint32_t)sizeof(meta) + len;
			memcpy(slot, &h, sizeof(h));
			memcpy(slot + sizeof(h), &meta, sizeof(meta));
			deliver(r.to, slot, PKT_HDRS + len);
		}
		if (got < UDP_BATCH)
			return;
	}
}

/* A datagram a client received on one of its sockets but does not own. */
static void client_pkt(struct client *from, uint8_t *msg, size_t len)
{
	struct sr_ipc_pkt meta;
	struct route r;

	d.rx_client++;
	if (len < PKT_HDRS) {
		drop(DROP_BAD_IPC);
		return;
	}
	memcpy(&meta, msg + sizeof(struct sr_ipc_hdr), sizeof(meta));
	if (meta.len != len - PKT_HDRS) {
		drop(DROP_BAD_IPC);
		return;
	}
	if (meta.len > SR_IPC_MAX_PKT) {
		drop(DROP_TOO_BIG);
		return;
	}
	r = route(msg + PKT_HDRS, meta.len, &meta);
	if (r.mcast) {
		/* not a path multicast takes (flow sockets are bound to a
		 * unicast address), but route it the same way, never back */
		if (!mc_fanout(&meta.dst.sin6_addr, 0, msg, len, from))
			drop(r.why);
		return;
	}
	if (!r.to) {
		if (!r.answered)
			drop(r.why);
		return;
	}
	if (r.to == from) {
		drop(DROP_LOOP);
		return;
	}
	deliver(r.to, msg, len);
}

/* ---- requests ---- */

static size_t status_text(char *buf, size_t cap)
{
	size_t n = 0;
	struct timespec now;
	long up;

#define OUT(...)                                                                    \
	do {                                                                        \
		if (n < cap) {                                                      \
			int k_ = snprintf(buf + n, cap - n, __VA_ARGS__);           \
			n += k_ > 0 ? (size_t)k_ : 0;                               \
		}                                                                   \
	} while (0)

	clock_gettime(CLOCK_MONOTONIC, &now);
	up = (long)(now.tv_sec - d.start.tv_sec);
	OUT("pid %ld\n", (long)getpid());
	OUT("uptime %lds\n", up);
	OUT("socket @%s\n", d.sock_name);
	OUT("udp port %d:%s%s (rcvbuf %d)\n", SR_ROCE_UDP_PORT, d.udp4_fd >= 0 ? " 0.0.0.0" : "",
	    d.udp6_fd >= 0 ? " [::]" : "", d.udp_rcvbuf);
	if (d.idle_exit)
		OUT("idle-exit %ds\n", d.idle_exit);
	else
		OUT("idle-exit never\n");
	OUT("qpns %u\n", d.qpns.n);
	OUT("qp1 owner %ld\n", d.qp1_owner ? (long)d.qp1_owner->pid : 0L);
	OUT("comm ids %u\n", d.comm_ids.n);
	OUT("listens %u\n", d.nlistens);
	OUT("cm peers %u\n", d.rs_n);
	OUT("clients %u\n", d.nclients);
	for (struct client *c = d.clients; c; c = c->next)
		OUT("  client pid %ld uid %ld qpns %u comm_ids %u listens %u%s delivered %llu dropped %llu\n",
		    (long)c->pid, (long)c->uid, c->nqpn, c->ncomm_id, c->nlisten, d.qp1_owner == c ? " qp1" : "",
		    (unsigned long long)c->delivered, (unsigned long long)c->dropped_full);
	OUT("received %llu (udp %llu, from clients %llu)\n", (unsigned long long)(d.rx_udp + d.rx_client),
	    (unsigned long long)d.rx_udp, (unsigned long long)d.rx_client);
	OUT("forwarded %llu\n", (unsigned long long)d.forwarded);
	{
		unsigned long long total = 0;

		for (int i = 0; i < DROP_NREASONS; i++)
			total += d.drops[i];
		OUT("dropped %llu", total);
		for (int i = 0; i < DROP_NREASONS; i++)
			OUT(" %s=%llu", drop_name[i], (unsigned long long)d.drops[i]);
		OUT("\n");
	}
	/* QP1 datagrams: received, then where each went or why it did not. */
	/* one line per rdma_cm listen, for scripts waiting on a server */
	for (uint32_t b = 0; b < LISTEN_BUCKETS; b++)
		for (struct listener *l = d.listens[b]; l; l = l->next) {
			char a[INET6_ADDRSTRLEN];
			inet_ntop(AF_INET6, &l->addr, a, sizeof(a));
			OUT("listen service 0x%016llx addr %s pid %ld\n", (unsigned long long)l->service_id, a,
			    (long)l->owner->pid);
		}
	OUT("cm wills sent %llu\n", (unsigned long long)d.wills_sent);
	OUT("cm rx=%llu", (unsigned long long)d.cm_rx);
	for (int i = 0; i < CM_NCOUNTERS; i++)
		OUT(" %s=%llu", cm_name[i], (unsigned long long)d.cm[i]);
	OUT("\n");
	OUT("mcast groups %u\n", d.nmcast);
	for (struct mc_group *g = d.mcast; g; g = g->next) {
		char a[INET6_ADDRSTRLEN];

		inet_ntop(AF_INET6, &g->addr, a, sizeof(a));
		OUT("mcast group %s ifindex %d clients %u delivered %llu\n", a, g->ifindex, g->nmembers,
		    (unsigned long long)g->delivered);
	}
#undef OUT
	return n < cap ? n : cap;
}

/* Returns false if the client was dropped. */
static bool client_request(struct client *c, const struct sr_ipc_hdr *h, const uint8_t *body, size_t blen,
			   bool truncated)
{
	struct sr_ipc_qpn q;
	int64_t val;

	if (h->version != SR_IPC_VERSION)
		return client_send_reply(c, -EPROTO, NULL, 0);
	if (truncated || h->len != blen)
		return client_send_reply(c, -EINVAL, NULL, 0);
	switch (h->type) {
	case SR_IPC_HELLO:
		if (blen < sizeof(struct sr_ipc_hello))
			return client_send_reply(c, -EINVAL, NULL, 0);
		memcpy(&c->hello_pid, body, sizeof(c->hello_pid));
		return client_send_reply(c, getpid(), NULL, 0);
	case SR_IPC_ALLOC_QPN:
		val = qpn_alloc(c);
		return client_send_reply(c, val, NULL, 0);
	case SR_IPC_FREE_QPN: {
		struct id_ent *e;

		if (blen < sizeof(q))
			return client_send_reply(c, -EINVAL, NULL, 0);
		memcpy(&q, body, sizeof(q));
		/* QP1 is claimed, not allocated; freeing it gives the claim up. */
		if (q.qpn == 1) {
			if (d.qp1_owner != c)
				return client_send_reply(c, -ENOENT, NULL, 0);
			d.qp1_owner = NULL;
			return client_send_reply(c, 0, NULL, 0);
		}
		e = it_find(&d.qpns, q.qpn);
		if (!e)
			return client_send_reply(c, -ENOENT, NULL, 0);
		if (e->owner != c)
			return client_send_reply(c, -EPERM, NULL, 0);
		qpn_release(e);
		return client_send_reply(c, 0, NULL, 0);
	}
	case SR_IPC_CLAIM_QP1:
		if (d.qp1_owner && d.qp1_owner != c)
			return client_send_reply(c, -EBUSY, NULL, 0);
		d.qp1_owner = c;
		return client_send_reply(c, 0, NULL, 0);
	case SR_IPC_ALLOC_COMM_ID:
		return client_send_reply(c, comm_id_alloc(c), NULL, 0);
	case SR_IPC_FREE_COMM_ID: {
		struct sr_ipc_comm_id b;
		struct id_ent *e;

		if (blen < sizeof(b))
			return client_send_reply(c, -EINVAL, NULL, 0);
		memcpy(&b, body, sizeof(b));
		e = it_find(&d.comm_ids, b.comm_id);
		if (!e)
			return client_send_reply(c, -ENOENT, NULL, 0);
		if (e->owner != c)
			return client_send_reply(c, -EPERM, NULL, 0);
		will_drop(c, b.comm_id);
		comm_id_release(e);
		return client_send_reply(c, 0, NULL, 0);
	}
	case SR_IPC_LISTEN:
	case SR_IPC_UNLISTEN: {
		struct sr_ipc_listen b;

		if (blen < sizeof(b))
			return client_send_reply(c, -EINVAL, NULL, 0);
		memcpy(&b, body, sizeof(b));
		val = h->type == SR_IPC_LISTEN ? listen_add(c, &b) : listen_del(c, &b);
		return client_send_reply(c, val, NULL, 0);
	}
	case SR_IPC_CM_WILL: {
		struct sr_ipc_cm_will b;

		if (blen < sizeof(b))
			return client_send_reply(c, -EINVAL, NULL, 0);
		memcpy(&b, body, sizeof(b));
		return client_send_reply(c, will_set(c, &b), NULL, 0);
	}
	case SR_IPC_MCAST_JOIN:
	case SR_IPC_MCAST_LEAVE: {
		struct sr_ipc_mcast b;

		if (blen < sizeof(b))
			return client_send_reply(c, -EINVAL, NULL, 0);
		memcpy(&b, body, sizeof(b));
		val = h->type == SR_IPC_MCAST_JOIN ? mc_join(c, &b) : mc_leave(c, &b);
		return client_send_reply(c, val, NULL, 0);
	}
	case SR_IPC_STATUS: {
		char text[SR_IPC_MAX_MSG - sizeof(struct sr_ipc_hdr) - sizeof(struct sr_ipc_reply)];
		size_t n = status_text(text, sizeof(text));

		return client_send_reply(c, d.nclients, text, n);
	}
	case SR_IPC_REPLY:
		return client_send_reply(c, -EINVAL, NULL, 0);
	default:
		return client_send_reply(c, -EOPNOTSUPP, NULL, 0);
	}
}

static void client_read(struct client *c)
{
	for (int i = 0; i < CLIENT_MSGS_PER_WAKEUP && !c->pending; i++) {
		struct iovec iov = { d.cbuf, SR_IPC_MAX_MSG };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
		struct sr_ipc_hdr h;
		ssize_t n = recvmsg(c->fd, &msg, MSG_DONTWAIT);
		bool ok;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				client_drop(c, strerror(errno));
			return;
		}
		if (n == 0) {
			client_drop(c, "closed");
			return;
		}
		if ((size_t)n < sizeof(h)) {
			/* Not even a header: it cannot be routed nor answered in a
			 * way the client could match, so the stream is lost. */
			client_drop(c, "malformed message");
			return;
		}
		memcpy(&h, d.cbuf, sizeof(h));
		if (h.type == SR_IPC_PKT) {
			if (h.version != SR_IPC_VERSION || (msg.msg_flags & MSG_TRUNC) ||
			    h.len != (size_t)n - sizeof(h)) {
				d.rx_client++;
				drop(DROP_BAD_IPC);
				continue;
			}
			client_pkt(c, d.cbuf, (size_t)n);
			continue;
		}
		ok = client_request(c, &h, d.cbuf + sizeof(h), (size_t)n - sizeof(h),
				    (msg.msg_flags & MSG_TRUNC) != 0);
		if (!ok)
			return;
	}
}

/* ---- setup ---- */

static int open_listener(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(d.sock_name);
	int fd;

	if (n == 0 || n + 1 > sizeof(sa.sun_path))
		die("socket name '%s' is empty or too long", d.sock_name);
	memcpy(sa.sun_path + 1, d.sock_name, n);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket(AF_UNIX): %s", strerror(errno));
	if (bind(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0) {
		int e = errno;

		close(fd);
		if (e == EADDRINUSE)
			return -EADDRINUSE;
		die("bind @%s: %s", d.sock_name, strerror(e));
	}
	if (listen(fd, SOMAXCONN) < 0)
		die("listen @%s: %s", d.sock_name, strerror(errno));
	return fd;
}

static int open_udp(int family)
{
	int one = 1, fd;
	socklen_t optlen = sizeof(d.udp_rcvbuf);
	union {
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} sa;
	socklen_t salen;

	fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		if (family == AF_INET6 && (errno == EAFNOSUPPORT || errno == EPROTONOSUPPORT)) {
			logmsg("IPv6 not available: listening on IPv4 only");
			return -1;
		}
		die("socket(UDP): %s", strerror(errno));
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)
		die("SO_REUSEPORT: %s", strerror(errno));
	memset(&sa, 0, sizeof(sa));
	if (family == AF_INET) {
		/* The CM answers sent from this socket carry an ICRC computed
		 * for IPv4 ID 0, which the kernel writes only with DF set. */
		int pmtu = IP_PMTUDISC_DO;

		if (setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one)) < 0 ||
		    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) < 0)
			die("IPv4 socket options: %s", strerror(errno));
		sa.v4.sin_family = AF_INET;
		sa.v4.sin_port = htons(SR_ROCE_UDP_PORT);
		sa.v4.sin_addr.s_addr = htonl(INADDR_ANY);
		salen = sizeof(sa.v4);
	} else {
		/* IPv4 has its own socket; a dual-stack one would split the
		 * reuseport groups that flow sockets join. */
		if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0 ||
		    setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one)) < 0)
			die("IPv6 socket options: %s", strerror(errno));
		sa.v6.sin6_family = AF_INET6;
		sa.v6.sin6_port = htons(SR_ROCE_UDP_PORT);
		sa.v6.sin6_addr = in6addr_any;
		salen = sizeof(sa.v6);
	}
	set_bufsize(fd, SO_RCVBUFFORCE, SO_RCVBUF, SOCK_BUF_BYTES);
	if (bind(fd, (struct sockaddr *)&sa, salen) < 0) {
		int e = errno;

		if (family == AF_INET6 && e == EADDRNOTAVAIL) {
			logmsg("IPv6 disabled: listening on IPv4 only");
			close(fd);
			return -1;
		}
		die("bind UDP %s:%d: %s%s", family == AF_INET ? "0.0.0.0" : "[::]", SR_ROCE_UDP_PORT, strerror(e),
		    e == EADDRINUSE ? " (held without SO_REUSEPORT, by another user, or by the kernel's rdma_rxe)" : "");
	}
	if (family == AF_INET)
		getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &d.udp_rcvbuf, &optlen);
	return fd;
}

static void epoll_add(int fd, struct evsrc *src, enum src_kind kind)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = src };

	src->kind = kind;
	if (epoll_ctl(d.epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl: %s", strerror(errno));
}

static void close_fds_from(int first)
{
	DIR *dir;

	if (close_range((unsigned)first, ~0u, 0) == 0)
		return;
	/* Kernels before 5.9. */
	dir = opendir("/proc/self/fd");
	if (dir) {
		int dfd = dirfd(dir);
		struct dirent *de;

		while ((de = readdir(dir))) {
			int fd = atoi(de->d_name);

			if (fd >= first && fd != dfd && de->d_name[0] != '.')
				close(fd);
		}
		closedir(dir);
		return;
	}
	for (int fd = first; fd < 65536; fd++)
		close(fd);
}

static void redirect_stdio(void)
{
	const char *log = getenv("SOFTRDMA_DAEMON_LOG");
	int in = open("/dev/null", O_RDWR | O_CLOEXEC);
	int out = -1;

	if (log && log[0])
		out = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (out < 0)
		out = in;
	if (in >= 0) {
		dup2(in, STDIN_FILENO);
		dup2(out, STDOUT_FILENO);
		dup2(out, STDERR_FILENO);
		if (in > STDERR_FILENO)
			close(in);
		if (out > STDERR_FILENO && out != in)
			close(out);
	}
}

/* --background: the parent waits on a pipe until the child is listening
 * (or failed, or found another daemon), so the spawner can connect at once. */
static void go_background(void)
{
	int pfd[2];
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		die("pipe: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid > 0) {
		char msg[512];
		size_t got = 0;
		ssize_t n;

		close(pfd[1]);
		while (got < sizeof(msg) - 1 && (n = read(pfd[0], msg + got, sizeof(msg) - 1 - got)) != 0) {
			if (n < 0) {
				if (errno == EINTR)
					continue;
				break;
			}
			got += (size_t)n;
		}
		msg[got] = 0;
		if (got && msg[0] == 'R')
			_exit(0);
		if (got && msg[0] == 'X')
			_exit(0);
		if (got && msg[0] == 'E')
			fprintf(stderr, "softrdmad: %s\n", msg + 1);
		else
			fprintf(stderr, "softrdmad: daemon exited during startup\n");
		_exit(1);
	}
	close(pfd[0]);
	setsid();
	/* Keep only stdio and the pipe: anything else inherited (a test
	 * runner's output pipe, a client's sockets) would be held for the
	 * daemon's whole life. */
	if (pfd[1] != 3) {
		if (dup2(pfd[1], 3) < 0)
			die("dup2: %s", strerror(errno));
		close(pfd[1]);
	}
	fcntl(3, F_SETFD, FD_CLOEXEC);
	d.ready_fd = 3;
	close_fds_from(4);
}

static void signal_ready(char code)
{
	if (d.ready_fd < 0)
		return;
	if (write(d.ready_fd, &code, 1) < 0) {
		/* The parent is gone; nobody to tell. */
	}
	close(d.ready_fd);
	d.ready_fd = -1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: softrdmad [--background | --foreground] [--idle-exit SECS]\n"
		"\n"
		"The softrdma per-host daemon: owns UDP port 4791 (RoCEv2), allocates QP\n"
		"numbers host-wide and forwards datagrams to the process owning their\n"
		"destination QP; on QP1 it routes CM MADs to the process listening or\n"
		"owning the connection and rejects requests nobody takes.  Processes\n"
		"using softrdma start it on demand; so does `softrdma-cfg start`.\n"
		"One daemon per network namespace.\n"
		"\n"
		"  --background      detach; exit 0 once the daemon is ready (or one is\n"
		"                    already running), 1 with a message if it failed\n"
		"  --foreground      stay attached, log to stderr (default)\n"
		"  --idle-exit SECS  exit after SECS seconds without clients (default 30;\n"
		"                    0 = never)\n"
		"  --help            this text\n"
		"\n"
		"Environment: SOFTRDMA_DAEMON_SOCK  abstract socket name (default %s)\n"
		"             SOFTRDMA_DAEMON_LOG   log file for --background (default none)\n",
		SR_IPC_SOCK_NAME);
}

static void parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "background", no_argument, NULL, 'b' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "idle-exit", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int o;

	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'b':
			d.background = true;
			break;
		case 'f':
			d.background = false;
			break;
		case 'i': {
			char *end;
			long v;

			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || v < 0 || v > INT_MAX / 1000) {
				fprintf(stderr, "softrdmad: bad --idle-exit '%s' (seconds, 0 = never)\n", optarg);
				exit(2);
			}
			d.idle_exit = (int)v;
			break;
		}
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "softrdmad: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		exit(2);
	}
}

static void setup(void)
{
	sigset_t set;
	struct rlimit rl;
	int fd;

	d.sock_name = getenv("SOFTRDMA_DAEMON_SOCK");
	if (!d.sock_name || !d.sock_name[0])
		d.sock_name = SR_IPC_SOCK_NAME;

	fd = open_listener();
	if (fd == -EADDRINUSE) {
		if (d.background) {
			signal_ready('X');
			_exit(0);
		}
		die("already running (socket @%s is in use)", d.sock_name);
	}
	d.listen_fd = fd;
	d.udp4_fd = open_udp(AF_INET);
	d.udp6_fd = open_udp(AF_INET6);

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		die("sigprocmask: %s", strerror(errno));
	d.sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (d.sig_fd < 0)
		die("signalfd: %s", strerror(errno));

	d.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (d.epfd < 0)
		die("epoll_create1: %s", strerror(errno));
	epoll_add(d.listen_fd, &d.ev_listen, SRC_LISTEN);
	epoll_add(d.udp4_fd, &d.ev_udp4, SRC_UDP4);
	if (d.udp6_fd >= 0)
		epoll_add(d.udp6_fd, &d.ev_udp6, SRC_UDP6);
	epoll_add(d.sig_fd, &d.ev_signal, SRC_SIGNAL);

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	d.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	d.udp_slots = aligned_alloc(8, UDP_BATCH * SLOT_BYTES);
	d.cbuf = aligned_alloc(8, (SR_IPC_MAX_MSG + 7) & ~(size_t)7);
	if (!d.udp_slots || !d.cbuf)
		die("out of memory");
	d.next_qpn = QPN_FIRST;
	/* A restarted daemon must not hand out the IDs its predecessor did:
	 * peers may still hold connections named by them. */
	if (getrandom(&d.next_comm_id, sizeof(d.next_comm_id), GRND_NONBLOCK) != sizeof(d.next_comm_id)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		d.next_comm_id = ((uint32_t)ts.tv_nsec ^ (uint32_t)ts.tv_sec * 0x9E3779B1u) * 0x85EBCA6Bu ^
				 (uint32_t)getpid();
	}
	d.answer_all.milli = (uint64_t)ANSWER_ALL_BURST * 1000;
	d.answer_all.t_ms = now_ms();
	clock_gettime(CLOCK_MONOTONIC, &d.start);
	d.idle_since_ms = now_ms();
}

static void shutdown_all(void)
{
	while (d.clients)
		client_drop(d.clients, "daemon exiting");
	close(d.listen_fd);
	close(d.udp4_fd);
	if (d.udp6_fd >= 0)
		close(d.udp6_fd);
	close(d.sig_fd);
	close(d.epfd);
	free(d.qpns.e);
	free(d.comm_ids.e);
	free(d.udp_slots);
	free(d.cbuf);
}

int main(int argc, char **argv)
{
	struct epoll_event evs[64];
	bool running = true;
	int fd;

	/* With stdio closed by our spawner, the sockets below would land on
	 * fds 0-2 and be clobbered by the stdio redirection. */
	do
		fd = open("/dev/null", O_RDWR);
	while (fd >= 0 && fd <= STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);

	parse_args(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);

	if (d.background)
		go_background();
	setup();
	if (d.background) {
		if (chdir("/") < 0) {
			/* "/" always exists; nothing useful to do if not. */
		}
		redirect_stdio();
	}
	logmsg("started: socket @%s, UDP %d%s, idle-exit %ds", d.sock_name, SR_ROCE_UDP_PORT,
	       d.udp6_fd >= 0 ? " (IPv4 and IPv6)" : " (IPv4)", d.idle_exit);
	signal_ready('R');

	while (running) {
		int timeout = -1, n;

		if (!d.nclients && d.idle_exit > 0) {
			int64_t left = d.idle_since_ms + (int64_t)d.idle_exit * 1000 - now_ms();

			if (left <= 0) {
				/* A client may be sitting in the accept queue. */
				accept_clients();
				if (!d.nclients) {
					logmsg("no clients for %ds: exiting", d.idle_exit);
					break;
				}
				continue;
			}
			timeout = (int)left;
		}
		n = epoll_wait(d.epfd, evs, (int)(sizeof(evs) / sizeof(evs[0])), timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			logmsg("epoll_wait: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n && running; i++) {
			struct evsrc *src = evs[i].data.ptr;

			switch (src->kind) {
			case SRC_LISTEN:
				accept_clients();
				break;
			case SRC_UDP4:
				udp_read(d.udp4_fd, false);
				break;
			case SRC_UDP6:
				udp_read(d.udp6_fd, true);
				break;
			case SRC_SIGNAL: {
				struct signalfd_siginfo si;

				if (read(d.sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
					logmsg("signal %u from pid %u: exiting", si.ssi_signo, si.ssi_pid);
					running = false;
				}
				break;
			}
			case SRC_CLIENT: {
				struct client *c = (struct client *)src;

				/* Events for one client come in one entry, and a client
				 * is only freed while handling its own entry, so the
				 * pointer is still valid here. */
				if (evs[i].events & EPOLLOUT) {
					if (!client_flush(c))
						break;
				}
				if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
					if (c->pending && (evs[i].events & (EPOLLHUP | EPOLLERR)))
						client_drop(c, "hung up");
					else if (!c->pending)
						client_read(c);
				}
				break;
			}
			}
		}
	}
	shutdown_all();
	return 0;
}

