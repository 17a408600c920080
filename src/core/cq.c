/* Completion queues, completion channels and CQ events.
 *
 * A completion channel has an event pipe: when an armed CQ gets a
 * completion the CQ's address is written to it.  channel->fd, which
 * applications poll() as rdma-core's uverbs event file, is readable when
 * an event waits (and, made non-blocking, on input that may make one:
 * struct sr_comp_channel); ibv_get_cq_event() receives what waits on the
 * sockets itself before it sleeps (core/poller.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>

#include "core/sr.h"

/* An epoll instance over the fds (-1: none), or -1. */
static int epoll_over(int a, int b)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN };

	if (ep >= 0 &&
	    ((a >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev)) || (b >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev)))) {
		int err = errno;
		close(ep);
		errno = err;
		return -1;
	}
	return ep;
}

struct ibv_comp_channel *sr_create_comp_channel(struct ibv_context *c)
{
	struct sr_comp_channel *ch = calloc(1, sizeof(*ch));
	int p[2], ep = -1, wait = -1, err;

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK)) {
		free(ch);
		return NULL;
	}
	if ((ep = epoll_over(p[0], -1)) < 0 || (wait = epoll_over(p[0], to_sctx(c)->prog.data_epfd)) < 0) {
		err = errno;
		goto fail;
	}
	ch->ibch.context = c;
	ch->ibch.fd = ep;
	ch->ibch.refcnt = 0;
	ch->rd_fd = p[0];
	ch->wr_fd = p[1];
	ch->wait_fd = wait;
	err = sr_obj_add(to_sctx(c), &ch->obj, &ch->ibch, SR_OBJ_CHANNEL);
	if (!err)
		return &ch->ibch;
fail:
	if (ep >= 0)
		close(ep);
	if (wait >= 0)
		close(wait);
	close(p[0]);
	close(p[1]);
	free(ch);
	errno = err;
	return NULL;
}

/* A channel that is not (or no longer) one of ours: EBADF, as closing its
 * descriptor would say, and nothing closed. */
int sr_destroy_comp_channel(struct ibv_comp_channel *ibch)
{
	struct sr_comp_channel *ch = (struct sr_comp_channel *)ibch;
	int err;
	struct sr_obj *o = sr_obj_claim(ibch, SR_OBJ_CHANNEL, &err);

	if (!o)
		return err;
	pthread_mutex_lock(&ibch->context->mutex);
	bool busy = ibch->refcnt != 0;
	pthread_mutex_unlock(&ibch->context->mutex);
	if (busy) {
		sr_obj_put(o);
		return EBUSY;
	}
	sr_obj_del(o);
	close(ibch->fd);
	close(ch->rd_fd);
	close(ch->wr_fd);
	close(ch->wait_fd);
	free(ch);
	return 0;
}

/* A spinning poller on a machine with fewer cores than busy threads
 * starves the threads that produce its completions (our progress thread,
 * the peer, the daemon): yield now and then while empty. */
static void poll_yield(bool empty)
{
	static __thread unsigned int empty_polls;
	if (!empty)
		empty_polls = 0;
	else if (++empty_polls % 32 == 0)
		sched_yield();
}

/* A poll found the CQ empty (lock held).  If the CQ is armed, this is
 * most likely an application draining it before it sleeps on the
 * completion channel (arm, poll until empty, wait): returns true once
 * per arming, and the caller releases its parked sends
 * (sr_progress_chan_armed), which must not wait for a poll that is not
 * coming.  Once per arming: an application that keeps spinning on an
 * armed CQ is a poller all the same. */
static bool empty_armed(struct sr_cq *cq)
{
	if (!cq->armed || cq->arm_told || !cq->ibcq.channel)
		return false;
	cq->arm_told = true;
	return true;
}

/* ---- the extended polling API (ibv_cq_ex) ---- */
static struct sr_cq *ex_cq(struct ibv_cq_ex *c)
{
	return (struct sr_cq *)c;
}

/* The entry at the tail becomes the current one (lock held). */
static void ex_take(struct sr_cq *cq)
{
	uint32_t i = cq->tail & (cq->size - 1);

	cq->cur = cq->ring[i];
	if (cq->ts)
		cq->cur_ts = cq->ts[i];
	cq->tail++;
	cq->ibcq.wr_id = cq->cur.wr_id;
	cq->ibcq.status = cq->cur.status;
}

