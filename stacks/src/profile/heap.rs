//! The samples of a heap profile, read back from a trace and weighed into
//! estimates of the whole heap, by allocation stack.
//!
//! A process samples its allocations by bytes: the gaps between sampled
//! bytes are drawn from an exponential distribution of mean `rate`, so an
//! allocation of `n` bytes is sampled with probability
//! `p = 1 - exp(-n / rate)` whatever came before it. Each sample then
//! stands for `1 / p` allocations and `n / p` bytes — the weights pprof and
//! jemalloc give — and the sums over samples are unbiased estimates of the
//! allocations and bytes of each stack.
//!
//! Three views of the heap come out:
//! - **allocated**: every sampled allocation of the process (not those it
//!   inherited from its parent across `fork`);
//! - **in use at exit**: the sampled blocks not freed when it wrote its
//!   samples (at exit);
//! - **in use at the peak**: the sampled blocks live at the moment the
//!   estimated bytes in use were highest, found by replaying the sampled
//!   allocations and frees in the order the process numbered them.

use crate::format::{self, FormatError, NOT_FREED, Origin, Record};
use std::collections::HashMap;

/// A module of a process, as it described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// Its first address.
    pub start: u64,
    /// One past its last.
    pub end: u64,
    /// Its load bias (an address minus it is the ELF file's address).
    pub bias: u64,
    /// Its file.
    pub path: String,
    /// Its GNU build id (empty when it has none).
    pub build_id: Vec<u8>,
}

/// One sampled allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// The bytes asked for.
    pub bytes: u64,
    /// The mean gap of the sampling, in bytes.
    pub rate: u64,
    /// The event number of its allocation.
    pub allocated: u64,
    /// The event number of its free, if it was freed.
    pub freed: Option<u64>,
    /// Whether it was allocated before the process was forked.
    pub inherited: bool,
    /// Its allocation stack, innermost first (return addresses).
    pub stack: Vec<u64>,
}

/// What one process wrote: its modules and its samples.
#[derive(Debug, Clone)]
pub struct ProcessSamples {
    /// The process.
    pub origin: Origin,
    /// Its modules.
    pub modules: Vec<Module>,
    /// Its samples.
    pub samples: Vec<Sample>,
    /// The notes it wrote (the unwinder, samples it could not keep).
    pub notes: Vec<String>,
}

/// The processes of a trace, in the order they first wrote; and why
/// reading stopped early, if it did (what came before is kept). See
/// [`Reader`], which also reads the spools beside a trace.
pub fn read(bytes: &[u8]) -> (Vec<ProcessSamples>, Option<FormatError>) {
    let mut r = Reader::default();
    let problem = r.trace(bytes);
    (r.finish(), problem)
}

/// Reads a heap profile's records back, from a trace and from the spools
/// its processes wrote beside it, into samples by process. A process
/// writes each sampled allocation when it makes it (not freed), and, when
/// it frees it, a record with the same allocation event, the free's event
/// and no stack: the two are merged here, in whichever order they are read.
/// A free whose allocation is never read is of a block the process
/// inherited across `fork` (its parent's sample), and is dropped.
#[derive(Debug, Default)]
pub struct Reader {
    out: Vec<ProcessSamples>,
    /// Each process's index in `out`, and whether its last record was of a
    /// module.
    at: HashMap<Origin, (usize, bool)>,
    /// Each sample's index in its process's samples, by allocation event.
    index: HashMap<(usize, u64), usize>,
    /// Frees read before their allocation.
    early: HashMap<(usize, u64), u64>,
}

impl Reader {
    /// Read the records of a trace; why reading stopped early, if it did
    /// (what came before is kept).
    pub fn trace(&mut self, bytes: &[u8]) -> Option<FormatError> {
        for r in format::records(bytes) {
            match r {
                Ok(r) => self.record(r),
                Err(e) => return Some(e),
            }
        }
        None
    }

    /// Read the records of a spool: the bytes stepped over that were not
    /// whole records (records cut short by a writer's death); `Err` when
    /// the bytes are not a spool.
    pub fn spool(&mut self, bytes: &[u8]) -> Result<usize, FormatError> {
        let mut records = format::spooled(bytes)?;
        records.by_ref().for_each(|r| self.record(r));
        Ok(records.skipped())
    }

    /// The processes read, in the order they first wrote.
    pub fn finish(self) -> Vec<ProcessSamples> {
        self.out
    }

