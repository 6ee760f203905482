//! The target as the contracts see it: memory plus the descriptor's types, globals and
//! pointer data. Every read names what it was for, so an error says which structure was
//! unreadable and where.

use crate::runtimes::dotnet::contract::descriptor::{Descriptor, GlobalValue};
use crate::runtimes::dotnet::error::DotnetError;
use crate::process::{Memory, MemoryError, Process};
use goblin::elf::program_header::{PF_W, PT_LOAD};
use std::borrow::Cow;

/// The process's memory as the runtime reader may use it: the dump's bytes, and module files
/// only for their read-only segments. A writable page of a module (`.data`, `.bss`, RELRO) that
/// the dump left out holds run-time values the file does not know — a relocated pointer, a
/// global set at startup — so it is unavailable, never the file's initial bytes.
pub(crate) struct RuntimeMemory<'p> {
    pub(crate) process: &'p Process,
}

impl Memory for RuntimeMemory<'_> {
    fn chunk(&self, addr: u64, len: usize) -> std::result::Result<&[u8], MemoryError> {
        match self.process.core.bytes_at(addr, len) {
            Ok(b) if !b.is_empty() => return Ok(b),
            Err(crate::core::Absence::Truncated) => return Err(MemoryError::Truncated(addr)),
            _ => {}
        }
        let read_only = self.process.module_at(addr).and_then(|(_, m)| {
            let file = m.file.as_ref()?;
            let link = m.to_link_address(addr);
            let p = file.program_headers.iter().find(|p| p.p_type == PT_LOAD && link >= p.p_vaddr && link - p.p_vaddr < p.p_memsz)?;
            Some(p.p_flags & PF_W == 0)
        });
        if read_only == Some(true) {
            return self.process.chunk(addr, len);
        }
        Err(MemoryError::NotSaved(addr))
    }
}

pub(crate) struct Target<'a> {
    pub(crate) mem: &'a dyn Memory,
    /// Owned, or borrowed from a longer-lived reader (the code map makes a `Target` per lookup).
    pub(crate) descriptor: Cow<'a, Descriptor>,
    pub(crate) pointer_data: Cow<'a, [u64]>,
}

pub(crate) type Result<T> = std::result::Result<T, DotnetError>;

/// Larger than any type the runtime describes (the .NET 10 descriptor's largest is under 2 KiB):
/// a size or field offset beyond it is a corrupt or hostile descriptor, refused before any
/// arithmetic or allocation is made with it.
pub(crate) const MAX_TYPE_SIZE: u64 = 1 << 20;
/// The most bytes one read of runtime memory may ask for (strings, signatures, stack traces are
/// cut far below this by their callers): a larger request is refused before it allocates.
pub(crate) const MAX_READ: usize = 64 << 20;

