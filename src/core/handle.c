/* Object handles and the device's object limits (handle.h).
 *
 * One lock protects the set of live objects, every context's handle
 * table, every sr_obj and the devices' object counts: it is taken by the
 * verbs that create, resolve and destroy objects, never on the data
 * path (posting and polling resolve nothing, as rdma-core's providers'). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/sr.h"

static pthread_mutex_t obj_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- the live objects: an open-addressing set keyed by pointer ---- */

#define LIVE_EMPTY 0
#define LIVE_GONE 1 /* a tombstone: no object is at address 1 */

struct live_slot {
	uintptr_t key;
	struct sr_obj *o;
};

static struct live_slot *live;
static size_t live_cap;	 /* a power of two, or 0 */
static size_t live_n;	 /* objects */
static size_t live_used; /* objects and tombstones */

static size_t live_hash(uintptr_t k)
{
	uint64_t h = (uint64_t)k * 0x9E3779B97F4A7C15ull;

	return (size_t)(h >> 17);
}

static struct live_slot *live_find(const void *ib)
{
	uintptr_t k = (uintptr_t)ib;

	if (!live_cap || k <= LIVE_GONE)
		return NULL;
	for (size_t i = live_hash(k) & (live_cap - 1);; i = (i + 1) & (live_cap - 1)) {
		if (live[i].key == k)
			return &live[i];
		if (live[i].key == LIVE_EMPTY)
			return NULL;
	}
}

static int live_grow(void)
{
	/* doubled when a quarter full of objects, else rebuilt without tombstones */
	size_t cap = !live_cap ? 256 : (live_n + 1) * 4 > live_cap ? live_cap * 2 : live_cap;
	struct live_slot *t = calloc(cap, sizeof(*t));

	if (!t)
		return ENOMEM;
	for (size_t i = 0; i < live_cap; i++) {
		if (live[i].key <= LIVE_GONE)
			continue;
		size_t j = live_hash(live[i].key) & (cap - 1);
		while (t[j].key != LIVE_EMPTY)
			j = (j + 1) & (cap - 1);
		t[j] = live[i];
	}
	free(live);
	live = t;
	live_cap = cap;
	live_used = live_n;
	return 0;
}

static int live_insert(struct sr_obj *o)
{
	uintptr_t k = (uintptr_t)o->ib;
	size_t i;

	/* at most half full, tombstones included */
	if ((live_used + 1) * 2 > live_cap && live_grow())
		return ENOMEM;
	for (i = live_hash(k) & (live_cap - 1); live[i].key > LIVE_GONE; i = (i + 1) & (live_cap - 1))
		;
	if (live[i].key == LIVE_EMPTY)
		live_used++;
	live[i].key = k;
	live[i].o = o;
	live_n++;
	return 0;
}

static void live_remove(struct sr_obj *o)
{
	struct live_slot *s = live_find(o->ib);

	if (!s || s->o != o)
		return;
	s->key = LIVE_GONE;
	s->o = NULL;
	live_n--;
}

/* ---- a context's handles ---- */

static int htab_alloc(struct sr_handle_tab *h, struct sr_obj *o, uint32_t *handle)
{
	uint32_t w;

	for (w = h->low / 64; w < h->cap / 64 && h->used[w] == ~0ull; w++)
		;
	if (w == h->cap / 64) {
		uint32_t cap = h->cap ? h->cap * 2 : 64;
		struct sr_obj **no = realloc(h->obj, cap * sizeof(*no));

		if (!no)
			return ENOMEM;
		h->obj = no;
		uint64_t *nu = realloc(h->used, cap / 64 * sizeof(*nu));
		if (!nu)
			return ENOMEM; /* obj is larger now: harmless, cap says how much is in use */
		memset(no + h->cap, 0, (cap - h->cap) * sizeof(*no));
		memset(nu + h->cap / 64, 0, (cap - h->cap) / 64 * sizeof(*nu));
		h->used = nu;
		h->cap = cap;
	}
	uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(~h->used[w]);
	h->used[w] |= 1ull << (i % 64);
	h->obj[i] = o;
	h->low = i + 1;
	*handle = i;
	return 0;
}

static void htab_free(struct sr_handle_tab *h, uint32_t i)
{
	if (i >= h->cap)
		return;
	h->used[i / 64] &= ~(1ull << (i % 64));
	h->obj[i] = NULL;
	if (i < h->low)
		h->low = i;
}

