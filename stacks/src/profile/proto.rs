//! pprof's `profile.proto` (package `perftools.profiles`, the format of
//! github.com/google/pprof that `pprof`, speedscope and Grafana read), as
//! the messages `prost` encodes and decodes; a profile file is one
//! [`Profile`], gzipped ([`encode_gz`], [`decode_gz`]). Every string is an
//! index into [`Profile::string_table`], whose first entry is `""`.

use prost::Message;
use std::io::{Read, Write};

/// A profile: sample types, samples, and the mappings, locations and
/// functions they name.
#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    /// What each sample's values measure (one value per type).
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// The samples: a stack and its values.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// The modules the addresses are in.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// The addresses of the stacks.
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// The functions the locations are in.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Every string the profile uses; index 0 is `""`.
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// Frames to drop (a regular expression; a string index).
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    /// Frames to keep (a regular expression; a string index).
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    /// When the profile was taken (nanoseconds since the epoch).
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// How long it covers.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// What the sampling period is counted in.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// The sampling period.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free-form comments (string indices).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type shown by default (the string index of its type).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// A sample type or the period's type: `type` and `unit` (string indices).
#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    /// What is counted (`alloc_space`, …).
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// In what (`bytes`, `count`).
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// One stack and its values.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// The stack's locations, innermost first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per sample type.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Labels.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// A sample's label.
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    /// Its key (a string index).
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// A string value (a string index), or 0.
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// A numeric value.
    #[prost(int64, tag = "3")]
    pub num: i64,
    /// The numeric value's unit (a string index).
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// A module of the process.
#[derive(Clone, PartialEq, Message)]
pub struct Mapping {
    /// Its id (from 1).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its first address.
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// One past its last.
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// The file offset `memory_start` maps.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// Its file (a string index).
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// Its build id, in hex (a string index).
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// Whether its locations name functions.
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    /// Whether they name files.
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    /// Whether they name lines.
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    /// Whether they show inlined calls.
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// An address, and the source lines it stands for.
#[derive(Clone, PartialEq, Message)]
pub struct Location {
    /// Its id (from 1).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its mapping's id (0: none).
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// The instruction's address in the process.
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// The calls at it: inlined calls first, the function they were
    /// inlined into last.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    /// Whether several addresses were folded into it.
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

/// A function and a line in it.
#[derive(Clone, PartialEq, Message)]
pub struct Line {
    /// The function's id.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// The line (0: unknown).
    #[prost(int64, tag = "2")]
    pub line: i64,
    /// The column (0: unknown).
    #[prost(int64, tag = "3")]
    pub column: i64,
}

/// A function.
#[derive(Clone, PartialEq, Message)]
pub struct Function {
    /// Its id (from 1).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its name, demangled (a string index).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// Its name as the system knows it (a string index).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// Its source file (a string index).
    #[prost(int64, tag = "4")]
    pub filename: i64,
    /// Its first line (0: unknown).
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}

/// Why a profile file could not be read.
#[derive(Debug)]
pub enum DecodeError {
    /// It is not gzip data (or the data is cut short).
    Gzip(std::io::Error),
    /// The gzipped bytes are not a `Profile`.
    Proto(prost::DecodeError),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Gzip(e) => write!(f, "not a gzipped profile: {e}"),
            DecodeError::Proto(e) => write!(f, "not a pprof profile: {e}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// `profile` encoded and gzipped, as pprof writes its files.
pub fn encode_gz(profile: &Profile) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into a Vec cannot fail.
    let _ = gz.write_all(&profile.encode_to_vec());
    gz.finish().unwrap_or_default()
}

/// A profile file read back: gunzipped and decoded.
pub fn decode_gz(bytes: &[u8]) -> Result<Profile, DecodeError> {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut raw).map_err(DecodeError::Gzip)?;
    Profile::decode(raw.as_slice()).map_err(DecodeError::Proto)
}

impl Profile {
    /// String `i` of the table (`""` when out of range).
    pub fn string(&self, i: i64) -> &str {
        usize::try_from(i).ok().and_then(|i| self.string_table.get(i)).map_or("", String::as_str)
    }

    /// The index of the sample type named `name`.
    pub fn sample_index(&self, name: &str) -> Option<usize> {
        self.sample_type.iter().position(|t| self.string(t.r#type) == name)
    }

    /// The function names of a sample's stack, innermost first (the calls
    /// inlined at an address before the function they were inlined into).
    pub fn function_names(&self, sample: &Sample) -> Vec<&str> {
        let mut out = Vec::new();
        for id in &sample.location_id {
            let Some(loc) = self.location.iter().find(|l| l.id == *id) else { continue };
            for line in &loc.line {
                if let Some(f) = self.function.iter().find(|f| f.id == line.function_id) {
                    out.push(self.string(f.name));
                }
            }
        }
        out
    }

    /// The total of the sample type `name` over the samples whose stack
    /// names a function containing `function` (each sample counted once).
    pub fn total_in(&self, name: &str, function: &str) -> i64 {
        let Some(i) = self.sample_index(name) else { return 0 };
        self.sample
            .iter()
            .filter(|s| self.function_names(s).iter().any(|f| f.contains(function)))
            .map(|s| s.value.get(i).copied().unwrap_or(0))
            .sum()
    }

    /// The total of the sample type `name` over all samples.
    pub fn total(&self, name: &str) -> i64 {
        let Some(i) = self.sample_index(name) else { return 0 };
        self.sample.iter().map(|s| s.value.get(i).copied().unwrap_or(0)).sum()
    }
}
