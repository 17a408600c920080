/* test_timestamps: completion timestamps (issue 40, item 3).
 *
 * ibv_create_cq_ex with IBV_WC_EX_WITH_COMPLETION_TIMESTAMP (the device's
 * raw clock, hca_core_clock kHz, completion_timestamp_mask wide) and
 * _WALLCLOCK (ns since the epoch), ibv_query_rt_values_ex reading the
 * same raw clock.  Each completion's stamps must fall between the
 * caller's clock readings around the work that made it, never go back
 * within a CQ, and stay with their completions through a resize and a
 * mix of ibv_poll_cq and the extended polling API.  The raw clock is
 * the process's CLOCK_MONOTONIC at hca_core_clock kHz, so a stamp can be
 * compared with any reading of it (and with another CQ's stamps). */
#include "vt.h"

static struct vt_dev D;

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The device's raw clock in ns (hca_core_clock is in kHz). */
static uint64_t core_khz;
static uint64_t raw_to_ns(uint64_t raw)
{
	return (uint64_t)((unsigned __int128)raw * 1000000u / core_khz);
}

static void device_attrs(void)
{
	struct ibv_device_attr_ex a;

	memset(&a, 0, sizeof(a));
	CHECK_RC(ibv_query_device_ex(D.ctx, NULL, &a), 0, "ibv_query_device_ex");
	core_khz = a.hca_core_clock;
	CHECK(a.hca_core_clock > 0, "hca_core_clock is advertised\t(got %" PRIu64 " kHz)", a.hca_core_clock);
	CHECK(a.completion_timestamp_mask >= 0xffffffffull,
	      "completion_timestamp_mask covers at least 32 bits\t(got 0x%" PRIx64 ")", a.completion_timestamp_mask);
	if (!core_khz)
		core_khz = 1000000;
}

static void rt_values(void)
{
	struct ibv_values_ex v;
	uint64_t t0, t1, got, prev = 0;
	bool inside = true, ordered = true;

	for (int i = 0; i < 1000; i++) {
		memset(&v, 0, sizeof(v));
		v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
		t0 = clock_ns(CLOCK_MONOTONIC);
		int rc = ibv_query_rt_values_ex(D.ctx, &v);
		t1 = clock_ns(CLOCK_MONOTONIC);
		if (rc) {
			CHECK_RC(rc, 0, "ibv_query_rt_values_ex(RAW_CLOCK)");
			return;
		}
		got = raw_to_ns((uint64_t)v.raw_clock.tv_sec * 1000000000ull + (uint64_t)v.raw_clock.tv_nsec);
		inside &= got >= t0 && got <= t1;
		ordered &= got >= prev;
		prev = got;
	}
	CHECK(v.comp_mask == IBV_VALUES_MASK_RAW_CLOCK, "the answer's comp_mask says RAW_CLOCK\t(got 0x%x)",
	      v.comp_mask);
	CHECK(inside, "1000 raw clock readings each lie between CLOCK_MONOTONIC before and after the call");
	CHECK(ordered, "... and never go back");
	memset(&v, 0, sizeof(v));
	v.comp_mask = IBV_VALUES_MASK_RESERVED;
	CHECK_RC(ibv_query_rt_values_ex(D.ctx, &v), EINVAL, "ibv_query_rt_values_ex with an unknown mask bit");
}

