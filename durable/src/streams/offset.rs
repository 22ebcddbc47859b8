//! Durable Streams offsets: opaque to clients, ordered, `%016d_%016d`.
//!
//! The protocol's rules, enforced here: an offset is under 256 characters,
//! never contains `, & = ? /`, and compares as a string in the order the
//! stream grows. Both halves are zero-padded to 16 digits, so string order
//! and numeric order agree. A standalone stream uses `0_<byte position>`
//! (the reference server's format: the fork tests send
//! `0000000000000000_0000000000000000` literally); a thread's log uses
//! `<generation>_<seq>`, so an offset of a log that was deleted and
//! re-created names another generation and is refused.

use std::fmt;

/// A position in a stream: every message at or before it has been read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct Offset {
    pub hi: u64,
    pub lo: u64,
}

impl Offset {
    pub const ZERO: Offset = Offset { hi: 0, lo: 0 };

    pub fn new(hi: u64, lo: u64) -> Offset {
        Offset { hi, lo }
    }

    /// Parses `\d+_\d+` (each half fitting in 16 digits); anything else is `None`.
    pub fn parse(raw: &str) -> Option<Offset> {
        let (hi, lo) = raw.split_once('_')?;
        let half = |s: &str| -> Option<u64> {
            if s.is_empty() || s.len() > 16 || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            s.parse().ok()
        };
        Some(Offset { hi: half(hi)?, lo: half(lo)? })
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016}_{:016}", self.hi, self.lo)
    }
}

/// The `offset` query parameter of a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// `-1`: from the beginning.
    Beginning,
    /// `now`: from the current tail.
    Now,
    /// Strictly after this offset.
    After(Offset),
}

/// Why an `offset` parameter was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartError {
    Empty,
    Repeated,
    Malformed,
}

impl StartError {
    pub fn message(self) -> &'static str {
        match self {
            StartError::Empty => "Empty offset parameter",
            StartError::Repeated => "Multiple offset parameters not allowed",
            StartError::Malformed => "Invalid offset format",
        }
    }
}

impl Start {
    /// Parses every `offset` value a query carried (`None` when absent).
    pub fn from_query(values: &[&str]) -> Result<Option<Start>, StartError> {
        match values {
            [] => Ok(None),
            [_, _, ..] => Err(StartError::Repeated),
            [""] => Err(StartError::Empty),
            ["-1"] => Ok(Some(Start::Beginning)),
            ["now"] => Ok(Some(Start::Now)),
            [v] => Offset::parse(v).map(|o| Some(Start::After(o))).ok_or(StartError::Malformed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_padded_and_orders_as_strings() {
        let a = Offset::new(0, 5);
        let b = Offset::new(0, 40);
        assert_eq!(a.to_string(), "0000000000000000_0000000000000005");
        assert!(a < b && a.to_string() < b.to_string());
        assert_eq!(Offset::parse(&b.to_string()), Some(b));
        assert_eq!(Offset::parse("0_0"), Some(Offset::ZERO));
        for bad in ["", "_", "1_", "_1", "a_1", "1_1_1", "-1_0", "12345678901234567_0", "1"] {
            assert_eq!(Offset::parse(bad), None, "{bad}");
        }
        for c in [',', '&', '=', '?', '/'] {
            assert!(!Offset::new(u64::MAX / 2, 7).to_string().contains(c));
        }
    }

    #[test]
    fn start_parameter() {
        assert_eq!(Start::from_query(&[]), Ok(None));
        assert_eq!(Start::from_query(&["-1"]), Ok(Some(Start::Beginning)));
        assert_eq!(Start::from_query(&["now"]), Ok(Some(Start::Now)));
        assert_eq!(Start::from_query(&[""]), Err(StartError::Empty));
        assert_eq!(Start::from_query(&["-1", "-1"]), Err(StartError::Repeated));
        assert_eq!(Start::from_query(&["-2"]), Err(StartError::Malformed));
    }
}
