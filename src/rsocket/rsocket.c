/* rsockets (rdma-core's socket-like API over RDMA) -- NOT IMPLEMENTED YET.
 *
 * Binaries linked against librdmacm.so.1 reference these symbols even when
 * they never open an rsocket (rping, ucmatose, udaddy and cmtime call rpoll
 * on ordinary file descriptors), so they must exist.  What works:
 *   - rpoll and rselect on ordinary file descriptors (they are poll/select);
 * what does not:
 *   - rsocket() fails with EPROTONOSUPPORT, so no rsocket descriptor can
 *     exist and every call that takes one fails with EBADF.
 * riostream and rstream therefore fail cleanly at their first rsocket().
 * See README, "What is not there yet". */
#include <errno.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <rdma/rsocket.h>

#include "abi/export.h"

static int ebadf(void)
{
	errno = EBADF;
	return -1;
}

SR_EXPORT int rsocket(int domain, int type, int protocol)
{
	(void)domain;
	(void)type;
	(void)protocol;
	errno = EPROTONOSUPPORT;
	return -1;
}

SR_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return poll(fds, nfds, timeout);
}

SR_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
	return select(nfds, readfds, writefds, exceptfds, timeout);
}

SR_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen) { return ebadf(); }
SR_EXPORT int rlisten(int socket, int backlog) { return ebadf(); }
SR_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen) { return ebadf(); }
SR_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen) { return ebadf(); }
SR_EXPORT int rshutdown(int socket, int how) { return ebadf(); }
SR_EXPORT int rclose(int socket) { return ebadf(); }
SR_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags) { return ebadf(); }
SR_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr,
			    socklen_t *addrlen) { return ebadf(); }
SR_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags) { return ebadf(); }
SR_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags) { return ebadf(); }
SR_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags, const struct sockaddr *dest_addr,
			  socklen_t addrlen) { return ebadf(); }
SR_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags) { return ebadf(); }
SR_EXPORT ssize_t rread(int socket, void *buf, size_t count) { return ebadf(); }
SR_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt) { return ebadf(); }
SR_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count) { return ebadf(); }
SR_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt) { return ebadf(); }
SR_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen) { return ebadf(); }
SR_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen) { return ebadf(); }
SR_EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen) { return ebadf(); }
SR_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen) { return ebadf(); }
SR_EXPORT int rfcntl(int socket, int cmd, ... /* arg */) { return ebadf(); }
SR_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset) { return ebadf(); }
SR_EXPORT int riounmap(int socket, void *buf, size_t len) { return ebadf(); }
SR_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	errno = EBADF;
	return 0;
}
