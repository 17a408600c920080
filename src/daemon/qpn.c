/* softrdmad: host-wide QPN allocation. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/softrdmad.h"

static uint32_t *port_slot(uint32_t qpn)
{
	return &d.port_use[(sr_qpn_src_port(qpn) - 0xC000u) & ((1u << 14) - 1)];
}

int64_t qpn_alloc(struct client *c)
{
	uint32_t q = d.next_qpn, fallback = 0;
	int pref = 0;

	if (d.qpns.n >= QPN_MAX_LIVE)
		return -ENOSPC;
	for (uint32_t scanned = 0; scanned <= QPN_LAST - QPN_FIRST; scanned++) {
		uint32_t cand = q;

		q = q >= QPN_LAST ? QPN_FIRST : q + 1;
		if (it_find(&d.qpns, cand))
			continue;
		/* Distinct source ports keep flows of different local QPs to the
		 * same peer on distinct 4-tuples. */
		if (*port_slot(cand) && pref < SRC_PORT_PREF_TRIES) {
			if (!fallback)
				fallback = cand;
			pref++;
			continue;
		}
		if (*port_slot(cand) && fallback) {
			cand = fallback;
			q = cand >= QPN_LAST ? QPN_FIRST : cand + 1;
		}
		if (it_insert(&d.qpns, cand, c))
			return -ENOMEM;
		d.next_qpn = q;
		(*port_slot(cand))++;
		c->nqpn++;
		return cand;
	}
	return -ENOSPC;
}

void qpn_release(struct id_ent *e)
{
	(*port_slot(e->id))--;
	e->owner->nqpn--;
	it_remove(&d.qpns, e);
}
