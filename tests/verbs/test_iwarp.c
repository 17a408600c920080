/* test_iwarp: the Soft-iWARP transport through the verbs API, with the
 * connection set up as the RDMA-CM will do it: a TCP connection over
 * 127.0.0.1, the MPA Request/Reply exchanged by hand with the wire codec,
 * then sr_iw_qp_connect on each end.
 *
 *  - every opcode's data (Send, Send with Invalidate, Send with SE, RDMA
 *    Write, Write with Immediate, RDMA Read), sizes 0 .. 1 MiB, canaries
 *    around every buffer, inline and multi-SGE, pipelines, ORD limits,
 *    CRC on and off, each RFC 6581 RTR kind, and a throughput figure;
 *  - a raw TCP peer that sends garbage, truncated FPDUs, bad CRCs, bad
 *    STags, out-of-bounds offsets, access violations, bad Read Requests,
 *    Sends without or too big for a receive: it must read back a
 *    Terminate with the right layer/type/code (and copied headers), the
 *    QP must be in ERR with an async event and error completions, and no
 *    byte outside what the QP may write may change;
 *  - a Terminate from the peer, disconnects (SQD, ERR, the peer closing)
 *    and the CM's close notification.
 *
 * Runs with SOFTRDMA_CONF naming a config whose first device is an iWARP
 * device on lo (tests/CMakeLists.txt writes iwarp.conf). */
#include "vt_mpa.h"
#include "vt_sends.h"
#include "common/tsan.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "iwarp/iwarp_cm.h"

#define MiB (1024u * 1024u)

/* ------------------------------------------------------------------ */
/* QPs                                                                  */
/* ------------------------------------------------------------------ */

struct side {
	struct vt_dev d;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
};

static atomic_int close_count[2];
static atomic_int close_reason[2];

static void on_close(void *arg, enum sr_iw_close_reason reason)
{
	int i = (int)(intptr_t)arg;

	atomic_store(&close_reason[i], (int)reason);
	atomic_fetch_add(&close_count[i], 1);
}

static bool side_qp(struct side *s, uint32_t max_send_wr, uint32_t max_recv_wr, uint32_t sge)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;

	s->scq = ibv_create_cq(s->d.ctx, 4096, NULL, NULL, 0);
	s->rcq = ibv_create_cq(s->d.ctx, 4096, NULL, NULL, 0);
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = s->scq;
	ia.recv_cq = s->rcq;
	ia.cap.max_send_wr = max_send_wr;
	ia.cap.max_recv_wr = max_recv_wr;
	ia.cap.max_send_sge = sge;
	ia.cap.max_recv_sge = sge;
	ia.cap.max_inline_data = 512; /* the most rxe (and softrdma) gives */
	s->qp = s->scq && s->rcq ? ibv_create_qp(s->d.pd, &ia) : NULL;
	if (!s->qp)
		return false;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	return !ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static void side_qp_free(struct side *s)
{
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->scq)
		ibv_destroy_cq(s->scq);
	if (s->rcq)
		ibv_destroy_cq(s->rcq);
	s->qp = NULL;
	s->scq = s->rcq = NULL;
}

/* Drain whatever async events wait (earlier cases' QPs). */
static void drain_async(struct vt_dev *d)
{
	struct ibv_async_event ev;

	while (vt_get_async(d->ctx, &ev, 0))
		;
}

/* Both sides' events drained, QPs and CQs freed, devices closed. */
static void pair_down(struct side s[2])
{
	for (int k = 0; k < 2; k++) {
		drain_async(&s[k].d);
		side_qp_free(&s[k]);
		vt_close(&s[k].d);
	}
}

static bool wait_async(struct vt_dev *d, struct ibv_qp *qp, enum ibv_event_type want, int ms)
{
	struct ibv_async_event ev;
	uint64_t deadline = vt_now_ms() + (uint64_t)ms;

	while (vt_now_ms() < deadline) {
		if (!vt_get_async(d->ctx, &ev, 100))
			continue;
		if (ev.element.qp == qp && ev.event_type == want)
			return true;
	}
	return false;
}

static bool wait_state(struct ibv_qp *qp, int want, int ms)
{
	uint64_t deadline = vt_now_ms() + (uint64_t)ms;

	while (vt_qp_state(qp) != want) {
		if (vt_now_ms() > deadline)
			return false;
		vt_sleep_ms(1);
	}
	return true;
}

/* Two connected QPs: s[0] the initiator. */
struct conn {
	struct side *s;
	int fds[2];
};

static bool conn_up(struct side s[2], const struct vt_mpa_opts *o, struct conn *c)
{
	struct sr_iw_conn_params p[2];

	c->s = s;
	if (!vt_tcp_pair(c->fds))
		return false;
	if (o->sndbuf) {
		/* small buffers: sendmsg takes part of a batch of FPDUs */
		for (int i = 0; i < 2; i++)
			setsockopt(c->fds[i], SOL_SOCKET, SO_SNDBUF, &o->sndbuf, sizeof(o->sndbuf));
	}
	if (!vt_mpa_exchange(c->fds, o, p))
		return false;
	for (int i = 0; i < 2; i++) {
		p[i].on_close = on_close;
		p[i].close_arg = (void *)(intptr_t)i;
		atomic_store(&close_count[i], 0);
		if (sr_iw_qp_connect(s[i].qp, &p[i]))
			return false;
	}
	return vt_qp_state(s[0].qp) == IBV_QPS_RTS && vt_qp_state(s[1].qp) == IBV_QPS_RTS;
}

/* ------------------------------------------------------------------ */
/* data path                                                            */
/* ------------------------------------------------------------------ */

