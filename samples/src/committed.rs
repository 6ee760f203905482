//! Dumps committed under `samples/dumps/`, so knot's tests run where gcc or
//! gdb are missing. Layout:
//!
//! ```text
//! samples/dumps/<name>/<kind>/core.gz      gzip -9 of the core (core.zst: zstd -19 --long=27)
//! samples/dumps/<name>/<kind>/<name>       the dumped executable
//! samples/dumps/<name>/<kind>/gdb-bt.txt   gdb's reading, using only the committed files
//! samples/dumps/sysroot/...                the shared libraries the cores map
//! samples/dumps/debug/.build-id/xx/y.debug their debug files (and stripped's)
//! ```

use crate::maker::{self, record_crash_oracle, record_oracle, GDB_CRASH};
use crate::{Availability, DumpKind, SampleDump, catalogue, elf, workspace_root};
use anyhow::{Context, Result, anyhow, bail};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The dumps `cargo xtask samples --commit` writes.
pub const COMMITTED_SET: &[(&str, DumpKind)] = &[
    ("abba", DumpKind::Gcore),
    ("abba", DumpKind::Kernel),
    // Issue 12: timed-lock waits resumed by restart_syscall, dumped by the kernel.
    ("timed_abba", DumpKind::Kernel),
    // Issue 12: mappings that are not modules (io_uring, memfd, /dev/shm).
    ("odd_mappings", DumpKind::Kernel),
    // Issue 12: a read-held rwlock whose readers are inferred.
    ("rwlock_readers", DumpKind::Kernel),
    ("omitfp", DumpKind::Kernel),
    ("stripped", DumpKind::Gcore),
    // Issue 18: programs that die, C only (their libraries are the sysroot's libc and ld.so).
    ("crash_null", DumpKind::Kernel),
    ("crash_readonly", DumpKind::Kernel),
    ("crash_badfn", DumpKind::Kernel),
    ("crash_overflow", DumpKind::Kernel),
    ("crash_divzero", DumpKind::Kernel),
    ("crash_assert", DumpKind::Kernel),
    ("crash_double_free", DumpKind::Kernel),
    ("crash_sigbus", DumpKind::Kernel),
    ("idle_join", DumpKind::Kernel),
    // Issue 30: a library whose two PT_LOADs map file offset 0; a plugin dlopen()ed by a
    // relative path; a reader blocked behind a queued writer on a writer-preferring rwlock.
    ("old_layout", DumpKind::Kernel),
    ("relative_dlopen", DumpKind::Kernel),
    ("rwlock_queued_reader", DumpKind::Kernel),
    // Issue 30: a thread stopped in generated code with stale return addresses above it.
    ("generated_code", DumpKind::Kernel),
    // Issue 42: owners where knot did not look (PI mutexes, other processes, PID namespaces),
    // barriers.
    ("pi_abba", DumpKind::Kernel),
    ("pshared_child", DumpKind::Gcore),
    ("pidns_abba", DumpKind::Gcore),
    ("pidns_abba", DumpKind::Kernel),
    ("barrier_short", DumpKind::Kernel),
    // Issue 42: a return address overwritten by a buffer overflow; C++ template names.
    ("smashed_stack", DumpKind::Kernel),
    ("cxx_templates", DumpKind::Kernel),
    // Issue 42: owners inferred from the frame that holds the guard (a read-held rwlock in a
    // cycle; Rust std::sync::Mutex ABBA in a release build); waiters behind an exited owner.
    ("rwlock_cycle", DumpKind::Kernel),
    ("rust_release_abba", DumpKind::Kernel),
    ("owner_exited", DumpKind::Kernel),
    // Issue 42: CPython's threading.Lock and RLock (Debian's python3.11 with the script).
    ("py_lock_abba", DumpKind::Gcore),
];

/// Dumps committed as `core.zst` (issue 42's, and later ones); the older ones stay `core.gz`.
const NEW_ZSTD: &[&str] =
    &["pi_abba", "pshared_child", "pidns_abba", "barrier_short", "rwlock_cycle", "cxx_templates", "rust_release_abba", "smashed_stack", "owner_exited", "py_lock_abba"];

/// A program larger than this is committed as `<name>.zst` (a release build's debug info).
const BINARY_ZSTD_ABOVE: u64 = 1 << 20;

/// `<workspace>/samples/dumps`.
pub fn dumps_dir() -> PathBuf {
    workspace_root().join("samples").join("dumps")
}

fn rel_dumps() -> PathBuf {
    PathBuf::from("samples").join("dumps")
}

