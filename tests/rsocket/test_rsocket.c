/* test_rsocket - rsockets through our librdmacm.so.1 over rxe0 on lo:
 * argument and state errors with their errno values, connect/accept and
 * names, non-blocking connect (EINPROGRESS, SO_ERROR), large transfers
 * with data verification (one way, both ways at once from two threads per
 * socket), the iovec/PEEK/WAITALL variants, non-blocking EAGAIN and
 * recovery, rpoll/rselect timeouts and wake-ups over rsockets mixed with a
 * pipe, a stream read through rpoll alone (no lost wake-up), shutdown semantics (EOF after the data, half-close, EPIPE, POLLHUP),
 * data sent just before rclose not lost, riomap/riowrite, the iWARP message
 * mode, many connections on one listener, and a peer process that dies
 * without closing.  Only the public rsocket API is used. */
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/select.h>
#include <sys/wait.h>

#include "../verbs/vt.h"

/* The messages here show what the call in the condition produced (errno,
 * revents): evaluate the condition first. */
#undef CHECK
#define CHECK(cond, ...)                                               \
	({                                                             \
		bool ok_ = !!(cond);                                   \
		vt_report(ok_, __FILE__, __LINE__, NULL, __VA_ARGS__); \
	})

/* A listening rsocket on a fresh port of 127.0.0.1. */
static int listener(uint16_t *port)
{
	for (int i = 0; i < 20; i++) {
		int l = rsocket(AF_INET, SOCK_STREAM, 0), one = 1;
		if (l < 0)
			return -1;
		rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		*port = vt_pick_port();
		struct sockaddr_in a = vt_lo_addr(*port);
		if (!rbind(l, (struct sockaddr *)&a, sizeof(a)) && !rlisten(l, 16))
			return l;
		rclose(l);
	}
	return -1;
}

typedef void (*opt_fn)(int fd);

/* A connected pair: the client connects without blocking, the server
 * accepts (blocking), the client waits for POLLOUT and checks SO_ERROR.
 * copt runs on the client socket before connecting, lopt on the listener. */
static bool pair_opts(int *srv, int *cli, opt_fn copt, opt_fn lopt)
{
	uint16_t port;
	int l = listener(&port), c, s, err = -1;
	socklen_t len = sizeof(err);

	*srv = *cli = -1;
	if (!CHECK(l >= 0, "listener\t(%s)", strerror(errno)))
		return false;
	if (lopt)
		lopt(l);
	c = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (copt)
		copt(c);
	struct sockaddr_in a = vt_lo_addr(port);
	int r = rconnect(c, (struct sockaddr *)&a, sizeof(a));
	if (!CHECK(r == 0 || errno == EINPROGRESS, "non-blocking rconnect: 0 or EINPROGRESS\t(%s)", strerror(errno)))
		goto fail;
	/* a connect that failed leaves nothing to accept: say so, rather
	 * than block in raccept until the watchdog */
	struct pollfd lp = { .fd = l, .events = POLLIN };
	if (!CHECK(rpoll(&lp, 1, 10000) == 1,
		   "the connection request reaches the listener within 10 s\t(client "
		   "SO_ERROR %d)",
		   (rgetsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len), err)))
		goto fail;
	s = raccept(l, NULL, NULL);
	if (!CHECK(s >= 0, "raccept\t(%s)", strerror(errno)))
		goto fail;
	err = -1;
	len = sizeof(err);
	struct pollfd p = { .fd = c, .events = POLLOUT };
	r = rpoll(&p, 1, 5000);
	CHECK(r == 1 && (p.revents & POLLOUT), "client POLLOUT once connected (rpoll %d, revents 0x%x)", r, p.revents);
	r = rgetsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len);
	CHECK(!r && err == 0, "SO_ERROR 0 after connecting (%d)", err);
	rfcntl(c, F_SETFL, 0);
	rclose(l);
	*srv = s;
	*cli = c;
	return true;
fail:
	rclose(c);
	rclose(l);
	return false;
}

static bool pair(int *srv, int *cli)
{
	return pair_opts(srv, cli, NULL, NULL);
}

/* Sends len pattern bytes (seed) in chunks of random size. */
static bool send_all(int fd, size_t len, uint32_t seed, size_t max_chunk)
{
	uint8_t *buf = malloc(len);
	size_t off = 0;
	bool ok = true;

	vt_fill(buf, len, seed);
	while (off < len) {
		size_t n = 1 + vt_rand64_r(&(uint64_t){ off * 31 + seed + 1 }) % max_chunk;
		if (n > len - off)
			n = len - off;
		ssize_t r = rsend(fd, buf + off, n, 0);
		if (r <= 0) {
			ok = false;
			NOTE("rsend at %zu of %zu: %zd (%s)", off, len, r, strerror(errno));
			break;
		}
		off += (size_t)r;
	}
	free(buf);
	return ok;
}

/* Receives exactly len bytes in chunks of random size; checks the pattern. */
static bool recv_all(int fd, size_t len, uint32_t seed, size_t max_chunk, long *bad)
{
	uint8_t *buf = malloc(len);
	size_t off = 0;
	bool ok = true;

	while (off < len) {
		size_t n = 1 + vt_rand64_r(&(uint64_t){ off * 17 + seed + 7 }) % max_chunk;
		if (n > len - off)
			n = len - off;
		ssize_t r = rrecv(fd, buf + off, n, 0);
		if (r <= 0) {
			ok = false;
			NOTE("rrecv at %zu of %zu: %zd (%s)", off, len, r, strerror(errno));
			break;
		}
		off += (size_t)r;
	}
	*bad = ok ? vt_verify(buf, len, seed) : -2;
	free(buf);
	return ok && *bad < 0;
}

struct xfer {
	int fd;
	size_t len, chunk;
	uint32_t seed;
	bool ok;
	long bad;
};

static void *send_thread(void *arg)
{
	struct xfer *x = arg;
	x->ok = send_all(x->fd, x->len, x->seed, x->chunk);
	return NULL;
}

static void *recv_thread(void *arg)
{
	struct xfer *x = arg;
	x->ok = recv_all(x->fd, x->len, x->seed, x->chunk, &x->bad);
	return NULL;
}

/* ---- errors ---------------------------------------------------------------- */

