/* DDP (RFC 5041) and RDMAP (RFC 5040, RFC 7306) headers: the opcode
 * table, parsing and encoding, Terminate contents and names. */
#include <string.h>

#include "iwarp/wire/iwarp_wire.h"

#define T SR_DDP_TAGGED_HDR
#define U SR_DDP_UNTAGGED_HDR
const struct sr_rdmap_opinfo sr_rdmap_op[SR_RDMAP_NOPS] = {
	[SR_RDMAP_WRITE] = { "RDMA Write", true, 0, T, true, false, false },
	[SR_RDMAP_READ_REQ] = { "RDMA Read Request", false, SR_DDP_QN_READ_REQ, U + SR_RDMAP_RREQ_LEN, false, false,
				false },
	[SR_RDMAP_READ_RESP] = { "RDMA Read Response", true, 0, T, true, false, false },
	[SR_RDMAP_SEND] = { "Send", false, SR_DDP_QN_SEND, U, true, false, false },
	[SR_RDMAP_SEND_INV] = { "Send with Invalidate", false, SR_DDP_QN_SEND, U, true, true, false },
	[SR_RDMAP_SEND_SE] = { "Send with Solicited Event", false, SR_DDP_QN_SEND, U, true, false, true },
	[SR_RDMAP_SEND_SE_INV] = { "Send with Solicited Event and Invalidate", false, SR_DDP_QN_SEND, U, true, true,
				   true },
	[SR_RDMAP_TERMINATE] = { "Terminate", false, SR_DDP_QN_TERMINATE, U + SR_RDMAP_TERM_CTRL_LEN, false, false,
				 false },
	[SR_RDMAP_IMM] = { "Immediate Data", false, SR_DDP_QN_SEND, U, true, false, false },
	[SR_RDMAP_IMM_SE] = { "Immediate Data with Solicited Event", false, SR_DDP_QN_SEND, U, true, false, true },
	[SR_RDMAP_ATOMIC_REQ] = { "Atomic Request", false, SR_DDP_QN_ATOMIC, U + SR_RDMAP_ATOMIC_REQ_LEN, false, false,
				  false },
	[SR_RDMAP_ATOMIC_RESP] = { "Atomic Response", false, SR_DDP_QN_ATOMIC, U + SR_RDMAP_ATOMIC_RESP_LEN, false,
				   false, false },
};
#undef T
#undef U

static inline uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}
static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}
static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static inline void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}
static inline void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

/* Length of a Terminate's optional parts as its header control bits and
 * the copied DDP header's tagged flag say (0 if it can't be known yet). */
static uint32_t term_tail_len(uint8_t hdrct, const uint8_t *tail, size_t avail)
{
	uint32_t n = 0;

	if (hdrct & (SR_TERM_HDRCT_M | SR_TERM_HDRCT_D)) {
		if (avail < 3)
			return 0;
		n = 2 + ((tail[2] & SR_DDP_FLAG_TAGGED) ? SR_DDP_TAGGED_HDR : SR_DDP_UNTAGGED_HDR);
	}
	if (hdrct & SR_TERM_HDRCT_R)
		n += SR_RDMAP_RREQ_LEN;
	return n;
}

uint32_t sr_iw_hdr_need(const uint8_t ctrl[2], uint32_t ulpdu_len)
{
	uint8_t op = ctrl[1] & 0x0f;

	if ((ctrl[0] & SR_DDP_DV_MASK) != SR_DDP_VERSION || (ctrl[1] >> 6) != SR_RDMAP_VERSION || op >= SR_RDMAP_NOPS)
		return 0;
	if (op == SR_RDMAP_TERMINATE)
		return ulpdu_len < SR_IW_MAX_HDR ? ulpdu_len : SR_IW_MAX_HDR;
	return sr_rdmap_op[op].hdr_len;
}

