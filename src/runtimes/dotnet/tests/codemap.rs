//! The .NET code map against SOS: every managed frame `clrstack -all` shows in a committed .NET
//! dump, looked up by its IP through the runtime's own code map (range sections, nibble map,
//! ReadyToRun runtime functions) and named from the MethodDesc and the module's metadata, must
//! be the method SOS names there, with SOS's exact name and parameter list. Addresses that are
//! not managed code are `None`, and damaged dumps never make a lookup panic.
//!
//! Dumps: `samples/dotnet/dumps/<sample>/<kind>/core.gz` with SOS's `sos/clrstack-all.txt`,
//! read with the committed runtime and app files only (an empty sysroot hides any installed
//! runtime), as on a machine without .NET.

use crate::tests::dumpedit;

use crate::core::Core;
use crate::process::{Locator, Process};
use crate::runtimes::dotnet::{self, DotnetError};
use crate::unwind::managed::{CodeLookup, ManagedCodeKind, UnwindFormat};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

// ---------------------------------------------------------------- the committed dumps

struct Dump {
    name: String,
    core: PathBuf,
    dir: PathBuf,
    locator: Locator,
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}


fn dumps() -> Vec<Dump> {
    let out: Vec<Dump> = knot_samples::dotnet::dumps("sos/clrstack-all.txt", false)
        .into_iter()
        .map(|d| Dump {
            name: d.name(),
            locator: Locator { sysroot: d.sysroot.clone(), search_dirs: d.search_dirs.clone(), ..Locator::default() },
            core: d.core,
            dir: d.dir,
        })
        .collect();
    assert!(!out.is_empty(), "no committed .NET dumps under {}", knot_samples::dotnet::committed_root().display());
    out
}

fn loaded() -> &'static [(Dump, Process)] {
    static ALL: OnceLock<Vec<(Dump, Process)>> = OnceLock::new();
    ALL.get_or_init(|| {
        dumps()
            .into_iter()
            .map(|d| {
                let p = Process::open(&d.core, &d.locator).unwrap_or_else(|e| panic!("{}: knot cannot open the core: {e}", d.name));
                (d, p)
            })
            .collect()
    })
}

// ---------------------------------------------------------------- SOS's clrstack -all

/// One managed frame line: `ChildSP IP Name(Signature) [file @ line]`.
#[derive(Debug, Clone)]
struct SosFrame {
    thread: u32,
    ip: u64,
    qualified: String,
    signature: String,
}

fn parse_clrstack(text: &str) -> Vec<SosFrame> {
    let mut out = Vec::new();
    let mut thread = 0;
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        i += 1;
        if let Some(t) = line.strip_prefix("OS Thread Id: 0x") {
            thread = u32::from_str_radix(t.split_whitespace().next().unwrap_or(""), 16).expect("thread id");
            continue;
        }
        let mut tok = line.splitn(3, ' ');
        let (Some(sp), Some(ip), Some(rest)) = (tok.next(), tok.next(), tok.next()) else { continue };
        if sp.len() != 16 || !sp.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let Ok(ip) = u64::from_str_radix(ip, 16) else { continue };
        // Transition frames are the runtime's Frames, not methods.
        if rest.starts_with('[') {
            continue;
        }
        // SOS puts a warning before a dynamic method's name; the name is on the next line.
        let mut name = rest.to_string();
        if name.starts_with("SOS Warning") {
            name = lines.get(i).map(|l| l.trim().to_string()).unwrap_or_default();
            i += 1;
        }
        // Strip the source location ` [/path/File.cs @ 12]`.
        if name.ends_with(']')
            && let Some(at) = name.rfind(" [")
            && name[at..].contains(" @ ")
        {
            name.truncate(at);
        }
        let open = name.find('(').unwrap_or(name.len());
        out.push(SosFrame { thread, ip, qualified: name[..open].to_string(), signature: name[open..].to_string() });
    }
    out
}

