/* pidns_abba: an ABBA deadlock in a process that runs in its own PID namespace
 * (the maker starts it under `unshare --pid --fork`, as a container would, with
 * a shell as the namespace's init). Inside, the process is pid 2 and its
 * threads 3 and 4: the mutexes' __owner words and each thread's struct pthread
 * say those numbers, while gcore, run from the host, records the host's.
 * packer_thread holds crate_lock and waits for label_lock; shipper_thread holds
 * label_lock and waits for crate_lock. main waits in pthread_join(packer_thread). */
#include "common.h"

pthread_mutex_t crate_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t label_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both_hold;

void *packer_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&crate_lock);
    pthread_barrier_wait(&both_hold);
    arrive();
    pthread_mutex_lock(&label_lock);
    return NULL;
}

void *shipper_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&label_lock);
    pthread_barrier_wait(&both_hold);
    arrive();
    pthread_mutex_lock(&crate_lock);
    return NULL;
}

int main(void)
{
    pthread_barrier_init(&both_hold, NULL, 2);
    pthread_t packer = spawn(packer_thread, NULL);
    spawn(shipper_thread, NULL);
    await_arrivals(2);
    announce_ready();
    pthread_join(packer, NULL);
    return 0;
}
