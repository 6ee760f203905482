// rwlock_writer: a writer stuck for good behind three readers of a ReaderWriterLockSlim.
// "Quote-1" and "Quote-2" hold PriceBook.Lock for reading, "Auditor" holds it in upgradeable read
// mode; each then waits, still holding it, for PriceBook.Journal's Monitor.  "Repricer" holds the
// Journal and blocks in EnterWriteLock: a writer waits until every reader has left.  "Quote-late"
// comes after the writer queued and blocks in EnterReadLock behind it (a waiting writer keeps new
// readers out).  The readers wait for the writer's Monitor, the writer for the readers: a deadlock
// through the lock's readers (all of them must leave before the writer can enter).
using System.Runtime.CompilerServices;

namespace Knot.Samples.RwlockWriter;

static class PriceBook
{
    public static readonly ReaderWriterLockSlim Lock = new(LockRecursionPolicy.NoRecursion);
    public static readonly object Journal = new();
}

static class Program
{
    const int Readers = 3;
    static readonly CountdownEvent ReadersIn = new(Readers);
    static readonly ManualResetEventSlim JournalHeld = new();
    static int _blocked;

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        var threads = new List<Thread>
        {
            new(() => ReadQuotes(1), 256 * 1024) { Name = "Quote-1", IsBackground = true },
            new(() => ReadQuotes(2), 256 * 1024) { Name = "Quote-2", IsBackground = true },
            new(Audit, 256 * 1024) { Name = "Auditor", IsBackground = true },
        };
        foreach (var t in threads)
            t.Start();
        var writer = new Thread(Reprice, 256 * 1024) { Name = "Repricer", IsBackground = true };
        threads.Add(writer);
        writer.Start();
        // The writer queues on the lock before the late reader comes.
        while (PriceBook.Lock.WaitingWriteCount < 1)
            Thread.Sleep(10);
        var late = new Thread(ReadLate, 256 * 1024) { Name = "Quote-late", IsBackground = true };
        threads.Add(late);
        late.Start();
        while (PriceBook.Lock.WaitingReadCount < 1 || Volatile.Read(ref _blocked) < Readers)
            Thread.Sleep(10);
        Thread.Sleep(500);
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        foreach (var t in threads)
            t.Join();
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void ReadQuotes(int id)
    {
        PriceBook.Lock.EnterReadLock();
        try
        {
            ReadersIn.Signal();
            JournalHeld.Wait();
            NoteInJournal($"Quote-{id}");
        }
        finally
        {
            PriceBook.Lock.ExitReadLock();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Audit()
    {
        PriceBook.Lock.EnterUpgradeableReadLock();
        try
        {
            ReadersIn.Signal();
            JournalHeld.Wait();
            NoteInJournal("Auditor");
        }
        finally
        {
            PriceBook.Lock.ExitUpgradeableReadLock();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void NoteInJournal(string who)
    {
        Interlocked.Increment(ref _blocked);
        lock (PriceBook.Journal)
        {
            Console.Error.WriteLine($"unreachable: {who} wrote to the journal");
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Reprice()
    {
        ReadersIn.Wait();
        lock (PriceBook.Journal)
        {
            JournalHeld.Set();
            WritePrices();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WritePrices()
    {
        PriceBook.Lock.EnterWriteLock();
        try
        {
            Console.Error.WriteLine("unreachable: Repricer wrote the prices");
        }
        finally
        {
            PriceBook.Lock.ExitWriteLock();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void ReadLate()
    {
        PriceBook.Lock.EnterReadLock();
        try
        {
            Console.Error.WriteLine("unreachable: Quote-late read the prices");
        }
        finally
        {
            PriceBook.Lock.ExitReadLock();
        }
    }
}
