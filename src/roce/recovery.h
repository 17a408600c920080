/* Loss recovery of an RC requester, in the manner of TCP's (RFC 6298,
 * RFC 8985): a round-trip estimate per QP, a retransmission timeout from
 * it, a tail-loss probe, one window decrease per loss episode.  The QP's
 * own timeout stays the upper bound, and retry_cnt is consumed as IBTA
 * 9.7.6.1.3 says: once per local ACK timeout without progress and once per
 * NAK sequence episode, never by the earlier retransmissions (a responder
 * must take duplicates, so retransmitting early is legal on the wire).
 * Those earlier ones are probes: the retransmits statistic counts retries. */
#ifndef SR_ROCE_RECOVERY_H
#define SR_ROCE_RECOVERY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/limits.h"

#define SR_RTO_MIN_NS 4000000ull /* below: a descheduled peer is not a lost packet (as rxe's jiffy timers) */
#define SR_PTO_MIN_NS 1000000ull /* beyond what a peer holds an ACK (resp.c), or parks a request */

struct sr_roce_rec {
	uint64_t srtt, rttvar; /* ns; srtt 0 until the first sample */
	uint64_t rtt_min;      /* ns, the least sample; 0 until the first */
	uint64_t rto_ns;       /* when the last timeout resent, 0: progress since */
	uint32_t sample_psn;   /* the PSN being timed (an AckReq packet, sent once) */
	uint64_t sample_ns;
	bool sample_on;
	uint32_t snd_max;  /* one past the highest PSN sent: below it is a retransmission */
	uint32_t backoff;  /* timeouts since the last progress */
	uint64_t epoch_ns; /* last progress: the QP's timeout counts from here */
	bool tlp_sent;	   /* this silence's tail-loss probe is out */
	bool force_ackreq; /* the next packet sent asks for an ACK */
	bool in_recovery;  /* the window was decreased for the loss before recover_psn */
	uint32_t recover_psn;
	uint64_t hold_ns; /* since when a QP timeout waits for unread input (0: none) */
	uint64_t stat_tlp, stat_rto;
	/* last PSNs of the READ requests sent and not yet answered, oldest
	 * first: a request sent again ends within the one it repeats */
	uint32_t rd_end[SR_MAX_RD_ATOMIC];
	uint32_t rd_head, rd_count;
};

/* The send queue starts at psn (modify to RTS, or RESET). */
void sr_rec_init(struct sr_roce_rec *c, uint32_t psn);
/* Packets [psn, psn + n) leave; ackreq: this one asks for an ACK. */
void sr_rec_sent(struct sr_roce_rec *c, uint32_t psn, uint32_t n, bool ackreq);
/* The requester goes back to psn: what is timed from there on is resent. */
void sr_rec_go_back(struct sr_roce_rec *c, uint32_t psn);
/* Everything before una is acknowledged (una moved): a sample if it
 * covers the timed PSN, the backoff and probe start again.  True if this
 * is the first progress since a timeout (sr_rec_timeout) and came sooner
 * than the least round trip after it: it answers what was sent before the
 * timeout, which was spurious (Eifel, RFC 3522, timed instead of stamped). */
bool sr_rec_progress(struct sr_roce_rec *c, uint32_t una, uint64_t now);
/* A retransmission timeout resends at now. */
void sr_rec_timeout(struct sr_roce_rec *c, uint64_t now);
/* How long the retransmission timer runs now, qp_to the QP's timeout
 * (ns, nonzero): until the tail-loss probe if one may go (probe_ok), else
 * until the timeout (srtt + max(4 rttvar, srtt), at least SR_RTO_MIN_NS);
 * backed off, at most qp_to. */
uint64_t sr_rec_wait(const struct sr_roce_rec *c, uint64_t qp_to, bool probe_ok);
/* The QP's timeout has run out at now without progress; input_waiting:
 * the process has input it has not read yet (a busy host), which may hold
 * the awaited answer.  True: hold the retry back and look again soon, for
 * at most one more QP timeout (qp_to), so that a dead peer is still found
 * while other QPs' input keeps coming. */
bool sr_rec_hold_expiry(struct sr_roce_rec *c, uint64_t now, uint64_t qp_to, bool input_waiting);
/* A READ request for the response PSNs [psn, psn + n) leaves. */
void sr_rec_read_sent(struct sr_roce_rec *c, uint32_t psn, uint32_t n);
/* How many of n response PSNs from psn a READ request may ask for: a
 * request sent again ends where the one it repeats ended, since a
 * responder (kernel rxe) serves a repeated READ only within the READ it
 * served. */
uint32_t sr_rec_read_room(const struct sr_roce_rec *c, uint32_t psn, uint32_t n);
/* How many of the rest response PSNs from psn the next READ request asks
 * for, room of the window cwnd free; 0: wait for the window.  A request
 * asked again takes the rest of the one it repeats, whatever the window:
 * kernel rxe (6.1) moves a READ's start to that of each repeat it serves
 * and drops a later repeat that starts before it, so the pieces of a
 * repeat, pipelined, would leave a lost one unanswerable. */
uint32_t sr_rec_read_piece(const struct sr_roce_rec *c, uint32_t psn, uint32_t rest, uint32_t room, uint32_t cwnd);
/* A loss is detected with next_psn the next new PSN: true if the window
 * decreases for it (once per window of data). */
bool sr_rec_loss(struct sr_roce_rec *c, uint32_t una, uint32_t next_psn);

#endif
