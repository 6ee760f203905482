// net8_generics: frames whose names .NET 8 keeps beyond a plain MethodDesc (issue 41 item 1).
//
// Every thread but Main waits on Gate, an event nobody sets, under a frame of one kind:
// - "ExactGeneric": Runner.Drive<Outer.Pair<Outer.Step>> — a generic method over a struct, its
//   own code (an InstantiatedMethodDesc with the exact type argument).
// - "SharedGeneric": Runner.Drive<string> — over a class, the shared code (System.__Canon).
// - "Emitted": a System.Reflection.Emit.DynamicMethod named WaitThroughEmitted (a DynamicMethodDesc,
//   its signature stored in it: WaitHandle, Int32*).
// - "Expression": an expression tree compiled to lambda_method1 (a DynamicMethodDesc too; it adds
//   to the call's result, so the call is no tail call and the lambda's frame stays).
// - "AsyncStart": RunAsync<int>, an async generic method blocking before its first await: the
//   state machine's MoveNext under AsyncMethodBuilderCore.Start<TStateMachine>.
// The heap holds Pointers, an Int32*[] (its element type a ParamTypeDesc).
// The truth: 5 threads wait on one event nobody will set; no lock, no deadlock.
using System;
using System.Collections.Generic;
using System.Linq.Expressions;
using System.Reflection.Emit;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;

namespace Knot.Samples.Net8Generics;

static class Outer
{
    public struct Step { public int N; }
    public struct Pair<T> { public T First; public T Second; }
}

static class Runner
{
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
    static readonly ManualResetEvent Gate = new(false);
    static readonly CountdownEvent Started = new(5);
    static readonly unsafe int*[] Pointers = new int*[3];

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void BlockOnGate()
    {
        Started.Signal();
        Gate.WaitOne();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void ExactGeneric()
    {
        var pair = new Outer.Pair<Outer.Step> { First = new Outer.Step { N = 1 }, Second = new Outer.Step { N = 2 } };
        Runner.Drive(ref pair, new List<Outer.Pair<Outer.Step>>(), BlockOnGate);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void SharedGeneric()
    {
        var name = "shared";
        Runner.Drive(ref name, new List<string>(), BlockOnGate);
    }

    unsafe delegate bool EmittedWait(WaitHandle handle, int* counter);

    [MethodImpl(MethodImplOptions.NoInlining)]
    static unsafe void Emitted()
    {
        var m = new DynamicMethod("WaitThroughEmitted", typeof(bool), new[] { typeof(WaitHandle), typeof(int*) }, typeof(Program).Module);
        var il = m.GetILGenerator();
        il.Emit(OpCodes.Call, typeof(Program).GetMethod(nameof(Signal))!);
        il.Emit(OpCodes.Ldarg_0);
        il.Emit(OpCodes.Callvirt, typeof(WaitHandle).GetMethod(nameof(WaitHandle.WaitOne), Type.EmptyTypes)!);
        il.Emit(OpCodes.Ret);
        var wait = (EmittedWait)m.CreateDelegate(typeof(EmittedWait));
        int counter = 0;
        wait(Gate, &counter);
    }

    public static void Signal() => Started.Signal();

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int BlockOnGateAndCount()
    {
        BlockOnGate();
        return 1;
    }

    // The lambda adds to the call's result, so the call is not its last act (no tail call: the
    // lambda's frame stays on the stack).
    [MethodImpl(MethodImplOptions.NoInlining)]
    static int FromExpression()
    {
        var body = Expression.Add(Expression.Call(typeof(Program).GetMethod(nameof(BlockOnGateAndCount))!), Expression.Constant(1));
        return Expression.Lambda<Func<int>>(body).Compile()();
    }

    static async Task<T> RunAsync<T>(T value)
    {
        BlockOnGate();
        await Task.Yield();
        return value;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void AsyncStart() => RunAsync(42).GetAwaiter().GetResult();

    static void Start(string name, ThreadStart body)
    {
        var t = new Thread(body, 1 << 20) { Name = name, IsBackground = true };
        t.Start();
    }

    static unsafe void Main()
    {
        Thread.CurrentThread.Name = "Main";
        Pointers[0] = null;
        Start("ExactGeneric", ExactGeneric);
        Start("SharedGeneric", SharedGeneric);
        Start("Emitted", Emitted);
        Start("Expression", () => FromExpression());
        Start("AsyncStart", AsyncStart);
        Started.Wait();
        Thread.Sleep(1500);
        GC.KeepAlive(Pointers);
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        Thread.Sleep(Timeout.Infinite);
    }
}
