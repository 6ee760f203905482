//! Why a .NET process died, as the runtime's own structures say: every thread's last thrown
//! exception (clrthreads' Exception column, read as `pe` prints it), which thread crashed, and
//! how — `Environment.FailFast` (with the message, read from the FailFast frame), an unhandled
//! exception (an `OutOfMemoryException` is one), or a stack overflow — and who wrote the dump.
//!
//! A dump the runtime writes on a crash records SIGABRT with `si_code` 0 (SI_USER) and sender
//! pid 0 on the crashing thread: the runtime's own abort, not a kill from outside. A dump taken
//! from outside (createdump PID, gcore) records no signal: no crash is read from it, whatever
//! exceptions its threads last threw.

pub(crate) mod diaginfo;
pub(crate) mod exception;
pub(crate) mod failfast;

use diaginfo::DiagInfo;
use exception::ManagedException;
use failfast::FailFastMessage;
use crate::runtimes::dotnet::contract::context::Context;
use crate::runtimes::dotnet::types::objects::TypeNamer;
use crate::runtimes::dotnet::{threads, STAGE};
use crate::diagnostics::Diagnostic;
#[cfg(test)]
use crate::process::{Locator, Process};
use crate::unwind::managed::CodeLookup;
use crate::unwind::Stack;
use serde::Serialize;

/// `COR_E_EXECUTIONENGINE`: the preallocated exception FailFast (and a fatal runtime error)
/// leaves on the thread, its InnerException the exception passed to FailFast.
pub(crate) const HRESULT_EXECUTION_ENGINE: u32 = 0x8013_1506;
/// `COR_E_STACKOVERFLOW`.
pub(crate) const HRESULT_STACK_OVERFLOW: u32 = 0x8007_03e9;
const STACK_OVERFLOW_TYPE: &str = "System.StackOverflowException";
const EXECUTION_ENGINE_TYPE: &str = "System.ExecutionEngineException";
const SIGABRT: i32 = 6;
const SI_USER: i32 = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DotnetCrashKind {
    /// `Environment.FailFast` (or a fatal runtime error, which takes the same path).
    Failfast,
    /// An exception no handler caught (an `OutOfMemoryException` included).
    UnhandledException,
    StackOverflow,
}

/// What the runtime says of the crash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct DotnetCrash {
    pub kind: DotnetCrashKind,
    /// The crashing thread.
    pub os_tid: u32,
    pub(crate) managed_id: u32,
    /// The exception the crash is about: the unhandled one; for FailFast the one passed to it
    /// (the InnerException of the preallocated ExecutionEngineException), when one was; the
    /// preallocated StackOverflowException.
    pub exception: Option<ManagedException>,
    /// The FailFast message, read from the FailFast frame on the crashing thread's stack.
    pub failfast_message: Option<FailFastMessage>,
    /// The dump records the runtime's own abort (SIGABRT, SI_USER, sender pid 0): not a kill.
    pub runtime_abort: bool,
}

/// One thread's last thrown exception (clrthreads' Exception column).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ThreadException {
    pub os_tid: u32,
    pub(crate) managed_id: u32,
    pub exception: ManagedException,
}

#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct CrashReading {
    /// createdump's header: present when createdump wrote the dump.
    pub diaginfo: Option<DiagInfo>,
    /// Every thread with a last thrown object, in ThreadStore order.
    pub thread_exceptions: Vec<ThreadException>,
    pub crash: Option<DotnetCrash>,
    #[serde(skip)]
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// Every managed thread: OS tid, managed id, last thrown object.
    #[serde(skip)]
    pub(crate) threads: Vec<(u32, u32, u64)>,
}

#[cfg(test)]
/// As [`read`], for a located runtime.
pub(crate) fn read_in(runtime: &Context<'_>, stacks: &[Stack], code: &dyn CodeLookup) -> CrashReading {
    let mut out = exceptions_in(runtime, code);
    out.crash = crash_in(runtime, &out, stacks, code);
    out
}

/// Every thread's last thrown exception and createdump's header: what [`read_in`] reads before
/// it decides the crash (no stacks needed; `crash` is `None`).
pub(crate) fn exceptions_in(runtime: &Context<'_>, code: &dyn CodeLookup) -> CrashReading {
    let process = runtime.process;
    let t = runtime.target();
    let namer = TypeNamer::of(&t, runtime);
    let mut out = CrashReading { diaginfo: diaginfo::read(process), ..CrashReading::default() };
    let warn = |out: &mut CrashReading, what: String| out.diagnostics.push(Diagnostic::warning(STAGE, what));

    let ts = match threads::thread_store(&t).and_then(|ts| threads::thread_addresses(&t, ts)) {
        Ok(a) => a,
        Err(e) => {
            warn(&mut out, format!("exceptions not read: {e}"));
            return out;
        }
    };
    for a in ts {
        match threads::read_thread(&t, a, 0, 0) {
            Ok(th) => out.threads.push((th.os_tid, th.managed_id, th.last_thrown_object)),
            Err(e) => warn(&mut out, format!("thread {a:#x}: {e}")),
        }
    }
    for &(os_tid, managed_id, thrown) in out.threads.clone().iter().filter(|th| th.2 != 0) {
        match exception::read(&t, &namer, code, thrown) {
            Ok(e) => out.thread_exceptions.push(ThreadException { os_tid, managed_id, exception: e }),
            Err(e) => warn(&mut out, format!("exception {thrown:#x} of thread {managed_id}: {e}")),
        }
    }
    out
}

