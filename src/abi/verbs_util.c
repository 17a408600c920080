/* Exported libibverbs functions that need no device: enum-to-string
 * helpers, rate conversions, fork protection, kernel-ABI struct
 * conversions and the sysfs helpers.
 *
 * Each behaves as rdma-core 44's own, down to return values on odd input,
 * because applications (and Debian's librdmacm, which imports several of
 * these) were written and tested against that behaviour. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include "abi/export.h"

/* rdma-core declared these in headers it no longer installs
 * (infiniband/marshall.h, driver.h); the ABI still carries them. */
SR_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
SR_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
SR_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
SR_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);
/* An enum's name from a sparse table; "unknown" outside it or in a gap
 * (the enums may be signed, so the index is compared as int). */
static const char *table_str(const char *const *str, size_t n, int i)
{
	if (i < 0 || (size_t)i >= n || !str[i])
		return "unknown";
	return str[i];
}

SR_EXPORT const char *ibv_get_sysfs_path(void);
SR_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

#define SR_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- enum to string ------------------------------------------------------ */

/* Strings are rdma-core's, byte for byte: scripts and tests grep for them
 * ("Work Request Flushed Error", "transport retry counter exceeded"). */

SR_EXPORT const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	static const char *const str[] = {
		[IBV_NODE_CA] = "InfiniBand channel adapter",
		[IBV_NODE_SWITCH] = "InfiniBand switch",
		[IBV_NODE_ROUTER] = "InfiniBand router",
		[IBV_NODE_RNIC] = "iWARP NIC",
		[IBV_NODE_USNIC] = "usNIC",
		[IBV_NODE_USNIC_UDP] = "usNIC UDP",
		[IBV_NODE_UNSPECIFIED] = "unspecified",
	};
	return table_str(str, SR_ARRAY_SIZE(str), (int)node_type);
}

SR_EXPORT const char *ibv_port_state_str(enum ibv_port_state port_state)
{
	static const char *const str[] = {
		[IBV_PORT_NOP] = "no state change (NOP)",
		[IBV_PORT_DOWN] = "down",
		[IBV_PORT_INIT] = "init",
		[IBV_PORT_ARMED] = "armed",
		[IBV_PORT_ACTIVE] = "active",
		[IBV_PORT_ACTIVE_DEFER] = "active defer",
	};
	return table_str(str, SR_ARRAY_SIZE(str), (int)port_state);
}

