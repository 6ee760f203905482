// orleans_silo: a real Orleans 10 silo wedged the way production silos wedge. A singleton
// service (PriceCache) refreshes itself under its lock and, while holding it, waits
// synchronously for a grain call (QuoteGrain.Quote); that grain's turn needs the same lock.
// Every new PriceGrain registers with the cache in its constructor, so each grain activation
// now waits behind the lock too: eight from calls inside the silo and one from a client call
// through the silo's gateway. Then a plain thread calls one of the stuck grains: the call is
// delivered on its own thread, which waits for the activation's lock. Response timeouts are an
// hour, so the wedge stays until dumped.
using System.Runtime.CompilerServices;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using Orleans;
using Orleans.Hosting;
using Orleans.Configuration;

namespace Knot.Samples.OrleansSilo;

public interface IQuoteGrain : IGrainWithIntegerKey
{
    Task Ping();
    Task<int> Quote();
}

public interface IPriceGrain : IGrainWithIntegerKey
{
    Task<int> GetPrice();
}


public sealed class PriceCache
{
    readonly object _sync = new();
    readonly Dictionary<long, int> _prices = new();
    public readonly ManualResetEventSlim Held = new();
    // Callers that reached the lock (for the sample's 'ready', not part of the wedge).
    public int Arrived;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public int Register(long key)
    {
        Interlocked.Increment(ref Arrived);
        lock (_sync)
        {
            _prices[key] = (int)key;
            return (int)key;
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public int Lookup(long key)
    {
        Interlocked.Increment(ref Arrived);
        lock (_sync)
        {
            return _prices.TryGetValue(key, out var p) ? p : 0;
        }
    }

    // Sync over async under a lock: the grain call's turn needs this very lock.
    [MethodImpl(MethodImplOptions.NoInlining)]
    public void RefreshUnderLock(IGrainFactory grains)
    {
        lock (_sync)
        {
            Held.Set();
            _prices[0] = grains.GetGrain<IQuoteGrain>(0).Quote().GetAwaiter().GetResult();
        }
    }
}

public sealed class QuoteGrain : Grain, IQuoteGrain
{
    readonly PriceCache _cache;
    public QuoteGrain(PriceCache cache) => _cache = cache;
    public Task Ping() => Task.CompletedTask;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public Task<int> Quote() => Task.FromResult(_cache.Lookup(this.GetPrimaryKeyLong()) + 1);
}

public sealed class PriceGrain : Grain, IPriceGrain
{
    readonly int _price;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public PriceGrain(PriceCache cache, IGrainContext context) => _price = cache.Register(context.GrainId.GetIntegerKey());

    public Task<int> GetPrice() => Task.FromResult(_price);
}

static class Program
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    static int CallStuckGrain(IGrainFactory grains) => grains.GetGrain<IPriceGrain>(1).GetPrice().GetAwaiter().GetResult();

    static async Task<int> Main()
    {
        Thread.CurrentThread.Name = "Main";
        var silo = Host.CreateDefaultBuilder()
            .ConfigureLogging(l => l.ClearProviders())
            .UseOrleans(s => s.UseLocalhostClustering(siloPort: 11111, gatewayPort: 30000)
                .Configure<SiloMessagingOptions>(o => o.ResponseTimeout = TimeSpan.FromHours(1)))
            .ConfigureServices(s => s.AddSingleton<PriceCache>())
            .Build();
        await silo.StartAsync();
        var client = Host.CreateDefaultBuilder()
            .ConfigureLogging(l => l.ClearProviders())
            .UseOrleansClient(c => c.UseLocalhostClustering(gatewayPort: 30000)
                .Configure<ClientMessagingOptions>(o => o.ResponseTimeout = TimeSpan.FromHours(1)))
            .Build();
        await client.StartAsync();
        var grains = silo.Services.GetRequiredService<IGrainFactory>();
        var remote = client.Services.GetRequiredService<IClusterClient>();
        var cache = silo.Services.GetRequiredService<PriceCache>();

        await grains.GetGrain<IQuoteGrain>(0).Ping();
        await remote.GetGrain<IPriceGrain>(1000).GetPrice();

        cache.Arrived = 0;
        var refresher = new Thread(() => cache.RefreshUnderLock(grains)) { Name = "CacheRefresher", IsBackground = true };
        refresher.Start();
        cache.Held.Wait();
        Thread.Sleep(1000);
        var calls = new List<Task<int>>();
        for (int i = 1; i <= 8; i++)
        {
            int key = i;
            calls.Add(Task.Run(() => grains.GetGrain<IPriceGrain>(key).GetPrice()));
        }
        calls.Add(remote.GetGrain<IPriceGrain>(100).GetPrice());
        // Ready once the grain call and all nine activations reached the lock (the thread pool
        // adds a worker for each one that blocks, so this takes a few seconds).
        var deadline = DateTime.UtcNow.AddSeconds(60);
        while (Volatile.Read(ref cache.Arrived) < 10 && DateTime.UtcNow < deadline)
            Thread.Sleep(100);
        // A grain call from a plain thread, outside Orleans' scheduler, to a grain whose
        // activation is the one stuck in its constructor: the call is delivered in place
        // (GrainReference.InvokeAsync → MessageCenter.SendMessage → MessageCenter.ReceiveMessage →
        // ActivationData.ReceiveMessage) on this thread.
        var caller = new Thread(() => CallStuckGrain(grains)) { Name = "GrainCaller", IsBackground = true };
        caller.Start();
        Thread.Sleep(2000);
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        await Task.WhenAll(calls);
        Console.Error.WriteLine("unreachable: the cache let go");
        return 1;
    }
}
