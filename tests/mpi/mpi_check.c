/* mpi_check: an MPI job whose every result is checked, for the Open MPI
 * conformance test (tests/conformance/t_mpi.sh) and the benchmark.
 *
 *   mpi_check            ping-pong between ranks 0 and 1 (1 B .. 4 MiB,
 *                        every byte checked both ways), allreduce (sum,
 *                        max) and alltoall (every block checked) over
 *                        all ranks; prints "mpi_check: N checks passed,
 *                        M failed" on rank 0 and exits 1 on a failure.
 *   mpi_check --pingpong SIZE ITERS
 *                        timing only (ranks 0 and 1): prints
 *                        "pingpong,SIZE,ITERS,<half round trip us>,<MB/s>".
 *   mpi_check --allreduce SIZE ITERS
 *                        timing only (all ranks, SIZE bytes of double, sum):
 *                        prints "allreduce,SIZE,ITERS,<us per call>,<MB/s>".
 * Timed runs may follow one another in one job (one MPI start-up):
 *   mpi_check --pingpong 8 1000 --allreduce 1048576 100
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;
static long npass, nfail;

static void check(int ok, const char *fmt, long a, long b)
{
	if (ok) {
		npass++;
		return;
	}
	nfail++;
	fprintf(stderr, "mpi_check: rank %d: FAIL: ", rank);
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
}

/* byte i of a message from rank r in round k */
static uint8_t pat(size_t i, int r, int k)
{
	return (uint8_t)((i * 131u + (size_t)r * 17u + (size_t)k * 29u) ^ (i >> 8));
}

