//! Function names built from the DIE tree, the way gdb builds them when it does not (or, for
//! Rust, never does) use the linkage name.
//!
//! gdb names a Rust function, and a C++ function without `DW_AT_linkage_name` (gcc leaves it out
//! for functions with internal linkage, such as those in an anonymous namespace or templates over
//! a lambda), from `DW_AT_name` prefixed by its enclosing scopes: namespaces (an anonymous one
//! is `(anonymous namespace)`) and named classes, structures and unions. An unnamed class, a
//! function or the unit ends the prefix: a lambda's call operator is plain `operator()`.
//! Examples gdb prints: `m::{impl#0}::go`, `std::sync::poison::mutex::Mutex<u64>::lock<u64>`,
//! `bank::(anonymous namespace)::worker`.
//!
//! For a C++ function that is not inlined gdb then appends the parameter list built from the
//! DWARF types (`(void)`, `(std::_Index_tuple<0>)`, `(std::__invoke_other, struct {...} &&)`)
//! and strips it again with `cp_remove_params`, which gives up on names its parser cannot read:
//! those with a `<lambda()>`, an unnamed type (`{...}`) or `<unnamed ...>` keep their list, as
//! in gdb's `std::thread::_State_impl<…<main()::<lambda()> > > >::_M_run(void)`.

use super::dwarf::Reader;
use gimli::{AttributeValue, DwTag, UnitOffset, UnitRef};
use rustc_hash::FxHashMap;

/// Links followed from a DIE to the one holding its name.
const MAX_CHAIN: usize = 16;
/// Scope nesting searched for a DIE's parents.
const MAX_DEPTH: usize = 128;
/// Type modifiers followed when printing a parameter type.
const MAX_TYPE_DEPTH: usize = 16;
const MAX_PARAMS: usize = 64;

type Unit<'a, 'p> = UnitRef<'a, Reader<'p>>;

/// Computed names, cached per unit and DIE.
#[derive(Default)]
pub(crate) struct Namer {
    functions: FxHashMap<(usize, usize, bool), Option<String>>,
    types: FxHashMap<(usize, usize), Option<String>>,
}

impl Namer {
    /// The name gdb gives the function whose (concrete, abstract or inlined) DIE is `die`;
    /// `with_params` for C++ out-of-line instances (see the module docs).
    pub(crate) fn function_name(&mut self, unit: Unit<'_, '_>, die: UnitOffset, with_params: bool) -> Option<String> {
        let key = (unit.header.offset().0, die.0, with_params);
        if let Some(cached) = self.functions.get(&key) {
            return cached.clone();
        }
        let name = self.compute_function_name(unit, die, with_params);
        self.functions.insert(key, name.clone());
        name
    }

    fn compute_function_name(&mut self, unit: Unit<'_, '_>, die: UnitOffset, with_params: bool) -> Option<String> {
        let (name_die, name) = name_of(unit, die)?;
        let mut full = qualify(unit, name_die, name)?;
        if with_params
            && let Some(params) = self.params(unit, die)
        {
            let physname = format!("{full}{params}");
            if !gdb_can_parse(&physname) {
                full = physname;
            }
        }
        Some(full)
    }

    /// `(T1, T2)`, `(void)`, with ` const` for a const member function.
    fn params(&mut self, unit: Unit<'_, '_>, die: UnitOffset) -> Option<String> {
        let mut children: Vec<(DwTag, UnitOffset)> = Vec::new();
        {
            let mut tree = unit.entries_tree(Some(die)).ok()?;
            let root = tree.root().ok()?;
            let mut iter = root.children();
            while let Some(child) = iter.next().ok()? {
                if children.len() > MAX_PARAMS * 4 {
                    return None;
                }
                children.push((child.entry().tag(), child.entry().offset()));
            }
        }
        let mut out = String::from("(");
        let mut printed = 0;
        let mut varargs = false;
        let mut const_this = false;
        for (i, &(tag, off)) in children.iter().enumerate() {
            match tag {
                gimli::DW_TAG_formal_parameter => {}
                gimli::DW_TAG_unspecified_parameters => {
                    varargs = true;
                    continue;
                }
                _ => continue,
            }
            let artificial = matches!(attr_followed(unit, off, gimli::DW_AT_artificial), Some(AttributeValue::Flag(true)));
            let ty = match attr_followed(unit, off, gimli::DW_AT_type) {
                Some(AttributeValue::UnitRef(t)) => Some(t),
                Some(_) => return None,
                None => None,
            };
            if artificial {
                if i == 0 {
                    const_this = ty.is_some_and(|t| pointee_is_const(unit, t));
                }
                continue;
            }
            if printed >= MAX_PARAMS {
                return None;
            }
            if printed > 0 {
                out.push_str(", ");
            }
            match ty {
                Some(t) => out.push_str(&self.type_name(unit, t, 0)?),
                None => out.push_str("void"),
            }
            printed += 1;
        }
        match (printed, varargs) {
            (0, true) => out.push_str("..."),
            (0, false) => out.push_str("void"),
            (_, true) => out.push_str(", ..."),
            (_, false) => {}
        }
        out.push(')');
        if const_this {
            out.push_str(" const");
        }
        Some(out)
    }

