//! A [`HeapProfile`] as a pprof [`Profile`]: one sample per allocation
//! stack with the six values of [`SAMPLE_TYPES`] (estimates, rounded), the
//! process's modules as mappings, each return address a location whose
//! lines are its function (inlined calls first) by the [`Symbolizer`], and
//! `peak_inuse_space` the type shown by default.

use super::heap::{HeapProfile, Module, SAMPLE_TYPES};
use super::proto::{Function, Line, Location, Mapping, Profile, Sample, ValueType};
use crate::symbolize::Symbolizer;
use std::collections::HashMap;

/// The sample type pprof and speedscope show first.
pub const DEFAULT_SAMPLE_TYPE: &str = "peak_inuse_space";

/// The string table being built.
struct Strings {
    list: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        Strings { list: vec![String::new()], index: HashMap::from([(String::new(), 0)]) }
    }

    fn id(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.list.len() as i64;
        self.list.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// Locations and functions, each made once.
struct Places {
    locations: Vec<Location>,
    at: HashMap<u64, u64>,
    functions: Vec<Function>,
    function_at: HashMap<(i64, i64), u64>,
}

/// `h` as a pprof profile, its frames named by `sym`, with `comments`.
pub fn to_pprof(h: &HeapProfile, sym: &mut Symbolizer, comments: &[String]) -> Profile {
    let mut strings = Strings::new();
    let sample_type: Vec<ValueType> =
        SAMPLE_TYPES.iter().map(|(t, u)| ValueType { r#type: strings.id(t), unit: strings.id(u) }).collect();
    let mut mapping: Vec<Mapping> = h
        .modules
        .iter()
        .zip(1u64..)
        .map(|(m, id)| Mapping {
            id,
            memory_start: m.start,
            memory_limit: m.end,
            file_offset: m.start.wrapping_sub(m.bias),
            filename: strings.id(&m.path),
            build_id: strings.id(&m.build_id.iter().map(|b| format!("{b:02x}")).collect::<String>()),
            ..Mapping::default()
        })
        .collect();
    let mut places =
        Places { locations: Vec::new(), at: HashMap::new(), functions: Vec::new(), function_at: HashMap::new() };
    let mut sample = Vec::new();
    for s in &h.stacks {
        if s.values.iter().all(|&v| v.round() == 0.0) {
            continue;
        }
        let location_id = s
            .stack
            .iter()
            .map(|&addr| location(addr, &h.modules, &mut mapping, &mut places, &mut strings, sym))
            .collect();
        let value = s.values.iter().map(|v| v.round() as i64).collect();
        sample.push(Sample { location_id, value, label: Vec::new() });
    }
    let comment = comments.iter().map(|c| strings.id(c)).collect();
    let default_sample_type = strings.id(DEFAULT_SAMPLE_TYPE);
    let period_type = Some(ValueType { r#type: strings.id("space"), unit: strings.id("bytes") });
    let time_nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    Profile {
        sample_type,
        sample,
        mapping,
        location: places.locations,
        function: places.functions,
        string_table: strings.list,
        time_nanos,
        period_type,
        period: i64::try_from(h.rate).unwrap_or(i64::MAX),
        comment,
        default_sample_type,
        ..Profile::default()
    }
}

/// The location of return address `addr` (made on first use).
fn location(
    addr: u64,
    modules: &[Module],
    mapping: &mut [Mapping],
    places: &mut Places,
    strings: &mut Strings,
    sym: &mut Symbolizer,
) -> u64 {
    if let Some(&id) = places.at.get(&addr) {
        return id;
    }
    let found = modules.iter().position(|m| (m.start..m.end).contains(&addr));
    // (function, file, line); a frame without a name is called by where
    // it is (`module+0x…`, or the address), so that every tool shows it.
    let mut names: Vec<(String, Option<String>, Option<u32>)> = Vec::new();
    if let Some(i) = found {
        let m = &modules[i];
        let offset = addr - m.bias;
        let frames = sym.frames_at(&m.path, offset, addr, true);
        let map = &mut mapping[i];
        map.has_functions |= frames.iter().any(|f| f.function.is_some());
        map.has_filenames |= frames.iter().any(|f| f.file.is_some());
        map.has_line_numbers |= frames.iter().any(|f| f.line.is_some());
        map.has_inline_frames |= frames.len() > 1;
        let base = m.path.rsplit('/').next().unwrap_or(&m.path);
        for f in frames {
            let name = f.function.unwrap_or_else(|| format!("{base}+{offset:#x}"));
            names.push((name, f.file, f.line));
        }
    } else {
        names.push((format!("{addr:#x}"), None, None));
    }
    let line = names
        .into_iter()
        .map(|(name, file, line)| {
            let key = (strings.id(&name), file.as_deref().map_or(0, |f| strings.id(f)));
            let next = places.functions.len() as u64 + 1;
            let function_id = *places.function_at.entry(key).or_insert(next);
            if function_id == next {
                places.functions.push(Function {
                    id: next,
                    name: key.0,
                    system_name: key.0,
                    filename: key.1,
                    start_line: 0,
                });
            }
            Line { function_id, line: line.map_or(0, i64::from), column: 0 }
        })
        .collect();
    let id = places.locations.len() as u64 + 1;
    places.locations.push(Location {
        id,
        mapping_id: found.map_or(0, |i| i as u64 + 1),
        // A return address: the call is the byte before it.
        address: addr.saturating_sub(1),
        line,
        is_folded: false,
    });
    places.at.insert(addr, id);
    id
}
