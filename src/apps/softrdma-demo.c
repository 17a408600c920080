/* softrdma-demo: RDMA between two processes over one RC queue pair.
 *
 * An ordinary verbs application: it uses nothing but <infiniband/verbs.h>,
 * so the same binary runs on softrdma and on any real RDMA device.  Run
 * with no role option it forks, and the two processes open their own
 * device contexts and talk over RDMA as two hosts would; --server and
 * --client HOST run one side each.  A TCP connection carries the queue
 * pair numbers, PSNs, GIDs and buffer keys, as in ibv_rc_pingpong.
 *
 * The client drives the tests, the server is the target:
 *   (a) RDMA WRITE of a patterned buffer for each size of a sweep; a SEND
 *       that follows each WRITE asks the server to check its memory
 *       (RC ordering makes the WRITE visible before the SEND completes);
 *   (b) RDMA READ of the same bytes back, checked by the client;
 *   (c) SEND/RECV ping-pong latency, 64 bytes, median and p99;
 *   (d) RDMA WRITE bandwidth at 4 KiB, 64 KiB and 1 MiB with many work
 *       requests in flight, followed by a check of the data.
 * Exit status 0 only if every check passed.  Every wait has a deadline. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, and so that it builds outside the project too */
#endif
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define DEFAULT_TCP_PORT 18520
#define DEFAULT_ITERS 1000
#define DEFAULT_TIMEOUT_S 15
#define SWEEP_MAX (1u << 20)
#define PING_SIZE 64
#define MSG_SLOT 256 /* bytes per control/ping message slot */
#define RECV_SLOTS 16
#define SEND_SLOTS 16
#define BW_DEPTH 64		/* RDMA WRITEs kept in flight */
#define BW_BYTES (128ull << 20) /* per bandwidth size, unless... */
#define BW_SECONDS 2.0		/* ...this much time passes first */
#define SPIN_MS 20		/* busy-poll this long before sleeping on the channel */
#define POISON 0xA5

/* ---- options and process-wide settings ------------------------------------ */

static struct {
	uint64_t extra_size; /* --size: added to the sweep, 0 if not given */
	int iters;
	const char *dev_name;
	int gid_idx;
	int ib_port;
	int tcp_port; /* -1: not given */
	int timeout_s;
	const char *role; /* "server", "client" or "fork" */
	const char *host;
} opt = {
	.iters = DEFAULT_ITERS,
	.gid_idx = 0,
	.ib_port = 1,
	.tcp_port = -1,
	.timeout_s = DEFAULT_TIMEOUT_S,
	.role = "fork",
};

static const char *who = ""; /* message prefix: which process speaks */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "softrdma-demo%s: ", who);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- data pattern ------------------------------------------------------------ */

/* A different pattern for every (size, round): stale data from an earlier
 * transfer, a shifted copy or a repeated page cannot pass for the right
 * bytes.  Generated a 64-bit word at a time so 1 MiB costs nothing. */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static uint8_t pattern_byte(uint64_t seed, uint64_t i)
{
	return (uint8_t)(mix64(seed ^ (i >> 3) * 0x9e3779b97f4a7c15ull) >> ((i & 7) * 8));
}

static void pattern_fill(uint8_t *p, uint64_t len, uint64_t seed)
{
	uint64_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t v = mix64(seed ^ (i >> 3) * 0x9e3779b97f4a7c15ull);

		for (int b = 0; b < 8; b++)
			p[i + b] = (uint8_t)(v >> (b * 8));
	}
	for (; i < len; i++)
		p[i] = pattern_byte(seed, i);
}

/* Returns the offset of the first wrong byte, or len if all are right. */
static uint64_t pattern_check(const uint8_t *p, uint64_t len, uint64_t seed)
{
	uint64_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t v = mix64(seed ^ (i >> 3) * 0x9e3779b97f4a7c15ull);

		for (int b = 0; b < 8; b++)
			if (p[i + b] != (uint8_t)(v >> (b * 8)))
				return i + b;
	}
	for (; i < len; i++)
		if (p[i] != pattern_byte(seed, i))
			return i;
	return len;
}

static uint64_t seed_for(uint64_t size, int round)
{
	return mix64(size * 1000003u + (uint64_t)round + 1);
}

/* ---- TCP side channel ----------------------------------------------------- */

/* Listens on 127.0.0.1 only when both sides are ours (forked), else on
 * every address, IPv6 and IPv4 alike where the host has IPv6. */
static int tcp_listen(bool loopback_only, int port, int *bound_port)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd = -1, one = 1, zero = 0;

	if (!loopback_only) {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;

		fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0) {
			memset(&ss, 0, sizeof(ss));
			a6->sin6_family = AF_INET6;
			a6->sin6_addr = in6addr_any;
			a6->sin6_port = htons((uint16_t)port);
			sl = sizeof(*a6);
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		}
	}
	if (fd < 0) {
		struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;

		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			say("socket: %s", strerror(errno));
			return -1;
		}
		memset(&ss, 0, sizeof(ss));
		a4->sin_family = AF_INET;
		a4->sin_addr.s_addr = htonl(loopback_only ? INADDR_LOOPBACK : INADDR_ANY);
		a4->sin_port = htons((uint16_t)port);
		sl = sizeof(*a4);
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) || listen(fd, 1)) {
		say("cannot listen on TCP port %d: %s", port, strerror(errno));
		close(fd);
		return -1;
	}
	if (bound_port) {
		sl = sizeof(ss);
		getsockname(fd, (struct sockaddr *)&ss, &sl);
		*bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
							       ((struct sockaddr_in *)&ss)->sin_port);
	}
	return fd;
}

