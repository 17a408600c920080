/* rsockets data path: the connection's buffers and QP, work requests,
 * completions, flow control (credits and target SGEs), waiting, and the
 * send/receive calls with their iomap (zero-copy) extensions.
 *
 * Every function here runs with rs->lock held unless it is an exported
 * entry point, which takes it.  See rsocket.h for the protocol. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <byteswap.h>
#include <limits.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <infiniband/verbs.h>

#include "abi/export.h"
#include "rsocket/rsocket.h"

static bool rs_host_is_be(void)
{
	return __BYTE_ORDER == __BIG_ENDIAN;
}

/* rdma-core's compact encoding of the iomap size in one byte: exact up
 * to 128, then multiples of 256 */
static int rs_value_to_scale(int value, int bits)
{
	return value <= (1 << (bits - 1)) ? value : (1 << (bits - 1)) | (value >> bits);
}

static int rs_scale_to_value(int value, int bits)
{
	return value <= (1 << (bits - 1)) ? value : (value & ~(1 << (bits - 1))) << bits;
}

uint16_t rs_round_iomap_size(int value)
{
	if (value < 0)
		value = 0;
	if (value > 0x7fff)
		value = 0x7fff;
	return (uint16_t)rs_scale_to_value((uint8_t)rs_value_to_scale(value, 8), 8);
}

/* Registered memory is whole pages, zeroed (as rdma-core's, so that a
 * fork-safe MADV_DONTFORK never covers foreign data). */
static void *rs_page_alloc(size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p;

	len = (len + (size_t)page - 1) / (size_t)page * (size_t)page;
	if (posix_memalign(&p, (size_t)page, len))
		return NULL;
	memset(p, 0, len);
	return p;
}

/* ---- endpoint: QP, CQ, buffers ------------------------------------------ */

static int rs_post_recv(struct rsocket *rs)
{
	struct ibv_recv_wr wr = { 0 }, *bad;
	struct ibv_sge sge;
	int err;

	if (!rs->msg_send) {
		/* a write with immediate only consumes the WR: no buffer */
		wr.wr_id = RS_WR_ID_RECV;
	} else {
		wr.wr_id = RS_WR_ID_RECV | (uint64_t)rs->rbuf_msg_index;
		sge.addr = (uintptr_t)rs->rbuf + rs->rbuf_size + (size_t)rs->rbuf_msg_index * RS_MSG_SIZE;
		sge.length = RS_MSG_SIZE;
		sge.lkey = rs->rmr->lkey;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		if (++rs->rbuf_msg_index == rs->rq_size)
			rs->rbuf_msg_index = 0;
	}
	err = ibv_post_recv(rs->cm_id->qp, &wr, &bad);
	return err ? rs_fail(err) : 0;
}

static void rs_set_qp_size(struct rsocket *rs, const struct ibv_device_attr *da)
{
	int max = RS_QP_MAX_SIZE;

	if (da && da->max_qp_wr > 0 && da->max_qp_wr < max)
		max = da->max_qp_wr;
	if (rs->sq_size > max)
		rs->sq_size = (uint16_t)max;
	if (rs->sq_size < RS_QP_MIN_SIZE)
		rs->sq_size = RS_QP_MIN_SIZE;
	if (rs->rq_size > max)
		rs->rq_size = (uint16_t)max;
	if (rs->rq_size < RS_QP_MIN_SIZE)
		rs->rq_size = RS_QP_MIN_SIZE;
}

int rs_epoll_add(struct rsocket *rs, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(rs->index, EPOLL_CTL_ADD, fd, &ev);
}

static int rs_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	return 0;
}

/* iWARP devices cannot write with immediate: messages go as sends.  The
 * environment variable lets the tests run that mode on RoCE (both ends
 * must agree, as both ends of an iWARP link do). */
static bool rs_want_msg_send(struct rdma_cm_id *id)
{
	const char *e = getenv("SOFTRDMA_RSOCKET_MSG_SEND");

	if (e && *e == '1')
		return true;
	return id->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
}

static int rs_init_bufs(struct rsocket *rs)
{
	size_t len;

	rs->rmsg = calloc((size_t)rs->rq_size + 1, sizeof(*rs->rmsg));
	if (!rs->rmsg)
		return rs_fail(ENOMEM);

	/* the staging ring, then one slot per control message in flight
	 * (used when the device's inline limit is below an rs_sge) */
	len = rs->sbuf_size + RS_MAX_CTRL_MSG * RS_QP_CTRL_SIZE;
	rs->sbuf = rs_page_alloc(len);
	if (!rs->sbuf)
		return rs_fail(ENOMEM);
	rs->smr = ibv_reg_mr(rs->pd, rs->sbuf, len, IBV_ACCESS_LOCAL_WRITE);
	if (!rs->smr)
		return -1;

	len = sizeof(struct rs_sge) * RS_SGL_SIZE + sizeof(struct rs_iomap) * rs->target_iomap_size;
	rs->target_buf = rs_page_alloc(len);
	if (!rs->target_buf)
		return rs_fail(ENOMEM);
	rs->target_mr = ibv_reg_mr(rs->pd, rs->target_buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!rs->target_mr)
		return -1;
	rs->target_sgl = rs->target_buf;
	rs->target_iomap = rs->target_iomap_size ? (struct rs_iomap *)(rs->target_sgl + RS_SGL_SIZE) : NULL;

	len = rs->rbuf_size;
	if (rs->msg_send)
		len += (size_t)rs->rq_size * RS_MSG_SIZE;
	rs->rbuf = rs_page_alloc(len);
	if (!rs->rbuf)
		return rs_fail(ENOMEM);
	rs->rmr = ibv_reg_mr(rs->pd, rs->rbuf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!rs->rmr)
		return -1;

	rs->sbuf_head = 0;
	rs->sbuf_bytes_avail = rs->sbuf_size;
	/* The conn data offers the whole of rbuf; each half is offered
	 * again (a target SGE update) once it has been read.  rdma-core
	 * offers the first half only and the second with its first credit
	 * update, which needs the receiver to call in: a sender could not
	 * fill the buffer of a receiver that is busy elsewhere, as TCP's
	 * can.  The two agree on the wire: the first update goes to entry 1
	 * and covers [0, half), which the sender has finished with once it
	 * has been read. */
	rs->rbuf_free_offset = 0;
	rs->rbuf_bytes_avail = 0;
	rs->ctrl_seqno = 0;
	rs->ctrl_max_seqno = RS_QP_CTRL_SIZE;
	rs->sqe_avail = rs->sq_size - RS_QP_CTRL_SIZE;
	rs->rseq_comp = rs->rq_size >> 1;
	return 0;
}

