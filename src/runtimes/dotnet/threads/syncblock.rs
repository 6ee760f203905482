//! The sync block table and what is inside a sync block.
//!
//! From the descriptor: the `SyncTableEntries` global (the address of `g_pSyncTable`), the
//! `SyncTableEntry` type's size and its `SyncBlock` field. From the build facts (the .NET 10
//! descriptor does not describe them): `SyncTableEntry`'s object field, the `AwareLock` inside
//! the `SyncBlock`, and the Monitor.Wait list (`SyncBlock.m_Link` → `WaitEventLink`s).
//!
//! The table's used length is `SyncBlockCache::m_FreeSyncTableIndex` (SOS's `Total` is it less
//! one), which the .NET 10 descriptor does not reach: it is read through `g_dacTable`'s slot of
//! `SyncBlockCache::s_pSyncBlockCache` with per-build offsets. Only those entries are read: the
//! table is `new[]`ed uninitialised when it grows, so entries past the used ones hold whatever the
//! allocator had there. Without the count (a build without those facts) the walk stops at the
//! first all-zero entry, bounded by [`MAX_ENTRIES`], and a diagnostic says so.

use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::contract::facts::Layout;
use crate::runtimes::dotnet::gc::dactable::DacTable;
use crate::process::Module;
use crate::runtimes::dotnet::contract::target::{Result, Target};
use std::collections::HashSet;

/// 2^26 indexes fit the header's index field; no process gets near it.
pub(crate) const MAX_ENTRIES: u32 = 1 << 22;
/// Unsound entries kept, each a diagnostic; the rest are counted.
pub(crate) const MAX_UNSOUND: usize = 256;
/// More Monitor.Wait waiters on one object than any process has.
pub(crate) const MAX_WAITERS: usize = 65_536;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) index: u32,
    pub(crate) sync_block: u64,
    pub(crate) object: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Table {
    /// Address of the first entry (`g_pSyncTable`).
    pub(crate) address: u64,
    /// Entries 1..: SOS's "Total".
    pub(crate) total: u32,
    /// Entries on the free list (object field tagged with bit 0): SOS's "Free".
    pub(crate) free: u32,
    /// The entries in use, in index order.
    pub(crate) entries: Vec<Entry>,
    /// Why the walk stopped before the table's end (an unreadable entry, [`MAX_ENTRIES`]): the
    /// entries before it are kept.
    pub(crate) stopped: Option<DotnetError>,
    /// Entries in the used range that fail a sanity check (no sync block, no or misaligned
    /// object): index and what they hold, the first [`MAX_UNSOUND`]. Diagnostics, never locks.
    pub(crate) unsound: Vec<(u32, String)>,
    /// How many more failed it than `unsound` holds.
    pub(crate) unsound_cut: u32,
}

/// The `SyncBlockCache`'s own counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CacheCounts {
    /// `m_FreeSyncTableIndex`: the next never-used entry; entries 1.. below it were handed out.
    pub(crate) next_free_index: u32,
    /// `m_SyncTableSize`: the table's capacity.
    pub(crate) table_size: u32,
}

/// Reads the `SyncBlockCache` through `g_dacTable` (per-build slot and offsets).
pub(crate) fn read_cache(t: &Target, module: &Module, l: &Layout) -> Result<CacheCounts> {
    let (Some(slot), Some(next_off), Some(size_off)) = (l.dac_table_sync_block_cache, l.sync_block_cache_free_sync_table_index, l.sync_block_cache_sync_table_size) else {
        return Err(DotnetError::Unsupported("this build's facts do not locate the SyncBlockCache".into()));
    };
    let dac = DacTable::locate(t, module, l.dac_table_thread_store)?;
    let var = dac.variable(t, slot)?;
    let cache = t.read_ptr(var, "SyncBlockCache::s_pSyncBlockCache")?;
    if cache == 0 {
        return Ok(CacheCounts { next_free_index: 1, table_size: 0 });
    }
    let next_free_index = t.read_u32(cache.wrapping_add(next_off), "SyncBlockCache.m_FreeSyncTableIndex")?;
    let table_size = t.read_u32(cache.wrapping_add(size_off), "SyncBlockCache.m_SyncTableSize")?;
    if next_free_index == 0 || next_free_index > table_size || next_free_index > MAX_ENTRIES {
        return Err(DotnetError::Invalid {
            what: "SyncBlockCache",
            at: cache,
            why: format!("next free sync table index {next_free_index} is not within 1..={} (table size {table_size})", table_size.min(MAX_ENTRIES)),
        });
    }
    Ok(CacheCounts { next_free_index, table_size })
}