/* As ibv_poll_cq does (sr_poll_cq): an empty CQ has the polling thread
 * receive what waits on the sockets, then look again. */
static int ex_start_poll(struct ibv_cq_ex *c, struct ibv_poll_cq_attr *attr)
{
	struct sr_cq *cq = ex_cq(c);
	if (attr && attr->comp_mask)
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	if (cq->head == cq->tail) {
		pthread_mutex_unlock(&cq->lock);
		sr_progress_poll(to_sctx(c->context));
		pthread_mutex_lock(&cq->lock);
	}
	if (cq->head == cq->tail) {
		bool tell = empty_armed(cq);
		pthread_mutex_unlock(&cq->lock);
		if (tell)
			sr_progress_chan_armed(to_sctx(c->context));
		poll_yield(true);
		return ENOENT;
	}
	ex_take(cq);
	return 0; /* lock held until end_poll, as rdma-core providers do */
}

static int ex_next_poll(struct ibv_cq_ex *c)
{
	struct sr_cq *cq = ex_cq(c);
	if (cq->head == cq->tail)
		return ENOENT;
	ex_take(cq);
	return 0;
}

/* Called only after a start_poll that found a completion: the thread
 * reaped, as after a non-empty ibv_poll_cq (outside the CQ lock: releasing
 * held sends may complete work into a CQ). */
static void ex_end_poll(struct ibv_cq_ex *c)
{
	pthread_mutex_unlock(&ex_cq(c)->lock);
	sr_progress_reaped(to_sctx(c->context));
	poll_yield(false);
}

static enum ibv_wc_opcode ex_read_opcode(struct ibv_cq_ex *c)
{
	return ex_cq(c)->cur.opcode;
}
static uint32_t ex_read_vendor_err(struct ibv_cq_ex *c)
{
	return ex_cq(c)->cur.vendor_err;
}
static uint32_t ex_read_byte_len(struct ibv_cq_ex *c)
{
	return ex_cq(c)->cur.byte_len;
}
static __be32 ex_read_imm_data(struct ibv_cq_ex *c)
{
	return ex_cq(c)->cur.imm_data;
}
static uint32_t ex_read_qp_num(struct ibv_cq_ex *c)
{
	return ex_cq(c)->cur.qp_num;
}
static uint32_t ex_read_src_qp(struct ibv_cq_ex *c)
{
	return ex_cq(c)->cur.src_qp;
}
static unsigned int ex_read_wc_flags(struct ibv_cq_ex *c)
{
	return ex_cq(c)->cur.wc_flags;
}
static uint32_t ex_read_slid(struct ibv_cq_ex *c)
{
	return ex_cq(c)->cur.slid;
}
static uint8_t ex_read_sl(struct ibv_cq_ex *c)
{
	return ex_cq(c)->cur.sl;
}
static uint8_t ex_read_dlid_path_bits(struct ibv_cq_ex *c)
{
	return ex_cq(c)->cur.dlid_path_bits;
}
static uint64_t ex_read_completion_ts(struct ibv_cq_ex *c)
{
	return ex_cq(c)->cur_ts.raw;
}
static uint64_t ex_read_completion_wallclock_ns(struct ibv_cq_ex *c)
{
	return ex_cq(c)->cur_ts.wall;
}

/* ch and pdom (a parent domain, or NULL) have been resolved; vector is
 * checked by the caller. */
static struct sr_cq *cq_alloc(struct ibv_context *c, int cqe, void *cq_context, struct ibv_comp_channel *ch,
			      struct ibv_pd *pdom)
{
	struct sr_cq *cq;
	int err;

