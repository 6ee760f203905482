//! The ARM64 unwind codes from their documented encodings ("ARM64 exception handling", the
//! unwind code table and the packed-data canonical prologue), over fake stacks: each test is a
//! prologue shape the JIT or the documentation gives.

use super::*;
use crate::process::RangeMemory;
use crate::unwind::managed::UnwindFormat;

const IMAGE: u64 = 0x7000_0000;
const FUNC: u64 = IMAGE + 0x1000;
const XDATA: u64 = IMAGE + 0x8000;
/// The caller's stack pointer at its `bl`.
const S: u64 = 0x7fff_0000_1000;
const RA: u64 = 0x5555_0000_1234;

fn stack(words: &[(u64, u64)]) -> RangeMemory {
    let mut m = RangeMemory::new();
    for &(a, v) in words {
        m.add(a, v.to_le_bytes().to_vec());
    }
    m
}

fn function(len: u64, unwind_data: u32) -> WindowsUnwind {
    WindowsUnwind { image_base: IMAGE, begin: FUNC, end: FUNC + len, unwind_info: IMAGE + unwind_data as u64, format: UnwindFormat::Arm64 { unwind_data } }
}

fn regs(pairs: &[(u16, u64)]) -> FrameRegs {
    let mut r = FrameRegs::new(crate::arch::Arch::Aarch64);
    for &(reg, v) in pairs {
        r.set(reg, v);
    }
    r
}

/// An `.xdata` header word: function length (instructions), `E`, epilogue count (or index),
/// code words.
fn header(len: u32, e: bool, epilogs: u32, words: u32) -> u32 {
    len | (u32::from(e) << 21) | (epilogs << 22) | (words << 27)
}

fn xdata(words: &[u32], codes: &[u8]) -> Vec<u8> {
    let mut b: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    b.extend_from_slice(codes);
    while !b.len().is_multiple_of(4) {
        b.push(OP_NOP);
    }
    b
}

/// The JIT's usual frame: `stp x29, x30, [sp, #-32]!; mov x29, sp; stp x19, x20, [sp, #16]`,
/// body, then the mirror epilogue `ldp x19, x20, [sp, #16]; ldp x29, x30, [sp], #32; ret` at
/// the end (one epilogue in the header, sharing the prologue's codes after `set_fp`).
/// Codes (unwind order): save_regp x19 at 16 (`c8 02`), set_fp (`e1`), save_fplr_x -32 (`83`),
/// end. Frame: x29/x30 at S-32, x19/x20 at S-16.
fn jit_frame() -> (RangeMemory, WindowsUnwind) {
    let mut m = stack(&[(S - 32, 0xf00d_0000), (S - 24, RA), (S - 16, 0x1919), (S - 8, 0x2020)]);
    // 16 instructions; the epilogue's codes are the prologue's from index 0 (its first,
    // set_fp, standing for `mov sp, x29`).
    let codes = [0xc8, 0x02, OP_SET_FP, 0x83, OP_END];
    m.add(XDATA, xdata(&[header(16, true, 0, 2)], &codes));
    (m, function(64, (XDATA - IMAGE) as u32))
}

#[test]
fn function_length_comes_from_the_xdata_header_or_the_packed_word() {
    let (m, _) = jit_frame();
    assert_eq!(function_length(&m, IMAGE, (XDATA - IMAGE) as u32), Ok(64));
    // Packed: FunctionLength is bits 2..13, in instructions.
    assert_eq!(function_length(&m, IMAGE, 1 | (0x123 << 2)), Ok(0x123 * 4));
    assert_eq!(function_length(&m, IMAGE, 2 | (7 << 2)), Ok(28));
    assert!(matches!(function_length(&m, IMAGE, 0x8003), Err(Arm64UnwindError::NoLength(_))));
    assert!(matches!(function_length(&m, IMAGE, 0x9000), Err(Arm64UnwindError::Unreadable(_))));
}

