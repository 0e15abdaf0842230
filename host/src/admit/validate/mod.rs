//! Validation of a plugin's handler header: pure Rust over bytes, no FFI.
//!
//! The loader copies the handler's bytes out of the plugin (the 16-byte
//! prefix first, then as much of the rest as both sides know) and hands them
//! here. Two parts:
//! - `header.rs` decodes bytes into fields ([`Prefix`], [`RawFields`])
//!   without judging them, so that a refused plugin can still be shown;
//! - `rules.rs` judges them ([`validate`], [`readable_len`]) and supplies
//!   the defaults for what an older plugin lacks ([`readings`]). The same
//!   rules as a host of an older minor applied them ([`validate_as`],
//!   [`readable_len_as`]) are kept, so that tests can show how a plugin of a
//!   newer minor reads to such a host.
//!
//! Everything that decides whether a plugin is accepted happens in
//! [`validate`], so it can be fuzzed with arbitrary input.
//!
//! ```
//! use memplug::validate::{validate, HeaderImage};
//! use memplug_abi::{MemplugHandler, FLAG_THREAD_SAFE};
//!
//! let mut h = MemplugHandler::new("demo", "1.0.0", FLAG_THREAD_SAFE);
//! let image = HeaderImage::of(&h);
//! // Functions are missing, so it is refused:
//! assert_eq!(validate(image.bytes()).unwrap_err().code(), "null-function");
//!
//! let mut bytes = image.bytes().to_vec();
//! bytes[0] ^= 0xff;
//! assert_eq!(validate(&bytes).unwrap_err().code(), "bad-magic");
//! ```

mod header;
mod rules;

pub use crate::heap::info::memory_kind_name;
pub use header::{FunctionAddrs, HeaderImage, Prefix, RawFields, RawV11, V1_1_FIELDS, V1_2_FIELDS, V1_3_FIELDS};
pub use rules::{
    FieldReading, MAX_ALIGNMENT, ValidatedHeader, check_v1_3_flags, is_accepted_memory_kind, readable_len,
    readable_len_as, readings, v1_1_readings, v1_2_readings, v1_3_readings, validate, validate_as,
};
pub(crate) use rules::{check_name, check_version, is_name_byte};
