//! The value of static field F of class C, and the fields of a class, read through the runtime's
//! own structures — never by offsets known in advance:
//! - the class: its TypeDef in the module's metadata by name, then the module's
//!   TypeDef→MethodTable map (Loader contract: `Module.TypeDefToMethodTableMap`, a chain of
//!   `ModuleLookupMap`s whose entries carry `SupportedFlagsMask` bits);
//! - its fields: the EEClass's `FieldDescList` (the class's own instance fields, then its statics:
//!   `NumInstanceFields` less the parent's, plus `NumStaticFields`), named from the metadata's
//!   Field table; the FieldDesc itself is not described by the .NET 10 descriptor, so its layout
//!   (token and flag bits, offset and CorElementType) comes from the per-build facts;
//! - its statics (RuntimeTypeSystem: a MethodTable with `MTFlags2` DynamicStatics has a
//!   `DynamicStaticsInfo` just before its `AuxiliaryData`, whose `GCStatics`/`NonGCStatics`,
//!   masked by the `StaticsPointerMask` global, are the bases a static FieldDesc's offset is
//!   from; .NET 8, before that rework, keeps them in the module's `DomainLocalModule`).
//!   Reference-typed statics and value types that are not primitives (boxed) live in the GC
//!   statics, primitives in the non-GC statics.
//!
//! A value-type field's own fields are reached through its type: the field's signature names a
//! TypeDef of the same module, whose MethodTable the module's map gives. A thread static is read
//! per thread (Thread contract: the `TLSIndex` in the class's `ThreadStaticsInfo`, resolved by the
//! thread's `ThreadLocalData`); RVA statics are named as such and not read. Every count and chain
//! is bounded.

use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::contract::facts::Layout;
use crate::runtimes::dotnet::types::class_counts::{self, Count};
use crate::runtimes::dotnet::types::objects::{self, TypeNamer};
use crate::runtimes::dotnet::contract::target::{Result, Target};
use std::cell::RefCell;
use std::collections::HashMap;

/// `MethodTable.MTFlags2`: the class has a `DynamicStaticsInfo`.
const MT_FLAGS2_DYNAMIC_STATICS: u32 = 0x2;
/// Lookup maps chained per module map at most (a real map has a handful).
const MAX_LOOKUP_MAPS: usize = 256;
/// FieldDescs read per class at most.
const MAX_FIELDS: u64 = 4096;
/// Parent classes followed at most.
const MAX_PARENTS: usize = 32;
/// Value-type fields descended at most in one path (`_separated.counts._data`).
const MAX_PATH: usize = 8;
/// `TLSIndexType` (threadstatics.h): where a thread static's storage is found.
const TLS_NON_COLLECTIBLE: u32 = 0;
const TLS_COLLECTIBLE: u32 = 1;
const TLS_DIRECT: u32 = 2;

/// CorElementType values (ECMA-335 II.23.1.16) a field's FieldDesc carries.
pub(crate) mod element {
    pub(crate) const BOOLEAN: u32 = 0x02;
    pub(crate) const CHAR: u32 = 0x03;
    pub(crate) const I1: u32 = 0x04;
    pub(crate) const U1: u32 = 0x05;
    pub(crate) const I2: u32 = 0x06;
    pub(crate) const U2: u32 = 0x07;
    pub(crate) const I4: u32 = 0x08;
    pub(crate) const U4: u32 = 0x09;
    pub(crate) const I8: u32 = 0x0a;
    pub(crate) const U8: u32 = 0x0b;
    pub(crate) const R4: u32 = 0x0c;
    pub(crate) const R8: u32 = 0x0d;
    pub(crate) const STRING: u32 = 0x0e;
    pub(crate) const PTR: u32 = 0x0f;
    pub(crate) const VALUETYPE: u32 = 0x11;
    pub(crate) const CLASS: u32 = 0x12;
    pub(crate) const VAR: u32 = 0x13;
    pub(crate) const ARRAY: u32 = 0x14;
    pub(crate) const GENERICINST: u32 = 0x15;
    pub(crate) const I: u32 = 0x18;
    pub(crate) const U: u32 = 0x19;
    pub(crate) const FNPTR: u32 = 0x1b;
    pub(crate) const OBJECT: u32 = 0x1c;
    pub(crate) const SZARRAY: u32 = 0x1d;

    /// A field of this type holds an object reference.
    pub(crate) fn is_reference(e: u32) -> bool {
        matches!(e, STRING | CLASS | OBJECT | SZARRAY | ARRAY | GENERICINST | VAR)
    }

    /// Bytes of a primitive field; `None` for references and value types.
    pub(crate) fn primitive_size(e: u32) -> Option<usize> {
        match e {
            BOOLEAN | I1 | U1 => Some(1),
            CHAR | I2 | U2 => Some(2),
            I4 | U4 | R4 => Some(4),
            I8 | U8 | R8 | I | U | PTR | FNPTR => Some(8),
            _ => None,
        }
    }
}

/// Where a field's value lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldKind {
    /// In each object, at `offset` after its MethodTable pointer.
    Instance,
    /// In the class's statics, at `offset` from its GC or non-GC statics base.
    Static,
    /// Per thread (`[ThreadStatic]`): not read.
    ThreadStatic,
    /// In the image (an RVA static): not read.
    Rva,
}

