//! What a faulting address was, from the dump's own mappings (its PT_LOAD segments and NT_FILE):
//! the null page, a stack's guard gap, unmapped, read-only, not executable, past a file's end.

use super::model::{Access, AddressKind, MappingReport};
use super::signal::{BUS_ADRERR, SIGBUS};
use crate::core::Segment;
use crate::process::Process;
use crate::hex::Hex;

const PF_X: u32 = 1;
const PF_W: u32 = 2;
const PF_R: u32 = 4;
/// The lowest address a process may map by default (`vm.mmap_min_addr`).
const MMAP_MIN_ADDR: u64 = 0x10000;
/// The kernel keeps this gap below a growing stack (`stack_guard_gap`, 256 pages); glibc's
/// thread guard pages are smaller and sit inside it.
const STACK_GUARD_GAP: u64 = 256 * 4096;

/// The segment (mapping) holding `addr`.
fn segment_at(process: &Process, addr: u64) -> Option<&Segment> {
    process.core.segments.find(addr)
}

fn accessible(s: &Segment) -> bool {
    s.flags & (PF_R | PF_W | PF_X) != 0
}

/// The writable mapping each thread's stack pointer is in — or, when the stack pointer has run
/// below its stack (into the guard), the writable mapping just above it.
fn stacks(process: &Process) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for t in &process.core.threads {
        let sp = t.registers.sp();
        let stack = match segment_at(process, sp) {
            Some(s) if s.flags & PF_W != 0 => Some(s),
            _ => process.core.segments.iter().filter(|s| s.vaddr > sp && s.vaddr - sp <= STACK_GUARD_GAP && s.flags & PF_W != 0).min_by_key(|s| s.vaddr),
        };
        if let Some(s) = stack {
            out.push((s.vaddr, s.end()));
        }
    }
    out
}

/// Whether `addr` lies in the gap below some thread's stack, where nothing accessible is mapped.
pub(crate) fn in_stack_guard(process: &Process, addr: u64) -> bool {
    if segment_at(process, addr).is_some_and(accessible) {
        return false;
    }
    stacks(process).iter().any(|&(lo, _)| addr < lo && lo - addr <= STACK_GUARD_GAP)
}

/// Classifies `addr` for a fault of signal `signo`/`code`, made by an access of kind `access`.
pub(crate) fn classify(process: &Process, addr: u64, signo: i32, code: i32, access: Option<Access>) -> Option<AddressKind> {
    if addr >= process.core.arch.user_space_end() {
        return Some(AddressKind::Kernel);
    }
    if addr < MMAP_MIN_ADDR {
        return Some(AddressKind::NullPage);
    }
    if signo == SIGBUS && code == BUS_ADRERR && file_at(process, addr).is_some() {
        return Some(AddressKind::PastEndOfFile);
    }
    if in_stack_guard(process, addr) {
        return Some(AddressKind::StackGuard);
    }
    let Some(seg) = segment_at(process, addr) else { return Some(AddressKind::Unmapped) };
    if !accessible(seg) {
        return Some(AddressKind::NoAccess);
    }
    match access {
        Some(Access::Execute) if seg.flags & PF_X == 0 => Some(AddressKind::NotExecutable),
        Some(Access::Write) if seg.flags & PF_W == 0 => Some(AddressKind::ReadOnly),
        _ => None,
    }
}

/// The NT_FILE path mapped at `addr`.
fn file_at(process: &Process, addr: u64) -> Option<&str> {
    process.core.files.as_ref()?.iter().find(|f| addr >= f.start && addr < f.end).map(|f| f.path.as_str())
}

/// The mapping holding `addr`: its range, permissions, file and module.
pub(crate) fn mapping(process: &Process, addr: u64) -> Option<MappingReport> {
    let seg = segment_at(process, addr)?;
    let perm = |bit: u32, c: char| if seg.flags & bit != 0 { c } else { '-' };
    Some(MappingReport {
        start: Hex(seg.vaddr),
        end: Hex(seg.end()),
        perms: [perm(PF_R, 'r'), perm(PF_W, 'w'), perm(PF_X, 'x')].iter().collect(),
        file: file_at(process, addr).map(str::to_string),
        module: process.module_at(addr).map(|(_, m)| m.name().to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::Locator;
    use crate::tests::common;
    use knot_samples::DumpKind;

    fn open(d: &knot_samples::SampleDump) -> Process {
        Process::open(&d.core, &Locator::default()).expect("open the committed dump")
    }

    #[test]
    fn an_aarch64_stack_address_above_2_pow_47_is_a_user_address() {
        // arm64 maps libraries and stacks just below 2^48: past x86-64's user half, which knot
        // once took for the kernel's on every architecture.
        let p = open(&common::committed_aarch64("abba", DumpKind::Kernel));
        let sp = p.core.threads[0].registers.sp();
        assert!(sp >= 0x0000_8000_0000_0000, "the sample's stack is at {sp:#x}");
        assert_eq!(classify(&p, sp, 11, 1, None), None, "a fault on its own mapped stack has no address class");
        assert_ne!(classify(&p, sp - 0x1000_0000, 11, 1, None), Some(AddressKind::Kernel));
        assert_eq!(classify(&p, 0xffff_0000_0000_1000, 11, 1, None), Some(AddressKind::Kernel));
    }

    #[test]
    fn an_x86_64_address_past_the_canonical_half_is_the_kernels() {
        let p = open(&common::committed("abba", DumpKind::Kernel));
        assert_eq!(classify(&p, 0x0000_8000_0000_0000, 11, 1, None), Some(AddressKind::Kernel));
        assert_eq!(classify(&p, 0x0000_7fff_0000_0000, 11, 1, None), Some(AddressKind::Unmapped));
    }
}
