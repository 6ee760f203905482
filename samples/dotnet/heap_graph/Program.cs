// heap_graph: objects whose retention is known by construction, for `knot heap root`
// (SOS gcroot) and the object graph. Each kind of holder keeps objects of its own type, so
// `dumpheap -type` finds them and `gcroot` says what holds them:
//
//   StrongHeld          only a strong handle (GCHandle.Alloc; the GCHandle kept as an IntPtr)
//   PinnedCell[]        only a pinned handle (GCHandle.Alloc(.., Pinned))
//   ThreadLocalHeld     only a local of the thread "Parker", parked in Monitor.Wait
//   FReachable          only the finalization queue: 3 finalizable objects dropped after the
//                       finalizer thread was made to block in Blocker's finalizer, then a GC
//   StaticHeld          only the static field Registry.s_held
//   Subscriber          5 of them, only through the event Publisher.Changed of the static
//                       Registry.s_publisher
//   TreeNode            a tree (depth 4, 3 children each: 1 + 3 + 9 + 27 = 40 nodes, each
//                       with a 16-byte Payload byte[]) from the static Registry.s_tree
//   CwtValue            only a ConditionalWeakTable entry (a dependent handle) whose key
//                       CwtKey is held by Registry.s_key
//
// Everything is made in [NoInlining] methods that return, so no live frame holds them
// (Parker's local aside); Main then sleeps.
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

namespace Knot.Samples.HeapGraph;

sealed class StrongHeld { public long Mark = 0x5354524f4e47; }
struct PinnedCell { public long A; public long B; }
sealed class ThreadLocalHeld { public long Mark = 0x4c4f43414c; }
sealed class StaticHeld { public string Name = "static"; }
sealed class CwtKey { public int Id = 1; }
sealed class CwtValue { public string Name = "cwt-value"; }

sealed class FReachable
{
    public byte[] Data = new byte[32];
    ~FReachable() { GC.KeepAlive(Data); }
}

sealed class Blocker
{
    public static readonly ManualResetEventSlim Entered = new(false);
    static readonly object Never = new();
    ~Blocker()
    {
        Entered.Set();
        // The finalizer thread stays here: the f-reachable queue is never drained.
        lock (Never) { Monitor.Wait(Never); }
    }
}

sealed class Publisher
{
    public event EventHandler? Changed;
    public void Raise() => Changed?.Invoke(this, EventArgs.Empty);
}

sealed class Subscriber
{
    public int Id;
    public int Seen;
    public void OnChanged(object? sender, EventArgs e) => Seen++;
}

sealed class TreeNode
{
    public TreeNode[] Children = Array.Empty<TreeNode>();
    public byte[] Payload = new byte[16];
}

static class Registry
{
    public static StaticHeld? s_held;
    public static Publisher? s_publisher;
    public static TreeNode? s_tree;
    public static CwtKey? s_key;
    public static readonly ConditionalWeakTable<CwtKey, CwtValue> s_table = new();
    // Handles kept as plain integers: they hold nothing themselves.
    public static IntPtr s_strong;
    public static IntPtr s_pinned;
}

static class Program
{
    static readonly object ParkGate = new();
    static int s_parked;

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        BlockFinalizer();
        MakeFReachable();
        MakeStatics();
        MakeHandles();
        var parker = new Thread(Park) { Name = "Parker", IsBackground = true };
        parker.Start();
        while (Volatile.Read(ref s_parked) == 0) Thread.Sleep(10);
        lock (ParkGate) { }
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        Thread.Sleep(Timeout.Infinite);
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void BlockFinalizer()
    {
        NewBlocker();
        GC.Collect();
        Blocker.Entered.Wait();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void NewBlocker() => _ = new Blocker();

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void MakeFReachable()
    {
        NewFReachable();
        // They are unreachable now: the GC moves them to the f-reachable queue, and the
        // finalizer thread (blocked in ~Blocker) never runs their finalizers.
        GC.Collect();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void NewFReachable()
    {
        for (int i = 0; i < 3; i++) _ = new FReachable();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void MakeStatics()
    {
        Registry.s_held = new StaticHeld();
        var p = new Publisher();
        for (int i = 0; i < 5; i++)
        {
            var s = new Subscriber { Id = i };
            p.Changed += s.OnChanged;
        }
        p.Raise();
        Registry.s_publisher = p;
        Registry.s_tree = Tree(4);
        var key = new CwtKey();
        Registry.s_table.Add(key, new CwtValue());
        Registry.s_key = key;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static TreeNode Tree(int depth)
    {
        var n = new TreeNode();
        if (depth > 1)
        {
            n.Children = new TreeNode[3];
            for (int i = 0; i < 3; i++) n.Children[i] = Tree(depth - 1);
        }
        return n;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void MakeHandles()
    {
        Registry.s_strong = GCHandle.ToIntPtr(GCHandle.Alloc(new StrongHeld()));
        Registry.s_pinned = GCHandle.ToIntPtr(GCHandle.Alloc(new PinnedCell[4], GCHandleType.Pinned));
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Park()
    {
        var local = new ThreadLocalHeld();
        lock (ParkGate)
        {
            Volatile.Write(ref s_parked, 1);
            // Parked for good: the only reference to `local` is this frame's.
            Monitor.Wait(ParkGate);
        }
        GC.KeepAlive(local);
    }
}