	if (cqe < 1 || cqe >= SR_MAX_CQE) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	if ((err = sr_obj_add(to_sctx(c), &cq->obj, &cq->ibcq, SR_OBJ_CQ))) {
		free(cq);
		errno = err;
		return NULL;
	}
	cq->size = sr_ring_slots((uint32_t)cqe + 1);
	cq->ring = sr_ring_alloc(pdom, cq->size * sizeof(*cq->ring), SR_RES_TYPE_CQ, &cq->ring_mem);
	if (!cq->ring) {
		sr_obj_del(&cq->obj);
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&cq->lock, NULL);
	if (pdom) {
		cq->pdom = sr_parent_domain(pdom);
		atomic_fetch_add(&cq->pdom->usecnt, 1);
	}
	struct ibv_cq_ex *x = &cq->ibcq;
	x->context = c;
	x->channel = ch;
	x->cq_context = cq_context;
	x->cqe = cqe;
	pthread_mutex_init(&x->mutex, NULL);
	pthread_cond_init(&x->cond, NULL);
	if (ch) {
		pthread_mutex_lock(&c->mutex);
		ch->refcnt++;
		pthread_mutex_unlock(&c->mutex);
	}
	return cq;
}

/* The channel of a new CQ of c, in use until sr_obj_put (NULL: none, or
 * *err = EBADF as the kernel's lookup of its fd says). */
static struct sr_obj *cq_channel(struct ibv_context *c, struct ibv_comp_channel *ch, int *err)
{
	*err = 0;
	return ch ? sr_obj_get(ch, SR_OBJ_CHANNEL, c, err) : NULL;
}

struct ibv_cq *sr_create_cq(struct ibv_context *c, int cqe, void *cq_context, struct ibv_comp_channel *ch, int vec)
{
	int err;
	struct sr_obj *cho = cq_channel(c, ch, &err);
	struct sr_cq *cq = NULL;

	if (err)
		errno = err;
	else if (vec < 0 || vec >= c->num_comp_vectors)
		errno = EINVAL;
	else
		cq = cq_alloc(c, cqe, cq_context, ch, NULL);
	if (cho)
		sr_obj_put(cho);
	return cq ? (struct ibv_cq *)&cq->ibcq : NULL;
}

struct ibv_cq_ex *sr_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *attr)
{
	uint64_t stamps = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
	uint64_t known = IBV_WC_STANDARD_FLAGS | stamps;

