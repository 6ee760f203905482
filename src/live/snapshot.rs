//! One reading of a live process: stop it, copy registers and the memory the analysis needs,
//! let it go, and only then assemble the core. Everything slow (names, core layout, and later
//! unwinding and symbols) happens after the process runs again.

use super::attach::{self, Attached};
use super::corebuilder::{self, CoreParts, FileEntry, ProcessRecord, Region, ThreadRecord};
use super::maps::{self, Mapping};
use super::memory::Reader;
use super::{LiveError, LiveOptions};
use crate::bytes::{u16_at, u32_at, u64_at};
use crate::core::knot_note::Capture;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const PAGE: u64 = 4096;
/// Below the stack pointer the ABI's red zone may hold live data.
const RED_ZONE: u64 = 128;
const MAX_PHDRS: u64 = 256;
const MAX_NOTE_BYTES: u64 = 64 * 1024;

/// What was read, ready to be written as a core.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub pid: u32,
    pub parts: CoreParts,
    /// From the first thread seized to the last one detached.
    pub pause: Duration,
}

impl Snapshot {
    pub fn core_bytes(&self) -> Vec<u8> {
        corebuilder::build(&self.parts)
    }
}

/// What the memory copy is for, which decides its place under the copy limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Need {
    /// Stacks, module headers, the vDSO: always copied.
    Always,
    /// A module's writable data and its relocated read-only part: in address order.
    Data,
    /// Anonymous and shared memory, files no longer on disk: smallest first.
    Anonymous,
}

#[derive(Debug, Clone, Copy)]
struct Want {
    start: u64,
    end: u64,
    need: Need,
    /// The first page of a file-backed image.
    header: bool,
}

/// Mappings whose pages cannot be read from another process (or that are the kernel's).
fn is_special(m: &Mapping) -> bool {
    matches!(m.path.as_str(), "[vvar]" | "[vvar_vclock]" | "[vsyscall]")
}

fn stack_pointer(regs: &[u8; 216]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&regs[19 * 8..20 * 8]);
    u64::from_le_bytes(b)
}

/// The copies to make, and how much the limit left out: (`wants`, bytes left out, mappings
/// left out).
fn plan(mappings: &[Mapping], sps: &[u64], opts: &LiveOptions) -> (Vec<Want>, u64, u32) {
    let mut wants = Vec::new();
    let mut is_stack = vec![false; mappings.len()];
    for &sp in sps {
        // /proc/PID/maps is sorted by address.
        let Some(i) = mappings.partition_point(|m| m.start <= sp).checked_sub(1).filter(|&i| mappings[i].read && mappings[i].contains(sp)) else { continue };
        let m = &mappings[i];
        is_stack[i] = true;
        let lo = (sp.saturating_sub(RED_ZONE) & !(PAGE - 1)).max(m.start);
        wants.push(Want { start: lo, end: m.end.min(lo.saturating_add(opts.max_stack_bytes)), need: Need::Always, header: false });
    }
    for (i, m) in mappings.iter().enumerate() {
        if !m.read || is_stack[i] || is_special(m) || m.is_empty() {
            continue;
        }
        let whole = |need| Want { start: m.start, end: m.end, need, header: false };
        if m.path == "[vdso]" {
            wants.push(whole(Need::Always));
        } else if m.is_file() && !m.is_deleted_file() {
            let relro = !m.write && !m.exec && m.offset != 0 && mappings.get(i + 1).is_some_and(|n| n.inode == m.inode && n.path == m.path && n.write);
            if m.write || relro {
                wants.push(whole(Need::Data));
            } else if m.offset == 0 {
                wants.push(Want { start: m.start, end: m.end.min(m.start + PAGE), need: Need::Always, header: true });
            }
        } else {
            wants.push(whole(Need::Anonymous));
        }
    }
    // The limit: what is always copied first, then data in address order, then anonymous
    // memory smallest first (many small mappings hold more distinct facts than one big one).
    wants.sort_by_key(|w| (w.need, if w.need == Need::Anonymous { w.end - w.start } else { 0 }, w.start));
    let mut used = 0u64;
    let (mut left_bytes, mut left_maps) = (0u64, 0u32);
    wants.retain(|w| {
        let len = w.end - w.start;
        if w.need == Need::Always || used.saturating_add(len) <= opts.max_copy_bytes {
            used = used.saturating_add(len);
            true
        } else {
            left_bytes += len;
            left_maps += 1;
            false
        }
    });
    wants.sort_by_key(|w| w.start);
    (wants, left_bytes, left_maps)
}

