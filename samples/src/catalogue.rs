//! The native sample programs: what they are and how they are built.

/// Source language, which decides the compiler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    C,
    Cxx,
    Rust,
    /// A script run by [`PYTHON`]: the "build" links the interpreter under the sample's name
    /// beside a copy of the script, which the maker runs.
    Python,
}

/// Debian's CPython (python3.11, 3.11.2): the interpreter the Python samples are made with and
/// `analyzers/cpython.toml` is checked against (a pyenv or venv python earlier on PATH is
/// another build).
pub const PYTHON: &str = "/usr/bin/python3.11";

/// How a sample's kernel core comes about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Death {
    /// It wedges; the maker sends SIGABRT (kernel core) or runs gcore.
    Wedge,
    /// It wedges; the maker sends this signal from outside (kernel core), or
    /// runs gcore.
    Sent(i32),
    /// Once the maker writes "go" to its stdin it dies by itself of this
    /// signal; kernel cores only (there is nothing to gcore).
    Crash(i32),
}

/// A shared library a sample builds beside its program (which `dlopen`s it).
#[derive(Debug, Clone, Copy)]
pub struct SharedLib {
    /// Its file name, e.g. `libold_layout.so`.
    pub name: &'static str,
    /// Its `.c` sources under `samples/native/`.
    pub sources: &'static [&'static str],
    /// Compiler and linker flags besides the sample's own, `-shared -fPIC` and `--build-id`.
    pub flags: &'static [&'static str],
}

/// One sample program of `samples/native/`.
#[derive(Debug, Clone, Copy)]
pub struct SampleSpec {
    pub name: &'static str,
    pub lang: Lang,
    /// Files under `samples/native/`; `.c`/`.rs` ones are compiled, the rest
    /// (headers) only count for staleness.
    pub sources: &'static [&'static str],
    /// Compiler flags (before `-o`).
    pub flags: &'static [&'static str],
    /// Default program arguments (`ensure` passes these).
    pub args: &'static [&'static str],
    /// Strip the binary and keep its DWARF in a separate file (debuglink and
    /// build-id layout).
    pub split_debug: bool,
    pub death: Death,
    pub description: &'static str,
    /// Shared libraries built beside the program (committed beside it too).
    pub libs: &'static [SharedLib],
    /// How the maker starts it.
    pub launch: Launch,
}

/// How the maker starts a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launch {
    /// As a child of the maker.
    Direct,
    /// In a PID namespace of its own, as a container's process: `unshare --pid --fork` with a
    /// shell as the namespace's init, so the program is pid 2 inside and its threads 3, 4, …;
    /// the maker dumps and signals it from the host, by its host pid.
    PidNamespace,
}

const C_O0: &[&str] = &["-g", "-O0", "-pthread", "-Wall"];

const fn c(
    name: &'static str,
    sources: &'static [&'static str],
    description: &'static str,
) -> SampleSpec {
    SampleSpec {
        name,
        lang: Lang::C,
        sources,
        flags: C_O0,
        args: &[],
        split_debug: false,
        death: Death::Wedge,
        description,
        libs: &[],
        launch: Launch::Direct,
    }
}

/// A C crash sample: it dies of `signal` by itself once told "go".
const fn crash(
    name: &'static str,
    sources: &'static [&'static str],
    signal: i32,
    description: &'static str,
) -> SampleSpec {
    SampleSpec {
        name,
        lang: Lang::C,
        sources,
        flags: C_O0,
        args: &[],
        split_debug: false,
        death: Death::Crash(signal),
        description,
        libs: &[],
        launch: Launch::Direct,
    }
}

const SIGQUIT: i32 = 3;
const SIGABRT: i32 = 6;
const SIGBUS: i32 = 7;
const SIGFPE: i32 = 8;
const SIGSEGV: i32 = 11;

