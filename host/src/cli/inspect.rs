//! `memplug inspect`: a plugin's handler header field by field, as read —
//! which fields of ABI 1.1 and later came from the plugin and which are host defaults
//! (as `validate` records them) — and the verdict. Nothing is installed;
//! the plugin's code (its constructors, its entry) runs in a worker process
//! unless `--in-process` says otherwise.

use super::args::IsolationArgs;
use memplug::info::flag_names;
use memplug::policy::Trust;
use memplug::probe::{Answer, Request, Task, Worker};
use memplug::report::{InspectionReport, Reading, Status};
use memplug::text::escape_os;
use memplug::{Candidate, LayoutCheck, Policy, load};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

/// What `inspect --json` prints.
#[derive(Serialize)]
struct InspectJson<'a> {
    #[serde(serialize_with = "memplug::text::path_serde::serialize")]
    path: &'a PathBuf,
    symbol: &'a str,
    magic: Option<String>,
    abi: Option<String>,
    struct_size: Option<u32>,
    host_reads: Option<usize>,
    flags: Option<Vec<&'static str>>,
    fields: Option<FieldsJson>,
    layout: Option<LayoutJson>,
    status: &'static str,
    reason: Option<&'a str>,
    message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stage: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<&'a str>,
}

/// The fields as read: the ABI 1.0 ones as values, the later ones with where
/// they came from.
#[derive(Serialize)]
struct FieldsJson {
    name: String,
    name_terminated: bool,
    version: String,
    version_terminated: bool,
    ctx: String,
    #[serde(flatten)]
    functions: BTreeMap<&'static str, String>,
    #[serde(flatten)]
    v1_1: BTreeMap<String, ReadingJson>,
}

/// The layout check of a Rust plugin's `<entry>_layout` companion.
#[derive(Serialize)]
struct LayoutJson {
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// One field of ABI 1.1 or later: its value, `plugin` or `default`, and a note.
#[derive(Serialize)]
struct ReadingJson {
    value: String,
    source: &'static str,
    note: String,
}

/// Where a reading came from, as shown.
fn source(r: &Reading) -> &'static str {
    if r.from_plugin { "plugin" } else { "default" }
}

