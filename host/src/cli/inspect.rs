//! `memplug inspect`: a plugin's handler header field by field, as read —
//! which ABI 1.1 fields came from the plugin and which are host defaults
//! (as `validate` records them) — and the verdict. Nothing is installed.

use memplug::info::flag_names;
use memplug::load::{self, Inspection};
use memplug::validate::{FieldReading, readable_len};
use memplug::{Candidate, LayoutCheck};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

/// What `inspect --json` prints.
#[derive(Serialize)]
struct InspectJson<'a> {
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
    reason: Option<&'static str>,
    message: Option<String>,
}

/// The fields as read: the ABI 1.0 ones as values, the 1.1 ones with where
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
    v1_1: BTreeMap<&'static str, ReadingJson>,
}

/// The layout check of a Rust plugin's `<entry>_layout` companion.
#[derive(Serialize)]
struct LayoutJson {
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// One ABI 1.1 field: its value, `plugin` or `default`, and a note.
#[derive(Serialize)]
struct ReadingJson {
    value: String,
    source: &'static str,
    note: String,
}

/// Where a reading came from, as shown.
fn source(r: &FieldReading) -> &'static str {
    if r.from_plugin { "plugin" } else { "default" }
}

/// Inspect `candidate`; exit status 0 if it would be accepted, else 1.
pub(crate) fn run(candidate: Candidate, json_out: bool) -> ExitCode {
    let i = load::inspect(&candidate);
    if json_out {
        print_json(&i)
    } else {
        print_text(&i)
    }
    if i.verdict.is_ok() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

fn print_json(i: &Inspection) {
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
            .map(|r| (r.name, ReadingJson { value: r.value.clone(), source: source(r), note: r.note.clone() }))
            .collect(),
    });
    let json = InspectJson {
        path: &i.candidate.path,
        symbol: &i.candidate.symbol,
        magic: i.prefix.map(|p| format!("{:#010x}", p.magic)),
        abi: i.prefix.map(|p| format!("{}.{}", p.abi_major, p.abi_minor)),
        struct_size: i.prefix.map(|p| p.struct_size),
        host_reads: i.prefix.and_then(|p| readable_len(&p).ok()),
        flags: i.prefix.map(|p| flag_names(p.flags)),
        fields,
        layout: i.layout.as_ref().map(|l| LayoutJson {
            status: l.code(),
            reason: match l {
                LayoutCheck::NotChecked { reason } => Some(reason.clone()),
                _ => None,
            },
        }),
        status: if i.verdict.is_ok() { "ok" } else { "rejected" },
        reason: i.verdict.as_ref().err().map(|e| e.code()),
        message: i.verdict.as_ref().err().map(|e| e.to_string()),
    };
    super::print_json(&json);
}

fn print_text(i: &Inspection) {
    println!("file:           {}", i.candidate.path.display());
    println!("symbol:         {}", i.candidate.symbol);
    if let Some(p) = i.prefix {
        let magic_ok = if p.magic == memplug_abi::MAGIC { "ok" } else { "WRONG" };
        println!("magic:          {:#010x} ({magic_ok})", p.magic);
        let (major, minor) = (memplug_abi::ABI_MAJOR, memplug_abi::ABI_MINOR);
        println!("abi:            {}.{} (host speaks {major}.{minor})", p.abi_major, p.abi_minor);
        match readable_len(&p) {
            Ok(n) => println!("struct_size:    {} bytes (the host reads {n})", p.struct_size),
            Err(_) => println!("struct_size:    {} bytes", p.struct_size),
        }
        println!("flags:          {:#x} [{}]", p.flags, flag_names(p.flags).join(", "));
    }
    if let Some(f) = &i.fields {
        let term = |t: bool| if t { "" } else { " (NOT NUL-terminated)" };
        println!("name:           {:?}{}", String::from_utf8_lossy(&f.name), term(f.name_terminated));
        println!("version:        {:?}{}", String::from_utf8_lossy(&f.version), term(f.version_terminated));
        println!("ctx:            {:#x}", f.ctx);
        for (name, addr) in f.functions.fields() {
            let shown = if addr == 0 { "NULL".to_string() } else { format!("{addr:#x}") };
            println!("{:<15} {shown}", format!("{name}:"));
        }
        for r in &i.readings {
            let note = if r.note.is_empty() { String::new() } else { format!("; {}", r.note) };
            println!("{:<15} {} ({}{note})", format!("{}:", r.name), r.value, source(r));
        }
    }
    if let Some(layout) = &i.layout {
        println!("layout:         {layout}");
    }
    match &i.verdict {
        Ok(_) => println!("verdict:        ok"),
        Err(e) => println!("verdict:        rejected [{}] {e}", e.code()),
    }
}