static struct sr_obj *htab_find(const struct sr_handle_tab *h, uint32_t i)
{
	return i < h->cap ? h->obj[i] : NULL;
}

/* ---- the fields of the application's objects ---- */

/* Every ibv_* object begins with its context. */
static struct ibv_context *ib_context(const void *ib)
{
	return *(struct ibv_context *const *)ib;
}

static uint32_t *ib_handle(void *ib, enum sr_obj_type t)
{
	switch (t) {
	case SR_OBJ_PD:
		return &((struct ibv_pd *)ib)->handle;
	case SR_OBJ_CQ:
		return &((struct ibv_cq *)ib)->handle;
	case SR_OBJ_MR:
		return &((struct ibv_mr *)ib)->handle;
	case SR_OBJ_MW:
		return &((struct ibv_mw *)ib)->handle;
	case SR_OBJ_SRQ:
		return &((struct ibv_srq *)ib)->handle;
	case SR_OBJ_QP:
		return &((struct ibv_qp *)ib)->handle;
	case SR_OBJ_AH:
		return &((struct ibv_ah *)ib)->handle;
	case SR_OBJ_DM:
		return &((struct ibv_dm *)ib)->handle;
	case SR_OBJ_XRCD:
		return &((struct sr_xrcd *)ib)->handle;
	default:
		return NULL; /* no handle */
	}
}

/* A channel is named by its fd, a thread domain by nothing but its
 * address: neither has a handle, nor counts against a limit. */
static bool has_handle(enum sr_obj_type t)
{
	return t != SR_OBJ_CHANNEL && t != SR_OBJ_TD;
}

/* ---- limits ---- */

uint32_t sr_obj_limit(const struct sr_device *dev, enum sr_obj_type t)
{
	bool iwarp = dev->conf.type == SR_DEV_IWARP;

	switch (t) {
	case SR_OBJ_PD:
		return SR_MAX_PD;
	case SR_OBJ_CQ:
		return SR_MAX_CQ;
	case SR_OBJ_SRQ:
		return SR_MAX_SRQ;
	case SR_OBJ_QP:
		return SR_MAX_QP;
	case SR_OBJ_AH:
		return SR_MAX_AH;
	/* MRs and MWs share the key table: the windows' part is kept for them */
	case SR_OBJ_MW:
		return iwarp ? 0 : SR_MAX_MW;
	case SR_OBJ_MR:
		return SR_KEY_SLOTS - 1 - (iwarp ? 0 : SR_MAX_MW);
	default:
		return UINT32_MAX;
	}
}

/* Past a limit: rxe's pools refuse with EINVAL, its MR pool's allocation
 * with ENOMEM; siw refuses everything with ENOMEM. */
static int limit_errno(const struct sr_device *dev, enum sr_obj_type t)
{
	return dev->conf.type == SR_DEV_IWARP || t == SR_OBJ_MR ? ENOMEM : EINVAL;
}

/* ---- registering ---- */

int sr_obj_add(struct sr_context *ctx, struct sr_obj *o, void *ib, enum sr_obj_type t)
{
	struct sr_device *dev = ctx->dev;
	int err = 0;

	memset(o, 0, sizeof(*o));
	o->ib = ib;
	o->ctx = ctx;
	o->type = (uint8_t)t;
	pthread_mutex_lock(&obj_lock);
	if (has_handle(t) && dev->n_obj[t] >= sr_obj_limit(dev, t)) {
		err = limit_errno(dev, t);
		goto out;
	}
	if (t == SR_OBJ_CHANNEL)
		o->handle = (uint32_t)((struct ibv_comp_channel *)ib)->fd;
	else if (has_handle(t) && (err = htab_alloc(&ctx->handles, o, &o->handle)))
		goto out;
	if ((err = live_insert(o))) {
		if (has_handle(t))
			htab_free(&ctx->handles, o->handle);
		goto out;
	}
	if (has_handle(t)) {
		*ib_handle(ib, t) = o->handle;
		dev->n_obj[t]++;
	}
out:
	pthread_mutex_unlock(&obj_lock);
	return err;
}

