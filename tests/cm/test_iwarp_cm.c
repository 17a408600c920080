/* test_iwarp_cm - the rdma_cm API of our librdmacm.so.1 on a Soft-iWARP
 * device (siw0 on lo), both ends in one process on one event channel,
 * and against raw TCP peers that speak MPA by hand (the wire codec):
 *
 *  - connect/accept with 255 bytes of private data both ways, the iWARP
 *    conn_param mapping of IRD/ORD, ports that are the TCP connection's,
 *    rdma_init_qp_attr, data over the QPs, disconnect (DISCONNECTED on both
 *    ends, no TIMEWAIT_EXIT, as the kernel's iWARP CM);
 *  - rdma_reject (REJECTED -ECONNRESET with the private data), no
 *    listener (REJECTED -ECONNREFUSED, the QP flushed), argument errors,
 *    EADDRINUSE against another rdma_cm listener and a plain TCP one,
 *    DISCONNECTED when the QP is destroyed right after rdma_disconnect;
 *  - raw servers: the Request's bytes, a silent peer (UNREACHABLE
 *    -ETIMEDOUT), garbage (CONNECT_ERROR -EPROTO), a close (REJECTED
 *    -ECONNRESET), a Reject Reply with private data, markers (REJECTED
 *    -ECONNREFUSED), and a Reply with an FPDU right behind it, which must
 *    reach the QP (the CM reads no byte past its frame);
 *  - raw clients: garbage, a silent peer, markers, reject and accept of a
 *    hand-made Request (the Reply's bytes), an FPDU to the accepted QP.
 *
 * Runs with SOFTRDMA_CONF naming a config with only siw0 on lo (crc on). */
#include <sys/ioctl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "cmt.h"
#include "../verbs/vt_mpa.h"

/* No event arrives within ms. */
static bool no_event(int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&p, 1, ms) != 1)
		return true;
	if (!rdma_get_cm_event(ch, &ev)) {
		NOTE("unexpected event %s (status %d)", rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
	}
	return false;
}

static void qp_attr(struct ibv_qp_init_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->qp_type = IBV_QPT_RC;
	a->cap.max_send_wr = a->cap.max_recv_wr = 16;
	a->cap.max_send_sge = a->cap.max_recv_sge = 1;
	a->sq_sig_all = 1;
}

/* A new id resolved to dst (bound to src first, if given), with a QP if
 * qp; NULL if no id could be created. */
static struct rdma_cm_id *resolve_to(const struct sockaddr *src, const struct sockaddr *dst, bool qp)
{
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr qa;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return NULL;
	if (src)
		CHECK_RC(rdma_bind_addr(id, (struct sockaddr *)src), 0, "rdma_bind_addr");
	CHECK_RC(rdma_resolve_addr(id, NULL, (struct sockaddr *)dst, 2000), 0, "rdma_resolve_addr");
	if ((ev = next_event(RDMA_CM_EVENT_ADDR_RESOLVED, 2000)))
		rdma_ack_cm_event(ev);
	CHECK(id->verbs && id->verbs->device->transport_type == IBV_TRANSPORT_IWARP, "  resolved to the iWARP device");
	CHECK_RC(rdma_resolve_route(id, 2000), 0, "rdma_resolve_route");
	if ((ev = next_event(RDMA_CM_EVENT_ROUTE_RESOLVED, 2000)))
		rdma_ack_cm_event(ev);
	if (qp) {
		qp_attr(&qa);
		CHECK_RC(rdma_create_qp(id, NULL, &qa), 0, "  rdma_create_qp");
	}
	return id;
}

/* resolve_to 127.0.0.1:port */
static struct rdma_cm_id *resolved(uint16_t port, bool qp)
{
	struct sockaddr_in a = vt_lo_addr(port);
	return resolve_to(NULL, (struct sockaddr *)&a, qp);
}

