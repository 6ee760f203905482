//! Tests on real binaries: a tiny C file compiled with gcc, and a live deadlock dumped with
//! gcore and compared frame by frame with gdb. Each skips, saying why, when gcc, gdb or gcore
//! is missing or cannot run here.

use super::*;
use crate::process::{ElfFile, Locator};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("knot-symbols-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether `tool` is an executable file on `PATH`.
fn have(tool: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = std::env::var_os("PATH") else { return false };
    std::env::split_paths(&path).any(|d| std::fs::metadata(d.join(tool)).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

fn gcc(dir: &Path, name: &str, source: &str, flags: &[&str]) -> Option<PathBuf> {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).ok()?;
    let out = dir.join(name);
    // Relative source name, as a build would have it: gdb shows `name.c`.
    let status = Command::new("gcc").current_dir(dir).args(flags).arg(format!("{name}.c")).arg("-o").arg(&out).status().ok()?;
    status.success().then_some(out)
}

fn line_of(source: &str, marker: &str) -> u32 {
    source.lines().position(|l| l.contains(marker)).map(|i| i as u32 + 1).expect("marker in source")
}

const INLINE_C: &str = r#"
volatile int sink;
static inline __attribute__((always_inline)) void inner(int x) {
    sink = x * 3;
    __asm__ volatile(".globl inner_marker\ninner_marker: nop"); /* INNER */
    sink = x + 1;
}
__attribute__((noinline)) void outer(int x) {
    sink = 7;
    inner(x); /* CALL */
    sink = 9;
}
int main(void) { outer(sink); return 0; }
"#;

#[test]
fn inlined_function_yields_inner_then_outer_with_lines() {
    if !have("gcc") {
        eprintln!("skipped: gcc is not available");
        return;
    }
    let dir = Scratch::new("inline");
    let Some(bin) = gcc(&dir.0, "inl", INLINE_C, &["-g", "-O2"]) else {
        eprintln!("skipped: gcc could not build the test program");
        return;
    };
    let file = ElfFile::open(&bin).expect("open the binary");
    let syms = FileSymbols::read(&file, false);
    let marker = symbol_address(&file, "inner_marker")
        .expect("inner_marker in .symtab");
    let outer_addr = symbol_address(&file, "outer").expect("outer in .symtab");

    // The label inside `outer` does not take its name: `outer` is sized and covers it.
    let hit = syms.text.lookup(marker).expect("a symbol covers the marker");
    assert_eq!(hit.sym.full_name(), "outer");
    assert_eq!(hit.source, NameSource::Symtab);

    let dwarf = Dwarf::load([&file]).expect("DWARF in a -g build");
    let mut frames = Vec::new();
    dwarf.frames(marker, &mut frames).expect("lookup");
    let got: Vec<_> = frames.iter().map(|f| (f.function.as_deref(), f.file.as_deref(), f.line)).collect();
    assert_eq!(
        got,
        vec![
            (Some("inner"), Some("inl.c"), Some(line_of(INLINE_C, "INNER"))),
            (Some("outer"), Some("inl.c"), Some(line_of(INLINE_C, "CALL"))),
        ]
    );
    assert!(frames.iter().all(|f| f.source == NameSource::Dwarf));
    assert!(outer_addr < marker);
}

/// The address of `name` in the file's `.symtab`, read independently of [`symtab`].
fn symbol_address(file: &ElfFile, name: &str) -> Option<u64> {
    symbol_address_where(file, |n| n == name.as_bytes())
}

/// The address of the first `.symtab` symbol whose name passes `pick`.
fn symbol_address_where(file: &ElfFile, pick: impl Fn(&[u8]) -> bool) -> Option<u64> {
    let (_, section) = file.section_by_name(".symtab")?;
    let data = file.section(".symtab")?;
    let strtab = file.section_data(section.link as usize)?;
    data.chunks_exact(24).find_map(|e| {
        let off = u32::from_le_bytes(e[0..4].try_into().ok()?) as usize;
        let rest = strtab.get(off..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        let value = u64::from_le_bytes(e[8..16].try_into().unwrap_or_default());
        (pick(&rest[..end]) && value != 0).then_some(value)
    })
}

/// The outer function's name at `addr`, from DWARF alone.
fn dwarf_function(dwarf: &Dwarf<'_>, addr: u64) -> Option<String> {
    let mut frames = Vec::new();
    dwarf.frames(addr, &mut frames).ok()?;
    frames.pop()?.function
}

fn contains(hay: &[u8], needle: &str) -> bool {
    memchr::memmem::find(hay, needle.as_bytes()).is_some()
}

#[test]
fn cpp_names_follow_gdb_without_gdb() {
    if !have("g++") {
        eprintln!("skipped: g++ is not available");
        return;
    }
    let dir = Scratch::new("cpp-names");
    std::fs::write(dir.0.join("names.cpp"), DEADLOCK_CPP).expect("write source");
    let bin = dir.0.join("names");
    let built = Command::new("g++").current_dir(&dir.0).args(["-g", "-O0", "-pthread", "names.cpp", "-o"]).arg(&bin).status();
    if !built.is_ok_and(|s| s.success()) {
        eprintln!("skipped: g++ could not build the test program");
        return;
    }
    let file = ElfFile::open(&bin).expect("open");
    let dwarf = Dwarf::load([&file]).expect("DWARF");
    let at = |pick: &dyn Fn(&[u8]) -> bool| symbol_address_where(&file, pick).expect("symbol") + 1;
    // No linkage name (internal linkage): scopes from the DIE tree.
    let worker = at(&|n| contains(n, "12_GLOBAL__N_16worker"));
    assert_eq!(dwarf_function(&dwarf, worker).as_deref(), Some("bank::(anonymous namespace)::worker"));
    // A template over a lambda: gdb's physname keeps its parameters.
    let run = at(&|n| contains(n, "_State_impl") && contains(n, "_M_runEv"));
    assert_eq!(
        dwarf_function(&dwarf, run).as_deref(),
        Some("std::thread::_State_impl<std::thread::_Invoker<std::tuple<main()::<lambda()> > > >::_M_run(void)")
    );
    let invoke = at(&|n| contains(n, "__invoke_impl"));
    assert_eq!(
        dwarf_function(&dwarf, invoke).as_deref(),
        Some("std::__invoke_impl<void, main()::<lambda()> >(std::__invoke_other, struct {...} &&)")
    );
    // A linkage name: demangled, without parameters or return type.
    let deposit = at(&|n| n == b"_ZN4bank7Account7depositIlEEvT_");
    assert_eq!(dwarf_function(&dwarf, deposit).as_deref(), Some("bank::Account::deposit<long>"));
    let transfer = at(&|n| n == b"_ZNK4bank7Account8transferERS0_l");
    assert_eq!(dwarf_function(&dwarf, transfer).as_deref(), Some("bank::Account::transfer"));
    assert_eq!(dwarf_function(&dwarf, at(&|n| n == b"main")).as_deref(), Some("main"));
}

#[test]
fn rust_names_follow_gdb_without_gdb() {
    if !have("rustc") {
        eprintln!("skipped: rustc is not available");
        return;
    }
    let dir = Scratch::new("rust-names");
    std::fs::write(dir.0.join("deadlock.rs"), DEADLOCK_RS).expect("write source");
    let bin = dir.0.join("deadlock");
    let built = Command::new("rustc").current_dir(&dir.0).args(["-g", "-C", "opt-level=0", "deadlock.rs", "-o"]).arg(&bin).output();
    if !built.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: rustc could not build the test program");
        return;
    }
    let file = ElfFile::open(&bin).expect("open");
    let dwarf = Dwarf::load([&file]).expect("DWARF");
    let at = |pick: &dyn Fn(&[u8]) -> bool| symbol_address_where(&file, pick).expect("symbol") + 1;
    let go = at(&|n| contains(n, "deadlock..Transfer$GT$2go17h"));
    assert_eq!(dwarf_function(&dwarf, go).as_deref(), Some("deadlock::{impl#0}::go"));
    let generic = at(&|n| contains(n, "8deadlock7generic17h"));
    assert_eq!(dwarf_function(&dwarf, generic).as_deref(), Some("deadlock::generic<deadlock::Bank>"));
    let main = at(&|n| contains(n, "8deadlock4main17h"));
    assert_eq!(dwarf_function(&dwarf, main).as_deref(), Some("deadlock::main"));
}

#[test]
fn plt_entries_are_named_as_gdb_names_them() {
    if !have("gcc") {
        eprintln!("skipped: gcc is not available");
        return;
    }
    let dir = Scratch::new("plt");
    // The classic lazy PLT, and the IBT one (`.plt.sec`).
    for (name, flags) in [("plt", &["-g", "-O2", "-pthread"][..]), ("ibt", &["-g", "-O2", "-pthread", "-fcf-protection=full", "-Wl,-z,ibtplt"][..])] {
        match gcc(&dir.0, name, DEADLOCK_C, flags) {
            Some(bin) => check_plt_against_gdb(&bin),
            None => eprintln!("{name}: gcc could not build the test program; case skipped"),
        }
    }
}

fn check_plt_against_gdb(bin: &Path) {
    let file = ElfFile::open(bin).expect("open");
    let syms = FileSymbols::read(&file, false);
    let addrs: Vec<u64> = file
        .sections
        .iter()
        .filter(|s| matches!(s.name.as_str(), ".plt" | ".plt.sec" | ".plt.got"))
        .flat_map(|s| s.addr..s.addr + s.size)
        .collect();
    let ours: Vec<Option<(String, u64)>> =
        addrs.iter().map(|&a| syms.text.lookup(a).map(|h| (h.sym.full_name().into_owned(), a - h.sym.addr))).collect();
    assert!(ours.iter().flatten().any(|(n, off)| n == "pthread_mutex_lock@plt" && *off == 0), "{ours:?}");
    if !have("gdb") {
        eprintln!("gdb is not available: not compared");
        return;
    }
    let mut cmd = Command::new("gdb");
    cmd.args(["-nx", "-batch", "-iex", "set debuginfod enabled off"]);
    for a in &addrs {
        cmd.arg("-ex").arg(format!("info symbol {a:#x}"));
    }
    let out = cmd.arg(bin).stdin(Stdio::null()).output().expect("run gdb");
    let text = String::from_utf8_lossy(&out.stdout);
    let theirs: Vec<Option<(String, u64)>> = text
        .lines()
        .filter(|l| l.starts_with("No symbol matches") || l.contains(" in section "))
        .map(|l| {
            let sym = l.split(" in section ").next().filter(|_| !l.starts_with("No symbol"))?;
            Some(match sym.split_once(" + ") {
                Some((name, off)) => (name.to_string(), off.parse().ok()?),
                None => (sym.to_string(), 0),
            })
        })
        .collect();
    assert_eq!(theirs.len(), addrs.len(), "gdb answered {} of {} queries:\n{text}", theirs.len(), addrs.len());
    eprintln!("{} PLT addresses compared with gdb", addrs.len());
    for ((a, o), t) in addrs.iter().zip(&ours).zip(&theirs) {
        assert_eq!(o, t, "at {a:#x}");
    }
}

#[test]
fn garbage_sections_never_panic() {
    // Noise in place of DWARF or symbol-table sections: reading and every lookup must go on.
    if !have("gcc") || !have("objcopy") {
        eprintln!("skipped: gcc or objcopy is not available");
        return;
    }
    let dir = Scratch::new("garbage");
    let Some(bin) = gcc(&dir.0, "g", INLINE_C, &["-g", "-O2"]) else {
        eprintln!("skipped: gcc could not build the test program");
        return;
    };
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut noise = |len: usize| -> Vec<u8> {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect()
    };
    let sections = [".debug_info", ".debug_abbrev", ".debug_line", ".debug_str", ".debug_line_str", ".debug_rnglists", ".symtab", ".strtab"];
    for (n, section) in sections.iter().enumerate() {
        for size in [7usize, 24 * 5, 4096] {
            let noise_path = dir.0.join("noise");
            std::fs::write(&noise_path, noise(size)).expect("write noise");
            let broken = dir.0.join(format!("broken{n}-{size}"));
            let ok = Command::new("objcopy")
                .arg(format!("--update-section={section}={}", noise_path.display()))
                .arg(&bin)
                .arg(&broken)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                eprintln!("objcopy could not replace {section}; case skipped");
                continue;
            }
            let Ok(file) = ElfFile::open(&broken) else { continue };
            let syms = FileSymbols::read(&file, false);
            let dwarf = Dwarf::load([&file]);
            let mut out = Vec::new();
            for addr in (0..0x3000u64).step_by(3) {
                let _ = syms.text.lookup(addr);
                let _ = syms.data.lookup(addr + 0x3000);
                if let Some(d) = &dwarf {
                    out.clear();
                    let _ = d.frames(addr, &mut out);
                }
            }
        }
    }
}

/// One frame as gdb's Python API reports it.
#[derive(Debug, Clone)]
struct GdbFrame {
    pc: u64,
    inline: bool,
    sigtramp: bool,
    tailcall: bool,
    name: Option<String>,
    file: Option<String>,
    line: Option<u32>,
}

/// Prints every thread's frames, then the value of each expression in `knot_exprs`.
const GDB_DUMP_PY: &str = r#"
import gdb
for inf in gdb.inferiors():
    for th in sorted(inf.threads(), key=lambda t: t.num):
        th.switch()
        print("T\t%d" % th.ptid[1])
        f = gdb.newest_frame()
        n = 0
        while f is not None and n < 200:
            sal = f.find_sal()
            fn = sal.symtab.filename if sal.symtab is not None else ""
            print("F\t%x\t%d\t%d\t%d\t%s\t%s\t%d" % (f.pc(), int(f.type() == gdb.INLINE_FRAME), int(f.type() == gdb.SIGTRAMP_FRAME), int(f.type() == gdb.TAILCALL_FRAME), f.name() or "", fn, sal.line))
            try:
                f = f.older()
            except gdb.error:
                f = None
            n += 1
for i, e in enumerate(knot_exprs):
    try:
        print("A\t%d\t%x" % (i, int(gdb.parse_and_eval("(unsigned long)(%s)" % e))))
    except gdb.error:
        pass
"#;

type Threads = Vec<(u32, Vec<GdbFrame>)>;

/// What gdb says of a core: every thread's frames, and the value of each expression asked for.
struct GdbDump {
    threads: Threads,
    values: Vec<Option<u64>>,
}

/// Runs gdb on `core` of `binary`. With `no_debug_files`, gdb looks for no separate debug files
/// (as knot with `no_default_debug_dir`).
fn gdb_dump(dir: &Path, binary: &Path, core: &Path, no_debug_files: bool, exprs: &[&str]) -> Option<GdbDump> {
    let script = dir.join("dump.py");
    std::fs::write(&script, GDB_DUMP_PY).ok()?;
    let debug_dir = if no_debug_files { dir.join("no-debug-files") } else { PathBuf::from(crate::process::locate::DEFAULT_DEBUG_DIR) };
    let exprs_py = exprs.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>().join(", ");
    let out = Command::new("gdb")
        .args(["-nx", "-batch", "-iex"])
        .arg(format!("set debug-file-directory {}", debug_dir.display()))
        .args(["-iex", "set debuginfod enabled off", "-ex", "set pagination off", "-ex", "set width 0", "-ex"])
        .arg(format!("python knot_exprs = [{exprs_py}]"))
        .arg("-ex")
        .arg(format!("source {}", script.display()))
        .arg(binary)
        .arg(core)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if std::env::var_os("KNOT_GDB_VERBOSE").is_some() {
        eprintln!("gdb: {}\n{}", String::from_utf8_lossy(&out.stderr), text);
    }
    let mut threads: Threads = Vec::new();
    let mut values = vec![None; exprs.len()];
    for line in text.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        match cols.as_slice() {
            ["T", tid] => threads.push((tid.parse().ok()?, Vec::new())),
            ["F", pc, inline, sigtramp, tailcall, name, file, l] => threads.last_mut()?.1.push(GdbFrame {
                pc: u64::from_str_radix(pc, 16).ok()?,
                inline: *inline == "1",
                sigtramp: *sigtramp == "1",
                tailcall: *tailcall == "1",
                name: (!name.is_empty()).then(|| name.to_string()),
                file: (!file.is_empty()).then(|| file.to_string()),
                line: l.parse().ok().filter(|&l: &u32| l != 0),
            }),
            ["A", i, v] => {
                if let (Ok(i), Ok(v)) = (i.parse::<usize>(), u64::from_str_radix(v, 16))
                    && let Some(slot) = values.get_mut(i)
                {
                    *slot = Some(v);
                }
            }
            _ => {}
        }
    }
    (!threads.is_empty()).then_some(GdbDump { threads, values })
}

