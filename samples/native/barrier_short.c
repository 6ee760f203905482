/* barrier_short: a pthread_barrier_t for 4 of which only 3 arrive.
 *
 * 3 stage_threads wait in pthread_barrier_wait on stage_barrier (count 4);
 * the fourth party, late_thread, waits on late_cond for a signal nobody sends,
 * so it never arrives. gdb prints the barrier as {in = 3, count = 4, ...}.
 * main waits in pthread_join(late_thread). */
#include "common.h"

#define PARTIES 4

pthread_barrier_t stage_barrier;
pthread_mutex_t late_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t late_cond = PTHREAD_COND_INITIALIZER;
static int go_ahead;

void *stage_thread(void *arg)
{
    (void)arg;
    arrive();
    pthread_barrier_wait(&stage_barrier);
    return NULL;
}

void *late_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&late_lock);
    arrive();
    while (!go_ahead)
        pthread_cond_wait(&late_cond, &late_lock);
    pthread_mutex_unlock(&late_lock);
    pthread_barrier_wait(&stage_barrier);
    return NULL;
}

int main(void)
{
    pthread_barrier_init(&stage_barrier, NULL, PARTIES);
    pthread_t late = spawn(late_thread, NULL);
    for (int i = 0; i < PARTIES - 1; i++)
        spawn(stage_thread, NULL);
    await_arrivals(PARTIES);
    announce_ready();
    pthread_join(late, NULL);
    return 0;
}
