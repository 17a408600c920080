/* libFuzzer harness for the configuration file parser
 * (src/common/conf.c: sr_conf_parse, what sr_conf_load runs on the file
 * that $SOFTRDMA_CONF, ~/.config/softrdma/softrdma.conf or
 * /etc/softrdma.conf names).  The library, softrdma-cfg and the daemon
 * all read it.
 *
 * Input: the file's text.  Seeds: the forms softrdma-cfg writes and the
 * README shows (tests/fuzz/fuzz_seeds.c).
 *
 * Invariants (abort() on violation):
 *  - the parser returns 0 or -EINVAL, and on -EINVAL hands back no device;
 *  - an accepted configuration is one sr_conf_write accepts (valid names,
 *    interface names, types and MTUs, at most 16 devices, no duplicate);
 *  - written back and parsed again, it is the same configuration;
 *  - an accepted number means what it says: each "mtu" value, read as a
 *    plain decimal number by the harness, is the MTU the device got, and a
 *    device without one has 0 (regress/conf/mtu-int-wrap: -4294967040 was
 *    once taken as 256). */
#include <errno.h>

#include "fuzz.h"
#include "common/conf.h"

static void same(const struct sr_conf *a, const struct sr_conf *b)
{
	REQUIRE(a->crc == b->crc && a->ndev == b->ndev && !strcmp(a->faults, b->faults));
	for (int i = 0; i < a->ndev; i++) {
		REQUIRE(!strcmp(a->dev[i].faults, b->dev[i].faults));
		REQUIRE(!strcmp(a->dev[i].name, b->dev[i].name));
		REQUIRE(!strcmp(a->dev[i].netdev, b->dev[i].netdev));
		REQUIRE(a->dev[i].type == b->dev[i].type && a->dev[i].mtu == b->dev[i].mtu);
		REQUIRE(a->dev[i].loopback == b->dev[i].loopback && a->dev[i].lo_addrs == b->dev[i].lo_addrs);
	}
}

/* The number a "mtu" value means, read here without strtol: white space,
 * [+]decimal digits and nothing else; -1 for anything else (no MTU the
 * parser may accept). */
static long long plain_decimal(const char *v)
{
	const char *d;

	/* strtol skips any leading white space (\v, \f, \r too) */
	while (*v == ' ' || *v == '\t' || *v == '\v' || *v == '\f' || *v == '\r')
		v++;
	d = *v == '+' ? v + 1 : v;
	if (!*d || strspn(d, "0123456789") != strlen(d))
		return -1;
	while (*d == '0' && d[1])
		d++;
	return strlen(d) <= 9 ? atoll(d) : -1;
}

/* Every "mtu = V" line of an accepted text, by section (device): V read
 * as a plain decimal is the MTU the device got; a device without one has
 * 0 (follow the interface).  Lines are split as the file format says:
 * '#' starts a comment, space, tab (and a CR at the end) around keys and
 * values.  The parser refuses NUL bytes and a key given twice, so each
 * line is a C string and each device has at most one mtu line. */
static void check_mtus(const struct sr_conf *conf, const char *text, size_t len)
{
	bool has_mtu[SR_MAX_DEVICES] = { false };
	int dev = -1;

	for (size_t i = 0, e; i < len; i = e + 1) {
		char *line, *s, *eq, *k, *v;

		for (e = i; e < len && text[e] != '\n'; e++)
			;
		line = strndup(text + i, e - i);
		REQUIRE(line);
		if ((s = strchr(line, '#')))
			*s = 0;
		for (s = line; *s == ' ' || *s == '\t'; s++)
			;
		if (*s == '[') {
			dev++;
		} else if ((eq = strchr(s, '=')) && dev >= 0) {
			*eq = 0;
			for (k = eq; k > s && (k[-1] == ' ' || k[-1] == '\t' || k[-1] == '\r'); k--)
				k[-1] = 0;
			for (v = eq + 1; *v == ' ' || *v == '\t'; v++)
				;
			for (k = v + strlen(v); k > v && (k[-1] == ' ' || k[-1] == '\t' || k[-1] == '\r'); k--)
				k[-1] = 0;
			if (!strcmp(s, "mtu")) {
				REQUIRE(dev < conf->ndev && !has_mtu[dev]);
				REQUIRE(plain_decimal(v) == conf->dev[dev].mtu);
				has_mtu[dev] = true;
			}
		}
		free(line);
	}
	REQUIRE(dev + 1 == conf->ndev);
	for (int d = 0; d < conf->ndev; d++)
		REQUIRE(has_mtu[d] || conf->dev[d].mtu == 0);
}

static int parse(struct sr_conf *conf, const void *text, size_t len)
{
	/* fmemopen refuses a zero-sized buffer: an empty file is /dev/null */
	FILE *f = len ? fmemopen((void *)text, len, "r") : fopen("/dev/null", "r");
	int rc;

	REQUIRE(f);
	memset(conf, 0, sizeof(*conf));
	snprintf(conf->path, sizeof(conf->path), "fuzz.conf");
	rc = sr_conf_parse(conf, f);
	fclose(f);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sr_conf conf, back;
	uint8_t *x = fz_dup(data, size);
	int rc = parse(&conf, x, size);

	REQUIRE(rc == 0 || rc == -EINVAL);
	if (rc) {
		REQUIRE(conf.ndev == 0);
	} else {
		char *text = NULL;
		size_t tlen = 0;
		FILE *out = open_memstream(&text, &tlen);

		REQUIRE(out);
		REQUIRE(conf.ndev >= 0 && conf.ndev <= SR_MAX_DEVICES);
		for (int i = 0; i < conf.ndev; i++) {
			int mtu = conf.dev[i].mtu;

			REQUIRE(sr_conf_valid_name(conf.dev[i].name));
			REQUIRE(mtu == 0 || sr_mtu_bytes_to_enum(mtu));
			REQUIRE(conf.dev[i].loopback >= -1 && conf.dev[i].loopback <= 1);
		}
		check_mtus(&conf, (const char *)x, size);
		REQUIRE(sr_conf_write(&conf, out) == 0);
		REQUIRE(fclose(out) == 0);
		REQUIRE(parse(&back, text, tlen) == 0);
		same(&conf, &back);
		free(text);
	}
	free(x);
	return 0;
}