static const uint32_t sizes[] = { 0, 1, 3, 4, 7, 100, 1000, 4095, 4096, 4097, 61440, 61441, 65536, 200000, MiB };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void test_opcodes(struct side s[2], const char *tag)
{
	const unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct vt_buf src, dst;
	struct ibv_wc wc;
	unsigned bad = 0;

	if (vt_buf_alloc(&src, s[0].d.pd, MiB + 64, 4096, (int)acc) ||
	    vt_buf_alloc(&dst, s[1].d.pd, MiB + 64, 4096, (int)acc)) {
		CHECK(0, "buffers");
		return;
	}
	for (size_t k = 0; k < NSIZES; k++) {
		uint32_t len = sizes[k], seed = (uint32_t)(k * 7919 + len);
		uint32_t off = (uint32_t)(k * 5) % 61; /* odd placement too */

		/* Send */
		vt_fill(src.p, len, seed);
		memset(dst.p, 0xee, dst.len);
		CHECK_RC(vt_post_recv(s[1].qp, 100 + k, dst.p + off, len + 13, dst.mr->lkey), 0, "%s post recv", tag);
		CHECK_RC(vt_post_send(s[0].qp, 200 + k, IBV_WR_SEND, src.p, len, src.mr->lkey, IBV_SEND_SIGNALED, 0, 0,
				      0),
			 0, "%s post Send %u", tag, len);
		EXPECT_WC(s[0].scq, 200 + k, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "%s Send %u: send completion", tag,
			  len);
		if (EXPECT_WC(s[1].rcq, 100 + k, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "%s Send %u: receive", tag, len)) {
			CHECK_INT(wc.byte_len, len, "%s Send %u: byte_len", tag, len);
			CHECK(!(wc.wc_flags & (IBV_WC_WITH_IMM | IBV_WC_WITH_INV)), "%s Send %u: no imm/inv flags", tag,
			      len);
		}
		CHECK_DATA(dst.p + off, len, seed, "%s Send %u", tag, len);
		bad += dst.p[off + len] != 0xee || (off && dst.p[off - 1] != 0xee);

		/* RDMA Write into the middle of the peer's region */
		seed ^= 0x5a5a;
		vt_fill(src.p, len, seed);
		memset(dst.p, 0xee, dst.len);
		CHECK_RC(vt_post_send(s[0].qp, 300 + k, IBV_WR_RDMA_WRITE, src.p, len, src.mr->lkey, IBV_SEND_SIGNALED,
				      (uintptr_t)dst.p + off, dst.mr->rkey, 0),
			 0, "%s post Write %u", tag, len);
		EXPECT_WC(s[0].scq, 300 + k, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL, "%s Write %u", tag, len);
		/* a Write completes when TCP has it: read it back to know it landed */
		memset(src.p, 0, len + 1);
		CHECK_RC(vt_post_send(s[0].qp, 400 + k, IBV_WR_RDMA_READ, src.p, len, src.mr->lkey, IBV_SEND_SIGNALED,
				      (uintptr_t)dst.p + off, dst.mr->rkey, 0),
			 0, "%s post Read %u", tag, len);
		if (EXPECT_WC(s[0].scq, 400 + k, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, &wc, "%s Read %u", tag, len))
			CHECK_INT(wc.byte_len, len, "%s Read %u: byte_len", tag, len);
		CHECK_DATA(dst.p + off, len, seed, "%s Write %u landed", tag, len);
		CHECK_DATA(src.p, len, seed, "%s Read %u brought it back", tag, len);
		bad += dst.p[off + len] != 0xee || (off && dst.p[off - 1] != 0xee) || src.p[len] != 0;

		/* Write with Immediate: RFC 7306 Immediate Data after the Write */
		seed ^= 0x1234;
		vt_fill(src.p, len, seed);
		CHECK_RC(vt_post_recv(s[1].qp, 500 + k, NULL, 0, 0), 0, "%s post recv for imm", tag);
		CHECK_RC(vt_post_send(s[0].qp, 600 + k, IBV_WR_RDMA_WRITE_WITH_IMM, src.p, len, src.mr->lkey,
				      IBV_SEND_SIGNALED, (uintptr_t)dst.p, dst.mr->rkey, 0xc0de0000u + (uint32_t)k),
			 0, "%s post Write with Immediate %u", tag, len);
		EXPECT_WC(s[0].scq, 600 + k, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL, "%s Write with Immediate %u", tag,
			  len);
		if (EXPECT_WC(s[1].rcq, 500 + k, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, &wc,
			      "%s Write with Immediate %u: receive", tag, len)) {
			CHECK((wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == 0xc0de0000u + k,
			      "%s Write with Immediate %u: imm_data\t(flags %#x imm %#x)", tag, len, wc.wc_flags,
			      ntohl(wc.imm_data));
			CHECK_INT(wc.byte_len, len, "%s Write with Immediate %u: byte_len", tag, len);
		}
		CHECK_DATA(dst.p, len, seed, "%s Write with Immediate %u landed", tag, len);
	}
	CHECK(bad == 0, "%s: no byte next to a message changed (%u)", tag, bad);

	/* the local operations: libsiw refuses them at post (EINVAL) */
	{
		struct ibv_send_wr wr, *badwr = NULL;

		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 690;
		wr.opcode = IBV_WR_LOCAL_INV;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.invalidate_rkey = dst.mr->rkey;
		CHECK_RC(ibv_post_send(s[0].qp, &wr, &badwr), EINVAL, "%s post LOCAL_INV", tag);
		CHECK(badwr == &wr, "%s LOCAL_INV: bad_wr is it", tag);
		wr.opcode = IBV_WR_BIND_MW;
		CHECK_RC(ibv_post_send(s[0].qp, &wr, &badwr), EINVAL, "%s post BIND_MW", tag);
	}

	/* Send with Invalidate and with Solicited Event: the STag of a region
	 * of the receiver's, which siw invalidates (test_raw: what then) */
	vt_fill(src.p, 77, 77);
	CHECK_RC(vt_post_recv(s[1].qp, 700, dst.p, 100, dst.mr->lkey), 0, "post recv");
	struct ibv_mr *inv_mr = ibv_reg_mr(s[1].d.pd, dst.p + 4096, 4096, (int)acc);
	CHECK(inv_mr, "a region to invalidate");
	{
		struct ibv_sge sge = { (uintptr_t)src.p, 77, src.mr->lkey };
		struct ibv_send_wr wr, *badwr;

		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 701;
		wr.opcode = IBV_WR_SEND_WITH_INV;
		wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.invalidate_rkey = inv_mr ? inv_mr->rkey : 0;
		CHECK_RC(ibv_post_send(s[0].qp, &wr, &badwr), 0, "%s post Send with Invalidate + SE", tag);
	}
	EXPECT_WC(s[0].scq, 701, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "%s Send with Invalidate", tag);
	if (EXPECT_WC(s[1].rcq, 700, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "%s Send with Invalidate: receive", tag))
		CHECK((wc.wc_flags & IBV_WC_WITH_INV) && inv_mr && wc.invalidated_rkey == inv_mr->rkey &&
			      wc.byte_len == 77,
		      "%s Send with Invalidate: the rkey reported\t(flags %#x rkey %#x)", tag, wc.wc_flags,
		      wc.invalidated_rkey);
	CHECK_DATA(dst.p, 77, 77, "%s Send with Invalidate data", tag);
	if (inv_mr)
		CHECK_RC(ibv_dereg_mr(inv_mr), 0, "%s the invalidated region deregisters", tag);

	/* inline; three-SGE send into a three-SGE receive */
	{
		char msg[40] = "inline payload, copied at post time";
		struct ibv_sge ss[3] = { { (uintptr_t)src.p, 5000, src.mr->lkey },
					 { (uintptr_t)src.p + 9000, 1, src.mr->lkey },
					 { (uintptr_t)src.p + 20000, 70000, src.mr->lkey } };
		struct ibv_sge rs[3] = { { (uintptr_t)dst.p + 100, 3, dst.mr->lkey },
					 { (uintptr_t)dst.p + 50000, 60000, dst.mr->lkey },
					 { (uintptr_t)dst.p + 200000, 20000, dst.mr->lkey } };
		struct ibv_send_wr wr, *badwr;
		struct ibv_recv_wr rr, *badrr;
		uint8_t *expect = malloc(75001);

		CHECK_RC(vt_post_recv(s[1].qp, 800, dst.p, 64, dst.mr->lkey), 0, "post recv");
		CHECK_RC(vt_post_send(s[0].qp, 801, IBV_WR_SEND, msg, sizeof(msg), 0,
				      IBV_SEND_SIGNALED | IBV_SEND_INLINE, 0, 0, 0),
			 0, "%s post inline Send", tag);
		memset(msg, 0, sizeof(msg)); /* the payload was copied at post time */
		EXPECT_WC(s[0].scq, 801, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "%s inline Send", tag);
		EXPECT_WC(s[1].rcq, 800, IBV_WC_SUCCESS, IBV_WC_RECV, NULL, "%s inline Send: receive", tag);
		CHECK(!memcmp(dst.p, "inline payload, copied at post time", 36), "%s inline Send data", tag);
		{
			uint8_t big[512];
			vt_fill(big, sizeof(big), 512);
			CHECK_RC(vt_post_recv(s[1].qp, 804, dst.p, 1024, dst.mr->lkey), 0, "post recv");
			CHECK_RC(vt_post_send(s[0].qp, 805, IBV_WR_SEND, big, sizeof(big), 0,
					      IBV_SEND_SIGNALED | IBV_SEND_INLINE, 0, 0, 0),
				 0, "%s post a 512-byte inline Send", tag);
			memset(big, 0, sizeof(big));
			EXPECT_WC(s[0].scq, 805, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "%s 512-byte inline Send", tag);
			struct ibv_wc wc;
			if (EXPECT_WC(s[1].rcq, 804, IBV_WC_SUCCESS, IBV_WC_RECV, &wc,
				      "%s 512-byte inline Send: receive", tag))
				CHECK_INT(wc.byte_len, 512, "%s   ...byte_len", tag);
			CHECK_DATA(dst.p, 512, 512, "%s 512-byte inline Send data", tag);
		}

		vt_fill(src.p, 100000, 31337);
		memset(dst.p, 0xee, dst.len);
		memset(&rr, 0, sizeof(rr));
		rr.wr_id = 802;
		rr.sg_list = rs;
		rr.num_sge = 3;
		CHECK_RC(ibv_post_recv(s[1].qp, &rr, &badrr), 0, "post 3-SGE recv");
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 803;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.sg_list = ss;
		wr.num_sge = 3;
		CHECK_RC(ibv_post_send(s[0].qp, &wr, &badwr), 0, "%s post 3-SGE Send", tag);
		EXPECT_WC(s[0].scq, 803, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "%s 3-SGE Send", tag);
		EXPECT_WC(s[1].rcq, 802, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "%s 3-SGE Send: receive", tag);
		CHECK_INT(wc.byte_len, 75001, "%s 3-SGE Send: byte_len", tag);
		if (expect) {
			memcpy(expect, src.p, 5000);
			expect[5000] = src.p[9000];
			memcpy(expect + 5001, src.p + 20000, 70000);
			CHECK(!memcmp(dst.p + 100, expect, 3) && !memcmp(dst.p + 50000, expect + 3, 60000) &&
				      !memcmp(dst.p + 200000, expect + 60003, 14998),
			      "%s 3-SGE Send scattered right", tag);
			CHECK(dst.p[99] == 0xee && dst.p[103] == 0xee && dst.p[49999] == 0xee &&
				      dst.p[110000] == 0xee && dst.p[199999] == 0xee && dst.p[214998] == 0xee,
			      "%s 3-SGE Send: nothing between the SGEs changed", tag);
			free(expect);
		}
	}
	CHECK_GUARDS(&src, "%s source", tag);
	CHECK_GUARDS(&dst, "%s destination", tag);
	vt_buf_free(&src);
	vt_buf_free(&dst);
}

/* Up to max completions, returning as soon as there is one. */
static int poll_some(struct ibv_cq *cq, int max, struct ibv_wc *wc, int ms)
{
	int k = vt_poll(cq, 1, wc, ms);

	if (k == 1 && max > 1) {
		int r = ibv_poll_cq(cq, max - 1, wc + 1);

		if (r > 0)
			k += r;
	}
	return k;
}

/* Many small messages and Reads in flight at once. */
static void test_pipeline(struct side s[2], const char *tag, unsigned ord)
{
	const unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct vt_buf a, b;
	struct ibv_wc wc[64];
	int n = 0, m = 0, r = 0, errs = 0;

	if (vt_buf_alloc(&a, s[0].d.pd, 1 << 20, 4096, (int)acc) ||
	    vt_buf_alloc(&b, s[1].d.pd, 1 << 20, 4096, (int)acc)) {
		CHECK(0, "buffers");
		return;
	}
	vt_fill(b.p, 1 << 20, 99);
	vt_fill(a.p, 1 << 20, 98);
	/* 200 Sends of 64 bytes posted back to back */
	for (int i = 0; i < 200; i++)
		errs += vt_post_recv(s[1].qp, (uint64_t)i, b.p + 512 * 1024 + i * 64, 64, b.mr->lkey) != 0;
	for (int i = 0; i < 200; i++)
		errs += vt_post_send(s[0].qp, (uint64_t)i, IBV_WR_SEND, a.p + i * 64, 64, a.mr->lkey, IBV_SEND_SIGNALED,
				     0, 0, 0) != 0;
	while (n < 200 || m < 200) {
		int k = n < 200 ? poll_some(s[0].scq, 64, wc, 5000) : 0;

		for (int i = 0; i < k; i++)
			errs += wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != (uint64_t)n++;
		k = poll_some(s[1].rcq, 64, wc, n < 200 ? 0 : 5000);
		for (int i = 0; i < k; i++)
			errs += wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != (uint64_t)m++ || wc[i].byte_len != 64;
		if (!k && n >= 200 && m < 200)
			break;
	}
	CHECK(n == 200 && m == 200 && errs == 0, "%s: 200 pipelined Sends, in order\t(%d sent, %d received, %d bad)",
	      tag, n, m, errs);
	CHECK(!memcmp(b.p + 512 * 1024, a.p, 200 * 64), "%s: 200 pipelined Sends' data", tag);

	/* 40 Reads of 8 KiB with ORD limiting how many are out */
	errs = 0;
	memset(a.p, 0, 40 * 8192);
	for (int i = 0; i < 40; i++)
		errs += vt_post_send(s[0].qp, 1000 + (uint64_t)i, IBV_WR_RDMA_READ, a.p + i * 8192, 8192, a.mr->lkey,
				     IBV_SEND_SIGNALED, (uintptr_t)b.p + (size_t)i * 8192, b.mr->rkey, 0) != 0;
	while (r < 40) {
		int k = poll_some(s[0].scq, 64, wc, 5000);

		if (!k)
			break;
		for (int i = 0; i < k; i++)
			errs += wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != 1000 + (uint64_t)r++ ||
				wc[i].opcode != IBV_WC_RDMA_READ;
	}
	CHECK(r == 40 && errs == 0, "%s: 40 Reads with ORD %u, completed in order\t(%d done, %d bad)", tag, ord, r,
	      errs);
	CHECK(!memcmp(a.p, b.p, 40 * 8192), "%s: 40 Reads' data", tag);
	/* a fenced Send waits for the Reads before it */
	memset(a.p, 0, 65536);
	CHECK_RC(vt_post_recv(s[1].qp, 2000, b.p + 900000, 100, b.mr->lkey), 0, "post recv");
	CHECK_RC(vt_post_send(s[0].qp, 2001, IBV_WR_RDMA_READ, a.p, 65536, a.mr->lkey, IBV_SEND_SIGNALED,
			      (uintptr_t)b.p, b.mr->rkey, 0),
		 0, "post Read");
	CHECK_RC(vt_post_send(s[0].qp, 2002, IBV_WR_SEND, a.p + 100000, 10, a.mr->lkey,
			      IBV_SEND_SIGNALED | IBV_SEND_FENCE, 0, 0, 0),
		 0, "post fenced Send");
	EXPECT_WC(s[0].scq, 2001, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL, "%s Read before a fence", tag);
	EXPECT_WC(s[0].scq, 2002, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "%s fenced Send", tag);
	EXPECT_WC(s[1].rcq, 2000, IBV_WC_SUCCESS, IBV_WC_RECV, NULL, "%s fenced Send: receive", tag);
	CHECK(!memcmp(a.p, b.p, 65536), "%s: the fenced Read's data", tag);
	CHECK_GUARDS(&a, "%s pipeline buffer A", tag);
	CHECK_GUARDS(&b, "%s pipeline buffer B", tag);
	vt_buf_free(&a);
	vt_buf_free(&b);
}

/* Writes from side 0 have landed at side 1 once a Send behind them has
 * arrived (their region may then go). */
static void writes_landed(struct side s[2], struct vt_buf *b, const char *tag)
{
	CHECK_RC(vt_post_recv(s[1].qp, 77, b->p, 0, b->mr->lkey), 0, "%s: post a receive", tag);
	CHECK_RC(vt_post_send(s[0].qp, 78, IBV_WR_SEND, NULL, 0, 0, IBV_SEND_SIGNALED, 0, 0, 0), 0, "%s: post a Send",
		 tag);
	EXPECT_WC(s[0].scq, 78, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "%s: a Send behind the Writes", tag);
	EXPECT_WC(s[1].rcq, 77, IBV_WC_SUCCESS, IBV_WC_RECV, NULL, "%s: its receive", tag);
}

/* A burst of small Writes from a thread that polls its CQ leaves in a
 * few sendmsg calls (TCP then makes large segments of it); a thread that
 * does not poll sends each at once. */
static void test_burst(struct side s[2], const char *tag)
{
	enum {
		N = 16,
		LEN = 4096
	};
	struct vt_buf a, b;
	struct ibv_wc wc[N];

	if (vt_buf_alloc(&a, s[0].d.pd, N * LEN, 4096, IBV_ACCESS_LOCAL_WRITE) ||
	    vt_buf_alloc(&b, s[1].d.pd, N * LEN, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)) {
		CHECK(0, "buffers");
		return;
	}
	struct vt_burst bu = { 0 };
	for (int t = 0; vt_burst_more(&bu); t++) {
		vt_fill(a.p, N * LEN, 500u + (uint32_t)t);
		memset(b.p, 0, N * LEN);
		/* the empty poll inside the window (vt_sends.h), its report after */
		vt_burst_start(&bu);
		int polled = ibv_poll_cq(s[0].scq, N, wc);
		for (int i = 0; i < N; i++)
			vt_post_send(s[0].qp, (uint64_t)i, IBV_WR_RDMA_WRITE, a.p + i * LEN, LEN, a.mr->lkey,
				     IBV_SEND_SIGNALED, (uintptr_t)b.p + (uint64_t)i * LEN, b.mr->rkey, 0);
		vt_burst_stop(&bu);
		CHECK_INT(polled, 0, "%s: try %d: the send CQ is empty before the burst", tag, t);
		int got = 0, bad = 0;
		while (got < N) {
			int k = poll_some(s[0].scq, N - got, wc, VT_TIMEOUT_MS);
			if (!k)
				break;
			for (int i = 0; i < k; i++)
				bad += wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != (uint64_t)got + (uint64_t)i;
			got += k;
		}
		if (!CHECK(got == N && !bad, "%s: try %d: %d Writes of %d bytes complete in order (got %d, %d bad)",
			   tag, t, N, LEN, got, bad))
			break;
		writes_landed(s, &b, tag);
		CHECK(!memcmp(a.p, b.p, N * LEN), "%s: try %d: the Writes' data", tag, t);
	}
	/* the first Write leaves at once, the other 15 at the poll after the
	 * burst; without the hold, a sendmsg each */
	char what[128];
	snprintf(what, sizeof(what), "%s: %d Writes posted back to back", tag, N);
	vt_burst_check(&bu, 4, what);
#ifdef VT_SENDS_COUNTED
	vt_sleep_ms(5);
	unsigned long c0 = vt_send_calls;
	vt_post_send(s[0].qp, 1, IBV_WR_RDMA_WRITE, a.p, LEN, a.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)b.p, b.mr->rkey,
		     0);
	vt_post_send(s[0].qp, 2, IBV_WR_RDMA_WRITE, a.p + LEN, LEN, a.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)b.p + LEN,
		     b.mr->rkey, 0);
	CHECK_INT(vt_send_calls - c0, 2,
		  "%s: two Writes posted back to back by a thread that does not poll: a sendmsg each", tag);
	int done = poll_some(s[0].scq, 2, wc, VT_TIMEOUT_MS);
	if (done == 1)
		done += poll_some(s[0].scq, 1, wc + 1, VT_TIMEOUT_MS);
	CHECK_INT(done, 2, "%s: both complete", tag);
	writes_landed(s, &b, tag);
