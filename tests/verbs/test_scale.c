/* test_scale: 10,000 RC QPs in one process.
 *
 * The QPs are connected in pairs over the loopback GID; every QP carries
 * a SEND and an RDMA WRITE to its partner (data checked), then one pair
 * ping-pongs while the 9,998 others are idle, and everything is torn
 * down again.  What it guards:
 *  - creating, connecting and destroying a QP, and polling an empty CQ,
 *    cost the same with 10,000 QPs as with two (an empty ibv_poll_cq used
 *    to try every QP's socket: 8 ms each at 10,000 QPs, so the ping-pong
 *    took minutes; it must take well under the bound checked here);
 *  - a CQ or SRQ still used by a QP cannot be destroyed (EBUSY), and can
 *    once the last QP is gone;
 *  - an idle RC QP (128+128 WRs) costs at most 32 KiB of resident memory
 *    (not checked under ASan, whose allocator pads every block).
 * Each connected QP holds one socket (two once it has sent): the test
 * raises its open-file limit and skips (77) where that is not allowed. */
#include "vt.h"

#include <sys/resource.h>

#include "common/rlimit.h"
#include "common/tsan.h"

#ifdef SR_TSAN
#define NQP 2000 /* the race detector's build serves a fifth of the QPs within their timeout */
#else
#define NQP 10000
#endif
#define SLOT 64
#define QP_WR 128	    /* per queue, as softrdma-qpmem and bench/run.sh count */
#define MAX_KIB_PER_QP 32.0 /* issue 12: memory per idle RC QP */

/* A sanitizer's allocator pads or shadows every block: memory per QP is
 * reported, not checked, under ASan and TSan */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define VT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define VT_ASAN 1
#endif
#endif
#define PINGPONG_ROUNDS 2000
#define PINGPONG_BOUND_MS 15000 /* 0.2 s now, 52 s before (loaded 2-core VM) */

static struct vt_dev D;

