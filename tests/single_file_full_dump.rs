//! A **full** dump of a single-file app is enough to name its types and frames: with
//! `createdump --full` the pages of the executable's bundle (the app's and CoreLib's assemblies,
//! mapped from it) are in the dump, so knot reads their metadata from dump memory with no files
//! at hand (`--sysroot /nonexistent`), where a `--withheap` dump of the same app names nothing
//! (tests/dotnet_catalog.rs: its verdict limit says to pass the executable or take a full dump).
//!
//! The dump is made here (about 130 MB, too big to commit) when the machine has the .NET SDK and
//! the 10.0.12 runtime's createdump: samples/dotnet/single_file is published single-file
//! (singlefilehost 10.0.12, as the committed dump's), run to its wedge and dumped with
//! `createdump --full`; the dump is deleted after. The truth is SOS: the app's type rows equal the
//! committed peer's `dumpheap -stat` (samples/dotnet/deploy-dumps/single_file/heap/peer/, the
//! same program run framework-dependent), and, when dotnet-dump is installed, every line of
//! knot's table equals `dumpheap -stat` on this very dump (SOS reads a full single-file dump with
//! the runtime pack's DAC). Skipped, with the reason, when a tool is missing.

use knot::Options;
use knot::process::Locator;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const RUNTIME: &str = "10.0.12";
/// The app's types: the population and the wedge's locks.
const APP: &str = "Knot.Samples.SingleFile.";

fn no_files() -> Locator {
    Locator { sysroot: Some(PathBuf::from("/nonexistent")), ..Locator::default() }
}

fn sample_dir() -> PathBuf {
    knot_samples::workspace_root().join("samples/dotnet/single_file")
}

