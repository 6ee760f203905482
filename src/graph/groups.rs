//! Threads with identical stacks, grouped: a convoy of twenty waiters is one stack, shown once.

use std::collections::BTreeMap;

/// Groups thread indices by their stack key (e.g. the frames' instruction pointers), largest
/// group first, then by the lowest index, so the order is stable.
pub(crate) fn group_by_stack<K: Ord + Clone>(keys: &[K]) -> Vec<Vec<usize>> {
    let mut map: BTreeMap<&K, Vec<usize>> = BTreeMap::new();
    for (i, k) in keys.iter().enumerate() {
        map.entry(k).or_default().push(i);
    }
    let mut groups: Vec<Vec<usize>> = map.into_values().collect();
    groups.sort_by(|a, b| b.len().cmp(&a.len()).then(a[0].cmp(&b[0])));
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_stacks_group_and_the_largest_comes_first() {
        let keys = vec![vec![1u64, 2], vec![3], vec![1, 2], vec![1, 2], vec![3], vec![9]];
        assert_eq!(group_by_stack(&keys), vec![vec![0, 2, 3], vec![1, 4], vec![5]]);
    }
}
