/* bench/sock_lat.c: the machine's floor for a polled ping-pong.
 *
 *   sock_lat [-t udp|tcp] [-s SIZE] [-p PORT]                     server
 *   sock_lat [-t udp|tcp] [-s SIZE] [-n ITERS] [-p PORT] HOST     client
 *
 * Both ends spin on a non-blocking receive, as ib_write_lat's ends spin on
 * their memory and UCX's on its sockets, and each round trip is timed
 * alone.  Prints the half round trip's median, p99 and p99.9 in
 * microseconds (perftest's convention), so that softrdma's ib_write_lat
 * median and tail can be set beside what a plain socket on the same
 * machine, in the same run, can do (bench/run.sh).  Not a test: it
 * asserts nothing. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: sock_lat [-t udp|tcp] [-s SIZE] [-n ITERS] [-p PORT] [HOST]\n"
		   "  without HOST: the server, until the client ends the run;\n"
		   "  with HOST: the client, which makes ITERS round trips and prints\n"
		   "  'sock_lat PROTO SIZE ITERS median_us p99_us p99.9_us' (half round trips)\n");
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static long num(const char *s, long lo, long hi, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "sock_lat: %s must be %ld..%ld, not '%s'\n", what, lo, hi, s);
		exit(2);
	}
	return v;
}

/* Receives exactly len bytes (a stream may split them), spinning: 0, or
 * 1 at the end (EOF, or the empty datagram that ends a UDP run), -1 on
 * an error. */
static int spin_recv(int fd, char *buf, size_t len, int dgram)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = recv(fd, buf + got, len - got, MSG_DONTWAIT);

		if (r > 0) {
			if (dgram)
				return 0;
			got += (size_t)r;
		} else if (r == 0) {
			return 1;
		} else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			return -1;
		}
	}
	return 0;
}

static int send_all(int fd, const char *buf, size_t len)
{
	size_t put = 0;

	while (put < len) {
		ssize_t r = send(fd, buf + put, len - put, 0);

		if (r < 0 && errno != EINTR)
			return -1;
		if (r > 0)
			put += (size_t)r;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int tcp = 0, o, one = 1;
	long size = 8, iters = 100000, port = 18515;

	while ((o = getopt(argc, argv, "t:s:n:p:h")) != -1) {
		switch (o) {
		case 't':
			if (!strcmp(optarg, "tcp"))
				tcp = 1;
			else if (strcmp(optarg, "udp")) {
				fprintf(stderr, "sock_lat: -t takes udp or tcp, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 's':
			size = num(optarg, 1, 65000, "SIZE");
			break;
		case 'n':
			iters = num(optarg, 1, 100000000, "ITERS");
			break;
		case 'p':
			port = num(optarg, 1, 65535, "PORT");
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind > 1) {
		usage(stderr);
		return 2;
	}
	const char *host = optind < argc ? argv[optind] : NULL;
	char *buf = calloc(1, (size_t)size);
	uint64_t *rtt = host ? calloc((size_t)iters, sizeof(*rtt)) : NULL;
	if (!buf || (host && !rtt)) {
		fprintf(stderr, "sock_lat: out of memory\n");
		return 1;
	}

	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
	if (fd < 0) {
		perror("sock_lat: socket");
		return 1;
	}
	if (host) {
		struct addrinfo hints = { .ai_family = AF_INET }, *ai;
		int e = getaddrinfo(host, NULL, &hints, &ai);
		if (e) {
			fprintf(stderr, "sock_lat: %s: %s\n", host, gai_strerror(e));
			return 2;
		}
		a.sin_addr = ((struct sockaddr_in *)ai->ai_addr)->sin_addr;
		freeaddrinfo(ai);
		/* the server may not listen yet: try for 10 s */
		for (int t = 0; connect(fd, (struct sockaddr *)&a, sizeof(a)); t++) {
			if (!tcp || t == 100) {
				perror("sock_lat: connect");
				return 1;
			}
			close(fd);
			fd = socket(AF_INET, SOCK_STREAM, 0);
			usleep(100000);
		}
	} else {
		a.sin_addr.s_addr = htonl(INADDR_ANY);
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || (tcp && listen(fd, 1))) {
			perror("sock_lat: bind");
			return 1;
		}
		if (tcp) {
			int c = accept(fd, NULL, NULL);
			if (c < 0) {
				perror("sock_lat: accept");
				return 1;
			}
			close(fd);
			fd = c;
		} else {
			/* the client's first datagram says where it is */
			struct sockaddr_in peer;
			socklen_t pl = sizeof(peer);
			if (recvfrom(fd, buf, (size_t)size, 0, (struct sockaddr *)&peer, &pl) < 0 ||
			    connect(fd, (struct sockaddr *)&peer, pl)) {
				perror("sock_lat: first datagram");
				return 1;
			}
			if (send_all(fd, buf, (size_t)size))
				return 1;
		}
	}
	if (tcp)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (host && !tcp && (send_all(fd, buf, (size_t)size) || spin_recv(fd, buf, (size_t)size, 1))) {
		perror("sock_lat: hello");
		return 1;
	}

	if (!host) {
		/* answer until the client ends the run */
		int r;
		while (!(r = spin_recv(fd, buf, (size_t)size, !tcp)))
			if (send_all(fd, buf, (size_t)size))
				goto lost;
		return r < 0;
	}
	for (long i = 0; i < iters; i++) {
		uint64_t t0 = now_ns();
		if (send_all(fd, buf, (size_t)size) || spin_recv(fd, buf, (size_t)size, !tcp))
			goto lost;
		rtt[i] = now_ns() - t0;
	}
	/* the end: TCP's EOF, or an empty datagram */
	if (tcp)
		shutdown(fd, SHUT_WR);
	else
		send(fd, buf, 0, 0);
	{
		qsort(rtt, (size_t)iters, sizeof(*rtt), cmp_u64);
		printf("sock_lat %s %ld %ld %.2f %.2f %.2f\n", tcp ? "tcp" : "udp", size, iters,
		       rtt[iters / 2] / 2000.0, rtt[(long)(iters * 0.99)] / 2000.0, rtt[(long)(iters * 0.999)] / 2000.0);
	}
	return 0;
lost:
	perror("sock_lat: the peer went away");
	return 1;
}
