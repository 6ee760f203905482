/* rwlock_writer: two rwlocks, one reader-held and one writer-held.
 *
 * table_lock: 3 reader_threads hold it shared and then sleep (pause) - they
 * are not waiting on the rwlock; writer_thread blocks in
 * pthread_rwlock_wrlock behind them.
 *
 * config_lock: config_owner_thread holds it exclusively and sleeps;
 * 2 config_waiter_threads block in pthread_rwlock_rdlock.
 * main waits in pthread_join(writer). */
#include "common.h"

#define READERS 3
#define CONFIG_WAITERS 2

pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;
pthread_rwlock_t config_lock = PTHREAD_RWLOCK_INITIALIZER;

void *reader_thread(void *arg)
{
    (void)arg;
    pthread_rwlock_rdlock(&table_lock);
    arrive();
    sleep_forever();
    return NULL;
}

void *writer_thread(void *arg)
{
    (void)arg;
    arrive();
    pthread_rwlock_wrlock(&table_lock);
    return NULL;
}

void *config_owner_thread(void *arg)
{
    (void)arg;
    pthread_rwlock_wrlock(&config_lock);
    arrive();
    sleep_forever();
    return NULL;
}

void *config_waiter_thread(void *arg)
{
    (void)arg;
    arrive();
    pthread_rwlock_rdlock(&config_lock);
    return NULL;
}

int main(void)
{
    for (int i = 0; i < READERS; i++)
        spawn(reader_thread, NULL);
    spawn(config_owner_thread, NULL);
    await_arrivals(READERS + 1); /* both locks are held before anyone waits */
    pthread_t writer = spawn(writer_thread, NULL);
    for (int i = 0; i < CONFIG_WAITERS; i++)
        spawn(config_waiter_thread, NULL);
    await_arrivals(READERS + 1 + 1 + CONFIG_WAITERS);
    announce_ready();
    pthread_join(writer, NULL);
    return 0;
}
