//! Managed exceptions as SOS `pe` prints them: type, message, HResult, the stack trace the
//! exception saved when it was thrown, and its `InnerException` chain.
//!
//! Fields come from the descriptor's `Exception` type (`_message`, `_innerException`,
//! `_stackTrace`, `_HResult`) and `String` (`m_StringLength`, `m_FirstChar`), `Array`
//! (`m_NumComponents`, its size = where elements start). `_stackTrace` is an `sbyte[]` — or an
//! `object[]` whose element 0 is that array and whose other elements keep collectible
//! methods alive — holding CoreCLR's `StackTraceArray`: a 16-byte header (element count,
//! `Thread*`), then 32-byte `StackTraceElement`s `{ ip, sp, MethodDesc*, flags }`, the frames
//! `pe` lists. Every count, length and chain is bounded; the chain is cycle-checked.

use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::types::objects::TypeNamer;
use crate::runtimes::dotnet::contract::target::{Result, Target};
use crate::unwind::managed::CodeLookup;
use serde::Serialize;
use std::collections::HashSet;

/// InnerExceptions followed at most (SOS's `pe -nested` has no limit; a chain this long is
/// corrupt or hostile).
pub(crate) const MAX_INNER: usize = 16;
/// Stack trace elements read at most per exception.
pub(crate) const MAX_STACK_FRAMES: usize = 4096;
/// Message characters read at most.
pub(crate) const MAX_STRING_CHARS: u32 = 1 << 16;
const STACK_TRACE_HEADER: u64 = 16;
const STACK_TRACE_ELEMENT: u64 = 32;

/// One exception object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ManagedException {
    /// The exception object's address (`pe`'s "Exception object").
    pub object: u64,
    /// Its type, as SOS prints it; `None` when it could not be read.
    pub type_name: Option<String>,
    /// `_message`; `None` when null (`pe`: `<none>`).
    pub message: Option<String>,
    /// `_HResult`.
    pub hresult: u32,
    /// The saved stack trace (`pe`'s "StackTrace (generated)"), innermost first.
    pub stack: Vec<ExceptionFrame>,
    pub inner: Option<Box<ManagedException>>,
    /// What could not be read (the chain or stack stops there).
    pub problems: Vec<String>,
}

impl ManagedException {
}

/// One `StackTraceElement`, named as `pe` names it: `module!Type.Method(args)+0xoffset`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ExceptionFrame {
    /// As the runtime stored it: the return address minus one where `flags` has
    /// [`STEF_IP_ADJUSTED`].
    pub ip: u64,
    pub sp: u64,
    pub method_desc: u64,
    /// `StackTraceElement.flags` (CoreCLR's `STEF_*` bits).
    pub flags: u32,
    /// `Namespace.Type.Method`, as clrstack and `pe` print it (no signature).
    pub function: Option<String>,
    /// The parameter list, `(System.String)`.
    pub signature: Option<String>,
    /// The managed module's file name, `System.Private.CoreLib.dll`.
    pub module: Option<String>,
    /// `ip` minus the method's start, when the code map places `ip`.
    pub offset: Option<u64>,
}

impl ExceptionFrame {
    #[cfg(test)]
    /// The frame as `pe` prints its Function column.
    pub(crate) fn pe_text(&self) -> String {
        let mut s = String::new();
        if let Some(m) = &self.module {
            s.push_str(m);
            s.push('!');
        }
        match &self.function {
            Some(f) => s.push_str(f),
            None => s.push_str(&format!("<MethodDesc {:#x}>", self.method_desc)),
        }
        if let Some(sig) = &self.signature {
            s.push_str(sig);
        }
        if let Some(o) = self.offset {
            s.push_str(&format!("+{o:#x}"));
        }
        s
    }
}

/// Reads the exception at `object` and its InnerExceptions. Names frames through `code` (the
/// runtime's code map).
pub(crate) fn read(t: &Target, namer: &TypeNamer, code: &dyn CodeLookup, object: u64) -> Result<ManagedException> {
    let mut seen = HashSet::new();
    let mut chain = Vec::new();
    let mut at = object;
    let mut cut = None;
    while at != 0 {
        if !seen.insert(at) {
            cut = Some(format!("InnerException {at:#x} repeats: the chain is a cycle"));
            break;
        }
        if chain.len() >= MAX_INNER {
            cut = Some(format!("more than {MAX_INNER} InnerExceptions: the rest are not read"));
            break;
        }
        match one(t, namer, code, at) {
            Ok((e, inner)) => {
                chain.push(e);
                at = inner;
            }
            // The outermost must be readable; an unreadable inner one ends the chain.
            Err(e) if chain.is_empty() => return Err(e),
            Err(e) => {
                cut = Some(format!("InnerException {at:#x}: {e}"));
                break;
            }
        }
    }
    if let (Some(why), Some(last)) = (cut, chain.last_mut()) {
        last.problems.push(why);
    }
    let mut out: Option<ManagedException> = None;
    while let Some(mut e) = chain.pop() {
        e.inner = out.map(Box::new);
        out = Some(e);
    }
    out.ok_or(DotnetError::Invalid { what: "exception", at: object, why: "null".into() })
}

