//! Text that came from outside — file names, and the names, versions and
//! messages a plugin supplies — made safe to show, and file names carried
//! whole.
//!
//! - [`escape`] and [`escape_bytes`]: what a terminal would act on becomes
//!   visible. C0 controls, DEL and C1 controls are written `\r`, `\n`,
//!   `\t`, `\e` (ESC) or `\x7f`, `\u{9b}`; the bidirectional overrides and
//!   isolates (U+202A–U+202E, U+2066–U+2069), which reorder what follows
//!   them on a line, `\u{202e}`; a byte that is not UTF-8 `\xNN`.
//!   Everything else, backslashes included, is left as it is, so escaping
//!   escaped text changes nothing.
//! - [`path_serde`]: a path (any bytes, as Unix allows) as a string when it
//!   is UTF-8; otherwise as a CBOR byte string between processes (and in
//!   the verdict cache), whole, and in JSON as [`escape_bytes`] of it
//!   (lossy: JSON output is for reading).

use std::ffi::OsStr;
use std::fmt::Write;
use std::os::unix::ffi::OsStrExt;

/// Whether `c` would be acted on by a terminal or reorder a line: C0
/// controls, DEL, C1 controls, bidirectional overrides and isolates.
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every character [`is_unsafe_char`] finds written as a visible
/// escape (see the module docs).
pub fn escape(s: &str) -> String {
    if !s.chars().any(is_unsafe_char) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    push_escaped(&mut out, s);
    out
}

/// The bytes `b` as text: UTF-8 runs as [`escape`] writes them, every
/// other byte as `\xNN`.
pub fn escape_bytes(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        push_escaped(&mut out, chunk.valid());
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out
}

/// A path as JSON carries it: the path itself when it is UTF-8, else
/// [`escape_bytes`] of it.
pub fn json_path(p: &std::path::Path) -> String {
    p.to_str().map_or_else(|| escape_bytes(p.as_os_str().as_bytes()), str::to_string)
}

/// A file name (or any `OsStr`) as [`escape_bytes`] shows it.
pub fn escape_os(s: &OsStr) -> String {
    escape_bytes(s.as_bytes())
}

fn push_escaped(out: &mut String, s: &str) {
    for c in s.chars() {
        if !is_unsafe_char(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{1b}' => out.push_str("\\e"),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
}

/// `#[serde(with = "crate::text::path_serde")]` for a `PathBuf`: a string
/// when it is UTF-8, else bytes in binary formats (CBOR) and an escaped
/// string in text formats (JSON) — see the module docs. Reading (from a
/// self-describing format) accepts a string, bytes, or an array of byte
/// values.
pub mod path_serde {
    use serde::de::{self, SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};
    use std::ffi::OsString;
    use std::fmt;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::{Path, PathBuf};

    /// Write `path`.
    pub fn serialize<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
        match path.to_str() {
            Some(text) => s.serialize_str(text),
            None if s.is_human_readable() => s.serialize_str(&super::json_path(path)),
            None => s.serialize_bytes(path.as_os_str().as_bytes()),
        }
    }

    /// Read a path.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        d.deserialize_any(PathVisitor)
    }

    struct PathVisitor;

    impl<'de> Visitor<'de> for PathVisitor {
        type Value = PathBuf;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a path as bytes or a string")
        }

        fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<PathBuf, E> {
            Ok(PathBuf::from(std::ffi::OsStr::from_bytes(v)))
        }

        fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<PathBuf, E> {
            Ok(PathBuf::from(OsString::from_vec(v)))
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<PathBuf, E> {
            Ok(PathBuf::from(v))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PathBuf, A::Error> {
            let mut bytes = Vec::new();
            while let Some(b) = seq.next_element::<u8>()? {
                bytes.push(b);
            }
            Ok(PathBuf::from(OsString::from_vec(bytes)))
        }
    }
}

/// `#[serde(with = "crate::text::opt_path_serde")]` for an `Option<PathBuf>`,
/// each path written as [`path_serde`] writes it.
pub mod opt_path_serde {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::path::PathBuf;

    #[derive(Serialize, Deserialize)]
    struct P(#[serde(with = "super::path_serde")] PathBuf);

    /// Write `path`.
    pub fn serialize<S: Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        path.as_ref().map(|p| P(p.clone())).serialize(s)
    }

    /// Read an optional path.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        Ok(Option::<P>::deserialize(d)?.map(|p| p.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_overrides_become_visible() {
        assert_eq!(escape("plain name-1.0 ü"), "plain name-1.0 ü");
        assert_eq!(escape("a\rb\nc\td"), "a\\rb\\nc\\td");
        assert_eq!(escape("\x1b[32m ok"), "\\e[32m ok");
        assert_eq!(escape("x\u{7f}\u{0}\u{9b}"), "x\\x7f\\x00\\u{9b}");
        assert_eq!(escape("abc\u{202e}cba\u{2066}"), "abc\\u{202e}cba\\u{2066}");
    }

    #[test]
    fn escaping_twice_changes_nothing() {
        let once = escape_bytes(b"lib\xff\r\x1b.so");
        assert_eq!(once, "lib\\xff\\r\\e.so");
        assert_eq!(escape(&once), once);
    }

    #[test]
    fn escaped_text_has_no_control_characters() {
        let all: Vec<u8> = (0..=255u8).collect();
        let shown = escape_bytes(&all);
        assert!(!shown.chars().any(is_unsafe_char), "{shown}");
        let chars: String = (0..0x3000u32).filter_map(char::from_u32).collect();
        assert!(!escape(&chars).chars().any(is_unsafe_char));
    }

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct P(#[serde(with = "path_serde")] std::path::PathBuf);

    #[test]
    fn paths_travel_as_bytes_and_show_as_strings() {
        let odd = P(std::path::PathBuf::from(OsStr::from_bytes(b"/d/lib\xffbad\r.so")));
        let mut cbor = Vec::new();
        ciborium::into_writer(&odd, &mut cbor).unwrap();
        let back: P = ciborium::from_reader(cbor.as_slice()).unwrap();
        assert_eq!(back, odd);
        let value = ciborium::Value::serialized(&odd).unwrap();
        assert!(value.is_bytes(), "{value:?}");
        // A UTF-8 path is a text string, as it always was (older caches read).
        let plain = P(std::path::PathBuf::from("/d/libx.so"));
        assert!(ciborium::Value::serialized(&plain).unwrap().is_text());
        let old = ciborium::Value::Text("/d/liby.so".into()).deserialized::<P>().unwrap();
        assert_eq!(old, P("/d/liby.so".into()));
    }
}
