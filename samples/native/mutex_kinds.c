/* mutex_kinds: one holder + one waiter for each non-default mutex kind.
 * errcheck_lock (PTHREAD_MUTEX_ERRORCHECK), adaptive_lock
 * (PTHREAD_MUTEX_ADAPTIVE_NP: spins briefly, then futex-waits) and pi_lock
 * (PTHREAD_PRIO_INHERIT: waiter sleeps in FUTEX_LOCK_PI, lock word = owner
 * TID). Each holder sleeps forever while holding. main sleeps in pause(). */
#define _GNU_SOURCE
#include "common.h"

pthread_mutex_t errcheck_lock;
pthread_mutex_t adaptive_lock;
pthread_mutex_t pi_lock;

static void hold(pthread_mutex_t *m)
{
    check(pthread_mutex_lock(m), "holder lock");
    arrive();
    sleep_forever();
}

static void wait_for(pthread_mutex_t *m)
{
    arrive();
    pthread_mutex_lock(m);
}

void *errcheck_holder(void *arg) { (void)arg; hold(&errcheck_lock); return NULL; }
void *errcheck_waiter(void *arg) { (void)arg; wait_for(&errcheck_lock); return NULL; }
void *adaptive_holder(void *arg) { (void)arg; hold(&adaptive_lock); return NULL; }
void *adaptive_waiter(void *arg) { (void)arg; wait_for(&adaptive_lock); return NULL; }
void *pi_holder(void *arg) { (void)arg; hold(&pi_lock); return NULL; }
void *pi_waiter(void *arg) { (void)arg; wait_for(&pi_lock); return NULL; }

static void init_kind(pthread_mutex_t *m, int type, int protocol)
{
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    check(pthread_mutexattr_settype(&attr, type), "settype");
    check(pthread_mutexattr_setprotocol(&attr, protocol), "setprotocol");
    check(pthread_mutex_init(m, &attr), "mutex_init");
    pthread_mutexattr_destroy(&attr);
}

int main(void)
{
    init_kind(&errcheck_lock, PTHREAD_MUTEX_ERRORCHECK, PTHREAD_PRIO_NONE);
    init_kind(&adaptive_lock, PTHREAD_MUTEX_ADAPTIVE_NP, PTHREAD_PRIO_NONE);
    init_kind(&pi_lock, PTHREAD_MUTEX_NORMAL, PTHREAD_PRIO_INHERIT);
    spawn(errcheck_holder, NULL);
    spawn(adaptive_holder, NULL);
    spawn(pi_holder, NULL);
    await_arrivals(3); /* all held before any waiter starts */
    spawn(errcheck_waiter, NULL);
    spawn(adaptive_waiter, NULL);
    spawn(pi_waiter, NULL);
    await_arrivals(6);
    announce_ready();
    sleep_forever();
}