#endif
	vt_buf_free(&a);
	vt_buf_free(&b);
}

/* What verbs refuse on iWARP, as siw does. */
static void test_refused(struct side s[2])
{
	struct vt_buf a;
	uint64_t res;

	if (vt_buf_alloc(&a, s[0].d.pd, 4096, 4096,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ))
		return;
	CHECK_RC(vt_post_send(s[0].qp, 1, IBV_WR_SEND_WITH_IMM, a.p, 8, a.mr->lkey, 0, 0, 0, 1), EINVAL,
		 "Send with Immediate on iWARP");
	CHECK_RC(vt_post_atomic(s[0].qp, 2, IBV_WR_ATOMIC_FETCH_AND_ADD, &res, a.mr->lkey, 0, (uintptr_t)a.p,
				a.mr->rkey, 1, 0),
		 EINVAL, "atomic Fetch&Add on iWARP (ATOMIC_NONE)");
	{
		struct ibv_sge sg[2] = { { (uintptr_t)a.p, 8, a.mr->lkey }, { (uintptr_t)a.p + 8, 8, a.mr->lkey } };
		struct ibv_send_wr wr, *bad;

		memset(&wr, 0, sizeof(wr));
		wr.opcode = IBV_WR_RDMA_READ;
		wr.sg_list = sg;
		wr.num_sge = 2;
		wr.wr.rdma.remote_addr = (uintptr_t)a.p;
		wr.wr.rdma.rkey = a.mr->rkey;
		CHECK_RC(ibv_post_send(s[0].qp, &wr, &bad), EINVAL, "a two-SGE Read (max_sge_rd 1)");
	}
	vt_buf_free(&a);
}

static void test_throughput(struct side s[2], const char *tag)
{
	const uint32_t len = 65536, total = 2048; /* 128 MiB */
	struct vt_buf a, b;
	struct ibv_wc wc[64];
	uint32_t posted = 0, done = 0;
	int errs = 0;
	uint64_t t0;

	if (vt_buf_alloc(&a, s[0].d.pd, 4 * MiB, 4096, IBV_ACCESS_LOCAL_WRITE) ||
	    vt_buf_alloc(&b, s[1].d.pd, 4 * MiB, 4096,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)) {
		CHECK(0, "buffers");
		return;
	}
	vt_fill(a.p, 4 * MiB, 5);
	t0 = vt_now_ms();
	while (done < total) {
		while (posted < total && posted - done < 48) {
			uint32_t o = (posted % 64) * len;

			errs += vt_post_send(s[0].qp, posted, IBV_WR_RDMA_WRITE, a.p + o, len, a.mr->lkey,
					     IBV_SEND_SIGNALED, (uintptr_t)b.p + o, b.mr->rkey, 0) != 0;
			posted++;
		}
		int k = poll_some(s[0].scq, 64, wc, 5000);

		if (!k)
			break;
		for (int i = 0; i < k; i++)
			errs += wc[i].status != IBV_WC_SUCCESS;
		done += (uint32_t)k;
	}
	{
		uint64_t ms = vt_now_ms() - t0;

		CHECK(done == total && errs == 0, "%s: %u Writes of 64 KiB\t(%u done, %d errors)", tag, total, done,
		      errs);
		NOTE("%s: RDMA Write 64 KiB throughput %.0f MB/s (%u MiB in %" PRIu64 " ms)", tag,
		     ms ? (double)total * len / 1e6 / ((double)ms / 1e3) : 0.0, total * len / MiB, ms);
	}
	/* all of it arrived (a Read is ordered behind the Writes) */
	{
		uint8_t *chk = a.p + 2 * MiB;

		CHECK_RC(vt_post_send(s[0].qp, 99999, IBV_WR_RDMA_READ, chk, 65536, a.mr->lkey, IBV_SEND_SIGNALED,
				      (uintptr_t)b.p + 63 * 65536, b.mr->rkey, 0),
			 0, "post Read after the Writes");
		if (EXPECT_WC(s[0].scq, 99999, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL, "%s: Read after the Writes",
			      tag))
			CHECK(!memcmp(b.p + 63 * 65536, a.p + 63 * 65536, 65536), "%s: the last Write's data", tag);
	}
	vt_buf_free(&a);
	vt_buf_free(&b);
}

/* Sends that find no receive posted wait for one (SR_IW_NOBUF_WAIT_NS)
 * instead of ending the connection at once: 64 Sends of 64 KiB against 4
 * receives, the other 60 posted 200 ms later (qperf rc_bw's server
 * reposts its receives only after it has polled them). */
/* A receive for the test: on the QP, or on srq when there is one. */
static int late_post_recv(struct side *s, struct ibv_srq *srq, uint64_t id, void *p, uint32_t len, uint32_t lkey)
{
	struct ibv_sge g = { (uintptr_t)p, len, lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &g, .num_sge = 1 }, *bad;

	return srq ? ibv_post_srq_recv(srq, &w, &bad) : ibv_post_recv(s->qp, &w, &bad);
}

/* cnt receives of len bytes each from p on, wr_ids from id on, in one
 * ibv_post_recv (a list): a QP held for want of a receive is let go
 * once, with all of them there. */
static int post_recv_list(struct side *s, uint64_t id, uint8_t *p, uint32_t len, uint32_t lkey, uint32_t cnt)
{
	struct ibv_sge *g = calloc(cnt, sizeof(*g));
	struct ibv_recv_wr *w = calloc(cnt, sizeof(*w)), *bad;
	int r = ENOMEM;

	if (g && w) {
		for (uint32_t i = 0; i < cnt; i++) {
			g[i] = (struct ibv_sge){ (uintptr_t)(p + (size_t)i * len), len, lkey };
			w[i] = (struct ibv_recv_wr){ .wr_id = id + i,
						     .sg_list = &g[i],
						     .num_sge = 1,
						     .next = i + 1 < cnt ? &w[i + 1] : NULL };
		}
		r = ibv_post_recv(s->qp, w, &bad);
	}
	free(g);
	free(w);
	return r;
}

/* What cq holds now, without a poll that finds it empty and so receives
 * for itself (sr_progress_poll): only what the progress thread placed. */
static int cq_take_placed(struct ibv_cq *cq, struct ibv_wc *wc, int max)
{
	int got = 0, k;

	while (got < max && (k = ibv_poll_cq(cq, max - got < 64 ? max - got : 64, wc + got)) > 0)
		got += k;
	return got;
}

/* n Sends of len bytes, of which only the first early find a receive
 * posted; the rest are posted 200 ms later.  thread_only: the rest in
 * one list, and the receiver does not poll until 500 ms after that, when
 * every receive must have been completed without a poll driving it. */
static void test_late_receive_on(struct side s[2], struct ibv_srq *srq, const char *tag, uint32_t len, uint32_t n,
				 uint32_t early, bool thread_only)
{
	struct vt_buf a, b;
	struct ibv_wc wc[64];
	uint32_t sent = 0, got = 0, bad = 0;
	int errs = 0;

	if (vt_buf_alloc(&a, s[0].d.pd, (size_t)n * len, 4096, IBV_ACCESS_LOCAL_WRITE) ||
	    vt_buf_alloc(&b, s[1].d.pd, (size_t)n * len, 4096, IBV_ACCESS_LOCAL_WRITE)) {
		CHECK(0, "buffers");
		return;
	}
	vt_fill(a.p, (size_t)n * len, 77);
	memset(b.p, 0, (size_t)n * len);
	for (uint32_t i = 0; i < early; i++)
		errs += late_post_recv(&s[1], srq, 3000 + i, b.p + (size_t)i * len, len, b.mr->lkey) != 0;
	for (uint32_t i = 0; i < n; i++)
		errs += vt_post_send(s[0].qp, 4000 + i, IBV_WR_SEND, a.p + (size_t)i * len, len, a.mr->lkey,
				     IBV_SEND_SIGNALED, 0, 0, 0) != 0;
	vt_sleep_ms(200);
	CHECK(vt_qp_state(s[0].qp) == IBV_QPS_RTS && vt_qp_state(s[1].qp) == IBV_QPS_RTS,
	      "%s: 200 ms after %u Sends met %u receives, both QPs are still RTS\t(%s, %s)", tag, n, early,
	      vt_state_str(vt_qp_state(s[0].qp)), vt_state_str(vt_qp_state(s[1].qp)));
	uint64_t t_post = vt_now_ms(), t_first = 0;
	if (thread_only && !srq)
		errs += early < n &&
			post_recv_list(&s[1], 3000 + early, b.p + (size_t)early * len, len, b.mr->lkey, n - early) != 0;
	else
		for (uint32_t i = early; i < n; i++)
			errs += late_post_recv(&s[1], srq, 3000 + i, b.p + (size_t)i * len, len, b.mr->lkey) != 0;
	if (thread_only) {
		struct ibv_wc *all = calloc(n, sizeof(*all));

		vt_sleep_ms(500);
		int placed = all ? cq_take_placed(s[1].rcq, all, (int)n) : 0;
		for (int i = 0; i < placed; i++, got++)
			bad += all[i].status != IBV_WC_SUCCESS || all[i].byte_len != len || all[i].wr_id != 3000 + got;
		CHECK(placed == (int)n,
		      "%s: 500 ms later the receiver's progress thread alone has completed all %u "
		      "receives, no poll driving it\t(%d)",
		      tag, n, placed);
		free(all);
	}
	while (got < n) {
		int k = poll_some(s[1].rcq, 64, wc, 5000);

		if (!k)
			break;
		for (int i = 0; i < k; i++) {
			bad += wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len != len || wc[i].wr_id != 3000 + got;
			if (got == early && !t_first)
				t_first = vt_now_ms();
			got++;
		}
	}
	/* a QP receive resumes at the post; an SRQ's at the next look (1 ms),
	 * at the latest when the 1 s wait ends (not checked: load) */
	NOTE("%s: the first late receive completed %" PRIu64 " ms after the late posts", tag,
	     t_first ? t_first - t_post : 0);
	while (sent < n) {
		int k = poll_some(s[0].scq, 64, wc, 5000);

		if (!k)
			break;
		for (int i = 0; i < k; i++)
			bad += wc[i].status != IBV_WC_SUCCESS;
		sent += (uint32_t)k;
	}
	CHECK(!errs && got == n && sent == n && !bad,
	      "%s: all %u Sends complete on both sides, in order, none failed\t(%u received, %u sent, %u bad, %d "
	      "post errors)",
	      tag, n, got, sent, bad, errs);
	CHECK(!memcmp(a.p, b.p, (size_t)n * len), "%s: every byte of the %u Sends arrived", tag, n);
	vt_buf_free(&a);
	vt_buf_free(&b);
}