fn sos_frames(d: &Dump) -> Vec<SosFrame> {
    let text = std::fs::read_to_string(d.dir.join("sos/clrstack-all.txt")).expect("clrstack-all.txt");
    parse_clrstack(&text)
}

/// Frames SOS names in a way knot deliberately does not follow, with why. Empty: every frame
/// must match.
const ALLOWED_MISMATCHES: &[(&str, &str)] = &[];

#[test]
fn the_clrstack_parser_reads_frames_warnings_and_skips_transition_frames() {
    let text = "OS Thread Id: 0x4abd\n        Child SP               IP Call Site\n\
00007FDC1787E028 00007fe80fa88b32 [InlinedCallFrame: 00007fdc1787e028] \n\
00007FDC1787E020 00007FE80FA88B32 System.Threading.Monitor.Enter_Slowpath(System.Object)\n\
00007FDC1787EC30 00007FE81133007F SOS Warning: Loading symbols for dynamic assemblies is not yet supported\n\
DynamicClass.lambda_method1(System.Runtime.CompilerServices.Closure, System.Object[])\n\
00007FDC1787EC00 00007FE81089A400 Knot.Samples.AutofacContainer.RootCache..ctor(Autofac.ILifetimeScope) [/work/main/samples/dotnet/autofac_container/Program.cs @ 21]\n";
    let f = parse_clrstack(text);
    assert_eq!(f.len(), 3, "{f:#?}");
    assert_eq!((f[0].thread, f[0].ip, f[0].qualified.as_str(), f[0].signature.as_str()), (0x4abd, 0x7FE80FA88B32, "System.Threading.Monitor.Enter_Slowpath", "(System.Object)"));
    assert_eq!(f[1].qualified, "DynamicClass.lambda_method1");
    assert_eq!(f[2].qualified, "Knot.Samples.AutofacContainer.RootCache..ctor");
    assert_eq!(f[2].signature, "(Autofac.ILifetimeScope)");
}

// ---------------------------------------------------------------- against SOS

#[test]
fn every_managed_frame_sos_shows_is_found_and_named_as_sos_names_it() {
    let mut matched = 0;
    let mut mismatches: Vec<String> = Vec::new();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for (d, p) in loaded() {
        let map = dotnet::code_map(p, &d.locator).unwrap_or_else(|e| panic!("{}: no code map: {e}", d.name));
        let frames = sos_frames(d);
        assert!(!frames.is_empty(), "{}: SOS shows no managed frames", d.name);
        for f in &frames {
            let sos = format!("{}{}", f.qualified, f.signature);
            let got = match map.try_lookup(f.ip) {
                Ok(Some(code)) => {
                    *kinds.entry(format!("{:?}", code.kind)).or_default() += 1;
                    assert!(code.method_start <= f.ip, "{}: {:#x} starts after its IP at {:#x}", d.name, code.method_start, f.ip);
                    if let Some(u) = code.unwind {
                        assert!(u.begin <= f.ip && f.ip < u.end, "{}: unwind fragment {:#x}..{:#x} does not cover {:#x}", d.name, u.begin, u.end, f.ip);
                        assert!(u.begin >= code.method_start || code.kind == ManagedCodeKind::ReadyToRun, "{}: fragment before the method", d.name);
                    }
                    match code.method {
                        Some(md) => match map.try_name(md) {
                            Ok(n) => format!("{}{}", n.qualified, n.signature.unwrap_or_default()),
                            Err(e) => format!("(MethodDesc {md:#x} not named: {e})"),
                        },
                        None => format!("({:?} code at {:#x} without a MethodDesc)", code.kind, code.method_start),
                    }
                }
                Ok(None) => "(not found)".to_string(),
                Err(e) => format!("(lookup failed: {e})"),
            };
            if got == sos {
                matched += 1;
            } else if !ALLOWED_MISMATCHES.iter().any(|(q, _)| sos.starts_with(q)) {
                mismatches.push(format!("{} thread {:#x} IP {:#x}:\n    SOS:  {sos}\n    knot: {got}", d.name, f.thread, f.ip));
            }
        }
    }
    eprintln!("code map against SOS: {matched} frames match, {} do not; by kind {kinds:?}", mismatches.len());
    assert!(mismatches.is_empty(), "{} of {} frames differ from SOS:\n{}", mismatches.len(), matched + mismatches.len(), mismatches.join("\n"));
}

