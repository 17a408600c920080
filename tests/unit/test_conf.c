/* Configuration file: parse/save round trip, strict errors with file:line,
 * path selection, built-in default, MTU mapping, netdev discovery. */
#include "common/conf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "ut.h"

static char dir[] = "/tmp/test_conf.XXXXXX";
static char path[PATH_MAX];

static void write_file(const char *p, const char *text)
{
	FILE *f = fopen(p, "w");

	if (!f) {
		perror(p);
		exit(1);
	}
	fputs(text, f);
	fclose(f);
}

/* Load with stderr captured into errbuf. */
static int load_capture(struct sr_conf *conf, char *errbuf, size_t len)
{
	char errpath[PATH_MAX];
	int saved, fd, rc;
	ssize_t n;

	snprintf(errpath, sizeof(errpath), "%s/stderr", dir);
	fflush(stderr);
	saved = dup(2);
	fd = open(errpath, O_RDWR | O_CREAT | O_TRUNC, 0600);
	dup2(fd, 2);
	rc = sr_conf_load(conf);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	lseek(fd, 0, SEEK_SET);
	n = read(fd, errbuf, len - 1);
	errbuf[n > 0 ? n : 0] = 0;
	close(fd);
	return rc;
}

static void test_mtu(void)
{
	static const int bytes[] = { 256, 512, 1024, 2048, 4096 };

	for (int i = 0; i < 5; i++) {
		CHECK(sr_mtu_bytes_to_enum(bytes[i]) == i + 1);
		CHECK(sr_mtu_enum_to_bytes(i + 1) == bytes[i]);
	}
	CHECK(sr_mtu_bytes_to_enum(0) == 0);
	CHECK(sr_mtu_bytes_to_enum(1500) == 0);
	CHECK(sr_mtu_bytes_to_enum(8192) == 0);
	CHECK(sr_mtu_enum_to_bytes(0) == 0);
	CHECK(sr_mtu_enum_to_bytes(6) == 0);

	CHECK(sr_mtu_active(65536, 0) == 4096); /* lo */
	CHECK(sr_mtu_active(1500, 0) == 1024);
	CHECK(sr_mtu_active(9000, 0) == 4096);
	CHECK(sr_mtu_active(4180, 0) == 4096); /* 4096 + 84 exactly fits */
	CHECK(sr_mtu_active(4179, 0) == 2048);
	CHECK(sr_mtu_active(2132, 0) == 2048);
	CHECK(sr_mtu_active(2131, 0) == 1024);
	CHECK(sr_mtu_active(596, 0) == 512);
	CHECK(sr_mtu_active(576, 0) == 256);
	CHECK(sr_mtu_active(68, 0) == 256); /* never below 256 */
	CHECK(sr_mtu_active(65536, 1024) == 1024);
	CHECK(sr_mtu_active(1500, 2048) == 1024); /* a cap never raises it */
}

static void test_types_names(void)
{
	enum sr_dev_type t;

	CHECK(sr_dev_type_parse("roce", &t) == 0 && t == SR_DEV_ROCE);
	CHECK(sr_dev_type_parse("iwarp", &t) == 0 && t == SR_DEV_IWARP);
	CHECK(sr_dev_type_parse("rxe", &t) == -EINVAL);
	CHECK(!strcmp(sr_dev_type_name(SR_DEV_ROCE), "roce"));
	CHECK(!strcmp(sr_dev_type_name(SR_DEV_IWARP), "iwarp"));
	CHECK(sr_conf_valid_name("rxe0"));
	CHECK(sr_conf_valid_name("my-dev_1.a"));
	CHECK(!sr_conf_valid_name(""));
	CHECK(!sr_conf_valid_name("a b"));
	CHECK(!sr_conf_valid_name("a/b"));
	CHECK(!sr_conf_valid_name("rxe]"));
}

