//! The modules the dynamic loader has loaded (`dl_iterate_phdr`): for each,
//! its address range, load bias, GNU build id (from its `PT_NOTE`
//! segments, in memory) and path (`/proc/self/exe` for the executable).
//! Nothing is copied or allocated: the callback sees the loader's own
//! bytes.

use crate::format::RawModule;
use core::ffi::{CStr, c_int, c_void};

/// `NT_GNU_BUILD_ID`.
const NT_GNU_BUILD_ID: u32 = 3;

/// Call `f` with every loaded module.
pub fn each_module(f: &mut dyn FnMut(&RawModule<'_>)) {
    let mut exe = [0u8; 512];
    let exe = super::sys::exe_path(&mut exe);
    let mut state = (f, exe);
    // SAFETY: the callback gets `state` back as its data pointer, alive for
    // the call; dl_iterate_phdr calls it once per module.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&raw mut state).cast()) };
}

type State<'f, 'e> = (&'f mut dyn FnMut(&RawModule<'_>), &'e [u8]);

/// One module.
unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
    // SAFETY: `data` is the `State` of `each_module`.
    let (f, exe) = unsafe { &mut *data.cast::<State<'_, '_>>() };
    // SAFETY: the loader's description of a loaded module, valid during the call.
    let info = unsafe { &*info };
    if info.dlpi_phdr.is_null() {
        return 0;
    }
    // SAFETY: dlpi_phnum program headers at dlpi_phdr.
    let phdrs = unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let bias = info.dlpi_addr;
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    let mut build_id: &[u8] = &[];
    for p in phdrs {
        if p.p_type == libc::PT_LOAD {
            lo = lo.min(p.p_vaddr);
            hi = hi.max(p.p_vaddr + p.p_memsz);
        }
        if p.p_type == libc::PT_NOTE && build_id.is_empty() {
            // SAFETY: a note segment of a loaded module is mapped readable.
            let notes = unsafe { core::slice::from_raw_parts((bias + p.p_vaddr) as *const u8, p.p_memsz as usize) };
            build_id = find_build_id(notes).unwrap_or(&[]);
        }
    }
    if lo > hi {
        return 0;
    }
    // SAFETY: dlpi_name is a NUL-terminated string or null.
    let name = if info.dlpi_name.is_null() { &[][..] } else { unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes() };
    let path = if name.is_empty() { *exe } else { name };
    f(&RawModule { start: bias + lo, end: bias + hi, bias, build_id, path });
    0
}

/// The GNU build id in a note segment's bytes.
fn find_build_id(mut notes: &[u8]) -> Option<&[u8]> {
    let word = |b: &[u8], at: usize| b.get(at..at + 4).map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
    while notes.len() >= 12 {
        let (namesz, descsz, kind) = (word(notes, 0)? as usize, word(notes, 4)? as usize, word(notes, 8)?);
        let name_end = 12 + namesz.next_multiple_of(4);
        let desc_end = name_end.checked_add(descsz.next_multiple_of(4))?;
        if desc_end > notes.len() {
            return None;
        }
        if kind == NT_GNU_BUILD_ID && notes.get(12..12 + namesz) == Some(&b"GNU\0"[..]) {
            return notes.get(name_end..name_end + descsz);
        }
        notes = &notes[desc_end..];
    }
    None
}

/// The address range `[start, end)` of the module holding `addr`.
pub fn range_of(addr: usize) -> Option<(usize, usize)> {
    let mut found = None;
    each_module(&mut |m| {
        if (m.start..m.end).contains(&(addr as u64)) {
            found = Some((m.start as usize, m.end as usize));
        }
    });
    found
}

/// The module holding `addr`: its path bytes copied into `path` (cut to
/// fit), and its bias; `None` when no module holds it.
pub fn module_of(addr: usize, path: &mut [u8]) -> Option<(usize, usize)> {
    let mut found = None;
    each_module(&mut |m| {
        if found.is_none() && (m.start..m.end).contains(&(addr as u64)) {
            let n = m.path.len().min(path.len());
            path[..n].copy_from_slice(&m.path[..n]);
            found = Some((n, m.bias as usize));
        }
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_and_libc_are_listed_with_build_ids() {
        let mut seen = Vec::new();
        each_module(&mut |m| seen.push((String::from_utf8_lossy(m.path).into_owned(), m.build_id.len(), m.start)));
        assert!(seen.iter().any(|(p, id, _)| p.contains("libc.so") && *id == 20), "{seen:?}");
        let me = range_of(this_test_binary_and_libc_are_listed_with_build_ids as fn() as usize).unwrap();
        assert!(me.0 < me.1);
        let mut path = [0u8; 256];
        let (n, _) = module_of(me.0, &mut path).unwrap();
        assert!(String::from_utf8_lossy(&path[..n]).contains("memplug_stacks"), "{:?}", &path[..n]);
    }
}
