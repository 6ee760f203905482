// unhandled_oom: a heap that fills its hard limit and nobody catches the OOM. Run under
// DOTNET_GCHeapHardLimit=0x2000000 (32 MiB): a named worker thread ("CacheLoader") keeps
// CacheEntry objects, each with a 16 KiB byte[] (small object heap), until the GC throws
// OutOfMemoryException; nothing catches it, so the runtime reports the unhandled exception,
// writes the dump itself (DOTNET_DbgEnableMiniDump=1, DOTNET_DbgMiniDumpType=2,
// DOTNET_DbgMiniDumpName) and aborts.
using System.Runtime.CompilerServices;

namespace Knot.Samples.UnhandledOom;

sealed class CacheEntry
{
    public long Key;
    public byte[] Payload;
    public CacheEntry(long key) { Key = key; Payload = new byte[16 * 1024]; }
}

static class Program
{
    static readonly List<CacheEntry> Cache = new();

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        var loader = new Thread(LoadCache) { Name = "CacheLoader" };
        loader.Start();
        loader.Join();
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void LoadCache()
    {
        for (long i = 0; ; i++) Cache.Add(new CacheEntry(i));
    }
}