int rs_create_ep(struct rsocket *rs)
{
	struct rdma_cm_id *id = rs->cm_id;
	struct ibv_device_attr da;
	struct ibv_qp_init_attr qa;
	bool have_da;
	int cqe;

	have_da = !ibv_query_device(id->verbs, &da);
	rs_set_qp_size(rs, have_da ? &da : NULL);
	rs->msg_send = rs_want_msg_send(id);
	if (rs->msg_send && rs->sq_inline < RS_MSG_SIZE)
		rs->sq_inline = RS_MSG_SIZE;
	/* both halves of rbuf must be equal for the ring to wrap where the
	 * second buffer ends */
	rs->rbuf_size &= ~1u;

	rs->pd = ibv_alloc_pd(id->verbs);
	if (!rs->pd)
		return -1;
	rs->cq_ch = ibv_create_comp_channel(id->verbs);
	if (!rs->cq_ch)
		return -1;
	if (rs_set_nonblock(rs->cq_ch->fd) || rs_epoll_add(rs, rs->cq_ch->fd))
		return -1;
	cqe = rs->sq_size + rs->rq_size;
	if (have_da && da.max_cqe > 0 && cqe > da.max_cqe)
		cqe = da.max_cqe;
	rs->cq = ibv_create_cq(id->verbs, cqe, rs, rs->cq_ch, 0);
	if (!rs->cq)
		return -1;

	memset(&qa, 0, sizeof(qa));
	qa.qp_context = rs;
	qa.send_cq = rs->cq;
	qa.recv_cq = rs->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = rs->sq_size;
	qa.cap.max_recv_wr = rs->rq_size;
	qa.cap.max_send_sge = 2;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = rs->sq_inline;
	if (rdma_create_qp(id, rs->pd, &qa))
		return -1;
	rs->sq_inline = (uint16_t)(qa.cap.max_inline_data > 0xffff ? 0xffff : qa.cap.max_inline_data);
	if (rs->msg_send && rs->sq_inline < RS_MSG_SIZE)
		return rs_fail(ENOTSUP);

	if (rs_init_bufs(rs))
		return -1;
	for (int i = 0; i < rs->rq_size; i++)
		if (rs_post_recv(rs))
			return -1;
	return 0;
}

void rs_free_ep(struct rsocket *rs)
{
	rs_drop_iomaps(rs);
	if (rs->cm_id && rs->cm_id->qp)
		rdma_destroy_qp(rs->cm_id);
	if (rs->cq)
		ibv_destroy_cq(rs->cq);
	if (rs->cq_ch)
		ibv_destroy_comp_channel(rs->cq_ch);
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	if (rs->target_mr)
		ibv_dereg_mr(rs->target_mr);
	if (rs->pd)
		ibv_dealloc_pd(rs->pd);
	free(rs->sbuf);
	free(rs->rbuf);
	free(rs->target_buf);
	free(rs->rmsg);
	free(rs->iomap_used);
	rs->cq = NULL;
	rs->cq_ch = NULL;
	rs->smr = rs->rmr = rs->target_mr = NULL;
	rs->pd = NULL;
	rs->sbuf = rs->rbuf = NULL;
	rs->target_buf = NULL;
	rs->target_sgl = NULL;
	rs->target_iomap = NULL;
	rs->rmsg = NULL;
	rs->iomap_used = NULL;
}

/* ---- connection data ------------------------------------------------------ */

void rs_format_conn_data(struct rsocket *rs, struct rs_conn_data *c)
{
	memset(c, 0, sizeof(*c));
	c->version = RS_PROTO_VERSION;
	c->flags = RS_CONN_FLAG_IOMAP | (rs_host_is_be() ? RS_CONN_FLAG_NET : 0);
	c->credits = htobe16(rs->rq_size);
	c->target_iomap_size = (uint8_t)rs_value_to_scale(rs->target_iomap_size, 8);
	c->target_sgl.addr = htobe64((uintptr_t)rs->target_sgl);
	c->target_sgl.length = htobe32(RS_SGL_SIZE);
	c->target_sgl.key = htobe32(rs->target_mr->rkey);
	c->data_buf.addr = htobe64((uintptr_t)rs->rbuf);
	c->data_buf.length = htobe32(rs->rbuf_size);
	c->data_buf.key = htobe32(rs->rmr->rkey);
}

/* A buffer the peer advertised that runs past the end of the 64-bit
 * address space: no memory is like that, and writing it would land at
 * addresses it never offered (from 0 on). */
static bool rs_sge_wraps(uint64_t addr, uint64_t len)
{
	return len && addr + (len - 1) < addr;
}

int rs_save_conn_data(struct rsocket *rs, const void *pdata, size_t len)
{
	struct rs_conn_data c;

	if (!pdata || len < sizeof(c))
		return rs_fail(EPROTO);
	memcpy(&c, pdata, sizeof(c));
	if (c.version != RS_PROTO_VERSION)
		return rs_fail(ENOTSUP);
	rs->remote_sgl.addr = be64toh(c.target_sgl.addr);
	rs->remote_sgl.length = be32toh(c.target_sgl.length);
	rs->remote_sgl.key = be32toh(c.target_sgl.key);
	if (!rs->remote_sgl.length || rs->remote_sgl.length > 0xffff)
		return rs_fail(EPROTO);
	/* the peer put its first buffer into its own copy of our entry 0 */
	rs->remote_sge = 1 % (int)rs->remote_sgl.length;
	rs->swap_sgl = !!(c.flags & RS_CONN_FLAG_NET) != rs_host_is_be();
	if (c.flags & RS_CONN_FLAG_IOMAP) {
		rs->remote_iomap.addr = rs->remote_sgl.addr + sizeof(struct rs_sge) * rs->remote_sgl.length;
		rs->remote_iomap.length = (uint32_t)rs_scale_to_value(c.target_iomap_size, 8);
		rs->remote_iomap.key = rs->remote_sgl.key;
	}
	/* the areas we write our SGEs and iomap entries into: the whole of
	 * them (SGL, then iomap) must be addressable memory */
	if (rs_sge_wraps(rs->remote_sgl.addr, sizeof(struct rs_sge) * (uint64_t)rs->remote_sgl.length +
						      sizeof(struct rs_iomap) * (uint64_t)rs->remote_iomap.length))
		return rs_fail(EPROTO);
	rs->target_sgl[0].addr = be64toh(c.data_buf.addr);
	rs->target_sgl[0].key = be32toh(c.data_buf.key);
	__atomic_store_n(&rs->target_sgl[0].length, be32toh(c.data_buf.length), __ATOMIC_RELEASE);
	rs->target_sge = 0;
	rs->sseq_comp = be16toh(c.credits);
	rs->sseq_no = 0;
	return 0;
}

/* ---- posting ---------------------------------------------------------------- */

static int rs_post(struct rsocket *rs, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int err = ibv_post_send(rs->cm_id->qp, wr, &bad);

	return err ? rs_fail(err) : 0;
}

/* A message that places data: an RDMA write with the message as its
 * immediate, or on iWARP a write followed by the message as a send. */
static int rs_post_write_msg(struct rsocket *rs, struct ibv_sge *sgl, int nsge, uint32_t msg, int flags, uint64_t addr,
			     uint32_t rkey)
{
	struct ibv_send_wr wr, s;
	struct ibv_sge ss;
	uint32_t m = msg;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = msg;
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	wr.send_flags = (unsigned)flags;
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	if (!rs->msg_send) {
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htobe32(msg);
		return rs_post(rs, &wr);
	}
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.next = &s;
	memset(&s, 0, sizeof(s));
	ss.addr = (uintptr_t)&m; /* inline: copied at post time */
	ss.length = sizeof(m);
	ss.lkey = 0;
	s.wr_id = rs_msg(rs_msg_op(msg), 0) | RS_WR_ID_MSG_SEND;
	s.sg_list = &ss;
	s.num_sge = 1;
	s.opcode = IBV_WR_SEND;
	s.send_flags = IBV_SEND_INLINE;
	return rs_post(rs, &wr);
}

