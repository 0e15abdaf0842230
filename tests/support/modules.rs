//! The module graph of the repository's crates, read from their sources:
//! which modules each crate declares, in what order, and which modules each
//! refers to. tests/architecture.rs checks the layer rule over it.
//!
//! A crate is a directory with a `Cargo.toml` that has a `[package]`; its
//! roots are its library (`[lib] path`, or `src/lib.rs`) and its binaries
//! (`[[bin]] path`, or `src/main.rs`). A module's children are the `mod`
//! items it declares (in a file of their own, `name.rs` or `name/mod.rs`,
//! or inline), in declaration order; items under `#[cfg(test)]` are left
//! out (a test may use anything). A reference is a path starting with
//! `crate`, `super` or `self` — in a `use` declaration (groups and all,
//! over lines) or in code — or a `use` path starting with a child module
//! or an imported name; comments, strings and character literals are not
//! read. A reference that names an item re-exported by a module (`pub use
//! x::Item;`, or a private `use` its children see) is followed to the
//! module that defines it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A module's path from its crate root (empty for the root).
pub(crate) type ModPath = Vec<String>;

/// One module of a crate.
#[derive(Debug, Default)]
pub(crate) struct Module {
    /// The file its code is in (an inline module's is its parent's).
    pub(crate) file: PathBuf,
    /// Its child modules, in declaration order.
    pub(crate) children: Vec<String>,
    /// The names its `use` declarations bring in, each with the path it
    /// names as written (relative to this module).
    uses: BTreeMap<String, Vec<String>>,
    /// The paths its code refers to, as written, each with its line.
    refs: Vec<(usize, Vec<String>)>,
}

/// A reference from one module to another, resolved.
#[derive(Debug, Clone)]
pub(crate) struct Reference {
    /// The module the reference is in.
    pub(crate) from: ModPath,
    /// The module that defines what it names.
    pub(crate) to: ModPath,
    /// Where it is: the file and line.
    pub(crate) file: PathBuf,
    pub(crate) line: usize,
    /// The path as written, joined with `::`.
    pub(crate) text: String,
}

/// The module tree of one crate root.
#[derive(Debug, Default)]
pub(crate) struct Tree {
    /// The root file (`lib.rs`, `main.rs`).
    pub(crate) root: PathBuf,
    /// Every module, by path.
    pub(crate) modules: BTreeMap<ModPath, Module>,
}

/// Every crate of the repository at `root`: its directory and its roots.
pub(crate) fn crates(root: &Path) -> Vec<(PathBuf, Vec<PathBuf>)> {
    let mut manifests = Vec::new();
    find_manifests(root, 0, &mut manifests);
    manifests.sort();
    let mut out = Vec::new();
    for manifest in manifests {
        let dir = manifest.parent().unwrap().to_path_buf();
        let text = std::fs::read_to_string(&manifest).unwrap();
        if !text.lines().any(|l| l.trim() == "[package]") {
            continue;
        }
        let mut roots = Vec::new();
        let mut section = "";
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                section = line;
            } else if let Some(path) = line.strip_prefix("path = \"").and_then(|p| p.strip_suffix('"'))
                && (section == "[lib]" || section == "[[bin]]")
            {
                roots.push(dir.join(path));
            }
        }
        for default in ["src/lib.rs", "src/main.rs"] {
            if dir.join(default).exists() && !roots.contains(&dir.join(default)) {
                roots.push(dir.join(default));
            }
        }
        out.push((dir, roots));
    }
    out
}

/// The `Cargo.toml` files under `dir`, at most three directories down,
/// outside `target` and hidden directories.
fn find_manifests(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if dir.join("Cargo.toml").is_file() {
        out.push(dir.join("Cargo.toml"));
    }
    if depth == 3 {
        return;
    }
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() && name != "target" && !name.starts_with('.') {
            find_manifests(&path, depth + 1, out);
        }
    }
}

