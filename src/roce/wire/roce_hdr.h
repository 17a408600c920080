/* RoCEv2 transport headers: the opcode table, parsing and building of
 * BTH and its extension headers (RETH, AETH, AtomicETH, AtomicAckETH,
 * ImmDt, IETH, DETH), and the ICRC.
 *
 * Field names follow the IBTA specification, vol. 1, chapter 9.
 * Opcode values are rdma-core's <infiniband/opcode.h> (IBV_OPCODE_*). */
#ifndef SR_ROCE_HDR_H
#define SR_ROCE_HDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <infiniband/opcode.h>

#define SR_BTH_BYTES 12
#define SR_RETH_BYTES 16
#define SR_AETH_BYTES 4
#define SR_ATMETH_BYTES 28
#define SR_ATMACK_BYTES 8
#define SR_IMMDT_BYTES 4
#define SR_IETH_BYTES 4
#define SR_DETH_BYTES 8
#define SR_XRCETH_BYTES 4
#define SR_ICRC_BYTES 4
#define SR_MAX_HDR_BYTES (SR_BTH_BYTES + SR_DETH_BYTES + SR_RETH_BYTES + SR_ATMETH_BYTES + SR_IMMDT_BYTES)

#define SR_PSN_MASK 0xffffffu
#define SR_QPN_MASK 0xffffffu
#define SR_DEFAULT_PKEY 0xffff
#define SR_GSI_QKEY 0x80010000u

/* Opcode attributes (sr_opcode_info.mask). */
enum sr_op_mask {
	SR_OP_RETH = 1u << 0,
	SR_OP_AETH = 1u << 1,
	SR_OP_ATMETH = 1u << 2,
	SR_OP_ATMACK = 1u << 3,
	SR_OP_IMMDT = 1u << 4,
	SR_OP_IETH = 1u << 5,
	SR_OP_DETH = 1u << 6,
	SR_OP_PAYLOAD = 1u << 7, /* carries data payload */
	SR_OP_REQ = 1u << 8,	 /* sent by a requester */
	SR_OP_ACK = 1u << 9,	 /* sent by a responder (ACK, read response, atomic ack) */
	SR_OP_SEND = 1u << 10,
	SR_OP_WRITE = 1u << 11,
	SR_OP_READ = 1u << 12, /* read request (REQ) or read response (ACK) */
	SR_OP_ATOMIC = 1u << 13,
	SR_OP_FIRST = 1u << 14,
	SR_OP_MIDDLE = 1u << 15,
	SR_OP_LAST = 1u << 16,
	SR_OP_ONLY = SR_OP_FIRST | SR_OP_LAST,
	SR_OP_RWR = 1u << 17,  /* consumes a receive WQE at the responder */
	SR_OP_COMP = 1u << 18, /* completes a message at the responder (last/only) */
	SR_OP_RC = 1u << 19,
	SR_OP_UC = 1u << 20,
	SR_OP_UD = 1u << 21,
	SR_OP_XRCETH = 1u << 22, /* an XRC request: the XRCETH names the SRQ */
	SR_OP_XRC = 1u << 23,
};

struct sr_opcode_info {
	const char *name; /* e.g. "RC SEND_FIRST"; NULL = opcode not supported */
	uint32_t mask;	  /* enum sr_op_mask */
	uint8_t hdr_len;  /* BTH + extension headers, bytes */
};

/* Indexed by opcode byte. Unsupported opcodes have name == NULL. */
extern const struct sr_opcode_info sr_opcode[256];

/* A parsed packet (the UDP payload). All fields in host byte order except
 * imm_data, which stays in network order as ibv_wc.imm_data is. */
struct sr_pkt {
	uint8_t opcode;
	uint32_t mask; /* sr_opcode[opcode].mask */
	/* BTH */
	bool se, mig;
	uint8_t pad; /* 0..3 pad bytes before the ICRC */
	uint8_t tver;
	uint16_t pkey;
	uint32_t dqpn;
	bool ackreq;
	uint32_t psn;
	/* RETH */
	uint64_t reth_va;
	uint32_t reth_rkey;
	uint32_t reth_len;
	/* AETH */
	uint8_t aeth_syndrome;
	uint32_t aeth_msn;
	/* AtomicETH */
	uint64_t atm_va;
	uint32_t atm_rkey;
	uint64_t atm_swap_add;
	uint64_t atm_compare;
	/* AtomicAckETH */
	uint64_t atmack_orig;
	/* ImmDt (network order) */
	uint32_t imm_data;
	/* IETH */
	uint32_t ieth_rkey;
	/* DETH */
	uint32_t deth_qkey;
	uint32_t deth_sqpn;
	/* XRCETH */
	uint32_t xrc_srqn;
	/* Payload: excludes pad bytes and ICRC. Points into the parsed buffer. */
	const uint8_t *payload;
	uint32_t paylen;
	uint32_t hdr_len;
};

