//! One unit's DWARF call sites and functions, as gdb reads them for tail-call frames
//! (`read_call_site_scope` and `dwarf2_get_pc_bounds` in gdb's `dwarf2/read.c`).
//!
//! A unit is read once, on the first question about an address in it, and only the little that
//! the tail-call search needs is kept:
//! - every `DW_TAG_call_site` / `DW_TAG_GNU_call_site` by its return address
//!   (`DW_AT_call_return_pc`, or the GNU `DW_AT_low_pc`; the first of duplicates wins), with its
//!   target: `DW_AT_call_target`, `DW_AT_GNU_call_site_target`, `DW_AT_call_origin` or the GNU
//!   `DW_AT_abstract_origin`, the first present. A reference to a declaration is a name (its
//!   linkage name, else its `DW_AT_name`), resolved later through the symbol tables of every
//!   module; to a definition, its `DW_AT_low_pc`, or the start of each of its `DW_AT_ranges`.
//!   A DWARF expression (it needs registers), an empty one, or none, is an unknown target.
//! - every subprogram with code: its ranges, its entry (the low pc, or the first range in DWARF
//!   order, as gdb's `entry_pc`), and its tail calls (`DW_AT_call_tail_call` /
//!   `DW_AT_GNU_tail_call`, those of inlined code included) if, and only if, it claims to list
//!   them all (`DW_AT_call_all_calls`, `DW_AT_call_all_tail_calls` or their GNU forms): gdb
//!   walks only complete lists.
//!
//! Attributes looked up on a target or a function follow `DW_AT_specification` and
//! `DW_AT_abstract_origin`, as gdb's `dwarf2_attr` does, within the unit. References into
//! another unit (`DW_FORM_ref_addr`) are not followed: such a target is unknown, and a chain
//! through it is not claimed. Malformed DWARF anywhere in the unit leaves its index empty.

use super::dwarf::Reader;
use gimli::{AttributeValue, DebuggingInformationEntry, DwAt, UnitOffset, UnitRef};
use rustc_hash::FxHashMap;

type Unit<'a, 'p> = UnitRef<'a, Reader<'p>>;
type Entry<'p> = DebuggingInformationEntry<Reader<'p>>;

/// Links followed from a DIE through `DW_AT_specification` / `DW_AT_abstract_origin`.
const MAX_ORIGIN_CHAIN: usize = 8;
/// Ranges kept per function or target.
const MAX_RANGES: usize = 1024;
/// Ranges starting at or below an address looked at to find the innermost function holding it
/// (more than one only for nested functions).
const MAX_NESTING: usize = 64;

/// Where a call site goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// Not knowable without the caller's registers, or not given.
    Unknown,
    /// Entry addresses (link-time, in this module): one, or one per range of a split function.
    Addresses(Vec<u64>),
    /// A declared function, to find by its symbol name.
    Name(String),
}

#[derive(Debug, Clone)]
struct Function {
    /// Link-time `[start, end)`, in DWARF order.
    ranges: Vec<(u64, u64)>,
    entry: u64,
    /// Return addresses of its tail-call sites (empty unless the list is complete).
    tail_sites: Vec<u64>,
}

/// The call sites and functions of one unit.
#[derive(Debug, Default)]
pub(crate) struct UnitCalls {
    sites: FxHashMap<u64, Target>,
    functions: Vec<Function>,
    /// Every range of every function, `(start, end, index into functions)`, by start.
    by_start: Vec<(u64, u64, usize)>,
}

impl UnitCalls {
    /// Reads `unit`; empty when its DIEs cannot be read.
    pub(crate) fn parse(unit: Unit<'_, '_>) -> UnitCalls {
        read(unit).unwrap_or_default()
    }

    /// The target of the call site returning to `return_pc`; `None` when there is no such site.
    pub(crate) fn site(&self, return_pc: u64) -> Option<&Target> {
        self.sites.get(&return_pc)
    }

    /// The entry of the (innermost, not inlined) function whose code holds `addr`.
    pub(crate) fn entry_of(&self, addr: u64) -> Option<u64> {
        self.function_at(addr).map(|f| f.entry)
    }

    /// The tail-call sites of the function that starts at `entry`; `None` when the function
    /// holding `entry` does not start there (gdb's `func_addr_to_tail_call_list`).
    pub(crate) fn tail_sites(&self, entry: u64) -> Option<&[u64]> {
        self.function_at(entry).filter(|f| f.entry == entry).map(|f| f.tail_sites.as_slice())
    }

