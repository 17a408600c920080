/* The delay fault's queue (delay_line.h). */
#include "core/delay_line.h"

#include <stdlib.h>

struct sr_delay_unit *sr_delay_push(struct sr_delay_line *l, uint64_t due, uint32_t len, bool *first)
{
	struct sr_delay_unit *u;

	*first = false;
	if (l->bytes + len > SR_DELAY_LINE_MAX_BYTES || !(u = malloc(sizeof(*u) + len)))
		return NULL;
	if (due < l->last_due)
		due = l->last_due;
	l->last_due = due;
	u->next = NULL;
	u->due = due;
	u->len = len;
	u->off = 0;
	u->seg = 0;
	if (l->tail)
		l->tail->next = u;
	else {
		l->head = u;
		*first = true;
	}
	l->tail = u;
	l->bytes += len;
	return u;
}

void sr_delay_pop(struct sr_delay_line *l)
{
	struct sr_delay_unit *u = l->head;

	if (!u)
		return;
	l->head = u->next;
	if (!l->head)
		l->tail = NULL;
	l->bytes -= u->len;
	free(u);
}

void sr_delay_clear(struct sr_delay_line *l)
{
	while (l->head)
		sr_delay_pop(l);
}
