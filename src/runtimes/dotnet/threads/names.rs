//! Managed thread names: `System.Threading.Thread._name`, read from the thread's exposed
//! `Thread` object.
//!
//! The descriptor does not describe CoreLib's `Thread` class, but it gives the String
//! MethodTable (`StringMethodTable`), the String layout (`String.m_StringLength`,
//! `m_FirstChar`) and each MethodTable's `BaseSize`. `_name` is the only `string` field of
//! `System.Threading.Thread`, so the name is the one instance field (inside `BaseSize`) that
//! refers to a String object; a Thread object with more than one such field is refused rather
//! than guessed at.

use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::types::objects;
use crate::runtimes::dotnet::contract::target::{Result, Target};

/// Longer thread names are cut here (the OS keeps 15 bytes; managed names are rarely long).
pub(crate) const MAX_NAME_CHARS: u32 = 1024;
/// A Thread object is well under this; a larger BaseSize is not a Thread.
const MAX_THREAD_OBJECT_BYTES: u64 = 512;

/// The name of the `System.Threading.Thread` object at `thread_object`, or `None` when unnamed.
pub(crate) fn thread_name(t: &Target, thread_object: u64) -> Result<Option<String>> {
    if thread_object == 0 {
        return Ok(None);
    }
    let string_mt = t.global_deref("StringMethodTable")?;
    let mt = objects::method_table(t, thread_object)?;
    // BaseSize counts the header word before the object and the MethodTable pointer.
    let base = t.field_u32(mt, "MethodTable", "BaseSize")? as u64;
    if base > MAX_THREAD_OBJECT_BYTES {
        return Err(DotnetError::Invalid { what: "Thread object", at: thread_object, why: format!("BaseSize {base} is not a Thread's") });
    }
    let mut found = None;
    for off in (8..base.saturating_sub(8)).step_by(8) {
        let v = t.read_ptr(thread_object.wrapping_add(off), "Thread object field")?;
        if v == 0 || v & 7 != 0 {
            continue;
        }
        if objects::method_table(t, v).is_ok_and(|m| m == string_mt) {
            if found.is_some() {
                return Err(DotnetError::Invalid { what: "Thread object", at: thread_object, why: "more than one string field: not the Thread layout knot knows".into() });
            }
            found = Some(v);
        }
    }
    found.map(|s| read_string(t, s)).transpose()
}

/// A `System.String`'s text.
pub(crate) fn read_string(t: &Target, s: u64) -> Result<String> {
    let len = t.field_u32(s, "String", "m_StringLength")?.min(MAX_NAME_CHARS);
    let first = s.wrapping_add(t.offset("String", "m_FirstChar")?);
    let bytes = t.read_bytes(first, len as usize * 2, "string characters")?;
    let units: Vec<u16> = bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
    Ok(String::from_utf16_lossy(&units))
}
