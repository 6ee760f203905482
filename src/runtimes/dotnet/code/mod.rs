//! Code, methods and frames: an instruction pointer in JIT-compiled or ReadyToRun code to its
//! method, precode stubs to the method they stand for, and the runtime's transition Frames —
//! what the unwinder and the symbolizer ask through `unwind::managed::CodeLookup`.

pub(crate) mod codeheap;
pub(crate) mod codemap;
pub(crate) mod frames;
pub(crate) mod precode;
pub(crate) mod rangesection;
pub(crate) mod readytorun;
