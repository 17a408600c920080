/* softrdma-qpmem N: memory cost of an RC QP.  Creates N RC QPs (send and
 * receive queues of 128 WRs), takes each to RTR (which opens its flow
 * socket), and reports the resident-set growth per QP.  A verbs program:
 * it measures whatever libibverbs it is run with. */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (n <= 0 || !list || !list[0]) {
		fprintf(stderr, "usage: softrdma-qpmem N (and an RDMA device)\n");
		return 2;
	}
	struct ibv_context *ctx = ibv_open_device(list[0]);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 4096, NULL, NULL, 0) : NULL;
	if (!cq) {
		perror("softrdma-qpmem: device setup");
		return 1;
	}
	struct ibv_qp **qps = calloc((size_t)n, sizeof(*qps));
	long before = rss_kib();
	for (int i = 0; i < n; i++) {
		struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = 128, .max_recv_wr = 128,
							.max_send_sge = 1, .max_recv_sge = 1 } };
		qps[i] = ibv_create_qp(pd, &ia);
		if (!qps[i]) {
			perror("softrdma-qpmem: ibv_create_qp");
			return 1;
		}
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
					 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE };
		if (ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			return 1;
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = qps[i]->qp_num;
		a.max_dest_rd_atomic = 1;
		a.min_rnr_timer = 12;
		a.ah_attr.is_global = 1;
		a.ah_attr.port_num = 1;
		ibv_query_gid(ctx, 1, 0, &a.ah_attr.grh.dgid);
		if (ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
			perror("softrdma-qpmem: modify to RTR");
			return 1;
		}
	}
	long after = rss_kib();
	printf("%d RC QPs (128+128 WRs, at RTR): RSS %ld KiB -> %ld KiB, per QP %.2f KiB\n", n, before, after,
	       (double)(after - before) / n);
	for (int i = 0; i < n; i++)
		ibv_destroy_qp(qps[i]);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(qps);
	return 0;
}
