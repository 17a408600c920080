/* Devices, addresses and routes for rdma_cm: which device and GID an IP
 * address belongs to, the source address the kernel would pick for a
 * destination, the path record of a resolved route, rdma_getaddrinfo.
 *
 * On RoCEv2 a GID is an IP address (IPv4 as ::ffff:a.b.c.d), so address
 * resolution is a lookup in the devices' GID tables; on iWARP the same
 * table holds the interface addresses. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "abi/export.h"
#include "cm/cm.h"
#include "common/udp_port.h"
#include "common/conf.h"
#include "common/sock.h"

__attribute__((noinline)) void sr_cm_to_in6(const struct sockaddr *sa, struct sockaddr_in6 *a)
{
	memset(a, 0, sizeof(*a));
	a->sin6_family = AF_INET6;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)sa;
		a->sin6_addr.s6_addr[10] = 0xff;
		a->sin6_addr.s6_addr[11] = 0xff;
		memcpy(&a->sin6_addr.s6_addr[12], &s->sin_addr, 4);
		a->sin6_port = s->sin_port;
	} else if (sa->sa_family == AF_INET6) {
		memcpy(a, (const char *)sa, sizeof(*a));
	}
}

void sr_cm_gid_from_in6(const struct sockaddr_in6 *a, union ibv_gid *gid)
{
	memcpy(gid->raw, &a->sin6_addr, 16);
}

bool sr_cm_is_any(const struct sockaddr_in6 *a)
{
	static const uint8_t v4any[16] = { [10] = 0xff, [11] = 0xff };
	return IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr) || !memcmp(&a->sin6_addr, v4any, 16);
}

int sr_cm_addr_len(const struct sockaddr *sa)
{
	if (!sa)
		return 0;
	switch (sa->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	default:
		return 0;
	}
}

uint16_t sr_cm_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

void sr_cm_set_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = htons(port);
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

/* Open every configured device once, as rdma-core's librdmacm does at init:
 * ids on one device share its verbs context and default PD. */
int sr_cm_devs_open(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	static struct sr_conf conf;
	bool have_conf = sr_conf_load(&conf) == 0;

	if (!list)
		return -errno;
	sr_cm.dev_list = calloc((size_t)n + 1, sizeof(*sr_cm.dev_list));
	if (!sr_cm.dev_list) {
		ibv_free_device_list(list);
		return -ENOMEM;
	}
	for (int i = 0; i < n && sr_cm.ndevs < SR_CM_MAX_DEVS; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);
		struct ibv_device_attr da;
		struct ibv_port_attr pa;
		if (!ctx)
			continue; /* e.g. a device type this build cannot open */
		if (ibv_query_device(ctx, &da) || ibv_query_port(ctx, 1, &pa)) {
			ibv_close_device(ctx);
			continue;
		}
		struct sr_cm_dev *d = &sr_cm.devs[sr_cm.ndevs++];
		d->verbs = ctx;
		d->guid = da.node_guid;
		d->iwarp = ctx->device->transport_type == IBV_TRANSPORT_IWARP;
		d->active_mtu = pa.active_mtu;
		d->max_rd_atomic = (uint8_t)(da.max_qp_init_rd_atom > 255 ? 255 : da.max_qp_init_rd_atom);
		d->max_dest_rd_atomic = (uint8_t)(da.max_qp_rd_atom > 255 ? 255 : da.max_qp_rd_atom);
		d->crc = have_conf ? conf.crc : true; /* one switch for all devices */
		if (d->iwarp)
			sr_cm.have_iwarp = true;
		else
			sr_cm.have_roce = true;
		sr_cm.dev_list[sr_cm.ndevs - 1] = ctx;
	}
	ibv_free_device_list(list);
	return 0;
}

struct sr_cm_dev *sr_cm_dev_by_verbs(struct ibv_context *verbs)
{
	for (int i = 0; i < sr_cm.ndevs; i++)
		if (sr_cm.devs[i].verbs == verbs)
			return &sr_cm.devs[i];
	return NULL;
}

bool sr_cm_is_loopback(const struct sockaddr_in6 *a)
{
	if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr))
		return a->sin6_addr.s6_addr[12] == 127;
	return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
}

/* The device a loopback address of a's family goes to, as in the kernel:
 * the first (of kind iwarp, unless any) whose GID 0 is of that family,
 * talking to itself through that address (into *gid if not NULL). */
struct sr_cm_dev *sr_cm_dev_loopback(const struct sockaddr_in6 *a, bool any, bool iwarp, union ibv_gid *gid)
{
	bool v4 = IN6_IS_ADDR_V4MAPPED(&a->sin6_addr);

