//! The `knot heap` commands on .NET dumps: a dump's GC heap read alone (no stacks, no locks),
//! and two dumps of one program compared (`knot heap diff OLD NEW`).

use crate::core::CoreError;
use crate::diagnostics::Diagnostic;
use crate::process::{Locator, Process};
use crate::report::heap_diff::HeapDiffReport;
use crate::runtimes::dotnet::gc::{self, diff, GcReading};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default)]
pub struct HeapOptions {
    /// Where module files are looked for (the runtime's, when the catalogue lacks its build).
    pub locator: Locator,
    /// A compressed core is decompressed to at most this many bytes (None: the default).
    pub max_decompressed: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum HeapError {
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error("{path}: no .NET runtime found in the dump")]
    NoRuntime { path: PathBuf },
    #[error("{path}: {why}")]
    NotRead { path: PathBuf, why: String },
}

/// One dump's heap.
pub(crate) struct HeapDump {
    pub(crate) path: PathBuf,
    #[allow(dead_code)] // for the object graph
    pub(crate) process: Process,
    pub(crate) gc: GcReading,
}

/// Opens the dump at `path` and walks its GC heap.
pub(crate) fn read(path: &Path, opts: &HeapOptions) -> Result<HeapDump, HeapError> {
    let limit = opts.max_decompressed.unwrap_or(crate::core::compressed::DEFAULT_MAX_DECOMPRESSED);
    let process = Process::open_limited(path, &opts.locator, limit)?;
    let gc = match gc::read(&process, &opts.locator, &[]) {
        None => return Err(HeapError::NoRuntime { path: path.to_path_buf() }),
        Some(Err(why)) => return Err(HeapError::NotRead { path: path.to_path_buf(), why }),
        Some(Ok(g)) => g,
    };
    if process.core.changed_while_read() {
        return Err(CoreError::ChangedWhileRead { path: path.to_path_buf() }.into());
    }
    Ok(HeapDump { path: path.to_path_buf(), process, gc })
}

/// `knot heap diff OLD NEW`: what grew from `old` to `new`, by type.
pub fn diff(old: &Path, new: &Path, opts: &HeapOptions) -> Result<HeapDiffReport, HeapError> {
    let a = read(old, opts)?;
    let b = read(new, opts)?;
    let d = diff::diff(&a.gc.stats, &b.gc.stats, (None, None));
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    // The heap's own: module files the stacks would need do not matter here.
    for (dump, which) in [(&a, "old"), (&b, "new")] {
        diagnostics.extend(dump.gc.diagnostics.iter().cloned().map(|mut d| {
            d.message = format!("{which} dump: {}", d.message);
            d
        }));
    }
    Ok(HeapDiffReport::of(&a.path, &b.path, &d, diagnostics))
}
