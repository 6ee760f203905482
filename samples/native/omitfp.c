/* omitfp: abba again, built -O2 -fomit-frame-pointer. The static helpers
 * take() and acquire_pair() get inlined into the workers (gdb shows them as
 * inlined frames); contend() stays a real call with its own stack frame and
 * no frame pointer, so only CFI can unwind through it.
 * worker_ab holds lock_a, waits lock_b; worker_ba holds lock_b, waits lock_a.
 * main waits in pthread_join(worker_ab). */
#include "common.h"

pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t lock_b = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both_hold;
volatile int progress;

static void take(pthread_mutex_t *m, int step)
{
    pthread_mutex_lock(m);
    progress = step; /* keeps the lock call from being a tail call */
}

static __attribute__((noinline, noclone)) void contend(pthread_mutex_t *second)
{
    volatile char scratch[64];
    scratch[0] = 1;
    arrive();
    take(second, 3);
    scratch[1] = scratch[0];
}

static void acquire_pair(pthread_mutex_t *first, pthread_mutex_t *second)
{
    take(first, 1);
    pthread_barrier_wait(&both_hold);
    contend(second);
    progress = 4;
}

void *worker_ab(void *arg)
{
    acquire_pair(&lock_a, &lock_b);
    return arg;
}

void *worker_ba(void *arg)
{
    acquire_pair(&lock_b, &lock_a);
    return arg;
}

int main(void)
{
    check(pthread_barrier_init(&both_hold, NULL, 2), "barrier");
    pthread_t ab = spawn(worker_ab, NULL);
    spawn(worker_ba, NULL);
    await_arrivals(2);
    announce_ready();
    pthread_join(ab, NULL);
    return 0;
}
