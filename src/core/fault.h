/* Fault injection: what SOFTRDMA_FAULTS or the configuration's "faults"
 * key asks a process to do to the datagrams (RoCE) or FPDUs (iWARP) its
 * QPs send, so that applications can test their error handling.
 *
 * Off (the normal case), a QP's `faults` is NULL and the send paths test
 * it once per batch (`sr_faults_on`): one predictable branch.  On, every
 * unit a QP sends gets a fate from sr_fault_decide: a pure function of
 * the seed, the QP's place among the process's QPs (in creation order)
 * and the unit's number on that QP, so that a run can be replayed with
 * the same seed.  The transports act on the fate (roce/tx_fault.c,
 * iwarp/qp_tx_fault.c), and each fate is counted in the QP's counters
 * (softrdma-cfg statistic: fault_drop, ...). */
#ifndef SR_CORE_FAULT_H
#define SR_CORE_FAULT_H

#include <stdatomic.h>

#include "core/sr.h"
#include "core/delay_line.h"
#include "common/fault_spec.h"

/* A device's faults in this process. */
struct sr_fault_dev {
	struct sr_fault_spec spec;
	char text[SR_FAULT_SPEC_MAX]; /* canonical, seed resolved */
	char origin[PATH_MAX];	      /* "SOFTRDMA_FAULTS" or the configuration file */
	const char *unit;	      /* "datagrams" (RoCE), "FPDUs" (iWARP) */
	atomic_bool announced;
	_Atomic uint64_t streams; /* QPs created so far: the next one's stream */
	_Atomic uint64_t units;	  /* datagrams / FPDUs that got a fate */
	_Atomic uint64_t n[SR_FAULT_NKINDS];
};

/* A QP's fault state (qp->lock protects it). */
struct sr_fault_qp {
	struct sr_fault_dev *dev;
	uint64_t stream; /* the QP's place among this process's faulted QPs */
	uint64_t k;	 /* units decided so far */
	uint64_t n[SR_FAULT_NKINDS];
	uint64_t deadline; /* the transport's fault timer, 0 = none */
	uint8_t *buf;	   /* scratch (a held or corrupted copy), SR_FAULT_BUF bytes */
	union {
		struct { /* roce/tx_fault.c: a datagram held back (reorder) */
			bool held;
			uint32_t len;
			uint64_t held_seq; /* sent_seq when it was held */
			struct sr_av av;
		} roce;
		struct { /* iwarp/qp_tx_fault.c: the batch stops at a marked FPDU */
			bool mark;
			bool stalling;	 /* drop: the stream waits for `deadline` */
			uint8_t kind;	 /* enum sr_fault_kind of the marked FPDU */
			uint8_t cur;	 /* fate of the FPDU being built */
			uint64_t aux;	 /* ... and its random bits */
			size_t off;	 /* batch offset where the marked FPDU starts */
			size_t cut;	 /* truncate: bytes of it that go */
			bool delay_full; /* delay: the line is full, the batch waits for room */
		} iw;
	};
	uint64_t sent_seq;	    /* roce: datagrams sent */
	struct sr_delay_line delay; /* the delay fault's queue (delay_line.h) */
	uint64_t n_delayed;	    /* units that went into it: the jitter draw's counter */
};

#define SR_FAULT_BUF 65536u

/* The one test the send paths make. */
static inline bool sr_faults_on(const struct sr_qp *qp)
{
	return __builtin_expect(qp->faults != NULL, 0);
}

/* Resolve the devices' faults: SOFTRDMA_FAULTS for all of them if set,
 * else a device's own "faults =", else the global one.  Returns 0, or
 * -EINVAL after saying why on stderr (the process then has no devices:
 * a fault plan it cannot follow must not pass for no faults). */
int sr_fault_devices_init(struct sr_device **devs, int n, const struct sr_conf *conf);

/* A new QP of a device with faults: its state (qp->faults), or NULL and
 * ENOMEM.  The first QP of a device prints what will be injected. */
int sr_fault_qp_init(struct sr_qp *qp);
/* The QP is gone: its counts (SOFTRDMA_DEBUG prints them) and its state. */
void sr_fault_qp_fini(struct sr_qp *qp);

/* The fate of the QP's next unit among the kinds its transport knows
 * (mask of SR_FAULT_MASK), or SR_FAULT_PASS.  *aux receives 64 more
 * random bits of the same draw (which bit to flip, where to cut).
 * Counted. */
enum sr_fault_kind sr_fault_decide(struct sr_qp *qp, unsigned mask, uint64_t *aux);

/* The earlier of two deadlines, 0 meaning none. */
static inline uint64_t sr_fault_earlier(uint64_t a, uint64_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

/* Does the plan delay what this QP sends (delay=)? */
static inline bool sr_fault_delays(const struct sr_qp *qp)
{
	return qp->faults->dev->spec.delay_ns != 0;
}
/* When a unit sent now is due: now + delay +- jitter (replayable from the
 * seed like the fates).  Counts the unit. */
uint64_t sr_fault_delay_due(struct sr_qp *qp, uint64_t now);
/* The transport's fault deadline: its own timer or the delay line's head. */
static inline uint64_t sr_fault_deadline(const struct sr_qp *qp)
{
	return sr_fault_earlier(qp->faults->deadline, sr_delay_next(&qp->faults->delay));
}

/* Have the progress thread's timer pass call the transport's on_timer at
 * `when` (qp->lock held). */
void sr_fault_arm(struct sr_qp *qp, uint64_t when);

/* The scratch buffer, allocated on first use (NULL if out of memory). */
uint8_t *sr_fault_buf(struct sr_fault_qp *fq);

#endif
