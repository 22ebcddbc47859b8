//! A thread's log, or one run's events, read live as a Durable Stream
//! (`GET /v1/threads/:id?live=sse|long-poll`, `GET /v1/runs/:runId?...`):
//! only durable records travel, as JSON arrays, each batch followed by its
//! `control` event; a long-poll answers its first batch, or 204 when none
//! came in time (`docs/protocols/flue-streaming-protocol.md`, `docs/protocols/notes-from-source-and-trackers.md` §3).

use super::views::{self as view, Position};
use crate::streams::wire;
use crate::feed::Framer;
use crate::wire::reply::Reply;
use serde::{Deserialize, Serialize};

/// The fields of a stored event a view needs (a record of another log, an
/// inbox change, has neither: it is read whole).
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: &'a str,
    #[serde(rename = "runId", borrow, default)]
    run_id: &'a str,
}

/// What a view follows and where it stands; a moving view's state with its
/// mode's ([`Framer::save`]), taken between two messages, where its batch
/// is empty (a message's records are answered at its end).
#[derive(Serialize, Deserialize)]
struct Cursor {
    /// `Some(run)`: one run's events (closed by its `run-finish`).
    run: Option<String>,
    pos: Position,
    high: u64,
    live: bool,
    /// The run followed had ended when the subscription began.
    ended: bool,
    client_cursor: Option<String>,
    /// Records of the current message, in scope.
    #[serde(skip)]
    batch: Vec<String>,
    /// Each event is stamped with this `v` (Flue's run reads).
    version: Option<u32>,
    /// Flue's run reads: the text events the run's blocks add.
    text: Option<view::RunText>,
    /// Records up to this seq only prime [`Cursor::text`]: the reader had
    /// them (a Flue run read is followed from the run's start).
    skip_to: Option<u64>,
}

impl Cursor {
    fn new(run: Option<String>, client_cursor: Option<String>) -> Cursor {
        let pos = Position { gen: 0, seq: 0, up_to_date: false, closed: false };
        Cursor {
            run,
            pos,
            high: 0,
            live: false,
            ended: false,
            client_cursor,
            batch: Vec::new(),
            version: None,
            text: None,
            skip_to: None,
        }
    }

    fn begin(&mut self, gen: u64, after: u64, high: u64) {
        let after = after.max(self.skip_to.unwrap_or(0));
        self.pos = Position { gen, seq: after, up_to_date: after >= high, closed: false };
        self.high = high;
    }

    fn record(&mut self, seq: u64, data: &str) {
        self.pos.seq = self.pos.seq.max(seq);
        self.pos.up_to_date = self.live || self.pos.seq >= self.high;
        let Ok(head) = serde_json::from_str::<Head>(data) else { return };
        match &self.run {
            Some(run) if head.run_id != run => {}
            Some(_) => {
                let extra = self.text.as_mut().and_then(|t| t.delta(data));
                if self.skip_to.is_some_and(|s| seq <= s) {
                    return;
                }
                if head.kind == "run-finish" {
                    self.pos.closed = true;
                }
                self.batch.push(self.version.map_or_else(|| data.to_owned(), |v| view::stamp(data, v)));
                if let (Some(e), Some(v)) = (extra, self.version) {
                    self.batch.push(view::stamp(&e, v));
                }
            }
            None => self.batch.push(data.to_owned()),
        }
    }

    /// At the top of the window: up to date, and closed when the run had
    /// ended (its `run-finish` may lie before the reader's offset).
    fn caught_up(&mut self) {
        self.live = true;
        self.pos.up_to_date = true;
        self.pos.seq = self.pos.seq.max(self.high);
        self.pos.closed |= self.ended;
    }

    /// Still reading what the reader had (a Flue run read fed from the
    /// run's start): an empty batch now says nothing.
    fn priming(&self) -> bool {
        self.skip_to.is_some() && !self.live
    }

    fn cursor(&self, now: i64, random: u64) -> String {
        wire::response_cursor(self.client_cursor.as_deref(), now, wire::cursor_jitter(random))
    }

    /// The records gathered, as stored rows for the view helpers.
    fn take(&mut self) -> Vec<crate::storage::store::Record> {
        std::mem::take(&mut self.batch)
            .into_iter()
            .map(|data| crate::storage::store::Record {
                seq: 0,
                run_id: String::new(),
                kind: crate::log::event::Kind::RunStart,
                data,
            })
            .collect()
    }
}

