/* Devices (from the configuration), contexts, device/port/GID queries and
 * the async event queue. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>

#include "core/sr.h"
#include "core/verbs_ops.h"
#include "core/fault.h"
#include "abi/export.h"

int sr_debug;

uint64_t sr_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static pthread_key_t sr_tls_key[SR_TLS_NSLOTS];
static pthread_once_t sr_tls_once = PTHREAD_ONCE_INIT;

static void sr_tls_init(void)
{
	for (int i = 0; i < SR_TLS_NSLOTS; i++)
		pthread_key_create(&sr_tls_key[i], free);
}

void *sr_tls_buf(enum sr_tls_slot slot, size_t size)
{
	pthread_once(&sr_tls_once, sr_tls_init);
	void *p = pthread_getspecific(sr_tls_key[slot]);
	if (!p && (p = malloc(size)))
		pthread_setspecific(sr_tls_key[slot], p);
	return p;
}

void sr_log(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "softrdma[%d]: ", getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- device registry: the only global mutable state ---- */
static pthread_once_t sr_dev_once = PTHREAD_ONCE_INIT;
static struct sr_device *sr_dev_tab[SR_MAX_DEVICES];
static int sr_ndev;

static void sr_devices_load(void)
{
	struct sr_conf conf;
	const char *dbg = getenv("SOFTRDMA_DEBUG");

	sr_debug = dbg && *dbg && strcmp(dbg, "0");
	if (sr_conf_load(&conf)) {
		sr_log("cannot load configuration %s: no devices", conf.path);
		return;
	}
	for (int i = 0; i < conf.ndev && sr_ndev < SR_MAX_DEVICES; i++) {
		struct sr_device *d = calloc(1, sizeof(*d));
		if (!d)
			return;
		d->conf = conf.dev[i];
		d->crc = conf.crc;
		pthread_mutex_init(&d->ctx_lock, NULL);
		if (d->conf.type == SR_DEV_IWARP) {
			d->ibdev.node_type = IBV_NODE_RNIC;
			d->ibdev.transport_type = IBV_TRANSPORT_IWARP;
			d->tops = &sr_iwarp_ops;
		} else {
			d->ibdev.node_type = IBV_NODE_CA;
			d->ibdev.transport_type = IBV_TRANSPORT_IB;
			d->tops = &sr_roce_ops;
		}
		snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%s", d->conf.name);
		snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "uverbs%d", i);
		snprintf(d->ibdev.dev_path, sizeof(d->ibdev.dev_path), "/sys/class/infiniband_verbs/uverbs%d", i);
		snprintf(d->ibdev.ibdev_path, sizeof(d->ibdev.ibdev_path), "/sys/class/infiniband/%s", d->conf.name);
		sr_dev_tab[sr_ndev++] = d;
	}
	if (sr_fault_devices_init(sr_dev_tab, sr_ndev, &conf)) {
		/* a fault plan we cannot follow must not pass for none */
		for (int i = 0; i < sr_ndev; i++) {
			free(sr_dev_tab[i]->faults);
			free(sr_dev_tab[i]);
			sr_dev_tab[i] = NULL;
		}
		sr_ndev = 0;
	}
}

struct sr_device **sr_devices(int *num)
{
	pthread_once(&sr_dev_once, sr_devices_load);
	*num = sr_ndev;
	return sr_dev_tab;
}

/* For libsoftrdma-devnode.so (src/preload/devnode.c): is NAME the dev_name
 * (uverbsN) of one of our devices?  UCX looks for /dev/infiniband/NAME. */
SR_EXPORT int sr_uverbs_node_exists(const char *name)
{
	int n;
	struct sr_device **tab = sr_devices(&n);
	for (int i = 0; i < n; i++)
		if (!strcmp(tab[i]->ibdev.dev_name, name))
			return 1;
	return 0;
}

/* ---- GIDs and addresses ---- */