static void test_late_receive(struct side s[2], const char *tag)
{
	char t[160];

	test_late_receive_on(s, NULL, tag, 65536, 64, 4, false);
	/* Small Sends arrive many to a read (the receiver's look-ahead takes
	 * up to 64 KiB of them, qp_rx.c): more of them than the receive
	 * budget of one pass (SR_IW_RX_BUDGET, 64) wait there, with nothing
	 * left in the socket to bring the QP back, whether their receives
	 * are posted late or all posted before */
	snprintf(t, sizeof(t), "%s, 200 Sends of 48 bytes", tag);
	test_late_receive_on(s, NULL, t, 48, 200, 4, true);
	snprintf(t, sizeof(t), "%s, 250 Sends of 48 bytes, receives posted first", tag);
	test_late_receive_on(s, NULL, t, 48, 250, 250, true);
}

/* The same with the receiver's receives on an SRQ: its post gives the
 * held QP no kick, the QP looks at the SRQ again every ms. */
static void test_late_receive_srq(void)
{
	struct vt_mpa_opts o = { .crc = true, .rev = 2, .ird = 4, .ord = 4 };
	struct side s[2];
	struct ibv_srq *srq = NULL;
	struct conn c;

	SECTION("a Send held for a receive on an SRQ");
	memset(s, 0, sizeof(s));
	if (!vt_open(&s[0].d) || !vt_open(&s[1].d))
		return;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 128, .max_sge = 1 } };
	srq = ibv_create_srq(s[1].d.pd, &sa);
	s[1].scq = ibv_create_cq(s[1].d.ctx, 256, NULL, NULL, 0);
	s[1].rcq = ibv_create_cq(s[1].d.ctx, 256, NULL, NULL, 0);
	if (CHECK(srq && s[1].scq && s[1].rcq, "SRQ and CQs") && CHECK(side_qp(&s[0], 256, 16, 1), "sender QP")) {
		struct ibv_qp_init_attr ia = { .send_cq = s[1].scq,
					       .recv_cq = s[1].rcq,
					       .srq = srq,
					       .cap = { .max_send_wr = 16, .max_send_sge = 1 },
					       .qp_type = IBV_QPT_RC };
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
					 .port_num = 1,
					 .qp_access_flags = IBV_ACCESS_LOCAL_WRITE };

		s[1].qp = ibv_create_qp(s[1].d.pd, &ia);
		if (CHECK(s[1].qp &&
				  !ibv_modify_qp(s[1].qp, &a,
						 IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
			  "receiver QP on the SRQ, INIT") &&
		    CHECK(conn_up(s, &o, &c), "connected: RTS"))
			test_late_receive_on(s, srq, "SRQ", 65536, 64, 4, false);
	}
	for (int i = 0; i < 2; i++) {
		side_qp_free(&s[i]);
		if (i == 1 && srq)
			ibv_destroy_srq(srq);
		vt_close(&s[i].d);
	}
}

/* Reads need REMOTE_READ on the target; give b that too. */
static void test_data(const struct vt_mpa_opts *o, const char *tag, bool throughput)
{
	struct side s[2];
	struct conn c;

	SECTION("%s", tag);
	memset(s, 0, sizeof(s));
	if (!vt_open(&s[0].d) || !vt_open(&s[1].d))
		return;
	if (!CHECK(side_qp(&s[0], 256, 256, 4) && side_qp(&s[1], 256, 256, 4), "create QPs, INIT") ||
	    !CHECK(conn_up(s, o, &c), "TCP + MPA (rev %u, CRC %s, RTR %d), sr_iw_qp_connect on both: RTS", o->rev,
		   o->crc ? "on" : "off", o->rtr))
		goto out;
	test_opcodes(s, tag);
	test_pipeline(s, tag, o->ord);
	test_burst(s, tag);
	{
		/* a poller that reuses its buffer as soon as the last byte lands
		 * must not see a false CRC error (riostream, ib_write_lat) */
		const char *why;
		int done;
		bool ok = vt_pingpong_poll(s[0].qp, s[0].scq, s[0].d.pd, s[1].qp, s[1].scq, s[1].d.pd, 64, 1000, &done,
					   &why);
		CHECK(ok,
		      "%s: ping-pong of 64-byte Writes by polling memory, buffers reused at once: 1000 rounds\t(%d; %s)",
		      tag, done, why ? why : "ok");
		ok = vt_pingpong_poll(s[0].qp, s[0].scq, s[0].d.pd, s[1].qp, s[1].scq, s[1].d.pd, 4000, 300, &done,
				      &why);
		CHECK(ok, "%s: the same with 4000-byte Writes: 300 rounds\t(%d; %s)", tag, done, why ? why : "ok");
	}
	test_refused(s);
	test_late_receive(s, tag);
	if (throughput)
		test_throughput(s, tag);
	/* disconnect as rdma_disconnect does on iWARP: SQD drains and closes */
	{
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_SQD };
		struct vt_buf rb;

		if (!vt_buf_alloc(&rb, s[1].d.pd, 64, 4096, IBV_ACCESS_LOCAL_WRITE)) {
			CHECK_RC(vt_post_recv(s[1].qp, 4242, rb.p, 64, rb.mr->lkey), 0, "post a receive");
			CHECK_RC(ibv_modify_qp(s[0].qp, &a, IBV_QP_STATE), 0, "%s: initiator to SQD (disconnect)", tag);
			CHECK(wait_state(s[0].qp, IBV_QPS_ERR, 5000), "%s: the initiator closes and goes to ERR", tag);
			CHECK(wait_state(s[1].qp, IBV_QPS_ERR, 5000), "%s: the peer sees the close and goes to ERR",
			      tag);
			EXPECT_WC(s[1].rcq, 4242, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, NULL, "%s: its receive is flushed",
				  tag);
			for (int i = 0;
			     i < 200 && (atomic_load(&close_count[0]) < 1 || atomic_load(&close_count[1]) < 1); i++)
				vt_sleep_ms(5);
			CHECK(atomic_load(&close_count[0]) == 1 && atomic_load(&close_reason[0]) == SR_IW_CLOSE_LOCAL,
			      "%s: the initiator's CM is told: local close\t(%d calls, reason %d)", tag,
			      atomic_load(&close_count[0]), atomic_load(&close_reason[0]));
			CHECK(atomic_load(&close_count[1]) == 1 && atomic_load(&close_reason[1]) == SR_IW_CLOSE_PEER,
			      "%s: the responder's CM is told: the peer closed\t(%d calls, reason %d)", tag,
			      atomic_load(&close_count[1]), atomic_load(&close_reason[1]));
			vt_buf_free(&rb);
		}
	}
out:
	for (int i = 0; i < 2; i++) {
		side_qp_free(&s[i]);
		vt_close(&s[i].d);
	}
}

/* A peer's Write or Read aimed at registered memory the application
 * unmapped (src/core/guard.h): the responder's copy, CRC or Read Response
 * would fault and kill the process; instead its QP goes to ERR (a
 * Terminate where the stream allows one) and the Read fails at the
 * requester.  Writes of up to 64 bytes are staged whole until their CRC
 * is checked and then copied; longer ones are read straight into the
 * region by the kernel, which refuses (EFAULT). */
static void test_unmapped(void)
{
	static const struct {
		const char *what;
		enum ibv_wr_opcode op;
		uint32_t len;
	} t[] = {
		{ "a 40-byte Write (staged, then copied)", IBV_WR_RDMA_WRITE, 40 },
		{ "an 8 KiB Write (read into the region)", IBV_WR_RDMA_WRITE, 8192 },
		{ "a 6000-byte Read", IBV_WR_RDMA_READ, 6000 },
	};
	const unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct vt_mpa_opts o = { .crc = true, .rev = 2, .ird = 4, .ord = 4 };

	SECTION("a Write or Read aimed at registered memory the application unmapped");
#ifdef SR_TSAN
	NOTE("not in a ThreadSanitizer build: the memory guard is off there (src/core/guard.c)");
	return;
#endif
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct side s[2];
		struct conn c;
		struct vt_buf b;
		struct ibv_wc wc;

		memset(s, 0, sizeof(s));
		if (!vt_open(&s[0].d) || !vt_open(&s[1].d))
			return;
		if (!CHECK(side_qp(&s[0], 16, 16, 1) && side_qp(&s[1], 16, 16, 1) && conn_up(s, &o, &c),
			   "%s: a connected pair", t[i].what) ||
		    vt_buf_alloc(&b, s[0].d.pd, 16384, 4096, IBV_ACCESS_LOCAL_WRITE))
			goto next;
		struct ibv_mr *mr;
		uint8_t *m = vt_mmap_reg(s[1].d.pd, 16384, acc, &mr, t[i].what);
		if (m) {
			vt_unmap_reserved(m, 16384, t[i].what);
			CHECK_RC(vt_post_send(s[0].qp, 7, t[i].op, b.p, t[i].len, b.mr->lkey, IBV_SEND_SIGNALED,
					      (uintptr_t)m + 4096, mr->rkey, 0),
				 0, "%s: posted", t[i].what);
			CHECK(wait_state(s[1].qp, IBV_QPS_ERR, 5000),
			      "%s: the target's QP goes to ERR (the process lives)", t[i].what);
			if (t[i].op == IBV_WR_RDMA_READ) {
				bool got = vt_poll(s[0].scq, 1, &wc, VT_TIMEOUT_MS) == 1;
				CHECK(got && wc.wr_id == 7 && wc.status != IBV_WC_SUCCESS,
				      "%s fails at the requester\t(%s)", t[i].what,
				      got ? ibv_wc_status_str(wc.status) : "no completion");
			}
			CHECK_RC(ibv_dereg_mr(mr), 0, "%s: the MR deregisters after", t[i].what);
			munmap(m, 16384);
		}
		vt_buf_free(&b);
next:
		pair_down(s);
	}
}

/* An SGE past its region's end (its bounds only: the guard bytes after
 * the region are mapped), and an lkey naming no region, with the
 * statuses of siw, the reference for Soft-iWARP: a Send's or Write's
 * gather LOC_QP_OP_ERR whatever the cause (siw_qp_sq_process), a Read's
 * sink LOC_PROT_ERR (siw_proc_rresp), a receive's scatter GENERAL_ERR
 * (siw_proc_send fails the Send, siw_rdmap_complete has no status of its
 * own for it). */
