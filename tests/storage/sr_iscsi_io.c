/* sr-iscsi-io: writes, reads and verifies a SCSI disk through libiscsi, over
 * iscsi:// (TCP) or iser:// (iSER), with many commands in flight.
 *
 * What Debian's libiscsi-bin lacks for storage tests and benchmarks: it
 * ships iscsi-perf (sequential or random READs only) but not iscsi-dd, and
 * no tool writes a pattern and checks it.  Every block written holds a
 * pattern derived from its LBA and a seed, so a read anywhere can tell
 * whether each block holds what was written there (not merely some
 * written data).  With -l every acknowledged WRITE is logged as it
 * completes; -L verifies exactly those blocks later, after the initiator
 * or the target was killed.
 *
 * Exit status: 0 done (and verified), 1 data mismatch, 2 I/O or connection
 * error, 3 usage. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

enum mode {
	M_WRITE,
	M_READ,
	M_VERIFY,
	M_WRITE_VERIFY
};

struct slot {
	struct io *io;
	uint8_t *buf;
	uint64_t lba;
	uint32_t nblk;
	bool busy;
	struct scsi_iovec iov; /* a READ's data goes to buf */
	bool queueing;	       /* inside iscsi_*_task: see done_cb */
	int queue_status;
};

struct io {
	struct iscsi_context *iscsi;
	int lun;
	uint32_t bs;
	uint64_t nblocks; /* LUN size */
	enum mode mode;
	bool writing; /* the current pass writes */
	bool random;
	uint64_t seed;
	uint32_t io_blk; /* blocks per command */
	int depth;
	uint64_t first, count; /* region, in blocks */
	uint64_t next;	       /* next offset in the region (sequential) */
	uint64_t issued, done; /* blocks */
	double deadline;       /* -t: stop issuing then (0: one pass) */
	uint64_t ios, bytes;
	int in_flight;
	struct slot *slots;
	FILE *ack_log;
	/* -L: ranges to verify */
	uint64_t (*ranges)[2];
	size_t nranges, range_i;
	int stall_s;
	int failed; /* 1 mismatch, 2 error */
	uint64_t bad_blocks;
	double last_progress;
	uint64_t rnd;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Block lba's content: its LBA and the seed first (a misplaced block names
 * where it belongs), then words that depend on both. */
static void pattern(uint8_t *p, uint32_t bs, uint64_t lba, uint64_t seed)
{
	uint64_t *w = (uint64_t *)p;
	uint64_t h = mix64(lba ^ mix64(seed));

	w[0] = lba;
	w[1] = seed;
	for (uint32_t i = 2; i < bs / 8; i++)
		w[i] = h + i * 0x9e3779b97f4a7c15ull;
}

static bool check_block(struct io *io, const uint8_t *p, uint64_t lba)
{
	uint8_t want[io->bs];

	pattern(want, io->bs, lba, io->seed);
	if (!memcmp(p, want, io->bs))
		return true;
	if (io->bad_blocks++ < 5) {
		const uint64_t *g = (const uint64_t *)p;
		size_t off = 0;
		while (off < io->bs && p[off] == want[off])
			off++;
		fprintf(stderr,
			"sr-iscsi-io: LBA %" PRIu64 ": mismatch at byte %zu (block holds LBA %" PRIu64 ", seed %" PRIu64
			")\n",
			lba, off, g[0], g[1]);
	}
	return false;
}

static void issue(struct io *io);

static void fail_io(struct io *io, struct slot *s, int status, const char *what)
{
	fprintf(stderr, "sr-iscsi-io: %s of %u blocks at LBA %" PRIu64 " failed: status %#x: %s\n", what, s->nblk,
		s->lba, status, iscsi_get_error(io->iscsi));
	io->failed = 2;
}

