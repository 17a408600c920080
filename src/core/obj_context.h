/* The objects a process opens: a device, its contexts (with their QP,
 * key and handle tables, the progress engine's state) and imported
 * contexts. */
#ifndef SR_CORE_OBJ_CONTEXT_H
#define SR_CORE_OBJ_CONTEXT_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "common/conf.h"
#include "core/handle.h"
#include "core/limits.h"
#include "core/progress.h"

struct sr_transport_ops;
struct sr_fault_dev;
struct sr_mcg;
struct sr_qp;
struct sr_mr;
struct sr_mw;
struct sr_key_ent;
struct sr_xrc_dom;
struct sr_async_rec;

/* One configured device. Lives for the life of the process. */
struct sr_device {
	struct ibv_device ibdev; /* first: ibv_device * <-> sr_device * */
	struct sr_conf_device conf;
	bool crc;
	const struct sr_transport_ops *tops;
	struct sr_fault_dev *faults;   /* fault injection (core/fault.h), NULL = none */
	uint32_t n_obj[SR_OBJ_NTYPES]; /* live objects of each type, all contexts (handle.c's lock) */
	_Atomic uint64_t dm_used;      /* bytes of device memory allocated (dm.c) */
	/* ctx_lock protects the open contexts' list and their open counts,
	 * and the XRC domains' list */
	pthread_mutex_t ctx_lock;
	struct sr_context *ctxs;       /* the process's open contexts of it (import.c finds them) */
	struct sr_xrc_dom *xrc_doms;   /* its XRC domains in the process (xrc.c) */
	_Atomic uint32_t srq_num_next; /* the next XRC SRQ's number (xrc.c) */
};

struct sr_gid_entry {
	union ibv_gid gid;
	int family; /* AF_INET / AF_INET6 */
};

struct sr_context {
	struct verbs_context vctx; /* vctx.context is the ibv_context */
	struct sr_context *owner;  /* itself: to_sctx() reads it here, and in an imported context */
	struct sr_device *dev;
	/* ibv_import_device (import.c): the contexts imported from this one
	 * (handle.c's lock), and how many of them and it are open (the
	 * device's ctx_lock): the objects live until the last one closes */
	struct sr_ictx *imports;
	int n_open;
	bool closed;   /* ibv_close_device of the context itself */
	dev_t cmd_dev; /* its cmd_fd's file, by which an import finds it */
	ino_t cmd_ino;
	struct sr_context *dev_next; /* dev->ctxs */
	struct sr_netdev_info nd;    /* snapshot at open */
	enum ibv_mtu active_mtu;
	int ngid;
	struct sr_gid_entry gid[SR_MAX_ADDRS];
	uint64_t node_guid; /* host order */

	int async_wr;		    /* write end of the async event pipe (one token byte per event) */
	pthread_mutex_t async_lock; /* protects the async event queue */
	struct sr_async_rec *async_q;
	uint32_t async_n, async_cap;

	/* lock protects: qp_list, qpn table, daemon connect, zombies, pd/cq counts */
	pthread_mutex_t lock;
	struct sr_qp *qp_list; /* doubly linked: removal is O(1) */
	uint32_t n_qps;
	struct sr_qp **qpn_tab; /* open hash qpn -> qp */
	uint32_t qpn_tab_size;
	uint32_t qpn_tab_used;		       /* live entries and tombstones */
	struct sr_qp *zombies;		       /* destroyed QPs the progress thread may still know */
	struct sr_qp *reaped;		       /* destroyed QPs it has let go of: an application thread frees them */
	struct sr_daemon_conn *_Atomic daemon; /* set once, under lock; read without */
	/* The context lost what its device needs (softrdmad died): its QPs
	 * are in error, IBV_EVENT_DEVICE_FATAL was raised, new QPs and
	 * modifies out of RESET/ERR fail with EIO, the port reads DOWN. */
	atomic_bool fatal;

	/* mr_lock protects the key table; the receive path holds it for
	 * reading while it places data, so deregistration waits for it. */
	pthread_rwlock_t mr_lock;
	struct sr_mr **mr_tab;
	struct sr_mw **mw_tab;		      /* the same slots' windows: NULL until the first ibv_alloc_mw */
	uint32_t mr_tab_size;		      /* entries of both tables */
	uint32_t *key_last;		      /* each slot's last key, so a reuse never gives it again */
	struct sr_key_ent *key_map;	      /* a live key's upper 24 bits -> its slot (mr.c) */
	uint32_t key_map_mask;		      /* entries - 1 (a power of two), 0 before the first key */
	uint32_t key_map_n;		      /* live keys in it */
	uint32_t key_retired[SR_KEY_RETIRED]; /* the keys that left the map last, not given again */
	uint32_t key_retired_next;
	uint32_t mr_next; /* cyclic allocation cursor */

	struct sr_handle_tab handles; /* the objects' handles (handle.c's lock) */

	struct sr_progress prog; /* the progress engine (core/progress.h) */

	/* UD multicast (mcast_attach.c).  mcast_lock serialises attach, detach and
	 * QP destruction (it is held across the daemon call that joins or
	 * leaves a group); the group list itself changes only with ctx->lock
	 * held too, so the receive path reads it under ctx->lock alone.
	 * Order: mcast_lock -> ctx->lock -> qp->lock. */
	pthread_mutex_t mcast_lock;
	struct sr_mcg *mcgs;
	uint32_t n_mcgs;

	/* txs_lock protects the list of RoCE QPs holding send sockets,
	 * oldest first (roce/sockets.c).  Taken inside a qp->lock; other QPs'
	 * locks are only tried under it. */
	pthread_mutex_t txs_lock;
	struct sr_qp *txs_head, *txs_tail;

	/* Transport work for rx_flush: iwarp/ counts QPs whose end of
	 * connection is to be told to the CM (with no lock held). */
	atomic_int tp_notify;
};

/* A context of ibv_import_device (import.c): another ibv_context of the
 * same objects, as rdma-core's on a dup of the uverbs file. */
struct sr_ictx {
	struct verbs_context vctx;
	struct sr_context *owner; /* at the same place as sr_context's */
	struct sr_ictx *next;	  /* owner->imports */
};

/* ---- helpers shared across core/ and transports ---- */
/* The context whose objects c reaches: c's own, or the one it was
 * imported from. */
static inline struct sr_context *to_sctx(struct ibv_context *c)
{
	return ((struct sr_context *)((char *)c - __builtin_offsetof(struct sr_context, vctx.context)))->owner;
}
_Static_assert(__builtin_offsetof(struct sr_context, owner) == __builtin_offsetof(struct sr_ictx, owner),
	       "to_sctx reads owner at one place in both");

#endif
