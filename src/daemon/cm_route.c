/* softrdmad: QP1 routing: each CM MAD to the process it belongs to
 * (ipc.h, "CM routing"). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/softrdmad.h"

/* ---- REQs routed to a listener ----
 *
 * The passive side's process must also get what the active side sends
 * before it has learnt the passive side's Communication ID: a REQ sent
 * again (lost REP, or the REP is still being made), and a REJ "timeout"
 * when the active side gives up, which names the connection only by the
 * active side's Local Communication ID and CA GUID (in the ARI).  So
 * remember, for a while, where each REQ went.  Bounded in number and
 * age: a peer can make the daemon remember only the last PEER_REQ_MAX. */

static uint32_t rs_bucket(uint32_t comm_id, const uint8_t guid[8])
{
	uint64_t g;

	memcpy(&g, guid, sizeof(g));
	return (uint32_t)(((g ^ comm_id) * 0x9E3779B97F4A7C15ull) >> 32) & (PEER_REQ_BUCKETS - 1);
}

static void rs_age_unlink(struct req_seen *e)
{
	if (e->older)
		e->older->newer = e->newer;
	else
		d.rs_oldest = e->newer;
	if (e->newer)
		e->newer->older = e->older;
	else
		d.rs_newest = e->older;
}

static void rs_unlink(struct req_seen *e)
{
	struct req_seen **pp = &d.rs_hash[rs_bucket(e->comm_id, e->ca_guid)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	rs_age_unlink(e);
	d.rs_n--;
	free(e);
}

static void rs_append(struct req_seen *e, int64_t now)
{
	e->t_ms = now;
	e->newer = NULL;
	e->older = d.rs_newest;
	if (d.rs_newest)
		d.rs_newest->newer = e;
	else
		d.rs_oldest = e;
	d.rs_newest = e;
}

static void rs_expire(int64_t now)
{
	while (d.rs_oldest && now - d.rs_oldest->t_ms > PEER_REQ_TTL_MS)
		rs_unlink(d.rs_oldest);
}

static struct req_seen *rs_find(uint32_t comm_id, const uint8_t guid[8])
{
	rs_expire(now_ms());
	for (struct req_seen *e = d.rs_hash[rs_bucket(comm_id, guid)]; e; e = e->hnext)
		if (e->comm_id == comm_id && !memcmp(e->ca_guid, guid, 8))
			return e;
	return NULL;
}

static void rs_add(uint32_t comm_id, const uint8_t guid[8], struct client *owner)
{
	struct req_seen *e;
	uint32_t b;

	if (d.rs_n >= PEER_REQ_MAX)
		rs_unlink(d.rs_oldest);
	e = calloc(1, sizeof(*e));
	if (!e)
		return; /* only duplicates and timeout REJs lose their way */
	e->comm_id = comm_id;
	memcpy(e->ca_guid, guid, 8);
	e->owner = owner;
	b = rs_bucket(comm_id, guid);
	e->hnext = d.rs_hash[b];
	d.rs_hash[b] = e;
	d.rs_n++;
	rs_append(e, now_ms());
}

void rs_release_all(struct client *c)
{
	struct req_seen *e = d.rs_oldest;

	while (e) {
		struct req_seen *next = e->newer;

		if (e->owner == c)
			rs_unlink(e);
		e = next;
	}
}

/* ---- CM routing ---- */

/* CM_NCOUNTERS if p is a CM MAD the daemon routes by its IDs, else the
 * counter saying why not. */
static enum cm_counter cm_check(const uint8_t *p, uint32_t len)
{
	const uint8_t *mad = p + SR_BTH_BYTES + SR_DETH_BYTES;

	/* A GSI MAD is exactly 256 bytes, so no pad; TVer 0. */
	if (len != GSI_DGRAM_BYTES || p[0] != IBV_OPCODE_UD_SEND_ONLY || (p[1] & 0x3f))
		return CM_MALFORMED;
	/* The default partition is the only one; GSI takes either membership. */
	if ((rd16(p + 2) & 0x7fff) != 0x7fff || rd32(p + SR_BTH_BYTES) != SR_GSI_QKEY)
		return CM_MALFORMED;
	if (mad[0] != MAD_BASE_VERSION)
		return CM_MALFORMED;
	if (mad[1] != MAD_CLASS_CM)
		return CM_NOT_CM;
	/* ClassPortInfo Get and anything not version 2 have no owner to go to. */
	if (mad[2] != MAD_CM_CLASS_VERSION || mad[3] != MAD_METHOD_SEND)
		return CM_UNSUPPORTED;
	return CM_NCOUNTERS;
}

/* Counts a QP1 datagram and where it went (k; CM_NCOUNTERS: no such
 * count) for the user it went to, else for the client that handed it
 * over. */
static struct route cm_counted(struct route r, enum cm_counter k, const struct client *from)
{
	struct user *u = r.to ? r.to->user : from ? from->user : NULL;

	TALLY(u, cm_rx);
	if (k < CM_NCOUNTERS)
		TALLY(u, cm[k]);
	return r;
}

struct route cm_route(const uint8_t *p, uint32_t len, const struct sr_ipc_pkt *meta, const struct client *from)
{
	const uint8_t *mad = p + SR_BTH_BYTES + SR_DETH_BYTES;
	struct route r = { .why = DROP_NO_QP1_OWNER };
	enum cm_counter cause = cm_check(p, len), k = CM_NCOUNTERS;
	uint16_t attr = 0;

	if (cause == CM_NCOUNTERS) {
		attr = rd16(mad + MAD_OFF_ATTR_ID);
		switch (attr) {
		case CM_ATTR_REQ: {
			uint32_t peer_id = rd32(mad + CM_OFF_LOCAL_COMM_ID);
			const uint8_t *guid = mad + CM_OFF_REQ_LOCAL_CA_GUID;
			struct req_seen *e = rs_find(peer_id, guid);

			if (e) {
				r.to = e->owner;
				/* Still connecting: keep it as long as the peer retries. */
				rs_age_unlink(e);
				rs_append(e, now_ms());
				k = CM_TO_REQ_OWNER;
				break;
			}
			r.to = listen_match(rd64(mad + CM_OFF_REQ_SERVICE_ID), &meta->dst.sin6_addr);
			if (r.to && from && !may_forward(from, r.to)) {
				/* not remembered: it did not go there */
				r.to = NULL;
				r.why = DROP_FOREIGN;
				return cm_counted(r, CM_NCOUNTERS, from);
			}
			if (r.to) {
				rs_add(peer_id, guid, r.to);
				k = CM_TO_LISTENER;
			} else {
				cause = CM_NO_LISTENER;
			}
			break;
		}
		case CM_ATTR_SIDR_REQ:
			r.to = listen_match(rd64(mad + CM_OFF_SIDR_REQ_SERVICE_ID), &meta->dst.sin6_addr);
			if (r.to)
				k = CM_TO_LISTENER;
			else
				cause = CM_NO_LISTENER;
			break;
		case CM_ATTR_REJ:
			if (rd16(mad + CM_OFF_REJ_REASON) == CM_REJ_TIMEOUT && !rd32(mad + CM_OFF_REMOTE_COMM_ID)) {
				struct req_seen *e = rs_find(rd32(mad + CM_OFF_LOCAL_COMM_ID), mad + CM_OFF_REJ_ARI);

				if (e) {
					r.to = e->owner;
					k = CM_TO_REQ_OWNER;
				} else {
					cause = CM_UNKNOWN_ID;
				}
				break;
			}
			/* fall through */
		case CM_ATTR_MRA:
		case CM_ATTR_REP:
		case CM_ATTR_RTU:
		case CM_ATTR_DREQ:
		case CM_ATTR_DREP:
		case CM_ATTR_LAP:
		case CM_ATTR_APR:
			r.to = comm_id_owner(rd32(mad + CM_OFF_REMOTE_COMM_ID));
			if (r.to)
				k = CM_TO_ID_OWNER;
			else
				cause = CM_UNKNOWN_ID;
			break;
		case CM_ATTR_SIDR_REP:
			r.to = comm_id_owner(rd32(mad + CM_OFF_SIDR_REQUEST_ID));
			if (r.to)
				k = CM_TO_ID_OWNER;
			else
				cause = CM_UNKNOWN_ID;
			break;
		default:
			cause = CM_UNSUPPORTED;
			break;
		}
	}
	if (r.to)
		return cm_counted(r, k, from);
	if (cause < CM_NCOUNTERS)
		TALLY(from ? from->user : NULL, cm[cause]);
	if (d.qp1_owner) {
		r.to = d.qp1_owner;
		return cm_counted(r, CM_TO_QP1_OWNER, from);
	}
	if ((cause == CM_NO_LISTENER && (attr == CM_ATTR_REQ || attr == CM_ATTR_SIDR_REQ)) ||
	    (cause == CM_UNKNOWN_ID && attr == CM_ATTR_DREQ)) {
		/* The answer goes to the sender the meta names, which only the
		 * daemon's own socket, or a trusted client, can vouch for. */
		if (from && !client_trusted(from))
			r.why = DROP_FOREIGN;
		else
			r.answered = cm_answer(p, meta, attr);
	}
	return cm_counted(r, CM_NCOUNTERS, from);
}
