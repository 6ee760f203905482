//! What an older runtime's contract descriptor does not describe and a later one does, added to
//! the descriptor per runtime build (`analyzers/dotnet/descriptor-*.toml`): the .NET 9 descriptor
//! has no ExecutionManager contract, though the structures that contract reads in .NET 10 are
//! there with a known layout. A supplement only adds — a type, field, global or contract the
//! descriptor itself names is never replaced — and applies only to a listed build whose
//! `g_dacTable` passes the ThreadStore check, so the readers see one descriptor either way.

use crate::runtimes::dotnet::contract::descriptor::{Descriptor, Field, Global, GlobalValue};
use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::gc::dactable::DacTable;
use crate::runtimes::dotnet::contract::locate::RuntimeVersion;
use crate::runtimes::dotnet::contract::target::Target;
use crate::process::{Memory, Module};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

pub(crate) const FILES: &[(&str, &str)] = &[
    ("analyzers/dotnet/descriptor-9.0.toml", include_str!("../../../../analyzers/dotnet/descriptor-9.0.toml")),
    ("analyzers/dotnet/descriptor-8.0.toml", include_str!("../../../../analyzers/dotnet/descriptor-8.0.toml")),
];

/// The key of a type's size, as in the descriptor's JSON.
const SIZE_KEY: &str = "!";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Build {
    runtime_version: String,
    file_version: String,
    commit: String,
    libcoreclr_build_id: String,
    supplement: String,
    verified: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Supplement {
    /// The g_dacTable slot of `ThreadStore::s_pThreadStore`, checked against the descriptor.
    dac_table_thread_store: u64,
    /// The whole descriptor of a runtime that exports none (.NET 8), not an addition to one.
    #[serde(default)]
    whole: bool,
    /// Another supplement this one is, but for what it says itself (a build whose slots differ).
    #[serde(default)]
    base: Option<String>,
    #[serde(default)]
    contracts: BTreeMap<String, u64>,
    /// Globals whose value is the address a g_dacTable slot holds: name → slot.
    #[serde(default)]
    dac_table_globals: BTreeMap<String, u64>,
    #[serde(default)]
    globals: BTreeMap<String, u64>,
    /// Type → field → offset (`"!"`: the type's size).
    #[serde(default)]
    types: BTreeMap<String, BTreeMap<String, u64>>,
}

impl Supplement {
    /// This supplement over `base`: what this one says, and what it does not from `base`.
    fn over(self, mut base: Supplement) -> Supplement {
        base.dac_table_thread_store = self.dac_table_thread_store;
        base.whole |= self.whole;
        base.contracts.extend(self.contracts);
        base.dac_table_globals.extend(self.dac_table_globals);
        base.globals.extend(self.globals);
        for (ty, fields) in self.types {
            base.types.entry(ty).or_default().extend(fields);
        }
        base
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileData {
    build: Vec<Build>,
    supplement: BTreeMap<String, Supplement>,
}

/// One build's supplement, as parsed.
#[derive(Debug, Clone)]
pub(crate) struct BuildSupplement {
    build: Build,
    supplement: Supplement,
    file: &'static str,
}

/// What was added to a descriptor, for the diagnostics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Applied {
    pub(crate) file: &'static str,
    pub(crate) runtime_version: String,
    pub(crate) contracts: Vec<String>,
}

fn parse(file: &'static str, text: &str) -> Result<Vec<BuildSupplement>, String> {
    let data: FileData = toml::from_str(text).map_err(|e| format!("{file}: {e}"))?;
    data.build
        .into_iter()
        .map(|b| {
            // As for the per-build facts: trusted only for a build it was checked on.
            let hex40 = |s: &str| s.len() == 40 && s.bytes().all(|c| c.is_ascii_hexdigit());
            if !hex40(&b.commit) || !hex40(&b.libcoreclr_build_id) {
                return Err(format!("{file}: build {}: commit and build-id must be 40 hex digits", b.runtime_version));
            }
            if b.verified.trim().is_empty() {
                return Err(format!("{file}: build {}: no `verified` line", b.runtime_version));
            }
            let mut supplement = data.supplement.get(&b.supplement).cloned().ok_or_else(|| format!("{file}: supplement {} is not defined", b.supplement))?;
            if let Some(base) = supplement.base.take() {
                let under = data.supplement.get(&base).cloned().ok_or_else(|| format!("{file}: supplement {}'s base {base} is not defined", b.supplement))?;
                if under.base.is_some() {
                    return Err(format!("{file}: supplement {}'s base {base} has a base itself", b.supplement));
                }
                supplement = supplement.over(under);
            }
            Ok(BuildSupplement { build: b, supplement, file })
        })
        .collect()
}

fn builtin() -> Result<&'static [BuildSupplement], &'static str> {
    static ALL: OnceLock<Result<Vec<BuildSupplement>, String>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut all = Vec::new();
        for (file, text) in FILES {
            all.extend(parse(file, text)?);
        }
        Ok(all)
    })
    .as_ref()
    .map(Vec::as_slice)
    .map_err(String::as_str)
}

