/* test_unload - a program that dlopens librdmacm.so.1 (and so
 * libibverbs.so.1), uses it and dlcloses it must go on running, and may
 * dlopen it again (issue 34, item 6).  DAPL's libdat2 does exactly this
 * with its provider; rdma-core's libraries start no threads, so programs
 * expect it to be safe.  softrdma's libraries run threads (sr-cm,
 * sr-progress) that must never execute code of an unmapped library.
 *
 * The program is not linked with either library: each round runs in a
 * child (a crash kills only it) that finds them through LD_LIBRARY_PATH
 * (SR_BUILD_DIR/lib/softrdma), on the device SOFTRDMA_CONF names (Soft-RoCE
 * or Soft-iWARP on lo):
 *   quiet: an id bound to 127.0.0.1 and destroyed, dlclose, a pause in
 *          which the library's threads would run, then dlopen again and
 *          the same once more;
 *   live:  an id bound and a context, PD, CQ and QP left open at dlclose. */
#include <dlfcn.h>
#include <rdma/rdma_cma.h>

#include "../verbs/vt.h"

#define ROUNDS 8
#define PAUSE_MS 300 /* after dlclose: the threads' timers and wake-ups fall in it */

struct cm_api {
	void *h;
	struct rdma_event_channel *(*create_channel)(void);
	void (*destroy_channel)(struct rdma_event_channel *);
	int (*create_id)(struct rdma_event_channel *, struct rdma_cm_id **, void *, enum rdma_port_space);
	int (*bind_addr)(struct rdma_cm_id *, struct sockaddr *);
	int (*destroy_id)(struct rdma_cm_id *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
	struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
};

/* dlsym through the handle reaches librdmacm's dependencies too */
static bool api_open(struct cm_api *a)
{
	memset(a, 0, sizeof(*a));
	a->h = dlopen("librdmacm.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!a->h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return false;
	}
	*(void **)&a->create_channel = dlsym(a->h, "rdma_create_event_channel");
	*(void **)&a->destroy_channel = dlsym(a->h, "rdma_destroy_event_channel");
	*(void **)&a->create_id = dlsym(a->h, "rdma_create_id");
	*(void **)&a->bind_addr = dlsym(a->h, "rdma_bind_addr");
	*(void **)&a->destroy_id = dlsym(a->h, "rdma_destroy_id");
	*(void **)&a->alloc_pd = dlsym(a->h, "ibv_alloc_pd");
	*(void **)&a->create_cq = dlsym(a->h, "ibv_create_cq");
	*(void **)&a->create_qp = dlsym(a->h, "ibv_create_qp");
	if (!a->create_channel || !a->destroy_channel || !a->create_id || !a->bind_addr || !a->destroy_id ||
	    !a->alloc_pd || !a->create_cq || !a->create_qp) {
		fprintf(stderr, "dlsym: a symbol is missing\n");
		return false;
	}
	return true;
}

/* An id bound to 127.0.0.1 (any port), or NULL. */
static struct rdma_cm_id *bound_id(struct cm_api *a, struct rdma_event_channel *ch)
{
	struct rdma_cm_id *id = NULL;
	struct sockaddr_in sin = vt_lo_addr(0);

	if (a->create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		perror("rdma_create_id");
		return NULL;
	}
	if (a->bind_addr(id, (struct sockaddr *)&sin)) {
		perror("rdma_bind_addr");
		a->destroy_id(id);
		return NULL;
	}
	return id;
}

/* Child, quiet: 0 when both rounds worked. */
static int child_quiet(void)
{
	for (int round = 0; round < 2; round++) {
		struct cm_api a;

		if (!api_open(&a))
			return 2;
		struct rdma_event_channel *ch = a.create_channel();
		struct rdma_cm_id *id = ch ? bound_id(&a, ch) : NULL;
		if (!id)
			return 3;
		a.destroy_id(id);
		a.destroy_channel(ch);
		if (dlclose(a.h)) {
			fprintf(stderr, "dlclose: %s\n", dlerror());
			return 4;
		}
		vt_sleep_ms(PAUSE_MS);
	}
	return 0;
}

/* Child, live: everything left open at dlclose. */
static int child_live(void)
{
	struct cm_api a;

	if (!api_open(&a))
		return 2;
	struct rdma_event_channel *ch = a.create_channel();
	struct rdma_cm_id *id = ch ? bound_id(&a, ch) : NULL;
	if (!id || !id->verbs)
		return 3;
	struct ibv_pd *pd = a.alloc_pd(id->verbs);
	struct ibv_cq *cq = a.create_cq(id->verbs, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 }
	};
	if (!pd || !cq || !a.create_qp(pd, &qa))
		return 5;
	if (dlclose(a.h)) {
		fprintf(stderr, "dlclose: %s\n", dlerror());
		return 4;
	}
	vt_sleep_ms(PAUSE_MS);
	return 0;
}

/* Runs one child of mode; true when it exited 0. */
static bool run_child(const char *self, const char *mode, int round)
{
	pid_t pid = fork();

	if (pid == 0) {
		execl(self, self, mode, (char *)NULL);
		_exit(127);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return CHECK(0, "%s round %d: a child\t(%s)", mode, round, strerror(errno));
	if (WIFSIGNALED(st))
		return CHECK(0, "%s round %d: the child lives on after dlclose\t(killed by signal %d: %s)", mode, round,
			     WTERMSIG(st), strsignal(WTERMSIG(st)));
	return CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s round %d: the child lives on after dlclose\t(exit %d)",
		     mode, round, WEXITSTATUS(st));
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "quiet"))
		return child_quiet();
	if (argc == 2 && !strcmp(argv[1], "live"))
		return child_live();

	vt_begin("test_unload", 240);
	const char *build = getenv("SR_BUILD_DIR");
	if (!CHECK(build != NULL, "SR_BUILD_DIR names the build tree"))
		return vt_end();
	char libdir[4096];
	snprintf(libdir, sizeof(libdir), "%s/lib/softrdma", build);
	setenv("LD_LIBRARY_PATH", libdir, 1);
	NOTE("device configuration %s", getenv("SOFTRDMA_CONF") ? getenv("SOFTRDMA_CONF") : "(default)");

	SECTION("an id bound and destroyed, dlclose, dlopen again");
	for (int i = 0; i < ROUNDS; i++)
		run_child("/proc/self/exe", "quiet", i);
	SECTION("a context, PD, CQ and QP left open at dlclose");
	for (int i = 0; i < ROUNDS; i++)
		run_child("/proc/self/exe", "live", i);
	return vt_end();
}
