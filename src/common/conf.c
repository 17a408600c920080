/* softrdma configuration file.
 *
 * Format (softrdma-cfg writes it; hand edits must follow the same rules):
 *
 *     # softrdma configuration (written by softrdma-cfg)
 *     crc = on
 *     [rxe0]
 *     type = roce
 *     netdev = lo
 *     mtu = 4096     # optional cap
 *
 *   - One setting per line, "key = value".  '#' starts a comment anywhere on
 *     a line; blank lines are ignored; spaces around keys and values too.
 *   - Global settings come before the first section:
 *       crc = on|off        ICRC (RoCE) and MPA CRC (iWARP) generated and
 *                           checked (default on); also yes/no, true/false, 1/0.
 *       faults = SPEC       fault injection in every process using the file
 *                           (common/fault_spec.h; SOFTRDMA_FAULTS overrides).
 *   - Each "[NAME]" section is one device.  NAME is 1-63 characters of
 *     A-Z a-z 0-9 _ . - and unique in the file.
 *       type = roce|iwarp   Soft-RoCE (RoCEv2/UDP, like rxe) or Soft-iWARP
 *                           (TCP, like siw); default roce.
 *       netdev = IFNAME     network interface the device is bound to (required).
 *       mtu = 256|512|1024|2048|4096
 *                           upper bound on the port's active MTU; default:
 *                           follow the interface MTU.
 *       loopback = on|off   the device also answers on the loopback addresses
 *                           (127.0.0.1, ::1: GIDs after the interface's own).
 *                           Default: on for the first device of each type
 *                           when no device is on lo (sr_conf_finish).
 *       faults = SPEC       fault injection on this device (overrides the
 *                           global one; "off" turns it off here).
 *   - At most 16 devices.  A file with no section is valid and has no devices.
 *   - Anything else (unknown key or section, bad value, a key given twice,
 *     a duplicate device name) is an error reported as "FILE:LINE: message";
 *     nothing falls back to defaults silently.
 *
 * Where the file is: $SOFTRDMA_CONF, else $XDG_CONFIG_HOME/softrdma/softrdma.conf
 * (~/.config/softrdma/softrdma.conf), else /etc/softrdma.conf.  Without a file
 * the built-in default is one RoCE device "rxe0" on the first UP non-loopback
 * interface with an IPv4 address (else "lo"), crc on.
 */
#include "common/conf.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

int sr_mtu_bytes_to_enum(int bytes)
{
	switch (bytes) {
	case 256:
		return 1;
	case 512:
		return 2;
	case 1024:
		return 3;
	case 2048:
		return 4;
	case 4096:
		return 5;
	default:
		return 0;
	}
}

int sr_mtu_enum_to_bytes(int mtu_enum)
{
	if (mtu_enum < 1 || mtu_enum > 5)
		return 0;
	return 128 << mtu_enum;
}

int sr_mtu_active(int netdev_mtu, int cap_bytes)
{
	int room = netdev_mtu - SR_ROCE_IPV4_OVERHEAD;
	int mtu = 4096;

	/* rxe falls back to 256 rather than refusing a tiny link MTU. */
	while (mtu > 256 && mtu > room)
		mtu >>= 1;
	if (cap_bytes > 0 && cap_bytes < mtu)
		mtu = cap_bytes;
	return mtu;
}

const char *sr_dev_type_name(enum sr_dev_type type)
{
	return type == SR_DEV_IWARP ? "iwarp" : "roce";
}

int sr_dev_type_parse(const char *s, enum sr_dev_type *type)
{
	if (!strcmp(s, "roce")) {
		*type = SR_DEV_ROCE;
		return 0;
	}
	if (!strcmp(s, "iwarp")) {
		*type = SR_DEV_IWARP;
		return 0;
	}
	return -EINVAL;
}

struct sr_conf_device *sr_conf_find(struct sr_conf *conf, const char *name)
{
	for (int i = 0; i < conf->ndev; i++)
		if (!strcmp(conf->dev[i].name, name))
			return &conf->dev[i];
	return NULL;
}