static void test_errors(void)
{
	int fd, v, p[2], r;
	socklen_t len;
	char b[8];

	SECTION("errors and options");
	errno = 0;
	CHECK(rsocket(AF_UNIX, SOCK_STREAM, 0) == -1 && errno == EAFNOSUPPORT, "rsocket(AF_UNIX) -> EAFNOSUPPORT");
	errno = 0;
	CHECK(rsocket(AF_INET, SOCK_SEQPACKET, 0) == -1 && errno == EPROTONOSUPPORT,
	      "rsocket(SOCK_SEQPACKET) -> EPROTONOSUPPORT");
	errno = 0;
	CHECK(rsocket(AF_INET, SOCK_DGRAM, IPPROTO_TCP) == -1 && errno == EPROTONOSUPPORT,
	      "rsocket(SOCK_DGRAM, IPPROTO_TCP) -> EPROTONOSUPPORT");
	errno = 0;
	CHECK(rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP) == -1 && errno == EPROTONOSUPPORT,
	      "rsocket(SOCK_STREAM, IPPROTO_UDP) -> EPROTONOSUPPORT");
	errno = 0;
	CHECK(rsend(-1, "x", 1, 0) == -1 && errno == EBADF, "rsend(-1) -> EBADF");
	if (!pipe(p)) {
		errno = 0;
		CHECK(rrecv(p[0], b, 1, 0) == -1 && errno == EBADF, "rrecv on a pipe -> EBADF");
		errno = 0;
		CHECK(rclose(p[0]) == -1 && errno == EBADF, "rclose on a pipe -> EBADF");
		close(p[0]);
		close(p[1]);
	}

	fd = rsocket(AF_INET, SOCK_STREAM, 0);
	if (!CHECK(fd >= 0, "rsocket(AF_INET, SOCK_STREAM)\t(%s)", strerror(errno)))
		return;
	errno = 0;
	CHECK(rsend(fd, "x", 1, 0) == -1 && errno == ENOTCONN, "rsend unconnected -> ENOTCONN");
	errno = 0;
	CHECK(rrecv(fd, b, 1, 0) == -1 && errno == ENOTCONN, "rrecv unconnected -> ENOTCONN");
	struct sockaddr_in a;
	len = sizeof(a);
	errno = 0;
	CHECK(rgetpeername(fd, (struct sockaddr *)&a, &len) == -1 && errno == ENOTCONN,
	      "rgetpeername unconnected -> ENOTCONN");
	len = sizeof(a);
	CHECK(!rgetsockname(fd, (struct sockaddr *)&a, &len) && a.sin_family == AF_INET && len == sizeof(a),
	      "rgetsockname unbound: AF_INET");
	errno = 0;
	CHECK(rshutdown(fd, SHUT_RDWR) == -1 && errno == ENOTCONN, "rshutdown unconnected -> ENOTCONN");
	errno = 0;
	CHECK(rshutdown(fd, 7) == -1 && errno == EINVAL, "rshutdown(how 7) -> EINVAL");
	errno = 0;
	CHECK(raccept(fd, NULL, NULL) == -1 && errno == EINVAL, "raccept on a socket not listening -> EINVAL");
	a = vt_lo_addr(1);
	errno = 0;
	CHECK(rbind(fd, (struct sockaddr *)&a, 4) == -1 && errno == EINVAL, "rbind with a short length -> EINVAL");

	v = 100;
	CHECK(!rsetsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &v, sizeof(v)), "RDMA_SQSIZE 100");
	len = sizeof(v);
	r = rgetsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &v, &len);
	CHECK(!r && v == 100, "  reads back 100 (%d)", v);
	v = 300;
	CHECK(!rsetsockopt(fd, SOL_RDMA, RDMA_IOMAPSIZE, &v, sizeof(v)), "RDMA_IOMAPSIZE 300");
	len = sizeof(v);
	r = rgetsockopt(fd, SOL_RDMA, RDMA_IOMAPSIZE, &v, &len);
	CHECK(!r && v == 256, "  rounded as rdma-core does: 256 (%d)", v);
	v = 100000;
	CHECK(!rsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), "SO_RCVBUF 100000");
	len = sizeof(v);
	r = rgetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &len);
	CHECK(!r && v == 200000, "  reads back doubled (%d)", v);
	v = 1;
	CHECK(!rsetsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, sizeof(v)), "TCP_NODELAY");
	v = 0;
	len = sizeof(v);
	CHECK(!rgetsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &len) && v == 1, "  reads back 1");
	errno = 0;
	CHECK(rsetsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &v, 2) == -1 && errno == EINVAL, "short optlen -> EINVAL");
	errno = 0;
	CHECK(rsetsockopt(fd, SOL_SOCKET, SO_BROADCAST, &v, sizeof(v)) == -1 && errno == ENOTSUP,
	      "an option rsockets lack -> ENOTSUP");
	CHECK(rfcntl(fd, F_GETFL) == 0, "F_GETFL: blocking");
	CHECK(!rfcntl(fd, F_SETFL, O_NONBLOCK) && (rfcntl(fd, F_GETFL) & O_NONBLOCK), "F_SETFL O_NONBLOCK");
	rfcntl(fd, F_SETFL, 0);

	/* no listener: the client's REQ meets a REJ */
	uint16_t port = vt_pick_port();
	a = vt_lo_addr(port);
	uint64_t t0 = vt_now_ms();
	errno = 0;
	CHECK(rconnect(fd, (struct sockaddr *)&a, sizeof(a)) == -1 && errno == ECONNREFUSED,
	      "blocking rconnect, no listener -> ECONNREFUSED\t(%s)", strerror(errno));
	CHECK(vt_now_ms() - t0 < 5000, "  within 5 s (%llu ms)", (unsigned long long)(vt_now_ms() - t0));
	rclose(fd);

	/* non-blocking: the REJ may come back before rconnect returns (as
	 * a TCP RST on loopback can), else rpoll and SO_ERROR tell */
	fd = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	errno = 0;
	r = rconnect(fd, (struct sockaddr *)&a, sizeof(a));
	int e = errno;
	CHECK(r == -1 && (e == EINPROGRESS || e == ECONNREFUSED),
	      "non-blocking rconnect -> EINPROGRESS (or ECONNREFUSED at once)\t(%s)", strerror(e));
	if (r == -1 && e == EINPROGRESS) {
		struct pollfd pf = { .fd = fd, .events = POLLOUT };
		r = rpoll(&pf, 1, 5000);
		CHECK(r == 1 && (pf.revents & POLLERR), "rpoll: POLLERR when refused (rpoll %d, revents 0x%x)", r,
		      pf.revents);
		v = 0;
		len = sizeof(v);
		r = rgetsockopt(fd, SOL_SOCKET, SO_ERROR, &v, &len);
		CHECK(!r && v == ECONNREFUSED, "SO_ERROR ECONNREFUSED (%d)", v);
	} else {
		NOTE("refused before rconnect returned");
	}
	len = sizeof(v);
	CHECK(!rgetsockopt(fd, SOL_SOCKET, SO_ERROR, &v, &len) && v == 0, "SO_ERROR cleared by reading it");
	rclose(fd);

	/* two listeners on one port */
	int l1 = listener(&port), l2 = rsocket(AF_INET, SOCK_STREAM, 0);
	a = vt_lo_addr(port);
	errno = 0;
	CHECK(rbind(l2, (struct sockaddr *)&a, sizeof(a)) == -1 ? errno == EADDRINUSE :
								  rlisten(l2, 1) == -1 && errno == EADDRINUSE,
	      "a second listener on the port -> EADDRINUSE\t(%s)", strerror(errno));
	rclose(l2);
	rclose(l1);
}

/* ---- connect, names, data ---------------------------------------------------- */

/* a blocking rrecv in a thread of its own: what it returned, and errno */
struct dg_recv {
	int fd;
	ssize_t ret;
	int err;
	char buf[64];
};

static void *dg_recv_thread(void *arg)
{
	struct dg_recv *r = arg;

	r->ret = rrecv(r->fd, r->buf, sizeof(r->buf), 0);
	r->err = errno;
	return NULL;
}

/* joins t if it ends within ms milliseconds */
static bool dg_join_within(pthread_t t, int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return pthread_timedjoin_np(t, NULL, &ts) == 0;
}

/* Datagram rsockets: round trips with data and source checked, the UDP
 * resolution (first datagram) and the UD path after it, rpoll, errors. */
static void test_dgram(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) }, ca, from;
	socklen_t len;
	char buf[4096], big[3000];
	int srv, cli, ok = 1;

	SECTION("datagram rsockets");
	srv = rsocket(AF_INET, SOCK_DGRAM, 0);
	cli = rsocket(AF_INET, SOCK_DGRAM, 0);
	CHECK(srv >= 0 && cli >= 0, "rsocket(SOCK_DGRAM) x 2");
	if (srv < 0 || cli < 0)
		return;
	errno = 0;
	CHECK(rrecv(srv, buf, sizeof(buf), MSG_DONTWAIT) == -1 && errno == EINVAL,
	      "rrecv before bind/connect/send -> EINVAL (as rdma-core)");
	errno = 0;
	CHECK(rsend(cli, "x", 1, 0) == -1 && errno == EDESTADDRREQ, "rsend without a destination -> EDESTADDRREQ");
	CHECK(rbind(srv, (struct sockaddr *)&sa, sizeof(sa)) == 0, "rbind 127.0.0.1:0");
	len = sizeof(sa);
	CHECK(rgetsockname(srv, (struct sockaddr *)&sa, &len) == 0 && sa.sin_port != 0, "rgetsockname: a port");
	errno = 0;
	CHECK(rlisten(srv, 1) == -1 && errno == EOPNOTSUPP, "rlisten -> EOPNOTSUPP");
	errno = 0;
	CHECK(rrecv(srv, buf, sizeof(buf), MSG_DONTWAIT) == -1 && errno == EAGAIN, "nothing yet: EAGAIN");
	struct pollfd pf = { .fd = srv, .events = POLLIN | POLLOUT };
	CHECK(rpoll(&pf, 1, 0) == 1 && pf.revents == POLLOUT, "rpoll: POLLOUT, no POLLIN before data");

	/* 200 datagrams each way, every byte checked: the first ones go over
	 * UDP, the rest as UD sends once the QPNs are known.  Up to 1000 B:
	 * a UD datagram is at most the path MTU (rxe0's active MTU is 1024,
	 * less the 8-byte header; larger sends fail with EMSGSIZE) */
	for (int i = 0; i < 200 && ok; i++) {
		int n = 1 + (i * 37) % 1000;
		for (int k = 0; k < n; k++)
			big[k] = (char)(i + k);
		if (rsendto(cli, big, (size_t)n, 0, (struct sockaddr *)&sa, sizeof(sa)) != n) {
			ok = 0;
			break;
		}
		pf.events = POLLIN;
		if (rpoll(&pf, 1, 5000) != 1 || !(pf.revents & POLLIN)) {
			ok = 0;
			break;
		}
		len = sizeof(from);
		if (rrecvfrom(srv, buf, sizeof(buf), 0, (struct sockaddr *)&from, &len) != n ||
		    memcmp(buf, big, (size_t)n) || len != sizeof(from) || from.sin_family != AF_INET ||
		    from.sin_addr.s_addr != htonl(INADDR_LOOPBACK))
			ok = 0;
		/* echo back to the source recvfrom reported */
		if (ok && (rsendto(srv, buf, (size_t)n, 0, (struct sockaddr *)&from, len) != n ||
			   rrecv(cli, buf, sizeof(buf), 0) != n || memcmp(buf, big, (size_t)n)))
			ok = 0;
	}
	CHECK(ok, "200 datagrams of 1..1000 B each way, data and source address checked");
	len = sizeof(ca);
	CHECK(rgetsockname(cli, (struct sockaddr *)&ca, &len) == 0 && ca.sin_port == from.sin_port,
	      "recvfrom's source is the sender's bound port");
	errno = 0;
	CHECK(rsendto(cli, big, 2033, 0, (struct sockaddr *)&sa, sizeof(sa)) == -1 && errno == EMSGSIZE,
	      "2033 B (over 2032 or the port MTU) -> EMSGSIZE");
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	errno = 0;
	CHECK(rsendto(cli, "x", 1, 0, (struct sockaddr *)&s6, sizeof(s6)) == -1 && errno == EAFNOSUPPORT,
	      "an IPv6 destination on an AF_INET socket -> EAFNOSUPPORT");
	errno = 0;
	CHECK(rsendto(cli, "x", 1, 0, (struct sockaddr *)&sa, 3) == -1 && errno == EINVAL, "a short address -> EINVAL");

	/* connect + send/recv, a burst read non-blocking */
	CHECK(rconnect(cli, (struct sockaddr *)&sa, sizeof(sa)) == 0, "rconnect sets a default destination");
	int sent = 0, got = 0;
	for (int i = 0; i < 50; i++)
		if (rsend(cli, &i, sizeof(i), 0) == sizeof(i))
			sent++;
	for (int tries = 0; got < sent && tries < 2000; tries++) {
		int v;
		ssize_t r = rrecv(srv, &v, sizeof(v), MSG_DONTWAIT);
		if (r == sizeof(v) && v == got)
			got++;
		else if (r < 0 && errno == EAGAIN)
			usleep(1000);
		else
			break;
	}
	CHECK(sent == 50 && got == 50, "50 rsends after rconnect read in order without blocking (%d/%d)", got, sent);
	struct sockaddr_in peer;
	len = sizeof(peer);
	CHECK(rgetpeername(cli, (struct sockaddr *)&peer, &len) == 0 && peer.sin_port == sa.sin_port,
	      "rgetpeername after rconnect");
	int type = 0;
	len = sizeof(type);
	CHECK(rgetsockopt(srv, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_DGRAM, "SO_TYPE: SOCK_DGRAM");

	/* two threads on one socket: a blocking rrecv does not hold the
	 * socket against an rsend from another thread */
	struct dg_recv r = { .fd = cli, .ret = -2 };
	pthread_t t;
	bool joined;
	pthread_create(&t, NULL, dg_recv_thread, &r);
	usleep(20000);
	len = sizeof(from);
	ok = rsend(cli, "ping", 4, 0) == 4 &&
	     rrecvfrom(srv, buf, sizeof(buf), 0, (struct sockaddr *)&from, &len) == 4 &&
	     rsendto(srv, "pong", 4, 0, (struct sockaddr *)&from, len) == 4;
	joined = dg_join_within(t, 5000);
	CHECK(ok && joined && r.ret == 4 && !memcmp(r.buf, "pong", 4),
	      "a thread blocked in rrecv gets the answer to another thread's rsend on the socket (ret %zd)", r.ret);
	if (!joined)
		return; /* the thread still uses cli: leave both open */

	/* rclose wakes a thread blocked on the socket: EBADF, not a hang */
	r = (struct dg_recv){ .fd = srv, .ret = -2 };
	pthread_create(&t, NULL, dg_recv_thread, &r);
	usleep(20000);
	CHECK(rclose(srv) == 0, "rclose while another thread is blocked in rrecv on it");
	joined = dg_join_within(t, 5000);
	CHECK(joined && r.ret == -1 && r.err == EBADF, "the blocked rrecv returns -1 EBADF (ret %zd, %s)", r.ret,
	      strerror(r.err));
	CHECK(rclose(cli) == 0, "rclose the other");
	errno = 0;
	CHECK(rclose(srv) == -1 && errno == EBADF, "rclose again -> EBADF");
}

