//! NT_AUXV: the auxiliary vector, pairs of (type, value). knot uses it to find the executable's
//! program headers (AT_PHDR) and entry (AT_ENTRY) when NT_FILE is missing.

use crate::bytes::u64_at;

pub(crate) const AT_NULL: u64 = 0;
pub(crate) const AT_PHDR: u64 = 3;
pub(crate) const AT_PHNUM: u64 = 5;
pub(crate) const AT_ENTRY: u64 = 9;
pub(crate) const AT_SYSINFO_EHDR: u64 = 33;

#[derive(Debug, Clone, Default)]
pub struct Auxv {
    pub entries: Vec<(u64, u64)>,
}

impl Auxv {
    pub fn parse(desc: &[u8]) -> Auxv {
        let mut entries = Vec::with_capacity(desc.len() / 16);
        let mut off = 0;
        while let (Some(k), Some(v)) = (u64_at(desc, off), u64_at(desc, off + 8)) {
            if k == AT_NULL {
                break;
            }
            entries.push((k, v));
            off += 16;
        }
        Auxv { entries }
    }

    pub(crate) fn get(&self, key: u64) -> Option<u64> {
        self.entries.iter().find(|(k, _)| *k == key).map(|&(_, v)| v)
    }
}
