/* Fault injection specifications (common/fault_spec.c): what
 * SOFTRDMA_FAULTS, softrdma.conf's "faults =" and softrdma-cfg accept,
 * what they refuse and why, and the canonical text written back. */
#include "common/fault_spec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ut.h"

static void good(const char *text, const char *canon)
{
	struct sr_fault_spec s;
	char err[256], out[SR_FAULT_SPEC_MAX];
	int rc = sr_fault_spec_parse(text, &s, err, sizeof(err));

	CHECK(rc == 0, "'%s' accepted (%s)", text, err);
	sr_fault_spec_format(&s, out, sizeof(out));
	CHECK(!strcmp(out, canon), "'%s' -> '%s', want '%s'", text, out, canon);
	/* the canonical text reads back the same */
	if (!rc) {
		struct sr_fault_spec t;

		CHECK(sr_fault_spec_parse(out, &t, err, sizeof(err)) == 0 &&
			      (s.any ? !memcmp(&s, &t, sizeof(s)) : !t.any),
		      "'%s' round-trips", out);
	}
}

static void bad(const char *text, const char *why)
{
	struct sr_fault_spec s;
	char err[256];
	int rc = sr_fault_spec_parse(text, &s, err, sizeof(err));

	CHECK(rc == -EINVAL, "'%s' refused (rc %d)", text, rc);
	CHECK(strstr(err, why), "'%s': message '%s' says '%s'", text, err, why);
	CHECK(!s.any, "'%s': nothing half-parsed left on", text);
}

int main(void)
{
	struct sr_fault_spec s;
	char err[64];

	good("drop=5%,dup=1%,reorder=2%,corrupt=0.5%,seed=42", "drop=5%,dup=1%,reorder=2%,corrupt=0.5%,seed=42");
	good("drop=5", "drop=5%,seed=0");
	good(" drop=5%  corrupt=0.0001%\t", "drop=5%,corrupt=0.0001%,seed=0");
	good("duplicate=3%,seed=0x10", "dup=3%,seed=16");
	good("reset=0.1%,truncate=0.25%,rto=50ms", "reset=0.1%,truncate=0.25%,seed=0,rto=50ms");
	good("drop=1%,rto=200", "drop=1%,seed=0");
	good("drop=100%", "drop=100%,seed=0");
	good("drop=60%,corrupt=40%", "drop=60%,corrupt=40%,seed=0");
	good("seed=random,drop=.5%", "drop=0.5%,seed=random");
	good("", "off");
	good("off", "off");
	good("none", "off");
	good("drop=0%,seed=9", "off");
	/* delay and jitter: ms by default, us, s; whole microseconds */
	good("delay=10", "seed=0,delay=10ms");
	good("delay=0.5ms,jitter=100us", "seed=0,delay=500us,jitter=100us");
	good("delay=2ms jitter=2ms drop=1% seed=3", "drop=1%,seed=3,delay=2ms,jitter=2ms");
	good("delay=1s", "seed=0,delay=1000ms");
	good("delay=0.000001s", "seed=0,delay=1us");
	good("delay=10000ms", "seed=0,delay=10000ms");
	good("delay=0,jitter=0", "off");
	good("delay=7us,rto=50", "seed=0,rto=50ms,delay=7us");
	{
		struct sr_fault_spec d;

		CHECK(sr_fault_spec_parse("delay=1.5ms,jitter=250us", &d, NULL, 0) == 0 && d.delay_ns == 1500000 &&
			      d.jitter_ns == 250000 && d.any,
		      "delay=1.5ms,jitter=250us: 1500000 and 250000 ns, faults on");
	}

	bad("drop", "expected KEY=VALUE");
	bad("drop=5x", "expected a percentage");
	bad("drop=-1%", "expected a percentage");
	bad("drop=101%", "more than 100%");
	bad("drop=100.0001%", "more than 100%");
	bad("drop=0.00001%", "at most four decimals");
	bad("drop=%", "expected a percentage");
	bad("loss=5%", "unknown key 'loss'");
	bad("drop=1%,drop=2%", "'drop' given twice");
	bad("dup=1%,duplicate=2%", "'dup' given twice");
	bad("seed=abc", "expected a number");
	bad("seed=-3", "expected a number");
	bad("rto=0", "from 1 to 60000");
	bad("rto=60001ms", "from 1 to 60000");
	bad("drop=60%,corrupt=50%", "add up to 110%");
	bad("drop=33.3333%,dup=33.3333%,reorder=33.3335%", "add up to 100.0001%");
	bad("delay=fast", "expected a time");
	bad("delay=5h", "expected a time");
	bad("delay=-1ms", "expected a time");
	bad("delay=10001ms", "more than 10 s");
	bad("delay=11s", "more than 10 s");
	bad("delay=99999999999999999999", "more than 10 s");
	bad("delay=0.5us", "finer than a microsecond");
	bad("delay=1.0000001ms", "finer than a microsecond");
	bad("jitter=1ms", "jitter=1ms is more than delay=0ms");
	bad("delay=1ms,jitter=1.5ms", "jitter=1500us is more than delay=1ms");
	bad("delay=1ms,delay=2ms", "'delay' given twice");

	/* a short error buffer is cut, never overrun */
	CHECK(sr_fault_spec_parse("unknownkey=1", &s, err, sizeof(err)) == -EINVAL && strlen(err) < sizeof(err),
	      "short error buffer");
	CHECK(sr_fault_spec_parse(NULL, &s, NULL, 0) == 0 && !s.any, "NULL is no faults");
	{
		char huge[2048];

		memset(huge, 'a', sizeof(huge) - 1);
		huge[sizeof(huge) - 1] = 0;
		CHECK(sr_fault_spec_parse(huge, &s, err, sizeof(err)) == -EINVAL, "2047 characters refused");
	}
	return ut_end("test_fault_spec");
}
