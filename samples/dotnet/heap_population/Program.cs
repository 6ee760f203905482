// heap_population: a known object population on the GC heap, and two Monitor locks on
// fields of named classes taken in opposite order (an ABBA deadlock on
// Inventory._gate and Ledger._gate), dumped with createdump --withheap.
//
// Population (kept alive by static fields): 1000 Order (each with a string Id),
// 500 Customer, 200 int[100], a List<Order>, a Dictionary<string, Customer>, one
// byte[1_000_000] on the LOH, one pinned byte[10_000] on the POH (GC.AllocateArray).
// Run with DOTNET_GCHeapHardLimitPercent=0x32 (50 % of physical memory): a heap hard
// limit from a setting, with no GCHeapHardLimit value.
using System.Runtime.CompilerServices;

namespace Knot.Samples.HeapPopulation;

sealed class Order
{
    public string Id;
    public int Quantity;
    public Order(int i) { Id = "order-" + i; Quantity = i; }
}

sealed class Customer
{
    public string Name = "customer";
    public long Credit;
}

sealed class Inventory
{
    public string Tag = "inventory";
    private readonly object _gate = new();
    public object Gate => _gate;
}

sealed class Ledger
{
    public string Tag = "ledger";
    private readonly object _gate = new();
    public object Gate => _gate;
}

static class Program
{
    static readonly List<Order> Orders = new();
    static readonly Dictionary<string, Customer> Customers = new();
    static readonly List<int[]> Buckets = new();
    static byte[] Big = Array.Empty<byte>();
    static byte[] Pinned = Array.Empty<byte>();
    static readonly Inventory Stock = new();
    static readonly Ledger Books = new();
    static readonly Barrier BothHeld = new(3);

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        Populate();
        var a = new Thread(HoldInventoryThenLedger) { Name = "StockWorker", IsBackground = true };
        var b = new Thread(HoldLedgerThenInventory) { Name = "BooksWorker", IsBackground = true };
        a.Start();
        b.Start();
        BothHeld.SignalAndWait();
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        a.Join();
        b.Join();
        GC.KeepAlive(Big);
        GC.KeepAlive(Pinned);
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Populate()
    {
        for (int i = 0; i < 1000; i++) Orders.Add(new Order(i));
        for (int i = 0; i < 500; i++) Customers["c" + i] = new Customer { Credit = i };
        for (int i = 0; i < 200; i++) Buckets.Add(new int[100]);
        Big = new byte[1_000_000];
        Pinned = GC.AllocateArray<byte>(10_000, pinned: true);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HoldInventoryThenLedger()
    {
        lock (Stock.Gate)
        {
            BothHeld.SignalAndWait();
            WaitForLedger();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForLedger()
    {
        lock (Books.Gate) { Console.Error.WriteLine("unreachable"); }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HoldLedgerThenInventory()
    {
        lock (Books.Gate)
        {
            BothHeld.SignalAndWait();
            WaitForInventory();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForInventory()
    {
        lock (Stock.Gate) { Console.Error.WriteLine("unreachable"); }
    }
}
