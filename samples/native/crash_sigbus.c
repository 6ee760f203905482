/* crash_sigbus: the worker reads a file mapping past the end of the file
 * (the file was truncated after mmap): SIGBUS BUS_ADRERR. */
#include "crash_common.h"
#include <fcntl.h>
#include <sys/mman.h>

#define PAGE 4096

static const unsigned char *journal;

int read_entry(const unsigned char *base, long page)
{
    return base[page * PAGE + 16];
}

void *journal_worker(void *arg)
{
    (void)arg;
    arrive();
    wait_for_go();
    printf("%d\n", read_entry(journal, 1));
    return NULL;
}

int main(void)
{
    int fd = open("journal.dat", O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, 2 * PAGE) != 0) {
        perror("journal.dat");
        return 2;
    }
    journal = mmap(NULL, 2 * PAGE, PROT_READ, MAP_SHARED, fd, 0);
    if (journal == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    if (ftruncate(fd, 100) != 0) { /* the second page is now past the end */
        perror("ftruncate");
        return 2;
    }
    return run_crash(journal_worker);
}
