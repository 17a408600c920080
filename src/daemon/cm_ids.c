/* softrdmad: the CM names clients own: Communication IDs and listens by
 * Service ID and address (ipc.h, "CM routing"). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/softrdmad.h"

/* ---- CM Communication IDs ---- */

int64_t comm_id_alloc(struct client *c)
{
	if (d.comm_ids.n >= COMM_ID_MAX_LIVE)
		return -ENOSPC;
	/* Far fewer IDs are live than exist, so this ends within n + 2 steps. */
	for (;;) {
		uint32_t id = d.next_comm_id++;

		/* 0 means "none" on the wire (a REQ's Remote Communication ID). */
		if (!id || it_find(&d.comm_ids, id))
			continue;
		if (it_insert(&d.comm_ids, id, c))
			return -ENOMEM;
		c->ncomm_id++;
		return id;
	}
}

void comm_id_release(struct id_ent *e)
{
	e->owner->ncomm_id--;
	it_remove(&d.comm_ids, e);
}

struct client *comm_id_owner(uint32_t id)
{
	struct id_ent *e = it_find(&d.comm_ids, id);

	return e ? e->owner : NULL;
}
/* ---- CM listens ---- */

static uint32_t listen_bucket(uint64_t service_id)
{
	return (uint32_t)((service_id * 0x9E3779B97F4A7C15ull) >> 32) & (LISTEN_BUCKETS - 1);
}

static bool addr_is_any4(const struct in6_addr *a)
{
	static const struct in6_addr any4 = { .s6_addr = { [10] = 0xff, [11] = 0xff } };

	return IN6_ARE_ADDR_EQUAL(a, &any4);
}

/* The address of a LISTEN body as the daemon keeps it; -EINVAL if unusable. */
static int listen_addr(const struct sr_ipc_listen *l, struct in6_addr *out)
{
	switch (l->local.sin6_family) {
	case AF_UNSPEC:
		*out = in6addr_any;
		return 0;
	case AF_INET6:
		*out = l->local.sin6_addr;
		return 0;
	case AF_INET: {
		struct sockaddr_in sin;
		struct sockaddr_in6 m;

		memcpy(&sin, &l->local, sizeof(sin));
		to_mapped(&m, &sin);
		*out = m.sin6_addr;
		return 0;
	}
	default:
		return -EINVAL;
	}
}

static struct listener *listen_find(uint64_t service_id, const struct in6_addr *addr)
{
	for (struct listener *l = d.listens[listen_bucket(service_id)]; l; l = l->next)
		if (l->service_id == service_id && IN6_ARE_ADDR_EQUAL(&l->addr, addr))
			return l;
	return NULL;
}

/* The listener a REQ for service_id sent to dst belongs to: one bound to
 * dst itself, else to every IPv4 address (for an IPv4 dst), else to any. */
struct client *listen_match(uint64_t service_id, const struct in6_addr *dst)
{
	struct client *best = NULL;
	int best_rank = 0;

	for (struct listener *l = d.listens[listen_bucket(service_id)]; l; l = l->next) {
		int rank;

		if (l->service_id != service_id)
			continue;
		if (IN6_ARE_ADDR_EQUAL(&l->addr, dst))
			rank = 3;
		else if (addr_is_any4(&l->addr) && IN6_IS_ADDR_V4MAPPED(dst))
			rank = 2;
		else if (IN6_IS_ADDR_UNSPECIFIED(&l->addr))
			rank = 1;
		else
			continue;
		if (rank > best_rank) {
			best_rank = rank;
			best = l->owner;
		}
	}
	return best;
}

int listen_add(struct client *c, const struct sr_ipc_listen *req)
{
	struct in6_addr addr;
	struct listener *l;
	uint32_t b;

	if (req->flags || listen_addr(req, &addr))
		return -EINVAL;
	l = listen_find(req->service_id, &addr);
	if (l)
		return l->owner == c ? 0 : -EADDRINUSE;
	if (d.nlistens >= LISTEN_MAX)
		return -ENOSPC;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->owner = c;
	l->service_id = req->service_id;
	l->addr = addr;
	b = listen_bucket(req->service_id);
	l->next = d.listens[b];
	d.listens[b] = l;
	d.nlistens++;
	c->nlisten++;
	return 0;
}

static void listen_unlink(struct listener **pp)
{
	struct listener *l = *pp;

	*pp = l->next;
	l->owner->nlisten--;
	d.nlistens--;
	free(l);
}

int listen_del(struct client *c, const struct sr_ipc_listen *req)
{
	struct in6_addr addr;

	if (req->flags || listen_addr(req, &addr))
		return -EINVAL;
	for (struct listener **pp = &d.listens[listen_bucket(req->service_id)]; *pp; pp = &(*pp)->next) {
		if ((*pp)->service_id != req->service_id || !IN6_ARE_ADDR_EQUAL(&(*pp)->addr, &addr))
			continue;
		if ((*pp)->owner != c)
			return -EPERM;
		listen_unlink(pp);
		return 0;
	}
	return -ENOENT;
}

void listen_release_all(struct client *c)
{
	for (uint32_t b = 0; b < LISTEN_BUCKETS && c->nlisten; b++) {
		struct listener **pp = &d.listens[b];

		while (*pp) {
			if ((*pp)->owner == c)
				listen_unlink(pp);
			else
				pp = &(*pp)->next;
		}
	}
}
