/* rwlock_cycle: a deadlock through a read-held rwlock.
 *
 * planner_thread read-locks routes.lock (the first field of the global
 * struct routes) through plan(), which keeps the table's pointer in its
 * frame, and then waits for dispatch_lock. dispatcher_thread holds
 * dispatch_lock and waits to write-lock routes.lock, which its reader never
 * releases. The rwlock records only that one thread reads it, not which.
 * main waits in pthread_join(dispatcher_thread). */
#include "common.h"

struct route_table {
    pthread_rwlock_t lock;
    int routes[16];
};

struct route_table routes = { PTHREAD_RWLOCK_INITIALIZER, { 0 } };
pthread_mutex_t dispatch_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int planning;

static int plan(struct route_table *table)
{
    pthread_rwlock_rdlock(&table->lock);
    atomic_store(&planning, 1);
    while (atomic_load(&arrivals) < 1)
        usleep(1000);
    arrive();
    pthread_mutex_lock(&dispatch_lock); /* held by the dispatcher */
    int n = table->routes[0];
    pthread_mutex_unlock(&dispatch_lock);
    pthread_rwlock_unlock(&table->lock);
    return n;
}

void *planner_thread(void *arg)
{
    return (void *)(long)plan(arg);
}

static void dispatch(struct route_table *table)
{
    pthread_mutex_lock(&dispatch_lock);
    arrive();
    while (!atomic_load(&planning))
        usleep(1000);
    pthread_rwlock_wrlock(&table->lock); /* behind the planner's read lock */
    table->routes[0]++;
    pthread_rwlock_unlock(&table->lock);
    pthread_mutex_unlock(&dispatch_lock);
}

void *dispatcher_thread(void *arg)
{
    dispatch(arg);
    return NULL;
}

int main(void)
{
    pthread_t dispatcher = spawn(dispatcher_thread, &routes);
    spawn(planner_thread, &routes);
    await_arrivals(2);
    announce_ready();
    pthread_join(dispatcher, NULL);
    return 0;
}
