//! Parser for gdb's `thread apply all bt` output: the reference reading that
//! knot's own stacks are compared against.

/// One thread of a `thread apply all bt` listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    /// gdb's thread number (`Thread N (...)`).
    pub num: u32,
    /// Kernel thread id, from `(LWP N)`.
    pub lwp: u32,
    /// Function per frame, innermost first. Inlined frames are separate
    /// entries (gdb prints them as frames); `??` where gdb knew no name;
    /// `<signal handler called>` kept verbatim.
    pub functions: Vec<String>,
    /// The text after `Backtrace stopped: `, if gdb printed one.
    pub stopped_reason: Option<String>,
    /// gdb had no registers for it (`#0  <unavailable> in ?? ()`): a thread libthread_db listed
    /// from the process's memory that the core has no note for (a process in a PID namespace of
    /// its own, dumped from the host: libthread_db numbers threads as the process does).
    pub unavailable: bool,
}

impl Thread {
    /// Whether `function` names one of this thread's frames (exact match).
    pub fn has_function(&self, function: &str) -> bool {
        self.functions.iter().any(|f| f == function)
    }
}

/// Parses every `Thread N (...)` block; lines before the first header (gdb's
/// banner, the current frame printed on load, warnings) are ignored.
pub fn parse(text: &str) -> Vec<Thread> {
    let mut threads: Vec<Thread> = Vec::new();
    for raw in text.lines() {
        let line = raw.trim_end();
        if let Some(header) = parse_header(line) {
            threads.push(header);
            continue;
        }
        let Some(current) = threads.last_mut() else {
            continue;
        };
        if line.starts_with("#0  <unavailable>") {
            current.unavailable = true;
        }
        if let Some(reason) = line.strip_prefix("Backtrace stopped: ") {
            current.stopped_reason = Some(reason.trim().to_string());
        } else if let Some(name) = parse_frame(line) {
            current.functions.push(name);
        }
    }
    threads
}

