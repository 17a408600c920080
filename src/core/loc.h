/* The functions core/ files share, under the name of the file that
 * defines them (rxe_loc.h's role).  The progress engine's are in
 * core/progress.h. */
#ifndef SR_CORE_LOC_H
#define SR_CORE_LOC_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>
#include "core/obj_context.h"
#include "core/obj_memory.h"
#include "core/obj_queue.h"

struct sr_ipc_pkt;

/* device.c */
struct sr_device **sr_devices(int *num);
struct ibv_context *sr_open_device(struct ibv_device *dev);
int sr_close_device(struct ibv_context *c);
/* The verbs part of a context or an imported one (its ops, its files). */
void sr_ctx_init_verbs(struct verbs_context *v, struct ibv_device *ibdev, int cmd_fd, int async_fd);
/* The open context whose cmd_fd is that file, counted one more open
 * (sr_ctx_release), or NULL; and the end of an open of ctx (the last
 * one destroys its objects). */
struct sr_context *sr_ctx_find(dev_t fdev, ino_t fino);
void sr_ctx_release(struct sr_context *ctx);
int sr_query_device(struct ibv_context *c, struct ibv_device_attr *a);
int sr_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in, struct ibv_device_attr_ex *a,
		       size_t size);
int sr_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a);
int sr_query_rt_values(struct ibv_context *c, struct ibv_values_ex *v);
int sr_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid);
int sr_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index, struct ibv_gid_entry *e);
int sr_query_pkey(struct ibv_context *c, uint8_t port, int index, __be16 *pkey);
int sr_gid_to_sockaddr(struct sr_context *ctx, const union ibv_gid *gid, struct sockaddr_in6 *sa);
void sr_post_async_event(struct sr_context *ctx, enum ibv_event_type type, void *obj);
/* The device is gone for ctx (why: for the log): every QP to ERR with
 * IBV_EVENT_QP_FATAL (outstanding work completes with WR_FLUSH_ERR), then
 * IBV_EVENT_DEVICE_FATAL, as rdma-core reports a dead device.  Once. */
void sr_ctx_fatal(struct sr_context *ctx, const char *why);
int sr_get_async_event(struct ibv_context *c, struct ibv_async_event *ev);
void sr_ack_async_event(struct ibv_async_event *ev);
/* Forget unread async events naming obj (a QP or SRQ being destroyed). */
void sr_purge_async_events(struct sr_context *ctx, void *obj);

/* mr.c */
/* A memory key (lkey = rkey, iWARP STag) is 32 random bits: the upper 24
 * name the MR or MW (its "tag", unique among the context's live keys),
 * the low 8 are the key byte a memory window's bind changes, as the verbs
 * have it.  The key holds no table index, so a peer that saw keys learns
 * nothing of the next; the key table maps a tag to its slot. */
struct sr_key_ent {
	uint32_t tag;  /* key >> 8 */
	uint32_t slot; /* 0 = empty entry */
};
/* The slot of the region or window whose key has key's upper 24 bits, 0
 * if none (caller holds mr_lock): the full key is still to be compared
 * with the object's.  Open addressing, linear probing, load <= 1/2; the
 * tags are random, so their low bits index the map evenly. */
static inline uint32_t sr_key_slot(const struct sr_context *ctx, uint32_t key)
{
	uint32_t tag = key >> 8, mask = ctx->key_map_mask;

	if (!ctx->key_map)
		return 0;
	for (uint32_t i = tag & mask;; i = (i + 1) & mask) {
		const struct sr_key_ent *e = &ctx->key_map[i];
		if (!e->slot)
			return 0;
		if (e->tag == tag)
			return e->slot;
	}
}
/* The key table (caller holds mr_lock for writing): a free slot for an MR
 * or an MW (0 when full); a fresh key for slot idx, entered in the map
 * (0 when out of memory): unlike the slot's last key, the last
 * SR_KEY_RETIRED keys forgotten and every live key's tag; and a key's
 * removal from the map (its slot's object stops being reachable by it). */
