/* many_threads: N gated_threads (argv[1], default 220) all block on
 * gate_lock, held by main, which sleeps in pause(). Small stacks keep the
 * dump small at N=600.
 *
 * Optional argv[2] = G: before the threads start, map G GiB of private
 * anonymous memory (`ballast`) and write one byte per 64 MiB of it, so the
 * process is huge but its resident set is not. The kernel dumps the
 * untouched pages as holes: the core's apparent size grows by G GiB while
 * its disk use barely does (`cargo xtask bench --scale`). Default 0: no
 * ballast, the same program as before.
 *
 * Optional argv[3] = D: each thread first recurses through `descend` so
 * that its stack is D to D + 20 frames deep (varying by thread, so stacks
 * are not all identical), then blocks: the shape of a big service's thread
 * pool (`cargo xtask bench`, 2,000 threads x 40-60 frames). Default 0. */
#include "common.h"

#include <sys/mman.h>

#define BALLAST_STRIDE (64UL << 20)

pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;

/* Where the ballast is (for a debugger: `p ballast`, `p ballast_bytes`). */
volatile unsigned char *ballast;
size_t ballast_bytes;

/* Not inlined and not a tail call (the sum after the call), so every level is a frame. */
__attribute__((noinline)) int descend(int levels)
{
    if (levels <= 0) {
        arrive();
        pthread_mutex_lock(&gate_lock);
        return 0;
    }
    return descend(levels - 1) + 1;
}

void *gated_thread(void *arg)
{
    long depth = (long)arg;
    if (depth > 0) {
        descend((int)depth);
        return NULL;
    }
    arrive();
    pthread_mutex_lock(&gate_lock);
    return NULL;
}

static void map_ballast(long gib)
{
    ballast_bytes = (size_t)gib << 30;
    void *p = mmap(NULL, ballast_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap ballast");
        exit(2);
    }
    ballast = p;
    for (size_t off = 0; off < ballast_bytes; off += BALLAST_STRIDE)
        ballast[off] = 0x6b; /* 'k': one resident page per stride */
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 220;
    if (n <= 0) {
        fprintf(stderr, "bad thread count\n");
        return 2;
    }
    long gib = argc > 2 ? atol(argv[2]) : 0;
    if (gib < 0 || gib > 1024) {
        fprintf(stderr, "bad ballast size (GiB, 0..1024)\n");
        return 2;
    }
    long depth = argc > 3 ? atol(argv[3]) : 0;
    if (depth < 0 || depth > 1000) {
        fprintf(stderr, "bad depth (frames, 0..1000)\n");
        return 2;
    }
    if (gib > 0)
        map_ballast(gib);
    pthread_mutex_lock(&gate_lock);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    check(pthread_attr_setstacksize(&attr, 256 * 1024), "stacksize");
    for (int i = 0; i < n; i++) {
        pthread_t t;
        void *arg = depth > 0 ? (void *)(depth + i % 21) : NULL;
        check(pthread_create(&t, &attr, gated_thread, arg), "pthread_create");
    }
    await_arrivals(n);
    announce_ready();
    sleep_forever();
}
