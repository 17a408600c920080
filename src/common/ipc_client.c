/* Client side of the softrdmad protocol.  See ipc_client.h for the
 * threading contract.
 *
 * Replies carry no request id: the daemon answers a connection's requests
 * in order.  So requests are sent under send_lock, which also appends the
 * caller's waiter to a FIFO; each REPLY read completes the FIFO's head.
 * Only one thread at a time reads the socket (the "reader role"); a caller
 * waiting for its reply either takes the role and reads (blocking) until
 * its own reply came, or sleeps until the reader completes it or releases
 * the role. */
#include "common/ipc_client.h"
#include "common/sock.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define RX_BATCH 16
/* Rounded up so each slot (and the sr_ipc_pkt inside it) stays 8-aligned. */
#define RX_SLOT ((SR_IPC_MAX_MSG + 7) & ~(size_t)7)
#define CONNECT_WAIT_MS 3000

struct waiter {
	struct waiter *next;
	bool done;
	int64_t val;
	void *out;
	uint32_t cap;
	uint32_t out_len;
};

/* Receive buffers for up to n messages.  The outermost reader uses the
 * connection's; a nested reader (sr_daemon_call from the packet callback)
 * uses one on its stack, because the outer one still holds the packet
 * being delivered. */
struct rxbatch {
	struct mmsghdr mh[RX_BATCH];
	struct iovec iov[RX_BATCH];
	uint8_t buf[RX_BATCH][RX_SLOT] __attribute__((aligned(8)));
};

struct rxone {
	struct mmsghdr mh[1];
	struct iovec iov[1];
	uint8_t buf[1][RX_SLOT] __attribute__((aligned(8)));
};

struct rxbuf {
	struct mmsghdr *mh;
	struct iovec *iov;
	uint8_t (*buf)[RX_SLOT];
	int n;
};

struct sr_daemon_conn {
	int fd;
	pid_t daemon_pid;
	sr_daemon_pkt_cb cb;
	void *arg;
	/* Held across "append waiter + send request" so FIFO order is send order. */
	pthread_mutex_t send_lock;
	/* Protects the fields below. */
	pthread_mutex_t lock;
	/* Signalled when a waiter completes or the reader role is released. */
	pthread_cond_t cond;
	struct waiter *head, **tail;
	bool reader_busy;
	pthread_t reader;
	bool read_again; /* readiness reported while another thread read */
	bool dead;
	struct rxbatch *rx; /* the outermost reader's buffers */
};

static void complete_all_locked(struct sr_daemon_conn *c, int64_t val)
{
	while (c->head) {
		struct waiter *w = c->head;

		c->head = w->next;
		w->val = val;
		w->done = true;
	}
	c->tail = &c->head;
	pthread_cond_broadcast(&c->cond);
}

static void set_dead(struct sr_daemon_conn *c)
{
	pthread_mutex_lock(&c->lock);
	c->dead = true;
	complete_all_locked(c, -EPIPE);
	pthread_mutex_unlock(&c->lock);
}

static void handle_reply(struct sr_daemon_conn *c, const uint8_t *body, uint32_t len)
{
	struct sr_ipc_reply r;
	struct waiter *w;

	if (len < sizeof(r))
		return;
	memcpy(&r, body, sizeof(r));
	pthread_mutex_lock(&c->lock);
	w = c->head;
	if (w) {
		uint32_t extra = len - (uint32_t)sizeof(r);

		c->head = w->next;
		if (!c->head)
			c->tail = &c->head;
		w->val = r.val;
		if (w->out && w->cap) {
			uint32_t n = extra < w->cap ? extra : w->cap;

			memcpy(w->out, body + sizeof(r), n);
			if (n < w->cap)
				((char *)w->out)[n] = 0;
			w->out_len = n;
		}
		w->done = true;
		pthread_cond_broadcast(&c->cond);
	}
	pthread_mutex_unlock(&c->lock);
}

