//! `cargo xtask snapshot OUT [--knot BIN]`: every report knot gives on the committed dumps, written
//! into one directory, so a change can be checked to alter only what it means to
//! (`diff -r OLD NEW`, or `cargo xtask snapshot --diff OLD NEW`).
//!
//! For each committed native dump: `knot analyze` as the tests read it (the committed sysroot,
//! debug directory and executable) in text, JSON and HTML. For each committed .NET dump (the
//! samples and the deployment shapes): the same with the committed runtime and app files, the
//! text and JSON again with `--sysroot /nonexistent` (a dump is enough), and `knot heap stat` in
//! text and JSON. Paths of this checkout are written as `<ROOT>` so two worktrees compare.

use anyhow::{Context, Result, bail};
use knot_samples::COMMITTED_SET;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(clap::Args)]
pub struct Args {
    /// Where to write the reports (created; emptied first).
    out: PathBuf,
    /// The knot binary to run (default: build this checkout's release binary).
    #[arg(long)]
    knot: Option<PathBuf>,
    /// Compare two snapshot directories instead: OUT is the old one, this the new one. Prints
    /// each file that differs (with `diff -u`'s first lines) and exits 1 if any does.
    #[arg(long, value_name = "NEW")]
    diff: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<()> {
    if let Some(new) = &args.diff {
        return diff(&args.out, new);
    }
    let root = knot_samples::workspace_root();
    let knot = match &args.knot {
        Some(k) => k.clone(),
        None => crate::bench::build_knot(&root, &crate::bench::target_dir(&root))?.0,
    };
    if args.out.exists() {
        fs::remove_dir_all(&args.out).with_context(|| format!("emptying {}", args.out.display()))?;
    }
    fs::create_dir_all(&args.out)?;
    let mut jobs: Vec<(String, Vec<OsString>)> = Vec::new();

    for &(name, kind) in COMMITTED_SET {
        let d = knot_samples::committed(name, kind)
            .with_context(|| format!("committed dump {name}/{kind} is missing"))?;
        let mut a: Vec<OsString> = vec!["analyze".into(), d.core.clone().into()];
        if let Some(s) = &d.sysroot {
            a.extend(["--sysroot".into(), s.clone().into()]);
        }
        if let Some(dd) = &d.debug_dir {
            a.extend(["--debug-dir".into(), dd.clone().into()]);
        }
        if let Some(p) = d.binary.parent() {
            a.extend(["--search-dir".into(), p.into()]);
        }
        a.extend(["--exe".into(), d.binary.clone().into()]);
        let tag = format!("native.{name}.{kind}");
        for fmt in ["text", "json", "html"] {
            let mut x = a.clone();
            x.extend(["--format".into(), fmt.into()]);
            jobs.push((format!("{tag}.analyze.{fmt}"), x));
        }
    }

    let dotnet_root = root.join("samples/dotnet");
    let runtime_dirs = knot_samples::dotnet::runtime_dirs();
    let empty = knot_samples::dotnet::empty_sysroot();
    for (base, deploy) in [(dotnet_root.join("dumps"), false), (dotnet_root.join("deploy-dumps"), true)] {
        for sample in sorted_dirs(&base) {
            let sname = file_name(&sample);
            if sname == "runtime" {
                continue;
            }
            for dir in sorted_dirs(&sample) {
                let Some(core) = ["core.gz", "core.zst"].iter().map(|n| dir.join(n)).find(|c| c.is_file()) else {
                    continue;
                };
                let tag = format!("dotnet.{sname}.{}", file_name(&dir));
                let mut files: Vec<OsString> = vec!["--sysroot".into(), empty.clone().into()];
                if !deploy {
                    for r in &runtime_dirs {
                        files.extend(["--search-dir".into(), r.clone().into()]);
                    }
                    files.extend(["--search-dir".into(), sample.join("app").into()]);
                }
                for fmt in ["text", "json", "html"] {
                    let mut x: Vec<OsString> = vec!["analyze".into(), core.clone().into()];
                    x.extend(files.iter().cloned());
                    x.extend(["--format".into(), fmt.into()]);
                    jobs.push((format!("{tag}.analyze.{fmt}"), x));
                }
                for fmt in ["text", "json"] {
                    let x: Vec<OsString> = vec!["analyze".into(), core.clone().into(), "--sysroot".into(), "/nonexistent".into(), "--format".into(), fmt.into()];
                    jobs.push((format!("{tag}.dump-alone.{fmt}"), x));
                    let mut x: Vec<OsString> = vec!["heap".into(), "stat".into(), core.clone().into()];
                    x.extend(files.iter().cloned());
                    x.extend(["--format".into(), fmt.into()]);
                    jobs.push((format!("{tag}.heap-stat.{fmt}"), x));
                }
            }
        }
    }

    let root_s = root.to_string_lossy().into_owned();
    let mut failed = 0;
    for (tag, argv) in &jobs {
        let out = Command::new(&knot).args(argv).env("NO_COLOR", "1").output().with_context(|| format!("running {}", knot.display()))?;
        let body = normalize_paths(&String::from_utf8_lossy(&out.stdout), &root_s);
        let err = normalize_paths(&String::from_utf8_lossy(&out.stderr), &root_s);
        let status = out.status.code().map_or_else(|| "killed".to_string(), |c| c.to_string());
        fs::write(args.out.join(tag), format!("{body}\n--- exit {status}; stderr:\n{err}"))?;
        if out.status.code().is_none() {
            failed += 1;
            eprintln!("{tag}: knot was killed");
        }
    }
    println!("{} reports in {}", jobs.len(), args.out.display());
    if failed > 0 {
        bail!("{failed} runs were killed");
    }
    Ok(())
}

/// This checkout's root becomes `<ROOT>`; so does any other checkout's root in front of a
/// `target/samples/` path (a worktree's search dirs can point into the main checkout's made samples),
/// so two worktrees' snapshots differ only where knot's reading does.
fn normalize_paths(text: &str, root: &str) -> String {
    // A made sample's path first, whole (`/nonexistent/work/main/target/samples/…` under a
    // sysroot reads the same from every checkout); then this checkout's root anywhere else.
    const MARK: &str = "/target/samples/";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        let head = &rest[..at];
        let start = head.rfind(|c: char| c.is_whitespace() || "\"'`(=<>,[".contains(c)).map_or(0, |i| i + 1);
        if head[start..].starts_with('/') {
            out.push_str(&head[..start]);
            out.push_str("<ROOT>");
        } else {
            out.push_str(head);
        }
        out.push_str(MARK);
        rest = &rest[at + MARK.len()..];
    }
    out.push_str(rest);
    out.replace(root, "<ROOT>")
}

