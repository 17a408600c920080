/* IB CM MAD codec: one table of (bit offset, width, struct member) per
 * attribute, walked by a single encoder and a single decoder, so that a
 * layout can be read side by side with the IBTA vol. 1 tables 106-120. */
#include <errno.h>
#include <string.h>

#include "cm/cm_mad.h"

/* ---- Bit fields ---- */

uint64_t sr_bits_get(const uint8_t *p, unsigned bit, unsigned width)
{
	uint64_t v = 0;

	while (width) {
		unsigned in = bit & 7; /* bits already used in this byte */
		unsigned take = 8 - in < width ? 8 - in : width;
		unsigned shift = 8 - in - take;

		v = v << take | ((uint64_t)(p[bit >> 3] >> shift) & ((1u << take) - 1));
		bit += take;
		width -= take;
	}
	return v;
}

void sr_bits_put(uint8_t *p, unsigned bit, unsigned width, uint64_t val)
{
	while (width) {
		unsigned in = bit & 7;
		unsigned take = 8 - in < width ? 8 - in : width;
		unsigned shift = 8 - in - take;
		uint8_t mask = (uint8_t)(((1u << take) - 1) << shift);
		/* The top 'take' of the remaining 'width' bits go into this byte. */
		uint8_t part = (uint8_t)((val >> (width - take)) & ((1u << take) - 1));

		p[bit >> 3] = (uint8_t)((p[bit >> 3] & ~mask) | (part << shift));
		bit += take;
		width -= take;
	}
}

/* ---- Layout tables ---- */

enum field_kind {
	FK_UINT,  /* an unsigned integer (or bool) member of 1, 2, 4 or 8 bytes */
	FK_BYTES, /* a byte array member copied as is (GIDs, ARI, private data) */
};

struct field {
	uint16_t bit;	 /* offset from the start of the attribute data */
	uint16_t width;	 /* FK_UINT: bits; FK_BYTES: bytes */
	uint16_t member; /* offsetof in the host struct */
	uint8_t size;	 /* FK_UINT: sizeof the member */
	uint8_t kind;
	uint8_t max; /* FK_UINT: largest valid value if not 0 (a length) */
};

struct layout {
	uint16_t attr_id;
	uint16_t bytes;	 /* size of the attribute data */
	uint16_t member; /* offsetof the attribute in sr_cm_msg */
	const struct field *f;
	unsigned nf;
};

#define MSIZE(type, m) sizeof(((type *)0)->m)

/* U(type, member, byte, bit-in-byte, width in bits) */
#define U(type, m, byte, b, w)                                                       \
	{                                                                            \
		(byte) * 8 + (b), (w), offsetof(type, m), MSIZE(type, m), FK_UINT, 0 \
	}
/* A length field whose value indexes an array of 'mx' bytes. */
#define L(type, m, byte, b, w, mx)                                                      \
	{                                                                               \
		(byte) * 8 + (b), (w), offsetof(type, m), MSIZE(type, m), FK_UINT, (mx) \
	}
/* B(type, member, byte): a byte array at a byte boundary, as long as the member. */
#define B(type, m, byte)                                                      \
	{                                                                     \
		(byte) * 8, MSIZE(type, m), offsetof(type, m), 0, FK_BYTES, 0 \
	}

/* A REQ path at byte 'at' (primary 52, alternate 96: the same shape). */
#define REQ_PATH(p, at)                                                                                        \
	U(struct sr_cm_req, p.local_lid, (at) + 0, 0, 16), U(struct sr_cm_req, p.remote_lid, (at) + 2, 0, 16), \
		B(struct sr_cm_req, p.local_gid, (at) + 4), B(struct sr_cm_req, p.remote_gid, (at) + 20),      \
		U(struct sr_cm_req, p.flow_label, (at) + 36, 0, 20),                                           \
		U(struct sr_cm_req, p.packet_rate, (at) + 39, 2, 6),                                           \
		U(struct sr_cm_req, p.traffic_class, (at) + 40, 0, 8),                                         \
		U(struct sr_cm_req, p.hop_limit, (at) + 41, 0, 8), U(struct sr_cm_req, p.sl, (at) + 42, 0, 4), \
		U(struct sr_cm_req, p.subnet_local, (at) + 42, 4, 1),                                          \
		U(struct sr_cm_req, p.local_ack_timeout, (at) + 43, 0, 5)

