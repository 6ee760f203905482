// lock_abba: ABBA deadlock on two System.Threading.Lock instances (.NET 9+
// `Lock`; `lock (x)` on a Lock compiles to Lock.EnterScope(), not Monitor).
// "OrdersWorker" holds OrdersGate.Gate and wants InventoryGate.Gate;
// "InventoryWorker" holds InventoryGate.Gate and wants OrdersGate.Gate.
using System.Runtime.CompilerServices;

namespace Knot.Samples.LockAbba;

sealed class OrdersGate { public readonly Lock Gate = new(); }
sealed class InventoryGate { public readonly Lock Gate = new(); }

static class Program
{
    static readonly OrdersGate Orders = new();
    static readonly InventoryGate Inventory = new();
    static readonly Barrier BothHeld = new(3);

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        var orders = new Thread(HoldOrdersThenInventory) { Name = "OrdersWorker", IsBackground = true };
        var inventory = new Thread(HoldInventoryThenOrders) { Name = "InventoryWorker", IsBackground = true };
        orders.Start();
        inventory.Start();
        BothHeld.SignalAndWait();
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        WaitForWorkers(orders, inventory);
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForWorkers(Thread a, Thread b)
    {
        a.Join();
        b.Join();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HoldOrdersThenInventory()
    {
        lock (Orders.Gate)
        {
            BothHeld.SignalAndWait();
            WaitForInventoryLock();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForInventoryLock()
    {
        lock (Inventory.Gate)
        {
            Console.Error.WriteLine("unreachable: OrdersWorker got the inventory lock");
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HoldInventoryThenOrders()
    {
        lock (Inventory.Gate)
        {
            BothHeld.SignalAndWait();
            WaitForOrdersLock();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForOrdersLock()
    {
        lock (Orders.Gate)
        {
            Console.Error.WriteLine("unreachable: InventoryWorker got the orders lock");
        }
    }
}
