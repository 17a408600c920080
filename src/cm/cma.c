/* The rdma_cm API of librdmacm.so.1: event channels, ids, address and
 * route resolution, connect/listen/accept/reject/disconnect, QPs on ids,
 * synchronous ids (no channel: the call waits for its event), and the
 * rdma_create_ep family.  The protocol itself is in ib_cm.c.
 *
 * Event channel: ch.fd is one end of a socketpair carrying one byte per
 * queued event, so it polls readable exactly when an event is waiting and
 * rdma_get_cm_event blocks, or fails with EAGAIN once the application has
 * made the fd non-blocking, like rdma-core's. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "abi/export.h"
#include "cm/cm.h"
#include "common/udp_port.h"
#include "common/ipc_client.h"
#include "common/sock.h"

struct sr_cm_global sr_cm = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.tx4 = -1,
	.tx6 = -1,
	.wake_fd = -1,
	.epfd = -1,
};
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

static int fail(int err)
{
	errno = err;
	return -1;
}

int sr_cm_init(void)
{
	int err;

	if (__atomic_load_n(&sr_cm.inited, __ATOMIC_ACQUIRE))
		return sr_cm.init_err;
	pthread_mutex_lock(&init_lock);
	if (!sr_cm.inited) {
		srandom((unsigned)(getpid() ^ sr_cm_now()));
		err = sr_cm_devs_open();
		if (!err && !sr_cm.ndevs)
			err = -ENODEV;
		if (!err)
			err = sr_cm_engine_start();
		sr_cm.init_err = err;
		__atomic_store_n(&sr_cm.inited, true, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&init_lock);
	return sr_cm.init_err;
}

static int init_or_fail(void)
{
	int err = sr_cm_init();
	return err ? fail(-err) : 0;
}

/* ---- channels and events ---- */

/* The channels not destroyed yet.  rping's CM thread acks an event and
 * calls rdma_get_cm_event again while its main thread destroys the
 * channel: the pointer it passes may be freed, so rdma_get_cm_event
 * looks it up here before touching it.  chan_lock nests inside
 * sr_cm.lock. */
static pthread_mutex_t chan_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sr_cm_chan *live_chans;

static bool chan_live(const struct sr_cm_chan *c)
{
	bool live = false;

	pthread_mutex_lock(&chan_lock);
	for (struct sr_cm_chan *l = live_chans; l && !live; l = l->next_live)
		live = l == c;
	pthread_mutex_unlock(&chan_lock);
	return live;
}

static struct sr_cm_chan *chan_new(void)
{
	struct sr_cm_chan *c = calloc(1, sizeof(*c));
	int sv[2];

	if (!c)
		return NULL;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		free(c);
		return NULL;
	}
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	c->ch.fd = sv[0];
	c->wfd = sv[1];
	pthread_mutex_lock(&chan_lock);
	c->next_live = live_chans;
	live_chans = c;
	pthread_mutex_unlock(&chan_lock);
	return c;
}

/* Lock held.  Drops the queued events and ends the channel: at once if no
 * thread is reading it, else when the last reader leaves.  Closing the
 * write end wakes readers blocked in read() (EOF); the read end stays
 * open while they are inside, so its number cannot be reused under them. */
static void chan_free(struct sr_cm_chan *c)
{
	struct sr_cm_event *e = c->head;
	while (e) {
		struct sr_cm_event *n = e->next;
		free(e);
		e = n;
	}
	c->head = c->tail = NULL;
	c->dead = true;
	pthread_mutex_lock(&chan_lock);
	for (struct sr_cm_chan **pp = &live_chans; *pp; pp = &(*pp)->next_live)
		if (*pp == c) {
			*pp = c->next_live;
			break;
		}
	pthread_mutex_unlock(&chan_lock);
	if (c->wfd >= 0)
		close(c->wfd);
	c->wfd = -1;
	if (c->readers)
		return;
	close(c->ch.fd);
	free(c);
}

SR_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct sr_cm_chan *c;

	if (init_or_fail())
		return NULL;
	c = chan_new();
	if (!c) {
		errno = errno ? errno : ENOMEM;
		return NULL;
	}
	return &c->ch;
}

SR_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (!channel)
		return;
	pthread_mutex_lock(&sr_cm.lock);
	chan_free((struct sr_cm_chan *)channel);
	pthread_mutex_unlock(&sr_cm.lock);
}

struct sr_cm_event *sr_cm_event_new(struct sr_cm_id *id, enum rdma_cm_event_type type, int status)
{
	struct sr_cm_event *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->ev.id = &id->id;
	e->ev.event = type;
	e->ev.status = status;
	return e;
}

/* Queue e on owner's channel; owner's events_pending counts it until acked. */
void sr_cm_event_post(struct sr_cm_id *owner, struct sr_cm_event *e)
{
	struct sr_cm_chan *c = owner->chan;
	char b = 0;

	e->owner = owner;
	owner->events_pending++;
	if (c->tail)
		c->tail->next = e;
	else
		c->head = e;
	c->tail = e;
	if (c->wfd >= 0 && send(c->wfd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		/* only when ~200K events wait unread: the reader still finds them */
	}
}

void sr_cm_fill_conn_param(struct sr_cm_event *e, const void *pdata, uint8_t len, uint8_t resp_res, uint8_t init_depth,
			   bool flow_control, uint8_t retry, uint8_t rnr_retry, bool srq, uint32_t qpn)
{
	struct rdma_conn_param *p = &e->ev.param.conn;

	if (pdata && len) {
		memcpy(e->pdata, pdata, len);
		p->private_data = e->pdata;
		p->private_data_len = len;
	}
	p->responder_resources = resp_res;
	p->initiator_depth = init_depth;
	p->flow_control = flow_control;
	p->retry_count = retry;
	p->rnr_retry_count = rnr_retry;
	p->srq = srq;
	p->qp_num = qpn;
}

/* A reader leaves the channel (lock held): the last one out of a
 * destroyed channel frees it. */
static void chan_reader_leave(struct sr_cm_chan *c)
{
	if (--c->readers == 0 && c->dead) {
		close(c->ch.fd);
		free(c);
	}
}

/* A reader cancelled in read() (a cancellation point) leaves too. */
static void chan_reader_cancelled(void *arg)
{
	pthread_mutex_lock(&sr_cm.lock);
	chan_reader_leave(arg);
	pthread_mutex_unlock(&sr_cm.lock);
}

/* The next event of channel c, which the caller counted itself in
 * (c->readers).  NULL when the read failed (*err: its errno) or the
 * channel was destroyed (*gone); the caller has then left it. */
static struct sr_cm_event *chan_read(struct sr_cm_chan *c, int fd, bool *gone, int *err)
{
	for (;;) {
		char b;
		ssize_t n = read(fd, &b, 1);
		struct sr_cm_event *e = NULL;

		*err = errno;
		pthread_mutex_lock(&sr_cm.lock);
		*gone = c->dead;
		if (n > 0 && !*gone && (e = c->head)) {
			c->head = e->next;
			if (!c->head)
				c->tail = NULL;
			e->next = NULL;
		}
		if (!e && n > 0 && !*gone) {
			/* its event went with a destroyed or migrated id: read on */
			pthread_mutex_unlock(&sr_cm.lock);
			continue;
		}
		chan_reader_leave(c);
		pthread_mutex_unlock(&sr_cm.lock);
		return e;
	}
}

SR_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct sr_cm_chan *c = (struct sr_cm_chan *)channel;
	struct sr_cm_event *volatile e; /* set between cleanup push and pop */
	bool gone = false;
	int fd, err = 0;

	if (!channel || !event)
		return fail(EINVAL);
	/* counted in, so that rdma_destroy_event_channel in another thread
	 * neither frees c nor closes fd under us */
	pthread_mutex_lock(&sr_cm.lock);
	if (!chan_live(c)) {
		/* destroyed before we came in: block, as on a destroyed one */
		pthread_mutex_unlock(&sr_cm.lock);
		for (;;)
			pause();
	}
	c->readers++;
	fd = c->ch.fd;
	pthread_mutex_unlock(&sr_cm.lock);
	pthread_cleanup_push(chan_reader_cancelled, c);
	e = chan_read(c, fd, &gone, &err);
	pthread_cleanup_pop(0);
	if (e) {
		sr_cm_dbg("event %s (status %d) for id %p", rdma_event_str(e->ev.event), e->ev.status,
			  (void *)e->ev.id);
		*event = &e->ev;
		return 0;
	}
	if (!gone) {
		errno = err; /* EAGAIN on a non-blocking channel, EINTR */
		return -1;
	}
	/* the channel was destroyed under a reader: rdma-core's reader stays
	 * blocked on its fd forever, and programs (rping) rely on it; pause()
	 * is a cancellation point */
	for (;;)
		pause();
}

