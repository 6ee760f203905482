//! The runtime's map of its own code, for the unwinder: [`CodeMap`] implements
//! [`CodeLookup`] over the ExecutionManager contract (range sections, then a code heap's nibble
//! map or a ReadyToRun image's runtime functions) and names methods as SOS does
//! (RuntimeTypeSystem contract and the modules' metadata). Results are cached, so a stack walk
//! that meets the same method many times reads it once; an address knot cannot place, or dump
//! data that does not hold together, is `None` (the first errors are kept as diagnostics).

use crate::runtimes::dotnet::contract::context::Context;
use crate::runtimes::dotnet::error::DotnetError;
#[cfg(test)]
use crate::runtimes::dotnet::types::metadata::image_notes;
use crate::runtimes::dotnet::types::objects::TypeNamer;
use crate::runtimes::dotnet::code::rangesection::SectionKind;
use crate::runtimes::dotnet::{code::codeheap, types::methoddesc, types::methodname, code::rangesection, code::readytorun, STAGE};
use crate::diagnostics::Diagnostic;
use crate::process::Memory;
#[cfg(test)]
use crate::process::{Locator, Process};
use crate::unwind::managed::{CodeLookup, ManagedCode, ManagedCodeKind, ManagedName};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The ExecutionManager contract versions knot reads (2: the nibble map holds pointers).
const EXECUTION_MANAGER_VERSIONS: [u64; 2] = [1, 2];
const RUNTIME_TYPE_SYSTEM_VERSION: u64 = 1;
/// Cache bounds: a hostile caller (or dump) cannot make the caches grow without end.
const MAX_CACHED: usize = 1 << 16;
const MAX_KEPT_ERRORS: usize = 16;

pub(crate) struct CodeMap<'p> {
    runtime: Arc<Context<'p>>,
    execution_manager: u64,
    lookups: Mutex<HashMap<u64, Option<ManagedCode>>>,
    names: Mutex<HashMap<u64, Option<ManagedName>>>,
    errors: Mutex<Vec<(String, DotnetError)>>,
}

#[cfg(test)]
/// The code map of the .NET runtime in `process`, finding managed images' files (for pages
/// the dump lacks) through `locator`.
pub(crate) fn code_map<'p>(process: &'p Process, locator: &Locator) -> Result<CodeMap<'p>, DotnetError> {
    let runtime = Context::open(process, locator).map_err(|e| e.into_error())?;
    CodeMap::new(Arc::new(runtime))
}

impl<'p> CodeMap<'p> {
    /// The code map over a located runtime; an error names the contract knot cannot read.
    pub(crate) fn new(runtime: Arc<Context<'p>>) -> Result<CodeMap<'p>, DotnetError> {
        let execution_manager = runtime.contract("ExecutionManager", &EXECUTION_MANAGER_VERSIONS)?;
        runtime.contract("RuntimeTypeSystem", &[RUNTIME_TYPE_SYSTEM_VERSION])?;
        Ok(CodeMap {
            runtime,
            execution_manager,
            lookups: Mutex::new(HashMap::new()),
            names: Mutex::new(HashMap::new()),
            errors: Mutex::new(Vec::new()),
        })
    }
}

impl CodeMap<'_> {
    #[cfg(test)]
    /// What went wrong so far (the first errors), and what happened with images' files.
    pub(crate) fn diagnostics(&self) -> Vec<Diagnostic> {
        let mut out = self.lookup_diagnostics();
        out.extend(image_notes(&self.runtime.image));
        out
    }

