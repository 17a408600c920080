/* test_mcast: UD multicast (ibv_attach_mcast / ibv_detach_mcast) on the
 * loopback Soft-RoCE device, with the kernel's behaviour as the reference
 * (ib_attach_mcast(), uverbs, rxe_mcast.c, rxe_rcv_mcast_pkt()):
 *
 *  - errno: EINVAL for RC/UC QPs and for GIDs that are not multicast
 *    (multicast = IPv4-mapped 224.0.0.0/4 or IPv6 ff00::/8); attaching
 *    twice is a no-op; detaching what is not attached is EINVAL; ENOMEM
 *    beyond max_mcast_grp groups and max_mcast_qp_attach QPs per group;
 *    ibv_destroy_qp of an attached QP is EBUSY;
 *  - delivery: one UD SEND to the group (DestQP 0xFFFFFF) reaches every
 *    attached QP whose Q_Key matches (payload after the 40-byte GRH, the
 *    GRH naming the group), not a QP that is not attached, nor one whose
 *    Q_Key differs; the sender's own QP gets it back when attached (as
 *    rxe: IP multicast loopback); detach stops delivery; two contexts of
 *    one process (two daemon clients) both get it.
 *
 * The host must loop IPv4 multicast back on the device's interface; a
 * probe with plain sockets checks that first and the test exits 77 (skip)
 * if it does not (see README, "Troubleshooting").
 *
 * Helper modes, for tests/conformance/t_mcast.sh (several processes):
 *   test_mcast recv GROUP COUNT QKEY READY-FILE
 *       attach a UD QP to GROUP (an IPv4 or IPv6 address), create
 *       READY-FILE, receive COUNT datagrams "mcast <i>" in order (i =
 *       0..COUNT-1), then detach.  Exit 0 when all arrived intact.
 *   test_mcast send GROUP COUNT QKEY
 *       send the COUNT datagrams to GROUP (DestQP 0xFFFFFF). */
#include "vt.h"

#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define MC_QPN 0xffffffu
#define QK 0x11111111u
#define QK2 0x22222222u
#define QK3 0x33333333u
#define MSG 200u	  /* payload bytes per datagram */
#define SLOT (40u + 256u) /* receive slot: GRH + payload room */
#define NSLOT 64u
#define WAIT_MS 5000
#define QUIET_MS 250

static struct vt_dev D;
static int G_IDX; /* GID index with the device's IPv4 address */
static struct in_addr LOCAL4;

struct ud {
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct vt_buf rbuf, sbuf;
};

/* ---- setup ---- */

static bool ud_create(struct vt_dev *d, struct ud *u, uint32_t qkey, bool to_rts)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;

	memset(u, 0, sizeof(*u));
	u->scq = ibv_create_cq(d->ctx, 256, NULL, NULL, 0);
	u->rcq = ibv_create_cq(d->ctx, 256, NULL, NULL, 0);
	if (!CHECK(u->scq && u->rcq, "create CQs\t(errno %d %s)", errno, strerror(errno)))
		return false;
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_UD;
	ia.send_cq = u->scq;
	ia.recv_cq = u->rcq;
	ia.cap.max_send_wr = 64;
	ia.cap.max_recv_wr = NSLOT;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	u->qp = ibv_create_qp(d->pd, &ia);
	if (!CHECK(u->qp, "create a UD QP\t(errno %d %s)", errno, strerror(errno)))
		return false;
	if (!to_rts)
		return true;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = qkey;
	if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return CHECK(0, "UD QP to INIT");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE))
		return CHECK(0, "UD QP to RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return CHECK(0, "UD QP to RTS");
	if (vt_buf_alloc(&u->rbuf, d->pd, (size_t)SLOT * NSLOT, VT_GUARD_DEFAULT, IBV_ACCESS_LOCAL_WRITE) ||
	    vt_buf_alloc(&u->sbuf, d->pd, 4096, VT_GUARD_DEFAULT, IBV_ACCESS_LOCAL_WRITE))
		return CHECK(0, "register buffers");
	for (uint32_t i = 0; i < NSLOT; i++)
		if (vt_post_recv(u->qp, i, u->rbuf.p + (size_t)i * SLOT, SLOT, u->rbuf.mr->lkey))
			return CHECK(0, "post receive %u", i);
	return true;
}