/* Type of a well-formed message from the daemon, 0 for anything else. */
static uint16_t msg_type(const uint8_t *buf, size_t len)
{
	struct sr_ipc_hdr h;
	struct sr_ipc_pkt meta;

	if (len < sizeof(h))
		return 0;
	memcpy(&h, buf, sizeof(h));
	if (h.version != SR_IPC_VERSION || h.len != len - sizeof(h))
		return 0;
	if (h.type == SR_IPC_PKT) {
		if (h.len < sizeof(meta))
			return 0;
		memcpy(&meta, buf + sizeof(h), sizeof(meta));
		if (meta.len != h.len - sizeof(meta) || meta.len > SR_IPC_MAX_PKT)
			return 0;
	}
	return h.type;
}

/* One recvmmsg.  Returns messages read, 0 if none pending (non-blocking),
 * -1 once the connection is gone. */
static int read_batch(struct sr_daemon_conn *c, const struct rxbuf *b, bool block)
{
	int got, n = b->n, valid;

	for (int i = 0; i < n; i++) {
		b->iov[i].iov_base = b->buf[i];
		b->iov[i].iov_len = RX_SLOT;
		memset(&b->mh[i], 0, sizeof(b->mh[i]));
		b->mh[i].msg_hdr.msg_iov = &b->iov[i];
		b->mh[i].msg_hdr.msg_iovlen = 1;
	}
	do
		got = recvmmsg(c->fd, b->mh, (unsigned)n, block ? MSG_WAITFORONE : MSG_DONTWAIT, NULL);
	while (got < 0 && errno == EINTR);
	if (got <= 0) {
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		set_dead(c);
		return -1;
	}
	/* Every protocol message has a header, so an empty one is EOF. */
	for (valid = 0; valid < got && b->mh[valid].msg_len; valid++)
		if (b->mh[valid].msg_hdr.msg_flags & MSG_TRUNC)
			b->mh[valid].msg_len = 1; /* fails msg_type() */
	/* Replies first: the packet callback may call sr_daemon_call, whose
	 * nested read takes later messages off the socket, and a reply still
	 * sitting unprocessed in this batch would then be matched out of
	 * order.  Packets relative to replies need no order. */
	for (int i = 0; i < valid; i++)
		if (msg_type(b->buf[i], b->mh[i].msg_len) == SR_IPC_REPLY)
			handle_reply(c, b->buf[i] + sizeof(struct sr_ipc_hdr),
				     b->mh[i].msg_len - (uint32_t)sizeof(struct sr_ipc_hdr));
	for (int i = 0; i < valid; i++) {
		const uint8_t *buf = b->buf[i];
		const struct sr_ipc_pkt *meta = (const void *)(buf + sizeof(struct sr_ipc_hdr));

		if (c->cb && msg_type(buf, b->mh[i].msg_len) == SR_IPC_PKT)
			c->cb(c->arg, meta, (const uint8_t *)(meta + 1), meta->len);
	}
	if (valid < got) {
		set_dead(c);
		return -1;
	}
	return got;
}

static void drain(struct sr_daemon_conn *c)
{
	struct rxbuf b = { c->rx->mh, c->rx->iov, c->rx->buf, RX_BATCH };
	int got;

	/* A short batch means the queue was empty: any later message raises a
	 * new edge, so stopping here is safe for edge-triggered epoll too. */
	do
		got = read_batch(c, &b, false);
	while (got == b.n);
}

static bool waiter_done(struct sr_daemon_conn *c, struct waiter *w)
{
	bool done;

	pthread_mutex_lock(&c->lock);
	done = w->done;
	pthread_mutex_unlock(&c->lock);
	return done;
}

static void read_until(struct sr_daemon_conn *c, const struct rxbuf *b, struct waiter *w)
{
	while (!waiter_done(c, w))
		if (read_batch(c, b, true) < 0)
			break;
}

