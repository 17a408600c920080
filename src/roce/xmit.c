/* RoCEv2 over UDP: sending packets -- one datagram (headers, gathered
 * payload, pad, ICRC) per sendmsg, or batches of runs, each run one UDP
 * GSO message, sent with one sendmmsg (struct sr_tx_batch, roce.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include "core/fault.h"
#include "common/cmsg.h"
#include "roce/net.h"

static struct sr_icrc_env tx_env(struct sr_qp *qp, const struct sr_av *av, uint16_t id)
{
	struct sr_icrc_env env = {
		.ipv6 = !is_v4(&av->dst),
		.saddr = av->src.sin6_addr,
		.daddr = av->dst.sin6_addr,
		.sport = rqp(qp)->sport[!is_v4(&av->dst)],
		.dport = SR_ROCE_UDP_PORT,
		.ipv4_id = id,
		.ipv4_df = true,
	};
	return env;
}

/* One message to av->dst:4791 from av->src (IP_PKTINFO), optionally as
 * GSO segments of seg_size bytes: the msghdr and what it points to. */
struct tx_msg {
	union {
		struct sockaddr_in sin;
		struct sockaddr_in6 sin6;
	} to;
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(uint16_t)) +
			 2 * CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
};

/* Fills msg (pointing into m) for iov; returns the socket to send it on,
 * or a negative errno. */
static int tx_msg_build(struct sr_qp *qp, const struct sr_av *av, struct iovec *iov, int niov, uint16_t seg_size,
			struct tx_msg *m, struct msghdr *msg)
{
	bool v4 = is_v4(&av->dst);
	int fd = sr_roce_tx_socket(qp, v4);
	bool mcast = sr_in6_is_mcast(&av->dst.sin6_addr);

	if (fd < 0)
		return fd;
	memset(msg, 0, sizeof(*msg));
	memset(&m->cbuf, 0, sizeof(m->cbuf));
	msg->msg_iov = iov;
	msg->msg_iovlen = (size_t)niov;
	msg->msg_control = m->cbuf.buf;
	struct cmsghdr *cm = (struct cmsghdr *)m->cbuf.buf;
	if (v4) {
		to_sin(&av->dst, &m->to.sin);
		m->to.sin.sin_port = htons(SR_ROCE_UDP_PORT);
		msg->msg_name = &m->to.sin;
		msg->msg_namelen = sizeof(m->to.sin);
		struct in_pktinfo pi = { 0 };
		memcpy(&pi.ipi_spec_dst, &av->src.sin6_addr.s6_addr[12], 4);
		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
		msg->msg_controllen = CMSG_SPACE(sizeof(pi));
	} else {
		m->to.sin6 = av->dst;
		m->to.sin6.sin6_port = htons(SR_ROCE_UDP_PORT);
		msg->msg_name = &m->to.sin6;
		msg->msg_namelen = sizeof(m->to.sin6);
		struct in6_pktinfo pi = { 0 };
		pi.ipi6_addr = av->src.sin6_addr;
		cm->cmsg_level = IPPROTO_IPV6;
		cm->cmsg_type = IPV6_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
		msg->msg_controllen = CMSG_SPACE(sizeof(pi));
	}
	if (seg_size) {
		cm = (struct cmsghdr *)(m->cbuf.buf + msg->msg_controllen);
		cm->cmsg_level = SOL_UDP;
		cm->cmsg_type = UDP_SEGMENT;
		cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
		memcpy(CMSG_DATA(cm), &seg_size, sizeof(seg_size));
		msg->msg_controllen += CMSG_SPACE(sizeof(uint16_t));
	}
	/* the path's (AH's) traffic class: outside the ICRC (masked) */
	sr_cmsg_put_tclass(msg, v4, av->traffic_class);
	/* The AH's hop limit bounds how far the group's datagrams go (rdma_cm
	 * gives 1); 0 leaves the socket's default of 1.  TTL and hop limit
	 * are outside the ICRC. */
	if (mcast && av->hop_limit)
		sr_cmsg_put_int(msg, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_TTL : IPV6_HOPLIMIT, av->hop_limit);
	return fd;
}

static void tx_count(struct sr_qp *qp, size_t bytes, uint16_t seg_size)
{
	sr_stat_add(qp->stats, SR_STAT_SENT_PKTS, seg_size ? (bytes + seg_size - 1) / seg_size : 1);
	sr_stat_add(qp->stats, SR_STAT_SENT_BYTES, (uint64_t)bytes);
}

