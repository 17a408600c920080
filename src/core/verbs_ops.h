/* The verbs a context offers through its function pointers (the ones
 * verbs.h's inline functions call): a const table that abi/verbs_api.c
 * defines and sr_ctx_init_verbs (device.c) copies into every context.
 * Declared here so that core/ never includes abi/. */
#ifndef SR_CORE_VERBS_OPS_H
#define SR_CORE_VERBS_OPS_H

#include <infiniband/verbs.h>

extern const struct verbs_context sr_verbs_ops;

#endif
