/* Per-process traffic counters that `softrdma-cfg statistic` reads from
 * outside, as `rdma statistic` reads a kernel device's.
 *
 * Each process using softrdma maps one small file, <runtime dir>/<pid>.stats
 * (runtime dir: $SOFTRDMA_RUNTIME_DIR, else /dev/shm/softrdma-<uid>, a
 * tmpfs), shared: a header naming the process and its network namespace,
 * one row per device, one slot per QP.  The library increments a QP's
 * slot with relaxed atomic adds (a few per sendmsg or received datagram);
 * readers copy the file and sum.  A device's counters are its row (what
 * destroyed QPs left and traffic no QP owns) plus its live QP slots, plus,
 * once processes have exited, the per-namespace totals file their rows were
 * folded into (by the process at exit, or by the next reader that finds it
 * dead), so a device's counters only grow, as a NIC's do.
 *
 * Counter names follow the kernel rxe's hw counters where one exists. */
#ifndef SR_COMMON_STATS_H
#define SR_COMMON_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/conf.h"

enum sr_stat {
	SR_STAT_SENT_PKTS,  /* RoCE packets / iWARP FPDUs sent */
	SR_STAT_RCVD_PKTS,  /* ... received for a QP */
	SR_STAT_SENT_BYTES, /* UDP payload / FPDU bytes sent */
	SR_STAT_RCVD_BYTES,
	SR_STAT_RETRANSMITS,  /* requester went back and resent (NAK, timeout, RNR wait) */
	SR_STAT_OUT_OF_SEQ,   /* PSN sequence NAKs sent (rxe out_of_seq_request) */
	SR_STAT_RCVD_SEQ_ERR, /* PSN sequence NAKs received (rxe rcvd_seq_err) */
	SR_STAT_SEND_RNR,     /* RNR NAKs sent (rxe send_rnr_err) */
	SR_STAT_RCVD_RNR,     /* RNR NAKs received (rxe rcvd_rnr_err) */
	SR_STAT_CRC_ERR,      /* dropped: bad ICRC / MPA CRC */
	/* injected by SOFTRDMA_FAULTS (core/fault_plan.c), in enum sr_fault_kind order */
	SR_STAT_FAULT_DROP,
	SR_STAT_FAULT_DUP,
	SR_STAT_FAULT_REORDER,
	SR_STAT_FAULT_CORRUPT,
	SR_STAT_FAULT_RESET,
	SR_STAT_FAULT_TRUNCATE,
	SR_STAT_N
};

extern const char *const sr_stat_names[SR_STAT_N];

struct sr_stat_ctrs {
	uint64_t v[SR_STAT_N];
};

#define SR_STATS_MAGIC 0x54535253u /* "SRST" */
#define SR_STATS_VERSION 2	   /* 2: the fault_* counters */
#define SR_STATS_QP_SLOTS 16384	   /* per process; further QPs count at destroy */

struct sr_stats_dev {
	char name[SR_DEVNAME_MAX]; /* "" = unused row */
	uint32_t type;		   /* enum sr_dev_type */
	uint32_t pad;
	struct sr_stat_ctrs c;
};

struct sr_stats_qp {
	uint32_t in_use; /* 0 free, 1 live */
	uint32_t qpn;
	uint16_t dev;	 /* row in sr_stats_file.dev */
	uint8_t qp_type; /* enum ibv_qp_type */
	uint8_t pad[5];
	struct sr_stat_ctrs c;
};

struct sr_stats_file {
	uint32_t magic, version;
	int32_t pid;
	uint32_t nslots;
	uint64_t start_time; /* /proc/PID/stat field 22: tells a reused pid */
	uint64_t netns;	     /* inode of /proc/self/ns/net */
	char comm[16];
	/* odd while a slot or row changes shape (allocation, fold at
	 * destroy): readers retry their copy */
	uint32_t seq;
	uint32_t hiwater; /* slots [0, hiwater) have been used */
	struct sr_stats_dev dev[SR_MAX_DEVICES];
	struct sr_stats_qp qp[]; /* nslots */
};

/* Counter block of a QP: where its hot paths add. */
/* -DSR_STATS_OFF compiles the adds out: only to measure what they cost. */
static inline void sr_stat_add(struct sr_stat_ctrs *c, enum sr_stat s, uint64_t n)
{
#ifndef SR_STATS_OFF
	__atomic_fetch_add(&c->v[s], n, __ATOMIC_RELAXED);
#else
#endif
}

/* The runtime directory (created 0700 if missing when create). 0 or -errno. */
int sr_stats_dir(char *buf, size_t len, bool create);

/* Inode of this process's network namespace (0 if unknown). */
uint64_t sr_stats_netns(void);
/* Start time of a process (clock ticks since boot), 0 if it is gone. */
uint64_t sr_stats_start_time(pid_t pid);

/* ---- writer (the library) ---- */

/* Counters that go nowhere: a QP's before it has a slot and after. */
extern struct sr_stat_ctrs sr_stats_sink;

/* A slot for a new QP on device dev (name, type); NULL (count nowhere
 * visible) if stats are unavailable.  *slot receives the handle. */
struct sr_stat_ctrs *sr_stats_qp_open(const char *dev, enum sr_dev_type type, uint32_t qpn, int qp_type, int *slot);
/* The QP is destroyed: its counters join its device's row. */
void sr_stats_qp_close(int slot, struct sr_stat_ctrs *c);
/* Counters of traffic that no QP owns on device dev. */
struct sr_stat_ctrs *sr_stats_dev_ctrs(const char *dev, enum sr_dev_type type);

/* ---- reader (softrdma-cfg) ---- */

struct sr_stats_snap_qp {
	char dev[SR_DEVNAME_MAX];
	uint32_t dev_type;
	uint32_t qpn;
	int qp_type;
	pid_t pid;
	char comm[16];
	struct sr_stat_ctrs c;
};

struct sr_stats_snap_dev {
	char name[SR_DEVNAME_MAX];
	uint32_t type;
	struct sr_stat_ctrs c;
};

struct sr_stats_snap {
	int ndev;
	struct sr_stats_snap_dev dev[4 * SR_MAX_DEVICES];
	int nqp, qp_cap;
	struct sr_stats_snap_qp *qp;
	int nproc; /* live processes seen */
};

/* Everything in this network namespace: live processes' files, and the
 * totals of exited ones (files of dead processes are folded in and removed
 * on the way).  0 or -errno; free with sr_stats_snap_free. */
int sr_stats_snapshot(struct sr_stats_snap *s);
void sr_stats_snap_free(struct sr_stats_snap *s);

#endif
