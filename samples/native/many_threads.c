/* many_threads: N gated_threads (argv[1], default 220) all block on
 * gate_lock, held by main, which sleeps in pause(). Small stacks keep the
 * dump small at N=600. */
#include "common.h"

pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;

void *gated_thread(void *arg)
{
    (void)arg;
    arrive();
    pthread_mutex_lock(&gate_lock);
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 220;
    if (n <= 0) {
        fprintf(stderr, "bad thread count\n");
        return 2;
    }
    pthread_mutex_lock(&gate_lock);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    check(pthread_attr_setstacksize(&attr, 256 * 1024), "stacksize");
    for (int i = 0; i < n; i++) {
        pthread_t t;
        check(pthread_create(&t, &attr, gated_thread, NULL), "pthread_create");
    }
    await_arrivals(n);
    announce_ready();
    sleep_forever();
}