/* IBTA table 106 */
static const struct field req_fields[] = {
	U(struct sr_cm_req, local_comm_id, 0, 0, 32),
	U(struct sr_cm_req, service_id, 8, 0, 64),
	U(struct sr_cm_req, local_ca_guid, 16, 0, 64),
	U(struct sr_cm_req, local_qkey, 28, 0, 32),
	U(struct sr_cm_req, local_qpn, 32, 0, 24),
	U(struct sr_cm_req, responder_resources, 35, 0, 8),
	U(struct sr_cm_req, local_eecn, 36, 0, 24),
	U(struct sr_cm_req, initiator_depth, 39, 0, 8),
	U(struct sr_cm_req, remote_eecn, 40, 0, 24),
	U(struct sr_cm_req, remote_cm_response_timeout, 43, 0, 5),
	U(struct sr_cm_req, transport_service_type, 43, 5, 2),
	U(struct sr_cm_req, end_to_end_flow_control, 43, 7, 1),
	U(struct sr_cm_req, starting_psn, 44, 0, 24),
	U(struct sr_cm_req, local_cm_response_timeout, 47, 0, 5),
	U(struct sr_cm_req, retry_count, 47, 5, 3),
	U(struct sr_cm_req, pkey, 48, 0, 16),
	U(struct sr_cm_req, path_mtu, 50, 0, 4),
	U(struct sr_cm_req, rdc_exists, 50, 4, 1),
	U(struct sr_cm_req, rnr_retry_count, 50, 5, 3),
	U(struct sr_cm_req, max_cm_retries, 51, 0, 4),
	U(struct sr_cm_req, srq, 51, 4, 1),
	U(struct sr_cm_req, extended_transport_type, 51, 5, 3),
	REQ_PATH(primary, 52),
	REQ_PATH(alternate, 96),
	U(struct sr_cm_req, sap_supported, 139, 5, 1),
	B(struct sr_cm_req, private_data, 140),
};

/* IBTA table 107 */
static const struct field mra_fields[] = {
	U(struct sr_cm_mra, local_comm_id, 0, 0, 32), U(struct sr_cm_mra, remote_comm_id, 4, 0, 32),
	U(struct sr_cm_mra, message_mraed, 8, 0, 2),  U(struct sr_cm_mra, service_timeout, 9, 0, 5),
	B(struct sr_cm_mra, private_data, 10),
};

/* IBTA table 108 */
static const struct field rej_fields[] = {
	U(struct sr_cm_rej, local_comm_id, 0, 0, 32),	U(struct sr_cm_rej, remote_comm_id, 4, 0, 32),
	U(struct sr_cm_rej, message_rejected, 8, 0, 2), L(struct sr_cm_rej, ari_length, 9, 0, 7, SR_CM_REJ_ARI_BYTES),
	U(struct sr_cm_rej, reason, 10, 0, 16),		B(struct sr_cm_rej, ari, 12),
	B(struct sr_cm_rej, private_data, 84),
};