static void done_cb(struct iscsi_context *iscsi, int status, void *command_data, void *private_data)
{
	struct slot *s = private_data;
	struct io *io = s->io;
	struct scsi_task *task = command_data;

	(void)iscsi;
	if (s->queueing) {
		/* libiscsi 1.19's iSER calls back from inside a failing
		 * iscsi_*_task, which then frees the task itself */
		s->queue_status = status;
		return;
	}
	io->in_flight--;
	s->busy = false;
	if (status != SCSI_STATUS_GOOD) {
		if (status == SCSI_STATUS_CHECK_CONDITION && task)
			fprintf(stderr, "sr-iscsi-io: sense %s/%s\n", scsi_sense_key_str(task->sense.key),
				scsi_sense_ascq_str(task->sense.ascq));
		fail_io(io, s, status, io->writing ? "WRITE" : "READ");
	} else {
		if (io->writing) {
			if (io->ack_log) {
				fprintf(io->ack_log, "%" PRIu64 " %u\n", s->lba, s->nblk);
				fflush(io->ack_log);
			}
		} else if (io->mode != M_READ) {
			/* the data landed in the slot's buffer (scsi_task_set_iov_in) */
			for (uint32_t i = 0; i < s->nblk; i++)
				if (!check_block(io, s->buf + (size_t)i * io->bs, s->lba + i) && !io->failed)
					io->failed = 1;
		}
		io->ios++;
		io->bytes += (uint64_t)s->nblk * io->bs;
		io->done += s->nblk;
		io->last_progress = now_s();
	}
	if (task)
		scsi_free_scsi_task(task);
	if (io->failed != 2)
		issue(io);
}

/* The next range to work on; false when the pass is over. */
static bool next_range(struct io *io, uint64_t *lba, uint32_t *nblk)
{
	if (io->ranges) {
		if (io->range_i >= io->nranges)
			return false;
		*lba = io->ranges[io->range_i][0];
		*nblk = (uint32_t)io->ranges[io->range_i][1];
		io->range_i++;
		return true;
	}
	if (io->deadline) {
		if (now_s() >= io->deadline)
			return false;
	} else if (io->issued >= io->count) {
		return false;
	}
	uint64_t off;
	if (io->random) {
		uint64_t slots = io->count / io->io_blk;
		io->rnd = mix64(io->rnd);
		off = (slots ? io->rnd % slots : 0) * io->io_blk;
	} else {
		if (io->next >= io->count)
			io->next = 0; /* -t: round again */
		off = io->next;
	}
	uint64_t n = io->count - off < io->io_blk ? io->count - off : io->io_blk;
	io->next = off + n;
	io->issued += n;
	*lba = io->first + off;
	*nblk = (uint32_t)n;
	return true;
}

static void issue(struct io *io)
{
	for (int i = 0; i < io->depth && io->in_flight < io->depth; i++) {
		struct slot *s = &io->slots[i];
		struct scsi_task *t;

		if (s->busy)
			continue;
		if (!next_range(io, &s->lba, &s->nblk))
			return;
		s->busy = true;
		io->in_flight++;
		s->queueing = true;
		s->queue_status = 0;
		uint32_t len = s->nblk * io->bs;
		if (io->writing) {
			for (uint32_t b = 0; b < s->nblk; b++)
				pattern(s->buf + (size_t)b * io->bs, io->bs, s->lba + b, io->seed);
			t = iscsi_write16_task(io->iscsi, io->lun, s->lba, s->buf, len, (int)io->bs, 0, 0, 0, 0, 0,
					       done_cb, s);
		} else {
			t = iscsi_read16_task(io->iscsi, io->lun, s->lba, len, (int)io->bs, 0, 0, 0, 0, 0, done_cb, s);
			/* into the slot's buffer, as iscsi-perf reads: over TCP
			 * libiscsi reads the Data-In straight into it (without,
			 * it grows a buffer of its own PDU by PDU); over iSER it
			 * copies from its registered buffer at completion.
			 * Setting it after queueing is safe: nothing is received
			 * before the next iscsi_service(). */
			if (t) {
				s->iov.iov_base = s->buf;
				s->iov.iov_len = len;
				scsi_task_set_iov_in(t, &s->iov, 1);
			}
		}
		s->queueing = false;
		if (!t) {
			io->in_flight--;
			s->busy = false;
			fail_io(io, s, s->queue_status ? s->queue_status : -1,
				io->writing ? "queueing a WRITE" : "queueing a READ");
			return;
		}
	}
}

