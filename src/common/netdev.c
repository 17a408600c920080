/* Network interface discovery: getifaddrs() for addresses, SIOCGIF* ioctls
 * for flags, MTU, MAC and index.  No netlink library: this runs inside every
 * verbs process and must not pull in dependencies. */
#include "common/conf.h"
#include "common/sock.h"

#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int ioctl_sock(void)
{
	int fd = sr_socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	/* SIOCGIF* are handled for any socket family; AF_UNIX works where
	 * IPv4 sockets are not allowed (seccomp, odd containers). */
	if (fd < 0)
		fd = sr_socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	return fd;
}

/* getifaddrs names IPv4 addresses by label, which is "eth0:1" for aliases. */
static bool same_dev(const char *ifa_name, const char *name)
{
	size_t n = strlen(name);

	return !strncmp(ifa_name, name, n) && (ifa_name[n] == 0 || ifa_name[n] == ':');
}

static void add_addr(struct sr_netdev_info *info, int family, const struct in6_addr *a)
{
	if (info->naddr >= SR_MAX_ADDRS)
		return;
	info->addr[info->naddr].family = family;
	info->addr[info->naddr].addr = *a;
	info->naddr++;
}

/* pass 0: IPv4, 1: IPv6 other than link-local, 2: IPv6 link-local.  A GID
 * table lists routable addresses before link-local ones. */
static void collect_addrs(struct ifaddrs *list, const char *name, struct sr_netdev_info *info, int pass)
{
	for (struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
		struct in6_addr a;

		if (!ifa->ifa_addr || !ifa->ifa_name || !same_dev(ifa->ifa_name, name))
			continue;
		if (pass == 0 && ifa->ifa_addr->sa_family == AF_INET) {
			const struct sockaddr_in *sin = (const void *)ifa->ifa_addr;

			memset(&a, 0, sizeof(a));
			a.s6_addr[10] = 0xff;
			a.s6_addr[11] = 0xff;
			memcpy(&a.s6_addr[12], &sin->sin_addr, 4);
			add_addr(info, AF_INET, &a);
		} else if (pass > 0 && ifa->ifa_addr->sa_family == AF_INET6) {
			const struct sockaddr_in6 *sin6 = (const void *)ifa->ifa_addr;
			bool ll = IN6_IS_ADDR_LINKLOCAL(&sin6->sin6_addr);

			if (ll == (pass == 2))
				add_addr(info, AF_INET6, &sin6->sin6_addr);
		}
	}
}

int sr_netdev_query(const char *name, struct sr_netdev_info *info)
{
	struct ifreq ifr;
	struct ifaddrs *list;
	int fd, rc = 0;

	memset(info, 0, sizeof(*info));
	if (!name || !name[0] || strlen(name) >= IFNAMSIZ || strchr(name, ':') || strchr(name, '/'))
		return -ENODEV;
	fd = ioctl_sock();
	if (fd < 0)
		return -ENODEV;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, SIOCGIFINDEX, &ifr) < 0) {
		rc = -ENODEV;
		goto out;
	}
	info->ifindex = ifr.ifr_ifindex;
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
		rc = -ENODEV;
		goto out;
	}
	info->flags = (unsigned short)ifr.ifr_flags;
	if (ioctl(fd, SIOCGIFMTU, &ifr) < 0) {
		rc = -ENODEV;
		goto out;
	}
	info->mtu = ifr.ifr_mtu;
	/* Devices without a link-layer address (tun, ipip) fail or return
	 * zeros here; both leave the MAC zero. */
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) == 0)
		memcpy(info->mac, ifr.ifr_hwaddr.sa_data, sizeof(info->mac));
	snprintf(info->name, sizeof(info->name), "%s", name);

	if (getifaddrs(&list) == 0) {
		for (int pass = 0; pass < 3; pass++)
			collect_addrs(list, name, info, pass);
		freeifaddrs(list);
	}
out:
	close(fd);
	return rc;
}

int sr_netdev_query_dev(const struct sr_conf_device *dev, struct sr_netdev_info *info)
{
	struct sr_netdev_info lo;
	int rc = sr_netdev_query(dev->netdev, info);

	if (rc || !dev->lo_addrs || sr_netdev_query("lo", &lo))
		return rc;
	for (int i = 0; i < lo.naddr && info->naddr < SR_MAX_ADDRS; i++)
		info->addr[info->naddr++] = lo.addr[i];
	return 0;
}

void sr_netdev_default(char *name, size_t len)
{
	struct ifaddrs *list;

	if (!len)
		return;
	if (getifaddrs(&list) == 0) {
		for (struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
			size_t n;

			if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET || !ifa->ifa_name)
				continue;
			if (!(ifa->ifa_flags & IFF_UP) || (ifa->ifa_flags & IFF_LOOPBACK))
				continue;
			n = strcspn(ifa->ifa_name, ":");
			if (n == 0 || n >= IFNAMSIZ || n >= len)
				continue;
			memcpy(name, ifa->ifa_name, n);
			name[n] = 0;
			freeifaddrs(list);
			return;
		}
		freeifaddrs(list);
	}
	snprintf(name, len, "lo");
}