/// One field of a class, from its FieldDesc and the metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field {
    pub(crate) name: String,
    /// The FieldDef row.
    pub(crate) rid: u32,
    /// Where the FieldDesc is.
    pub(crate) field_desc: u64,
    /// The MethodTable of the class that declares it.
    pub(crate) class: u64,
    /// The FieldDesc's offset: after the MethodTable pointer for an instance field (in a value
    /// type, from the start of its data); from the statics base for a static one.
    pub(crate) offset: u64,
    pub(crate) element_type: u32,
    pub(crate) kind: FieldKind,
}

impl Field {
    /// An instance field's offset from the object's start (its MethodTable pointer).
    pub(crate) fn object_offset(&self) -> u64 {
        8 + self.offset
    }

    pub(crate) fn is_reference(&self) -> bool {
        element::is_reference(self.element_type)
    }

    /// Whether the value is in the GC statics (references, and value types: boxed).
    fn in_gc_statics(&self) -> bool {
        self.is_reference() || self.element_type == element::VALUETYPE
    }
}

/// A static field and where its value is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StaticField {
    pub(crate) field: Field,
    /// The address of the value: a reference (a boxed object for a value type) or a primitive's
    /// bytes.
    pub(crate) address: u64,
}

/// Reads classes, fields and statics, caching the classes found by name.
pub(crate) struct Statics<'s, 't, 'm> {
    t: &'s Target<'t>,
    namer: &'s TypeNamer<'t, 'm>,
    l: &'s Layout,
    classes: RefCell<HashMap<(u64, String), Result<u64>>>,
}

impl<'s, 't, 'm> Statics<'s, 't, 'm> {
    pub(crate) fn new(t: &'s Target<'t>, namer: &'s TypeNamer<'t, 'm>, l: &'s Layout) -> Self {
        Statics { t, namer, l, classes: RefCell::new(HashMap::new()) }
    }

    /// The module of `System.Private.CoreLib` (the module of `System.Object`'s MethodTable).
    pub(crate) fn core_lib(&self) -> Result<u64> {
        let object = self.t.global_deref("ObjectMethodTable")?;
        if object == 0 {
            return Err(DotnetError::Invalid { what: "ObjectMethodTable", at: 0, why: "null (the runtime had not started)".into() });
        }
        self.t.field_ptr(object, "MethodTable", "Module")
    }

    /// The MethodTable of the class named `name` (`System.Threading.ThreadPoolWorkQueue+WorkStealingQueue`)
    /// in `module`; an error when the module has no such TypeDef or the runtime never loaded it.
    pub(crate) fn class(&self, module: u64, name: &str) -> Result<u64> {
        let key = (module, name.to_string());
        if let Some(r) = self.classes.borrow().get(&key) {
            return r.clone();
        }
        let r = self.find_class(module, name);
        self.classes.borrow_mut().insert(key, r.clone());
        r
    }

    fn find_class(&self, module: u64, name: &str) -> Result<u64> {
        let md = self.namer.module_metadata(module)?;
        let rid = md
            .type_def_by_name(self.namer.image(), name)?
            .ok_or_else(|| DotnetError::Metadata { at: module, why: format!("no type {name}") })?;
        let mt = self.type_def_method_table(module, rid)?;
        if mt == 0 {
            return Err(DotnetError::Invalid { what: "class", at: module, why: format!("{name} (TypeDef {rid}) was never loaded") });
        }
        Ok(mt)
    }

    /// The loaded MethodTable of TypeDef `rid` of `module` (0 when not loaded).
    pub(crate) fn type_def_method_table(&self, module: u64, rid: u32) -> Result<u64> {
        let map = module.wrapping_add(self.t.offset("Module", "TypeDefToMethodTableMap")?);
        self.lookup(map, rid)
    }

    /// The loaded MethodTables of TypeDefs `1..=rows` of `module` (0 where not loaded), as
    /// [`Self::type_def_method_table`] gives them row by row but in one pass over the map's chain
    /// (row by row, each lookup walked the chain from its head: CoreLib's thousands of rows made
    /// that quadratic). Cut before the first row whose lookup would fail.
    pub(crate) fn type_def_method_tables(&self, module: u64, rows: u32) -> Vec<u64> {
        let t = self.t;
        let mut out = Vec::new();
        let Ok(at) = t.offset("Module", "TypeDefToMethodTableMap") else { return out };
        let rows = u64::from(rows);
        let mut table = module.wrapping_add(at);
        // The chain's first index; index `rid` is row `rid` (row 0 is never asked).
        let mut first = 0u64;
        for _ in 0..MAX_LOOKUP_MAPS {
            let next = out.len() as u64 + 1;
            if next > rows {
                return out;
            }
            if table == 0 {
                out.resize(rows as usize, 0);
                return out;
            }
            let Ok(count) = t.field_u32(table, "ModuleLookupMap", "Count") else { return out };
            let end = first.saturating_add(u64::from(count));
            if next < end {
                let (Ok(data), Ok(mask)) = (t.field_ptr(table, "ModuleLookupMap", "TableData"), t.field_ptr(table, "ModuleLookupMap", "SupportedFlagsMask")) else { return out };
                for rid in next..=end.saturating_sub(1).min(rows) {
                    let Ok(raw) = t.read_ptr(data.wrapping_add((rid - first).wrapping_mul(8)), "ModuleLookupMap entry") else { return out };
                    out.push(raw & !mask);
                }
            }
            first = end;
            let Ok(n) = t.field_ptr(table, "ModuleLookupMap", "Next") else { return out };
            table = n;
        }
        out
    }

