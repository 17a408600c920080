/* test_lib_threads - the threads softrdma's libraries start in an
 * application (the verbs progress thread, the rdma_cm thread, rsockets'
 * keepalive thread) block every signal, as rdma-core's do (issue 14,
 * item 1).  tgtd blocks SIGUSR2 in its main thread only after the iSER
 * driver has opened rdma_cm, then sends itself SIGUSR2 to wake its
 * signalfd: a library thread with SIGUSR2 unblocked takes the signal and
 * its default action kills tgtd.  This test does what tgtd does, in a
 * child process, and checks every thread's mask in /proc. */
#include <dirent.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <rdma/rsocket.h>

#include "cmt.h"
#include "common/tsan.h"

/* Opens what starts each library thread; false on failure (reported). */
static bool start_library_threads(void)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);

	if (!CHECK(l && n > 0, "a device\t(%s)", strerror(errno)))
		return false;
	struct ibv_context *ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	if (!CHECK(ctx != NULL, "ibv_open_device (starts the progress thread)"))
		return false;
	ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	if (!CHECK(ch && !rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), "rdma_cm id (starts the CM thread)"))
		return false;
	int rs = rsocket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (!CHECK(rs >= 0, "rsocket\t(%s)", strerror(errno)))
		return false;
	CHECK_RC(rsetsockopt(rs, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)), 0,
		 "rsetsockopt SO_KEEPALIVE (starts the keepalive thread)");
	return true;
}

/* Every thread but the caller has all signals blocked (those the kernel
 * lets a thread block: not SIGKILL and SIGSTOP; glibc keeps its two
 * internal ones, 32 and 33, for itself) but SIGSEGV and SIGBUS, which
 * the thread's own faults raise (src/core/guard.h). */
static void check_masks(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int others = 0, sanitizer = 0;
	char self[64] = "";
	FILE *sf = fopen("/proc/self/comm", "r");

	if (sf) {
		if (fgets(self, sizeof(self), sf))
			self[strcspn(self, "\n")] = 0;
		fclose(sf);
	}

	if (!CHECK(d != NULL, "open /proc/self/task"))
		return;
	while ((e = readdir(d))) {
		int tid = atoi(e->d_name);
		char path[128], comm[64] = "?", line[256];
		unsigned long long blk = 0;
		FILE *f;

		if (tid <= 0 || tid == getpid())
			continue;
		others++;
		snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
		if ((f = fopen(path, "r"))) {
			if (fgets(comm, sizeof(comm), f))
				comm[strcspn(comm, "\n")] = 0;
			fclose(f);
		}
		snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
		if ((f = fopen(path, "r"))) {
			while (fgets(line, sizeof(line), f))
				if (!strncmp(line, "SigBlk:", 7))
					blk = strtoull(line + 7, NULL, 16);
			fclose(f);
		}
		unsigned long long want = 0;
		for (int s = 1; s <= 64; s++)
			if (s != SIGKILL && s != SIGSTOP && s != SIGSEGV && s != SIGBUS && (s < 32 || s >= SIGRTMIN))
				want |= 1ull << (s - 1);
#ifdef SR_TSAN
		/* ThreadSanitizer's runtime has threads of its own (unnamed, so
		 * with the process's name), blocking every signal but SIGSYS,
		 * which the sanitizers leave for seccomp; the library's threads
		 * all have names of their own */
		if (!strcmp(comm, self) && (want & ~blk) == 1ull << (SIGSYS - 1)) {
			sanitizer++;
			others--;
			continue;
		}
#endif
		CHECK((blk & want) == want, "thread %d (%s) blocks every signal\t(SigBlk %016llx, unblocked %016llx)",
		      tid, comm, blk, want & ~blk);
		/* a thread only just created has everything blocked until glibc
		 * sets the mask it was created with, and names itself after
		 * that: the faults are checked on the named ones */
		unsigned long long faults = 1ull << (SIGSEGV - 1) | 1ull << (SIGBUS - 1);
		if (!strncmp(comm, "sr-", 3))
			CHECK(!(blk & faults),
			      "thread %d (%s) leaves SIGSEGV and SIGBUS (its own faults) unblocked\t(SigBlk %016llx)",
			      tid, comm, blk);
	}
	closedir(d);
	if (sanitizer)
		NOTE("%d thread(s) of ThreadSanitizer's runtime not counted", sanitizer);
	CHECK(others >= 3, "the library started its threads\t(%d besides main)", others);
}

int main(void)
{
	int counts[2];
	vt_begin("test_lib_threads", 60);
	if (!CHECK(pipe(counts) == 0, "pipe"))
		return vt_end();
	pid_t pid = fork();
	if (pid == 0) {
		close(counts[0]);
		if (!start_library_threads())
			_exit(2);
		check_masks();
		/* tgtd's pattern: block SIGUSR2 in the main thread only, now */
		sigset_t usr2;
		sigemptyset(&usr2);
		sigaddset(&usr2, SIGUSR2);
		pthread_sigmask(SIG_BLOCK, &usr2, NULL);
		kill(getpid(), SIGUSR2);
		struct timespec ts = { 2, 0 };
		int got = sigtimedwait(&usr2, NULL, &ts);
		CHECK(got == SIGUSR2, "SIGUSR2 stays pending for the main thread\t(sigtimedwait %d: %s)", got,
		      strerror(errno));
		int n[2] = { vt_npass, vt_nfail };
		ssize_t w = write(counts[1], n, sizeof(n));
		_exit(w == sizeof(n) && !vt_nfail ? 0 : 1);
	}
	close(counts[1]);
	if (!CHECK(pid > 0, "fork"))
		return vt_end();
	int st = 0;
	waitpid(pid, &st, 0);
	CHECK(!WIFSIGNALED(st), "the process survives a SIGUSR2 sent to itself\t(killed by signal %d: %s)",
	      WIFSIGNALED(st) ? WTERMSIG(st) : 0, WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "");
	/* the child's checks count in the summary */
	int n[2];
	if (read(counts[0], n, sizeof(n)) == sizeof(n)) {
		vt_npass += n[0];
		vt_nfail += n[1];
	}
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child finished its checks\t(status %#x)", st);
	return vt_end();
}
