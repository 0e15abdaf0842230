//! Reading a worker's protocol channel: a pure function of the bytes, with
//! bounded memory whatever they are. A worker's channel is untrusted input:
//! the plugin runs in the worker and can write to it.
//!
//! The stream is lines — `stage NAME` before each stage, anything else
//! ignored — and at most one answer frame, `result LEN` and `LEN` bytes of
//! CBOR, which must come right after the worker's `stage report` line and
//! be followed only by the end of the stream — or by records of forbidden
//! system calls, `forbidden-call NUMBER` lines ([`crate::isolate::syscalls::RECORD`]),
//! which the worker's `SIGSYS` handler writes at any time, even after the
//! answer (a destructor's call). Lines longer than
//! [`MAX_LINE`] are consumed in chunks and dropped; a frame longer than
//! [`MAX_ANSWER`] is refused before a byte of it is read. Whatever breaks
//! these rules ends the reading with an [`Event::Violation`].

use super::wire::{Answer, decode};
use crate::isolate::syscalls::parse_record;
use std::io::{BufRead, BufReader, Read};

/// The longest protocol line kept (64 KiB); longer ones are dropped.
pub const MAX_LINE: usize = 64 * 1024;
/// The largest answer frame accepted (4 MiB).
pub const MAX_ANSWER: u64 = 4 * 1024 * 1024;

/// What reading the channel gives, one at a time.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The worker starts this stage.
    Stage(String),
    /// Its answer (not yet checked against the request: see
    /// [`super::answer::validate`]).
    Answer(Answer),
    /// A record of a system call the sandbox forbids, by its number: the
    /// worker (or a child of it) made one and ended.
    Trapped(i64),
    /// The stream broke the protocol; nothing more is read.
    Violation(String),
    /// The stream ended.
    Eof,
}

/// How reading one bounded line went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineRead {
    /// A whole line is in the buffer (without its newline).
    Line,
    /// The line was longer than the bound: its first `max` bytes are in the
    /// buffer, the rest was consumed and dropped.
    TooLong,
    /// The stream ended (or failed) before any byte of a line.
    Eof,
}

/// Read one line of at most `max` bytes into `buf` (cleared first); a
/// longer line is consumed to its end without keeping more than `max`
/// bytes. A last line without a newline counts as a line.
pub(crate) fn read_line_bounded(r: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> LineRead {
    buf.clear();
    let mut any = false;
    let mut too_long = false;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => &[],
        };
        if chunk.is_empty() {
            return match (any, too_long) {
                (false, _) => LineRead::Eof,
                (true, false) => LineRead::Line,
                (true, true) => LineRead::TooLong,
            };
        }
        any = true;
        let (part, used, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(nl) => (&chunk[..nl], nl + 1, true),
            None => (chunk, chunk.len(), false),
        };
        let room = max.saturating_sub(buf.len());
        if part.len() > room {
            too_long = true;
        }
        buf.extend_from_slice(&part[..part.len().min(room)]);
        r.consume(used);
        if done {
            return if too_long { LineRead::TooLong } else { LineRead::Line };
        }
    }
}

/// A worker's protocol stream, read event by event.
pub struct Frames<R: Read> {
    r: BufReader<R>,
    line: Vec<u8>,
    after_report: bool,
    answered: bool,
    finished: bool,
}

impl<R: Read> Frames<R> {
    /// Read `r`.
    pub fn new(r: R) -> Frames<R> {
        Frames {
            r: BufReader::with_capacity(MAX_LINE, r),
            line: Vec::new(),
            after_report: false,
            answered: false,
            finished: false,
        }
    }

    /// The next event; [`Event::Eof`] for ever after the end or a
    /// violation.
    pub fn next_event(&mut self) -> Event {
        if self.finished {
            return Event::Eof;
        }
        let event = self.read_event();
        if matches!(event, Event::Eof | Event::Violation(_)) {
            self.finished = true;
        }
        event
    }

    fn read_event(&mut self) -> Event {
        if self.answered {
            // Only records of forbidden calls may follow the answer.
            let read = read_line_bounded(&mut self.r, &mut self.line, MAX_LINE);
            return match (read, parse_record(&self.line)) {
                (LineRead::Eof, _) => Event::Eof,
                (LineRead::Line, Some(number)) => Event::Trapped(number),
                _ => Event::Violation("something more was written after the answer".into()),
            };
        }
        loop {
            match read_line_bounded(&mut self.r, &mut self.line, MAX_LINE) {
                LineRead::Eof => return Event::Eof,
                LineRead::TooLong => {
                    self.after_report = false;
                    continue;
                }
                LineRead::Line => {}
            }
            if let Some(number) = parse_record(&self.line) {
                return Event::Trapped(number);
            }
            if let Some(stage) = self.line.strip_prefix(b"stage ") {
                let stage = String::from_utf8_lossy(stage).into_owned();
                self.after_report = stage == "report";
                return Event::Stage(stage);
            }
            let Some(len) = self.line.strip_prefix(b"result ") else {
                self.after_report = false;
                continue;
            };
            return self.read_answer(len.to_vec());
        }
    }

    fn read_answer(&mut self, len: Vec<u8>) -> Event {
        let Some(len) = std::str::from_utf8(&len).ok().and_then(|s| s.parse::<u64>().ok()) else {
            return Event::Violation("a malformed `result` line".into());
        };
        if !self.after_report {
            return Event::Violation("an answer that does not follow the worker's `report` stage".into());
        }
        if len > MAX_ANSWER {
            return Event::Violation(format!("an answer of {len} bytes (at most {MAX_ANSWER} are accepted)"));
        }
        let mut body = Vec::new();
        match (&mut self.r).take(len).read_to_end(&mut body) {
            Ok(n) if n as u64 == len => {}
            _ => return Event::Violation(format!("an answer cut short ({} of {len} bytes)", body.len())),
        }
        match decode::<Answer>(&body) {
            Ok(a) => {
                self.answered = true;
                Event::Answer(a)
            }
            Err(e) => Event::Violation(format!("an answer that is not well-formed ({e})")),
        }
    }
}

