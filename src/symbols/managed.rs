//! Names for code a runtime made (.NET JIT and ReadyToRun methods), from the runtime's code map:
//! asked only for an address the ELF symbol tables cannot place — one in no module (a JIT code
//! heap is anonymous memory) or in a module that is not ELF (a ReadyToRun `.dll`).

use super::Symbolizer;
use crate::unwind::managed::{CodeLookup, ManagedCodeKind};

/// A managed method at an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedSymbol {
    /// `Namespace.Type.Method`, as SOS names it; `None` when the runtime could not name it.
    pub(crate) qualified: Option<String>,
    pub(crate) signature: Option<String>,
    /// The assembly file name.
    pub(crate) module: Option<String>,
    /// The address minus the method's first byte.
    pub(crate) offset: u64,
    pub(crate) kind: ManagedCodeKind,
}

impl<'p> Symbolizer<'p> {
    /// Names runtime-made code with `lookup`.
    pub(crate) fn with_code_lookup(mut self, lookup: &'p dyn CodeLookup) -> Self {
        self.code_lookup = Some(lookup);
        self
    }

    /// The managed method at `addr` (at `addr - 1` for a return address), when the address is
    /// outside every ELF image and the runtime knows it as one of its methods.
    pub(crate) fn managed(&self, addr: u64, is_return_address: bool) -> Option<ManagedSymbol> {
        self.code_lookup?;
        super::remembered(&self.managed_seen, &(addr, is_return_address), || self.managed_uncached(addr, is_return_address))
    }

    fn managed_uncached(&self, addr: u64, is_return_address: bool) -> Option<ManagedSymbol> {
        let lookup = self.code_lookup?;
        let probe = if is_return_address { addr.wrapping_sub(1) } else { addr };
        if let Some((_, m)) = self.process.module_at(probe)
            && m.image().is_some()
        {
            return None;
        }
        let code = lookup.lookup(probe)?;
        if code.kind == ManagedCodeKind::Stub {
            return None;
        }
        let name = code.method.and_then(|md| lookup.name(md));
        Some(ManagedSymbol {
            qualified: name.as_ref().map(|n| n.qualified.clone()),
            signature: name.as_ref().and_then(|n| n.signature.clone()),
            module: name.and_then(|n| n.module),
            offset: addr.wrapping_sub(code.method_start),
            kind: code.kind,
        })
    }
}
