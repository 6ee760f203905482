//! Demangling, as gdb prints names that come as linkage names.
//!
//! - C: the name as found, unchanged (glibc's `__GI___lll_lock_wait`, its `asm` name).
//! - C++ linkage name from DWARF: demangled without parameters or return type
//!   (`ns::Class::method`, `f<int>`), as gdb's `cp_remove_params` leaves it. From a symbol
//!   table: demangled in full, with parameters (`std::condition_variable::wait(std::unique_lock<std::mutex>&)`),
//!   which is what gdb prints for a minimal symbol.
//! - Rust: `rustc_demangle`'s alternate form, without the hash (`knot::main`). gdb names Rust
//!   functions from DWARF by their scopes instead (see `die_name`); this is for symbol tables and
//!   for when the DIE tree cannot be read.

use gimli::DwLang;

/// Where the name is printed from: decides whether C++ parameters stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameKind {
    /// A DWARF function (gdb's full symbol).
    Debug,
    /// An ELF symbol (gdb's minimal symbol).
    Minimal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Rust,
    Cpp,
    None,
}

pub(crate) fn is_cpp(lang: DwLang) -> bool {
    matches!(
        lang,
        gimli::DW_LANG_C_plus_plus
            | gimli::DW_LANG_C_plus_plus_03
            | gimli::DW_LANG_C_plus_plus_11
            | gimli::DW_LANG_C_plus_plus_14
            | gimli::DW_LANG_C_plus_plus_17
            | gimli::DW_LANG_C_plus_plus_20
            | gimli::DW_LANG_ObjC_plus_plus
    )
}

/// A legacy Rust symbol: `_ZN` … `17h` + 16 hex digits + `E`.
fn has_rust_hash(raw: &str) -> bool {
    let Some(body) = raw.strip_prefix("_ZN") else { return false };
    // The hash may be followed by an LLVM suffix such as `.llvm.123`.
    let body = body.split('.').next().unwrap_or(body);
    let Some(body) = body.strip_suffix('E') else { return false };
    body.len() >= 19 && body.is_char_boundary(body.len() - 19) && {
        let tail = &body[body.len() - 19..];
        tail.starts_with("17h") && tail[3..].bytes().all(|b| b.is_ascii_hexdigit())
    }
}

fn scheme(raw: &str, lang: Option<DwLang>) -> Scheme {
    match lang {
        Some(gimli::DW_LANG_Rust) => Scheme::Rust,
        Some(l) if is_cpp(l) => Scheme::Cpp,
        _ if raw.starts_with("_R") => Scheme::Rust,
        _ if has_rust_hash(raw) => Scheme::Rust,
        _ if raw.starts_with("_Z") => Scheme::Cpp,
        _ => Scheme::None,
    }
}

/// The name to print for `raw`, a linkage or plain name, from a unit of language `lang`
/// (`None` for symbol-table names).
pub(crate) fn display_name(raw: &str, lang: Option<DwLang>, kind: NameKind) -> String {
    match scheme(raw, lang) {
        Scheme::Rust => match rustc_demangle::try_demangle(raw) {
            Ok(d) => format!("{d:#}"),
            // A Rust unit may still hold a C++ or C name.
            Err(_) => cpp(raw, kind).unwrap_or_else(|| raw.to_string()),
        },
        Scheme::Cpp => cpp(raw, kind)
            .or_else(|| rustc_demangle::try_demangle(raw).ok().map(|d| format!("{d:#}")))
            .unwrap_or_else(|| raw.to_string()),
        Scheme::None => raw.to_string(),
    }
}

fn cpp(raw: &str, kind: NameKind) -> Option<String> {
    if !raw.starts_with("_Z") {
        return None;
    }
    let sym = cpp_demangle::Symbol::new(raw.as_bytes()).ok()?;
    let options = match kind {
        NameKind::Debug => cpp_demangle::DemangleOptions::new().no_params().no_return_type(),
        NameKind::Minimal => cpp_demangle::DemangleOptions::new(),
    };
    let name = as_cxxfilt(&sym.demangle_with_options(&options).ok()?);
    Some(match kind {
        NameKind::Debug => strip_trailing_qualifiers(name),
        NameKind::Minimal => name,
    })
}

