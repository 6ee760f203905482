//! A method's name as SOS's `clrstack` prints it: `Namespace.Type.Method` (the declaring type
//! as the type namer gives it, a generic method's instantiation as `[[Arg, Assembly]]`), and the
//! parameter list from the ECMA-335 method signature (II.23.2.1), in the runtime's signature
//! format: primitives by their bare names (`Int32`, `Boolean`), `System.String` and
//! `System.Object` in full, other types as `Namespace.Name` from the TypeDef or TypeRef (a
//! nested type has no namespace there, so just `Name`), `<...>` for generic instantiations,
//! `[]`, `*` and ` ByRef` suffixes. Dynamic methods have no metadata: the runtime names their
//! type `DynamicClass` (LCG) or `ILStubClass` (IL stubs) and stores the name and signature in
//! the MethodDesc, the signature's types as TypeHandles (`ELEMENT_TYPE_INTERNAL`).

use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::types::metadata::{Metadata, METHOD_DEF, TYPE_DEF};
use crate::runtimes::dotnet::types::methoddesc::{DynamicKind, MethodDesc};
use crate::runtimes::dotnet::types::objects::TypeNamer;
use crate::runtimes::dotnet::contract::target::{Result, Target};
use crate::process::Memory;
use crate::unwind::managed::ManagedName;

const MAX_TYPE_DEPTH: u32 = 16;
const MAX_PARAMS: u32 = 1024;
const MAX_PATH: usize = 4096;

pub(crate) fn name(t: &Target, namer: &TypeNamer, md: &MethodDesc) -> Result<ManagedName> {
    let module = t.field_ptr(md.method_table, "MethodTable", "Module")?;
    match &md.dynamic {
        Some((method, kind, sig)) => {
            let class = match kind {
                DynamicKind::Lcg => "DynamicClass".to_string(),
                DynamicKind::IlStub => "ILStubClass".to_string(),
                DynamicKind::Other => namer.type_name(md.method_table)?,
            };
            let ctx = SigContext { metadata: None, image: namer.image(), namer, type_def: None, method_def: None, method_instantiation: &[], class_instantiation: &[] };
            let signature = if sig.is_empty() { None } else { Some(method_params(&ctx, sig)?) };
            Ok(ManagedName { qualified: format!("{class}.{method}"), signature, module: None })
        }
        None => {
            let token = md.token.ok_or_else(|| DotnetError::Invalid { what: "MethodDesc", at: md.address, why: "an array method (no token)".into() })?;
            let class = namer.type_name(md.method_table)?;
            let metadata = namer.module_metadata(module)?;
            let rid = token & 0x00ff_ffff;
            let (method, sig) = metadata.method_def(namer.image(), rid)?;
            let generic = if md.instantiation.is_empty() { String::new() } else { namer.instantiation_suffix(&md.instantiation)? };
            let type_def = crate::runtimes::dotnet::types::objects::type_def_rid(t, md.method_table).ok();
            // A type whose instantiation cannot be read keeps its parameters' names.
            let class_instantiation = namer.class_instantiation(md.method_table).unwrap_or_default();
            let ctx = SigContext { metadata: Some(&metadata), image: namer.image(), namer, type_def, method_def: Some(rid), method_instantiation: &md.instantiation, class_instantiation: &class_instantiation };
            let signature = Some(method_params(&ctx, &sig)?);
            let module_name = module_file_name(t, module).or_else(|| namer.module_assembly_name(module).ok().flatten().map(|a| format!("{a}.dll")));
            Ok(ManagedName { qualified: format!("{class}.{method}{generic}"), signature, module: module_name })
        }
    }
}

/// The file name of the module's path (`Module.Path`, UTF-16), when it has one.
fn module_file_name(t: &Target, module: u64) -> Option<String> {
    let at = crate::runtimes::dotnet::types::objects::module_path(t, module).ok().filter(|&a| a != 0)?;
    let mut units = Vec::new();
    while units.len() < MAX_PATH {
        let u = t.read_u16(at + 2 * units.len() as u64, "Module.Path").ok()?;
        if u == 0 {
            break;
        }
        units.push(u);
    }
    let path = String::from_utf16_lossy(&units);
    let file = path.rsplit(['/', '\\']).next().unwrap_or(&path).to_string();
    (!file.is_empty()).then_some(file)
}

struct SigContext<'a> {
    metadata: Option<&'a Metadata>,
    image: &'a dyn Memory,
    namer: &'a TypeNamer<'a, 'a>,
    /// The declaring TypeDef and the MethodDef, for generic parameters' names.
    type_def: Option<u32>,
    method_def: Option<u32>,
    /// An instantiated generic method's type arguments: SOS prints a method type parameter
    /// (`!!0`) in the signature as its argument (`ReadOnlySpan`1<Char>`, not `<TChar>`).
    method_instantiation: &'a [u64],
    /// The declaring type's instantiation, for a method of a generic type: SOS prints a type
    /// parameter (`!0`) as its argument in the method's (canonical) MethodTable — `Int32`, or
    /// `System.__Canon` where the code is shared.
    class_instantiation: &'a [u64],
}

