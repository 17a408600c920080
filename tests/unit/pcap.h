/* A small capture-file reader for tests: libpcap (classic, either byte
 * order, micro- or nanosecond) and pcapng (SHB/IDB/EPB/SPB/PB, either byte
 * order, several sections), link types Ethernet (with 802.1Q/802.1ad tags),
 * Linux cooked SLL and SLL2, and raw IP; down to IPv4/IPv6 and UDP or TCP.
 *
 * The wire-sample files are named *.pcap but are pcapng, which is why both
 * formats are read: the format is taken from the magic, never the name.
 *
 * Every length in the file is treated as hostile: a record that would read
 * past its block, its capture length or the file is skipped or ends the
 * walk with an error, never read. */
#ifndef SR_TEST_PCAP_H
#define SR_TEST_PCAP_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#define PCAP_LINKTYPE_NULL_RAW 101 /* LINKTYPE_RAW */
#define PCAP_LINKTYPE_ETHERNET 1
#define PCAP_LINKTYPE_LINUX_SLL 113
#define PCAP_LINKTYPE_LINUX_SLL2 276
#define PCAP_LINKTYPE_IPV4 228
#define PCAP_LINKTYPE_IPV6 229

#define PCAP_MAX_IFACES 64

struct pcap_file {
	uint8_t *data;
	size_t size;
	size_t off;	   /* next record / block */
	bool ng;	   /* pcapng */
	bool swap;	   /* file (section) byte order differs from ours */
	uint32_t linktype; /* classic pcap */
	unsigned nifaces;  /* pcapng: interfaces of the current section */
	uint16_t if_linktype[PCAP_MAX_IFACES];
	uint32_t if_snaplen[PCAP_MAX_IFACES];
	unsigned frame;	   /* frames seen so far, all kinds */
	const char *error; /* set when the walk stopped on a malformed file */
};

/* One UDP datagram found in a frame. */
struct pcap_udp {
	unsigned frame;		      /* 1-based, as tshark numbers frames */
	int ipver;		      /* 4 or 6 */
	struct in6_addr saddr, daddr; /* IPv4 as IPv4-mapped */
	uint16_t sport, dport;
	uint16_t ipv4_id;
	bool ipv4_df;
	uint8_t tos_tclass;
	uint8_t ttl_hlim;
	const uint8_t *payload; /* into the file buffer */
	size_t paylen;		/* from the UDP length field */
};

static inline uint16_t pcap_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint16_t pcap_u16(const struct pcap_file *f, const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return f->swap ? __builtin_bswap16(v) : v;
}

static inline uint32_t pcap_u32(const struct pcap_file *f, const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return f->swap ? __builtin_bswap32(v) : v;
}

static inline void pcap_close(struct pcap_file *f)
{
	free(f->data);
	memset(f, 0, sizeof(*f));
}

/* Returns 0 or -errno. */
static inline int pcap_open(struct pcap_file *f, const char *path)
{
	FILE *fp = fopen(path, "rb");
	long sz;
	uint32_t magic;

	memset(f, 0, sizeof(*f));
	if (!fp)
		return -errno;
	if (fseek(fp, 0, SEEK_END) || (sz = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET)) {
		fclose(fp);
		return -EIO;
	}
	f->data = malloc(sz ? (size_t)sz : 1);
	if (!f->data) {
		fclose(fp);
		return -ENOMEM;
	}
	f->size = fread(f->data, 1, (size_t)sz, fp);
	fclose(fp);
	if (f->size != (size_t)sz || f->size < 24) {
		pcap_close(f);
		return -EINVAL;
	}

	memcpy(&magic, f->data, 4);
	if (magic == 0x0a0d0d0a) {
		/* pcapng: the section header sets the byte order; parsed by the walk. */
		f->ng = true;
		return 0;
	}
	if (magic == 0xa1b2c3d4 || magic == 0xa1b23c4d) {
		f->swap = false;
	} else if (magic == 0xd4c3b2a1 || magic == 0x4d3cb2a1) {
		f->swap = true;
	} else {
		pcap_close(f);
		return -EINVAL;
	}
	/* The upper bits of the link-type word may carry FCS information. */
	f->linktype = pcap_u32(f, f->data + 20) & 0x0fffffff;
	f->off = 24;
	return 0;
}

/* Walk Ethernet/SLL/raw framing down to the network header: its
 * ethertype and offset.  Returns false for link types and frames it can't
 * walk. */
