/* Soft-iWARP: the transport ops core/ calls, the hand-over of a connected
 * socket from the CM (sr_iw_qp_connect), the end of a connection, and the
 * memory lookups the send and receive paths share. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>

#include "iwarp/iwarp.h"
#include "core/fault.h"
#include "abi/export.h"

/* A closing QP whose drain doesn't finish (a Read the peer never
 * answers) is closed anyway after this long. */
#define SR_IW_CLOSE_TIMEOUT_NS (2ull * 1000000000ull)

/* A stream we closed stays open, write side shut, until the peer has
 * acknowledged every byte we sent and closed its side too: a close()
 * with unread input resets the connection, and a reset throws away
 * whatever the kernel still holds for the peer -- Sends and Writes that
 * completed here (iWARP completes a send once TCP has it, as siw does)
 * would never arrive.  The wait ends when the peer has made no progress
 * for this long. */
#define SR_IW_LINGER_NS (2ull * 1000000000ull)

/* ---- memory ---- */

uint8_t *sr_iw_stag_lookup(struct sr_qp *qp, uint32_t stag, uint64_t to, uint64_t len, unsigned int access,
			   enum sr_iw_memerr *err)
{
	struct sr_context *ctx = qp->ctx;
	uint32_t idx = sr_key_slot(ctx, stag);
	struct sr_mr *mr;

	if (!idx || !(mr = ctx->mr_tab[idx]) || mr->ibmr.rkey != stag) {
		*err = SR_IW_MEM_STAG;
		return NULL;
	}
	if (mr->pd != iw_pd(qp)) {
		*err = SR_IW_MEM_PD;
		return NULL;
	}
	if ((mr->access & access) != access) {
		*err = SR_IW_MEM_ACCESS;
		return NULL;
	}
	if (to + len < to) {
		*err = SR_IW_MEM_WRAP;
		return NULL;
	}
	if (to < mr->iova || len > mr->length || to - mr->iova > mr->length - len) {
		*err = SR_IW_MEM_BOUNDS;
		return NULL;
	}
	*err = SR_IW_MEM_OK;
	return mr->host + (to - mr->iova);
}

int sr_iw_sge_iov(struct sr_qp *qp, const struct ibv_sge *sge, uint32_t nsge, uint64_t off, uint64_t len,
		  unsigned int access, struct iovec *iov, int max)
{
	uint32_t i = 0;
	int n = 0;

	while (i < nsge && off >= sge[i].length) {
		off -= sge[i].length;
		i++;
	}
	while (len) {
		uint64_t take;
		uint8_t *host;

		if (i >= nsge || n >= max)
			return -1;
		take = sge[i].length - off;
		if (take > len)
			take = len;
		host = sr_mr_lookup(qp->ctx, sge[i].lkey, false, iw_pd(qp), sge[i].addr + off, take, access);
		if (!host)
			return -1;
		iov[n].iov_base = host;
		iov[n].iov_len = take;
		n++;
		len -= take;
		off = 0;
		i++;
	}
	return n;
}

/* ---- the socket ---- */

void sr_iw_want_out(struct sr_qp *qp, bool on)
{
	struct sr_iw_qp *w = iqp(qp);
	if (w->epollout == on || !w->in_epoll)
		return;
	if (!sr_progress_mod_fd(qp->ctx, w->fd, qp, (w->rx_held ? EPOLLRDHUP : EPOLLIN) | (on ? EPOLLOUT : 0)))
		w->epollout = on;
}

int sr_iw_rx_hold(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	uint64_t now = sr_now_ns();

	if (!w->nobuf_deadline) {
		w->nobuf_deadline = now + SR_IW_NOBUF_WAIT_NS;
		SR_DBG("iwarp QP %u: a Send waits for a receive to be posted", iw_qpn(qp));
	} else if (now >= w->nobuf_deadline) {
		return -1;
	}
	if (!w->rx_held) {
		/* input stays in the socket; the peer's FIN or a reset still
		 * shows (EPOLLRDHUP, EPOLLHUP): then nothing would come after
		 * the Send, and the QP ends at once, as siw's does */
		w->rx_held = true;
		if (w->in_epoll)
			sr_progress_mod_fd(qp->ctx, w->fd, qp, EPOLLRDHUP | (w->epollout ? EPOLLOUT : 0));
	}
	w->nobuf_recheck = qp->srq ? now + SR_IW_NOBUF_RECHECK_NS : 0;
	sr_qp_timer_arm(qp, w->nobuf_recheck ? w->nobuf_recheck : w->nobuf_deadline);
	return 0;
}

