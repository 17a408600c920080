/* The sockets softrdma's libraries make for themselves: the RoCE QPs' and
 * the CM's UDP sockets, Soft-iWARP's TCP connections and listeners, the
 * daemon connection.
 *
 * They are made with the system call itself, not libc's socket(): an
 * application may preload a socket wrapper, and rdma-core's librspreload
 * (softrdma-run --rsocket) turns every TCP socket made through socket()
 * into an rsocket -- Soft-iWARP's own listener among them, which then
 * listened over rdma_cm on its own port (EADDRINUSE).  A wrapper leaves
 * the calls on descriptors it did not make to the system, so bind,
 * connect, accept and the rest need nothing else. */
#ifndef SR_COMMON_SOCK_H
#define SR_COMMON_SOCK_H

#include <sys/syscall.h>
#include <unistd.h>

static inline int sr_socket(int domain, int type, int protocol)
{
	return (int)syscall(SYS_socket, domain, type, protocol);
}

#endif
