/* The open-file limit: softrdma keeps a socket per connected QP, so a
 * process with thousands of QPs (softrdmad, softrdma-qpmem, test_scale)
 * needs more descriptors than the usual soft limit of 1024. */
#ifndef SR_COMMON_RLIMIT_H
#define SR_COMMON_RLIMIT_H

#include <sys/resource.h>

/* Raises RLIMIT_NOFILE's soft limit to want (and the hard limit with it
 * when the process may, as root may), else as far as the hard limit
 * allows.  Never lowers it.  Returns the soft limit now in force (0 if it
 * cannot be read). */
rlim_t sr_raise_nofile(rlim_t want);

#endif
