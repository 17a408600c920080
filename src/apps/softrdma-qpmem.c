/* softrdma-qpmem [--no-rtr] N: what N RC QPs cost in one process.
 *
 * Creates N RC QPs (send and receive queues of 128 WRs), takes each to
 * RTR (which opens its flow socket) and reports:
 *  - the resident-set growth per QP;
 *  - the time of one ibv_create_qp and one ibv_modify_qp to RTR with
 *    N-1 QPs already there (the mean over the last 100);
 *  - the time of one ibv_poll_cq on an empty CQ with the N QPs idle;
 *  - the time of one ibv_destroy_qp with N QPs there (the first 100).
 * --no-rtr leaves the QPs in INIT (no sockets: N is then not bounded by
 * the open-file limit).  The open-file limit is raised as far as allowed.
 * A verbs program: it measures whatever libibverbs it is run with. */
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>

#include "common/rlimit.h"

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

static double clock_us(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}
static double now_us(void)
{
	return clock_us(CLOCK_MONOTONIC);
}
/* CPU time of the calling thread: on a loaded machine it shows the work
 * done per call where wall time shows mostly the wait for a CPU. */
static double cpu_us(void)
{
	return clock_us(CLOCK_THREAD_CPUTIME_ID);
}

int main(int argc, char **argv)
{
	bool rtr = true;
	int ai = 1;
	if (ai < argc && !strcmp(argv[ai], "--no-rtr")) {
		rtr = false;
		ai++;
	}
	int n = ai < argc ? atoi(argv[ai]) : 1000;
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (n <= 0 || !list || !list[0]) {
		fprintf(stderr, "usage: softrdma-qpmem [--no-rtr] N (and an RDMA device)\n");
		return 2;
	}
	sr_raise_nofile((rlim_t)n * 2 + 256); /* as far as it goes: the QPs show how far that is */
	struct ibv_context *ctx = ibv_open_device(list[0]);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 4096, NULL, NULL, 0) : NULL;
	if (!cq) {
		perror("softrdma-qpmem: device setup");
		return 1;
	}
	struct ibv_qp **qps = calloc((size_t)n, sizeof(*qps));
	int tail = n < 100 ? n : 100;
	double t_create = 0, t_rtr = 0, c_create = 0, c_rtr = 0;
	long before = rss_kib();
	for (int i = 0; i < n; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = cq,
			.recv_cq = cq,
			.qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 128, .max_recv_wr = 128, .max_send_sge = 1, .max_recv_sge = 1 }
		};
		double t0 = now_us(), c0 = cpu_us();
		qps[i] = ibv_create_qp(pd, &ia);
		if (i >= n - tail) {
			t_create += now_us() - t0;
			c_create += cpu_us() - c0;
		}
		if (!qps[i]) {
			perror("softrdma-qpmem: ibv_create_qp");
			return 1;
		}
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
					 .port_num = 1,
					 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE };
		if (ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			return 1;
		if (!rtr)
			continue;
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = qps[i]->qp_num;
		a.max_dest_rd_atomic = 1;
		a.min_rnr_timer = 12;
		a.ah_attr.is_global = 1;
		a.ah_attr.port_num = 1;
		ibv_query_gid(ctx, 1, 0, &a.ah_attr.grh.dgid);
		t0 = now_us();
		c0 = cpu_us();
		if (ibv_modify_qp(qps[i], &a,
				  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
			perror("softrdma-qpmem: modify to RTR");
			return 1;
		}
		if (i >= n - tail) {
			t_rtr += now_us() - t0;
			c_rtr += cpu_us() - c0;
		}
	}
	long after = rss_kib();
	printf("%d RC QPs (128+128 WRs, %s): RSS %ld KiB -> %ld KiB, per QP %.2f KiB\n", n, rtr ? "at RTR" : "in INIT",
	       before, after, (double)(after - before) / n);
	printf("create: %.1f us per ibv_create_qp at %d QPs (CPU %.1f us)\n", t_create / tail, n, c_create / tail);
	if (rtr)
		printf("rtr: %.1f us per ibv_modify_qp to RTR at %d QPs (CPU %.1f us)\n", t_rtr / tail, n,
		       c_rtr / tail);

	/* empty polls: at least 0.2 s and 20 calls */
	struct ibv_wc wc;
	long polls = 0;
	double t0 = now_us(), t1, c0 = cpu_us();
	do {
		if (ibv_poll_cq(cq, 1, &wc) != 0) {
			fprintf(stderr, "softrdma-qpmem: unexpected completion\n");
			return 1;
		}
		polls++;
		t1 = now_us();
	} while (polls < 20 || t1 - t0 < 200000);
	printf("poll: %.2f us per empty ibv_poll_cq with %d idle QPs (CPU %.2f us)\n", (t1 - t0) / polls, n,
	       (cpu_us() - c0) / polls);

	double t_destroy = 0, c_destroy = 0;
	for (int i = 0; i < n; i++) {
		double t = now_us(), c = cpu_us();
		if (ibv_destroy_qp(qps[i])) {
			perror("softrdma-qpmem: ibv_destroy_qp");
			return 1;
		}
		if (i < tail) {
			t_destroy += now_us() - t;
			c_destroy += cpu_us() - c;
		}
	}
	printf("destroy: %.1f us per ibv_destroy_qp at %d QPs (CPU %.1f us)\n", t_destroy / tail, n, c_destroy / tail);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(qps);
	return 0;
}
