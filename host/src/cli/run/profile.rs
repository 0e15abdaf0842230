//! `memplug run --profile FILE`: the samples every process of the run
//! appended to one raw file and to the spools beside it (see the
//! interposer's `sample_raw`), read back
//! after the program has ended (or died), weighed, symbolized and written
//! as one pprof profile per process image — `FILE` for the program's own
//! (the last image of the process `memplug run` started), `FILE.<pid>` for
//! each other process (`FILE.<pid>.<n>` for an image a process replaced by
//! `exec`, `n` counting from 1) — each with a flame graph of what was in
//! use at its peak beside it (`<profile>.svg`).

use memplug_stacks::profile::heap::{self, HeapProfile, ProcessSamples};
use memplug_stacks::profile::{flame, pprof, proto};
use memplug_stacks::symbolize::Symbolizer;
use std::path::{Path, PathBuf};

/// Where each process image's profile goes: `out` for the last image of
/// `top` (the pid `memplug run` started), `out.<pid>` for the last image of
/// another, `out.<pid>.<n>` for the earlier images of a pid.
pub(super) fn file_names(out: &Path, top: u32, processes: &[ProcessSamples]) -> Vec<PathBuf> {
    processes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let pid = p.origin.pid;
            let by_pid = with_suffix(out, &pid.to_string());
            if processes[i + 1..].iter().any(|q| q.origin.pid == pid) {
                let n = processes[..=i].iter().filter(|q| q.origin.pid == pid).count();
                PathBuf::from(with_suffix(Path::new(&by_pid), &n.to_string()))
            } else if pid == top {
                out.to_path_buf()
            } else {
                PathBuf::from(by_pid)
            }
        })
        .collect()
}

/// `path.suffix`.
fn with_suffix(path: &Path, suffix: &str) -> std::ffi::OsString {
    let mut s = path.as_os_str().to_owned();
    s.push(".");
    s.push(suffix);
    s
}

/// The spools the processes of the run wrote beside `raw`
/// (`<raw>.spool.<pid>.<nonce>`), in name order.
fn spools_of(raw: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (raw.parent(), raw.file_name()) else { return Vec::new() };
    let mut prefix = name.to_owned();
    prefix.push(memplug_stacks::format::SPOOL_INFIX);
    let prefix = prefix.as_encoded_bytes();
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().as_encoded_bytes().starts_with(prefix))
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// Read the raw samples at `raw` and the spools beside it (then delete
/// them) and write the profiles
/// and flame graphs; `program` names the run in each. Problems are told on
/// stderr; the program's status is not changed by them.
pub(super) fn write(raw: &Path, out: &Path, top: u32, program: &str) {
    let bytes = std::fs::read(raw).unwrap_or_default();
    let _ = std::fs::remove_file(raw);
    let mut reader = heap::Reader::default();
    let problem = reader.trace(&bytes);
    for spool in spools_of(raw) {
        let bytes = std::fs::read(&spool).unwrap_or_default();
        let _ = std::fs::remove_file(&spool);
        match reader.spool(&bytes) {
            Ok(0) => {}
            Ok(n) => tracing::warn!("{n} bytes of the profile's samples were cut short (a process died writing them)"),
            Err(e) => tracing::warn!("a spool of the profile's samples is not one ({e}); it is skipped"),
        }
    }
    let mut processes = reader.finish();
    // A child forked without `exec` that died before it wrote its module
    // map has its parent's: a forked copy keeps the image's nonce.
    for i in 0..processes.len() {
        if processes[i].modules.is_empty() {
            let nonce = processes[i].origin.nonce;
            if let Some(m) = processes.iter().find(|q| q.origin.nonce == nonce && !q.modules.is_empty()) {
                processes[i].modules = m.modules.clone();
            }
        }
    }
    if let Some(problem) = problem {
        tracing::warn!("the profile's samples were cut short: {problem}; what came before is used");
    }
    let names = file_names(out, top, &processes);
    let mut sym = Symbolizer::new();
    for (p, path) in processes.iter().zip(names) {
        let h = HeapProfile::new(p);
        let mut comments = vec![
            format!("memplug run --profile: {program} (pid {})", p.origin.pid),
            format!("{} samples, one per {} bytes allocated on average", h.samples, h.rate),
        ];
        // Samples the process could not keep (its table of sampled blocks full).
        comments.extend(h.notes.iter().filter(|n| n.starts_with("profile:")).cloned());
        let profile = pprof::to_pprof(&h, &mut sym, &comments);
        let shown = memplug::text::escape_os(path.as_os_str());
        if let Err(e) = std::fs::write(&path, proto::encode_gz(&profile)) {
            eprintln!("memplug: [profile-write] cannot write the heap profile {shown}: {e}");
            continue;
        }
        let title = format!("In use at the peak: {program} (pid {})", p.origin.pid);
        let subtitle = format!("estimated from {} samples; memplug run --profile", h.samples);
        let svg_path = PathBuf::from(with_suffix(&path, "svg"));
        match flame::flame_graph(&profile, pprof::DEFAULT_SAMPLE_TYPE, &title, &subtitle) {
            Some(svg) => {
                if let Err(e) = std::fs::write(&svg_path, svg) {
                    let svg_shown = memplug::text::escape_os(svg_path.as_os_str());
                    eprintln!("memplug: [profile-write] cannot write the flame graph {svg_shown}: {e}");
                }
            }
            // Nothing was in use at the peak (no samples): no stale graph.
            None => {
                let _ = std::fs::remove_file(&svg_path);
            }
        }
        tracing::debug!(profile = %shown, samples = h.samples, "heap profile written");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplug_stacks::format::Origin;

    fn process(pid: u32, nonce: u64) -> ProcessSamples {
        ProcessSamples { origin: Origin { pid, nonce }, modules: vec![], samples: vec![], notes: vec![] }
    }

    #[test]
    fn each_process_image_gets_its_own_file() {
        let ps = [process(10, 1), process(11, 2), process(10, 3), process(12, 4), process(12, 5)];
        let names = file_names(Path::new("/t/heap.pb.gz"), 10, &ps);
        let names: Vec<String> = names.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            names,
            ["/t/heap.pb.gz.10.1", "/t/heap.pb.gz.11", "/t/heap.pb.gz", "/t/heap.pb.gz.12.1", "/t/heap.pb.gz.12"]
        );
    }
}
