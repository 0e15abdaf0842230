//! The guard's options: what `create` accepts, their defaults and their
//! limits. Pure parsing; nothing here touches memory.

use memplug_abi::options::{self, parse_size, parse_switch};
use std::fmt;

/// Which end of a block touches the inaccessible page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The block ends where the guard page starts (the default): a write
    /// past the end faults.
    End,
    /// The block starts where the guard page ends: a write before the start
    /// (an underrun) faults.
    Start,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::End => "end",
            Side::Start => "start",
        }
    }
}

/// The guard's configuration. [`GuardConfig::default`] gives the defaults;
/// [`GuardConfig::parse`] reads an options string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardConfig {
    /// Which end of every block is guarded (`side=end|start`, default `end`).
    pub side: Side,
    /// Address space held by freed blocks kept inaccessible, in bytes
    /// (`quarantine=`, default 32 MiB; 0 unmaps every freed block at once).
    /// The oldest freed blocks leave first.
    pub quarantine: usize,
    /// Abort the process, after printing what was found, on the first error
    /// (`abort_on_error=1`; default 0: report, count and carry on).
    pub abort_on_error: bool,
    /// The alignment of every block (`alignment=`, default 16, what C
    /// `malloc` gives): a power of two from 16 to 1 GiB.
    pub alignment: usize,
    /// Fill every new, non-zeroed block with [`JUNK`] (`junk=1`, the
    /// default), so reads of memory never written show up as `0xa5` bytes
    /// instead of the zeros a fresh mapping would give.
    pub junk: bool,
    /// Guard one allocation in this many, chosen at random, and serve the
    /// rest from the system allocator (`sample=N`, N ≥ 1; default 0: guard
    /// every allocation). Sampled blocks live in one range reserved up front
    /// ([`GuardConfig::slots`] slots), so a free is routed by one address
    /// compare and the number of mappings stays bounded.
    pub sample: u64,
    /// With `sample=`: the largest block that can be sampled (`sample_max=`,
    /// default 64 KiB); larger ones are always the system allocator's.
    pub sample_max: usize,
    /// With `sample=`: how many sampled blocks the reserved range holds,
    /// live and in quarantine together (`slots=`, default 4096, at most
    /// 1,048,576). When every slot is live, allocations are the system's.
    pub slots: usize,
    /// Frames kept of each block's allocation and free stacks, and of a bad
    /// access's or call's (`stack_depth=N`, 0 to 128, default 32; 0 keeps
    /// none). Reports name them.
    pub stack_depth: usize,
    /// Report an error once per block and let the program go on
    /// (`recover=1`, GWP-ASan's recoverable mode): a faulting access is let
    /// through (the page is opened), a bad free ignored. Default 0: a bad
    /// access ends the program by its `SIGSEGV`, a double or invalid free by
    /// `SIGABRT`, as glibc ends it.
    pub recover: bool,
}

/// The byte new blocks are filled with when [`GuardConfig::junk`] is on.
pub const JUNK: u8 = 0xA5;

/// The default quarantine: 32 MiB of address space.
pub const DEFAULT_QUARANTINE: usize = 32 << 20;

/// The largest alignment an instance may ask for (1 GiB, as the ABI allows).
pub const MAX_ALIGNMENT: usize = 1 << 30;

/// The default [`GuardConfig::sample_max`]: 64 KiB.
pub const DEFAULT_SAMPLE_MAX: usize = 64 << 10;

/// The default [`GuardConfig::slots`].
pub const DEFAULT_SLOTS: usize = 4096;

/// The most [`GuardConfig::slots`] an instance may have.
pub const MAX_SLOTS: usize = 1 << 20;

/// The largest [`GuardConfig::sample_max`] (1 GiB).
pub const MAX_SAMPLE_MAX: usize = 1 << 30;

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            side: Side::End,
            quarantine: DEFAULT_QUARANTINE,
            abort_on_error: false,
            alignment: memplug_abi::DEFAULT_ALIGNMENT,
            junk: true,
            sample: 0,
            sample_max: DEFAULT_SAMPLE_MAX,
            slots: DEFAULT_SLOTS,
            stack_depth: memplug_stacks::capture::DEFAULT_DEPTH,
            recover: false,
        }
    }
}

/// The option names [`GuardConfig::parse`] knows.
pub const OPTION_NAMES: [&str; 10] = [
    "side",
    "quarantine",
    "abort_on_error",
    "alignment",
    "junk",
    "sample",
    "sample_max",
    "slots",
    "stack_depth",
    "recover",
];

