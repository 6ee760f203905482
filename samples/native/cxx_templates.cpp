// cxx_templates: threads whose stacks run through templates with integer
// arguments and empty packs, named as c++filt and gdb name them:
// hold_for<long, std::ratio<3600l, 1l> >, take_all<0ul, 1ul>, wait_quietly<>,
// std::thread's _Invoker<...>::_M_invoke<0ul>.
//
// shelf_holder holds shelf_lock and sleeps for an hour (sleep_for with a
// std::chrono::hours); shelf_taker (through take_all<0ul, 1ul>) and
// shelf_idler (through wait_quietly<>()) block on it. main joins shelf_holder.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <utility>

std::mutex shelf_lock;
static std::atomic<int> arrivals{0};

template <typename Rep, typename Period>
void hold_for(std::chrono::duration<Rep, Period> how_long)
{
    std::lock_guard<std::mutex> held(shelf_lock);
    arrivals++;
    std::this_thread::sleep_for(how_long);
}

template <std::size_t... I>
int take_all(std::index_sequence<I...>)
{
    arrivals++;
    std::lock_guard<std::mutex> held(shelf_lock);
    return static_cast<int>(sizeof...(I));
}

template <typename... Ts>
void wait_quietly(Ts... args)
{
    arrivals++;
    std::lock_guard<std::mutex> held(shelf_lock);
    (void)sizeof...(args);
}

void shelf_holder() { hold_for(std::chrono::hours(1)); }
void shelf_taker() { take_all(std::make_index_sequence<2>{}); }
void shelf_idler() { wait_quietly(); }

int main()
{
    std::thread holder(shelf_holder);
    while (arrivals < 1)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::thread taker(shelf_taker);
    std::thread idler(shelf_idler);
    while (arrivals < 3)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::puts("ready");
    std::fflush(stdout);
    holder.join();
    taker.join();
    idler.join();
}