static void unsupported_flags(void)
{
	static const struct {
		uint64_t flag;
		const char *name;
	} bad[] = {
		{ IBV_WC_EX_WITH_CVLAN, "CVLAN" },
		{ IBV_WC_EX_WITH_FLOW_TAG, "FLOW_TAG" },
		{ IBV_WC_EX_WITH_TM_INFO, "TM_INFO" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ibv_cq_init_attr_ex ca = { .cqe = 4, .wc_flags = IBV_WC_STANDARD_FLAGS | bad[i].flag };
		errno = 0;
		struct ibv_cq_ex *cq = ibv_create_cq_ex(D.ctx, &ca);
		CHECK_PTR_ERR(cq, errno, EOPNOTSUPP, "ibv_create_cq_ex with IBV_WC_EX_WITH_%s", bad[i].name);
		if (cq)
			ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	}
}

struct stamp {
	uint64_t wr_id, raw_ns, wall;
	int status;
};

/* Everything on cqx through the extended polling API (up to max). */
static int poll_ex(struct ibv_cq_ex *cqx, struct stamp *out, int want, uint64_t flags)
{
	struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
	int n = 0;
	uint64_t deadline = vt_now_ms() + VT_TIMEOUT_MS;

	while (n < want && vt_now_ms() < deadline) {
		int rc = ibv_start_poll(cqx, &pa);
		if (rc == ENOENT) {
			sched_yield();
			continue;
		}
		if (!CHECK_RC(rc, 0, "ibv_start_poll"))
			return n;
		do {
			out[n].wr_id = cqx->wr_id;
			out[n].status = cqx->status;
			out[n].raw_ns = flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP ?
						raw_to_ns(ibv_wc_read_completion_ts(cqx)) :
						0;
			out[n].wall = flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK ?
					      ibv_wc_read_completion_wallclock_ns(cqx) :
					      0;
			n++;
		} while (n < want && ibv_next_poll(cqx) == 0);
		ibv_end_poll(cqx);
	}
	return n;
}

/* n stamps all between lo and hi (per clock), in CQ order. */
static void check_window(const char *what, const struct stamp *s, int n, uint64_t flags, uint64_t mono0, uint64_t mono1,
			 uint64_t wall0, uint64_t wall1)
{
	bool raw_in = true, wall_in = true, raw_up = true, wall_up = true, ok = true;

	for (int i = 0; i < n; i++) {
		ok &= s[i].status == IBV_WC_SUCCESS;
		raw_in &= s[i].raw_ns >= mono0 && s[i].raw_ns <= mono1;
		wall_in &= s[i].wall >= wall0 && s[i].wall <= wall1;
		if (i) {
			raw_up &= s[i].raw_ns >= s[i - 1].raw_ns;
			wall_up &= s[i].wall >= s[i - 1].wall;
		}
	}
	CHECK(ok, "%s: %d completions, all successful", what, n);
	if (flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) {
		CHECK(raw_in,
		      "%s: each raw timestamp lies between CLOCK_MONOTONIC before the posts and after the "
		      "polls\t(first %" PRIu64 ", window %" PRIu64 "..%" PRIu64 ")",
		      what, s[0].raw_ns, mono0, mono1);
		CHECK(raw_up, "%s: raw timestamps never go back within the CQ", what);
	}
	if (flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK) {
		CHECK(wall_in,
		      "%s: each wall-clock timestamp lies between CLOCK_REALTIME before and after\t(first "
		      "%" PRIu64 ", window %" PRIu64 "..%" PRIu64 ")",
		      what, s[0].wall, wall0, wall1);
		CHECK(wall_up, "%s: wall-clock timestamps never go back within the CQ", what);
	}
}

/* RC sends between two QPs on CQs with the given timestamp flags. */
static void rc_traffic(uint64_t flags, const char *label)
{
	enum {
		N = 32
	};
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf sb, rb;
	struct stamp ss[N], rs[N];

	SECTION("RC sends, CQs with %s", label);
	vt_cfg_default(&c, IBV_QPT_RC);
	c.cq_ex = true;
	c.cq_ex_wc_flags = IBV_WC_STANDARD_FLAGS | flags;
	if (!vt_pair_setup(&D, &c, &p))
		goto out;
	if (vt_buf_alloc(&sb, D.pd, 64 * N, 0, IBV_ACCESS_LOCAL_WRITE) ||
	    vt_buf_alloc(&rb, D.pd, 64 * N, 0, IBV_ACCESS_LOCAL_WRITE)) {
		CHECK(0, "buffers");
		goto out;
	}
	for (int i = 0; i < N; i++)
		vt_post_recv(p.qp[1], 1000 + i, rb.p + 64 * i, 64, rb.mr->lkey);
	uint64_t mono0 = clock_ns(CLOCK_MONOTONIC), wall0 = clock_ns(CLOCK_REALTIME);
	for (int i = 0; i < N; i++)
		vt_post_send(p.qp[0], i, IBV_WR_SEND, sb.p + 64 * i, 64, sb.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
	int ns = poll_ex(p.scqx[0], ss, N, flags);
	int nr = poll_ex(p.rcqx[1], rs, N, flags);
	uint64_t mono1 = clock_ns(CLOCK_MONOTONIC), wall1 = clock_ns(CLOCK_REALTIME);
	CHECK_INT(ns, N, "send completions");
	CHECK_INT(nr, N, "receive completions");
	check_window("send CQ", ss, ns, flags, mono0, mono1, wall0, wall1);
	check_window("receive CQ", rs, nr, flags, mono0, mono1, wall0, wall1);
	vt_buf_free(&sb);
	vt_buf_free(&rb);
out:
	vt_pair_destroy(&p);
}

static void rc_raw(void)
{
	rc_traffic(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, "COMPLETION_TIMESTAMP");
}
static void rc_wallclock(void)
{
	rc_traffic(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK, "COMPLETION_TIMESTAMP_WALLCLOCK");
}
static void rc_both(void)
{
	rc_traffic(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK, "both");
}

/* Completions waiting in a CQ keep their stamps through ibv_resize_cq,
 * and a later completion's stamp is later still. */
static void resize_keeps_stamps(void)
{
	enum {
		N = 8
	};
	uint64_t flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf b;
	struct stamp first[N], after[N], last;

	vt_cfg_default(&c, IBV_QPT_RC);
	c.cq_ex = true;
	c.cqe = 16;
	c.cq_ex_wc_flags = IBV_WC_STANDARD_FLAGS | flags;
	if (!vt_pair_setup(&D, &c, &p))
		goto out;
	if (vt_buf_alloc(&b, D.pd, 64, 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)) {
		CHECK(0, "buffer");
		goto out;
	}
	/* 2N posted, N read, the rest left in the CQ across the resize */
	for (int i = 0; i < 2 * N; i++)
		vt_post_send(p.qp[0], i, IBV_WR_RDMA_WRITE, b.p, 8, b.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)b.p + 32,
			     b.mr->rkey, 0);
	int n1 = poll_ex(p.scqx[0], first, N, flags);
	vt_sleep_ms(50); /* the other N arrive meanwhile (if not, they are read after the resize all the same) */
	CHECK_RC(ibv_resize_cq(p.scq[0], 64), 0, "ibv_resize_cq(16 -> 64) with completions in it");
	int n2 = poll_ex(p.scqx[0], after, N, flags);
	CHECK_INT(n1 + n2, 2 * N, "all %d completions read around the resize", 2 * N);
	bool up = true;
	for (int i = 1; i < n2; i++)
		up &= after[i].raw_ns >= after[i - 1].raw_ns && after[i].wall >= after[i - 1].wall;
	CHECK(n1 && n2 && after[0].raw_ns >= first[n1 - 1].raw_ns && after[0].wall >= first[n1 - 1].wall && up,
	      "stamps after the resize continue those before it");
	CHECK(n2 && after[n2 - 1].raw_ns > 0 && after[n2 - 1].wall > 0, "and are not lost (zero)");
	vt_post_send(p.qp[0], 99, IBV_WR_RDMA_WRITE, b.p, 8, b.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)b.p + 32,
		     b.mr->rkey, 0);
	if (poll_ex(p.scqx[0], &last, 1, flags) == 1)
		CHECK(n2 && last.raw_ns >= after[n2 - 1].raw_ns, "a completion made after the resize is later");
	vt_buf_free(&b);
out:
	vt_pair_destroy(&p);
}