static void test_paths(void)
{
	char buf[PATH_MAX], xdg[PATH_MAX], expect[PATH_MAX + 64];

	setenv("SOFTRDMA_CONF", path, 1);
	CHECK(!strcmp(sr_conf_path(buf, sizeof(buf)), path));

	/* Without SOFTRDMA_CONF: the per-user file when it exists, and also
	 * when nothing exists (unless /etc/softrdma.conf does). */
	unsetenv("SOFTRDMA_CONF");
	snprintf(xdg, sizeof(xdg), "%s/xdg", dir);
	setenv("XDG_CONFIG_HOME", xdg, 1);
	snprintf(expect, sizeof(expect), "%s/softrdma/softrdma.conf", xdg);
	if (access("/etc/softrdma.conf", F_OK) != 0)
		CHECK(!strcmp(sr_conf_path(buf, sizeof(buf)), expect));
	mkdir(xdg, 0755);
	snprintf(expect, sizeof(expect), "%s/softrdma", xdg);
	mkdir(expect, 0755);
	snprintf(expect, sizeof(expect), "%s/softrdma/softrdma.conf", xdg);
	write_file(expect, "crc = off\n");
	CHECK(!strcmp(sr_conf_path(buf, sizeof(buf)), expect));
	unlink(expect);

	/* A relative XDG_CONFIG_HOME is ignored, per the XDG spec. */
	setenv("XDG_CONFIG_HOME", "relative", 1);
	setenv("HOME", dir, 1);
	snprintf(expect, sizeof(expect), "%s/.config/softrdma/softrdma.conf", dir);
	if (access("/etc/softrdma.conf", F_OK) != 0)
		CHECK(!strcmp(sr_conf_path(buf, sizeof(buf)), expect));
	CHECK(sr_conf_path(buf, 4) == NULL);
	setenv("SOFTRDMA_CONF", path, 1);
}

static void test_default(void)
{
	struct sr_conf conf;
	char def[IFNAMSIZ];

	unlink(path);
	CHECK(sr_conf_load(&conf) == 0);
	CHECK(conf.is_default);
	CHECK(conf.crc);
	CHECK(conf.ndev == 1);
	CHECK(!strcmp(conf.dev[0].name, "rxe0"));
	CHECK(conf.dev[0].type == SR_DEV_ROCE);
	CHECK(conf.dev[0].mtu == 0);
	sr_netdev_default(def, sizeof(def));
	CHECK(!strcmp(conf.dev[0].netdev, def));
	CHECK(!strcmp(conf.path, path));
	/* The default must name a device that exists. */
	{
		struct sr_netdev_info ni;

		CHECK(sr_netdev_query(conf.dev[0].netdev, &ni) == 0);
		CHECK(ni.flags & IFF_UP);
	}
}

static void test_parse(void)
{
	struct sr_conf conf;
	char err[4096];

	write_file(path, "# softrdma configuration (written by softrdma-cfg)\n"
			 "crc = off   # no ICRC\n"
			 "\n"
			 "[rxe0]\n"
			 "type = roce\n"
			 "netdev = lo\n"
			 "mtu = 4096     # optional cap\n"
			 "  [ siw_lo ]  \n"
			 "\tnetdev=lo\n"
			 "type=iwarp\r\n"
			 "[rxe1]\n"
			 "netdev = eth9\n");
	CHECK(load_capture(&conf, err, sizeof(err)) == 0);
	CHECK(err[0] == 0);
	CHECK(!conf.is_default);
	CHECK(!conf.crc);
	CHECK(conf.ndev == 3);
	CHECK(!strcmp(conf.dev[0].name, "rxe0") && conf.dev[0].type == SR_DEV_ROCE &&
	      !strcmp(conf.dev[0].netdev, "lo") && conf.dev[0].mtu == 4096);
	CHECK(!strcmp(conf.dev[1].name, "siw_lo") && conf.dev[1].type == SR_DEV_IWARP &&
	      !strcmp(conf.dev[1].netdev, "lo") && conf.dev[1].mtu == 0);
	/* type defaults to roce; a netdev that does not exist now is allowed */
	CHECK(!strcmp(conf.dev[2].name, "rxe1") && conf.dev[2].type == SR_DEV_ROCE &&
	      !strcmp(conf.dev[2].netdev, "eth9"));
	CHECK(sr_conf_find(&conf, "siw_lo") == &conf.dev[1]);
	CHECK(sr_conf_find(&conf, "nope") == NULL);

	/* An empty file (all devices removed) is valid: no devices, crc on. */
	write_file(path, "");
	CHECK(sr_conf_load(&conf) == 0);
	CHECK(!conf.is_default && conf.ndev == 0 && conf.crc);

	/* Booleans. */
	write_file(path, "crc = yes\n");
	CHECK(sr_conf_load(&conf) == 0 && conf.crc);
	write_file(path, "crc = 0\n");
	CHECK(sr_conf_load(&conf) == 0 && !conf.crc);
}

