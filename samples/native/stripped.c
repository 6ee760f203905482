/* stripped: vault_holder holds vault_lock and sleeps; 2 vault_waiters block
 * on it. Built -O1 -g, then split: the shipped binary has no symbols at all
 * and its DWARF + symtab live in a separate file, found by debuglink or
 * build-id. main waits in pthread_join(holder). */
#include "common.h"

#define WAITERS 2

pthread_mutex_t vault_lock = PTHREAD_MUTEX_INITIALIZER;

void *vault_holder(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&vault_lock);
    arrive();
    sleep_forever();
    return NULL;
}

void *vault_waiter(void *arg)
{
    (void)arg;
    arrive();
    pthread_mutex_lock(&vault_lock);
    return NULL;
}

int main(void)
{
    pthread_t holder = spawn(vault_holder, NULL);
    await_arrivals(1);
    for (int i = 0; i < WAITERS; i++)
        spawn(vault_waiter, NULL);
    await_arrivals(1 + WAITERS);
    announce_ready();
    pthread_join(holder, NULL);
    return 0;
}
