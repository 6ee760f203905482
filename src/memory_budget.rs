//! The memory knot may use: the limit it runs under (a pod's, a systemd unit's: the memory
//! cgroup of the process and of each of its parents, the lowest) or `--max-memory`, and how much
//! of it the heap graph may plan for. A reading past that limit is not slower but killed by the
//! kernel, and says nothing: the heap graph is planned to fit, or left out with the limit said.

use std::path::{Path, PathBuf};

/// The limit an analysis runs under, and where it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemoryLimit {
    pub(crate) bytes: u64,
    pub(crate) source: LimitSource,
}

/// Where a [`MemoryLimit`] comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LimitSource {
    /// `--max-memory` (the library's `Options::max_memory`).
    Flag,
    /// A cgroup's file: v2's `memory.max` or v1's `memory.limit_in_bytes`.
    Cgroup(PathBuf),
}

/// Head-room kept beside the heap graph for the dump's own pages (the walk reads through them
/// while the graph is built; a mapped file's pages count against a cgroup too, though the
/// kernel can drop them) and everything else of the analysis: a quarter of the limit, and at
/// least this much.
const MIN_HEADROOM: u64 = 256 << 20;

/// The budget a heap reading is planned under: the memory limit, and the directory its large
/// arrays may spill to (`--scratch-dir`, else `$TMPDIR`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HeapBudget {
    pub(crate) limit: Option<MemoryLimit>,
    pub(crate) scratch_dir: PathBuf,
}

impl HeapBudget {
    /// This run's budget: `max_memory` or the cgroups' limit, and `scratch_dir` or `$TMPDIR`.
    pub(crate) fn of_this_process(max_memory: Option<u64>, scratch_dir: Option<&Path>) -> HeapBudget {
        HeapBudget { limit: MemoryLimit::of_this_process(max_memory), scratch_dir: crate::scratch::default_dir(scratch_dir) }
    }
}

/// Anonymous memory the object graph, its dominator tree, retained sizes and root tree take
/// per object at their peak when they live in memory, edges included (36.5 measured on a
/// 169 M-object heap; the plan keeps a margin). The references the walk reads for the edges (a
/// byte an object, 4 a reference) are freed once the edges are built, before that peak.
pub(crate) const GRAPH_BYTES_PER_OBJECT: u64 = 40;
/// Anonymous memory per object planned when the graph's arrays live in scratch files: the
/// walk's per-segment lists (address, type, size: 12 bytes) before they are merged into the
/// files, the address index (about 1.3) kept in memory, and a margin. The objects' references
/// the walk reads (a byte an object, 4 a reference) stay in memory in what the lists leave
/// ([`walk_refs_memory`]) and go to scratch files after (a block of 65536 objects' in memory at
/// a time per segment being walked).
pub(crate) const WALK_BYTES_PER_OBJECT: u64 = 16;
/// Of [`WALK_BYTES_PER_OBJECT`], what the walk's lists take (address, type, size).
const WALK_LIST_BYTES_PER_OBJECT: u64 = 12;

/// Of `available` bytes, what the references the walk reads may take in memory before they go
/// to scratch files: what the walk's lists leave of it at the most objects it keeps (its cap,
/// `available / WALK_BYTES_PER_OBJECT`). A quarter: 0.8 GB in a 4 GiB cgroup, where the bench's
/// 192 M objects' references took about 0.56 GB (the walk's end at 2.78 GB RssAnon with them in
/// memory, 2.22 GB with them in files).
pub(crate) fn walk_refs_memory(available: u64) -> u64 {
    available.saturating_sub(available / WALK_BYTES_PER_OBJECT * WALK_LIST_BYTES_PER_OBJECT)
}

/// Scratch file bytes per object (the graph's types, sizes and edge index, its edges, the
/// dominator tree's and the retained sizes' arrays when no memory is left for them: 33.2
/// measured on a 192 M-object heap with one reference an object), with a margin. The walk's
/// references (a byte an object, 4 a reference) are deleted once the edges are built from
/// them, before the dominator tree's arrays exist.
pub(crate) const SCRATCH_BYTES_PER_OBJECT: u64 = 36;

/// Where the heap graph is read, once the walk has counted the objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GraphPlan {
    /// In anonymous memory: no limit, or it fits.
    Memory,
    /// Its large arrays in scratch files under the directory.
    Scratch(PathBuf),
    /// Not built: it fits neither in memory nor (with scratch) in memory and on disk. `scratch`
    /// says what the scratch directory offered.
    Degraded { needed: u64, scratch: ScratchVerdict },
}

/// What the scratch directory offered a graph that did not fit in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ScratchVerdict {
    /// Even the walk's lists (needed before any scratch file) do not fit the memory left.
    WalkTooLarge,
    /// Free bytes fewer than needed.
    TooSmall { dir: PathBuf, free: u64, needed: u64 },
    /// A memory-backed file system (tmpfs): no help.
    InMemory { dir: PathBuf },
    /// Not usable (missing, not writable).
    Unusable { dir: PathBuf, why: String },
}

