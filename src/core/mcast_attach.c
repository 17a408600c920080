/* UD multicast, as the kernel's rxe does it on RoCEv2.
 *
 * A multicast GID is an IP multicast address (IPv4-mapped 224.0.0.0/4 or
 * IPv6 ff00::/8).  Sending needs nothing here: a UD SEND whose AH names
 * such a GID goes to that group, UDP port 4791, with the DestQP and Q_Key
 * of the work request (0xFFFFFF and the group's Q_Key, as rdma_cm's
 * MULTICAST_JOIN event hands them out); roce/xmit.c sends it out of the
 * device's interface with multicast loopback on.
 *
 * Receiving: the context keeps one record per group its QPs are attached
 * to, and while a record exists the daemon holds an IP membership of the
 * group on the device's interface for this context's connection
 * (SR_IPC_MCAST_JOIN).  The daemon hands over every datagram with DestQP
 * 0xFFFFFF sent to the group; each attached QP takes it through the
 * ordinary UD receive path, which drops it on a Q_Key other than the QP's
 * own, exactly as rxe_rcv_mcast_pkt() checks every QP of the group.
 *
 * Like rxe, the sender's own QP gets its datagram back when it is
 * attached to the group (IP multicast loopback delivers it to this host,
 * and nothing excludes the sending QP).  Errors follow the kernel
 * (ib_attach_mcast(), uverbs, rxe_mcast.c): EINVAL for a QP that is not
 * UD or a GID that is not multicast; attaching twice is a no-op; ENOMEM
 * beyond max_mcast_grp groups (per context here: rxe counts per device)
 * or max_mcast_qp_attach QPs in a group; detaching a QP that is not
 * attached is EINVAL; ibv_destroy_qp of a QP still attached is EBUSY.
 * The multicast LID is ignored, as RoCE does (IBA A17). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/sr.h"
#include "common/ipc_client.h"

struct sr_mcg {
	struct sr_mcg *next;
	union ibv_gid mgid;
	uint32_t nqp;
	struct sr_qp *qp[SR_MAX_MCAST_QP_ATTACH];
};

static const struct in6_addr *gid_addr(const union ibv_gid *gid)
{
	return (const struct in6_addr *)gid->raw;
}

/* ctx->mcast_lock or ctx->lock held */
static struct sr_mcg *mcg_find(struct sr_context *ctx, const union ibv_gid *gid)
{
	for (struct sr_mcg *g = ctx->mcgs; g; g = g->next)
		if (!memcmp(g->mgid.raw, gid->raw, sizeof(gid->raw)))
			return g;
	return NULL;
}

static int mcg_index(const struct sr_mcg *g, const struct sr_qp *qp)
{
	for (uint32_t i = 0; i < g->nqp; i++)
		if (g->qp[i] == qp)
			return (int)i;
	return -1;
}

static int attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	struct sr_qp *qp = to_sqp(ibqp);
	struct sr_context *ctx = qp->ctx;
	struct sr_mcg *g;
	int err = 0;

	if (!gid || ibqp->qp_type != IBV_QPT_UD || !sr_in6_is_mcast(gid_addr(gid)))
		return EINVAL;
	pthread_mutex_lock(&ctx->mcast_lock);
	if (qp->dead) {
		err = EINVAL;
		goto out;
	}
	g = mcg_find(ctx, gid);
	if (g) {
		if (mcg_index(g, qp) >= 0)
			goto out;
		if (g->nqp >= SR_MAX_MCAST_QP_ATTACH) {
			err = ENOMEM;
			goto out;
		}
		pthread_mutex_lock(&ctx->lock);
		g->qp[g->nqp++] = qp;
		pthread_mutex_unlock(&ctx->lock);
	} else {
		struct sr_daemon_conn *d;
		int rc = 0;

		if (ctx->n_mcgs >= SR_MAX_MCAST_GRP) {
			err = ENOMEM;
			goto out;
		}
		g = calloc(1, sizeof(*g));
		if (!g) {
			err = ENOMEM;
			goto out;
		}
		/* Joined before the record is visible, and without ctx->lock:
		 * the daemon's reply may be read by this thread's packet
		 * callback, which takes ctx->lock (ipc_client.h). */
		d = sr_ctx_daemon(ctx, &rc);
		if (!d)
			rc = rc ? rc : -EAGAIN;
		else
			rc = sr_daemon_mcast_join(d, gid_addr(gid), ctx->nd.ifindex);
		if (rc < 0) {
			SR_DBG("attach to a multicast group: the daemon's join failed: %s", strerror(-rc));
			free(g);
			err = -rc;
			goto out;
		}
		g->mgid = *gid;
		g->qp[0] = qp;
		g->nqp = 1;
		pthread_mutex_lock(&ctx->lock);
		g->next = ctx->mcgs;
		ctx->mcgs = g;
		ctx->n_mcgs++;
		pthread_mutex_unlock(&ctx->lock);
	}
	qp->n_mcast++;