static void destroy(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

/* A TCP port is taken on 127.0.0.1 (a plain bind fails). */
static bool tcp_port_taken(uint16_t port)
{
	struct sockaddr_in a = vt_lo_addr(port);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	bool taken = bind(fd, (struct sockaddr *)&a, sizeof(a)) && errno == EADDRINUSE;

	close(fd);
	return taken;
}

/* ------------------------------------------------------------------ */
/* raw sockets and MPA by hand                                          */
/* ------------------------------------------------------------------ */

/* A Send FPDU of paylen bytes (MSN msn), CRC'd if crc. */
static size_t send_fpdu(uint8_t *out, uint32_t msn, const void *pay, size_t paylen, bool crc)
{
	struct sr_iw_hdr h;

	memset(&h, 0, sizeof(h));
	sr_iw_hdr_init(&h, SR_RDMAP_SEND, true);
	h.qn = SR_DDP_QN_SEND;
	h.msn = msn;
	h.mo = 0;
	return vt_fpdu(out, &h, pay, paylen, crc, false);
}

/* A plain TCP listener on 127.0.0.1 and a fresh port. */
static int raw_listener(uint16_t *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	for (int i = 0; i < 20; i++) {
		*port = vt_pick_port();
		struct sockaddr_in a = vt_lo_addr(*port);
		if (!bind(fd, (struct sockaddr *)&a, sizeof(a)) && !listen(fd, 8))
			return fd;
	}
	close(fd);
	return -1;
}

static int raw_accept(int lfd, int timeout_ms)
{
	struct pollfd pf = { .fd = lfd, .events = POLLIN };

	if (poll(&pf, 1, timeout_ms) != 1)
		return -1;
	return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

static int raw_connect(uint16_t port)
{
	struct sockaddr_in a = vt_lo_addr(port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* ------------------------------------------------------------------ */

/* Both c and s get DISCONNECTED within 5 s each (the events acked). */
static bool both_disconnected(struct rdma_cm_id *c, struct rdma_cm_id *s)
{
	struct rdma_cm_event *ev;
	bool cd = false, sd = false;

	for (int i = 0; i < 2 && (ev = next_event(RDMA_CM_EVENT_DISCONNECTED, 5000)); i++) {
		cd = cd || ev->id == c;
		sd = sd || ev->id == s;
		rdma_ack_cm_event(ev);
	}
	return cd && sd;
}

static void test_connect(void)
{
	struct rdma_cm_id *l, *c, *s = NULL;
	struct rdma_cm_event *ev;
	uint16_t port;
	uint8_t req_pd[255], rep_pd[255];

	SECTION("connect with 255 bytes of private data both ways, data, disconnect");
	l = listener(RDMA_PS_TCP, &port);
	if (!CHECK(l != NULL, "listener on port %u", port))
		return;
	CHECK(tcp_port_taken(port), "  the rdma_cm port is a TCP port in use (siw listens on TCP)");
	c = resolved(port, true);
	for (size_t i = 0; i < sizeof(req_pd); i++)
		req_pd[i] = (uint8_t)(0xa0 + i);
	struct rdma_conn_param cp = { .private_data = req_pd,
				      .private_data_len = 255,
				      .responder_resources = 2,
				      .initiator_depth = 3 };
	CHECK_RC(rdma_connect(c, &cp), 0, "connect");
	if (!(ev = next_event(RDMA_CM_EVENT_CONNECT_REQUEST, 3000)))
		goto out;
	s = ev->id;
	CHECK(ev->listen_id == l, "  listen_id is the listener");
	CHECK(ev->param.conn.private_data_len == 255 && !memcmp(ev->param.conn.private_data, req_pd, 255),
	      "  all 255 bytes of the Request's private data arrive (%u)", ev->param.conn.private_data_len);
	/* the kernel's iWARP mapping: initiator_depth <- the peer's IRD,
	 * responder_resources <- the peer's ORD */
	CHECK_INT(ev->param.conn.initiator_depth, 2, "  initiator_depth = the client's IRD");
	CHECK_INT(ev->param.conn.responder_resources, 3, "  responder_resources = the client's ORD");
	CHECK_INT(ntohs(rdma_get_dst_port(s)), ntohs(rdma_get_src_port(c)),
		  "  the server sees the client's TCP source port");
	CHECK_INT(ntohs(rdma_get_src_port(s)), port, "  and its own listening port");
	rdma_ack_cm_event(ev);
	struct ibv_qp_init_attr qa;
	qp_attr(&qa);
	CHECK_RC(rdma_create_qp(s, NULL, &qa), 0, "server create_qp");
	for (size_t i = 0; i < sizeof(rep_pd); i++)
		rep_pd[i] = (uint8_t)(0x10 + i);
	struct rdma_conn_param ap = { .private_data = rep_pd,
				      .private_data_len = 255,
				      .responder_resources = 3,
				      .initiator_depth = 2 };
	CHECK_RC(rdma_accept(s, &ap), 0, "accept");
	for (int i = 0; i < 2 && (ev = next_event(RDMA_CM_EVENT_ESTABLISHED, 3000)); i++) {
		if (ev->id == c)
			CHECK(ev->param.conn.private_data_len == 255 &&
				      !memcmp(ev->param.conn.private_data, rep_pd, 255),
			      "  client ESTABLISHED with the Reply's 255 bytes");
		else
			CHECK(ev->id == s, "  server ESTABLISHED");
		rdma_ack_cm_event(ev);
	}

	struct ibv_qp_attr at;
	struct ibv_qp_init_attr ia;
	int mask = 0;
	CHECK_RC(ibv_query_qp(c->qp, &at, IBV_QP_STATE | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC, &ia), 0,
		 "query client QP");
	CHECK_INT(at.qp_state, IBV_QPS_RTS, "  client QP in RTS");
	CHECK_INT(at.max_rd_atomic, 3, "  client ORD = min(asked 3, server IRD 3)");
	CHECK_RC(ibv_query_qp(s->qp, &at, IBV_QP_STATE | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC, &ia), 0,
		 "query server QP");
	CHECK_INT(at.qp_state, IBV_QPS_RTS, "  server QP in RTS");
	CHECK(at.max_dest_rd_atomic >= 3, "  server IRD covers the client's ORD (%u)", at.max_dest_rd_atomic);
	at.qp_state = IBV_QPS_INIT;
	CHECK_RC(rdma_init_qp_attr(c, &at, &mask), 0, "init_qp_attr(INIT)");
	CHECK((mask & IBV_QP_ACCESS_FLAGS) && (at.qp_access_flags & IBV_ACCESS_REMOTE_READ) &&
		      (at.qp_access_flags & IBV_ACCESS_REMOTE_WRITE),
	      "  INIT: access flags with remote read and write, as iw_cm_init_qp_attr");
	at.qp_state = IBV_QPS_RTS;
	CHECK_RC(rdma_init_qp_attr(c, &at, &mask), 0, "init_qp_attr(RTS)");
	CHECK_INT(mask, IBV_QP_STATE, "  RTS: the state alone");

	/* data: SEND c -> s, READ s <- c, WRITE c -> s */
	char *cb = calloc(1, 65536), *sb = calloc(1, 65536);
	struct ibv_mr *cmr =
		ibv_reg_mr(c->pd, cb, 65536, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_mr *smr =
		ibv_reg_mr(s->pd, sb, 65536, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_wc wc;
	vt_fill(cb, 65536, 7);
	CHECK_RC(vt_post_recv(s->qp, 1, sb, 65536, smr->lkey), 0, "server post_recv");
	CHECK_RC(vt_post_send(c->qp, 2, IBV_WR_SEND, cb, 65536, cmr->lkey, IBV_SEND_SIGNALED, 0, 0, 0), 0,
		 "client SEND 64 KiB");
	EXPECT_WC(s->recv_cq, 1, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "  received");
	EXPECT_WC(c->send_cq, 2, IBV_WC_SUCCESS, IBV_WC_SEND, &wc, "  sent");
	CHECK(!memcmp(cb, sb, 65536), "  data intact");
	memset(sb, 0, 65536);
	CHECK_RC(vt_post_send(s->qp, 3, IBV_WR_RDMA_READ, sb, 65536, smr->lkey, IBV_SEND_SIGNALED, (uintptr_t)cb,
			      cmr->rkey, 0),
		 0, "server RDMA READ 64 KiB");
	EXPECT_WC(s->send_cq, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, &wc, "  read completes");
	CHECK(!memcmp(cb, sb, 65536), "  data intact");
	vt_fill(cb, 65536, 8);
	CHECK_RC(vt_post_send(c->qp, 4, IBV_WR_RDMA_WRITE, cb, 65536, cmr->lkey, IBV_SEND_SIGNALED, (uintptr_t)sb,
			      smr->rkey, 0),
		 0, "client RDMA WRITE 64 KiB");
	EXPECT_WC(c->send_cq, 4, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, &wc, "  write completes");
	for (int i = 0; i < 100 && memcmp(cb, sb, 65536); i++)
		vt_sleep_ms(2);
	CHECK(!memcmp(cb, sb, 65536), "  data intact");

	CHECK_RC(vt_post_recv(s->qp, 5, sb, 64, smr->lkey), 0, "server posts a receive before the disconnect");
	CHECK_RC(rdma_disconnect(c), 0, "client disconnects");
	CHECK(both_disconnected(c, s), "  both ends got DISCONNECTED");
	EXPECT_WC(s->recv_cq, 5, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, &wc, "  the server's receive is flushed");
	CHECK_RC(rdma_disconnect(s), 0, "server's rdma_disconnect after DISCONNECTED succeeds");
	CHECK(no_event(300), "  no TIMEWAIT_EXIT on iWARP (as the kernel's iw_cm)");
	ibv_dereg_mr(cmr);
	ibv_dereg_mr(smr);
	free(cb);
	free(sb);
out:
	destroy(c);
	destroy(s);

	SECTION("rdma_reject with private data");
	c = resolved(port, true);
	CHECK_RC(vt_post_recv(c->qp, 9, req_pd, 8, 0), 0, "client posts a receive");
	CHECK_RC(rdma_connect(c, NULL), 0, "connect");
	if ((ev = next_event(RDMA_CM_EVENT_CONNECT_REQUEST, 3000))) {
		s = ev->id;
		CHECK_INT(ev->param.conn.private_data_len, 0, "  no private data");
		rdma_ack_cm_event(ev);
		char why[] = "go away";
		CHECK_RC(rdma_reject(s, why, sizeof(why)), 0, "reject");
		if ((ev = next_event(RDMA_CM_EVENT_REJECTED, 3000))) {
			CHECK_INT(ev->status, -ECONNRESET, "  REJECTED, status -ECONNRESET (siw's for an MPA reject)");
			CHECK(ev->param.conn.private_data_len == sizeof(why) &&
				      !memcmp(ev->param.conn.private_data, why, sizeof(why)),
			      "  the Reject's private data arrives");
			rdma_ack_cm_event(ev);
		}
		CHECK(vt_qp_state(c->qp) == IBV_QPS_ERR, "  client QP in ERR (as rdma-core does on REJECTED)");
		rdma_destroy_id(s);
	}
	destroy(c);

	SECTION("destroying the QP right after rdma_disconnect (cmtime): DISCONNECTED all the same");
	c = resolved(port, true);
	CHECK_RC(rdma_connect(c, NULL), 0, "connect");
	if ((ev = next_event(RDMA_CM_EVENT_CONNECT_REQUEST, 3000))) {
		s = ev->id;
		rdma_ack_cm_event(ev);
		qp_attr(&qa);
		CHECK_RC(rdma_create_qp(s, NULL, &qa), 0, "server create_qp");
		CHECK_RC(rdma_accept(s, NULL), 0, "accept(NULL)");
		for (int i = 0; i < 2 && (ev = next_event(RDMA_CM_EVENT_ESTABLISHED, 3000)); i++)
			rdma_ack_cm_event(ev);
		CHECK_RC(rdma_disconnect(c), 0, "client disconnects");
		rdma_destroy_qp(c);
		CHECK(both_disconnected(c, s), "  both ends get DISCONNECTED, though the client's QP is gone");
		destroy(s);
	}
	destroy(c);
	rdma_destroy_id(l);
}

/* An RC QP of the application's own on id's device (ibv_create_qp, not
 * rdma_create_qp), with its PD and CQ; NULL if any failed. */
static struct ibv_qp *own_qp(struct rdma_cm_id *id, struct ibv_pd **pd, struct ibv_cq **cq)
{
	struct ibv_qp_init_attr qa;
	struct ibv_qp *qp = NULL;

	*pd = ibv_alloc_pd(id->verbs);
	*cq = *pd ? ibv_create_cq(id->verbs, 16, NULL, NULL, 0) : NULL;
	if (*cq) {
		qp_attr(&qa);
		qa.send_cq = qa.recv_cq = *cq;
		qp = ibv_create_qp(*pd, &qa);
	}
	CHECK(qp != NULL, "  an application's own QP, PD and CQ (%s)", strerror(errno));
	return qp;
}

static void own_qp_free(struct ibv_qp *qp, struct ibv_pd *pd, struct ibv_cq *cq)
{
	if (qp)
		ibv_destroy_qp(qp);
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
}

/* rdma_connect and rdma_accept with an application's own QP, named by
 * rdma_conn_param's qp_num: the kernel's iw_cm finds it by number and
 * drives it (siw accepts it), where the IB CM only carries the number. */
static void test_external_qp(void)
{
	struct rdma_cm_id *l, *c, *s = NULL;
	struct rdma_cm_event *ev;
	struct ibv_pd *cpd = NULL, *spd = NULL;
	struct ibv_cq *ccq = NULL, *scq = NULL;
	struct ibv_qp *cqp = NULL, *sqp = NULL;
	struct ibv_wc wc;
	uint16_t port;
	char cb[4096], sb[4096];

	SECTION("connect and accept with the application's own QPs (conn_param qp_num)");
	l = listener(RDMA_PS_TCP, &port);
	if (!CHECK(l != NULL, "listener on port %u", port))
		return;
	c = resolved(port, false);
	if (!c || !(cqp = own_qp(c, &cpd, &ccq)))
		goto out;
	struct rdma_conn_param cp = { .qp_num = cqp->qp_num ^ 0x1, .responder_resources = 1, .initiator_depth = 1 };
	CHECK(rdma_connect(c, &cp) == -1 && errno == EINVAL, "  a qp_num that names no QP of the device: EINVAL");
	cp.qp_num = cqp->qp_num;
	CHECK_RC(rdma_connect(c, &cp), 0, "connect with the client's own QP");
	if (!(ev = next_event(RDMA_CM_EVENT_CONNECT_REQUEST, 3000)))
		goto out;
	s = ev->id;
	rdma_ack_cm_event(ev);
	if (!(sqp = own_qp(s, &spd, &scq)))
		goto out;
	struct rdma_conn_param ap = { .qp_num = sqp->qp_num, .responder_resources = 1, .initiator_depth = 1 };
	CHECK_RC(rdma_accept(s, &ap), 0, "accept with the server's own QP");
	for (int i = 0; i < 2 && (ev = next_event(RDMA_CM_EVENT_ESTABLISHED, 3000)); i++)
		rdma_ack_cm_event(ev);
	CHECK(c->qp == NULL && s->qp == NULL, "  the ids still have no QP of their own");
	CHECK_INT(vt_qp_state(cqp), IBV_QPS_RTS, "  the client's QP is in RTS");
	CHECK_INT(vt_qp_state(sqp), IBV_QPS_RTS, "  the server's QP is in RTS");

	struct ibv_mr *cmr = ibv_reg_mr(cpd, cb, sizeof(cb), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *smr = ibv_reg_mr(spd, sb, sizeof(sb), IBV_ACCESS_LOCAL_WRITE);
	if (CHECK(cmr && smr, "  register buffers")) {
		vt_fill(cb, sizeof(cb), 11);
		memset(sb, 0, sizeof(sb));
		CHECK_RC(vt_post_recv(sqp, 1, sb, sizeof(sb), smr->lkey), 0, "server post_recv");
		CHECK_RC(vt_post_send(cqp, 2, IBV_WR_SEND, cb, sizeof(cb), cmr->lkey, IBV_SEND_SIGNALED, 0, 0, 0), 0,
			 "client SEND 4 KiB");
		EXPECT_WC(scq, 1, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "  received");
		EXPECT_WC(ccq, 2, IBV_WC_SUCCESS, IBV_WC_SEND, &wc, "  sent");
		CHECK(!memcmp(cb, sb, sizeof(cb)), "  data intact");
		CHECK_RC(vt_post_recv(sqp, 3, sb, sizeof(sb), smr->lkey), 0, "server posts a receive");
	}
	CHECK_RC(rdma_disconnect(c), 0, "client disconnects");
	CHECK(both_disconnected(c, s), "  both ends got DISCONNECTED");
	if (smr)
		EXPECT_WC(scq, 3, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, &wc, "  the server's receive is flushed");
	CHECK(vt_qp_state(cqp) == IBV_QPS_ERR || vt_qp_state(cqp) == IBV_QPS_SQD, "  the client's QP left RTS (%d)",
	      vt_qp_state(cqp));
	own_qp_free(sqp, NULL, NULL);
	sqp = NULL;
	CHECK_RC(rdma_disconnect(s), 0, "server's rdma_disconnect after its QP is destroyed succeeds");
	if (cmr)
		ibv_dereg_mr(cmr);
	if (smr)
		ibv_dereg_mr(smr);
out:
	if (s)
		rdma_destroy_id(s);
	own_qp_free(sqp, spd, scq);
	if (c)
		rdma_destroy_id(c);
	own_qp_free(cqp, cpd, ccq);
	rdma_destroy_id(l);
}

static void test_errors(void)
{
	struct rdma_cm_id *l, *l2, *c, *s;
	struct rdma_cm_event *ev;
	uint16_t port;
	struct ibv_wc wc;
	char b[8];

	SECTION("errors");
	l = listener(RDMA_PS_TCP, &port);
	if (!CHECK(l != NULL, "listener"))
		return;
	CHECK_RC(rdma_create_id(ch, &l2, NULL, RDMA_PS_TCP), 0, "a second id");
	struct sockaddr_in a = vt_lo_addr(port);
	CHECK_RC(rdma_bind_addr(l2, (struct sockaddr *)&a), 0, "  binds to the same port");
	errno = 0;
	CHECK(rdma_listen(l2, 1) == -1 && errno == EADDRINUSE, "  rdma_listen -> EADDRINUSE (%s)", strerror(errno));
	rdma_destroy_id(l2);
	uint16_t tport;
	int tfd = raw_listener(&tport);
	CHECK_RC(rdma_create_id(ch, &l2, NULL, RDMA_PS_TCP), 0, "an id for a port a plain TCP socket listens on");
	a = vt_lo_addr(tport);
	rdma_bind_addr(l2, (struct sockaddr *)&a);
	errno = 0;
	CHECK(rdma_listen(l2, 1) == -1 && errno == EADDRINUSE, "  rdma_listen -> EADDRINUSE (%s)", strerror(errno));
	rdma_destroy_id(l2);
	close(tfd);

	c = resolved(port, false);
	errno = 0;
	CHECK(rdma_connect(c, NULL) == -1 && errno == EINVAL, "connect without a QP -> EINVAL (iWARP connects QPs)");
	struct ibv_qp_init_attr qa;
	qp_attr(&qa);
	CHECK_RC(rdma_create_qp(c, NULL, &qa), 0, "create the QP");
	CHECK_RC(rdma_connect(c, NULL), 0, "then connect");
	if ((ev = next_event(RDMA_CM_EVENT_CONNECT_REQUEST, 3000))) {
		s = ev->id;
		rdma_ack_cm_event(ev);
		errno = 0;
		CHECK(rdma_accept(s, NULL) == -1 && errno == EINVAL, "accept without a QP -> EINVAL");
		errno = 0;
		CHECK(rdma_establish(s) == -1 && errno == EINVAL, "rdma_establish on iWARP -> EINVAL");
		CHECK_RC(rdma_reject(s, NULL, 0), 0, "reject instead");
		if ((ev = next_event(RDMA_CM_EVENT_REJECTED, 3000)))
			rdma_ack_cm_event(ev);
		rdma_destroy_id(s);
	}
	destroy(c);
	rdma_destroy_id(l);

	SECTION("no listener: REJECTED -ECONNREFUSED, the QP flushed");
	c = resolved(port, true);
	CHECK_RC(vt_post_recv(c->qp, 77, b, sizeof(b), 0), 0, "post a receive");
	uint64_t t0 = vt_now_ms();
	CHECK_RC(rdma_connect(c, NULL), 0, "connect (returns at once; the outcome is an event)");
	if ((ev = next_event(RDMA_CM_EVENT_REJECTED, 5000))) {
		CHECK_INT(ev->status, -ECONNREFUSED, "  status -ECONNREFUSED");
		rdma_ack_cm_event(ev);
	}
	NOTE("refused after %" PRIu64 " ms (SOFTRDMA_IW_CONNECT_RETRY_MS=%s)", vt_now_ms() - t0,
	     getenv("SOFTRDMA_IW_CONNECT_RETRY_MS"));
	EXPECT_WC(c->recv_cq, 77, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, &wc, "  the posted receive is flushed");
	destroy(c);

	/* With nobody listening on a port, a connect from that same port
	 * meets its own SYN and TCP connects the socket to itself.  Retried
	 * refusals come from ever new ephemeral ports, so a client of a port
	 * in that range gets there by chance too (a flake of t_iwarp_cm). */
	SECTION("no listener, and the connect's own port is the one it connects to (TCP connects it to itself)");
	{
		struct sockaddr_in a = vt_lo_addr(port);
		c = resolve_to((struct sockaddr *)&a, (struct sockaddr *)&a, true);
		CHECK(c != NULL, "  an id bound to 127.0.0.1:%u, resolved to the same", port);
		CHECK_RC(rdma_connect(c, NULL), 0, "  connect");
		if ((ev = next_event(RDMA_CM_EVENT_REJECTED, 5000))) {
			CHECK_INT(ev->status, -ECONNREFUSED, "  REJECTED -ECONNREFUSED, not a protocol error");
			rdma_ack_cm_event(ev);
		}
		destroy(c);
	}
}

/* Our id connects to a plain TCP listener that plays the MPA responder. */
static void test_raw_server(void)
{
	struct rdma_cm_id *c;
	struct rdma_cm_event *ev;
	uint16_t port;
	uint8_t buf[1024];
	struct sr_mpa_rr rr;
	int lfd, fd;

	SECTION("raw MPA responders");
	lfd = raw_listener(&port);
	if (!CHECK(lfd >= 0, "a plain TCP listener"))
		return;

	/* the Request's bytes */
	c = resolved(port, true);
	uint8_t pd[100];
	vt_fill(pd, sizeof(pd), 3);
	struct rdma_conn_param cp = { .private_data = pd,
				      .private_data_len = 100,
				      .responder_resources = 4,
				      .initiator_depth = 5 };
	CHECK_RC(rdma_connect(c, &cp), 0, "connect to a raw peer that never answers");
	fd = raw_accept(lfd, 3000);
	if (CHECK(fd >= 0 && vt_read_mpa(fd, buf, &rr), "  the peer reads an MPA Request")) {
		CHECK(!rr.reply && rr.rev == 2 && rr.enhanced && rr.crc && !rr.markers && !rr.reject,
		      "  rev 2, RFC 6581 block, CRC asked (crc = on), no markers");
		CHECK(sr_mpa_ird(&rr) == 4 && sr_mpa_ord(&rr) == 5 && !(rr.ird_word & SR_MPA_V2_P2P),
		      "  IRD 4, ORD 5 (responder_resources, initiator_depth), no peer-to-peer\t(%u/%u, 0x%04x)",
		      sr_mpa_ird(&rr), sr_mpa_ord(&rr), rr.ird_word);
		CHECK(rr.pd_len == 100 && !memcmp(rr.pd, pd, 100), "  the private data, after the 4-byte block");
	}
	if ((ev = next_event(RDMA_CM_EVENT_UNREACHABLE, 4000))) {
		CHECK_INT(ev->status, -ETIMEDOUT, "  no Reply in time: UNREACHABLE, -ETIMEDOUT");
		rdma_ack_cm_event(ev);
	}
	CHECK(vt_qp_state(c->qp) == IBV_QPS_ERR, "  the QP in ERR");
	if (fd >= 0) {
		CHECK(vt_peer_gone(fd, 2000), "  the connection is closed");
		close(fd);
	}
	destroy(c);

	struct {
		const char *what;
		int kind;
		enum rdma_cm_event_type ev;
		int status;
	} cases[] = {
		{ "garbage instead of a Reply", 0, RDMA_CM_EVENT_CONNECT_ERROR, -EPROTO },
		{ "a close instead of a Reply", 1, RDMA_CM_EVENT_REJECTED, -ECONNRESET },
		{ "a Reply with the Reject bit and private data", 2, RDMA_CM_EVENT_REJECTED, -ECONNRESET },
		{ "a Reply asking for markers", 3, RDMA_CM_EVENT_REJECTED, -ECONNREFUSED },
		{ "a Request key in the Reply", 4, RDMA_CM_EVENT_CONNECT_ERROR, -EPROTO },
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		c = resolved(port, true);
		CHECK_RC(rdma_connect(c, NULL), 0, "connect; the peer answers with %s", cases[k].what);
		fd = raw_accept(lfd, 3000);
		if (fd >= 0 && vt_read_mpa(fd, buf, &rr)) {
			struct sr_mpa_rr rep = { .reply = cases[k].kind != 4, .rev = 2, .crc = true };
			int n = 0;

			switch (cases[k].kind) {
			case 0:
				memcpy(buf, "HTTP/1.1 400 Bad Request\r\n\r\n", 28);
				n = 28;
				break;
			case 2:
				rep.reject = true;
				rep.pd = (const uint8_t *)"nope";
				rep.pd_len = 5;
				break;
			case 3:
				rep.markers = true;
				break;
			default:
				break;
			}
			if (cases[k].kind >= 2) {
				sr_mpa_rr_set_v2(&rep, 1, 1, false, 0);
				n = sr_mpa_rr_build(buf, sizeof(buf), &rep);
			}
			if (n > 0)
				vt_write_all(fd, buf, (size_t)n);
			if (cases[k].kind == 1) {
				close(fd);
				fd = -1;
			}
		}
		if ((ev = next_event(cases[k].ev, 3000))) {
			CHECK_INT(ev->status, cases[k].status, "  %s, status %d", rdma_event_str(cases[k].ev),
				  cases[k].status);
			if (cases[k].kind == 2)
				CHECK(ev->param.conn.private_data_len == 5 &&
					      !memcmp(ev->param.conn.private_data, "nope", 5),
				      "  with the Reject's private data");
			rdma_ack_cm_event(ev);
		}
		if (fd >= 0)
			close(fd);
		destroy(c);
	}

	/* a Reply with the first FPDU right behind it, in one segment */
	c = resolved(port, true);
	char rb[64];
	struct ibv_mr *mr = ibv_reg_mr(c->pd, rb, sizeof(rb), IBV_ACCESS_LOCAL_WRITE);
	CHECK_RC(vt_post_recv(c->qp, 5, rb, sizeof(rb), mr->lkey), 0, "post a receive");
	CHECK_RC(rdma_connect(c, NULL), 0, "connect; the peer sends its Reply and a Send in one segment");
	fd = raw_accept(lfd, 3000);
	if (fd >= 0 && vt_read_mpa(fd, buf, &rr)) {
		struct sr_mpa_rr rep = { .reply = true, .rev = 2, .crc = false };
		sr_mpa_rr_set_v2(&rep, sr_mpa_ord(&rr), sr_mpa_ird(&rr), false, 0);
		int n = sr_mpa_rr_build(buf, sizeof(buf), &rep);
		/* our side asked for CRC: the Reply's C bit must be 1 (RFC 5044);
		 * a peer saying 0 is taken at its word, the reply is authoritative */
		n += (int)send_fpdu(buf + n, 1, "behind the Reply", 17, false);
		CHECK(vt_write_all(fd, buf, (size_t)n), "  sent %d bytes", n);
	}
	if ((ev = next_event(RDMA_CM_EVENT_ESTABLISHED, 3000)))
		rdma_ack_cm_event(ev);
	struct ibv_wc wc;
	if (EXPECT_WC(c->recv_cq, 5, IBV_WC_SUCCESS, IBV_WC_RECV, &wc,
		      "  the QP receives the Send that followed the Reply"))
		CHECK(wc.byte_len == 17 && !strcmp(rb, "behind the Reply"),
		      "  its data intact (the CM read no byte of it)");
	if (fd >= 0)
		close(fd);
	if ((ev = next_event(RDMA_CM_EVENT_DISCONNECTED, 3000)))
		rdma_ack_cm_event(ev);
	ibv_dereg_mr(mr);
	destroy(c);
	close(lfd);
}

/* The FPDUs at the start of buf[0, len): the ULPDU length of each (or
 * stops at a partial one), whether every CRC is right, and into *h the
 * header of each (up to max).  Returns how many. */
static int parse_fpdus(const uint8_t *buf, size_t len, bool crc, struct sr_iw_hdr *h, int max, bool *crc_ok)
{
	size_t off = 0;
	int n = 0;

	*crc_ok = true;
	while (off + SR_MPA_LEN_BYTES <= len && n < max) {
		uint32_t ul = (uint32_t)buf[off] << 8 | buf[off + 1], flen = sr_mpa_fpdu_len(ul);

		if (off + flen > len || sr_iw_hdr_parse(&h[n], buf + off + 2, ul, ul) < 0)
			break;
		if (crc && ~sr_mpa_crc_update(~0u, buf + off, flen - SR_MPA_CRC_BYTES) !=
				   sr_mpa_crc_load(buf + off + flen - SR_MPA_CRC_BYTES))
			*crc_ok = false;
		h[n].hdr_len = ul - h[n].hdr_len; /* now: the payload length */
		off += flen;
		n++;
	}
	return n;
}

static int sock_inq(int fd)
{
	int n = 0;

	return ioctl(fd, FIONREAD, &n) ? -1 : n;
}

/* Kernel siw as the responder sends its MPA Reply before its QP takes
 * the socket over (siw_accept): what arrives in between is read only
 * when another segment comes.  Our initiator's first Send must not stay
 * there for ever: zero-length Writes follow it until the peer's first
 * FPDU, and one more after that. */
static void test_late_reader(void)
{
	struct rdma_cm_id *c;
	struct rdma_cm_event *ev;
	struct sr_mpa_rr rr;
	struct sr_iw_hdr h[32];
	uint8_t buf[4096];
	char rb[64], sb[8] = "request";
	uint16_t port;
	int lfd, fd, early, n;
	bool crc_ok;

	SECTION("a responder that reads what came early only when more comes (kernel siw)");
	lfd = raw_listener(&port);
	if (!CHECK(lfd >= 0, "a plain TCP listener"))
		return;
	c = resolved(port, true);
	struct ibv_mr *mr = ibv_reg_mr(c->pd, rb, sizeof(rb), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *smr = ibv_reg_mr(c->pd, sb, sizeof(sb), 0);
	CHECK_RC(vt_post_recv(c->qp, 5, rb, sizeof(rb), mr->lkey), 0, "post a receive");
	CHECK_RC(rdma_connect(c, NULL), 0, "connect");
	fd = raw_accept(lfd, 3000);
	if (!CHECK(fd >= 0 && vt_read_mpa(fd, buf, &rr), "  the peer reads the MPA Request")) {
		destroy(c);
		close(lfd);
		return;
	}
	struct sr_mpa_rr rep = { .reply = true, .rev = 2, .crc = rr.crc };
	sr_mpa_rr_set_v2(&rep, sr_mpa_ord(&rr), sr_mpa_ird(&rr), false, 0);
	n = sr_mpa_rr_build(buf, sizeof(buf), &rep);
	CHECK(n > 0 && vt_write_all(fd, buf, (size_t)n), "  the peer sends its Reply");
	if ((ev = next_event(RDMA_CM_EVENT_ESTABLISHED, 3000)))
		rdma_ack_cm_event(ev);
	CHECK_RC(vt_post_send(c->qp, 6, IBV_WR_SEND, sb, sizeof(sb), smr->lkey, IBV_SEND_SIGNALED, 0, 0, 0), 0,
		 "post a Send of 8 bytes");
	EXPECT_WC(c->send_cq, 6, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "  it completes (handed to TCP)");
	/* the peer still takes the socket over: what comes meanwhile is early */
	usleep(50 * 1000);
	early = sock_inq(fd);
	CHECK(early >= (int)sr_mpa_fpdu_len(SR_DDP_UNTAGGED_HDR + 8),
	      "  the Send came while the peer did not read\t(%d bytes)", early);
	uint64_t until = vt_now_ms() + 3000;
	while (sock_inq(fd) <= early && vt_now_ms() < until)
		usleep(1000);
	CHECK(sock_inq(fd) > early, "  another segment follows within 3 s (the peer then reads them all)\t(%d bytes)",
	      sock_inq(fd));
	size_t got = vt_read_exact(fd, buf, (size_t)sock_inq(fd), 1000);
	n = parse_fpdus(buf, got, rr.crc, h, 32, &crc_ok);
	CHECK(n >= 2 && h[0].opcode == SR_RDMAP_SEND && h[0].hdr_len == 8 &&
		      !memcmp(buf + 2 + SR_DDP_UNTAGGED_HDR, "request", 8),
	      "  the Send first\t(%d FPDUs)", n);
	bool zw = n >= 2;
	for (int i = 1; i < n; i++)
		zw = zw && h[i].opcode == SR_RDMAP_WRITE && h[i].tagged && h[i].last && h[i].hdr_len == 0;
	CHECK(zw && crc_ok, "  then zero-length RDMA Writes, nothing else, CRCs right\t(%d)", n - 1);
	/* the peer answers: our QP receives it, and a last zero-length Write
	 * comes for what it sent before (the peer may not have read it) */
	struct sr_iw_hdr sh;
	memset(&sh, 0, sizeof(sh));
	sr_iw_hdr_init(&sh, SR_RDMAP_SEND, true);
	sh.qn = SR_DDP_QN_SEND;
	sh.msn = 1;
	n = (int)vt_fpdu(buf, &sh, "answer", 7, rr.crc, false);
	CHECK(vt_write_all(fd, buf, (size_t)n), "  the peer sends a Send");
	EXPECT_WC(c->recv_cq, 5, IBV_WC_SUCCESS, IBV_WC_RECV, NULL, "  our QP receives it");
	size_t one = sr_mpa_fpdu_len(SR_DDP_TAGGED_HDR);
	got = vt_read_exact(fd, buf, one, 3000);
	n = parse_fpdus(buf, got, rr.crc, h, 1, &crc_ok);
	CHECK(n == 1 && h[0].opcode == SR_RDMAP_WRITE && h[0].hdr_len == 0, "  one more zero-length Write");
	CHECK(vt_peer_next(fd, 300) == -ETIME, "  and then nothing: no more of them");
	close(fd);
	if ((ev = next_event(RDMA_CM_EVENT_DISCONNECTED, 3000)))
		rdma_ack_cm_event(ev);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(mr);
	destroy(c);
	close(lfd);
}

/* Raw MPA initiators against our listener. */
static void test_raw_client(void)
{
	struct rdma_cm_id *l, *s, *c;
	struct rdma_cm_event *ev;
	uint16_t port;
	uint8_t buf[1024];
	struct sr_mpa_rr rr;
	int fd;

	SECTION("raw MPA initiators");
	l = listener(RDMA_PS_TCP, &port);
	if (!CHECK(l != NULL, "listener"))
		return;

	static const struct {
		const char *what;
		const char *bytes;
		size_t len;
	} junk[] = {
		{ "garbage", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27 },
		{ "a truncated Request", "MPA ID Req Frame\x40\x02\x00\x40xxxx", 24 },
		{ "a Request with 0xffff bytes of private data", "MPA ID Req Frame\x40\x01\xff\xff", 20 },
		{ "a Reply key", "MPA ID Rep Frame\x40\x01\x00\x00", 20 },
		{ "MPA revision 3", "MPA ID Req Frame\x40\x03\x00\x00", 20 },
	};
	for (size_t k = 0; k < sizeof(junk) / sizeof(junk[0]); k++) {
		fd = raw_connect(port);
		if (!CHECK(fd >= 0, "a raw client connects"))
			continue;
		vt_write_all(fd, junk[k].bytes, junk[k].len);
		CHECK(vt_peer_gone(fd, 3000), "  %s: the listener closes the connection", junk[k].what);
		close(fd);
	}
	fd = raw_connect(port);
	CHECK(fd >= 0 && vt_peer_gone(fd, 3000), "a silent client is closed after half the MPA timeout");
	if (fd >= 0)
		close(fd);
	fd = raw_connect(port);
	if (fd >= 0) {
		vt_write_all(fd, "MPA ID Req Frame\x80\x01\x00\x00", 20);
		CHECK(vt_read_mpa(fd, buf, &rr) && rr.reply && rr.reject,
		      "a Request asking for markers gets a Reject Reply");
		CHECK(vt_peer_gone(fd, 3000), "  and the connection is closed");
		close(fd);
	}
	CHECK(no_event(100), "none of these reached the application");

	/* a good Request: reject it */
	struct sr_mpa_rr req = { .rev = 2, .crc = false };
	uint8_t pd[40];
	vt_fill(pd, sizeof(pd), 11);
	sr_mpa_rr_set_v2(&req, 6, 7, false, 0);
	req.pd = pd;
	req.pd_len = sizeof(pd);
	int n = sr_mpa_rr_build(buf, sizeof(buf), &req);
	fd = raw_connect(port);
	CHECK(fd >= 0 && vt_write_all(fd, buf, (size_t)n), "a raw client sends a good Request");
	if ((ev = next_event(RDMA_CM_EVENT_CONNECT_REQUEST, 3000))) {
		s = ev->id;
		CHECK(ev->param.conn.private_data_len == sizeof(pd) &&
			      !memcmp(ev->param.conn.private_data, pd, sizeof(pd)),
		      "  CONNECT_REQUEST with its private data");
		CHECK(ev->param.conn.initiator_depth == 6 && ev->param.conn.responder_resources == 7,
		      "  initiator_depth = its IRD, responder_resources = its ORD\t(%u, %u)",
		      ev->param.conn.initiator_depth, ev->param.conn.responder_resources);
		rdma_ack_cm_event(ev);
		CHECK_RC(rdma_reject(s, "no", 3), 0, "reject");
		CHECK(vt_read_mpa(fd, buf, &rr) && rr.reply && rr.reject && rr.rev == 2 && rr.pd_len == 3 &&
			      !memcmp(rr.pd, "no", 3),
		      "  the client reads a Reply with the Reject bit and the private data");
		CHECK(vt_peer_gone(fd, 3000), "  then the connection closes");
		rdma_destroy_id(s);
	}
	if (fd >= 0)
		close(fd);

	/* a good Request: accept it, then talk to the QP */
	fd = raw_connect(port);
	CHECK(fd >= 0 && vt_write_all(fd, buf, (size_t)sr_mpa_rr_build(buf, sizeof(buf), &req)),
	      "a raw client sends a good Request (CRC not asked)");
	if ((ev = next_event(RDMA_CM_EVENT_CONNECT_REQUEST, 3000))) {
		s = ev->id;
		rdma_ack_cm_event(ev);
		struct ibv_qp_init_attr qa;
		qp_attr(&qa);
		CHECK_RC(rdma_create_qp(s, NULL, &qa), 0, "server create_qp");
		char rb[64];
		struct ibv_mr *mr = ibv_reg_mr(s->pd, rb, sizeof(rb), IBV_ACCESS_LOCAL_WRITE);
		CHECK_RC(vt_post_recv(s->qp, 8, rb, sizeof(rb), mr->lkey), 0, "post a receive");
		struct rdma_conn_param ap = { .private_data = "yes",
					      .private_data_len = 4,
					      .responder_resources = 2,
					      .initiator_depth = 9 };
		CHECK_RC(rdma_accept(s, &ap), 0, "accept (IRD 2, ORD 9)");
		if (CHECK(vt_read_mpa(fd, buf, &rr), "  the client reads the Reply")) {
			CHECK(rr.reply && !rr.reject && rr.rev == 2 && rr.enhanced, "  rev 2, enhanced, not a reject");
			CHECK(rr.crc, "  CRC on: our configuration wants it, so both use it (RFC 5044)");
			CHECK(sr_mpa_ird(&rr) == 7 && sr_mpa_ord(&rr) == 6,
			      "  IRD raised to its ORD 7, ORD lowered to its IRD 6 (relaxed, as siw)\t(%u/%u)",
			      sr_mpa_ird(&rr), sr_mpa_ord(&rr));
			CHECK(rr.pd_len == 4 && !memcmp(rr.pd, "yes", 4), "  the accept's private data");
		}
		if ((ev = next_event(RDMA_CM_EVENT_ESTABLISHED, 3000)))
			rdma_ack_cm_event(ev);
		n = (int)send_fpdu(buf, 1, "hello, QP", 10, true);
		CHECK(vt_write_all(fd, buf, (size_t)n), "the client sends a Send FPDU with CRC");
		struct ibv_wc wc;
		if (EXPECT_WC(s->recv_cq, 8, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "  the accepted QP receives it"))
			CHECK(wc.byte_len == 10 && !strcmp(rb, "hello, QP"), "  data intact");
		close(fd);
		fd = -1;
		if ((ev = next_event(RDMA_CM_EVENT_DISCONNECTED, 3000))) {
			CHECK(ev->id == s, "  the client's close: DISCONNECTED");
			rdma_ack_cm_event(ev);
		}
		ibv_dereg_mr(mr);
		destroy(s);
	}
	if (fd >= 0)
		close(fd);

	/* the listener still serves a real client */
	c = resolved(port, true);
	CHECK_RC(rdma_connect(c, NULL), 0, "a real client after all that");
	if ((ev = next_event(RDMA_CM_EVENT_CONNECT_REQUEST, 3000))) {
		s = ev->id;
		rdma_ack_cm_event(ev);
		rdma_reject(s, NULL, 0);
		if ((ev = next_event(RDMA_CM_EVENT_REJECTED, 3000)))
			rdma_ack_cm_event(ev);
		rdma_destroy_id(s);
	}
	destroy(c);
	rdma_destroy_id(l);
}
/* Kernel siw as the initiator reads the MPA Reply with 4 bytes to spare
 * and drops the connection if they are there: our responder sends
 * nothing behind its Reply until the initiator's first FPDU, or a while
 * (SR_IW_HUSH_NS, 100 ms) after the Reply if none comes. */
static void test_hushed_responder(void)
{
	struct rdma_cm_id *l, *s;
	struct rdma_cm_event *ev;
	struct sr_mpa_rr req = { .rev = 2, .crc = true }, rr;
	struct sr_iw_hdr h[1];
	uint8_t buf[1024];
	uint16_t port;
	bool crc_ok;

	SECTION("our responder says nothing behind its Reply until the initiator spoke (kernel siw)");
	l = listener(RDMA_PS_TCP, &port);
	if (!CHECK(l != NULL, "listener"))
		return;
	sr_mpa_rr_set_v2(&req, 1, 1, false, 0);
	for (int silent = 0; silent < 2; silent++) {
		int fd = raw_connect(port), n = sr_mpa_rr_build(buf, sizeof(buf), &req);

		if (!CHECK(fd >= 0 && vt_write_all(fd, buf, (size_t)n), "a raw initiator sends its Request"))
			continue;
		if (!(ev = next_event(RDMA_CM_EVENT_CONNECT_REQUEST, 3000))) {
			close(fd);
			continue;
		}
		s = ev->id;
		rdma_ack_cm_event(ev);
		struct ibv_qp_init_attr qa;
		qp_attr(&qa);
		CHECK_RC(rdma_create_qp(s, NULL, &qa), 0, "  create_qp");
		char rb[64], sb[6] = "hello";
		struct ibv_mr *mr = ibv_reg_mr(s->pd, rb, sizeof(rb), IBV_ACCESS_LOCAL_WRITE);
		struct ibv_mr *smr = ibv_reg_mr(s->pd, sb, sizeof(sb), 0);
		CHECK_RC(vt_post_recv(s->qp, 8, rb, sizeof(rb), mr->lkey), 0, "  post a receive");
		uint64_t t_acc = vt_now_ms();
		CHECK_RC(rdma_accept(s, NULL), 0, "  accept");
		CHECK_RC(vt_post_send(s->qp, 9, IBV_WR_SEND, sb, sizeof(sb), smr->lkey, IBV_SEND_SIGNALED, 0, 0, 0), 0,
			 "  post a Send at once");
		uint64_t t0 = vt_now_ms();
		CHECK(vt_read_mpa(fd, buf, &rr) && rr.reply && rr.crc, "  the initiator reads the Reply");
		if ((ev = next_event(RDMA_CM_EVENT_ESTABLISHED, 3000)))
			rdma_ack_cm_event(ev);
		if (!silent) {
			/* the hush lasts 100 ms from the accept: a loaded host may
			 * have used it up before the check could begin */
			uint64_t since = vt_now_ms() - t_acc;
			if (since > 40)
				NOTE("  nothing behind it while the initiator is silent: not checked, %llu ms after "
				     "the accept",
				     (unsigned long long)since);
			else
				CHECK(vt_peer_next(fd, 50) == -ETIME,
				      "  nothing behind it while the initiator is silent (50 ms)");
			n = (int)send_fpdu(buf, 1, "hi", 3, true);
			CHECK(vt_write_all(fd, buf, (size_t)n), "  the initiator sends a Send");
			EXPECT_WC(s->recv_cq, 8, IBV_WC_SUCCESS, IBV_WC_RECV, NULL, "  our QP receives it");
		}
		size_t want = sr_mpa_fpdu_len(SR_DDP_UNTAGGED_HDR + sizeof(sb));
		size_t got = vt_read_exact(fd, buf, want, 3000);
		uint64_t waited = vt_now_ms() - t0;
		CHECK(got == want && parse_fpdus(buf, got, true, h, 1, &crc_ok) == 1 && h[0].opcode == SR_RDMAP_SEND &&
			      crc_ok && !memcmp(buf + 2 + SR_DDP_UNTAGGED_HDR, "hello", 6),
		      "  %s: then our Send comes, intact", silent ? "the initiator silent" : "after its Send");
		if (silent)
			CHECK(waited >= 90 && waited < 3000, "  after the hush (100 ms)\t(%llu ms)",
			      (unsigned long long)waited);
		EXPECT_WC(s->send_cq, 9, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "  and completes");
		close(fd);
		if ((ev = next_event(RDMA_CM_EVENT_DISCONNECTED, 3000)))
			rdma_ack_cm_event(ev);
		ibv_dereg_mr(smr);
		ibv_dereg_mr(mr);
		destroy(s);
	}
	rdma_destroy_id(l);
}

static void test_port0_v6(void)
{
	struct rdma_cm_id *l, *c, *s;
	struct rdma_cm_event *ev;

	SECTION("a listener on port 0 and on ::1");
	CHECK_RC(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP), 0, "create id");
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	if (rdma_bind_addr(l, (struct sockaddr *)&a6)) {
		NOTE("no ::1 on this host's iWARP device: skipped (%s)", strerror(errno));
		rdma_destroy_id(l);
		return;
	}
	CHECK_RC(rdma_listen(l, 4), 0, "listen on [::1]:0");
	uint16_t port = ntohs(rdma_get_src_port(l));
	CHECK(port != 0, "  a port was chosen (%u)", port);
	a6.sin6_port = htons(port);
	c = resolve_to(NULL, (struct sockaddr *)&a6, true);
	CHECK(c != NULL, "client id resolved to [::1]:%u", port);
	struct ibv_qp_init_attr qa;
	CHECK_RC(rdma_connect(c, NULL), 0, "connect over IPv6");
	if ((ev = next_event(RDMA_CM_EVENT_CONNECT_REQUEST, 3000))) {
		s = ev->id;
		CHECK(rdma_get_peer_addr(s)->sa_family == AF_INET6, "  the server sees an IPv6 peer");
		rdma_ack_cm_event(ev);
		qp_attr(&qa);
		CHECK_RC(rdma_create_qp(s, NULL, &qa), 0, "server QP");
		CHECK_RC(rdma_accept(s, NULL), 0, "accept");
		for (int i = 0; i < 2 && (ev = next_event(RDMA_CM_EVENT_ESTABLISHED, 3000)); i++)
			rdma_ack_cm_event(ev);
		CHECK_RC(rdma_disconnect(s), 0, "server disconnects");
		for (int i = 0; i < 2 && (ev = next_event(RDMA_CM_EVENT_DISCONNECTED, 3000)); i++)
			rdma_ack_cm_event(ev);
		destroy(s);
	}
	destroy(c);
	rdma_destroy_id(l);
}

int main(int argc, char **argv)
{
	vt_begin_args("test_iwarp_cm", 240, argc, argv);
	vt_seed(0x17c3a);
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	/* short timeouts for the silent peers, read once by the library */
	setenv("SOFTRDMA_IW_MPA_TIMEOUT_MS", "1000", 1);
	setenv("SOFTRDMA_IW_CONNECT_RETRY_MS", "300", 1);
	ch = vt_list ? NULL : rdma_create_event_channel(); /* listing starts nothing */
	if (!vt_list && !CHECK(ch != NULL, "create event channel (%s)", strerror(errno)))
		return vt_end();
	VT_RUN(test_connect());
	VT_RUN(test_external_qp());
	VT_RUN(test_errors());
	VT_RUN(test_raw_server());
	VT_RUN(test_late_reader());
	VT_RUN(test_raw_client());
	VT_RUN(test_hushed_responder());
	VT_RUN(test_port0_v6());
	VT_RUN(cmt_test_afonly());
	if (ch)
		rdma_destroy_event_channel(ch);
	return vt_end();
}
