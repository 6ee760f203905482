// gc_stall: six threads allocate and replace live objects, the heap kept near its hard limit
// (run under DOTNET_GCHeapHardLimit, non-concurrent GC), so that the process spends its time in
// blocking collections: at any moment one thread collects and the others wait for it.
// Args: LIVE_MIB (the live set, all threads together; default 24) and THREADS (default 6).
// Each "Churn-N" thread keeps its share of the live set in 8 KiB byte arrays (zero-filled: the
// dump compresses well) and replaces one after another for ever. Main prints `ready` once every
// thread has filled its share, then joins the first.
using System.Runtime.CompilerServices;

namespace Knot.Samples.GcStall;

static class Program
{
    const int PayloadBytes = 8 * 1024;
    static readonly CountdownEvent Filled = new(1);

    static int Main(string[] args)
    {
        Thread.CurrentThread.Name = "Main";
        int liveMib = args.Length > 0 ? int.Parse(args[0]) : 24;
        int threads = args.Length > 1 ? int.Parse(args[1]) : 6;
        int perThread = liveMib * 1024 * 1024 / PayloadBytes / threads;
        Filled.Reset(threads);
        var workers = new Thread[threads];
        for (int i = 0; i < threads; i++)
        {
            int id = i;
            workers[i] = new Thread(() => Churn(id, perThread), 1 << 20) { Name = $"Churn-{i}", IsBackground = true };
            workers[i].Start();
        }
        Filled.Wait();
        Console.WriteLine("ready");
        Console.Out.Flush();
        workers[0].Join();
        return 0;
    }

    /// Fills `slots` payloads, then replaces them one by one (a cache that never stops turning over).
    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Churn(int id, int slots)
    {
        var live = new byte[slots][];
        for (int i = 0; i < slots; i++) live[i] = Allocate();
        Filled.Signal();
        var rng = new Random(id);
        while (true) live[rng.Next(slots)] = Allocate();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static byte[] Allocate() => new byte[PayloadBytes];
}