int sr_obj_add_alias(struct sr_obj *alias, void *ib, struct sr_obj *base, enum sr_obj_alias a)
{
	int err;

	memset(alias, 0, sizeof(*alias));
	alias->ib = ib;
	alias->type = base->type;
	alias->alias = (uint8_t)a;
	pthread_mutex_lock(&obj_lock);
	alias->ctx = base->ctx;
	alias->handle = base->handle;
	alias->alias_of = base;
	if (!(err = live_insert(alias))) {
		*ib_handle(ib, (enum sr_obj_type)base->type) = base->handle;
		base->n_alias++;
	}
	pthread_mutex_unlock(&obj_lock);
	return err;
}

static void obj_forget(struct sr_obj *o) /* obj_lock held */
{
	live_remove(o);
	if (o->alias) {
		if (o->alias_of)
			o->alias_of->n_alias--;
		o->alias_of = NULL;
		o->ctx = NULL;
		return;
	}
	if (has_handle((enum sr_obj_type)o->type)) {
		if (htab_find(&o->ctx->handles, o->handle) == o)
			htab_free(&o->ctx->handles, o->handle);
		o->ctx->dev->n_obj[o->type]--;
	}
	/* its aliases name nothing from now on */
	for (size_t i = 0; o->n_alias && i < live_cap; i++)
		if (live[i].key > LIVE_GONE && live[i].o->alias_of == o) {
			live[i].o->alias_of = NULL;
			o->n_alias--;
		}
	if (o->type == SR_OBJ_DM)
		sr_dm_forget((struct sr_dm *)o->ib);
	o->ctx = NULL;
}

void sr_obj_del(struct sr_obj *o)
{
	pthread_mutex_lock(&obj_lock);
	if (o->ctx)
		obj_forget(o);
	pthread_mutex_unlock(&obj_lock);
}

void sr_obj_ctx_fini(struct sr_context *ctx)
{
	struct sr_handle_tab *h = &ctx->handles;

	pthread_mutex_lock(&obj_lock);
	for (uint32_t i = 0; i < h->cap; i++)
		if (h->obj[i])
			obj_forget(h->obj[i]);
	/* channels, thread domains and aliases have no handle entry of
	 * their own: look for them in the set */
	for (size_t i = 0; i < live_cap; i++)
		if (live[i].key > LIVE_GONE && live[i].o->ctx == ctx)
			obj_forget(live[i].o);
	pthread_mutex_unlock(&obj_lock);
	free(h->obj);
	free(h->used);
	memset(h, 0, sizeof(*h));
}

/* ---- contexts ---- */

/* Is c ctx's ibv_context or one imported from it?  c is compared, not
 * read: it may be any pointer an object's field holds. */
static bool ctx_is(const struct sr_context *ctx, const struct ibv_context *c)
{
	if (c == &ctx->vctx.context)
		return true;
	for (const struct sr_ictx *ic = ctx->imports; ic; ic = ic->next)
		if (c == &ic->vctx.context)
			return true;
	return false;
}

void sr_obj_ctx_import(struct sr_context *ctx, struct sr_ictx *ic)
{
	pthread_mutex_lock(&obj_lock);
	ic->next = ctx->imports;
	ctx->imports = ic;
	pthread_mutex_unlock(&obj_lock);
}

void sr_obj_ctx_unimport(struct sr_context *ctx, struct sr_ictx *ic)
{
	pthread_mutex_lock(&obj_lock);
	for (struct sr_ictx **p = &ctx->imports; *p; p = &(*p)->next)
		if (*p == ic) {
			*p = ic->next;
			break;
		}
	pthread_mutex_unlock(&obj_lock);
}

/* ---- resolving ---- */

/* What uverbs answers for ib as a t in target (obj_lock held). */
static struct sr_obj *resolve(void *ib, enum sr_obj_type t, struct ibv_context *target, int *err)
{
	struct live_slot *s = live_find(ib);
	struct sr_obj *o = s ? s->o : NULL;

	if (t == SR_OBJ_CHANNEL) {
		/* the kernel's lookup of a completion channel's fd */
		if (!o || o->type != SR_OBJ_CHANNEL || (target && !ctx_is(o->ctx, target)) ||
		    (uint32_t)((struct ibv_comp_channel *)ib)->fd != o->handle) {
			*err = EBADF;
			return NULL;
		}
		return o;
	}
	if (t == SR_OBJ_TD || (o && o->type == SR_OBJ_TD)) {
		/* the library's own: no handle to look at */
		if (!o || o->type != t || (target && !ctx_is(o->ctx, target))) {
			*err = !o ? ENOENT : EINVAL;
			return NULL;
		}
		return o;
	}
	if (!o || o->type == SR_OBJ_CHANNEL || (o->alias && !o->alias_of)) {
		*err = ENOENT;
		return NULL;
	}
	/* an alias resolves as its object: by the handle it carries */
	struct sr_obj *base = o->alias ? o->alias_of : o;
	/* sent to the context the object names, unless the verb names one:
	 * another context's handle table is only consulted when it is the
	 * verb's, as the object's own field might point anywhere */
	struct ibv_context *to = target ? target : ib_context(ib);
	struct sr_context *tctx = ctx_is(base->ctx, to) ? base->ctx : target ? to_sctx(target) : NULL;
	struct sr_obj *named = tctx ? htab_find(&tctx->handles, *ib_handle(ib, (enum sr_obj_type)o->type)) : NULL;

