//! What can go wrong reading the runtime's structures, with the address it went wrong at.

use crate::process::MemoryError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DotnetError {
    #[error("reading {what}: {source}")]
    Memory { what: String, source: MemoryError },
    #[error("no contract descriptor at {at:#x}: magic is {found:#018x}, not DNCCDAC\\0")]
    BadMagic { at: u64, found: u64 },
    #[error("contract descriptor at {at:#x}: {why}")]
    BadDescriptor { at: u64, why: String },
    #[error("contract descriptor JSON at {at:#x}: {why}")]
    BadJson { at: u64, why: String },
    #[error("the descriptor describes no type {0}")]
    MissingType(String),
    #[error("the descriptor's type {ty} has no field {field}")]
    MissingField { ty: String, field: String },
    #[error("the descriptor's type {ty} is impossible: {why}")]
    BadLayout { ty: String, why: String },
    #[error("the descriptor has no global {0}")]
    MissingGlobal(String),
    #[error("global {name} names pointer-data slot {index}, but there are {count}")]
    PointerDataIndex { name: String, index: u32, count: usize },
    #[error("global {0} is text, not a number")]
    TextGlobal(String),
    #[error("{what} at {at:#x}: more than {limit} entries (a corrupt or hostile count)")]
    TooMany { what: &'static str, at: u64, limit: u64 },
    #[error("{what}: a cycle at {at:#x}")]
    Cycle { what: &'static str, at: u64 },
    #[error("{what} at {at:#x}: {why}")]
    Invalid { what: &'static str, at: u64, why: String },
    #[cfg(test)]
    #[error("not a .NET process (no libcoreclr.so)")]
    NoRuntime,
    #[error("runtime reader unsupported: {0}")]
    Unsupported(String),
    #[error("metadata of the module at {at:#x}: {why}")]
    Metadata { at: u64, why: String },
    /// A class's statics were never allocated: its static constructor never ran, so its static
    /// fields hold their defaults (nothing was ever stored in them).
    #[error("{holder} at {at:#x}: {field} not allocated (the class's statics were never initialized)")]
    StaticsNotInitialized { holder: &'static str, at: u64, field: &'static str },
}

impl DotnetError {
    pub(crate) fn memory(what: impl Into<String>, source: MemoryError) -> DotnetError {
        DotnetError::Memory { what: what.into(), source }
    }

    /// The address the error is about, when it has one.
    pub(crate) fn address(&self) -> Option<u64> {
        match self {
            DotnetError::Memory { source, .. } => Some(source.address()),
            DotnetError::BadMagic { at, .. }
            | DotnetError::BadDescriptor { at, .. }
            | DotnetError::BadJson { at, .. }
            | DotnetError::TooMany { at, .. }
            | DotnetError::Cycle { at, .. }
            | DotnetError::Invalid { at, .. }
            | DotnetError::Metadata { at, .. } => Some(*at),
            _ => None,
        }
    }
}
