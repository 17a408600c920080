/* cmt.h - what the rdma_cm tests (test_cm.c, test_iwarp_cm.c) share: one
 * event channel for both ends, the next event of a type, a listener on a
 * fresh port of 127.0.0.1. */
#ifndef CMT_H
#define CMT_H

#include <rdma/rdma_cma.h>

#include "../verbs/vt.h"

static struct rdma_event_channel *ch;

/* The next event, which must be of type want. */
VT_STATIC struct rdma_cm_event *next_event(enum rdma_cm_event_type want, int timeout_ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev = NULL;

	if (poll(&p, 1, timeout_ms) != 1) {
		CHECK(0, "event %s within %d ms", rdma_event_str(want), timeout_ms);
		return NULL;
	}
	if (rdma_get_cm_event(ch, &ev)) {
		CHECK(0, "rdma_get_cm_event: %s", strerror(errno));
		return NULL;
	}
	CHECK(ev->event == want, "event %s (got %s, status %d)", rdma_event_str(want), rdma_event_str(ev->event),
	      ev->status);
	return ev;
}

/* A listener on a fresh port. */
VT_STATIC struct rdma_cm_id *listener(enum rdma_port_space ps, uint16_t *port)
{
	struct rdma_cm_id *l;

	if (rdma_create_id(ch, &l, NULL, ps))
		return NULL;
	for (int i = 0; i < 20; i++) {
		*port = vt_pick_port();
		struct sockaddr_in a = vt_lo_addr(*port);
		if (!rdma_bind_addr(l, (struct sockaddr *)&a) && !rdma_listen(l, 8))
			return l;
		rdma_destroy_id(l);
		if (rdma_create_id(ch, &l, NULL, ps))
			return NULL;
	}
	return NULL;
}

#endif /* CMT_H */