SR_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct sr_cm_event *e = (struct sr_cm_event *)event;

	if (!event)
		return fail(EINVAL);
	pthread_mutex_lock(&sr_cm.lock);
	e->owner->events_pending--;
	pthread_cond_broadcast(&sr_cm.cond);
	pthread_mutex_unlock(&sr_cm.lock);
	free(e);
	return 0;
}

SR_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
		[RDMA_CM_EVENT_ADDR_RESOLVED] = "RDMA_CM_EVENT_ADDR_RESOLVED",
		[RDMA_CM_EVENT_ADDR_ERROR] = "RDMA_CM_EVENT_ADDR_ERROR",
		[RDMA_CM_EVENT_ROUTE_RESOLVED] = "RDMA_CM_EVENT_ROUTE_RESOLVED",
		[RDMA_CM_EVENT_ROUTE_ERROR] = "RDMA_CM_EVENT_ROUTE_ERROR",
		[RDMA_CM_EVENT_CONNECT_REQUEST] = "RDMA_CM_EVENT_CONNECT_REQUEST",
		[RDMA_CM_EVENT_CONNECT_RESPONSE] = "RDMA_CM_EVENT_CONNECT_RESPONSE",
		[RDMA_CM_EVENT_CONNECT_ERROR] = "RDMA_CM_EVENT_CONNECT_ERROR",
		[RDMA_CM_EVENT_UNREACHABLE] = "RDMA_CM_EVENT_UNREACHABLE",
		[RDMA_CM_EVENT_REJECTED] = "RDMA_CM_EVENT_REJECTED",
		[RDMA_CM_EVENT_ESTABLISHED] = "RDMA_CM_EVENT_ESTABLISHED",
		[RDMA_CM_EVENT_DISCONNECTED] = "RDMA_CM_EVENT_DISCONNECTED",
		[RDMA_CM_EVENT_DEVICE_REMOVAL] = "RDMA_CM_EVENT_DEVICE_REMOVAL",
		[RDMA_CM_EVENT_MULTICAST_JOIN] = "RDMA_CM_EVENT_MULTICAST_JOIN",
		[RDMA_CM_EVENT_MULTICAST_ERROR] = "RDMA_CM_EVENT_MULTICAST_ERROR",
		[RDMA_CM_EVENT_ADDR_CHANGE] = "RDMA_CM_EVENT_ADDR_CHANGE",
		[RDMA_CM_EVENT_TIMEWAIT_EXIT] = "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};
	if ((unsigned)event < sizeof(names) / sizeof(names[0]) && names[event])
		return names[event];
	return "UNKNOWN EVENT";
}

/* ---- ids ---- */

struct sr_cm_id *sr_cm_id_alloc(struct sr_cm_chan *chan, void *context, enum rdma_port_space ps, enum ibv_qp_type qpt)
{
	struct sr_cm_id *id = calloc(1, sizeof(*id));

	if (!id)
		return NULL;
	id->chan = chan;
	id->id.channel = chan ? &chan->ch : NULL;
	id->id.context = context;
	id->id.ps = ps;
	id->id.qp_type = qpt;
	id->state = CM_IDLE;
	id->max_cm_retries = sr_cm.max_cm_retries;
	id->ack_timeout = SR_CMA_PACKET_LIFETIME + 1; /* the kernel's RoCE default, ~2.1 s */
	id->qkey = SR_CMA_QKEY;
	id->serial = ++sr_cm.next_serial;
	id->iw_fd = id->iw_lfd = -1;
	id->next = sr_cm.ids;
	sr_cm.ids = id;
	return id;
}

/* Give id a private channel: a synchronous id. */
int sr_cm_chan_sync(struct sr_cm_id *id)
{
	struct sr_cm_chan *c = chan_new();

	if (!c)
		return -ENOMEM;
	id->chan = c;
	id->id.channel = &c->ch;
	id->sync = true;
	return 0;
}

/* A new id for a connection request to listener l, on device dev (GID
 * index gidx), between local and peer (ports ignored); src and dst are the
 * addresses the application sees, in the listener's family.  The caller
 * sets the state.  NULL when out of memory. */
struct sr_cm_id *sr_cm_child_new(struct sr_cm_id *l, enum ibv_qp_type qpt, struct sr_cm_dev *dev, uint8_t gidx,
				 const struct sockaddr_in6 *local, const struct sockaddr_in6 *peer,
				 const struct sockaddr *src, const struct sockaddr *dst)
{
	struct sr_cm_id *c = sr_cm_id_alloc(l->chan, l->id.context, l->id.ps, qpt);

	if (!c)
		return NULL;
	if (l->sync && sr_cm_chan_sync(c)) {
		sr_cm_id_free(c);
		return NULL;
	}
	c->listener = l;
	c->local = *local;
	c->local.sin6_port = 0;
	c->peer = *peer;
	c->peer.sin6_port = 0;
	c->dev = dev;
	c->gid_index = gidx;
	c->id.verbs = dev->verbs;
	c->id.pd = sr_cm_dev_pd(dev);
	c->id.port_num = 1;
	c->tos = l->tos;
	c->afonly = l->afonly;
	c->service_id = l->service_id;
	memcpy(&c->id.route.addr.src_addr, src, (size_t)sr_cm_addr_len(src));
	memcpy(&c->id.route.addr.dst_addr, dst, (size_t)sr_cm_addr_len(dst));
	sr_cm_fill_path(c);
	c->mtu = dev->active_mtu;
	return c;
}

static uint32_t *free_cids;
static size_t n_free_cids, cap_free_cids;

/* Unlink and free (lock held).  The Communication ID goes back to the
 * daemon later, outside the lock (release_cids). */
void sr_cm_id_free(struct sr_cm_id *id)
{
	sr_iwcm_release(id);
	for (struct sr_cm_id **pp = &sr_cm.ids; *pp; pp = &(*pp)->next)
		if (*pp == id) {
			*pp = id->next;
			break;
		}
	if (id->lcid) {
		if (n_free_cids == cap_free_cids) {
			size_t cap = cap_free_cids ? cap_free_cids * 2 : 64;
			uint32_t *n = realloc(free_cids, cap * sizeof(*n));
			if (n) {
				free_cids = n;
				cap_free_cids = cap;
			}
		}
		if (n_free_cids < cap_free_cids)
			free_cids[n_free_cids++] = id->lcid;
	}
	if (id->sync && id->chan)
		chan_free(id->chan);
	while (id->mcs) {
		struct sr_cm_mc *m = id->mcs;
		id->mcs = m->next;
		free(m);
	}
	free(id->qp_init_attr);
	free(id);
}

