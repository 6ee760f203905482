// cache_leak: a console service whose main thread waits for a command on stdin (Console.ReadLine,
// stdin kept open) while a static cache holds nearly all of its heap — the shape of issue #30's
// item 9: the verdict is BLOCKED ON I/O, and the leak must be said beside it.
//
// - ReportCache.s_reports, a static Dictionary<string, CachedReport>, holds 4000 reports, each with
//   its own byte[8192] body (filled with a pattern, so the dump compresses): ~32 MiB, about 97 %
//   of the heap, retained by the dictionary alone.
// - Main prints `ready`, then blocks in Console.ReadLine (make-dumps.sh opens the job's FIFO
//   read-write as stdin, so the read never ends).
using System.Runtime.CompilerServices;

namespace Knot.Samples.CacheLeak;

sealed class CachedReport
{
    public string Key;
    public long BuiltTicks;
    public byte[] Body;
    public CachedReport(string key, int i)
    {
        Key = key;
        BuiltTicks = i;
        Body = new byte[8192];
        Array.Fill(Body, (byte)(i & 0x7f));
    }
}

static class ReportCache
{
    public static readonly Dictionary<string, CachedReport> s_reports = new();
}

static class Program
{
    public const int Reports = 4000;

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        FillCache();
        GC.Collect();
        GC.WaitForPendingFinalizers();
        GC.Collect();
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        return WaitForCommand();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void FillCache()
    {
        for (int i = 0; i < Reports; i++)
        {
            string key = "report-" + i.ToString("D5");
            ReportCache.s_reports[key] = new CachedReport(key, i);
        }
    }

    /// The service's command loop: one line per command, until stdin closes.
    [MethodImpl(MethodImplOptions.NoInlining)]
    static int WaitForCommand()
    {
        string? line;
        while ((line = Console.ReadLine()) != null)
        {
            if (line == "quit") return 0;
            Console.Out.WriteLine(ReportCache.s_reports.TryGetValue(line, out var r) ? r.Body.Length.ToString() : "none");
        }
        return 0;
    }
}
