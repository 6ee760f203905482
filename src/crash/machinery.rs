//! Which frames are the machinery of dying, which modules are libraries, and how a crash's
//! signature is cut: `analyzers/crash.toml`, compiled in.

use serde::Deserialize;
use std::sync::OnceLock;

const FILE: &str = "analyzers/crash.toml";
const TEXT: &str = include_str!("../../analyzers/crash.toml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Machinery {
    pub(crate) machinery: Names,
    pub(crate) library: Library,
    pub(crate) signature: SignatureRules,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Names {
    pub(crate) functions: Vec<String>,
    pub(crate) prefixes: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Library {
    pub(crate) modules: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SignatureRules {
    pub(crate) frames: usize,
    pub(crate) prefix: Vec<String>,
    pub(crate) prefix_starts: Vec<String>,
    pub(crate) stop: Vec<String>,
    pub(crate) stop_starts: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("analyzer data {FILE}: {0}")]
pub(crate) struct MachineryError(String);

impl Machinery {
    /// The built-in lists, parsed once.
    pub(crate) fn builtin() -> Result<&'static Machinery, &'static MachineryError> {
        static DATA: OnceLock<Result<Machinery, MachineryError>> = OnceLock::new();
        DATA.get_or_init(|| toml::from_str(TEXT).map_err(|e| MachineryError(e.to_string()))).as_ref()
    }

    /// A frame (by normalised name) that raises, aborts, terminates, panics or dispatches.
    pub(crate) fn is_machinery(&self, name: &str) -> bool {
        self.machinery.functions.iter().any(|f| f == name) || self.machinery.prefixes.iter().any(|p| name.starts_with(p.as_str()))
    }

    pub(crate) fn is_library(&self, module: &str) -> bool {
        self.library.modules.iter().any(|m| module.starts_with(m.as_str()))
    }

    pub(crate) fn is_signature_prefix(&self, name: &str) -> bool {
        self.signature.prefix.iter().any(|f| f == name) || self.signature.prefix_starts.iter().any(|p| name.starts_with(p.as_str()))
    }

    pub(crate) fn is_stop(&self, name: &str) -> bool {
        self.signature.stop.iter().any(|f| f == name) || self.signature.stop_starts.iter().any(|p| name.starts_with(p.as_str()))
    }
}

/// A function name as signatures and the lists compare it: no argument list (`std::terminate()`
/// → `std::terminate`), no Rust hash suffix (`::h0123456789abcdef`), no glibc `__GI_` alias
/// prefix (`__GI___libc_free` → `__libc_free`, `__GI_raise` → `raise`).
pub(crate) fn normalize(name: &str) -> String {
    let mut s = name.trim();
    if let Some(rest) = s.strip_prefix("__GI_") {
        s = rest;
    }
    // A trailing argument list, outside any template brackets.
    let mut out = s.to_string();
    if out.ends_with(')') {
        let mut depth = 0i32;
        let mut cut = None;
        for (i, c) in out.char_indices().rev() {
            match c {
                ')' => depth += 1,
                '(' => {
                    depth -= 1;
                    if depth == 0 {
                        cut = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        if let Some(i) = cut.filter(|&i| i > 0) {
            out.truncate(i);
        }
    }
    if let Some(i) = out.rfind("::h")
        && out.len() - i == 19
        && out[i + 3..].chars().all(|c| c.is_ascii_hexdigit())
    {
        out.truncate(i);
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lists_parse() {
        let m = Machinery::builtin().expect("analyzers/crash.toml parses");
        assert!(m.is_machinery("__pthread_kill_implementation"));
        assert!(m.is_machinery("std::panicking::panic_with_hook"));
        assert!(!m.is_machinery("settle"));
        assert!(m.is_library("libc.so.6"));
        assert!(m.is_signature_prefix("__memmove_avx_unaligned_erms"));
    }

    #[test]
    fn names_lose_arguments_hashes_and_aliases() {
        assert_eq!(normalize("std::terminate()"), "std::terminate");
        assert_eq!(normalize("__GI___libc_free"), "__libc_free");
        assert_eq!(normalize("__GI_raise"), "raise");
        assert_eq!(normalize("crash_rust_panic::settle::h0123456789abcdef"), "crash_rust_panic::settle");
        assert_eq!(normalize("std::vector<int>::push_back(int const&)"), "std::vector<int>::push_back");
        assert_eq!(normalize("descend"), "descend");
    }
}
