/* idle_join: nothing contends. Two threads wait on a condition variable
 * nobody signals, one sleeps in pause(), and main joins the sleeper. The
 * maker dumps it with gcore (no crash) or by sending SIGQUIT from outside
 * (crash kind "killed"). */
#include "crash_common.h"

void *sleeper(void *arg)
{
    (void)arg;
    arrive();
    sleep_forever();
    return NULL;
}

int main(void)
{
    spawn(idle_waiter, NULL);
    spawn(idle_waiter, NULL);
    pthread_t s = spawn(sleeper, NULL);
    await_arrivals(3);
    announce_ready();
    pthread_join(s, NULL);
    return 0;
}