/// Compares knot's frames with gdb's for every thread; returns the mismatches, and the number
/// of frames compared.
fn compare_with_gdb(process: &Process, threads: &Threads) -> (Vec<String>, usize) {
    let symbolizer = Symbolizer::new(process);
    let mut mismatches = Vec::new();
    let mut compared = 0;
    for (tid, frames) in threads {
        let mut i = 0;
        let mut after_sigtramp = true; // frame #0 is exact
        let mut first = true;
        while i < frames.len() {
            // One real frame and the frames inlined into it share a pc.
            let end = frames[i..].iter().position(|f| !f.inline).map_or(frames.len(), |p| i + p + 1);
            let chain = &frames[i..end];
            let pc = chain[0].pc;
            let is_return = !first && !after_sigtramp;
            // A tail-call frame is named at its pc - 1, by the innermost function there.
            let got = match chain.last() {
                Some(f) if f.tailcall => Symbolized { module: None, frames: vec![symbolizer.tail_call_frame(pc).frame] },
                _ => symbolizer.symbolize(pc, is_return),
            };
            if std::env::var_os("KNOT_GDB_VERBOSE").is_some() {
                eprintln!("thread {tid} pc {pc:#x} ret={is_return}: {:?}", got.frames);
            }
            let want: Vec<(Option<&str>, Option<&str>, Option<u32>)> =
                chain.iter().map(|f| (f.name.as_deref(), f.file.as_deref(), f.line)).collect();
            let have: Vec<(Option<&str>, Option<&str>, Option<u32>)> =
                got.frames.iter().map(|f| (f.function.as_deref(), f.file.as_deref(), f.line)).collect();
            let want_names: Vec<_> = want.iter().map(|w| w.0).collect();
            let have_names: Vec<_> = have.iter().map(|h| h.0).collect();
            let unnamed = want_names == [None] && have.iter().all(|h| h.0.is_none());
            if !unnamed && want != have {
                mismatches.push(format!("thread {tid} pc {pc:#x}: gdb {want:?}, knot {have:?}"));
            } else if !unnamed && want_names != have_names {
                mismatches.push(format!("thread {tid} pc {pc:#x}: gdb names {want_names:?}, knot {have_names:?}"));
            }
            compared += chain.len();
            after_sigtramp = chain.last().is_some_and(|f| f.sigtramp);
            first = false;
            i = end;
        }
    }
    (mismatches, compared)
}

