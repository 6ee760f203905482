//! knot's managed stacks against SOS's `clrstack -all` on every .NET dump (issue #5 item 2).
//!
//! For every thread SOS lists (matched by OS thread id), knot's managed frames — the method
//! names, in order — must equal SOS's method lines, and knot's runtime transition records
//! (`[InlinedCallFrame: addr]`) must equal SOS's Frame lines (each distinct record once, in
//! order: SOS prints a P/Invoke's InlinedCallFrame twice, at its native and managed IP). A
//! thread SOS does not list must have no managed frames in knot either.
//!
//! Dumps: `samples/dotnet/dumps/<sample>/<kind>/core.gz` read with the committed runtime and app
//! files only (an empty sysroot hides any installed runtime), and `target/samples/dotnet/`
//! (made by `samples/dotnet/make-dumps.sh`) with the machine's files, and the committed .NET 8
//! dumps (`samples/dotnet/deploy-dumps/net8_*`) with no file at all. SOS's output is
//! `sos/clrstack-all.txt` beside each dump.
//!
//! The native part (frame 0 up to the first managed frame) is checked against gdb where this
//! machine has the files the dump names: gdb cannot unwind managed code, so only that part.

use knot::Options;
use knot::process::{Locator, Process};
use knot::report::{FrameReport, Report};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

struct Dump {
    name: String,
    core: PathBuf,
    dir: PathBuf,
    locator: Locator,
}

fn dumps() -> Vec<Dump> {
    let mut all = knot_samples::dotnet::dumps("sos/clrstack-all.txt", true);
    all.extend(knot_samples::dotnet::net8_dumps("sos/clrstack-all.txt"));
    all.into_iter()
        .map(|d| Dump { name: d.name(), locator: locator(&d), core: d.core, dir: d.dir })
        .collect()
}

fn locator(d: &knot_samples::dotnet::DotnetDump) -> Locator {
    Locator { sysroot: d.sysroot.clone(), search_dirs: d.search_dirs.clone(), ..Locator::default() }
}

impl Dump {
    /// gdb reads cores uncompressed: a committed `core.gz` is unpacked once under target/tmp.
    fn core_unpacked(&self) -> PathBuf {
        if self.core.extension().is_none_or(|e| e != "gz") {
            return self.core.clone();
        }
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dotnet-cores").join(self.name.replace('/', "-"));
        if !out.is_file() {
            std::fs::create_dir_all(out.parent().expect("parent")).expect("temp dir");
            let part = out.with_extension("part");
            let mut d = flate2::read::GzDecoder::new(std::fs::File::open(&self.core).expect("open core"));
            let mut o = std::fs::File::create(&part).expect("create core");
            std::io::copy(&mut d, &mut o).expect("gunzip core");
            std::fs::rename(&part, &out).expect("rename core");
        }
        out
    }
}

/// One thread of `clrstack -all`.
#[derive(Debug, Default)]
struct SosThread {
    methods: Vec<String>,
    /// Each method row's call site without its source line (`Name(Signature)`) and its IP.
    sites: Vec<(String, u64)>,
    /// (kind, address), consecutive repeats merged.
    frames: Vec<(String, u64)>,
}

