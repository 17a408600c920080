/* Fault injection specifications: parsing and printing (fault_spec.h). */
#include "common/fault_spec.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const sr_fault_kind_names[SR_FAULT_NKINDS] = {
	[SR_FAULT_DROP] = "drop",	[SR_FAULT_DUP] = "dup",	    [SR_FAULT_REORDER] = "reorder",
	[SR_FAULT_CORRUPT] = "corrupt", [SR_FAULT_RESET] = "reset", [SR_FAULT_TRUNCATE] = "truncate",
};

static int bad(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int bad(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (err && len) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* "5", "5%", "0.25%", "100%": millionths of the whole, exact to four
 * decimals of a percent. */
static int parse_percent(const char *v, uint32_t *out)
{
	uint64_t whole = 0, frac = 0;
	int ndig = 0, nfrac = 0;
	const char *p = v;

	for (; isdigit((unsigned char)*p); p++, ndig++) {
		whole = whole * 10 + (uint64_t)(*p - '0');
		if (whole > 100)
			return -ERANGE;
	}
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++, nfrac++) {
			if (nfrac >= 4)
				return -EINVAL;
			frac = frac * 10 + (uint64_t)(*p - '0');
		}
	}
	if (!ndig && !nfrac)
		return -EINVAL;
	if (*p == '%')
		p++;
	if (*p)
		return -EINVAL;
	for (; nfrac < 4; nfrac++)
		frac *= 10;
	whole = whole * 10000 + frac;
	if (whole > SR_FAULT_SCALE)
		return -ERANGE;
	*out = (uint32_t)whole;
	return 0;
}

static int parse_u64(const char *v, uint64_t *out)
{
	char *end;

	if (!isdigit((unsigned char)v[0]))
		return -EINVAL;
	errno = 0;
	*out = strtoull(v, &end, 0);
	return errno || *end ? -EINVAL : 0;
}

/* "2ms", "0.5ms", "100us", "1s", "3" (milliseconds): nanoseconds, a
 * whole number of microseconds, at most SR_FAULT_DELAY_MAX_NS. */
static int parse_time(const char *v, uint64_t *out)
{
	uint64_t whole = 0, frac = 0, scale = 1, mult = 1000000;
	int ndig = 0, nfrac = 0;
	const char *p = v;

	for (; isdigit((unsigned char)*p); p++, ndig++) {
		whole = whole * 10 + (uint64_t)(*p - '0');
		if (whole > SR_FAULT_DELAY_MAX_NS)
			return -ERANGE;
	}
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++, nfrac++) {
			if (nfrac >= 9)
				return -EINVAL;
			frac = frac * 10 + (uint64_t)(*p - '0');
			scale *= 10;
		}
	}
	if (!ndig && !nfrac)
		return -EINVAL;
	if (!strcmp(p, "us"))
		mult = 1000;
	else if (!strcmp(p, "s"))
		mult = 1000000000;
	else if (*p && strcmp(p, "ms"))
		return -EINVAL;
	if (whole > SR_FAULT_DELAY_MAX_NS / mult)
		return -ERANGE;
	whole = whole * mult + frac * mult / scale;
	if ((frac * mult) % scale || whole % 1000)
		return -EDOM; /* finer than a microsecond */
	if (whole > SR_FAULT_DELAY_MAX_NS)
		return -ERANGE;
	*out = whole;
	return 0;
}

static int parse_item(char *item, struct sr_fault_spec *s, unsigned *seen, char *err, size_t errlen)
{
	char *eq = strchr(item, '=');
	const char *key, *val;
	int k;

	if (!eq)
		return bad(err, errlen, "'%s': expected KEY=VALUE (e.g. drop=5%%)", item);
	*eq = 0;
	key = item;
	val = eq + 1;
	if (!strcmp(key, "duplicate"))
		key = "dup";
	for (k = 0; k < SR_FAULT_NKINDS; k++)
		if (!strcmp(key, sr_fault_kind_names[k]))
			break;
	if (k < SR_FAULT_NKINDS) {
		int r = parse_percent(val, &s->rate[k]);

		if (r == -ERANGE)
			return bad(err, errlen, "%s=%s: more than 100%%", key, val);
		if (r)
			return bad(
				err, errlen,
				"%s=%s: expected a percentage from 0 to 100 (e.g. 5%% or 0.25%%, at most four decimals)",
				key, val);
	} else if (!strcmp(key, "seed")) {
		k = SR_FAULT_NKINDS;
		if (!strcmp(val, "random"))
			s->seed_random = true;
		else if (parse_u64(val, &s->seed))
			return bad(err, errlen, "seed=%s: expected a number (decimal or 0x hex) or 'random'", val);
	} else if (!strcmp(key, "rto")) {
		uint64_t ms;
		char num[32];
		size_t n = strlen(val);

		k = SR_FAULT_NKINDS + 1;
		if (n > 2 && !strcmp(val + n - 2, "ms"))
			n -= 2;
		if (n >= sizeof(num))
			n = sizeof(num) - 1;
		memcpy(num, val, n);
		num[n] = 0;
		if (parse_u64(num, &ms) || ms < 1 || ms > 60000)
			return bad(err, errlen, "rto=%s: expected milliseconds from 1 to 60000 (e.g. rto=200ms)", val);
		s->rto_ms = (uint32_t)ms;
	} else if (!strcmp(key, "delay") || !strcmp(key, "jitter")) {
		bool delay = key[0] == 'd';
		int r = parse_time(val, delay ? &s->delay_ns : &s->jitter_ns);

		k = SR_FAULT_NKINDS + (delay ? 2 : 3);
		if (r == -ERANGE)
			return bad(err, errlen, "%s=%s: more than 10 s", key, val);
		if (r == -EDOM)
			return bad(err, errlen, "%s=%s: finer than a microsecond", key, val);
		if (r)
			return bad(err, errlen, "%s=%s: expected a time (e.g. 2ms, 0.5ms, 100us; a bare number is ms)",
				   key, val);
	} else {
		return bad(err, errlen,
			   "unknown key '%s' (drop, dup, reorder, corrupt, reset, truncate, seed, rto, delay, jitter)",
			   key);
	}
	if (*seen & (1u << k))
		return bad(err, errlen, "'%s' given twice", key);
	*seen |= 1u << k;
	return 0;
}

