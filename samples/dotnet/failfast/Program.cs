// failfast: the production crash-dump path.  Same ABBA Monitor deadlock as
// monitor_abba; then a "Watchdog" thread notices and calls
// Environment.FailFast("wedged"), so the runtime writes the dump itself
// (DOTNET_DbgEnableMiniDump=1, DOTNET_DbgMiniDumpType, DOTNET_DbgMiniDumpName).
using System.Runtime.CompilerServices;

namespace Knot.Samples.FailFast;

sealed class LedgerLock { public string Name = "ledger"; }
sealed class AuditLock { public string Name = "audit"; }

static class Program
{
    static readonly LedgerLock Ledger = new();
    static readonly AuditLock Audit = new();
    static readonly Barrier BothHeld = new(3);

    static int Main(string[] args)
    {
        Thread.CurrentThread.Name = "Main";
        int delayMs = args.Length > 0 ? int.Parse(args[0]) : 1500;
        var ledger = new Thread(HoldLedgerThenAudit) { Name = "LedgerWorker", IsBackground = true };
        var audit = new Thread(HoldAuditThenLedger) { Name = "AuditWorker", IsBackground = true };
        ledger.Start();
        audit.Start();
        BothHeld.SignalAndWait();
        var watchdog = new Thread(() => WatchdogFailFast(delayMs)) { Name = "Watchdog", IsBackground = true };
        watchdog.Start();
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        WaitForWorkers(ledger, audit);
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WatchdogFailFast(int delayMs)
    {
        Thread.Sleep(delayMs);
        Environment.FailFast("wedged: LedgerWorker and AuditWorker are deadlocked");
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
