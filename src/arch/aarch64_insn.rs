//! The aarch64 instruction at a crashing pc, decoded from the Arm Architecture Reference Manual's
//! encodings (A64 "Loads and Stores", C4.1.88 onward; no aarch64 disassembler is vendored): the
//! load/store classes — single register with an unsigned, unscaled, pre- or post-indexed
//! immediate or a register offset, pairs, literals, exclusives and atomics — with their access and
//! the registers that form the address; the branch and exception classes by name. Text follows
//! GNU objdump's syntax, as gdb prints it (`ldr w0, [x0, #44]`).

/// One decoded instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decoded {
    pub(crate) text: String,
    /// `Some(true)` a store (or read-modify-write), `Some(false)` a load, `None` no data access.
    pub(crate) writes: Option<bool>,
    pub(crate) address: Option<AddressForm>,
}

/// How a load/store forms its address: `base` (an X register or sp) plus `index` (a register,
/// extended and shifted) plus `offset`, or a pc-relative literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AddressForm {
    /// DWARF number of the base register (31 = sp); `None` for a literal (pc-relative).
    pub(crate) base: Option<u16>,
    /// The index register (31 = xzr), its extend (`uxtw`, `sxtw`, `lsl`/`uxtx`, `sxtx`) and shift.
    pub(crate) index: Option<(u16, Extend, u8)>,
    /// Added to the base, or to the pc for a literal; 0 for a post-indexed access (the base is
    /// the address, the offset applies afterwards).
    pub(crate) offset: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extend {
    Uxtw,
    Lsl,
    Sxtw,
    Sxtx,
}

impl Extend {
    /// The index register's value as the access extends it.
    pub(crate) fn apply(self, v: u64) -> u64 {
        match self {
            Extend::Uxtw => v & 0xffff_ffff,
            Extend::Sxtw => v as u32 as i32 as i64 as u64,
            Extend::Lsl | Extend::Sxtx => v,
        }
    }
}

fn bits(insn: u32, hi: u32, lo: u32) -> u32 {
    (insn >> lo) & ((1 << (hi - lo + 1)) - 1)
}

fn sign_extend(v: u32, width: u32) -> i64 {
    let shift = 64 - width;
    ((u64::from(v) << shift) as i64) >> shift
}

/// A general register's name: `x5`/`w5`, 31 as the zero register (`xzr`/`wzr`) or, for a base,
/// `sp`.
fn gpr(n: u32, wide: bool, is_base: bool) -> String {
    match (n, wide, is_base) {
        (31, _, true) => "sp".into(),
        (31, true, false) => "xzr".into(),
        (31, false, false) => "wzr".into(),
        (n, true, _) => format!("x{n}"),
        (n, false, _) => format!("w{n}"),
    }
}

/// A SIMD&FP register of `bytes` bytes (`b`, `h`, `s`, `d`, `q`).
fn fpr(n: u32, bytes: u32) -> String {
    let p = match bytes {
        1 => 'b',
        2 => 'h',
        4 => 's',
        8 => 'd',
        _ => 'q',
    };
    format!("{p}{n}")
}

fn imm(v: i64) -> String {
    format!("#{v}")
}

/// Decodes one instruction word.
pub(crate) fn decode(insn: u32) -> Decoded {
    load_store(insn).or_else(|| branch_or_exception(insn)).unwrap_or_else(|| Decoded { text: format!(".inst\t0x{insn:08x}"), writes: None, address: None })
}

