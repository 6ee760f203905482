// idle_runtime: what is not waiting for a lock. Two threads wait for a Monitor that a third holds
// while it sleeps; everything else sleeps (Thread.Sleep), waits for work (thread-pool workers) or is
// one of the runtime's own idle service threads (finalizer, tiered compilation, SynchManager,
// signal handler, debugger, timer, thread-pool gate). The truth: 2 threads blocked on 1 lock.
//
// Before that, the sync block table is made to grow over a freed malloc block full of junk and
// 300 objects get sync blocks, 200 of which die (their table entries go to the free list), so the
// entries past the ones the runtime handed out hold stale bytes: a reader must stop at the
// runtime's own count (SOS syncblk's Total), not at the first zero entry.
using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;

namespace Knot.Samples.IdleRuntime;

sealed class GateLock { }
sealed class Tagged { public int N; }

// Shared generic code (TValue is a reference type): SOS names the frame by the instantiation,
// `GateCache`2[[System.Int32, …],[System.__Canon, …]].GetOrAdd(Int32, System.Func`2<Int32,System.__Canon>)`.
sealed class GateCache<TKey, TValue>
{
    readonly object _gate;
    public GateCache(object gate) => _gate = gate;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public TValue GetOrAdd(TKey key, Func<TKey, TValue> make)
    {
        lock (_gate) { return make(key); }
    }
}

static unsafe class Program
{
    static readonly GateLock Gate = new();
    static readonly List<Tagged> Kept = new();
    static Timer? _timer;

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void LeaveJunkInTheHeap()
    {
        // Blocks of the sizes the sync table grows to (entries of 16 bytes), filled and freed on
        // this thread, so glibc hands one back to SyncBlockCache::Grow's new[] uninitialised.
        var blocks = new List<IntPtr>();
        foreach (var n in new[] { 251, 501, 1001 })
        {
            for (int k = 0; k < 4; k++)
            {
                nuint size = (nuint)(n * 16);
                byte* p = (byte*)NativeMemory.Alloc(size);
                for (nuint i = 0; i < size; i++) p[i] = (byte)(0x41 + (i % 7));
                blocks.Add((IntPtr)p);
            }
        }
        foreach (var p in blocks) NativeMemory.Free((void*)p);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void MakeSyncBlocks()
    {
        var dying = new List<Tagged>();
        for (int i = 0; i < 300; i++)
        {
            var o = new Tagged { N = i };
            // A hash code taken under a thin lock moves both into a sync block.
            lock (o) { _ = o.GetHashCode(); }
            if (i % 3 == 0) Kept.Add(o); else dying.Add(o);
        }
        dying.Clear();
        GC.Collect(); GC.WaitForPendingFinalizers(); GC.Collect();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HoldGateAndSleep(Barrier b)
    {
        lock (Gate) { b.SignalAndWait(); Thread.Sleep(Timeout.Infinite); }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForGate(Barrier b)
    {
        b.SignalAndWait();
        new GateCache<int, string>(Gate).GetOrAdd(7, k => k.ToString());
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Nap() => Thread.Sleep(Timeout.Infinite);

    static void Main()
    {
        LeaveJunkInTheHeap();
        MakeSyncBlocks();
        var b = new Barrier(4);
        var threads = new List<Thread>
        {
            new(() => HoldGateAndSleep(b)) { Name = "GateHolder", IsBackground = true },
            new(() => WaitForGate(b)) { Name = "GateWaiter1", IsBackground = true },
            new(() => WaitForGate(b)) { Name = "GateWaiter2", IsBackground = true },
            new(Nap) { Name = "Napper", IsBackground = true },
        };
        foreach (var t in threads) t.Start();
        b.SignalAndWait();
        // Thread-pool workers that ran their work and now wait for more; a timer thread.
        using (var done = new CountdownEvent(4))
        {
            for (int i = 0; i < 4; i++) ThreadPool.QueueUserWorkItem(_ => { Thread.SpinWait(1000); done.Signal(); });
            done.Wait();
        }
        _timer = new Timer(_ => { }, null, TimeSpan.FromHours(1), TimeSpan.FromHours(1));
        Thread.Sleep(500);
        Console.WriteLine("ready");
        Console.Out.Flush();
        Thread.Sleep(Timeout.Infinite);
    }
}
