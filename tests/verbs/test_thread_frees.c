/* test_thread_frees: softrdma's progress thread frees no memory of a
 * destroyed QP.  A QP's large send ring is an mmapped chunk, and its free
 * is a munmap; libfabric's memhooks monitor (and UCX's binary patching)
 * rewrites munmap's code while the program runs, so a library thread
 * that executes munmap then may run half-written code and crash (a
 * SIGSEGV in __munmap, fi_pingpong -p 'verbs;ofi_rxm' under load: the
 * progress thread was late to free a probing QP and freed it while the
 * main thread opened the domain).  The application's own threads free
 * the memory instead, at its next destroy or at close.
 *
 * The test takes the place of free() (its definition comes first in the
 * symbol lookup) and counts the frees of mmapped chunks by thread.  The
 * sanitizers have allocators of their own: there the QPs are destroyed
 * and the counts only reported. */
#include <dlfcn.h>
#include <malloc.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vt.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define VT_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define VT_SANITIZER 1
#endif
#endif

/* Chunks this large are mmapped (fixed: no dynamic threshold) */
#define MMAP_MIN (64 * 1024)

static struct vt_dev D;
static pid_t main_tid;
static atomic_int big_frees, big_frees_elsewhere;

#ifndef VT_SANITIZER
static void (*real_free)(void *);
static atomic_bool resolving;

void free(void *p)
{
	if (!real_free) {
		if (atomic_exchange(&resolving, true))
			return; /* dlsym's own frees while it resolves: leaked */
		real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
		atomic_store(&resolving, false);
	}
	if (p && main_tid && malloc_usable_size(p) >= MMAP_MIN) {
		atomic_fetch_add(&big_frees, 1);
		if ((pid_t)syscall(SYS_gettid) != main_tid)
			atomic_fetch_add(&big_frees_elsewhere, 1);
	}
	real_free(p);
}
#endif

static struct ibv_qp *big_qp(struct ibv_cq *cq, enum ibv_qp_type t)
{
	/* 512 WRs of 512 bytes inline: a send ring of about 300 KiB */
	struct ibv_qp_init_attr a = { .send_cq = cq,
				      .recv_cq = cq,
				      .qp_type = t,
				      .cap = { .max_send_wr = 512,
					       .max_recv_wr = 512,
					       .max_send_sge = 1,
					       .max_recv_sge = 1,
					       .max_inline_data = 512 } };
	return ibv_create_qp(D.pd, &a);
}

/* Destroyed QPs with large rings are freed, and not by a library thread */
static void destroyed_qps_freed_by_the_application(enum ibv_qp_type t)
{
	struct ibv_cq *cq = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	int before = atomic_load(&big_frees), elsewhere = atomic_load(&big_frees_elsewhere);

	if (!CHECK(cq, "ibv_create_cq"))
		return;
	struct ibv_qp *qp = big_qp(cq, t);
	if (!CHECK(qp, "a %s QP with 512 WRs of 512 bytes inline\t(errno %d)", vt_qpt_str(t), errno))
		goto out;
	CHECK_RC(ibv_destroy_qp(qp), 0, "destroyed");
	/* the progress thread passes by (woken by the destroy); each further
	 * destroy frees what it has let go of since */
	for (int i = 0; i < 500 && atomic_load(&big_frees) == before; i++) {
		usleep(10000);
		struct ibv_qp_init_attr a = {
			.send_cq = cq,
			.recv_cq = cq,
			.qp_type = t,
			.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 }
		};
		struct ibv_qp *small = ibv_create_qp(D.pd, &a);
		if (small)
			ibv_destroy_qp(small);
	}
#ifdef VT_SANITIZER
	NOTE("sanitizer build: frees not counted");
	(void)elsewhere;
#else
	CHECK(atomic_load(&big_frees) > before, "the %s QP's send ring was freed", vt_qpt_str(t));
	CHECK_INT(atomic_load(&big_frees_elsewhere) - elsewhere, 0,
		  "frees of mmapped chunks by threads other than the application's");
#endif
out:
	CHECK_RC(ibv_destroy_cq(cq), 0, "ibv_destroy_cq");
}

/* What is destroyed just before the device is closed is freed by the close */
static void destroyed_then_closed(void)
{
	struct vt_dev d;
	int elsewhere = atomic_load(&big_frees_elsewhere);

	if (!vt_open(&d))
		return;
	struct ibv_cq *cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr a = { .send_cq = cq,
				      .recv_cq = cq,
				      .qp_type = IBV_QPT_UD,
				      .cap = { .max_send_wr = 512,
					       .max_recv_wr = 1,
					       .max_send_sge = 1,
					       .max_recv_sge = 1,
					       .max_inline_data = 512 } };
	struct ibv_qp *qp = cq ? ibv_create_qp(d.pd, &a) : NULL;
	if (CHECK(qp, "a UD QP with a large send ring"))
		CHECK_RC(ibv_destroy_qp(qp), 0, "destroyed");
	usleep(50000); /* the progress thread passes by */
	if (cq)
		CHECK_RC(ibv_destroy_cq(cq), 0, "ibv_destroy_cq");
	vt_close(&d);
#ifdef VT_SANITIZER
	(void)elsewhere; /* frees are not counted there */
#else
	CHECK_INT(atomic_load(&big_frees_elsewhere) - elsewhere, 0,
		  "frees of mmapped chunks by threads other than the application's");
#endif
}

int main(int argc, char **argv)
{
	vt_begin_args("test_thread_frees", 120, argc, argv);
	mallopt(M_MMAP_THRESHOLD, MMAP_MIN);
	main_tid = (pid_t)syscall(SYS_gettid);
	if (!vt_open(&D))
		return vt_end();
	VT_RUN(destroyed_qps_freed_by_the_application(IBV_QPT_RC));
	VT_RUN(destroyed_qps_freed_by_the_application(IBV_QPT_UD));
	VT_RUN(destroyed_then_closed());
	vt_close(&D);
	return vt_end();
}
