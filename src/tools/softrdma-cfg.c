/* softrdma-cfg: configure softrdma devices, in the manner of rxe_cfg and
 * `rdma link`, and start/stop/query the per-host daemon.
 *
 * Exit status: 0 success, 1 runtime error (message on stderr), 2 bad
 * arguments (usage on stderr). */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/ipc_client.h"
#include "tools/cfg.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: softrdma-cfg [-j] [COMMAND]\n"
		"\n"
		"Configure softrdma's soft RDMA devices (like rxe_cfg / `rdma link`) and\n"
		"manage the per-host daemon softrdmad.\n"
		"\n"
		"Commands:\n"
		"  status                     configuration, devices, GIDs, daemon (default)\n"
		"  add NETDEV [--type roce|iwarp] [--name NAME]\n"
		"                             add a device bound to network interface NETDEV\n"
		"                             (default name rxeN for roce, siwN for iwarp)\n"
		"  remove NAME|NETDEV         remove a device, or every device on NETDEV\n"
		"  mtu [NAME] 256|512|1024|2048|4096\n"
		"                             cap the active MTU of NAME (default: all devices)\n"
		"  crc enable|disable         ICRC / MPA CRC on or off\n"
		"  faults [[NAME] SPEC|off]   fault injection in every process using the\n"
		"                             configuration (of device NAME, default all), e.g.\n"
		"                             drop=5%%,dup=1%%,reorder=2%%,corrupt=0.5%%,seed=42\n"
		"                             (SOFTRDMA_FAULTS overrides it per process)\n"
		"  faults --check SPEC        print SPEC's canonical form, or why it is wrong\n"
		"  start [--idle-exit SECS]   start the daemon (default: runs until stopped)\n"
		"  stop                       stop the daemon\n"
		"  system enable [--force]    every program uses softrdma, no softrdma-run needed\n"
		"                             (an ld.so.conf.d entry; root; refused while the\n"
		"                             kernel has RDMA devices, unless --force)\n"
		"  system disable             undo system enable\n"
		"  system [status]            whether system-wide mode is on\n"
		"  help, --help               this text\n"
		"\n"
		"rdma tool style (as in rxe and siw guides; -j prints JSON):\n"
		"  link add NAME type rxe|siw netdev NETDEV\n"
		"                             add a Soft-RoCE (rxe) or Soft-iWARP (siw) device\n"
		"  link delete NAME           remove a device\n"
		"  link [show [NAME[/1]]]     devices, port state, netdev\n"
		"  statistic [show [link NAME[/1]]]\n"
		"                             per-device counters of this network namespace\n"
		"  statistic qp show [link NAME[/1]] [pid PID] [lqpn QPN]\n"
		"                             per-QP counters of the live QPs\n"
		"\n"
		"Counters: sent_pkts rcvd_pkts sent_bytes rcvd_bytes retransmits\n"
		"out_of_seq_request rcvd_seq_err send_rnr_err rcvd_rnr_err crc_err, and\n"
		"fault_drop fault_dup fault_reorder fault_corrupt fault_reset fault_truncate\n"
		"(injected), kept by each process in $SOFTRDMA_RUNTIME_DIR (default\n"
		"/dev/shm/softrdma-UID).\n"
		"\n"
		"Configuration file: $SOFTRDMA_CONF, else $XDG_CONFIG_HOME/softrdma/softrdma.conf\n"
		"(~/.config/softrdma/softrdma.conf), else /etc/softrdma.conf.  Without one, a\n"
		"built-in default is used: rxe0 on the first interface that is up and has an\n"
		"IPv4 address (else lo).  The first change writes the per-user file.\n"
		"Daemon socket: $SOFTRDMA_DAEMON_SOCK (abstract, default %s).\n",
		SR_IPC_SOCK_NAME);
}

int bad_args(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "softrdma-cfg: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'softrdma-cfg --help'.\n");
	return EXIT_USAGE;
}

int fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "softrdma-cfg: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

int load(struct sr_conf *conf)
{
	int rc = sr_conf_load(conf);

	if (rc)
		return fail("cannot load the configuration (%s)", strerror(-rc));
	return 0;
}

