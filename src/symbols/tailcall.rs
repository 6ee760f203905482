//! gdb's tail-call frames: the functions that jumped (rather than called) on the way from a
//! caller's call site to the function its callee frame is in, found from DWARF call sites.
//!
//! A function that ends in a tail call leaves no frame: its callee returns straight to its
//! caller. gdb (`dwarf2/frame-tailcall.c`, `call_site_find_chain` in `dwarf2/loc.c`) puts such
//! functions back as frames of their own when the DWARF says unambiguously which they were:
//! 1. The callee's function start (gdb's `get_pc_function_start`) is the target to reach.
//! 2. The caller's call site is the one whose return address is the caller frame's pc; none
//!    (as at `-O0`, where gcc writes no call sites) means no tail-call frames.
//! 3. From a call site, each of its target addresses: if one is the target, the sites walked so
//!    far are a chain. Otherwise each target must be the exact entry of a function, and each of
//!    that function's tail-call sites (only functions that list all their tail calls have any)
//!    not already on the path is walked in turn, depth first.
//! 4. Every chain found is intersected with the first: only the callers common to all (from the
//!    outer end) and the callees common to all (from the inner end) are kept. When nothing is
//!    common, or any step cannot be resolved (an unknown target, a target that is not a
//!    function's entry), there are no tail-call frames at all.
//!
//! gdb has no bound on the walk; here a chain deeper than [`MAX_DEPTH`] or a walk of more than
//! [`MAX_STEPS`] sites claims nothing, so crafted DWARF cannot make it slow.

use rustc_hash::FxHashSet;

/// Sites on one path at most.
pub(crate) const MAX_DEPTH: usize = 32;
/// Sites visited in one search at most.
pub(crate) const MAX_STEPS: usize = 4096;

/// The call graph the search walks, in runtime addresses. A site is named by its return
/// address (for a tail call, the address after the jump).
pub(crate) trait CallGraph {
    /// The entry addresses the call site returning to `site` may go to; `None` when there is no
    /// such site or its target cannot be known.
    fn targets(&self, site: u64) -> Option<Vec<u64>>;
    /// The tail-call sites of the function whose entry is exactly `entry` (empty when it does
    /// not list all its tail calls); `None` when no function starts there.
    fn tail_sites(&self, entry: u64) -> Option<Vec<u64>>;
}

/// The tail-call sites between the call site returning to `caller_pc` and the function
/// starting at `callee_entry`, innermost first: one frame each. Empty when the caller calls
/// the callee's function directly, or when no unambiguous chain exists.
pub(crate) fn find_chain(graph: &impl CallGraph, caller_pc: u64, callee_entry: u64) -> Vec<u64> {
    let mut search = Search { graph, callee: callee_entry, path: Vec::new(), on_path: FxHashSet::default(), result: None, steps: 0 };
    match search.visit(caller_pc) {
        Ok(_) => search.result.map(|r| r.frames()).unwrap_or_default(),
        Err(Abort) => Vec::new(),
    }
}

/// The search cannot be resolved (gdb's `NO_ENTRY_VALUE_ERROR`), or went past the bounds.
struct Abort;

/// The chain kept so far: the first one found, of which `callers` sites from the outer end and
/// `callees` from the inner end are common to every chain.
struct Chain {
    sites: Vec<u64>,
    callers: usize,
    callees: usize,
}

impl Chain {
    /// gdb's `pretended_chain_levels` and `pretend_pc`: innermost first.
    fn frames(&self) -> Vec<u64> {
        let len = self.sites.len();
        let mut out: Vec<u64> = self.sites[len - self.callees..].iter().rev().copied().collect();
        if self.callees != len {
            out.extend(self.sites[..self.callers].iter().rev());
        }
        out
    }
}

struct Search<'g, G> {
    graph: &'g G,
    callee: u64,
    /// The tail-call sites walked, outermost first (the caller's own site is not in it).
    path: Vec<u64>,
    on_path: FxHashSet<u64>,
    result: Option<Chain>,
    steps: usize,
}

