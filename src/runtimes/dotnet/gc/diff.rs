//! What grew between two dumps of one program: per type, the count and bytes in each (shallow,
//! as SOS `dumpheap -stat` counts them; retained too when both dumps' object graphs were read),
//! sorted by growth. Types are matched by name: addresses and MethodTables move between
//! processes (a restart), names do not.

use crate::runtimes::dotnet::gc::stats::HeapStats;
use std::collections::BTreeMap;

/// A top holder as `knot heap diff` matches it between dumps: by its root and its path's types
/// and fields, never by address (a restart moves every object; an array element's index is
/// left out too: it moves as the array fills).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HolderByPath {
    /// `static SessionCache.s_all`, or the root's kind (`strong_handle`, `stack`, …).
    pub root: String,
    /// From the root's object to the holder: `Type.field`, `Type[]` for an array element.
    pub path: Vec<String>,
    /// The holder's type, as SOS's heap commands name it.
    pub type_name: String,
    pub retained: u64,
}

/// A holder (a top holder of either dump) matched by its root path in both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HolderGrowth {
    pub root: String,
    pub path: Vec<String>,
    pub type_name: String,
    /// Holders of this root path among the dump's top holders, and what they retain together;
    /// `None` when none was among them.
    pub old_retained: Option<u64>,
    pub new_retained: Option<u64>,
    pub old_holders: usize,
    pub new_holders: usize,
}

impl HolderGrowth {
    /// `new - old`, a dump without it among its top holders counting 0.
    pub(crate) fn retained_growth(&self) -> i64 {
        delta(self.old_retained.unwrap_or(0), self.new_retained.unwrap_or(0))
    }
}

/// The top holders of two dumps matched by root path (root, path, type), the largest growth of
/// retained bytes first (then by root and path).
pub(crate) fn holders(old: &[HolderByPath], new: &[HolderByPath]) -> Vec<HolderGrowth> {
    let mut by_path: BTreeMap<(&str, &[String], &str), HolderGrowth> = BTreeMap::new();
    for (side, list) in [(0, old), (1, new)] {
        for h in list {
            let g = by_path.entry((&h.root, &h.path, &h.type_name)).or_insert_with(|| HolderGrowth {
                root: h.root.clone(),
                path: h.path.clone(),
                type_name: h.type_name.clone(),
                old_retained: None,
                new_retained: None,
                old_holders: 0,
                new_holders: 0,
            });
            let (bytes, count) = if side == 0 { (&mut g.old_retained, &mut g.old_holders) } else { (&mut g.new_retained, &mut g.new_holders) };
            *bytes = Some(bytes.unwrap_or(0).saturating_add(h.retained));
            *count += 1;
        }
    }
    let mut out: Vec<HolderGrowth> = by_path.into_values().collect();
    out.sort_by(|a, b| b.retained_growth().cmp(&a.retained_growth()).then_with(|| (&a.root, &a.path).cmp(&(&b.root, &b.path))));
    out
}

/// One type in both dumps (a type absent from one counts 0 there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TypeGrowth {
    /// As SOS `dumpheap -stat` names it.
    pub name: String,
    pub old_count: u64,
    pub new_count: u64,
    pub old_bytes: u64,
    pub new_bytes: u64,
    /// Retained bytes of the type (MAT's dominator tree grouped by class) in each dump; `None`
    /// when that dump's object graph was not read.
    pub old_retained: Option<u64>,
    pub new_retained: Option<u64>,
}

impl TypeGrowth {
    pub(crate) fn count_growth(&self) -> i64 {
        delta(self.old_count, self.new_count)
    }

    pub(crate) fn bytes_growth(&self) -> i64 {
        delta(self.old_bytes, self.new_bytes)
    }

    pub(crate) fn retained_growth(&self) -> Option<i64> {
        Some(delta(self.old_retained?, self.new_retained?))
    }
}

/// `new - old`, saturated to i64.
pub(crate) fn delta(old: u64, new: u64) -> i64 {
    if new >= old {
        i64::try_from(new - old).unwrap_or(i64::MAX)
    } else {
        i64::try_from(old - new).map(|d| -d).unwrap_or(i64::MIN)
    }
}

/// The two heaps compared type by type.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct HeapDiff {
    pub old_objects: u64,
    pub new_objects: u64,
    pub old_bytes: u64,
    pub new_bytes: u64,
    /// Every type of either heap: the largest growth in bytes first (retained when both have it,
    /// else shallow), then the largest growth in count, then by name; types that shrank last.
    pub types: Vec<TypeGrowth>,
    /// The top holders of either dump matched by root path, largest retained growth first;
    /// empty unless both dumps' object graphs were read.
    pub holders: Vec<HolderGrowth>,
}

/// One dump's retained bytes by type name, when its object graph was read.
pub(crate) type RetainedByType<'a> = Option<&'a BTreeMap<String, u64>>;

