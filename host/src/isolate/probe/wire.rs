//! The messages between a worker and its parent, and their framing. Pure:
//! no I/O but on the buffers given.
//!
//! The parent writes one [`Request`] (CBOR) to the worker's standard input
//! and closes it. The worker writes lines to its protocol channel: `stage
//! NAME` before each stage, and at the end `result LEN` followed by `LEN`
//! bytes of CBOR, one [`Answer`]. Reading that channel, which the plugin
//! can write to as well, is `frames.rs`'s job.

use crate::admit::discover::Candidate;
use crate::admit::policy::Policy;
use crate::admit::symbols::SymbolSpec;
use crate::isolate::report::{InspectionReport, Report};
use serde::{Deserialize, Serialize};

/// What a worker is asked to do with its candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Task {
    /// Load it, run the conformance pass, and make and check the instances
    /// asked for (`memplug check`).
    Check,
    /// Load it and report what loaded (`memplug list`).
    List,
    /// Read its header field by field (`memplug inspect`).
    Inspect,
    /// Load it (and make the instance `options` names for it, if any), and
    /// hand the handler to the front end's bench job with
    /// [`Request::bench`] (`memplug bench`; see
    /// [`worker::serve_with`](crate::worker::serve_with)). Without a
    /// candidate or spec, the job runs on the built-in handler alone. The
    /// answer is [`Answer::Bench`], or the refusal if loading failed.
    Bench,
}

/// One worker's job: a candidate (a plugin file or manifest) or an
/// allocator spec taken by symbol name, the task, and the policy to apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// What to do.
    pub task: Task,
    /// The plugin or manifest to load (`None` with a `spec`).
    pub candidate: Option<Candidate>,
    /// An allocator taken by symbol name (from the command line).
    pub spec: Option<SymbolSpec>,
    /// Instances to make and check for [`Task::Check`]: `(handler name,
    /// options)`; those whose name is not the candidate's handler are
    /// ignored.
    pub options: Vec<(String, String)>,
    /// The policy to load under (its `probe` setting is ignored: a worker
    /// never starts workers).
    pub policy: Policy,
    /// For [`Task::Bench`]: the front end's parameters (opaque here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bench: Option<Vec<u8>>,
}

impl Request {
    /// The candidate the request is about, as reports name it: the
    /// candidate, or for a spec its library and `malloc` symbol.
    pub fn subject(&self) -> Candidate {
        match (&self.spec, &self.candidate) {
            (Some(spec), _) => Candidate::new(&spec.library).with_symbol(spec.symbols.malloc.clone()),
            (None, Some(c)) => c.clone(),
            (None, None) => Candidate::new(""),
        }
    }
}

/// What a worker answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Answer {
    /// For [`Task::Check`] and [`Task::List`]: the candidate's report, then
    /// one per instance.
    Reports(Vec<Report>),
    /// For [`Task::Inspect`].
    Inspection(Box<InspectionReport>),
    /// For [`Task::Bench`]: the front end's results (opaque here; the
    /// front end validates them).
    Bench(Vec<u8>),
}

/// Encode a value as CBOR. Writing to a `Vec` does not fail, and paths are
/// written as bytes ([`crate::text::path_serde`]), but a value whose
/// `Serialize` fails is an error, not a panic.
pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out).map_err(|e| format!("cannot encode a message: {e}"))?;
    Ok(out)
}

/// Decode CBOR bytes.
pub(crate) fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, String> {
    ciborium::from_reader(bytes).map_err(|e| e.to_string())
}

/// The framed result: `result LEN\n` then the bytes.
pub(crate) fn frame_result(answer: &Answer) -> Result<Vec<u8>, String> {
    let body = encode(answer)?;
    let mut out = format!("result {}\n", body.len()).into_bytes();
    out.extend_from_slice(&body);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers_round_trip() {
        let mut policy = Policy::default();
        policy.require("aligned >=1.2, <2").unwrap();
        policy.deprecate_abi("1.0").unwrap();
        let req = Request {
            task: Task::Check,
            candidate: Some(Candidate::new("/x/libp.so")),
            spec: Some(SymbolSpec::new("m", "libm.so", "mal", "fr").calloc("c")),
            options: vec![("arena".into(), "region_size=1m".into())],
            policy,
            bench: None,
        };
        let back: Request = decode(&encode(&req).unwrap()).unwrap();
        assert_eq!(back, req);
        let report = Report::refused(&Candidate::new("/x/libp.so"), "bad-magic", "m".into(), None, None, None);
        let answer = Answer::Reports(vec![report]);
        let framed = frame_result(&answer).unwrap();
        let nl = framed.iter().position(|&b| b == b'\n').unwrap();
        assert_eq!(framed[..nl], *format!("result {}", framed.len() - nl - 1).as_bytes());
        let back: Answer = decode(&framed[nl + 1..]).unwrap();
        assert_eq!(back, answer);
    }

    #[test]
    fn any_file_name_travels() {
        use std::os::unix::ffi::OsStrExt;
        let odd = Candidate::new(std::ffi::OsStr::from_bytes(b"/x/lib\xffbad\r.so"));
        let req = Request {
            task: Task::Bench,
            candidate: Some(odd.clone()),
            spec: None,
            options: Vec::new(),
            policy: Policy::default(),
            bench: Some(vec![1, 2, 3]),
        };
        let back: Request = decode(&encode(&req).unwrap()).unwrap();
        assert_eq!(back, req);
        let report = Report::refused(&odd, "bad-magic", "m".into(), None, None, None);
        let back: Answer = decode(&encode(&Answer::Reports(vec![report.clone()])).unwrap()).unwrap();
        assert_eq!(back, Answer::Reports(vec![report]));
    }
}
