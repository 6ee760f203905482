//! An object's references, from its MethodTable's GC description (`CGCDesc`, gcdesc.h): the
//! words just before the MethodTable. The word at `mt - 8` is the series count N. N > 0: N
//! series `(size, offset)` of 16 bytes each below it (the highest at `mt - 24`), each a run of
//! reference fields starting `offset` bytes into the object and `size + object size` bytes
//! long (the size is stored less the base size, so a reference array's one series grows with
//! its length). N < 0: an array of value types with references; the series at `mt - 24`
//! gives the first element's first reference offset, and -N items `(nptrs, skip)` (two u32 in
//! one word, from `mt - 24` down) repeat per element until the object's end less 8.
//!
//! Only types with `ContainsGCPointers` (MTFlags 0x01000000) have one. A collectible type's
//! LoaderAllocator (one more reference the GC follows) is not an edge here. Everything read is
//! checked: a count past [`MAX_SERIES`], a series outside the object, a repeating pattern
//! whose bytes do not add up to the element size refuse the type (a diagnostic; its objects
//! get no edges), never an out-of-bounds read.

use crate::runtimes::dotnet::contract::target::Target;

/// `MethodTable.MTFlags`: the type holds references.
pub(crate) const CONTAINS_GC_POINTERS: u32 = 0x0100_0000;
const HAS_COMPONENT_SIZE: u32 = 0x8000_0000;
/// Series (or repeating items) one description may have: a class has at most one series per
/// run of reference fields, bounded by its size (1 GiB / 16 bytes would be absurd already).
pub(crate) const MAX_SERIES: i64 = 1 << 16;
const PTR: u64 = 8;

/// Where an object's references are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GcDesc {
    /// No references (no `ContainsGCPointers`).
    None,
    /// Runs of references: (offset from the object's start, length in bytes less the
    /// object's size), ascending by offset.
    Series(Vec<(u64, i64)>),
    /// An array of value types: from `start`, per element, `nptrs` references then `skip`
    /// bytes, item after item, until the object's end less 8.
    Repeating { start: u64, items: Vec<(u32, u32)> },
}

/// Why a type's description was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GcDescError {
    #[error("GC description of MethodTable {mt:#x} not in the dump: {why}")]
    Unreadable { mt: u64, why: String },
    #[error("GC description of MethodTable {mt:#x} has {count} series (at most {MAX_SERIES})")]
    Count { mt: u64, count: i64 },
    #[error("GC description of MethodTable {mt:#x}: {why}")]
    Invalid { mt: u64, why: String },
}

impl GcDesc {
    /// Reads the description of `mt`.
    pub(crate) fn read(t: &Target, mt: u64) -> Result<GcDesc, GcDescError> {
        let unreadable = |e: String| GcDescError::Unreadable { mt, why: e };
        let flags = t.field_u32(mt, "MethodTable", "MTFlags").map_err(|e| unreadable(e.to_string()))?;
        if flags & CONTAINS_GC_POINTERS == 0 {
            return Ok(GcDesc::None);
        }
        let word = |a: u64| t.read_ptr(a, "GC description").map_err(|e| unreadable(e.to_string()));
        let n = word(mt.wrapping_sub(PTR))? as i64;
        if n == 0 || !(-MAX_SERIES..=MAX_SERIES).contains(&n) {
            return Err(GcDescError::Count { mt, count: n });
        }
        if n > 0 {
            let mut series = Vec::with_capacity(n as usize);
            for i in 0..n as u64 {
                // Highest first, at mt - 24, down 16 bytes per series.
                let at = mt.wrapping_sub(3 * PTR + 2 * PTR * i);
                let size = word(at)? as i64;
                let offset = word(at + PTR)?;
                if offset < PTR || offset % PTR != 0 || offset > u32::MAX as u64 {
                    return Err(GcDescError::Invalid { mt, why: format!("series {i} starts at offset {offset:#x}") });
                }
                series.push((offset, size));
            }
            series.sort_unstable();
            return Ok(GcDesc::Series(series));
        }
        // Repeating: only arrays (a component size) have one.
        let component = if flags & HAS_COMPONENT_SIZE != 0 { flags & 0xffff } else { 0 };
        let start = word(mt.wrapping_sub(2 * PTR))?;
        let mut items = Vec::with_capacity((-n) as usize);
        let mut bytes: u64 = 0;
        for i in 0..(-n) as u64 {
            let w = word(mt.wrapping_sub(3 * PTR + PTR * i))?;
            let (nptrs, skip) = (w as u32, (w >> 32) as u32);
            bytes += nptrs as u64 * PTR + skip as u64;
            items.push((nptrs, skip));
        }
        if component == 0 || bytes != component as u64 || start < 2 * PTR || start > u32::MAX as u64 {
            return Err(GcDescError::Invalid { mt, why: format!("a repeating pattern of {bytes} bytes from offset {start:#x} for elements of {component} bytes") });
        }
        Ok(GcDesc::Repeating { start, items })
    }

