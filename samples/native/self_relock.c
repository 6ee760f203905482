/* self_relock: relock_thread locks a default (PTHREAD_MUTEX_NORMAL) mutex it
 * already holds. Normal mutexes do no owner check, so the second lock waits
 * forever on the thread itself. main waits in pthread_join. */
#include "common.h"

pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;

void *relock_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&state_lock);
    arrive();
    pthread_mutex_lock(&state_lock);
    return NULL;
}

int main(void)
{
    pthread_t t = spawn(relock_thread, NULL);
    await_arrivals(1);
    announce_ready();
    pthread_join(t, NULL);
    return 0;
}
