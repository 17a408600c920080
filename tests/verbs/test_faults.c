/* test_faults: fault injection (SOFTRDMA_FAULTS / "faults =" in
 * softrdma.conf) on Soft-RoCE.
 *
 * Each case runs in a child process of its own (the plan is read once per
 * process) with a configuration of two RoCE devices on lo: rxe0 with the
 * case's "faults =", rxe1 without.  QP A lives on rxe0, QP B on rxe1, so
 * everything A sends (requests, data, read requests, its ACKs of B's
 * sends) meets the faults and nothing B sends does.  (With both ends at
 * 20% loss, RC's retry_cnt of 7 is exhausted now and then, as on any RoCE
 * NIC: eight retransmission rounds in a row that make no progress.)
 *
 *  - UD, one fault kind at 30% each: what arrives shows the fault (fewer
 *    datagrams for drop and corrupt -- and only intact ones --, more for
 *    dup, out of order for reorder), the same seed gives the same
 *    datagrams again and another seed others;
 *  - RC, with no faults and at 1, 5, 10 and 20% loss, and under dup,
 *    reorder, corrupt and all of them mixed: SENDs both ways, RDMA WRITEs,
 *    RDMA READs and FETCH_ADDs of 1 byte to 200 KB, every byte checked;
 *    goodput printed beside the fault-free run's; the injected faults
 *    counted by `softrdma-cfg statistic qp show pid PID`;
 *  - RC one-packet WRITEs, READs and FETCH_ADDs at 10% loss: each lost
 *    tail recovered in round trips, not the QP's timeout;
 *  - delay: no RC round trip quicker than the delay less its jitter, UD
 *    datagrams in the order sent however the jitter falls, RC data intact
 *    under delay, jitter and loss;
 *  - a bad SOFTRDMA_FAULTS: no devices and a message naming it.
 */
#include "vt.h"

#include <fcntl.h>
#include <sys/wait.h>

#define UD_N 300
#define UD_PAY 64

/* ---------------------------------------------------------------- */
/* child side: two devices, one QP on each                            */
/* ---------------------------------------------------------------- */

struct side {
	struct vt_dev d;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
};

static bool open_dev(struct vt_dev *d, const char *name)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = NULL;

	memset(d, 0, sizeof(*d));
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			dev = list[i];
	if (!CHECK(dev, "device %s is there (%d devices)", name, n)) {
		if (list)
			ibv_free_device_list(list);
		return false;
	}
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->ctx = ibv_open_device(dev);
	ibv_free_device_list(list);
	if (!CHECK(d->ctx, "ibv_open_device(%s)", name))
		return false;
	if (ibv_query_gid(d->ctx, 1, 0, &d->gid))
		return CHECK(0, "query gid of %s", name);
	d->pd = ibv_alloc_pd(d->ctx);
	return CHECK(d->pd, "ibv_alloc_pd on %s", name);
}

static bool sides_setup(struct side s[2], const struct vt_qp_cfg *c)
{
	if (!open_dev(&s[0].d, "rxe0") || !open_dev(&s[1].d, "rxe1"))
		return false;
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr ia;

		s[i].cq = ibv_create_cq(s[i].d.ctx, c->cqe, NULL, NULL, 0);
		memset(&ia, 0, sizeof(ia));
		ia.qp_type = c->type;
		ia.send_cq = ia.recv_cq = s[i].cq;
		ia.cap.max_send_wr = c->max_send_wr;
		ia.cap.max_recv_wr = c->max_recv_wr;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		s[i].qp = s[i].cq ? ibv_create_qp(s[i].d.pd, &ia) : NULL;
		if (!CHECK(s[i].qp, "%s QP on %s", vt_qpt_str(c->type), s[i].d.name))
			return false;
	}
	for (int i = 0; i < 2; i++) {
		int o = !i;
		int err = vt_qp_connect(s[i].qp, c, IBV_QPS_RTS, s[o].qp->qp_num, c->psn[o], c->psn[i], &s[o].d.gid, 0);
		if (!CHECK(!err, "QP %u on %s connected to QP %u on %s", s[i].qp->qp_num, s[i].d.name, s[o].qp->qp_num,
			   s[o].d.name))
			return false;
	}
	return true;
}

static void sides_teardown(struct side s[2])
{
	for (int i = 0; i < 2; i++) {
		if (s[i].qp)
			ibv_destroy_qp(s[i].qp);
		if (s[i].cq)
			ibv_destroy_cq(s[i].cq);
		if (s[i].d.pd)
			ibv_dealloc_pd(s[i].d.pd);
		if (s[i].d.ctx)
			ibv_close_device(s[i].d.ctx);
	}
}

/* One completion from side i's CQ (1, or 0 after timeout_ms).  The wait
 * also drives the other side's context (ibv_poll_cq with no room takes
 * nothing but receives what waits): on a loaded machine rxe1's progress
 * thread may go without a CPU for longer than RC's retries last, and the
 * application's thread is the one sure to run. */