/* Receive again after a hold: a receive may be there now, or the wait is
 * over (then the Send gets its Terminate). */
static void rx_release(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);

	if (!w->rx_held)
		return;
	w->rx_held = false;
	if (w->in_epoll)
		sr_progress_mod_fd(qp->ctx, w->fd, qp, EPOLLIN | (w->epollout ? EPOLLOUT : 0));
	if (w->fd < 0 || !w->connected)
		return;
	/* what is already read (the Send's header) would raise no readiness */
	sr_iw_rx_progress(qp);
	if (w->connected)
		sr_iw_tx_progress(qp);
}

static void fd_release(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);

	if (w->in_epoll) {
		sr_progress_del_fd(qp->ctx, w->fd);
		w->in_epoll = false;
		w->epollout = false;
	}
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

static void linger_end(struct sr_qp *qp)
{
	iqp(qp)->lingering = false;
	fd_release(qp);
}

/* Bytes sent that the peer has not acknowledged yet. */
static int sock_unacked(int fd)
{
	int n = 0;

	return ioctl(fd, SIOCOUTQ, &n) ? 0 : n;
}

/* Reads and drops what the peer still sends on a stream we closed.
 * Returns true once the stream is over (the peer's FIN, or an error). */
static bool linger_drain(int fd)
{
	uint8_t buf[4096];

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n > 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
	}
}

/* Ends the stream without losing what we sent: FIN after the queued
 * bytes, then the socket is kept (in epoll, input drained) until the
 * peer closes too or stops making progress (iw_on_timer). */
static void linger_start(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);

	if (!w->wr_shut) {
		if (sr_faults_on(qp))
			sr_iw_fault_drain(qp, true); /* the delay fault's bytes go before the FIN */
		shutdown(w->fd, SHUT_WR);
		w->wr_shut = true;
	}
	if (!w->in_epoll) {
		if (sr_progress_add_fd(qp->ctx, w->fd, qp)) {
			fd_release(qp);
			return;
		}
		w->in_epoll = true;
	}
	sr_iw_want_out(qp, false);
	w->lingering = true;
	w->linger_outq = sock_unacked(w->fd);
	w->linger_deadline = sr_now_ns() + SR_IW_LINGER_NS;
	sr_qp_timer_arm(qp, w->linger_deadline);
	if (linger_drain(w->fd))
		linger_end(qp);
}

/* Closes a socket the QP is done with.  If the peer has not yet taken
 * everything we sent, waits for it (bounded: while it makes progress),
 * reading what it sends meanwhile: the process may exit right after
 * destroying the QP, and the kernel would reset a socket closed with
 * unread input. */
static void sock_close_gently(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	uint64_t until = sr_now_ns() + SR_IW_LINGER_NS;
	int outq;

	if (w->fd >= 0 && (w->connected || w->lingering)) {
		if (!w->wr_shut) {
			if (sr_faults_on(qp))
				sr_iw_fault_drain(qp, true);
			shutdown(w->fd, SHUT_WR);
			w->wr_shut = true;
		}
		outq = sock_unacked(w->fd);
		while (outq > 0 && !linger_drain(w->fd)) {
			struct pollfd p = { .fd = w->fd, .events = POLLIN };
			int now_outq;

			if (sr_now_ns() >= until)
				break;
			poll(&p, 1, 10);
			now_outq = sock_unacked(w->fd);
			if (now_outq < outq)
				until = sr_now_ns() + SR_IW_LINGER_NS;
			outq = now_outq;
		}
	}
	w->lingering = false;
	fd_release(qp);
}

void sr_iw_conn_end(struct sr_qp *qp, enum sr_iw_close_reason reason)
{
	struct sr_iw_qp *w = iqp(qp);

	if (!w->connected)
		return;
	w->connected = false;
	w->closing = false;
	w->rx.state = SR_IW_RX_STOP;
	if (reason == SR_IW_CLOSE_LOCAL || reason == SR_IW_CLOSE_TERM_TX) {
		/* our close (or our Terminate): what we sent must still reach
		 * the peer */
		linger_start(qp);
	} else {
		/* the peer ended the stream (FIN after its last FPDU, a
		 * Terminate, a reset): nothing of ours is in danger */
		fd_release(qp);
	}
	if (w->on_close && !w->close_fired) {
		w->close_pending = true;
		w->close_reason = reason;
		atomic_fetch_add(&qp->ctx->tp_notify, 1);
		sr_progress_wake(qp->ctx);
	}
	SR_DBG("iwarp QP %u: connection ended (%d)", iw_qpn(qp), (int)reason);
}

