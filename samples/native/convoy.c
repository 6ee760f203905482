/* convoy: holder_thread takes convoy_lock and sleeps forever; 20
 * waiter_threads queue on it. Everyone is stuck, but there is no cycle:
 * the holder is not waiting for any lock. main waits in pthread_join. */
#include "common.h"

#define WAITERS 20

pthread_mutex_t convoy_lock = PTHREAD_MUTEX_INITIALIZER;

void *holder_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&convoy_lock);
    arrive();
    sleep_forever();
    return NULL;
}

void *waiter_thread(void *arg)
{
    (void)arg;
    arrive();
    pthread_mutex_lock(&convoy_lock);
    return NULL;
}

int main(void)
{
    pthread_t holder = spawn(holder_thread, NULL);
    await_arrivals(1); /* holder owns the lock before any waiter exists */
    for (int i = 0; i < WAITERS; i++)
        spawn(waiter_thread, NULL);
    await_arrivals(1 + WAITERS);
    announce_ready();
    pthread_join(holder, NULL);
    return 0;
}
