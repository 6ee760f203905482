//! Finding the runtime in a process and reading its contract descriptor: from dump memory when
//! the dump saved the descriptor's pages, else from the `libcoreclr.so` on disk that the process
//! matched to the dump by build-id, with the dynamic linker's relocations applied by hand (the
//! descriptor's pointers, and the pointer-data slots, are relocated addresses in `.data`), else
//! from the runtime catalogue ([`crate::runtimes::dotnet::contract::catalog`]) by the build-id the dump's own note gives.
//! The runtime is `libcoreclr.so` (framework-dependent and self-contained apps) or, for a
//! single-file app, the executable itself (the runtime linked into `singlefilehost`).

use crate::runtimes::dotnet::contract::catalog::{self, Build};
use crate::runtimes::dotnet::contract::descriptor::{Descriptor, Header, GlobalValue, HEADER_SIZE};
use crate::runtimes::dotnet::contract::elf::{self, Slot};
use crate::runtimes::dotnet::error::DotnetError;
use crate::process::{Memory, Module, Process};
use serde::Serialize;

pub(crate) const RUNTIME_MODULE: &str = "libcoreclr.so";
pub(crate) const DESCRIPTOR_SYMBOL: &str = catalog::DESCRIPTOR_SYMBOL;
const MAX_SUB_DESCRIPTORS: usize = 8;

/// Where a piece of the descriptor was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Source {
    /// Dump memory: what the process really held.
    Dump,
    /// The module file on disk (matched to the dump by build-id), relocated by knot.
    File,
    /// knot's runtime catalogue, by the build-id in the dump.
    Catalog,
    /// knot's data, for a runtime that exports no descriptor (.NET 8: `analyzers/dotnet/descriptor-8.0.toml`).
    Data,
}

/// Which source each part of the descriptor came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct DescriptorSource {
    /// The 40-byte `DotNetRuntimeContractDescriptor` header.
    pub header: Source,
    /// The JSON text (read-only data: the same bytes either way).
    pub(crate) json: Source,
    /// The pointer-data array (runtime addresses of the globals).
    pub pointer_data: Source,
}

impl DescriptorSource {
    /// A descriptor made whole from knot's data.
    pub(crate) fn data() -> DescriptorSource {
        DescriptorSource { header: Source::Data, json: Source::Data, pointer_data: Source::Data }
    }

    pub(crate) fn summary(&self) -> &'static str {
        match (self.header, self.pointer_data) {
            (Source::Dump, Source::Dump) => "dump",
            (Source::File, Source::File) => "file",
            (Source::Catalog, Source::Catalog) => "catalog",
            (Source::Data, Source::Data) => "knot's data",
            _ => "mixed",
        }
    }
}

/// The runtime module's identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct RuntimeVersion {
    /// The product version (`10.0.12`), from the shared-framework directory the runtime was
    /// loaded from; the file version when the path does not say.
    pub product: String,
    /// The `@(#)Version` string compiled into libcoreclr (`10.0.1226.42308`), when the file is
    /// at hand.
    pub file_version: Option<String>,
    pub commit: Option<String>,
    pub build_id: Option<String>,
    pub(crate) path: String,
}

impl RuntimeVersion {
    pub(crate) fn of(module: &Module) -> RuntimeVersion {
        let catalogued = catalogued(module);
        let (file_version, commit) = match module.file.as_ref().and_then(elf::sccs_version) {
            Some((v, c)) => (Some(v), c),
            None => catalogued.map_or((None, None), |b| (b.file_version.clone(), b.commit.clone())),
        };
        let from_path = product_version_from_path(&module.path);
        RuntimeVersion {
            product: from_path
                .or_else(|| catalogued.map(|b| b.runtime_version.clone()))
                .or_else(|| file_version.clone())
                .unwrap_or_else(|| "unknown".into()),
            file_version,
            commit,
            build_id: module.build_id_hex(),
            path: module.path.clone(),
        }
    }
}

impl std::fmt::Display for RuntimeVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.product)?;
        if let Some(v) = &self.file_version {
            write!(f, " ({v})")?;
        }
        Ok(())
    }
}