#[test]
fn the_trait_gives_the_same_answers_and_caches_them() {
    let (d, p) = loaded().iter().find(|(d, _)| d.name == "autofac_container/heap").expect("the autofac dump");
    let map = dotnet::code_map(p, &d.locator).expect("code map");
    let frames = sos_frames(d);
    let f = frames.iter().find(|f| f.qualified == "System.Threading.Monitor.Enter_Slowpath").expect("an Enter_Slowpath frame");
    let code = map.lookup(f.ip).expect("found");
    assert_eq!(code.kind, ManagedCodeKind::ReadyToRun, "CoreLib's Monitor.Enter_Slowpath is precompiled");
    let name = map.name(code.method.expect("a MethodDesc")).expect("named");
    assert_eq!(name.qualified, "System.Threading.Monitor.Enter_Slowpath");
    assert_eq!(name.signature.as_deref(), Some("(System.Object)"));
    assert_eq!(name.module.as_deref(), Some("System.Private.CoreLib.dll"));
    assert_eq!(map.lookup(f.ip), Some(code), "a second lookup answers the same");
    let app = frames.iter().find(|f| f.qualified == "Knot.Samples.AutofacContainer.Program.Main").expect("Main");
    let code = map.lookup(app.ip).expect("Main found");
    assert_eq!(code.kind, ManagedCodeKind::Jitted);
    let u = code.unwind.expect("jitted code has unwind info");
    assert_eq!(u.begin, code.method_start, "Main has no funclets: its one fragment starts at the method");
    assert_eq!(map.name(code.method.expect("md")).and_then(|n| n.module).as_deref(), Some("autofac_container.dll"));
    assert!(map.diagnostics().iter().all(|d| !d.message.contains("not named")), "{:?}", map.diagnostics());
}

#[test]
fn every_address_inside_a_found_method_maps_to_it_and_its_unwind_info_is_readable() {
    let mut checked = 0;
    let mut unwind_only_in_image_files = 0;
    for (d, p) in loaded() {
        let map = dotnet::code_map(p, &d.locator).expect("code map");
        for f in sos_frames(d) {
            let code = map.lookup(f.ip).expect("found");
            let u = code.unwind.unwrap_or_else(|| panic!("{}: no unwind info for {:#x}", d.name, f.ip));
            // Every 4th byte of the fragment, both ends included: the same method.
            for ip in (u.begin..u.end).step_by(4).chain([u.end - 1]) {
                let at = map.lookup(ip).unwrap_or_else(|| panic!("{}: {ip:#x} in {:#x}..{:#x} not found", d.name, u.begin, u.end));
                assert_eq!((at.method_start, at.method), (code.method_start, code.method), "{}: {ip:#x}", d.name);
                checked += 1;
            }
            let mut b = [0u8; 4];
            match u.format {
                UnwindFormat::X64 => {
                    // UNWIND_INFO: version 1 or 2 in the low 3 bits of its first byte.
                    map.image_memory().read(u.unwind_info, &mut b).unwrap_or_else(|e| panic!("{}: UNWIND_INFO at {:#x}: {e}", d.name, u.unwind_info));
                    assert!(matches!(b[0] & 7, 1 | 2), "{}: UNWIND_INFO at {:#x} starts {:#x}", d.name, u.unwind_info, b[0]);
                }
                UnwindFormat::Arm64 { unwind_data } if unwind_data & 3 != 0 => {
                    // Packed: the word itself holds the function's length (in instructions, bits 2..13).
                    assert_eq!(u64::from((unwind_data >> 2) & 0x7ff) * 4, u.end - u.begin, "{}: packed word {unwind_data:#x}", d.name);
                    continue;
                }
                UnwindFormat::Arm64 { .. } => {
                    // `.xdata`: version 0 in bits 18..20 of its header, its length (in
                    // instructions, bits 0..18) the fragment's.
                    map.image_memory().read(u.unwind_info, &mut b).unwrap_or_else(|e| panic!("{}: .xdata at {:#x}: {e}", d.name, u.unwind_info));
                    let header = u32::from_le_bytes(b);
                    assert_eq!((header >> 18) & 3, 0, "{}: .xdata at {:#x} is {header:#x}", d.name, u.unwind_info);
                    assert_eq!(u64::from(header & 0x3ffff) * 4, u.end - u.begin, "{}: .xdata at {:#x} is {header:#x}", d.name, u.unwind_info);
                }
            }
            if crate::process::Memory::read(p, u.unwind_info, &mut b).is_err() {
                unwind_only_in_image_files += 1;
            }
        }
    }
    eprintln!("{checked} addresses inside methods checked; {unwind_only_in_image_files} frames' UNWIND_INFO is only in the image files, not the dump");
}

