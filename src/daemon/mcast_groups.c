/* softrdmad: UD multicast groups and the clients that joined them
 * (ipc.h, "Multicast"). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "daemon/softrdmad.h"
#include "common/sock.h"

/* ---- multicast memberships ---- */

static struct mc_group *mc_find(const struct in6_addr *addr, int ifindex)
{
	for (struct mc_group *g = d.mcast; g; g = g->next)
		if (g->ifindex == ifindex && !memcmp(&g->addr, addr, sizeof(*addr)))
			return g;
	return NULL;
}

/* A socket that holds the kernel membership of (addr, ifindex).  It is
 * never bound, so it receives nothing itself: the UDP 4791 sockets do
 * (IP_MULTICAST_ALL).  One per group keeps the kernel's per-socket limit
 * of memberships out of the way.  Returns the fd or -errno. */
static int mc_socket(const struct in6_addr *addr, int ifindex)
{
	bool v4 = IN6_IS_ADDR_V4MAPPED(addr);
	int fd = sr_socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc;

	if (fd < 0)
		return -errno;
	if (v4) {
		struct ip_mreqn mr;

		memset(&mr, 0, sizeof(mr));
		memcpy(&mr.imr_multiaddr, &addr->s6_addr[12], 4);
		mr.imr_ifindex = ifindex;
		rc = setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr));
	} else {
		struct ipv6_mreq mr;

		memset(&mr, 0, sizeof(mr));
		mr.ipv6mr_multiaddr = *addr;
		mr.ipv6mr_interface = (unsigned)ifindex;
		rc = setsockopt(fd, IPPROTO_IPV6, IPV6_ADD_MEMBERSHIP, &mr, sizeof(mr));
	}
	if (rc < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

int mc_join(struct client *c, const struct sr_ipc_mcast *req)
{
	struct mc_group *g;
	struct mc_member *m;
	char a[INET6_ADDRSTRLEN];

	if (!sr_in6_is_mcast(&req->group) || req->ifindex <= 0 || req->flags)
		return -EINVAL;
	if (!IN6_IS_ADDR_V4MAPPED(&req->group) && d.udp6_fd < 0)
		return -EAFNOSUPPORT;
	g = mc_find(&req->group, req->ifindex);
	if (g) {
		for (m = g->members; m; m = m->next)
			if (m->c == c) {
				if (m->refs == UINT32_MAX)
					return -ENOSPC;
				m->refs++;
				return 0;
			}
	} else if (d.nmcast >= MCAST_MAX_GROUPS) {
		return -ENOSPC;
	}
	if (c->nmcast >= MCAST_MAX_PER_CLIENT)
		return -ENOSPC;
	if (quota_take(c->user, Q_MCAST))
		return -EDQUOT;
	m = calloc(1, sizeof(*m));
	if (!m) {
		quota_give(c->user, Q_MCAST);
		return -ENOMEM;
	}
	if (!g) {
		int fd;

		g = calloc(1, sizeof(*g));
		if (!g) {
			quota_give(c->user, Q_MCAST);
			free(m);
			return -ENOMEM;
		}
		fd = mc_socket(&req->group, req->ifindex);
		if (fd < 0) {
			quota_give(c->user, Q_MCAST);
			free(g);
			free(m);
			return fd;
		}
		g->addr = req->group;
		g->ifindex = req->ifindex;
		g->fd = fd;
		g->next = d.mcast;
		d.mcast = g;
		d.nmcast++;
		inet_ntop(AF_INET6, &g->addr, a, sizeof(a));
		logmsg("joined multicast group %s on ifindex %d", a, g->ifindex);
	}
	m->c = c;
	m->refs = 1;
	m->next = g->members;
	g->members = m;
	g->nmembers++;
	c->nmcast++;
	return 0;
}

/* Drops member *mp of g; the group goes too when it was the last. */
static void mc_unlink_member(struct mc_group *g, struct mc_member **mp)
{
	struct mc_member *m = *mp;

	*mp = m->next;
	g->nmembers--;
	m->c->nmcast--;
	quota_give(m->c->user, Q_MCAST);
	free(m);
	if (!g->nmembers) {
		char a[INET6_ADDRSTRLEN];

		for (struct mc_group **gp = &d.mcast; *gp; gp = &(*gp)->next)
			if (*gp == g) {
				*gp = g->next;
				break;
			}
		d.nmcast--;
		inet_ntop(AF_INET6, &g->addr, a, sizeof(a));
		logmsg("left multicast group %s on ifindex %d", a, g->ifindex);
		close(g->fd); /* the kernel drops the membership with the socket */
		free(g);
	}
}

int mc_leave(struct client *c, const struct sr_ipc_mcast *req)
{
	struct mc_group *g = mc_find(&req->group, req->ifindex);

	if (!g)
		return -ENOENT;
	for (struct mc_member **mp = &g->members; *mp; mp = &(*mp)->next)
		if ((*mp)->c == c) {
			if (--(*mp)->refs == 0)
				mc_unlink_member(g, mp);
			return 0;
		}
	return -ENOENT;
}

void mc_release_all(struct client *c)
{
	struct mc_group *g = d.mcast;

	while (g && c->nmcast) {
		/* unlinking the last member frees g: step first */
		struct mc_group *next = g->next;

		for (struct mc_member **mp = &g->members; *mp; mp = &(*mp)->next)
			if ((*mp)->c == c) {
				mc_unlink_member(g, mp);
				break;
			}
		g = next;
	}
}

/* A multicast datagram (msg: hdr + meta + datagram, meta dst = the
 * group): one copy to each client that joined the group on the interface
 * it came in on (ifindex 0: any interface), except from.  Returns whether
 * any client had joined. */
bool mc_fanout(const struct in6_addr *group, int ifindex, const uint8_t *msg, size_t len, const struct client *from)
{
	bool any = false;

	if (!sr_in6_is_mcast(group))
		return false;
	for (struct mc_group *g = d.mcast; g; g = g->next) {
		if ((ifindex && g->ifindex != ifindex) || memcmp(&g->addr, group, sizeof(*group)))
			continue;
		/* deliver() never frees a client (a failed send leaves it to
		 * its EPOLLHUP), so the list stays valid while we walk it. */
		for (struct mc_member *m = g->members; m; m = m->next) {
			if (m->c == from)
				continue;
			any = true;
			if (from && !may_forward(from, m->c)) {
				drop(from, DROP_FOREIGN);
				continue;
			}
			g->delivered++;
			m->delivered++;
			deliver(m->c, from, msg, len);
		}
	}
	return any;
}
