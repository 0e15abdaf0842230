//! The arena's configuration: [`ArenaConfig`], its options string and its
//! checks.
//!
//! Owns the option names, their defaults and ranges, the parser of the
//! `key=value,…` string and the messages that say what is accepted. Pure:
//! it touches no memory and imports only the size classes (a region must
//! hold four slots of the largest class).

#![forbid(unsafe_code)]

use crate::class::{LARGEST_CLASS_SIZE, MIN_ALIGN, class_of, slot_size};
use memplug_abi::options::{self, parse_size};
use std::fmt;

/// The arena's options. [`ArenaConfig::default`] gives the defaults;
/// [`ArenaConfig::parse`] reads an options string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArenaConfig {
    /// Bytes mapped per bump region (default 1 MiB): a multiple of 4096, from
    /// 64 KiB to 1 GiB, holding at least four blocks of the largest class.
    pub region_size: usize,
    /// The largest request served from the regions (default 4096); larger
    /// ones go to libc. From 16 bytes to 1 MiB.
    pub max_small: usize,
    /// The most regions the arena maps; 0 (the default) for no limit. Past it,
    /// small requests fail (return NULL).
    pub max_regions: usize,
}

impl Default for ArenaConfig {
    fn default() -> Self {
        ArenaConfig { region_size: 1 << 20, max_small: 4096, max_regions: 0 }
    }
}

/// The option names [`ArenaConfig::parse`] knows.
pub const OPTION_NAMES: [&str; 3] = ["region_size", "max_small", "max_regions"];

impl ArenaConfig {
    /// Read an options string: comma-separated `key=value` items, spaces
    /// allowed around them; sizes are decimal with an optional `k`, `m` or `g`
    /// suffix (powers of 1024). Keys not given keep their defaults; an empty
    /// string gives the defaults. Unknown keys, repeated keys and values out
    /// of range are errors, with a message that says what is accepted.
    ///
    /// ```
    /// use memplug_arena::ArenaConfig;
    ///
    /// let c = ArenaConfig::parse("region_size=1048576, max_small=8k").unwrap();
    /// assert_eq!((c.region_size, c.max_small, c.max_regions), (1 << 20, 8192, 0));
    /// assert_eq!(ArenaConfig::parse("").unwrap(), ArenaConfig::default());
    /// assert!(ArenaConfig::parse("regoin_size=1m").unwrap_err().contains("unknown option"));
    /// // `Display` writes an options string that parses back to the same config.
    /// assert_eq!(ArenaConfig::parse(&c.to_string()).unwrap(), c);
    /// ```
    pub fn parse(options: &str) -> Result<ArenaConfig, String> {
        let mut config = ArenaConfig::default();
        let items = options::items(options, &OPTION_NAMES, "the arena")?;
        for &(key, value) in &items {
            let n = parse_size(value).ok_or_else(|| {
                format!("option {key}={value:?} is not a size: write a number, optionally with k, m or g (e.g. 1m)")
            })?;
            match key {
                "region_size" => config.region_size = n,
                "max_small" => config.max_small = n,
                _ => config.max_regions = n,
            }
        }
        config.check()?;
        Ok(config)
    }

    /// Check the values against each other; [`ArenaConfig::parse`] calls it.
    pub fn check(&self) -> Result<(), String> {
        const MIN_REGION: usize = 64 << 10;
        const MAX_REGION: usize = 1 << 30;
        const MAX_SMALL: usize = LARGEST_CLASS_SIZE;
        if !self.region_size.is_multiple_of(4096) || !(MIN_REGION..=MAX_REGION).contains(&self.region_size) {
            return Err(format!(
                "region_size={} is out of range: it must be a multiple of 4096 from 64k to 1g",
                self.region_size
            ));
        }
        if !(MIN_ALIGN..=MAX_SMALL).contains(&self.max_small) {
            return Err(format!("max_small={} is out of range: it must be from 16 to 1m", self.max_small));
        }
        let slot = slot_size(class_of(self.max_small));
        if slot.saturating_mul(4) > self.region_size {
            return Err(format!(
                "max_small={} needs slots of {slot} bytes, and a region of {} bytes must hold at least four of \
                 them: raise region_size to at least {} or lower max_small",
                self.max_small,
                self.region_size,
                (slot * 4).next_multiple_of(4096)
            ));
        }
        Ok(())
    }

    /// How many size classes this configuration uses.
    pub fn classes(&self) -> usize {
        class_of(self.max_small) + 1
    }
}

impl fmt::Display for ArenaConfig {
    /// The options string of this configuration, every key given.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "region_size={},max_small={},max_regions={}", self.region_size, self.max_small, self.max_regions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_with_defaults_and_helpful_errors() {
        let d = ArenaConfig::default();
        assert_eq!(ArenaConfig::parse("  ").unwrap(), d);
        let c = ArenaConfig::parse("max_regions=3,region_size=2M,").unwrap();
        assert_eq!((c.region_size, c.max_small, c.max_regions), (2 << 20, 4096, 3));
        assert_eq!(ArenaConfig::parse(&c.to_string()).unwrap(), c);
        for (bad, needle) in [
            ("region_size", "no value"),
            ("size=1", "unknown option"),
            ("region_size=1x", "not a size"),
            ("region_size=", "not a size"),
            ("region_size=-1", "not a size"),
            ("region_size=99999999999999999999g", "not a size"),
            ("region_size=1m,region_size=2m", "twice"),
            ("region_size=1000", "multiple of 4096"),
            ("region_size=4k", "from 64k"),
            ("max_small=8", "from 16"),
            ("max_small=512k", "at least four"),
        ] {
            let e = ArenaConfig::parse(bad).unwrap_err();
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
    }
}
