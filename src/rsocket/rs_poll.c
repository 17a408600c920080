/* rpoll and rselect: poll(2) and select(2) over any mix of rsockets and
 * ordinary descriptors.
 *
 * An rsocket's readiness is its protocol state (data queued, credits and
 * buffer room to send, a connection that came up or went away), which
 * only processing its events can tell.  So each round processes every
 * rsocket's events without blocking and reads its readiness; when
 * nothing is ready, it arms the rsockets' completion queues and sleeps in
 * one poll(2) on the ordinary descriptors together with each rsocket's
 * epoll descriptor, which turns readable when any of its channels (CM
 * events, completions) has something.  Events that do not make the
 * socket ready (a credit update, say) just start another round. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>

#include "abi/export.h"
#include "rsocket/rsocket.h"

/* Processes an rsocket's events and returns its revents; when the
 * caller is about to sleep and nothing is ready, arms its CQ and looks
 * again.  That look may consume the event of a completion that came just
 * after arming (a send's, a credit update: nothing that makes the socket
 * ready), which disarms the CQ: arm again, or the sleep that follows
 * would miss every later completion (a lost wake-up, ended only by
 * RS_WAKE_UP_INTERVAL). */
static short rs_poll_one(struct rsocket *rs, short events, bool arm, bool force_cm, bool *asleep)
{
	short rev;

	pthread_mutex_lock(&rs->lock);
	rs_progress(rs, force_cm);
	rev = rs_poll_events(rs, events);
	while (!rev && arm && rs_arm(rs)) {
		rs_progress(rs, false);
		rev = rs_poll_events(rs, events);
	}
	/* Counted as asleep before the lock is let go: another thread that
	 * takes the event we armed for must wake us (rs_kick). */
	if (!rev && arm && asleep) {
		rs->pollers++;
		*asleep = true;
	}
	pthread_mutex_unlock(&rs->lock);
	return rev;
}

/* After the sleep: no longer asleep; take one kick if the descriptor
 * woke us. */
static void rs_poll_awake(struct rsocket *rs, bool woken)
{
	pthread_mutex_lock(&rs->lock);
	rs->pollers--;
	if (woken)
		rs_drain_kick(rs);
	pthread_mutex_unlock(&rs->lock);
}