/* One pass: until everything issued has completed, an error, or a stall. */
static int run_pass(struct io *io, const char *name)
{
	double t0 = now_s();

	io->ios = io->bytes = io->issued = io->done = 0;
	io->next = 0;
	io->range_i = 0;
	io->last_progress = t0;
	issue(io);
	while (io->in_flight > 0) {
		struct pollfd pfd = { .fd = iscsi_get_fd(io->iscsi), .events = (short)iscsi_which_events(io->iscsi) };
		int n = poll(&pfd, 1, 100);
		if (n < 0 && errno != EINTR) {
			perror("sr-iscsi-io: poll");
			return 2;
		}
		/* only on an event: libiscsi's iSER takes revents 0 for an error */
		if (n > 0 && iscsi_service(io->iscsi, pfd.revents) < 0) {
			fprintf(stderr, "sr-iscsi-io: %s: connection failed: %s\n", name, iscsi_get_error(io->iscsi));
			return 2;
		}
		if (io->failed == 2)
			return 2;
		if (now_s() - io->last_progress > io->stall_s) {
			fprintf(stderr, "sr-iscsi-io: %s: no command completed in %d s (%d in flight)\n", name,
				io->stall_s, io->in_flight);
			return 2;
		}
	}
	double dt = now_s() - t0;
	if (dt <= 0)
		dt = 1e-9;
	printf("%s: %" PRIu64 " bytes in %.3f s: %.1f MB/s, %.0f IOPS (%u-byte commands, %d in flight%s)\n", name,
	       io->bytes, dt, (double)io->bytes / dt / 1e6, (double)io->ios / dt, io->io_blk * io->bs, io->depth,
	       io->random ? ", random" : "");
	fflush(stdout);
	return io->failed;
}

static int load_ranges(struct io *io, const char *path)
{
	FILE *f = fopen(path, "r");
	uint64_t a, b;
	size_t cap = 0;

	if (!f) {
		fprintf(stderr, "sr-iscsi-io: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fscanf(f, "%" SCNu64 " %" SCNu64, &a, &b) == 2) {
		if (io->nranges == cap) {
			cap = cap ? cap * 2 : 1024;
			io->ranges = realloc(io->ranges, cap * sizeof(*io->ranges));
			if (!io->ranges) {
				fclose(f);
				return -1;
			}
		}
		if (b > io->io_blk || a + b > io->nblocks) {
			fprintf(stderr, "sr-iscsi-io: %s: bad range %" PRIu64 " %" PRIu64 "\n", path, a, b);
			fclose(f);
			return -1;
		}
		io->ranges[io->nranges][0] = a;
		io->ranges[io->nranges][1] = b;
		io->nranges++;
	}
	fclose(f);
	if (!io->ranges)
		io->ranges = malloc(sizeof(*io->ranges)); /* empty list: nothing to check, still a pass */
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: sr-iscsi-io [OPTIONS] iscsi://HOST[:PORT]/TARGET/LUN | iser://HOST[:PORT]/TARGET/LUN\n"
		   "  -m, --mode MODE        write, read, verify or write-verify (default)\n"
		   "  -b, --io-size BYTES    bytes per command (default 65536; K/M suffixes)\n"
		   "  -q, --depth N          commands in flight (default 16)\n"
		   "  -o, --offset BYTES     start of the region (default 0)\n"
		   "  -n, --length BYTES     length of the region (default: to the end of the LUN)\n"
		   "  -t, --time SECONDS     run for this long, going round the region, instead of one pass\n"
		   "  -r, --random           random command offsets within the region\n"
		   "  -s, --seed N           pattern seed (default 1): verify with the seed that wrote\n"
		   "  -l, --ack-log FILE     append \"LBA BLOCKS\" for every acknowledged WRITE\n"
		   "  -L, --verify-log FILE  verify exactly the ranges in FILE (as -l wrote them)\n"
		   "  -S, --sync             SYNCHRONIZE CACHE after writing\n"
		   "  -i, --initiator NAME   initiator name (default iqn.2026-01.org.softrdma:sr-iscsi-io)\n"
		   "  -T, --stall SECONDS    fail when no command completes for this long (default 20)\n"
		   "Exit status: 0 ok, 1 data mismatch, 2 I/O or connection error, 3 usage.\n");
}

