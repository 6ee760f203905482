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
