// pool_queue: a limited thread pool with known work queued behind it.  The pool is capped at
// Workers threads (min = max); each worker blocks in its work item on a gate that never opens.
// Before they block, worker 0 queues LocalItems LedgerFlush items (a known IThreadPoolWorkItem)
// on its own local queue (preferLocal); once every worker is blocked, Main queues GlobalCallbacks
// ThreadPool.QueueUserWorkItem callbacks (ReportTick) and GlobalTasks Task.Run items to the
// global queue.  Nothing ever runs them: SOS `threadpool` reads Running 4, Idle 0, Min 4, Max 4,
// and `threadpool -wi` the 5 + 6 + 3 = 14 queued items.
using System.Runtime.CompilerServices;

namespace Knot.Samples.PoolQueue;

/// A work item of a known type, queued on a worker's local queue.
sealed class LedgerFlush(int shard) : IThreadPoolWorkItem
{
    public readonly int Shard = shard;
    public void Execute() => Console.Out.WriteLine($"flushed {Shard}");
}

static class Program
{
    const int Workers = 4;
    const int LocalItems = 5;
    const int GlobalCallbacks = 6;
    const int GlobalTasks = 3;
    static readonly ManualResetEventSlim Gate = new();
    static readonly CountdownEvent Started = new(Workers);
    static readonly ManualResetEventSlim LocalQueued = new();
    static readonly CountdownEvent Blocking = new(Workers);

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        // Min = max: all Workers workers are created at once, no more ever.
        if (!ThreadPool.SetMaxThreads(Workers, Workers) || !ThreadPool.SetMinThreads(Workers, Workers))
        {
            Console.Error.WriteLine("could not size the thread pool");
            return 2;
        }
        for (int i = 0; i < Workers; i++)
        {
            int id = i;
            ThreadPool.UnsafeQueueUserWorkItem(_ => OccupyWorker(id), null);
        }
        Blocking.Wait();
        // Every worker is about to block (or blocked): global work now waits behind them.
        for (int i = 0; i < GlobalCallbacks; i++)
            ThreadPool.QueueUserWorkItem(ReportTick, i);
        for (int i = 0; i < GlobalTasks; i++)
        {
            int id = i;
            Task.Run(() => RefreshQuote(id));
        }
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        WaitForever();
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void OccupyWorker(int id)
    {
        // All workers busy first, so no idle one steals the local items.
        Started.Signal();
        Started.Wait();
        if (id == 0)
        {
            for (int i = 0; i < LocalItems; i++)
                ThreadPool.UnsafeQueueUserWorkItem(new LedgerFlush(i), preferLocal: true);
            LocalQueued.Set();
        }
        LocalQueued.Wait();
        Blocking.Signal();
        WaitAtGate();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitAtGate() => Gate.Wait();

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForever() => Gate.Wait();

    static void ReportTick(object? state) => Console.Out.WriteLine($"tick {state}");

    static void RefreshQuote(int id) => Console.Out.WriteLine($"quote {id}");
}