/// Single register loads and stores: mnemonic, register name, access size and whether it writes.
fn single(size: u32, v: bool, opc: u32, t: u32, unscaled: bool) -> Option<(String, String, u32, Option<bool>)> {
    let u = if unscaled { "ur" } else { "r" };
    if v {
        let bytes = if opc >= 2 { 16 } else { 1 << size };
        let store = opc & 1 == 0;
        let m = if store { format!("st{u}") } else { format!("ld{u}") };
        return Some((m, fpr(t, bytes), bytes, Some(store)));
    }
    let (m, wide, store) = match (size, opc) {
        (0, 0) => ("b", false, Some(true)),
        (0, 1) => ("b", false, Some(false)),
        (0, 2) => ("sb", true, Some(false)),
        (0, 3) => ("sb", false, Some(false)),
        (1, 0) => ("h", false, Some(true)),
        (1, 1) => ("h", false, Some(false)),
        (1, 2) => ("sh", true, Some(false)),
        (1, 3) => ("sh", false, Some(false)),
        (2, 0) => ("", false, Some(true)),
        (2, 1) => ("", false, Some(false)),
        (2, 2) => ("sw", true, Some(false)),
        (3, 0) => ("", true, Some(true)),
        (3, 1) => ("", true, Some(false)),
        // PRFM / PRFUM: a hint, no access that faults.
        (3, 2) => return Some((format!("prf{}m", if unscaled { "u" } else { "" }), format!("#{t}"), 8, None)),
        _ => return None,
    };
    let base = match store {
        Some(true) => format!("st{u}"),
        _ => format!("ld{u}"),
    };
    Some((format!("{base}{m}"), gpr(t, wide, false), 1 << size, store))
}

