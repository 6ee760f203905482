// big_heap: fills the GC heap to about MIB mebibytes (first argument, default 2048) with a
// known mix kept alive by one list, prints "ready" and sleeps; `cargo xtask bench dotnet-heap`
// dumps it with createdump --withheap and times knot against SOS `dumpheap -stat` on the dump.
// Not a committed sample: the dump is gigabytes.
using System.Runtime.CompilerServices;

namespace Knot.Samples.BigHeap;

sealed class Node
{
    public long Id;
    public byte[] Payload;
    public Node? Next;
    public Node(long id, Node? next) { Id = id; Payload = new byte[(int)(id % 96)]; Next = next; }
}

sealed class Record
{
    public string Name;
    public int[] Values;
    public Record(long i) { Name = "record-" + i; Values = new int[(int)(i % 16)]; }
}

static class Program
{
    static readonly List<object> Keep = new();

    static int Main(string[] args)
    {
        long mib = args.Length > 0 ? long.Parse(args[0]) : 2048;
        Fill(mib << 20);
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        Thread.Sleep(Timeout.Infinite);
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Fill(long bytes)
    {
        Node? last = null;
        for (long i = 0; GC.GetTotalMemory(false) < bytes; i++)
        {
            for (int j = 0; j < 4096; j++, i++)
            {
                last = new Node(i, (i & 7) == 0 ? null : last);
                if ((i & 3) == 0) Keep.Add(new Record(i));
                if ((i & 7) == 0) Keep.Add(last);
                if (i % 100_000 == 0) Keep.Add(new byte[100_000]);
            }
        }
        Keep.Add(last!);
    }
}
