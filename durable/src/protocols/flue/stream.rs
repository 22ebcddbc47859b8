//! `view=updates` read live (`live=sse`, `live=long-poll`): the thread's
//! log replayed from its start through the [`Projector`], whose chunks up
//! to the reader's offset are dropped (Flue's server rebuilds the prefix
//! the same way), then its records and its live text as they come.
//!
//! Offsets: after a durable record, `<generation>_<seq>`; once live text
//! of an open answer went out, `<generation>_<seq>.<chars>`, the characters
//! of that answer's open text segment the reader now has ([`Resume`]). A
//! reader that drops and resumes from it gets only the text after them,
//! however the segment was flushed meanwhile. Such an offset still sorts
//! between its record's and the next one's.

use super::projection::{self, Chunk, Position, Projector, Resume, LIVE_INDEX};
use crate::feed::Framer;
use crate::protocols::durable_streams::stream::{CONTROL_EVERY_MS, HEARTBEAT};
use crate::protocols::durable_streams::views::offset;
use crate::wire::reply::Reply;
use crate::streams::wire;

/// An offset with the live characters a reader holds, if any.
pub fn live_offset(gen: u64, seq: u64, chars: usize) -> String {
    match chars {
        0 => offset(gen, seq),
        n => format!("{}.{n}", offset(gen, seq)),
    }
}

/// Splits `<offset>.<chars>` into the Durable Streams offset and the
/// characters (0 without the suffix). `None`: a malformed suffix.
pub fn split_offset(raw: &str) -> Option<(&str, usize)> {
    match raw.split_once('.') {
        None => Some((raw, 0)),
        Some((base, chars)) if !chars.is_empty() && chars.len() <= 12 && chars.bytes().all(|b| b.is_ascii_digit()) => {
            Some((base, chars.parse().ok()?))
        }
        Some(_) => None,
    }
}

/// What differs between the live modes.
#[derive(Debug)]
enum Mode {
    Sse {
        opened: i64,
        /// The offset last reported (`None` before the first answer).
        reported: Option<String>,
        controlled: i64,
    },
    LongPoll {
        reply: Option<Reply>,
    },
}

/// A live SSE reader's state as it travels (between two messages): the
/// conversation, the projector's ([`projection::Saved`]), the reader's
/// resume point (seq, characters), armed, generation, seq, high (read only
/// before the reader caught up, so never after a move; kept so the state is
/// whole), live, the client's cursor, and the SSE mode's opened, last
/// reported offset and last control. Typed tuples, as the projector's.
type Saved = (
    String,
    projection::Saved,
    (u64, usize),
    bool,
    u64,
    u64,
    u64,
    bool,
    Option<String>,
    (i64, Option<String>, i64),
);

/// A live `view=updates` reader. Read live over SSE it moves between the
/// object and a relay ([`Framer::save`]); a long-poll answers once.
pub struct Updates {
    conversation: String,
    projector: Projector,
    resume: Resume,
    /// The reader's characters are handed to the projector once the
    /// replay passes its offset.
    armed: bool,
    gen: u64,
    seq: u64,
    high: u64,
    live: bool,
    client_cursor: Option<String>,
    chunks: Vec<(Position, Chunk)>,
    mode: Mode,
}

impl Updates {
    fn new(conversation: String, resume: Resume, client_cursor: Option<String>, mode: Mode) -> Updates {
        Updates {
            conversation,
            projector: Projector::new(),
            resume,
            armed: false,
            gen: 0,
            seq: 0,
            high: 0,
            live: false,
            client_cursor,
            chunks: Vec::new(),
            mode,
        }
    }

    pub fn sse(conversation: String, resume: Resume, client_cursor: Option<String>, now: i64) -> Updates {
        Updates::new(conversation, resume, client_cursor, Mode::Sse { opened: now, reported: None, controlled: now })
    }