    /// A type as gdb prints it in a physname: `std::_Index_tuple<0>`, `struct {...} &&`,
    /// `const char *`. `None` for what this does not render (arrays, function types).
    fn type_name(&mut self, unit: Unit<'_, '_>, off: UnitOffset, depth: usize) -> Option<String> {
        if depth > MAX_TYPE_DEPTH {
            return None;
        }
        let key = (unit.header.offset().0, off.0);
        if depth == 0
            && let Some(cached) = self.types.get(&key)
        {
            return cached.clone();
        }
        let entry = unit.entry(off).ok()?;
        let target = match entry.attr_value(gimli::DW_AT_type) {
            Some(AttributeValue::UnitRef(t)) => Some(t),
            Some(_) => return None,
            None => None,
        };
        let inner = |namer: &mut Namer| -> Option<String> {
            match target {
                Some(t) => namer.type_name(unit, t, depth + 1),
                None => Some("void".to_string()),
            }
        };
        let name = match entry.tag() {
            gimli::DW_TAG_base_type | gimli::DW_TAG_unspecified_type => string_attr(unit, &entry, gimli::DW_AT_name),
            tag @ (gimli::DW_TAG_structure_type
            | gimli::DW_TAG_class_type
            | gimli::DW_TAG_union_type
            | gimli::DW_TAG_enumeration_type
            | gimli::DW_TAG_typedef) => match string_attr(unit, &entry, gimli::DW_AT_name) {
                Some(name) => qualify(unit, off, name),
                None => match tag {
                    gimli::DW_TAG_structure_type => Some("struct {...}".into()),
                    gimli::DW_TAG_class_type => Some("class {...}".into()),
                    gimli::DW_TAG_union_type => Some("union {...}".into()),
                    gimli::DW_TAG_enumeration_type => Some("enum {...}".into()),
                    _ => None,
                },
            },
            gimli::DW_TAG_pointer_type => inner(self).map(|i| declarator(i, "*")),
            gimli::DW_TAG_reference_type => inner(self).map(|i| declarator(i, "&")),
            gimli::DW_TAG_rvalue_reference_type => inner(self).map(|i| declarator(i, "&&")),
            tag @ (gimli::DW_TAG_const_type | gimli::DW_TAG_volatile_type) => {
                let q = if tag == gimli::DW_TAG_const_type { "const" } else { "volatile" };
                let inner_is_declarator = target.is_some_and(|t| {
                    unit.entry(t).is_ok_and(|e| {
                        matches!(e.tag(), gimli::DW_TAG_pointer_type | gimli::DW_TAG_reference_type | gimli::DW_TAG_rvalue_reference_type)
                    })
                });
                inner(self).map(|i| if inner_is_declarator { format!("{i} {q}") } else { format!("{q} {i}") })
            }
            _ => None,
        };
        if depth == 0 {
            self.types.insert(key, name.clone());
        }
        name
    }
}

/// `T *`, `T **`, `struct {...} &&`.
fn declarator(inner: String, op: &str) -> String {
    if inner.ends_with('*') || inner.ends_with('&') { format!("{inner}{op}") } else { format!("{inner} {op}") }
}

fn pointee_is_const(unit: Unit<'_, '_>, pointer: UnitOffset) -> bool {
    let Ok(p) = unit.entry(pointer) else { return false };
    if p.tag() != gimli::DW_TAG_pointer_type {
        return false;
    }
    let Some(AttributeValue::UnitRef(t)) = p.attr_value(gimli::DW_AT_type) else { return false };
    unit.entry(t).is_ok_and(|e| e.tag() == gimli::DW_TAG_const_type)
}

/// What gdb's `cp_remove_params` fails on (and so prints as is).
fn gdb_can_parse(physname: &str) -> bool {
    !(physname.contains("<lambda") || physname.contains('{') || physname.contains("<unnamed"))
}

fn string_attr<'p>(unit: Unit<'_, 'p>, entry: &gimli::DebuggingInformationEntry<Reader<'p>>, at: gimli::DwAt) -> Option<String> {
    let v = entry.attr_value(at)?;
    Some(unit.attr_string(v).ok()?.to_string_lossy().into_owned())
}