/* IBTA table 110 */
static const struct field rep_fields[] = {
	U(struct sr_cm_rep, local_comm_id, 0, 0, 32),
	U(struct sr_cm_rep, remote_comm_id, 4, 0, 32),
	U(struct sr_cm_rep, local_qkey, 8, 0, 32),
	U(struct sr_cm_rep, local_qpn, 12, 0, 24),
	U(struct sr_cm_rep, local_eecn, 16, 0, 24),
	U(struct sr_cm_rep, starting_psn, 20, 0, 24),
	U(struct sr_cm_rep, responder_resources, 24, 0, 8),
	U(struct sr_cm_rep, initiator_depth, 25, 0, 8),
	U(struct sr_cm_rep, target_ack_delay, 26, 0, 5),
	U(struct sr_cm_rep, failover_accepted, 26, 5, 2),
	U(struct sr_cm_rep, end_to_end_flow_control, 26, 7, 1),
	U(struct sr_cm_rep, rnr_retry_count, 27, 0, 3),
	U(struct sr_cm_rep, srq, 27, 3, 1),
	U(struct sr_cm_rep, local_ca_guid, 28, 0, 64),
	B(struct sr_cm_rep, private_data, 36),
};

/* IBTA table 111 */
static const struct field rtu_fields[] = {
	U(struct sr_cm_rtu, local_comm_id, 0, 0, 32),
	U(struct sr_cm_rtu, remote_comm_id, 4, 0, 32),
	B(struct sr_cm_rtu, private_data, 8),
};

/* IBTA table 112 */
static const struct field dreq_fields[] = {
	U(struct sr_cm_dreq, local_comm_id, 0, 0, 32),
	U(struct sr_cm_dreq, remote_comm_id, 4, 0, 32),
	U(struct sr_cm_dreq, remote_qpn_eecn, 8, 0, 24),
	B(struct sr_cm_dreq, private_data, 12),
};

/* IBTA table 113 */
static const struct field drep_fields[] = {
	U(struct sr_cm_drep, local_comm_id, 0, 0, 32),
	U(struct sr_cm_drep, remote_comm_id, 4, 0, 32),
	B(struct sr_cm_drep, private_data, 8),
};

/* IBTA table 119 */
static const struct field sidr_req_fields[] = {
	U(struct sr_cm_sidr_req, request_id, 0, 0, 32),
	U(struct sr_cm_sidr_req, pkey, 4, 0, 16),
	U(struct sr_cm_sidr_req, service_id, 8, 0, 64),
	B(struct sr_cm_sidr_req, private_data, 16),
};

/* IBTA table 120 */
static const struct field sidr_rep_fields[] = {
	U(struct sr_cm_sidr_rep, request_id, 0, 0, 32),
	U(struct sr_cm_sidr_rep, status, 4, 0, 8),
	L(struct sr_cm_sidr_rep, info_length, 5, 0, 8, SR_CM_SIDR_REP_INFO_BYTES),
	U(struct sr_cm_sidr_rep, qpn, 8, 0, 24),
	U(struct sr_cm_sidr_rep, service_id, 12, 0, 64),
	U(struct sr_cm_sidr_rep, qkey, 20, 0, 32),
	B(struct sr_cm_sidr_rep, info, 24),
	B(struct sr_cm_sidr_rep, private_data, 96),
};

/* IBTA 13.4.8.1, table 126 */
static const struct field cpi_fields[] = {
	U(struct sr_class_port_info, base_version, 0, 0, 8),
	U(struct sr_class_port_info, class_version, 1, 0, 8),
	U(struct sr_class_port_info, capability_mask, 2, 0, 16),
	U(struct sr_class_port_info, capability_mask2, 4, 0, 27),
	U(struct sr_class_port_info, resp_time_value, 7, 3, 5),
	B(struct sr_class_port_info, redirect_gid, 8),
	U(struct sr_class_port_info, redirect_tc, 24, 0, 8),
	U(struct sr_class_port_info, redirect_sl, 25, 0, 4),
	U(struct sr_class_port_info, redirect_fl, 25, 4, 20),
	U(struct sr_class_port_info, redirect_lid, 28, 0, 16),
	U(struct sr_class_port_info, redirect_pkey, 30, 0, 16),
	U(struct sr_class_port_info, redirect_qp, 33, 0, 24),
	U(struct sr_class_port_info, redirect_qkey, 36, 0, 32),
	B(struct sr_class_port_info, trap_gid, 40),
	U(struct sr_class_port_info, trap_tc, 56, 0, 8),
	U(struct sr_class_port_info, trap_sl, 57, 0, 4),
	U(struct sr_class_port_info, trap_fl, 57, 4, 20),
	U(struct sr_class_port_info, trap_lid, 60, 0, 16),
	U(struct sr_class_port_info, trap_pkey, 62, 0, 16),
	U(struct sr_class_port_info, trap_hl, 64, 0, 8),
	U(struct sr_class_port_info, trap_qp, 65, 0, 24),
	U(struct sr_class_port_info, trap_qkey, 68, 0, 32),
};

