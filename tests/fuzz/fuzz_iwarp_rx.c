/* libFuzzer harness for the Soft-iWARP receive path (src/iwarp/qp_rx.c
 * and what it calls): a TCP stream from a peer, after the MPA exchange,
 * into a connected RC QP with registered memory and posted receives.
 * Everything there is reachable by whoever can open a TCP connection to
 * an rdma_cm listener: FPDU framing and CRC, DDP/RDMAP headers, STag,
 * bounds and access checks, placement into memory, Read Requests (the QP
 * answers from its memory), Terminate.
 *
 * The library is linked in whole (src/abi, core, roce, iwarp, common) on
 * a Soft-iWARP device on lo; no daemon is involved.  Per input: three
 * memory regions (remote-writable, remote-readable only, local only) with
 * guard bytes around them, a QP connected to one end of a TCP connection
 * on 127.0.0.1, the stream written into the other end, then a FIN; the
 * QP must end the connection (its close callback) by itself.
 *
 * Input: byte 0 flags (bit 0 MPA CRC, bit 1 rewrite STags and CRCs, bit 2
 * MPA revision 1, bit 3 the QP is the initiator), byte 1 receives to post
 * (low 3 bits) and their size (256 >> high bits), then the stream.  With
 * bit 1 the harness walks the stream's FPDUs and maps each tagged STag
 * (and a Read Request's source STag) to one of the regions' real keys and
 * its offset to near that region (the keys are random: a fuzzer would not
 * guess them), then recomputes the CRCs; without it the stream goes as it
 * is.  Seeds: the siw captures' streams (fuzz_seeds.c).
 *
 * Invariants (abort() on violation):
 *  - nothing outside the regions and their posted receive buffers
 *    changes, and the region without remote write access not at all;
 *  - the QP ends the connection within 10 s of the peer's FIN (no hang);
 *  - completions carry statuses the verbs know, and a receive completion
 *    no more bytes than its buffer.
 * A Terminate, a QP in error and error completions are all fine. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>

#include "fuzz.h"
#include "iwarp/iwarp_cm.h"
#include "iwarp/wire/iwarp_wire.h"

#define NREG 3
#define GUARD 64

struct region {
	uint8_t *mem; /* GUARD, len bytes, GUARD */
	uint8_t *snap;
	size_t len;
	int access;
	struct ibv_mr *mr;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static atomic_int closed;

static void on_close(void *arg, enum sr_iw_close_reason reason)
{
	(void)arg;
	(void)reason;
	atomic_fetch_add(&closed, 1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static char conf[] = "/tmp/sr-fuzz-iwarp-rx.XXXXXX";
	struct ibv_device **l;
	int fd = mkstemp(conf), n = 0;
	static const char text[] = "crc = on\n[siw0]\ntype = iwarp\nnetdev = lo\n";

	(void)argc;
	(void)argv;
	REQUIRE(fd >= 0 && write(fd, text, sizeof(text) - 1) == (ssize_t)sizeof(text) - 1);
	close(fd);
	setenv("SOFTRDMA_CONF", conf, 1);
	l = ibv_get_device_list(&n);
	REQUIRE(l && n > 0);
	ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	unlink(conf);
	REQUIRE(ctx);
	pd = ibv_alloc_pd(ctx);
	REQUIRE(pd);
	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
	return 0;
}

static bool tcp_pair(int fds[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	fds[0] = fds[1] = -1;
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &al)) {
		if (l >= 0)
			close(l);
		return false;
	}
	fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fds[0] < 0 || connect(fds[0], (struct sockaddr *)&a, sizeof(a))) {
		if (fds[0] >= 0)
			close(fds[0]);
		close(l);
		return false;
	}
	fds[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	close(l);
	if (fds[1] < 0) {
		close(fds[0]);
		return false;
	}
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	return true;
}

/* An STag and offset of the input turned into one of a region's key and
 * an address near it (a little before, inside, a little past). */
static void map_stag(const struct region *reg, uint32_t *stag, uint64_t *to)
{
	const struct region *r = &reg[*stag % NREG];

	*stag = r->mr->rkey;
	*to = (uintptr_t)(r->mem + GUARD) + *to % (r->len + 64) - 32;
}

