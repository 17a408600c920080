/* The wire format of datagram rsockets (rdma-core's struct ds_udp_header
 * and struct ds_header): building and checking the two headers a peer
 * sends, with no state, so that the parsers can be fuzzed alone
 * (tests/fuzz/fuzz_rs_dgram.c).  What the headers mean and when each is
 * sent is in rs_dgram.c.
 *
 *   UDP resolution message, to the peer's UDP socket:
 *     be32 tag      0x55555555
 *     u8   version  4 or 6 (the sender's QP address family)
 *     u8   op       0 data follows (answer me), 7 control (my QPN only)
 *     u8   length   16 (IPv4) or 28 (IPv6): this header's size
 *     u8   reserved 0
 *     be32 qpn      the sender's UD QPN (24 bits)
 *     be32 / u8[16] the sender's QP source IP address
 *     then the datagram's payload (op 0)
 *
 *   UD send payload (after the 40-byte GRH the receiver posts first):
 *     u8   version  4 or 6
 *     u8   length   8 (IPv4) or 24 (IPv6): this header's size
 *     be16 port     the sender's UDP port
 *     IPv4: be32 address; IPv6: be32 flowinfo, u8[16] address
 *     then the payload */
#ifndef SR_RS_DGRAM_WIRE_H
#define SR_RS_DGRAM_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <linux/types.h>

#define DS_UDP_TAG 0x55555555u
#define DS_UDP_IPV4_HDR_LEN 16
#define DS_UDP_IPV6_HDR_LEN 28
#define DS_IPV4_HDR_LEN 8
#define DS_IPV6_HDR_LEN 24
#define DS_OP_DATA 0 /* rsockets' RS_OP_DATA */
#define DS_OP_CTRL 7 /* rsockets' RS_OP_CTRL */

struct ds_header {
	uint8_t version;
	uint8_t length;
	__be16 port;
	union {
		__be32 ipv4;
		struct {
			__be32 flowinfo;
			uint8_t addr[16];
		} ipv6;
	} addr;
};

struct ds_udp_header {
	__be32 tag;
	uint8_t version;
	uint8_t op;
	uint8_t length;
	uint8_t reserved;
	__be32 qpn;
	union {
		__be32 ipv4;
		uint8_t ipv6[16];
	} addr;
};

_Static_assert(sizeof(struct ds_header) == DS_IPV6_HDR_LEN, "ds_header is 24 bytes (IPv6)");
_Static_assert(sizeof(struct ds_udp_header) == DS_UDP_IPV6_HDR_LEN, "ds_udp_header is 28 bytes (IPv6)");

/* The UD header naming sa (AF_INET or AF_INET6) as the source. */
void ds_hdr_format(struct ds_header *h, const struct sockaddr *sa);

/* A UD datagram's payload of len bytes (after the GRH): its header's
 * length (8 or 24) if it is an rsocket's, the source it names in *src;
 * -1 if not (too short, unknown version, a length that is not the
 * version's). */
int ds_hdr_parse(const void *buf, size_t len, struct sockaddr_storage *src);

/* A resolution message's header for op (DS_OP_DATA or DS_OP_CTRL) from
 * the QP numbered qpn whose UD header is src; returns its length. */
size_t ds_udp_format(struct ds_udp_header *h, uint8_t op, uint32_t qpn, const struct ds_header *src);

/* A datagram of n bytes that came to the UDP socket from a sender of
 * address family from_family: the header's length (16 or 28) if it is an
 * rsocket's resolution message, its op and 24-bit QPN in *op and *qpn;
 * -1 if not (short, wrong tag, a version other than the sender's family,
 * a length that is not the version's, an unknown op). */
int ds_udp_parse(const void *buf, size_t n, sa_family_t from_family, uint8_t *op, uint32_t *qpn);

#endif