/// `.../Microsoft.NETCore.App/10.0.12/libcoreclr.so` → `10.0.12`.
fn product_version_from_path(path: &str) -> Option<String> {
    let mut parts = path.rsplit('/');
    parts.next()?;
    let version = parts.next()?;
    let framework = parts.next()?;
    (framework.starts_with("Microsoft.") && version.chars().next()?.is_ascii_digit()).then(|| version.to_string())
}

/// The runtime module, when the process has one: `libcoreclr.so`, else a single-file app's
/// executable (a catalogued `singlefilehost` build, or an executable whose file exports the
/// descriptor).
pub(crate) fn runtime_module(process: &Process) -> Option<&Module> {
    process.modules.iter().find(|m| m.name() == RUNTIME_MODULE).or_else(|| {
        process.modules.iter().filter(|m| !m.name().contains(".so")).find(|m| {
            catalogued(m).is_some_and(|b| b.file != RUNTIME_MODULE)
                || m.file.as_ref().is_some_and(|f| elf::dynamic_symbol(f, DESCRIPTOR_SYMBOL).is_some())
        })
    })
}

/// The catalogue's entry for the build the dump's own build-id note names (a build-id only a
/// file gave is not the dump's word for what ran).
pub(crate) fn catalogued(module: &Module) -> Option<&'static Build> {
    if module.build_id_source != Some(crate::process::module::BuildIdSource::Dump) {
        return None;
    }
    catalog::lookup(&module.build_id_hex()?)
}

/// The descriptor, parsed, with its pointer data and where each came from.
pub(crate) struct Located {
    pub descriptor: Descriptor,
    pub pointer_data: Vec<u64>,
    pub source: DescriptorSource,
    #[cfg(test)]
    pub header_address: u64,
}

/// Why the descriptor could not be had.
#[derive(Debug)]
pub(crate) enum NotLocated {
    /// The runtime exports no descriptor: a runtime before .NET 9, or not CoreCLR.
    NoExport(String),
    Error(DotnetError),
}

impl From<DotnetError> for NotLocated {
    fn from(e: DotnetError) -> Self {
        NotLocated::Error(e)
    }
}

/// Bytes from the dump alone (no file fallback).
fn dump_bytes(process: &Process, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let chunk = process.core.bytes_at(addr.checked_add(out.len() as u64)?, len - out.len()).ok()?;
        if chunk.is_empty() {
            return None;
        }
        out.extend_from_slice(chunk);
    }
    Some(out)
}

/// 8-byte slots at runtime address `addr` from the file, relocated.
fn file_slots(module: &Module, addr: u64, count: usize, what: &str) -> Result<Vec<u64>, DotnetError> {
    let file = module.file.as_ref().ok_or_else(|| DotnetError::Invalid { what: "runtime module", at: module.start, why: format!("{what} is not in the dump and {} has no file", module.path) })?;
    (0..count as u64)
        .map(|i| {
            let at = addr + 8 * i;
            let link = module.to_link_address(at);
            match elf::relocated_slot(file, link) {
                Some(Slot::Relative(v)) => Ok(v.wrapping_add(module.bias)),
                Some(Slot::Plain(v)) => Ok(v),
                None => Err(DotnetError::Invalid { what: "relocated slot", at, why: format!("{what}: {} does not say what the slot holds at run time", file.path().display()) }),
            }
        })
        .collect()
}

/// Finds and reads the descriptor of the runtime `module`: from the dump where it holds the
/// bytes, else from the module's file.
pub(crate) fn locate(process: &Process, module: &Module) -> Result<Located, NotLocated> {
    locate_from(process, module, true)
}

#[cfg(test)]
/// As [`locate`], but the header and pointer data from the module's file even when the dump has
/// them (to check the relocation against a dump that saved them).
pub(crate) fn locate_from_file(process: &Process, module: &Module) -> Result<Located, NotLocated> {
    locate_from(process, module, false)
}