/// cpp_demangle's spelling made c++filt's (libiberty's, which gdb prints): an integer template
/// argument is a literal with its type's suffix (`(long)3600` → `3600l`, `(unsigned long)0` →
/// `0ul`, `(int)5` → `5`, `(bool)1` → `true`; other types keep the cast, `(char)65`), and an
/// empty pack leaves no separator behind (`f<void, >` → `f<void>`).
pub(crate) fn as_cxxfilt(name: &str) -> String {
    const SUFFIXES: [(&str, &str); 6] = [("int", ""), ("unsigned int", "u"), ("long", "l"), ("unsigned long", "ul"), ("long long", "ll"), ("unsigned long long", "ull")];
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(open) = rest.find('(') {
        let (head, tail) = rest.split_at(open);
        out.push_str(head);
        // `(type)` then a number, as a template argument (after `<` or `, `).
        let literal = tail.find(')').and_then(|close| {
            let ty = &tail[1..close];
            let after = &tail[close + 1..];
            let digits = after.strip_prefix('-').unwrap_or(after);
            let n = digits.bytes().take_while(u8::is_ascii_digit).count();
            let number = &after[..after.len() - digits.len() + n];
            let is_argument = out.ends_with('<') || out.ends_with(", ");
            let ends_argument = matches!(digits.as_bytes().get(n), Some(b'>' | b','));
            if n == 0 || !is_argument || !ends_argument {
                return None;
            }
            let spelled = match ty {
                "bool" if number == "0" => "false".to_string(),
                "bool" if number == "1" => "true".to_string(),
                _ => format!("{number}{}", SUFFIXES.iter().find(|(t, _)| *t == ty)?.1),
            };
            Some((spelled, close + 1 + number.len()))
        });
        match literal {
            Some((spelled, used)) => {
                out.push_str(&spelled);
                rest = &tail[used..];
            }
            None => {
                out.push('(');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    // An empty pack: `<void, >`, `<, int>`, `<int, , int>`.
    for (from, to) in [(", >", ">"), ("<, ", "<"), (", , ", ", ")] {
        while out.contains(from) {
            out = out.replace(from, to);
        }
    }
    out
}

/// `A::f const` → `A::f`: with the parameters gone, cv- and ref-qualifiers are left dangling;
/// gdb drops them with the parameter list.
fn strip_trailing_qualifiers(mut name: String) -> String {
    loop {
        let trimmed = name.trim_end();
        let cut = [" const", " volatile", " &&", " &"].iter().find_map(|q| trimmed.strip_suffix(q).map(str::len));
        match cut {
            Some(len) => name.truncate(len),
            None => {
                let len = trimmed.len();
                name.truncate(len);
                return name;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_names_are_kept() {
        assert_eq!(display_name("__GI___lll_lock_wait", Some(gimli::DW_LANG_C11), NameKind::Debug), "__GI___lll_lock_wait");
        assert_eq!(display_name("main", None, NameKind::Minimal), "main");
    }

    #[test]
    fn cpp_debug_names_lose_parameters_and_return_type() {
        assert_eq!(display_name("_ZN2ns5Klass6methodEi", Some(gimli::DW_LANG_C_plus_plus_14), NameKind::Debug), "ns::Klass::method");
        assert_eq!(display_name("_Z3fooIiEvT_", Some(gimli::DW_LANG_C_plus_plus), NameKind::Debug), "foo<int>");
        assert_eq!(display_name("_ZNK1A1fEv", Some(gimli::DW_LANG_C_plus_plus), NameKind::Debug), "A::f");
    }

    #[test]
    fn cpp_minimal_names_keep_parameters() {
        assert_eq!(
            display_name("_ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE", None, NameKind::Minimal),
            "std::condition_variable::wait(std::unique_lock<std::mutex>&)"
        );
    }

    /// Issue 42: as c++filt (and gdb) print them.
    #[test]
    fn cpp_integer_template_arguments_and_empty_packs_read_as_cxxfilt_prints_them() {
        let d = |raw| display_name(raw, Some(gimli::DW_LANG_C_plus_plus_14), NameKind::Debug);
        assert_eq!(d("_Z8hold_forIlSt5ratioILl3600ELl1EEEvNSt6chrono8durationIT_T0_EE"), "hold_for<long, std::ratio<3600l, 1l> >");
        assert_eq!(d("_Z8take_allIJLm0ELm1EEEiSt16integer_sequenceImJXspT_EEE"), "take_all<0ul, 1ul>");
        assert_eq!(d("_ZSt13__invoke_implIvPFvvEJEET_St14__invoke_otherOT0_DpOT1_"), "std::__invoke_impl<void, void (*)()>");
        assert_eq!(d("_Z12wait_quietlyIJEEvDpT_"), "wait_quietly<>");
        assert_eq!(as_cxxfilt("f<(unsigned int)7, (long long)-2, (unsigned long long)3, (int)4, (bool)1, (bool)0, (char)65>"), "f<7u, -2ll, 3ull, 4, true, false, (char)65>");
        assert_eq!(as_cxxfilt("g(long) const"), "g(long) const", "a parameter list is no literal");
        assert_eq!(as_cxxfilt("h<void (*)(long)>"), "h<void (*)(long)>");
    }

    #[test]
    fn rust_names_lose_the_hash() {
        assert_eq!(display_name("_ZN4knot4main17h0123456789abcdefE", None, NameKind::Minimal), "knot::main");
        assert_eq!(display_name("_ZN4knot4main17h0123456789abcdefE", Some(gimli::DW_LANG_Rust), NameKind::Debug), "knot::main");
        assert!(has_rust_hash("_ZN4knot4main17h0123456789abcdefE.llvm.42"));
        assert!(!has_rust_hash("_ZN2ns5Klass6methodEi"));
    }

    #[test]
    fn garbage_is_returned_unchanged() {
        assert_eq!(display_name("_Zzzz", None, NameKind::Debug), "_Zzzz");
        assert_eq!(display_name("_R", None, NameKind::Debug), "_R");
        assert_eq!(display_name("_ZN", Some(gimli::DW_LANG_Rust), NameKind::Debug), "_ZN");
        assert_eq!(display_name("é_ZN", None, NameKind::Debug), "é_ZN");
    }
}
