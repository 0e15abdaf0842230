//! Out of the program, after it has ended: a trace read back into reports
//! whose frames have names. Each address is looked up in the module that
//! held it (by the module map the process wrote), at its file address
//! (`address - bias`), with addr2line over the module's ELF file and its
//! DWARF (separate debug files and split DWARF too); Rust and C++ names are
//! demangled; inlined calls are frames of their own. A frame without debug
//! information keeps the symbol table's name, or only `module+offset`.

use crate::format::{self, ErrorKind, Frames, Origin, Record};
use crate::text::{self, Facts, Which};
use std::collections::HashMap;
use std::fmt::Write as _;

/// One frame of a symbolized stack.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Frame {
    /// The function (demangled), when known.
    pub function: Option<String>,
    /// The source file, when debug information says.
    pub file: Option<String>,
    /// The line in it.
    pub line: Option<u32>,
    /// The module's path.
    pub module: Option<String>,
    /// The address's offset in the module (its file address).
    pub offset: Option<u64>,
    /// The address in the process.
    pub address: u64,
}

impl Frame {
    /// The frame line of a report: `#3 0x… in f file.c:12`, or
    /// `#3 0x… (module+0x…)` when nothing more is known.
    pub fn line(&self, index: usize) -> String {
        let mut s = format!("    #{index} {:#x}", self.address);
        if let Some(f) = &self.function {
            let _ = write!(s, " in {f}");
        }
        match (&self.file, self.line) {
            (Some(file), Some(line)) => {
                let _ = write!(s, " {file}:{line}");
            }
            _ => {
                if let (Some(m), Some(o)) = (&self.module, self.offset) {
                    let _ = write!(s, " ({m}+{o:#x})");
                }
            }
        }
        s
    }
}

/// A loaded module, as the process described it.
#[derive(Debug, Clone)]
struct Module {
    start: u64,
    end: u64,
    bias: u64,
    path: String,
}

/// Looks addresses up, loading each module's debug information once.
#[derive(Default)]
pub struct Symbolizer {
    loaders: HashMap<String, Option<addr2line::Loader>>,
}

impl Symbolizer {
    /// A symbolizer with nothing loaded.
    pub fn new() -> Symbolizer {
        Symbolizer::default()
    }

    /// The frames (inlined calls first) at file address `offset` of the
    /// module at `path`, for the process address `address`; a return
    /// address is looked up one byte back, inside its call.
    pub fn frames_at(&mut self, path: &str, offset: u64, address: u64, return_address: bool) -> Vec<Frame> {
        let probe = if return_address { offset.saturating_sub(1) } else { offset };
        let plain = |function: Option<String>| Frame {
            function,
            file: None,
            line: None,
            module: Some(path.to_string()),
            offset: Some(offset),
            address,
        };
        let loader = self.loaders.entry(path.to_string()).or_insert_with(|| addr2line::Loader::new(path).ok());
        let Some(loader) = loader.as_ref() else { return vec![plain(None)] };
        let mut out = Vec::new();
        if let Ok(mut it) = loader.find_frames(probe) {
            while let Ok(Some(f)) = it.next() {
                let function = f.function.as_ref().and_then(|n| n.demangle().ok()).map(|n| n.into_owned());
                let (file, line) = f.location.map_or((None, None), |l| (l.file.map(str::to_string), l.line));
                out.push(Frame { function, file, line, module: Some(path.to_string()), offset: Some(offset), address });
            }
        }
        if out.is_empty() {
            let name = loader.find_symbol(probe).map(|n| addr2line::demangle_auto(n.into(), None).into_owned());
            out.push(plain(name));
        }
        out
    }

    /// The frames of `stack` in a process with `modules`.
    fn stack(&mut self, modules: &[Module], stack: Frames<'_>, exact_first: bool) -> Vec<Frame> {
        let mut out = Vec::new();
        for (i, addr) in stack.iter().enumerate() {
            let ret = !(i == 0 && exact_first);
            match modules.iter().find(|m| (m.start..m.end).contains(&addr)) {
                Some(m) => out.extend(self.frames_at(&m.path, addr - m.bias, addr, ret)),
                None => out.push(Frame {
                    function: None,
                    file: None,
                    line: None,
                    module: None,
                    offset: None,
                    address: addr,
                }),
            }
        }
        out
    }
}

