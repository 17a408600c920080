/* rsockets: descriptors, connection setup and teardown, socket options,
 * names and keepalive.  See rsocket.h for the protocol and the layout.
 *
 * An rsocket's number is an epoll descriptor of its own, watching its
 * rdma_cm event channel, its completion channel and a wake-up eventfd:
 * a real descriptor, so it never collides with the application's, and
 * one that rpoll (and a blocked call) can sleep on to learn of anything
 * that concerns the socket.
 *
 * There are no service threads (but the keepalive one, only when asked
 * for): connection events are handled by whichever call on the socket
 * comes next, rpoll included.  A listener accepts a connection request
 * (creating the QP and answering with its buffers) when raccept or rpoll
 * looks at it; the accepted socket completes its handshake (RTU) on its
 * first use. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <infiniband/verbs.h>

#include "abi/export.h"
#include "common/thread.h"
#include "rsocket/rsocket.h"

#define RS_CONN_RETRIES 6 /* address/route resolution timeouts retried */
#define RS_SHUTDOWN_WAIT_MS 10000

uint64_t rs_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- the descriptor table -------------------------------------------------- */

static pthread_rwlock_t rs_tab_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct rsocket **rs_tab; /* indexed by descriptor */
static int rs_tab_len;

struct rsocket *rs_lookup(int fd)
{
	struct rsocket *rs = NULL;

	if (fd < 0)
		return NULL;
	pthread_rwlock_rdlock(&rs_tab_lock);
	if (fd < rs_tab_len)
		rs = rs_tab[fd];
	pthread_rwlock_unlock(&rs_tab_lock);
	return rs;
}

/* A datagram rsocket, counted as in use (rs->users) until ds_leave or
 * ds_unref: rclose waits for it.  NULL for any other descriptor. */
struct rsocket *rs_lookup_dgram(int fd)
{
	struct rsocket *rs = NULL;

	if (fd < 0)
		return NULL;
	pthread_rwlock_rdlock(&rs_tab_lock);
	if (fd < rs_tab_len && rs_tab[fd] && rs_tab[fd]->type == SOCK_DGRAM) {
		rs = rs_tab[fd];
		__atomic_fetch_add(&rs->users, 1, __ATOMIC_ACQ_REL);
	}
	pthread_rwlock_unlock(&rs_tab_lock);
	return rs;
}

static int rs_tab_insert(struct rsocket *rs)
{
	int fd = rs->index;

	pthread_rwlock_wrlock(&rs_tab_lock);
	if (fd >= rs_tab_len) {
		int n = rs_tab_len ? rs_tab_len : 64;
		while (n <= fd)
			n *= 2;
		struct rsocket **t = realloc(rs_tab, sizeof(*t) * (size_t)n);
		if (!t) {
			pthread_rwlock_unlock(&rs_tab_lock);
			return rs_fail(ENOMEM);
		}
		memset(t + rs_tab_len, 0, sizeof(*t) * (size_t)(n - rs_tab_len));
		rs_tab = t;
		rs_tab_len = n;
	}
	rs_tab[fd] = rs;
	pthread_rwlock_unlock(&rs_tab_lock);
	return 0;
}

/* Gives an accepted rsocket a descriptor made now, as rdma-core's
 * raccept does (its new socket's channel is created inside the call).
 * Ours was made when the connection request came, before the caller's
 * own descriptors of the moment, and librspreload depends on the order:
 * it hands the application a placeholder descriptor opened just before
 * raccept, and its select() finds the placeholder of an rsocket as the
 * lowest descriptor that maps to it, where any descriptor it does not
 * know maps to itself.  An rsocket numbered below its placeholder was
 * reported under its own number: iperf3's server never saw its data
 * stream readable.  On failure the old number stays (raccept works
 * either way). */