/// The records of forbidden calls in what processes other than the worker
/// (its descendants) wrote on the channel: each such process's `SIGSYS`
/// handler writes its record with one `write(2)`; every other byte of
/// theirs is dropped. Pure, and bounded: a record is short, and a longer
/// line is dropped as it comes.
#[derive(Debug, Default)]
pub(crate) struct ForeignRecords {
    /// The writer of the line being read, and its bytes so far (`None`
    /// once it is too long to be a record).
    line: Option<(u32, Option<Vec<u8>>)>,
}

impl ForeignRecords {
    /// The longest line kept: longer than any record.
    const MAX: usize = 64;

    /// Take `bytes`, written by process `from`; the numbers of the records
    /// they complete. Bytes of another writer than the line's end it (its
    /// writer's record would have come in one piece).
    pub(crate) fn take(&mut self, from: u32, bytes: &[u8]) -> Vec<i64> {
        let mut records = Vec::new();
        if self.line.as_ref().is_some_and(|(w, _)| *w != from) {
            self.line = None;
        }
        for &b in bytes {
            let (_, kept) = self.line.get_or_insert_with(|| (from, Some(Vec::new())));
            if b == b'\n' {
                records.extend(kept.take().as_deref().and_then(parse_record));
                self.line = None;
            } else if let Some(line) = kept {
                line.push(b);
                if line.len() > Self::MAX {
                    *kept = None;
                }
            }
        }
        records
    }
}

/// Every event of `bytes`, up to and including the first
/// [`Event::Eof`] or [`Event::Violation`].
pub fn events(bytes: impl Read) -> Vec<Event> {
    let mut frames = Frames::new(bytes);
    let mut out = Vec::new();
    loop {
        let e = frames.next_event();
        let last = matches!(e, Event::Eof | Event::Violation(_));
        out.push(e);
        if last {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolate::probe::wire::frame_result;

    fn framed(stages: &str, answer: &Answer) -> Vec<u8> {
        let mut b = stages.as_bytes().to_vec();
        b.extend(frame_result(answer).unwrap());
        b
    }

    #[test]
    fn the_worker_s_own_stream_reads() {
        let a = Answer::Reports(Vec::new());
        let ev = events(&framed("stage load\nstage report\n", &a)[..]);
        assert_eq!(ev, [Event::Stage("load".into()), Event::Stage("report".into()), Event::Answer(a), Event::Eof]);
    }

    #[test]
    fn violations() {
        let a = Answer::Reports(Vec::new());
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (framed("stage load\n", &a), "does not follow"),
            (framed("stage report\nnoise\n", &a), "does not follow"),
            ([framed("stage report\n", &a), b"x".to_vec()].concat(), "after the answer"),
            (b"stage report\nresult 1125899906842624\n".to_vec(), "at most"),
            (b"stage report\nresult 10\nabc".to_vec(), "cut short"),
            (b"stage report\nresult 3\n\xff\xff\xff".to_vec(), "not well-formed"),
            (b"stage report\nresult -1\n".to_vec(), "malformed"),
        ];
        for (bytes, what) in cases {
            let ev = events(&bytes[..]);
            match ev.last() {
                Some(Event::Violation(v)) => assert!(v.contains(what), "{v} / {what}"),
                other => panic!("{other:?} for {what}"),
            }
        }
    }

    #[test]
    fn records_of_forbidden_calls_are_read_before_and_after_the_answer() {
        let a = Answer::Reports(Vec::new());
        let mut bytes = framed("stage load\nforbidden-call 62\nstage report\n", &a);
        bytes.extend(b"forbidden-call 101\n");
        let ev = events(&bytes[..]);
        assert_eq!(
            ev,
            [
                Event::Stage("load".into()),
                Event::Trapped(62),
                Event::Stage("report".into()),
                Event::Answer(a.clone()),
                Event::Trapped(101),
                Event::Eof
            ]
        );
        // Not a record: still something more after the answer.
        let mut bytes = framed("stage report\n", &a);
        bytes.extend(b"forbidden-call x\n");
        assert!(matches!(events(&bytes[..]).last(), Some(Event::Violation(_))));
    }

    #[test]
    fn only_whole_records_count_in_what_other_processes_write() {
        let mut f = ForeignRecords::default();
        assert_eq!(f.take(7, b"stage report\nresult 3\nabc"), Vec::<i64>::new());
        assert_eq!(f.take(7, b"\nforbidden-call 62\nforbidden-call 1"), [62]);
        assert_eq!(f.take(7, b"01\n"), [101], "the same writer's line goes on");
        assert_eq!(f.take(8, b"forbidden-call 6"), Vec::<i64>::new());
        assert_eq!(f.take(9, b"2\n"), Vec::<i64>::new(), "another writer's bytes end the line");
        let long = [b"forbidden-call ".as_slice(), &[b'1'; 100], b"\n"].concat();
        assert_eq!(f.take(9, &long), Vec::<i64>::new());
        assert_eq!(f.take(9, b"forbidden-call 5\n"), [5]);
    }

    #[test]
    fn long_lines_are_dropped_in_chunks() {
        let mut bytes = vec![b'x'; 3 * MAX_LINE + 5];
        bytes.extend(b"\nstage load\n");
        bytes.extend(vec![b'y'; MAX_LINE * 2]);
        let ev = events(&bytes[..]);
        assert_eq!(ev, [Event::Stage("load".into()), Event::Eof]);
    }
}