void sr_iw_qp_error(struct sr_qp *qp, int ev)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_iw_rx *rx = &w->rx;

	if (rx->rwqe_valid) {
		/* taken off the RQ, so the core's flush can't see it */
		struct ibv_wc wc;

		memset(&wc, 0, sizeof(wc));
		wc.wr_id = rx->rwqe->wr_id;
		wc.status = IBV_WC_WR_FLUSH_ERR;
		wc.opcode = IBV_WC_RECV;
		wc.qp_num = iw_qpn(qp);
		sr_cq_push(qp->rcq, &wc, false);
		rx->rwqe_valid = false;
	}
	sr_qp_to_error(qp, (enum ibv_event_type)ev);
	sr_iw_tx_reset(qp);
}

/* ---- transport ops ---- */

static int iw_qp_create(struct sr_qp *qp)
{
	struct sr_context *ctx = qp->ctx;
	struct sr_iw_qp *w = calloc(1, sizeof(*w));
	uint32_t qpn;

	if (!w)
		return ENOMEM;
	w->fd = -1;
	w->rx.rwqe = calloc(1, sizeof(struct sr_recv_wqe) + SR_MAX_SGE * sizeof(struct ibv_sge));
	if (!w->rx.rwqe) {
		free(w);
		return ENOMEM;
	}
	/* QPNs never reach the wire on iWARP; they only have to tell this
	 * context's QPs apart in completions.  Without the daemon's host-wide
	 * allocator, take a hashed number unused here (0 and 1 are special
	 * in verbs). */
	pthread_mutex_lock(&ctx->lock);
	qpn = (uint32_t)(((uintptr_t)qp >> 4) ^ (sr_now_ns() >> 10)) * 0x9E3779B1u;
	for (;;) {
		qpn &= 0xffffff;
		if (qpn > 1 && !sr_ctx_find_qp(ctx, qpn))
			break;
		qpn = qpn * 0x9E3779B1u + 0x7f4a7c15u;
	}
	qp->ibqp.qp_base.qp_num = qpn;
	pthread_mutex_unlock(&ctx->lock);
	const char *th = getenv("SOFTRDMA_TX_HOLD");
	w->tx_defer_on = !th || strcmp(th, "0");
	qp->tp = w;
	return 0;
}

static void iw_free_queues(struct sr_iw_qp *w)
{
	free(w->orq);
	free(w->irq);
	w->orq = NULL;
	w->irq = NULL;
	w->orq_size = w->irq_size = 0;
	w->orq_mask = w->irq_mask = 0;
}

static void iw_qp_destroy(struct sr_qp *qp)
{
	struct sr_iw_qp *w;
	void (*on_close)(void *, enum sr_iw_close_reason) = NULL;
	void *close_arg = NULL;
	enum sr_iw_close_reason reason = SR_IW_CLOSE_LOCAL;

	pthread_mutex_lock(&qp->lock);
	w = iqp(qp);
	if (w) {
		/* The QP is off the context's list: a close notification still
		 * due would never be made by rx_flush.  Destroying a connected
		 * QP ends its connection, and the CM hears of it, as from siw
		 * (cmtime destroys its QPs right after rdma_disconnect and
		 * waits for DISCONNECTED). */
		if (w->on_close && !w->close_fired && (w->connected || w->close_pending)) {
			on_close = w->on_close;
			close_arg = w->close_arg;
			if (w->close_pending)
				reason = w->close_reason;
			w->close_fired = true;
		}
		sock_close_gently(qp);
		iw_free_queues(w);
		free(w->rx.rwqe);
		free(w->rx_big);
		free(w);
		qp->tp = NULL;
	}
	pthread_mutex_unlock(&qp->lock);
	if (on_close)
		on_close(close_arg, reason);
}