#[test]
fn addresses_that_are_not_managed_code_are_none() {
    for (d, p) in loaded() {
        let map = dotnet::code_map(p, &d.locator).expect("code map");
        let coreclr = p.modules.iter().find(|m| m.name() == "libcoreclr.so").expect("libcoreclr");
        let stack = p.core.threads.first().map(|t| t.registers.sp()).unwrap_or(0);
        for ip in [0, 1, 0x1000, coreclr.start + 0x1000, coreclr.start + 0x10_0000, stack, 0x0000_1234_5678_0000, u64::MAX, 1 << 57, 0x7fff_ffff_ffff_f000] {
            assert_eq!(map.lookup(ip), None, "{}: {ip:#x} is not managed code", d.name);
        }
        assert_eq!(map.name(0), None);
        assert_eq!(map.name(coreclr.start), None, "{}: a libcoreclr address is no MethodDesc", d.name);
    }
}

#[test]
fn a_process_without_the_runtime_has_no_code_map() {
    let native = repo().join("samples/dumps");
    let Some(core) = std::fs::read_dir(&native).into_iter().flatten().flatten().map(|e| e.path().join("gcore/core.gz")).find(|p| p.is_file()) else {
        knot_samples::skipped("skipping: no committed native dump");
        return;
    };
    let p = Process::open(&core, &Locator::default()).expect("native core");
    assert!(matches!(dotnet::code_map(&p, &Locator::default()), Err(DotnetError::NoRuntime)));
}

// ---------------------------------------------------------------- hostile data

fn core_bytes(d: &Dump) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&d.core).expect("core")).read_to_end(&mut out).expect("gunzip");
    out
}

/// Every SOS IP, the bytes around them, and random addresses, looked up (and named) in `p`:
/// answers may be anything, but nothing panics or hangs.
/// Returns how many lookups found code and how many errors the map kept.
fn probe(p: &Process, locator: &Locator, frames: &[SosFrame], rng: &mut dumpedit::Rng) -> (usize, usize) {
    let Ok(map) = dotnet::code_map(p, locator) else { return (0, 0) };
    let mut found = 0;
    let mut ips: Vec<u64> = frames.iter().flat_map(|f| [f.ip, f.ip.wrapping_sub(1), f.ip + 0x40, f.ip & !0xfff]).collect();
    ips.extend((0..200).map(|_| rng.next() & 0x7fff_ffff_ffff));
    for ip in ips {
        if let Some(c) = map.lookup(ip) {
            found += 1;
            if let Some(md) = c.method {
                let _ = map.name(md);
            }
        }
    }
    (found, map.diagnostics().iter().filter(|d| d.severity == crate::Severity::Warning).count())
}