/// One exception, and its `_innerException`.
fn one(t: &Target, namer: &TypeNamer, code: &dyn CodeLookup, object: u64) -> Result<(ManagedException, u64)> {
    let hresult = t.field_u32(object, "Exception", "_HResult")?;
    let message_ptr = t.field_ptr(object, "Exception", "_message")?;
    let inner = t.field_ptr(object, "Exception", "_innerException")?;
    let trace = t.field_ptr(object, "Exception", "_stackTrace")?;
    let mut problems = Vec::new();
    let type_name = namer.object_type_name(object).map_err(|e| problems.push(format!("type: {e}"))).ok();
    let message = if message_ptr == 0 {
        None
    } else {
        match string(t, message_ptr) {
            Ok(s) => Some(s),
            Err(e) => {
                problems.push(format!("_message: {e}"));
                None
            }
        }
    };
    let stack = if trace == 0 {
        Vec::new()
    } else {
        match stack_trace_bytes(t, namer, trace).and_then(|b| elements(&b, trace)) {
            Ok(elems) => elems.into_iter().map(|e| name_frame(code, e)).collect(),
            Err(e) => {
                problems.push(format!("_stackTrace: {e}"));
                Vec::new()
            }
        }
    };
    Ok((ManagedException { object, type_name, message, hresult, stack, inner: None, problems }, inner))
}

/// A `System.String`'s text (at most [`MAX_STRING_CHARS`] UTF-16 units).
pub(crate) fn string(t: &Target, object: u64) -> Result<String> {
    let len = t.read_u32(object.wrapping_add(t.offset("String", "m_StringLength")?), "String.m_StringLength")?;
    if len > MAX_STRING_CHARS {
        return Err(DotnetError::TooMany { what: "String length", at: object, limit: MAX_STRING_CHARS as u64 });
    }
    let bytes = t.read_bytes(object.wrapping_add(t.offset("String", "m_FirstChar")?), 2 * len as usize, "String characters")?;
    let units: Vec<u16> = bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
    Ok(String::from_utf16_lossy(&units))
}

/// Whether `object` is a `System.String` (its MethodTable is the runtime's `StringMethodTable`).
pub(crate) fn is_string(t: &Target, object: u64) -> bool {
    let Ok(string_mt) = t.global_deref("StringMethodTable") else { return false };
    string_mt != 0 && crate::runtimes::dotnet::types::objects::method_table(t, object).is_ok_and(|mt| mt == string_mt)
}

/// The bytes of the `StackTraceArray` behind `_stackTrace` (a `byte[]`, or element 0 of an
/// `object[]`).
fn stack_trace_bytes(t: &Target, namer: &TypeNamer, trace: u64) -> Result<Vec<u8>> {
    // The runtime allocates it as an `sbyte[]`; managed code (a deserialized exception) may
    // hold a `byte[]`.
    let is_bytes = |name: &str| name == "System.SByte[]" || name == "System.Byte[]";
    let array = match namer.object_type_name(trace)?.as_str() {
        name if is_bytes(name) => trace,
        "System.Object[]" => {
            let first = t.read_ptr(trace.wrapping_add(t.size("Array")?), "_stackTrace object[] element 0")?;
            let name = namer.object_type_name(first)?;
            if !is_bytes(&name) {
                return Err(DotnetError::Invalid { what: "_stackTrace", at: trace, why: format!("element 0 is a {name}, not System.SByte[]") });
            }
            first
        }
        other => return Err(DotnetError::Invalid { what: "_stackTrace", at: trace, why: format!("a {other}, not System.SByte[] or System.Object[]") }),
    };
    let len = t.field_u32(array, "Array", "m_NumComponents")? as u64;
    let max = STACK_TRACE_HEADER + STACK_TRACE_ELEMENT * MAX_STACK_FRAMES as u64;
    t.read_bytes(array.wrapping_add(t.size("Array")?), len.min(max) as usize, "_stackTrace bytes")
}

