//! The report's contract: the JSON validates against the committed schema of its version, and
//! the text report shows each contended lock's owner first, with its whole stack.

mod common;

use knot::report::{self, text::TextOptions, SCHEMA_VERSION};
use knot_samples::DumpKind;
use std::path::PathBuf;

fn schema_path(version: u32) -> PathBuf {
    knot_samples::workspace_root().join("docs").join("schema").join(format!("report-v{version}.schema.json"))
}

#[test]
fn the_committed_schema_is_the_one_the_code_writes() {
    let path = schema_path(SCHEMA_VERSION);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let current = report::json_schema() + "\n";
    if committed != current && std::env::var_os("KNOT_BLESS_SCHEMA").is_some() {
        std::fs::write(&path, &current).unwrap();
        return;
    }
    assert!(
        committed == current,
        "the report's shape changed but {} did not. A changed shape is a new schema version: bump \
         SCHEMA_VERSION in src/report/model.rs, keep the old file, and write the new one with \
         KNOT_BLESS_SCHEMA=1 cargo test --test report",
        path.display()
    );
}

#[test]
fn every_earlier_schema_version_is_kept() {
    for v in 1..=SCHEMA_VERSION {
        assert!(schema_path(v).exists(), "{} is missing: published schema versions stay", schema_path(v).display());
    }
}

fn validator() -> jsonschema::Validator {
    let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(schema_path(SCHEMA_VERSION)).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn assert_valid(name: &str, kind: DumpKind, rep: &report::Report) {
    let json: serde_json::Value = serde_json::from_str(&report::to_json(rep)).unwrap();
    let v = validator();
    let errors: Vec<String> = v.iter_errors(&json).map(|e| format!("{} at {}", e, e.instance_path())).take(5).collect();
    assert!(errors.is_empty(), "{name} ({kind}): the JSON report does not match its schema: {errors:#?}");
    assert_eq!(json["schema_version"], SCHEMA_VERSION);
}

#[test]
fn every_samples_json_matches_the_schema() {
    for &(name, kind) in knot_samples::COMMITTED_SET {
        assert_valid(name, kind, &common::analyze(&common::committed(name, kind)));
    }
    for spec in knot_samples::native_samples() {
        for kind in DumpKind::ALL {
            if let Some(d) = common::made(spec.name, kind) {
                assert_valid(spec.name, kind, &common::analyze(&d));
            }
        }
    }
}

/// The lines of the text section about `lock`, from its `==` header to the next one.
fn section<'t>(text: &'t str, lock_name: &str) -> Vec<&'t str> {
    let start = text.lines().position(|l| l.starts_with("== ") && l.contains(lock_name)).unwrap_or_else(|| panic!("no section for {lock_name} in:\n{text}"));
    text.lines().skip(start).take_while(|l| !l.is_empty()).collect()
}

#[test]
fn each_lock_shows_its_owner_first_and_whole_whatever_max_frames_says() {
    for (name, lock) in [("cycle3", "ledger"), ("convoy", "convoy_lock"), ("deep_recursion", "depth_lock")] {
        for kind in DumpKind::ALL {
            let Some(d) = common::made(name, kind) else { continue };
            let rep = common::analyze(&d);
            let l = rep.locks.iter().find(|l| l.name.as_deref() == Some(lock)).unwrap_or_else(|| panic!("{name}: no lock {lock}"));
            let owner = rep.threads.iter().find(|t| Some(t.tid) == l.owner_tid).expect("owner thread");
            let text = report::text::render(&rep, &TextOptions { max_frames: Some(2) });
            let lines = section(&text, lock);
            let owner_at = lines.iter().position(|l| l.starts_with("Owner: Thread")).unwrap_or_else(|| panic!("{name}: no owner line:\n{}", lines.join("\n")));
            let waiters_at = lines.iter().position(|l| l.starts_with("Waiters:")).unwrap();
            assert!(owner_at < waiters_at, "{name}: the owner comes before the waiters");
            let owner_frames = lines[owner_at..waiters_at].iter().filter(|l| l.trim_start().starts_with('#')).count();
            assert_eq!(owner_frames, owner.frames.len(), "{name}: the owner's stack is never cut");
            // Other stacks do obey --max-frames.
            let after = &lines[waiters_at..];
            assert!(after.iter().filter(|l| l.trim_start().starts_with('#')).count() <= 2 * l.waiter_tids.len().max(1));
        }
    }
}

#[test]
fn deadlocks_come_first_in_the_text() {
    let Some(d) = common::made("abba", DumpKind::Gcore) else { return };
    let rep = common::analyze(&d);
    let text = report::text::render(&rep, &TextOptions::default());
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[2].starts_with("Verdict: DEADLOCK"), "{text}");
    assert!(lines[3].trim_start().starts_with("cycle: thread "), "{text}");
}