static void ud_destroy(struct ud *u)
{
	if (u->qp) {
		uint32_t qpn = u->qp->qp_num;

		CHECK_RC(ibv_destroy_qp(u->qp), 0, "ibv_destroy_qp(QP %u)", qpn);
	}
	vt_buf_free(&u->rbuf);
	vt_buf_free(&u->sbuf);
	if (u->scq)
		ibv_destroy_cq(u->scq);
	if (u->rcq)
		ibv_destroy_cq(u->rcq);
	memset(u, 0, sizeof(*u));
}

static bool set_qkey(struct ud *u, uint32_t qkey)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.qkey = qkey;
	return CHECK_RC(ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_QKEY), 0, "QP %u: Q_Key 0x%08x (RTS->RTS)",
			u->qp->qp_num, qkey);
}

static void gid_v4(union ibv_gid *g, uint32_t addr_host)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = g->raw[11] = 0xff;
	g->raw[12] = (uint8_t)(addr_host >> 24);
	g->raw[13] = (uint8_t)(addr_host >> 16);
	g->raw[14] = (uint8_t)(addr_host >> 8);
	g->raw[15] = (uint8_t)addr_host;
}

static bool gid_parse(const char *s, union ibv_gid *g)
{
	struct in_addr a4;

	memset(g, 0, sizeof(*g));
	if (inet_pton(AF_INET, s, &a4) == 1) {
		gid_v4(g, ntohl(a4.s_addr));
		return true;
	}
	return inet_pton(AF_INET6, s, g->raw) == 1;
}

static const char *gid_str(const union ibv_gid *g, char *buf, size_t len)
{
	return inet_ntop(AF_INET6, g->raw, buf, (socklen_t)len) ? buf : "?";
}

static bool gid_is_v4(const union ibv_gid *g)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	return !memcmp(g->raw, pfx, sizeof(pfx));
}

static struct ibv_ah *mcast_ah(struct vt_dev *d, const union ibv_gid *group, int sgid_index)
{
	struct ibv_ah_attr ah;

	memset(&ah, 0, sizeof(ah));
	ah.is_global = 1;
	ah.port_num = 1;
	ah.grh.dgid = *group;
	ah.grh.sgid_index = (uint8_t)sgid_index;
	ah.grh.hop_limit = 1; /* what rdma_cm's MULTICAST_JOIN event gives */
	return ibv_create_ah(d->pd, &ah);
}

/* ---- the host's multicast loopback ---- */

/* Can a datagram sent to an IPv4 group from the device's address come
 * back to a socket that joined the group on that interface?  Plain
 * sockets, on a port of their own: nothing of softrdma is involved. */
static bool probe_ipv4_loop(struct in_addr local, struct in_addr group, char *why, size_t wlen)
{
	int r = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct ip_mreqn mr;
	unsigned char one = 1;
	bool ok = false;
	char buf[16];

	if (r < 0 || s < 0) {
		snprintf(why, wlen, "socket: %s", strerror(errno));
		goto out;
	}
	if (bind(r, (struct sockaddr *)&sa, sizeof(sa)) || getsockname(r, (struct sockaddr *)&sa, &sl)) {
		snprintf(why, wlen, "bind: %s", strerror(errno));
		goto out;
	}
	memset(&mr, 0, sizeof(mr));
	mr.imr_multiaddr = group;
	mr.imr_address = local;
	if (setsockopt(r, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr))) {
		snprintf(why, wlen, "IP_ADD_MEMBERSHIP on the interface of %s: %s", inet_ntoa(local), strerror(errno));
		goto out;
	}
	memset(&mr, 0, sizeof(mr));
	mr.imr_address = local;
	if (setsockopt(s, IPPROTO_IP, IP_MULTICAST_IF, &mr, sizeof(mr)) ||
	    setsockopt(s, IPPROTO_IP, IP_MULTICAST_LOOP, &one, sizeof(one))) {
		snprintf(why, wlen, "IP_MULTICAST_IF %s: %s", inet_ntoa(local), strerror(errno));
		goto out;
	}
	sa.sin_addr = group;
	if (sendto(s, "probe", 5, 0, (struct sockaddr *)&sa, sizeof(sa)) != 5) {
		snprintf(why, wlen, "sending to an IPv4 multicast group from %s: %s", inet_ntoa(local),
			 strerror(errno));
		goto out;
	}
	struct pollfd p = { .fd = r, .events = POLLIN };
	if (poll(&p, 1, 1000) == 1 && recv(r, buf, sizeof(buf), MSG_DONTWAIT) == 5)
		ok = true;
	else
		snprintf(why, wlen, "a datagram sent to an IPv4 multicast group from %s does not come back",
			 inet_ntoa(local));
