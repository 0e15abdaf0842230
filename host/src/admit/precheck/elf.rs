//! The ELF checks: is a file a shared library the dynamic loader of this
//! host could open? Pure Rust over the file's bytes, no I/O: the caller
//! hands in a function that reads a range of the file ([`examine`]), or the
//! whole file as a slice ([`examine_bytes`], for tests and fuzzing).
//!
//! Checks, in order (the first failure is the refusal):
//! 1. the ELF identification: magic `\x7fELF`, a known class, byte order and
//!    version, a whole header — else `not-elf`;
//! 2. class (ELF32/ELF64), byte order and machine against this host's
//!    ([`Target::HOST`]) — else `wrong-architecture`;
//! 3. the object type: a shared object (`ET_DYN`) whose dynamic section
//!    does not mark it a position-independent executable (`DF_1_PIE`) —
//!    else `not-a-shared-object` (executable, PIE, relocatable object, core
//!    dump). For `ET_DYN` the program headers and the `PT_DYNAMIC` segment
//!    are read, at most [`MAX_DYNAMIC`] bytes of it.
//!
//! What only the loader can tell (a missing dependency, an undefined symbol,
//! an ABI variant encoded in `e_flags`) is left to it. [`dependencies`]
//! reads what a library asks the loader to load with it (`DT_NEEDED`,
//! `DT_RUNPATH`, `DT_RPATH`), for the verdict cache's key; finding those
//! files is [`super::resolve`]'s (I/O).

use crate::admit::error::Refusal;
use std::fmt;
use std::path::Path;

/// Bytes read first: an ELF64 header (an ELF32 one is 52).
pub const HEADER_LEN: usize = 64;
/// The most of a `PT_DYNAMIC` segment read when looking for `DT_FLAGS_1`
/// (4096 ELF64 entries; real libraries have a few dozen).
pub const MAX_DYNAMIC: usize = 64 * 1024;

const ET_REL: u16 = 1;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const ET_CORE: u16 = 4;
const PT_DYNAMIC: u32 = 2;
const DT_NULL: u64 = 0;
const DT_FLAGS_1: u64 = 0x6fff_fffb;
const DF_1_PIE: u64 = 0x0800_0000;
const PT_LOAD: u32 = 1;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;
const DT_STRSZ: u64 = 10;
const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;
/// The most of a dynamic string table read for the names of dependencies.
pub const MAX_STRTAB: usize = 1 << 20;

/// What an ELF file is built for: word size, byte order and machine
/// (`e_machine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Target {
    /// ELF64 (else ELF32).
    pub class64: bool,
    /// Little-endian (else big-endian).
    pub little_endian: bool,
    /// `e_machine`, e.g. 62 for x86-64.
    pub machine: u16,
}

impl Target {
    /// This host, as the dynamic loader of this build expects its libraries.
    /// On an architecture memplug does not know `machine` is 0 and is not
    /// compared (the loader still checks it).
    pub const HOST: Target = Target {
        class64: cfg!(target_pointer_width = "64"),
        little_endian: cfg!(target_endian = "little"),
        machine: host_machine(),
    };
}

/// `e_machine` of this build's target, or 0 when unknown here.
const fn host_machine() -> u16 {
    if cfg!(target_arch = "x86_64") {
        62
    } else if cfg!(target_arch = "aarch64") {
        183
    } else if cfg!(target_arch = "x86") {
        3
    } else if cfg!(target_arch = "arm") {
        40
    } else if cfg!(any(target_arch = "riscv64", target_arch = "riscv32")) {
        243
    } else if cfg!(target_arch = "powerpc64") {
        21
    } else if cfg!(target_arch = "powerpc") {
        20
    } else if cfg!(target_arch = "s390x") {
        22
    } else if cfg!(any(target_arch = "mips", target_arch = "mips64")) {
        8
    } else if cfg!(target_arch = "loongarch64") {
        258
    } else if cfg!(target_arch = "sparc64") {
        43
    } else {
        0
    }
}

/// The common name of an `e_machine` value.
pub fn machine_name(machine: u16) -> Option<&'static str> {
    Some(match machine {
        2 => "SPARC",
        3 => "i386",
        8 => "MIPS",
        20 => "PowerPC",
        21 => "PowerPC64",
        22 => "S/390",
        40 => "ARM",
        43 => "SPARC V9",
        50 => "IA-64",
        62 => "x86-64",
        183 => "AArch64",
        243 => "RISC-V",
        258 => "LoongArch",
        _ => return None,
    })
}

