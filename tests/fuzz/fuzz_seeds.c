/* Writes the seed corpus of every fuzz target from the kernel rxe/siw
 * captures in tests/data/wire-samples (nothing of it is committed):
 *
 *   fuzz_seeds SAMPLES_DIR OUTDIR
 *
 * OUTDIR/TARGET/ gets one file per seed:
 *   roce_parse   every RoCEv2 datagram of the rxe captures, behind the
 *                14-byte envelope fuzz_roce_parse.c reads (real addresses
 *                and ports, so the ICRC checks from the first run)
 *   iwarp_parse  every TCP payload of the siw captures
 *   cm_mad       every QP1 datagram (CM MAD) of the rxe captures
 *   mpa          the MPA Request/Reply segments of the siw captures, with
 *                the two bytes that choose how fuzz_mpa.c cuts the stream
 *   iwarp_rx     each direction of each siw capture's TCP stream after its
 *                MPA frame (the FPDUs a QP receives), behind the two bytes
 *                fuzz_iwarp_rx.c reads (CRC as the frame negotiated, STags
 *                rewritten, receives posted), 4 KiB at most
 *   daemon       IPC sessions built around the captured datagrams: a
 *                client that says hello, claims QPNs and Communication
 *                IDs, listens on the Service IDs the captured REQs ask for,
 *                then the datagrams arriving on UDP 4791 (fuzz_daemon.c)
 *   conf         configuration files as softrdma-cfg writes them and the
 *                README shows (there is no capture of a file)
 *   rsocket      operation sequences of an honest peer (fuzz_rsocket.h):
 *                no capture holds rsocket traffic, so these are written
 *                here, one per transport, byte order and buffer shape
 *   rs_dgram     datagram rsockets' resolution messages and UD headers,
 *                IPv4 and IPv6, behind fuzz_rs_dgram.c's selector byte
 *                (written here: no capture holds them)
 * Prints how many seeds each target got; exits non-zero if a capture
 * cannot be read. */
#include <errno.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../unit/pcap.h"
#include "fuzz_rsocket.h"
#include "fuzz_daemon.h"

#define ROCE_PORT 4791

static const char *outdir;
static unsigned count;

static void put(const char *target, const char *name, const void *a, size_t alen, const void *b, size_t blen)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", outdir, target);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", outdir, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(a, 1, alen, f) != alen || (blen && fwrite(b, 1, blen, f) != blen) || fclose(f)) {
		fprintf(stderr, "fuzz_seeds: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	count++;
}

static const char *base(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

/* Every capture file of a directory, sorted, so the seeds are stable. */
static int captures(const char *dir, char ***out)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **v = NULL;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);

		if (l < 5 || (strcmp(e->d_name + l - 5, ".pcap") && (l < 7 || strcmp(e->d_name + l - 7, ".pcapng"))))
			continue;
		v = realloc(v, (size_t)(n + 1) * sizeof(*v));
		v[n] = malloc(strlen(dir) + l + 2);
		sprintf(v[n++], "%s/%s", dir, e->d_name);
	}
	closedir(d);
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (strcmp(v[i], v[j]) > 0) {
				char *t = v[i];
				v[i] = v[j];
				v[j] = t;
			}
	*out = v;
	return n;
}

static void open_or_die(struct pcap_file *f, const char *path)
{
	int rc = pcap_open(f, path);

	if (rc) {
		fprintf(stderr, "fuzz_seeds: %s: %s\n", path, strerror(-rc));
		exit(1);
	}
}

/* ---- iWARP streams ---- */

struct dir_stream {
	struct in6_addr src, dst;
	uint16_t sport, dport;
	uint32_t next_seq;
	bool started;
	uint8_t b[4096];
	size_t n;
};

