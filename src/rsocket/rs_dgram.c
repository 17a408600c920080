/* Datagram rsockets: rsocket(AF_INET/AF_INET6, SOCK_DGRAM, 0), as
 * rdma-core's librdmacm carries them, so that either end may be rdma-core.
 *
 * Each datagram rsocket owns a real UDP socket bound to the address the
 * application binds (or the kernel picks), and one UD QP per local source
 * address it sends from or is reached on: an rdma_cm id of RDMA_PS_UDP bound
 * to that address and the UDP socket's port, Q_Key RDMA_UDP_QKEY
 * (0x01234567).  A peer is known by its socket address; the first datagrams
 * to it, while its QPN is unknown, go over the UDP socket with a header in
 * front; the peer answers each with a header-only control message carrying
 * its own QPN, and from then on datagrams go as UD sends to that QPN.
 *
 * The two headers (rdma-core's struct ds_udp_header and struct ds_header)
 * are built and checked in rs_dgram_wire.c; rs_dgram_wire.h shows them.
 *
 * The receiver reports the header's address and port as recvfrom's source.
 * Every receive is a 2048-byte slot (RS_SNDLOWAT) after the GRH, and the
 * resolution message is read into 2048 bytes: a datagram carries at most
 * 2048 bytes minus the UDP header (2032 over IPv4, 2020 over IPv6), less
 * if the port's MTU is smaller.
 *
 * Unlike rdma-core there is no service thread: the UDP socket is one more
 * descriptor in the rsocket's epoll set, read (resolution messages
 * answered, address handles made, data queued) by whichever call on the
 * socket runs next, at once after a sleep ends, else at most every
 * millisecond.  A datagram that arrives over UDP is queued in the
 * process, not looped back through the QP as rdma-core does; that loop
 * never leaves the host.
 *
 * Locking: rs->lock guards everything of the socket.  rclose waits for
 * the calls under way on it (rs->users, taken with the descriptor
 * table's lock held) after waking them; they return EBADF. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <infiniband/verbs.h>

#include "common/sock.h"
#include "rsocket/rs_dgram_wire.h"
#include "rsocket/rsocket.h"

/* ---- the wire ------------------------------------------------------------- */

#define DS_GRH_LEN 40
#define DS_SLOT RS_SNDLOWAT /* bytes per send or receive buffer */

/* ---- state ------------------------------------------------------------------ */

#define DS_UDP_CHECK_US 1000  /* the UDP socket is read at least this often by a busy caller */
#define DS_CLOSE_WAIT_MS 2000 /* rclose waits this long for posted sends */
/* Peers learnt from datagrams the application has not sent to are kept
 * (their address handle, so that an answer goes as a UD send at once) up
 * to this many; past it the oldest is forgotten.  Spoofed sources cannot
 * grow the process without bound, and a forgotten peer still reaches the
 * socket: its UD datagrams need no state here, and an answer to it
 * resolves it again over UDP. */
#define DS_MAX_UNSOLICITED_PEERS 1024

struct ds_qp {
	struct ds_qp *next;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_mr *smr; /* the socket's send slots, registered with this PD */
	struct ibv_mr *rmr;
	uint8_t *rbuf; /* rq_size slots, then the GRH landing area */
	bool armed;
	bool in_epoll;
	struct sockaddr_storage src; /* bound address: the source we send from */
	struct ds_header hdr;	     /* what goes in front of every UD datagram */
	uint32_t max_data;	     /* largest payload (slot and MTU) */
};

/* tsearch key: an address made comparable (no padding, no sin_zero) */
struct ds_key {
	uint32_t family;
	uint32_t port;
	uint32_t scope;
	uint8_t addr[16];
};

struct ds_dest {
	struct ds_key key;    /* first: the tree compares dests as keys */
	struct ds_dest *next; /* in dg->dests, or the unsolicited FIFO */
	struct ds_dest *prev; /* in the unsolicited FIFO only */
	bool unsolicited;     /* learnt from a datagram, not yet sent to */
	struct sockaddr_storage addr;
	socklen_t addrlen;
	struct ds_qp *qp;  /* ours that talks to it */
	struct ibv_ah *ah; /* NULL until its QPN is known */
	uint32_t qpn;
};

struct ds_ah_old {
	struct ds_ah_old *next;
	struct ibv_ah *ah;
};

/* a received datagram not yet read: in a QP's slot, or copied from UDP */
struct ds_msg {
	struct ds_qp *qp;
	uint32_t offset, length; /* qp: slot offset, bytes after the GRH */
	struct ds_udp_msg *um;
};

struct ds_udp_msg {
	struct sockaddr_storage src;
	uint32_t len;
	uint8_t data[];
};

struct rs_dgram {
	int udp_fd;
	bool ep_ready; /* buffers sized and made (bind, connect or first send) */
	bool bound;
	bool shut_rd, shut_wr;
	int err; /* an ICMP error the UDP socket reported, for the next send */
	uint64_t last_udp_us;

	struct ds_qp *qps;
	void *dest_tree;
	struct ds_dest *dests;		 /* peers the application sent or connected to */
	struct ds_dest *u_head, *u_tail; /* the others, oldest first */
	uint32_t u_count;
	struct ds_dest *conn_dest; /* rconnect's */
	struct ds_ah_old *old_ahs; /* replaced AHs: posted sends may still use them */

	uint8_t *sbuf;	 /* sq_size slots */
	uint32_t *sfree; /* free slot indexes, a stack */
	int sfree_n;

	struct ds_msg *ring;
	uint32_t ring_cap, ring_head, ring_n;
	uint32_t udp_queued;
};

/* ---- small helpers ----------------------------------------------------------- */