out:
	if (r >= 0)
		close(r);
	if (s >= 0)
		close(s);
	return ok;
}

/* ---- sending and receiving ---- */

static bool send_mc(struct ud *s, struct ibv_ah *ah, uint32_t qkey, uint32_t seed, const char *what)
{
	struct ibv_wc wc;

	vt_fill(s->sbuf.p, MSG, seed);
	int rc = vt_post_ud_send(s->qp, seed, s->sbuf.p, MSG, s->sbuf.mr->lkey, IBV_SEND_SIGNALED, ah, MC_QPN, qkey);
	if (!CHECK_RC(rc, 0, "%s: post a UD SEND to DestQP 0xFFFFFF, Q_Key 0x%08x", what, qkey))
		return false;
	return EXPECT_WC(s->scq, seed, IBV_WC_SUCCESS, IBV_WC_SEND, &wc, "%s: send completes", what);
}

/* One datagram on u: the payload of seed after a GRH whose IPv4 header
 * names the group as destination; the slot is posted again. */
static bool expect_mc(struct ud *u, uint32_t seed, uint32_t src_qpn, const union ibv_gid *group, const char *what)
{
	struct ibv_wc wc;
	bool ok;

	memset(&wc, 0, sizeof(wc));
	if (vt_poll(u->rcq, 1, &wc, WAIT_MS) != 1)
		return CHECK(0, "%s: QP %u receives the datagram (NOTHING within %d ms)", what, u->qp->qp_num, WAIT_MS);
	ok = CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.byte_len == 40 + MSG &&
			   wc.src_qp == src_qpn && (wc.wc_flags & IBV_WC_GRH) && wc.qp_num == u->qp->qp_num,
		   "%s: QP %u receives it: RECV, %u bytes, source QP %u, GRH\t(status %s, opcode %d, byte_len %u, "
		   "src_qp %u, wc_flags 0x%x, qp_num %u)",
		   what, u->qp->qp_num, 40 + MSG, src_qpn, vt_status_str(wc.status), wc.opcode, wc.byte_len, wc.src_qp,
		   wc.wc_flags, wc.qp_num);
	if (wc.status == IBV_WC_SUCCESS && wc.wr_id < NSLOT) {
		uint8_t *slot = u->rbuf.p + (size_t)wc.wr_id * SLOT;

		ok &= CHECK_DATA(slot + 40, MSG, seed, "%s: QP %u payload", what, u->qp->qp_num);
		if (gid_is_v4(group))
			ok &= CHECK(!memcmp(slot + 36, &group->raw[12], 4),
				    "%s: the GRH (IPv4 header) names the group as destination\t(got %u.%u.%u.%u)", what,
				    slot[36], slot[37], slot[38], slot[39]);
		memset(slot, 0, SLOT);
		vt_post_recv(u->qp, wc.wr_id, slot, SLOT, u->rbuf.mr->lkey);
	}
	return ok;
}

#define EXPECT_NONE(u, ...) CHECK_CQ_EMPTY((u)->rcq, QUIET_MS, __VA_ARGS__)

/* ---- tests ---- */

static void test_attrs(void)
{
	SECTION("device attributes");
	CHECK(D.attr.max_mcast_grp > 0, "max_mcast_grp > 0\t(got %d)", D.attr.max_mcast_grp);
	CHECK(D.attr.max_mcast_qp_attach > 0, "max_mcast_qp_attach > 0\t(got %d)", D.attr.max_mcast_qp_attach);
	CHECK(D.attr.max_total_mcast_qp_attach >= D.attr.max_mcast_qp_attach,
	      "max_total_mcast_qp_attach >= max_mcast_qp_attach\t(got %d)", D.attr.max_total_mcast_qp_attach);
}