#define LAYOUT(id, arr, m, nbytes)                                                           \
	{                                                                                    \
		id, nbytes, offsetof(struct sr_cm_msg, m), arr, sizeof(arr) / sizeof(arr[0]) \
	}

static const struct layout layouts[] = {
	LAYOUT(SR_CM_ATTR_CLASS_PORT_INFO, cpi_fields, cpi, SR_CLASS_PORT_INFO_BYTES),
	LAYOUT(SR_CM_ATTR_REQ, req_fields, req, SR_MAD_DATA_BYTES),
	LAYOUT(SR_CM_ATTR_MRA, mra_fields, mra, SR_MAD_DATA_BYTES),
	LAYOUT(SR_CM_ATTR_REJ, rej_fields, rej, SR_MAD_DATA_BYTES),
	LAYOUT(SR_CM_ATTR_REP, rep_fields, rep, SR_MAD_DATA_BYTES),
	LAYOUT(SR_CM_ATTR_RTU, rtu_fields, rtu, SR_MAD_DATA_BYTES),
	LAYOUT(SR_CM_ATTR_DREQ, dreq_fields, dreq, SR_MAD_DATA_BYTES),
	LAYOUT(SR_CM_ATTR_DREP, drep_fields, drep, SR_MAD_DATA_BYTES),
	LAYOUT(SR_CM_ATTR_SIDR_REQ, sidr_req_fields, sidr_req, SR_MAD_DATA_BYTES),
	LAYOUT(SR_CM_ATTR_SIDR_REP, sidr_rep_fields, sidr_rep, SR_MAD_DATA_BYTES),
};

/* The private data must end exactly where the MAD does: a wrong offset or
 * size in a table would otherwise only show as a wrong field at run time. */
_Static_assert(140 + SR_CM_REQ_PRIVATE_DATA == SR_MAD_DATA_BYTES, "REQ size");
_Static_assert(10 + SR_CM_MRA_PRIVATE_DATA == SR_MAD_DATA_BYTES, "MRA size");
_Static_assert(84 + SR_CM_REJ_PRIVATE_DATA == SR_MAD_DATA_BYTES, "REJ size");
_Static_assert(12 + SR_CM_REJ_ARI_BYTES == 84, "REJ ARI size");
_Static_assert(36 + SR_CM_REP_PRIVATE_DATA == SR_MAD_DATA_BYTES, "REP size");
_Static_assert(8 + SR_CM_RTU_PRIVATE_DATA == SR_MAD_DATA_BYTES, "RTU size");
_Static_assert(12 + SR_CM_DREQ_PRIVATE_DATA == SR_MAD_DATA_BYTES, "DREQ size");
_Static_assert(8 + SR_CM_DREP_PRIVATE_DATA == SR_MAD_DATA_BYTES, "DREP size");
_Static_assert(16 + SR_CM_SIDR_REQ_PRIVATE_DATA == SR_MAD_DATA_BYTES, "SIDR_REQ size");
_Static_assert(96 + SR_CM_SIDR_REP_PRIVATE_DATA == SR_MAD_DATA_BYTES, "SIDR_REP size");
_Static_assert(24 + SR_CM_SIDR_REP_INFO_BYTES == 96, "SIDR_REP info size");
_Static_assert(sizeof(union ibv_gid) == 16, "GID size");

