/* crash_overflow: unbounded recursion on a worker with a 256 KiB stack:
 * SIGSEGV in the guard page below the thread's stack. */
#include "crash_common.h"

volatile int descend_sink;

/* Not a tail call: the volatile local and the work after the call keep a
 * real frame per level. */
int descend(int depth)
{
    volatile char pad[32];
    pad[0] = (char)depth;
    if (descend_sink == -1) /* never: the sink is never -1 */
        return 0;
    int below = descend(depth + 1);
    descend_sink = below;
    return below + pad[0];
}

void *recursing_worker(void *arg)
{
    (void)arg;
    arrive();
    wait_for_go();
    return (void *)(long)descend(0);
}

int main(void)
{
    spawn(idle_waiter, NULL);
    pthread_attr_t attr;
    check(pthread_attr_init(&attr), "pthread_attr_init");
    check(pthread_attr_setstacksize(&attr, 256 * 1024), "pthread_attr_setstacksize");
    pthread_t worker;
    check(pthread_create(&worker, &attr, recursing_worker, NULL), "pthread_create");
    await_arrivals(2);
    announce_ready();
    pthread_join(worker, NULL);
    return 0;
}