static int wait_wc(struct side s[2], int i, struct ibv_wc *wc, int timeout_ms)
{
	uint64_t deadline = vt_now_ms() + (uint64_t)timeout_ms;
	unsigned spins = 0;

	for (;;) {
		int n = ibv_poll_cq(s[i].cq, 1, wc);

		if (n)
			return n > 0;
		ibv_poll_cq(s[!i].cq, 0, NULL);
		if (vt_now_ms() >= deadline)
			return 0;
		if (++spins % 64 == 0)
			vt_sleep_us(50);
	}
}

/* The fault counters of this process's live QPs, as softrdma-cfg shows
 * them: "RESULT fault_drop=N ... crc_err=N retransmits=N". */
static void print_counters(void)
{
	static const char *const names[] = { "fault_drop",   "fault_dup",      "fault_reorder", "fault_corrupt",
					     "fault_reset",  "fault_truncate", "crc_err",	"retransmits",
					     "rcvd_seq_err", "sent_pkts",      "rcvd_pkts" };
	unsigned long long sum[sizeof(names) / sizeof(names[0])] = { 0 };
	const char *bd = getenv("SR_BUILD_DIR");
	char cmd[1024], line[4096];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s/bin/softrdma-cfg statistic qp show pid %d", bd ? bd : ".", getpid());
	f = popen(cmd, "r");
	if (!CHECK(f, "run softrdma-cfg statistic"))
		return;
	while (fgets(line, sizeof(line), f)) {
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
			char key[64];
			const char *p;

			snprintf(key, sizeof(key), " %s ", names[k]);
			if ((p = strstr(line, key)))
				sum[k] += strtoull(p + strlen(key), NULL, 10);
		}
	}
	CHECK(pclose(f) == 0, "softrdma-cfg statistic qp show pid %d", getpid());
	printf("RESULT");
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
		printf(" %s=%llu", names[k], sum[k]);
	printf("\n");
}

/* A (rxe0) sends UD_N numbered datagrams to B (rxe1); B prints the order
 * they arrived in: "RESULT ud=<n> <seq> <seq> ...". */
static int child_ud(void)
{
	struct side s[2];
	struct vt_qp_cfg c;
	struct vt_buf src, dst;
	struct ibv_ah *ah = NULL;
	struct ibv_ah_attr aa;
	struct ibv_wc wc[64];
	int got = 0, bad = 0;
	static int order[3 * UD_N];

	vt_cfg_default(&c, IBV_QPT_UD);
	c.max_send_wr = 64;
	c.max_recv_wr = 2 * UD_N; /* duplicates need room too */
	c.cqe = 4 * UD_N;
	memset(s, 0, sizeof(s));
	if (!sides_setup(s, &c))
		goto out;
	if (vt_buf_alloc(&src, s[0].d.pd, UD_PAY, 0, IBV_ACCESS_LOCAL_WRITE) ||
	    vt_buf_alloc(&dst, s[1].d.pd, (size_t)2 * UD_N * (40 + UD_PAY), 0, IBV_ACCESS_LOCAL_WRITE)) {
		CHECK(0, "buffers");
		goto out;
	}
	for (int i = 0; i < 2 * UD_N; i++)
		vt_post_recv(s[1].qp, (uint64_t)i, dst.p + (size_t)i * (40 + UD_PAY), 40 + UD_PAY, dst.mr->lkey);
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.dgid = s[1].d.gid;
	aa.grh.hop_limit = 64;
	ah = ibv_create_ah(s[0].d.pd, &aa);
	if (!CHECK(ah, "an AH to rxe1"))
		goto out;
	for (int i = 0; i < UD_N; i++) {
		/* one at a time: B's queue and the daemon's path never overflow,
		 * so what is missing was dropped on purpose */
		/* its number, then a pattern of that number */
		memcpy(src.p, &i, sizeof(i));
		vt_fill(src.p + sizeof(i), UD_PAY - sizeof(i), (uint32_t)i);
		if (vt_post_ud_send(s[0].qp, (uint64_t)i, src.p, UD_PAY, src.mr->lkey, IBV_SEND_SIGNALED, ah,
				    s[1].qp->qp_num, c.qkey) ||
		    wait_wc(s, 0, wc, 5000) != 1 || wc[0].status != IBV_WC_SUCCESS) {
			CHECK(0, "UD send %d", i);
			goto out;
		}
		if (i % 16 == 15)
			vt_sleep_ms(1);
	}
	for (;;) {
		int n = vt_poll(s[1].cq, 64, wc, 300);

		if (!n)
			break;
		for (int k = 0; k < n; k++) {
			const uint8_t *p = dst.p + wc[k].wr_id * (40 + UD_PAY) + 40;
			int seq;

			memcpy(&seq, p, sizeof(seq));
			if (wc[k].status != IBV_WC_SUCCESS || wc[k].byte_len != 40 + UD_PAY || seq < 0 || seq >= UD_N ||
			    vt_verify(p + sizeof(seq), UD_PAY - sizeof(seq), (uint32_t)seq) >= 0)
				bad++;
			else if (got < 3 * UD_N)
				order[got++] = seq;
		}
	}
	CHECK(bad == 0, "every UD datagram B received is one A sent, intact\t(%d bad)", bad);
	printf("RESULT ud=%d", got);
	for (int i = 0; i < got; i++)
		printf(" %d", order[i]);
	printf("\n");
	print_counters();
	vt_buf_free(&src);
	vt_buf_free(&dst);
out:
	if (ah)
		ibv_destroy_ah(ah);
	sides_teardown(s);
	return vt_end();
}

