//! The GC handle table: every handle the runtime holds (`GCHandle.Alloc`, the statics' arrays,
//! pinned buffers, dependent handles of `ConditionalWeakTable`s), read from `GcDacVars`'s
//! `handle_table_map` (handletablepriv.h, objecthandle.h).
//!
//! The map is a chain of `{ buckets, next, max_index }`, each with 10 bucket pointers; a bucket
//! holds one `HandleTable*` per heap slot; a table's segments (64 KiB, 4 KiB header) are a chain
//! from `HandleTable.pSegmentList`. The header gives each of the 120 blocks of 64 handles its
//! type (`rgBlockType`, 0xFF free), a user-data block (`rgUserData`: a dependent handle's
//! secondary, a variable handle's strength) and a free bit per handle (`rgFreeMask`).
//! The header is packed, and its size depends on the number of internal handle types
//! (`HANDLE_MAX_INTERNAL_TYPES`, 12 before the cross-reference type, 13 after): the count
//! whose segment points back at its table (`pHandleTable`) is the build's.
//!
//! Every count is bounded: map nodes, tables, segments (a cycle or a chain past
//! [`MAX_SEGMENTS`] stops with an error), and a block the dump lacks is an error, not a gap.

use crate::runtimes::dotnet::contract::target::Target;
use serde::Serialize;

const PTR: u64 = 8;
const INITIAL_HANDLE_TABLE_ARRAY_SIZE: u64 = 10;
const SEGMENT_SIZE: u64 = 0x10000;
const HEADER_SIZE: u64 = 0x1000;
const HANDLES_PER_BLOCK: u64 = 64;
const BLOCKS_PER_SEGMENT: u64 = (SEGMENT_SIZE - HEADER_SIZE) / PTR / HANDLES_PER_BLOCK;
/// Packed header offsets (`_TableSegmentHeader`).
const RG_FREE_MASK: u64 = BLOCKS_PER_SEGMENT * 4 + BLOCKS_PER_SEGMENT;
const RG_BLOCK_TYPE: u64 = RG_FREE_MASK + (SEGMENT_SIZE - HEADER_SIZE) / PTR / 32 * 4;
const RG_USER_DATA: u64 = RG_BLOCK_TYPE + BLOCKS_PER_SEGMENT;
const RG_LOCKS: u64 = RG_USER_DATA + BLOCKS_PER_SEGMENT;
const RG_TAIL: u64 = RG_LOCKS + BLOCKS_PER_SEGMENT;
const TYPE_INVALID: u8 = 0xff;
const BLOCK_INVALID: u8 = 0xff;
/// The internal type counts knot knows (see the module doc).
const TYPE_COUNTS: [u64; 2] = [12, 13];
/// Map nodes, and segments per table, at most.
const MAX_MAP_NODES: usize = 64;
pub(crate) const MAX_SEGMENTS: usize = 1 << 16;
const MAX_HEAP_SLOTS: u64 = 1024;
/// `HNDTYPE_VARIABLE`'s user data: its strength.
const VHT_STRONG: u64 = 0x400;
const VHT_PINNED: u64 = 0x800;

/// `HNDTYPE_*` (gcinterface.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum HandleType {
    WeakShort,
    WeakLong,
    Strong,
    Pinned,
    Variable,
    RefCounted,
    Dependent,
    AsyncPinned,
    SizedRef,
    WeakNativeCom,
    WeakInteriorPointer,
    CrossReference,
}

impl HandleType {
    fn from_block(v: u8) -> Option<HandleType> {
        use HandleType::*;
        Some(match v {
            0 => WeakShort,
            1 => WeakLong,
            2 => Strong,
            3 => Pinned,
            4 => Variable,
            5 => RefCounted,
            6 => Dependent,
            7 => AsyncPinned,
            8 => SizedRef,
            9 => WeakNativeCom,
            10 => WeakInteriorPointer,
            11 => CrossReference,
            _ => return None,
        })
    }
}

/// One handle in use with an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Handle {
    /// The handle's own address (`GCHandle.ToIntPtr`).
    pub(crate) address: u64,
    pub(crate) kind: HandleType,
    pub(crate) object: u64,
    /// The user data: a dependent handle's secondary object, a variable handle's strength,
    /// a sized-ref handle's size; 0 when the type has none.
    pub(crate) extra: u64,
}

impl Handle {
    /// Whether the GC treats the handle's object as alive because of it (SOS `gcroot`'s
    /// handle roots): strong, pinned, async pinned, ref-counted and sized-ref handles, and
    /// variable handles set strong or pinned. Weak handles and dependent handles are not (a
    /// dependent handle is an edge from its primary).
    pub(crate) fn is_root(&self) -> bool {
        match self.kind {
            HandleType::Strong | HandleType::Pinned | HandleType::AsyncPinned | HandleType::RefCounted | HandleType::SizedRef => true,
            HandleType::Variable => self.extra & (VHT_STRONG | VHT_PINNED) != 0,
            _ => false,
        }
    }
}

/// What the table held, and where reading it stopped.
#[derive(Debug, Clone, Default)]
pub(crate) struct HandleTable {
    pub(crate) handles: Vec<Handle>,
    /// Parts that could not be read: (address, why).
    pub(crate) errors: Vec<(u64, String)>,
}

