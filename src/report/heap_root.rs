//! `knot heap root DUMP ADDRESS`: why an object is alive, as data (JSON) and as text in the
//! shape of SOS `gcroot` (a block per root — `HandleTable:`, `Thread <tid>:`, `Finalizer
//! Queue:` — its root line, then one `-> ADDRESS Type` line per object, each with the field
//! that leads on). The facts come from `runtimes::dotnet::gc::why_alive`; the words from
//! [`super::words`].

use super::words;
use crate::diagnostics::Diagnostic;
use crate::hex::Hex;
use crate::runtimes::dotnet::gc::graph::RootSource;
use crate::runtimes::dotnet::gc::paths::Link;
use crate::runtimes::ObjectRoots;
use schemars::JsonSchema;
use serde::Serialize;
use std::fmt::Write as _;

/// Why one object of the GC heap is alive.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HeapRootReport {
    pub knot_version: String,
    /// The object asked about.
    pub object: Hex,
    /// Its type as SOS's heap commands name it; null when the address is no object of the heap
    /// (not an object's start, or in no segment the walk read).
    #[serde(rename = "type")]
    pub type_name: Option<String>,
    /// Its size as SOS reports it (unaligned); null when it is no object.
    pub size: Option<u64>,
    /// A root reaches it: `root` and `path` say how. False: no root read reaches it (it is
    /// garbage the GC has not collected yet, or its root could not be read: see diagnostics).
    pub reachable: bool,
    /// The root the shortest path starts from.
    pub root: Option<HeapRootHolder>,
    /// The shortest path, from the root's object to the object asked about.
    pub path: Vec<HeapPathStep>,
    /// With `all_roots`: every other root that reaches it (SOS `gcroot`'s other "unique
    /// roots"), each with a shortest path from it, shortest first. Without: the other roots
    /// that hold the object itself. At most 63.
    pub other_roots: Vec<HeapRootPath>,
    /// Roots that reach it beyond those listed.
    pub other_roots_not_listed: usize,
    /// Roots read, per kind.
    pub roots: Vec<HeapRootCount>,
    /// Handles in use in the handle table (weak ones included).
    pub handles_read: usize,
    /// Every root was searched (`knot heap root --all`: the whole heap read as a graph). False:
    /// the search stopped at the first (shortest) path.
    pub all_roots: bool,
    /// With `all_roots`: objects in the graph (free objects left out) and their references.
    /// Without: addresses the search reached and the non-null references it read.
    pub objects: usize,
    pub references: usize,
    /// What could not be read (unreadable roots, refused GC descriptions, walks stopped early).
    pub diagnostics: Vec<Diagnostic>,
}

