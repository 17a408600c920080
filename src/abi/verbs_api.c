/* The exported libibverbs API (rdma-core 44 ABI): argument checks that
 * rdma-core itself does, then a call into core/.  No logic of its own.
 * Verbs that rdma-core marks as returning errno values return them;
 * those returning pointers set errno. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "abi/export.h"
#include "core/sr.h"
#include "core/verbs_ops.h"

/* A verb of rdma-core that goes to the kernel fails with errno set as
 * well as returned (the write() or ioctl() that failed set it), and
 * applications print it: "if (ibv_modify_qp(...)) perror(...)", UCX's
 * "%m".  The verbs below that return an errno value set errno too. */
static int with_errno(int err)
{
	if (err)
		errno = err;
	return err;
}

/* ---- devices ---- */

SR_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	int n;
	struct sr_device **devs = sr_devices(&n);
	struct ibv_device **list = calloc((size_t)n + 1, sizeof(*list));

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < n; i++)
		list[i] = &devs[i]->ibdev;
	if (num)
		*num = n;
	return list;
}

SR_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

SR_EXPORT const char *ibv_get_device_name(struct ibv_device *dev)
{
	return dev ? dev->name : NULL;
}

SR_EXPORT __be64 ibv_get_device_guid(struct ibv_device *dev)
{
	struct ibv_context *c = sr_open_device(dev);
	__be64 g = 0;
	if (c) {
		g = htobe64(to_sctx(c)->node_guid);
		sr_close_device(c);
	}
	return g;
}

SR_EXPORT int ibv_get_device_index(struct ibv_device *dev)
{
	int n;
	struct sr_device **devs = sr_devices(&n);
	for (int i = 0; i < n; i++)
		if (&devs[i]->ibdev == dev)
			return i;
	return -1;
}

SR_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
	if (!dev) {
		errno = EINVAL;
		return NULL;
	}
	return sr_open_device(dev);
}

SR_EXPORT int ibv_close_device(struct ibv_context *c)
{
	return sr_close_device(c);
}

SR_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	return sr_import_device(cmd_fd);
}

SR_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *c, uint32_t h)
{
	return sr_import_pd(c, h);
}

SR_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
	sr_unimport_pd(pd);
}

SR_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t h)
{
	return sr_import_mr(pd, h);
}

SR_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
	sr_unimport_mr(mr);
}

SR_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *c, uint32_t h)
{
	return sr_import_dm(c, h);
}

SR_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
	sr_unimport_dm(dm);
}

SR_EXPORT int ibv_get_async_event(struct ibv_context *c, struct ibv_async_event *ev)
{
	return sr_get_async_event(c, ev);
}

SR_EXPORT void ibv_ack_async_event(struct ibv_async_event *ev)
{
	sr_ack_async_event(ev);
}

/* ---- queries ---- */

SR_EXPORT int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	return sr_query_device(c, a);
}

static int op_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a, size_t len)
{
	struct ibv_port_attr full;
	int err = sr_query_port(c, port, &full);
	if (!err)
		memcpy(a, &full, len < sizeof(full) ? len : sizeof(full));
	return with_errno(err);
}

#undef ibv_query_port
/* reached only by binaries built without the verbs_context query_port op */
SR_EXPORT int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *a)
{
	/* as rdma-core: the caller's buffer is a full struct ibv_port_attr */
	return with_errno(sr_query_port(c, port, (struct ibv_port_attr *)a));
}

SR_EXPORT int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid)
{
	return with_errno(sr_query_gid(c, port, index, gid)) ? -1 : 0;
}

SR_EXPORT int _ibv_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index, struct ibv_gid_entry *e,
				uint32_t flags, size_t entry_size)
{
	struct ibv_gid_entry full;
	int err;
	if (flags || entry_size < sizeof(full))
		return EINVAL;
	err = sr_query_gid_ex(c, port, index, &full);
	if (!err)
		memcpy(e, &full, sizeof(full));
	return err;
}