/// Reads every handle in use of the map at `map` (`GcDacVars.handle_table_map`); `slots` is
/// the number of heaps (one table per heap in each bucket).
pub(crate) fn read(t: &Target, map: u64, slots: u64) -> HandleTable {
    let mut out = HandleTable::default();
    if map == 0 {
        out.errors.push((0, "GcDacVars has no handle table map".into()));
        return out;
    }
    let slots = slots.clamp(1, MAX_HEAP_SLOTS);
    let mut node = map;
    let mut tables = Vec::new();
    for _ in 0..MAX_MAP_NODES {
        if node == 0 {
            break;
        }
        let (Ok(buckets), Ok(next)) = (t.read_ptr(node, "HandleTableMap.pBuckets"), t.read_ptr(node + PTR, "HandleTableMap.pNext")) else {
            out.errors.push((node, "handle table map node not in the dump".into()));
            break;
        };
        for i in 0..INITIAL_HANDLE_TABLE_ARRAY_SIZE {
            let Ok(bucket) = t.read_ptr(buckets + PTR * i, "handle table bucket") else {
                out.errors.push((buckets + PTR * i, "handle table bucket not in the dump".into()));
                continue;
            };
            if bucket == 0 {
                continue;
            }
            let Ok(array) = t.read_ptr(bucket, "HandleTableBucket.pTable") else {
                out.errors.push((bucket, "handle table bucket not in the dump".into()));
                continue;
            };
            for s in 0..slots {
                match t.read_ptr(array + PTR * s, "handle table of a heap") {
                    Ok(0) => {}
                    Ok(table) => tables.push(table),
                    Err(e) => out.errors.push((array + PTR * s, e.to_string())),
                }
            }
        }
        node = next;
    }
    tables.sort_unstable();
    tables.dedup();
    for table in tables {
        read_table(t, table, &mut out);
    }
    out
}

/// The internal type count of this build: the one whose first segment points back at `table`.
fn type_count(t: &Target, table: u64) -> Option<(u64, u64)> {
    for n in TYPE_COUNTS {
        let list_at = table + (4 * n).div_ceil(PTR) * PTR;
        let Ok(first) = t.read_ptr(list_at, "HandleTable.pSegmentList") else { continue };
        if first == 0 || first % SEGMENT_SIZE != 0 {
            continue;
        }
        if t.read_ptr(first + RG_TAIL + 6 * n + PTR, "TableSegment.pHandleTable").ok() == Some(table) {
            return Some((n, first));
        }
    }
    None
}

fn read_table(t: &Target, table: u64, out: &mut HandleTable) {
    let Some((n, first)) = type_count(t, table) else {
        out.errors.push((table, "handle table: no segment points back at it (unknown layout or not in the dump)".into()));
        return;
    };
    let data_block_type = (n - 1) as u8;
    let next_at = RG_TAIL + 6 * n;
    let mut seen = std::collections::HashSet::new();
    let mut segment = first;
    let mut count = 0usize;
    while segment != 0 {
        count += 1;
        if count > MAX_SEGMENTS || !seen.insert(segment) {
            out.errors.push((segment, format!("handle table {table:#x}: segment chain cut (a cycle, or past {MAX_SEGMENTS} segments)")));
            return;
        }
        if segment % SEGMENT_SIZE != 0 {
            out.errors.push((segment, format!("handle table {table:#x}: segment {segment:#x} is not 64 KiB aligned")));
            return;
        }
        let header = match t.read_bytes(segment, (next_at + PTR) as usize, "handle table segment header") {
            Ok(h) => h,
            Err(e) => {
                out.errors.push((segment, e.to_string()));
                return;
            }
        };
        read_segment(t, segment, &header, data_block_type, out);
        segment = u64::from_le_bytes(header[next_at as usize..next_at as usize + 8].try_into().unwrap_or([0; 8]));
    }
}

fn read_segment(t: &Target, segment: u64, header: &[u8], data_block_type: u8, out: &mut HandleTable) {
    let byte = |off: u64| header.get(off as usize).copied().unwrap_or(TYPE_INVALID);
    let free_mask = |h: u64| -> bool {
        let at = (RG_FREE_MASK + (h / 32) * 4) as usize;
        header.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) & (1 << (h % 32)) != 0).unwrap_or(true)
    };
    for block in 0..BLOCKS_PER_SEGMENT {
        let raw = byte(RG_BLOCK_TYPE + block);
        if raw == TYPE_INVALID || raw == data_block_type {
            continue;
        }
        let Some(kind) = HandleType::from_block(raw) else {
            out.errors.push((segment, format!("handle block {block} has type {raw}")));
            continue;
        };
        let values_at = segment + HEADER_SIZE + block * HANDLES_PER_BLOCK * PTR;
        let values = match t.read_bytes(values_at, (HANDLES_PER_BLOCK * PTR) as usize, "handle block") {
            Ok(v) => v,
            Err(e) => {
                out.errors.push((values_at, e.to_string()));
                continue;
            }
        };
        let user = byte(RG_USER_DATA + block);
        let extras = if user != BLOCK_INVALID && (user as u64) < BLOCKS_PER_SEGMENT {
            t.read_bytes(segment + HEADER_SIZE + user as u64 * HANDLES_PER_BLOCK * PTR, (HANDLES_PER_BLOCK * PTR) as usize, "handle user data").ok()
        } else {
            None
        };
        for k in 0..HANDLES_PER_BLOCK {
            if free_mask(block * HANDLES_PER_BLOCK + k) {
                continue;
            }
            let word = |b: &[u8]| u64::from_le_bytes(b[(k * PTR) as usize..(k * PTR + PTR) as usize].try_into().unwrap_or([0; 8]));
            let object = word(&values);
            if object == 0 {
                continue;
            }
            let extra = extras.as_deref().map(word).unwrap_or(0);
            out.handles.push(Handle { address: values_at + k * PTR, kind, object, extra });
        }
    }
}
