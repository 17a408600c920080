/* IB Communication Manager MADs as RoCE carries them, and the rdma_cm
 * header inside their private data.
 *
 * Design note: what the CM fields mean on RoCEv2
 * ----------------------------------------------
 * RDMA-CM over RoCE speaks the InfiniBand CM protocol (IBTA vol. 1, ch. 12)
 * unchanged: 256-byte MADs of management class 0x07, class version 2, method
 * Send, in UD SEND-only datagrams from QP1 to QP1 with Q_Key 0x80010000 and
 * P_Key 0xFFFF.  The UDP payload is BTH (12) + DETH (8) + MAD (256) + ICRC
 * (4) = 280 bytes, never padded.  The peer's CM answers to the source QPN in
 * the DETH, so every MAD must leave from QPN 1.
 *
 * RoCE has no subnet manager, so the "path" fields are filled from IP:
 *  - LIDs: the kernel writes the permissive LID 0xFFFF (not 0) as primary
 *    local/remote port LID in every RoCE REQ; the alternate path is unused
 *    and all zero.  LIDs carry no meaning on RoCE: accept anything.
 *  - GIDs: the IP addresses of the two ends, IPv4 as IPv4-mapped IPv6
 *    (::ffff:a.b.c.d), i.e. the RoCEv2 GID table entries.  The passive side
 *    picks its local GID (the device/netdev) from the REQ's remote GID.
 *  - Flow label: rdma_cm puts (src_port * 31 + dst_port) & 0xFFFFF of the
 *    rdma_cm ports (sr_cma_roce_flow_label) in the primary path, and rxe
 *    derives the UDP source port of the connected QP on BOTH ends from it
 *    (sr_roce_udp_sport_from_flow_label), not from the QPN.
 *  - Packet rate: 0 (IB_RATE_PORT_CURRENT); SL 0; traffic class = the IP
 *    TOS the rdma_cm id was given (0 by default); hop limit = IP TTL (64);
 *    subnet local 0 (GRH always present on RoCEv2).
 *  - Path MTU: the IBV_MTU_* code (1 = 256 ... 5 = 4096) from the netdev
 *    MTU: 3 (1024) on a 1500-byte Ethernet.
 *  - Local ACK timeout: the QP timeout (4.096 us * 2^x, 0 = infinite); the
 *    kernel sends 19 (~2.1 s): twice its RoCE packet lifetime of 2^18
 *    units, since RoCE has no SA to report one.
 *  - CM response timeouts: 20 (~4.3 s) both ways, max CM retries 15.
 *  - Local CA GUID: the node GUID (rxe: EUI-64 of the MAC).
 *  - Starting PSN (REQ and REP): the PSN the RECEIVER of the message sends
 *    with: the active side's first packet carries the REP's starting PSN
 *    and the passive side's carries the REQ's.  Each side thus announces
 *    its own receive queue PSN (rq_psn).
 *  - Q_Key in REQ/REP: 0 for RC; SIDR_REP carries the UD Q_Key rdma_cm uses
 *    (RDMA_UDP_QKEY 0x01234567).
 *  - Transaction ID: the kernel puts its MAD agent's hi_tid in the top 32
 *    bits and the local Communication ID, byte-swapped (a __be32 read as a
 *    little-endian u32), in the low 32; REP/RTU/DREP reuse the TID of the
 *    message that started the exchange.
 *
 * The rdma_cm (IBTA Annex A11, the kernel's struct cma_hdr) header takes
 * the first 36 bytes of REQ and SIDR_REQ private data: version 0x00, IP
 * version in the high nibble of the next byte, the active side's rdma_cm
 * port, then source and destination IP addresses of 16 bytes each, an IPv4
 * address in the LAST 4 bytes after 12 zero bytes (not IPv4-mapped, unlike
 * the GIDs).  The destination port is the low 16 bits of the Service ID:
 * (port space << 16) | port.  Applications thus get 92 - 36 = 56 bytes of
 * REQ private data and 216 - 36 = 180 of SIDR_REQ; REP, REJ, RTU, DREQ and
 * DREP private data carries no rdma_cm header.
 *
 * Layouts are tables of (bit offset, width) in the spec's big-endian bit
 * numbering (bit 0 = the most significant bit of byte 0 of the message
 * data that follows the 24-byte MAD header), checked against the kernel's
 * ibta_vol1_c12.h and real kernel rxe captures.  LAP and APR are not
 * implemented (rdma_cm never sends them). */