/* The FPDUs of each TCP direction of a siw capture, after the MPA frame. */
static void iwarp_rx_seeds(const char *path)
{
	static struct dir_stream d[8];
	int nd = 0;
	struct pcap_file f;
	struct pcap_tcp t;

	memset(d, 0, sizeof(d));
	open_or_die(&f, path);
	while (pcap_next_tcp(&f, &t) == 1) {
		struct dir_stream *s = NULL;

		if (!t.paylen)
			continue;
		for (int i = 0; i < nd && !s; i++)
			if (!memcmp(&d[i].src, &t.saddr, 16) && !memcmp(&d[i].dst, &t.daddr, 16) &&
			    d[i].sport == t.sport && d[i].dport == t.dport)
				s = &d[i];
		if (!s) {
			if (nd == 8)
				continue;
			s = &d[nd++];
			s->src = t.saddr;
			s->dst = t.daddr;
			s->sport = t.sport;
			s->dport = t.dport;
		}
		if (s->started && t.seq != s->next_seq)
			continue; /* a retransmission or a gap: keep it simple */
		s->started = true;
		s->next_seq = t.seq + (uint32_t)t.paylen;
		size_t k = t.paylen < sizeof(s->b) - s->n ? t.paylen : sizeof(s->b) - s->n;
		memcpy(s->b + s->n, t.payload, k);
		s->n += k;
	}
	pcap_close(&f);
	for (int i = 0; i < nd; i++) {
		struct dir_stream *s = &d[i];
		size_t frame;
		uint8_t head[2];
		char name[300];

		if (s->n < 20 || memcmp(s->b, "MPA ID Re", 9))
			continue;
		frame = 20 + (size_t)(s->b[18] << 8 | s->b[19]);
		if (frame >= s->n)
			continue;
		head[0] = (uint8_t)((s->b[16] & 0x40 ? 1 : 0) | 2 | (s->b[17] == 1 ? 4 : 0));
		head[1] = 0x07; /* seven 256-byte receives */
		snprintf(name, sizeof(name), "%s-%d", base(path), i);
		put("iwarp_rx", name, head, sizeof(head), s->b + frame, s->n - frame);
		head[0] &= (uint8_t)~2; /* and as it is, keys unknown to the QP */
		snprintf(name, sizeof(name), "%s-%d-raw", base(path), i);
		put("iwarp_rx", name, head, sizeof(head), s->b + frame, s->n - frame);
	}
}

/* ---- daemon sessions ---- */

struct sess {
	uint8_t b[1 << 16];
	size_t n;
};

static void s_raw(struct sess *s, const void *p, size_t n)
{
	if (s->n + n <= sizeof(s->b)) {
		memcpy(s->b + s->n, p, n);
		s->n += n;
	}
}

/* One step: who (a client 0..3, or FZ_D_UDP), then the bytes. */
static void s_step(struct sess *s, uint8_t who, const void *body, uint16_t len)
{
	uint8_t h[3] = { who, (uint8_t)len, (uint8_t)(len >> 8) };

	s_raw(s, h, sizeof(h));
	s_raw(s, body, len);
}

static void s_ipc(struct sess *s, uint8_t client, uint16_t type, const void *body, uint32_t blen)
{
	uint8_t m[2048];
	struct sr_ipc_hdr h = { .type = type, .version = SR_IPC_VERSION, .len = blen };

	memcpy(m, &h, sizeof(h));
	if (blen)
		memcpy(m + sizeof(h), body, blen);
	s_step(s, client, m, (uint16_t)(sizeof(h) + blen));
}

/* A datagram from the network: the envelope fuzz_daemon.c reads, then
 * the UDP payload. */
static void s_udp(struct sess *s, const struct pcap_udp *u)
{
	uint8_t m[FZ_D_ENV + 9216];
	struct fz_d_env env = { 0 };

	if (u->paylen > 9216)
		return;
	env.v6 = u->ipver == 6;
	memcpy(env.src, &u->saddr, 16);
	memcpy(env.dst, &u->daddr, 16);
	env.sport = u->sport;
	memcpy(m, &env, sizeof(env));
	memcpy(m + sizeof(env), u->payload, u->paylen);
	s_step(s, FZ_D_UDP, m, (uint16_t)(sizeof(env) + u->paylen));
}