/* A message with nothing to place: a zero-length write with immediate
 * (no memory is touched, so address and key are not checked), or a send. */
static int rs_post_msg(struct rsocket *rs, uint32_t msg)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	uint32_t m = msg;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = msg;
	if (!rs->msg_send) {
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htobe32(msg);
	} else {
		sge.addr = (uintptr_t)&m;
		sge.length = sizeof(m);
		sge.lkey = 0;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_INLINE;
	}
	return rs_post(rs, &wr);
}

/* A plain RDMA write (riowrite, keepalive): the peer is not told. */
static int rs_post_write(struct rsocket *rs, struct ibv_sge *sgl, int nsge, uint32_t wr_data, int flags, uint64_t addr,
			 uint32_t rkey)
{
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_data;
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = (unsigned)flags;
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	return rs_post(rs, &wr);
}

/* A cursor over an iovec, for copying into the staging ring and out of
 * the receive buffer. */
struct rs_iov_cur {
	const struct iovec *iov;
	int cnt;
	size_t off;
};

static void rs_cur_skip_empty(struct rs_iov_cur *c)
{
	while (c->cnt && c->off == c->iov->iov_len) {
		c->iov++;
		c->cnt--;
		c->off = 0;
	}
}

/* bytes contiguous at the cursor */
static size_t rs_cur_contig(struct rs_iov_cur *c)
{
	rs_cur_skip_empty(c);
	return c->cnt ? c->iov->iov_len - c->off : 0;
}

static void *rs_cur_ptr(struct rs_iov_cur *c)
{
	return (uint8_t *)c->iov->iov_base + c->off;
}

static void rs_cur_advance(struct rs_iov_cur *c, size_t n)
{
	while (n) {
		size_t k;

		rs_cur_skip_empty(c);
		k = c->iov->iov_len - c->off;
		if (k > n)
			k = n;
		c->off += k;
		n -= k;
	}
}

static void rs_cur_copy_out(struct rs_iov_cur *c, void *dst, size_t n)
{
	uint8_t *d = dst;

	while (n) {
		size_t k = rs_cur_contig(c);

		if (k > n)
			k = n;
		memcpy(d, rs_cur_ptr(c), k);
		c->off += k;
		d += k;
		n -= k;
	}
}

static void rs_cur_copy_in(struct rs_iov_cur *c, const void *src, size_t n)
{
	const uint8_t *s = src;

	while (n) {
		size_t k = rs_cur_contig(c);

		if (k > n)
			k = n;
		memcpy(rs_cur_ptr(c), s, k);
		c->off += k;
		s += k;
		n -= k;
	}
}

/* Copies len bytes at the cursor into the staging ring and describes
 * them in sge[] (two entries when they wrap).  The caller has checked
 * sbuf_bytes_avail: sends complete in order, so the ring space after
 * sbuf_head is free. */
static int rs_stage(struct rsocket *rs, struct rs_iov_cur *c, uint32_t len, struct ibv_sge *sge)
{
	uint32_t room = rs->sbuf_size - rs->sbuf_head;
	uint32_t first = len < room ? len : room;

	sge[0].addr = (uintptr_t)rs->sbuf + rs->sbuf_head;
	sge[0].length = first;
	sge[0].lkey = rs->smr->lkey;
	rs_cur_copy_out(c, rs->sbuf + rs->sbuf_head, first);
	if (first == len) {
		rs->sbuf_head += first;
		if (rs->sbuf_head == rs->sbuf_size)
			rs->sbuf_head = 0;
		return 1;
	}
	sge[1].addr = (uintptr_t)rs->sbuf;
	sge[1].length = len - first;
	sge[1].lkey = rs->smr->lkey;
	rs_cur_copy_out(c, rs->sbuf, len - first);
	rs->sbuf_head = len - first;
	return 2;
}

/* ---- credits ---------------------------------------------------------------- */

static int rs_msg_wrs(const struct rsocket *rs)
{
	return rs->msg_send ? 2 : 1;
}

bool rs_ctrl_avail(struct rsocket *rs)
{
	return rs->ctrl_seqno != rs->ctrl_max_seqno;
}

static bool rs_ctrl2_avail(struct rsocket *rs)
{
	return (int)((rs->ctrl_seqno + 1) - rs->ctrl_max_seqno) < 0;
}

static uint32_t rs_remote_sge_room(const struct rsocket *rs)
{
	return __atomic_load_n(&rs->target_sgl[rs->target_sge].length, __ATOMIC_ACQUIRE);
}

/* Tells the peer how far it may send (credits) and, when half of rbuf
 * has been read, where the next half is (a target SGE update). */
static void rs_send_credits(struct rsocket *rs)
{
	uint32_t half = rs->rbuf_size >> 1;
	uint32_t msg;
	int err;

	rs->ctrl_seqno++;
	rs->rseq_comp = (uint16_t)(rs->rseq_no + (rs->rq_size >> 1));
	msg = rs_msg(RS_OP_SGL, (uint16_t)(rs->rseq_no + rs->rq_size));
	if (rs->rbuf_bytes_avail >= half) {
		struct rs_sge sge;
		struct ibv_sge ib;
		int flags;

		if (rs->msg_send)
			rs->ctrl_seqno++;
		sge.addr = (uintptr_t)rs->rbuf + rs->rbuf_free_offset;
		sge.key = rs->rmr->rkey;
		sge.length = half;
		if (rs->swap_sgl) {
			sge.addr = bswap_64(sge.addr);
			sge.key = bswap_32(sge.key);
			sge.length = bswap_32(sge.length);
		}
		if (rs->sq_inline >= sizeof(sge)) {
			ib.addr = (uintptr_t)&sge;
			ib.lkey = 0;
			flags = IBV_SEND_INLINE;
		} else {
			void *slot =
				rs->sbuf + rs->sbuf_size + RS_MAX_CTRL_MSG * (rs->ctrl_seqno & (RS_QP_CTRL_SIZE - 1));
			memcpy(slot, &sge, sizeof(sge));
			ib.addr = (uintptr_t)slot;
			ib.lkey = rs->smr->lkey;
			flags = 0;
		}
		ib.length = sizeof(sge);
		err = rs_post_write_msg(rs, &ib, 1, msg, flags,
					rs->remote_sgl.addr + (uint64_t)rs->remote_sge * sizeof(struct rs_sge),
					rs->remote_sgl.key);
		rs->rbuf_bytes_avail -= half;
		rs->rbuf_free_offset += half;
		if (rs->rbuf_free_offset >= rs->rbuf_size)
			rs->rbuf_free_offset = 0;
		if (++rs->remote_sge == (int)rs->remote_sgl.length)
			rs->remote_sge = 0;
	} else {
		err = rs_post_msg(rs, msg);
	}
	if (err) {
		rs->state = RS_ERROR;
		rs->err = errno;
	}
}

static void rs_update_credits(struct rsocket *rs)
{
	bool want;

	if (rs->state != RS_CONNECTED)
		return;
	want = rs->rbuf_bytes_avail >= (rs->rbuf_size >> 1) || (int16_t)(rs->rseq_no - rs->rseq_comp) >= 0;
	if (want && (rs->msg_send ? rs_ctrl2_avail(rs) : rs_ctrl_avail(rs)))
		rs_send_credits(rs);
}

