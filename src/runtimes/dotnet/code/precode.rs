//! The method a precode stands for: a delegate's `_methodPtr` (and a method's entry point before
//! or between its tiers) points at a precode — a small stub in the runtime's stub heap — not at
//! code the code map knows. As the runtime's own `PrecodeStubs` contract (version 3) reads them:
//! the code bytes are compared with the templates `PlatformMetadata`'s `PrecodeMachineDescriptor`
//! carries (a fixup precode's, a stub precode's, each with a mask of bytes that vary), and the
//! precode's data sits one stub code page after its code (`FixupPrecodeData.MethodDesc`, or
//! `StubPrecodeData.SecretParam` for a stub precode whose `Type` says it holds a MethodDesc).

use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::contract::target::{Result, Target};

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

#[cfg(test)]
mod tests {
    //! Hostile precodes over a real dump (async_tcs, .NET 10): the descriptor's templates are
    //! real, the stub bytes and their data page are patched in. Nothing may panic; a precode
    //! whose data is unreadable or names no MethodDesc gives no method ("unknown" to the reader).
    use super::*;
    use crate::process::{Locator, Process};
    use crate::tests::patched::Patched;
    use crate::runtimes::dotnet::contract::context::Context;
    use crate::runtimes::dotnet::types::methoddesc;

    fn with_async_tcs(f: impl FnOnce(&Context<'_>)) {
        let Some(d) = knot_samples::dotnet::dumps("sos/dumpasync.txt", false).into_iter().find(|d| d.sample == "async_tcs") else {
            panic!("the committed async_tcs dump is missing");
        };
        let locator = Locator { sysroot: d.sysroot.clone(), search_dirs: d.search_dirs.clone(), ..Locator::default() };
        let process = Process::open(&d.core, &locator).expect("open the async_tcs core");
        let c = Context::open(&process, &locator).unwrap_or_else(|_| panic!("no runtime in async_tcs"));
        f(&c);
    }

    /// Where the descriptor's precode templates are: (machine descriptor, stub code page size).
    fn descriptor(t: &Target) -> (u64, u64) {
        let d = t.global("PlatformMetadata").expect("PlatformMetadata") + t.offset("PlatformMetadata", "PrecodeMachineDescriptor").expect("offset");
        let page = t.read_u32(d + t.offset("PrecodeMachineDescriptor", "StubCodePageSize").expect("offset"), "page").expect("page");
        (d, u64::from(page))
    }

    fn field(t: &Target, d: u64, f: &str, len: usize) -> Vec<u8> {
        t.read_bytes(d + t.offset("PrecodeMachineDescriptor", f).expect("offset"), len, f).expect("template")
    }

    /// Where no mapping is: the fake stub and its data page are the only bytes there.
    const STUB: u64 = 0x7e57_0000_0000;

    #[test]
    fn damaged_truncated_and_outside_precodes_give_no_method_and_never_panic() {
        with_async_tcs(|c| {
            let t = c.target();
            let (d, page) = descriptor(&t);
            assert!(page.is_power_of_two(), "{page}");
            let fixup = field(&t, d, "FixupBytes", TEMPLATE);
            let size = usize::from(field(&t, d, "FixupStubPrecodeSize", 1)[0]);
            assert!(size > 0 && size <= TEMPLATE, "{size}");
            let md_at = STUB + page + t.offset("FixupPrecodeData", "MethodDesc").expect("offset");
            let run = |patches: Vec<(u64, Vec<u8>)>, ip: u64| {
                let mem = Patched { inner: &c.memory, patches };
                let pt = Target::borrowed(&mem, &c.descriptor, &c.pointer_data);
                let md = method_desc(&pt, ip);
                // What the async reader does with it: no MethodDesc read, no method named.
                let named = md.as_ref().ok().copied().flatten().and_then(|m| methoddesc::read(&pt, m).ok());
                (md.map_err(|e| e.to_string()), named.is_some())
            };
            let data = |md: u64| (md_at, md.to_le_bytes().to_vec());

            // The template itself, with a MethodDesc the dump does not hold: found as a precode
            // (the test can tell one), its method unknown.
            let outside = 0x7e58_0000_0008u64;
            assert_eq!(run(vec![(STUB, fixup.clone()), data(outside)], STUB), (Ok(Some(outside)), false));
            // Null MethodDesc: no method.
            assert_eq!(run(vec![(STUB, fixup.clone()), data(0)], STUB), (Ok(None), false));
            // Damaged: each byte the template does not ignore, flipped in turn.
            let ignored = field(&t, d, "FixupIgnoredBytes", TEMPLATE);
            for i in (0..size).filter(|&i| ignored[i] == 0) {
                let mut bad = fixup.clone();
                bad[i] ^= 0xff;
                assert_eq!(run(vec![(STUB, bad), data(outside)], STUB).0, Ok(None), "byte {i} flipped");
            }
            // Truncated: the stub's bytes end before a template's length (the dump has none after).
            assert_eq!(run(vec![(STUB, fixup[..size / 2].to_vec())], STUB), (Ok(None), false));
            // The data page outside the dump: an error the reader drops, no method.
            let (r, named) = run(vec![(STUB, fixup.clone())], STUB);
            assert!(r.is_err() && !named, "{r:?}");
            // Pointing outside the dump, at its very end, at address 0 and at the top of memory.
            for ip in [0, 8, u64::MAX - 7, u64::MAX, STUB - 1] {
                let (r, named) = run(Vec::new(), ip);
                assert!(matches!(r, Ok(None)) && !named, "{ip:#x}: {r:?}");
            }
            // A descriptor whose stub page size is garbage is refused, not used as an offset.
            let page_at = d + t.offset("PrecodeMachineDescriptor", "StubCodePageSize").expect("offset");
            for bad in [0u32, 3, u32::MAX] {
                let (r, _) = run(vec![(page_at, bad.to_le_bytes().to_vec()), (STUB, fixup.clone()), data(outside)], STUB);
                assert!(r.as_ref().is_err_and(|e| e.contains("stub code page")), "{bad}: {r:?}");
            }
            // A template size past the 24 bytes compared is cut to them.
            let size_at = d + t.offset("PrecodeMachineDescriptor", "FixupStubPrecodeSize").expect("offset");
            assert_eq!(run(vec![(size_at, vec![0xff]), (STUB, fixup.clone()), data(outside)], STUB), (Ok(Some(outside)), false));
        });
    }
}
