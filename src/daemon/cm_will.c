/* softrdmad: CM wills (ipc.h): MADs a client leaves the daemon to send if
 * it dies.
 *
 * A will can only be what rdma_cm needs it for: a DREQ of the client's own
 * connection (its Local Communication ID one the client owns), at most
 * Q_WILL of them per user, and those of dead clients go out at most
 * WILL_RATE a second (a queue charged to their user until sent), so that
 * a user cannot make the daemon store or send floods of datagrams. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/softrdmad.h"

static void will_free(struct will *w)
{
	quota_give(w->user, Q_WILL);
	free(w);
}

static void will_send(const struct will *w)
{
	uint8_t pkt[GSI_DGRAM_BYTES] = { 0 };
	struct sr_pkt h = { 0 };

	h.opcode = IBV_OPCODE_UD_SEND_ONLY;
	h.pkey = 0xffff;
	h.dqpn = 1;
	h.ackreq = true;
	h.psn = d.gsi_psn++ & SR_PSN_MASK;
	h.deth_qkey = SR_GSI_QKEY;
	h.deth_sqpn = 1;
	if (sr_pkt_build_hdr(pkt, &h) == SR_BTH_BYTES + SR_DETH_BYTES) {
		memcpy(pkt + SR_BTH_BYTES + SR_DETH_BYTES, w->w.mad, sizeof(w->w.mad));
		if (gsi_send(pkt, &w->w.local, &w->w.peer, 0))
			TALLY(w->user, wills_sent);
	}
}

void wills_release(struct client *c)
{
	while (c->wills) {
		struct will *w = c->wills;

		c->wills = w->next;
		w->next = NULL;
		if (d.will_tail)
			d.will_tail->next = w;
		else
			d.will_head = w;
		d.will_tail = w;
		d.nwills_queued++;
		w->user->wills_queued++;
	}
	wills_pump();
}

int wills_pump(void)
{
	int64_t now = now_ms();

	while (d.will_head) {
		struct will *w = d.will_head;

		if (!tb_take(&d.will_tb, now, WILL_RATE, WILL_BURST))
			return 1 + 1000 / WILL_RATE;
		d.will_head = w->next;
		if (!d.will_head)
			d.will_tail = NULL;
		d.nwills_queued--;
		w->user->wills_queued--;
		will_send(w);
		will_free(w);
	}
	return -1;
}

void will_drop(struct client *c, uint32_t comm_id)
{
	for (struct will **pp = &c->wills; *pp; pp = &(*pp)->next)
		if ((*pp)->w.comm_id == comm_id) {
			struct will *w = *pp;
			*pp = w->next;
			will_free(w);
			return;
		}
}

/* A DREQ (IBTA vol. 1, 12.6.10) whose Local Communication ID is comm_id. */
static bool is_own_dreq(const uint8_t *mad, uint32_t comm_id)
{
	return mad[0] == MAD_BASE_VERSION && mad[1] == MAD_CLASS_CM && mad[2] == MAD_CM_CLASS_VERSION &&
	       mad[3] == MAD_METHOD_SEND && rd16(mad + MAD_OFF_ATTR_ID) == CM_ATTR_DREQ &&
	       rd32(mad + CM_OFF_LOCAL_COMM_ID) == comm_id;
}

int will_set(struct client *c, const struct sr_ipc_cm_will *req)
{
	struct id_ent *e = it_find(&d.comm_ids, req->comm_id);
	struct will *w;

	if (!e || e->owner != c)
		return -ENOENT;
	will_drop(c, req->comm_id);
	if (!req->len)
		return 0;
	if (req->len != sizeof(req->mad) || req->local.sin6_family != AF_INET6 || req->peer.sin6_family != AF_INET6 ||
	    IN6_IS_ADDR_V4MAPPED(&req->local.sin6_addr) != IN6_IS_ADDR_V4MAPPED(&req->peer.sin6_addr) ||
	    !is_own_dreq(req->mad, req->comm_id))
		return -EINVAL;
	if (quota_take(c->user, Q_WILL))
		return -EDQUOT;
	w = malloc(sizeof(*w));
	if (!w) {
		quota_give(c->user, Q_WILL);
		return -ENOMEM;
	}
	w->user = c->user;
	w->w = *req;
	w->next = c->wills;
	c->wills = w;
	return 0;
}
