//! Module files (executables, shared libraries, debug files): headers, sections, decompression.
#![no_main]

use libfuzzer_sys::fuzz_target;

// The same bodies as the property tests in tests/fuzz_parsers.rs.
#[path = "../../tests/fuzz_bodies/mod.rs"]
mod fuzz_bodies;

fuzz_target!(|data: &[u8]| {
    fuzz_bodies::elf_file(data);
});
