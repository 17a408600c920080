/* pc_verbs: a small verbs and rdma_cm program built the way a user builds
 * against softrdma directly: `cc pc_verbs.c $(pkg-config --cflags --libs
 * softrdma)`, no softrdma-run.  It must load softrdma's libraries from the
 * installed private directory (argv[1]) and move data over RC: an RDMA
 * WRITE and a SEND between two QPs of one process on the loopback GID,
 * then an rdma_cm address lookup. */
#include "vt.h"

#include <limits.h>
#include <link.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>

static const char *want_dir;
static int found_verbs, found_cm, found_other;

static int phdr(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *n = info->dlpi_name, *base = strrchr(n, '/');
	char real[PATH_MAX], *slash;

	if (!base)
		return 0;
	base++;
	if (strcmp(base, "libibverbs.so.1") && strcmp(base, "librdmacm.so.1"))
		return 0;
	/* the run path may name the directory as .../pkgconfig/../softrdma */
	if (realpath(n, real) && (slash = strrchr(real, '/')))
		*slash = 0;
	else
		real[0] = 0;
	if (!strcmp(real, want_dir)) {
		if (!strcmp(base, "libibverbs.so.1"))
			found_verbs++;
		else
			found_cm++;
	} else {
		found_other++;
		printf("  note: %s loaded from %s\n", base, n);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct vt_dev d;
	struct vt_qp_cfg c;
	struct vt_pair p;
	char *src, *dst, *rbuf;
	struct ibv_mr *smr, *dmr, *rmr;
	const size_t len = 64 * 1024;
	struct rdma_addrinfo hints = { .ai_flags = RAI_NUMERICHOST, .ai_port_space = RDMA_PS_TCP }, *res = NULL;

	vt_begin("pc_verbs", 60);
	if (argc != 2) {
		fprintf(stderr, "usage: pc_verbs PRIVATE_LIBDIR\n");
		return 2;
	}
	want_dir = realpath(argv[1], NULL);
	if (!want_dir) {
		fprintf(stderr, "pc_verbs: %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	dl_iterate_phdr(phdr, NULL);
	CHECK(found_verbs == 1 && found_cm == 1 && !found_other,
	      "libibverbs.so.1 and librdmacm.so.1 come from %s\t(verbs %d, cm %d, elsewhere %d)", want_dir, found_verbs,
	      found_cm, found_other);

	if (!vt_open(&d))
		return vt_end();
	CHECK(!strncmp(d.attr.fw_ver, "softrdma", 8), "the device is softrdma's (fw_ver %s)", d.attr.fw_ver);
	vt_cfg_default(&c, IBV_QPT_RC);
	if (vt_pair_setup(&d, &c, &p)) {
		src = malloc(len);
		dst = calloc(1, len);
		rbuf = calloc(1, len);
		for (size_t i = 0; i < len; i++)
			src[i] = (char)(i * 7 + 3);
		smr = ibv_reg_mr(d.pd, src, len, IBV_ACCESS_LOCAL_WRITE);
		dmr = ibv_reg_mr(d.pd, dst, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		rmr = ibv_reg_mr(d.pd, rbuf, len, IBV_ACCESS_LOCAL_WRITE);
		if (CHECK(smr && dmr && rmr, "register three regions")) {
			CHECK_RC(vt_post_send(p.qp[0], 1, IBV_WR_RDMA_WRITE, src, (uint32_t)len, smr->lkey,
					      IBV_SEND_SIGNALED, (uintptr_t)dst, dmr->rkey, 0),
				 0, "post RDMA WRITE of 64 KiB");
			EXPECT_WC(p.scq[0], 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL, "RDMA WRITE completes");
			CHECK(!memcmp(src, dst, len), "the written data arrived intact");
			CHECK_RC(vt_post_recv(p.qp[1], 2, rbuf, (uint32_t)len, rmr->lkey), 0, "post receive");
			CHECK_RC(vt_post_send(p.qp[0], 3, IBV_WR_SEND, src, 4096, smr->lkey, IBV_SEND_SIGNALED, 0, 0,
					      0),
				 0, "post SEND of 4 KiB");
			EXPECT_WC(p.scq[0], 3, IBV_WC_SUCCESS, IBV_WC_SEND, NULL, "SEND completes");
			EXPECT_WC(p.rcq[1], 2, IBV_WC_SUCCESS, IBV_WC_RECV, NULL, "receive completes");
			CHECK(!memcmp(src, rbuf, 4096), "the sent data arrived intact");
		}
		if (smr)
			ibv_dereg_mr(smr);
		if (dmr)
			ibv_dereg_mr(dmr);
		if (rmr)
			ibv_dereg_mr(rmr);
		free(src);
		free(dst);
		free(rbuf);
	}
	vt_pair_destroy(&p);
	vt_close(&d);

	CHECK_RC(rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res), 0, "rdma_getaddrinfo(127.0.0.1) from librdmacm");
	if (res)
		rdma_freeaddrinfo(res);
	return vt_end();
}
