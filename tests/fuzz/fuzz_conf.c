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
 *  - written back and parsed again, it is the same configuration. */
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
		REQUIRE(sr_conf_write(&conf, out) == 0);
		REQUIRE(fclose(out) == 0);
		REQUIRE(parse(&back, text, tlen) == 0);
		same(&conf, &back);
		free(text);
	}
	free(x);
	return 0;
}