/* Parse a UDP payload. Checks: length covers BTH, extension headers, pad
 * and ICRC; opcode is known; TVer == 0. Does not check the ICRC.
 * Returns 0 or -EINVAL.  Never reads outside buf[0..len). */
int sr_pkt_parse(struct sr_pkt *pkt, const uint8_t *buf, size_t len);

/* The BTH DestQP (the low 24 bits of bytes 4..7) of a datagram that holds
 * at least SR_BTH_BYTES: what routing reads before, or instead of, a parse. */
static inline uint32_t sr_bth_dqpn(const uint8_t *bth)
{
	return (uint32_t)bth[5] << 16 | (uint32_t)bth[6] << 8 | bth[7];
}

/* Write BTH and the extension headers the opcode carries (per the table)
 * from pkt's fields into hdr (at least SR_MAX_HDR_BYTES).  pkt->pad must be
 * set by the caller (pad = (-paylen) & 3).  Returns the header length. */
uint32_t sr_pkt_build_hdr(uint8_t *hdr, const struct sr_pkt *pkt);

/* AETH syndromes (IBTA 9.7.5.2). */
#define SR_AETH_ACK 0x00 /* 000 + credit count (we send 0x1f: unlimited/invalid) */
#define SR_AETH_ACK_UNLIMITED 0x1f
#define SR_AETH_RNR_NAK 0x20 /* 001 + 5-bit RNR timer code */
#define SR_AETH_NAK 0x60     /* 011 + NAK code */
#define SR_AETH_NAK_PSN_SEQ 0x60
#define SR_AETH_NAK_INVALID_REQ 0x61
#define SR_AETH_NAK_REM_ACCESS 0x62
#define SR_AETH_NAK_REM_OP 0x63
#define SR_AETH_NAK_INVALID_RD_REQ 0x64
#define SR_AETH_TYPE_MASK 0xe0

/* RNR timer code (IBTA table 45) to microseconds. */
uint32_t sr_rnr_timer_usec(uint8_t code);

/* ---- ICRC (IBTA Annex A17: RoCEv2) ----
 *
 * The invariant CRC covers: 64 bits of ones (the LRH stand-in), the IP
 * header with TOS/TTL/header-checksum masked to ones (IPv6: traffic class,
 * flow label, hop limit), the UDP header with its checksum masked, the BTH
 * with its reserved/resv8a byte and the FECN/BECN bits masked, the rest of
 * the headers and the payload and pad.  CRC-32 (Ethernet polynomial,
 * reflected), final value inverted, stored little-endian-as-in-CRC32 order
 * (as rxe: the 4 bytes are the CRC value in CPU (LE) order on the wire). */

/* The IP/UDP envelope the datagram travels in, as the kernel builds it for
 * a datagram sent from an unconnected socket with IP_PMTUDISC_DO: IPv4
 * version 4, IHL 5, ID 0, DF set, protocol UDP; IPv6 next header UDP. */
struct sr_icrc_env {
	bool ipv6;
	struct in6_addr saddr, daddr; /* IPv4 as IPv4-mapped */
	uint16_t sport, dport;	      /* host order */
	uint16_t ipv4_id;	      /* host order; 0 for our own sends */
	bool ipv4_df;		      /* true for our own sends */
};

/* ICRC of the packet buf[0..len) (len includes the 4 ICRC bytes, which are
 * not covered) as it will be sent / was received in env. */
uint32_t sr_icrc_compute(const struct sr_icrc_env *env, const uint8_t *buf, size_t len);

/* Same, for a packet given as an iovec (headers + payload pieces + pad,
 * the 4 ICRC bytes NOT included): used on the send path to avoid copying. */