static void test_errnos(const union ibv_gid *grp)
{
	struct ud u;
	struct ibv_qp *rc;
	struct ibv_cq *cq;
	struct ibv_qp_init_attr ia;
	union ibv_gid g;
	char b[64];

	SECTION("ibv_attach_mcast / ibv_detach_mcast: errno as the kernel's");
	if (!ud_create(&D, &u, QK, false))
		return;
	cq = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = ia.recv_cq = cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	rc = cq ? ibv_create_qp(D.pd, &ia) : NULL;
	if (CHECK(rc, "create an RC QP")) {
		CHECK_RC(ibv_attach_mcast(rc, grp, 0), EINVAL, "attach an RC QP");
		CHECK_RC(ibv_detach_mcast(rc, grp, 0), EINVAL, "detach an RC QP");
		CHECK_RC(ibv_destroy_qp(rc), 0, "destroy the RC QP");
	}
	ia.qp_type = IBV_QPT_UC;
	rc = cq ? ibv_create_qp(D.pd, &ia) : NULL;
	if (CHECK(rc, "create a UC QP")) {
		CHECK_RC(ibv_attach_mcast(rc, grp, 0), EINVAL, "attach a UC QP");
		CHECK_RC(ibv_destroy_qp(rc), 0, "destroy the UC QP");
	}
	if (cq)
		ibv_destroy_cq(cq);

	static const struct {
		const char *addr;
		int want;
	} gids[] = {
		{ "10.1.2.3", EINVAL }, /* unicast IPv4 */
		{ "127.0.0.1", EINVAL },
		{ "240.0.0.1", EINVAL },       /* class E is not multicast */
		{ "255.255.255.255", EINVAL }, /* broadcast */
		{ "::", EINVAL },
		{ "fe80::1", EINVAL },
		{ "2001:db8::1", EINVAL },
		{ "::e000:1", EINVAL }, /* 224.0.0.1 but not IPv4-mapped */
		{ "224.0.0.1", 0 },	/* the bounds of 224.0.0.0/4 */
		{ "239.255.255.255", 0 },
		{ "ff0e::1:2", 0 },
		{ "ff02::1:3", 0 },
	};
	for (size_t i = 0; i < sizeof(gids) / sizeof(gids[0]); i++) {
		gid_parse(gids[i].addr, &g);
		int r = ibv_attach_mcast(u.qp, &g, 0);
		if (r == EAFNOSUPPORT && !gid_is_v4(&g)) {
			NOTE("attach to %s: EAFNOSUPPORT (no IPv6 on this host): not checked", gids[i].addr);
			continue;
		}
		CHECK_RC(r, gids[i].want, "attach a UD QP to %s", gids[i].addr);
		if (!r)
			CHECK_RC(ibv_detach_mcast(u.qp, &g, 0), 0, "  and detach it");
	}

	CHECK_RC(ibv_detach_mcast(u.qp, grp, 0), EINVAL, "detach from %s, never attached", gid_str(grp, b, sizeof(b)));
	CHECK_RC(ibv_attach_mcast(u.qp, grp, 0), 0, "attach to %s (QP in RESET)", b);
	CHECK_RC(ibv_attach_mcast(u.qp, grp, 0), 0, "attach again: a no-op");
	CHECK_RC(ibv_attach_mcast(u.qp, grp, 0xc001), 0, "attach again with a multicast LID (ignored on RoCE)");
	CHECK_RC(ibv_destroy_qp(u.qp), EBUSY, "ibv_destroy_qp of an attached QP");
	CHECK_RC(ibv_detach_mcast(u.qp, grp, 0), 0, "detach (once is enough: attach counts no references)");
	CHECK_RC(ibv_detach_mcast(u.qp, grp, 0), EINVAL, "detach again");
	ud_destroy(&u);
}