/// The program headers and notes of the ELF image whose first page is `page` (at `base`),
/// where they lie beyond that page: build-ids are found there as in a gcore dump.
fn header_extras(page: &[u8], base: u64) -> Vec<(u64, u64)> {
    if page.get(..4) != Some(b"\x7fELF") {
        return Vec::new();
    }
    let (Some(phoff), Some(phnum)) = (u64_at(page, 32), u16_at(page, 56)) else { return Vec::new() };
    let phnum = u64::from(phnum).min(MAX_PHDRS);
    let table_end = phoff.saturating_add(phnum * 56);
    let mut out = Vec::new();
    if table_end > page.len() as u64 {
        out.push((base.saturating_add(phoff), base.saturating_add(table_end)));
        return out;
    }
    let ph = |i: u64, field: usize| u64_at(page, (phoff + i * 56) as usize + field);
    let kind = |i: u64| u32_at(page, (phoff + i * 56) as usize);
    // The link base: the page of the PT_LOAD that maps file offset 0, which is where `base` is.
    let loads = (0..phnum).filter(|&i| kind(i) == Some(1)).filter_map(|i| Some((ph(i, 8)?, ph(i, 16)?)));
    let Some(link) = loads.min_by_key(|(offset, _)| *offset).map(|(offset, vaddr)| vaddr.wrapping_sub(offset) & !(PAGE - 1)) else {
        return out;
    };
    let bias = base.wrapping_sub(link);
    for i in (0..phnum).filter(|&i| kind(i) == Some(4)) {
        let (Some(vaddr), Some(size)) = (ph(i, 16), ph(i, 32)) else { continue };
        let start = bias.wrapping_add(vaddr);
        let end = start.saturating_add(size.min(MAX_NOTE_BYTES));
        if start < base || end > base + page.len() as u64 {
            out.push((start, end));
        }
    }
    out
}

fn read_proc(pid: i32, file: &str) -> Option<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/{file}")).ok()
}

/// pid, ppid, pgrp, session and the state letter from `/proc/PID/stat` and the ids from
/// `/proc/PID/status`: read before stopping it, so the state is its own.
fn process_record(pid: i32) -> ProcessRecord {
    let stat = read_proc(pid, "stat").map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let mut rec = ProcessRecord { pid: pid as u32, state: b'?', ..ProcessRecord::default() };
    if let Some((head, rest)) = stat.rsplit_once(')') {
        rec.comm = head.split_once('(').map(|(_, c)| c.to_string()).unwrap_or_default();
        let f: Vec<&str> = rest.split_whitespace().collect();
        rec.state = f.first().and_then(|s| s.bytes().next()).unwrap_or(b'?');
        let num = |i: usize| f.get(i).and_then(|s| s.parse::<u32>().ok()).unwrap_or(0);
        (rec.ppid, rec.pgrp, rec.sid) = (num(1), num(2), num(3));
    }
    let status = read_proc(pid, "status").map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let id = |key: &str| status.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap_or(0);
    (rec.uid, rec.gid) = (id("Uid:"), id("Gid:"));
    let cmdline = read_proc(pid, "cmdline").unwrap_or_default();
    rec.args = String::from_utf8_lossy(&cmdline).replace('\0', " ").trim_end().to_string();
    rec
}

/// Sleeps `d` in small steps, stopping early when cancelled (the test hook that widens the
/// attached window).
fn sleep_cancellable(d: Duration, opts: &LiveOptions) {
    let until = Instant::now() + d;
    while Instant::now() < until && !opts.cancel.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(5).min(until.saturating_duration_since(Instant::now())));
    }
}

/// Reads process `pid` live. The process is stopped only inside this call, and is let go on
/// every way out of it.
pub fn take(pid: i32, opts: &LiveOptions) -> Result<Snapshot, LiveError> {
    let pid = super::check_target(pid)?;
    let mut process = process_record(pid);

    let started = Instant::now();
    opts.attached.store(true, Ordering::SeqCst);
    let result = read_stopped(pid, opts);
    let pause = started.elapsed();
    opts.attached.store(false, Ordering::SeqCst);
    let (threads, mappings, pieces, left_bytes, left_maps, auxv, args) = result?;
    if process.args.is_empty() {
        process.args = args;
    }

    let names = threads.iter().filter_map(|t| {
        let comm = read_proc(pid, &format!("task/{}/comm", t.tid))?;
        Some((t.tid, String::from_utf8_lossy(&comm).trim_end_matches('\n').to_string()))
    });
    let names: Vec<(u32, String)> = names.collect();
    let files = mappings.iter().filter(|m| m.is_file()).map(|m| FileEntry { start: m.start, end: m.end, offset: m.offset, path: m.path.clone() }).collect();
    let regions = regions(&mappings, pieces);
    let bytes_copied = regions.iter().map(|r| r.data.len() as u64).sum();
    let capture = Capture {
        pid: pid as u32,
        threads: threads.len() as u32,
        pause_us: pause.as_micros().min(u128::from(u64::MAX)) as u64,
        bytes_copied,
        bytes_left_out: left_bytes,
        mappings_left_out: left_maps,
    };
    Ok(Snapshot { pid: pid as u32, parts: CoreParts { process, threads, auxv, files, names, capture, regions }, pause })
}

