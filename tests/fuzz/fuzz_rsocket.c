/* libFuzzer harness for rsockets' control protocol (src/rsocket/rs_data.c):
 * the connection data a peer sends, the 32-bit messages it sends (RDMA
 * writes with immediate, or on iWARP 4-byte sends), the target SGL and
 * target iomap entries it RDMA-writes into our memory, interleaved with
 * the application's rsend/rrecv/riomap/riowrite and with completions of
 * our own work requests, in any order the input chooses.
 *
 * rs_data.c is linked unchanged against a fake RDMA device defined here
 * (ibv_* and rdma_* calls, the QP/CQ ops): the fake NIC checks every work
 * request we post, carries out our RDMA writes into the peer's memory
 * and plays the peer.  The peer is honest until the input makes it send
 * something arbitrary (a raw message, raw bytes into our target area or
 * receive buffer, raw connection data); from then on only the safety
 * invariants are checked.
 *
 * Invariants (abort() on violation):
 *  always:
 *  - every local SGE of a posted work request lies inside a registered MR
 *    of ours with its lkey, or is inline data within the QP's inline limit;
 *  - every RDMA write we post lands inside memory the peer advertised to
 *    us (connection data, an SGE or iomap entry it wrote into our target
 *    area) with that region's rkey;
 *  - we never overfill the send queue, the receive queue or the CQ;
 *  - the peer's writes into our memory go where we told it (our SGL
 *    updates name our receive buffer with its rkey);
 *  - nothing leaks: every MR is deregistered at the end.
 *  while the peer is honest:
 *  - we never send more data messages than the peer's credits allow;
 *  - the peer never overwrites bytes we have not read yet (our receive
 *    buffer is only offered once it is free);
 *  - the byte stream rrecv returns is the one the peer sent, and the bytes
 *    our RDMA writes place are the ones rsend was given, in order;
 *  - the memory a posted work request gathers from does not change until
 *    the work request completes (the staging ring is not reused early).
 */
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
#include <byteswap.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include "fuzz.h"
#include "fuzz_rsocket.h"
#include "rsocket/rsocket.h"

#undef ibv_reg_mr

#define FAKE_FD 4242  /* the descriptor rs_lookup answers for */
#define MAX_INLINE 64 /* the fake device's inline limit */
#define RING 1024     /* > any queue depth the harness configures */
#define PEER_RBUF (1u << 16)
#define PEER_IOMAP_MEM (1u << 16)
#define PEER_IOMAP_ENTRIES 8
#define MAX_ADV 4096

static inline uint8_t pat_out(uint64_t off) /* the bytes our application sends */
{
	return (uint8_t)(off * 131 + (off >> 8) * 7 + 1);
}

static inline uint8_t pat_in(uint64_t off) /* the bytes the peer sends */
{
	return (uint8_t)(off * 73 + (off >> 9) * 11 + 5);
}

/* ---- the fake device ------------------------------------------------------ */

struct fake_mr {
	struct ibv_mr mr;
	bool live;
};

struct adv { /* remote memory the peer offered */
	uint64_t lo, len;
	uint32_t key;
};

struct sent_wr { /* a send WR the NIC has not completed */
	struct ibv_wc wc;
	struct ibv_sge sge[2];
	int nsge;
	uint8_t *snap; /* the bytes gathered at post time (not inline) */
};

struct recv_slot {
	uint64_t wr_id;
	uint64_t addr;
	uint32_t length, lkey;
	bool has_sge;
};

static struct {
	struct ibv_device dev;
	struct ibv_context ctx;
	struct ibv_pd pd;
	struct ibv_cq cq;
	struct ibv_qp qp;
	struct ibv_comp_channel cch;
	struct rdma_cm_id id;
	struct fake_mr mrs[64];
	uint32_t next_key;
	uint32_t max_inline; /* what the QP was given */
	int sq_depth, rq_depth, cq_depth;
	bool qp_error; /* everything completes flushed */
	/* completions waiting to be polled */
	struct ibv_wc cqe[RING];
	int cq_head, cq_n;
	/* our send WRs the NIC has not completed yet, in order */
	struct sent_wr sq[RING];
	int sq_head, sq_n;
	/* posted receives, in order */
	struct recv_slot rq[RING];
	int rq_head, rq_n;
} nic;

static struct {
	bool honest;
	bool be;     /* the peer says it is big-endian */
	uint16_t rq; /* credits it grants at a time */
	/* memory the peer exposes, rkeys of its own */
	uint8_t *tsgl; /* its target SGL (2 entries) then its target iomap */
	size_t tsgl_len;
	uint8_t *rbuf;
	uint8_t *iomap_mem;
	uint32_t tsgl_key, rbuf_key, iomap_key;
	struct adv adv[MAX_ADV];
	int nadv;
	bool adv_full;
	/* the peer as a receiver of our data */
	uint64_t recv_off;	 /* stream bytes that arrived */
	uint64_t app_sent;	 /* stream bytes rsend took */
	uint64_t app_offer;	 /* ... plus those of the rsend under way */
	uint16_t rseq_no;	 /* our data/iomap messages it received */
	uint16_t credit_limit;	 /* what it allowed */
	uint32_t last_write_len; /* iWARP: the write before a DATA send */
	uint32_t grant_off;
	int grant_idx;
	/* the peer as a sender */
	uint16_t sseq_no, sseq_comp;
	int tidx;	       /* its current entry of its target SGL */
	uint64_t sent_off;     /* stream bytes it sent */
	uint64_t app_recv_off; /* stream bytes our application read */
	bool can_send;	       /* it has not shut its sending side */
	/* where the unread bytes of our receive buffer are (ring of segments) */
	uint8_t *unread; /* one flag per byte of our rbuf */
	struct {
		uint32_t pos, n;
	} seg[RING];
	int seg_head, seg_n;
} peer;

