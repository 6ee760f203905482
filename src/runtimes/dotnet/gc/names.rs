//! Type names as SOS's heap commands print them (`dumpheap -stat`, `gcheapstat`): C#-like
//! generics, `System.Collections.Generic.List<System.Char>`, from the DAC-style name that
//! `syncblk` and [`crate::runtimes::dotnet::types::objects::TypeNamer`] give,
//! `System.Collections.Generic.List`1[[System.Char, System.Private.CoreLib]]`.
//!
//! The rules (checked on every type row of the committed dumps' `dumpheap -stat`): the
//! assembly names go; each `+`-separated part of a name with a `` `N `` arity takes the next N
//! type arguments, in order, as `Part<A, B>` (so a type nested in a generic type reads
//! `CerHashtable<System.String, System.Reflection.RuntimeMethodInfo[]>+Table`); arguments left
//! over go to the last part; array suffixes stay as they are. A name the parser does not
//! understand is returned unchanged, as SOS does.

const MAX_DEPTH: u32 = 16;

#[derive(Debug)]
struct Node<'a> {
    name: &'a str,
    args: Vec<Node<'a>>,
    /// `[]`, `[,]`, `[*]`, one after another, as written.
    suffix: &'a str,
}

/// The SOS heap-command name for a DAC-style type name.
pub(crate) fn sos_heap_name(dac: &str) -> String {
    let mut p = Parser { s: dac.as_bytes(), pos: 0 };
    match p.node(0) {
        Some(n) if p.pos == dac.len() => {
            let mut out = String::with_capacity(dac.len());
            render(&n, &mut out);
            out
        }
        _ => dac.to_string(),
    }
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self, at: usize) -> Option<u8> {
        self.s.get(self.pos + at).copied()
    }

    fn text(&self, from: usize, to: usize) -> Option<&'a str> {
        std::str::from_utf8(self.s.get(from..to)?).ok()
    }

    fn node(&mut self, depth: u32) -> Option<Node<'a>> {
        if depth > MAX_DEPTH {
            return None;
        }
        let start = self.pos;
        while let Some(c) = self.peek(0) {
            if matches!(c, b'[' | b']' | b',') {
                break;
            }
            self.pos += 1;
        }
        let name = self.text(start, self.pos)?;
        if name.is_empty() {
            return None;
        }
        let mut args = Vec::new();
        // A generic argument list: `[[`, or `[` then a name (not an array suffix).
        if self.peek(0) == Some(b'[') && !matches!(self.peek(1), Some(b']' | b',' | b'*') | None) {
            self.pos += 1;
            loop {
                if self.peek(0) == Some(b'[') {
                    self.pos += 1;
                    args.push(self.node(depth + 1)?);
                    if self.peek(0) == Some(b',') {
                        // `, Assembly.Name]`: assembly names hold no brackets.
                        while self.peek(0)? != b']' {
                            self.pos += 1;
                        }
                    }
                    if self.peek(0) != Some(b']') {
                        return None;
                    }
                    self.pos += 1;
                } else {
                    args.push(self.node(depth + 1)?);
                }
                match self.peek(0)? {
                    b',' => self.pos += 1,
                    b']' => {
                        self.pos += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        let suffix_start = self.pos;
        while self.peek(0) == Some(b'[') && matches!(self.peek(1), Some(b']' | b',' | b'*')) {
            while self.peek(0)? != b']' {
                self.pos += 1;
            }
            self.pos += 1;
        }
        let suffix = self.text(suffix_start, self.pos)?;
        Some(Node { name, args, suffix })
    }
}

fn render(n: &Node, out: &mut String) {
    let parts: Vec<&str> = n.name.split('+').collect();
    let mut args = n.args.iter();
    let last = parts.len() - 1;
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push('+');
        }
        let (base, arity) = match part.rfind('`') {
            Some(b) => match part[b + 1..].parse::<usize>() {
                Ok(n) => (&part[..b], n),
                Err(_) => (*part, 0),
            },
            None => (*part, 0),
        };
        let mut mine: Vec<&Node> = args.by_ref().take(arity).collect();
        if i == last {
            mine.extend(args.by_ref());
        }
        if arity > 0 && mine.is_empty() {
            // An open generic type: nothing to put in the brackets.
            out.push_str(part);
            continue;
        }
        out.push_str(base);
        if !mine.is_empty() {
            out.push('<');
            for (j, a) in mine.iter().enumerate() {
                if j > 0 {
                    out.push_str(", ");
                }
                render(a, out);
            }
            out.push('>');
        }
    }
    out.push_str(n.suffix);
}

#[cfg(test)]
mod tests {
    use super::sos_heap_name;

    #[test]
    fn generics_nested_and_arrays_read_as_sos_prints_them() {
        let cases = [
            ("System.String", "System.String"),
            ("System.Int32[]", "System.Int32[]"),
            ("System.String[,]", "System.String[,]"),
            ("System.Reflection.RuntimeMethodInfo[][]", "System.Reflection.RuntimeMethodInfo[][]"),
            ("System.Collections.Generic.List`1[[System.Char, System.Private.CoreLib]]", "System.Collections.Generic.List<System.Char>"),
            (
                "System.Collections.Generic.Dictionary`2[[System.String, System.Private.CoreLib],[System.Object, System.Private.CoreLib]]",
                "System.Collections.Generic.Dictionary<System.String, System.Object>",
            ),
            (
                "System.Reflection.CerHashtable`2+Table[[System.String, System.Private.CoreLib],[System.Reflection.RuntimeMethodInfo[], System.Private.CoreLib]]",
                "System.Reflection.CerHashtable<System.String, System.Reflection.RuntimeMethodInfo[]>+Table",
            ),
            (
                "System.Collections.Generic.Dictionary`2+Entry[[System.Char, System.Private.CoreLib],[System.String, System.Private.CoreLib]][]",
                "System.Collections.Generic.Dictionary<System.Char, System.String>+Entry[]",
            ),
            (
                "System.Func`1[[System.Diagnostics.Tracing.EventSource, System.Private.CoreLib]][]",
                "System.Func<System.Diagnostics.Tracing.EventSource>[]",
            ),
            (
                "System.RuntimeType+RuntimeTypeCache+MemberInfoCache`1[[System.Reflection.RuntimeFieldInfo, System.Private.CoreLib]]",
                "System.RuntimeType+RuntimeTypeCache+MemberInfoCache<System.Reflection.RuntimeFieldInfo>",
            ),
            (
                "System.Collections.Generic.Dictionary`2[[System.Guid, System.Private.CoreLib],[System.Diagnostics.Tracing.EventSource+OverrideEventProvider, System.Private.CoreLib]]",
                "System.Collections.Generic.Dictionary<System.Guid, System.Diagnostics.Tracing.EventSource+OverrideEventProvider>",
            ),
            (
                "System.Lazy`1[[System.Collections.Generic.List`1[[System.Int32, System.Private.CoreLib]], System.Private.CoreLib]]",
                "System.Lazy<System.Collections.Generic.List<System.Int32>>",
            ),
            ("Foo`1[[T]]", "Foo<T>"),
        ];
        for (dac, sos) in cases {
            assert_eq!(sos_heap_name(dac), sos, "{dac}");
        }
    }

    #[test]
    fn what_it_cannot_parse_comes_back_unchanged() {
        for s in ["", "A[[B, C", "A[[", "]]", "A`1[[B, C]]]"] {
            assert_eq!(sos_heap_name(s), s);
        }
    }
}
