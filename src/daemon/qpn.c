/* softrdmad: host-wide QPN allocation. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/softrdmad.h"

/* QPNs are drawn at random, as an RNIC's are hard to guess: a peer that
 * knew which QPN a process will get next, and its PSN and rkey, could
 * write into its memory posing as its peer.  At most 1/16 of the space
 * is live (QPN_MAX_LIVE), so a random draw is free 15 times in 16. */
int64_t qpn_alloc(struct client *c)
{
	int64_t err;

	if (d.qpns.n >= QPN_MAX_LIVE)
		return -ENOSPC;
	if ((err = quota_take(c->user, Q_QPN)))
		return err;
	for (int tries = 0;; tries++) {
		uint32_t cand = QPN_FIRST + rand32() % (QPN_LAST - QPN_FIRST + 1);

		if (tries >= 256) {
			/* astronomically unlikely: the next free one */
			while (it_find(&d.qpns, cand))
				cand = cand >= QPN_LAST ? QPN_FIRST : cand + 1;
		} else if (it_find(&d.qpns, cand)) {
			continue;
		}
		if (it_insert(&d.qpns, cand, c)) {
			quota_give(c->user, Q_QPN);
			return -ENOMEM;
		}
		c->nqpn++;
		return cand;
	}
}

void qpn_release(struct id_ent *e)
{
	e->owner->nqpn--;
	quota_give(e->owner->user, Q_QPN);
	it_remove(&d.qpns, e);
}