static void test_roundtrip(void)
{
	struct sr_conf a, b;

	memset(&a, 0, sizeof(a));
	snprintf(a.path, sizeof(a.path), "%s/sub/dir/saved.conf", dir); /* parents created */
	a.crc = false;
	a.ndev = 3;
	snprintf(a.dev[0].name, sizeof(a.dev[0].name), "rxe0");
	snprintf(a.dev[0].netdev, sizeof(a.dev[0].netdev), "lo");
	a.dev[0].type = SR_DEV_ROCE;
	a.dev[0].mtu = 1024;
	snprintf(a.dev[1].name, sizeof(a.dev[1].name), "siw0");
	snprintf(a.dev[1].netdev, sizeof(a.dev[1].netdev), "eth0");
	a.dev[1].type = SR_DEV_IWARP;
	snprintf(a.dev[2].name, sizeof(a.dev[2].name), "x.y-z_9");
	snprintf(a.dev[2].netdev, sizeof(a.dev[2].netdev), "veth-a");
	a.dev[2].type = SR_DEV_ROCE;
	snprintf(a.faults, sizeof(a.faults), "drop=5%%,seed=42");
	snprintf(a.dev[1].faults, sizeof(a.dev[1].faults), "corrupt=0.5%%,reset=0.01%%,seed=1,rto=50ms");
	snprintf(a.dev[2].faults, sizeof(a.dev[2].faults), "off");
	CHECK(sr_conf_save(&a) == 0);
	setenv("SOFTRDMA_CONF", a.path, 1);
	CHECK(sr_conf_load(&b) == 0);
	CHECK(!b.is_default);
	CHECK(b.crc == a.crc && b.ndev == a.ndev);
	for (int i = 0; i < a.ndev && i < b.ndev; i++) {
		CHECK(!strcmp(a.dev[i].name, b.dev[i].name));
		CHECK(!strcmp(a.dev[i].netdev, b.dev[i].netdev));
		CHECK(a.dev[i].type == b.dev[i].type);
		CHECK(a.dev[i].mtu == b.dev[i].mtu);
		CHECK(!strcmp(a.dev[i].faults, b.dev[i].faults));
	}
	CHECK(!strcmp(a.faults, b.faults));
	/* Saving again gives the same bytes (stable output). */
	{
		char p2[PATH_MAX];
		char x[4096], y[4096];
		FILE *f;
		size_t nx, ny;

		memcpy(&b.path, a.path, sizeof(b.path));
		f = fopen(a.path, "r");
		nx = fread(x, 1, sizeof(x), f);
		fclose(f);
		snprintf(p2, sizeof(p2), "%.4000s.2", a.path);
		snprintf(b.path, sizeof(b.path), "%s", p2);
		CHECK(sr_conf_save(&b) == 0);
		f = fopen(p2, "r");
		ny = fread(y, 1, sizeof(y), f);
		fclose(f);
		CHECK(nx == ny && !memcmp(x, y, nx));
		CHECK(strstr(x, "# softrdma configuration") == x);
	}
	/* No temp files left behind. */
	{
		char cmd[PATH_MAX + 64];

		snprintf(cmd, sizeof(cmd), "ls %s/sub/dir | grep -q tmp", dir);
		CHECK(system(cmd) != 0);
	}
	/* Invalid configurations are refused, not written. */
	b = a;
	snprintf(b.dev[1].name, sizeof(b.dev[1].name), "rxe0");
	CHECK(sr_conf_save(&b) == -EINVAL);
	b = a;
	b.dev[0].mtu = 1500;
	CHECK(sr_conf_save(&b) == -EINVAL);
	b = a;
	snprintf(b.dev[0].netdev, sizeof(b.dev[0].netdev), "a b");
	CHECK(sr_conf_save(&b) == -EINVAL);
	b = a;
	b.ndev = SR_MAX_DEVICES + 1;
	CHECK(sr_conf_save(&b) == -EINVAL);
	setenv("SOFTRDMA_CONF", path, 1);
}