/* ibv_poll_cq on a CQ made with timestamps still returns its completions
 * (the stamps are only read through the extended API), and the next
 * extended poll's stamp is the next completion's, not a stale one. */
static void mixed_polling(void)
{
	uint64_t flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	struct vt_qp_cfg c;
	struct vt_pair p;
	struct vt_buf b;
	struct ibv_wc wc[2];
	struct stamp s;

	vt_cfg_default(&c, IBV_QPT_RC);
	c.cq_ex = true;
	c.cq_ex_wc_flags = IBV_WC_STANDARD_FLAGS | flags;
	if (!vt_pair_setup(&D, &c, &p))
		goto out;
	if (vt_buf_alloc(&b, D.pd, 64, 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)) {
		CHECK(0, "buffer");
		goto out;
	}
	vt_post_send(p.qp[0], 1, IBV_WR_RDMA_WRITE, b.p, 8, b.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)b.p + 32,
		     b.mr->rkey, 0);
	CHECK_INT(vt_poll(p.scq[0], 1, wc, VT_TIMEOUT_MS), 1, "ibv_poll_cq on a timestamping CQ");
	uint64_t mono0 = clock_ns(CLOCK_MONOTONIC);
	vt_post_send(p.qp[0], 2, IBV_WR_RDMA_WRITE, b.p, 8, b.mr->lkey, IBV_SEND_SIGNALED, (uintptr_t)b.p + 32,
		     b.mr->rkey, 0);
	if (CHECK_INT(poll_ex(p.scqx[0], &s, 1, flags), 1, "then ibv_start_poll"))
		CHECK(s.wr_id == 2 && s.raw_ns >= mono0, "it reads the second completion's own stamp");
	vt_buf_free(&b);
out:
	vt_pair_destroy(&p);
}

int main(int argc, char **argv)
{
	vt_begin_args("test_timestamps", 120, argc, argv);
	vt_seed(0x7157);
	if (!vt_open(&D))
		return vt_end();
	VT_RUN(device_attrs());
	VT_RUN(rt_values());
	VT_RUN(unsupported_flags());
	VT_RUN(rc_raw());
	VT_RUN(rc_wallclock());
	VT_RUN(rc_both());
	VT_RUN(resize_keeps_stamps());
	VT_RUN(mixed_polling());
	vt_close(&D);
	return vt_end();
}
