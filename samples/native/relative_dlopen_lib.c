/* The plugin of relative_dlopen: it takes the registry lock and waits on it again, held. */
#include <pthread.h>
#include <unistd.h>

pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;

void plugin_hold(void (*arrived)(void))
{
    pthread_mutex_lock(&plugin_lock);
    arrived();
    for (;;)
        pause();
}

void plugin_wait(void (*arrived)(void))
{
    arrived();
    pthread_mutex_lock(&plugin_lock);
}