static void rs_renumber(struct rsocket *rs)
{
	int old = rs->index;
	int nfd = fcntl(old, (rs->fd_flags & FD_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD, 0);

	if (nfd < 0)
		return;
	rs->index = nfd;
	if (rs_tab_insert(rs)) {
		rs->index = old;
		close(nfd);
		return;
	}
	pthread_rwlock_wrlock(&rs_tab_lock);
	if (rs_tab[old] == rs)
		rs_tab[old] = NULL;
	pthread_rwlock_unlock(&rs_tab_lock);
	close(old);
}

/* true if this call took rs out of the table (of two rcloses, one does) */
static bool rs_tab_remove(struct rsocket *rs)
{
	bool took = false;

	pthread_rwlock_wrlock(&rs_tab_lock);
	if (rs->index >= 0 && rs->index < rs_tab_len && rs_tab[rs->index] == rs) {
		rs_tab[rs->index] = NULL;
		took = true;
	}
	pthread_rwlock_unlock(&rs_tab_lock);
	return took;
}

/* ---- keepalive --------------------------------------------------------------- */

/* One thread, started with the first SO_KEEPALIVE socket, sends each a
 * zero-length RDMA write every keepalive_time seconds.  Lock order:
 * rs_ka_lock, then an rsocket's lock. */
static pthread_mutex_t rs_ka_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rs_ka_cond = PTHREAD_COND_INITIALIZER;
static struct rsocket *rs_ka_list;
static bool rs_ka_running;

static void *rs_ka_thread(void *arg)
{
	pthread_mutex_lock(&rs_ka_lock);
	while (rs_ka_list) {
		uint64_t now = rs_now_us(), next = now + 3600ull * 1000000u;

		for (struct rsocket *rs = rs_ka_list; rs; rs = rs->ka_next) {
			pthread_mutex_lock(&rs->lock);
			if (rs->ka_deadline <= now) {
				if (rs->state == RS_CONNECTED && rs_ctrl_avail(rs))
					rs_post_keepalive(rs);
				rs->ka_deadline = now + (uint64_t)rs->keepalive_time * 1000000u;
			}
			if (rs->ka_deadline < next)
				next = rs->ka_deadline;
			pthread_mutex_unlock(&rs->lock);
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t wait = next - now;
		ts.tv_sec += (time_t)(wait / 1000000u);
		ts.tv_nsec += (long)(wait % 1000000u) * 1000;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&rs_ka_cond, &rs_ka_lock, &ts);
	}
	rs_ka_running = false;
	pthread_mutex_unlock(&rs_ka_lock);
	return NULL;
}

static int rs_ka_add(struct rsocket *rs)
{
	int err = 0;

	pthread_mutex_lock(&rs_ka_lock);
	for (struct rsocket *o = rs_ka_list; o; o = o->ka_next)
		if (o == rs)
			goto out;
	pthread_mutex_lock(&rs->lock);
	rs->ka_deadline = rs_now_us() + (uint64_t)rs->keepalive_time * 1000000u;
	pthread_mutex_unlock(&rs->lock);
	rs->ka_next = rs_ka_list;
	rs_ka_list = rs;
	if (!rs_ka_running) {
		err = sr_thread_start(NULL, "sr-rs-keepalive", true, rs_ka_thread, NULL);
		if (err) {
			rs_ka_list = rs->ka_next;
			goto out;
		}
		rs_ka_running = true;
	}
	pthread_cond_signal(&rs_ka_cond);
out:
	pthread_mutex_unlock(&rs_ka_lock);
	return err ? rs_fail(err) : 0;
}

/* TCP_KEEPIDLE changed: the next keepalive is that far from now */
static void rs_ka_reschedule(struct rsocket *rs)
{
	pthread_mutex_lock(&rs_ka_lock);
	for (struct rsocket *o = rs_ka_list; o; o = o->ka_next) {
		if (o == rs) {
			pthread_mutex_lock(&rs->lock);
			rs->ka_deadline = rs_now_us() + (uint64_t)rs->keepalive_time * 1000000u;
			pthread_mutex_unlock(&rs->lock);
			pthread_cond_signal(&rs_ka_cond);
			break;
		}
	}
	pthread_mutex_unlock(&rs_ka_lock);
}

static void rs_ka_remove(struct rsocket *rs)
{
	pthread_mutex_lock(&rs_ka_lock);
	for (struct rsocket **pp = &rs_ka_list; *pp; pp = &(*pp)->ka_next) {
		if (*pp == rs) {
			*pp = rs->ka_next;
			break;
		}
	}
	pthread_cond_signal(&rs_ka_cond);
	pthread_mutex_unlock(&rs_ka_lock);
}

/* ---- allocation and teardown ---------------------------------------------------- */

static unsigned rs_default_keepalive_time(void)
{
	unsigned t = 7200;
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_keepalive_time", "r");

	if (f) {
		if (fscanf(f, "%u", &t) != 1 || !t)
			t = 7200;
		fclose(f);
	}
	return t;
}

/* A new rsocket with its epoll descriptor; options from parent (a
 * listener) if given, else rdma-core's defaults. */
static struct rsocket *rs_alloc(int domain, const struct rsocket *parent)
{
	struct rsocket *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	rs->index = -1;
	rs->kick_fd = -1;
	rs->domain = domain;
	rs->type = SOCK_STREAM;
	pthread_mutex_init(&rs->lock, NULL);
	pthread_cond_init(&rs->cond, NULL);
	if (parent) {
		rs->sbuf_size = parent->sbuf_size;
		rs->rbuf_size = parent->rbuf_size;
		rs->sq_size = parent->sq_size;
		rs->rq_size = parent->rq_size;
		rs->sq_inline = parent->sq_inline;
		rs->target_iomap_size = parent->target_iomap_size;
		rs->so_opts = parent->so_opts & ~(1ull << SO_KEEPALIVE);
		rs->tcp_opts = parent->tcp_opts;
		rs->ipv6_opts = parent->ipv6_opts;
		rs->ip_tos = parent->ip_tos;
		rs->keepalive_time = parent->keepalive_time;
		rs->fs_flags = parent->fs_flags;
		rs->fd_flags = parent->fd_flags;
	} else {
		const struct rs_config *c = rs_config();
		rs->sbuf_size = c->wmem_default;
		rs->rbuf_size = c->mem_default;
		rs->sq_size = c->sqsize_default;
		rs->rq_size = c->rqsize_default;
		rs->sq_inline = c->inline_default;
		rs->target_iomap_size = c->iomap_size;
		rs->keepalive_time = rs_default_keepalive_time();
	}
	rs->index = epoll_create1((rs->fd_flags & FD_CLOEXEC) ? EPOLL_CLOEXEC : 0);
	if (rs->index < 0)
		goto err;
	/* a semaphore: each sleeper woken by a kick takes one (rs_kick) */
	rs->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC | EFD_SEMAPHORE);
	if (rs->kick_fd < 0 || rs_epoll_add(rs, rs->kick_fd))
		goto err;
	return rs;
err : {
	int e = errno;
	if (rs->kick_fd >= 0)
		close(rs->kick_fd);
	if (rs->index >= 0)
		close(rs->index);
	pthread_mutex_destroy(&rs->lock);
	pthread_cond_destroy(&rs->cond);
	free(rs);
	errno = e;
	return NULL;
}
}

