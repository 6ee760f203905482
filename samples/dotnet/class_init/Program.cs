// class_init: a deadlock through the runtime's class-initialisation lock.  "RegistryLoader" is the
// first to touch Registry, so it runs Registry's static constructor, which loads the entries under
// Settings.Gate (a Monitor).  "ConfigReader" holds Settings.Gate and reads Registry.Entries: the
// class is being initialised on another thread, so it waits for the initialiser to finish — while
// the initialiser waits for the Gate it holds.
using System.Runtime.CompilerServices;

namespace Knot.Samples.ClassInit;

static class Settings
{
    public static readonly object Gate = new();
    public static readonly string[] Names = ["region", "currency", "ledger"];
}

static class Registry
{
    public static readonly Dictionary<string, string> Entries;

    static Registry()
    {
        Program.InitialiserStarted.Set();
        Program.GateHeld.Wait();
        Entries = LoadEntries();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static Dictionary<string, string> LoadEntries()
    {
        Interlocked.Increment(ref Program.Blocked);
        lock (Settings.Gate)
        {
            return Settings.Names.ToDictionary(n => n, n => n.ToUpperInvariant());
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Warm() => Console.Error.WriteLine($"unreachable: {Entries.Count} entries");
}

static class Program
{
    public static readonly ManualResetEventSlim InitialiserStarted = new();
    public static readonly ManualResetEventSlim GateHeld = new();
    public static int Blocked;

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        var loader = new Thread(LoadRegistry, 256 * 1024) { Name = "RegistryLoader", IsBackground = true };
        var reader = new Thread(ReadConfig, 256 * 1024) { Name = "ConfigReader", IsBackground = true };
        loader.Start();
        reader.Start();
        while (Volatile.Read(ref Blocked) < 2)
            Thread.Sleep(10);
        Thread.Sleep(500);
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        loader.Join();
        reader.Join();
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void LoadRegistry() => Registry.Warm();

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void ReadConfig()
    {
        lock (Settings.Gate)
        {
            GateHeld.Set();
            InitialiserStarted.Wait();
            CountEntries();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static int CountEntries()
    {
        Interlocked.Increment(ref Blocked);
        return Registry.Entries.Count;
    }
}
