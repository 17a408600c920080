/* Filling a new context's ibv_context_ops and verbs_context function
 * pointers, through which verbs.h's inline functions reach softrdma. */
#ifndef SR_ABI_OPS_H
#define SR_ABI_OPS_H
struct verbs_context;
void sr_fill_ops(struct verbs_context *v);
#endif
