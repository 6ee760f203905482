//! knot's own notes (owner "KNOT") in the cores `knot pid` builds from a live process: what a
//! kernel core leaves out and a live reading has.
//!
//! - type 1, thread names: repeated `u32 tid`, the name's bytes, a NUL (from
//!   `/proc/PID/task/TID/comm`);
//! - type 2, the capture: how long the process was stopped and how much was copied.

use crate::bytes::{u32_at, u64_at};
use std::collections::BTreeMap;

pub(crate) const OWNER: &[u8] = b"KNOT";
pub(crate) const NT_KNOT_THREAD_NAMES: u32 = 1;
pub(crate) const NT_KNOT_CAPTURE: u32 = 2;
/// A thread name is at most 15 bytes (TASK_COMM_LEN - 1); longer is not a name.
const MAX_NAME: usize = 64;

/// How a live process was read (`knot pid`), as the capture note records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capture {
    pub(crate) pid: u32,
    pub(crate) threads: u32,
    /// From the first thread stopped to the last one let go, in microseconds.
    pub(crate) pause_us: u64,
    /// Process memory copied into the core.
    pub bytes_copied: u64,
    /// Memory that would have been copied but for the copy limit.
    pub(crate) bytes_left_out: u64,
    /// Mappings left out (wholly or partly) because of the limit.
    pub(crate) mappings_left_out: u32,
}

pub(crate) const CAPTURE_SIZE: usize = 40;

impl Capture {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(CAPTURE_SIZE);
        v.extend(self.pid.to_le_bytes());
        v.extend(self.threads.to_le_bytes());
        v.extend(self.pause_us.to_le_bytes());
        v.extend(self.bytes_copied.to_le_bytes());
        v.extend(self.bytes_left_out.to_le_bytes());
        v.extend(self.mappings_left_out.to_le_bytes());
        v.extend(0u32.to_le_bytes());
        v
    }

    pub(crate) fn parse(desc: &[u8]) -> Option<Capture> {
        Some(Capture {
            pid: u32_at(desc, 0)?,
            threads: u32_at(desc, 4)?,
            pause_us: u64_at(desc, 8)?,
            bytes_copied: u64_at(desc, 16)?,
            bytes_left_out: u64_at(desc, 24)?,
            mappings_left_out: u32_at(desc, 32)?,
        })
    }
}

pub(crate) fn encode_thread_names<'a>(names: impl IntoIterator<Item = (u32, &'a str)>) -> Vec<u8> {
    let mut v = Vec::new();
    for (tid, name) in names {
        v.extend(tid.to_le_bytes());
        v.extend(name.bytes().filter(|&b| b != 0).take(MAX_NAME));
        v.push(0);
    }
    v
}

/// Parses the thread-name note; `Err` says where it broke off (the names before it are kept).
pub(crate) fn parse_thread_names(desc: &[u8], names: &mut BTreeMap<u32, String>) -> Result<(), String> {
    let mut at = 0usize;
    while at < desc.len() {
        let tid = u32_at(desc, at).ok_or_else(|| format!("cut off at byte {at}: no room for a thread id"))?;
        let rest = &desc[at + 4..];
        let len = rest.iter().take(MAX_NAME + 1).position(|&b| b == 0).ok_or_else(|| format!("the name of thread {tid} at byte {at} has no NUL within {MAX_NAME} bytes"))?;
        names.insert(tid, String::from_utf8_lossy(&rest[..len]).into_owned());
        at += 4 + len + 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_names_round_trip_and_a_cut_note_keeps_what_came_before() {
        let bytes = encode_thread_names([(10, "main"), (11, "worker 1"), (12, "")]);
        let mut names = BTreeMap::new();
        parse_thread_names(&bytes, &mut names).unwrap();
        assert_eq!(names.get(&11).map(String::as_str), Some("worker 1"));
        assert_eq!(names.get(&12).map(String::as_str), Some(""));
        let mut cut = BTreeMap::new();
        assert!(parse_thread_names(&bytes[..bytes.len() - 3], &mut cut).is_err());
        assert_eq!(cut.len(), 2);
    }

    #[test]
    fn the_capture_round_trips_and_a_short_one_is_refused() {
        let c = Capture { pid: 7, threads: 601, pause_us: 20_800, bytes_copied: 1 << 20, bytes_left_out: 5, mappings_left_out: 1 };
        assert_eq!(Capture::parse(&c.encode()), Some(c));
        assert_eq!(Capture::parse(&c.encode()[..20]), None);
    }
}

#[cfg(test)]
mod any_bytes {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn never_panic_and_keep_names_short(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut names = BTreeMap::new();
            let _ = parse_thread_names(&bytes, &mut names);
            prop_assert!(names.values().all(|n| n.len() <= MAX_NAME * 3));
            let _ = Capture::parse(&bytes);
        }
    }
}
