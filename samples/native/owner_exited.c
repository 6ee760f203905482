/* owner_exited: doomed_owner locks the normal mutex orphan_lock and returns
 * without unlocking. Its TID stays in the mutex's __owner field, naming a
 * thread that no longer exists. Two orphan_waiters then block forever.
 * main sleeps in pause(). */
#include "common.h"

#define WAITERS 2

pthread_mutex_t orphan_lock = PTHREAD_MUTEX_INITIALIZER;

void *doomed_owner(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&orphan_lock);
    return NULL; /* exits holding the lock */
}

void *orphan_waiter(void *arg)
{
    (void)arg;
    arrive();
    pthread_mutex_lock(&orphan_lock);
    return NULL;
}

int main(void)
{
    pthread_t owner = spawn(doomed_owner, NULL);
    check(pthread_join(owner, NULL), "join owner");
    for (int i = 0; i < WAITERS; i++)
        spawn(orphan_waiter, NULL);
    await_arrivals(WAITERS);
    announce_ready();
    sleep_forever();
}
