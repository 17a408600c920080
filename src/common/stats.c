/* Per-process counter files: the library's side (a file per process, a
 * slot per QP) and softrdma-cfg's (snapshot of a network namespace).
 * See stats.h for the layout and the rules. */
#include "common/stats.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const sr_stat_names[SR_STAT_N] = {
	[SR_STAT_SENT_PKTS] = "sent_pkts",	   [SR_STAT_RCVD_PKTS] = "rcvd_pkts",
	[SR_STAT_SENT_BYTES] = "sent_bytes",	   [SR_STAT_RCVD_BYTES] = "rcvd_bytes",
	[SR_STAT_RETRANSMITS] = "retransmits",	   [SR_STAT_OUT_OF_SEQ] = "out_of_seq_request",
	[SR_STAT_RCVD_SEQ_ERR] = "rcvd_seq_err",   [SR_STAT_SEND_RNR] = "send_rnr_err",
	[SR_STAT_RCVD_RNR] = "rcvd_rnr_err",	   [SR_STAT_CRC_ERR] = "crc_err",
	[SR_STAT_FAULT_DROP] = "fault_drop",	   [SR_STAT_FAULT_DUP] = "fault_dup",
	[SR_STAT_FAULT_REORDER] = "fault_reorder", [SR_STAT_FAULT_CORRUPT] = "fault_corrupt",
	[SR_STAT_FAULT_RESET] = "fault_reset",	   [SR_STAT_FAULT_TRUNCATE] = "fault_truncate",
};

#define SR_TOTALS_ROWS (4 * SR_MAX_DEVICES)

int sr_stats_dir(char *buf, size_t len, bool create)
{
	const char *env = getenv("SOFTRDMA_RUNTIME_DIR");
	struct stat st;
	int n;

	if (env && env[0])
		n = snprintf(buf, len, "%s", env);
	else if (!stat("/dev/shm", &st) && S_ISDIR(st.st_mode))
		n = snprintf(buf, len, "/dev/shm/softrdma-%u", (unsigned)getuid());
	else
		n = snprintf(buf, len, "%s/softrdma-%u", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
			     (unsigned)getuid());
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	if (create && mkdir(buf, 0700) < 0 && errno != EEXIST)
		return -errno;
	/* someone else's directory in a shared /dev/shm is not ours to use */
	if (stat(buf, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != getuid())
		return -EPERM;
	return 0;
}

uint64_t sr_stats_netns(void)
{
	struct stat st;

	return stat("/proc/self/ns/net", &st) ? 0 : (uint64_t)st.st_ino;
}

uint64_t sr_stats_start_time(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long t = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* comm may hold spaces and parentheses: fields count from the last ')' */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
		return 0;
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &t) != 1)
		return 0;
	return t;
}

/* ---- totals of exited processes: <dir>/<netns>.totals ---- */

struct sr_totals {
	uint32_t magic, version;
	struct sr_stats_dev dev[SR_TOTALS_ROWS];
};

static int totals_open(const char *dir, uint64_t netns)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%llu.totals", dir, (unsigned long long)netns);
	return open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
}

static int totals_read(int fd, struct sr_totals *t)
{
	ssize_t n = pread(fd, t, sizeof(*t), 0);

	if (n != (ssize_t)sizeof(*t) || t->magic != SR_STATS_MAGIC || t->version != SR_STATS_VERSION) {
		memset(t, 0, sizeof(*t));
		t->magic = SR_STATS_MAGIC;
		t->version = SR_STATS_VERSION;
	}
	return 0;
}

static void totals_add(struct sr_totals *t, const char *name, uint32_t type, const struct sr_stat_ctrs *c)
{
	for (int i = 0; i < SR_TOTALS_ROWS; i++) {
		struct sr_stats_dev *d = &t->dev[i];

		if (!d->name[0]) {
			snprintf(d->name, sizeof(d->name), "%s", name);
			d->type = type;
		}
		if (!strcmp(d->name, name)) {
			for (int k = 0; k < SR_STAT_N; k++)
				d->c.v[k] += c->v[k];
			return;
		}
	}
}