/* A time as parse_time reads it back: whole milliseconds, else microseconds. */
static void put_time(char *buf, size_t len, uint64_t ns)
{
	if (ns % 1000000 == 0)
		snprintf(buf, len, "%" PRIu64 "ms", ns / 1000000);
	else
		snprintf(buf, len, "%" PRIu64 "us", ns / 1000);
}

static void put_percent(char *buf, size_t len, uint64_t r)
{
	uint64_t w = r / 10000, f = r % 10000;
	int d = 4;

	if (!f) {
		snprintf(buf, len, "%" PRIu64 "%%", w);
		return;
	}
	while (f % 10 == 0) {
		f /= 10;
		d--;
	}
	snprintf(buf, len, "%" PRIu64 ".%0*" PRIu64 "%%", w, d, f);
}

int sr_fault_spec_parse(const char *text, struct sr_fault_spec *out, char *err, size_t errlen)
{
	char buf[1024], *p, *save = NULL;
	unsigned seen = 0;
	uint64_t sum = 0;
	size_t n;

	memset(out, 0, sizeof(*out));
	out->rto_ms = SR_FAULT_RTO_DEFAULT_MS;
	if (err && errlen)
		err[0] = 0;
	if (!text)
		return 0;
	n = strlen(text);
	if (n >= sizeof(buf))
		return bad(err, errlen, "too long (%zu characters, at most %zu)", n, sizeof(buf) - 1);
	memcpy(buf, text, n + 1);
	p = buf;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p || !strcmp(p, "off") || !strcmp(p, "none") || !strcmp(p, "0"))
		return 0;
	for (char *item = strtok_r(p, ", \t", &save); item; item = strtok_r(NULL, ", \t", &save)) {
		int r = parse_item(item, out, &seen, err, errlen);

		if (r) {
			memset(out, 0, sizeof(*out));
			return r;
		}
	}
	for (int k = 0; k < SR_FAULT_NKINDS; k++)
		sum += out->rate[k];
	if (sum > SR_FAULT_SCALE) {
		char pct[24];

		memset(out, 0, sizeof(*out));
		put_percent(pct, sizeof(pct), sum);
		return bad(err, errlen, "the rates add up to %s: at most 100%% of the traffic can be faulted", pct);
	}
	if (out->jitter_ns > out->delay_ns) {
		char j[24], d[24];

		put_time(j, sizeof(j), out->jitter_ns);
		put_time(d, sizeof(d), out->delay_ns);
		memset(out, 0, sizeof(*out));
		return bad(err, errlen, "jitter=%s is more than delay=%s: a unit cannot leave before it is sent", j, d);
	}
	out->any = sum > 0 || out->delay_ns > 0;
	return 0;
}

void sr_fault_spec_format(const struct sr_fault_spec *s, char *buf, size_t len)
{
	size_t off = 0;
	char pct[24];

	if (!len)
		return;
	buf[0] = 0;
	if (!s->any) {
		snprintf(buf, len, "off");
		return;
	}
	for (int k = 0; k < SR_FAULT_NKINDS; k++) {
		if (!s->rate[k])
			continue;
		put_percent(pct, sizeof(pct), s->rate[k]);
		off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "%s%s=%s", off ? "," : "",
					sr_fault_kind_names[k], pct);
	}
	if (s->seed_random)
		off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "%sseed=random", off ? "," : "");
	else
		off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "%sseed=%" PRIu64, off ? "," : "",
					s->seed);
	if (s->rto_ms != SR_FAULT_RTO_DEFAULT_MS)
		off += (size_t)snprintf(buf + off, off < len ? len - off : 0, ",rto=%ums", s->rto_ms);
	if (s->delay_ns) {
		char t[24];

		put_time(t, sizeof(t), s->delay_ns);
		off += (size_t)snprintf(buf + off, off < len ? len - off : 0, ",delay=%s", t);
		if (s->jitter_ns) {
			put_time(t, sizeof(t), s->jitter_ns);
			snprintf(buf + off, off < len ? len - off : 0, ",jitter=%s", t);
		}
	}
}
