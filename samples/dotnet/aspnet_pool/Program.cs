// aspnet_pool: an ASP.NET Core 10 minimal API and the thread pool, in four modes (argv[0]):
//   deadlock  the pool's maximum set to 12; each request to /post/{id} takes Ledger's lock and,
//             holding it, blocks on Rates.FetchRatesAsync(id).Result, which awaits Task.Delay:
//             the timer fires only when a worker runs the TimerQueue, and every worker is blocked
//             (one on the task, the others on the lock).  40 concurrent requests.
//   starved   the same handler, the default pool: it injects workers, each takes a request and
//             blocks behind the lock; requests keep coming, the queue grows (dumped meanwhile).
//   nolock    the default pool, no lock: each request to /quote/{id} blocks on
//             FetchRatesAsync(id).Result, and each request to /upload blocks in Kestrel's
//             HttpRequestStream.Read (synchronous I/O allowed: the library waits on its own
//             ReadAsync), whose body the load sends a second later.  Requests keep coming.
//   healthy   the default pool, handlers that await (no blocking): a busy, healthy service.
// The load is one thread in this process, raw sockets to its own 127.0.0.1 port, a bounded
// number of connections for a bounded time; the process exits by itself after LifetimeSeconds.
using System.Net;
using System.Net.Sockets;
using System.Runtime.CompilerServices;
using System.Text;
using Microsoft.AspNetCore.Server.Kestrel.Core;

namespace Knot.Samples.AspNetPool;

static class Program
{
    const int MaxWorkers = 12;
    const int LifetimeSeconds = 300;
    public static string Mode = "deadlock";

    static int Main(string[] args)
    {
        Thread.CurrentThread.Name = "Main";
        Mode = args.Length > 0 ? args[0] : "deadlock";
        if (Mode == "deadlock" && (!ThreadPool.SetMinThreads(4, 4) || !ThreadPool.SetMaxThreads(MaxWorkers, MaxWorkers)))
        {
            Console.Error.WriteLine("could not size the thread pool");
            return 2;
        }
        // The empty builder: Kestrel and routing only (no configuration files, logging, HTTPS).
        var builder = WebApplication.CreateEmptyBuilder(new WebApplicationOptions());
        builder.WebHost.UseKestrelCore().ConfigureKestrel(o =>
        {
            o.Listen(IPAddress.Loopback, 0);
            o.AllowSynchronousIO = Mode == "nolock";
        });
        builder.Services.AddRoutingCore();
        var app = builder.Build();
        app.UseRouting();
        app.MapGet("/post/{id:int}", ctx => ctx.Response.WriteAsync(Ledger.Post(int.Parse((string)ctx.Request.RouteValues["id"]!))));
        app.MapGet("/quote/{id:int}", ctx => ctx.Response.WriteAsync(Ledger.Quote(int.Parse((string)ctx.Request.RouteValues["id"]!))));
        app.MapPost("/upload", ctx => ctx.Response.WriteAsync(Ledger.Upload(ctx.Request.Body)));
        app.MapGet("/healthy/{id:int}", async ctx => await ctx.Response.WriteAsync(await Ledger.PostAsync(int.Parse((string)ctx.Request.RouteValues["id"]!))));
        app.Start();
        int port = new Uri(app.Urls.First()).Port;
        Console.Error.WriteLine($"{Mode}: listening on 127.0.0.1:{port}");

        var load = new Thread(() => Load.Run(port, Mode, LifetimeSeconds), 256 * 1024) { Name = "LoadDriver", IsBackground = true };
        load.Start();
        var started = DateTime.UtcNow;
        // On a busy machine the pool injects its workers slowly (the gate thread's starvation
        // rule): wait for the shape, not for a fixed time.
        var until = started.AddSeconds(LifetimeSeconds - 60);
        while (!Ready(started) && DateTime.UtcNow < until)
            Thread.Sleep(50);
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        Thread.Sleep(TimeSpan.FromSeconds(LifetimeSeconds));
        return 0;
    }

    static bool Ready(DateTime started) => Mode switch
    {
        // Every worker the pool may have is inside a request, and the timer is due.
        "deadlock" => Ledger.Entered >= MaxWorkers && ThreadPool.ThreadCount >= MaxWorkers && DateTime.UtcNow > Ledger.LastEntry.AddSeconds(2),
        // Some seconds into the load, the queue growing.
        "starved" or "nolock" => DateTime.UtcNow > started.AddSeconds(8) && ThreadPool.PendingWorkItemCount >= 10,
        _ => Ledger.Completed > 200 && DateTime.UtcNow > started.AddSeconds(5),
    };
}