	if (attr->comp_mask & ~(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->wc_flags & ~known) {
		errno = EOPNOTSUPP; /* CVLAN and flow tags (raw packets), tag matching */
		return NULL;
	}
	/* rdma-core passes IGNORE_OVERRUN to the kernel, and rxe_create_cq()
	 * refuses any flag; SINGLE_THREADED stays in libibverbs */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (attr->flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	int err;
	struct sr_obj *cho = cq_channel(c, attr->channel, &err);
	struct sr_obj *pdo = NULL;
	struct ibv_pd *pdom = NULL;
	struct sr_cq *cq = NULL;

	/* as mlx5: IBV_CQ_INIT_ATTR_MASK_PD names a parent domain, whose
	 * allocator the CQ's ring comes from */
	if (!err && (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD)) {
		pdom = attr->parent_domain;
		if (!pdom)
			err = EINVAL;
		else if ((pdo = sr_obj_get(pdom, SR_OBJ_PD, c, &err)) && !sr_parent_domain(pdom))
			err = EINVAL;
	}
	if (err)
		errno = err;
	else if (attr->comp_vector >= (uint32_t)c->num_comp_vectors)
		errno = EINVAL;
	else
		cq = cq_alloc(c, (int)attr->cqe, attr->cq_context, attr->channel, pdom);
	if (cho)
		sr_obj_put(cho);
	if (pdo)
		sr_obj_put(pdo);
	if (!cq)
		return NULL;
	if ((attr->wc_flags & stamps) && !(cq->ts = calloc(cq->size, sizeof(*cq->ts)))) {
		sr_destroy_cq((struct ibv_cq *)&cq->ibcq);
		errno = ENOMEM;
		return NULL;
	}
	cq->is_ex = true;
	cq->wc_flags_ex = attr->wc_flags;
	struct ibv_cq_ex *x = &cq->ibcq;
	x->start_poll = ex_start_poll;
	x->next_poll = ex_next_poll;
	x->end_poll = ex_end_poll;
	x->read_opcode = ex_read_opcode;
	x->read_vendor_err = ex_read_vendor_err;
	x->read_byte_len = ex_read_byte_len;
	x->read_imm_data = ex_read_imm_data;
	x->read_qp_num = ex_read_qp_num;
	x->read_src_qp = ex_read_src_qp;
	x->read_wc_flags = ex_read_wc_flags;
	x->read_slid = ex_read_slid;
	x->read_sl = ex_read_sl;
	x->read_dlid_path_bits = ex_read_dlid_path_bits;
	if (attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		x->read_completion_ts = ex_read_completion_ts;
	if (attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		x->read_completion_wallclock_ns = ex_read_completion_wallclock_ns;
	return x;
}

/* Drop the unread events of cq from its channel, keeping the others. */
static void purge_channel(struct ibv_comp_channel *ibch, struct sr_cq *cq)
{
	struct sr_comp_channel *ch = (struct sr_comp_channel *)ibch;
	struct sr_cq *keep[256], *p;
	int nkeep = 0;

	while (nkeep < 256 && read(ch->rd_fd, &p, sizeof(p)) == sizeof(p))
		if (p != cq)
			keep[nkeep++] = p;
	for (int i = 0; i < nkeep; i++)
		if (write(ch->wr_fd, &keep[i], sizeof(keep[i])) != sizeof(keep[i]))
			break;
}

int sr_destroy_cq(struct ibv_cq *ibcq)
{
	struct sr_cq *cq = to_scq(ibcq);
	struct sr_context *ctx;
	struct sr_obj *o;
	int err;

	if (!(o = sr_obj_claim(ibcq, SR_OBJ_CQ, &err)))
		return err;
	ctx = to_sctx(ibcq->context);
	if (atomic_load(&cq->n_qps)) {
		sr_obj_put(o);
		return EBUSY;
	}
	if (ibcq->channel) {
		purge_channel(ibcq->channel, cq);
		pthread_mutex_lock(&ibcq->context->mutex);
		ibcq->channel->refcnt--;
		pthread_mutex_unlock(&ibcq->context->mutex);
	}
	sr_purge_async_events(ctx, ibcq);
	/* as rdma-core: wait until every event handed to the application is
	 * acknowledged (!=, as rdma-core: both counts wrap at 2^32) */
	pthread_mutex_lock(&ibcq->mutex);
	while (ibcq->comp_events_completed != atomic_load(&cq->events_reported))
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	pthread_mutex_unlock(&ibcq->mutex);
	/* let any in-flight progress-thread access finish */
	pthread_mutex_lock(&ctx->prog.lock);
	pthread_mutex_unlock(&ctx->prog.lock);
	sr_obj_del(o);
	sr_ring_free(cq->ring, &cq->ring_mem);
	free(cq->ts);
	if (cq->pdom)
		atomic_fetch_sub(&cq->pdom->usecnt, 1);
	free(cq);
	return 0;
}

static int resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sr_cq *cq = to_scq(ibcq);
	uint32_t nsize, count;
	struct ibv_wc *nring;
	struct sr_cq_ts *nts;

	if (cqe < 1 || cqe >= SR_MAX_CQE)
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	count = cq->head - cq->tail;
	if ((uint32_t)cqe < count) {
		pthread_mutex_unlock(&cq->lock);
		return EINVAL;
	}
	nsize = sr_ring_slots((uint32_t)cqe + 1);
	struct sr_ring_mem nmem;
	nring = sr_ring_alloc(cq->pdom ? &cq->pdom->ibpd : NULL, nsize * sizeof(*nring), SR_RES_TYPE_CQ, &nmem);
	nts = cq->ts ? calloc(nsize, sizeof(*nts)) : NULL;
	if (!nring || (cq->ts && !nts)) {
		pthread_mutex_unlock(&cq->lock);
		sr_ring_free(nring, &nmem);
		return ENOMEM;
	}
	for (uint32_t i = 0; i < count; i++) {
		nring[i] = cq->ring[(cq->tail + i) & (cq->size - 1)];
		if (nts)
			nts[i] = cq->ts[(cq->tail + i) & (cq->size - 1)];
	}
	sr_ring_free(cq->ring, &cq->ring_mem);
	free(cq->ts);
	cq->ring = nring;
	cq->ring_mem = nmem;
	cq->ts = nts;
	cq->size = nsize;
	cq->tail = 0;
	cq->head = count;
	ibcq->cqe = cqe;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

int sr_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	return SR_WITH_OBJ(ibcq, SR_OBJ_CQ, resize_cq(ibcq, cqe));
}

int sr_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct sr_cq *cq = to_scq(ibcq);
	bool tell = false;
	int i = 0;

	if (n < 0)
		return -EINVAL;
	for (int pass = 0; pass < 2; pass++) {
		pthread_mutex_lock(&cq->lock);
		while (i < n && cq->tail != cq->head) {
			wc[i++] = cq->ring[cq->tail & (cq->size - 1)];
			cq->tail++;
		}
		if (!i && pass)
			tell = empty_armed(cq);
		pthread_mutex_unlock(&cq->lock);
		if (i || pass)
			break;
		/* empty: receive what is waiting on the sockets ourselves */
		sr_progress_poll(to_sctx(ibcq->context));
	}
	if (i)
		sr_progress_reaped(to_sctx(ibcq->context));
	else if (tell)
		sr_progress_chan_armed(to_sctx(ibcq->context));
	poll_yield(!i);
	return i;
}

static void cq_signal(struct sr_cq *cq)
{
	struct sr_comp_channel *ch = (struct sr_comp_channel *)cq->ibcq.channel;
	struct sr_cq *p = cq;
	ssize_t r;

	if (!ch)
		return;
	do {
		r = write(ch->wr_fd, &p, sizeof(p));
	} while (r < 0 && errno == EINTR);
}

static int req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct sr_cq *cq = to_scq(ibcq);
	/* without a channel the notification has nowhere to go; like rxe, not an error */
	pthread_mutex_lock(&cq->lock);
	/* "any" beats "solicited" when both are requested before an event */
	if (!solicited_only || !cq->armed)
		cq->armed = solicited_only ? 2 : 1;
	cq->arm_told = false;
	pthread_mutex_unlock(&cq->lock);
	sr_progress_chan_armed(to_sctx(ibcq->context));
	return 0;
}

/* rxe's provider asks the kernel (a command through uverbs): the CQ's
 * handle is resolved, as there. */
int sr_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	return SR_WITH_OBJ(ibcq, SR_OBJ_CQ, req_notify_cq(ibcq, solicited_only));
}

