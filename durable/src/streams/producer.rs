//! Idempotent producers: `Producer-Id`, `Producer-Epoch`, `Producer-Seq`.
//!
//! A producer's state is its epoch and the last sequence number stored, kept
//! with the stream and written in the same atomic block as the append it
//! admits, so a retried batch lands exactly once even across restarts.

use serde::{Deserialize, Serialize};

/// How long an idle producer's state is kept (7 days, as the reference).
pub const PRODUCER_TTL_MS: i64 = 7 * 24 * 3600 * 1000;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerState {
    pub epoch: u64,
    pub last_seq: u64,
    pub updated_ms: i64,
}

/// The three headers of a producer's request, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Producer {
    pub id: String,
    pub epoch: u64,
    pub seq: u64,
}

/// The largest integer a JavaScript client can send exactly.
const MAX_SAFE: u64 = (1 << 53) - 1;

impl Producer {
    /// All three headers or none: `Ok(None)` without them, `Err(message)`
    /// for a partial set, an empty id, or a non-integer epoch or seq.
    pub fn from_headers(
        id: Option<&str>,
        epoch: Option<&str>,
        seq: Option<&str>,
    ) -> Result<Option<Producer>, &'static str> {
        let (id, epoch, seq) = match (id, epoch, seq) {
            (None, None, None) => return Ok(None),
            (Some(i), Some(e), Some(s)) => (i, e, s),
            _ => {
                return Err(
                    "All producer headers (Producer-Id, Producer-Epoch, Producer-Seq) must be provided together",
                )
            }
        };
        if id.is_empty() {
            return Err("Invalid Producer-Id: must not be empty");
        }
        let int = |v: &str| -> Option<u64> {
            (!v.is_empty() && v.len() <= 16 && v.bytes().all(|b| b.is_ascii_digit()))
                .then(|| v.parse().ok())
                .flatten()
                .filter(|n| *n <= MAX_SAFE)
        };
        let epoch = int(epoch).ok_or("Invalid Producer-Epoch: must be a non-negative integer")?;
        let seq = int(seq).ok_or("Invalid Producer-Seq: must be a non-negative integer")?;
        Ok(Some(Producer { id: id.to_owned(), epoch, seq }))
    }
}

/// What the stored state says about a producer's request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Store it, then record this state.
    Accept(ProducerState),
    /// Already stored: 204 with the last stored seq, nothing appended.
    Duplicate { last_seq: u64 },
    /// A newer epoch owns the producer id: 403.
    StaleEpoch { current: u64 },
    /// A new epoch must start at seq 0: 400.
    EpochSeqNotZero,
    /// A seq was skipped: 409 with the expected and received seqs.
    Gap { expected: u64, received: u64 },
}

/// The producer state machine. `state` is the stored state, `None` when the
/// producer is unknown or its state expired.
pub fn check(state: Option<&ProducerState>, p: &Producer, now: i64) -> Verdict {
    let accept = |seq| Verdict::Accept(ProducerState { epoch: p.epoch, last_seq: seq, updated_ms: now });
    let state = state.filter(|s| now - s.updated_ms <= PRODUCER_TTL_MS);
    match state {
        None if p.seq == 0 => accept(0),
        None => Verdict::Gap { expected: 0, received: p.seq },
        Some(s) if p.epoch < s.epoch => Verdict::StaleEpoch { current: s.epoch },
        Some(s) if p.epoch > s.epoch => {
            if p.seq == 0 {
                accept(0)
            } else {
                Verdict::EpochSeqNotZero
            }
        }
        Some(s) if p.seq <= s.last_seq => Verdict::Duplicate { last_seq: s.last_seq },
        Some(s) if p.seq == s.last_seq + 1 => accept(p.seq),
        Some(s) => Verdict::Gap { expected: s.last_seq + 1, received: p.seq },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(epoch: u64, seq: u64) -> Producer {
        Producer { id: "w".into(), epoch, seq }
    }

    #[test]
    fn state_machine() {
        let s = |epoch, last_seq| ProducerState { epoch, last_seq, updated_ms: 0 };
        assert!(matches!(check(None, &p(0, 0), 1), Verdict::Accept(ProducerState { last_seq: 0, .. })));
        assert_eq!(check(None, &p(0, 3), 1), Verdict::Gap { expected: 0, received: 3 });
        assert_eq!(check(Some(&s(2, 5)), &p(1, 6), 1), Verdict::StaleEpoch { current: 2 });
        assert_eq!(check(Some(&s(2, 5)), &p(3, 1), 1), Verdict::EpochSeqNotZero);
        assert!(matches!(check(Some(&s(2, 5)), &p(3, 0), 1), Verdict::Accept(ProducerState { epoch: 3, .. })));
        assert_eq!(check(Some(&s(2, 5)), &p(2, 5), 1), Verdict::Duplicate { last_seq: 5 });
        assert_eq!(check(Some(&s(2, 5)), &p(2, 2), 1), Verdict::Duplicate { last_seq: 5 });
        assert!(matches!(check(Some(&s(2, 5)), &p(2, 6), 1), Verdict::Accept(ProducerState { last_seq: 6, .. })));
        assert_eq!(check(Some(&s(2, 5)), &p(2, 8), 1), Verdict::Gap { expected: 6, received: 8 });
        // An expired state is forgotten.
        assert_eq!(check(Some(&s(2, 5)), &p(2, 6), PRODUCER_TTL_MS + 1), Verdict::Gap { expected: 0, received: 6 });
    }

    #[test]
    fn headers() {
        assert_eq!(Producer::from_headers(None, None, None), Ok(None));
        assert!(Producer::from_headers(Some("a"), None, Some("1")).is_err());
        assert!(Producer::from_headers(Some(""), Some("0"), Some("0")).is_err());
        assert!(Producer::from_headers(Some("a"), Some("-1"), Some("0")).is_err());
        assert!(Producer::from_headers(Some("a"), Some("0"), Some("1.5")).is_err());
        assert!(Producer::from_headers(Some("a"), Some("9007199254740992"), Some("0")).is_err());
        assert_eq!(
            Producer::from_headers(Some("a"), Some("1"), Some("2")),
            Ok(Some(Producer { id: "a".into(), epoch: 1, seq: 2 }))
        );
    }
}
