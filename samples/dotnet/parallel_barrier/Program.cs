// parallel_barrier: Parallel.For(0, Bodies) on a thread pool capped at PoolThreads workers,
// each body in `Phase.SignalAndWait()` on a Barrier of Bodies participants. Parallel.For runs
// its bodies on replica tasks queued to the pool (and on the calling thread): the pool's
// workers all block in the barrier, which still waits for the participants whose replica sits
// in the pool's queue behind them — a deadlock through the thread pool.
using System.Runtime.CompilerServices;

namespace Knot.Samples.ParallelBarrier;

static class Program
{
    const int PoolThreads = 3;
    const int Bodies = 6;
    static readonly Barrier Phase = new(Bodies);
    static int _arrived;

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        if (!ThreadPool.SetMaxThreads(PoolThreads, PoolThreads) ||
            !ThreadPool.SetMinThreads(PoolThreads, PoolThreads))
        {
            Console.Error.WriteLine("could not size the thread pool");
            return 2;
        }
        var reporter = new Thread(ReportReady, 1 << 20) { Name = "Reporter", IsBackground = true };
        reporter.Start();
        RunPhase();
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void RunPhase() => Parallel.For(0, Bodies, Step);

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Step(int i)
    {
        Interlocked.Increment(ref _arrived);
        Phase.SignalAndWait();
    }

    // Says "ready" once the pool's workers and Main are all in the barrier, then sleeps.
    [MethodImpl(MethodImplOptions.NoInlining)]
    static void ReportReady()
    {
        while (Volatile.Read(ref _arrived) < PoolThreads + 1)
            Thread.Sleep(10);
        Thread.Sleep(500);
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        Thread.Sleep(Timeout.Infinite);
    }
}