static struct rsocket *the_rs;

static struct fake_mr *mr_by_lkey(uint32_t lkey)
{
	for (size_t i = 0; i < sizeof(nic.mrs) / sizeof(nic.mrs[0]); i++)
		if (nic.mrs[i].live && nic.mrs[i].mr.lkey == lkey)
			return &nic.mrs[i];
	return NULL;
}

static bool inside(uint64_t addr, uint64_t len, uint64_t lo, uint64_t rlen)
{
	return addr >= lo && len <= rlen && addr - lo <= rlen - len;
}

static void adv_add(uint64_t lo, uint64_t len, uint32_t key)
{
	if (!len)
		return;
	if (peer.nadv == MAX_ADV) {
		peer.adv_full = true;
		return;
	}
	peer.adv[peer.nadv++] = (struct adv){ lo, len, key };
}

static bool advertised(uint64_t addr, uint64_t len, uint32_t key)
{
	if (peer.adv_full)
		return true; /* too many to remember: no verdict */
	for (int i = 0; i < peer.nadv; i++)
		if (peer.adv[i].key == key && inside(addr, len, peer.adv[i].lo, peer.adv[i].len))
			return true;
	return false;
}

/* The SGEs and iomap entries in our target area, as the peer wrote them. */
static void adv_from_target(void)
{
	struct rsocket *rs = the_rs;

	for (int i = 0; i < RS_SGL_SIZE; i++) {
		struct rs_sge s;

		memcpy(&s, &rs->target_sgl[i], sizeof(s));
		adv_add(s.addr, s.length, s.key);
	}
	for (int i = 0; i < rs->target_iomap_size; i++) {
		struct rs_iomap e;

		memcpy(&e, &rs->target_iomap[i], sizeof(e));
		adv_add(e.sge.addr, e.sge.length, e.sge.key);
	}
}

static void cq_push(const struct ibv_wc *wc)
{
	REQUIRE(nic.cq_n < nic.cq_depth); /* a CQ sized too small overflows */
	REQUIRE(nic.cq_n < RING);
	nic.cqe[(nic.cq_head + nic.cq_n++) % RING] = *wc;
}

/* ---- the peer ---------------------------------------------------------- */

static uint32_t peer_u32(uint32_t v)
{
	return peer.be ? bswap_32(v) : v;
}

static uint64_t peer_u64(uint64_t v)
{
	return peer.be ? bswap_64(v) : v;
}

/* A message from us (immediate data or an iWARP send). */
static void peer_msg(uint32_t msg)
{
	switch (rs_msg_op(msg)) {
	case RS_OP_DATA:
		if (peer.honest)
			REQUIRE(rs_msg_data(msg) == peer.last_write_len);
		/* both take a credit */
		__attribute__((fallthrough));
	case RS_OP_IOMAP_SGL:
		peer.rseq_no++;
		if (peer.honest)
			REQUIRE((int16_t)(peer.credit_limit - peer.rseq_no) >= 0);
		break;
	case RS_OP_SGL:
		peer.sseq_comp = (uint16_t)rs_msg_data(msg);
		break;
	case RS_OP_CTRL:
		if (rs_msg_data(msg) == RS_CTRL_DISCONNECT)
			peer.can_send = false;
		break;
	default:
		REQUIRE(!"we sent a reserved message type");
	}
}

/* Our RDMA write of n bytes (gathered in buf) to the peer's memory. */
static void peer_write(uint64_t addr, uint32_t rkey, const uint8_t *buf, uint32_t n, uint32_t wr_msg, bool data)
{
	if (!n)
		return; /* touches no memory: address and key are not checked */
	REQUIRE(advertised(addr, n, rkey));
	if (rkey == peer.rbuf_key && inside(addr, n, (uintptr_t)peer.rbuf, PEER_RBUF)) {
		memcpy((void *)(uintptr_t)addr, buf, n);
		if (peer.honest && data && rs_msg_op(wr_msg) == RS_OP_DATA) {
			for (uint32_t i = 0; i < n; i++)
				REQUIRE(buf[i] == pat_out(peer.recv_off + i));
			peer.recv_off += n;
			REQUIRE(peer.recv_off <= peer.app_offer);
		}
	} else if (rkey == peer.tsgl_key && inside(addr, n, (uintptr_t)peer.tsgl, peer.tsgl_len)) {
		memcpy((void *)(uintptr_t)addr, buf, n);
	} else if (rkey == peer.iomap_key && inside(addr, n, (uintptr_t)peer.iomap_mem, PEER_IOMAP_MEM)) {
		memcpy((void *)(uintptr_t)addr, buf, n);
	}
	/* else: memory named by a dishonest peer's advertisement; its NIC
	 * decides, nothing of ours is at stake */
	peer.last_write_len = n;
}

