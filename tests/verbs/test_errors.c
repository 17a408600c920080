/* test_errors: the error paths, with the work-completion statuses the
 * kernel's rxe reports.
 *
 *  - RDMA WRITE / READ / ATOMIC with an invalid or stale rkey, beyond the
 *    end of the region, to a region without the remote access right, to a
 *    QP without the remote access right;
 *  - a SEND larger than the posted receive buffer;
 *  - RNR retries exhausted (rnr_retry 0 and 1);
 *  - a bad lkey in a send SGE, a receive SGE, a READ's local SGE;
 *  - after each: the QPs that must be in ERR are, every outstanding and
 *    later WR (send and receive queue) completes with IBV_WC_WR_FLUSH_ERR,
 *    the responder gets its async event, memory outside the target range
 *    (and the target itself where nothing may land) is untouched;
 *  - UC: the same access errors drop the message silently;
 *  - a peer QP destroyed while traffic is in flight -> RETRY_EXC_ERR;
 *  - 50 cycles of create/connect/blast/destroy, the destroy running in
 *    another thread while the progress engine delivers to the QP;
 *  - a peer process SIGKILLed in the middle of a stream of 64 KiB writes;
 *  - garbage datagrams (random bytes, valid-looking RoCE headers with the
 *    real QPNs, truncated packets, wrong ICRCs, and well-formed packets that
 *    must be ignored) sent to UDP 4791 from a plain socket, including from
 *    the peers' own source ports (the flow sockets' 4-tuples), while a
 *    verified transfer runs.
 *
 * Run as "test_errors --peer <rfd> <wfd>" it is the child of the peer
 * process test. */
#include "vt.h"
#include "common/tsan.h"
#include "vt_roce.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <libgen.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>

static struct vt_dev D;

#define ACC_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* ------------------------------------------------------------------ */
/* helpers                                                              */
/* ------------------------------------------------------------------ */

static bool wait_state(struct ibv_qp *qp, enum ibv_qp_state want, int timeout_ms)
{
	uint64_t end = vt_now_ms() + (uint64_t)timeout_ms;
	int s;
	while ((s = vt_qp_state(qp)) != (int)want && vt_now_ms() < end)
		vt_sleep_ms(1);
	return s == (int)want;
}

#define CHECK_STATE(qp, want, timeout_ms, ...)                                                                   \
	({                                                                                                       \
		char vt_m_[512];                                                                                 \
		snprintf(vt_m_, sizeof(vt_m_), __VA_ARGS__);                                                     \
		bool vt_ok_ = wait_state((qp), (want), (timeout_ms));                                            \
		int vt_s_ = vt_qp_state(qp);                                                                     \
		vt_report(vt_ok_, __FILE__, __LINE__, NULL, "%s: QP %u is in %s\t(got %s)", vt_m_, (qp)->qp_num, \
			  vt_state_str(want), vt_state_str(vt_s_));                                              \
	})

/* Every async event read by wait_qp_event() and drain_async() is logged
 * here (type and element pointer, never dereferenced). */
static struct {
	int n;
	int type[256];
	void *obj[256];
} seen;

static void seen_log(const struct ibv_async_event *ev)
{
	if (seen.n < 256) {
		seen.type[seen.n] = ev->event_type;
		seen.obj[seen.n] = ev->element.qp;
		seen.n++;
	}
}

/* Events naming obj since the last reset. */
static int seen_for(void *obj)
{
	int k = 0;
	for (int i = 0; i < seen.n; i++)
		k += seen.obj[i] == obj;
	return k;
}

/* Waits for an async event about qp whose type is in `types` (bitmask of
 * 1 << event_type); other events are reported as notes.  Returns the
 * event type found or -1. */
static int wait_qp_event(struct ibv_qp *qp, unsigned types, int timeout_ms)
{
	uint64_t end = vt_now_ms() + (uint64_t)timeout_ms;
	struct ibv_async_event ev;
	while (vt_now_ms() < end) {
		if (!vt_get_async(D.ctx, &ev, 50))
			continue;
		seen_log(&ev);
		bool qp_ev = ev.event_type >= IBV_EVENT_QP_FATAL && ev.event_type <= IBV_EVENT_PATH_MIG_ERR;
		qp_ev |= ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED;
		if (qp_ev && ev.element.qp == qp && (types & (1u << ev.event_type)))
			return ev.event_type;
		/* element.qp is not dereferenced: it may be a QP destroyed since */
		NOTE("async event %s (%s %p)", ibv_event_type_str(ev.event_type), qp_ev ? "QP" : "object",
		     qp_ev ? (void *)ev.element.qp : ev.element.cq);
	}
	return -1;
}

static void drain_async(const char *why)
{
	struct ibv_async_event ev;
	while (vt_get_async(D.ctx, &ev, 0)) {
		seen_log(&ev);
		bool qp_ev = ev.event_type >= IBV_EVENT_QP_FATAL && ev.event_type <= IBV_EVENT_PATH_MIG_ERR;
		NOTE("%s: async event %s (%s %p)", why, ibv_event_type_str(ev.event_type), qp_ev ? "QP" : "object",
		     qp_ev ? (void *)ev.element.qp : ev.element.cq);
	}
}

#define QP_ERR_EVENTS ((1u << IBV_EVENT_QP_FATAL) | (1u << IBV_EVENT_QP_REQ_ERR) | (1u << IBV_EVENT_QP_ACCESS_ERR))

/* An error the requester learns from its error completion raises no
 * affiliated async event at the requester (IBTA 10.10.2.3; neither rxe
 * nor mlx5 raise one).  Counted per scenario, reported once at the end
 * (one cause, one failure).  Call instead of drain_async(). */
static int quiet_scenarios, noisy_scenarios;
static char noisy_names[512];

static void check_requester_quiet(struct ibv_qp *qp, const char *what)
{
	vt_sleep_ms(20);
	drain_async(what);
	int k = seen_for(qp);
	quiet_scenarios++;
	if (k) {
		noisy_scenarios++;
		NOTE("%s: %d async event(s) for the requester QP %u, whose error its completion reported", what, k,
		     qp->qp_num);
		if (strlen(noisy_names) < 300) {
			strcat(noisy_names, noisy_scenarios > 1 ? "; " : "");
			strncat(noisy_names, what, 60);
		}
	}
}

static void requester_quiet_summary(void)
{
	SECTION("async events at requesters whose errors were reported by completions");
	KNOWN_BUG(noisy_scenarios == 0,
		  "in %d error scenarios, no requester QP got an async event for an error its own completion reported "
		  "(IBTA 10.10.2.3; rxe and mlx5 raise none)\t(%d scenarios got one: softrdma raises "
		  "IBV_EVENT_QP_FATAL, \"local work queue catastrophic error\", for every requester error, which "
		  "applications read as a broken QP; e.g. %s)",
		  quiet_scenarios, noisy_scenarios, noisy_names);
}

/* The QP of `side` is in ERR: outstanding receives (ids pre_recv[0..n))
 * flush, and so does every send and receive posted now. */
static void check_flushing(struct vt_pair *p, int side, const uint64_t *pre_recv, int npre, const char *what)
{
	struct ibv_qp *qp = p->qp[side];
	CHECK_STATE(qp, IBV_QPS_ERR, 5000, "%s", what);
	for (int i = 0; i < npre; i++)
		EXPECT_WC(p->rcq[side], pre_recv[i], IBV_WC_WR_FLUSH_ERR, VT_ANY_OPCODE, NULL,
			  "%s: receive posted before the error flushes", what);
	static uint8_t dummy[64];
	struct ibv_sge sge = { (uintptr_t)dummy, 16, 0 };
	struct ibv_recv_wr rw = { .wr_id = 0xF1, .sg_list = &sge, .num_sge = 0 }, *rbad;
	CHECK_RC(ibv_post_recv(qp, &rw, &rbad), 0, "%s: post_recv in ERR is accepted", what);
	EXPECT_WC(p->rcq[side], 0xF1, IBV_WC_WR_FLUSH_ERR, VT_ANY_OPCODE, NULL, "%s: ...and flushes", what);
	struct ibv_send_wr sw, *sbad;
	memset(&sw, 0, sizeof(sw));
	sw.wr_id = 0xF2;
	sw.opcode = IBV_WR_SEND;
	sw.send_flags = IBV_SEND_SIGNALED;
	sw.sg_list = &sge;
	sw.num_sge = 0;
	CHECK_RC(ibv_post_send(qp, &sw, &sbad), 0, "%s: post_send in ERR is accepted", what);
	EXPECT_WC(p->scq[side], 0xF2, IBV_WC_WR_FLUSH_ERR, VT_ANY_OPCODE, NULL, "%s: ...and flushes", what);
	sw.wr_id = 0xF3;
	sw.send_flags = 0;
	CHECK_RC(ibv_post_send(qp, &sw, &sbad), 0, "%s: an unsignaled post_send in ERR", what);
	EXPECT_WC(p->scq[side], 0xF3, IBV_WC_WR_FLUSH_ERR, VT_ANY_OPCODE, NULL,
		  "%s: ...still completes (errors always complete)", what);
	CHECK_CQ_EMPTY(p->scq[side], 0, "%s: nothing else on the send CQ", what);
	CHECK_CQ_EMPTY(p->rcq[side], 0, "%s: nothing else on the receive CQ", what);
}

/* ------------------------------------------------------------------ */
/* remote access errors                                                 */
/* ------------------------------------------------------------------ */

enum op {
	OP_WRITE,
	OP_READ,
	OP_ATOMIC,
	OP_WRITE_MULTI
};
static const char *op_name(enum op o)
{
	return o == OP_WRITE  ? "RDMA_WRITE" :
	       o == OP_READ   ? "RDMA_READ" :
	       o == OP_ATOMIC ? "FETCH_AND_ADD" :
				"RDMA_WRITE (3 packets)";
}

enum target {
	T_BAD_RKEY,
	T_STALE_RKEY,
	T_BEYOND_END,
	T_NO_ACCESS_MR,
	T_NO_ACCESS_QP
};

/* One bad remote operation from qp[0] to qp[1], then everything that
 * must follow from it. */