/* A CM event channel of our own, non-blocking, watched by the epoll set. */
static int rs_open_cm_channel(struct rsocket *rs)
{
	int fl;

	rs->cm_ch = rdma_create_event_channel();
	if (!rs->cm_ch)
		return -1;
	fl = fcntl(rs->cm_ch->fd, F_GETFL);
	if (fl < 0 || fcntl(rs->cm_ch->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	return rs_epoll_add(rs, rs->cm_ch->fd);
}

/* Releases everything; the socket is out of the table already. */
static void rs_free(struct rsocket *rs)
{
	rs_free_ep(rs);
	if (rs->cm_id)
		rdma_destroy_id(rs->cm_id);
	if (rs->cm_ch)
		rdma_destroy_event_channel(rs->cm_ch);
	if (rs->kick_fd >= 0)
		close(rs->kick_fd);
	if (rs->index >= 0)
		close(rs->index);
	pthread_mutex_destroy(&rs->lock);
	pthread_cond_destroy(&rs->cond);
	free(rs);
}

/* ---- connection events -------------------------------------------------------------- */

static void rs_connect_failed(struct rsocket *rs, int err)
{
	rs->state = RS_CONNECT_ERROR;
	rs->err = err ? err : ECONNREFUSED;
}

static int rs_event_errno(const struct rdma_cm_event *ev)
{
	if (ev->event == RDMA_CM_EVENT_REJECTED)
		return ECONNREFUSED;
	if (ev->status < 0)
		return -ev->status;
	if (ev->status > 0)
		return ev->status;
	return ev->event == RDMA_CM_EVENT_UNREACHABLE ? ETIMEDOUT : ECONNREFUSED;
}

static void rs_resolve_addr(struct rsocket *rs)
{
	int to = 2000 << (rs->retries < 4 ? rs->retries : 4);

	if (rdma_resolve_addr(rs->cm_id, NULL, (struct sockaddr *)&rs->dst, to))
		rs_connect_failed(rs, errno);
	else
		rs->state = RS_RESOLVING_ADDR;
}

static void rs_resolve_route(struct rsocket *rs)
{
	int to = 2000 << (rs->retries < 4 ? rs->retries : 4);

	if (rdma_resolve_route(rs->cm_id, to))
		rs_connect_failed(rs, errno);
	else
		rs->state = RS_RESOLVING_ROUTE;
}

static void rs_do_connect(struct rsocket *rs)
{
	struct rdma_conn_param p;
	struct rs_conn_data cd;

	if (rs_create_ep(rs)) {
		rs_connect_failed(rs, errno);
		return;
	}
	rs_format_conn_data(rs, &cd);
	memset(&p, 0, sizeof(p));
	p.private_data = &cd;
	p.private_data_len = sizeof(cd);
	p.flow_control = 1;
	p.retry_count = 7;
	p.rnr_retry_count = 7; /* credits bound data, control messages may meet an empty RQ: retry forever */
	if (rs->msg_send)
		p.initiator_depth = 1; /* as rdma-core: iWARP's MPA may issue an RDMA read */
	rs->retries = 0;
	if (rdma_connect(rs->cm_id, &p))
		rs_connect_failed(rs, errno);
	else
		rs->state = RS_CONNECTING;
}

/* The peer disconnected at the rdma_cm level: whatever it wrote before
 * is in the CQ already (its data was acknowledged before its DREQ). */
static void rs_cm_disconnected(struct rsocket *rs)
{
	if (rs->cq)
		rs_drain_cq(rs);
	if (rs->state == RS_CONNECTED || rs->state == RS_ACCEPTING) {
		rs->state = RS_DISCONNECTED;
		rs->readable = false;
		rs->writable = false;
	}
}

static void rs_handle_cm_event(struct rsocket *rs, struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rs->state == RS_RESOLVING_ADDR) {
			rs->retries = 0;
			rs_resolve_route(rs);
		}
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
		if (rs->state == RS_RESOLVING_ADDR) {
			if (ev->status == -ETIMEDOUT && rs->retries++ < RS_CONN_RETRIES)
				rs_resolve_addr(rs);
			else
				rs_connect_failed(rs, rs_event_errno(ev));
		}
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (rs->state == RS_RESOLVING_ROUTE)
			rs_do_connect(rs);
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		if (rs->state == RS_RESOLVING_ROUTE) {
			if (ev->status == -ETIMEDOUT && rs->retries++ < RS_CONN_RETRIES)
				rs_resolve_route(rs);
			else
				rs_connect_failed(rs, rs_event_errno(ev));
		}
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (rs->state == RS_CONNECTING) {
			if (rs_save_conn_data(rs, ev->param.conn.private_data, ev->param.conn.private_data_len)) {
				/* not an rsocket peer: hang up */
				rs_connect_failed(rs, errno);
				rdma_disconnect(rs->cm_id);
				break;
			}
		} else if (rs->state != RS_ACCEPTING) {
			break;
		}
		rs->state = RS_CONNECTED;
		rs->readable = rs->writable = true;
		break;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		if (rs->state == RS_CONNECTING || rs->state == RS_ACCEPTING || rs->state == RS_RESOLVING_ADDR ||
		    rs->state == RS_RESOLVING_ROUTE)
			rs_connect_failed(rs, rs_event_errno(ev));
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		rs_cm_disconnected(rs);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (rs->state != RS_DISCONNECTED) {
			rs->state = rs->state == RS_CONNECTED ? RS_ERROR : RS_CONNECT_ERROR;
			rs->err = ENODEV;
			rs->readable = rs->writable = false;
		}
		break;
	default:
		break; /* TIMEWAIT_EXIT and others: nothing for us */
	}
	rdma_ack_cm_event(ev);
}

/* A connection request on a listener: a new rsocket on its own channel,
 * QP and buffers made, accepted with our conn data; raccept hands it out.
 * The listener's lock is held. */
