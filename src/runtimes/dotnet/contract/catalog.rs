//! The runtime catalogue (`analyzers/dotnet/runtime-catalog.toml`): for each released CoreCLR
//! build, keyed by the GNU build-id of the ELF file the runtime lives in (`libcoreclr.so`, or the
//! `singlefilehost` that a single-file app is built from), everything knot otherwise reads from
//! that file: the exported symbols' addresses (`DotNetRuntimeContractDescriptor`, `g_dacTable`),
//! each contract descriptor's header and JSON text, its pointer data as the dynamic linker leaves
//! it (an address in the module, or a plain value), and the `@(#)Version` string. With it a dump
//! is enough: a Job in a cluster has the dump, not the image that ran.
//!
//! The file is generated from the official runtime packs by `cargo xtask dotnet-catalog`
//! ([`Build::from_file`] is the one reading both the xtask and knot use); nothing in it is typed
//! by hand. Every entry is checked when the catalogue is parsed; a malformed one is refused as a
//! whole (with the file and the reason), never half-trusted.

use crate::runtimes::dotnet::contract::descriptor::{self, Header, HEADER_SIZE};
use crate::runtimes::dotnet::contract::elf::{self, Slot};
use crate::runtimes::dotnet::contract::gc_constants::{GcConstants, GENERATION_FIELDS};
use crate::process::ElfFile;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

pub const FILE: &str = "analyzers/dotnet/runtime-catalog.toml";
const TEXT: &str = include_str!("../../../../analyzers/dotnet/runtime-catalog.toml");
pub(crate) const DESCRIPTOR_SYMBOL: &str = "DotNetRuntimeContractDescriptor";
pub(crate) const DAC_TABLE_SYMBOL: &str = "g_dacTable";
/// Sub-descriptors followed at most, when generating (the .NET 10 descriptor has none).
const MAX_SUB_DESCRIPTORS: usize = 8;
/// Builds in one catalogue at most.
const MAX_BUILDS: usize = 4096;

/// What one pointer-data slot holds at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotValue {
    /// An address in the module: this offset from the module's load bias.
    InModule(u64),
    /// A value the dynamic linker does not touch.
    Plain(u64),
}

impl SlotValue {
    pub(crate) fn at_bias(self, bias: u64) -> u64 {
        match self {
            SlotValue::InModule(rva) => bias.wrapping_add(rva),
            SlotValue::Plain(v) => v,
        }
    }

    /// `+0x6cc780` (in the module) or `0x0` (plain): the catalogue's spelling.
    fn spell(self) -> String {
        match self {
            SlotValue::InModule(rva) => format!("+{rva:#x}"),
            SlotValue::Plain(v) => format!("{v:#x}"),
        }
    }

    fn parse(s: &str) -> Option<SlotValue> {
        let hex = |h: &str| u64::from_str_radix(h.strip_prefix("0x")?, 16).ok();
        match s.strip_prefix('+') {
            Some(rest) => hex(rest).map(SlotValue::InModule),
            None => hex(s).map(SlotValue::Plain),
        }
    }
}

/// One contract descriptor of a build, as the process holds it after relocation (addresses as
/// offsets from the module's bias).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DescriptorImage {
    /// `None` for the main descriptor; the `subDescriptors` name otherwise.
    pub(crate) sub: Option<String>,
    pub(crate) header_rva: u64,
    pub(crate) flags: u32,
    pub(crate) json_rva: u64,
    /// The JSON text (exactly `json_size` bytes of it, up to the first NUL).
    pub(crate) json: String,
    pub(crate) json_size: u32,
    pub(crate) pointer_data_rva: u64,
    pub(crate) pointer_data: Vec<SlotValue>,
}