static void remote_error(enum op o, enum target t)
{
	static const char *tn[] = { "an invalid rkey", "the rkey of a deregistered MR",
				    "a range beyond the region's end", "an MR without the remote right",
				    "a QP without the remote right" };
	char what[160];
	snprintf(what, sizeof(what), "RC %s with %s", op_name(o), tn[t]);
	SECTION("%s", what);

	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf loc, rem;
	vt_cfg_default(&c, IBV_QPT_RC);
	if (t == T_NO_ACCESS_QP)
		c.access = IBV_ACCESS_LOCAL_WRITE; /* responder QP grants nothing remote */
	if (!vt_pair_setup(&D, &c, &p))
		return;
	int racc = ACC_ALL;
	if (t == T_NO_ACCESS_MR)
		racc = o == OP_READ   ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC :
		       o == OP_ATOMIC ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ :
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	size_t rlen = 16384, llen = 16384;
	vt_buf_alloc(&loc, D.pd, llen, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&rem, D.pd, rlen, 8192, racc);
	vt_fill(loc.p, llen, 11);
	vt_fill(rem.p, rlen, 22);

	uint32_t rkey = rem.mr->rkey;
	if (t == T_BAD_RKEY)
		rkey ^= 0x5a5a0000; /* a key index no region has */
	if (t == T_STALE_RKEY) {
		struct ibv_mr *tmp = ibv_reg_mr(D.pd, rem.p, rlen, racc);
		rkey = tmp ? tmp->rkey : 0;
		if (tmp)
			ibv_dereg_mr(tmp);
	}
	uint64_t raddr = (uintptr_t)rem.p + 64;
	uint32_t len = o == OP_ATOMIC ? 8 : o == OP_WRITE_MULTI ? 3 * 4096 + 100 : 1000;
	if (t == T_BEYOND_END)
		raddr = o == OP_ATOMIC ? (uintptr_t)rem.p + rlen :
					 (uintptr_t)rem.p + rlen - 4096 - 100 + (len > 4096 ? 0 : 3200);
	if (t == T_BEYOND_END && o != OP_ATOMIC)
		NOTE("target [region end - %" PRIu64 ", +%u): %" PRIu64 " bytes past the end",
		     (uint64_t)((uintptr_t)rem.p + rlen - raddr), len, raddr + len - (uintptr_t)rem.p - rlen);

	/* receives posted before the error, on both sides */
	uint64_t pre[2] = { 0x101, 0x102 };
	for (int s = 0; s < 2; s++)
		for (int i = 0; i < 2; i++)
			vt_post_recv(p.qp[s], pre[i], loc.p + 8192 + i * 64, 64, loc.mr->lkey);
	/* the bad WR, then two good ones behind it */
	int rc;
	if (o == OP_ATOMIC)
		rc = vt_post_atomic(p.qp[0], 1, IBV_WR_ATOMIC_FETCH_AND_ADD, loc.p, loc.mr->lkey, IBV_SEND_SIGNALED,
				    raddr, rkey, 1, 0);
	else
		rc = vt_post_send(p.qp[0], 1, o == OP_READ ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE, loc.p, len,
				  loc.mr->lkey, IBV_SEND_SIGNALED, raddr, rkey, 0);
	rc |= vt_post_send(p.qp[0], 2, IBV_WR_RDMA_WRITE, loc.p, 100, loc.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)rem.p,
			   rem.mr->rkey, 0);
	rc |= vt_post_send(p.qp[0], 3, IBV_WR_SEND, loc.p, 10, loc.mr->lkey, 0, 0, 0, 0);
	CHECK_RC(rc, 0, "%s: post it and two more WRs (one unsignaled) behind it", what);

	enum ibv_wc_status want = t == T_NO_ACCESS_QP ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_REM_ACCESS_ERR;
	uint64_t t0 = vt_now_ms();
	EXPECT_WC(p.scq[0], 1, want, VT_ANY_OPCODE, NULL, "%s: requester", what);
	NOTE("error completion after %" PRIu64 " ms", vt_now_ms() - t0);
	EXPECT_WC(p.scq[0], 2, IBV_WC_WR_FLUSH_ERR, VT_ANY_OPCODE, NULL, "%s: the WR behind it flushes", what);
	EXPECT_WC(p.scq[0], 3, IBV_WC_WR_FLUSH_ERR, VT_ANY_OPCODE, NULL, "%s: the unsignaled WR behind it flushes too",
		  what);

	/* nothing moved */
	CHECK_DATA(rem.p, rlen, 22, "%s: the remote region is unchanged", what);
	CHECK_GUARDS(&rem, "%s: remote region", what);
	CHECK_DATA(loc.p, 8192, 11, "%s: the local buffer is unchanged (no read data, no atomic result)", what);
	CHECK_GUARDS(&loc, "%s: local buffer", what);

	/* the responder takes itself to ERR and says so: an R_Key violation
	 * is IBV_EVENT_QP_ACCESS_ERR (IBTA C9-222.1.1, rxe); the QP refusing
	 * the operation itself: one of the QP error events */
	seen.n = 0;
	unsigned ev = t == T_NO_ACCESS_QP ? QP_ERR_EVENTS : 1u << IBV_EVENT_QP_ACCESS_ERR;
	int got = wait_qp_event(p.qp[1], ev, 3000);
	CHECK(got >= 0, "%s: responder QP %u gets the async event %s\t(none within 3 s)", what, p.qp[1]->qp_num,
	      t == T_NO_ACCESS_QP ? "QP_FATAL/QP_REQ_ERR/QP_ACCESS_ERR" : "IBV_EVENT_QP_ACCESS_ERR");
	if (got >= 0)
		NOTE("responder event: %s", ibv_event_type_str((enum ibv_event_type)got));
	check_flushing(&p, 1, pre, 2, "responder");
	check_flushing(&p, 0, pre, 2, "requester");
	check_requester_quiet(p.qp[0], what);
	vt_buf_free(&loc);
	vt_buf_free(&rem);
	vt_pair_destroy(&p);
}

/* UC has no NAKs: a bad WRITE is dropped at the responder, which stays up. */
static void uc_access_errors(void)
{
	SECTION("UC: RDMA_WRITE with a bad rkey / beyond the region is dropped, the QPs stay in RTS");
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf loc, rem;
	vt_cfg_default(&c, IBV_QPT_UC);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&loc, D.pd, 16384, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&rem, D.pd, 16384, 4096, ACC_ALL);
	vt_fill(loc.p, 16384, 5);
	vt_post_send(p.qp[0], 1, IBV_WR_RDMA_WRITE, loc.p, 1000, loc.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)rem.p,
		     rem.mr->rkey ^ 0x5a5a0000, 0);
	vt_post_send(p.qp[0], 2, IBV_WR_RDMA_WRITE, loc.p, 3 * 4096, loc.mr->lkey, IBV_SEND_SIGNALED,
		     (uintptr_t)rem.p + 16384 - 4096, rem.mr->rkey, 0);
	EXPECT_WC(p.scq[0], 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL,
		  "UC WRITE with a bad rkey: the sender completes");
	EXPECT_WC(p.scq[0], 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL,
		  "UC WRITE of 12 KiB starting 4 KiB before the region end: the sender completes");
	vt_post_send(p.qp[0], 3, IBV_WR_RDMA_WRITE, loc.p + 7, 500, loc.mr->lkey, IBV_SEND_SIGNALED,
		     (uintptr_t)rem.p + 100, rem.mr->rkey, 0);
	EXPECT_WC(p.scq[0], 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL, "then a good UC WRITE");
	uint64_t end = vt_now_ms() + 5000;
	while (memcmp(rem.p + 100, loc.p + 7, 500) && vt_now_ms() < end)
		vt_sleep_ms(1);
	CHECK(!memcmp(rem.p + 100, loc.p + 7, 500), "the good UC WRITE lands");
	bool clean = true;
	for (size_t i = 0; i < rem.len; i++)
		if ((i < 100 || i >= 600) && rem.p[i])
			clean = false;
	CHECK(clean, "nothing of the two bad UC WRITEs landed");
	CHECK_GUARDS(&rem, "UC target region");
	CHECK_STATE(p.qp[0], IBV_QPS_RTS, 0, "UC requester");
	CHECK_STATE(p.qp[1], IBV_QPS_RTS, 0, "UC responder");
	struct ibv_async_event ev;
	bool got = vt_get_async(D.ctx, &ev, 100);
	CHECK(!got, "no async event for dropped UC messages\t(got %s)", got ? ibv_event_type_str(ev.event_type) : "");
	vt_buf_free(&loc);
	vt_buf_free(&rem);
	vt_pair_destroy(&p);
}

/* ------------------------------------------------------------------ */
/* SEND too long, RNR exhausted                                         */
/* ------------------------------------------------------------------ */