/* Return freed Communication IDs to the daemon (lock not held). */
static void release_cids(void)
{
	for (;;) {
		uint32_t cid = 0;
		pthread_mutex_lock(&sr_cm.lock);
		if (n_free_cids)
			cid = free_cids[--n_free_cids];
		pthread_mutex_unlock(&sr_cm.lock);
		if (!cid)
			return;
		if (sr_cm.daemon)
			sr_daemon_free_comm_id(sr_cm.daemon, cid);
	}
}

static enum ibv_qp_type ps_qp_type(enum rdma_port_space ps)
{
	return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
}

SR_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
			     enum rdma_port_space ps)
{
	struct sr_cm_id *c;

	if (!id)
		return fail(EINVAL);
	if (init_or_fail())
		return -1;
	if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB && ps != RDMA_PS_IPOIB)
		return fail(EPROTONOSUPPORT);
	pthread_mutex_lock(&sr_cm.lock);
	c = sr_cm_id_alloc((struct sr_cm_chan *)channel, context, ps, ps_qp_type(ps));
	if (c && !channel && sr_cm_chan_sync(c)) {
		sr_cm_id_free(c);
		c = NULL;
	}
	pthread_mutex_unlock(&sr_cm.lock);
	if (!c)
		return fail(ENOMEM);
	*id = &c->id;
	return 0;
}

/* A synchronous id's operation waits for its event here (lock not held).
 * The event stays in id->event until the next operation or destroy. */
static int sync_wait(struct sr_cm_id *c)
{
	struct rdma_cm_event *ev;

	if (!c->sync)
		return 0;
	if (c->id.event) {
		rdma_ack_cm_event(c->id.event);
		c->id.event = NULL;
	}
	if (rdma_get_cm_event(c->id.channel, &ev))
		return -1;
	c->id.event = ev;
	if (ev->status) {
		int err = ev->event == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED :
			  ev->status < 0		      ? -ev->status :
								ev->status;
		return fail(err);
	}
	return 0;
}

static void ack_stored(struct sr_cm_id *c)
{
	if (c->id.event) {
		rdma_ack_cm_event(c->id.event);
		c->id.event = NULL;
	}
}

static int unregister(struct sr_cm_id *c)
{
	struct sockaddr_in6 a;

	sr_cm_to_in6(&c->id.route.addr.src_addr, &a);
	return sr_cm.daemon ? sr_daemon_unlisten(sr_cm.daemon, c->service_id, &a) : 0;
}

SR_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct sr_cm_id *c = cm_id(id);
	bool linger = false;

	if (!id)
		return fail(EINVAL);
	ack_stored(c);
	if (c->registered) {
		unregister(c);
		c->registered = false;
	}
	pthread_mutex_lock(&sr_cm.lock);
	c->destroyed = true;
	/* events queued and not yet read are dropped, as the kernel does */
	struct sr_cm_chan *ch = c->chan;
	for (struct sr_cm_event **pp = &ch->head, *prev = NULL; *pp;) {
		struct sr_cm_event *e = *pp;
		if (e->ev.id == id || e->owner == c) {
			*pp = e->next;
			if (ch->tail == e)
				ch->tail = prev;
			e->owner->events_pending--;
			if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->ev.id != id) {
				/* a request nobody will answer now */
				struct sr_cm_id *child = cm_id(e->ev.id);
				if (sr_iwcm_id(child))
					sr_iwcm_reject(child, NULL, 0);
				else
					sr_cm_send_rej(child, SR_CM_REJ_CONSUMER_DEFINED, NULL, 0);
				sr_cm_id_free(child);
			}
			free(e);
		} else {
			prev = e;
			pp = &e->next;
		}
	}
	/* children of a listener outlive it; they just forget it */
	for (struct sr_cm_id *o = sr_cm.ids; o; o = o->next)
		if (o->listener == c)
			o->listener = NULL;
	while (c->events_pending)
		pthread_cond_wait(&sr_cm.cond, &sr_cm.lock);
	if (sr_iwcm_id(c) || c->iw_lfd >= 0 || c->iw_fd >= 0) {
		linger = sr_iwcm_destroy(c);
		goto done;
	}
	switch (c->state) {
	case CM_REQ_RCVD:
		sr_cm_send_rej(c, SR_CM_REJ_CONSUMER_DEFINED, NULL, 0);
		break;
	case CM_REQ_SENT:
		sr_cm_send_rej(c, SR_CM_REJ_TIMEOUT, NULL, 0);
		break;
	case CM_REP_SENT:
	case CM_REP_RCVD:
		sr_cm_send_rej(c, SR_CM_REJ_CONSUMER_DEFINED, NULL, 0);
		break;
	case CM_SIDR_REQ_RCVD:
		sr_cm_send_sidr_rep(c, SR_CM_SIDR_REJECT, NULL, 0);
		break;
	case CM_ESTABLISHED:
		/* the kernel's CM disconnects a connection whose id goes away */
		sr_cm_send_dreq(c);
		linger = true;
		break;
	case CM_DREQ_RCVD:
		sr_cm_send_drep(c);
		break;
	case CM_DREQ_SENT:
		linger = c->timer == CM_T_RETRY;
		break;
	default:
		break;
	}
done:
	if (linger) {
		c->id.qp = NULL;
		sr_cm_wake();
	} else {
		sr_cm_id_free(c);
	}
	pthread_mutex_unlock(&sr_cm.lock);
	release_cids();
	return 0;
}

/* ---- binding and address resolution ---- */

static bool addr_is_local(const struct sockaddr *sa)
{
	int fd = sr_socket(sa->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool ok;
	struct sockaddr_storage s;

	if (fd < 0)
		return false;
	memcpy(&s, sa, (size_t)sr_cm_addr_len(sa));
	sr_cm_set_port((struct sockaddr *)&s, 0);
	ok = sr_udp_bind_low(fd, (struct sockaddr *)&s, (socklen_t)sr_cm_addr_len(sa)) == 0;
	close(fd);
	return ok;
}

static uint16_t random_port(void)
{
	return (uint16_t)(32768 + (random() % (61000 - 32768)));
}

/* An id whose AFONLY option is not set gets the kernel's default when it
 * is bound: IPv4 ids take IPv4 only, IPv6 ids follow the namespace's
 * net.ipv6.bindv6only (0 by default: they take IPv4 too). */
static bool default_afonly(int family)
{
	char v = '0';

	if (family != AF_INET6)
		return true;
	int fd = open("/proc/sys/net/ipv6/bindv6only", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, &v, 1) != 1)
			v = '0';
		close(fd);
	}
	return v == '1';
}

/* Two listeners of this process on one port get along when both take only
 * their own family and the families differ (tgt's iSER portals: 0.0.0.0
 * and [::] with AFONLY on both); otherwise a wildcard collides with every
 * address, as in the kernel's cma_check_port. */
static bool listen_conflict(const struct sr_cm_id *a, const struct sr_cm_id *b)
{
	struct sockaddr_in6 aa, ba;

	if (a->afonly && b->afonly && a->id.route.addr.src_addr.sa_family != b->id.route.addr.src_addr.sa_family)
		return false;
	sr_cm_to_in6(&a->id.route.addr.src_addr, &aa);
	sr_cm_to_in6(&b->id.route.addr.src_addr, &ba);
	return sr_cm_is_any(&aa) || sr_cm_is_any(&ba) || !memcmp(&aa.sin6_addr, &ba.sin6_addr, 16);
}

/* Bind c to addr (lock not held).  reserve: register the port with the
 * daemon (explicit binds and listens), so that a second binder of the same
 * port gets EADDRINUSE as from the kernel. */