    /// Entry `rid` of the lookup map at `map` (Loader contract: `GetModuleLookupMapElement`):
    /// past a map's `Count`, the next map in the chain holds the rest.
    fn lookup(&self, map: u64, rid: u32) -> Result<u64> {
        let t = self.t;
        if rid == 0 {
            return Err(DotnetError::Invalid { what: "module lookup map", at: map, why: "row 0 asked".into() });
        }
        let mut table = map;
        let mut index = rid as u64;
        for _ in 0..MAX_LOOKUP_MAPS {
            if table == 0 {
                return Ok(0);
            }
            let count = t.field_u32(table, "ModuleLookupMap", "Count")? as u64;
            if index < count {
                let data = t.field_ptr(table, "ModuleLookupMap", "TableData")?;
                let mask = t.field_ptr(table, "ModuleLookupMap", "SupportedFlagsMask")?;
                let raw = t.read_ptr(data.wrapping_add(index * 8), "ModuleLookupMap entry")?;
                return Ok(raw & !mask);
            }
            index -= count;
            table = t.field_ptr(table, "ModuleLookupMap", "Next")?;
        }
        Err(DotnetError::TooMany { what: "module lookup maps", at: map, limit: MAX_LOOKUP_MAPS as u64 })
    }

    /// The fields the class `mt` declares (its own instance fields, then its statics); its
    /// parents' are theirs.
    pub(crate) fn own_fields(&self, mt: u64) -> Result<Vec<Field>> {
        self.own_fields_where(mt, |_, _| true)
    }

    /// The fields of [`Self::own_fields`] whose kind and element type `keep` accepts: only
    /// those are named (a name is a metadata read; a class has many fields).
    fn own_fields_where(&self, mt: u64, keep: impl Fn(FieldKind, u32) -> bool) -> Result<Vec<Field>> {
        let t = self.t;
        let l = self.l;
        let class = objects::ee_class(t, mt)?;
        let parent = t.field_ptr(mt, "MethodTable", "ParentMethodTable")?;
        let instance = class_counts::count(t, class, Count::InstanceFields)?;
        let inherited = if parent == 0 { 0 } else { objects::ee_class(t, parent).and_then(|c| class_counts::count(t, c, Count::InstanceFields)).unwrap_or(0) };
        let statics = class_counts::count(t, class, Count::StaticFields)?;
        let own = instance.saturating_sub(inherited) + statics;
        if own > MAX_FIELDS {
            return Err(DotnetError::TooMany { what: "FieldDescs of a class", at: mt, limit: MAX_FIELDS });
        }
        let list = t.field_ptr(class, "EEClass", "FieldDescList")?;
        if list == 0 {
            return Ok(Vec::new());
        }
        let module = t.field_ptr(mt, "MethodTable", "Module")?;
        let md = self.namer.module_metadata(module).ok();
        let mut out = Vec::with_capacity(own as usize);
        for i in 0..own {
            let fd = list.wrapping_add(i * l.field_desc_size);
            let token = t.read_u32(fd.wrapping_add(l.field_desc_token), "FieldDesc token")?;
            let word = t.read_u32(fd.wrapping_add(l.field_desc_offset), "FieldDesc offset")?;
            let rid = token & l.field_desc_token_mask;
            let kind = if token & l.field_desc_static_bit == 0 {
                FieldKind::Instance
            } else if l.field_desc_thread_local_bit.is_some_and(|b| token & b != 0) {
                FieldKind::ThreadStatic
            } else if l.field_desc_rva_bit.is_some_and(|b| token & b != 0) {
                FieldKind::Rva
            } else {
                FieldKind::Static
            };
            let element_type = word >> l.field_desc_type_shift;
            if !keep(kind, element_type) {
                continue;
            }
            let name = md.as_ref().and_then(|md| md.field_name(self.namer.image(), rid).ok()).unwrap_or_else(|| format!("<field {rid:#x}>"));
            out.push(Field {
                name,
                rid,
                field_desc: fd,
                class: mt,
                offset: (word & l.field_desc_offset_mask) as u64,
                element_type,
                kind,
            });
        }
        Ok(out)
    }

    /// Every instance field of `mt`, its parents' included (most derived first).
    pub(crate) fn instance_fields(&self, mt: u64) -> Vec<Field> {
        let mut out = Vec::new();
        let mut at = mt;
        for _ in 0..MAX_PARENTS {
            if at == 0 {
                break;
            }
            if let Ok(fields) = self.own_fields(at) {
                out.extend(fields.into_iter().filter(|f| f.kind == FieldKind::Instance));
            }
            at = self.t.field_ptr(at, "MethodTable", "ParentMethodTable").unwrap_or(0);
        }
        out
    }