static void iw_reset(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);

	sock_close_gently(qp);
	iw_free_queues(w);
	sr_iw_tx_reset(qp);
	sr_iw_rx_reset(qp);
	w->connected = w->closing = w->wr_shut = w->lingering = false;
	w->rx_held = false;
	w->nobuf_deadline = w->nobuf_recheck = 0;
	w->term_pending = w->term_sent = w->term_rcvd = false;
	w->rtr_to_send = w->rtr_wait = false;
	w->hush_until = 0;
	w->nudging = w->nudge_to_send = false;
	w->close_pending = w->close_fired = false;
	w->on_close = NULL;
	w->close_arg = NULL;
}

static int iw_qp_modify(struct sr_qp *qp, struct ibv_qp_attr *attr, int mask, enum ibv_qp_state old)
{
	struct sr_iw_qp *w = iqp(qp);
	enum ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : old;

	if (!(mask & IBV_QP_STATE) || next == old)
		return 0;
	switch (next) {
	case IBV_QPS_RTR:
		/* harmless: the connection, not this, makes an iWARP QP work */
		return 0;
	case IBV_QPS_RTS:
		/* only sr_iw_qp_connect puts a QP on a stream; SQD->RTS after a
		 * close has started can't undo it */
		if (!w->connected || w->closing)
			return EINVAL;
		return 0;
	case IBV_QPS_SQD:
		/* siw's CLOSING: finish the message on the wire and the Reads
		 * outstanding, then close (on_timer) */
		if (w->connected) {
			w->closing = true;
			w->close_deadline = sr_now_ns() + SR_IW_CLOSE_TIMEOUT_NS;
			sr_qp_timer_arm(qp, sr_now_ns());
			sr_progress_wake(qp->ctx);
		}
		return 0;
	case IBV_QPS_ERR:
		/* the core flushes the queues after this; our in-flight receive
		 * WQE is the oldest, so it goes first */
		if (w->rx.rwqe_valid) {
			struct ibv_wc wc;

			memset(&wc, 0, sizeof(wc));
			wc.wr_id = w->rx.rwqe->wr_id;
			wc.status = IBV_WC_WR_FLUSH_ERR;
			wc.opcode = IBV_WC_RECV;
			wc.qp_num = iw_qpn(qp);
			sr_cq_push(qp->rcq, &wc, false);
			w->rx.rwqe_valid = false;
		}
		sr_iw_tx_reset(qp);
		sr_iw_conn_end(qp, SR_IW_CLOSE_LOCAL);
		return 0;
	case IBV_QPS_RESET:
		iw_reset(qp);
		return 0;
	default:
		return 0;
	}
}

/* Closing (SQD) and nothing left to finish: the message on the wire,
 * the Reads we wait for, the Reads we owe. */
static bool iw_drained(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);

	return w->msg.src == SR_IW_SRC_NONE && w->txb.sent == w->txb.total && w->orq_head == w->orq_tail &&
	       w->irq_head == w->irq_tail && !w->rtr_to_send && (!sr_faults_on(qp) || !qp->faults->delay.head);
}

/* A burst of small messages from an application that polls its CQs
 * (sr_post_in_burst) waits for its next poll and then leaves in one
 * sendmsg, as larger TCP segments: with TCP_NODELAY each post would be a
 * segment of its own.  The first message of a burst goes at once, and so
 * do messages while a batch is still going out.  An application that
 * posts a burst and then does not poll has it sent by the progress
 * thread (sr_qp_park). */
#define SR_IW_DEFER_WQES 16    /* waiting messages that make a batch */
#define SR_IW_DEFER_LEN 16384u /* only messages this small wait */

static bool iw_tx_defer(struct sr_qp *qp, uint64_t now)
{
	struct sr_iw_qp *w = iqp(qp);
	struct sr_sq *sq = &qp->sq;

	if (!w->tx_defer_on || !w->connected || qp->attr.qp_state != IBV_QPS_RTS)
		return false;
	if (!sr_post_in_burst(qp, now) || w->txb.sent != w->txb.total || sq->head - sq->cur >= SR_IW_DEFER_WQES ||
	    sr_sq_wqe(sq, sq->head - 1)->length > SR_IW_DEFER_LEN)
		return false;
	return sr_qp_park(qp);
}

static void iw_sq_kick(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	uint64_t now = sr_now_ns();

	/* deferred for a burst, or the socket is full: then the progress thread
	 * sends it on EPOLLOUT, and a sendmsg now would only fail */
	if (w && (iw_tx_defer(qp, now) || w->epollout)) {
		qp->post_end_ns = now;
		return;
	}
	sr_iw_tx_progress(qp);
	qp->post_end_ns = sr_now_ns(); /* after a system call: the gap to the next post from here */
}

