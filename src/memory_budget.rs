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
            if let Some(bytes) = read(&path).and_then(|t| parse_limit(&t)) {
                if lowest.as_ref().is_none_or(|l| bytes < l.bytes) {
                    lowest = Some(MemoryLimit { bytes, source: LimitSource::Cgroup(path) });
                }
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
    fn the_heap_graph_gets_the_limit_less_head_room_and_what_is_in_use() {
        let l = MemoryLimit { bytes: 4 << 30, source: LimitSource::Flag };
        assert_eq!(l.for_heap_graph(0), 3 << 30);
        assert_eq!(l.for_heap_graph(1 << 30), 2 << 30);
        let small = MemoryLimit { bytes: 100 << 20, source: LimitSource::Flag };
        assert_eq!(small.for_heap_graph(0), 0, "a limit below the head-room leaves nothing");
    }
}
