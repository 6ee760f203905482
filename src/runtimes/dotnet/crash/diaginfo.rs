//! createdump's `DIAGINFOHEADER`: a page createdump adds to every ELF dump it writes, at a fixed
//! address no process maps (0x7ffffff10000 on 64-bit Linux): a 16-byte signature, a version,
//! the address of the exception record (set for a NativeAOT crash; 0 for CoreCLR) and, from
//! version 2, the runtime module's base. Its presence says createdump wrote the dump, not the
//! kernel or gdb.
//!
//! ```text
//! struct SpecialDiagInfoHeader { char Signature[16]; int32_t Version; uint64_t ExceptionRecordAddress; uint64_t RuntimeBaseAddress; };
//! ```

use crate::process::Memory;
use crate::hex::Hex;
use serde::Serialize;

/// Where createdump puts the header on 64-bit Linux.
pub(crate) const ADDRESS: u64 = 0x7fff_fff1_0000;
pub(crate) const SIGNATURE: &[u8; 16] = b"DIAGINFOHEADER\0\0";
const HEADER_SIZE: usize = 40;
/// The version that added `RuntimeBaseAddress`.
const RUNTIME_BASE_VERSION: i32 = 2;

/// What the header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DiagInfo {
    pub version: i32,
    /// `ExceptionRecordAddress`, when nonzero.
    pub(crate) exception_record: Option<Hex>,
    /// `RuntimeBaseAddress` (version 2 and later), when nonzero.
    pub(crate) runtime_base: Option<Hex>,
}

/// The header, when the dump has one (`None`: not written by createdump, or the page is
/// missing or damaged).
pub(crate) fn read(memory: &dyn Memory) -> Option<DiagInfo> {
    let mut bytes = [0u8; HEADER_SIZE];
    memory.read(ADDRESS, &mut bytes).ok()?;
    parse(&bytes)
}

pub(crate) fn parse(bytes: &[u8]) -> Option<DiagInfo> {
    let b = bytes.get(..HEADER_SIZE)?;
    if &b[..16] != SIGNATURE {
        return None;
    }
    let version = i32::from_le_bytes(b[16..20].try_into().ok()?);
    let word = |o: usize| b[o..o + 8].try_into().ok().map(u64::from_le_bytes);
    let nonzero = |v: Option<u64>| v.filter(|&v| v != 0);
    Some(DiagInfo {
        version,
        exception_record: nonzero(word(24)).map(Hex),
        runtime_base: if version >= RUNTIME_BASE_VERSION { nonzero(word(32)).map(Hex) } else { None },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(sig: &[u8; 16], version: i32, record: u64, base: u64) -> Vec<u8> {
        let mut b = sig.to_vec();
        b.extend(version.to_le_bytes());
        b.extend([0; 4]);
        b.extend(record.to_le_bytes());
        b.extend(base.to_le_bytes());
        b
    }

    #[test]
    fn reads_the_signature_version_and_addresses() {
        let h = parse(&header(SIGNATURE, 2, 0, 0x7f00_0000_0000)).expect("a header");
        assert_eq!(h, DiagInfo { version: 2, exception_record: None, runtime_base: Some(Hex(0x7f00_0000_0000)) });
        // Version 1 has no runtime base: whatever follows is not read as one.
        assert_eq!(parse(&header(SIGNATURE, 1, 0x1234, 0x99)).expect("v1").runtime_base, None);
        assert_eq!(parse(&header(SIGNATURE, 1, 0x1234, 0x99)).expect("v1").exception_record, Some(Hex(0x1234)));
        assert!(parse(&header(b"DIAGINFOHEADEX\0\0", 2, 0, 0)).is_none());
        assert!(parse(&header(SIGNATURE, 2, 0, 0)[..30]).is_none());
    }
}