static SAMPLES: &[SampleSpec] = &[
    c(
        "abba",
        &["abba.c", "common.h"],
        "worker_ab holds lock_a waits lock_b; worker_ba holds lock_b waits lock_a",
    ),
    c(
        "timed_abba",
        &["timed_abba.c", "common.h"],
        "abba through pthread_mutex_timedlock (1 h): stopped and continued, both timed waits resumed by restart_syscall",
    ),
    c(
        "odd_mappings",
        &["odd_mappings.c", "common.h"],
        "idle_mapper maps an io_uring, a memfd and a /dev/shm file, then sleeps; main joins it",
    ),
    c(
        "rwlock_readers",
        &["rwlock_readers.c", "common.h"],
        "2 reader_threads read-hold inventory.lock and block on gate (gatekeeper_thread holds it); writer_thread blocks in wrlock",
    ),
    c(
        "rwlock_queued_reader",
        &["rwlock_queued_reader.c", "common.h"],
        "2 holder_threads read-hold catalog.lock (prefers writers); writer_thread blocks in wrlock; late_reader_thread, arriving after it, blocks in rdlock",
    ),
    SampleSpec {
        name: "relative_dlopen",
        lang: Lang::C,
        sources: &["relative_dlopen.c", "common.h"],
        flags: C_O0,
        args: &[],
        split_debug: false,
        death: Death::Wedge,
        description: "dlopen(\"./librelative_plugin.so\"): plugin_holder_thread holds the plugin's plugin_lock, plugin_waiter_thread blocks on it",
        libs: &[SharedLib { name: "librelative_plugin.so", sources: &["relative_dlopen_lib.c"], flags: &[] }],
        launch: Launch::Direct,
    },
    c(
        "generated_code",
        &["generated_code.c", "common.h"],
        "generated_thread -> run_generated -> code in an mmap'd page (no CFI, no frame pointer) whose frame holds stale return addresses of its call to stamp_helper; it blocks in block_forever",
    ),
    c(
        "cycle3",
        &["cycle3.c", "common.h"],
        "three-thread cycle over ledger -> audit -> index_lock -> ledger",
    ),
    c(
        "self_relock",
        &["self_relock.c", "common.h"],
        "relock_thread relocks the normal mutex state_lock it holds",
    ),
    c(
        "convoy",
        &["convoy.c", "common.h"],
        "holder_thread sleeps holding convoy_lock; 20 waiter_threads queue; no cycle",
    ),
    c(
        "rwlock_writer",
        &["rwlock_writer.c", "common.h"],
        "3 readers hold table_lock, writer_thread blocks in wrlock; config_owner_thread write-holds config_lock, 2 config_waiter_threads block in rdlock",
    ),
    c(
        "recursive",
        &["recursive.c", "common.h"],
        "owner_thread holds recursive registry_lock twice and sleeps; waiter_thread blocks",
    ),
    c(
        "join_cycle",
        &["join_cycle.c", "common.h"],
        "joiner_a joins joiner_b while joiner_b joins joiner_a",
    ),
    c(
        "owner_exited",
        &["owner_exited.c", "common.h"],
        "doomed_owner exited holding orphan_lock; 2 orphan_waiters block",
    ),
    c(
        "robust_dead_owner",
        &["robust_dead_owner.c", "common.h"],
        "robust_lock: first_owner died, inheritor_thread took it with EOWNERDEAD and sleeps; blocked_thread waits",
    ),
    c(
        "mutex_kinds",
        &["mutex_kinds.c", "common.h"],
        "holder+waiter pairs on errcheck_lock, adaptive_lock and pi_lock (priority inheritance)",
    ),
    c(
        "condvar_sem",
        &["condvar_sem.c", "common.h"],
        "3 cond_waiters on ready_cond, 2 sem_waiters on semaphore slots; no owner",
    ),
    c(
        "deep_recursion",
        &["deep_recursion.c", "common.h"],
        "deep_thread recurses 450 frames then blocks on depth_lock held by main, which joins it",
    ),
    c(
        "many_threads",
        &["many_threads.c", "common.h"],
        "N gated_threads (argv[1], default 220) block on gate_lock held by main",
    ),
    c(
        "signal_handler",
        &["signal_handler.c", "common.h"],
        "victim_thread's SIGUSR1 handler on_usr1 blocks on handler_lock held by main",
    ),
    SampleSpec {
        name: "omitfp",
        lang: Lang::C,
        sources: &["omitfp.c", "common.h"],
        flags: &["-g", "-O2", "-fomit-frame-pointer", "-pthread", "-Wall"],
        args: &[],
        split_debug: false,
        death: Death::Wedge,
        description: "abba through inlined static helpers, -O2 -fomit-frame-pointer",
        libs: &[],
        launch: Launch::Direct,
    },
    SampleSpec {
        name: "stripped",
        lang: Lang::C,
        sources: &["stripped.c", "common.h"],
        flags: &["-g", "-O1", "-pthread", "-Wall", "-Wl,--build-id"],
        args: &[],
        split_debug: true,
        death: Death::Wedge,
        description: "vault_holder holds vault_lock, 2 vault_waiters; stripped binary, DWARF in a separate file",
        libs: &[],
        launch: Launch::Direct,
    },
    SampleSpec {
        name: "rust_mutex",
        lang: Lang::Rust,
        sources: &["rust_mutex.rs"],
        flags: &[
            "-g",
            "-C",
            "opt-level=0",
            "-C",
            "force-frame-pointers=no",
            "--edition",
            "2021",
        ],
        args: &[],
        split_debug: false,
        death: Death::Wedge,
        description: "std::sync::Mutex ABBA: ledger_then_audit vs audit_then_ledger on LEDGER/AUDIT",
        libs: &[],
        launch: Launch::Direct,
    },
    // Issue 42: owners where knot did not look.
    c(
        "pi_abba",
        &["pi_abba.c", "common.h"],
        "ABBA over two PTHREAD_PRIO_INHERIT mutexes: restock_thread in FUTEX_LOCK_PI on ledger_lock; audit_thread refused stock_lock with EDEADLK, parked by glibc on a zero word on its stack",
    ),
    c(
        "pshared_child",
        &["pshared_child.c", "common.h"],
        "a process-shared mutex (MAP_SHARED) and an shm_open rwlock held by a forked child (courier); mutex_waiter_thread and reader_thread block on them in the parent",
    ),
    SampleSpec {
        name: "pidns_abba",
        lang: Lang::C,
        sources: &["pidns_abba.c", "common.h"],
        flags: C_O0,
        args: &[],
        split_debug: false,
        death: Death::Wedge,
        description: "ABBA (packer_thread, shipper_thread on crate_lock/label_lock) in a PID namespace of its own: pid 2, threads 3 and 4 inside; dumped and signalled from the host",
        libs: &[],
        launch: Launch::PidNamespace,
    },
    c(
        "barrier_short",
        &["barrier_short.c", "common.h"],
        "3 stage_threads wait in pthread_barrier_wait on stage_barrier (count 4); late_thread, the fourth, waits on late_cond for good",
    ),
    SampleSpec {
        name: "cxx_templates",
        lang: Lang::Cxx,
        sources: &["cxx_templates.cpp"],
        // libstdc++ linked in: its frames are named and unwound from the program's own tables.
        flags: &["-g", "-O0", "-pthread", "-Wall", "-static-libstdc++", "-static-libgcc"],
        args: &[],
        split_debug: false,
        death: Death::Wedge,
        description: "shelf_holder sleeps holding shelf_lock in hold_for<long, std::ratio<3600l, 1l> >; shelf_taker (take_all<0ul, 1ul>) and shelf_idler (wait_quietly<>) block on it",
        libs: &[],
        launch: Launch::Direct,
    },
    c(
        "rwlock_cycle",
        &["rwlock_cycle.c", "common.h"],
        "planner_thread read-holds routes.lock (plan() keeps the table in its frame) and waits for dispatch_lock; dispatcher_thread holds dispatch_lock and waits in wrlock",
    ),
    SampleSpec {
        name: "rust_release_abba",
        lang: Lang::Rust,
        sources: &["rust_release_abba.rs"],
        flags: &["-g", "-C", "opt-level=2", "--edition", "2021"],
        args: &[],
        split_debug: false,
        death: Death::Wedge,
        description: "std::sync::Mutex ABBA in a release build: restock holds INVENTORY, waits PRICES; reprice the reverse; clerk keeps pointers next to them; courier parks in thread::park",
        libs: &[],
        launch: Launch::Direct,
    },
    SampleSpec {
        name: "py_lock_abba",
        lang: Lang::Python,
        sources: &["py_lock_abba.py"],
        flags: &[],
        args: &[],
        split_debug: false,
        death: Death::Wedge,
        description: "CPython threading ABBA twice: restock/reprice over two RLocks (which record their owner), post_ledger/audit over two Locks (which do not); main joins restock",
        libs: &[],
        launch: Launch::Direct,
    },
];

