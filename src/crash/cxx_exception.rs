//! The C++ exception that reached `std::terminate`: libstdc++ keeps the thrown object behind a
//! `__cxa_exception` header whose `_Unwind_Exception` starts with the class "GNUCC++\0"; the
//! crashing thread's stack holds a pointer to that header while terminate runs. Its type comes
//! from the `std::type_info`, its `what()` from a `std::runtime_error`/`std::logic_error` base
//! (their message is a string pointer right after the vtable pointer).

use super::abort_message::c_string;
use super::model::ExceptionReport;
use crate::process::{Memory, Process};
use crate::hex::Hex;
use crate::symbols::Symbolizer;

/// `_Unwind_Exception.exception_class` of a primary exception thrown by libstdc++.
const GNU_CXX_CLASS: u64 = 0x474e_5543_432b_2b00;
/// From `_Unwind_Exception` back to `__cxa_exception.exceptionType` (x86-64 libstdc++).
const TYPE_BEFORE_UNWIND_HEADER: u64 = 80;
/// `sizeof(_Unwind_Exception)`: the thrown object follows it.
const UNWIND_HEADER_SIZE: u64 = 32;
/// How much of the stack above the crashing SP is searched.
const SCAN_BYTES: u64 = 64 * 1024;
const MAX_NAME: usize = 512;
/// Base classes followed to find `std::runtime_error`, at most.
const MAX_DEPTH: usize = 8;

/// The exception being thrown on a thread whose stack pointer is `sp`.
pub(crate) fn read(process: &Process, symbolizer: &Symbolizer<'_>, sp: u64) -> Option<ExceptionReport> {
    let header = find_header(process, sp)?;
    let type_info = process.read_u64(header.checked_sub(TYPE_BEFORE_UNWIND_HEADER)?).ok()?;
    let object = header.checked_add(UNWIND_HEADER_SIZE)?;
    let type_name = type_name(process, type_info)?;
    let message = what(process, symbolizer, type_info, object);
    Some(ExceptionReport { type_name, message, hresult: None, address: Some(Hex(object)), stack: Vec::new(), inner: None })
}

/// A pointer on the stack to an `_Unwind_Exception` of class "GNUCC++\0".
fn find_header(process: &Process, sp: u64) -> Option<u64> {
    let mut at = sp & !7;
    let end = sp.saturating_add(SCAN_BYTES);
    while at < end {
        let chunk = process.chunk(at, (end - at) as usize).ok()?;
        for w in chunk.chunks_exact(8) {
            let p = u64::from_le_bytes(w.try_into().ok()?);
            if p > 0x10000 && p % 8 == 0 && process.read_u64(p).ok() == Some(GNU_CXX_CLASS) {
                return Some(p);
            }
        }
        at = at.checked_add(chunk.len().max(8) as u64)?;
    }
    None
}

/// `std::type_info::__name` ("11LedgerError"), demangled.
fn mangled_name(process: &Process, type_info: u64) -> Option<String> {
    let name = process.read_u64(type_info.checked_add(8)?).ok()?;
    c_string(process, name, MAX_NAME).map(|n| n.trim_start_matches('*').to_string())
}

fn type_name(process: &Process, type_info: u64) -> Option<String> {
    let mangled = mangled_name(process, type_info)?;
    let demangled = cpp_demangle::Symbol::new(format!("_ZTS{mangled}"))
        .ok()
        .and_then(|s| s.demangle().ok())
        .map(|s| s.trim_start_matches("typeinfo name for ").to_string());
    Some(demangled.unwrap_or(mangled))
}

/// The message of a `std::runtime_error` or `std::logic_error` (or a class derived from one).
fn what(process: &Process, symbolizer: &Symbolizer<'_>, mut type_info: u64, object: u64) -> Option<String> {
    for _ in 0..MAX_DEPTH {
        let name = mangled_name(process, type_info)?;
        if name == "St13runtime_error" || name == "St11logic_error" {
            let text = process.read_u64(object.checked_add(8)?).ok()?;
            return c_string(process, text, super::abort_message::MAX_MESSAGE);
        }
        // The type_info's own class says where its base is: __si_class_type_info keeps one base
        // right after the name; __vmi_class_type_info a count and an array of bases.
        let vtable = process.read_u64(type_info).ok()?;
        let (class, _) = symbolizer.data_symbol(vtable)?;
        type_info = if class.contains("__si_class_type_info") {
            process.read_u64(type_info.checked_add(16)?).ok()?
        } else if class.contains("__vmi_class_type_info") {
            let count = process.read_u32(type_info.checked_add(20)?).ok()?;
            if count == 0 {
                return None;
            }
            process.read_u64(type_info.checked_add(24)?).ok()?
        } else {
            return None;
        };
    }
    None
}