bool sr_conf_valid_name(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n >= SR_DEVNAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)name[i];
		if (!isalnum(ch) && ch != '_' && ch != '.' && ch != '-')
			return false;
	}
	return true;
}

/* The kernel accepts almost anything in an interface name except '/', ':'
 * and whitespace; ':' would name an IPv4 alias label, not a device. */
static bool valid_netdev(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= IFNAMSIZ || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch <= ' ' || ch == '/' || ch == ':' || ch >= 0x7f)
			return false;
	}
	return true;
}

static int copy_path(char *buf, size_t len, const char *a, const char *b)
{
	int n = snprintf(buf, len, "%s%s", a, b);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* buf receives the home directory when it is not taken from $HOME. */
static const char *home_dir(char *buf, size_t len)
{
	const char *h = getenv("HOME");
	struct passwd pwbuf, *pw = NULL;
	char tmp[1024];

	if (h && h[0] == '/')
		return h;
	/* The _r variant: libibverbs may run this in several threads. */
	if (!getpwuid_r(getuid(), &pwbuf, tmp, sizeof(tmp), &pw) && pw && pw->pw_dir && pw->pw_dir[0] == '/' &&
	    strlen(pw->pw_dir) < len) {
		snprintf(buf, len, "%s", pw->pw_dir);
		return buf;
	}
	return "/";
}

static int user_path(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_CONFIG_HOME");
	char home[PATH_MAX];

	/* The XDG spec says to ignore a relative XDG_CONFIG_HOME. */
	if (xdg && xdg[0] == '/')
		return copy_path(buf, len, xdg, "/softrdma/softrdma.conf");
	return copy_path(buf, len, home_dir(home, sizeof(home)), "/.config/softrdma/softrdma.conf");
}

const char *sr_conf_path(char *buf, size_t len)
{
	/* A set-user-ID program reads only the system's file: the caller's
	 * environment and home directory are the caller's to fake, and a
	 * configuration error quotes the file. */
	bool secure = getauxval(AT_SECURE) != 0;
	const char *env = secure_getenv("SOFTRDMA_CONF");
	static const char etc[] = "/etc/softrdma.conf";

	if (!len)
		return NULL;
	if (secure) {
		if (copy_path(buf, len, etc, ""))
			return NULL;
		return buf;
	}
	if (env && env[0]) {
		if (copy_path(buf, len, env, ""))
			return NULL;
		return buf;
	}
	if (!user_path(buf, len) && access(buf, F_OK) == 0)
		return buf;
	if (access(etc, F_OK) == 0) {
		if (copy_path(buf, len, etc, ""))
			return NULL;
		return buf;
	}
	if (user_path(buf, len))
		return NULL;
	return buf;
}

void sr_conf_finish(struct sr_conf *conf)
{
	bool any_lo = false, first_of[2] = { true, true };

	for (int i = 0; i < conf->ndev; i++)
		if (!strcmp(conf->dev[i].netdev, "lo"))
			any_lo = true;
	for (int i = 0; i < conf->ndev; i++) {
		struct sr_conf_device *d = &conf->dev[i];
		bool first = first_of[d->type == SR_DEV_IWARP];

		first_of[d->type == SR_DEV_IWARP] = false;
		if (!strcmp(d->netdev, "lo"))
			d->lo_addrs = false; /* they are its own addresses already */
		else if (d->loopback >= 0)
			d->lo_addrs = d->loopback == 1;
		else
			d->lo_addrs = !any_lo && first;
	}
}

void sr_conf_default(struct sr_conf *conf)
{
	char path[PATH_MAX];
	const char *p = sr_conf_path(path, sizeof(path));

	memset(conf, 0, sizeof(*conf));
	conf->crc = true;
	conf->is_default = true;
	conf->ndev = 1;
	snprintf(conf->dev[0].name, sizeof(conf->dev[0].name), "rxe0");
	conf->dev[0].type = SR_DEV_ROCE;
	conf->dev[0].loopback = -1;
	sr_netdev_default(conf->dev[0].netdev, sizeof(conf->dev[0].netdev));
	sr_conf_finish(conf);
	if (p)
		snprintf(conf->path, sizeof(conf->path), "%s", p);
}

/* ---- parser ---- */

struct parser {
	const char *path;
	unsigned line;
	struct sr_conf *conf;
	struct sr_conf_device *dev; /* section being filled, NULL before the first */
	unsigned dev_line;
	unsigned seen; /* keys given in the current section (bits) */
};

enum {
	SEEN_CRC = 1,
	SEEN_TYPE = 2,
	SEEN_NETDEV = 4,
	SEEN_MTU = 8,
	SEEN_LOOPBACK = 16,
	SEEN_FAULTS = 32
};

static int perr(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int perr(struct parser *p, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%u: ", p->path, p->line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -EINVAL;
}

/* What a message shows of a string from the file: at most 40 characters,
 * control characters as '?', "..." if there was more.  A value of 16 MiB
 * (or escape sequences for the terminal) would otherwise land whole on
 * stderr. */
static const char *shown(char *buf, size_t cap, const char *s)
{
	size_t i = 0, max = cap < 44 ? cap - 4 : 40;

	for (; s[i] && i < max; i++)
		buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	if (s[i])
		memcpy(buf + i, "...", 3), i += 3;
	buf[i] = 0;
	return buf;
}
#define SHOWN(s) shown((char[48]){ 0 }, 48, (s))

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
		e--;
	*e = 0;
	return s;
}

static int parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = { "on", "yes", "true", "1" };
	static const char *const no[] = { "off", "no", "false", "0" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcmp(v, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcmp(v, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

/* "faults = SPEC": checked as the library will read it, kept in its
 * canonical form (what softrdma-cfg writes back). */
static int parse_faults(struct parser *p, const char *val, char *out, size_t len)
{
	struct sr_fault_spec spec;
	char err[256];

	if (sr_fault_spec_parse(val, &spec, err, sizeof(err))) {
		/* the reason quotes the item: no control character reaches a terminal */
		for (char *c = err; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = '?';
		return perr(p, "bad faults '%s': %s", SHOWN(val), err);
	}
	sr_fault_spec_format(&spec, out, len);
	return 0;
}

static int end_section(struct parser *p)
{
	if (p->dev && !(p->seen & SEEN_NETDEV)) {
		p->line = p->dev_line;
		return perr(p, "device [%s] has no 'netdev = ...'", p->dev->name);
	}
	return 0;
}

static int parse_section(struct parser *p, char *s)
{
	char *end = strchr(s, ']');
	char *name;
	int rc;

	if (!end || trim(end + 1)[0])
		return perr(p, "expected '[NAME]'");
	*end = 0;
	name = trim(s + 1);
	rc = end_section(p);
	if (rc)
		return rc;
	if (!sr_conf_valid_name(name))
		return perr(p, "bad device name '%s' (1-%d characters of A-Z a-z 0-9 _ . -)", SHOWN(name),
			    SR_DEVNAME_MAX - 1);
	if (sr_conf_find(p->conf, name))
		return perr(p, "duplicate device name '%s'", name);
	if (p->conf->ndev >= SR_MAX_DEVICES)
		return perr(p, "too many devices (at most %d)", SR_MAX_DEVICES);
	p->dev = &p->conf->dev[p->conf->ndev++];
	memset(p->dev, 0, sizeof(*p->dev));
	snprintf(p->dev->name, sizeof(p->dev->name), "%s", name);
	p->dev->type = SR_DEV_ROCE;
	p->dev->loopback = -1;
	p->dev_line = p->line;
	p->seen = 0;
	return 0;
}

static int parse_setting(struct parser *p, char *s)
{
	char *eq = strchr(s, '=');
	char *key, *val;
	unsigned bit;

	if (!eq)
		return perr(p, "expected 'key = value' or '[NAME]'");
	*eq = 0;
	key = trim(s);
	val = trim(eq + 1);
	if (!key[0])
		return perr(p, "missing key before '='");
	if (!val[0])
		return perr(p, "missing value for '%s'", SHOWN(key));

	if (!p->dev) {
		if (!strcmp(key, "faults")) {
			if (p->seen & SEEN_FAULTS)
				return perr(p, "'faults' given twice");
			p->seen |= SEEN_FAULTS;
			return parse_faults(p, val, p->conf->faults, sizeof(p->conf->faults));
		}
		if (strcmp(key, "crc"))
			return perr(p,
				    "unknown key '%s' (before the first [device] only 'crc' and 'faults' are allowed)",
				    SHOWN(key));
		if (p->seen & SEEN_CRC)
			return perr(p, "'crc' given twice");
		if (parse_bool(val, &p->conf->crc))
			return perr(p, "bad value '%s' for crc (on or off)", SHOWN(val));
		p->seen |= SEEN_CRC;
		return 0;
	}

	if (!strcmp(key, "type")) {
		bit = SEEN_TYPE;
		if (sr_dev_type_parse(val, &p->dev->type))
			return perr(p, "bad type '%s' (roce or iwarp)", SHOWN(val));
	} else if (!strcmp(key, "netdev")) {
		bit = SEEN_NETDEV;
		if (!valid_netdev(val))
			return perr(p, "bad netdev name '%s'", SHOWN(val));
		snprintf(p->dev->netdev, sizeof(p->dev->netdev), "%s", val);
	} else if (!strcmp(key, "mtu")) {
		char *end;
		long v;

		bit = SEEN_MTU;
		errno = 0;
		v = strtol(val, &end, 10);
		/* the range first: (int)-4294967040 is 256 */
		if (errno || *end || v < 256 || v > 4096 || !sr_mtu_bytes_to_enum((int)v))
			return perr(p, "bad mtu '%s' (256, 512, 1024, 2048 or 4096)", SHOWN(val));
		p->dev->mtu = (int)v;
	} else if (!strcmp(key, "loopback")) {
		bool on;

		bit = SEEN_LOOPBACK;
		if (parse_bool(val, &on))
			return perr(p, "bad value '%s' for loopback (on or off)", SHOWN(val));
		p->dev->loopback = on;
	} else if (!strcmp(key, "faults")) {
		bit = SEEN_FAULTS;
		if (!(p->seen & bit)) {
			int rc = parse_faults(p, val, p->dev->faults, sizeof(p->dev->faults));

			if (rc)
				return rc;
		}
	} else if (!strcmp(key, "crc")) {
		return perr(p, "'crc' is a global setting: put it before the first [device]");
	} else {
		return perr(p, "unknown key '%s' in [%s] (type, netdev, mtu, loopback, faults)", SHOWN(key),
			    p->dev->name);
	}
	if (p->seen & bit)
		return perr(p, "'%s' given twice in [%s]", key, p->dev->name);
	p->seen |= bit;
	return 0;
}

static int parse_line(struct parser *p, char *line)
{
	char *hash = strchr(line, '#');
	char *s;

	if (hash)
		*hash = 0;
	s = trim(line);
	if (!s[0])
		return 0;
	if (s[0] == '[')
		return parse_section(p, s);
	return parse_setting(p, s);
}

int sr_conf_parse(struct sr_conf *conf, FILE *f)
{
	struct parser p = { .conf = conf, .path = conf->path };
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;

	conf->crc = true;
	conf->ndev = 0;
	conf->is_default = false;
	while ((n = getline(&line, &cap, f)) >= 0) {
		p.line++;
		/* A NUL inside the line would hide the rest of it from the parser. */
		if ((size_t)n != strlen(line)) {
			rc = perr(&p, "NUL byte in line");
			break;
		}
		rc = parse_line(&p, line);
		if (rc)
			break;
	}
	if (!rc && ferror(f)) {
		rc = -errno ? -errno : -EIO;
		fprintf(stderr, "softrdma: cannot read %s: %s\n", conf->path, strerror(-rc));
	}
	if (!rc) {
		p.line++;
		rc = end_section(&p);
	}
	free(line);
	if (rc) {
		char path[PATH_MAX];

		/* Don't hand back half a configuration. */
		memcpy(path, conf->path, sizeof(path));
		memset(conf, 0, sizeof(*conf));
		memcpy(conf->path, path, sizeof(path));
	} else {
		sr_conf_finish(conf);
	}
	return rc;
}

int sr_conf_load(struct sr_conf *conf)
{
	FILE *f;
	int rc;

	memset(conf, 0, sizeof(*conf));
	if (!sr_conf_path(conf->path, sizeof(conf->path))) {
		fprintf(stderr, "softrdma: configuration file path too long\n");
		return -ENAMETOOLONG;
	}
	f = fopen(conf->path, "re");
	if (!f) {
		rc = -errno;
		if (rc == -ENOENT) {
			char path[PATH_MAX];

			memcpy(path, conf->path, sizeof(path));
			sr_conf_default(conf);
			memcpy(conf->path, path, sizeof(path));
			return 0;
		}
		fprintf(stderr, "softrdma: cannot read %s: %s\n", conf->path, strerror(-rc));
		return rc;
	}
	rc = sr_conf_parse(conf, f);
	fclose(f);
	return rc;
}

/* ---- saving ---- */

static int mkdirs(const char *path)
{
	char tmp[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, n + 1);
	for (char *s = tmp + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(tmp, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

static int validate(const struct sr_conf *conf)
{
	if (conf->ndev < 0 || conf->ndev > SR_MAX_DEVICES)
		return -EINVAL;
	for (int i = 0; i < conf->ndev; i++) {
		const struct sr_conf_device *d = &conf->dev[i];

		if (!memchr(d->name, 0, sizeof(d->name)) || !sr_conf_valid_name(d->name) ||
		    !memchr(d->netdev, 0, sizeof(d->netdev)) || !valid_netdev(d->netdev) ||
		    (d->type != SR_DEV_ROCE && d->type != SR_DEV_IWARP) || (d->mtu && !sr_mtu_bytes_to_enum(d->mtu)))
			return -EINVAL;
		for (int j = 0; j < i; j++)
			if (!strcmp(conf->dev[j].name, d->name))
				return -EINVAL;
	}
	return 0;
}

int sr_conf_write(const struct sr_conf *conf, FILE *f)
{
	int rc = validate(conf);

	if (rc)
		return rc;
	fprintf(f, "# softrdma configuration (written by softrdma-cfg)\n");
	fprintf(f, "crc = %s\n", conf->crc ? "on" : "off");
	if (conf->faults[0])
		fprintf(f, "faults = %s\n", conf->faults);
	for (int i = 0; i < conf->ndev; i++) {
		const struct sr_conf_device *d = &conf->dev[i];

		fprintf(f, "\n[%s]\ntype = %s\nnetdev = %s\n", d->name, sr_dev_type_name(d->type), d->netdev);
		if (d->mtu)
			fprintf(f, "mtu = %d\n", d->mtu);
		if (d->loopback >= 0)
			fprintf(f, "loopback = %s\n", d->loopback ? "on" : "off");
		if (d->faults[0])
			fprintf(f, "faults = %s\n", d->faults);
	}
	return 0;
}

int sr_conf_save(const struct sr_conf *conf)
{
	char dir[PATH_MAX], tmp[PATH_MAX + 32];
	const char *slash;
	FILE *f;
	int fd, rc;

	if (!conf->path[0] || !memchr(conf->path, 0, sizeof(conf->path)))
		return -EINVAL;
	rc = validate(conf);
	if (rc)
		return rc;
	slash = strrchr(conf->path, '/');
	if (slash && slash != conf->path) {
		memcpy(dir, conf->path, (size_t)(slash - conf->path));
		dir[slash - conf->path] = 0;
		rc = mkdirs(dir);
		if (rc)
			return rc;
	}
	/* Same directory as the target so that rename() is atomic. */
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", conf->path, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	f = fdopen(fd, "w");
	if (!f) {
		rc = -errno;
		close(fd);
		unlink(tmp);
		return rc;
	}
	rc = sr_conf_write(conf, f);
	if (!rc && (fflush(f) || ferror(f) || fsync(fileno(f))))
		rc = errno ? -errno : -EIO;
	if (fclose(f) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, conf->path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}