int sr_iw_hdr_parse(struct sr_iw_hdr *h, const uint8_t *p, size_t avail, uint32_t ulpdu_len)
{
	const struct sr_rdmap_opinfo *oi;
	uint32_t need;

	memset(h, 0, sizeof(*h));
	if (avail > ulpdu_len)
		avail = ulpdu_len;
	if (ulpdu_len < 2)
		return SR_IW_ESHORT;
	if (avail < 2)
		return SR_IW_EAGAIN;
	h->tagged = p[0] & SR_DDP_FLAG_TAGGED;
	h->last = p[0] & SR_DDP_FLAG_LAST;
	h->ddp_rsvd = p[0] & SR_DDP_RSVD_MASK;
	h->ddp_version = p[0] & SR_DDP_DV_MASK;
	h->rdmap_version = p[1] >> 6;
	h->rdmap_rsvd = p[1] & 0x30;
	h->opcode = p[1] & 0x0f;
	/* what the segment is can't be trusted past a version we don't speak */
	if (h->ddp_version != SR_DDP_VERSION)
		return SR_IW_EDDP_VERSION;
	if (h->rdmap_version != SR_RDMAP_VERSION)
		return SR_IW_ERDMAP_VERSION;
	if (h->opcode >= SR_RDMAP_NOPS)
		return SR_IW_EOPCODE;
	oi = &sr_rdmap_op[h->opcode];
	if (oi->tagged != h->tagged)
		return SR_IW_EOPCODE;
	need = oi->hdr_len;
	if (ulpdu_len < need)
		return SR_IW_ESHORT;
	if (avail < need)
		return SR_IW_EAGAIN;
	if (h->tagged) {
		h->stag = get32(p + 2);
		h->to = get64(p + 6);
	} else {
		h->rsvdulp = get32(p + 2);
		h->qn = get32(p + 6);
		h->msn = get32(p + 10);
		h->mo = get32(p + 14);
	}
	p += h->tagged ? SR_DDP_TAGGED_HDR : SR_DDP_UNTAGGED_HDR;
	switch (h->opcode) {
	case SR_RDMAP_READ_REQ:
		h->rreq.sink_stag = get32(p);
		h->rreq.sink_to = get64(p + 4);
		h->rreq.size = get32(p + 12);
		h->rreq.src_stag = get32(p + 16);
		h->rreq.src_to = get64(p + 20);
		break;
	case SR_RDMAP_TERMINATE: {
		struct sr_rdmap_term *t = &h->term;
		uint32_t tail;

		t->layer = p[0] >> 4;
		t->etype = p[0] & 0x0f;
		t->ecode = p[1];
		t->hdrct = p[2] & 0xe0;
		t->rsvd = get16(p + 2) & 0x1fff;
		p += SR_RDMAP_TERM_CTRL_LEN;
		if (t->hdrct & (SR_TERM_HDRCT_M | SR_TERM_HDRCT_D)) {
			if (ulpdu_len < need + 3)
				return SR_IW_ETERM;
			if (avail < need + 3)
				return SR_IW_EAGAIN;
		}
		tail = term_tail_len(t->hdrct, p, avail - need);
		if (ulpdu_len < need + tail)
			return SR_IW_ETERM;
		if (avail < need + tail)
			return SR_IW_EAGAIN;
		if (t->hdrct & (SR_TERM_HDRCT_M | SR_TERM_HDRCT_D)) {
			t->ddp_seg_len = get16(p);
			t->ddp_hdr_len = (p[2] & SR_DDP_FLAG_TAGGED) ? SR_DDP_TAGGED_HDR : SR_DDP_UNTAGGED_HDR;
			memcpy(t->ddp_hdr, p + 2, t->ddp_hdr_len);
			p += 2 + t->ddp_hdr_len;
		}
		if (t->hdrct & SR_TERM_HDRCT_R)
			memcpy(t->rdma_hdr, p, SR_RDMAP_RREQ_LEN);
		need += tail;
		break;
	}
	case SR_RDMAP_ATOMIC_REQ:
		h->areq.op_word = get32(p);
		h->areq.req_id = get32(p + 4);
		h->areq.stag = get32(p + 8);
		h->areq.to = get64(p + 12);
		h->areq.add_swap = get64(p + 20);
		h->areq.add_swap_mask = get64(p + 28);
		h->areq.cmp = get64(p + 36);
		h->areq.cmp_mask = get64(p + 44);
		break;
	case SR_RDMAP_ATOMIC_RESP:
		h->aresp.req_id = get32(p);
		h->aresp.orig = get64(p + 4);
		break;
	default:
		break;
	}
	h->hdr_len = need;
	return (int)need;
}

void sr_iw_hdr_init(struct sr_iw_hdr *h, enum sr_rdmap_opcode op, bool last)
{
	memset(h, 0, sizeof(*h));
	h->opcode = (uint8_t)op;
	h->tagged = sr_rdmap_op[op].tagged;
	h->qn = sr_rdmap_op[op].qn;
	h->last = last;
	h->ddp_version = SR_DDP_VERSION;
	h->rdmap_version = SR_RDMAP_VERSION;
}