/* ---- verbs ops of the fake QP and CQ ----------------------------------- */

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	for (; wr; wr = wr->next) {
		uint8_t buf[RS_MAX_TRANSFER + 64];
		uint32_t n = 0;
		struct ibv_wc wc = { .wr_id = wr->wr_id, .qp_num = qp->qp_num };

		REQUIRE(nic.sq_n < nic.sq_depth); /* the send queue overflows */
		for (int i = 0; i < wr->num_sge; i++) {
			const struct ibv_sge *s = &wr->sg_list[i];

			REQUIRE(s->length <= sizeof(buf) - n);
			if (!(wr->send_flags & IBV_SEND_INLINE)) {
				struct fake_mr *m = mr_by_lkey(s->lkey);

				REQUIRE(m && inside(s->addr, s->length, (uintptr_t)m->mr.addr, m->mr.length));
			}
			memcpy(buf + n, (const void *)(uintptr_t)s->addr, s->length);
			n += s->length;
		}
		if (wr->send_flags & IBV_SEND_INLINE)
			REQUIRE(n <= nic.max_inline);
		switch (wr->opcode) {
		case IBV_WR_RDMA_WRITE_WITH_IMM:
			wc.opcode = IBV_WC_RDMA_WRITE;
			if (nic.qp_error)
				break;
			peer_write(wr->wr.rdma.remote_addr, wr->wr.rdma.rkey, buf, n, (uint32_t)wr->wr_id, true);
			peer.last_write_len = n;
			peer_msg(be32toh(wr->imm_data));
			break;
		case IBV_WR_RDMA_WRITE:
			wc.opcode = IBV_WC_RDMA_WRITE;
			if (nic.qp_error)
				break;
			peer_write(wr->wr.rdma.remote_addr, wr->wr.rdma.rkey, buf, n, (uint32_t)wr->wr_id, true);
			peer.last_write_len = n;
			break;
		case IBV_WR_SEND: {
			uint32_t m;

			wc.opcode = IBV_WC_SEND;
			REQUIRE(the_rs->msg_send && n == sizeof(m));
			if (nic.qp_error)
				break;
			memcpy(&m, buf, sizeof(m));
			peer_msg(m);
			break;
		}
		default:
			REQUIRE(!"an opcode rsockets never posts");
		}
		wc.status = nic.qp_error ? IBV_WC_WR_FLUSH_ERR : IBV_WC_SUCCESS;
		{
			struct sent_wr *w = &nic.sq[(nic.sq_head + nic.sq_n++) % RING];

			memset(w, 0, sizeof(*w));
			w->wc = wc;
			if (!(wr->send_flags & IBV_SEND_INLINE) && n && wr->num_sge <= 2) {
				w->nsge = wr->num_sge;
				memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(w->sge[0]));
				w->snap = fz_dup(buf, n);
			}
		}
	}
	*bad = NULL;
	return 0;
}

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)qp;
	for (; wr; wr = wr->next) {
		struct recv_slot r = { .wr_id = wr->wr_id };

		REQUIRE(nic.rq_n < nic.rq_depth); /* the receive queue overflows */
		REQUIRE(wr->num_sge <= 1);
		if (wr->num_sge) {
			struct fake_mr *m = mr_by_lkey(wr->sg_list[0].lkey);

			REQUIRE(m && inside(wr->sg_list[0].addr, wr->sg_list[0].length, (uintptr_t)m->mr.addr,
					    m->mr.length));
			r.has_sge = true;
			r.addr = wr->sg_list[0].addr;
			r.length = wr->sg_list[0].length;
			r.lkey = wr->sg_list[0].lkey;
		}
		if (nic.qp_error) {
			struct ibv_wc wc = { .wr_id = r.wr_id, .status = IBV_WC_WR_FLUSH_ERR, .opcode = IBV_WC_RECV };

			cq_push(&wc);
			continue;
		}
		nic.rq[(nic.rq_head + nic.rq_n++) % RING] = r;
	}
	*bad = NULL;
	return 0;
}

static int fake_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
	int n = 0;

	(void)cq;
	while (n < num && nic.cq_n) {
		wc[n++] = nic.cqe[nic.cq_head];
		nic.cq_head = (nic.cq_head + 1) % RING;
		nic.cq_n--;
	}
	return n;
}

static int fake_req_notify_cq(struct ibv_cq *cq, int solicited)
{
	(void)cq;
	(void)solicited;
	return 0;
}

/* ---- the verbs and rdma_cm calls rs_data.c makes ------------------------------ */

