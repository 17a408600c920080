/* softrdma configuration file and network-device discovery.
 *
 * Shared by libibverbs (device list), softrdma-cfg and the daemon. */
#ifndef SR_COMMON_CONF_H
#define SR_COMMON_CONF_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>

#include "common/fault_spec.h"

#define SR_MAX_DEVICES 16
#define SR_DEVNAME_MAX 64

enum sr_dev_type {
	SR_DEV_ROCE = 0,  /* Soft-RoCE: RoCEv2 over UDP (like rxe) */
	SR_DEV_IWARP = 1, /* Soft-iWARP: iWARP over TCP (like siw) */
};

struct sr_conf_device {
	char name[SR_DEVNAME_MAX]; /* e.g. "rxe0", "siw0" */
	char netdev[IFNAMSIZ];	   /* e.g. "eth0", "lo" */
	enum sr_dev_type type;
	int mtu;			/* IB MTU in bytes (256..4096) cap, 0 = follow netdev */
	int loopback;			/* "loopback =" in the file: 1 on, 0 off, -1 not given */
	bool lo_addrs;			/* in force: the GID table also holds the loopback
	                              * addresses (127.0.0.1, ::1); see sr_conf_finish */
	char faults[SR_FAULT_SPEC_MAX]; /* "faults =": fault injection for this device
	                              * (canonical text, "" = not given: the global one) */
};

struct sr_conf {
	bool crc;			/* ICRC / MPA CRC on (default true) */
	char faults[SR_FAULT_SPEC_MAX]; /* global "faults =" (common/fault_spec.h), "" = none */
	int ndev;
	struct sr_conf_device dev[SR_MAX_DEVICES];
	bool is_default;     /* no configuration file existed: built-in default */
	char path[PATH_MAX]; /* file this was read from / will be saved to */
};

/* Path of the configuration file in force: $SOFTRDMA_CONF, else
 * $XDG_CONFIG_HOME/softrdma/softrdma.conf (~/.config/...) if it exists, else
 * /etc/softrdma.conf if it exists, else the per-user path (for saving). */
const char *sr_conf_path(char *buf, size_t len);

/* Load the configuration.  No file: built-in default (one RoCE device "rxe0"
 * on the first UP non-loopback interface with an IPv4 address, else on "lo"),
 * is_default set.  Returns 0 or -errno (syntax error: -EINVAL and a message
 * on stderr naming file and line). */
int sr_conf_load(struct sr_conf *conf);

/* Parse the configuration text in f (conf->path names it in messages):
 * what sr_conf_load does once the file is open.  0 or -EINVAL; on error
 * conf holds no device (only its path). */
int sr_conf_parse(struct sr_conf *conf, FILE *f);

/* Write atomically (temp file + rename), creating parent directories. */
int sr_conf_save(const struct sr_conf *conf);
/* The file's text, as sr_conf_save writes it; -EINVAL for a configuration
 * that sr_conf_parse would not accept. */
int sr_conf_write(const struct sr_conf *conf, FILE *f);

/* IB MTU enum value (1=256 .. 5=4096) for a byte count, 0 if not one of them. */
int sr_mtu_bytes_to_enum(int bytes);
int sr_mtu_enum_to_bytes(int mtu_enum);

#define SR_MAX_ADDRS 16
struct sr_netdev_info {
	char name[IFNAMSIZ];
	int ifindex;
	unsigned int flags; /* IFF_* */
	int mtu;	    /* netdev MTU in bytes */
	uint8_t mac[6];
	int naddr;
	struct {
		int family;	      /* AF_INET or AF_INET6 */
		struct in6_addr addr; /* IPv4 stored as IPv4-mapped ::ffff:a.b.c.d */
	} addr[SR_MAX_ADDRS];	      /* IPv4 first (in kernel order), then IPv6 */
};

/* Query a network interface by name. Returns 0 or -ENODEV. */
int sr_netdev_query(const char *name, struct sr_netdev_info *info);

/* A device's interface and its GID addresses: the interface's own, then,
 * if the device answers on loopback (lo_addrs), lo's (127.0.0.1, ::1). */
int sr_netdev_query_dev(const struct sr_conf_device *dev, struct sr_netdev_info *info);

/* Name of the first UP, non-loopback interface with an IPv4 address, else "lo". */
void sr_netdev_default(char *name, size_t len);

/* Additions (softrdma-cfg, daemon and libibverbs share these). */

/* Bytes an IB MTU's worth of payload needs on top of itself in the netdev
 * MTU, for the largest header that travels with a full payload (RDMA WRITE
 * ONLY with immediate: BTH 12 + RETH 16 + ImmDt 4) over IPv6 (40, the
 * worst case: a port's MTU serves both families) + UDP 8 + ICRC 4. */
#define SR_ROCE_IPV4_OVERHEAD 84

/* Active IB MTU in bytes for a device: the largest of 256..4096 that fits
 * in netdev_mtu - SR_ROCE_IPV4_OVERHEAD (lo 65536 -> 4096, 1500 -> 1024,
 * never below 256), lowered to cap_bytes when that is non-zero. */
int sr_mtu_active(int netdev_mtu, int cap_bytes);

/* "roce" / "iwarp"; sr_dev_type_parse returns 0 or -EINVAL. */
const char *sr_dev_type_name(enum sr_dev_type type);
int sr_dev_type_parse(const char *s, enum sr_dev_type *type);

/* Device by name, or NULL. */
struct sr_conf_device *sr_conf_find(struct sr_conf *conf, const char *name);

/* Decides which devices answer on the loopback addresses (lo_addrs):
 * those with "loopback = on", and, when no device of the configuration
 * sits on lo, the first device of each type whose loopback is not "off".
 * So 127.0.0.1 and ::1 reach a device on any machine, as clients and
 * servers sharing a host (CI runners, laptops) expect.  sr_conf_load and
 * sr_conf_default call it. */
void sr_conf_finish(struct sr_conf *conf);

/* Fill conf with the built-in default (what sr_conf_load returns when no
 * file exists), path left as sr_conf_path() gives it. */
void sr_conf_default(struct sr_conf *conf);

/* Device names are 1..SR_DEVNAME_MAX-1 of [A-Za-z0-9_.-]. */
bool sr_conf_valid_name(const char *name);

#endif