const DEADLOCK_C: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t lock_b = PTHREAD_MUTEX_INITIALIZER;
struct pair { long tag; pthread_mutex_t m; } pairs[2] = { { 1, PTHREAD_MUTEX_INITIALIZER }, { 2, PTHREAD_MUTEX_INITIALIZER } };
static pthread_barrier_t barrier;
static inline __attribute__((always_inline)) void take(pthread_mutex_t *m) { pthread_mutex_lock(m); }
__attribute__((noinline)) static void *first(void *p) { pthread_mutex_lock(&lock_a); pthread_barrier_wait(&barrier); take(&lock_b); return p; }
__attribute__((noinline)) static void *second(void *p) { pthread_mutex_lock(&lock_b); pthread_barrier_wait(&barrier); take(&lock_a); return p; }
int main(void) {
    pthread_t a, b;
    pthread_barrier_init(&barrier, 0, 2);
    pthread_create(&a, 0, first, 0);
    pthread_create(&b, 0, second, 0);
    usleep(200 * 1000);
    printf("ready %d\n", getpid());
    fflush(stdout);
    pthread_join(a, 0);
    pthread_join(b, 0);
    return 0;
}
"#;

/// Runs `binary` until it prints `ready`, dumps it with gcore and kills it.
fn dump_live(dir: &Path, binary: &Path) -> Result<PathBuf, String> {
    use std::io::BufRead;
    let mut child = Command::new(binary).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().map_err(|e| format!("cannot run: {e}"))?;
    let pid = child.id();
    let ready = child.stdout.take().and_then(|s| std::io::BufReader::new(s).lines().next()).and_then(Result::ok);
    let result = match ready {
        Some(l) if l.starts_with("ready") => {
            let prefix = dir.join("core");
            let out = Command::new("gcore").arg("-o").arg(&prefix).arg(pid.to_string()).stdin(Stdio::null()).output();
            let core = dir.join(format!("core.{pid}"));
            match out {
                Ok(_) if core.exists() => Ok(core),
                Ok(o) => Err(format!("gcore made no core: {}", String::from_utf8_lossy(&o.stderr).trim())),
                Err(e) => Err(format!("cannot run gcore: {e}")),
            }
        }
        _ => Err("the program did not get ready".into()),
    };
    let _ = child.kill();
    let _ = child.wait();
    result
}