struct bad_case {
	const char *text;
	int line;
	const char *msg; /* substring of the message */
};

static void test_errors(void)
{
	static const struct bad_case cases[] = {
		{ "crc = on\nfoo = 1\n", 2, "unknown key 'foo'" },
		{ "crc = maybe\n", 1, "bad value 'maybe'" },
		{ "crc = on\ncrc = off\n", 2, "twice" },
		{ "[rxe0]\nnetdev = lo\ncolour = red\n", 3, "unknown key 'colour'" },
		{ "[rxe0]\nnetdev = lo\ncrc = on\n", 3, "global" },
		{ "[rxe0]\ntype = rxe\nnetdev = lo\n", 2, "bad type 'rxe'" },
		{ "[rxe0]\nnetdev = lo\nmtu = 1500\n", 3, "bad mtu '1500'" },
		{ "[rxe0]\nnetdev = lo\nmtu = 4096x\n", 3, "bad mtu" },
		{ "[rxe0]\nnetdev = lo\nmtu = 8192\n", 3, "bad mtu" },
		/* a long that truncates to 256 as an int (issue 15) */
		{ "[rxe0]\nnetdev = lo\nmtu = -4294967040\n", 3, "bad mtu" },
		{ "[rxe0]\nnetdev = lo\nmtu = 4294967552\n", 3, "bad mtu" },
		{ "[rxe0]\nnetdev = lo\nmtu =\n", 3, "missing value" },
		{ "[rxe0]\nnetdev = lo\nnetdev = eth0\n", 3, "twice" },
		{ "faults = drop=5x\n", 1, "bad faults 'drop=5x': drop=5x: expected a percentage" },
		{ "faults = drop=1%\nfaults = dup=1%\n", 2, "'faults' given twice" },
		{ "[rxe0]\nnetdev = lo\nfaults = loss=3%\n", 3, "unknown key 'loss'" },
		{ "[rxe0]\nnetdev = lo\nfaults = drop=1%\nfaults = off\n", 4, "twice" },
		{ "[rxe0]\nnetdev = lo\n[rxe0]\nnetdev = lo\n", 3, "duplicate device name 'rxe0'" },
		{ "[rxe0]\ntype = roce\n\n[rxe1]\nnetdev = lo\n", 1, "no 'netdev" },
		{ "[rxe0]\nnetdev = lo\n[rxe1]\n", 3, "no 'netdev" },
		{ "[rxe 0]\nnetdev = lo\n", 1, "bad device name" },
		{ "[]\n", 1, "bad device name" },
		{ "[rxe0\nnetdev = lo\n", 1, "expected '[NAME]'" },
		{ "[rxe0] junk\nnetdev = lo\n", 1, "expected '[NAME]'" },
		{ "[rxe0]\nnetdev = eth0:1\n", 2, "bad netdev" },
		{ "[rxe0]\nnetdev = averyveryverylongname\n", 2, "bad netdev" },
		{ "just some words\n", 1, "expected 'key = value'" },
		{ "= on\n", 1, "missing key" },
		{ "crc = on\n[rxe0]\nnetdev = lo\nmtu = 1024\ntype = roce\nbogus\n", 6, "expected" },
	};
	struct sr_conf conf;
	char err[4096], expect[PATH_MAX + 32];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc;

		write_file(path, cases[i].text);
		rc = load_capture(&conf, err, sizeof(err));
		snprintf(expect, sizeof(expect), "%s:%d: ", path, cases[i].line);
		CHECK(rc == -EINVAL && !strncmp(err, expect, strlen(expect)) && strstr(err, cases[i].msg) &&
			      strchr(err, '\n') == err + strlen(err) - 1,
		      "case %zu: rc %d, message '%s', wanted '%s...%s'", i, rc, err, expect, cases[i].msg);
		/* Nothing half-parsed is handed back. */
		CHECK(conf.ndev == 0);
	}

	/* Too many devices. */
	{
		char text[8192] = "";

		for (int i = 0; i <= SR_MAX_DEVICES; i++) {
			char sec[64];

			snprintf(sec, sizeof(sec), "[d%d]\nnetdev = lo\n", i);
			strcat(text, sec);
		}
		write_file(path, text);
		CHECK(load_capture(&conf, err, sizeof(err)) == -EINVAL);
		CHECK(strstr(err, "too many devices") != NULL);
	}
	/* A 16 MiB value is quoted in 40 characters, control characters
	 * (a terminal's escape sequences) as '?' (issue 15). */
	{
		size_t big = 16u << 20;
		char *text = malloc(big + 64);

		if (text) {
			int n = sprintf(text, "crc = \033[31m");
			memset(text + n, 'x', big);
			strcpy(text + n + big, "\n");
			write_file(path, text);
			free(text);
			CHECK(load_capture(&conf, err, sizeof(err)) == -EINVAL);
			CHECK(strlen(err) < 200);
			CHECK(strstr(err, "bad value '?[31mxxx") != NULL && strstr(err, "...'") != NULL);
			CHECK(!strchr(err, '\033'));
		}
	}
	/* A NUL byte inside a line. */
	{
		FILE *f = fopen(path, "w");

		fwrite("crc = on\0junk\n", 1, 14, f);
		fclose(f);
		CHECK(load_capture(&conf, err, sizeof(err)) == -EINVAL);
	}
	/* An unreadable file is an error, not the default. */
	if (geteuid() != 0) {
		write_file(path, "crc = on\n");
		chmod(path, 0);
		CHECK(load_capture(&conf, err, sizeof(err)) == -EACCES);
		chmod(path, 0644);
	}
	/* A directory where the file should be. */
	{
		char d2[PATH_MAX + 8];

		snprintf(d2, sizeof(d2), "%s/isdir", dir);
		mkdir(d2, 0755);
		setenv("SOFTRDMA_CONF", d2, 1);
		CHECK(load_capture(&conf, err, sizeof(err)) < 0);
		setenv("SOFTRDMA_CONF", path, 1);
	}
}