/// The committed dump `name`/`kind`, its core decompressed (once, cached)
/// into `target/samples/committed/<name>/<kind>/core`. `None` if no such
/// dump is committed. Panics if it is committed but cannot be unpacked.
pub fn committed(name: &str, kind: DumpKind) -> Option<SampleDump> {
    match try_committed(name, kind) {
        Ok(d) => d,
        Err(e) => panic!("knot-samples: committed dump {name} ({kind}): {e:#}"),
    }
}

/// [`committed`] returning errors instead of panicking.
pub fn try_committed(name: &str, kind: DumpKind) -> Result<Option<SampleDump>> {
    unpack_committed(&dumps_dir(), "committed", name, kind)
}

/// The dumps made on arm64 (issue #33, `cargo xtask arm64-samples --commit`): abba's kernel
/// core and gcore, crash_null's and signal_handler's kernel cores.
pub const COMMITTED_AARCH64_SET: &[(&str, DumpKind)] = &[
    ("abba", DumpKind::Kernel),
    ("abba", DumpKind::Gcore),
    ("crash_null", DumpKind::Kernel),
    ("signal_handler", DumpKind::Kernel),
];

/// `<workspace>/samples/dumps-aarch64`: the native samples made on arm64, with their own
/// sysroot and debug files.
pub fn aarch64_dumps_dir() -> PathBuf {
    workspace_root().join("samples").join("dumps-aarch64")
}

/// The committed arm64 dump `name`/`kind`, as [`committed`] (unpacked into
/// `target/samples/committed-aarch64/`); `None` if no such dump is committed.
pub fn committed_aarch64(name: &str, kind: DumpKind) -> Option<SampleDump> {
    match unpack_committed(&aarch64_dumps_dir(), "committed-aarch64", name, kind) {
        Ok(d) => d,
        Err(e) => panic!("knot-samples: committed arm64 dump {name} ({kind}): {e:#}"),
    }
}

fn unpack_committed(dumps: &Path, cache: &str, name: &str, kind: DumpKind) -> Result<Option<SampleDump>> {
    let src = dumps.join(name).join(kind.as_str());
    let Some(packed) = [src.join("core.gz"), src.join("core.zst")].into_iter().find(|p| p.is_file()) else {
        return Ok(None);
    };
    let spec = catalogue::find(name)
        .ok_or_else(|| anyhow!("committed dump for unknown sample {name:?}"))?;
    let out = crate::out_dir()
        .join(cache)
        .join(name)
        .join(kind.as_str());
    let core = out.join("core");
    unpack(&packed, &core)?;
    // A large program (a release build's debug info) is committed compressed beside the core.
    let zst_binary = src.join(format!("{}.zst", spec.name));
    let binary = if zst_binary.is_file() {
        let b = out.join(spec.name);
        unpack(&zst_binary, &b)?;
        b
    } else {
        src.join(spec.name)
    };
    Ok(Some(SampleDump {
        name: name.to_string(),
        kind,
        core,
        binary,
        sysroot: Some(dumps.join("sysroot")),
        debug_dir: Some(dumps.join("debug")),
        gdb_bt: src.join("gdb-bt.txt"),
    }))
}

