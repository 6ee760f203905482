/* robust_dead_owner: the robust-mutex recovery path, stopped half way.
 *
 * 1. first_owner locks robust_lock and exits. The kernel walks the dead
 *    thread's robust list and sets FUTEX_OWNER_DIED in the lock word.
 * 2. inheritor_thread locks it and gets EOWNERDEAD: it now owns the lock
 *    (lock word = its TID) but glibc marks the mutex inconsistent
 *    (__owner = PTHREAD_MUTEX_INCONSISTENT). It does NOT call
 *    pthread_mutex_consistent() and sleeps forever holding it. Had it
 *    unlocked, the mutex would become permanently unusable
 *    (ENOTRECOVERABLE).
 * 3. blocked_thread calls pthread_mutex_lock and waits for inheritor_thread.
 * main sleeps in pause(). */
#include "common.h"
#include <errno.h>

pthread_mutex_t robust_lock;

void *first_owner(void *arg)
{
    (void)arg;
    check(pthread_mutex_lock(&robust_lock), "first lock");
    return NULL; /* dies holding it */
}

void *inheritor_thread(void *arg)
{
    (void)arg;
    int rc = pthread_mutex_lock(&robust_lock);
    if (rc != EOWNERDEAD) {
        fprintf(stderr, "inheritor: expected EOWNERDEAD, got %d\n", rc);
        exit(2);
    }
    arrive();
    sleep_forever();
    return NULL;
}

void *blocked_thread(void *arg)
{
    (void)arg;
    arrive();
    pthread_mutex_lock(&robust_lock);
    return NULL;
}

int main(void)
{
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    check(pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST), "setrobust");
    check(pthread_mutex_init(&robust_lock, &attr), "mutex_init");
    check(pthread_join(spawn(first_owner, NULL), NULL), "join first_owner");
    spawn(inheritor_thread, NULL);
    await_arrivals(1);
    spawn(blocked_thread, NULL);
    await_arrivals(2);
    announce_ready();
    sleep_forever();
}
