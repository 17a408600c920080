/* Binding helper sockets below the RoCE QP source port range: see
 * udp_port.h. */
#include "common/udp_port.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>

static uint32_t next_rand(void)
{
	static __thread uint32_t s;

	if (!s) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		s = (uint32_t)ts.tv_nsec ^ ((uint32_t)getpid() << 16) ^ (uint32_t)(uintptr_t)&ts;
		if (!s)
			s = 1;
	}
	/* xorshift32 */
	s ^= s << 13;
	s ^= s >> 17;
	s ^= s << 5;
	return s;
}

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

int sr_udp_bind_low(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct sockaddr_storage ss;

	if (len > sizeof(ss) || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)) {
		errno = EINVAL;
		return -1;
	}
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, addr, len);
	for (int i = 0; i < 32; i++) {
		set_port(&ss, (uint16_t)(SR_UDP_LOW_FIRST + next_rand() % (SR_UDP_LOW_LAST - SR_UDP_LOW_FIRST + 1)));
		if (bind(fd, (struct sockaddr *)&ss, len) == 0)
			return 0;
		if (errno != EADDRINUSE)
			return -1;
	}
	set_port(&ss, 0);
	return bind(fd, (struct sockaddr *)&ss, len);
}