#[test]
fn body_frame_restores_the_saved_pairs_and_returns_through_lr() {
    let (m, f) = jit_frame();
    // In the body sp is where the prologue left it (x29 = sp: no allocation after it).
    let callee = regs(&[(dwarf::SP, S - 32), (dwarf::FP, S - 32), (19, 1), (20, 2), (21, 0x2121), (0, 7), (dwarf::LR, 0xdead)]);
    let out = unwind(&m, &f, (XDATA - IMAGE) as u32, FUNC + 8 * 4, &callee).expect("unwinds");
    assert_eq!(out.regs.ip(), Some(RA));
    assert_eq!(out.regs.sp(), Some(S));
    assert_eq!(out.regs.get(dwarf::FP), Some(0xf00d_0000));
    assert_eq!((out.regs.get(19), out.regs.get(20)), (Some(0x1919), Some(0x2020)), "restored from the frame");
    assert_eq!(out.regs.get(21), Some(0x2121), "callee-saved and untouched: carried over");
    assert_eq!(out.regs.get(0), None, "an argument register is the callee's, not the caller's");
    assert_eq!(out.regs.get(dwarf::LR), Some(RA));
    assert!(!out.machine_frame);
}

#[test]
fn in_the_prologue_only_the_instructions_done_are_undone() {
    let (m, f) = jit_frame();
    // At the prologue's second instruction (mov x29, sp not yet run): only the stp x29, x30 is
    // done — its code is the last one, so 2 of the 3 codes are skipped.
    let callee = regs(&[(dwarf::SP, S - 32), (dwarf::FP, 0xaaaa), (19, 1), (dwarf::LR, RA)]);
    let out = unwind(&m, &f, (XDATA - IMAGE) as u32, FUNC + 4, &callee).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp(), out.regs.get(dwarf::FP), out.regs.get(19)), (Some(RA), Some(S), Some(0xf00d_0000), Some(1)));
    // At the first instruction nothing is done: the return address is still in lr.
    let callee = regs(&[(dwarf::SP, S), (dwarf::FP, 0xaaaa), (dwarf::LR, RA)]);
    let out = unwind(&m, &f, (XDATA - IMAGE) as u32, FUNC, &callee).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp(), out.regs.get(dwarf::FP)), (Some(RA), Some(S), Some(0xaaaa)));
}

#[test]
fn in_the_epilogue_only_what_is_left_is_undone() {
    let (m, f) = jit_frame();
    // The epilogue is the function's last 4 instructions (3 codes + ret): at 12..16. At its
    // third instruction (after mov sp, x29 and ldp x19, x20) only the ldp x29, x30 is left.
    let callee = regs(&[(dwarf::SP, S - 32), (dwarf::FP, S - 32), (19, 0x1919), (20, 0x2020), (dwarf::LR, 0xdead)]);
    let out = unwind(&m, &f, (XDATA - IMAGE) as u32, FUNC + 14 * 4, &callee).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp(), out.regs.get(dwarf::FP)), (Some(RA), Some(S), Some(0xf00d_0000)));
    // At the ret: everything is restored, the return address is in lr.
    let callee = regs(&[(dwarf::SP, S), (dwarf::FP, 0xf00d_0000), (dwarf::LR, RA)]);
    let out = unwind(&m, &f, (XDATA - IMAGE) as u32, FUNC + 15 * 4, &callee).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp()), (Some(RA), Some(S)));
}

#[test]
fn epilogue_scopes_are_found_by_their_start() {
    // Two epilogues listed in scope records (E clear): the first at instruction 6, whose codes
    // start at index 0; the second at 12. Codes: save_fplr_x -16 (`81`), end.
    let scope = |start: u32, index: u32| start | (index << 22);
    let mut m = stack(&[(S - 16, 0xf00d), (S - 8, RA)]);
    m.add(XDATA, xdata(&[header(16, false, 2, 1), scope(6, 0), scope(12, 0)], &[0x81, OP_END]));
    let f = function(64, (XDATA - IMAGE) as u32);
    // At the second epilogue's ret (12 + 1): all restored already, lr holds the return.
    let callee = regs(&[(dwarf::SP, S), (dwarf::LR, RA), (dwarf::FP, 0xf00d)]);
    let out = unwind(&m, &f, (XDATA - IMAGE) as u32, FUNC + 13 * 4, &callee).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp()), (Some(RA), Some(S)));
    // Between the epilogues (the body): the frame record is read from the stack.
    let callee = regs(&[(dwarf::SP, S - 16), (dwarf::LR, 0xdead), (dwarf::FP, 0)]);
    let out = unwind(&m, &f, (XDATA - IMAGE) as u32, FUNC + 9 * 4, &callee).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp(), out.regs.get(dwarf::FP)), (Some(RA), Some(S), Some(0xf00d)));
}

