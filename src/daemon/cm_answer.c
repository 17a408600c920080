/* softrdmad: the daemon's own CM answers, as the kernel's CM sends them for
 * requests no process takes; rate-limited. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/softrdmad.h"
#include "common/cmsg.h"

/* ---- the daemon's own CM answers ---- */

/* Answers go to the address a request claims to come from, which may be
 * forged: limit them per source and in total, so the daemon cannot be
 * used to flood a third party. */
static bool answer_allowed(const struct in6_addr *src)
{
	int64_t now = now_ms();
	uint32_t h = 0;
	struct answer_src *s;

	for (int i = 0; i < 16; i += 4) {
		uint32_t w;

		memcpy(&w, &src->s6_addr[i], 4);
		h = (h ^ w) * 0x9E3779B1u;
	}
	s = &d.answer_src[(h >> 16) & (ANSWER_SRC_SLOTS - 1)];
	if (!s->used || !IN6_ARE_ADDR_EQUAL(&s->addr, src)) {
		s->used = true;
		s->addr = *src;
		s->tb.t_ms = now;
		s->tb.milli = (uint64_t)ANSWER_SRC_BURST * 1000;
	}
	if (!tb_take(&s->tb, now, ANSWER_SRC_RATE, ANSWER_SRC_BURST))
		return false;
	return tb_take(&d.answer_all, now, ANSWER_ALL_RATE, ANSWER_ALL_BURST);
}

static bool addr_unicast(const struct in6_addr *a)
{
	if (IN6_IS_ADDR_V4MAPPED(a)) {
		uint8_t b0 = a->s6_addr[12];

		/* 0/8, 224/4 (multicast) and 240/4 (with 255.255.255.255) */
		return b0 != 0 && b0 < 224;
	}
	return !IN6_IS_ADDR_UNSPECIFIED(a) && !IN6_IS_ADDR_MULTICAST(a);
}

/* Send a GSI datagram (BTH + DETH + MAD + ICRC slot, GSI_DGRAM_BYTES) from
 * local:4791 to peer:4791 with IPv4 TOS / IPv6 traffic class tclass,
 * filling in the ICRC.  true if sent. */
bool gsi_send(uint8_t *pkt, const struct sockaddr_in6 *local, const struct sockaddr_in6 *peer, uint8_t tclass)
{
	bool v4 = IN6_IS_ADDR_V4MAPPED(&peer->sin6_addr);
	struct sr_icrc_env env = { 0 };
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { pkt, GSI_DGRAM_BYTES };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf };
	struct cmsghdr *cm = (struct cmsghdr *)ctl.buf;
	struct sockaddr_in to4;
	struct sockaddr_in6 to6;
	int fd = v4 ? d.udp4_fd : d.udp6_fd;

	if (fd < 0 || v4 != IN6_IS_ADDR_V4MAPPED(&local->sin6_addr))
		return false;
	/* Sent from the 4791 socket, unconnected and with DF set, so IPv4 ID 0. */
	env.ipv6 = !v4;
	env.saddr = local->sin6_addr;
	env.daddr = peer->sin6_addr;
	env.sport = SR_ROCE_UDP_PORT;
	env.dport = SR_ROCE_UDP_PORT;
	env.ipv4_df = true;
	sr_icrc_store(pkt + GSI_DGRAM_BYTES - SR_ICRC_BYTES, sr_icrc_compute(&env, pkt, GSI_DGRAM_BYTES));

	memset(&ctl, 0, sizeof(ctl));
	if (v4) {
		struct in_pktinfo pi = { 0 };

		memset(&to4, 0, sizeof(to4));
		to4.sin_family = AF_INET;
		to4.sin_port = htons(SR_ROCE_UDP_PORT);
		memcpy(&to4.sin_addr, &peer->sin6_addr.s6_addr[12], 4);
		memcpy(&pi.ipi_spec_dst, &local->sin6_addr.s6_addr[12], 4);
		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
		msg.msg_controllen = CMSG_SPACE(sizeof(pi));
		msg.msg_name = &to4;
		msg.msg_namelen = sizeof(to4);
	} else {
		struct in6_pktinfo pi = { 0 };

		to6 = *peer;
		to6.sin6_port = htons(SR_ROCE_UDP_PORT);
		to6.sin6_flowinfo = 0;
		pi.ipi6_addr = local->sin6_addr;
		if (IN6_IS_ADDR_LINKLOCAL(&pi.ipi6_addr))
			pi.ipi6_ifindex = (int)local->sin6_scope_id;
		cm->cmsg_level = IPPROTO_IPV6;
		cm->cmsg_type = IPV6_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
		msg.msg_controllen = CMSG_SPACE(sizeof(pi));
		msg.msg_name = &to6;
		msg.msg_namelen = sizeof(to6);
	}
	sr_cmsg_put_tclass(&msg, v4, tclass);
	return sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0;
}

