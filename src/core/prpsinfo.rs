//! NT_PRPSINFO: the process. x86_64 `struct elf_prpsinfo` (136 bytes).

use crate::bytes::{c_string, i32_at};
use serde::Serialize;

#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct ProcessInfo {
    pub(crate) pid: u32,
    pub(crate) ppid: u32,
    /// The executable's short name (`comm`, at most 15 bytes).
    pub(crate) name: String,
    /// The start of the command line (the kernel keeps at most 80 bytes).
    pub(crate) args: String,
    /// The scheduler state letter (`R`, `S`, `D`, ...).
    pub(crate) state: char,
}

pub(crate) fn parse(desc: &[u8]) -> Option<ProcessInfo> {
    if desc.len() < 136 {
        return None;
    }
    let sname = desc[1];
    Some(ProcessInfo {
        pid: i32_at(desc, 24)? as u32,
        ppid: i32_at(desc, 28)? as u32,
        name: c_string(&desc[40..56]),
        args: c_string(&desc[56..136]).trim_end().to_string(),
        state: if sname.is_ascii_graphic() { sname as char } else { '?' },
    })
}