/// An attribute of `off`, else of the DIE its `DW_AT_abstract_origin` or `DW_AT_specification`
/// names (as gdb's `dwarf2_attr` looks).
fn attr_followed<'p>(unit: Unit<'_, 'p>, off: UnitOffset, at: gimli::DwAt) -> Option<AttributeValue<Reader<'p>>> {
    let mut off = off;
    for _ in 0..MAX_CHAIN {
        let entry = unit.entry(off).ok()?;
        if let Some(v) = entry.attr_value(at) {
            return Some(v);
        }
        match entry.attr_value(gimli::DW_AT_abstract_origin).or_else(|| entry.attr_value(gimli::DW_AT_specification)) {
            Some(AttributeValue::UnitRef(next)) => off = next,
            _ => return None,
        }
    }
    None
}

/// The DIE that holds the function's `DW_AT_name`, and the name.
fn name_of(unit: Unit<'_, '_>, die: UnitOffset) -> Option<(UnitOffset, String)> {
    let mut off = die;
    for _ in 0..MAX_CHAIN {
        let entry = unit.entry(off).ok()?;
        if let Some(name) = string_attr(unit, &entry, gimli::DW_AT_name) {
            return Some((off, name));
        }
        match entry.attr_value(gimli::DW_AT_abstract_origin).or_else(|| entry.attr_value(gimli::DW_AT_specification)) {
            Some(AttributeValue::UnitRef(next)) => off = next,
            _ => return None,
        }
    }
    None
}

/// `name` prefixed by the scopes around `die` (see the module docs).
fn qualify(unit: Unit<'_, '_>, die: UnitOffset, name: String) -> Option<String> {
    let path = ancestors(unit, die)?;
    let mut parts: Vec<String> = Vec::new();
    for &scope in path.iter().rev() {
        let entry = unit.entry(scope).ok()?;
        match entry.tag() {
            gimli::DW_TAG_namespace => {
                parts.push(string_attr(unit, &entry, gimli::DW_AT_name).unwrap_or_else(|| "(anonymous namespace)".into()))
            }
            gimli::DW_TAG_class_type | gimli::DW_TAG_structure_type | gimli::DW_TAG_union_type | gimli::DW_TAG_interface_type => {
                match string_attr(unit, &entry, gimli::DW_AT_name) {
                    Some(n) => parts.push(n),
                    None => break,
                }
            }
            gimli::DW_TAG_enumeration_type => {
                if matches!(entry.attr_value(gimli::DW_AT_enum_class), Some(AttributeValue::Flag(true))) {
                    match string_attr(unit, &entry, gimli::DW_AT_name) {
                        Some(n) => parts.push(n),
                        None => break,
                    }
                }
            }
            gimli::DW_TAG_subprogram | gimli::DW_TAG_compile_unit | gimli::DW_TAG_partial_unit | gimli::DW_TAG_type_unit => break,
            _ => {}
        }
    }
    parts.reverse();
    parts.push(name);
    Some(parts.join("::"))
}

/// The DIEs enclosing `target`, outermost (the unit) first: a descent from the root that skips
/// every sibling subtree before the target.
fn ancestors(unit: Unit<'_, '_>, target: UnitOffset) -> Option<Vec<UnitOffset>> {
    let mut node = {
        let mut tree = unit.entries_tree(None).ok()?;
        let root = tree.root().ok()?;
        root.entry().offset()
    };
    let mut path = Vec::new();
    for _ in 0..MAX_DEPTH {
        if node == target {
            return Some(path);
        }
        path.push(node);
        let mut tree = unit.entries_tree(Some(node)).ok()?;
        let root = tree.root().ok()?;
        let mut children = root.children();
        let mut inside = None;
        while let Some(child) = children.next().ok()? {
            let off = child.entry().offset();
            if off.0 > target.0 {
                break;
            }
            inside = Some(off);
            if off == target {
                break;
            }
        }
        let next = inside?;
        if next.0 <= node.0 {
            return None;
        }
        node = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gdb_parser_limits() {
        assert!(gdb_can_parse("bank::(anonymous namespace)::worker(bank::Account*, bank::Account*)"));
        assert!(gdb_can_parse("operator()(void) const"));
        assert!(!gdb_can_parse("std::thread::_State_impl<std::tuple<main()::<lambda()> > >::_M_run(void)"));
        assert!(!gdb_can_parse("f(struct {...} &&)"));
    }

    #[test]
    fn declarators_follow_gdb_spacing() {
        assert_eq!(declarator("char".into(), "*"), "char *");
        assert_eq!(declarator("char *".into(), "*"), "char **");
        assert_eq!(declarator("struct {...}".into(), "&&"), "struct {...} &&");
    }
}
