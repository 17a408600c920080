/* softrdmad: the CM names clients own: Communication IDs and listens by
 * Service ID and address (ipc.h, "CM routing"). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/softrdmad.h"

/* ---- CM Communication IDs ---- */

/* Random, like QPNs: a local user who could predict another process's
 * Communication IDs could disconnect its connections with a DREQ. */
int64_t comm_id_alloc(struct client *c)
{
	int64_t err;

	if (d.comm_ids.n >= COMM_ID_MAX_LIVE)
		return -ENOSPC;
	if ((err = quota_take(c->user, Q_COMM_ID)))
		return err;
	/* At most 1/4096 of the IDs are live: a draw is nearly always free. */
	for (;;) {
		uint32_t id = rand32();

		/* 0 means "none" on the wire (a REQ's Remote Communication ID). */
		if (!id || it_find(&d.comm_ids, id))
			continue;
		if (it_insert(&d.comm_ids, id, c)) {
			quota_give(c->user, Q_COMM_ID);
			return -ENOMEM;
		}
		c->ncomm_id++;
		return id;
	}
}

void comm_id_release(struct id_ent *e)
{
	e->owner->ncomm_id--;
	quota_give(e->owner->user, Q_COMM_ID);
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

/* Could a REQ sent to some address match both? */
static bool addrs_overlap(const struct in6_addr *a, const struct in6_addr *b)
{
	if (IN6_ARE_ADDR_EQUAL(a, b) || IN6_IS_ADDR_UNSPECIFIED(a) || IN6_IS_ADDR_UNSPECIFIED(b))
		return true;
	return (addr_is_any4(a) && IN6_IS_ADDR_V4MAPPED(b)) || (addr_is_any4(b) && IN6_IS_ADDR_V4MAPPED(a));
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
	b = listen_bucket(req->service_id);
	/* As TCP ports: a listen on an address another process's listen
	 * covers (or that covers its) is in use, so nobody can take the
	 * requests meant for a wildcard listener by listening on 127.0.0.1.
	 * One process may hold overlapping listens (rdma_cm sorts those
	 * out itself); the most specific address wins. */
	for (l = d.listens[b]; l; l = l->next) {
		if (l->service_id != req->service_id || !addrs_overlap(&l->addr, &addr))
			continue;
		if (l->owner != c)
			return -EADDRINUSE;
		if (IN6_ARE_ADDR_EQUAL(&l->addr, &addr))
			return 0;
	}
	if (d.nlistens >= LISTEN_MAX)
		return -ENOSPC;
	if (quota_take(c->user, Q_LISTEN))
		return -EDQUOT;
	l = calloc(1, sizeof(*l));
	if (!l) {
		quota_give(c->user, Q_LISTEN);
		return -ENOMEM;
	}
	l->owner = c;
	l->service_id = req->service_id;
	l->addr = addr;
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
	quota_give(l->owner->user, Q_LISTEN);
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