#[test]
fn each_documented_code_moves_sp_and_restores_its_registers() {
    // Prologue, first instruction first:
    //   stp x19, x20, [sp, #-96]!   save_r19r20_x: 001zzzzz, Z = 96/8 = 12  → 0x2c
    //   stp x21, x22, [sp, #16]     save_next                               → 0xe6
    //   str x23, [sp, #32]          save_reg: 110100xx|xxzzzzzz, X=4, Z=4   → 0xd1 0x04
    //   stp d8, d9, [sp, #48]       save_fregp: 1101100x|xxzzzzzz, X=0, Z=6 → 0xd8 0x06
    //   str d10, [sp, #64]          save_freg: 1101110x|xxzzzzzz, X=2, Z=8  → 0xdc 0x88
    //   stp x29, x30, [sp, #80]     save_fplr: 01zzzzzz, Z=10               → 0x4a
    //   add x29, sp, #80            add_fp: 11100010|xxxxxxxx, 80/8         → 0xe2 0x0a
    //   sub sp, sp, #0x2000         alloc_m: 11000xxx|xxxxxxxx, 0x200       → 0xc2 0x00
    //   sub sp, sp, #0x30           alloc_s: 000xxxxx, 3                    → 0x03
    let codes = [0x03, 0xc2, 0x00, 0xe2, 0x0a, 0x4a, 0xdc, 0x88, 0xd8, 0x06, 0xd1, 0x04, 0xe6, 0x2c, OP_END];
    let base = S - 96;
    let mut m = stack(&[(base, 0x19), (base + 8, 0x20), (base + 16, 0x21), (base + 24, 0x22), (base + 32, 0x23), (base + 48, 0xd8), (base + 56, 0xd9), (base + 64, 0xd10), (base + 80, 0xf00d), (base + 88, RA)]);
    m.add(XDATA, xdata(&[header(64, true, 0, 4)], &codes));
    let f = function(256, (XDATA - IMAGE) as u32);
    let callee = regs(&[(dwarf::SP, base - 0x2000 - 0x30), (dwarf::FP, base + 80)]);
    let out = unwind(&m, &f, (XDATA - IMAGE) as u32, FUNC + 40 * 4, &callee).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp(), out.regs.get(dwarf::FP)), (Some(RA), Some(S), Some(0xf00d)));
    assert_eq!([19, 20, 21, 22, 23].map(|r| out.regs.get(r)), [Some(0x19), Some(0x20), Some(0x21), Some(0x22), Some(0x23)]);
    // The same frame without the frame pointer: the allocations are undone by size instead.
    let no_fp = [0x03, 0xc2, 0x00, 0x4a, 0xdc, 0x88, 0xd8, 0x06, 0xd1, 0x04, 0xe6, 0x2c, OP_END];
    m.add(XDATA + 0x100, xdata(&[header(64, true, 0, 4)], &no_fp));
    let f = function(256, (XDATA + 0x100 - IMAGE) as u32);
    let callee = regs(&[(dwarf::SP, base - 0x2000 - 0x30)]);
    let out = unwind(&m, &f, (XDATA + 0x100 - IMAGE) as u32, FUNC + 40 * 4, &callee).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp(), out.regs.get(21)), (Some(RA), Some(S), Some(0x21)));
}

