//! A standalone stream's live reads (`live=sse`, `live=long-poll`) across
//! the hop between its object and the stateless Worker that holds the
//! client's connection, so the object holds no waiting request and sleeps
//! between appends.
//!
//! The object accepts a hibernatable socket per live reader and sends it
//! [`Batch`]es as JSON: the first (`page`) in the same synchronous block as
//! it registers the socket, with the messages after the reader's offset;
//! then one per append (the messages after the tail before it), and one
//! saying the stream is gone when it is deleted or expires. The Worker runs
//! a [`SseFeed`] or [`PollFeed`] over them, and asks for a further page
//! (`page <offset>`) when a batch starts past where its reader stands.
//!
//! Invariant (nothing missed, nothing doubled): a feed takes only messages
//! above its position, from a batch that starts at or below it; a batch
//! that starts above it is a gap the feed fills by asking for a page, so
//! every message reaches the reader once, in order.

use super::log::Message;
use crate::streams::offset::Offset;
use crate::streams::wire::{self, Reply};
use super::{data_reply, nothing_new, sse_turn, Batch, ReadRequest, SseState, Tail};
use crate::feed::{Feed, Plan, RelayStep};
use base64::Engine as _;

/// The Worker's request for the messages after `after`.
pub fn page_request(after: Offset) -> String {
    format!("page {after}")
}

/// Reads a page request (`None`: not one).
pub fn parse_page_request(text: &str) -> Option<Offset> {
    Offset::parse(text.strip_prefix("page ")?)
}

impl Batch {
    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("a batch serialises")
    }

    pub fn decode(text: &str) -> Option<Batch> {
        serde_json::from_str(text).ok()
    }

    /// Its messages above `after`, decoded.
    fn after(&self, after: Offset) -> Vec<Message> {
        self.messages
            .iter()
            .filter(|(o, _)| *o > after)
            .filter_map(|(offset, data)| {
                let data = base64::engine::general_purpose::STANDARD.decode(data).ok()?;
                Some(Message { offset: *offset, data })
            })
            .collect()
    }
}

/// The plan of a live read of `/v1/stream/*`, or `None` for any other
/// request (the object answers it directly). `long_poll_ms` is both a
/// long-poll's wait and an SSE connection's keep-alive interval.
pub fn plan(
    method: &str,
    path: &str,
    query: &[(String, String)],
    if_none_match: Option<&str>,
    long_poll_ms: u64,
) -> Option<Plan> {
    if method != "GET" {
        return None;
    }
    let q = |name: &str| crate::input::query_first(query, name);
    let req = ReadRequest {
        path: path.to_owned(),
        offsets: crate::input::query_all(query, "offset"),
        live: q("live"),
        cursor: q("cursor"),
        if_none_match: if_none_match.map(str::to_owned),
    };
    let (feed, headers, one_shot): (Box<dyn Feed>, _, _) = match req.live.as_deref() {
        Some("sse") => {
            let headers = crate::wire::sse::headers();
            (Box::new(SseFeed::new(req.cursor.clone())), headers, false)
        }
        Some("long-poll") => (Box::new(PollFeed::new(req)), Vec::new(), true),
        _ => return None,
    };
    Some(Plan { feed, headers, one_shot, until: None, tick_ms: Some(long_poll_ms), pass: &[wire::SSE_ENCODING] })
}

/// `live=sse`: turns of [`sse_turn`] as batches arrive, a lone control
/// event at each keep-alive tick; ends when the stream closes at the
/// reader's position, goes away, or after [`wire::SSE_RECYCLE_MS`].
pub struct SseFeed {
    st: SseState,
    /// The highest tail and the closed flag the object has reported.
    tail: Offset,
    closed: bool,
    /// The first batch came (it sets the position and the encoding).
    started: bool,
    /// A page was asked for and has not come.
    asked: bool,
    done: bool,
    /// When the stream opened (`None` until the first batch).
    opened: Option<i64>,
}

impl SseFeed {
    pub fn new(cursor: Option<String>) -> SseFeed {
        SseFeed {
            st: SseState { after: Offset::ZERO, base64: false, json: false, cursor },
            tail: Offset::ZERO,
            closed: false,
            started: false,
            asked: false,
            done: false,
            opened: None,
        }
    }

    fn cursor(&self, now: i64, random: u64) -> String {
        wire::response_cursor(self.st.cursor.as_deref(), now, wire::cursor_jitter(random))
    }

