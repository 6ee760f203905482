/* generated_code: a thread stopped in generated code — no CFI, no frame pointer, written into an
 * mmap'd executable page — whose frame still holds stale return addresses of a call it made
 * earlier (issue 30, item 3).
 *
 * generated_thread calls run_generated (a C frame with %rbp), which calls the generated code:
 *
 *     push rbx; mov rbx, rsi   ; keep block_forever
 *     call rdi                 ; stamp_helper: its frame and its call to stamp_leaf are left below
 *     sub rsp, 0x40            ; ... and are now inside the generated code's own frame
 *     call rbx                 ; block_forever: arrives and sleeps in pause()
 *
 * So above the generated frame's stack pointer lie, in order: the stale return address into
 * stamp_helper (after its call to stamp_leaf), the stale return address into the generated code
 * (after its call to stamp_helper), and five words further up the true one, into run_generated.
 * stamp_helper keeps no frame pointer (its CFA is %rsp-based), so its stale return address
 * unwinds by CFI to the stale one into the generated code. main joins generated_thread. */
#include "common.h"
#include <sys/mman.h>

static volatile int stamps;

__attribute__((noinline)) int stamp_leaf(void)
{
    return ++stamps;
}

__attribute__((noinline, optimize("O2", "omit-frame-pointer"))) int stamp_helper(void)
{
    volatile int local = stamp_leaf();
    return local + 1;
}

void block_forever(void)
{
    arrive();
    sleep_forever();
}

static const unsigned char code[] = {
    0x53,                   /* push rbx */
    0x48, 0x89, 0xf3,       /* mov rbx, rsi */
    0xff, 0xd7,             /* call rdi */
    0x48, 0x83, 0xec, 0x40, /* sub rsp, 0x40 */
    0xff, 0xd3,             /* call rbx */
    0x0f, 0x0b,             /* ud2 */
};

typedef void (*generated_fn)(int (*helper)(void), void (*block)(void));

void run_generated(generated_fn generated)
{
    generated(stamp_helper, block_forever);
}

void *generated_thread(void *arg)
{
    run_generated((generated_fn)arg);
    return NULL;
}

int main(void)
{
    void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    /* Not at the page's start: the bytes before each return address are readable, as in any
     * code generator's buffer. */
    memset(page, 0xcc, 64);
    memcpy((char *)page + 64, code, sizeof code);
    pthread_t t = spawn(generated_thread, (char *)page + 64);
    await_arrivals(1);
    announce_ready();
    pthread_join(t, NULL);
    return 0;
}