fn lookup<'a>(all: &'a [BuildSupplement], version: &RuntimeVersion) -> Option<&'a BuildSupplement> {
    let id = version.build_id.as_deref()?;
    all.iter().find(|s| {
        s.build.libcoreclr_build_id.eq_ignore_ascii_case(id)
            && (s.build.runtime_version == version.product || version.file_version.as_deref() == Some(s.build.file_version.as_str()))
    })
}

/// Adds the supplement of `version`'s build, if knot has one, to `descriptor`. `Ok(None)`: no
/// supplement for this build (the descriptor is left as it is).
pub(crate) fn apply(descriptor: &mut Descriptor, pointer_data: &[u64], mem: &dyn Memory, module: &Module, version: &RuntimeVersion) -> Result<Option<Applied>, DotnetError> {
    let all = builtin().map_err(|e| DotnetError::Unsupported(format!("descriptor supplements unreadable: {e}")))?;
    let Some(entry) = lookup(all, version).filter(|e| !e.supplement.whole) else { return Ok(None) };
    apply_entry(descriptor, pointer_data, mem, module, entry).map(Some)
}

/// The whole descriptor of a runtime that exports none (.NET 8), from knot's data for its
/// build; `Ok(None)` when knot has none. With no descriptor to check `g_dacTable` against, its
/// slots are checked by what they give: the finalizer thread must be in the ThreadStore's list.
pub(crate) fn whole(mem: &dyn Memory, module: &Module, version: &RuntimeVersion) -> Result<Option<(Descriptor, Applied)>, DotnetError> {
    let all = builtin().map_err(|e| DotnetError::Unsupported(format!("descriptor supplements unreadable: {e}")))?;
    let Some(entry) = lookup(all, version).filter(|e| e.supplement.whole) else { return Ok(None) };
    let s = &entry.supplement;
    let mut descriptor = Descriptor::default();
    let table = DacTable::find(module)?;
    let mut dac_globals = Vec::new();
    {
        let t = Target::borrowed(mem, &descriptor, &[]);
        for (name, &slot) in &s.dac_table_globals {
            dac_globals.push((name.clone(), table.variable(&t, slot)?));
        }
    }
    let contracts = add(&mut descriptor, s, dac_globals);
    let t = Target::borrowed(mem, &descriptor, &[]);
    let store = crate::runtimes::dotnet::threads::thread_store(&t)?;
    let threads = crate::runtimes::dotnet::threads::thread_addresses(&t, store)?;
    let finalizer = t.global_deref("FinalizerThread")?;
    if finalizer != 0 && !threads.contains(&finalizer) {
        return Err(DotnetError::Invalid {
            what: "g_dacTable",
            at: table.address,
            why: format!("the finalizer thread {finalizer:#x} is not among the ThreadStore's {} threads: the table's order is not this build's", threads.len()),
        });
    }
    Ok(Some((descriptor, Applied { file: entry.file, runtime_version: entry.build.runtime_version.clone(), contracts })))
}

fn apply_entry(descriptor: &mut Descriptor, pointer_data: &[u64], mem: &dyn Memory, module: &Module, entry: &BuildSupplement) -> Result<Applied, DotnetError> {
    let s = &entry.supplement;
    // The slots first: a table whose ThreadStore slot disagrees with the descriptor is not this
    // build's, and nothing of the supplement is added.
    let mut dac_globals = Vec::new();
    if !s.dac_table_globals.is_empty() {
        let t = Target::borrowed(mem, descriptor, pointer_data);
        let table = DacTable::locate(&t, module, s.dac_table_thread_store)?;
        for (name, &slot) in &s.dac_table_globals {
            dac_globals.push((name.clone(), table.variable(&t, slot)?));
        }
    }
    let contracts = add(descriptor, s, dac_globals);
    Ok(Applied { file: entry.file, runtime_version: entry.build.runtime_version.clone(), contracts })
}