int save(struct sr_conf *conf)
{
	int rc;

	conf->is_default = false;
	rc = sr_conf_save(conf);
	if (rc)
		return fail("cannot write %s: %s", conf->path, strerror(-rc));
	return 0;
}

/* ---- status ---- */

static void print_state(const struct sr_netdev_info *ni)
{
	if (!(ni->flags & IFF_UP))
		printf("down");
	else if (!(ni->flags & IFF_RUNNING))
		printf("up, no carrier");
	else
		printf("up");
}

static void print_device(const struct sr_conf_device *dev)
{
	struct sr_netdev_info ni;

	printf("  %s: type %s, netdev %s", dev->name, sr_dev_type_name(dev->type), dev->netdev);
	if (sr_netdev_query_dev(dev, &ni)) {
		printf(" (not present)\n");
		if (dev->mtu)
			printf("    mtu cap %d\n", dev->mtu);
		if (dev->faults[0])
			printf("    faults %s\n", dev->faults);
		return;
	}
	printf(" (");
	print_state(&ni);
	printf(", mtu %d)\n", ni.mtu);
	printf("    active mtu %d", sr_mtu_active(ni.mtu, dev->mtu));
	if (dev->mtu)
		printf(" (cap %d)", dev->mtu);
	printf("\n");
	if (dev->faults[0])
		printf("    faults %s\n", dev->faults);
	if (!ni.naddr)
		printf("    no GIDs (no IP address on %s)\n", dev->netdev);
	for (int i = 0; i < ni.naddr; i++) {
		char txt[INET6_ADDRSTRLEN];

		inet_ntop(AF_INET6, &ni.addr[i].addr, txt, sizeof(txt));
		printf("    gid %s\n", txt);
	}
}

static void print_daemon(void)
{
	static char text[SR_IPC_MAX_MSG + 1];
	struct sr_daemon_conn *c;
	uint32_t tlen = 0;
	int64_t val;
	int err;

	c = sr_daemon_open_flags(NULL, NULL, SR_DAEMON_NO_START | SR_DAEMON_QUIET, &err);
	if (!c) {
		struct ucred cr;

		if (err == -ECONNREFUSED)
			printf("Daemon: not running\n");
		else if (err == -EPERM && sr_daemon_probe(&cr) == -EPERM)
			printf("Daemon: running (pid %ld) as uid %ld, not trusted: softrdma uses a daemon run by root "
			       "or by the user itself\n",
			       (long)cr.pid, (long)cr.uid);
		else
			printf("Daemon: cannot connect (%s)\n", strerror(-err));
		return;
	}
	val = sr_daemon_call_ex(c, SR_IPC_STATUS, NULL, 0, text, sizeof(text) - 1, &tlen);
	if (val < 0) {
		printf("Daemon: running (pid %ld), status failed: %s\n", (long)sr_daemon_pid(c), strerror((int)-val));
	} else {
		char *line, *save = NULL;

		text[tlen] = 0;
		printf("Daemon: running (pid %ld)\n", (long)sr_daemon_pid(c));
		for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			printf("  %s\n", line);
	}
	sr_daemon_close(c);
}

static void print_faults(const struct sr_conf *conf)
{
	const char *env = getenv("SOFTRDMA_FAULTS");

	printf("Faults: %s", conf->faults[0] ? conf->faults : "off");
	if (env)
		printf(" (overridden here by SOFTRDMA_FAULTS='%s')", env);
	printf("\n");
}

static int cmd_status(int argc, char **argv)
{
	struct sr_conf conf;

	if (argc > 1)
		return bad_args("status takes no arguments");
	if (load(&conf))
		return 1;
	if (conf.is_default)
		printf("Configuration: built-in default (no file; changes go to %s)\n", conf.path);
	else
		printf("Configuration: %s\n", conf.path);
	printf("CRC: %s\n", conf.crc ? "enabled" : "disabled");
	print_faults(&conf);
	printf("Devices: %d\n", conf.ndev);
	for (int i = 0; i < conf.ndev; i++)
		print_device(&conf.dev[i]);
	print_daemon();
	return 0;
}

/* ---- changes ---- */