/* What the kernel's CM sends for a request nobody here takes (cm_issue_rej,
 * SIDR_REP IB_SIDR_UNSUPPORTED, cm_issue_drep): the answer goes to the
 * sender's QP1 from the local address the request came to.  req is a
 * checked GSI datagram.  Returns true if the answer was sent. */
bool cm_answer(const uint8_t *req, const struct sr_ipc_pkt *meta, uint16_t attr)
{
	const uint8_t *rmad = req + SR_BTH_BYTES + SR_DETH_BYTES;
	uint8_t pkt[GSI_DGRAM_BYTES];
	uint8_t *mad = pkt + SR_BTH_BYTES + SR_DETH_BYTES;
	bool v4 = IN6_IS_ADDR_V4MAPPED(&meta->src.sin6_addr);
	struct sr_pkt h = { 0 };
	int fd = v4 ? d.udp4_fd : d.udp6_fd;

	/* Without the local address the ICRC cannot be right. */
	if (meta->src.sin6_family != AF_INET6 || meta->dst.sin6_family != AF_INET6 ||
	    !addr_unicast(&meta->src.sin6_addr) || !addr_unicast(&meta->dst.sin6_addr) ||
	    v4 != IN6_IS_ADDR_V4MAPPED(&meta->dst.sin6_addr) || fd < 0) {
		d.all.cm[CM_ANSWER_ERR]++;
		return false;
	}
	if (!answer_allowed(&meta->src.sin6_addr)) {
		d.all.cm[CM_ANSWER_LIMITED]++;
		return false;
	}

	memset(pkt, 0, sizeof(pkt));
	h.opcode = IBV_OPCODE_UD_SEND_ONLY;
	h.pkey = rd16(req + 2);
	h.dqpn = 1;
	h.ackreq = true; /* as the kernel's rxe sends MADs */
	h.psn = d.gsi_psn++ & SR_PSN_MASK;
	h.deth_qkey = SR_GSI_QKEY;
	h.deth_sqpn = 1;
	if (sr_pkt_build_hdr(pkt, &h) != SR_BTH_BYTES + SR_DETH_BYTES) {
		d.all.cm[CM_ANSWER_ERR]++;
		return false;
	}
	mad[0] = MAD_BASE_VERSION;
	mad[1] = MAD_CLASS_CM;
	mad[2] = MAD_CM_CLASS_VERSION;
	mad[3] = MAD_METHOD_SEND;
	memcpy(mad + MAD_OFF_TID, rmad + MAD_OFF_TID, 8);
	switch (attr) {
	case CM_ATTR_REQ:
		wr16(mad + MAD_OFF_ATTR_ID, CM_ATTR_REJ);
		/* Local Communication ID 0: no connection exists on this side.
		 * Message REJected 0 = REQ, no ARI. */
		memcpy(mad + CM_OFF_REMOTE_COMM_ID, rmad + CM_OFF_LOCAL_COMM_ID, 4);
		wr16(mad + CM_OFF_REJ_REASON, CM_REJ_INVALID_SERVICE_ID);
		d.all.cm[CM_REJ_SENT]++;
		break;
	case CM_ATTR_SIDR_REQ:
		wr16(mad + MAD_OFF_ATTR_ID, CM_ATTR_SIDR_REP);
		memcpy(mad + CM_OFF_SIDR_REQUEST_ID, rmad + CM_OFF_SIDR_REQUEST_ID, 4);
		mad[CM_OFF_SIDR_REP_STATUS] = CM_SIDR_UNSUPPORTED;
		memcpy(mad + CM_OFF_SIDR_REP_SERVICE_ID, rmad + CM_OFF_SIDR_REQ_SERVICE_ID, 8);
		d.all.cm[CM_SIDR_REP_SENT]++;
		break;
	case CM_ATTR_DREQ:
		wr16(mad + MAD_OFF_ATTR_ID, CM_ATTR_DREP);
		memcpy(mad + CM_OFF_LOCAL_COMM_ID, rmad + CM_OFF_REMOTE_COMM_ID, 4);
		memcpy(mad + CM_OFF_REMOTE_COMM_ID, rmad + CM_OFF_LOCAL_COMM_ID, 4);
		d.all.cm[CM_DREP_SENT]++;
		break;
	default:
		return false;
	}

	/* the kernel's CM answers through an AH made from the request's
	 * completion: with the traffic class the request came with */
	if (!gsi_send(pkt, &meta->dst, &meta->src, meta->tclass)) {
		d.all.cm[CM_ANSWER_ERR]++;
		return false;
	}
	return true;
}