/// What differs between a view's live modes: how it answers. What it
/// follows and where it stands is its [`Cursor`]'s, the same for both.
trait Answers {
    /// Whether a view answering this way can move mid-stream
    /// ([`Framer::MOVES`]): its state and its cursor's, saved between
    /// messages, go on exactly where they were.
    const MOVES: bool = false;
    /// What a moving mode carries over.
    type Saved: Serialize + serde::de::DeserializeOwned;
    fn saved(&self) -> Option<Self::Saved>;
    fn take_over(&mut self, saved: Self::Saved);
    /// A message's records are all in.
    fn end_of_message(&mut self, cursor: &mut Cursor, now: i64, random: u64, out: &mut Vec<u8>);
    fn keepalive(&mut self, _cursor: &mut Cursor, _now: i64, _random: u64, _out: &mut Vec<u8>) {}
    fn done(&self, _now: i64) -> bool {
        false
    }
    fn reply(&mut self) -> Option<Reply> {
        None
    }
    fn timeout(&self, _cursor: &Cursor, _now: i64, _random: u64) -> Option<Reply> {
        None
    }
}

/// A live view: the cursor, and how its mode answers.
pub struct View<A> {
    cursor: Cursor,
    answers: A,
}

impl<A> View<A> {
    /// Each event is stamped with `"v": version` (a run read).
    pub fn versioned(mut self, version: u32) -> View<A> {
        self.cursor.version = Some(version);
        self
    }

    /// A Flue run read: the run's blocks are followed by Flue's text events
    /// ([`view::RunText`]), and the view, fed from the run's start, answers
    /// only what lies after `seq`, the reader's offset (`None`: the reader
    /// asked from `now`, and the view is fed from there).
    pub fn flue_text(mut self, seq: Option<u64>) -> View<A> {
        self.cursor.text = Some(view::RunText::default());
        self.cursor.skip_to = seq;
        self
    }
}

impl<A: Answers> Framer for View<A> {
    const MOVES: bool = A::MOVES;

    fn begin(&mut self, gen: u64, after: u64, high: u64, _out: &mut Vec<u8>) {
        self.cursor.begin(gen, after, high);
    }

    fn durable(&mut self, seq: u64, data: &str, _out: &mut Vec<u8>) {
        self.cursor.record(seq, data);
    }

    /// Views carry stored records only.
    fn live(&mut self, _data: &str, _out: &mut Vec<u8>) {}

    fn snapshot(&mut self, _data: &str, _out: &mut Vec<u8>) {}

    fn ended(&mut self) {
        self.cursor.ended = true;
    }

    fn caught_up(&mut self, _out: &mut Vec<u8>) {
        self.cursor.caught_up();
    }

    fn end_of_message(&mut self, now: i64, random: u64, out: &mut Vec<u8>) {
        self.answers.end_of_message(&mut self.cursor, now, random, out);
    }

    fn keepalive(&mut self, now: i64, random: u64, out: &mut Vec<u8>) {
        self.answers.keepalive(&mut self.cursor, now, random, out);
    }

    fn done(&self, now: i64) -> bool {
        self.answers.done(now)
    }

    fn reply(&mut self) -> Option<Reply> {
        self.answers.reply()
    }

    fn timeout(&self, now: i64, random: u64) -> Option<Reply> {
        self.answers.timeout(&self.cursor, now, random)
    }

    fn save(&self) -> Option<String> {
        Some(crate::feed::save_tagged("durable_streams", &(&self.cursor, self.answers.saved()?)))
    }

    /// Takes over a state of the same view: what it follows must be what
    /// this view was opened on (the same route, the same run), else
    /// nothing changes.
    fn restore(&mut self, state: &str) -> bool {
        let Some((cursor, answers)) = crate::feed::restore_tagged::<(Cursor, A::Saved)>("durable_streams", state)
        else {
            return false;
        };
        if !A::MOVES || cursor.run != self.cursor.run || cursor.version != self.cursor.version {
            return false;
        }
        self.cursor = cursor;
        self.answers.take_over(answers);
        true
    }
}

