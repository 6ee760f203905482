//! The crate's own tests that span its stages (bad input, property tests of the parsers), and what
//! they share with the integration tests in `tests/`: the same helper files, included by path, so
//! a unit test reads a sample exactly as an integration test does.

#[path = "../../tests/common/mod.rs"]
#[allow(unreachable_pub)] // shared with tests/, where `pub` is how they are reached
pub(crate) mod common;
#[path = "../../tests/dumpedit/mod.rs"]
#[allow(unreachable_pub)] // shared with tests/, where `pub` is how they are reached
pub(crate) mod dumpedit;
#[path = "../../tests/fuzz_bodies/mod.rs"]
#[allow(unreachable_pub)] // shared with tests/, where `pub` is how they are reached
pub(crate) mod fuzz_bodies;

pub(crate) mod allocator;
pub(crate) mod patched;
mod bad_input;
mod fuzz_parsers;

/// Where the unit tests write scratch files (integration tests have `CARGO_TARGET_TMPDIR`).
pub(crate) fn scratch_root() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("tmp");
    let _ = std::fs::create_dir_all(&dir);
    dir
}
