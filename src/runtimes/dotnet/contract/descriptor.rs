//! The runtime's data contract descriptor: the exported `DotNetRuntimeContractDescriptor`
//! header and the compact JSON it points to.
//!
//! The header (64-bit little-endian targets only):
//!
//! | offset | field |
//! |---|---|
//! | 0 | magic `DNCCDAC\0` |
//! | 8 | flags (bit 0 always set; bit 1 set for a 32-bit target) |
//! | 12 | size of the JSON text in bytes |
//! | 16 | pointer to the JSON text |
//! | 24 | number of pointer-data slots |
//! | 32 | pointer to the pointer-data array (64-bit slots) |
//!
//! The compact JSON: `{"version":0,"baseline":"..","types":{..},"globals":{..},"contracts":{..}}`
//! with optional `"subDescriptors"`. A type is `{"!": size, "Field": offset | [offset, "type"]}`;
//! a global is `value | [value] | [value, "type"] | [[index]] | [[index], "type"]`, where a value
//! is a JSON number or a decimal/hex string (or text, for `string`-typed globals) and `[index]`
//! names a slot of the pointer-data array.

use crate::runtimes::dotnet::error::DotnetError;
use rustc_hash::FxHashMap;
use serde_json::Value;
use std::collections::BTreeMap;

pub(crate) const MAGIC: &[u8; 8] = b"DNCCDAC\0";
pub(crate) const HEADER_SIZE: usize = 40;
/// Larger than any real descriptor (the .NET 10 one is about 10 KiB).
pub(crate) const MAX_JSON_BYTES: u32 = 4 << 20;
/// Larger than any real pointer-data array (the .NET 10 one has 24 slots).
pub(crate) const MAX_POINTER_DATA: u32 = 1 << 16;
const MAX_TYPES: usize = 1 << 14;
const MAX_FIELDS: usize = 1 << 10;
const MAX_GLOBALS: usize = 1 << 14;

/// The fixed-size header, as read (pointers already resolved to runtime addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) flags: u32,
    pub json_size: u32,
    pub json_addr: u64,
    pub pointer_data_count: u32,
    pub pointer_data_addr: u64,
}

impl Header {
    /// Parses the 40 header bytes found at `at` (the address is only for the error messages).
    pub(crate) fn parse(bytes: &[u8], at: u64) -> Result<Header, DotnetError> {
        let bytes = bytes.get(..HEADER_SIZE).ok_or(DotnetError::BadDescriptor { at, why: "header shorter than 40 bytes".into() })?;
        if &bytes[..8] != MAGIC {
            return Err(DotnetError::BadMagic { at, found: u64::from_le_bytes(le8(&bytes[..8])) });
        }
        let u32_at = |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
        let u64_at = |o: usize| u64::from_le_bytes(le8(&bytes[o..o + 8]));
        let header = Header { flags: u32_at(8), json_size: u32_at(12), json_addr: u64_at(16), pointer_data_count: u32_at(24), pointer_data_addr: u64_at(32) };
        if header.flags & 1 == 0 {
            return Err(DotnetError::BadDescriptor { at, why: format!("flags {:#x} lack the always-set bit 0", header.flags) });
        }
        if header.flags & 2 != 0 {
            return Err(DotnetError::BadDescriptor { at, why: "the descriptor is for a 32-bit target".into() });
        }
        if header.json_size == 0 || header.json_size > MAX_JSON_BYTES {
            return Err(DotnetError::BadDescriptor { at, why: format!("JSON size {} is outside 1..={MAX_JSON_BYTES}", header.json_size) });
        }
        if header.pointer_data_count > MAX_POINTER_DATA {
            return Err(DotnetError::BadDescriptor { at, why: format!("pointer-data count {} exceeds {MAX_POINTER_DATA}", header.pointer_data_count) });
        }
        if header.json_addr == 0 {
            return Err(DotnetError::BadDescriptor { at, why: "null JSON pointer".into() });
        }
        if header.pointer_data_count > 0 && header.pointer_data_addr == 0 {
            return Err(DotnetError::BadDescriptor { at, why: "null pointer-data pointer with a nonzero count".into() });
        }
        Ok(header)
    }
}

fn le8(b: &[u8]) -> [u8; 8] {
    let mut out = [0u8; 8];
    out[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
    out
}

/// One field of a described type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field {
    pub offset: u64,
    /// The field's type name, when the descriptor gives one.
    pub type_name: Option<String>,
}

/// A described type: its size (when determinate) and fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TypeInfo {
    pub size: Option<u64>,
    /// Hashed, not ordered: a field's offset is looked up by name on every structure read
    /// (tens of thousands of times per .NET dump), and nothing lists them in order.
    pub fields: FxHashMap<String, Field>,
}

/// Where a global's value lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GlobalValue {
    /// The value itself.
    Direct(u64),
    /// A slot of the pointer-data array.
    Indirect(u32),
    /// A string-typed global's text.
    Text(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Global {
    pub value: GlobalValue,
    pub(crate) type_name: Option<String>,
}

/// The parsed JSON of one descriptor (sub-descriptors are parsed separately and merged by the
/// caller).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Descriptor {
    pub version: u64,
    pub baseline: String,
    /// Hashed for the same reason as [`TypeInfo::fields`].
    pub types: FxHashMap<String, TypeInfo>,
    pub globals: FxHashMap<String, Global>,
    pub contracts: BTreeMap<String, u64>,
    /// Name → where the pointer to the sub-descriptor's header lives.
    pub sub_descriptors: BTreeMap<String, Global>,
}

