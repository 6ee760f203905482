//! Per-runtime-build facts the contract descriptor does not give (`analyzers/dotnet/*.toml`),
//! found by libcoreclr build-id and runtime version. An unknown build gets no facts: the
//! caller reports "unsupported runtime build" for what needs them, and never guesses.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

pub(crate) const FILES: &[(&str, &str)] = &[
    ("analyzers/dotnet/coreclr-10.0.toml", include_str!("../../../../analyzers/dotnet/coreclr-10.0.toml")),
    ("analyzers/dotnet/coreclr-9.0.toml", include_str!("../../../../analyzers/dotnet/coreclr-9.0.toml")),
    ("analyzers/dotnet/coreclr-8.0.toml", include_str!("../../../../analyzers/dotnet/coreclr-8.0.toml")),
];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Build {
    pub runtime_version: String,
    pub file_version: String,
    /// The dotnet/runtime commit the build is from, and how its layout was checked: a build
    /// enters the data only with both (see [`parse`]).
    pub(crate) commit: String,
    pub(crate) libcoreclr_build_id: String,
    pub(crate) layout: String,
    pub(crate) verified: String,
}

/// Offsets and bits inside CoreCLR structures (see the data file for what each is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Layout {
    pub(crate) sync_table_entry_object: u64,
    pub(crate) sync_block_monitor: u64,
    pub(crate) sync_block_link: u64,
    pub(crate) sync_block_size: u64,
    pub(crate) aware_lock_state: u64,
    pub(crate) aware_lock_recursion: u64,
    /// The owner as a managed thread id (.NET 10: `m_HoldingThreadId`)…
    #[serde(default)]
    pub(crate) aware_lock_holding_thread_id: Option<u64>,
    /// …or as the owner's `Thread*` (.NET 9: `m_HoldingThread`); one of the two is given.
    #[serde(default)]
    pub(crate) aware_lock_holding_thread: Option<u64>,
    pub(crate) aware_lock_holding_os_thread_id: u64,
    pub(crate) lock_state_locked_mask: u32,
    pub(crate) lock_state_waiter_count_shift: u32,
    pub(crate) wait_event_link_sync_block: u64,
    pub(crate) wait_event_link_thread: u64,
    pub(crate) wait_event_link_link: u64,
    pub(crate) wait_event_link_ref_count: u64,
    /// The ThreadBlockingInfo records (.NET 9+; .NET 8 has none: its waiters are read from their
    /// HelperMethodFrames, `blocking::frame_records`).
    #[serde(default)]
    pub(crate) thread_local_data_blocking_info_first: Option<u64>,
    #[serde(default)]
    pub(crate) thread_local_data_thread: Option<u64>,
    #[serde(default)]
    pub(crate) blocking_info_object: Option<u64>,
    #[serde(default)]
    pub(crate) blocking_info_kind: Option<u64>,
    #[serde(default)]
    pub(crate) blocking_info_timeout: Option<u64>,
    #[serde(default)]
    pub(crate) blocking_info_next: Option<u64>,
    pub(crate) header_is_hash_or_sync_block_index: u32,
    pub(crate) header_is_hash_code: u32,
    pub(crate) header_sync_block_index_mask: u32,
    pub(crate) header_spin_lock: u32,
    pub(crate) header_thin_lock_thread_id_mask: u32,
    pub(crate) header_thin_lock_recursion_mask: u32,
    pub(crate) header_thin_lock_recursion_shift: u32,
    /// `System.Threading.Lock` (.NET 9+; not in .NET 8).
    #[serde(default)]
    pub(crate) managed_lock_owning_thread_id: Option<u64>,
    #[serde(default)]
    pub(crate) managed_lock_state: Option<u64>,
    #[serde(default)]
    pub(crate) managed_lock_recursion_count: Option<u64>,
    #[serde(default)]
    pub(crate) managed_lock_locked_mask: Option<u32>,
    pub(crate) task_continuation_object: u64,
    pub(crate) task_state_flags: u64,
    pub(crate) manual_reset_event_slim_lock: u64,
    /// `g_dacTable` slots (dacvars.h order): `ThreadStore::s_pThreadStore` (checked against the
    /// descriptor), `g_heap_type`, `g_gcDacGlobals`, `g_global_alloc_context`.
    pub(crate) dac_table_thread_store: u64,
    pub(crate) dac_table_heap_type: u64,
    pub(crate) dac_table_gc_dac_globals: u64,
    pub(crate) dac_table_global_alloc_context: u64,
    /// FieldDesc (not in the descriptor): its size; the u32 at `field_desc_token` holds the
    /// FieldDef rid (`field_desc_token_mask`) and the static bit; the u32 at `field_desc_offset`
    /// the field's offset after the MethodTable pointer (`field_desc_offset_mask`) and its
    /// CorElementType (the bits above `field_desc_type_shift`).
    pub(crate) field_desc_size: u64,
    pub(crate) field_desc_token: u64,
    pub(crate) field_desc_token_mask: u32,
    pub(crate) field_desc_static_bit: u32,
    pub(crate) field_desc_offset: u64,
    pub(crate) field_desc_offset_mask: u32,
    pub(crate) field_desc_type_shift: u32,
    /// FieldDesc: the bits beside the static bit that mark a thread static and an RVA static
    /// (their values are not in the class's statics).
    #[serde(default)]
    pub(crate) field_desc_thread_local_bit: Option<u32>,
    #[serde(default)]
    pub(crate) field_desc_rva_bit: Option<u32>,
    /// `g_dacTable` slot of `SyncBlockCache::s_pSyncBlockCache`, and the offsets in the
    /// `SyncBlockCache` of `m_FreeSyncTableIndex` and `m_SyncTableSize` (how many sync table
    /// entries the runtime handed out, and the table's capacity).
    #[serde(default)]
    pub(crate) dac_table_sync_block_cache: Option<u64>,
    #[serde(default)]
    pub(crate) sync_block_cache_free_sync_table_index: Option<u64>,
    #[serde(default)]
    pub(crate) sync_block_cache_sync_table_size: Option<u64>,
    /// The class-init lock (`ListLockEntry`, listlock.h): where its `Crst` (a pthread mutex), its
    /// holding `Thread*` (`DeadlockAwareLock::m_pHoldingThread`) and its data (the class's
    /// MethodTable) are in it.
    #[serde(default)]
    pub(crate) list_lock_entry_crst: Option<u64>,
    #[serde(default)]
    pub(crate) list_lock_entry_holding_thread: Option<u64>,
    #[serde(default)]
    pub(crate) list_lock_entry_data: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileData {
    build: Vec<Build>,
    layout: BTreeMap<String, Layout>,
}