	for (int i = 0; i < sr_cm.ndevs; i++) {
		union ibv_gid g;
		if ((any || sr_cm.devs[i].iwarp == iwarp) && !ibv_query_gid(sr_cm.devs[i].verbs, 1, 0, &g) &&
		    IN6_IS_ADDR_V4MAPPED((struct in6_addr *)g.raw) == v4) {
			if (gid)
				*gid = g;
			return &sr_cm.devs[i];
		}
	}
	return NULL;
}

/* The device whose GID table holds address a (port ignored). */
struct sr_cm_dev *sr_cm_dev_by_addr(const struct sockaddr_in6 *a, uint8_t *gid_index)
{
	for (int i = 0; i < sr_cm.ndevs; i++) {
		struct sr_cm_dev *d = &sr_cm.devs[i];
		for (int g = 0; g < SR_CM_MAX_GIDS; g++) {
			union ibv_gid gid;
			if (ibv_query_gid(d->verbs, 1, g, &gid))
				break;
			if (!memcmp(gid.raw, &a->sin6_addr, 16)) {
				if (gid_index)
					*gid_index = (uint8_t)g;
				return d;
			}
		}
	}
	return NULL;
}

struct ibv_pd *sr_cm_dev_pd(struct sr_cm_dev *d)
{
	if (!d->pd)
		d->pd = ibv_alloc_pd(d->verbs);
	return d->pd;
}

/* The source address the kernel's routing picks for dst: connect a UDP
 * socket and read its local address.  0 or -errno (-ENETUNREACH ...). */
int sr_cm_route_src(const struct sockaddr_in6 *dst, struct sockaddr_in6 *src)
{
	bool v4 = IN6_IS_ADDR_V4MAPPED(&dst->sin6_addr);
	int fd = sr_socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (v4) {
		struct sockaddr_in d = { .sin_family = AF_INET, .sin_port = htons(4791) }, s;
		socklen_t l = sizeof(s);
		struct sockaddr_in any = { .sin_family = AF_INET };
		memcpy(&d.sin_addr, &dst->sin6_addr.s6_addr[12], 4);
		/* bound first, so that connect does not take an ephemeral port
		 * a QP may need (common/udp_port.h) */
		if (sr_udp_bind_low(fd, (struct sockaddr *)&any, sizeof(any)) ||
		    connect(fd, (struct sockaddr *)&d, sizeof(d)) || getsockname(fd, (struct sockaddr *)&s, &l))
			ret = -errno;
		else
			sr_cm_to_in6((struct sockaddr *)&s, src);
	} else {
		struct sockaddr_in6 d = *dst, s;
		socklen_t l = sizeof(s);
		struct sockaddr_in6 any = { .sin6_family = AF_INET6 };
		d.sin6_port = htons(4791);
		if (sr_udp_bind_low(fd, (struct sockaddr *)&any, sizeof(any)) ||
		    connect(fd, (struct sockaddr *)&d, sizeof(d)) || getsockname(fd, (struct sockaddr *)&s, &l))
			ret = -errno;
		else
			*src = s;
	}
	close(fd);
	if (!ret)
		src->sin6_port = 0;
	return ret;
}

/* The path record of a RoCE route, as the kernel's rdma_cm builds it from
 * the two IP addresses (no SA on Ethernet). */
void sr_cm_fill_path(struct sr_cm_id *id)
{
	struct ibv_sa_path_rec *p = &id->path;
	uint16_t sport = sr_cm_port(&id->id.route.addr.src_addr);
	uint16_t dport = sr_cm_port(&id->id.route.addr.dst_addr);

	memset(p, 0, sizeof(*p));
	sr_cm_gid_from_in6(&id->local, &p->sgid);
	sr_cm_gid_from_in6(&id->peer, &p->dgid);
	id->flow_label = sr_cma_roce_flow_label(sport, dport);
	p->flow_label = htonl(id->flow_label);
	p->hop_limit = SR_CMA_HOP_LIMIT;
	p->traffic_class = id->tos;
	p->reversible = htonl(0x80000000u);
	p->numb_path = 1;
	p->pkey = htons(0xffff);
	p->mtu_selector = 2; /* exactly */
	p->mtu = id->dev ? id->dev->active_mtu : IBV_MTU_1024;
	p->rate_selector = 2;
	p->rate = 0;
	p->packet_life_time_selector = 2;
	p->packet_life_time = SR_CMA_PACKET_LIFETIME;
	id->id.route.path_rec = p;
	id->id.route.num_paths = 1;
	memcpy(&id->id.route.addr.addr.ibaddr.sgid, &p->sgid, 16);
	memcpy(&id->id.route.addr.addr.ibaddr.dgid, &p->dgid, 16);
	id->id.route.addr.addr.ibaddr.pkey = 0xffff;
}

