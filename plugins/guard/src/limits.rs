//! The kernel's limit on a process's memory mappings (`vm.max_map_count`)
//! and how many this process holds: what guard says when it cannot map a
//! block. Reads `/proc` with a fixed buffer, no allocation that could itself
//! need a mapping at the limit.

use std::io::Read;

/// Where the limit is.
pub const MAX_MAP_COUNT: &str = "/proc/sys/vm/max_map_count";

/// Mappings from the limit within which a failed mapping is taken to be the
/// limit's doing (the program may map and unmap between the failure and the
/// count).
const NEAR: u64 = 16;

/// `vm.max_map_count`, if it can be read.
pub fn max_map_count() -> Option<u64> {
    let mut buf = [0u8; 32];
    let n = std::fs::File::open(MAX_MAP_COUNT).ok()?.read(&mut buf).ok()?;
    std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
}

/// The number of this process's mappings (lines of `/proc/self/maps`).
pub fn mappings() -> Option<u64> {
    let mut f = std::fs::File::open("/proc/self/maps").ok()?;
    let mut buf = [0u8; 16 << 10];
    let mut lines = 0u64;
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Some(lines),
            Ok(n) => lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// `(mappings, limit)` if the process is at (or within a few mappings of)
/// `vm.max_map_count`; `None` if it is not, or either cannot be read.
pub fn at_limit() -> Option<(u64, u64)> {
    let limit = max_map_count()?;
    let held = mappings()?;
    (held + NEAR >= limit).then_some((held, limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_and_the_count_read_and_the_test_process_is_far_below() {
        let limit = max_map_count().expect("/proc/sys/vm/max_map_count");
        let held = mappings().expect("/proc/self/maps");
        assert!(held > 0 && held < limit, "{held} of {limit}");
        assert_eq!(at_limit(), None);
    }
}
