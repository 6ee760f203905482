//! JIT code heaps (ExecutionManager contract): from an address in a code heap to the start of
//! the method holding it (the heap's nibble map), then through the code header just before
//! that start to the `RealCodeHeader`: the method's `MethodDesc` and its unwind infos.
//!
//! The nibble map has one 4-bit nibble per 32-byte bucket of the heap, eight to a u32 ("map
//! unit", most significant nibble first): 0 for no method start in the bucket, 1..=8 for a start
//! at byte `4 * (n - 1)` of it. ExecutionManager version 2 also writes, into every map unit that
//! a method covers whole, a pointer to its start (relative to the map base; its low nibble is
//! 9..=12, which encodes start bits 2..3), so a lookup reads at most two units. Version 1 has no
//! pointers and scans back unit by unit (bounded here).

use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::contract::target::{Result, Target};
use crate::unwind::managed::{UnwindFormat, WindowsUnwind};

const BUCKET_BYTES: u64 = 32;
const NIBBLES_PER_UNIT: u64 = 8;
const UNIT_BYTES: u64 = BUCKET_BYTES * NIBBLES_PER_UNIT;
/// How far back a version-1 lookup scans (map units of 256 bytes: 16 MiB of code).
const MAX_LINEAR_UNITS: u64 = 1 << 16;
/// More unwind fragments than any real method has (one per funclet, plus cold code).
const MAX_UNWIND_INFOS: u32 = 4096;

/// What the code heap says about one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeapCode {
    Method { start: u64, method_desc: u64, unwind: Option<WindowsUnwind> },
    /// A stub code block in the heap (its code header holds a small sentinel, not a pointer).
    Stub { start: u64 },
}

/// Looks `ip` up in the code heap of the `CodeHeapListNode` `heap`; `base` is the range
/// section's start, which the unwind infos' RVAs are relative to.
pub(crate) fn lookup(t: &Target, heap: u64, base: u64, ip: u64, nibble_map_version: u64) -> Result<Option<HeapCode>> {
    let start_address = t.field_ptr(heap, "CodeHeapListNode", "StartAddress")?;
    let end_address = t.field_ptr(heap, "CodeHeapListNode", "EndAddress")?;
    let map_base = t.field_ptr(heap, "CodeHeapListNode", "MapBase")?;
    let header_map = t.field_ptr(heap, "CodeHeapListNode", "HeaderMap")?;
    if ip < start_address || ip >= end_address || ip < map_base {
        return Ok(None);
    }
    let start = if nibble_map_version >= 2 {
        find_start_constant(t, map_base, header_map, ip)?
    } else {
        find_start_linear(t, map_base, header_map, ip)?
    };
    let Some(start) = start else { return Ok(None) };
    if start > ip || start < start_address.saturating_add(8) {
        return Ok(None);
    }
    let header = t.read_ptr(start - 8, "code header")?;
    if header <= t.global("StubCodeBlockLast")? {
        return Ok(Some(HeapCode::Stub { start }));
    }
    let method_desc = t.field_ptr(header, "RealCodeHeader", "MethodDesc")?;
    let unwind = unwind_fragment(t, header, base, ip)?;
    Ok(Some(HeapCode::Method { start, method_desc, unwind }))
}

/// Decodes the nibble of `unit` for bucket position `pos` (0..8, 0 the most significant).
fn nibble(unit: u32, pos: u64) -> u32 {
    (unit >> (28 - 4 * (pos & 7))) & 0xf
}

fn is_pointer(unit: u32) -> bool {
    unit & 0xf > 8
}

fn decode_pointer(map_base: u64, unit: u32) -> u64 {
    let low = ((unit & 0xf) - 9) << 2;
    map_base + ((unit & !0xf) | low) as u64
}

/// The last method start at or before nibble position `pos` of `unit` (which is map unit
/// `unit_index`), when there is one in that unit.
fn start_in_unit(map_base: u64, unit: u32, unit_index: u64, mut pos: u64, at_or_before: Option<u32>) -> Option<u64> {
    // At the address's own bucket, a start counts only if it is at or before the address.
    if let Some(limit) = at_or_before {
        let n = nibble(unit, pos);
        if n != 0 && n <= limit {
            return Some(map_base + (unit_index * NIBBLES_PER_UNIT + pos) * BUCKET_BYTES + 4 * (n as u64 - 1));
        }
        if pos == 0 {
            return None;
        }
        pos -= 1;
    }
    loop {
        let n = nibble(unit, pos);
        if n != 0 {
            return Some(map_base + (unit_index * NIBBLES_PER_UNIT + pos) * BUCKET_BYTES + 4 * (n as u64 - 1));
        }
        if pos == 0 {
            return None;
        }
        pos -= 1;
    }
}

/// Where `ip` falls in the nibble map (both versions): its 32-bit unit, the nibble (bucket) within
/// it, and the value a method starting at `ip`'s 4-byte slot would have stored there.
fn nibble_position(map_base: u64, ip: u64) -> (u64, u64, u32) {
    let delta = ip - map_base;
    (delta / UNIT_BYTES, (delta / BUCKET_BYTES) % NIBBLES_PER_UNIT, ((delta % BUCKET_BYTES) / 4) as u32 + 1)
}

fn read_unit(t: &Target, header_map: u64, index: u64) -> Result<u32> {
    t.read_u32(header_map + 4 * index, "nibble map")
}