/// A heap error with its stacks named.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ErrorReport {
    /// What went wrong (`heap-buffer-overflow`, …).
    pub kind: String,
    /// The process.
    pub pid: u32,
    /// The address accessed or freed.
    pub address: u64,
    /// The block's size (0 when no block is known).
    pub size: u64,
    /// `address - block`.
    pub offset: i64,
    /// The block's start (0 when none).
    pub block: u64,
    /// The thread that erred.
    pub thread: u32,
    /// Its stack.
    pub stack: Vec<Frame>,
    /// The thread that allocated the block.
    pub alloc_thread: Option<u32>,
    /// Where.
    pub alloc_stack: Option<Vec<Frame>>,
    /// The thread that freed it.
    pub free_thread: Option<u32>,
    /// Where (`None` when it was not freed).
    pub free_stack: Option<Vec<Frame>>,
}

impl ErrorReport {
    /// The report as AddressSanitizer would print it, `handler` naming who
    /// found the error.
    pub fn text(&self, handler: &str) -> String {
        let kind = ErrorKind::ALL.into_iter().find(|k| k.name() == self.kind).unwrap_or(ErrorKind::InvalidFree);
        let facts = Facts {
            pid: self.pid,
            handler,
            kind,
            address: self.address,
            block: self.block,
            size: self.size,
            offset: self.offset,
            thread: self.thread,
            alloc_thread: self.alloc_thread,
            free_thread: self.free_thread,
        };
        let mut out = String::new();
        let _ = text::error_report(&mut out, &facts, &mut |w, which| {
            let frames = match which {
                Which::Access => Some(&self.stack),
                Which::Alloc => self.alloc_stack.as_ref(),
                Which::Free => self.free_stack.as_ref(),
            };
            for (i, f) in frames.into_iter().flatten().enumerate() {
                writeln!(w, "{}", f.line(i))?;
            }
            Ok(())
        });
        out
    }
}

/// Blocks live at exit from one allocation stack.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LeakReport {
    /// Their bytes.
    pub bytes: u64,
    /// How many.
    pub blocks: u64,
    /// The process.
    pub pid: u32,
    /// Where they were allocated.
    pub stack: Vec<Frame>,
}

/// What a trace held, symbolized.
#[derive(Debug, Default)]
pub struct Trace {
    /// The errors, in the order found.
    pub errors: Vec<ErrorReport>,
    /// The leaks, largest first.
    pub leaks: Vec<LeakReport>,
    /// The notes (which unwinder, …), once each.
    pub notes: Vec<String>,
    /// Why reading stopped early, if it did (a damaged or cut trace).
    pub problem: Option<String>,
}

/// Read a trace (see [`crate::format`]) and symbolize it.
pub fn read_trace(bytes: &[u8], sym: &mut Symbolizer) -> Trace {
    let mut trace = Trace::default();
    let mut modules: HashMap<Origin, Vec<Module>> = HashMap::new();
    let mut last_was_module: HashMap<Origin, bool> = HashMap::new();
    for r in format::records(bytes) {
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                trace.problem = Some(e.to_string());
                break;
            }
        };
        let origin = match r {
            Record::Module(o, _) | Record::Error(o, _) | Record::Note(o, _) => o,
            Record::Leak { origin, .. } | Record::Sample { origin, .. } => origin,
        };
        let was_module = last_was_module.insert(origin, matches!(r, Record::Module(..))).unwrap_or(false);
        match r {
            Record::Module(_, m) => {
                let list = modules.entry(origin).or_default();
                if !was_module {
                    list.clear(); // a new module map starts
                }
                let path = String::from_utf8_lossy(m.path).into_owned();
                list.push(Module { start: m.start, end: m.end, bias: m.bias, path });
            }
            Record::Note(_, n) => {
                if !trace.notes.iter().any(|x| x == n) {
                    trace.notes.push(n.to_string());
                }
            }
            Record::Error(o, e) => {
                let ms = modules.get(&o).map_or(&[][..], Vec::as_slice);
                let known = |t: u32| (t != format::NO_THREAD).then_some(t);
                trace.errors.push(ErrorReport {
                    kind: e.kind.name().to_string(),
                    pid: o.pid,
                    address: e.address,
                    size: e.size,
                    offset: e.offset,
                    block: e.block,
                    thread: e.thread,
                    stack: sym.stack(ms, e.stack, e.exact_first),
                    alloc_thread: known(e.alloc_thread),
                    alloc_stack: known(e.alloc_thread).map(|_| sym.stack(ms, e.alloc_stack, false)),
                    free_thread: known(e.free_thread),
                    free_stack: e
                        .free_stack
                        .filter(|_| e.free_thread != format::NO_THREAD)
                        .map(|s| sym.stack(ms, s, false)),
                });
            }
            Record::Leak { origin, bytes, blocks, stack } => {
                let ms = modules.get(&origin).map_or(&[][..], Vec::as_slice);
                let stack = sym.stack(ms, stack, false);
                trace.leaks.push(LeakReport { bytes, blocks, pid: origin.pid, stack });
            }
            Record::Sample { .. } => {}
        }
    }
    trace.leaks = merged(std::mem::take(&mut trace.leaks));
    trace
}