impl<G: CallGraph> Search<'_, G> {
    /// gdb's `call_site_find_chain_2`: `Ok(false)` once the chains found are ambiguous.
    fn visit(&mut self, site: u64) -> Result<bool, Abort> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(Abort);
        }
        let targets = self.graph.targets(site).ok_or(Abort)?;
        if targets.contains(&self.callee) {
            self.candidate();
            return Ok(self.result.is_some());
        }
        for target in targets {
            for next in self.graph.tail_sites(target).ok_or(Abort)? {
                if !self.on_path.insert(next) {
                    continue;
                }
                if self.path.len() >= MAX_DEPTH {
                    return Err(Abort);
                }
                self.path.push(next);
                if !self.visit(next)? {
                    return Ok(false);
                }
                self.path.pop();
                self.on_path.remove(&next);
            }
        }
        Ok(true)
    }

    /// gdb's `chain_candidate`.
    fn candidate(&mut self) {
        let chain = &self.path;
        let Some(result) = &mut self.result else {
            self.result = Some(Chain { sites: chain.clone(), callers: chain.len(), callees: chain.len() });
            return;
        };
        let callers = result.callers.min(chain.len());
        result.callers = (0..callers).find(|&i| result.sites[i] != chain[i]).unwrap_or(result.callers);
        let len = result.sites.len();
        let callees = result.callees.min(chain.len());
        result.callees = (0..callees).find(|&i| result.sites[len - 1 - i] != chain[chain.len() - 1 - i]).unwrap_or(result.callees);
        if result.callers == 0 && result.callees == 0 {
            self.result = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashMap;

    /// Functions by entry; sites by return address. A site's target is a list of entries, or
    /// unknown (`None`).
    #[derive(Default)]
    struct Graph {
        sites: FxHashMap<u64, Option<Vec<u64>>>,
        functions: FxHashMap<u64, Vec<u64>>,
    }

    impl Graph {
        fn site(mut self, pc: u64, targets: &[u64]) -> Self {
            self.sites.insert(pc, Some(targets.to_vec()));
            self
        }
        fn unknown_site(mut self, pc: u64) -> Self {
            self.sites.insert(pc, None);
            self
        }
        fn function(mut self, entry: u64, tail_sites: &[u64]) -> Self {
            self.functions.insert(entry, tail_sites.to_vec());
            self
        }
    }

    impl CallGraph for Graph {
        fn targets(&self, site: u64) -> Option<Vec<u64>> {
            self.sites.get(&site)?.clone()
        }
        fn tail_sites(&self, entry: u64) -> Option<Vec<u64>> {
            self.functions.get(&entry).cloned()
        }
    }

    const CALLEE: u64 = 0x9000;

    #[test]
    fn a_direct_call_needs_no_frames() {
        let g = Graph::default().site(0x100, &[CALLEE]).function(CALLEE, &[]);
        assert!(find_chain(&g, 0x100, CALLEE).is_empty());
    }

    #[test]
    fn no_call_site_at_the_caller_means_no_frames() {
        let g = Graph::default().function(0x2000, &[0x2010]).site(0x2010, &[CALLEE]);
        assert!(find_chain(&g, 0x100, CALLEE).is_empty());
    }

    #[test]
    fn one_tail_call() {
        // __pthread_clockjoin_ex calls __futex_abstimed_wait_cancelable64, which jumps to
        // __futex_abstimed_wait_common.
        let g = Graph::default().site(0x100, &[0x2000]).function(0x2000, &[0x200b]).site(0x200b, &[CALLEE]);
        assert_eq!(find_chain(&g, 0x100, CALLEE), vec![0x200b]);
    }

    #[test]
    fn a_chain_of_tail_calls_comes_innermost_first() {
        let g = Graph::default()
            .site(0x100, &[0x2000])
            .function(0x2000, &[0x2010])
            .site(0x2010, &[0x3000])
            .function(0x3000, &[0x3010])
            .site(0x3010, &[CALLEE]);
        assert_eq!(find_chain(&g, 0x100, CALLEE), vec![0x3010, 0x2010]);
    }

    #[test]
    fn dead_ends_are_left_for_the_path_that_reaches() {
        let g = Graph::default()
            .site(0x100, &[0x2000])
            .function(0x2000, &[0x2010, 0x2020])
            .site(0x2010, &[0x4000])
            .function(0x4000, &[])
            .site(0x2020, &[CALLEE]);
        assert_eq!(find_chain(&g, 0x100, CALLEE), vec![0x2020]);
    }

    #[test]
    fn two_ways_keep_only_what_they_share() {
        // 0x3000 reaches 0x5000 through 0x4000 or 0x4800: the outer end (0x2010) and the inner
        // end (0x5010) are certain, the middle is not and is left out.
        let g = Graph::default()
            .site(0x100, &[0x2000])
            .function(0x2000, &[0x2010])
            .site(0x2010, &[0x3000])
            .function(0x3000, &[0x3010, 0x3020])
            .site(0x3010, &[0x4000])
            .site(0x3020, &[0x4800])
            .function(0x4000, &[0x4010])
            .function(0x4800, &[0x4810])
            .site(0x4010, &[0x5000])
            .site(0x4810, &[0x5000])
            .function(0x5000, &[0x5010])
            .site(0x5010, &[CALLEE]);
        assert_eq!(find_chain(&g, 0x100, CALLEE), vec![0x5010, 0x2010]);
        // Different first jumps: only the inner end is shared.
        let g = Graph::default()
            .site(0x100, &[0x2000])
            .function(0x2000, &[0x2010, 0x2020])
            .site(0x2010, &[0x3000])
            .site(0x2020, &[0x4000])
            .function(0x3000, &[0x3010])
            .function(0x4000, &[0x4010])
            .site(0x3010, &[0x5000])
            .site(0x4010, &[0x5000])
            .function(0x5000, &[0x5010])
            .site(0x5010, &[CALLEE]);
        assert_eq!(find_chain(&g, 0x100, CALLEE), vec![0x5010]);
    }

    #[test]
    fn nothing_in_common_means_no_frames() {
        let g = Graph::default()
            .site(0x100, &[0x2000])
            .function(0x2000, &[0x2010, 0x2020])
            .site(0x2010, &[CALLEE])
            .site(0x2020, &[0x3000])
            .function(0x3000, &[0x3010])
            .site(0x3010, &[CALLEE]);
        assert!(find_chain(&g, 0x100, CALLEE).is_empty());
    }

    #[test]
    fn a_direct_call_that_might_also_be_indirect_is_ambiguous() {
        // Reached directly (chain of none) and through 0x2010: gdb gives up.
        let g = Graph::default().site(0x100, &[CALLEE, 0x2000]).function(0x2000, &[0x2010]).site(0x2010, &[CALLEE]);
        assert!(find_chain(&g, 0x100, CALLEE).is_empty());
        let g = Graph::default().site(0x100, &[0x2000]).function(0x2000, &[0x2010, 0x2020]).site(0x2010, &[CALLEE]).site(0x2020, &[0x3000]).function(0x3000, &[0x3010]).site(0x3010, &[CALLEE]);
        assert!(find_chain(&g, 0x100, CALLEE).is_empty());
    }

    #[test]
    fn an_unknown_target_on_the_way_spoils_the_search() {
        let g = Graph::default().site(0x100, &[0x2000]).function(0x2000, &[0x2010, 0x2020]).unknown_site(0x2010).site(0x2020, &[CALLEE]);
        assert!(find_chain(&g, 0x100, CALLEE).is_empty());
        let g = Graph::default().unknown_site(0x100);
        assert!(find_chain(&g, 0x100, CALLEE).is_empty());
    }

    #[test]
    fn a_target_that_starts_no_function_spoils_the_search() {
        let g = Graph::default().site(0x100, &[0x2000]);
        assert!(find_chain(&g, 0x100, CALLEE).is_empty());
    }

    #[test]
    fn loops_end() {
        // 0x2000 and 0x3000 jump to each other; only 0x3000 also reaches the callee.
        let g = Graph::default()
            .site(0x100, &[0x2000])
            .function(0x2000, &[0x2010])
            .site(0x2010, &[0x3000])
            .function(0x3000, &[0x3010, 0x3020])
            .site(0x3010, &[0x2000])
            .site(0x3020, &[CALLEE]);
        assert_eq!(find_chain(&g, 0x100, CALLEE), vec![0x3020, 0x2010]);
    }

    #[test]
    fn deep_or_wide_graphs_claim_nothing() {
        // A line of tail calls longer than the depth bound.
        let mut g = Graph::default().site(0x100, &[0x10000]);
        let n = MAX_DEPTH as u64 + 2;
        for i in 0..n {
            let entry = 0x10000 + i * 0x100;
            let next = if i + 1 == n { CALLEE } else { entry + 0x100 };
            g = g.function(entry, &[entry + 0x10]).site(entry + 0x10, &[next]);
        }
        assert!(find_chain(&g, 0x100, CALLEE).is_empty());
        // Many ways that never reach: each level doubles the paths.
        let mut g = Graph::default().site(0x100, &[0x10000]);
        for level in 0..20u64 {
            let entry = 0x10000 + level * 0x100;
            g = g.function(entry, &[entry + 0x10, entry + 0x20]).site(entry + 0x10, &[entry + 0x100]).site(entry + 0x20, &[entry + 0x100]);
        }
        g = g.function(0x10000 + 20 * 0x100, &[]);
        assert!(find_chain(&g, 0x100, CALLEE).is_empty());
    }
}
