/* crash_readonly: the worker writes into a string literal (.rodata, mapped
 * r--): SIGSEGV SEGV_ACCERR, a write to a read-only mapping. */
#include "crash_common.h"

static const char banner[] = "knot crash sample: read-only banner";

void shout(char *text)
{
    text[0] = 'K';
}

void *banner_worker(void *arg)
{
    (void)arg;
    arrive();
    wait_for_go();
    shout((char *)banner);
    puts(banner);
    return NULL;
}

int main(void) { return run_crash(banner_worker); }
