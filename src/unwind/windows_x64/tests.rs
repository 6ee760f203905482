//! Hand-assembled `UNWIND_INFO`s over a fake stack: each test is one prologue shape.

use super::*;
use crate::process::RangeMemory;

const IMAGE: u64 = 0x7000_0000;
const FUNC: u64 = IMAGE + 0x1000;
const INFO: u64 = IMAGE + 0x8000;
/// The caller's stack pointer before its `call`.
const S: u64 = 0x7fff_0000_1000;
const RA: u64 = 0x5555_0000_1234;

const RBX: u8 = 3;
const RBP: u8 = 5;
const RSI: u8 = 6;
const R12: u8 = 12;

fn code(offset: u8, op: u8, info: u8) -> [u8; 2] {
    [offset, op | (info << 4)]
}

fn operand(v: u16) -> [u8; 2] {
    v.to_le_bytes()
}

/// `UNWIND_INFO` bytes: header, codes, padding, and the chained entry when given.
fn info_bytes(version: u8, flags: u8, prolog: u8, frame_reg: u8, frame_off: u8, slots: &[[u8; 2]], chain: Option<(u32, u32, u32)>) -> Vec<u8> {
    let mut b = vec![version | (flags << 3), prolog, slots.len() as u8, frame_reg | (frame_off << 4)];
    for s in slots {
        b.extend_from_slice(s);
    }
    if slots.len() % 2 == 1 {
        b.extend_from_slice(&[0, 0]);
    }
    if let Some((x, y, z)) = chain {
        for v in [x, y, z] {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    b
}

/// A stack of 64-bit slots: (address, value).
fn stack(words: &[(u64, u64)]) -> RangeMemory {
    let mut m = RangeMemory::new();
    for &(a, v) in words {
        m.add(a, v.to_le_bytes().to_vec());
    }
    m
}

fn function(len: u64) -> WindowsUnwind {
    WindowsUnwind { image_base: IMAGE, begin: FUNC, end: FUNC + len, unwind_info: INFO, format: crate::unwind::managed::UnwindFormat::X64 }
}

fn regs(pairs: &[(u16, u64)]) -> FrameRegs {
    let mut r = FrameRegs::default();
    for &(reg, v) in pairs {
        r.set(reg, v);
    }
    r
}

/// `push rbp; push rbx; sub rsp, 0x28; lea rbp, [rsp+0x30]` (prologue 11 bytes): the JIT's usual
/// frame, with rbp = S-16 and the locals below.
fn jit_frame() -> (RangeMemory, WindowsUnwind) {
    let mut m = stack(&[(S - 8, RA), (S - 16, 0xb0b0), (S - 24, 0xbbbb)]);
    let slots = [code(11, UWOP_SET_FPREG, 0), code(6, UWOP_ALLOC_SMALL, 4), code(2, UWOP_PUSH_NONVOL, RBX), code(1, UWOP_PUSH_NONVOL, RBP)];
    m.add(INFO, info_bytes(1, 0, 11, RBP, 3, &slots, None));
    // The body: a call (e8 ..) followed by more body, no epilogue at the return address.
    m.add(FUNC, vec![0x55, 0x53, 0x48, 0x83, 0xec, 0x28, 0x48, 0x8d, 0x6c, 0x24, 0x30, 0xe8, 0, 0, 0, 0, 0x90, 0x90]);
    (m, function(0x40))
}

#[test]
fn body_frame_unwinds_through_the_frame_register_and_pops() {
    let (m, f) = jit_frame();
    // rsp far below the fixed frame (a dynamic allocation): only rbp can find the frame.
    let callee = regs(&[(dwarf::RSP, S - 64 - 0x200), (dwarf::RBP, S - 16), (dwarf::RBX, 1), (dwarf::R12, 0x1212), (dwarf::RAX, 7)]);
    let out = unwind(&m, &f, FUNC + 16, false, &callee).expect("unwinds");
    assert_eq!(out.regs.ip(), Some(RA));
    assert_eq!(out.regs.sp(), Some(S));
    assert_eq!(out.regs.bp(), Some(0xb0b0));
    assert_eq!(out.regs.get(dwarf::RBX), Some(0xbbbb));
    assert_eq!(out.regs.get(dwarf::R12), Some(0x1212), "callee-saved and untouched: carried over");
    assert_eq!(out.regs.get(dwarf::RAX), None, "volatile: unknown in the caller");
    assert!(!out.machine_frame);
}

#[test]
fn partly_executed_prologue_applies_only_the_codes_already_run() {
    let (m, f) = jit_frame();
    // Stopped after `push rbp` (offset 1), before `push rbx`: rsp = S-16.
    let callee = regs(&[(dwarf::RSP, S - 16), (dwarf::RBP, 0xb0b0), (dwarf::RBX, 0x42)]);
    let out = unwind(&m, &f, FUNC + 1, true, &callee).expect("unwinds");
    assert_eq!(out.regs.ip(), Some(RA));
    assert_eq!(out.regs.sp(), Some(S));
    assert_eq!(out.regs.bp(), Some(0xb0b0));
    assert_eq!(out.regs.get(dwarf::RBX), Some(0x42), "rbx not pushed yet: still the callee's");
    // At the first byte nothing has run: the return address is at rsp.
    let out = unwind(&m, &f, FUNC, true, &regs(&[(dwarf::RSP, S - 8)])).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp()), (Some(RA), Some(S)));
}