static void send_too_long(size_t rbuf, size_t msg)
{
	char what[128];
	snprintf(what, sizeof(what), "RC SEND of %zu B into a %zu-byte receive buffer", msg, rbuf);
	SECTION("%s", what);
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf s, r;
	vt_cfg_default(&c, IBV_QPT_RC);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&s, D.pd, msg, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&r, D.pd, 65536, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_fill(s.p, msg, 3);
	vt_fill(r.p, 65536, 4);
	vt_post_recv(p.qp[1], 10, r.p + 1000, (uint32_t)rbuf, r.mr->lkey);
	uint64_t pre[1] = { 11 };
	vt_post_recv(p.qp[1], 11, r.p + 30000, 100, r.mr->lkey);
	vt_post_send(p.qp[0], 20, IBV_WR_SEND, s.p, (uint32_t)msg, s.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
	vt_post_send(p.qp[0], 21, IBV_WR_SEND, s.p, 10, s.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
	EXPECT_WC(p.scq[0], 20, IBV_WC_REM_INV_REQ_ERR, VT_ANY_OPCODE, NULL, "%s: sender", what);
	EXPECT_WC(p.scq[0], 21, IBV_WC_WR_FLUSH_ERR, VT_ANY_OPCODE, NULL, "%s: the SEND behind it flushes", what);
	struct ibv_wc wc;
	memset(&wc, 0, sizeof(wc));
	int n = vt_poll(p.rcq[1], 1, &wc, VT_TIMEOUT_MS);
	/* IBTA and mlx5: LOC_LEN_ERR.  The kernel's rxe completes the
	 * receive with the status it NAKs with: REM_INV_REQ_ERR. */
	CHECK(n == 1 && wc.wr_id == 10 && (wc.status == IBV_WC_LOC_LEN_ERR || wc.status == IBV_WC_REM_INV_REQ_ERR),
	      "%s: receiver completes wr_id 10 with LOC_LEN_ERR (rxe: REM_INV_REQ_ERR)\t(got %d completions, wr_id %" PRIu64
	      ", status %s)",
	      what, n, wc.wr_id, vt_status_str(wc.status));
	if (n == 1)
		NOTE("receiver status: %s", vt_status_str(wc.status));
	/* at most the posted buffer may have been written: nothing around it */
	size_t changed = (size_t)-1;
	for (size_t i = 0; i < 65536; i++)
		if ((i < 1000 || i >= 1000 + rbuf) && r.p[i] != vt_pat(4, i)) {
			changed = i;
			break;
		}
	CHECK(changed == (size_t)-1,
	      "%s: nothing written outside the posted receive buffer\t(offset %zd from its start "
	      "changed)",
	      what, (ssize_t)changed - 1000);
	CHECK_GUARDS(&r, "%s: receive region", what);
	/* the error is tied to a receive WQE: its completion reports it (an
	 * affiliated async event may or may not come) */
	seen.n = 0;
	check_flushing(&p, 1, pre, 1, "receiver");
	check_flushing(&p, 0, NULL, 0, "sender");
	check_requester_quiet(p.qp[0], what);
	vt_buf_free(&s);
	vt_buf_free(&r);
	vt_pair_destroy(&p);
}

static void rnr_exhausted(int rnr_retry)
{
	char what[128];
	snprintf(what, sizeof(what), "RC SEND with no receive posted, rnr_retry %d", rnr_retry);
	SECTION("%s", what);
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf s;
	vt_cfg_default(&c, IBV_QPT_RC);
	c.rnr_retry = (uint8_t)rnr_retry;
	c.min_rnr_timer = 1; /* 0.01 ms */
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&s, D.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_post_send(p.qp[0], 1, IBV_WR_SEND, s.p, 100, s.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
	vt_post_send(p.qp[0], 2, IBV_WR_RDMA_WRITE, s.p, 100, s.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
	uint64_t t0 = vt_now_ms();
	EXPECT_WC(p.scq[0], 1, IBV_WC_RNR_RETRY_EXC_ERR, VT_ANY_OPCODE, NULL, "%s: sender", what);
	NOTE("RNR_RETRY_EXC_ERR after %" PRIu64 " ms", vt_now_ms() - t0);
	EXPECT_WC(p.scq[0], 2, IBV_WC_WR_FLUSH_ERR, VT_ANY_OPCODE, NULL, "%s: the WR behind it flushes", what);
	seen.n = 0;
	check_flushing(&p, 0, NULL, 0, "sender");
	CHECK_STATE(p.qp[1], IBV_QPS_RTS, 0, "%s: the receiver is not hurt by RNR", what);
	CHECK_CQ_EMPTY(p.rcq[1], 0, "%s: the receiver has no completion", what);
	check_requester_quiet(p.qp[0], what);
	CHECK_INT(seen_for(p.qp[1]), 0, "%s: no async event for the receiver", what);
	vt_buf_free(&s);
	vt_pair_destroy(&p);
}

/* ------------------------------------------------------------------ */
/* bad lkeys                                                            */
/* ------------------------------------------------------------------ */

static void bad_lkey_send(void)
{
	const char *what = "RC SEND from a local SGE with a bad lkey";
	SECTION("%s", what);
	seen.n = 0;
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf s, r;
	vt_cfg_default(&c, IBV_QPT_RC);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&s, D.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&r, D.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_post_recv(p.qp[1], 5, r.p, 4096, r.mr->lkey);
	vt_post_send(p.qp[0], 1, IBV_WR_SEND, s.p, 100, s.mr->lkey ^ 0x5a5a0000, IBV_SEND_SIGNALED, 0, 0, 0);
	vt_post_send(p.qp[0], 2, IBV_WR_SEND, s.p, 100, s.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
	struct ibv_wc wc;
	memset(&wc, 0, sizeof(wc));
	int n = vt_poll(p.scq[0], 1, &wc, VT_TIMEOUT_MS);
	if (n == 1 && wc.wr_id == 1 && wc.status == IBV_WC_LOC_PROT_ERR)
		KNOWN_BUG(
			false,
			"%s: sender completes with IBV_WC_LOC_QP_OP_ERR, as the kernel's rxe reports a bad lkey "
			"(copy_data() -> -EINVAL -> LOC_QP_OP_ERR; DESIGN.md names this very case)\t(got LOC_PROT_ERR)",
			what);
	else
		CHECK(n == 1 && wc.wr_id == 1 && wc.status == IBV_WC_LOC_QP_OP_ERR,
		      "%s: sender completes with IBV_WC_LOC_QP_OP_ERR (as rxe)\t(got %d, wr_id %" PRIu64 ", %s)", what,
		      n, wc.wr_id, vt_status_str(wc.status));
	EXPECT_WC(p.scq[0], 2, IBV_WC_WR_FLUSH_ERR, VT_ANY_OPCODE, NULL, "%s: the SEND behind it flushes", what);
	check_flushing(&p, 0, NULL, 0, "sender");
	CHECK_CQ_EMPTY(p.rcq[1], 100, "%s: nothing reaches the receiver", what);
	CHECK_STATE(p.qp[1], IBV_QPS_RTS, 0, "%s: the receiver is unaffected", what);
	check_requester_quiet(p.qp[0], what);
	vt_buf_free(&s);
	vt_buf_free(&r);
	vt_pair_destroy(&p);
}

static void bad_lkey_recv(void)
{
	const char *what = "RC SEND into a receive SGE with a bad lkey";
	SECTION("%s", what);
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf s, r;
	vt_cfg_default(&c, IBV_QPT_RC);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&s, D.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&r, D.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_fill(s.p, 4096, 1);
	vt_post_recv(p.qp[1], 5, r.p, 4096, r.mr->lkey ^ 0x5a5a0000);
	uint64_t pre[1] = { 6 };
	vt_post_recv(p.qp[1], 6, r.p, 4096, r.mr->lkey);
	vt_post_send(p.qp[0], 1, IBV_WR_SEND, s.p, 100, s.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
	EXPECT_WC(p.scq[0], 1, IBV_WC_REM_OP_ERR, VT_ANY_OPCODE, NULL, "%s: sender (NAK remote operational error)",
		  what);
	EXPECT_WC(p.rcq[1], 5, IBV_WC_LOC_QP_OP_ERR, VT_ANY_OPCODE, NULL, "%s: receiver", what);
	bool zero = true;
	for (int i = 0; i < 4096; i++)
		zero &= r.p[i] == 0;
	CHECK(zero, "%s: nothing written to the receive buffer", what);
	CHECK_GUARDS(&r, "%s", what);
	seen.n = 0;
	check_flushing(&p, 1, pre, 1, "receiver");
	check_flushing(&p, 0, NULL, 0, "sender");
	check_requester_quiet(p.qp[0], what);
	vt_buf_free(&s);
	vt_buf_free(&r);
	vt_pair_destroy(&p);
}

static void bad_lkey_read(void)
{
	const char *what = "RC RDMA_READ into a local SGE with a bad lkey";
	SECTION("%s", what);
	seen.n = 0;
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf l, r;
	vt_cfg_default(&c, IBV_QPT_RC);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&l, D.pd, 8192, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&r, D.pd, 8192, 4096, ACC_ALL);
	vt_fill(r.p, 8192, 9);
	vt_post_send(p.qp[0], 1, IBV_WR_RDMA_READ, l.p, 5000, l.mr->lkey ^ 0x5a5a0000, IBV_SEND_SIGNALED,
		     (uintptr_t)r.p, r.mr->rkey, 0);
	EXPECT_WC(p.scq[0], 1, IBV_WC_LOC_PROT_ERR, VT_ANY_OPCODE, NULL, "%s: requester (rxe: LOC_PROT_ERR)", what);
	bool zero = true;
	for (int i = 0; i < 8192; i++)
		zero &= l.p[i] == 0;
	CHECK(zero, "%s: nothing written locally", what);
	CHECK_GUARDS(&l, "%s", what);
	CHECK_DATA(r.p, 8192, 9, "%s: remote unchanged", what);
	check_flushing(&p, 0, NULL, 0, "requester");
	CHECK_STATE(p.qp[1], IBV_QPS_RTS, 0, "%s: the responder is unaffected", what);
	check_requester_quiet(p.qp[0], what);
	vt_buf_free(&l);
	vt_buf_free(&r);
	vt_pair_destroy(&p);
}

/* An MR deregistered while WRITEs stream into it: ibv_dereg_mr returns only
 * when nothing will be placed into the memory any more. */
static void dereg_during_stream(void)
{
	SECTION("RC: the target MR is deregistered while 64 KiB WRITEs stream into it");
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf s, t;
	vt_cfg_default(&c, IBV_QPT_RC);
	c.max_send_wr = 128;
	if (!vt_pair_setup(&D, &c, &p))
		return;
	enum {
		SZ = 65536,
		SLOTS = 32
	};
	vt_buf_alloc(&s, D.pd, SZ, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&t, D.pd, (size_t)SLOTS * SZ, 4096, ACC_ALL);
	vt_fill(s.p, SZ, 1);
	uint64_t posted = 0, done = 0, okc = 0;
	int acc = 0, flush = 0, other = 0;
	bool gone = false;
	struct ibv_wc wc[64];
	uint64_t end = vt_now_ms() + 20000;
	uint32_t rkey = t.mr->rkey;
	while (vt_now_ms() < end) {
		while (!acc && posted - done < 32) {
			if (vt_post_send(p.qp[0], posted, IBV_WR_RDMA_WRITE, s.p, SZ, s.mr->lkey, IBV_SEND_SIGNALED,
					 (uintptr_t)t.p + (posted % SLOTS) * SZ, rkey, 0))
				break;
			posted++;
		}
		int k = ibv_poll_cq(p.scq[0], 64, wc);
		for (int i = 0; i < k; i++) {
			done++;
			if (wc[i].status == IBV_WC_SUCCESS && !acc)
				okc++;
			else if (wc[i].status == IBV_WC_REM_ACCESS_ERR && !acc)
				acc++;
			else if (wc[i].status == IBV_WC_WR_FLUSH_ERR && acc)
				flush++;
			else
				other++;
		}
		if (!gone && okc >= 50) {
			CHECK_RC(ibv_dereg_mr(t.mr), 0,
				 "ibv_dereg_mr of the target while %" PRIu64 " WRITEs are outstanding", posted - done);
			t.mr = NULL;
			/* from here on nothing may land in it */
			vt_fill(t.p, (size_t)SLOTS * SZ, 0xdead);
			gone = true;
		}
		if (acc && done == posted)
			break;
		if (!k)
			sched_yield();
	}
	CHECK(gone && acc == 1 && other == 0 && done == posted,
	      "the stream ends with one REM_ACCESS_ERR, the WRITEs behind it flush\t(%" PRIu64
	      " ok, %d REM_ACCESS_ERR, "
	      "%d flushed, %d other, %" PRIu64 " of %" PRIu64 ")",
	      okc, acc, flush, other, done, posted);
	CHECK_DATA(t.p, (size_t)SLOTS * SZ, 0xdead, "no byte was written into the memory after ibv_dereg_mr returned");
	CHECK_GUARDS(&t, "the deregistered region");
	int got = wait_qp_event(p.qp[1], 1u << IBV_EVENT_QP_ACCESS_ERR, 3000);
	CHECK(got >= 0, "the responder QP %u gets IBV_EVENT_QP_ACCESS_ERR\t(none within 3 s)", p.qp[1]->qp_num);
	CHECK_STATE(p.qp[1], IBV_QPS_ERR, 3000, "the responder");
	drain_async("dereg during stream");
	vt_buf_free(&s);
	vt_buf_free(&t);
	vt_pair_destroy(&p);
}

/* Memory keys carry random bits, as an RNIC's do (issue 15): a peer that
 * saw some keys cannot tell the next.  Keys used to be (index << 8) |
 * generation: 0x101, 0x202, ... for successive regions; then 14 random
 * bits around the slot index, whose upper bits stayed the same for every
 * region of a small table (issue 41).  Now every bit is random. */
static void keys_unpredictable(void)
{
	SECTION("memory keys are not predictable");
	enum {
		N = 64
	};
	static uint8_t mem[4096];
	struct ibv_mr *mr[N];
	int steps = 0, got = 0;
	uint32_t k_or = 0, k_and = ~0u;

	for (int i = 0; i < N; i++) {
		mr[i] = ibv_reg_mr(D.pd, mem, sizeof(mem), ACC_ALL);
		if (!mr[i])
			break;
		got++;
		k_or |= mr[i]->rkey;
		k_and &= mr[i]->rkey;
		if (i && mr[i]->rkey - mr[i - 1]->rkey == 0x101)
			steps++;
	}
	CHECK_INT(got, N, "%d regions registered", N);
	CHECK(got == N && mr[0]->lkey == mr[0]->rkey, "lkey == rkey");
	CHECK(steps<8, "successive keys do not step by 0x101 (%d of %d did)\tfirst keys 0x%x 0x%x 0x%x", steps, N - 1,
		      got> 2 ?
		      mr[0]->rkey :
		      0,
	      got > 2 ? mr[1]->rkey : 0, got > 2 ? mr[2]->rkey : 0);
	/* 64 random keys leave a given bit unchanged once in 2^63 */
	CHECK(k_or == ~0u && k_and == 0,
	      "each of the 32 key bits varies among %d keys (never set 0x%08x, always set 0x%08x)", got, ~k_or, k_and);
	if (got) {
		uint32_t old = mr[0]->rkey;
		int rc = ibv_rereg_mr(mr[0], IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE);
		CHECK(rc == 0 && mr[0]->rkey == old && mr[0]->lkey == mr[0]->rkey,
		      "ibv_rereg_mr keeps the keys, as rxe (0x%x -> 0x%x)", old, mr[0]->rkey);
	}
	for (int i = 0; i < got; i++)
		ibv_dereg_mr(mr[i]);
}

/* A deregistered region's key must not come back soon: a peer may still
 * hold it (a late request, or a program that deregisters to revoke
 * access), and through it would reach whatever region got the key.  The
 * key table used to hand the lowest free slot out again at once, with
 * 14 fresh random bits: register/deregister churn gave a new region the
 * key just revoked once in ~16,000 (found by an audit).  A key's upper
 * 24 bits (what finds its region) are not handed out again for the next
 * SR_KEY_RETIRED (256) deregistrations. */
static void keys_not_reused(void)
{
	SECTION("a deregistered memory key is not handed out again soon");
	enum {
		CYCLES = 2000,
		WINDOW = 250
	};
	static uint8_t mem[4096];
	static uint32_t tag[CYCLES];
	int got = 0, repeats = 0, first_repeat = -1;

	for (int i = 0; i < CYCLES; i++) {
		struct ibv_mr *mr = ibv_reg_mr(D.pd, mem, sizeof(mem), ACC_ALL);
		if (!mr)
			break;
		tag[i] = mr->rkey >> 8;
		got++;
		ibv_dereg_mr(mr);
		for (int j = i - 1; j >= 0 && j >= i - WINDOW; j--)
			if (tag[j] == tag[i]) {
				repeats++;
				if (first_repeat < 0)
					first_repeat = i;
				break;
			}
	}
	CHECK_INT(got, CYCLES, "%d register/deregister cycles", CYCLES);
	CHECK(repeats == 0, "no key's upper 24 bits came back within %d cycles (%d did, first at cycle %d)", WINDOW,
	      repeats, first_repeat);
}

/* ibv_rereg_mr taking REMOTE_WRITE away: WRITEs through the MR's rkey now
 * fail (and an old rkey, if the keys changed, fails too). */
static void rereg_access(void)
{
	SECTION("RC: ibv_rereg_mr(IBV_REREG_MR_CHANGE_ACCESS) takes REMOTE_WRITE away");
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf s, t;
	vt_cfg_default(&c, IBV_QPT_RC);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&s, D.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&t, D.pd, 4096, 4096, ACC_ALL);
	vt_fill(s.p, 4096, 2);
	vt_post_send(p.qp[0], 1, IBV_WR_RDMA_WRITE, s.p, 100, s.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)t.p, t.mr->rkey,
		     0);
	EXPECT_WC(p.scq[0], 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL, "a WRITE before the re-registration");
	uint32_t old = t.mr->rkey;
	int rc = ibv_rereg_mr(t.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK_RC(rc, 0, "ibv_rereg_mr(CHANGE_ACCESS -> LOCAL_WRITE | REMOTE_READ)");
	memset(t.p, 0, 4096);
	if (t.mr->rkey != old) {
		NOTE("the keys changed (rkey 0x%x -> 0x%x)", old, t.mr->rkey);
		vt_post_send(p.qp[0], 2, IBV_WR_RDMA_READ, s.p + 1000, 100, s.mr->lkey, IBV_SEND_SIGNALED,
			     (uintptr_t)t.p, t.mr->rkey, 0);
		EXPECT_WC(p.scq[0], 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL, "a READ through the new rkey works");
	}
	vt_post_send(p.qp[0], 3, IBV_WR_RDMA_WRITE, s.p, 100, s.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)t.p, t.mr->rkey,
		     0);
	EXPECT_WC(p.scq[0], 3, IBV_WC_REM_ACCESS_ERR, VT_ANY_OPCODE, NULL,
		  "a WRITE through the MR's rkey now fails: REMOTE_WRITE was taken away");
	bool zero = true;
	for (int i = 0; i < 4096; i++)
		zero &= t.p[i] == 0;
	CHECK(zero, "  ...and wrote nothing");
	CHECK_GUARDS(&t, "re-registered region");
	drain_async("rereg");
	vt_buf_free(&s);
	vt_buf_free(&t);
	vt_pair_destroy(&p);
}

/* A QP reset after ERR leaves none of its flushed completions unread, as
 * rdma-core's mlx4/mlx5 providers clean the CQ: rdma-core's own tests
 * reset a QP in ERR and take the next completion for a new one. */
static void reset_cleans_cq(void)
{
	SECTION("RC: RESET drops the QP's unread flush completions");
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf r;
	vt_cfg_default(&c, IBV_QPT_RC);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&r, D.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	for (int i = 0; i < 3; i++)
		vt_post_recv(p.qp[1], 10 + (uint64_t)i, r.p, 100, r.mr->lkey);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	CHECK_RC(ibv_modify_qp(p.qp[1], &a, IBV_QP_STATE), 0, "QP to ERR with three receives posted");
	a.qp_state = IBV_QPS_RESET;
	CHECK_RC(ibv_modify_qp(p.qp[1], &a, IBV_QP_STATE), 0, "then to RESET without polling");
	CHECK_CQ_EMPTY(p.rcq[1], 100, "no flushed receive is left in the CQ");
	vt_buf_free(&r);
	vt_pair_destroy(&p);
}

/* Scatter/gather lists at addresses that are only 4-byte aligned (libiscsi's
 * iSER keeps its receive SGE in a packed descriptor): read as they are,
 * under UBSan too, for ibv_post_recv and ibv_post_send (plain and inline). */
static void misaligned_sge(void)
{
	SECTION("RC: SGE arrays at 4-byte aligned addresses (post_recv, post_send, inline)");
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf s, r;
	_Alignas(16) uint8_t raw[4 + 2 * sizeof(struct ibv_sge)];
	struct ibv_sge *odd = (struct ibv_sge *)(void *)(raw + 4);
	struct ibv_sge g[2];
	vt_cfg_default(&c, IBV_QPT_RC);
	c.max_inline = 256;
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&s, D.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&r, D.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_fill(s.p, 200, 31);
	for (int k = 0; k < 2; k++) {
		/* two SGEs each side: 100 + 100 bytes */
		g[0] = (struct ibv_sge){ (uintptr_t)r.p + (size_t)k * 1024, 100, r.mr->lkey };
		g[1] = (struct ibv_sge){ (uintptr_t)r.p + (size_t)k * 1024 + 100, 100, r.mr->lkey };
		memcpy(odd, g, sizeof(g));
		struct ibv_recv_wr rw = { .wr_id = 50 + (uint64_t)k, .sg_list = odd, .num_sge = 2 }, *rbad;
		CHECK_RC(ibv_post_recv(p.qp[1], &rw, &rbad), 0, "post_recv with a misaligned SGE list");
		g[0] = (struct ibv_sge){ (uintptr_t)s.p, 100, s.mr->lkey };
		g[1] = (struct ibv_sge){ (uintptr_t)s.p + 100, 100, s.mr->lkey };
		memcpy(odd, g, sizeof(g));
		struct ibv_send_wr sw = { .wr_id = 60 + (uint64_t)k,
					  .sg_list = odd,
					  .num_sge = 2,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED | (k ? IBV_SEND_INLINE : 0) },
				   *sbad;
		CHECK_RC(ibv_post_send(p.qp[0], &sw, &sbad), 0, "post_send%s with a misaligned SGE list",
			 k ? " (inline)" : "");
		EXPECT_WC(p.scq[0], 60 + (uint64_t)k, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "its send completion");
		EXPECT_WC(p.rcq[1], 50 + (uint64_t)k, IBV_WC_SUCCESS, IBV_WC_RECV, NULL, "its receive");
		CHECK(!memcmp(r.p + (size_t)k * 1024, s.p, 200), "the 200 bytes arrived in the two receive SGEs");
	}
	vt_buf_free(&s);
	vt_buf_free(&r);
	vt_pair_destroy(&p);
}

/* A UD receive whose registered buffer the application has unmapped (UCX
 * frees its receive buffers before it destroys their QP; a NIC writes into
 * the pages the kernel still pins): the receive fails as one that cannot
 * be written does in rxe (LOC_QP_OP_ERR, the QP to ERR) and the process
 * lives on. */
static void ud_unmapped_receive(void)
{
	SECTION("UD: a datagram for a receive whose registered buffer was unmapped");
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf s;
	struct ibv_wc wc;
	vt_cfg_default(&c, IBV_QPT_UD);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&s, D.pd, 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_fill(s.p, 64, 7);
	struct ibv_mr *mr;
	uint8_t *m = vt_mmap_reg(D.pd, 8192, IBV_ACCESS_LOCAL_WRITE, &mr, "UD");
	if (m) {
		CHECK_RC(vt_post_recv(p.qp[1], 70, m, 1024, mr->lkey), 0, "a receive posted into it");
		CHECK_RC(vt_post_recv(p.qp[1], 71, m + 4096, 1024, mr->lkey), 0, "and a second one");
		CHECK_RC(munmap(m, 8192), 0, "the buffer unmapped, its MR still registered");
		CHECK_RC(vt_post_ud_send(p.qp[0], 80, s.p, 64, s.mr->lkey, IBV_SEND_SIGNALED, p.ah[0], p.qp[1]->qp_num,
					 c.qkey),
			 0, "a datagram sent to it");
		EXPECT_WC(p.scq[0], 80, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "the send completes");
		if (EXPECT_WC(p.rcq[1], 70, IBV_WC_LOC_QP_OP_ERR, IBV_WC_RECV, &wc,
			      "the receive fails with LOC_QP_OP_ERR (the process lives)"))
			CHECK_INT(wc.byte_len, 0, "  ...byte_len");
		EXPECT_WC(p.rcq[1], 71, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, NULL,
			  "  ...the QP is in ERR: the second flushes");
		CHECK_RC(ibv_dereg_mr(mr), 0, "the MR deregisters after");
	}
	vt_buf_free(&s);
	vt_pair_destroy(&p);
}

/* RC: a peer's WRITE (one packet and several), READ, atomic and SEND aimed
 * at registered memory the application has unmapped.  A NIC would reach
 * the pages the kernel still pins; softrdma cannot pin, and its copy used
 * to fault and kill the process.  Now each fails as for a bad key (the
 * memory guard, src/core/guard.h): the requester gets an error completion
 * and the process lives on. */
static void rc_unmapped_target(void)
{
	static const struct {
		const char *what;
		enum ibv_wr_opcode op;
		uint32_t len;
		enum ibv_wc_status want;
	} t[] = {
		{ "a 100-byte WRITE", IBV_WR_RDMA_WRITE, 100, IBV_WC_REM_ACCESS_ERR },
		{ "an 8 KiB WRITE (several packets)", IBV_WR_RDMA_WRITE, 8192, IBV_WC_REM_ACCESS_ERR },
		{ "a 6000-byte READ", IBV_WR_RDMA_READ, 6000, IBV_WC_REM_ACCESS_ERR },
		{ "a FETCH_AND_ADD", IBV_WR_ATOMIC_FETCH_AND_ADD, 8, IBV_WC_REM_ACCESS_ERR },
		{ "a 200-byte SEND into a posted receive", IBV_WR_SEND, 200, IBV_WC_REM_OP_ERR },
	};

	SECTION("RC: WRITE, READ, atomic and SEND aimed at registered memory the application unmapped");
#ifdef SR_TSAN
	NOTE("not in a ThreadSanitizer build: the memory guard is off there (src/core/guard.c)");
	return;
#endif
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct vt_qp_cfg c;
		struct vt_pair p;
		struct vt_buf s;
		struct ibv_wc wc;
		vt_cfg_default(&c, IBV_QPT_RC);
		if (!vt_pair_setup(&D, &c, &p))
			return;
		vt_buf_alloc(&s, D.pd, 16384, 4096, IBV_ACCESS_LOCAL_WRITE);
		vt_fill(s.p, 16384, 9);
		struct ibv_mr *mr;
		uint8_t *m = vt_mmap_reg(D.pd, 16384, ACC_ALL, &mr, t[i].what);
		if (!m) {
			vt_buf_free(&s);
			vt_pair_destroy(&p);
			return;
		}
		if (t[i].op == IBV_WR_SEND)
			CHECK_RC(vt_post_recv(p.qp[1], 90, m + 4096, 4096, mr->lkey), 0, "%s: the receive posted",
				 t[i].what);
		vt_unmap_reserved(m, 16384, t[i].what);
		int rc;
		if (t[i].op == IBV_WR_ATOMIC_FETCH_AND_ADD)
			rc = vt_post_atomic(p.qp[0], 91, t[i].op, s.p, s.mr->lkey, IBV_SEND_SIGNALED,
					    (uintptr_t)m + 4096, mr->rkey, 1, 0);
		else
			rc = vt_post_send(p.qp[0], 91, t[i].op, s.p, t[i].len, s.mr->lkey, IBV_SEND_SIGNALED,
					  (uintptr_t)m + 4096, mr->rkey, 0);
		CHECK_RC(rc, 0, "%s: posted", t[i].what);
		EXPECT_WC(p.scq[0], 91, t[i].want, VT_ANY_OPCODE, NULL, "%s fails with %s (the process lives)",
			  t[i].what, ibv_wc_status_str(t[i].want));
		if (t[i].op == IBV_WR_SEND)
			EXPECT_WC(p.rcq[1], 90, IBV_WC_LOC_QP_OP_ERR, VT_ANY_OPCODE, &wc,
				  "  ...and the receive fails here");
		CHECK_RC(ibv_dereg_mr(mr), 0, "%s: the MR deregisters after", t[i].what);
		munmap(m, 16384);
		drain_async("unmapped target");
		vt_buf_free(&s);
		vt_pair_destroy(&p);
	}
}

/* The application moves a QP to ERR while WRITEs are in flight: every WR
 * completes (the finished ones successfully, the rest flushed), in order. */
static void app_error_in_flight(void)
{
	SECTION("RC: the application moves the requester to ERR with 8 x 1 MiB WRITEs in flight");
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf s, t;
	vt_cfg_default(&c, IBV_QPT_RC);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&s, D.pd, 1 << 20, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&t, D.pd, 8 << 20, 4096, ACC_ALL);
	vt_fill(s.p, 1 << 20, 12);
	int err = 0;
	for (int i = 0; i < 8; i++)
		err |= vt_post_send(p.qp[0], (uint64_t)i, IBV_WR_RDMA_WRITE, s.p, 1 << 20, s.mr->lkey,
				    IBV_SEND_SIGNALED, (uintptr_t)t.p + ((size_t)i << 20), t.mr->rkey, 0);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	CHECK_RC(err | ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE), 0, "post them, then modify the QP to ERR at once");
	struct ibv_wc wc[8];
	int n = vt_poll(p.scq[0], 8, wc, VT_TIMEOUT_MS);
	int ok = 0, fl = 0, bad = 0;
	for (int i = 0; i < n; i++) {
		if (wc[i].wr_id != (uint64_t)i)
			bad++;
		else if (wc[i].status == IBV_WC_SUCCESS && !fl)
			ok++;
		else if (wc[i].status == IBV_WC_WR_FLUSH_ERR)
			fl++;
		else
			bad++;
	}
	CHECK(n == 8 && !bad, "8 completions in order: successes, then WR_FLUSH_ERR\t(%d: %d ok, %d flushed, %d bad)",
	      n, ok, fl, bad);
	NOTE("%d completed before the error, %d flushed", ok, fl);
	/* (packets sent before the transition may still land: they are on the
	 * wire, the responder is fine; only the completed WRITEs are checked) */
	vt_sleep_ms(50);
	for (int i = 0; i < ok; i++)
		CHECK_DATA(t.p + ((size_t)i << 20), 1 << 20, 12, "WRITE %d that completed successfully", i);
	CHECK_STATE(p.qp[1], IBV_QPS_RTS, 0, "the responder (nothing wrong on its side)");
	check_flushing(&p, 0, NULL, 0, "requester moved to ERR");
	drain_async("app error");
	vt_buf_free(&s);
	vt_buf_free(&t);
	vt_pair_destroy(&p);
}