impl<'a> Target<'a> {
    #[cfg(test)]
    pub(crate) fn new(mem: &'a dyn Memory, descriptor: Descriptor, pointer_data: Vec<u64>) -> Target<'a> {
        Target { mem, descriptor: Cow::Owned(descriptor), pointer_data: Cow::Owned(pointer_data) }
    }

    /// A target over a descriptor and pointer data that live elsewhere.
    pub(crate) fn borrowed(mem: &'a dyn Memory, descriptor: &'a Descriptor, pointer_data: &'a [u64]) -> Target<'a> {
        Target { mem, descriptor: Cow::Borrowed(descriptor), pointer_data: Cow::Borrowed(pointer_data) }
    }

    /// A field's offset in a described type.
    /// Bounded by `MAX_TYPE_SIZE` and, when the type's size is described, inside it.
    pub(crate) fn offset(&self, ty: &str, field: &str) -> Result<u64> {
        let t = self.descriptor.types.get(ty).ok_or_else(|| DotnetError::MissingType(ty.into()))?;
        let offset = t.fields.get(field).map(|f| f.offset).ok_or_else(|| DotnetError::MissingField { ty: ty.into(), field: field.into() })?;
        let limit = t.size.filter(|&s| s <= MAX_TYPE_SIZE).unwrap_or(MAX_TYPE_SIZE);
        if offset >= limit {
            return Err(DotnetError::BadLayout { ty: ty.into(), why: format!("field {field} at offset {offset:#x} lies outside the type (limit {limit:#x})") });
        }
        Ok(offset)
    }

    pub(crate) fn has_field(&self, ty: &str, field: &str) -> bool {
        self.descriptor.types.get(ty).is_some_and(|t| t.fields.contains_key(field))
    }

    /// A described type's size.
    pub(crate) fn size(&self, ty: &str) -> Result<u64> {
        let t = self.descriptor.types.get(ty).ok_or_else(|| DotnetError::MissingType(ty.into()))?;
        let size = t.size.ok_or_else(|| DotnetError::MissingField { ty: ty.into(), field: "! (size)".into() })?;
        if size > MAX_TYPE_SIZE {
            return Err(DotnetError::BadLayout { ty: ty.into(), why: format!("size {size:#x} exceeds {MAX_TYPE_SIZE:#x}") });
        }
        Ok(size)
    }

    /// A global's value: the value itself, or the pointer-data slot it names.
    pub(crate) fn global(&self, name: &str) -> Result<u64> {
        let g = self.descriptor.globals.get(name).ok_or_else(|| DotnetError::MissingGlobal(name.into()))?;
        match &g.value {
            GlobalValue::Direct(v) => Ok(*v),
            GlobalValue::Indirect(i) => self.pointer_data.get(*i as usize).copied().ok_or(DotnetError::PointerDataIndex {
                name: name.into(),
                index: *i,
                count: self.pointer_data.len(),
            }),
            GlobalValue::Text(_) => Err(DotnetError::TextGlobal(name.into())),
        }
    }

    pub(crate) fn read_ptr(&self, addr: u64, what: &str) -> Result<u64> {
        self.mem.read_u64(addr).map_err(|e| DotnetError::memory(what, e))
    }

    pub(crate) fn read_u32(&self, addr: u64, what: &str) -> Result<u32> {
        self.mem.read_u32(addr).map_err(|e| DotnetError::memory(what, e))
    }

    pub(crate) fn read_u16(&self, addr: u64, what: &str) -> Result<u16> {
        let mut b = [0u8; 2];
        self.mem.read(addr, &mut b).map_err(|e| DotnetError::memory(what, e))?;
        Ok(u16::from_le_bytes(b))
    }

    pub(crate) fn read_u8(&self, addr: u64, what: &str) -> Result<u8> {
        let mut b = [0u8; 1];
        self.mem.read(addr, &mut b).map_err(|e| DotnetError::memory(what, e))?;
        Ok(b[0])
    }

    /// `len` is bounded by [`MAX_READ`], and the first byte must be readable before the buffer
    /// is allocated.
    pub(crate) fn read_bytes(&self, addr: u64, len: usize, what: &str) -> Result<Vec<u8>> {
        if len > MAX_READ {
            return Err(DotnetError::Invalid { what: "read of runtime memory", at: addr, why: format!("{what}: {len} bytes asked, more than {MAX_READ}") });
        }
        if len > 0 {
            self.mem.chunk(addr, 1).map_err(|e| DotnetError::memory(what, e))?;
        }
        let mut b = vec![0u8; len];
        self.mem.read(addr, &mut b).map_err(|e| DotnetError::memory(what, e))?;
        Ok(b)
    }

    /// The pointer in field `ty.field` of the structure at `base`. (The error's words are made
    /// only on an error: these reads run per heap object.)
    pub(crate) fn field_ptr(&self, base: u64, ty: &str, field: &str) -> Result<u64> {
        let at = base.wrapping_add(self.offset(ty, field)?);
        self.mem.read_u64(at).map_err(|e| DotnetError::memory(format!("{ty}.{field} of {base:#x}"), e))
    }

    pub(crate) fn field_u32(&self, base: u64, ty: &str, field: &str) -> Result<u32> {
        let at = base.wrapping_add(self.offset(ty, field)?);
        self.mem.read_u32(at).map_err(|e| DotnetError::memory(format!("{ty}.{field} of {base:#x}"), e))
    }

    pub(crate) fn field_u16(&self, base: u64, ty: &str, field: &str) -> Result<u16> {
        let at = base.wrapping_add(self.offset(ty, field)?);
        let mut b = [0u8; 2];
        self.mem.read(at, &mut b).map_err(|e| DotnetError::memory(format!("{ty}.{field} of {base:#x}"), e))?;
        Ok(u16::from_le_bytes(b))
    }

    /// The value of a pointer global whose pointer-data slot holds the *address* of a runtime
    /// variable: reads the variable.
    pub(crate) fn global_deref(&self, name: &str) -> Result<u64> {
        let addr = self.global(name)?;
        self.read_ptr(addr, &format!("global {name} (variable at {addr:#x})"))
    }
}