fn diff(old: &Path, new: &Path) -> Result<()> {
    let names = |d: &Path| -> Result<Vec<String>> {
        let mut v: Vec<String> = fs::read_dir(d).with_context(|| format!("reading {}", d.display()))?.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        Ok(v)
    };
    let (a, b) = (names(old)?, names(new)?);
    let mut differ = 0;
    for n in a.iter().filter(|n| !b.contains(n)) {
        println!("only in {}: {n}", old.display());
        differ += 1;
    }
    for n in b.iter().filter(|n| !a.contains(n)) {
        println!("only in {}: {n}", new.display());
        differ += 1;
    }
    for n in a.iter().filter(|n| b.contains(n)) {
        if fs::read(old.join(n))? != fs::read(new.join(n))? {
            differ += 1;
            let out = Command::new("diff").arg("-u").arg(old.join(n)).arg(new.join(n)).output()?;
            let text = String::from_utf8_lossy(&out.stdout);
            println!("== {n} differs:");
            for line in text.lines().take(40) {
                println!("   {line}");
            }
        }
    }
    println!("{} files compared, {differ} differ", a.len().max(b.len()));
    if differ > 0 {
        std::process::exit(1);
    }
    Ok(())
}

fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    v.sort();
    v
}

fn file_name(p: &Path) -> String {
    p.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::normalize_paths;

    #[test]
    fn another_checkouts_made_samples_read_as_this_ones() {
        let text = "search /work/main/target/samples/dotnet-runtime/x and /work/wt/a/samples/y \"/other/target/samples/z\"";
        assert_eq!(
            normalize_paths(text, "/work/wt/a"),
            "search <ROOT>/target/samples/dotnet-runtime/x and <ROOT>/samples/y \"<ROOT>/target/samples/z\""
        );
    }

    #[test]
    fn a_made_sample_under_a_sysroot_reads_the_same_from_every_checkout() {
        let text = "/nonexistent/work/main/target/samples/a";
        assert_eq!(normalize_paths(text, "/work/main"), normalize_paths(text, "/work/wt/x"));
    }

    #[test]
    fn a_relative_target_samples_path_is_left_alone() {
        assert_eq!(normalize_paths("at target/samples/q", "/r"), "at target/samples/q");
    }
}