    /// The instance field `name` of `mt` or of a parent.
    pub(crate) fn instance_field(&self, mt: u64, name: &str) -> Result<Field> {
        let mut at = mt;
        for _ in 0..MAX_PARENTS {
            if at == 0 {
                break;
            }
            if let Some(f) = self.own_fields(at)?.into_iter().find(|f| f.kind == FieldKind::Instance && f.name == name) {
                return Ok(f);
            }
            at = self.t.field_ptr(at, "MethodTable", "ParentMethodTable")?;
        }
        Err(self.no_field(mt, name))
    }

    fn no_field(&self, mt: u64, name: &str) -> DotnetError {
        let class = self.namer.type_name(mt).unwrap_or_else(|_| format!("MethodTable {mt:#x}"));
        DotnetError::Invalid { what: "field", at: mt, why: format!("{class} has no field {name}") }
    }

    /// The offset from an object's start of `path`, instance fields separated by dots, each but
    /// the last a value-type field (`_separated.counts._data`), and the last field.
    pub(crate) fn instance_path(&self, mt: u64, path: &str) -> Result<(u64, Field)> {
        let parts: Vec<&str> = path.split('.').collect();
        if parts.len() > MAX_PATH {
            return Err(DotnetError::Invalid { what: "field path", at: mt, why: format!("{path}: deeper than {MAX_PATH}") });
        }
        let mut class = mt;
        let mut offset = 8;
        let mut last = None;
        for (i, part) in parts.iter().enumerate() {
            let f = self.instance_field(class, part)?;
            offset += f.offset;
            if i + 1 < parts.len() {
                if f.element_type != element::VALUETYPE {
                    return Err(DotnetError::Invalid { what: "field path", at: mt, why: format!("{path}: {part} is not a value type") });
                }
                class = self.field_type(&f)?;
            }
            last = Some(f);
        }
        last.map(|f| (offset, f)).ok_or_else(|| DotnetError::Invalid { what: "field path", at: mt, why: "empty".into() })
    }

    /// The MethodTable of a value-type field's type, from its signature: a TypeDef of the
    /// declaring class's module (a TypeRef or generic instantiation is not followed).
    pub(crate) fn field_type(&self, f: &Field) -> Result<u64> {
        let module = self.t.field_ptr(f.class, "MethodTable", "Module")?;
        let md = self.namer.module_metadata(module)?;
        let sig = md.field_signature(self.namer.image(), f.rid)?;
        let bad = |why: &str| DotnetError::Metadata { at: module, why: format!("signature of field {}: {why}", f.name) };
        let mut p = sig.iter().copied();
        if p.next() != Some(0x06) {
            return Err(bad("not a field signature"));
        }
        let mut b = p.next().ok_or_else(|| bad("empty"))?;
        // Custom modifiers (CMOD_REQD, CMOD_OPT) each name a type, skipped.
        for _ in 0..16 {
            if b != 0x1f && b != 0x20 {
                break;
            }
            compressed(&mut p).ok_or_else(|| bad("truncated modifier"))?;
            b = p.next().ok_or_else(|| bad("truncated"))?;
        }
        if b as u32 != element::VALUETYPE {
            return Err(bad(&format!("type {b:#x} is not a plain value type")));
        }
        let coded = compressed(&mut p).ok_or_else(|| bad("truncated type token"))?;
        if coded & 3 != 0 {
            return Err(bad("the type is not a TypeDef of its module"));
        }
        let mt = self.type_def_method_table(module, coded >> 2)?;
        if mt == 0 {
            return Err(bad("its type was never loaded"));
        }
        Ok(mt)
    }

    /// The statics base of `mt`: GC (references, boxed value types) or non-GC (primitives).
    pub(crate) fn statics_base(&self, mt: u64, gc: bool) -> Result<u64> {
        if self.t.has_field("Module", "DomainLocalModule") {
            return self.domain_local_statics_base(mt, gc);
        }
        let t = self.t;
        let flags2 = t.field_u32(mt, "MethodTable", "MTFlags2")?;
        if flags2 & MT_FLAGS2_DYNAMIC_STATICS == 0 {
            return Err(DotnetError::Invalid { what: "MethodTable", at: mt, why: "has no statics (no DynamicStatics flag)".into() });
        }
        let aux = t.field_ptr(mt, "MethodTable", "AuxiliaryData")?;
        let info = aux.wrapping_sub(t.size("DynamicStaticsInfo")?);
        let field = if gc { "GCStatics" } else { "NonGCStatics" };
        let raw = t.field_ptr(info, "DynamicStaticsInfo", field)?;
        let mask = t.global("StaticsPointerMask")?;
        let base = raw & mask;
        if base == 0 {
            return Err(DotnetError::StaticsNotInitialized { holder: "DynamicStaticsInfo", at: info, field });
        }
        Ok(base)
    }