/* A QP that receives through an SRQ goes to ERR: IBV_EVENT_QP_LAST_WQE_REACHED
 * for it (IBTA 10.3.1; rxe flush_recv_queue), the SRQ's receives are not
 * flushed, and another QP on the SRQ keeps receiving. */
static void srq_qp_error(void)
{
	SECTION("RC: a QP on an SRQ goes to ERR; the SRQ and its other QP carry on");
	struct ibv_srq_init_attr sa;
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 16;
	sa.attr.max_sge = 1;
	struct ibv_srq *srq = ibv_create_srq(D.pd, &sa);
	if (!CHECK(srq, "ibv_create_srq"))
		return;
	struct vt_qp_cfg c;
	struct vt_pair p[2];
	struct vt_buf b;
	vt_cfg_default(&c, IBV_QPT_RC);
	c.srq[1] = srq;
	if (!vt_pair_setup(&D, &c, &p[0]) || !vt_pair_setup(&D, &c, &p[1]))
		return;
	vt_buf_alloc(&b, D.pd, 8 * 1024, 4096, IBV_ACCESS_LOCAL_WRITE);
	for (int i = 0; i < 4; i++)
		vt_post_srq_recv(srq, (uint64_t)i, b.p + i * 1024, 1024, b.mr->lkey);
	drain_async("before");
	seen.n = 0;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	CHECK_RC(ibv_modify_qp(p[0].qp[1], &a, IBV_QP_STATE), 0, "move the first SRQ QP to ERR");
	int got = wait_qp_event(p[0].qp[1], 1u << IBV_EVENT_QP_LAST_WQE_REACHED, 3000);
	CHECK(got == IBV_EVENT_QP_LAST_WQE_REACHED, "IBV_EVENT_QP_LAST_WQE_REACHED for it");
	CHECK_CQ_EMPTY(p[0].rcq[1], 100, "the SRQ's receives are not flushed to the failed QP's CQ");
	vt_post_send(p[1].qp[0], 7, IBV_WR_SEND, b.p + 6000, 100, b.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
	struct ibv_wc wc;
	int n = vt_poll(p[1].rcq[1], 1, &wc, VT_TIMEOUT_MS);
	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id < 4 && wc.qp_num == p[1].qp[1]->qp_num,
	      "the other QP on the SRQ still receives from it\t(%d, %s)", n, n ? vt_status_str(wc.status) : "-");
	EXPECT_WC(p[1].scq[0], 7, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "  ...sender");
	drain_async("srq qp error");
	vt_pair_destroy(&p[0]);
	vt_pair_destroy(&p[1]);
	CHECK_RC(ibv_destroy_srq(srq), 0, "ibv_destroy_srq");
	vt_buf_free(&b);
}

