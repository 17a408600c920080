/* softrdmad: the server end of the IPC protocol (common/ipc.h; the
 * client end is common/ipc_client.c): client connections, accepting
 * them, replies, reading and parsing requests, dropping a client with
 * everything it owns. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "daemon/softrdmad.h"

/* ---- clients ---- */

static void client_set_events(struct client *c, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = &c->src };

	epoll_ctl(d.epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

void client_drop(struct client *c, const char *why)
{
	logmsg("client pid %ld disconnected (%s), freeing %u QPN(s), %u comm ID(s), %u listen(s), "
	       "%u multicast membership(s)%s",
	       (long)c->pid, why, c->nqpn, c->ncomm_id, c->nlisten, c->nmcast, d.qp1_owner == c ? " and QP1" : "");
	epoll_ctl(d.epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	wills_release(c);
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
	quota_give(c->user, Q_CLIENTS);
	free(c->pending);
	free(c);
}

void set_bufsize(int fd, int opt_force, int opt, int bytes)
{
	/* FORCE ignores [rw]mem_max but needs CAP_NET_ADMIN. */
	if (setsockopt(fd, SOL_SOCKET, opt_force, &bytes, sizeof(bytes)) < 0)
		setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

struct client *client_new(int fd)
{
	struct ucred cred = { .pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1 };
	socklen_t clen = sizeof(cred);
	struct epoll_event ev;
	struct client *c;
	struct user *u;

	/* Without credentials the client is nobody we could trust or charge:
	 * uid -1 is a user of its own. */
	getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen);
	u = user_get(cred.uid);
	/* (a refused user already holds connections, so u stays) */
	if (!u || quota_take(u, Q_CLIENTS)) {
		close(fd);
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		quota_give(u, Q_CLIENTS);
		close(fd);
		return NULL;
	}
	c->src.kind = SRC_CLIENT;
	c->fd = fd;
	c->pid = cred.pid;
	c->uid = cred.uid;
	c->user = u;
	/* Datagrams queued for a client that does not read stay in kernel
	 * memory: a user gets the big buffer on its first connections only,
	 * the rest keep the kernel's default (net.core.wmem_default). */
	if (u->uid == d.euid || u->n[Q_CLIENTS] <= USER_BIG_BUFFERS)
		set_bufsize(fd, SO_SNDBUFFORCE, SO_SNDBUF, SOCK_BUF_BYTES);
	ev.events = EPOLLIN;
	ev.data.ptr = &c->src;
	if (epoll_ctl(d.epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		close(fd);
		quota_give(u, Q_CLIENTS);
		free(c);
		return NULL;
	}
	c->next = d.clients;
	if (d.clients)
		d.clients->prev = c;
	d.clients = c;
	d.nclients++;
	logmsg("client pid %ld (uid %ld) connected", (long)c->pid, (long)c->uid);
	return c;
}

void accept_clients(void)
{
	for (;;) {
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
		client_new(fd);
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

bool client_flush(struct client *c)
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

/* ---- requests ---- */

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
		/* another client's QPN is as absent as a free one: the answer
		 * must not tell which QPNs are live */
		e = it_find(&d.qpns, q.qpn);
		if (!e || e->owner != c)
			return client_send_reply(c, -ENOENT, NULL, 0);
		qpn_release(e);
		return client_send_reply(c, 0, NULL, 0);
	}
	case SR_IPC_QP_PORT:
	case SR_IPC_QP_PORT_GET: {
		struct sr_ipc_qp_port b;
		struct id_ent *e;

		if (blen < sizeof(b))
			return client_send_reply(c, -EINVAL, NULL, 0);
		memcpy(&b, body, sizeof(b));
		e = it_find(&d.qpns, b.qpn);
		if (h->type == SR_IPC_QP_PORT_GET) {
			/* as absent as a free QPN unless the asker may know it */
			if (!e || !e->port || (e->owner->user != c->user && !client_trusted(c)))
				return client_send_reply(c, -ENOENT, NULL, 0);
			return client_send_reply(c, e->port, NULL, 0);
		}
		if (!e || e->owner != c)
			return client_send_reply(c, -ENOENT, NULL, 0);
		if (b.port && b.port < 1024)
			return client_send_reply(c, -EINVAL, NULL, 0);
		e->port = b.port;
		return client_send_reply(c, 0, NULL, 0);
	}
	case SR_IPC_CLAIM_QP1:
		/* whoever holds QP1 receives the host's unrouted CM traffic */
		if (!client_trusted(c))
			return client_send_reply(c, -EPERM, NULL, 0);
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
		if (!e || e->owner != c)
			return client_send_reply(c, -ENOENT, NULL, 0);
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
		size_t n = status_text(c, text, sizeof(text));

		return client_send_reply(c, status_clients(c), text, n);
	}
	case SR_IPC_REPLY:
		return client_send_reply(c, -EINVAL, NULL, 0);
	default:
		return client_send_reply(c, -EOPNOTSUPP, NULL, 0);
	}
}

bool client_msg(struct client *c, uint8_t *buf, size_t n, int msg_flags)
{
	struct sr_ipc_hdr h;

	if (n < sizeof(h)) {
		/* Not even a header: it cannot be routed nor answered in a
		 * way the client could match, so the stream is lost. */
		client_drop(c, "malformed message");
		return false;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.type == SR_IPC_PKT) {
		if (h.version != SR_IPC_VERSION || (msg_flags & MSG_TRUNC) || h.len != n - sizeof(h)) {
			TALLY(c->user, rx_client);
			drop(c, DROP_BAD_IPC);
			return true;
		}
		client_pkt(c, buf, n);
		return true;
	}
	return client_request(c, &h, buf + sizeof(h), n - sizeof(h), (msg_flags & MSG_TRUNC) != 0);
}

void client_read(struct client *c)
{
	for (int i = 0; i < CLIENT_MSGS_PER_WAKEUP && !c->pending; i++) {
		struct iovec iov = { d.cbuf, SR_IPC_MAX_MSG };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n = recvmsg(c->fd, &msg, MSG_DONTWAIT);

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
		if (!client_msg(c, d.cbuf, (size_t)n, msg.msg_flags))
			return;
	}
}
