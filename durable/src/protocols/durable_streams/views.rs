//! A thread's durable log, and one run's events, read as JSON-mode Durable
//! Streams (`GET /v1/threads/:threadId`, `GET /v1/runs/:runId`).
//!
//! Offsets are `<generation>_<seq>` ([`Offset`] `{hi: generation, lo: seq}`):
//! `seq` is the log's own sequence number (strictly increasing, stored, so
//! valid across restarts); `generation` is drawn when the log is first read
//! as a stream and stored with it. Deleting a thread deletes its generation,
//! so an offset of a deleted log names a generation the re-created log does
//! not have, and is refused (410 `stale_offset`) instead of being silently
//! read as a position in another log ([`resolve`]).
//!
//! Only durable facts travel (the records the log stores): live text deltas
//! have no offset, and reach these views as the `text-block` facts they are
//! coalesced into.

use super::offset::{Offset, Start};
use super::producer::{self, Producer, ProducerState, Verdict};
use super::wire::{self, Reply};
use crate::error::ApiError;
use crate::store::{Record, Store};

/// The meta key a log's generation is stored under.
pub const GENERATION_KEY: &str = "ds_generation";

/// The log's generation, drawing and storing one (from `draw`) on first use.
pub fn generation<S: Store>(store: &mut S, draw: impl FnOnce() -> u64) -> Result<u64, ApiError> {
    if let Some(g) = store.meta(GENERATION_KEY).map_err(ApiError::storage)?.and_then(|v| v.parse().ok()) {
        return Ok(g);
    }
    // 1..=10^15: fits the 16 digits of an offset half, never 0.
    let g = draw() % 1_000_000_000_000_000 + 1;
    store.set_meta(GENERATION_KEY, Some(&g.to_string())).map_err(ApiError::storage)?;
    Ok(g)
}

/// The log's generation if one was drawn (a log never read as a stream has
/// none yet).
pub fn stored_generation<S: Store>(store: &S) -> Result<Option<u64>, ApiError> {
    Ok(store.meta(GENERATION_KEY).map_err(ApiError::storage)?.and_then(|v| v.parse().ok()))
}

/// The offset after `seq` in generation `gen`.
pub fn offset(gen: u64, seq: u64) -> String {
    Offset::new(gen, seq).to_string()
}

/// Resolves a view's `offset` parameter to the seq to read after: `-1` (or
/// none) is 0, `now` the tail. An offset of another generation is 410
/// `stale_offset`; one past the tail, or malformed, 400 `invalid_offset`.
pub fn resolve(values: &[&str], gen: u64, last_seq: u64) -> Result<Option<u64>, ApiError> {
    let start = Start::from_query(values).map_err(|e| ApiError::invalid_offset(e.message()))?;
    Ok(match start {
        None => None,
        Some(Start::Beginning) => Some(0),
        Some(Start::Now) => Some(last_seq),
        Some(Start::After(o)) if o.hi != gen => return Err(ApiError::stale_offset()),
        Some(Start::After(o)) if o.lo > last_seq => {
            return Err(ApiError::invalid_offset("this offset is past the end of the log"))
        }
        Some(Start::After(o)) => Some(o.lo),
    })
}

/// A batch of records as a JSON array of their events.
pub fn json_body(records: &[Record]) -> Vec<u8> {
    wire::json_array(records.iter().map(|r| r.data.as_bytes()))
}

/// The stream position a batch leaves a reader at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    pub gen: u64,
    /// The seq of the last record delivered (or the starting point).
    pub seq: u64,
    /// Nothing more is stored after `seq` right now.
    pub up_to_date: bool,
    /// No more can ever come (a run whose `run-finish` is stored and read).
    pub closed: bool,
}

/// A catch-up or long-poll answer: the batch as a JSON array.
/// Catch-up answers are `no-store`: they are snapshots of a growing log.
pub fn batch_reply(records: &[Record], pos: Position, cursor: Option<String>) -> Reply {
    let mut r = Reply::new(200)
        .header("content-type", "application/json; charset=utf-8")
        .header("cache-control", "no-store")
        .header(wire::NEXT_OFFSET, offset(pos.gen, pos.seq))
        .body(json_body(records));
    if pos.up_to_date {
        r.set(wire::UP_TO_DATE, "true");
    }
    if pos.closed {
        r.set(wire::CLOSED, "true");
    }
    if let Some(c) = cursor {
        r.set(wire::CURSOR, c);
    }
    r
}