type Stopped = (Vec<ThreadRecord>, Vec<Mapping>, Vec<(u64, Vec<u8>)>, u64, u32, Vec<u8>, String);

/// The part done while the process is stopped. `Attached` detaches when it goes out of scope
/// here, on success and on every error.
fn read_stopped(pid: i32, opts: &LiveOptions) -> Result<Stopped, LiveError> {
    let attached = Attached::seize_all(pid, &opts.cancel)?;
    if let Some(d) = opts.test_pause_after_attach {
        sleep_cancellable(d, opts);
    }
    let cancelled = || if opts.cancel.load(Ordering::SeqCst) { Err(LiveError::Interrupted { pid }) } else { Ok(()) };
    cancelled()?;
    if opts.test_fail_after_attach {
        return Err(LiveError::TestFailure { pid });
    }
    let mut threads = Vec::new();
    for tid in attached.tids() {
        let regs = attach::registers(tid).map_err(|source| LiveError::Ptrace { pid, tid, what: "PTRACE_GETREGS", source })?;
        threads.push(ThreadRecord { tid: tid as u32, regs, fpregs: attach::fp_registers(tid).ok() });
    }
    cancelled()?;
    // The memory is read through a live thread: once the main thread has exited (a zombie
    // until the process ends) /proc/PID shows no mappings and its memory cannot be read.
    let via = threads.first().map_or(pid, |t| t.tid as i32);
    let task = format!("task/{via}");
    let maps_text = std::fs::read_to_string(format!("/proc/{pid}/{task}/maps")).map_err(|source| LiveError::Proc { pid, file: "maps", source })?;
    // The auxiliary vector and the command line, from the same thread.
    let auxv = read_proc(pid, &format!("{task}/auxv")).unwrap_or_default();
    let args = String::from_utf8_lossy(&read_proc(pid, &format!("{task}/cmdline")).unwrap_or_default()).replace('\0', " ").trim_end().to_string();
    let mappings = maps::parse(&maps_text);
    let sps: Vec<u64> = threads.iter().map(|t| stack_pointer(&t.regs)).collect();
    let (wants, left_bytes, left_maps) = plan(&mappings, &sps, opts);
    let mut reader = Reader::new(via);
    let mut pieces = Vec::new();
    for w in &wants {
        cancelled()?;
        let got = reader.read_range(w.start, w.end);
        // A module's first page: its program headers and build-id notes when they lie further.
        if w.header
            && let Some((at, page)) = got.first().filter(|(a, _)| *a == w.start) {
                for (s, e) in header_extras(page, *at) {
                    if mappings.iter().any(|m| m.read && !is_special(m) && m.contains(s)) {
                        pieces.extend(reader.read_range(s, e));
                    }
                }
            }
        pieces.extend(got);
    }
    attached.detach();
    Ok((threads, mappings, pieces, left_bytes, left_maps, auxv, args))
}

