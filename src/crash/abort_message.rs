//! glibc's last words: `__abort_msg` (a `struct abort_msg_s { unsigned size; char msg[]; } *`)
//! is set by assert, the malloc checks and the fortify checks just before they call abort().

use crate::process::{Memory, Process};
use crate::process::dynsym::dynamic_symbol;

/// The most of a message knot reads.
pub(crate) const MAX_MESSAGE: usize = 4096;

/// The text at `addr`, up to its NUL or `max` bytes (fewer when memory ends first).
pub(crate) fn c_string(memory: &dyn Memory, addr: u64, max: usize) -> Option<String> {
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        let chunk = memory.chunk(at, (max - out.len()).min(256)).ok()?;
        if let Some(end) = chunk.iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return Some(String::from_utf8_lossy(&out).into_owned());
        }
        out.extend_from_slice(chunk);
        at = at.checked_add(chunk.len() as u64)?;
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// The message glibc recorded, if any: from the `__abort_msg` that libc.so.6 exports.
pub(crate) fn read(process: &Process) -> Option<String> {
    let libc = process.modules.iter().find(|m| m.name().starts_with("libc.so"))?;
    let sym = libc.file.as_ref().and_then(|f| dynamic_symbol(f, "__abort_msg"))?;
    let slot = sym.value.wrapping_add(libc.bias);
    let msg = process.read_u64(slot).ok().filter(|&p| p != 0)?;
    let size = process.read_u32(msg).ok()? as usize;
    let text = c_string(process, msg.checked_add(4)?, size.clamp(1, MAX_MESSAGE))?;
    let text = text.trim_end().to_string();
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::RangeMemory;

    #[test]
    fn strings_stop_at_nul_or_the_bound() {
        let mut m = RangeMemory::new();
        m.add(0x1000, b"free(): double free\n\0junk".to_vec());
        assert_eq!(c_string(&m, 0x1000, 100).as_deref(), Some("free(): double free\n"));
        assert_eq!(c_string(&m, 0x1000, 4).as_deref(), Some("free"));
        m.add(0x2000, b"no end".to_vec());
        assert_eq!(c_string(&m, 0x2000, 100), None, "memory ends before the NUL");
    }
}
