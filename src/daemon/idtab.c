/* softrdmad: ID tables (QPNs, CM Communication IDs) mapping a 32-bit ID to
 * the client that owns it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/softrdmad.h"

static uint32_t it_home(const struct idtab *t, uint32_t id)
{
	return (id * 0x9E3779B1u) & (t->cap - 1);
}

struct id_ent *it_find(const struct idtab *t, uint32_t id)
{
	if (!t->cap || !id)
		return NULL;
	for (uint32_t i = it_home(t, id);; i = (i + 1) & (t->cap - 1)) {
		if (t->e[i].id == id)
			return &t->e[i];
		if (!t->e[i].id)
			return NULL;
	}
}

static void it_place(struct id_ent *tab, uint32_t cap, const struct id_ent *e)
{
	uint32_t i = (e->id * 0x9E3779B1u) & (cap - 1);

	while (tab[i].id)
		i = (i + 1) & (cap - 1);
	tab[i] = *e;
}

int it_insert(struct idtab *t, uint32_t id, struct client *owner)
{
	if ((t->n + 1) * 2 > t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 1024;
		struct id_ent *tab = calloc(cap, sizeof(*tab));

		if (!tab)
			return -ENOMEM;
		for (uint32_t i = 0; i < t->cap; i++)
			if (t->e[i].id)
				it_place(tab, cap, &t->e[i]);
		free(t->e);
		t->e = tab;
		t->cap = cap;
	}
	it_place(t->e, t->cap, &(struct id_ent){ .id = id, .owner = owner });
	t->n++;
	return 0;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
void it_remove(struct idtab *t, struct id_ent *e)
{
	uint32_t mask = t->cap - 1;
	uint32_t i = (uint32_t)(e - t->e), j = i;

	for (;;) {
		uint32_t k;

		j = (j + 1) & mask;
		if (!t->e[j].id)
			break;
		k = it_home(t, t->e[j].id);
		/* Entry j may move to the hole at i only if its home is not
		 * cyclically within (i, j]. */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		t->e[i] = t->e[j];
		i = j;
	}
	t->e[i] = (struct id_ent){ 0 };
	t->n--;
}

/* Calls release on each of c's n entries (release removes the entry). */
void it_release_owner(struct idtab *t, struct client *c, uint32_t n, void (*release)(struct id_ent *))
{
	uint32_t *list, got = 0;

	if (!n)
		return;
	/* Deleting shifts entries, so collect first. */
	list = malloc(n * sizeof(*list));
	if (list) {
		for (uint32_t i = 0; i < t->cap && got < n; i++)
			if (t->e[i].id && t->e[i].owner == c)
				list[got++] = t->e[i].id;
		for (uint32_t i = 0; i < got; i++) {
			struct id_ent *e = it_find(t, list[i]);

			if (e)
				release(e);
		}
		free(list);
		return;
	}
	/* Out of memory: rescan from the start after each removal. */
	for (;;) {
		uint32_t i;

		for (i = 0; i < t->cap; i++)
			if (t->e[i].id && t->e[i].owner == c)
				break;
		if (i == t->cap)
			break;
		release(&t->e[i]);
	}
}
