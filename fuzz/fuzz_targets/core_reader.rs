//! The ELF core reader: headers, segments, notes and threads from arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

// The same bodies as the property tests in tests/fuzz_parsers.rs.
#[path = "../../tests/fuzz_bodies/mod.rs"]
mod fuzz_bodies;

fuzz_target!(|data: &[u8]| {
    let _ = fuzz_bodies::core_reader(data);
});
