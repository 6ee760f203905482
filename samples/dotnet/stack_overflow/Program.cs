// stack_overflow: a named worker thread ("RingWalker", 256 KiB stack) follows a
// ring of nodes that never ends: VisitNode -> ResolveNext -> MapRing ->
// VisitNode ... until the stack overflows. The runtime prints the repeated
// frames, writes the dump itself (DOTNET_DbgEnableMiniDump=1) and aborts.
using System.Runtime.CompilerServices;

namespace Knot.Samples.StackOverflow;

sealed class Node
{
    public int Id;
    public Node? Next;
}

static class Program
{
    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        var a = new Node { Id = 1 };
        var b = new Node { Id = 2, Next = a };
        a.Next = b;
        var walker = new Thread(() => VisitNode(a, 0), 256 << 10) { Name = "RingWalker" };
        walker.Start();
        walker.Join();
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static int VisitNode(Node node, int depth) => ResolveNext(node, depth + 1) + 1;

    [MethodImpl(MethodImplOptions.NoInlining)]
    static int ResolveNext(Node node, int depth) => MapRing(node.Next!, depth) + node.Id;

    [MethodImpl(MethodImplOptions.NoInlining)]
    static int MapRing(Node next, int depth) => VisitNode(next, depth);
}