/* A kernel UDP socket on 127.0.0.1 posing as a datagram rsocket: its
 * resolution message (rdma-core's 16-byte header, op data, a made-up QPN)
 * and payload sent to to. */
static int dg_fake_peer(const struct sockaddr_in *to, uint32_t qpn, const char *payload)
{
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	uint8_t m[64] = { 0x55,
			  0x55,
			  0x55,
			  0x55,
			  4,
			  0,
			  16,
			  0,
			  (uint8_t)(qpn >> 24),
			  (uint8_t)(qpn >> 16),
			  (uint8_t)(qpn >> 8),
			  (uint8_t)qpn,
			  127,
			  0,
			  0,
			  1 };
	size_t n = strlen(payload);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	memcpy(m + 16, payload, n);
	if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof(me)) ||
	    sendto(fd, m, 16 + n, 0, (const struct sockaddr *)to, sizeof(*to)) != (ssize_t)(16 + n)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* What the fake peer fd gets within ms: the op of an rsocket resolution
 * message (0 data, 7 control), -1 for nothing or something else. */
static int dg_fake_peer_recv(int fd, int ms)
{
	uint8_t b[2048];
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, ms) != 1)
		return -1;
	ssize_t n = recv(fd, b, sizeof(b), 0);
	if (n < 16 || b[0] != 0x55 || b[1] != 0x55 || b[2] != 0x55 || b[3] != 0x55)
		return -1;
	return b[5];
}

/* Datagram rsockets: peers learnt from datagrams the application never
 * sent to are bounded (1024): past that the oldest is forgotten, and an
 * answer to it resolves it again over UDP. */
static void test_dgram_peers(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) }, from;
	socklen_t len = sizeof(sa);
	char buf[64];
	int srv, first, last = -1, got = 0, sent = 0;

	SECTION("datagram rsockets: peers learnt from spoofed datagrams are bounded");
	srv = rsocket(AF_INET, SOCK_DGRAM, 0);
	if (!CHECK(srv >= 0 && rbind(srv, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
			   rgetsockname(srv, (struct sockaddr *)&sa, &len) == 0,
		   "a datagram rsocket bound on 127.0.0.1"))
		return;
	first = dg_fake_peer(&sa, 0x123456, "hi");
	len = sizeof(from);
	CHECK(first >= 0 && rrecvfrom(srv, buf, sizeof(buf), 0, (struct sockaddr *)&from, &len) == 2 &&
		      !memcmp(buf, "hi", 2),
	      "a resolution message from a plain UDP socket is read as a datagram");
	CHECK(dg_fake_peer_recv(first, 2000) == 7, "and answered with a control message (our QPN)");

	/* 1100 more peers, each from a port of its own, one at a time (a
	 * burst would overflow the UDP socket's buffer, as UDP may) */
	for (int i = 0; i < 1100; i++) {
		int fd = dg_fake_peer(&sa, 0x200000 + (uint32_t)i, "x");
		struct pollfd p = { .fd = srv, .events = POLLIN };
		if (fd < 0)
			break;
		sent++;
		if (rpoll(&p, 1, 2000) == 1 && rrecv(srv, buf, sizeof(buf), MSG_DONTWAIT) == 1)
			got++;
		if (i == 1099)
			last = fd;
		else
			close(fd);
	}
	CHECK(sent == 1100 && got == sent, "1100 more fake peers' datagrams read (%d of %d)", got, sent);
	CHECK(last >= 0 && dg_fake_peer_recv(last, 2000) == 7, "the last one answered too");

	/* the first was forgotten: an answer to it goes over UDP again */
	len = sizeof(from);
	getsockname(first, (struct sockaddr *)&from, &len);
	CHECK(rsendto(srv, "back", 4, 0, (struct sockaddr *)&from, len) == 4 && dg_fake_peer_recv(first, 2000) == 0,
	      "the oldest peer was forgotten: an answer to it is resolved again over UDP");
	/* the last is still known: the answer is a UD send to its QPN */
	len = sizeof(from);
	getsockname(last, (struct sockaddr *)&from, &len);
	CHECK(rsendto(srv, "back", 4, 0, (struct sockaddr *)&from, len) == 4 && dg_fake_peer_recv(last, 300) == -1,
	      "the newest is remembered: its answer goes over UD, not UDP");
	close(first);
	if (last >= 0)
		close(last);
	CHECK(rclose(srv) == 0, "rclose");
}

static void test_names(void)
{
	int s, c, v;
	struct sockaddr_in ca, cp, sa, sp;
	socklen_t len;

	SECTION("connect, accept, names");
	if (!pair(&s, &c))
		return;
	int r1, r2, r3, r4;
	len = sizeof(cp);
	r1 = rgetpeername(c, (struct sockaddr *)&cp, &len);
	CHECK(!r1 && cp.sin_family == AF_INET && cp.sin_addr.s_addr == htonl(INADDR_LOOPBACK),
	      "client's peer: 127.0.0.1");
	len = sizeof(sa);
	r2 = rgetsockname(s, (struct sockaddr *)&sa, &len);
	CHECK(!r2 && sa.sin_port == cp.sin_port, "server's local port is the client's peer port (%u, %u)",
	      ntohs(sa.sin_port), ntohs(cp.sin_port));
	len = sizeof(ca);
	r3 = rgetsockname(c, (struct sockaddr *)&ca, &len);
	CHECK(!r3 && ca.sin_port != 0, "client has a local port (%u)", ntohs(ca.sin_port));
	len = sizeof(sp);
	r4 = rgetpeername(s, (struct sockaddr *)&sp, &len);
	CHECK(!r4 && sp.sin_port == ca.sin_port, "server's peer port is the client's local port (%u, %u)",
	      ntohs(sp.sin_port), ntohs(ca.sin_port));
	len = 4;
	CHECK(!rgetpeername(s, (struct sockaddr *)&sp, &len) && len == sizeof(sp),
	      "a short address buffer gets the full length back");
	len = 0;
	CHECK(!rgetsockname(s, NULL, &len) && len == sizeof(sp),
	      "no buffer, length 0: just the length, as getsockname(2)\t(%s)", strerror(errno));
	v = 64;
	errno = 0;
	CHECK(rsetsockopt(c, SOL_RDMA, RDMA_SQSIZE, &v, sizeof(v)) == -1 && errno == EINVAL,
	      "SOL_RDMA after connecting -> EINVAL");
	struct sockaddr_in a = vt_lo_addr(1);
	errno = 0;
	CHECK(rconnect(c, (struct sockaddr *)&a, sizeof(a)) == -1 && errno == EISCONN, "rconnect again -> EISCONN");
	v = -1;
	len = sizeof(v);
	CHECK(!rgetsockopt(s, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) && v == 0, "SO_ACCEPTCONN 0 on an accepted one");

	char msg[] = "hello, rsocket", got[64] = { 0 };
	CHECK_INT(rsend(c, msg, sizeof(msg), 0), sizeof(msg), "rsend a message");
	CHECK_INT(rrecv(s, got, sizeof(got), 0), sizeof(msg), "rrecv it whole");
	CHECK(!memcmp(msg, got, sizeof(msg)), "  same bytes");
	CHECK_INT(rwrite(s, "pong", 4), 4, "rwrite back");
	memset(got, 0, sizeof(got));
	CHECK_INT(rread(c, got, 4), 4, "rread it");
	CHECK(!memcmp(got, "pong", 4), "  same bytes");
	rclose(c);
	rclose(s);

	/* raccept makes the new socket's descriptor in the call, as
	 * rdma-core: librspreload takes a placeholder descriptor just before
	 * raccept and tells sockets apart by which number is lower */
	uint16_t port;
	int l = listener(&port);
	if (!CHECK(l >= 0, "listener\t(%s)", strerror(errno)))
		return;
	c = rsocket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in la = vt_lo_addr(port);
	rfcntl(c, F_SETFL, O_NONBLOCK);
	rconnect(c, (struct sockaddr *)&la, sizeof(la));
	struct pollfd pf = { .fd = l, .events = POLLIN };
	CHECK(rpoll(&pf, 1, 5000) == 1, "the listener has a connection waiting");
	int ph = open("/dev/null", O_RDONLY);
	s = raccept(l, NULL, NULL);
	CHECK(s > ph, "raccept's descriptor comes after one opened just before (%d, %d)", s, ph);
	char b = 'x';
	CHECK(s >= 0 && rsend(s, &b, 1, 0) == 1, "and it works");
	close(ph);
	rclose(c);
	rclose(s);
	rclose(l);
}