SR_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *c, struct ibv_gid_entry *entries, size_t max, uint32_t flags,
				       size_t entry_size)
{
	size_t n = 0;
	if (flags || entry_size < sizeof(struct ibv_gid_entry))
		return -EINVAL;
	for (uint32_t i = 0; i < SR_MAX_ADDRS; i++) {
		struct ibv_gid_entry e;
		if (sr_query_gid_ex(c, 1, i, &e))
			continue;
		if (n >= max)
			return -EINVAL;
		memcpy((char *)entries + n * entry_size, &e, sizeof(e));
		n++;
	}
	return (ssize_t)n;
}

/* rdma-core's private enum ibv_gid_type_sysfs: 0 = IB/RoCE v1, 1 = RoCE v2 */
SR_EXPORT int ibv_query_gid_type(struct ibv_context *c, uint8_t port, unsigned int index, int *type)
{
	struct ibv_gid_entry e;
	if (sr_query_gid_ex(c, port, index, &e)) {
		errno = EINVAL;
		return -1;
	}
	*type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? 1 : 0;
	return 0;
}

SR_EXPORT int ibv_query_pkey(struct ibv_context *c, uint8_t port, int index, __be16 *pkey)
{
	/* rdma-core reads ports/<port>/pkeys/<index> in sysfs: no such file */
	if (sr_query_pkey(c, port, index, pkey)) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}

SR_EXPORT int ibv_get_pkey_index(struct ibv_context *c, uint8_t port, __be16 pkey)
{
	__be16 p;
	if (sr_query_pkey(c, port, 0, &p) == 0 && p == pkey)
		return 0;
	return -1;
}

/* ---- PD, MR ---- */

SR_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
	return sr_alloc_pd(c);
}

SR_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	return with_errno(sr_dealloc_pd(pd));
}

SR_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova, unsigned int access)
{
	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	return sr_reg_mr(pd, addr, len, iova, access & ~IBV_ACCESS_OPTIONAL_RANGE);
}

#undef ibv_reg_mr
SR_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	return ibv_reg_mr_iova2(pd, addr, len, (uintptr_t)addr, (unsigned int)access);
}

#undef ibv_reg_mr_iova
SR_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, len, iova, (unsigned int)access);
}

SR_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova, int fd,
					   int access)
{
	errno = EOPNOTSUPP; /* no device memory behind a dma-buf here */
	return NULL;
}

/* As rdma-core's ibv_rereg_mr(): what libibverbs itself refuses is
 * IBV_REREG_MR_ERR_INPUT, what the device refuses IBV_REREG_MR_ERR_CMD,
 * errno says why (the verb does not return errno values). */
SR_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t len, int access)
{
	if ((flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) || ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!len || !addr)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (with_errno(sr_rereg_mr(mr, flags, pd, addr, len, access)))
		return IBV_REREG_MR_ERR_CMD;
	return 0;
}

SR_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	return with_errno(sr_dereg_mr(mr));
}

/* ---- CQ and channels ---- */

SR_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c)
{
	return sr_create_comp_channel(c);
}

SR_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	return sr_destroy_comp_channel(ch);
}

SR_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *cq_context, struct ibv_comp_channel *ch,
				       int vec)
{
	return sr_create_cq(c, cqe, cq_context, ch, vec);
}

SR_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	return with_errno(sr_resize_cq(cq, cqe));
}

SR_EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
	return with_errno(sr_destroy_cq(cq));
}

SR_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context)
{
	return sr_get_cq_event(ch, cq, cq_context);
}

SR_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int n)
{
	sr_ack_cq_events(cq, n);
}

/* ---- SRQ ---- */

SR_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	return sr_create_srq(pd, attr);
}

SR_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
	return with_errno(sr_modify_srq(srq, attr, mask));
}

SR_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	return with_errno(sr_query_srq(srq, attr));
}

