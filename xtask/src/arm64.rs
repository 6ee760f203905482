//! `cargo xtask arm64-samples [--commit]`: knot's native samples made on arm64 (issue #33), in an
//! emulated arm64 Debian system: `xtask/arm64/image.sh` builds the system once under
//! `target/arm64-vm/` (never committed); each run boots it with `qemu-system-aarch64`, where
//! `xtask/arm64/guest-run.sh` builds the samples, dumps them with the kernel and `gcore` and
//! records gdb's readings; `--commit` copies them into `samples/dumps-aarch64/` (cores gzip -9).
//! Everything slow runs under `nice -n 19`: the machine is shared.

use anyhow::{Context, Result, bail};
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// Copy the dumps, their executables, readings, libraries and debug files into
    /// samples/dumps-aarch64/.
    #[arg(long)]
    commit: bool,
    /// Only build the system image (debootstrap, kernel, disk), make no samples.
    #[arg(long)]
    image_only: bool,
    /// Commit the results of the last run (target/arm64-vm/run/out) without booting the guest.
    #[arg(long, requires = "commit")]
    reuse: bool,
    /// Make the .NET samples instead of the native ones (issue #33, item 5): published
    /// self-contained for linux-arm64 on the host (`xtask/arm64/dotnet-inputs.sh`), dumped by
    /// createdump in the guest and read there by SOS (`xtask/arm64/guest-dotnet.sh`); `--commit`
    /// copies them into samples/dumps-aarch64/dotnet/.
    #[arg(long)]
    dotnet: bool,
    /// Give the guest at most this many minutes.
    #[arg(long, default_value_t = 60)]
    timeout_minutes: u64,
}

/// The native sources the guest builds (`samples/native/`).
const SOURCES: &[&str] = &["abba.c", "crash_null.c", "signal_handler.c", "common.h", "crash_common.h"];
/// The dumps the guest makes, as `name/kind` with the executable's name.
const DUMPS: &[(&str, &str)] =
    &[("abba/kernel", "abba"), ("abba/gcore", "abba"), ("crash_null/kernel", "crash_null"), ("signal_handler/kernel", "signal_handler")];

/// The .NET samples (`samples/dotnet/`) the guest runs with `--dotnet`, each dumped once (`heap`).
const DOTNET_SAMPLES: &[&str] = &["monitor_abba", "heap_population", "sync_over_async"];