/// Which thread died how, from the exceptions [`exceptions_in`] read and the unwound stacks.
pub(crate) fn crash_in(runtime: &Context<'_>, read: &CrashReading, stacks: &[Stack], code: &dyn CodeLookup) -> Option<DotnetCrash> {
    let process = runtime.process;
    let t = runtime.target();
    // The crashing thread: the one the dump's signal note names.
    let signal = process.core.signal.as_ref();
    let crashed = process.core.threads.iter().find(|t| t.signalled).filter(|_| signal.is_some())?;
    let &(os_tid, managed_id, _) = read.threads.iter().find(|m| m.0 == crashed.tid && m.0 != 0)?;
    let runtime_abort = signal.is_some_and(|s| s.signo == SIGABRT && s.code == Some(SI_USER) && s.sender_pid.unwrap_or(0) == 0);
    let stack = stacks.iter().find(|s| s.tid == crashed.tid);
    let thrown = read.thread_exceptions.iter().find(|e| e.os_tid == crashed.tid).map(|e| &e.exception);
    let in_failfast = stack.is_some_and(|s| failfast::failfast_frame(s, code).is_some());
    let is_type = |e: &ManagedException, ty: &str| e.type_name.as_deref() == Some(ty);
    let kind = match thrown {
        _ if in_failfast => DotnetCrashKind::Failfast,
        Some(e) if is_type(e, STACK_OVERFLOW_TYPE) || e.hresult == HRESULT_STACK_OVERFLOW && e.type_name.is_none() => DotnetCrashKind::StackOverflow,
        Some(e) if is_type(e, EXECUTION_ENGINE_TYPE) && e.hresult == HRESULT_EXECUTION_ENGINE => DotnetCrashKind::Failfast,
        Some(_) => DotnetCrashKind::UnhandledException,
        None => return None,
    };
    let exception = match (kind, thrown) {
        // FailFast's preallocated ExecutionEngineException says nothing: the exception passed
        // to FailFast is its InnerException.
        (DotnetCrashKind::Failfast, Some(e)) if is_type(e, EXECUTION_ENGINE_TYPE) && e.message.is_none() => e.inner.as_deref().cloned(),
        (_, e) => e.cloned(),
    };
    let failfast_message = match (kind, stack) {
        (DotnetCrashKind::Failfast, Some(s)) => failfast::message(&t, s, code),
        _ => None,
    };
    Some(DotnetCrash { kind, os_tid, managed_id, exception, failfast_message, runtime_abort })
}

#[cfg(test)]
/// As `read`, for a caller without stacks: makes the runtime's code map and walks the
/// signalled thread's stack itself.
pub(crate) fn read_alone(process: &Process, locator: &Locator) -> Option<CrashReading> {
    let runtime = std::sync::Arc::new(Context::open(process, locator).ok()?);
    let frames = crate::runtimes::dotnet::code::frames::read(&runtime.target(), process.core.arch).unwrap_or_default();
    let code = crate::runtimes::dotnet::code::frames::WithFrames { code: crate::runtimes::dotnet::CodeMap::new(runtime.clone()).ok()?, frames };
    let unwinder = crate::unwind::Unwinder::new(process).with_code_lookup(&code);
    let stacks: Vec<Stack> = process.core.threads.iter().filter(|t| t.signalled).map(|t| unwinder.walk(t)).collect();
    Some(read_in(&runtime, &stacks, &code))
}

impl CrashReading {
    /// What the crash model takes from the runtime: the kind (a runtime-written dump's SIGABRT
    /// is the runtime's own abort, not a kill), the crashing thread, the FailFast message (read
    /// from the FailFast frame) and the exception, as `pe` prints it.
    pub(crate) fn runtime_facts(&self) -> Option<crate::crash::RuntimeCrashFacts> {
        let c = self.crash.as_ref()?;
        Some(crate::crash::RuntimeCrashFacts {
            kind: Some(match c.kind {
                DotnetCrashKind::Failfast => crate::crash::CrashKind::Failfast,
                DotnetCrashKind::UnhandledException => crate::crash::CrashKind::UnhandledException,
                DotnetCrashKind::StackOverflow => crate::crash::CrashKind::StackOverflow,
            }),
            thread: Some(c.os_tid),
            message: c.failfast_message.as_ref().map(|m| crate::crash::CrashMessage { text: m.text.clone(), source: FAILFAST_MESSAGE_SOURCE.into() }),
            exception: c.exception.as_ref().map(exception_report),
            origin_frame: None,
        })
    }
}

/// `crash.message.source` of a FailFast message: read from the FailFast frame on the stack.
pub(crate) const FAILFAST_MESSAGE_SOURCE: &str = "dotnet_failfast_frame";

/// An exception as the report carries it.
pub(crate) fn exception_report(e: &ManagedException) -> crate::crash::ExceptionReport {
    use crate::hex::Hex;
    use crate::threads::FrameReport;
    crate::crash::ExceptionReport {
        type_name: e.type_name.clone().unwrap_or_else(|| "?".into()),
        message: e.message.clone(),
        hresult: Some(Hex(e.hresult as u64)),
        address: Some(Hex(e.object)),
        stack: e
            .stack
            .iter()
            .enumerate()
            .map(|(i, f)| FrameReport {
                function_offset: f.offset.map(Hex),
                module: f.module.clone(),
                signature: f.signature.clone(),
                ..FrameReport::recorded_managed(i, f.ip, f.function.clone())
            })
            .collect(),
        inner: e.inner.as_deref().map(|i| Box::new(exception_report(i))),
    }
}