SR_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	return with_errno(sr_destroy_srq(srq));
}

/* ---- QP ---- */

SR_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	return sr_create_qp(pd, attr);
}

SR_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	return with_errno(sr_modify_qp(qp, attr, mask));
}

SR_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init)
{
	return with_errno(sr_query_qp(qp, attr, mask, init));
}

SR_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	return with_errno(sr_destroy_qp(qp));
}

SR_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct sr_qp *q = to_sqp(qp);
	return q->has_qp_ex ? &q->ibqp : NULL;
}

SR_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	/* payload is placed in packet (PSN) order, so data lands in order */
	return flags ? 0 : 1;
}

SR_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return EOPNOTSUPP;
}

SR_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return EOPNOTSUPP;
}

/* ---- AH ---- */

SR_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	return sr_create_ah(pd, attr);
}

SR_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	return with_errno(sr_destroy_ah(ah));
}

SR_EXPORT int ibv_init_ah_from_wc(struct ibv_context *c, uint8_t port, struct ibv_wc *wc, struct ibv_grh *grh,
				  struct ibv_ah_attr *ah)
{
	struct sr_context *ctx = to_sctx(c);
	union ibv_gid remote, local;
	const uint8_t *g = (const uint8_t *)grh;

	if (!(wc->wc_flags & IBV_WC_GRH) || !grh)
		return -1; /* RoCE needs the GRH to know where a datagram came from */
	uint8_t tclass;
	memset(&remote, 0, sizeof(remote));
	memset(&local, 0, sizeof(local));
	if ((g[20] >> 4) == 4) {
		/* RoCEv2 over IPv4: the IPv4 header is in the GRH's last 20 bytes */
		remote.raw[10] = remote.raw[11] = 0xff;
		local.raw[10] = local.raw[11] = 0xff;
		memcpy(&remote.raw[12], g + 20 + 12, 4);
		memcpy(&local.raw[12], g + 20 + 16, 4);
		tclass = g[20 + 1];
	} else {
		remote = grh->sgid;
		local = grh->dgid;
		tclass = (uint8_t)(be32toh(grh->version_tclass_flow) >> 20);
	}
	memset(ah, 0, sizeof(*ah));
	/* as rdma-core: the answer goes with the traffic class it came with */
	ah->grh.traffic_class = tclass;
	ah->is_global = 1;
	ah->port_num = port;
	ah->sl = wc->sl;
	ah->grh.dgid = remote;
	ah->grh.hop_limit = 0xff;
	ah->grh.sgid_index = 0;
	for (int i = 0; i < ctx->ngid; i++)
		if (!memcmp(&ctx->gid[i].gid, &local, sizeof(local))) {
			ah->grh.sgid_index = (uint8_t)i;
			break;
		}
	return 0;
}

SR_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh, uint8_t port)
{
	struct ibv_ah_attr a;
	if (ibv_init_ah_from_wc(pd->context, port, wc, grh, &a)) {
		errno = EINVAL;
		return NULL;
	}
	return sr_create_ah(pd, &a);
}

SR_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return with_errno(sr_attach_mcast(qp, gid, lid));
}

SR_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return with_errno(sr_detach_mcast(qp, gid, lid));
}

SR_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *c, struct ibv_ah_attr *attr, uint8_t mac[6],
					  uint16_t *vid)
{
	/* L2 addressing is the kernel's business on a UDP socket */
	memset(mac, 0, 6);
	if (vid)
		*vid = 0xffff;
	return 0;
}

/* ---- the ops tables ---- */