static socklen_t ds_addrlen(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

static void ds_make_key(const struct sockaddr *sa, struct ds_key *k)
{
	memset(k, 0, sizeof(*k));
	k->family = sa->sa_family;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)sa;
		k->port = s->sin_port;
		memcpy(k->addr, &s->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *s = (const void *)sa;
		k->port = s->sin6_port;
		k->scope = s->sin6_scope_id;
		memcpy(k->addr, &s->sin6_addr, 16);
	}
}

static int ds_key_cmp(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct ds_key));
}

static bool ds_same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	struct ds_key ka, kb;

	ds_make_key(a, &ka);
	ds_make_key(b, &kb);
	return !ds_key_cmp(&ka, &kb);
}

static bool ds_any_or_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		in_addr_t a = ((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr;
		return a == htonl(INADDR_ANY) || a == htonl(INADDR_LOOPBACK);
	}
	const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
	return IN6_IS_ADDR_UNSPECIFIED(a6) || IN6_IS_ADDR_LOOPBACK(a6);
}

/* as recvfrom(2): copy what fits, say how long the address is */
static void ds_put_addr(struct sockaddr *dst, socklen_t *len, const struct sockaddr_storage *src)
{
	socklen_t size = ds_addrlen((const struct sockaddr *)src);

	if (!dst || !len)
		return;
	memcpy(dst, src, *len < size ? *len : size);
	*len = size;
}

static int ds_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -1 : 0;
}