uint32_t sr_key_slot_alloc(struct sr_context *ctx);
uint32_t sr_key_make(struct sr_context *ctx, uint32_t idx);
void sr_key_forget(struct sr_context *ctx, uint32_t key);
struct ibv_pd *sr_alloc_pd(struct ibv_context *c);
int sr_dealloc_pd(struct ibv_pd *pd);
struct ibv_mr *sr_reg_mr(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova, unsigned int access);
/* An implicit on-demand-paging region covers the address space. */
static inline bool sr_mr_implicit(const void *addr, size_t len)
{
	return !addr && len == SIZE_MAX;
}
struct ibv_mr *sr_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t offset, size_t len, unsigned int access);
int sr_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t len, int access);
int sr_dereg_mr(struct ibv_mr *mr);
/* Look up a key (caller holds ctx->mr_lock for reading). Checks PD, access
 * bits and that [va, va+len) lies inside the region. Returns the host
 * address for va, or NULL. */
uint8_t *sr_mr_lookup(struct sr_context *ctx, uint32_t key, bool remote, struct sr_pd *pd, uint64_t va, uint64_t len,
		      unsigned int need_access);
/* The same, telling why nothing was found, as rxe tells its local errors
 * apart: -EINVAL no region by that key (in that PD, with that access),
 * -EFAULT one, but [va, va+len) is not inside it; 0 and *host set. */
int sr_mr_find(struct sr_context *ctx, uint32_t key, bool remote, struct sr_pd *pd, uint64_t va, uint64_t len,
	       unsigned int need_access, uint8_t **host);
/* Invalidate a region's STag as siw does for Send with Invalidate (a
 * user MR's too): the key stops working, the MR stays registered until
 * ibv_dereg_mr.  0, -EINVAL (no such key) or -EACCES (another PD).
 * Takes ctx->mr_lock. */
int sr_mr_invalidate(struct sr_context *ctx, uint32_t key, struct sr_pd *pd);

/* odp.c: on-demand paging: the device's odp_caps; ibv_advise_mr */
void sr_odp_caps(const struct sr_device *dev, struct ibv_odp_caps *c);
uint32_t sr_odp_xrc_caps(const struct sr_device *dev);
int sr_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags, struct ibv_sge *sg,
		 uint32_t num_sge);

/* domain.c: thread domains, parent domains, and the rings' memory */
/* An object made on p (a QP, SRQ, AH) uses p's protection domain, and p
 * too if p is a parent domain or an import (domain.c: an unimported PD
 * goes with its last use). */
void sr_pd_use(struct ibv_pd *p, int delta);
struct ibv_td *sr_alloc_td(struct ibv_context *c, struct ibv_td_init_attr *attr);
int sr_dealloc_td(struct ibv_td *td);
struct ibv_pd *sr_alloc_parent_domain(struct ibv_context *c, struct ibv_parent_domain_init_attr *attr);
/* ibv_dealloc_pd of a parent domain (its object claimed) */
int sr_dealloc_parent_domain(struct sr_pd *pd, struct sr_obj *o);
/* size bytes for a ring of an object made on pd (NULL: none), zeroed:
 * from a parent domain's allocator (alignment: a page) unless it has
 * none or says IBV_ALLOCATOR_USE_DEFAULT; *m says which, for
 * sr_ring_free.  NULL without memory. */
void *sr_ring_alloc(struct ibv_pd *pd, size_t size, uint64_t type, struct sr_ring_mem *m);
void sr_ring_free(void *p, const struct sr_ring_mem *m);

/* import.c: ibv_import_device and ibv_import_pd, _mr, _dm */
/* ibv_close_device of an imported context (import.c) */
int sr_close_import(struct ibv_context *c);
struct ibv_context *sr_import_device(int cmd_fd);
struct ibv_pd *sr_import_pd(struct ibv_context *c, uint32_t handle);
void sr_unimport_pd(struct ibv_pd *pd);
struct ibv_mr *sr_import_mr(struct ibv_pd *pd, uint32_t handle);
void sr_unimport_mr(struct ibv_mr *mr);
struct ibv_dm *sr_import_dm(struct ibv_context *c, uint32_t handle);
void sr_unimport_dm(struct ibv_dm *dm);
/* Destroying an import (o claimed, of type t) destroys its object, as
 * the kernel's command on the handle does, and then the import. */
int sr_destroy_import(struct sr_obj *o, enum sr_obj_type t);

/* xrc.c: XRC domains, XRC SRQs' numbers, ibv_open_qp */
struct ibv_xrcd *sr_open_xrcd(struct ibv_context *c, struct ibv_xrcd_init_attr *attr);
int sr_close_xrcd(struct ibv_xrcd *xrcd);
/* An XRC SRQ joins its domain (a number given) / leaves it. */
void sr_xrc_srq_add(struct sr_srq *srq);
void sr_xrc_srq_del(struct sr_srq *srq);
/* A TGT QP joins its domain (one handle); a handle of it goes: true if
 * that was the last, and the QP has left the domain. */
