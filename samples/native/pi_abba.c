/* pi_abba: an ABBA deadlock over two priority-inheritance mutexes.
 *
 * restock_thread holds stock_lock and blocks on ledger_lock in FUTEX_LOCK_PI
 * (the kernel queues it on ledger_lock's PI state). audit_thread holds
 * ledger_lock and then asks for stock_lock: the kernel sees the chain close
 * (stock_lock's owner waits for ledger_lock, held by the caller) and refuses
 * with EDEADLK; glibc's pthread_mutex_lock does not return that for a normal
 * mutex but parks the thread for good in FUTEX_WAIT on a zero word on its own
 * stack. Both futex words name their owner (FUTEX_WAITERS | tid).
 * main waits in pthread_join(restock_thread). */
#define _GNU_SOURCE
#include "common.h"
#include <sys/syscall.h>

pthread_mutex_t stock_lock;
pthread_mutex_t ledger_lock;
static atomic_int restock_tid;

static void init_pi(pthread_mutex_t *m)
{
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    check(pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT), "setprotocol");
    check(pthread_mutex_init(m, &attr), "mutex_init");
    pthread_mutexattr_destroy(&attr);
}

/* Whether thread `tid` of this process sleeps (state S in /proc). */
static int sleeping(int tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] == 'S';
}

void *restock_thread(void *arg)
{
    (void)arg;
    check(pthread_mutex_lock(&stock_lock), "lock stock");
    atomic_store(&restock_tid, (int)syscall(SYS_gettid));
    arrive();
    while (atomic_load(&arrivals) < 2)
        usleep(1000);
    pthread_mutex_lock(&ledger_lock); /* queued behind audit_thread */
    return NULL;
}

void *audit_thread(void *arg)
{
    (void)arg;
    check(pthread_mutex_lock(&ledger_lock), "lock ledger");
    arrive();
    while (atomic_load(&arrivals) < 2)
        usleep(1000);
    /* Only once restock_thread sleeps on ledger_lock does the kernel see the cycle. */
    usleep(50000);
    while (!sleeping(atomic_load(&restock_tid)))
        usleep(1000);
    usleep(50000);
    arrive();
    pthread_mutex_lock(&stock_lock); /* EDEADLK inside: parked for good */
    return NULL;
}

int main(void)
{
    init_pi(&stock_lock);
    init_pi(&ledger_lock);
    pthread_t restock = spawn(restock_thread, NULL);
    spawn(audit_thread, NULL);
    await_arrivals(3);
    announce_ready();
    pthread_join(restock, NULL);
    return 0;
}