/* ---- completions ------------------------------------------------------------- */

static void rs_set_disconnected(struct rsocket *rs)
{
	rs->state = RS_DISCONNECTED;
	rs->readable = false;
	rs->writable = false;
}

static bool rs_qp_live(const struct rsocket *rs)
{
	return rs->state == RS_CONNECTED || rs->state == RS_ACCEPTING || rs->state == RS_CONNECTING;
}

static void rs_recv_msg(struct rsocket *rs, uint32_t msg)
{
	int n = rs->rq_size + 1;

	switch (rs_msg_op(msg)) {
	case RS_OP_DATA:
		if (!rs_msg_data(msg)) {
			rs->rseq_no++; /* nothing to read: the credit comes back at once */
			break;
		}
		if ((rs->rmsg_tail + 1) % n == rs->rmsg_head) {
			/* more data messages than the credits we gave */
			rs->state = RS_ERROR;
			rs->err = EPROTO;
			break;
		}
		rs->rmsg[rs->rmsg_tail].op = RS_OP_DATA;
		rs->rmsg[rs->rmsg_tail].data = rs_msg_data(msg);
		rs->rmsg_tail = (rs->rmsg_tail + 1) % n;
		break;
	case RS_OP_SGL:
		rs->sseq_comp = (uint16_t)rs_msg_data(msg);
		break;
	case RS_OP_IOMAP_SGL:
		/* the peer counted it against our credits; it takes no slot
		 * in rmsg, so it is "read" on arrival (rdma-core never gives
		 * this credit back; counting it only gives the sender more
		 * room, never more than rmsg holds) */
		rs->rseq_no++;
		break;
	case RS_OP_CTRL:
		if (rs_msg_data(msg) == RS_CTRL_DISCONNECT) {
			if (rs->state == RS_CONNECTED || rs->state == RS_ACCEPTING)
				rs_set_disconnected(rs);
		} else if (rs_msg_data(msg) == RS_CTRL_SHUTDOWN) {
			if (rs->writable)
				rs->readable = false;
			else if (rs->state == RS_CONNECTED)
				rs_set_disconnected(rs);
		}
		break;
	default:
		break; /* reserved ops: nothing defined to do */
	}
}

static void rs_send_done(struct rsocket *rs, const struct ibv_wc *wc)
{
	uint32_t m = (uint32_t)wc->wr_id;

	switch (rs_msg_op(m)) {
	case RS_OP_SGL:
		rs->ctrl_max_seqno++;
		break;
	case RS_OP_CTRL:
		rs->ctrl_max_seqno++;
		if (rs_msg_data(m) == RS_CTRL_DISCONNECT && wc->status == IBV_WC_SUCCESS && rs->state == RS_CONNECTED)
			rs_set_disconnected(rs);
		break;
	case RS_OP_IOMAP_SGL:
		rs->sqe_avail++;
		if (!(wc->wr_id & RS_WR_ID_MSG_SEND))
			rs->sbuf_bytes_avail += sizeof(struct rs_iomap);
		break;
	default: /* DATA, WRITE */
		rs->sqe_avail++;
		rs->sbuf_bytes_avail += rs_msg_data(m);
		break;
	}
	if (wc->status != IBV_WC_SUCCESS && wc->status != IBV_WC_WR_FLUSH_ERR && rs_qp_live(rs)) {
		rs->state = RS_ERROR;
		rs->err = wc->status == IBV_WC_RETRY_EXC_ERR || wc->status == IBV_WC_RNR_RETRY_EXC_ERR ? ETIMEDOUT :
													 ECONNRESET;
	}
}

/* Drains the CQ.  Returns true if anything completed. */
static bool rs_poll_cq(struct rsocket *rs);

void rs_drain_cq(struct rsocket *rs)
{
	rs_poll_cq(rs);
}

static bool rs_poll_cq(struct rsocket *rs)
{
	struct ibv_wc wc[16];
	int n, rcnt = 0;
	bool any = false, recv_failed = false;

	while ((n = ibv_poll_cq(rs->cq, 16, wc)) > 0) {
		any = true;
		for (int i = 0; i < n; i++) {
			if (!(wc[i].wr_id & RS_WR_ID_RECV)) {
				rs_send_done(rs, &wc[i]);
				continue;
			}
			if (wc[i].status != IBV_WC_SUCCESS) {
				/* flushed: fine once we have disconnected, else the
				 * QP died under us (seen below) */
				recv_failed |= rs_qp_live(rs);
				continue;
			}
			rcnt++;
			uint32_t msg;
			if (wc[i].wc_flags & IBV_WC_WITH_IMM) {
				msg = be32toh(wc[i].imm_data);
			} else {
				uint32_t slot = (uint32_t)wc[i].wr_id;
				if (!rs->msg_send || slot >= rs->rq_size)
					continue; /* a send we have no use for */
				memcpy(&msg, rs->rbuf + rs->rbuf_size + (size_t)slot * RS_MSG_SIZE, sizeof(msg));
			}
			rs_recv_msg(rs, msg);
		}
	}
	if (recv_failed) {
		/* A receive failed or was flushed while we were connected: the
		 * QP is in the error state, as after a remote access error
		 * (a peer's write into memory we had deregistered) that only
		 * the responder saw.  No CM event need ever come, so a reader
		 * would wait for ever.  A disconnect the CM has already
		 * reported is an orderly end; anything else is a reset. */
		rs_cm_progress(rs, true);
		if (rs_qp_live(rs)) {
			rs->state = RS_ERROR;
			rs->err = ECONNRESET;
		}
	}
	if (rs_qp_live(rs)) {
		while (rcnt--) {
			if (rs_post_recv(rs)) {
				rs->state = RS_ERROR;
				rs->err = errno;
				break;
			}
		}
	}
	return any;
}

/* Consumes the completion channel's events (only an armed CQ has one). */
static bool rs_get_cq_events(struct rsocket *rs)
{
	struct ibv_cq *cq;
	void *ctx;
	bool any = false;

	while (rs->cq_armed && !ibv_get_cq_event(rs->cq_ch, &cq, &ctx)) {
		ibv_ack_cq_events(cq, 1);
		rs->cq_armed = false;
		any = true;
	}
	return any;
}

/* Wakes the threads asleep on the socket's descriptor (lock held): the
 * one in rs_wait and those in rpoll.  The eventfd counts in semaphore
 * mode and gets one per sleeper, so each takes one as it wakes
 * (rs_drain_kick) and none takes another's: a sleeper that drained the
 * whole count could leave the next one, not yet re-checking, asleep.
 * One left over (a sleeper that woke for something else) costs a
 * spurious wake-up, no more. */
void rs_kick(struct rsocket *rs)
{
	uint64_t n = (uint64_t)(rs->sleeping ? 1 : 0) + (uint64_t)rs->pollers;

	if (rs->kick_fd >= 0 && n && write(rs->kick_fd, &n, sizeof(n)) < 0) {
		/* the counter is saturated: it is readable anyway */
	}
}

/* Everything that can happen without the caller: CM events, completions,
 * credits owed.  force_cm reads the CM channel even when a connected
 * socket read it less than a millisecond ago. */