static int tcp_accept(int lfd, double deadline)
{
	struct pollfd pfd = { .fd = lfd, .events = POLLIN };
	int fd, one = 1;

	for (;;) {
		int ms = (int)((deadline - now_s()) * 1000);

		if (ms <= 0) {
			say("no client connected within %d s", opt.timeout_s);
			return -1;
		}
		if (poll(&pfd, 1, ms) > 0)
			break;
	}
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		say("accept: %s", strerror(errno));
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* The server may not be listening yet (started at the same moment, or
 * still opening its device): retry until the deadline. */
static int tcp_connect(const char *host, int port, double deadline)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	char service[16];
	int one = 1;

	snprintf(service, sizeof(service), "%d", port);
	for (;;) {
		struct addrinfo *res, *ai;
		int rc = getaddrinfo(host, service, &hints, &res);
		int err = 0;

		if (rc) {
			say("cannot resolve %s: %s", host, gai_strerror(rc));
			return -1;
		}
		for (ai = res; ai; ai = ai->ai_next) {
			int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);

			if (fd < 0)
				continue;
			if (!connect(fd, ai->ai_addr, ai->ai_addrlen)) {
				freeaddrinfo(res);
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				return fd;
			}
			err = errno;
			close(fd);
		}
		freeaddrinfo(res);
		if (now_s() > deadline) {
			say("cannot connect to %s:%d: %s", host, port, strerror(err));
			return -1;
		}
		usleep(100 * 1000);
	}
}

static int tcp_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			say("TCP send: %s", n < 0 ? strerror(errno) : "connection closed");
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads one '\n'-terminated line (without it) before the deadline. */
static int tcp_read_line(int fd, char *buf, size_t size, double deadline)
{
	size_t len = 0;

	while (len + 1 < size) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int ms = (int)((deadline - now_s()) * 1000);
		ssize_t n;

		if (ms <= 0) {
			say("peer sent nothing on the TCP connection within %d s", opt.timeout_s);
			return -1;
		}
		if (poll(&pfd, 1, ms) <= 0)
			continue;
		n = recv(fd, buf + len, 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			say("peer closed the TCP connection%s%s", n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
			return -1;
		}
		if (buf[len] == '\n') {
			buf[len] = '\0';
			return 0;
		}
		len++;
	}
	say("overlong line from peer");
	return -1;
}

/* Lets the peer close first, so that it never sees EOF before our last
 * RDMA message; its close (or the deadline) ends the wait, quietly. */
static void wait_peer_close(int fd)
{
	double deadline = now_s() + opt.timeout_s;
	char c;

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int ms = (int)((deadline - now_s()) * 1000);

		if (ms <= 0 || (poll(&pfd, 1, ms) > 0 && recv(fd, &c, 1, 0) <= 0))
			return;
	}
}

/* ---- verbs resources -------------------------------------------------------- */

/* What each side tells the other; sent as one text line so that hosts of
 * different byte order agree. */
struct peer_info {
	uint32_t lid;
	uint32_t qpn;
	uint32_t psn;
	union ibv_gid gid;
	uint32_t rkey;
	uint64_t addr;
	uint64_t len;
	uint32_t mtu;	    /* enum ibv_mtu */
	uint32_t rd_atomic; /* outstanding RDMA READs it accepts as target */
};

struct demo {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *channel;
	struct ibv_cq *send_cq;
	struct ibv_cq *recv_cq;
	struct ibv_qp *qp;
	struct ibv_mr *data_mr;
	struct ibv_mr *msg_mr;
	uint8_t *data;	     /* [region0 | region1], each region_len bytes */
	uint64_t region_len; /* largest transfer + guard */
	uint8_t *msgs;	     /* RECV_SLOTS receive slots, then SEND_SLOTS send slots */
	unsigned next_send_slot;
	struct ibv_port_attr port;
	struct ibv_device_attr dev_attr;
	struct peer_info local, remote;
	int tcp;		 /* side channel, watched for the peer's death */
	int send_depth;		 /* max_send_wr of the QP */
	uint32_t init_rd_atomic; /* outstanding RDMA READs it may issue */
	bool failed;		 /* a check failed; keep going, exit 1 */
};

enum msg_type {
	MSG_CHECK = 1, /* client -> server: verify [0, size) against seed */
	MSG_RESULT,    /* server -> client: status, bad offset */
	MSG_PING,
	MSG_PONG,
	MSG_DONE, /* client -> server: no more tests */
	MSG_BYE,  /* server -> client: status = server saw all checks pass */
};

enum check_status {
	CHECK_OK = 0,
	CHECK_MISMATCH = 1,
	CHECK_OVERRUN = 2,
	CHECK_BAD_SIZE = 3
};

/* In a MSG_CHECK, status holds flags. */
enum {
	CHECK_FLAG_GUARD = 1
}; /* the byte after the transfer must be untouched */

struct demo_msg { /* big-endian on the wire */
	uint32_t type;
	uint32_t status;
	uint64_t size;
	uint64_t seed;
	uint64_t offset;
};

static const char *check_status_str(uint32_t s)
{
	switch (s) {
	case CHECK_OK:
		return "ok";
	case CHECK_MISMATCH:
		return "data mismatch";
	case CHECK_OVERRUN:
		return "bytes past the end overwritten";
	case CHECK_BAD_SIZE:
		return "size outside the target buffer";
	default:
		return "unknown status";
	}
}

static const char *opcode_str(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_SEND:
		return "SEND";
	case IBV_WC_RDMA_WRITE:
		return "RDMA WRITE";
	case IBV_WC_RDMA_READ:
		return "RDMA READ";
	case IBV_WC_RECV:
		return "RECV";
	default:
		return "work request";
	}
}

/* A failed completion leaves the QP in the error state: nothing after it
 * can succeed, so report and stop.  (The opcode of a failed completion is
 * undefined, so it is not shown.) */
static void die_wc(const struct ibv_wc *wc, const char *what)
{
	if (wc->status == IBV_WC_SUCCESS)
		say("%s: unexpected %s completion (wr_id %" PRIu64 ")", what, opcode_str(wc->opcode), wc->wr_id);
	else
		say("%s failed: %s (status %d, vendor_err 0x%x, wr_id %" PRIu64 ")", what,
		    ibv_wc_status_str(wc->status), wc->status, wc->vendor_err, wc->wr_id);
	exit(1);
}

