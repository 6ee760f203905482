//! Heap statistics as SOS `dumpheap -stat` gives them: per MethodTable the object count and the
//! bytes (SOS's sizes, unaligned), the type named as SOS's heap commands name it, free objects
//! as `Free`.

use crate::runtimes::dotnet::types::objects::TypeNamer;
use crate::runtimes::dotnet::gc::walk::{SegmentWalk, TypeCount};
use serde::Serialize;
use rayon::prelude::*;
use std::collections::HashMap;

/// Pieces the types are named in, on rayon's pool (a few per core, so one slow piece does not
/// hold the rest up).
const NAMING_CHUNKS: usize = 8;

/// SOS's name for free space.
pub(crate) const FREE: &str = "Free";

/// SOS's row for bad objects whose first word is `word` (`<unknown_type_15e7dd8>`).
pub(crate) fn unknown_type(word: u64) -> String {
    format!("<unknown_type_{word:x}>")
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TypeStat {
    /// As SOS `dumpheap -stat` prints it.
    pub name: String,
    pub method_table: u64,
    pub count: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct HeapStats {
    /// Objects walked, free objects included (SOS's "Total N objects").
    pub total_objects: u64,
    /// Their bytes (SOS's "Total ... bytes").
    pub total_bytes: u64,
    /// Bytes of free objects.
    pub free_bytes: u64,
    /// Bad objects the walk went on past, counted in `total_objects` (of no size), as SOS counts
    /// them (`<unknown_type_…>` in `dumpheap -stat`).
    pub skipped_objects: u64,
    /// The bytes passed over past them.
    pub skipped_bytes: u64,
    /// Every type, largest total first; ties by name, then MethodTable.
    pub types: Vec<TypeStat>,
}

/// Sums the walks and names the types. A type whose name cannot be read is named
/// `<unknown type MT>` and the error is returned beside it.
pub(crate) fn heap_stats(walks: &[SegmentWalk], free_mt: u64, namer: &TypeNamer) -> (HeapStats, Vec<(u64, String)>) {
    let mut by_mt: HashMap<u64, TypeCount> = HashMap::new();
    let mut stats = HeapStats::default();
    // The bad objects the walk went past, by their first word, as SOS lists them.
    let mut unknown: HashMap<u64, u64> = HashMap::new();
    for w in walks {
        for (word, n) in &w.skipped.by_word {
            *unknown.entry(*word).or_default() += n;
        }
    }
    for w in walks {
        stats.total_objects += w.objects;
        stats.total_bytes += w.bytes;
        stats.skipped_objects += w.skipped.objects;
        stats.skipped_bytes += w.skipped.bytes;
        for (mt, c) in &w.types {
            let e = by_mt.entry(*mt).or_default();
            e.count += c.count;
            e.bytes += c.bytes;
        }
    }
    // Naming is most of this (metadata reads, a few µs a type) and the object graph waits for
    // it: the types are named on the pool, a namer per chunk sharing the runtime's names. Each
    // name is the same whichever thread reads it; the order is set by the sort below.
    let by_mt: Vec<(u64, TypeCount)> = by_mt.into_iter().collect();
    let chunk = by_mt.len().div_ceil(NAMING_CHUNKS).max(1);
    let source = namer.source();
    let named: Vec<(TypeStat, Option<String>)> = by_mt
        .par_chunks(chunk)
        .flat_map_iter(|part| {
            let namer = source.namer();
            part.iter()
                .map(|&(mt, c)| {
                    let (name, error) = if mt == free_mt {
                        (FREE.to_string(), None)
                    } else {
                        match namer.heap_type_name(mt) {
                            Ok(n) => (n, None),
                            Err(e) => (format!("<unknown type {mt:#x}>"), Some(e.to_string())),
                        }
                    };
                    (TypeStat { name, method_table: mt, count: c.count, bytes: c.bytes }, error)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let mut errors = Vec::new();
    let mut types = Vec::with_capacity(named.len());
    for (t, error) in named {
        if let Some(e) = error {
            errors.push((t.method_table, e));
        }
        types.push(t);
    }
    types.extend(unknown.into_iter().map(|(word, count)| TypeStat { name: unknown_type(word), method_table: word, count, bytes: 0 }));
    stats.free_bytes = types.iter().filter(|t| t.method_table == free_mt).map(|t| t.bytes).sum();
    types.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.name.cmp(&b.name)).then(a.method_table.cmp(&b.method_table)));
    stats.types = types;
    (stats, errors)
}