    fn turn(&mut self, messages: &[Message], now: i64, random: u64, out: &mut Vec<u8>) {
        let cursor = self.cursor(now, random);
        let turn = sse_turn(&mut self.st, messages, self.tail, self.closed, &cursor);
        out.extend_from_slice(&turn.bytes);
        self.done |= turn.done;
    }

    fn recycled(&self, now: i64) -> bool {
        self.opened.is_some_and(|t| now - t > wire::SSE_RECYCLE_MS)
    }
}

impl Feed for SseFeed {
    fn on_message(&mut self, text: &str, now: i64, random: u64) -> RelayStep {
        let mut step = RelayStep::default();
        let Some(b) = Batch::decode(text) else { return step };
        if b.gone.is_some() {
            step.done = true;
            return step;
        }
        if !self.started {
            // The first batch starts at the reader's position.
            self.started = true;
            self.opened = Some(now);
            self.st.after = b.prev;
            self.st.base64 = !wire::is_text(&b.content_type);
            self.st.json = wire::is_json(&b.content_type);
        }
        if b.page {
            self.asked = false;
        }
        let newly_closed = b.closed && !self.closed;
        self.tail = self.tail.max(b.tail);
        self.closed |= b.closed;
        if b.prev <= self.st.after {
            let messages = b.after(self.st.after);
            // A page always answers (even empty: the reader learns where it
            // stands); an append already seen answers nothing, unless it
            // closed the stream.
            if b.page || !messages.is_empty() || newly_closed {
                self.turn(&messages, now, random, &mut step.out);
            }
        }
        if !self.done && self.st.after < self.tail && !self.asked {
            self.asked = true;
            step.page = Some(page_request(self.st.after));
        }
        step.done = self.done || self.recycled(now);
        step
    }

    fn on_tick(&mut self, now: i64, random: u64) -> RelayStep {
        let mut step = RelayStep::default();
        if self.started && !self.done && !self.asked && !self.recycled(now) {
            self.turn(&[], now, random, &mut step.out);
        }
        step.done = self.done || self.recycled(now);
        step
    }

    fn reply(&mut self) -> Option<Reply> {
        None
    }

    fn timeout(&self, _now: i64, _random: u64) -> Option<Reply> {
        None
    }
}

/// `live=long-poll` whose reader was at the tail: the first append's data,
/// 204 with the closed flag when the stream closes with nothing new, the
/// stream's end when it goes away, or 204 when the wait runs out.
pub struct PollFeed {
    req: ReadRequest,
    /// The reader's position (the tail when it began waiting).
    after: Option<Offset>,
    reply: Option<Reply>,
}

impl PollFeed {
    pub fn new(req: ReadRequest) -> PollFeed {
        PollFeed { req, after: None, reply: None }
    }
}

impl Feed for PollFeed {
    fn on_message(&mut self, text: &str, now: i64, random: u64) -> RelayStep {
        let mut step = RelayStep::default();
        let Some(b) = Batch::decode(text) else { return step };
        let after = *self.after.get_or_insert(b.prev);
        if self.reply.is_some() {
            return step;
        }
        if let Some(status) = b.gone {
            let text = match status {
                410 => "Stream is gone",
                404 => "Stream not found",
                _ => "the stream's storage failed",
            };
            self.reply = Some(Reply::text(status, text));
            return step;
        }
        if b.prev > after {
            step.page = Some(page_request(after));
            return step;
        }
        let messages = b.after(after);
        let tail =
            Tail { path: self.req.path.clone(), content_type: b.content_type.clone(), tail: b.tail, closed: b.closed };
        if !messages.is_empty() {
            self.reply = Some(data_reply(&tail, &self.req, &messages, now));
        } else if b.closed {
            self.reply = Some(nothing_new(&self.req, after, true, now, wire::cursor_jitter(random)));
        }
        step
    }

    fn on_tick(&mut self, _now: i64, _random: u64) -> RelayStep {
        RelayStep::default()
    }

    fn reply(&mut self) -> Option<Reply> {
        self.reply.take()
    }

    fn timeout(&self, now: i64, random: u64) -> Option<Reply> {
        let after = self.after.unwrap_or_default();
        Some(nothing_new(&self.req, after, false, now, wire::cursor_jitter(random)))
    }
}