SR_EXPORT const char *ibv_event_type_str(enum ibv_event_type event)
{
	static const char *const str[] = {
		[IBV_EVENT_CQ_ERR] = "CQ error",
		[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
		[IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
		[IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
		[IBV_EVENT_COMM_EST] = "communication established",
		[IBV_EVENT_SQ_DRAINED] = "send queue drained",
		[IBV_EVENT_PATH_MIG] = "path migrated",
		[IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
		[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
		[IBV_EVENT_PORT_ACTIVE] = "port active",
		[IBV_EVENT_PORT_ERR] = "port error",
		[IBV_EVENT_LID_CHANGE] = "LID change",
		[IBV_EVENT_PKEY_CHANGE] = "P_Key change",
		[IBV_EVENT_SM_CHANGE] = "SM change",
		[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
		[IBV_EVENT_GID_CHANGE] = "GID table change",
		[IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};
	return table_str(str, SR_ARRAY_SIZE(str), (int)event);
}

SR_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const str[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};
	return table_str(str, SR_ARRAY_SIZE(str), (int)status);
}

/* ---- static rate conversions -------------------------------------------- */

/* One row per enum ibv_rate.  mult is the multiple of 2.5 Gb/s for the
 * IB SDR-based rates and -1 for rates that are not such a multiple
 * (FDR/EDR signalling with 64b/66b coding); mbps is the data rate the
 * kernel and rdma-core report for it (14062 for FDR x1, 25781 for EDR x1). */
static const struct {
	enum ibv_rate rate;
	int mult;
	int mbps;
} sr_rates[] = {
	{ IBV_RATE_2_5_GBPS, 1, 2500 },	    { IBV_RATE_5_GBPS, 2, 5000 },	  { IBV_RATE_10_GBPS, 4, 10000 },
	{ IBV_RATE_20_GBPS, 8, 20000 },	    { IBV_RATE_30_GBPS, 12, 30000 },	  { IBV_RATE_40_GBPS, 16, 40000 },
	{ IBV_RATE_60_GBPS, 24, 60000 },    { IBV_RATE_80_GBPS, 32, 80000 },	  { IBV_RATE_120_GBPS, 48, 120000 },
	{ IBV_RATE_14_GBPS, -1, 14062 },    { IBV_RATE_56_GBPS, -1, 56250 },	  { IBV_RATE_112_GBPS, -1, 112500 },
	{ IBV_RATE_168_GBPS, -1, 168750 },  { IBV_RATE_25_GBPS, -1, 25781 },	  { IBV_RATE_100_GBPS, -1, 103125 },
	{ IBV_RATE_200_GBPS, -1, 206250 },  { IBV_RATE_300_GBPS, -1, 309375 },	  { IBV_RATE_28_GBPS, 11, 28125 },
	{ IBV_RATE_50_GBPS, 20, 53125 },    { IBV_RATE_400_GBPS, 160, 425000 },	  { IBV_RATE_600_GBPS, 240, 637500 },
	{ IBV_RATE_800_GBPS, 320, 850000 }, { IBV_RATE_1200_GBPS, 480, 1275000 },
};

SR_EXPORT __attribute__((const)) int ibv_rate_to_mult(enum ibv_rate rate)
{
	for (size_t i = 0; i < SR_ARRAY_SIZE(sr_rates); i++)
		if (sr_rates[i].rate == rate)
			return sr_rates[i].mult;
	return -1;
}

SR_EXPORT __attribute__((const)) enum ibv_rate mult_to_ibv_rate(int mult)
{
	if (mult <= 0)
		return IBV_RATE_MAX;
	for (size_t i = 0; i < SR_ARRAY_SIZE(sr_rates); i++)
		if (sr_rates[i].mult == mult)
			return sr_rates[i].rate;
	return IBV_RATE_MAX;
}

SR_EXPORT __attribute__((const)) int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (size_t i = 0; i < SR_ARRAY_SIZE(sr_rates); i++)
		if (sr_rates[i].rate == rate)
			return sr_rates[i].mbps;
	return -1;
}

SR_EXPORT __attribute__((const)) enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < SR_ARRAY_SIZE(sr_rates); i++)
		if (sr_rates[i].mbps == mbps)
			return sr_rates[i].rate;
	return IBV_RATE_MAX;
}

/* ---- fork protection ------------------------------------------------------ */

/* softrdma places data by virtual address from inside the owning process,
 * so a fork cannot redirect it to the child's copy of a page the way DMA
 * to a pinned physical page can.  The calls still do what rdma-core's do
 * (MADV_DONTFORK on registered ranges once ibv_fork_init() was called),
 * because applications observe them: the child of a protected process
 * must not see registered buffers, and ibv_fork_init() after a
 * registration must fail with EINVAL.
 *
 * Like rdma-core, this is process-wide state: fork() is process-wide.
 * fork_lock protects all the fork_* variables below. */

/* A maximal run of pages [first, last] (inclusive byte bounds, so the top
 * of the address space needs no special case) that the same number of
 * live ibv_dontfork_range() calls cover.  Runs with count 0 are not kept.
 * The count is signed because rdma-core lets an unmatched
 * ibv_dofork_range() drive it below zero, and then the next
 * ibv_dontfork_range() on that page does not madvise. */
struct fork_span {
	uintptr_t first;
	uintptr_t last;
	long refcnt;
};

static pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fork_span *fork_spans; /* sorted by first, disjoint */
static size_t fork_nspans;
static bool fork_enabled;    /* ibv_fork_init() succeeded */
static bool fork_too_late;   /* a range call came before ibv_fork_init() */
static bool fork_huge_pages; /* RDMAV_HUGEPAGES_SAFE: align to the mapping's page size */
static long fork_page_size;

/* rdma-core's check_env(): set and not "0". */
static bool env_true(const char *name)
{
	const char *v = getenv(name);

	return v && strcmp(v, "0") != 0;
}

/* Page size of the mapping holding addr, from /proc/self/smaps, for hugetlb
 * memory: madvise on a huge page mapping must cover whole huge pages. */
static unsigned long mapping_page_size(const void *addr)
{
	unsigned long size = (unsigned long)fork_page_size;
	char line[512];
	bool in_mapping = false;
	FILE *f = fopen("/proc/self/smaps", "re");

	if (!f)
		return size;
	while (fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;
		unsigned long kb;

		if (!in_mapping) {
			if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 && (uintptr_t)addr >= lo &&
			    (uintptr_t)addr < hi)
				in_mapping = true;
			continue;
		}
		if (sscanf(line, "KernelPageSize: %lu kB", &kb) == 1) {
			size = kb * 1024;
			break;
		}
	}
	fclose(f);
	return size;
}

SR_EXPORT int ibv_fork_init(void)
{
	void *probe;
	unsigned long size;
	int ret = 0;

	pthread_mutex_lock(&fork_lock);
	if (env_true("RDMAV_HUGEPAGES_SAFE"))
		fork_huge_pages = true;
	if (fork_enabled)
		goto out;
	/* Ranges registered earlier were not marked; protecting only later ones
	 * would be a false promise. */
	if (fork_too_late) {
		ret = EINVAL;
		goto out;
	}
	fork_page_size = sysconf(_SC_PAGESIZE);
	if (fork_page_size <= 0) {
		ret = errno ? errno : EINVAL;
		goto out;
	}
	if (posix_memalign(&probe, (size_t)fork_page_size, (size_t)fork_page_size)) {
		ret = ENOMEM;
		goto out;
	}
	/* A kernel without MADV_DONTFORK cannot give the protection asked for. */
	size = fork_huge_pages ? mapping_page_size(probe) : (unsigned long)fork_page_size;
	{
		void *base = (void *)((uintptr_t)probe & ~(uintptr_t)(size - 1));

		if (madvise(base, size, MADV_DONTFORK) || madvise(base, size, MADV_DOFORK))
			ret = ENOSYS;
	}
	free(probe);
	if (!ret)
		fork_enabled = true;
out:
	pthread_mutex_unlock(&fork_lock);
	return ret;
}

SR_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	bool enabled;

	pthread_mutex_lock(&fork_lock);
	enabled = fork_enabled;
	pthread_mutex_unlock(&fork_lock);
	return enabled ? IBV_FORK_ENABLED : IBV_FORK_DISABLED;
}

/* rdma-core's library init enables protection when asked by environment;
 * doing it at load time is the same moment for every program that has not
 * yet registered memory, which is the only time it can succeed. */
__attribute__((constructor)) static void fork_env_init(void)
{
	if (env_true("RDMAV_FORK_SAFE") || env_true("IBV_FORK_SAFE"))
		if (ibv_fork_init())
			fprintf(stderr, "libibverbs: Warning: fork()-safety requested but init failed\n");
}

/* MADV_DOFORK on a range that is partly unmapped (a buffer freed before its
 * MR was deregistered) fails as a whole; undo what can be undone page by
 * page and report success, since the caller cannot do better. */
static int fork_madvise(uintptr_t first, uintptr_t last, int advice, unsigned long pgsz)
{
	size_t len = last - first + 1;

	if (!madvise((void *)first, len, advice))
		return 0;
	if (advice == MADV_DONTFORK)
		return -1;
	for (uintptr_t p = first; p <= last && p >= first; p += pgsz)
		madvise((void *)p, pgsz, advice);
	return 0;
}

struct fork_seg {
	uintptr_t first, last;
	long refcnt; /* before this call */
};

/* Called with fork_lock held. */
static int fork_apply(uintptr_t first, uintptr_t last, int inc, unsigned long pgsz)
{
	int advice = inc > 0 ? MADV_DONTFORK : MADV_DOFORK;
	int undo = inc > 0 ? MADV_DOFORK : MADV_DONTFORK;
	size_t max_segs = 2 * fork_nspans + 1, nsegs = 0, nnew = 0, done;
	struct fork_seg *segs = malloc(max_segs * sizeof(*segs));
	struct fork_span *next = malloc((fork_nspans + max_segs + 2) * sizeof(*next));
	uintptr_t cur = first;
	bool covered = false;
	int ret = -1;

	if (!segs || !next)
		goto out;

	/* Split [first, last] into pieces of uniform count. */
	for (size_t i = 0; i < fork_nspans && !covered; i++) {
		const struct fork_span *s = &fork_spans[i];
		uintptr_t lo, hi;

		if (s->last < cur)
			continue;
		if (s->first > last)
			break;
		if (s->first > cur)
			segs[nsegs++] = (struct fork_seg){ cur, s->first - 1, 0 };
		lo = s->first > cur ? s->first : cur;
		hi = s->last < last ? s->last : last;
		segs[nsegs++] = (struct fork_seg){ lo, hi, s->refcnt };
		if (hi == last)
			covered = true;
		else
			cur = hi + 1;
	}
	if (!covered)
		segs[nsegs++] = (struct fork_seg){ cur, last, 0 };

	/* madvise only where protection starts or ends, so a page shared by two
	 * registrations stays protected until both are gone. */
	for (done = 0; done < nsegs; done++) {
		struct fork_seg *g = &segs[done];
		bool edge = inc > 0 ? g->refcnt == 0 : g->refcnt == 1;

		if (edge && fork_madvise(g->first, g->last, advice, pgsz))
			break;
	}
	if (done < nsegs) {
		/* Leave memory and counts as they were before the call. */
		for (size_t j = 0; j < done; j++) {
			bool edge = inc > 0 ? segs[j].refcnt == 0 : segs[j].refcnt == 1;

			if (edge)
				fork_madvise(segs[j].first, segs[j].last, undo, pgsz);
		}
		goto out;
	}

	/* Rebuild the span list: untouched spans, the parts of spans sticking
	 * out of [first, last], and the updated pieces; then merge neighbours
	 * with equal counts so the list stays minimal. */
	for (size_t i = 0; i < fork_nspans; i++) {
		const struct fork_span *s = &fork_spans[i];

		if (s->last < first) {
			next[nnew++] = *s;
		} else if (s->first < first) {
			next[nnew++] = (struct fork_span){ s->first, first - 1, s->refcnt };
		}
	}
	for (size_t j = 0; j < nsegs; j++) {
		long n = segs[j].refcnt + inc;

		if (n)
			next[nnew++] = (struct fork_span){ segs[j].first, segs[j].last, n };
	}
	for (size_t i = 0; i < fork_nspans; i++) {
		const struct fork_span *s = &fork_spans[i];

		if (s->first > last)
			next[nnew++] = *s;
		else if (s->last > last)
			next[nnew++] = (struct fork_span){ last + 1, s->last, s->refcnt };
	}
	{
		size_t w = 0;

		for (size_t r = 0; r < nnew; r++) {
			if (w && next[w - 1].refcnt == next[r].refcnt && next[w - 1].last + 1 == next[r].first)
				next[w - 1].last = next[r].last;
			else
				next[w++] = next[r];
		}
		nnew = w;
	}
	free(fork_spans);
	fork_spans = next;
	fork_nspans = nnew;
	next = NULL;
	ret = 0;
out:
	free(segs);
	free(next);
	return ret;
}

static int fork_range(void *base, size_t size, int inc)
{
	unsigned long pgsz;
	uintptr_t first, last, end;
	int ret;

	pthread_mutex_lock(&fork_lock);
	if (!fork_enabled) {
		fork_too_late = true;
		pthread_mutex_unlock(&fork_lock);
		return 0;
	}
	if (!base || !size) {
		pthread_mutex_unlock(&fork_lock);
		return 0;
	}
	pgsz = fork_huge_pages ? mapping_page_size(base) : (unsigned long)fork_page_size;
	first = (uintptr_t)base & ~(uintptr_t)(pgsz - 1);
	if (__builtin_add_overflow((uintptr_t)base, size - 1, &end)) {
		pthread_mutex_unlock(&fork_lock);
		return -1;
	}
	last = end | (uintptr_t)(pgsz - 1);
	ret = fork_apply(first, last, inc, pgsz);
	pthread_mutex_unlock(&fork_lock);
	return ret;
}

SR_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	return fork_range(base, size, +1);
}