static size_t ds_iov_len(const struct iovec *iov, int iovcnt)
{
	size_t n = 0;

	for (int i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* ---- the descriptor's calls: enter, leave, close --------------------------------- */

struct rsocket *ds_enter(int fd)
{
	struct rsocket *rs = rs_lookup_dgram(fd); /* counted in users */

	if (rs)
		pthread_mutex_lock(&rs->lock);
	return rs;
}

/* lock held: one call less; the closer may be waiting for it */
static void ds_drop_user(struct rsocket *rs)
{
	__atomic_fetch_sub(&rs->users, 1, __ATOMIC_ACQ_REL);
	if (rs->closing)
		pthread_cond_broadcast(&rs->cond);
}

ssize_t ds_leave(struct rsocket *rs, ssize_t ret)
{
	int e = errno;

	ds_drop_user(rs);
	pthread_mutex_unlock(&rs->lock);
	errno = e;
	return ret;
}

/* rpoll's reference, taken by rs_lookup_dgram, without the lock */
void ds_unref(struct rsocket *rs)
{
	pthread_mutex_lock(&rs->lock);
	ds_drop_user(rs);
	pthread_mutex_unlock(&rs->lock);
}

int ds_create(struct rsocket *rs)
{
	struct rs_dgram *dg = calloc(1, sizeof(*dg));

	if (!dg)
		return rs_fail(ENOMEM);
	rs->dg = dg;
	/* the system call: a preloaded socket() wrapper must not see it */
	dg->udp_fd = sr_socket(rs->domain, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (dg->udp_fd < 0)
		return -1;
	return rs_epoll_add(rs, dg->udp_fd);
}

/* ---- queue pairs ------------------------------------------------------------------ */

static int ds_find_gid(struct ibv_context *verbs, uint8_t port, const union ibv_gid *want)
{
	struct ibv_port_attr pa;
	union ibv_gid g;

	if (ibv_query_port(verbs, port, &pa))
		return -1;
	for (int i = 0; i < pa.gid_tbl_len; i++)
		if (!ibv_query_gid(verbs, port, i, &g) && !memcmp(&g, want, sizeof(g)))
			return i;
	return -1;
}

static void ds_addr_to_gid(const struct sockaddr *sa, union ibv_gid *g)
{
	memset(g, 0, sizeof(*g));
	if (sa->sa_family == AF_INET) {
		g->raw[10] = 0xff;
		g->raw[11] = 0xff;
		memcpy(&g->raw[12], &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
	} else {
		memcpy(g->raw, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
	}
}

static void ds_free_qp(struct rsocket *rs, struct ds_qp *qp)
{
	if (qp->id && qp->id->qp)
		rdma_destroy_qp(qp->id);
	if (qp->cq)
		ibv_destroy_cq(qp->cq);
	if (qp->ch) {
		if (qp->in_epoll)
			epoll_ctl(rs->index, EPOLL_CTL_DEL, qp->ch->fd, NULL);
		ibv_destroy_comp_channel(qp->ch);
	}
	if (qp->smr)
		ibv_dereg_mr(qp->smr);
	if (qp->rmr)
		ibv_dereg_mr(qp->rmr);
	if (qp->pd)
		ibv_dealloc_pd(qp->pd);
	if (qp->id)
		rdma_destroy_id(qp->id);
	free(qp->rbuf);
	free(qp);
}

static int ds_post_recv(struct rsocket *rs, struct ds_qp *qp, uint32_t offset)
{
	struct ibv_sge sge[2] = {
		{ .addr = (uintptr_t)(qp->rbuf + (size_t)rs->rq_size * DS_SLOT),
		  .length = DS_GRH_LEN,
		  .lkey = qp->rmr->lkey },
		{ .addr = (uintptr_t)(qp->rbuf + offset), .length = DS_SLOT, .lkey = qp->rmr->lkey },
	};
	struct ibv_recv_wr wr = { .wr_id = RS_WR_ID_RECV | offset, .sg_list = sge, .num_sge = 2 }, *bad;
	int err = ibv_post_recv(qp->id->qp, &wr, &bad);

	return err ? rs_fail(err) : 0;
}

/* room in the ring for every receive a QP has posted, and the UDP queue */
static int ds_grow_ring(struct rs_dgram *dg, uint32_t cap)
{
	struct ds_msg *r;

	if (cap <= dg->ring_cap)
		return 0;
	r = calloc(cap, sizeof(*r));
	if (!r)
		return rs_fail(ENOMEM);
	for (uint32_t i = 0; i < dg->ring_n; i++)
		r[i] = dg->ring[(dg->ring_head + i) % dg->ring_cap];
	free(dg->ring);
	dg->ring = r;
	dg->ring_cap = cap;
	dg->ring_head = 0;
	return 0;
}

static uint32_t ds_nqp(const struct rs_dgram *dg)
{
	uint32_t n = 0;

	for (const struct ds_qp *q = dg->qps; q; q = q->next)
		n++;
	return n;
}

/* A UD QP for one local source address (the UDP socket's port). */
static int ds_create_qp(struct rsocket *rs, const struct sockaddr *src, struct ds_qp **out)
{
	struct rs_dgram *dg = rs->dg;
	struct ds_qp *qp = calloc(1, sizeof(*qp));
	struct ibv_qp_init_attr qa;
	struct ibv_port_attr pa;
	struct epoll_event ev = { .events = EPOLLIN };
	uint32_t mtu, hdr_max;
	int e;

	if (!qp)
		return rs_fail(ENOMEM);
	memcpy(&qp->src, src, ds_addrlen(src));
	ds_hdr_format(&qp->hdr, src);
	if (rdma_create_id(NULL, &qp->id, qp, RDMA_PS_UDP) || rdma_bind_addr(qp->id, (struct sockaddr *)src))
		goto err;
	if (!qp->id->verbs) {
		errno = ENODEV;
		goto err;
	}
	/* as on the kernel's siw: an iWARP device has no UD QPs */
	if (qp->id->verbs->device->transport_type == IBV_TRANSPORT_IWARP) {
		errno = EOPNOTSUPP;
		goto err;
	}
	if (ibv_query_port(qp->id->verbs, qp->id->port_num ? qp->id->port_num : 1, &pa))
		goto err;
	mtu = 128u << pa.active_mtu;
	hdr_max = qp->hdr.version == 4 ? DS_UDP_IPV4_HDR_LEN : DS_UDP_IPV6_HDR_LEN;
	qp->max_data = DS_SLOT - hdr_max;
	if (mtu - qp->hdr.length < qp->max_data)
		qp->max_data = mtu - qp->hdr.length;

	qp->pd = ibv_alloc_pd(qp->id->verbs);
	qp->rbuf = calloc((size_t)rs->rq_size * DS_SLOT + DS_GRH_LEN, 1);
	if (!qp->pd || !qp->rbuf)
		goto err;
	qp->smr = ibv_reg_mr(qp->pd, dg->sbuf, (size_t)rs->sq_size * DS_SLOT, IBV_ACCESS_LOCAL_WRITE);
	qp->rmr = ibv_reg_mr(qp->pd, qp->rbuf, (size_t)rs->rq_size * DS_SLOT + DS_GRH_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!qp->smr || !qp->rmr)
		goto err;
	qp->ch = ibv_create_comp_channel(qp->id->verbs);
	if (!qp->ch || ds_set_nonblock(qp->ch->fd))
		goto err;
	ev.data.fd = qp->ch->fd;
	if (epoll_ctl(rs->index, EPOLL_CTL_ADD, qp->ch->fd, &ev))
		goto err;
	qp->in_epoll = true;
	qp->cq = ibv_create_cq(qp->id->verbs, rs->sq_size + rs->rq_size, qp, qp->ch, 0);
	if (!qp->cq)
		goto err;
	memset(&qa, 0, sizeof(qa));
	qa.qp_context = qp;
	qa.send_cq = qp->cq;
	qa.recv_cq = qp->cq;
	qa.qp_type = IBV_QPT_UD;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = rs->sq_size;
	qa.cap.max_recv_wr = rs->rq_size;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 2;
	qa.cap.max_inline_data = rs->sq_inline;
	if (rdma_create_qp(qp->id, qp->pd, &qa))
		goto err;
	rs->sq_inline = (uint16_t)(qa.cap.max_inline_data > 0xffff ? 0xffff : qa.cap.max_inline_data);
	if (ds_grow_ring(dg, (ds_nqp(dg) + 2) * rs->rq_size + 1))
		goto err;
	for (uint32_t i = 0; i < rs->rq_size; i++)
		if (ds_post_recv(rs, qp, i * DS_SLOT))
			goto err;
	/* armed from the start: an rpoll that sleeps before any call sees
	 * the first completion */
	ibv_req_notify_cq(qp->cq, 0);
	qp->armed = true;
	qp->next = dg->qps;
	dg->qps = qp;
	*out = qp;
	return 0;
err:
	e = errno ? errno : ENOMEM;
	ds_free_qp(rs, qp);
	return rs_fail(e);
}

/* The local address datagrams to dst leave from: the UDP socket's own, or
 * if that is a wildcard (or loopback), the one the kernel's routing picks,
 * with the socket's port.  An unbound socket is bound first, to a port of
 * the kernel's choosing, as sendto(2) would: the port goes in every
 * datagram's header as the source the peer answers. */
static int ds_src_addr(struct rsocket *rs, const struct sockaddr *dst, struct sockaddr_storage *src)
{
	struct rs_dgram *dg = rs->dg;
	socklen_t len = sizeof(*src);
	in_port_t port;
	int fd, ret;

	if (!dg->bound) {
		struct sockaddr_storage any;

		memset(&any, 0, sizeof(any));
		any.ss_family = (sa_family_t)rs->domain;
		if (getsockname(dg->udp_fd, (struct sockaddr *)src, &len))
			return -1;
		if (((struct sockaddr_in *)src)->sin_port == 0 &&
		    bind(dg->udp_fd, (struct sockaddr *)&any, ds_addrlen((struct sockaddr *)&any)))
			return -1;
		dg->bound = true;
		len = sizeof(*src);
	}
	if (getsockname(dg->udp_fd, (struct sockaddr *)src, &len))
		return -1;
	if (!ds_any_or_loopback((struct sockaddr *)src) && src->ss_family == dst->sa_family)
		return 0;
	port = ((struct sockaddr_in *)src)->sin_port; /* same place in sockaddr_in6 */
	fd = sr_socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	ret = connect(fd, dst, ds_addrlen(dst));
	len = sizeof(*src);
	if (!ret)
		ret = getsockname(fd, (struct sockaddr *)src, &len);
	close(fd);
	if (ret)
		return -1;
	((struct sockaddr_in *)src)->sin_port = port;
	if (src->ss_family == AF_INET6)
		((struct sockaddr_in6 *)src)->sin6_flowinfo = 0;
	return 0;
}

static int ds_get_qp(struct rsocket *rs, const struct sockaddr *src, struct ds_qp **qp)
{
	for (struct ds_qp *q = rs->dg->qps; q; q = q->next) {
		if (ds_same_addr((struct sockaddr *)&q->src, src)) {
			*qp = q;
			return 0;
		}
	}
	return ds_create_qp(rs, src, qp);
}

static void ds_retire_ah(struct rsocket *rs, struct ibv_ah *ah);

static void ds_fifo_unlink(struct rs_dgram *dg, struct ds_dest *d)
{
	if (d->prev)
		d->prev->next = d->next;
	else
		dg->u_head = d->next;
	if (d->next)
		d->next->prev = d->prev;
	else
		dg->u_tail = d->prev;
	d->next = d->prev = NULL;
	dg->u_count--;
}

/* The application sends to d: it is kept until rclose. */
static void ds_keep_dest(struct rs_dgram *dg, struct ds_dest *d)
{
	if (!d->unsolicited)
		return;
	ds_fifo_unlink(dg, d);
	d->unsolicited = false;
	d->next = dg->dests;
	dg->dests = d;
}

/* Forgets the oldest peer learnt from a datagram. */
static void ds_forget_oldest(struct rsocket *rs)
{
	struct rs_dgram *dg = rs->dg;
	struct ds_dest *d = dg->u_head;

	tdelete(&d->key, &dg->dest_tree, ds_key_cmp);
	ds_fifo_unlink(dg, d);
	if (d->ah)
		ds_retire_ah(rs, d->ah);
	free(d);
}

/* The peer at addr: found, or made with the QP that reaches it.  A peer
 * found or made for the application (solicited) is kept until rclose;
 * one made for a datagram that came in may be forgotten later. */
static int ds_get_dest(struct rsocket *rs, const struct sockaddr *addr, bool solicited, struct ds_dest **out)
{
	struct rs_dgram *dg = rs->dg;
	struct sockaddr_storage src;
	struct ds_key key;
	struct ds_dest *d, **t;
	struct ds_qp *qp;

	ds_make_key(addr, &key);
	t = tfind(&key, &dg->dest_tree, ds_key_cmp);
	if (t) {
		if (solicited)
			ds_keep_dest(dg, *t);
		*out = *t;
		return 0;
	}
	if (ds_src_addr(rs, addr, &src) || ds_get_qp(rs, (struct sockaddr *)&src, &qp))
		return -1;
	d = calloc(1, sizeof(*d));
	if (!d)
		return rs_fail(ENOMEM);
	d->key = key;
	memcpy(&d->addr, addr, ds_addrlen(addr));
	d->addrlen = ds_addrlen(addr);
	d->qp = qp;
	if (!tsearch(d, &dg->dest_tree, ds_key_cmp)) {
		free(d);
		return rs_fail(ENOMEM);
	}
	if (solicited) {
		d->next = dg->dests;
		dg->dests = d;
	} else {
		if (dg->u_count >= DS_MAX_UNSOLICITED_PEERS)
			ds_forget_oldest(rs);
		d->unsolicited = true;
		d->prev = dg->u_tail;
		if (dg->u_tail)
			dg->u_tail->next = d;
		else
			dg->u_head = d;
		dg->u_tail = d;
		dg->u_count++;
	}
	*out = d;
	return 0;
}

/* An address handle no peer uses any more: posted sends may still, so it
 * is destroyed once every send has completed (ds_free_old_ahs). */
static void ds_retire_ah(struct rsocket *rs, struct ibv_ah *ah)
{
	struct rs_dgram *dg = rs->dg;
	struct ds_ah_old *o;

	if (dg->sfree_n == rs->sq_size) {
		ibv_destroy_ah(ah); /* no send posted */
		return;
	}
	o = malloc(sizeof(*o));
	if (!o)
		return; /* out of memory: left to the process's end */
	o->ah = ah;
	o->next = dg->old_ahs;
	dg->old_ahs = o;
}

static void ds_free_old_ahs(struct rs_dgram *dg)
{
	while (dg->old_ahs) {
		struct ds_ah_old *o = dg->old_ahs;
		dg->old_ahs = o->next;
		ibv_destroy_ah(o->ah);
		free(o);
	}
}

/* The peer's QPN is known: an address handle from our QP's GID to its. */
static void ds_make_ah(struct rsocket *rs, struct ds_dest *d, uint32_t qpn)
{
	struct ds_qp *qp = d->qp;
	uint8_t port = qp->id->port_num ? qp->id->port_num : 1;
	struct ibv_ah_attr a;
	union ibv_gid sgid;
	struct ibv_ah *ah;
	int idx;

	ds_addr_to_gid((struct sockaddr *)&qp->src, &sgid);
	idx = ds_find_gid(qp->id->verbs, port, &sgid);
	if (idx < 0)
		return;
	memset(&a, 0, sizeof(a));
	a.is_global = 1;
	ds_addr_to_gid((struct sockaddr *)&d->addr, &a.grh.dgid);
	a.grh.sgid_index = (uint8_t)idx;
	a.grh.hop_limit = 64;
	a.port_num = port;
	ah = ibv_create_ah(qp->pd, &a);
	if (!ah)
		return;
	if (d->ah)
		ds_retire_ah(rs, d->ah);
	d->ah = ah;
	d->qpn = qpn;
}

/* ---- endpoint ------------------------------------------------------------------------ */

/* rdma-core's sizing: one 2 KiB slot per work request, the buffer sizes
 * (SO_SNDBUF/SO_RCVBUF) bounding the queue sizes. */
static int ds_init_ep(struct rsocket *rs)
{
	struct rs_dgram *dg = rs->dg;

	if (dg->ep_ready)
		return 0;
	if (rs->rq_size > rs->rbuf_size / DS_SLOT)
		rs->rq_size = (uint16_t)(rs->rbuf_size / DS_SLOT);
	if (rs->sq_size > rs->sbuf_size / DS_SLOT)
		rs->sq_size = (uint16_t)(rs->sbuf_size / DS_SLOT);
	if (rs->rq_size < 2)
		rs->rq_size = 2;
	if (rs->sq_size < 2)
		rs->sq_size = 2;
	rs->rbuf_size = (uint32_t)rs->rq_size * DS_SLOT;
	rs->sbuf_size = (uint32_t)rs->sq_size * DS_SLOT;

	dg->sbuf = calloc(rs->sq_size, DS_SLOT);
	dg->sfree = calloc(rs->sq_size, sizeof(*dg->sfree));
	if (!dg->sbuf || !dg->sfree)
		return rs_fail(ENOMEM);
	for (int i = 0; i < rs->sq_size; i++)
		dg->sfree[i] = (uint32_t)(rs->sq_size - 1 - i);
	dg->sfree_n = rs->sq_size;
	if (ds_grow_ring(dg, (uint32_t)rs->rq_size + 1))
		return -1;
	dg->ep_ready = true;
	return 0;
}

/* ---- progress ---------------------------------------------------------------------- */

static bool ds_ring_full(const struct rs_dgram *dg)
{
	return dg->ring_n >= dg->ring_cap;
}

static void ds_ring_push(struct rs_dgram *dg, struct ds_msg m)
{
	dg->ring[(dg->ring_head + dg->ring_n) % dg->ring_cap] = m;
	dg->ring_n++;
}

static void ds_poll_qp(struct rsocket *rs, struct ds_qp *qp)
{
	struct rs_dgram *dg = rs->dg;
	struct ibv_wc wc[16];
	int n;

	while ((n = ibv_poll_cq(qp->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			if (!(wc[i].wr_id & RS_WR_ID_RECV)) {
				dg->sfree[dg->sfree_n++] = (uint32_t)wc[i].wr_id;
				if (dg->old_ahs && dg->sfree_n == rs->sq_size)
					ds_free_old_ahs(dg); /* no send can use them now */
				continue;
			}
			uint32_t off = (uint32_t)(wc[i].wr_id & 0xffffffffu);
			struct sockaddr_storage src;
			if (wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len >= DS_GRH_LEN &&
			    ds_hdr_parse(qp->rbuf + off, wc[i].byte_len - DS_GRH_LEN, &src) > 0 && !ds_ring_full(dg)) {
				ds_ring_push(dg, (struct ds_msg){ .qp = qp,
								  .offset = off,
								  .length = wc[i].byte_len - DS_GRH_LEN });
			} else if (wc[i].status == IBV_WC_SUCCESS) {
				ds_post_recv(rs, qp, off); /* not rsocket's: dropped */
			}
		}
	}
}

static ssize_t ds_send_udp(struct rsocket *rs, struct ds_dest *d, uint8_t op, const struct iovec *iov, int iovcnt,
			   int flags)
{
	struct ds_qp *qp = d->qp;
	struct ds_udp_header h;
	struct iovec v[1 + IOV_MAX > 64 ? 64 : 1 + IOV_MAX];
	struct msghdr m;
	ssize_t n;

	if (iovcnt > (int)(sizeof(v) / sizeof(v[0])) - 1)
		return rs_fail(EMSGSIZE);
	ds_udp_format(&h, op, qp->id->qp->qp_num, &qp->hdr);
	v[0].iov_base = &h;
	v[0].iov_len = h.length;
	for (int i = 0; i < iovcnt; i++)
		v[i + 1] = iov[i];
	memset(&m, 0, sizeof(m));
	m.msg_name = &d->addr;
	m.msg_namelen = d->addrlen;
	m.msg_iov = v;
	m.msg_iovlen = (size_t)iovcnt + 1;
	n = sendmsg(rs->dg->udp_fd, &m, flags | MSG_NOSIGNAL);
	return n < 0 ? -1 : n - h.length;
}

static bool ds_async_error(int e)
{
	return e == ECONNREFUSED || e == EHOSTUNREACH || e == ENETUNREACH || e == EHOSTDOWN || e == ENETDOWN ||
	       e == EMSGSIZE || e == EPROTO;
}

/* Resolution messages waiting on the UDP socket: answer data with our
 * QPN, learn the sender's, queue its data. */
static void ds_read_udp(struct rsocket *rs)
{
	struct rs_dgram *dg = rs->dg;
	uint8_t buf[DS_SLOT];
	struct sockaddr_storage from;
	socklen_t flen;
	ssize_t n;

	for (;;) {
		flen = sizeof(from);
		n = recvfrom(dg->udp_fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			/* an ICMP error for what we sent: the next send reports it */
			if (ds_async_error(errno)) {
				dg->err = errno;
				continue;
			}
			break;
		}
		uint32_t qpn;
		uint8_t op;
		int hlen = ds_udp_parse(buf, (size_t)n, from.ss_family, &op, &qpn);
		if (hlen < 0)
			continue; /* not an rsocket's */
		struct ds_dest *d;

		if (!dg->ep_ready || ds_get_dest(rs, (struct sockaddr *)&from, false, &d))
			continue;
		if (op == DS_OP_DATA)
			ds_send_udp(rs, d, DS_OP_CTRL, NULL, 0, MSG_DONTWAIT);
		if (!d->ah || d->qpn != qpn)
			ds_make_ah(rs, d, qpn);
		if (op != DS_OP_DATA || dg->udp_queued >= rs->rq_size || ds_ring_full(dg) || dg->shut_rd)
			continue;
		uint32_t len = (uint32_t)(n - hlen);
		struct ds_udp_msg *um = malloc(sizeof(*um) + len);
		if (!um)
			continue;
		memcpy(&um->src, &from, sizeof(from));
		um->len = len;
		memcpy(um->data, buf + hlen, len);
		dg->udp_queued++;
		ds_ring_push(dg, (struct ds_msg){ .um = um });
	}
}

static bool ds_get_cq_events(struct rsocket *rs)
{
	struct ibv_cq *cq;
	void *ctx;
	bool any = false;

	/* every event the channel holds (ds_arm may arm an armed CQ again):
	 * one left behind would keep the descriptor readable */
	for (struct ds_qp *qp = rs->dg->qps; qp; qp = qp->next) {
		while (!ibv_get_cq_event(qp->ch, &cq, &ctx)) {
			ibv_ack_cq_events(cq, 1);
			qp->armed = false;
			any = true;
		}
	}
	return any;
}

/* Completions and, when forced or a millisecond has passed, the UDP socket. */
void ds_progress(struct rsocket *rs, bool force)
{
	struct rs_dgram *dg = rs->dg;
	uint64_t now;
	bool any;

	any = ds_get_cq_events(rs);
	for (struct ds_qp *qp = dg->qps; qp; qp = qp->next)
		ds_poll_qp(rs, qp);
	now = rs_now_us();
	if (force || now - dg->last_udp_us >= DS_UDP_CHECK_US) {
		dg->last_udp_us = now;
		ds_read_udp(rs);
	}
	/* a sleeper may have armed for the completion event we took */
	if (any)
		rs_kick(rs);
}

/* Before a sleep.  The CQ is armed again even if it still is: that is
 * what tells softrdma's provider a thread is about to sleep on the
 * channel (ibv_req_notify_cq -> sr_progress_chan_armed).  While an
 * application thread polls the CQ, the progress thread leaves receiving
 * to it and looks again only every 0.1 ms, or 1 ms after a poll that
 * received 16 KiB (core/poller.c).  A sleep on a CQ left armed from an
 * earlier sleep would say nothing, and the next datagram would wait for
 * that recheck: longer than a peer that resends after 1 ms waits.
 * Returns true if a CQ was not armed: completions before this raised no
 * event, poll again. */
bool ds_arm(struct rsocket *rs)
{
	bool armed = false;

	for (struct ds_qp *qp = rs->dg->qps; qp; qp = qp->next) {
		ibv_req_notify_cq(qp->cq, 0);
		if (!qp->armed) {
			qp->armed = true;
			armed = true;
		}
	}
	return armed;
}

static bool ds_have_data(struct rsocket *rs)
{
	return rs->dg->ring_n > 0 || rs->closing || rs->dg->shut_rd;
}

static bool ds_can_send(struct rsocket *rs)
{
	return rs->dg->sfree_n > 0 || rs->closing;
}

static bool ds_sends_done(struct rsocket *rs)
{
	return !rs->dg->ep_ready || rs->dg->sfree_n == rs->sq_size;
}

short ds_poll_events(struct rsocket *rs, short events)
{
	struct rs_dgram *dg = rs->dg;
	short rev = 0;

	if (rs->closing)
		return POLLNVAL;
	if (dg->ring_n || dg->shut_rd)
		rev |= events & (POLLIN | POLLRDNORM);
	if (!dg->ep_ready || dg->sfree_n > 0)
		rev |= events & (POLLOUT | POLLWRNORM);
	if (dg->err)
		rev |= POLLERR;
	return rev;
}

/* ---- calls ---------------------------------------------------------------------------- */

static int ds_check_addr(struct rsocket *rs, const struct sockaddr *addr, socklen_t len)
{
	if (!addr)
		return rs_fail(EFAULT);
	if (len < sizeof(sa_family_t))
		return rs_fail(EINVAL);
	/* an AF_INET6 socket reaches IPv4 peers too, as udp(7) */
	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)
		return rs_fail(EAFNOSUPPORT);
	if (addr->sa_family == AF_INET6 && rs->domain == AF_INET)
		return rs_fail(EAFNOSUPPORT);
	if (len < ds_addrlen(addr))
		return rs_fail(EINVAL);
	return 0;
}

int ds_bind(struct rsocket *rs, const struct sockaddr *addr, socklen_t addrlen)
{
	if (!addr)
		return rs_fail(EFAULT);
	if (addrlen >= sizeof(sa_family_t) && addr->sa_family != rs->domain)
		return rs_fail(addr->sa_family == AF_INET || addr->sa_family == AF_INET6 ? EINVAL : EAFNOSUPPORT);
	if (rs->dg->bound)
		return rs_fail(EINVAL);
	if (ds_init_ep(rs) || bind(rs->dg->udp_fd, addr, addrlen))
		return -1;
	rs->dg->bound = true;
	return 0;
}

int ds_connect(struct rsocket *rs, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rs_dgram *dg = rs->dg;
	struct ds_dest *d;

	/* AF_UNSPEC dissolves the association, as connect(2) on UDP */
	if (addr && addrlen >= sizeof(sa_family_t) && addr->sa_family == AF_UNSPEC) {
		if (connect(dg->udp_fd, addr, addrlen))
			return -1;
		dg->conn_dest = NULL;
		return 0;
	}
	if (ds_check_addr(rs, addr, addrlen) || ds_init_ep(rs))
		return -1;
	if (connect(dg->udp_fd, addr, addrlen))
		return -1;
	dg->bound = true; /* connect(2) bound it */
	if (ds_get_dest(rs, addr, true, &d))
		return -1;
	dg->conn_dest = d;
	dg->shut_rd = dg->shut_wr = false;
	return 0;
}

int ds_shutdown(struct rsocket *rs, int how)
{
	if (!rs->dg->conn_dest)
		return rs_fail(ENOTCONN);
	if (how == SHUT_RD || how == SHUT_RDWR)
		rs->dg->shut_rd = true;
	if (how == SHUT_WR || how == SHUT_RDWR)
		rs->dg->shut_wr = true;
	rs_kick(rs);
	pthread_cond_broadcast(&rs->cond);
	return 0;
}

ssize_t ds_sendv(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags, const struct sockaddr *to,
		 socklen_t tolen)
{
	struct rs_dgram *dg = rs->dg;
	bool nonblock = rs_nonblocking(rs, flags);
	struct ds_dest *d;
	size_t len;

	if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt && !iov))
		return rs_fail(EINVAL);
	len = ds_iov_len(iov, iovcnt);
	if (to) {
		if (ds_check_addr(rs, to, tolen))
			return -1;
	} else if (!dg->conn_dest) {
		return rs_fail(EDESTADDRREQ); /* as udp(7) */
	}
	if (dg->shut_wr)
		return rs_fail(EPIPE);
	if (dg->err) {
		int e = dg->err;
		dg->err = 0;
		return rs_fail(e);
	}
	if (ds_init_ep(rs))
		return -1;
	if (to) {
		if (ds_get_dest(rs, to, true, &d))
			return -1;
	} else {
		d = dg->conn_dest;
	}
	if (len > d->qp->max_data)
		return rs_fail(EMSGSIZE);
	if (!d->ah) {
		/* the answer with the peer's QPN may be waiting */
		ds_progress(rs, true);
		if (dg->err && !d->ah) {
			int e = dg->err;
			dg->err = 0;
			return rs_fail(e);
		}
	}
	if (!d->ah)
		return ds_send_udp(rs, d, DS_OP_DATA, iov, iovcnt, nonblock ? MSG_DONTWAIT : 0);

	if (!dg->sfree_n && rs_wait(rs, nonblock, ds_can_send, -1))
		return -1;
	if (rs->closing)
		return rs_fail(EBADF);
	uint32_t slot = dg->sfree[--dg->sfree_n];
	uint8_t *p = dg->sbuf + (size_t)slot * DS_SLOT;
	memcpy(p, &d->qp->hdr, d->qp->hdr.length);
	size_t off = d->qp->hdr.length;
	for (int i = 0; i < iovcnt; i++) {
		memcpy(p + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	struct ibv_sge sge = { .addr = (uintptr_t)p, .length = (uint32_t)off, .lkey = d->qp->smr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = slot,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = sge.length <= rs->sq_inline ? IBV_SEND_INLINE : 0,
	}, *bad;
	wr.wr.ud.ah = d->ah;
	wr.wr.ud.remote_qpn = d->qpn;
	wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
	int err = ibv_post_send(d->qp->id->qp, &wr, &bad);
	if (err) {
		dg->sfree[dg->sfree_n++] = slot;
		return rs_fail(err);
	}
	return (ssize_t)len;
}

ssize_t ds_recvv(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags, struct sockaddr *from,
		 socklen_t *fromlen, int *msg_flags)
{
	struct rs_dgram *dg = rs->dg;
	struct sockaddr_storage src;
	const uint8_t *data;
	uint32_t dlen;
	size_t room, copied = 0;
	struct ds_msg *m;

	if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt && !iov))
		return rs_fail(EINVAL);
	/* as rdma-core: nothing bound, connected or sent yet, nothing to read */
	if (!dg->ep_ready)
		return rs_fail(EINVAL);
	if (!dg->ring_n) {
		if (dg->shut_rd)
			return 0;
		if (rs_wait(rs, rs_nonblocking(rs, flags), ds_have_data, -1))
			return -1;
		if (rs->closing)
			return rs_fail(EBADF);
		if (!dg->ring_n)
			return 0; /* shut down for reading */
	}
	m = &dg->ring[dg->ring_head];
	if (m->um) {
		data = m->um->data;
		dlen = m->um->len;
		src = m->um->src;
	} else {
		/* checked when it was queued (ds_poll_qp) */
		int hlen = ds_hdr_parse(m->qp->rbuf + m->offset, m->length, &src);
		data = m->qp->rbuf + m->offset + hlen;
		dlen = m->length - (uint32_t)hlen;
	}
	room = ds_iov_len(iov, iovcnt);
	for (int i = 0; i < iovcnt && copied < dlen; i++) {
		size_t n = iov[i].iov_len < dlen - copied ? iov[i].iov_len : dlen - copied;
		memcpy(iov[i].iov_base, data + copied, n);
		copied += n;
	}
	if (from && fromlen)
		ds_put_addr(from, fromlen, &src);
	if (msg_flags)
		*msg_flags = dlen > room ? MSG_TRUNC : 0;
	if (!(flags & MSG_PEEK)) {
		if (m->um) {
			free(m->um);
			dg->udp_queued--;
		} else {
			ds_post_recv(rs, m->qp, m->offset);
		}
		m->um = NULL;
		dg->ring_head = (dg->ring_head + 1) % dg->ring_cap;
		dg->ring_n--;
	}
	return (flags & MSG_TRUNC) ? (ssize_t)dlen : (ssize_t)copied;
}

int ds_getsockname(struct rsocket *rs, struct sockaddr *addr, socklen_t *addrlen)
{
	return getsockname(rs->dg->udp_fd, addr, addrlen);
}

int ds_getpeername(struct rsocket *rs, struct sockaddr *addr, socklen_t *addrlen)
{
	return getpeername(rs->dg->udp_fd, addr, addrlen);
}

/* As rdma-core: every option but SOL_RDMA's goes to the UDP socket first
 * (its error is the answer); the buffer sizes also size the queues
 * before they exist; SOL_RDMA's queue sizes only before then. */
int ds_setsockopt(struct rsocket *rs, int level, int optname, const void *optval, socklen_t optlen)
{
	int v;

	if (level != SOL_RDMA) {
		if (setsockopt(rs->dg->udp_fd, level, optname, optval, optlen))
			return -1;
		if (level == SOL_SOCKET && (optname == SO_RCVBUF || optname == SO_SNDBUF) && optlen >= sizeof(int) &&
		    !rs->dg->ep_ready) {
			memcpy(&v, optval, sizeof(v));
			uint32_t s = rs_sockbuf_size(v);
			if (optname == SO_RCVBUF)
				rs->rbuf_size = s;
			else
				rs->sbuf_size = s;
		}
		if (level == IPPROTO_IP && optname == IP_TOS && optlen >= sizeof(int))
			memcpy(&rs->ip_tos, optval, sizeof(int));
		return 0;
	}
	if (rs->dg->ep_ready)
		return rs_fail(EINVAL);
	if (optname == RDMA_ROUTE)
		return optval ? 0 : rs_fail(EFAULT);
	if (!optval)
		return rs_fail(EFAULT);
	if (optlen < sizeof(int))
		return rs_fail(EINVAL);
	memcpy(&v, optval, sizeof(v));
	switch (optname) {
	case RDMA_SQSIZE:
		rs->sq_size = (uint16_t)((unsigned)v > RS_QP_MAX_SIZE ? RS_QP_MAX_SIZE : (unsigned)v);
		return 0;
	case RDMA_RQSIZE:
		rs->rq_size = (uint16_t)((unsigned)v > RS_QP_MAX_SIZE ? RS_QP_MAX_SIZE : (unsigned)v);
		return 0;
	case RDMA_INLINE:
		rs->sq_inline = (uint16_t)((unsigned)v > RS_QP_MAX_SIZE ? RS_QP_MAX_SIZE : (unsigned)v);
		return 0;
	case RDMA_IOMAPSIZE:
		return 0; /* no iomaps on datagrams: accepted, as rdma-core */
	default:
		return rs_fail(ENOTSUP);
	}
}

int ds_getsockopt(struct rsocket *rs, int level, int optname, void *optval, socklen_t *optlen)
{
	if (level == SOL_SOCKET) {
		switch (optname) {
		case SO_RCVBUF:
			return rs_put_int(optval, optlen, (int)rs->rbuf_size);
		case SO_SNDBUF:
			return rs_put_int(optval, optlen, (int)rs->sbuf_size);
		case SO_ERROR: {
			ds_progress(rs, true);
			int e = rs->dg->err;
			if (rs_put_int(optval, optlen, e))
				return -1;
			rs->dg->err = 0;
			return 0;
		}
		default:
			break; /* SO_TYPE, SO_PROTOCOL, SO_DOMAIN...: the UDP socket's */
		}
	}
	if (level == SOL_RDMA) {
		switch (optname) {
		case RDMA_SQSIZE:
			return rs_put_int(optval, optlen, rs->sq_size);
		case RDMA_RQSIZE:
			return rs_put_int(optval, optlen, rs->rq_size);
		case RDMA_INLINE:
			return rs_put_int(optval, optlen, rs->sq_inline);
		case RDMA_IOMAPSIZE:
			return rs_put_int(optval, optlen, 0);
		default:
			return rs_fail(ENOTSUP);
		}
	}
	return getsockopt(rs->dg->udp_fd, level, optname, optval, optlen);
}

/* ---- close ------------------------------------------------------------------------------ */

static void ds_tree_node_free(void *p)
{
	/* the dests are freed from their list */
}

/* a list of peers (dg->dests or the unsolicited FIFO), with their AHs */
static void ds_free_dests(struct ds_dest *d)
{
	while (d) {
		struct ds_dest *next = d->next;
		if (d->ah)
			ibv_destroy_ah(d->ah);
		free(d);
		d = next;
	}
}

static void ds_destroy(struct rsocket *rs)
{
	struct rs_dgram *dg = rs->dg;

	while (dg->ring_n) {
		free(dg->ring[dg->ring_head].um);
		dg->ring_head = (dg->ring_head + 1) % dg->ring_cap;
		dg->ring_n--;
	}
	tdestroy(dg->dest_tree, ds_tree_node_free);
	ds_free_dests(dg->dests);
	ds_free_dests(dg->u_head);
	ds_free_old_ahs(dg);
	while (dg->qps) {
		struct ds_qp *qp = dg->qps;
		dg->qps = qp->next;
		ds_free_qp(rs, qp);
	}
	if (dg->udp_fd >= 0)
		close(dg->udp_fd);
	free(dg->ring);
	free(dg->sbuf);
	free(dg->sfree);
	free(dg);
	rs->dg = NULL;
}

/* The socket is out of the descriptor table: wake the calls under way
 * (they return EBADF), wait for them to leave, give posted sends a moment
 * to complete, then release everything.  The caller frees rs. */
void ds_close(struct rsocket *rs)
{
	uint64_t start;

	pthread_mutex_lock(&rs->lock);
	rs->closing = true;
	while (__atomic_load_n(&rs->users, __ATOMIC_ACQUIRE) > 0) {
		rs_kick(rs);
		pthread_cond_broadcast(&rs->cond);
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&rs->cond, &rs->lock, &ts);
	}
	start = rs_now_us();
	while (rs->dg && rs->dg->ep_ready) {
		ds_progress(rs, true); /* UDP too: a datagram there keeps the descriptor readable */
		if (ds_sends_done(rs) || rs_now_us() - start >= DS_CLOSE_WAIT_MS * 1000ull)
			break;
		if (ds_arm(rs))
			continue;
		struct pollfd p = { .fd = rs->index, .events = POLLIN };
		poll(&p, 1, 10);
	}
	if (rs->dg)
		ds_destroy(rs);
	pthread_mutex_unlock(&rs->lock);
}
