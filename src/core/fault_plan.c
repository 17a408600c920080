/* Fault injection: the plan of each device, the QPs' fault state, and the
 * draw that decides each unit's fate (fault.h).  The transports act on
 * the fates: roce/tx_fault.c, iwarp/qp_tx_fault.c. */
#include "core/fault.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* For the summary at exit: the devices that have faults (the registry's
 * own, never freed). */
static struct sr_fault_dev *fault_devs[SR_MAX_DEVICES];
static const char *fault_dev_names[SR_MAX_DEVICES];
static atomic_int n_fault_devs; /* entries below it are complete (release/acquire) */

static uint64_t mix64(uint64_t z)
{
	/* splitmix64's finalizer: every input bit reaches every output bit */
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t random_seed(void)
{
	uint64_t s;

	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) == (ssize_t)sizeof(s))
		return s;
	return mix64((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32));
}

static struct sr_fault_dev *dev_new(const struct sr_fault_spec *spec, const char *origin)
{
	struct sr_fault_dev *fd = calloc(1, sizeof(*fd));

	if (!fd)
		return NULL;
	fd->spec = *spec;
	if (fd->spec.seed_random) {
		/* drawn once per process and shown, so that the run can be replayed */
		fd->spec.seed = random_seed();
		fd->spec.seed_random = false;
	}
	sr_fault_spec_format(&fd->spec, fd->text, sizeof(fd->text));
	snprintf(fd->origin, sizeof(fd->origin), "%s", origin);
	return fd;
}

int sr_fault_devices_init(struct sr_device **devs, int n, const struct sr_conf *conf)
{
	const char *env = getenv("SOFTRDMA_FAULTS");
	struct sr_fault_spec env_spec;
	char err[256];

	if (env && sr_fault_spec_parse(env, &env_spec, err, sizeof(err))) {
		sr_log("SOFTRDMA_FAULTS='%s': %s; no devices until it is fixed or unset", env, err);
		return -EINVAL;
	}
	for (int i = 0; i < n; i++) {
		struct sr_device *d = devs[i];
		struct sr_fault_spec spec;
		const char *origin = "SOFTRDMA_FAULTS";

		if (env) {
			spec = env_spec;
		} else {
			const char *text = d->conf.faults[0] ? d->conf.faults : conf->faults;

			/* the parser checked it; the file holds the canonical text */
			if (sr_fault_spec_parse(text, &spec, err, sizeof(err))) {
				sr_log("%s: faults '%s': %s", conf->path, text, err);
				return -EINVAL;
			}
			origin = conf->path;
		}
		if (!spec.any)
			continue;
		d->faults = dev_new(&spec, origin);
		if (!d->faults)
			return -ENOMEM;
		d->faults->unit = d->conf.type == SR_DEV_IWARP ? "FPDUs" : "datagrams";
		int k = atomic_load_explicit(&n_fault_devs, memory_order_relaxed);

		if (k < SR_MAX_DEVICES) {
			fault_devs[k] = d->faults;
			fault_dev_names[k] = d->conf.name;
			atomic_store_explicit(&n_fault_devs, k + 1, memory_order_release);
		}
	}
	return 0;
}

/* What the kinds do on this device's transport, said once per process
 * when its first QP is made: a plan left in a configuration file must not
 * go unnoticed. */
static void announce(struct sr_device *d)
{
	const struct sr_fault_spec *s = &d->faults->spec;
	bool iw = d->conf.type == SR_DEV_IWARP;
	unsigned mine = iw ? SR_FAULT_IWARP_KINDS : SR_FAULT_ROCE_KINDS;
	char ignored[96] = "", stall[96] = "";
	size_t off = 0;

	for (int k = 0; k < SR_FAULT_NKINDS; k++)
		if (s->rate[k] && !(mine & SR_FAULT_MASK(k)))
			off += (size_t)snprintf(ignored + off, off < sizeof(ignored) ? sizeof(ignored) - off : 0,
						"%s%s", off ? ", " : "; ", sr_fault_kind_names[k]);
	if (off)
		snprintf(ignored + off, off < sizeof(ignored) ? sizeof(ignored) - off : 0, ": %s",
			 iw ? "TCP hides them, not applied" : "iWARP only, not applied");
	if (iw && s->rate[SR_FAULT_DROP])
		snprintf(stall, sizeof(stall),
			 "; a dropped FPDU stalls the stream %u ms, as TCP's retransmission would", s->rto_ms);
	char delay[96] = "";
	if (s->delay_ns && s->jitter_ns)
		snprintf(delay, sizeof(delay), "; what is sent waits %.3f +- %.3f ms, in order", s->delay_ns / 1e6,
			 s->jitter_ns / 1e6);
	else if (s->delay_ns)
		snprintf(delay, sizeof(delay), "; what is sent waits %.3f ms, in order", s->delay_ns / 1e6);
	sr_log("fault injection on %s (%s): %s (from %s)%s%s%s", d->conf.name, iw ? "iWARP" : "RoCE", d->faults->text,
	       d->faults->origin, stall, delay, ignored);
}

