//! Managed objects: an object's MethodTable (Object contract: `Object.m_pMethTab` with the
//! `ObjectToMethodTableUnmask` bits cleared), the type name SOS prints for it (RuntimeTypeSystem
//! contract: `MethodTable.MTFlags`/`MTFlags2`/`Module`/`EEClassOrCanonMT`/`PerInstInfo`,
//! `EEClass.MethodTable`, `ArrayClass.Rank`, `GenericsDictInfo`, `TypeDesc.TypeAndFlags`,
//! `ParamTypeDesc.TypeArg`; the TypeDef name from the module's ECMA-335 metadata), and the
//! object header's sync block value (the u32 `SyncBlockValueToObjectOffset` bytes before the
//! object).

use crate::runtimes::dotnet::contract::context::Context;
use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::contract::facts::Layout;
use crate::runtimes::dotnet::types::metadata::{self, Metadata};
use crate::runtimes::dotnet::contract::target::{Result, Target};
use crate::process::Memory;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

const CATEGORY_ARRAY_MASK: u32 = 0x000C_0000;
const CATEGORY_ARRAY: u32 = 0x0008_0000;
const CATEGORY_IF_ARRAY_THEN_SZARRAY: u32 = 0x0002_0000;
const HAS_COMPONENT_SIZE: u32 = 0x8000_0000;
const GENERICS_MASK: u32 = 0x30;
const GENERICS_TYPICAL: u32 = 0x30;
const TYPE_HANDLE_TYPE_DESC: u64 = 2;
const MAX_NAME_DEPTH: u32 = 8;
const MAX_TYPE_ARGS: u16 = 64;

/// What an object header's sync block value says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Header {
    /// No lock, hash code or sync block.
    Empty,
    /// A thin lock: owner's managed thread id, and recursion level (0 = held once).
    ThinLock { owner_id: u32, recursion_level: u32 },
    HashCode(u32),
    SyncBlock(u32),
}

pub(crate) fn decode_header(value: u32, l: &Layout) -> Header {
    if value & l.header_is_hash_or_sync_block_index != 0 {
        if value & l.header_is_hash_code != 0 {
            Header::HashCode(value & (l.header_is_hash_code - 1))
        } else {
            Header::SyncBlock(value & l.header_sync_block_index_mask)
        }
    } else {
        let owner_id = value & l.header_thin_lock_thread_id_mask;
        if owner_id == 0 {
            Header::Empty
        } else {
            Header::ThinLock { owner_id, recursion_level: (value & l.header_thin_lock_recursion_mask) >> l.header_thin_lock_recursion_shift }
        }
    }
}

/// The object header's sync block value.
pub(crate) fn header_value(t: &Target, object: u64) -> Result<u32> {
    let off = header_offset(t)?;
    t.mem.read_u32(object.wrapping_sub(off)).map_err(|e| DotnetError::memory(format!("object header of {object:#x}"), e))
}

/// How far before an object its header word is (the descriptor's `SyncBlockValueToObjectOffset`):
/// read once for a scan of many candidate objects.
pub(crate) fn header_offset(t: &Target) -> Result<u64> {
    t.global("SyncBlockValueToObjectOffset")
}

/// [`header_value`] with the offset read ahead and no error made: the thin-lock scans of every
/// word of every managed stack meet a thousand words whose header is in no saved memory (on a
/// 26-thread dump) and drop the error, whose words cost more than the read.
pub(crate) fn header_value_at(t: &Target, header_offset: u64, object: u64) -> Option<u32> {
    t.mem.read_u32(object.wrapping_sub(header_offset)).ok()
}

pub(crate) fn method_table(t: &Target, object: u64) -> Result<u64> {
    let raw = t.field_ptr(object, "Object", "m_pMethTab")?;
    let unmask = t.global("ObjectToMethodTableUnmask").unwrap_or(0);
    Ok(raw & !unmask)
}