SR_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	return fork_range(base, size, -1);
}

/* ---- kernel ABI struct conversions ----------------------------------------- */

SR_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid.raw));
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

SR_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
	/* qp_state is left alone, as rdma-core leaves it: librdmacm's
	 * rdma_init_qp_attr() sets it before the call and relies on that. */
	dst->cur_qp_state = src->cur_qp_state;
	dst->path_mtu = src->path_mtu;
	dst->path_mig_state = src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = src->qp_access_flags;

	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;

	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);

	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

/* Both path record layouts keep LIDs, P_Key and flow label in network byte
 * order, so every field copies unchanged. */
SR_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid.raw));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid.raw));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
	dst->packet_life_time_selector = src->packet_life_time_selector;
}

SR_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src)
{
	memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
	dst->packet_life_time_selector = src->packet_life_time_selector;
}

/* ---- sysfs ------------------------------------------------------------------ */

static pthread_once_t sysfs_once = PTHREAD_ONCE_INIT;
static const char *sysfs_path;

static void sysfs_path_init(void)
{
	const char *env = NULL;
	char *dup;
	size_t len;

	/* A set-uid program must not let its caller point it at other files. */
	if (getuid() == geteuid())
		env = getenv("SYSFS_PATH");
	if (!env) {
		sysfs_path = "/sys";
		return;
	}
	dup = strndup(env, IBV_SYSFS_PATH_MAX);
	if (!dup)
		return; /* NULL with errno set, as rdma-core */
	len = strlen(dup);
	while (len > 0 && dup[len - 1] == '/')
		dup[--len] = '\0';
	sysfs_path = dup;
}