void rs_progress(struct rsocket *rs, bool force_cm)
{
	bool any;

	if (rs->dg) {
		ds_progress(rs, force_cm);
		return;
	}
	rs_cm_progress(rs, force_cm);
	if (!rs->cq)
		return;
	any = rs_get_cq_events(rs);
	any |= rs_poll_cq(rs);
	rs_update_credits(rs);
	/* a thread asleep on the descriptor (rs_wait's, or in rpoll) may
	 * wait for what we consumed: the completion event it armed for
	 * (rs_kick wakes each sleeper, and does nothing without one) */
	if (any)
		rs_kick(rs);
}

/* Arms the CQ before sleeping.  Returns true if it was not armed yet:
 * the caller must poll once more, completions that came before arming
 * raise no event.  An armed CQ is armed again all the same: in verbs
 * that changes nothing, but it tells the provider that a thread is about
 * to sleep on the channel.  softrdma's progress thread leaves the
 * receiving to a thread that polls (as rs_progress just did) and takes
 * it back at once only when told so; otherwise the sleeper's data waits
 * for the thread's next look, 0.1 to 1 ms later. */
bool rs_arm(struct rsocket *rs)
{
	if (rs->dg)
		return ds_arm(rs);
	if (!rs->cq)
		return false;
	ibv_req_notify_cq(rs->cq, 0);
	if (rs->cq_armed)
		return false;
	rs->cq_armed = true;
	return true;
}

void rs_drain_kick(struct rsocket *rs)
{
	uint64_t v;

	if (rs->kick_fd >= 0 && read(rs->kick_fd, &v, sizeof(v)) < 0) {
		/* nothing to drain */
	}
}

/* Waits until test(rs) holds.  Spins briefly, then sleeps in poll() on
 * the socket's epoll descriptor (CM channel, completion channel, kick).
 * One thread sleeps there at a time; the others wait on rs->cond and
 * re-check when it wakes.  timeout_ms < 0: no limit. */
int rs_wait(struct rsocket *rs, bool nonblock, bool (*test)(struct rsocket *rs), int timeout_ms)
{
	uint64_t start = 0, now;
	bool force = false;

	for (;;) {
		rs_progress(rs, force);
		force = false;
		if (test(rs))
			return 0;
		if (rs->closing)
			return rs_fail(EBADF);
		if (nonblock)
			return rs_fail(EAGAIN);
		now = rs_now_us();
		if (!start)
			start = now;
		if (timeout_ms >= 0 && now - start >= (uint64_t)timeout_ms * 1000)
			return rs_fail(ETIMEDOUT);
		if (now - start < RS_POLLING_TIME_US) {
			/* let another thread in while we spin */
			pthread_mutex_unlock(&rs->lock);
			pthread_mutex_lock(&rs->lock);
			continue;
		}
		if (rs_arm(rs))
			continue;
		int ms = RS_WAKE_UP_INTERVAL;
		if (timeout_ms >= 0) {
			uint64_t left = (uint64_t)timeout_ms * 1000 - (now - start);
			if (left / 1000 + 1 < (uint64_t)ms)
				ms = (int)(left / 1000 + 1);
		}
		if (rs->sleeping) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += (long)ms * 1000000L;
			ts.tv_sec += ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			pthread_cond_timedwait(&rs->cond, &rs->lock, &ts);
			continue;
		}
		rs->sleeping = true;
		pthread_mutex_unlock(&rs->lock);
		struct pollfd p = { .fd = rs->index, .events = POLLIN };
		int n = poll(&p, 1, ms);
		int e = errno;
		pthread_mutex_lock(&rs->lock);
		rs->sleeping = false;
		rs_drain_kick(rs);
		pthread_cond_broadcast(&rs->cond);
		if (n < 0 && e == EINTR)
			return rs_fail(EINTR);
		force = true;
	}
}

/* ---- predicates ----------------------------------------------------------------- */

bool rs_can_send(struct rsocket *rs)
{
	return rs->sqe_avail >= rs_msg_wrs(rs) && rs->sbuf_bytes_avail >= RS_SNDLOWAT && rs->sseq_no != rs->sseq_comp &&
	       rs_remote_sge_room(rs) != 0;
}

bool rs_have_rdata(struct rsocket *rs)
{
	return rs->rmsg && rs->rmsg_head != rs->rmsg_tail;
}

/* more data may still come */
static bool rs_recv_open(struct rsocket *rs)
{
	return (rs->state == RS_CONNECTED && rs->readable) || rs->state == RS_ACCEPTING;
}

static bool rs_recv_ready(struct rsocket *rs)
{
	return rs_have_rdata(rs) || !rs_recv_open(rs);
}

static bool rs_send_open(struct rsocket *rs)
{
	return rs->state == RS_CONNECTED && rs->writable;
}

static bool rs_send_ready(struct rsocket *rs)
{
	if (rs->state == RS_ACCEPTING)
		return false;
	return !rs_send_open(rs) || rs_can_send(rs);
}

static bool rs_direct_ready(struct rsocket *rs)
{
	if (rs->state == RS_ACCEPTING)
		return false;
	return !rs_send_open(rs) || (rs->sqe_avail >= 1 && rs->sbuf_bytes_avail >= RS_SNDLOWAT);
}

bool rs_all_sends_done(struct rsocket *rs)
{
	return rs->state != RS_CONNECTED || (int)(rs->ctrl_max_seqno - rs->ctrl_seqno) + rs->sqe_avail == rs->sq_size;
}

/* the error a send on a closed direction reports */
static int rs_send_errno(struct rsocket *rs)
{
	switch (rs->state) {
	case RS_CONNECTED:
	case RS_DISCONNECTED:
		return rs->local_wr_shut ? EPIPE : ECONNRESET;
	case RS_ERROR:
	case RS_CONNECT_ERROR:
		return rs->err ? rs->err : ECONNRESET;
	default:
		return ENOTCONN;
	}
}

/* Gets a socket whose connect may still be under way ready for data:
 * 0 when the connection is up (or accepting, for receiving), -1 with
 * errno otherwise (EAGAIN while a non-blocking connect proceeds). */
static bool rs_not_connecting(struct rsocket *rs)
{
	return rs->state != RS_RESOLVING_ADDR && rs->state != RS_RESOLVING_ROUTE && rs->state != RS_CONNECTING;
}

static int rs_ready_for_data(struct rsocket *rs, bool nonblock)
{
	if (!rs_not_connecting(rs) && rs_wait(rs, nonblock, rs_not_connecting, -1))
		return -1;
	switch (rs->state) {
	case RS_INIT:
	case RS_BOUND:
	case RS_LISTENING:
		return rs_fail(ENOTCONN);
	case RS_CONNECT_ERROR:
		return rs_fail(rs->err ? rs->err : ECONNREFUSED);
	default:
		return 0;
	}
}

/* ---- sending ---------------------------------------------------------------------- */

