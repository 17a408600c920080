/* What the network side of roce/ shares among its files: sockets.c (a
 * QP's sockets), xmit.c (sending), recv.c (receiving and dispatch) and
 * ops.c (the transport ops). */
#ifndef SR_ROCE_NET_H
#define SR_ROCE_NET_H

#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include "roce/roce.h"

static inline bool is_v4(const struct sockaddr_in6 *a)
{
	return IN6_IS_ADDR_V4MAPPED(&a->sin6_addr);
}

static inline void to_sin(const struct sockaddr_in6 *a, struct sockaddr_in *s)
{
	memset(s, 0, sizeof(*s));
	s->sin_family = AF_INET;
	s->sin_port = a->sin6_port;
	memcpy(&s->sin_addr, &a->sin6_addr.s6_addr[12], 4);
}

static inline void from_sockaddr(const struct sockaddr_storage *ss, struct sockaddr_in6 *a)
{
	memset(a, 0, sizeof(*a));
	a->sin6_family = AF_INET6;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)ss;
		a->sin6_addr.s6_addr[10] = 0xff;
		a->sin6_addr.s6_addr[11] = 0xff;
		memcpy(&a->sin6_addr.s6_addr[12], &s->sin_addr, 4);
		a->sin6_port = s->sin_port;
	} else {
		*a = *(const struct sockaddr_in6 *)ss;
	}
}

/* sockets.c */
uint16_t sr_roce_random_sport(void);
void sr_roce_txs_unlink(struct sr_context *ctx, struct sr_qp *qp); /* txs_lock held */
int sr_roce_tx_socket(struct sr_qp *qp, bool v4);
void sr_roce_via_daemon(struct sr_qp *qp, bool on);
void sr_roce_peer_port_learn(struct sr_qp *qp, uint16_t port);
void sr_roce_rx_socket_open(struct sr_qp *qp);
void sr_roce_ud_flow_learn(struct sr_qp *qp, uint32_t sqpn, const struct sr_rx_env *env);
void sr_roce_rx_socket_close(struct sr_qp *qp);

/* recv.c */
bool sr_roce_dgram_qpn(const uint8_t *data, uint32_t len, uint32_t *qpn);
void sr_roce_deliver(struct sr_qp *qp, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len);
void sr_roce_rx_flush(struct sr_context *ctx);
void sr_roce_on_readable(struct sr_qp *qp, int fd_unused);

#endif
