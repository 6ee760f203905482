/* old_layout: a crash in a shared library whose two PT_LOADs both map file offset 0 (issue 30,
 * item 1; elfutils' tests/test-core.core has this layout). Its worker dlopen()s
 * libold_layout.so (beside the program) and calls libfunc, which reads through NULL.
 *
 * The library's text mapping is left out of the core (madvise MADV_DONTDUMP, as the core
 * elfutils commits has it: its text pages are not saved), so the dump holds the library's first
 * page only where the data mapping copied it, 2 MiB above the library's real base. */
#define _GNU_SOURCE
#include "crash_common.h"
#include <dlfcn.h>
#include <limits.h>
#include <sys/mman.h>

struct reading;
static int (*libfunc)(struct reading *);
static struct reading *volatile pending; /* never set */

void *reading_worker(void *arg)
{
    (void)arg;
    arrive();
    wait_for_go();
    printf("value %d\n", libfunc(pending));
    return NULL;
}

/* Leaves the library's text mapping (its first page, at its base) out of the core. */
static void text_not_dumped(void *in_text)
{
    Dl_info info;
    if (!dladdr(in_text, &info) || madvise(info.dli_fbase, 4096, MADV_DONTDUMP) != 0) {
        perror("madvise");
        exit(2);
    }
}

int main(void)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
    if (n <= 0)
        return 2;
    path[n] = 0;
    strcpy(strrchr(path, '/') + 1, "libold_layout.so");
    void *lib = dlopen(path, RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    libfunc = (int (*)(struct reading *))dlsym(lib, "libfunc");
    if (!libfunc)
        return 2;
    text_not_dumped((void *)libfunc);
    return run_crash(reading_worker);
}