#undef MSIZE
#undef U
#undef L
#undef B
#undef REQ_PATH
#undef LAYOUT

static const struct layout *layout_of(uint16_t attr_id)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].attr_id == attr_id)
			return &layouts[i];
	return NULL;
}

static uint64_t member_get(const void *s, const struct field *f)
{
	const uint8_t *p = (const uint8_t *)s + f->member;

	switch (f->size) {
	case 1: {
		uint8_t v;
		memcpy(&v, p, 1);
		return v;
	}
	case 2: {
		uint16_t v;
		memcpy(&v, p, 2);
		return v;
	}
	case 4: {
		uint32_t v;
		memcpy(&v, p, 4);
		return v;
	}
	default: {
		uint64_t v;
		memcpy(&v, p, 8);
		return v;
	}
	}
}

static void member_put(void *s, const struct field *f, uint64_t val)
{
	uint8_t *p = (uint8_t *)s + f->member;

	switch (f->size) {
	case 1: {
		uint8_t v = (uint8_t)val;
		memcpy(p, &v, 1);
		break;
	}
	case 2: {
		uint16_t v = (uint16_t)val;
		memcpy(p, &v, 2);
		break;
	}
	case 4: {
		uint32_t v = (uint32_t)val;
		memcpy(p, &v, 4);
		break;
	}
	default:
		memcpy(p, &val, 8);
		break;
	}
}

/* data holds l->bytes bytes. */
static void layout_decode(const struct layout *l, void *s, const uint8_t *data)
{
	for (unsigned i = 0; i < l->nf; i++) {
		const struct field *f = &l->f[i];

		if (f->kind == FK_BYTES) {
			memcpy((uint8_t *)s + f->member, data + f->bit / 8, f->width);
		} else {
			uint64_t v = sr_bits_get(data, f->bit, f->width);

			if (f->max && v > f->max)
				v = f->max;
			member_put(s, f, v);
		}
	}
}

/* Checks every value before writing anything: data is left as it was when
 * -ERANGE is returned. */
static int layout_encode(const struct layout *l, const void *s, uint8_t *data)
{
	for (unsigned i = 0; i < l->nf; i++) {
		const struct field *f = &l->f[i];
		uint64_t v;

		if (f->kind != FK_UINT)
			continue;
		v = member_get(s, f);
		if ((f->width < 64 && v >> f->width) || (f->max && v > f->max))
			return -ERANGE;
	}
	memset(data, 0, l->bytes);
	for (unsigned i = 0; i < l->nf; i++) {
		const struct field *f = &l->f[i];

		if (f->kind == FK_BYTES)
			memcpy(data + f->bit / 8, (const uint8_t *)s + f->member, f->width);
		else
			sr_bits_put(data, f->bit, f->width, member_get(s, f));
	}
	return 0;
}

/* ---- The MAD header (IBTA 13.4.3) ---- */

int sr_mad_hdr_decode(struct sr_mad_hdr *hdr, const uint8_t *buf, size_t len)
{
	if (len < SR_MAD_HDR_BYTES)
		return -EMSGSIZE;
	hdr->base_version = buf[0];
	hdr->mgmt_class = buf[1];
	hdr->class_version = buf[2];
	hdr->method = buf[3];
	hdr->status = (uint16_t)sr_bits_get(buf, 4 * 8, 16);
	hdr->class_specific = (uint16_t)sr_bits_get(buf, 6 * 8, 16);
	hdr->tid = sr_bits_get(buf, 8 * 8, 64);
	hdr->attr_id = (uint16_t)sr_bits_get(buf, 16 * 8, 16);
	/* bytes 18-19 reserved */
	hdr->attr_mod = (uint32_t)sr_bits_get(buf, 20 * 8, 32);
	return 0;
}