/// Adds what `descriptor` lacks of `s` (and the globals read from the dac table); returns the
/// contracts added.
fn add(descriptor: &mut Descriptor, s: &Supplement, dac_globals: Vec<(String, u64)>) -> Vec<String> {
    let mut contracts = Vec::new();
    for (name, &v) in &s.contracts {
        if !descriptor.contracts.contains_key(name) {
            descriptor.contracts.insert(name.clone(), v);
            contracts.push(format!("{name} {v}"));
        }
    }
    let values = s.globals.iter().map(|(n, &v)| (n.clone(), v)).chain(dac_globals);
    for (name, v) in values {
        descriptor.globals.entry(name).or_insert(Global { value: GlobalValue::Direct(v), type_name: None });
    }
    for (ty, fields) in &s.types {
        let info = descriptor.types.entry(ty.clone()).or_default();
        for (field, &offset) in fields {
            if field == SIZE_KEY {
                info.size.get_or_insert(offset);
            } else {
                info.fields.entry(field.clone()).or_insert(Field { offset, type_name: None });
            }
        }
    }
    contracts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_files_parse_and_name_the_9_0_23_build() {
        let all = builtin().expect("supplements parse");
        let s = all.iter().find(|s| s.build.runtime_version == "9.0.23").expect("9.0.23");
        assert_eq!(s.supplement.dac_table_thread_store, 16);
        assert_eq!(s.supplement.contracts.get("ExecutionManager"), Some(&1));
        assert_eq!(s.supplement.types["RuntimeFunction"][SIZE_KEY], 12);
    }

    #[test]
    fn refuses_an_entry_without_its_check_or_supplement() {
        let entry = |verified: &str, name: &str| {
            format!(
                "[[build]]\nruntime_version='9'\nfile_version='9'\ncommit='{}'\nlibcoreclr_build_id='{}'\nsupplement='{name}'\nverified='{verified}'\n[supplement.s]\ndac_table_thread_store=1\n",
                "a".repeat(40),
                "b".repeat(40)
            )
        };
        assert!(parse("x.toml", &entry(" ", "s")).unwrap_err().contains("verified"));
        assert!(parse("x.toml", &entry("SOS", "t")).unwrap_err().contains("not defined"));
        assert!(parse("x.toml", &entry("SOS", "s")).is_ok());
    }

    #[test]
    fn adds_only_what_the_descriptor_lacks() {
        let mut d = Descriptor::parse(br#"{"version":0,"types":{"Module":{"Base":288}},"globals":{"StubCodeBlockLast":"0x9"},"contracts":{"Thread":1}}"#, 0).expect("json");
        let s: Supplement = toml::from_str(
            "dac_table_thread_store=16\ncontracts={Thread=2,ExecutionManager=1}\nglobals={StubCodeBlockLast=15,HashMapSlotsPerBucket=4}\n[types.Module]\nBase=1\nReadyToRunInfo=984\n[types.RuntimeFunction]\n'!'=12\nBeginAddress=0\n",
        )
        .expect("toml");
        let added = add(&mut d, &s, vec![("ExecutionManagerCodeRangeMapAddress".into(), 0x1000)]);
        assert_eq!(added, vec!["ExecutionManager 1".to_string()]);
        assert_eq!(d.contracts["Thread"], 1, "the descriptor's own contract version stays");
        assert_eq!(d.types["Module"].fields["Base"].offset, 288, "the descriptor's own offset stays");
        assert_eq!(d.types["Module"].fields["ReadyToRunInfo"].offset, 984);
        assert_eq!(d.types["RuntimeFunction"].size, Some(12));
        assert_eq!(d.globals["StubCodeBlockLast"].value, GlobalValue::Direct(9));
        assert_eq!(d.globals["HashMapSlotsPerBucket"].value, GlobalValue::Direct(4));
        assert_eq!(d.globals["ExecutionManagerCodeRangeMapAddress"].value, GlobalValue::Direct(0x1000));
    }
}
