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
//! coalesced into. A catch-up read (and `view=history`) is answered here; a
//! live read (`live=sse`, `live=long-poll`) becomes a subscriber that
//! follows durable records after the offset, which the Worker relays in the
//! protocol's frames (`stream`), so the object holds no waiting request.

use crate::streams::offset::{Offset, Start};
use crate::streams::producer::{self, Producer, ProducerState, Verdict};
use crate::streams::wire::{self, Reply};
use crate::wire::error::ApiError;
use crate::input::{self, BatchShape};
use crate::settings::Settings;
use crate::log::event::Event;
use crate::storage::store::{Record, RunState, Store};
use crate::thread::{Answer, Follow, Sink, Thread};

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

/// The version Flue's clients require on each workflow-run event (`v`),
/// stamped on the events `/runs/:runId` reads.
pub const RUN_EVENT_VERSION: u32 = 3;

/// An event's JSON with `"v": version` first.
pub fn stamp(data: &str, version: u32) -> String {
    match data.strip_prefix('{') {
        Some("}") => format!("{{\"v\":{version}}}"),
        Some(rest) => format!("{{\"v\":{version},{rest}"),
        None => data.to_owned(),
    }
}

/// Flue's workflow readers fold a run's text from `text_delta {text}`
/// events and its thought from `thinking_delta {delta}`; the log keeps a
/// text segment as blocks that each hold the segment's whole text so far.
/// So a Flue run read (`GET /runs/:runId`, [`RUN_EVENT_VERSION`]) follows
/// each block with the Flue event of what it adds to the block before it.
///
/// Invariant (every character once): the transform is primed with the
/// run's records up to the reader's offset, catch-up and live alike, so a
/// page, a reconnect or a resumed read never sends text the reader had, nor
/// skips any.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct RunText {
    /// Characters already said per open segment: (agent, response, kind).
    #[serde(with = "crate::feed::pairs")]
    said: std::collections::HashMap<(String, String, String), usize>,
}

/// What [`RunText`] reads of every record: its kind and agent. Only a
/// block is read whole, so a large tool output is skimmed, never built.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(rename = "agentId", borrow, default)]
    agent: std::borrow::Cow<'a, str>,
}

impl RunText {
    /// The Flue event a stored record adds, unstamped, if any.
    pub fn delta(&mut self, data: &str) -> Option<String> {
        let head: Head = serde_json::from_str(data).ok()?;
        if head.kind == "tool-call" {
            // A tool call ends its agent's segments: text after it is new.
            self.said.retain(|(a, _, _), _| *a != head.agent);
            return None;
        }
        if !matches!(head.kind.as_ref(), "text-block" | "reasoning-block") {
            return None;
        }
        let e: Event = serde_json::from_str(data).ok()?;
        let (text, reasoning, _) = e.payload.text()?;
        let rid = e.response_id.clone().unwrap_or_default();
        let said = self.said.entry((head.agent.into_owned(), rid, head.kind.into_owned())).or_insert(0);
        let fresh: String = text.text.chars().skip(*said).collect();
        *said = (*said).max(text.text.chars().count());
        if fresh.is_empty() {
            return None;
        }
        let at = At { run_id: &e.run_id, agent_id: &e.agent_id, response_id: e.response_id.as_deref(), ts: e.ts };
        let delta = if reasoning { FlueDelta::ThinkingDelta { delta: fresh, at } } else { FlueDelta::TextDelta { text: fresh, at } };
        Some(serde_json::to_string(&delta).expect("a delta serialises"))
    }
}

/// A Flue text or thinking delta of a stored block's unseen text.
#[derive(serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum FlueDelta<'a> {
    TextDelta {
        text: String,
        #[serde(flatten)]
        at: At<'a>,
    },
    ThinkingDelta {
        delta: String,
        #[serde(flatten)]
        at: At<'a>,
    },
}

/// Where a delta was said: the stored event's own fields.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct At<'a> {
    run_id: &'a str,
    agent_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_id: Option<&'a str>,
    ts: i64,
}