#[test]
fn v1_epilogue_is_emulated_from_the_instructions() {
    let (mut m, f) = jit_frame();
    // lea rsp, [rbp-8]; pop rbx; pop rbp; ret — stopped at the lea.
    let at = FUNC + 0x30;
    m.add(at, vec![0x48, 0x8d, 0x65, 0xf8, 0x5b, 0x5d, 0xc3]);
    let callee = regs(&[(dwarf::RSP, S - 64), (dwarf::RBP, S - 16)]);
    let out = unwind(&m, &f, at, true, &callee).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp(), out.regs.bp(), out.regs.get(dwarf::RBX)), (Some(RA), Some(S), Some(0xb0b0), Some(0xbbbb)));
    // Stopped at the `pop rbp`: only rbp and the return remain.
    let out = unwind(&m, &f, at + 5, true, &regs(&[(dwarf::RSP, S - 16), (dwarf::RBX, 9)])).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp(), out.regs.get(dwarf::RBX)), (Some(RA), Some(S), Some(9)));
    // The same bytes as a return address are never an epilogue: the prologue rule applies.
    let out = unwind(&m, &f, at + 5, false, &regs(&[(dwarf::RSP, S - 64), (dwarf::RBP, S - 16)])).expect("unwinds");
    assert_eq!(out.regs.sp(), Some(S));
}

#[test]
fn large_allocations_and_saves_use_the_fixed_frame_base() {
    // sub rsp, 0x10000 (ALLOC_LARGE, 32-bit form); mov [rsp+0x18], rsi (SAVE_NONVOL);
    // mov [rsp+0x12340], r12 (SAVE_NONVOL_FAR).
    let sp = S - 8 - 0x10000;
    let m0 = stack(&[(S - 8, RA), (sp + 0x18, 0x5151), (sp + 0x12340, 0xc12)]);
    let mut m = m0.clone();
    let far = 0x12340u32;
    let slots = [
        code(20, UWOP_SAVE_NONVOL_FAR, R12),
        operand(far as u16),
        operand((far >> 16) as u16),
        code(12, UWOP_SAVE_NONVOL, RSI),
        operand(0x18 / 8),
        code(7, UWOP_ALLOC_LARGE, 1),
        operand(0),
        operand(1),
    ];
    m.add(INFO, info_bytes(1, 0, 20, 0, 0, &slots, None));
    m.add(FUNC + 0x40, vec![0x90; 8]);
    let out = unwind(&m, &function(0x80), FUNC + 0x40, true, &regs(&[(dwarf::RSP, sp)])).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp()), (Some(RA), Some(S)));
    assert_eq!(out.regs.get(dwarf::RSI), Some(0x5151), "restored from the stack, so known though volatile");
    assert_eq!(out.regs.get(dwarf::R12), Some(0xc12));

    // The 16-bit ALLOC_LARGE form is scaled by 8: sub rsp, 0x800.
    let mut m = stack(&[(S - 8, RA)]);
    m.add(INFO, info_bytes(1, 0, 7, 0, 0, &[code(7, UWOP_ALLOC_LARGE, 0), operand(0x100)], None));
    let out = unwind(&m, &function(0x80), FUNC + 0x40, false, &regs(&[(dwarf::RSP, S - 8 - 0x800)])).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp()), (Some(RA), Some(S)));
}