int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	(void)c;
	memset(a, 0, sizeof(*a));
	a->max_qp_wr = 4096;
	a->max_cqe = 65536;
	return 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
	nic.pd.context = c;
	return &nic.pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	(void)pd;
	return 0;
}

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c)
{
	nic.cch.context = c;
	nic.cch.fd = eventfd(0, EFD_CLOEXEC);
	return nic.cch.fd < 0 ? NULL : &nic.cch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	close(ch->fd);
	return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *cq_context, struct ibv_comp_channel *ch,
			     int comp_vector)
{
	(void)comp_vector;
	nic.cq.context = c;
	nic.cq.cq_context = cq_context;
	nic.cq.channel = ch;
	nic.cq.cqe = cqe;
	nic.cq_depth = cqe;
	return &nic.cq;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	(void)cq;
	return 0;
}

int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **ctx)
{
	(void)ch;
	(void)cq;
	(void)ctx;
	errno = EAGAIN;
	return -1;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int n)
{
	(void)cq;
	(void)n;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	for (size_t i = 0; i < sizeof(nic.mrs) / sizeof(nic.mrs[0]); i++) {
		struct fake_mr *m = &nic.mrs[i];

		if (m->live)
			continue;
		memset(m, 0, sizeof(*m));
		m->live = true;
		m->mr.pd = pd;
		m->mr.context = pd->context;
		m->mr.addr = addr;
		m->mr.length = length;
		m->mr.lkey = ++nic.next_key;
		m->mr.rkey = 0x5000000u | nic.next_key;
		m->mr.handle = (uint32_t)access;
		return &m->mr;
	}
	errno = ENOMEM;
	return NULL;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	REQUIRE(iova == (uintptr_t)addr);
	return ibv_reg_mr(pd, addr, length, (int)access);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct fake_mr *m = (struct fake_mr *)mr;

	REQUIRE(m->live);
	m->live = false;
	return 0;
}

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qa)
{
	REQUIRE(qa->cap.max_send_wr < RING && qa->cap.max_recv_wr < RING);
	nic.qp.context = &nic.ctx;
	nic.qp.pd = pd;
	nic.qp.qp_num = 0x1234;
	nic.qp.qp_type = IBV_QPT_RC;
	nic.qp.send_cq = qa->send_cq;
	nic.qp.recv_cq = qa->recv_cq;
	nic.sq_depth = (int)qa->cap.max_send_wr;
	nic.rq_depth = (int)qa->cap.max_recv_wr;
	if (qa->cap.max_inline_data > MAX_INLINE)
		qa->cap.max_inline_data = MAX_INLINE;
	nic.max_inline = qa->cap.max_inline_data;
	id->qp = &nic.qp;
	return 0;
}

void rdma_destroy_qp(struct rdma_cm_id *id)
{
	id->qp = NULL;
}

void rs_cm_progress(struct rsocket *rs, bool force)
{
	(void)rs;
	(void)force;
}

struct rsocket *rs_lookup(int fd)
{
	return fd == FAKE_FD ? the_rs : NULL;
}

/* rs_dgram.c: the harness's socket is a stream, never a datagram one */
struct rsocket *ds_enter(int fd)
{
	(void)fd;
	return NULL;
}

ssize_t ds_leave(struct rsocket *rs, ssize_t ret)
{
	(void)rs;
	return ret;
}

void ds_progress(struct rsocket *rs, bool force)
{
	(void)rs;
	(void)force;
}

bool ds_arm(struct rsocket *rs)
{
	(void)rs;
	return false;
}

short ds_poll_events(struct rsocket *rs, short events)
{
	(void)rs;
	return events & 0;
}

ssize_t ds_sendv(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags, const struct sockaddr *to,
		 socklen_t tolen)
{
	(void)rs, (void)iov, (void)iovcnt, (void)flags, (void)to, (void)tolen;
	return rs_fail(EBADF);
}

ssize_t ds_recvv(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags, struct sockaddr *from,
		 socklen_t *fromlen, int *msg_flags)
{
	(void)rs, (void)iov, (void)iovcnt, (void)flags, (void)from, (void)fromlen, (void)msg_flags;
	return rs_fail(EBADF);
}

uint64_t rs_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	(void)socket;
	(void)addr;
	(void)addrlen;
	errno = ENOTCONN;
	return -1;
}

/* ---- the NIC and the peer acting ------------------------------------------------ */

/* A message from the peer: takes our next posted receive (false: none,
 * the peer's NIC would retry). */
static bool deliver_msg(uint32_t msg, uint32_t byte_len)
{
	struct ibv_wc wc = { .status = IBV_WC_SUCCESS, .qp_num = 0x1234 };
	struct recv_slot r;

	if (nic.qp_error || !nic.rq_n)
		return false;
	r = nic.rq[nic.rq_head];
	nic.rq_head = (nic.rq_head + 1) % RING;
	nic.rq_n--;
	wc.wr_id = r.wr_id;
	if (the_rs->msg_send) {
		REQUIRE(r.has_sge && r.length >= sizeof(msg));
		memcpy((void *)(uintptr_t)r.addr, &msg, sizeof(msg));
		wc.opcode = IBV_WC_RECV;
		wc.byte_len = sizeof(msg);
	} else {
		wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
		wc.wc_flags = IBV_WC_WITH_IMM;
		wc.imm_data = htobe32(msg);
		wc.byte_len = byte_len;
	}
	cq_push(&wc);
	return true;
}

