//! What the running system says about huge pages, read from `/sys` and
//! `/proc`: the THP setting, the PMD (transparent huge page) size, and the
//! explicit huge-page pool. The parsers are pure functions over the files'
//! text, so they are tested without the files.

use std::fs;

/// Where the kernel shows the THP setting.
pub const THP_ENABLED: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
/// Where the kernel shows the size of a transparent huge page.
pub const THP_PMD_SIZE: &str = "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size";

/// The size of a transparent huge page when the kernel does not say (x86-64
/// and most AArch64 configurations): 2 MiB.
pub const DEFAULT_HUGE: usize = 2 << 20;

/// The system-wide THP setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thp {
    /// `always`: every large enough anonymous mapping may get huge pages.
    Always,
    /// `madvise`: only mappings advised with `MADV_HUGEPAGE` (this plugin's).
    Madvise,
    /// `never`: no transparent huge pages.
    Never,
    /// The kernel has no THP support (the file is missing).
    Unsupported,
}

impl Thp {
    /// The setting's name as the kernel writes it.
    pub fn name(self) -> &'static str {
        match self {
            Thp::Always => "always",
            Thp::Madvise => "madvise",
            Thp::Never => "never",
            Thp::Unsupported => "unsupported",
        }
    }

    /// Whether advised mappings can get transparent huge pages.
    pub fn grants_advised(self) -> bool {
        matches!(self, Thp::Always | Thp::Madvise)
    }
}

/// The selected value of `enabled`: the bracketed word of e.g.
/// `always [madvise] never`.
///
/// ```
/// use memplug_hugepage::system::{Thp, parse_thp};
///
/// assert_eq!(parse_thp("always [madvise] never\n"), Thp::Madvise);
/// assert_eq!(parse_thp("[never]"), Thp::Never);
/// ```
pub fn parse_thp(text: &str) -> Thp {
    let selected = text.split_whitespace().find_map(|w| w.strip_prefix('[')?.strip_suffix(']'));
    match selected {
        Some("always") => Thp::Always,
        Some("madvise") => Thp::Madvise,
        Some("never") => Thp::Never,
        _ => Thp::Unsupported,
    }
}

/// The THP setting of this system.
pub fn thp() -> Thp {
    fs::read_to_string(THP_ENABLED).map_or(Thp::Unsupported, |t| parse_thp(&t))
}

/// The size of a transparent huge page (a PMD mapping), at least 2 MiB.
pub fn pmd_size() -> usize {
    let read = fs::read_to_string(THP_PMD_SIZE).ok().and_then(|t| t.trim().parse::<usize>().ok());
    read.filter(|n| n.is_power_of_two()).map_or(DEFAULT_HUGE, |n| n.max(DEFAULT_HUGE))
}

/// The explicit huge-page pool, from `/proc/meminfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pool {
    /// `HugePages_Total`: pages reserved (`vm.nr_hugepages`).
    pub total: u64,
    /// `HugePages_Free`: pages not yet mapped.
    pub free: u64,
    /// `Hugepagesize`, in bytes: the default explicit huge page size.
    pub page_size: usize,
}

/// Read the pool from the text of `/proc/meminfo`.
///
/// ```
/// use memplug_hugepage::system::parse_meminfo;
///
/// let p = parse_meminfo("HugePages_Total:       4\nHugePages_Free:        3\nHugepagesize:       2048 kB\n");
/// assert_eq!((p.total, p.free, p.page_size), (4, 3, 2 << 20));
/// ```
pub fn parse_meminfo(text: &str) -> Pool {
    let mut pool = Pool { page_size: DEFAULT_HUGE, ..Pool::default() };
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else { continue };
        let number = value.split_whitespace().next().and_then(|v| v.parse::<u64>().ok());
        match (key.trim(), number) {
            ("HugePages_Total", Some(n)) => pool.total = n,
            ("HugePages_Free", Some(n)) => pool.free = n,
            ("Hugepagesize", Some(kb)) if kb > 0 => pool.page_size = (kb as usize) << 10,
            _ => {}
        }
    }
    pool
}

/// The explicit huge-page pool of this system (empty if unknown).
pub fn pool() -> Pool {
    fs::read_to_string("/proc/meminfo")
        .map_or(Pool { page_size: DEFAULT_HUGE, ..Pool::default() }, |t| parse_meminfo(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_texts() {
        assert_eq!(parse_thp(""), Thp::Unsupported);
        assert_eq!(parse_thp("[always] madvise never"), Thp::Always);
        assert!(!Thp::Never.grants_advised());
        let p = parse_meminfo("MemTotal: 1 kB\nHugepagesize: garbage\n");
        assert_eq!(p, Pool { total: 0, free: 0, page_size: DEFAULT_HUGE });
        assert!(pmd_size() >= DEFAULT_HUGE && pmd_size().is_power_of_two());
    }
}
