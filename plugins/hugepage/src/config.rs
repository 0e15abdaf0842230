//! The hugepage plugin's options: what `create` accepts, their defaults and
//! their limits. Pure parsing.

use memplug_abi::options::{self, parse_size};
use std::fmt;

/// Where large blocks get their huge pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Transparent huge pages: ordinary anonymous mappings, 2 MiB-aligned
    /// and advised with `madvise(MADV_HUGEPAGE)` (the default).
    Thp,
    /// Explicit huge pages from the system's reserved pool (`MAP_HUGETLB`,
    /// `vm.nr_hugepages`), falling back to [`Mode::Thp`] when the pool has
    /// none to give, unless [`HugepageConfig::strict`].
    Hugetlb,
}

impl Mode {
    /// The option value naming this mode.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Thp => "thp",
            Mode::Hugetlb => "hugetlb",
        }
    }
}

/// The plugin's configuration. [`HugepageConfig::default`] gives the
/// defaults; [`HugepageConfig::parse`] reads an options string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HugepageConfig {
    /// Blocks of at least this many bytes are mapped (`threshold=`, default
    /// 4 MiB, at least 1); smaller ones come from libc.
    pub threshold: usize,
    /// `mode=thp` (default) or `mode=hugetlb`.
    pub mode: Mode,
    /// `strict=1`: never settle for less than the mode asks. Creating the
    /// instance fails when the system cannot give that kind of huge page at
    /// all (no reserved pool for `hugetlb`; THP turned off or absent for
    /// `thp`), and with `hugetlb` a large block the pool cannot serve fails
    /// instead of falling back to THP. Default 0.
    pub strict: bool,
}

/// The default threshold: 4 MiB.
pub const DEFAULT_THRESHOLD: usize = 4 << 20;

impl Default for HugepageConfig {
    fn default() -> Self {
        HugepageConfig { threshold: DEFAULT_THRESHOLD, mode: Mode::Thp, strict: false }
    }
}

/// The option names [`HugepageConfig::parse`] knows.
pub const OPTION_NAMES: [&str; 3] = ["threshold", "mode", "strict"];

impl HugepageConfig {
    /// Read an options string: comma-separated `key=value` items, spaces
    /// allowed around them. Sizes are decimal with an optional `k`, `m` or
    /// `g` suffix (powers of 1024). Keys not given keep their defaults;
    /// unknown or repeated keys and values out of range are errors whose
    /// message says what is accepted.
    ///
    /// ```
    /// use memplug_hugepage::{HugepageConfig, Mode};
    ///
    /// let c = HugepageConfig::parse("threshold=64m, mode=hugetlb").unwrap();
    /// assert_eq!((c.threshold, c.mode, c.strict), (64 << 20, Mode::Hugetlb, false));
    /// assert_eq!(HugepageConfig::parse("").unwrap(), HugepageConfig::default());
    /// assert!(HugepageConfig::parse("mode=huge").unwrap_err().contains("mode=thp"));
    /// // `Display` writes an options string that parses back to the same config.
    /// assert_eq!(HugepageConfig::parse(&c.to_string()).unwrap(), c);
    /// ```
    pub fn parse(options: &str) -> Result<HugepageConfig, String> {
        let mut config = HugepageConfig::default();
        let items = options::items(options, &OPTION_NAMES, "hugepage")?;
        for &(key, value) in &items {
            match key {
                "threshold" => {
                    config.threshold = parse_size(value).filter(|&n| n >= 1).ok_or_else(|| {
                        format!("threshold={value:?} is not a size of at least 1 byte: write e.g. 4m or 65536")
                    })?
                }
                "mode" => {
                    config.mode = match value {
                        "thp" => Mode::Thp,
                        "hugetlb" => Mode::Hugetlb,
                        _ => {
                            return Err(format!(
                                "mode={value:?}: write mode=thp (transparent huge pages, the default) or \
                                 mode=hugetlb (the reserved pool)"
                            ));
                        }
                    }
                }
                _ => {
                    config.strict = match value {
                        "0" => false,
                        "1" => true,
                        _ => return Err(format!("strict={value:?}: write strict=1 or strict=0")),
                    }
                }
            }
        }
        Ok(config)
    }
}

impl fmt::Display for HugepageConfig {
    /// The options string of this configuration, every key given.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "threshold={},mode={},strict={}", self.threshold, self.mode.name(), u8::from(self.strict))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_and_its_refusals() {
        let c = HugepageConfig::parse("strict=1,threshold=1").unwrap();
        assert_eq!((c.threshold, c.mode, c.strict), (1, Mode::Thp, true));
        for (bad, says) in [
            ("threshold=0", "at least 1 byte"),
            ("threshold=4q", "not a size"),
            ("mode=1g", "mode=hugetlb"),
            ("strict=yes", "strict=1"),
            ("strict", "key=value"),
            ("mode=thp,mode=thp", "twice"),
            ("page=1g", "threshold, mode, strict"),
        ] {
            let e = HugepageConfig::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
