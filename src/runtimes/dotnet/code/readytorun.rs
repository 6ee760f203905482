//! ReadyToRun (precompiled) code in a managed image (ExecutionManager contract, R2R JIT
//! manager): the module's `ReadyToRunInfo` holds the image's sorted `RUNTIME_FUNCTION` table;
//! the entry covering an address is found by binary search, walked back over funclets (and
//! from cold code to its hot part) to the method's entry, and the entry point is looked up in
//! the `EntryPointToMethodDescMap` (a runtime `PtrHashMap`) for the `MethodDesc`. The table and
//! unwind data live in the image, so they are read through image memory (the dump, else the
//! mapped file); the hash map lives in the runtime's heap.

use crate::runtimes::dotnet::code::codeheap::runtime_function;
use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::contract::target::{Result, Target};
use crate::unwind::managed::WindowsUnwind;

/// More runtime functions than any image has (CoreLib has about 100 000).
const MAX_RUNTIME_FUNCTIONS: u32 = 1 << 24;
/// How many entries back a funclet's method entry may be.
const MAX_FUNCLET_WALK: u32 = 256;
const MAX_HOT_COLD: u32 = 1 << 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum R2rCode {
    Method { start: u64, method_desc: Option<u64>, unwind: WindowsUnwind },
    /// In the image's delay-load method call thunks.
    Thunk,
}