#ifndef SR_CM_MAD_H
#define SR_CM_MAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <infiniband/verbs.h>

/* ---- The MAD ---- */

#define SR_MAD_BYTES 256
#define SR_MAD_HDR_BYTES 24
#define SR_MAD_DATA_BYTES (SR_MAD_BYTES - SR_MAD_HDR_BYTES) /* 232 */

#define SR_MAD_BASE_VERSION 1
#define SR_MGMT_CLASS_CM 0x07
#define SR_CM_CLASS_VERSION 2

#define SR_MAD_METHOD_GET 0x01
#define SR_MAD_METHOD_SET 0x02
#define SR_MAD_METHOD_SEND 0x03
#define SR_MAD_METHOD_RESP 0x80 /* the R bit */
#define SR_MAD_METHOD_GET_RESP 0x81

/* MAD status (IBTA 13.4.7), for answering Get(ClassPortInfo) and friends. */
#define SR_MAD_STATUS_BUSY 0x0001
#define SR_MAD_STATUS_REDIRECT 0x0002
#define SR_MAD_STATUS_BAD_VERSION 0x0004
#define SR_MAD_STATUS_UNSUP_METHOD 0x0008
#define SR_MAD_STATUS_UNSUP_METHOD_ATTR 0x000c
#define SR_MAD_STATUS_INVALID_FIELD 0x001c

struct sr_mad_hdr {
	uint8_t base_version;
	uint8_t mgmt_class;
	uint8_t class_version;
	uint8_t method; /* R bit included */
	uint16_t status;
	uint16_t class_specific;
	uint64_t tid;
	uint16_t attr_id;
	uint32_t attr_mod;
};

/* CM attribute IDs (IBTA table 104). */
enum sr_cm_attr {
	SR_CM_ATTR_CLASS_PORT_INFO = 0x0001,
	SR_CM_ATTR_REQ = 0x0010,
	SR_CM_ATTR_MRA = 0x0011,
	SR_CM_ATTR_REJ = 0x0012,
	SR_CM_ATTR_REP = 0x0013,
	SR_CM_ATTR_RTU = 0x0014,
	SR_CM_ATTR_DREQ = 0x0015,
	SR_CM_ATTR_DREP = 0x0016,
	SR_CM_ATTR_SIDR_REQ = 0x0017,
	SR_CM_ATTR_SIDR_REP = 0x0018,
	SR_CM_ATTR_LAP = 0x0019, /* not implemented */
	SR_CM_ATTR_APR = 0x001a, /* not implemented */
};

/* Private data sizes (bytes). */
#define SR_CM_REQ_PRIVATE_DATA 92
#define SR_CM_MRA_PRIVATE_DATA 222
#define SR_CM_REJ_PRIVATE_DATA 148
#define SR_CM_REP_PRIVATE_DATA 196
#define SR_CM_RTU_PRIVATE_DATA 224
#define SR_CM_DREQ_PRIVATE_DATA 220
#define SR_CM_DREP_PRIVATE_DATA 224
#define SR_CM_SIDR_REQ_PRIVATE_DATA 216
#define SR_CM_SIDR_REP_PRIVATE_DATA 136
#define SR_CM_REJ_ARI_BYTES 72
#define SR_CM_SIDR_REP_INFO_BYTES 72
#define SR_CLASS_PORT_INFO_BYTES 72