static void test_limits(const union ibv_gid *grp)
{
	int ngrp = D.attr.max_mcast_grp, nqp = D.attr.max_mcast_qp_attach;
	struct ud u, *q;
	union ibv_gid g;
	int i, bad = 0, at = 0;

	SECTION("limits: %d groups, %d QPs per group", ngrp, nqp);
	if (ngrp <= 0 || ngrp > 4096 || nqp <= 0 || nqp > 1024) {
		CHECK(0, "limits small enough to test\t(got %d, %d)", ngrp, nqp);
		return;
	}
	if (!ud_create(&D, &u, QK, false))
		return;
	for (i = 0; i < ngrp; i++) {
		gid_v4(&g, 0xef400000u + (uint32_t)i); /* 239.64.0.i */
		int r = ibv_attach_mcast(u.qp, &g, 0);
		if (r && !bad++)
			at = i;
	}
	CHECK(!bad, "attach one QP to %d groups\t(%d failed, first at %d)", ngrp, bad, at);
	gid_v4(&g, 0xef400000u + (uint32_t)ngrp);
	CHECK_RC(ibv_attach_mcast(u.qp, &g, 0), ENOMEM, "one group more (max_mcast_grp)");
	bad = 0;
	for (i = 0; i < ngrp; i++) {
		gid_v4(&g, 0xef400000u + (uint32_t)i);
		bad += ibv_detach_mcast(u.qp, &g, 0) != 0;
	}
	CHECK(!bad, "detach from all of them\t(%d failed)", bad);
	gid_v4(&g, 0xef400000u + (uint32_t)ngrp);
	CHECK_RC(ibv_attach_mcast(u.qp, &g, 0), 0, "then a new group can be attached");
	CHECK_RC(ibv_detach_mcast(u.qp, &g, 0), 0, "  and detached");
	ud_destroy(&u);

	q = calloc((size_t)nqp + 1, sizeof(*q));
	if (!q)
		return;
	bad = 0;
	for (i = 0; i <= nqp; i++) {
		struct ibv_qp_init_attr ia;

		memset(&ia, 0, sizeof(ia));
		q[i].scq = ibv_create_cq(D.ctx, 4, NULL, NULL, 0);
		ia.qp_type = IBV_QPT_UD;
		ia.send_cq = ia.recv_cq = q[i].scq;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		q[i].qp = q[i].scq ? ibv_create_qp(D.pd, &ia) : NULL;
		if (!q[i].qp) {
			CHECK(0, "create UD QP %d of %d\t(errno %d %s)", i, nqp + 1, errno, strerror(errno));
			goto free;
		}
	}
	for (i = 0; i < nqp; i++)
		bad += ibv_attach_mcast(q[i].qp, grp, 0) != 0;
	CHECK(!bad, "attach %d QPs to one group\t(%d failed)", nqp, bad);
	CHECK_RC(ibv_attach_mcast(q[nqp].qp, grp, 0), ENOMEM, "one QP more (max_mcast_qp_attach)");
	CHECK_RC(ibv_detach_mcast(q[0].qp, grp, 0), 0, "detach one");
	CHECK_RC(ibv_attach_mcast(q[nqp].qp, grp, 0), 0, "then the last QP can attach");
	bad = 0;
	for (i = 1; i <= nqp; i++)
		bad += ibv_detach_mcast(q[i].qp, grp, 0) != 0;
	CHECK(!bad, "detach all\t(%d failed)", bad);
free:
	bad = 0;
	for (i = 0; i <= nqp; i++) {
		if (q[i].qp)
			bad += ibv_destroy_qp(q[i].qp) != 0;
		if (q[i].scq)
			ibv_destroy_cq(q[i].scq);
	}
	CHECK(!bad, "destroy the %d QPs\t(%d failed)", nqp + 1, bad);
	free(q);
}

