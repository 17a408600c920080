/* softrdma core objects: devices, contexts, PDs, MRs, CQs, SRQs, QPs, AHs.
 *
 * core/ knows nothing of packets: the transport (roce/) is reached through
 * struct sr_transport_ops.  Every lock says what it protects; lock order is
 * qp->lock -> srq->lock -> cq->lock, and ctx->mr_lock (read) may be taken
 * inside any of them.  ctx->lock is never held while taking a qp->lock.
 *
 * The umbrella of core/'s headers, one role each:
 *   limits.h       the device's limits
 *   obj_context.h  devices, contexts, imported contexts
 *   obj_memory.h   PDs, parent and thread domains, MRs, DM, MWs
 *   obj_queue.h    CQs, SRQs, XRC domains, AHs, QPs and their rings
 *   transport.h    what core/ asks of roce/ and iwarp/
 *   place.h        placing data in application memory
 *   util.h         clock, per-thread buffers, log
 *   loc.h          the functions core/ files share, by file
 *   progress.h     the progress engine */
#ifndef SR_CORE_SR_H
#define SR_CORE_SR_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>
#include "common/conf.h"
#include "common/stats.h"
#include "common/tsan.h"
#include "core/handle.h"
#include "core/progress.h"
#include "core/limits.h"
#include "core/util.h"
#include "core/obj_context.h"
#include "core/obj_memory.h"
#include "core/obj_queue.h"
#include "core/transport.h"
#include "core/place.h"
#include "core/loc.h"

#endif
