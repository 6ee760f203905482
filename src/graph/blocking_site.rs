//! Where a thread blocks on async work (sync over async), from its managed frames: which
//! blocking call it is in (`Task.Result`, `Task.Wait`, `GetAwaiter().GetResult()`,
//! `ManualResetEventSlim.Wait`, `Monitor.Wait`, `Barrier.SignalAndWait`, `SemaphoreSlim.Wait`),
//! each primitive by its own name, the first frame of the program's own code above it (the call
//! site), and the library frame between them when the blocking is inside a library (a
//! synchronous `HttpClient.Send`). Data: `report::words` says it.

use crate::threads::FrameReport;

/// The blocking call a thread is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockingApi {
    TaskResult,
    TaskWait,
    TaskWaitAll,
    GetResult,
    /// `ManualResetEventSlim.Wait` (its `Monitor.Wait` inside).
    EventWait,
    /// `Monitor.Wait` called by the code above it, with no event around it.
    MonitorWait,
    BarrierWait,
    SemaphoreWait,
}

/// Where a thread blocks on async work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlockingSite {
    pub(crate) api: BlockingApi,
    /// The first frame of the program's own code above the blocking call (its function).
    pub(crate) call_site: Option<String>,
    /// The frame that called the blocking call, when it is not the program's own (a library
    /// blocks for it).
    pub(crate) library: Option<String>,
}

/// Namespaces of the runtime and of libraries: not the program's own code.
const LIBRARY_PREFIXES: &[&str] = &[
    "System.", "Microsoft.", "Internal.", "Interop", "ILStubClass", "DynamicClass", "Autofac.", "Orleans.", "Newtonsoft.", "Serilog.", "NLog.", "Polly.", "Grpc.", "Npgsql.", "StackExchange.",
];

/// Whether `function` is the program's own code.
pub(crate) fn is_own(function: &str) -> bool {
    !LIBRARY_PREFIXES.iter().any(|p| function.starts_with(p))
}

/// The blocking call `function` is, if it is one.
fn api_of(function: &str) -> Option<BlockingApi> {
    let f = function;
    if f.starts_with("System.Runtime.CompilerServices.") && (f.contains("TaskAwaiter") || f.contains("ValueTaskAwaiter")) && (f.ends_with(".GetResult") || f.contains("HandleNonSuccessAndDebuggerNotification") || f.contains("ValidateEnd")) {
        return Some(BlockingApi::GetResult);
    }
    if !f.starts_with("System.Threading.") {
        return None;
    }
    if f.starts_with("System.Threading.Tasks.Task") {
        if f.ends_with(".get_Result") || f.ends_with(".GetResultCore") || f.ends_with(".ResultOnSuccess") {
            return Some(BlockingApi::TaskResult);
        }
        if f.ends_with(".WaitAll") || f.contains(".WaitAllCore") || f.contains(".WaitAllBlockingCore") {
            return Some(BlockingApi::TaskWaitAll);
        }
        if f.ends_with(".Wait") || f.ends_with(".InternalWait") || f.ends_with(".InternalWaitCore") || f.ends_with(".SpinThenBlockingWait") {
            return Some(BlockingApi::TaskWait);
        }
        return None;
    }
    if f.starts_with("System.Threading.ManualResetEventSlim.Wait") {
        Some(BlockingApi::EventWait)
    } else if f.starts_with("System.Threading.Monitor.Wait") {
        Some(BlockingApi::MonitorWait)
    } else if f.starts_with("System.Threading.Barrier.SignalAndWait") || f.starts_with("System.Threading.Barrier.DiscontinuousWait") {
        Some(BlockingApi::BarrierWait)
    } else if f.starts_with("System.Threading.SemaphoreSlim.Wait") {
        // Wait, WaitCore, WaitUntilCountOrTimeout.
        Some(BlockingApi::SemaphoreWait)
    } else {
        None
    }
}