/* The oldest send WR leaves the NIC. */
static struct ibv_wc sq_pop(bool check)
{
	struct sent_wr *w = &nic.sq[nic.sq_head];
	struct ibv_wc wc = w->wc;

	if (w->snap && check) {
		/* a real NIC may read the memory any time until it completes */
		size_t off = 0;

		for (int i = 0; i < w->nsge; i++) {
			REQUIRE(!memcmp(w->snap + off, (const void *)(uintptr_t)w->sge[i].addr, w->sge[i].length));
			off += w->sge[i].length;
		}
	}
	free(w->snap);
	w->snap = NULL;
	nic.sq_head = (nic.sq_head + 1) % RING;
	nic.sq_n--;
	return wc;
}

static void nic_complete(int k)
{
	while (k-- > 0 && nic.sq_n) {
		struct ibv_wc wc = sq_pop(true);

		cq_push(&wc);
	}
}

/* The QP breaks: the first outstanding send fails with status, the rest
 * and every receive flush, as a real RC QP does. */
static void nic_error(enum ibv_wc_status status)
{
	bool first = true;

	if (nic.qp_error)
		return;
	nic.qp_error = true;
	while (nic.sq_n) {
		struct ibv_wc wc = sq_pop(false);

		if (wc.status == IBV_WC_SUCCESS)
			wc.status = first ? status : IBV_WC_WR_FLUSH_ERR;
		first = false;
		cq_push(&wc);
	}
	while (nic.rq_n) {
		struct ibv_wc wc = { .wr_id = nic.rq[nic.rq_head].wr_id,
				     .status = IBV_WC_WR_FLUSH_ERR,
				     .opcode = IBV_WC_RECV };

		nic.rq_head = (nic.rq_head + 1) % RING;
		nic.rq_n--;
		cq_push(&wc);
	}
}

/* The peer sends n bytes of its stream into our buffer, as its view of
 * our target SGL (what we wrote into its memory) allows. */
static void peer_send_data(uint32_t want)
{
	struct rsocket *rs = the_rs;
	struct rs_sge *t = (struct rs_sge *)peer.tsgl + peer.tidx;
	uint64_t addr;
	uint32_t len, key, n, pos;

	/* no receive posted: the peer's NIC would retry (RNR) */
	if (!peer.honest || !peer.can_send || !want || peer.sseq_no == peer.sseq_comp || !nic.rq_n || nic.qp_error)
		return;
	addr = peer_u64(t->addr);
	len = peer_u32(t->length);
	key = peer_u32(t->key);
	if (!len)
		return;
	n = want < len ? want : len;
	/* where we told the peer to write: our receive buffer */
	REQUIRE(key == rs->rmr->rkey && inside(addr, n, (uintptr_t)rs->rbuf, rs->rbuf_size));
	pos = (uint32_t)(addr - (uintptr_t)rs->rbuf);
	for (uint32_t i = 0; i < n; i++) {
		REQUIRE(!peer.unread[pos + i]); /* offered before it was read */
		peer.unread[pos + i] = 1;
		rs->rbuf[pos + i] = pat_in(peer.sent_off + i);
	}
	REQUIRE(peer.seg_n < RING);
	peer.seg[(peer.seg_head + peer.seg_n++) % RING].pos = pos;
	peer.seg[(peer.seg_head + peer.seg_n - 1) % RING].n = n;
	t->addr = peer_u64(addr + n);
	t->length = peer_u32(len - n);
	if (len == n)
		peer.tidx = (peer.tidx + 1) % RS_SGL_SIZE;
	peer.sent_off += n;
	peer.sseq_no++;
	REQUIRE(deliver_msg(rs_msg(RS_OP_DATA, n), n));
}

/* Our application consumed n bytes of the peer's stream. */
static void app_consumed(size_t n)
{
	while (n) {
		uint32_t *pos = &peer.seg[peer.seg_head].pos, *len = &peer.seg[peer.seg_head].n;
		uint32_t k;

		REQUIRE(peer.seg_n);
		k = n < *len ? (uint32_t)n : *len;
		memset(peer.unread + *pos, 0, k);
		*pos += k;
		*len -= k;
		n -= k;
		if (!*len) {
			peer.seg_head = (peer.seg_head + 1) % RING;
			peer.seg_n--;
		}
	}
}

/* The peer offers more of its receive buffer (a target SGE update into
 * the entry of ours we have used up) with credits. */