/* A CQ destroyed while its completion-channel event and its CQ_ERR async
 * event are still unread: the kernel drops both (uverbs releases a
 * destroyed CQ's pending events), so neither can name the freed CQ. */
static void cq_destroyed_with_events(void)
{
	SECTION("a CQ destroyed with an unread completion event and an unread CQ_ERR event");
	struct ibv_comp_channel *ch = ibv_create_comp_channel(D.ctx);
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf t;
	drain_async("before");
	vt_cfg_default(&c, IBV_QPT_RC);
	c.ch = ch;
	c.cqe = 4;
	if (!ch || !vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&t, D.pd, 4096, 4096, ACC_ALL);
	struct ibv_cq *cq = p.scq[0];
	CHECK_RC(ibv_req_notify_cq(cq, 0), 0, "arm the send CQ");
	int n = cq->cqe + 4;
	for (int i = 0; i < n; i++)
		vt_post_send(p.qp[0], (uint64_t)i, IBV_WR_RDMA_WRITE, t.p, 8, t.mr->lkey, IBV_SEND_SIGNALED,
			     (uintptr_t)t.p + 64, t.mr->rkey, 0);
	/* let everything complete (and overflow) without reading anything */
	struct pollfd pf = { .fd = ch->fd, .events = POLLIN };
	int ready = poll(&pf, 1, 5000);
	CHECK(ready == 1, "the completion event is on the channel (not read)");
	vt_sleep_ms(100);
	vt_pair_destroy(&p); /* QPs and CQs go, the events unread */
	vt_buf_free(&t);
	pf.revents = 0;
	ready = poll(&pf, 1, 100);
	KNOWN_BUG(ready == 0,
		  "after ibv_destroy_cq the channel holds no event for it\t(the channel fd is still readable: "
		  "ibv_get_cq_event would return the freed CQ and read its cq_context from freed memory)");
	struct ibv_async_event ev;
	int stale = 0;
	while (vt_get_async(D.ctx, &ev, 100))
		if (ev.event_type == IBV_EVENT_CQ_ERR && (void *)ev.element.cq == (void *)cq)
			stale++;
	KNOWN_BUG(stale == 0,
		  "after ibv_destroy_cq no IBV_EVENT_CQ_ERR names it\t(got %d: element.cq is the freed CQ; "
		  "sr_destroy_cq does not purge the CQ's events as sr_destroy_qp now does for QPs)",
		  stale);
	if (ready == 1) {
		/* empty the channel without touching the stale pointer (raw read of its token) */
		char junk[64];
		ssize_t r = read(ch->fd, junk, sizeof(junk));
		(void)r;
	}
	CHECK_RC(ibv_destroy_comp_channel(ch), 0, "ibv_destroy_comp_channel");
}

/* More completions than the CQ holds: IBV_EVENT_CQ_ERR. */
static void cq_overflow(void)
{
	SECTION("a send CQ that overflows raises IBV_EVENT_CQ_ERR");
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf t;
	vt_cfg_default(&c, IBV_QPT_RC);
	c.cqe = 4;
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&t, D.pd, 4096, 4096, ACC_ALL);
	int n = p.scq[0]->cqe + 4, err = 0;
	for (int i = 0; i < n; i++)
		err |= vt_post_send(p.qp[0], (uint64_t)i, IBV_WR_RDMA_WRITE, t.p, 8, t.mr->lkey, IBV_SEND_SIGNALED,
				    (uintptr_t)t.p + 64, t.mr->rkey, 0);
	CHECK_RC(err, 0, "post %d signaled WRITEs on a QP whose send CQ holds %d", n, p.scq[0]->cqe);
	uint64_t end = vt_now_ms() + 5000;
	struct ibv_async_event ev;
	bool got = false;
	while (!got && vt_now_ms() < end)
		if (vt_get_async(D.ctx, &ev, 100)) {
			if (ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == p.scq[0])
				got = true;
			else
				NOTE("async event %s", ibv_event_type_str(ev.event_type));
		}
	CHECK(got, "IBV_EVENT_CQ_ERR for the overflowing CQ");
	struct ibv_wc wc[16];
	int k = vt_poll(p.scq[0], 16, wc, 200);
	CHECK(k >= 1 && wc[0].wr_id == 0 && wc[0].status == IBV_WC_SUCCESS,
	      "the completions that fit are there, starting with the first\t(polled %d)", k);
	drain_async("cq overflow");
	vt_buf_free(&t);
	vt_pair_destroy(&p);
}

/* Events the application has not read yet when it destroys the QP they are
 * about: the kernel drops them (uverbs discards a destroyed object's
 * pending events), so no event can name a QP that no longer exists. */
static void async_after_destroy(void)
{
	SECTION("async events still queued for a QP when it is destroyed");
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf b;
	drain_async("before");
	vt_cfg_default(&c, IBV_QPT_RC);
	if (!vt_pair_setup(&D, &c, &p))
		return;
	vt_buf_alloc(&b, D.pd, 4096, 4096, ACC_ALL);
	vt_post_send(p.qp[0], 1, IBV_WR_RDMA_WRITE, b.p, 100, b.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)b.p,
		     b.mr->rkey ^ 0x5a5a0000, 0);
	EXPECT_WC(p.scq[0], 1, IBV_WC_REM_ACCESS_ERR, VT_ANY_OPCODE, NULL, "a WRITE with a bad rkey fails");
	CHECK_STATE(p.qp[1], IBV_QPS_ERR, 5000, "the responder");
	struct ibv_qp *gone[2] = { p.qp[0], p.qp[1] };
	vt_pair_destroy(&p); /* with the error events unread */
	vt_buf_free(&b);
	struct ibv_async_event ev;
	int stale = 0, other = 0;
	while (vt_get_async(D.ctx, &ev, 200)) {
		bool qp_ev = (ev.event_type >= IBV_EVENT_QP_FATAL && ev.event_type <= IBV_EVENT_PATH_MIG_ERR) ||
			     ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED;
		if (qp_ev && (ev.element.qp == gone[0] || ev.element.qp == gone[1]))
			stale++;
		else
			other++;
	}
	KNOWN_BUG(stale == 0,
		  "after ibv_destroy_qp no async event names the destroyed QP (rdma-core/uverbs discard a destroyed "
		  "object's unread events, and ibv_destroy_qp waits for read ones to be acked)\t(got %d events whose "
		  "element.qp is a freed QP: reading element.qp->qp_num is a use-after-free)",
		  stale);
	if (other)
		NOTE("%d other async events", other);
}

/* ------------------------------------------------------------------ */
/* the peer goes away                                                   */
/* ------------------------------------------------------------------ */

static void peer_destroyed(void)
{
	SECTION("RC: the peer QP is destroyed while 64 KiB WRITEs stream to it (timeout 12, retry_cnt 2)");
	seen.n = 0;
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf s, r;
	vt_cfg_default(&c, IBV_QPT_RC);
	c.timeout = 12; /* 16.8 ms: small, yet no spurious give-up on a loaded machine */
	c.retry_cnt = 2;
	c.max_send_wr = 128;
	if (!vt_pair_setup(&D, &c, &p))
		return;
	enum {
		SZ = 65536,
		SLOTS = 64
	};
	vt_buf_alloc(&s, D.pd, SZ, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&r, D.pd, (size_t)SLOTS * SZ, 4096, ACC_ALL);
	vt_fill(s.p, SZ, 5);
	/* keep 32 WRITEs outstanding; destroy the peer after 100 have completed */
	uint64_t posted = 0, done = 0, okc = 0, t_kill = 0, t_err = 0, next_id = 0;
	int exc = 0, flush = 0, other = 0, order = 0;
	bool destroyed = false;
	uint64_t end = vt_now_ms() + 20000;
	struct ibv_wc wc[64];
	while (vt_now_ms() < end) {
		while (!exc && posted - done < 32) {
			if (vt_post_send(p.qp[0], posted, IBV_WR_RDMA_WRITE, s.p, SZ, s.mr->lkey, IBV_SEND_SIGNALED,
					 (uintptr_t)r.p + (posted % SLOTS) * SZ, r.mr->rkey, 0))
				break;
			posted++;
		}
		int k = ibv_poll_cq(p.scq[0], 64, wc);
		for (int i = 0; i < k; i++) {
			done++;
			if (wc[i].wr_id != next_id++)
				order++;
			if (wc[i].status == IBV_WC_SUCCESS && !exc)
				okc++;
			else if (wc[i].status == IBV_WC_RETRY_EXC_ERR && !exc) {
				exc++;
				t_err = vt_now_ms();
			} else if (wc[i].status == IBV_WC_WR_FLUSH_ERR && exc)
				flush++;
			else
				other++;
		}
		if (!destroyed && okc >= 100) {
			CHECK_RC(ibv_destroy_qp(p.qp[1]), 0,
				 "destroy the peer QP in the middle of the stream (%" PRIu64 " WRITEs done, %" PRIu64
				 " outstanding)",
				 okc, posted - done);
			p.qp[1] = NULL;
			t_kill = vt_now_ms();
			destroyed = true;
		}
		if (exc && done == posted)
			break;
		if (!k)
			sched_yield();
	}
	if (!destroyed && exc)
		CHECK(0,
		      "the live peer kept up: the QP gave up (RETRY_EXC_ERR) before the peer was destroyed, after %" PRIu64
		      " WRITEs",
		      okc);
	CHECK(destroyed && exc == 1 && other == 0 && order == 0 && done == posted,
	      "the stream ends with one RETRY_EXC_ERR, then the WRITEs behind it flush, all in order\t(%" PRIu64
	      " ok, %d RETRY_EXC_ERR, %d flushed, %d other, %d out of order, %" PRIu64 " of %" PRIu64 " completed)",
	      okc, exc, flush, other, order, done, posted);
	if (exc)
		NOTE("RETRY_EXC_ERR %" PRIu64 " ms after the destroy", t_err - t_kill);
	CHECK(exc && t_err - t_kill < 10000, "the error arrives within 10 s");
	CHECK_STATE(p.qp[0], IBV_QPS_ERR, 1000, "the surviving QP");
	CHECK_GUARDS(&r, "the destroyed QP's target region");
	check_requester_quiet(p.qp[0], "peer QP destroyed");
	vt_buf_free(&s);
	vt_buf_free(&r);
	vt_pair_destroy(&p);
}

/* 50 times: connect a pair, blast traffic both ways, destroy both QPs from
 * another thread while the main thread polls (and so drives delivery). */
struct destroyer {
	struct vt_pair *p;
	unsigned delay_us;
	int order;
	int rc[2];
	bool done; /* atomic */
};