/// Why the runtime's file is needed and how to give it: its exports name the descriptor.
fn missing_runtime_file(module: &Module) -> String {
    use crate::process::FileStatus;
    let found = match &module.file_status {
        FileStatus::Missing { tried } => format!("not found (looked at {tried})"),
        FileStatus::Refused { path, reason } => format!("{path} refused: {reason}"),
        FileStatus::Loaded { path } => format!("{path} unreadable"),
        FileStatus::InMemory => "only in dump memory".to_string(),
    };
    let build = module.build_id.as_ref().map(|b| b.iter().map(|x| format!("{x:02x}")).collect::<String>()).unwrap_or_else(|| "unknown".to_string());
    let version = product_version_from_path(&module.path).map(|v| format!(" {v}")).unwrap_or_default();
    let catalogue = match catalog::builtin() {
        Ok(_) => format!("knot's runtime catalogue has no build {build} (it holds {})", catalog::summary()),
        Err(e) => format!("knot's runtime catalogue is unusable ({e})"),
    };
    format!(
        "{} (runtime{version}, build-id {build}) is needed to find the runtime's data contract descriptor: {catalogue}, and the file was {found}; pass --search-dir DIR with the directory holding that {} (the app's image or the runtime pack it was published with), or --sysroot ROOT with the image's root",
        module.path,
        module.name()
    )
}

/// Where the runtime's file-borne facts come from: the file, else the catalogue.
#[derive(Clone, Copy)]
struct Statics<'a> {
    module: &'a Module,
    build: Option<&'static Build>,
}

impl Statics<'_> {
    fn catalogue_image(&self, header_address: u64) -> Option<&'static catalog::DescriptorImage> {
        self.build?.descriptor_at(self.module.to_link_address(header_address))
    }
}

fn locate_from(process: &Process, module: &Module, use_dump: bool) -> Result<Located, NotLocated> {
    let statics = Statics { module, build: if module.file.is_some() { None } else { catalogued(module) } };
    let descriptor_rva = match (&module.file, statics.build) {
        (Some(file), _) => elf::dynamic_symbol(file, DESCRIPTOR_SYMBOL).map(|s| s.value),
        (None, Some(b)) => b.descriptor_rva,
        (None, None) => {
            return Err(NotLocated::Error(DotnetError::Invalid { what: "runtime module", at: module.start, why: missing_runtime_file(module) }));
        }
    };
    let Some(descriptor_rva) = descriptor_rva else {
        let whose = if module.file.is_some() { "" } else { " (by knot's runtime catalogue)" };
        return Err(NotLocated::NoExport(format!("{} exports no {DESCRIPTOR_SYMBOL}{whose}", module.name())));
    };
    let header_address = module.bias.wrapping_add(descriptor_rva);
    let (header, header_source) = read_header(process, statics, header_address, use_dump)?;
    let mut located = read_rest(process, statics, header_address, header, header_source, use_dump)?;
    // Sub-descriptors: each names a slot holding a pointer to another header.
    let subs: Vec<_> = located.descriptor.sub_descriptors.clone().into_iter().take(MAX_SUB_DESCRIPTORS).collect();
    for (name, global) in subs {
        let slot = match global.value {
            GlobalValue::Indirect(i) => located.pointer_data.get(i as usize).copied(),
            GlobalValue::Direct(v) => Some(v),
            GlobalValue::Text(_) => None,
        };
        let Some(slot) = slot.filter(|&s| s != 0) else { continue };
        // The variable pointing at the sub-descriptor: the dump's word, else the catalogue's.
        let from_catalogue = || {
            statics.build?.descriptors.iter().find(|d| d.sub.as_deref() == Some(name.as_str())).map(|d| module.bias.wrapping_add(d.header_rva))
        };
        let Some(sub_addr) = process.read_u64(slot).ok().or_else(from_catalogue) else { continue };
        if sub_addr == 0 {
            continue;
        }
        let (h, hs) = read_header(process, statics, sub_addr, use_dump)?;
        let sub = read_rest(process, statics, sub_addr, h, hs, use_dump).map_err(|e| match e {
            NotLocated::Error(e) => NotLocated::Error(DotnetError::Invalid { what: "sub-descriptor", at: sub_addr, why: format!("{name}: {e}") }),
            other => other,
        })?;
        // Sub-descriptor globals index the sub-descriptor's own pointer data: resolve them now.
        let mut d = sub.descriptor;
        for g in d.globals.values_mut() {
            if let GlobalValue::Indirect(i) = g.value {
                g.value = GlobalValue::Direct(sub.pointer_data.get(i as usize).copied().unwrap_or(0));
            }
        }
        located.descriptor.merge(d);
    }
    Ok(located)
}