static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);

	if (!strncmp(argv[*i], name, n) && argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (!strcmp(argv[*i], name)) {
		if (*i + 1 >= argc)
			return NULL;
		return argv[++*i];
	}
	return NULL;
}

int cmd_add(int argc, char **argv)
{
	struct sr_conf conf;
	struct sr_netdev_info ni;
	struct sr_conf_device *dev;
	const char *netdev = NULL, *name = NULL, *type_s = NULL;
	enum sr_dev_type type = SR_DEV_ROCE;
	char autoname[SR_DEVNAME_MAX];

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strncmp(a, "--type", 6) && (a[6] == 0 || a[6] == '=')) {
			if (!(type_s = opt_value(argc, argv, &i, "--type")))
				return bad_args("--type needs a value (roce or iwarp)");
		} else if (!strncmp(a, "--name", 6) && (a[6] == 0 || a[6] == '=')) {
			if (!(name = opt_value(argc, argv, &i, "--name")))
				return bad_args("--name needs a value");
		} else if (a[0] == '-' && a[1]) {
			return bad_args("add: unknown option '%s'", a);
		} else if (!netdev) {
			netdev = a;
		} else {
			return bad_args("add: unexpected argument '%s'", a);
		}
	}
	if (!netdev)
		return bad_args("add: missing NETDEV");
	if (strlen(netdev) >= IFNAMSIZ)
		return bad_args("add: '%s' is not a network interface name", netdev);
	if (type_s && sr_dev_type_parse(type_s, &type))
		return bad_args("add: bad type '%s' (roce or iwarp)", type_s);
	if (name && !sr_conf_valid_name(name))
		return bad_args("add: bad device name '%s' (1-%d characters of A-Z a-z 0-9 _ . -)", name,
				SR_DEVNAME_MAX - 1);

	if (load(&conf))
		return 1;
	if (sr_netdev_query(netdev, &ni))
		return fail("network interface '%s' does not exist", netdev);
	/* Adding to the built-in default starts an explicit configuration:
	 * the default was only a stand-in for "nothing configured". */
	if (conf.is_default)
		conf.ndev = 0;
	if (name && sr_conf_find(&conf, name))
		return fail("a device named '%s' already exists", name);
	for (int i = 0; i < conf.ndev; i++)
		if (conf.dev[i].type == type && !strcmp(conf.dev[i].netdev, netdev))
			return fail("%s (%s) is already configured on %s", conf.dev[i].name, sr_dev_type_name(type),
				    netdev);
	if (conf.ndev >= SR_MAX_DEVICES)
		return fail("too many devices (at most %d)", SR_MAX_DEVICES);
	if (!name) {
		const char *prefix = type == SR_DEV_IWARP ? "siw" : "rxe";

		for (int n = 0;; n++) {
			snprintf(autoname, sizeof(autoname), "%s%d", prefix, n);
			if (!sr_conf_find(&conf, autoname))
				break;
		}
		name = autoname;
	}
	dev = &conf.dev[conf.ndev++];
	memset(dev, 0, sizeof(*dev));
	snprintf(dev->name, sizeof(dev->name), "%s", name);
	snprintf(dev->netdev, sizeof(dev->netdev), "%s", netdev);
	dev->type = type;
	dev->loopback = -1;
	sr_conf_finish(&conf);
	if (save(&conf))
		return 1;
	printf("added %s (%s on %s) to %s\n", dev->name, sr_dev_type_name(type), netdev, conf.path);
	return 0;
}

int cmd_remove(int argc, char **argv)
{
	struct sr_conf conf;
	struct sr_conf_device *dev;
	int removed = 0;

	if (argc != 2)
		return bad_args("usage: remove NAME|NETDEV");
	if (load(&conf))
		return 1;
	dev = sr_conf_find(&conf, argv[1]);
	for (int i = 0; i < conf.ndev;) {
		struct sr_conf_device *d = &conf.dev[i];

		if (dev ? d == dev : !strcmp(d->netdev, argv[1])) {
			printf("removed %s (%s on %s)\n", d->name, sr_dev_type_name(d->type), d->netdev);
			memmove(d, d + 1, (size_t)(conf.ndev - i - 1) * sizeof(*d));
			conf.ndev--;
			removed++;
			if (dev)
				break;
		} else {
			i++;
		}
	}
	if (!removed)
		return fail("no device or network interface named '%s' is configured", argv[1]);
	return save(&conf);
}

