/* softrdmad: the daemon's state, clock and log. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "daemon/softrdmad.h"

struct daemon_state d = { .idle_exit = 30, .ready_fd = -1, .listen_fd = -1, .udp4_fd = -1, .udp6_fd = -1,
	.sig_fd = -1, .reserve_fd = -1, .epfd = -1 };

int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void logmsg(const char *fmt, ...)
{
	char tbuf[32];
	time_t t = time(NULL);
	struct tm tm;
	va_list ap;

	strftime(tbuf, sizeof(tbuf), "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
	fprintf(stderr, "%s softrdmad[%ld]: ", tbuf, (long)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
}