static uint64_t be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void daemon_seeds(char **caps, int ncaps)
{
	for (int i = 0; i < ncaps; i++) {
		static struct sess s;
		struct pcap_file f;
		struct pcap_udp u;
		struct sr_ipc_hello hello = { .pid = 4242 };
		struct sr_ipc_qpn q = { 0 };
		char name[256];

		s.n = 0;
		s_ipc(&s, 0, SR_IPC_HELLO, &hello, sizeof(hello));
		s_ipc(&s, 1, SR_IPC_HELLO, &hello, sizeof(hello));
		s_ipc(&s, 0, SR_IPC_ALLOC_QPN, &q, sizeof(q));
		s_ipc(&s, 0, SR_IPC_ALLOC_QPN, &q, sizeof(q));
		s_ipc(&s, 1, SR_IPC_ALLOC_COMM_ID, NULL, 0);
		s_ipc(&s, 1, SR_IPC_CLAIM_QP1, NULL, 0);
		/* listen on what the captured REQs and SIDR_REQs ask for */
		open_or_die(&f, caps[i]);
		while (pcap_next_udp(&f, &u) == 1) {
			const uint8_t *p = u.payload;

			/* BTH opcode UD SEND_ONLY to QP1, then DETH, then the MAD */
			if (u.dport != ROCE_PORT || u.paylen < 12 + 8 + 24 + 16 || p[0] != 0x64 || p[5] || p[6] ||
			    p[7] != 1)
				continue;
			uint16_t attr = (uint16_t)(p[20 + 16] << 8 | p[20 + 17]);
			if (attr == 0x0010 || attr == 0x0017) {
				struct sr_ipc_listen l = { 0 };

				/* REQ and SIDR_REQ: the Service ID at byte 8 */
				l.service_id = be64(p + 20 + 24 + 8);
				l.local.sin6_family = AF_INET6;
				memcpy(&l.local.sin6_addr, &u.daddr, 16);
				s_ipc(&s, 0, SR_IPC_LISTEN, &l, sizeof(l));
			}
		}
		pcap_close(&f);
		open_or_die(&f, caps[i]);
		while (pcap_next_udp(&f, &u) == 1)
			if (u.dport == ROCE_PORT)
				s_udp(&s, &u);
		pcap_close(&f);
		s_ipc(&s, 0, SR_IPC_STATUS, NULL, 0);
		snprintf(name, sizeof(name), "%s", base(caps[i]));
		put("daemon", name, s.b, s.n, NULL, 0);
	}
}

/* ---- rsocket sessions ---- */

static void rs_seed(const char *name, uint8_t cfg, const uint8_t *ops, size_t nops)
{
	/* sizes: SQ 32, RQ 32, sbuf 16 KiB, rbuf 4 KiB, 4 iomap entries, 16 credits */
	uint8_t head[7] = { cfg, 16, 16, 3, 15, 4, 15 };

	put("rsocket", name, head, sizeof(head), ops, nops);
}

static void rsocket_seeds(void)
{
	/* honest traffic both ways: send, complete, credits, receive */
	static const uint8_t talk[] = {
		FZ_RS_APP_SEND,
		0x00,
		0x10, /* 4 KiB */
		FZ_RS_NIC_COMPLETE,
		4,
		FZ_RS_PEER_GRANT,
		0x00,
		0x10,
		0,
		0,
		FZ_RS_PEER_CREDIT,
		FZ_RS_PEER_DATA,
		0x00,
		0x08, /* 2 KiB */
		FZ_RS_PEER_DATA,
		0x00,
		0x04,
		FZ_RS_APP_RECV,
		0,
		0x00,
		0x02,
		FZ_RS_APP_RECV,
		1,
		0x00,
		0x10, /* peek */
		FZ_RS_APP_RECV,
		2,
		0x00,
		0x0a, /* waitall */
		FZ_RS_APP_PROGRESS,
		FZ_RS_NIC_COMPLETE,
		8,
		FZ_RS_APP_SEND,
		0x00,
		0x40,
		FZ_RS_NIC_COMPLETE,
		16,
		FZ_RS_APP_PROGRESS,
	};
	/* riomap on our side, the peer's iomap entry and a riowrite */
	static const uint8_t iomap[] = {
		FZ_RS_APP_RIOMAP,
		0,
		0x00,
		0x10,
		0x00,
		0x00,
		FZ_RS_NIC_COMPLETE,
		4,
		FZ_RS_PEER_IOMAP,
		1,
		0x00,
		0x01,
		0x00,
		0x20,
		0x00,
		0x00,
		FZ_RS_APP_PROGRESS,
		FZ_RS_APP_RIOWRITE,
		0x00,
		0x08,
		0x10,
		0x00,
		FZ_RS_NIC_COMPLETE,
		4,
		FZ_RS_APP_RIOMAP,
		0,
		0,
		0,
		0,
		0, /* unmap */
	};
	/* an orderly end and a broken one */
	static const uint8_t end[] = {
		FZ_RS_APP_SEND,
		0x00,
		0x02,
		FZ_RS_PEER_DATA,
		0x00,
		0x01,
		FZ_RS_APP_CTRL,
		1,
		FZ_RS_PEER_CTRL,
		0,
		FZ_RS_APP_RECV,
		0,
		0x00,
		0x04,
		FZ_RS_NIC_ERROR,
		0,
		FZ_RS_APP_SEND,
		0x00,
		0x01,
		FZ_RS_APP_RECV,
		0,
		0x00,
		0x01,
	};

	rs_seed("roce-talk", 0x18, talk, sizeof(talk));
	rs_seed("iwarp-talk", 0x19, talk, sizeof(talk));
	rs_seed("roce-be-talk", 0x1c, talk, sizeof(talk));
	rs_seed("roce-noinline-talk", 0x00, talk, sizeof(talk));
	rs_seed("roce-iomap", 0x18, iomap, sizeof(iomap));
	rs_seed("iwarp-iomap", 0x09, iomap, sizeof(iomap));
	rs_seed("roce-end", 0x18, end, sizeof(end));
	rs_seed("iwarp-end", 0x19, end, sizeof(end));
}