static void fixup(uint8_t *s, size_t len, bool crc, const struct region *reg)
{
	size_t off = 0;

	while (off + SR_MPA_LEN_BYTES <= len) {
		uint32_t ulen = (uint32_t)(s[off] << 8 | s[off + 1]);
		size_t tot = sr_mpa_fpdu_len(ulen), body = SR_MPA_LEN_BYTES + ulen + sr_mpa_pad(ulen);
		uint8_t *u = s + off + SR_MPA_LEN_BYTES;
		struct sr_iw_hdr h;
		int r;

		if (off + tot > len)
			break;
		r = sr_iw_hdr_parse(&h, u, ulen, ulen);
		if (r > 0 && (h.tagged || h.opcode == SR_RDMAP_READ_REQ)) {
			uint8_t out[SR_IW_MAX_HDR];

			if (h.tagged)
				map_stag(reg, &h.stag, &h.to);
			if (h.opcode == SR_RDMAP_READ_REQ)
				map_stag(reg, &h.rreq.src_stag, &h.rreq.src_to);
			if (sr_iw_hdr_build(out, &h) == (uint32_t)r)
				memcpy(u, out, (size_t)r);
		}
		if (crc)
			sr_mpa_crc_store(s + off + body, ~sr_mpa_crc_update(~0u, s + off, body));
		off += tot;
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Writes the stream, then a FIN, reading whatever the QP sends back,
 * until the QP has ended the connection and closed its end. */
static void run_stream(int fd, const uint8_t *s, size_t len)
{
	static uint8_t sink[65536];
	uint64_t deadline = 0;
	size_t sent = 0;
	bool fin = false, eof = false;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN | (fin ? 0 : POLLOUT) };

		if (fin && eof && atomic_load(&closed))
			return;
		if (fin && !deadline)
			deadline = now_ms() + 10000;
		REQUIRE(!deadline || now_ms() < deadline); /* the QP never ended the connection */
		if (poll(&p, 1, 100) < 0)
			continue;
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = read(fd, sink, sizeof(sink));

			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				eof = true;
		}
		if (!fin && (p.revents & POLLOUT)) {
			ssize_t n = sent < len ? write(fd, s + sent, len - sent) : 0;

			if (n > 0)
				sent += (size_t)n;
			else if (n < 0 && errno != EAGAIN && errno != EINTR)
				sent = len; /* the QP closed: nothing more goes */
			if (sent == len) {
				shutdown(fd, SHUT_WR);
				fin = true;
			}
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t lens[NREG] = { 8192, 4096, 512 };
	static const int acc[NREG] = { IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, IBV_ACCESS_LOCAL_WRITE };
	struct region reg[NREG];
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 16,
						.max_recv_wr = 16,
						.max_send_sge = 2,
						.max_recv_sge = 2,
						.max_inline_data = 64 } };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
						    IBV_ACCESS_REMOTE_READ };
	struct sr_iw_conn_params p = { .ird = 4, .ord = 4, .on_close = on_close };
	uint8_t flags, rbyte, *stream;
	size_t slen, rsize;
	int fds[2], nrecv;
	struct ibv_wc wc[16];
	int n;

	if (size < 2 || !ctx)
		return 0;
	flags = data[0];
	rbyte = data[1];
	nrecv = rbyte & 7;
	rsize = (size_t)256 >> (rbyte >> 6);
	for (int i = 0; i < NREG; i++) {
		reg[i].len = lens[i];
		reg[i].access = acc[i];
		reg[i].mem = malloc(lens[i] + 2 * GUARD);
		reg[i].snap = malloc(lens[i] + 2 * GUARD);
		REQUIRE(reg[i].mem && reg[i].snap);
		for (size_t k = 0; k < lens[i] + 2 * GUARD; k++)
			reg[i].mem[k] = (uint8_t)(k * 7 + (size_t)i * 31 + 1);
		memcpy(reg[i].snap, reg[i].mem, lens[i] + 2 * GUARD);
		reg[i].mr = ibv_reg_mr(pd, reg[i].mem + GUARD, lens[i], acc[i]);
		REQUIRE(reg[i].mr);
	}
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	REQUIRE(cq);
	ia.send_cq = ia.recv_cq = cq;
	qp = ibv_create_qp(pd, &ia);
	REQUIRE(qp && !ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
	/* receives side by side in the local-only region (512 bytes) */
	for (int i = 0; i < nrecv && (size_t)(i + 1) * rsize <= lens[2]; i++) {
		struct ibv_sge sge = { (uintptr_t)reg[2].mem + GUARD + (size_t)i * rsize, (uint32_t)rsize,
				       reg[2].mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 }, *bad;

		REQUIRE(!ibv_post_recv(qp, &wr, &bad));
	}
	slen = size - 2;
	stream = fz_dup(data + 2, slen);
	if (flags & 2)
		fixup(stream, slen, flags & 1, reg);
	atomic_store(&closed, 0);
	if (tcp_pair(fds)) {
		p.fd = fds[1];
		p.crc = flags & 1;
		p.mpa_rev = flags & 4 ? 1 : 2;
		p.initiator = flags & 8;
		if (!sr_iw_qp_connect(qp, &p)) {
			run_stream(fds[0], stream, slen);
		} else {
			close(fds[1]);
		}
		close(fds[0]);
	}
	while ((n = ibv_poll_cq(cq, 16, wc)) > 0)
		for (int i = 0; i < n; i++) {
			REQUIRE(wc[i].status <= IBV_WC_TM_RNDV_INCOMPLETE);
			if (wc[i].status == IBV_WC_SUCCESS && (wc[i].opcode & IBV_WC_RECV))
				REQUIRE(wc[i].byte_len <= rsize);
		}
	REQUIRE(!ibv_destroy_qp(qp));
	REQUIRE(!ibv_destroy_cq(cq));
	/* nothing written outside the regions, nor into the one the peer may
	 * only read; the others only where their access allows */
	for (int i = 0; i < NREG; i++) {
		size_t all = lens[i] + 2 * GUARD;

		REQUIRE(!memcmp(reg[i].mem, reg[i].snap, GUARD));
		REQUIRE(!memcmp(reg[i].mem + all - GUARD, reg[i].snap + all - GUARD, GUARD));
		if (i == 1)
			REQUIRE(!memcmp(reg[i].mem, reg[i].snap, all));
		if (i == 2) {
			size_t used = (size_t)nrecv * rsize < lens[2] ? (size_t)nrecv * rsize : lens[2];

			REQUIRE(!memcmp(reg[i].mem + GUARD + used, reg[i].snap + GUARD + used, lens[2] - used));
		}
		REQUIRE(!ibv_dereg_mr(reg[i].mr));
		free(reg[i].mem);
		free(reg[i].snap);
	}
	{
		struct ibv_async_event ev;

		while (!ibv_get_async_event(ctx, &ev))
			ibv_ack_async_event(&ev);
	}
	free(stream);
	return 0;
}
