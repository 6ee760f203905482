/* Shared "ready" protocol for knot's native samples.
 *
 * Every thread calls arrive() immediately before its final blocking call;
 * main calls await_arrivals(n) and then announce_ready(). The maker reads
 * "ready" from stdout and then polls /proc until every task sleeps in a
 * syscall, so the tiny window between arrive() and the block is covered. */
#ifndef KNOT_SAMPLE_COMMON_H
#define KNOT_SAMPLE_COMMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_int arrivals;

static inline void arrive(void) { atomic_fetch_add(&arrivals, 1); }

static inline void await_arrivals(int n)
{
    while (atomic_load(&arrivals) < n)
        usleep(1000);
}

static inline void announce_ready(void)
{
    fputs("ready\n", stdout);
    fflush(stdout);
}

/* Blocks the caller forever in a syscall (pause), never returning. */
static inline void sleep_forever(void)
{
    for (;;)
        pause();
}

static inline void check(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", what, strerror(rc));
        exit(2);
    }
}

static inline pthread_t spawn(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    check(pthread_create(&t, NULL, fn, arg), "pthread_create");
    return t;
}

#endif
