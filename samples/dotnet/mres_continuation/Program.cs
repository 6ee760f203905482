// mres_continuation: sync over async through a ManualResetEventSlim a task's continuation sets.
// The worker pool is capped at PoolThreads; each of PoolThreads work items starts an async call
// (FetchQuoteAsync, which awaits Task.Delay: its timer fires through a TimerQueue queued to the
// pool), registers a
// continuation that sets its own ManualResetEventSlim — GetAwaiter().OnCompleted on even ids,
// ContinueWith on odd ones — and blocks in that event's Wait(). No worker is ever free to run
// the queued continuations, so no event is ever set: a deadlock through the thread pool, with
// no Task.Wait on any stack (the task is only a local of the waiting frame).
using System.Runtime.CompilerServices;

namespace Knot.Samples.MresContinuation;

static class Program
{
    const int PoolThreads = 4;
    static int _blocked;
    static readonly ManualResetEventSlim AllBlocked = new();
    static readonly ManualResetEventSlim Never = new();

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        // Min = max: all PoolThreads workers are created at once, no more ever.
        if (!ThreadPool.SetMaxThreads(PoolThreads, PoolThreads) ||
            !ThreadPool.SetMinThreads(PoolThreads, PoolThreads))
        {
            Console.Error.WriteLine("could not size the thread pool");
            return 2;
        }
        for (int i = 0; i < PoolThreads; i++)
            ThreadPool.QueueUserWorkItem(HandleRequest, i, preferLocal: false);
        AllBlocked.Wait();
        // Each worker is in its event's Wait before the dump is taken.
        Thread.Sleep(500);
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        Never.Wait();
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HandleRequest(int id)
    {
        Task<int> quote = FetchQuoteAsync(id);
        var done = new ManualResetEventSlim();
        if (id % 2 == 0)
            quote.GetAwaiter().OnCompleted(() => done.Set());
        else
            quote.ContinueWith(_ => done.Set(), TaskScheduler.Default);
        if (Interlocked.Increment(ref _blocked) == PoolThreads)
            AllBlocked.Set();
        WaitForQuote(done);
        GC.KeepAlive(quote);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForQuote(ManualResetEventSlim done) => done.Wait();

    static async Task<int> FetchQuoteAsync(int id)
    {
        // The timer fires only when a worker runs the TimerQueue queued to the (exhausted) pool.
        await Task.Delay(50);
        return id * 7;
    }
}
