//! The shape of the code, checked: the host's modules form layers (each
//! imports only from modules declared before it in `lib.rs`, so there is no
//! circle of imports, and the unsafe core `raw` sits beneath the front ends),
//! and no source file grows past 450 lines before its tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod support;

/// The host's modules in `lib.rs` order, which is the layer order.
fn layers() -> Vec<String> {
    let lib = std::fs::read_to_string(support::root().join("host/src/lib.rs")).unwrap();
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

/// The files of module `name`: `name.rs`, or everything in `name/`.
fn module_files(name: &str) -> Vec<PathBuf> {
    let src = support::root().join("host/src");
    let file = src.join(format!("{name}.rs"));
    if file.exists() { vec![file] } else { rust_files(&src.join(name)) }
}

/// The crate modules a file refers to (`crate::NAME`), outside comments.
fn references(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut found = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
        let code = line.split(" //").next().unwrap_or(line);
        for (i, _) in code.match_indices("crate::") {
            let rest = &code[i + "crate::".len()..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            found.push(name);
        }
    }
    found
}

#[test]
fn modules_import_only_from_the_layers_below() {
    let layers = layers();
    assert!(layers.len() > 10, "lib.rs lists the modules: {layers:?}");
    let rank: BTreeMap<&str, usize> = layers.iter().enumerate().map(|(i, m)| (m.as_str(), i)).collect();
    let mut violations = Vec::new();
    for (i, module) in layers.iter().enumerate() {
        for file in module_files(module) {
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
    assert!(violations.is_empty(), "imports against the layer order of lib.rs:\n{}", violations.join("\n"));
}

#[test]
fn the_unsafe_core_imports_no_front_end() {
    let front_ends = ["handle", "handler", "buffer", "lock", "current", "registry", "check", "report", "load"];
    for file in module_files("raw") {
        for target in references(&file) {
            assert!(!front_ends.contains(&target.as_str()), "{} uses crate::{target}", file.display());
        }
    }
}

#[test]
fn no_source_file_is_over_450_lines_before_its_tests() {
    let root = support::root();
    let mut dirs = vec![root.join("host/src"), root.join("abi/src")];
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