static void iw_rq_kick(struct sr_qp *qp)
{
	/* a Send held for want of a receive (sr_iw_rx_hold) may go on */
	if (iqp(qp) && iqp(qp)->rx_held)
		rx_release(qp);
}

/* Called for EPOLLOUT or a hang-up while receiving is held: did the
 * peer close or reset? */
static bool held_hangup(struct sr_iw_qp *w)
{
	struct pollfd p = { .fd = w->fd, .events = POLLRDHUP };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static void iw_on_readable(struct sr_qp *qp, int fd_unused)
{
	struct sr_iw_qp *w = iqp(qp);

	if (w && w->lingering) {
		if (linger_drain(w->fd))
			linger_end(qp);
		return;
	}
	if (!w || w->fd < 0 || !w->connected)
		return;
	if (w->rx_held) {
		/* EPOLLOUT; or the stream broke, and waiting is pointless */
		if (held_hangup(w)) {
			w->nobuf_deadline = 1;
			rx_release(qp);
			return;
		}
		sr_iw_tx_progress(qp);
		return;
	}
	sr_iw_rx_progress(qp);
	if (w->connected)
		sr_iw_tx_progress(qp);
	if (w->closing && w->connected && iw_drained(qp))
		sr_progress_wake(qp->ctx); /* the progress thread's timer pass closes it */
}

static uint64_t iw_deadline(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);

	if (w && w->lingering)
		return w->linger_deadline;
	if (!w || !w->closing || !w->connected)
		return 0;
	return iw_drained(qp) ? 1 : w->close_deadline;
}

static uint64_t iw_next_deadline(struct sr_qp *qp)
{
	struct sr_iw_qp *w = iqp(qp);
	uint64_t d = iw_deadline(qp);

	if (w && w->rx_held)
		d = sr_fault_earlier(d, w->nobuf_recheck ? w->nobuf_recheck : w->nobuf_deadline);
	if (w && w->nudging && w->connected)
		d = sr_fault_earlier(d, w->nudge_deadline);
	if (w && w->hush_until && w->connected)
		d = sr_fault_earlier(d, w->hush_until);
	if (sr_faults_on(qp) && w)
		return sr_fault_earlier(d, sr_fault_deadline(qp));
	return d;
}

static void iw_on_timer(struct sr_qp *qp, uint64_t now)
{
	struct sr_iw_qp *w = iqp(qp);

	if (sr_faults_on(qp) && w)
		sr_iw_fault_timer(qp, now);
	if (w && w->rx_held && now >= (w->nobuf_recheck ? w->nobuf_recheck : w->nobuf_deadline))
		rx_release(qp); /* an SRQ receive, or the Terminate */
	if (w && w->nudging && w->connected)
		sr_iw_nudge_timer(qp, now);
	if (w && w->hush_until && w->connected && now >= w->hush_until) {
		sr_iw_hush_end(qp);
		sr_iw_tx_progress(qp);
	}

	if (w && w->lingering) {
		int outq;

		if (now < w->linger_deadline)
			return;
		/* the peer has not closed: wait on while it takes our bytes */
		outq = sock_unacked(w->fd);
		if (outq > 0 && outq < w->linger_outq) {
			w->linger_outq = outq;
			w->linger_deadline = now + SR_IW_LINGER_NS;
			return;
		}
		SR_DBG("iwarp QP %u: closing the socket after lingering (%d bytes unacknowledged)", iw_qpn(qp), outq);
		linger_end(qp);
		return;
	}
	if (!w || !w->closing || !w->connected)
		return;
	if (!iw_drained(qp) && now < w->close_deadline)
		return;
	/* the drain is over: FIN, then the QP is done (as siw goes from
	 * CLOSING to ERROR) and whatever is left flushes */
	sr_iw_conn_end(qp, SR_IW_CLOSE_LOCAL);
	sr_iw_qp_error(qp, -1);
}

static void iw_deliver(struct sr_qp *qp, const struct sr_ipc_pkt *meta, const uint8_t *data, uint32_t len)
{
	/* nothing comes through the daemon for iWARP */
}