static class Ledger
{
    static readonly object _sync = new();
    static int _entered, _completed;
    public static int Entered => Volatile.Read(ref _entered);
    public static int Completed => Volatile.Read(ref _completed);
    public static DateTime LastEntry = DateTime.MaxValue;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static string Post(int id)
    {
        Interlocked.Increment(ref _entered);
        LastEntry = DateTime.UtcNow;
        lock (_sync)
        {
            // Sync over async under a lock: the request's worker waits for a timer only a
            // worker can fire.
            decimal rate = Rates.FetchRatesAsync(id).Result;
            return $"posted {id} at {rate}\n";
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static string Quote(int id)
    {
        Interlocked.Increment(ref _entered);
        // Sync over async without a lock.
        return $"quote {id}: {Rates.FetchRatesAsync(id).Result}\n";
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static string Upload(Stream body)
    {
        Interlocked.Increment(ref _entered);
        // Synchronous I/O on Kestrel's request stream: the library blocks on its own ReadAsync.
        var buffer = new byte[64];
        int n = body.Read(buffer, 0, buffer.Length);
        return $"uploaded {n} bytes\n";
    }

    public static async Task<string> PostAsync(int id)
    {
        decimal rate = await Rates.FetchRatesAsync(id, 5);
        Interlocked.Increment(ref _completed);
        return $"posted {id} at {rate}\n";
    }
}

static class Rates
{
    public static async Task<decimal> FetchRatesAsync(int id, int delayMs = 500)
    {
        await Task.Delay(delayMs);
        return id * 1.25m;
    }
}

static class Load
{
    static Socket Send(int port, string request)
    {
        var s = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp) { ReceiveTimeout = 20_000 };
        s.Connect(IPAddress.Loopback, port);
        s.Send(Encoding.ASCII.GetBytes(request));
        return s;
    }

    static string Get(string path) => $"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

    // Bounded: at most MaxConnections connections in all, for at most `seconds`.
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Run(int port, string mode, int seconds)
    {
        const int MaxConnections = 400;
        var end = DateTime.UtcNow.AddSeconds(seconds);
        var open = new List<Socket>();
        try
        {
            switch (mode)
            {
                case "deadlock":
                    for (int i = 0; i < 40; i++)
                        open.Add(Send(port, Get($"/post/{i}")));
                    break;
                case "starved":
                case "nolock":
                    // A steady stream of requests, 20 a second; an upload's body follows a second later.
                    var bodies = new List<(Socket, DateTime)>();
                    for (int i = 0; i < MaxConnections && DateTime.UtcNow < end; i++)
                    {
                        if (mode == "starved")
                            open.Add(Send(port, Get($"/post/{i}")));
                        else if (i % 2 == 0)
                            open.Add(Send(port, Get($"/quote/{i}")));
                        else
                        {
                            var s = Send(port, "POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 8\r\n\r\n");
                            open.Add(s);
                            bodies.Add((s, DateTime.UtcNow.AddSeconds(1)));
                        }
                        foreach (var (s, at) in bodies.Where(b => b.Item2 <= DateTime.UtcNow).ToList())
                        {
                            s.Send(Encoding.ASCII.GetBytes("12345678"));
                            bodies.Remove((s, at));
                        }
                        Thread.Sleep(50);
                    }
                    break;
                default:
                    // 40 concurrent requests at a time, round after round.
                    var buffer = new byte[4096];
                    for (int total = 0; total < 40_000 && DateTime.UtcNow < end; total += 40)
                    {
                        var round = Enumerable.Range(0, 40).Select(i => Send(port, Get($"/healthy/{total + i}"))).ToList();
                        foreach (var s in round)
                        {
                            try { while (s.Receive(buffer) > 0) { } } catch (SocketException) { }
                            s.Dispose();
                        }
                    }
                    break;
            }
            Thread.Sleep(end - DateTime.UtcNow is var left && left > TimeSpan.Zero ? left : TimeSpan.Zero);
        }
        catch (SocketException) { }
        foreach (var s in open)
            s.Dispose();
    }
}