static void peer_grant(uint32_t g)
{
	struct rsocket *rs = the_rs;
	struct rs_sge s;
	int j = peer.grant_idx;

	if (!peer.honest || nic.qp_error || !nic.rq_n || rs->target_sgl[j].length)
		return;
	g = 1 + g % (PEER_RBUF / 4);
	if (peer.grant_off + g > PEER_RBUF)
		peer.grant_off = 0;
	s.addr = (uintptr_t)peer.rbuf + peer.grant_off;
	s.length = g;
	s.key = peer.rbuf_key;
	adv_add(s.addr, s.length, s.key);
	memcpy(&rs->target_sgl[j], &s, sizeof(s));
	peer.grant_off += g;
	peer.grant_idx = (j + 1) % RS_SGL_SIZE;
	peer.credit_limit = (uint16_t)(peer.rseq_no + peer.rq);
	deliver_msg(rs_msg(RS_OP_SGL, peer.credit_limit), 0);
}

static void peer_credit(void)
{
	if (!peer.honest || nic.qp_error || !nic.rq_n)
		return;
	peer.credit_limit = (uint16_t)(peer.rseq_no + peer.rq);
	deliver_msg(rs_msg(RS_OP_SGL, peer.credit_limit), 0);
}

/* The peer maps memory for our riowrite: an entry of our target iomap. */
static void peer_iomap(struct fz *f)
{
	struct rsocket *rs = the_rs;
	int i;
	struct rs_iomap e;
	uint32_t o, len;

	if (!rs->target_iomap_size || !peer.honest || nic.qp_error || !nic.rq_n || peer.sseq_no == peer.sseq_comp)
		return;
	i = fz_u8(f) % rs->target_iomap_size;
	o = fz_u16(f) % PEER_IOMAP_MEM;
	len = 1 + fz_u16(f) % (PEER_IOMAP_MEM - o);
	e.offset = fz_u16(f);
	e.sge.addr = (uintptr_t)peer.iomap_mem + o;
	e.sge.length = len;
	e.sge.key = peer.iomap_key;
	adv_add(e.sge.addr, len, e.sge.key);
	memcpy(&rs->target_iomap[i], &e, sizeof(e));
	peer.sseq_no++;
	deliver_msg(rs_msg(RS_OP_IOMAP_SGL, (uint32_t)i), 0);
}

/* ---- the application ----------------------------------------------------------- */

static void app_send(struct fz *f)
{
	size_t n = fz_u16(f) % (3 * RS_MAX_TRANSFER);
	uint8_t *buf = malloc(n ? n : 1);
	ssize_t r;

	REQUIRE(buf);
	for (size_t i = 0; i < n; i++)
		buf[i] = pat_out(peer.app_sent + i);
	peer.app_offer = peer.app_sent + n;
	r = rsend(FAKE_FD, buf, n, MSG_DONTWAIT);
	REQUIRE(r == -1 || (size_t)r <= n);
	if (r > 0)
		peer.app_sent += (size_t)r;
	peer.app_offer = peer.app_sent;
	if (peer.honest)
		REQUIRE(peer.recv_off <= peer.app_sent);
	free(buf);
}

static void app_recv(struct fz *f)
{
	uint8_t sel = fz_u8(f);
	size_t n = fz_u16(f) % (3 * RS_MAX_TRANSFER);
	int flags = MSG_DONTWAIT | (sel & 1 ? MSG_PEEK : 0) | (sel & 2 ? MSG_WAITALL : 0);
	uint8_t *buf = malloc(n ? n : 1);
	ssize_t r = rrecv(FAKE_FD, buf, n, flags);

	REQUIRE(r == -1 || (size_t)r <= n);
	if (r > 0 && peer.honest) {
		for (ssize_t i = 0; i < r; i++)
			REQUIRE(buf[i] == pat_in(peer.app_recv_off + (uint64_t)i));
		REQUIRE(peer.app_recv_off + (uint64_t)r <= peer.sent_off);
		if (!(flags & MSG_PEEK)) {
			peer.app_recv_off += (uint64_t)r;
			app_consumed((size_t)r);
		}
	}
	free(buf);
}

static uint8_t *iomap_buf[4];
static size_t iomap_len[4];

/* riomap a buffer, or riounmap it if it is mapped */
static void app_riomap(struct fz *f)
{
	int k = fz_u8(f) & 3;
	size_t len = 1 + fz_u16(f) % 8192;
	off_t off = fz_u16(f);

	if (iomap_buf[k]) {
		if (!riounmap(FAKE_FD, iomap_buf[k], iomap_len[k])) {
			free(iomap_buf[k]);
			iomap_buf[k] = NULL;
		}
		return;
	}
	iomap_len[k] = len;
	iomap_buf[k] = calloc(1, len);
	REQUIRE(iomap_buf[k]);
	if (riomap(FAKE_FD, iomap_buf[k], len, PROT_WRITE, 0, off) == -1) {
		free(iomap_buf[k]);
		iomap_buf[k] = NULL;
	}
}

static void app_riowrite(struct fz *f)
{
	size_t n = fz_u16(f) % (2 * RS_MAX_TRANSFER);
	off_t off = fz_u16(f);
	uint8_t *buf = calloc(1, n ? n : 1);

	REQUIRE(buf);
	(void)riowrite(FAKE_FD, buf, n, off, MSG_DONTWAIT);
	free(buf);
}

/* ---- setup and teardown ------------------------------------------------------- */