static void rs_conn_request(struct rsocket *l, struct rdma_cm_event *ev)
{
	struct rdma_cm_id *cid = ev->id;
	struct rdma_conn_param p = ev->param.conn;
	uint8_t pdata[256];
	size_t plen = ev->param.conn.private_data_len;
	struct rs_conn_data cd;
	struct rsocket *c;

	if (plen > sizeof(pdata))
		plen = sizeof(pdata);
	if (plen)
		memcpy(pdata, ev->param.conn.private_data, plen);
	rdma_ack_cm_event(ev);

	c = rs_alloc(l->domain, l);
	if (!c) {
		rdma_reject(cid, NULL, 0);
		rdma_destroy_id(cid);
		return;
	}
	if (rs_open_cm_channel(c) || rdma_migrate_id(cid, c->cm_ch)) {
		rdma_reject(cid, NULL, 0);
		rdma_destroy_id(cid);
		rs_free(c);
		return;
	}
	c->cm_id = cid;
	cid->context = c;
	/* pdata[0] is the version: an rdma_cm peer that is not an rsocket
	 * is refused before any resources are made for it */
	if (plen < sizeof(cd) || pdata[0] != RS_PROTO_VERSION || rs_create_ep(c) || rs_save_conn_data(c, pdata, plen))
		goto reject;
	rs_format_conn_data(c, &cd);
	p.private_data = &cd;
	p.private_data_len = sizeof(cd);
	if (rdma_accept(cid, &p))
		goto reject;
	c->state = RS_ACCEPTING;
	c->readable = c->writable = true;
	if (rs_tab_insert(c))
		goto reject;
	if (l->acc_tail)
		l->acc_tail->acc_next = c;
	else
		l->acc_head = c;
	l->acc_tail = c;
	return;
reject:
	rdma_reject(cid, NULL, 0);
	rs_free(c);
}

/* Reads the socket's CM events.  A connected socket learns of a broken
 * connection in-band mostly, so while spinning it looks at the channel
 * once a millisecond only (each look is a system call). */
void rs_cm_progress(struct rsocket *rs, bool force)
{
	struct rdma_cm_event *ev;

	if (!rs->cm_ch)
		return;
	if (!force && (rs->state == RS_CONNECTED || rs->state == RS_DISCONNECTED || rs->state == RS_ERROR)) {
		uint64_t now = rs_now_us();
		if (now - rs->last_cm_check < 1000)
			return;
		rs->last_cm_check = now;
	}
	while (!rdma_get_cm_event(rs->cm_ch, &ev)) {
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			if (rs->state == RS_LISTENING) {
				rs_conn_request(rs, ev);
			} else {
				struct rdma_cm_id *cid = ev->id;
				rdma_ack_cm_event(ev);
				rdma_reject(cid, NULL, 0);
				rdma_destroy_id(cid);
			}
			continue;
		}
		rs_handle_cm_event(rs, ev);
	}
}

/* ---- creating, binding, listening, accepting, connecting ----------------------------- */

static bool rs_addr_ok(const struct sockaddr *addr, socklen_t len)
{
	if (!addr)
		return false;
	if (addr->sa_family == AF_INET)
		return len >= sizeof(struct sockaddr_in);
	if (addr->sa_family == AF_INET6)
		return len >= sizeof(struct sockaddr_in6);
	return false;
}

/* rdma-core's librspreload (softrdma-run --rsocket) asks for an rsocket
 * for every socket() of the program, UDP ones too, and takes a kernel
 * socket only if that fails.  A datagram rsocket talks only to another
 * datagram rsocket (the first datagrams carry rdma-core's UDP header):
 * the program's DNS queries, and any UDP exchange with an ordinary peer,
 * would break.  So a datagram rsocket asked for by librspreload is refused
 * (ENOTSUP: it falls back to the kernel's UDP, as before datagram
 * rsockets existed) unless SOFTRDMA_RSOCKET_DGRAM=1 in the environment
 * says both ends are preloaded.  A program that calls
 * rsocket() itself (udpong) is never refused. */
static bool rs_preload_refuses_dgram(const void *caller)
{
	const char *e = getenv("SOFTRDMA_RSOCKET_DGRAM");
	Dl_info info;

	if (e && !strcmp(e, "1"))
		return false;
	return dladdr(caller, &info) && info.dli_fname && strstr(info.dli_fname, "librspreload");
}

SR_EXPORT int rsocket(int domain, int type, int protocol)
{
	int st = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct rsocket *rs;

	if (domain != AF_INET && domain != AF_INET6)
		return rs_fail(EAFNOSUPPORT);
	if (!(st == SOCK_STREAM && (!protocol || protocol == IPPROTO_TCP)) &&
	    !(st == SOCK_DGRAM && (!protocol || protocol == IPPROTO_UDP)))
		return rs_fail(EPROTONOSUPPORT);
	if (st == SOCK_DGRAM && rs_preload_refuses_dgram(__builtin_return_address(0)))
		return rs_fail(ENOTSUP);

	rs = rs_alloc(domain, NULL);
	if (!rs)
		return -1;
	if (type & SOCK_NONBLOCK)
		rs->fs_flags |= O_NONBLOCK;
	if (type & SOCK_CLOEXEC) {
		rs->fd_flags |= FD_CLOEXEC;
		fcntl(rs->index, F_SETFD, FD_CLOEXEC);
	}
	if (st == SOCK_DGRAM) {
		rs->type = SOCK_DGRAM;
		if (ds_create(rs) || rs_tab_insert(rs)) {
			int e = errno;
			ds_close(rs);
			rs_free(rs);
			return rs_fail(e);
		}
		return rs->index;
	}
	if (rs_open_cm_channel(rs) || rdma_create_id(rs->cm_ch, &rs->cm_id, rs, RDMA_PS_TCP) || rs_tab_insert(rs)) {
		int e = errno;
		rs_free(rs);
		return rs_fail(e);
	}
	rs->state = RS_INIT;
	return rs->index;
}

#define RS_ENTER(fd)                        \
	struct rsocket *rs = rs_lookup(fd); \
	if (!rs)                            \
		return rs_fail(EBADF);      \
	pthread_mutex_lock(&rs->lock)

#define RS_RETURN(v)                             \
	do {                                     \
		int rs_ret_ = (v);               \
		pthread_mutex_unlock(&rs->lock); \
		return rs_ret_;                  \
	} while (0)

/* a datagram rsocket's call goes to rs_dgram.c */
#define DS_DISPATCH(fd, call)                            \
	do {                                             \
		struct rsocket *ds_ = ds_enter(fd);      \
		if (ds_)                                 \
			return (int)ds_leave(ds_, call); \
	} while (0)