fn load_store(insn: u32) -> Option<Decoded> {
    let op0 = bits(insn, 28, 25);
    if op0 & 0b0101 != 0b0100 {
        return None;
    }
    let (size, v, opc) = (bits(insn, 31, 30), bits(insn, 26, 26) == 1, bits(insn, 23, 22));
    let (rn, rt) = (bits(insn, 9, 5), bits(insn, 4, 0));
    let base = |off: i64| Some(AddressForm { base: Some(rn as u16), index: None, offset: off });
    let bracket = |inner: String| format!("[{}{}]", gpr(rn, true, true), inner);

    // Load/store register, unsigned immediate: size 111 V 01 opc imm12 Rn Rt.
    if bits(insn, 29, 27) == 0b111 && bits(insn, 25, 24) == 0b01 {
        let (m, r, bytes, store) = single(size, v, opc, rt, false)?;
        let off = i64::from(bits(insn, 21, 10)) * i64::from(bytes);
        let operand = if off == 0 { bracket(String::new()) } else { bracket(format!(", {}", imm(off))) };
        return Some(Decoded { text: format!("{m}\t{r}, {operand}"), writes: store, address: base(off) });
    }
    // Load/store register: unscaled, post-index, unprivileged, pre-index, register offset, atomics.
    if bits(insn, 29, 27) == 0b111 && bits(insn, 25, 24) == 0b00 {
        let kind = bits(insn, 11, 10);
        if bits(insn, 21, 21) == 0 {
            let simm = sign_extend(bits(insn, 20, 12), 9);
            let (m, r, _, store) = single(size, v, opc, rt, kind == 0)?;
            let m = if kind == 2 { m.replacen("r", "tr", 1) } else { m };
            return Some(match kind {
                // Post-index: the base is the address; it moves by simm after the access.
                1 => Decoded { text: format!("{m}\t{r}, {}, {}", bracket(String::new()), imm(simm)), writes: store, address: base(0) },
                3 => Decoded { text: format!("{m}\t{r}, {}!", bracket(format!(", {}", imm(simm)))), writes: store, address: base(simm) },
                _ => {
                    let operand = if simm == 0 { bracket(String::new()) } else { bracket(format!(", {}", imm(simm))) };
                    Decoded { text: format!("{m}\t{r}, {operand}"), writes: store, address: base(simm) }
                }
            });
        }
        if kind == 0b10 {
            let (m, r, bytes, store) = single(size, v, opc, rt, false)?;
            let (rm, option, s) = (bits(insn, 20, 16), bits(insn, 15, 13), bits(insn, 12, 12));
            let extend = match option {
                0b010 => Extend::Uxtw,
                0b011 => Extend::Lsl,
                0b110 => Extend::Sxtw,
                0b111 => Extend::Sxtx,
                _ => return None,
            };
            let shift = if s == 1 { bytes.trailing_zeros() as u8 } else { 0 };
            let index_name = gpr(rm, matches!(extend, Extend::Lsl | Extend::Sxtx), false);
            let suffix = match (extend, s) {
                (Extend::Lsl, 0) => String::new(),
                (Extend::Lsl, _) => format!(", lsl #{shift}"),
                (e, 0) => format!(", {}", extend_name(e)),
                (e, _) => format!(", {} #{shift}", extend_name(e)),
            };
            let text = format!("{m}\t{r}, {}", bracket(format!(", {index_name}{suffix}")));
            return Some(Decoded { text, writes: store, address: Some(AddressForm { base: Some(rn as u16), index: Some((rm as u16, extend, shift)), offset: 0 }) });
        }
        if kind == 0b00 && !v {
            // Atomic memory operations (LDADD, SWP, …): read-modify-write at [Xn].
            let rs = bits(insn, 20, 16);
            let text = format!("atomic\t{}, {}, {}", gpr(rs, size == 3, false), gpr(rt, size == 3, false), bracket(String::new()));
            return Some(Decoded { text, writes: Some(true), address: base(0) });
        }
        return None;
    }
    // Load/store pair: opc 101 V type L imm7 Rt2 Rn Rt.
    if bits(insn, 29, 27) == 0b101 {
        let l = bits(insn, 22, 22) == 1;
        let mode = bits(insn, 24, 23);
        let (bytes, wide) = match (v, size) {
            (false, 0) => (4, false),
            (false, 1) if l => (4, true), // LDPSW
            (false, 2) => (8, true),
            (true, 0) => (4, false),
            (true, 1) => (8, false),
            (true, 2) => (16, false),
            _ => return None,
        };
        let rt2 = bits(insn, 14, 10);
        let off = sign_extend(bits(insn, 21, 15), 7) * bytes;
        let m = match (l, v, size, mode) {
            (true, false, 1, _) => "ldpsw",
            (true, _, _, 0) => "ldnp",
            (false, _, _, 0) => "stnp",
            (true, _, _, _) => "ldp",
            (false, _, _, _) => "stp",
        };
        let reg = |n: u32| if v { fpr(n, bytes as u32) } else { gpr(n, wide, false) };
        let (operand, address) = match mode {
            1 => (format!("{}, {}", bracket(String::new()), imm(off)), base(0)),
            3 => (format!("{}!", bracket(format!(", {}", imm(off)))), base(off)),
            _ if off == 0 => (bracket(String::new()), base(0)),
            _ => (bracket(format!(", {}", imm(off))), base(off)),
        };
        return Some(Decoded { text: format!("{m}\t{}, {}, {operand}", reg(rt), reg(rt2)), writes: Some(!l), address });
    }
    // Load register (literal): opc 011 V 00 imm19 Rt.
    if bits(insn, 29, 27) == 0b011 && bits(insn, 25, 24) == 0b00 {
        let off = sign_extend(bits(insn, 23, 5), 19) * 4;
        let r = match (v, size) {
            (false, 0) => gpr(rt, false, false),
            (false, 1) => gpr(rt, true, false),
            (false, 2) => return Some(Decoded { text: format!("ldrsw\t{}, {}", gpr(rt, true, false), pc_relative(off)), writes: Some(false), address: literal(off) }),
            (true, s) => fpr(rt, 4 << s),
            _ => return Some(Decoded { text: format!("prfm\t#{rt}, {}", pc_relative(off)), writes: None, address: None }),
        };
        return Some(Decoded { text: format!("ldr\t{r}, {}", pc_relative(off)), writes: Some(false), address: literal(off) });
    }
    // Load/store exclusive and ordered (LDXR, STXR, LDAR, STLR, CAS…): size 001000 o2 L o1 Rs o0 Rt2 Rn Rt.
    if bits(insn, 29, 24) == 0b001000 {
        let l = bits(insn, 22, 22) == 1;
        let wide = size == 3;
        let m = if l { "ldxr" } else { "stxr" };
        return Some(Decoded { text: format!("{m}\t{}, {}", gpr(rt, wide, false), bracket(String::new())), writes: Some(!l), address: base(0) });
    }
    None
}

fn extend_name(e: Extend) -> &'static str {
    match e {
        Extend::Uxtw => "uxtw",
        Extend::Lsl => "lsl",
        Extend::Sxtw => "sxtw",
        Extend::Sxtx => "sxtx",
    }
}