#[test]
fn chained_fragment_undoes_the_primary_prologue() {
    // A cold fragment with no codes of its own, chained to the primary `push rbp; push rbx`.
    let primary_info = INFO + 0x100;
    let mut m = stack(&[(S - 8, RA), (S - 16, 0xb0b0), (S - 24, 0xbbbb)]);
    m.add(primary_info, info_bytes(1, 0, 2, 0, 0, &[code(2, UWOP_PUSH_NONVOL, RBX), code(1, UWOP_PUSH_NONVOL, RBP)], None));
    m.add(INFO, info_bytes(1, UNW_FLAG_CHAININFO, 0, 0, 0, &[], Some((0x1000, 0x1040, 0x8100))));
    let cold = WindowsUnwind { image_base: IMAGE, begin: IMAGE + 0x5000, end: IMAGE + 0x5020, unwind_info: INFO, format: crate::unwind::managed::UnwindFormat::X64 };
    let out = unwind(&m, &cold, IMAGE + 0x5010, false, &regs(&[(dwarf::RSP, S - 24)])).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp(), out.regs.bp(), out.regs.get(dwarf::RBX)), (Some(RA), Some(S), Some(0xb0b0), Some(0xbbbb)));
}

#[test]
fn machine_frame_gives_the_interrupted_ip_and_stack() {
    // [rsp] = error code, then rip, cs, rflags, rsp, ss.
    let sp = S - 0x100;
    let m0 = stack(&[(sp, 0xee), (sp + 8, 0x4242), (sp + 16, 0x33), (sp + 24, 0x246), (sp + 32, 0x9990), (sp + 40, 0x2b)]);
    let mut m = m0;
    m.add(INFO, info_bytes(1, 0, 0, 0, 0, &[code(0, UWOP_PUSH_MACHFRAME, 1)], None));
    let out = unwind(&m, &function(0x10), FUNC + 4, false, &regs(&[(dwarf::RSP, sp)])).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp(), out.machine_frame), (Some(0x4242), Some(0x9990), true));
}

#[test]
fn v2_epilogue_codes_place_the_ip_and_undo_the_remaining_pushes() {
    // Prologue push rbp; push rbx (2 bytes); one epilogue at the very end: pop rbx; pop rbp;
    // ret (3 bytes, flag bit 0 = "at the end").
    let mut m = stack(&[(S - 8, RA), (S - 16, 0xb0b0), (S - 24, 0xbbbb)]);
    let slots = [code(3, UWOP_EPILOG, 1), code(0, UWOP_EPILOG, 0), code(2, UWOP_PUSH_NONVOL, RBX), code(1, UWOP_PUSH_NONVOL, RBP)];
    m.add(INFO, info_bytes(2, 0, 2, 0, 0, &slots, None));
    let f = function(0x20);
    // At the `pop rbp` (offset 1 into the epilogue): rbx is already popped.
    let out = unwind(&m, &f, f.end - 2, true, &regs(&[(dwarf::RSP, S - 16), (dwarf::RBX, 0x77)])).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp(), out.regs.bp(), out.regs.get(dwarf::RBX)), (Some(RA), Some(S), Some(0xb0b0), Some(0x77)));
    // In the body the same codes are a prologue.
    let out = unwind(&m, &f, FUNC + 8, true, &regs(&[(dwarf::RSP, S - 24)])).expect("unwinds");
    assert_eq!((out.regs.ip(), out.regs.sp(), out.regs.get(dwarf::RBX)), (Some(RA), Some(S), Some(0xbbbb)));
}