static void test_data(void)
{
	int s, c;

	SECTION("data: large transfers, iovecs, PEEK, WAITALL");
	if (!pair(&s, &c))
		return;
	/* 48 MiB one way, random chunk sizes on both ends */
	struct xfer tx = { .fd = c, .len = 48u << 20, .chunk = 300000, .seed = 11 };
	struct xfer rx = { .fd = s, .len = 48u << 20, .chunk = 200000, .seed = 11 };
	pthread_t t;
	uint64_t t0 = vt_now_ms();
	pthread_create(&t, NULL, send_thread, &tx);
	recv_thread(&rx);
	pthread_join(t, NULL);
	CHECK(tx.ok && rx.ok, "48 MiB client -> server, verified (first bad byte %ld)", rx.bad);
	NOTE("48 MiB in %llu ms", (unsigned long long)(vt_now_ms() - t0));

	/* both ways at once, a sender and a receiver thread on each socket */
	struct xfer a1 = { .fd = c, .len = 16u << 20, .chunk = 70000, .seed = 21 };
	struct xfer a2 = { .fd = s, .len = 16u << 20, .chunk = 50000, .seed = 21 };
	struct xfer b1 = { .fd = s, .len = 16u << 20, .chunk = 90000, .seed = 22 };
	struct xfer b2 = { .fd = c, .len = 16u << 20, .chunk = 3000, .seed = 22 };
	pthread_t th[4];
	pthread_create(&th[0], NULL, send_thread, &a1);
	pthread_create(&th[1], NULL, recv_thread, &a2);
	pthread_create(&th[2], NULL, send_thread, &b1);
	pthread_create(&th[3], NULL, recv_thread, &b2);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	CHECK(a1.ok && a2.ok, "16 MiB client -> server while ... (bad %ld)", a2.bad);
	CHECK(b1.ok && b2.ok, "... 16 MiB server -> client, two threads per socket (bad %ld)", b2.bad);

	/* scatter/gather */
	char x1[3] = "abc", x2[1000], x3[5] = "12345";
	struct iovec wv[3] = { { x1, 3 }, { x2, sizeof(x2) }, { x3, 5 } };
	vt_fill(x2, sizeof(x2), 5);
	CHECK_INT(rwritev(c, wv, 3), 1008, "rwritev 3 + 1000 + 5 bytes");
	char peek[8] = { 0 };
	CHECK_INT(rrecv(s, peek, 4, MSG_PEEK), 4, "MSG_PEEK 4 bytes");
	CHECK(!memcmp(peek, "abc", 3) && peek[3] == x2[0], "  the first four");
	char y1[500], y2[508];
	struct iovec rv[2] = { { y1, sizeof(y1) }, { y2, sizeof(y2) } };
	struct msghdr mh = { .msg_iov = rv, .msg_iovlen = 2 };
	CHECK_INT(rrecvmsg(s, &mh, MSG_WAITALL), 1008, "rrecvmsg MSG_WAITALL into 500 + 508 (peek consumed nothing)");
	CHECK(!memcmp(y1, "abc", 3) && !memcmp(y1 + 3, x2, 497) && !memcmp(y2, x2 + 497, 503) &&
		      !memcmp(y2 + 503, "12345", 5),
	      "  bytes in order across the iovecs");
	struct msghdr sm = { .msg_iov = wv, .msg_iovlen = 3 };
	CHECK_INT(rsendmsg(s, &sm, 0), 1008, "rsendmsg back");
	char z[1008];
	struct iovec zv[1] = { { z, sizeof(z) } };
	size_t got = 0;
	while (got < sizeof(z)) {
		zv[0].iov_base = z + got;
		zv[0].iov_len = sizeof(z) - got;
		ssize_t r = rreadv(c, zv, 1);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	CHECK(got == sizeof(z) && !memcmp(z, "abc", 3) && !memcmp(z + 3, x2, 1000), "rreadv gets them");
	errno = 0;
	CHECK(rsendto(c, "x", 1, 0, (struct sockaddr *)&(struct sockaddr_in){ .sin_family = AF_INET },
		      sizeof(struct sockaddr_in)) == -1 &&
		      errno == EISCONN,
	      "rsendto with an address on a stream -> EISCONN");
	CHECK_INT(rsend(c, "", 0, 0), 0, "rsend of 0 bytes -> 0");
	CHECK_INT(rrecv(s, z, 0, 0), 0, "rrecv of 0 bytes -> 0 at once, nothing queued");
	rclose(c);
	rclose(s);
}

/* ---- non-blocking, rpoll, rselect ------------------------------------------------ */

static void small_bufs(int fd)
{
	int v = 16384;
	rsetsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	rsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
}

static void *late_send(void *arg)
{
	vt_sleep_ms(150);
	rsend(*(int *)arg, "late", 4, 0);
	return NULL;
}

static void test_nonblocking(void)
{
	int s, c, p[2];
	char b[64];

	SECTION("non-blocking calls, rpoll, rselect");
	if (!pair_opts(&s, &c, small_bufs, small_bufs))
		return;
	errno = 0;
	CHECK(rrecv(s, b, sizeof(b), MSG_DONTWAIT) == -1 && errno == EAGAIN, "rrecv MSG_DONTWAIT, no data -> EAGAIN");
	rfcntl(s, F_SETFL, O_NONBLOCK);
	errno = 0;
	CHECK(rrecv(s, b, sizeof(b), 0) == -1 && errno == EAGAIN, "rrecv on an O_NONBLOCK socket -> EAGAIN");
	rfcntl(s, F_SETFL, 0);

	/* fill: the peer does not read */
	size_t cap = 64u << 20, sent = 0;
	uint8_t *buf = malloc(cap);
	vt_fill(buf, cap, 77);
	int r = 0;
	while (sent < cap) {
		r = (int)rsend(c, buf + sent, 8192, MSG_DONTWAIT);
		if (r <= 0)
			break;
		sent += (size_t)r;
	}
	CHECK(r == -1 && errno == EAGAIN, "rsend MSG_DONTWAIT until EAGAIN (%s)", strerror(errno));
	CHECK(sent > 0 && sent < (1u << 20), "  after %zu bytes: the buffers are small", sent);
	struct pollfd pf = { .fd = c, .events = POLLOUT };
	CHECK_INT(rpoll(&pf, 1, 0), 0, "rpoll POLLOUT on the full socket, timeout 0 -> 0");
	long bad = -1;
	CHECK(recv_all(s, sent, 77, 5000, &bad), "the peer reads all %zu bytes, verified", sent);
	pf.revents = 0;
	r = rpoll(&pf, 1, 2000);
	CHECK(r == 1 && (pf.revents & POLLOUT), "POLLOUT again once read (rpoll %d, revents 0x%x)", r, pf.revents);
	CHECK_INT(rsend(c, buf, 100, MSG_DONTWAIT), 100, "rsend works again");
	CHECK(recv_all(s, 100, 77, 100, &bad), "  and arrives");
	free(buf);

	/* timeouts */
	pf = (struct pollfd){ .fd = s, .events = POLLIN };
	uint64_t t0 = vt_now_ms();
	CHECK_INT(rpoll(&pf, 1, 0), 0, "rpoll timeout 0, nothing to read -> 0");
	CHECK(vt_now_ms() - t0 < 100, "  at once");
	t0 = vt_now_ms();
	CHECK_INT(rpoll(&pf, 1, 300), 0, "rpoll timeout 300 ms, nothing -> 0");
	uint64_t dt = vt_now_ms() - t0;
	CHECK(dt >= 250 && dt < 3000, "  after about 300 ms (%llu)", (unsigned long long)dt);

	/* mixed with a pipe */
	if (!pipe(p)) {
		struct pollfd m[3] = { { .fd = s, .events = POLLIN },
				       { .fd = -1, .events = POLLIN },
				       { .fd = p[0], .events = POLLIN } };
		CHECK(write(p[1], "z", 1) == 1, "write to a pipe");
		r = rpoll(m, 3, 2000);
		CHECK(r == 1 && m[2].revents == POLLIN && m[0].revents == 0 && m[1].revents == 0,
		      "rpoll over rsocket, -1 and pipe: the pipe is readable (r %d, 0x%x 0x%x 0x%x)", r, m[0].revents,
		      m[1].revents, m[2].revents);
		CHECK(read(p[0], b, 1) == 1, "  drained");
		pthread_t t;
		pthread_create(&t, NULL, late_send, &c);
		t0 = vt_now_ms();
		r = rpoll(m, 3, -1);
		dt = vt_now_ms() - t0;
		CHECK(r == 1 && (m[0].revents & POLLIN) && !m[2].revents,
		      "rpoll(-1) wakes for data on the rsocket (r %d, 0x%x 0x%x)", r, m[0].revents, m[2].revents);
		CHECK(dt >= 100 && dt < 3000, "  when it came (%llu ms)", (unsigned long long)dt);
		pthread_join(t, NULL);

		fd_set rd, wr;
		FD_ZERO(&rd);
		FD_ZERO(&wr);
		FD_SET(s, &rd);
		FD_SET(p[0], &rd);
		FD_SET(c, &wr);
		int nfds = (s > p[0] ? s : p[0]) > c ? (s > p[0] ? s : p[0]) + 1 : c + 1;
		struct timeval tv = { 2, 0 };
		r = rselect(nfds, &rd, &wr, NULL, &tv);
		CHECK(r == 2 && FD_ISSET(s, &rd) && !FD_ISSET(p[0], &rd) && FD_ISSET(c, &wr),
		      "rselect: the rsocket with data readable, the client writable, the pipe not (%d)", r);
		CHECK_INT(rrecv(s, b, sizeof(b), 0), 4, "  the late message");
		FD_ZERO(&rd);
		FD_SET(s, &rd);
		tv = (struct timeval){ 0, 100000 };
		CHECK_INT(rselect(s + 1, &rd, NULL, NULL, &tv), 0, "rselect times out (100 ms)");
		close(p[0]);
		close(p[1]);
	}
	rclose(c);
	rclose(s);
}

/* iperf3 reads TCP_INFO in its SIGINT/SIGTERM handler, which may
 * interrupt its own thread inside an rsocket call that holds the
 * socket's lock: the handler must not wait for that lock for ever. */
static int tcpinfo_fd;
static volatile sig_atomic_t tcpinfo_calls, tcpinfo_ok;

static void tcpinfo_handler(int sig)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int e = errno;

	(void)sig;
	if (!rgetsockopt(tcpinfo_fd, IPPROTO_TCP, TCP_INFO, &ti, &len) && ti.tcpi_state == 1)
		tcpinfo_ok++;
	tcpinfo_calls++;
	errno = e;
}