/// The plan for a graph of `objects` objects: `available` bytes of memory (none: no limit), the
/// scratch directory `dir` offering `space`; `over_walk_cap` when the walk itself ran past the
/// objects it could keep.
pub(crate) fn plan_graph(objects: u64, available: Option<u64>, dir: &Path, space: &crate::scratch::ScratchSpace, over_walk_cap: bool) -> GraphPlan {
    use crate::scratch::ScratchSpace;
    let in_memory = objects.saturating_mul(GRAPH_BYTES_PER_OBJECT);
    let Some(available) = available else { return GraphPlan::Memory };
    if !over_walk_cap && in_memory <= available {
        return GraphPlan::Memory;
    }
    let scratch = match space {
        _ if over_walk_cap || objects.saturating_mul(WALK_BYTES_PER_OBJECT) > available => ScratchVerdict::WalkTooLarge,
        ScratchSpace::InMemory => ScratchVerdict::InMemory { dir: dir.to_path_buf() },
        ScratchSpace::Unusable(why) => ScratchVerdict::Unusable { dir: dir.to_path_buf(), why: why.clone() },
        ScratchSpace::Free(free) => {
            let needed = objects.saturating_mul(SCRATCH_BYTES_PER_OBJECT);
            if needed <= *free {
                return GraphPlan::Scratch(dir.to_path_buf());
            }
            ScratchVerdict::TooSmall { dir: dir.to_path_buf(), free: *free, needed }
        }
    };
    GraphPlan::Degraded { needed: in_memory, scratch }
}

/// v1 writes "no limit" as the largest multiple of the page size below 2^63.
const V1_UNLIMITED: u64 = 1 << 62;

impl MemoryLimit {
    /// The limit of this run: `max_memory` when given, else the lowest memory limit of the
    /// process's cgroup and its parents (none when no cgroup sets one).
    pub(crate) fn of_this_process(max_memory: Option<u64>) -> Option<MemoryLimit> {
        if let Some(bytes) = max_memory {
            return Some(MemoryLimit { bytes, source: LimitSource::Flag });
        }
        let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        cgroup_limit(&cgroups, Path::new("/sys/fs/cgroup"), &|p| std::fs::read_to_string(p).ok())
    }

    /// What the heap graph may take of the limit: the limit less its head-room and what the
    /// process holds already (`in_use`, its anonymous memory).
    pub(crate) fn for_heap_graph(&self, in_use: u64) -> u64 {
        let headroom = (self.bytes / 4).max(MIN_HEADROOM);
        self.bytes.saturating_sub(headroom).saturating_sub(in_use)
    }
}

/// The lowest limit of the memory cgroup named in `cgroups` (the text of `/proc/self/cgroup`)
/// and its parents, under the cgroup file systems mounted at `root`: v2's unified hierarchy
/// (`0::/path`, `memory.max`) or v1's memory controller (`N:...memory...:/path`,
/// `memory/…/memory.limit_in_bytes`). `read` reads a file (a test's files stand in).
pub(crate) fn cgroup_limit(cgroups: &str, root: &Path, read: &dyn Fn(&Path) -> Option<String>) -> Option<MemoryLimit> {
    let mut lowest: Option<MemoryLimit> = None;
    let mut consider = |dir: PathBuf, file: &str| {
        // The group and each parent up to the hierarchy's root (a child's limit can be set
        // higher than its parent's, which still applies).
        let mut at = Some(dir.as_path());
        let mut top = root.to_path_buf();
        if file == "memory.limit_in_bytes" {
            top.push("memory");
        }
        while let Some(d) = at {
            if !d.starts_with(&top) {
                break;
            }
            let path = d.join(file);
            if let Some(bytes) = read(&path).and_then(|t| parse_limit(&t))
                && lowest.as_ref().is_none_or(|l| bytes < l.bytes) {
                    lowest = Some(MemoryLimit { bytes, source: LimitSource::Cgroup(path) });
                }
            at = d.parent();
        }
    };
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let relative = path.trim().trim_start_matches('/');
        if relative.split('/').any(|c| c == "..") {
            continue;
        }
        if controllers.is_empty() {
            consider(root.join(relative), "memory.max");
        } else if controllers.split(',').any(|c| c == "memory") {
            consider(root.join("memory").join(relative), "memory.limit_in_bytes");
        }
    }
    lowest
}

/// A limit file's value: bytes, or `None` for no limit (`max`, v1's near-2^63).
fn parse_limit(text: &str) -> Option<u64> {
    let t = text.trim();
    if t == "max" {
        return None;
    }
    t.parse::<u64>().ok().filter(|&b| b > 0 && b < V1_UNLIMITED)
}