/// The module tree rooted at `root` (a `lib.rs` or `main.rs`).
pub(crate) fn read_tree(root: &Path) -> Tree {
    let mut tree = Tree { root: root.to_path_buf(), modules: BTreeMap::new() };
    read_file(&mut tree, Vec::new(), root, root.parent().unwrap());
    tree
}

/// Read the module `path` whose code is `file`; its children's files are in
/// `dir`.
fn read_file(tree: &mut Tree, path: ModPath, file: &Path, dir: &Path) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let tokens = tokens(&code(&text));
    tree.modules.insert(path.clone(), Module { file: file.to_path_buf(), ..Module::default() });
    // The modules open at this point (inline ones nested in the file's), each
    // with the brace depth inside it and its children's directory.
    let mut open: Vec<(ModPath, usize, PathBuf)> = vec![(path, 0, dir.to_path_buf())];
    let mut depth = 0;
    let mut i = 0;
    let mut test = false;
    while i < tokens.len() {
        let (line, tok) = (tokens[i].0, tokens[i].1.as_str());
        let (module, _, dir) = open.last().unwrap().clone();
        let next = |k: usize| tokens.get(i + k).map_or("", |t| t.1.as_str());
        match tok {
            "#" => {
                let start = i + if next(1) == "!" { 2 } else { 1 };
                let end = close(&tokens, start);
                let attr: Vec<&str> = tokens[start..=end].iter().map(|t| t.1.as_str()).collect();
                test |= attr == ["[", "cfg", "(", "test", ")", "]"] || attr == ["[", "cfg", "(", "doctest", ")", "]"];
                i = end + 1;
                continue;
            }
            _ if test => {
                test = false;
                i = item_end(&tokens, i) + 1;
                continue;
            }
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if open.len() > 1 && open.last().unwrap().1 > depth {
                    open.pop();
                }
            }
            "mod" if is_ident(next(1)) && (next(2) == ";" || next(2) == "{") => {
                let name = next(1).to_string();
                tree.modules.get_mut(&module).unwrap().children.push(name.clone());
                let mut child = module.clone();
                child.push(name.clone());
                if next(2) == ";" {
                    let (own, sub) = (dir.join(format!("{name}.rs")), dir.join(&name).join("mod.rs"));
                    let (child_file, child_dir) =
                        if own.exists() { (own, dir.join(&name)) } else { (sub, dir.join(&name)) };
                    read_file(tree, child, &child_file, &child_dir);
                    i += 3;
                } else {
                    tree.modules.insert(child.clone(), Module { file: file.to_path_buf(), ..Module::default() });
                    depth += 1;
                    open.push((child, depth, dir.join(&name)));
                    i += 3;
                }
                continue;
            }
            "use" => {
                let mut leaves = Vec::new();
                i = use_tree(&tokens, i + 1, Vec::new(), &mut leaves);
                let m = tree.modules.get_mut(&module).unwrap();
                for (path, alias) in leaves {
                    if let Some(alias) = alias {
                        m.uses.insert(alias, path.clone());
                    }
                    m.refs.push((line, path));
                }
                continue;
            }
            "crate" | "super" | "self" if next(1) == "::" && (i == 0 || tokens[i - 1].1 != "$") => {
                let mut path = vec![tok.to_string()];
                i += 1;
                while tokens.get(i).is_some_and(|t| t.1 == "::") && tokens.get(i + 1).is_some_and(|t| is_ident(&t.1)) {
                    path.push(tokens[i + 1].1.clone());
                    i += 2;
                }
                tree.modules.get_mut(&module).unwrap().refs.push((line, path));
                continue;
            }
            _ => {}
        }
        i += 1;
    }
}