/// One PT_LOAD per copied piece (its memory size reaching to the next piece or the mapping's
/// end, the rest "not saved" as in a kernel core), and one without bytes for a mapping, or its
/// beginning, with nothing copied.
fn regions(mappings: &[Mapping], mut pieces: Vec<(u64, Vec<u8>)>) -> Vec<Region> {
    pieces.sort_by_key(|p| p.0);
    // Merge overlapping or touching pieces (a stack and a header read may meet).
    let mut merged: Vec<(u64, Vec<u8>)> = Vec::with_capacity(pieces.len());
    for (at, data) in pieces {
        match merged.last_mut() {
            Some((a, d)) if at <= *a + d.len() as u64 => {
                let have_end = *a + d.len() as u64;
                let new_end = at + data.len() as u64;
                if new_end > have_end {
                    d.extend_from_slice(&data[(have_end - at) as usize..]);
                }
            }
            _ => merged.push((at, data)),
        }
    }
    let mut by_mapping: BTreeMap<usize, Vec<(u64, Vec<u8>)>> = BTreeMap::new();
    let readable: Vec<usize> = (0..mappings.len()).filter(|&i| mappings[i].read && !is_special(&mappings[i]) && !mappings[i].is_empty()).collect();
    for (mut at, mut data) in merged {
        // A piece may run across adjacent mappings: split it at their boundaries.
        while !data.is_empty() {
            let Some(&i) = readable.iter().find(|&&i| mappings[i].contains(at)) else { break };
            let take = ((mappings[i].end - at) as usize).min(data.len());
            let rest = data.split_off(take);
            by_mapping.entry(i).or_default().push((at, data));
            at += take as u64;
            data = rest;
        }
    }
    let mut out = Vec::new();
    for i in readable {
        let m = &mappings[i];
        let flags = m.elf_flags();
        let pieces = by_mapping.remove(&i).unwrap_or_default();
        let first = pieces.first().map_or(m.end, |p| p.0);
        if first > m.start {
            out.push(Region { vaddr: m.start, memsz: first - m.start, flags, data: Vec::new() });
        }
        let starts: Vec<u64> = pieces.iter().map(|p| p.0).skip(1).chain([m.end]).collect();
        for ((at, data), next) in pieces.into_iter().zip(starts) {
            out.push(Region { vaddr: at, memsz: next - at, flags, data });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(start: u64, end: u64, perms: &str, offset: u64, inode: u64, path: &str) -> Mapping {
        let p = perms.as_bytes();
        Mapping { start, end, read: p[0] == b'r', write: p[1] == b'w', exec: p[2] == b'x', shared: p[3] == b's', offset, inode, path: path.into() }
    }

    fn opts(limit: u64) -> LiveOptions {
        LiveOptions { max_copy_bytes: limit, ..LiveOptions::default() }
    }

    #[test]
    fn stacks_from_the_stack_pointer_headers_data_and_anonymous_memory_but_not_text() {
        let m = vec![
            map(0x10000, 0x11000, "r--p", 0, 5, "/bin/app"),
            map(0x11000, 0x15000, "r-xp", 0x1000, 5, "/bin/app"),
            map(0x15000, 0x16000, "r--p", 0x5000, 5, "/bin/app"),
            map(0x16000, 0x17000, "rw-p", 0x6000, 5, "/bin/app"),
            map(0x20000, 0x40000, "rw-p", 0, 0, ""),
            map(0x40000, 0x41000, "---p", 0, 0, ""),
            map(0x41000, 0x841000, "rw-p", 0, 0, ""),
            map(0x900000, 0x902000, "r-xp", 0, 0, "[vdso]"),
            map(0x902000, 0x904000, "r--p", 0, 0, "[vvar]"),
        ];
        let (wants, left, _) = plan(&m, &[0x840f00], &opts(1 << 30));
        let got: Vec<(u64, u64)> = wants.iter().map(|w| (w.start, w.end)).collect();
        assert_eq!(
            got,
            vec![(0x10000, 0x11000), (0x15000, 0x16000), (0x16000, 0x17000), (0x20000, 0x40000), (0x840000, 0x841000), (0x900000, 0x902000)],
            "the header page, RELRO, data, the heap, the stack from sp (with its red zone), the vDSO"
        );
        assert_eq!(left, 0);
    }

    #[test]
    fn the_copy_limit_leaves_out_the_largest_anonymous_memory_first_and_says_so() {
        let m = vec![map(0x1000, 0x2000, "rw-p", 0, 0, ""), map(0x10000, 0x90000, "rw-p", 0, 0, ""), map(0x100000, 0x101000, "rw-p", 0, 0, "")];
        let (wants, left, maps) = plan(&m, &[], &opts(0x3000));
        assert_eq!(wants.iter().map(|w| w.start).collect::<Vec<_>>(), vec![0x1000, 0x100000]);
        assert_eq!((left, maps), (0x80000, 1));
    }

    #[test]
    fn regions_cover_each_mapping_with_its_copied_pieces_first() {
        let m = vec![map(0x10000, 0x14000, "r--p", 0, 5, "/bin/app"), map(0x14000, 0x18000, "rw-p", 0, 0, "")];
        let r = regions(&m, vec![(0x10000, vec![1; 0x1000]), (0x15000, vec![2; 0x1000]), (0x17000, vec![3; 0x2000])]);
        let shape: Vec<(u64, u64, usize)> = r.iter().map(|r| (r.vaddr, r.memsz, r.data.len())).collect();
        assert_eq!(shape, vec![(0x10000, 0x4000, 0x1000), (0x14000, 0x1000, 0), (0x15000, 0x2000, 0x1000), (0x17000, 0x1000, 0x1000)], "a piece running past its mapping is cut there");
    }
}