/// `live=sse`: a `data` event per batch with its `control` event; a control
/// event as the keep-alive; the stream ends once a run's close is reported,
/// or after [`wire::SSE_RECYCLE_MS`] (clients resume from their offset).
pub type SseView = View<Sse>;

#[derive(Clone, Serialize, Deserialize)]
pub struct Sse {
    opened: i64,
    /// The position last reported (`None` before the first batch, which is
    /// always answered, even empty: the client learns its position at once).
    reported: Option<Position>,
    /// When a control frame last went out.
    controlled: i64,
}

/// An idle connection's `control` frame, every this long (Flue's): between
/// them, keep-alives are `: heartbeat` comments.
pub const CONTROL_EVERY_MS: i64 = 30_000;

/// The comment an idle SSE view writes (Flue's `: heartbeat`).
pub const HEARTBEAT: &[u8] = b": heartbeat\n\n";

impl SseView {
    pub fn new(run: Option<String>, client_cursor: Option<String>, now: i64) -> SseView {
        View { cursor: Cursor::new(run, client_cursor), answers: Sse { opened: now, reported: None, controlled: now } }
    }
}

impl Answers for Sse {
    const MOVES: bool = true;

    type Saved = Sse;

    fn saved(&self) -> Option<Sse> {
        Some(self.clone())
    }

    fn take_over(&mut self, saved: Sse) {
        *self = saved;
    }

    /// A batch when there is one, or the position moved (a run's view
    /// moves with the thread's log); nothing for a publish that stored
    /// nothing (deltas).
    fn end_of_message(&mut self, cursor: &mut Cursor, now: i64, random: u64, out: &mut Vec<u8>) {
        let pos = cursor.pos;
        if cursor.batch.is_empty() && self.reported == Some(pos) {
            return;
        }
        self.reported = Some(pos);
        self.controlled = now;
        let c = cursor.cursor(now, random);
        view::sse_batch(&cursor.take(), pos, &c, out);
    }

    /// An idle connection: a `: heartbeat` comment, and a `control` frame
    /// (the position again) once [`CONTROL_EVERY_MS`] passed without one,
    /// as Flue's server writes them.
    fn keepalive(&mut self, cursor: &mut Cursor, now: i64, random: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(HEARTBEAT);
        if now - self.controlled >= CONTROL_EVERY_MS {
            self.controlled = now;
            view::sse_batch(&[], cursor.pos, &cursor.cursor(now, random), out);
        }
    }

    fn done(&self, now: i64) -> bool {
        self.reported.is_some_and(|p| p.closed) || now - self.opened > wire::SSE_RECYCLE_MS
    }
}

/// `live=long-poll`: answers the first batch there is (at once when the
/// replay has one, or the run is closed), else the first that a publish
/// stores; [`Answers::timeout`] answers 204 at the same position.
pub type LongPoll = View<Poll>;

pub struct Poll {
    reply: Option<Reply>,
}

impl LongPoll {
    pub fn new(run: Option<String>, client_cursor: Option<String>) -> LongPoll {
        View { cursor: Cursor::new(run, client_cursor), answers: Poll { reply: None } }
    }
}

impl Answers for Poll {
    /// A long-poll answers once: it never moves.
    type Saved = ();

    fn saved(&self) -> Option<()> {
        None
    }

    fn take_over(&mut self, _: ()) {}

    fn end_of_message(&mut self, cursor: &mut Cursor, now: i64, random: u64, _out: &mut Vec<u8>) {
        let pos = cursor.pos;
        if self.reply.is_none() && (!cursor.batch.is_empty() || pos.closed || (!pos.up_to_date && !cursor.priming())) {
            let c = cursor.cursor(now, random);
            self.reply = Some(view::batch_reply(&cursor.take(), pos, Some(c)));
        }
    }

    fn reply(&mut self) -> Option<Reply> {
        self.reply.take()
    }

