//! Which static field a slot of the statics' arrays is. .NET 10 keeps a class's reference
//! statics in the slots of a `System.Object[]` held by a strong handle (the class's
//! `DynamicStaticsInfo.GCStatics` points into it), so a path from a static starts `strong
//! handle → System.Object[] [i] → object`; SOS names that slot's field, but wrongly. Here every
//! loaded class of every loaded module (the AppDomain's, and those the heap's types come from)
//! is asked for its reference statics through [`crate::runtimes::dotnet::types::statics`], and each static's slot address is
//! mapped to its class and field.

use crate::runtimes::dotnet::contract::facts::Layout;
use crate::runtimes::dotnet::types::metadata::TYPE_DEF;
use crate::runtimes::dotnet::types::objects::TypeNamer;
use crate::runtimes::dotnet::types::statics::{StaticField, Statics};
use crate::runtimes::dotnet::contract::target::Target;
use crate::runtimes::dotnet::gc::graph::ObjectGraph;
use rayon::prelude::*;
use std::collections::{BTreeSet, HashMap};

/// TypeDefs looked at per module at most.
const MAX_TYPE_DEFS: u32 = 1 << 16;
/// Pieces the classes' statics are read in, on rayon's pool.
const PIECES: usize = 8;

/// A static field: its class (as SOS's heap commands name types) and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StaticName {
    pub(crate) method_table: u64,
    pub(crate) class: String,
    pub(crate) field: String,
}

/// Slot address → the static field it is, for every reference static of the loaded classes of
/// the loaded modules (and of `g`'s types' modules).
pub(crate) fn static_slots(t: &Target, namer: &TypeNamer, l: &Layout, g: &ObjectGraph) -> HashMap<u64, StaticName> {
    static_slots_of(t, namer, l, &g.type_table)
}

/// As [`static_slots`], for the loaded modules and the modules of the types `method_tables`.
pub(crate) fn static_slots_of(t: &Target, namer: &TypeNamer, l: &Layout, method_tables: &[u64]) -> HashMap<u64, StaticName> {
    let statics = Statics::new(t, namer, l);
    let mut modules: BTreeSet<u64> = method_tables.iter().filter_map(|&mt| t.field_ptr(mt, "MethodTable", "Module").ok()).filter(|&m| m != 0).collect();
    if let Ok(core) = statics.core_lib() {
        modules.insert(core);
    }
    // Every loaded module too: one whose classes are all static (no instance on the heap) holds
    // statics all the same (class_init's `Settings.Gate`).
    modules.extend(crate::runtimes::dotnet::types::modules::loaded_modules(t).unwrap_or_default());
    // The loaded classes first (one pass over each module's map), then their statics read on
    // rayon's pool, a namer per piece sharing the runtime's names: a thousand classes on a
    // small service, read while the report waits. Inserted in the order a single pass
    // would, so a slot two classes claim goes to the same one.
    let mut classes: Vec<u64> = Vec::new();
    for module in modules {
        let Ok(md) = namer.module_metadata(module) else { continue };
        classes.extend(statics.type_def_method_tables(module, md.rows(TYPE_DEF).min(MAX_TYPE_DEFS)).into_iter().filter(|&mt| mt != 0));
    }
    let source = namer.source();
    let chunk = classes.len().div_ceil(PIECES).max(1);
    let found: Vec<(u64, String, Vec<StaticField>)> = classes
        .par_chunks(chunk)
        .flat_map_iter(|part| {
            let namer = source.namer();
            let statics = Statics::new(t, &namer, l);
            part.iter()
                .filter_map(|&mt| {
                    let fields = statics.reference_static_fields(mt).ok().filter(|f| !f.is_empty())?;
                    let class = namer.heap_type_name(mt).unwrap_or_else(|_| format!("<class {mt:#x}>"));
                    Some((mt, class, fields))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let mut out = HashMap::new();
    for (mt, class, fields) in found {
        for s in fields {
            out.insert(s.address, StaticName { method_table: mt, class: class.clone(), field: s.field.name });
        }
    }
    out
}
