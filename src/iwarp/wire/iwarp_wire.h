/* iWARP wire formats: MPA (RFC 5044) connection setup frames with the
 * RFC 6581 enhanced connection data, FPDU framing (ULPDU length, pad,
 * CRC32c; markers are never used), DDP tagged and untagged headers
 * (RFC 5041) and the RDMAP headers (RFC 5040), with the RFC 7306
 * Immediate Data and Atomic opcodes.
 *
 * Everything here is byte-level: no sockets, no QPs.  Parsers take
 * untrusted bytes and never read past the length they are given; every
 * field that has reserved bits keeps them, so a parsed header re-encodes
 * to the same bytes.  Checked against the Linux kernel's siw on the wire
 * (tests/data/wire-samples/iwarp-kernel-siw, tests/unit/test_iwarp_wire.c)
 * and against Wireshark's iwarp_mpa / iwarp_ddp_rdmap dissectors. */
#ifndef SR_IWARP_WIRE_H
#define SR_IWARP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* ------------------------------------------------------------------ */
/* MPA connection setup: Request and Reply frames (RFC 5044 7.1) */

#define SR_MPA_KEY_LEN 16
#define SR_MPA_KEY_REQ "MPA ID Req Frame"
#define SR_MPA_KEY_REP "MPA ID Rep Frame"
#define SR_MPA_RR_HDR_LEN 20	  /* key, flags, revision, PD length */
#define SR_MPA_MAX_PD 512	  /* RFC 5044: private data is at most 512 bytes */
#define SR_MPA_V2_LEN 4		  /* RFC 6581 IRD/ORD block at the start of the private data */
#define SR_MPA_IRD_ORD_MAX 0x3fff /* 14-bit IRD and ORD */

/* The flags byte: M, C, R and five reserved bits, of which siw and
 * cxgb4 use 0x10 to say "the private data starts with the RFC 6581
 * block" in revision 2 frames. */
#define SR_MPA_FLAG_MARKERS 0x80
#define SR_MPA_FLAG_CRC 0x40
#define SR_MPA_FLAG_REJECT 0x20
#define SR_MPA_FLAG_ENHANCED 0x10
#define SR_MPA_FLAG_RES_MASK 0x1f

/* RFC 6581 IRD and ORD words: two control bits above a 14-bit count. */
#define SR_MPA_V2_P2P 0x8000	   /* IRD word: peer-to-peer mode (an RTR message follows) */
#define SR_MPA_V2_ZERO_RTR 0x4000  /* IRD word: zero-length Send as RTR */
#define SR_MPA_V2_WRITE_RTR 0x8000 /* ORD word: zero-length RDMA Write as RTR */
#define SR_MPA_V2_READ_RTR 0x4000  /* ORD word: zero-length RDMA Read as RTR */

/* Which ready-to-receive message the initiator sends first after an
 * RFC 6581 peer-to-peer exchange (and the responder waits for). */
enum sr_mpa_rtr {
	SR_MPA_RTR_NONE = 0,
	SR_MPA_RTR_SEND = 1,  /* zero-length Send (QN 0) */
	SR_MPA_RTR_WRITE = 2, /* zero-length RDMA Write */
	SR_MPA_RTR_READ = 3,  /* zero-length RDMA Read Request, answered by a zero-length Read Response */
};

struct sr_mpa_rr {
	bool reply; /* "MPA ID Rep Frame" rather than "... Req ..." */
	bool markers, crc, reject;
	uint8_t res; /* the five low flag bits, as on the wire (enhanced included) */
	uint8_t rev; /* 1 or 2 */
	/* RFC 6581 enhanced connection data: present iff rev >= 2 and the
	 * SR_MPA_FLAG_ENHANCED bit is set (as siw and cxgb4 send it) */
	bool enhanced;
	uint16_t ird_word, ord_word; /* raw words: control bits and counts */
	/* private data of the ULP (rdma_cm), after the enhanced block */
	const uint8_t *pd;
	uint16_t pd_len;
};