/* A device's counters in one file: its row plus its live slots. */
static void file_dev_sum(const struct sr_stats_file *f, int dev, struct sr_stat_ctrs *out)
{
	*out = f->dev[dev].c;
	for (uint32_t i = 0; i < f->hiwater && i < f->nslots; i++)
		if (f->qp[i].in_use && f->qp[i].dev == dev)
			for (int k = 0; k < SR_STAT_N; k++)
				out->v[k] += f->qp[i].c.v[k];
}

/* Fold the counter file PATH (a process that is exiting or gone) into the
 * namespace's totals and remove it.  Serialised by the totals file's lock:
 * whoever comes second finds the file gone. */
static void fold_file(const char *dir, const char *path, const struct sr_stats_file *f)
{
	struct sr_totals t;
	int tfd = totals_open(dir, f->netns);
	struct stat st;

	if (tfd < 0)
		return;
	if (flock(tfd, LOCK_EX) < 0 || stat(path, &st) < 0 || unlink(path) < 0) {
		close(tfd);
		return;
	}
	totals_read(tfd, &t);
	for (int d = 0; d < SR_MAX_DEVICES; d++) {
		struct sr_stat_ctrs c;

		if (!f->dev[d].name[0])
			continue;
		file_dev_sum(f, d, &c);
		totals_add(&t, f->dev[d].name, f->dev[d].type, &c);
	}
	if (pwrite(tfd, &t, sizeof(t), 0) != (ssize_t)sizeof(t)) {
		/* the totals are lost, the live counters are not */
	}
	close(tfd);
}

/* ---- writer ---- */

static pthread_mutex_t w_lock = PTHREAD_MUTEX_INITIALIZER; /* protects the w_* state and slot allocation */
static struct sr_stats_file *w_file;
static size_t w_size;
static char w_dir[256], w_path[320];
static bool w_tried, w_atfork;
struct sr_stat_ctrs sr_stats_sink;

static void w_child(void)
{
	/* the parent's file is the parent's: a child that uses verbs makes its own */
	w_file = NULL;
	w_tried = false;
	pthread_mutex_init(&w_lock, NULL);
}

static __attribute__((destructor)) void w_exit(void)
{
	if (w_file && w_file->pid == getpid())
		fold_file(w_dir, w_path, w_file);
}

static struct sr_stats_file *w_get(void)
{
	size_t size = sizeof(struct sr_stats_file) + SR_STATS_QP_SLOTS * sizeof(struct sr_stats_qp);
	struct sr_stats_file *f;
	char comm[16] = "";
	int fd;

	if (w_file || w_tried)
		return w_file;
	w_tried = true;
	if (!w_atfork) {
		pthread_atfork(NULL, NULL, w_child);
		w_atfork = true;
	}
	if (sr_stats_dir(w_dir, sizeof(w_dir), true))
		return NULL;
	snprintf(w_path, sizeof(w_path), "%s/%ld.stats", w_dir, (long)getpid());
	fd = open(w_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return NULL;
	if (ftruncate(fd, (off_t)size) < 0) {
		close(fd);
		unlink(w_path);
		return NULL;
	}
	f = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (f == MAP_FAILED) {
		unlink(w_path);
		return NULL;
	}
	fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, comm, sizeof(comm) - 1);

		close(fd);
		comm[n > 0 ? n : 0] = 0;
		comm[strcspn(comm, "\n")] = 0;
	}
	f->version = SR_STATS_VERSION;
	f->pid = getpid();
	f->nslots = SR_STATS_QP_SLOTS;
	f->start_time = sr_stats_start_time(getpid());
	f->netns = sr_stats_netns();
	memcpy(f->comm, comm, sizeof(f->comm));
	/* the magic last: a reader takes the file as valid from then on */
	__atomic_store_n(&f->magic, SR_STATS_MAGIC, __ATOMIC_RELEASE);
	w_file = f;
	w_size = size;
	return f;
}

static int w_dev_row(struct sr_stats_file *f, const char *dev, enum sr_dev_type type)
{
	for (int i = 0; i < SR_MAX_DEVICES; i++) {
		if (!f->dev[i].name[0]) {
			snprintf(f->dev[i].name, sizeof(f->dev[i].name), "%s", dev);
			f->dev[i].type = (uint32_t)type;
			return i;
		}
		if (!strcmp(f->dev[i].name, dev))
			return i;
	}
	return -1;
}