/* One data message of len bytes at the cursor into the current target SGE. */
static int rs_write_data(struct rsocket *rs, struct rs_iov_cur *c, uint32_t len)
{
	struct ibv_sge sge[2];
	int nsge, flags = 0;
	uint64_t addr;
	uint32_t rkey;
	int i = rs->target_sge;

	if (len <= rs->sq_inline && rs_cur_contig(c) >= len) {
		/* inline: the data is copied at post time, straight from the caller */
		sge[0].addr = (uintptr_t)rs_cur_ptr(c);
		sge[0].length = len;
		sge[0].lkey = 0;
		nsge = 1;
		flags = IBV_SEND_INLINE;
		rs_cur_advance(c, len);
	} else {
		nsge = rs_stage(rs, c, len, sge);
		if (len <= rs->sq_inline)
			flags = IBV_SEND_INLINE;
	}
	addr = rs->target_sgl[i].addr;
	rkey = rs->target_sgl[i].key;
	rs->target_sgl[i].addr += len;
	rs->target_sgl[i].length -= len;
	if (!rs->target_sgl[i].length)
		rs->target_sge = (i + 1) % RS_SGL_SIZE;
	rs->sseq_no++;
	rs->sqe_avail -= rs_msg_wrs(rs);
	rs->sbuf_bytes_avail -= len;
	return rs_post_write_msg(rs, sge, nsge, rs_msg(RS_OP_DATA, len), flags, addr, rkey);
}

static bool rs_iomap_sendable(struct rsocket *rs)
{
	if (rs->state == RS_ACCEPTING)
		return false;
	return !rs_send_open(rs) || (rs->sqe_avail >= rs_msg_wrs(rs) &&
				     rs->sbuf_bytes_avail >= sizeof(struct rs_iomap) && rs->sseq_no != rs->sseq_comp);
}

/* Writes queued riomap entries into the peer's target iomap. */
static int rs_send_iomaps(struct rsocket *rs, bool nonblock)
{
	for (struct rs_iomap_mr *m = rs->iomaps; m; m = m->next) {
		struct rs_iomap iom;
		struct ibv_sge sge[2];
		int nsge, flags = 0;

		if (!m->pending)
			continue;
		if (!rs_iomap_sendable(rs) || !rs_send_open(rs)) {
			if (rs_wait(rs, nonblock, rs_iomap_sendable, -1))
				return -1;
			if (!rs_send_open(rs))
				return rs_fail(rs_send_errno(rs));
		}
		iom.offset = m->offset;
		iom.sge.addr = (uintptr_t)m->mr->addr;
		iom.sge.length = (uint32_t)m->mr->length;
		iom.sge.key = m->mr->rkey;
		if (rs->swap_sgl) {
			iom.offset = bswap_64(iom.offset);
			iom.sge.addr = bswap_64(iom.sge.addr);
			iom.sge.length = bswap_32(iom.sge.length);
			iom.sge.key = bswap_32(iom.sge.key);
		}
		if (rs->sq_inline >= sizeof(iom)) {
			sge[0].addr = (uintptr_t)&iom;
			sge[0].length = sizeof(iom);
			sge[0].lkey = 0;
			nsge = 1;
			flags = IBV_SEND_INLINE;
		} else {
			struct iovec v = { .iov_base = &iom, .iov_len = sizeof(iom) };
			struct rs_iov_cur c = { &v, 1, 0 };
			nsge = rs_stage(rs, &c, sizeof(iom), sge);
		}
		rs->sseq_no++;
		rs->sqe_avail -= rs_msg_wrs(rs);
		rs->sbuf_bytes_avail -= sizeof(iom);
		m->pending = false;
		if (rs_post_write_msg(rs, sge, nsge, rs_msg(RS_OP_IOMAP_SGL, (uint32_t)m->index), flags,
				      rs->remote_iomap.addr + (uint64_t)m->index * sizeof(struct rs_iomap),
				      rs->remote_iomap.key))
			return -1;
	}
	rs->iomap_pending = false;
	return 0;
}

/* The start of every send call: connected (or accepting: wait until it
 * is), our half still open, the iomaps the peer should know sent.
 * 0, or -1 with errno set. */
static int rs_send_start(struct rsocket *rs, bool nonblock)
{
	if (rs_ready_for_data(rs, nonblock))
		return -1;
	if (rs->state == RS_ACCEPTING && rs_wait(rs, nonblock, rs_send_ready, -1))
		return -1;
	if (!rs_send_open(rs))
		return rs_fail(rs_send_errno(rs));
	if (rs->iomap_pending && rs_send_iomaps(rs, nonblock))
		return -1;
	return 0;
}

/* Wait until ready(rs) in the middle of a send: 0, or the errno that
 * ends the call (EAGAIN when nonblocking, the connection's error). */
static int rs_send_wait(struct rsocket *rs, bool nonblock, bool (*ready)(struct rsocket *rs))
{
	if (rs_wait(rs, nonblock, ready, -1))
		return errno;
	return rs_send_open(rs) ? 0 : rs_send_errno(rs);
}

/* The next transfer's size: small first, so the peer starts receiving
 * early, doubling up to RS_MAX_TRANSFER, never more than what is left. */
static uint32_t rs_ramp(uint32_t *olen, size_t left)
{
	uint32_t xfer;

	if (*olen >= left)
		return (uint32_t)left;
	xfer = *olen;
	if (*olen < RS_MAX_TRANSFER)
		*olen <<= 1;
	return xfer;
}

static ssize_t rs_sendv(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags)
{
	struct rs_iov_cur c = { iov, iovcnt, 0 };
	bool nonblock = rs_nonblocking(rs, flags);
	uint32_t olen = RS_OLAP_START_SIZE;
	size_t len = 0, left;
	int err = 0;

	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	left = len;

	if (rs_send_start(rs, nonblock))
		return -1;

	while (left) {
		uint32_t xfer, room;

		if (!rs_can_send(rs)) {
			err = rs_send_wait(rs, nonblock, rs_send_ready);
			if (err)
				break;
		}
		xfer = rs_ramp(&olen, left);
		if (xfer > rs->sbuf_bytes_avail)
			xfer = rs->sbuf_bytes_avail;
		room = rs_remote_sge_room(rs);
		if (xfer > room)
			xfer = room;
		if (rs_sge_wraps(rs->target_sgl[rs->target_sge].addr, room)) {
			/* the peer's buffer is not memory: the connection is broken */
			err = EPROTO;
			rs->state = RS_ERROR;
			rs->err = err;
			break;
		}
		if (rs_write_data(rs, &c, xfer)) {
			err = errno;
			rs->state = RS_ERROR;
			rs->err = err;
			break;
		}
		left -= xfer;
	}
	if (err && left == len)
		return rs_fail(err);
	return (ssize_t)(len - left);
}

/* ---- receiving ------------------------------------------------------------------- */

/* Copies up to len queued bytes into the cursor; consumes them unless peek. */
static size_t rs_copy_rdata(struct rsocket *rs, struct rs_iov_cur *c, size_t len, bool peek)
{
	int n = rs->rq_size + 1;
	int head = rs->rmsg_head;
	uint32_t off = rs->rbuf_offset;
	size_t done = 0;

	while (done < len && head != rs->rmsg_tail) {
		uint32_t avail = rs->rmsg[head].data;
		uint32_t take = len - done < avail ? (uint32_t)(len - done) : avail;
		uint32_t k = take;

		while (k) {
			uint32_t end = rs->rbuf_size - off;
			uint32_t part = k < end ? k : end;

			rs_cur_copy_in(c, rs->rbuf + off, part);
			off += part;
			if (off == rs->rbuf_size)
				off = 0;
			k -= part;
		}
		done += take;
		if (!peek) {
			rs->rbuf_bytes_avail += take;
			if (take == avail) {
				rs->rseq_no++;
				head = (head + 1) % n;
			} else {
				rs->rmsg[head].data -= take;
			}
		} else if (take == avail) {
			head = (head + 1) % n;
		}
	}
	if (!peek) {
		rs->rmsg_head = head;
		rs->rbuf_offset = off;
	}
	return done;
}

