/* test_resp_psn: what an RC responder answers to request PSNs that are
 * not the one it expects, on the wire (issue 41).  The test plays the
 * QP's peer (vt_wire_peer) and sends requests built by hand:
 *
 *  - a gap: one PSN sequence error NAK for the gap, nothing for the
 *    requests after it until the expected PSN comes, then one NAK for
 *    the next gap (IBTA 9.7.5.1.2, rxe's sent_psn_nak);
 *  - a request far ahead of any gap a requester leaves: no NAK at all;
 *  - a stream of duplicate WRITEs: an ACK, not an ACK each; one far
 *    behind anything a requester retransmits: nothing;
 *  - a duplicate READ: served again when it starts within a READ the QP
 *    served (a retry), not when its PSN was a WRITE's: a forged READ with
 *    an old PSN and a good rkey gets no response;
 *  - a duplicate from the peer's address on another port (the peer's
 *    send socket was reopened after the ACK was lost): acknowledged, or
 *    the requester retries until it fails (test_scale under load). */
#include "vt.h"
#include "vt_roce.h"

static struct vt_dev D;

#define ACC_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

struct rig {
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct ibv_qp *qp; /* the responder under test */
	struct vt_wire_peer w;
	struct vt_buf tgt;
	uint32_t psn; /* the next PSN the QP expects */
	uint8_t pkt[9000];
};

/* What came back within ms: ACKs, sequence NAKs, read responses, other. */
struct answers {
	int acks, seq_naks, reads, other;
	uint32_t nak_psn, last_psn;
};

static bool rig_open(struct rig *g)
{
	memset(g, 0, sizeof(*g));
	g->w.tx = g->w.rx = -1;
	vt_crc_init();
	vt_cfg_default(&g->c, IBV_QPT_RC);
	if (!vt_pair_create(&D, &g->c, &g->p))
		return false;
	g->qp = g->p.qp[1];
	g->psn = 0x200000 + vt_rand(0x10000);
	if (vt_buf_alloc(&g->tgt, D.pd, 65536, 4096, ACC_ALL))
		return false;
	return vt_wire_peer_open(&g->w, &D, g->qp, &g->c, g->psn, 0x777);
}

static void rig_close(struct rig *g)
{
	vt_wire_peer_close(&g->w);
	vt_pair_destroy(&g->p);
	vt_buf_free(&g->tgt);
}

/* A WRITE of PSN psn from socket fd, bound to port sport. */
static void send_write_from(struct rig *g, int fd, uint16_t sport, uint32_t psn)
{
	uint8_t data[64];

	vt_fill(data, sizeof(data), psn);
	size_t n = vt_mk_write_only(g->pkt, 0x00, 0xffff, g->qp->qp_num, psn & 0xffffff, (uintptr_t)g->tgt.p + 1024,
				    g->tgt.mr->rkey, data, sizeof(data), sport, true);
	vt_send_to_4791(fd, g->pkt, n);
}

static void send_write(struct rig *g, uint32_t psn)
{
	send_write_from(g, g->w.tx, g->w.sport, psn);
}

static void send_read(struct rig *g, uint32_t psn, uint32_t len)
{
	size_t n = vt_put_bth(g->pkt, 0x0c /* RC RDMA READ request */, 0, 0xffff, g->qp->qp_num, true, psn & 0xffffff);
	n += vt_put_be(g->pkt + n, (uintptr_t)g->tgt.p, 8);
	n += vt_put_be(g->pkt + n, g->tgt.mr->rkey, 4);
	n += vt_put_be(g->pkt + n, len, 4);
	vt_send_to_4791(g->w.tx, g->pkt, vt_seal(g->pkt, n, g->w.sport, true));
}

static struct answers collect(struct rig *g, int ms)
{
	struct answers a = { 0 };
	uint8_t b[9000];
	ssize_t n;

	while ((n = vt_wire_recv(&g->w, b, sizeof(b), ms)) >= 16) {
		uint32_t psn = (uint32_t)vt_be16(b + 9) << 8 | b[11];
		a.last_psn = psn;
		if (b[0] == 0x11 && (b[12] & 0xe0) == 0)
			a.acks++;
		else if (b[0] == 0x11 && b[12] == 0x60) {
			a.seq_naks++;
			a.nak_psn = psn;
		} else if (b[0] >= 0x0d && b[0] <= 0x10)
			a.reads++;
		else
			a.other++;
		ms = ms < 50 ? ms : 50; /* after the first, wait only for more of the same burst */
	}
	return a;
}