struct iovec;
uint32_t sr_icrc_compute_iov(const struct sr_icrc_env *env, const struct iovec *iov, int iovcnt);

/* Verify a received packet's ICRC.  A receiver on a UDP socket does not see
 * the IPv4 Identification field, which the ICRC covers; env->ipv4_id is
 * taken as a first guess (0, as softrdma senders use) and, if that fails,
 * the ID (and DF flag) that would make the CRC match is solved for, using
 * the linearity of CRC-32: the remaining 16 bits of the CRC still check the
 * packet.  IPv6 is checked fully.  Returns true if the ICRC is valid. */
bool sr_icrc_verify(const struct sr_icrc_env *env, const uint8_t *buf, size_t len);

/* Plain CRC-32 (Ethernet, reflected) update, and CRC-32C (Castagnoli) for
 * MPA: crc = sr_crc32(crc, buf, len) with the usual ~0 init / ~ final done
 * by the caller. Uses ISA-L when built with it. */
uint32_t sr_crc32_update(uint32_t crc, const void *buf, size_t len);
uint32_t sr_crc32c_update(uint32_t crc, const void *buf, size_t len);

/* ---- Additions (helpers; nothing above changes) ---- */

/* IBTA opcodes 0x16/0x17 (RC only), which rdma-core 44's
 * <infiniband/opcode.h> does not define. */
#define SR_OPCODE_RC_SEND_LAST_WITH_INVALIDATE 0x16
#define SR_OPCODE_RC_SEND_ONLY_WITH_INVALIDATE 0x17
/* The XRC opcodes (IBTA vol. 1 9.2, 101xxxxx: the RC operation | 0xa0),
 * which rdma-core 44 does not define either.  Every request carries an
 * XRCETH right after the BTH; responses are RC's at their XRC values. */
#define SR_OPCODE_XRC 0xa0

/* The 4 ICRC bytes on the wire are the little-endian encoding of the value
 * sr_icrc_compute returns (checked against kernel rxe captures). */
static inline void sr_icrc_store(uint8_t *dst, uint32_t icrc)
{
	dst[0] = (uint8_t)icrc;
	dst[1] = (uint8_t)(icrc >> 8);
	dst[2] = (uint8_t)(icrc >> 16);
	dst[3] = (uint8_t)(icrc >> 24);
}

static inline uint32_t sr_icrc_load(const uint8_t *src)
{
	return (uint32_t)src[0] | (uint32_t)src[1] << 8 | (uint32_t)src[2] << 16 | (uint32_t)src[3] << 24;
}

/* sr_icrc_verify for IPv4, also reporting the Identification and DF flag
 * the sender must have used (env->ipv4_id/ipv4_df if that guess matched,
 * otherwise the solved values).  Returns false, leaving *ipv4_id and
 * *ipv4_df untouched, when no ID/DF makes the ICRC match; for IPv6 it is
 * sr_icrc_verify. */
bool sr_icrc_verify_ipv4_id(const struct sr_icrc_env *env, const uint8_t *buf, size_t len, uint16_t *ipv4_id,
			    bool *ipv4_df);

/* The portable slice-by-8 implementations behind sr_crc32_update and
 * sr_crc32c_update, always built, so that tests can hold the ISA-L build
 * against them. Same conventions as the functions above. */
uint32_t sr_crc32_update_sw(uint32_t crc, const void *buf, size_t len);
uint32_t sr_crc32c_update_sw(uint32_t crc, const void *buf, size_t len);

/* crc_fold.c: the update of *crc over buf (which: 0 CRC-32, 1 CRC-32C) by
 * carry-less multiplication, its last bytes through bytewise; false, with
 * *crc untouched, where the CPU cannot (no VPCLMULQDQ, or
 * SOFTRDMA_CRC_FOLD=0) or len < SR_CRC_FOLD_MIN. */
#define SR_CRC_FOLD_MIN 512
bool sr_crc_fold_update(int which, uint32_t *crc, const void *buf, size_t len,
			uint32_t (*bytewise)(uint32_t, const void *, size_t));
/* The register width folding uses: 512 (AVX-512), 256 (AVX2), 0 (none,
 * or SOFTRDMA_CRC_FOLD=0; =256 keeps it to 256). */
int sr_crc_fold_bits(void);

#endif
