/* Control messages of the RoCE UDP sockets (the QPs', the CM's and
 * softrdmad's): an int-valued one appended to a message being sent, and
 * the traffic class both ways. */
#ifndef SR_COMMON_CMSG_H
#define SR_COMMON_CMSG_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* Appends (level, type, v) at msg_controllen; the caller's buffer has
 * room for it. */
static inline void sr_cmsg_put_int(struct msghdr *msg, int level, int type, int v)
{
	struct cmsghdr *cm = (struct cmsghdr *)((char *)msg->msg_control + msg->msg_controllen);

	cm->cmsg_level = level;
	cm->cmsg_type = type;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &v, sizeof(v));
	msg->msg_controllen += CMSG_SPACE(sizeof(int));
}

/* The IPv4 TOS / IPv6 traffic class to send with: all 8 bits, the ECN
 * field with them, as rxe writes the header; 0 leaves the socket's. */
static inline void sr_cmsg_put_tclass(struct msghdr *msg, bool v4, uint8_t tclass)
{
	if (tclass)
		sr_cmsg_put_int(msg, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_TOS : IPV6_TCLASS, tclass);
}

/* A received message's IP_TOS / IPV6_TCLASS (the socket asked for it
 * with IP_RECVTOS / IPV6_RECVTCLASS) into *tclass; false if cm is
 * another. */
static inline bool sr_cmsg_tclass(const struct cmsghdr *cm, uint8_t *tclass)
{
	if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS && cm->cmsg_len >= CMSG_LEN(1)) {
		*tclass = *(const uint8_t *)CMSG_DATA(cm);
		return true;
	}
	if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_TCLASS && cm->cmsg_len >= CMSG_LEN(sizeof(int))) {
		int v;

		memcpy(&v, CMSG_DATA(cm), sizeof(v));
		*tclass = (uint8_t)v;
		return true;
	}
	return false;
}

#endif
