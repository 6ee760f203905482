//! Walking the ELF note records inside a PT_NOTE segment. Each note is a header (namesz, descsz,
//! type), a name and a descriptor, each padded to 4 bytes. Every length is checked against the
//! segment so a hostile core can only end the walk, with the offset where it went wrong.

/// One note: `offset` is where its header starts in the core file.
#[derive(Debug, Clone, Copy)]
pub struct Note<'a> {
    pub offset: u64,
    pub name: &'a [u8],
    pub kind: u32,
    pub desc: &'a [u8],
}

impl Note<'_> {
    /// The owner name without its terminating NUL.
    pub(crate) fn owner(&self) -> &[u8] {
        match self.name.iter().position(|&b| b == 0) {
            Some(n) => &self.name[..n],
            None => self.name,
        }
    }
}

/// Iterates notes in `data`, which lies at `base_offset` in the file. Stops at the first
/// malformed header and records it in `error`.
pub struct Notes<'a> {
    data: &'a [u8],
    base_offset: u64,
    pos: usize,
    pub error: Option<(u64, String)>,
}

impl<'a> Notes<'a> {
    pub fn new(data: &'a [u8], base_offset: u64) -> Self {
        Notes { data, base_offset, pos: 0, error: None }
    }
}

fn align4(n: usize) -> Option<usize> {
    n.checked_add(3).map(|v| v & !3)
}

impl<'a> Iterator for Notes<'a> {
    type Item = Note<'a>;

    fn next(&mut self) -> Option<Note<'a>> {
        if self.error.is_some() || self.pos >= self.data.len() {
            return None;
        }
        let offset = self.base_offset + self.pos as u64;
        let rest = &self.data[self.pos..];
        if rest.len() < 12 {
            // Trailing padding of fewer than a header's bytes is harmless when it is all zero.
            if rest.iter().any(|&b| b != 0) {
                self.error = Some((offset, format!("{} stray bytes after the last note", rest.len())));
            }
            return None;
        }
        let word = |i: usize| u32::from_le_bytes([rest[i], rest[i + 1], rest[i + 2], rest[i + 3]]);
        let (namesz, descsz, kind) = (word(0) as usize, word(4) as usize, word(8));
        let name_start = 12;
        let desc_start = align4(namesz).and_then(|n| n.checked_add(name_start));
        let end = desc_start.and_then(|d| align4(descsz).and_then(|s| d.checked_add(s)));
        match (desc_start, end) {
            (Some(desc_start), Some(end)) if desc_start + descsz <= rest.len() => {
                let note = Note {
                    offset,
                    name: &rest[name_start..name_start + namesz],
                    kind,
                    desc: &rest[desc_start..desc_start + descsz],
                };
                // The last note's padding may be cut off by the segment end.
                self.pos = self.pos.saturating_add(end).min(self.data.len());
                Some(note)
            }
            _ => {
                self.error = Some((
                    offset,
                    format!(
                        "note header claims name {namesz} and descriptor {descsz} bytes, but only {} bytes remain in the segment",
                        rest.len()
                    ),
                ));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(name: &[u8], kind: u32, desc: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&(name.len() as u32).to_le_bytes());
        v.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        v.extend_from_slice(&kind.to_le_bytes());
        v.extend_from_slice(name);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v.extend_from_slice(desc);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    #[test]
    fn reads_consecutive_notes_with_padding() {
        let mut data = note(b"CORE\0", 1, &[1, 2, 3]);
        data.extend(note(b"LINUX\0", 0x202, &[9; 8]));
        let mut it = Notes::new(&data, 100);
        let a = it.next().unwrap();
        assert_eq!((a.owner(), a.kind, a.desc, a.offset), (&b"CORE"[..], 1, &[1u8, 2, 3][..], 100));
        let b = it.next().unwrap();
        assert_eq!((b.owner(), b.kind, b.desc.len()), (&b"LINUX"[..], 0x202, 8));
        assert!(it.next().is_none());
        assert!(it.error.is_none());
    }

    #[test]
    fn a_descriptor_longer_than_the_segment_stops_the_walk_with_its_offset() {
        let mut data = note(b"CORE\0", 1, &[0; 16]);
        let mut bad = note(b"CORE\0", 1, &[0; 4]);
        bad[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        data.extend(bad);
        let mut it = Notes::new(&data, 0);
        assert!(it.next().is_some());
        assert!(it.next().is_none());
        let (offset, why) = it.error.clone().unwrap();
        assert_eq!(offset, 36);
        assert!(why.contains("descriptor"), "{why}");
    }
}