static int cmd_mtu(int argc, char **argv)
{
	struct sr_conf conf;
	struct sr_conf_device *dev = NULL;
	const char *name = NULL, *val;
	char *end;
	long v;

	if (argc == 2) {
		val = argv[1];
	} else if (argc == 3) {
		name = argv[1];
		val = argv[2];
	} else {
		return bad_args("usage: mtu [NAME] 256|512|1024|2048|4096");
	}
	errno = 0;
	v = strtol(val, &end, 10);
	if (errno || end == val || *end || v > 4096 || !sr_mtu_bytes_to_enum((int)v))
		return bad_args("mtu: bad value '%s' (256, 512, 1024, 2048 or 4096)", val);
	if (load(&conf))
		return 1;
	if (name) {
		dev = sr_conf_find(&conf, name);
		if (!dev)
			return fail("no device named '%s'", name);
		dev->mtu = (int)v;
	} else {
		if (!conf.ndev)
			return fail("no devices configured");
		for (int i = 0; i < conf.ndev; i++)
			conf.dev[i].mtu = (int)v;
	}
	if (save(&conf))
		return 1;
	printf("mtu cap %ld set on %s\n", v, name ? name : "all devices");
	return 0;
}

static int cmd_crc(int argc, char **argv)
{
	struct sr_conf conf;
	bool on;

	if (argc != 2)
		return bad_args("usage: crc enable|disable");
	if (!strcmp(argv[1], "enable") || !strcmp(argv[1], "on"))
		on = true;
	else if (!strcmp(argv[1], "disable") || !strcmp(argv[1], "off"))
		on = false;
	else
		return bad_args("crc: expected enable or disable, not '%s'", argv[1]);
	if (load(&conf))
		return 1;
	conf.crc = on;
	if (save(&conf))
		return 1;
	printf("crc %s\n", on ? "enabled" : "disabled");
	return 0;
}

/* faults [[NAME] SPEC|off]: the fault injection plan of the configuration
 * (core/fault.h); "off" alone clears it everywhere. */
static int cmd_faults(int argc, char **argv)
{
	struct sr_conf conf;
	struct sr_conf_device *dev = NULL;
	struct sr_fault_spec spec;
	const char *text;
	char err[256], canon[SR_FAULT_SPEC_MAX];

	if (argc == 3 && !strcmp(argv[1], "--check")) {
		/* softrdma-run --faults asks before it runs anything */
		if (sr_fault_spec_parse(argv[2], &spec, err, sizeof(err))) {
			fprintf(stderr, "%s\n", err);
			return EXIT_USAGE;
		}
		sr_fault_spec_format(&spec, canon, sizeof(canon));
		printf("%s\n", canon);
		return 0;
	}
	if (argc > 3)
		return bad_args("usage: faults [[NAME] SPEC|off]");
	if (load(&conf))
		return 1;
	if (argc == 1) {
		print_faults(&conf);
		for (int i = 0; i < conf.ndev; i++)
			if (conf.dev[i].faults[0])
				printf("  %s: %s\n", conf.dev[i].name, conf.dev[i].faults);
		return 0;
	}
	text = argv[argc - 1];
	if (sr_fault_spec_parse(text, &spec, err, sizeof(err)))
		return bad_args("faults: '%s': %s", text, err);
	sr_fault_spec_format(&spec, canon, sizeof(canon));
	if (argc == 3) {
		dev = sr_conf_find(&conf, argv[1]);
		if (!dev)
			return fail("no device named '%s'", argv[1]);
		snprintf(dev->faults, sizeof(dev->faults), "%s", canon);
	} else if (spec.any) {
		snprintf(conf.faults, sizeof(conf.faults), "%s", canon);
	} else {
		conf.faults[0] = 0;
		for (int i = 0; i < conf.ndev; i++)
			conf.dev[i].faults[0] = 0;
	}
	if (save(&conf))
		return 1;
	printf("faults %s on %s\n", canon, dev ? dev->name : "all devices");
	return 0;
}

