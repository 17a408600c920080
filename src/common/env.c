/* Numeric tunables from the environment: see env.h. */
#include <stdio.h>
#include <stdlib.h>

#include "common/env.h"

long sr_env_range(const char *name, long dflt, long max, const char *unit)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return dflt;
	v = strtol(s, &end, 10);
	if (*end || v < 0 || v > max) {
		fprintf(stderr, "softrdma: %s=%s: expected %s 0..%ld; using %ld\n", name, s, unit, max, dflt);
		return dflt;
	}
	return v;
}