int sr_fault_qp_init(struct sr_qp *qp)
{
	struct sr_device *d = qp->ctx->dev;
	struct sr_fault_qp *fq;

	qp->faults = NULL;
	if (!d->faults)
		return 0;
	fq = calloc(1, sizeof(*fq));
	if (!fq)
		return ENOMEM;
	fq->dev = d->faults;
	fq->stream = atomic_fetch_add(&d->faults->streams, 1);
	if (!atomic_exchange(&d->faults->announced, true))
		announce(d);
	qp->faults = fq;
	return 0;
}

void sr_fault_qp_fini(struct sr_qp *qp)
{
	struct sr_fault_qp *fq = qp->faults;

	if (!fq)
		return;
	SR_DBG("QP %u: faults (stream %" PRIu64 "): %" PRIu64 " %s, dropped %" PRIu64 ", duplicated %" PRIu64
	       ", reordered %" PRIu64 ", corrupted %" PRIu64 ", reset %" PRIu64 ", truncated %" PRIu64,
	       qp->ibqp.qp_base.qp_num, fq->stream, fq->k, fq->dev->unit, fq->n[SR_FAULT_DROP], fq->n[SR_FAULT_DUP],
	       fq->n[SR_FAULT_REORDER], fq->n[SR_FAULT_CORRUPT], fq->n[SR_FAULT_RESET], fq->n[SR_FAULT_TRUNCATE]);
	qp->faults = NULL;
	sr_delay_clear(&fq->delay);
	free(fq->buf);
	free(fq);
}

enum sr_fault_kind sr_fault_decide(struct sr_qp *qp, unsigned mask, uint64_t *aux)
{
	struct sr_fault_qp *fq = qp->faults;
	const struct sr_fault_spec *s = &fq->dev->spec;
	uint64_t h = mix64(s->seed ^ mix64(fq->stream * 0xd1b54a32d192ed03ull + fq->k));
	/* uniform in [0, SR_FAULT_SCALE) by multiply-shift */
	uint32_t r = (uint32_t)(((h >> 32) * SR_FAULT_SCALE) >> 32);
	uint32_t acc = 0;
	int k;

	fq->k++;
	atomic_fetch_add_explicit(&fq->dev->units, 1, memory_order_relaxed);
	*aux = mix64(h);
	/* the kinds share one draw, so a unit gets at most one fate */
	for (k = 0; k < SR_FAULT_NKINDS; k++) {
		acc += s->rate[k];
		if (r < acc)
			break;
	}
	if (k == SR_FAULT_NKINDS || !(mask & SR_FAULT_MASK(k)))
		return SR_FAULT_PASS;
	fq->n[k]++;
	atomic_fetch_add_explicit(&fq->dev->n[k], 1, memory_order_relaxed);
	sr_stat_add(qp->stats, (enum sr_stat)(SR_STAT_FAULT_DROP + k), 1);
	return (enum sr_fault_kind)k;
}

uint64_t sr_fault_delay_due(struct sr_qp *qp, uint64_t now)
{
	struct sr_fault_qp *fq = qp->faults;
	const struct sr_fault_spec *s = &fq->dev->spec;
	uint64_t d = s->delay_ns;

	if (s->jitter_ns) {
		/* a draw of its own: the fates' sequence stays what it was without delay */
		uint64_t h = mix64(~s->seed ^ mix64(fq->stream * 0x9e6c63d0676a9a99ull + fq->n_delayed));

		d = d - s->jitter_ns + h % (2 * s->jitter_ns + 1);
	}
	fq->n_delayed++;
	return now + d;
}

void sr_fault_arm(struct sr_qp *qp, uint64_t when)
{
	qp->faults->deadline = when;
	sr_qp_timer_arm(qp, when);
}

uint8_t *sr_fault_buf(struct sr_fault_qp *fq)
{
	if (!fq->buf)
		fq->buf = malloc(SR_FAULT_BUF);
	return fq->buf;
}

/* SOFTRDMA_DEBUG: what was injected, per device, when the process ends. */
__attribute__((destructor)) static void fault_summary(void)
{
	int n = atomic_load_explicit(&n_fault_devs, memory_order_acquire);

	for (int i = 0; i < n && sr_debug; i++) {
		struct sr_fault_dev *fd = fault_devs[i];

		if (!atomic_load(&fd->announced))
			continue;
		sr_log("faults on %s (%s): %" PRIu64 " %s, dropped %" PRIu64 ", duplicated %" PRIu64
		       ", reordered %" PRIu64 ", corrupted %" PRIu64 ", reset %" PRIu64 ", truncated %" PRIu64,
		       fault_dev_names[i], fd->text, atomic_load(&fd->units), fd->unit,
		       atomic_load(&fd->n[SR_FAULT_DROP]), atomic_load(&fd->n[SR_FAULT_DUP]),
		       atomic_load(&fd->n[SR_FAULT_REORDER]), atomic_load(&fd->n[SR_FAULT_CORRUPT]),
		       atomic_load(&fd->n[SR_FAULT_RESET]), atomic_load(&fd->n[SR_FAULT_TRUNCATE]));
	}
}
