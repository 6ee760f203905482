/* abba: classic two-lock deadlock.
 * worker_ab holds lock_a and waits for lock_b; worker_ba holds lock_b and
 * waits for lock_a. main waits in pthread_join(worker_ab). */
#include "common.h"

pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t lock_b = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both_hold;

void *worker_ab(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock_a);
    pthread_barrier_wait(&both_hold); /* the other thread now holds lock_b */
    arrive();
    pthread_mutex_lock(&lock_b);
    return NULL;
}

void *worker_ba(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock_b);
    pthread_barrier_wait(&both_hold);
    arrive();
    pthread_mutex_lock(&lock_a);
    return NULL;
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
