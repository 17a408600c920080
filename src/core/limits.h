/* The limits of a softrdma device, as ibv_query_device reports them
 * (rxe_param.h's role). */
#ifndef SR_CORE_LIMITS_H
#define SR_CORE_LIMITS_H

#define SR_VENDOR_ID 0xffffff /* as rxe */
#define SR_MAX_QP 0x10000
#define SR_MAX_QP_WR 0x4000
#define SR_MAX_SGE 32
#define SR_MAX_INLINE 512 /* as rxe: SR_MAX_SGE SGEs' worth (older rxe: 400) */
#define SR_MAX_CQ 0x4000
/* max_cqe is 1M - 1, beyond rxe's 32767: libfabric's verbs;ofi_rxm asks
 * for rx + tx * universe (128 + 128 * 256) entries.  A CQ's ring is
 * calloc'ed, so the kernel commits its pages only as completions reach
 * them: 48 MiB at most for the largest CQ, 3 MiB for rxm's. */
#define SR_MAX_CQE 0x100000
/* The key table's slots (slot 0 unused): MRs and MWs share them, so the
 * device's max_mr is what its windows' max_mw leaves (handle.c). */
#define SR_KEY_SLOTS 0x40000
#define SR_MAX_MW 0x10000
#define SR_KEY_RETIRED 256 /* a deregistered key's tag is not handed out again for this many more */
#define SR_MAX_PD 0x10000
#define SR_MAX_SRQ 0x4000
#define SR_MAX_SRQ_WR 0x4000
#define SR_MAX_AH 0x10000
#define SR_MAX_RD_ATOMIC 128
#define SR_MAX_MR_SIZE (1ull << 40)
#define SR_MAX_MCAST_GRP 64
#define SR_MAX_MCAST_QP_ATTACH 64
#define SR_MAX_PKEYS 1
#define SR_MAX_MSG_SIZE 0x80000000u /* 2 GiB, as rxe */
#define SR_MAX_DM_SIZE 0x40000	    /* device memory of a device, as a ConnectX-6's MEMIC */
#define SR_MAX_DM_LOG_ALIGN 12

#endif
