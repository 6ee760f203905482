/* condvar_sem: waits with no owner to blame.
 * 3 cond_waiters wait on ready_cond (with ready_mutex, released while
 * waiting) for a flag nobody sets; 2 sem_waiters wait on the semaphore
 * slots, initialised to 0 and never posted. main sleeps in pause(). */
#include "common.h"
#include <semaphore.h>

#define COND_WAITERS 3
#define SEM_WAITERS 2

pthread_mutex_t ready_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t ready_cond = PTHREAD_COND_INITIALIZER;
sem_t slots;
static int go; /* never set */

void *cond_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&ready_mutex);
    arrive();
    while (!go)
        pthread_cond_wait(&ready_cond, &ready_mutex);
    pthread_mutex_unlock(&ready_mutex);
    return NULL;
}

void *sem_waiter(void *arg)
{
    (void)arg;
    arrive();
    while (sem_wait(&slots) != 0)
        ;
    return NULL;
}

int main(void)
{
    if (sem_init(&slots, 0, 0) != 0) {
        perror("sem_init");
        return 2;
    }
    for (int i = 0; i < COND_WAITERS; i++)
        spawn(cond_waiter, NULL);
    for (int i = 0; i < SEM_WAITERS; i++)
        spawn(sem_waiter, NULL);
    await_arrivals(COND_WAITERS + SEM_WAITERS);
    announce_ready();
    sleep_forever();
}