const DEADLOCK_CPP: &str = r#"
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <unistd.h>
namespace bank {
struct Account {
    std::mutex m;
    long balance = 0;
    template <typename T> void deposit(T v) { std::lock_guard<std::mutex> g(m); balance += v; }
    void transfer(Account &other, long v) const;
};
__attribute__((noinline)) void Account::transfer(Account &other, long v) const {
    std::lock_guard<std::mutex> g(const_cast<std::mutex &>(m));
    usleep(100000);
    other.deposit(v);
}
namespace {
__attribute__((noinline)) void worker(Account *x, Account *y) { x->transfer(*y, 5); }
}
}
std::mutex cvm;
std::condition_variable cv;
int main() {
    static bank::Account p, q;
    std::thread t1([&] { bank::worker(&p, &q); });
    std::thread t2([&] { bank::worker(&q, &p); });
    std::thread t3([&] { std::unique_lock<std::mutex> l(cvm); cv.wait(l); });
    usleep(300000);
    printf("ready %d\n", getpid());
    fflush(stdout);
    t1.join();
    t2.join();
    t3.join();
}
"#;

const DEADLOCK_RS: &str = r#"
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;
struct Bank { a: Mutex<u64>, b: Mutex<u64> }
trait Transfer { fn go(&self, first: bool); }
impl Transfer for Bank {
    #[inline(never)]
    fn go(&self, first: bool) {
        let (x, y) = if first { (&self.a, &self.b) } else { (&self.b, &self.a) };
        let _g = x.lock().unwrap();
        thread::sleep(Duration::from_millis(100));
        let _h = y.lock().unwrap();
    }
}
fn generic<T: Transfer>(t: &T, f: bool) { t.go(f) }
fn main() {
    let bank = Arc::new(Bank { a: Mutex::new(0), b: Mutex::new(0) });
    let b1 = bank.clone();
    let t1 = thread::spawn(move || generic(&*b1, true));
    let b2 = bank.clone();
    let t2 = thread::spawn(move || generic(&*b2, false));
    thread::sleep(Duration::from_millis(300));
    println!("ready {}", std::process::id());
    use std::io::Write;
    std::io::stdout().flush().unwrap();
    t1.join().unwrap();
    t2.join().unwrap();
}
"#;

