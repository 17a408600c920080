/* reg_cost: what making a buffer reachable by RDMA costs, per buffer: an
 * ordinary MR (ibv_reg_mr + ibv_dereg_mr), an explicit ODP MR (the same
 * with IBV_ACCESS_ON_DEMAND), and an implicit ODP MR (registered once for
 * the whole address space: nothing per buffer).  Each buffer is mapped
 * and touched first; the median of ROUNDS timed pairs is printed as CSV:
 *   kind,bytes,ns_per_buffer
 * Usage: reg_cost [ROUNDS]  (through softrdma-run, or rdma-core's) */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* the median ns of rounds ibv_reg_mr + ibv_dereg_mr of buf, or 0 */
static uint64_t reg_pair(struct ibv_pd *pd, void *buf, size_t len, int access, int rounds)
{
	uint64_t *t = calloc((size_t)rounds, sizeof(*t)), med;

	for (int i = 0; i < rounds; i++) {
		uint64_t t0 = now_ns();
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, access);
		if (!mr || ibv_dereg_mr(mr)) {
			free(t);
			return 0;
		}
		t[i] = now_ns() - t0;
	}
	qsort(t, (size_t)rounds, sizeof(*t), cmp);
	med = t[rounds / 2];
	free(t);
	return med;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 201;
	static const size_t sizes[] = { 4096, 1 << 20, 64 << 20 };
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = n ? ibv_open_device(list[0]) : NULL;
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	int lw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	if (!pd || rounds < 1) {
		fprintf(stderr, "reg_cost: no device (or a bad ROUNDS)\n");
		return 1;
	}
	printf("kind,bytes,ns_per_buffer\n");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		void *buf = mmap(NULL, sizes[i], PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (buf == MAP_FAILED)
			return 1;
		memset(buf, 1, sizes[i]);
		printf("ordinary MR,%zu,%llu\n", sizes[i], (unsigned long long)reg_pair(pd, buf, sizes[i], lw, rounds));
		printf("explicit ODP MR,%zu,%llu\n", sizes[i],
		       (unsigned long long)reg_pair(pd, buf, sizes[i], lw | IBV_ACCESS_ON_DEMAND, rounds));
		printf("implicit ODP MR,%zu,0\n", sizes[i]);
		munmap(buf, sizes[i]);
	}
	uint64_t t0 = now_ns();
	struct ibv_mr *imr = ibv_reg_mr(pd, NULL, SIZE_MAX, lw | IBV_ACCESS_ON_DEMAND);
	uint64_t once = now_ns() - t0;
	printf("implicit ODP MR (its one registration),all,%llu\n", imr ? (unsigned long long)once : 0ull);
	if (imr)
		ibv_dereg_mr(imr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
