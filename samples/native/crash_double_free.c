/* crash_double_free: a buffer freed twice on a worker: glibc's tcache check
 * aborts with "free(): double free detected in tcache 2". */
#include "crash_common.h"

static char *volatile record;

void release(char *p)
{
    free(p);
}

void *cleanup_worker(void *arg)
{
    (void)arg;
    record = malloc(48);
    arrive();
    wait_for_go();
    release(record);
    release(record);
    return NULL;
}

int main(void) { return run_crash(cleanup_worker); }
