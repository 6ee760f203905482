// TEMPORARY local stub until the symbolizer branch merges. Not committed.
use crate::process::Process;
pub struct Symbolizer<'p> { _p: &'p Process }
pub struct Symbolized { pub module: Option<usize>, pub frames: Vec<SourceFrame> }
pub struct SourceFrame { pub function: Option<String>, pub raw_name: Option<String>, pub file: Option<String>, pub line: Option<u32>, pub column: Option<u32>, pub inlined: bool, pub function_offset: Option<u64> }
impl<'p> Symbolizer<'p> {
    pub fn new(p: &'p Process) -> Self { Symbolizer { _p: p } }
    pub fn symbolize(&self, _addr: u64, _ret: bool) -> Symbolized { Symbolized { module: None, frames: vec![] } }
}
impl<'p> Symbolizer<'p> {
    pub fn data_symbol(&self, _addr: u64) -> Option<(String, u64)> { None }
}