/* The work request just posted on side i completes without error (and,
 * for a SEND, the other side's receive of n bytes). */
static bool done(struct side s[2], int i, uint32_t n, bool send, int it, const char *what)
{
	struct ibv_wc wc;

	if (wait_wc(s, i, &wc, 30000) == 1 && wc.status == IBV_WC_SUCCESS &&
	    (!send || (wait_wc(s, !i, &wc, 30000) == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == n)))
		return true;
	return CHECK(0, "iteration %d: %s of %u bytes completes\t(%s)", it, what, n, vt_status_str(wc.status));
}

struct rc_op {
	int side;
	enum ibv_wr_opcode op;
	struct vt_buf *fill, *local, *remote, *check;
};

/* RC both ways under the faults of A's device; prints
 * "RESULT goodput_mbs=... bytes=... seconds=..." and the counters. */
#define RC_MAX 200000
static int child_rc(void)
{
	static const uint32_t sizes[] = { 1, 60, 4096, 4097, 12000, 65536, 200000, 777 };
	/* SR_FAULTS_ROUNDS=N: N rounds of the sizes (default 3), for steadier
	 * goodput figures than CI needs */
	const char *rounds = getenv("SR_FAULTS_ROUNDS");
	const int iters = (rounds && atoi(rounds) > 0 ? atoi(rounds) : 3) * (int)(sizeof(sizes) / sizeof(sizes[0]));
	struct side s[2];
	struct vt_qp_cfg c;
	struct vt_buf a_src, a_dst, b_dst, b_src, b_cnt, a_res;
	uint64_t bytes = 0, t0, ms;
	int bad[5] = { 0 }, failed = 0;
	const char *what[5] = { "SEND A->B", "RDMA WRITE A->B", "RDMA READ A<-B", "SEND B->A", "FETCH_ADD A->B" };

	vt_cfg_default(&c, IBV_QPT_RC);
	/* 34 ms: eight rounds without progress (retry_cnt 7) take 0.27 s, more
	 * than a peer's progress thread waits for a CPU on a loaded 2-core CI
	 * machine (at 4 ms such waits alone exhaust the retries now and then) */
	c.timeout = 13;
	c.max_send_wr = c.max_recv_wr = 16;
	c.cqe = 64;
	memset(s, 0, sizeof(s));
	if (!sides_setup(s, &c))
		goto out;
	unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC;
	if (vt_buf_alloc(&a_src, s[0].d.pd, RC_MAX, 0, (int)acc) ||
	    vt_buf_alloc(&a_dst, s[0].d.pd, RC_MAX, 0, (int)acc) || vt_buf_alloc(&a_res, s[0].d.pd, 8, 0, (int)acc) ||
	    vt_buf_alloc(&b_dst, s[1].d.pd, RC_MAX, 0, (int)acc) ||
	    vt_buf_alloc(&b_src, s[1].d.pd, RC_MAX, 0, (int)acc) || vt_buf_alloc(&b_cnt, s[1].d.pd, 8, 0, (int)acc)) {
		CHECK(0, "buffers");
		goto out;
	}
	/* side, opcode, what is filled, the local SGE, the remote buffer,
	 * what must then hold the data */
	const struct rc_op ops[4] = {
		{ 0, IBV_WR_SEND, &a_src, &a_src, NULL, &b_dst },
		{ 0, IBV_WR_RDMA_WRITE, &a_src, &a_src, &b_dst, &b_dst },
		{ 0, IBV_WR_RDMA_READ, &b_src, &a_dst, &b_src, &a_dst },
		{ 1, IBV_WR_SEND, &b_src, &b_src, NULL, &a_dst },
	};
	t0 = vt_now_ms();
	for (int i = 0; i < iters && !failed; i++) {
		uint32_t n = sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
		uint32_t sd = (uint32_t)i * 16;

		for (int k = 0; k < 4 && !failed; k++) {
			const struct rc_op *o = &ops[k];

			vt_fill(o->fill->p, n, sd + (uint32_t)k);
			memset(o->check->p, 0, n);
			if (o->op == IBV_WR_SEND)
				vt_post_recv(s[!o->side].qp, 1, o->check->p, n, o->check->mr->lkey);
			vt_post_send(s[o->side].qp, 2, o->op, o->local->p, n, o->local->mr->lkey, IBV_SEND_SIGNALED,
				     o->remote ? (uintptr_t)o->remote->p : 0, o->remote ? o->remote->mr->rkey : 0, 0);
			failed = !done(s, o->side, n, o->op == IBV_WR_SEND, i, what[k]);
			bad[k] += !failed && vt_verify(o->check->p, n, sd + (uint32_t)k) >= 0;
		}
		if (failed)
			break;
		/* FETCH_ADD: a replayed or lost atomic shows in the count */
		vt_post_atomic(s[0].qp, 7, IBV_WR_ATOMIC_FETCH_AND_ADD, a_res.p, a_res.mr->lkey, IBV_SEND_SIGNALED,
			       (uintptr_t)b_cnt.p, b_cnt.mr->rkey, 1, 0);
		if ((failed = !done(s, 0, 8, false, i, what[4])))
			break;
		bad[4] += *(uint64_t *)a_res.p != (uint64_t)i;
		bytes += 4ull * n + 8;
	}
	ms = vt_now_ms() - t0;
	if (!failed) {
		for (int k = 0; k < 5; k++)
			CHECK(bad[k] == 0, "%d x %s (1 B .. 200 KB): every byte as sent\t(%d corrupted)", iters,
			      what[k], bad[k]);
		CHECK_INT(*(uint64_t *)b_cnt.p, iters, "the FETCH_ADD counter counts each atomic once");
		printf("RESULT goodput_mbs=%.2f bytes=%llu seconds=%.3f\n",
		       (double)bytes / 1e6 / ((double)(ms ? ms : 1) / 1000.0), (unsigned long long)bytes,
		       (double)ms / 1000.0);
	}
	print_counters();
	vt_buf_free(&a_src);
	vt_buf_free(&a_dst);
	vt_buf_free(&a_res);
	vt_buf_free(&b_src);
	vt_buf_free(&b_dst);
	vt_buf_free(&b_cnt);
out:
	sides_teardown(s);
	return vt_end();
}