void sr_cm_fill_ah(struct sr_cm_id *id, struct ibv_ah_attr *ah, const union ibv_gid *dgid)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->port_num = 1;
	ah->grh.dgid = *dgid;
	ah->grh.sgid_index = id->gid_index;
	ah->grh.hop_limit = SR_CMA_HOP_LIMIT;
	ah->grh.flow_label = id->flow_label;
	ah->grh.traffic_class = id->tos;
}

/* ---- rdma_getaddrinfo ---- */

static int copy_addr(struct sockaddr **dst, socklen_t *dst_len, const struct sockaddr *src, socklen_t len)
{
	*dst = malloc(len);
	if (!*dst)
		return -1;
	memcpy(*dst, src, len);
	*dst_len = len;
	return 0;
}

SR_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *n = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = n;
	}
}

/* Returns 0, a getaddrinfo EAI_* code as rdma-core does, or -1 with errno. */
SR_EXPORT int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
			       struct rdma_addrinfo **res)
{
	static const struct rdma_addrinfo nohints;
	struct rdma_addrinfo *rai;
	int ret = 0;

	if ((!node && !service && !hints) || !res) {
		errno = EINVAL;
		return -1;
	}
#ifndef RAI_SA
#define RAI_SA 0x00000080
#endif
	if (hints && (hints->ai_flags & RAI_SA)) {
		errno = EOPNOTSUPP; /* no subnet administrator on RoCE/iWARP */
		return -1;
	}
	if (hints && (hints->ai_family == AF_IB)) {
		errno = EAFNOSUPPORT;
		return -1;
	}
	if (!hints)
		hints = &nohints;
	rai = calloc(1, sizeof(*rai));
	if (!rai) {
		errno = ENOMEM;
		return -1;
	}
	if (node || service) {
		struct addrinfo h = { 0 }, *ai;
		if (hints->ai_flags & RAI_PASSIVE)
			h.ai_flags |= AI_PASSIVE;
		if (hints->ai_flags & RAI_NUMERICHOST)
			h.ai_flags |= AI_NUMERICHOST;
		if (hints->ai_flags & RAI_FAMILY)
			h.ai_family = hints->ai_family;
		if (hints->ai_qp_type == IBV_QPT_RC || hints->ai_qp_type == IBV_QPT_UC)
			h.ai_socktype = SOCK_STREAM;
		else if (hints->ai_qp_type == IBV_QPT_UD)
			h.ai_socktype = SOCK_DGRAM;
		if (hints->ai_port_space == RDMA_PS_TCP)
			h.ai_protocol = IPPROTO_TCP;
		else if (hints->ai_port_space == RDMA_PS_UDP)
			h.ai_protocol = IPPROTO_UDP;
		if (!h.ai_socktype && h.ai_protocol)
			h.ai_socktype = h.ai_protocol == IPPROTO_TCP ? SOCK_STREAM : SOCK_DGRAM;
		ret = getaddrinfo(node, service, &h, &ai);
		if (ret) {
			free(rai);
			return ret;
		}
		rai->ai_qp_type = hints->ai_qp_type		? hints->ai_qp_type :
				  ai->ai_socktype == SOCK_DGRAM ? IBV_QPT_UD :
								  IBV_QPT_RC;
		rai->ai_port_space = hints->ai_port_space	    ? hints->ai_port_space :
				     ai->ai_protocol == IPPROTO_UDP ? RDMA_PS_UDP :
								      RDMA_PS_TCP;
		rai->ai_family = ai->ai_family;
		if (ai->ai_flags & AI_PASSIVE) {
			rai->ai_flags = RAI_PASSIVE;
			if (ai->ai_canonname)
				rai->ai_src_canonname = strdup(ai->ai_canonname);
			ret = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, ai->ai_addr, ai->ai_addrlen);
		} else {
			if (ai->ai_canonname)
				rai->ai_dst_canonname = strdup(ai->ai_canonname);
			ret = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, ai->ai_addr, ai->ai_addrlen);
		}
		freeaddrinfo(ai);
	} else {
		rai->ai_flags = hints->ai_flags;
		rai->ai_family = hints->ai_family;
		rai->ai_qp_type = hints->ai_qp_type;
		rai->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_len)
			ret = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, hints->ai_dst_addr, hints->ai_dst_len);
	}
	if (!ret && !rai->ai_src_len && hints->ai_src_len)
		ret = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, hints->ai_src_addr, hints->ai_src_len);
	if (ret) {
		rdma_freeaddrinfo(rai);
		errno = ENOMEM;
		return -1;
	}
	*res = rai;
	return 0;
}
