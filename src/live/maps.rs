//! `/proc/PID/maps`: the process's mappings, which decide what memory the snapshot copies and
//! which files NT_FILE names.

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mapping {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) read: bool,
    pub(crate) write: bool,
    pub(crate) exec: bool,
    /// `s` (shared) rather than `p` (private).
    pub(crate) shared: bool,
    /// Offset of `start` in the mapped file, in bytes.
    pub(crate) offset: u64,
    /// Device major:minor and inode; inode 0 means no file behind it.
    pub(crate) inode: u64,
    /// The path, `[heap]`/`[stack]`/`[vdso]`-style names, or empty for anonymous memory.
    pub(crate) path: String,
}

impl Mapping {

    pub(crate) fn is_empty(&self) -> bool {
        self.end == self.start
    }

    pub(crate) fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr < self.end
    }

    /// A mapping of a file with a name on disk (the kernel's NT_FILE lists these).
    pub(crate) fn is_file(&self) -> bool {
        self.inode != 0 && self.path.starts_with('/')
    }

    /// A file that no longer exists under its name (or a memfd): its bytes are nowhere but in
    /// memory, so they are copied like anonymous memory.
    pub(crate) fn is_deleted_file(&self) -> bool {
        self.is_file() && self.path.ends_with(" (deleted)") || self.path.starts_with("/memfd:")
    }

    /// ELF segment flags (PF_R 4, PF_W 2, PF_X 1) for its PT_LOAD.
    pub(crate) fn elf_flags(&self) -> u32 {
        (if self.read { 4 } else { 0 }) | (if self.write { 2 } else { 0 }) | (if self.exec { 1 } else { 0 })
    }
}

/// Parses the whole text; malformed lines are skipped (the kernel writes none, but the text is
/// input like any other).
pub(crate) fn parse(text: &str) -> Vec<Mapping> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Mapping> {
    // start-end perms offset dev inode [path]; the path may hold spaces.
    let mut rest = line;
    let mut field = || {
        let t = rest.trim_start();
        let end = t.find(' ').unwrap_or(t.len());
        let (f, r) = t.split_at(end);
        rest = r;
        f
    };
    let range = field();
    let perms = field().as_bytes().to_vec();
    let offset = field();
    let _dev = field();
    let inode = field();
    let path = rest.trim_start().to_string();
    let (s, e) = range.split_once('-')?;
    let start = u64::from_str_radix(s, 16).ok()?;
    let end = u64::from_str_radix(e, 16).ok()?;
    if end < start || perms.len() < 4 {
        return None;
    }
    Some(Mapping {
        start,
        end,
        read: perms[0] == b'r',
        write: perms[1] == b'w',
        exec: perms[2] == b'x',
        shared: perms[3] == b's',
        offset: u64::from_str_radix(offset, 16).ok()?,
        inode: inode.parse().ok()?,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_files_anonymous_memory_and_paths_with_spaces() {
        let text = "\
55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 1234                       /opt/my app/bin
55d0c0a01000-55d0c0a02000 r-xp 00001000 08:01 1234                       /opt/my app/bin
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 
7ffd1000000-7ffd1021000 rw-p 00000000 00:00 0                          [stack]
7f1000000000-7f1000001000 rw-s 00000000 00:01 77                         /memfd:doublemapper (deleted)
garbage line
";
        let m = parse(text);
        assert_eq!(m.len(), 5);
        assert_eq!(m[1].path, "/opt/my app/bin");
        assert_eq!((m[1].offset, m[1].exec, m[1].elf_flags()), (0x1000, true, 5));
        assert!(m[0].is_file() && !m[0].is_deleted_file());
        assert!(!m[2].is_file() && m[2].path.is_empty() && m[2].write);
        assert_eq!(m[3].path, "[stack]");
        assert!(m[4].shared && m[4].is_deleted_file());
    }
}
