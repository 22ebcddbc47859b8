//! Coalescing of text and reasoning deltas into durable blocks.
//!
//! Deltas go out live without an id and are never stored one by one; the text
//! of a segment (one `(runId, agentId, kind, responseId)`) is kept here and
//! written as one `text-block` / `reasoning-block` fact holding the segment's
//! whole text so far. Clients apply blocks with REPLACE semantics (a block
//! replaces the last timeline entry of the same kind and responseId when it
//! extends it), so a segment flushed twice, or a client that saw part of it
//! live, never renders text twice.
//!
//! Invariant (fold(replay) == fold(live)): one segment is exactly one
//! timeline entry of the reducer, so each block REPLACES the entry the
//! segment's deltas built. The thread keeps that true by ending a segment
//! whenever the agent's timeline gets a new entry (a delta of another kind or
//! `responseId`, a new tool call, a child), and its blocks are stored before
//! the fact that ended it. A segment is also flushed without ending
//! - before any structural fact of the same agent,
//! - after [`IDLE_FLUSH_MS`] without deltas.
//!
//! Every segment of a run ends on its `run-finish`, but a background
//! sub-agent's, which ends with the agent (`agent-completed`).
//!
//! Invariant (no row over SQLite's 2 MB): a block's stored size stays under
//! [`MAX_BLOCK_BYTES`]. A segment whose next delta would take its block past
//! that is cut: the block so far is stored as is, and the segment goes on
//! as a continuation with its own `responseId` (`<id>~1`, `<id>~2`, ...),
//! which the deltas after the cut carry live too. To every reader (live,
//! replayed, folded) the long answer is consecutive text entries holding
//! every character once.

use crate::log::event::payload::TextOut;
use crate::log::event::{Event, Kind, Payload};

/// A block's or a snapshot's payload.
fn text_payload(text: &str, parts: &[usize], snapshot: bool) -> TextOut {
    TextOut { text: text.to_owned(), parts: Some(parts.to_vec()), snapshot: snapshot.then_some(true) }
}

/// Trailing deltas are persisted after this much quiet.
pub const IDLE_FLUSH_MS: i64 = 3_000;

/// The most a block's text and parts take as JSON, well under SQLite's 2 MB
/// row (a block row also holds its envelope).
pub const MAX_BLOCK_BYTES: usize = 512 * 1024;

