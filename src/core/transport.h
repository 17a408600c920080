/* What core/ asks of a transport, and the two transports. */
#ifndef SR_CORE_TRANSPORT_H
#define SR_CORE_TRANSPORT_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

struct sr_context;
struct sr_qp;
struct sr_ipc_pkt;

/* What core/ asks of a transport (roce/, iwarp/). All are called
 * with qp->lock held except create/destroy and modify_prepare. */
struct sr_transport_ops {
	int (*qp_create)(struct sr_qp *qp); /* allocate tp, QPN */
	void (*qp_destroy)(struct sr_qp *qp);
	/* Before a modify is validated, without qp->lock (it may ask the
	 * daemon, whose answer can come behind datagrams for this QP); NULL:
	 * nothing to prepare. */
	void (*modify_prepare)(struct sr_qp *qp, const struct ibv_qp_attr *attr, int mask);
	/* After core validated a modify; old_state is the state before. */
	int (*qp_modify)(struct sr_qp *qp, struct ibv_qp_attr *attr, int mask, enum ibv_qp_state old_state);
	void (*sq_kick)(struct sr_qp *qp); /* new WQEs were posted */
	void (*rq_kick)(struct sr_qp *qp); /* new receive WQEs (RNR wait may end) */
	void (*on_timer)(struct sr_qp *qp, uint64_t now_ns);
	uint64_t (*next_deadline)(struct sr_qp *qp); /* 0 = none */
	void (*on_readable)(struct sr_qp *qp, int fd);
	/* The destination QPN of a datagram that arrived through the daemon
	 * (false: none, it is dropped); NULL: nothing comes that way. */
	bool (*dgram_qpn)(const uint8_t *data, uint32_t len, uint32_t *qpn);
	/* a datagram for this QP that arrived through the daemon */
	void (*deliver)(struct sr_qp *qp, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len);
	/* after a round of on_readable calls, with no QP locked */
	void (*rx_flush)(struct sr_context *ctx);
	/* send what sq_kick held back for a batch (NULL: it never holds) */
	void (*sq_release)(struct sr_qp *qp);
};

extern const struct sr_transport_ops sr_roce_ops;
extern const struct sr_transport_ops sr_iwarp_ops;

#endif