SR_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	DS_DISPATCH(socket, ds_bind(ds_, addr, addrlen));
	RS_ENTER(socket);
	if (!rs_addr_ok(addr, addrlen))
		RS_RETURN(rs_fail(addr && addr->sa_family != AF_INET && addr->sa_family != AF_INET6 ? EAFNOSUPPORT :
												      EINVAL));
	if (rs->state != RS_INIT)
		RS_RETURN(rs_fail(EINVAL));
	if (rdma_bind_addr(rs->cm_id, (struct sockaddr *)addr))
		RS_RETURN(-1);
	rs->state = RS_BOUND;
	RS_RETURN(0);
}

SR_EXPORT int rlisten(int socket, int backlog)
{
	DS_DISPATCH(socket, rs_fail(EOPNOTSUPP)); /* as listen(2) on UDP */
	RS_ENTER(socket);
	if (rs->state == RS_LISTENING)
		RS_RETURN(0);
	if (rs->state != RS_INIT && rs->state != RS_BOUND)
		RS_RETURN(rs_fail(EINVAL));
	if (rdma_listen(rs->cm_id, backlog))
		RS_RETURN(-1);
	rs->state = RS_LISTENING;
	RS_RETURN(0);
}

static bool rs_acceptable(struct rsocket *rs)
{
	return rs->acc_head != NULL || rs->state != RS_LISTENING;
}

static int rs_copy_addr(struct sockaddr *dst, socklen_t *len, const struct sockaddr *src, int domain)
{
	struct sockaddr_storage ss;
	socklen_t size;

	/* as getsockname(2): a length of 0 copies nothing and needs no
	 * buffer, only says how long the address is (rdma-core's
	 * librspreload asks so when it falls back to a TCP socket) */
	if (!len || (!dst && *len))
		return rs_fail(EFAULT);
	memset(&ss, 0, sizeof(ss));
	if (src && (src->sa_family == AF_INET || src->sa_family == AF_INET6))
		memcpy(&ss, src, src->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	else
		ss.ss_family = (sa_family_t)domain;
	size = ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	if (*len)
		memcpy(dst, &ss, *len < size ? *len : size);
	*len = size;
	return 0;
}

SR_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsocket *c;

	DS_DISPATCH(socket, rs_fail(EOPNOTSUPP));
	RS_ENTER(socket);
	if (rs->state != RS_LISTENING)
		RS_RETURN(rs_fail(EINVAL));
	if (rs_wait(rs, rs_nonblocking(rs, 0), rs_acceptable, -1))
		RS_RETURN(-1);
	c = rs->acc_head;
	if (!c)
		RS_RETURN(rs_fail(EINVAL)); /* closed under us */
	rs->acc_head = c->acc_next;
	if (!rs->acc_head)
		rs->acc_tail = NULL;
	c->acc_next = NULL;
	pthread_mutex_unlock(&rs->lock);
	pthread_mutex_lock(&c->lock);
	rs_renumber(c);
	if (addr && addrlen)
		rs_copy_addr(addr, addrlen, rdma_get_peer_addr(c->cm_id), c->domain);
	int fd = c->index;
	pthread_mutex_unlock(&c->lock);
	return fd;
}

static bool rs_connect_done(struct rsocket *rs)
{
	return rs->state != RS_RESOLVING_ADDR && rs->state != RS_RESOLVING_ROUTE && rs->state != RS_CONNECTING;
}

SR_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	bool nonblock;

	DS_DISPATCH(socket, ds_connect(ds_, addr, addrlen));
	RS_ENTER(socket);
	nonblock = rs_nonblocking(rs, 0);
	switch (rs->state) {
	case RS_INIT:
	case RS_BOUND:
		break;
	case RS_RESOLVING_ADDR:
	case RS_RESOLVING_ROUTE:
	case RS_CONNECTING:
		RS_RETURN(rs_fail(EALREADY));
	case RS_CONNECTED:
	case RS_ACCEPTING:
		RS_RETURN(rs_fail(EISCONN));
	case RS_LISTENING:
		RS_RETURN(rs_fail(EINVAL));
	default:
		RS_RETURN(rs_fail(ENOTCONN)); /* as rdma-core: a failed rsocket stays failed */
	}
	if (!rs_addr_ok(addr, addrlen))
		RS_RETURN(rs_fail(addr && addr->sa_family != AF_INET && addr->sa_family != AF_INET6 ? EAFNOSUPPORT :
												      EINVAL));
	memset(&rs->dst, 0, sizeof(rs->dst));
	memcpy(&rs->dst, addr, addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	rs->retries = 0;
	rs->err = 0;
	rs_resolve_addr(rs);
	if (rs_wait(rs, nonblock, rs_connect_done, -1)) {
		if (errno == EAGAIN)
			errno = EINPROGRESS;
		RS_RETURN(-1);
	}
	if (rs->state != RS_CONNECTED) {
		int e = rs->err ? rs->err : ECONNREFUSED;
		rs->err = 0; /* reported here, not again by SO_ERROR */
		RS_RETURN(rs_fail(e));
	}
	RS_RETURN(0);
}

/* ---- shutdown and close ------------------------------------------------------------ */

static bool rs_ctrl_ready(struct rsocket *rs)
{
	return rs_ctrl_avail(rs) || rs->state != RS_CONNECTED;
}

static bool rs_settled(struct rsocket *rs)
{
	return rs->state != RS_ACCEPTING;
}

/* rdma-core's rshutdown: tell the peer (SHUTDOWN when we stop sending but
 * still read, DISCONNECT when both directions are done), then wait until
 * everything we posted has completed, so nothing is lost at close. */
