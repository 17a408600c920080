/* Datagram rsockets' two headers: built and checked (rs_dgram_wire.h). */
#include <endian.h>
#include <string.h>
#include <netinet/in.h>

#include "rsocket/rs_dgram_wire.h"

void ds_hdr_format(struct ds_header *h, const struct sockaddr *sa)
{
	memset(h, 0, sizeof(*h));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)sa;
		h->version = 4;
		h->length = DS_IPV4_HDR_LEN;
		h->port = s->sin_port;
		h->addr.ipv4 = s->sin_addr.s_addr;
	} else {
		const struct sockaddr_in6 *s = (const void *)sa;
		h->version = 6;
		h->length = DS_IPV6_HDR_LEN;
		h->port = s->sin6_port;
		h->addr.ipv6.flowinfo = s->sin6_flowinfo;
		memcpy(h->addr.ipv6.addr, &s->sin6_addr, 16);
	}
}

int ds_hdr_parse(const void *buf, size_t len, struct sockaddr_storage *src)
{
	const uint8_t *b = buf;

	memset(src, 0, sizeof(*src));
	if (len >= DS_IPV4_HDR_LEN && b[0] == 4 && b[1] == DS_IPV4_HDR_LEN) {
		struct sockaddr_in *s = (void *)src;
		s->sin_family = AF_INET;
		memcpy(&s->sin_port, b + 2, 2);
		memcpy(&s->sin_addr, b + 4, 4);
		return DS_IPV4_HDR_LEN;
	}
	if (len >= DS_IPV6_HDR_LEN && b[0] == 6 && b[1] == DS_IPV6_HDR_LEN) {
		struct sockaddr_in6 *s = (void *)src;
		s->sin6_family = AF_INET6;
		memcpy(&s->sin6_port, b + 2, 2);
		memcpy(&s->sin6_flowinfo, b + 4, 4);
		memcpy(&s->sin6_addr, b + 8, 16);
		return DS_IPV6_HDR_LEN;
	}
	return -1;
}

size_t ds_udp_format(struct ds_udp_header *h, uint8_t op, uint32_t qpn, const struct ds_header *src)
{
	memset(h, 0, sizeof(*h));
	h->tag = htobe32(DS_UDP_TAG);
	h->version = src->version;
	h->op = op;
	h->qpn = htobe32(qpn & 0xffffff);
	if (src->version == 4) {
		h->length = DS_UDP_IPV4_HDR_LEN;
		h->addr.ipv4 = src->addr.ipv4;
	} else {
		h->length = DS_UDP_IPV6_HDR_LEN;
		memcpy(h->addr.ipv6, src->addr.ipv6.addr, 16);
	}
	return h->length;
}

int ds_udp_parse(const void *buf, size_t n, sa_family_t from_family, uint8_t *op, uint32_t *qpn)
{
	const uint8_t *b = buf;
	uint32_t tag, q;
	size_t want;

	if (n < DS_UDP_IPV4_HDR_LEN)
		return -1;
	memcpy(&tag, b, 4);
	if (be32toh(tag) != DS_UDP_TAG)
		return -1;
	if (b[4] == 4 && from_family == AF_INET)
		want = DS_UDP_IPV4_HDR_LEN;
	else if (b[4] == 6 && from_family == AF_INET6)
		want = DS_UDP_IPV6_HDR_LEN;
	else
		return -1;
	if (b[6] != want || n < want || (b[5] != DS_OP_DATA && b[5] != DS_OP_CTRL))
		return -1;
	memcpy(&q, b + 8, 4);
	*op = b[5];
	*qpn = be32toh(q) & 0xffffff;
	return (int)want;
}
