/* cycle3: three threads, three locks, one cycle.
 * ledger_clerk holds ledger -> waits audit
 * audit_clerk  holds audit  -> waits index_lock
 * index_clerk  holds index_lock -> waits ledger
 * main waits in pthread_join(ledger_clerk). */
#include "common.h"

pthread_mutex_t ledger = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t audit = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t index_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t all_hold;

static void hold_then_want(pthread_mutex_t *held, pthread_mutex_t *wanted)
{
    pthread_mutex_lock(held);
    pthread_barrier_wait(&all_hold);
    arrive();
    pthread_mutex_lock(wanted);
}

void *ledger_clerk(void *arg) { (void)arg; hold_then_want(&ledger, &audit); return NULL; }
void *audit_clerk(void *arg) { (void)arg; hold_then_want(&audit, &index_lock); return NULL; }
void *index_clerk(void *arg) { (void)arg; hold_then_want(&index_lock, &ledger); return NULL; }

int main(void)
{
    check(pthread_barrier_init(&all_hold, NULL, 3), "barrier");
    pthread_t first = spawn(ledger_clerk, NULL);
    spawn(audit_clerk, NULL);
    spawn(index_clerk, NULL);
    await_arrivals(3);
    announce_ready();
    pthread_join(first, NULL);
    return 0;
}
