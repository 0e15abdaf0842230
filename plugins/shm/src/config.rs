//! The `shm` plugin's options and its naming scheme. Pure parsing; nothing
//! here touches a segment.
//!
//! # Names
//! - `name=NAME` is the POSIX shared-memory object `/memplug-NAME` (on
//!   Linux the file `/dev/shm/memplug-NAME`). NAME is 1 to
//!   [`MAX_NAME`] bytes of `[A-Za-z0-9_.-]`.
//! - Without `name=`, an instance — and the plugin's own handler — uses a
//!   segment of its own process, `/memplug-u<UID>-p<PID>-<16 hex digits>`
//!   (random): removed when the instance goes or the process exits, and,
//!   should the process be killed first, by the next process of the same
//!   user that makes such a segment (once the PID is gone).

use memplug_abi::options::{self, parse_switch};
use std::fmt;

/// The prefix of every segment name the plugin makes.
pub const PREFIX: &str = "/memplug-";
/// The longest `name=`.
pub const MAX_NAME: usize = 100;
/// The size of a segment when `size=` is not given: 64 MiB (a sparse file:
/// memory is used as it is touched).
pub const DEFAULT_SIZE: u64 = 64 << 20;
/// The smallest segment: 64 KiB.
pub const MIN_SIZE: u64 = 64 << 10;
/// The largest segment: 1 TiB.
pub const MAX_SIZE: u64 = 1 << 40;

/// Whether to make the segment or find it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Create {
    /// `create=1`: make it; an existing segment of that name is an error.
    New,
    /// `create=0`: attach to an existing one; a missing one is an error.
    Existing,
    /// Neither said (or `create=auto`): attach if it exists, else make it.
    Auto,
}

/// One instance's configuration: [`ShmConfig::parse`] reads an options
/// string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShmConfig {
    /// `name=`: a named segment other processes attach by name; `None` for
    /// a segment of this process.
    pub name: Option<String>,
    /// `size=`: bytes of the segment (rounded up to pages). When attaching,
    /// if given, the segment must have this size.
    pub size: Option<u64>,
    /// `create=1|0|auto`.
    pub create: Create,
    /// `unlink=1`: remove the segment's name when this instance goes (or
    /// the process exits). Always on for a segment of this process.
    pub unlink: bool,
    /// `reserve=1`: allocate the segment's memory when it is made
    /// (`posix_fallocate`), so a full `/dev/shm` is an error then instead of
    /// a SIGBUS when a page is first touched.
    pub reserve: bool,
}

impl Default for ShmConfig {
    /// The plugin's own handler: a segment of this process, 64 MiB.
    fn default() -> Self {
        ShmConfig { name: None, size: None, create: Create::New, unlink: true, reserve: false }
    }
}

/// The option names [`ShmConfig::parse`] knows.
pub const OPTION_NAMES: [&str; 5] = ["name", "size", "create", "unlink", "reserve"];

impl ShmConfig {
    /// Read an options string: comma-separated `key=value` items. Sizes are
    /// decimal with an optional `k`, `m` or `g` suffix (powers of 1024);
    /// switches are `0` or `1`.
    ///
    /// ```
    /// use memplug_shm::config::{Create, ShmConfig};
    ///
    /// let c = ShmConfig::parse("name=results,size=1g,create=0").unwrap();
    /// assert_eq!(c.segment_name().as_deref(), Some("/memplug-results"));
    /// assert_eq!((c.size, c.create, c.unlink), (Some(1 << 30), Create::Existing, false));
    /// assert!(ShmConfig::parse("size=1g").unwrap().unlink, "a segment of this process is always removed");
    /// assert!(ShmConfig::parse("name=a/b").unwrap_err().contains("[A-Za-z0-9_.-]"));
    /// assert_eq!(ShmConfig::parse(&c.to_string()).unwrap(), c);
    /// ```
    pub fn parse(options: &str) -> Result<ShmConfig, String> {
        let mut config = ShmConfig { create: Create::Auto, unlink: false, ..ShmConfig::default() };
        let items = options::items(options, &OPTION_NAMES, "shm")?;
        for &(key, value) in &items {
            match key {
                "name" => config.name = Some(check_name(value)?),
                "size" => config.size = Some(parse_segment_size(value)?),
                "create" => {
                    config.create = match value {
                        "1" => Create::New,
                        "0" => Create::Existing,
                        "auto" => Create::Auto,
                        _ => {
                            return Err(format!(
                                "create={value:?}: write create=1 (make the segment), create=0 (attach to an existing \
                             one) or create=auto (either; the default)"
                            ));
                        }
                    }
                }
                "unlink" => config.unlink = parse_switch(key, value)?,
                _ => config.reserve = parse_switch(key, value)?,
            }
        }
        match &config.name {
            None if items.iter().any(|&(k, _)| k == "unlink") && !config.unlink => {
                return Err("unlink=0 needs name=: a segment without a name is this process's own, and is always \
                            removed when the instance goes"
                    .into());
            }
            None if config.create == Create::Existing => {
                return Err("create=0 needs name=: give the name of the segment to attach to".into());
            }
            None => {
                config.unlink = true;
                config.create = Create::New;
            }
            Some(name) if config.create != Create::Existing && is_process_name(name) => {
                return Err(format!(
                    "name={name}: names of the form u<UID>-p<PID>-… are the plugin's own per-process segments; \
                     attach to one with create=0, or choose another name"
                ));
            }
            Some(_) => {}
        }
        Ok(config)
    }