/// How many bytes `s` takes inside a JSON string (escapes counted).
fn json_len(s: &str) -> usize {
    s.chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextKind {
    Text,
    Reasoning,
}

impl TextKind {
    fn of(kind: Kind) -> Option<TextKind> {
        match kind {
            Kind::TextDelta => Some(TextKind::Text),
            Kind::ReasoningDelta => Some(TextKind::Reasoning),
            _ => None,
        }
    }

    fn block(self, text: TextOut) -> Payload {
        match self {
            TextKind::Text => Payload::TextBlock(text),
            TextKind::Reasoning => Payload::ReasoningBlock(text),
        }
    }

    fn delta(self, text: TextOut) -> Payload {
        match self {
            TextKind::Text => Payload::TextDelta(text),
            TextKind::Reasoning => Payload::ReasoningDelta(text),
        }
    }
}

#[derive(Debug)]
struct Segment {
    run_id: String,
    agent_id: String,
    kind: TextKind,
    /// The `responseId` the deltas are published with.
    published_id: Option<String>,
    /// The `responseId` the segment's blocks and live deltas carry: the
    /// published one, or a continuation's (`<id>~n`) after a cut.
    response_id: Option<String>,
    /// Continuations so far (0 until the first cut).
    cuts: u32,
    /// What the block would take as JSON: the text escaped, and the parts.
    encoded: usize,
    text: String,
    /// Byte length of each delta, in order: a block carries them as `parts`,
    /// so per-delta frames (the run streams) can be rebuilt from the log.
    parts: Vec<usize>,
    /// Bytes of `text` already stored in a block.
    stored_len: usize,
    last_delta_ts: i64,
    /// The server gave this segment its `responseId`.
    auto: bool,
}

impl Segment {
    fn dirty(&self) -> bool {
        self.text.len() > self.stored_len
    }

    fn to_event(&self, payload: Payload) -> Event {
        Event {
            run_id: self.run_id.clone(),
            agent_id: self.agent_id.clone(),
            response_id: self.response_id.clone(),
            ts: self.last_delta_ts,
            payload,
        }
    }

    /// The block for this segment's text, marking it stored.
    fn take_block(&mut self) -> Option<Event> {
        if !self.dirty() {
            return None;
        }
        self.stored_len = self.text.len();
        Some(self.to_event(self.kind.block(text_payload(&self.text, &self.parts, false))))
    }
}

/// Open segments of one thread. A thread has few agents writing at once, so a
/// small vector beats a map.
#[derive(Debug, Default)]
pub struct Coalescer {
    open: Vec<Segment>,
}

impl Coalescer {
    /// Takes a text or reasoning delta. Returns the blocks that must be stored
    /// *before* the delta is sent (segments it closes). Other kinds are ignored.
    ///
    /// A delta without a `responseId` gets one: the open id-less segment's of
    /// that agent and kind, or `fresh()` for a new segment. Blocks REPLACE by
    /// responseId, so without one a live client would render a segment twice.
    pub fn push_delta(&mut self, ev: &mut Event, fresh: impl FnOnce() -> String) -> Vec<Event> {
        let Some(kind) = TextKind::of(ev.kind()) else {
            return Vec::new();
        };
        let mut auto = false;
        if ev.response_id.is_none() {
            let open = self
                .open
                .iter()
                .find(|s| s.auto && s.kind == kind && s.run_id == ev.run_id && s.agent_id == ev.agent_id);
            ev.response_id = Some(match open {
                Some(s) => s.published_id.clone().expect("auto segments have an id"),
                None => {
                    auto = true;
                    fresh()
                }
            });
        }
        let text = ev.payload.text().map(|(t, _, _)| t.text.clone()).unwrap_or_default();
        let same_segment = |s: &Segment| s.kind == kind && s.published_id == ev.response_id;
        // Another open segment of this agent ends where this delta begins.
        let closed = self.close_where(|s| s.run_id == ev.run_id && s.agent_id == ev.agent_id && !same_segment(s));
        let found =
            self.open.iter().position(|s| s.run_id == ev.run_id && s.agent_id == ev.agent_id && same_segment(s));
        let idx = found.unwrap_or_else(|| {
            self.open.push(Segment {
                run_id: ev.run_id.clone(),
                agent_id: ev.agent_id.clone(),
                kind,
                published_id: ev.response_id.clone(),
                response_id: ev.response_id.clone(),
                cuts: 0,
                encoded: 0,
                text: String::new(),
                parts: Vec::new(),
                stored_len: 0,
                last_delta_ts: ev.ts,
                auto,
            });
            self.open.len() - 1
        });
        let mut closed = closed;
        let seg = &mut self.open[idx];
        let cost = json_len(&text) + 8;
        if !seg.text.is_empty() && seg.encoded + cost > MAX_BLOCK_BYTES {
            // Cut: store what the segment holds, go on as a continuation.
            closed.extend(seg.take_block());
            seg.cuts += 1;
            let base = seg.published_id.clone().unwrap_or_default();
            seg.response_id = Some(format!("{base}~{}", seg.cuts));
            seg.text.clear();
            seg.parts.clear();
            seg.stored_len = 0;
            seg.encoded = 0;
        }
        ev.response_id = seg.response_id.clone();
        seg.text.push_str(&text);
        seg.parts.push(text.len());
        seg.encoded += cost;
        seg.last_delta_ts = ev.ts;
        closed
    }

    /// Closes every segment of `agent_id` in `run_id`, oldest first.
    pub fn close_agent(&mut self, run_id: &str, agent_id: &str) -> Vec<Event> {
        self.close_where(|s| s.run_id == run_id && s.agent_id == agent_id)
    }

    /// Stores the unstored text of `agent_id`'s segments, keeping them open:
    /// the agent's timeline goes on with the same entry, so later deltas
    /// extend the same block.
    pub fn flush_agent(&mut self, run_id: &str, agent_id: &str) -> Vec<Event> {
        self.open
            .iter_mut()
            .filter(|s| s.run_id == run_id && s.agent_id == agent_id)
            .filter_map(Segment::take_block)
            .collect()
    }

    /// Agents of `run_id` with an open segment.
    pub fn open_agents(&self, run_id: &str) -> Vec<String> {
        let mut agents: Vec<String> =
            self.open.iter().filter(|s| s.run_id == run_id).map(|s| s.agent_id.clone()).collect();
        agents.dedup();
        agents
    }

    /// Closes every segment of `run_id` (on `run-finish`) but those of
    /// `going_on`, agents that outlive the run (background sub-agents): a
    /// segment is one block, so theirs stay open until they end.
    pub fn close_run(&mut self, run_id: &str, going_on: &[&str]) -> Vec<Event> {
        self.close_where(|s| s.run_id == run_id && !going_on.contains(&s.agent_id.as_str()))
    }

    fn close_where(&mut self, pred: impl Fn(&Segment) -> bool) -> Vec<Event> {
        let mut out = Vec::new();
        let mut keep = Vec::with_capacity(self.open.len());
        for mut s in self.open.drain(..) {
            if pred(&s) {
                out.extend(s.take_block());
            } else {
                keep.push(s);
            }
        }
        self.open = keep;
        out
    }

    /// Stores segments that have been quiet for [`IDLE_FLUSH_MS`]; they stay
    /// open so later deltas extend the same block.
    pub fn flush_idle(&mut self, now: i64) -> Vec<Event> {
        self.open
            .iter_mut()
            .filter(|s| s.dirty() && now - s.last_delta_ts >= IDLE_FLUSH_MS)
            .filter_map(Segment::take_block)
            .collect()
    }

    /// When the next idle flush is due, if any segment is dirty.
    pub fn next_idle_deadline(&self) -> Option<i64> {
        self.open.iter().filter(|s| s.dirty()).map(|s| s.last_delta_ts + IDLE_FLUSH_MS).min()
    }

    /// For a joining subscriber: one id-less delta per open segment with text
    /// not yet stored, holding the segment's whole text so far and
    /// `snapshot: true` (apply with REPLACE semantics, as a block).
    pub fn snapshots(&self) -> Vec<Event> {
        self.open
            .iter()
            .filter(|s| s.dirty())
            .map(|s| s.to_event(s.kind.delta(text_payload(&s.text, &s.parts, true))))
            .collect()
    }

    /// Bytes of text held in memory.
    pub fn buffered_bytes(&self) -> usize {
        self.open.iter().map(|s| s.text.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn push(c: &mut Coalescer, mut ev: Event) -> Vec<Event> {
        c.push_delta(&mut ev, || "auto-1".into())
    }

    fn delta(kind: Kind, agent: &str, rid: Option<&str>, text: &str, ts: i64) -> Event {
        let mut e = Event::from_json(kind, "r1", agent, ts, json!({ "text": text })).unwrap();
        e.response_id = rid.map(str::to_owned);
        e
    }

    #[test]
    fn deltas_become_one_block_on_close() {
        let mut c = Coalescer::default();
        for (i, t) in ["Hel", "lo", " world"].iter().enumerate() {
            assert!(push(&mut c, delta(Kind::TextDelta, "a", Some("s1"), t, i as i64)).is_empty());
        }
        let blocks = c.close_agent("r1", "a");
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].kind(), Kind::TextBlock);
        assert_eq!(blocks[0].payload_json()["text"], "Hello world");
        assert_eq!(blocks[0].response_id.as_deref(), Some("s1"));
        assert_eq!(c.buffered_bytes(), 0, "nothing is held once the segment is stored");
    }

    #[test]
    fn new_response_id_or_kind_closes_the_old_segment() {
        let mut c = Coalescer::default();
        push(&mut c, delta(Kind::ReasoningDelta, "a", Some("s1"), "think", 0));
        let closed = push(&mut c, delta(Kind::TextDelta, "a", Some("s1"), "say", 1));
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].kind(), Kind::ReasoningBlock);
        let closed = push(&mut c, delta(Kind::TextDelta, "a", Some("s2"), "more", 2));
        assert_eq!(closed[0].payload_json()["text"], "say");
        // Another agent's segment is untouched.
        push(&mut c, delta(Kind::TextDelta, "b", Some("s9"), "x", 3));
        assert_eq!(c.close_run("r1", &[]).len(), 2);
    }

    #[test]
    fn idle_flush_keeps_segment_open_and_later_block_holds_all_text() {
        let mut c = Coalescer::default();
        push(&mut c, delta(Kind::TextDelta, "a", Some("s1"), "Hello", 0));
        assert!(c.flush_idle(IDLE_FLUSH_MS - 1).is_empty());
        assert_eq!(c.next_idle_deadline(), Some(IDLE_FLUSH_MS));
        let b = c.flush_idle(IDLE_FLUSH_MS);
        assert_eq!(b[0].payload_json()["text"], "Hello");
        assert_eq!(c.next_idle_deadline(), None);
        assert!(c.snapshots().is_empty(), "nothing unstored to hand over");
        assert!(c.close_agent("r1", "a").is_empty(), "no second identical block");
        push(&mut c, delta(Kind::TextDelta, "a", Some("s1"), "Hello", 10_000));
        c.flush_idle(20_000);
        push(&mut c, delta(Kind::TextDelta, "a", Some("s1"), " world", 20_001));
        let snap = c.snapshots();
        assert_eq!(snap[0].kind(), Kind::TextDelta);
        assert_eq!(snap[0].payload_json(), json!({"text":"Hello world","snapshot":true,"parts":[5,6]}));
        assert_eq!(c.close_agent("r1", "a")[0].payload_json()["text"], "Hello world");
    }

    #[test]
    fn deltas_without_response_id_get_one_per_segment() {
        let mut c = Coalescer::default();
        let mut n = 0;
        let mut fresh = || {
            n += 1;
            format!("auto-{n}")
        };
        let mut a = delta(Kind::TextDelta, "a", None, "x", 0);
        c.push_delta(&mut a, &mut fresh);
        let mut b = delta(Kind::TextDelta, "a", None, "y", 1);
        c.push_delta(&mut b, &mut fresh);
        assert_eq!(a.response_id.as_deref(), Some("auto-1"));
        assert_eq!(b.response_id.as_deref(), Some("auto-1"), "same open segment");
        let blocks = c.close_agent("r1", "a");
        assert_eq!(blocks[0].payload_json()["text"], "xy");
        let mut d = delta(Kind::TextDelta, "a", None, "z", 2);
        c.push_delta(&mut d, &mut fresh);
        assert_eq!(d.response_id.as_deref(), Some("auto-2"), "a new segment after close");
    }

    #[test]
    fn a_long_segment_is_cut_into_continuations_under_the_row_limit() {
        let mut c = Coalescer::default();
        let piece = "\u{1}".repeat(20_000); // 120 KB as JSON
        let mut stored = Vec::new();
        let mut live_ids = Vec::new();
        for i in 0..30 {
            let mut ev = delta(Kind::TextDelta, "o", Some("r"), &piece, i);
            stored.extend(c.push_delta(&mut ev, || unreachable!()));
            live_ids.push(ev.response_id.clone().unwrap());
        }
        stored.extend(c.close_run("r1", &[]));
        assert!(stored.len() > 1, "cut at least once");
        for b in &stored {
            assert!(b.to_json().len() < MAX_BLOCK_BYTES + 1_000, "{} bytes", b.to_json().len());
        }
        let text: String = stored.iter().map(|b| b.payload.text().unwrap().0.text.clone()).collect();
        assert_eq!(text, piece.repeat(30), "every character once");
        // Live deltas carry the id of the block that stores them.
        let ids: Vec<_> = stored.iter().map(|b| b.response_id.clone().unwrap()).collect();
        assert_eq!(ids[0], "r");
        assert_eq!(ids[1], "r~1");
        let mut seen = live_ids.clone();
        seen.dedup();
        assert_eq!(seen, ids);
    }
}