static uint64_t guid_from_netdev(const struct sr_netdev_info *nd, const char *devname)
{
	bool zero = true;
	for (int i = 0; i < 6; i++)
		zero &= nd->mac[i] == 0;
	if (!zero) {
		/* EUI-64 from the MAC, as rxe does for the node GUID */
		const uint8_t *m = nd->mac;
		return ((uint64_t)(m[0] ^ 2) << 56) | ((uint64_t)m[1] << 48) | ((uint64_t)m[2] << 40) |
		       (0xffull << 32) | (0xfeull << 24) | ((uint64_t)m[3] << 16) | ((uint64_t)m[4] << 8) | m[5];
	}
	/* loopback has no MAC: derive a stable GUID from host and device name */
	char host[256] = "";
	uint64_t h = 0xcbf29ce484222325ull;
	gethostname(host, sizeof(host) - 1);
	for (const char *p = host; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	for (const char *p = devname; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	return (h & ~0x0100000000000000ull) | 0x0200000000000000ull;
}

static enum ibv_mtu mtu_for(int netdev_mtu, int cap)
{
	/* one rule for the library and softrdma-cfg status */
	return (enum ibv_mtu)sr_mtu_bytes_to_enum(sr_mtu_active(netdev_mtu, cap));
}

static void ctx_refresh_netdev(struct sr_context *ctx)
{
	struct sr_netdev_info nd;
	if (sr_netdev_query_dev(&ctx->dev->conf, &nd))
		return;
	ctx->nd = nd;
	ctx->active_mtu = mtu_for(nd.mtu, ctx->dev->conf.mtu);
	ctx->ngid = 0;
	for (int i = 0; i < nd.naddr && ctx->ngid < SR_MAX_ADDRS; i++) {
		struct sr_gid_entry *g = &ctx->gid[ctx->ngid++];
		memcpy(g->gid.raw, &nd.addr[i].addr, 16);
		g->family = nd.addr[i].family;
	}
}

int sr_gid_to_sockaddr(struct sr_context *ctx, const union ibv_gid *gid, struct sockaddr_in6 *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin6_family = AF_INET6;
	memcpy(&sa->sin6_addr, gid->raw, 16);
	sa->sin6_port = htons(4791);
	if (IN6_IS_ADDR_LINKLOCAL(&sa->sin6_addr))
		sa->sin6_scope_id = ctx->nd.ifindex;
	return 0;
}

/* ---- context ---- */

struct ibv_context *sr_open_device(struct ibv_device *ibdev)
{
	struct sr_device *dev = (struct sr_device *)ibdev;
	struct sr_context *ctx;
	int p[2];

	if (!dev->tops) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return NULL;
	ctx->dev = dev;
	if (sr_netdev_query(dev->conf.netdev, &ctx->nd)) {
		sr_log("device %s: network interface %s not found", dev->conf.name, dev->conf.netdev);
		free(ctx);
		errno = ENODEV;
		return NULL;
	}
	ctx_refresh_netdev(ctx);
	ctx->node_guid = guid_from_netdev(&ctx->nd, dev->conf.name);
	ctx->owner = ctx;
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->async_lock, NULL);
	pthread_mutex_init(&ctx->prog.lock, NULL);
	pthread_mutex_init(&ctx->prog.timer_lock, NULL);
	pthread_mutex_init(&ctx->prog.park_lock, NULL);
	pthread_mutex_init(&ctx->txs_lock, NULL);
	pthread_mutex_init(&ctx->mcast_lock, NULL);
	pthread_rwlock_init(&ctx->mr_lock, NULL);
	ctx->prog.epfd = -1;
	ctx->prog.data_epfd = -1;
	ctx->prog.doorbell = -1;

	if (pipe2(p, O_CLOEXEC)) {
		free(ctx);
		return NULL;
	}
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	ctx->async_wr = p[1];

	struct ibv_context *ic = &ctx->vctx.context;
	struct stat st;
	/* A file of its own, as rdma-core's context has its uverbs file:
	 * programs dup() it to share the context (ibv_import_device finds
	 * the context by the file: a memfd is one of a kind). */
	ic->cmd_fd = memfd_create("softrdma-context", MFD_CLOEXEC);
	if (ic->cmd_fd < 0 || fstat(ic->cmd_fd, &st))
		goto fail;
	ctx->cmd_dev = st.st_dev;
	ctx->cmd_ino = st.st_ino;
	sr_ctx_init_verbs(&ctx->vctx, ibdev, ic->cmd_fd, p[0]);
	if (sr_progress_start(ctx))
		goto fail;
	pthread_mutex_lock(&dev->ctx_lock);
	ctx->n_open = 1;
	ctx->dev_next = dev->ctxs;
	dev->ctxs = ctx;
	pthread_mutex_unlock(&dev->ctx_lock);
	return ic;
fail:;
	int e = errno;
	if (ic->cmd_fd >= 0)
		close(ic->cmd_fd);
	close(p[0]);
	close(p[1]);
	free(ctx);
	errno = e;
	return NULL;
}

void sr_ctx_init_verbs(struct verbs_context *v, struct ibv_device *ibdev, int cmd_fd, int async_fd)
{
	struct ibv_context *ic = &v->context;

	*v = sr_verbs_ops;
	ic->device = ibdev;
	ic->cmd_fd = cmd_fd;
	ic->async_fd = async_fd;
	ic->num_comp_vectors = 1;
	pthread_mutex_init(&ic->mutex, NULL);
	ic->abi_compat = __VERBS_ABI_IS_EXTENDED;
	v->sz = sizeof(*v);
}

/* The last of ctx and its imports closed: its objects go, as the kernel
 * destroys them with the uverbs file. */
static void ctx_teardown(struct sr_context *ctx)
{
	sr_progress_stop(ctx);
	sr_obj_ctx_fini(ctx);
	sr_mcast_ctx_free(ctx);
	close(ctx->vctx.context.async_fd);
	close(ctx->async_wr);
	free(ctx->async_q);
	free(ctx->mr_tab);
	free(ctx->mw_tab);
	free(ctx->key_last);
	free(ctx->key_map);
	free(ctx->qpn_tab);
	free(ctx);
}

void sr_ctx_release(struct sr_context *ctx)
{
	bool last;

	pthread_mutex_lock(&ctx->dev->ctx_lock);
	last = --ctx->n_open == 0;
	pthread_mutex_unlock(&ctx->dev->ctx_lock);
	if (last)
		ctx_teardown(ctx);
}

int sr_close_device(struct ibv_context *c)
{
	struct sr_context *ctx = to_sctx(c);
	struct sr_device *dev = ctx->dev;

	if (c != &ctx->vctx.context)
		return sr_close_import(c);
	/* no longer to be imported; its imports keep its objects */
	pthread_mutex_lock(&dev->ctx_lock);
	ctx->closed = true;
	for (struct sr_context **p = &dev->ctxs; *p; p = &(*p)->dev_next)
		if (*p == ctx) {
			*p = ctx->dev_next;
			break;
		}
	pthread_mutex_unlock(&dev->ctx_lock);
	close(c->cmd_fd);
	c->cmd_fd = -1;
	sr_ctx_release(ctx);
	return 0;
}

struct sr_context *sr_ctx_find(dev_t fdev, ino_t fino)
{
	int n;
	struct sr_device **tab = sr_devices(&n);

	for (int i = 0; i < n; i++) {
		struct sr_device *dev = tab[i];
		struct sr_context *found = NULL;

		pthread_mutex_lock(&dev->ctx_lock);
		for (struct sr_context *ctx = dev->ctxs; ctx && !found; ctx = ctx->dev_next)
			if (ctx->cmd_dev == fdev && ctx->cmd_ino == fino) {
				ctx->n_open++;
				found = ctx;
			}
		pthread_mutex_unlock(&dev->ctx_lock);
		if (found)
			return found;
	}
	return NULL;
}

/* ---- queries ---- */

int sr_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	struct sr_context *ctx = to_sctx(c);
	bool iwarp = ctx->dev->conf.type == SR_DEV_IWARP;

	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "softrdma-0.1");
	a->node_guid = htobe64(ctx->node_guid);
	a->sys_image_guid = htobe64(ctx->node_guid);
	a->max_mr_size = SR_MAX_MR_SIZE;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = SR_VENDOR_ID;
	a->vendor_part_id = 0;
	a->hw_ver = 0;
	a->max_qp = (int)sr_obj_limit(ctx->dev, SR_OBJ_QP);
	a->max_qp_wr = SR_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR | IBV_DEVICE_AUTO_PATH_MIG |
			      IBV_DEVICE_CHANGE_PHY_PORT | IBV_DEVICE_UD_AV_PORT_ENFORCE |
			      IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN |
			      IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_MEM_MGT_EXTENSIONS;
	/* memory windows as rxe (type 1 and 2B), XRC; siw has neither */
	if (!iwarp)
		a->device_cap_flags |= IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_XRC;
	a->max_sge = SR_MAX_SGE;
	a->max_sge_rd = iwarp ? 1 : SR_MAX_SGE; /* an iWARP Read Request names one sink buffer (siw: 1) */
	a->max_cq = (int)sr_obj_limit(ctx->dev, SR_OBJ_CQ);
	a->max_cqe = SR_MAX_CQE - 1;
	a->max_mr = (int)sr_obj_limit(ctx->dev, SR_OBJ_MR);
	a->max_pd = (int)sr_obj_limit(ctx->dev, SR_OBJ_PD);
	a->max_qp_rd_atom = SR_MAX_RD_ATOMIC;
	a->max_ee_rd_atom = 0;
	a->max_res_rd_atom = SR_MAX_RD_ATOMIC * SR_MAX_QP;
	a->max_qp_init_rd_atom = SR_MAX_RD_ATOMIC;
	a->max_ee_init_rd_atom = 0;
	a->atomic_cap = iwarp ? IBV_ATOMIC_NONE : IBV_ATOMIC_HCA;
	a->max_ee = 0;
	a->max_rdd = 0;
	a->max_mw = (int)sr_obj_limit(ctx->dev, SR_OBJ_MW);
	a->max_raw_ipv6_qp = 0;
	a->max_raw_ethy_qp = 0;
	a->max_mcast_grp = iwarp ? 0 : SR_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = iwarp ? 0 : SR_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = iwarp ? 0 : SR_MAX_MCAST_GRP * SR_MAX_MCAST_QP_ATTACH;
	a->max_ah = (int)sr_obj_limit(ctx->dev, SR_OBJ_AH);
	a->max_fmr = 0;
	a->max_map_per_fmr = 0;
	a->max_srq = (int)sr_obj_limit(ctx->dev, SR_OBJ_SRQ);
	a->max_srq_wr = SR_MAX_SRQ_WR;
	a->max_srq_sge = SR_MAX_SGE;
	a->max_pkeys = SR_MAX_PKEYS;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
	return 0;
}

