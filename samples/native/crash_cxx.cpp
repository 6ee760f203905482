// crash_cxx: a C++ exception nobody catches, thrown on a worker thread:
// std::terminate, then abort(). The thrown object is a LedgerError (a
// std::runtime_error) whose what() is "ledger is inconsistent: 3 entries".
#include <atomic>
#include <cstdio>
#include <pthread.h>
#include <stdexcept>
#include <string>
#include <unistd.h>

struct LedgerError : std::runtime_error {
    explicit LedgerError(const std::string &what) : std::runtime_error(what) {}
};

static std::atomic<int> arrivals;
static volatile int entries = 3;
static pthread_mutex_t idle_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;

void load_ledger()
{
    throw LedgerError("ledger is inconsistent: " + std::to_string(entries) + " entries");
}

void *ledger_worker(void *)
{
    arrivals++;
    char c;
    (void)read(0, &c, 1); // the maker's "go"
    load_ledger();
    return nullptr;
}

void *idle_waiter(void *)
{
    pthread_mutex_lock(&idle_mutex);
    arrivals++;
    for (;;)
        pthread_cond_wait(&idle_cond, &idle_mutex);
    return nullptr;
}

int main()
{
    pthread_t idle, worker;
    pthread_create(&idle, nullptr, idle_waiter, nullptr);
    pthread_create(&worker, nullptr, ledger_worker, nullptr);
    while (arrivals.load() < 2)
        usleep(1000);
    std::fputs("ready\n", stdout);
    std::fflush(stdout);
    pthread_join(worker, nullptr);
    return 0;
}