static void test_netdev(void)
{
	struct sr_netdev_info ni;
	char def[IFNAMSIZ];
	struct in6_addr lo4 = { { { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1 } } };

	CHECK(sr_netdev_query("lo", &ni) == 0);
	CHECK(!strcmp(ni.name, "lo"));
	CHECK(ni.ifindex > 0);
	CHECK(ni.flags & IFF_LOOPBACK);
	CHECK(ni.mtu >= 1280);
	/* lo has 127.0.0.1 unless someone removed it; IPv4 comes first. */
	if (ni.naddr > 0 && ni.addr[0].family == AF_INET)
		CHECK(!memcmp(&ni.addr[0].addr, &lo4, sizeof(lo4)));
	for (int i = 1; i < ni.naddr; i++) {
		/* IPv4 before IPv6, link-local IPv6 last */
		CHECK(!(ni.addr[i].family == AF_INET && ni.addr[i - 1].family == AF_INET6));
		CHECK(!(IN6_IS_ADDR_LINKLOCAL(&ni.addr[i - 1].addr) && ni.addr[i].family == AF_INET6 &&
			!IN6_IS_ADDR_LINKLOCAL(&ni.addr[i].addr)));
	}
	CHECK(sr_netdev_query("nonexistent0", &ni) == -ENODEV);
	CHECK(sr_netdev_query("", &ni) == -ENODEV);
	CHECK(sr_netdev_query("averyveryverylongname", &ni) == -ENODEV);
	CHECK(sr_netdev_query("lo:1", &ni) == -ENODEV);

	sr_netdev_default(def, sizeof(def));
	CHECK(def[0] != 0);
	CHECK(sr_netdev_query(def, &ni) == 0);
	if (strcmp(def, "lo")) {
		bool has4 = false;

		CHECK(!(ni.flags & IFF_LOOPBACK) && (ni.flags & IFF_UP));
		for (int i = 0; i < ni.naddr; i++)
			has4 |= ni.addr[i].family == AF_INET;
		CHECK(has4);
	}
	printf("default netdev: %s (mtu %d, %d addresses)\n", def, ni.mtu, ni.naddr);
}