int sr_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in, struct ibv_device_attr_ex *a,
		       size_t size)
{
	struct ibv_device_attr_ex full;

	if (in && in->comp_mask)
		return EINVAL;
	if (size < sizeof(struct ibv_device_attr))
		return EINVAL;
	memset(&full, 0, sizeof(full));
	sr_query_device(c, &full.orig_attr);
	full.device_cap_flags_ex = full.orig_attr.device_cap_flags;
	full.completion_timestamp_mask = SR_TIMESTAMP_MASK;
	full.hca_core_clock = SR_HCA_CORE_CLOCK_KHZ;
	full.max_dm_size = SR_MAX_DM_SIZE;
	sr_odp_caps(to_sctx(c)->dev, &full.odp_caps);
	full.xrc_odp_caps = sr_odp_xrc_caps(to_sctx(c)->dev);
	full.phys_port_cnt_ex = 1;
	memcpy(a, &full, size < sizeof(full) ? size : sizeof(full));
	return 0;
}

/* As mlx5: the raw clock in tv_nsec (tv_sec 0), EINVAL for a mask bit
 * it does not know. */
int sr_query_rt_values(struct ibv_context *c, struct ibv_values_ex *v)
{
	if (v->comp_mask & ~(uint32_t)IBV_VALUES_MASK_RAW_CLOCK)
		return EINVAL;
	if (v->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
		v->raw_clock.tv_sec = 0;
		v->raw_clock.tv_nsec = (long)sr_dev_clock_ns();
	}
	return 0;
}