/// A long-poll that waited and got nothing: 204 at the same position.
pub fn timeout_reply(pos: Position, cursor: String) -> Reply {
    let mut r = Reply::new(204)
        .header("cache-control", "no-store")
        .header(wire::NEXT_OFFSET, offset(pos.gen, pos.seq))
        .header(wire::UP_TO_DATE, "true")
        .header(wire::CURSOR, cursor);
    if pos.closed {
        r.set(wire::CLOSED, "true");
    }
    r
}

/// SSE: one `data` event holding the batch as a JSON array (when there is
/// one), then its `control` event (§5.8: a control event follows every
/// data event). Also the keep-alive when `records` is empty.
pub fn sse_batch(records: &[Record], pos: Position, cursor: &str, out: &mut Vec<u8>) {
    if !records.is_empty() {
        wire::sse_event("data", &String::from_utf8_lossy(&json_body(records)), out);
    }
    wire::sse_control(&offset(pos.gen, pos.seq), Some(cursor), pos.up_to_date, pos.closed, out);
}

/// The last `n` of a run's records (`tail=N`): 1 to 10000.
pub fn tail_param(raw: Option<&str>) -> Result<Option<usize>, ApiError> {
    match raw {
        None => Ok(None),
        Some(v) => {
            v.parse::<usize>().ok().filter(|n| (1..=10_000).contains(n)).map(Some).ok_or_else(ApiError::invalid_tail)
        }
    }
}

/// `view` of a thread read: `history` (one folded snapshot) or `updates`
/// (the log after an offset, which it requires). Without `view`, a plain
/// Durable Streams read of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Log,
    History,
    Updates,
}

impl View {
    pub fn parse(raw: Option<&str>, has_offset: bool) -> Result<View, ApiError> {
        match raw {
            None => Ok(View::Log),
            Some("history") => Ok(View::History),
            Some("updates") if has_offset => Ok(View::Updates),
            Some("updates") => Err(ApiError::offset_required("view=updates resumes after an offset: pass ?offset=")),
            Some(_) => Err(ApiError::invalid_view("`view` is `history` or `updates`")),
        }
    }
}

/// The producer state key of one producer of one run.
pub fn producer_key(run_id: &str, producer_id: &str) -> String {
    format!("ds_producer:{run_id}:{producer_id}")
}

/// What an idempotent append to a run does.
#[derive(Debug, PartialEq)]
pub enum RunAppend {
    /// Publish the batch, then store this producer state in the same block.
    Publish(Option<(String, ProducerState)>),
    /// Already stored: answer 204 with the last stored seq, publish nothing.
    Duplicate(Reply),
}