    fn record(&mut self, r: Record<'_>) {
        let origin = match r {
            Record::Module(o, _) | Record::Error(o, _) | Record::Note(o, _) => o,
            Record::Leak { origin, .. } | Record::Sample { origin, .. } => origin,
        };
        let is_module = matches!(r, Record::Module(..));
        let out = &mut self.out;
        let (i, was_module) = *self.at.entry(origin).or_insert_with(|| {
            out.push(ProcessSamples { origin, modules: Vec::new(), samples: Vec::new(), notes: Vec::new() });
            (out.len() - 1, false)
        });
        self.at.insert(origin, (i, is_module));
        let p = &mut self.out[i];
        match r {
            Record::Module(_, m) => {
                if !was_module {
                    p.modules.clear(); // a new module map starts
                }
                let path = String::from_utf8_lossy(m.path).into_owned();
                p.modules.push(Module {
                    start: m.start,
                    end: m.end,
                    bias: m.bias,
                    path,
                    build_id: m.build_id.to_vec(),
                });
            }
            Record::Note(_, n) => p.notes.push(n.to_string()),
            Record::Sample { bytes, rate, allocated, freed, inherited, stack, .. } => {
                let freed = (freed != NOT_FREED).then_some(freed);
                match self.index.get(&(i, allocated)) {
                    Some(&at) => p.samples[at].freed = freed.or(p.samples[at].freed),
                    None if stack.is_empty() && freed.is_some() => {
                        self.early.insert((i, allocated), freed.unwrap_or(NOT_FREED));
                    }
                    None => {
                        self.index.insert((i, allocated), p.samples.len());
                        let freed = freed.or(self.early.remove(&(i, allocated)));
                        let stack = stack.iter().collect();
                        p.samples.push(Sample { bytes, rate, allocated, freed, inherited, stack });
                    }
                }
            }
            Record::Error(..) | Record::Leak { .. } => {}
        }
    }
}

/// The probability that an allocation of `bytes` is sampled at a mean gap
/// of `rate` bytes: `1 - exp(-bytes / rate)` (1 when `rate` is 0).
pub fn probability(bytes: u64, rate: u64) -> f64 {
    if rate == 0 {
        return 1.0;
    }
    -(-(bytes as f64) / rate as f64).exp_m1()
}

/// What one sample of `bytes` at `rate` stands for: `(allocations,
/// bytes)`, `1 / p` and `bytes / p` (both 0 for an empty allocation).
pub fn weight(bytes: u64, rate: u64) -> (f64, f64) {
    let p = probability(bytes, rate);
    if p <= 0.0 { (0.0, 0.0) } else { (1.0 / p, bytes as f64 / p) }
}

/// The values of a stack, in the order of [`SAMPLE_TYPES`].
pub type Values = [f64; 6];

/// The sample types of a heap profile, `(type, unit)`, in the order of
/// [`Values`]: allocated, in use at exit, in use at the peak.
pub const SAMPLE_TYPES: [(&str, &str); 6] = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("inuse_objects", "count"),
    ("inuse_space", "bytes"),
    ("peak_inuse_objects", "count"),
    ("peak_inuse_space", "bytes"),
];

/// One allocation stack's estimates.
#[derive(Debug, Clone, PartialEq)]
pub struct StackValues {
    /// The stack, innermost first.
    pub stack: Vec<u64>,
    /// Its estimates.
    pub values: Values,
}

/// A process's heap profile: estimates by allocation stack.
#[derive(Debug, Clone)]
pub struct HeapProfile {
    /// The process.
    pub origin: Origin,
    /// The mean gap of its sampling (its samples' largest, 0 with none).
    pub rate: u64,
    /// Its modules.
    pub modules: Vec<Module>,
    /// The stacks, largest in use at the peak first.
    pub stacks: Vec<StackValues>,
    /// How many samples it took.
    pub samples: usize,
    /// The event at which the estimated bytes in use peaked.
    pub peak_event: Option<u64>,
    /// Its notes.
    pub notes: Vec<String>,
}

impl HeapProfile {
    /// Weigh a process's samples.
    pub fn new(p: &ProcessSamples) -> HeapProfile {
        let peak = peak_event(&p.samples);
        let mut by_stack: HashMap<&[u64], Values> = HashMap::new();
        for s in &p.samples {
            let (objects, bytes) = weight(s.bytes, s.rate);
            let v = by_stack.entry(&s.stack).or_insert([0.0; 6]);
            let mut add = |i: usize| {
                v[i] += objects;
                v[i + 1] += bytes;
            };
            if !s.inherited {
                add(0);
            }
            if s.freed.is_none() {
                add(2);
            }
            if peak.is_some_and(|at| live_at(s, at)) {
                add(4);
            }
        }
        let mut stacks: Vec<StackValues> =
            by_stack.into_iter().map(|(stack, values)| StackValues { stack: stack.to_vec(), values }).collect();
        stacks.sort_by(|a, b| {
            let key = |v: &Values| (v[5], v[3], v[1]);
            key(&b.values).partial_cmp(&key(&a.values)).unwrap_or(std::cmp::Ordering::Equal).then(a.stack.cmp(&b.stack))
        });
        HeapProfile {
            origin: p.origin,
            rate: p.samples.iter().map(|s| s.rate).max().unwrap_or(0),
            modules: p.modules.clone(),
            stacks,
            samples: p.samples.len(),
            peak_event: peak,
            notes: p.notes.clone(),
        }
    }