/* The expected PSN arrives: it is acknowledged. */
static bool in_sequence(struct rig *g, const char *what)
{
	send_write(g, g->psn);
	struct answers a = collect(g, 2000);
	bool ok = CHECK(a.acks == 1 && a.last_psn == (g->psn & 0xffffff) && !a.seq_naks,
			"%s: the expected PSN 0x%x is acknowledged\t(%d ACKs, last PSN 0x%x, %d NAKs)", what,
			g->psn & 0xffffff, a.acks, a.last_psn, a.seq_naks);
	g->psn++;
	return ok;
}

static void one_nak_per_gap(void)
{
	SECTION("RC responder: one PSN sequence error NAK per gap");
	struct rig g;
	if (!rig_open(&g))
		goto out;
	in_sequence(&g, "first request");
	for (int gap = 0; gap < 2; gap++) {
		uint32_t lost = g.psn;
		for (uint32_t k = 1; k <= 20; k++)
			send_write(&g, lost + k);
		struct answers a = collect(&g, 2000);
		CHECK(a.seq_naks == 1 && a.nak_psn == (lost & 0xffffff) && !a.acks && !a.other,
		      "gap %d: 20 requests after a missing PSN 0x%x get one sequence NAK for it and nothing else\t(%d NAKs, "
		      "last for 0x%x; %d ACKs, %d other)",
		      gap + 1, lost & 0xffffff, a.seq_naks, a.nak_psn, a.acks, a.other);
		in_sequence(&g, "the missing request");
		/* the requester goes back: what came after it, again */
		for (uint32_t k = 1; k <= 20; k++)
			send_write(&g, lost + k);
		a = collect(&g, 2000);
		CHECK(a.acks >= 1 && a.last_psn == ((lost + 20) & 0xffffff) && !a.seq_naks,
		      "  the requests after it, sent again, are acknowledged through 0x%x\t(%d ACKs, last 0x%x, %d NAKs)",
		      (lost + 20) & 0xffffff, a.acks, a.last_psn, a.seq_naks);
		g.psn = lost + 21;
	}
	CHECK(vt_qp_state(g.qp) == IBV_QPS_RTS, "the responder is still in RTS");
out:
	rig_close(&g);
}

static void far_ahead(void)
{
	SECTION("RC responder: a request far ahead of any gap gets no NAK");
	struct rig g;
	if (!rig_open(&g))
		goto out;
	in_sequence(&g, "first request");
	for (int i = 0; i < 50; i++)
		send_write(&g, g.psn + (1u << 20) + (uint32_t)i * 4099);
	struct answers a = collect(&g, 500);
	CHECK(!a.seq_naks && !a.acks && !a.other,
	      "50 requests 2^20 and more PSNs ahead get no answer\t(%d NAKs, %d ACKs, %d other)", a.seq_naks, a.acks,
	      a.other);
	in_sequence(&g, "after them");
	send_write(&g, g.psn + 1);
	a = collect(&g, 2000);
	CHECK(a.seq_naks == 1, "a request just ahead still gets its NAK\t(%d)", a.seq_naks);
	in_sequence(&g, "and the missing one");
out:
	rig_close(&g);
}

static void duplicates(void)
{
	SECTION("RC responder: duplicate WRITEs get an ACK, not an ACK each");
	struct rig g;
	if (!rig_open(&g))
		goto out;
	in_sequence(&g, "first request");
	in_sequence(&g, "second request");
	uint64_t t0 = vt_now_ms();
	for (int i = 0; i < 500; i++)
		send_write(&g, g.psn - 1 - (uint32_t)(i & 1));
	uint64_t dt = vt_now_ms() - t0;
	struct answers a = collect(&g, 1000);
	/* one at once, then at most one a millisecond (resp.c, SR_DUP_ACK_NS) */
	CHECK(a.acks >= 1 && a.acks <= 2 + (int)dt && !a.seq_naks && !a.other,
	      "500 duplicate WRITEs in %" PRIu64 " ms get 1 to %d ACKs\t(%d ACKs, %d NAKs, %d other)", dt, 2 + (int)dt,
	      a.acks, a.seq_naks, a.other);
	in_sequence(&g, "new request after them");
	send_write(&g, g.psn - 1);
	a = collect(&g, 2000);
	CHECK(a.acks == 1, "after it, a duplicate is acknowledged at once\t(%d ACKs)", a.acks);
	vt_sleep_ms(5);
	for (int i = 0; i < 50; i++)
		send_write(&g, g.psn - (1u << 20) - (uint32_t)i * 4099);
	a = collect(&g, 500);
	CHECK(!a.acks && !a.seq_naks && !a.other,
	      "50 \"duplicates\" 2^20 and more PSNs behind get no answer\t(%d ACKs, %d NAKs, %d other)", a.acks,
	      a.seq_naks, a.other);
	in_sequence(&g, "after them");
out:
	rig_close(&g);
}

