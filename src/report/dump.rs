//! The dump and its modules as the report shows them.

use crate::hex::Hex;
use super::model::{DumpInfo, ModuleReport, SignalReport};
use crate::core::siginfo;
use crate::process::module::FileStatus;
use crate::process::Process;

pub(crate) fn dump_info(process: &Process) -> DumpInfo {
    let core = &process.core;
    DumpInfo {
        path: core.path().display().to_string(),
        size_bytes: core.file_bytes().len() as u64,
        pid: core.process.as_ref().map(|p| p.pid),
        process_name: core.process.as_ref().map(|p| p.name.clone()),
        command_line: core.process.as_ref().map(|p| p.args.clone()),
        signal: core.signal.as_ref().map(|s| SignalReport {
            number: s.signo,
            name: siginfo::signal_name(s.signo).to_string(),
            code: s.code,
            fault_address: s.fault_address.map(Hex),
            sender_pid: s.sender_pid,
            source: s.source,
        }),
        partial: process.all_diagnostics().any(|d| d.severity == crate::Severity::Warning),
    }
}

pub(crate) fn module_report(m: &crate::process::Module) -> ModuleReport {
    let (status, detail) = match &m.file_status {
        FileStatus::Loaded { path } => ("loaded", Some(path.clone())),
        FileStatus::InMemory => ("in_memory", None),
        FileStatus::Missing { tried } => ("missing", Some(format!("not found at {tried}"))),
        FileStatus::Refused { path, reason } => ("refused", Some(format!("{path}: {reason}"))),
    };
    ModuleReport {
        path: m.path.clone(),
        path_source: m.path_source.is_fallback().then(|| m.path_source.as_str().to_string()),
        start: Hex(m.start),
        end: Hex(m.end),
        load_bias: Hex(m.bias),
        build_id: m.build_id_hex(),
        build_id_source: m.build_id_source.map(|s| match s {
            crate::process::module::BuildIdSource::Dump => "dump".to_string(),
            crate::process::module::BuildIdSource::File => "file".to_string(),
        }),
        file_status: status.into(),
        file_detail: detail,
        debug_info: m.debug_status.clone(),
    }
}