/// Compares two heaps' statistics by type name. `retained` gives, per dump, the retained bytes
/// by type name when its object graph was read.
pub(crate) fn diff(old: &HeapStats, new: &HeapStats, retained: (RetainedByType, RetainedByType)) -> HeapDiff {
    // Two MethodTables of one name (a type loaded in two contexts) count as one type, as a
    // person comparing `dumpheap -stat` outputs would.
    let mut by_name: BTreeMap<&str, TypeGrowth> = BTreeMap::new();
    let blank = |name: &str| TypeGrowth { name: name.to_string(), old_count: 0, new_count: 0, old_bytes: 0, new_bytes: 0, old_retained: None, new_retained: None };
    for t in &old.types {
        let g = by_name.entry(&t.name).or_insert_with(|| blank(&t.name));
        g.old_count += t.count;
        g.old_bytes += t.bytes;
    }
    for t in &new.types {
        let g = by_name.entry(&t.name).or_insert_with(|| blank(&t.name));
        g.new_count += t.count;
        g.new_bytes += t.bytes;
    }
    let (old_r, new_r) = retained;
    let mut types: Vec<TypeGrowth> = by_name
        .into_values()
        .map(|mut g| {
            // Both graphs read: a type absent from one retains nothing there.
            if let (Some(o), Some(n)) = (old_r, new_r) {
                g.old_retained = Some(o.get(&g.name).copied().unwrap_or(0));
                g.new_retained = Some(n.get(&g.name).copied().unwrap_or(0));
            }
            g
        })
        .collect();
    types.sort_by(|a, b| {
        let key = |g: &TypeGrowth| g.retained_growth().unwrap_or_else(|| g.bytes_growth());
        key(b).cmp(&key(a)).then(b.bytes_growth().cmp(&a.bytes_growth())).then(b.count_growth().cmp(&a.count_growth())).then_with(|| a.name.cmp(&b.name))
    });
    HeapDiff { old_objects: old.total_objects, new_objects: new.total_objects, old_bytes: old.total_bytes, new_bytes: new.total_bytes, types, holders: Vec::new() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::dotnet::gc::stats::TypeStat;

    fn stats(types: &[(&str, u64, u64, u64)]) -> HeapStats {
        HeapStats {
            total_objects: types.iter().map(|t| t.2).sum(),
            total_bytes: types.iter().map(|t| t.3).sum(),
            free_bytes: 0,
            skipped_objects: 0,
            skipped_bytes: 0,
            types: types.iter().map(|&(n, mt, c, b)| TypeStat { name: n.into(), method_table: mt, count: c, bytes: b }).collect(),
        }
    }

    #[test]
    fn types_match_by_name_not_method_table_and_sort_by_growth() {
        let old = stats(&[("Session", 0x100, 10, 1000), ("System.String", 0x200, 5, 100), ("Gone", 0x300, 1, 24)]);
        let new = stats(&[("Session", 0x900, 30, 3000), ("System.String", 0x800, 6, 120), ("New", 0x700, 2, 48)]);
        let d = diff(&old, &new, (None, None));
        let names: Vec<&str> = d.types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["Session", "New", "System.String", "Gone"]);
        assert_eq!(d.types[0].bytes_growth(), 2000);
        assert_eq!(d.types[0].count_growth(), 20);
        assert_eq!(d.types[3].bytes_growth(), -24);
        assert_eq!(d.types[3].new_count, 0);
        assert_eq!(d.types[0].retained_growth(), None);
        assert_eq!((d.old_bytes, d.new_bytes), (1124, 3168));
    }

    #[test]
    fn retained_growth_orders_when_both_graphs_were_read() {
        let old = stats(&[("A", 1, 1, 100), ("B", 2, 1, 100)]);
        let new = stats(&[("A", 1, 1, 200), ("B", 2, 1, 150)]);
        let o = BTreeMap::from([("A".to_string(), 100), ("B".to_string(), 100)]);
        let n = BTreeMap::from([("A".to_string(), 200), ("B".to_string(), 5000)]);
        let d = diff(&old, &new, (Some(&o), Some(&n)));
        assert_eq!(d.types[0].name, "B");
        assert_eq!(d.types[0].retained_growth(), Some(4900));
        // One graph only: no retained column.
        let d = diff(&old, &new, (Some(&o), None));
        assert_eq!(d.types[0].name, "A");
        assert_eq!(d.types[0].old_retained, None);
    }

    #[test]
    fn holders_match_by_root_path_never_by_address() {
        let h = |root: &str, path: &[&str], retained| HolderByPath { root: root.into(), path: path.iter().map(|s| s.to_string()).collect(), type_name: path.last().unwrap_or(&"").to_string(), retained };
        let old = [h("static Cache.s_all", &["Dict"], 1000), h("strong_handle", &["Byte[]"], 50), h("strong_handle", &["Byte[]"], 50)];
        let new = [h("static Cache.s_all", &["Dict"], 5000), h("strong_handle", &["Byte[]"], 60), h("stack", &["List"], 10)];
        let d = holders(&old, &new);
        assert_eq!(d[0].root, "static Cache.s_all");
        assert_eq!((d[0].old_retained, d[0].new_retained, d[0].retained_growth()), (Some(1000), Some(5000), 4000));
        assert_eq!(d[1].root, "stack");
        assert_eq!((d[1].old_retained, d[1].retained_growth()), (None, 10));
        // Two holders of one root path add up.
        assert_eq!((d[2].old_holders, d[2].old_retained, d[2].new_retained, d[2].retained_growth()), (2, Some(100), Some(60), -40));
    }

    #[test]
    fn delta_saturates() {
        assert_eq!(delta(0, u64::MAX), i64::MAX);
        assert_eq!(delta(u64::MAX, 0), i64::MIN);
        assert_eq!(delta(5, 3), -2);
    }
}
