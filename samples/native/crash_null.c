/* crash_null: the worker reads a field through a NULL pointer
 * (order->qty, offset 0x2c): SIGSEGV SEGV_MAPERR at 0x2c. */
#include "crash_common.h"

struct order {
    char name[44];
    int qty;
};

int parse_qty(struct order *o)
{
    return o->qty;
}

static struct order *volatile pending; /* never set */

void *order_worker(void *arg)
{
    (void)arg;
    arrive();
    wait_for_go();
    printf("qty %d\n", parse_qty(pending));
    return NULL;
}

int main(void) { return run_crash(order_worker); }
