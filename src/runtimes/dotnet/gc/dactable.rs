//! `g_dacTable`: the table libcoreclr exports for the DAC, one slot per variable of
//! `src/coreclr/inc/dacvars.h` in that file's order, filled at start-up with each variable's
//! address. The .NET 10 contract descriptor has no GC contract, so this table is the way to the
//! GC's own DAC interface (`g_gcDacGlobals`) and the global allocation context. Which slot holds
//! which variable is a per-build fact (`analyzers/dotnet/`); the slot of `ThreadStore::s_pThreadStore`
//! is checked against the descriptor's `ThreadStore` global before any other slot is trusted.

use crate::runtimes::dotnet::contract::elf;
use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::contract::target::{Result, Target};
use crate::process::Module;

pub(crate) const DAC_TABLE_SYMBOL: &str = crate::runtimes::dotnet::contract::catalog::DAC_TABLE_SYMBOL;
/// Slots at most (dacvars.h has about 100 variables).
const MAX_SLOTS: u64 = 1024;

/// The table, read from dump memory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DacTable {
    pub(crate) address: u64,
    module_start: u64,
    module_end: u64,
}

impl DacTable {
    /// Finds the table in `module` (libcoreclr) and checks the ThreadStore slot (`thread_store_slot`,
    /// a per-build fact) against the descriptor.
    pub(crate) fn locate(t: &Target, module: &Module, thread_store_slot: u64) -> Result<DacTable> {
        let table = DacTable::find(module)?;
        let thread_store = table.variable(t, thread_store_slot)?;
        let expected = t.global("ThreadStore")?;
        if thread_store != expected {
            return Err(DotnetError::Invalid {
                what: "g_dacTable",
                at: table.address,
                why: format!(
                    "slot {} holds {thread_store:#x}, but the descriptor's ThreadStore is at {expected:#x}: the table's order is not this build's",
                    thread_store_slot
                ),
            });
        }
        Ok(table)
    }

    /// The table in `module`, unchecked: for a runtime with no descriptor to check it against
    /// (.NET 8), whose reader checks what the slots give instead.
    pub(crate) fn find(module: &Module) -> Result<DacTable> {
        // The file's exports name it; without the file, knot's runtime catalogue does.
        let rva = match &module.file {
            Some(file) => elf::dynamic_symbol(file, DAC_TABLE_SYMBOL).map(|s| s.value),
            None => match crate::runtimes::dotnet::contract::locate::catalogued(module) {
                Some(build) => build.dac_table_rva,
                None => return Err(DotnetError::Invalid { what: "runtime module", at: module.start, why: "no file and not in knot's runtime catalogue: its exports name g_dacTable".into() }),
            },
        };
        let rva = rva.ok_or_else(|| DotnetError::Unsupported(format!("{} exports no {DAC_TABLE_SYMBOL}", module.name())))?;
        Ok(DacTable { address: module.bias.wrapping_add(rva), module_start: module.start, module_end: module.end })
    }

    /// The address of the variable in slot `index`. Slots hold addresses; an RVA (a value
    /// below the module's size) is turned into one.
    pub(crate) fn variable(&self, t: &Target, index: u64) -> Result<u64> {
        if index >= MAX_SLOTS {
            return Err(DotnetError::TooMany { what: "g_dacTable slot", at: self.address, limit: MAX_SLOTS });
        }
        let v = t.read_ptr(self.address + 8 * index, &format!("g_dacTable slot {index}"))?;
        let size = self.module_end.saturating_sub(self.module_start);
        if v == 0 {
            return Err(DotnetError::Invalid { what: "g_dacTable", at: self.address + 8 * index, why: format!("slot {index} is empty (the table was not filled)") });
        }
        // The module's mapping may end before its .bss: an address past `end` is still its own.
        Ok(if v < size { self.module_start + v } else { v })
    }
}