/* REQ transport service type; 3 defers to the extended transport type. */
#define SR_CM_TST_RC 0
#define SR_CM_TST_UC 1
#define SR_CM_TST_RD 2
#define SR_CM_TST_EXTENDED 3
#define SR_CM_ETT_XRC 1

/* Which message a REJ or MRA answers. */
#define SR_CM_MSG_REQ 0
#define SR_CM_MSG_REP 1
#define SR_CM_MSG_OTHER 2 /* REJ: none/other; MRA: LAP */

/* REJ reasons (IBTA table 108; the kernel's enum ib_cm_rej_reason). */
enum sr_cm_rej_reason {
	SR_CM_REJ_NO_QP = 1,
	SR_CM_REJ_NO_EEC = 2,
	SR_CM_REJ_NO_RESOURCES = 3,
	SR_CM_REJ_TIMEOUT = 4,
	SR_CM_REJ_UNSUPPORTED = 5,
	SR_CM_REJ_INVALID_COMM_ID = 6,
	SR_CM_REJ_INVALID_COMM_INSTANCE = 7,
	SR_CM_REJ_INVALID_SERVICE_ID = 8,
	SR_CM_REJ_INVALID_TRANSPORT_TYPE = 9,
	SR_CM_REJ_STALE_CONN = 10,
	SR_CM_REJ_RDC_NOT_EXIST = 11,
	SR_CM_REJ_INVALID_GID = 12,
	SR_CM_REJ_INVALID_LID = 13,
	SR_CM_REJ_INVALID_SL = 14,
	SR_CM_REJ_INVALID_TRAFFIC_CLASS = 15,
	SR_CM_REJ_INVALID_HOP_LIMIT = 16,
	SR_CM_REJ_INVALID_PACKET_RATE = 17,
	SR_CM_REJ_INVALID_ALT_GID = 18,
	SR_CM_REJ_INVALID_ALT_LID = 19,
	SR_CM_REJ_INVALID_ALT_SL = 20,
	SR_CM_REJ_INVALID_ALT_TRAFFIC_CLASS = 21,
	SR_CM_REJ_INVALID_ALT_HOP_LIMIT = 22,
	SR_CM_REJ_INVALID_ALT_PACKET_RATE = 23,
	SR_CM_REJ_PORT_CM_REDIRECT = 24,
	SR_CM_REJ_PORT_REDIRECT = 25,
	SR_CM_REJ_INVALID_MTU = 26,
	SR_CM_REJ_INSUFFICIENT_RESP_RESOURCES = 27,
	SR_CM_REJ_CONSUMER_DEFINED = 28, /* rdma_reject() */
	SR_CM_REJ_INVALID_RNR_RETRY = 29,
	SR_CM_REJ_DUPLICATE_LOCAL_COMM_ID = 30,
	SR_CM_REJ_INVALID_CLASS_VERSION = 31,
	SR_CM_REJ_INVALID_FLOW_LABEL = 32,
	SR_CM_REJ_INVALID_ALT_FLOW_LABEL = 33,
	SR_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED = 35,
};

/* SIDR_REP status (IBTA table 120). */
enum sr_cm_sidr_status {
	SR_CM_SIDR_SUCCESS = 0,
	SR_CM_SIDR_UNSUPPORTED = 1, /* no such Service ID */
	SR_CM_SIDR_REJECT = 2,
	SR_CM_SIDR_NO_QP = 3,
	SR_CM_SIDR_REDIRECT = 4, /* ClassPortInfo in the info */
	SR_CM_SIDR_UNSUPPORTED_VERSION = 5,
};

/* One path (primary or alternate) of a REQ. */
struct sr_cm_path {
	uint16_t local_lid;
	uint16_t remote_lid;
	union ibv_gid local_gid;
	union ibv_gid remote_gid;
	uint32_t flow_label; /* 20 bits */
	uint8_t packet_rate; /* 6 bits, enum ibv_rate */
	uint8_t traffic_class;
	uint8_t hop_limit;
	uint8_t sl; /* 4 bits */
	bool subnet_local;
	uint8_t local_ack_timeout; /* 5 bits */
};