fn read_header(process: &Process, statics: Statics, at: u64, use_dump: bool) -> Result<(Header, Source), DotnetError> {
    let module = statics.module;
    let image = statics.catalogue_image(at);
    if let Some(bytes) = dump_bytes(process, at, HEADER_SIZE).filter(|_| use_dump) {
        match (Header::parse(&bytes, at), image) {
            (Ok(h), _) => return Ok((h, Source::Dump)),
            // Damaged in the dump: the build's own header, from the catalogue.
            (Err(_), Some(image)) => return Ok((image.header(module.bias), Source::Catalog)),
            (Err(e), None) => return Err(e),
        }
    }
    if let Some(image) = image {
        return Ok((image.header(module.bias), Source::Catalog));
    }
    let file = module.file.as_ref().ok_or_else(|| DotnetError::Invalid { what: "contract descriptor", at, why: "not in the dump, no file, and not in knot's runtime catalogue".into() })?;
    let link = module.to_link_address(at);
    let mut bytes = elf::file_bytes(file, link, HEADER_SIZE).ok_or(DotnetError::BadDescriptor { at, why: "outside the file's loaded segments".into() })?;
    // The two pointers are relocated.
    for off in [16usize, 32] {
        let v = file_slots(module, at + off as u64, 1, "contract descriptor pointer")?[0];
        bytes[off..off + 8].copy_from_slice(&v.to_le_bytes());
    }
    Ok((Header::parse(&bytes, at)?, Source::File))
}

fn read_rest(process: &Process, statics: Statics, at: u64, header: Header, header_source: Source, use_dump: bool) -> Result<Located, NotLocated> {
    let module = statics.module;
    let image = statics.catalogue_image(at);
    let json_len = header.json_size as usize;
    let (json, json_source) = match dump_bytes(process, header.json_addr, json_len) {
        Some(b) => (b, Source::Dump),
        // The catalogue's text, when the header it names is the catalogue's (the JSON is
        // read-only data: the same bytes the process held).
        None if image.is_some_and(|i| module.bias.wrapping_add(i.json_rva) == header.json_addr && i.json_size == header.json_size) => {
            (image.map(|i| i.json.as_bytes().to_vec()).unwrap_or_default(), Source::Catalog)
        }
        None => {
            let mut b = vec![0u8; json_len];
            process.read(header.json_addr, &mut b).map_err(|e| DotnetError::memory(format!("descriptor JSON ({json_len} bytes)"), e))?;
            (b, Source::File)
        }
    };
    let descriptor = Descriptor::parse(&json, header.json_addr)?;
    let count = header.pointer_data_count as usize;
    let (pointer_data, pointer_source) = match dump_bytes(process, header.pointer_data_addr, count * 8).filter(|_| use_dump) {
        Some(b) if count > 0 => (b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect(), Source::Dump),
        _ if count == 0 => (Vec::new(), header_source),
        _ if module.file.is_none() && image.is_some_and(|i| i.pointer_data.len() == count && module.bias.wrapping_add(i.pointer_data_rva) == header.pointer_data_addr) => {
            (image.map(|i| i.pointer_data_at(module.bias)).unwrap_or_default(), Source::Catalog)
        }
        _ => (file_slots(module, header.pointer_data_addr, count, "pointer data")?, Source::File),
    };
    Ok(Located { descriptor, pointer_data, source: DescriptorSource { header: header_source, json: json_source, pointer_data: pointer_source },
        #[cfg(test)]
        header_address: at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_version_comes_from_the_framework_directory() {
        assert_eq!(product_version_from_path("/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.12/libcoreclr.so").as_deref(), Some("10.0.12"));
        assert_eq!(product_version_from_path("/opt/app/libcoreclr.so"), None);
    }
}
