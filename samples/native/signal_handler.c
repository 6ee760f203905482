/* signal_handler: victim_thread spins in victim_spin() until main sends it
 * SIGUSR1; the handler on_usr1 then blocks on handler_lock, which main
 * holds. The victim's stack: mutex lock <- on_usr1 <- <signal handler
 * called> (__restore_rt) <- victim_spin (interrupted mid-loop, not at a
 * call) <- victim_thread. main sleeps in pause(). */
#include "common.h"
#include <signal.h>

pthread_mutex_t handler_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int spinning;
volatile unsigned long spin_count;

void on_usr1(int sig)
{
    (void)sig;
    arrive();
    pthread_mutex_lock(&handler_lock); /* not async-signal-safe: that's the bug */
}

void victim_spin(void)
{
    atomic_store(&spinning, 1);
    for (;;)
        spin_count++;
}

void *victim_thread(void *arg)
{
    (void)arg;
    victim_spin();
    return NULL;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0) {
        perror("sigaction");
        return 2;
    }
    pthread_mutex_lock(&handler_lock);
    pthread_t victim = spawn(victim_thread, NULL);
    while (!atomic_load(&spinning))
        usleep(1000);
    check(pthread_kill(victim, SIGUSR1), "pthread_kill");
    await_arrivals(1);
    announce_ready();
    sleep_forever();
}
