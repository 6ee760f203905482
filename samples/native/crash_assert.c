/* crash_assert: a failed assert() on a worker: SIGABRT raised by abort(),
 * glibc's __abort_msg holds the assertion text. */
#include "crash_common.h"
#include <assert.h>

static volatile int balance = -40;

void settle(int amount)
{
    assert(balance + amount >= 0);
    balance += amount;
}

void *settle_worker(void *arg)
{
    (void)arg;
    arrive();
    wait_for_go();
    settle(25);
    return NULL;
}

int main(void) { return run_crash(settle_worker); }
