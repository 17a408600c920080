/* Local UDP ports that stay out of the way of RoCE QP source ports.
 *
 * A QP sends from a random port of 49152..65535 (roce/sockets.c), as rxe's
 * and RNICs' source ports range.  The kernel's ephemeral range
 * (32768..60999 by default) overlaps it, so any UDP socket of ours that
 * lets the kernel pick a port (bind to port 0, or connect without a bind)
 * takes a port from the QPs' range, which then draw another.
 * Sockets of softrdma that do not need a particular port bind through
 * sr_udp_bind_low instead: a random port in 32768..49151. */
#ifndef SR_COMMON_UDP_PORT_H
#define SR_COMMON_UDP_PORT_H

#include <sys/socket.h>

#define SR_UDP_LOW_FIRST 32768u
#define SR_UDP_LOW_LAST 49151u

/* Binds the UDP socket fd to addr (its port is ignored) with a port in
 * SR_UDP_LOW_FIRST..SR_UDP_LOW_LAST, trying random ones; if all the tries
 * are taken, lets the kernel choose (port 0).  Returns 0 or -1 with errno
 * set by the last bind (EADDRNOTAVAIL for an address not on this host). */
int sr_udp_bind_low(int fd, const struct sockaddr *addr, socklen_t len);

#endif