#[test]
fn large_allocations_save_reg_x_lrpair_and_save_any_reg() {
    //   str x19, [sp, #-16]!        save_reg_x: 1101010x|xxxzzzzz, X=0, Z=1  → 0xd4 0x01
    //   stp x21, lr, [sp, #-0]      (pre-alloc'd) save_lrpair X=1, Z=... see below
    //   sub sp, sp, #0x100000       alloc_l: 11100000|x24                    → 0xe0 0x01 0x00 0x00
    // save_lrpair: <x(19+2X), lr> at [sp+Z*8]: with X=1 (x21), Z=0 after an alloc_s of 16.
    let codes = [0xe0, 0x01, 0x00, 0x00, 0xd6, 0x40, 0x01, 0xd4, 0x01, OP_END];
    let base = S - 16;
    let mut m = stack(&[(base, 0x1919), (base - 16, 0x2121), (base - 8, RA)]);
    m.add(XDATA, xdata(&[header(64, true, 0, 3)], &codes));
    let f = function(256, (XDATA - IMAGE) as u32);
    let callee = regs(&[(dwarf::SP, base - 16 - 0x100000)]);
    let out = unwind(&m, &f, (XDATA - IMAGE) as u32, FUNC + 50 * 4, &callee).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp(), out.regs.get(19), out.regs.get(21)), (Some(RA), Some(S), Some(0x1919), Some(0x2121)));

    // save_any_reg 11100111 0pxrrrrr ffoooooo: a pair (p) of X registers from x25 with
    // write-back (x): [sp, #-32]! (offset (o+x)*16 = 32 with o = 1); then sub sp, sp, #16
    // (alloc_s 1) and the frame record at [sp] (save_fplr 0).
    let codes = [0x40, 0x01, 0xe7, 0x79, 0x01, OP_END];
    let base = S - 32;
    let mut m = stack(&[(base, 0x2525), (base + 8, 0x2626), (base - 16, 0xf00d), (base - 8, RA)]);
    m.add(XDATA, xdata(&[header(64, true, 0, 2)], &codes));
    let callee = regs(&[(dwarf::SP, base - 16)]);
    let out = unwind(&m, &function(256, (XDATA - IMAGE) as u32), (XDATA - IMAGE) as u32, FUNC + 50 * 4, &callee).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp(), out.regs.get(25), out.regs.get(26), out.regs.get(dwarf::FP)), (Some(RA), Some(S), Some(0x2525), Some(0x2626), Some(0xf00d)));
}

#[test]
fn the_documented_packed_example_expands_to_its_listed_codes() {
    // The unwinder's own worked example of packed data: Flag = 1, RegF = 7, RegI = 10, H = 1,
    // CR = 2 (chained, with pac), FrameSize = 8000/16. Its full prologue and epilogue codes:
    let prologue = [0xe1, 0x40, 0xc1, 0xe7, 0xe3, 0xe3, 0xe3, 0xe3, 0xd9, 0x90, 0xd9, 0x0e, 0xd8, 0x8c, 0xd8, 0x0a, 0xca, 0x08, 0xc9, 0x86, 0xc9, 0x04, 0xc8, 0x82, 0xcc, 0x19, 0xfc, 0xe4];
    let epilogue = [0xe1, 0x40, 0xc1, 0xe7, 0xd9, 0x90, 0xd9, 0x0e, 0xd8, 0x8c, 0xd8, 0x0a, 0xca, 0x08, 0xc9, 0x86, 0xc9, 0x04, 0xc8, 0x82, 0xcc, 0x19, 0xfc, 0xe4];
    let word = 1 | (100 << 2) | (7 << 13) | (10 << 16) | (1 << 20) | (2 << 21) | ((8000 / 16) << 23);
    let x = Xdata::expand_packed(word);
    assert_eq!(x.codes, [&prologue[..], &epilogue[..]].concat());
    assert!(x.epilog_in_header);
    // The epilogue's codes start after the prologue's, skipping its set_fp.
    assert_eq!(x.epilog_index, prologue.len() as u32 + 1);
    assert_eq!(x.function_length, 100);
}