static void pingpong_checked(void)
{
	if (nranks < 2)
		return;
	size_t max = 4u << 20;
	uint8_t *buf = malloc(max);
	for (size_t len = 1, k = 0; len <= max; len *= 4, k++) {
		int rounds = len >= (1u << 20) ? 3 : 20;
		for (int n = 0; n < rounds; n++) {
			if (rank == 0) {
				for (size_t i = 0; i < len; i++)
					buf[i] = pat(i, 0, n);
				MPI_Send(buf, (int)len, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
				memset(buf, 0, len);
				MPI_Status st;
				MPI_Recv(buf, (int)len, MPI_BYTE, 1, 8, MPI_COMM_WORLD, &st);
				int cnt;
				MPI_Get_count(&st, MPI_BYTE, &cnt);
				size_t bad = len;
				for (size_t i = 0; i < len && bad == len; i++)
					if (buf[i] != pat(i, 1, n))
						bad = i;
				check(cnt == (int)len && bad == len, "ping-pong: reply of %ld bytes wrong at byte %ld",
				      (long)len, (long)bad);
			} else if (rank == 1) {
				MPI_Status st;
				MPI_Recv(buf, (int)len, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &st);
				size_t bad = len;
				for (size_t i = 0; i < len && bad == len; i++)
					if (buf[i] != pat(i, 0, n))
						bad = i;
				check(bad == len, "ping-pong: message of %ld bytes wrong at byte %ld", (long)len,
				      (long)bad);
				for (size_t i = 0; i < len; i++)
					buf[i] = pat(i, 1, n);
				MPI_Send(buf, (int)len, MPI_BYTE, 0, 8, MPI_COMM_WORLD);
			}
		}
		(void)k;
	}
	free(buf);
}

static void allreduce_checked(void)
{
	enum {
		N = 100000
	};
	int64_t *in = malloc(N * sizeof(*in)), *out = malloc(N * sizeof(*out));
	for (int i = 0; i < N; i++)
		in[i] = (int64_t)i * (rank + 1) + rank;
	MPI_Allreduce(in, out, N, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
	long bad = -1;
	int64_t s = (int64_t)nranks * (nranks + 1) / 2, r = (int64_t)nranks * (nranks - 1) / 2;
	for (int i = 0; i < N && bad < 0; i++)
		if (out[i] != (int64_t)i * s + r)
			bad = i;
	check(bad < 0, "allreduce SUM of %ld int64: wrong at element %ld", (long)N, bad);
	MPI_Allreduce(in, out, N, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
	bad = -1;
	for (int i = 0; i < N && bad < 0; i++)
		if (out[i] != (int64_t)i * nranks + nranks - 1)
			bad = i;
	check(bad < 0, "allreduce MAX of %ld int64: wrong at element %ld", (long)N, bad);
	free(in);
	free(out);
}

static void alltoall_checked(void)
{
	for (int per = 1; per <= 65536; per *= 16) {
		size_t n = (size_t)per * (size_t)nranks;
		int32_t *snd = malloc(n * sizeof(*snd)), *rcv = malloc(n * sizeof(*rcv));
		for (int d = 0; d < nranks; d++)
			for (int i = 0; i < per; i++)
				snd[(size_t)d * per + i] = (rank << 24) ^ (d << 16) ^ i;
		memset(rcv, 0xff, n * sizeof(*rcv));
		MPI_Alltoall(snd, per, MPI_INT32_T, rcv, per, MPI_INT32_T, MPI_COMM_WORLD);
		long bad = -1;
		for (int s = 0; s < nranks && bad < 0; s++)
			for (int i = 0; i < per; i++)
				if (rcv[(size_t)s * per + i] != ((s << 24) ^ (rank << 16) ^ i)) {
					bad = (long)s * per + i;
					break;
				}
		check(bad < 0, "alltoall of %ld int32 per rank pair: wrong at element %ld", (long)per, bad);
		free(snd);
		free(rcv);
	}
}

static int pingpong_timed(size_t len, int iters)
{
	if (nranks < 2)
		return 1;
	char *buf = calloc(1, len ? len : 1);
	for (int w = 0; w < 2; w++) {
		int n = w ? iters : iters / 10 + 1;
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int i = 0; i < n; i++) {
			if (rank == 0) {
				MPI_Send(buf, (int)len, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
				MPI_Recv(buf, (int)len, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			} else if (rank == 1) {
				MPI_Recv(buf, (int)len, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Send(buf, (int)len, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
			}
		}
		double t = MPI_Wtime() - t0;
		if (w && rank == 0) {
			double half_us = t / n / 2 * 1e6;
			printf("pingpong,%zu,%d,%.2f,%.1f\n", len, n, half_us, (double)len / (half_us * 1e-6) / 1e6);
		}
	}
	free(buf);
	return 0;
}

static int allreduce_timed(size_t len, int iters)
{
	size_t n = len / sizeof(double) ? len / sizeof(double) : 1;
	double *in = calloc(n, sizeof(*in)), *out = calloc(n, sizeof(*out));
	for (int w = 0; w < 2; w++) {
		int k = w ? iters : iters / 10 + 1;
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int i = 0; i < k; i++)
			MPI_Allreduce(in, out, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		double t = MPI_Wtime() - t0;
		if (w && rank == 0) {
			double us = t / k * 1e6;
			printf("allreduce,%zu,%d,%.2f,%.1f\n", len, k, us, (double)len / (us * 1e-6) / 1e6);
		}
	}
	free(in);
	free(out);
	return 0;
}

/* argv: zero or more "--pingpong|--allreduce SIZE ITERS"; -1 when malformed */
static int timed_runs(int argc, char **argv)
{
	int rc = 0;
	if ((argc - 1) % 3)
		return -1;
	for (int i = 1; i + 2 < argc; i += 3)
		if (strcmp(argv[i], "--pingpong") && strcmp(argv[i], "--allreduce"))
			return -1;
	for (int i = 1; i + 2 < argc && !rc; i += 3) {
		size_t len = (size_t)strtoull(argv[i + 1], NULL, 0);
		int iters = atoi(argv[i + 2]);
		rc = !strcmp(argv[i], "--pingpong") ? pingpong_timed(len, iters) : allreduce_timed(len, iters);
		fflush(stdout);
	}
	return rc;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (argc > 1) {
		int rc = timed_runs(argc, argv);
		if (rc < 0 && rank == 0)
			fprintf(stderr, "usage: mpi_check [--pingpong|--allreduce SIZE ITERS]...\n");
		MPI_Finalize();
		return rc ? 1 : 0;
	}
	pingpong_checked();
	allreduce_checked();
	alltoall_checked();
	long tot[2] = { npass, nfail }, sum[2];
	MPI_Reduce(tot, sum, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_check: %d ranks: %ld checks passed, %ld failed\n", nranks, sum[0], sum[1]);
	MPI_Bcast(sum, 2, MPI_LONG, 0, MPI_COMM_WORLD);
	MPI_Finalize();
	return sum[1] ? 1 : 0;
}
