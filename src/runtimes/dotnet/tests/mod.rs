//! Tests of the .NET reader's parts (the contract descriptor, the code map, the heap walk, crash
//! facts, hostile descriptors and sync-block tables) against the committed .NET samples and their
//! SOS recordings.

mod codemap;
mod crash;
mod gc_constants;
mod heap;
mod heap_graph;
mod hostile;
mod reader;