static inline bool pcap_link_walk(uint32_t linktype, const uint8_t *p, size_t caplen, uint16_t *ethertype_out,
				  size_t *off_out)
{
	size_t off;
	uint16_t ethertype;

	switch (linktype) {
	case PCAP_LINKTYPE_ETHERNET:
		if (caplen < 14)
			return false;
		ethertype = pcap_be16(p + 12);
		off = 14;
		while (ethertype == 0x8100 || ethertype == 0x88a8 || ethertype == 0x9100) {
			if (caplen < off + 4)
				return false;
			ethertype = pcap_be16(p + off + 2);
			off += 4;
		}
		break;
	case PCAP_LINKTYPE_LINUX_SLL:
		if (caplen < 16)
			return false;
		ethertype = pcap_be16(p + 14);
		off = 16;
		break;
	case PCAP_LINKTYPE_LINUX_SLL2:
		if (caplen < 20)
			return false;
		ethertype = pcap_be16(p);
		off = 20;
		break;
	case PCAP_LINKTYPE_NULL_RAW:
	case PCAP_LINKTYPE_IPV4:
	case PCAP_LINKTYPE_IPV6:
		if (caplen < 1)
			return false;
		ethertype = (p[0] >> 4) == 6 ? 0x86dd : 0x0800;
		off = 0;
		break;
	default:
		return false;
	}
	*ethertype_out = ethertype;
	*off_out = off;
	return true;
}

/* Walk Ethernet/SLL/raw framing down to the IP header; then IP to UDP.
 * Returns true and fills u if the frame is an unfragmented UDP datagram
 * whose UDP length fits inside the captured bytes. */
static inline bool pcap_frame_udp(uint32_t linktype, const uint8_t *p, size_t caplen, struct pcap_udp *u)
{
	size_t off;
	uint16_t ethertype;
	const uint8_t *ip, *udp;
	size_t iplen, ulen;
	uint8_t nh;

	if (!pcap_link_walk(linktype, p, caplen, &ethertype, &off))
		return false;

	memset(u, 0, sizeof(*u));
	ip = p + off;
	iplen = caplen - off;
	if (ethertype == 0x0800) {
		size_t ihl, tot;
		uint16_t frag;

		if (iplen < 20 || (ip[0] >> 4) != 4)
			return false;
		ihl = (size_t)(ip[0] & 0xf) * 4;
		tot = pcap_be16(ip + 2);
		if (ihl < 20 || tot < ihl || tot > iplen)
			return false;
		frag = pcap_be16(ip + 6);
		if ((frag & 0x3fff) || ip[9] != IPPROTO_UDP)
			return false; /* fragments and non-UDP */
		u->ipver = 4;
		u->tos_tclass = ip[1];
		u->ipv4_id = pcap_be16(ip + 4);
		u->ipv4_df = frag & 0x4000;
		u->ttl_hlim = ip[8];
		u->saddr.s6_addr[10] = u->saddr.s6_addr[11] = 0xff;
		u->daddr.s6_addr[10] = u->daddr.s6_addr[11] = 0xff;
		memcpy(&u->saddr.s6_addr[12], ip + 12, 4);
		memcpy(&u->daddr.s6_addr[12], ip + 16, 4);
		udp = ip + ihl;
		iplen = tot - ihl; /* drops Ethernet padding */
	} else if (ethertype == 0x86dd) {
		size_t plen, hoff = 40;

		if (iplen < 40 || (ip[0] >> 4) != 6)
			return false;
		plen = pcap_be16(ip + 4);
		if (40 + plen > iplen)
			return false;
		u->ipver = 6;
		u->tos_tclass = (uint8_t)((ip[0] & 0xf) << 4 | ip[1] >> 4);
		u->ttl_hlim = ip[7];
		memcpy(&u->saddr, ip + 8, 16);
		memcpy(&u->daddr, ip + 24, 16);
		nh = ip[6];
		/* Hop-by-hop, routing and destination options may precede UDP. */
		while (nh == 0 || nh == 43 || nh == 60) {
			size_t hl;

			if (hoff + 8 > 40 + plen)
				return false;
			hl = ((size_t)ip[hoff + 1] + 1) * 8;
			nh = ip[hoff];
			hoff += hl;
		}
		if (nh != IPPROTO_UDP || hoff > 40 + plen)
			return false;
		udp = ip + hoff;
		iplen = 40 + plen - hoff;
	} else {
		return false;
	}

	if (iplen < 8)
		return false;
	ulen = pcap_be16(udp + 4);
	if (ulen < 8 || ulen > iplen)
		return false;
	u->sport = pcap_be16(udp);
	u->dport = pcap_be16(udp + 2);
	u->payload = udp + 8;
	u->paylen = ulen - 8;
	return true;
}

/* Next frame of the file: its bytes, captured length and link type (pkt
 * NULL for a frame on an interface the file never described).  Returns 1,
 * 0 at the end, -1 if the file is malformed (f->error says where). */