static inline uint16_t sr_mpa_ird(const struct sr_mpa_rr *rr)
{
	return rr->ird_word & SR_MPA_IRD_ORD_MAX;
}
static inline uint16_t sr_mpa_ord(const struct sr_mpa_rr *rr)
{
	return rr->ord_word & SR_MPA_IRD_ORD_MAX;
}
/* The RTR message an enhanced frame announces (none, or the first of
 * Write, Read, Send that is set). */
enum sr_mpa_rtr sr_mpa_rr_rtr(const struct sr_mpa_rr *rr);
/* Fill the RFC 6581 words of a frame: enhanced, ird/ord counts (capped to
 * 14 bits), peer-to-peer mode and the RTR message it offers (several RTR
 * types may be offered by a Request: bits of 1 << enum sr_mpa_rtr). */
void sr_mpa_rr_set_v2(struct sr_mpa_rr *rr, uint16_t ird, uint16_t ord, bool p2p, unsigned int rtr_mask);

/* Total frame length announced by a complete 20-byte header, or 0 when
 * hdr is not an MPA Request/Reply header (wrong key). */
size_t sr_mpa_rr_frame_len(const uint8_t *hdr, size_t len);
/* What a receiver holding the first `have` bytes of a Request/Reply in a
 * buffer of cap bytes must do next: > 0, read that many more bytes (never
 * past the frame's end); 0, the frame is complete (have is its length);
 * -EPROTO, the bytes are not MPA (a wrong key is known from its first byte
 * that differs); -EMSGSIZE, the frame announces more than cap bytes. */
int sr_mpa_rr_need(const uint8_t *buf, size_t have, size_t cap);
/* Parse one Request or Reply frame.  Returns its length, -EAGAIN if more
 * bytes are needed, -EPROTO for a wrong key, -EMSGSIZE for private data
 * over 512 bytes, -EINVAL for an enhanced frame too short for its IRD/ORD
 * block.  rr->pd points into buf. */
int sr_mpa_rr_parse(struct sr_mpa_rr *rr, const uint8_t *buf, size_t len);
/* Encode a frame.  Returns its length, or -EMSGSIZE (private data too
 * long), -ENOSPC (cap too small). */
int sr_mpa_rr_build(uint8_t *buf, size_t cap, const struct sr_mpa_rr *rr);

/* ------------------------------------------------------------------ */
/* FPDU framing (RFC 5044 4): ULPDU_Length | ULPDU | pad to 4 | CRC32c.
 * The CRC covers the length field, the ULPDU and the pad; on the wire it
 * is the little-endian image of the CRC32c register value (what siw
 * sends and Wireshark checks).  Without CRC negotiated the field is 0. */

#define SR_MPA_LEN_BYTES 2
#define SR_MPA_CRC_BYTES 4
#define SR_MPA_MAX_ULPDU 0xffff

static inline uint32_t sr_mpa_pad(uint32_t ulpdu_len)
{
	return (uint32_t)(-(int32_t)(ulpdu_len + SR_MPA_LEN_BYTES)) & 3;
}

static inline uint32_t sr_mpa_fpdu_len(uint32_t ulpdu_len)
{
	return SR_MPA_LEN_BYTES + ulpdu_len + sr_mpa_pad(ulpdu_len) + SR_MPA_CRC_BYTES;
}