#[test]
fn damaged_runtime_memory_never_makes_a_lookup_panic() {
    let (d, good) = loaded().iter().find(|(d, _)| d.name == "autofac_container/heap").expect("the autofac dump");
    let frames = sos_frames(d);
    let seed = core_bytes(d);
    let map = dotnet::code_map(good, &d.locator).expect("code map");
    // The structures a lookup reads: code headers, MethodDescs and their chunks, the range
    // section map's pages, in the dump's own bytes.
    let mut targets: Vec<u64> = Vec::new();
    for f in &frames {
        if let Some(c) = map.lookup(f.ip) {
            targets.push(c.method_start.wrapping_sub(8));
            if let Some(md) = c.method {
                targets.extend([md, md.wrapping_sub(24), md & !0xfff]);
            }
        }
    }
    drop(map);
    let loads = dumpedit::loads(&seed);
    let mut rng = dumpedit::Rng(0x9e37_79b9_7f4a_7c15);
    let mut errors = 0;
    for round in 0..6 {
        let mut bytes = seed.clone();
        for &a in &targets {
            if !loads.iter().any(|l| l.contains(a) && l.contains(a + 64)) || !rng.next().is_multiple_of(3) {
                continue;
            }
            let mut garbage = [0u8; 64];
            match round % 3 {
                0 => rng.fill(&mut garbage),
                1 => garbage.fill(0xff),
                _ => {
                    // Plausible-looking pointers back at the same structures: cycles.
                    for w in garbage.chunks_mut(8) {
                        w.copy_from_slice(&targets[(rng.next() as usize) % targets.len()].to_le_bytes());
                    }
                }
            }
            dumpedit::poke(&mut bytes, a, &garbage);
        }
        let core = Core::from_bytes("damaged.core", bytes).expect("still a core");
        let p = Process::from_core(core, &d.locator);
        let started = Instant::now();
        let (_, e) = probe(&p, &d.locator, &frames, &mut rng);
        errors += e;
        assert!(started.elapsed().as_secs() < 60, "round {round}: lookups on damaged memory took {:?}", started.elapsed());
        whole_analysis_survives(&p, &d.locator, &format!("damage round {round}"));
    }
    // The damage reached what lookups read: some were refused with a reason.
    assert!(errors > 0, "no lookup noticed the damage");
}

#[test]
fn a_truncated_dump_never_makes_a_lookup_panic() {
    let (d, _) = loaded().iter().find(|(d, _)| d.name == "autofac_container/heap").expect("the autofac dump");
    let frames = sos_frames(d);
    let seed = core_bytes(d);
    let mut rng = dumpedit::Rng(7);
    for frac in [2, 3, 5, 8] {
        let bytes = seed[..seed.len() * (frac - 1) / frac].to_vec();
        let Ok(core) = Core::from_bytes("cut.core", bytes) else { continue };
        let p = Process::from_core(core, &d.locator);
        probe(&p, &d.locator, &frames, &mut rng);
        whole_analysis_survives(&p, &d.locator, &format!("cut to {}/{frac}", frac - 1));
    }
}