    /// Calls `f(offset)` for each reference field of an object of `size` bytes (its SOS size,
    /// unaligned), in ascending offset order for series. `Err` (and no calls past it) when
    /// the description does not fit the object.
    pub(crate) fn offsets(&self, size: u64, mut f: impl FnMut(u64)) -> Result<(), String> {
        match self {
            GcDesc::None => Ok(()),
            GcDesc::Series(series) => {
                for &(offset, len) in series {
                    let end = (size as i64).checked_add(len).and_then(|l| (offset as i64).checked_add(l)).unwrap_or(-1);
                    if end < offset as i64 || end as u64 > size {
                        return Err(format!("a series from offset {offset:#x} of {} bytes does not fit an object of {size} bytes", len + size as i64));
                    }
                    let mut at = offset;
                    while at + PTR <= end as u64 {
                        f(at);
                        at += PTR;
                    }
                }
                Ok(())
            }
            GcDesc::Repeating { start, items } => {
                let stop = size.saturating_sub(PTR);
                let mut at = *start;
                // Every element advances by its size (checked non-zero in `read`).
                while at < stop {
                    for &(nptrs, skip) in items {
                        for _ in 0..nptrs {
                            if at + PTR > size {
                                return Err(format!("a repeating series runs past the object's {size} bytes"));
                            }
                            f(at);
                            at += PTR;
                        }
                        at += skip as u64;
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::GcDesc;

    fn collect(d: &GcDesc, size: u64) -> Result<Vec<u64>, String> {
        let mut v = Vec::new();
        d.offsets(size, |o| v.push(o)).map(|_| v)
    }

    #[test]
    fn series_of_a_class_and_of_a_reference_array() {
        // Two fields at 8 and 16 in a 32-byte object: size stored as 16 - 32.
        let class = GcDesc::Series(vec![(8, -16)]);
        assert_eq!(collect(&class, 32).unwrap(), vec![8, 16]);
        // object[3]: 24 + 3 * 8 = 48 bytes, elements from 16; stored size -24.
        let array = GcDesc::Series(vec![(16, -24)]);
        assert_eq!(collect(&array, 48).unwrap(), vec![16, 24, 32]);
        assert_eq!(collect(&array, 24).unwrap(), Vec::<u64>::new());
    }

    #[test]
    fn repeating_value_type_elements() {
        // struct { object a; long b; object c; }[2]: element 24 bytes, from 16.
        let d = GcDesc::Repeating { start: 16, items: vec![(1, 8), (1, 0)] };
        assert_eq!(collect(&d, 24 + 2 * 24).unwrap(), vec![16, 32, 40, 56]);
    }

    #[test]
    fn a_series_outside_the_object_is_refused() {
        let d = GcDesc::Series(vec![(8, 1 << 20)]);
        assert!(collect(&d, 32).is_err());
        let d = GcDesc::Series(vec![(8, i64::MIN)]);
        assert!(collect(&d, 32).is_err());
    }
}