int sr_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a)
{
	struct sr_context *ctx = to_sctx(c);
	bool iwarp = ctx->dev->conf.type == SR_DEV_IWARP;
	bool up;

	if (port != 1)
		return EINVAL;
	ctx_refresh_netdev(ctx);
	up = (ctx->nd.flags & IFF_UP) && (ctx->nd.flags & IFF_RUNNING) && !atomic_load(&ctx->fatal);
	memset(a, 0, sizeof(*a));
	a->state = up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = ctx->active_mtu;
	a->gid_tbl_len = SR_MAX_ADDRS;
	a->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS | IBV_PORT_DEVICE_MGMT_SUP |
			    IBV_PORT_VENDOR_CLASS_SUP;
	a->max_msg_sz = SR_MAX_MSG_SIZE;
	a->pkey_tbl_len = iwarp ? 1 : SR_MAX_PKEYS;
	a->lid = 0;
	a->sm_lid = 0;
	a->lmc = 0;
	a->max_vl_num = 1;
	a->sm_sl = 0;
	a->subnet_timeout = 0;
	a->init_type_reply = 0;
	a->active_width = 2;  /* 4x */
	a->active_speed = 32; /* EDR: reported like rxe on a 100G-class link */
	a->phys_state = up ? 5 /* LinkUp */ : 3 /* Disabled */;
	a->link_layer = IBV_LINK_LAYER_ETHERNET; /* iWARP too, as the kernel reports siw's port */
	a->flags = 0;
	a->port_cap_flags2 = 0;
	return 0;
}