    /// The `DomainLocalModule` of the class at `mt`'s module, where .NET 8 keeps the `which`
    /// (statics, thread statics) of a class neither generic nor emitted.
    fn domain_local_module(&self, mt: u64, which: &str) -> Result<u64> {
        let t = self.t;
        let flags = u64::from(t.field_u32(mt, "MethodTable", "MTFlags")?);
        if flags & t.global("MethodTableHasComponentSize")? == 0 && flags & t.global("MethodTableStaticsMask")? != 0 {
            return Err(DotnetError::Invalid { what: "MethodTable", at: mt, why: format!("its {which} are a generic instantiation's or an emitted class's (not read on .NET 8)") });
        }
        let module = t.field_ptr(mt, "MethodTable", "Module")?;
        let local = t.field_ptr(module, "Module", "DomainLocalModule")?;
        if local == 0 {
            return Err(DotnetError::StaticsNotInitialized { holder: "Module", at: module, field: "DomainLocalModule" });
        }
        Ok(local)
    }

    /// .NET 8's statics base of `mt` (before .NET 9 gave each class its own): a class that is
    /// neither generic nor emitted keeps them in its module's `DomainLocalModule` — the GC
    /// statics from `GCStatics` (slots of an array the module's loader allocator holds), the
    /// others from the `DomainLocalModule` itself (a FieldDesc's offset counts the class-init
    /// bytes at `DataBlob`). A class with a static constructor that never ran has none yet.
    fn domain_local_statics_base(&self, mt: u64, gc: bool) -> Result<u64> {
        let t = self.t;
        let local = self.domain_local_module(mt, "statics")?;
        if u64::from(t.field_u32(mt, "MethodTable", "MTFlags2")?) & t.global("MethodTableHasCctor")? != 0 {
            let rid = objects::type_def_rid(t, mt)?;
            let Some(index) = u64::from(rid).checked_sub(1) else {
                return Err(DotnetError::Invalid { what: "MethodTable", at: mt, why: "TypeDef row 0".into() });
            };
            let init = t.read_u8(local.wrapping_add(t.offset("DomainLocalModule", "DataBlob")?).wrapping_add(index), "class-init byte")?;
            if u64::from(init) & t.global("ClassInitialized")? == 0 {
                return Err(DotnetError::StaticsNotInitialized { holder: "DomainLocalModule", at: local, field: "the class's statics (its static constructor never ran)" });
            }
        }
        if !gc {
            return Ok(local);
        }
        let base = t.field_ptr(local, "DomainLocalModule", "GCStatics")?;
        if base == 0 {
            return Err(DotnetError::StaticsNotInitialized { holder: "DomainLocalModule", at: local, field: "GCStatics" });
        }
        Ok(base)
    }

    /// The static field `name` of `mt` and where its value is.
    pub(crate) fn static_field(&self, mt: u64, name: &str) -> Result<StaticField> {
        let field = self.own_fields(mt)?.into_iter().find(|f| f.kind != FieldKind::Instance && f.name == name).ok_or_else(|| self.no_field(mt, name))?;
        self.locate(field)
    }

    /// Every static field `mt` declares that has a readable value (thread and RVA statics are
    /// left out), with where its value is; a class whose statics were never allocated has none.
    #[cfg(test)] // The heap's static-slot names read only the reference ones (`reference_static_fields`).
    pub(crate) fn static_fields(&self, mt: u64) -> Result<Vec<StaticField>> {
        let fields = self.own_fields(mt)?;
        Ok(fields.into_iter().filter(|f| f.kind == FieldKind::Static).filter_map(|f| self.locate(f).ok()).collect())
    }

    /// The reference statics among the readable static fields `mt` declares, with where each
    /// value is (thread and RVA statics left out; none, and no name read, when the class
    /// declares no statics or its statics were never allocated).
    pub(crate) fn reference_static_fields(&self, mt: u64) -> Result<Vec<StaticField>> {
        let class = objects::ee_class(self.t, mt)?;
        if class_counts::count(self.t, class, Count::StaticFields)? == 0 {
            return Ok(Vec::new());
        }
        let fields = self.own_fields_where(mt, |kind, element_type| kind == FieldKind::Static && element::is_reference(element_type))?;
        Ok(fields.into_iter().filter_map(|f| self.locate(f).ok()).collect())
    }

    fn locate(&self, field: Field) -> Result<StaticField> {
        match field.kind {
            FieldKind::Static => {}
            FieldKind::ThreadStatic => return Err(DotnetError::Invalid { what: "static field", at: field.field_desc, why: format!("{} is a thread static (not read)", field.name) }),
            FieldKind::Rva => return Err(DotnetError::Invalid { what: "static field", at: field.field_desc, why: format!("{} is an RVA static (not read)", field.name) }),
            FieldKind::Instance => return Err(DotnetError::Invalid { what: "static field", at: field.field_desc, why: format!("{} is an instance field", field.name) }),
        }
        let base = self.statics_base(field.class, field.in_gc_statics())?;
        Ok(StaticField { address: base.wrapping_add(field.offset), field })
    }