/// A frame as a call site: function, file and line, or function, module
/// and offset.
type SiteKey = (Option<String>, Option<String>, Option<u32>, Option<u64>);

/// Leaks whose stacks name the same functions, files and lines (one call
/// site unrolled into several return addresses, say) as one; largest first.
fn merged(leaks: Vec<LeakReport>) -> Vec<LeakReport> {
    let key = |l: &LeakReport| -> Vec<SiteKey> {
        l.stack
            .iter()
            .map(|f| match (&f.function, &f.file, f.line) {
                (Some(_), Some(_), Some(_)) => (f.function.clone(), f.file.clone(), f.line, None),
                _ => (f.function.clone(), f.module.clone(), None, f.offset),
            })
            .collect()
    };
    let mut out: Vec<LeakReport> = Vec::new();
    let mut at: HashMap<(u32, Vec<_>), usize> = HashMap::new();
    for l in leaks {
        match at.get(&(l.pid, key(&l))) {
            Some(&i) => {
                out[i].bytes += l.bytes;
                out[i].blocks += l.blocks;
            }
            None => {
                at.insert((l.pid, key(&l)), out.len());
                out.push(l);
            }
        }
    }
    out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(b.blocks.cmp(&a.blocks)));
    out
}

/// LeakSanitizer's summary of the leaks: one paragraph per allocation
/// stack, largest first.
pub fn leaks_text(handler: &str, leaks: &[LeakReport]) -> String {
    let mut out = String::new();
    if leaks.is_empty() {
        return out;
    }
    let _ = writeln!(out, "=={}==memplug {handler}: blocks live at exit, by allocation stack", leaks[0].pid);
    for l in leaks {
        let noun = if l.blocks == 1 { "block" } else { "blocks" };
        let _ = writeln!(out, "\n{} bytes in {} {noun} allocated from:", l.bytes, l.blocks);
        for (i, f) in l.stack.iter().enumerate() {
            let _ = writeln!(out, "{}", f.line(i));
        }
    }
    let (bytes, blocks) = leaks.iter().fold((0, 0), |(b, n), l| (b + l.bytes, n + l.blocks));
    let _ = writeln!(out, "\nSUMMARY: memplug {handler}: {bytes} bytes live at exit in {blocks} blocks");
    out
}

/// `memplug symbolize`: `text` with every raw frame line
/// (`#N 0x… (module+0x…)`) replaced by its symbolized frames.
pub fn symbolize_text(text: &str, sym: &mut Symbolizer) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match text::parse_raw_frame(line) {
            Some((index, addr, path, offset)) if line != text::SYMBOLIZE_HINT => {
                let frames = sym.frames_at(path, offset, addr, true);
                let mut s = String::new();
                for (k, f) in frames.iter().enumerate() {
                    let n = if k == 0 { index.to_string() } else { format!("{index}.{k}") };
                    let l = f.line(index);
                    let _ = writeln!(s, "{}", l.replacen(&format!("#{index} "), &format!("#{n} "), 1));
                }
                out.push_str(&s);
            }
            _ if line == text::SYMBOLIZE_HINT => {}
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture;
    use crate::format::{ErrorOut, NO_THREAD};

    #[inline(never)]
    fn named_caller_for_the_test() -> capture::Stack {
        core::hint::black_box(capture::capture(8))
    }

    #[test]
    fn a_trace_of_this_process_names_this_function() {
        capture::init();
        let s = named_caller_for_the_test();
        let o = crate::emit::origin();
        let mut trace = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        crate::raw::maps::each_module(&mut |m| trace.extend_from_slice(format::module(&mut buf, o, m).unwrap()));
        let x = ErrorOut {
            kind: ErrorKind::DoubleFree,
            thread: 1,
            address: 0x10,
            block: 0x10,
            size: 8,
            alloc_thread: 1,
            free_thread: NO_THREAD,
            stack: s.frames(),
            alloc_stack: s.frames(),
            free_stack: None,
            exact_first: false,
        };
        trace.extend_from_slice(format::error(&mut buf, o, &x).unwrap());
        let t = read_trace(&trace, &mut Symbolizer::new());
        assert!(t.problem.is_none(), "{:?}", t.problem);
        let e = &t.errors[0];
        assert!(
            e.stack.iter().any(|f| f.function.as_deref().is_some_and(|n| n.contains("a_trace_of_this_process"))),
            "{e:#?}"
        );
        assert!(e.free_stack.is_none());
        let text = e.text("tracking");
        assert!(text.contains("double-free on address 0x10"), "{text}");
        assert!(text.contains("symbolize.rs:"), "{text}");
    }
}
