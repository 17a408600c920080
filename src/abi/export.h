/* Symbols of libibverbs.so.1 are hidden unless marked; the version script
 * (libibverbs.map) assigns each exported one its rdma-core version node. */
#ifndef SR_ABI_EXPORT_H
#define SR_ABI_EXPORT_H
#define SR_EXPORT __attribute__((visibility("default")))
#endif
