/* test_limits: ibv_query_device's max_pd, max_cq, max_srq, max_ah,
 * max_mr, max_mw and max_qp are the device's real limits (issue 34).
 *
 * For each type: objects are made alternately in two contexts of the
 * device until one is refused.  Exactly max of them must exist then (the
 * kernel's rxe and siw count a device's objects, whichever context made
 * them), the refusal must be the kernel driver's errno -- rxe: EINVAL from
 * its object pools, ENOMEM for an MR; siw: ENOMEM -- in both contexts,
 * and once one object is destroyed another can be made.
 *
 * The Soft-RoCE device is tested, then (in a child with its own
 * configuration) the Soft-iWARP device, where QPs are left out: 65,536 of
 * them would take 750 MB, and their count is kept by the same code as the
 * RoCE device's. */
#include "vt.h"

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

static struct side S[2];
static union ibv_gid gid;
static char buf[4096] __attribute__((aligned(4096)));
static bool iwarp;

static void *make_pd(struct side *s)
{
	return ibv_alloc_pd(s->ctx);
}
static void *make_cq(struct side *s)
{
	return ibv_create_cq(s->ctx, 1, NULL, NULL, 0);
}
static void *make_mr(struct side *s)
{
	return ibv_reg_mr(s->pd, buf, sizeof(buf), 0);
}
static void *make_mw(struct side *s)
{
	return ibv_alloc_mw(s->pd, IBV_MW_TYPE_1);
}

static void *make_srq(struct side *s)
{
	struct ibv_srq_init_attr a = { .attr = { .max_wr = 1, .max_sge = 1 } };
	return ibv_create_srq(s->pd, &a);
}

static void *make_ah(struct side *s)
{
	struct ibv_ah_attr a = { .is_global = 1, .port_num = 1, .grh = { .dgid = gid, .hop_limit = 64 } };
	return ibv_create_ah(s->pd, &a);
}

static void *make_qp(struct side *s)
{
	struct ibv_qp_init_attr a = {
		.send_cq = s->cq,
		.recv_cq = s->cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 }
	};
	return ibv_create_qp(s->pd, &a);
}

static int kill_pd(void *o)
{
	return ibv_dealloc_pd(o);
}
static int kill_cq(void *o)
{
	return ibv_destroy_cq(o);
}
static int kill_mr(void *o)
{
	return ibv_dereg_mr(o);
}
static int kill_mw(void *o)
{
	return ibv_dealloc_mw(o);
}
static int kill_srq(void *o)
{
	return ibv_destroy_srq(o);
}
static int kill_ah(void *o)
{
	return ibv_destroy_ah(o);
}
static int kill_qp(void *o)
{
	return ibv_destroy_qp(o);
}

struct kind {
	const char *name;
	int max;
	int existing; /* of the type made before (the sides' PDs and CQs) */
	void *(*make)(struct side *);
	int (*kill)(void *);
	int rxe_errno; /* past the limit on the RoCE device; siw's is ENOMEM */
};

static void fill(const struct kind *k)
{
	int want = k->max - k->existing, n = 0, err = 0, who = 0;
	void **objs = calloc((size_t)want + 2, sizeof(*objs));
	uint64_t t0 = vt_now_ms();

	SECTION("%s: max %d, %d of them made already", k->name, k->max, k->existing);
	if (!CHECK(objs, "memory for %d pointers", want + 2))
		return;
	/* alternately in the two contexts, until the device refuses one */
	while (n <= want) {
		errno = 0;
		objs[n] = k->make(&S[n % 2]);
		if (!objs[n]) {
			err = errno;
			who = n % 2;
			break;
		}
		n++;
	}
	CHECK_INT(n, want, "%s: as many made as max_%s says, %d in each context", k->name, k->name, want / 2);
	int want_err = iwarp ? ENOMEM : k->rxe_errno;
	CHECK(n <= want && err == want_err, "%s: the next refused, errno %s (%s)\t(got %s after %d)", k->name,
	      strerror(want_err), iwarp ? "siw" : "rxe", strerror(err), n);
	if (n == want) {
		void *o = k->make(&S[!who]);
		int e = errno;
		CHECK_PTR_ERR(o, e, want_err, "%s: in the other context too", k->name);
		if (o)
			k->kill(o);
	}
	if (n > 0) {
		CHECK_RC(k->kill(objs[--n]), 0, "%s: one destroyed", k->name);
		objs[n] = k->make(&S[n % 2]);
		int e = errno;
		if (CHECK_PTR_ERR(objs[n], e, 0, "%s: then one can be made", k->name))
			n++;
	}
	int bad = 0;
	while (n > 0)
		bad += k->kill(objs[--n]) != 0;
	CHECK_INT(bad, 0, "%s: all destroyed", k->name);
	free(objs);
	NOTE("%s: %" PRIu64 " ms", k->name, vt_now_ms() - t0);
}

static void run(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device_attr a;

	if (!CHECK(list && list[0], "a device"))
		return;
	iwarp = list[0]->transport_type == IBV_TRANSPORT_IWARP;
	for (int i = 0; i < 2; i++) {
		S[i].ctx = ibv_open_device(list[0]);
		S[i].pd = S[i].ctx ? ibv_alloc_pd(S[i].ctx) : NULL;
		S[i].cq = S[i].ctx ? ibv_create_cq(S[i].ctx, 16, NULL, NULL, 0) : NULL;
		if (!CHECK(S[i].pd && S[i].cq, "context %d of %s, a PD and a CQ in it", i,
			   ibv_get_device_name(list[0])))
			return;
	}
	ibv_free_device_list(list);
	if (!CHECK_RC(ibv_query_device(S[0].ctx, &a), 0, "ibv_query_device") ||
	    !CHECK_RC(ibv_query_gid(S[0].ctx, 1, 0, &gid), 0, "ibv_query_gid"))
		return;

	const struct kind kinds[] = {
		{ "pd", a.max_pd, 2, make_pd, kill_pd, EINVAL },     { "cq", a.max_cq, 2, make_cq, kill_cq, EINVAL },
		{ "srq", a.max_srq, 0, make_srq, kill_srq, EINVAL }, { "ah", a.max_ah, 0, make_ah, kill_ah, EINVAL },
		{ "mr", a.max_mr, 0, make_mr, kill_mr, ENOMEM },     { "mw", a.max_mw, 0, make_mw, kill_mw, EINVAL },
		{ "qp", a.max_qp, 0, make_qp, kill_qp, EINVAL },
	};
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const struct kind *k = &kinds[i];
		if (!k->max) {
			NOTE("%s: max_%s is 0 (none on this device)", k->name, k->name);
			continue;
		}
		if (iwarp && k->make == make_qp) {
			NOTE("qp: not on the Soft-iWARP device (the RoCE device's count is the same code)");
			continue;
		}
		fill(k);
	}
	for (int i = 0; i < 2; i++) {
		ibv_destroy_cq(S[i].cq);
		ibv_dealloc_pd(S[i].pd);
		CHECK_RC(ibv_close_device(S[i].ctx), 0, "context %d closed", i);
	}
}

int main(int argc, char **argv)
{
	bool child = argc > 1 && !strcmp(argv[1], "--iwarp");

	vt_begin(child ? "test_limits (iWARP)" : "test_limits", 1100);
	run();
	if (!child)
		vt_iwarp_child(argv[0], "--iwarp", "the device's limits");
	return vt_end();
}