/// The EEClass of a MethodTable (directly, or through its canonical MethodTable).
pub(crate) fn ee_class(t: &Target, mt: u64) -> Result<u64> {
    let v = t.field_ptr(mt, "MethodTable", "EEClassOrCanonMT")?;
    if v & 1 == 0 {
        return Ok(v);
    }
    let canon = v & !1;
    let c = t.field_ptr(canon, "MethodTable", "EEClassOrCanonMT")?;
    if c & 1 != 0 {
        return Err(DotnetError::Invalid { what: "MethodTable", at: mt, why: format!("canonical MethodTable {canon:#x} is not canonical") });
    }
    Ok(c)
}

/// Whether `mt` looks like a real MethodTable: its EEClass points back at it or at its
/// canonical MethodTable. Used to accept a stack word as an object reference.
pub(crate) fn is_plausible_method_table(t: &Target, mt: u64) -> bool {
    if mt == 0 || mt & 7 != 0 {
        return false;
    }
    let Ok(v) = t.field_ptr(mt, "MethodTable", "EEClassOrCanonMT") else { return false };
    let canon = if v & 1 == 0 { mt } else { v & !1 };
    let Ok(class) = ee_class(t, mt) else { return false };
    if class == 0 || class & 7 != 0 {
        return false;
    }
    t.field_ptr(class, "EEClass", "MethodTable").is_ok_and(|back| back == canon)
}

/// The type names one runtime's namers made, shared by all of them ([`TypeNamer::of`]): the
/// heap's statistics, its holders, the monitors and every managed frame's name ask for the same
/// few hundred types, each through a namer of its own. A name depends only on the dump and the
/// images, the same for every namer of the runtime.
/// The names as SOS's heap commands print them are kept too (`TypeNamer::heap_type_name`).
#[derive(Default)]
pub(crate) struct SharedNames {
    dac: std::sync::Mutex<HashMap<u64, String>>,
    heap: std::sync::Mutex<HashMap<u64, String>>,
    /// Each module's metadata, opened once for all the namers (or why it cannot be).
    metadata: std::sync::Mutex<HashMap<u64, std::result::Result<Arc<Metadata>, DotnetError>>>,
}

fn shared_get(names: &std::sync::Mutex<HashMap<u64, String>>, th: u64) -> Option<String> {
    names.lock().ok()?.get(&th).cloned()
}

fn shared_insert(names: &std::sync::Mutex<HashMap<u64, String>>, th: u64, name: &str) {
    if let Ok(mut names) = names.lock() {
        names.entry(th).or_insert_with(|| name.to_string());
    }
}

/// Names types as SOS prints them, caching modules' metadata.
/// A [`TypeNamer`]'s target, image and shared names, which threads share: each thread's namer
/// made from it has caches of its own, and each name and module's metadata is still read once,
/// by whichever thread asks first, when the names are shared.
#[derive(Clone, Copy)]
pub(crate) struct NamerSource<'t, 'm> {
    t: &'t Target<'t>,
    image: &'m dyn Memory,
    shared: Option<&'m SharedNames>,
}

impl<'t, 'm> NamerSource<'t, 'm> {
    pub(crate) fn namer(self) -> TypeNamer<'t, 'm> {
        TypeNamer { shared: self.shared, ..TypeNamer::new(self.t, self.image) }
    }
}

pub(crate) struct TypeNamer<'t, 'm> {
    t: &'t Target<'t>,
    /// Memory for images' metadata (dump, then the mapped files).
    image: &'m dyn Memory,
    /// The runtime's names, when `t` and `image` are its own views.
    shared: Option<&'m SharedNames>,
    /// Shared, not copied, with the readers that name fields (a `Metadata` holds 45 column-width
    /// lists: cloning one per class was a tenth of a .NET run).
    modules: RefCell<HashMap<u64, std::result::Result<Arc<Metadata>, DotnetError>>>,
    names: RefCell<HashMap<u64, String>>,
}

impl<'t, 'm> TypeNamer<'t, 'm> {
    pub(crate) fn new(t: &'t Target<'t>, image: &'m dyn Memory) -> Self {
        TypeNamer { t, image, shared: None, modules: RefCell::new(HashMap::new()), names: RefCell::new(HashMap::new()) }
    }