    /// The segment's POSIX name, `/memplug-NAME`, for a named segment.
    pub fn segment_name(&self) -> Option<String> {
        self.name.as_ref().map(|n| format!("{PREFIX}{n}"))
    }

    /// The size a new segment gets.
    pub fn create_size(&self) -> u64 {
        self.size.unwrap_or(DEFAULT_SIZE)
    }
}

impl fmt::Display for ShmConfig {
    /// The options string of this configuration, every key given.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(name) = &self.name {
            write!(f, "name={name},")?;
        }
        if let Some(size) = self.size {
            write!(f, "size={size},")?;
        }
        let create = match self.create {
            Create::New => "1",
            Create::Existing => "0",
            Create::Auto => "auto",
        };
        write!(f, "create={create},unlink={},reserve={}", u8::from(self.unlink), u8::from(self.reserve))
    }
}

/// The name of a segment of process `pid` of user `uid` (without the
/// leading `/memplug-`): `u<UID>-p<PID>-<16 hex digits>`.
pub fn process_name(uid: u32, pid: u32, random: u64) -> String {
    format!("u{uid}-p{pid}-{random:016x}")
}

/// The PID in a per-process name of user `uid` (a file name in `/dev/shm`,
/// `memplug-u<UID>-p<PID>-<hex>`), if it is one.
pub fn process_of(file_name: &str, uid: u32) -> Option<u32> {
    let rest = file_name.strip_prefix(&PREFIX[1..])?.strip_prefix(&format!("u{uid}-p"))?;
    let (pid, random) = rest.split_once('-')?;
    (random.len() == 16 && random.bytes().all(|b| b.is_ascii_hexdigit())).then_some(())?;
    pid.parse().ok()
}

fn is_process_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('u') else { return false };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && rest[digits..].starts_with("-p")
}

fn check_name(name: &str) -> Result<String, String> {
    let ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-');
    if name.is_empty() || name.len() > MAX_NAME || !name.bytes().all(ok) || name.starts_with('.') {
        return Err(format!(
            "name={name:?}: a name is 1 to {MAX_NAME} bytes of [A-Za-z0-9_.-], not starting with a dot (the segment \
             is {PREFIX}NAME)"
        ));
    }
    Ok(name.to_string())
}

fn parse_segment_size(value: &str) -> Result<u64, String> {
    let (digits, shift) = match value.as_bytes().last() {
        Some(b'k' | b'K') => (&value[..value.len() - 1], 10),
        Some(b'm' | b'M') => (&value[..value.len() - 1], 20),
        Some(b'g' | b'G') => (&value[..value.len() - 1], 30),
        _ => (value, 0),
    };
    let n = (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse::<u64>().ok()?.checked_mul(1 << shift))
        .flatten()
        .filter(|n| (MIN_SIZE..=MAX_SIZE).contains(n));
    n.ok_or_else(|| format!("size={value:?}: write a size from 64k to 1024g, in bytes or with k, m or g (e.g. 256m)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_their_refusals() {
        let c = ShmConfig::parse("name=a.b-c_1, size=128k, create=1, unlink=1, reserve=1").unwrap();
        assert_eq!(c.segment_name().as_deref(), Some("/memplug-a.b-c_1"));
        assert_eq!((c.size, c.create, c.unlink, c.reserve), (Some(128 << 10), Create::New, true, true));
        assert_eq!(ShmConfig::parse("name=x").unwrap().create, Create::Auto);
        let own = ShmConfig::parse("").unwrap();
        assert_eq!((own.name, own.create, own.unlink), (None, Create::New, true));
        for (bad, says) in [
            ("size=1k", "from 64k"),
            ("size=2048g", "to 1024g"),
            ("size=lots", "256m"),
            ("create=yes", "create=0"),
            ("unlink=2", "unlink=1"),
            ("name=", "1 to 100 bytes"),
            ("name=.hidden", "not starting with a dot"),
            ("name=a b", "[A-Za-z0-9_.-]"),
            ("unlink=0", "needs name="),
            ("create=0", "needs name="),
            ("name=u1000-p42-abc", "per-process"),
            ("name=x,name=y", "twice"),
            ("colour=red", "name, size, create, unlink, reserve"),
            ("size", "key=value"),
        ] {
            let e = ShmConfig::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert!(ShmConfig::parse("name=u1000-p42-0123456789abcdef,create=0").is_ok(), "attaching to one is fine");
    }

    #[test]
    fn per_process_names_round_trip() {
        let name = process_name(1000, 4242, 0xfeed);
        assert_eq!(name, "u1000-p4242-000000000000feed");
        assert_eq!(process_of(&format!("memplug-{name}"), 1000), Some(4242));
        assert_eq!(process_of(&format!("memplug-{name}"), 1001), None, "another user's");
        assert_eq!(process_of("memplug-results", 1000), None);
        assert_eq!(process_of("memplug-u1000-p42-short", 1000), None);
    }
}