static int bind_addr(struct sr_cm_id *c, const struct sockaddr *addr, bool reserve)
{
	struct sockaddr_in6 a;
	struct sr_cm_dev *dev = NULL;
	uint8_t gidx = 0;
	int len = sr_cm_addr_len(addr);

	if (!len)
		return fail(addr && addr->sa_family == AF_IB ? EAFNOSUPPORT : EINVAL);
	sr_cm_to_in6(addr, &a);
	if (!sr_cm_is_any(&a)) {
		if (!addr_is_local(addr))
			return fail(EADDRNOTAVAIL);
		pthread_mutex_lock(&sr_cm.lock);
		dev = sr_cm_dev_by_addr(&a, &gidx);
		pthread_mutex_unlock(&sr_cm.lock);
		if (!dev)
			return fail(ENODEV);
	}
	pthread_mutex_lock(&sr_cm.lock);
	if (c->state != CM_IDLE) {
		pthread_mutex_unlock(&sr_cm.lock);
		return fail(EINVAL);
	}
	memset(&c->id.route.addr.src_storage, 0, sizeof(c->id.route.addr.src_storage));
	memcpy(&c->id.route.addr.src_addr, addr, (size_t)len);
	c->state = CM_BOUND;
	if (!c->afonly_set)
		c->afonly = default_afonly(addr->sa_family);
	if (dev) {
		c->dev = dev;
		c->gid_index = gidx;
		c->id.verbs = dev->verbs;
		c->id.pd = sr_cm_dev_pd(dev);
		c->id.port_num = 1;
		c->local = a;
		c->local.sin6_port = 0;
	}
	pthread_mutex_unlock(&sr_cm.lock);

	uint16_t port = sr_cm_port(addr);
	bool pick = port == 0;
	c->port_auto = pick;
	for (int tries = 0;; tries++) {
		if (pick)
			port = random_port();
		sr_cm_set_port(&c->id.route.addr.src_addr, port);
		c->service_id = sr_cma_service_id((uint16_t)c->id.ps, port);
		if (!reserve || !sr_cm.daemon || (dev && dev->iwarp))
			return 0; /* iWARP ports are TCP's, claimed by its listen */
		int err = sr_daemon_listen(sr_cm.daemon, c->service_id, &a);
		if (!err) {
			c->registered = true;
			return 0;
		}
		if (err != -EADDRINUSE || !pick || tries > 64) {
			pthread_mutex_lock(&sr_cm.lock);
			c->state = CM_IDLE;
			c->dev = NULL;
			c->id.verbs = NULL;
			pthread_mutex_unlock(&sr_cm.lock);
			return fail(-err);
		}
	}
}

SR_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	if (!id || !addr)
		return fail(EINVAL);
	/* the port is claimed host-wide at rdma_listen (see README): claiming
	 * it here would route REQs to an id that does not listen yet */
	return bind_addr(cm_id(id), addr, false);
}

static bool is_multicast(const struct sockaddr_in6 *a)
{
	if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr))
		return (a->sin6_addr.s6_addr[12] & 0xf0) == 0xe0;
	return IN6_IS_ADDR_MULTICAST(&a->sin6_addr);
}

static void post_simple(struct sr_cm_id *c, enum rdma_cm_event_type type, int status)
{
	struct sr_cm_event *e = sr_cm_event_new(c, type, status);
	if (e)
		sr_cm_event_post(c, e);
}

SR_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr, struct sockaddr *dst_addr,
				int timeout_ms)
{
	struct sr_cm_id *c = cm_id(id);
	struct sockaddr_in6 dst, src;
	int dlen = dst_addr ? sr_cm_addr_len(dst_addr) : 0;

	if (!id || !dlen)
		return fail(dst_addr && dst_addr->sa_family == AF_IB ? EAFNOSUPPORT : EINVAL);
	ack_stored(c);
	sr_cm_to_in6(dst_addr, &dst);
	if (c->state == CM_IDLE) {
		if (src_addr && sr_cm_addr_len(src_addr)) {
			if (bind_addr(c, src_addr, sr_cm_port(src_addr) != 0))
				return -1;
		} else {
			struct sockaddr_storage any = { .ss_family = dst_addr->sa_family };
			if (bind_addr(c, (struct sockaddr *)&any, false))
				return -1;
		}
	}
	pthread_mutex_lock(&sr_cm.lock);
	if (c->state != CM_BOUND && c->state != CM_ADDR_RESOLVED) {
		pthread_mutex_unlock(&sr_cm.lock);
		return fail(EINVAL);
	}
	memset(&c->id.route.addr.dst_storage, 0, sizeof(c->id.route.addr.dst_storage));
	memcpy(&c->id.route.addr.dst_addr, dst_addr, (size_t)dlen);

	int status = 0;
	if (!c->dev) {
		/* the source address the routing table picks for dst */
		uint8_t gidx = 0;
		struct sr_cm_dev *dev = NULL;
		int err = sr_cm_route_src(&dst, &src);
		if (!err)
			dev = sr_cm_dev_by_addr(&src, &gidx);
		union ibv_gid g;
		if (!dev && !err && sr_cm_is_loopback(&dst) && (dev = sr_cm_dev_loopback(&dst, true, false, &g))) {
			memset(&src, 0, sizeof(src));
			src.sin6_family = AF_INET6;
			memcpy(&src.sin6_addr, g.raw, 16);
			memcpy(&dst.sin6_addr, g.raw, 16);
		}
		if (err) {
			status = err;
		} else if (!dev) {
			status = -ENODEV;
		} else {
			c->dev = dev;
			c->gid_index = gidx;
			c->local = src;
			c->id.verbs = dev->verbs;
			c->id.pd = sr_cm_dev_pd(dev);
			c->id.port_num = 1;
			/* the application sees the source address it would get from a socket */
			uint16_t port = sr_cm_port(&c->id.route.addr.src_addr);
			if (dst_addr->sa_family == AF_INET) {
				c->id.route.addr.src_sin.sin_family = AF_INET;
				memcpy(&c->id.route.addr.src_sin.sin_addr, &src.sin6_addr.s6_addr[12], 4);
			} else {
				c->id.route.addr.src_sin6.sin6_family = AF_INET6;
				c->id.route.addr.src_sin6.sin6_addr = src.sin6_addr;
			}
			sr_cm_set_port(&c->id.route.addr.src_addr, port);
		}
	} else if (sr_cm_is_loopback(&dst)) {
		dst.sin6_addr = c->local.sin6_addr;
	}
	c->peer = dst;
	c->peer.sin6_port = 0;
	if (!status && !is_multicast(&dst) &&
	    IN6_IS_ADDR_V4MAPPED(&dst.sin6_addr) != IN6_IS_ADDR_V4MAPPED(&c->local.sin6_addr))
		status = -EAFNOSUPPORT;
	if (!status) {
		c->state = CM_ADDR_RESOLVED;
		c->mtu = c->dev->active_mtu;
		post_simple(c, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
	} else {
		post_simple(c, RDMA_CM_EVENT_ADDR_ERROR, status);
	}
	pthread_mutex_unlock(&sr_cm.lock);
	/* resolution is immediate: no ARP on an IP GID */
	return sync_wait(c);
}

SR_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct sr_cm_id *c = cm_id(id);

	if (!id)
		return fail(EINVAL);
	ack_stored(c);
	pthread_mutex_lock(&sr_cm.lock);
	if (c->state != CM_ADDR_RESOLVED && c->state != CM_ROUTE_RESOLVED) {
		pthread_mutex_unlock(&sr_cm.lock);
		return fail(EINVAL);
	}
	sr_cm_fill_path(c);
	c->state = CM_ROUTE_RESOLVED;
	post_simple(c, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
	pthread_mutex_unlock(&sr_cm.lock);
	return sync_wait(c);
}

/* ---- QPs on ids ---- */

static int qp_init(struct sr_cm_id *c, struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { 0 };

	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = c->qkey;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
			return -1;
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTR;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
			return -1;
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = (uint32_t)random() & 0xffffff;
		return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) ? -1 : 0;
	}
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ? -1 : 0;
}