/* The CM's close notifications, made with no lock held. */
static void iw_rx_flush(struct sr_context *ctx)
{
	struct {
		void (*fn)(void *, enum sr_iw_close_reason);
		void *arg;
		enum sr_iw_close_reason reason;
	} calls[16];
	int n = 0;
	bool more = false;

	if (!atomic_load_explicit(&ctx->tp_notify, memory_order_relaxed))
		return;
	atomic_store(&ctx->tp_notify, 0);
	pthread_mutex_lock(&ctx->lock);
	for (struct sr_qp *qp = ctx->qp_list; qp; qp = qp->next) {
		struct sr_iw_qp *w;

		pthread_mutex_lock(&qp->lock);
		w = iqp(qp);
		if (w && w->close_pending && !qp->dead) {
			if (n < 16) {
				calls[n].fn = w->on_close;
				calls[n].arg = w->close_arg;
				calls[n].reason = w->close_reason;
				n++;
				w->close_pending = false;
				w->close_fired = true;
			} else {
				more = true;
			}
		}
		pthread_mutex_unlock(&qp->lock);
	}
	pthread_mutex_unlock(&ctx->lock);
	if (more) {
		atomic_fetch_add(&ctx->tp_notify, 1);
		sr_progress_wake(ctx);
	}
	for (int i = 0; i < n; i++)
		calls[i].fn(calls[i].arg, calls[i].reason);
}

const struct sr_transport_ops sr_iwarp_ops = {
	.qp_create = iw_qp_create,
	.qp_destroy = iw_qp_destroy,
	.qp_modify = iw_qp_modify,
	.sq_kick = iw_sq_kick,
	.rq_kick = iw_rq_kick,
	.on_timer = iw_on_timer,
	.sq_release = sr_iw_tx_progress,
	.next_deadline = iw_next_deadline,
	.on_readable = iw_on_readable,
	.deliver = iw_deliver,
	.rx_flush = iw_rx_flush,
};

/* ---- the CM's entry points ---- */