static inline int pcap_next_frame(struct pcap_file *f, const uint8_t **pkt_out, size_t *caplen_out,
				  uint32_t *linktype_out)
{
	for (;;) {
		const uint8_t *pkt = NULL;
		size_t caplen = 0;
		uint32_t linktype = 0;
		bool is_frame = false;

		if (f->off == f->size)
			return 0;

		if (!f->ng) {
			const uint8_t *rec = f->data + f->off;
			uint32_t incl;

			if (f->size - f->off < 16) {
				f->error = "truncated record header";
				return -1;
			}
			incl = pcap_u32(f, rec + 8);
			if (incl > f->size - f->off - 16) {
				f->error = "record runs past end of file";
				return -1;
			}
			pkt = rec + 16;
			caplen = incl;
			linktype = f->linktype;
			is_frame = true;
			f->off += 16 + (size_t)incl;
		} else {
			const uint8_t *blk = f->data + f->off;
			size_t avail = f->size - f->off;
			uint32_t type, blen;

			if (avail < 12) {
				f->error = "truncated block header";
				return -1;
			}
			memcpy(&type, blk, 4);
			if (type == 0x0a0d0d0a) {
				/* A section header: the byte-order magic decides how every
				 * later length is read, including this block's own. */
				uint32_t bom;

				if (avail < 28) {
					f->error = "truncated section header";
					return -1;
				}
				memcpy(&bom, blk + 8, 4);
				if (bom == 0x1a2b3c4d)
					f->swap = false;
				else if (bom == 0x4d3c2b1a)
					f->swap = true;
				else {
					f->error = "bad byte-order magic";
					return -1;
				}
				f->nifaces = 0;
			}
			type = pcap_u32(f, blk);
			blen = pcap_u32(f, blk + 4);
			if (blen < 12 || (blen & 3) || blen > avail || pcap_u32(f, blk + blen - 4) != blen) {
				f->error = "bad block length";
				return -1;
			}
			switch (type) {
			case 1: /* interface description */
				if (blen < 20) {
					f->error = "short interface block";
					return -1;
				}
				if (f->nifaces < PCAP_MAX_IFACES) {
					f->if_linktype[f->nifaces] = pcap_u16(f, blk + 8);
					f->if_snaplen[f->nifaces] = pcap_u32(f, blk + 12);
				}
				f->nifaces++;
				break;
			case 6: { /* enhanced packet */
				uint32_t ifid, cl;

				if (blen < 32) {
					f->error = "short enhanced packet block";
					return -1;
				}
				ifid = pcap_u32(f, blk + 8);
				cl = pcap_u32(f, blk + 20);
				if (cl > blen - 32) {
					f->error = "packet runs past its block";
					return -1;
				}
				is_frame = true;
				if (ifid < f->nifaces && ifid < PCAP_MAX_IFACES) {
					pkt = blk + 28;
					caplen = cl;
					linktype = f->if_linktype[ifid];
				}
				break;
			}
			case 3: { /* simple packet: interface 0, length implied */
				uint32_t olen;

				if (blen < 16) {
					f->error = "short simple packet block";
					return -1;
				}
				olen = pcap_u32(f, blk + 8);
				caplen = blen - 16;
				if (olen < caplen)
					caplen = olen;
				if (f->nifaces && f->if_snaplen[0] && caplen > f->if_snaplen[0])
					caplen = f->if_snaplen[0];
				is_frame = true;
				if (f->nifaces) {
					pkt = blk + 12;
					linktype = f->if_linktype[0];
				}
				break;
			}
			case 2: { /* obsolete packet block */
				uint16_t ifid;
				uint32_t cl;

				if (blen < 32) {
					f->error = "short packet block";
					return -1;
				}
				ifid = pcap_u16(f, blk + 8);
				cl = pcap_u32(f, blk + 20);
				if (cl > blen - 32) {
					f->error = "packet runs past its block";
					return -1;
				}
				is_frame = true;
				if (ifid < f->nifaces && ifid < PCAP_MAX_IFACES) {
					pkt = blk + 28;
					caplen = cl;
					linktype = f->if_linktype[ifid];
				}
				break;
			}
			default: /* statistics, name resolution, custom... */
				break;
			}
			f->off += blen;
		}

		if (!is_frame)
			continue;
		f->frame++;
		*pkt_out = pkt;
		*caplen_out = caplen;
		*linktype_out = linktype;
		return 1;
	}
}

/* Next UDP datagram.  Returns 1 (u filled), 0 at the end, -1 if the file
 * is malformed (f->error says where). */
