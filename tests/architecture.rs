//! The shape of the code, checked: the host's modules, those of the
//! Python package's native crate (`python/src`) and those of the interposer
//! (`preload/src`), form layers (each imports only from modules declared
//! before it in its `lib.rs`, so there is no circle of imports, and the
//! host's unsafe core `raw` sits beneath the front ends), the interposer's
//! unsafe code is only in its modules named `*_raw`, that the guide's copy of the host's layer list
//! (docs/src/architecture.md) names the same modules as `lib.rs`'s, and
//! that no source file grows past 450 lines before its tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod support;

/// The modules of the crate in `src` (relative to the repository), in
/// `lib.rs` order, which is the layer order.
fn layers(src: &str) -> Vec<String> {
    let lib = std::fs::read_to_string(support::root().join(src).join("lib.rs")).unwrap();
    lib.lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("pub mod ").or_else(|| l.strip_prefix("mod ")))
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The files of module `name` of the crate in `src`: `name.rs`, or
/// everything in `name/`.
fn module_files(src: &str, name: &str) -> Vec<PathBuf> {
    let src = support::root().join(src);
    let file = src.join(format!("{name}.rs"));
    if file.exists() { vec![file] } else { rust_files(&src.join(name)) }
}

/// The crate modules a file refers to (`crate::NAME`, and each NAME of
/// `crate::{NAME, ...}`, over lines if need be), outside comments.
fn references(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let code: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//"))
        .map(|l| l.split(" //").next().unwrap_or(l))
        .collect();
    let code = code.join("\n");
    let ident = |s: &str| -> String { s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect() };
    let mut found = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                let mut depth = 0;
                let end = group
                    .char_indices()
                    .find(|&(_, c)| {
                        depth += match c {
                            '{' => 1,
                            '}' => -1,
                            _ => 0,
                        };
                        depth < 0
                    })
                    .map_or(group.len(), |(k, _)| k);
                // The first name of each top-level item of the group.
                let mut depth = 0;
                let mut start = true;
                for (k, c) in group[..end].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 0 => start = true,
                        c if start && (c.is_ascii_alphanumeric() || c == '_') => {
                            found.push(ident(&group[k..]));
                            start = false;
                        }
                        _ => {}
                    }
                }
            }
            None => found.push(ident(rest)),
        }
    }
    found
}

/// Each module of the crate in `src` that uses one declared after it.
fn layer_violations(src: &str) -> Vec<String> {
    let layers = layers(src);
    let rank: BTreeMap<&str, usize> = layers.iter().enumerate().map(|(i, m)| (m.as_str(), i)).collect();
    let mut violations = Vec::new();
    for (i, module) in layers.iter().enumerate() {
        for file in module_files(src, module) {
            for target in references(&file) {
                match rank.get(target.as_str()) {
                    Some(&j) if j > i => violations.push(format!(
                        "{} (layer {i}, `{module}`) uses `crate::{target}` (layer {j}, above it)",
                        file.display()
                    )),
                    _ => {}
                }
            }
        }
    }
    violations
}

#[test]
fn modules_import_only_from_the_layers_below() {
    let layers = layers("host/src");
    assert!(layers.len() > 10, "lib.rs lists the modules: {layers:?}");
    let violations = layer_violations("host/src");
    assert!(violations.is_empty(), "imports against the layer order of lib.rs:\n{}", violations.join("\n"));
}

/// The modules at the top of the crate in `src`: its files but `lib.rs`,
/// and its folders (a module of files).
fn top_level_modules(src: &str) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(support::root().join(src))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| match p.extension() {
            Some(e) if e == "rs" => p.file_stem()?.to_str().map(str::to_string),
            None if p.is_dir() => p.file_name()?.to_str().map(str::to_string),
            _ => None,
        })
        .filter(|m| m != "lib")
        .collect();
    found.sort();
    found
}