struct sr_cm_req {
	uint32_t local_comm_id;
	uint64_t service_id;
	uint64_t local_ca_guid;
	uint32_t local_qkey;
	uint32_t local_qpn; /* 24 bits */
	uint8_t responder_resources;
	uint32_t local_eecn; /* 24 bits */
	uint8_t initiator_depth;
	uint32_t remote_eecn;		    /* 24 bits */
	uint8_t remote_cm_response_timeout; /* 5 bits */
	uint8_t transport_service_type;	    /* 2 bits, SR_CM_TST_* */
	bool end_to_end_flow_control;
	uint32_t starting_psn;		   /* 24 bits */
	uint8_t local_cm_response_timeout; /* 5 bits */
	uint8_t retry_count;		   /* 3 bits */
	uint16_t pkey;
	uint8_t path_mtu; /* 4 bits, enum ibv_mtu */
	bool rdc_exists;
	uint8_t rnr_retry_count; /* 3 bits */
	uint8_t max_cm_retries;	 /* 4 bits */
	bool srq;
	uint8_t extended_transport_type; /* 3 bits, SR_CM_ETT_* */
	struct sr_cm_path primary;
	struct sr_cm_path alternate;
	bool sap_supported;
	uint8_t private_data[SR_CM_REQ_PRIVATE_DATA];
};

struct sr_cm_mra {
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint8_t message_mraed;	 /* 2 bits, SR_CM_MSG_* */
	uint8_t service_timeout; /* 5 bits */
	uint8_t private_data[SR_CM_MRA_PRIVATE_DATA];
};

struct sr_cm_rej {
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint8_t message_rejected; /* 2 bits, SR_CM_MSG_* */
	uint8_t ari_length;	  /* 7 bits, at most 72 */
	uint16_t reason;	  /* enum sr_cm_rej_reason */
	uint8_t ari[SR_CM_REJ_ARI_BYTES];
	uint8_t private_data[SR_CM_REJ_PRIVATE_DATA];
};

struct sr_cm_rep {
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint32_t local_qkey;
	uint32_t local_qpn;    /* 24 bits */
	uint32_t local_eecn;   /* 24 bits */
	uint32_t starting_psn; /* 24 bits */
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t target_ack_delay;  /* 5 bits */
	uint8_t failover_accepted; /* 2 bits */
	bool end_to_end_flow_control;
	uint8_t rnr_retry_count; /* 3 bits */
	bool srq;
	uint64_t local_ca_guid;
	uint8_t private_data[SR_CM_REP_PRIVATE_DATA];
};

struct sr_cm_rtu {
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint8_t private_data[SR_CM_RTU_PRIVATE_DATA];
};

struct sr_cm_dreq {
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint32_t remote_qpn_eecn; /* 24 bits */
	uint8_t private_data[SR_CM_DREQ_PRIVATE_DATA];
};

struct sr_cm_drep {
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint8_t private_data[SR_CM_DREP_PRIVATE_DATA];
};

struct sr_cm_sidr_req {
	uint32_t request_id;
	uint16_t pkey;
	uint64_t service_id;
	uint8_t private_data[SR_CM_SIDR_REQ_PRIVATE_DATA];
};

struct sr_cm_sidr_rep {
	uint32_t request_id;
	uint8_t status;	     /* enum sr_cm_sidr_status */
	uint8_t info_length; /* at most 72 */
	uint32_t qpn;	     /* 24 bits */
	uint64_t service_id;
	uint32_t qkey;
	uint8_t info[SR_CM_SIDR_REP_INFO_BYTES]; /* ClassPortInfo when redirecting */
	uint8_t private_data[SR_CM_SIDR_REP_PRIVATE_DATA];
};

/* ClassPortInfo (IBTA 13.4.8.1): the CM's Get/GetResp attribute, and the
 * payload of a REJ "port redirect" ARI or a SIDR_REP "redirect" info. */