/// `OS Thread Id: 0x7bac`, then `ChildSP IP CallSite` rows. A method's call site is
/// `Qualified.Name(Signature) [file @ line]`; a Frame's is `[Kind: address]`.
fn parse_clrstack(text: &str) -> BTreeMap<u32, SosThread> {
    let mut out: BTreeMap<u32, SosThread> = BTreeMap::new();
    let mut current = None;
    // SOS puts a warning where a dynamic method's name goes and the name on the next line.
    let mut name_follows = None;
    for line in text.lines() {
        if let Some(ip) = name_follows.take()
            && let Some(tid) = current
        {
            let site = line.trim();
            let t = out.entry(tid).or_default();
            t.methods.push(site.split_once('(').map_or(site, |(n, _)| n).to_string());
            t.sites.push((call_site(site), ip));
            continue;
        }
        if let Some(tid) = line.trim().strip_prefix("OS Thread Id: 0x") {
            let tid = u32::from_str_radix(tid.split_whitespace().next().unwrap_or(""), 16).expect("thread id");
            out.entry(tid).or_default();
            current = Some(tid);
            continue;
        }
        let mut fields = line.trim_start().splitn(3, ' ');
        let (Some(sp), Some(ip), Some(site)) = (fields.next(), fields.next(), fields.next()) else { continue };
        let is_hex = |s: &str| s.len() == 16 && s.chars().all(|c| c.is_ascii_hexdigit());
        let (Some(tid), true, true) = (current, is_hex(sp), is_hex(ip)) else { continue };
        let t = out.entry(tid).or_default();
        let site = site.trim();
        if site.starts_with("SOS Warning:") {
            name_follows = u64::from_str_radix(ip, 16).ok();
        } else if let Some(inner) = site.strip_prefix('[').and_then(|s| s.split_once(']')).map(|(inner, _)| inner) {
            // `[Kind: address]`, for a P/Invoke's InlinedCallFrame followed by the target's name.
            let (kind, addr) = inner.split_once(": ").expect("[Kind: address]");
            let entry = (kind.to_string(), u64::from_str_radix(addr.trim(), 16).expect("frame address"));
            if t.frames.last() != Some(&entry) {
                t.frames.push(entry);
            }
        } else {
            let name = site.split_once('(').map_or(site, |(n, _)| n);
            t.methods.push(name.to_string());
            t.sites.push((call_site(site), u64::from_str_radix(ip, 16).expect("hex ip")));
        }
    }
    out
}

/// A method row's call site without the ` [file @ line]` SOS adds where it has the PDB.
fn call_site(site: &str) -> String {
    match site.rfind(" [") {
        Some(at) if site.ends_with(']') && site[at..].contains(" @ ") => site[..at].to_string(),
        _ => site.to_string(),
    }
}

/// knot's managed frames as SOS's rows: the name with its parameter list, and the IP.
fn knot_sites(frames: &[FrameReport]) -> Vec<(String, u64)> {
    frames
        .iter()
        .filter(|f| f.managed)
        .map(|f| {
            let name = f.function.clone().unwrap_or_else(|| format!("?? at {:#x}", f.ip.0));
            (name + f.signature.as_deref().unwrap_or(""), f.ip.0)
        })
        .collect()
}

fn knot_methods(frames: &[FrameReport]) -> Vec<String> {
    frames.iter().filter(|f| f.managed).map(|f| f.function.clone().unwrap_or_else(|| format!("?? at {:#x}", f.ip.0))).collect()
}

fn knot_transitions(frames: &[FrameReport]) -> Vec<(String, u64)> {
    frames.iter().filter_map(|f| f.transition.as_ref()).map(|t| (t.kind.clone(), t.address.0)).collect()
}

fn report(d: &Dump) -> Report {
    let process = Process::open(&d.core, &d.locator).unwrap_or_else(|e| panic!("{}: knot cannot open the core: {e}", d.name));
    knot::report_for(&process, &Options { locator: d.locator.clone(), stacks_only: true, ..Options::default() })
}

/// Side by side, marking the rows that differ.
fn diff<T: std::fmt::Debug + PartialEq>(sos: &[T], knot: &[T]) -> String {
    diff_as("SOS", sos, knot)
}

fn diff_as<T: std::fmt::Debug + PartialEq>(oracle: &str, sos: &[T], knot: &[T]) -> String {
    let mut s = String::new();
    for i in 0..sos.len().max(knot.len()) {
        let (a, b) = (sos.get(i), knot.get(i));
        let mark = if a == b { " " } else { "≠" };
        let show = |x: Option<&T>| x.map_or("-".to_string(), |x| format!("{x:?}"));
        let _ = writeln!(s, "      {mark} {i:>3}  {oracle} {:<90}  knot {}", show(a), show(b));
    }
    s
}