static inline int pcap_next_udp(struct pcap_file *f, struct pcap_udp *u)
{
	for (;;) {
		const uint8_t *pkt;
		size_t caplen;
		uint32_t linktype;
		int r = pcap_next_frame(f, &pkt, &caplen, &linktype);

		if (r <= 0)
			return r;
		if (pkt && pcap_frame_udp(linktype, pkt, caplen, u)) {
			u->frame = f->frame;
			return 1;
		}
	}
}

/* One TCP segment found in a frame (IPv4 or IPv6 without extension
 * headers other than hop-by-hop, routing and destination options). */
struct pcap_tcp {
	unsigned frame; /* 1-based, as tshark numbers frames */
	int ipver;
	struct in6_addr saddr, daddr; /* IPv4 as IPv4-mapped */
	uint16_t sport, dport;
	uint32_t seq, ack;
	uint8_t flags;		/* FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10 */
	const uint8_t *payload; /* into the file buffer */
	size_t paylen;		/* from the IP length, not the capture */
};

#define PCAP_TCP_FIN 0x01
#define PCAP_TCP_SYN 0x02
#define PCAP_TCP_RST 0x04

/* Returns true and fills t if the frame is an unfragmented TCP segment
 * whose header and payload lie inside the captured bytes. */
static inline bool pcap_frame_tcp(uint32_t linktype, const uint8_t *p, size_t caplen, struct pcap_tcp *t)
{
	size_t off, iplen, thl;
	uint16_t ethertype;
	const uint8_t *ip, *tcp;
	uint8_t nh;

	if (!pcap_link_walk(linktype, p, caplen, &ethertype, &off))
		return false;
	memset(t, 0, sizeof(*t));
	ip = p + off;
	iplen = caplen - off;
	if (ethertype == 0x0800) {
		size_t ihl, tot;

		if (iplen < 20 || (ip[0] >> 4) != 4)
			return false;
		ihl = (size_t)(ip[0] & 0xf) * 4;
		tot = pcap_be16(ip + 2);
		if (ihl < 20 || tot < ihl || tot > iplen)
			return false;
		if ((pcap_be16(ip + 6) & 0x3fff) || ip[9] != IPPROTO_TCP)
			return false;
		t->ipver = 4;
		t->saddr.s6_addr[10] = t->saddr.s6_addr[11] = 0xff;
		t->daddr.s6_addr[10] = t->daddr.s6_addr[11] = 0xff;
		memcpy(&t->saddr.s6_addr[12], ip + 12, 4);
		memcpy(&t->daddr.s6_addr[12], ip + 16, 4);
		tcp = ip + ihl;
		iplen = tot - ihl;
	} else if (ethertype == 0x86dd) {
		size_t plen, hoff = 40;

		if (iplen < 40 || (ip[0] >> 4) != 6)
			return false;
		plen = pcap_be16(ip + 4);
		if (40 + plen > iplen)
			return false;
		t->ipver = 6;
		memcpy(&t->saddr, ip + 8, 16);
		memcpy(&t->daddr, ip + 24, 16);
		nh = ip[6];
		while (nh == 0 || nh == 43 || nh == 60) {
			if (hoff + 8 > 40 + plen)
				return false;
			nh = ip[hoff];
			hoff += ((size_t)ip[hoff + 1] + 1) * 8;
		}
		if (nh != IPPROTO_TCP || hoff > 40 + plen)
			return false;
		tcp = ip + hoff;
		iplen = 40 + plen - hoff;
	} else {
		return false;
	}
	if (iplen < 20)
		return false;
	thl = (size_t)(tcp[12] >> 4) * 4;
	if (thl < 20 || thl > iplen)
		return false;
	t->sport = pcap_be16(tcp);
	t->dport = pcap_be16(tcp + 2);
	t->seq = (uint32_t)pcap_be16(tcp + 4) << 16 | pcap_be16(tcp + 6);
	t->ack = (uint32_t)pcap_be16(tcp + 8) << 16 | pcap_be16(tcp + 10);
	t->flags = tcp[13];
	t->payload = tcp + thl;
	t->paylen = iplen - thl;
	return true;
}

/* Next TCP segment.  Returns 1 (t filled), 0 at the end, -1 if the file
 * is malformed (f->error says where). */
static inline int pcap_next_tcp(struct pcap_file *f, struct pcap_tcp *t)
{
	for (;;) {
		const uint8_t *pkt;
		size_t caplen;
		uint32_t linktype;
		int r = pcap_next_frame(f, &pkt, &caplen, &linktype);

		if (r <= 0)
			return r;
		if (pkt && pcap_frame_tcp(linktype, pkt, caplen, t)) {
			t->frame = f->frame;
			return 1;
		}
	}
}

#endif