impl fmt::Display for Target {
    /// E.g. `ELF64 little-endian x86-64`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let class = if self.class64 { "ELF64" } else { "ELF32" };
        let order = if self.little_endian { "little-endian" } else { "big-endian" };
        match machine_name(self.machine) {
            Some(name) => write!(f, "{class} {order} {name}"),
            None => write!(f, "{class} {order} machine {:#x}", self.machine),
        }
    }
}

/// The decoded ELF header: what the checks need of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// What the file is built for.
    pub target: Target,
    /// `e_type`.
    pub e_type: u16,
    /// `e_phoff`: where the program headers start.
    pub phoff: u64,
    /// `e_phentsize`.
    pub phentsize: u16,
    /// `e_phnum`.
    pub phnum: u16,
}

/// A file that passed the ELF checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elf {
    /// What it is built for (this host's target).
    pub target: Target,
}

impl fmt::Display for Elf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} shared object", self.target)
    }
}

/// Integers in the file's byte order, at offsets checked by the caller.
struct Reader<'a> {
    bytes: &'a [u8],
    little: bool,
}

impl Reader<'_> {
    fn u16(&self, off: usize) -> u16 {
        let b = [self.bytes[off], self.bytes[off + 1]];
        if self.little { u16::from_le_bytes(b) } else { u16::from_be_bytes(b) }
    }

    fn u32(&self, off: usize) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.bytes[off..off + 4]);
        if self.little { u32::from_le_bytes(b) } else { u32::from_be_bytes(b) }
    }

    fn u64(&self, off: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.bytes[off..off + 8]);
        if self.little { u64::from_le_bytes(b) } else { u64::from_be_bytes(b) }
    }

    /// A word: 8 bytes in ELF64, 4 in ELF32.
    fn word(&self, off: usize, class64: bool) -> u64 {
        if class64 { self.u64(off) } else { u64::from(self.u32(off)) }
    }
}

/// Decode the ELF header from the file's first bytes (up to
/// [`HEADER_LEN`] of them). Refuses what is not ELF (`not-elf`).
pub fn parse_header(path: &Path, bytes: &[u8]) -> Result<Header, Refusal> {
    let not_elf = |problem: String| Refusal::NotElf { path: path.to_path_buf(), problem };
    if bytes.is_empty() {
        return Err(not_elf("the file is empty".into()));
    }
    if !bytes.starts_with(b"\x7fELF") {
        if b"\x7fELF".starts_with(bytes) {
            return Err(not_elf(format!("truncated: {} bytes", bytes.len())));
        }
        let start = bytes.iter().take(8).flat_map(|b| std::ascii::escape_default(*b)).map(char::from);
        return Err(not_elf(format!(
            "it starts with \"{}\", not with the ELF magic \\x7fELF",
            start.collect::<String>()
        )));
    }
    if bytes.len() < 16 {
        return Err(not_elf(format!("truncated: {} bytes, less than the 16-byte ELF identification", bytes.len())));
    }
    let class64 = match bytes[4] {
        1 => false,
        2 => true,
        c => return Err(not_elf(format!("unknown ELF class {c} (1 is ELF32, 2 is ELF64)"))),
    };
    let little = match bytes[5] {
        1 => true,
        2 => false,
        d => return Err(not_elf(format!("unknown byte order {d} (1 is little-endian, 2 is big-endian)"))),
    };
    if bytes[6] != 1 {
        return Err(not_elf(format!("ELF identification version {}, not 1", bytes[6])));
    }
    let need = if class64 { 64 } else { 52 };
    if bytes.len() < need {
        let class = if class64 { "ELF64" } else { "ELF32" };
        return Err(not_elf(format!("truncated: {} bytes, less than an {class} header ({need})", bytes.len())));
    }
    let r = Reader { bytes, little };
    let (phoff, phentsize, phnum) =
        if class64 { (r.u64(32), r.u16(54), r.u16(56)) } else { (u64::from(r.u32(28)), r.u16(42), r.u16(44)) };
    Ok(Header {
        target: Target { class64, little_endian: little, machine: r.u16(18) },
        e_type: r.u16(16),
        phoff,
        phentsize,
        phnum,
    })
}

/// Refuse a file built for another target than `host` (`wrong-architecture`).
/// A `host` machine of 0 (unknown) is not compared.
pub fn check_target(path: &Path, header: &Header, host: Target) -> Result<(), Refusal> {
    let t = header.target;
    let machine_ok = host.machine == 0 || t.machine == host.machine;
    if t.class64 == host.class64 && t.little_endian == host.little_endian && machine_ok {
        return Ok(());
    }
    Err(Refusal::WrongArchitecture { path: path.to_path_buf(), found: t.to_string(), host: host.to_string() })
}