int sr_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid)
{
	struct sr_context *ctx = to_sctx(c);

	if (port != 1 || index < 0 || index >= SR_MAX_ADDRS)
		return EINVAL;
	if (index >= ctx->ngid) {
		/* unused entries read as zero, as in the kernel's GID table */
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	*gid = ctx->gid[index].gid;
	return 0;
}

int sr_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index, struct ibv_gid_entry *e)
{
	struct sr_context *ctx = to_sctx(c);

	if (port != 1 || index >= SR_MAX_ADDRS)
		return EINVAL;
	if ((int)index >= ctx->ngid)
		return ENODATA;
	memset(e, 0, sizeof(*e));
	e->gid = ctx->gid[index].gid;
	e->gid_index = index;
	e->port_num = port;
	e->gid_type = ctx->dev->conf.type == SR_DEV_IWARP ? IBV_GID_TYPE_IB : IBV_GID_TYPE_ROCE_V2;
	e->ndev_ifindex = ctx->nd.ifindex;
	return 0;
}

int sr_query_pkey(struct ibv_context *c, uint8_t port, int index, __be16 *pkey)
{
	if (port != 1 || index != 0)
		return EINVAL;
	*pkey = htobe16(0xffff);
	return 0;
}

/* ---- async events ----
 * The events wait in a queue; the pipe behind context->async_fd carries one
 * token byte per event, so the fd polls readable exactly while events wait.
 * Destroying a QP or SRQ purges its unread events (and their tokens), as
 * uverbs does, so no event names a freed object. */

struct sr_async_rec {
	enum ibv_event_type type;
	void *obj;
};

