/* The context's QP table: QP number -> QP (an open-addressing hash with
 * tombstones) and the list of its QPs, for the receive path's routing of
 * a datagram to its QP and for the daemon's deliveries.  A process may
 * hold tens of thousands of QPs: lookups, adds and removals are O(1). */
#include <stdlib.h>

#include "core/sr.h"

static uint32_t qpn_slot(uint32_t qpn, uint32_t size)
{
	return (qpn * 0x9E3779B1u) & (size - 1);
}

struct sr_qp *sr_ctx_find_qp(struct sr_context *ctx, uint32_t qpn)
{
	if (!ctx->qpn_tab_size)
		return NULL;
	for (uint32_t i = qpn_slot(qpn, ctx->qpn_tab_size), n = 0; n < ctx->qpn_tab_size;
	     i = (i + 1) & (ctx->qpn_tab_size - 1), n++) {
		struct sr_qp *qp = ctx->qpn_tab[i];
		if (!qp)
			return NULL;
		if (qp != (struct sr_qp *)-1 && qp->ibqp.qp_base.qp_num == qpn)
			return qp;
	}
	return NULL;
}

static void qpn_tab_insert(struct sr_context *ctx, struct sr_qp *qp)
{
	uint32_t i = qpn_slot(qp->ibqp.qp_base.qp_num, ctx->qpn_tab_size);
	while (ctx->qpn_tab[i] && ctx->qpn_tab[i] != (struct sr_qp *)-1)
		i = (i + 1) & (ctx->qpn_tab_size - 1);
	if (!ctx->qpn_tab[i])
		ctx->qpn_tab_used++;
	ctx->qpn_tab[i] = qp;
}

/* Rebuild the table at a size that keeps it at most a quarter full of
 * live entries, dropping the tombstones. */
static int qpn_tab_rehash(struct sr_context *ctx)
{
	uint32_t ns = 64;
	while (ns < (ctx->n_qps + 1) * 4)
		ns *= 2;
	struct sr_qp **t = calloc(ns, sizeof(*t));
	if (!t)
		return ENOMEM;
	free(ctx->qpn_tab);
	ctx->qpn_tab = t;
	ctx->qpn_tab_size = ns;
	ctx->qpn_tab_used = 0;
	for (struct sr_qp *q = ctx->qp_list; q; q = q->next)
		qpn_tab_insert(ctx, q);
	return 0;
}

/* O(1) (amortised): a process may hold tens of thousands of QPs.  The
 * table stays at most half full counting tombstones, so probes are short. */
int sr_ctx_add_qp(struct sr_context *ctx, struct sr_qp *qp)
{
	pthread_mutex_lock(&ctx->lock);
	if ((ctx->qpn_tab_used + 1) * 2 > ctx->qpn_tab_size) {
		ctx->n_qps++; /* sized with qp counted */
		int err = qpn_tab_rehash(ctx);
		ctx->n_qps--;
		if (err) {
			pthread_mutex_unlock(&ctx->lock);
			return err;
		}
	}
	qp->prev = NULL;
	qp->next = ctx->qp_list;
	if (ctx->qp_list)
		ctx->qp_list->prev = qp;
	ctx->qp_list = qp;
	ctx->n_qps++;
	qpn_tab_insert(ctx, qp);
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

void sr_ctx_remove_qp(struct sr_context *ctx, struct sr_qp *qp)
{
	pthread_mutex_lock(&ctx->lock);
	if (qp->prev)
		qp->prev->next = qp->next;
	else
		ctx->qp_list = qp->next;
	if (qp->next)
		qp->next->prev = qp->prev;
	qp->next = qp->prev = NULL;
	ctx->n_qps--;
	for (uint32_t i = qpn_slot(qp->ibqp.qp_base.qp_num, ctx->qpn_tab_size), n = 0; n < ctx->qpn_tab_size;
	     i = (i + 1) & (ctx->qpn_tab_size - 1), n++) {
		if (!ctx->qpn_tab[i])
			break;
		if (ctx->qpn_tab[i] == qp) {
			ctx->qpn_tab[i] = (struct sr_qp *)-1; /* tombstone keeps probe chains */
			break;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
}