    fn timeout(&self, cursor: &Cursor, now: i64, random: u64) -> Option<Reply> {
        Some(view::timeout_reply(cursor.pos, cursor.cursor(now, random)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::assert_moves_unchanged;

    fn ev(seq: u64, kind: &str, text: &str) -> (u64, String) {
        let e = serde_json::json!({ "type": kind, "runId": "t.r", "agentId": "a", "responseId": "x", "ts": seq, "payload": { "text": text } });
        (seq, e.to_string())
    }

    /// A run whose text grows over three blocks, a tool call ending its
    /// first segment.
    fn run_records() -> Vec<(u64, String)> {
        vec![
            ev(1, "run-start", ""),
            ev(2, "text-block", "Hel"),
            ev(3, "text-block", "Hello wor"),
            ev(4, "tool-call", ""),
            ev(5, "text-block", "Hello world"),
            ev(6, "run-finish", ""),
        ]
    }

    /// What a long-poll of a Flue run read answers from `skip`.
    fn poll_from(skip: u64, records: &[(u64, String)]) -> Vec<serde_json::Value> {
        let mut v = LongPoll::new(Some("t.r".into()), None).versioned(3).flue_text(Some(skip));
        let mut out = Vec::new();
        v.begin(1, 0, records.last().unwrap().0, &mut out);
        for (seq, data) in records {
            v.durable(*seq, data, &mut out);
        }
        v.ended();
        v.caught_up(&mut out);
        v.end_of_message(0, 1, &mut out);
        let reply = v.reply().expect("a closed run answers");
        serde_json::from_slice(&reply.body).unwrap()
    }

    #[test]
    fn a_flue_run_read_says_each_character_of_its_text_once_from_any_offset() {
        let records = run_records();
        let text = |events: &[serde_json::Value]| -> String {
            events.iter().filter(|e| e["type"] == "text_delta").map(|e| e["text"].as_str().unwrap().to_owned()).collect()
        };
        let whole = poll_from(0, &records);
        assert!(whole.iter().all(|e| e["v"] == 3));
        assert_eq!(text(&whole), "Hello worHello world", "a tool call ends a segment: the next one is new text");
        for cut in 1..6 {
            let later = poll_from(cut, &records);
            let before: Vec<_> = whole.iter().filter(|e| e["ts"].as_u64().unwrap() <= cut).cloned().collect();
            assert_eq!(text(&before) + &text(&later), text(&whole), "cut at {cut}");
            assert!(later.iter().all(|e| e["ts"].as_u64().unwrap() > cut), "nothing up to the offset");
        }
    }

    /// A live SSE view moved after each record (saved, and taken over by a
    /// view opened as the route opens one) writes what it would have
    /// written unmoved, byte for byte: a thread read, a run read, and a
    /// Flue run read (its text said once across the move).
    #[test]
    fn a_moved_sse_view_goes_on_as_if_it_had_not_moved() {
        let records = run_records();
        let opens: [fn() -> SseView; 3] = [
            || SseView::new(None, Some("c1".into()), 0),
            || SseView::new(Some("t.r".into()), None, 0),
            || SseView::new(Some("t.r".into()), None, 0).versioned(2).flue_text(None),
        ];
        let feed = |v: &mut SseView, (seq, data): &(u64, String), _: u64, out: &mut Vec<u8>| {
            v.durable(*seq, data, out);
            v.end_of_message(10 * *seq as i64, *seq, out);
        };
        for open in opens {
            let whole = assert_moves_unchanged(open, &records, feed);
            assert!(whole.contains("event: data"), "{whole}");
        }
        // Another run's, another version's or another protocol's state is
        // refused, and the view is as it was.
        let state = SseView::new(Some("t.r".into()), None, 0).save().unwrap();
        assert!(!SseView::new(Some("t.other".into()), None, 0).restore(&state));
        assert!(!SseView::new(Some("t.r".into()), None, 0).versioned(2).restore(&state));
        assert!(!SseView::new(None, None, 0).restore(""), "Instance AI's state");
        assert!(!SseView::new(None, None, 0).restore("{\"view\":\"other\"}"));
        assert!(LongPoll::new(None, None).save().is_none(), "a long-poll answers once, it does not move");
    }

    #[test]
    fn an_idle_sse_view_writes_heartbeats_and_a_control_frame_every_30_seconds() {
        let mut v = SseView::new(None, None, 0);
        let mut out = Vec::new();
        v.keepalive(15_000, 1, &mut out);
        assert_eq!(out, HEARTBEAT, "a comment only");
        out.clear();
        v.keepalive(30_000, 1, &mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with(": heartbeat\n\nevent: control\n"), "{text}");
        let mut again = Vec::new();
        v.keepalive(45_000, 1, &mut again);
        assert_eq!(again, HEARTBEAT, "the next control is 30 s after this one");
    }
}
