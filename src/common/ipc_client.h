/* Client side of the softrdmad protocol (ipc.h; the server end is
 * daemon/ipc_server.c), for use inside a multi-threaded process
 * (libibverbs) and by softrdma-cfg.
 *
 * Threading: every function may be called from any thread, except that
 * sr_daemon_close must not race with the others.  Requests are answered
 * in order; whichever thread holds the "reader" role reads the socket and
 * hands each reply to the thread waiting for it, so a progress thread and
 * callers of sr_daemon_call can share one connection.  The packet callback
 * runs in whichever thread read the packet, with no lock of this module
 * held; it may call sr_daemon_forward and sr_daemon_call (packets that
 * arrive meanwhile are delivered re-entrantly from inside that call).
 *
 * One rule follows for callers: do not hold, across sr_daemon_call, a lock
 * that the packet callback takes.  The reply may have to be read by the
 * thread that is inside the callback (the reader role is not handed over
 * mid-batch, so packets reach the callback in order and one at a time). */
#ifndef SR_COMMON_IPC_CLIENT_H
#define SR_COMMON_IPC_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "common/ipc.h"

struct sr_daemon_conn;

/* meta and data are valid only during the call. */
typedef void (*sr_daemon_pkt_cb)(void *arg, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len);

/* Connect to the daemon of this network namespace, starting it if needed
 * (exec `softrdmad --background`, found via $SOFTRDMA_DAEMON, else relative
 * to the shared object containing this code: <libdir>/../../bin/softrdmad or
 * <dir>/softrdmad, else PATH), retrying the connect for up to ~3 s while it
 * starts.  Sends HELLO.  On failure NULL with *err = -errno and a one-line
 * message on stderr saying why.  cb may be NULL (packets are then dropped). */
struct sr_daemon_conn *sr_daemon_open(sr_daemon_pkt_cb cb, void *arg, int *err);

enum {
	SR_DAEMON_NO_START = 1u << 0, /* only connect to a running daemon */
	SR_DAEMON_QUIET = 1u << 1,    /* no message on stderr */
};
struct sr_daemon_conn *sr_daemon_open_flags(sr_daemon_pkt_cb cb, void *arg, unsigned flags, int *err);

/* Start `softrdmad --background EXTRA_ARGV...` (extra_argv NULL-terminated,
 * may be NULL) and wait until it accepts connections or exits.  0 when a
 * daemon is running afterwards (possibly one that was already there), else
 * -errno with a message on stderr. */
int sr_daemon_spawn(const char *const *extra_argv);

void sr_daemon_close(struct sr_daemon_conn *c);

/* Whether a daemon listens, and who it is: 0 and its credentials (as it
 * had them at listen()), -EPERM and its credentials when it runs as
 * neither root nor our euid (sr_daemon_open refuses such a daemon: it
 * could read and forge our traffic), else -errno (-ECONNREFUSED: none). */
int sr_daemon_probe(struct ucred *cred);

/* For the caller's epoll: register EPOLLIN level-triggered (edge-triggered
 * also works: a readiness seen while another thread was reading is
 * remembered and drained by that thread). */
int sr_daemon_fd(struct sr_daemon_conn *c);

/* Called by the caller's progress thread when the fd is readable: reads all
 * pending messages without blocking, calls cb for PKT messages, hands
 * replies to a thread blocked in sr_daemon_call.  Once the daemon has gone
 * away (sr_daemon_dead), the fd stays readable: remove it from epoll. */
void sr_daemon_on_readable(struct sr_daemon_conn *c);

/* True once the connection to the daemon is lost (EOF or error). */
bool sr_daemon_dead(struct sr_daemon_conn *c);

/* pid of the daemon (from its HELLO reply). */
pid_t sr_daemon_pid(struct sr_daemon_conn *c);

/* Synchronous request from any thread.  Returns reply val (>= 0) or -errno
 * (-EPIPE if the daemon went away). */
int64_t sr_daemon_call(struct sr_daemon_conn *c, uint16_t type, const void *body, uint32_t len);

/* Same, and copies up to cap bytes of what follows sr_ipc_reply in the
 * reply (STATUS text) to out, NUL-terminated when it fits; *out_len gets the
 * byte count copied (may be NULL). */
int64_t sr_daemon_call_ex(struct sr_daemon_conn *c, uint16_t type, const void *body, uint32_t len, void *out,
			  uint32_t cap, uint32_t *out_len);

/* Send a datagram to the daemon for routing (SR_IPC_PKT c->d); no reply.
 * Never blocks: 0, or -EAGAIN when the socket buffer is full (the datagram
 * is dropped, as the network would), -EPIPE, -EMSGSIZE. */
int sr_daemon_forward(struct sr_daemon_conn *c, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len);

/* Connection management (ipc.h, "CM routing").  All return 0 or -errno
 * (-EPIPE once the daemon is gone), like sr_daemon_call. */

/* A host-wide CM Communication ID (never 0), in host order: the Local
 * Communication ID of a REQ or REP, or a SIDR_REQ Request ID.  MADs that
 * name it as the recipient's ID reach this connection's packet callback. */
int sr_daemon_alloc_comm_id(struct sr_daemon_conn *c, uint32_t *id);
int sr_daemon_free_comm_id(struct sr_daemon_conn *c, uint32_t id);

/* REQs and SIDR_REQs for service_id (host order) sent to local (NULL or
 * address :: = any local address, ::ffff:0.0.0.0 = any IPv4 address; port
 * ignored; a struct sockaddr_in passed here is read as one) reach this
 * connection's packet callback.  -EADDRINUSE when another process listens
 * on the same service ID and address. */
int sr_daemon_listen(struct sr_daemon_conn *c, uint64_t service_id, const struct sockaddr_in6 *local);
int sr_daemon_unlisten(struct sr_daemon_conn *c, uint64_t service_id, const struct sockaddr_in6 *local);

/* Leave the daemon a MAD (256 bytes) to send from local to peer if this
 * process dies while it owns comm_id (a DREQ for an established
 * connection); mad NULL withdraws it.  Freeing the ID withdraws it too. */
int sr_daemon_cm_will(struct sr_daemon_conn *c, uint32_t comm_id, const struct sockaddr_in6 *local,
		      const struct sockaddr_in6 *peer, const uint8_t *mad);

/* UD multicast (ipc.h, "Multicast"): have the daemon join group (IPv4 as
 * IPv4-mapped) on interface ifindex and pass this connection the
 * datagrams sent to it there (BTH DestQP 0xFFFFFF), or drop one such
 * reference.  0 or -errno. */
int sr_daemon_mcast_join(struct sr_daemon_conn *c, const struct in6_addr *group, int ifindex);
int sr_daemon_mcast_leave(struct sr_daemon_conn *c, const struct in6_addr *group, int ifindex);

#endif
