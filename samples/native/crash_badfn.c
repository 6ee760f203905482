/* crash_badfn: the worker calls through a function pointer that points at
 * a data array (.bss, mapped rw-): SIGSEGV SEGV_ACCERR with the PC at the
 * fault address, in a mapping that is not executable. */
#include "crash_common.h"

typedef void (*handler_fn)(int);

unsigned char handler_table[64];
static handler_fn volatile current_handler;

void dispatch(int event)
{
    current_handler(event);
}

void *dispatch_worker(void *arg)
{
    (void)arg;
    current_handler = (handler_fn)(void *)handler_table;
    arrive();
    wait_for_go();
    dispatch(7);
    return NULL;
}

int main(void) { return run_crash(dispatch_worker); }