/// Inspect `candidate`; exit status 0 if it would be accepted, else 1.
pub(crate) fn run(candidate: Candidate, trust: Trust, isolation: &IsolationArgs, json_out: bool) -> ExitCode {
    let report = inspect(&candidate, trust, isolation);
    if json_out {
        print_json(&report)
    } else {
        print_text(&report)
    }
    if report.status == Status::Ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// Read the header here or in a worker.
fn inspect(candidate: &Candidate, trust: Trust, isolation: &IsolationArgs) -> InspectionReport {
    let worker = match std::env::current_exe() {
        Ok(exe) if !isolation.in_process => Worker::new(exe),
        _ => return InspectionReport::of(&load::inspect(candidate, &trust)),
    };
    let request = Request {
        task: Task::Inspect,
        candidate: Some(candidate.clone()),
        spec: None,
        options: Vec::new(),
        policy: Policy { trust, ..Policy::default() },
        bench: None,
    };
    let outcome = worker.run(&request, isolation.timeout);
    if let memplug::probe::WorkerOutcome::Answered(Answer::Inspection(report)) = outcome {
        return *report;
    }
    if let memplug::probe::WorkerOutcome::BadAnswer { problem, stage } = &outcome {
        let message = memplug::probe::bad_answer_message(problem);
        let mut r = InspectionReport::worker_failed(candidate, Status::Rejected, message, stage.clone(), None);
        r.reason = Some(memplug::probe::BAD_ANSWER.into());
        return r;
    }
    if let memplug::probe::WorkerOutcome::Forbidden { call, stage } = &outcome {
        let message = memplug::probe::forbidden_message(call.as_deref(), stage.as_deref());
        let mut r = InspectionReport::worker_failed(candidate, Status::Rejected, message, stage.clone(), None);
        r.reason = Some(memplug::probe::FORBIDDEN_CALL.into());
        return r;
    }
    match outcome.failure() {
        Some((status, message, stage, signal)) => {
            InspectionReport::worker_failed(candidate, status, message, stage, signal)
        }
        None => InspectionReport::worker_failed(
            candidate,
            Status::NoReport,
            format!("the worker gave no inspection: {outcome:?}"),
            None,
            None,
        ),
    }
}

fn print_json(i: &InspectionReport) {
    let fields = i.fields.as_ref().map(|f| FieldsJson {
        name: String::from_utf8_lossy(&f.name).into_owned(),
        name_terminated: f.name_terminated,
        version: String::from_utf8_lossy(&f.version).into_owned(),
        version_terminated: f.version_terminated,
        ctx: format!("{:#x}", f.ctx),
        functions: f.functions.fields().into_iter().map(|(n, a)| (n, format!("{a:#x}"))).collect(),
        v1_1: i
            .readings
            .iter()
            .map(|r| (r.name.clone(), ReadingJson { value: r.value.clone(), source: source(r), note: r.note.clone() }))
            .collect(),
    });
    let json = InspectJson {
        path: &i.candidate.path,
        symbol: &i.candidate.symbol,
        magic: i.prefix.map(|p| format!("{:#010x}", p.magic)),
        abi: i.prefix.map(|p| format!("{}.{}", p.abi_major, p.abi_minor)),
        struct_size: i.prefix.map(|p| p.struct_size),
        host_reads: i.host_reads,
        flags: i.prefix.map(|p| flag_names(p.flags)),
        fields,
        layout: i.layout.as_ref().map(|l| LayoutJson {
            status: l.code(),
            reason: match l {
                LayoutCheck::NotChecked { reason } => Some(reason.clone()),
                _ => None,
            },
        }),
        status: i.status.as_str(),
        reason: i.reason.as_deref(),
        message: i.message.as_deref(),
        stage: i.stage.as_deref(),
        signal: i.signal.as_deref(),
    };
    super::print_json(&json);
}

/// `println!`, with what came from the plugin or its file name escaped
/// ([`memplug::text::escape`]; escaping escaped text changes nothing).
macro_rules! out {
    ($($t:tt)*) => { println!("{}", memplug::text::escape(&format!($($t)*))) };
}

fn print_text(i: &InspectionReport) {
    out!("file:           {}", escape_os(i.candidate.path.as_os_str()));
    out!("symbol:         {}", i.candidate.symbol);
    if let Some(p) = i.prefix {
        let magic_ok = if p.magic == memplug_abi::MAGIC { "ok" } else { "WRONG" };
        out!("magic:          {:#010x} ({magic_ok})", p.magic);
        let (major, minor) = (memplug_abi::ABI_MAJOR, memplug_abi::ABI_MINOR);
        out!("abi:            {}.{} (host speaks {major}.{minor})", p.abi_major, p.abi_minor);
        match i.host_reads {
            Some(n) => out!("struct_size:    {} bytes (the host reads {n})", p.struct_size),
            None => out!("struct_size:    {} bytes", p.struct_size),
        }
        out!("flags:          {:#x} [{}]", p.flags, flag_names(p.flags).join(", "));
    }
    if let Some(f) = &i.fields {
        let term = |t: bool| if t { "" } else { " (NOT NUL-terminated)" };
        out!("name:           {:?}{}", String::from_utf8_lossy(&f.name), term(f.name_terminated));
        out!("version:        {:?}{}", String::from_utf8_lossy(&f.version), term(f.version_terminated));
        out!("ctx:            {:#x}", f.ctx);
        for (name, addr) in f.functions.fields() {
            let shown = if addr == 0 { "NULL".to_string() } else { format!("{addr:#x}") };
            out!("{:<15} {shown}", format!("{name}:"));
        }
        for r in &i.readings {
            let note = if r.note.is_empty() { String::new() } else { format!("; {}", r.note) };
            out!("{:<15} {} ({}{note})", format!("{}:", r.name), r.value, source(r));
        }
    }
    if let Some(layout) = &i.layout {
        out!("layout:         {layout}");
    }
    match (i.status, &i.reason, &i.message) {
        (Status::Ok, _, _) => out!("verdict:        ok"),
        (Status::Rejected, Some(code), Some(msg)) => out!("verdict:        rejected [{code}] {msg}"),
        (status, _, msg) => out!("verdict:        {} {}", status.as_str(), msg.as_deref().unwrap_or("")),
    }
}