static void test_delivery(const union ibv_gid *grp)
{
	struct ud a, b, c, s;
	struct ibv_ah *ah = NULL;
	uint32_t seed = 1000;
	char buf[64];

	SECTION("delivery to %s: QPs A and B attached, C not, S sends", gid_str(grp, buf, sizeof(buf)));
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&c, 0, sizeof(c));
	memset(&s, 0, sizeof(s));
	if (!ud_create(&D, &a, QK, true) || !ud_create(&D, &b, QK, true) || !ud_create(&D, &c, QK, true) ||
	    !ud_create(&D, &s, QK, true))
		goto out;
	ah = mcast_ah(&D, grp, G_IDX);
	if (!CHECK(ah, "ibv_create_ah for the group\t(errno %d %s)", errno, strerror(errno)))
		goto out;
	NOTE("QPs A %u, B %u, C %u, S %u", a.qp->qp_num, b.qp->qp_num, c.qp->qp_num, s.qp->qp_num);
	CHECK_RC(ibv_attach_mcast(a.qp, grp, 0), 0, "attach A");
	CHECK_RC(ibv_attach_mcast(b.qp, grp, 0), 0, "attach B");

	if (send_mc(&s, ah, QK, ++seed, "one datagram")) {
		expect_mc(&a, seed, s.qp->qp_num, grp, "one datagram");
		expect_mc(&b, seed, s.qp->qp_num, grp, "one datagram");
		EXPECT_NONE(&c, "one datagram: C, not attached, gets nothing");
		EXPECT_NONE(&s, "one datagram: S, not attached, gets nothing");
		EXPECT_NONE(&a, "one datagram: A gets one copy only");
		EXPECT_NONE(&b, "one datagram: B gets one copy only");
	}

	/* a WR Q_Key with the high bit set means the sending QP's own */
	if (send_mc(&s, ah, 0x80000000u, ++seed, "Q_Key 0x80000000 (the sender's own, 0x11111111)")) {
		expect_mc(&a, seed, s.qp->qp_num, grp, "Q_Key from the sender's QP");
		expect_mc(&b, seed, s.qp->qp_num, grp, "Q_Key from the sender's QP");
	}

	/* Q_Key per QP, as rxe_rcv_mcast_pkt() checks it for each */
	if (set_qkey(&b, QK2)) {
		if (send_mc(&s, ah, QK, ++seed, "Q_Key of A")) {
			expect_mc(&a, seed, s.qp->qp_num, grp, "Q_Key of A");
			EXPECT_NONE(&b, "Q_Key of A: B (Q_Key 0x%08x) drops it", QK2);
		}
		if (send_mc(&s, ah, QK2, ++seed, "Q_Key of B")) {
			expect_mc(&b, seed, s.qp->qp_num, grp, "Q_Key of B");
			EXPECT_NONE(&a, "Q_Key of B: A (Q_Key 0x%08x) drops it", QK);
		}
		if (send_mc(&s, ah, QK3, ++seed, "a Q_Key nobody has")) {
			EXPECT_NONE(&a, "a Q_Key nobody has: A drops it");
			EXPECT_NONE(&b, "a Q_Key nobody has: B drops it");
		}
		set_qkey(&b, QK);
	}

	/* a burst, in order */
	{
		enum {
			N = 32
		};
		bool ok = true;
		uint32_t first = seed + 1;

		for (int i = 0; i < N && ok; i++)
			ok = send_mc(&s, ah, QK, ++seed, "burst");
		for (int i = 0; i < N && ok; i++) {
			char what[64];

			snprintf(what, sizeof(what), "burst datagram %d of %d", i + 1, N);
			ok = expect_mc(&a, first + (uint32_t)i, s.qp->qp_num, grp, what);
			ok &= expect_mc(&b, first + (uint32_t)i, s.qp->qp_num, grp, what);
		}
	}

	/* the sender's own QP, attached, gets its datagram back (rxe does) */
	if (CHECK_RC(ibv_attach_mcast(s.qp, grp, 0), 0, "attach S, the sender") &&
	    send_mc(&s, ah, QK, ++seed, "S attached")) {
		expect_mc(&s, seed, s.qp->qp_num, grp, "S attached: S itself");
		expect_mc(&a, seed, s.qp->qp_num, grp, "S attached");
		expect_mc(&b, seed, s.qp->qp_num, grp, "S attached");
		CHECK_RC(ibv_detach_mcast(s.qp, grp, 0), 0, "detach S");
	}

	/* detach stops delivery */
	CHECK_RC(ibv_detach_mcast(b.qp, grp, 0), 0, "detach B");
	if (send_mc(&s, ah, QK, ++seed, "B detached")) {
		expect_mc(&a, seed, s.qp->qp_num, grp, "B detached");
		EXPECT_NONE(&b, "B detached: B gets nothing");
	}
	CHECK_RC(ibv_detach_mcast(a.qp, grp, 0), 0, "detach A");
	if (send_mc(&s, ah, QK, ++seed, "nobody attached")) {
		EXPECT_NONE(&a, "nobody attached: A gets nothing");
		EXPECT_NONE(&b, "nobody attached: B gets nothing");
		EXPECT_NONE(&c, "nobody attached: C gets nothing");
	}
	/* and attaching again restores it */
	CHECK_RC(ibv_attach_mcast(c.qp, grp, 0), 0, "attach C");
	if (send_mc(&s, ah, QK, ++seed, "C attached")) {
		expect_mc(&c, seed, s.qp->qp_num, grp, "C attached");
		EXPECT_NONE(&a, "C attached: A gets nothing");
	}
	CHECK_RC(ibv_detach_mcast(c.qp, grp, 0), 0, "detach C");
	CHECK_GUARDS(&a.rbuf, "A's receive buffer");
	CHECK_GUARDS(&b.rbuf, "B's receive buffer");
out:
	if (ah)
		ibv_destroy_ah(ah);
	ud_destroy(&a);
	ud_destroy(&b);
	ud_destroy(&c);
	ud_destroy(&s);
}

