//! Who holds a lock object: the heap objects whose fields refer to it (found by the heap walk,
//! [`crate::runtimes::dotnet::gc::walk::Hit`]), each named by its type and the field (from the class's FieldDescs and
//! the module's metadata), with a cheap identifying field of the referrer when it has one (a
//! string `Tag`, `Name` or `Id`: an Autofac scope's `Tag` is "root"). A word that is no
//! reference field of its object (an integer that happens to equal the address) is dropped.

use crate::runtimes::dotnet::contract::facts::Layout;
use crate::runtimes::dotnet::types::objects::{self, TypeNamer};
use crate::runtimes::dotnet::types::statics::Statics;
use crate::runtimes::dotnet::contract::target::Target;
use crate::runtimes::dotnet::gc::names::sos_heap_name;
use crate::runtimes::dotnet::gc::walk::Hit;
use serde::Serialize;

/// Characters of an identifying string kept.
const MAX_IDENTITY_CHARS: u32 = 64;
/// Referrers kept per object.
pub(crate) const MAX_REFERRERS: usize = 16;
/// CorElementType of reference-typed fields: STRING, CLASS, OBJECT, SZARRAY, ARRAY, GENERICINST, VAR.
const REFERENCE_TYPES: [u32; 7] = [0x0e, 0x12, 0x1c, 0x1d, 0x14, 0x15, 0x13];
/// Fields that name their object, in order of preference (auto-properties' backing fields too).
const IDENTITY_FIELDS: [&str; 6] = ["Tag", "Name", "Id", "Key", "name", "id"];

/// One object that refers to a lock object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Referrer {
    /// The referrer's type, as SOS's heap commands print it.
    pub(crate) type_name: String,
    /// The field (`_synchRoot`), or `[i]` for an array element.
    pub(crate) field: String,
    pub(crate) address: u64,
    /// A cheap identifying field of the referrer: `Tag "root"`.
    pub(crate) identity: Option<String>,
}

/// An instance field of a class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field {
    pub(crate) name: String,
    /// From the object's start (its MethodTable pointer).
    pub(crate) offset: u64,
    pub(crate) element_type: u32,
    /// Its row in the Field table of its class's module (`module`).
    pub(crate) rid: u32,
    pub(crate) module: u64,
}

/// Every instance field of the type `mt`, its parents' included (bounded): the class's
/// FieldDescs as [`Statics`] reads them.
pub(crate) fn instance_fields(t: &Target, namer: &TypeNamer, l: &Layout, mt: u64) -> Vec<Field> {
    Statics::new(t, namer, l)
        .instance_fields(mt)
        .into_iter()
        .map(|f| Field {
            offset: f.object_offset(),
            module: t.field_ptr(f.class, "MethodTable", "Module").unwrap_or(0),
            rid: f.rid,
            name: f.name,
            element_type: f.element_type,
        })
        .collect()
}

/// Names each hit's referrer and field; drops words that are not reference fields.
pub(crate) fn resolve(t: &Target, namer: &TypeNamer, l: &Layout, hits: &[Hit], string_mt: u64) -> Vec<(u64, Referrer)> {
    let mut out = Vec::new();
    for h in hits {
        let Ok(dac_name) = namer.type_name(h.method_table) else { continue };
        let type_name = sos_heap_name(&dac_name);
        let flags = t.field_u32(h.method_table, "MethodTable", "MTFlags").unwrap_or(0);
        let is_array = flags & 0x000C_0000 == 0x0008_0000;
        let field = if is_array {
            // Arrays of references only: element data starts after the MT pointer and the length
            // (and bounds, for multi-dimensional ones: not followed).
            if !type_name.ends_with("[]") || primitive_array(&type_name) || h.offset < 16 {
                continue;
            }
            format!("[{}]", (h.offset - 16) / 8)
        } else {
            let fields = instance_fields(t, namer, l, h.method_table);
            match fields.iter().find(|f| f.offset == h.offset && REFERENCE_TYPES.contains(&f.element_type)) {
                Some(f) => f.name.clone(),
                None => continue,
            }
        };
        let identity = if is_array { None } else { identity(t, namer, l, h.referrer, h.method_table, string_mt) };
        out.push((h.target, Referrer { type_name, field, address: h.referrer, identity }));
    }
    out
}

fn primitive_array(name: &str) -> bool {
    const PRIMITIVE: [&str; 14] = [
        "System.Boolean[]", "System.Char[]", "System.SByte[]", "System.Byte[]", "System.Int16[]", "System.UInt16[]", "System.Int32[]", "System.UInt32[]",
        "System.Int64[]", "System.UInt64[]", "System.Single[]", "System.Double[]", "System.IntPtr[]", "System.UIntPtr[]",
    ];
    PRIMITIVE.contains(&name)
}

/// `Tag "root"`: the first identity field of the object that holds a string.
fn identity(t: &Target, namer: &TypeNamer, l: &Layout, object: u64, mt: u64, string_mt: u64) -> Option<String> {
    let fields = instance_fields(t, namer, l, mt);
    for want in IDENTITY_FIELDS {
        let Some(f) = fields.iter().find(|f| plain_name(&f.name) == want) else { continue };
        if !REFERENCE_TYPES.contains(&f.element_type) {
            continue;
        }
        let Ok(s) = t.read_ptr(object + f.offset, "identity field") else { continue };
        if s == 0 || objects::method_table(t, s).ok() != Some(string_mt) {
            continue;
        }
        if let Some(text) = read_string(t, s) {
            return Some(format!("{} {text:?}", plain_name(&f.name)));
        }
    }
    None
}

/// `<Tag>k__BackingField` → `Tag`; `_name` → `name`.
fn plain_name(field: &str) -> &str {
    if let Some(rest) = field.strip_prefix('<')
        && let Some((name, _)) = rest.split_once(">k__BackingField")
    {
        return name;
    }
    field.trim_start_matches('_')
}

/// A managed string's text (the first 64 characters).
pub(crate) fn read_string(t: &Target, s: u64) -> Option<String> {
    let len = t.field_u32(s, "String", "m_StringLength").ok()?;
    let n = len.min(MAX_IDENTITY_CHARS) as usize;
    let at = s.wrapping_add(t.offset("String", "m_FirstChar").ok()?);
    let bytes = t.read_bytes(at, n * 2, "string characters").ok()?;
    let units: Vec<u16> = bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
    let mut text = String::from_utf16_lossy(&units);
    if len > MAX_IDENTITY_CHARS {
        text.push('…');
    }
    Some(text)
}

/// The referrer to name a lock by: the application's own types before the framework's, objects
/// before arrays, then by address.
pub(crate) fn best(referrers: &[Referrer]) -> Option<&Referrer> {
    referrers.iter().min_by_key(|r| (r.type_name.starts_with("System."), r.field.starts_with('['), r.address))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels() {
        assert_eq!(plain_name("<Tag>k__BackingField"), "Tag");
        assert_eq!(plain_name("_name"), "name");
        let r = Referrer { type_name: "Autofac.Core.Lifetime.LifetimeScope".into(), field: "_synchRoot".into(), address: 1, identity: Some("Tag \"root\"".into()) };
        let a = Referrer { type_name: "System.Object[]".into(), field: "[3]".into(), address: 0, identity: None };
        assert_eq!(best(&[a.clone(), r.clone()]), Some(&r));
        // Their words (short type, field): report::words's tests.
    }
}