#[test]
fn the_python_crates_modules_import_only_from_the_layers_below() {
    let layers = layers("python/src");
    assert!(layers.len() > 5, "python/src/lib.rs lists the modules: {layers:?}");
    let mut declared = layers.clone();
    declared.sort();
    assert_eq!(
        top_level_modules("python/src"),
        declared,
        "every file and folder of python/src is a module declared in its lib.rs"
    );
    let lib = std::fs::read_to_string(support::root().join("python/src/lib.rs")).unwrap();
    let docs: Vec<&str> =
        lib.lines().filter_map(|l| l.strip_prefix("//!")).map(|l| l.strip_prefix(' ').unwrap_or(l)).collect();
    let listed: Vec<String> = layer_list(&docs.join("\n"), "# Layers").into_iter().flat_map(|(_, m)| m).collect();
    assert_eq!(listed, layers, "python/src/lib.rs's `# Layers` list names its modules in the order they are declared");
    let violations = layer_violations("python/src");
    assert!(violations.is_empty(), "imports against the layer order of python/src/lib.rs:\n{}", violations.join("\n"));
}

#[test]
fn the_python_crates_unsafe_code_is_in_its_raw_modules_only() {
    let src = support::root().join("python/src");
    let raw = |m: &str| m.ends_with("_raw");
    let mut wrong = Vec::new();
    for file in rust_files(&src) {
        let module = file.file_stem().unwrap().to_str().unwrap();
        if has_unsafe_code(&file) && !raw(module) {
            wrong.push(format!("{} has unsafe code; `{module}` is not a `*_raw` module", file.display()));
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for pair in lines.windows(2).filter(|w| w[0] == "#[allow(unsafe_code)]") {
            let declared = pair[1].trim_start_matches("pub ").strip_prefix("mod ").and_then(|m| m.strip_suffix(';'));
            if !declared.is_some_and(raw) {
                wrong.push(format!(
                    "{} allows unsafe code in `{}`, whose name does not say so",
                    file.display(),
                    pair[1]
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "keep the unsafe code in modules named `*_raw`:\n{}", wrong.join("\n"));
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    assert!(lib.lines().any(|l| l.trim() == "#![deny(unsafe_code)]"), "python/src/lib.rs denies unsafe code");
}

#[test]
fn the_interposers_modules_import_only_from_the_layers_below() {
    let layers = layers("preload/src");
    assert!(layers.len() > 10, "preload/src/lib.rs lists the modules: {layers:?}");
    let mut files: Vec<String> = rust_files(&support::root().join("preload/src"))
        .iter()
        .filter_map(|f| f.file_stem()?.to_str().map(str::to_string))
        .filter(|m| m != "lib")
        .collect();
    files.sort();
    let mut declared = layers.clone();
    declared.sort();
    assert_eq!(files, declared, "every file of preload/src is a module declared in its lib.rs");
    let lib = std::fs::read_to_string(support::root().join("preload/src/lib.rs")).unwrap();
    let docs: Vec<&str> =
        lib.lines().filter_map(|l| l.strip_prefix("//!")).map(|l| l.strip_prefix(' ').unwrap_or(l)).collect();
    let listed: Vec<String> = layer_list(&docs.join("\n"), "# Layers").into_iter().flat_map(|(_, m)| m).collect();
    assert_eq!(listed, layers, "preload/src/lib.rs's `# Layers` list names its modules in the order they are declared");
    let violations = layer_violations("preload/src");
    assert!(violations.is_empty(), "imports against the layer order of preload/src/lib.rs:\n{}", violations.join("\n"));
}

/// Whether `file` has unsafe code outside comments: an `unsafe` block,
/// function, impl, trait or extern block, or an unsafe attribute
/// (`#[unsafe(no_mangle)]`); the type of an unsafe function pointer
/// (`unsafe extern "C" fn(...)`) is not unsafe code.
fn has_unsafe_code(file: &Path) -> bool {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines().map(str::trim).filter(|l| !l.starts_with("//")).map(|l| l.split(" //").next().unwrap_or(l)).any(|l| {
        l.match_indices("unsafe").any(|(i, _)| {
            let before = l[..i].chars().next_back();
            let rest = &l[i + "unsafe".len()..];
            let word = !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                && !rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
            let pointer_type =
                ["fn(", " fn(", " extern \"C\" fn(", " extern \"C-unwind\" fn("].iter().any(|t| rest.starts_with(t));
            word && !pointer_type
        })
    })
}

#[test]
fn the_interposers_unsafe_code_is_in_its_raw_modules_only() {
    let raw = |m: &str| m.ends_with("_raw") || m == "raw";
    let mut wrong = Vec::new();
    for module in layers("preload/src") {
        for file in module_files("preload/src", &module) {
            if has_unsafe_code(&file) && !raw(&module) {
                wrong.push(format!("{} has unsafe code; `{module}` is not a `*_raw` module", file.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "move the unsafe code to a module named `*_raw`:\n{}", wrong.join("\n"));
    let lib = std::fs::read_to_string(support::root().join("preload/src/lib.rs")).unwrap();
    assert!(lib.lines().any(|l| l.trim() == "#![deny(unsafe_code)]"), "preload/src/lib.rs denies unsafe code");
    assert!(!has_unsafe_code(&support::root().join("preload/src/lib.rs")), "preload/src/lib.rs declares modules only");
    let lines: Vec<&str> = lib.lines().map(str::trim).collect();
    for pair in lines.windows(2).filter(|w| w[0] == "#[allow(unsafe_code)]") {
        let module = pair[1].strip_prefix("mod ").and_then(|m| m.strip_suffix(';')).unwrap_or(pair[1]);
        assert!(raw(module), "preload/src/lib.rs allows unsafe code in `{module}`, whose name does not say so");
    }
}

#[test]
fn unsafe_code_is_told_from_unsafe_function_pointer_types() {
    let dir = std::env::temp_dir().join(format!("memplug-architecture-unsafe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        ("type F = unsafe extern \"C\" fn(usize) -> *mut u8;\n// unsafe { x }\nlet unsafe_ish = 1;\n", false),
        ("f: Option<unsafe fn(u8)>, // unsafe { no }\n", false),
        ("let x = unsafe { f() };\n", true),
        ("#[unsafe(no_mangle)]\npub extern \"C\" fn malloc() {}\n", true),
        ("unsafe impl Sync for S {}\n", true),
        ("pub unsafe extern \"C\" fn posix_memalign() {}\n", true),
    ];
    let found: Vec<bool> = cases
        .iter()
        .enumerate()
        .map(|(i, (text, _))| {
            let file = dir.join(format!("case{i}.rs"));
            std::fs::write(&file, text).unwrap();
            has_unsafe_code(&file)
        })
        .collect();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found, cases.iter().map(|c| c.1).collect::<Vec<_>>());
}

#[test]
fn references_read_single_names_groups_and_wrapped_groups() {
    let dir = std::env::temp_dir().join(format!("memplug-architecture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("sample.rs");
    std::fs::write(
        &file,
        "use crate::a::B;\n// use crate::commented;\nuse crate::{c, d::{E, F}};\nuse crate::{\n    g,\n    h::I,\n};\nlet x = crate::j::k(); // crate::k\n",
    )
    .unwrap();
    let found = references(&file);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found, ["a", "c", "d", "g", "h", "j"]);
}

#[test]
fn the_unsafe_core_imports_no_front_end() {
    let front_ends = ["handle", "handler", "buffer", "lock", "current", "registry", "check", "report", "load"];
    for file in module_files("host/src", "raw") {
        for target in references(&file) {
            assert!(!front_ends.contains(&target.as_str()), "{} uses crate::{target}", file.display());
        }
    }
}

#[test]
fn no_source_file_is_over_450_lines_before_its_tests() {
    let root = support::root();
    let mut dirs = vec![root.join("host/src"), root.join("abi/src"), root.join("python/src"), root.join("preload/src")];
    for plugin in std::fs::read_dir(root.join("plugins")).unwrap() {
        let src = plugin.unwrap().path().join("src");
        if src.is_dir() {
            dirs.push(src);
        }
    }
    let mut long = Vec::new();
    for file in dirs.iter().flat_map(|d| rust_files(d)) {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines = text.lines().take_while(|l| !l.starts_with("#[cfg(test)]")).count();
        if lines > 450 {
            long.push(format!("{}: {lines} lines", file.display()));
        }
    }
    assert!(long.is_empty(), "split these by concern:\n{}", long.join("\n"));
}

/// One numbered item of a layer list: its number and the modules it names.
type Layer = (u32, Vec<String>);

/// The numbered list after the line `heading` of `text` (comment markers
/// already stripped), up to the first blank line or heading after it: each
/// item's number and the modules it names. A module clause opens the item or
/// follows a `; `, and is one or more backticked names (linked or not, each
/// maybe `(private)`) joined by `, ` or ` and `, then ` — `; code spans
/// elsewhere in an item are not module names.
fn layer_list(text: &str, heading: &str) -> Vec<Layer> {
    let number = |l: &str| -> Option<(u32, String)> {
        let (n, rest) = l.trim_start().split_once(". ")?;
        Some((n.parse().ok()?, rest.to_string()))
    };
    let lines = text.lines().skip_while(|l| l.trim() != heading).skip(1).skip_while(|l| number(l).is_none());
    let mut items: Vec<(u32, String)> = Vec::new();
    for line in lines.take_while(|l| !l.trim().is_empty() && !l.starts_with('#')) {
        match (number(line), items.last_mut()) {
            (Some(item), _) => items.push(item),
            (None, Some((_, body))) => body.push_str(&format!(" {}", line.trim())),
            (None, None) => unreachable!("the list starts at a numbered line"),
        }
    }
    items.into_iter().map(|(n, body)| (n, body.split("; ").flat_map(module_clause).collect())).collect()
}

/// The module names a clause opens with (`[`a`], `b` (private) and `c` — ...`),
/// or none.
fn module_clause(clause: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = clause.trim_start();
    loop {
        let linked = rest.strip_prefix('[');
        let Some(after) = linked.unwrap_or(rest).strip_prefix('`') else { return Vec::new() };
        let Some((name, after)) = after.split_once('`') else { return Vec::new() };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Vec::new();
        }
        let after = if linked.is_some() { after.strip_prefix(']').unwrap_or(after) } else { after };
        names.push(name.to_string());
        rest = after.strip_prefix(" (private)").unwrap_or(after);
        if rest.starts_with(" — ") {
            return names;
        }
        match rest.strip_prefix(", ").or_else(|| rest.strip_prefix(" and ")) {
            Some(next) => rest = next,
            None => return Vec::new(),
        }
    }
}

/// The `# Layers` list of the host's `lib.rs` docs.
fn host_layer_list() -> Vec<Layer> {
    let lib = std::fs::read_to_string(support::root().join("host/src/lib.rs")).unwrap();
    let docs: Vec<&str> =
        lib.lines().filter_map(|l| l.strip_prefix("//!")).map(|l| l.strip_prefix(' ').unwrap_or(l)).collect();
    layer_list(&docs.join("\n"), "# Layers")
}

#[test]
fn the_guides_layer_list_names_the_modules_of_lib_rs() {
    let lib = host_layer_list();
    assert!(lib.len() > 10, "host/src/lib.rs's `# Layers` list is read: {lib:?}");
    let guide = std::fs::read_to_string(support::root().join("docs/src/architecture.md")).unwrap();
    let guide = layer_list(&guide, "## The layers");
    let show = |l: Option<&Layer>| l.map_or("(no item)".to_string(), |(n, m)| format!("{n}. {}", m.join(", ")));
    let differences: Vec<String> = (0..lib.len().max(guide.len()))
        .filter(|&i| lib.get(i) != guide.get(i))
        .map(|i| {
            format!("host/src/lib.rs has {}; docs/src/architecture.md has {}", show(lib.get(i)), show(guide.get(i)))
        })
        .collect();
    assert!(
        differences.is_empty(),
        "docs/src/architecture.md's layer list differs from host/src/lib.rs's `# Layers` (copy it):\n{}",
        differences.join("\n")
    );
}

#[test]
fn layer_lists_read_linked_private_and_joined_names_only() {
    let text = "intro\n\n## The layers\nSome words.\n\n0. `a` — imports nothing, `not_a_module`;\n\
                1. [`b`] — one; `c` (private) — two\n   (wrapped); and `d`;\n2. `e`, `f` (private) and [`g`]\n   \
                — three; [`H`] — `x`, `y` and `z` say;\n10. `i`: no dash; `j` — four\n\nafter `k` — five\n";
    let found = layer_list(text, "## The layers");
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        found,
        [(0, names(&["a"])), (1, names(&["b", "c"])), (2, names(&["e", "f", "g", "H"])), (10, names(&["j"]))]
    );
}