static void destroy_cqs(struct rdma_cm_id *id)
{
	if (id->recv_cq) {
		ibv_destroy_cq(id->recv_cq);
		if (id->send_cq == id->recv_cq)
			id->send_cq = NULL;
		id->recv_cq = NULL;
	}
	if (id->recv_cq_channel) {
		ibv_destroy_comp_channel(id->recv_cq_channel);
		id->recv_cq_channel = NULL;
	}
	if (id->send_cq) {
		ibv_destroy_cq(id->send_cq);
		id->send_cq = NULL;
	}
	if (id->send_cq_channel) {
		ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq_channel = NULL;
	}
}

static int create_cqs(struct rdma_cm_id *id, uint32_t send_size, uint32_t recv_size)
{
	if (recv_size) {
		id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->recv_cq_channel)
			goto err;
		id->recv_cq = ibv_create_cq(id->verbs, (int)recv_size, id, id->recv_cq_channel, 0);
		if (!id->recv_cq)
			goto err;
	}
	if (send_size) {
		id->send_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->send_cq_channel)
			goto err;
		id->send_cq = ibv_create_cq(id->verbs, (int)send_size, id, id->send_cq_channel, 0);
		if (!id->send_cq)
			goto err;
	}
	return 0;
err:
	destroy_cqs(id);
	return -1;
}

SR_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct sr_cm_id *c = cm_id(id);
	struct ibv_qp *qp;

	if (!id || !attr || id->qp)
		return fail(EINVAL);
	if (!id->verbs)
		return fail(EINVAL); /* not bound to a device yet */
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		attr->pd = id->pd;
	} else if (attr->pd->context != id->verbs) {
		return fail(EINVAL);
	}
	if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
	    (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq))
		return fail(EINVAL);
	if (create_cqs(id, attr->send_cq || id->send_cq ? 0 : attr->cap.max_send_wr,
		       attr->recv_cq || id->recv_cq ? 0 : attr->cap.max_recv_wr))
		return -1;
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq;
	if (id->srq && !attr->srq)
		attr->srq = id->srq;
	qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp)
		goto err;
	if (qp_init(c, qp)) {
		int e = errno;
		ibv_destroy_qp(qp);
		errno = e;
		goto err;
	}
	id->qp = qp;
	id->qp_type = qp->qp_type;
	return 0;
err : {
	int e = errno;
	destroy_cqs(id);
	errno = e;
	return -1;
}
}

SR_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ax;

	if (!id || !qp_init_attr)
		return fail(EINVAL);
	if (pd && pd->context != id->verbs)
		return fail(EINVAL);
	memset(&ax, 0, sizeof(ax));
	memcpy(&ax, qp_init_attr, sizeof(*qp_init_attr));
	ax.comp_mask = IBV_QP_INIT_ATTR_PD;
	ax.pd = pd ? pd : id->pd;
	if (rdma_create_qp_ex(id, &ax))
		return -1;
	qp_init_attr->send_cq = ax.send_cq;
	qp_init_attr->recv_cq = ax.recv_cq;
	qp_init_attr->srq = ax.srq;
	qp_init_attr->cap = ax.cap;
	return 0;
}

SR_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp) {
		ibv_destroy_qp(id->qp);
		id->qp = NULL;
	}
	destroy_cqs(id);
}

SR_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq *srq;

	if (!id || !attr || !id->verbs)
		return fail(EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		return fail(EINVAL);
	if (attr->srq_type != IBV_SRQT_BASIC)
		return fail(EOPNOTSUPP); /* XRC is not implemented */
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	struct ibv_srq_init_attr a = { .srq_context = attr->srq_context, .attr = attr->attr };
	srq = ibv_create_srq(attr->pd, &a);
	if (!srq)
		return -1;
	attr->attr = a.attr;
	id->srq = srq;
	return 0;
}

SR_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ax;

	if (!id || !attr)
		return fail(EINVAL);
	memset(&ax, 0, sizeof(ax));
	memcpy(&ax, attr, sizeof(*attr));
	ax.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	ax.srq_type = IBV_SRQT_BASIC;
	ax.pd = pd ? pd : id->pd;
	if (rdma_create_srq_ex(id, &ax))
		return -1;
	attr->attr = ax.attr;
	return 0;
}

SR_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (id && id->srq) {
		ibv_destroy_srq(id->srq);
		id->srq = NULL;
	}
}

/* The QP attributes for a transition (rdma_init_qp_attr), lock held. */
static int qp_attr_for(struct sr_cm_id *c, struct ibv_qp_attr *a, int *mask)
{
	enum ibv_qp_state st = a->qp_state;

	memset(a, 0, sizeof(*a));
	a->qp_state = st;
	switch (st) {
	case IBV_QPS_INIT:
		a->pkey_index = 0;
		a->port_num = 1;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (c->id.qp_type == IBV_QPT_UD) {
			a->qkey = c->qkey;
			*mask |= IBV_QP_QKEY;
		} else {
			a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
			if (c->resp_res)
				a->qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
			*mask |= IBV_QP_ACCESS_FLAGS;
		}
		return 0;
	case IBV_QPS_RTR:
		*mask = IBV_QP_STATE;
		if (c->id.qp_type == IBV_QPT_UD)
			return 0;
		if (!c->rqpn && c->state != CM_REQ_RCVD && c->state != CM_REP_RCVD && c->state != CM_ESTABLISHED)
			return -EINVAL;
		{
			union ibv_gid dgid;
			sr_cm_gid_from_in6(&c->peer, &dgid);
			sr_cm_fill_ah(c, &a->ah_attr, &dgid);
		}
		a->path_mtu = c->mtu;
		a->dest_qp_num = c->rqpn;
		a->rq_psn = c->rq_psn;
		*mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (c->id.qp_type == IBV_QPT_RC) {
			a->max_dest_rd_atomic = c->resp_res;
			a->min_rnr_timer = 0; /* 655.36 ms: the kernel's CM gives 0 */
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
		return 0;
	case IBV_QPS_RTS:
		a->sq_psn = c->sq_psn;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		if (c->id.qp_type == IBV_QPT_RC) {
			a->timeout = c->ack_timeout;
			a->retry_cnt = c->retry_count;
			a->rnr_retry = c->rnr_retry_count;
			a->max_rd_atomic = c->init_depth;
			*mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		}
		return 0;
	default:
		return -EINVAL;
	}
}

SR_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	int err;

	if (!id || !qp_attr || !qp_attr_mask)
		return fail(EINVAL);
	pthread_mutex_lock(&sr_cm.lock);
	if (sr_iwcm_id(cm_id(id)))
		err = sr_iwcm_qp_attr(cm_id(id), qp_attr, qp_attr_mask);
	else
		err = qp_attr_for(cm_id(id), qp_attr, qp_attr_mask);
	pthread_mutex_unlock(&sr_cm.lock);
	return err ? fail(-err) : 0;
}

/* INIT (access flags now that responder resources are known) -> RTR -> RTS. */
int sr_cm_qp_to_rtr_rts(struct sr_cm_id *c)
{
	static const enum ibv_qp_state steps[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };
	struct ibv_qp_attr a;
	int mask, err;

	if (!c->id.qp)
		return 0;
	for (size_t i = 0; i < 3; i++) {
		a.qp_state = steps[i];
		if ((err = qp_attr_for(c, &a, &mask)))
			return err;
		if ((err = ibv_modify_qp(c->id.qp, &a, mask)))
			return err;
	}
	return 0;
}

