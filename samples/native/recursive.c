/* recursive: owner_thread locks the recursive mutex registry_lock twice
 * (count 2) and sleeps; waiter_thread blocks on it. main waits in
 * pthread_join(waiter). */
#include "common.h"

pthread_mutex_t registry_lock;

void *owner_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&registry_lock);
    pthread_mutex_lock(&registry_lock);
    arrive();
    sleep_forever();
    return NULL;
}

void *waiter_thread(void *arg)
{
    (void)arg;
    arrive();
    pthread_mutex_lock(&registry_lock);
    return NULL;
}

int main(void)
{
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    check(pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE), "settype");
    check(pthread_mutex_init(&registry_lock, &attr), "mutex_init");
    spawn(owner_thread, NULL);
    await_arrivals(1);
    pthread_t waiter = spawn(waiter_thread, NULL);
    await_arrivals(2);
    announce_ready();
    pthread_join(waiter, NULL);
    return 0;
}