/* RC SEND ping-pong A -> B -> A, RTT_N round trips of 64 bytes, data
 * checked; prints "RESULT rtt_min_ms=... rtt_med_ms=...". */
#define RTT_N 9
static int child_rtt(void)
{
	struct side s[2];
	struct vt_qp_cfg c;
	struct vt_buf a, b;
	uint64_t rtt[RTT_N];
	int bad = 0;

	vt_cfg_default(&c, IBV_QPT_RC);
	c.timeout = 18; /* 1 s: what is delayed is late, not lost */
	memset(s, 0, sizeof(s));
	if (!sides_setup(s, &c))
		goto out;
	if (vt_buf_alloc(&a, s[0].d.pd, 128, 0, IBV_ACCESS_LOCAL_WRITE) ||
	    vt_buf_alloc(&b, s[1].d.pd, 128, 0, IBV_ACCESS_LOCAL_WRITE)) {
		CHECK(0, "buffers");
		goto out;
	}
	for (int i = 0; i < RTT_N; i++) {
		uint64_t t0 = vt_now_ms();

		vt_fill(a.p, 64, (uint32_t)i);
		vt_post_recv(s[1].qp, 1, b.p, 64, b.mr->lkey);
		vt_post_recv(s[0].qp, 1, a.p + 64, 64, a.mr->lkey);
		vt_post_send(s[0].qp, 2, IBV_WR_SEND, a.p, 64, a.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
		if (!done(s, 0, 64, true, i, "SEND A->B"))
			goto out;
		vt_post_send(s[1].qp, 3, IBV_WR_SEND, b.p, 64, b.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
		if (!done(s, 1, 64, true, i, "SEND B->A"))
			goto out;
		rtt[i] = vt_now_ms() - t0;
		bad += vt_verify(a.p + 64, 64, (uint32_t)i) >= 0;
	}
	CHECK(bad == 0, "%d round trips: the data came back intact\t(%d corrupted)", RTT_N, bad);
	for (int i = 1; i < RTT_N; i++)
		for (int k = i; k > 0 && rtt[k] < rtt[k - 1]; k--) {
			uint64_t t = rtt[k];
			rtt[k] = rtt[k - 1];
			rtt[k - 1] = t;
		}
	printf("RESULT rtt_min_ms=%llu rtt_med_ms=%llu\n", (unsigned long long)rtt[0],
	       (unsigned long long)rtt[RTT_N / 2]);
	vt_buf_free(&a);
	vt_buf_free(&b);
out:
	sides_teardown(s);
	return vt_end();
}

/* RC one-packet requests of A's, one at a time: each is a tail, the last
 * packet A sends before it waits, so that its loss is noticed by no gap,
 * only by a timer.  op: WRITEs A -> B, READs of B's memory, or
 * FETCH_ADDs on B's counter (a lost request, or a lost ACK of A's for B's
 * READ responses, waits for A's retransmission).  The QP's timeout is
 * 537 ms; prints "RESULT tail_total_ms=... tail_max_ms=..." and the
 * counters. */
#define TAIL_N 100
static int child_tail(enum ibv_wr_opcode op)
{
	struct side s[2];
	struct vt_qp_cfg c;
	struct vt_buf a, b;
	uint64_t total = 0, worst = 0;
	int bad = 0, i;
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			IBV_ACCESS_REMOTE_ATOMIC;

	vt_cfg_default(&c, IBV_QPT_RC);
	c.timeout = 17;
	memset(s, 0, sizeof(s));
	if (!sides_setup(s, &c))
		goto out;
	if (vt_buf_alloc(&a, s[0].d.pd, 512, 0, acc) || vt_buf_alloc(&b, s[1].d.pd, 512 * TAIL_N, 0, acc)) {
		CHECK(0, "buffers");
		goto out;
	}
	if (op == IBV_WR_RDMA_READ)
		for (i = 0; i < TAIL_N; i++)
			vt_fill(b.p + 512u * (unsigned)i, 512, (uint32_t)i);
	for (i = 0; i < TAIL_N; i++) {
		uint64_t t0 = vt_now_ms(), raddr = (uintptr_t)b.p + 512u * (unsigned)i;

		if (op == IBV_WR_ATOMIC_FETCH_AND_ADD)
			vt_post_atomic(s[0].qp, 2, op, a.p, a.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)b.p, b.mr->rkey,
				       1, 0);
		else {
			vt_fill(a.p, 512, op == IBV_WR_RDMA_WRITE ? (uint32_t)i : ~0u);
			vt_post_send(s[0].qp, 2, op, a.p, 512, a.mr->lkey, IBV_SEND_SIGNALED, raddr, b.mr->rkey, 0);
		}
		if (!done(s, 0, 512, false, i, "request A->B"))
			goto out;
		t0 = vt_now_ms() - t0;
		total += t0;
		worst = t0 > worst ? t0 : worst;
		/* a READ's data, an atomic's original value: as B holds them */
		if (op == IBV_WR_RDMA_READ)
			bad += vt_verify(a.p, 512, (uint32_t)i) >= 0;
		else if (op == IBV_WR_ATOMIC_FETCH_AND_ADD)
			bad += *(uint64_t *)a.p != (uint64_t)i;
	}
	if (op == IBV_WR_RDMA_WRITE)
		for (i = 0; i < TAIL_N; i++)
			bad += vt_verify(b.p + 512u * (unsigned)i, 512, (uint32_t)i) >= 0;
	else if (op == IBV_WR_ATOMIC_FETCH_AND_ADD)
		bad += *(uint64_t *)b.p != TAIL_N; /* each applied once */
	CHECK(bad == 0, "%d requests: every result as B held it\t(%d wrong)", TAIL_N, bad);
	printf("RESULT tail_total_ms=%llu tail_max_ms=%llu\n", (unsigned long long)total, (unsigned long long)worst);
	print_counters();
	vt_buf_free(&a);
	vt_buf_free(&b);
out:
	sides_teardown(s);
	return vt_end();
}

/* ---------------------------------------------------------------- */
/* parent side                                                        */
/* ---------------------------------------------------------------- */

static char tmpdir[256];

struct run {
	int status;
	char out[1 << 16];
};

/* Runs this program as `--child MODE` with rxe0's "faults = SPEC" (and
 * SOFTRDMA_FAULTS = env unless NULL); its output is kept in r->out. */
static void run_child(const char *mode, const char *spec, const char *env, struct run *r)
{
	char conf[512], self[512];
	int pfd[2];
	pid_t pid;
	size_t have = 0;
	FILE *f;
	ssize_t n;

	snprintf(conf, sizeof(conf), "%s/faults.conf", tmpdir);
	f = fopen(conf, "w");
	if (!f) {
		r->status = -1;
		snprintf(r->out, sizeof(r->out), "cannot write %s", conf);
		return;
	}
	fprintf(f,
		"crc = on\n[rxe0]\ntype = roce\nnetdev = lo\nloopback = off\n%s%s%s[rxe1]\ntype = roce\nnetdev = lo\n"
		"loopback = off\n",
		spec ? "faults = " : "", spec ? spec : "", spec ? "\n" : "");
	fclose(f);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = 0;
	if (pipe(pfd)) {
		r->status = -1;
		return;
	}
	pid = fork();
	if (pid == 0) {
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		close(pfd[0]);
		setenv("SOFTRDMA_CONF", conf, 1);
		if (env)
			setenv("SOFTRDMA_FAULTS", env, 1);
		else
			unsetenv("SOFTRDMA_FAULTS");
		execl(self, self, "--child", mode, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while (have + 1 < sizeof(r->out) && (n = read(pfd[0], r->out + have, sizeof(r->out) - 1 - have)) > 0)
		have += (size_t)n;
	r->out[have] = 0;
	close(pfd[0]);
	waitpid(pid, &r->status, 0);
}

static void dump(const struct run *r)
{
	const char *p = r->out;

	while (*p) {
		const char *e = strchr(p, '\n');
		int len = e ? (int)(e - p) : (int)strlen(p);

		printf("      | %.*s\n", len > 300 ? 300 : len, p);
		p += len + (e ? 1 : 0);
	}
}

static bool child_ok(const struct run *r, const char *what)
{
	bool ok = WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0;

	if (!CHECK(ok, "%s: the child's checks pass\t(status 0x%x)", what, r->status))
		dump(r);
	return ok;
}

/* The number after " key=" in the child's RESULT lines, or -1. */
static double result(const struct run *r, const char *key)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof(k), " %s=", key);
	p = strstr(r->out, k);
	return p ? strtod(p + strlen(k), NULL) : -1;
}

/* The UD arrival order, as the child printed it. */
static int ud_order(const struct run *r, int *seq, int max)
{
	const char *p = strstr(r->out, "RESULT ud=");
	char *e;
	int n;

	if (!p)
		return -1;
	n = (int)strtol(p + 10, &e, 10);
	for (int i = 0; i < n && i < max; i++)
		seq[i] = (int)strtol(e, &e, 10);
	return n;
}

static void test_ud(void)
{
	static int seq[3 * UD_N], seq2[3 * UD_N];
	struct run *r = calloc(1, sizeof(*r)), *r2 = calloc(1, sizeof(*r2));
	int n = -1, n2, inv = 0, dups = 0;
	bool seen[UD_N];

	SECTION("UD: what each fault does to datagrams (A on rxe0 with faults, B on rxe1 without)");
	run_child("ud", NULL, NULL, r);
	if (child_ok(r, "no faults")) {
		n = ud_order(r, seq, 3 * UD_N);
		CHECK_INT(n, UD_N, "no faults: all %d datagrams arrive", UD_N);
		CHECK(result(r, "fault_drop") == 0 && result(r, "fault_dup") == 0, "no faults: nothing injected");
	}

	run_child("ud", "drop=30%,seed=7", NULL, r);
	run_child("ud", "drop=30%,seed=7", NULL, r2);
	if (child_ok(r, "drop=30%,seed=7") && child_ok(r2, "drop=30%,seed=7 again")) {
		n = ud_order(r, seq, 3 * UD_N);
		n2 = ud_order(r2, seq2, 3 * UD_N);
		NOTE("drop=30%%: %d of %d arrived; fault_drop %.0f", n, UD_N, result(r, "fault_drop"));
		CHECK(n > UD_N / 2 && n < UD_N * 9 / 10, "drop=30%%: about 70%% arrive\t(%d of %d)", n, UD_N);
		CHECK_INT(result(r, "fault_drop"), UD_N - n, "drop=30%%: fault_drop counts each missing one");
		CHECK(n == n2 && !memcmp(seq, seq2, sizeof(int) * (size_t)n),
		      "drop=30%%,seed=7 twice: the same datagrams arrive (replayable)\t(%d and %d)", n, n2);
	}
	run_child("ud", NULL, "drop=30%,seed=8", r2);
	if (child_ok(r2, "SOFTRDMA_FAULTS=drop=30%,seed=8")) {
		n2 = ud_order(r2, seq2, 3 * UD_N);
		CHECK(n < 0 || n2 != n || memcmp(seq, seq2, sizeof(int) * (size_t)n),
		      "seed=8 (from SOFTRDMA_FAULTS, which overrides the file) drops other datagrams than seed=7");
		CHECK(strstr(r2->out, "fault injection on rxe0 (RoCE): drop=30%,seed=8 (from SOFTRDMA_FAULTS)") &&
			      strstr(r2->out, "fault injection on rxe1 (RoCE): drop=30%,seed=8"),
		      "SOFTRDMA_FAULTS applies to both devices and each says so once on stderr");
	}

	run_child("ud", "dup=30%", NULL, r);
	if (child_ok(r, "dup=30%")) {
		n = ud_order(r, seq, 3 * UD_N);
		memset(seen, 0, sizeof(seen));
		for (int i = 0; i < n; i++) {
			dups += seen[seq[i]];
			seen[seq[i]] = true;
		}
		NOTE("dup=30%%: %d arrived for %d sent; fault_dup %.0f", n, UD_N, result(r, "fault_dup"));
		CHECK(dups > UD_N / 10 && n == UD_N + dups,
		      "dup=30%%: every datagram arrives, some twice\t(%d, %d twice)", n, dups);
		CHECK_INT(result(r, "fault_dup"), dups, "dup=30%%: fault_dup counts each duplicate");
	}

	run_child("ud", "reorder=30%", NULL, r);
	if (child_ok(r, "reorder=30%")) {
		n = ud_order(r, seq, 3 * UD_N);
		for (int i = 1; i < n; i++)
			inv += seq[i] < seq[i - 1];
		NOTE("reorder=30%%: %d arrived, %d after a later one; fault_reorder %.0f", n, inv,
		     result(r, "fault_reorder"));
		CHECK(n == UD_N && inv > UD_N / 10, "reorder=30%%: all arrive, some after their successor\t(%d, %d)", n,
		      inv);
		/* one held back lands after a later one, or, when A sends nothing
		 * else for 100 us, merely late */
		CHECK(result(r, "fault_reorder") >= inv, "reorder=30%%: fault_reorder counts each one held back");
	}

	run_child("ud", "corrupt=30%", NULL, r);
	if (child_ok(r, "corrupt=30%")) {
		n = ud_order(r, seq, 3 * UD_N);
		NOTE("corrupt=30%%: %d arrived intact; fault_corrupt %.0f, crc_err at B %.0f", n,
		     result(r, "fault_corrupt"), result(r, "crc_err"));
		CHECK(n < UD_N * 9 / 10 && result(r, "fault_corrupt") > 0,
		      "corrupt=30%%: the damaged datagrams never reach B (those that do are intact)\t(%d of %d)", n,
		      UD_N);
		/* a flipped bit in the BTH's destination QP or the UDP payload's
		 * first bytes may take a datagram elsewhere; most meet the ICRC */
		CHECK(result(r, "crc_err") > 0 && result(r, "crc_err") <= result(r, "fault_corrupt"),
		      "corrupt=30%%: B's ICRC check caught them (crc_err %.0f of %.0f)", result(r, "crc_err"),
		      result(r, "fault_corrupt"));
	}
	/* jitter never reorders: each datagram waits 0 to 4 ms, in order */
	run_child("ud", "delay=2ms,jitter=2ms,seed=3", NULL, r);
	if (child_ok(r, "delay=2ms,jitter=2ms")) {
		n = ud_order(r, seq, 3 * UD_N);
		inv = 0;
		for (int i = 1; i < n; i++)
			inv += seq[i] < seq[i - 1];
		CHECK(n == UD_N && inv == 0,
		      "delay=2ms,jitter=2ms: all arrive, in the order sent\t(%d, %d out of order)", n, inv);
	}
	free(r);
	free(r2);
}

/* The delay fault: what A sends waits delay +- jitter, so that no round
 * trip can be quicker than delay - jitter (however busy the machine). */
static void test_delay(void)
{
	struct run *r = calloc(1, sizeof(*r));

	SECTION("delay: A's sends wait 40 ms +- 10 ms (RC SEND ping-pong, data checked)");
	run_child("rtt", NULL, NULL, r);
	if (child_ok(r, "no faults"))
		NOTE("no faults: round trip min %.0f ms, median %.0f ms", result(r, "rtt_min_ms"),
		     result(r, "rtt_med_ms"));
	run_child("rtt", "delay=40ms,jitter=10ms", NULL, r);
	if (child_ok(r, "delay=40ms,jitter=10ms")) {
		NOTE("delay=40ms,jitter=10ms: round trip min %.0f ms, median %.0f ms", result(r, "rtt_min_ms"),
		     result(r, "rtt_med_ms"));
		CHECK(result(r, "rtt_min_ms") >= 30, "no round trip under 30 ms\t(min %.0f ms)",
		      result(r, "rtt_min_ms"));
		CHECK(strstr(r->out, "what is sent waits 40.000 +- 10.000 ms, in order"),
		      "the process says what it delays");
	}
	free(r);
}

static void test_rc(void)
{
	static const struct {
		const char *spec, *counter;
	} cases[] = {
		{ NULL, NULL },
		{ "drop=1%", "fault_drop" },
		{ "drop=5%", "fault_drop" },
		{ "drop=10%", "fault_drop" },
		{ "drop=20%", "fault_drop" },
		{ "dup=5%", "fault_dup" },
		{ "reorder=5%", "fault_reorder" },
		{ "corrupt=5%", "fault_corrupt" },
		{ "drop=2%,dup=2%,reorder=2%,corrupt=2%,seed=99", "fault_corrupt" },
		{ "delay=1ms,jitter=1ms,drop=2%", "fault_drop" },
	};
	struct run *r = calloc(1, sizeof(*r));
	double base = 0;

	SECTION("RC: SEND/WRITE/READ/FETCH_ADD, every byte checked, A's packets faulted");
	printf("  %-46s %10s %8s %8s %10s %8s\n", "faults on rxe0", "goodput", "ratio", "seconds", "injected",
	       "retrans");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *spec = cases[i].spec;
		double g;

		run_child("rc", spec, NULL, r);
		if (!child_ok(r, spec ? spec : "no faults"))
			continue;
		g = result(r, "goodput_mbs");
		if (!spec)
			base = g;
		printf("  %-46s %7.2f MB/s %7.3f %8.2f %10.0f %8.0f\n", spec ? spec : "none (same run)", g,
		       base > 0 ? g / base : 0, result(r, "seconds"), spec ? result(r, cases[i].counter) : 0,
		       result(r, "retransmits"));
		if (spec)
			CHECK(result(r, cases[i].counter) > 0, "%s: %s counted (%.0f)", spec, cases[i].counter,
			      result(r, cases[i].counter));
		else
			CHECK(result(r, "fault_drop") == 0 && result(r, "fault_corrupt") == 0 &&
				      !strstr(r->out, "fault injection"),
			      "no faults: nothing injected, nothing announced");
	}
	free(r);
}