/// Refuse an object type the loader cannot open as a library
/// (`not-a-shared-object`). `flags_1` is the dynamic section's
/// `DT_FLAGS_1`, if any (only looked at for `ET_DYN`).
pub fn check_type(path: &Path, e_type: u16, flags_1: Option<u64>) -> Result<(), Refusal> {
    let kind = match e_type {
        ET_DYN if flags_1.is_some_and(|f| f & DF_1_PIE != 0) => "position-independent executable".to_string(),
        ET_DYN => return Ok(()),
        ET_EXEC => "executable".to_string(),
        ET_REL => "relocatable object".to_string(),
        ET_CORE => "core dump".to_string(),
        other => format!("file of type {other:#x}"),
    };
    Err(Refusal::NotASharedObject { path: path.to_path_buf(), kind })
}

/// Where the program headers lie: `(offset, length)`. Refuses an entry
/// size that is not the class's (the loader would refuse it too).
pub fn program_headers(path: &Path, header: &Header) -> Result<(u64, usize), Refusal> {
    let size = if header.target.class64 { 56 } else { 32 };
    if header.phnum != 0 && usize::from(header.phentsize) != size {
        let problem = format!("program header entries of {} bytes, not {size}", header.phentsize);
        return Err(Refusal::NotElf { path: path.to_path_buf(), problem });
    }
    Ok((header.phoff, usize::from(header.phnum) * size))
}

/// The file range of the first `PT_DYNAMIC` segment in `phdrs` (the bytes
/// [`program_headers`] names), at most [`MAX_DYNAMIC`] bytes of it.
pub fn dynamic_segment(header: &Header, phdrs: &[u8]) -> Option<(u64, usize)> {
    let class64 = header.target.class64;
    let r = Reader { bytes: phdrs, little: header.target.little_endian };
    let size = if class64 { 56 } else { 32 };
    (0..phdrs.len() / size).map(|i| i * size).find(|&off| r.u32(off) == PT_DYNAMIC).map(|off| {
        let (offset, filesz) =
            if class64 { (r.u64(off + 8), r.u64(off + 32)) } else { (r.word(off + 4, false), r.word(off + 16, false)) };
        (offset, usize::try_from(filesz).unwrap_or(usize::MAX).min(MAX_DYNAMIC))
    })
}

/// The value of `DT_FLAGS_1` in a dynamic segment's bytes, if it is there
/// before `DT_NULL`.
pub fn flags_1(header: &Header, dynamic: &[u8]) -> Option<u64> {
    let class64 = header.target.class64;
    let r = Reader { bytes: dynamic, little: header.target.little_endian };
    let (size, half) = if class64 { (16, 8) } else { (8, 4) };
    for off in (0..dynamic.len() / size).map(|i| i * size) {
        match r.word(off, class64) {
            DT_NULL => return None,
            DT_FLAGS_1 => return Some(r.word(off + half, class64)),
            _ => {}
        }
    }
    None
}

/// Run every ELF check on a file of `len` bytes. `read(offset, n)` returns
/// the file's bytes `offset..offset + n` (never asked for bytes past
/// `len`), or `None` when they cannot be read.
pub fn examine(
    path: &Path,
    len: u64,
    host: Target,
    read: &mut dyn FnMut(u64, usize) -> Option<Vec<u8>>,
) -> Result<Elf, Refusal> {
    let first = read(0, usize::try_from(len).unwrap_or(usize::MAX).min(HEADER_LEN))
        .ok_or_else(|| Refusal::NotElf { path: path.to_path_buf(), problem: "its header cannot be read".into() })?;
    let mut read_range = |offset: u64, n: usize, what: &str| {
        let end = offset.checked_add(n as u64).filter(|&end| end <= len);
        let problem = || format!("truncated: its {what} end past the file's {len} bytes");
        end.ok_or_else(problem)
            .and_then(|_| read(offset, n).ok_or_else(|| format!("its {what} cannot be read")))
            .map_err(|problem| Refusal::NotElf { path: path.to_path_buf(), problem })
    };
    let header = parse_header(path, &first)?;
    check_target(path, &header, host)?;
    if header.e_type != ET_DYN {
        return check_type(path, header.e_type, None).map(|()| Elf { target: header.target });
    }
    let (phoff, phlen) = program_headers(path, &header)?;
    let phdrs = read_range(phoff, phlen, "program headers")?;
    let flags = match dynamic_segment(&header, &phdrs) {
        Some((offset, n)) => flags_1(&header, &read_range(offset, n, "dynamic section")?),
        None => None,
    };
    check_type(path, header.e_type, flags)?;
    Ok(Elf { target: header.target })
}

