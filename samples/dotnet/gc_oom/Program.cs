// gc_oom: a heap that fills its hard limit. Run under DOTNET_GCHeapHardLimit=0x4000000
// (64 MiB): the "Cache" keeps CacheEntry objects, each with a 32 KiB byte[] (small object
// heap), until the GC throws OutOfMemoryException; the program catches it and calls
// Environment.FailFast, and the runtime writes the dump itself
// (DOTNET_DbgEnableMiniDump=1, DOTNET_DbgMiniDumpType=2, DOTNET_DbgMiniDumpName).
using System.Runtime.CompilerServices;

namespace Knot.Samples.GcOom;

sealed class CacheEntry
{
    public long Key;
    public byte[] Payload;
    public CacheEntry(long key) { Key = key; Payload = new byte[32 * 1024]; }
}

static class Program
{
    static readonly List<CacheEntry> Cache = new();

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        try
        {
            Fill();
        }
        catch (OutOfMemoryException)
        {
            FailOnOom();
        }
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Fill()
    {
        for (long i = 0; ; i++) Cache.Add(new CacheEntry(i));
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void FailOnOom()
    {
        Environment.FailFast($"out of memory with {Cache.Count} cache entries");
    }
}