SR_EXPORT int sr_iw_qp_connect(struct ibv_qp *ibqp, const struct sr_iw_conn_params *p)
{
	struct sr_qp *qp;
	struct sr_iw_qp *w;
	struct sr_context *ctx;
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);
	int type = 0, fl, err = 0;
	socklen_t tlen = sizeof(type);
	uint32_t ord, ird;

	if (!ibqp || !p)
		return EINVAL;
	qp = to_sqp(ibqp);
	ctx = qp->ctx;
	if (ctx->dev->conf.type != SR_DEV_IWARP || ibqp->qp_type != IBV_QPT_RC)
		return EINVAL;
	if (p->mpa_rev < 1 || p->mpa_rev > 2 || p->rtr < SR_MPA_RTR_NONE || p->rtr > SR_MPA_RTR_READ ||
	    (p->rtr && p->mpa_rev < 2) || p->ird > SR_MPA_IRD_ORD_MAX || p->ord > SR_MPA_IRD_ORD_MAX)
		return EINVAL;
	if (p->fd < 0 || getsockopt(p->fd, SOL_SOCKET, SO_TYPE, &type, &tlen) || type != SOCK_STREAM)
		return EBADF;
	if (getpeername(p->fd, (struct sockaddr *)&peer, &plen))
		return ENOTCONN;

	/* An RTR Read needs an ORQ slot at the initiator and an IRQ slot at
	 * the responder whatever was negotiated. */
	ord = p->ord;
	ird = p->ird;
	if (p->rtr == SR_MPA_RTR_READ) {
		if (p->initiator && !ord)
			ord = 1;
		if (!p->initiator && !ird)
			ird = 1;
	}

	pthread_mutex_lock(&qp->lock);
	w = iqp(qp);
	if (!w || qp->dead || w->fd >= 0 || (qp->attr.qp_state != IBV_QPS_INIT && qp->attr.qp_state != IBV_QPS_RTR)) {
		err = EINVAL;
		goto out;
	}
	w->orq_mask = sr_ring_slots(ord) - 1;
	w->irq_mask = sr_ring_slots(ird) - 1;
	w->orq = ord ? calloc((size_t)w->orq_mask + 1, sizeof(*w->orq)) : NULL;
	w->irq = ird ? calloc((size_t)w->irq_mask + 1, sizeof(*w->irq)) : NULL;
	if ((ord && !w->orq) || (ird && !w->irq)) {
		iw_free_queues(w);
		err = ENOMEM;
		goto out;
	}
	w->orq_size = ord;
	w->irq_size = ird;
	w->orq_head = w->orq_tail = w->irq_head = w->irq_tail = 0;
	fl = fcntl(p->fd, F_GETFL);
	if (fl < 0 || fcntl(p->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		err = errno;
		iw_free_queues(w);
		goto out;
	}
	fcntl(p->fd, F_SETFD, FD_CLOEXEC);
	/* One FPDU per message must not wait for Nagle, as siw sets it: a
	 * message spanning several segments would wait for the delayed ACK
	 * of the ones before (up to 40 ms) in request/response traffic.
	 * SOFTRDMA_IW_NAGLE=1 trades that for coalescing small messages into
	 * large segments (bench/iwarp.sh compares the two). */
	{
		const char *nagle = getenv("SOFTRDMA_IW_NAGLE");
		int nodelay = !(nagle && *nagle == '1');

		setsockopt(p->fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof(nodelay));
	}

	sr_iw_tx_reset(qp);
	sr_iw_rx_reset(qp);
	w->fd = p->fd;
	w->crc = p->crc;
	w->mpa_rev = p->mpa_rev;
	w->initiator = p->initiator;
	w->rtr = p->rtr;
	w->rtr_to_send = p->initiator && p->rtr;
	w->rtr_wait = !p->initiator && p->rtr;
	/* with an RTR, rtr_wait holds the responder back instead */
	w->hush_until = p->initiator || p->rtr ? 0 : sr_now_ns() + SR_IW_HUSH_NS;
	w->nudging = p->initiator;
	w->nudge_to_send = false;
	w->nudges = 0;
	w->nudge_deadline = 0;
	w->term_pending = w->term_sent = w->term_rcvd = false;
	w->closing = w->wr_shut = false;
	w->on_close = p->on_close;
	w->close_arg = p->close_arg;
	w->close_pending = w->close_fired = false;
	err = -sr_progress_add_fd(ctx, w->fd, qp);
	if (err) {
		w->fd = -1;
		iw_free_queues(w);
		goto out;
	}
	w->in_epoll = true;
	w->connected = true;
	qp->attr.max_rd_atomic = (uint8_t)(p->ord > 255 ? 255 : p->ord);
	qp->attr.max_dest_rd_atomic = (uint8_t)(p->ird > 255 ? 255 : p->ird);
	qp->attr.qp_state = IBV_QPS_RTS;
	qp->attr.cur_qp_state = IBV_QPS_RTS;
	ibqp->state = IBV_QPS_RTS;
	SR_DBG("iwarp QP %u: connected on fd %d (%s, MPA rev %u, CRC %s, IRD %u ORD %u, RTR %d)", iw_qpn(qp), w->fd,
	       p->initiator ? "initiator" : "responder", p->mpa_rev, p->crc ? "on" : "off", ird, ord, p->rtr);
	if (w->hush_until)
		sr_qp_timer_arm(qp, w->hush_until);
	/* the initiator's RTR goes first; input may already be waiting */
	sr_iw_tx_progress(qp);
out:
	pthread_mutex_unlock(&qp->lock);
	return err;
}

SR_EXPORT struct ibv_qp *sr_iw_qp_lookup(struct ibv_context *ibctx, uint32_t qpn)
{
	struct sr_context *ctx;
	struct sr_qp *qp;

	if (!ibctx || !qpn)
		return NULL;
	ctx = to_sctx(ibctx);
	if (ctx->dev->conf.type != SR_DEV_IWARP)
		return NULL;
	pthread_mutex_lock(&ctx->lock);
	qp = sr_ctx_find_qp(ctx, qpn);
	pthread_mutex_unlock(&ctx->lock);
	return qp && qp->ibqp.qp_base.qp_type == IBV_QPT_RC ? &qp->ibqp.qp_base : NULL;
}

SR_EXPORT int sr_iw_query(struct ibv_context *ibctx, struct sr_iw_dev_attr *attr)
{
	struct sr_context *ctx;

	if (!ibctx || !attr)
		return EINVAL;
	ctx = to_sctx(ibctx);
	memset(attr, 0, sizeof(*attr));
	attr->iwarp = ctx->dev->conf.type == SR_DEV_IWARP;
	attr->crc = ctx->dev->crc;
	attr->max_ird = SR_MAX_RD_ATOMIC;
	attr->max_ord = SR_MAX_RD_ATOMIC;
	return 0;
}
