/* odd_mappings: a process with mappings that are not ELF images: an io_uring
 * (anon_inode:[io_uring]), a memfd, and a POSIX shared memory file in /dev/shm.
 * idle_mapper holds them mapped and sleeps in pause(); main joins it. None of
 * them is a module: a reader must neither warn about them nor call the dump
 * partial. */
#define _GNU_SOURCE
#include "common.h"
#include <fcntl.h>
#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/syscall.h>

static void *map_fd(int fd, size_t len, off_t off)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    return p;
}

void *idle_mapper(void *arg)
{
    (void)arg;
    struct io_uring_params params;
    memset(&params, 0, sizeof params);
    int ring = (int)syscall(SYS_io_uring_setup, 4, &params);
    if (ring < 0) {
        perror("io_uring_setup");
        exit(2);
    }
    size_t sq_len = params.sq_off.array + params.sq_entries * sizeof(unsigned);
    volatile char *sq = map_fd(ring, sq_len, IORING_OFF_SQ_RING);

    int mfd = memfd_create("knot-odd", 0);
    if (mfd < 0 || ftruncate(mfd, 8192) != 0) {
        perror("memfd");
        exit(2);
    }
    volatile char *mem = map_fd(mfd, 8192, 0);
    mem[0] = 'm';

    char name[64];
    snprintf(name, sizeof name, "/knot-odd-%d", (int)getpid());
    int sfd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (sfd < 0 || ftruncate(sfd, 4096) != 0) {
        perror("shm_open");
        exit(2);
    }
    volatile char *shm = map_fd(sfd, 4096, 0);
    shm[0] = 's';
    shm_unlink(name); /* the mapping stays; no file is left behind */
    (void)sq;
    arrive();
    sleep_forever();
    return NULL;
}

int main(void)
{
    pthread_t t = spawn(idle_mapper, NULL);
    await_arrivals(1);
    announce_ready();
    pthread_join(t, NULL);
    return 0;
}
