//! Things knot noticed while reading a dump that the user should know: a truncated segment, a
//! module file refused for its build-id, a stack walk that ended early. They travel with the
//! result instead of aborting it, because a partial reading of a dump is still worth having.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; the result is complete.
    Info,
    /// Part of the result is missing or less certain because of this.
    Warning,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Diagnostic {
    pub severity: Severity,
    /// The stage that noticed it: "core", "modules", "unwind", "symbols", ...
    pub stage: &'static str,
    pub message: String,
    /// File offset in the dump the message is about, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Process address the message is about, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<u64>,
}

impl Diagnostic {
    pub fn warning(stage: &'static str, message: impl Into<String>) -> Self {
        Diagnostic { severity: Severity::Warning, stage, message: message.into(), offset: None, address: None }
    }

    pub fn info(stage: &'static str, message: impl Into<String>) -> Self {
        Diagnostic { severity: Severity::Info, stage, message: message.into(), offset: None, address: None }
    }

    pub fn at_offset(mut self, offset: u64) -> Self {
        self.offset = Some(offset);
        self
    }

    pub fn at_address(mut self, address: u64) -> Self {
        self.address = Some(address);
        self
    }
}

/// At most this many diagnostics of one stage reach the report: a hostile dump can give one per
/// table entry, and a report of millions of lines helps no one.
pub(crate) const MAX_PER_STAGE: usize = 500;

/// Keeps the first [`MAX_PER_STAGE`] diagnostics of each stage, in order, and adds one warning per
/// stage that lost some, saying how many were cut.
pub(crate) fn cap_per_stage(all: Vec<Diagnostic>) -> Vec<Diagnostic> {
    let mut kept: Vec<(&'static str, usize)> = Vec::new();
    let mut out = Vec::with_capacity(all.len().min(4 * MAX_PER_STAGE));
    for d in all {
        let i = match kept.iter().position(|(s, _)| *s == d.stage) {
            Some(i) => i,
            None => {
                kept.push((d.stage, 0));
                kept.len() - 1
            }
        };
        kept[i].1 += 1;
        if kept[i].1 <= MAX_PER_STAGE {
            out.push(d);
        }
    }
    for (stage, n) in kept {
        if n > MAX_PER_STAGE {
            out.push(Diagnostic::warning(stage, format!("{} more {stage} diagnostics cut (at most {MAX_PER_STAGE} per stage are kept)", n - MAX_PER_STAGE)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stage_keeps_its_first_diagnostics_and_says_how_many_were_cut() {
        let mut all: Vec<Diagnostic> = (0..MAX_PER_STAGE + 7).map(|i| Diagnostic::info("unwind", format!("u{i}"))).collect();
        all.push(Diagnostic::info("core", "c"));
        let out = cap_per_stage(all);
        assert_eq!(out.len(), MAX_PER_STAGE + 2);
        assert_eq!(out[0].message, "u0");
        assert_eq!(out[MAX_PER_STAGE].message, "c");
        let last = out.last().unwrap();
        assert_eq!((last.severity, last.stage), (Severity::Warning, "unwind"));
        assert!(last.message.starts_with("7 more unwind diagnostics cut"), "{}", last.message);
    }
}