/* A lost last packet is found by the tail-loss probe or a retransmission
 * timeout from the round-trip time, within a few round trips, not the
 * QP's timeout: 100 tails at drop=10% lose about ten, each of which would
 * cost the 537 ms timeout, 5 s in all; a floor of 4 timeouts leaves room
 * for a loaded machine's stalls.  The same for READ and atomic requests,
 * which are asked again from the round-trip time as well. */
static void test_tail(const char *mode, const char *what)
{
	struct run *r = calloc(1, sizeof(*r));

	SECTION("RC: a lost last packet of a %s is recovered in round trips, not the QP's timeout", what);
	run_child(mode, "drop=10%,seed=3", NULL, r);
	if (child_ok(r, "drop=10%,seed=3")) {
		double drops = result(r, "fault_drop"), ms = result(r, "tail_total_ms");

		NOTE("%d one-packet %ss, %.0f packets dropped: %.0f ms in all, the slowest %.0f ms (QP timeout 537 ms)",
		     TAIL_N, what, drops, ms, result(r, "tail_max_ms"));
		CHECK(drops >= 5, "drop=10%%: packets were lost\t(%.0f)", drops);
		CHECK(ms >= 0 && ms < 4 * 537, "%.0f losses took less than 4 QP timeouts in all\t(%.0f ms)", drops, ms);
	}
	free(r);
}