/* Called with c->lock held by the thread holding the reader role. */
static void release_reader_locked(struct sr_daemon_conn *c)
{
	while (c->read_again && !c->dead) {
		c->read_again = false;
		pthread_mutex_unlock(&c->lock);
		drain(c);
		pthread_mutex_lock(&c->lock);
	}
	c->read_again = false;
	c->reader_busy = false;
	pthread_cond_broadcast(&c->cond);
}

void sr_daemon_on_readable(struct sr_daemon_conn *c)
{
	pthread_mutex_lock(&c->lock);
	if (c->reader_busy) {
		c->read_again = true;
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->reader_busy = true;
	c->reader = pthread_self();
	pthread_mutex_unlock(&c->lock);

	drain(c);

	pthread_mutex_lock(&c->lock);
	release_reader_locked(c);
	pthread_mutex_unlock(&c->lock);
}

static int send_errno(int e)
{
	return e == ECONNRESET || e == ENOTCONN || e == ECONNREFUSED ? EPIPE : e;
}

int64_t sr_daemon_call_ex(struct sr_daemon_conn *c, uint16_t type, const void *body, uint32_t len, void *out,
			  uint32_t cap, uint32_t *out_len)
{
	struct sr_ipc_hdr h = { .type = type, .version = SR_IPC_VERSION, .len = len };
	struct iovec iov[2] = { { &h, sizeof(h) }, { (void *)body, len } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	struct waiter w = { .out = out, .cap = cap };
	ssize_t n;

	if (out_len)
		*out_len = 0;
	if (len > SR_IPC_MAX_MSG - sizeof(h) || (len && !body) || type == SR_IPC_PKT)
		return -EINVAL;

	pthread_mutex_lock(&c->send_lock);
	pthread_mutex_lock(&c->lock);
	if (c->dead) {
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_unlock(&c->send_lock);
		return -EPIPE;
	}
	*c->tail = &w;
	c->tail = &w.next;
	pthread_mutex_unlock(&c->lock);
	do
		n = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		int e = send_errno(errno);

		/* Unsent, so no reply can have matched it: take it back out. */
		pthread_mutex_lock(&c->lock);
		for (struct waiter **pp = &c->head; *pp; pp = &(*pp)->next) {
			if (*pp == &w) {
				*pp = w.next;
				if (!*pp)
					c->tail = pp;
				break;
			}
		}
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_unlock(&c->send_lock);
		if (e == EPIPE)
			set_dead(c);
		return -e;
	}
	pthread_mutex_unlock(&c->send_lock);

	pthread_mutex_lock(&c->lock);
	while (!w.done) {
		if (!c->reader_busy) {
			struct rxbuf b = { c->rx->mh, c->rx->iov, c->rx->buf, RX_BATCH };

			c->reader_busy = true;
			c->reader = pthread_self();
			pthread_mutex_unlock(&c->lock);
			read_until(c, &b, &w);
			pthread_mutex_lock(&c->lock);
			release_reader_locked(c);
		} else if (pthread_equal(c->reader, pthread_self())) {
			/* Called from the packet callback: this thread already holds
			 * the reader role. */
			struct rxone one;
			struct rxbuf b = { one.mh, one.iov, one.buf, 1 };

			pthread_mutex_unlock(&c->lock);
			read_until(c, &b, &w);
			pthread_mutex_lock(&c->lock);
		} else {
			pthread_cond_wait(&c->cond, &c->lock);
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (out_len)
		*out_len = w.out_len;
	return w.val;
}

int64_t sr_daemon_call(struct sr_daemon_conn *c, uint16_t type, const void *body, uint32_t len)
{
	return sr_daemon_call_ex(c, type, body, len, NULL, 0, NULL);
}

int sr_daemon_forward(struct sr_daemon_conn *c, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len)
{
	struct sr_ipc_pkt m;
	struct sr_ipc_hdr h = { .type = SR_IPC_PKT, .version = SR_IPC_VERSION };
	struct iovec iov[3];
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 3 };
	ssize_t n;

	if (len > SR_IPC_MAX_PKT)
		return -EMSGSIZE;
	m = *meta;
	m.len = len;
	memset(m.pad, 0, sizeof(m.pad));
	h.len = (uint32_t)sizeof(m) + len;
	iov[0] = (struct iovec){ &h, sizeof(h) };
	iov[1] = (struct iovec){ &m, sizeof(m) };
	iov[2] = (struct iovec){ (void *)data, len };
	do
		n = sendmsg(c->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		int e = send_errno(errno);

		if (e == EWOULDBLOCK)
			e = EAGAIN;
		if (e == EPIPE)
			set_dead(c);
		return -e;
	}
	return 0;
}

int sr_daemon_fd(struct sr_daemon_conn *c)
{
	return c->fd;
}

bool sr_daemon_dead(struct sr_daemon_conn *c)
{
	bool dead;

	pthread_mutex_lock(&c->lock);
	dead = c->dead;
	pthread_mutex_unlock(&c->lock);
	return dead;
}

pid_t sr_daemon_pid(struct sr_daemon_conn *c)
{
	return c->daemon_pid;
}

/* ---- connecting and starting the daemon ---- */

static const char *sock_name(void)
{
	/* A set-user-ID program must not be pointed at a daemon of the
	 * caller's choosing (it would refuse it below anyway). */
	const char *s = secure_getenv("SOFTRDMA_DAEMON_SOCK");

	return s && s[0] ? s : SR_IPC_SOCK_NAME;
}

/* The daemon sees every datagram routed to our QPs and could forge
 * them (write into our registered memory posing as a peer), so we use
 * it only if it runs as root, who could do all that anyway, or as us. */
static bool daemon_trusted(const struct ucred *cr)
{
	return cr->uid == 0 || cr->uid == geteuid();
}

static void say_untrusted(const struct ucred *cr)
{
	fprintf(stderr,
		"softrdma: softrdmad (socket @%s, pid %ld) runs as uid %ld, neither root nor us (uid %ld): not "
		"using it, it could read and forge our RDMA traffic.  Stop it, or start softrdmad as root "
		"(softrdma-cfg start), or use a network namespace of our own\n",
		sock_name(), (long)cr->pid, (long)cr->uid, (long)geteuid());
}

/* Connected fd, or -errno: -EPERM for a daemon we do not trust (its
 * credentials in *peer). */
static int connect_once(struct ucred *peer)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *name = sock_name();
	size_t n = strlen(name);
	int fd, sz = 1 << 20;

	if (n + 1 > sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path + 1, name, n);
	fd = sr_socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* AF_UNIX charges queued messages to the sender's buffer. */
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	if (connect(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	/* the credentials the daemon had when it called listen() */
	socklen_t clen = sizeof(*peer);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, peer, &clen) < 0 || !daemon_trusted(peer)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

int sr_daemon_probe(struct ucred *cred)
{
	int fd = connect_once(cred);

	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

static bool executable(const char *p)
{
	return access(p, X_OK) == 0;
}

/* Directory of the object (shared library or program) this code is in. */
static bool own_dir(char *dir, size_t len)
{
	Dl_info info;
	char buf[PATH_MAX];
	const char *path = NULL;
	char *slash;

	if (dladdr((void *)&sr_daemon_spawn, &info) && info.dli_fname && strchr(info.dli_fname, '/'))
		path = info.dli_fname;
	if (!path) {
		/* The main program's dli_fname is argv[0]-like, or empty. */
		ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);

		if (n <= 0)
			return false;
		buf[n] = 0;
		path = buf;
	}
	if (!realpath(path, dir) || strlen(dir) >= len)
		return false;
	slash = strrchr(dir, '/');
	if (!slash)
		return false;
	if (slash == dir)
		slash++; /* the object is in "/" */
	*slash = 0;
	return true;
}

static const char *find_daemon(char *buf, size_t len)
{
	static const char *const rel[] = {
		"/../../bin/softrdmad", /* <build>/lib/softrdma/libibverbs.so.1 */
		"/softrdmad",		/* <build>/bin/softrdma-cfg */
		"/../bin/softrdmad",	/* <build>/tests/test_x */
		/* installed: <libdir>/softrdma/libibverbs.so.1, <bindir>/softrdma-cfg */
		"/" SR_REL_PKGLIB_TO_SBIN "/softrdmad",
		"/" SR_REL_BIN_TO_SBIN "/softrdmad",
	};
	/* secure_getenv: never run a program named by the environment from a
	 * set-user-ID process. */
	const char *env = secure_getenv("SOFTRDMA_DAEMON");
	char dir[PATH_MAX];

	if (env && env[0])
		return env;
	if (own_dir(dir, sizeof(dir))) {
		for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
			int n = snprintf(buf, len, "%s%s", dir, rel[i]);

			if (n > 0 && (size_t)n < len && executable(buf))
				return buf;
		}
	}
	return NULL; /* search PATH */
}

/* The daemon's environment: the caller's, less LD_PRELOAD.  softrdmad
 * outlives the program that started it and serves every other; it must
 * not keep that program's interposers (softrdma-run --rsocket's
 * librspreload, which loads librdmacm into it, a sanitizer runtime, a
 * user's own) in its address space.  NULL if out of memory. */
static char **daemon_environ(void)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ && environ[n])
		n++;
	env = calloc(n + 1, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11))
			env[k++] = environ[i];
	return env;
}

