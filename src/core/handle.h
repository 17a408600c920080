/* Object handles and the device's object limits (handle.c).
 *
 * uverbs names each object of a context by a handle: one ID space per
 * context for every type, the lowest free ID first (its xa_alloc), and
 * every command resolves the handles it is given in the context it goes
 * to: ENOENT when a handle names nothing, EINVAL when it names an object
 * of another type, EBUSY while the object is in use by a destroy (or, for
 * a destroy, by another verb).  A completion channel is a file, named by
 * its descriptor: EBADF when that is not this context's channel.
 *
 * Here the objects live in the application's memory, so a pointer that
 * was destroyed cannot even be read: every object is also in a
 * process-wide set of live objects, asked first by pointer alone.
 *
 * Each object also counts against its device's limit (ibv_query_device's
 * max_pd ... max_mw), as rxe's and siw's object pools count them: per
 * device, whichever context created the object. */
#ifndef SR_CORE_HANDLE_H
#define SR_CORE_HANDLE_H

#include <stdint.h>

struct ibv_context;
struct sr_context;
struct sr_ictx;
struct sr_device;

enum sr_obj_type {
	SR_OBJ_PD,
	SR_OBJ_CQ,
	SR_OBJ_MR,
	SR_OBJ_MW,
	SR_OBJ_SRQ,
	SR_OBJ_QP,
	SR_OBJ_AH,
	SR_OBJ_DM,	/* limited by its bytes, not its count (dm.c) */
	SR_OBJ_XRCD,	/* an XRC domain handle (xrc.c) */
	SR_OBJ_CHANNEL, /* not counted, no handle: its fd names it */
	SR_OBJ_TD,	/* not counted, no handle: the library's own (a thread domain) */
	SR_OBJ_NTYPES
};

/* An alias is a second ibv_* object for an object of the context: it
 * carries the object's handle, as rdma-core's user-space objects that
 * name one kernel object do, and resolves as that object. */
enum sr_obj_alias {
	SR_ALIAS_NONE,
	SR_ALIAS_PARENT, /* a parent domain (a PD's) */
	SR_ALIAS_IMPORT, /* ibv_import_pd, _mr, _dm: the object again (import.c) */
};

/* Embedded in every object (after its ibv_* struct).  All of it is
 * protected by the lock of handle.c. */
struct sr_obj {
	void *ib; /* the ibv_* object the application holds */
	struct sr_context *ctx;
	uint32_t handle;	 /* as in ib's handle field (a channel: its fd) */
	uint8_t type;		 /* enum sr_obj_type */
	uint8_t alias;		 /* enum sr_obj_alias */
	bool opened;		 /* a QP: an ibv_open_qp handle (struct sr_qp_open, xrc.c) */
	int32_t users;		 /* verbs using it now; -1: claimed by a destroy */
	struct sr_obj *alias_of; /* an alias: its object (NULL once that is gone) */
	uint32_t n_alias;	 /* aliases of this object */
};

/* The handles of a context: handle -> object. */
struct sr_handle_tab {
	struct sr_obj **obj;
	uint64_t *used; /* a bit per handle, for finding the lowest free one */
	uint32_t cap;	/* entries (a multiple of 64) */
	uint32_t low;	/* no handle below this one is free */
};

/* Registers a new object ib of ctx: a handle (written to ib's handle
 * field) and a place in its device's limit.  0, ENOMEM, or past the limit
 * what the kernel's driver gives (limit_errno in handle.c). */
int sr_obj_add(struct sr_context *ctx, struct sr_obj *o, void *ib, enum sr_obj_type t);
/* Registers ib as an alias of kind a for base (in use by the caller): it
 * gets base's handle, is no object of its own to the limits, and
 * resolves as base until base is destroyed, then as nothing (ENOENT). */
int sr_obj_add_alias(struct sr_obj *alias, void *ib, struct sr_obj *base, enum sr_obj_alias a);
/* Forgets it (destroyed, or a create that failed after sr_obj_add). */
void sr_obj_del(struct sr_obj *o);

/* Resolves ib for a verb on an object of type t sent to context target
 * (NULL: to the object's own, ib->context), as uverbs resolves a handle.
 * Returns the object (an alias: its own sr_obj; its object is in use
 * as well), in use until sr_obj_put, or NULL with *err set:
 * ENOENT (not a live object, or its handle does not name it in target),
 * EINVAL (its handle names another type's object there), EBUSY (being
 * destroyed); for a channel EBADF.  ib is not read unless it is live. */
struct sr_obj *sr_obj_get(void *ib, enum sr_obj_type t, struct ibv_context *target, int *err);
/* The same for destroying it: the object is claimed (no other verb may
 * use it; EBUSY if one does now) until sr_obj_del, or sr_obj_put if the
 * destroy fails.  An alias is claimed itself, not its object. */
struct sr_obj *sr_obj_claim(void *ib, enum sr_obj_type t, int *err);
void sr_obj_put(struct sr_obj *o);

/* The objects a verb resolved (creates take several): get each, put all. */
struct sr_obj_refs {
	struct sr_obj *o[4];
	int n;
};
/* The errno of call, made with ib resolved as a t in its own context and
 * in use meanwhile; or the errno of resolving it. */
#define SR_WITH_OBJ(ib, t, call)                                            \
	({                                                                  \
		int sr_e_;                                                  \
		struct sr_obj *sr_o_ = sr_obj_get((ib), (t), NULL, &sr_e_); \
		if (sr_o_) {                                                \
			sr_e_ = (call);                                     \
			sr_obj_put(sr_o_);                                  \
		}                                                           \
		sr_e_;                                                      \
	})

int sr_obj_ref(struct sr_obj_refs *r, void *ib, enum sr_obj_type t, struct ibv_context *target);
void sr_obj_unref(struct sr_obj_refs *r);

/* The object of ctx that handle names (ibv_import_*: uverbs' lookup of
 * a handle), in use until sr_obj_put, or NULL with *err: ENOENT none,
 * EINVAL another type's, EBUSY being destroyed. */
struct sr_obj *sr_obj_get_handle(struct sr_context *ctx, uint32_t handle, enum sr_obj_type t, int *err);
/* Claims ib, an alias of kind a, whether its object lives or not
 * (ibv_unimport_*): NULL with *err ENOENT if it is none. */
struct sr_obj *sr_obj_claim_alias(void *ib, enum sr_obj_alias a, int *err);
/* An alias's object's ibv_* object (its ib), or NULL once that is gone. */
void *sr_obj_alias_target(struct sr_obj *alias);
/* The contexts imported from ctx (import.c) are ctx to the handles: they
 * are kept in ctx->imports by these. */
void sr_obj_ctx_import(struct sr_context *ctx, struct sr_ictx *ic);
void sr_obj_ctx_unimport(struct sr_context *ctx, struct sr_ictx *ic);

/* Closing ctx: its objects are forgotten (stale from now on) and leave
 * their device's counts, as the kernel destroys them with the file. */
void sr_obj_ctx_fini(struct sr_context *ctx);

/* The device's limit for type t (what ibv_query_device advertises). */
uint32_t sr_obj_limit(const struct sr_device *dev, enum sr_obj_type t);

#endif
