/* test_tclass: the traffic class of a UD datagram, end to end (issue 34,
 * item 4).  An AH's grh.traffic_class is the IPv4 TOS / IPv6 traffic class
 * the datagram is sent with, all 8 bits with the ECN field, as rxe writes
 * it; the receiver's GRH area carries what it arrived with, so that
 * ibv_init_ah_from_wc answers with it.  Datagrams come in both ways a UD
 * QP receives: through softrdmad (a peer it never sent to) and on its flow
 * socket (a peer it sent to); over IPv4 and, where lo has ::1, IPv6.
 * (tests/conformance/t_tos.sh checks the same on the wire, for RC too.) */
#include "vt.h"

static struct vt_dev D;

/* The traffic class a receive's 40-byte GRH area reports: IPv4 header in
 * its last 20 bytes (checksum checked), IPv6 the whole area. */
static int grh_tclass(const uint8_t *g, bool v6)
{
	if (v6)
		return (g[0] >> 4) == 6 ? (g[0] & 0xf) << 4 | g[1] >> 4 : -1;
	const uint8_t *ip = g + 20;
	uint32_t sum = 0;
	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)ip[i] << 8 | ip[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ip[0] == 0x45 && sum == 0xffff ? ip[1] : -1;
}

static struct ibv_ah *ah_tclass(struct vt_dev *d, uint8_t tclass)
{
	struct ibv_ah_attr a = { .is_global = 1, .port_num = 1 };

	a.grh.dgid = d->gid;
	a.grh.sgid_index = (uint8_t)d->gid_index;
	a.grh.hop_limit = 64;
	a.grh.traffic_class = tclass;
	return ibv_create_ah(d->pd, &a);
}

/* One datagram from p->qp[from] through ah; the receiver's GRH and
 * ibv_init_ah_from_wc report want.  Returns the receive's completion. */
static bool one_way(struct vt_dev *d, struct vt_pair *p, const struct vt_qp_cfg *c, int from, struct ibv_ah *ah,
		    struct vt_buf *s, struct vt_buf *r, int want, const char *path, struct ibv_wc *wc)
{
	int to = !from;
	uint8_t *g = r->p + (size_t)to * 2048;
	bool v6 = d->gid_index != D.gid_index;
	char what[128];

	snprintf(what, sizeof(what), "%s, QP %d -> QP %d (%s), traffic class 0x%02x", v6 ? "IPv6" : "IPv4", from, to,
		 path, want);
	memset(g, 0, 40);
	CHECK_RC(vt_post_recv(p->qp[to], 10 + (uint64_t)to, g, 1040, r->mr->lkey), 0, "%s: receive posted", what);
	CHECK_RC(vt_post_ud_send(p->qp[from], 20, s->p, 100, s->mr->lkey, IBV_SEND_SIGNALED, ah, p->qp[to]->qp_num,
				 c->qkey),
		 0, "%s: sent", what);
	EXPECT_WC(p->scq[from], 20, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "%s: sender", what);
	if (!EXPECT_WC(p->rcq[to], 10 + (uint64_t)to, IBV_WC_SUCCESS, IBV_WC_RECV, wc, "%s: receiver", what))
		return false;
	CHECK_INT(grh_tclass(g, v6), want, "%s: the GRH area's %s", what,
		  v6 ? "traffic class" : "TOS (checksum right)");
	struct ibv_ah_attr aa;
	if (CHECK_RC(ibv_init_ah_from_wc(d->ctx, 1, wc, (struct ibv_grh *)g, &aa), 0, "%s: ibv_init_ah_from_wc", what))
		CHECK_INT(aa.grh.traffic_class, want, "%s: its AH's traffic class", what);
	return true;
}

static void ud_tclass(struct vt_dev *d)
{
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf s, r;
	struct ibv_wc wc;

	vt_cfg_default(&c, IBV_QPT_UD);
	if (!vt_pair_setup(d, &c, &p))
		return;
	vt_buf_alloc(&s, d->pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&r, d->pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	/* DSCP 46 with ECT(1), DSCP 10 with ECT(0), DSCP 1 with CE */
	struct ibv_ah *ahs[] = { ah_tclass(d, 0xb9), ah_tclass(d, 0x2a), ah_tclass(d, 0x07) };
	struct ibv_ah *a0 = ahs[0], *a1 = ahs[1], *a2 = ahs[2];
	if (!CHECK(a0 && a1 && a2, "three AHs with traffic classes 0xb9, 0x2a, 0x07"))
		goto out;
	/* QP 1 never sent to QP 0: this one comes through the daemon */
	if (one_way(d, &p, &c, 0, a0, &s, &r, 0xb9, "through softrdmad", &wc)) {
		/* the answer through an AH made from it echoes its class, and QP
		 * 0 (which sent to QP 1) takes it on its flow socket */
		struct ibv_ah *echo = ibv_create_ah_from_wc(d->pd, &wc, (struct ibv_grh *)(r.p + 2048), 1);
		if (CHECK(echo, "ibv_create_ah_from_wc")) {
			one_way(d, &p, &c, 1, echo, &s, &r, 0xb9, "an answer, on the flow socket", &wc);
			ibv_destroy_ah(echo);
		}
	}
	one_way(d, &p, &c, 1, a1, &s, &r, 0x2a, "on the flow socket", &wc);
	one_way(d, &p, &c, 0, a2, &s, &r, 0x07, "now on QP 1's flow socket", &wc);
out:
	for (int i = 0; i < 3; i++)
		if (ahs[i])
			ibv_destroy_ah(ahs[i]);
	vt_buf_free(&s);
	vt_buf_free(&r);
	vt_pair_destroy(&p);
}

static void ud_tclass_ipv4(void)
{
	SECTION("UD over IPv4: an AH's traffic class is the TOS sent, the GRH shows the TOS received");
	ud_tclass(&D);
}

static void ud_tclass_ipv6(void)
{
	static const uint8_t v6lo[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 };
	struct vt_dev d6 = D;

	SECTION("UD over IPv6: the same with the traffic class field");
	d6.gid_index = -1;
	for (int i = 0; i < D.port.gid_tbl_len && i < 16; i++) {
		union ibv_gid g;
		if (!ibv_query_gid(D.ctx, 1, i, &g) && !memcmp(g.raw, v6lo, 16)) {
			d6.gid_index = i;
			d6.gid = g;
		}
	}
	if (d6.gid_index < 0) {
		NOTE("no ::1 GID on this device (IPv6 off on lo?): skipped");
		return;
	}
	ud_tclass(&d6);
}

int main(int argc, char **argv)
{
	vt_begin_args("test_tclass", 120, argc, argv);
	if (!vt_open(&D))
		return vt_end();
	VT_RUN(ud_tclass_ipv4());
	VT_RUN(ud_tclass_ipv6());
	vt_close(&D);
	return vt_end();
}