    pub fn long_poll(conversation: String, resume: Resume, client_cursor: Option<String>) -> Updates {
        Updates::new(conversation, resume, client_cursor, Mode::LongPoll { reply: None })
    }

    fn arm(&mut self) {
        if !self.armed {
            self.armed = true;
            self.projector.resume_inside(self.resume.chars);
        }
    }

    /// Where the reader stands after what was gathered: with the
    /// characters it has of an open answer's text, once live.
    fn offset(&self) -> String {
        let chars = if self.live { self.projector.live_chars() } else { 0 };
        live_offset(self.gen, self.seq.max(self.resume.seq), chars)
    }

    fn up_to_date(&self) -> bool {
        self.live || self.seq >= self.high
    }

    /// Past the reader's offset: what is gathered now is news to it.
    fn past_offset(&self) -> bool {
        self.seq > self.resume.seq || self.live
    }

    fn cursor(&self, now: i64, random: u64) -> String {
        wire::response_cursor(self.client_cursor.as_deref(), now, wire::cursor_jitter(random))
    }

    fn live_item(&mut self, data: &str) {
        self.arm();
        for chunk in self.projector.item(data) {
            let index = LIVE_INDEX + self.projector.live_chars() as u64;
            self.chunks.push((Position { batch: self.seq.max(self.resume.seq), index }, chunk));
        }
    }
}

impl Framer for Updates {
    const MOVES: bool = true;

    fn begin(&mut self, gen: u64, _after: u64, high: u64, _out: &mut Vec<u8>) {
        self.gen = gen;
        self.high = high;
    }

    fn durable(&mut self, seq: u64, data: &str, _out: &mut Vec<u8>) {
        if seq > self.resume.seq {
            self.arm();
        }
        let chunks = self.projector.item(data);
        self.seq = self.seq.max(seq);
        if seq <= self.resume.seq {
            return;
        }
        for (i, chunk) in chunks.into_iter().enumerate() {
            self.chunks.push((Position { batch: seq, index: i as u64 }, chunk));
        }
    }

    fn live(&mut self, data: &str, _out: &mut Vec<u8>) {
        if self.live {
            self.live_item(data);
        }
    }

    /// An open segment's text so far: the projector sends what the reader
    /// lacks of it.
    fn snapshot(&mut self, data: &str, _out: &mut Vec<u8>) {
        self.live_item(data);
    }

    fn caught_up(&mut self, _out: &mut Vec<u8>) {
        self.live = true;
        self.seq = self.seq.max(self.high);
    }

    fn end_of_message(&mut self, now: i64, random: u64, out: &mut Vec<u8>) {
        let at = self.offset();
        let up_to_date = self.up_to_date();
        let past = self.past_offset();
        let cursor = self.cursor(now, random);
        let has_chunks = !self.chunks.is_empty();
        match &mut self.mode {
            Mode::Sse { reported, controlled, .. } => {
                // Nothing before the reader's offset is news; the first
                // answer after it always goes out, even empty.
                if !past || (!has_chunks && reported.as_deref() == Some(at.as_str())) {
                    return;
                }
                *reported = Some(at.clone());
                *controlled = now;
                if has_chunks {
                    let body = projection::json_array(&self.conversation, &std::mem::take(&mut self.chunks));
                    wire::sse_event("data", &String::from_utf8_lossy(&body), out);
                }
                wire::sse_control(&at, Some(&cursor), up_to_date, false, out);
            }
            Mode::LongPoll { reply } => {
                if reply.is_some() || !past || (!has_chunks && up_to_date) {
                    return;
                }
                let body = projection::json_array(&self.conversation, &std::mem::take(&mut self.chunks));
                *reply = Some(batch_reply(body, &at, up_to_date, Some(cursor)));
            }
        }
    }

