//! glibc's extended allocator interface as it makes sense for a plugin's
//! heap: the numbers `mallinfo2` and `mallinfo` give, the `mallopt`
//! parameters accepted, and the summaries `malloc_stats` and `malloc_info`
//! write. The exported functions, and the calls into glibc's own when libc
//! serves, are `exports_raw`'s; this module holds no unsafe code and never
//! allocates.

use crate::block_raw::HEADER;
use crate::call_raw::mode;
use crate::plugin_raw::{plugin_stats, setup};
use crate::setup::Mode;
use crate::summary::c;
use crate::text::Text;
use crate::{boot_raw, stats};
use core::ffi::c_int;
use core::fmt::Write;

/// glibc's largest `M_MXFAST` (`80 * sizeof(size_t) / 4`).
const MAX_FAST: c_int = (80 * core::mem::size_of::<usize>() / 4) as c_int;

/// glibc's largest `M_MMAP_THRESHOLD` on 64 bits (half its heap size).
const MAX_MMAP_THRESHOLD: c_int = 32 << 20;

/// What the interposer knows of the program's heap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Heap {
    /// Bytes of the program's live blocks.
    pub(crate) in_use: usize,
    /// Bytes the handler holds for them, headers included.
    pub(crate) held: usize,
    /// The most bytes in use (or held, from the handler's statistics) at
    /// once.
    pub(crate) peak: usize,
    /// Live blocks.
    pub(crate) blocks: usize,
    /// Bytes of the bootstrap heap's region carved so far.
    pub(crate) bootstrap: usize,
    /// Whether any count is known (the interposer counts, or the handler
    /// keeps statistics).
    pub(crate) known: bool,
}

/// What is known of the heap now: the interposer's counts when it keeps
/// them (under `--report`), else the handler's statistics when it keeps
/// them, else zeros. Safe from anywhere: a handler's statistics are not
/// asked for from inside a call into it (a signal handler's, say).
pub(crate) fn heap() -> Heap {
    let plugin = match mode() {
        m if m.plugin_serves() => setup().plugin.as_ref().and_then(plugin_stats),
        _ => None,
    };
    let sz = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    let mut h = Heap { bootstrap: boot_raw::carved(), ..Heap::default() };
    if stats::counting() {
        h.blocks = stats::ALLOCS.get().saturating_sub(stats::FREES.get());
        h.in_use = stats::live();
        h.peak = stats::peak();
        h.held = plugin.map_or(h.in_use.saturating_add(HEADER.saturating_mul(h.blocks)), |s| sz(s.live_bytes));
        h.known = true;
    } else if let Some(s) = plugin {
        h.blocks = sz(s.live_count);
        h.held = sz(s.live_bytes);
        h.in_use = h.held.saturating_sub(HEADER.saturating_mul(h.blocks));
        h.peak = sz(s.peak_bytes);
        h.known = true;
    }
    h
}

/// `mallinfo2` for `h`: `arena` is what the handler holds plus the
/// bootstrap region carved, `uordblks` the program's live bytes, `usmblks`
/// the peak; glibc's free-chunk and `mmap` fields are 0 (a handler's free
/// memory is its own, and the ABI does not report it).
pub(crate) fn mallinfo2(h: &Heap) -> libc::mallinfo2 {
    libc::mallinfo2 {
        arena: h.held.saturating_add(h.bootstrap),
        ordblks: 0,
        smblks: 0,
        hblks: 0,
        hblkhd: 0,
        usmblks: h.peak,
        fsmblks: 0,
        uordblks: h.in_use,
        fordblks: 0,
        keepcost: 0,
    }
}

/// `mallinfo`: `mallinfo2`'s fields, each saturated to `int`.
pub(crate) fn narrow(m: &libc::mallinfo2) -> libc::mallinfo {
    let i = |n: usize| c_int::try_from(n).unwrap_or(c_int::MAX);
    libc::mallinfo {
        arena: i(m.arena),
        ordblks: i(m.ordblks),
        smblks: i(m.smblks),
        hblks: i(m.hblks),
        hblkhd: i(m.hblkhd),
        usmblks: i(m.usmblks),
        fsmblks: i(m.fsmblks),
        uordblks: i(m.uordblks),
        fordblks: i(m.fordblks),
        keepcost: i(m.keepcost),
    }
}

/// `mallopt` when a plugin (or the bootstrap heap) serves: 1 for each of
/// glibc's parameters with a value glibc would take — none means anything
/// for a plugin's heap, so each is accepted and ignored — and 0 for a
/// value glibc refuses and for a parameter it does not define.
pub(crate) fn mallopt(param: c_int, value: c_int) -> c_int {
    let ok = match param {
        libc::M_MXFAST => (0..=MAX_FAST).contains(&value),
        libc::M_MMAP_THRESHOLD => (0..=MAX_MMAP_THRESHOLD).contains(&value),
        libc::M_NLBLKS
        | libc::M_GRAIN
        | libc::M_KEEP
        | libc::M_TRIM_THRESHOLD
        | libc::M_TOP_PAD
        | libc::M_MMAP_MAX
        | libc::M_CHECK_ACTION
        | libc::M_PERTURB
        | libc::M_ARENA_TEST
        | libc::M_ARENA_MAX => true,
        _ => false,
    };
    c_int::from(ok)
}