impl Descriptor {
    /// Parses the compact JSON. `at` is where the text was read (for messages).
    pub(crate) fn parse(text: &[u8], at: u64) -> Result<Descriptor, DotnetError> {
        let bad = |why: String| DotnetError::BadJson { at, why };
        // The text may be NUL-terminated inside the declared size.
        let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
        let root: Value = serde_json::from_slice(&text[..end]).map_err(|e| bad(e.to_string()))?;
        let obj = root.as_object().ok_or_else(|| bad("the top level is not an object".into()))?;
        let version = obj.get("version").and_then(Value::as_u64).ok_or_else(|| bad("no numeric \"version\"".into()))?;
        if version != 0 {
            return Err(bad(format!("descriptor version {version} (only version 0 is known)")));
        }
        let baseline = match obj.get("baseline") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(","),
            _ => String::new(),
        };
        let mut d = Descriptor { version, baseline, ..Descriptor::default() };
        if let Some(types) = obj.get("types") {
            let types = types.as_object().ok_or_else(|| bad("\"types\" is not an object".into()))?;
            if types.len() > MAX_TYPES {
                return Err(bad(format!("{} types (more than {MAX_TYPES})", types.len())));
            }
            for (name, spec) in types {
                d.types.insert(name.clone(), parse_type(name, spec).map_err(&bad)?);
            }
        }
        if let Some(globals) = obj.get("globals") {
            let globals = globals.as_object().ok_or_else(|| bad("\"globals\" is not an object".into()))?;
            if globals.len() > MAX_GLOBALS {
                return Err(bad(format!("{} globals (more than {MAX_GLOBALS})", globals.len())));
            }
            for (name, spec) in globals {
                d.globals.insert(name.clone(), parse_global(spec).map_err(|w| bad(format!("global {name}: {w}")))?);
            }
        }
        if let Some(subs) = obj.get("subDescriptors") {
            let subs = subs.as_object().ok_or_else(|| bad("\"subDescriptors\" is not an object".into()))?;
            for (name, spec) in subs.iter().take(MAX_GLOBALS) {
                d.sub_descriptors.insert(name.clone(), parse_global(spec).map_err(|w| bad(format!("sub-descriptor {name}: {w}")))?);
            }
        }
        if let Some(contracts) = obj.get("contracts") {
            let contracts = contracts.as_object().ok_or_else(|| bad("\"contracts\" is not an object".into()))?;
            for (name, v) in contracts.iter().take(MAX_GLOBALS) {
                let v = v.as_u64().ok_or_else(|| bad(format!("contract {name}: version is not a non-negative integer")))?;
                d.contracts.insert(name.clone(), v);
            }
        }
        Ok(d)
    }

    /// Adds `other`'s types, globals and contracts; `other` wins where both have one (a
    /// sub-descriptor refines the main one).
    pub(crate) fn merge(&mut self, other: Descriptor) {
        for (name, t) in other.types {
            let entry = self.types.entry(name).or_default();
            if t.size.is_some() {
                entry.size = t.size;
            }
            entry.fields.extend(t.fields);
        }
        self.globals.extend(other.globals);
        self.contracts.extend(other.contracts);
    }
}

fn parse_type(name: &str, spec: &Value) -> Result<TypeInfo, String> {
    let fields = spec.as_object().ok_or_else(|| format!("type {name} is not an object"))?;
    if fields.len() > MAX_FIELDS {
        return Err(format!("type {name} has {} fields (more than {MAX_FIELDS})", fields.len()));
    }
    let mut t = TypeInfo::default();
    for (field, v) in fields {
        if field == "!" {
            t.size = Some(v.as_u64().ok_or_else(|| format!("type {name}: size is not a non-negative integer"))?);
            continue;
        }
        let (offset, type_name) = match v {
            Value::Number(_) => (v.as_u64(), None),
            Value::Array(a) => (a.first().and_then(Value::as_u64), a.get(1).and_then(Value::as_str).map(str::to_string)),
            _ => (None, None),
        };
        let offset = offset.ok_or_else(|| format!("type {name}: field {field} has no non-negative offset"))?;
        t.fields.insert(field.clone(), Field { offset, type_name });
    }
    Ok(t)
}

fn parse_global(spec: &Value) -> Result<Global, String> {
    let (value, type_name) = match spec {
        Value::Array(a) => (a.first().ok_or("empty array")?, a.get(1).and_then(Value::as_str).map(str::to_string)),
        v => (v, None),
    };
    let is_string = type_name.as_deref() == Some("string");
    let value = match value {
        Value::Array(idx) => {
            let i = idx.first().and_then(Value::as_u64).ok_or("indirect value without an index")?;
            GlobalValue::Indirect(u32::try_from(i).map_err(|_| format!("pointer-data index {i} is too large"))?)
        }
        Value::Number(n) => GlobalValue::Direct(number(n).ok_or_else(|| format!("{n} is not an integer"))?),
        Value::String(s) if is_string => GlobalValue::Text(s.clone()),
        Value::String(s) => GlobalValue::Direct(parse_int(s).ok_or_else(|| format!("{s:?} is not an integer"))?),
        other => return Err(format!("unexpected value {other}")),
    };
    Ok(Global { value, type_name })
}

fn number(n: &serde_json::Number) -> Option<u64> {
    n.as_u64().or_else(|| n.as_i64().map(|v| v as u64))
}

/// A decimal or `0x` hex integer, optionally negative (two's complement).
pub(crate) fn parse_int(s: &str) -> Option<u64> {
    let s = s.trim();
    let (neg, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let v = if let Some(hex) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()?
    } else {
        digits.parse::<u64>().ok()?
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ints() {
        assert_eq!(parse_int("0x10"), Some(16));
        assert_eq!(parse_int("12"), Some(12));
        assert_eq!(parse_int("-1"), Some(u64::MAX));
        assert_eq!(parse_int("zz"), None);
    }
}