/// Returns the memory the allocator holds free to the system: many small arrays freed (each
/// segment's after the heap graph took it) stay in the allocator's arenas otherwise, counted
/// against the limit and in the peak.
pub(crate) fn give_back_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: glibc's malloc_trim only returns free pages of its own arenas to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The process's anonymous memory now (`RssAnon` of `/proc/self/status`), 0 when unknown.
pub(crate) fn anonymous_in_use() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("RssAnon:").and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())))
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn files(entries: &[(&str, &str)]) -> HashMap<PathBuf, String> {
        entries.iter().map(|(p, v)| (PathBuf::from(p), v.to_string())).collect()
    }

    #[test]
    fn v1_takes_the_lowest_of_the_group_and_its_parents() {
        let fs = files(&[
            ("/cg/memory/memory.limit_in_bytes", "9223372036854771712\n"),
            ("/cg/memory/pods/memory.limit_in_bytes", "2147483648\n"),
            ("/cg/memory/pods/job/memory.limit_in_bytes", "4294967296\n"),
        ]);
        let read = |p: &Path| fs.get(p).cloned();
        let l = cgroup_limit("9:pids:/\n4:memory:/pods/job\n0::/\n", Path::new("/cg"), &read).expect("a limit");
        assert_eq!(l.bytes, 2 << 30, "the parent's limit is lower than the group's own");
        assert_eq!(l.source, LimitSource::Cgroup(PathBuf::from("/cg/memory/pods/memory.limit_in_bytes")));
    }

    #[test]
    fn v2_reads_memory_max_and_max_is_no_limit() {
        let fs = files(&[("/cg/kubepods/pod1/memory.max", "1073741824\n"), ("/cg/kubepods/memory.max", "max\n")]);
        let read = |p: &Path| fs.get(p).cloned();
        let l = cgroup_limit("0::/kubepods/pod1\n", Path::new("/cg"), &read).expect("a limit");
        assert_eq!((l.bytes, l.source), (1 << 30, LimitSource::Cgroup(PathBuf::from("/cg/kubepods/pod1/memory.max"))));
        let none = files(&[("/cg/kubepods/pod1/memory.max", "max\n")]);
        assert_eq!(cgroup_limit("0::/kubepods/pod1\n", Path::new("/cg"), &|p: &Path| none.get(p).cloned()), None);
        // v1 without a memory controller line, an unlimited root: no limit.
        let v1 = files(&[("/cg/memory/memory.limit_in_bytes", "9223372036854771712\n")]);
        assert_eq!(cgroup_limit("4:memory:/\n", Path::new("/cg"), &|p: &Path| v1.get(p).cloned()), None);
        assert_eq!(cgroup_limit("4:memory:/../../etc\n", Path::new("/cg"), &|p: &Path| v1.get(p).cloned()), None);
    }

    #[test]
    fn the_flag_overrides_the_cgroups() {
        assert_eq!(MemoryLimit::of_this_process(Some(5)), Some(MemoryLimit { bytes: 5, source: LimitSource::Flag }));
    }

    #[test]
    fn the_plan_takes_memory_then_scratch_then_degrades_naming_why() {
        use crate::scratch::ScratchSpace;
        let dir = Path::new("/scratch");
        let n = 1_000_000u64;
        let disk = ScratchSpace::Free(1 << 40);
        assert_eq!(plan_graph(n, None, dir, &disk, false), GraphPlan::Memory, "no limit");
        assert_eq!(plan_graph(n, Some(n * GRAPH_BYTES_PER_OBJECT), dir, &disk, false), GraphPlan::Memory);
        let between = Some(n * 20);
        assert_eq!(plan_graph(n, between, dir, &disk, false), GraphPlan::Scratch(dir.to_path_buf()));
        let needed = n * GRAPH_BYTES_PER_OBJECT;
        assert_eq!(plan_graph(n, between, dir, &ScratchSpace::InMemory, false), GraphPlan::Degraded { needed, scratch: ScratchVerdict::InMemory { dir: dir.to_path_buf() } });
        assert_eq!(
            plan_graph(n, between, dir, &ScratchSpace::Free(1000), false),
            GraphPlan::Degraded { needed, scratch: ScratchVerdict::TooSmall { dir: dir.to_path_buf(), free: 1000, needed: n * SCRATCH_BYTES_PER_OBJECT } }
        );
        assert_eq!(plan_graph(n, Some(n * 8), dir, &disk, false), GraphPlan::Degraded { needed, scratch: ScratchVerdict::WalkTooLarge });
        assert_eq!(plan_graph(n, Some(n * 1000), dir, &disk, true), GraphPlan::Degraded { needed, scratch: ScratchVerdict::WalkTooLarge }, "the walk said it ran out");
    }

    #[test]
    fn the_heap_graph_gets_the_limit_less_head_room_and_what_is_in_use() {
        let l = MemoryLimit { bytes: 4 << 30, source: LimitSource::Flag };
        assert_eq!(l.for_heap_graph(0), 3 << 30);
        assert_eq!(l.for_heap_graph(1 << 30), 2 << 30);
        let small = MemoryLimit { bytes: 100 << 20, source: LimitSource::Flag };
        assert_eq!(small.for_heap_graph(0), 0, "a limit below the head-room leaves nothing");
    }
}
