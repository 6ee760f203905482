//! Every module the runtime loaded, as SOS `dumpdomain` lists them: the AppDomain's assembly
//! list (Loader contract: `AppDomain.DomainAssemblyList`, an `ArrayListBase` — a count and a
//! chain of `ArrayListBlock`s, the first one inside the list itself) holds each assembly, and
//! `Assembly.Module` its module. Older builds put a `DomainAssembly` (whose first field is the
//! assembly) in the list: an entry is taken for an assembly only when its module's
//! `Module.Assembly` points back at it.
//!
//! What the heap's objects cannot give: a module whose types have no instance (static classes,
//! a class whose only objects are its statics') is found here all the same.

use crate::runtimes::dotnet::contract::target::{Result, Target};
use crate::runtimes::dotnet::error::DotnetError;

/// Assemblies read at most (a large service loads a few hundred).
const MAX_ASSEMBLIES: u32 = 1 << 14;
/// Blocks of the list followed at most (each holds several entries; they double in size).
const MAX_BLOCKS: usize = 64;

/// The modules of the AppDomain's assemblies, in load order (duplicates left out).
pub(crate) fn loaded_modules(t: &Target) -> Result<Vec<u64>> {
    let domain = t.global_deref("AppDomain")?;
    if domain == 0 {
        return Err(DotnetError::Invalid { what: "AppDomain", at: 0, why: "null (the runtime had not started)".into() });
    }
    let list = domain.wrapping_add(t.offset("AppDomain", "DomainAssemblyList")?);
    let count = t.field_u32(list, "ArrayListBase", "Count")?;
    if count > MAX_ASSEMBLIES {
        return Err(DotnetError::TooMany { what: "assemblies in the AppDomain's list", at: list, limit: u64::from(MAX_ASSEMBLIES) });
    }
    let mut entries = Vec::with_capacity(count as usize);
    let mut block = list.wrapping_add(t.offset("ArrayListBase", "FirstBlock")?);
    for _ in 0..MAX_BLOCKS {
        if entries.len() >= count as usize || block == 0 {
            break;
        }
        let size = t.field_u32(block, "ArrayListBlock", "Size")?;
        let start = block.wrapping_add(t.offset("ArrayListBlock", "ArrayStart")?);
        for i in 0..u64::from(size).min(u64::from(count) - entries.len() as u64) {
            entries.push(t.read_ptr(start.wrapping_add(i * 8), "ArrayListBlock entry")?);
        }
        block = t.field_ptr(block, "ArrayListBlock", "Next")?;
    }
    let mut out: Vec<u64> = Vec::with_capacity(entries.len());
    for e in entries.into_iter().filter(|&e| e != 0) {
        if let Some(m) = module_of(t, e).or_else(|| t.read_ptr(e, "DomainAssembly").ok().and_then(|a| module_of(t, a)))
            && !out.contains(&m)
        {
            out.push(m);
        }
    }
    Ok(out)
}

/// The module of the assembly at `assembly`, when that module names it back.
fn module_of(t: &Target, assembly: u64) -> Option<u64> {
    let m = t.field_ptr(assembly, "Assembly", "Module").ok().filter(|&m| m != 0)?;
    (t.field_ptr(m, "Module", "Assembly").ok()? == assembly).then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::{Locator, Process};
    use crate::runtimes::dotnet::contract::context::Context;

    /// The class_init sample's program has only static classes: its module holds no object on
    /// the heap, yet it is loaded. Every module knot reads is one SOS `dumpdomain` lists.
    #[test]
    fn the_loaded_modules_are_those_dumpdomain_lists() {
        let Some(d) = knot_samples::dotnet::dumps("sos/dumpdomain.txt", false).into_iter().find(|d| d.sample == "class_init") else {
            knot_samples::skipped("skipping: samples/dotnet/dumps/class_init/heap not found");
            return;
        };
        let sos = std::fs::read_to_string(d.dir.join("sos/dumpdomain.txt")).expect("dumpdomain.txt");
        // `  00007f195f741a30    /…/class_init.dll`: each assembly's module.
        let mut want: Vec<u64> = sos
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let (a, p) = (w.next()?, w.next()?);
                (l.starts_with("  ") && p.starts_with('/')).then(|| u64::from_str_radix(a, 16).ok())?
            })
            .collect();
        assert!(want.len() >= 10, "{want:?}");
        let locator = Locator { sysroot: d.sysroot.clone(), search_dirs: d.search_dirs.clone(), ..Locator::default() };
        let process = Process::open(&d.core, &locator).expect("open the core");
        let c = Context::open(&process, &locator).unwrap_or_else(|_| panic!("no runtime"));
        let mut got = loaded_modules(&c.target()).expect("the AppDomain's assemblies");
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want);
    }
}