/* ---- datagram rsockets (rs_dgram_wire.h) ---- */

static void rs_dgram_seeds(void)
{
	static const uint8_t pay[] = "udpong says hello";
	/* resolution messages: tag, version, op, length, reserved, QPN, address */
	static const uint8_t udp4_data[] = { 0x55, 0x55, 0x55, 0x55, 4, 0, 16, 0, 0, 0, 0x00, 0x11, 127, 0, 0, 1 };
	static const uint8_t udp4_ctrl[] = { 0x55, 0x55, 0x55, 0x55, 4, 7, 16, 0, 0, 0x01, 0x02, 0x03, 10, 0, 0, 2 };
	static const uint8_t udp6_data[] = { 0x55, 0x55, 0x55, 0x55, 6, 0, 28, 0, 0, 0, 0x00, 0x12, 0, 0,
					     0,	   0,	 0,    0,    0, 0, 0,  0, 0, 0, 0,    0,    0, 1 };
	static const uint8_t udp6_ctrl[] = { 0x55, 0x55, 0x55, 0x55, 6,	   7,	 28,   0,   0, 0,
					     0x00, 0x13, 0xfe, 0x80, 0,	   0,	 0,    0,   0, 0,
					     0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55 };
	/* UD headers: version, length, port, (flowinfo,) address */
	static const uint8_t ud4[] = { 4, 8, 0x9c, 0x40, 127, 0, 0, 1 };
	static const uint8_t ud6[] = { 6, 24, 0x9c, 0x41, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 };
	static const struct {
		const char *name;
		uint8_t sel;
		const uint8_t *b;
		size_t n;
		bool payload;
	} s[] = {
		{ "udp4-data", 0, udp4_data, sizeof(udp4_data), true },
		{ "udp4-ctrl", 0, udp4_ctrl, sizeof(udp4_ctrl), false },
		{ "udp6-data", 1, udp6_data, sizeof(udp6_data), true },
		{ "udp6-ctrl", 1, udp6_ctrl, sizeof(udp6_ctrl), false },
		{ "ud4", 0, ud4, sizeof(ud4), true },
		{ "ud6", 1, ud6, sizeof(ud6), true },
	};

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		uint8_t b[64];

		b[0] = s[i].sel;
		memcpy(b + 1, s[i].b, s[i].n);
		put("rs_dgram", s[i].name, b, s[i].n + 1, pay, s[i].payload ? sizeof(pay) - 1 : 0);
	}
}

/* ---- configuration files ---- */

static void conf_seeds(void)
{
	static const char *const files[] = {
		"# softrdma configuration (written by softrdma-cfg)\ncrc = on\n\n[rxe0]\ntype = roce\nnetdev = lo\n",
		"crc = on\n[rxe0]\ntype = roce\nnetdev = lo\nmtu = 4096     # optional cap on the active MTU\n",
		"crc = on\n[siw0]\ntype = iwarp\nnetdev = lo\n",
		"crc = off\n[rxe0]\nnetdev = eth0\nmtu = 1024\n[siw0]\ntype = iwarp\nnetdev = eth0\n",
		"\n# nothing but a comment\n",
		"crc = yes\n[a.b-c_d]\n  type=roce  \n\tnetdev = veth1\r\n",
		"faults = drop=5%,dup=1%,corrupt=0.5%,seed=42\n[rxe0]\nnetdev = lo\nfaults = reorder=2%\n",
		"[siw0]\ntype = iwarp\nnetdev = lo\nfaults = reset=0.01% truncate=.5 rto=50ms seed=0x10\n",
	};

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char name[32];

		snprintf(name, sizeof(name), "conf-%zu", i);
		put("conf", name, files[i], strlen(files[i]), NULL, 0);
	}
}