void sr_cm_qp_to_err(struct sr_cm_id *c)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	/* on iWARP the CM drives an application's own QP too, as iw_cm does */
	struct ibv_qp *qp = sr_iwcm_id(c) ? sr_iwcm_qp(c) : c->id.qp;

	if (qp)
		ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

/* ---- listen, connect, accept, reject, disconnect ---- */

SR_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct sr_cm_id *c = cm_id(id);

	if (!id)
		return fail(EINVAL);
	if (c->state == CM_IDLE) {
		struct sockaddr_storage any = { .ss_family = AF_INET };
		if (bind_addr(c, (struct sockaddr *)&any, false))
			return -1;
	}
	/* listening before the daemon routes anything here, so that no
	 * REQ finds the id not yet listening */
	pthread_mutex_lock(&sr_cm.lock);
	if (c->state != CM_BOUND && c->state != CM_LISTEN) {
		pthread_mutex_unlock(&sr_cm.lock);
		return fail(EINVAL);
	}
	if (c->state == CM_BOUND) {
		/* another id of this process on the port (the daemon checks
		 * other processes) */
		for (struct sr_cm_id *o = sr_cm.ids; o; o = o->next) {
			if (o == c || o->state != CM_LISTEN || o->destroyed || o->service_id != c->service_id)
				continue;
			if (listen_conflict(c, o)) {
				pthread_mutex_unlock(&sr_cm.lock);
				return fail(EADDRINUSE);
			}
		}
	}
	bool was_listening = c->state == CM_LISTEN;
	/* which CMs listen: a bound id its device's, a wildcard one every
	 * kind configured (as the kernel listens on every device) */
	bool want_iw = c->dev ? c->dev->iwarp : sr_cm.have_iwarp;
	bool want_roce = c->dev ? !c->dev->iwarp : sr_cm.have_roce;
	c->state = CM_LISTEN;
	c->backlog = backlog;
	pthread_mutex_unlock(&sr_cm.lock);
	if (was_listening)
		return 0;
	struct sockaddr_in6 a;
	for (int tries = 0;; tries++) {
		int err = 0;
		if (want_iw)
			err = sr_iwcm_listen(c, backlog); /* picks another port itself if it must */
		if (!err && want_roce && !c->registered) {
			sr_cm_to_in6(&c->id.route.addr.src_addr, &a);
			err = sr_daemon_listen(sr_cm.daemon, c->service_id, &a);
			if (!err)
				c->registered = true;
		}
		if (!err)
			break;
		pthread_mutex_lock(&sr_cm.lock);
		sr_iwcm_unlisten(c);
		if (err != -EADDRINUSE || !c->port_auto || tries > 64) {
			c->state = CM_BOUND;
			pthread_mutex_unlock(&sr_cm.lock);
			return fail(-err);
		}
		uint16_t port = random_port();
		sr_cm_set_port(&c->id.route.addr.src_addr, port);
		c->service_id = sr_cma_service_id((uint16_t)c->id.ps, port);
		pthread_mutex_unlock(&sr_cm.lock);
	}
	return 0;
}

static uint8_t cap_u8(uint8_t want, uint8_t max)
{
	return want == 0xff || want > max ? max : want;
}

SR_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct sr_cm_id *c = cm_id(id);
	struct rdma_conn_param zero = { 0 };
	uint32_t cid = 0;
	int err;
	bool ud;

	if (!id)
		return fail(EINVAL);
	ud = id->qp_type == IBV_QPT_UD || id->ps == RDMA_PS_UDP || id->ps == RDMA_PS_IPOIB;
	if (!conn_param)
		conn_param = &zero;
	if (sr_iwcm_id(c) && !ud) {
		/* MPA carries up to 512 bytes: any u8 length fits */
		if (conn_param->private_data_len && !conn_param->private_data)
			return fail(EINVAL);
		ack_stored(c);
		pthread_mutex_lock(&sr_cm.lock);
		err = sr_iwcm_connect(c, conn_param);
		pthread_mutex_unlock(&sr_cm.lock);
		if (err)
			return fail(-err);
		return sync_wait(c);
	}
	if (conn_param->private_data_len &&
	    (!conn_param->private_data ||
	     conn_param->private_data_len >
		     (ud ? SR_CM_SIDR_REQ_PRIVATE_DATA : SR_CM_REQ_PRIVATE_DATA) - SR_CMA_HDR_BYTES))
		return fail(EINVAL);
	ack_stored(c);
	if (c->state != CM_ROUTE_RESOLVED)
		return fail(EINVAL);
	if ((err = sr_daemon_alloc_comm_id(sr_cm.daemon, &cid)))
		return fail(-err);
	pthread_mutex_lock(&sr_cm.lock);
	if (c->state != CM_ROUTE_RESOLVED) {
		pthread_mutex_unlock(&sr_cm.lock);
		sr_daemon_free_comm_id(sr_cm.daemon, cid);
		return fail(EINVAL);
	}
	c->lcid = cid;
	c->service_id = sr_cma_service_id((uint16_t)id->ps, sr_cm_port(&id->route.addr.dst_addr));
	if (ud) {
		err = sr_cm_send_sidr_req(c, conn_param);
	} else {
		c->resp_res = cap_u8(conn_param->responder_resources, c->dev->max_dest_rd_atomic);
		c->init_depth = cap_u8(conn_param->initiator_depth, c->dev->max_rd_atomic);
		c->retry_count = conn_param->retry_count > 7 ? 7 : conn_param->retry_count;
		c->rnr_retry_count = conn_param->rnr_retry_count > 7 ? 7 : conn_param->rnr_retry_count;
		c->rq_psn = (uint32_t)random() & 0xffffff;
		err = sr_cm_send_req(c, conn_param);
	}
	pthread_mutex_unlock(&sr_cm.lock);
	if (err)
		return fail(-err);
	return sync_wait(c);
}

SR_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	struct sr_cm_id *c = cm_id(id);
	int err = 0;

	if (!id)
		return fail(EINVAL);
	pthread_mutex_lock(&sr_cm.lock);
	if (c->state != CM_REP_RCVD) {
		err = EINVAL;
	} else {
		c->state = CM_ESTABLISHED;
		sr_cm_send_rtu(c);
		sr_cm_will_queue(c);
	}
	pthread_mutex_unlock(&sr_cm.lock);
	sr_cm_wills_flush();
	return err ? fail(err) : 0;
}

