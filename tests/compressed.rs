//! Compressed cores: read whole when the stream is whole, as a truncated core when it breaks off,
//! and refused at once when what comes out is not an ELF file.

mod common;

use knot::analyze;
use knot::core::{Core, CoreError};
use knot_samples::DumpKind;
use std::io::Write;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn a_whole_gzip_core_reads_as_the_core() {
    let dump = common::committed("abba", DumpKind::Gcore);
    let plain = common::analyze(&dump);
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("core.gz");
    std::fs::write(&gz, gzip(&std::fs::read(&dump.core).unwrap())).unwrap();
    let packed = analyze(&gz, &common::options_for(&dump)).unwrap();
    assert_eq!(packed.deadlocks.len(), plain.deadlocks.len());
    assert!(!packed.dump.partial, "{:#?}", packed.diagnostics.iter().filter(|d| d.severity == knot::Severity::Warning).collect::<Vec<_>>());
    assert!(packed.diagnostics.iter().any(|d| d.message.contains("gzip-compressed")));
}

#[test]
fn a_gzip_stream_cut_short_is_read_as_a_truncated_core() {
    let dump = common::committed("abba", DumpKind::Gcore);
    let bytes = std::fs::read(&dump.core).unwrap();
    let packed = gzip(&bytes);
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("core.gz");
    std::fs::write(&gz, &packed[..packed.len() * 3 / 4]).unwrap();
    match Core::open(&gz) {
        Ok(core) => {
            assert!(core.is_partial());
            assert!(core.diagnostics.iter().any(|d| d.message.contains("breaks off")), "{:?}", core.diagnostics);
        }
        // Cut before the notes: the prefix holds no thread, which is an error of its own.
        Err(e) => assert!(matches!(e, CoreError::NoThreads { .. } | CoreError::NotesTruncated { .. }), "{e}"),
    }
}

#[test]
fn compressed_data_that_is_not_elf_is_refused_before_it_is_unpacked() {
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("bomb.gz");
    // 64 MiB of zeros packs into a few KiB; it must be refused after the first block.
    std::fs::write(&gz, gzip(&vec![0u8; 64 << 20])).unwrap();
    let err = Core::open(&gz).unwrap_err();
    assert!(err.to_string().contains("gzip"), "{err}");
    let chain = format!("{:?}", err);
    assert!(chain.contains("not an ELF file"), "{chain}");
}

#[test]
fn a_full_or_missing_temporary_directory_is_named_as_the_cause_not_the_dump() {
    let dump = common::committed("abba", DumpKind::Gcore);
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("core.gz");
    std::fs::write(&gz, gzip(&std::fs::read(&dump.core).unwrap())).unwrap();
    // A TMPDIR that cannot take the file stands for a full disk: the error must say where knot
    // tried to write and what to do, not that the stream is corrupt.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_knot"))
        .args(["analyze", "--format", "json"])
        .arg(&gz)
        .env("TMPDIR", dir.path().join("no-such-dir"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("temporary file") && stderr.contains("no-such-dir") && stderr.contains("TMPDIR"), "{stderr}");
    assert!(!stderr.contains("cannot decompress"), "{stderr}");
}

// Issue 13, item 6: decompression bounded by what the core declares, and by an option.

/// A gzip stream of the abba kernel core followed by `extra_mib` MiB of zeros, as concatenated
/// gzip members (one MiB packed once, repeated: cheap to make, 1 000 times smaller than it unpacks).
fn core_then_zeros(extra_mib: usize) -> (Vec<u8>, usize) {
    let dump = common::committed("abba", DumpKind::Kernel);
    let core = std::fs::read(&dump.core).unwrap();
    let mut out = gzip(&core);
    let zeros = gzip(&vec![0u8; 1 << 20]);
    for _ in 0..extra_mib {
        out.extend_from_slice(&zeros);
    }
    (out, core.len())
}

#[test]
fn a_stream_longer_than_the_core_declares_is_cut_at_the_cores_end() {
    let (packed, core_len) = core_then_zeros(256);
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("core.gz");
    std::fs::write(&gz, &packed).unwrap();
    let core = Core::open(&gz).expect("the core in front reads");
    assert!(core.file_bytes().len() <= core_len, "{} bytes written for a {core_len}-byte core", core.file_bytes().len());
    assert!(core.diagnostics.iter().any(|d| d.message.contains("goes on past")), "{:?}", core.diagnostics);
    assert!(!core.is_partial(), "the core itself is whole");
}

#[test]
fn an_elf_file_that_is_not_a_core_is_refused_after_the_first_block() {
    let dump = common::committed("abba", DumpKind::Kernel);
    let mut bytes = std::fs::read(&dump.binary).unwrap();
    bytes.resize(bytes.len() + (64 << 20), 0);
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("program.gz");
    std::fs::write(&gz, gzip(&bytes)).unwrap();
    let err = Core::open(&gz).unwrap_err();
    assert!(format!("{err:?}").contains("not a 64-bit little-endian core"), "{err:?}");
}

#[test]
fn a_core_declaring_more_than_the_limit_is_refused_with_both_numbers() {
    let (packed, core_len) = core_then_zeros(0);
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("core.gz");
    std::fs::write(&gz, &packed).unwrap();
    let limit = (core_len / 2) as u64;
    match Core::open_limited(&gz, limit) {
        Err(e @ CoreError::DecompressTooBig { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&format!("more than the limit of {limit} bytes")), "{text}");
        }
        other => panic!("expected DecompressTooBig, got {other:?}"),
    }
    // The command line's option reaches it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_knot")).arg("analyze").arg(&gz).args(["--max-decompressed-mib", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("more than the limit of 0 bytes"), "{}", String::from_utf8_lossy(&out.stderr));
}