/// Programs that die (issue 18): each crash sample's worker thread dies one
/// way once the maker says "go", while an idle bystander waits on a condvar
/// and main joins the worker. Kernel cores only, except `idle_join`.
static CRASH_SAMPLES: &[SampleSpec] = &[
    crash("crash_null", &["crash_null.c", "crash_common.h", "common.h"], SIGSEGV, "order_worker reads order->qty (offset 0x2c) through NULL in parse_qty"),
    crash("crash_readonly", &["crash_readonly.c", "crash_common.h", "common.h"], SIGSEGV, "banner_worker writes into a string literal in shout"),
    crash("crash_badfn", &["crash_badfn.c", "crash_common.h", "common.h"], SIGSEGV, "dispatch_worker calls through a pointer to the data array handler_table"),
    crash("crash_overflow", &["crash_overflow.c", "crash_common.h", "common.h"], SIGSEGV, "recursing_worker recurses in descend until its 256 KiB stack overflows"),
    crash("crash_divzero", &["crash_divzero.c", "crash_common.h", "common.h"], SIGFPE, "average_worker divides by zero in per_item"),
    crash("crash_assert", &["crash_assert.c", "crash_common.h", "common.h"], SIGABRT, "settle_worker fails assert(balance + amount >= 0) in settle"),
    crash("crash_double_free", &["crash_double_free.c", "crash_common.h", "common.h"], SIGABRT, "cleanup_worker frees its record twice in release"),
    SampleSpec {
        name: "smashed_stack",
        lang: Lang::C,
        sources: &["smashed_stack.c", "crash_common.h", "common.h"],
        flags: &["-g", "-O2", "-fno-stack-protector", "-pthread", "-Wall"],
        args: &[],
        split_debug: false,
        death: Death::Crash(SIGSEGV),
        description: "label_worker's strcpy runs over copy_label's return address with 'A's: it returns to 0x414141414141",
        libs: &[],
        launch: Launch::Direct,
    },
    crash("crash_sigbus", &["crash_sigbus.c", "crash_common.h", "common.h"], SIGBUS, "journal_worker reads a file mapping past the truncated file's end in read_entry"),
    SampleSpec {
        name: "crash_cxx",
        lang: Lang::Cxx,
        sources: &["crash_cxx.cpp"],
        flags: &["-g", "-O0", "-pthread", "-Wall"],
        args: &[],
        split_debug: false,
        death: Death::Crash(SIGABRT),
        description: "ledger_worker throws LedgerError (a std::runtime_error) nobody catches from load_ledger",
        libs: &[],
        launch: Launch::Direct,
    },
    SampleSpec {
        name: "crash_rust_panic",
        lang: Lang::Rust,
        sources: &["crash_rust_panic.rs"],
        flags: &["-g", "-C", "opt-level=0", "-C", "panic=abort", "--edition", "2021"],
        args: &[],
        split_debug: false,
        death: Death::Crash(SIGABRT),
        description: "the thread \"settler\" panics in crash_rust_panic::settle, built with panic=abort",
        libs: &[],
        launch: Launch::Direct,
    },
    SampleSpec {
        name: "old_layout",
        lang: Lang::C,
        sources: &["old_layout.c", "crash_common.h", "common.h"],
        flags: C_O0,
        args: &[],
        split_debug: false,
        death: Death::Crash(SIGSEGV),
        description: "reading_worker calls libfunc of libold_layout.so (both PT_LOADs map file offset 0), which reads through NULL; ELF header pages left out of the core",
        libs: &[SharedLib {
            name: "libold_layout.so",
            sources: &["old_layout_lib.c"],
            // binutils before 2.31 on x86-64: code and headers in one segment, 2 MiB pages, and
            // (without RELRO) the data at a file offset inside the first page.
            flags: &["-Wl,-z,noseparate-code", "-Wl,-z,max-page-size=0x200000", "-Wl,-z,norelro"],
        }],
        launch: Launch::Direct,
    },
    SampleSpec {
        name: "idle_join",
        lang: Lang::C,
        sources: &["idle_join.c", "crash_common.h", "common.h"],
        flags: C_O0,
        args: &[],
        split_debug: false,
        death: Death::Sent(SIGQUIT),
        description: "2 idle_waiters on a condvar nobody signals, sleeper in pause(), main joins sleeper; SIGQUIT sent from outside",
        libs: &[],
        launch: Launch::Direct,
    },
];

/// Every native sample that wedges (the lock-analysis samples).
pub fn native_samples() -> &'static [SampleSpec] {
    SAMPLES
}

/// Every crash sample (issue 18).
pub fn crash_samples() -> &'static [SampleSpec] {
    CRASH_SAMPLES
}

/// The sample called `name`.
pub fn find(name: &str) -> Option<&'static SampleSpec> {
    SAMPLES.iter().chain(CRASH_SAMPLES).find(|s| s.name == name)
}

impl SampleSpec {
    /// The compiler program this sample needs.
    pub fn compiler(&self) -> &'static str {
        match self.lang {
            Lang::C => "gcc",
            Lang::Cxx => "g++",
            Lang::Rust => "rustc",
            Lang::Python => PYTHON,
        }
    }
}
