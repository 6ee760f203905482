// task_cycle: a three-party deadlock through a SemaphoreSlim, a task and a Monitor.
// - LedgerHolder takes `lock (Ledger.Sync)`, then waits for the gate: `Gate.Wait()` on a
//   SemaphoreSlim(1, 1) that GateHolder has taken.
// - GateHolder takes the gate (`Wait()`), then starts RefreshLedgerAsync and `Task.Wait()`s it.
// - RefreshLedgerAsync yields to the thread pool; its MoveNext runs on a pool worker and blocks
//   in `lock (Ledger.Sync)`, held by LedgerHolder.
// No field records who took the semaphore, and the task has no owning thread: only the
// worker's stack shows it runs the task's MoveNext.
using System.Runtime.CompilerServices;

namespace Knot.Samples.TaskCycle;

static class Ledger
{
    public static readonly object Sync = new();
}

static class Program
{
    static readonly SemaphoreSlim Gate = new(1, 1);
    static readonly ManualResetEventSlim LedgerTaken = new();
    static readonly ManualResetEventSlim GateTaken = new();
    static int _refreshing;

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        var ledger = new Thread(HoldLedgerThenGate, 1 << 20) { Name = "LedgerHolder" };
        var gate = new Thread(HoldGateThenRefresh, 1 << 20) { Name = "GateHolder" };
        ledger.Start();
        gate.Start();
        // The worker is about to block on Ledger.Sync, LedgerHolder on the gate.
        while (Volatile.Read(ref _refreshing) == 0)
            Thread.Sleep(10);
        Thread.Sleep(500);
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        ledger.Join();
        gate.Join();
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HoldLedgerThenGate()
    {
        lock (Ledger.Sync)
        {
            LedgerTaken.Set();
            GateTaken.Wait();
            WaitForGate();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForGate()
    {
        Gate.Wait();
        Gate.Release();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HoldGateThenRefresh()
    {
        LedgerTaken.Wait();
        var gate = Gate;
        gate.Wait();
        try
        {
            GateTaken.Set();
            WaitForRefresh();
        }
        finally
        {
            gate.Release();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForRefresh()
    {
        Task refresh = RefreshLedgerAsync();
        refresh.Wait();
    }

    static async Task RefreshLedgerAsync()
    {
        await Task.Yield();
        Interlocked.Increment(ref _refreshing);
        lock (Ledger.Sync)
        {
            Console.Out.WriteLine("refreshed");
        }
    }
}
