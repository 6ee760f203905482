/* pshared_child: locks shared between processes, held by a forked child.
 *
 * main maps a process-shared mutex (MAP_SHARED | MAP_ANONYMOUS) and a
 * process-shared rwlock in a POSIX shared-memory object (shm_open), then forks
 * courier, which takes the mutex and write-locks the rwlock and sleeps (it dies
 * with its parent: PR_SET_PDEATHSIG). In the parent, mutex_waiter_thread
 * blocks on the mutex and reader_thread in pthread_rwlock_rdlock: both locks
 * name the child's tid, a live process that is not in the parent's dump.
 * main waits in pthread_join(mutex_waiter_thread). */
#define _GNU_SOURCE
#include "common.h"
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

struct shared_order {
    pthread_mutex_t lock;
    int pending;
};

struct shared_book {
    pthread_rwlock_t lock;
    int pages;
};

struct shared_order *order;
struct shared_book *book;

void *mutex_waiter_thread(void *arg)
{
    (void)arg;
    arrive();
    pthread_mutex_lock(&order->lock);
    return NULL;
}

void *reader_thread(void *arg)
{
    (void)arg;
    arrive();
    pthread_rwlock_rdlock(&book->lock);
    return NULL;
}

static void courier(int ready_fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    check(pthread_mutex_lock(&order->lock), "child lock");
    check(pthread_rwlock_wrlock(&book->lock), "child wrlock");
    if (write(ready_fd, "x", 1) != 1)
        exit(3);
    sleep_forever();
}

int main(void)
{
    order = mmap(NULL, sizeof *order, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char name[64];
    snprintf(name, sizeof name, "/knot-pshared-%d", (int)getpid());
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (order == MAP_FAILED || fd < 0 || ftruncate(fd, sizeof *book) != 0) {
        perror("shared memory");
        return 2;
    }
    book = mmap(NULL, sizeof *book, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    shm_unlink(name);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    check(pthread_mutex_init(&order->lock, &ma), "mutex_init");
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setpshared(&ra, PTHREAD_PROCESS_SHARED);
    check(pthread_rwlock_init(&book->lock, &ra), "rwlock_init");

    int pipefd[2];
    if (pipe(pipefd) != 0)
        return 2;
    pid_t child = fork();
    if (child == 0)
        courier(pipefd[1]);
    char c;
    if (read(pipefd[0], &c, 1) != 1)
        return 2;
    pthread_t waiter = spawn(mutex_waiter_thread, NULL);
    spawn(reader_thread, NULL);
    await_arrivals(2);
    announce_ready();
    pthread_join(waiter, NULL);
    return 0;
}
