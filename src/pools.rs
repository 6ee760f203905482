//! Pools of resources (issue 40, item 3): a framework's connection or object pool, read by the
//! rules in `analyzers/pools.toml` (data, compiled in) — the pool's maximum and counts, each
//! item and who has it, and the threads waiting for an item. A waiter waits for the pool, the pool
//! for its items' holders (any one returning an item releases a waiter): the wait-for graph's
//! edges, in the pool's own words.
//!
//! Who has an item is never recorded by a pool: an item's lease (the object its user keeps, an
//! `NpgsqlConnection`) on one thread's frames makes that thread its holder — inferred, with the
//! frame as the evidence. The engine reads through [`PoolSource`], which a runtime implements over
//! its heap and stacks (.NET: `runtimes::dotnet::threads::pool_waits`).

use crate::waits::Release;
use serde::Deserialize;
use std::sync::OnceLock;

const FILE: &str = "analyzers/pools.toml";
const TEXT: &str = include_str!("../analyzers/pools.toml");

/// Items read per pool at most (a pool's slots array is as long as its maximum).
const MAX_ITEMS: usize = 4096;

/// One pool's rule.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PoolRule {
    pub(crate) framework: String,
    pub(crate) key: String,
    pub(crate) name: String,
    pub(crate) item: String,
    pub(crate) items: String,
    #[serde(rename = "type")]
    pub(crate) type_name: String,
    pub(crate) max: String,
    pub(crate) count: String,
    pub(crate) idle: String,
    pub(crate) slots: String,
    pub(crate) item_type: String,
    pub(crate) lease: String,
    pub(crate) waiter_frames: Vec<String>,
    pub(crate) waiter_prefixes: Vec<String>,
    pub(crate) release: Release,
}

impl PoolRule {
    /// Whether a thread with these frames (function names, innermost first) waits for an item.
    pub(crate) fn is_waiter(&self, functions: &[&str]) -> bool {
        functions.iter().any(|f| self.waiter_frames.iter().any(|w| w == f) || self.waiter_prefixes.iter().any(|p| f.starts_with(p.as_str())))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Pools {
    pub(crate) pool: Vec<PoolRule>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum PoolsError {
    #[error("analyzer data {FILE}: {0}")]
    Parse(String),
    #[error("analyzer data {FILE}: pool {0} has no waiter frames or prefixes")]
    NoWaiterFrames(String),
    #[error("analyzer data {FILE}: pool key {0} is used twice")]
    DuplicateKey(String),
}

impl Pools {
    /// The built-in rules, parsed and checked once.
    pub(crate) fn builtin() -> Result<&'static Pools, &'static PoolsError> {
        static DATA: OnceLock<Result<Pools, PoolsError>> = OnceLock::new();
        DATA.get_or_init(|| Pools::parse(TEXT)).as_ref()
    }

    fn parse(text: &str) -> Result<Pools, PoolsError> {
        let pools: Pools = toml::from_str(text).map_err(|e| PoolsError::Parse(e.to_string()))?;
        for (i, p) in pools.pool.iter().enumerate() {
            if p.waiter_frames.is_empty() && p.waiter_prefixes.is_empty() {
                return Err(PoolsError::NoWaiterFrames(p.key.clone()));
            }
            if pools.pool[..i].iter().any(|q| q.key == p.key) {
                return Err(PoolsError::DuplicateKey(p.key.clone()));
            }
        }
        Ok(pools)
    }
}

/// A thread's frame that keeps an object: where the evidence for an inferred holder is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Keeping {
    pub(crate) tid: u32,
    /// The stack slot (or register's place) holding the object's address.
    pub(crate) at: u64,
    /// The managed frame whose stack range holds that slot, as the report names it.
    pub(crate) frame: Option<String>,
}

/// What the engine reads of a runtime's heap and threads. Every answer comes from the dump;
/// `None` means it could not be read.
pub(crate) trait PoolSource {
    /// Every object whose type is `type_name` (as SOS prints it).
    fn objects_of(&self, type_name: &str) -> Vec<u64>;
    /// An integer field of an object.
    fn int_field(&self, object: u64, field: &str) -> Option<i64>;
    /// A reference field of an object (`Some(0)`: null).
    fn ref_field(&self, object: u64, field: &str) -> Option<u64>;
    /// Whether the object at `object` is of the type `type_name` (as SOS prints it).
    fn is_a(&self, object: u64, type_name: &str) -> bool;
    /// The elements of a reference array (0 for null ones), at most `limit`.
    fn array_elements(&self, array: u64, limit: usize) -> Option<Vec<u64>>;
    /// The threads whose frames keep `object`.
    fn kept_by(&self, object: u64) -> Vec<Keeping>;
}

/// Who has one of a pool's items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ItemHolder {
    /// Idle in the pool: its lease is null.
    Idle,
    /// The one thread whose frames keep its lease.
    Inferred(Keeping),
    /// Leased, but no thread's frames, or several, keep the lease.
    Unknown { lease: u64, candidates: Vec<u32> },
}

/// One item of a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ItemReading {
    pub(crate) item: u64,
    pub(crate) holder: ItemHolder,
}