static void *destroy_thread(void *arg)
{
	struct destroyer *d = arg;
	vt_sleep_us(d->delay_us);
	for (int k = 0; k < 2; k++) {
		int i = d->order ? 1 - k : k;
		d->rc[i] = ibv_destroy_qp(d->p->qp[i]);
	}
	__atomic_store_n(&d->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static void destroy_cycles(void)
{
	enum {
		CYCLES = 50
	};
	SECTION("RC: %d cycles of create/connect/blast/destroy, the destroy in another thread", CYCLES);
	struct vt_buf a, b;
	vt_buf_alloc(&a, D.pd, 1 << 20, 4096, ACC_ALL);
	vt_buf_alloc(&b, D.pd, 1 << 20, 4096, ACC_ALL);
	vt_fill(a.p, 1 << 20, 1);
	vt_fill(b.p, 1 << 20, 2);
	uint64_t t0 = vt_now_ms();
	int bad_destroy = 0, bad_first = 0, failed_setup = 0;
	uint64_t worst = 0;
	for (int cy = 0; cy < CYCLES; cy++) {
		uint64_t c0 = vt_now_ms();
		struct vt_qp_cfg c;
		struct vt_pair p;
		vt_cfg_default(&c, IBV_QPT_RC);
		c.max_send_wr = 64;
		c.max_recv_wr = 64;
		c.timeout = 12;
		c.retry_cnt = 3;
		if (!vt_pair_setup(&D, &c, &p)) {
			failed_setup++;
			break;
		}
		/* first a verified SEND: the new pair works */
		uint8_t *chk = b.p + (1 << 20) - 4096;
		memset(chk, 0, 4096);
		vt_post_recv(p.qp[1], 1, chk, 4096, b.mr->lkey);
		vt_post_send(p.qp[0], 1, IBV_WR_SEND, a.p + cy * 64, 4096, a.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
		struct ibv_wc w;
		if (vt_poll(p.rcq[1], 1, &w, VT_TIMEOUT_MS) != 1 || w.status != IBV_WC_SUCCESS ||
		    memcmp(chk, a.p + cy * 64, 4096))
			bad_first++;
		vt_poll(p.scq[0], 1, &w, VT_TIMEOUT_MS);
		/* blast: WRITEs both ways, SENDs into posted receives */
		for (int i = 0; i < 16; i++) {
			vt_post_send(p.qp[0], 100 + (uint64_t)i, IBV_WR_RDMA_WRITE, a.p + i * 65536, 65536, a.mr->lkey,
				     i % 4 == 3 ? IBV_SEND_SIGNALED : 0, (uintptr_t)b.p + (uint64_t)i * 65536,
				     b.mr->rkey, 0);
			vt_post_send(p.qp[1], 200 + (uint64_t)i, IBV_WR_RDMA_WRITE, b.p + i * 32768, 32768, b.mr->lkey,
				     IBV_SEND_SIGNALED, (uintptr_t)a.p + (uint64_t)i * 32768, a.mr->rkey, 0);
		}
		for (int i = 0; i < 8; i++) {
			vt_post_recv(p.qp[1], 300 + (uint64_t)i, b.p + 900000 + i * 8192, 8192, b.mr->lkey);
			vt_post_send(p.qp[0], 400 + (uint64_t)i, IBV_WR_SEND, a.p + i * 8192, 8192, a.mr->lkey,
				     IBV_SEND_SIGNALED, 0, 0, 0);
			vt_post_send(p.qp[1], 500 + (uint64_t)i, IBV_WR_RDMA_READ, b.p + 800000, 4096, b.mr->lkey,
				     IBV_SEND_SIGNALED, (uintptr_t)a.p + 500000, a.mr->rkey, 0);
		}
		struct destroyer d = { .p = &p, .delay_us = vt_rand(3000), .order = (int)vt_rand(2) };
		pthread_t th;
		pthread_create(&th, NULL, destroy_thread, &d);
		while (!__atomic_load_n(&d.done, __ATOMIC_ACQUIRE)) {
			struct ibv_wc wc[16];
			for (int i = 0; i < 2; i++) {
				ibv_poll_cq(p.scq[i], 16, wc);
				ibv_poll_cq(p.rcq[i], 16, wc);
			}
			sched_yield();
		}
		pthread_join(th, NULL);
		if (d.rc[0] || d.rc[1])
			bad_destroy++;
		p.qp[0] = p.qp[1] = NULL;
		vt_pair_destroy(&p);
		uint64_t dt = vt_now_ms() - c0;
		if (dt > worst)
			worst = dt;
	}
	CHECK(!failed_setup, "every cycle could create and connect a pair");
	CHECK(!bad_first, "in every cycle the new pair carried a verified SEND before the blast\t(%d cycles failed)",
	      bad_first);
	CHECK(!bad_destroy, "every ibv_destroy_qp returned 0\t(%d cycles failed)", bad_destroy);
	NOTE("%d cycles in %" PRIu64 " ms, the slowest %" PRIu64 " ms", CYCLES, vt_now_ms() - t0, worst);
	CHECK_GUARDS(&a, "blast region A");
	CHECK_GUARDS(&b, "blast region B");
	drain_async("destroy cycles");

	/* and the device still works */
	struct vt_qp_cfg c;
	struct vt_pair p;
	vt_cfg_default(&c, IBV_QPT_RC);
	if (vt_pair_setup(&D, &c, &p)) {
		vt_fill(a.p, 1 << 20, 77);
		memset(b.p, 0, 1 << 20);
		vt_post_send(p.qp[0], 1, IBV_WR_RDMA_WRITE, a.p, 1 << 20, a.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)b.p,
			     b.mr->rkey, 0);
		EXPECT_WC(p.scq[0], 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL, "after the cycles: a 1 MiB WRITE");
		CHECK_DATA(b.p, 1 << 20, 77, "after the cycles: the WRITE's data");
		vt_pair_destroy(&p);
	}
	vt_buf_free(&a);
	vt_buf_free(&b);
}

/* ------------------------------------------------------------------ */
/* a peer process killed                                                */
/* ------------------------------------------------------------------ */

struct peer_info {
	uint32_t qpn, rkey;
	uint64_t addr, len;
	uint32_t psn;
};

static bool xwrite(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t r = write(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		b += r;
		n -= (size_t)r;
	}
	return true;
}

static bool xread(int fd, void *p, size_t n, int timeout_ms)
{
	uint8_t *b = p;
	uint64_t end = vt_now_ms() + (uint64_t)timeout_ms;
	while (n) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int left = (int)(end - vt_now_ms());
		if (left <= 0 || poll(&pfd, 1, left) <= 0)
			return false;
		ssize_t r = read(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		b += r;
		n -= (size_t)r;
	}
	return true;
}

/* The child: the other end of the connection. */
static int peer_child(int rfd, int wfd)
{
	struct vt_dev d;
	vt_name = "test_errors (peer child)";
	if (!vt_open(&d))
		return 2;
	struct vt_qp_cfg c;
	vt_cfg_default(&c, IBV_QPT_RC);
	struct ibv_cq *cq = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = ia.recv_cq = cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	struct ibv_qp *qp = cq ? ibv_create_qp(d.pd, &ia) : NULL;
	size_t len = 4u << 20;
	void *mem = NULL;
	if (posix_memalign(&mem, 4096, len))
		return 2;
	memset(mem, 0, len);
	struct ibv_mr *mr = ibv_reg_mr(d.pd, mem, len, ACC_ALL);
	if (!qp || !mr)
		return 2;
	struct peer_info me = { qp->qp_num, mr->rkey, (uintptr_t)mem, len, 0x123456 }, parent;
	if (!xwrite(wfd, &me, sizeof(me)) || !xread(rfd, &parent, sizeof(parent), 20000))
		return 3;
	c.psn[0] = me.psn;
	c.psn[1] = parent.psn;
	if (vt_qp_connect(qp, &c, IBV_QPS_RTS, parent.qpn, parent.psn, me.psn, &d.gid, d.gid_index))
		return 4;
	char ok = 'R';
	xwrite(wfd, &ok, 1);
	/* wait for "check": the parent wrote seed 7 into the first 1 MiB */
	char cmd;
	if (!xread(rfd, &cmd, 1, 20000))
		return 5;
	ok = vt_verify(mem, 1 << 20, 7) < 0 ? 'Y' : 'N';
	xwrite(wfd, &ok, 1);
	/* sleep until killed; the progress thread answers the stream */
	for (;;)
		pause();
	return 0;
}

static void peer_process_killed(const char *self)
{
	SECTION("RC: a peer process is SIGKILLed while 64 KiB WRITEs stream to it");
	seen.n = 0;
	int up[2], down[2];
	if (pipe(up) || pipe(down)) {
		CHECK(0, "pipes");
		return;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		char a[16], b[16];
		close(up[0]);
		close(down[1]);
		snprintf(a, sizeof(a), "%d", down[0]);
		snprintf(b, sizeof(b), "%d", up[1]);
		execl(self, self, "--peer", a, b, (char *)NULL);
		_exit(127);
	}
	close(up[1]);
	close(down[0]);
	if (!CHECK(pid > 0, "fork() a peer process")) {
		return;
	}
	struct peer_info child;
	bool have = xread(up[0], &child, sizeof(child), 20000);
	if (!CHECK(have, "the peer process (pid %d) opened the device and sent its QPN, rkey and address", (int)pid)) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return;
	}
	NOTE("peer QPN %u, rkey 0x%x, %" PRIu64 " bytes at 0x%" PRIx64, child.qpn, child.rkey, child.len, child.addr);
	struct vt_qp_cfg c;
	vt_cfg_default(&c, IBV_QPT_RC);
	c.timeout = 12; /* 16.8 ms */
	c.retry_cnt = 3;
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 256, NULL, NULL, 0);
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = ia.recv_cq = cq;
	ia.cap.max_send_wr = 128;
	ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	struct ibv_qp *qp = ibv_create_qp(D.pd, &ia);
	struct vt_buf s;
	vt_buf_alloc(&s, D.pd, 1 << 20, 4096, IBV_ACCESS_LOCAL_WRITE);
	vt_fill(s.p, 1 << 20, 7);
	struct peer_info me = { qp ? qp->qp_num : 0, 0, 0, 0, 0x654321 };
	xwrite(down[1], &me, sizeof(me));
	c.psn[0] = me.psn;
	int err = qp ? vt_qp_connect(qp, &c, IBV_QPS_RTS, child.qpn, child.psn, me.psn, &D.gid, D.gid_index) : -1;
	char r = 0;
	bool ready = xread(up[0], &r, 1, 20000) && r == 'R';
	if (CHECK(qp && !err && ready, "both ends connected across processes")) {
		/* 1 MiB in 16 x 64 KiB, verified by the child */
		for (int i = 0; i < 16; i++)
			vt_post_send(qp, (uint64_t)i, IBV_WR_RDMA_WRITE, s.p + i * 65536, 65536, s.mr->lkey,
				     IBV_SEND_SIGNALED, child.addr + (uint64_t)i * 65536, child.rkey, 0);
		struct ibv_wc wc[128];
		int n = vt_poll(cq, 16, wc, VT_TIMEOUT_MS);
		bool ok = n == 16;
		for (int i = 0; i < n; i++)
			ok &= wc[i].status == IBV_WC_SUCCESS;
		CHECK(ok, "16 x 64 KiB WRITEs into the other process complete\t(got %d)", n);
		char cmd = 'C', verdict = 0;
		xwrite(down[1], &cmd, 1);
		CHECK(xread(up[0], &verdict, 1, 20000) && verdict == 'Y',
		      "the other process finds the 1 MiB it was sent intact\t(verdict %c)", verdict ? verdict : '?');
		/* stream: keep 32 WRITEs outstanding; kill the child after 40 more */
		uint64_t posted = 0, done = 0, okc = 0, t_kill = 0, t_err = 0;
		int exc = 0, flush = 0, other = 0;
		bool killed = false;
		uint64_t end = vt_now_ms() + 20000;
		while (vt_now_ms() < end) {
			while (!exc && posted - done < 32) {
				if (vt_post_send(qp, 1000 + posted, IBV_WR_RDMA_WRITE, s.p, 65536, s.mr->lkey,
						 IBV_SEND_SIGNALED, child.addr + (posted % 64) * 65536, child.rkey, 0))
					break;
				posted++;
			}
			int k = ibv_poll_cq(cq, 128, wc);
			for (int i = 0; i < k; i++) {
				done++;
				if (wc[i].status == IBV_WC_SUCCESS && !exc)
					okc++;
				else if (wc[i].status == IBV_WC_RETRY_EXC_ERR && !exc) {
					exc++;
					t_err = vt_now_ms();
				} else if (wc[i].status == IBV_WC_WR_FLUSH_ERR && exc)
					flush++;
				else
					other++;
			}
			if (!killed && okc >= 40) {
				kill(pid, SIGKILL);
				waitpid(pid, NULL, 0);
				t_kill = vt_now_ms();
				killed = true;
			}
			if (exc && done == posted)
				break;
			if (!k)
				sched_yield();
		}
		CHECK(killed, "the peer was killed mid-stream (after %" PRIu64 " completed WRITEs)", okc);
		CHECK(exc == 1 && other == 0 && done == posted,
		      "the stream ends with one RETRY_EXC_ERR, the WRITEs behind it flush\t(%" PRIu64 " ok, %d "
		      "RETRY_EXC_ERR, %d flushed, %d other, %" PRIu64 " of %" PRIu64 " completed)",
		      okc, exc, flush, other, done, posted);
		if (exc)
			NOTE("RETRY_EXC_ERR %" PRIu64 " ms after SIGKILL (timeout 12, retry_cnt 3)", t_err - t_kill);
		CHECK(exc && t_err - t_kill < 10000, "the error comes within 10 s of the kill");
		CHECK_STATE(qp, IBV_QPS_ERR, 1000, "the surviving QP");
	}
	kill(pid, SIGKILL); /* in case the stream never got that far */
	waitpid(pid, NULL, 0);
	if (qp)
		check_requester_quiet(qp, "peer process killed");
	if (qp)
		CHECK_RC(ibv_destroy_qp(qp), 0, "destroy the surviving QP");
	if (cq)
		CHECK_RC(ibv_destroy_cq(cq), 0, "destroy its CQ");
	vt_buf_free(&s);
	close(up[0]);
	close(down[1]);
}