#[test]
fn a_packed_frame_chained_function_unwinds_like_its_xdata() {
    // Flag 1, RegI = 2 (x19, x20), CR = 3 (chained: stp x29, lr), FrameSize = 48/16:
    //   stp x19, x20, [sp, #-16]!; stp x29, lr, [sp, #-32]!; mov x29, sp
    // (the save area is 16 bytes, the locals with the frame record 32).
    let word = 1 | (40 << 2) | (2 << 16) | (3 << 21) | (3 << 23);
    let x = Xdata::expand_packed(word);
    assert_eq!(x.codes, [OP_SET_FP, 0x83, 0xcc, 0x01, OP_END]);
    assert_eq!((x.epilog_in_header, x.epilog_index), (true, 1));
    let base = S - 48;
    let m = stack(&[(base, 0xf00d), (base + 8, RA), (base + 32, 0x1919), (base + 40, 0x2020)]);
    let f = WindowsUnwind { image_base: IMAGE, begin: FUNC, end: FUNC + 160, unwind_info: IMAGE + word as u64, format: UnwindFormat::Arm64 { unwind_data: word } };
    let callee = regs(&[(dwarf::SP, base - 64), (dwarf::FP, base)]);
    let out = unwind(&m, &f, word, FUNC + 20 * 4, &callee).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp(), out.regs.get(dwarf::FP), out.regs.get(19), out.regs.get(20)), (Some(RA), Some(S), Some(0xf00d), Some(0x1919), Some(0x2020)));
    // The packed fragment (Flag 2) of the same shape has no prologue of its own: every code
    // runs even at its first instruction.
    let frag = (word & !3) | 2;
    let x = Xdata::expand_packed(frag);
    assert_eq!(x.codes.first(), Some(&OP_END_C));
    let out = unwind(&m, &f, frag, FUNC, &callee).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp()), (Some(RA), Some(S)));
}

#[test]
fn a_machine_frame_gives_the_exact_pc() {
    // MSFT_OP_MACHINE_FRAME: sp and pc saved at sp.
    let mut m = stack(&[(S - 16, S + 0x100), (S - 8, 0x4444)]);
    m.add(XDATA, xdata(&[header(8, true, 0, 1)], &[0xe9, OP_END]));
    let callee = regs(&[(dwarf::SP, S - 16)]);
    let out = unwind(&m, &function(32, (XDATA - IMAGE) as u32), (XDATA - IMAGE) as u32, FUNC + 16, &callee).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp(), out.machine_frame), (Some(0x4444), Some(S + 0x100), true));
}

#[test]
fn bad_data_is_an_error_not_a_panic() {
    let xd = (XDATA - IMAGE) as u32;
    let callee = regs(&[(dwarf::SP, S - 32), (dwarf::FP, S - 32), (dwarf::LR, RA)]);
    // Another version.
    let mut m = RangeMemory::new();
    m.add(XDATA, xdata(&[header(16, true, 0, 1) | (1 << 18)], &[OP_END]));
    assert!(matches!(unwind(&m, &function(64, xd), xd, FUNC + 32, &callee), Err(Arm64UnwindError::Version { .. })));
    // A reserved code, a save_next before a single save, an SVE allocation, codes that run
    // past their words, a stack that is not in the dump.
    for codes in [&[0xf0u8, OP_END][..], &[0xe6, 0xd0, 0x00, OP_END], &[0xdf, 0x01, OP_END], &[0xc8]] {
        let mut m = RangeMemory::new();
        m.add(XDATA, xdata(&[header(16, true, 0, 1)], codes));
        assert!(unwind(&m, &function(64, xd), xd, FUNC + 32, &callee).is_err(), "{codes:02x?}");
    }
    let mut m = RangeMemory::new();
    m.add(XDATA, xdata(&[header(16, true, 0, 1)], &[0x83, OP_END]));
    assert!(matches!(unwind(&m, &function(64, xd), xd, FUNC + 32, &callee), Err(Arm64UnwindError::Unreadable(_))));
    // The extended header's counts: up to 65535 scopes are read only as far as the dump has.
    let mut m = RangeMemory::new();
    m.add(XDATA, xdata(&[header(16, false, 0, 0), 0xffff | (255 << 16)], &[]));
    assert!(matches!(unwind(&m, &function(64, xd), xd, FUNC + 32, &callee), Err(Arm64UnwindError::Unreadable(_))));
    // An address outside the function; a chained entry whose parent is chained again.
    assert!(matches!(unwind(&m, &function(64, xd), xd, FUNC + 65, &callee), Err(Arm64UnwindError::Outside { .. })));
    let mut m = RangeMemory::new();
    m.add(IMAGE + 0x100, [0x1000u32.to_le_bytes(), 0x203u32.to_le_bytes()].concat());
    assert!(matches!(unwind(&m, &function(64, xd), 0x103, FUNC + 4, &callee), Err(Arm64UnwindError::Chain(_))));
    // Every packed word expands without a panic.
    for word in (0..=u32::MAX).step_by(65_521) {
        let _ = Xdata::expand_packed(word);
    }
}
