//! The shape of the code, checked, in every crate of the repository (the
//! ABI crate, the host, each plugin, the interposer, the C API and the
//! Python package's native crate): a crate's folder modules are its wings,
//! and a wing imports only from the wings (and modules) its crate root
//! declares before it; inside a wing there is no circle of imports; at
//! every module level a module's children import only from the siblings
//! declared before them (a failure names the reference, and the circle it
//! closes); a `# Layers` list in a module's docs follows its declarations;
//! every source file is a module the test reads; no module's docs carry a
//! hand-written "Imports ..." line (this test is the truth); each of the
//! host's wings keeps its unsafe code in its own `raw`, which imports
//! nothing of the wing's front ends; the call core the host shares with
//! its interposer (the `memplug-callcore` crate: the vtable, the direct
//! calls, the built-in handler, the aligned-block arithmetic, the table of
//! plain C functions and its trampolines) is `no_std`, needs neither an
//! allocator nor anything of `std` that `core` lacks, and sits under both,
//! over the ABI alone; the interposer's, the call core's, the C API's and
//! the Python crate's unsafe code is only in modules named `*_raw`; the
//! guide's copies of the host's layer lists (docs/src/architecture.md) name
//! the same modules as `lib.rs`'s and each wing's `mod.rs`; and no source
//! file grows past 450 lines before its tests (but a file that keeps one
//! type's whole API, named in `ONE_TYPE_WHOLE` with a cap of its own).
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

mod support;
#[path = "support/modules.rs"]
mod modules;

use modules::{ModPath, Reference, Tree};

/// Every module tree of the repository: each root of each crate.
fn trees() -> Vec<Tree> {
    let crates = modules::crates(&support::root());
    assert!(crates.len() > 8, "the crates are found by their Cargo.toml: {crates:?}");
    crates.iter().flat_map(|(_, roots)| roots.iter().map(|r| modules::read_tree(r))).collect()
}

/// The tree of the crate root `root` (relative to the repository).
fn tree(root: &str) -> Tree {
    modules::read_tree(&support::root().join(root))
}

/// `path` as written in code, `crate` for the root.
fn show(path: &[String]) -> String {
    if path.is_empty() { "crate".to_string() } else { path.join("::") }
}

/// A file's name relative to the repository.
fn rel(file: &Path) -> String {
    file.strip_prefix(support::root()).unwrap_or(file).display().to_string()
}

/// Where the references of `tree` break the layer rule: for each parent
/// module, its children's declaration order is their layer order, and a
/// child refers only to earlier siblings (and to anything outside the
/// parent). Each breach names the circle it closes, if it closes one.
fn layer_breaches(tree: &Tree) -> Vec<String> {
    // Per parent, each (child, sibling it refers to) with its first reference.
    let mut edges: BTreeMap<(ModPath, String, String), (Reference, usize)> = BTreeMap::new();
    for r in tree.references() {
        let k = r.from.iter().zip(&r.to).take_while(|(a, b)| a == b).count();
        if k < r.from.len() && k < r.to.len() {
            let key = (r.from[..k].to_vec(), r.from[k].clone(), r.to[k].clone());
            edges.entry(key).or_insert((r, 0)).1 += 1;
        }
    }
    let mut breaches = Vec::new();
    for ((parent, a, b), (r, count)) in &edges {
        let children = &tree.modules[parent].children;
        let rank = |m: &str| children.iter().position(|c| c == m).unwrap();
        if rank(b) < rank(a) {
            continue;
        }
        // A way back from `b` to `a` among the siblings, if there is one.
        let mut came: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = VecDeque::from([b.as_str()]);
        while let Some(m) = queue.pop_front() {
            let next = edges.keys().filter(|(p, x, _)| p == parent && x == m).map(|(_, _, y)| y.as_str());
            for y in next {
                if y != b && !came.contains_key(y) {
                    came.insert(y, m);
                    queue.push_back(y);
                }
            }
        }
        let circle = came.contains_key(a.as_str()).then(|| {
            let mut way = vec![a.as_str()];
            while *way.last().unwrap() != b {
                way.push(came[way.last().unwrap()]);
            }
            way.reverse();
            format!(" — a circle: {a} → {}", way.join(" → "))
        });
        let others = if *count > 1 { format!(" (and {} more)", count - 1) } else { String::new() };
        breaches.push(format!(
            "{}:{}: `{}` in `{}` refers to `{}`, declared after `{a}` in {}{others}{}",
            rel(&r.file),
            r.line,
            r.text,
            show(&r.from),
            show(&r.to),
            rel(&tree.modules[parent].file),
            circle.unwrap_or_default()
        ));
    }
    // For each parent with breaches, an order of its children that has none.
    let parents: BTreeSet<&ModPath> = edges.keys().map(|(p, _, _)| p).collect();
    for parent in parents {
        let children = &tree.modules[parent].children;
        let uses = |a: &str| -> Vec<&String> {
            edges.keys().filter(|(p, x, _)| p == parent && x == a).map(|(_, _, y)| y).collect()
        };
        let upward = children.iter().enumerate().any(|(i, a)| uses(a).iter().any(|b| !children[..i].contains(b)));
        let mut order: Vec<&String> = Vec::new();
        while upward && order.len() < children.len() {
            let next = children.iter().find(|a| !order.contains(a) && uses(a).iter().all(|b| order.contains(b)));
            let Some(next) = next else { break };
            order.push(next);
        }
        if upward && order.len() == children.len() {
            let order: Vec<&str> = order.iter().map(|m| m.as_str()).collect();
            breaches.push(format!(
                "{}: an order without breaches: {}",
                rel(&tree.modules[parent].file),
                order.join(", ")
            ));
        }
    }
    breaches
}