/* Waits for up to max completions on cq.  Spins first (lowest latency, and
 * with softrdma a spinning poller drives progress itself), then sleeps on
 * the completion channel so an idle side costs no CPU.  Also watches the
 * TCP connection: if the peer dies, its QP will never answer. */
static int cq_wait(struct demo *d, struct ibv_cq *cq, struct ibv_wc *wc, int max, double timeout_s, const char *what)
{
	double start = now_s(), deadline = start + timeout_s;
	unsigned spins = 0;

	for (;;) {
		int n = ibv_poll_cq(cq, max, wc);

		if (n < 0) {
			say("ibv_poll_cq failed while waiting for %s", what);
			exit(1);
		}
		if (n > 0)
			return n;
		if ((++spins & 0xff) != 0)
			continue;
		if (now_s() - start < SPIN_MS / 1000.0)
			continue;

		if (ibv_req_notify_cq(cq, 0)) {
			say("ibv_req_notify_cq failed");
			exit(1);
		}
		/* Completions that arrived before the arming raise no event. */
		n = ibv_poll_cq(cq, max, wc);
		if (n != 0) {
			if (n < 0) {
				say("ibv_poll_cq failed while waiting for %s", what);
				exit(1);
			}
			return n;
		}
		for (;;) {
			struct pollfd pfd[2] = {
				{ .fd = d->channel->fd, .events = POLLIN },
				{ .fd = d->tcp, .events = POLLIN },
			};
			int ms = (int)((deadline - now_s()) * 1000);
			struct ibv_cq *ev_cq;
			void *ev_ctx;

			if (ms <= 0) {
				say("timed out after %.0f s waiting for %s", timeout_s, what);
				exit(1);
			}
			if (poll(pfd, 2, ms) <= 0)
				continue;
			if (pfd[1].revents) {
				/* The peer sends nothing on TCP while tests run: this
				 * is its exit.  Its last RDMA message may still be in
				 * the CQ. */
				n = ibv_poll_cq(cq, max, wc);
				if (n > 0)
					return n;
				say("peer went away while waiting for %s", what);
				exit(1);
			}
			if (!(pfd[0].revents & POLLIN))
				continue;
			if (ibv_get_cq_event(d->channel, &ev_cq, &ev_ctx)) {
				say("ibv_get_cq_event failed");
				exit(1);
			}
			ibv_ack_cq_events(ev_cq, 1);
			if (ev_cq == cq)
				break;
			/* An event for the other CQ: it is polled before its
			 * waiter sleeps, so nothing is lost by dropping it. */
		}
		start = now_s(); /* just woken: spin again for the next one */
	}
}

static void post_recv_slot(struct demo *d, unsigned slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(d->msgs + (size_t)slot * MSG_SLOT),
		.length = MSG_SLOT,
		.lkey = d->msg_mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;
	int rc = ibv_post_recv(d->qp, &wr, &bad);

	if (rc) {
		say("ibv_post_recv: %s", strerror(rc));
		exit(1);
	}
}

/* Posts one signalled SEND of a message slot; the caller reaps it. */
static void post_msg(struct demo *d, const struct demo_msg *m, uint32_t len)
{
	unsigned slot = RECV_SLOTS + d->next_send_slot;
	uint8_t *buf = d->msgs + (size_t)slot * MSG_SLOT;
	struct demo_msg be = {
		.type = htobe32(m->type),
		.status = htobe32(m->status),
		.size = htobe64(m->size),
		.seed = htobe64(m->seed),
		.offset = htobe64(m->offset),
	};
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = d->msg_mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = slot,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	int rc;

	d->next_send_slot = (d->next_send_slot + 1) % SEND_SLOTS;
	memset(buf, 0, len);
	memcpy(buf, &be, sizeof(be) < len ? sizeof(be) : len);
	rc = ibv_post_send(d->qp, &wr, &bad);
	if (rc) {
		say("ibv_post_send (SEND): %s", strerror(rc));
		exit(1);
	}
}

static void reap_send(struct demo *d, const char *what)
{
	struct ibv_wc wc;

	cq_wait(d, d->send_cq, &wc, 1, opt.timeout_s, what);
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_SEND)
		die_wc(&wc, what);
}

static void send_msg(struct demo *d, const struct demo_msg *m)
{
	post_msg(d, m, sizeof(*m));
	reap_send(d, "SEND completion");
}

/* Receives one message, reposting its slot. */
static void recv_msg(struct demo *d, struct demo_msg *m, double timeout_s, const char *what)
{
	struct ibv_wc wc;
	struct demo_msg be;

	cq_wait(d, d->recv_cq, &wc, 1, timeout_s, what);
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV)
		die_wc(&wc, what);
	if (wc.byte_len < sizeof(be) || wc.wr_id >= RECV_SLOTS) {
		say("malformed message (%u bytes) while waiting for %s", wc.byte_len, what);
		exit(1);
	}
	memcpy(&be, d->msgs + (size_t)wc.wr_id * MSG_SLOT, sizeof(be));
	post_recv_slot(d, (unsigned)wc.wr_id);
	m->type = be32toh(be.type);
	m->status = be32toh(be.status);
	m->size = be64toh(be.size);
	m->seed = be64toh(be.seed);
	m->offset = be64toh(be.offset);
}

static struct ibv_device *find_device(struct ibv_device **list, int n)
{
	if (n <= 0) {
		say("no RDMA devices found");
		return NULL;
	}
	if (!opt.dev_name)
		return list[0];
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), opt.dev_name))
			return list[i];
	say("RDMA device %s not found", opt.dev_name);
	return NULL;
}