static long rss_kib(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static uint32_t pattern_seed(uint32_t qpn, int what)
{
	return qpn * 2654435761u + (uint32_t)what;
}

/* Posts a signaled WR with one SGE (inline when small). */
static int post(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t lkey,
		uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = id,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* Collects n completions of cq, all successful, each wr_id once. */
static bool collect(struct ibv_cq *cq, int n, const char *what)
{
	struct ibv_wc wc[64];
	uint8_t *seen = calloc((size_t)n, 1);
	int got = 0, bad = 0, dup = 0, first_bad = IBV_WC_SUCCESS;
	uint64_t deadline = vt_now_ms() + 120000;

	while (got < n && vt_now_ms() < deadline) {
		int want = n - got < 64 ? n - got : 64;
		int r = vt_poll(cq, want, wc, 1000);
		for (int i = 0; i < r; i++) {
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id >= (uint64_t)n) {
				if (!bad++)
					first_bad = wc[i].status;
			} else if (seen[wc[i].wr_id]++)
				dup++;
		}
		got += r;
	}
	free(seen);
	return CHECK(got == n && !bad && !dup,
		     "%s: %d completions, all successful, each WR once\t(got %d, %d bad (first: %s), %d twice)", what,
		     n, got, bad, vt_status_str(first_bad), dup);
}

static void test_many(void)
{
	struct vt_qp_cfg c;
	struct ibv_qp **qp = calloc(NQP, sizeof(*qp));
	struct ibv_cq *scq, *rcq;
	struct vt_buf sbuf, rbuf, wbuf;
	int created = 0, connected = 0;

	SECTION("%d RC QPs in one process", NQP);
	vt_cfg_default(&c, IBV_QPT_RC);
	c.max_send_wr = QP_WR;
	c.max_recv_wr = QP_WR;
	c.max_send_sge = 1;
	c.max_recv_sge = 1;
	/* 10,000 messages at once, each answered from a fresh socket, under
	 * ASan on two loaded cores: more than the default 67 ms x 7 retries */
	c.timeout = 18;
	scq = ibv_create_cq(D.ctx, NQP + 64, NULL, NULL, 0);
	rcq = ibv_create_cq(D.ctx, NQP + 64, NULL, NULL, 0);
	if (!CHECK(scq && rcq, "two CQs of %d entries\t(errno %d %s)", NQP + 64, errno, strerror(errno)))
		return;
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	if (!CHECK(!vt_buf_alloc(&sbuf, D.pd, (size_t)NQP * SLOT, 64, access) &&
			   !vt_buf_alloc(&rbuf, D.pd, (size_t)NQP * SLOT, 64, access) &&
			   !vt_buf_alloc(&wbuf, D.pd, (size_t)NQP * SLOT, 64, access),
		   "register send, receive and write buffers (%d x %d bytes)", NQP, SLOT))
		return;

	uint64_t t0 = vt_now_ms();
	long rss0 = rss_kib();
	for (int i = 0; i < NQP; i++) {
		struct ibv_qp_init_attr ia = { .send_cq = scq,
					       .recv_cq = rcq,
					       .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = c.max_send_wr,
							.max_recv_wr = c.max_recv_wr,
							.max_send_sge = 1,
							.max_recv_sge = 1 } };
		qp[i] = ibv_create_qp(D.pd, &ia);
		if (!qp[i]) {
			NOTE("ibv_create_qp #%d: %s", i, strerror(errno));
			break;
		}
		created++;
	}
	CHECK_INT(created, NQP, "ibv_create_qp %d times (%" PRIu64 " ms)", NQP, vt_now_ms() - t0);
	CHECK_RC(ibv_destroy_cq(scq), EBUSY, "ibv_destroy_cq of the send CQ while QPs use it");
	CHECK_RC(ibv_destroy_cq(rcq), EBUSY, "ibv_destroy_cq of the receive CQ while QPs use it");
	if (created < NQP)
		goto out;

	t0 = vt_now_ms();
	for (int i = 0; i < NQP; i++) {
		int o = i ^ 1;
		if (vt_qp_connect(qp[i], &c, IBV_QPS_RTS, qp[o]->qp_num, c.psn[o & 1], c.psn[i & 1], &D.gid,
				  D.gid_index))
			break;
		connected++;
	}
	if (!CHECK_INT(connected, NQP, "%d QPs to RTS, in pairs (%" PRIu64 " ms)", NQP, vt_now_ms() - t0))
		goto out;
	double kib = (double)(rss_kib() - rss0) / NQP;
#ifdef VT_ASAN
	NOTE("%.1f KiB resident per idle RC QP (%d+%d WRs; not checked under a sanitizer)", kib, QP_WR, QP_WR);
#else
	CHECK(kib <= MAX_KIB_PER_QP, "at most %.0f KiB resident per idle RC QP (%d+%d WRs, at RTS)\t(%.1f KiB)",
	      MAX_KIB_PER_QP, QP_WR, QP_WR, kib);
#endif

	/* every QP sends its partner 64 bytes and writes 64 bytes into its slot */
	t0 = vt_now_ms();
	int perr = 0;
	for (int i = 0; i < NQP; i++)
		perr += vt_post_recv(qp[i], (uint64_t)i, rbuf.p + (size_t)i * SLOT, SLOT, rbuf.mr->lkey) != 0;
	for (int i = 0; i < NQP; i++) {
		uint8_t *s = sbuf.p + (size_t)i * SLOT;
		vt_fill(s, SLOT, pattern_seed(qp[i]->qp_num, 0));
		perr += post(qp[i], (uint64_t)i, IBV_WR_SEND, s, SLOT, sbuf.mr->lkey, 0, 0) != 0;
	}
	CHECK_INT(perr, 0, "post a receive and a SEND on each QP");
	collect(rcq, NQP, "receives");
	collect(scq, NQP, "SENDs");
	int wrong = 0;
	for (int i = 0; i < NQP; i++)
		wrong += vt_verify(rbuf.p + (size_t)i * SLOT, SLOT, pattern_seed(qp[i ^ 1]->qp_num, 0)) >= 0;
	CHECK_INT(wrong, 0, "each QP received its partner's bytes (%" PRIu64 " ms)", vt_now_ms() - t0);

	t0 = vt_now_ms();
	perr = 0;
	for (int i = 0; i < NQP; i++) {
		uint8_t *s = sbuf.p + (size_t)i * SLOT;
		vt_fill(s, SLOT, pattern_seed(qp[i]->qp_num, 1));
		perr += post(qp[i], (uint64_t)i, IBV_WR_RDMA_WRITE, s, SLOT, sbuf.mr->lkey,
			     (uintptr_t)(wbuf.p + (size_t)(i ^ 1) * SLOT), wbuf.mr->rkey) != 0;
	}
	CHECK_INT(perr, 0, "post an RDMA WRITE on each QP");
	collect(scq, NQP, "WRITEs");
	wrong = 0;
	for (int i = 0; i < NQP; i++)
		wrong += vt_verify(wbuf.p + (size_t)(i ^ 1) * SLOT, SLOT, pattern_seed(qp[i]->qp_num, 1)) >= 0;
	CHECK_INT(wrong, 0, "each QP's WRITE landed in its partner's slot (%" PRIu64 " ms)", vt_now_ms() - t0);
	CHECK_GUARDS(&wbuf, "write buffer");
	CHECK_GUARDS(&rbuf, "receive buffer");

	/* one pair ping-pongs by SEND, polling the shared CQs, the rest idle */
	struct ibv_qp *a = qp[NQP / 2], *b = qp[NQP / 2 + 1];
	uint8_t *ra = rbuf.p + (size_t)(NQP / 2) * SLOT, *rb = rbuf.p + (size_t)(NQP / 2 + 1) * SLOT;
	uint8_t *sa = sbuf.p + (size_t)(NQP / 2) * SLOT, *sb = sbuf.p + (size_t)(NQP / 2 + 1) * SLOT;
	struct ibv_wc wc;
	int rounds = 0;
	t0 = vt_now_ms();
	for (; rounds < PINGPONG_ROUNDS; rounds++) {
		if (vt_post_recv(b, 1, rb, SLOT, rbuf.mr->lkey) || vt_post_recv(a, 0, ra, SLOT, rbuf.mr->lkey))
			break;
		sa[0] = (uint8_t)rounds;
		if (post(a, 0, IBV_WR_SEND, sa, 8, sbuf.mr->lkey, 0, 0) || vt_poll(rcq, 1, &wc, 5000) != 1 ||
		    wc.status != IBV_WC_SUCCESS || wc.wr_id != 1 || rb[0] != (uint8_t)rounds)
			break;
		sb[0] = (uint8_t)~rounds;
		if (post(b, 1, IBV_WR_SEND, sb, 8, sbuf.mr->lkey, 0, 0) || vt_poll(rcq, 1, &wc, 5000) != 1 ||
		    wc.status != IBV_WC_SUCCESS || wc.wr_id != 0 || ra[0] != (uint8_t)~rounds)
			break;
		if (vt_poll(scq, 2, (struct ibv_wc[2]){ 0 }, 5000) != 2)
			break;
	}
	uint64_t ms = vt_now_ms() - t0;
	CHECK_INT(rounds, PINGPONG_ROUNDS, "SEND ping-pong on one pair beside %d idle QPs (%" PRIu64 " ms)", NQP - 2,
		  ms);
	CHECK(ms < PINGPONG_BOUND_MS,
	      "... took less than %d ms: polling an empty CQ does not visit idle QPs\t(%" PRIu64 " ms)",
	      PINGPONG_BOUND_MS, ms);
	CHECK(ibv_poll_cq(scq, 1, &wc) == 0 && ibv_poll_cq(rcq, 1, &wc) == 0, "both CQs empty at the end");

out:
	t0 = vt_now_ms();
	int derr = 0;
	for (int i = 0; i < created; i++)
		derr += ibv_destroy_qp(qp[i]) != 0;
	CHECK_INT(derr, 0, "ibv_destroy_qp %d times (%" PRIu64 " ms)", created, vt_now_ms() - t0);
	CHECK_RC(ibv_destroy_cq(scq), 0, "ibv_destroy_cq of the send CQ once its QPs are gone");
	CHECK_RC(ibv_destroy_cq(rcq), 0, "ibv_destroy_cq of the receive CQ once its QPs are gone");
	vt_buf_free(&sbuf);
	vt_buf_free(&rbuf);
	vt_buf_free(&wbuf);
	free(qp);
}

