/* smashed_stack: a return address overwritten by a buffer overflow.
 *
 * label_worker formats a label into a 16-byte buffer on its stack with
 * strcpy from a string longer than the buffer: the bytes past it run over the
 * saved return address, whose low six bytes become 0x41 ('A') and whose top
 * two stay 0. When copy_label returns, it jumps to 0x414141414141, which no
 * mapping holds: SIGSEGV with the overwritten return address in %rip.
 * Built -O2 -fno-stack-protector (no canary stops it). main waits in
 * pthread_join(label_worker); idle_waiter waits on idle_cond. */
#include "crash_common.h"

/* 24 bytes to the saved return address (16 of buffer, 8 of saved %rbx), then 6 of 'A'. */
static const char *volatile label_text = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

__attribute__((noinline)) static size_t copy_label(const char *text)
{
    char label[16];
    strcpy(label, text);
    return strlen(label);
}

static void *label_worker(void *arg)
{
    (void)arg;
    arrive();
    wait_for_go();
    return (void *)copy_label(label_text);
}

int main(void)
{
    return run_crash(label_worker);
}
