//! A stack that repeats: the longest run of one short cycle of functions, so a stack overflow's
//! 10 000 frames read as one cycle and a count.

use super::model::Recursion;

/// Where a cycle may start, counted from the innermost frame.
const MAX_START: usize = 32;
/// The longest cycle looked for, in frames.
const MAX_CYCLE: usize = 16;
/// Fewer repeats than this is ordinary code, not a runaway.
pub(crate) const MIN_REPEATS: usize = 4;

/// The run covering the most frames (the shortest cycle and earliest start on ties).
pub(crate) fn find(names: &[&str]) -> Option<Recursion> {
    let n = names.len();
    let mut best: Option<Recursion> = None;
    for start in 0..n.min(MAX_START) {
        for len in 1..=MAX_CYCLE.min((n - start) / MIN_REPEATS) {
            let cycle = &names[start..start + len];
            let mut repeats = 1;
            while start + (repeats + 1) * len <= n && &names[start + repeats * len..start + (repeats + 1) * len] == cycle {
                repeats += 1;
            }
            // A cycle that is itself a repetition (a, a) is counted as its shorter form.
            // A cycle of frames without names says nothing (runtime stubs, transition records).
            let named = cycle.iter().any(|n| *n != "??");
            if named && repeats >= MIN_REPEATS && best.as_ref().is_none_or(|b| repeats * len > b.frames) {
                best = Some(Recursion { first_frame: start, frames: repeats * len, cycle: cycle.iter().map(|s| s.to_string()).collect(), repeats });
            }
        }
        if best.as_ref().is_some_and(|b| b.first_frame + b.frames >= n) {
            break;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_recursion_is_one_frame_and_a_count() {
        let mut names = vec!["fault_here"];
        names.extend(std::iter::repeat_n("descend", 3000));
        names.extend(["worker", "start_thread", "clone3"]);
        let r = find(&names).expect("recursion");
        assert_eq!(r, Recursion { first_frame: 1, frames: 3000, cycle: vec!["descend".into()], repeats: 3000 });
    }

    #[test]
    fn a_mutual_recursion_is_its_cycle() {
        let mut names = vec![];
        for _ in 0..50 {
            names.extend(["even", "odd"]);
        }
        names.push("main");
        let r = find(&names).expect("recursion");
        assert_eq!((r.first_frame, r.cycle.len(), r.repeats), (0, 2, 50));
    }

    #[test]
    fn an_ordinary_stack_has_none() {
        assert_eq!(find(&["a", "b", "c", "b", "c", "main"]), None);
        assert_eq!(find(&[]), None);
        assert_eq!(find(&["??"; 9]), None, "unnamed frames are no recursion");
    }
}
