// pinvoke_mutex: a cycle that crosses a managed Monitor and a native pthread
// mutex.  "NativeHolder" takes the native mutex (knot_lock) and then blocks in
// `lock (Registry)`; "MonitorHolder" holds Registry's monitor and blocks inside
// the P/Invoke knot_lock() on the pthread mutex NativeHolder owns.
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

namespace Knot.Samples.PInvokeMutex;

sealed class RegistryLock { public string Name = "registry"; }

static class Native
{
    [DllImport("knotmutex", EntryPoint = "knot_lock")]
    public static extern int KnotLock();

    [DllImport("knotmutex", EntryPoint = "knot_unlock")]
    public static extern int KnotUnlock();

    [DllImport("knotmutex", EntryPoint = "knot_mutex_address")]
    public static extern IntPtr KnotMutexAddress();
}

static class Program
{
    static readonly RegistryLock Registry = new();
    static readonly Barrier BothHeld = new(3);

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        // For the oracle: where the (malloc'd) pthread_mutex_t lives.
        Console.Error.WriteLine($"knot_mutex=0x{Native.KnotMutexAddress():x}");
        var native = new Thread(HoldNativeMutexThenMonitor) { Name = "NativeHolder", IsBackground = true };
        var monitor = new Thread(HoldMonitorThenNativeMutex) { Name = "MonitorHolder", IsBackground = true };
        native.Start();
        monitor.Start();
        BothHeld.SignalAndWait();
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        WaitForWorkers(native, monitor);
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForWorkers(Thread a, Thread b)
    {
        a.Join();
        b.Join();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HoldNativeMutexThenMonitor()
    {
        if (Native.KnotLock() != 0) throw new InvalidOperationException("knot_lock failed");
        BothHeld.SignalAndWait();
        WaitForRegistryMonitor();
        Native.KnotUnlock();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForRegistryMonitor()
    {
        lock (Registry)
        {
            Console.Error.WriteLine("unreachable: NativeHolder got the Registry monitor");
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HoldMonitorThenNativeMutex()
    {
        lock (Registry)
        {
            BothHeld.SignalAndWait();
            WaitForNativeMutex();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForNativeMutex()
    {
        Native.KnotLock();
        Console.Error.WriteLine("unreachable: MonitorHolder got the native mutex");
        Native.KnotUnlock();
    }
}