/* ---- daemon ---- */

static int cmd_start(int argc, char **argv)
{
	const char *idle = "0";
	const char *extra[3];
	struct sr_daemon_conn *c;
	int err, rc;

	for (int i = 1; i < argc; i++) {
		const char *v;

		if (!strncmp(argv[i], "--idle-exit", 11) && (argv[i][11] == 0 || argv[i][11] == '=')) {
			char *end;
			long n;

			if (!(v = opt_value(argc, argv, &i, "--idle-exit")))
				return bad_args("--idle-exit needs a value (seconds)");
			errno = 0;
			n = strtol(v, &end, 10);
			if (errno || end == v || *end || n < 0 || n > 1000000)
				return bad_args("bad --idle-exit '%s' (seconds, 0 = never)", v);
			idle = v;
		} else {
			return bad_args("start: unexpected argument '%s'", argv[i]);
		}
	}
	c = sr_daemon_open_flags(NULL, NULL, SR_DAEMON_NO_START | SR_DAEMON_QUIET, &err);
	if (c) {
		printf("softrdmad already running (pid %ld)\n", (long)sr_daemon_pid(c));
		sr_daemon_close(c);
		return 0;
	}
	extra[0] = "--idle-exit";
	extra[1] = idle;
	extra[2] = NULL;
	rc = sr_daemon_spawn(extra);
	if (rc)
		return fail("could not start softrdmad");
	c = sr_daemon_open_flags(NULL, NULL, SR_DAEMON_NO_START, &err);
	if (!c)
		return fail("softrdmad started but does not answer");
	printf("softrdmad running (pid %ld)\n", (long)sr_daemon_pid(c));
	sr_daemon_close(c);
	return 0;
}

/* A zombie still answers kill(pid, 0): it is gone for our purposes. */
static bool process_gone(pid_t pid)
{
	char path[64], buf[512];
	FILE *f;
	size_t n;
	char *paren;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	f = fopen(path, "re");
	if (!f)
		return true;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	paren = strrchr(buf, ')');
	return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

static int cmd_stop(int argc, char **argv)
{
	struct sr_daemon_conn *c;
	pid_t pid;
	int err;

	if (argc > 1)
		return bad_args("stop takes no arguments");
	c = sr_daemon_open_flags(NULL, NULL, SR_DAEMON_NO_START | SR_DAEMON_QUIET, &err);
	if (!c) {
		if (err == -ECONNREFUSED) {
			printf("softrdmad is not running\n");
			return 0;
		}
		return fail("cannot reach softrdmad: %s", strerror(-err));
	}
	pid = sr_daemon_pid(c);
	sr_daemon_close(c);
	if (pid <= 0)
		return fail("softrdmad reported no pid");
	if (kill(pid, SIGTERM) < 0 && errno != ESRCH)
		return fail("cannot signal softrdmad (pid %ld): %s", (long)pid, strerror(errno));
	for (int i = 0; i < 500; i++) {
		struct timespec ts = { 0, 10 * 1000000 };

		if (process_gone(pid)) {
			/* Another daemon may have started meanwhile; that is fine. */
			printf("softrdmad (pid %ld) stopped\n", (long)pid);
			return 0;
		}
		nanosleep(&ts, NULL);
	}
	return fail("softrdmad (pid %ld) did not exit within 5 s", (long)pid);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "status", cmd_status },  { "add", cmd_add },
		{ "remove", cmd_remove },  { "mtu", cmd_mtu },
		{ "crc", cmd_crc },	   { "faults", cmd_faults },
		{ "start", cmd_start },	   { "stop", cmd_stop },
		{ "link", cmd_link },	   { "statistic", cmd_statistic },
		{ "stat", cmd_statistic }, { "system", cmd_system },
	};

	/* rdma's global option for JSON output */
	if (argc >= 2 && (!strcmp(argv[1], "-j") || !strcmp(argv[1], "--json"))) {
		cfg_json = true;
		argv[1] = argv[0];
		argc--;
		argv++;
	}

	if (argc < 2)
		return cmd_status(1, argv);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "softrdma-cfg: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