/// What a library asks the dynamic loader to load with it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Dependencies {
    /// `DT_NEEDED`, in order: sonames, or paths (with a `/`).
    pub needed: Vec<String>,
    /// `DT_RPATH` (searched first, unless there is a `DT_RUNPATH`).
    pub rpath: Option<String>,
    /// `DT_RUNPATH` (searched after `LD_LIBRARY_PATH`).
    pub runpath: Option<String>,
}

/// The dependencies of an ELF shared library of `len` bytes, read through
/// `read` as for [`examine`]; `None` when they cannot be read (not ELF, a
/// range past the end, a string table no `PT_LOAD` segment maps, a name
/// outside it). A library without a dynamic section has none.
pub fn dependencies(len: u64, read: &mut dyn FnMut(u64, usize) -> Option<Vec<u8>>) -> Option<Dependencies> {
    let mut get = |offset: u64, n: usize| {
        offset.checked_add(n as u64).filter(|&end| end <= len)?;
        read(offset, n).filter(|b| b.len() == n)
    };
    let header = parse_header(Path::new(""), &get(0, usize::try_from(len).ok()?.min(HEADER_LEN))?).ok()?;
    let (phoff, phlen) = program_headers(Path::new(""), &header).ok()?;
    let phdrs = get(phoff, phlen)?;
    let Some((offset, n)) = dynamic_segment(&header, &phdrs) else { return Some(Dependencies::default()) };
    let n = usize::try_from(len.saturating_sub(offset)).unwrap_or(usize::MAX).min(n);
    let dynamic = get(offset, n)?;
    let class64 = header.target.class64;
    let r = Reader { bytes: &dynamic, little: header.target.little_endian };
    let (size, half) = if class64 { (16, 8) } else { (8, 4) };
    let (mut needed, mut strtab, mut strsz, mut rpath, mut runpath) = (Vec::new(), None, None, None, None);
    for off in (0..dynamic.len() / size).map(|i| i * size) {
        let value = r.word(off + half, class64);
        match r.word(off, class64) {
            DT_NULL => break,
            DT_NEEDED => needed.push(value),
            DT_STRTAB => strtab = Some(value),
            DT_STRSZ => strsz = Some(value),
            DT_RPATH => rpath = Some(value),
            DT_RUNPATH => runpath = Some(value),
            _ => {}
        }
    }
    if needed.is_empty() && rpath.is_none() && runpath.is_none() {
        return Some(Dependencies::default());
    }
    let start = file_offset(&header, &phdrs, strtab?)?;
    let n = usize::try_from(strsz?.min(len.saturating_sub(start))).ok()?.min(MAX_STRTAB);
    let table = get(start, n)?;
    let string = |at: u64| {
        let rest = table.get(usize::try_from(at).ok()?..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&rest[..end]).into_owned())
    };
    Some(Dependencies {
        needed: needed.into_iter().map(string).collect::<Option<_>>()?,
        rpath: rpath.map(string).map_or(Some(None), |s| s.map(Some))?,
        runpath: runpath.map(string).map_or(Some(None), |s| s.map(Some))?,
    })
}

/// The file offset of virtual address `vaddr`, through the `PT_LOAD`
/// segment that maps it.
fn file_offset(header: &Header, phdrs: &[u8], vaddr: u64) -> Option<u64> {
    let class64 = header.target.class64;
    let r = Reader { bytes: phdrs, little: header.target.little_endian };
    let size = if class64 { 56 } else { 32 };
    (0..phdrs.len() / size).map(|i| i * size).filter(|&off| r.u32(off) == PT_LOAD).find_map(|off| {
        let (offset, start, filesz) = if class64 {
            (r.u64(off + 8), r.u64(off + 16), r.u64(off + 32))
        } else {
            (r.word(off + 4, false), r.word(off + 8, false), r.word(off + 16, false))
        };
        let inside = vaddr.checked_sub(start).filter(|&d| d < filesz)?;
        offset.checked_add(inside)
    })
}

/// [`dependencies`] of a whole file in memory.
pub fn dependencies_bytes(file: &[u8]) -> Option<Dependencies> {
    dependencies(file.len() as u64, &mut |offset, n| {
        let start = usize::try_from(offset).ok()?;
        file.get(start..start.checked_add(n)?).map(<[u8]>::to_vec)
    })
}

/// [`examine`] over the whole file in memory.
pub fn examine_bytes(path: &Path, file: &[u8], host: Target) -> Result<Elf, Refusal> {
    examine(path, file.len() as u64, host, &mut |offset, n| {
        let start = usize::try_from(offset).ok()?;
        file.get(start..start.checked_add(n)?).map(<[u8]>::to_vec)
    })
}
