//! NT_FILE: the file-backed mappings at the time of the dump: `count`, `page_size`, then `count`
//! triples (start, end, offset in pages), then `count` NUL-terminated paths.

use crate::bytes::u64_at;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMapping {
    pub start: u64,
    pub end: u64,
    /// Offset of `start` in the file, in bytes.
    pub file_offset: u64,
    pub path: String,
}

/// Parses NT_FILE; `Err` names what was wrong. A count larger than the descriptor can hold is
/// refused before anything is allocated.
pub(crate) fn parse(desc: &[u8]) -> Result<Vec<FileMapping>, String> {
    let count = u64_at(desc, 0).ok_or("NT_FILE shorter than its header")?;
    let page_size = u64_at(desc, 8).ok_or("NT_FILE shorter than its header")?;
    let table_len = count.checked_mul(24).filter(|&n| n <= desc.len() as u64 - 16);
    let Some(table_len) = table_len else {
        return Err(format!("NT_FILE claims {count} mappings, more than its {} bytes hold", desc.len()));
    };
    // Each path ends with a NUL; a final piece without one is a cut-off path, not a path.
    let mut names = desc[16 + table_len as usize..].split_inclusive(|&b| b == 0).filter_map(|s| s.strip_suffix(&[0]));
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        let at = 16 + i * 24;
        let (start, end, pages) = match (u64_at(desc, at), u64_at(desc, at + 8), u64_at(desc, at + 16)) {
            (Some(s), Some(e), Some(p)) => (s, e, p),
            _ => return Err(format!("NT_FILE entry {i} is cut off")),
        };
        let Some(name) = names.next() else {
            return Err(format!("NT_FILE has {count} mappings but only {i} paths"));
        };
        if end < start {
            return Err(format!("NT_FILE entry {i} ends ({end:#x}) before it starts ({start:#x})"));
        }
        out.push(FileMapping {
            start,
            end,
            file_offset: pages.saturating_mul(page_size),
            path: String::from_utf8_lossy(name).into_owned(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(entries: &[(u64, u64, u64, &str)]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend((entries.len() as u64).to_le_bytes());
        v.extend(4096u64.to_le_bytes());
        for (s, e, p, _) in entries {
            v.extend(s.to_le_bytes());
            v.extend(e.to_le_bytes());
            v.extend(p.to_le_bytes());
        }
        for (.., name) in entries {
            v.extend(name.as_bytes());
            v.push(0);
        }
        v
    }

    #[test]
    fn reads_mappings_with_byte_offsets() {
        let d = encode(&[(0x1000, 0x3000, 0, "/bin/a"), (0x3000, 0x4000, 2, "/lib/b.so")]);
        let m = parse(&d).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[1], FileMapping { start: 0x3000, end: 0x4000, file_offset: 0x2000, path: "/lib/b.so".into() });
    }

    #[test]
    fn a_huge_count_is_refused_without_allocating() {
        let mut d = encode(&[(0x1000, 0x3000, 0, "/bin/a")]);
        d[0..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse(&d).unwrap_err().contains("more than"));
    }

    #[test]
    fn missing_paths_are_an_error() {
        let mut d = encode(&[(0x1000, 0x3000, 0, "/bin/a")]);
        d.truncate(d.len() - 7);
        assert!(parse(&d).is_err());
    }
}