SR_EXPORT const char *ibv_get_sysfs_path(void)
{
	pthread_once(&sysfs_once, sysfs_path_init);
	return sysfs_path;
}

/* Returns the length read with a trailing newline stripped, or -1.  A file
 * that fills buf exactly without a newline is refused rather than handed
 * back unterminated. */
SR_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char *path;
	ssize_t len;
	int fd;

	if (asprintf(&path, "%s/%s", dir, file) < 0)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return -1;
	len = read(fd, buf, size);
	close(fd);

	if (len > 0) {
		if (buf[len - 1] == '\n')
			buf[--len] = '\0';
		else if ((size_t)len < size)
			buf[len] = '\0';
		else
			return -1;
	} else if (len == 0 && size > 0) {
		buf[0] = '\0';
	}
	return (int)len;
}

/* ---- providers ------------------------------------------------------------ */

typedef struct ibv_device *(*sr_driver_init_func_1_1)(const char *uverbs_sys_path, int abi_version);

/* Kept only so that binaries linked against libibverbs 1.1 (old libfabric
 * usnic providers) still load; softrdma loads no providers.  Exported as a
 * non-default version exactly as rdma-core does, so nothing new can link
 * against it. */
SR_EXPORT void sr_ibv_register_driver_1_1(const char *name, sr_driver_init_func_1_1 init_func);
__asm__(".symver sr_ibv_register_driver_1_1, ibv_register_driver@IBVERBS_1.1");

SR_EXPORT void sr_ibv_register_driver_1_1(const char *name, sr_driver_init_func_1_1 init_func)
{
}
