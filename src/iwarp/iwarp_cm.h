/* The contract between the iWARP transport (libibverbs.so.1, src/iwarp/)
 * and the RDMA-CM (librdmacm.so.1, src/cm/): the CM makes the TCP
 * connection and exchanges the MPA Request and Reply (with the codec in
 * iwarp/wire/iwarp_wire.h), then hands the connected socket to the QP.
 * These functions are exported from libibverbs.so.1 under the private
 * version node SOFTRDMA_PRIVATE_1.0.
 *
 * Disconnect is the verbs' business, as with siw: ibv_modify_qp to SQD
 * finishes the message being sent and the RDMA Reads outstanding, then
 * closes the stream (FIN) and moves the QP to ERR; ibv_modify_qp to ERR
 * closes it at once.  Either way the work requests left are flushed. */
#ifndef SR_IWARP_IWARP_CM_H
#define SR_IWARP_IWARP_CM_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

/* Why a connection ended (the reason argument of on_close). */
enum sr_iw_close_reason {
	SR_IW_CLOSE_LOCAL = 0,	 /* ibv_modify_qp to SQD (after the drain) or to ERR, or the QP was
				     destroyed while connected (notified from ibv_destroy_qp) */
	SR_IW_CLOSE_PEER = 1,	 /* the peer closed the stream at a message boundary */
	SR_IW_CLOSE_TERM_RX = 2, /* the peer sent a Terminate */
	SR_IW_CLOSE_TERM_TX = 3, /* we sent a Terminate (bad input from the peer, or a local error) */
	SR_IW_CLOSE_RESET = 4,	 /* the stream broke: reset, or closed in the middle of an FPDU */
};

struct sr_iw_conn_params {
	int fd;		   /* connected TCP socket; MPA Request/Reply already exchanged by the CM,
				which must not have read past the MPA frame (the peer's first FPDUs
				may follow it at once: read the 20-byte header, then exactly the
				private data); ownership passes to the QP when sr_iw_qp_connect
				succeeds (it is made non-blocking, TCP_NODELAY) */
	bool crc;	   /* negotiated MPA CRC */
	uint8_t mpa_rev;   /* 1 or 2 */
	uint16_t ird, ord; /* negotiated (RFC 6581): Read Requests we accept / may have outstanding */
	int rtr;	   /* 0 none, else which zero-length RTR message the initiator sends and the
				responder expects (enum sr_mpa_rtr in iwarp/wire/iwarp_wire.h: 1 Send,
				2 Write, 3 Read) (RFC 6581) */
	bool initiator;
	/* Optional: called once when the connection ends, from the progress
	 * thread (or an application thread polling a CQ, or the one calling
	 * ibv_destroy_qp), with no softrdma lock held.  The callback may call
	 * verbs, including destroying the QP. */
	void (*on_close)(void *arg, enum sr_iw_close_reason reason);
	void *close_arg;
};

/* Move an iWARP RC QP in INIT (or RTR) to RTS on the connected socket p->fd.
 * Returns 0, or EINVAL (not an iWARP RC QP, wrong state, bad parameters),
 * EBADF/ENOTCONN (the socket), ENOMEM.  On failure the socket stays the
 * caller's. */
int sr_iw_qp_connect(struct ibv_qp *qp, const struct sr_iw_conn_params *p);

/* The iWARP RC QP numbered qpn in ctx, or NULL: the QP of an rdma_cm id
 * connected with an application's own QP (rdma_conn_param's qp_num), which
 * the CM drives as the kernel's iw_cm does (iw_get_qp).  The CM looks it
 * up at each use rather than keeping it, so a QP destroyed meanwhile is
 * NULL, not a dangling pointer. */
struct ibv_qp *sr_iw_qp_lookup(struct ibv_context *ctx, uint32_t qpn);

/* What the CM should offer in its MPA Request/Reply for a device. */
struct sr_iw_dev_attr {
	bool iwarp; /* the context's device is a Soft-iWARP device */
	bool crc;   /* the device wants MPA CRC (configuration "crc") */
	uint16_t max_ird, max_ord;
};
int sr_iw_query(struct ibv_context *ctx, struct sr_iw_dev_attr *attr);

#endif