static void test_sge_bounds(void)
{
	static const struct {
		const char *what;
		enum ibv_wr_opcode op;
		bool past_end, bad_lkey, remote_recv;
		enum ibv_wc_status want;
	} t[] = {
		{ "a Send from an SGE past its region's end", IBV_WR_SEND, true, false, false, IBV_WC_LOC_QP_OP_ERR },
		{ "a Send from an SGE with an lkey naming no region", IBV_WR_SEND, false, true, false,
		  IBV_WC_LOC_QP_OP_ERR },
		{ "a Write from an SGE past its region's end", IBV_WR_RDMA_WRITE, true, false, false,
		  IBV_WC_LOC_QP_OP_ERR },
		{ "a Read into a sink past its region's end", IBV_WR_RDMA_READ, true, false, false,
		  IBV_WC_LOC_PROT_ERR },
		{ "a Send into a receive SGE past its region's end", IBV_WR_SEND, false, false, true,
		  IBV_WC_GENERAL_ERR },
	};
	const unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct vt_mpa_opts o = { .crc = true, .rev = 2, .ird = 4, .ord = 4 };
	const uint32_t len = 200, blen = 8192;

	SECTION("SGEs past their region's bounds, and a bad lkey: siw's statuses");
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct side s[2];
		struct conn c;
		struct vt_buf l, r;

		memset(s, 0, sizeof(s));
		if (!vt_open(&s[0].d) || !vt_open(&s[1].d))
			return;
		if (!CHECK(side_qp(&s[0], 16, 16, 1) && side_qp(&s[1], 16, 16, 1) && conn_up(s, &o, &c),
			   "%s: a connected pair", t[i].what) ||
		    vt_buf_alloc(&l, s[0].d.pd, blen, 4096, IBV_ACCESS_LOCAL_WRITE))
			goto next;
		if (vt_buf_alloc(&r, s[1].d.pd, blen, 4096, acc)) {
			vt_buf_free(&l);
			goto next;
		}
		/* 200 bytes ending 50 past the region: only the last 50 are out */
		uint8_t *past = l.p + blen - len + 50;
		if (t[i].remote_recv) {
			CHECK_RC(vt_post_recv(s[1].qp, 5, r.p + blen - len + 50, len, r.mr->lkey), 0,
				 "%s: the receive posted", t[i].what);
			CHECK_RC(vt_post_send(s[0].qp, 1, IBV_WR_SEND, l.p, len, l.mr->lkey, IBV_SEND_SIGNALED, 0, 0,
					      0),
				 0, "%s: posted", t[i].what);
			EXPECT_WC(s[1].rcq, 5, t[i].want, IBV_WC_RECV, NULL, "%s: the receive fails", t[i].what);
			CHECK(wait_state(s[1].qp, IBV_QPS_ERR, 5000), "%s: the receiver's QP goes to ERR", t[i].what);
		} else {
			CHECK_RC(vt_post_send(s[0].qp, 1, t[i].op, t[i].past_end ? past : l.p, len,
					      t[i].bad_lkey ? l.mr->lkey ^ 0x5a5a0000 : l.mr->lkey, IBV_SEND_SIGNALED,
					      (uintptr_t)r.p, r.mr->rkey, 0),
				 0, "%s: posted", t[i].what);
			if (t[i].op == IBV_WR_SEND)
				vt_post_recv(s[1].qp, 5, r.p, len, r.mr->lkey);
			EXPECT_WC(s[0].scq, 1, t[i].want, VT_ANY_OPCODE, NULL, "%s: %s (as siw)", t[i].what,
				  ibv_wc_status_str(t[i].want));
			CHECK(wait_state(s[0].qp, IBV_QPS_ERR, 5000), "%s: the QP goes to ERR", t[i].what);
		}
		CHECK_GUARDS(&l, "%s: local region", t[i].what);
		CHECK_GUARDS(&r, "%s: remote region", t[i].what);
		vt_buf_free(&l);
		vt_buf_free(&r);
next:
		pair_down(s);
	}
}

/* ------------------------------------------------------------------ */
/* a raw TCP peer: bad input -> Terminate                               */
/* ------------------------------------------------------------------ */

struct raw {
	struct side v; /* the QP under test */
	int fd;	       /* the raw peer's socket */
	bool crc;
	struct vt_buf tgt;  /* remote-writable/readable target with guards */
	struct vt_buf ro;   /* registered without remote access */
	struct vt_buf rbuf; /* receive buffer */
	uint8_t *snap;	    /* target contents before */
};

/* Connect a QP to a raw socket: the raw side is the initiator. */
static bool raw_up(struct raw *r, bool crc, int rtr, bool post_recv)
{
	const unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct vt_mpa_opts o = { .crc = crc, .rev = 2, .ird = 4, .ord = 4, .rtr = rtr };
	struct sr_iw_conn_params p[2];
	int fds[2];

	memset(&r->v.scq, 0, sizeof(*r) - offsetof(struct raw, v.scq));
	r->fd = -1;
	r->crc = crc;
	drain_async(&r->v.d);
	if (!side_qp(&r->v, 16, 16, 2) || vt_buf_alloc(&r->tgt, r->v.d.pd, 8192, 4096, (int)acc) ||
	    vt_buf_alloc(&r->ro, r->v.d.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE) ||
	    vt_buf_alloc(&r->rbuf, r->v.d.pd, 256, 4096, IBV_ACCESS_LOCAL_WRITE))
		return false;
	vt_fill(r->tgt.p, 8192, 4711);
	vt_fill(r->ro.p, 4096, 4712);
	r->snap = malloc(8192);
	memcpy(r->snap, r->tgt.p, 8192);
	if (post_recv && vt_post_recv(r->v.qp, 77, r->rbuf.p, 200, r->rbuf.mr->lkey))
		return false;
	if (!vt_tcp_pair(fds) || !vt_mpa_exchange(fds, &o, p))
		return false;
	r->fd = fds[0];
	p[1].on_close = on_close;
	p[1].close_arg = (void *)(intptr_t)1;
	atomic_store(&close_count[1], 0);
	return sr_iw_qp_connect(r->v.qp, &p[1]) == 0;
}

static void raw_down(struct raw *r)
{
	side_qp_free(&r->v);
	vt_buf_free(&r->tgt);
	vt_buf_free(&r->ro);
	vt_buf_free(&r->rbuf);
	free(r->snap);
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
}

/* Read the Terminate the QP must send: returns whether one came, with
 * its headers in *t. */
static bool raw_get_term(struct raw *r, struct sr_iw_hdr *t, uint32_t *ulen_out)
{
	uint8_t buf[512];
	struct sr_mpa_fpdu f;
	uint32_t ulen;

	if (vt_read_exact(r->fd, buf, 2, 5000) != 2)
		return false;
	ulen = (uint32_t)buf[0] << 8 | buf[1];
	if (sr_mpa_fpdu_len(ulen) > sizeof(buf) ||
	    vt_read_exact(r->fd, buf + 2, sr_mpa_fpdu_len(ulen) - 2, 5000) != sr_mpa_fpdu_len(ulen) - 2)
		return false;
	if (sr_mpa_fpdu_split(&f, buf, sr_mpa_fpdu_len(ulen)) <= 0)
		return false;
	if (!CHECK(r->crc ? f.crc == f.crc_calc : f.crc == 0, "the Terminate's CRC field is right\t(%08x, want %08x)",
		   f.crc, r->crc ? f.crc_calc : 0))
		return false;
	*ulen_out = ulen;
	return sr_iw_hdr_parse(t, f.ulpdu, f.ulpdu_len, f.ulpdu_len) == (int)f.ulpdu_len;
}

/* The whole expectation: a Terminate with layer/etype/ecode (and the
 * DDP header of the offending segment when hdr is given), then EOF; the
 * QP in ERR with the async event; the posted receive completed with
 * recv_st; nothing outside writable memory touched. */
static void raw_expect(struct raw *r, const char *what, uint8_t layer, uint8_t etype, uint8_t ecode,
		       const uint8_t *bad_hdr, uint32_t bad_len, uint32_t seg_len, enum ibv_event_type ev, int recv_st)
{
	struct sr_iw_hdr t;
	uint32_t ulen = 0;

	if (CHECK(raw_get_term(r, &t, &ulen), "%s: the raw peer reads a Terminate FPDU", what)) {
		CHECK(t.opcode == SR_RDMAP_TERMINATE && !t.tagged && t.last && t.qn == SR_DDP_QN_TERMINATE &&
			      t.msn == 1 && t.mo == 0,
		      "%s: Terminate on QN 2, MSN 1, MO 0, L set\t(op %u qn %u msn %u mo %u)", what, t.opcode, t.qn,
		      t.msn, t.mo);
		CHECK(t.term.layer == layer && t.term.etype == etype && t.term.ecode == ecode,
		      "%s: layer/type/code %u/%u/0x%02x (%s)\t(got %u/%u/0x%02x: %s)", what, layer, etype, ecode,
		      sr_term_str(layer, etype, ecode), t.term.layer, t.term.etype, t.term.ecode,
		      sr_term_str(t.term.layer, t.term.etype, t.term.ecode));
		if (bad_hdr) {
			uint32_t dl = (bad_hdr[0] & SR_DDP_FLAG_TAGGED) ? SR_DDP_TAGGED_HDR : SR_DDP_UNTAGGED_HDR;
			bool rdma = bad_len > dl;

			CHECK((t.term.hdrct & (SR_TERM_HDRCT_M | SR_TERM_HDRCT_D)) ==
					      (SR_TERM_HDRCT_M | SR_TERM_HDRCT_D) &&
				      !!(t.term.hdrct & SR_TERM_HDRCT_R) == rdma && t.term.ddp_seg_len == seg_len &&
				      t.term.ddp_hdr_len == dl && !memcmp(t.term.ddp_hdr, bad_hdr, dl) &&
				      (!rdma || !memcmp(t.term.rdma_hdr, bad_hdr + dl, SR_RDMAP_RREQ_LEN)),
			      "%s: the offending headers are copied (M, D%s; segment length %u)\t(hdrct %#x seg %u)",
			      what, rdma ? ", R" : "", seg_len, t.term.hdrct, t.term.ddp_seg_len);
		} else {
			CHECK(t.term.hdrct == 0 && ulen == SR_DDP_UNTAGGED_HDR + SR_RDMAP_TERM_CTRL_LEN,
			      "%s: no headers copied\t(hdrct %#x, ULPDU %u)", what, t.term.hdrct, ulen);
		}
	}
	CHECK(vt_peer_eof(r->fd, 3000), "%s: then the stream ends (FIN)", what);
	CHECK(wait_state(r->v.qp, IBV_QPS_ERR, 3000), "%s: the QP is in ERR\t(state %s)", what,
	      vt_state_str(vt_qp_state(r->v.qp)));
	CHECK(wait_async(&r->v.d, r->v.qp, ev, 3000), "%s: async event %s", what, ibv_event_type_str(ev));
	if (recv_st >= 0)
		EXPECT_WC(r->v.rcq, 77, (enum ibv_wc_status)recv_st, IBV_WC_RECV, NULL, "%s: the posted receive", what);
	CHECK(!memcmp(r->tgt.p, r->snap, 8192), "%s: the target region is unchanged", what);
	CHECK(vt_verify(r->ro.p, 4096, 4712) < 0, "%s: the region without remote access is unchanged", what);
	CHECK_GUARDS(&r->tgt, "%s: target", what);
	CHECK_GUARDS(&r->ro, "%s: read-only region", what);
	CHECK_GUARDS(&r->rbuf, "%s: receive buffer", what);
	for (int i = 0; i < 200 && atomic_load(&close_count[1]) < 1; i++)
		vt_sleep_ms(5);
	CHECK(atomic_load(&close_count[1]) == 1 && atomic_load(&close_reason[1]) == SR_IW_CLOSE_TERM_TX,
	      "%s: the CM is told a Terminate was sent\t(%d, reason %d)", what, atomic_load(&close_count[1]),
	      atomic_load(&close_reason[1]));
}