static int rs_shutdown(struct rsocket *rs, int how)
{
	int ctrl, ret = 0;

	if (rs->state == RS_ACCEPTING)
		rs_wait(rs, false, rs_settled, RS_SHUTDOWN_WAIT_MS);
	if (rs->state != RS_CONNECTED)
		return rs->state == RS_DISCONNECTED || rs->state == RS_ERROR ? 0 : rs_fail(ENOTCONN);

	if (how == SHUT_RDWR) {
		if (!rs->readable && !rs->writable)
			goto wait;
		ctrl = RS_CTRL_DISCONNECT;
		rs->readable = rs->writable = false;
		rs->local_wr_shut = true;
	} else if (how == SHUT_WR) {
		if (!rs->writable)
			goto wait;
		rs->writable = false;
		rs->local_wr_shut = true;
		ctrl = rs->readable ? RS_CTRL_SHUTDOWN : RS_CTRL_DISCONNECT;
	} else {
		if (!rs->readable)
			goto wait;
		rs->readable = false;
		if (rs->writable)
			goto wait;
		ctrl = RS_CTRL_DISCONNECT;
	}
	if (!rs_ctrl_avail(rs) && rs_wait(rs, false, rs_ctrl_ready, RS_SHUTDOWN_WAIT_MS))
		ret = -1;
	if (rs->state == RS_CONNECTED && rs_ctrl_avail(rs) && rs_post_ctrl(rs, (enum rs_ctrl)ctrl)) {
		rs->state = RS_ERROR;
		rs->err = errno;
		ret = -1;
	}
wait:
	if (rs->state == RS_CONNECTED)
		rs_wait(rs, false, rs_all_sends_done, RS_SHUTDOWN_WAIT_MS);
	return ret;
}

SR_EXPORT int rshutdown(int socket, int how)
{
	DS_DISPATCH(socket,
		    how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR ? rs_fail(EINVAL) : ds_shutdown(ds_, how));
	RS_ENTER(socket);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		RS_RETURN(rs_fail(EINVAL));
	RS_RETURN(rs_shutdown(rs, how));
}

static void rs_close(struct rsocket *rs)
{
	rs_tab_remove(rs);
	rs_ka_remove(rs);
	pthread_mutex_lock(&rs->lock);
	/* accepted connections nobody took */
	while (rs->acc_head) {
		struct rsocket *c = rs->acc_head;
		rs->acc_head = c->acc_next;
		rs_close(c);
	}
	rs->acc_tail = NULL;
	/* a connection whose RTU has not come is refused by destroying its
	 * id; one that is up says goodbye in-band first */
	if (rs->state == RS_ACCEPTING)
		rs_progress(rs, true);
	if (rs->state == RS_CONNECTED) {
		int e = errno;
		rs_shutdown(rs, SHUT_RDWR);
		errno = e;
	}
	pthread_mutex_unlock(&rs->lock);
	/* the QP goes first; destroying the id then sends the DREQ (or the
	 * DREP to the peer's) */
	rs_free(rs);
}

SR_EXPORT int rclose(int socket)
{
	struct rsocket *rs = rs_lookup_dgram(socket);

	if (rs) {
		bool took = rs_tab_remove(rs);

		__atomic_fetch_sub(&rs->users, 1, __ATOMIC_ACQ_REL); /* our own lookup */
		if (!took)
			return rs_fail(EBADF); /* another rclose has it */
		ds_close(rs);
		rs_free(rs);
		return 0;
	}
	rs = rs_lookup(socket);
	if (!rs)
		return rs_fail(EBADF);
	rs_close(rs);
	return 0;
}

/* ---- names ------------------------------------------------------------------------ */

SR_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	DS_DISPATCH(socket, ds_getpeername(ds_, addr, addrlen));
	RS_ENTER(socket);
	switch (rs->state) {
	case RS_CONNECTING:
	case RS_ACCEPTING:
	case RS_CONNECTED:
	case RS_DISCONNECTED:
	case RS_ERROR:
		RS_RETURN(rs_copy_addr(addr, addrlen, rdma_get_peer_addr(rs->cm_id), rs->domain));
	default:
		RS_RETURN(rs_fail(ENOTCONN));
	}
}

SR_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	DS_DISPATCH(socket, ds_getsockname(ds_, addr, addrlen));
	RS_ENTER(socket);
	RS_RETURN(rs_copy_addr(addr, addrlen, rdma_get_local_addr(rs->cm_id), rs->domain));
}

/* ---- options ---------------------------------------------------------------------- */

static int rs_opt_int(const void *optval, socklen_t optlen, int *v)
{
	if (!optval)
		return rs_fail(EFAULT);
	if (optlen < sizeof(int))
		return rs_fail(EINVAL);
	memcpy(v, optval, sizeof(int));
	return 0;
}

static void rs_opt_bit(uint64_t *opts, int optname, int on)
{
	if (optname < 0 || optname >= 64)
		return;
	if (on)
		*opts |= 1ull << optname;
	else
		*opts &= ~(1ull << optname);
}

static bool rs_before_connect(const struct rsocket *rs)
{
	return rs->state == RS_INIT || rs->state == RS_BOUND || rs->state == RS_LISTENING;
}

