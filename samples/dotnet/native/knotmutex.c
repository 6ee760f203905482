/* knotmutex: one process-wide pthread mutex for the pinvoke_mutex sample.
 *
 * knot_lock() blocks in pthread_mutex_lock (futex wait) while another thread
 * holds the mutex; the owner's kernel tid is in __data.__owner.
 *
 * The mutex lives in malloc'd memory, not in this library's .bss: createdump
 * --withheap (MiniDumpWithPrivateReadWriteMemory) writes anonymous private
 * read/write mappings (the malloc heap/arenas) but not the writable segments
 * of loaded modules, so a .bss mutex would be missing from heap dumps. */
#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t *knot_mutex;

__attribute__((constructor)) static void knot_init(void)
{
    knot_mutex = malloc(sizeof *knot_mutex);
    if (knot_mutex == NULL || pthread_mutex_init(knot_mutex, NULL) != 0)
        abort();
}

__attribute__((noinline, visibility("default"))) int knot_lock(void)
{
    return pthread_mutex_lock(knot_mutex);
}

__attribute__((noinline, visibility("default"))) int knot_unlock(void)
{
    return pthread_mutex_unlock(knot_mutex);
}

/* The mutex's address, for oracles and tests. */
__attribute__((visibility("default"))) void *knot_mutex_address(void)
{
    return knot_mutex;
}