int main(int argc, char **argv)
{
	char dir[4096], **roce = NULL, **siw = NULL;
	int nroce, nsiw;
	unsigned before;

	if (argc != 3) {
		fprintf(stderr, "usage: %s SAMPLES_DIR OUTDIR\n", argv[0]);
		return 2;
	}
	outdir = argv[2];
	if (mkdir(outdir, 0755) && errno != EEXIST) {
		fprintf(stderr, "fuzz_seeds: %s: %s\n", outdir, strerror(errno));
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s/roce-kernel-rxe", argv[1]);
	nroce = captures(dir, &roce);
	snprintf(dir, sizeof(dir), "%s/iwarp-kernel-siw", argv[1]);
	nsiw = captures(dir, &siw);
	if (!nroce || !nsiw)
		fprintf(stderr, "fuzz_seeds: warning: no captures under %s\n", argv[1]);

	/* RoCE datagrams and CM MADs */
	before = count;
	for (int i = 0; i < nroce; i++) {
		struct pcap_file f;
		struct pcap_udp u;
		int rc;

		open_or_die(&f, roce[i]);
		while ((rc = pcap_next_udp(&f, &u)) == 1) {
			uint8_t env[14] = { 0 };
			char name[256];

			if (u.dport != ROCE_PORT || u.ipver != 4)
				continue;
			/* ID 0 with DF guessed, as a softrdma receiver does: the
			 * seeds exercise the ID solver from the first run */
			env[0] = 2;
			env[3] = (uint8_t)(u.sport >> 8);
			env[4] = (uint8_t)u.sport;
			memcpy(env + 5, &u.saddr.s6_addr[12], 4);
			memcpy(env + 9, &u.daddr.s6_addr[12], 4);
			env[13] = (uint8_t)u.frame;
			snprintf(name, sizeof(name), "%s-%03u", base(roce[i]), u.frame);
			put("roce_parse", name, env, sizeof(env), u.payload, u.paylen);
			if (u.paylen >= 8 && u.payload[5] == 0 && u.payload[6] == 0 && u.payload[7] == 1)
				put("cm_mad", name, u.payload, u.paylen, NULL, 0);
		}
		if (rc < 0) {
			fprintf(stderr, "fuzz_seeds: %s: %s\n", roce[i], f.error);
			return 1;
		}
		pcap_close(&f);
	}
	printf("roce_parse and cm_mad: %u seeds\n", count - before);

	/* iWARP streams and MPA frames */
	before = count;
	for (int i = 0; i < nsiw; i++) {
		struct pcap_file f;
		struct pcap_tcp t;

		open_or_die(&f, siw[i]);
		while (pcap_next_tcp(&f, &t) == 1) {
			char name[256];

			if (!t.paylen)
				continue;
			snprintf(name, sizeof(name), "%s-%03u", base(siw[i]), t.frame);
			put("iwarp_parse", name, t.payload, t.paylen, NULL, 0);
			if (t.paylen >= 4 && !memcmp(t.payload, "MPA ", 4)) {
				static const uint8_t cut[3][2] = { { 0, 0 }, { 1, 0 }, { 0x5a, 0xa5 } };

				for (int k = 0; k < 3; k++) {
					char n2[300];

					snprintf(n2, sizeof(n2), "%s-%d", name, k);
					put("mpa", n2, cut[k], 2, t.payload, t.paylen);
				}
			}
		}
		pcap_close(&f);
	}
	printf("iwarp_parse and mpa: %u seeds\n", count - before);
	before = count;
	for (int i = 0; i < nsiw; i++)
		iwarp_rx_seeds(siw[i]);
	printf("iwarp_rx: %u seeds\n", count - before);

	before = count;
	daemon_seeds(roce, nroce);
	printf("daemon: %u seeds\n", count - before);
	before = count;
	conf_seeds();
	rsocket_seeds();
	rs_dgram_seeds();
	printf("conf, rsocket and rs_dgram: %u seeds\n", count - before);
	for (int i = 0; i < nroce; i++)
		free(roce[i]);
	for (int i = 0; i < nsiw; i++)
		free(siw[i]);
	free(roce);
	free(siw);
	return 0;
}
