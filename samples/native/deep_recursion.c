/* deep_recursion: deep_thread recurses 450 levels through recurse(), then
 * blocks on depth_lock, which main holds. main waits in
 * pthread_join(deep_thread): a two-party cycle (main waits for deep_thread
 * to exit, deep_thread waits for main's lock). */
#include "common.h"

#define DEPTH 450

pthread_mutex_t depth_lock = PTHREAD_MUTEX_INITIALIZER;
volatile int depth_sink;

/* Not a tail call: work happens after the recursive call returns, and the
 * volatile local keeps a real frame per level. */
int recurse(int depth)
{
    volatile int here = depth;
    if (depth == 0) {
        arrive();
        pthread_mutex_lock(&depth_lock);
        return 0;
    }
    int below = recurse(depth - 1);
    depth_sink = below;
    return below + here;
}

void *deep_thread(void *arg)
{
    (void)arg;
    recurse(DEPTH);
    return NULL;
}

int main(void)
{
    pthread_mutex_lock(&depth_lock);
    pthread_t t = spawn(deep_thread, NULL);
    await_arrivals(1);
    announce_ready();
    pthread_join(t, NULL);
    return 0;
}