/// Looks `ip` up in the ReadyToRun image of `module` loaded at `image_base`. `t` reads runtime
/// structures; `image` reads through the image memory (same descriptor).
pub(crate) fn lookup(t: &Target, image: &Target, module: u64, image_base: u64, ip: u64) -> Result<Option<R2rCode>> {
    let info = t.field_ptr(module, "Module", "ReadyToRunInfo")?;
    if info == 0 {
        return Ok(None);
    }
    // A component of a composite image keeps its code tables in the composite's info.
    let composite = t.field_ptr(info, "ReadyToRunInfo", "CompositeInfo")?;
    let tables = if composite != 0 { composite } else { info };
    let rva64 = ip.wrapping_sub(image_base);
    let Ok(rva) = u32::try_from(rva64) else { return Ok(None) };

    let thunks = t.field_ptr(tables, "ReadyToRunInfo", "DelayLoadMethodCallThunks")?;
    if thunks != 0 {
        let va = image.field_u32(thunks, "ImageDataDirectory", "VirtualAddress")?;
        let size = image.field_u32(thunks, "ImageDataDirectory", "Size")?;
        if rva >= va && (rva - va) < size {
            return Ok(Some(R2rCode::Thunk));
        }
    }

    let functions = t.field_ptr(tables, "ReadyToRunInfo", "RuntimeFunctions")?;
    let count = t.field_u32(tables, "ReadyToRunInfo", "NumRuntimeFunctions")?;
    if count == 0 || functions == 0 {
        return Ok(None);
    }
    if count > MAX_RUNTIME_FUNCTIONS {
        return Err(DotnetError::TooMany { what: "ReadyToRun runtime functions", at: functions, limit: MAX_RUNTIME_FUNCTIONS as u64 });
    }
    let size = t.size("RuntimeFunction")?;
    let at = |i: u32| functions + i as u64 * size;
    // The last function beginning at or before rva.
    let (mut lo, mut hi) = (0u32, count);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if image.field_u32(at(mid), "RuntimeFunction", "BeginAddress")? <= rva {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if lo == 0 {
        return Ok(None);
    }
    let index = lo - 1;
    let unwind = runtime_function(image, at(index), image_base)?;
    if ip >= unwind.end {
        return Ok(None);
    }

    // Cold code belongs to a hot part elsewhere in the table.
    let mut entry = hot_part(t, image, tables, index)?.unwrap_or(index);
    let map = tables.wrapping_add(t.offset("ReadyToRunInfo", "EntryPointToMethodDescMap")?);
    // A funclet has its own RUNTIME_FUNCTION after its method's; only the method's entry point
    // is in the map.
    for _ in 0..MAX_FUNCLET_WALK {
        let start = image_base + image.field_u32(at(entry), "RuntimeFunction", "BeginAddress")? as u64;
        if let Some(md) = ptr_hash_map_get(t, map, start)? {
            return Ok(Some(R2rCode::Method { start, method_desc: Some(md), unwind }));
        }
        if entry == 0 {
            break;
        }
        entry -= 1;
    }
    // Not (yet) in the map: the method was never prepared, which a running frame's method is.
    Ok(Some(R2rCode::Method { start: unwind.begin, method_desc: None, unwind }))
}

/// The hot part's runtime function index for a cold one (`HotColdMap`: (cold, hot) index
/// pairs sorted by cold index), or `None` when `index` is hot.
fn hot_part(t: &Target, image: &Target, tables: u64, index: u32) -> Result<Option<u32>> {
    let n = t.field_u32(tables, "ReadyToRunInfo", "NumHotColdMap")?;
    if n == 0 {
        return Ok(None);
    }
    // `NumHotColdMap` counts u32s: two per (cold, hot) pair.
    if !(2..=MAX_HOT_COLD).contains(&n) {
        return Err(DotnetError::Invalid { what: "ReadyToRun hot/cold map", at: tables, why: format!("{n} entries") });
    }
    let map = t.field_ptr(tables, "ReadyToRunInfo", "HotColdMap")?;
    let pairs = n / 2;
    let cold = |i: u32| image.read_u32(map + 8 * i as u64, "hot/cold map");
    if index < cold(0)? {
        return Ok(None);
    }
    let (mut lo, mut hi) = (0u32, pairs);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if cold(mid)? <= index {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let pair = lo.saturating_sub(1);
    image.read_u32(map + 8 * pair as u64 + 4, "hot/cold map").map(Some)
}

/// `PtrHashMap` lookup (the runtime's hash.cpp, as the cDAC reads it): buckets of
/// `HashMapSlotsPerBucket` keys then values; the first bucket-sized slot holds the bucket
/// count; keys 0 and 1 are reserved (a key ≤ 1 is stored plus 100); a value is stored shifted
/// right by one, its top bit marking a collision (probe on).
pub(crate) fn ptr_hash_map_get(t: &Target, map: u64, key: u64) -> Result<Option<u64>> {
    let key = if key > 1 { key } else { key + 100 };
    let buckets = t.field_ptr(map, "HashMap", "Buckets")?;
    if buckets == 0 {
        return Ok(None);
    }
    let size = t.read_u32(buckets, "hash map bucket count")?;
    if size < 2 {
        return Ok(None);
    }
    let bucket_size = t.size("Bucket")?;
    let slots = t.global("HashMapSlotsPerBucket")?.min(64);
    let mask = t.global("HashMapValueMask")?;
    let keys_at = t.offset("Bucket", "Keys")?;
    let values_at = t.offset("Bucket", "Values")?;
    let mut seed = (key >> 2) as u32;
    let increment = 1 + ((((key >> 5) as u32).wrapping_add(1)) % (size - 1));
    let first = buckets + bucket_size;
    for _ in 0..size {
        let bucket = first + bucket_size * (seed % size) as u64;
        for s in 0..slots {
            if t.read_ptr(bucket + keys_at + 8 * s, "hash map key")? == key {
                let v = t.read_ptr(bucket + values_at + 8 * s, "hash map value")? & mask;
                return Ok((v != 0).then_some(v << 1));
            }
        }
        seed = seed.wrapping_add(increment);
        let first_value = t.read_ptr(bucket + values_at, "hash map value")?;
        if first_value & !mask == 0 {
            break;
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::RangeMemory;
    use crate::runtimes::dotnet::contract::descriptor::Descriptor;

    const DESCRIPTOR: &str = r#"{"version":0,"types":{"HashMap":{"Buckets":16},"Bucket":{"!":64,"Keys":0,"Values":32}},
        "globals":{"HashMapSlotsPerBucket":4,"HashMapValueMask":"0x7fffffffffffffff"}}"#;

    /// A PtrHashMap at 0x1000 with `size` buckets at 0x2000, holding `entries` where the
    /// runtime's double hashing puts them.
    fn map(size: u32, entries: &[(u64, u64)], collide_everywhere: bool) -> RangeMemory {
        let mut buckets = vec![0u8; 64 * (size as usize + 1)];
        buckets[..4].copy_from_slice(&size.to_le_bytes());
        for &(key, value) in entries {
            let mut seed = (key >> 2) as u32;
            let inc = 1 + (((key >> 5) as u32 + 1) % (size - 1));
            'probe: loop {
                let b = 64 * (1 + (seed % size) as usize);
                for s in 0..4 {
                    let k = b + 8 * s;
                    if u64::from_le_bytes(buckets[k..k + 8].try_into().unwrap()) == 0 {
                        buckets[k..k + 8].copy_from_slice(&key.to_le_bytes());
                        buckets[k + 32..k + 40].copy_from_slice(&(value >> 1).to_le_bytes());
                        break 'probe;
                    }
                }
                // Full: mark the collision on the first value and probe on.
                let v = u64::from_le_bytes(buckets[b + 32..b + 40].try_into().unwrap()) | 1 << 63;
                buckets[b + 32..b + 40].copy_from_slice(&v.to_le_bytes());
                seed = seed.wrapping_add(inc);
            }
        }
        if collide_everywhere {
            for b in 1..=size as usize {
                buckets[64 * b + 32 + 7] |= 0x80;
            }
        }
        let mut mem = RangeMemory::new();
        let mut header = vec![0u8; 24];
        header[16..24].copy_from_slice(&0x2000u64.to_le_bytes());
        mem.add(0x1000, header).add(0x2000, buckets);
        mem
    }

    #[test]
    fn finds_entry_points_through_collisions_and_stops_at_a_bucket_without_one() {
        let entries: Vec<(u64, u64)> = (0..40).map(|i| (0x7f00_0000_1000 + 0x40 * i, 0x5500_0000 + 0x10 * i)).collect();
        let mem = map(11, &entries, false);
        let t = Target::new(&mem, Descriptor::parse(DESCRIPTOR.as_bytes(), 0).unwrap(), Vec::new());
        for &(k, v) in &entries {
            assert_eq!(ptr_hash_map_get(&t, 0x1000, k).unwrap(), Some(v), "{k:#x}");
        }
        assert_eq!(ptr_hash_map_get(&t, 0x1000, 0x7f00_0000_1010).unwrap(), None);
    }

    #[test]
    fn a_map_that_collides_everywhere_is_probed_a_bounded_number_of_times() {
        let mem = map(7, &[], true);
        let t = Target::new(&mem, Descriptor::parse(DESCRIPTOR.as_bytes(), 0).unwrap(), Vec::new());
        assert_eq!(ptr_hash_map_get(&t, 0x1000, 0x1234_5678).unwrap(), None);
    }
}
