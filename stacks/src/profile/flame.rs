//! A flame graph of one sample type of a pprof [`Profile`] (Brendan
//! Gregg's SVG, drawn by `inferno`): each stack from its outermost frame
//! up, inlined calls as frames of their own, a frame's width its share of
//! the total.

use super::proto::{Function, Location, Profile};
use std::collections::HashMap;

/// The flame graph of `profile`'s sample type `sample_type` as an SVG,
/// headed `title` and `subtitle`; `None` when no sample has a value of it
/// (a flame graph of nothing).
pub fn flame_graph(profile: &Profile, sample_type: &str, title: &str, subtitle: &str) -> Option<Vec<u8>> {
    let index = profile.sample_index(sample_type)?;
    let locations: HashMap<u64, &Location> = profile.location.iter().map(|l| (l.id, l)).collect();
    let functions: HashMap<u64, &Function> = profile.function.iter().map(|f| (f.id, f)).collect();
    let mut stacks: HashMap<Vec<&str>, i64> = HashMap::new();
    for s in &profile.sample {
        let value = s.value.get(index).copied().unwrap_or(0);
        if value <= 0 {
            continue;
        }
        let mut stack = Vec::new();
        for id in s.location_id.iter().rev() {
            let Some(loc) = locations.get(id) else { continue };
            for line in loc.line.iter().rev() {
                if let Some(f) = functions.get(&line.function_id) {
                    stack.push(profile.string(f.name));
                }
            }
        }
        *stacks.entry(stack).or_default() += value;
    }
    if stacks.is_empty() {
        return None;
    }
    // The folded form: frames joined by `;` (which a name must not hold),
    // then the value.
    let mut lines: Vec<String> = stacks
        .into_iter()
        .map(|(stack, value)| {
            let frames: Vec<String> = stack.iter().map(|f| f.replace(';', ":")).collect();
            format!("{} {value}", frames.join(";"))
        })
        .collect();
    lines.sort();
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    options.subtitle = Some(subtitle.to_string());
    options.count_name = profile.string(profile.sample_type[index].unit).to_string();
    options.colors = inferno::flamegraph::color::Palette::Basic(inferno::flamegraph::color::BasicPalette::Mem);
    options.hash = true;
    options.deterministic = true;
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg).ok()?;
    Some(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture;
    use crate::format::Origin;
    use crate::profile::heap::{HeapProfile, Module, ProcessSamples, Sample};
    use crate::profile::{pprof, proto};
    use crate::symbolize::Symbolizer;

    #[inline(never)]
    fn allocating_function_for_the_profile_test() -> capture::Stack {
        core::hint::black_box(capture::capture(16))
    }

    #[test]
    fn a_profile_of_this_process_names_its_functions_in_pprof_and_the_flame_graph() {
        capture::init();
        let stack = allocating_function_for_the_profile_test();
        let mut modules = Vec::new();
        crate::raw::maps::each_module(&mut |m| {
            let path = String::from_utf8_lossy(m.path).into_owned();
            modules.push(Module { start: m.start, end: m.end, bias: m.bias, path, build_id: m.build_id.to_vec() });
        });
        let frames: Vec<u64> = stack.frames().iter().map(|&a| a as u64).collect();
        let sample = |bytes, allocated, freed| Sample {
            bytes,
            rate: 0,
            allocated,
            freed,
            inherited: false,
            stack: frames.clone(),
        };
        let p = ProcessSamples {
            origin: Origin { pid: 9, nonce: 9 },
            modules,
            samples: vec![sample(4096, 1, Some(2)), sample(1000, 3, None)],
            notes: Vec::new(),
        };
        let h = HeapProfile::new(&p);
        let bytes = proto::encode_gz(&pprof::to_pprof(&h, &mut Symbolizer::new(), &["a comment".into()]));
        let read = proto::decode_gz(&bytes).unwrap();
        let name = "allocating_function_for_the_profile_test";
        assert_eq!(read.total_in("alloc_space", name), 5096);
        assert_eq!(read.total_in("inuse_space", name), 1000);
        assert_eq!(read.total_in("peak_inuse_space", name), 4096, "the first block alone was the peak");
        assert_eq!(read.string(read.default_sample_type), pprof::DEFAULT_SAMPLE_TYPE);
        assert_eq!(read.sample_type.len(), 6);
        assert!(read.mapping.iter().any(|m| m.has_functions && m.has_line_numbers));
        let svg = String::from_utf8(flame_graph(&read, "peak_inuse_space", "title", "sub").unwrap()).unwrap();
        assert!(svg.starts_with("<?xml") && svg.contains(name), "{}", &svg[..svg.len().min(400)]);
        assert!(flame_graph(&read, "no_such_type", "t", "s").is_none());
        assert!(proto::decode_gz(b"not gzip").is_err());
    }
}
