/* softrdma-cfg's `rdma` tool style commands, so that the commands of rxe
 * and siw guides work as written:
 *
 *   link add NAME type rxe|siw netdev IFNAME    (rdma link add)
 *   link delete NAME                            (rdma link delete)
 *   link [show [NAME[/PORT]]]                   (rdma link show)
 *   statistic [show [link NAME[/PORT]]]         (rdma statistic show)
 *   statistic qp show [link NAME[/PORT]] [pid PID] [lqpn QPN]
 *
 * Output lines are rdma's ("link rxe0/1 state ACTIVE ..."); -j prints JSON
 * as `rdma -j` does.  Counters come from the per-process counter files
 * (common/stats.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stats.h"
#include "tools/cfg.h"

bool cfg_json;

/* "NAME" or "NAME/PORT" (port 1, the only one); 0 or the usage status. */
static int parse_dev_port(const char *arg, char *name, size_t len)
{
	const char *slash = strchr(arg, '/');
	size_t n = slash ? (size_t)(slash - arg) : strlen(arg);

	if (!n || n >= len)
		return bad_args("bad device '%s'", arg);
	if (slash && strcmp(slash + 1, "1"))
		return bad_args("'%s': softrdma devices have one port, 1", arg);
	memcpy(name, arg, n);
	name[n] = 0;
	return 0;
}

static const char *qp_type_name(int t)
{
	switch (t) {
	case 2:
		return "RC"; /* IBV_QPT_RC */
	case 3:
		return "UC";
	case 4:
		return "UD";
	default:
		return "?";
	}
}

/* ---- link ---- */

static int link_add(int argc, char **argv)
{
	const char *name, *type = NULL, *netdev = NULL;
	char *args[7];

	if (argc < 2)
		return bad_args("usage: link add NAME type rxe|siw netdev IFNAME");
	name = argv[1];
	for (int i = 2; i < argc; i += 2) {
		if (i + 1 >= argc)
			return bad_args("link add: '%s' needs a value", argv[i]);
		if (!strcmp(argv[i], "type"))
			type = argv[i + 1];
		else if (!strcmp(argv[i], "netdev"))
			netdev = argv[i + 1];
		else
			return bad_args("link add: unknown parameter '%s' (type, netdev)", argv[i]);
	}
	if (!type || !netdev)
		return bad_args("usage: link add NAME type rxe|siw netdev IFNAME");
	/* rdma's type names, and softrdma's own */
	if (!strcmp(type, "rxe") || !strcmp(type, "roce"))
		type = "roce";
	else if (!strcmp(type, "siw") || !strcmp(type, "iwarp"))
		type = "iwarp";
	else
		return bad_args("link add: unknown type '%s' (rxe or siw)", type);
	args[0] = "add";
	args[1] = (char *)netdev;
	args[2] = "--type";
	args[3] = (char *)type;
	args[4] = "--name";
	args[5] = (char *)name;
	args[6] = NULL;
	return cmd_add(6, args);
}

static int link_delete(int argc, char **argv)
{
	struct sr_conf conf;
	char name[SR_DEVNAME_MAX];
	char *args[3];
	int rc;

	if (argc != 2)
		return bad_args("usage: link delete NAME");
	if ((rc = parse_dev_port(argv[1], name, sizeof(name))))
		return rc;
	/* by device name only, as rdma: `remove` also takes an interface */
	if (load(&conf))
		return 1;
	if (!sr_conf_find(&conf, name))
		return fail("no device named '%s'", name);
	args[0] = "remove";
	args[1] = name;
	args[2] = NULL;
	return cmd_remove(2, args);
}

static int link_show(int argc, char **argv)
{
	struct sr_conf conf;
	char want[SR_DEVNAME_MAX] = "";
	int rc, shown = 0;

	if (argc > 2)
		return bad_args("usage: link show [NAME[/PORT]]");
	if (argc == 2 && (rc = parse_dev_port(argv[1], want, sizeof(want))))
		return rc;
	if (load(&conf))
		return 1;
	if (cfg_json)
		printf("[");
	for (int i = 0; i < conf.ndev; i++) {
		const struct sr_conf_device *d = &conf.dev[i];
		struct sr_netdev_info ni;
		bool present = !sr_netdev_query(d->netdev, &ni);
		bool up = present && (ni.flags & IFF_UP) && (ni.flags & IFF_RUNNING);
		const char *state = up ? "ACTIVE" : "DOWN";
		const char *phys = up ? "LINK_UP" : "DISABLED";

		if (want[0] && strcmp(want, d->name))
			continue;
		if (cfg_json)
			printf("%s{\"ifindex\":%d,\"ifname\":\"%s\",\"port\":1,\"state\":\"%s\",\"physical_state\":\"%s\","
			       "\"netdev\":\"%s\",\"netdev_index\":%d,\"type\":\"%s\"}",
			       shown ? "," : "", i, d->name, state, phys, d->netdev, present ? ni.ifindex : 0,
			       d->type == SR_DEV_IWARP ? "siw" : "rxe");
		else
			printf("link %s/1 state %s physical_state %s netdev %s\n", d->name, state, phys, d->netdev);
		shown++;
	}
	if (cfg_json)
		printf("]\n");
	if (want[0] && !shown)
		return fail("no device named '%s'", want);
	return 0;
}

