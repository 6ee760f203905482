//! serde_json's pretty layout (two spaces a level), written with fewer writes.
//!
//! `PrettyFormatter` writes a line break, then the indent one level at a time: seven small
//! writes before a key six levels deep, and a report has a hundred thousand keys (a .NET
//! service's frames and heap tables). Here the break and the whole indent are one slice of a
//! static run of spaces, and a key's line break, indent and opening quote are one slice too (as
//! its closing quote and `: ` are): three writes a key where serde_json makes six. The bytes are
//! `PrettyFormatter`'s (tested against it).

use serde_json::ser::Formatter;
use std::io;

/// A line break and then spaces: a prefix of it is a line break and an indent.
const BREAK: &[u8; 257] = &{
    let mut b = [b' '; 257];
    b[0] = b'\n';
    b
};

/// Levels whose key openings are made ahead (knot's reports nest about ten deep).
const KEY_LEVELS: usize = 32;
/// The longest key opening: a comma, a line break, the indent of the deepest level, a quote.
const KEY_OPEN_LEN: usize = 2 + 2 * (KEY_LEVELS - 1) + 1;

/// Per level: `,` + line break + indent + `"`, the start of every key but an object's first
/// (which starts one byte in).
const KEY_OPEN: [[u8; KEY_OPEN_LEN]; KEY_LEVELS] = {
    let mut all = [[b' '; KEY_OPEN_LEN]; KEY_LEVELS];
    let mut level = 0;
    while level < KEY_LEVELS {
        all[level][0] = b',';
        all[level][1] = b'\n';
        all[level][2 + 2 * level] = b'"';
        level += 1;
    }
    all
};

/// Where a map key is in its writing: the quotes around it are written with what comes
/// before and after it, so the string's own quotes are skipped.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Key {
    /// Not in a key.
    #[default]
    None,
    /// The line break, the indent and the opening quote are written; the key's string is next.
    Opened,
    /// In the key's string.
    Inside,
    /// The closing quote and `: ` are written; the value is next.
    Closed,
}

/// Writes `serde_json::ser::PrettyFormatter::new()`'s bytes.
#[derive(Debug, Default)]
pub(crate) struct Indented {
    level: usize,
    has_value: bool,
    key: Key,
}

impl Indented {
    /// A line break and the indent of the current level.
    fn line<W: ?Sized + io::Write>(&self, w: &mut W) -> io::Result<()> {
        let mut spaces = self.level * 2;
        let first = spaces.min(BREAK.len() - 1);
        w.write_all(&BREAK[..1 + first])?;
        spaces -= first;
        // Deeper than the run (not in knot's reports): the rest in runs.
        while spaces > 0 {
            let n = spaces.min(BREAK.len() - 1);
            w.write_all(&BREAK[1..1 + n])?;
            spaces -= n;
        }
        Ok(())
    }

    fn open<W: ?Sized + io::Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    fn close<W: ?Sized + io::Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.level = self.level.saturating_sub(1);
        if self.has_value {
            self.line(w)?;
        }
        w.write_all(bracket)
    }

    fn item<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        self.line(w)
    }
}

impl Formatter for Indented {
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.item(w, first)
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        // serde_json writes every key as a string (numbers and booleans quoted too): its
        // opening quote goes with the line break.
        self.key = Key::Opened;
        match KEY_OPEN.get(self.level) {
            Some(open) => w.write_all(&open[usize::from(first)..3 + 2 * self.level]),
            None => {
                self.item(w, first)?;
                w.write_all(b"\"")
            }
        }
    }

    fn begin_string<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.key == Key::Opened {
            self.key = Key::Inside;
            return Ok(());
        }
        w.write_all(b"\"")
    }

    fn end_string<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.key == Key::Inside {
            self.key = Key::Closed;
            return w.write_all(b"\": ");
        }
        w.write_all(b"\"")
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.key == Key::Closed {
            self.key = Key::None;
            return Ok(());
        }
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use serde_json::json;

    fn both(value: &impl Serialize) -> (String, String) {
        let mut ours = Vec::new();
        value.serialize(&mut serde_json::Serializer::with_formatter(&mut ours, Indented::default())).unwrap();
        (String::from_utf8(ours).unwrap(), serde_json::to_string_pretty(value).unwrap())
    }

    #[test]
    fn the_bytes_are_serde_jsons_pretty_ones() {
        let deep = (0..200).fold(json!("bottom"), |v, i| json!({ format!("k{i}"): [v, i, [], {}] }));
        let values = [
            json!(null),
            json!([]),
            json!({}),
            json!([[], {}, [[]], {"a": {}}]),
            json!({"s": "quote \" and \\ and \n", "n": -1.5, "b": true, "list": [1, 2, {"x": [null]}]}),
            json!({"key \" with \\ escapes\n": "v", "": "", "e\u{1}": {"": [{"a": "\"", "b": []}]}}),
            deep,
        ];
        for v in &values {
            let (ours, theirs) = both(v);
            assert_eq!(ours, theirs);
        }
        // Keys that are not strings: serde_json quotes them as well.
        let numbers: std::collections::BTreeMap<i64, Vec<std::collections::BTreeMap<bool, &str>>> =
            [(-1, vec![[(true, "x"), (false, "\"")].into_iter().collect()]), (7, Vec::new())].into_iter().collect();
        let (ours, theirs) = both(&numbers);
        assert_eq!(ours, theirs);
    }
}