static ssize_t rs_recvv(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags)
{
	struct rs_iov_cur c = { iov, iovcnt, 0 };
	bool nonblock = rs_nonblocking(rs, flags);
	size_t len = 0, left;
	int err = 0;

	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	left = len;

	if (rs_ready_for_data(rs, nonblock))
		return -1;
	if (!len)
		return 0;
	do {
		if (!rs_have_rdata(rs)) {
			if (!rs_recv_open(rs))
				break;
			if (rs_wait(rs, nonblock, rs_recv_ready, -1)) {
				err = errno;
				break;
			}
			if (!rs_have_rdata(rs))
				break;
		}
		if (flags & MSG_PEEK) {
			left -= rs_copy_rdata(rs, &c, left, true);
			break;
		}
		left -= rs_copy_rdata(rs, &c, left, false);
		/* give the room back now: the sender may be waiting for it */
		rs_update_credits(rs);
	} while (left && (flags & MSG_WAITALL));

	if (left < len)
		return (ssize_t)(len - left);
	if (err)
		return rs_fail(err);
	if (rs->state == RS_ERROR)
		return rs_fail(rs->err ? rs->err : ECONNRESET);
	return 0; /* end of stream */
}

/* ---- control messages ---------------------------------------------------------- */

int rs_post_ctrl(struct rsocket *rs, enum rs_ctrl ctrl)
{
	rs->ctrl_seqno++;
	return rs_post_msg(rs, rs_msg(RS_OP_CTRL, ctrl));
}

/* A zero-length RDMA write: the peer's NIC acknowledges it, its
 * application sees nothing; a dead peer turns it into an error. */
int rs_post_keepalive(struct rsocket *rs)
{
	rs->ctrl_seqno++;
	return rs_post_write(rs, NULL, 0, rs_msg(RS_OP_CTRL, RS_CTRL_KEEPALIVE), 0, 0, 0);
}

/* ---- rpoll support ------------------------------------------------------------------ */

short rs_poll_events(struct rsocket *rs, short events)
{
	short rev = 0;
	short in = events & (POLLIN | POLLRDNORM);
	short out = events & (POLLOUT | POLLWRNORM);

	if (rs->dg)
		return ds_poll_events(rs, events);
	switch (rs->state) {
	case RS_LISTENING:
		if (rs->acc_head)
			rev |= in;
		break;
	case RS_ACCEPTING:
		if (rs_have_rdata(rs))
			rev |= in;
		break;
	case RS_CONNECTED:
		if (rs_have_rdata(rs) || !rs->readable)
			rev |= in;
		if (rs->writable ? rs_can_send(rs) : rs->local_wr_shut)
			rev |= out;
		break;
	case RS_DISCONNECTED:
		/* as TCP after the peer's FIN: what it sent before is still
		 * readable (POLLIN), the hang-up shows once that is read.
		 * (rdma-core raises POLLHUP at once; rstream -T a, which takes
		 * POLLHUP for an error, then fails when the peer's disconnect
		 * overtakes its reading of the last messages.) */
		rev |= in | out;
		if (!rs_have_rdata(rs))
			rev |= POLLHUP;
		break;
	case RS_ERROR:
	case RS_CONNECT_ERROR:
		rev |= in | out | POLLERR;
		break;
	default:
		break;
	}
	return rev;
}

/* ---- the exported send/receive family ------------------------------------------ */

#define RS_ENTER(fd)                        \
	struct rsocket *rs = rs_lookup(fd); \
	if (!rs)                            \
		return rs_fail(EBADF);      \
	pthread_mutex_lock(&rs->lock)

static ssize_t rs_sendv_fd(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	struct rsocket *d = ds_enter(fd);
	ssize_t r;

	if (d)
		return ds_leave(d, ds_sendv(d, iov, iovcnt, flags, NULL, 0));
	if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt && !iov))
		return rs_fail(EINVAL);
	RS_ENTER(fd);
	r = rs_sendv(rs, iov, iovcnt, flags);
	pthread_mutex_unlock(&rs->lock);
	return r;
}

static ssize_t rs_recvv_fd(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	struct rsocket *d = ds_enter(fd);
	ssize_t r;

	if (d)
		return ds_leave(d, ds_recvv(d, iov, iovcnt, flags, NULL, NULL, NULL));
	if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt && !iov))
		return rs_fail(EINVAL);
	RS_ENTER(fd);
	r = rs_recvv(rs, iov, iovcnt, flags);
	pthread_mutex_unlock(&rs->lock);
	return r;
}

SR_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = len };

	return rs_sendv_fd(socket, &v, 1, flags);
}

SR_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags, const struct sockaddr *dest_addr,
			  socklen_t addrlen)
{
	struct rsocket *d = ds_enter(socket);

	if (d) {
		struct iovec v = { .iov_base = (void *)buf, .iov_len = len };
		return ds_leave(d, ds_sendv(d, &v, 1, flags, dest_addr, addrlen));
	}
	/* a connected stream: as send(2), a destination is an error */
	if (dest_addr || addrlen) {
		if (!rs_lookup(socket))
			return rs_fail(EBADF);
		return rs_fail(EISCONN);
	}
	return rsend(socket, buf, len, flags);
}

SR_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	if (!msg)
		return rs_fail(EINVAL);
	if (msg->msg_control && msg->msg_controllen)
		return rs_fail(ENOTSUP);
	struct rsocket *d = ds_enter(socket);
	if (d)
		return ds_leave(d, ds_sendv(d, msg->msg_iov, (int)msg->msg_iovlen, flags,
					    msg->msg_namelen ? msg->msg_name : NULL, msg->msg_namelen));
	if (msg->msg_name && msg->msg_namelen)
		return rs_fail(EISCONN);
	return rs_sendv_fd(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

SR_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

SR_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return rs_sendv_fd(socket, iov, iovcnt, 0);
}

SR_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	struct iovec v = { .iov_base = buf, .iov_len = len };

	return rs_recvv_fd(socket, &v, 1, flags);
}

SR_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr, socklen_t *addrlen)
{
	struct rsocket *d = ds_enter(socket);

	if (d) {
		struct iovec v = { .iov_base = buf, .iov_len = len };
		return ds_leave(d, ds_recvv(d, &v, 1, flags, src_addr, addrlen, NULL));
	}
	ssize_t r = rrecv(socket, buf, len, flags);

	if (r >= 0 && src_addr && addrlen)
		rgetpeername(socket, src_addr, addrlen);
	return r;
}