/// `/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.12/createdump`, found through
/// `dotnet --list-runtimes`.
fn createdump() -> Result<PathBuf, String> {
    let out = Command::new("dotnet").arg("--list-runtimes").output().map_err(|e| format!("no dotnet: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with(&format!("Microsoft.NETCore.App {RUNTIME} "))).ok_or(format!("no .NET runtime {RUNTIME} installed"))?;
    let dir = line.split('[').nth(1).and_then(|r| r.split(']').next()).ok_or("dotnet --list-runtimes: no directory")?;
    let cd = Path::new(dir).join(RUNTIME).join("createdump");
    cd.is_file().then_some(cd.clone()).ok_or(format!("no {}", cd.display()))
}

/// Publishes the sample single-file into `work/pub`; its executable.
fn publish(work: &Path) -> Result<PathBuf, String> {
    let out = Command::new("dotnet")
        .args(["publish", "-c", "Debug", "-nologo", "-v", "q"])
        .arg(sample_dir().join("single_file.csproj"))
        .arg("-o")
        .arg(work.join("pub"))
        .arg(format!("-p:BaseIntermediateOutputPath={}/", work.join("obj").display()))
        .output()
        .map_err(|e| format!("dotnet publish: {e}"))?;
    if !out.status.success() {
        return Err(format!("dotnet publish failed ({}): {}", out.status, String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default()));
    }
    Ok(work.join("pub/single_file"))
}

/// Runs the app to its wedge ("ready": both locks held) and dumps it with `createdump --full`.
fn full_dump(exe: &Path, createdump: &Path, core: &Path) -> Result<(), String> {
    let mut child = Command::new(exe).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().map_err(|e| format!("starting {}: {e}", exe.display()))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let ready = BufReader::new(stdout).lines().map_while(Result::ok).any(|l| l.trim() == "ready");
        let _ = tx.send(ready);
    });
    let result = (|| {
        if rx.recv_timeout(Duration::from_secs(120)) != Ok(true) {
            return Err("the app did not print ready".to_string());
        }
        // As make-dump.sh: let both workers reach their second Monitor.Enter.
        std::thread::sleep(Duration::from_secs(2));
        let out = Command::new(createdump).arg("-f").arg(core).arg("--full").arg(child.id().to_string()).output().map_err(|e| format!("createdump: {e}"))?;
        if !out.status.success() {
            return Err(format!("createdump --full failed ({}): {}", out.status, String::from_utf8_lossy(&out.stdout)));
        }
        Ok(())
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// dotnet-dump: `DOTNET_DUMP`, else `~/.dotnet/tools/dotnet-dump` (where `dotnet tool install -g`
/// puts it), else on PATH.
fn dotnet_dump() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("DOTNET_DUMP") {
        return Some(p.into());
    }
    let home = PathBuf::from(std::env::var_os("HOME")?).join(".dotnet/tools/dotnet-dump");
    if home.is_file() {
        return Some(home);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join("dotnet-dump")).find(|p| p.is_file())
}

/// `dumpheap -stat`'s table, from `Statistics:` through the `Total` line.
fn table(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().skip_while(|l| l.trim_end() != "Statistics:").map(str::to_string).collect();
    if let Some(end) = lines.iter().position(|l| l.starts_with("Total ")) {
        lines.truncate(end + 1);
    }
    lines
}

/// A table's rows of the app's types as (count, bytes, name): the MethodTable column differs
/// between two runs.
fn app_rows(table: &[String]) -> Vec<(String, String, String)> {
    let mut rows: Vec<(String, String, String)> = table
        .iter()
        .filter(|l| l.contains(APP))
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (_, count, bytes) = (it.next()?, it.next()?, it.next()?);
            Some((count.to_string(), bytes.to_string(), it.collect::<Vec<_>>().join(" ")))
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn a_full_single_file_dump_names_types_and_frames_with_no_files() {
    let createdump = match createdump() {
        Ok(c) => c,
        Err(why) => return knot_samples::skipped(&format!("skipping the full single-file dump: {why}")),
    };
    let work = knot_samples::out_dir().join("single_file_full");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("mkdir");
    let exe = match publish(&work) {
        Ok(e) => e,
        Err(why) => return knot_samples::skipped(&format!("skipping the full single-file dump: {why}")),
    };
    let core = work.join("core");
    full_dump(&exe, &createdump, &core).unwrap_or_else(|e| panic!("making the full dump: {e}"));

    let r = knot::analyze(&core, &Options { locator: no_files(), ..Options::default() }).expect("the full dump reads");
    let heap = knot::heap::stat(&core, &knot::heap::HeapOptions { locator: no_files(), max_decompressed: None, max_memory: None, scratch_dir: None }).expect("its heap reads");
    let sos = dotnet_dump().map(|dd| {
        let dac = std::env::var_os("NUGET_PACKAGES")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".nuget/packages"))
            .join(format!("microsoft.netcore.app.runtime.linux-x64/{RUNTIME}/runtimes/linux-x64/native"));
        let out = Command::new(dd).arg("analyze").arg(&core).args(["-c", &format!("setclrpath {}", dac.display()), "-c", "dumpheap -stat", "-c", "exit"]).output().expect("dotnet-dump");
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    let _ = std::fs::remove_dir_all(&work);

    let json: Value = serde_json::to_value(&r).expect("report serialises");
    assert_eq!(json["verdict"], "deadlock");
    assert_eq!(json["verdict_limits"], serde_json::json!([]), "nothing missing in a full dump");
    // The cycle's monitors are named by their objects' types, the managed frames by method.
    let cycle = json["deadlocks"][0]["description"].as_str().unwrap_or_default();
    for t in ["Knot.Samples.SingleFile.LedgerLock", "Knot.Samples.SingleFile.AuditLock"] {
        assert!(cycle.contains(t), "the cycle does not name {t}: {cycle}");
    }
    let frames = json["threads"].to_string();
    for f in ["Knot.Samples.SingleFile.Program.WaitForLedgerLock", "Knot.Samples.SingleFile.Program.WaitForAuditLock", "System.Threading.Monitor.Enter"] {
        assert!(frames.contains(f), "no managed frame {f}");
    }
    assert!(heap.diagnostics.iter().all(|d| !d.message.contains("type name")), "{:#?}", heap.diagnostics);

    // Every app type row as the committed peer's dumpheap -stat has it (same program, same point).
    let text = heap.to_text();
    let knot = table(&text);
    assert!(!knot.iter().any(|l| l.contains("<unknown type")), "unnamed types:\n{text}");
    let peer_text = std::fs::read_to_string(knot_samples::workspace_root().join("samples/dotnet/deploy-dumps/single_file/heap/peer/dumpheap-stat.txt")).expect("peer/dumpheap-stat.txt");
    let peer = app_rows(&table(&peer_text));
    assert!(peer.len() >= 10, "peer's app rows: {peer:?}");
    assert_eq!(app_rows(&knot), peer, "the app's rows against the peer's dumpheap -stat");
    // The whole table against SOS on this dump.
    match sos {
        Some(sos) => {
            let (mut a, mut b) = (knot.clone(), table(&sos));
            a.sort();
            b.sort();
            assert!(b.len() > 3, "SOS's dumpheap -stat on the full dump:\n{sos}");
            assert_eq!(a, b, "knot heap stat against SOS dumpheap -stat on the same full dump");
        }
        None => knot_samples::skipped("the full single-file dump: dotnet-dump not found, its table not compared with SOS's on the same dump"),
    }
}