/// Which allocator serves, in words.
fn served() -> &'static str {
    match mode() {
        m if m.plugin_serves() => "plugin",
        Mode::Libc => "libc",
        _ => "bootstrap",
    }
}

/// The handler's name ("" before the constructor has set it up).
fn handler() -> &'static str {
    match mode() {
        m if m == Mode::Libc || m.plugin_serves() => c(&setup().name),
        _ => "",
    }
}

/// `malloc_stats`'s summary, in glibc's layout.
pub(crate) fn write_stats(out: &mut Text, h: &Heap) -> core::fmt::Result {
    writeln!(out, "memplug run: handler {} (served by {})", handler(), served())?;
    writeln!(out, "system bytes     = {:>10}", h.held.saturating_add(h.bootstrap))?;
    writeln!(out, "in use bytes     = {:>10}", h.in_use)?;
    writeln!(out, "max in use bytes = {:>10}", h.peak)?;
    writeln!(out, "live blocks      = {:>10}", h.blocks)?;
    writeln!(out, "bootstrap bytes  = {:>10}", h.bootstrap)?;
    if !h.known {
        writeln!(out, "(no counts: they are kept under memplug run --report, or by a handler that keeps statistics)")?;
    }
    Ok(())
}

/// `malloc_info`'s summary: glibc's `<malloc>` element, with the same
/// numbers as `malloc_stats`.
pub(crate) fn write_info(out: &mut Text, h: &Heap) -> core::fmt::Result {
    out.write_str("<malloc version=\"1\" allocator=\"memplug\" handler=\"")?;
    for ch in handler().chars() {
        out.write_char(if matches!(ch, '<' | '>' | '&' | '"' | '\'') { '_' } else { ch })?;
    }
    writeln!(out, "\" served_by=\"{}\">", served())?;
    writeln!(out, "<total type=\"in_use\" count=\"{}\" size=\"{}\"/>", h.blocks, h.in_use)?;
    writeln!(out, "<total type=\"bootstrap\" size=\"{}\"/>", h.bootstrap)?;
    writeln!(out, "<system type=\"current\" size=\"{}\"/>", h.held.saturating_add(h.bootstrap))?;
    writeln!(out, "<system type=\"max\" size=\"{}\"/>", h.peak)?;
    writeln!(out, "</malloc>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mallopt_accepts_glibcs_parameters_and_refuses_what_glibc_refuses() {
        for p in [libc::M_TRIM_THRESHOLD, libc::M_TOP_PAD, libc::M_MMAP_MAX, libc::M_ARENA_MAX, libc::M_PERTURB] {
            assert_eq!(mallopt(p, 1), 1, "{p}");
        }
        assert_eq!((mallopt(libc::M_MXFAST, 64), mallopt(libc::M_MXFAST, MAX_FAST + 1)), (1, 0));
        assert_eq!((mallopt(libc::M_MMAP_THRESHOLD, 1 << 20), mallopt(libc::M_MMAP_THRESHOLD, -1)), (1, 0));
        assert_eq!((mallopt(0, 1), mallopt(12345, 1), mallopt(-100, 1)), (0, 0, 0));
    }

    #[test]
    fn mallinfo_saturates_each_field_to_int() {
        let h = Heap { in_use: 1 << 40, held: 10, peak: 7, blocks: 1, bootstrap: 5, known: true };
        let m = mallinfo2(&h);
        assert_eq!((m.arena, m.uordblks, m.usmblks, m.fordblks), (15, 1 << 40, 7, 0));
        let n = narrow(&m);
        assert_eq!((n.arena, n.uordblks, n.usmblks), (15, c_int::MAX, 7));
    }

    #[test]
    fn the_summaries_fit_the_buffer_and_say_when_nothing_is_counted() {
        let mut out = Text::new();
        write_stats(&mut out, &Heap::default()).unwrap();
        let s = core::str::from_utf8(out.bytes()).unwrap();
        assert!(s.contains("in use bytes     =          0") && s.contains("no counts"), "{s}");
        let mut out = Text::new();
        write_info(&mut out, &Heap { in_use: 3, blocks: 1, ..Heap::default() }).unwrap();
        let s = core::str::from_utf8(out.bytes()).unwrap();
        assert!(
            s.starts_with("<malloc version=\"1\"")
                && s.contains("count=\"1\" size=\"3\"")
                && s.ends_with("</malloc>\n")
        );
    }
}
