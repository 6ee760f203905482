//! Typed view of `samples/native/expected.toml` (schema documented there).

use anyhow::{Context, Result};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    pub total_threads: usize,
    #[serde(default)]
    pub scaled_role: Option<String>,
    #[serde(default)]
    pub recursion_depth: Option<u32>,
    /// role -> number of threads
    pub threads: BTreeMap<String, usize>,
    pub cycles: Vec<Vec<String>>,
    /// The verdict (its JSON name), when the sample is there for it.
    #[serde(default)]
    pub verdict: Option<String>,
    #[serde(default)]
    pub locks: Vec<ExpectedLock>,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ExpectedLock {
    #[serde(default)]
    pub symbol: Option<String>,
    pub kind: String,
    #[serde(default)]
    pub mutex_type: Option<String>,
    #[serde(default)]
    pub owner: Option<String>,
    #[serde(default)]
    pub owner_recorded: Option<bool>,
    #[serde(default)]
    pub owner_gone: bool,
    #[serde(default)]
    pub inconsistent: bool,
    #[serde(default)]
    pub recursion: Option<u32>,
    #[serde(default)]
    pub shared_owners: BTreeMap<String, usize>,
    #[serde(default)]
    pub waiters: BTreeMap<String, usize>,
    #[serde(default)]
    pub wait_mode: Option<String>,
    #[serde(default)]
    pub mutex: Option<String>,
    #[serde(default)]
    pub in_signal_handler: bool,
    /// The owner is a thread of another process (a process-shared lock).
    #[serde(default)]
    pub owner_process: bool,
    /// A barrier: the threads that arrived, of how many it waits for.
    #[serde(default)]
    pub arrived: Option<u32>,
    #[serde(default)]
    pub parties: Option<u32>,
}

impl ExpectedLock {
    /// Whether the lock word names its owner (see the schema's default).
    pub fn owner_is_recorded(&self) -> bool {
        self.owner_recorded.unwrap_or(self.owner.is_some())
    }
}

/// Every sample's expectations, by sample name.
pub fn load() -> Result<BTreeMap<String, Expected>> {
    toml::from_str(crate::expected_toml()).context("parsing samples/native/expected.toml")
}

/// The expectations for one sample.
pub fn for_sample(name: &str) -> Result<Expected> {
    load()?
        .remove(name)
        .with_context(|| format!("expected.toml has no [{name}]"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_every_sample_consistently() {
        let all = load().unwrap();
        for spec in crate::native_samples().iter().chain(crate::crash_samples()) {
            let e = all
                .get(spec.name)
                .unwrap_or_else(|| panic!("no [{}] in expected.toml", spec.name));
            assert_eq!(
                e.threads.values().sum::<usize>(),
                e.total_threads,
                "{}",
                spec.name
            );
            let known = |r: &String| e.threads.contains_key(r);
            for l in &e.locks {
                assert!(
                    ["mutex", "rwlock", "cond", "sem", "join", "rust-mutex", "barrier"]
                        .contains(&l.kind.as_str()),
                    "{}: kind {}",
                    spec.name,
                    l.kind
                );
                // A join has no symbol; any other lock is named by its global, except a lock
                // on the heap, which has none (rwlock_queued_reader's).
                if l.kind == "join" {
                    assert!(l.symbol.is_none(), "{}: a join with a symbol", spec.name);
                }
                assert!(
                    l.owner.iter().all(known),
                    "{}: owner {:?}",
                    spec.name,
                    l.owner
                );
                assert!(
                    l.waiters.keys().chain(l.shared_owners.keys()).all(known),
                    "{}",
                    spec.name
                );
            }
            for c in &e.cycles {
                assert!(
                    !c.is_empty() && c.iter().all(known),
                    "{}: cycle {c:?}",
                    spec.name
                );
            }
        }
        assert_eq!(
            all.len(),
            crate::native_samples().len() + crate::crash_samples().len(),
            "expected.toml has extra samples"
        );
    }
}