SR_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct sr_cm_id *c = cm_id(id);
	uint32_t cid = 0;
	int err;

	if (!id)
		return fail(EINVAL);
	if (conn_param && conn_param->private_data_len &&
	    (!conn_param->private_data ||
	     (!sr_iwcm_id(c) &&
	      conn_param->private_data_len >
		      (id->qp_type == IBV_QPT_UD ? SR_CM_SIDR_REP_PRIVATE_DATA : SR_CM_REP_PRIVATE_DATA))))
		return fail(EINVAL);
	if (c->state == CM_LISTEN) {
		return fail(EINVAL);
	}
	if (sr_iwcm_id(c) && c->state == CM_REQ_RCVD) {
		pthread_mutex_lock(&sr_cm.lock);
		err = sr_iwcm_accept(c, conn_param);
		pthread_mutex_unlock(&sr_cm.lock);
		if (err)
			return fail(-err);
		ack_stored(c);
		return sync_wait(c);
	}
	if (c->state == CM_SIDR_REQ_RCVD) {
		pthread_mutex_lock(&sr_cm.lock);
		if (id->qp)
			c->qkey = SR_CMA_QKEY;
		err = sr_cm_send_sidr_rep(c, id->qp || (conn_param && conn_param->qp_num) ? 0 : SR_CM_SIDR_NO_QP,
					  conn_param ? conn_param->private_data : NULL,
					  conn_param ? conn_param->private_data_len : 0);
		pthread_mutex_unlock(&sr_cm.lock);
		ack_stored(c);
		return err ? fail(-err) : 0;
	}
	if (c->state != CM_REQ_RCVD) {
		return fail(EINVAL);
	}
	if ((err = sr_daemon_alloc_comm_id(sr_cm.daemon, &cid)))
		return fail(-err);
	pthread_mutex_lock(&sr_cm.lock);
	if (c->state != CM_REQ_RCVD) {
		pthread_mutex_unlock(&sr_cm.lock);
		sr_daemon_free_comm_id(sr_cm.daemon, cid);
		return fail(EINVAL);
	}
	c->lcid = cid;
	if (conn_param) {
		if (conn_param->responder_resources != RDMA_MAX_RESP_RES)
			c->resp_res = cap_u8(conn_param->responder_resources, c->dev->max_dest_rd_atomic);
		if (conn_param->initiator_depth != RDMA_MAX_INIT_DEPTH)
			c->init_depth = cap_u8(conn_param->initiator_depth, c->dev->max_rd_atomic);
		c->rnr_retry_count = conn_param->rnr_retry_count > 7 ? 7 : conn_param->rnr_retry_count;
	}
	err = sr_cm_qp_to_rtr_rts(c);
	if (err) {
		fprintf(stderr, "softrdma: rdma_accept: moving the QP to RTS failed: %s\n", strerror(err));
		sr_cm_send_rej(c, SR_CM_REJ_CONSUMER_DEFINED, NULL, 0);
		c->state = CM_DISCONNECTED;
		pthread_mutex_unlock(&sr_cm.lock);
		return fail(err);
	}
	err = sr_cm_send_rep(c, conn_param);
	if (!err)
		sr_cm_will_queue(c);
	pthread_mutex_unlock(&sr_cm.lock);
	sr_cm_wills_flush();
	if (err)
		return fail(-err);
	ack_stored(c);
	return sync_wait(c);
}

static int reject(struct rdma_cm_id *id, const void *pdata, uint8_t len, uint16_t reason)
{
	struct sr_cm_id *c = cm_id(id);
	uint32_t cid = 0;
	int err = 0;

	if (!id)
		return fail(EINVAL);
	if (len && !pdata)
		return fail(EINVAL);
	if (sr_iwcm_id(c) && c->state == CM_REQ_RCVD) {
		pthread_mutex_lock(&sr_cm.lock);
		err = sr_iwcm_reject(c, pdata, len);
		pthread_mutex_unlock(&sr_cm.lock);
		ack_stored(c);
		return err ? fail(-err) : 0;
	}
	if (len > (id->qp_type == IBV_QPT_UD ? SR_CM_SIDR_REP_PRIVATE_DATA : SR_CM_REJ_PRIVATE_DATA))
		return fail(EINVAL);
	if (c->state == CM_REQ_RCVD && (err = sr_daemon_alloc_comm_id(sr_cm.daemon, &cid)))
		return fail(-err);
	pthread_mutex_lock(&sr_cm.lock);
	if (c->state == CM_SIDR_REQ_RCVD) {
		err = sr_cm_send_sidr_rep(c, SR_CM_SIDR_REJECT, pdata, len);
	} else if (c->state == CM_REQ_RCVD) {
		c->lcid = cid;
		cid = 0;
		err = sr_cm_send_rej(c, reason, pdata, len);
		c->state = CM_DISCONNECTED;
	} else {
		err = -EINVAL;
	}
	pthread_mutex_unlock(&sr_cm.lock);
	if (cid)
		sr_daemon_free_comm_id(sr_cm.daemon, cid);
	ack_stored(c);
	return err ? fail(-err) : 0;
}

SR_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len, SR_CM_REJ_CONSUMER_DEFINED);
}

SR_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len, SR_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED);
}

SR_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct sr_cm_id *c = cm_id(id);
	int err = 0;

	if (!id)
		return fail(EINVAL);
	pthread_mutex_lock(&sr_cm.lock);
	if (sr_iwcm_id(c))
		err = -sr_iwcm_disconnect(c);
	else
		switch (c->state) {
		case CM_ESTABLISHED:
		case CM_REP_SENT:
			sr_cm_qp_to_err(c);
			sr_cm_send_dreq(c);
			break;
		case CM_DREQ_RCVD:
			sr_cm_qp_to_err(c);
			sr_cm_send_drep(c);
			c->state = CM_TIMEWAIT;
			sr_cm_arm(c, CM_T_TIMEWAIT, 2 * sr_cm_timeout_ns(SR_CMA_PACKET_LIFETIME));
			break;
		case CM_DREQ_SENT:
		case CM_TIMEWAIT:
		case CM_DISCONNECTED:
			sr_cm_qp_to_err(c);
			break;
		default:
			err = EINVAL;
		}
	pthread_mutex_unlock(&sr_cm.lock);
	if (err)
		return fail(err);
	if (c->sync && c->state == CM_DREQ_SENT) {
		/* rdma-core's synchronous disconnect waits for its DISCONNECTED
		 * (on iWARP, CM_DREQ_SENT is "closing") */
		ack_stored(c);
		return sync_wait(c);
	}
	return 0;
}

int sr_cm_comm_est(struct sr_cm_id *id);

SR_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	int err = 0;

	if (!id)
		return fail(EINVAL);
	if (event != IBV_EVENT_COMM_EST)
		return 0;
	pthread_mutex_lock(&sr_cm.lock);
	err = sr_cm_comm_est(cm_id(id));
	pthread_mutex_unlock(&sr_cm.lock);
	return err ? fail(-err) : 0;
}

SR_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct sr_cm_id *c = cm_id(id);
	struct sr_cm_chan *to = (struct sr_cm_chan *)channel, *from;

	if (!id)
		return fail(EINVAL);
	if (!to && !(to = chan_new()))
		return fail(ENOMEM);
	pthread_mutex_lock(&sr_cm.lock);
	from = c->chan;
	/* queued events of this id follow it to the new channel */
	for (struct sr_cm_event **pp = &from->head, *prev = NULL; *pp;) {
		struct sr_cm_event *e = *pp;
		if (e->owner == c) {
			*pp = e->next;
			if (from->tail == e)
				from->tail = prev;
			e->next = NULL;
			if (to->tail)
				to->tail->next = e;
			else
				to->head = e;
			to->tail = e;
			char b = 0;
			if (send(to->wfd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
				/* see sr_cm_event_post */
			}
		} else {
			prev = e;
			pp = &e->next;
		}
	}
	bool was_sync = c->sync;
	c->chan = to;
	c->id.channel = &to->ch;
	c->sync = channel == NULL;
	if (was_sync && from != to)
		chan_free(from);
	pthread_mutex_unlock(&sr_cm.lock);
	return 0;
}

SR_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval, size_t optlen)
{
	struct sr_cm_id *c = cm_id(id);

	if (!id || !optval)
		return fail(EINVAL);
	if (level == RDMA_OPTION_ID) {
		switch (optname) {
		case RDMA_OPTION_ID_TOS:
			if (optlen != sizeof(uint8_t))
				return fail(EINVAL);
			c->tos = *(uint8_t *)optval;
			return 0;
		case RDMA_OPTION_ID_REUSEADDR:
			if (optlen != sizeof(int))
				return fail(EINVAL);
			c->reuseaddr = *(int *)optval != 0;
			return 0;
		case RDMA_OPTION_ID_AFONLY:
			if (optlen != sizeof(int))
				return fail(EINVAL);
			c->afonly = *(int *)optval != 0;
			c->afonly_set = true;
			return 0;
		case RDMA_OPTION_ID_ACK_TIMEOUT:
			if (optlen != sizeof(uint8_t))
				return fail(EINVAL);
			c->ack_timeout = *(uint8_t *)optval & 31;
			c->ack_timeout_set = true;
			return 0;
		default:
			return fail(ENOSYS);
		}
	}
	if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH)
		return fail(EOPNOTSUPP); /* no IB paths on RoCE/iWARP */
	return fail(ENOSYS);
}

