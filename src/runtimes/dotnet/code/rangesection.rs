//! The runtime's range section map (ExecutionManager contract): which `RangeSection` — a JIT
//! code heap, a ReadyToRun image, or a range of stubs — holds a code address.
//!
//! On 64-bit targets the map has five levels of 256 pointers indexed by address bits 56..49,
//! 48..41, 40..33, 32..25 and 24..17; the last level's entry is the first of a list of
//! `RangeSectionFragment`s covering that 128 KiB chunk. Pointers in the map and the fragment
//! list carry a flag in bit 0, cleared before use.

use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::contract::target::{Result, Target};

const LEVELS: u32 = 5;
const CHUNK_BITS: u32 = 17;
const LEVEL_BITS: u32 = 8;
/// Longer than any real fragment list of one chunk.
const MAX_FRAGMENTS: usize = 4096;
/// `RangeSection::RANGE_SECTION_CODEHEAP`: JIT-compiled code, found through a nibble map.
pub(crate) const FLAG_CODE_HEAP: u32 = 0x2;
/// `RangeSection::RANGE_SECTION_RANGELIST`: runtime stubs (precodes, thunks).
pub(crate) const FLAG_RANGE_LIST: u32 = 0x4;

/// One `RangeSection`, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RangeSection {
    pub(crate) address: u64,
    pub(crate) begin: u64,
    pub(crate) end: u64,
    pub(crate) flags: u32,
    /// The code heap's `CodeHeapListNode` (code heaps only).
    pub(crate) heap_list: u64,
    /// The ReadyToRun image's `Module` (ReadyToRun images only).
    pub(crate) r2r_module: u64,
    /// Set while the section is being deleted (its code unloaded): then it holds no code.
    pub(crate) next_for_delete: u64,
}

impl RangeSection {
    pub(crate) fn kind(&self) -> SectionKind {
        if self.next_for_delete != 0 {
            SectionKind::Unknown
        } else if self.flags & FLAG_RANGE_LIST != 0 {
            SectionKind::Stubs
        } else if self.flags & FLAG_CODE_HEAP != 0 {
            SectionKind::CodeHeap
        } else if self.r2r_module != 0 {
            SectionKind::ReadyToRun
        } else {
            SectionKind::Unknown
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SectionKind {
    CodeHeap,
    ReadyToRun,
    Stubs,
    Unknown,
}

/// The range section holding `ip`, if any.
pub(crate) fn find(t: &Target, ip: u64) -> Result<Option<RangeSection>> {
    if ip >> 57 != 0 {
        return Ok(None);
    }
    let map = t.global("ExecutionManagerCodeRangeMapAddress")?;
    // The top level array is embedded in the RangeSectionMap.
    let mut level = map.wrapping_add(t.offset("RangeSectionMap", "TopLevelData")?);
    let mut entry = 0;
    for l in (1..=LEVELS).rev() {
        let index = (ip >> (CHUNK_BITS + LEVEL_BITS * (l - 1))) & 0xff;
        entry = t.read_ptr(level + 8 * index, "range section map level")? & !1;
        if entry == 0 {
            return Ok(None);
        }
        level = entry;
    }
    let mut fragment = entry;
    for _ in 0..MAX_FRAGMENTS {
        if fragment == 0 {
            return Ok(None);
        }
        let begin = t.field_ptr(fragment, "RangeSectionFragment", "RangeBegin")?;
        let end = t.field_ptr(fragment, "RangeSectionFragment", "RangeEndOpen")?;
        if begin <= ip && ip < end {
            let section = t.field_ptr(fragment, "RangeSectionFragment", "RangeSection")?;
            if section == 0 {
                return Ok(None);
            }
            return read(t, section).map(Some);
        }
        fragment = t.field_ptr(fragment, "RangeSectionFragment", "Next")? & !1;
    }
    Err(DotnetError::TooMany { what: "range section fragment list", at: entry, limit: MAX_FRAGMENTS as u64 })
}

fn read(t: &Target, at: u64) -> Result<RangeSection> {
    let s = RangeSection {
        address: at,
        begin: t.field_ptr(at, "RangeSection", "RangeBegin")?,
        end: t.field_ptr(at, "RangeSection", "RangeEndOpen")?,
        flags: t.field_u32(at, "RangeSection", "Flags")?,
        heap_list: t.field_ptr(at, "RangeSection", "HeapList")?,
        r2r_module: t.field_ptr(at, "RangeSection", "R2RModule")?,
        next_for_delete: t.field_ptr(at, "RangeSection", "NextForDelete")?,
    };
    if s.begin >= s.end {
        return Err(DotnetError::Invalid { what: "RangeSection", at, why: format!("range {:#x}..{:#x} is empty", s.begin, s.end) });
    }
    Ok(s)
}
