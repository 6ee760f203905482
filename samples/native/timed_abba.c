/* timed_abba: an ABBA deadlock through pthread_mutex_timedlock with a long
 * timeout, whose timed futex waits the kernel restarts (restart_syscall, 219).
 * worker_ab holds lock_a and waits for lock_b (timed, 1 hour); worker_ba holds
 * lock_b and waits for lock_a (timed). Once both wait, a child process stops
 * and continues this process (SIGSTOP, SIGCONT): each timed futex wait is
 * interrupted and resumed through restart_syscall, as in a process that a
 * debugger or a job-control stop touched. main waits in pthread_join(worker_ab). */
#include "common.h"
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t lock_b = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both_hold;
static pid_t worker_tids[2];

static void timed_lock(pthread_mutex_t *m)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 3600;
    check(pthread_mutex_timedlock(m, &until), "pthread_mutex_timedlock");
}

void *worker_ab(void *arg)
{
    (void)arg;
    worker_tids[0] = (pid_t)syscall(SYS_gettid);
    pthread_mutex_lock(&lock_a);
    pthread_barrier_wait(&both_hold);
    arrive();
    timed_lock(&lock_b);
    return NULL;
}

void *worker_ba(void *arg)
{
    (void)arg;
    worker_tids[1] = (pid_t)syscall(SYS_gettid);
    pthread_mutex_lock(&lock_b);
    pthread_barrier_wait(&both_hold);
    arrive();
    timed_lock(&lock_a);
    return NULL;
}

/* Whether thread `tid` of this process sleeps in syscall `nr`. */
static int in_syscall(pid_t tid, long nr)
{
    char path[64], buf[64] = {0};
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return atol(buf) == nr;
}

int main(void)
{
    check(pthread_barrier_init(&both_hold, NULL, 2), "barrier");
    pthread_t ab = spawn(worker_ab, NULL);
    spawn(worker_ba, NULL);
    await_arrivals(2);
    while (!in_syscall(worker_tids[0], SYS_futex) || !in_syscall(worker_tids[1], SYS_futex))
        usleep(1000);
    pid_t parent = getpid();
    pid_t child = fork();
    if (child == 0) {
        kill(parent, SIGSTOP);
        usleep(200000);
        kill(parent, SIGCONT);
        _exit(0);
    }
    waitpid(child, NULL, 0);
    /* Both waits are now restarted ones. */
    while (!in_syscall(worker_tids[0], SYS_restart_syscall) || !in_syscall(worker_tids[1], SYS_restart_syscall))
        usleep(1000);
    announce_ready();
    pthread_join(ab, NULL);
    return 0;
}
