/* crash_divzero: integer division by zero on a worker: SIGFPE FPE_INTDIV. */
#include "crash_common.h"

static volatile int item_count; /* stays 0 */

int per_item(int total, int count)
{
    return total / count;
}

void *average_worker(void *arg)
{
    (void)arg;
    arrive();
    wait_for_go();
    printf("%d\n", per_item(1200, item_count));
    return NULL;
}

int main(void) { return run_crash(average_worker); }