/// A raw `StackTraceElement`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Element {
    pub(crate) ip: u64,
    pub(crate) sp: u64,
    pub(crate) method_desc: u64,
    pub(crate) flags: u32,
}

/// The elements of a `StackTraceArray` (`at`: the array, for errors). The header's count must
/// fit the bytes.
pub(crate) fn elements(bytes: &[u8], at: u64) -> Result<Vec<Element>> {
    let word = |o: usize| bytes.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    let count = word(0).ok_or(DotnetError::Invalid { what: "StackTraceArray", at, why: "shorter than its header".into() })?;
    let room = (bytes.len() as u64).saturating_sub(STACK_TRACE_HEADER) / STACK_TRACE_ELEMENT;
    if count > room {
        return Err(DotnetError::Invalid { what: "StackTraceArray", at, why: format!("{count} elements do not fit its {} bytes", bytes.len()) });
    }
    Ok((0..count as usize)
        .filter_map(|i| {
            let o = STACK_TRACE_HEADER as usize + i * STACK_TRACE_ELEMENT as usize;
            let flags = bytes.get(o + 24..o + 28).map(|b| u32::from_le_bytes(b.try_into().unwrap_or([0; 4])))?;
            Some(Element { ip: word(o)?, sp: word(o + 8)?, method_desc: word(o + 16)?, flags })
        })
        .collect())
}

#[cfg(test)]
/// `STEF_IP_ADJUSTED`: the runtime stored the frame's return address minus one (inside the
/// call, for its line). SOS's `pe` prints the stored ip for some exceptions and adds the one
/// back for others (on .NET 10.0.12, the unhandled and the FailFast one as stored, a caught
/// inner one plus one), by a rule knot has not found; knot gives the stored ip.
pub(crate) const STEF_IP_ADJUSTED: u32 = 0x2;

fn name_frame(code: &dyn CodeLookup, e: Element) -> ExceptionFrame {
    let name = code.name(e.method_desc);
    let start = code.lookup(e.ip).filter(|c| c.method == Some(e.method_desc)).map(|c| c.method_start);
    ExceptionFrame {
        ip: e.ip,
        sp: e.sp,
        method_desc: e.method_desc,
        flags: e.flags,
        function: name.as_ref().map(|n| n.qualified.clone()),
        signature: name.as_ref().and_then(|n| n.signature.clone()),
        module: name.and_then(|n| n.module),
        offset: start.filter(|&s| s <= e.ip).map(|s| e.ip - s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(count: u64, elems: &[[u64; 4]]) -> Vec<u8> {
        let mut b = count.to_le_bytes().to_vec();
        b.extend(0x5555_0000u64.to_le_bytes());
        for e in elems {
            for w in e {
                b.extend(w.to_le_bytes());
            }
        }
        b
    }

    #[test]
    fn elements_are_read_from_the_header_count() {
        let b = array(2, &[[0x1000, 0x7000, 0xaa0, 2], [0x2000, 0x7100, 0xbb0, 0]]);
        let e = elements(&b, 0).expect("two elements");
        assert_eq!(e, [Element { ip: 0x1000, sp: 0x7000, method_desc: 0xaa0, flags: 2 }, Element { ip: 0x2000, sp: 0x7100, method_desc: 0xbb0, flags: 0 }]);
        // A count the bytes cannot hold is refused, not read past the end.
        assert!(elements(&array(3, &[[1, 2, 3, 4]]), 0).is_err());
        assert!(elements(&array(u64::MAX, &[]), 0).is_err());
        assert!(elements(&[1, 2, 3], 0).is_err());
        assert!(elements(&array(0, &[]), 0).expect("empty").is_empty());
    }

    #[test]
    fn pe_text_is_module_bang_function_signature_plus_offset() {
        let f = ExceptionFrame {
            ip: 0x10,
            sp: 0,
            method_desc: 0xabc0,
            flags: 0,
            function: Some("A.B.C".into()),
            signature: Some("(System.String)".into()),
            module: Some("a.dll".into()),
            offset: Some(0x9b),
        };
        assert_eq!(f.pe_text(), "a.dll!A.B.C(System.String)+0x9b");
        let bare = ExceptionFrame { function: None, signature: None, module: None, offset: None, ..f };
        assert_eq!(bare.pe_text(), "<MethodDesc 0xabc0>");
    }
}