static int op_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	return sr_poll_cq(cq, n, wc);
}
static int op_req_notify(struct ibv_cq *cq, int s)
{
	return sr_req_notify_cq(cq, s);
}
static int op_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return sr_post_send(qp, wr, bad);
}
static int op_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return sr_post_recv(qp, wr, bad);
}
static int op_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return sr_post_srq_recv(srq, wr, bad);
}
static int op_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *a, size_t size)
{
	return sr_query_device_ex(c, in, a, size);
}
static struct ibv_dm *op_alloc_dm(struct ibv_context *c, struct ibv_alloc_dm_attr *a)
{
	return sr_alloc_dm(c, a);
}
static int op_free_dm(struct ibv_dm *dm)
{
	return sr_free_dm(dm);
}
static struct ibv_mr *op_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t off, size_t len, unsigned int access)
{
	return sr_reg_dm_mr(pd, dm, off, len, access);
}
static struct ibv_td *op_alloc_td(struct ibv_context *c, struct ibv_td_init_attr *a)
{
	return sr_alloc_td(c, a);
}
static int op_dealloc_td(struct ibv_td *td)
{
	return sr_dealloc_td(td);
}
static struct ibv_pd *op_alloc_parent_domain(struct ibv_context *c, struct ibv_parent_domain_init_attr *a)
{
	return sr_alloc_parent_domain(c, a);
}
static int op_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags, struct ibv_sge *sg,
			uint32_t n)
{
	return sr_advise_mr(pd, advice, flags, sg, n);
}
static struct ibv_xrcd *op_open_xrcd(struct ibv_context *c, struct ibv_xrcd_init_attr *a)
{
	return sr_open_xrcd(c, a);
}
static int op_close_xrcd(struct ibv_xrcd *x)
{
	return sr_close_xrcd(x);
}
static struct ibv_srq *op_create_srq_ex(struct ibv_context *c, struct ibv_srq_init_attr_ex *a)
{
	return sr_create_srq_ex(c, a);
}
static int op_get_srq_num(struct ibv_srq *srq, uint32_t *n)
{
	return sr_get_srq_num(srq, n);
}
static struct ibv_qp *op_open_qp(struct ibv_context *c, struct ibv_qp_open_attr *a)
{
	return sr_open_qp(c, a);
}
static int op_query_rt_values(struct ibv_context *c, struct ibv_values_ex *v)
{
	return sr_query_rt_values(c, v);
}
static struct ibv_cq_ex *op_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *a)
{
	return sr_create_cq_ex(c, a);
}
static struct ibv_qp *op_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a)
{
	return sr_create_qp_ex(c, a);
}
/* ibv_alloc_mw, ibv_bind_mw and ibv_dealloc_mw are inline in verbs.h */
static struct ibv_mw *op_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	return sr_alloc_mw(pd, type);
}
static int op_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *b)
{
	return sr_bind_mw(qp, mw, b);
}
static int op_dealloc_mw(struct ibv_mw *mw)
{
	return with_errno(sr_dealloc_mw(mw));
}

const struct verbs_context sr_verbs_ops = {
	.context.ops = {
		.poll_cq = op_poll_cq,
		.req_notify_cq = op_req_notify,
		.post_send = op_post_send,
		.post_recv = op_post_recv,
		.post_srq_recv = op_post_srq_recv,
		.alloc_mw = op_alloc_mw,
		.bind_mw = op_bind_mw,
		.dealloc_mw = op_dealloc_mw,
	},
	.query_port = op_query_port,
	.query_device_ex = op_query_device_ex,
	.create_cq_ex = op_create_cq_ex,
	.query_rt_values = op_query_rt_values,
	.alloc_dm = op_alloc_dm,
	.free_dm = op_free_dm,
	.reg_dm_mr = op_reg_dm_mr,
	.advise_mr = op_advise_mr,
	.open_xrcd = op_open_xrcd,
	.close_xrcd = op_close_xrcd,
	.create_srq_ex = op_create_srq_ex,
	.get_srq_num = op_get_srq_num,
	.open_qp = op_open_qp,
	.alloc_td = op_alloc_td,
	.dealloc_td = op_dealloc_td,
	.alloc_parent_domain = op_alloc_parent_domain,
	.create_qp_ex = op_create_qp_ex,
};