uint32_t sr_iw_hdr_build(uint8_t *out, struct sr_iw_hdr *h)
{
	uint8_t *p = out;

	p[0] = (uint8_t)((h->tagged ? SR_DDP_FLAG_TAGGED : 0) | (h->last ? SR_DDP_FLAG_LAST : 0) |
			 (h->ddp_rsvd & SR_DDP_RSVD_MASK) | (h->ddp_version & SR_DDP_DV_MASK));
	p[1] = (uint8_t)((h->rdmap_version & 3) << 6 | (h->rdmap_rsvd & 0x30) | (h->opcode & 0x0f));
	if (h->tagged) {
		put32(p + 2, h->stag);
		put64(p + 6, h->to);
		p += SR_DDP_TAGGED_HDR;
	} else {
		put32(p + 2, h->rsvdulp);
		put32(p + 6, h->qn);
		put32(p + 10, h->msn);
		put32(p + 14, h->mo);
		p += SR_DDP_UNTAGGED_HDR;
	}
	switch (h->opcode) {
	case SR_RDMAP_READ_REQ:
		put32(p, h->rreq.sink_stag);
		put64(p + 4, h->rreq.sink_to);
		put32(p + 12, h->rreq.size);
		put32(p + 16, h->rreq.src_stag);
		put64(p + 20, h->rreq.src_to);
		p += SR_RDMAP_RREQ_LEN;
		break;
	case SR_RDMAP_TERMINATE: {
		struct sr_rdmap_term *t = &h->term;

		p[0] = (uint8_t)(t->layer << 4 | (t->etype & 0x0f));
		p[1] = t->ecode;
		put16(p + 2, (uint16_t)((t->hdrct & 0xe0) << 8 | (t->rsvd & 0x1fff)));
		p += SR_RDMAP_TERM_CTRL_LEN;
		if (t->hdrct & (SR_TERM_HDRCT_M | SR_TERM_HDRCT_D)) {
			put16(p, t->ddp_seg_len);
			memcpy(p + 2, t->ddp_hdr, t->ddp_hdr_len);
			p += 2 + t->ddp_hdr_len;
		}
		if (t->hdrct & SR_TERM_HDRCT_R) {
			memcpy(p, t->rdma_hdr, SR_RDMAP_RREQ_LEN);
			p += SR_RDMAP_RREQ_LEN;
		}
		break;
	}
	case SR_RDMAP_ATOMIC_REQ:
		put32(p, h->areq.op_word);
		put32(p + 4, h->areq.req_id);
		put32(p + 8, h->areq.stag);
		put64(p + 12, h->areq.to);
		put64(p + 20, h->areq.add_swap);
		put64(p + 28, h->areq.add_swap_mask);
		put64(p + 36, h->areq.cmp);
		put64(p + 44, h->areq.cmp_mask);
		p += SR_RDMAP_ATOMIC_REQ_LEN;
		break;
	case SR_RDMAP_ATOMIC_RESP:
		put32(p, h->aresp.req_id);
		put64(p + 4, h->aresp.orig);
		p += SR_RDMAP_ATOMIC_RESP_LEN;
		break;
	default:
		break;
	}
	h->hdr_len = (uint32_t)(p - out);
	return h->hdr_len;
}

void sr_iw_term_fill(struct sr_iw_hdr *h, uint8_t layer, uint8_t etype, uint8_t ecode, const uint8_t *bad,
		     uint32_t bad_len, uint32_t ddp_seg_len)
{
	struct sr_rdmap_term *t;
	bool ddp = false, rdma = false;

	sr_iw_hdr_init(h, SR_RDMAP_TERMINATE, true);
	h->msn = 1; /* every stream sends at most one Terminate */
	t = &h->term;
	t->layer = layer;
	t->etype = etype;
	t->ecode = ecode;
	if (bad && bad_len >= 2) {
		bool tagged = bad[0] & SR_DDP_FLAG_TAGGED;
		uint32_t dlen = tagged ? SR_DDP_TAGGED_HDR : SR_DDP_UNTAGGED_HDR;
		uint8_t op = bad[1] & 0x0f;

		switch (layer) {
		case SR_TERM_LAYER_DDP:
			/* a DDP header of a version we don't know has no known layout */
			ddp = !((etype == SR_TERM_DDP_TAGGED && ecode == SR_TERM_DDP_T_VERSION) ||
				(etype == SR_TERM_DDP_UNTAGGED && ecode == SR_TERM_DDP_U_VERSION));
			break;
		case SR_TERM_LAYER_RDMAP:
			if (etype == SR_TERM_RDMAP_CATASTROPHIC || ecode == SR_TERM_RDMAP_VERSION ||
			    ecode == SR_TERM_RDMAP_OPCODE)
				break;
			ddp = true;
			rdma = !tagged && op == SR_RDMAP_READ_REQ;
			break;
		default:
			break;
		}
		if (ddp && bad_len >= dlen) {
			t->hdrct |= SR_TERM_HDRCT_M | SR_TERM_HDRCT_D;
			/* RFC 5040 4.8: the length of the DDP segment (its whole
			 * ULPDU).  siw puts the payload length here instead. */
			t->ddp_seg_len = (uint16_t)ddp_seg_len;
			t->ddp_hdr_len = (uint8_t)dlen;
			memcpy(t->ddp_hdr, bad, dlen);
			if (rdma && bad_len >= dlen + SR_RDMAP_RREQ_LEN) {
				t->hdrct |= SR_TERM_HDRCT_R;
				memcpy(t->rdma_hdr, bad + dlen, SR_RDMAP_RREQ_LEN);
			}
		}
	}
}

