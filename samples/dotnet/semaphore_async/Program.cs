// semaphore_async: a SemaphoreSlim(1) held by an async flow.  HoldGateAsync
// takes the gate (WaitAsync) and then awaits a reply that never comes, so the
// gate is never released and no thread holds it.  Three async flows
// (RefreshCacheAsync) wait for the gate with WaitAsync (no thread either), and
// two threads (SyncWaiter-1/2) wait for it with the blocking Wait().
using System.Runtime.CompilerServices;

namespace Knot.Samples.SemaphoreAsync;

static class Program
{
    const int AsyncWaiters = 3;
    const int SyncWaiters = 2;
    static readonly SemaphoreSlim Gate = new(1, 1);
    static readonly TaskCompletionSource<int> Reply = new();
    static int _syncWaiting;

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        var holder = HoldGateAsync();
        var flows = new List<Task>();
        for (int i = 0; i < AsyncWaiters; i++)
            flows.Add(RefreshCacheAsync(i));
        var threads = new List<Thread>();
        for (int i = 0; i < SyncWaiters; i++)
        {
            var t = new Thread(WaitForGateSync, 1 << 20) { Name = $"SyncWaiter-{i + 1}" };
            threads.Add(t);
            t.Start();
        }
        // The sync waiters are about to block in Wait(); make-dumps.sh waits until they sleep.
        while (Volatile.Read(ref _syncWaiting) < SyncWaiters)
            Thread.Sleep(10);
        Thread.Sleep(500);
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        foreach (var t in threads)
            t.Join();
        GC.KeepAlive(holder);
        GC.KeepAlive(flows);
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForGateSync()
    {
        Interlocked.Increment(ref _syncWaiting);
        BlockOnGate();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void BlockOnGate()
    {
        Gate.Wait();
        Gate.Release();
    }

    static async Task HoldGateAsync()
    {
        await Gate.WaitAsync();
        try
        {
            await Reply.Task;
        }
        finally
        {
            Gate.Release();
        }
    }

    static async Task RefreshCacheAsync(int id)
    {
        await Gate.WaitAsync();
        try
        {
            await Task.Yield();
            Console.Out.WriteLine($"refreshed {id}");
        }
        finally
        {
            Gate.Release();
        }
    }
}
