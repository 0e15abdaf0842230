//! Reading an instance's options string (ABI 1.1 `create`): the grammar the
//! bundled plugins share, for Rust plugins that want the same one —
//! comma-separated `key=value` items, spaces allowed around them, each key
//! known and given at most once; sizes in decimal with an optional `k`, `m`
//! or `g` suffix (powers of 1024); switches `0` or `1`. Every error is a
//! message that says what is accepted, ready for `create`'s error text.
//!
//! ```
//! use memplug_abi::options;
//!
//! let items = options::items(" size=4k, fast=1 ", &["size", "fast"], "this plugin").unwrap();
//! assert_eq!(items, [("size", "4k"), ("fast", "1")]);
//! assert_eq!(options::parse_size("4k"), Some(4096));
//! assert_eq!(options::parse_switch("fast", "1"), Ok(true));
//! let e = options::items("sise=1", &["size", "fast"], "this plugin").unwrap_err();
//! assert_eq!(e, r#"unknown option "sise"; this plugin knows size, fast"#);
//! ```

/// The `(key, value)` items of `options`, in order, each key one of
/// `known`. `who` names the plugin in the message for an unknown key
/// ("unknown option "x"; WHO knows a, b"). An empty string has no items.
pub fn items<'a>(options: &'a str, known: &[&str], who: &str) -> Result<Vec<(&'a str, &'a str)>, String> {
    let mut items: Vec<(&str, &str)> = Vec::new();
    for item in options.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(format!("option {item:?} has no value: write it as key=value"));
        };
        let (key, value) = (key.trim(), value.trim());
        if !known.contains(&key) {
            return Err(format!("unknown option {key:?}; {who} knows {}", known.join(", ")));
        }
        if items.iter().any(|&(k, _)| k == key) {
            return Err(format!("option {key:?} is given twice"));
        }
        items.push((key, value));
    }
    Ok(items)
}

/// A size: decimal digits with an optional `k`, `m` or `g` suffix (either
/// case; powers of 1024); `None` for anything else or on overflow.
pub fn parse_size(s: &str) -> Option<usize> {
    let (digits, shift) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 10),
        b'm' | b'M' => (&s[..s.len() - 1], 20),
        b'g' | b'G' => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<usize>().ok()?.checked_mul(1 << shift)
}

/// A switch `key=value`: `0` or `1`, else a message saying so.
pub fn parse_switch(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(format!("{key}={value:?}: write {key}=1 to turn it on or {key}=0 to turn it off")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_refuse_what_the_grammar_does_not_allow() {
        let known = ["a", "b"];
        assert_eq!(items("", &known, "p").unwrap(), []);
        assert_eq!(items(" , ", &known, "p").unwrap(), []);
        assert_eq!(items("b = 2 ,a=1", &known, "p").unwrap(), [("b", "2"), ("a", "1")]);
        assert_eq!(items("a", &known, "p").unwrap_err(), r#"option "a" has no value: write it as key=value"#);
        assert_eq!(items("a=1,a=2", &known, "p").unwrap_err(), r#"option "a" is given twice"#);
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("k"), None);
        assert_eq!(parse_size("-1"), None);
        assert_eq!(parse_size("99999999999999999999g"), None);
        assert!(parse_switch("x", "yes").unwrap_err().contains("x=1"));
    }
}