/* One sendmsg of iov, as GSO segments of seg_size bytes if not 0. */
static int tx_sendmsg(struct sr_qp *qp, const struct sr_av *av, struct iovec *iov, int niov, uint16_t seg_size)
{
	struct tx_msg m;
	struct msghdr msg;
	int fd = tx_msg_build(qp, av, iov, niov, seg_size, &m, &msg);
	ssize_t s;

	if (fd < 0)
		return fd;
	sr_dma_begin(); /* gathers straight from registered memory */
	do {
		s = sendmsg(fd, &msg, 0);
	} while (s < 0 && errno == EINTR);
	sr_dma_end();
	if (s < 0) {
		/* datagram semantics: a lost send is recovered by retransmission */
		SR_DBG("QP %u: sendmsg: %s", sr_roce_qpn(qp), strerror(errno));
		return -errno;
	}
	tx_count(qp, (size_t)s, seg_size);
	return 0;
}

static const uint8_t zero_pad[4];

void sr_tx_batch_init(struct sr_tx_batch *b, struct sr_qp *qp, const struct sr_av *av)
{
	b->qp = qp;
	b->av = av;
	b->npkts = 0;
	b->ngroups = 0;
	b->closed = false;
	b->seg_size = 0;
	b->total = 0;
	b->niov = 0;
}

bool sr_tx_batch_add(struct sr_tx_batch *b, struct sr_pkt *h, const struct iovec *pay, int npay, uint32_t paylen)
{
	int i = b->npkts;
	h->pad = (uint8_t)((4 - (paylen & 3)) & 3);
	uint32_t hlen = sr_opcode[h->opcode].hdr_len;
	uint32_t dlen = hlen + paylen + h->pad + SR_ICRC_BYTES;

	if (i >= SR_TX_MAX_PKTS || b->niov + npay + 3 > SR_TX_MAX_IOV)
		return false;
	/* a new run: the first packet, or one that cannot be a GSO segment
	 * of the current run (larger, after a short one, past 64 KiB) */
	bool new_run = !i || b->closed || dlen > b->seg_size || b->total + dlen > SR_TX_MAX_BYTES || rqp(b->qp)->no_gso;
	if (new_run) {
		b->group_first[b->ngroups] = i;
		b->group_seg[b->ngroups++] = dlen;
		b->seg_size = dlen;
		b->total = 0;
		b->closed = false;
	} else if (dlen < b->seg_size) {
		b->closed = true;
	}
	sr_pkt_build_hdr(b->hdr[i], h);
	int first = b->niov;
	b->first_iov[i] = first;
	b->iov[b->niov].iov_base = b->hdr[i];
	b->iov[b->niov++].iov_len = hlen;
	for (int k = 0; k < npay; k++)
		b->iov[b->niov++] = pay[k];
	if (h->pad) {
		b->iov[b->niov].iov_base = (void *)zero_pad;
		b->iov[b->niov++].iov_len = h->pad;
	}
	uint32_t icrc = 0;
	if (b->qp->ctx->dev->crc) {
		/* GSO segment k of its run gets IPv4 ID k */
		struct sr_icrc_env env = tx_env(b->qp, b->av, (uint16_t)(i - b->group_first[b->ngroups - 1]));
		sr_dma_begin(); /* the payload is read from registered memory */
		icrc = sr_icrc_compute_iov(&env, &b->iov[first], b->niov - first);
		sr_dma_end();
	}
	sr_icrc_store(b->icrc[i], icrc);
	b->iov[b->niov].iov_base = b->icrc[i];
	b->iov[b->niov++].iov_len = SR_ICRC_BYTES;
	b->first_iov[i + 1] = b->niov;
	b->group_first[b->ngroups] = i + 1;
	b->total += dlen;
	b->npkts++;
	return true;
}

/* The ICRC of packet i for the IPv4 ID it will be sent with. */
void sr_tx_batch_icrc(struct sr_tx_batch *b, int i, uint16_t id)
{
	int f = b->first_iov[i], l = b->first_iov[i + 1];

	if (b->qp->ctx->dev->crc) {
		struct sr_icrc_env env = tx_env(b->qp, b->av, id);
		sr_dma_begin(); /* the payload is read from registered memory */
		sr_icrc_store(b->icrc[i], sr_icrc_compute_iov(&env, &b->iov[f], l - f - 1));
		sr_dma_end();
	}
}

/* Packets [a, z) one datagram per sendmsg, each ICRC recomputed for the
 * ID 0 a plain send gets: where the kernel has no GSO. */
static int tx_one_by_one(struct sr_tx_batch *b, int a, int z)
{
	int err = 0;

	for (int i = a; i < z; i++) {
		int f = b->first_iov[i], l = b->first_iov[i + 1];

		sr_tx_batch_icrc(b, i, 0);
		int e = tx_sendmsg(b->qp, b->av, &b->iov[f], l - f, 0);
		if (e)
			err = e;
	}
	return err;
}