out:
	pthread_mutex_unlock(&ctx->mcast_lock);
	return err;
}

static int detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	struct sr_qp *qp = to_sqp(ibqp);
	struct sr_context *ctx = qp->ctx;
	struct sr_mcg *g;
	bool last;
	int i;

	if (!gid)
		return EINVAL;
	pthread_mutex_lock(&ctx->mcast_lock);
	g = mcg_find(ctx, gid);
	i = g ? mcg_index(g, qp) : -1;
	if (i < 0) {
		pthread_mutex_unlock(&ctx->mcast_lock);
		return EINVAL;
	}
	/* From here on the receive path cannot hand the QP this group's
	 * datagrams: it walks the records under ctx->lock. */
	pthread_mutex_lock(&ctx->lock);
	memmove(&g->qp[i], &g->qp[i + 1], (g->nqp - (uint32_t)i - 1) * sizeof(g->qp[0]));
	g->nqp--;
	last = g->nqp == 0;
	if (last) {
		for (struct sr_mcg **pp = &ctx->mcgs; *pp; pp = &(*pp)->next)
			if (*pp == g) {
				*pp = g->next;
				break;
			}
		ctx->n_mcgs--;
	}
	pthread_mutex_unlock(&ctx->lock);
	qp->n_mcast--;
	if (last) {
		/* The daemon may be gone; it then left the group itself. */
		if (ctx->daemon) {
			int rc = sr_daemon_mcast_leave(ctx->daemon, gid_addr(gid), ctx->nd.ifindex);

			if (rc < 0)
				SR_DBG("detach from a multicast group: the daemon's leave failed: %s", strerror(-rc));
		}
		free(g);
	}
	pthread_mutex_unlock(&ctx->mcast_lock);
	return 0;
}

/* As uverbs: the QP's handle first, then the group. */
int sr_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	return SR_WITH_OBJ(ibqp, SR_OBJ_QP, attach_mcast(ibqp, gid, lid));
}

int sr_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	return SR_WITH_OBJ(ibqp, SR_OBJ_QP, detach_mcast(ibqp, gid, lid));
}

void sr_mcast_deliver(struct sr_context *ctx, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len)
{
	union ibv_gid gid;
	struct sr_mcg *g;

	memcpy(gid.raw, &meta->dst.sin6_addr, sizeof(gid.raw));
	/* ctx->lock keeps the record and its QPs alive: a QP leaves a
	 * record under ctx->lock, and is destroyed only once it left all */
	pthread_mutex_lock(&ctx->lock);
	g = mcg_find(ctx, &gid);
	for (uint32_t i = 0; g && i < g->nqp; i++) {
		struct sr_qp *qp = g->qp[i];

		pthread_mutex_lock(&qp->lock);
		if (!qp->dead)
			ctx->dev->tops->deliver(qp, meta, data, len);
		pthread_mutex_unlock(&qp->lock);
	}
	pthread_mutex_unlock(&ctx->lock);
}

void sr_mcast_ctx_free(struct sr_context *ctx)
{
	while (ctx->mcgs) {
		struct sr_mcg *g = ctx->mcgs;

		ctx->mcgs = g->next;
		free(g);
	}
	ctx->n_mcgs = 0;
	pthread_mutex_destroy(&ctx->mcast_lock);
}
