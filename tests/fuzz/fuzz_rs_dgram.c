/* libFuzzer harness for datagram rsockets' two headers
 * (src/rsocket/rs_dgram_wire.c): what any host can send to a datagram
 * rsocket's UDP port (a resolution message, ds_udp_parse) and what any
 * UD QP can send to its QP (the UD payload header, ds_hdr_parse).
 *
 * Input: one selector byte, then the datagram.
 *   bit 0  the sender's address family for ds_udp_parse: 0 IPv4, 1 IPv6
 *
 * Seeds (fuzz_seeds.c): both kinds of header, IPv4 and IPv6, each op,
 * with and without payload (no capture holds rsocket datagrams).
 *
 * Invariants (abort() on violation):
 *  - an accepted resolution header is 16 (IPv4 sender) or 28 (IPv6) bytes
 *    and no longer than the datagram, its op data or control, its QPN 24
 *    bits; built again from what was parsed it gives the same bytes but
 *    the reserved byte and the QPN's unused top byte;
 *  - an accepted UD header is 8 (version 4) or 24 (version 6) bytes, no
 *    longer than the datagram, and the source it names builds the very
 *    same header;
 *  - each verdict depends on the header's bytes only: any shorter datagram
 *    is refused, any longer one with the same header accepted alike. */
#include <netinet/in.h>

#include "fuzz.h"
#include "rsocket/rs_dgram_wire.h"

static void check_udp(const uint8_t *d, size_t n, sa_family_t fam)
{
	uint8_t *b = fz_dup(d, n), op = 0xff;
	uint32_t qpn = 0xffffffff;
	int h = ds_udp_parse(b, n, fam, &op, &qpn);

	if (h >= 0) {
		REQUIRE(h == (fam == AF_INET ? DS_UDP_IPV4_HDR_LEN : DS_UDP_IPV6_HDR_LEN));
		REQUIRE((size_t)h <= n);
		REQUIRE(op == DS_OP_DATA || op == DS_OP_CTRL);
		REQUIRE(qpn <= 0xffffff);

		struct ds_header src = { .version = b[4] };
		struct ds_udp_header again;
		if (src.version == 4)
			memcpy(&src.addr.ipv4, b + 12, 4);
		else
			memcpy(src.addr.ipv6.addr, b + 12, 16);
		REQUIRE(ds_udp_format(&again, op, qpn, &src) == (size_t)h);
		const uint8_t *a = (const uint8_t *)&again;
		for (int i = 0; i < h; i++)
			if (i != 7 && i != 8)
				REQUIRE(a[i] == b[i]);

		uint8_t op2;
		uint32_t qpn2;
		for (size_t k = 0; k < (size_t)h; k++)
			REQUIRE(ds_udp_parse(b, k, fam, &op2, &qpn2) < 0);
		uint8_t *longer = malloc((size_t)h + 7);
		REQUIRE(longer);
		memcpy(longer, b, (size_t)h);
		memset(longer + h, 0xa5, 7);
		REQUIRE(ds_udp_parse(longer, (size_t)h + 7, fam, &op2, &qpn2) == h && op2 == op && qpn2 == qpn);
		free(longer);
	}
	free(b);
}

static void check_ud(const uint8_t *d, size_t n)
{
	uint8_t *b = fz_dup(d, n);
	struct sockaddr_storage src;
	int h = ds_hdr_parse(b, n, &src);

	if (h >= 0) {
		REQUIRE(h == DS_IPV4_HDR_LEN || h == DS_IPV6_HDR_LEN);
		REQUIRE((size_t)h <= n);
		REQUIRE(src.ss_family == (h == DS_IPV4_HDR_LEN ? AF_INET : AF_INET6));

		struct ds_header again;
		ds_hdr_format(&again, (const struct sockaddr *)&src);
		REQUIRE(again.length == h);
		REQUIRE(!memcmp(&again, b, (size_t)h));

		struct sockaddr_storage s2;
		for (size_t k = 0; k < (size_t)h; k++)
			REQUIRE(ds_hdr_parse(b, k, &s2) < 0);
		uint8_t *longer = malloc((size_t)h + 5);
		REQUIRE(longer);
		memcpy(longer, b, (size_t)h);
		memset(longer + h, 0x5a, 5);
		REQUIRE(ds_hdr_parse(longer, (size_t)h + 5, &s2) == h && !memcmp(&s2, &src, sizeof(src)));
		free(longer);
	}
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	check_udp(data + 1, size - 1, (data[0] & 1) ? AF_INET6 : AF_INET);
	check_ud(data + 1, size - 1);
	return 0;
}
