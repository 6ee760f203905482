// monitor_abba: two managed threads deadlock on two Monitor locks taken in
// opposite order.  "LedgerWorker" holds a LedgerLock and wants an AuditLock;
// "AuditWorker" holds the AuditLock and wants the LedgerLock.
using System.Runtime.CompilerServices;

namespace Knot.Samples.Net9Abba;

sealed class LedgerLock { public string Name = "ledger"; }
sealed class AuditLock { public string Name = "audit"; }

static class Program
{
    static readonly LedgerLock Ledger = new();
    static readonly AuditLock Audit = new();
    // 3 participants: both workers (each holding its first lock) and main.
    static readonly Barrier BothHeld = new(3);

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        var ledger = new Thread(HoldLedgerThenAudit) { Name = "LedgerWorker", IsBackground = true };
        var audit = new Thread(HoldAuditThenLedger) { Name = "AuditWorker", IsBackground = true };
        ledger.Start();
        audit.Start();
        BothHeld.SignalAndWait();
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        WaitForWorkers(ledger, audit);
        return 0;
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