    /// The innermost function whose code holds `addr` (gdb's `block_for_pc` then the enclosing
    /// function that is not inlined: nested functions are functions of their own).
    fn function_at(&self, addr: u64) -> Option<&Function> {
        let end = self.by_start.partition_point(|&(s, _, _)| s <= addr);
        let below = &self.by_start[end.saturating_sub(MAX_NESTING)..end];
        let (_, _, index) = below.iter().rev().filter(|&&(_, e, _)| addr < e).min_by_key(|&&(s, e, _)| e - s)?;
        self.functions.get(*index)
    }
}

/// What encloses a DIE, as far as call sites care.
#[derive(Clone, Copy)]
enum Scope {
    /// A subprogram: its index in `functions`, when it has code.
    Function(Option<usize>),
    /// A subroutine type: gdb's search for a call site's function stops there.
    Stop,
    Other,
}

fn read(unit: Unit<'_, '_>) -> Option<UnitCalls> {
    let mut out = UnitCalls::default();
    // Functions whose tail calls are complete.
    let mut complete: Vec<bool> = Vec::new();
    let mut stack: Vec<(isize, Scope)> = Vec::new();
    // Raw entries: only subprograms and call sites are read whole, the other DIEs (types,
    // variables, parameters, inlined code: most of a unit) are skipped by their forms' sizes.
    let mut raw = unit.entries_raw(None).ok()?;
    while !raw.is_empty() {
        let (offset, depth) = (raw.next_offset(), raw.next_depth());
        // A null entry closes a list of children.
        let Some(abbreviation) = raw.read_abbreviation().ok()? else { continue };
        let tag = abbreviation.tag();
        raw.skip_attributes(abbreviation.attributes()).ok()?;
        while stack.last().is_some_and(|&(d, _)| d >= depth) {
            stack.pop();
        }
        let whole = || unit.entry(offset).ok();
        let scope = match tag {
            gimli::DW_TAG_subprogram => {
                let entry = &whole()?;
                let ranges = ranges_of(unit, entry);
                // gdb's entry pc: the start, or for split code the start of the first range.
                let index = ranges.first().copied().map(|(start, _)| {
                    out.functions.push(Function { entry: start, ranges, tail_sites: Vec::new() });
                    complete.push(lists_all_tail_calls(unit, entry));
                    out.functions.len() - 1
                });
                Scope::Function(index)
            }
            gimli::DW_TAG_subroutine_type => Scope::Stop,
            gimli::DW_TAG_call_site | gimli::DW_TAG_GNU_call_site => {
                let entry = &whole()?;
                if let Some(pc) = return_pc(unit, entry)
                    && !out.sites.contains_key(&pc)
                {
                    out.sites.insert(pc, target(unit, entry));
                    let tail = flag(entry, gimli::DW_AT_call_tail_call) || flag(entry, gimli::DW_AT_GNU_tail_call);
                    // The function owning the site: inlined subroutines and blocks are skipped.
                    let owner = stack.iter().rev().find_map(|&(_, s)| match s {
                        Scope::Function(f) => Some(f),
                        Scope::Stop => Some(None),
                        Scope::Other => None,
                    });
                    if tail
                        && let Some(Some(f)) = owner
                        && complete.get(f) == Some(&true)
                        && let Some(func) = out.functions.get_mut(f)
                    {
                        func.tail_sites.push(pc);
                    }
                }
                Scope::Other
            }
            _ => Scope::Other,
        };
        stack.push((depth, scope));
    }
    // gdb links each site in front of the list: last read, first tried.
    for f in &mut out.functions {
        f.tail_sites.reverse();
    }
    out.by_start = out.functions.iter().enumerate().flat_map(|(i, f)| f.ranges.iter().map(move |&(s, e)| (s, e, i))).collect();
    out.by_start.sort_unstable();
    Some(out)
}

fn return_pc<'p>(unit: Unit<'_, 'p>, entry: &Entry<'p>) -> Option<u64> {
    let value = entry.attr_value(gimli::DW_AT_call_return_pc).or_else(|| entry.attr_value(gimli::DW_AT_low_pc))?;
    unit.attr_address(value).ok().flatten()
}