int cmd_link(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "show") || !strcmp(argv[1], "list"))
		return link_show(argc < 2 ? 1 : argc - 1, argv + (argc < 2 ? 0 : 1));
	if (!strcmp(argv[1], "add"))
		return link_add(argc - 1, argv + 1);
	if (!strcmp(argv[1], "delete") || !strcmp(argv[1], "del"))
		return link_delete(argc - 1, argv + 1);
	return bad_args("link: unknown command '%s' (show, add, delete)", argv[1]);
}

/* ---- statistic ---- */

static void print_ctrs(const struct sr_stat_ctrs *c)
{
	for (int k = 0; k < SR_STAT_N; k++) {
		if (cfg_json)
			printf(",\"%s\":%llu", sr_stat_names[k], (unsigned long long)c->v[k]);
		else
			printf(" %s %llu", sr_stat_names[k], (unsigned long long)c->v[k]);
	}
}

static int stat_show(const char *want, struct sr_stats_snap *s)
{
	struct sr_conf conf;
	int shown = 0;

	if (load(&conf))
		return 1;
	if (cfg_json)
		printf("[");
	/* the configured devices, in order, then any other that counted */
	for (int pass = 0; pass < 2; pass++) {
		int n = pass ? s->ndev : conf.ndev;

		for (int i = 0; i < n; i++) {
			const char *name = pass ? s->dev[i].name : conf.dev[i].name;
			struct sr_stat_ctrs zero = { { 0 } };
			const struct sr_stat_ctrs *c = &zero;

			if (pass && sr_conf_find(&conf, name))
				continue;
			if (want[0] && strcmp(want, name))
				continue;
			for (int j = 0; j < s->ndev; j++)
				if (!strcmp(s->dev[j].name, name))
					c = &s->dev[j].c;
			if (cfg_json)
				printf("%s{\"ifname\":\"%s\",\"port\":1", shown ? "," : "", name);
			else
				printf("link %s/1", name);
			print_ctrs(c);
			printf(cfg_json ? "}" : "\n");
			shown++;
		}
	}
	if (cfg_json)
		printf("]\n");
	if (want[0] && !shown)
		return fail("no device named '%s'", want);
	return 0;
}

static int stat_qp_show(const char *want, long pid, long lqpn, struct sr_stats_snap *s)
{
	int shown = 0;

	if (cfg_json)
		printf("[");
	for (int i = 0; i < s->nqp; i++) {
		const struct sr_stats_snap_qp *q = &s->qp[i];

		if ((want[0] && strcmp(want, q->dev)) || (pid >= 0 && q->pid != pid) ||
		    (lqpn >= 0 && q->qpn != (uint32_t)lqpn))
			continue;
		if (cfg_json)
			printf("%s{\"ifname\":\"%s\",\"port\":1,\"lqpn\":%u,\"qp-type\":\"%s\",\"pid\":%ld,\"comm\":\"%s\"",
			       shown ? "," : "", q->dev, q->qpn, qp_type_name(q->qp_type), (long)q->pid, q->comm);
		else
			printf("link %s/1 lqpn %u qp-type %s pid %ld comm %s", q->dev, q->qpn, qp_type_name(q->qp_type),
			       (long)q->pid, q->comm);
		print_ctrs(&q->c);
		printf(cfg_json ? "}" : "\n");
		shown++;
	}
	if (cfg_json)
		printf("]\n");
	return 0;
}

static int parse_num(const char *what, const char *v, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(v, &end, 0);
	if (errno || end == v || *end || *out < 0)
		return bad_args("statistic: bad %s '%s'", what, v);
	return 0;
}

int cmd_statistic(int argc, char **argv)
{
	struct sr_stats_snap snap;
	char want[SR_DEVNAME_MAX] = "";
	bool qp = false;
	long pid = -1, lqpn = -1;
	int i = 1, rc;

	if (i < argc && !strcmp(argv[i], "qp")) {
		qp = true;
		i++;
	}
	if (i < argc && (!strcmp(argv[i], "show") || !strcmp(argv[i], "list")))
		i++;
	else if (qp && i < argc)
		return bad_args("statistic qp: unknown command '%s' (show)", argv[i]);
	for (; i < argc; i += 2) {
		if (i + 1 >= argc)
			return bad_args("statistic: '%s' needs a value", argv[i]);
		if (!strcmp(argv[i], "link")) {
			if ((rc = parse_dev_port(argv[i + 1], want, sizeof(want))))
				return rc;
		} else if (qp && !strcmp(argv[i], "pid")) {
			if ((rc = parse_num("pid", argv[i + 1], &pid)))
				return rc;
		} else if (qp && !strcmp(argv[i], "lqpn")) {
			if ((rc = parse_num("lqpn", argv[i + 1], &lqpn)))
				return rc;
		} else {
			return bad_args("statistic: unknown parameter '%s'", argv[i]);
		}
	}
	rc = sr_stats_snapshot(&snap);
	if (rc)
		return fail("cannot read the counters: %s", strerror(-rc));
	rc = qp ? stat_qp_show(want, pid, lqpn, &snap) : stat_show(want, &snap);
	sr_stats_snap_free(&snap);
	return rc;
}