SR_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct pollfd kbuf[16], *kfds = kbuf;
	struct rsocket *rbuf[16], **rss = rbuf;
	bool abuf[16], *asleep = abuf;
	uint64_t start = rs_now_us();
	int cnt = 0;

	if (nfds && !fds)
		return rs_fail(EFAULT);
	if (nfds > 16) {
		kfds = calloc(nfds, sizeof(*kfds));
		rss = calloc(nfds, sizeof(*rss));
		asleep = calloc(nfds, sizeof(*asleep));
		if (!kfds || !rss || !asleep) {
			free(kfds == kbuf ? NULL : kfds);
			free(rss == rbuf ? NULL : rss);
			free(asleep == abuf ? NULL : asleep);
			return rs_fail(ENOMEM);
		}
	}
	for (nfds_t i = 0; i < nfds; i++) {
		/* a datagram rsocket is held (rclose waits) until we return */
		rss[i] = rs_lookup_dgram(fds[i].fd);
		if (!rss[i])
			rss[i] = rs_lookup(fds[i].fd);
		kfds[i].fd = rss[i] ? rss[i]->index : fds[i].fd;
		kfds[i].events = rss[i] ? POLLIN : fds[i].events;
	}

	for (bool force = true;; force = false) {
		uint64_t now = rs_now_us(), waited = now - start;
		/* spin a little before arming and sleeping, for latency */
		bool sleep_next = timeout != 0 && waited >= RS_POLLING_TIME_US;
		bool rs_ready = false;
		int ms;

		for (nfds_t i = 0; i < nfds; i++) {
			fds[i].revents = 0;
			kfds[i].revents = 0;
			asleep[i] = false;
			if (rss[i]) {
				fds[i].revents = rs_poll_one(rss[i], fds[i].events, sleep_next, force, &asleep[i]);
				rs_ready |= fds[i].revents != 0;
			}
		}
		if (rs_ready || !sleep_next) {
			ms = 0;
		} else if (timeout < 0) {
			ms = RS_WAKE_UP_INTERVAL;
		} else {
			uint64_t left = (uint64_t)timeout * 1000 > waited ? (uint64_t)timeout * 1000 - waited : 0;
			ms = (int)((left + 999) / 1000);
			if (ms > RS_WAKE_UP_INTERVAL)
				ms = RS_WAKE_UP_INTERVAL;
		}
		int pr = poll(kfds, nfds, ms);
		for (nfds_t i = 0; i < nfds; i++)
			if (asleep[i])
				rs_poll_awake(rss[i], pr > 0 && kfds[i].revents);
		if (pr < 0) {
			cnt = -1;
			break;
		}
		cnt = 0;
		for (nfds_t i = 0; i < nfds; i++) {
			if (!rss[i])
				fds[i].revents = kfds[i].revents;
			else if (!fds[i].revents && kfds[i].revents)
				fds[i].revents = rs_poll_one(rss[i], fds[i].events, false, true, NULL);
			if (fds[i].revents)
				cnt++;
		}
		if (cnt || timeout == 0)
			break;
		if (timeout > 0 && rs_now_us() - start >= (uint64_t)timeout * 1000)
			break;
	}
	for (nfds_t i = 0; i < nfds; i++)
		if (rss[i] && rss[i]->type == SOCK_DGRAM)
			ds_unref(rss[i]);
	if (kfds != kbuf)
		free(kfds);
	if (rss != rbuf)
		free(rss);
	if (asleep != abuf)
		free(asleep);
	return cnt;
}

SR_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
	struct pollfd *fds;
	int n = 0, ret, ms;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return rs_fail(EINVAL);
	fds = calloc(nfds ? (size_t)nfds : 1, sizeof(*fds));
	if (!fds)
		return rs_fail(ENOMEM);
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;

		if (readfds && FD_ISSET(fd, readfds))
			ev |= POLLIN;
		if (writefds && FD_ISSET(fd, writefds))
			ev |= POLLOUT;
		if (exceptfds && FD_ISSET(fd, exceptfds))
			ev |= POLLPRI;
		if (ev) {
			fds[n].fd = fd;
			fds[n].events = ev;
			n++;
		}
	}
	if (!timeout) {
		ms = -1;
	} else {
		if (timeout->tv_sec < 0 || timeout->tv_usec < 0) {
			free(fds);
			return rs_fail(EINVAL);
		}
		long long t = (long long)timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000;
		ms = t > 0x7fffffff ? 0x7fffffff : (int)t;
	}
	ret = rpoll(fds, (nfds_t)n, ms);
	if (ret < 0) {
		free(fds);
		return -1;
	}
	if (readfds)
		FD_ZERO(readfds);
	if (writefds)
		FD_ZERO(writefds);
	if (exceptfds)
		FD_ZERO(exceptfds);
	ret = 0;
	for (int i = 0; i < n; i++) {
		short r = fds[i].revents;

		if (r & POLLNVAL) {
			free(fds);
			return rs_fail(EBADF);
		}
		/* as select(2): hang-up and error make a descriptor readable and writable */
		if (readfds && (fds[i].events & POLLIN) && (r & (POLLIN | POLLHUP | POLLERR))) {
			FD_SET(fds[i].fd, readfds);
			ret++;
		}
		if (writefds && (fds[i].events & POLLOUT) && (r & (POLLOUT | POLLERR))) {
			FD_SET(fds[i].fd, writefds);
			ret++;
		}
		if (exceptfds && (fds[i].events & POLLPRI) && (r & POLLPRI)) {
			FD_SET(fds[i].fd, exceptfds);
			ret++;
		}
	}
	free(fds);
	return ret;
}