SR_EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
	int v = 0;
	bool ka_change = false, ka_on = false;

	DS_DISPATCH(socket, ds_setsockopt(ds_, level, optname, optval, optlen));
	RS_ENTER(socket);
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
			if (rs_opt_int(optval, optlen, &v))
				RS_RETURN(-1);
			/* rdma-core ignores an rdma_cm that lacks the option */
			if (rdma_set_option(rs->cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof(v)) &&
			    errno != ENOSYS && errno != EOPNOTSUPP && rs->state == RS_INIT)
				RS_RETURN(-1);
			rs_opt_bit(&rs->so_opts, optname, v);
			RS_RETURN(0);
		case SO_RCVBUF:
			if (rs_opt_int(optval, optlen, &v))
				RS_RETURN(-1);
			/* as setsockopt(2), the kernel doubles the value */
			if (!rs->rbuf)
				rs->rbuf_size = rs_sockbuf_size(v);
			RS_RETURN(0);
		case SO_SNDBUF:
			if (rs_opt_int(optval, optlen, &v))
				RS_RETURN(-1);
			if (!rs->sbuf)
				rs->sbuf_size = rs_sockbuf_size(v);
			RS_RETURN(0);
		case SO_LINGER: {
			struct linger lg;
			if (!optval)
				RS_RETURN(rs_fail(EFAULT));
			if (optlen < sizeof(lg))
				RS_RETURN(rs_fail(EINVAL));
			memcpy(&lg, optval, sizeof(lg));
			rs_opt_bit(&rs->so_opts, optname, lg.l_onoff);
			RS_RETURN(0);
		}
		case SO_KEEPALIVE:
			if (rs_opt_int(optval, optlen, &v))
				RS_RETURN(-1);
			rs_opt_bit(&rs->so_opts, optname, v);
			ka_change = true;
			ka_on = v != 0;
			break;
		case SO_OOBINLINE:
			if (rs_opt_int(optval, optlen, &v))
				RS_RETURN(-1);
			rs_opt_bit(&rs->so_opts, optname, v);
			RS_RETURN(0);
		default:
			RS_RETURN(rs_fail(ENOTSUP));
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY:
			if (rs_opt_int(optval, optlen, &v))
				RS_RETURN(-1);
			rs_opt_bit(&rs->tcp_opts, optname, v);
			RS_RETURN(0);
		case TCP_KEEPIDLE:
			if (rs_opt_int(optval, optlen, &v))
				RS_RETURN(-1);
			if (v <= 0)
				RS_RETURN(rs_fail(EINVAL));
			rs->keepalive_time = (unsigned)v;
			pthread_mutex_unlock(&rs->lock);
			rs_ka_reschedule(rs);
			return 0;
		case TCP_KEEPCNT:
		case TCP_KEEPINTVL:
		case TCP_MAXSEG:
		case TCP_CONGESTION:
			RS_RETURN(0); /* meaningless on a reliable connection: accepted, as rdma-core */
		default:
			RS_RETURN(rs_fail(ENOTSUP));
		}
	case IPPROTO_IP:
		if (optname != IP_TOS)
			RS_RETURN(rs_fail(ENOTSUP));
		if (rs_opt_int(optval, optlen, &v))
			RS_RETURN(-1);
		{
			uint8_t tos = (uint8_t)v;
			if (rdma_set_option(rs->cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos)))
				RS_RETURN(-1);
		}
		rs->ip_tos = v;
		RS_RETURN(0);
	case IPPROTO_IPV6:
		if (optname != IPV6_V6ONLY)
			RS_RETURN(rs_fail(ENOTSUP));
		if (rs_opt_int(optval, optlen, &v))
			RS_RETURN(-1);
		if (rdma_set_option(rs->cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof(v)))
			RS_RETURN(-1);
		rs_opt_bit(&rs->ipv6_opts, optname, v);
		RS_RETURN(0);
	case SOL_RDMA:
		/* sizes of resources made at connect/accept time */
		if (!rs_before_connect(rs))
			RS_RETURN(rs_fail(EINVAL));
		if (optname == RDMA_ROUTE) {
			/* a path record for IB; RoCE resolves its own route */
			if (!optval)
				RS_RETURN(rs_fail(EFAULT));
			RS_RETURN(0);
		}
		if (rs_opt_int(optval, optlen, &v))
			RS_RETURN(-1);
		switch (optname) {
		case RDMA_SQSIZE:
			rs->sq_size = (uint16_t)((unsigned)v > RS_QP_MAX_SIZE ? RS_QP_MAX_SIZE : (unsigned)v);
			RS_RETURN(0);
		case RDMA_RQSIZE:
			rs->rq_size = (uint16_t)((unsigned)v > RS_QP_MAX_SIZE ? RS_QP_MAX_SIZE : (unsigned)v);
			RS_RETURN(0);
		case RDMA_INLINE:
			rs->sq_inline = (uint16_t)((unsigned)v > RS_QP_MAX_SIZE ? RS_QP_MAX_SIZE : (unsigned)v);
			RS_RETURN(0);
		case RDMA_IOMAPSIZE:
			rs->target_iomap_size = rs_round_iomap_size(v);
			RS_RETURN(0);
		default:
			RS_RETURN(rs_fail(ENOTSUP));
		}
	default:
		RS_RETURN(rs_fail(ENOTSUP));
	}
	pthread_mutex_unlock(&rs->lock);
	/* the keepalive registry is taken without the socket's lock */
	if (ka_change) {
		if (ka_on)
			return rs_ka_add(rs);
		rs_ka_remove(rs);
	}
	return 0;
}

/* SO_SNDBUF/SO_RCVBUF's value as a buffer size: doubled, as setsockopt(2)
 * does, within 2 * RS_SNDLOWAT and 1 GiB (stream and datagram sockets) */
uint32_t rs_sockbuf_size(int v)
{
	uint64_t b = (uint64_t)(v > 0 ? v : 0) << 1;

	return (uint32_t)(b < 2 * RS_SNDLOWAT ? 2 * RS_SNDLOWAT : b > (1u << 30) ? (1u << 30) : b);
}

/* an int option's answer, as getsockopt(2) (stream and datagram sockets) */
int rs_put_int(void *optval, socklen_t *optlen, int v)
{
	if (!optval || !optlen)
		return rs_fail(EFAULT);
	if (*optlen < sizeof(int))
		return rs_fail(EINVAL);
	memcpy(optval, &v, sizeof(v));
	*optlen = sizeof(int);
	return 0;
}

/* TCP_INFO, as rdma-core answers it (state, and the send queue for the
 * window).  Programs ask for it from signal handlers: iperf3 reports its
 * totals from its SIGINT/SIGTERM handler, which may have interrupted the
 * same thread inside a call that holds the socket's lock, so waiting for
 * the lock could wait for ever.  When the lock is busy the two words are
 * read without it, as rdma-core always reads them: at worst a value a
 * moment old. */