/// A refused producer append: the JSON error and the protocol's headers.
pub type Refusal = Box<(ApiError, Vec<(&'static str, String)>)>;

/// Checks an append's producer headers against the stored state (`state`
/// read from `producer_key`). A batch without producer headers is simply
/// published. Refusals carry stable codes: 403 `stale_producer_epoch`,
/// 400 `producer_epoch_seq`, 409 `producer_seq_gap`.
pub fn check_producer(
    run_id: &str,
    producer: Option<&Producer>,
    state: Option<&ProducerState>,
    gen: u64,
    last_seq: u64,
    now: i64,
) -> Result<RunAppend, Refusal> {
    let Some(p) = producer else { return Ok(RunAppend::Publish(None)) };
    match producer::check(state, p, now) {
        Verdict::Accept(s) => Ok(RunAppend::Publish(Some((producer_key(run_id, &p.id), s)))),
        Verdict::Duplicate { last_seq: seq } => Ok(RunAppend::Duplicate(
            Reply::new(204)
                .header(wire::PRODUCER_EPOCH, p.epoch.to_string())
                .header(wire::PRODUCER_SEQ, seq.to_string())
                .header(wire::NEXT_OFFSET, offset(gen, last_seq)),
        )),
        Verdict::StaleEpoch { current } => Err(Box::new((
            ApiError::stale_producer_epoch(p.epoch, current),
            vec![(wire::PRODUCER_EPOCH, current.to_string())],
        ))),
        Verdict::EpochSeqNotZero => Err(Box::new((ApiError::producer_epoch_seq(), vec![]))),
        Verdict::Gap { expected, received } => Err(Box::new((
            ApiError::producer_seq_gap(expected, received),
            vec![
                (wire::PRODUCER_EXPECTED_SEQ, expected.to_string()),
                (wire::PRODUCER_RECEIVED_SEQ, received.to_string()),
            ],
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Kind;
    use crate::store::MemoryStore;

    #[test]
    fn generation_is_drawn_once_and_stored() {
        let mut s = MemoryStore::default();
        let g = generation(&mut s, || 41).unwrap();
        assert_eq!(g, 42);
        assert_eq!(generation(&mut s, || 7).unwrap(), 42);
        // Deleting the log (its meta) draws another.
        s.meta.clear();
        assert_eq!(generation(&mut s, || 7).unwrap(), 8);
    }

    #[test]
    fn offsets_resolve_within_their_generation_only() {
        assert_eq!(resolve(&[], 5, 10), Ok(None));
        assert_eq!(resolve(&["-1"], 5, 10), Ok(Some(0)));
        assert_eq!(resolve(&["now"], 5, 10), Ok(Some(10)));
        assert_eq!(resolve(&[&offset(5, 3)], 5, 10), Ok(Some(3)));
        assert_eq!(resolve(&[&offset(4, 3)], 5, 10).unwrap_err().code, "stale_offset");
        assert_eq!(resolve(&[&offset(5, 11)], 5, 10).unwrap_err().code, "invalid_offset");
        assert_eq!(resolve(&["x"], 5, 10).unwrap_err().code, "invalid_offset");
        // Strictly increasing, as strings too.
        assert!(offset(5, 9) < offset(5, 10));
    }

    #[test]
    fn frames_and_replies() {
        let rec = |seq: u64| Record { seq, run_id: "r".into(), kind: Kind::RunStart, data: format!("{{\"n\":{seq}}}") };
        let pos = Position { gen: 2, seq: 2, up_to_date: true, closed: false };
        let r = batch_reply(&[rec(1), rec(2)], pos, None);
        assert_eq!(r.body, b"[{\"n\":1},{\"n\":2}]");
        assert_eq!(r.get("stream-next-offset"), Some("0000000000000002_0000000000000002"));
        assert_eq!(r.get("cache-control"), Some("no-store"));
        assert_eq!(r.get("stream-closed"), None);
        let mut out = Vec::new();
        sse_batch(&[rec(1)], Position { closed: true, ..pos }, "9", &mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("event: data\ndata:[{\"n\":1}]\n\nevent: control\n"), "{text}");
        assert!(text.contains("\"streamClosed\":true"));
    }

    #[test]
    fn views_and_params() {
        assert_eq!(View::parse(None, false), Ok(View::Log));
        assert_eq!(View::parse(Some("history"), false), Ok(View::History));
        assert_eq!(View::parse(Some("updates"), false).unwrap_err().code, "offset_required");
        assert_eq!(View::parse(Some("updates"), true), Ok(View::Updates));
        assert_eq!(tail_param(Some("0")).unwrap_err().code, "invalid_tail");
        assert_eq!(tail_param(Some("3")), Ok(Some(3)));
    }

    #[test]
    fn producers_on_runs() {
        let p = Producer { id: "agent".into(), epoch: 0, seq: 0 };
        let Ok(RunAppend::Publish(Some((key, state)))) = check_producer("t.run_1", Some(&p), None, 1, 0, 5) else {
            panic!()
        };
        assert_eq!(key, "ds_producer:t.run_1:agent");
        match check_producer("t.run_1", Some(&p), Some(&state), 1, 4, 6) {
            Ok(RunAppend::Duplicate(r)) => assert_eq!((r.status, r.get("producer-seq")), (204, Some("0"))),
            other => panic!("{other:?}"),
        }
        let gap = Producer { seq: 5, ..p.clone() };
        assert_eq!(
            check_producer("t.run_1", Some(&gap), Some(&state), 1, 4, 6).unwrap_err().0.code,
            "producer_seq_gap"
        );
        assert_eq!(check_producer("t.run_1", None, None, 1, 0, 5), Ok(RunAppend::Publish(None)));
    }
}
