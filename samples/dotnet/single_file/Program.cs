// monitor_abba: two managed threads deadlock on two Monitor locks taken in
// opposite order.  "LedgerWorker" holds a LedgerLock and wants an AuditLock;
// "AuditWorker" holds the AuditLock and wants the LedgerLock.
//
// Before the wedge, a known population of the app's own types (kept alive by statics), with
// counts no runtime type is likely to share, so that a reading without the app's metadata (a
// single-file dump has none) can still be checked row by row against the same program run
// framework-dependent (make-dump.sh): 1009 Order, 503 Customer (in a List<Order> and a
// Dictionary<string, Customer>), 37 Slot[64], one Slot[6000] on the LOH and one pinned
// Slot[640] on the POH.
using System.Runtime.CompilerServices;

namespace Knot.Samples.SingleFile;

sealed class LedgerLock { public string Name = "ledger"; }
sealed class AuditLock { public string Name = "audit"; }

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

struct Slot
{
    public long A;
    public int B;
}

static class Program
{
    static readonly LedgerLock Ledger = new();
    static readonly AuditLock Audit = new();
    // 3 participants: both workers (each holding its first lock) and main.
    static readonly Barrier BothHeld = new(3);
    static readonly List<Order> Orders = new();
    static readonly Dictionary<string, Customer> Customers = new();
    static readonly List<Slot[]> Slots = new();
    static Slot[] Big = Array.Empty<Slot>();
    static Slot[] Pinned = Array.Empty<Slot>();

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        Populate();
        var ledger = new Thread(HoldLedgerThenAudit) { Name = "LedgerWorker", IsBackground = true };
        var audit = new Thread(HoldAuditThenLedger) { Name = "AuditWorker", IsBackground = true };
        ledger.Start();
        audit.Start();
        BothHeld.SignalAndWait();
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        WaitForWorkers(ledger, audit);
        GC.KeepAlive(Big);
        GC.KeepAlive(Pinned);
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Populate()
    {
        for (int i = 0; i < 1009; i++) Orders.Add(new Order(i));
        for (int i = 0; i < 503; i++) Customers["c" + i] = new Customer { Credit = i };
        for (int i = 0; i < 37; i++) Slots.Add(new Slot[64]);
        Big = new Slot[6000];
        Pinned = GC.AllocateArray<Slot>(640, pinned: true);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForWorkers(Thread a, Thread b)
    {
        a.Join();
        b.Join();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HoldLedgerThenAudit()
    {
        lock (Ledger)
        {
            BothHeld.SignalAndWait();
            WaitForAuditLock();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForAuditLock()
    {
        lock (Audit)
        {
            Console.Error.WriteLine("unreachable: LedgerWorker got AuditLock");
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HoldAuditThenLedger()
    {
        lock (Audit)
        {
            BothHeld.SignalAndWait();
            WaitForLedgerLock();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForLedgerLock()
    {
        lock (Ledger)
        {
            Console.Error.WriteLine("unreachable: AuditWorker got LedgerLock");
        }
    }
}
