/* libsoftrdma-rsaccept4.so: accept4() for programs run with
 * `softrdma-run --rsocket`, which preloads it just before rdma-core's
 * librspreload.so.
 *
 * librspreload (rdma-core 44, Debian 12) replaces accept() but not
 * accept4(), so a program that accepts with accept4 -- Python's
 * socket.accept, most servers written since -- hands librspreload's
 * placeholder descriptor (an open /dev/null) to the kernel: ENOTSOCK.
 * Later rdma-core versions add accept4 the same way as here: accept(),
 * then the flags with fcntl().  A descriptor that is a real socket (one
 * librspreload left to the kernel: AF_UNIX, UDP, or a TCP connection it
 * fell back to) gets the real accept4; only a placeholder, which is not a
 * socket, goes through librspreload's accept, reached with RTLD_NEXT. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define RSACCEPT4_EXPORT __attribute__((visibility("default")))

typedef int (*accept_fn)(int, struct sockaddr *, socklen_t *);
typedef int (*accept4_fn)(int, struct sockaddr *, socklen_t *, int);

RSACCEPT4_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags)
{
	static accept_fn next_accept;
	static accept4_fn next_accept4;
	struct stat st;
	int nfd, fl;

	if (!next_accept4)
		next_accept4 = (accept4_fn)dlsym(RTLD_NEXT, "accept4");
	if (!next_accept)
		next_accept = (accept_fn)dlsym(RTLD_NEXT, "accept");
	if (!next_accept4 || !next_accept) {
		errno = ENOSYS;
		return -1;
	}
	if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) {
		errno = EINVAL;
		return -1;
	}
	if (fstat(fd, &st) || S_ISSOCK(st.st_mode))
		return next_accept4(fd, addr, addrlen, flags);
	nfd = next_accept(fd, addr, addrlen);
	if (nfd < 0)
		return nfd;
	if (flags & SOCK_NONBLOCK) {
		fl = fcntl(nfd, F_GETFL);
		if (fl < 0 || fcntl(nfd, F_SETFL, fl | O_NONBLOCK) < 0)
			goto fail;
	}
	if ((flags & SOCK_CLOEXEC) && fcntl(nfd, F_SETFD, FD_CLOEXEC) < 0)
		goto fail;
	return nfd;
fail:
	fl = errno;
	close(nfd);
	errno = fl;
	return -1;
}