/// The table's entries in use; `cache` gives how many the runtime handed out (else the walk
/// stops at the first all-zero entry).
pub(crate) fn read_table(t: &Target, l: &Layout, cache: Option<CacheCounts>) -> Result<Table> {
    let address = t.global_deref("SyncTableEntries")?;
    if address == 0 {
        return Ok(Table::default());
    }
    // Both are bounded by the target (at most MAX_TYPE_SIZE), so the sums below cannot overflow.
    let size = t.size("SyncTableEntry")?;
    let sb_off = t.offset("SyncTableEntry", "SyncBlock")?;
    let obj_off = l.sync_table_entry_object;
    if size < 16 || sb_off + 8 > size || obj_off + 8 > size {
        return Err(DotnetError::Invalid { what: "SyncTableEntry", at: address, why: format!("size {size} does not hold fields at {sb_off} and {obj_off}") });
    }
    let mut table = Table { address, ..Table::default() };
    let end = cache.map_or(MAX_ENTRIES + 1, |c| c.next_free_index);
    for index in 1..end {
        let at = (index as u64).checked_mul(size).and_then(|o| address.checked_add(o)).ok_or_else(|| DotnetError::Invalid {
            what: "sync block table",
            at: address,
            why: format!("entry {index} of {size} bytes lies past the end of the address space"),
        })?;
        let entry = match t.read_bytes(at, size as usize, &format!("sync table entry {index}")) {
            Ok(e) => e,
            Err(e) if index == 1 => return Err(e),
            Err(e) => {
                table.total = index - 1;
                table.stopped = Some(e);
                return Ok(table);
            }
        };
        let word = |o: u64| crate::bytes::u64_at(&entry, o as usize).unwrap_or(0);
        let (sync_block, object) = (word(sb_off), word(obj_off));
        if cache.is_none() && sync_block == 0 && object == 0 {
            table.total = index - 1;
            return Ok(table);
        }
        if object & 1 != 0 {
            table.free += 1;
            continue;
        }
        if sync_block == 0 || object == 0 || object & 7 != 0 {
            if table.unsound.len() < MAX_UNSOUND {
                table.unsound.push((index, format!("sync block {sync_block:#x}, object {object:#x}")));
            } else {
                table.unsound_cut += 1;
            }
            continue;
        }
        table.entries.push(Entry { index, sync_block, object });
    }
    match cache {
        Some(c) => table.total = c.next_free_index - 1,
        None => {
            table.total = MAX_ENTRIES;
            table.stopped = Some(DotnetError::TooMany { what: "sync block table", at: address, limit: MAX_ENTRIES as u64 });
        }
    }
    Ok(table)
}

/// The state of a sync block's `AwareLock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AwareLock {
    pub(crate) lock_state: u32,
    pub(crate) locked: bool,
    /// Threads waiting to enter (the count in the lock state).
    pub(crate) waiter_count: u32,
    pub(crate) recursion: u32,
    /// The owner's managed thread id (0 when free).
    pub(crate) holding_thread_id: u32,
    /// The owner's runtime `Thread`, where the lock records it (.NET 9: `m_HoldingThread`);
    /// 0 when free or when the lock records only the managed id (.NET 10).
    pub(crate) holding_thread: u64,
    /// The owner's OS thread id (0 when free).
    pub(crate) holding_os_thread_id: u64,
}

impl AwareLock {
    /// SOS's MonitorHeld: 1 for held, plus 2 per waiter.
    pub(crate) fn monitor_held(&self) -> u32 {
        (self.locked as u32) + 2 * self.waiter_count
    }
}

pub(crate) fn read_aware_lock(t: &Target, l: &Layout, sync_block: u64) -> Result<AwareLock> {
    let m = sync_block.wrapping_add(l.sync_block_monitor);
    let lock_state = t.read_u32(m.wrapping_add(l.aware_lock_state), &format!("AwareLock state of sync block {sync_block:#x}"))?;
    let recursion = t.read_u32(m.wrapping_add(l.aware_lock_recursion), &format!("AwareLock recursion of sync block {sync_block:#x}"))?;
    let owner = || format!("AwareLock owner of sync block {sync_block:#x}");
    let (holding_thread, holding_thread_id) = match (l.aware_lock_holding_thread, l.aware_lock_holding_thread_id) {
        // .NET 9 keeps the owner's Thread*; its managed id is the Thread's own.
        (Some(at), _) => {
            let thread = t.read_ptr(m.wrapping_add(at), &owner())?;
            let id = if thread == 0 { 0 } else { t.field_u32(thread, "Thread", "Id")? };
            (thread, id)
        }
        (None, Some(at)) => (0, t.read_u32(m.wrapping_add(at), &owner())?),
        (None, None) => return Err(DotnetError::Unsupported("the layout names no AwareLock owner field".into())),
    };
    let holding_os_thread_id = t.read_ptr(m.wrapping_add(l.aware_lock_holding_os_thread_id), &format!("AwareLock OS owner of sync block {sync_block:#x}"))?;
    Ok(AwareLock {
        lock_state,
        locked: lock_state & l.lock_state_locked_mask != 0,
        waiter_count: lock_state >> l.lock_state_waiter_count_shift,
        recursion,
        holding_thread_id,
        holding_thread,
        holding_os_thread_id,
    })
}

/// The runtime `Thread`s in Monitor.Wait on this sync block (the `WaitEventLink` chain), with
/// how many times each has called Wait on it.
pub(crate) fn wait_list(t: &Target, l: &Layout, sync_block: u64) -> Result<Vec<(u64, u32)>> {
    let mut link = t.read_ptr(sync_block.wrapping_add(l.sync_block_link), &format!("Monitor.Wait list of sync block {sync_block:#x}"))?;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    while link != 0 {
        if !seen.insert(link) {
            return Err(DotnetError::Cycle { what: "Monitor.Wait list", at: link });
        }
        if out.len() >= MAX_WAITERS {
            return Err(DotnetError::TooMany { what: "Monitor.Wait list", at: sync_block, limit: MAX_WAITERS as u64 });
        }
        let wel = link.wrapping_sub(l.wait_event_link_link);
        let wait_sb = t.read_ptr(wel.wrapping_add(l.wait_event_link_sync_block), "WaitEventLink.m_WaitSB")?;
        if wait_sb != sync_block {
            return Err(DotnetError::Invalid { what: "WaitEventLink", at: wel, why: format!("names sync block {wait_sb:#x}, not {sync_block:#x}") });
        }
        let thread = t.read_ptr(wel.wrapping_add(l.wait_event_link_thread), "WaitEventLink.m_Thread")?;
        let refs = t.read_u32(wel.wrapping_add(l.wait_event_link_ref_count), "WaitEventLink.m_RefCount")?;
        out.push((thread, refs));
        link = t.read_ptr(link, "WaitEventLink.m_LinkSB")?;
    }
    Ok(out)
}