const char *sr_term_layer_str(uint8_t layer)
{
	switch (layer) {
	case SR_TERM_LAYER_RDMAP:
		return "RDMAP";
	case SR_TERM_LAYER_DDP:
		return "DDP";
	case SR_TERM_LAYER_LLP:
		return "MPA";
	default:
		return "unknown layer";
	}
}

const char *sr_term_str(uint8_t layer, uint8_t etype, uint8_t ecode)
{
	switch (layer) {
	case SR_TERM_LAYER_RDMAP:
		if (etype == SR_TERM_RDMAP_CATASTROPHIC)
			return "RDMAP local catastrophic error";
		switch (ecode) {
		case SR_TERM_RDMAP_INV_STAG:
			return "RDMAP: invalid STag";
		case SR_TERM_RDMAP_BASE_BOUNDS:
			return "RDMAP: base or bounds violation";
		case SR_TERM_RDMAP_ACCESS:
			return "RDMAP: access rights violation";
		case SR_TERM_RDMAP_STAG_NOT_ASSOC:
			return "RDMAP: STag not associated with RDMAP stream";
		case SR_TERM_RDMAP_TO_WRAP:
			return "RDMAP: TO wrap";
		case SR_TERM_RDMAP_VERSION:
			return "RDMAP: invalid RDMAP version";
		case SR_TERM_RDMAP_OPCODE:
			return "RDMAP: unexpected opcode";
		case SR_TERM_RDMAP_CATASTROPHIC_STREAM:
			return "RDMAP: catastrophic error, localized to RDMAP stream";
		case SR_TERM_RDMAP_CATASTROPHIC_GLOBAL:
			return "RDMAP: catastrophic error, global";
		case SR_TERM_RDMAP_CANNOT_INVALIDATE:
			return "RDMAP: STag cannot be invalidated";
		default:
			return "RDMAP: unspecified error";
		}
	case SR_TERM_LAYER_DDP:
		if (etype == SR_TERM_DDP_TAGGED) {
			switch (ecode) {
			case SR_TERM_DDP_T_INV_STAG:
				return "DDP tagged: invalid STag";
			case SR_TERM_DDP_T_BASE_BOUNDS:
				return "DDP tagged: base or bounds violation";
			case SR_TERM_DDP_T_STAG_NOT_ASSOC:
				return "DDP tagged: STag not associated with DDP stream";
			case SR_TERM_DDP_T_TO_WRAP:
				return "DDP tagged: TO wrap";
			case SR_TERM_DDP_T_VERSION:
				return "DDP tagged: invalid DDP version";
			default:
				return "DDP tagged: unknown error";
			}
		}
		if (etype == SR_TERM_DDP_UNTAGGED) {
			switch (ecode) {
			case SR_TERM_DDP_U_INV_QN:
				return "DDP untagged: invalid QN";
			case SR_TERM_DDP_U_NO_BUF:
				return "DDP untagged: invalid MSN, no buffer available";
			case SR_TERM_DDP_U_MSN_RANGE:
				return "DDP untagged: invalid MSN, MSN range not valid";
			case SR_TERM_DDP_U_INV_MO:
				return "DDP untagged: invalid MO";
			case SR_TERM_DDP_U_TOO_LONG:
				return "DDP untagged: message too long for available buffer";
			case SR_TERM_DDP_U_VERSION:
				return "DDP untagged: invalid DDP version";
			default:
				return "DDP untagged: unknown error";
			}
		}
		return "DDP local catastrophic error";
	case SR_TERM_LAYER_LLP:
		switch (ecode) {
		case SR_TERM_MPA_TCP_LOST:
			return "MPA: TCP connection closed, terminated or lost";
		case SR_TERM_MPA_CRC:
			return "MPA: CRC error";
		case SR_TERM_MPA_FPDU:
			return "MPA: ULPDU length (framing) error";
		case SR_TERM_MPA_REQ_RESP:
			return "MPA: invalid Request or Reply frame";
		case SR_TERM_MPA_LOCAL_CATASTROPHIC:
			return "MPA: local catastrophic error";
		case SR_TERM_MPA_INSUFFICIENT_IRD:
			return "MPA: insufficient IRD resources";
		case SR_TERM_MPA_NO_MATCHING_RTR:
			return "MPA: no matching RTR option";
		default:
			return "MPA: unknown error";
		}
	default:
		return "unknown layer";
	}
}
