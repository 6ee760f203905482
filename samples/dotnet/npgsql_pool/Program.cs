// npgsql_pool: a deadlock through Npgsql's connection pool (Maximum Pool Size=4, Timeout=0: a
// rent waits for ever).  Four "Request-N" threads each open a pooled connection (all four the pool
// may have) and, holding it, wait for the ledger's lock.  "Reconciler" holds the ledger's lock and
// opens a connection with the synchronous Open(): the pool is at its maximum, so it waits for one
// of the four to come back — which none will, each waiting for the Reconciler's lock.
//
// The database is a real PostgreSQL (make-dumps.sh starts the local cluster and gives it a role
// and a database for this user); the connection string comes from KNOT_PG, else the local
// cluster's Unix socket with peer authentication.
using System.Runtime.CompilerServices;
using Npgsql;

namespace Knot.Samples.NpgsqlPool;

static class Database
{
    public const int MaxPoolSize = 4;
    public static readonly NpgsqlDataSource Source = Build();

    // The slim builder (only the type mappings a service opts into), its settings set as
    // properties, not parsed from a string: a smaller process to dump. KNOT_PG, when set, is a
    // connection string to use instead.
    static NpgsqlDataSource Build()
    {
        var builder = new NpgsqlSlimDataSourceBuilder(Environment.GetEnvironmentVariable("KNOT_PG") ?? "");
        if (Environment.GetEnvironmentVariable("KNOT_PG") is null)
        {
            var cs = builder.ConnectionStringBuilder;
            cs.Host = "/var/run/postgresql";
            cs.Database = "knot";
            cs.MaxPoolSize = MaxPoolSize;
            cs.Timeout = 0;
            cs.Enlist = false;
        }
        // The database's own types are not loaded: the built-in ones are all this program uses.
        builder.ConfigureTypeLoading(t => t.EnableTypeLoading(false));
        return builder.Build();
    }
}

static class Ledger
{
    public static readonly object Gate = new();
}

static class Program
{
    const int Requests = Database.MaxPoolSize;
    static readonly CountdownEvent ConnectionsHeld = new(Requests);
    static readonly ManualResetEventSlim LedgerHeld = new();
    static int _blocked;

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        var threads = new List<Thread>();
        for (int i = 0; i < Requests; i++)
        {
            int id = i + 1;
            var t = new Thread(() => HandleRequest(id), 256 * 1024) { Name = $"Request-{id}", IsBackground = true };
            threads.Add(t);
            t.Start();
        }
        var reconciler = new Thread(Reconcile, 256 * 1024) { Name = "Reconciler", IsBackground = true };
        threads.Add(reconciler);
        reconciler.Start();
        while (Volatile.Read(ref _blocked) < Requests + 1)
            Thread.Sleep(10);
        Thread.Sleep(500);
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        foreach (var t in threads)
            t.Join();
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HandleRequest(int id)
    {
        using var conn = Database.Source.OpenConnection();
        Console.Error.WriteLine($"Request-{id}: backend {conn.ProcessID}");
        ConnectionsHeld.Signal();
        LedgerHeld.Wait();
        PostToLedger(conn, id);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void PostToLedger(NpgsqlConnection conn, int id)
    {
        Interlocked.Increment(ref _blocked);
        lock (Ledger.Gate)
        {
            Console.Error.WriteLine($"unreachable: Request-{id} posted on backend {conn.ProcessID}");
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Reconcile()
    {
        ConnectionsHeld.Wait();
        lock (Ledger.Gate)
        {
            LedgerHeld.Set();
            OpenForReconcile();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void OpenForReconcile()
    {
        Interlocked.Increment(ref _blocked);
        using var conn = Database.Source.OpenConnection();
        Console.Error.WriteLine("unreachable: Reconciler got a connection");
    }
}