static int demo_open(struct demo *d, uint64_t max_size)
{
	struct ibv_device **list;
	struct ibv_device *dev;
	struct ibv_qp_init_attr qia;
	struct ibv_qp_attr qa;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t data_len;
	int n;

	list = ibv_get_device_list(&n);
	if (!list) {
		say("ibv_get_device_list: %s", strerror(errno));
		return -1;
	}
	dev = find_device(list, n);
	if (!dev) {
		ibv_free_device_list(list);
		return -1;
	}
	d->ctx = ibv_open_device(dev);
	if (!d->ctx) {
		say("cannot open %s: %s", ibv_get_device_name(dev), strerror(errno));
		ibv_free_device_list(list);
		return -1;
	}
	ibv_free_device_list(list);

	if (ibv_query_device(d->ctx, &d->dev_attr)) {
		say("ibv_query_device failed");
		return -1;
	}
	if (ibv_query_port(d->ctx, (uint8_t)opt.ib_port, &d->port)) {
		say("cannot query port %d of %s", opt.ib_port, ibv_get_device_name(d->ctx->device));
		return -1;
	}
	if (d->port.state != IBV_PORT_ACTIVE) {
		say("port %d of %s is %s, not active", opt.ib_port, ibv_get_device_name(d->ctx->device),
		    ibv_port_state_str(d->port.state));
		return -1;
	}
	if (d->port.max_msg_sz && max_size > d->port.max_msg_sz) {
		say("--size %" PRIu64 " exceeds the port's maximum message size %u", max_size, d->port.max_msg_sz);
		return -1;
	}
	if (ibv_query_gid(d->ctx, (uint8_t)opt.ib_port, opt.gid_idx, &d->local.gid)) {
		say("cannot read GID index %d of port %d", opt.gid_idx, opt.ib_port);
		return -1;
	}
	if (d->port.link_layer != IBV_LINK_LAYER_INFINIBAND || d->port.lid == 0) {
		static const union ibv_gid zero;

		if (!memcmp(&d->local.gid, &zero, sizeof(zero))) {
			say("GID index %d of port %d is empty; choose another with --gid-idx", opt.gid_idx,
			    opt.ib_port);
			return -1;
		}
	}

	d->pd = ibv_alloc_pd(d->ctx);
	d->channel = ibv_create_comp_channel(d->ctx);
	if (!d->pd || !d->channel) {
		say("cannot allocate PD / completion channel: %s", strerror(errno));
		return -1;
	}

	/* Leave room for the guard byte past each transfer, page-rounded. */
	d->region_len = (max_size + 64 + page - 1) / page * page;
	data_len = 2 * d->region_len;
	if (posix_memalign((void **)&d->data, page, data_len) ||
	    posix_memalign((void **)&d->msgs, page, (RECV_SLOTS + SEND_SLOTS) * MSG_SLOT)) {
		say("out of memory for %zu bytes of buffers", data_len);
		return -1;
	}
	memset(d->data, POISON, data_len);
	memset(d->msgs, 0, (RECV_SLOTS + SEND_SLOTS) * MSG_SLOT);
	d->data_mr = ibv_reg_mr(d->pd, d->data, data_len,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	d->msg_mr = ibv_reg_mr(d->pd, d->msgs, (RECV_SLOTS + SEND_SLOTS) * MSG_SLOT, IBV_ACCESS_LOCAL_WRITE);
	if (!d->data_mr || !d->msg_mr) {
		say("ibv_reg_mr: %s", strerror(errno));
		return -1;
	}

	d->send_depth = BW_DEPTH + SEND_SLOTS;
	if (d->dev_attr.max_qp_wr > 0 && d->send_depth > d->dev_attr.max_qp_wr)
		d->send_depth = d->dev_attr.max_qp_wr;
	d->send_cq = ibv_create_cq(d->ctx, d->send_depth, NULL, d->channel, 0);
	d->recv_cq = ibv_create_cq(d->ctx, RECV_SLOTS, NULL, d->channel, 0);
	if (!d->send_cq || !d->recv_cq) {
		say("ibv_create_cq: %s", strerror(errno));
		return -1;
	}

	memset(&qia, 0, sizeof(qia));
	qia.send_cq = d->send_cq;
	qia.recv_cq = d->recv_cq;
	qia.qp_type = IBV_QPT_RC;
	qia.cap.max_send_wr = (uint32_t)d->send_depth;
	qia.cap.max_recv_wr = RECV_SLOTS;
	qia.cap.max_send_sge = 1;
	qia.cap.max_recv_sge = 1;
	d->qp = ibv_create_qp(d->pd, &qia);
	if (!d->qp) {
		say("ibv_create_qp: %s", strerror(errno));
		return -1;
	}

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_INIT;
	qa.pkey_index = 0;
	qa.port_num = (uint8_t)opt.ib_port;
	qa.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(d->qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		say("cannot move the QP to INIT: %s", strerror(errno));
		return -1;
	}
	/* Receives may be posted from INIT on; having them there before the
	 * peer can send means no RNR NAK at start. */
	for (unsigned i = 0; i < RECV_SLOTS; i++)
		post_recv_slot(d, i);

	d->local.lid = d->port.lid;
	d->local.qpn = d->qp->qp_num;
	d->local.psn = (uint32_t)(mix64((uint64_t)getpid() ^ (uint64_t)time(NULL)) & 0xffffff);
	d->local.rkey = d->data_mr->rkey;
	d->local.addr = (uintptr_t)d->data;
	d->local.len = d->region_len;
	d->local.mtu = d->port.active_mtu;
	d->local.rd_atomic = (uint32_t)(d->dev_attr.max_qp_rd_atom > 0 ? d->dev_attr.max_qp_rd_atom : 1);
	if (d->local.rd_atomic > 16)
		d->local.rd_atomic = 16;
	d->init_rd_atomic = (uint32_t)(d->dev_attr.max_qp_init_rd_atom > 0 ? d->dev_attr.max_qp_init_rd_atom : 1);
	if (d->init_rd_atomic > 16)
		d->init_rd_atomic = 16;
	return 0;
}

static void demo_close(struct demo *d)
{
	/* Teardown errors are not test failures; the process exits anyway. */
	if (d->qp)
		ibv_destroy_qp(d->qp);
	if (d->send_cq)
		ibv_destroy_cq(d->send_cq);
	if (d->recv_cq)
		ibv_destroy_cq(d->recv_cq);
	if (d->channel)
		ibv_destroy_comp_channel(d->channel);
	if (d->data_mr)
		ibv_dereg_mr(d->data_mr);
	if (d->msg_mr)
		ibv_dereg_mr(d->msg_mr);
	if (d->pd)
		ibv_dealloc_pd(d->pd);
	if (d->ctx)
		ibv_close_device(d->ctx);
	free(d->data);
	free(d->msgs);
}

static int exchange_info(struct demo *d, bool server)
{
	char line[256], gid[33];
	double deadline = now_s() + opt.timeout_s;
	struct peer_info *r = &d->remote;
	unsigned mtu, rd;

	for (int i = 0; i < 16; i++)
		snprintf(gid + 2 * i, 3, "%02x", d->local.gid.raw[i]);
	snprintf(line, sizeof(line), "SRDEMO1 %04x %06x %06x %s %08x %016" PRIx64 " %016" PRIx64 " %u %u\n",
		 d->local.lid, d->local.qpn, d->local.psn, gid, d->local.rkey, d->local.addr, d->local.len,
		 d->local.mtu, d->local.rd_atomic);
	/* The server answers only after it has heard a valid client. */
	if (!server && tcp_write_all(d->tcp, line, strlen(line)))
		return -1;
	{
		char rline[256];

		if (tcp_read_line(d->tcp, rline, sizeof(rline), deadline))
			return -1;
		if (sscanf(rline, "SRDEMO1 %x %x %x %32s %x %" SCNx64 " %" SCNx64 " %u %u", &r->lid, &r->qpn, &r->psn,
			   gid, &r->rkey, &r->addr, &r->len, &mtu, &rd) != 9 ||
		    strlen(gid) != 32) {
			say("peer is not a softrdma-demo of this version: \"%.60s\"", rline);
			return -1;
		}
	}
	for (int i = 0; i < 16; i++) {
		unsigned v;

		sscanf(gid + 2 * i, "%2x", &v);
		r->gid.raw[i] = (uint8_t)v;
	}
	r->mtu = mtu;
	r->rd_atomic = rd ? rd : 1;
	if (server && tcp_write_all(d->tcp, line, strlen(line)))
		return -1;
	return 0;
}

static int connect_qp(struct demo *d)
{
	struct ibv_qp_attr qa;
	enum ibv_mtu mtu = d->local.mtu < d->remote.mtu ? (enum ibv_mtu)d->local.mtu : (enum ibv_mtu)d->remote.mtu;
	static const union ibv_gid zero;

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTR;
	qa.path_mtu = mtu;
	qa.dest_qp_num = d->remote.qpn;
	qa.rq_psn = d->remote.psn;
	qa.max_dest_rd_atomic = (uint8_t)d->local.rd_atomic;
	qa.min_rnr_timer = 12;
	qa.ah_attr.dlid = (uint16_t)d->remote.lid;
	qa.ah_attr.sl = 0;
	qa.ah_attr.src_path_bits = 0;
	qa.ah_attr.port_num = (uint8_t)opt.ib_port;
	/* RoCE and iWARP address by GID; plain IB within a subnet by LID. */
	if (memcmp(&d->remote.gid, &zero, sizeof(zero)) || d->port.link_layer != IBV_LINK_LAYER_INFINIBAND) {
		qa.ah_attr.is_global = 1;
		qa.ah_attr.grh.dgid = d->remote.gid;
		qa.ah_attr.grh.sgid_index = (uint8_t)opt.gid_idx;
		qa.ah_attr.grh.hop_limit = 64;
	}
	if (ibv_modify_qp(d->qp, &qa,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
		say("cannot move the QP to RTR: %s", strerror(errno));
		return -1;
	}

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTS;
	qa.timeout = 14; /* 67 ms: long enough for a loaded soft device */
	qa.retry_cnt = 7;
	qa.rnr_retry = 7; /* infinite: a slow peer is not an error here */
	qa.sq_psn = d->local.psn;
	qa.max_rd_atomic = (uint8_t)(d->remote.rd_atomic < d->init_rd_atomic ? d->remote.rd_atomic : d->init_rd_atomic);
	if (ibv_modify_qp(d->qp, &qa,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				  IBV_QP_MAX_QP_RD_ATOMIC)) {
		say("cannot move the QP to RTS: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Both QPs must be in RTR before either side sends, or the first packets
 * meet a QP that drops them and only the retry timer recovers. */
static int sync_ready(struct demo *d)
{
	char line[32];

	if (tcp_write_all(d->tcp, "READY\n", 6))
		return -1;
	if (tcp_read_line(d->tcp, line, sizeof(line), now_s() + opt.timeout_s))
		return -1;
	if (strcmp(line, "READY")) {
		say("unexpected handshake line from peer");
		return -1;
	}
	return 0;
}

static const char *mtu_str(uint32_t mtu)
{
	switch (mtu) {
	case IBV_MTU_256:
		return "256";
	case IBV_MTU_512:
		return "512";
	case IBV_MTU_1024:
		return "1024";
	case IBV_MTU_2048:
		return "2048";
	case IBV_MTU_4096:
		return "4096";
	default:
		return "?";
	}
}

static void print_endpoint(const char *role, const struct peer_info *p)
{
	char gid[INET6_ADDRSTRLEN];

	inet_ntop(AF_INET6, p->gid.raw, gid, sizeof(gid));
	printf("  %-6s  QPN 0x%06x  PSN 0x%06x  LID 0x%04x  GID %s  MTU %s\n", role, p->qpn, p->psn, p->lid, gid,
	       mtu_str(p->mtu));
}

/* ---- server (target) -------------------------------------------------------- */

static uint32_t server_check(struct demo *d, const struct demo_msg *m, uint64_t *bad)
{
	uint8_t *target = d->data;

	*bad = 0;
	if (m->size == 0 || m->size >= d->region_len)
		return CHECK_BAD_SIZE;
	*bad = pattern_check(target, m->size, m->seed);
	if (*bad != m->size)
		return CHECK_MISMATCH;
	/* Bytes past the transfer were never written by any earlier, smaller
	 * transfer of the ascending sweep (nor by the bandwidth runs, which
	 * come last and write no further than their own check). */
	if ((m->status & CHECK_FLAG_GUARD) && target[m->size] != POISON) {
		*bad = m->size;
		return CHECK_OVERRUN;
	}
	return CHECK_OK;
}

static int run_server(struct demo *d)
{
	unsigned checks = 0, bad_checks = 0, pings = 0;

	for (;;) {
		struct demo_msg m, r = { .type = MSG_RESULT };

		/* The client may run a bandwidth test between two messages, and
		 * a dead client shows as TCP EOF at once, so wait generously. */
		recv_msg(d, &m, opt.timeout_s * 4.0, "the next request from the client");
		switch (m.type) {
		case MSG_PING:
			r.type = MSG_PONG;
			post_msg(d, &r, PING_SIZE);
			reap_send(d, "PONG completion");
			pings++;
			break;
		case MSG_CHECK:
			r.status = server_check(d, &m, &r.offset);
			r.size = m.size;
			checks++;
			if (r.status != CHECK_OK) {
				bad_checks++;
				say("check of %" PRIu64 " bytes written by the client: %s at offset %" PRIu64, m.size,
				    check_status_str(r.status), r.offset);
			}
			send_msg(d, &r);
			break;
		case MSG_DONE:
			r.type = MSG_BYE;
			r.status = bad_checks ? CHECK_MISMATCH : CHECK_OK;
			send_msg(d, &r);
			if (!strcmp(opt.role, "server"))
				printf("softrdma-demo server: %u checks of written data (%u failed), %u pings answered\n",
				       checks, bad_checks, pings);
			wait_peer_close(d->tcp);
			return bad_checks ? 1 : 0;
		default:
			say("unexpected message type %u from client", m.type);
			return 1;
		}
	}
}

/* ---- client (initiator) ------------------------------------------------------- */

static void post_rdma(struct demo *d, enum ibv_wr_opcode op, uint8_t *local, uint64_t len, uint64_t remote_off,
		      uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)local, .length = (uint32_t)len, .lkey = d->data_mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	int rc;

	wr.wr.rdma.remote_addr = d->remote.addr + remote_off;
	wr.wr.rdma.rkey = d->remote.rkey;
	rc = ibv_post_send(d->qp, &wr, &bad);
	if (rc) {
		say("ibv_post_send (%s of %" PRIu64 " bytes): %s", op == IBV_WR_RDMA_READ ? "RDMA READ" : "RDMA WRITE",
		    len, strerror(rc));
		exit(1);
	}
}

static void wait_rdma(struct demo *d, enum ibv_wc_opcode op, const char *what)
{
	struct ibv_wc wc;

	cq_wait(d, d->send_cq, &wc, 1, opt.timeout_s, what);
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != op)
		die_wc(&wc, what);
}

/* Asks the server to check [0, size) against seed; returns the status. */
static uint32_t remote_check(struct demo *d, uint64_t size, uint64_t seed, bool guard, uint64_t *bad)
{
	struct demo_msg m = { .type = MSG_CHECK, .status = guard ? CHECK_FLAG_GUARD : 0, .size = size, .seed = seed };
	struct demo_msg r;

	send_msg(d, &m);
	recv_msg(d, &r, opt.timeout_s, "the server's check result");
	if (r.type != MSG_RESULT || r.size != size) {
		say("protocol error: expected the result for %" PRIu64 " bytes", size);
		exit(1);
	}
	*bad = r.offset;
	return r.status;
}

static const char *size_str(uint64_t size, char *buf, size_t len)
{
	if (size >= (1u << 20) && size % (1u << 20) == 0)
		snprintf(buf, len, "%" PRIu64 " MiB", size >> 20);
	else if (size >= 1024 && size % 1024 == 0)
		snprintf(buf, len, "%" PRIu64 " KiB", size >> 10);
	else
		snprintf(buf, len, "%" PRIu64 " B", size);
	return buf;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void test_write_read(struct demo *d)
{
	uint64_t sizes[16];
	int nsizes = 0;
	uint8_t *src = d->data, *dst = d->data + d->region_len;

	for (uint64_t s = 1; s <= SWEEP_MAX; s *= 4)
		sizes[nsizes++] = s;
	if (opt.extra_size)
		sizes[nsizes++] = opt.extra_size;
	qsort(sizes, (size_t)nsizes, sizeof(sizes[0]), cmp_u64);

	printf("\n(a) RDMA WRITE, checked by the target   (b) RDMA READ back, checked here\n");
	printf("  %-10s  %-34s  %s\n", "size", "write", "read");
	for (int i = 0; i < nsizes; i++) {
		uint64_t s = sizes[i], seed = seed_for(s, 0), bad;
		uint32_t st;
		char sz[32], wres[64], rres[64];

		if (i > 0 && s == sizes[i - 1])
			continue;
		pattern_fill(src, s, seed);
		post_rdma(d, IBV_WR_RDMA_WRITE, src, s, 0, 1);
		wait_rdma(d, IBV_WC_RDMA_WRITE, "RDMA WRITE");
		st = remote_check(d, s, seed, true, &bad);
		if (st == CHECK_OK) {
			snprintf(wres, sizeof(wres), "ok");
		} else {
			d->failed = true;
			snprintf(wres, sizeof(wres), "FAIL: %s @%" PRIu64, check_status_str(st), bad);
		}

		memset(dst, POISON, s + 1);
		post_rdma(d, IBV_WR_RDMA_READ, dst, s, 0, 2);
		wait_rdma(d, IBV_WC_RDMA_READ, "RDMA READ");
		bad = pattern_check(dst, s, seed);
		if (bad != s) {
			d->failed = true;
			snprintf(rres, sizeof(rres), "FAIL: data mismatch @%" PRIu64, bad);
		} else if (dst[s] != POISON) {
			d->failed = true;
			snprintf(rres, sizeof(rres), "FAIL: wrote past the end");
		} else {
			snprintf(rres, sizeof(rres), "ok");
		}
		printf("  %-10s  %-34s  %s\n", size_str(s, sz, sizeof(sz)), wres, rres);
		fflush(stdout);
	}
}

static void test_latency(struct demo *d)
{
	int warmup = opt.iters / 10 < 10 ? opt.iters / 10 : 10;
	int total = opt.iters + warmup;
	double *rtt = calloc((size_t)opt.iters, sizeof(*rtt));
	struct demo_msg ping = { .type = MSG_PING }, pong;

	if (!rtt) {
		say("out of memory");
		exit(1);
	}
	for (int i = 0; i < total; i++) {
		double t0 = now_s();

		post_msg(d, &ping, PING_SIZE);
		recv_msg(d, &pong, opt.timeout_s, "PONG");
		if (i >= warmup)
			rtt[i - warmup] = now_s() - t0;
		/* The PING's own completion needs the PONG's sender to have
		 * acknowledged it, so it is due by now. */
		reap_send(d, "PING completion");
		if (pong.type != MSG_PONG) {
			say("protocol error: expected PONG, got message type %u", pong.type);
			exit(1);
		}
	}
	qsort(rtt, (size_t)opt.iters, sizeof(*rtt), cmp_double);
	{
		double med = rtt[opt.iters / 2];
		int p99i = (opt.iters * 99 + 99) / 100 - 1;
		double p99 = rtt[p99i < 0 ? 0 : p99i];

		printf("\n(c) SEND/RECV ping-pong, %d B, %d iterations (one-way = round trip / 2)\n", PING_SIZE,
		       opt.iters);
		printf("  %-10s  %12s  %12s\n", "", "median", "p99");
		printf("  %-10s  %9.2f us  %9.2f us\n", "one-way", med * 1e6 / 2, p99 * 1e6 / 2);
		printf("  %-10s  %9.2f us  %9.2f us\n", "round trip", med * 1e6, p99 * 1e6);
	}
	free(rtt);
}

static void test_bandwidth(struct demo *d)
{
	static const uint64_t bw_sizes[] = { 4096, 65536, 1u << 20 };
	int depth = d->send_depth < BW_DEPTH ? d->send_depth : BW_DEPTH;
	struct ibv_wc wc[16];

	printf("\n(d) RDMA WRITE bandwidth, %d writes in flight\n", depth);
	printf("  %-10s  %8s  %10s  %10s  %s\n", "size", "writes", "MB/s", "Gbit/s", "data");
	for (size_t k = 0; k < sizeof(bw_sizes) / sizeof(bw_sizes[0]); k++) {
		uint64_t s = bw_sizes[k], seed = seed_for(s, 1), bad;
		uint64_t want = BW_BYTES / s, posted = 0, done = 0;
		double t0, t1, stop_posting;
		uint32_t st;
		char sz[32];

		if (want < (uint64_t)depth * 4)
			want = (uint64_t)depth * 4;
		pattern_fill(d->data, s, seed);
		t0 = now_s();
		stop_posting = t0 + BW_SECONDS;
		while (done < posted || posted < want) {
			while (posted < want && posted - done < (uint64_t)depth) {
				if (now_s() > stop_posting) {
					want = posted;
					break;
				}
				post_rdma(d, IBV_WR_RDMA_WRITE, d->data, s, 0, posted);
				posted++;
			}
			if (done < posted) {
				int n = cq_wait(d, d->send_cq, wc, 16, opt.timeout_s, "RDMA WRITE completions");

				for (int i = 0; i < n; i++)
					if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_RDMA_WRITE)
						die_wc(&wc[i], "RDMA WRITE (bandwidth)");
				done += (uint64_t)n;
			}
		}
		t1 = now_s();
		/* Every write carried the same bytes; the last one must be there. */
		st = remote_check(d, s, seed, false, &bad);
		if (st != CHECK_OK)
			d->failed = true;
		{
			double bytes = (double)done * (double)s, secs = t1 - t0;

			printf("  %-10s  %8" PRIu64 "  %10.1f  %10.3f  %s\n", size_str(s, sz, sizeof(sz)), done,
			       bytes / secs / 1e6, bytes * 8 / secs / 1e9,
			       st == CHECK_OK ? "ok" : check_status_str(st));
		}
		fflush(stdout);
	}
}

static int run_client(struct demo *d)
{
	struct demo_msg m = { .type = MSG_DONE }, r;

	printf("softrdma-demo: %s port %d, GID index %d, %s\n", ibv_get_device_name(d->ctx->device), opt.ib_port,
	       opt.gid_idx,
	       d->port.link_layer == IBV_LINK_LAYER_ETHERNET   ? "Ethernet (RoCE)" :
	       d->port.link_layer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand" :
								 "link layer unspecified");
	print_endpoint("local", &d->local);
	print_endpoint("remote", &d->remote);
	fflush(stdout);
	{
		uint64_t need = opt.extra_size > SWEEP_MAX ? opt.extra_size : SWEEP_MAX;

		/* One guard byte past the largest transfer must fit too. */
		if (d->remote.len <= need) {
			say("the server's buffer holds %" PRIu64 " bytes; start it with --size %" PRIu64, d->remote.len,
			    need);
			return 1;
		}
	}

	test_write_read(d);
	test_latency(d);
	test_bandwidth(d);

	send_msg(d, &m);
	recv_msg(d, &r, opt.timeout_s, "the server's goodbye");
	if (r.type != MSG_BYE) {
		say("protocol error: expected goodbye, got message type %u", r.type);
		return 1;
	}
	if (r.status != CHECK_OK)
		d->failed = true;
	printf("\nRESULT: %s\n", d->failed ? "FAIL (see above)" : "PASS: all data verified");
	return d->failed ? 1 : 0;
}

/* ---- one side, start to end --------------------------------------------- */

static int run_role(bool server, int lfd, const char *host, int port)
{
	struct demo d;
	uint64_t max_size = opt.extra_size > SWEEP_MAX ? opt.extra_size : SWEEP_MAX;
	int rc = 1;

	memset(&d, 0, sizeof(d));
	d.tcp = -1;
	/* The TCP connection first: a client that cannot reach its server
	 * should not hold a device context meanwhile. */
	if (server) {
		d.tcp = tcp_accept(lfd, now_s() + opt.timeout_s * 4.0);
		close(lfd);
	} else {
		d.tcp = tcp_connect(host, port, now_s() + opt.timeout_s);
	}
	if (d.tcp < 0)
		goto out;
	if (demo_open(&d, max_size) || exchange_info(&d, server) || connect_qp(&d) || sync_ready(&d))
		goto out;
	rc = server ? run_server(&d) : run_client(&d);
out:
	if (d.tcp >= 0)
		close(d.tcp);
	demo_close(&d);
	return rc;
}

/* Both sides in one command: the parent listens, forks the server, and
 * runs the client, each with its own device context. */
static int run_fork(void)
{
	int port = opt.tcp_port, lfd, status, crc;
	pid_t pid;
	double deadline;

	lfd = tcp_listen(true, port < 0 ? 0 : port, &port);
	if (lfd < 0)
		return 1;
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		say("fork: %s", strerror(errno));
		return 1;
	}
	if (pid == 0) {
		/* Never outlive the client: a server stuck on a dead peer would
		 * hold the test harness. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		who = " [server]";
		_exit(run_role(true, lfd, NULL, 0));
	}
	close(lfd);
	who = " [client]";
	crc = run_role(false, -1, "127.0.0.1", port);

	deadline = now_s() + opt.timeout_s;
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			say("waitpid: %s", strerror(errno));
			return 1;
		}
		if (now_s() > deadline) {
			say("server process did not exit; killing it");
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return 1;
		}
		usleep(20 * 1000);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (WIFSIGNALED(status))
			say("server process killed by signal %d", WTERMSIG(status));
		else
			say("server process exited with status %d", WEXITSTATUS(status));
		return 1;
	}
	return crc;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: softrdma-demo [options]                 both sides, forked (default)\n"
		"       softrdma-demo --server [options]        target side\n"
		"       softrdma-demo --client HOST [options]   initiator side\n"
		"\n"
		"RDMA WRITE and READ with data verification, SEND/RECV latency and WRITE\n"
		"bandwidth over one RC queue pair between two processes.\n"
		"\n"
		"Options:\n"
		"  -s, --size BYTES     add this size to the 1 B .. 1 MiB transfer sweep\n"
		"  -n, --iters N        ping-pong iterations (default %d)\n"
		"  -d, --dev NAME       RDMA device (default: the first one)\n"
		"  -i, --ib-port N      device port (default 1)\n"
		"  -g, --gid-idx N      GID index (default 0)\n"
		"  -p, --port PORT      TCP port of the side channel (default %d;\n"
		"                       when forked, any free port)\n"
		"  -t, --timeout SEC    limit on every wait (default %d)\n"
		"  -h, --help           this text\n"
		"\n"
		"Exit status: 0 if every check passed, 1 otherwise.\n",
		DEFAULT_ITERS, DEFAULT_TCP_PORT, DEFAULT_TIMEOUT_S);
}

static int parse_int(const char *s, long lo, long hi, const char *what, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || end == s || *end || v < lo || v > hi) {
		say("invalid %s \"%s\" (%ld..%ld)", what, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "iters", required_argument, NULL, 'n' },
		{ "dev", required_argument, NULL, 'd' },
		{ "ib-port", required_argument, NULL, 'i' },
		{ "gid-idx", required_argument, NULL, 'g' },
		{ "port", required_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "server", no_argument, NULL, 'S' },
		{ "client", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	long v;

	while ((c = getopt_long(argc, argv, "s:n:d:i:g:p:t:h", longopts, NULL)) != -1) {
		switch (c) {
		case 's': {
			char *end;
			unsigned long long s;

			errno = 0;
			s = strtoull(optarg, &end, 0);
			if (errno || end == optarg || *end || s == 0 || s > (1ull << 31)) {
				say("invalid --size \"%s\" (1..2147483648)", optarg);
				return 1;
			}
			opt.extra_size = s;
			break;
		}
		case 'n':
			if (parse_int(optarg, 1, 10000000, "--iters", &v))
				return 1;
			opt.iters = (int)v;
			break;
		case 'd':
			opt.dev_name = optarg;
			break;
		case 'i':
			if (parse_int(optarg, 1, 255, "--ib-port", &v))
				return 1;
			opt.ib_port = (int)v;
			break;
		case 'g':
			if (parse_int(optarg, 0, 255, "--gid-idx", &v))
				return 1;
			opt.gid_idx = (int)v;
			break;
		case 'p':
			if (parse_int(optarg, 0, 65535, "--port", &v))
				return 1;
			opt.tcp_port = (int)v;
			break;
		case 't':
			if (parse_int(optarg, 1, 3600, "--timeout", &v))
				return 1;
			opt.timeout_s = (int)v;
			break;
		case 'S':
			opt.role = "server";
			break;
		case 'C':
			opt.role = "client";
			opt.host = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (optind < argc) {
		say("unexpected argument \"%s\"", argv[optind]);
		usage(stderr);
		return 1;
	}
	/* A dead peer must not kill us with SIGPIPE before we can say so. */
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (!strcmp(opt.role, "fork"))
		return run_fork();
	if (!strcmp(opt.role, "server")) {
		int port = opt.tcp_port < 0 ? DEFAULT_TCP_PORT : opt.tcp_port;
		int lfd = tcp_listen(false, port, NULL);

		if (lfd < 0)
			return 1;
		who = " [server]";
		return run_role(true, lfd, NULL, 0);
	}
	who = " [client]";
	return run_role(false, -1, opt.host, opt.tcp_port < 0 ? DEFAULT_TCP_PORT : opt.tcp_port);
}
