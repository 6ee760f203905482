/* join_cycle: joiner_a calls pthread_join(joiner_b) while joiner_b calls
 * pthread_join(joiner_a). The pthread_t values are published through
 * globals after both threads exist. glibc 2.36 does not report EDEADLK for
 * this pair; if a glibc does, the sample exits with status 3 rather than
 * pretending to block. main sleeps in pause(). */
#include "common.h"

pthread_t joiner_a_tid;
pthread_t joiner_b_tid;
static pthread_barrier_t published;

static void join_or_die(pthread_t other, const char *who)
{
    arrive();
    int rc = pthread_join(other, NULL);
    fprintf(stderr, "%s: pthread_join returned %d (%s)\n", who, rc, strerror(rc));
    exit(3);
}

void *joiner_a(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&published);
    join_or_die(joiner_b_tid, "joiner_a");
    return NULL;
}

void *joiner_b(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&published);
    join_or_die(joiner_a_tid, "joiner_b");
    return NULL;
}

int main(void)
{
    check(pthread_barrier_init(&published, NULL, 3), "barrier");
    joiner_a_tid = spawn(joiner_a, NULL);
    joiner_b_tid = spawn(joiner_b, NULL);
    pthread_barrier_wait(&published);
    await_arrivals(2);
    announce_ready();
    sleep_forever();
}