    fn keepalive(&mut self, now: i64, random: u64, out: &mut Vec<u8>) {
        let at = self.offset();
        let cursor = self.cursor(now, random);
        if let Mode::Sse { controlled, .. } = &mut self.mode {
            out.extend_from_slice(HEARTBEAT);
            if now - *controlled >= CONTROL_EVERY_MS {
                *controlled = now;
                wire::sse_control(&at, Some(&cursor), true, false, out);
            }
        }
    }

    fn done(&self, now: i64) -> bool {
        matches!(self.mode, Mode::Sse { opened, .. } if now - opened > wire::SSE_RECYCLE_MS)
    }

    fn reply(&mut self) -> Option<Reply> {
        match &mut self.mode {
            Mode::LongPoll { reply } => reply.take(),
            Mode::Sse { .. } => None,
        }
    }

    /// A wait that ran out: 204 at the reader's position.
    fn timeout(&self, now: i64, random: u64) -> Option<Reply> {
        Some(
            Reply::new(204)
                .header("cache-control", "no-store")
                .header(wire::NEXT_OFFSET, self.offset())
                .header(wire::UP_TO_DATE, "true")
                .header(wire::CURSOR, self.cursor(now, random)),
        )
    }

    /// An SSE reader's whole state, between two messages (nothing gathered
    /// and not yet sent); a long-poll does not move.
    fn save(&self) -> Option<String> {
        let Mode::Sse { opened, reported, controlled } = &self.mode else { return None };
        if !self.chunks.is_empty() {
            return None;
        }
        let saved: Saved = (
            self.conversation.clone(),
            self.projector.saved(),
            (self.resume.seq, self.resume.chars),
            self.armed,
            self.gen,
            self.seq,
            self.high,
            self.live,
            self.client_cursor.clone(),
            (*opened, reported.clone(), *controlled),
        );
        Some(crate::feed::save_tagged("flue-updates", &saved))
    }

    /// Takes over a state of an SSE reader of the same conversation, else
    /// nothing changes.
    fn restore(&mut self, state: &str) -> bool {
        let Some(saved) = crate::feed::restore_tagged::<Saved>("flue-updates", state) else { return false };
        let (conversation, projector, (resume_seq, resume_chars), armed, gen, seq, high, live, client_cursor, sse) =
            saved;
        if conversation != self.conversation || !matches!(self.mode, Mode::Sse { .. }) {
            return false;
        }
        let (opened, reported, controlled) = sse;
        *self = Updates {
            conversation,
            projector: Projector::from_saved(projector),
            resume: Resume { seq: resume_seq, chars: resume_chars },
            armed,
            gen,
            seq,
            high,
            live,
            client_cursor,
            chunks: Vec::new(),
            mode: Mode::Sse { opened, reported, controlled },
        };
        true
    }
}