/* CRC32c register update (init ~0, final ~); ISA-L when built with it. */
uint32_t sr_mpa_crc_update(uint32_t crc, const void *buf, size_t len);
/* The CRC field value over an iovec (length field, ULPDU and pad). */
uint32_t sr_mpa_crc_iov(const struct iovec *iov, int niov);
static inline void sr_mpa_crc_store(uint8_t out[4], uint32_t crc)
{
	out[0] = (uint8_t)crc;
	out[1] = (uint8_t)(crc >> 8);
	out[2] = (uint8_t)(crc >> 16);
	out[3] = (uint8_t)(crc >> 24);
}
static inline uint32_t sr_mpa_crc_load(const uint8_t in[4])
{
	return (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 24;
}

/* One FPDU found in a buffer. */
struct sr_mpa_fpdu {
	uint16_t ulpdu_len;
	const uint8_t *ulpdu; /* into the buffer */
	uint8_t pad;	      /* pad bytes (their value in pad_nonzero) */
	bool pad_nonzero;
	uint32_t crc;	   /* as received */
	uint32_t crc_calc; /* computed over the FPDU */
	size_t len;	   /* whole FPDU */
};
/* Split the FPDU at buf.  Returns its length, -EAGAIN if it is not all
 * there yet. */
int sr_mpa_fpdu_split(struct sr_mpa_fpdu *f, const uint8_t *buf, size_t len);

/* ------------------------------------------------------------------ */
/* DDP (RFC 5041 4) and RDMAP (RFC 5040 4, RFC 7306) */

#define SR_DDP_VERSION 1
#define SR_RDMAP_VERSION 1

#define SR_DDP_FLAG_TAGGED 0x80
#define SR_DDP_FLAG_LAST 0x40
#define SR_DDP_RSVD_MASK 0x3c
#define SR_DDP_DV_MASK 0x03

#define SR_DDP_TAGGED_HDR 14   /* ctrl, RsvdULP(1), STag, TO */
#define SR_DDP_UNTAGGED_HDR 18 /* ctrl, RsvdULP(5), QN, MSN, MO */
#define SR_RDMAP_RREQ_LEN 28   /* sink STag/TO, size, source STag/TO */
#define SR_RDMAP_TERM_CTRL_LEN 4
#define SR_RDMAP_ATOMIC_REQ_LEN 52
#define SR_RDMAP_ATOMIC_RESP_LEN 12
#define SR_RDMAP_IMM_LEN 8 /* Immediate Data payload */
/* The largest DDP+RDMAP header: a Terminate carrying an untagged DDP
 * header and a Read Request header. */
#define SR_IW_MAX_HDR (SR_DDP_UNTAGGED_HDR + SR_RDMAP_TERM_CTRL_LEN + 2 + SR_DDP_UNTAGGED_HDR + SR_RDMAP_RREQ_LEN)

enum sr_rdmap_opcode {
	SR_RDMAP_WRITE = 0x0,
	SR_RDMAP_READ_REQ = 0x1,
	SR_RDMAP_READ_RESP = 0x2,
	SR_RDMAP_SEND = 0x3,
	SR_RDMAP_SEND_INV = 0x4,
	SR_RDMAP_SEND_SE = 0x5,
	SR_RDMAP_SEND_SE_INV = 0x6,
	SR_RDMAP_TERMINATE = 0x7,
	SR_RDMAP_IMM = 0x8,	    /* RFC 7306 Immediate Data */
	SR_RDMAP_IMM_SE = 0x9,	    /* RFC 7306 Immediate Data with Solicited Event */
	SR_RDMAP_ATOMIC_REQ = 0xa,  /* RFC 7306 */
	SR_RDMAP_ATOMIC_RESP = 0xb, /* RFC 7306 */
	SR_RDMAP_NOPS = 0xc,
};

/* Untagged queues (RFC 5040 5.1, RFC 7306). */
enum sr_ddp_qn {
	SR_DDP_QN_SEND = 0,
	SR_DDP_QN_READ_REQ = 1,
	SR_DDP_QN_TERMINATE = 2,
	SR_DDP_QN_ATOMIC = 3,
	SR_DDP_NQN = 4,
};

/* Per-opcode facts, table-driven as rxe_opcode.c. */
struct sr_rdmap_opinfo {
	const char *name;
	bool tagged;	 /* DDP buffer model */
	uint8_t qn;	 /* untagged: the queue */
	uint8_t hdr_len; /* DDP + RDMAP header bytes (Terminate: the fixed part) */
	bool payload;	 /* carries ULP payload */
	bool inval;	 /* RsvdULP carries the Invalidate STag */
	bool se;	 /* solicited event */
};
extern const struct sr_rdmap_opinfo sr_rdmap_op[SR_RDMAP_NOPS];

/* RFC 5040 4.4 */
struct sr_rdmap_rreq {
	uint32_t sink_stag;
	uint64_t sink_to;
	uint32_t size;
	uint32_t src_stag;
	uint64_t src_to;
};

/* Terminate (RFC 5040 4.8): layers, error types and codes. */
enum sr_term_layer {
	SR_TERM_LAYER_RDMAP = 0,
	SR_TERM_LAYER_DDP = 1,
	SR_TERM_LAYER_LLP = 2
};
enum sr_term_rdmap_etype {
	SR_TERM_RDMAP_CATASTROPHIC = 0,
	SR_TERM_RDMAP_PROTECTION = 1,
	SR_TERM_RDMAP_OPERATION = 2
};
enum sr_term_rdmap_ecode {
	SR_TERM_RDMAP_INV_STAG = 0x00,
	SR_TERM_RDMAP_BASE_BOUNDS = 0x01,
	SR_TERM_RDMAP_ACCESS = 0x02,
	SR_TERM_RDMAP_STAG_NOT_ASSOC = 0x03,
	SR_TERM_RDMAP_TO_WRAP = 0x04,
	SR_TERM_RDMAP_VERSION = 0x05,
	SR_TERM_RDMAP_OPCODE = 0x06,
	SR_TERM_RDMAP_CATASTROPHIC_STREAM = 0x07,
	SR_TERM_RDMAP_CATASTROPHIC_GLOBAL = 0x08,
	SR_TERM_RDMAP_CANNOT_INVALIDATE = 0x09,
	SR_TERM_RDMAP_UNSPECIFIED = 0xff,
};
enum sr_term_ddp_etype {
	SR_TERM_DDP_CATASTROPHIC = 0,
	SR_TERM_DDP_TAGGED = 1,
	SR_TERM_DDP_UNTAGGED = 2
};
enum sr_term_ddp_ecode {
	SR_TERM_DDP_T_INV_STAG = 0x00,
	SR_TERM_DDP_T_BASE_BOUNDS = 0x01,
	SR_TERM_DDP_T_STAG_NOT_ASSOC = 0x02,
	SR_TERM_DDP_T_TO_WRAP = 0x03,
	SR_TERM_DDP_T_VERSION = 0x04,
	SR_TERM_DDP_U_INV_QN = 0x01,
	SR_TERM_DDP_U_NO_BUF = 0x02,
	SR_TERM_DDP_U_MSN_RANGE = 0x03,
	SR_TERM_DDP_U_INV_MO = 0x04,
	SR_TERM_DDP_U_TOO_LONG = 0x05,
	SR_TERM_DDP_U_VERSION = 0x06,
};
enum sr_term_llp_etype {
	SR_TERM_LLP_MPA = 0
};
enum sr_term_llp_ecode {
	SR_TERM_MPA_TCP_LOST = 0x01,
	SR_TERM_MPA_CRC = 0x02,
	SR_TERM_MPA_FPDU = 0x03, /* marker / ULPDU length mismatch: a framing error */
	SR_TERM_MPA_REQ_RESP = 0x04,
	SR_TERM_MPA_LOCAL_CATASTROPHIC = 0x05, /* RFC 6581 */
	SR_TERM_MPA_INSUFFICIENT_IRD = 0x06,   /* RFC 6581 */
	SR_TERM_MPA_NO_MATCHING_RTR = 0x07,    /* RFC 6581 */
};
#define SR_TERM_HDRCT_M 0x80 /* DDP Segment Length valid */
#define SR_TERM_HDRCT_D 0x40 /* terminated DDP header included */
#define SR_TERM_HDRCT_R 0x20 /* terminated RDMA header included */

struct sr_rdmap_term {
	uint8_t layer, etype, ecode;
	uint8_t hdrct; /* SR_TERM_HDRCT_* */
	uint16_t rsvd; /* the 13 reserved bits */
	/* present when M or D is set: */
	uint16_t ddp_seg_len;
	uint8_t ddp_hdr[SR_DDP_UNTAGGED_HDR];
	uint8_t ddp_hdr_len; /* 14 (tagged) or 18 (untagged), by the copied header's T flag */
	/* present when R is set: */
	uint8_t rdma_hdr[SR_RDMAP_RREQ_LEN];
};

/* RFC 7306 atomics */
enum sr_rdmap_atomic_op {
	SR_ATOMIC_FETCH_ADD = 0x0,
	SR_ATOMIC_CMP_SWAP = 0x2
};
struct sr_rdmap_atomic_req {
	uint32_t op_word; /* 28 reserved bits, 4-bit atomic opcode */
	uint32_t req_id;
	uint32_t stag;
	uint64_t to;
	uint64_t add_swap, add_swap_mask;
	uint64_t cmp, cmp_mask;
};
struct sr_rdmap_atomic_resp {
	uint32_t req_id;
	uint64_t orig;
};

/* A DDP segment's headers (the ULPDU minus its payload). */
struct sr_iw_hdr {
	/* DDP control */
	bool tagged, last;
	uint8_t ddp_rsvd; /* the four reserved bits, in place (mask 0x3c) */
	uint8_t ddp_version;
	/* RDMAP control */
	uint8_t rdmap_version;
	uint8_t rdmap_rsvd; /* two reserved bits, in place (mask 0x30) */
	uint8_t opcode;
	/* tagged buffer model */
	uint32_t stag;
	uint64_t to;
	/* untagged buffer model */
	uint32_t rsvdulp; /* RDMAP: reserved, or the Invalidate STag */
	uint32_t qn, msn, mo;
	union {
		struct sr_rdmap_rreq rreq;
		struct sr_rdmap_term term;
		struct sr_rdmap_atomic_req areq;
		struct sr_rdmap_atomic_resp aresp;
	};
	uint32_t hdr_len; /* DDP+RDMAP header bytes */
};

/* Parse errors; each tells what Terminate it deserves. */
enum sr_iw_parse_err {
	SR_IW_OK = 0,
	SR_IW_EAGAIN = -1, /* not enough bytes yet */
	SR_IW_EDDP_VERSION = -2,
	SR_IW_ERDMAP_VERSION = -3,
	SR_IW_EOPCODE = -4, /* unknown opcode, or tagged flag wrong for it */
	SR_IW_ESHORT = -5,  /* ULPDU shorter than the header it announces */
	SR_IW_ETERM = -6,   /* Terminate whose optional parts don't fit its length */
};

/* Header bytes needed to parse the segment whose first two ULPDU bytes
 * (DDP and RDMAP control) are ctrl; for a Terminate that is its whole
 * ULPDU up to SR_IW_MAX_HDR.  Returns 0 for a bad version or opcode. */
uint32_t sr_iw_hdr_need(const uint8_t ctrl[2], uint32_t ulpdu_len);
/* Parse the headers at the start of a ULPDU of ulpdu_len bytes, of which
 * avail are at p.  Returns the header length, or an sr_iw_parse_err. */
int sr_iw_hdr_parse(struct sr_iw_hdr *h, const uint8_t *p, size_t avail, uint32_t ulpdu_len);
/* Encode h (hdr_len is recomputed and returned).  out needs SR_IW_MAX_HDR. */
uint32_t sr_iw_hdr_build(uint8_t *out, struct sr_iw_hdr *h);
/* Fill the common fields of an outgoing segment of opcode op: versions,
 * tagged flag, queue number, last flag. */
void sr_iw_hdr_init(struct sr_iw_hdr *h, enum sr_rdmap_opcode op, bool last);

/* Build a Terminate's RDMAP fields for an error (layer/etype/ecode), with
 * the offending segment's headers (raw: from its DDP control byte, of
 * bad_len bytes; NULL if none) copied in as RFC 5040 4.8 and siw do:
 * none for LLP errors and unknown versions/opcodes, the DDP header for
 * DDP errors, DDP and Read Request headers for RDMAP errors on a Read
 * Request.  ddp_seg_len is the offending segment's ULPDU length. */
void sr_iw_term_fill(struct sr_iw_hdr *h, uint8_t layer, uint8_t etype, uint8_t ecode, const uint8_t *bad,
		     uint32_t bad_len, uint32_t ddp_seg_len);

const char *sr_term_layer_str(uint8_t layer);
/* "DDP tagged: base or bounds violation" and the like. */
const char *sr_term_str(uint8_t layer, uint8_t etype, uint8_t ecode);

#endif
