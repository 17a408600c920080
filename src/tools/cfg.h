/* softrdma-cfg's pieces: the rxe_cfg-style commands (softrdma-cfg.c) and
 * the `rdma` tool style ones (cfg_rdma.c: link, statistic), the
 * system-wide mode (cfg_system.c). */
#ifndef SR_TOOLS_CFG_H
#define SR_TOOLS_CFG_H

#include <stdbool.h>

#include "common/conf.h"

#define EXIT_USAGE 2

/* "softrdma-cfg: message" on stderr; bad_args adds the --help hint and
 * returns EXIT_USAGE, fail returns 1. */
int bad_args(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Configuration load/save with the message on failure: 0 or 1. */
int load(struct sr_conf *conf);
int save(struct sr_conf *conf);

int cmd_add(int argc, char **argv);
int cmd_remove(int argc, char **argv);

/* cfg_rdma.c; json: -j was given */
extern bool cfg_json;
int cmd_link(int argc, char **argv);
int cmd_statistic(int argc, char **argv);
/* cfg_system.c */
int cmd_system(int argc, char **argv);

#endif
