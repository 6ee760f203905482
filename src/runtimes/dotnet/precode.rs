//! The method a precode stands for: a delegate's `_methodPtr` (and a method's entry point before
//! or between its tiers) points at a precode — a small stub in the runtime's stub heap — not at
//! code the code map knows. As the runtime's own `PrecodeStubs` contract (version 3) reads them:
//! the code bytes are compared with the templates `PlatformMetadata`'s `PrecodeMachineDescriptor`
//! carries (a fixup precode's, a stub precode's, each with a mask of bytes that vary), and the
//! precode's data sits one stub code page after its code (`FixupPrecodeData.MethodDesc`, or
//! `StubPrecodeData.SecretParam` for a stub precode whose `Type` says it holds a MethodDesc).

use super::error::DotnetError;
use super::target::{Result, Target};

/// Bytes of each template in the descriptor (`FixupBytes`, `StubBytes`, and their masks).
const TEMPLATE: usize = 24;
/// Stub code pages larger than this are not a runtime's (it uses 4 KiB to 64 KiB).
const MAX_PAGE: u64 = 1 << 20;

/// The `MethodDesc` of the precode at `ip`; `Ok(None)` when the bytes there are no precode of
/// a method (another stub, or not code).
pub(crate) fn method_desc(t: &Target, ip: u64) -> Result<Option<u64>> {
    let platform = t.global("PlatformMetadata")?;
    let d = platform.wrapping_add(t.offset("PlatformMetadata", "PrecodeMachineDescriptor")?);
    let byte = |f: &str| -> Result<u8> { t.read_u8(d.wrapping_add(t.offset("PrecodeMachineDescriptor", f)?), f) };
    let bytes = |f: &str| -> Result<Vec<u8>> { t.read_bytes(d.wrapping_add(t.offset("PrecodeMachineDescriptor", f)?), TEMPLATE, f) };
    let page = u64::from(t.read_u32(d.wrapping_add(t.offset("PrecodeMachineDescriptor", "StubCodePageSize")?), "StubCodePageSize")?);
    if page == 0 || page > MAX_PAGE || !page.is_power_of_two() {
        return Err(DotnetError::Invalid { what: "PrecodeMachineDescriptor", at: d, why: format!("stub code page of {page} bytes") });
    }
    let Ok(code) = t.read_bytes(ip, TEMPLATE, "precode") else { return Ok(None) };
    let data = ip.wrapping_add(page);
    let matches = |template: &[u8], ignored: &[u8], size: u8| -> bool {
        let n = usize::from(size).min(TEMPLATE);
        n > 0 && (0..n).all(|i| ignored[i] != 0 || code[i] == template[i])
    };
    if matches(&bytes("FixupBytes")?, &bytes("FixupIgnoredBytes")?, byte("FixupStubPrecodeSize")?) {
        let md = t.read_ptr(data.wrapping_add(t.offset("FixupPrecodeData", "MethodDesc")?), "FixupPrecodeData.MethodDesc")?;
        return Ok((md != 0).then_some(md));
    }
    if matches(&bytes("StubBytes")?, &bytes("StubIgnoredBytes")?, byte("StubPrecodeSize")?) {
        let ty = t.read_u8(data.wrapping_add(t.offset("StubPrecodeData", "Type")?), "StubPrecodeData.Type")?;
        if ty == byte("StubPrecodeType")? {
            let md = t.read_ptr(data.wrapping_add(t.offset("StubPrecodeData", "SecretParam")?), "StubPrecodeData.SecretParam")?;
            return Ok((md != 0).then_some(md));
        }
    }
    Ok(None)
}