/// Whether `s` is an identifier (or keyword).
fn is_ident(s: &str) -> bool {
    s.starts_with(|c: char| c.is_alphabetic() || c == '_') && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// The index of the bracket closing the one at `start`.
fn close(tokens: &[(usize, String)], start: usize) -> usize {
    let mut depth = 0;
    for (k, t) in tokens.iter().enumerate().skip(start) {
        match t.1.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            return k;
        }
    }
    tokens.len() - 1
}

/// The index of the last token of the item starting at `start`: its `;`,
/// or the brace closing its body.
fn item_end(tokens: &[(usize, String)], start: usize) -> usize {
    let mut k = start;
    while k < tokens.len() {
        match tokens[k].1.as_str() {
            ";" => return k,
            "{" => return close(tokens, k),
            "(" | "[" => k = close(tokens, k),
            _ => {}
        }
        k += 1;
    }
    k
}

/// Read a use tree from `start` with `prefix` before it into `leaves` (each
/// path with the name it brings in, if any); the index after it.
fn use_tree(
    tokens: &[(usize, String)],
    start: usize,
    prefix: Vec<String>,
    leaves: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    let mut path = prefix;
    let mut i = start;
    let tok = |i: usize| tokens.get(i).map_or("", |t| t.1.as_str());
    loop {
        match tok(i) {
            "::" => i += 1,
            "{" => {
                i += 1;
                while !matches!(tok(i), "}" | "") {
                    i = use_tree(tokens, i, path.clone(), leaves);
                    if tok(i) == "," {
                        i += 1;
                    }
                }
                i += 1;
                break;
            }
            "*" => {
                leaves.push((path.clone(), None));
                i += 1;
                break;
            }
            "self" if !path.is_empty() => {
                let alias = if tok(i + 1) == "as" { tok(i + 2).to_string() } else { path.last().unwrap().clone() };
                leaves.push((path.clone(), Some(alias)));
                i += if tok(i + 1) == "as" { 3 } else { 1 };
                break;
            }
            t if is_ident(t) => {
                path.push(t.to_string());
                i += 1;
                if tok(i) != "::" {
                    let alias = if tok(i) == "as" { tok(i + 1).to_string() } else { t.to_string() };
                    i += if tok(i) == "as" { 2 } else { 0 };
                    leaves.push((path.clone(), Some(alias).filter(|a| a != "_")));
                    break;
                }
            }
            _ => break,
        }
    }
    if tok(i) == ";" { i + 1 } else { i }
}

/// `text` with comments, string literals and character literals blanked
/// (lines kept, so line numbers hold).
pub(crate) fn code(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let at = |k: usize| chars.get(k).copied().unwrap_or('\0');
        let word_before = i > 0 && (at(i - 1).is_alphanumeric() || at(i - 1) == '_');
        let end = if at(i) == '/' && at(i + 1) == '/' {
            (i..chars.len()).find(|&k| chars[k] == '\n').unwrap_or(chars.len())
        } else if at(i) == '/' && at(i + 1) == '*' {
            let (mut k, mut depth) = (i + 2, 1);
            while k < chars.len() && depth > 0 {
                if at(k) == '/' && at(k + 1) == '*' {
                    (depth, k) = (depth + 1, k + 2);
                } else if at(k) == '*' && at(k + 1) == '/' {
                    (depth, k) = (depth - 1, k + 2);
                } else {
                    k += 1;
                }
            }
            k
        } else if !word_before && (at(i) == 'r' || (at(i) == 'b' && at(i + 1) == 'r')) && {
            let k = i + if at(i) == 'b' { 2 } else { 1 };
            let hashes = (k..chars.len()).take_while(|&j| chars[j] == '#').count();
            at(k + hashes) == '"'
        } {
            let k = i + if at(i) == 'b' { 2 } else { 1 };
            let hashes = (k..chars.len()).take_while(|&j| chars[j] == '#').count();
            let closing: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            let body: String = chars[k + hashes + 1..].iter().collect();
            k + hashes + 1 + body.find(&closing).map_or(body.len(), |e| body[..e].chars().count() + closing.len())
        } else if at(i) == '"' {
            let mut k = i + 1;
            while k < chars.len() && chars[k] != '"' {
                k += if chars[k] == '\\' { 2 } else { 1 };
            }
            k + 1
        } else if at(i) == '\'' && (at(i + 1) == '\\' || (at(i + 2) == '\'' && at(i + 1) != '\'')) {
            let mut k = i + 1;
            while k < chars.len() && chars[k] != '\'' {
                k += if chars[k] == '\\' { 2 } else { 1 };
            }
            k + 1
        } else {
            out.push(at(i));
            i += 1;
            continue;
        };
        let end = end.min(chars.len());
        out.extend(chars[i..end].iter().map(|&c| blank(c)));
        i = end;
    }
    out
}

