/* Soft-iWARP Terminate (RFC 5040 4.8, RFC 5041 7, RFC 5044 8): the
 * message that ends an RDMAP stream on an error, with the layer, error
 * type and code that say what went wrong and a copy of the offending
 * headers.  Sending one: finish whatever FPDU is half on the wire (the
 * peer's framing must stay whole), send the Terminate, shut our half of
 * the stream and take the QP to ERR.  Receiving one: the QP goes to ERR,
 * the work request it concerns fails with a matching status. */
#include <string.h>

#include "iwarp/iwarp.h"

/* The Terminate code for a remote STag that failed to resolve: a DDP
 * tagged-buffer error (the placement of a WRITE or READ Response) or an
 * RDMAP protection error (a READ Request's source). */
uint8_t sr_iw_memerr_ddp(enum sr_iw_memerr e)
{
	switch (e) {
	case SR_IW_MEM_PD:
		return SR_TERM_DDP_T_STAG_NOT_ASSOC;
	case SR_IW_MEM_BOUNDS:
		return SR_TERM_DDP_T_BASE_BOUNDS;
	case SR_IW_MEM_WRAP:
		return SR_TERM_DDP_T_TO_WRAP;
	default:
		/* RFC 5041 has no code for missing access rights: siw calls it
		 * an invalid STag, and so do we */
		return SR_TERM_DDP_T_INV_STAG;
	}
}

uint8_t sr_iw_memerr_rdmap(enum sr_iw_memerr e)
{
	switch (e) {
	case SR_IW_MEM_PD:
		return SR_TERM_RDMAP_STAG_NOT_ASSOC;
	case SR_IW_MEM_ACCESS:
		return SR_TERM_RDMAP_ACCESS;
	case SR_IW_MEM_BOUNDS:
		return SR_TERM_RDMAP_BASE_BOUNDS;
	case SR_IW_MEM_WRAP:
		return SR_TERM_RDMAP_TO_WRAP;
	default:
		return SR_TERM_RDMAP_INV_STAG;
	}
}

void sr_iw_term_local(struct sr_qp *qp, uint8_t layer, uint8_t etype, uint8_t ecode, const uint8_t *bad,
		      uint32_t bad_len, uint32_t seg_len, int ev)
{
	struct sr_iw_qp *w = iqp(qp);

	w->rx.state = SR_IW_RX_STOP;
	if (w->connected && !w->term_sent && !w->term_rcvd) {
		sr_iw_term_fill(&w->term, layer, etype, ecode, bad, bad_len, seg_len);
		SR_DBG("iwarp QP %u: Terminate: %s (layer %u type %u code 0x%02x)", iw_qpn(qp),
		       sr_term_str(layer, etype, ecode), layer, etype, ecode);
		sr_iw_tx_flush_term(qp);
	}
	sr_iw_conn_end(qp, SR_IW_CLOSE_TERM_TX);
	sr_iw_qp_error(qp, ev);
}

void sr_iw_term_rx_error(struct sr_qp *qp, uint8_t layer, uint8_t etype, uint8_t ecode, int ev)
{
	struct sr_iw_rx *rx = &iqp(qp)->rx;
	uint32_t have = rx->hhave > SR_MPA_LEN_BYTES ? rx->hhave - SR_MPA_LEN_BYTES : 0;

	/* the offending segment's headers, as far as we read them */
	sr_iw_term_local(qp, layer, etype, ecode, rx->hbuf + SR_MPA_LEN_BYTES, have, rx->ulpdu_len, ev);
}

/* The completion status a Terminate means for the work request it
 * answers. */
static enum ibv_wc_status term_status(const struct sr_rdmap_term *t)
{
	switch (t->layer) {
	case SR_TERM_LAYER_RDMAP:
		return t->etype == SR_TERM_RDMAP_PROTECTION ? IBV_WC_REM_ACCESS_ERR : IBV_WC_REM_OP_ERR;
	case SR_TERM_LAYER_DDP:
		if (t->etype == SR_TERM_DDP_TAGGED)
			return IBV_WC_REM_ACCESS_ERR;
		if (t->etype == SR_TERM_DDP_UNTAGGED)
			return IBV_WC_REM_INV_REQ_ERR;
		return IBV_WC_REM_OP_ERR;
	default:
		return IBV_WC_REM_OP_ERR;
	}
}

void sr_iw_term_received(struct sr_qp *qp, const struct sr_iw_hdr *h)
{
	struct sr_iw_qp *w = iqp(qp);
	enum ibv_wc_status st = term_status(&h->term);

	w->term_rcvd = true;
	w->rx.state = SR_IW_RX_STOP;
	SR_DBG("iwarp QP %u: Terminate received: %s (layer %u type %u code 0x%02x)", iw_qpn(qp),
	       sr_term_str(h->term.layer, h->term.etype, h->term.ecode), h->term.layer, h->term.etype, h->term.ecode);
	/* Sends and Writes completed when TCP took them; what can still fail
	 * is a Read waiting for its response, or the message being sent. */
	if (w->orq_head != w->orq_tail && !w->orq[w->orq_head & w->orq_mask].rtr) {
		struct sr_send_wqe *wqe = sr_sq_wqe(&qp->sq, w->orq[w->orq_head & w->orq_mask].wqe_idx);

		wqe->state = SR_WQE_DONE;
		wqe->status = st;
	} else if (w->msg.src == SR_IW_SRC_SQ) {
		struct sr_send_wqe *wqe = sr_sq_wqe(&qp->sq, w->msg.wqe_idx);

		wqe->state = SR_WQE_DONE;
		wqe->status = st;
	}
	sr_iw_conn_end(qp, SR_IW_CLOSE_TERM_RX);
	sr_iw_qp_error(qp, IBV_EVENT_QP_FATAL);
}