    /// A namer over `runtime`'s views that shares the names made with the runtime's other
    /// namers. `t` is `runtime.target()`.
    pub(crate) fn of(t: &'t Target<'t>, runtime: &'m Context<'_>) -> Self {
        debug_assert!(std::ptr::addr_eq(t.mem, &runtime.memory), "a runtime's namer reads through the runtime's memory");
        TypeNamer { shared: Some(&runtime.names), ..TypeNamer::new(t, &runtime.image) }
    }

    /// The type name of the object at `object`.
    /// What makes namers like this one on other threads (see [`NamerSource`]).
    pub(crate) fn source(&self) -> NamerSource<'t, 'm> {
        NamerSource { t: self.t, image: self.image, shared: self.shared }
    }

    pub(crate) fn object_type_name(&self, object: u64) -> Result<String> {
        let mt = method_table(self.t, object)?;
        self.type_name(mt)
    }

    /// The name of a TypeHandle (a MethodTable, or a TypeDesc when bit 1 is set).
    pub(crate) fn type_name(&self, th: u64) -> Result<String> {
        self.name(th, 0)
    }

    /// [`Self::type_name`] as SOS's heap commands print it (`gc::names::sos_heap_name`), made
    /// once per runtime: the heap's statistics and its holders both name every type.
    pub(crate) fn heap_type_name(&self, th: u64) -> Result<String> {
        if let Some(n) = self.shared.and_then(|s| shared_get(&s.heap, th)) {
            return Ok(n);
        }
        let n = crate::runtimes::dotnet::gc::names::sos_heap_name(&self.type_name(th)?);
        if let Some(s) = self.shared {
            shared_insert(&s.heap, th, &n);
        }
        Ok(n)
    }

    fn name(&self, th: u64, depth: u32) -> Result<String> {
        if depth > MAX_NAME_DEPTH {
            return Err(DotnetError::Invalid { what: "type name", at: th, why: "nested deeper than 8 levels".into() });
        }
        if let Some(n) = self.names.borrow().get(&th) {
            return Ok(n.clone());
        }
        if let Some(n) = self.shared.and_then(|s| shared_get(&s.dac, th)) {
            self.names.borrow_mut().insert(th, n.clone());
            return Ok(n);
        }
        let n = if th & TYPE_HANDLE_TYPE_DESC != 0 { self.type_desc_name(th & !3, depth)? } else { self.method_table_name(th, depth)? };
        if let Some(s) = self.shared {
            shared_insert(&s.dac, th, &n);
        }
        self.names.borrow_mut().insert(th, n.clone());
        Ok(n)
    }

    fn type_desc_name(&self, td: u64, depth: u32) -> Result<String> {
        let t = self.t;
        let kind = t.field_u32(td, "TypeDesc", "TypeAndFlags")? & 0xff;
        let arg = || t.field_ptr(td, "ParamTypeDesc", "TypeArg");
        Ok(match kind {
            0x0f => format!("{}*", self.name(arg()?, depth + 1)?),
            0x10 => format!("{}&", self.name(arg()?, depth + 1)?),
            0x13 | 0x1e => {
                // A generic variable: its name is in the GenericParam table; SOS prints it as is.
                "T".to_string()
            }
            0x1b => "(fnptr)".to_string(),
            k => format!("(type desc {k:#x})"),
        })
    }

    fn method_table_name(&self, mt: u64, depth: u32) -> Result<String> {
        let t = self.t;
        let flags = t.field_u32(mt, "MethodTable", "MTFlags")?;
        if flags & CATEGORY_ARRAY_MASK == CATEGORY_ARRAY {
            let elem = t.field_ptr(mt, "MethodTable", "PerInstInfo")?;
            let elem_name = self.name(elem, depth + 1)?;
            let rank = if flags & CATEGORY_IF_ARRAY_THEN_SZARRAY != 0 {
                None
            } else {
                let class = ee_class(t, mt)?;
                Some(t.read_u8(class.wrapping_add(t.offset("ArrayClass", "Rank")?), "ArrayClass.Rank")?)
            };
            return Ok(match rank {
                None => format!("{elem_name}[]"),
                Some(1) => format!("{elem_name}[*]"),
                Some(r) => format!("{elem_name}[{}]", ",".repeat(r.saturating_sub(1) as usize)),
            });
        }
        let rid = type_def_rid(t, mt)?;
        let module = t.field_ptr(mt, "MethodTable", "Module")?;
        let base = self.with_metadata(module, |md| md.type_def_full_name(self.image, rid))?;
        let has_instantiation = flags & HAS_COMPONENT_SIZE == 0 && flags & GENERICS_MASK != 0;
        if !has_instantiation || flags & GENERICS_MASK == GENERICS_TYPICAL {
            return Ok(base);
        }
        let args = self.instantiation(mt)?;
        Ok(base + &self.instantiation_text(&args, depth)?)
    }