    /// The first errors of lookups and naming.
    pub(crate) fn lookup_diagnostics(&self) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        if let Ok(errors) = self.errors.lock() {
            for (what, e) in errors.iter() {
                let mut d = Diagnostic::warning(STAGE, format!("{what}: {e}"));
                if let Some(a) = e.address() {
                    d = d.at_address(a);
                }
                out.push(d);
            }
        }
        // Kept in the order the parallel unwinders met them: sorted, so two readings of one
        // dump say them alike.
        out.sort_by(|a, b| a.message.cmp(&b.message));
        out
    }

    fn keep_error(&self, what: String, e: DotnetError) {
        if let Ok(mut errors) = self.errors.lock()
            && errors.len() < MAX_KEPT_ERRORS
        {
            errors.push((what, e));
        }
    }

    #[cfg(test)]
    /// Memory that reads managed images as the code map does: the dump, then the image files
    /// the dump maps for pages it did not save. A ReadyToRun method's `UNWIND_INFO` lives in
    /// its image, which a heap dump often leaves out, so an unwinder should read it here.
    pub(crate) fn image_memory(&self) -> &(dyn Memory + Sync + '_) {
        &self.runtime.image
    }

    /// As [`CodeLookup::lookup`], with the reason when the dump's data did not hold together.
    pub(crate) fn try_lookup(&self, ip: u64) -> Result<Option<ManagedCode>, DotnetError> {
        let t = self.runtime.target();
        let Some(section) = rangesection::find(&t, ip)? else { return Ok(None) };
        match section.kind() {
            SectionKind::CodeHeap => Ok(codeheap::lookup(&t, section.heap_list, section.begin, ip, self.execution_manager)?.map(|c| match c {
                codeheap::HeapCode::Method { start, method_desc, unwind } => ManagedCode { method_start: start, method: Some(method_desc), kind: ManagedCodeKind::Jitted, unwind },
                codeheap::HeapCode::Stub { start } => ManagedCode { method_start: start, method: None, kind: ManagedCodeKind::Stub, unwind: None },
            })),
            SectionKind::ReadyToRun => {
                let image = self.runtime.image_target();
                Ok(readytorun::lookup(&t, &image, section.r2r_module, section.begin, ip)?.map(|c| match c {
                    readytorun::R2rCode::Method { start, method_desc, unwind } => {
                        ManagedCode { method_start: start, method: method_desc, kind: ManagedCodeKind::ReadyToRun, unwind: Some(unwind) }
                    }
                    readytorun::R2rCode::Thunk => ManagedCode { method_start: ip, method: None, kind: ManagedCodeKind::Stub, unwind: None },
                }))
            }
            // Precodes and other stubs: code, but no method, and no start knot can tell.
            SectionKind::Stubs => Ok(Some(ManagedCode { method_start: ip, method: None, kind: ManagedCodeKind::Stub, unwind: None })),
            SectionKind::Unknown => Ok(None),
        }
    }

    /// As [`CodeLookup::name`], with the reason when the method could not be named.
    pub(crate) fn try_name(&self, method: u64) -> Result<ManagedName, DotnetError> {
        let t = self.runtime.target();
        let namer = TypeNamer::of(&t, &self.runtime);
        let md = methoddesc::read(&t, method)?;
        methodname::name(&t, &namer, &md)
    }
}

fn cached<V: Clone>(cache: &Mutex<HashMap<u64, V>>, key: u64, make: impl FnOnce() -> V) -> V {
    if let Ok(c) = cache.lock()
        && let Some(v) = c.get(&key)
    {
        return v.clone();
    }
    let v = make();
    if let Ok(mut c) = cache.lock() {
        if c.len() >= MAX_CACHED {
            c.clear();
        }
        c.insert(key, v.clone());
    }
    v
}

impl CodeLookup for CodeMap<'_> {
    fn lookup(&self, ip: u64) -> Option<ManagedCode> {
        cached(&self.lookups, ip, || match self.try_lookup(ip) {
            Ok(c) => c,
            Err(e) => {
                self.keep_error(format!("code at {ip:#x}"), e);
                None
            }
        })
    }

    fn name(&self, method: u64) -> Option<ManagedName> {
        cached(&self.names, method, || match self.try_name(method) {
            Ok(n) => Some(n),
            Err(e) => {
                self.keep_error(format!("name of MethodDesc {method:#x}"), e);
                None
            }
        })
    }

    /// The dump, then the managed images' files for the pages it left out: where the lookup
    /// found a ReadyToRun method's unwind data, the unwinder reads it.
    fn unwind_memory(&self) -> Option<&dyn Memory> {
        Some(&self.runtime.image)
    }
}

#[allow(dead_code)]
fn assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<CodeMap<'static>>();
}