SR_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	ssize_t r;

	if (!msg)
		return rs_fail(EINVAL);
	if (msg->msg_control && msg->msg_controllen)
		return rs_fail(ENOTSUP);
	struct rsocket *d = ds_enter(socket);
	if (d) {
		int mf = 0;
		r = ds_recvv(d, msg->msg_iov, (int)msg->msg_iovlen, flags, msg->msg_name,
			     msg->msg_name ? &msg->msg_namelen : NULL, &mf);
		if (r >= 0)
			msg->msg_flags = mf;
		return ds_leave(d, r);
	}
	r = rs_recvv_fd(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
	if (r >= 0) {
		msg->msg_flags = 0;
		if (msg->msg_name && msg->msg_namelen)
			rgetpeername(socket, msg->msg_name, &msg->msg_namelen);
	}
	return r;
}

SR_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}

SR_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return rs_recvv_fd(socket, iov, iovcnt, 0);
}

/* ---- iomap: zero-copy writes into the peer's mapped buffers --------------------- */

void rs_drop_iomaps(struct rsocket *rs)
{
	while (rs->iomaps) {
		struct rs_iomap_mr *m = rs->iomaps;

		rs->iomaps = m->next;
		ibv_dereg_mr(m->mr);
		free(m);
	}
	rs->iomap_pending = false;
}

SR_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	struct rs_iomap_mr *m;
	int access = IBV_ACCESS_LOCAL_WRITE;

	RS_ENTER(socket);
	if (!rs->pd || (prot & ~(PROT_WRITE | PROT_NONE)) || !buf || !len) {
		pthread_mutex_unlock(&rs->lock);
		return rs_fail(EINVAL);
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		pthread_mutex_unlock(&rs->lock);
		return rs_fail(ENOMEM);
	}
	m->index = -1;
	if (prot & PROT_WRITE) {
		/* a free entry of the peer's target iomap */
		if (!rs->iomap_used && rs->remote_iomap.length)
			rs->iomap_used = calloc(rs->remote_iomap.length, 1);
		for (uint32_t i = 0; rs->iomap_used && i < rs->remote_iomap.length; i++) {
			if (!rs->iomap_used[i]) {
				m->index = (int)i;
				break;
			}
		}
		if (m->index < 0) {
			free(m);
			pthread_mutex_unlock(&rs->lock);
			return rs_fail(ENOMEM);
		}
		access |= IBV_ACCESS_REMOTE_WRITE;
	}
	m->mr = ibv_reg_mr(rs->pd, buf, len, access);
	if (!m->mr) {
		int e = errno;
		free(m);
		pthread_mutex_unlock(&rs->lock);
		return rs_fail(e);
	}
	if (offset == -1)
		offset = (off_t)(uintptr_t)buf;
	m->offset = (uint64_t)offset;
	if (m->index >= 0) {
		rs->iomap_used[m->index] = 1;
		m->pending = true;
		rs->iomap_pending = true;
	}
	/* queued at the tail: the peer learns of mappings in order */
	struct rs_iomap_mr **pp = &rs->iomaps;
	while (*pp)
		pp = &(*pp)->next;
	*pp = m;
	/* tell the peer now if that needs no waiting; else the next send does */
	if (rs->iomap_pending && rs_send_open(rs)) {
		int e = errno;
		if (rs_send_iomaps(rs, true))
			errno = e;
	}
	pthread_mutex_unlock(&rs->lock);
	return offset;
}

SR_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	RS_ENTER(socket);
	for (struct rs_iomap_mr **pp = &rs->iomaps; *pp; pp = &(*pp)->next) {
		struct rs_iomap_mr *m = *pp;

		if (m->mr->addr != buf || m->mr->length != len)
			continue;
		*pp = m->next;
		if (m->index >= 0 && rs->iomap_used)
			rs->iomap_used[m->index] = 0;
		ibv_dereg_mr(m->mr);
		free(m);
		pthread_mutex_unlock(&rs->lock);
		return 0;
	}
	pthread_mutex_unlock(&rs->lock);
	return rs_fail(EINVAL);
}

/* The peer's mapping that holds offset: its base offset, address, key
 * and length, read from the target iomap it wrote (in our byte order). */
static bool rs_find_iomap(struct rsocket *rs, uint64_t offset, struct rs_iomap *out)
{
	for (int i = 0; i < rs->target_iomap_size; i++) {
		struct rs_iomap e;

		memcpy(&e, &rs->target_iomap[i], sizeof(e));
		if (e.sge.length && !rs_sge_wraps(e.sge.addr, e.sge.length) && offset >= e.offset &&
		    offset - e.offset < e.sge.length) {
			*out = e;
			return true;
		}
	}
	return false;
}

static ssize_t rs_iowrite(struct rsocket *rs, const void *buf, size_t count, uint64_t offset, int flags)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = count };
	struct rs_iov_cur c = { &v, 1, 0 };
	bool nonblock = rs_nonblocking(rs, flags);
	uint32_t olen = RS_OLAP_START_SIZE;
	size_t left = count;
	struct rs_iomap iom;
	bool have = false;
	int err = 0;

	if (rs_send_start(rs, nonblock))
		return -1;

	/* reap completions (and let the library receive acknowledgements
	 * in this thread): the caller may not call us between writes */
	rs_poll_cq(rs);
	while (left) {
		uint32_t xfer;
		struct ibv_sge sge[2];
		int nsge, wflags = 0;

		if (!have || offset - iom.offset >= iom.sge.length) {
			if (!rs_find_iomap(rs, offset, &iom)) {
				err = EINVAL; /* nothing of the peer's is mapped there */
				break;
			}
			have = true;
		}
		if (!(rs->sqe_avail >= 1 && rs->sbuf_bytes_avail >= RS_SNDLOWAT)) {
			err = rs_send_wait(rs, nonblock, rs_direct_ready);
			if (err)
				break;
		}
		xfer = rs_ramp(&olen, left);
		if (xfer > rs->sbuf_bytes_avail)
			xfer = rs->sbuf_bytes_avail;
		if (xfer > iom.sge.length - (offset - iom.offset))
			xfer = (uint32_t)(iom.sge.length - (offset - iom.offset));
		if (xfer <= rs->sq_inline) {
			sge[0].addr = (uintptr_t)rs_cur_ptr(&c);
			sge[0].length = xfer;
			sge[0].lkey = 0;
			nsge = 1;
			wflags = IBV_SEND_INLINE;
			rs_cur_advance(&c, xfer);
		} else {
			nsge = rs_stage(rs, &c, xfer, sge);
		}
		rs->sqe_avail--;
		rs->sbuf_bytes_avail -= xfer;
		if (rs_post_write(rs, sge, nsge, rs_msg(RS_OP_WRITE, xfer), wflags,
				  iom.sge.addr + (offset - iom.offset), iom.sge.key)) {
			err = errno;
			rs->state = RS_ERROR;
			rs->err = err;
			break;
		}
		left -= xfer;
		offset += xfer;
	}
	if (err && left == count)
		return rs_fail(err);
	return (ssize_t)(count - left);
}

SR_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	ssize_t r;
	struct rsocket *rs = rs_lookup(socket);

	if (!rs) {
		errno = EBADF;
		return (size_t)-1;
	}
	if (count > SSIZE_MAX)
		count = SSIZE_MAX;
	pthread_mutex_lock(&rs->lock);
	r = rs_iowrite(rs, buf, count, (uint64_t)offset, flags);
	pthread_mutex_unlock(&rs->lock);
	return (size_t)r;
}