impl HeapRootReport {
    /// The report of one object's roots; `methods` names a managed frame by (thread, stack
    /// pointer), `diagnostics` are the process's (the reading's own follow).
    pub(crate) fn of(roots: &ObjectRoots, methods: &std::collections::HashMap<(u32, u64), String>, diagnostics: Vec<Diagnostic>) -> HeapRootReport {
        let ObjectRoots::Dotnet(why) = roots;
        let process_diagnostics = diagnostics;
            let holder = |root: &crate::runtimes::dotnet::gc::roots::RootAt| {
                let (kind, conservative) = root.kind.name();
                let mut h = HeapRootHolder { kind: kind.to_string(), conservative, handle: None, thread: None, finalizer_slot: None, sync_block: None, description: String::new() };
                match &root.source {
                    RootSource::Handle { handle } => h.handle = Some(Hex(*handle)),
                    RootSource::Static { handle, .. } => h.handle = Some(Hex(*handle)),
                    RootSource::Stack { os_tid, managed_id, frame_sp, frame_ip, slot, register } => {
                        h.thread = Some(HeapRootThread {
                            os_tid: *os_tid,
                            managed_id: *managed_id,
                            method: methods.get(&(*os_tid, *frame_sp)).cloned(),
                            frame_sp: Hex(*frame_sp),
                            frame_ip: Hex(*frame_ip),
                            slot: register.is_none().then_some(Hex(*slot)),
                            register: register.map(|r| crate::arch::x86_64::dwarf::name(r).map(str::to_string).unwrap_or_else(|| format!("dwarf register {r}"))),
                        })
                    }
                    RootSource::FinalizerQueue { slot } => h.finalizer_slot = Some(Hex(*slot)),
                    RootSource::SyncBlock { index } => h.sync_block = Some(*index),
                }
                h.description = words::heap_root_description(&h);
                h
            };
            let steps = |steps: &[crate::runtimes::dotnet::gc::why_alive::Step]| -> Vec<HeapPathStep> {
                steps
                    .iter()
                    .map(|s| HeapPathStep {
                        address: Hex(s.address),
                        type_name: s.type_name.clone(),
                        size: s.size,
                        via: s.link.as_ref().map(|l| match l {
                            Link::Field(f) => f.clone(),
                            Link::Element(i) => format!("[{i}]"),
                            Link::Dependent => "(dependent handle)".to_string(),
                        }),
                        static_field: s.static_field.as_ref().map(|f| HeapStaticField { class: f.class.clone(), field: f.field.clone() }),
                    })
                    .collect()
            };
            let mut all: Vec<HeapRootPath> = why.paths.iter().map(|(r, s)| HeapRootPath { root: holder(r), path: steps(s) }).collect();
            let first = (!all.is_empty()).then(|| all.remove(0));
            let roots = why
                .roots
                .iter()
                .map(|(k, n)| {
                    let (kind, conservative) = k.name();
                    HeapRootCount { kind: kind.to_string(), conservative, count: *n }
                })
                .collect();
            let mut diagnostics = process_diagnostics.clone();
            diagnostics.extend(why.diagnostics.iter().cloned());
            HeapRootReport {
                knot_version: env!("CARGO_PKG_VERSION").to_string(),
                object: Hex(why.object),
                type_name: why.object_type.clone(),
                size: why.object_size,
                reachable: first.is_some(),
                root: first.as_ref().map(|f| f.root.clone()),
                path: first.map(|f| f.path).unwrap_or_default(),
                other_roots: all,
                other_roots_not_listed: why.more_roots,
                roots,
                handles_read: why.handles_read,
                all_roots: why.all_roots,
                objects: why.objects,
                references: why.references,
                diagnostics,
            }
    }
}

/// A root: what holds the first object of the path.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HeapRootHolder {
    /// `strong_handle`, `pinned_handle`, `async_pinned_handle`, `ref_counted_handle`,
    /// `sized_ref_handle`, `variable_handle`, `finalizer_queue`, `stack`, `sync_block`,
    /// `static`.
    pub kind: String,
    /// A stack root found by scanning the frame's words, not from GC info: it may be a stale
    /// value.
    pub conservative: bool,
    /// The handle's address (handle roots).
    pub handle: Option<Hex>,
    /// The thread, frame and slot (stack roots).
    pub thread: Option<HeapRootThread>,
    /// The finalization queue slot (finalizer roots).
    pub finalizer_slot: Option<Hex>,
    /// The sync block's index (a held monitor's object).
    pub sync_block: Option<u32>,
    /// The root for people: `strong handle 0x…`, `thread 0x1a2b, frame Program.Park, slot 0x…`.
    pub description: String,
}

/// A root and its path.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HeapRootPath {
    pub root: HeapRootHolder,
    pub path: Vec<HeapPathStep>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HeapRootThread {
    pub os_tid: u32,
    /// 0 when the thread has no managed id.
    pub managed_id: u32,
    /// The frame's method as `clrstack` names it; null when unnamed.
    pub method: Option<String>,
    pub frame_sp: Hex,
    pub frame_ip: Hex,
    /// The stack slot holding the object; null for a register.
    pub slot: Option<Hex>,
    /// The register holding the object (`rbx`); null for a stack slot.
    pub register: Option<String>,
}

/// One object of the path.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HeapPathStep {
    pub address: Hex,
    #[serde(rename = "type")]
    pub type_name: String,
    /// As SOS reports it (unaligned).
    pub size: u64,
    /// How it refers to the next object: a field name, `[i]` for an array element,
    /// `(dependent handle)` when a dependent handle makes it hold the next; null on the last.
    pub via: Option<String>,
    /// When this is an array of statics (.NET 10 keeps a class's reference statics in the
    /// slots of a `System.Object[]`), the static field the element `via` names; else null.
    pub static_field: Option<HeapStaticField>,
}