static void conn_data_honest(struct rs_conn_data *c, uint16_t credits)
{
	/* the peer's target SGL entry 0 is the buffer our connection data
	 * offers, as rs_save_conn_data does on the other side */
	memset(c, 0, sizeof(*c));
	c->version = RS_PROTO_VERSION;
	c->flags = RS_CONN_FLAG_IOMAP | (peer.be ? RS_CONN_FLAG_NET : 0);
	c->credits = htobe16(credits);
	c->target_iomap_size = PEER_IOMAP_ENTRIES;
	c->target_sgl.addr = htobe64((uintptr_t)peer.tsgl);
	c->target_sgl.length = htobe32(RS_SGL_SIZE);
	c->target_sgl.key = htobe32(peer.tsgl_key);
	c->data_buf.addr = htobe64((uintptr_t)peer.rbuf);
	c->data_buf.length = htobe32(PEER_RBUF / 2);
	c->data_buf.key = htobe32(peer.rbuf_key);
	adv_add((uintptr_t)peer.tsgl, peer.tsgl_len, peer.tsgl_key);
	adv_add((uintptr_t)peer.rbuf, PEER_RBUF / 2, peer.rbuf_key);
	peer.grant_off = PEER_RBUF / 2;
}

static struct rsocket *setup(struct fz *f)
{
	struct rsocket *rs = calloc(1, sizeof(*rs));
	uint8_t cfg = fz_u8(f);
	static const uint16_t inl[] = { 0, 4, 16, 64 };
	struct rs_conn_data ours, theirs;

	REQUIRE(rs);
	memset(&nic, 0, sizeof(nic));
	memset(&peer, 0, sizeof(peer));
	nic.dev.transport_type = cfg & 1 ? IBV_TRANSPORT_IWARP : IBV_TRANSPORT_IB;
	nic.ctx.device = &nic.dev;
	nic.ctx.ops.post_send = fake_post_send;
	nic.ctx.ops.post_recv = fake_post_recv;
	nic.ctx.ops.poll_cq = fake_poll_cq;
	nic.ctx.ops.req_notify_cq = fake_req_notify_cq;
	nic.id.verbs = &nic.ctx;
	peer.honest = !(cfg & 2);
	peer.be = cfg & 4;
	peer.can_send = true;
	peer.grant_idx = 1; /* entry 0 holds the buffer of the connection data */

	pthread_mutex_init(&rs->lock, NULL);
	pthread_cond_init(&rs->cond, NULL);
	rs->kick_fd = -1;
	rs->domain = AF_INET;
	rs->fs_flags = O_NONBLOCK;
	rs->cm_id = &nic.id;
	rs->sq_size = (uint16_t)(16 + fz_u8(f) % 49);
	rs->rq_size = (uint16_t)(16 + fz_u8(f) % 49);
	rs->sbuf_size = 4096u * (1 + fz_u8(f) % 32);
	rs->rbuf_size = 256u * (1 + fz_u8(f) % 128);
	rs->sq_inline = inl[(cfg >> 3) & 3];
	rs->target_iomap_size = rs_round_iomap_size(fz_u8(f) % 9);
	peer.rq = (uint16_t)(1 + fz_u8(f) % 64);
	rs->index = epoll_create1(EPOLL_CLOEXEC);
	REQUIRE(rs->index >= 0);
	the_rs = rs;
	if (rs_create_ep(rs)) {
		rs_free_ep(rs);
		return rs;
	}
	REQUIRE(nic.rq_n == rs->rq_size); /* every receive posted */

	peer.tsgl_len = RS_SGL_SIZE * sizeof(struct rs_sge) + PEER_IOMAP_ENTRIES * sizeof(struct rs_iomap);
	peer.tsgl = calloc(1, peer.tsgl_len);
	/* the peer's memory: its contents matter to nobody, so it is not
	 * cleared for each input */
	{
		static uint8_t rbuf[PEER_RBUF], iomap_mem[PEER_IOMAP_MEM];

		peer.rbuf = rbuf;
		peer.iomap_mem = iomap_mem;
	}
	peer.unread = calloc(1, rs->rbuf_size ? rs->rbuf_size : 1);
	REQUIRE(peer.tsgl && peer.rbuf && peer.iomap_mem && peer.unread);
	peer.tsgl_key = 0x7100001;
	peer.rbuf_key = 0x7100002;
	peer.iomap_key = 0x7100003;

	/* our connection data, as the peer saves it: its target SGL entry 0 */
	rs_format_conn_data(rs, &ours);
	REQUIRE(be32toh(ours.data_buf.key) == rs->rmr->rkey);
	{
		struct rs_sge *t = (struct rs_sge *)peer.tsgl;

		t->addr = peer_u64(be64toh(ours.data_buf.addr));
		t->length = peer_u32(be32toh(ours.data_buf.length));
		t->key = peer_u32(be32toh(ours.data_buf.key));
		peer.sseq_comp = be16toh(ours.credits);
	}
	if (peer.honest) {
		conn_data_honest(&theirs, peer.rq);
		peer.credit_limit = peer.rq;
	} else {
		memset(&theirs, 0, sizeof(theirs));
		fz_bytes(f, &theirs, sizeof(theirs));
	}
	if (rs_save_conn_data(rs, &theirs, sizeof(theirs))) {
		rs_free_ep(rs);
		return rs;
	}
	if (!peer.honest) {
		/* what the connection data advertised */
		uint64_t n = rs->remote_sgl.length;

		adv_add(rs->remote_sgl.addr, n * sizeof(struct rs_sge), rs->remote_sgl.key);
		adv_add(rs->remote_iomap.addr, (uint64_t)rs->remote_iomap.length * sizeof(struct rs_iomap),
			rs->remote_iomap.key);
		adv_from_target();
	}
	rs->state = RS_CONNECTED;
	rs->readable = rs->writable = true;
	return rs;
}

