/* Fault injection on the RoCE send path (core/fault.h): each datagram of
 * a batch gets a fate; the runs of datagrams that pass still leave in one
 * GSO sendmsg each, so that what the faults cost is what they do, not
 * extra system calls.
 *
 *   drop     the datagram is not sent.
 *   dup      it is sent twice in a row.
 *   reorder  it is held back and sent after the QP's next datagram (or
 *            100 us later if the QP sends nothing more).
 *   corrupt  a copy with one bit flipped, anywhere in the UDP payload
 *            (headers, payload, ICRC), is sent instead: the receiver's
 *            ICRC check must catch it (with CRC off, nothing does).
 *
 *   delay    (every datagram, after the fates above) it waits in the QP's
 *            delay line (core/delay_line.h) for delay +- jitter, and
 *            leaves in order: the run of datagrams one sendmsg took
 *            leaves as one again, from the progress thread's timer.
 *
 * All of this happens above UDP: the kernel's UDP checksum covers the
 * damaged datagram, as it would a datagram damaged by a faulty NIC. */
#include <string.h>

#include "roce/roce.h"
#include "core/fault.h"

/* How long a reordered datagram waits for a successor. */
#define SR_FAULT_HOLD_NS 100000ull

/* Packet i of the batch as one buffer, its ICRC that of a lone datagram
 * (IPv4 ID 0).  Returns its length, 0 if it does not fit. */
static uint32_t copy_pkt(struct sr_tx_batch *b, int i, uint8_t *buf)
{
	uint32_t len = 0;

	sr_tx_batch_icrc(b, i, 0);
	sr_dma_begin(); /* the payload is read from registered memory */
	for (int v = b->first_iov[i]; v < b->first_iov[i + 1]; v++) {
		if (len + b->iov[v].iov_len > SR_FAULT_BUF) {
			len = 0;
			break;
		}
		memcpy(buf + len, b->iov[v].iov_base, b->iov[v].iov_len);
		len += (uint32_t)b->iov[v].iov_len;
	}
	sr_dma_end();
	return len;
}

/* Packets [a, z) of the batch, as it would send them (a run, or the part
 * of one that [a, z) cuts, is one message), into the delay line. */
static int delay_runs(struct sr_tx_batch *b, int a, int z)
{
	struct sr_qp *qp = b->qp;
	struct sr_fault_qp *fq = qp->faults;
	uint64_t now = sr_now_ns();

	for (int g = 0; g < b->ngroups; g++) {
		int x = b->group_first[g] > a ? b->group_first[g] : a;
		int y = b->group_first[g + 1] < z ? b->group_first[g + 1] : z;
		uint32_t len = 0;
		bool first;

		if (x >= y)
			continue;
		for (int v = b->first_iov[x]; v < b->first_iov[y]; v++)
			len += (uint32_t)b->iov[v].iov_len;
		struct sr_delay_unit *u = sr_delay_push(&fq->delay, sr_fault_delay_due(qp, now), len, &first);
		if (!u) {
			/* the line is full: lost, as beyond netem's limit */
			sr_stat_add(qp->stats, SR_STAT_FAULT_DROP, (uint64_t)(y - x));
			continue;
		}
		/* the part's segment k is packet x + k: IPv4 ID k */
		if (x != b->group_first[g])
			for (int i = x; i < y; i++)
				sr_tx_batch_icrc(b, i, (uint16_t)(i - x));
		len = 0;
		sr_dma_begin(); /* the payload is read from registered memory */
		for (int v = b->first_iov[x]; v < b->first_iov[y]; v++) {
			memcpy(u->data + len, b->iov[v].iov_base, b->iov[v].iov_len);
			len += (uint32_t)b->iov[v].iov_len;
		}
		sr_dma_end();
		u->seg = y - x > 1 ? (uint16_t)b->group_seg[g] : 0;
		u->av = *b->av;
		if (first)
			sr_qp_timer_arm(qp, u->due);
	}
	return 0;
}

/* One datagram in a buffer of ours: now, or after the delay. */
static int tx_one(struct sr_qp *qp, const struct sr_av *av, uint8_t *buf, uint32_t len)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct sr_delay_unit *u;
	bool first;

	if (!sr_fault_delays(qp))
		return sr_roce_tx_one(qp, av, &iov, 1);
	u = sr_delay_push(&qp->faults->delay, sr_fault_delay_due(qp, sr_now_ns()), len, &first);
	if (!u) {
		sr_stat_add(qp->stats, SR_STAT_FAULT_DROP, 1);
		return 0;
	}
	memcpy(u->data, buf, len);
	u->av = *av;
	if (first)
		sr_qp_timer_arm(qp, u->due);
	return 0;
}