/* ------------------------------------------------------------------ */
/* garbage datagrams                                                    */
/* ------------------------------------------------------------------ */

/* Recomputes the ICRC of every RoCEv2 datagram in a pcapng capture.
 * Returns the number checked (-1: file unreadable), *bad the mismatches. */
static int pcap_icrc_check(const char *path, int *bad)
{
	FILE *f = fopen(path, "rb");
	*bad = 0;
	if (!f)
		return -1;
	static uint8_t buf[1 << 20];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	int linktype = -1, checked = 0;
	for (size_t off = 0; off + 12 <= n;) {
		uint32_t type = vt_le32(buf + off), blen = vt_le32(buf + off + 4);
		if (blen < 12 || off + blen > n)
			break;
		const uint8_t *fr = NULL;
		size_t flen = 0;
		if (type == 0x0a0d0d0a && vt_le32(buf + off + 8) != 0x1A2B3C4D)
			return -1; /* big-endian section: not handled */
		if (type == 1)
			linktype = buf[off + 8] | buf[off + 9] << 8;
		if (type == 6) {
			flen = vt_le32(buf + off + 20);
			fr = buf + off + 28;
		}
		off += blen;
		if (!fr || flen > blen)
			continue;
		size_t l2 = linktype == 1 ? 14 : linktype == 113 ? 16 : linktype == 276 ? 20 : 0;
		if (linktype == 1 && flen > 14 && vt_be16(fr + 12) == 0x8100)
			l2 = 18;
		if (flen < l2 + 28)
			continue;
		const uint8_t *ip = fr + l2;
		if (ip[0] != 0x45 || ip[9] != 17 || vt_be16(ip + 22) != 4791)
			continue;
		size_t ulen = vt_be16(ip + 24);
		if (ulen < 8 + 16 || l2 + 20 + ulen > flen)
			continue;
		const uint8_t *pl = ip + 28;
		size_t plen = ulen - 8;
		uint32_t want = vt_le32(pl + plen - 4);
		uint32_t got = vt_icrc_v4(ip + 12, ip + 16, vt_be16(ip + 4), vt_be16(ip + 6), vt_be16(ip + 20), 4791,
					  pl, plen);
		checked++;
		if (got != want)
			(*bad)++;
	}
	return checked;
}

struct garbage {
	/* the RC pair: A (requester) -> B (responder) */
	uint32_t qpn_a, qpn_b, psn_a, psn_b;
	uint64_t dup_b_addr, dup_a_addr;
	uint32_t dup_b_rkey, dup_a_rkey;
	int fd_any;
	int raw;		 /* sends as A or B from their ports, -1 without CAP_NET_RAW */
	uint16_t port_a, port_b; /* their UDP source ports */
	int quota;
	int sent[8];
	uint64_t rng;
	bool done; /* atomic */
};

static const char *garbage_kind[8] = {
	"random bytes, 0..9000 B",
	"RoCE headers with the real QPNs, random opcode/PSN/payload, wrong ICRC",
	"truncated copies of well-formed packets",
	"well-formed duplicate WRITEs (PSN behind) with the real rkey, must not execute",
	"well-formed duplicate SENDs (PSN behind), must not consume a receive",
	"well-formed ACK/NAK/read response/atomic ACK for PSNs never sent, must be ignored",
	"well-formed UD SENDs to the RC QPs, must be dropped",
	"well-formed WRITEs with a foreign P_Key, must be dropped",
};