void sr_xrc_tgt_add(struct sr_qp *qp);
bool sr_xrc_tgt_put(struct sr_qp *qp);
/* The SRQ of tgt's domain numbered srq_num, or NULL (tgt->lock held). */
struct sr_srq *sr_xrc_srq_find(struct sr_qp *tgt, uint32_t srq_num);
struct ibv_qp *sr_open_qp(struct ibv_context *c, struct ibv_qp_open_attr *attr);
int sr_get_srq_num(struct ibv_srq *srq, uint32_t *num);

/* dm.c */
struct ibv_dm *sr_alloc_dm(struct ibv_context *c, struct ibv_alloc_dm_attr *attr);
int sr_free_dm(struct ibv_dm *dm);
/* The copy verbs of a DM (an allocated one's or an import's). */
void sr_dm_ops(struct ibv_dm *dm);
/* The DM leaves its context (freed, or its context closed; handle.c's
 * lock held): its bytes are the device's again, and what the application
 * still holds of it covers none of them. */
void sr_dm_forget(struct sr_dm *dm);

/* mw.c: memory windows (rxe's), and the local operations of the send
 * queue (IBV_WR_BIND_MW, IBV_WR_LOCAL_INV). */
struct ibv_mw *sr_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int sr_dealloc_mw(struct ibv_mw *mw);
int sr_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind);
/* Remote access through an rkey, as the responder makes it: an MR's key
 * (in the QP's PD) or a bound memory window's (same PD; a type 2 window
 * only from the QP it is bound to).  Caller holds ctx->mr_lock for
 * reading.  The MR path is sr_mr_lookup's; windows are looked at only
 * when no region has the key. */
uint8_t *sr_mw_lookup(struct sr_qp *qp, uint32_t key, uint64_t va, uint64_t len, unsigned int need_access);
static inline uint8_t *sr_rkey_lookup(struct sr_qp *qp, uint32_t key, uint64_t va, uint64_t len,
				      unsigned int need_access)
{
	struct sr_context *ctx = qp->rctx;
	uint8_t *p = sr_mr_lookup(ctx, key, true, qp->rpd, va, len, need_access);

	if (!p && ctx->mw_tab)
		p = sr_mw_lookup(qp, key, va, len, need_access);
	return p;
}
static inline bool sr_wr_is_local(enum ibv_wr_opcode op)
{
	return op == IBV_WR_BIND_MW || op == IBV_WR_LOCAL_INV;
}
/* Execute a BIND_MW or LOCAL_INV WQE when the send queue reaches it
 * (qp->lock held, ctx->mr_lock not held).  Returns its completion status:
 * SUCCESS, MW_BIND_ERR or LOC_QP_OP_ERR, as rxe. */
enum ibv_wc_status sr_local_op(struct sr_qp *qp, const struct sr_send_wqe *w);
/* A Send with Invalidate's rkey, at the receiving QP (qp->lock held,
 * ctx->mr_lock not held): 0, or -EINVAL/-EACCES when it names nothing
 * this QP may invalidate. */
int sr_rkey_invalidate_remote(struct sr_qp *qp, uint32_t rkey);

/* cq.c */
struct ibv_comp_channel *sr_create_comp_channel(struct ibv_context *c);
int sr_destroy_comp_channel(struct ibv_comp_channel *ch);
struct ibv_cq *sr_create_cq(struct ibv_context *c, int cqe, void *cq_context, struct ibv_comp_channel *ch, int vec);
struct ibv_cq_ex *sr_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *attr);
int sr_destroy_cq(struct ibv_cq *cq);
int sr_resize_cq(struct ibv_cq *cq, int cqe);
int sr_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int sr_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int sr_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context);
void sr_ack_cq_events(struct ibv_cq *cq, unsigned int n);
/* Add a completion; signals the channel if armed.  Returns false on overflow
 * (the CQ then raises IBV_EVENT_CQ_ERR). */
bool sr_cq_push(struct sr_cq *cq, const struct ibv_wc *wc, bool solicited);
void sr_cq_clean(struct sr_cq *cq, uint32_t qpn);