struct Reader<'b> {
    bytes: &'b [u8],
    pos: usize,
}

impl Reader<'_> {
    fn bad(&self, why: &str) -> DotnetError {
        DotnetError::Invalid { what: "method signature", at: self.pos as u64, why: why.into() }
    }
    fn byte(&mut self) -> Result<u8> {
        let b = *self.bytes.get(self.pos).ok_or_else(|| self.bad("ends early"))?;
        self.pos += 1;
        Ok(b)
    }
    /// A compressed unsigned integer (II.23.2).
    fn compressed(&mut self) -> Result<u32> {
        let b = self.byte()? as u32;
        if b & 0x80 == 0 {
            Ok(b)
        } else if b & 0xc0 == 0x80 {
            Ok(((b & 0x3f) << 8) | self.byte()? as u32)
        } else if b & 0xe0 == 0xc0 {
            let (x, y, z) = (self.byte()? as u32, self.byte()? as u32, self.byte()? as u32);
            Ok(((b & 0x1f) << 24) | (x << 16) | (y << 8) | z)
        } else {
            Err(self.bad("bad compressed integer"))
        }
    }
    fn peek_compressed(&self) -> Result<u32> {
        Reader { bytes: self.bytes, pos: self.pos }.compressed()
    }
    fn pointer(&mut self) -> Result<u64> {
        let b = self.bytes.get(self.pos..self.pos + 8).ok_or_else(|| self.bad("ends inside a TypeHandle"))?;
        self.pos += 8;
        Ok(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    }
}

/// `(T1, T2)` for a MethodDefSig / MethodRefSig blob.
fn method_params(ctx: &SigContext, sig: &[u8]) -> Result<String> {
    let mut r = Reader { bytes: sig, pos: 0 };
    let conv = r.byte()?;
    if conv & 0x10 != 0 {
        r.compressed()?; // generic parameter count
    }
    let count = r.compressed()?;
    if count > MAX_PARAMS {
        return Err(r.bad("too many parameters"));
    }
    type_text(ctx, &mut r, 0)?; // return type
    let mut params = Vec::with_capacity(count as usize);
    for _ in 0..count {
        if r.bytes.get(r.pos) == Some(&0x41) {
            r.pos += 1; // the vararg sentinel
        }
        params.push(type_text(ctx, &mut r, 0)?);
    }
    Ok(format!("({})", params.join(", ")))
}

fn type_text(ctx: &SigContext, r: &mut Reader, depth: u32) -> Result<String> {
    if depth > MAX_TYPE_DEPTH {
        return Err(r.bad("types nested too deep"));
    }
    let e = r.byte()?;
    let primitive = match e {
        0x01 => Some("Void"),
        0x02 => Some("Boolean"),
        0x03 => Some("Char"),
        0x04 => Some("SByte"),
        0x05 => Some("Byte"),
        0x06 => Some("Int16"),
        0x07 => Some("UInt16"),
        0x08 => Some("Int32"),
        0x09 => Some("UInt32"),
        0x0a => Some("Int64"),
        0x0b => Some("UInt64"),
        0x0c => Some("Single"),
        0x0d => Some("Double"),
        0x0e => Some("System.String"),
        0x16 => Some("TypedReference"),
        0x18 => Some("IntPtr"),
        0x19 => Some("UIntPtr"),
        0x1c => Some("System.Object"),
        _ => None,
    };
    if let Some(p) = primitive {
        return Ok(p.to_string());
    }
    Ok(match e {
        0x0f => format!("{}*", type_text(ctx, r, depth + 1)?),
        0x10 => format!("{} ByRef", type_text(ctx, r, depth + 1)?),
        0x11 | 0x12 => {
            let coded = r.compressed()?;
            type_def_or_ref(ctx, coded, depth)?
        }
        // A type parameter bound to a type argument prints that type as the signature
        // formatter does (`SigFormat::AddType`): a nested type by its own name.
        0x1e if ctx.method_instantiation.len() > r.peek_compressed()? as usize => {
            let n = r.compressed()? as usize;
            ctx.namer.signature_type_name(ctx.method_instantiation[n])?
        }
        0x13 if ctx.class_instantiation.len() > r.peek_compressed()? as usize => {
            let n = r.compressed()? as usize;
            ctx.namer.signature_type_name(ctx.class_instantiation[n])?
        }
        0x13 | 0x1e => {
            let n = r.compressed()?;
            let (table, owner, prefix) = if e == 0x13 { (TYPE_DEF, ctx.type_def, "!") } else { (METHOD_DEF, ctx.method_def, "!!") };
            let named = match (ctx.metadata, owner) {
                (Some(md), Some(o)) => md.generic_param_name(ctx.image, table, o, n).ok().flatten(),
                _ => None,
            };
            named.unwrap_or_else(|| format!("{prefix}{n}"))
        }
        0x14 => {
            let elem = type_text(ctx, r, depth + 1)?;
            let rank = r.compressed()?;
            let sizes = r.compressed()?;
            for _ in 0..sizes.min(64) {
                r.compressed()?;
            }
            let lows = r.compressed()?;
            for _ in 0..lows.min(64) {
                r.compressed()?;
            }
            if rank > 32 {
                return Err(r.bad("array rank above 32"));
            }
            format!("{elem}[{}]", ",".repeat(rank.saturating_sub(1) as usize))
        }
        0x15 => {
            let generic = type_text(ctx, r, depth + 1)?;
            let n = r.compressed()?;
            if n > 64 {
                return Err(r.bad("too many generic arguments"));
            }
            let args = (0..n).map(|_| type_text(ctx, r, depth + 1)).collect::<Result<Vec<_>>>()?;
            format!("{generic}<{}>", args.join(","))
        }
        0x1b => {
            // A function pointer: its own method signature, skipped.
            let conv = r.byte()?;
            if conv & 0x10 != 0 {
                r.compressed()?;
            }
            let n = r.compressed()?;
            if n > MAX_PARAMS {
                return Err(r.bad("too many parameters"));
            }
            for _ in 0..=n {
                type_text(ctx, r, depth + 1)?;
            }
            "(fnptr)".to_string()
        }
        0x1d => format!("{}[]", type_text(ctx, r, depth + 1)?),
        0x1f | 0x20 => {
            r.compressed()?; // the modifier's type
            type_text(ctx, r, depth + 1)?
        }
        0x45 => type_text(ctx, r, depth + 1)?,
        // A dynamic method's TypeHandle: its TypeDef's own name (`SigFormat::AddTypeString`).
        0x21 => {
            let th = r.pointer()?;
            if th & 2 == 0 { ctx.namer.signature_own_name(th)? } else { ctx.namer.type_name(th)? }
        }
        other => return Err(r.bad(&format!("element type {other:#x}"))),
    })
}