#[test]
fn hostile_unwind_data_is_an_error_not_a_panic() {
    let base = stack(&[(S - 8, RA)]);
    let f = function(0x20);
    let sp = regs(&[(dwarf::RSP, S - 8)]);
    let with = |bytes: Vec<u8>| {
        let mut m = base.clone();
        m.add(INFO, bytes);
        unwind(&m, &f, FUNC + 8, false, &sp)
    };
    // ALLOC_LARGE needs 2 slots, the count says 1.
    assert_eq!(with(vec![1, 0, 1, 0, 0, UWOP_ALLOC_LARGE, 0, 0]), Err(WinUnwindError::Truncated { at: INFO }));
    // Op 12 does not exist.
    assert_eq!(with(info_bytes(1, 0, 0, 0, 0, &[code(0, 12, 0)], None)), Err(WinUnwindError::BadOp { at: INFO, op: 12 }));
    assert_eq!(with(info_bytes(3, 0, 0, 0, 0, &[], None)), Err(WinUnwindError::Version { at: INFO, version: 3 }));
    // 200 codes promised, 2 bytes present.
    assert_eq!(with(vec![1, 0, 200, 0, 0, 0]), Err(WinUnwindError::Unreadable(INFO + 4)));
    // A chain to itself.
    assert_eq!(with(info_bytes(1, UNW_FLAG_CHAININFO, 0, 0, 0, &[], Some((0x1000, 0x1020, 0x8000)))), Err(WinUnwindError::Chain { at: INFO }));
    // A frame register that is not known.
    assert_eq!(with(info_bytes(1, 0, 4, RBP, 1, &[code(4, UWOP_SET_FPREG, 0)], None)), Err(WinUnwindError::MissingRegister("rbp")));
    // An address outside the fragment.
    assert!(matches!(unwind(&base, &f, FUNC + 0x100, false, &sp), Err(WinUnwindError::Outside { .. })));
}

#[test]
fn a_long_chain_stops_at_the_limit() {
    // Entry k chains to entry k+1, each at its own address: a chain longer than 32.
    let mut m = stack(&[(S - 8, RA)]);
    for k in 0..40u32 {
        m.add(INFO + k as u64 * 0x20, info_bytes(1, UNW_FLAG_CHAININFO, 0, 0, 0, &[], Some((0x1000, 0x1020, 0x8000 + (k + 1) * 0x20))));
    }
    assert_eq!(unwind(&m, &function(0x20), FUNC + 8, false, &regs(&[(dwarf::RSP, S - 8)])).map(|_| ()).unwrap_err(), WinUnwindError::Chain { at: INFO + 32 * 0x20 });
}

#[test]
fn random_unwind_data_never_panics() {
    // A small xorshift: every byte pattern of header and codes, bounded, deterministic.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..5000 {
        let mut m = stack(&[(S - 8, RA)]);
        let bytes: Vec<u8> = (0..64).map(|_| next() as u8).collect();
        m.add(INFO, bytes);
        let code: Vec<u8> = (0..32).map(|_| next() as u8).collect();
        m.add(FUNC, code);
        let ip = FUNC + next() % 0x20;
        let r = regs(&[(dwarf::RSP, S - 8 - (next() % 4) * 8), (dwarf::RBP, next())]);
        let _ = unwind(&m, &function(0x20), ip, next() & 1 == 0, &r);
    }
}