/// Where the thread with `frames` (innermost first) blocks on async work; none when no frame is
/// a blocking call.
pub(crate) fn blocking_site(frames: &[FrameReport]) -> Option<BlockingSite> {
    let named: Vec<&str> = frames.iter().filter(|f| f.managed).filter_map(|f| f.function.as_deref()).collect();
    // The outermost blocking call of the run that starts at the first one: the API the caller used.
    let first = named.iter().position(|f| api_of(f).is_some())?;
    let mut last = first;
    let mut api = api_of(named[first])?;
    for (i, f) in named.iter().enumerate().skip(first + 1) {
        match api_of(f) {
            Some(a) => {
                last = i;
                // Within one call, the outer frames name what the caller wrote (`Task.Result`
                // calls InternalWait; the event's Monitor.Wait is inside both).
                if !(api == BlockingApi::TaskResult && a == BlockingApi::TaskWait) {
                    api = a;
                }
            }
            None => break,
        }
    }
    let above = &named[last + 1..];
    let call_site = above.iter().find(|f| is_own(f)).map(|f| f.to_string());
    let library = above.first().filter(|f| !is_own(f)).map(|f| f.to_string());
    Some(BlockingSite { api, call_site, library })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::threads::FrameReport;

    fn frames(names: &[&str]) -> Vec<FrameReport> {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| FrameReport::recorded_managed(i, 0x1000 + i as u64, Some(n.to_string())))
            .collect()
    }

    #[test]
    fn task_result_in_the_programs_own_method() {
        let f = frames(&[
            "System.Threading.Monitor.Wait",
            "System.Threading.ManualResetEventSlim.Wait",
            "System.Threading.Tasks.Task.SpinThenBlockingWait",
            "System.Threading.Tasks.Task.InternalWaitCore",
            "System.Threading.Tasks.Task.InternalWait",
            "System.Threading.Tasks.Task`1[[System.Int32, System.Private.CoreLib]].GetResultCore",
            "Knot.Samples.SyncOverAsync.Program.BlockOnResult",
            "Knot.Samples.SyncOverAsync.Program.HandleRequestSync",
            "System.Threading.ExecutionContext.RunFromThreadPoolDispatchLoop",
        ]);
        let s = blocking_site(&f).expect("a site");
        assert_eq!(s.api, BlockingApi::TaskResult);
        assert_eq!(s.call_site.as_deref(), Some("Knot.Samples.SyncOverAsync.Program.BlockOnResult"));
        assert_eq!(s.library, None);
    }

    #[test]
    fn a_library_that_blocks_is_named_with_the_call_site() {
        let f = frames(&[
            "System.Threading.Monitor.Wait",
            "System.Threading.ManualResetEventSlim.Wait",
            "System.Threading.Tasks.Task.SpinThenBlockingWait",
            "System.Threading.Tasks.Task.InternalWaitCore",
            "System.Runtime.CompilerServices.TaskAwaiter.HandleNonSuccessAndDebuggerNotification",
            "System.Net.Http.HttpClient.Send",
            "Shop.Catalog.Load",
        ]);
        let s = blocking_site(&f).expect("a site");
        assert_eq!(s.api, BlockingApi::GetResult);
        assert_eq!(s.library.as_deref(), Some("System.Net.Http.HttpClient.Send"));
        assert_eq!(s.call_site.as_deref(), Some("Shop.Catalog.Load"));
    }

    #[test]
    fn a_library_s_own_monitor_wait_is_said_as_monitor_wait() {
        // StackExchange.Redis' synchronous StringGet (redis_pool sample).
        let f = frames(&[
            "System.Threading.Monitor.Wait",
            "StackExchange.Redis.ConnectionMultiplexer.ExecuteSyncImpl",
            "StackExchange.Redis.RedisDatabase.StringGet",
            "Knot.Samples.RedisPool.Program.BlockOnSyncGet",
        ]);
        let s = blocking_site(&f).expect("a site");
        assert_eq!(s.api, BlockingApi::MonitorWait);
        assert_eq!(s.library.as_deref(), Some("StackExchange.Redis.ConnectionMultiplexer.ExecuteSyncImpl"));
        assert_eq!(s.call_site.as_deref(), Some("Knot.Samples.RedisPool.Program.BlockOnSyncGet"));
    }

    #[test]
    fn a_barrier_is_named_not_the_event_inside_it() {
        let f = frames(&[
            "System.Threading.Monitor.Wait",
            "System.Threading.ManualResetEventSlim.Wait",
            "System.Threading.Barrier.DiscontinuousWait",
            "System.Threading.Barrier.SignalAndWait",
            "System.Threading.Barrier.SignalAndWait",
            "Knot.Samples.ParallelBarrier.Program.Step",
        ]);
        assert_eq!(blocking_site(&f).map(|s| s.api), Some(BlockingApi::BarrierWait));
    }

    #[test]
    fn no_blocking_call_no_site() {
        assert_eq!(blocking_site(&frames(&["System.Threading.Monitor.Enter_Slowpath", "Shop.Ledger.Post"])), None);
    }
}