int sr_mad_hdr_encode(const struct sr_mad_hdr *hdr, uint8_t *buf, size_t len)
{
	if (len < SR_MAD_HDR_BYTES)
		return -EMSGSIZE;
	memset(buf, 0, SR_MAD_HDR_BYTES);
	buf[0] = hdr->base_version;
	buf[1] = hdr->mgmt_class;
	buf[2] = hdr->class_version;
	buf[3] = hdr->method;
	sr_bits_put(buf, 4 * 8, 16, hdr->status);
	sr_bits_put(buf, 6 * 8, 16, hdr->class_specific);
	sr_bits_put(buf, 8 * 8, 64, hdr->tid);
	sr_bits_put(buf, 16 * 8, 16, hdr->attr_id);
	sr_bits_put(buf, 20 * 8, 32, hdr->attr_mod);
	return SR_MAD_HDR_BYTES;
}

/* ---- Whole CM MADs ---- */

void sr_cm_msg_init(struct sr_cm_msg *msg, uint16_t attr_id, uint64_t tid)
{
	memset(msg, 0, sizeof(*msg));
	msg->hdr.base_version = SR_MAD_BASE_VERSION;
	msg->hdr.mgmt_class = SR_MGMT_CLASS_CM;
	msg->hdr.class_version = SR_CM_CLASS_VERSION;
	msg->hdr.method = attr_id == SR_CM_ATTR_CLASS_PORT_INFO ? SR_MAD_METHOD_GET : SR_MAD_METHOD_SEND;
	msg->hdr.tid = tid;
	msg->hdr.attr_id = attr_id;
}

int sr_cm_msg_decode(struct sr_cm_msg *msg, const uint8_t *buf, size_t len)
{
	const struct layout *l;

	if (len != SR_MAD_BYTES)
		return -EMSGSIZE;
	memset(msg, 0, sizeof(*msg));
	sr_mad_hdr_decode(&msg->hdr, buf, len);
	if (msg->hdr.base_version != SR_MAD_BASE_VERSION || msg->hdr.mgmt_class != SR_MGMT_CLASS_CM ||
	    msg->hdr.class_version != SR_CM_CLASS_VERSION)
		return -EPROTONOSUPPORT;
	l = layout_of(msg->hdr.attr_id);
	if (!l)
		return -EOPNOTSUPP;
	layout_decode(l, (uint8_t *)msg + l->member, buf + SR_MAD_HDR_BYTES);
	return 0;
}

int sr_cm_msg_encode(const struct sr_cm_msg *msg, uint8_t *buf, size_t len)
{
	uint8_t mad[SR_MAD_BYTES] = { 0 };
	const struct layout *l;
	int ret;

	if (len < SR_MAD_BYTES)
		return -EMSGSIZE;
	l = layout_of(msg->hdr.attr_id);
	if (!l)
		return -EINVAL;
	sr_mad_hdr_encode(&msg->hdr, mad, sizeof(mad));
	ret = layout_encode(l, (const uint8_t *)msg + l->member, mad + SR_MAD_HDR_BYTES);
	if (ret)
		return ret;
	memcpy(buf, mad, SR_MAD_BYTES);
	return SR_MAD_BYTES;
}

int sr_class_port_info_decode(struct sr_class_port_info *cpi, const uint8_t *buf, size_t len)
{
	const struct layout *l = layout_of(SR_CM_ATTR_CLASS_PORT_INFO);

	if (len < SR_CLASS_PORT_INFO_BYTES)
		return -EMSGSIZE;
	memset(cpi, 0, sizeof(*cpi));
	layout_decode(l, cpi, buf);
	return 0;
}

int sr_class_port_info_encode(const struct sr_class_port_info *cpi, uint8_t *buf, size_t len)
{
	const struct layout *l = layout_of(SR_CM_ATTR_CLASS_PORT_INFO);
	int ret;

	if (len < SR_CLASS_PORT_INFO_BYTES)
		return -EMSGSIZE;
	ret = layout_encode(l, cpi, buf);
	return ret ? ret : SR_CLASS_PORT_INFO_BYTES;
}

