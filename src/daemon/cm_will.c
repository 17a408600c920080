/* softrdmad: CM wills (ipc.h): MADs a client leaves the daemon to send if
 * it dies. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/softrdmad.h"

void wills_send(struct client *c)
{
	while (c->wills) {
		struct will *w = c->wills;
		uint8_t pkt[GSI_DGRAM_BYTES] = { 0 };
		struct sr_pkt h = { 0 };

		c->wills = w->next;
		h.opcode = IBV_OPCODE_UD_SEND_ONLY;
		h.pkey = 0xffff;
		h.dqpn = 1;
		h.ackreq = true;
		h.psn = d.gsi_psn++ & SR_PSN_MASK;
		h.deth_qkey = SR_GSI_QKEY;
		h.deth_sqpn = 1;
		if (sr_pkt_build_hdr(pkt, &h) == SR_BTH_BYTES + SR_DETH_BYTES) {
			memcpy(pkt + SR_BTH_BYTES + SR_DETH_BYTES, w->w.mad, sizeof(w->w.mad));
			if (gsi_send(pkt, &w->w.local, &w->w.peer))
				d.wills_sent++;
		}
		free(w);
	}
}

void will_drop(struct client *c, uint32_t comm_id)
{
	for (struct will **pp = &c->wills; *pp; pp = &(*pp)->next)
		if ((*pp)->w.comm_id == comm_id) {
			struct will *w = *pp;
			*pp = w->next;
			free(w);
			return;
		}
}

int will_set(struct client *c, const struct sr_ipc_cm_will *req)
{
	struct id_ent *e = it_find(&d.comm_ids, req->comm_id);

	if (!e || e->owner != c)
		return -ENOENT;
	will_drop(c, req->comm_id);
	if (!req->len)
		return 0;
	if (req->len != sizeof(req->mad) || req->local.sin6_family != AF_INET6 ||
	    req->peer.sin6_family != AF_INET6 ||
	    IN6_IS_ADDR_V4MAPPED(&req->local.sin6_addr) != IN6_IS_ADDR_V4MAPPED(&req->peer.sin6_addr))
		return -EINVAL;
	struct will *w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->w = *req;
	w->next = c->wills;
	c->wills = w;
	return 0;
}