	if (!named) {
		*err = ENOENT;
		return NULL;
	}
	if (named->type != t) {
		*err = EINVAL;
		return NULL;
	}
	if (named != base) {
		/* uverbs would act on the object the handle names: refused */
		*err = ENOENT;
		return NULL;
	}
	return o;
}

struct sr_obj *sr_obj_get(void *ib, enum sr_obj_type t, struct ibv_context *target, int *err)
{
	struct sr_obj *o;

	pthread_mutex_lock(&obj_lock);
	o = resolve(ib, t, target, err);
	if (o && (o->users < 0 || (o->alias_of && o->alias_of->users < 0))) {
		*err = EBUSY;
		o = NULL;
	}
	if (o) {
		o->users++;
		if (o->alias_of)
			o->alias_of->users++;
	}
	pthread_mutex_unlock(&obj_lock);
	return o;
}

struct sr_obj *sr_obj_claim(void *ib, enum sr_obj_type t, int *err)
{
	struct sr_obj *o;

	pthread_mutex_lock(&obj_lock);
	o = resolve(ib, t, NULL, err);
	if (o && o->users) {
		*err = EBUSY;
		o = NULL;
	}
	if (o)
		o->users = -1;
	pthread_mutex_unlock(&obj_lock);
	return o;
}

static void unuse(struct sr_obj *o) /* obj_lock held */
{
	if (o->users < 0)
		o->users = 0;
	else if (o->users > 0)
		o->users--;
}

void sr_obj_put(struct sr_obj *o)
{
	pthread_mutex_lock(&obj_lock);
	/* a claim (users -1) of an alias took nothing of its object */
	if (o->alias_of && o->users > 0)
		unuse(o->alias_of);
	unuse(o);
	pthread_mutex_unlock(&obj_lock);
}

struct sr_obj *sr_obj_get_handle(struct sr_context *ctx, uint32_t handle, enum sr_obj_type t, int *err)
{
	struct sr_obj *o;
	int e = 0;

	pthread_mutex_lock(&obj_lock);
	o = htab_find(&ctx->handles, handle);
	if (!o)
		e = ENOENT;
	else if (o->type != t)
		e = EINVAL;
	else if (o->users < 0)
		e = EBUSY;
	if (e) {
		*err = e;
		o = NULL;
	} else {
		o->users++;
	}
	pthread_mutex_unlock(&obj_lock);
	return o;
}

struct sr_obj *sr_obj_claim_alias(void *ib, enum sr_obj_alias a, int *err)
{
	struct live_slot *s;
	struct sr_obj *o;

	pthread_mutex_lock(&obj_lock);
	s = live_find(ib);
	o = s ? s->o : NULL;
	if (!o || o->alias != a) {
		*err = ENOENT;
		o = NULL;
	} else if (o->users) {
		*err = EBUSY;
		o = NULL;
	} else {
		o->users = -1;
	}
	pthread_mutex_unlock(&obj_lock);
	return o;
}

void *sr_obj_alias_target(struct sr_obj *alias)
{
	void *ib;

	pthread_mutex_lock(&obj_lock);
	ib = alias->alias_of ? alias->alias_of->ib : NULL;
	pthread_mutex_unlock(&obj_lock);
	return ib;
}

int sr_obj_ref(struct sr_obj_refs *r, void *ib, enum sr_obj_type t, struct ibv_context *target)
{
	int err = 0;
	struct sr_obj *o = sr_obj_get(ib, t, target, &err);

	if (!o)
		return err;
	r->o[r->n++] = o;
	return 0;
}

void sr_obj_unref(struct sr_obj_refs *r)
{
	while (r->n)
		sr_obj_put(r->o[--r->n]);
}
