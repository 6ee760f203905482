//! The official .NET runtime packs (`.nupkg`, a zip file) that `cargo xtask dotnet-catalog`
//! reads: where they are cached (`target/dotnet-packs/`), how one is fetched from the NuGet
//! source this machine's `dotnet restore` uses, and how one file is taken out of one. A minimal
//! zip reader (stored and deflated entries, no zip64): the packs are tens of MB.

use anyhow::{Context, Result, bail};
use flate2::read::DeflateDecoder;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The NuGet v3 flat container of nuget.org (the `PackageBaseAddress` its index names).
pub const FLAT_CONTAINER: &str = "https://api.nuget.org/v3-flatcontainer/";
/// The largest file taken out of a pack (libcoreclr.so is ~7 MB).
const MAX_ENTRY: u64 = 256 << 20;

/// `target/dotnet-packs/`.
pub fn cache_dir() -> PathBuf {
    crate::workspace_root().join("target/dotnet-packs")
}

/// The cached pack's path (whether or not it is there).
pub fn cached(id: &str, version: &str) -> PathBuf {
    let id = id.to_ascii_lowercase();
    cache_dir().join(format!("{id}.{version}.nupkg"))
}

/// The pack, fetched with curl into the cache when it is not there yet.
pub fn fetch(id: &str, version: &str) -> Result<PathBuf> {
    let path = cached(id, version);
    if path.is_file() {
        return Ok(path);
    }
    std::fs::create_dir_all(cache_dir())?;
    let lid = id.to_ascii_lowercase();
    let url = format!("{FLAT_CONTAINER}{lid}/{version}/{lid}.{version}.nupkg");
    let part = path.with_extension("nupkg.part");
    let status = std::process::Command::new("curl")
        .args(["-sS", "-f", "-L", "-m", "600", "-o"])
        .arg(&part)
        .arg(&url)
        .status()
        .context("running curl")?;
    if !status.success() {
        let _ = std::fs::remove_file(&part);
        bail!("curl {url}: {status}");
    }
    std::fs::rename(&part, &path)?;
    Ok(path)
}

/// The names of the entries in a zip file.
pub fn entries(zip: &Path) -> Result<Vec<String>> {
    let bytes = std::fs::read(zip).with_context(|| format!("reading {}", zip.display()))?;
    Ok(central_directory(&bytes)?.into_iter().map(|e| e.name).collect())
}

/// One entry's bytes.
pub fn extract(zip: &Path, name: &str) -> Result<Vec<u8>> {
    let bytes = std::fs::read(zip).with_context(|| format!("reading {}", zip.display()))?;
    let e = central_directory(&bytes)?.into_iter().find(|e| e.name == name).with_context(|| format!("{} has no {name}", zip.display()))?;
    let at = e.local_header as usize;
    let local = bytes.get(at..at + 30).context("local header outside the file")?;
    if u32_at(local, 0) != 0x0403_4b50 {
        bail!("{name}: bad local header");
    }
    let data_at = at + 30 + u16_at(local, 26) as usize + u16_at(local, 28) as usize;
    let data = bytes.get(data_at..data_at + e.compressed as usize).context("entry data outside the file")?;
    if e.size > MAX_ENTRY {
        bail!("{name}: {} bytes", e.size);
    }
    match e.method {
        0 => Ok(data.to_vec()),
        8 => {
            let mut out = Vec::with_capacity(e.size as usize);
            DeflateDecoder::new(data).take(MAX_ENTRY).read_to_end(&mut out)?;
            if out.len() as u64 != e.size {
                bail!("{name}: inflated to {} bytes, not {}", out.len(), e.size);
            }
            Ok(out)
        }
        m => bail!("{name}: compression method {m}"),
    }
}

struct Entry {
    name: String,
    method: u16,
    compressed: u64,
    size: u64,
    local_header: u64,
}

fn central_directory(b: &[u8]) -> Result<Vec<Entry>> {
    let tail = b.len().saturating_sub(22 + 65_535);
    let eocd = (tail..b.len().saturating_sub(21)).rev().find(|&i| u32_at(&b[i..], 0) == 0x0605_4b50).context("no end of central directory")?;
    let count = u16_at(&b[eocd..], 10) as usize;
    let mut at = u32_at(&b[eocd..], 16) as usize;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let h = b.get(at..at + 46).context("central directory outside the file")?;
        if u32_at(h, 0) != 0x0201_4b50 {
            bail!("bad central directory entry at {at}");
        }
        let (n, x, c) = (u16_at(h, 28) as usize, u16_at(h, 30) as usize, u16_at(h, 32) as usize);
        let name = String::from_utf8_lossy(b.get(at + 46..at + 46 + n).context("name outside the file")?).into_owned();
        out.push(Entry { name, method: u16_at(h, 10), compressed: u32_at(h, 20).into(), size: u32_at(h, 24).into(), local_header: u32_at(h, 42).into() });
        at += 46 + n + x + c;
    }
    Ok(out)
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    b.get(o..o + 2).map_or(0, |s| u16::from_le_bytes([s[0], s[1]]))
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    b.get(o..o + 4).map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}