/* This completion's time (lock held): read under the lock, so that no
 * completion of the CQ has an earlier one than the one before it; the
 * wall clock, which may be set back, is held at the last value until it
 * passes it again. */
static struct sr_cq_ts cq_stamp(struct sr_cq *cq)
{
	struct timespec ts;
	uint64_t wall;

	clock_gettime(CLOCK_REALTIME, &ts);
	wall = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	cq->last_ts.raw = sr_dev_clock_ns();
	if (wall > cq->last_ts.wall)
		cq->last_ts.wall = wall;
	return cq->last_ts;
}

bool sr_cq_push(struct sr_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	bool fire = false, ok = true;

	pthread_mutex_lock(&cq->lock);
	if (cq->head - cq->tail >= (uint32_t)cq->ibcq.cqe) {
		ok = false;
		if (!cq->overflow) {
			cq->overflow = true;
			sr_post_async_event(to_sctx(cq->ibcq.context), IBV_EVENT_CQ_ERR, cq);
		}
	} else {
		cq->ring[cq->head & (cq->size - 1)] = *wc;
		if (cq->ts)
			cq->ts[cq->head & (cq->size - 1)] = cq_stamp(cq);
		cq->head++;
		if (cq->armed == 1 || (cq->armed == 2 && (solicited || wc->status != IBV_WC_SUCCESS))) {
			cq->armed = 0;
			fire = true;
		}
	}
	pthread_mutex_unlock(&cq->lock);
	if (fire)
		cq_signal(cq);
	return ok;
}

/* Drop the unread completions of QP qpn, as rdma-core's mlx4/mlx5
 * providers do when a QP is reset: its flushed WRs must not surface after
 * the QP has started over (rdma-core's tests reset a QP in ERR and expect
 * the next completions to be the new ones). */