int sr_tx_batch_send(struct sr_tx_batch *b, int a, int z)
{
	struct tx_msg m[SR_TX_MAX_PKTS];
	struct mmsghdr mm[SR_TX_MAX_PKTS];
	int run_a[SR_TX_MAX_PKTS], run_z[SR_TX_MAX_PKTS];
	uint16_t seg[SR_TX_MAX_PKTS];
	int n = 0, fd = -1, err = 0;

	if (z <= a)
		return 0;
	/* a message per run, or per part of a run that [a, z) cuts */
	for (int g = 0; g < b->ngroups; g++) {
		int x = b->group_first[g] > a ? b->group_first[g] : a;
		int y = b->group_first[g + 1] < z ? b->group_first[g + 1] : z;
		if (x >= y)
			continue;
		if (x != b->group_first[g]) {
			/* the part's segment k is packet x + k: IPv4 ID k */
			for (int i = x; i < y; i++)
				sr_tx_batch_icrc(b, i, (uint16_t)(i - x));
		}
		run_a[n] = x;
		run_z[n] = y;
		seg[n] = y - x > 1 ? (uint16_t)b->group_seg[g] : 0;
		fd = tx_msg_build(b->qp, b->av, &b->iov[b->first_iov[x]], b->first_iov[y] - b->first_iov[x], seg[n],
				  &m[n], &mm[n].msg_hdr);
		if (fd < 0)
			return fd;
		n++;
	}
	for (int k = 0; k < n;) {
		sr_dma_begin(); /* gathers straight from registered memory */
		int s = sendmmsg(fd, &mm[k], (unsigned)(n - k), 0);
		int e = errno;
		sr_dma_end();
		if (s > 0) {
			for (int j = k; j < k + s; j++)
				tx_count(b->qp, mm[j].msg_len, seg[j]);
			k += s;
			continue;
		}
		if (s < 0 && e == EINTR)
			continue;
		/* message k failed: the others go on */
		if (seg[k] && (e == EINVAL || e == EOPNOTSUPP || e == EIO)) {
			/* no GSO here: from now on a datagram per send */
			rqp(b->qp)->no_gso = true;
			int e2 = tx_one_by_one(b, run_a[k], run_z[k]);
			if (e2)
				err = e2;
		} else {
			/* datagram semantics: a lost send is recovered by retransmission */
			SR_DBG("QP %u: sendmmsg: %s", sr_roce_qpn(b->qp), strerror(e));
			err = s < 0 ? -e : -EIO;
		}
		k++;
	}
	return err;
}

int sr_roce_tx_one(struct sr_qp *qp, const struct sr_av *av, struct iovec *iov, int niov)
{
	return tx_sendmsg(qp, av, iov, niov, 0);
}

int sr_roce_tx_run(struct sr_qp *qp, const struct sr_av *av, uint8_t *data, uint32_t len, uint16_t seg)
{
	struct iovec iov = { .iov_base = data, .iov_len = len };
	int err = tx_sendmsg(qp, av, &iov, 1, seg);

	if (!seg || (err != -EINVAL && err != -EOPNOTSUPP && err != -EIO))
		return err;
	/* no GSO here: a datagram per send, each ICRC that of IPv4 ID 0 */
	rqp(qp)->no_gso = true;
	err = 0;
	for (uint32_t off = 0; off < len; off += seg) {
		uint32_t n = len - off < seg ? len - off : seg;
		struct iovec one = { .iov_base = data + off, .iov_len = n - SR_ICRC_BYTES };

		if (n <= SR_ICRC_BYTES)
			break;
		if (qp->ctx->dev->crc) {
			struct sr_icrc_env env = tx_env(qp, av, 0);
			sr_icrc_store(data + off + n - SR_ICRC_BYTES, sr_icrc_compute_iov(&env, &one, 1));
		}
		one.iov_len = n;
		int e = tx_sendmsg(qp, av, &one, 1, 0);
		if (e)
			err = e;
	}
	return err;
}

int sr_tx_batch_flush(struct sr_tx_batch *b)
{
	int err;

	if (!b->npkts)
		return 0;
	if (sr_faults_on(b->qp))
		return sr_roce_fault_flush(b);
	err = sr_tx_batch_send(b, 0, b->npkts);
	sr_tx_batch_init(b, b->qp, b->av);
	return err;
}

int sr_roce_xmit(struct sr_qp *qp, struct sr_pkt *h, const struct iovec *pay, int npay, uint32_t paylen,
		 const struct sr_av *av)
{
	struct sr_tx_batch b;
	sr_tx_batch_init(&b, qp, av);
	sr_tx_batch_add(&b, h, pay, npay, paylen);
	return sr_tx_batch_flush(&b);
}
