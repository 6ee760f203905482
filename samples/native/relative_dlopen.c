/* relative_dlopen: a program that dlopen()s its plugin by a relative path (issue 30, item 2):
 * dlopen("./librelative_plugin.so") from the directory it runs in, so the dynamic linker's
 * link_map names the plugin `./librelative_plugin.so`. plugin_holder_thread holds plugin_lock
 * (a mutex of the plugin) and sleeps in the plugin's plugin_hold; plugin_waiter_thread blocks
 * on it in plugin_wait; main joins the holder. */
#include "common.h"
#include <dlfcn.h>

static void (*plugin_hold)(void (*)(void));
static void (*plugin_wait)(void (*)(void));

static void arrived(void) { arrive(); }

void *plugin_holder_thread(void *arg)
{
    (void)arg;
    plugin_hold(arrived);
    return NULL;
}

void *plugin_waiter_thread(void *arg)
{
    (void)arg;
    plugin_wait(arrived);
    return NULL;
}

int main(void)
{
    void *plugin = dlopen("./librelative_plugin.so", RTLD_NOW);
    if (!plugin) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    plugin_hold = (void (*)(void (*)(void)))dlsym(plugin, "plugin_hold");
    plugin_wait = (void (*)(void (*)(void)))dlsym(plugin, "plugin_wait");
    if (!plugin_hold || !plugin_wait)
        return 2;
    pthread_t holder = spawn(plugin_holder_thread, NULL);
    await_arrivals(1);
    spawn(plugin_waiter_thread, NULL);
    await_arrivals(2);
    announce_ready();
    pthread_join(holder, NULL);
    return 0;
}
