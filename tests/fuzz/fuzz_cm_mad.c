/* libFuzzer harness for IB CM MADs as a RoCE peer delivers them
 * (src/cm/cm_mad.c): the datagram check the CM thread applies
 * (BTH + DETH + 256-byte MAD + ICRC, UD SEND_ONLY to QP1, GSI Q_Key),
 * the MAD decode, the rdma_cm header inside REQ/SIDR_REQ private data,
 * ClassPortInfo in a REJ ARI or SIDR_REP info, and the names and
 * timeouts the CM prints or arms from peer-chosen values.
 *
 * Input: a RoCE UDP payload (the seeds are the kernel rxe CM captures).
 * When it is not a 256-byte UD SEND, the whole input is taken as a bare
 * MAD instead, so that every length reaches the decoder.
 *
 * Invariants (abort() on violation):
 *  - decode returns 0 or one of its documented errors, and -EMSGSIZE
 *    exactly when the length is not 256;
 *  - what decodes re-encodes (every decoded value fits its field), and
 *    decode(encode(m)) == m: nothing the CM acts on is lost or changed by
 *    the codec;
 *  - REJ ARI and SIDR_REP info lengths are within their arrays;
 *  - an rdma_cm header that decodes re-encodes to the same header. */
#include <errno.h>

#include "fuzz.h"
#include "cm/cm_mad.h"
#include "roce/wire/roce_hdr.h"

static void cma_hdr(const uint8_t *pd, size_t len)
{
	uint8_t *x = fz_dup(pd, len);
	struct sr_cma_hdr h, back;
	uint8_t out[SR_CMA_HDR_BYTES];
	int rc = sr_cma_hdr_decode(&h, x, len);

	REQUIRE(rc == 0 || rc == -EMSGSIZE || rc == -EPROTONOSUPPORT || rc == -EAFNOSUPPORT);
	if (!rc) {
		REQUIRE(h.ip_version == 4 || h.ip_version == 6);
		if (h.ip_version == 4)
			REQUIRE(IN6_IS_ADDR_V4MAPPED(&h.src_addr) && IN6_IS_ADDR_V4MAPPED(&h.dst_addr));
		REQUIRE(sr_cma_hdr_encode(&h, out, sizeof(out)) == SR_CMA_HDR_BYTES);
		memset(&back, 0, sizeof(back));
		REQUIRE(sr_cma_hdr_decode(&back, out, sizeof(out)) == 0);
		REQUIRE(back.ip_version == h.ip_version && back.src_port == h.src_port &&
			!memcmp(&back.src_addr, &h.src_addr, 16) && !memcmp(&back.dst_addr, &h.dst_addr, 16));
	}
	free(x);
}

static void cpi(const uint8_t *p, size_t len)
{
	struct sr_class_port_info c, back;
	uint8_t out[SR_CLASS_PORT_INFO_BYTES];
	uint8_t *x = fz_dup(p, len);
	int rc = sr_class_port_info_decode(&c, x, len);

	REQUIRE(rc == 0 || (rc == -EMSGSIZE && len < SR_CLASS_PORT_INFO_BYTES));
	if (!rc) {
		REQUIRE(sr_class_port_info_encode(&c, out, sizeof(out)) == SR_CLASS_PORT_INFO_BYTES);
		REQUIRE(sr_class_port_info_decode(&back, out, sizeof(out)) == 0);
		REQUIRE(!memcmp(&back, &c, sizeof(c)));
	}
	free(x);
}

static void one_mad(const uint8_t *mad, size_t len)
{
	uint8_t *x = fz_dup(mad, len);
	struct sr_cm_msg m, back;
	uint8_t out[SR_MAD_BYTES], out2[SR_MAD_BYTES];
	int rc = sr_cm_msg_decode(&m, x, len);

	REQUIRE(rc == 0 || rc == -EMSGSIZE || rc == -EPROTONOSUPPORT || rc == -EOPNOTSUPP);
	REQUIRE((rc == -EMSGSIZE) == (len != SR_MAD_BYTES));
	if (rc == -EMSGSIZE) {
		free(x);
		return;
	}
	/* what the CM prints about any MAD it drops or takes */
	(void)sr_cm_attr_name(m.hdr.attr_id);
	if (rc) {
		free(x);
		return;
	}
	REQUIRE(sr_cm_msg_encode(&m, out, sizeof(out)) == SR_MAD_BYTES);
	REQUIRE(sr_cm_msg_decode(&back, out, sizeof(out)) == 0);
	REQUIRE(!memcmp(&back, &m, sizeof(m)));
	REQUIRE(sr_cm_msg_encode(&back, out2, sizeof(out2)) == SR_MAD_BYTES && !memcmp(out, out2, sizeof(out)));

	switch (m.hdr.attr_id) {
	case SR_CM_ATTR_REQ:
		cma_hdr(m.req.private_data, sizeof(m.req.private_data));
		(void)sr_cma_service_id_split(m.req.service_id, NULL, NULL);
		(void)sr_cm_timeout_ns(m.req.remote_cm_response_timeout);
		(void)sr_cm_timeout_ns(m.req.local_cm_response_timeout);
		(void)sr_cm_timeout_ns(m.req.primary.local_ack_timeout);
		break;
	case SR_CM_ATTR_SIDR_REQ:
		cma_hdr(m.sidr_req.private_data, sizeof(m.sidr_req.private_data));
		(void)sr_cma_service_id_split(m.sidr_req.service_id, NULL, NULL);
		break;
	case SR_CM_ATTR_REJ:
		REQUIRE(m.rej.ari_length <= SR_CM_REJ_ARI_BYTES);
		(void)sr_cm_rej_reason_name(m.rej.reason);
		cpi(m.rej.ari, m.rej.ari_length);
		break;
	case SR_CM_ATTR_SIDR_REP:
		REQUIRE(m.sidr_rep.info_length <= SR_CM_SIDR_REP_INFO_BYTES);
		cpi(m.sidr_rep.info, m.sidr_rep.info_length);
		break;
	case SR_CM_ATTR_MRA:
		(void)sr_cm_timeout_ns(m.mra.service_timeout);
		break;
	case SR_CM_ATTR_CLASS_PORT_INFO:
		(void)sr_cm_timeout_ns(m.cpi.resp_time_value);
		break;
	default:
		break;
	}
	free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sr_pkt p;
	uint8_t *x = fz_dup(data, size);

	/* the CM thread's acceptance test (ib_cm.c cm_pkt) */
	if (!sr_pkt_parse(&p, x, size) && p.opcode == IBV_OPCODE_UD_SEND_ONLY && p.paylen == SR_MAD_BYTES) {
		REQUIRE(p.payload >= x && p.payload + p.paylen <= x + size);
		one_mad(p.payload, p.paylen);
	} else {
		one_mad(x, size);
	}
	free(x);
	return 0;
}