    /// A TypeHandle as the runtime's signature formatter prints it in a method's parameter list
    /// (`SigFormat::AddType`, which SOS's `clrstack` shows): a class or struct by its TypeDef's
    /// own namespace and name — a nested type has no namespace, so just its name
    /// (`<ActivateAsync>d__162`, not `Outer+<ActivateAsync>d__162`) — and its type arguments the
    /// same way as `<A,B>`; primitives by their bare names (`Int32`); arrays `[]`/`[,]`; `*` and
    /// ` ByRef`. No assembly names.
    pub(crate) fn signature_type_name(&self, th: u64) -> Result<String> {
        self.signature_name(th, 0)
    }

    fn signature_name(&self, th: u64, depth: u32) -> Result<String> {
        if depth > MAX_NAME_DEPTH {
            return Err(DotnetError::Invalid { what: "type name", at: th, why: "nested deeper than 8 levels".into() });
        }
        let t = self.t;
        if th & TYPE_HANDLE_TYPE_DESC != 0 {
            let td = th & !3;
            let kind = t.field_u32(td, "TypeDesc", "TypeAndFlags")? & 0xff;
            let arg = || t.field_ptr(td, "ParamTypeDesc", "TypeArg");
            return match kind {
                0x0f => Ok(format!("{}*", self.signature_name(arg()?, depth + 1)?)),
                0x10 => Ok(format!("{} ByRef", self.signature_name(arg()?, depth + 1)?)),
                _ => self.name(th, depth),
            };
        }
        let flags = t.field_u32(th, "MethodTable", "MTFlags")?;
        if flags & CATEGORY_ARRAY_MASK == CATEGORY_ARRAY {
            let elem = self.signature_name(t.field_ptr(th, "MethodTable", "PerInstInfo")?, depth + 1)?;
            if flags & CATEGORY_IF_ARRAY_THEN_SZARRAY != 0 {
                return Ok(format!("{elem}[]"));
            }
            let class = ee_class(t, th)?;
            let rank = t.read_u8(class.wrapping_add(t.offset("ArrayClass", "Rank")?), "ArrayClass.Rank")?;
            return Ok(format!("{elem}[{}]", ",".repeat(rank.saturating_sub(1) as usize)));
        }
        let own = self.signature_own_name(th)?;
        if let Some(short) = signature_primitive_name(&own) {
            return Ok(short.to_string());
        }
        let has_instantiation = flags & HAS_COMPONENT_SIZE == 0 && flags & GENERICS_MASK != 0 && flags & GENERICS_MASK != GENERICS_TYPICAL;
        if !has_instantiation {
            return Ok(own);
        }
        let args = self.instantiation(th)?.iter().map(|&a| self.signature_name(a, depth + 1)).collect::<Result<Vec<_>>>()?;
        Ok(format!("{own}<{}>", args.join(",")))
    }

    /// A MethodTable's TypeDef name as a signature's `ELEMENT_TYPE_INTERNAL` prints it
    /// (`SigFormat::AddTypeString`): its own namespace and name, no type arguments.
    pub(crate) fn signature_own_name(&self, mt: u64) -> Result<String> {
        let t = self.t;
        if t.field_u32(mt, "MethodTable", "MTFlags")? & CATEGORY_ARRAY_MASK == CATEGORY_ARRAY {
            return self.type_name(mt);
        }
        let rid = type_def_rid(t, mt)?;
        let module = t.field_ptr(mt, "MethodTable", "Module")?;
        let (ns, name) = self.with_metadata(module, |md| md.type_def_name(self.image, rid))?;
        Ok(if ns.is_empty() { name } else { format!("{ns}.{name}") })
    }

