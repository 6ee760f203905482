//! The .NET dumps the tests read: the committed ones (`samples/dotnet/dumps/<sample>/<kind>/`,
//! read with the committed runtime and app files only, as on a machine without .NET) and those
//! `samples/dotnet/make-dumps.sh` made here (`target/samples/dotnet/`, read with the machine's own
//! runtime). One walk, so every .NET test reads the same set the same way.

use crate::workspace_root;
use flate2::read::GzDecoder;
use std::path::{Path, PathBuf};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// One dump of one .NET sample, with where its files are found.
#[derive(Debug, Clone)]
pub struct DotnetDump {
    pub sample: String,
    pub kind: String,
    /// `core`, `core.gz` or `core.zst` (knot reads all three; new samples use `zstd -19 --long=27`,
    /// a fifth smaller than `gzip -9`).
    pub core: PathBuf,
    /// The dump's directory: `sos/` (SOS's readings of it) is beside the core.
    pub dir: PathBuf,
    pub committed: bool,
    /// For the Locator: the runtime's and the app's files (committed dumps; empty otherwise).
    pub search_dirs: Vec<PathBuf>,
    /// An empty sysroot for committed dumps, hiding any runtime installed here; `None` otherwise.
    pub sysroot: Option<PathBuf>,
    /// A dump of an arm64 process (`samples/dumps-aarch64/dotnet/`), read with no .NET file at
    /// all (its runtime through knot's catalogue, its assemblies from the dump) and the native
    /// arm64 samples' sysroot (`samples/dumps-aarch64/sysroot`: libc, the dynamic linker).
    pub aarch64: bool,
}

impl DotnetDump {
    /// `sample/kind`, marked when made on this machine.
    pub fn name(&self) -> String {
        format!("{}/{}{}{}", self.sample, self.kind, if self.aarch64 { " (arm64)" } else { "" }, if self.committed { "" } else { " (made here)" })
    }
}

/// The samples `make-dumps.sh` publishes (their own runtime), committed in `deploy-dumps/`.
pub const DEPLOY_SAMPLES: &[&str] = &[
    "self_contained",
    "single_file",
    "net9_abba",
    "net9_heap",
    "runtime_10_0_15",
    "net8_abba",
    "net8_heap",
    "net8_sync_over_async",
    "net8_gc_oom",
    "net8_generics",
];

/// .NET 8's deployment samples (8.0.34, self-contained), compared with SOS as the committed
/// samples are by the tests that read [`net8_dumps`] beside [`dumps`].
pub const NET8_SAMPLES: &[&str] = &["net8_abba", "net8_heap", "net8_sync_over_async", "net8_gc_oom", "net8_generics"];

/// `samples/dotnet/deploy-dumps`.
pub fn deploy_root() -> PathBuf {
    workspace_root().join("samples/dotnet/deploy-dumps")
}

/// The committed dumps of [`NET8_SAMPLES`] that have SOS's reading `oracle` beside them, read
/// from the dump alone (an empty sysroot, no file: the runtime through knot's catalogue and
/// data, the assemblies from the dump), sorted by sample.
pub fn net8_dumps(oracle: &str) -> Vec<DotnetDump> {
    let mut out = Vec::new();
    for sname in NET8_SAMPLES {
        for dir in subdirs(&deploy_root().join(sname)) {
            let Some(core) = [dir.join("core"), dir.join("core.gz"), dir.join("core.zst")].into_iter().find(|p| p.is_file()) else { continue };
            if dir.join(oracle).is_file() {
                out.push(DotnetDump { sample: sname.to_string(), kind: file_name(&dir), core, dir, committed: true, search_dirs: Vec::new(), sysroot: Some(empty_sysroot()), aarch64: false });
            }
        }
    }
    out
}

/// `samples/dotnet/dumps`.
pub fn committed_root() -> PathBuf {
    workspace_root().join("samples/dotnet/dumps")
}

/// `samples/dumps-aarch64/dotnet`: the committed dumps of .NET samples run on arm64.
pub fn aarch64_root() -> PathBuf {
    workspace_root().join("samples/dumps-aarch64/dotnet")
}

