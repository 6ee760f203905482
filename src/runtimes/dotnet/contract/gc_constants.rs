//! The two `GcDacVars` targets that are constants of a GC build — `max_gen` (`g_max_generation`,
//! 2) and `generation_field_offsets` (`offsetof` of `generation`'s allocation context and start
//! segment, and -1 for the allocation start regions lack) — found in a runtime file's x86-64
//! code, with the values its initialised data gives them.
//!
//! Why: in a single-file app they live in the executable's writable `.data`, whose pages a
//! createdump heap dump does not save, so without this the GC heap of such a dump is not read.
//! Both are initialised statics the runtime never writes (gc.cpp), so the file's bytes are
//! the process's: checked on every catalogued `libcoreclr.so` dump, where the bytes are in the
//! dump (tests/dotnet_catalog.rs).
//!
//! Where: the GC fills `GcDacVars` in `PopulateDacVars` (once per GC flavour, workstation and
//! server) as `movq $total_generation_count, 0x10(%rdi)`, then stores of RIP-relative `lea`s:
//! `max_gen` at +0x38, `generation_field_offsets` at +0xf8. Every x86-64 `libcoreclr.so` and
//! `singlefilehost` of 9.0.18–9.0.23 and 10.0.11–10.0.15 has this shape twice.

use crate::runtimes::dotnet::gc::gcvars::var;
use crate::process::ElfFile;
use yaxpeax_arch::LengthedInstruction;
use yaxpeax_x86::long_mode::{InstDecoder, Opcode, Operand, RegSpec};

/// `movq $5, 0x10(%rdi)`: `GcDacVars.total_generation_count = 5` (gen0–2, LOH, POH).
const ANCHOR: [u8; 8] = [0x48, 0xc7, 0x47, 0x10, 0x05, 0x00, 0x00, 0x00];
/// The `GcDacVars` fields whose targets are the constants.
const MAX_GEN: i32 = var::MAX_GEN as i32;
const GENERATION_FIELD_OFFSETS: i32 = var::GENERATION_FIELD_OFFSETS as i32;
/// Instructions decoded after the anchor (the function is ~70 long) and functions kept at most.
const WINDOW: usize = 200;
const MAX_FUNCTIONS: usize = 4;
const PF_X: u32 = 1;
/// The `generation_field_offsets` entries knot reads: allocation_context, start_segment,
/// allocation_start.
pub(crate) const GENERATION_FIELDS: usize = 3;

/// What a build's GC vars point at, as link-time addresses (the workstation and the server GC
/// may have one each) and the value there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcConstants {
    pub max_generation: u32,
    pub max_generation_at: Vec<u64>,
    pub generation_field_offsets: [i32; GENERATION_FIELDS],
    pub generation_field_offsets_at: Vec<u64>,
}

impl GcConstants {
    /// `max_gen`'s value when the dump's vars point at `address` and the module is loaded with
    /// `bias`; `None` for any other address.
    pub(crate) fn max_generation_for(&self, bias: u64, address: u64) -> Option<u32> {
        self.max_generation_at.iter().any(|rva| bias.wrapping_add(*rva) == address).then_some(self.max_generation)
    }

    /// As [`Self::max_generation_for`], for `generation_field_offsets`.
    pub(crate) fn generation_field_offsets_for(&self, bias: u64, address: u64) -> Option<[i32; GENERATION_FIELDS]> {
        self.generation_field_offsets_at.iter().any(|rva| bias.wrapping_add(*rva) == address).then_some(self.generation_field_offsets)
    }
}

/// The constants of an x86-64 runtime file, or `None` when its code does not have the shape
/// above, a target is not initialised data, or the copies disagree.
pub(crate) fn from_file(file: &ElfFile) -> Option<GcConstants> {
    use goblin::elf::program_header::PT_LOAD;
    let mut max_at = Vec::new();
    let mut offsets_at = Vec::new();
    let mut functions = 0;
    for p in file.program_headers.iter().filter(|p| p.p_type == PT_LOAD && p.p_flags & PF_X != 0) {
        let Some(code) = file.bytes_at_offset(p.p_offset, p.p_filesz) else { continue };
        for at in memchr::memmem::find_iter(code, &ANCHOR) {
            let stores = stores_after(code, at, p.p_vaddr);
            let max = stores.iter().find(|(off, _)| *off == MAX_GEN).map(|s| s.1);
            let offsets = stores.iter().find(|(off, _)| *off == GENERATION_FIELD_OFFSETS).map(|s| s.1);
            if let (Some(m), Some(o)) = (max, offsets) {
                functions += 1;
                max_at.push(m);
                offsets_at.push(o);
            }
        }
    }
    if functions == 0 || functions > MAX_FUNCTIONS {
        return None;
    }
    for v in [&mut max_at, &mut offsets_at] {
        v.sort_unstable();
        v.dedup();
    }
    let initialised = |rva: u64, len: u64| -> Option<&[u8]> {
        let (offset, available) = file.offset_of_vaddr(rva)?;
        (available >= len).then(|| file.bytes_at_offset(offset, len)).flatten()
    };
    let max_values: Option<Vec<u32>> = max_at.iter().map(|&rva| initialised(rva, 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))).collect();
    let offset_values: Option<Vec<[i32; GENERATION_FIELDS]>> = offsets_at
        .iter()
        .map(|&rva| {
            let b = initialised(rva, 4 * GENERATION_FIELDS as u64)?;
            let mut v = [0i32; GENERATION_FIELDS];
            for (i, x) in v.iter_mut().enumerate() {
                *x = i32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
            }
            Some(v)
        })
        .collect();
    let (max_values, offset_values) = (max_values?, offset_values?);
    let max_generation = *max_values.first()?;
    let generation_field_offsets = *offset_values.first()?;
    if max_values.iter().any(|&v| v != max_generation) || offset_values.iter().any(|&v| v != generation_field_offsets) {
        return None;
    }
    Some(GcConstants { max_generation, max_generation_at: max_at, generation_field_offsets, generation_field_offsets_at: offsets_at })
}