/* qp.c */
struct ibv_qp *sr_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
struct ibv_qp *sr_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *attr);
int sr_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
int sr_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init);
int sr_destroy_qp(struct ibv_qp *qp);
int sr_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int sr_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
/* A receive ring (a QP's RQ or an SRQ's): 0 or ENOMEM; post one work
 * request, 0 or an errno (the owner's lock held). */
int sr_rq_init(struct sr_rq *rq, struct ibv_pd *pd, uint64_t type, uint32_t max_wr, uint32_t max_sge);
int sr_rq_post(struct sr_rq *rq, const struct ibv_recv_wr *wr);
/* Flush the SQ's WQEs with IBV_WC_WR_FLUSH_ERR (qp->lock held). */
void sr_flush_sq(struct sr_qp *qp);
/* May a QP post this opcode (on this transport)?  And does its type carry
 * it (else it completes with LOC_QP_OP_ERR)? */
bool sr_qp_opcode_ok(struct sr_qp *qp, enum ibv_wr_opcode op);
bool sr_qp_opcode_carried(struct sr_qp *qp, enum ibv_wr_opcode op);
/* Fill a BIND_MW or LOCAL_INV WQE, served locally in SQ order. */
void sr_local_wqe_fill(struct sr_send_wqe *w, enum ibv_wr_opcode op, uint32_t inv_rkey, const struct ibv_mw *mw,
		       uint32_t rkey, const struct ibv_mw_bind_info *bi);
int sr_av_from_ah_attr(struct sr_context *ctx, const struct ibv_ah_attr *a, struct sr_av *av);
/* Move a QP to the error state from inside the transport (qp->lock held):
 * flushes work requests, raises the async event. */
void sr_qp_to_error(struct sr_qp *qp, enum ibv_event_type ev);
/* Complete the send WQEs at the SQ tail that are DONE (qp->lock held). */
void sr_sq_complete(struct sr_qp *qp);
void sr_sq_check_drained(struct sr_qp *qp);
/* Take the next receive WQE (from SRQ or RQ) into out (max_sge entries).
 * Returns false when none is posted. qp->lock held. */
bool sr_rq_take(struct sr_qp *qp, struct sr_recv_wqe *out);
/* The same, only if the next WQE holds need bytes: one too short stays
 * posted (a UD datagram that does not fit is dropped, IBTA's class D). */
enum sr_rq_take {
	SR_RQ_TAKEN,
	SR_RQ_EMPTY,
	SR_RQ_SHORT
};
enum sr_rq_take sr_rq_take_fit(struct sr_qp *qp, struct sr_recv_wqe *out, uint64_t need);
void sr_flush_qp(struct sr_qp *qp);

/* qp_ex.c: the ibv_wr_* entry points of a QP created with
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS */
void sr_qp_ex_init(struct sr_qp *qp);

/* srq.c */
struct ibv_srq *sr_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
struct ibv_srq *sr_create_srq_ex(struct ibv_context *c, struct ibv_srq_init_attr_ex *attr);
int sr_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask);
int sr_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr);
int sr_destroy_srq(struct ibv_srq *srq);
int sr_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

/* ah.c */
struct ibv_ah *sr_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int sr_destroy_ah(struct ibv_ah *ah);

/* timers.c (the rest of it in core/progress.h) */
/* Whether the timer pass visits qp (qp->lock held): then a deadline moved
 * later needs no arming; the thread, due to look by the earlier one,
 * finds the later one then. */
static inline bool sr_qp_timer_set(struct sr_qp *qp)
{
	return atomic_load_explicit(&qp->timer_slot, memory_order_relaxed) != 0;
}

/* qp_table.c: the context's QPs by number */
struct sr_qp *sr_ctx_find_qp(struct sr_context *ctx, uint32_t qpn); /* ctx->lock held */
int sr_ctx_add_qp(struct sr_context *ctx, struct sr_qp *qp);	    /* 0 or ENOMEM */
void sr_ctx_remove_qp(struct sr_context *ctx, struct sr_qp *qp);

/* mcast_attach.c: UD multicast groups of a context (attach/detach as rxe). */
int sr_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
int sr_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
/* A datagram with BTH DestQP 0xFFFFFF that the daemon passed us (meta dst
 * = the group): to every QP of ctx attached to that group (no lock held). */
void sr_mcast_deliver(struct sr_context *ctx, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len);
/* Free the context's group records (ibv_close_device; the daemon drops
 * the memberships with the connection). */
void sr_mcast_ctx_free(struct sr_context *ctx);

#endif
