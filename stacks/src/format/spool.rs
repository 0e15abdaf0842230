//! A spool: one process's file of records, written through a shared
//! mapping of it, so that appending a record costs no system call (a heap
//! profile's samples and frees go there). Reading it is, like the rest of
//! the format, a pure function over untrusted bytes.
//!
//! The file starts with a header of [`SPOOL_HEADER`] bytes: the magic
//! [`SPOOL_MAGIC`] (8 bytes), then two words in the machine's byte order
//! (the reader runs on the machine that wrote them) — at [`SPOOL_USED`] the
//! end of the space reserved so far, at [`SPOOL_COMMITTED`] the bytes the
//! file holds (allocated on disk ahead of the writers). A writer reserves
//! a record's space, rounded up to 8 bytes, by adding to the first word
//! (every process that shares the mapping, a forked child too, adds to the
//! same word), writes the record's bytes after its first 8, and those 8
//! (magic, version, kind, flags) last. So the record of a writer that died
//! half-way, or space reserved but never written, reads as a word of zeros
//! or as bytes without the magic: the reader steps over them 8 bytes at a
//! time until the next record, and counts what it stepped over.

use super::read::record_at;
use super::{FormatError, Record};

/// The first 8 bytes of a spool.
pub const SPOOL_MAGIC: [u8; 8] = *b"MPSPOOL1";
/// Bytes of a spool's header; the first record starts here.
pub const SPOOL_HEADER: usize = 64;
/// Where the header holds the end of the space reserved.
pub const SPOOL_USED: usize = 8;
/// Where the header holds the bytes the file holds.
pub const SPOOL_COMMITTED: usize = 16;
/// A spool's file is named `<trace><SPOOL_INFIX><pid>.<nonce>`, beside
/// the trace of the run (`<nonce>` in hexadecimal).
pub const SPOOL_INFIX: &str = ".spool.";
/// Records start at multiples of this.
pub const SPOOL_ALIGN: usize = 8;

/// The records of a spool, in the order their space was reserved; bytes
/// that are not a whole record are stepped over (see
/// [`Spooled::skipped`]).
pub struct Spooled<'a> {
    bytes: &'a [u8],
    at: usize,
    skipped: usize,
}

/// Read the records of the spool `bytes`; `Err` when they do not start
/// with a spool's header.
pub fn spooled(bytes: &[u8]) -> Result<Spooled<'_>, FormatError> {
    if bytes.len() < SPOOL_HEADER || bytes[..8] != SPOOL_MAGIC {
        return Err(FormatError::BadHeader { at: 0 });
    }
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[at..at + 8]);
        u64::from_ne_bytes(w)
    };
    // Only what was reserved, and what the file holds, was written.
    let end = usize::try_from(word(SPOOL_USED)).unwrap_or(usize::MAX).min(bytes.len());
    Ok(Spooled { bytes: &bytes[..end.max(SPOOL_HEADER)], at: SPOOL_HEADER, skipped: 0 })
}

impl Spooled<'_> {
    /// The bytes stepped over so far that were neither a record nor space
    /// reserved and left empty (records cut short by a writer's death).
    pub fn skipped(&self) -> usize {
        self.skipped
    }
}

impl<'a> Iterator for Spooled<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        while self.at + SPOOL_ALIGN <= self.bytes.len() {
            let at = self.at;
            if self.bytes[at..at + SPOOL_ALIGN].iter().all(|&b| b == 0) {
                self.at += SPOOL_ALIGN;
                continue;
            }
            match record_at(self.bytes, at) {
                Ok((record, next)) => {
                    self.at = next.next_multiple_of(SPOOL_ALIGN);
                    return Some(record);
                }
                Err(_) => {
                    self.at += SPOOL_ALIGN;
                    self.skipped += SPOOL_ALIGN;
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{self, NOT_FREED, Origin, SampleOut};
    use proptest::prelude::*;

    const O: Origin = Origin { pid: 7, nonce: 9 };

    /// A spool of `records`, each written whole unless its index is in
    /// `torn` (then all but its first 8 bytes), with `gap` empty words
    /// reserved before each.
    fn spool(records: &[Vec<u8>], torn: &[usize], gap: usize) -> Vec<u8> {
        let mut out = vec![0u8; SPOOL_HEADER];
        out[..8].copy_from_slice(&SPOOL_MAGIC);
        for (i, r) in records.iter().enumerate() {
            out.extend(std::iter::repeat_n(0, gap * SPOOL_ALIGN));
            let at = out.len();
            out.extend_from_slice(r);
            if torn.contains(&i) {
                out[at..at + 8].fill(0);
            }
            out.resize(out.len().next_multiple_of(SPOOL_ALIGN), 0);
        }
        let used = out.len() as u64;
        out[SPOOL_USED..SPOOL_USED + 8].copy_from_slice(&used.to_ne_bytes());
        out
    }

    fn sample(allocated: u64, frames: &[usize]) -> Vec<u8> {
        let s = SampleOut { bytes: 100, rate: 512, allocated, freed: NOT_FREED, inherited: false, stack: frames };
        let mut buf = [0u8; 512];
        format::sample(&mut buf, O, &s).unwrap().to_vec()
    }

    fn allocations(bytes: &[u8]) -> Vec<u64> {
        spooled(bytes)
            .unwrap()
            .filter_map(|r| match r {
                Record::Sample { allocated, .. } => Some(allocated),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn records_read_back_past_empty_space_and_torn_records() {
        let records: Vec<Vec<u8>> = (1..=5).map(|i| sample(i, &[0x1000, 0x2000 + i as usize])).collect();
        assert_eq!(allocations(&spool(&records, &[], 0)), [1, 2, 3, 4, 5]);
        assert_eq!(allocations(&spool(&records, &[], 3)), [1, 2, 3, 4, 5]);
        let torn = spool(&records, &[1, 3], 1);
        assert_eq!(allocations(&torn), [1, 3, 5]);
        let mut it = spooled(&torn).unwrap();
        it.by_ref().for_each(drop);
        assert!(it.skipped() > 0);
    }

    #[test]
    fn only_the_reserved_space_is_read() {
        let records: Vec<Vec<u8>> = (1..=3).map(|i| sample(i, &[])).collect();
        let mut s = spool(&records, &[], 0);
        let after_two = (SPOOL_HEADER + 2 * records[0].len().next_multiple_of(8)) as u64;
        s[SPOOL_USED..SPOOL_USED + 8].copy_from_slice(&after_two.to_ne_bytes());
        assert_eq!(allocations(&s), [1, 2]);
        s[SPOOL_USED..SPOOL_USED + 8].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert_eq!(allocations(&s), [1, 2, 3]);
    }

    #[test]
    fn a_file_without_the_header_is_refused() {
        assert!(spooled(b"MPSPOOL").is_err());
        assert!(spooled(&[0u8; 100]).is_err());
    }

    proptest! {
        #[test]
        fn any_bytes_after_a_header_read_without_panicking(
            body in proptest::collection::vec(any::<u8>(), 0..800),
            used in any::<u64>(),
        ) {
            let mut s = spool(&[], &[], 0);
            s[SPOOL_USED..SPOOL_USED + 8].copy_from_slice(&used.to_ne_bytes());
            s.extend(body);
            let mut it = spooled(&s).unwrap();
            it.by_ref().for_each(drop);
            prop_assert!(it.skipped() <= s.len());
        }
    }
}
