//! The GC constants the catalogue gives a single-file app (`gc_constants`: `max_gen` and
//! `generation_field_offsets`, whose pages its dump lacks) are what `libcoreclr.so` of the same
//! build holds in a dump, where those pages are saved: on every committed framework-dependent and
//! self-contained dump, the values the dump's `GcDacVars` points at equal the catalogue's entry
//! for that libcoreclr.so (found at the addresses it lists) and its singlefilehost's.

use crate::process::{Locator, Process};
use crate::runtimes::dotnet::contract::catalog::{self, Build};
use crate::runtimes::dotnet::contract::context::Context;
use crate::runtimes::dotnet::gc::{self, dactable::DacTable, gcvars::var};
use crate::runtimes::dotnet::contract::locate;
use std::path::PathBuf;

fn no_files() -> Locator {
    Locator { sysroot: Some(PathBuf::from("/nonexistent")), ..Locator::default() }
}

/// (max_gen, generation_field_offsets[0..3]) as the dump holds them, and where.
fn constants_in_dump(runtime: &Context<'_>) -> ((u64, u32), (u64, [i32; 3])) {
    let t = runtime.target();
    let l = &gc::build_facts(runtime).expect("build facts").layout;
    let table = DacTable::locate(&t, runtime.module, l.dac_table_thread_store).expect("g_dacTable");
    let vars = table.variable(&t, l.dac_table_gc_dac_globals).and_then(|a| t.read_ptr(a, "g_gcDacGlobals")).expect("GcDacVars");
    let max_at = t.read_ptr(vars + var::MAX_GEN, "max_gen").expect("max_gen pointer");
    let offsets_at = t.read_ptr(vars + var::GENERATION_FIELD_OFFSETS, "generation_field_offsets").expect("offsets pointer");
    let max = t.read_u32(max_at, "max_gen").expect("libcoreclr's max_gen is in the dump");
    let mut offsets = [0i32; 3];
    for (i, o) in offsets.iter_mut().enumerate() {
        *o = t.read_u32(offsets_at + 4 * i as u64, "generation_field_offsets").expect("libcoreclr's offsets are in the dump") as i32;
    }
    ((max_at, max), (offsets_at, offsets))
}

#[test]
fn the_catalogued_gc_constants_are_what_libcoreclr_of_the_same_build_holds_in_a_dump() {
    let deploy = knot_samples::workspace_root().join("samples/dotnet/deploy-dumps");
    let mut cores: Vec<(String, PathBuf, Locator)> =
        ["self_contained", "runtime_10_0_15", "net9_heap"].iter().map(|s| (s.to_string(), deploy.join(s).join("heap/core.gz"), no_files())).collect();
    if let Some(d) = knot_samples::dotnet::dumps("sos/clrthreads.txt", false).into_iter().find(|d| d.sample == "monitor_abba" && d.kind == "heap") {
        cores.push((d.name(), d.core.clone(), no_files()));
    }
    let all = catalog::builtin().expect("the catalogue parses");
    let mut versions = Vec::new();
    let mut seen = Vec::new();
    for (name, core, locator) in &cores {
        let process = Process::open(core, locator).unwrap_or_else(|e| panic!("{name}: {e}"));
        let runtime = Context::open(&process, locator).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let ((max_at, max), (offsets_at, offsets)) = constants_in_dump(&runtime);
        let entry: &Build = locate::catalogued(runtime.module).unwrap_or_else(|| panic!("{name}: runtime not catalogued"));
        assert_eq!(entry.file, "libcoreclr.so", "{name}");
        let c = entry.gc_constants.as_ref().unwrap_or_else(|| panic!("{name}: no GC constants catalogued"));
        let bias = runtime.module.bias;
        assert_eq!(c.max_generation_for(bias, max_at), Some(max), "{name}: max_gen at {max_at:#x}");
        assert_eq!(c.generation_field_offsets_for(bias, offsets_at), Some(offsets), "{name}: generation_field_offsets at {offsets_at:#x}");
        let host = all
            .iter()
            .find(|b| b.file == "singlefilehost" && b.rid == entry.rid && b.runtime_version == entry.runtime_version)
            .unwrap_or_else(|| panic!("{name}: no singlefilehost {}", entry.runtime_version));
        let hc = host.gc_constants.as_ref().unwrap_or_else(|| panic!("singlefilehost {}: no GC constants", host.runtime_version));
        assert_eq!((hc.max_generation, hc.generation_field_offsets), (max, offsets), "singlefilehost {} against {name}'s libcoreclr.so", host.runtime_version);
        seen.push((max, offsets));
        versions.push(format!("{name}: {} max_gen {max}, offsets {offsets:?}", entry.runtime_version));
    }
    // Every catalogued x86-64 build has them, and they are what the dumps hold (compile-time
    // constants of the GC, alike on 9.0 and 10.0).
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
    for b in all.iter().filter(|b| b.rid == "linux-x64") {
        let c = b.gc_constants.as_ref().unwrap_or_else(|| panic!("{} {}: no GC constants", b.runtime_version, b.file));
        assert_eq!(Some(&(c.max_generation, c.generation_field_offsets)), seen.first(), "{} {}", b.runtime_version, b.file);
    }
    eprintln!("{}", versions.join("\n"));
}