/// A static field: its class as SOS's heap commands name types, and its name.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HeapStaticField {
    pub class: String,
    pub field: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HeapRootCount {
    pub kind: String,
    pub conservative: bool,
    pub count: usize,
}

/// The report as pretty-printed JSON.
pub fn to_json(r: &HeapRootReport) -> String {
    serde_json::to_string_pretty(r).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The JSON Schema of [`HeapRootReport`].
pub fn json_schema() -> String {
    serde_json::to_string_pretty(&schemars::schema_for!(HeapRootReport)).unwrap_or_default()
}

/// One root's block: its header, its line, then each object with the field that leads on.
fn render_path(out: &mut String, p: &HeapRootPath) {
    let _ = writeln!(out, "{}", words::heap_root_block(&p.root));
    let _ = writeln!(out, "    {}", words::heap_root_line(&p.root));
    let width = p.path.iter().map(|s| s.type_name.len()).max().unwrap_or(0);
    for s in &p.path {
        match &s.via {
            Some(via) => {
                let _ = writeln!(out, "          -> {:016x} {:<width$}  {}", s.address.0, s.type_name, words::heap_path_via(via, s.static_field.as_ref()));
            }
            None => {
                let _ = writeln!(out, "          -> {:016x} {}", s.address.0, s.type_name);
            }
        }
    }
    out.push('\n');
}

/// The text: SOS `gcroot`'s shape, fields added.
pub fn render(r: &HeapRootReport) -> String {
    let mut out = String::new();
    let what = match &r.type_name {
        Some(t) => format!("{} {t}", r.object),
        None => format!("{} (no object of the GC heap starts here)", r.object),
    };
    let _ = writeln!(out, "Why alive: {what}");
    match &r.root {
        Some(root) => {
            let first = HeapRootPath { root: root.clone(), path: r.path.clone() };
            for p in std::iter::once(&first).chain(&r.other_roots) {
                render_path(&mut out, p);
            }
            let n = 1 + r.other_roots.len() + r.other_roots_not_listed;
            if r.other_roots_not_listed > 0 {
                let _ = writeln!(out, "({} more root{} not listed)", r.other_roots_not_listed, words::plural(r.other_roots_not_listed));
            }
            if r.all_roots {
                let _ = writeln!(out, "Found {n} unique root{} (the shortest path first: {} object{}).", words::plural(n), r.path.len(), words::plural(r.path.len()));
            } else {
                let _ = writeln!(
                    out,
                    "Found {n} root{} (the shortest path first: {} object{}; the search stopped there: --all searches every root).",
                    words::plural(n),
                    r.path.len(),
                    words::plural(r.path.len())
                );
            }
        }
        None if r.type_name.is_some() => {
            let _ = writeln!(out, "No root reaches it: it is garbage not yet collected, or its root was not read (see the warnings).");
        }
        None => {}
    }
    let counts: Vec<String> = r.roots.iter().map(|c| format!("{} {}", c.count, words::heap_root_kind_plural(&c.kind, c.conservative, c.count))).collect();
    let _ = writeln!(
        out,
        "Roots read: {} ({} handles in use); {}{} objects, {} references.",
        if counts.is_empty() { "none".into() } else { counts.join(", ") },
        r.handles_read,
        if r.all_roots { "" } else { "searched " },
        r.objects,
        r.references
    );
    if r.root.as_ref().is_some_and(|h| h.conservative) {
        let _ = writeln!(out, "Stack roots are conservative: knot does not decode the frames' GC info, so a stack slot may hold a dead local's stale value.");
    }
    // The heap's own warnings; the files' (modules not at hand) only counted: the JSON has them.
    let (heap, other): (Vec<&Diagnostic>, Vec<&Diagnostic>) = r.diagnostics.iter().partition(|d| d.stage.starts_with("dotnet"));
    for d in heap {
        let _ = writeln!(out, "warning: {}", d.message);
    }
    if !other.is_empty() {
        let _ = writeln!(out, "({} more warning{} about the dump's files: --format json lists them)", other.len(), words::plural(other.len()));
    }
    out
}