/// A batch of records as a JSON array of their events.
pub fn json_body(records: &[Record]) -> Vec<u8> {
    wire::json_array(records.iter().map(|r| r.data.as_bytes()))
}

/// The stream position a batch leaves a reader at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

/// Records one read of the thread log carries at most.
const PAGE: usize = 1000;

/// Which log a read follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    Thread,
    Run(String),
}

/// The records after `after` and the position they leave the reader at.
fn batch<S: Store, K: Sink>(
    t: &Thread<S, K>,
    scope: &Scope,
    gen: u64,
    after: u64,
    tail: Option<usize>,
) -> Result<(Vec<Record>, Position), ApiError> {
    let last = t.conversation().last_seq();
    match scope {
        Scope::Thread => {
            let records = t.conversation().log_page(after, last, PAGE)?;
            let seq = records.last().map_or(after, |r| r.seq);
            Ok((records, Position { gen, seq, up_to_date: seq >= last, closed: false }))
        }
        Scope::Run(run) => {
            let record = t.conversation().known_run(run)?;
            // `tail=N` is a bounded diagnostic read of the run's suffix;
            // every other read pages through the run's index after `after`.
            let (records, up_to_date) = match tail {
                Some(n) => {
                    let mut all: Vec<Record> = t
                        .conversation().run_records(run)?
                        .into_iter()
                        .filter(|r| r.seq > after)
                        .collect();
                    (all.split_off(all.len().saturating_sub(n)), true)
                }
                None => {
                    let page = t.conversation().run_page(run, after, PAGE)?;
                    let full = page.len() == PAGE;
                    (page, !full)
                }
            };
            let seq = if up_to_date { last.max(after) } else { records.last().map_or(after, |r| r.seq) };
            // Closed once its `run-finish` is stored: the run record's state
            // changes in the same commit as that event.
            let closed = record.state != RunState::Running && up_to_date;
            Ok((records, Position { gen, seq, up_to_date, closed }))
        }
    }
}

/// `GET /v1/threads/:threadId` and `GET /v1/runs/:runId`: a catch-up
/// answer, the `view=history` snapshot, or a live read's subscription.
/// `random`: a fresh random number (a new log's generation).
pub fn read<S: Store, K: Sink>(
    t: &mut Thread<S, K>,
    run: Option<&str>,
    query: &[(String, String)],
    random: u64,
    settings: &Settings,
) -> Result<Answer, ApiError> {
    read_versioned(t, run, query, random, settings, None)
}

/// [`read`], each event stamped with `version` when one is given.
pub fn read_versioned<S: Store, K: Sink>(
    t: &mut Thread<S, K>,
    run: Option<&str>,
    query: &[(String, String)],
    random: u64,
    settings: &Settings,
    version: Option<u32>,
) -> Result<Answer, ApiError> {
    let q = |name: &str| input::query_first(query, name);
    let offsets = input::query_all(query, "offset");
    let scope = run.map_or(Scope::Thread, |r| Scope::Run(r.to_owned()));
    let tail = tail_param(q("tail").as_deref())?;
    match scope {
        Scope::Thread if tail.is_some() => return Err(ApiError::tail_not_supported()),
        Scope::Run(_) if q("view").is_some() => return Err(ApiError::invalid_view("a run's stream has no views")),
        _ => {}
    }
    let live = match q("live").as_deref() {
        None => false,
        Some("long-poll" | "sse") if !offsets.is_empty() => true,
        Some("long-poll" | "sse") => {
            return Err(ApiError::offset_required("a live read resumes after an offset: pass ?offset="))
        }
        Some(_) => return Err(ApiError::invalid_live("`live` is `long-poll` or `sse`")),
    };
    let offsets: Vec<&str> = offsets.iter().map(String::as_str).collect();
    let gen = t.journal_mut().generation(|| random)?;
    let last = t.conversation().last_seq();
    let after = resolve(&offsets, gen, last)?.unwrap_or(0);
    if let Scope::Run(run) = &scope {
        t.conversation().known_run(run)?;
    }
    if live {
        let follow = Follow { run: run.map(str::to_owned), durable: true, prospect: None, stays: false };
        // A Flue run read's framer primes its text from the run's start
        // (it skips to the reader's offset itself: `View::skip_to`), unless
        // the reader asked from `now`.
        let from = if version.is_some() && offsets != ["now"] { 0 } else { after };
        return Ok(t.follow(follow, from, settings)?);
    }
    let (mut records, pos) = batch(t, &scope, gen, after, tail)?;
    if let (Some(v), Scope::Run(run)) = (version, &scope) {
        let mut text = RunText::default();
        // Primed with the run's records before this page; a read from the
        // run's start has none to read.
        if let Some(first) = records.first().map(|r| r.seq).filter(|_| after > 0 || tail.is_some()) {
            for r in t.conversation().run_records(run)?.iter().take_while(|r| r.seq < first) {
                text.delta(&r.data);
            }
        }
        let mut out = Vec::with_capacity(records.len());
        for mut r in records {
            let extra = text.delta(&r.data);
            r.data = stamp(&r.data, v);
            out.push(r.clone());
            if let Some(e) = extra {
                out.push(Record { data: stamp(&e, v), ..r });
            }
        }
        records = out;
    }
    Ok(Answer::Reply(batch_reply(&records, pos, None)))
}