static void test_raw(void)
{
	struct raw r;
	uint8_t fp[70000], hb[SR_IW_MAX_HDR], pay[4096];
	struct sr_iw_hdr h;
	size_t n;
	uint32_t hl;

	SECTION("bad input from a raw TCP peer: Terminate, ERR, error completions, memory untouched");
	memset(&r, 0, sizeof(r));
	r.fd = -1;
	if (!vt_open(&r.v.d))
		return;
	for (size_t i = 0; i < sizeof(pay); i++)
		pay[i] = (uint8_t)(i * 7 + 1);

	/* garbage: not MPA at all ("GE" is the length, "T " a DDP version 0) */
	if (CHECK(raw_up(&r, true, 0, true), "garbage: connected")) {
		static const char junk[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

		CHECK(vt_write_all(r.fd, junk, sizeof(junk) - 1), "garbage sent");
		raw_expect(&r, "garbage", SR_TERM_LAYER_DDP, SR_TERM_DDP_UNTAGGED, SR_TERM_DDP_U_VERSION, NULL, 0, 0,
			   IBV_EVENT_QP_FATAL, IBV_WC_WR_FLUSH_ERR);
	}
	raw_down(&r);

	/* a truncated FPDU: half a Send, then the peer shuts its side */
	if (CHECK(raw_up(&r, true, 0, true), "truncated FPDU: connected")) {
		sr_iw_hdr_init(&h, SR_RDMAP_SEND, true);
		h.msn = 1;
		n = vt_fpdu(fp, &h, pay, 100, true, false);
		CHECK(vt_write_all(r.fd, fp, n / 2) && !shutdown(r.fd, SHUT_WR), "half a Send sent, then FIN");
		raw_expect(&r, "truncated FPDU", SR_TERM_LAYER_LLP, SR_TERM_LLP_MPA, SR_TERM_MPA_TCP_LOST, NULL, 0, 0,
			   IBV_EVENT_QP_FATAL, IBV_WC_WR_FLUSH_ERR);
	}
	raw_down(&r);

	/* a ULPDU too short for the header it announces */
	if (CHECK(raw_up(&r, true, 0, true), "short ULPDU: connected")) {
		static const uint8_t s6[] = { 0x00, 0x06, 0xc1, 0x40, 0, 0, 0, 1, 0, 0, 0, 0 };

		CHECK(vt_write_all(r.fd, s6, sizeof(s6)), "a 6-byte ULPDU sent");
		raw_expect(&r, "ULPDU shorter than its header", SR_TERM_LAYER_LLP, SR_TERM_LLP_MPA, SR_TERM_MPA_FPDU,
			   NULL, 0, 0, IBV_EVENT_QP_FATAL, IBV_WC_WR_FLUSH_ERR);
	}
	raw_down(&r);

	/* a bad CRC on a Send */
	if (CHECK(raw_up(&r, true, 0, true), "bad CRC: connected")) {
		sr_iw_hdr_init(&h, SR_RDMAP_SEND, true);
		h.msn = 1;
		n = vt_fpdu(fp, &h, pay, 64, true, true);
		CHECK(vt_write_all(r.fd, fp, n), "a Send with a bad CRC sent");
		raw_expect(&r, "bad CRC", SR_TERM_LAYER_LLP, SR_TERM_LLP_MPA, SR_TERM_MPA_CRC, NULL, 0, 0,
			   IBV_EVENT_QP_FATAL, IBV_WC_WR_FLUSH_ERR);
	}
	raw_down(&r);

	/* Writes: a bad STag, out of bounds, wrapping, no remote access */
	for (int k = 0; k < 4; k++) {
		static const char *what[] = { "Write with a bad STag", "Write out of bounds", "Write with a TO wrap",
					      "Write into a region without remote write" };
		static const uint8_t code[] = { SR_TERM_DDP_T_INV_STAG, SR_TERM_DDP_T_BASE_BOUNDS,
						SR_TERM_DDP_T_TO_WRAP, SR_TERM_DDP_T_INV_STAG };

		if (!CHECK(raw_up(&r, true, 0, true), "%s: connected", what[k]))
			goto next;
		sr_iw_hdr_init(&h, SR_RDMAP_WRITE, true);
		h.stag = r.tgt.mr->rkey;
		h.to = (uintptr_t)r.tgt.p;
		switch (k) {
		case 0:
			h.stag = r.tgt.mr->rkey + 0x100; /* the next slot: never registered */
			break;
		case 1:
			h.to = (uintptr_t)r.tgt.p + 8192 - 100; /* 200 bytes, 100 past the end */
			break;
		case 2:
			h.to = UINT64_MAX - 50;
			break;
		default:
			h.stag = r.ro.mr->rkey;
			h.to = (uintptr_t)r.ro.p;
			break;
		}
		n = vt_fpdu(fp, &h, pay, 200, true, false);
		hl = sr_iw_hdr_build(hb, &h);
		CHECK(vt_write_all(r.fd, fp, n), "%s sent", what[k]);
		raw_expect(&r, what[k], SR_TERM_LAYER_DDP, SR_TERM_DDP_TAGGED, code[k], hb, hl, hl + 200,
			   IBV_EVENT_QP_ACCESS_ERR, IBV_WC_WR_FLUSH_ERR);
next:
		raw_down(&r);
	}

	/* Read Requests: bad source STag, beyond the region, no remote read */
	for (int k = 0; k < 3; k++) {
		static const char *what[] = { "Read Request with a bad STag", "Read Request out of bounds",
					      "Read Request of a region without remote read" };
		static const uint8_t code[] = { SR_TERM_RDMAP_INV_STAG, SR_TERM_RDMAP_BASE_BOUNDS,
						SR_TERM_RDMAP_ACCESS };

		if (!CHECK(raw_up(&r, true, 0, true), "%s: connected", what[k]))
			goto next2;
		sr_iw_hdr_init(&h, SR_RDMAP_READ_REQ, true);
		h.msn = 1;
		h.rreq.sink_stag = 0x4242;
		h.rreq.sink_to = 0x1000;
		h.rreq.size = 4096;
		h.rreq.src_stag = k == 0 ? 0xfffff0u : k == 1 ? r.tgt.mr->rkey : r.ro.mr->rkey;
		h.rreq.src_to = k == 1 ? (uintptr_t)r.tgt.p + 8000 : (uintptr_t)(k == 2 ? r.ro.p : r.tgt.p);
		n = vt_fpdu(fp, &h, NULL, 0, true, false);
		hl = sr_iw_hdr_build(hb, &h);
		CHECK(vt_write_all(r.fd, fp, n), "%s sent", what[k]);
		raw_expect(&r, what[k], SR_TERM_LAYER_RDMAP, SR_TERM_RDMAP_PROTECTION, code[k], hb, hl, hl,
			   IBV_EVENT_QP_ACCESS_ERR, IBV_WC_WR_FLUSH_ERR);
next2:
		raw_down(&r);
	}

	/* untagged: no receive posted, too long, bad MSN, bad QN, bad MO */
	for (int k = 0; k < 5; k++) {
		static const char *what[] = { "Send without a posted receive", "Send too long for the receive",
					      "Send with a bad MSN", "Send on a bad queue", "Send with a bad MO" };
		static const uint8_t code[] = { SR_TERM_DDP_U_NO_BUF, SR_TERM_DDP_U_TOO_LONG, SR_TERM_DDP_U_MSN_RANGE,
						SR_TERM_DDP_U_INV_QN, SR_TERM_DDP_U_INV_MO };
		static const int st[] = { -1, IBV_WC_LOC_LEN_ERR, IBV_WC_WR_FLUSH_ERR, IBV_WC_WR_FLUSH_ERR,
					  IBV_WC_WR_FLUSH_ERR };

		if (!CHECK(raw_up(&r, true, 0, k != 0), "%s: connected", what[k]))
			goto next3;
		sr_iw_hdr_init(&h, SR_RDMAP_SEND, true);
		h.msn = k == 2 ? 5 : 1;
		h.qn = k == 3 ? 7 : 0;
		h.mo = k == 4 ? 64 : 0;
		n = vt_fpdu(fp, &h, pay, k == 1 ? 300 : 100, true, false);
		hl = sr_iw_hdr_build(hb, &h);
		uint64_t t0 = vt_now_ms();
		CHECK(vt_write_all(r.fd, fp, n), "%s sent", what[k]);
		raw_expect(&r, what[k], SR_TERM_LAYER_DDP, SR_TERM_DDP_UNTAGGED, code[k], hb, hl,
			   hl + (k == 1 ? 300 : 100), IBV_EVENT_QP_FATAL, st[k]);
		if (k == 0)
			CHECK(vt_now_ms() - t0 >= 900, "%s: the Send waited ~1 s for a receive first\t(%" PRIu64 " ms)",
			      what[k], vt_now_ms() - t0);
		if (k == 1) {
			size_t z = 0;

			while (z < r.rbuf.len && !r.rbuf.p[z])
				z++;
			CHECK(z == r.rbuf.len, "Send too long: nothing placed in the receive buffer	(byte %zu set)",
			      z);
		}
next3:
		raw_down(&r);
	}

	/* Send with Invalidate, as siw: an STag that is not there, or of
	 * another PD, cannot be invalidated (the receive completes with
	 * REM_INV_REQ_ERR, RDMAP Terminate "cannot invalidate"); one of the
	 * QP's PD is invalidated: the receive says so, and the region is then
	 * out of reach of the peer */
	for (int k = 0; k < 3; k++) {
		static const char *what[] = { "Send with Invalidate of an unknown STag",
					      "Send with Invalidate of another PD's STag",
					      "Send with Invalidate of the target's STag" };
		struct ibv_pd *pd2 = NULL;
		struct ibv_mr *mr2 = NULL;
		struct ibv_wc wc;

		if (!CHECK(raw_up(&r, true, 0, true), "%s: connected", what[k]))
			goto next5;
		sr_iw_hdr_init(&h, SR_RDMAP_SEND_INV, true);
		h.msn = 1;
		h.rsvdulp = r.tgt.mr->rkey + 0x100; /* the next slot: never registered */
		if (k == 1) {
			pd2 = ibv_alloc_pd(r.v.d.ctx);
			mr2 = pd2 ? ibv_reg_mr(pd2, r.ro.p, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) :
				    NULL;
			if (!CHECK(mr2, "%s: a region of another PD", what[k]))
				goto next5;
			h.rsvdulp = mr2->rkey;
		} else if (k == 2) {
			h.rsvdulp = r.tgt.mr->rkey;
		}
		n = vt_fpdu(fp, &h, pay, 100, true, false);
		hl = sr_iw_hdr_build(hb, &h);
		CHECK(vt_write_all(r.fd, fp, n), "%s sent", what[k]);
		if (k < 2) {
			raw_expect(&r, what[k], SR_TERM_LAYER_RDMAP,
				   k ? SR_TERM_RDMAP_PROTECTION : SR_TERM_RDMAP_OPERATION,
				   SR_TERM_RDMAP_CANNOT_INVALIDATE, hb, hl, hl + 100,
				   k ? IBV_EVENT_QP_ACCESS_ERR : IBV_EVENT_QP_FATAL, IBV_WC_REM_INV_REQ_ERR);
			goto next5;
		}
		if (EXPECT_WC(r.v.rcq, 77, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "%s: the receive", what[k]))
			CHECK((wc.wc_flags & IBV_WC_WITH_INV) && wc.invalidated_rkey == r.tgt.mr->rkey &&
				      wc.byte_len == 100 && !memcmp(r.rbuf.p, pay, 100),
			      "%s: 100 bytes, WITH_INV and the STag\t(flags %#x rkey %#x len %u)", what[k], wc.wc_flags,
			      wc.invalidated_rkey, wc.byte_len);
		CHECK(vt_qp_state(r.v.qp) == IBV_QPS_RTS, "%s: the QP is still in RTS", what[k]);
		/* the invalidated STag: a Write to it is refused */
		sr_iw_hdr_init(&h, SR_RDMAP_WRITE, true);
		h.stag = r.tgt.mr->rkey;
		h.to = (uintptr_t)r.tgt.p;
		n = vt_fpdu(fp, &h, pay, 200, true, false);
		hl = sr_iw_hdr_build(hb, &h);
		CHECK(vt_write_all(r.fd, fp, n), "a Write to the invalidated STag sent");
		raw_expect(&r, "Write to an invalidated STag", SR_TERM_LAYER_DDP, SR_TERM_DDP_TAGGED,
			   SR_TERM_DDP_T_INV_STAG, hb, hl, hl + 200, IBV_EVENT_QP_ACCESS_ERR, -1);
next5:
		if (mr2)
			ibv_dereg_mr(mr2);
		if (pd2)
			ibv_dealloc_pd(pd2);
		raw_down(&r);
	}

	/* RDMAP: a version and an opcode we don't speak */
	for (int k = 0; k < 2; k++) {
		static const char *what[] = { "RDMAP version 2", "an unknown opcode" };

		if (!CHECK(raw_up(&r, true, 0, true), "%s: connected", what[k]))
			goto next4;
		sr_iw_hdr_init(&h, SR_RDMAP_SEND, true);
		h.msn = 1;
		n = vt_fpdu(fp, &h, pay, 8, true, false);
		if (k == 0)
			fp[3] = (uint8_t)(2 << 6 | SR_RDMAP_SEND);
		else
			fp[3] = (uint8_t)(1 << 6 | 0xd);
		{
			/* the CRC over the changed byte */
			uint32_t ul = (uint32_t)fp[0] << 8 | fp[1], pad = sr_mpa_pad(ul);

			sr_mpa_crc_store(fp + 2 + ul + pad, ~sr_mpa_crc_update(~0u, fp, 2 + ul + pad));
		}
		CHECK(vt_write_all(r.fd, fp, n), "%s sent", what[k]);
		raw_expect(&r, what[k], SR_TERM_LAYER_RDMAP, SR_TERM_RDMAP_OPERATION,
			   k == 0 ? SR_TERM_RDMAP_VERSION : SR_TERM_RDMAP_OPCODE, NULL, 0, 0, IBV_EVENT_QP_FATAL,
			   IBV_WC_WR_FLUSH_ERR);
next4:
		raw_down(&r);
	}

	/* RFC 6581: the responder waits for the RTR; a Send instead is wrong */
	if (CHECK(raw_up(&r, true, SR_MPA_RTR_WRITE, true), "no matching RTR: connected (Write RTR negotiated)")) {
		sr_iw_hdr_init(&h, SR_RDMAP_SEND, true);
		h.msn = 1;
		n = vt_fpdu(fp, &h, pay, 8, true, false);
		CHECK(vt_write_all(r.fd, fp, n), "a Send instead of the RTR sent");
		raw_expect(&r, "no matching RTR", SR_TERM_LAYER_LLP, SR_TERM_LLP_MPA, SR_TERM_MPA_NO_MATCHING_RTR, NULL,
			   0, 0, IBV_EVENT_QP_FATAL, IBV_WC_WR_FLUSH_ERR);
	}
	raw_down(&r);

	/* without CRC negotiated, the CRC field is not looked at; good input
	 * then works with the raw peer: a Write lands, a Read is answered */
	if (CHECK(raw_up(&r, false, 0, true), "no CRC: connected")) {
		struct sr_iw_hdr t;
		uint8_t rsp[8192];
		uint32_t ul;

		sr_iw_hdr_init(&h, SR_RDMAP_WRITE, true);
		h.stag = r.tgt.mr->rkey;
		h.to = (uintptr_t)r.tgt.p + 1000;
		n = vt_fpdu(fp, &h, pay, 333, false, true); /* a "wrong" CRC that must be ignored */
		sr_iw_hdr_init(&h, SR_RDMAP_READ_REQ, true);
		h.msn = 1;
		h.rreq.sink_stag = 0x77;
		h.rreq.sink_to = 0x10000;
		h.rreq.size = 1333;
		h.rreq.src_stag = r.tgt.mr->rkey;
		h.rreq.src_to = (uintptr_t)r.tgt.p + 1000;
		n += vt_fpdu(fp + n, &h, NULL, 0, false, false);
		CHECK(vt_write_all(r.fd, fp, n), "a Write and a Read Request sent");
		CHECK(vt_read_exact(r.fd, rsp, 2, 5000) == 2, "a Read Response comes");
		ul = (uint32_t)rsp[0] << 8 | rsp[1];
		CHECK(ul == 14 + 1333 &&
			      vt_read_exact(r.fd, rsp + 2, sr_mpa_fpdu_len(ul) - 2, 5000) == sr_mpa_fpdu_len(ul) - 2,
		      "the Read Response is one FPDU of 1333 bytes\t(ULPDU %u)", ul);
		CHECK(sr_iw_hdr_parse(&t, rsp + 2, 14, ul) == 14 && t.opcode == SR_RDMAP_READ_RESP && t.tagged &&
			      t.last && t.stag == 0x77 && t.to == 0x10000,
		      "Read Response header: tagged, last, sink STag/TO");
		CHECK(!memcmp(rsp + 16, pay, 333) && !memcmp(rsp + 16 + 333, r.snap + 1333, 1000),
		      "the Read Response carries the Write's data, then what was there");
		CHECK(sr_mpa_crc_load(rsp + 2 + ul + sr_mpa_pad(ul)) == 0, "its CRC field is 0 without CRC");
		CHECK(!memcmp(r.tgt.p + 1000, pay, 333) && !memcmp(r.tgt.p, r.snap, 1000) &&
			      !memcmp(r.tgt.p + 1333, r.snap + 1333, 8192 - 1333),
		      "the Write landed exactly where addressed");
		CHECK(vt_qp_state(r.v.qp) == IBV_QPS_RTS, "the QP is still in RTS");
	}
	raw_down(&r);

	/* good input trickled in 1..17-byte pieces: every header, payload
	 * and trailer arrives split, and is put together right */
	if (CHECK(raw_up(&r, true, 0, true), "trickle: connected")) {
		struct sr_iw_hdr t;
		uint8_t rsp[1024];
		struct ibv_wc wc;
		uint32_t ul;
		size_t off = 0;

		sr_iw_hdr_init(&h, SR_RDMAP_WRITE, true);
		h.stag = r.tgt.mr->rkey;
		h.to = (uintptr_t)r.tgt.p + 100;
		n = vt_fpdu(fp, &h, pay, 333, true, false);
		sr_iw_hdr_init(&h, SR_RDMAP_SEND_SE, false);
		h.msn = 1;
		n += vt_fpdu(fp + n, &h, pay + 1000, 101, true, false);
		sr_iw_hdr_init(&h, SR_RDMAP_SEND_SE, true);
		h.msn = 1;
		h.mo = 101;
		n += vt_fpdu(fp + n, &h, pay + 1101, 49, true, false);
		sr_iw_hdr_init(&h, SR_RDMAP_WRITE, true); /* zero length: nothing checked, nothing placed */
		h.stag = 0xdeadbe00;
		n += vt_fpdu(fp + n, &h, NULL, 0, true, false);
		sr_iw_hdr_init(&h, SR_RDMAP_READ_REQ, true);
		h.msn = 1;
		h.rreq.sink_stag = 0x99;
		h.rreq.sink_to = 0x2000;
		h.rreq.size = 500;
		h.rreq.src_stag = r.tgt.mr->rkey;
		h.rreq.src_to = (uintptr_t)r.tgt.p;
		n += vt_fpdu(fp + n, &h, NULL, 0, true, false);
		while (off < n) {
			size_t k = 1 + vt_rand(17);

			if (k > n - off)
				k = n - off;
			if (!vt_write_all(r.fd, fp + off, k))
				break;
			off += k;
			vt_sleep_us(150);
		}
		CHECK(off == n, "%zu bytes of FPDUs trickled in", n);
		if (EXPECT_WC(r.v.rcq, 77, IBV_WC_SUCCESS, IBV_WC_RECV, &wc, "trickle: the two-segment Send arrives"))
			CHECK(wc.byte_len == 150 && !memcmp(r.rbuf.p, pay + 1000, 150) &&
				      (wc.wc_flags & (IBV_WC_WITH_IMM | IBV_WC_WITH_INV)) == 0,
			      "trickle: 150 bytes, right data\t(byte_len %u)", wc.byte_len);
		CHECK(vt_read_exact(r.fd, rsp, 2, 5000) == 2, "trickle: a Read Response comes");
		ul = (uint32_t)rsp[0] << 8 | rsp[1];
		CHECK(ul == 14 + 500 &&
			      vt_read_exact(r.fd, rsp + 2, sr_mpa_fpdu_len(ul) - 2, 5000) == sr_mpa_fpdu_len(ul) - 2,
		      "trickle: one FPDU of 500 bytes\t(ULPDU %u)", ul);
		{
			struct sr_mpa_fpdu f;

			CHECK(sr_mpa_fpdu_split(&f, rsp, sr_mpa_fpdu_len(ul)) > 0 && f.crc == f.crc_calc,
			      "trickle: the Read Response's CRC is good");
		}
		CHECK(sr_iw_hdr_parse(&t, rsp + 2, 14, ul) == 14 && t.opcode == SR_RDMAP_READ_RESP && t.stag == 0x99 &&
			      t.to == 0x2000 && t.last,
		      "trickle: Read Response to the sink named");
		CHECK(!memcmp(rsp + 16, r.snap, 100) && !memcmp(rsp + 116, pay, 333) &&
			      !memcmp(rsp + 449, r.snap + 433, 67),
		      "trickle: it carries the region with the Write in it");
		CHECK(!memcmp(r.tgt.p + 100, pay, 333) && !memcmp(r.tgt.p, r.snap, 100) &&
			      !memcmp(r.tgt.p + 433, r.snap + 433, 8192 - 433),
		      "trickle: the Write landed exactly");
		CHECK(vt_qp_state(r.v.qp) == IBV_QPS_RTS, "trickle: the QP is still in RTS");
		CHECK_GUARDS(&r.tgt, "trickle: target");
		CHECK_GUARDS(&r.rbuf, "trickle: receive buffer");
	}
	raw_down(&r);

	/* a Terminate from the peer: our Read waiting for it fails */
	if (CHECK(raw_up(&r, true, 0, true), "Terminate received: connected")) {
		struct sr_iw_hdr rq, t;
		uint8_t buf[128];
		uint32_t ul;

		CHECK_RC(vt_post_send(r.v.qp, 9, IBV_WR_RDMA_READ, r.tgt.p, 4096, r.tgt.mr->lkey, IBV_SEND_SIGNALED,
				      0x5000, 0x1234, 0),
			 0, "post a Read to the raw peer");
		CHECK(vt_read_exact(r.fd, buf, 2, 5000) == 2, "the raw peer gets the Read Request");
		ul = (uint32_t)buf[0] << 8 | buf[1];
		CHECK(ul == 46 &&
			      vt_read_exact(r.fd, buf + 2, sr_mpa_fpdu_len(ul) - 2, 5000) == sr_mpa_fpdu_len(ul) - 2 &&
			      sr_iw_hdr_parse(&rq, buf + 2, ul, ul) == 46 && rq.opcode == SR_RDMAP_READ_REQ &&
			      rq.qn == 1 && rq.msn == 1 && rq.rreq.size == 4096 && rq.rreq.src_stag == 0x1234 &&
			      rq.rreq.src_to == 0x5000 && rq.rreq.sink_stag == r.tgt.mr->lkey &&
			      rq.rreq.sink_to == (uintptr_t)r.tgt.p,
		      "it reads as the RFC 5040 Read Request for our WQE");
		sr_iw_term_fill(&t, SR_TERM_LAYER_RDMAP, SR_TERM_RDMAP_PROTECTION, SR_TERM_RDMAP_INV_STAG, buf + 2, ul,
				ul);
		n = vt_fpdu(fp, &t, NULL, 0, true, false);
		CHECK(vt_write_all(r.fd, fp, n), "the raw peer answers with a Terminate (invalid STag)");
		EXPECT_WC(r.v.scq, 9, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_READ, NULL, "the Read fails: remote access");
		EXPECT_WC(r.v.rcq, 77, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, NULL, "the posted receive is flushed");
		CHECK(wait_state(r.v.qp, IBV_QPS_ERR, 3000), "the QP is in ERR");
		CHECK(wait_async(&r.v.d, r.v.qp, IBV_EVENT_QP_FATAL, 3000), "async event QP fatal");
		for (int i = 0; i < 200 && atomic_load(&close_count[1]) < 1; i++)
			vt_sleep_ms(5);
		CHECK(atomic_load(&close_reason[1]) == SR_IW_CLOSE_TERM_RX, "the CM is told: Terminate received");
		CHECK(!memcmp(r.tgt.p, r.snap, 8192), "nothing was written");
	}
	raw_down(&r);

	/* the peer resets the connection: ERR, flush */
	if (CHECK(raw_up(&r, true, 0, true), "reset: connected")) {
		struct linger lg = { 1, 0 };

		setsockopt(r.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(r.fd);
		r.fd = -1;
		CHECK(wait_state(r.v.qp, IBV_QPS_ERR, 3000), "reset by the peer: the QP is in ERR");
		EXPECT_WC(r.v.rcq, 77, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, NULL, "reset: the receive is flushed");
	}
	raw_down(&r);
	vt_close(&r.v.d);
}

/* ------------------------------------------------------------------ */
/* closing never loses what completed                                   */
/* ------------------------------------------------------------------ */

/* A slow raw peer: reads the QP's FPDUs 16 KiB every 2 ms, counting the
 * Write payload, while its other thread keeps sending zero-length
 * Writes (so input keeps arriving while the QP closes). */
struct linger_peer {
	int fd;
	uint32_t stag;
	uint64_t to;
	bool crc;
	atomic_bool done;
	uint64_t write_bytes; /* Write payload read */
	int end;	      /* 0 FIN, -errno reset, -ETIME silence */
};

static void *linger_reader(void *arg)
{
	struct linger_peer *lp = arg;
	uint8_t buf[70000];
	size_t since_nap = 0;

	vt_sleep_ms(200); /* let the QP's socket fill */
	lp->end = -ETIME;
	for (;;) {
		struct sr_mpa_fpdu f;
		struct sr_iw_hdr h;
		uint32_t ulen;
		size_t got = vt_read_exact(lp->fd, buf, 2, 10000);

		if (got != 2) {
			lp->end = got == 0 ? vt_peer_next(lp->fd, 0) : -EPROTO;
			if (lp->end == -ETIME || lp->end > 0)
				lp->end = -EPROTO;
			break;
		}
		ulen = (uint32_t)buf[0] << 8 | buf[1];
		if (vt_read_exact(lp->fd, buf + 2, sr_mpa_fpdu_len(ulen) - 2, 10000) != sr_mpa_fpdu_len(ulen) - 2 ||
		    sr_mpa_fpdu_split(&f, buf, sr_mpa_fpdu_len(ulen)) <= 0 ||
		    sr_iw_hdr_parse(&h, f.ulpdu, f.ulpdu_len, f.ulpdu_len) < 0) {
			lp->end = -EPROTO;
			break;
		}
		if (h.opcode == SR_RDMAP_WRITE)
			lp->write_bytes += f.ulpdu_len - h.hdr_len;
		since_nap += sr_mpa_fpdu_len(ulen);
		if (since_nap >= 16384) {
			since_nap = 0;
			vt_sleep_ms(2);
		}
	}
	atomic_store(&lp->done, true);
	return NULL;
}

static void *linger_writer(void *arg)
{
	struct linger_peer *lp = arg;
	uint8_t fp[64];
	struct sr_iw_hdr h;
	size_t n;

	sr_iw_hdr_init(&h, SR_RDMAP_WRITE, true);
	h.stag = lp->stag;
	h.to = lp->to;
	n = vt_fpdu(fp, &h, NULL, 0, lp->crc, false);
	while (!atomic_load(&lp->done) && vt_write_all(lp->fd, fp, n))
		vt_sleep_ms(1);
	return NULL;
}

static void test_close_keeps_data(void)
{
	enum {
		NW = 16,
		WLEN = 128 * 1024
	};
	struct raw r;
	struct vt_buf src;
	struct linger_peer lp;
	pthread_t rd, wr;
	struct ibv_wc wc[NW];
	int got = 0;

	SECTION("closing a stream loses nothing that completed: Writes still in the socket reach a slow peer "
		"that keeps sending");
	memset(&r, 0, sizeof(r));
	r.fd = -1;
	if (!vt_open(&r.v.d))
		return;
	if (!CHECK(raw_up(&r, true, 0, false), "connected to a raw peer") ||
	    !CHECK(!vt_buf_alloc(&src, r.v.d.pd, WLEN, 4096, IBV_ACCESS_LOCAL_WRITE), "a 128 KiB source region")) {
		raw_down(&r);
		vt_close(&r.v.d);
		return;
	}
	vt_fill(src.p, WLEN, 99);
	memset(&lp, 0, sizeof(lp));
	lp.fd = r.fd;
	lp.stag = r.tgt.mr->rkey;
	lp.to = (uintptr_t)r.tgt.p;
	lp.crc = true;
	pthread_create(&rd, NULL, linger_reader, &lp);
	pthread_create(&wr, NULL, linger_writer, &lp);
	for (int i = 0; i < NW; i++)
		CHECK_RC(vt_post_send(r.v.qp, 500 + i, IBV_WR_RDMA_WRITE, src.p, WLEN, src.mr->lkey, IBV_SEND_SIGNALED,
				      0x10000, 0x1234, 0),
			 0, "post Write %d of %d (128 KiB)", i + 1, NW);
	while (got < NW) {
		int n = vt_poll(r.v.scq, NW - got, wc + got, 10000);

		if (n <= 0)
			break;
		got += n;
	}
	CHECK(got == NW, "all %d Writes complete (TCP has them)\t(%d)", NW, got);
	{
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_SQD };

		CHECK_RC(ibv_modify_qp(r.v.qp, &a, IBV_QP_STATE), 0, "at once: to SQD (rdma_disconnect)");
		CHECK(wait_state(r.v.qp, IBV_QPS_ERR, 5000), "the QP closes the stream and goes to ERR");
	}
	/* the process could exit now: destroying the QP must not drop what
	 * the kernel still holds for the peer */
	ibv_destroy_qp(r.v.qp);
	r.v.qp = NULL;
	pthread_join(rd, NULL);
	pthread_join(wr, NULL);
	CHECK(lp.write_bytes == (uint64_t)NW * WLEN, "the peer read every byte of the Writes\t(%llu of %llu)",
	      (unsigned long long)lp.write_bytes, (unsigned long long)NW * WLEN);
	CHECK(lp.end == 0 || lp.end == -ECONNRESET, "then the stream ended\t(%d)", lp.end);
	vt_buf_free(&src);
	raw_down(&r);
	vt_close(&r.v.d);
}

/* ------------------------------------------------------------------ */

static void test_device(void)
{
	struct vt_dev d;
	struct ibv_qp_init_attr ia;
	struct side s;
	struct sr_iw_dev_attr da;
	struct ibv_qp *uc;
	struct ibv_qp_attr a;
	int e;

	SECTION("the device");
	if (!vt_open(&d))
		return;
	CHECK(d.ctx->device->transport_type == IBV_TRANSPORT_IWARP && d.ctx->device->node_type == IBV_NODE_RNIC,
	      "%s: transport iWARP, node type RNIC", d.name);
	CHECK(d.attr.max_sge_rd == 1 && d.attr.atomic_cap == IBV_ATOMIC_NONE, "max_sge_rd 1, no atomics");
	CHECK(!sr_iw_query(d.ctx, &da) && da.iwarp && da.crc, "sr_iw_query: an iWARP device that wants CRC");
	/* memory windows: siw has none (no alloc_mw: EOPNOTSUPP), and accepts
	 * an MR with IBV_ACCESS_MW_BIND as the kernel does */
	CHECK(d.attr.max_mw == 0 &&
		      !(d.attr.device_cap_flags & (IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B)),
	      "no memory windows: max_mw 0, no MEM_WINDOW capability\t(max_mw %d, flags %#x)", d.attr.max_mw,
	      (unsigned)d.attr.device_cap_flags);
	for (int t = IBV_MW_TYPE_1; t <= IBV_MW_TYPE_2; t++) {
		struct ibv_mw *mw = ibv_alloc_mw(d.pd, (enum ibv_mw_type)t);

		e = errno;
		CHECK(!mw && e == EOPNOTSUPP, "ibv_alloc_mw(type %d): EOPNOTSUPP, as siw\t(%p, errno %d)", t,
		      (void *)mw, e);
		if (mw)
			ibv_dealloc_mw(mw);
	}
	{
		static uint8_t m[4096];
		struct ibv_mr *mr = ibv_reg_mr(d.pd, m, sizeof(m), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);

		CHECK(mr, "an MR with IBV_ACCESS_MW_BIND registers, as on siw\t(errno %d)", errno);
		if (mr)
			ibv_dereg_mr(mr);
	}
	for (int k = 0; k < 2; k++) {
		struct ibv_qp_init_attr_ex ix;
		struct ibv_qp *q;

		memset(&ix, 0, sizeof(ix));
		ix.qp_type = IBV_QPT_RC;
		ix.send_cq = ix.recv_cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
		ix.cap.max_send_wr = ix.cap.max_recv_wr = 1;
		ix.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ix.pd = d.pd;
		ix.send_ops_flags = IBV_QP_EX_WITH_SEND | (k ? IBV_QP_EX_WITH_LOCAL_INV : IBV_QP_EX_WITH_BIND_MW);
		q = ibv_create_qp_ex(d.ctx, &ix);
		e = errno;
		CHECK(!q && e == EOPNOTSUPP, "ibv_create_qp_ex with %s: EOPNOTSUPP\t(errno %d)",
		      k ? "IBV_QP_EX_WITH_LOCAL_INV" : "IBV_QP_EX_WITH_BIND_MW", e);
		if (q)
			ibv_destroy_qp(q);
		ibv_destroy_cq(ix.send_cq);
	}
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_UC;
	ia.send_cq = ia.recv_cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	uc = ibv_create_qp(d.pd, &ia);
	e = errno;
	CHECK(!uc && e == EOPNOTSUPP, "UC QPs are refused (EOPNOTSUPP)");
	ibv_destroy_cq(ia.send_cq);
	memset(&s, 0, sizeof(s));
	s.d = d;
	if (CHECK(side_qp(&s, 4, 4, 1), "an RC QP in INIT")) {
		struct sr_iw_conn_params p = { .fd = -1, .mpa_rev = 2 };
		int fds[2];

		CHECK_RC(sr_iw_qp_connect(s.qp, &p), EBADF, "sr_iw_qp_connect without a socket");
		p.fd = socket(AF_INET, SOCK_STREAM, 0);
		CHECK_RC(sr_iw_qp_connect(s.qp, &p), ENOTCONN, "sr_iw_qp_connect on an unconnected socket");
		close(p.fd);
		if (vt_tcp_pair(fds)) {
			p.fd = fds[0];
			p.mpa_rev = 3;
			CHECK_RC(sr_iw_qp_connect(s.qp, &p), EINVAL, "MPA revision 3");
			p.mpa_rev = 1;
			p.rtr = SR_MPA_RTR_READ;
			CHECK_RC(sr_iw_qp_connect(s.qp, &p), EINVAL, "an RTR with MPA revision 1");
			p.rtr = 0;
			memset(&a, 0, sizeof(a));
			a.qp_state = IBV_QPS_RESET;
			ibv_modify_qp(s.qp, &a, IBV_QP_STATE);
			CHECK_RC(sr_iw_qp_connect(s.qp, &p), EINVAL, "a QP in RESET");
			close(fds[0]);
			close(fds[1]);
		}
	}
	side_qp_free(&s);
	vt_close(&d);
}

int main(int argc, char **argv)
{
	struct vt_mpa_opts o;

	vt_begin_args("test_iwarp", 240, argc, argv);
	vt_seed(0x1fa4c3);
	VT_RUN(test_device());

	o = (struct vt_mpa_opts){ .crc = true, .rev = 2, .ird = 16, .ord = 16 };
	VT_CASE("MPA rev 2, CRC on", test_data(&o, "MPA rev 2, CRC on", true));
	o = (struct vt_mpa_opts){ .crc = false, .rev = 2, .ird = 4, .ord = 4 };
	VT_CASE("CRC off, IRD/ORD 4", test_data(&o, "CRC off, IRD/ORD 4", true));
	o = (struct vt_mpa_opts){ .crc = true, .rev = 1 };
	VT_CASE("MPA rev 1", test_data(&o, "MPA rev 1", false));
	/* Read Responses go out in batches; with the socket taking a part at
	 * a time, the IRQ slot of each must be free once its last byte is
	 * out, or the peer's next Read overflows the IRD it was granted */
	o = (struct vt_mpa_opts){ .crc = true, .rev = 2, .ird = 8, .ord = 8, .sndbuf = 4096 };
	VT_CASE("small socket buffers", test_data(&o, "small socket buffers (partial sends), IRD/ORD 8", false));
	for (int rtr = SR_MPA_RTR_SEND; rtr <= SR_MPA_RTR_READ; rtr++) {
		static const char *n[] = { "", "peer to peer, Send RTR", "peer to peer, Write RTR",
					   "peer to peer, Read RTR" };

		o = (struct vt_mpa_opts){ .crc = true, .rev = 2, .ird = 2, .ord = 2, .rtr = rtr };
		VT_CASE(n[rtr], test_data(&o, n[rtr], false));
	}
	VT_RUN(test_late_receive_srq());
	VT_RUN(test_unmapped());
	VT_RUN(test_sge_bounds());
	VT_RUN(test_raw());
	VT_RUN(test_close_keeps_data());
	return vt_end();
}
