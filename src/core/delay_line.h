/* The delay fault's queue (common/fault_spec.h: delay, jitter): what a
 * QP has sent waits here until it is due, in the order it was sent, as
 * it would on a long link.  A unit is what leaves in one go: a RoCE run
 * of datagrams (one GSO sendmsg), or bytes of an iWARP stream.  The
 * transports fill it and drain it (roce/tx_fault.c, iwarp/qp_tx_fault.c); qp->lock
 * protects it. */
#ifndef SR_CORE_DELAY_LINE_H
#define SR_CORE_DELAY_LINE_H

#include <stdint.h>

#include "core/obj_queue.h"

struct sr_delay_unit {
	struct sr_delay_unit *next;
	uint64_t due;	 /* when it may leave (sr_now_ns clock) */
	uint32_t len;	 /* bytes in data */
	uint32_t off;	 /* bytes of it already gone (a stream's partial write) */
	uint16_t seg;	 /* RoCE: the GSO segment size, 0 = one datagram */
	struct sr_av av; /* RoCE: where it goes */
	uint8_t data[];
};

struct sr_delay_line {
	struct sr_delay_unit *head, *tail;
	uint64_t bytes;	   /* waiting, for the bound */
	uint64_t last_due; /* no unit leaves before one queued earlier */
};

/* Most a QP keeps waiting, as netem's limit: beyond, units are lost. */
#define SR_DELAY_LINE_MAX_BYTES (32u << 20)

/* A new unit of len bytes at the tail, due at `due` (made no earlier
 * than the last one's), to be filled by the caller; NULL when the line
 * is full or memory is short (the unit is lost).  Returns with *first
 * set when the line was empty: the caller arms its timer. */
struct sr_delay_unit *sr_delay_push(struct sr_delay_line *l, uint64_t due, uint32_t len, bool *first);
/* The head if it is due at now (0: whatever its time), else NULL. */
static inline struct sr_delay_unit *sr_delay_due(const struct sr_delay_line *l, uint64_t now)
{
	return l->head && (!now || l->head->due <= now) ? l->head : NULL;
}
/* When the head is due, 0 if the line is empty. */
static inline uint64_t sr_delay_next(const struct sr_delay_line *l)
{
	return l->head ? l->head->due : 0;
}
/* Free the head. */
void sr_delay_pop(struct sr_delay_line *l);
/* Free everything. */
void sr_delay_clear(struct sr_delay_line *l);

#endif