/// The `GcDacVars` stores after the anchor at `code[start..]`: (field offset, the RIP-relative
/// address stored), up to the function's `ret`.
fn stores_after(code: &[u8], start: usize, vaddr: u64) -> Vec<(i32, u64)> {
    let decoder = InstDecoder::default();
    let mut at = start;
    let mut out = Vec::new();
    // The last `lea` target per register number.
    let mut lea: [Option<u64>; 16] = [None; 16];
    for _ in 0..WINDOW {
        let Some(slice) = code.get(at..(at + 15).min(code.len())) else { break };
        let Ok(inst) = decoder.decode_slice(slice) else { break };
        at += inst.len().to_const() as usize;
        let end = vaddr.wrapping_add(at as u64);
        match (inst.opcode(), inst.operand(0), inst.operand(1)) {
            (Opcode::RETURN, _, _) => break,
            (Opcode::LEA, Operand::Register(r), Operand::RegDisp(base, d)) if base == RegSpec::rip() && r.width() == 8 => {
                if let Some(slot) = lea.get_mut(r.num() as usize) {
                    *slot = Some(end.wrapping_add(i64::from(d) as u64));
                }
            }
            (Opcode::MOV, Operand::RegDisp(base, off), Operand::Register(src)) if base == RegSpec::rdi() && src.width() == 8 => {
                if let Some(Some(target)) = lea.get(src.num() as usize) {
                    out.push((off, *target));
                }
            }
            // Any other write to a register forgets its `lea`.
            (_, Operand::Register(r), _) => {
                if let Some(slot) = lea.get_mut(r.num() as usize) {
                    *slot = None;
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vars_stores_after_the_anchor_are_found_up_to_ret() {
        // singlefilehost 10.0.12's workstation PopulateDacVars at 0x7a71cc: movq $5,0x10(%rdi);
        // lea 0x3b142d(%rip),%rcx; mov %rcx,0x38(%rdi); ret.
        let code = [0x48, 0xc7, 0x47, 0x10, 0x05, 0, 0, 0, 0x48, 0x8d, 0x0d, 0x2d, 0x14, 0x3b, 0x00, 0x48, 0x89, 0x4f, 0x38, 0xc3, 0x48, 0x89, 0x4f, 0x40];
        assert_eq!(stores_after(&code, 0, 0x7a71cc), vec![(0x38, 0xb58608)]);
        // A register written between the lea and the store is not the lea's address any more.
        let mut clobbered = code.to_vec();
        clobbered.splice(15..15, [0x48, 0x31, 0xc9]); // xor %rcx,%rcx
        assert_eq!(stores_after(&clobbered, 0, 0x7a71cc), vec![]);
        // Truncated code ends the walk, it does not panic.
        assert_eq!(stores_after(&code[..12], 0, 0), vec![]);
        assert_eq!(stores_after(&code, code.len(), 0), vec![]);
    }

    const VADDR: u64 = 0x40_0000;
    /// Where `code` starts in [`tiny_elf`]'s file: after the ELF header and one program header.
    const CODE_AT: usize = 64 + 56;

    /// A minimal x86-64 ELF file: one executable PT_LOAD at `VADDR` mapping the whole file
    /// (headers, then `code`), so a RIP-relative address inside the file is initialised data.
    fn tiny_elf(code: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; CODE_AT];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2; // ELFCLASS64
        f[5] = 1; // little-endian
        f[6] = 1; // EV_CURRENT
        f[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
        f[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
        f[20..24].copy_from_slice(&1u32.to_le_bytes());
        f[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        f[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
        f[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        f[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
        f[58..60].copy_from_slice(&64u16.to_le_bytes()); // e_shentsize
        let len = (CODE_AT + code.len()) as u64;
        let ph = &mut f[64..120];
        ph[..4].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
        ph[4..8].copy_from_slice(&5u32.to_le_bytes()); // R+X
        ph[16..24].copy_from_slice(&VADDR.to_le_bytes()); // p_vaddr
        ph[24..32].copy_from_slice(&VADDR.to_le_bytes()); // p_paddr
        ph[32..40].copy_from_slice(&len.to_le_bytes()); // p_filesz
        ph[40..48].copy_from_slice(&len.to_le_bytes()); // p_memsz
        f.extend_from_slice(code);
        f
    }

    /// `PopulateDacVars`' shape at `code[0..]`: the anchor, `lea max_gen(%rip),%rcx; mov
    /// %rcx,0x38(%rdi); lea offsets(%rip),%rdx; mov %rdx,0xf8(%rdi); ret`, then `max_gen` (2)
    /// and `generation_field_offsets` (0x40, 0x18, -1) as initialised data. The addresses stored.
    fn populate_dac_vars() -> (Vec<u8>, u64, u64) {
        let mut code = ANCHOR.to_vec();
        let lea_rcx = code.len();
        code.extend_from_slice(&[0x48, 0x8d, 0x0d, 0, 0, 0, 0, 0x48, 0x89, 0x4f, 0x38]);
        let lea_rdx = code.len();
        code.extend_from_slice(&[0x48, 0x8d, 0x15, 0, 0, 0, 0, 0x48, 0x89, 0x97, 0xf8, 0, 0, 0, 0xc3]);
        let max_at = code.len();
        code.extend_from_slice(&2u32.to_le_bytes());
        let offsets_at = code.len();
        for v in [0x40i32, 0x18, -1] {
            code.extend_from_slice(&v.to_le_bytes());
        }
        // Each displacement is from the end of its 7-byte lea.
        let disp = |lea: usize, to: usize| ((to - (lea + 7)) as i32).to_le_bytes();
        code[lea_rcx + 3..lea_rcx + 7].copy_from_slice(&disp(lea_rcx, max_at));
        code[lea_rdx + 3..lea_rdx + 7].copy_from_slice(&disp(lea_rdx, offsets_at));
        let vaddr = |at: usize| VADDR + (CODE_AT + at) as u64;
        (code, vaddr(max_at), vaddr(offsets_at))
    }

    #[test]
    fn a_file_with_the_shape_gives_the_values_its_data_holds() {
        let (code, max_at, offsets_at) = populate_dac_vars();
        let file = ElfFile::from_bytes("tiny", tiny_elf(&code)).expect("a valid ELF file");
        let c = from_file(&file).expect("the shape is found");
        assert_eq!((c.max_generation, c.generation_field_offsets), (2, [0x40, 0x18, -1]));
        assert_eq!((c.max_generation_at, c.generation_field_offsets_at), (vec![max_at], vec![offsets_at]));
        // More functions of that shape than a runtime has (workstation and server, twice at
        // most): not a runtime's code, nothing is said.
        let many: Vec<u8> = (0..=MAX_FUNCTIONS).flat_map(|_| code.clone()).collect();
        assert_eq!(from_file(&ElfFile::from_bytes("many", tiny_elf(&many)).expect("ELF")), None);
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Random bytes after the anchor: the decode stops within its window, never panics, and
        /// says at most one store per instruction decoded.
        #[test]
        fn garbage_code_is_decoded_within_the_window(code in proptest::collection::vec(any::<u8>(), 0..4096), start in 0usize..4200, vaddr in any::<u64>()) {
            let stores = stores_after(&code, start, vaddr);
            prop_assert!(stores.len() <= WINDOW);
        }

        /// A runtime file whose code is garbage with anchors and the real shape spliced in at
        /// random places (some cut short by the file's end): `from_file` never panics, and what it
        /// says, it read from the file's initialised data.
        #[test]
        fn garbage_around_anchors_never_panics(
            noise in proptest::collection::vec(any::<u8>(), 0..2048),
            splices in proptest::collection::vec((0usize..2048, 0u8..3, 1usize..64), 0..8),
        ) {
            let (shape, _, _) = populate_dac_vars();
            let mut code = noise;
            for (at, what, cut) in splices {
                let at = at.min(code.len());
                let piece: Vec<u8> = match what {
                    0 => ANCHOR.to_vec(),
                    1 => shape.clone(),
                    _ => shape[..cut.min(shape.len())].to_vec(),
                };
                code.splice(at..at, piece);
            }
            let file = ElfFile::from_bytes("garbage", tiny_elf(&code)).expect("ELF");
            if let Some(c) = from_file(&file) {
                prop_assert!(!c.max_generation_at.is_empty() && c.max_generation_at.len() <= MAX_FUNCTIONS);
                prop_assert!(!c.generation_field_offsets_at.is_empty() && c.generation_field_offsets_at.len() <= MAX_FUNCTIONS);
                for &at in c.max_generation_at.iter().chain(&c.generation_field_offsets_at) {
                    prop_assert!(file.offset_of_vaddr(at).is_some(), "{at:#x} is not in the file");
                }
            }
        }
    }
}