fn literal(off: i64) -> Option<AddressForm> {
    Some(AddressForm { base: None, index: None, offset: off })
}

fn pc_relative(off: i64) -> String {
    format!(".{}{off}", if off >= 0 { "+" } else { "" })
}

/// Branches and exception generation, by name (their targets are in registers or the pc).
fn branch_or_exception(insn: u32) -> Option<Decoded> {
    let none = |text: String| Some(Decoded { text, writes: None, address: None });
    if insn & 0xffe0_001f == 0xd400_0001 {
        return none(format!("svc\t#0x{:x}", bits(insn, 20, 5)));
    }
    if insn & 0xffe0_001f == 0xd420_0000 {
        return none(format!("brk\t#0x{:x}", bits(insn, 20, 5)));
    }
    if insn & 0xffff_0000 == 0 {
        return none(format!("udf\t#{}", bits(insn, 15, 0)));
    }
    match insn & 0xffff_fc1f {
        0xd61f_0000 => return none(format!("br\t{}", gpr(bits(insn, 9, 5), true, false))),
        0xd63f_0000 => return none(format!("blr\t{}", gpr(bits(insn, 9, 5), true, false))),
        0xd65f_0000 => return none(if bits(insn, 9, 5) == 30 { "ret".into() } else { format!("ret\t{}", gpr(bits(insn, 9, 5), true, false)) }),
        _ => {}
    }
    if insn & 0x7c00_0000 == 0x1400_0000 {
        let off = sign_extend(bits(insn, 25, 0), 26) * 4;
        return none(format!("{}\t{}", if insn >> 31 == 1 { "bl" } else { "b" }, pc_relative(off)));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_and_stores_name_their_registers_access_and_address_as_objdump_does() {
        // ldr w0, [x0, #44]: crash_null's read through NULL.
        let d = decode(0xb9402c00);
        assert_eq!(d.text, "ldr\tw0, [x0, #44]");
        assert_eq!((d.writes, d.address), (Some(false), Some(AddressForm { base: Some(0), index: None, offset: 44 })));
        // str x1, [sp, #8]
        assert_eq!(decode(0xf90007e1).text, "str\tx1, [sp, #8]");
        assert_eq!(decode(0xf90007e1).writes, Some(true));
        // stp x29, x30, [sp, #-48]!
        let d = decode(0xa9bd7bfd);
        assert_eq!(d.text, "stp\tx29, x30, [sp, #-48]!");
        assert_eq!(d.address, Some(AddressForm { base: Some(31), index: None, offset: -48 }));
        // ldp x29, x30, [sp], #48
        let d = decode(0xa8c37bfd);
        assert_eq!(d.text, "ldp\tx29, x30, [sp], #48");
        assert_eq!(d.address.map(|a| a.offset), Some(0));
        // ldrb w1, [x1, x2]
        assert_eq!(decode(0x38626821).text, "ldrb\tw1, [x1, x2]");
        // ldr x0, [x1, w2, sxtw #3]
        let d = decode(0xf862d820);
        assert_eq!(d.text, "ldr\tx0, [x1, w2, sxtw #3]");
        assert_eq!(d.address.and_then(|a| a.index), Some((2, Extend::Sxtw, 3)));
        // ldur x0, [x29, #-8]
        assert_eq!(decode(0xf85f83a0).text, "ldur\tx0, [x29, #-8]");
        // ldxr w1, [x0]
        assert_eq!(decode(0x885f7c01).text, "ldxr\tw1, [x0]");
    }

    #[test]
    fn branches_and_exceptions_have_no_data_access() {
        assert_eq!(decode(0xd4000001), Decoded { text: "svc\t#0x0".into(), writes: None, address: None });
        assert_eq!(decode(0xd63f0020).text, "blr\tx1");
        assert_eq!(decode(0xd65f03c0).text, "ret");
        assert_eq!(decode(0xd4207d00).text, "brk\t#0x3e8");
        assert_eq!(decode(0x94000010).text, "bl\t.+64");
        assert_eq!(decode(0x12345678).text, ".inst\t0x12345678");
    }
}