static void test_tcp_info_in_handler(void)
{
	int s, c, v;
	socklen_t len = sizeof(v);

	SECTION("rgetsockopt(TCP_INFO) from a signal handler that interrupted an rsocket call");
	if (!pair(&s, &c))
		return;
	CHECK(!rgetsockopt(c, SOL_SOCKET, SO_DOMAIN, &v, &len) && v == AF_INET, "SO_DOMAIN: AF_INET");
	len = sizeof(v);
	CHECK(!rgetsockopt(c, SOL_SOCKET, SO_PROTOCOL, &v, &len) && v == IPPROTO_TCP, "SO_PROTOCOL: IPPROTO_TCP");
	tcpinfo_fd = c;
	struct sigaction sa = { .sa_handler = tcpinfo_handler }, old;
	sigaction(SIGALRM, &sa, &old);
	/* every 5 ms: most land inside rpoll's locked part */
	struct itimerval it = { { 0, 5000 }, { 0, 5000 } }, off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &it, NULL);
	uint64_t t0 = vt_now_ms();
	long rounds = 0;
	/* as iperf3's select loop: rpoll without waiting, over and over */
	while (vt_now_ms() - t0 < 300) {
		struct pollfd pf = { .fd = c, .events = POLLIN };
		rpoll(&pf, 1, 0);
		rounds++;
	}
	setitimer(ITIMER_REAL, &off, NULL);
	sigaction(SIGALRM, &old, NULL);
	CHECK(tcpinfo_calls > 0 && tcpinfo_ok == tcpinfo_calls,
	      "%d handler calls during %ld rpolls, each got TCP_INFO (established)", (int)tcpinfo_calls, rounds);
	rclose(c);
	rclose(s);
}

/* A reader that waits only in rpoll while the peer streams.  Before it
 * sleeps, rpoll arms the socket's CQ and looks once more; a completion
 * that came just then (a send's, a credit update) consumed the arming's
 * event, and the sleep that followed missed all later ones until the
 * 500 ms safety net: iperf3 and select()-driven programs over
 * librspreload stalled that way in half their runs. */
static void rpoll_stream(bool busy_writer)
{
	enum {
		LEN = 64 << 20,
		CHUNK = 128 << 10
	};
	int s, c;

	if (busy_writer)
		SECTION("a stream read through rpoll(-1) while another thread sends on the socket: no wake-up lost");
	else
		SECTION("a stream read through rpoll(-1): no wake-up lost");
	if (!pair_opts(&s, &c, NULL, NULL))
		return;
	struct xfer tx = { .fd = c, .len = LEN, .chunk = CHUNK, .seed = 91 };
	/* the other way at the same time: a thread sending on the reader's
	 * socket processes its completions too, the reader's among them */
	struct xfer bw = { .fd = s, .len = 8 << 20, .chunk = 4096, .seed = 92 };
	struct xfer br = { .fd = c, .len = 8 << 20, .chunk = 65536, .seed = 92 };
	pthread_t t, tw, tr;
	pthread_create(&t, NULL, send_thread, &tx);
	if (busy_writer) {
		pthread_create(&tw, NULL, send_thread, &bw);
		pthread_create(&tr, NULL, recv_thread, &br);
	}
	uint8_t *buf = malloc(LEN);
	size_t off = 0;
	uint64_t longest = 0, polls = 0;
	size_t longest_at = 0;
	bool ok = true;
	while (off < LEN && ok) {
		struct pollfd pf = { .fd = s, .events = POLLIN };
		uint64_t t0 = vt_now_ms();
		int r = rpoll(&pf, 1, -1);
		uint64_t dt = vt_now_ms() - t0;
		polls++;
		/* the first wait is for the writer to fill its 64 MiB */
		if (off && dt > longest) {
			longest = dt;
			longest_at = off;
		}
		if (r != 1) {
			ok = CHECK(false, "rpoll(-1) returns the readable socket\t(%d, %s)", r, strerror(errno));
			break;
		}
		while (off < LEN) {
			ssize_t n = rrecv(s, buf + off, LEN - off < CHUNK ? LEN - off : CHUNK, MSG_DONTWAIT);
			if (n > 0) {
				off += (size_t)n;
				continue;
			}
			if (n < 0 && errno == EAGAIN)
				break;
			ok = CHECK(false, "rrecv after POLLIN\t(%zd, %s)", n, strerror(errno));
			break;
		}
	}
	pthread_join(t, NULL);
	CHECK(tx.ok, "the writer sent %d MiB", LEN >> 20);
	if (busy_writer) {
		pthread_join(tw, NULL);
		pthread_join(tr, NULL);
		CHECK(bw.ok && br.ok, "8 MiB the other way, verified");
	}
	CHECK(ok && off == LEN && vt_verify(buf, LEN, 91) < 0, "the reader got them, verified (%zu bytes)", off);
	/* a lost wake-up ends only at the 500 ms safety net (with the busy
	 * writer: its blocking calls took the completion event rpoll slept
	 * for, 9 runs in 20, until rpoll's sleepers were kicked as well) */
	CHECK(longest < 450, "no rpoll waited for the safety net: longest %llu ms in %llu calls (at byte %zu)",
	      (unsigned long long)longest, (unsigned long long)polls, longest_at);
	free(buf);
	rclose(c);
	rclose(s);
}

static void test_rpoll_stream(void)
{
	rpoll_stream(false);
	rpoll_stream(true);
}

/* ---- shutdown and close -------------------------------------------------------------- */

static void *close_after_send(void *arg)
{
	int fd = *(int *)arg;
	send_all(fd, 3u << 20, 99, 1u << 20);
	rclose(fd);
	return NULL;
}