/// A JSON batch of chunks: catch-up reads and long-polls.
pub fn batch_reply(body: Vec<u8>, next: &str, up_to_date: bool, cursor: Option<String>) -> Reply {
    let mut r = Reply::new(200)
        .header("content-type", "application/json; charset=utf-8")
        .header("cache-control", "no-store")
        .header(wire::NEXT_OFFSET, next)
        .body(body);
    if up_to_date {
        r.set(wire::UP_TO_DATE, "true");
    }
    if let Some(c) = cursor {
        r.set(wire::CURSOR, c);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn ev(seq: u64, kind: &str, payload: Value) -> (u64, String) {
        let e = json!({ "type": kind, "runId": "t.run_1", "agentId": "root", "responseId": "r1", "ts": 0, "payload": payload });
        (seq, e.to_string())
    }

    fn frames(out: &[u8]) -> Vec<(String, Value)> {
        String::from_utf8_lossy(out)
            .split("\n\n")
            .filter(|f| f.starts_with("event:"))
            .map(|f| {
                let event = f.lines().next().unwrap().trim_start_matches("event: ").to_owned();
                let data: String = f.lines().filter_map(|l| l.strip_prefix("data:")).collect();
                (event, serde_json::from_str(&data).unwrap())
            })
            .collect()
    }

    #[test]
    fn offsets_with_live_characters_sort_between_records() {
        assert_eq!(split_offset("0000000000000001_0000000000000004.12"), Some(("0000000000000001_0000000000000004", 12)));
        assert_eq!(split_offset("0000000000000001_0000000000000004"), Some(("0000000000000001_0000000000000004", 0)));
        assert_eq!(split_offset("x.y"), None);
        assert_eq!(split_offset("x."), None);
        let (a, b, c) = (live_offset(1, 4, 0), live_offset(1, 4, 12), live_offset(1, 5, 0));
        assert!(a < b && b < c);
    }

    #[test]
    fn replay_to_the_offset_is_silent_then_live_text_streams_and_resumes_exactly() {
        let log = [
            ev(1, "run-start", json!({ "messageId": "m1", "message": "hi" })),
            ev(2, "text-block", json!({ "text": "Hel" })),
        ];
        let mut v = Updates::sse("t".into(), Resume { seq: 2, chars: 0 }, None, 0);
        let mut out = Vec::new();
        v.begin(7, 0, 2, &mut out);
        for (seq, data) in &log {
            v.durable(*seq, data, &mut out);
        }
        v.end_of_message(0, 1, &mut out);
        assert!(out.is_empty(), "nothing up to the offset is news: {}", String::from_utf8_lossy(&out));
        v.caught_up(&mut out);
        v.end_of_message(0, 1, &mut out);
        let delta = ev(0, "text-delta", json!({ "text": "lo" })).1;
        v.live(&delta, &mut out);
        v.end_of_message(0, 1, &mut out);
        let f = frames(&out);
        assert_eq!(f[0].0, "control", "the first answer: the position");
        assert_eq!(f[1].1[0]["type"], "message-delta");
        assert_eq!(f[1].1[0]["delta"], "lo");
        let at = f[2].1["streamNextOffset"].as_str().unwrap().to_owned();
        assert_eq!(at, live_offset(7, 2, 5));

        // The reader drops and resumes from that offset after the segment
        // grew and was flushed: only the text after its five characters.
        let (base, chars) = split_offset(&at).unwrap();
        assert_eq!(base, offset(7, 2));
        let mut w = Updates::long_poll("t".into(), Resume { seq: 2, chars }, None);
        let mut out = Vec::new();
        w.begin(7, 0, 3, &mut out);
        for (seq, data) in log.iter().chain([ev(3, "text-block", json!({ "text": "Hello world" }))].iter()) {
            w.durable(*seq, data, &mut out);
        }
        w.end_of_message(0, 1, &mut out);
        let reply = w.reply().expect("answered");
        let body: Value = serde_json::from_slice(&reply.body).unwrap();
        assert_eq!(body[0]["delta"], " world");
        assert_eq!(body[0]["position"], json!({ "batch": 3, "index": 0 }));
        assert_eq!(reply.get("stream-next-offset"), Some(offset(7, 3).as_str()));
    }

    /// A live SSE reader moved after any message (saved, and taken over by
    /// a reader opened as the route opens one) writes what it would have
    /// written unmoved, byte for byte: live text and the block that flushes
    /// it, a tool call ending a segment, reasoning, a run's end and the next
    /// run; from the start, and resuming inside a segment. A long-poll does
    /// not move; another conversation's or protocol's state is refused.
    #[test]
    fn a_moved_updates_reader_goes_on_as_if_it_had_not_moved() {
        let e = |run: &str, kind: &str, rid: &str, payload: Value| {
            json!({ "type": kind, "runId": run, "agentId": "root", "responseId": rid, "ts": 0, "payload": payload })
                .to_string()
        };
        let messages: Vec<(bool, String)> = vec![
            (true, e("t.run_1", "run-start", "r1", json!({ "messageId": "m1", "message": "hi" }))),
            // Nothing to project: only a control, when the position moved.
            (true, e("t.run_1", "tool-input-start", "r1", json!({ "toolCallId": "a", "toolName": "look" }))),
            (false, e("t.run_1", "status", "r1", json!({ "message": "thinking" }))),
            (false, e("t.run_1", "text-delta", "r1", json!({ "text": "Hel" }))),
            (false, e("t.run_1", "text-delta", "r1", json!({ "text": "lo" }))),
            (true, e("t.run_1", "text-block", "r1", json!({ "text": "Hello" }))),
            (false, e("t.run_1", "text-delta", "r1", json!({ "text": " you" }))),
            (true, e("t.run_1", "tool-call", "r1", json!({ "toolCallId": "a", "toolName": "look", "args": {} }))),
            (false, e("t.run_1", "reasoning-delta", "r2", json!({ "text": "hmm" }))),
            (true, e("t.run_1", "reasoning-block", "r2", json!({ "text": "hmm" }))),
            (false, e("t.run_1", "text-delta", "r3", json!({ "text": "Wor" }))),
            (true, e("t.run_1", "text-block", "r3", json!({ "text": "World" }))),
            (true, e("t.run_1", "run-finish", "r3", json!({ "status": "completed" }))),
            (true, e("t.run_2", "run-start", "s1", json!({ "messageId": "m2", "message": "again" }))),
            (false, e("t.run_2", "text-delta", "s1", json!({ "text": "ok" }))),
            (true, e("t.run_2", "run-finish", "s1", json!({ "status": "completed" }))),
        ];
        let feed = |f: &mut Updates, m: &(bool, String), seq: u64, out: &mut Vec<u8>| {
            crate::feed::feed_message(f, m, seq, out);
            f.end_of_message(10 * seq as i64, seq, out);
        };
        let opens: [Box<dyn Fn() -> Updates>; 2] = [
            Box::new(|| Updates::sse("t".into(), Resume::default(), None, 0)),
            // Resuming four characters into the first answer, with a cursor
            // ahead of the clock.
            Box::new(|| Updates::sse("t".into(), Resume { seq: 1, chars: 4 }, Some("99999999999".into()), 0)),
        ];
        for open in opens {
            let whole = crate::feed::assert_moves_unchanged(open, &messages, feed);
            assert!(whole.contains("World") && whole.contains("hmm") && whole.contains("\"ok\""), "{whole}");
            assert!(whole.contains("event: control"), "{whole}");
        }
        // Its clocks move with it: the next control 30 s after the last
        // one, and its recycling counted from when the client opened it.
        let mut a = Updates::sse("t".into(), Resume::default(), None, 0);
        let mut out = Vec::new();
        a.begin(1, 0, 0, &mut out);
        a.caught_up(&mut out);
        a.keepalive(30_000, 1, &mut out);
        assert!(String::from_utf8_lossy(&out).contains("event: control"));
        let mut b = Updates::sse("t".into(), Resume::default(), None, 40_000);
        assert!(b.restore(&a.save().unwrap()));
        let mut out = Vec::new();
        b.keepalive(45_000, 1, &mut out);
        assert_eq!(out, HEARTBEAT, "no control 15 s after the last one");
        assert!(b.done(wire::SSE_RECYCLE_MS + 1), "recycled as if it had not moved");
        let state = Updates::sse("t".into(), Resume::default(), None, 0).save().unwrap();
        assert!(!Updates::sse("other".into(), Resume::default(), None, 0).restore(&state), "another conversation's");
        assert!(!Updates::long_poll("t".into(), Resume::default(), None).restore(&state), "a long-poll");
        assert!(Updates::long_poll("t".into(), Resume::default(), None).save().is_none(), "a long-poll answers once");
        assert!(!Updates::sse("t".into(), Resume::default(), None, 0).restore(r#"{"agora":[]}"#), "another protocol's");
    }
}