static void duplicate_reads(void)
{
	SECTION("RC responder: a duplicate READ is served again only as the retry of a READ it served");
	struct rig g;
	if (!rig_open(&g))
		goto out;
	vt_fill(g.tgt.p, 65536, 77);
	in_sequence(&g, "a WRITE first");
	uint32_t write_psn = g.psn - 1, read_psn = g.psn;
	send_read(&g, read_psn, 2048);
	struct answers a = collect(&g, 2000);
	CHECK(a.reads == 1 && a.last_psn == (read_psn & 0xffffff), "a READ of 2 KiB gets its response\t(%d, PSN 0x%x)",
	      a.reads, a.last_psn);
	g.psn++;
	in_sequence(&g, "a WRITE after it");
	send_read(&g, read_psn, 2048);
	a = collect(&g, 2000);
	CHECK(a.reads == 1 && a.last_psn == (read_psn & 0xffffff),
	      "the READ again (its PSN, its rkey: a retry) is served again\t(%d responses)", a.reads);
	send_read(&g, write_psn, 65536);
	a = collect(&g, 500);
	CHECK(!a.reads && !a.other,
	      "a READ of 64 KiB with a good rkey and the PSN of a WRITE gets nothing\t(%d responses)", a.reads);
	in_sequence(&g, "after it");
	CHECK(vt_qp_state(g.qp) == IBV_QPS_RTS, "the responder is still in RTS");
out:
	rig_close(&g);
}

static void moved_peer(void)
{
	SECTION("RC responder: a duplicate from the peer on another port is acknowledged");
	struct rig g;
	int tx2 = -1;
	if (!rig_open(&g))
		goto out;
	in_sequence(&g, "first request");
	in_sequence(&g, "second request");
	tx2 = vt_udp_socket(0);
	if (!CHECK(tx2 >= 0, "a second socket of the peer, on another port"))
		goto out;
	uint16_t sport2 = vt_local_port(tx2);
	/* the peer's send socket moved, and the ACK of its last request was lost */
	send_write_from(&g, tx2, sport2, g.psn - 1);
	struct answers a = collect(&g, 2000);
	CHECK(a.acks == 1 && a.last_psn == ((g.psn - 1) & 0xffffff) && !a.seq_naks && !a.other,
	      "the last request again, from port %u, is acknowledged\t(%d ACKs, last PSN 0x%x, %d NAKs, %d other)",
	      sport2, a.acks, a.last_psn, a.seq_naks, a.other);
	vt_sleep_ms(5);
	send_write_from(&g, tx2, sport2, g.psn - (1u << 20));
	a = collect(&g, 500);
	CHECK(!a.acks && !a.seq_naks && !a.other,
	      "from there, a \"duplicate\" 2^20 PSNs behind gets no answer\t(%d ACKs, %d NAKs, %d other)", a.acks,
	      a.seq_naks, a.other);
	in_sequence(&g, "a new request from the first port");
	send_write_from(&g, tx2, sport2, g.psn);
	a = collect(&g, 2000);
	CHECK(a.acks == 1 && a.last_psn == (g.psn & 0xffffff) && !a.seq_naks,
	      "the next request from the other port (the peer moved) is acknowledged\t(%d ACKs, last PSN 0x%x)",
	      a.acks, a.last_psn);
	g.psn++;
	CHECK(vt_qp_state(g.qp) == IBV_QPS_RTS, "the responder is still in RTS");
out:
	if (tx2 >= 0)
		close(tx2);
	rig_close(&g);
}

int main(int argc, char **argv)
{
	vt_begin_args("test_resp_psn", 120, argc, argv);
	if (!vt_open(&D))
		return vt_end();
	VT_RUN(one_nak_per_gap());
	VT_RUN(far_ahead());
	VT_RUN(duplicates());
	VT_RUN(duplicate_reads());
	VT_RUN(moved_peer());
	vt_close(&D);
	return vt_end();
}