static void test_shutdown(void)
{
	int s, c, v;
	char b[16];
	long bad = -1;

	SECTION("shutdown, close, EOF");
	if (!pair(&s, &c))
		return;
	CHECK(send_all(c, 100000, 3, 7000), "client sends 100000 bytes");
	CHECK(!rshutdown(c, SHUT_WR), "client rshutdown(SHUT_WR)");
	errno = 0;
	CHECK(rsend(c, "x", 1, 0) == -1 && errno == EPIPE, "rsend after SHUT_WR -> EPIPE (%s)", strerror(errno));
	CHECK(recv_all(s, 100000, 3, 9000, &bad), "server reads the 100000 bytes");
	struct pollfd pf = { .fd = s, .events = POLLIN };
	CHECK(rpoll(&pf, 1, 2000) == 1 && (pf.revents & POLLIN), "server: POLLIN for the end of stream");
	CHECK_INT(rrecv(s, b, sizeof(b), 0), 0, "server rrecv -> 0 (EOF)");
	CHECK_INT(rrecv(s, b, sizeof(b), 0), 0, "  and again");
	CHECK(send_all(s, 50000, 4, 5000), "server still sends (half-close)");
	CHECK(recv_all(c, 50000, 4, 3000, &bad), "client still reads");
	CHECK(!rshutdown(s, SHUT_WR), "server rshutdown(SHUT_WR)");
	CHECK_INT(rrecv(c, b, sizeof(b), 0), 0, "client rrecv -> 0 (EOF)");
	rclose(s);
	pf = (struct pollfd){ .fd = c, .events = POLLIN | POLLOUT };
	CHECK(rpoll(&pf, 1, 2000) == 1 && (pf.revents & POLLHUP), "client: POLLHUP once both ends closed (0x%x)",
	      pf.revents);
	rclose(c);

	/* data sent just before rclose is not lost */
	if (!pair(&s, &c))
		return;
	pthread_t t;
	pthread_create(&t, NULL, close_after_send, &c);
	CHECK(recv_all(s, 3u << 20, 99, 100000, &bad), "3 MiB sent right before rclose all arrive (bad %ld)", bad);
	pthread_join(t, NULL);
	CHECK_INT(rrecv(s, b, sizeof(b), 0), 0, "then EOF");
	errno = 0;
	ssize_t r = rsend(s, "x", 1, 0);
	CHECK(r == -1 && (errno == ECONNRESET || errno == EPIPE), "rsend to a closed peer -> ECONNRESET (%s)",
	      strerror(errno));
	v = 0;
	rclose(s);

	/* SHUT_RDWR on one end: the other gets EOF, its sends fail */
	if (!pair(&s, &c))
		return;
	CHECK(!rshutdown(s, SHUT_RDWR), "server rshutdown(SHUT_RDWR)");
	CHECK_INT(rrecv(c, b, sizeof(b), 0), 0, "client rrecv -> 0");
	errno = 0;
	CHECK(rsend(c, "x", 1, 0) == -1 && errno == ECONNRESET, "client rsend -> ECONNRESET (%s)", strerror(errno));
	CHECK(!rshutdown(c, SHUT_RDWR), "client rshutdown(SHUT_RDWR) on a disconnected socket -> 0");
	rclose(c);
	rclose(s);
	(void)v;
}

/* ---- riomap / riowrite ------------------------------------------------------------------ */

static void iomap4(int fd)
{
	int v = 4;
	rsetsockopt(fd, SOL_RDMA, RDMA_IOMAPSIZE, &v, sizeof(v));
}

static void iomap_round(int s, int c, const char *what)
{
	size_t len = 256u << 10;
	uint8_t *target = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *src = malloc(len + 100);
	char b[8];

	memset(target, 0, len);
	vt_fill(src, len + 100, 41);
	errno = 0;
	CHECK(riomap(c, src, len, PROT_WRITE, 0, 0) == -1 && errno == ENOMEM,
	      "%s: riomap PROT_WRITE where the peer has no iomap -> ENOMEM (%s)", what, strerror(errno));
	off_t off = riomap(s, target, len, PROT_WRITE, 0, 0x10000);
	CHECK(off == 0x10000, "%s: riomap at offset 0x10000 (%lld)", what, (long long)off);
	CHECK_INT(rsend(s, "map", 3, 0), 3, "  a message after it carries the mapping");
	CHECK_INT(rrecv(c, b, 3, MSG_WAITALL), 3, "  the peer gets the message");
	size_t w = riowrite(c, src, len, 0x10000, 0);
	CHECK(w == len, "  riowrite %zu bytes at 0x10000 (%zd)", len, (ssize_t)w);
	CHECK_INT(rsend(c, "done", 4, 0), 4, "  then a message");
	CHECK_INT(rrecv(s, b, 4, MSG_WAITALL), 4, "  which arrives after the data");
	CHECK(vt_verify(target, len, 41) < 0, "  the mapped buffer holds the data (first bad %ld)",
	      vt_verify(target, len, 41));
	w = riowrite(c, src, 1000, 0x10000 + len - 500, 0);
	CHECK(w == 500, "  a write past the mapping's end stops at it (%zd)", (ssize_t)w);
	/* riowrite returns once the write is queued: a message behind it
	 * tells that it has landed, before the mapping goes (a write that
	 * reaches a deregistered region is a remote access error that ends
	 * the connection: both QPs in ERR, which the test then waited on) */
	CHECK_INT(rsend(c, "tail", 4, 0), 4, "  then a message");
	CHECK_INT(rrecv(s, b, 4, MSG_WAITALL), 4, "  which arrives after it");
	errno = 0;
	w = riowrite(c, src, 10, 0x5000, 0);
	CHECK(w == (size_t)-1 && errno == EINVAL, "  riowrite where nothing is mapped -> -1 EINVAL (%s)",
	      strerror(errno));
	CHECK(!riounmap(s, target, len), "  riounmap");
	errno = 0;
	CHECK(riounmap(s, target, len) == -1 && errno == EINVAL, "  riounmap again -> EINVAL");
	off = riomap(s, target, 4096, PROT_NONE, 0, -1);
	CHECK(off == (off_t)(uintptr_t)target, "  riomap PROT_NONE, offset -1: the address");
	CHECK(!riounmap(s, target, 4096), "  riounmap it");
	munmap(target, len);
	free(src);
}

static void test_iomap(void)
{
	int s, c;

	SECTION("riomap, riowrite");
	if (!pair_opts(&s, &c, iomap4, NULL))
		return;
	iomap_round(s, c, "RoCE");
	rclose(c);
	rclose(s);
}

/* A write that reaches a mapping its owner has taken away is a remote
 * access error: the responder's QP goes to ERR with no CM event at all.
 * Both ends must see the connection reset; the owner's reader, whose
 * receives are merely flushed, used to wait for ever. */
static void test_write_after_unmap(void)
{
	int s, c;
	size_t len = 64u << 10;
	char b[8];

	SECTION("riowrite into a mapping the peer has taken away: both ends see a reset, nobody waits for ever");
	if (!pair_opts(&s, &c, iomap4, NULL))
		return;
	uint8_t *target = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *src = calloc(1, len);
	CHECK(riomap(s, target, len, PROT_WRITE, 0, 0) == 0, "riomap at offset 0");
	CHECK_INT(rsend(s, "map", 3, 0), 3, "  a message carries the mapping");
	CHECK_INT(rrecv(c, b, 3, MSG_WAITALL), 3, "  the peer gets it");
	CHECK(!riounmap(s, target, len), "riounmap (the peer is not told)");
	CHECK(riowrite(c, src, len, 0, 0) == len, "the peer's riowrite is queued");
	struct pollfd p = { .fd = s, .events = POLLIN };
	uint64_t t0 = vt_now_ms();
	int n = rpoll(&p, 1, 10000);
	CHECK(n == 1, "the owner's rpoll wakes up (%d, revents 0x%x, after %llu ms)", n, p.revents,
	      (unsigned long long)(vt_now_ms() - t0));
	errno = 0;
	CHECK(rrecv(s, b, sizeof(b), MSG_DONTWAIT) == -1 && errno == ECONNRESET, "  its rrecv -> ECONNRESET (%s)",
	      strerror(errno));
	/* the writer learns it from its write's completion, which may come
	 * after the owner has seen the reset */
	p = (struct pollfd){ .fd = c, .events = POLLIN };
	t0 = vt_now_ms();
	n = rpoll(&p, 1, 10000);
	CHECK(n == 1, "the writer's rpoll wakes up (%d, revents 0x%x, after %llu ms)", n, p.revents,
	      (unsigned long long)(vt_now_ms() - t0));
	errno = 0;
	CHECK(rrecv(c, b, sizeof(b), MSG_DONTWAIT) == -1 && errno == ECONNRESET, "  its rrecv -> ECONNRESET (%s)",
	      strerror(errno));
	rclose(c);
	rclose(s);
	munmap(target, len);
	free(src);
}

/* ---- the iWARP message mode ------------------------------------------------------------- */

static void test_msg_send(void)
{
	int s, c;
	long bad = -1;
	char b[4];

	SECTION("iWARP message mode (writes + sends instead of writes with immediate)");
	setenv("SOFTRDMA_RSOCKET_MSG_SEND", "1", 1);
	bool ok = pair_opts(&s, &c, iomap4, NULL);
	unsetenv("SOFTRDMA_RSOCKET_MSG_SEND");
	if (!ok)
		return;
	struct xfer tx = { .fd = c, .len = 8u << 20, .chunk = 100000, .seed = 51 };
	pthread_t t;
	pthread_create(&t, NULL, send_thread, &tx);
	CHECK(recv_all(s, 8u << 20, 51, 77777, &bad), "8 MiB client -> server, verified (bad %ld)", bad);
	pthread_join(t, NULL);
	CHECK(tx.ok, "  sender done");
	tx = (struct xfer){ .fd = s, .len = 1u << 20, .chunk = 5000, .seed = 52 };
	pthread_create(&t, NULL, send_thread, &tx);
	CHECK(recv_all(c, 1u << 20, 52, 10000, &bad), "1 MiB back in small pieces (bad %ld)", bad);
	pthread_join(t, NULL);
	iomap_round(s, c, "iWARP mode");
	CHECK(!rshutdown(c, SHUT_WR), "rshutdown(SHUT_WR)");
	CHECK_INT(rrecv(s, b, sizeof(b), 0), 0, "  EOF at the peer");
	rclose(c);
	rclose(s);
}