    /// The thread static `name` of `mt` on the runtime thread at `thread` (a `Thread*`), and
    /// where its value is: the class's `ThreadStaticsInfo` (just before its `AuxiliaryData`) holds
    /// the field's `TLSIndex`, which the thread's `ThreadLocalData` resolves (Thread contract
    /// `GetThreadLocalStaticBase`: the non-collectible or collectible TLS array, or the
    /// `ThreadLocalData` itself). An error when the thread never set it.
    pub(crate) fn thread_static_field(&self, mt: u64, name: &str, thread: u64) -> Result<StaticField> {
        let t = self.t;
        let field = self.own_fields(mt)?.into_iter().find(|f| f.kind == FieldKind::ThreadStatic && f.name == name).ok_or_else(|| self.no_field(mt, name))?;
        if t.has_field("Thread", "ThreadLocalBlock") {
            let base = self.thread_local_module_statics_base(mt, thread, field.in_gc_statics())?;
            return Ok(StaticField { address: base.wrapping_add(field.offset), field });
        }
        let aux = t.field_ptr(mt, "MethodTable", "AuxiliaryData")?;
        let info = aux.wrapping_sub(t.size("ThreadStaticsInfo")?);
        let index_at = info.wrapping_add(t.offset("ThreadStaticsInfo", if field.in_gc_statics() { "GCTlsIndex" } else { "NonGCTlsIndex" })?);
        let base = self.thread_local_base(thread, index_at)?;
        Ok(StaticField { address: base.wrapping_add(field.offset), field })
    }

    /// .NET 8's thread statics base of `mt` on `thread` (before .NET 9's TLS indexes): the
    /// thread's `ThreadLocalBlock` holds a table of `ThreadLocalModule`s by module index (the
    /// module's `DomainLocalModule.ModuleIndex`); a class neither generic nor emitted keeps its GC
    /// thread statics in the object array that its `ThreadLocalModule`'s `GCStatics` handle
    /// holds. Non-GC thread statics (in the `ThreadLocalModule` itself) are not read.
    fn thread_local_module_statics_base(&self, mt: u64, thread: u64, gc: bool) -> Result<u64> {
        let t = self.t;
        let unset = |why: &str| DotnetError::Invalid { what: "thread static", at: thread, why: why.into() };
        if !gc {
            return Err(unset("a non-GC thread static (not read on .NET 8)"));
        }
        let local = self.domain_local_module(mt, "thread statics")?;
        let index = t.field_ptr(local, "DomainLocalModule", "ModuleIndex")?;
        let block = thread.wrapping_add(t.offset("Thread", "ThreadLocalBlock")?);
        let size = t.field_ptr(block, "ThreadLocalBlock", "TLMTableSize")?;
        if index >= size {
            return Err(unset("not set on this thread (its module has no ThreadLocalModule there)"));
        }
        let table = t.field_ptr(block, "ThreadLocalBlock", "TLMTable")?;
        let entry = table.wrapping_add(index.wrapping_mul(t.size("TLMTableEntry")?));
        let tlm = t.field_ptr(entry, "TLMTableEntry", "ThreadLocalModule")?;
        if tlm == 0 {
            return Err(unset("not set on this thread (no ThreadLocalModule)"));
        }
        let handle = t.field_ptr(tlm, "ThreadLocalModule", "GCStatics")?;
        let array = if handle == 0 { 0 } else { t.read_ptr(handle, "ThreadLocalModule GC statics handle")? };
        if array == 0 {
            return Err(unset("not set on this thread (no GC thread statics)"));
        }
        Ok(array.wrapping_add(t.global("PtrArrayOffsetToDataArray")?))
    }

    fn thread_local_base(&self, thread: u64, index_at: u64) -> Result<u64> {
        let t = self.t;
        let raw = t.read_u32(index_at.wrapping_add(t.offset("TLSIndex", "TLSIndexRawIndex")?), "TLSIndex")?;
        let unset = |why: &str| DotnetError::Invalid { what: "thread static", at: thread, why: why.into() };
        if raw == u32::MAX {
            return Err(unset("its TLS index was never allocated"));
        }
        let (offset, kind) = ((raw & 0x00ff_ffff) as u64, raw >> 24);
        let data = t.field_ptr(thread, "Thread", "ThreadLocalDataPtr")?;
        if data == 0 {
            return Err(unset("the thread has no thread-local data"));
        }
        let base = match kind {
            TLS_NON_COLLECTIBLE => {
                let count = t.field_u32(data, "ThreadLocalData", "NonCollectibleTlsDataCount")? as u64;
                if offset >= count {
                    return Err(unset("not set on this thread"));
                }
                let unused = t.global("NumberOfTlsOffsetsNotUsedInNoncollectibleArray")?;
                let index = offset.checked_sub(unused).ok_or_else(|| unset("TLS index below the array's first used slot"))?;
                let array = t.field_ptr(data, "ThreadLocalData", "NonCollectibleTlsArrayData")?;
                let start = array.wrapping_add(t.global("PtrArrayOffsetToDataArray")?);
                t.read_ptr(start.wrapping_add(index * 8), "non-collectible TLS array slot")?
            }
            TLS_COLLECTIBLE => {
                let count = t.field_u32(data, "ThreadLocalData", "CollectibleTlsDataCount")? as u64;
                if offset >= count {
                    return Err(unset("not set on this thread"));
                }
                let array = t.field_ptr(data, "ThreadLocalData", "CollectibleTlsArrayData")?;
                let handle = t.read_ptr(array.wrapping_add(offset * 8), "collectible TLS array slot")?;
                if handle == 0 { 0 } else { t.read_ptr(handle, "collectible TLS handle")? }
            }
            TLS_DIRECT => data.wrapping_add(offset),
            k => return Err(unset(&format!("TLS index type {k} unknown"))),
        };
        if base == 0 {
            return Err(unset("not set on this thread"));
        }
        Ok(base)
    }