/// One pool, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PoolReading {
    /// The rule's key (`npgsql_connection_pool`).
    pub(crate) key: String,
    pub(crate) object: u64,
    pub(crate) max: Option<i64>,
    pub(crate) count: Option<i64>,
    pub(crate) idle: Option<i64>,
    pub(crate) items: Vec<ItemReading>,
    /// Threads waiting for an item, ascending.
    pub(crate) waiters: Vec<u32>,
    pub(crate) release: Release,
}

impl PoolReading {
    /// The threads that hold an item (inferred), ascending: the pool's edges.
    #[cfg(test)]
    pub(crate) fn holders(&self) -> Vec<u32> {
        let mut t: Vec<u32> = self.items.iter().filter_map(|i| if let ItemHolder::Inferred(k) = &i.holder { Some(k.tid) } else { None }).collect();
        t.sort_unstable();
        t.dedup();
        t
    }

    /// Every item is leased and each one's holder is known: nothing idle, nobody unaccounted
    /// for. Only then can the pool's holders stand for who must act.
    pub(crate) fn exhausted_and_accounted(&self) -> bool {
        self.max.is_some_and(|m| m > 0 && self.count == Some(m))
            && self.idle == Some(0)
            && !self.items.is_empty()
            && self.items.iter().all(|i| matches!(i.holder, ItemHolder::Inferred(_)))
    }
}

/// Reads every pool the rules know. `waiting`: each thread's tid and function names (innermost
/// first) — a thread waiting for a rule's item is a waiter of that rule's pool when there is one
/// such pool, or of the one its frames keep.
pub(crate) fn read(rules: &Pools, source: &dyn PoolSource, waiting: &[(u32, Vec<&str>)]) -> Vec<PoolReading> {
    let mut out = Vec::new();
    for rule in &rules.pool {
        let objects = source.objects_of(&rule.type_name);
        let waiters: Vec<u32> = waiting.iter().filter(|(_, f)| rule.is_waiter(f)).map(|(t, _)| *t).collect();
        for &object in &objects {
            let items = source
                .ref_field(object, &rule.slots)
                .filter(|&a| a != 0)
                .and_then(|a| source.array_elements(a, MAX_ITEMS))
                .unwrap_or_default()
                .into_iter()
                .filter(|&i| i != 0 && source.is_a(i, &rule.item_type))
                .map(|item| ItemReading { item, holder: holder(rule, source, item) })
                .collect();
            let mut mine: Vec<u32> = if objects.len() == 1 {
                waiters.clone()
            } else {
                let keepers: Vec<u32> = source.kept_by(object).iter().map(|k| k.tid).collect();
                waiters.iter().copied().filter(|t| keepers.contains(t)).collect()
            };
            mine.sort_unstable();
            out.push(PoolReading {
                key: rule.key.clone(),
                object,
                max: source.int_field(object, &rule.max),
                count: source.int_field(object, &rule.count),
                idle: source.int_field(object, &rule.idle),
                items,
                waiters: mine,
                release: rule.release,
            });
        }
    }
    out
}

