/* rsockets' per-host defaults, read once per process from rdma-core's
 * configuration files (rsocket(7)): one decimal number a file in
 * /etc/rdma/rsocket, or in $SOFTRDMA_RSOCKET_CONF_DIR if set.  A missing
 * file, or one that does not start with a number in range, leaves
 * rdma-core's default:
 *
 *   polling_time      us an rsocket call spins before it sleeps (10)
 *   wake_up_interval  ms a sleep lasts at most before looking again
 *                     (500; at least 1: the wait is a safety net here)
 *   inline_default    bytes sent inline (64)
 *   sqsize_default    send queue entries (384), at most 65534
 *   rqsize_default    receive queue entries (384), at most 65534
 *   mem_default       receive buffer bytes (131072), 4096 to 1 GiB
 *   wmem_default      send buffer bytes (131072), 4096 to 1 GiB
 *   iomap_size        riomap entries offered to the peer (0), rounded as
 *                     RDMA_IOMAPSIZE rounds
 *
 * A socket's own setsockopt still overrides the last six. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "rsocket/rsocket.h"

#define RS_CONF_DIR "/etc/rdma/rsocket"

static struct rs_config conf = {
	.polling_time_us = 10,
	.wake_up_interval_ms = 500,
	.inline_default = RS_DEF_INLINE,
	.sqsize_default = RS_DEF_SQSIZE,
	.rqsize_default = RS_DEF_RQSIZE,
	.mem_default = RS_DEF_MEM,
	.wmem_default = RS_DEF_WMEM,
	.iomap_size = 0,
};
static pthread_once_t conf_once = PTHREAD_ONCE_INIT;

/* The number at the start of dir/name if it is within [lo, hi]. */
static bool conf_read(const char *dir, const char *name, unsigned long lo, unsigned long hi, unsigned long *out)
{
	char path[PATH_MAX], buf[32], *end;
	unsigned long v;
	FILE *f;
	size_t n;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return false;
	f = fopen(path, "re");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	errno = 0;
	v = strtoul(buf, &end, 10);
	if (end == buf || errno || buf[0] == '-' || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

static void conf_load(void)
{
	const char *dir = getenv("SOFTRDMA_RSOCKET_CONF_DIR");
	unsigned long v;

	if (!dir || !*dir)
		dir = RS_CONF_DIR;
	if (conf_read(dir, "polling_time", 0, UINT32_MAX, &v))
		conf.polling_time_us = (uint32_t)v;
	if (conf_read(dir, "wake_up_interval", 1, INT_MAX, &v))
		conf.wake_up_interval_ms = (int)v;
	if (conf_read(dir, "inline_default", 0, RS_QP_MAX_SIZE, &v))
		conf.inline_default = (uint16_t)v;
	if (conf_read(dir, "sqsize_default", 0, RS_QP_MAX_SIZE, &v))
		conf.sqsize_default = (uint16_t)v;
	if (conf_read(dir, "rqsize_default", 0, RS_QP_MAX_SIZE, &v))
		conf.rqsize_default = (uint16_t)v;
	if (conf_read(dir, "mem_default", 2 * RS_SNDLOWAT, 1u << 30, &v))
		conf.mem_default = (uint32_t)v;
	if (conf_read(dir, "wmem_default", 2 * RS_SNDLOWAT, 1u << 30, &v))
		conf.wmem_default = (uint32_t)v;
	if (conf_read(dir, "iomap_size", 0, 0x7fff, &v))
		conf.iomap_size = rs_round_iomap_size((int)v);
}

const struct rs_config *rs_config(void)
{
	pthread_once(&conf_once, conf_load);
	return &conf;
}