/* Two contexts are two clients of the daemon: each gets its own copy. */
static void test_two_contexts(const union ibv_gid *grp)
{
	struct vt_dev d2;
	struct ud a, x, s;
	struct ibv_ah *ah = NULL;
	uint32_t seed = 5000;

	SECTION("two contexts of one process (two daemon clients)");
	memset(&a, 0, sizeof(a));
	memset(&x, 0, sizeof(x));
	memset(&s, 0, sizeof(s));
	if (!vt_open(&d2))
		return;
	if (!ud_create(&D, &a, QK, true) || !ud_create(&d2, &x, QK, true) || !ud_create(&D, &s, QK, true))
		goto out;
	ah = mcast_ah(&D, grp, G_IDX);
	if (!CHECK(ah, "ibv_create_ah for the group"))
		goto out;
	CHECK_RC(ibv_attach_mcast(a.qp, grp, 0), 0, "attach A (context 1)");
	CHECK_RC(ibv_attach_mcast(x.qp, grp, 0), 0, "attach X (context 2)");
	if (send_mc(&s, ah, QK, ++seed, "two contexts")) {
		expect_mc(&a, seed, s.qp->qp_num, grp, "two contexts: context 1");
		expect_mc(&x, seed, s.qp->qp_num, grp, "two contexts: context 2");
	}
	CHECK_RC(ibv_detach_mcast(a.qp, grp, 0), 0, "detach A");
	if (send_mc(&s, ah, QK, ++seed, "context 1 left")) {
		expect_mc(&x, seed, s.qp->qp_num, grp, "context 1 left: context 2 still gets it");
		EXPECT_NONE(&a, "context 1 left: A gets nothing");
	}
	CHECK_RC(ibv_detach_mcast(x.qp, grp, 0), 0, "detach X");
out:
	if (ah)
		ibv_destroy_ah(ah);
	ud_destroy(&a);
	ud_destroy(&x);
	ud_destroy(&s);
	vt_close(&d2);
}

/* ---- helper modes for the multi-process conformance test ---- */

/* The first GID of the group's family (IPv6: a global address first). */
static int gid_index_for(struct vt_dev *d, const union ibv_gid *grp)
{
	int best = -1;

	for (int i = 0; i < d->port.gid_tbl_len; i++) {
		union ibv_gid g;

		if (ibv_query_gid(d->ctx, 1, i, &g))
			break;
		bool zero = true;
		for (int k = 0; k < 16; k++)
			zero &= !g.raw[k];
		if (zero || gid_is_v4(&g) != gid_is_v4(grp))
			continue;
		if (!gid_is_v4(&g) && g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80) {
			if (best < 0)
				best = i; /* link-local: only if nothing better */
			continue;
		}
		return i;
	}
	return best;
}