fn holder(rule: &PoolRule, source: &dyn PoolSource, item: u64) -> ItemHolder {
    match source.ref_field(item, &rule.lease) {
        Some(0) => ItemHolder::Idle,
        None => ItemHolder::Unknown { lease: 0, candidates: Vec::new() },
        Some(lease) => {
            let mut keepers = source.kept_by(lease);
            keepers.sort_by_key(|k| k.tid);
            keepers.dedup_by_key(|k| k.tid);
            match keepers.as_slice() {
                [one] => ItemHolder::Inferred(one.clone()),
                _ => ItemHolder::Unknown { lease, candidates: keepers.iter().map(|k| k.tid).collect() },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A pool of four connections, four threads each keeping one, a fifth waiting: the
    /// npgsql_pool sample's shape.
    #[derive(Default)]
    struct Fake {
        types: HashMap<&'static str, Vec<u64>>,
        ints: HashMap<(u64, &'static str), i64>,
        refs: HashMap<(u64, &'static str), u64>,
        arrays: HashMap<u64, Vec<u64>>,
        kept: HashMap<u64, Vec<Keeping>>,
    }

    impl PoolSource for Fake {
        fn objects_of(&self, t: &str) -> Vec<u64> {
            self.types.get(t).cloned().unwrap_or_default()
        }
        fn int_field(&self, o: u64, f: &str) -> Option<i64> {
            self.ints.iter().find(|((a, n), _)| *a == o && *n == f).map(|(_, v)| *v)
        }
        fn ref_field(&self, o: u64, f: &str) -> Option<u64> {
            self.refs.iter().find(|((a, n), _)| *a == o && *n == f).map(|(_, v)| *v)
        }
        fn is_a(&self, o: u64, t: &str) -> bool {
            self.types.get(t).is_some_and(|v| v.contains(&o))
        }
        fn array_elements(&self, a: u64, limit: usize) -> Option<Vec<u64>> {
            self.arrays.get(&a).map(|v| v.iter().copied().take(limit).collect())
        }
        fn kept_by(&self, o: u64) -> Vec<Keeping> {
            self.kept.get(&o).cloned().unwrap_or_default()
        }
    }

    fn npgsql_like(leases: &[Option<u32>]) -> Fake {
        let mut f = Fake::default();
        let pool = 0x1000;
        f.types.insert("Npgsql.PoolingDataSource", vec![pool]);
        f.ints.insert((pool, "<MaxConnections>k__BackingField"), 4);
        f.ints.insert((pool, "_numConnectors"), leases.len() as i64);
        f.ints.insert((pool, "_idleCount"), leases.iter().filter(|l| l.is_none()).count() as i64);
        f.refs.insert((pool, "Connectors"), 0x2000);
        let mut slots = Vec::new();
        for (i, l) in leases.iter().enumerate() {
            let item = 0x3000 + i as u64 * 0x100;
            slots.push(item);
            f.types.entry("Npgsql.Internal.NpgsqlConnector").or_default().push(item);
            let lease = l.map_or(0, |_| 0x4000 + i as u64 * 0x100);
            f.refs.insert((item, "<Connection>k__BackingField"), lease);
            if let Some(tid) = l {
                f.kept.insert(lease, vec![Keeping { tid: *tid, at: 0x7000 + i as u64, frame: Some("Program.PostToLedger".into()) }]);
            }
        }
        f.arrays.insert(0x2000, slots);
        f
    }

    #[test]
    fn the_built_in_table_parses() {
        let pools = Pools::builtin().expect("analyzers/pools.toml parses");
        assert!(pools.pool.iter().any(|p| p.key == "npgsql_connection_pool" && p.release == Release::Any));
    }

    #[test]
    fn four_held_connections_and_a_waiter_read_as_the_pools_edges() {
        let pools = Pools::builtin().expect("parses");
        let f = npgsql_like(&[Some(11), Some(12), Some(13), Some(14)]);
        let waiting = vec![(15, vec!["System.Threading.ManualResetEventSlim.Wait", "Npgsql.PoolingDataSource+<<Get>g__RentAsync|33_0>d.MoveNext"]), (11, vec!["System.Threading.Monitor.Enter"])];
        let r = read(pools, &f, &waiting);
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].max, r[0].count, r[0].idle), (Some(4), Some(4), Some(0)));
        assert_eq!(r[0].holders(), vec![11, 12, 13, 14]);
        assert_eq!(r[0].waiters, vec![15]);
        assert!(r[0].exhausted_and_accounted());
    }

    #[test]
    fn an_idle_connection_means_the_pool_is_not_exhausted() {
        let pools = Pools::builtin().expect("parses");
        let r = read(pools, &npgsql_like(&[Some(11), None, Some(13), Some(14)]), &[]);
        assert_eq!(r[0].items[1].holder, ItemHolder::Idle);
        assert!(!r[0].exhausted_and_accounted());
    }

    #[test]
    fn a_slot_holding_another_type_is_no_item() {
        let pools = Pools::builtin().expect("parses");
        let mut f = npgsql_like(&[Some(11), Some(12)]);
        f.types.insert("Npgsql.Internal.NpgsqlConnector", vec![0x3000]);
        let r = read(pools, &f, &[]);
        assert_eq!(r[0].items.len(), 1);
        assert_eq!(r[0].holders(), vec![11]);
    }

    #[test]
    fn a_lease_no_frame_keeps_leaves_its_holder_unknown() {
        let pools = Pools::builtin().expect("parses");
        let mut f = npgsql_like(&[Some(11), Some(12), Some(13), Some(14)]);
        f.kept.remove(&0x4100);
        let r = read(pools, &f, &[]);
        assert_eq!(r[0].items[1].holder, ItemHolder::Unknown { lease: 0x4100, candidates: vec![] });
        assert_eq!(r[0].holders(), vec![11, 13, 14]);
        assert!(!r[0].exhausted_and_accounted(), "a holder unaccounted for is no ground for a deadlock");
    }

    /// The Npgsql rule's names are the real ones: the fields SOS's dumpclass lists for the pool,
    /// the connector's reference SOS's dumpobjgcrefs names, the waiting thread's frames in SOS's
    /// clrstack — all of samples/dotnet/npgsql_pool's dump.
    #[test]
    fn the_npgsql_rule_names_what_sos_read_in_the_sample() {
        let sos = |f: &str| std::fs::read_to_string(format!("{}/samples/dotnet/dumps/npgsql_pool/heap/sos/{f}", env!("CARGO_MANIFEST_DIR"))).expect("the sample's SOS reading");
        let rule = Pools::builtin().expect("parses").pool.iter().find(|p| p.key == "npgsql_connection_pool").expect("the rule");
        let pool = sos("pool.txt");
        assert!(pool.contains(&rule.type_name), "{}", rule.type_name);
        for field in [&rule.max, &rule.count, &rule.idle, &rule.slots] {
            assert!(pool.lines().any(|l| l.split_whitespace().last() == Some(field.as_str()) && l.contains("instance")), "PoolingDataSource has no field {field}");
        }
        let connectors = sos("connectors.txt");
        assert!(connectors.contains(&rule.item_type), "{}", rule.item_type);
        assert!(connectors.lines().any(|l| l.starts_with(rule.lease.as_str()) && l.trim_end().ends_with("Npgsql.NpgsqlConnection")), "NpgsqlConnector has no {}", rule.lease);
        let stacks = sos("clrstack-all.txt");
        let reconciler: Vec<&str> = stacks
            .split("OS Thread Id:")
            .find(|t| t.contains("OpenForReconcile"))
            .expect("the waiting thread's stack")
            .lines()
            .filter_map(|l| l.split_whitespace().nth(2))
            .map(|f| f.split('(').next().unwrap_or(f))
            .collect();
        assert!(rule.is_waiter(&reconciler), "{reconciler:?}");
        let requests: Vec<&str> = stacks.split("OS Thread Id:").filter(|t| t.contains("PostToLedger")).flat_map(|t| t.lines().filter_map(|l| l.split_whitespace().nth(2))).collect();
        assert!(!requests.is_empty() && !rule.is_waiter(&requests), "a holder waiting for a Monitor is no waiter of the pool");
    }

    #[test]
    fn a_table_without_waiter_frames_is_refused() {
        let text = TEXT.replace("waiter_frames = [\"Npgsql.PoolingDataSource.Get\"]", "waiter_frames = []").replace("waiter_prefixes = [\"Npgsql.PoolingDataSource+<<Get>g__RentAsync|\"]", "waiter_prefixes = []");
        assert!(matches!(Pools::parse(&text), Err(PoolsError::NoWaiterFrames(k)) if k == "npgsql_connection_pool"));
    }
}