static int rs_tcp_info(struct rsocket *rs, void *optval, socklen_t *optlen)
{
	struct tcp_info ti;
	bool locked;

	if (!optval || !optlen)
		return rs_fail(EFAULT);
	locked = !pthread_mutex_trylock(&rs->lock);
	memset(&ti, 0, sizeof(ti));
	ti.tcpi_state = rs->state == RS_CONNECTED ? 1 /* TCP_ESTABLISHED */ : 7 /* TCP_CLOSE */;
	ti.tcpi_snd_cwnd = rs->sq_size;
	if (locked)
		pthread_mutex_unlock(&rs->lock);
	memcpy(optval, &ti, *optlen < sizeof(ti) ? *optlen : sizeof(ti));
	*optlen = *optlen < sizeof(ti) ? *optlen : sizeof(ti);
	return 0;
}

SR_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	DS_DISPATCH(socket, ds_getsockopt(ds_, level, optname, optval, optlen));
	if (level == IPPROTO_TCP && optname == TCP_INFO) {
		struct rsocket *rs = rs_lookup(socket);

		return rs ? rs_tcp_info(rs, optval, optlen) : rs_fail(EBADF);
	}
	RS_ENTER(socket);
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
		case SO_KEEPALIVE:
		case SO_OOBINLINE:
			RS_RETURN(rs_put_int(optval, optlen, !!(rs->so_opts & (1ull << optname))));
		case SO_RCVBUF:
			RS_RETURN(rs_put_int(optval, optlen, (int)rs->rbuf_size));
		case SO_SNDBUF:
			RS_RETURN(rs_put_int(optval, optlen, (int)rs->sbuf_size));
		case SO_LINGER: {
			struct linger lg = { .l_onoff = !!(rs->so_opts & (1ull << SO_LINGER)), .l_linger = 0 };
			if (!optval || !optlen)
				RS_RETURN(rs_fail(EFAULT));
			if (*optlen < sizeof(lg))
				RS_RETURN(rs_fail(EINVAL));
			memcpy(optval, &lg, sizeof(lg));
			*optlen = sizeof(lg);
			RS_RETURN(0);
		}
		case SO_ERROR: {
			/* a pending connect's outcome is known once its events are read */
			rs_progress(rs, true);
			int e = rs->err;
			if (rs_put_int(optval, optlen, e))
				RS_RETURN(-1);
			rs->err = 0;
			RS_RETURN(0);
		}
		case SO_TYPE:
			RS_RETURN(rs_put_int(optval, optlen, SOCK_STREAM));
		case SO_DOMAIN:
			RS_RETURN(rs_put_int(optval, optlen, rs->domain));
		case SO_PROTOCOL:
			RS_RETURN(rs_put_int(optval, optlen, IPPROTO_TCP));
		case SO_ACCEPTCONN:
			RS_RETURN(rs_put_int(optval, optlen, rs->state == RS_LISTENING));
		default:
			RS_RETURN(rs_fail(ENOTSUP));
		}
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY:
			RS_RETURN(rs_put_int(optval, optlen, !!(rs->tcp_opts & (1ull << TCP_NODELAY))));
		case TCP_KEEPIDLE:
			RS_RETURN(rs_put_int(optval, optlen, (int)rs->keepalive_time));
		case TCP_KEEPCNT:
		case TCP_KEEPINTVL:
			RS_RETURN(rs_put_int(optval, optlen, 1));
		case TCP_MAXSEG: {
			int mss = 2048;
			if (rs->cm_id && rs->cm_id->route.num_paths && rs->cm_id->route.path_rec)
				mss = 1 << (7 + rs->cm_id->route.path_rec->mtu);
			RS_RETURN(rs_put_int(optval, optlen, mss));
		}
		default:
			RS_RETURN(rs_fail(ENOTSUP));
		}
	case IPPROTO_IP:
		if (optname != IP_TOS)
			RS_RETURN(rs_fail(ENOTSUP));
		RS_RETURN(rs_put_int(optval, optlen, rs->ip_tos));
	case IPPROTO_IPV6:
		if (optname != IPV6_V6ONLY)
			RS_RETURN(rs_fail(ENOTSUP));
		RS_RETURN(rs_put_int(optval, optlen, !!(rs->ipv6_opts & (1ull << IPV6_V6ONLY))));
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE:
			RS_RETURN(rs_put_int(optval, optlen, rs->sq_size));
		case RDMA_RQSIZE:
			RS_RETURN(rs_put_int(optval, optlen, rs->rq_size));
		case RDMA_INLINE:
			RS_RETURN(rs_put_int(optval, optlen, rs->sq_inline));
		case RDMA_IOMAPSIZE:
			RS_RETURN(rs_put_int(optval, optlen, rs->target_iomap_size));
		default:
			RS_RETURN(rs_fail(ENOTSUP)); /* RDMA_ROUTE: no IB path records on RoCE */
		}
	default:
		RS_RETURN(rs_fail(ENOTSUP));
	}
}

/* lock held */
static int rs_fcntl(struct rsocket *rs, int cmd, int arg)
{
	switch (cmd) {
	case F_GETFL:
		return rs->fs_flags;
	case F_SETFL:
		/* every internal descriptor is non-blocking already: blocking
		 * calls sleep in poll(), so the flag is all there is to it */
		rs->fs_flags = arg;
		return 0;
	case F_GETFD:
		return rs->fd_flags;
	case F_SETFD:
		rs->fd_flags = arg;
		fcntl(rs->index, F_SETFD, arg & FD_CLOEXEC);
		return 0;
	default:
		return rs_fail(ENOTSUP);
	}
}

SR_EXPORT int rfcntl(int socket, int cmd, ... /* arg */)
{
	va_list ap;
	int arg = 0;

	if (cmd == F_SETFL || cmd == F_SETFD) {
		va_start(ap, cmd);
		arg = va_arg(ap, int);
		va_end(ap);
	}
	DS_DISPATCH(socket, rs_fcntl(ds_, cmd, arg));
	RS_ENTER(socket);
	RS_RETURN(rs_fcntl(rs, cmd, arg));
}
