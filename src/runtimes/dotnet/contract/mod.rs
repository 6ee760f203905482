//! Finding the runtime and its version's facts: `libcoreclr.so` (or a single-file host) among the
//! modules, its exported contract descriptor read once, the memory view over the dump and the
//! managed images, and what a build's descriptor does not say, as per-build data from
//! `analyzers/dotnet/` (the version's facts, chosen once by the runtime's build).

pub(crate) mod catalog;
pub(crate) mod context;
pub(crate) mod descriptor;
pub(crate) mod elf;
pub(crate) mod facts;
pub(crate) mod gc_constants;
pub(crate) mod hard_limit_store;
pub(crate) mod locate;
pub(crate) mod supplement;
pub(crate) mod target;