SR_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	if (sr_cm_init()) {
		if (num_devices)
			*num_devices = 0;
		struct ibv_context **l = calloc(1, sizeof(*l));
		return l;
	}
	struct ibv_context **l = calloc((size_t)sr_cm.ndevs + 1, sizeof(*l));
	if (!l) {
		errno = ENOMEM;
		return NULL;
	}
	memcpy(l, sr_cm.dev_list, (size_t)sr_cm.ndevs * sizeof(*l));
	if (num_devices)
		*num_devices = sr_cm.ndevs;
	return l;
}

SR_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

SR_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return htons(sr_cm_port(&id->route.addr.src_addr));
}

SR_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return htons(sr_cm_port(&id->route.addr.dst_addr));
}

SR_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || !ece)
		return fail(EINVAL);
	cm_id(id)->local_ece = *ece;
	return 0;
}

SR_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || !ece)
		return fail(EINVAL);
	*ece = cm_id(id)->remote_ece; /* no ECE on the wire: all zero */
	return 0;
}

/* ---- rdma_create_ep and friends (synchronous ids) ---- */

SR_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cid;

	if (!id || !res)
		return fail(EINVAL);
	if (rdma_create_id(NULL, &cid, NULL,
			   res->ai_port_space ? (enum rdma_port_space)res->ai_port_space : RDMA_PS_TCP))
		return -1;
	if (res->ai_qp_type)
		cid->qp_type = (enum ibv_qp_type)res->ai_qp_type;
	if (res->ai_flags & RAI_PASSIVE) {
		if (rdma_bind_addr(cid, res->ai_src_addr))
			goto err;
		if (qp_init_attr) {
			struct sr_cm_id *c = cm_id(cid);
			c->qp_init_attr = malloc(sizeof(*qp_init_attr));
			if (!c->qp_init_attr) {
				errno = ENOMEM;
				goto err;
			}
			*c->qp_init_attr = *qp_init_attr;
			c->qp_init_attr->qp_type = cid->qp_type;
		}
		if (pd)
			cid->pd = pd;
	} else {
		if (rdma_resolve_addr(cid, res->ai_src_len ? res->ai_src_addr : NULL, res->ai_dst_addr, 2000))
			goto err;
		if (rdma_resolve_route(cid, 2000))
			goto err;
		if (qp_init_attr) {
			qp_init_attr->qp_type = cid->qp_type; /* as rdma-core: from res */
			if (rdma_create_qp(cid, pd, qp_init_attr))
				goto err;
		}
	}
	*id = cid;
	return 0;
err : {
	int e = errno;
	rdma_destroy_id(cid);
	errno = e;
	return -1;
}
}

SR_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}

SR_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct sr_cm_id *l = cm_id(listen);
	struct rdma_cm_event *ev;

	if (!listen || !id || !l->sync)
		return fail(EINVAL);
	ack_stored(l);
	for (;;) {
		if (rdma_get_cm_event(listen->channel, &ev))
			return -1;
		if (ev->status) {
			int err = ev->status < 0 ? -ev->status : ev->status;
			rdma_ack_cm_event(ev);
			return fail(err);
		}
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		rdma_ack_cm_event(ev);
	}
	struct rdma_cm_id *nid = ev->id;
	if (l->qp_init_attr) {
		struct ibv_qp_init_attr a = *l->qp_init_attr;
		struct ibv_pd *pd = listen->pd && listen->pd->context == nid->verbs ? listen->pd : NULL;
		if (rdma_create_qp(nid, pd, &a)) {
			int e = errno;
			rdma_reject(nid, NULL, 0);
			rdma_ack_cm_event(ev);
			rdma_destroy_id(nid);
			return fail(e);
		}
	}
	nid->event = ev;
	*id = nid;
	return 0;
}

/* ---- multicast ---- */

static void mgid_from(const struct sockaddr *addr, union ibv_gid *mgid)
{
	struct sockaddr_in6 a;

	sr_cm_to_in6(addr, &a);
	memcpy(mgid->raw, &a.sin6_addr, 16);
}

static int join(struct rdma_cm_id *id, struct sockaddr *addr, uint16_t flags, void *context)
{
	struct sr_cm_id *c = cm_id(id);
	struct sockaddr_in6 a;
	struct sr_cm_mc *m;

	if (!id || !addr || !sr_cm_addr_len(addr))
		return fail(EINVAL);
	sr_cm_to_in6(addr, &a);
	if (!is_multicast(&a))
		return fail(EINVAL);
	if (c->state != CM_ADDR_RESOLVED && c->state != CM_ROUTE_RESOLVED && c->state != CM_BOUND)
		return fail(EINVAL);
	if (!c->dev)
		return fail(ENODEV);
	m = calloc(1, sizeof(*m));
	if (!m)
		return fail(ENOMEM);
	memcpy(&m->addr, addr, (size_t)sr_cm_addr_len(addr));
	mgid_from(addr, &m->mgid);
	m->context = context;
	m->join_flags = flags;
	int status = 0;
	if (id->qp && flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
		if (ibv_attach_mcast(id->qp, &m->mgid, 0))
			status = -errno;
		else
			m->attached = true;
	}
	pthread_mutex_lock(&sr_cm.lock);
	m->next = c->mcs;
	c->mcs = m;
	struct sr_cm_event *e =
		sr_cm_event_new(c, status ? RDMA_CM_EVENT_MULTICAST_ERROR : RDMA_CM_EVENT_MULTICAST_JOIN, status);
	if (e) {
		struct rdma_ud_param *u = &e->ev.param.ud;
		u->private_data = context;
		if (!status) {
			sr_cm_fill_ah(c, &u->ah_attr, &m->mgid);
			u->ah_attr.grh.hop_limit = 1;
			u->qp_num = 0xffffff;
			u->qkey = SR_CMA_QKEY;
		}
		sr_cm_event_post(c, e);
	}
	pthread_mutex_unlock(&sr_cm.lock);
	return 0;
}

SR_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	return join(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

SR_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *mc_join_attr, void *context)
{
	if (!mc_join_attr || !(mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) ||
	    (mc_join_attr->comp_mask & ~(RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS)))
		return fail(EINVAL);
	uint16_t flags = RDMA_MC_JOIN_FLAG_FULLMEMBER;
	if (mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) {
		if (mc_join_attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
			return fail(EINVAL);
		flags = (uint16_t)mc_join_attr->join_flags;
	}
	if (flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER && id && id->qp && id->qp->qp_type != IBV_QPT_UD)
		return fail(EINVAL);
	return join(id, mc_join_attr->addr, flags, context);
}

SR_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct sr_cm_id *c = cm_id(id);
	struct sr_cm_mc *found = NULL;
	union ibv_gid mgid;

	if (!id || !addr || !sr_cm_addr_len(addr))
		return fail(EINVAL);
	mgid_from(addr, &mgid);
	pthread_mutex_lock(&sr_cm.lock);
	for (struct sr_cm_mc **pp = &c->mcs; *pp; pp = &(*pp)->next)
		if (!memcmp((*pp)->mgid.raw, mgid.raw, 16)) {
			found = *pp;
			*pp = found->next;
			break;
		}
	pthread_mutex_unlock(&sr_cm.lock);
	if (!found)
		return fail(EADDRNOTAVAIL);
	if (found->attached && id->qp)
		ibv_detach_mcast(id->qp, &found->mgid, 0);
	free(found);
	return 0;
}
