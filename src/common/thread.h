/* Threads that softrdma's libraries start inside an application.
 *
 * They run with every signal blocked, as rdma-core's do: a process-directed
 * signal (tgtd sends itself SIGUSR2 and reads it through a signalfd that
 * only its main thread blocks for) must go to a thread of the application,
 * never to one of ours, where its default action would kill the process or
 * its handler would run on a stack the application never expected.  The
 * mask is set before the thread exists (pthread_attr_setsigmask_np), so
 * there is no window in which a signal could reach it.  SIGSEGV and SIGBUS
 * stay unblocked: they come from the thread's own faults (core/guard.h). */
#ifndef SR_COMMON_THREAD_H
#define SR_COMMON_THREAD_H

#include <pthread.h>
#include <stdbool.h>

/* Starts fn(arg) in a new thread with all signals blocked, named name (at
 * most 15 characters; shown by ps, top and gdb), detached if asked.
 * Returns 0 or an errno value, as pthread_create. */
int sr_thread_start(pthread_t *t, const char *name, bool detached, void *(*fn)(void *), void *arg);

#endif