#[test]
fn every_modules_children_import_only_from_earlier_siblings() {
    let mut breaches = Vec::new();
    for tree in trees() {
        breaches.extend(layer_breaches(&tree));
    }
    assert!(
        breaches.is_empty(),
        "each module's children are its layers, in declaration order; these refer upwards:\n{}",
        breaches.join("\n")
    );
}

#[test]
fn every_source_file_is_a_module_the_test_reads() {
    let mut read = BTreeSet::new();
    let mut dirs = BTreeSet::new();
    for tree in trees() {
        dirs.insert(tree.root.parent().unwrap().to_path_buf());
        read.extend(tree.files());
    }
    let unread: Vec<String> = dirs
        .iter()
        .flat_map(|d| rust_files(d))
        .filter(|f| !read.contains(f) && !f.components().any(|c| c.as_os_str() == "bin"))
        .map(|f| rel(&f))
        .collect();
    assert!(unread.is_empty(), "files that no crate root reaches through its `mod` items:\n{}", unread.join("\n"));
}

#[test]
fn layer_lists_in_module_docs_follow_the_declarations() {
    let mut checked = 0;
    for tree in trees() {
        for (path, module) in &tree.modules {
            let text = std::fs::read_to_string(&module.file).unwrap();
            let docs: Vec<&str> = text
                .lines()
                .map(str::trim_start)
                .filter_map(|l| l.strip_prefix("//!"))
                .map(|l| l.strip_prefix(' ').unwrap_or(l))
                .collect();
            let docs = docs.join("\n");
            if path.is_empty() || tree.modules[&path[..path.len() - 1]].file != module.file {
                let listed: Vec<String> = layer_list(&docs, "# Layers").into_iter().flat_map(|(_, m)| m).collect();
                if !listed.is_empty() {
                    checked += 1;
                    assert_eq!(
                        listed,
                        module.children,
                        "{}'s `# Layers` list names its modules in the order they are declared",
                        rel(&module.file)
                    );
                }
            }
        }
    }
    assert!(checked >= 5, "the layer lists of host, raw, abi, preload and capi are read");
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
    for (path, module) in &tree("preload/src/lib.rs").modules {
        if let Some(top) = path.first()
            && has_unsafe_code(&module.file)
            && !raw(top)
        {
            wrong.push(format!("{} has unsafe code; `{top}` is not a `*_raw` module", rel(&module.file)));
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

/// Where the crate rooted at `root` (relative to the repository) has unsafe
/// code outside its modules named `*_raw`, or lets a module whose name does
/// not say so allow it; and that its root denies unsafe code and declares
/// modules only.
fn unsafe_only_in_raw_modules(root: &str) {
    let raw = |m: &str| m.ends_with("_raw");
    let mut wrong = Vec::new();
    let tree = tree(root);
    assert!(tree.modules.len() > 5, "{root}'s modules are read");
    for (path, module) in &tree.modules {
        if let Some(top) = path.first()
            && has_unsafe_code(&module.file)
            && !raw(top)
        {
            wrong.push(format!("{} has unsafe code; `{top}` is not a `*_raw` module", rel(&module.file)));
        }
    }
    for (path, module) in &tree.modules {
        let text = std::fs::read_to_string(&module.file).unwrap();
        if let Some(top) = path.first()
            && text.lines().any(|l| l.trim() == "#![allow(unsafe_code)]")
            && !raw(top)
        {
            wrong.push(format!("{} allows unsafe code; `{top}` is not a `*_raw` module", rel(&module.file)));
        }
    }
    assert!(wrong.is_empty(), "move the unsafe code to a module named `*_raw`:\n{}", wrong.join("\n"));
    let lib = std::fs::read_to_string(support::root().join(root)).unwrap();
    assert!(lib.lines().any(|l| l.trim() == "#![deny(unsafe_code)]"), "{root} denies unsafe code");
    assert!(!has_unsafe_code(&support::root().join(root)), "{root} declares modules only");
    let lines: Vec<&str> = lib.lines().map(str::trim).collect();
    for pair in lines.windows(2).filter(|w| w[0] == "#[allow(unsafe_code)]") {
        let module = pair[1].trim_start_matches("pub ").strip_prefix("mod ").and_then(|m| m.strip_suffix(';'));
        let module = module.unwrap_or(pair[1]);
        assert!(raw(module), "{root} allows unsafe code in `{module}`, whose name does not say so");
    }
}

#[test]
fn the_c_apis_unsafe_code_is_in_its_raw_modules_only() {
    unsafe_only_in_raw_modules("capi/src/lib.rs");
}

#[test]
fn the_call_cores_unsafe_code_is_in_its_raw_modules_only() {
    unsafe_only_in_raw_modules("callcore/src/lib.rs");
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
fn each_wings_unsafe_core_imports_no_front_end() {
    let tree = tree("host/src/lib.rs");
    let root = &tree.modules[&Vec::new()].children;
    let wings = ["heap", "admit", "isolate"];
    for wing in wings {
        assert!(root.contains(&wing.to_string()), "host/src/lib.rs declares the wing `{wing}`");
        let children = &tree.modules[&vec![wing.to_string()]].children;
        assert!(children.contains(&"raw".to_string()), "the wing `{wing}` has its own `raw`");
    }
    for r in tree.references() {
        let (Some(wing), Some(raw)) = (r.from.first(), r.from.get(1)) else { continue };
        if !wings.contains(&wing.as_str()) || raw != "raw" {
            continue;
        }
        let children = &tree.modules[&vec![wing.clone()]].children;
        let rank = |m: &str| children.iter().position(|c| c == m);
        let front_end = r.to.first() == Some(wing) && r.to.get(1).is_some_and(|m| rank(m) > rank("raw"));
        let above =
            r.to.first().is_some_and(|m| root.iter().position(|c| c == m) > root.iter().position(|c| c == wing));
        assert!(
            !front_end && !above,
            "{}:{}: the unsafe core of `{wing}` uses `{}`, a front end",
            rel(&r.file),
            r.line,
            r.text
        );
    }
}

/// The names in `file` (before its tests, outside comments) that a
/// `no_std` crate without an allocator would not have: allocating types
/// and macros, and `std` paths other than those `core` has too.
fn needs_std_or_alloc(file: &Path) -> Vec<String> {
    let core = ["std::ptr", "std::mem", "std::fmt", "std::ffi::c_void", "std::ffi::CStr", "std::sync::atomic"];
    let allocating = ["Vec", "String", "Box", "format!", "vec!", "to_string", "to_owned", "CString", "libloading"];
    let text = std::fs::read_to_string(file).unwrap();
    let mut found = BTreeSet::new();
    for line in text.lines().take_while(|l| !l.starts_with("#[cfg(test)]")).map(str::trim) {
        if line.starts_with("//") {
            continue;
        }
        for (i, _) in line.match_indices("std::") {
            let before = line[..i].chars().next_back();
            let path: String =
                line[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':').collect();
            if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                && !core.iter().any(|c| path.starts_with(c))
                && path != "std::"
            {
                found.insert(path);
            }
        }
        let words: Vec<&str> = line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '!')).collect();
        found.extend(words.iter().filter(|w| allocating.contains(w)).map(|w| w.to_string()));
    }
    found.into_iter().collect()
}

#[test]
fn the_heaps_call_core_needs_no_allocator() {
    // The vtable and the calls through it, the direct calls copied out of
    // it, the built-in handler, the aligned-block arithmetic, the table of
    // plain C functions with its reader and trampolines: what the
    // interposer, which may not allocate, shares with the host (the
    // memplug-callcore crate).
    let lib = std::fs::read_to_string(support::root().join("callcore/src/lib.rs")).unwrap();
    assert!(lib.lines().any(|l| l.trim() == "#![no_std]"), "callcore/src/lib.rs is no_std");
    let mut wrong = Vec::new();
    for file in rust_files(&support::root().join("callcore/src")) {
        for what in needs_std_or_alloc(&file) {
            wrong.push(format!("{}: uses `{what}`", rel(&file)));
        }
        let text = std::fs::read_to_string(&file).unwrap();
        if text.lines().any(|l| l.trim_start().starts_with("extern crate alloc")) {
            wrong.push(format!("{}: links `alloc`", rel(&file)));
        }
    }
    let names: Vec<String> = rust_files(&support::root().join("callcore/src"))
        .iter()
        .map(|f| f.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    for name in ["vtable_raw", "direct_raw", "aligned_raw", "builtin_raw", "symbols_raw"] {
        assert!(names.iter().any(|n| n == name), "callcore/src/{name}.rs is read: {names:?}");
    }
    assert!(wrong.is_empty(), "the heap's call core is no_std and needs no allocator:\n{}", wrong.join("\n"));
    let dir = std::env::temp_dir().join(format!("memplug-architecture-alloc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let case = dir.join("case.rs");
    std::fs::write(
        &case,
        "use std::ptr::NonNull;\n// String in a comment\nfn f() -> Vec<u8> { format!(\"x\"); std::fs::read(\"a\") }\n\
         #[cfg(test)]\nmod tests { fn g() -> String { String::new() } }\n",
    )
    .unwrap();
    let found = needs_std_or_alloc(&case);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found, ["Vec", "format!", "std::fs::read"], "allocating names and std-only paths are found");
}

/// The workspace crates `manifest` (a Cargo.toml, relative to the
/// repository) depends on, by package name, in any dependency table.
fn workspace_dependencies(manifest: &str) -> Vec<String> {
    let text = std::fs::read_to_string(support::root().join(manifest)).unwrap();
    let ours = ["memplug", "memplug-abi", "memplug-callcore", "memplug-preload", "memplug-capi", "memplug-stacks"];
    let mut out = Vec::new();
    let mut in_deps = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line.ends_with("dependencies]");
            continue;
        }
        let name = line.split(['=', '.', ' ']).next().unwrap_or("");
        if in_deps && ours.contains(&name) && !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
    }
    out
}

#[test]
fn the_call_core_sits_under_the_host_and_the_interposer() {
    // The crates in order, bottom first: the ABI, the call core, then the
    // host and the interposer beside each other over it. No crate depends
    // on one above it, so there is no circle of crates.
    assert_eq!(workspace_dependencies("callcore/Cargo.toml"), ["memplug-abi"], "the call core uses the ABI only");
    let host = workspace_dependencies("Cargo.toml");
    assert!(host.iter().any(|d| d == "memplug-callcore"), "the host holds the call core: {host:?}");
    let preload = workspace_dependencies("preload/Cargo.toml");
    assert!(preload.iter().any(|d| d == "memplug-callcore"), "the interposer forwards to the call core: {preload:?}");
    assert!(!preload.iter().any(|d| d == "memplug"), "the interposer is not a second host: {preload:?}");
    for file in rust_files(&support::root().join("callcore/src")) {
        let text = std::fs::read_to_string(&file).unwrap();
        for above in ["memplug::", "memplug_preload::", "crate::heap", "crate::setup"] {
            assert!(
                !text.lines().any(|l| !l.trim_start().starts_with("//") && l.contains(above)),
                "{} refers to `{above}`, a crate above the call core",
                rel(&file)
            );
        }
    }
}

/// The wings of `tree`: its root's children that are folders (`x/mod.rs`).
fn wings(tree: &Tree) -> Vec<String> {
    let root = &tree.modules[&Vec::new()];
    root.children
        .iter()
        .filter(|c| {
            let file = &tree.modules[&vec![c.to_string()]].file;
            file != &root.file && file.file_name().is_some_and(|n| n == "mod.rs")
        })
        .cloned()
        .collect()
}

/// Where a wing of `tree` imports from a module its crate root declares
/// after it (a wing above it, or a module on top): each such import named.
fn wing_breaches(tree: &Tree) -> Vec<String> {
    let root = &tree.modules[&Vec::new()];
    let rank = |m: &str| root.children.iter().position(|c| c == m);
    let wings = wings(tree);
    let mut out = Vec::new();
    for r in tree.references() {
        let (Some(a), Some(b)) = (r.from.first(), r.to.first()) else { continue };
        if wings.contains(a) && rank(b) > rank(a) {
            let what = if wings.contains(b) { "a wing" } else { "a module" };
            out.push(format!(
                "{}:{}: `{}` in `{}` imports from `{b}`, {what} above the wing `{a}` ({} declares `{b}` after `{a}`)",
                rel(&r.file),
                r.line,
                r.text,
                show(&r.from),
                rel(&root.file)
            ));
        }
    }
    out
}

/// The circles of imports among the modules of each wing of `tree` (a
/// module's nested modules count as the module): each named with the
/// import that closes it.
fn circles_in_wings(tree: &Tree) -> Vec<String> {
    let mut out = Vec::new();
    for wing in wings(tree) {
        // module -> module it imports, with the first import seen.
        let mut edges: BTreeMap<(String, String), Reference> = BTreeMap::new();
        for r in tree.references() {
            if r.from.first() == Some(&wing)
                && r.to.first() == Some(&wing)
                && let (Some(a), Some(b)) = (r.from.get(1), r.to.get(1))
                && a != b
            {
                edges.entry((a.clone(), b.clone())).or_insert(r);
            }
        }
        let mut named: BTreeSet<BTreeSet<String>> = BTreeSet::new();
        for ((a, b), r) in &edges {
            // A way from `b` back to `a`: then `a → b` closes a circle.
            let mut came: BTreeMap<&str, &str> = BTreeMap::new();
            let mut queue = VecDeque::from([b.as_str()]);
            while let Some(m) = queue.pop_front() {
                for (_, y) in edges.keys().filter(|(x, _)| x == m) {
                    if y != b && !came.contains_key(y.as_str()) {
                        came.insert(y, m);
                        queue.push_back(y);
                    }
                }
            }
            if !came.contains_key(a.as_str()) && a != b {
                continue;
            }
            let mut way = vec![a.as_str()];
            while *way.last().unwrap() != b {
                way.push(came[way.last().unwrap()]);
            }
            way.reverse();
            let members: BTreeSet<String> = way.iter().map(|m| m.to_string()).collect();
            if named.insert(members) {
                out.push(format!(
                    "{}:{}: `{}` in `{}` closes a circle inside the wing `{wing}`: {a} → {}",
                    rel(&r.file),
                    r.line,
                    r.text,
                    show(&r.from),
                    way.join(" → ")
                ));
            }
        }
    }
    out
}

#[test]
fn wings_import_only_from_below_and_have_no_circle_inside() {
    let mut breaches = Vec::new();
    let mut wings_seen = 0;
    for tree in trees() {
        wings_seen += wings(&tree).len();
        breaches.extend(wing_breaches(&tree));
        breaches.extend(circles_in_wings(&tree));
    }
    assert!(wings_seen >= 5, "the wings of the host (heap, admit, isolate, global) and the others are read");
    assert!(breaches.is_empty(), "a wing imports only from below it, with no circle inside:\n{}", breaches.join("\n"));
}

#[test]
fn the_wing_checks_name_an_upward_import_and_a_circle_inside_a_wing() {
    let dir = std::env::temp_dir().join(format!("memplug-architecture-wings-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("low")).unwrap();
    std::fs::create_dir_all(dir.join("high")).unwrap();
    let files = [
        ("lib.rs", "mod leaf;\nmod low;\nmod high;\nmod top;\n"),
        ("leaf.rs", "pub struct L;\n"),
        ("top.rs", "use crate::high::a::A;\n"),
        ("low/mod.rs", "mod x;\nmod y;\n"),
        ("low/x.rs", "use crate::leaf::L;\npub struct X;\n"),
        ("low/y.rs", "use super::x::X;\nuse crate::high::b::B;\nuse crate::top;\n"),
        ("high/mod.rs", "pub mod a;\npub mod b;\n"),
        ("high/a.rs", "use super::b::B;\nuse crate::low::x::X;\npub struct A;\n"),
        ("high/b.rs", "pub struct B;\nfn f() {\n    let _ = super::a::A;\n}\n"),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let tree = modules::read_tree(&dir.join("lib.rs"));
    let mut found = wing_breaches(&tree);
    found.extend(circles_in_wings(&tree));
    std::fs::remove_dir_all(&dir).unwrap();
    let found: Vec<String> = found.iter().map(|b| b.replace(&format!("{}/", dir.display()), "")).collect();
    assert_eq!(
        found,
        [
            "low/y.rs:2: `crate::high::b::B` in `low::y` imports from `high`, a wing above the wing `low` \
             (lib.rs declares `high` after `low`)",
            "low/y.rs:3: `crate::top` in `low::y` imports from `top`, a module above the wing `low` \
             (lib.rs declares `top` after `low`)",
            "high/a.rs:1: `super::b::B` in `high::a` closes a circle inside the wing `high`: a → b → a",
        ]
    );
}

#[test]
fn no_module_docs_carry_a_hand_written_imports_line() {
    let mut found = Vec::new();
    let files: BTreeSet<PathBuf> = trees().iter().flat_map(Tree::files).collect();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, line) in text.lines().enumerate() {
            let docs = line.trim_start().strip_prefix("//!").map(str::trim_start);
            if docs.is_some_and(|d| d.starts_with("Imports ") || d.contains(". Imports ")) {
                found.push(format!("{}:{}: {}", rel(&file), i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "what a module imports is checked by this test, not written by hand (it drifts):\n{}",
        found.join("\n")
    );
}

/// The files allowed past 450 lines, each with its own cap: a type whose
/// whole API is better read in one file than split over several (STYLE.md:
/// hashbrown's `raw/mod.rs`). The handler core `RawHandler` and its lock's
/// proof `Held` call into each other at every layer (the per-call API takes
/// the lock, the lock's holder frees what others queued), so they are one.
const ONE_TYPE_WHOLE: [(&str, usize); 1] = [("host/src/heap/raw/raw_handler.rs", 950)];

#[test]
fn no_source_file_is_over_450_lines_before_its_tests() {
    let mut long = Vec::new();
    let files: BTreeSet<PathBuf> = trees().iter().flat_map(Tree::files).collect();
    assert!(files.len() > 100, "the crates' files are read: {}", files.len());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines = text.lines().take_while(|l| !l.starts_with("#[cfg(test)]")).count();
        let cap = ONE_TYPE_WHOLE.iter().find(|(f, _)| support::root().join(f) == file).map_or(450, |&(_, cap)| cap);
        if lines > cap {
            long.push(format!("{}: {lines} lines", rel(&file)));
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
/// maybe with a link target, maybe `(private)`) joined by `, ` or ` and `, then ` — `; code spans
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
        let after = match linked.map(|_| after.strip_prefix(']').unwrap_or(after)) {
            // A link with its target: `[`name`](path)`.
            Some(l) if l.starts_with('(') => l.split_once(')').map_or(l, |(_, rest)| rest),
            Some(l) => l,
            None => after,
        };
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
    assert!(lib.len() > 5, "host/src/lib.rs's `# Layers` list is read: {lib:?}");
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
fn the_guides_wing_lists_name_the_modules_of_each_wings_mod_rs() {
    let guide = std::fs::read_to_string(support::root().join("docs/src/architecture.md")).unwrap();
    for wing in ["heap", "admit", "isolate"] {
        let file = format!("host/src/{wing}/mod.rs");
        let text = std::fs::read_to_string(support::root().join(&file)).unwrap();
        let docs: Vec<&str> =
            text.lines().filter_map(|l| l.strip_prefix("//!")).map(|l| l.strip_prefix(' ').unwrap_or(l)).collect();
        let code = layer_list(&docs.join("\n"), "# Layers");
        assert!(code.len() > 3, "{file}'s `# Layers` list is read: {code:?}");
        let copy = layer_list(&guide, &format!("### The {wing} wing"));
        assert_eq!(copy, code, "docs/src/architecture.md's list of the {wing} wing differs from {file}'s (copy it)");
    }
}

#[test]
fn layer_lists_read_linked_private_and_joined_names_only() {
    let text = "intro\n\n## The layers\nSome words.\n\n0. `a` — imports nothing, `not_a_module`;\n\
                1. [`b`] — one; [`c`](mod@c) (private) — two\n   (wrapped); and `d`;\n2. `e`, `f` (private) and [`g`]\n   \
                — three; [`H`] — `x`, `y` and `z` say;\n10. `i`: no dash; `j` — four\n\nafter `k` — five\n";
    let found = layer_list(text, "## The layers");
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        found,
        [(0, names(&["a"])), (1, names(&["b", "c"])), (2, names(&["e", "f", "g", "H"])), (10, names(&["j"]))]
    );
}

#[test]
fn the_module_graph_is_read_through_groups_re_exports_and_nesting() {
    let dir = std::env::temp_dir().join(format!("memplug-architecture-graph-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("b")).unwrap();
    let files = [
        (
            "lib.rs",
            "//! crate::b in docs\npub mod a;\nmod b;\npub use b::Thing;\n#[cfg(test)]\nmod tests {\n    use crate::b::d;\n}\n",
        ),
        (
            "a.rs",
            "use crate::{\n    Thing,\n};\nfn f() -> &'static str { let _c = 'x'; /* crate::b */ \"crate::b::d\" }\n",
        ),
        ("b/mod.rs", "mod c;\nmod d;\npub struct Thing;\n"),
        ("b/c.rs", "use super::d::X;\nuse self::inner::Y;\nmod inner {\n    pub struct Y;\n}\n"),
        ("b/d.rs", "pub struct X;\nfn g() {\n    super::super::a::f();\n    let _ = super::c::inner::Y;\n}\n"),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let tree = modules::read_tree(&dir.join("lib.rs"));
    let breaches = layer_breaches(&tree);
    std::fs::remove_dir_all(&dir).unwrap();
    let path = |p: &str| -> ModPath { p.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect() };
    let mut found: Vec<(ModPath, ModPath, usize, String)> =
        tree.references().into_iter().map(|r| (r.from, r.to, r.line, r.text)).collect();
    found.sort();
    let mut expected = vec![
        (path(""), path("b"), 4, "b::Thing".to_string()),
        (path("a"), path("b"), 1, "crate::Thing".to_string()),
        (path("b::c"), path("b::c::inner"), 2, "self::inner::Y".to_string()),
        (path("b::c"), path("b::d"), 1, "super::d::X".to_string()),
        (path("b::d"), path("a"), 3, "super::super::a::f".to_string()),
        (path("b::d"), path("b::c::inner"), 4, "super::c::inner::Y".to_string()),
    ];
    expected.sort();
    assert_eq!(found, expected, "comments, strings and `#[cfg(test)]` items are not read");
    let shown: Vec<String> = breaches.iter().map(|b| b.replace(&format!("{}/", dir.display()), "")).collect();
    assert_eq!(
        shown,
        [
            "a.rs:1: `crate::Thing` in `a` refers to `b`, declared after `a` in lib.rs — a circle: a → b → a",
            "b/c.rs:1: `super::d::X` in `b::c` refers to `b::d`, declared after `c` in b/mod.rs — a circle: c → d → c",
        ]
    );
}