static void test_srq_busy(void)
{
	SECTION("an SRQ in use cannot be destroyed");
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(D.pd, &sa);
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	if (!CHECK(srq && cq, "create an SRQ and a CQ"))
		return;
	struct ibv_qp_init_attr ia = { .send_cq = cq,
				       .recv_cq = cq,
				       .srq = srq,
				       .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_send_sge = 1 } };
	struct ibv_qp *q1 = ibv_create_qp(D.pd, &ia), *q2 = ibv_create_qp(D.pd, &ia);
	if (!CHECK(q1 && q2, "two QPs on the SRQ"))
		return;
	CHECK_RC(ibv_destroy_srq(srq), EBUSY, "ibv_destroy_srq with two QPs on it");
	CHECK_RC(ibv_destroy_qp(q1), 0, "destroy one QP");
	CHECK_RC(ibv_destroy_srq(srq), EBUSY, "ibv_destroy_srq with one QP on it");
	CHECK_RC(ibv_destroy_cq(cq), EBUSY, "ibv_destroy_cq with one QP on it");
	CHECK_RC(ibv_destroy_qp(q2), 0, "destroy the other");
	CHECK_RC(ibv_destroy_srq(srq), 0, "ibv_destroy_srq once no QP uses it");
	CHECK_RC(ibv_destroy_cq(cq), 0, "ibv_destroy_cq once no QP uses it");
}

int main(int argc, char **argv)
{
	vt_begin_args("test_scale", 600, argc, argv);
	if (sr_raise_nofile(NQP + 512) < NQP + 512) {
		printf("test_scale: SKIP: %d QPs need %d open files (one flow socket each); RLIMIT_NOFILE cannot be raised that far here\n",
		       NQP, NQP + 512);
		return 77;
	}
	if (!vt_open(&D))
		return vt_end();
	VT_RUN(test_srq_busy());
	VT_RUN(test_many());
	vt_close(&D);
	return vt_end();
}