    /// Type arguments as SOS prints them after a generic type's or method's name:
    /// `[[System.Int32, System.Private.CoreLib],[T]]`.
    pub(crate) fn instantiation_suffix(&self, args: &[u64]) -> Result<String> {
        self.instantiation_text(args, 0)
    }

    fn instantiation_text(&self, args: &[u64], depth: u32) -> Result<String> {
        let mut out = String::from("[");
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let name = self.name(*a, depth + 1)?;
            match self.assembly_of(*a) {
                Some(asm) => out.push_str(&format!("[{name}, {asm}]")),
                None => out.push_str(&format!("[{name}]")),
            }
        }
        out.push(']');
        Ok(out)
    }

    /// The assembly's simple name of the module at `module`.
    pub(crate) fn module_assembly_name(&self, module: u64) -> Result<Option<String>> {
        self.with_metadata(module, |md| md.assembly_name(self.image))
    }

    /// The metadata of the module at `module` (opened once, cached; a copy of the located
    /// tables, so the caller may go on naming types while it reads them).
    pub(crate) fn module_metadata(&self, module: u64) -> Result<Arc<Metadata>> {
        self.cache_metadata(module);
        match self.modules.borrow().get(&module) {
            Some(Ok(md)) => Ok(Arc::clone(md)),
            Some(Err(e)) => Err(e.clone()),
            None => Err(DotnetError::Metadata { at: module, why: "not cached".into() }),
        }
    }

    /// Puts the metadata of `module` (or why it cannot be read) in this namer's cache: from the
    /// runtime's, else opened (and given to the runtime's).
    fn cache_metadata(&self, module: u64) {
        if self.modules.borrow().contains_key(&module) {
            return;
        }
        let shared = self.shared.and_then(|s| s.metadata.lock().ok()?.get(&module).cloned());
        let md = shared.unwrap_or_else(|| {
            let md = self.open_metadata(module).map(Arc::new);
            if let Some(mut all) = self.shared.and_then(|s| s.metadata.lock().ok()) {
                all.entry(module).or_insert_with(|| md.clone());
            }
            md
        });
        self.modules.borrow_mut().insert(module, md);
    }

    /// The memory the namer reads images through.
    pub(crate) fn image(&self) -> &'m dyn Memory {
        self.image
    }

    /// The type arguments of the MethodTable `mt` when it is a generic instantiation (none for a
    /// non-generic type or the open typical one).
    pub(crate) fn class_instantiation(&self, mt: u64) -> Result<Vec<u64>> {
        let flags = self.t.field_u32(mt, "MethodTable", "MTFlags")?;
        let array = flags & CATEGORY_ARRAY_MASK == CATEGORY_ARRAY;
        let has_instantiation = flags & HAS_COMPONENT_SIZE == 0 && flags & GENERICS_MASK != 0 && flags & GENERICS_MASK != GENERICS_TYPICAL;
        if array || !has_instantiation {
            return Ok(Vec::new());
        }
        self.instantiation(mt)
    }

    /// The type arguments of a generic instantiation: the last dictionary named by
    /// `GenericsDictInfo` (just before `PerInstInfo`).
    fn instantiation(&self, mt: u64) -> Result<Vec<u64>> {
        let t = self.t;
        let per_inst = t.field_ptr(mt, "MethodTable", "PerInstInfo")?;
        let info = per_inst.wrapping_sub(8);
        let num_dicts = t.field_u16(info, "GenericsDictInfo", "NumDicts")?;
        let num_args = t.field_u16(info, "GenericsDictInfo", "NumTypeArgs")?;
        if num_dicts == 0 || num_args > MAX_TYPE_ARGS || num_dicts > 1024 {
            return Err(DotnetError::Invalid { what: "GenericsDictInfo", at: info, why: format!("{num_dicts} dictionaries, {num_args} type arguments") });
        }
        let dict = t.read_ptr(per_inst + 8 * (num_dicts as u64 - 1), "generic dictionary pointer")?;
        (0..num_args as u64).map(|i| t.read_ptr(dict + 8 * i, "generic type argument")).collect()
    }

    fn assembly_of(&self, th: u64) -> Option<String> {
        if th & TYPE_HANDLE_TYPE_DESC != 0 {
            return None;
        }
        let module = self.t.field_ptr(th, "MethodTable", "Module").ok()?;
        self.with_metadata(module, |md| md.assembly_name(self.image)).ok().flatten()
    }

    fn with_metadata<R>(&self, module: u64, f: impl FnOnce(&Metadata) -> Result<R>) -> Result<R> {
        self.cache_metadata(module);
        let modules = self.modules.borrow();
        match modules.get(&module) {
            Some(Ok(md)) => f(md),
            Some(Err(e)) => Err(e.clone()),
            None => Err(DotnetError::Metadata { at: module, why: "not cached".into() }),
        }
    }

    fn open_metadata(&self, module: u64) -> Result<Metadata> {
        let t = self.t;
        if t.has_field("Module", "DynamicMetadata") && t.field_ptr(module, "Module", "DynamicMetadata")? != 0 {
            return Err(DotnetError::Metadata { at: module, why: "a dynamic (Reflection.Emit) module: its metadata is not read".into() });
        }
        let base = module_base(t, module)?;
        if base == 0 {
            return Err(DotnetError::Metadata { at: module, why: "the module has no image base".into() });
        }
        let (root, size) = metadata::metadata_root(self.image, base)?;
        Metadata::open(self.image, root, size)
    }
}

