// sync_over_async: thread-pool starvation.  The worker pool is capped at
// PoolThreads threads; PoolThreads work items each block a pool thread in
// Task.Result / Task.Wait() on an async method whose continuation needs a
// pool thread to run.  No pool thread is ever free, so nothing completes.
// More work items stay queued behind them.  There is no Monitor cycle.
using System.Runtime.CompilerServices;

namespace Knot.Samples.SyncOverAsync;

static class Program
{
    const int PoolThreads = 8;
    const int QueuedBehind = 8;
    static int _blocked;
    static readonly ManualResetEventSlim AllBlocked = new();

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

        var requests = new List<Task>();
        for (int i = 0; i < PoolThreads + QueuedBehind; i++)
        {
            int id = i;
            requests.Add(Task.Factory.StartNew(() => HandleRequestSync(id), CancellationToken.None,
                TaskCreationOptions.None, TaskScheduler.Default));
        }
        AllBlocked.Wait();
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        WaitForAllRequests(requests);
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForAllRequests(List<Task> requests) => Task.WaitAll(requests.ToArray());

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HandleRequestSync(int id)
    {
        if (Interlocked.Increment(ref _blocked) == PoolThreads)
            AllBlocked.Set();
        if (id % 2 == 0)
            BlockOnResult(id);
        else
            BlockOnWait(id);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static int BlockOnResult(int id) => FetchQuoteAsync(id).Result;

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void BlockOnWait(int id) => FetchQuoteAsync(id).Wait();

    static async Task<int> FetchQuoteAsync(int id)
    {
        // The continuation after Yield is queued to the (starved) thread pool.
        await Task.Yield();
        return await ComputeQuoteAsync(id);
    }

    static async Task<int> ComputeQuoteAsync(int id)
    {
        await Task.Yield();
        return id * 7;
    }
}