/// `Thread 2 (Thread 0x7f.. (LWP 1895) "name"):`, `Thread 2 (LWP 1895):` or
/// `Thread 1 (process 1895):`.
fn parse_header(line: &str) -> Option<Thread> {
    let rest = line.strip_prefix("Thread ")?;
    let (num, rest) = rest.split_once(' ')?;
    let num: u32 = num.parse().ok()?;
    if !rest.starts_with('(') || !line.ends_with(':') {
        return None;
    }
    // Single-threaded targets read without libthread_db say `(process N)`.
    let at = match rest.find("LWP ") {
        Some(i) => i + 4,
        None => rest.find("process ")? + 8,
    };
    let digits: String = rest[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    let lwp = digits.parse().ok()?;
    Some(Thread {
        num,
        lwp,
        functions: Vec::new(),
        stopped_reason: None,
        unavailable: false,
    })
}

/// Function name of a `#N  ...` frame line.
fn parse_frame(line: &str) -> Option<String> {
    let rest = line.strip_prefix('#')?;
    let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let mut rest = rest[digits..].trim_start();
    // `0x00007f... in name (...)`: the address is absent for frame #0 when
    // the pc is at a line boundary, and for inlined frames.
    if let Some(after) = rest.strip_prefix("0x") {
        let hex = after.chars().take_while(|c| c.is_ascii_hexdigit()).count();
        rest = after[hex..].trim_start();
        rest = rest.strip_prefix("in ").unwrap_or(rest);
    }
    if rest.starts_with('<') && !rest.contains(" (") {
        // `<signal handler called>` and similar markers.
        return Some(rest.to_string());
    }
    Some(name_before_args(rest).to_string())
}

/// Text up to the ` (` that opens the argument list: the first one outside
/// any `<...>` (Rust/C++ generics may hold ` (`, e.g. `<fn() -> ()>`).
fn name_before_args(s: &str) -> &str {
    let bytes = s.as_bytes();
    let mut depth = 0i32;
    let mut i = 0;
    while i < bytes.len() {
        // C++ operators whose names contain brackets: skip the operator token.
        if s[i..].starts_with("operator") {
            let op = &s[i + 8..];
            let skip = [
                "<<=", ">>=", "<=>", "<<", ">>", "<=", ">=", "->*", "->", "<", ">", "()",
            ]
            .iter()
            .find(|p| op.starts_with(**p))
            .map_or(0, |p| p.len());
            i += 8 + skip;
            continue;
        }
        match bytes[i] {
            b'<' => depth += 1,
            b'>' if i > 0 && bytes[i - 1] == b'-' => {} // `->` in fn types
            b'>' => depth = (depth - 1).max(0),
            b' ' if depth == 0 && bytes.get(i + 1) == Some(&b'(') => return &s[..i],
            _ => {}
        }
        i += 1;
    }
    s.trim_end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_forms() {
        let f = |l: &str| parse_frame(l).unwrap();
        assert_eq!(
            f(
                "#0  futex_wait (private=0, expected=2, futex_word=0x558e0e27b060 <a>) at ../sysdeps/nptl/futex-internal.h:146"
            ),
            "futex_wait"
        );
        assert_eq!(
            f(
                "#2  0x00007f74f154b482 in lll_mutex_lock_optimized (mutex=0x558e0e27b060 <a>) at ./nptl/pthread_mutex_lock.c:48"
            ),
            "lll_mutex_lock_optimized"
        );
        assert_eq!(f("#3  0x00007f74f15c88ec in ?? ()"), "??");
        assert_eq!(
            f("#3  0x00007f74f15c88ec in ?? () from /lib/x86_64-linux-gnu/libc.so.6"),
            "??"
        );
        assert_eq!(f("#1  <signal handler called>"), "<signal handler called>");
        assert_eq!(f("#12 0x0000555555559abc in main () at t.c:9"), "main");
        assert_eq!(
            f(
                "#4  0x000055555555c0a1 in std::sync::poison::mutex::Mutex<i32>::lock<i32> (self=0x5555555a0010 <rust_mutex::LEDGER>) at /rustc/x/library/std/src/sync/poison/mutex.rs:1"
            ),
            "std::sync::poison::mutex::Mutex<i32>::lock<i32>"
        );
        assert_eq!(
            f(
                "#9  0x0000555555560d5e in core::ops::function::FnOnce::call_once<fn() -> (), ()> () at /rustc/x/library/core/src/ops/function.rs:250"
            ),
            "core::ops::function::FnOnce::call_once<fn() -> (), ()>"
        );
        assert_eq!(
            f(
                "#7  std::thread::Builder::spawn_unchecked_::{closure#1}::{closure#0}<fn(), ()> () at x.rs:1"
            ),
            "std::thread::Builder::spawn_unchecked_::{closure#1}::{closure#0}<fn(), ()>"
        );
        assert_eq!(
            f("#2  0x0000000000401136 in Foo::operator() (this=0x1) at a.cc:3"),
            "Foo::operator()"
        );
        assert_eq!(
            f("#2  0x0000000000401136 in operator<< (os=...) at a.cc:3"),
            "operator<<"
        );
        assert_eq!(
            f("#5  0x00007f0000001000 in __restore_rt ()"),
            "__restore_rt"
        );
        assert!(parse_frame("Backtrace stopped: x").is_none());
        assert!(parse_frame("#x").is_none());
    }

    #[test]
    fn headers() {
        let t = parse_header("Thread 2 (Thread 0x7f74f14bb6c0 (LWP 1895)):").unwrap();
        assert_eq!((t.num, t.lwp), (2, 1895));
        let t = parse_header("Thread 3 (LWP 42):").unwrap();
        assert_eq!((t.num, t.lwp), (3, 42));
        let t = parse_header("Thread 1 (Thread 0x7f698edd5740 (LWP 4717) \"naive\"):").unwrap();
        assert_eq!((t.num, t.lwp), (1, 4717));
        let t = parse_header("Thread 1 (process 77):").unwrap();
        assert_eq!((t.num, t.lwp), (1, 77));
        assert!(parse_header("Thread debugging using libthread_db enabled").is_none());
    }

    #[test]
    fn synthetic_listing() {
        let text = "\
[New LWP 11]
Core was generated by `./x'.
#0  0x00007f0000000001 in ?? ()
[Current thread is 1 (LWP 10)]

Thread 2 (LWP 11):
#0  0x00007f0000000002 in ?? ()
#1  0x0000000000000000 in ?? ()
Backtrace stopped: previous frame inner to this frame (corrupt stack?)

Thread 1 (LWP 10):
#0  handler (sig=10) at s.c:3
#1  <signal handler called>
#2  spin () at s.c:9
";
        let threads = parse(text);
        assert_eq!(threads.len(), 2);
        assert_eq!(threads[0].lwp, 11);
        assert_eq!(threads[0].functions, vec!["??", "??"]);
        assert_eq!(
            threads[0].stopped_reason.as_deref(),
            Some("previous frame inner to this frame (corrupt stack?)")
        );
        assert_eq!(
            threads[1].functions,
            vec!["handler", "<signal handler called>", "spin"]
        );
        assert!(threads[1].stopped_reason.is_none());
    }

    #[test]
    fn real_gcore_abba() {
        let threads = parse(include_str!("../testdata/abba-gcore-gdb-bt.txt"));
        assert_eq!(threads.len(), 3);
        let ab = threads
            .iter()
            .find(|t| t.has_function("worker_ab"))
            .unwrap();
        let ba = threads
            .iter()
            .find(|t| t.has_function("worker_ba"))
            .unwrap();
        for t in [ab, ba] {
            assert!(t.has_function("___pthread_mutex_lock"), "{t:?}");
            assert_eq!(t.functions.last().map(String::as_str), Some("clone3"));
        }
        let main = threads.iter().find(|t| t.has_function("main")).unwrap();
        assert!(
            main.functions
                .iter()
                .any(|f| f.contains("pthread_clockjoin_ex")),
            "{main:?}"
        );
        assert!(threads.iter().all(|t| t.lwp > 0));
    }

    #[test]
    fn real_kernel_signal_handler() {
        let threads = parse(include_str!("../testdata/signal_handler-kernel-gdb-bt.txt"));
        let victim = threads
            .iter()
            .find(|t| t.has_function("victim_thread"))
            .unwrap();
        let f = &victim.functions;
        let sig = f
            .iter()
            .position(|x| x == "<signal handler called>")
            .unwrap();
        assert_eq!(f[sig - 1], "on_usr1");
        assert_eq!(f[sig + 1], "victim_spin");
    }

    #[test]
    fn real_kernel_rust() {
        let threads = parse(include_str!("../testdata/rust_mutex-kernel-gdb-bt.txt"));
        let t = threads
            .iter()
            .find(|t| t.has_function("rust_mutex::ledger_then_audit"))
            .unwrap();
        assert!(
            t.functions
                .iter()
                .any(|f| f.starts_with("std::sync::poison::mutex::Mutex<")),
            "{t:?}"
        );
    }
}
