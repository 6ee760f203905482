//! `cargo xtask dotnet-catalog [--check] [--offline]`: the runtime catalogue
//! (`analyzers/dotnet/runtime-catalog.toml`) from the official runtime packs. For each release
//! below it takes `libcoreclr.so` out of `Microsoft.NETCore.App.Runtime.<rid>` and `singlefilehost`
//! out of `Microsoft.NETCore.App.Host.<rid>` (packs cached in `target/dotnet-packs/`, fetched
//! from nuget.org's flat container with curl), reads each the way knot reads a runtime file
//! (`knot::dotnet_catalog::Build::from_file`), and writes the catalogue sorted, so
//! the same packs give the same bytes. `--check` compares instead of writing.

use anyhow::{Context, Result, bail};
use knot::process::ElfFile;
use knot::dotnet_catalog::{self as catalog, Build};
use knot_samples::nupkg;

/// The releases the NuGet copy here serves, per RID.
pub const RELEASES: &[(&str, &[&str])] = &[
    (
        "linux-x64",
        &["8.0.0", "8.0.29", "8.0.30", "8.0.31", "8.0.32", "8.0.33", "8.0.34", "9.0.18", "9.0.19", "9.0.20", "9.0.21", "9.0.22", "9.0.23", "10.0.11", "10.0.12", "10.0.13", "10.0.14", "10.0.15"],
    ),
    ("linux-arm64", &["9.0.23", "10.0.12", "10.0.15"]),
];

#[derive(clap::Args)]
pub struct Args {
    /// Compare the generated catalogue with the committed one; fail if they differ.
    #[arg(long)]
    check: bool,
    /// Use only packs already in target/dotnet-packs/ (a release whose pack is absent is left out,
    /// with a message).
    #[arg(long)]
    offline: bool,
    /// With --offline: a release whose pack is absent keeps its entries from the committed
    /// catalogue instead of being left out (to add releases without every pack at hand).
    #[arg(long, requires = "offline")]
    keep_committed: bool,
}

/// The files one release contributes: (pack id, path in the pack, file name).
pub fn files(rid: &str) -> [(String, String, &'static str); 2] {
    [
        (format!("Microsoft.NETCore.App.Runtime.{rid}"), format!("runtimes/{rid}/native/libcoreclr.so"), "libcoreclr.so"),
        (format!("Microsoft.NETCore.App.Host.{rid}"), format!("runtimes/{rid}/native/singlefilehost"), "singlefilehost"),
    ]
}

/// One catalogue entry from one pack file.
pub fn build_from_pack(pack: &std::path::Path, id: &str, entry: &str, name: &str, rid: &str, version: &str) -> Result<Build> {
    let bytes = nupkg::extract(pack, entry)?;
    let file = ElfFile::from_bytes(format!("{}!{entry}", pack.display()), bytes).map_err(|e| anyhow::anyhow!("{entry}: {e}"))?;
    Build::from_file(&file, version, rid, name, id).map_err(|e| anyhow::anyhow!("{id} {version} {entry}: {e}"))
}

pub fn run(args: Args) -> Result<()> {
    let mut builds = Vec::new();
    let mut missing = Vec::new();
    let path = knot_samples::workspace_root().join(catalog::FILE);
    let committed = if args.keep_committed {
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        catalog::parse(catalog::FILE, &text).map_err(|e| anyhow::anyhow!("the committed catalogue does not parse: {e}"))?
    } else {
        Vec::new()
    };
    for (rid, versions) in RELEASES {
        for version in *versions {
            for (id, entry, name) in files(rid) {
                let pack = if args.offline {
                    let p = nupkg::cached(&id, version);
                    if !p.is_file() {
                        let kept: Vec<Build> = committed.iter().filter(|b| b.runtime_version == *version && b.rid == *rid && b.file == name).cloned().collect();
                        if kept.is_empty() {
                            missing.push(format!("{id} {version}"));
                        } else {
                            eprintln!("{id} {version}: {name} kept from the committed catalogue (pack not in target/dotnet-packs/)");
                            builds.extend(kept);
                        }
                        continue;
                    }
                    p
                } else {
                    nupkg::fetch(&id, version).with_context(|| format!("fetching {id} {version}"))?
                };
                let b = build_from_pack(&pack, &id, &entry, name, rid, version)?;
                eprintln!("{id} {version}: {name} build-id {} {}", b.build_id, if b.descriptor_rva.is_some() { "descriptor" } else { "NO descriptor" });
                builds.push(b);
            }
        }
    }
    for m in &missing {
        eprintln!("left out (not in target/dotnet-packs/): {m}");
    }
    let text = catalog::render(&builds);
    catalog::parse(catalog::FILE, &text).map_err(|e| anyhow::anyhow!("the generated catalogue does not parse: {e}"))?;
    if args.check {
        let committed = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        if committed != text {
            bail!("{} differs from what the packs give: run `cargo xtask dotnet-catalog`", catalog::FILE);
        }
        eprintln!("{} is what the packs give ({} builds)", catalog::FILE, builds.len());
        return Ok(());
    }
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {} ({} builds, {} bytes)", path.display(), builds.len(), text.len());
    Ok(())
}
