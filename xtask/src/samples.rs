//! `cargo xtask samples [NAME...] [--kind gcore|kernel|all] [--commit]`

use anyhow::{Result, bail};
use knot_samples::{Availability, DumpKind, crash_samples, native_samples};

#[derive(clap::Args)]
pub struct Args {
    /// Samples to make (default: all).
    names: Vec<String>,
    /// Which dumps to make.
    #[arg(long, value_enum, default_value_t = KindArg::All)]
    kind: KindArg,
    /// Program arguments for the sample(s), e.g. `--arg 600` for many_threads.
    #[arg(long = "arg", value_name = "ARG")]
    args: Vec<String>,
    /// Remake even if the cached dump is current.
    #[arg(long)]
    force: bool,
    /// Regenerate the committed dumps in samples/dumps/ (abba gcore+kernel,
    /// omitfp kernel, stripped gcore; NAMEs restrict it) and their oracles.
    #[arg(long)]
    commit: bool,
    /// List the samples and exit.
    #[arg(long)]
    list: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum KindArg {
    Gcore,
    Kernel,
    All,
}

impl KindArg {
    fn kinds(self) -> &'static [DumpKind] {
        match self {
            KindArg::Gcore => &[DumpKind::Gcore],
            KindArg::Kernel => &[DumpKind::Kernel],
            KindArg::All => &DumpKind::ALL,
        }
    }
}

pub fn run(a: Args) -> Result<()> {
    if a.list {
        for s in native_samples().iter().chain(crash_samples()) {
            println!("{:<18} {}", s.name, s.description);
        }
        return Ok(());
    }
    for n in &a.names {
        if knot_samples::find_sample(n).is_none() {
            let all: Vec<_> = native_samples().iter().chain(crash_samples()).map(|s| s.name).collect();
            bail!("no sample named {n:?}; samples: {}", all.join(", "));
        }
    }
    let names: Vec<&str> = if a.names.is_empty() {
        native_samples().iter().map(|s| s.name).collect()
    } else {
        a.names.iter().map(String::as_str).collect()
    };
    let committed_names: Vec<&str> = knot_samples::COMMITTED_SET
        .iter()
        .map(|(n, _)| *n)
        .collect();
    if a.force {
        for n in &names {
            if a.commit && !committed_names.contains(n) {
                continue;
            }
            let mut dir = n.to_string();
            for arg in &a.args {
                dir.push('-');
                dir.push_str(arg);
            }
            for k in a.kind.kinds() {
                let p = knot_samples::out_dir().join(&dir).join(k.as_str());
                if p.exists() {
                    std::fs::remove_dir_all(&p)?;
                }
            }
        }
    }
    if a.commit {
        let made = knot_samples::regenerate_committed(&a.names, &mut |line| eprintln!("{line}"))?;
        for d in made {
            let threads = d.gdb_threads()?;
            println!(
                "{:<10} {:<7} {} threads  {}",
                d.name,
                d.kind,
                threads.len(),
                d.gdb_bt.display()
            );
        }
        return Ok(());
    }

    let args: Vec<&str> = a.args.iter().map(String::as_str).collect();
    let mut failures = 0;
    for name in names {
        for &kind in a.kind.kinds() {
            let started = std::time::Instant::now();
            let res = if args.is_empty() {
                knot_samples::try_ensure_with_args(
                    name,
                    kind,
                    knot_samples::find_sample(name).map_or(&[], |s| s.args),
                )
            } else {
                knot_samples::try_ensure_with_args(name, kind, &args)
            };
            match res {
                Ok(Availability::Ready(d)) => {
                    let threads = d.gdb_threads()?;
                    println!(
                        "ok      {name:<18} {kind:<7} {:>4} threads  {:>6.1}s  {}",
                        threads.len(),
                        started.elapsed().as_secs_f64(),
                        d.gdb_bt.display()
                    );
                }
                Ok(Availability::Skipped(why)) => println!("skipped {name:<18} {kind:<7} {why}"),
                Err(e) => {
                    failures += 1;
                    println!("FAILED  {name:<18} {kind:<7} {e:#}");
                }
            }
        }
    }
    if failures > 0 {
        bail!("{failures} sample dump(s) failed");
    }
    Ok(())
}
