// timed_waits: waits at runtime transitions, generic frames over nested types, and a poller
// (issue #30 items 5, 6 and 7).
//
// - Every wait is one of the runtime's P/Invoke or FCALL waits under an InlinedCallFrame
//   (Thread.Sleep, WaitHandle.WaitOneNoCheck, Monitor.Enter_Slowpath): SOS gives the managed
//   frame above each the record's return address.
// - Three threads wait inside Runner.Drive<T>(ref T, List<T>, Action), instantiated over nested
//   structs (Outer+Step, Outer+Pair<Outer+Step>): SOS prints a type argument in the parameter
//   list by the nested type's own name (`Step ByRef`, `List`1<Pair`1<Step>>`).
// - Poller is a dedicated thread whose body is a periodic loop around Stop.WaitOne(1000), an
//   event nobody sets: idle, not blocked.
// - The boundary: GateHolder makes the same timed wait (Signal.WaitOne(600 s)) while holding
//   GateLock, which GateWaiter1/2 wait for; Watcher waits on Never.WaitOne() with no timeout in
//   a loop of its own; Requester waits with a timeout for a reply deep inside a request. Each
//   of these waits for something: they stay blocked.
// - Main and StepSleeper sleep (Thread.Sleep).
// The truth: 5 threads blocked (GateWaiter1, GateWaiter2, GateHolder, Watcher, Requester), on 1
// lock with waiters (GateLock).
using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Knot.Samples.TimedWaits;

sealed class GateLock { }

static class Outer
{
    public struct Step { public int N; }
    public struct Pair<T> { public T First; public T Second; }
}

static class Runner
{
    // A generic method over a value type: its code is not shared, so SOS names the exact
    // instantiation and prints the type argument in the parameter list by its own name.
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Drive<T>(ref T state, List<T> seen, Action wait)
    {
        seen.Add(state);
        wait();
        return seen.Count;
    }
}

static class Program
{
    static readonly GateLock Gate = new();
    static readonly ManualResetEvent Stop = new(false);
    static readonly AutoResetEvent Signal = new(false);
    static readonly ManualResetEvent Never = new(false);
    static readonly ManualResetEvent Reply = new(false);
    static readonly CountdownEvent Started = new(6);
    static int _ticks;

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Tick() => Interlocked.Increment(ref _ticks);

    // A periodic loop: the thread's whole body.
    [MethodImpl(MethodImplOptions.NoInlining)]
    static void PollLoop()
    {
        Started.Signal();
        while (true)
        {
            Tick();
            Stop.WaitOne(1000);
        }
    }

    // The same kind of loop, waiting without a timeout.
    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WatchLoop()
    {
        Started.Signal();
        while (true)
        {
            Never.WaitOne();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void AwaitReply() => Reply.WaitOne(600_000);

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HandleRequest()
    {
        Started.Signal();
        AwaitReply();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HoldGateAndWait()
    {
        lock (Gate)
        {
            var pair = new Outer.Pair<Outer.Step> { First = new Outer.Step { N = 1 }, Second = new Outer.Step { N = 2 } };
            Started.Signal();
            Runner.Drive(ref pair, new List<Outer.Pair<Outer.Step>>(), () => Signal.WaitOne(600_000));
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForGate()
    {
        lock (Gate)
        {
            Tick();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void StepAndSleep()
    {
        var step = new Outer.Step { N = 3 };
        Started.Signal();
        Runner.Drive(ref step, new List<Outer.Step>(), () => Thread.Sleep(Timeout.Infinite));
    }

    static Thread Start(string name, ThreadStart body)
    {
        var t = new Thread(body, 1 << 20) { Name = name, IsBackground = true };
        t.Start();
        return t;
    }

    static void Main()
    {
        Thread.CurrentThread.Name = "Main";
        Start("Poller", PollLoop);
        Start("Watcher", WatchLoop);
        Start("Requester", HandleRequest);
        Start("GateHolder", HoldGateAndWait);
        Start("StepSleeper", StepAndSleep);
        Started.Signal();
        Started.Wait();
        Start("GateWaiter1", WaitForGate);
        Start("GateWaiter2", WaitForGate);
        // Let the waiters reach the monitor's slow path.
        Thread.Sleep(1500);
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        Thread.Sleep(Timeout.Infinite);
    }
}