struct sr_class_port_info {
	uint8_t base_version;
	uint8_t class_version;
	uint16_t capability_mask;
	uint32_t capability_mask2; /* 27 bits */
	uint8_t resp_time_value;   /* 5 bits */
	union ibv_gid redirect_gid;
	uint8_t redirect_tc;
	uint8_t redirect_sl;  /* 4 bits */
	uint32_t redirect_fl; /* 20 bits */
	uint16_t redirect_lid;
	uint16_t redirect_pkey;
	uint32_t redirect_qp; /* 24 bits */
	uint32_t redirect_qkey;
	union ibv_gid trap_gid;
	uint8_t trap_tc;
	uint8_t trap_sl;  /* 4 bits */
	uint32_t trap_fl; /* 20 bits */
	uint16_t trap_lid;
	uint16_t trap_pkey;
	uint8_t trap_hl;
	uint32_t trap_qp; /* 24 bits */
	uint32_t trap_qkey;
};

/* A whole CM MAD: hdr.attr_id says which member of the union is valid. */
struct sr_cm_msg {
	struct sr_mad_hdr hdr;
	union {
		struct sr_class_port_info cpi;
		struct sr_cm_req req;
		struct sr_cm_mra mra;
		struct sr_cm_rej rej;
		struct sr_cm_rep rep;
		struct sr_cm_rtu rtu;
		struct sr_cm_dreq dreq;
		struct sr_cm_drep drep;
		struct sr_cm_sidr_req sidr_req;
		struct sr_cm_sidr_rep sidr_rep;
	};
};

/* Zero msg and fill the header for a CM Send (Get for ClassPortInfo). */
void sr_cm_msg_init(struct sr_cm_msg *msg, uint16_t attr_id, uint64_t tid);

/* The 24-byte common header.  decode needs len >= 24 and returns 0 or
 * -EMSGSIZE; encode writes 24 bytes and returns 24 or -EMSGSIZE. */
int sr_mad_hdr_decode(struct sr_mad_hdr *hdr, const uint8_t *buf, size_t len);
int sr_mad_hdr_encode(const struct sr_mad_hdr *hdr, uint8_t *buf, size_t len);

/* Decode one CM MAD: len must be exactly 256.  Returns 0, or
 *   -EMSGSIZE         len != 256 (nothing decoded);
 *   -EPROTONOSUPPORT  base version, class or class version not CM's
 *                     (msg->hdr filled, the rest zeroed);
 *   -EOPNOTSUPP       attribute unknown or not implemented (LAP/APR)
 *                     (msg->hdr filled, the rest zeroed).
 * Reserved bits are ignored.  A REJ ARI length or SIDR_REP info length
 * beyond 72 is clamped to 72, so it can always index ari[]/info[].
 * Never reads outside buf[0..len). */
int sr_cm_msg_decode(struct sr_cm_msg *msg, const uint8_t *buf, size_t len);

/* Encode msg into buf[0..len), len >= 256.  Writes exactly 256 bytes,
 * reserved bits zero, and returns 256; or -EMSGSIZE (len < 256), -EINVAL
 * (attribute not implemented), -ERANGE (a field value does not fit its
 * width or a length exceeds 72); buf is untouched on error. */
int sr_cm_msg_encode(const struct sr_cm_msg *msg, uint8_t *buf, size_t len);

/* ClassPortInfo on its own (72 bytes), e.g. inside a REJ ARI.  Same
 * return conventions: 0 / 72 on success, -EMSGSIZE, -ERANGE. */
int sr_class_port_info_decode(struct sr_class_port_info *cpi, const uint8_t *buf, size_t len);
int sr_class_port_info_encode(const struct sr_class_port_info *cpi, uint8_t *buf, size_t len);