fn sh(cmd: &mut Command, what: &str) -> Result<()> {
    let status = cmd.status().with_context(|| format!("running {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

pub fn run(a: Args) -> Result<()> {
    let root = knot_samples::workspace_root();
    let vm = root.join("target/arm64-vm");
    if a.reuse {
        return if a.dotnet { commit_dotnet(&root, &vm.join("run-dotnet/out")) } else { commit(&root, &vm.join("run/out")) };
    }
    let started = Instant::now();
    sh(Command::new("sh").arg(root.join("xtask/arm64/image.sh")).arg(&vm), "xtask/arm64/image.sh")?;
    eprintln!("arm64-samples: image ready after {:.0} s", started.elapsed().as_secs_f64());
    if a.image_only {
        return Ok(());
    }
    let run_dir = vm.join(if a.dotnet { "run-dotnet" } else { "run" });
    if run_dir.exists() {
        fs::remove_dir_all(&run_dir)?;
    }
    let input = run_dir.join("input");
    let in_img = run_dir.join("in.tar");
    if a.dotnet {
        let inputs = vm.join("dotnet-inputs");
        let mut prep = Command::new("sh");
        prep.arg(root.join("xtask/arm64/dotnet-inputs.sh")).arg(&root).arg(&inputs).args(DOTNET_SAMPLES);
        sh(&mut prep, "xtask/arm64/dotnet-inputs.sh")?;
        fs::create_dir_all(&input)?;
        fs::copy(root.join("xtask/arm64/guest-dotnet.sh"), input.join("run.sh"))?;
        let mut tar = Command::new("tar");
        tar.arg("cf").arg(&in_img).arg("-C").arg(&input).arg(".").arg("-C").arg(&inputs);
        tar.args(["apps", "dotnet", "dotnet-dump", "dotnet-dump-version.txt"]);
        sh(&mut tar, "tar of the guest's inputs")?;
    } else {
        fs::create_dir_all(input.join("samples/native"))?;
        fs::copy(root.join("xtask/arm64/guest-run.sh"), input.join("run.sh"))?;
        for s in SOURCES {
            fs::copy(root.join("samples/native").join(s), input.join("samples/native").join(s))?;
        }
        sh(Command::new("tar").arg("cf").arg(&in_img).arg("-C").arg(&input).arg("."), "tar of the guest's inputs")?;
    }
    let out_img = run_dir.join("out.img");
    fs::File::create(&out_img)?.set_len(1 << 30)?;
    let console = run_dir.join("console.log");
    let boot = Instant::now();
    let drive = |p: &Path| format!("file={},format=raw,if=virtio", p.display());
    let status = Command::new("timeout")
        .arg(format!("{}m", a.timeout_minutes))
        .args(["nice", "-n", "19", "qemu-system-aarch64", "-M", "virt", "-cpu", "max", "-m", "2048", "-smp", "2"])
        .args(["-nographic", "-no-reboot", "-kernel"])
        .arg(vm.join("vmlinuz"))
        .arg("-initrd")
        .arg(vm.join("initrd.img"))
        .args(["-append", "root=/dev/vda rw console=ttyAMA0 init=/knot-init"])
        .arg("-drive")
        .arg(drive(&vm.join("disk.img")))
        .arg("-drive")
        .arg(drive(&in_img))
        .arg("-drive")
        .arg(drive(&out_img))
        .stdin(std::process::Stdio::null())
        .stdout(fs::File::create(&console)?)
        .stderr(fs::File::create(run_dir.join("qemu.stderr"))?)
        .status()
        .context("running qemu-system-aarch64")?;
    eprintln!("arm64-samples: guest ran {:.0} s ({status}); console in {}", boot.elapsed().as_secs_f64(), console.display());
    let out = run_dir.join("out");
    fs::create_dir_all(&out)?;
    sh(Command::new("tar").arg("xf").arg(&out_img).arg("-C").arg(&out), "unpacking the guest's results")?;
    let made: Vec<String> = if a.dotnet {
        DOTNET_SAMPLES.iter().map(|s| format!("{s}/heap")).collect()
    } else {
        DUMPS.iter().map(|(dir, _)| dir.to_string()).collect()
    };
    for dir in &made {
        let core = out.join(dir).join("core");
        if !core.is_file() {
            bail!("the guest made no {} (see {})", core.display(), console.display());
        }
    }
    eprintln!("arm64-samples: results in {}", out.display());
    if a.commit {
        if a.dotnet {
            commit_dotnet(&root, &out)?;
        } else {
            commit(&root, &out)?;
        }
    }
    Ok(())
}

/// Copies the guest's results into `samples/dumps-aarch64/`, each core gzip -9'd.
fn commit(root: &Path, out: &Path) -> Result<()> {
    let dest = root.join("samples/dumps-aarch64");
    for sub in ["abba", "crash_null", "signal_handler", "sysroot", "debug"] {
        let p = dest.join(sub);
        if p.exists() {
            fs::remove_dir_all(&p)?;
        }
    }
    for (dir, bin) in DUMPS {
        let to = dest.join(dir);
        fs::create_dir_all(&to)?;
        let from = out.join(dir);
        for f in [*bin, "gdb-bt.txt", "gdb-bt.stderr.txt", "gdb-regs.txt", "gdb-bt.system.txt", "gdb-crash.txt", "gdb-locks.txt"] {
            if from.join(f).exists() {
                fs::copy(from.join(f), to.join(f))?;
            }
        }
        let gz = fs::File::create(to.join("core.gz"))?;
        sh(Command::new("nice").args(["-n", "19", "gzip", "-9nc"]).arg(from.join("core")).stdout(gz), "gzip -9 of a core")?;
    }
    sh(Command::new("cp").arg("-a").arg(out.join("sysroot")).arg(out.join("debug")).arg(&dest), "copying sysroot/ and debug/")?;
    // libc's debug file is 4 MB; without its variable locations (which no backtrace's function
    // names or inlined frames need) 3.4 MB. Dropping its line table too would bring it under 3 MB,
    // but knot then reads none of the file's DWARF (libc's frames lose their inlined frames and
    // DWARF names): kept.
    for f in walk(&dest.join("debug"))? {
        if fs::metadata(&f)?.len() > 3 << 20 {
            sh(Command::new("aarch64-linux-gnu-objcopy").arg("--remove-section=.debug_loclists").arg(&f), "aarch64-linux-gnu-objcopy (binutils-aarch64-linux-gnu)")?;
            eprintln!("arm64-samples: {} without .debug_loclists: {} bytes", f.display(), fs::metadata(&f)?.len());
        }
    }
    for f in ["versions.txt", "build-ids.txt", "uname.txt"] {
        if out.join(f).exists() {
            fs::copy(out.join(f), dest.join(f))?;
        }
    }
    Ok(())
}

/// Copies the guest's .NET results into `samples/dumps-aarch64/dotnet/<sample>/heap/`: the core
/// gzip -9'd, what the process printed, its threads, how it was dumped and SOS's readings. No
/// runtime file is committed: knot reads these dumps through its runtime catalogue.
fn commit_dotnet(root: &Path, out: &Path) -> Result<()> {
    let dest = root.join("samples/dumps-aarch64/dotnet");
    for s in DOTNET_SAMPLES {
        let (from, to) = (out.join(s).join("heap"), dest.join(s).join("heap"));
        if to.exists() {
            fs::remove_dir_all(&to)?;
        }
        fs::create_dir_all(to.join("sos"))?;
        for f in ["info.txt", "threads.txt", "stdout.txt", "stderr.txt"] {
            if from.join(f).exists() {
                fs::copy(from.join(f), to.join(f))?;
            }
        }
        for e in fs::read_dir(from.join("sos"))? {
            let p = e?.path();
            if let Some(name) = p.file_name() {
                fs::copy(&p, to.join("sos").join(name))?;
            }
        }
        let gz = fs::File::create(to.join("core.gz"))?;
        sh(Command::new("nice").args(["-n", "19", "gzip", "-9nc"]).arg(from.join("core")).stdout(gz), "gzip -9 of a core")?;
        let size = fs::metadata(to.join("core.gz"))?.len();
        eprintln!("arm64-samples: {s}/heap/core.gz {size} bytes");
        if size > 3 << 20 {
            bail!("{s}/heap/core.gz is {size} bytes, over the 3 MB a committed dump may have");
        }
    }
    for f in ["uname.txt", "dotnet-dump-version.txt", "timings.txt"] {
        if out.join(f).exists() {
            fs::copy(out.join(f), dest.join(f))?;
        }
    }
    Ok(())
}

/// Every regular file under `dir`.
fn walk(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            out.extend(walk(&p)?);
        } else if p.is_file() {
            out.push(p);
        }
    }
    Ok(out)
}