static void teardown(struct rsocket *rs)
{
	while (nic.sq_n)
		sq_pop(false);
	rs_free_ep(rs);
	for (size_t i = 0; i < sizeof(nic.mrs) / sizeof(nic.mrs[0]); i++)
		REQUIRE(!nic.mrs[i].live); /* an MR was not deregistered */
	for (int k = 0; k < 4; k++) {
		free(iomap_buf[k]);
		iomap_buf[k] = NULL;
	}
	close(rs->index);
	pthread_mutex_destroy(&rs->lock);
	pthread_cond_destroy(&rs->cond);
	free(rs);
	free(peer.tsgl);
	free(peer.unread);
	the_rs = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = { data, size };
	struct rsocket *rs = setup(&f);
	int steps = 0;

	while (rs->cq && fz_left(&f) && steps++ < 4096) {
		switch ((enum fz_rs_op)(fz_u8(&f) % FZ_RS_OP_COUNT)) {
		case FZ_RS_APP_SEND:
			app_send(&f);
			break;
		case FZ_RS_APP_RECV:
			app_recv(&f);
			break;
		case FZ_RS_APP_PROGRESS:
			pthread_mutex_lock(&rs->lock);
			rs_progress(rs, false);
			(void)rs_poll_events(rs, POLLIN | POLLOUT);
			pthread_mutex_unlock(&rs->lock);
			break;
		case FZ_RS_APP_RIOMAP:
			app_riomap(&f);
			break;
		case FZ_RS_APP_RIOWRITE:
			app_riowrite(&f);
			break;
		case FZ_RS_APP_CTRL: {
			/* what rshutdown/rclose post */
			enum rs_ctrl c = fz_u8(&f) & 1 ? RS_CTRL_SHUTDOWN : RS_CTRL_DISCONNECT;

			pthread_mutex_lock(&rs->lock);
			if (rs->state == RS_CONNECTED && rs_ctrl_avail(rs) && !rs_post_ctrl(rs, c)) {
				if (c == RS_CTRL_SHUTDOWN) {
					rs->writable = false;
					rs->local_wr_shut = true;
				}
			}
			pthread_mutex_unlock(&rs->lock);
			break;
		}
		case FZ_RS_NIC_COMPLETE:
			nic_complete(1 + fz_u8(&f) % 16);
			break;
		case FZ_RS_NIC_ERROR: {
			static const enum ibv_wc_status st[] = { IBV_WC_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR,
								 IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_OP_ERR };

			nic_error(st[fz_u8(&f) & 3]);
			break;
		}
		case FZ_RS_PEER_DATA:
			peer_send_data(fz_u16(&f) % (2 * RS_MAX_TRANSFER));
			break;
		case FZ_RS_PEER_GRANT:
			peer_grant(fz_u32(&f));
			break;
		case FZ_RS_PEER_CREDIT:
			peer_credit();
			break;
		case FZ_RS_PEER_IOMAP:
			peer_iomap(&f);
			break;
		case FZ_RS_PEER_CTRL:
			if (!peer.honest || nic.qp_error || !nic.rq_n)
				break;
			if (fz_u8(&f) & 1) {
				peer.can_send = false;
				deliver_msg(rs_msg(RS_OP_CTRL, RS_CTRL_SHUTDOWN), 0);
			} else {
				peer.can_send = false;
				deliver_msg(rs_msg(RS_OP_CTRL, RS_CTRL_DISCONNECT), 0);
			}
			break;
		case FZ_RS_RAW_MSG: {
			uint32_t m = fz_u32(&f);

			peer.honest = false;
			deliver_msg(m, fz_u32(&f));
			break;
		}
		case FZ_RS_RAW_TARGET: {
			/* the peer may write anywhere in the target area we exposed */
			size_t len = rs->target_mr->length;
			size_t off = fz_u16(&f) % len;
			size_t n = fz_u8(&f) % (len - off + 1);

			peer.honest = false;
			fz_bytes(&f, (uint8_t *)rs->target_buf + off, n);
			adv_from_target();
			break;
		}
		case FZ_RS_RAW_RBUF: {
			size_t off = fz_u16(&f) % rs->rbuf_size;
			size_t n = fz_u8(&f) % (rs->rbuf_size - off + 1);

			peer.honest = false;
			fz_bytes(&f, rs->rbuf + off, n);
			break;
		}
		default:
			break;
		}
	}
	teardown(rs);
	return 0;
}