    /// The object a reference-typed static (or the box of a value-type static) holds; 0 for null.
    pub(crate) fn static_object(&self, mt: u64, name: &str) -> Result<u64> {
        let s = self.static_field(mt, name)?;
        if !s.field.in_gc_statics() {
            return Err(DotnetError::Invalid { what: "static field", at: s.field.field_desc, why: format!("{name} holds no reference") });
        }
        self.t.read_ptr(s.address, &format!("static {name}"))
    }

    /// The value of a primitive static, zero-extended (sign is the caller's).
    #[cfg_attr(not(test), expect(dead_code, reason = "only its test reads it so far; `expect` warns once a reader uses it"))]
    pub(crate) fn static_primitive(&self, mt: u64, name: &str) -> Result<u64> {
        let s = self.static_field(mt, name)?;
        let size = element::primitive_size(s.field.element_type)
            .ok_or_else(|| DotnetError::Invalid { what: "static field", at: s.field.field_desc, why: format!("{name} is not a primitive") })?;
        read_uint(self.t, s.address, size, name)
    }

    /// The reference in the instance field `path` of the object at `object`.
    pub(crate) fn object_field(&self, object: u64, path: &str) -> Result<u64> {
        let mt = objects::method_table(self.t, object)?;
        let (offset, f) = self.instance_path(mt, path)?;
        if !f.is_reference() {
            return Err(DotnetError::Invalid { what: "field", at: object, why: format!("{path} holds no reference") });
        }
        self.t.read_ptr(object.wrapping_add(offset), &format!("field {path} of {object:#x}"))
    }

    /// The value of the primitive instance field `path` of the object at `object`, zero-extended.
    pub(crate) fn object_primitive(&self, object: u64, path: &str) -> Result<u64> {
        let mt = objects::method_table(self.t, object)?;
        let (offset, f) = self.instance_path(mt, path)?;
        let size = element::primitive_size(f.element_type)
            .ok_or_else(|| DotnetError::Invalid { what: "field", at: object, why: format!("{path} is not a primitive") })?;
        read_uint(self.t, object.wrapping_add(offset), size, path)
    }

    pub(crate) fn target(&self) -> &'s Target<'t> {
        self.t
    }

    pub(crate) fn namer(&self) -> &'s TypeNamer<'t, 'm> {
        self.namer
    }
}