/* Which devices answer on 127.0.0.1 and ::1 (sr_conf_finish). */
static void test_loopback(void)
{
	struct sr_conf c;
	struct sr_netdev_info ni;
	char err[4096];

	/* no device on lo: the first of each type, unless it says off */
	write_file(path, "[rxe0]\nnetdev = eth9\n[rxe1]\nnetdev = eth8\n[siw0]\ntype = iwarp\nnetdev = eth9\n");
	CHECK(load_capture(&c, err, sizeof(err)) == 0);
	CHECK(c.ndev == 3 && c.dev[0].loopback == -1);
	CHECK(c.dev[0].lo_addrs && !c.dev[1].lo_addrs && c.dev[2].lo_addrs);
	write_file(path, "[rxe0]\nnetdev = eth9\nloopback = off\n[rxe1]\nnetdev = eth8\nloopback = yes\n");
	CHECK(load_capture(&c, err, sizeof(err)) == 0);
	CHECK(c.dev[0].loopback == 0 && !c.dev[0].lo_addrs && c.dev[1].loopback == 1 && c.dev[1].lo_addrs);
	/* a device on lo serves loopback itself: no other device does */
	write_file(path, "[rxe0]\nnetdev = eth9\n[rxe1]\nnetdev = lo\n");
	CHECK(load_capture(&c, err, sizeof(err)) == 0);
	CHECK(!c.dev[0].lo_addrs && !c.dev[1].lo_addrs);
	/* the key round-trips; a bad value or a repeat is an error */
	write_file(path, "[rxe0]\nnetdev = eth9\nloopback = on\n");
	CHECK(load_capture(&c, err, sizeof(err)) == 0 && sr_conf_save(&c) == 0);
	CHECK(load_capture(&c, err, sizeof(err)) == 0 && c.dev[0].loopback == 1);
	write_file(path, "[rxe0]\nnetdev = eth9\nloopback = maybe\n");
	CHECK(load_capture(&c, err, sizeof(err)) == -EINVAL && strstr(err, ":3: bad value 'maybe' for loopback"));
	write_file(path, "[rxe0]\nnetdev = eth9\nloopback = on\nloopback = off\n");
	CHECK(load_capture(&c, err, sizeof(err)) == -EINVAL && strstr(err, ":4: 'loopback' given twice"));
	/* the GIDs: the interface's own first, then lo's */
	memset(&c, 0, sizeof(c));
	snprintf(c.dev[0].netdev, sizeof(c.dev[0].netdev), "lo");
	CHECK(sr_netdev_query_dev(&c.dev[0], &ni) == 0);
	{
		int own = ni.naddr;

		c.dev[0].lo_addrs = true; /* lo twice: its addresses twice, after its own */
		CHECK(sr_netdev_query_dev(&c.dev[0], &ni) == 0 && ni.naddr == 2 * own);
		CHECK(own == 0 || !memcmp(&ni.addr[0].addr, &ni.addr[own].addr, 16));
	}
	unlink(path);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/softrdma.conf", dir);
	setenv("SOFTRDMA_CONF", path, 1);

	test_mtu();
	test_types_names();
	test_default();
	test_parse();
	test_roundtrip();
	test_errors();
	test_netdev();
	test_paths();
	test_loopback();

	{
		char cmd[PATH_MAX + 16];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd)) {
			/* leftovers in /tmp are harmless */
		}
	}
	return ut_end("test_conf");
}
