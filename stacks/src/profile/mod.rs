//! Heap profiles (feature `profile`): the sampled allocations a process
//! recorded under `memplug run --profile`, read back from its trace,
//! weighed into unbiased estimates by allocation stack — allocated, in use
//! at exit, in use at the peak — and written as a pprof profile
//! (`profile.proto`, gzipped: what `pprof`, speedscope and Grafana read)
//! and a flame graph (SVG).
//!
//! ```
//! use memplug_stacks::profile::{heap, pprof, proto};
//! use memplug_stacks::symbolize::Symbolizer;
//!
//! // A process's samples, as `heap::read` gives them from a trace.
//! let process = heap::ProcessSamples {
//!     origin: memplug_stacks::format::Origin { pid: 42, nonce: 1 },
//!     modules: Vec::new(),
//!     samples: vec![heap::Sample {
//!         bytes: 1 << 20,
//!         rate: 512 << 10,
//!         allocated: 1,
//!         freed: None,
//!         inherited: false,
//!         stack: vec![0x1234],
//!     }],
//!     notes: Vec::new(),
//! };
//! let profile = heap::HeapProfile::new(&process);
//! let bytes = proto::encode_gz(&pprof::to_pprof(&profile, &mut Symbolizer::new(), &[]));
//! let read = proto::decode_gz(&bytes).unwrap();
//! // One 1 MiB block, sampled with probability 1 - e^-2: it stands for
//! // 1 MiB / (1 - e^-2) bytes.
//! assert_eq!(read.total("inuse_space"), ((1u64 << 20) as f64 / (1.0 - (-2.0f64).exp())).round() as i64);
//! ```
//!
//! # Layers
//! Each module imports only from those above it in this list (bottom
//! first).
//! 0. [`proto`] — `profile.proto`'s messages, encoded and decoded by
//!    `prost`, gzipped;
//! 1. [`heap`] — a trace's samples by process, weighed into estimates by
//!    stack;
//! 2. [`pprof`] — a heap profile as a pprof profile, its frames named;
//! 3. [`flame`] — a pprof profile's flame graph.

pub mod proto;
pub mod heap;
pub mod pprof;
pub mod flame;