int sr_daemon_spawn(const char *const *extra_argv)
{
	char buf[PATH_MAX];
	const char *path = find_daemon(buf, sizeof(buf));
	const char *argv[16];
	int argc = 0, status, rc;
	posix_spawnattr_t attr;
	sigset_t none, deflt;
	pid_t pid;

	argv[argc++] = path ? path : "softrdmad";
	argv[argc++] = "--background";
	for (int i = 0; extra_argv && extra_argv[i]; i++) {
		if (argc >= (int)(sizeof(argv) / sizeof(argv[0])) - 1)
			return -E2BIG;
		argv[argc++] = extra_argv[i];
	}
	argv[argc] = NULL;

	/* The caller's threads may block or ignore signals; the daemon must
	 * start with a clean slate or SIGTERM would not stop it. */
	sigemptyset(&none);
	sigemptyset(&deflt);
	sigaddset(&deflt, SIGTERM);
	sigaddset(&deflt, SIGINT);
	sigaddset(&deflt, SIGHUP);
	sigaddset(&deflt, SIGPIPE);
	sigaddset(&deflt, SIGCHLD);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &deflt);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	char **env = daemon_environ();
	if (!env) {
		posix_spawnattr_destroy(&attr);
		return -ENOMEM;
	}
	if (path)
		rc = posix_spawn(&pid, path, NULL, &attr, (char *const *)argv, env);
	else
		rc = posix_spawnp(&pid, "softrdmad", NULL, &attr, (char *const *)argv, env);
	free(env);
	posix_spawnattr_destroy(&attr);
	if (rc) {
		if (path)
			fprintf(stderr, "softrdma: cannot run %s: %s\n", path, strerror(rc));
		else
			fprintf(stderr,
				"softrdma: cannot find softrdmad (not next to the library, not in PATH; "
				"set SOFTRDMA_DAEMON): %s\n",
				strerror(rc));
		return -rc;
	}
	/* With --background the direct child exits once the daemon listens. */
	while ((rc = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	if (rc < 0)
		return 0; /* reaped by someone else (SIGCHLD ignored): just try to connect */
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 1)
		return -ECHILD; /* softrdmad printed why */
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		fprintf(stderr, "softrdma: cannot run %s\n", argv[0]);
	else if (WIFEXITED(status))
		fprintf(stderr, "softrdma: %s failed to start (exit status %d)\n", argv[0], WEXITSTATUS(status));
	else
		fprintf(stderr, "softrdma: %s failed to start (signal %d)\n", argv[0],
			WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	return -ECHILD;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* *reported: a message was already printed (by the spawn). */
static int connect_or_start(unsigned flags, bool *reported)
{
	struct ucred peer = { 0 };
	int fd = connect_once(&peer);
	int64_t deadline;
	int rc;

	if (fd == -EPERM && !(flags & SR_DAEMON_QUIET)) {
		say_untrusted(&peer);
		*reported = true;
	}
	if (fd >= 0 || (flags & SR_DAEMON_NO_START) || (fd != -ECONNREFUSED && fd != -ENOENT))
		return fd;
	rc = sr_daemon_spawn(NULL);
	if (rc < 0) {
		*reported = true;
		/* ECHILD (it ran and failed) would mislead whoever prints it. */
		return rc == -ECHILD ? -ECONNREFUSED : rc;
	}
	deadline = now_ms() + CONNECT_WAIT_MS;
	for (;;) {
		struct timespec ts = { 0, 20 * 1000000 };

		fd = connect_once(&peer);
		if (fd == -EPERM && !(flags & SR_DAEMON_QUIET)) {
			say_untrusted(&peer);
			*reported = true;
		}
		if (fd >= 0 || (fd != -ECONNREFUSED && fd != -ENOENT) || now_ms() >= deadline)
			return fd;
		nanosleep(&ts, NULL);
	}
}

static void free_conn(struct sr_daemon_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->send_lock);
	free(c->rx);
	free(c);
}

struct sr_daemon_conn *sr_daemon_open_flags(sr_daemon_pkt_cb cb, void *arg, unsigned flags, int *err)
{
	struct sr_daemon_conn *c;
	struct sr_ipc_hello hello = { .pid = (int32_t)getpid() };
	int64_t val = 0;
	int fd = -1, e;
	bool reported = false;

	/* A daemon that is idle-exiting may accept us and then close: retry. */
	for (int attempt = 0; attempt < 3; attempt++) {
		c = calloc(1, sizeof(*c));
		if (!c) {
			e = ENOMEM;
			goto fail_msg;
		}
		c->rx = aligned_alloc(8, sizeof(*c->rx));
		if (!c->rx) {
			free(c);
			e = ENOMEM;
			goto fail_msg;
		}
		c->fd = -1;
		c->cb = cb;
		c->arg = arg;
		c->tail = &c->head;
		pthread_mutex_init(&c->send_lock, NULL);
		pthread_mutex_init(&c->lock, NULL);
		pthread_cond_init(&c->cond, NULL);

		fd = connect_or_start(flags, &reported);
		if (fd < 0) {
			free_conn(c);
			e = -fd;
			goto fail_msg;
		}
		c->fd = fd;
		val = sr_daemon_call(c, SR_IPC_HELLO, &hello, sizeof(hello));
		if (val > 0) {
			c->daemon_pid = (pid_t)val;
			if (err)
				*err = 0;
			return c;
		}
		free_conn(c);
		if (val != -EPIPE)
			break;
	}
	e = val < 0 ? (int)-val : EPROTO;
	if (!(flags & SR_DAEMON_QUIET))
		fprintf(stderr, "softrdma: softrdmad (socket @%s) refused HELLO: %s\n", sock_name(), strerror(e));
	if (err)
		*err = -e;
	return NULL;

fail_msg:
	if (!(flags & SR_DAEMON_QUIET) && !reported) {
		if (e == ECONNREFUSED && (flags & SR_DAEMON_NO_START))
			fprintf(stderr, "softrdma: softrdmad is not running (socket @%s)\n", sock_name());
		else
			fprintf(stderr, "softrdma: cannot connect to softrdmad (socket @%s): %s\n", sock_name(),
				strerror(e));
	}
	if (err)
		*err = -e;
	return NULL;
}

struct sr_daemon_conn *sr_daemon_open(sr_daemon_pkt_cb cb, void *arg, int *err)
{
	return sr_daemon_open_flags(cb, arg, 0, err);
}

void sr_daemon_close(struct sr_daemon_conn *c)
{
	if (!c)
		return;
	shutdown(c->fd, SHUT_RDWR);
	free_conn(c);
}

/* ---- connection management ---- */

int sr_daemon_alloc_comm_id(struct sr_daemon_conn *c, uint32_t *id)
{
	int64_t v = sr_daemon_call(c, SR_IPC_ALLOC_COMM_ID, NULL, 0);

	if (v < 0)
		return (int)v;
	/* The daemon hands out 32-bit IDs, never 0. */
	if (v == 0 || v > UINT32_MAX)
		return -EPROTO;
	*id = (uint32_t)v;
	return 0;
}

int sr_daemon_free_comm_id(struct sr_daemon_conn *c, uint32_t id)
{
	struct sr_ipc_comm_id b = { .comm_id = id };

	return (int)sr_daemon_call(c, SR_IPC_FREE_COMM_ID, &b, sizeof(b));
}

static int listen_call(struct sr_daemon_conn *c, uint16_t type, uint64_t service_id, const struct sockaddr_in6 *local)
{
	struct sr_ipc_listen b;

	memset(&b, 0, sizeof(b));
	b.service_id = service_id;
	if (local && local->sin6_family == AF_INET)
		memcpy(&b.local, local, sizeof(struct sockaddr_in));
	else if (local)
		b.local = *local;
	return (int)sr_daemon_call(c, type, &b, sizeof(b));
}

int sr_daemon_listen(struct sr_daemon_conn *c, uint64_t service_id, const struct sockaddr_in6 *local)
{
	return listen_call(c, SR_IPC_LISTEN, service_id, local);
}

int sr_daemon_unlisten(struct sr_daemon_conn *c, uint64_t service_id, const struct sockaddr_in6 *local)
{
	return listen_call(c, SR_IPC_UNLISTEN, service_id, local);
}

int sr_daemon_cm_will(struct sr_daemon_conn *c, uint32_t comm_id, const struct sockaddr_in6 *local,
		      const struct sockaddr_in6 *peer, const uint8_t *mad)
{
	struct sr_ipc_cm_will b;

	memset(&b, 0, sizeof(b));
	b.comm_id = comm_id;
	if (mad) {
		b.len = sizeof(b.mad);
		b.local = *local;
		b.peer = *peer;
		b.local.sin6_family = b.peer.sin6_family = AF_INET6;
		memcpy(b.mad, mad, sizeof(b.mad));
	}
	int64_t v = sr_daemon_call(c, SR_IPC_CM_WILL, &b, sizeof(b));
	return v < 0 ? (int)v : 0;
}

/* ---- multicast ---- */

static int mcast_call(struct sr_daemon_conn *c, uint16_t type, const struct in6_addr *group, int ifindex)
{
	struct sr_ipc_mcast b;

	memset(&b, 0, sizeof(b));
	b.group = *group;
	b.ifindex = ifindex;
	int64_t v = sr_daemon_call(c, type, &b, sizeof(b));
	return v < 0 ? (int)v : 0;
}

int sr_daemon_mcast_join(struct sr_daemon_conn *c, const struct in6_addr *group, int ifindex)
{
	return mcast_call(c, SR_IPC_MCAST_JOIN, group, ifindex);
}

int sr_daemon_mcast_leave(struct sr_daemon_conn *c, const struct in6_addr *group, int ifindex)
{
	return mcast_call(c, SR_IPC_MCAST_LEAVE, group, ifindex);
}