/// A program built, run until ready, and dumped.
struct Live {
    dir: Scratch,
    bin: PathBuf,
    core: PathBuf,
}

/// Builds `source` with `compiler` (`gcc`, `g++`, `rustc`) and `flags`, runs it and dumps it;
/// `Err` says why the test cannot run here.
fn live(tag: &str, compiler: &str, file_name: &str, source: &str, flags: &[&str]) -> Result<Live, String> {
    for tool in [compiler, "gdb", "gcore"] {
        if !have(tool) {
            return Err(format!("{tool} is not available"));
        }
    }
    let dir = Scratch::new(tag);
    std::fs::write(dir.0.join(file_name), source).map_err(|e| e.to_string())?;
    let bin = dir.0.join("prog");
    // A relative source name, as a build would have it: gdb shows `deadlock.c`.
    let built = Command::new(compiler).current_dir(&dir.0).args(flags).arg(file_name).arg("-o").arg(&bin).output();
    match built {
        Ok(o) if o.status.success() => {}
        Ok(o) => return Err(format!("{compiler} could not build the test program: {}", String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => return Err(format!("cannot run {compiler}: {e}")),
    }
    let core = dump_live(&dir.0, &bin)?;
    Ok(Live { dir, bin, core })
}

/// Compares knot with gdb on `live`'s core: with separate debug files, and first also without
/// them when `also_without_debug_files`. Returns the process (with debug files) and gdb's answers,
/// the values of `exprs` included.
fn check_live(live: &Live, also_without_debug_files: bool, exprs: &[&str]) -> Option<(Process, GdbDump)> {
    let modes: &[bool] = if also_without_debug_files { &[true, false] } else { &[false] };
    let mut last = None;
    for &no_debug_files in modes {
        // gdb has been seen, rarely, to print nothing from the script: try twice.
        let dump = gdb_dump(&live.dir.0, &live.bin, &live.core, no_debug_files, exprs)
            .or_else(|| gdb_dump(&live.dir.0, &live.bin, &live.core, no_debug_files, exprs));
        let Some(dump) = dump else {
            eprintln!("skipped: gdb gave no frames");
            return None;
        };
        let locator = Locator { no_default_debug_dir: no_debug_files, ..Locator::default() };
        let process = Process::open(&live.core, &locator).expect("open the core");
        let (mismatches, compared) = compare_with_gdb(&process, &dump.threads);
        eprintln!("no_debug_files={no_debug_files}: {compared} frames compared");
        assert!(compared >= 8, "too few frames compared: {:?}", dump.threads);
        assert!(mismatches.is_empty(), "{} of {compared} frames differ from gdb:\n{}", mismatches.len(), mismatches.join("\n"));
        last = Some((process, dump));
    }
    last
}

/// Every function name knot gives at gdb's frames, outer frames of each chain included.
fn all_names(symbolizer: &Symbolizer<'_>, threads: &Threads) -> Vec<String> {
    let mut names = Vec::new();
    for (_, frames) in threads {
        for (i, f) in frames.iter().enumerate() {
            names.extend(symbolizer.symbolize(f.pc, i > 0).frames.into_iter().filter_map(|s| s.function));
        }
    }
    names
}

#[test]
fn live_c_deadlock_matches_gdb() {
    let live = match live("c", "gcc", "deadlock.c", DEADLOCK_C, &["-g", "-O2", "-pthread"]) {
        Ok(l) => l,
        Err(why) => return eprintln!("skipped: {why}"),
    };
    let exprs = ["&lock_a", "&pairs[1].m", "&pairs"];
    let Some((process, dump)) = check_live(&live, true, &exprs) else { return };
    let threads = &dump.threads;

    // Our own functions, whatever libc's debug files: the inlined `take` in `first`/`second`.
    let symbolizer = Symbolizer::new(&process);
    let chains: Vec<Vec<String>> = threads
        .iter()
        .flat_map(|(_, frames)| frames.iter().filter(|f| f.name.as_deref() == Some("take")))
        .map(|f| symbolizer.symbolize(f.pc, true).frames.iter().filter_map(|s| s.function.clone()).collect())
        .collect();
    assert!(chains.contains(&vec!["take".to_string(), "first".to_string()]), "{chains:?}");
    assert!(chains.contains(&vec!["take".to_string(), "second".to_string()]), "{chains:?}");

    // Data symbols: the locks, and a lock inside an array of structs.
    let [Some(lock_a), Some(m1), Some(pairs)] = dump.values[..] else { panic!("gdb printed no addresses: {:?}", dump.values) };
    assert_eq!(symbolizer.data_symbol(lock_a), Some(("lock_a".into(), 0)));
    assert_eq!(symbolizer.data_symbol(lock_a + 8), Some(("lock_a".into(), 8)));
    assert_eq!(symbolizer.data_symbol(m1), Some(("pairs".into(), m1 - pairs)));
}

#[test]
fn live_cpp_deadlock_matches_gdb() {
    for (tag, opt) in [("cpp-o2", "-O2"), ("cpp-o0", "-O0")] {
        let live = match live(tag, "g++", "deadlock.cpp", DEADLOCK_CPP, &["-g", opt, "-pthread"]) {
            Ok(l) => l,
            Err(why) => return eprintln!("skipped: {why}"),
        };
        let Some((process, dump)) = check_live(&live, false, &["&'main::p'"]) else { return };
        let symbolizer = Symbolizer::new(&process);
        let names = all_names(&symbolizer, &dump.threads);
        assert!(names.iter().any(|n| n == "bank::Account::transfer"), "{opt}: {names:?}");
        assert!(names.iter().any(|n| n == "bank::Account::deposit<long>"), "{opt}: {names:?}");
        if opt == "-O0" {
            assert!(names.iter().any(|n| n == "bank::(anonymous namespace)::worker"), "{names:?}");
        }
        let p = dump.values[0].expect("gdb prints &'main::p'");
        assert_eq!(symbolizer.data_symbol(p), Some(("main::p".into(), 0)));
    }
}

#[test]
fn live_rust_deadlock_matches_gdb() {
    let live = match live("rust", "rustc", "deadlock.rs", DEADLOCK_RS, &["-g", "-O"]) {
        Ok(l) => l,
        Err(why) => return eprintln!("skipped: {why}"),
    };
    let Some((process, dump)) = check_live(&live, false, &[]) else { return };
    let symbolizer = Symbolizer::new(&process);
    let names = all_names(&symbolizer, &dump.threads);
    assert!(names.iter().any(|n| n == "deadlock::{impl#0}::go"), "{names:?}");
}

const TAIL_CALLS_C: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#define NOINLINE __attribute__((noinline, noclone))
volatile int sink;
NOINLINE void leaf(int x) { sink = x; pause(); sink = x + 1; }
/* One tail call: a calls b, b jumps to leaf. */
NOINLINE void b1(int x) { leaf(x + 1); }
NOINLINE void a1(int x) { b1(x * 2); sink = 0; }
/* Two in a row. */
NOINLINE void d2(int x) { leaf(x + 3); }
NOINLINE void b2(int x) { d2(x * 3); }
NOINLINE void a2(int x) { b2(x + 5); sink = 0; }
/* Two ways from q3 to leaf: gdb cannot tell which was taken. */
NOINLINE void r3(int x) { leaf(x + 7); }
NOINLINE void s3(int x) { leaf(x * 7); }
NOINLINE void q3(int x) { if (x & 1) r3(x); else s3(x + 1); }
NOINLINE void p3(int x) { q3(x); sink = 0; }
/* Two ways that meet again in u4: only the jump from u4 is certain. */
NOINLINE void u4(int x) { leaf(x - 1); }
NOINLINE void r4(int x) { u4(x + 9); }
NOINLINE void s4(int x) { u4(x * 9); }
NOINLINE void q4(int x) { if (x & 1) r4(x); else s4(x + 1); }
NOINLINE void p4(int x) { q4(x); sink = 0; }
static void *t1(void *p) { a1(sink); return p; }
static void *t2(void *p) { a2(sink); return p; }
static void *t3(void *p) { p3(sink); return p; }
static void *t4(void *p) { p4(sink); return p; }
int main(void) {
    pthread_t t[4];
    void *(*run[4])(void *) = { t1, t2, t3, t4 };
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], 0, run[i], 0);
    usleep(200 * 1000);
    printf("ready %d\n", getpid());
    fflush(stdout);
    pthread_join(t[0], 0);
    return 0;
}
"#;