/* ---- many connections, keepalive, a peer that dies ---------------------------------------- */

struct conn_arg {
	uint16_t port;
	int idx;
	bool ok;
};

static void *client_thread(void *arg)
{
	struct conn_arg *a = arg;
	int c = rsocket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = vt_lo_addr(a->port);
	uint32_t v = (uint32_t)a->idx, back = 0;

	a->ok = c >= 0 && !rconnect(c, (struct sockaddr *)&sa, sizeof(sa)) && rsend(c, &v, 4, 0) == 4 &&
		rrecv(c, &back, 4, MSG_WAITALL) == 4 && back == v * 3;
	rclose(c);
	return NULL;
}

static void test_many(void)
{
	enum {
		N = 12
	};
	struct conn_arg a[N];
	pthread_t t[N];
	uint16_t port;
	int l, ok = 0;

	SECTION("%d connections to one listener at once (blocking rconnect from threads)", N);
	l = listener(&port);
	if (!CHECK(l >= 0, "listener"))
		return;
	for (int i = 0; i < N; i++) {
		a[i] = (struct conn_arg){ .port = port, .idx = i };
		pthread_create(&t[i], NULL, client_thread, &a[i]);
	}
	for (int i = 0; i < N; i++) {
		struct sockaddr_in pa;
		socklen_t len = sizeof(pa);
		int s = raccept(l, (struct sockaddr *)&pa, &len);
		uint32_t v;
		if (s < 0)
			break;
		if (pa.sin_family == AF_INET && len == sizeof(pa) && rrecv(s, &v, 4, MSG_WAITALL) == 4) {
			v *= 3;
			if (rsend(s, &v, 4, 0) == 4)
				ok++;
		}
		/* close once the client is done with it */
		char b;
		rrecv(s, &b, 1, 0);
		rclose(s);
	}
	int cok = 0;
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		cok += a[i].ok;
	}
	CHECK(ok == N && cok == N, "all %d served and answered (server %d, clients %d)", N, ok, cok);
	rclose(l);
}

static void test_keepalive(void)
{
	int s, c, v = 1;
	socklen_t len = sizeof(v);
	long bad = -1;

	SECTION("keepalive");
	if (!pair(&s, &c))
		return;
	CHECK(!rsetsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof(v)), "SO_KEEPALIVE on");
	v = 1;
	CHECK(!rsetsockopt(c, IPPROTO_TCP, TCP_KEEPIDLE, &v, sizeof(v)), "TCP_KEEPIDLE 1 s");
	v = 0;
	CHECK(!rgetsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &v, &len) && v == 1, "SO_KEEPALIVE reads 1");
	vt_sleep_ms(2300); /* two keepalives go out */
	CHECK(send_all(c, 100000, 61, 20000) && recv_all(s, 100000, 61, 30000, &bad),
	      "data still flows after keepalives");
	v = 0;
	CHECK(!rsetsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof(v)), "SO_KEEPALIVE off");
	rclose(c);
	rclose(s);
}

/* ---- the wire, from an independent implementation of the protocol -------------------- */

/* The layout rdma-core's docs/rsocket and rsocket.c give (all fields in
 * network order in the private data). */
struct wire_sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};
struct wire_conn {
	uint8_t version, flags;
	uint16_t credits;
	uint8_t reserved[3], target_iomap_size;
	struct wire_sge target_sgl, data_buf;
};

static struct rdma_cm_event *wire_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev = NULL;

	if (poll(&p, 1, 5000) != 1 || rdma_get_cm_event(ch, &ev))
		return NULL;
	if (ev->event != want) {
		NOTE("event %s, wanted %s (status %d)", rdma_event_str(ev->event), rdma_event_str(want), ev->status);
		rdma_ack_cm_event(ev);
		return NULL;
	}
	return ev;
}

static int wire_post_recv(struct ibv_qp *qp)
{
	struct ibv_recv_wr wr = { .wr_id = 1 }, *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

/* an RDMA write with immediate, the rsocket message in the immediate */
static int wire_write_imm(struct ibv_qp *qp, void *buf, uint32_t len, uint32_t lkey, uint64_t addr, uint32_t rkey,
			  uint32_t msg)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = 2,
				  .sg_list = &sge,
				  .num_sge = len ? 1 : 0,
				  .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
				  .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htobe32(msg) },
			   *bad;
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* the next receive completion's immediate, reposting its WR; -1 on timeout */
static long wire_next_msg(struct ibv_cq *cq, struct ibv_qp *qp)
{
	struct ibv_wc wc;
	uint64_t t0 = vt_now_ms();

	while (vt_now_ms() - t0 < 5000) {
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			return -1;
		if (!n)
			continue;
		if (wc.status != IBV_WC_SUCCESS) {
			NOTE("completion status %s", ibv_wc_status_str(wc.status));
			return -1;
		}
		if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
			wire_post_recv(qp);
			return (long)be32toh(wc.imm_data);
		}
	}
	return -1;
}

static void rq64(int fd)
{
	int v = 64;
	rsetsockopt(fd, SOL_RDMA, RDMA_RQSIZE, &v, sizeof(v));
	v = 32768;
	rsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
}