/// A TypeDefOrRef coded index's type, as the signature format names it.
fn type_def_or_ref(ctx: &SigContext, coded: u32, depth: u32) -> Result<String> {
    let md = ctx.metadata.ok_or_else(|| DotnetError::Invalid { what: "method signature", at: 0, why: "a metadata token in a signature without metadata".into() })?;
    let rid = coded >> 2;
    let (ns, name) = match coded & 3 {
        0 => md.type_def_name(ctx.image, rid)?,
        1 => md.type_ref_name(ctx.image, rid)?,
        2 => {
            let blob = md.type_spec(ctx.image, rid)?;
            let mut r = Reader { bytes: &blob, pos: 0 };
            return type_text(ctx, &mut r, depth + 1);
        }
        _ => return Err(DotnetError::Invalid { what: "method signature", at: 0, why: format!("TypeDefOrRef tag 3 ({coded:#x})") }),
    };
    Ok(if ns.is_empty() { name } else { format!("{ns}.{name}") })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::RangeMemory;
    use crate::runtimes::dotnet::contract::descriptor::Descriptor;

    fn params(sig: &[u8]) -> Result<String> {
        let mem = RangeMemory::new();
        let t = Target::new(&mem, Descriptor::default(), Vec::new());
        let namer = TypeNamer::new(&t, &mem);
        let ctx = SigContext { metadata: None, image: &mem, namer: &namer, type_def: None, method_def: None, method_instantiation: &[], class_instantiation: &[] };
        method_params(&ctx, sig)
    }

    #[test]
    fn primitives_strings_objects_arrays_and_byrefs_print_as_the_runtime_prints_them() {
        // instance void (object, bool&)
        assert_eq!(params(&[0x20, 2, 0x01, 0x1c, 0x10, 0x02]).unwrap(), "(System.Object, Boolean ByRef)");
        // static int32 (string[], int32*, uint64, char)
        assert_eq!(params(&[0x00, 4, 0x08, 0x1d, 0x0e, 0x0f, 0x08, 0x0b, 0x03]).unwrap(), "(System.String[], Int32*, UInt64, Char)");
        // a generic method's MVAR and a 2-D array of its type VAR, no metadata to name them
        assert_eq!(params(&[0x10, 1, 2, 0x01, 0x1e, 0x00, 0x14, 0x13, 0x01, 2, 0, 0]).unwrap(), "(!!0, !1[,])");
        assert_eq!(params(&[0x00, 0, 0x01]).unwrap(), "()");
    }

    #[test]
    fn damaged_signatures_are_errors() {
        assert!(params(&[]).is_err());
        assert!(params(&[0x00, 3, 0x01, 0x08]).is_err(), "fewer parameters than counted");
        assert!(params(&[0x00, 1, 0x01, 0x55]).is_err(), "an unknown element type");
        assert!(params(&[0x00, 1, 0x01, 0x11, 0x05]).is_err(), "a token without metadata");
        // Deep nesting is cut off, not followed.
        let mut deep = vec![0x00, 1, 0x01];
        deep.extend(std::iter::repeat_n(0x1d, 100));
        deep.push(0x08);
        assert!(params(&deep).is_err());
        assert!(params(&[0x00, 0xff, 0xff, 0xff, 0xff]).is_err(), "a huge parameter count");
    }
}