/// A runtime whose ExecutionManager contract knot does not implement (the descriptor JSON in the
/// dump edited to claim version 9): the managed frames cannot be named, and the report says
/// which contract and why, instead of leaving nameless frames unexplained.
#[test]
fn an_unreadable_code_map_is_a_diagnostic_naming_the_contract() {
    let (d, _) = loaded().iter().find(|(d, _)| d.name == "autofac_container/heap").expect("the autofac dump");
    // The descriptor JSON is read from the runtime's file (the dump left that page out): give
    // an edited copy of libcoreclr.so (same build-id) in place of the committed one.
    let dir = std::env::temp_dir().join(format!("knot-em9-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut search_dirs = vec![dir.clone()];
    for s in &d.locator.search_dirs {
        if s.join("libcoreclr.so").is_file() {
            let mut lib = std::fs::read(s.join("libcoreclr.so")).expect("libcoreclr.so");
            let needle = br#""ExecutionManager":2"#;
            let at = lib.windows(needle.len()).position(|w| w == needle).expect("the descriptor JSON names ExecutionManager 2");
            lib[at + needle.len() - 1] = b'9';
            std::fs::write(dir.join("libcoreclr.so"), lib).expect("write");
            for f in std::fs::read_dir(s).expect("runtime dir").flatten().filter(|f| f.file_name() != "libcoreclr.so") {
                std::fs::copy(f.path(), dir.join(f.file_name())).expect("copy");
            }
        } else {
            search_dirs.push(s.clone());
        }
    }
    let locator = Locator { search_dirs, ..d.locator.clone() };
    let p = Process::open(&d.core, &locator).expect("open");
    let report = crate::report_for(&p, &crate::Options { locator, ..Default::default() });
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(report.threads.len(), p.core.threads.len());
    assert!(report.threads.iter().flat_map(|t| &t.frames).all(|f| !f.managed), "no managed frame is named without the code map");
    let said: Vec<&str> = report.diagnostics.iter().map(|d| d.message.as_str()).filter(|m| m.contains("ExecutionManager")).collect();
    assert_eq!(said.len(), 1, "said once: {:?}", report.diagnostics);
    assert!(said[0].contains("managed code not mapped") && said[0].contains("ExecutionManager contract version Some(9) (knot reads 1 and 2)"), "{}", said[0]);
    // The rest of the runtime is still read: the monitors' cycle is there.
    assert!(report.dotnet.as_ref().is_some_and(|n| n.managed_threads > 0));
}

/// The whole pipeline on the damaged process — managed unwinding through the damaged code map,
/// transition Frames, monitors, Task links, managed thread names — ends, with every thread
/// reported, and in bounded time: a partial reading, never a panic or a hang.
fn whole_analysis_survives(p: &Process, locator: &Locator, what: &str) {
    let started = Instant::now();
    let report = crate::report_for(p, &crate::Options { locator: locator.clone(), ..Default::default() });
    assert_eq!(report.threads.len(), p.core.threads.len(), "{what}: every thread is reported");
    assert!(started.elapsed().as_secs() < 120, "{what}: the analysis took {:?}", started.elapsed());
}

// ---------------------------------------------------------------- speed

/// Not a pass/fail bound (the machine is shared): prints lookups per second for the report.
#[test]
fn naming_every_frame_of_the_autofac_dump_is_fast() {
    let (d, p) = loaded().iter().find(|(d, _)| d.name == "autofac_container/heap").expect("the autofac dump");
    let frames = sos_frames(d);
    let started = Instant::now();
    let map = dotnet::code_map(p, &d.locator).expect("code map");
    let opened = started.elapsed();
    let mut named = 0;
    for f in &frames {
        if let Some(n) = map.lookup(f.ip).and_then(|c| c.method).and_then(|m| map.name(m)) {
            named += n.qualified.len().min(1);
        }
    }
    let first = started.elapsed();
    let again = Instant::now();
    for f in &frames {
        let _ = map.lookup(f.ip).and_then(|c| c.method).and_then(|m| map.name(m));
    }
    let cached = again.elapsed();
    // Uncached: a fresh map per pass, so every lookup walks the runtime's structures.
    let uncached_start = Instant::now();
    let fresh = dotnet::code_map(p, &d.locator).expect("code map");
    for f in &frames {
        let _ = fresh.try_lookup(f.ip);
    }
    let uncached = uncached_start.elapsed();
    eprintln!(
        "autofac_container/heap: {} frames, {named} named; code map opened in {opened:?}; first pass (lookup + name) {first:?}; cached pass {cached:?}; uncached lookups {:.0}/s",
        frames.len(),
        frames.len() as f64 / uncached.as_secs_f64().max(1e-9)
    );
    assert_eq!(named, frames.len());
}
