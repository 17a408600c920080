/* softrdmad: the per-host (per network namespace) soft-RDMA daemon:
 * command line, start-up, the event loop and exit.  See softrdmad.h for
 * the other parts.
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
 * CM does, the requests that belong to no process. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <linux/capability.h>

#include "common/rlimit.h"
#include "daemon/softrdmad.h"
#include "common/sock.h"

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

/* ---- setup ---- */

static int open_listener(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(d.sock_name);
	int fd;

	if (n == 0 || n + 1 > sizeof(sa.sun_path))
		die("socket name '%s' is empty or too long", d.sock_name);
	memcpy(sa.sun_path + 1, d.sock_name, n);
	fd = sr_socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
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

	fd = sr_socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
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
		    setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one)) < 0 ||
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
		    setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one)) < 0 ||
		    setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof(one)) < 0)
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
		    e == EADDRINUSE ? " (held without SO_REUSEPORT, by another user, or by the kernel's rdma_rxe)" :
				      "");
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
	const char *log = secure_getenv("SOFTRDMA_DAEMON_LOG");
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
		"One daemon per network namespace serves every user: processes use it\n"
		"only if it runs as root or as themselves, and it trusts none of them\n"
		"(per-user quotas; a process acts only on what it allocated).  Started\n"
		"as root, it keeps only CAP_NET_ADMIN once its sockets are bound.\n"
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

	/* secure_getenv: a daemon exec'd by a set-user-ID program (whose
	 * library spawned it) takes nothing from its caller's environment. */
	d.sock_name = secure_getenv("SOFTRDMA_DAEMON_SOCK");
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

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		sr_raise_nofile(rl.rlim_max); /* a socket per client and per flow */
	d.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	d.udp_slots = aligned_alloc(8, UDP_BATCH * SLOT_BYTES);
	d.cbuf = aligned_alloc(8, (SR_IPC_MAX_MSG + 7) & ~(size_t)7);
	if (!d.udp_slots || !d.cbuf)
		die("out of memory");
	d.euid = geteuid();
	d.answer_all.milli = (uint64_t)ANSWER_ALL_BURST * 1000;
	d.answer_all.t_ms = now_ms();
	d.will_tb.milli = (uint64_t)WILL_BURST * 1000;
	d.will_tb.t_ms = now_ms();
	clock_gettime(CLOCK_MONOTONIC, &d.start);
	d.idle_since_ms = now_ms();
}

/* A daemon started by root needs none of root's powers once its sockets
 * are bound, except CAP_NET_ADMIN: client sockets get send buffers above
 * net.core.wmem_max (SO_SNDBUFFORCE) as they connect.  Everything else
 * goes, from the bounding set too, with no_new_privs, so that a bug a
 * client or a peer could reach does not hand them root. */
static void drop_privileges(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct c[2];
	bool net_admin;

	memset(c, 0, sizeof(c));
	if (syscall(SYS_capget, &h, c) == 0 && (c[0].permitted || c[1].permitted)) {
		net_admin = c[0].effective & (1u << CAP_NET_ADMIN);
		/* The kernel may know more capabilities than our headers. */
		for (int cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
			if (cap != CAP_NET_ADMIN || !net_admin)
				prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
		prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
		memset(c, 0, sizeof(c));
		if (net_admin)
			c[0].effective = c[0].permitted = 1u << CAP_NET_ADMIN;
		if (syscall(SYS_capset, &h, c) < 0)
			die("dropping capabilities: %s", strerror(errno));
		logmsg("capabilities dropped%s", net_admin ? " but CAP_NET_ADMIN" : "");
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		logmsg("PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
}

static void shutdown_all(void)
{
	while (d.clients)
		client_drop(d.clients, "daemon exiting");
	if (d.nwills_queued)
		logmsg("exiting with %u CM will(s) of dead clients unsent", d.nwills_queued);
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
	drop_privileges();
	logmsg("started: socket @%s, UDP %d%s, idle-exit %ds", d.sock_name, SR_ROCE_UDP_PORT,
	       d.udp6_fd >= 0 ? " (IPv4 and IPv6)" : " (IPv4)", d.idle_exit);
	signal_ready('R');

	while (running) {
		int timeout = wills_pump(), n;

		if (!d.nclients && !d.nwills_queued && d.idle_exit > 0) {
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