const char *sr_cm_attr_name(uint16_t attr_id)
{
	static const char *const names[] = {
		[SR_CM_ATTR_CLASS_PORT_INFO] = "ClassPortInfo",
		[SR_CM_ATTR_REQ] = "REQ",
		[SR_CM_ATTR_MRA] = "MRA",
		[SR_CM_ATTR_REJ] = "REJ",
		[SR_CM_ATTR_REP] = "REP",
		[SR_CM_ATTR_RTU] = "RTU",
		[SR_CM_ATTR_DREQ] = "DREQ",
		[SR_CM_ATTR_DREP] = "DREP",
		[SR_CM_ATTR_SIDR_REQ] = "SIDR_REQ",
		[SR_CM_ATTR_SIDR_REP] = "SIDR_REP",
		[SR_CM_ATTR_LAP] = "LAP",
		[SR_CM_ATTR_APR] = "APR",
	};

	return attr_id < sizeof(names) / sizeof(names[0]) ? names[attr_id] : NULL;
}

const char *sr_cm_rej_reason_name(uint16_t reason)
{
	static const char *const names[] = {
		[SR_CM_REJ_NO_QP] = "no QP",
		[SR_CM_REJ_NO_EEC] = "no EEC",
		[SR_CM_REJ_NO_RESOURCES] = "no resources",
		[SR_CM_REJ_TIMEOUT] = "timeout",
		[SR_CM_REJ_UNSUPPORTED] = "unsupported request",
		[SR_CM_REJ_INVALID_COMM_ID] = "invalid communication ID",
		[SR_CM_REJ_INVALID_COMM_INSTANCE] = "invalid communication instance",
		[SR_CM_REJ_INVALID_SERVICE_ID] = "invalid service ID",
		[SR_CM_REJ_INVALID_TRANSPORT_TYPE] = "invalid transport service type",
		[SR_CM_REJ_STALE_CONN] = "stale connection",
		[SR_CM_REJ_RDC_NOT_EXIST] = "RDC does not exist",
		[SR_CM_REJ_INVALID_GID] = "invalid primary GID",
		[SR_CM_REJ_INVALID_LID] = "invalid primary LID",
		[SR_CM_REJ_INVALID_SL] = "invalid primary SL",
		[SR_CM_REJ_INVALID_TRAFFIC_CLASS] = "invalid primary traffic class",
		[SR_CM_REJ_INVALID_HOP_LIMIT] = "invalid primary hop limit",
		[SR_CM_REJ_INVALID_PACKET_RATE] = "invalid primary packet rate",
		[SR_CM_REJ_INVALID_ALT_GID] = "invalid alternate GID",
		[SR_CM_REJ_INVALID_ALT_LID] = "invalid alternate LID",
		[SR_CM_REJ_INVALID_ALT_SL] = "invalid alternate SL",
		[SR_CM_REJ_INVALID_ALT_TRAFFIC_CLASS] = "invalid alternate traffic class",
		[SR_CM_REJ_INVALID_ALT_HOP_LIMIT] = "invalid alternate hop limit",
		[SR_CM_REJ_INVALID_ALT_PACKET_RATE] = "invalid alternate packet rate",
		[SR_CM_REJ_PORT_CM_REDIRECT] = "port CM redirect",
		[SR_CM_REJ_PORT_REDIRECT] = "port redirect",
		[SR_CM_REJ_INVALID_MTU] = "invalid path MTU",
		[SR_CM_REJ_INSUFFICIENT_RESP_RESOURCES] = "insufficient responder resources",
		[SR_CM_REJ_CONSUMER_DEFINED] = "consumer reject",
		[SR_CM_REJ_INVALID_RNR_RETRY] = "invalid RNR retry count",
		[SR_CM_REJ_DUPLICATE_LOCAL_COMM_ID] = "duplicate local communication ID",
		[SR_CM_REJ_INVALID_CLASS_VERSION] = "invalid class version",
		[SR_CM_REJ_INVALID_FLOW_LABEL] = "invalid primary flow label",
		[SR_CM_REJ_INVALID_ALT_FLOW_LABEL] = "invalid alternate flow label",
		[SR_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED] = "vendor option not supported",
	};

	if (reason < sizeof(names) / sizeof(names[0]) && names[reason])
		return names[reason];
	return "unknown";
}

