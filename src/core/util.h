/* What every file of core/ and the transports uses: the clock, per-thread
 * scratch buffers, the debug log (device.c), container_of. */
#ifndef SR_CORE_UTIL_H
#define SR_CORE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define SR_CONTAINER(ptr, type, member) ((type *)((char *)(ptr) - __builtin_offsetof(type, member)))

uint64_t sr_now_ns(void);
/* The device clock that completion timestamps and ibv_query_rt_values_ex
 * read: CLOCK_MONOTONIC in ns, a 1 GHz core clock (hca_core_clock is in
 * kHz); the mask is mlx5's, 63 bits (292 years before it wraps). */
#define sr_dev_clock_ns() sr_now_ns()
#define SR_HCA_CORE_CLOCK_KHZ 1000000ull
#define SR_TIMESTAMP_MASK 0x7fffffffffffffffull

/* Per-thread scratch buffers (receive staging, send batches) that are freed
 * when the thread exits.  Returns NULL when out of memory. */
enum sr_tls_slot {
	SR_TLS_RX,
	SR_TLS_TX_BATCH,
	SR_TLS_RESP_BATCH,
	SR_TLS_NSLOTS
};
/* This thread's buffer for slot (size bytes, the same at every call for a
 * slot; not zeroed: a user keeps state in it only after setting it), or
 * NULL without memory. */
void *sr_tls_buf(enum sr_tls_slot slot, size_t size);
void sr_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern int sr_debug;
#define SR_DBG(...)                          \
	do {                                 \
		if (sr_debug)                \
			sr_log(__VA_ARGS__); \
	} while (0)

#endif
