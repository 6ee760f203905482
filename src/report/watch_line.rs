//! `knot watch --log-format json`: one JSON object per dump on standard output, the line a log
//! pipeline (Loki, Elasticsearch, Cloud Logging) ingests as it is. Its shape is versioned
//! ([`WATCH_LINE_VERSION`]) and described by docs/schema/watch-line-v2.schema.json (`knot schema
//! --watch-line`); the field guide is docs/report-fields.md, *The watch line*.

use crate::crash::CrashKind;
use crate::graph::verdict::Verdict;
use crate::report::Report;
use schemars::JsonSchema;
use serde::Serialize;
use std::time::{SystemTime, UNIX_EPOCH};

/// Version of the watch line's shape. Changing a field's meaning or shape bumps it. 2: `verdict`
/// takes the report schema v2's values (`abandoned`; `gc_stall` with or without an OOM on record).
pub const WATCH_LINE_VERSION: u32 = 2;

/// One dump handled by `knot watch`: analyzed (`result: analyzed`, with the report's verdict and
/// keys) or not (`result: error`, with the error file's message).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WatchLine {
    /// Version of this line's shape (not of the report's: see `report_schema_version`).
    pub schema_version: u32,
    /// The knot version that handled the dump.
    pub knot_version: String,
    /// When the dump was handled: UTC, RFC 3339, to the second (`2026-12-04T21:07:12Z`).
    pub time: String,
    /// The dump's file name in the watched directory.
    pub dump: String,
    /// The dump's path as knot opened it.
    pub dump_path: String,
    /// `analyzed` (the report was written) or `error` (the error file was written).
    pub result: WatchResult,
    /// The report's verdict; null when the dump could not be analyzed.
    pub verdict: Option<Verdict>,
    /// The report's `verdict_signature`: the key to count the same wedge by across dumps, pods
    /// and restarts (`deadlock:464cf4e418812d14`); null without a verdict.
    pub verdict_signature: Option<String>,
    /// How the process died, when the dump records a crash; null otherwise.
    pub crash: Option<WatchCrash>,
    /// Threads in the dump; null when it could not be analyzed.
    pub threads: Option<usize>,
    /// Wait-for cycles found (each a deadlock); null when the dump could not be analyzed.
    pub deadlocks: Option<usize>,
    /// The file written for this dump: the report (`D.knot.json`) or the error file
    /// (`D.knot.error.txt`).
    pub output: String,
    /// Why the dump could not be analyzed (the error file's text); null when it was.
    pub error: Option<String>,
    /// Seconds the analysis took.
    pub seconds: f64,
    /// The `schema_version` of the report in `output` (null for an error file).
    pub report_schema_version: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WatchResult {
    Analyzed,
    Error,
}

/// The report's `crash.kind` and `crash.signature`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WatchCrash {
    pub kind: CrashKind,
    /// The crash's stable key (`fault:SIGSEGV | parse_qty | order_worker`).
    pub signature: String,
}

impl WatchLine {
    fn new(dump: &str, dump_path: &str, output: &str, seconds: f64) -> WatchLine {
        WatchLine {
            schema_version: WATCH_LINE_VERSION,
            knot_version: env!("CARGO_PKG_VERSION").to_string(),
            time: rfc3339(SystemTime::now()),
            dump: dump.to_string(),
            dump_path: dump_path.to_string(),
            result: WatchResult::Error,
            verdict: None,
            verdict_signature: None,
            crash: None,
            threads: None,
            deadlocks: None,
            output: output.to_string(),
            error: None,
            seconds: (seconds * 1000.0).round() / 1000.0,
            report_schema_version: None,
        }
    }

    /// The line of a dump whose report `r` was written to `output`.
    pub fn analyzed(dump: &str, dump_path: &str, r: &Report, output: &str, seconds: f64) -> WatchLine {
        WatchLine {
            result: WatchResult::Analyzed,
            verdict: Some(r.verdict),
            verdict_signature: r.verdict_signature.clone(),
            crash: r.crash.as_ref().map(|c| WatchCrash { kind: c.kind, signature: c.signature.clone() }),
            threads: Some(r.threads.len()),
            deadlocks: Some(r.deadlocks.len()),
            report_schema_version: Some(r.schema_version),
            ..WatchLine::new(dump, dump_path, output, seconds)
        }
    }

    /// The line of a dump that could not be analyzed: `error` is what its error file says.
    pub fn failed(dump: &str, dump_path: &str, error: &str, output: &str, seconds: f64) -> WatchLine {
        WatchLine { error: Some(error.to_string()), ..WatchLine::new(dump, dump_path, output, seconds) }
    }

    /// One line of JSON (no newline inside).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The JSON Schema of [`WatchLine`], as committed in docs/schema/watch-line-v2.schema.json.
pub fn json_schema() -> String {
    serde_json::to_string_pretty(&schemars::schema_for!(WatchLine)).unwrap_or_default()
}

/// `t` as UTC in RFC 3339, to the second.
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's days_from_civil, inverted).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_are_utc_rfc3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        // `date -u -d @1764680000 +%FT%TZ`, a leap day and the end of a century's February.
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(1_764_680_000)), "2025-12-02T12:53:20Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(1_709_208_000)), "2024-02-29T12:00:00Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(4_107_542_399)), "2100-02-28T23:59:59Z");
    }
}