uint8_t sr_cm_timeout_code(uint64_t ns)
{
	uint8_t x = 0;

	while (x < 31 && sr_cm_timeout_ns(x) < ns)
		x++;
	return x;
}

/* ---- rdma_cm ---- */

bool sr_cma_service_id_split(uint64_t sid, uint16_t *ps, uint16_t *port)
{
	uint64_t p = sid >> 16;

	if (p != SR_RDMA_PS_TCP && p != SR_RDMA_PS_UDP && p != SR_RDMA_PS_IB && p != SR_RDMA_PS_IPOIB)
		return false;
	if (ps)
		*ps = (uint16_t)p;
	if (port)
		*port = (uint16_t)sid;
	return true;
}

/* Field offsets of the 36-byte header (IBTA A11.6.1, struct cma_hdr). */
#define CMA_OFF_VERSION 0
#define CMA_OFF_IPVER 1
#define CMA_OFF_PORT 2
#define CMA_OFF_SRC 4
#define CMA_OFF_DST 20

static void cma_addr_get(struct in6_addr *a, const uint8_t *p, int ipver)
{
	memset(a, 0, sizeof(*a));
	if (ipver == 4) {
		a->s6_addr[10] = a->s6_addr[11] = 0xff;
		memcpy(&a->s6_addr[12], p + 12, 4);
	} else {
		memcpy(a, p, 16);
	}
}

static void cma_addr_put(uint8_t *p, const struct in6_addr *a, int ipver)
{
	if (ipver == 4) {
		memset(p, 0, 12);
		memcpy(p + 12, &a->s6_addr[12], 4);
	} else {
		memcpy(p, a, 16);
	}
}

int sr_cma_hdr_decode(struct sr_cma_hdr *hdr, const uint8_t *buf, size_t len)
{
	int ipver;

	if (len < SR_CMA_HDR_BYTES)
		return -EMSGSIZE;
	if (buf[CMA_OFF_VERSION] != SR_CMA_VERSION)
		return -EPROTONOSUPPORT;
	ipver = buf[CMA_OFF_IPVER] >> 4;
	if (ipver != 4 && ipver != 6)
		return -EAFNOSUPPORT;
	hdr->ip_version = (uint8_t)ipver;
	hdr->src_port = (uint16_t)sr_bits_get(buf, CMA_OFF_PORT * 8, 16);
	cma_addr_get(&hdr->src_addr, buf + CMA_OFF_SRC, ipver);
	cma_addr_get(&hdr->dst_addr, buf + CMA_OFF_DST, ipver);
	return 0;
}

int sr_cma_hdr_encode(const struct sr_cma_hdr *hdr, uint8_t *buf, size_t len)
{
	if (len < SR_CMA_HDR_BYTES)
		return -EMSGSIZE;
	if (hdr->ip_version != 4 && hdr->ip_version != 6)
		return -EAFNOSUPPORT;
	if (hdr->ip_version == 4 && (!IN6_IS_ADDR_V4MAPPED(&hdr->src_addr) || !IN6_IS_ADDR_V4MAPPED(&hdr->dst_addr)))
		return -EINVAL;
	buf[CMA_OFF_VERSION] = SR_CMA_VERSION;
	buf[CMA_OFF_IPVER] = (uint8_t)(hdr->ip_version << 4);
	sr_bits_put(buf, CMA_OFF_PORT * 8, 16, hdr->src_port);
	cma_addr_put(buf + CMA_OFF_SRC, &hdr->src_addr, hdr->ip_version);
	cma_addr_put(buf + CMA_OFF_DST, &hdr->dst_addr, hdr->ip_version);
	return SR_CMA_HDR_BYTES;
}
