// autofac_container: the production wedge.  A SingleInstance component whose
// constructor (running under the root lifetime scope's shared-instance lock)
// resolves an InstancePerLifetimeScope component from a child scope, while a
// second thread is constructing that child-scope component (under the child
// scope's shared-instance lock) and resolves the singleton -> lock-order cycle
// root-lock <-> child-lock.  20+ further threads then queue on the root lock
// resolving other (not yet created) singletons through the root.
using System.Runtime.CompilerServices;
using Autofac;

namespace Knot.Samples.AutofacContainer;

/// Singleton created in the root scope; needs the tenant's session.
public sealed class RootCache
{
    public RootCache(ILifetimeScope rootScope)
    {
        // Autofac holds the root scope's shared-instance lock here.
        Program.RootLockHeld.Set();
        Program.ChildLockHeld.Wait();
        Session = WaitForChildLock();
    }

    public TenantSession Session { get; }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static TenantSession WaitForChildLock() => Program.TenantScope.Resolve<TenantSession>();
}

/// Per-lifetime-scope component created in the "tenant" child scope; needs the singleton.
public sealed class TenantSession
{
    public TenantSession(ILifetimeScope tenantScope)
    {
        // Autofac holds the tenant (child) scope's shared-instance lock here.
        Program.ChildLockHeld.Set();
        Program.RootLockHeld.Wait();
        Cache = WaitForRootLock(tenantScope);
    }

    public RootCache Cache { get; }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static RootCache WaitForRootLock(ILifetimeScope scope) => scope.Resolve<RootCache>();
}

/// Unrelated singletons that request threads need; their first resolution
/// goes through the root scope's shared-instance lock.
public sealed class PricingService { }
public sealed class AuditTrail { }

public static class Program
{
    public const int RequestWorkers = 21;
    // 1 MiB stacks (the Windows default) instead of Linux's 8 MiB keep the
    // heap dump of 25 threads small; createdump writes whole stack mappings.
    const int StackBytes = 1 << 20;

    public static readonly ManualResetEventSlim RootLockHeld = new();
    public static readonly ManualResetEventSlim ChildLockHeld = new();
    static readonly CountdownEvent WaitersStarted = new(RequestWorkers + 1);
    public static IContainer Root = null!;
    public static ILifetimeScope TenantScope = null!;

    static int Main()
    {
        Thread.CurrentThread.Name = "Main";
        var builder = new ContainerBuilder();
        builder.RegisterType<RootCache>().SingleInstance();
        builder.RegisterType<TenantSession>().InstancePerLifetimeScope();
        builder.RegisterType<PricingService>().SingleInstance();
        builder.RegisterType<AuditTrail>().SingleInstance();
        Root = builder.Build();
        TenantScope = Root.BeginLifetimeScope("tenant");

        var threads = new List<Thread>
        {
            new(HoldRootScope, StackBytes) { Name = "RootBuilder", IsBackground = true },
            new(HoldChildScope, StackBytes) { Name = "TenantWorker", IsBackground = true },
        };
        foreach (var t in threads) t.Start();
        RootLockHeld.Wait();
        ChildLockHeld.Wait();

        // Only now (root lock owned by RootBuilder) start the waiters, so none
        // of them can create a singleton first and take the fast path later.
        var cacheReader = new Thread(ReadRootCache, StackBytes) { Name = "CacheReader", IsBackground = true };
        cacheReader.Start();
        threads.Add(cacheReader);
        for (int i = 0; i < RequestWorkers; i++)
        {
            var worker = new Thread(HandleRequest, StackBytes) { Name = $"ReqWorker-{i:D2}", IsBackground = true };
            worker.Start(i);
            threads.Add(worker);
        }
        WaitersStarted.Wait();
        Console.Out.WriteLine("ready");
        Console.Out.Flush();
        WaitForAll(threads);
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void WaitForAll(List<Thread> threads)
    {
        foreach (var t in threads) t.Join();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HoldRootScope() => Root.Resolve<RootCache>();

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HoldChildScope() => TenantScope.Resolve<TenantSession>();

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void ReadRootCache()
    {
        WaitersStarted.Signal();
        Root.Resolve<RootCache>();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HandleRequest(object? index)
    {
        using var requestScope = Root.BeginLifetimeScope($"request-{index}");
        WaitersStarted.Signal();
        ResolveThroughRoot(requestScope, (int)index!);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void ResolveThroughRoot(ILifetimeScope requestScope, int index)
    {
        if (index % 2 == 0)
            requestScope.Resolve<PricingService>();
        else
            requestScope.Resolve<AuditTrail>();
    }
}
