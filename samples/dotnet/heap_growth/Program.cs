// heap_growth: retention known by construction, and one process dumped twice an allocation
// burst apart (for `knot heap diff`).
//
// - SessionCache.s_all, a static Dictionary<Guid, Session>, holds 2000 Sessions before the burst
//   and 6000 after it; each Session (Guid, long, byte[]) owns its byte[1000] payload alone. It is
//   the heap's largest holder: the leak suspect.
// - Forest.s_root, a static complete binary tree of TreeNode of depth 10 (1023 nodes), each with
//   its own int[16]: tree-shaped, so what SOS `objsize` says the root reaches is what it retains.
// - 100 Junk objects (and the List that held them) are left unreachable before each dump:
//   garbage the GC has not collected.
//
// Usage: heap_growth TRIGGER_FILE. Prints `ready` when the first state is built; once
// TRIGGER_FILE exists it allocates the burst and prints `ready2`; then sleeps forever.
using System.Runtime.CompilerServices;

namespace Knot.Samples.HeapGrowth;

sealed class Session
{
    public Guid Id;
    public long CreatedTicks;
    public byte[] Payload;
    public Session(int i) { Id = new Guid(i, 0, 0, new byte[8]); CreatedTicks = i; Payload = new byte[1000]; }
}

static class SessionCache
{
    public static readonly Dictionary<Guid, Session> s_all = new();
}

sealed class TreeNode
{
    public TreeNode? Left;
    public TreeNode? Right;
    public int[] Data = new int[16];
}

static class Forest
{
    public static TreeNode? s_root;
}

sealed class Junk
{
    public long A, B;
}

static class Program
{
    public const int Before = 2000;
    public const int After = 6000;
    public const int Depth = 10;

    static int Main(string[] args)
    {
        Thread.CurrentThread.Name = "Main";
        string trigger = args.Length > 0 ? args[0] : "go";
        Forest.s_root = Grow(Depth);
        AddSessions(0, Before);
        Settle();
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        while (!File.Exists(trigger)) Thread.Sleep(50);
        AddSessions(Before, After);
        Settle();
        Console.Out.WriteLine("ready2");
        Console.Out.Flush();
        Thread.Sleep(Timeout.Infinite);
        return 0;
    }

    /// A full GC (so the only garbage is the Junk left after it), then the Junk.
    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Settle()
    {
        GC.Collect();
        GC.WaitForPendingFinalizers();
        GC.Collect();
        MakeJunk();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void MakeJunk()
    {
        var list = new List<Junk>(100);
        for (int i = 0; i < 100; i++) list.Add(new Junk { A = i });
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void AddSessions(int from, int to)
    {
        for (int i = from; i < to; i++)
        {
            var s = new Session(i);
            SessionCache.s_all[s.Id] = s;
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static TreeNode Grow(int depth)
    {
        var n = new TreeNode();
        if (depth > 1)
        {
            n.Left = Grow(depth - 1);
            n.Right = Grow(depth - 1);
        }
        return n;
    }
}
