/* Fault injection specifications: the text of SOFTRDMA_FAULTS and of the
 * "faults" key of softrdma.conf, e.g. "drop=5%,dup=1%,corrupt=0.5%,seed=42".
 * The library injects what it says (core/fault_plan.c); the configuration
 * parser and softrdma-cfg only check it.  Shared so that all three accept
 * and refuse exactly the same texts. */
#ifndef SR_COMMON_FAULT_SPEC_H
#define SR_COMMON_FAULT_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What can happen to one datagram (RoCE) or FPDU (iWARP).  The order is
 * that of the counters in common/stats.h. */
enum sr_fault_kind {
	SR_FAULT_DROP,	   /* RoCE: not sent; iWARP: the stream stalls rto ms (TCP's retransmission) */
	SR_FAULT_DUP,	   /* RoCE: sent twice */
	SR_FAULT_REORDER,  /* RoCE: sent after the QP's next datagram */
	SR_FAULT_CORRUPT,  /* one bit flipped after the ICRC / MPA CRC was computed */
	SR_FAULT_RESET,	   /* iWARP: the connection is reset (RST) instead */
	SR_FAULT_TRUNCATE, /* iWARP: part of the FPDU, then the stream ends (FIN) */
	SR_FAULT_NKINDS,
	SR_FAULT_PASS = SR_FAULT_NKINDS,
};

#define SR_FAULT_MASK(k) (1u << (k))
#define SR_FAULT_ROCE_KINDS                                                                             \
	(SR_FAULT_MASK(SR_FAULT_DROP) | SR_FAULT_MASK(SR_FAULT_DUP) | SR_FAULT_MASK(SR_FAULT_REORDER) | \
	 SR_FAULT_MASK(SR_FAULT_CORRUPT))
#define SR_FAULT_IWARP_KINDS                                                                              \
	(SR_FAULT_MASK(SR_FAULT_DROP) | SR_FAULT_MASK(SR_FAULT_CORRUPT) | SR_FAULT_MASK(SR_FAULT_RESET) | \
	 SR_FAULT_MASK(SR_FAULT_TRUNCATE))

/* Rates are in millionths (1% = 10000): percentages with up to four
 * decimals are exact. */
#define SR_FAULT_SCALE 1000000u
#define SR_FAULT_RTO_DEFAULT_MS 200u	     /* Linux's TCP_RTO_MIN */
#define SR_FAULT_SPEC_MAX 256		     /* longest text kept (configuration) */
#define SR_FAULT_DELAY_MAX_NS 10000000000ull /* 10 s */

struct sr_fault_spec {
	uint32_t rate[SR_FAULT_NKINDS];
	bool any; /* some rate is not 0 */
	uint64_t seed;
	bool seed_random; /* "seed=random": the library draws one */
	uint32_t rto_ms;  /* iWARP: how long a dropped FPDU stalls the stream */
	/* Every unit that is sent waits delay_ns +- up to jitter_ns (uniform,
	 * jitter_ns <= delay_ns), never overtaking one sent before it. */
	uint64_t delay_ns, jitter_ns;
};

extern const char *const sr_fault_kind_names[SR_FAULT_NKINDS];

/* Parses a specification: comma- or space-separated KEY=VALUE items,
 *   drop|dup|reorder|corrupt|reset|truncate = PERCENT   ("5%", "0.5%", "5")
 *   seed = N | 0xN | random                              (default 0)
 *   rto = MS[ms]                                         (1..60000, default 200)
 *   delay = TIME, jitter = TIME   (TIME: 2ms, 0.5ms, 100us, 3 = 3 ms; 0..10 s;
 *                                  jitter at most delay)
 * "", "off", "none" and "0" mean no faults.  The rates together may not
 * exceed 100%.  Returns 0, or -EINVAL with a one-line reason in err. */
int sr_fault_spec_parse(const char *text, struct sr_fault_spec *out, char *err, size_t errlen);

/* The canonical text of a specification ("drop=5%,seed=42"; "off"). */
void sr_fault_spec_format(const struct sr_fault_spec *s, char *buf, size_t len);

#endif