fn read_uint(t: &Target, at: u64, size: usize, what: &str) -> Result<u64> {
    let b = t.read_bytes(at, size, what)?;
    let mut v = [0u8; 8];
    v[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
    Ok(u64::from_le_bytes(v))
}

/// An ECMA-335 compressed unsigned integer (II.23.2).
fn compressed(p: &mut impl Iterator<Item = u8>) -> Option<u32> {
    let b = p.next()? as u32;
    if b & 0x80 == 0 {
        Some(b)
    } else if b & 0xc0 == 0x80 {
        Some(((b & 0x3f) << 8) | p.next()? as u32)
    } else if b & 0xe0 == 0xc0 {
        let (b1, b2, b3) = (p.next()? as u32, p.next()? as u32, p.next()? as u32);
        Some(((b & 0x1f) << 24) | (b1 << 16) | (b2 << 8) | b3)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::process::{Locator, Process};
    use crate::runtimes::dotnet::contract::context::Context;
    use crate::runtimes::dotnet::{contract::facts, tasks::thread_pool};

    /// Statics over the committed pool_queue dump (its sample's `Program` has the statics `Gate`,
    /// `Started`, `LocalQueued`, `Blocking`; worker 0's local queue holds `LedgerFlush` 0..4).
    fn with_pool_queue(f: impl FnOnce(&Statics)) {
        let d = knot_samples::dotnet::dumps("sos/threadpool-stat.txt", false).into_iter().find(|d| d.sample == "pool_queue").expect("the committed pool_queue dump");
        let locator = Locator { sysroot: d.sysroot.clone(), search_dirs: d.search_dirs.clone(), ..Locator::default() };
        let process = Process::open(&d.core, &locator).expect("open the core");
        let c = Context::open(&process, &locator).unwrap_or_else(|_| panic!("no runtime"));
        let v = &c.version;
        let build = facts::lookup(facts::builtin().expect("facts"), v.build_id.as_deref(), &v.product, v.file_version.as_deref()).expect("10.0.12 facts");
        let t = c.target();
        let namer = TypeNamer::new(&t, &c.image);
        f(&Statics::new(&t, &namer, &build.layout));
    }

    impl Statics<'_, '_, '_> {
        /// The module of the pool_queue sample's class `name`.
        fn class_module(&self, name: &str) -> u64 {
            let q = thread_pool::queues(self).expect("queues");
            let flush = q.items.iter().find(|i| matches!(i.queue, thread_pool::Queue::Local(_))).expect("a local item").object;
            let mt = objects::method_table(self.target(), flush).expect("MT");
            let module = self.target().field_ptr(mt, "MethodTable", "Module").expect("module");
            self.class(module, name).expect(name);
            module
        }
    }

    #[test]
    fn a_programs_own_statics_and_fields_read_through_the_runtime() {
        with_pool_queue(|s| {
            let q = thread_pool::queues(s).expect("queues");
            let flushes: Vec<u64> = q.items.iter().filter(|i| matches!(i.queue, thread_pool::Queue::Local(_))).map(|i| i.object).collect();
            assert_eq!(flushes.len(), 5);
            let mt = objects::method_table(s.target(), flushes[0]).expect("MT");
            assert_eq!(s.namer().type_name(mt).expect("name"), "Knot.Samples.PoolQueue.LedgerFlush");
            let mut shards: Vec<u64> = flushes.iter().map(|&o| s.object_primitive(o, "Shard").expect("Shard")).collect();
            shards.sort();
            assert_eq!(shards, [0, 1, 2, 3, 4]);
            let module = s.target().field_ptr(mt, "MethodTable", "Module").expect("module");
            let program = s.class(module, "Knot.Samples.PoolQueue.Program").expect("Program");
            let type_of = |name: &str| {
                let o = s.static_object(program, name).expect(name);
                s.namer().object_type_name(o).expect("type")
            };
            assert_eq!(type_of("Gate"), "System.Threading.ManualResetEventSlim");
            assert_eq!(type_of("Started"), "System.Threading.CountdownEvent");
            let mut names: Vec<String> = s.static_fields(program).expect("statics").into_iter().map(|f| f.field.name).collect();
            names.sort();
            assert_eq!(names, ["Blocking", "Gate", "LocalQueued", "Started"]);
            // The CountdownEvent's count reached 0 (all 4 workers signalled): a primitive instance field.
            let started = s.static_object(program, "Started").expect("Started");
            assert_eq!(s.object_primitive(started, "_currentCount").expect("_currentCount"), 0);
            let e = s.static_field(program, "NoSuchField").expect_err("no such field");
            assert!(e.to_string().contains("Knot.Samples.PoolQueue.Program has no field NoSuchField"), "{e}");
            assert!(s.static_primitive(program, "Gate").is_err(), "a reference is no primitive");
            assert!(s.class(module, "Knot.Samples.PoolQueue.Nowhere").is_err());
        });
    }

    /// The one-pass reading of a module's TypeDef map gives what the row-by-row lookup gives,
    /// for CoreLib (thousands of rows, a chain of maps) and the program's own module; and the
    /// reference statics are the reference ones of all the statics.
    #[test]
    fn a_modules_type_defs_read_in_one_pass_are_the_rows_read_one_by_one() {
        use crate::runtimes::dotnet::types::metadata::TYPE_DEF;
        with_pool_queue(|s| {
            let core = s.core_lib().expect("CoreLib");
            let program = s.class_module("Knot.Samples.PoolQueue.Program");
            for module in [core, program] {
                let rows = s.namer().module_metadata(module).expect("metadata").rows(TYPE_DEF);
                let one_by_one: Vec<u64> = (1..=rows).map_while(|rid| s.type_def_method_table(module, rid).ok()).collect();
                assert!(one_by_one.iter().filter(|&&mt| mt != 0).count() > 1, "some classes loaded in {module:#x}");
                assert_eq!(s.type_def_method_tables(module, rows), one_by_one, "module {module:#x}");
                assert_eq!(s.type_def_method_tables(module, 3), one_by_one[..3], "the first rows only");
                for &mt in one_by_one.iter().filter(|&&mt| mt != 0) {
                    let all: Vec<StaticField> = s.static_fields(mt).map(|f| f.into_iter().filter(|f| f.field.is_reference()).collect()).unwrap_or_default();
                    assert_eq!(s.reference_static_fields(mt).unwrap_or_default(), all, "class {mt:#x}");
                }
            }
        });
    }

    #[test]
    fn compressed_integers_decode_as_ecma_335_says() {
        for (bytes, want) in [(&[0x03u8][..], Some(3)), (&[0x7f], Some(0x7f)), (&[0x80, 0x80], Some(0x80)), (&[0xbf, 0xff], Some(0x3fff)), (&[0xc0, 0x00, 0x40, 0x00], Some(0x4000)), (&[0xdf, 0xff, 0xff, 0xff], Some(0x1fff_ffff)), (&[0xff], None), (&[0x80], None), (&[], None)] {
            assert_eq!(compressed(&mut bytes.iter().copied()), want, "{bytes:x?}");
        }
    }

    #[test]
    fn element_types_say_where_the_value_is() {
        assert!(element::is_reference(element::CLASS) && element::is_reference(element::SZARRAY) && element::is_reference(element::GENERICINST));
        assert!(!element::is_reference(element::VALUETYPE) && !element::is_reference(element::I4));
        assert_eq!(element::primitive_size(element::U2), Some(2));
        assert_eq!(element::primitive_size(element::I8), Some(8));
        assert_eq!(element::primitive_size(element::CLASS), None);
        let f = |e| Field { name: "f".into(), rid: 1, field_desc: 0, class: 0, offset: 0x10, element_type: e, kind: FieldKind::Static };
        assert!(f(element::VALUETYPE).in_gc_statics() && f(element::OBJECT).in_gc_statics() && !f(element::I4).in_gc_statics());
        assert_eq!(f(element::I4).object_offset(), 0x18);
    }
}
