//! Reads `gdb-crash.txt`: gdb's `p $_siginfo`, `x/i $pc`, `p __abort_msg->msg` and `bt` of a
//! crash sample's kernel core, each after an `==name` line.

/// What gdb said about the crash.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GdbCrash {
    pub signo: Option<i32>,
    pub code: Option<i32>,
    /// `_sigfault.si_addr`.
    pub addr: Option<u64>,
    /// `_kill.si_pid`.
    pub pid: Option<u32>,
    /// The PC and its instruction (Intel syntax) from `x/i $pc`.
    pub pc: Option<u64>,
    pub instruction: Option<String>,
    /// `__abort_msg->msg`, unescaped; `None` when glibc recorded none.
    pub abort_msg: Option<String>,
    /// The crashing thread's frames, function names as gdb prints them.
    pub bt: Vec<String>,
}

fn section<'a>(text: &'a str, name: &str) -> &'a str {
    let marker = format!("=={name}\n");
    let Some(start) = text.find(&marker) else { return "" };
    let rest = &text[start + marker.len()..];
    let end = rest.find("\n==").map_or(rest.len(), |e| e + 1);
    &rest[..end]
}

fn number_after(text: &str, key: &str) -> Option<i64> {
    let at = text.find(key)? + key.len();
    let s: String = text[at..].chars().take_while(|c| c.is_ascii_hexdigit() || *c == 'x' || *c == '-').collect();
    match s.strip_prefix("0x") {
        Some(h) => i64::from_str_radix(h, 16).ok().or_else(|| u64::from_str_radix(h, 16).ok().map(|v| v as i64)),
        None => s.parse().ok(),
    }
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(o) => out.push(o),
            None => {}
        }
    }
    out
}

pub fn parse(text: &str) -> GdbCrash {
    let siginfo = section(text, "siginfo");
    let pc = section(text, "pc");
    let abort = section(text, "abort_msg");
    let bt = section(text, "bt");
    let (pc_addr, instruction) = pc
        .lines()
        .find_map(|l| l.strip_prefix("=> "))
        .map(|l| {
            let addr = l.split_whitespace().next().and_then(|a| u64::from_str_radix(a.trim_start_matches("0x").trim_end_matches(':'), 16).ok());
            // A pc in no mapping (a smashed return address) has no instruction.
            let text = l.split_once(":\t").map(|(_, t)| t.trim().to_string()).filter(|t| !t.starts_with("Cannot access memory"));
            (addr, text)
        })
        .unwrap_or((None, None));
    let abort_msg = abort.lines().find_map(|l| {
        let q = l.find(" \"")?;
        let body = l[q + 2..].strip_suffix('"')?;
        Some(unescape(body))
    });
    let frames = bt
        .lines()
        .filter(|l| l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.split_once(' ')?.1.trim_start();
            let rest = match rest.split_once(" in ") {
                Some((addr, f)) if addr.starts_with("0x") => f,
                _ => rest,
            };
            // `name (args) at file:line`, `name () from lib`: the name ends at " (".
            Some(rest.split(" (").next()?.trim().to_string())
        })
        .collect();
    GdbCrash {
        signo: number_after(siginfo, "si_signo = ").map(|v| v as i32),
        code: number_after(siginfo, "si_code = ").map(|v| v as i32),
        addr: number_after(siginfo, "_sigfault = {si_addr = ").map(|v| v as u64),
        pid: number_after(siginfo, "_kill = {si_pid = ").map(|v| v as u32),
        pc: pc_addr,
        instruction,
        abort_msg,
        bt: frames,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_parses() {
        let text = "==siginfo\n$1 = {si_signo = 11, si_errno = 0, si_code = 1, _sifields = {_pad = {44, 0 <repeats 27 times>}, _kill = {si_pid = 44, si_uid = 0}, _sigfault = {si_addr = 0x2c, _addr_lsb = 0}}}\n==pc\n=> 0x563a224d93de <parse_qty+12>:\tmov    eax,DWORD PTR [rax+0x2c]\n==abort_msg\n$2 = 0x7f31fd746004 \"free(): double \\\"free\\\"\\n\"\n==bt\n#0  0x0000563a224d93de in parse_qty (o=0x0) at x.c:12\n#1  __GI_raise (sig=6) at raise.c:26\n#2  0x00007f313ca9d919 in ?? () from /lib/libstdc++.so.6\n==end\n";
        let g = parse(text);
        assert_eq!((g.signo, g.code, g.addr, g.pid), (Some(11), Some(1), Some(0x2c), Some(44)));
        assert_eq!(g.pc, Some(0x563a224d93de));
        assert_eq!(g.instruction.as_deref(), Some("mov    eax,DWORD PTR [rax+0x2c]"));
        assert_eq!(g.abort_msg.as_deref(), Some("free(): double \"free\"\n"));
        assert_eq!(g.bt, vec!["parse_qty", "__GI_raise", "??"]);
    }
}