/// The bare name `SigFormat` gives a primitive type's element type (`Int32` for `System.Int32`).
pub(crate) fn signature_primitive_name(full: &str) -> Option<&'static str> {
    Some(match full {
        "System.Void" => "Void",
        "System.Boolean" => "Boolean",
        "System.Char" => "Char",
        "System.SByte" => "SByte",
        "System.Byte" => "Byte",
        "System.Int16" => "Int16",
        "System.UInt16" => "UInt16",
        "System.Int32" => "Int32",
        "System.UInt32" => "UInt32",
        "System.Int64" => "Int64",
        "System.UInt64" => "UInt64",
        "System.Single" => "Single",
        "System.Double" => "Double",
        "System.TypedReference" => "TypedReference",
        "System.IntPtr" => "IntPtr",
        "System.UIntPtr" => "UIntPtr",
        _ => return None,
    })
}

/// A Module's image base: `Module.Base` (.NET 9+); on .NET 8, which has no such field, its
/// PEAssembly's PEImage's loaded layout's base (0 when the module has none).
pub(crate) fn module_base(t: &Target, module: u64) -> Result<u64> {
    if t.has_field("Module", "Base") {
        return t.field_ptr(module, "Module", "Base");
    }
    let image = pe_image(t, module)?;
    let layout = if image == 0 { 0 } else { t.field_ptr(image, "PEImage", "LoadedLayout")? };
    if layout == 0 {
        return Ok(0);
    }
    t.field_ptr(layout, "PEImageLayout", "Base")
}

/// Where a Module's path is (UTF-16, NUL-terminated): `Module.Path`, or on .NET 8 its PEImage's.
pub(crate) fn module_path(t: &Target, module: u64) -> Result<u64> {
    if t.has_field("Module", "Path") {
        return t.field_ptr(module, "Module", "Path");
    }
    let image = pe_image(t, module)?;
    if image == 0 {
        return Ok(0);
    }
    t.field_ptr(image, "PEImage", "Path")
}

fn pe_image(t: &Target, module: u64) -> Result<u64> {
    let assembly = t.field_ptr(module, "Module", "PEAssembly")?;
    if assembly == 0 {
        return Ok(0);
    }
    t.field_ptr(assembly, "PEAssembly", "PEImage")
}

/// A MethodTable's TypeDef row: `MTFlags2`'s bits above `MethodTableTokenShift` — 8 where the
/// token shares a DWORD with the flags (.NET 9 and 10, whose descriptors do not say it), 16 where
/// a WORD of flags is followed by a WORD token (.NET 8: descriptor-8.0.toml).
pub(crate) fn type_def_rid(t: &Target, mt: u64) -> Result<u32> {
    let shift = t.global("MethodTableTokenShift").unwrap_or(8);
    Ok(t.field_u32(mt, "MethodTable", "MTFlags2")?.checked_shr(shift as u32).unwrap_or(0))
}