impl GuardConfig {
    /// Read an options string: comma-separated `key=value` items, spaces
    /// allowed around them. Sizes are decimal with an optional `k`, `m` or
    /// `g` suffix (powers of 1024); switches are `0` or `1`. Keys not given
    /// keep their defaults; unknown or repeated keys and values out of range
    /// are errors whose message says what is accepted.
    ///
    /// ```
    /// use memplug_guard::{GuardConfig, Side};
    ///
    /// let c = GuardConfig::parse("side=start, quarantine=1m, abort_on_error=1").unwrap();
    /// assert_eq!((c.side, c.quarantine, c.abort_on_error), (Side::Start, 1 << 20, true));
    /// assert_eq!(GuardConfig::parse("").unwrap(), GuardConfig::default());
    /// assert!(GuardConfig::parse("sdie=start").unwrap_err().contains("unknown option"));
    /// // `Display` writes an options string that parses back to the same config.
    /// assert_eq!(GuardConfig::parse(&c.to_string()).unwrap(), c);
    /// ```
    pub fn parse(options: &str) -> Result<GuardConfig, String> {
        let mut config = GuardConfig::default();
        let items = options::items(options, &OPTION_NAMES, "the guard")?;
        for &(key, value) in &items {
            match key {
                "side" => {
                    config.side = match value {
                        "end" => Side::End,
                        "start" => Side::Start,
                        _ => return Err(format!("side={value:?}: write side=end (guard after the block, the default) or side=start (guard before it)")),
                    }
                }
                "quarantine" => {
                    config.quarantine = parse_size(value).ok_or_else(|| {
                        format!("quarantine={value:?} is not a size: write bytes, optionally with k, m or g (e.g. 64m); 0 turns the quarantine off")
                    })?
                }
                "abort_on_error" => config.abort_on_error = parse_switch(key, value)?,
                "recover" => config.recover = parse_switch(key, value)?,
                "stack_depth" => {
                    let max = memplug_stacks::capture::MAX_DEPTH;
                    let n = value.parse().ok().filter(|n| *n <= max);
                    config.stack_depth = n.ok_or_else(|| {
                        format!("stack_depth={value:?}: write how many frames to keep of each stack, 0 to {max} (e.g. 32)")
                    })?
                }
                "junk" => config.junk = parse_switch(key, value)?,
                "sample" => {
                    config.sample = value.parse().ok().filter(|&n| n >= 1).ok_or_else(|| {
                        format!("sample={value:?}: write how many allocations guard one in, a whole number from 1 (e.g. sample=1000)")
                    })?
                }
                "sample_max" => {
                    let n = parse_size(value).filter(|n| (1..=MAX_SAMPLE_MAX).contains(n));
                    config.sample_max = n.ok_or_else(|| {
                        format!("sample_max={value:?}: write the largest block to sample, 1 byte to 1g (e.g. 64k)")
                    })?
                }
                "slots" => {
                    let n = value.parse().ok().filter(|n| (1..=MAX_SLOTS).contains(n));
                    config.slots = n.ok_or_else(|| {
                        format!("slots={value:?}: write how many sampled blocks to hold at once, 1 to {MAX_SLOTS}")
                    })?
                }
                _ => {
                    let n = parse_size(value).filter(|n| n.is_power_of_two() && (16..=MAX_ALIGNMENT).contains(n));
                    config.alignment = n.ok_or_else(|| {
                        format!("alignment={value:?}: it must be a power of two from 16 to 1g (e.g. 64 or 4k)")
                    })?;
                }
            }
        }
        Ok(config)
    }
}

impl fmt::Display for GuardConfig {
    /// The options string of this configuration, every key given.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "side={},quarantine={},abort_on_error={},alignment={},junk={},stack_depth={},recover={}",
            self.side.name(),
            self.quarantine,
            u8::from(self.abort_on_error),
            self.alignment,
            u8::from(self.junk),
            self.stack_depth,
            u8::from(self.recover)
        )?;
        if self.sample != 0 {
            write!(f, ",sample={},sample_max={},slots={}", self.sample, self.sample_max, self.slots)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_and_its_refusals() {
        let c = GuardConfig::parse("alignment=4k,junk=0,quarantine=0").unwrap();
        assert_eq!((c.alignment, c.junk, c.quarantine, c.side), (4096, false, 0, Side::End));
        let c = GuardConfig::parse("stack_depth=0,recover=1").unwrap();
        assert_eq!((c.stack_depth, c.recover), (0, true));
        assert_eq!(GuardConfig::parse(&c.to_string()).unwrap(), c);
        let c = GuardConfig::parse("sample=1000,sample_max=1m,slots=16").unwrap();
        assert_eq!((c.sample, c.sample_max, c.slots), (1000, 1 << 20, 16));
        assert_eq!(GuardConfig::parse(&c.to_string()).unwrap(), c);
        for (bad, says) in [
            ("side=middle", "side=end"),
            ("quarantine=lots", "not a size"),
            ("abort_on_error=yes", "abort_on_error=1"),
            ("alignment=24", "power of two"),
            ("alignment=8", "from 16"),
            ("alignment=2g", "to 1g"),
            ("junk", "key=value"),
            ("side=end,side=start", "twice"),
            ("colour=red", "side, quarantine, abort_on_error, alignment, junk, sample"),
            ("sample=0", "from 1"),
            ("sample=often", "whole number"),
            ("sample_max=0", "1 byte to 1g"),
            ("slots=0", "1 to 1048576"),
            ("slots=2000000", "1 to 1048576"),
            ("stack_depth=129", "0 to 128"),
            ("recover=2", "recover=1"),
        ] {
            let e = GuardConfig::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