static int helper(int argc, char **argv)
{
	union ibv_gid grp;
	unsigned long count;
	uint32_t qkey;
	struct ud u;
	bool recv_mode = !strcmp(argv[1], "recv");
	int idx;

	if (argc < (recv_mode ? 6 : 5) || !gid_parse(argv[2], &grp)) {
		fprintf(stderr, "usage: test_mcast recv GROUP COUNT QKEY READY-FILE | send GROUP COUNT QKEY\n");
		return 2;
	}
	count = strtoul(argv[3], NULL, 0);
	qkey = (uint32_t)strtoul(argv[4], NULL, 0);
	if (count < 1 || count > NSLOT) {
		fprintf(stderr, "COUNT must be 1..%u\n", NSLOT);
		return 2;
	}
	vt_begin(recv_mode ? "test_mcast recv" : "test_mcast send", 60);
	if (!vt_open(&D))
		return vt_end();
	idx = gid_index_for(&D, &grp);
	if (!CHECK(idx >= 0, "a GID of the group's address family"))
		goto close;
	if (!ud_create(&D, &u, qkey, true))
		goto close;
	if (recv_mode) {
		struct ibv_wc wc;
		unsigned long got = 0;

		if (!CHECK_RC(ibv_attach_mcast(u.qp, &grp, 0), 0, "attach QP %u to %s", u.qp->qp_num, argv[2]))
			goto destroy;
		int fd = open(argv[5], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd >= 0)
			close(fd);
		printf("ready: QP %u attached to %s\n", u.qp->qp_num, argv[2]);
		while (got < count) {
			char want[MSG];

			if (vt_poll(u.rcq, 1, &wc, 20000) != 1) {
				CHECK(0, "datagram %lu of %lu within 20 s", got + 1, count);
				break;
			}
			uint8_t *p = u.rbuf.p + (size_t)wc.wr_id * SLOT + 40;
			memset(want, 0, sizeof(want));
			snprintf(want, sizeof(want), "mcast %lu", got);
			if (!CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == 40 + MSG && !memcmp(p, want, MSG),
				   "datagram %lu: \"%s\" from QP %u\t(status %s, byte_len %u, got \"%.20s\")", got,
				   want, wc.src_qp, vt_status_str(wc.status), wc.byte_len, (char *)p))
				break;
			vt_post_recv(u.qp, wc.wr_id, u.rbuf.p + (size_t)wc.wr_id * SLOT, SLOT, u.rbuf.mr->lkey);
			got++;
		}
		CHECK(got == count, "received all %lu datagrams\t(got %lu)", count, got);
		CHECK_RC(ibv_detach_mcast(u.qp, &grp, 0), 0, "detach");
	} else {
		struct ibv_ah *ah = mcast_ah(&D, &grp, idx);

		if (!CHECK(ah, "ibv_create_ah for %s (GID index %d)\t(errno %d %s)", argv[2], idx, errno,
			   strerror(errno)))
			goto destroy;
		for (unsigned long i = 0; i < count; i++) {
			struct ibv_wc wc;

			memset(u.sbuf.p, 0, MSG);
			snprintf((char *)u.sbuf.p, MSG, "mcast %lu", i);
			if (vt_post_ud_send(u.qp, i, u.sbuf.p, MSG, u.sbuf.mr->lkey, IBV_SEND_SIGNALED, ah, MC_QPN,
					    qkey) ||
			    vt_poll(u.scq, 1, &wc, WAIT_MS) != 1 || wc.status != IBV_WC_SUCCESS) {
				CHECK(0, "send datagram %lu", i);
				break;
			}
			vt_sleep_ms(2); /* UD: do not outrun the receivers' queues */
		}
		printf("sent %lu datagrams from QP %u to %s\n", count, u.qp->qp_num, argv[2]);
		ibv_destroy_ah(ah);
	}
destroy:
	ud_destroy(&u);
close:
	vt_close(&D);
	return vt_end();
}

/* The device, its IPv4 GID and a group of our own (239.77.x.y, so that
 * concurrent runs keep apart): 0, or 77 where this host cannot run the
 * test (said why), or 1. */
static int setup(union ibv_gid *grp)
{
	union ibv_gid g;
	char why[256];
	struct in_addr group4;

	if (!vt_open(&D))
		return 1;
	G_IDX = -1;
	for (int i = 0; i < D.port.gid_tbl_len && G_IDX < 0; i++)
		if (!ibv_query_gid(D.ctx, 1, i, &g) && gid_is_v4(&g) &&
		    (g.raw[12] || g.raw[13] || g.raw[14] || g.raw[15]))
			G_IDX = i;
	if (G_IDX < 0) {
		printf("SKIP: test_mcast: device %s has no IPv4 GID\n", D.name);
		return 77;
	}
	memcpy(&LOCAL4, &g.raw[12], 4);
	gid_v4(grp, 0xef4d0000u | ((uint32_t)getpid() & 0xffffu));
	memcpy(&group4, &grp->raw[12], 4);
	if (!probe_ipv4_loop(LOCAL4, group4, why, sizeof(why))) {
		printf("SKIP: test_mcast: this host does not loop IPv4 multicast back on %s's interface (%s); "
		       "see README, Troubleshooting (ip link set lo multicast on; ip route add 224.0.0.0/4 dev lo)\n",
		       D.name, why);
		return 77;
	}
	NOTE("device %s, GID index %d (%s), group %s", D.name, G_IDX, inet_ntoa(LOCAL4),
	     gid_str(grp, why, sizeof(why)));
	return 0;
}

int main(int argc, char **argv)
{
	union ibv_gid grp = { 0 };

	if (argc > 1 && (!strcmp(argv[1], "recv") || !strcmp(argv[1], "send")))
		return helper(argc, argv);
	vt_begin_args("test_mcast", 120, argc, argv);
	if (!vt_list) {
		int r = setup(&grp);

		if (r) {
			vt_close(&D);
			return r == 77 ? 77 : vt_end();
		}
	}
	VT_RUN(test_attrs());
	VT_RUN(test_errnos(&grp));
	VT_RUN(test_limits(&grp));
	VT_RUN(test_delivery(&grp));
	VT_RUN(test_two_contexts(&grp));
	vt_close(&D);
	return vt_end();
}