/// Whole stacks from knot's report, tail-call frames included, against gdb's `bt`: the same
/// functions, the same tail-call frames at the same pcs; with libc's debug files and without.
#[test]
fn live_tail_calls_match_gdb() {
    let live = match live("tail", "gcc", "tail.c", TAIL_CALLS_C, &["-g", "-O2", "-pthread"]) {
        Ok(l) => l,
        Err(why) => return eprintln!("skipped: {why}"),
    };
    for no_debug_files in [false, true] {
        let Some(dump) = gdb_dump(&live.dir.0, &live.bin, &live.core, no_debug_files, &[]) else {
            return eprintln!("skipped: gdb gave no frames");
        };
        let locator = Locator { no_default_debug_dir: no_debug_files, ..Locator::default() };
        let process = Process::open(&live.core, &locator).expect("open the core");
        let (mismatches, _) = compare_with_gdb(&process, &dump.threads);
        assert!(mismatches.is_empty(), "no_debug_files={no_debug_files}:\n{}", mismatches.join("\n"));
        let options = crate::analysis::Options { stacks_only: true, ..Default::default() };
        let report = crate::analysis::report_for(&process, &options);
        let mut gdb_tail_frames = Vec::new();
        for (tid, frames) in &dump.threads {
            let gdb: Vec<(Option<&str>, bool, Option<u64>)> =
                frames.iter().map(|f| (f.name.as_deref(), f.tailcall, f.tailcall.then_some(f.pc))).collect();
            let thread = report.threads.iter().find(|t| t.tid == *tid).expect("thread in knot's report");
            let knot: Vec<(Option<&str>, bool, Option<u64>)> =
                thread.frames.iter().map(|f| (f.function.as_deref(), f.tail_call, f.tail_call.then_some(f.ip.0))).collect();
            // gdb stops at main; knot goes on to _start.
            assert!(knot.len() >= gdb.len() && knot[..gdb.len()] == gdb[..], "no_debug_files={no_debug_files} thread {tid}:\n gdb:  {gdb:x?}\n knot: {knot:x?}");
            gdb_tail_frames.extend(frames.iter().filter(|f| f.tailcall).filter_map(|f| f.name.clone()));
        }
        // The program's own jumps, which gdb shows whatever libc's debug files.
        for name in ["b1", "b2", "d2", "u4"] {
            assert!(gdb_tail_frames.iter().any(|n| n == name), "gdb shows no tail-call frame for {name}: {gdb_tail_frames:?}");
        }
        for name in ["q3", "r3", "s3", "q4"] {
            assert!(!gdb_tail_frames.iter().any(|n| n == name), "gdb shows a tail-call frame for {name}: {gdb_tail_frames:?}");
        }
    }
}

