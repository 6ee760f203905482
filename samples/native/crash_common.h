/* Shared by the crash samples: every thread blocks, main prints "ready",
 * and the crashing thread waits in read(0) for the maker's "go" line, so the
 * dump shows the other threads at rest and the crash as the only event. */
#ifndef KNOT_CRASH_COMMON_H
#define KNOT_CRASH_COMMON_H

#include "common.h"
#include <errno.h>

/* Blocks until the maker writes a line to stdin (or stdin closes). */
static inline void wait_for_go(void)
{
    char c;
    while (read(0, &c, 1) < 0 && errno == EINTR)
        ;
}

/* A bystander: sleeps on a condition variable nobody signals. */
static pthread_mutex_t idle_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;

static inline void *idle_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&idle_mutex);
    arrive();
    for (;;)
        pthread_cond_wait(&idle_cond, &idle_mutex);
    return NULL;
}

/* Starts `fn` (the crashing worker, which calls arrive() then
 * wait_for_go()) and one idle bystander, announces ready, and joins the
 * worker: main waits for the thread that will crash. */
static inline int run_crash(void *(*fn)(void *))
{
    spawn(idle_waiter, NULL);
    pthread_t worker = spawn(fn, NULL);
    await_arrivals(2);
    announce_ready();
    pthread_join(worker, NULL);
    return 0;
}

#endif