void sr_cq_clean(struct sr_cq *cq, uint32_t qpn)
{
	pthread_mutex_lock(&cq->lock);
	uint32_t w = cq->tail;
	for (uint32_t r = cq->tail; r != cq->head; r++) {
		struct ibv_wc *wc = &cq->ring[r & (cq->size - 1)];
		if (wc->qp_num == qpn)
			continue;
		if (w != r) {
			cq->ring[w & (cq->size - 1)] = *wc;
			if (cq->ts)
				cq->ts[w & (cq->size - 1)] = cq->ts[r & (cq->size - 1)];
		}
		w++;
	}
	cq->head = w;
	pthread_mutex_unlock(&cq->lock);
}

/* A wait ended by a signal (epoll_wait never restarts): does
 * rdma-core's blocking read() of its event file restart?  Yes if every
 * handler the process installed has SA_RESTART; one without it (qperf's
 * alarm) may be the one that came, and its EINTR must end the wait.  The
 * faults' signals (the guard's SIGSEGV handler) never end a wait. */
static bool signals_restart(void)
{
	for (int sig = 1; sig < SIGRTMAX; sig++) {
		struct sigaction sa;
		if (sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE ||
		    sig == SIGILL || sig == SIGTRAP || sig == SIGSYS || sigaction(sig, NULL, &sa))
			continue;
		bool handled = (sa.sa_flags & SA_SIGINFO) || (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN);
		if (handled && !(sa.sa_flags & SA_RESTART))
			return false;
	}
	return true;
}

/* Does the channel's descriptor become readable on the sockets' input
 * too (a reader that sleeps in poll() on it receives for itself)?  Not
 * while pollers take that input: every message would wake the reader
 * (UCX's async thread, which watches its ud_verbs channel) to find no
 * event, and it received beside the poller. */
static void channel_watch_input(struct sr_comp_channel *ch, struct sr_context *ctx, bool on)
{
	if (atomic_exchange(&ch->fd_has_input, on) == on)
		return;
	struct epoll_event ev = { .events = EPOLLIN };
	if (epoll_ctl(ch->ibch.fd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, ctx->prog.data_epfd, &ev))
		atomic_store(&ch->fd_has_input, !on);
}

/* The reader does the receive work: with no event waiting it receives
 * what waits on the context's sockets (its pass may write the event),
 * and only then sleeps, on the channel's descriptor, which wakes it for an
 * event or for input.  Several readers each take whole events from the
 * pipe: none is delivered twice.  A descriptor the application made
 * non-blocking returns EAGAIN instead of sleeping, as rdma-core's. */
int sr_get_cq_event(struct ibv_comp_channel *ibch, struct ibv_cq **ibcq, void **cq_context)
{
	struct sr_comp_channel *ch = (struct sr_comp_channel *)ibch;
	struct sr_context *ctx = to_sctx(ibch->context);
	struct sr_cq *cq;

	for (;;) {
		ssize_t r = read(ch->rd_fd, &cq, sizeof(cq));
		if (r == sizeof(cq))
			break;
		if (r < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		bool nonblock = fcntl(ibch->fd, F_GETFL) & O_NONBLOCK;
		bool polled = nonblock && sr_pollers_own_input(ctx);
		if (!polled && sr_chan_receive(ctx))
			continue;
		if (nonblock) {
			channel_watch_input(ch, ctx, !polled);
			/* an event written since our read, by whoever received */
			if (read(ch->rd_fd, &cq, sizeof(cq)) == sizeof(cq))
				break;
			errno = EAGAIN;
			return -1;
		}
		/* a signal ends the wait with EINTR, as in rdma-core: qperf's
		 * alarm stops a test blocked here that way */
		if (sr_chan_wait(ctx, ch->wait_fd) && (errno != EINTR || !signals_restart()))
			return -1;
	}
	atomic_fetch_add(&cq->events_reported, 1);
	*ibcq = (struct ibv_cq *)&cq->ibcq;
	*cq_context = cq->ibcq.cq_context;
	return 0;
}

void sr_ack_cq_events(struct ibv_cq *ibcq, unsigned int n)
{
	pthread_mutex_lock(&ibcq->mutex);
	ibcq->comp_events_completed += n;
	pthread_cond_signal(&ibcq->cond);
	pthread_mutex_unlock(&ibcq->mutex);
}
