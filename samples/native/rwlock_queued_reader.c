/* rwlock_queued_reader: a reader blocked behind a queued writer is not a reader (issue 30, item 4).
 *
 * catalog->lock (a pthread_rwlock_t of kind PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP, the
 * first field of a struct on the heap: no symbol names it) is read-held by 2 holder_threads, which keep a pointer to it
 * on their stacks and sleep. writer_thread blocks in pthread_rwlock_wrlock behind them (on the
 * lock's __wrphase_futex, 8 bytes in); late_reader_thread arrives after the writer and, the lock
 * preferring writers, blocks in pthread_rwlock_rdlock (on __readers, the lock's first word).
 * main waits in pthread_join(writer). */
#define _GNU_SOURCE
#include "common.h"

#define HOLDERS 2

struct catalog {
    pthread_rwlock_t lock;
    int entries;
};


void *holder_thread(void *arg)
{
    struct catalog *volatile c = arg;
    pthread_rwlock_rdlock(&c->lock);
    arrive();
    sleep_forever(); /* reads on forever */
    c->entries++;
    return NULL;
}

void *writer_thread(void *arg)
{
    struct catalog *c = arg;
    arrive();
    pthread_rwlock_wrlock(&c->lock);
    return NULL;
}

void *late_reader_thread(void *arg)
{
    struct catalog *c = arg;
    arrive();
    pthread_rwlock_rdlock(&c->lock);
    return NULL;
}

/* The catalog, reached through this global: main keeps no pointer to it on its own stack (a
 * thread that does is offered as a possible reader). */
static struct catalog *shared;

static void make_catalog(void)
{
    pthread_rwlockattr_t attr;
    shared = calloc(1, sizeof *shared);
    if (!shared)
        exit(2);
    check(pthread_rwlockattr_init(&attr), "pthread_rwlockattr_init");
    check(pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP), "setkind");
    check(pthread_rwlock_init(&shared->lock, &attr), "pthread_rwlock_init");
}

/* Whether a writer is queued on `l`: glibc 2.36's __readers has PTHREAD_RWLOCK_WRLOCKED (bit 1)
 * set in the read phase once a writer waits for the readers to leave. */
static int writer_queued(pthread_rwlock_t *l)
{
    return (atomic_load((_Atomic unsigned int *)l) & 2) != 0;
}

int main(void)
{
    make_catalog();
    for (int i = 0; i < HOLDERS; i++)
        spawn(holder_thread, shared);
    await_arrivals(HOLDERS);
    pthread_t writer = spawn(writer_thread, shared);
    await_arrivals(HOLDERS + 1);
    while (!writer_queued(&shared->lock))
        usleep(1000);
    usleep(50000); /* the writer is in its futex wait */
    spawn(late_reader_thread, shared);
    await_arrivals(HOLDERS + 2);
    announce_ready();
    pthread_join(writer, NULL);
    return 0;
}