static void *garbage_thread(void *arg)
{
	struct garbage *g = arg;
	static uint8_t pkt[9200], valid[9200];
	uint8_t data[4200];
	size_t vlen = 0;
	for (int i = 0; i < g->quota; i++) {
		int kind = (int)(vt_rand64_r(&g->rng) % 8);
		uint64_t r = vt_rand64_r(&g->rng);
		bool to_b = r & 1;			       /* else to A */
		bool spoof = g->raw >= 0 && (r >> 1) % 3 != 0; /* as the other QP, from its port */
		uint16_t sport = !spoof ? vt_local_port(g->fd_any) : to_b ? g->port_a : g->port_b;
		uint32_t dqpn = to_b ? g->qpn_b : g->qpn_a;
		uint32_t behind = ((to_b ? g->psn_a : g->psn_b) - 100000u - (uint32_t)(r >> 40) % 5000) & 0xffffff;
		uint32_t dl = (uint32_t)((r >> 8) % 257);
		for (uint32_t k = 0; k < sizeof(data); k++)
			data[k] = (uint8_t)vt_rand64_r(&g->rng);
		size_t n = 0;
		switch (kind) {
		case 0:
			n = (size_t)((r >> 16) % 9001);
			for (size_t k = 0; k < n; k++)
				pkt[k] = (uint8_t)vt_rand64_r(&g->rng);
			break;
		case 1: {
			uint32_t pl = (uint32_t)((r >> 16) % 4200);
			n = vt_put_bth(pkt, (uint8_t)(r >> 24), (uint8_t)(r >> 32) & 3, 0xffff, dqpn, (r >> 34) & 1,
				       (uint32_t)(r >> 35) & 0xffffff);
			memcpy(pkt + n, data, pl);
			n += pl;
			n = vt_seal(pkt, n, sport, false);
			break;
		}
		case 2:
			if (!vlen)
				continue;
			n = (size_t)((r >> 16) % vlen);
			memcpy(pkt, valid, n);
			break;
		case 3:
			if (to_b)
				n = vt_mk_write_only(pkt, 0x00, 0xffff, dqpn, behind, g->dup_b_addr + dl * 8,
						     g->dup_b_rkey, data, dl + 1, sport, true);
			else
				n = vt_mk_write_only(pkt, 0x00, 0xffff, dqpn, behind, g->dup_a_addr + dl * 8,
						     g->dup_a_rkey, data, dl + 1, sport, true);
			memcpy(valid, pkt, n);
			vlen = n;
			break;
		case 4:
			n = vt_mk_send_only(pkt, 0x00, 0xffff, dqpn, behind, data, dl, sport, true);
			break;
		case 5: {
			/* to A, which is the requester: PSNs far ahead of anything sent or far behind */
			uint32_t psn = (r >> 20) & 1 ? (g->psn_a + 4000000u) & 0xffffff :
						       (g->psn_a - 1000000u) & 0xffffff;
			sport = spoof ? g->port_b : sport;
			n = vt_mk_response(pkt, (int)((r >> 21) % 8), g->qpn_a, psn, sport, true);
			break;
		}
		case 6:
			n = vt_mk_ud_send(pkt, 0xffff, dqpn, 0x11111111, g->qpn_a, data, dl, sport, true);
			break;
		case 7:
			n = vt_mk_write_only(pkt, 0x00, 0x1234, dqpn, (to_b ? g->psn_a : g->psn_b),
					     to_b ? g->dup_b_addr : g->dup_a_addr, to_b ? g->dup_b_rkey : g->dup_a_rkey,
					     data, dl + 1, sport, true);
			break;
		}
		if (spoof)
			vt_send_raw(g->raw, sport, pkt, n);
		else
			vt_send_to_4791(g->fd_any, pkt, n);
		g->sent[kind]++;
		if (i % 32 == 31)
			vt_sleep_us(150);
	}
	__atomic_store_n(&g->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/* The spoofing machinery is checked on a UD QP first: a well-formed packet
 * from this test must be received, broken ones must not. */
static bool spoof_self_check(int fd)
{
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf r;
	bool ok = true;
	vt_cfg_default(&c, IBV_QPT_UD);
	if (!vt_pair_setup(&D, &c, &p))
		return false;
	vt_buf_alloc(&r, D.pd, 4 * 1024, 4096, IBV_ACCESS_LOCAL_WRITE);
	for (int i = 0; i < 4; i++)
		vt_post_recv(p.qp[1], (uint64_t)i, r.p + i * 1024, 1024, r.mr->lkey);
	uint8_t pkt[256], data[24];
	uint16_t sport = vt_local_port(fd);
	vt_fill(data, sizeof(data), 31);
	uint32_t q = p.qp[1]->qp_num;
	struct ibv_wc wc;
	vt_send_to_4791(fd, pkt, vt_mk_ud_send(pkt, 0xffff, q, c.qkey, 0xabcde, data, 24, sport, true));
	if (EXPECT_WC(p.rcq[1], 0, IBV_WC_SUCCESS, IBV_WC_RECV, &wc,
		      "a UD SEND built by this test (ICRC by annex A17) is received by a UD QP"))
		ok &= CHECK(wc.byte_len == 64 && wc.src_qp == 0xabcde && vt_verify(r.p + 40, 24, 31) < 0,
			    "  ...byte_len 64, src_qp 0xabcde, payload\t(byte_len %u, src_qp 0x%x)", wc.byte_len,
			    wc.src_qp);
	else
		ok = false;
	vt_send_to_4791(fd, pkt, vt_mk_ud_send(pkt, 0xffff, q, c.qkey, 0xabcde, data, 24, sport, false));
	ok &= CHECK_CQ_EMPTY(p.rcq[1], 200, "the same packet with a wrong ICRC is dropped");
	vt_send_to_4791(fd, pkt, vt_mk_ud_send(pkt, 0x1234, q, c.qkey, 0xabcde, data, 24, sport, true));
	ok &= CHECK_CQ_EMPTY(p.rcq[1], 200, "the same packet with P_Key 0x1234 (ICRC correct) is dropped");
	vt_send_to_4791(fd, pkt, vt_mk_ud_send(pkt, 0xffff, q, c.qkey ^ 4, 0xabcde, data, 24, sport, true));
	ok &= CHECK_CQ_EMPTY(p.rcq[1], 200, "the same packet with a wrong Q_Key (ICRC correct) is dropped");
	for (size_t cut = 0; cut < 24 + 20 + 4; cut += 3) {
		size_t n = vt_mk_ud_send(pkt, 0xffff, q, c.qkey, 0xabcde, data, 24, sport, true);
		vt_send_to_4791(fd, pkt, cut);
		(void)n;
	}
	ok &= CHECK_CQ_EMPTY(p.rcq[1], 200, "truncated copies of it are dropped");
	vt_send_to_4791(fd, pkt, vt_mk_ud_send(pkt, 0xffff, q, c.qkey, 0xabcde, data, 24, sport, true));
	ok &= EXPECT_WC(p.rcq[1], 1, IBV_WC_SUCCESS, IBV_WC_RECV, NULL,
			"the good packet again lands in the next receive");
	CHECK_GUARDS(&r, "UD receive region");
	vt_buf_free(&r);
	vt_pair_destroy(&p);
	return ok;
}

static void garbage_storm(void)
{
	SECTION("garbage datagrams to UDP 4791 (also from the peers' source ports, raw) during a verified transfer");
	vt_crc_init();
	char path[1024];
	snprintf(path, sizeof(path), "%s", __FILE__);
	char *dir = dirname(path);
	const char *caps[] = { "ud_send.pcap", "rc_write.pcap", "rc_atomic_fa.pcap" };
	for (int i = 0; i < 3; i++) {
		char f[1200];
		int bad = 0;
		snprintf(f, sizeof(f), "%s/../data/wire-samples/roce-kernel-rxe/%s", dir, caps[i]);
		int n = pcap_icrc_check(f, &bad);
		if (n < 0)
			NOTE("%s not readable: ICRC self-check against the kernel capture skipped", f);
		else
			CHECK(n > 0 && bad == 0,
			      "this test's ICRC code reproduces the ICRC of all %d RoCEv2 packets in the "
			      "kernel rxe capture %s\t(%d differ)",
			      n, caps[i], bad);
	}
	int fd_any = vt_udp_socket(0);
	if (!CHECK(fd_any >= 0, "a plain UDP socket"))
		return;
	bool spoof_ok = spoof_self_check(fd_any);
	if (!spoof_ok)
		NOTE("the well-formed garbage below may be rejected for the wrong reason (see the self-check)");

	struct vt_qp_cfg c;
	struct vt_pair p;
	vt_cfg_default(&c, IBV_QPT_RC);
	c.max_send_wr = 64;
	c.max_recv_wr = 64;
	if (!vt_pair_setup(&D, &c, &p)) {
		close(fd_any);
		return;
	}
	struct ibv_qp *A = p.qp[0], *B = p.qp[1];
	enum {
		MB = 1 << 20,
		SLOT = 65536
	};
	struct vt_buf src, dst, rb, back, dupA, dupB;
	vt_buf_alloc(&src, D.pd, MB, 8192, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&dst, D.pd, MB, 8192, ACC_ALL);
	vt_buf_alloc(&rb, D.pd, 4 * SLOT, 8192, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&back, D.pd, MB, 8192, IBV_ACCESS_LOCAL_WRITE);
	vt_buf_alloc(&dupA, D.pd, 4096, 8192, ACC_ALL);
	vt_buf_alloc(&dupB, D.pd, 4096, 8192, ACC_ALL);

	struct garbage g;
	memset(&g, 0, sizeof(g));
	g.qpn_a = A->qp_num;
	g.qpn_b = B->qp_num;
	g.psn_a = c.psn[0];
	g.psn_b = c.psn[1];
	g.dup_a_addr = (uintptr_t)dupA.p;
	g.dup_a_rkey = dupA.mr->rkey;
	g.dup_b_addr = (uintptr_t)dupB.p;
	g.dup_b_rkey = dupB.mr->rkey;
	g.fd_any = fd_any;
	g.quota = 12000;
	g.rng = vt_rand64() | 1;
	g.raw = -1;
	/* A's and B's source ports, off the wire (a WRITE and its ACK) */
	int sniff = vt_sniff_open();
	vt_post_send(A, 7, IBV_WR_RDMA_WRITE, src.p, 64, src.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)dst.p,
		     dst.mr->rkey, 0);
	EXPECT_WC(p.scq[0], 7, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL, "a WRITE from A to B before the storm");
	if (sniff >= 0) {
		g.port_a = vt_sniff_port(sniff, B->qp_num, 2000);
		g.port_b = vt_sniff_port(sniff, A->qp_num, 2000);
		close(sniff);
	}
	if (g.port_a && g.port_b) {
		int fa = vt_udp_socket(g.port_a), ea = errno, fb = vt_udp_socket(g.port_b), eb = errno;
		CHECK(fa < 0 && ea == EADDRINUSE && fb < 0 && eb == EADDRINUSE,
		      "no other socket can bind 127.0.0.1:%u or :%u, the source ports of QP %u and QP %u, even with "
		      "SO_REUSEADDR\t(%s, %s)",
		      g.port_a, g.port_b, A->qp_num, B->qp_num, fa < 0 ? strerror(ea) : "bound",
		      fb < 0 ? strerror(eb) : "bound");
		if (fa >= 0)
			close(fa);
		if (fb >= 0)
			close(fb);
		g.raw = vt_raw_socket();
	}
	if (g.raw < 0)
		NOTE("no raw socket (CAP_NET_RAW): the garbage comes from another port only, through the daemon");
	NOTE("sending %d datagrams: A = QP %u (port %u), B = QP %u (port %u)", g.quota, A->qp_num, g.port_a, B->qp_num,
	     g.port_b);

	pthread_t th;
	pthread_create(&th, NULL, garbage_thread, &g);
	uint64_t t0 = vt_now_ms();
	int rounds = 0, bad_rounds = 0, recvs = 0;
	struct ibv_wc wc[8];
	while ((!__atomic_load_n(&g.done, __ATOMIC_ACQUIRE) || rounds < 4) && vt_now_ms() - t0 < 40000) {
		uint32_t seed = 1000 + (uint32_t)rounds;
		vt_fill(src.p, MB, seed);
		memset(back.p, 0, MB);
		int slot = rounds % 4;
		memset(rb.p + slot * SLOT, 0, SLOT);
		int err = vt_post_recv(B, 50 + (uint64_t)rounds, rb.p + slot * SLOT, SLOT, rb.mr->lkey);
		err |= vt_post_send(A, 1, IBV_WR_RDMA_WRITE, src.p, MB, src.mr->lkey, IBV_SEND_SIGNALED,
				    (uintptr_t)dst.p, dst.mr->rkey, 0);
		err |= vt_post_send(A, 2, IBV_WR_SEND_WITH_IMM, src.p + 4096, SLOT, src.mr->lkey, IBV_SEND_SIGNALED, 0,
				    0, (uint32_t)rounds);
		err |= vt_post_send(A, 3, IBV_WR_RDMA_READ, back.p, MB, back.mr->lkey, IBV_SEND_SIGNALED,
				    (uintptr_t)dst.p, dst.mr->rkey, 0);
		int n = vt_poll(p.scq[0], 3, wc, VT_TIMEOUT_MS);
		bool ok = !err && n == 3;
		for (int i = 0; i < n; i++)
			ok &= wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == (uint64_t)i + 1;
		int m = vt_poll(p.rcq[1], 1, wc + 4, VT_TIMEOUT_MS);
		recvs += m;
		ok &= m == 1 && wc[4].status == IBV_WC_SUCCESS && wc[4].wr_id == 50 + (uint64_t)rounds &&
		      wc[4].byte_len == SLOT && ntohl(wc[4].imm_data) == (uint32_t)rounds;
		ok &= vt_verify(dst.p, MB, seed) < 0;
		ok &= !memcmp(rb.p + slot * SLOT, src.p + 4096, SLOT);
		ok &= vt_verify(back.p, MB, seed) < 0;
		if (!ok) {
			bad_rounds++;
			CHECK(0,
			      "round %d: WRITE 1 MiB + SEND 64 KiB + READ 1 MiB back, all verified\t(err %d, %d send "
			      "completions, first status %s, %d receive completions)",
			      rounds, err, n, n ? vt_status_str(wc[0].status) : "-", m);
			if (n < 3)
				break; /* the connection is gone: stop */
		}
		rounds++;
	}
	__atomic_store_n(&g.done, true, __ATOMIC_RELEASE); /* (if the transfer broke off) */
	pthread_join(th, NULL);
	uint64_t dt = vt_now_ms() - t0;
	int total = 0;
	for (int k = 0; k < 8; k++) {
		NOTE("%5d x %s", g.sent[k], garbage_kind[k]);
		total += g.sent[k];
	}
	NOTE("%d garbage datagrams and %d verified rounds in %" PRIu64 " ms", total, rounds, dt);
	CHECK(total >= 10000, "thousands of garbage datagrams were sent (%d)", total);
	CHECK(rounds >= 4 && bad_rounds == 0, "%d rounds of WRITE + SEND + READ during the storm, every byte verified",
	      rounds);
	bool zero = true;
	for (int i = 0; i < 4096; i++)
		zero &= dupA.p[i] == 0 && dupB.p[i] == 0;
	CHECK(zero, "the duplicate (PSN-behind) WRITEs with real rkeys did not execute: their targets are still zero");
	CHECK_CQ_EMPTY(p.rcq[1], 100,
		       "B got no receive completion beyond the %d real SENDs (duplicate SENDs, UD SENDs dropped)",
		       recvs);
	CHECK_CQ_EMPTY(p.rcq[0], 0, "A got no receive completion at all");
	CHECK_CQ_EMPTY(p.scq[1], 0, "B's send queue saw nothing");
	CHECK_STATE(A, IBV_QPS_RTS, 0, "after the storm, A");
	CHECK_STATE(B, IBV_QPS_RTS, 0, "after the storm, B");
	struct ibv_async_event ev;
	bool got = vt_get_async(D.ctx, &ev, 100);
	CHECK(!got, "no async event: no QP was hurt by the garbage\t(got %s)",
	      got ? ibv_event_type_str(ev.event_type) : "");
	drain_async("garbage");
	CHECK_GUARDS(&src, "source");
	CHECK_GUARDS(&dst, "WRITE target");
	CHECK_GUARDS(&rb, "receive buffers");
	CHECK_GUARDS(&back, "READ target");
	CHECK_GUARDS(&dupA, "duplicate-WRITE target on A");
	CHECK_GUARDS(&dupB, "duplicate-WRITE target on B");
	if (g.raw >= 0)
		close(g.raw);
	vt_pair_destroy(&p);

	/* the daemon and the device survived: a new pair, and UD through the daemon */
	if (spoof_self_check(fd_any))
		CHECK(1, "after the storm: UD through the daemon still works");
	vt_cfg_default(&c, IBV_QPT_RC);
	if (vt_pair_setup(&D, &c, &p)) {
		vt_fill(src.p, MB, 4242);
		vt_post_send(p.qp[0], 9, IBV_WR_RDMA_WRITE, src.p, MB, src.mr->lkey, IBV_SEND_SIGNALED,
			     (uintptr_t)dst.p, dst.mr->rkey, 0);
		EXPECT_WC(p.scq[0], 9, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL,
			  "after the storm: a new RC pair writes 1 MiB");
		CHECK_DATA(dst.p, MB, 4242, "  ...data");
		vt_pair_destroy(&p);
	}
	close(fd_any);
	vt_buf_free(&src);
	vt_buf_free(&dst);
	vt_buf_free(&rb);
	vt_buf_free(&back);
	vt_buf_free(&dupA);
	vt_buf_free(&dupB);
}

/* ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--peer"))
		return peer_child(atoi(argv[2]), atoi(argv[3]));
	/* the binary re-executed as a peer process */
	const char *self = argc > 0 && argv[0][0] == '/' ? argv[0] : "/proc/self/exe";

	vt_begin_args("test_errors", 150, argc, argv);
	vt_seed_env();
	if (!vt_open(&D))
		return vt_end();
	uint64_t t0 = vt_now_ms();

	VT_RUN(remote_error(OP_WRITE, T_BAD_RKEY));
	VT_RUN(remote_error(OP_READ, T_BAD_RKEY));
	VT_RUN(remote_error(OP_ATOMIC, T_BAD_RKEY));
	VT_RUN(remote_error(OP_WRITE, T_STALE_RKEY));
	VT_RUN(remote_error(OP_WRITE, T_BEYOND_END));
	VT_RUN(remote_error(OP_WRITE_MULTI, T_BEYOND_END));
	VT_RUN(remote_error(OP_READ, T_BEYOND_END));
	VT_RUN(remote_error(OP_ATOMIC, T_BEYOND_END));
	VT_RUN(remote_error(OP_WRITE, T_NO_ACCESS_MR));
	VT_RUN(remote_error(OP_READ, T_NO_ACCESS_MR));
	VT_RUN(remote_error(OP_ATOMIC, T_NO_ACCESS_MR));
	VT_RUN(remote_error(OP_WRITE, T_NO_ACCESS_QP));
	VT_RUN(uc_access_errors());
	VT_RUN(send_too_long(100, 200));
	VT_RUN(send_too_long(4096 + 100, 3 * 4096));
	VT_RUN(rnr_exhausted(0));
	VT_RUN(rnr_exhausted(1));
	VT_RUN(bad_lkey_send());
	VT_RUN(bad_lkey_recv());
	VT_RUN(bad_lkey_read());
	VT_RUN(async_after_destroy());
	VT_RUN(dereg_during_stream());
	VT_RUN(rereg_access());
	VT_RUN(rc_unmapped_target());
	VT_RUN(reset_cleans_cq());
	VT_RUN(misaligned_sge());
	VT_RUN(ud_unmapped_receive());
	VT_RUN(keys_unpredictable());
	VT_RUN(keys_not_reused());
	VT_RUN(cq_overflow());
	VT_RUN(cq_destroyed_with_events());
	VT_RUN(app_error_in_flight());
	VT_RUN(srq_qp_error());
	VT_RUN(peer_destroyed());
	VT_RUN(destroy_cycles());
	VT_RUN(peer_process_killed(self));
	VT_RUN(garbage_storm());
	requester_quiet_summary(); /* over the cases that ran */

	NOTE("total %" PRIu64 " ms", vt_now_ms() - t0);
	vt_close(&D);
	return vt_end();
}
