// redis_pool: StackExchange.Redis on a thread pool capped at PoolThreads workers. Requests
// work items each read a key and block their worker until the reply comes: even ids with
// `StringGetAsync(key).Result`, odd ids with the synchronous `StringGet(key)` (which waits in
// Monitor.Wait inside ConnectionMultiplexer.ExecuteSyncImpl). The replies reach the process on
// the socket, but the socket engine's work item that would read them is queued to the pool
// behind the requests: no worker is ever free to run it — a deadlock through the thread pool.
// Usage: redis_pool PORT   (a redis-server on 127.0.0.1:PORT)
using System.Runtime.CompilerServices;
using StackExchange.Redis;

namespace Knot.Samples.RedisPool;

static class Program
{
    const int PoolThreads = 4;
    const int Requests = 12;
    static IDatabase Db = null!;
    static int _blocked;
    static readonly ManualResetEventSlim Never = new();

    static int Main(string[] args)
    {
        Thread.CurrentThread.Name = "Main";
        int port = args.Length > 0 ? int.Parse(args[0]) : 6379;
        var options = new ConfigurationOptions
        {
            EndPoints = { { "127.0.0.1", port } },
            // The wedge stays: no timeout ends a blocked request.
            SyncTimeout = int.MaxValue,
            AsyncTimeout = int.MaxValue,
            ConnectTimeout = 30000,
            AbortOnConnectFail = true,
        };
        var mux = ConnectionMultiplexer.Connect(options);
        Db = mux.GetDatabase();
        for (int i = 0; i < Requests; i++)
            Db.StringSet($"quote:{i}", i * 7);
        if (!ThreadPool.SetMaxThreads(PoolThreads, PoolThreads) ||
            !ThreadPool.SetMinThreads(PoolThreads, PoolThreads))
        {
            Console.Error.WriteLine("could not size the thread pool");
            return 2;
        }
        for (int i = 0; i < Requests; i++)
            ThreadPool.QueueUserWorkItem(HandleRequest, i, preferLocal: false);
        while (Volatile.Read(ref _blocked) < PoolThreads)
            Thread.Sleep(10);
        Thread.Sleep(1000);
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        Never.Wait();
        GC.KeepAlive(mux);
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HandleRequest(int id)
    {
        Interlocked.Increment(ref _blocked);
        string key = $"quote:{id}";
        RedisValue v = id % 2 == 0 ? BlockOnResult(key) : BlockOnSyncGet(key);
        Console.Out.WriteLine($"{key} = {v}");
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static RedisValue BlockOnResult(string key) => Db.StringGetAsync(key).Result;

    [MethodImpl(MethodImplOptions.NoInlining)]
    static RedisValue BlockOnSyncGet(string key) => Db.StringGet(key);
}