/// Runs `check` for every thread of every dump; fails listing every mismatch.
fn against_sos<T: std::fmt::Debug + PartialEq>(what: &str, sos_side: impl Fn(&SosThread) -> Vec<T>, knot_side: impl Fn(&[FrameReport]) -> Vec<T>) {
    let dumps = dumps();
    assert!(!dumps.is_empty(), "no .NET dumps: samples/dotnet/dumps is part of the repository");
    let mut failures = String::new();
    let mut compared = 0;
    for d in &dumps {
        let text = std::fs::read_to_string(d.dir.join("sos/clrstack-all.txt")).expect("clrstack-all.txt");
        let sos = parse_clrstack(&text);
        let r = report(d);
        for t in &r.threads {
            let expected = sos.get(&t.tid).map(&sos_side).unwrap_or_default();
            let got = knot_side(&t.frames);
            compared += 1;
            if expected != got {
                let _ = writeln!(failures, "  {} thread {} ({:#x}): {what} differ", d.name, t.tid, t.tid);
                failures.push_str(&diff(&expected, &got));
            }
        }
        for tid in sos.keys().filter(|tid| !r.threads.iter().any(|t| t.tid == **tid)) {
            let _ = writeln!(failures, "  {}: SOS lists thread {tid:#x}, which knot does not have", d.name);
        }
    }
    eprintln!("compared {what} of {compared} threads in {} dumps", dumps.len());
    assert!(failures.is_empty(), "knot's {what} differ from SOS's clrstack -all:\n{failures}");
}

#[test]
fn managed_frames_equal_sos_clrstack_all() {
    against_sos("managed frames", |t| t.methods.clone(), knot_methods);
}

/// Each managed row whole, as SOS prints it: the parameter list in the runtime's signature
/// format (a type argument that is a nested type by its own name, issue #30 item 5) and the IP
/// (above an InlinedCallFrame, the record's return address, item 6), so `+ offset` is SOS's.
#[test]
fn managed_call_sites_and_ips_equal_sos_clrstack_all() {
    against_sos("managed call sites and IPs", |t| t.sites.clone(), knot_sites);
}

#[test]
fn transition_frames_equal_sos_clrstack_all() {
    against_sos("transition frames", |t| t.frames.clone(), knot_transitions);
}

#[test]
fn clrstack_parser_reads_methods_generics_and_frames() {
    let text = "OS Thread Id: 0x7bac\n        Child SP               IP Call Site\n\
        00007FFFCDA765A8 00007f90e8bc3f16 [InlinedCallFrame: 00007fffcda765a8] \n\
        00007FFFCDA765A8 00007f9069489ed7 [InlinedCallFrame: 00007fffcda765a8] Knot.Samples.PInvokeMutex.Native.KnotLock()\n\
        00007FFFCDA76590 00007F9069489ED7 System.Threading.Thread.Join(Int32)\n\
        00007FFFCDA76650 00007F906A2739DD Autofac.ResolutionExtensions.Resolve[[System.__Canon, System.Private.CoreLib]](Autofac.IComponentContext) [/p/Program.cs @ 35]\n\
        00007FDC1787EC30 00007FE81133007F SOS Warning: Loading symbols for dynamic assemblies is not yet supported\n\
        DynamicClass.lambda_method1(System.Runtime.CompilerServices.Closure, System.Object[])\n\
        OS Thread Id: 0x7bb6\n";
    let t = parse_clrstack(text);
    assert_eq!(t.keys().copied().collect::<Vec<_>>(), [0x7bac, 0x7bb6]);
    assert_eq!(t[&0x7bac].methods, ["System.Threading.Thread.Join", "Autofac.ResolutionExtensions.Resolve[[System.__Canon, System.Private.CoreLib]]", "DynamicClass.lambda_method1"]);
    assert_eq!(t[&0x7bac].frames, [("InlinedCallFrame".to_string(), 0x7fff_cda7_65a8)]);
    assert_eq!(t[&0x7bac].sites[1], ("Autofac.ResolutionExtensions.Resolve[[System.__Canon, System.Private.CoreLib]](Autofac.IComponentContext)".to_string(), 0x7F90_6A27_39DD));
    assert_eq!(t[&0x7bac].sites[2], ("DynamicClass.lambda_method1(System.Runtime.CompilerServices.Closure, System.Object[])".to_string(), 0x7FE8_1133_007F));
    assert!(t[&0x7bb6].methods.is_empty());
}

// ---------------------------------------------------------------- the native part against gdb