void sr_post_async_event(struct sr_context *ctx, enum ibv_event_type type, void *obj)
{
	char tok = 1;
	ssize_t n;

	pthread_mutex_lock(&ctx->async_lock);
	if (ctx->async_n == ctx->async_cap) {
		uint32_t nc = ctx->async_cap ? ctx->async_cap * 2 : 16;
		struct sr_async_rec *q = nc <= 65536 ? realloc(ctx->async_q, nc * sizeof(*q)) : NULL;
		if (!q) {
			pthread_mutex_unlock(&ctx->async_lock);
			SR_DBG("async event %d lost (queue full)", type);
			return;
		}
		ctx->async_q = q;
		ctx->async_cap = nc;
	}
	ctx->async_q[ctx->async_n].type = type;
	ctx->async_q[ctx->async_n].obj = obj;
	ctx->async_n++;
	do {
		n = write(ctx->async_wr, &tok, 1);
	} while (n < 0 && errno == EINTR);
	pthread_mutex_unlock(&ctx->async_lock);
}

void sr_ctx_fatal(struct sr_context *ctx, const char *why)
{
	if (atomic_exchange(&ctx->fatal, true))
		return;
	sr_log("%s: %s: this context's QPs are in error (IBV_EVENT_DEVICE_FATAL); open the device again",
	       ctx->dev->ibdev.name, why);
	pthread_mutex_lock(&ctx->lock);
	for (struct sr_qp *qp = ctx->qp_list; qp; qp = qp->next) {
		pthread_mutex_lock(&qp->lock);
		if (!qp->dead)
			sr_qp_to_error(qp, IBV_EVENT_QP_FATAL);
		pthread_mutex_unlock(&qp->lock);
	}
	pthread_mutex_unlock(&ctx->lock);
	sr_post_async_event(ctx, IBV_EVENT_DEVICE_FATAL, (void *)(intptr_t)1);
}

void sr_purge_async_events(struct sr_context *ctx, void *obj)
{
	uint32_t j = 0, removed;
	char buf[64];

	pthread_mutex_lock(&ctx->async_lock);
	for (uint32_t i = 0; i < ctx->async_n; i++)
		if (ctx->async_q[i].obj != obj)
			ctx->async_q[j++] = ctx->async_q[i];
	removed = ctx->async_n - j;
	ctx->async_n = j;
	/* take back their tokens (non-blocking: a reader may hold one) */
	int fl = fcntl(ctx->vctx.context.async_fd, F_GETFL);
	fcntl(ctx->vctx.context.async_fd, F_SETFL, fl | O_NONBLOCK);
	while (removed) {
		ssize_t n = read(ctx->vctx.context.async_fd, buf, removed < sizeof(buf) ? removed : sizeof(buf));
		if (n <= 0)
			break;
		removed -= (uint32_t)n;
	}
	fcntl(ctx->vctx.context.async_fd, F_SETFL, fl);
	pthread_mutex_unlock(&ctx->async_lock);
}

int sr_get_async_event(struct ibv_context *c, struct ibv_async_event *ev)
{
	struct sr_context *ctx = to_sctx(c);
	struct sr_async_rec r;
	char tok;

	for (;;) {
		ssize_t n = read(c->async_fd, &tok, 1);
		if (n != 1)
			return -1; /* EAGAIN for a non-blocking fd, EINTR for a signal, as rdma-core */
		pthread_mutex_lock(&ctx->async_lock);
		if (ctx->async_n) {
			r = ctx->async_q[0];
			memmove(ctx->async_q, ctx->async_q + 1, (ctx->async_n - 1) * sizeof(*ctx->async_q));
			ctx->async_n--;
			pthread_mutex_unlock(&ctx->async_lock);
			break;
		}
		/* its event was purged while we read the token: wait for the next */
		pthread_mutex_unlock(&ctx->async_lock);
	}
	memset(ev, 0, sizeof(*ev));
	ev->event_type = r.type;
	switch (r.type) {
	case IBV_EVENT_CQ_ERR:
		ev->element.cq = r.obj;
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		ev->element.qp = r.obj;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		ev->element.srq = r.obj;
		break;
	default:
		ev->element.port_num = (int)(intptr_t)r.obj;
		break;
	}
	return 0;
}

void sr_ack_async_event(struct ibv_async_event *ev)
{
	/* objects are not destroyed under an unacked event here */
}