impl DescriptorImage {
    /// The header as the process held it, for a module loaded at `bias`.
    pub(crate) fn header(&self, bias: u64) -> Header {
        Header {
            flags: self.flags,
            json_size: self.json_size,
            json_addr: bias.wrapping_add(self.json_rva),
            pointer_data_count: self.pointer_data.len() as u32,
            pointer_data_addr: if self.pointer_data.is_empty() { 0 } else { bias.wrapping_add(self.pointer_data_rva) },
        }
    }

    pub(crate) fn pointer_data_at(&self, bias: u64) -> Vec<u64> {
        self.pointer_data.iter().map(|s| s.at_bias(bias)).collect()
    }
}

/// One runtime build: the file it is, and what knot reads from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    /// `10.0.12`.
    pub runtime_version: String,
    /// `linux-x64`, `linux-arm64`.
    pub rid: String,
    /// The file's name in its pack: `libcoreclr.so` or `singlefilehost`.
    pub file: String,
    /// The NuGet package it came from: `Microsoft.NETCore.App.Runtime.linux-x64`.
    pub package: String,
    pub build_id: String,
    /// The `@(#)Version` string: `10.0.1226.42308`, and its commit.
    pub file_version: Option<String>,
    pub(crate) commit: Option<String>,
    /// `DotNetRuntimeContractDescriptor`'s link-time address; `None` when the file exports none
    /// (a runtime before .NET 9).
    pub descriptor_rva: Option<u64>,
    /// `g_dacTable`'s link-time address.
    pub dac_table_rva: Option<u64>,
    /// The main descriptor first, then its sub-descriptors.
    pub(crate) descriptors: Vec<DescriptorImage>,
    /// Where the GC's container-default hard limit is stored: `gc_heap::heap_hard_limit` of the
    /// workstation and of the server GC, link-time addresses, sorted (x86-64 builds; see
    /// [`crate::runtimes::dotnet::contract::hard_limit_store`]).
    pub(crate) heap_hard_limit: Vec<u64>,
    /// What the GC's vars point at that is a constant of the build (`max_gen`,
    /// `generation_field_offsets`), for dumps without the pages that hold it (single-file apps;
    /// x86-64 builds; see `gc_constants.rs`).
    pub gc_constants: Option<GcConstants>,
}

impl Build {
    /// The descriptor whose header is at link-time address `rva`.
    pub(crate) fn descriptor_at(&self, rva: u64) -> Option<&DescriptorImage> {
        self.descriptors.iter().find(|d| d.header_rva == rva)
    }

    /// Reads a runtime file (`libcoreclr.so` or `singlefilehost`) the way knot reads it in a
    /// dump's module: exports, relocated descriptor header, JSON, pointer data, version. The
    /// xtask that makes the catalogue and the test that checks it both call this.
    pub fn from_file(file: &ElfFile, runtime_version: &str, rid: &str, name: &str, package: &str) -> Result<Build, String> {
        let build_id = file.build_id.as_deref().map(crate::process::elf_file::hex).ok_or("the file has no GNU build-id note")?;
        let (file_version, commit) = elf::sccs_version(file).map_or((None, None), |(v, c)| (Some(v), c));
        let descriptor_rva = elf::dynamic_symbol(file, DESCRIPTOR_SYMBOL).map(|s| s.value);
        let dac_table_rva = elf::dynamic_symbol(file, DAC_TABLE_SYMBOL).map(|s| s.value);
        let mut descriptors = Vec::new();
        if let Some(at) = descriptor_rva {
            let main = image_from_file(file, at, None)?;
            let subs = descriptor::Descriptor::parse(main.json.as_bytes(), main.json_rva).map_err(|e| e.to_string())?.sub_descriptors;
            let main_slots = main.pointer_data.clone();
            descriptors.push(main);
            for (sub, global) in subs.into_iter().take(MAX_SUB_DESCRIPTORS) {
                let descriptor::GlobalValue::Indirect(i) = global.value else { continue };
                // The slot holds the address of a variable that points at the sub-descriptor's
                // header; when that variable is set at run time the file cannot say (the dump must).
                let Some(SlotValue::InModule(var)) = main_slots.get(i as usize).copied() else { continue };
                let Some(Slot::Relative(header)) = elf::relocated_slot(file, var) else { continue };
                descriptors.push(image_from_file(file, header, Some(sub))?);
            }
        }
        let heap_hard_limit = match rid {
            "linux-x64" => crate::runtimes::dotnet::contract::hard_limit_store::heap_hard_limit_rvas(file),
            "linux-arm64" => crate::runtimes::dotnet::contract::hard_limit_store::heap_hard_limit_rvas_aarch64(file),
            _ => Vec::new(),
        };
        let gc_constants = if rid == "linux-x64" { crate::runtimes::dotnet::contract::gc_constants::from_file(file) } else { None };
        Ok(Build {
            runtime_version: runtime_version.into(),
            rid: rid.into(),
            file: name.into(),
            package: package.into(),
            build_id,
            file_version,
            commit,
            descriptor_rva,
            dac_table_rva,
            descriptors,
            heap_hard_limit,
            gc_constants,
        })
    }
}