/* "REQ", "REJ", ... or NULL for an unknown attribute. */
const char *sr_cm_attr_name(uint16_t attr_id);
/* A short name of a REJ reason, "unknown" for values not in the table. */
const char *sr_cm_rej_reason_name(uint16_t reason);

/* ---- Timeouts: 4.096 us * 2^x (CM response timeouts, local ACK timeout,
 * target ACK delay, MRA service timeout, ClassPortInfo RespTimeValue) ---- */

/* x (5 bits; higher bits ignored) in nanoseconds: 4096 << x. */
static inline uint64_t sr_cm_timeout_ns(uint8_t x)
{
	return 4096ull << (x & 31);
}

/* The smallest x whose timeout is at least ns, saturating at 31. */
uint8_t sr_cm_timeout_code(uint64_t ns);

/* ---- Bit fields in the spec's numbering ---- */

/* Read/write width (1..64) bits starting at bit offset bit, where bit 0 is
 * the most significant bit of p[0] (IBTA tables' "byte:bit" order). */
uint64_t sr_bits_get(const uint8_t *p, unsigned bit, unsigned width);
void sr_bits_put(uint8_t *p, unsigned bit, unsigned width, uint64_t val);

/* ---- rdma_cm on top of IB CM ---- */

/* Port spaces (rdma-core's enum rdma_port_space). */
#define SR_RDMA_PS_IPOIB 0x0002
#define SR_RDMA_PS_IB 0x013f
#define SR_RDMA_PS_TCP 0x0106
#define SR_RDMA_PS_UDP 0x0111

/* The Service ID rdma_cm listens on and connects to for an IP port: the
 * kernel's (ps << 16) + port, i.e. 0x0000000001060000 | port for TCP. */
static inline uint64_t sr_cma_service_id(uint16_t ps, uint16_t port)
{
	return (uint64_t)ps << 16 | port;
}

/* The port space and port of an rdma_cm Service ID; false if sid is not
 * in one of the four port spaces above. */
bool sr_cma_service_id_split(uint64_t sid, uint16_t *ps, uint16_t *port);

/* The primary-path flow label the kernel's rdma_cm puts in a RoCEv2 REQ
 * (unless an IPv6 id carries its own flow label). */
static inline uint32_t sr_cma_roce_flow_label(uint16_t src_port, uint16_t dst_port)
{
	return ((uint32_t)src_port * 31 + dst_port) & 0xfffff;
}

/* The UDP source port a RoCEv2 QP with that flow label in its address
 * vector sends from (the kernel's rdma_flow_label_to_udp_sport). */
static inline uint16_t sr_roce_udp_sport_from_flow_label(uint32_t fl)
{
	uint32_t lo = fl & 0x3fff, hi = fl & 0xfc000;

	return (uint16_t)((lo ^ (hi >> 14)) | 0xc000);
}

#define SR_CMA_HDR_BYTES 36
#define SR_CMA_VERSION 0x00

/* The rdma_cm header at the start of REQ/SIDR_REQ private data. */
struct sr_cma_hdr {
	uint8_t ip_version;	  /* 4 or 6 */
	uint16_t src_port;	  /* the active side's rdma_cm port */
	struct in6_addr src_addr; /* IPv4 as IPv4-mapped (::ffff:a.b.c.d) */
	struct in6_addr dst_addr;
};

/* decode: len >= 36; returns 0, -EMSGSIZE, -EPROTONOSUPPORT (version not
 * 0) or -EAFNOSUPPORT (IP version not 4 or 6).  An IPv4 address is read
 * from the last 4 bytes of its 16, as the kernel does.
 * encode: returns 36, -EMSGSIZE, -EAFNOSUPPORT, or -EINVAL (an IPv4 header
 * whose addresses are not IPv4-mapped).  Bytes past 36 are not touched. */
int sr_cma_hdr_decode(struct sr_cma_hdr *hdr, const uint8_t *buf, size_t len);
int sr_cma_hdr_encode(const struct sr_cma_hdr *hdr, uint8_t *buf, size_t len);

#endif