/// The tokens of `code`, each with its line: identifiers, `::`, and single
/// punctuation characters.
fn tokens(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c.is_alphanumeric() || c == '_' {
                let end =
                    (i..chars.len()).find(|&k| !(chars[k].is_alphanumeric() || chars[k] == '_')).unwrap_or(chars.len());
                out.push((n + 1, chars[i..end].iter().collect()));
                i = end;
            } else if c == ':' && chars.get(i + 1) == Some(&':') {
                out.push((n + 1, "::".to_string()));
                i += 2;
            } else {
                if !c.is_whitespace() {
                    out.push((n + 1, c.to_string()));
                }
                i += 1;
            }
        }
    }
    out
}

impl Tree {
    /// The path `written` in module `at` names, from the crate root; `None`
    /// for a path outside the crate (another crate, a prelude name).
    fn absolute(&self, at: &[String], written: &[String], hops: usize) -> Option<ModPath> {
        let (first, rest) = written.split_first()?;
        let module = self.modules.get(at)?;
        match first.as_str() {
            "crate" => Some(rest.to_vec()),
            "self" => Some([at, rest].concat()),
            "super" => {
                let parent = &at[..at.len().checked_sub(1)?];
                match rest.first().map(String::as_str) {
                    Some("super") => self.absolute(parent, rest, hops),
                    _ => Some([parent, rest].concat()),
                }
            }
            _ if module.children.contains(first) => Some([at, written].concat()),
            _ if hops < 16 && module.uses.get(first).is_some_and(|u| u.as_slice() != written) => {
                let named = self.absolute(at, &module.uses[first], hops + 1)?;
                Some([named.as_slice(), rest].concat())
            }
            _ => None,
        }
    }

    /// The module that defines what the absolute path `path` names,
    /// following re-exports.
    fn defining(&self, path: &[String], hops: usize) -> ModPath {
        let mut module: ModPath = Vec::new();
        for (k, name) in path.iter().enumerate() {
            let here = &self.modules[&module];
            if here.children.contains(name) {
                module.push(name.clone());
            } else if let Some(used) = here.uses.get(name).filter(|_| hops < 16)
                && let Some(named) = self.absolute(&module, used, 0)
                && named != path[..=k]
            {
                return self.defining(&[named.as_slice(), &path[k + 1..]].concat(), hops + 1);
            } else {
                break;
            }
        }
        module
    }

    /// Every reference in the tree to a module of it, resolved.
    pub(crate) fn references(&self) -> Vec<Reference> {
        let mut out = Vec::new();
        for (from, module) in &self.modules {
            for (line, written) in &module.refs {
                let Some(path) = self.absolute(from, written, 0) else { continue };
                let to = self.defining(&path, 0);
                out.push(Reference {
                    from: from.clone(),
                    to,
                    file: module.file.clone(),
                    line: *line,
                    text: written.join("::"),
                });
            }
        }
        out
    }

    /// Every `.rs` file the tree reads.
    pub(crate) fn files(&self) -> Vec<PathBuf> {
        self.modules.values().map(|m| m.file.clone()).collect()
    }
}