static bool state_sends(struct sr_qp *qp)
{
	enum ibv_qp_state st = qp->attr.qp_state;

	return st == IBV_QPS_RTR || st == IBV_QPS_RTS || st == IBV_QPS_SQD || st == IBV_QPS_SQE;
}

/* The held datagram goes out now (or is forgotten if the QP can no
 * longer send). */
static int release(struct sr_qp *qp)
{
	struct sr_fault_qp *fq = qp->faults;
	int err = 0;

	if (!fq->roce.held)
		return 0;
	fq->roce.held = false;
	fq->deadline = 0;
	if (state_sends(qp)) {
		err = tx_one(qp, &fq->roce.av, fq->buf, fq->roce.len);
		fq->sent_seq++;
	}
	return err;
}

/* Keep packet i back until something else of the QP has gone out. */
static int hold(struct sr_tx_batch *b, int i)
{
	struct sr_qp *qp = b->qp;
	struct sr_fault_qp *fq = qp->faults;
	int err = release(qp); /* one held at a time: the older goes first */
	uint8_t *buf = sr_fault_buf(fq);
	uint32_t len = buf ? copy_pkt(b, i, buf) : 0;

	if (!len)
		return err; /* no room to hold it: it is lost instead */
	fq->roce.held = true;
	fq->roce.len = len;
	fq->roce.av = *b->av;
	fq->roce.held_seq = fq->sent_seq;
	sr_fault_arm(qp, sr_now_ns() + SR_FAULT_HOLD_NS);
	return err;
}

static int send_corrupt(struct sr_tx_batch *b, int i, uint64_t aux)
{
	struct sr_fault_qp *fq = b->qp->faults;
	int err = release(b->qp); /* a held datagram shares the buffer: it goes first */
	uint8_t *buf = sr_fault_buf(fq);
	uint32_t len = buf ? copy_pkt(b, i, buf) : 0;
	int e;

	if (!len)
		return err;
	buf[(aux >> 3) % len] ^= (uint8_t)(1u << (aux & 7));
	fq->sent_seq++;
	e = tx_one(b->qp, b->av, buf, len);
	return e ? e : err;
}

static int send_run(struct sr_tx_batch *b, int a, int z)
{
	if (z <= a)
		return 0;
	b->qp->faults->sent_seq += (uint64_t)(z - a);
	if (sr_fault_delays(b->qp))
		return delay_runs(b, a, z);
	return sr_tx_batch_send(b, a, z);
}

int sr_roce_fault_flush(struct sr_tx_batch *b)
{
	struct sr_qp *qp = b->qp;
	struct sr_fault_qp *fq = qp->faults;
	int a = 0, err = 0, e = 0;

	for (int i = 0; i < b->npkts; i++) {
		uint64_t aux;
		enum sr_fault_kind k = sr_fault_decide(qp, SR_FAULT_ROCE_KINDS, &aux);

		if (k == SR_FAULT_PASS)
			continue;
		/* what passed before it goes first, as one run */
		if ((e = send_run(b, a, i)))
			err = e;
		a = i + 1;
		switch (k) {
		case SR_FAULT_DUP:
			if ((e = send_run(b, i, i + 1)) || (e = send_run(b, i, i + 1)))
				err = e;
			break;
		case SR_FAULT_REORDER:
			e = hold(b, i);
			break;
		case SR_FAULT_CORRUPT:
			e = send_corrupt(b, i, aux);
			break;
		default: /* SR_FAULT_DROP */
			e = 0;
			break;
		}
		if (e)
			err = e;
	}
	if ((e = send_run(b, a, b->npkts)))
		err = e;
	/* a held datagram that something has overtaken goes now */
	if (fq->roce.held && fq->sent_seq > fq->roce.held_seq && (e = release(qp)))
		err = e;
	sr_tx_batch_init(b, b->qp, b->av);
	return err;
}

/* What the delay line holds that is due at now (0: all of it) leaves. */
static void delay_release(struct sr_qp *qp, uint64_t now)
{
	struct sr_fault_qp *fq = qp->faults;
	struct sr_delay_unit *u;

	while ((u = sr_delay_due(&fq->delay, now))) {
		if (qp->attr.qp_state != IBV_QPS_RESET)
			sr_roce_tx_run(qp, &u->av, u->data, u->len, u->seg);
		sr_delay_pop(&fq->delay);
	}
}

void sr_roce_fault_timer(struct sr_qp *qp, uint64_t now)
{
	struct sr_fault_qp *fq = qp->faults;

	if (fq->deadline && now >= fq->deadline)
		release(qp);
	delay_release(qp, now);
}

void sr_roce_fault_drain(struct sr_qp *qp)
{
	release(qp);
	delay_release(qp, 0);
}