static void w_seq_bump(struct sr_stats_file *f)
{
	__atomic_fetch_add(&f->seq, 1, __ATOMIC_ACQ_REL);
}

struct sr_stat_ctrs *sr_stats_dev_ctrs(const char *dev, enum sr_dev_type type)
{
	struct sr_stat_ctrs *c = &sr_stats_sink;
	struct sr_stats_file *f;
	int row;

	pthread_mutex_lock(&w_lock);
	f = w_get();
	if (f && (row = w_dev_row(f, dev, type)) >= 0)
		c = &f->dev[row].c;
	pthread_mutex_unlock(&w_lock);
	return c;
}

struct sr_stat_ctrs *sr_stats_qp_open(const char *dev, enum sr_dev_type type, uint32_t qpn, int qp_type, int *slot)
{
	struct sr_stats_file *f;
	struct sr_stat_ctrs *c = NULL;
	int row;

	*slot = -1;
	pthread_mutex_lock(&w_lock);
	f = w_get();
	if (f && (row = w_dev_row(f, dev, type)) >= 0) {
		for (uint32_t i = 0; i < f->nslots; i++) {
			struct sr_stats_qp *q = &f->qp[i];

			if (q->in_use)
				continue;
			w_seq_bump(f);
			memset(&q->c, 0, sizeof(q->c));
			q->qpn = qpn;
			q->dev = (uint16_t)row;
			q->qp_type = (uint8_t)qp_type;
			q->in_use = 1;
			if (i >= f->hiwater)
				f->hiwater = i + 1;
			w_seq_bump(f);
			*slot = (int)i;
			c = &q->c;
			break;
		}
	}
	pthread_mutex_unlock(&w_lock);
	if (!c) {
		/* no file or no free slot: private counters, folded in at close */
		c = calloc(1, sizeof(*c));
		if (!c)
			return &sr_stats_sink; /* counted nowhere, but never NULL */
		pthread_mutex_lock(&w_lock);
		if (f && (row = w_dev_row(f, dev, type)) >= 0)
			*slot = -2 - row;
		pthread_mutex_unlock(&w_lock);
	}
	return c;
}

void sr_stats_qp_close(int slot, struct sr_stat_ctrs *c)
{
	struct sr_stats_file *f;

	if (!c || c == &sr_stats_sink)
		return;
	pthread_mutex_lock(&w_lock);
	f = w_file;
	if (slot >= 0 && f && c == &f->qp[slot].c) {
		struct sr_stats_qp *q = &f->qp[slot];
		struct sr_stat_ctrs *row = &f->dev[q->dev].c;

		w_seq_bump(f);
		for (int k = 0; k < SR_STAT_N; k++)
			sr_stat_add(row, k, __atomic_load_n(&q->c.v[k], __ATOMIC_RELAXED));
		q->in_use = 0;
		w_seq_bump(f);
		c = NULL;
	} else if (slot <= -2 && f) {
		for (int k = 0; k < SR_STAT_N; k++)
			sr_stat_add(&f->dev[-2 - slot].c, k, c->v[k]);
	}
	pthread_mutex_unlock(&w_lock);
	if (c)
		free(c);
}

/* ---- reader ---- */

static void snap_add_dev(struct sr_stats_snap *s, const char *name, uint32_t type, const struct sr_stat_ctrs *c)
{
	int i;

	for (i = 0; i < s->ndev; i++)
		if (!strcmp(s->dev[i].name, name))
			break;
	if (i == s->ndev) {
		if (s->ndev >= (int)(sizeof(s->dev) / sizeof(s->dev[0])))
			return;
		memset(&s->dev[i], 0, sizeof(s->dev[i]));
		snprintf(s->dev[i].name, sizeof(s->dev[i].name), "%s", name);
		s->dev[i].type = type;
		s->ndev++;
	}
	for (int k = 0; k < SR_STAT_N; k++)
		s->dev[i].c.v[k] += c->v[k];
}

/* A consistent copy of a live file (retrying while a slot changes). */
static struct sr_stats_file *copy_file(const struct sr_stats_file *m, size_t size)
{
	struct sr_stats_file *f = malloc(size);