static void test_tail_write(void)
{
	test_tail("tail", "WRITE");
}

static void test_tail_read(void)
{
	test_tail("tail-read", "READ");
}

static void test_tail_atomic(void)
{
	test_tail("tail-atomic", "FETCH_ADD");
}

static void test_bad_spec(void)
{
	struct run *r = calloc(1, sizeof(*r));

	SECTION("a bad SOFTRDMA_FAULTS");
	run_child("rc", NULL, "drop=5x", r);
	CHECK(!(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0), "drop=5x: the program finds no device");
	CHECK(strstr(r->out, "SOFTRDMA_FAULTS='drop=5x': drop=5x: expected a percentage"),
	      "drop=5x: stderr says what is wrong with SOFTRDMA_FAULTS");
	run_child("rc", NULL, "drop=60%,corrupt=50%", r);
	CHECK(strstr(r->out, "add up to 110%"), "rates adding up to 110%%: refused, and said why");
	free(r);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--child")) {
		vt_begin(argv[2], 240);
		if (!strcmp(argv[2], "tail"))
			return child_tail(IBV_WR_RDMA_WRITE);
		if (!strcmp(argv[2], "tail-read"))
			return child_tail(IBV_WR_RDMA_READ);
		if (!strcmp(argv[2], "tail-atomic"))
			return child_tail(IBV_WR_ATOMIC_FETCH_AND_ADD);
		return !strcmp(argv[2], "ud") ? child_ud() : !strcmp(argv[2], "rtt") ? child_rtt() : child_rc();
	}
	vt_begin_args("test_faults", 300, argc, argv);
	snprintf(tmpdir, sizeof(tmpdir), "%s/sr-faults.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!CHECK(mkdtemp(tmpdir), "temporary directory"))
		return vt_end();
	VT_RUN(test_bad_spec());
	VT_RUN(test_ud());
	VT_RUN(test_delay());
	VT_RUN(test_rc());
	VT_RUN(test_tail_write());
	VT_RUN(test_tail_read());
	VT_RUN(test_tail_atomic());
	{
		char p[600];

		snprintf(p, sizeof(p), "%s/faults.conf", tmpdir);
		unlink(p);
		rmdir(tmpdir);
	}
	return vt_end();
}