fn target<'p>(unit: Unit<'_, 'p>, site: &Entry<'p>) -> Target {
    let attr = [gimli::DW_AT_call_target, gimli::DW_AT_GNU_call_site_target, gimli::DW_AT_call_origin, gimli::DW_AT_abstract_origin]
        .into_iter()
        .find_map(|name| site.attr_value(name));
    let Some(offset) = attr.as_ref().and_then(|v| unit_ref(unit, v)) else {
        // None, a DWARF expression (empty or not), or a reference out of the unit.
        return Target::Unknown;
    };
    let Ok(die) = unit.entry(offset) else { return Target::Unknown };
    let is_declaration = matches!(followed(unit, &die, gimli::DW_AT_declaration), Some(AttributeValue::Flag(true)))
        && followed(unit, &die, gimli::DW_AT_specification).is_none();
    if is_declaration {
        let name = followed(unit, &die, gimli::DW_AT_linkage_name)
            .or_else(|| followed(unit, &die, gimli::DW_AT_MIPS_linkage_name))
            .or_else(|| followed(unit, &die, gimli::DW_AT_name))
            .and_then(|v| unit.attr_string(v).ok())
            .map(|s| s.to_string_lossy().into_owned());
        return name.filter(|n| !n.is_empty()).map_or(Target::Unknown, Target::Name);
    }
    if let Some(ranges) = followed(unit, &die, gimli::DW_AT_ranges) {
        return Target::Addresses(range_list(unit, ranges).into_iter().map(|(s, _)| s).collect());
    }
    match low_high(unit, &die) {
        Some((low, _)) => Target::Addresses(vec![low]),
        None => Target::Unknown,
    }
}

/// A function's code, as gdb's `dwarf2_get_pc_bounds`: low and high pc, else the ranges.
fn ranges_of<'p>(unit: Unit<'_, 'p>, entry: &Entry<'p>) -> Vec<(u64, u64)> {
    if entry.attr_value(gimli::DW_AT_high_pc).is_some() {
        return low_high(unit, entry).into_iter().collect();
    }
    match entry.attr_value(gimli::DW_AT_ranges) {
        Some(v) => range_list(unit, v),
        None => Vec::new(),
    }
}

/// `DW_AT_low_pc` and `DW_AT_high_pc` (an address, or a length), when they make a range.
fn low_high<'p>(unit: Unit<'_, 'p>, die: &Entry<'p>) -> Option<(u64, u64)> {
    let low = unit.attr_address(followed(unit, die, gimli::DW_AT_low_pc)?).ok()??;
    let high = match followed(unit, die, gimli::DW_AT_high_pc)? {
        AttributeValue::Udata(len) => low.checked_add(len)?,
        v => unit.attr_address(v).ok()??,
    };
    (low != 0 && high > low).then_some((low, high))
}

fn range_list<'p>(unit: Unit<'_, 'p>, value: AttributeValue<Reader<'p>>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let Ok(Some(mut list)) = unit.attr_ranges(value) else { return out };
    while let Ok(Some(r)) = list.next() {
        // Empty ranges count for nothing; one at 0 is taken for bad data, as gdb does.
        if r.begin < r.end && r.begin != 0 {
            out.push((r.begin, r.end));
        }
        if out.len() >= MAX_RANGES {
            break;
        }
    }
    out
}

/// gdb's test for a complete list of tail calls.
fn lists_all_tail_calls<'p>(unit: Unit<'_, 'p>, entry: &Entry<'p>) -> bool {
    [gimli::DW_AT_call_all_calls, gimli::DW_AT_GNU_all_call_sites, gimli::DW_AT_call_all_tail_calls, gimli::DW_AT_GNU_all_tail_call_sites]
        .into_iter()
        .any(|name| matches!(followed(unit, entry, name), Some(AttributeValue::Flag(true))))
}

fn flag(entry: &Entry<'_>, name: DwAt) -> bool {
    matches!(entry.attr_value(name), Some(AttributeValue::Flag(true)))
}

/// `name` on `die`, or on the DIE its `DW_AT_specification` (else `DW_AT_abstract_origin`)
/// refers to, and so on: gdb's `dwarf2_attr`.
fn followed<'p>(unit: Unit<'_, 'p>, die: &Entry<'p>, name: DwAt) -> Option<AttributeValue<Reader<'p>>> {
    if let Some(v) = die.attr_value(name) {
        return Some(v);
    }
    let mut next = origin(unit, die)?;
    for _ in 0..MAX_ORIGIN_CHAIN {
        let e = unit.entry(next).ok()?;
        if let Some(v) = e.attr_value(name) {
            return Some(v);
        }
        next = origin(unit, &e)?;
    }
    None
}

fn origin<'p>(unit: Unit<'_, 'p>, die: &Entry<'p>) -> Option<UnitOffset> {
    let v = die.attr_value(gimli::DW_AT_specification).or_else(|| die.attr_value(gimli::DW_AT_abstract_origin))?;
    unit_ref(unit, &v)
}

/// A reference to a DIE of this unit.
fn unit_ref<'p>(unit: Unit<'_, 'p>, value: &AttributeValue<Reader<'p>>) -> Option<UnitOffset> {
    match *value {
        AttributeValue::UnitRef(o) => Some(o),
        AttributeValue::DebugInfoRef(o) => o.to_unit_offset(&unit.header),
        _ => None,
    }
}