static void test_wire(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	struct rdma_cm_event *ev;
	struct wire_conn req, rep;
	uint16_t port;
	int l, s = -1;
	char b[64];
	enum {
		RBUF = 65536
	};

	SECTION("the wire, as rdma-core's rsocket protocol describes it (a raw rdma_cm + verbs peer)");
	l = listener(&port);
	if (!CHECK(l >= 0 && ch, "listener and a channel"))
		return;
	rq64(l);
	struct sockaddr_in a = vt_lo_addr(port);
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 2000);
	if ((ev = wire_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED)))
		rdma_ack_cm_event(ev);
	rdma_resolve_route(id, 2000);
	if ((ev = wire_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED)))
		rdma_ack_cm_event(ev);
	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_cq *cq = ibv_create_cq(id->verbs, 64, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 }
	};
	if (!CHECK(pd && cq && !rdma_create_qp(id, pd, &qa), "raw peer: PD, CQ, QP"))
		return;
	struct wire_sge *target = calloc(2, sizeof(*target));
	uint8_t *rbuf = calloc(1, RBUF), *sbuf = calloc(1, RBUF);
	struct ibv_mr *tmr =
		ibv_reg_mr(pd, target, 2 * sizeof(*target), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_mr *rmr = ibv_reg_mr(pd, rbuf, RBUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_mr *smr = ibv_reg_mr(pd, sbuf, RBUF, IBV_ACCESS_LOCAL_WRITE);
	for (int i = 0; i < 16; i++)
		wire_post_recv(id->qp);

	memset(&req, 0, sizeof(req));
	req.version = 1;
	req.flags = 2; /* RS_CONN_FLAG_IOMAP, little-endian host */
	req.credits = htobe16(16);
	req.target_sgl.addr = htobe64((uintptr_t)target);
	req.target_sgl.key = htobe32(tmr->rkey);
	req.target_sgl.length = htobe32(2);
	req.data_buf.addr = htobe64((uintptr_t)rbuf);
	req.data_buf.key = htobe32(rmr->rkey);
	req.data_buf.length = htobe32(RBUF / 2);
	struct rdma_conn_param cp = { .private_data = &req,
				      .private_data_len = sizeof(req),
				      .flow_control = 1,
				      .retry_count = 7,
				      .rnr_retry_count = 7 };
	CHECK(sizeof(req) == 40 && !rdma_connect(id, &cp), "raw peer connects with a 40-byte rs_conn_data");
	s = raccept(l, NULL, NULL);
	CHECK(s >= 0, "the rsocket listener accepts it");
	ev = wire_event(ch, RDMA_CM_EVENT_ESTABLISHED);
	if (!CHECK(ev && ev->param.conn.private_data_len >= sizeof(rep), "ESTABLISHED with the REP's private data"))
		goto out;
	memcpy(&rep, ev->param.conn.private_data, sizeof(rep));
	rdma_ack_cm_event(ev);
	CHECK(rep.version == 1 && (rep.flags & 2) && !(rep.flags & 1), "REP: version 1, IOMAP flag, little-endian");
	CHECK_INT(be16toh(rep.credits), 64, "REP: credits = the listener's RDMA_RQSIZE");
	CHECK_INT(be32toh(rep.target_sgl.length), 2, "REP: a target SGL of 2 entries");
	CHECK_INT(be32toh(rep.data_buf.length), 65536, "REP: a receive buffer of 2 x SO_RCVBUF");
	CHECK(rep.target_sgl.addr && rep.data_buf.addr, "REP: addresses set");

	/* data: a write with immediate, op 0 (data) and the length */
	memcpy(sbuf, "hello wire", 10);
	uint64_t daddr = be64toh(rep.data_buf.addr);
	uint32_t dkey = be32toh(rep.data_buf.key);
	CHECK(!wire_write_imm(id->qp, sbuf, 10, smr->lkey, daddr, dkey, 10), "raw peer writes 10 bytes, imm DATA|10");
	memset(b, 0, sizeof(b));
	CHECK(rrecv(s, b, sizeof(b), 0) == 10 && !memcmp(b, "hello wire", 10), "the rsocket reads them");
	daddr += 10;

	/* data back: lands at the start of our data_buf, imm DATA|5 */
	CHECK_INT(rsend(s, "reply", 5, 0), 5, "the rsocket sends 5 bytes");
	long m = wire_next_msg(cq, id->qp);
	CHECK(m == 5 && !memcmp(rbuf, "reply", 5), "raw peer: imm 0x%lx (DATA|5), bytes at its data_buf", m);

	/* 9 x 4 KiB: once half of its buffer is read, the rsocket offers it
	 * again in our target SGL entry 1 with an SGL message (credits =
	 * messages read + RQ size) */
	vt_fill(sbuf, 9 * 4096, 33);
	for (int i = 0; i < 9; i++) {
		wire_write_imm(id->qp, sbuf + i * 4096, 4096, smr->lkey, daddr, dkey, 4096);
		daddr += 4096;
	}
	long bad = -1;
	CHECK(recv_all(s, 9 * 4096, 33, 4096, &bad), "the rsocket reads 9 x 4 KiB");
	m = wire_next_msg(cq, id->qp);
	/* it goes out with the read that completes half the buffer: after
	 * the 7th, 8th or 9th 4 KiB message, depending on the read sizes */
	CHECK(m >= 0 && (m >> 29) == 4 && (m & 0x1fffffff) >= 8 + 64 && (m & 0x1fffffff) <= 10 + 64,
	      "raw peer: an SGL message, credits = messages read (8..10) + 64 (0x%lx)", m);
	uint64_t half_addr = __atomic_load_n(&target[1].addr, __ATOMIC_ACQUIRE);
	CHECK(target[1].length == 32768 && half_addr == be64toh(rep.data_buf.addr) && target[1].key == dkey,
	      "  and target SGL entry 1 = the first half of its buffer, host order (len %u)", target[1].length);

	/* control: DISCONNECT is op 7, argument 0, no payload */
	CHECK(!wire_write_imm(id->qp, NULL, 0, 0, 0, 0, (7u << 29) | 0), "raw peer sends CTRL|DISCONNECT");
	CHECK_INT(rrecv(s, b, sizeof(b), 0), 0, "the rsocket reads EOF");
out:
	if (s >= 0)
		rclose(s);
	rclose(l);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	ibv_dereg_mr(tmr);
	ibv_dereg_mr(rmr);
	ibv_dereg_mr(smr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	rdma_destroy_event_channel(ch);
	free(target);
	free(rbuf);
	free(sbuf);
}

/* The child: connect, send, and die without closing anything. */
static int child_main(uint16_t port)
{
	int c = rsocket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = vt_lo_addr(port);

	if (c < 0 || rconnect(c, (struct sockaddr *)&sa, sizeof(sa)) || !send_all(c, 10000, 71, 3000))
		_exit(2);
	vt_sleep_ms(100);
	_exit(0);
}

/* --conf-child: prints the defaults a new rsocket got (from the files of
 * $SOFTRDMA_RSOCKET_CONF_DIR) and whether 1 MB crossed a connected pair
 * made with them, data checked. */
static int conf_child_main(void)
{
	int fd = rsocket(AF_INET, SOCK_STREAM, 0), v[6] = { -1, -1, -1, -1, -1, -1 }, s, c;
	static const int opt[6][2] = { { SOL_RDMA, RDMA_SQSIZE }, { SOL_RDMA, RDMA_RQSIZE },
				       { SOL_RDMA, RDMA_INLINE }, { SOL_SOCKET, SO_RCVBUF },
				       { SOL_SOCKET, SO_SNDBUF }, { SOL_RDMA, RDMA_IOMAPSIZE } };
	bool ok = false;

	for (int i = 0; i < 6 && fd >= 0; i++) {
		socklen_t len = sizeof(v[i]);
		rgetsockopt(fd, opt[i][0], opt[i][1], &v[i], &len);
	}
	if (fd >= 0)
		rclose(fd);
	if (pair(&s, &c)) {
		struct xfer tx = { .fd = c, .len = 1 << 20, .chunk = 70000, .seed = 5 };
		long bad = -1;
		pthread_t t;
		pthread_create(&t, NULL, send_thread, &tx);
		ok = recv_all(s, tx.len, tx.seed, 50000, &bad);
		pthread_join(t, NULL);
		ok = ok && tx.ok;
		rclose(s);
		rclose(c);
	}
	printf("sq %d rq %d inline %d rcvbuf %d sndbuf %d iomap %d xfer %d\n", v[0], v[1], v[2], v[3], v[4], v[5], ok);
	return 0;
}

/* rdma-core's per-host files (rsocket(7)) set a new rsocket's defaults;
 * what is not a number in range leaves rdma-core's default. */
static void test_conf_files(const char *self)
{
	char dir[] = "/tmp/sr-rsconf.XXXXXX", cmd[4200], out[256] = "", exe[4096];
	ssize_t n = readlink(self, exe, sizeof(exe) - 1);
	static const char *const good[][2] = { { "sqsize_default", "32\n" },  { "rqsize_default", "48" },
					       { "inline_default", "100\n" }, { "mem_default", "65536\n" },
					       { "wmem_default", "32768\n" }, { "iomap_size", "4\n" },
					       { "polling_time", "0\n" },     { "wake_up_interval", "20\n" } };
	static const char *const bad[][2] = { { "sqsize_default", "lots\n" }, { "rqsize_default", "70000\n" },
					      { "inline_default", "-5\n" },   { "mem_default", "100\n" },
					      { "wmem_default", "\n" },	      { "wake_up_interval", "0\n" } };
	FILE *f;

	SECTION("rdma-core's rsocket configuration files (SOFTRDMA_RSOCKET_CONF_DIR)");
	if (!CHECK(n > 0 && mkdtemp(dir), "a scratch directory"))
		return;
	exe[n] = 0;
	for (int round = 0; round < 2; round++) {
		const char *const(*files)[2] = round ? bad : good;
		size_t nf = round ? sizeof(bad) / sizeof(bad[0]) : sizeof(good) / sizeof(good[0]);
		for (size_t i = 0; i < nf; i++) {
			char path[256];
			snprintf(path, sizeof(path), "%s/%s", dir, files[i][0]);
			f = fopen(path, "w");
			if (f) {
				fputs(files[i][1], f);
				fclose(f);
			}
		}
		snprintf(cmd, sizeof(cmd), "SOFTRDMA_RSOCKET_CONF_DIR=%s '%s' --conf-child", dir, exe);
		out[0] = 0;
		f = popen(cmd, "r");
		if (f) {
			char line[256];
			while (fgets(line, sizeof(line), f)) /* pair() reports its steps too */
				if (!strncmp(line, "sq ", 3))
					snprintf(out, sizeof(out), "%s", line);
			pclose(f);
		}
		out[strcspn(out, "\n")] = 0;
		if (!round)
			CHECK(!strcmp(out, "sq 32 rq 48 inline 100 rcvbuf 65536 sndbuf 32768 iomap 4 xfer 1"),
			      "the files' values, and 1 MB crosses a pair made with them (%s)", out);
		else
			CHECK(!strcmp(out, "sq 384 rq 384 inline 64 rcvbuf 131072 sndbuf 131072 iomap 4 xfer 1"),
			      "a word, out of range, negative, too small or empty: rdma-core's defaults (%s)", out);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0, "scratch directory removed");
}

static void test_dead_peer(const char *self)
{
	uint16_t port;
	int l, s;
	long bad = -1;
	char b[16];

	SECTION("a peer process that exits without closing");
	l = listener(&port);
	if (!CHECK(l >= 0, "listener"))
		return;
	pid_t pid = fork();
	if (pid == 0) {
		char ps[16];
		snprintf(ps, sizeof(ps), "%u", port);
		execl(self, self, "--child", ps, (char *)NULL);
		_exit(3);
	}
	s = raccept(l, NULL, NULL);
	if (CHECK(s >= 0, "accepted the child's connection")) {
		CHECK(recv_all(s, 10000, 71, 3000, &bad), "its 10000 bytes");
		uint64_t t0 = vt_now_ms();
		ssize_t r = rrecv(s, b, sizeof(b), 0);
		CHECK(r == 0 || (r == -1 && (errno == ECONNRESET || errno == ETIMEDOUT)),
		      "then EOF or a reset, not a hang (%zd, %s, after %llu ms)", r, r ? strerror(errno) : "",
		      (unsigned long long)(vt_now_ms() - t0));
		rclose(s);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child connected and sent (status %d)", st);
	rclose(l);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--child"))
		return child_main((uint16_t)atoi(argv[2]));
	if (argc == 2 && !strcmp(argv[1], "--conf-child"))
		return conf_child_main();
	vt_begin_args("test_rsocket", 240, argc, argv);
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	VT_RUN(test_errors());
	VT_RUN(test_dgram());
	VT_RUN(test_dgram_peers());
	VT_RUN(test_names());
	VT_RUN(test_data());
	VT_RUN(test_nonblocking());
	VT_RUN(test_rpoll_stream());
	VT_RUN(test_tcp_info_in_handler());
	VT_RUN(test_shutdown());
	VT_RUN(test_iomap());
	VT_RUN(test_write_after_unmap());
	VT_RUN(test_msg_send());
	VT_RUN(test_wire());
	VT_RUN(test_many());
	VT_RUN(test_keepalive());
	VT_RUN(test_dead_peer("/proc/self/exe"));
	VT_RUN(test_conf_files("/proc/self/exe"));
	return vt_end();
}