/// gdb's `thread apply all bt`: per LWP, the pc of every frame it prints one for (`#N 0x… in`),
/// after frame 0, up to and including the first in no module (`?? ()` with no `from`): gdb cannot unwind
/// managed code, so what follows is garbage.
fn gdb_native_prefixes(core: &Path) -> Option<BTreeMap<u32, Vec<u64>>> {
    let exe = Path::new("/usr/share/dotnet/dotnet");
    if !exe.is_file() {
        return None;
    }
    let out = std::process::Command::new("gdb")
        .args(["-batch", "-nx", "-ex", "set debuginfod enabled off", "-ex", "thread apply all bt 64"])
        .arg(exe)
        .arg(core)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut threads: BTreeMap<u32, (Vec<u64>, bool)> = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(lwp) = line.strip_prefix("Thread ").and_then(|l| l.split_once("(LWP ")).and_then(|(_, r)| r.split(')').next()) {
            current = lwp.trim().parse::<u32>().ok();
            if let Some(t) = current {
                threads.insert(t, (Vec::new(), false));
            }
            continue;
        }
        let (Some(tid), Some(rest)) = (current, line.strip_prefix('#')) else { continue };
        let Some((n, frame)) = rest.split_once(' ') else { continue };
        // Frame 0's pc is the thread's own, printed only when not at a line's start.
        if n == "0" {
            continue;
        }
        let Some((pc, what)) = frame.trim_start().split_once(" in ") else { continue };
        let Ok(pc) = u64::from_str_radix(pc.trim_start_matches("0x"), 16) else { continue };
        let Some((pcs, done)) = threads.get_mut(&tid) else { continue };
        if *done {
            continue;
        }
        pcs.push(pc);
        *done = what.starts_with("?? ()") && !what.contains(" from ");
    }
    Some(threads.into_iter().map(|(t, (pcs, _))| (t, pcs)).collect())
}

/// knot's frames the same way: one pc per real frame after frame 0 (inlined frames share
/// theirs), up to and including the first managed frame; and whether that frame follows a
/// transition record. There knot gives the record's return address, as SOS does (issue #30
/// item 6), where gdb gives the native callee's (the P/Invoke target's return, a few
/// instructions on in the same method): that one pc is compared with SOS, not gdb.
fn knot_native_prefix(frames: &[FrameReport]) -> (Vec<u64>, bool) {
    let mut pcs: Vec<u64> = Vec::new();
    let mut last = frames.first().map(|f| f.ip.0);
    let mut after_transition = false;
    for f in frames {
        if f.transition.is_some() {
            after_transition = true;
            continue;
        }
        if Some(f.ip.0) != last {
            pcs.push(f.ip.0);
            last = Some(f.ip.0);
        }
        if f.managed {
            return (pcs, after_transition);
        }
        after_transition = false;
    }
    (pcs, false)
}

#[test]
fn native_frames_up_to_managed_code_equal_gdb() {
    let mut compared = 0;
    let mut failures = String::new();
    // .NET 8's dumps are compressed with zstd, which gdb does not read.
    for d in dumps().into_iter().filter(|d| !d.name.contains("(made here)") && !d.name.starts_with("net8_")) {
        // gdb reads the machine's files: compare only where they are the dump's own (knot,
        // reading the same files, loads every module rather than refusing a different build).
        let machine = Options::default();
        let process = Process::open(&d.core, &machine.locator).expect("core");
        if process.modules.iter().any(|m| m.file.is_none() && m.name() != "[vdso]") {
            knot_samples::skipped(&format!("skipping gdb on {}: this machine does not have every file the dump names", d.name));
            continue;
        }
        let Some(gdb) = gdb_native_prefixes(&d.core_unpacked()) else {
            knot_samples::skipped(&format!("skipping gdb on {}: no gdb or no dotnet host here", d.name));
            continue;
        };
        let r = knot::report_for(&process, &Options { stacks_only: true, ..machine });
        for t in &r.threads {
            let Some(expected) = gdb.get(&t.tid) else { continue };
            // Only stacks that reach managed code: the part gdb can see is then bounded.
            if !t.frames.iter().any(|f| f.managed) {
                continue;
            }
            let (mut got, after_transition) = knot_native_prefix(&t.frames);
            let mut expected = expected.clone();
            if after_transition && got.len() == expected.len() {
                got.pop();
                expected.pop();
            }
            compared += 1;
            if expected != got {
                let _ = writeln!(failures, "  {} thread {}: native frames up to managed code differ from gdb", d.name, t.tid);
                let hex = |v: &[u64]| v.iter().map(|p| format!("{p:#x}")).collect::<Vec<_>>();
                failures.push_str(&diff_as("gdb", &hex(&expected), &hex(&got)));
            }
        }
    }
    eprintln!("compared the native part of {compared} threads with gdb");
    assert!(failures.is_empty(), "{failures}");
}
