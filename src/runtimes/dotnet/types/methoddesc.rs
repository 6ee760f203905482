//! A `MethodDesc` (RuntimeTypeSystem contract): its chunk (just before the run of MethodDescs
//! it leads, `ChunkIndex` alignment units back), the chunk's MethodTable, the method's
//! classification, its MethodDef token (the chunk's token range and the MethodDesc's token
//! remainder), a generic method's instantiation, and a dynamic method's own name and
//! signature.

use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::types::objects;
use crate::runtimes::dotnet::contract::target::{Result, Target};

const CLASSIFICATION_MASK: u16 = 0x7;
const TOKEN_TYPE_METHOD_DEF: u32 = 0x0600_0000;
/// More generic arguments than any method has.
const MAX_GENERIC_ARGS: u16 = 64;
const MAX_DYNAMIC_NAME: usize = 1024;
const MAX_STORED_SIG: u32 = 4096;
/// `DynamicMethodDesc` extended flags (StoredSigMethodDesc.ExtendedFlags), as the
/// RuntimeTypeSystem contract defines them (`DynamicMethodDescExtendedFlags`): a
/// System.Reflection.Emit.DynamicMethod (LCG), and a runtime IL stub.
const EXTENDED_FLAG_LCG: u32 = 0x0000_4000;
const EXTENDED_FLAG_IL_STUB: u32 = 0x0000_8000;

/// `MethodDesc::mdc*`: what kind of method a MethodDesc describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Classification {
    Il,
    FCall,
    PInvoke,
    EEImpl,
    Array,
    Instantiated,
    ComInterop,
    Dynamic,
}

/// What kind of dynamic method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DynamicKind {
    /// A `DynamicMethod` (lightweight code generation: expression trees, `lambda_method`).
    Lcg,
    /// An IL stub the runtime generated (P/Invoke marshalling and the like).
    IlStub,
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MethodDesc {
    pub(crate) address: u64,
    pub(crate) method_table: u64,
    pub(crate) classification: Classification,
    /// The MethodDef token; `None` for methods without metadata (dynamic methods).
    pub(crate) token: Option<u32>,
    /// A generic method's type arguments (TypeHandles), empty otherwise.
    pub(crate) instantiation: Vec<u64>,
    /// A dynamic method's name, kind and signature (stored in the MethodDesc, its types as
    /// `ELEMENT_TYPE_INTERNAL` TypeHandles).
    pub(crate) dynamic: Option<(String, DynamicKind, Vec<u8>)>,
}

pub(crate) fn read(t: &Target, md: u64) -> Result<MethodDesc> {
    if md == 0 || md & 7 != 0 {
        return Err(DotnetError::Invalid { what: "MethodDesc", at: md, why: "null or misaligned".into() });
    }
    let chunk_index = t.read_u8(md.wrapping_add(t.offset("MethodDesc", "ChunkIndex")?), "MethodDesc.ChunkIndex")? as u64;
    let flags = t.field_u16(md, "MethodDesc", "Flags")?;
    let remainder = t.field_u16(md, "MethodDesc", "Flags3AndTokenRemainder")? as u32;
    let chunk = md
        .wrapping_sub(chunk_index * t.global("MethodDescAlignment")?)
        .wrapping_sub(t.size("MethodDescChunk")?);
    let method_table = t.field_ptr(chunk, "MethodDescChunk", "MethodTable")?;
    if !objects::is_plausible_method_table(t, method_table) {
        return Err(DotnetError::Invalid { what: "MethodDesc", at: md, why: format!("its chunk {chunk:#x} names {method_table:#x}, which is not a MethodTable") });
    }
    let range = t.field_u16(chunk, "MethodDescChunk", "FlagsAndTokenRange")? as u32;
    let bits = t.global("MethodDescTokenRemainderBitCount")? as u32;
    if bits == 0 || bits >= 24 {
        return Err(DotnetError::Invalid { what: "MethodDescTokenRemainderBitCount", at: md, why: format!("{bits} bits") });
    }
    let rid = ((range & ((1 << (24 - bits)) - 1)) << bits) | (remainder & ((1 << bits) - 1));
    let classification = match flags & CLASSIFICATION_MASK {
        0 => Classification::Il,
        1 => Classification::FCall,
        2 => Classification::PInvoke,
        3 => Classification::EEImpl,
        4 => Classification::Array,
        5 => Classification::Instantiated,
        6 => Classification::ComInterop,
        _ => Classification::Dynamic,
    };
    let mut out = MethodDesc { address: md, method_table, classification, token: None, instantiation: Vec::new(), dynamic: None };
    match classification {
        Classification::Dynamic => out.dynamic = Some(dynamic(t, md)?),
        Classification::Array => {}
        _ => out.token = Some(TOKEN_TYPE_METHOD_DEF | rid),
    }
    if classification == Classification::Instantiated {
        let n = t.field_u16(md, "InstantiatedMethodDesc", "NumGenericArgs")?;
        if n > MAX_GENERIC_ARGS {
            return Err(DotnetError::TooMany { what: "generic method arguments", at: md, limit: MAX_GENERIC_ARGS as u64 });
        }
        let dict = t.field_ptr(md, "InstantiatedMethodDesc", "PerInstInfo")?;
        if n > 0 && dict == 0 {
            return Err(DotnetError::Invalid { what: "InstantiatedMethodDesc", at: md, why: format!("{n} generic arguments but no dictionary") });
        }
        out.instantiation = (0..n as u64).map(|i| t.read_ptr(dict + 8 * i, "generic method argument")).collect::<Result<_>>()?;
    }
    Ok(out)
}

fn dynamic(t: &Target, md: u64) -> Result<(String, DynamicKind, Vec<u8>)> {
    let name_at = t.field_ptr(md, "DynamicMethodDesc", "MethodName")?;
    let name = t.mem.read_c_string(name_at, MAX_DYNAMIC_NAME).map_err(|e| DotnetError::memory("DynamicMethodDesc name", e))?;
    let ext = t.field_u32(md, "StoredSigMethodDesc", "ExtendedFlags")?;
    let kind = if ext & EXTENDED_FLAG_LCG != 0 {
        DynamicKind::Lcg
    } else if ext & EXTENDED_FLAG_IL_STUB != 0 {
        DynamicKind::IlStub
    } else {
        DynamicKind::Other
    };
    let sig_at = t.field_ptr(md, "StoredSigMethodDesc", "Sig")?;
    let len = t.field_u32(md, "StoredSigMethodDesc", "cSig")?;
    if len > MAX_STORED_SIG {
        return Err(DotnetError::TooMany { what: "stored signature bytes", at: md, limit: MAX_STORED_SIG as u64 });
    }
    let sig = if sig_at == 0 || len == 0 { Vec::new() } else { t.read_bytes(sig_at, len as usize, "stored signature")? };
    Ok((name, kind, sig))
}