static uint64_t parse_size(const char *s)
{
	char *e;
	uint64_t v = strtoull(s, &e, 0);
	switch (*e) {
	case 'k':
	case 'K':
		v <<= 10;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		break;
	case 0:
		break;
	default:
		fprintf(stderr, "sr-iscsi-io: bad size '%s'\n", s);
		exit(3);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "mode", required_argument, NULL, 'm' },
					      { "io-size", required_argument, NULL, 'b' },
					      { "depth", required_argument, NULL, 'q' },
					      { "offset", required_argument, NULL, 'o' },
					      { "length", required_argument, NULL, 'n' },
					      { "time", required_argument, NULL, 't' },
					      { "random", no_argument, NULL, 'r' },
					      { "seed", required_argument, NULL, 's' },
					      { "ack-log", required_argument, NULL, 'l' },
					      { "verify-log", required_argument, NULL, 'L' },
					      { "sync", no_argument, NULL, 'S' },
					      { "initiator", required_argument, NULL, 'i' },
					      { "stall", required_argument, NULL, 'T' },
					      { "help", no_argument, NULL, 'h' },
					      { 0, 0, 0, 0 } };
	struct io io = { .mode = M_WRITE_VERIFY, .seed = 1, .depth = 16, .stall_s = 20 };
	const char *initiator = "iqn.2026-01.org.softrdma:sr-iscsi-io", *ack = NULL, *vlog = NULL;
	uint64_t io_size = 65536, off = 0, len = 0;
	int seconds = 0, c;
	bool sync = false;

	while ((c = getopt_long(argc, argv, "m:b:q:o:n:t:rs:l:L:Si:T:h", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (!strcmp(optarg, "write"))
				io.mode = M_WRITE;
			else if (!strcmp(optarg, "read"))
				io.mode = M_READ;
			else if (!strcmp(optarg, "verify"))
				io.mode = M_VERIFY;
			else if (!strcmp(optarg, "write-verify"))
				io.mode = M_WRITE_VERIFY;
			else {
				fprintf(stderr, "sr-iscsi-io: unknown mode '%s'\n", optarg);
				return 3;
			}
			break;
		case 'b':
			io_size = parse_size(optarg);
			break;
		case 'q':
			io.depth = atoi(optarg);
			break;
		case 'o':
			off = parse_size(optarg);
			break;
		case 'n':
			len = parse_size(optarg);
			break;
		case 't':
			seconds = atoi(optarg);
			break;
		case 'r':
			io.random = true;
			break;
		case 's':
			io.seed = strtoull(optarg, NULL, 0);
			break;
		case 'l':
			ack = optarg;
			break;
		case 'L':
			vlog = optarg;
			break;
		case 'S':
			sync = true;
			break;
		case 'i':
			initiator = optarg;
			break;
		case 'T':
			io.stall_s = atoi(optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 3;
		}
	}
	if (optind != argc - 1 || io.depth < 1 || io.depth > 1024 || io.stall_s < 1 || seconds < 0) {
		usage(stderr);
		return 3;
	}
	io.rnd = io.seed;
	io.iscsi = iscsi_create_context(initiator);
	if (!io.iscsi) {
		fprintf(stderr, "sr-iscsi-io: cannot create a libiscsi context\n");
		return 2;
	}
	struct iscsi_url *url = iscsi_parse_full_url(io.iscsi, argv[optind]);
	if (!url) {
		fprintf(stderr, "sr-iscsi-io: bad URL %s: %s\n", argv[optind], iscsi_get_error(io.iscsi));
		return 3;
	}
	iscsi_set_session_type(io.iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_header_digest(io.iscsi, ISCSI_HEADER_DIGEST_NONE_CRC32C);
	/* a dead target is an error to report, not something to wait out */
	iscsi_set_noautoreconnect(io.iscsi, 1);
	if (iscsi_full_connect_sync(io.iscsi, url->portal, url->lun)) {
		fprintf(stderr, "sr-iscsi-io: login to %s failed: %s\n", argv[optind], iscsi_get_error(io.iscsi));
		return 2;
	}
	io.lun = url->lun;
	bool iser = url->transport == ISER_TRANSPORT;
	iscsi_destroy_url(url);

	struct scsi_task *t = iscsi_readcapacity16_sync(io.iscsi, io.lun);
	struct scsi_readcapacity16 *rc = t && t->status == SCSI_STATUS_GOOD ? scsi_datain_unmarshall(t) : NULL;
	if (!rc) {
		fprintf(stderr, "sr-iscsi-io: READ CAPACITY(16) failed: %s\n", iscsi_get_error(io.iscsi));
		return 2;
	}
	io.bs = rc->block_length;
	io.nblocks = rc->returned_lba + 1;
	scsi_free_scsi_task(t);
	if (io.bs < 16 || io.bs % 8 || io_size < io.bs || io_size % io.bs || off % io.bs || len % io.bs ||
	    off / io.bs >= io.nblocks) {
		fprintf(stderr,
			"sr-iscsi-io: sizes must be multiples of the %u-byte block inside the %" PRIu64 "-block LUN\n",
			io.bs, io.nblocks);
		return 3;
	}
	if (iser && io_size > 256 * 1024) {
		fprintf(stderr, "sr-iscsi-io: libiscsi's iSER moves at most 256 KiB per command\n");
		return 3;
	}
	io.io_blk = (uint32_t)(io_size / io.bs);
	io.first = off / io.bs;
	io.count = len ? len / io.bs : io.nblocks - io.first;
	if (io.first + io.count > io.nblocks) {
		fprintf(stderr, "sr-iscsi-io: the region ends beyond the LUN (%" PRIu64 " blocks)\n", io.nblocks);
		return 3;
	}
	if (vlog && load_ranges(&io, vlog))
		return 3;
	if (ack && !(io.ack_log = fopen(ack, "a"))) {
		fprintf(stderr, "sr-iscsi-io: %s: %s\n", ack, strerror(errno));
		return 3;
	}
	io.slots = calloc((size_t)io.depth, sizeof(*io.slots));
	for (int i = 0; io.slots && i < io.depth; i++) {
		io.slots[i].io = &io;
		io.slots[i].buf = malloc(io_size);
		if (!io.slots[i].buf)
			return 2;
	}
	if (!io.slots)
		return 2;
	printf("sr-iscsi-io: LUN %d, %" PRIu64 " blocks of %u bytes; region %" PRIu64 "+%" PRIu64 " blocks\n", io.lun,
	       io.nblocks, io.bs, io.first, io.count);

	int rc_ = 0;
	if (!vlog && (io.mode == M_WRITE || io.mode == M_WRITE_VERIFY)) {
		io.writing = true;
		io.deadline = seconds ? now_s() + seconds : 0;
		rc_ = run_pass(&io, "write");
		if (!rc_ && sync) {
			struct scsi_task *st = iscsi_synchronizecache10_sync(io.iscsi, io.lun, 0, 0, 0, 0);
			if (!st || st->status != SCSI_STATUS_GOOD) {
				fprintf(stderr, "sr-iscsi-io: SYNCHRONIZE CACHE failed: %s\n",
					iscsi_get_error(io.iscsi));
				rc_ = 2;
			}
			if (st)
				scsi_free_scsi_task(st);
		}
	}
	if (!rc_ && (vlog || io.mode != M_WRITE)) {
		io.writing = false;
		io.deadline = seconds && io.mode == M_READ ? now_s() + seconds : 0;
		rc_ = run_pass(&io, io.mode == M_READ ? "read" : "verify");
		if (rc_ == 1)
			printf("verify: %" PRIu64 " blocks differ from the pattern\n", io.bad_blocks);
		else if (!rc_ && io.mode != M_READ)
			printf("verify: %" PRIu64 " blocks match the pattern (seed %" PRIu64 ")\n", io.done, io.seed);
	}
	if (io.ack_log)
		fclose(io.ack_log);
	if (rc_ != 2)
		iscsi_logout_sync(io.iscsi);
	iscsi_destroy_context(io.iscsi);
	return rc_;
}
