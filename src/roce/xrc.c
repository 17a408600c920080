/* XRC on the RoCE wire (IBTA vol. 1 9.x, the rxe XRC patches' layout): an
 * XRC QP is RC's transport with XRC opcodes (the RC operation | 0xa0).
 * The INI end puts an XRCETH naming the target SRQ in every request
 * (req.c); the TGT end delivers each request into the SRQ it names, of
 * its own XRC domain, whose PD checks the request's keys and whose CQ
 * takes the completion, and answers with XRC responses (resp.c).  A
 * request naming no SRQ of the domain is NAKed as a remote access error,
 * as the rxe patches do. */
#include "roce/roce.h"

/* Requests to a TGT QP (qp->lock held): bound to their SRQ while the
 * responder handles them (core/obj_queue.h: qp->srq, rcq and rpd). */
void sr_roce_xrc_resp_rx(struct sr_qp *qp, struct sr_pkt *pkt, const struct sr_rx_env *env)
{
	struct sr_srq *srq = sr_xrc_srq_find(qp, pkt->xrc_srqn);

	if (!srq) {
		sr_resp_fatal(qp, pkt->psn, SR_AETH_NAK_REM_ACCESS);
		return;
	}
	qp->srq = srq;
	qp->rcq = srq->cq;
	qp->rpd = to_spd(srq->ibsrq.pd);
	qp->rctx = to_sctx(srq->ibsrq.context);
	sr_resp_rx(qp, pkt, env);
	qp->srq = NULL;
	qp->rcq = NULL;
	qp->rpd = NULL;
	qp->rctx = qp->ctx;
}