/// `POST /v1/runs/:runId`: an external agent appends events to its run
/// with its publish token, through the thread's one publish path. With
/// `Producer-Id`/`-Epoch`/`-Seq` a retried batch lands once: the
/// producer's state is stored in the same synchronous block as the
/// batch it admits, so both land or neither does.
pub fn append<S: Store, K: Sink>(
    t: &mut Thread<S, K>,
    run: &str,
    header: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
    random: u64,
    settings: &Settings,
    now: i64,
) -> Result<Reply, ApiError> {
    let producer = Producer::from_headers(
        header(wire::PRODUCER_ID).as_deref(),
        header(wire::PRODUCER_EPOCH).as_deref(),
        header(wire::PRODUCER_SEQ).as_deref(),
    )
    .map_err(ApiError::invalid_producer)?;
    t.runs().authorize(run, input::bearer(header("authorization").as_deref()), |id| t.conversation().run(id))?;
    let limits = &settings.limits;
    let batch = input::batch(input::json(body, limits.max_batch_bytes)?, BatchShape::Stream, limits.max_batch_events)?;
    let gen = t.journal_mut().generation(|| random)?;
    let state: Option<ProducerState> = match &producer {
        Some(p) => t.conversation().producer_state(&producer_key(run, &p.id))?,
        None => None,
    };
    match check_producer(run, producer.as_ref(), state.as_ref(), gen, t.conversation().last_seq(), now) {
        Err(refusal) => {
            let (e, headers) = *refusal;
            let mut reply = Reply::error(&e);
            for (k, v) in headers {
                reply.set(k, v);
            }
            Ok(reply)
        }
        Ok(RunAppend::Duplicate(reply)) => Ok(reply),
        Ok(RunAppend::Publish(admitted)) => {
            let producer_state =
                admitted.map(|(key, s)| (key, serde_json::to_string(&s).expect("a producer's state serialises")));
            let last = t.publish_as(run, batch, producer_state, now)?;
            let closed = t.conversation().run(run).ok().flatten().is_some_and(|r| r.state != RunState::Running);
            let mut reply =
                Reply::new(if producer.is_some() { 200 } else { 204 }).header(wire::NEXT_OFFSET, offset(gen, last));
            if let Some(p) = &producer {
                reply = reply
                    .header(wire::PRODUCER_EPOCH, p.epoch.to_string())
                    .header(wire::PRODUCER_SEQ, p.seq.to_string());
            }
            if closed {
                reply.set(wire::CLOSED, "true");
            }
            Ok(reply)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::event::Kind;

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
    fn tail_params() {
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
