//! The whole pipeline: core → modules → stacks → report. Module files are looked up only under
//! $KNOT_FUZZ_SYSROOT when it is set (e.g. samples/dumps/sysroot); otherwise none is found, so
//! runs do not depend on the machine's files.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

// The same bodies as the property tests in tests/fuzz_parsers.rs.
#[path = "../../tests/fuzz_bodies/mod.rs"]
mod fuzz_bodies;

fn options() -> &'static knot::Options {
    static OPTS: OnceLock<knot::Options> = OnceLock::new();
    OPTS.get_or_init(|| fuzz_bodies::fuzz_options(fuzz_bodies::locator_from_env()))
}

fuzz_target!(|data: &[u8]| {
    let _ = fuzz_bodies::pipeline(data.to_vec(), options());
});