/// Every dump that has SOS's reading `oracle` (a path under the dump's directory, e.g.
/// `sos/clrstack-all.txt`) beside it: committed ones first (x86-64's, then arm64's), then those
/// made here when `include_made`, then those under the directories in `KNOT_DOTNET_SAMPLES`
/// (`:`-separated; one with a `runtime/` folder is read like the committed one); sorted by
/// sample and kind within each.
pub fn dumps(oracle: &str, include_made: bool) -> Vec<DotnetDump> {
    let mut roots = vec![(committed_root(), true), (aarch64_root(), true)];
    if include_made {
        roots.push((crate::out_dir().join("dotnet"), false));
        if let Ok(extra) = std::env::var("KNOT_DOTNET_SAMPLES") {
            for p in extra.split(':').filter(|p| !p.is_empty()).map(PathBuf::from) {
                let committed = p.join("runtime").is_dir();
                roots.push((p, committed));
            }
        }
    }
    let mut out = Vec::new();
    for (root, committed) in roots {
        for sample in subdirs(&root) {
            let sname = file_name(&sample);
            // The deployment shapes (self-contained, single-file, .NET 9) are read by
            // tests/dotnet_catalog.rs alone: single-file and .NET 9 dumps are not fully readable.
            if sname == "runtime" || sname == "artifacts" || DEPLOY_SAMPLES.contains(&sname.as_str()) {
                continue;
            }
            for dir in subdirs(&sample) {
                let Some(core) = [dir.join("core"), dir.join("core.gz"), dir.join("core.zst")].into_iter().find(|p| p.is_file()) else { continue };
                if !dir.join(oracle).is_file() {
                    continue;
                }
                let aarch64 = root == aarch64_root();
                let (search_dirs, sysroot) = if aarch64 {
                    // The guest's libc and dynamic linker are the native arm64 samples' (the
                    // same Debian 12 image): their sysroot, which holds no runtime file.
                    (Vec::new(), Some(workspace_root().join("samples/dumps-aarch64/sysroot")))
                } else if committed {
                    let mut dirs = runtime_dirs_of(&root);
                    dirs.push(sample.join("app"));
                    (dirs, Some(empty_sysroot()))
                } else {
                    (Vec::new(), None)
                };
                out.push(DotnetDump { sample: sname.clone(), kind: file_name(&dir), core, dir, committed, search_dirs, sysroot, aarch64 });
            }
        }
    }
    out
}

/// The committed runtime files (`samples/dotnet/dumps/runtime/<version>/*.gz`), decompressed once
/// into `target/samples/dotnet-runtime/<version>`: one directory per runtime version.
pub fn runtime_dirs() -> Vec<PathBuf> {
    runtime_dirs_of(&committed_root())
}

/// As [`runtime_dirs`], for the dumps under `root`.
fn runtime_dirs_of(root: &Path) -> Vec<PathBuf> {
    static DONE: Mutex<BTreeMap<PathBuf, Vec<PathBuf>>> = Mutex::new(BTreeMap::new());
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    done.entry(root.to_path_buf())
        .or_insert_with(|| {
            let base = if root == committed_root() { crate::out_dir().join("dotnet-runtime") } else { root.join("runtime-unpacked") };
            subdirs(&root.join("runtime"))
                .into_iter()
                .map(|v| {
                    let into = base.join(file_name(&v));
                    gunzip_dir(&v, &into);
                    into
                })
                .collect()
        })
        .clone()
}

/// An empty directory to use as sysroot, so that no runtime installed on this machine is read.
pub fn empty_sysroot() -> PathBuf {
    let d = crate::out_dir().join("empty-sysroot");
    if let Err(e) = std::fs::create_dir_all(&d) {
        panic!("cannot create {}: {e}", d.display());
    }
    d
}

fn gunzip_dir(from: &Path, into: &Path) {
    if let Err(e) = std::fs::create_dir_all(into) {
        panic!("cannot create {}: {e}", into.display());
    }
    for f in subfiles(from) {
        let Some(name) = f.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".gz")) else { continue };
        let out = into.join(name);
        if out.exists() {
            continue;
        }
        // Written beside, then renamed: a partial file (another test binary, an interrupted run)
        // is never taken for the runtime's.
        let part = into.join(format!("{name}.{}.part", std::process::id()));
        let result = std::fs::File::open(&f).and_then(|src| {
            let mut o = std::fs::File::create(&part)?;
            std::io::copy(&mut GzDecoder::new(src), &mut o)?;
            std::fs::rename(&part, &out)
        });
        if let Err(e) = result {
            panic!("cannot decompress {} into {}: {e}", f.display(), out.display());
        }
    }
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    v.sort();
    v
}

fn subfiles(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
    v.sort();
    v
}

fn file_name(p: &Path) -> String {
    p.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string()
}