    /// The total of value `i` (see [`SAMPLE_TYPES`]) over every stack.
    pub fn total(&self, i: usize) -> f64 {
        self.stacks.iter().map(|s| s.values[i]).sum()
    }
}

/// Whether sample `s` was live just after event `at`.
fn live_at(s: &Sample, at: u64) -> bool {
    s.allocated <= at && s.freed.is_none_or(|f| f > at)
}

/// The event after which the estimated bytes in use were highest (the
/// first such): the sampled allocations (`+` their weight) and frees (`-`)
/// replayed in event order. `None` without samples.
fn peak_event(samples: &[Sample]) -> Option<u64> {
    let mut events: Vec<(u64, f64)> = Vec::with_capacity(samples.len() * 2);
    for s in samples {
        let (_, bytes) = weight(s.bytes, s.rate);
        events.push((s.allocated, bytes));
        if let Some(f) = s.freed {
            events.push((f, -bytes));
        }
    }
    // Frees before allocations at an equal number (there are none in a
    // well-formed trace): the peak is never overstated.
    events.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let (mut live, mut best) = (0.0f64, None::<(f64, u64)>);
    for (at, delta) in events {
        live += delta;
        if best.is_none_or(|(b, _)| live > b) {
            best = Some((live, at));
        }
    }
    best.map(|(_, at)| at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(bytes: u64, allocated: u64, freed: Option<u64>, stack: u64) -> Sample {
        Sample { bytes, rate: 0, allocated, freed, inherited: false, stack: vec![stack] }
    }

    #[test]
    fn weights_undo_the_sampling_probability() {
        let (objects, bytes) = weight(512 << 10, 512 << 10);
        assert!((objects - 1.0 / (1.0 - (-1.0f64).exp())).abs() < 1e-12);
        assert!((bytes - (512 << 10) as f64 * objects).abs() < 1e-6);
        let (objects, _) = weight(16, 512 << 10);
        assert!((objects - 32768.5).abs() < 0.01, "a small block stands for about rate/size blocks: {objects}");
        assert_eq!(weight(0, 512), (0.0, 0.0));
        assert_eq!(weight(100, 0), (1.0, 100.0), "rate 0: every allocation");
    }

    #[test]
    fn the_peak_and_exit_views_are_found_by_replaying_events() {
        // a: 100 bytes, 1..4; b: 50 bytes, 2..; c: 10 bytes, 5.. (after a's free).
        let p = ProcessSamples {
            origin: Origin { pid: 1, nonce: 1 },
            modules: Vec::new(),
            samples: vec![sample(100, 1, Some(4), 0xa), sample(50, 2, None, 0xb), sample(10, 5, None, 0xc)],
            notes: Vec::new(),
        };
        let h = HeapProfile::new(&p);
        assert_eq!(h.peak_event, Some(2), "150 bytes live after b's allocation");
        let v = |s: u64| h.stacks.iter().find(|x| x.stack == [s]).unwrap().values;
        assert_eq!(v(0xa), [1.0, 100.0, 0.0, 0.0, 1.0, 100.0]);
        assert_eq!(v(0xb), [1.0, 50.0, 1.0, 50.0, 1.0, 50.0]);
        assert_eq!(v(0xc), [1.0, 10.0, 1.0, 10.0, 0.0, 0.0]);
        assert_eq!(h.stacks[0].stack, [0xa], "largest at the peak first");
        assert_eq!((h.total(1), h.total(3), h.total(5)), (160.0, 60.0, 150.0));
    }

    #[test]
    fn inherited_blocks_are_in_use_but_not_allocated_here() {
        let mut s = sample(64, 1, None, 0xa);
        s.inherited = true;
        let p = ProcessSamples {
            origin: Origin { pid: 2, nonce: 2 },
            modules: Vec::new(),
            samples: vec![s],
            notes: vec![],
        };
        assert_eq!(HeapProfile::new(&p).stacks[0].values, [0.0, 0.0, 1.0, 64.0, 1.0, 64.0]);
    }

    #[test]
    fn a_trace_reads_back_by_process() {
        let mut trace = Vec::new();
        let mut buf = [0u8; 512];
        let (a, b) = (Origin { pid: 7, nonce: 1 }, Origin { pid: 8, nonce: 2 });
        let m = format::RawModule { start: 0x1000, end: 0x2000, bias: 0, build_id: b"\x01", path: b"/bin/x" };
        let s = |allocated, freed| format::SampleOut {
            bytes: 32,
            rate: 512,
            allocated,
            freed,
            inherited: false,
            stack: &[0x1010, 0x1020],
        };
        trace.extend_from_slice(format::module(&mut buf, a, &m).unwrap());
        trace.extend_from_slice(format::sample(&mut buf, a, &s(1, NOT_FREED)).unwrap());
        trace.extend_from_slice(format::module(&mut buf, b, &m).unwrap());
        trace.extend_from_slice(format::sample(&mut buf, b, &s(1, NOT_FREED)).unwrap());
        let free = |allocated, freed| format::SampleOut { stack: &[], ..s(allocated, freed) };
        trace.extend_from_slice(format::sample(&mut buf, a, &free(1, 2)).unwrap());
        trace.extend_from_slice(format::sample(&mut buf, b, &free(9, 10)).unwrap());
        trace.extend_from_slice(format::sample(&mut buf, a, &s(3, NOT_FREED)).unwrap());
        let (ps, problem) = read(&trace);
        assert!(problem.is_none());
        assert_eq!(
            ps.iter().map(|p| (p.origin.pid, p.modules.len(), p.samples.len())).collect::<Vec<_>>(),
            [(7, 1, 2), (8, 1, 1)]
        );
        assert_eq!(ps[0].samples[0].freed, Some(2), "the free's record completes the allocation's");
        assert_eq!(ps[1].samples[0].freed, None, "a free of a block allocated before a fork is not counted");
        assert_eq!(ps[0].samples[1].stack, [0x1010, 0x1020]);
    }

    /// Sampling by bytes with exponential gaps, simulated: the estimate of
    /// each call site's bytes is unbiased, whatever the block sizes.
    #[test]
    fn a_free_read_before_its_allocation_still_completes_it() {
        // A free written to the trace (its spool was full) and its
        // allocation to the spool, which is read after the trace.
        let mut buf = [0u8; 512];
        let o = Origin { pid: 7, nonce: 1 };
        let s = |allocated, freed, stack: &'static [usize]| format::SampleOut {
            bytes: 32,
            rate: 512,
            allocated,
            freed,
            inherited: false,
            stack,
        };
        let trace = format::sample(&mut buf, o, &s(1, 2, &[])).unwrap().to_vec();
        let mut spool = vec![0u8; format::SPOOL_HEADER];
        spool[..8].copy_from_slice(&format::SPOOL_MAGIC);
        spool.extend_from_slice(format::sample(&mut buf, o, &s(1, NOT_FREED, &[0x1010])).unwrap());
        spool.resize(spool.len().next_multiple_of(8), 0);
        let used = spool.len() as u64;
        spool[format::SPOOL_USED..format::SPOOL_USED + 8].copy_from_slice(&used.to_ne_bytes());
        let mut r = Reader::default();
        assert!(r.trace(&trace).is_none());
        assert_eq!(r.spool(&spool), Ok(0));
        let ps = r.finish();
        assert_eq!(ps.len(), 1);
        assert_eq!(ps[0].samples.len(), 1);
        assert_eq!(ps[0].samples[0].freed, Some(2));
        assert_eq!(ps[0].samples[0].stack, [0x1010]);
    }

    #[test]
    fn estimates_of_simulated_sampling_are_unbiased() {
        let rate = 4096u64;
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut uniform = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            ((rng >> 11) as f64 + 1.0) / (1u64 << 53) as f64
        };
        let mut left = -uniform().ln() * rate as f64;
        // Site 1: 64 MiB in blocks of 16 B to 16 KiB (about 16 000 samples,
        // so a standard error under 1%); site 2: a 64 KiB block for every
        // fourth of site 1's.
        let mut sizes = Vec::new();
        let (mut one, mut i) = (0u64, 0u64);
        while one < 64 << 20 {
            let s = 16u64 << (i % 11);
            sizes.push((1u8, s));
            one += s;
            i += 1;
            if i % 4 == 0 {
                sizes.push((2u8, 64 << 10));
            }
        }
        let mut est = [0.0f64; 3];
        for &(site, size) in &sizes {
            left -= size as f64;
            if left < 0.0 {
                est[site as usize] += weight(size, rate).1;
                left = -uniform().ln() * rate as f64;
            }
        }
        let truth = |site: u8| sizes.iter().filter(|s| s.0 == site).map(|s| s.1).sum::<u64>() as f64;
        for site in [1u8, 2] {
            let err = est[site as usize] / truth(site) - 1.0;
            assert!(err.abs() < 0.05, "site {site}: estimate {} vs {}", est[site as usize], truth(site));
        }
    }
}