/// ExecutionManager version 2 (`NibbleMapConstantLookup`).
fn find_start_constant(t: &Target, map_base: u64, header_map: u64, ip: u64) -> Result<Option<u64>> {
    let (unit_index, pos, offset_nibble) = nibble_position(map_base, ip);
    let unit = read_unit(t, header_map, unit_index)?;
    if is_pointer(unit) {
        return Ok(Some(decode_pointer(map_base, unit)));
    }
    if let Some(s) = start_in_unit(map_base, unit, unit_index, pos, Some(offset_nibble)) {
        return Ok(Some(s));
    }
    // A method that starts in the previous unit (or covers it whole) would be recorded there.
    if unit_index == 0 {
        return Ok(None);
    }
    let prev = read_unit(t, header_map, unit_index - 1)?;
    if is_pointer(prev) {
        return Ok(Some(decode_pointer(map_base, prev)));
    }
    if prev == 0 {
        return Ok(None);
    }
    Ok(start_in_unit(map_base, prev, unit_index - 1, NIBBLES_PER_UNIT - 1, None))
}

/// ExecutionManager version 1 (`NibbleMapLinearLookup`): scan back to the first start.
fn find_start_linear(t: &Target, map_base: u64, header_map: u64, ip: u64) -> Result<Option<u64>> {
    let (unit_index, pos, offset_nibble) = nibble_position(map_base, ip);
    let unit = read_unit(t, header_map, unit_index)?;
    if let Some(s) = start_in_unit(map_base, unit, unit_index, pos, Some(offset_nibble)) {
        return Ok(Some(s));
    }
    let lowest = unit_index.saturating_sub(MAX_LINEAR_UNITS);
    let mut i = unit_index;
    while i > lowest {
        i -= 1;
        let unit = read_unit(t, header_map, i)?;
        if unit != 0 {
            return Ok(start_in_unit(map_base, unit, i, NIBBLES_PER_UNIT - 1, None));
        }
    }
    Ok(None)
}

/// The `RUNTIME_FUNCTION` among the code header's unwind infos that covers `ip`.
fn unwind_fragment(t: &Target, header: u64, base: u64, ip: u64) -> Result<Option<WindowsUnwind>> {
    let count = t.field_u32(header, "RealCodeHeader", "NumUnwindInfos")?;
    if count > MAX_UNWIND_INFOS {
        return Err(DotnetError::TooMany { what: "RealCodeHeader unwind infos", at: header, limit: MAX_UNWIND_INFOS as u64 });
    }
    let first = header.wrapping_add(t.offset("RealCodeHeader", "UnwindInfos")?);
    let size = t.size("RuntimeFunction")?;
    for i in 0..count as u64 {
        let f = runtime_function(t, first + i * size, base)?;
        if f.begin <= ip && ip < f.end {
            return Ok(Some(f));
        }
    }
    Ok(None)
}

/// The `RUNTIME_FUNCTION` at `at`, its RVAs relative to `base`. An x64 entry has its end; an
/// ARM64 one (no `EndAddress` in the descriptor) ends where its `.xdata` or packed word says
/// the function's length does, read through `t`.
pub(crate) fn runtime_function(t: &Target, at: u64, base: u64) -> Result<WindowsUnwind> {
    let begin = t.field_u32(at, "RuntimeFunction", "BeginAddress")?;
    let unwind = t.field_u32(at, "RuntimeFunction", "UnwindData")?;
    let (end, format) = if t.has_field("RuntimeFunction", "EndAddress") {
        (t.field_u32(at, "RuntimeFunction", "EndAddress")? as u64, UnwindFormat::X64)
    } else {
        let length = crate::unwind::windows_arm64::function_length(t.mem, base, unwind)
            .map_err(|e| DotnetError::Invalid { what: "ARM64 RUNTIME_FUNCTION", at, why: e.to_string() })?;
        (begin as u64 + length as u64, UnwindFormat::Arm64 { unwind_data: unwind })
    };
    Ok(WindowsUnwind { image_base: base, begin: base.wrapping_add(begin as u64), end: base.wrapping_add(end), unwind_info: base.wrapping_add(unwind as u64), format })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nibbles_and_pointers_decode_as_the_contract_says() {
        // A start at 0x130: bucket 9 (unit 1, position 1), nibble 1 + 16 / 4 = 5.
        let unit = 0x0500_0000;
        assert_eq!(nibble(unit, 1), 5);
        assert_eq!(start_in_unit(0x1000, unit, 1, 1, Some(5)), Some(0x1130));
        // An address before the start in the same bucket is not in that method.
        assert_eq!(start_in_unit(0x1000, unit, 1, 1, Some(4)), None);
        // A later bucket of the same unit finds it.
        assert_eq!(start_in_unit(0x1000, unit, 1, 6, Some(1)), Some(0x1130));
        // The contract's pointer example: a start at 304 (0x130) is written as 0x130 + 9 (the
        // document says 311, an arithmetic slip: its own rule gives 313).
        assert!(is_pointer(313));
        assert_eq!(decode_pointer(0x1000, 313), 0x1000 + 304);
        // Start bits 2..3 ride in the low nibble: 0x13c is written 0x130 + 9 + 3.
        assert_eq!(decode_pointer(0x1000, 0x130 + 12), 0x1000 + 0x13c);
        assert!(!is_pointer(unit));
    }
}