	if (!f)
		return NULL;
	for (int tries = 0; tries < 100; tries++) {
		uint32_t s1 = __atomic_load_n(&m->seq, __ATOMIC_ACQUIRE), hw;
		size_t n;

		if (s1 & 1) {
			usleep(100);
			continue;
		}
		hw = __atomic_load_n(&m->hiwater, __ATOMIC_ACQUIRE);
		if (hw > m->nslots)
			hw = m->nslots;
		n = sizeof(*m) + hw * sizeof(m->qp[0]);
		if (n > size)
			break;
		memcpy(f, m, n);
		f->hiwater = hw;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&m->seq, __ATOMIC_ACQUIRE) == s1)
			return f;
	}
	free(f);
	return NULL;
}

int sr_stats_snapshot(struct sr_stats_snap *s)
{
	char dir[256], path[600];
	uint64_t netns = sr_stats_netns();
	struct dirent *de;
	struct sr_totals t;
	DIR *d;
	int fd, rc;

	memset(s, 0, sizeof(*s));
	rc = sr_stats_dir(dir, sizeof(dir), false);
	if (rc)
		return rc == -ENOENT ? 0 : rc; /* nobody has used softrdma yet */
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		const struct sr_stats_file *m;
		struct sr_stats_file *f;
		struct stat st;
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		bool alive;

		if (pid <= 0 || strcmp(end, ".stats"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) < 0 || (size_t)st.st_size < sizeof(*m)) {
			close(fd);
			continue;
		}
		m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		if (m == MAP_FAILED)
			continue;
		f = NULL;
		if (__atomic_load_n(&m->magic, __ATOMIC_ACQUIRE) == SR_STATS_MAGIC && m->version == SR_STATS_VERSION &&
		    m->pid == pid && m->nslots <= SR_STATS_QP_SLOTS && m->netns == netns)
			f = copy_file(m, (size_t)st.st_size);
		munmap((void *)m, (size_t)st.st_size);
		if (!f)
			continue;
		alive = f->start_time && sr_stats_start_time((pid_t)pid) == f->start_time;
		if (!alive) {
			fold_file(dir, path, f);
			free(f);
			continue;
		}
		s->nproc++;
		for (int dv = 0; dv < SR_MAX_DEVICES; dv++) {
			struct sr_stat_ctrs c;

			if (!f->dev[dv].name[0])
				continue;
			file_dev_sum(f, dv, &c);
			snap_add_dev(s, f->dev[dv].name, f->dev[dv].type, &c);
		}
		for (uint32_t i = 0; i < f->hiwater; i++) {
			struct sr_stats_qp *q = &f->qp[i];
			struct sr_stats_snap_qp *o;

			if (!q->in_use || q->dev >= SR_MAX_DEVICES)
				continue;
			if (s->nqp == s->qp_cap) {
				int cap = s->qp_cap ? 2 * s->qp_cap : 64;
				void *p = realloc(s->qp, (size_t)cap * sizeof(*s->qp));

				if (!p)
					break;
				s->qp = p;
				s->qp_cap = cap;
			}
			o = &s->qp[s->nqp++];
			memset(o, 0, sizeof(*o));
			snprintf(o->dev, sizeof(o->dev), "%s", f->dev[q->dev].name);
			o->dev_type = f->dev[q->dev].type;
			o->qpn = q->qpn;
			o->qp_type = q->qp_type;
			o->pid = (pid_t)pid;
			memcpy(o->comm, f->comm, sizeof(o->comm));
			o->comm[sizeof(o->comm) - 1] = 0;
			o->c = q->c;
		}
		free(f);
	}
	closedir(d);
	/* exited processes */
	fd = totals_open(dir, netns);
	if (fd >= 0) {
		if (!flock(fd, LOCK_SH)) {
			totals_read(fd, &t);
			for (int i = 0; i < SR_TOTALS_ROWS && t.dev[i].name[0]; i++)
				snap_add_dev(s, t.dev[i].name, t.dev[i].type, &t.dev[i].c);
		}
		close(fd);
	}
	return 0;
}

void sr_stats_snap_free(struct sr_stats_snap *s)
{
	free(s->qp);
	s->qp = NULL;
	s->nqp = s->qp_cap = 0;
}