/// Ad-hoc check of any core against gdb: `KNOT_GDB_CHECK=BINARY:CORE cargo test gdb_check_env
/// -- --nocapture` (add `KNOT_GDB_NO_DEBUG_FILES=1` to look for no separate debug files). Skips
/// when the variable is unset.
#[test]
fn gdb_check_env() {
    let Ok(spec) = std::env::var("KNOT_GDB_CHECK") else {
        eprintln!("skipped: KNOT_GDB_CHECK=BINARY:CORE is not set");
        return;
    };
    let (bin, core) = spec.split_once(':').expect("BINARY:CORE");
    let dir = Scratch::new("env");
    let no_debug_files = std::env::var_os("KNOT_GDB_NO_DEBUG_FILES").is_some();
    let threads = gdb_dump(&dir.0, Path::new(bin), Path::new(core), no_debug_files, &[]).expect("gdb frames").threads;
    let locator = Locator { no_default_debug_dir: no_debug_files, ..Locator::default() };
    let process = Process::open(core, &locator).expect("open the core");
    let (mismatches, compared) = compare_with_gdb(&process, &threads);
    eprintln!("{compared} frames compared, {} differ", mismatches.len());
    for m in &mismatches {
        eprintln!("{m}");
    }
    assert!(mismatches.is_empty());
}

