// unhandled_exception: a named worker thread ("OrderImporter") fails to parse
// a quantity (int.Parse throws FormatException), wraps it in an
// InvalidOperationException and lets that escape the thread: the runtime
// reports the unhandled exception, writes the dump itself
// (DOTNET_DbgEnableMiniDump=1) and aborts.
using System.Runtime.CompilerServices;

namespace Knot.Samples.UnhandledException;

static class Program
{
    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        var importer = new Thread(ImportOrders) { Name = "OrderImporter" };
        importer.Start();
        importer.Join();
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void ImportOrders()
    {
        try
        {
            ParseQuantity("twelve");
        }
        catch (FormatException e)
        {
            throw new InvalidOperationException("order 42 could not be imported", e);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static int ParseQuantity(string text) => int.Parse(text);
}
