//! Per-architecture register sets. knot reads x86_64 cores today; the types keep the
//! architecture explicit so another one is an addition, not a rewrite.

pub(crate) mod syscalls;
pub(crate) mod x86_64;
