//! The warning `memplug run` prints before starting a program on `guard`
//! when `vm.max_map_count` is low for it: every guarded block costs up to
//! three memory mappings, so a program with many live blocks reaches the
//! kernel's limit and its `malloc` returns NULL. With `sample=N` guard's
//! mappings are bounded by its slots, and the warning is given only if the
//! limit cannot hold them.

/// Where the limit is.
const MAX_MAP_COUNT: &str = "/proc/sys/vm/max_map_count";

/// The limit below which guard without `sample=` is warned about: room for
/// about 350,000 live blocks (what `sysctl` is told to raise it to).
pub(super) const FULL_GUARD_WANTS: u64 = 1 << 20;

/// Mappings each guarded block may cost (its reservation split around the
/// readable window).
const PER_BLOCK: u64 = 3;

/// Mappings left for the program itself beside guard's slots.
const PROGRAM_HEADROOM: u64 = 8192;

/// guard's default number of slots with `sample=`.
const DEFAULT_SLOTS: u64 = 4096;

/// `vm.max_map_count`, if it can be read.
fn max_map_count() -> Option<u64> {
    std::fs::read_to_string(MAX_MAP_COUNT).ok()?.trim().parse().ok()
}

/// The warning for handler `name` with `options`, if the machine's limit is
/// low for it.
pub(super) fn map_count_warning(name: Option<&str>, options: &str) -> Option<String> {
    if name != Some("guard") {
        return None;
    }
    warning(options, max_map_count()?)
}

/// The value of `key` in an options string.
fn option<'a>(options: &'a str, key: &str) -> Option<&'a str> {
    options.split(',').filter_map(|i| i.split_once('=')).find(|(k, _)| k.trim() == key).map(|(_, v)| v.trim())
}

/// The warning for guard with `options` under a limit of `limit` mappings.
fn warning(options: &str, limit: u64) -> Option<String> {
    let raise = format!("sudo sysctl -w vm.max_map_count={FULL_GUARD_WANTS}");
    match option(options, "sample") {
        None => (limit < FULL_GUARD_WANTS).then(|| {
            format!(
                "vm.max_map_count is {limit}: guard maps every block on pages of its own, two or {PER_BLOCK} \
                 mappings each, so past about {} to {} live blocks the program's malloc returns NULL (guard says \
                 so once). Guard one allocation in N instead (--handler guard:sample=1000), or raise the limit \
                 ({raise})",
                limit / PER_BLOCK,
                limit / 2
            )
        }),
        Some(_) => {
            let slots = option(options, "slots").and_then(|s| s.parse().ok()).unwrap_or(DEFAULT_SLOTS);
            let needs = slots.saturating_mul(2).saturating_add(1 + PROGRAM_HEADROOM);
            (limit < needs).then(|| {
                format!(
                    "vm.max_map_count is {limit}: guard's {slots} slots may take {} mappings, leaving the program \
                     too few. Give guard fewer slots (slots=), or raise the limit ({raise})",
                    2 * slots + 1
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warned_below_what_guard_needs_only() {
        let w = warning("", 65_530).unwrap();
        for says in
            ["65530", "about 21843 to 32765 live blocks", "guard:sample=1000", "sysctl -w vm.max_map_count=1048576"]
        {
            assert!(w.contains(says), "{says}: {w}");
        }
        assert_eq!(warning("side=start", 1 << 20), None);
        assert_eq!(warning("sample=1000", 65_530), None, "the default slots fit");
        let w = warning("sample=10, slots=100000", 65_530).unwrap();
        assert!(w.contains("100000 slots") && w.contains("slots="), "{w}");
        assert_eq!(map_count_warning(Some("tracking"), ""), None);
    }
}