fn image_from_file(file: &ElfFile, at: u64, sub: Option<String>) -> Result<DescriptorImage, String> {
    let bytes = elf::file_bytes(file, at, HEADER_SIZE).ok_or_else(|| format!("descriptor header at {at:#x} is outside the file's loaded segments"))?;
    let pointer = |off: u64| match elf::relocated_slot(file, at + off) {
        Some(Slot::Relative(v)) => Ok(v),
        other => Err(format!("descriptor header at {at:#x}: pointer at +{off} is {other:?}, not an address in the file")),
    };
    let mut relocated = bytes.clone();
    let json_rva = pointer(16)?;
    relocated[16..24].copy_from_slice(&json_rva.to_le_bytes());
    let count = u32::from_le_bytes([bytes[24], bytes[25], bytes[26], bytes[27]]);
    let pointer_data_rva = if count > 0 { pointer(32)? } else { 0 };
    relocated[32..40].copy_from_slice(&pointer_data_rva.to_le_bytes());
    let header = Header::parse(&relocated, at).map_err(|e| e.to_string())?;
    let json_bytes = elf::file_bytes(file, json_rva, header.json_size as usize).ok_or_else(|| format!("descriptor JSON at {json_rva:#x} is outside the file"))?;
    let end = json_bytes.iter().position(|&b| b == 0).unwrap_or(json_bytes.len());
    let json = String::from_utf8(json_bytes[..end].to_vec()).map_err(|_| format!("descriptor JSON at {json_rva:#x} is not UTF-8"))?;
    descriptor::Descriptor::parse(json.as_bytes(), json_rva).map_err(|e| e.to_string())?;
    let pointer_data = (0..u64::from(count))
        .map(|i| match elf::relocated_slot(file, pointer_data_rva + 8 * i) {
            Some(Slot::Relative(v)) => Ok(SlotValue::InModule(v)),
            Some(Slot::Plain(v)) => Ok(SlotValue::Plain(v)),
            None => Err(format!("pointer-data slot {i} at {:#x}: the file does not say what it holds at run time", pointer_data_rva + 8 * i)),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(DescriptorImage { sub, header_rva: at, flags: header.flags, json_rva, json, json_size: header.json_size, pointer_data_rva, pointer_data })
}

// ---------------------------------------------------------------- the TOML form

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileData {
    #[serde(default)]
    build: Vec<RawBuild>,
    /// JSON texts by `fnv1a64:<digest>`: builds of one release line share them.
    #[serde(default)]
    json: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBuild {
    runtime_version: String,
    rid: String,
    file: String,
    package: String,
    build_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    file_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    descriptor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dac_table: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    heap_hard_limit: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gc_max_generation: Option<RawConstant<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gc_generation_field_offsets: Option<RawConstant<Vec<i32>>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    descriptors: Vec<RawDescriptor>,
}

/// A constant the GC's vars point at: its value and where it is (`+0x…`, one per GC flavour).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConstant<T> {
    value: T,
    at: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDescriptor {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sub: Option<String>,
    header: String,
    flags: u32,
    json: String,
    json_at: String,
    json_size: u32,
    pointer_data_at: String,
    pointer_data: Vec<String>,
}

/// A catalogue that cannot be used, with the reason.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{file}: {reason}")]
pub struct CatalogError {
    pub(crate) file: &'static str,
    pub(crate) reason: String,
}

fn hex_u64(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

/// The JSON text's key in `[json]`: its 64-bit FNV-1a digest, so identical texts share one entry
/// and a text edited by hand no longer matches its key.
fn json_key(json: &str) -> String {
    let h = json.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("fnv1a64:{h:016x}")
}

/// Parses a catalogue. Every build is checked: build-id, addresses, JSON present and parseable,
/// header fields within the descriptor's own limits.
pub fn parse(file: &'static str, text: &str) -> Result<Vec<Build>, CatalogError> {
    let bad = |reason: String| CatalogError { file, reason };
    let data: FileData = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
    if data.build.len() > MAX_BUILDS {
        return Err(bad(format!("{} builds (more than {MAX_BUILDS})", data.build.len())));
    }
    data.build
        .into_iter()
        .map(|b| {
            let name = format!("build {} {} {}", b.runtime_version, b.rid, b.build_id);
            if b.build_id.len() < 16 || b.build_id.len() > 128 || !b.build_id.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()) {
                return Err(bad(format!("{name}: build-id is not lower-case hex")));
            }
            let addr = |what: &str, s: &Option<String>| -> Result<Option<u64>, CatalogError> {
                s.as_deref().map(|s| hex_u64(s).ok_or_else(|| bad(format!("{name}: {what} {s:?} is not a 0x hex address")))).transpose()
            };
            let descriptor_rva = addr("descriptor", &b.descriptor)?;
            let dac_table_rva = addr("dac_table", &b.dac_table)?;
            if b.heap_hard_limit.len() > 8 {
                return Err(bad(format!("{name}: {} heap_hard_limit addresses", b.heap_hard_limit.len())));
            }
            let heap_hard_limit = b
                .heap_hard_limit
                .iter()
                .map(|s| match SlotValue::parse(s) {
                    Some(SlotValue::InModule(rva)) => Ok(rva),
                    _ => Err(bad(format!("{name}: heap_hard_limit {s:?} is not +0x…"))),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let in_module = |what: &str, list: &[String]| -> Result<Vec<u64>, CatalogError> {
                if list.is_empty() || list.len() > 8 {
                    return Err(bad(format!("{name}: {} {what} addresses", list.len())));
                }
                list.iter()
                    .map(|s| match SlotValue::parse(s) {
                        Some(SlotValue::InModule(rva)) => Ok(rva),
                        _ => Err(bad(format!("{name}: {what} {s:?} is not +0x…"))),
                    })
                    .collect()
            };
            let gc_constants = match (&b.gc_max_generation, &b.gc_generation_field_offsets) {
                (None, None) => None,
                (Some(m), Some(o)) => {
                    let offsets: [i32; GENERATION_FIELDS] = o.value.as_slice().try_into().map_err(|_| bad(format!("{name}: gc_generation_field_offsets has {} values, not {GENERATION_FIELDS}", o.value.len())))?;
                    Some(GcConstants {
                        max_generation: m.value,
                        max_generation_at: in_module("gc_max_generation", &m.at)?,
                        generation_field_offsets: offsets,
                        generation_field_offsets_at: in_module("gc_generation_field_offsets", &o.at)?,
                    })
                }
                _ => return Err(bad(format!("{name}: gc_max_generation and gc_generation_field_offsets go together"))),
            };
            let descriptors = b
                .descriptors
                .into_iter()
                .map(|d| {
                    let json = data.json.get(&d.json).ok_or_else(|| bad(format!("{name}: JSON {} is not in [json]", d.json)))?.clone();
                    if json_key(&json) != d.json {
                        return Err(bad(format!("{name}: JSON {} does not have that digest", d.json)));
                    }
                    let header_rva = addr("header", &Some(d.header.clone()))?.unwrap_or(0);
                    let json_rva = addr("json_at", &Some(d.json_at.clone()))?.unwrap_or(0);
                    let pointer_data_rva = addr("pointer_data_at", &Some(d.pointer_data_at.clone()))?.unwrap_or(0);
                    if d.pointer_data.len() > descriptor::MAX_POINTER_DATA as usize {
                        return Err(bad(format!("{name}: {} pointer-data slots", d.pointer_data.len())));
                    }
                    let pointer_data = d
                        .pointer_data
                        .iter()
                        .map(|s| SlotValue::parse(s).ok_or_else(|| bad(format!("{name}: pointer-data slot {s:?} is neither +0x… nor 0x…"))))
                        .collect::<Result<Vec<_>, _>>()?;
                    let image = DescriptorImage { sub: d.sub, header_rva, flags: d.flags, json_rva, json, json_size: d.json_size, pointer_data_rva, pointer_data };
                    // The header must pass the same checks as one read from a dump.
                    let mut bytes = [0u8; HEADER_SIZE];
                    let h = image.header(0x1000_0000);
                    bytes[..8].copy_from_slice(descriptor::MAGIC);
                    bytes[8..12].copy_from_slice(&h.flags.to_le_bytes());
                    bytes[12..16].copy_from_slice(&h.json_size.to_le_bytes());
                    bytes[16..24].copy_from_slice(&h.json_addr.to_le_bytes());
                    bytes[24..28].copy_from_slice(&h.pointer_data_count.to_le_bytes());
                    bytes[32..40].copy_from_slice(&h.pointer_data_addr.to_le_bytes());
                    Header::parse(&bytes, header_rva).map_err(|e| bad(format!("{name}: {e}")))?;
                    if image.json.len() > image.json_size as usize {
                        return Err(bad(format!("{name}: JSON text longer than json_size {}", image.json_size)));
                    }
                    descriptor::Descriptor::parse(image.json.as_bytes(), json_rva).map_err(|e| bad(format!("{name}: {e}")))?;
                    Ok(image)
                })
                .collect::<Result<Vec<_>, _>>()?;
            if descriptors.first().is_some_and(|d| d.sub.is_some() || Some(d.header_rva) != descriptor_rva) {
                return Err(bad(format!("{name}: the first descriptor is not the exported one")));
            }
            Ok(Build {
                runtime_version: b.runtime_version,
                rid: b.rid,
                file: b.file,
                package: b.package,
                build_id: b.build_id,
                file_version: b.file_version,
                commit: b.commit,
                descriptor_rva,
                dac_table_rva,
                descriptors,
                heap_hard_limit,
                gc_constants,
            })
        })
        .collect()
}

/// The catalogue's text for `builds` (sorted by version, rid and file, so regenerating gives
/// the same bytes).
pub fn render(builds: &[Build]) -> String {
    let mut sorted: Vec<&Build> = builds.iter().collect();
    sorted.sort_by(|a, b| (version_key(&a.runtime_version), &a.rid, &a.file).cmp(&(version_key(&b.runtime_version), &b.rid, &b.file)));
    let mut json = BTreeMap::new();
    let build = sorted
        .into_iter()
        .map(|b| RawBuild {
            runtime_version: b.runtime_version.clone(),
            rid: b.rid.clone(),
            file: b.file.clone(),
            package: b.package.clone(),
            build_id: b.build_id.clone(),
            file_version: b.file_version.clone(),
            commit: b.commit.clone(),
            descriptor: b.descriptor_rva.map(|v| format!("{v:#x}")),
            dac_table: b.dac_table_rva.map(|v| format!("{v:#x}")),
            heap_hard_limit: b.heap_hard_limit.iter().map(|&rva| SlotValue::InModule(rva).spell()).collect(),
            gc_max_generation: b.gc_constants.as_ref().map(|c| RawConstant { value: c.max_generation, at: c.max_generation_at.iter().map(|&rva| SlotValue::InModule(rva).spell()).collect() }),
            gc_generation_field_offsets: b
                .gc_constants
                .as_ref()
                .map(|c| RawConstant { value: c.generation_field_offsets.to_vec(), at: c.generation_field_offsets_at.iter().map(|&rva| SlotValue::InModule(rva).spell()).collect() }),
            descriptors: b
                .descriptors
                .iter()
                .map(|d| {
                    let key = json_key(&d.json);
                    json.insert(key.clone(), d.json.clone());
                    RawDescriptor {
                        sub: d.sub.clone(),
                        header: format!("{:#x}", d.header_rva),
                        flags: d.flags,
                        json: key,
                        json_at: format!("{:#x}", d.json_rva),
                        json_size: d.json_size,
                        pointer_data_at: format!("{:#x}", d.pointer_data_rva),
                        pointer_data: d.pointer_data.iter().map(|s| s.spell()).collect(),
                    }
                })
                .collect(),
        })
        .collect();
    let body = toml::to_string(&FileData { build, json }).unwrap_or_default();
    format!("{HEADER}{body}")
}

const HEADER: &str = "\
# The .NET runtime catalogue: what knot reads from a runtime's ELF file, per released build, so
# that a dump is enough (no libcoreclr.so, no app image at hand). GENERATED by
# `cargo xtask dotnet-catalog` from the official runtime packs (Microsoft.NETCore.App.Runtime.<rid>
# for libcoreclr.so, Microsoft.NETCore.App.Host.<rid> for singlefilehost); do not edit by hand.
#
# [[build]]: one ELF file, keyed by its GNU build-id. descriptor / dac_table: link-time addresses
# of the exported DotNetRuntimeContractDescriptor and g_dacTable. [[build.descriptors]]: each
# contract descriptor (the exported one first) as the process holds it after relocation:
# header, JSON text (by digest, in [json]) and pointer data, where \"+0x…\" is an address in the
# module (add the load bias) and \"0x…\" a value the dynamic linker leaves alone. heap_hard_limit:
# where the GC's container-default hard limit is stored (gc_heap::heap_hard_limit of the server
# and the workstation GC, found in the x86-64 or aarch64 code; src/runtimes/dotnet/hard_limit_store.rs).
# gc_max_generation / gc_generation_field_offsets: constants the GC's DAC vars point at, with the
# value the file initialises them to (a single-file dump lacks their pages;
# src/runtimes/dotnet/gc_constants.rs).

";

fn version_key(v: &str) -> Vec<u64> {
    v.split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse().ok()).collect()
}

/// The built-in catalogue, parsed once.
pub fn builtin() -> Result<&'static [Build], &'static CatalogError> {
    static ALL: OnceLock<Result<Vec<Build>, CatalogError>> = OnceLock::new();
    ALL.get_or_init(|| parse(FILE, TEXT)).as_ref().map(Vec::as_slice)
}

/// The catalogued build with this GNU build-id.
pub fn lookup(build_id: &str) -> Option<&'static Build> {
    // Every dump's modules are looked up, native ones too: a build-id the catalogue's text
    // does not spell (its ids are lowercase hex, written as they are) is not in it, and the
    // catalogue is then not parsed at all (a few milliseconds of every native run).
    let id = build_id.to_ascii_lowercase();
    if id.is_empty() || !TEXT.contains(id.as_str()) {
        return None;
    }
    // Only the matching entry is parsed (with every check `parse` makes): parsing the whole
    // catalogue, each build's descriptor JSON included, was 28 M instructions of a .NET run.
    static FOUND: Mutex<Vec<(String, Option<&'static Build>)>> = Mutex::new(Vec::new());
    let mut found = FOUND.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, b)) = found.iter().find(|(k, _)| *k == id) {
        return *b;
    }
    // Each catalogued id is parsed once per process and kept, as `builtin` keeps all of them.
    let one = entry_text(TEXT, &id).and_then(|text| parse(FILE, &text).ok()).and_then(|v| v.into_iter().find(|b| b.build_id == id));
    let build = match one {
        Some(b) => Some(&*Box::leak(Box::new(b))),
        // A text this slicing does not understand: the whole catalogue, as before.
        None => builtin().ok().and_then(|all| all.iter().find(|b| b.build_id == id)),
    };
    found.push((id, build));
    build
}

/// The catalogue's text cut down to the one `[[build]]` table whose `build_id` is `id` (its
/// descriptors included) and the `[json]` texts it names: a catalogue `parse` reads exactly
/// as it reads the whole. `None` when the text is not laid out as `render` writes it.
fn entry_text(text: &str, id: &str) -> Option<String> {
    let key = format!("\nbuild_id = \"{id}\"\n");
    let at = text.find(&key)?;
    if text[at + 1..].contains(&key) {
        return None;
    }
    let start = text[..at].rfind("\n[[build]]\n")? + 1;
    let json_at = text.find("\n[json]\n")?;
    let end = text[at..].find("\n[[build]]\n").map_or(json_at, |e| (at + e).min(json_at)) + 1;
    let table = &text[start..end];
    let json = &text[json_at + 1..];
    let mut out = String::with_capacity(table.len() + 16 * 1024);
    out.push_str(table);
    out.push_str("[json]\n");
    let mut names: Vec<&str> = Vec::new();
    for line in table.lines().filter_map(|l| l.strip_prefix("json = ")) {
        let name = line.strip_prefix('"')?.strip_suffix('"')?;
        if names.contains(&name) {
            continue;
        }
        names.push(name);
        let prefix = format!("\n\"{name}\" = ");
        let from = json.find(&prefix)? + 1;
        let value = json[from..].lines().next()?;
        // A one-line literal or basic string only; a multi-line one is left to the full parse.
        let v = &value[prefix.len() - 1..];
        if v.starts_with("'''") || v.starts_with("\"\"\"") {
            return None;
        }
        out.push_str(value);
        out.push('\n');
    }
    Some(out)
}

/// What the catalogue holds, for a diagnostic: `9.0.18–9.0.23, 10.0.11–10.0.15 (linux-x64)`.
pub(crate) fn summary() -> String {
    let Ok(all) = builtin() else { return "none (the catalogue does not parse)".into() };
    let mut versions: Vec<&str> = all.iter().filter(|b| b.rid == "linux-x64").map(|b| b.runtime_version.as_str()).collect();
    versions.sort_by_key(|v| version_key(v));
    versions.dedup();
    if versions.is_empty() {
        return "none".into();
    }
    format!("{} (linux-x64)", versions.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalogued_build_id_is_spelled_in_the_text() {
        // `lookup` skips the parse for an id the text does not hold: exact only if each id is
        // written as parsed.
        let all = builtin().expect("the catalogue parses");
        assert!(!all.is_empty());
        for b in all {
            assert!(TEXT.contains(b.build_id.as_str()), "{}", b.build_id);
            assert!(lookup(&b.build_id.to_ascii_uppercase()).is_some_and(|f| f.build_id == b.build_id));
        }
        assert!(lookup("0123456789abcdef0123456789abcdef01234567").is_none());
    }

    #[test]
    fn each_entry_parsed_alone_equals_the_whole_catalogues() {
        let all = builtin().expect("the catalogue parses");
        for b in all {
            let text = entry_text(TEXT, &b.build_id).unwrap_or_else(|| panic!("{}: not cut out", b.build_id));
            let one = parse(FILE, &text).unwrap_or_else(|e| panic!("{}: {e}", b.build_id));
            assert_eq!(one, std::slice::from_ref(b), "{}", b.build_id);
            assert!(std::ptr::eq(lookup(&b.build_id).expect("found"), lookup(&b.build_id).expect("again")), "parsed once");
            assert_eq!(lookup(&b.build_id), Some(b));
        }
        assert_eq!(entry_text(TEXT, "0123456789abcdef0123456789abcdef01234567"), None);
    }

    #[test]
    fn the_builtin_catalogue_parses() {
        let all = builtin().expect("the catalogue parses");
        assert!(!all.is_empty());
        assert!(lookup("79945f51fb2612f13b7667a10a8fd29122664791").is_some(), "10.0.12 libcoreclr is catalogued");
    }

    #[test]
    fn every_build_has_two_hard_limit_stores_and_10_0_12s_is_the_variable_found_by_value() {
        let all = builtin().expect("the catalogue parses");
        // The aarch64 builds too (their code's store, hard_limit_store.rs).
        for b in all.iter().filter(|b| b.rid == "linux-x64" || b.rid == "linux-arm64") {
            assert_eq!(b.heap_hard_limit.len(), 2, "{} {} {}: the workstation and the server GC's", b.runtime_version, b.rid, b.file);
        }
        // WKS::gc_heap::heap_hard_limit of 10.0.12's libcoreclr.so, found by value on gc_oom,
        // heap_population and monitor_abba before the code was read (coreclr-10.0.toml).
        let b = lookup("79945f51fb2612f13b7667a10a8fd29122664791").expect("10.0.12");
        assert!(b.heap_hard_limit.contains(&0x6da020), "{:x?}", b.heap_hard_limit);
    }

    #[test]
    fn slot_spelling_round_trips() {
        for s in [SlotValue::InModule(0x6cc780), SlotValue::Plain(0), SlotValue::Plain(u64::MAX)] {
            assert_eq!(SlotValue::parse(&s.spell()), Some(s));
        }
        assert_eq!(SlotValue::parse("12"), None);
        assert_eq!(SlotValue::parse("+zz"), None);
    }

    #[test]
    fn a_corrupt_entry_is_refused_not_trusted() {
        let json = r#"{"version":0,"types":{},"globals":{},"contracts":{}}"#;
        let key = json_key(json);
        let good = |extra: &str, header: &str, size: u32, slots: &str| {
            format!(
                "[[build]]\nruntime_version='1'\nrid='linux-x64'\nfile='libcoreclr.so'\npackage='p'\nbuild_id='0123456789abcdef0123'\ndescriptor='0x100'\n{extra}\n[[build.descriptors]]\nheader='{header}'\nflags=1\njson='{key}'\njson_at='0x200'\njson_size={size}\npointer_data_at='0x300'\npointer_data=[{slots}]\n[json]\n\"{key}\"='''{json}'''\n"
            )
        };
        let size = json.len() as u32;
        assert!(parse("t", &good("", "0x100", size, "'+0x10','0x0'")).is_ok());
        for text in [
            good("", "0x100", 0, "'+0x10'"),
            good("", "0x100", 3, "'+0x10'"),
            good("", "0x180", size, "'+0x10'"),
            good("", "0x100", size, "'10'"),
            good("dac_table='12'", "0x100", size, ""),
            good("", "0x100", size, "").replace(json, r#"{"version":1}"#),
            good("", "0x100", size, "").replace("0123456789abcdef0123", "xyz"),
            "[[build]]\nnonsense=1\n".to_string(),
        ] {
            assert!(parse("t", &text).is_err(), "accepted: {text}");
        }
    }
}
