//! How far the heap's reading has got, for a progress line on a terminal: the step (the walk,
//! the references, the dominators, the retained sizes) and its work done and left. The readings
//! set it as they go (a few atomic stores per million objects); `knot`'s progress bar reads it.
//! Process-wide: one analysis at a time shows it. No report depends on it.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// A step of the heap's reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeapStep {
    /// Walking the heap's segments (work in bytes of the heap).
    Walk,
    /// Reading every object's references (work in objects).
    References,
    /// The dominator tree (work in objects, each counted twice: the search, the semidominators).
    Dominators,
    /// Summing the retained sizes (work in objects).
    RetainedSizes,
}

impl HeapStep {
    const ALL: [HeapStep; 4] = [HeapStep::Walk, HeapStep::References, HeapStep::Dominators, HeapStep::RetainedSizes];

    /// The step in words, and what its work counts.
    pub fn label(self) -> (&'static str, &'static str) {
        match self {
            HeapStep::Walk => ("walking the GC heap", "bytes"),
            HeapStep::References => ("reading references", "objects"),
            HeapStep::Dominators => ("dominators", "steps"),
            HeapStep::RetainedSizes => ("retained sizes", "objects"),
        }
    }
}

/// 0: no step; else 1 + the step's index.
static STEP: AtomicU8 = AtomicU8::new(0);
static DONE: AtomicU64 = AtomicU64::new(0);
static TOTAL: AtomicU64 = AtomicU64::new(0);

/// Where the heap's reading is: the step, work done, work in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapProgress {
    pub step: HeapStep,
    pub done: u64,
    pub total: u64,
}

/// The heap's reading now, if a step is under way.
pub fn now() -> Option<HeapProgress> {
    let step = *HeapStep::ALL.get(usize::from(STEP.load(Ordering::Acquire)).checked_sub(1)?)?;
    Some(HeapProgress { step, done: DONE.load(Ordering::Relaxed), total: TOTAL.load(Ordering::Relaxed) })
}

/// `step` starts, with `total` work.
pub(crate) fn start(step: HeapStep, total: u64) {
    DONE.store(0, Ordering::Relaxed);
    TOTAL.store(total, Ordering::Relaxed);
    let i = HeapStep::ALL.iter().position(|s| *s == step).unwrap_or(0);
    STEP.store(i as u8 + 1, Ordering::Release);
}

/// `n` more work done.
pub(crate) fn advance(n: u64) {
    DONE.fetch_add(n, Ordering::Relaxed);
}

/// No step under way (the heap's reading ended).
pub(crate) fn end() {
    STEP.store(0, Ordering::Release);
}
