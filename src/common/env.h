/* Numeric tunables from the environment. */
#ifndef SR_COMMON_ENV_H
#define SR_COMMON_ENV_H

/* The whole number in environment variable name, from 0 to max; dflt
 * when it is unset or empty.  Anything else (not a number, negative,
 * beyond max) is reported on stderr, naming unit ("milliseconds"), and
 * gives dflt. */
long sr_env_range(const char *name, long dflt, long max, const char *unit);

#endif