/// A known build and its layout.
#[derive(Debug, Clone)]
pub(crate) struct BuildFacts {
    pub(crate) build: Build,
    pub(crate) layout: Layout,
    pub(crate) file: &'static str,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("runtime facts {file}: {reason}")]
pub(crate) struct FactsError {
    pub(crate) file: &'static str,
    pub(crate) reason: String,
}

/// Parses one data file.
pub(crate) fn parse(file: &'static str, text: &str) -> Result<Vec<BuildFacts>, FactsError> {
    let bad = |reason: String| FactsError { file, reason };
    let data: FileData = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
    data.build
        .into_iter()
        .map(|b| {
            // A layout is trusted only for a build it was checked on: the commit it is read from
            // and the check (SOS on a real dump) are part of the entry.
            if b.commit.len() != 40 || !b.commit.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad(format!("build {}: commit {:?} is not 40 hex digits", b.runtime_version, b.commit)));
            }
            if b.verified.trim().is_empty() {
                return Err(bad(format!("build {}: no `verified` line (how its layout was checked against SOS)", b.runtime_version)));
            }
            let layout = *data.layout.get(&b.layout).ok_or_else(|| bad(format!("layout {} is not defined", b.layout)))?;
            if layout.aware_lock_holding_thread_id.is_none() && layout.aware_lock_holding_thread.is_none() {
                return Err(bad(format!("layout {}: neither aware_lock_holding_thread_id nor aware_lock_holding_thread", b.layout)));
            }
            if b.libcoreclr_build_id.len() != 40 || !b.libcoreclr_build_id.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad(format!("build {}: build-id {:?} is not 40 hex digits", b.runtime_version, b.libcoreclr_build_id)));
            }
            Ok(BuildFacts { build: b, layout, file })
        })
        .collect()
}

/// Every build in `analyzers/dotnet/`, parsed once.
pub(crate) fn builtin() -> Result<&'static [BuildFacts], &'static FactsError> {
    static ALL: OnceLock<Result<Vec<BuildFacts>, FactsError>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut all = Vec::new();
        for (file, text) in FILES {
            all.extend(parse(file, text)?);
        }
        Ok(all)
    })
    .as_ref()
    .map(Vec::as_slice)
}

/// The facts for a runtime build: the build-id must match (it names the exact binary), and so
/// must the version (the product version, or the file version compiled into libcoreclr when the
/// path does not name the product), so a data-file mistake cannot pair a layout with the wrong
/// runtime.
pub(crate) fn lookup<'a>(all: &'a [BuildFacts], build_id: Option<&str>, product_version: &str, file_version: Option<&str>) -> Option<&'a BuildFacts> {
    let id = build_id?;
    all.iter().find(|f| {
        f.build.libcoreclr_build_id.eq_ignore_ascii_case(id)
            && (f.build.runtime_version == product_version || file_version.is_some_and(|v| v == f.build.file_version))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_files_parse() {
        let all = builtin().expect("analyzer data parses");
        assert!(!all.is_empty());
        let id = Some("79945f51fb2612f13b7667a10a8fd29122664791");
        let f = lookup(all, id, "10.0.12", None).expect("10.0.12 is known");
        assert_eq!(f.layout.aware_lock_holding_os_thread_id, 16);
        assert_eq!(f.layout.aware_lock_holding_thread_id, Some(8));
        assert!(lookup(all, id, "10.0.1226.42308", Some("10.0.1226.42308")).is_some());
        assert!(lookup(all, id, "10.0.13", None).is_none());
        assert!(lookup(all, None, "10.0.12", None).is_none());
        assert!(lookup(all, Some("00945f51fb2612f13b7667a10a8fd29122664791"), "10.0.12", None).is_none());
    }

    #[test]
    fn refuses_unknown_fields_and_layouts() {
        let commit = "c".repeat(40);
        let e = parse("x.toml", &format!("[[build]]\nruntime_version='1'\nfile_version='1'\ncommit='{commit}'\nlibcoreclr_build_id='00'\nlayout='nope'\nverified='SOS'\n[layout]\n")).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }

    #[test]
    fn refuses_a_build_without_its_commit_or_check() {
        let entry = |commit: &str, verified: &str| {
            format!("[[build]]\nruntime_version='1'\nfile_version='1'\ncommit='{commit}'\nlibcoreclr_build_id='{}'\nlayout='l'\nverified='{verified}'\n[layout]\n", "a".repeat(40))
        };
        let commit = "b".repeat(40);
        let e = parse("x.toml", &entry(&commit, " ")).unwrap_err();
        assert!(e.to_string().contains("verified"), "{e}");
        let e = parse("x.toml", &entry("main", "SOS syncblk")).unwrap_err();
        assert!(e.to_string().contains("commit"), "{e}");
    }
}
