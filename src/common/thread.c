/* Library threads with every signal blocked: see thread.h. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "common/thread.h"

struct start {
	void *(*fn)(void *);
	void *arg;
	char name[16];
};

/* The thread names itself: a detached thread may be gone before
 * pthread_create's caller could name it. */
static void *trampoline(void *p)
{
	struct start s = *(struct start *)p;

	free(p);
	if (s.name[0])
		prctl(PR_SET_NAME, s.name, 0, 0, 0);
	return s.fn(s.arg);
}

int sr_thread_start(pthread_t *t, const char *name, bool detached, void *(*fn)(void *), void *arg)
{
	struct start *s = calloc(1, sizeof(*s));
	pthread_attr_t a;
	sigset_t all;
	pthread_t tid;
	int err;

	if (!s)
		return ENOMEM;
	s->fn = fn;
	s->arg = arg;
	if (name)
		strncpy(s->name, name, sizeof(s->name) - 1);
	err = pthread_attr_init(&a);
	if (err) {
		free(s);
		return err;
	}
	sigfillset(&all);
	/* but the faults: one with its signal blocked kills the process
	 * outright, where core/guard.c's handler would have ended a copy into
	 * memory the application unmapped */
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	err = pthread_attr_setsigmask_np(&a, &all);
	if (!err && detached)
		err = pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (!err)
		err = pthread_create(&tid, &a, trampoline, s);
	pthread_attr_destroy(&a);
	if (err) {
		free(s);
		return err;
	}
	if (t)
		*t = tid;
	return 0;
}
