//! Reading this process's mappings from `/proc/self/smaps`: which mapping
//! holds an address, its permissions, and its fields (`AnonHugePages`,
//! `THPeligible`, `VmFlags`, ...).

#![allow(dead_code)]

use std::collections::HashMap;

/// One mapping of `/proc/self/smaps`.
#[derive(Debug, Clone)]
pub(crate) struct Mapping {
    /// First address.
    pub start: usize,
    /// One past the last address.
    pub end: usize,
    /// `rw-p`, `---p`, ...
    pub perms: String,
    /// Every `Key: value` line, value trimmed (e.g. `"AnonHugePages" => "2048 kB"`).
    pub fields: HashMap<String, String>,
}

impl Mapping {
    /// A `... kB` field in kB (0 if absent).
    pub(crate) fn kb(&self, key: &str) -> u64 {
        self.fields.get(key).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap_or(0)
    }

    /// The `VmFlags` two-letter flags (`hg` is "advised for huge pages").
    pub(crate) fn vm_flags(&self) -> Vec<String> {
        self.fields.get("VmFlags").map(|v| v.split_whitespace().map(String::from).collect()).unwrap_or_default()
    }

    /// Whether the mapping may be neither read nor written.
    pub(crate) fn is_inaccessible(&self) -> bool {
        self.perms.starts_with("---")
    }
}

/// Every mapping of this process, from `/proc/self/smaps`.
pub(crate) fn all() -> Vec<Mapping> {
    let text = std::fs::read_to_string("/proc/self/smaps").expect("read /proc/self/smaps");
    let mut out: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-').filter(|(a, b)| is_hex(a) && is_hex(b)) {
            let perms = line.split_whitespace().nth(1).unwrap_or("").to_string();
            let start = usize::from_str_radix(a, 16).unwrap();
            let end = usize::from_str_radix(b, 16).unwrap();
            out.push(Mapping { start, end, perms, fields: HashMap::new() });
        } else if let (Some(m), Some((k, v))) = (out.last_mut(), line.split_once(':')) {
            m.fields.insert(k.trim().to_string(), v.trim().to_string());
        }
    }
    out
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The mapping holding `addr`, if any.
pub(crate) fn containing(addr: usize) -> Option<Mapping> {
    all().into_iter().find(|m| (m.start..m.end).contains(&addr))
}
