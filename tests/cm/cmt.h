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

/* A client id connecting to dst (with a QP: iWARP's rdma_connect needs
 * one); NULL when dst cannot be resolved here (reported as a note). */
VT_STATIC struct rdma_cm_id *cmt_connect_to(const struct sockaddr *dst)
{
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 }
	};

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return NULL;
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)dst, 2000) ||
	    !(ev = next_event(RDMA_CM_EVENT_ADDR_RESOLVED, 2000))) {
		rdma_destroy_id(id);
		return NULL;
	}
	rdma_ack_cm_event(ev);
	if (!CHECK_RC(rdma_resolve_route(id, 2000), 0, "  resolve route") ||
	    !(ev = next_event(RDMA_CM_EVENT_ROUTE_RESOLVED, 2000))) {
		rdma_destroy_id(id);
		return NULL;
	}
	rdma_ack_cm_event(ev);
	CHECK_RC(rdma_create_qp(id, NULL, &qa), 0, "  client QP");
	CHECK_RC(rdma_connect(id, NULL), 0, "  connect");
	return id;
}

/* A connect to dst reaches listener want (the request is then rejected). */
VT_STATIC void cmt_expect_listener(const struct sockaddr *dst, struct rdma_cm_id *want, const char *what)
{
	struct rdma_cm_id *c = cmt_connect_to(dst);
	struct rdma_cm_event *ev;

	if (!CHECK(c != NULL, "connect to %s", what))
		return;
	if ((ev = next_event(RDMA_CM_EVENT_CONNECT_REQUEST, 3000))) {
		struct rdma_cm_id *s = ev->id;
		CHECK(ev->listen_id == want, "  the request to %s reaches its listener", what);
		rdma_ack_cm_event(ev);
		rdma_reject(s, NULL, 0);
		rdma_destroy_id(s);
		if ((ev = next_event(RDMA_CM_EVENT_REJECTED, 3000)))
			rdma_ack_cm_event(ev);
	}
	rdma_destroy_qp(c);
	rdma_destroy_id(c);
}

/* A wildcard listener of family fam on port; afonly < 0: option not set. */
VT_STATIC int cmt_listen_any(struct rdma_cm_id **id, int fam, uint16_t port, int afonly)
{
	struct sockaddr_storage ss = { .ss_family = (sa_family_t)fam };
	((struct sockaddr_in *)&ss)->sin_port = htons(port); /* same offset in sockaddr_in6 */
	int err;

	if (rdma_create_id(ch, id, NULL, RDMA_PS_TCP))
		return -1;
	if (afonly >= 0 && rdma_set_option(*id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &afonly, sizeof(afonly)))
		return -1;
	err = rdma_bind_addr(*id, (struct sockaddr *)&ss);
	return err ? err : rdma_listen(*id, 0);
}

/* tgt's iSER portals: 0.0.0.0 and [::] on one port, AFONLY on both (issue
 * 14, item 2); [::] without AFONLY takes IPv4 too and collides, as in the
 * kernel (with net.ipv6.bindv6only = 0, the default). */
VT_STATIC void cmt_test_afonly(void)
{
	struct rdma_cm_id *l4 = NULL, *l6 = NULL, *lx = NULL;
	uint16_t port = 0;

	SECTION("IPv4 and IPv6 wildcard listeners on one port (RDMA_OPTION_ID_AFONLY)");
	for (int i = 0; i < 20; i++) {
		port = vt_pick_port();
		if (!cmt_listen_any(&l4, AF_INET, port, 1))
			break;
		rdma_destroy_id(l4);
		l4 = NULL;
	}
	if (!CHECK(l4 != NULL, "listen on 0.0.0.0:%u, AFONLY", port))
		return;
	int r = cmt_listen_any(&l6, AF_INET6, port, 1), e = errno;
	CHECK(r == 0, "listen on [::]:%u, AFONLY, beside it\t(%s)", port, strerror(e));
	struct sockaddr_in a4 = vt_lo_addr(port);
	cmt_expect_listener((struct sockaddr *)&a4, l4, "127.0.0.1");
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6,
				   .sin6_port = htons(port),
				   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	struct rdma_cm_id *probe;
	if (!rdma_create_id(ch, &probe, NULL, RDMA_PS_TCP)) {
		a6.sin6_port = 0;
		bool have6 = !rdma_bind_addr(probe, (struct sockaddr *)&a6);
		a6.sin6_port = htons(port);
		rdma_destroy_id(probe);
		if (have6)
			cmt_expect_listener((struct sockaddr *)&a6, l6, "::1");
		else
			NOTE("no ::1 on this host's device: IPv6 connect skipped");
	}
	r = cmt_listen_any(&lx, AF_INET6, port, 0);
	e = errno;
	CHECK(r == -1 && e == EADDRINUSE, "[::]:%u with AFONLY off -> EADDRINUSE\t(%d: %s)", port, r, strerror(e));
	rdma_destroy_id(lx);
	rdma_destroy_id(l6);
	/* AF_INET ids are IPv4-only without being told (kernel default) */
	r = cmt_listen_any(&l6, AF_INET6, port, 1);
	e = errno;
	CHECK(r == 0, "[::]:%u, AFONLY, again after the failed one\t(%s)", port, strerror(e));
	rdma_destroy_id(l6);
	rdma_destroy_id(l4);
	l4 = l6 = NULL;
	r = cmt_listen_any(&l6, AF_INET6, port, 1);
	if (!r)
		r = cmt_listen_any(&l4, AF_INET, port, -1);
	e = errno;
	CHECK(r == 0, "[::]:%u, AFONLY, then 0.0.0.0:%u without the option (IPv4 ids are IPv4-only)\t(%s)", port, port,
	      strerror(e));
	rdma_destroy_id(l4);
	rdma_destroy_id(l6);
}

#endif /* CMT_H */
