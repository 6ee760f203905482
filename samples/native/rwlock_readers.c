/* rwlock_readers: a read-held rwlock whose readers are found by inference.
 *
 * table.lock (a pthread_rwlock_t, the first field of a global struct) is
 * read-held by 2 reader_threads, each of which keeps a pointer to the table on
 * its stack while it reads, then blocks on gate (held by gatekeeper_thread,
 * which sleeps). writer_thread blocks in pthread_rwlock_wrlock behind them.
 * main waits in pthread_join(writer). The rwlock records only how many read it. */
#include "common.h"

#define READERS 2

struct table {
    pthread_rwlock_t lock;
    int rows;
};

struct table inventory = { PTHREAD_RWLOCK_INITIALIZER, 0 };
pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;

void *gatekeeper_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&gate);
    arrive();
    sleep_forever();
    return NULL;
}

void *reader_thread(void *arg)
{
    struct table *volatile t = arg;
    pthread_rwlock_rdlock(&t->lock);
    arrive();
    pthread_mutex_lock(&gate); /* reads on, once the gate opens */
    t->rows++;
    pthread_mutex_unlock(&gate);
    pthread_rwlock_unlock(&t->lock);
    return NULL;
}

void *writer_thread(void *arg)
{
    struct table *t = arg;
    arrive();
    pthread_rwlock_wrlock(&t->lock);
    return NULL;
}

int main(void)
{
    spawn(gatekeeper_thread, NULL);
    await_arrivals(1);
    for (int i = 0; i < READERS; i++)
        spawn(reader_thread, &inventory);
    await_arrivals(1 + READERS);
    pthread_t writer = spawn(writer_thread, &inventory);
    await_arrivals(2 + READERS);
    announce_ready();
    pthread_join(writer, NULL);
    return 0;
}