/// Decompresses `packed` (`.gz` or `.zst`) into `to` (atomically, once: kept while newer).
fn unpack(packed: &Path, to: &Path) -> Result<()> {
    if is_unpacked(packed, to)? {
        return Ok(());
    }
    let out = to.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let tmp = out.join(format!(
        "{}.tmp-{}-{:?}",
        to.file_name().and_then(|n| n.to_str()).unwrap_or("unpacked"),
        std::process::id(),
        std::thread::current().id()
    ));
    let res = (|| -> Result<()> {
        let input = File::open(packed).with_context(|| format!("opening {}", packed.display()))?;
        let mut dec: Box<dyn Read> = if packed.extension().is_some_and(|e| e == "zst") {
            Box::new(ruzstd::decoding::StreamingDecoder::new(input).map_err(|e| anyhow!("{}: {e}", packed.display()))?)
        } else {
            Box::new(GzDecoder::new(input))
        };
        let mut w = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        io::copy(&mut dec, &mut w).with_context(|| format!("decompressing {}", packed.display()))?;
        w.sync_all()?;
        let mode = fs::metadata(packed)?.permissions();
        fs::set_permissions(&tmp, mode)?;
        fs::rename(&tmp, to).with_context(|| format!("renaming to {}", to.display()))?;
        Ok(())
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res
}

/// Whether `core` holds `packed` unpacked: newer, and (for gzip) of the size it recorded.
fn is_unpacked(packed: &Path, core: &Path) -> Result<bool> {
    let Ok(meta) = fs::metadata(core) else {
        return Ok(false);
    };
    let packed_time = fs::metadata(packed)?.modified()?;
    if meta.modified()? < packed_time {
        return Ok(false);
    }
    if packed.extension().is_some_and(|e| e == "zst") {
        // Written whole or not at all (renamed into place), after the file it came from.
        return Ok(true);
    }
    let mut f = File::open(packed)?;
    f.seek(SeekFrom::End(-4))?;
    let mut isize = [0u8; 4];
    f.read_exact(&mut isize)?;
    Ok(meta.len() as u32 == u32::from_le_bytes(isize))
}

/// Regenerates the committed dumps (all of [`COMMITTED_SET`], or those whose
/// name is in `only`), the sysroot and debug dir they need, and their
/// oracles. `log` receives progress lines.
pub fn regenerate_committed(only: &[String], log: &mut dyn FnMut(&str)) -> Result<Vec<SampleDump>> {
    let root = workspace_root();
    let dumps = dumps_dir();
    let set: Vec<(&str, DumpKind)> = COMMITTED_SET
        .iter()
        .copied()
        .filter(|(n, _)| only.is_empty() || only.iter().any(|o| o == n))
        .collect();
    if set.is_empty() {
        bail!("none of {only:?} is in the committed set {COMMITTED_SET:?}");
    }
    if only.is_empty() {
        for d in ["sysroot", "debug"] {
            let p = dumps.join(d);
            if p.exists() {
                fs::remove_dir_all(&p).with_context(|| format!("removing {}", p.display()))?;
            }
        }
    }
    let mut made = Vec::new();
    for &(name, kind) in &set {
        let spec = catalogue::find(name).ok_or_else(|| anyhow!("{name} is not in the catalogue"))?;
        let live = match crate::try_ensure_with_args(name, kind, &[])? {
            Availability::Ready(d) => d,
            Availability::Skipped(why) => bail!("cannot make {name} ({kind}): {why}"),
        };
        log(&format!(
            "committing {name} ({kind}) from {}",
            live.core.display()
        ));
        let dest = dumps.join(name).join(kind.as_str());
        if dest.exists() {
            fs::remove_dir_all(&dest).with_context(|| format!("removing {}", dest.display()))?;
        }
        fs::create_dir_all(&dest).with_context(|| format!("creating {}", dest.display()))?;
        let binary_size = fs::metadata(&live.binary).map_or(0, |m| m.len());
        if binary_size > BINARY_ZSTD_ABOVE {
            zstd(&live.binary, &dest.join(format!("{name}.zst")))?;
        } else {
            copy_file(&live.binary, &dest.join(name))?;
        }
        if live.debug_dir.is_some() {
            let debug = live.binary.with_extension("debug");
            copy_file(&debug, &dest.join(format!("{name}.debug")))?;
            let id = elf::build_id(&debug)?
                .ok_or_else(|| anyhow!("{} has no build-id", debug.display()))?;
            copy_file(&debug, &elf::build_id_path(&dest.join("debug"), &id))?;
            copy_file(&debug, &elf::build_id_path(&dumps.join("debug"), &id))?;
        }
        if NEW_ZSTD.contains(&name) {
            zstd(&live.core, &dest.join("core.zst"))?;
        } else {
            gzip(&live.core, &dest.join("core.gz"))?;
        }
        // The sample's own libraries go beside its program (knot's `--search-dir`, gdb's
        // `solib-search-path`); the system's into the shared sysroot.
        let own: Vec<&str> = spec.libs.iter().map(|l| l.name).collect();
        let live_dir = live.binary.parent().unwrap_or(Path::new("."));
        for name in &own {
            copy_file(&live_dir.join(name), &dest.join(name))?;
        }
        // An interpreter's libraries (libm, libz, libexpat) are read by their symbols: their
        // debug files would double a Python sample's size.
        let debug_files = spec.lang != catalogue::Lang::Python;
        for lib in maker::shared_libraries(&live)? {
            let name = lib.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if own.contains(&name) {
                continue;
            }
            add_to_sysroot(&lib, &dumps, debug_files)?;
        }
        made.push((name, kind));
    }

    // Oracles last, reading only committed files (paths relative to the
    // workspace so the text names no machine-specific directory).
    let mut out = Vec::new();
    for (name, kind) in made {
        let dump = try_committed(name, kind)?.ok_or_else(|| anyhow!("{name} ({kind}) vanished"))?;
        let rel = |p: &Path| {
            p.strip_prefix(&root)
                .map(Path::to_path_buf)
                .unwrap_or_else(|_| p.to_path_buf())
        };
        let mut rel_dump = dump.clone();
        rel_dump.sysroot = Some(rel_dumps().join("sysroot"));
        rel_dump.debug_dir = Some(rel_dumps().join("debug"));
        record_oracle(
            &rel_dump,
            &root,
            &rel(&dump.binary),
            &rel(&dump.core),
            dump.gdb_bt.clone(),
        )?;
        log(&format!("recorded {}", dump.gdb_bt.display()));
        if kind == DumpKind::Kernel && catalogue::find(name).is_some_and(|s| s.death != catalogue::Death::Wedge) {
            let crash = dump.gdb_bt.with_file_name(GDB_CRASH);
            record_crash_oracle(&rel_dump, &root, &rel(&dump.binary), &rel(&dump.core), crash.clone())?;
            log(&format!("recorded {}", crash.display()));
        }
        out.push(dump);
    }
    Ok(out)
}

fn copy_file(from: &Path, to: &Path) -> Result<()> {
    if let Some(p) = to.parent() {
        fs::create_dir_all(p).with_context(|| format!("creating {}", p.display()))?;
    }
    fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

/// `zstd -19 --long=27` (a fifth smaller than `gzip -9`), with the zstd program.
fn zstd(from: &Path, to: &Path) -> Result<()> {
    let tool = maker::find_tool("zstd").ok_or_else(|| anyhow!("zstd not found on PATH (new dumps are committed as core.zst)"))?;
    let status = std::process::Command::new(tool)
        .args(["-q", "-f", "-19", "--long=27", "-o"])
        .arg(to)
        .arg(from)
        .status()
        .context("running zstd")?;
    if !status.success() {
        bail!("zstd {} failed: {status}", from.display());
    }
    Ok(())
}

fn gzip(from: &Path, to: &Path) -> Result<()> {
    let mut r = File::open(from).with_context(|| format!("opening {}", from.display()))?;
    let w = File::create(to).with_context(|| format!("creating {}", to.display()))?;
    let mut enc = GzEncoder::new(w, Compression::best());
    io::copy(&mut r, &mut enc).with_context(|| format!("compressing {}", from.display()))?;
    enc.finish()?.sync_all()?;
    Ok(())
}

/// Copies `lib` (as the dynamic linker named it) into the sysroot, links the
/// path it really resolves to (e.g. /usr/lib/... behind /lib) to that copy,
/// and copies its debug file from /usr/lib/debug/.build-id when there is one (and `debug_file`).
fn add_to_sysroot(lib: &Path, dumps: &Path, debug_file: bool) -> Result<()> {
    let sysroot = dumps.join("sysroot");
    let inside = |p: &Path| sysroot.join(p.strip_prefix("/").unwrap_or(p));
    let copy = inside(lib);
    if !copy.exists() {
        copy_file(lib, &copy)?;
    }
    let real = fs::canonicalize(lib).with_context(|| format!("resolving {}", lib.display()))?;
    let alias = inside(&real);
    if real != lib && fs::symlink_metadata(&alias).is_err() {
        if let Some(p) = alias.parent() {
            fs::create_dir_all(p)?;
        }
        let target = relative_path(alias.parent().unwrap_or(&sysroot), &copy);
        std::os::unix::fs::symlink(&target, &alias)
            .with_context(|| format!("linking {}", alias.display()))?;
    }
    if let Some(id) = elf::build_id(lib)?.filter(|_| debug_file) {
        let system = elf::build_id_path(Path::new("/usr/lib/debug"), &id);
        if system.is_file() {
            let dest = elf::build_id_path(&dumps.join("debug"), &id);
            if !dest.exists() {
                copy_file(&system, &dest)?;
            }
        }
    }
    Ok(())
}

/// `to` relative to directory `from` (both absolute, no symlinks between).
fn relative_path(from: &Path, to: &Path) -> PathBuf {
    let f: Vec<_> = from.components().collect();
    let t: Vec<_> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..f.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths() {
        assert_eq!(
            relative_path(Path::new("/s/usr/lib/x"), Path::new("/s/lib/x/libc.so.6")),
            PathBuf::from("../../../lib/x/libc.so.6")
        );
    }
}
