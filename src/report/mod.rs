//! The report: one data model (`model`) and its renderings. Renderers never compute facts.

pub(crate) mod crash_html;
pub(crate) mod crash_text;
pub(crate) mod dump;
pub mod flame;
pub(crate) mod fold;
pub(crate) mod async_html;
pub(crate) mod async_text;
pub(crate) mod gc_html;
pub(crate) mod gc_text;
pub mod heap_diff;
pub mod heap_root;
pub mod heap_stat;
pub mod html;
mod json_format;
pub(crate) mod model;
pub(crate) mod svg;
pub mod text;
pub mod watch_line;
pub mod words;

pub use crate::hex::Hex;
// The parts of the model that stages before the report define: re-exported so a caller names
// every type it reads from a `Report` through `knot::report`.
pub use crate::crash::model::{Access, AddressKind, CrashKind, CrashMessage, CrashReport, CrashSignal, ExceptionReport, InstructionReport, MappingReport, OperandReport, OverwrittenReturn, Recursion, RegisterValue};
pub use crate::core::SignalSource;
pub use crate::unwind::frame::Trust;
pub use crate::waits::evidence::{Evidence, FrameHold, Inference, PointerPlace, UnknownOwner};
pub use crate::waits::lock::{AsyncWaiter, BarrierFacts, Certainty, Holder, LockFact, LockKind, LockStorage, ManagedLock, ManagedTask, Owner, QueuedRelease, Release};
pub use crate::waits::state::{IdleRole, Pool, ThreadState};
pub use model::*;
use std::io::Write as _;

/// The report as pretty-printed JSON.
pub fn to_json(report: &Report) -> String {
    // Serializing plain data structures cannot fail; fall back to an error object regardless.
    serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// Writes the report as pretty-printed JSON (the bytes of [`to_json`] and a newline) to `out`,
/// as it is serialized: a report of thousands of threads is never held twice in memory.
pub fn write_json(report: &Report, out: impl std::io::Write) -> std::io::Result<()> {
    use serde::Serialize as _;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    report.serialize(&mut serde_json::Serializer::with_formatter(&mut out, json_format::Indented::default()))?;
    out.write_all(b"\n")?;
    out.flush()
}

/// The JSON Schema of [`Report`], as committed in docs/schema/report-v{SCHEMA_VERSION}.schema.json.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Report);
    serde_json::to_string_pretty(&schema).unwrap_or_default()
}
