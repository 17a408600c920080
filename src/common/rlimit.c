#include "common/rlimit.h"

rlim_t sr_raise_nofile(rlim_t want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 0;
	if (rl.rlim_cur >= want)
		return rl.rlim_cur;
	struct rlimit up = { .rlim_cur = want, .rlim_max = rl.rlim_max < want ? want : rl.rlim_max };
	if (setrlimit(RLIMIT_NOFILE, &up) == 0)
		return want;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			return getrlimit(RLIMIT_NOFILE, &rl) ? 0 : rl.rlim_cur;
	}
	return rl.rlim_cur;
}
