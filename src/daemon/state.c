/* softrdmad: the daemon's state, clock, random numbers and log. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

#include "daemon/softrdmad.h"

struct daemon_state d = { .idle_exit = 30,
			  .ready_fd = -1,
			  .listen_fd = -1,
			  .udp4_fd = -1,
			  .udp6_fd = -1,
			  .sig_fd = -1,
			  .reserve_fd = -1,
			  .epfd = -1 };

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

/* Thousandths of a token, so that rates below one per millisecond still
 * refill. */
bool tb_take(struct token_bucket *b, int64_t now, uint32_t rate, uint32_t burst)
{
	uint64_t cap = (uint64_t)burst * 1000;

	if (now > b->t_ms) {
		uint64_t add = (uint64_t)(now - b->t_ms) * rate;

		b->milli = b->milli + add > cap ? cap : b->milli + add;
		b->t_ms = now;
	}
	if (b->milli < 1000)
		return false;
	b->milli -= 1000;
	return true;
}

uint32_t rand32(void)
{
	static uint32_t pool[256];
	static unsigned left;

	if (!left) {
		ssize_t n = getrandom(pool, sizeof(pool), GRND_NONBLOCK);

		if (n != (ssize_t)sizeof(pool)) {
			/* Only before the kernel's pool is ready (early boot):
			 * unpredictable enough beats refusing to run. */
			struct timespec ts;
			uint64_t x;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			x = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid() << 32 ^
			    (uint64_t)ts.tv_sec;
			for (unsigned i = 0; i < 256; i++) {
				x += 0x9E3779B97F4A7C15ull;
				uint64_t z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
				z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
				pool[i] ^= (uint32_t)(z ^ (z >> 31));
			}
		}
		left = 256;
	}
	return pool[--left];
}
