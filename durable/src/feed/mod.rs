//! A subscriber's stream, across the hop between the thread's object and
//! the stateless Worker that holds the client's connection.
//!
//! The object keeps no streaming response: it accepts one hibernatable
//! socket per subscriber, and sends it [`socket`] messages (the hello with the
//! first replay page and the open segments' snapshot, then one message per
//! publish). The Worker runs a [`Relay`] over the socket: it turns the
//! messages into the client's protocol with a [`Framer`] (the events route,
//! a run stream, a Durable Streams view), asks for further replay pages, and
//! writes the bytes to the client.
//!
//! Invariant (replay then live, across the hop): the object decides the
//! replay window `(after, high]` and registers the socket in one synchronous
//! block, and every record it sends live has a seq above `high`. The relay
//! writes every replayed record (pages, in order), then the snapshot, then
//! the live messages it held meanwhile, in the order they arrived: it never
//! reorders or drops what it receives. A socket that drops ends the client's
//! stream (the client resumes from its cursor), so nothing is lost silently.

pub mod backlog;
pub mod held;
pub mod socket;

/// A moving feed's state as it travels ([`Framer::save`]): `{"<protocol>":
/// <state>}`, so that one protocol's state is never taken for another's.
pub(crate) fn save_tagged<T: serde::Serialize>(protocol: &str, state: &T) -> String {
    let state = serde_json::to_string(state).expect("a feed's state serialises");
    format!("{{\"{protocol}\":{state}}}")
}

/// The state [`save_tagged`] gave for `protocol` (`None`: another
/// protocol's, or not one at all).
pub(crate) fn restore_tagged<T: serde::de::DeserializeOwned>(protocol: &str, state: &str) -> Option<T> {
    let inner = state.strip_prefix("{\"")?.strip_prefix(protocol)?.strip_prefix("\":")?.strip_suffix('}')?;
    serde_json::from_str(inner).ok()
}

/// A map whose keys are not strings as a JSON array of `[key, value]`
/// (`#[serde(with = "crate::feed::pairs")]`): for the states a moving
/// feed saves ([`Framer::save`]).
pub mod pairs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::HashMap;
    use std::hash::Hash;

    pub fn serialize<K: Serialize, V: Serialize, S: Serializer>(map: &HashMap<K, V>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(map.iter())
    }

    pub fn deserialize<'de, K, V, D>(d: D) -> Result<HashMap<K, V>, D::Error>
    where
        K: Deserialize<'de> + Eq + Hash,
        V: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        Ok(Vec::<(K, V)>::deserialize(d)?.into_iter().collect())
    }
}

use crate::wire::error::ApiError;
use crate::wire::reply::Reply;
use socket::Line;

/// A client protocol, fed the thread's items in order.
pub trait Framer {
    /// Whether, once live, a message's frames depend on nothing but the
    /// message: no state of the subscriber's, no clock, no randomness, no
    /// page to ask for, never done. Then every live relay of the protocol
    /// turns one message into the same bytes, and a Worker isolate may
    /// frame a message once for all its subscribers ([`Feed::shared_frames`]).
    const PURE: bool = false;

    /// Whether the protocol's stream can move between the object and a
    /// relay mid-stream ([`Framer::save`] and [`Framer::restore`]): only
    /// such a stream is held by the object during a run.
    const MOVES: bool = false;

    /// The hello: the log's generation, and the replay window `(after, high]`.
    fn begin(&mut self, _gen: u64, _after: u64, _high: u64, _out: &mut Vec<u8>) {}
    /// A stored record, replayed or live.
    fn durable(&mut self, seq: u64, data: &str, out: &mut Vec<u8>);
    /// A live event (never stored).
    fn live(&mut self, data: &str, out: &mut Vec<u8>);
    /// An open segment's text so far, for a client joining mid-answer.
    fn snapshot(&mut self, data: &str, out: &mut Vec<u8>) {
        self.live(data, out)
    }
    /// A live run's state for a joining client (after the replay, before
    /// the open segments; `data` is a `thread::RunSnapshot`), for a
    /// protocol that has a frame for it.
    fn run_state(&mut self, _data: &str, _out: &mut Vec<u8>) {}
    /// The run followed has ended (said in the hello, before the replay
    /// completes).
    fn ended(&mut self) {}
    /// The replay is complete: what follows is live.
    fn caught_up(&mut self, _out: &mut Vec<u8>) {}
    /// A message's items are all in (views answer one batch per message).
    fn end_of_message(&mut self, _now: i64, _random: u64, _out: &mut Vec<u8>) {}
    /// The keep-alive the client gets when nothing happens.
    fn keepalive(&mut self, now: i64, random: u64, out: &mut Vec<u8>);
    /// Nothing more will come (a run's stream after its terminal frame).
    fn done(&self, _now: i64) -> bool {
        false
    }

    /// A protocol that answers once (a long-poll): its answer, when ready.
    fn reply(&mut self) -> Option<Reply> {
        None
    }

    /// The answer of a one-shot protocol whose wait ran out.
    fn timeout(&self, _now: i64, _random: u64) -> Option<Reply> {
        None
    }

    /// Live, between two messages: what another feed of this protocol
    /// needs to go on from here exactly as this one would ([`held`]'s
    /// hand-over). `None`: this protocol's stream does not move; it ends
    /// there, and its client resumes from its cursor.
    fn save(&self) -> Option<String> {
        None
    }

    /// Takes over a state [`Framer::save`] gave (false: not one of this
    /// protocol's, and nothing changed).
    fn restore(&mut self, _state: &str) -> bool {
        false
    }
}

/// A relay whatever its protocol, for the shell.
pub trait Feed {
    fn on_message(&mut self, text: &str, now: i64, random: u64) -> RelayStep;
    fn on_tick(&mut self, now: i64, random: u64) -> RelayStep;
    /// When live on a pure protocol ([`Framer::PURE`]), the protocol's name:
    /// what `on_message` answers is then the same for every relay with this
    /// name given the same message, and changes nothing in the relay, so a
    /// Worker may reuse the bytes another of its relays framed from that
    /// message. `None` otherwise (replaying, or a stateful protocol).
    fn shared_frames(&self) -> Option<&'static str> {
        None
    }
    /// Live, between two messages: the state a relay takes over from
    /// (`socket::Line::Restore`); `None` while replaying, or for a protocol
    /// whose stream does not move ([`Framer::save`]).
    fn save(&self) -> Option<String> {
        None
    }
    /// Whether this protocol's stream can move ([`Framer::MOVES`]).
    fn moves(&self) -> bool {
        false
    }
    /// Takes over a state [`Feed::save`] gave, live from here (false: the
    /// state is not this protocol's, or the feed is replaying).
    fn restore(&mut self, _state: &str) -> bool {
        false
    }
    /// A one-shot protocol's answer (a long-poll), once ready.
    fn reply(&mut self) -> Option<Reply>;
    fn timeout(&self, now: i64, random: u64) -> Option<Reply>;
    /// A one-shot protocol's answer when the object closed the socket
    /// before answering: the thread was deleted ([`socket::GONE`]), or the
    /// socket dropped (answered as a wait that ran out: the reader asks
    /// again from where it stands).
    fn on_close(&mut self, code: u16, now: i64, random: u64) -> Option<Reply> {
        if code == socket::GONE {
            return Some(Reply::error(&ApiError::thread_not_found()));
        }
        self.reply().or_else(|| self.timeout(now, random))
    }
}

impl<F: Framer> Feed for Relay<F> {
    fn on_message(&mut self, text: &str, now: i64, random: u64) -> RelayStep {
        Relay::on_message(self, text, now, random)
    }

    fn on_tick(&mut self, now: i64, random: u64) -> RelayStep {
        Relay::on_tick(self, now, random)
    }

    fn shared_frames(&self) -> Option<&'static str> {
        (F::PURE && matches!(self.phase, Phase::Live)).then(std::any::type_name::<F>)
    }

    fn save(&self) -> Option<String> {
        matches!(self.phase, Phase::Live).then(|| self.framer.save()).flatten()
    }

    fn restore(&mut self, state: &str) -> bool {
        Relay::restore(self, state)
    }

    fn moves(&self) -> bool {
        F::MOVES
    }

    fn reply(&mut self) -> Option<Reply> {
        self.framer.reply()
    }

    fn timeout(&self, now: i64, random: u64) -> Option<Reply> {
        self.framer.timeout(now, random)
    }
}

/// How the Worker serves a stream: the relay, the response's headers (for
/// a one-shot protocol, its reply carries them), and when the stream must
/// end (the stream token that opened it expires).
pub struct Plan {
    pub feed: Box<dyn Feed>,
    pub headers: Vec<(&'static str, String)>,
    /// A long-poll: one answer, not a stream.
    pub one_shot: bool,
    pub until: Option<i64>,
    /// The keep-alive interval, when not the SSE ping's.
    pub tick_ms: Option<u64>,
    /// Headers the object's socket answer may set for the client's
    /// response (what only the object knows, such as an encoding).
    pub pass: &'static [&'static str],
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan").field("headers", &self.headers).field("one_shot", &self.one_shot).finish_non_exhaustive()
    }
}

impl Plan {
    /// A stream relayed with `feed` under `headers`.
    pub fn new(feed: Box<dyn Feed>, headers: Vec<(&'static str, String)>) -> Plan {
        Plan { feed, headers, one_shot: false, until: None, tick_ms: None, pass: &[] }
    }

    /// One answer, not a stream (a long-poll).
    pub fn one_shot(self) -> Plan {
        Plan { one_shot: true, ..self }
    }

    /// The stream ends at `at` (the stream token that opened it expires).
    pub fn until(self, at: i64) -> Plan {
        Plan { until: Some(at), ..self }
    }
}

/// What the shell does after a message: write `out`, ask for the next
/// replay page (`page`), end the stream (`done`), move it to the object
/// with a ticket (`moved`: after `out`, at this frame boundary).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RelayStep {
    pub out: Vec<u8>,
    pub page: Option<String>,
    pub done: bool,
    pub moved: Option<String>,
}

#[derive(Debug)]
enum Phase {
    /// Waiting for the hello.
    Start,
    /// Replaying `(after, high]`; live messages are held until it ends.
    Replay {
        after: u64,
        high: u64,
        syncs: Vec<String>,
        snapshot: Vec<String>,
        held: Vec<String>,
    },
    Live,
}

/// Replay then live, for one subscriber, in the Worker.
pub struct Relay<F> {
    pub framer: F,
    phase: Phase,
    /// A hand-over it could not take: the stream ends.
    broken: bool,
    /// The object asked for the stream to move to it, with this ticket.
    moved: Option<String>,
}

impl<F: Framer> Relay<F> {
    pub fn new(framer: F) -> Relay<F> {
        Relay { framer, phase: Phase::Start, broken: false, moved: None }
    }

    /// Takes one message from the object.
    pub fn on_message(&mut self, text: &str, now: i64, random: u64) -> RelayStep {
        // Frames are a little longer than the lines they come from (a short
        // event's framing is a fifth of it): reserved once, so a large
        // message is never copied over to a grown buffer.
        let mut step = RelayStep { out: Vec::with_capacity(text.len() + text.len() / 4 + 64), ..RelayStep::default() };
        match &mut self.phase {
            // A live message during the replay: held, in order.
            Phase::Replay { held, .. } if !is_page(text) => held.push(text.to_owned()),
            _ => {
                self.take(text, now, random, &mut step.out);
                if let Phase::Replay { after, high, .. } = self.phase {
                    if after >= high {
                        self.finish_replay(now, random, &mut step.out);
                    } else {
                        step.page = Some(socket::page_request(after, high));
                    }
                }
            }
        }
        self.framer.end_of_message(now, random, &mut step.out);
        step.done = self.broken || self.framer.done(now);
        step.moved = self.moved.take();
        step
    }

    /// Takes over a saved state between messages (at the start, or live):
    /// live from here. False, and nothing changed, for a state its framer
    /// refuses or while replaying.
    pub fn restore(&mut self, state: &str) -> bool {
        let ok = matches!(self.phase, Phase::Start | Phase::Live) && self.framer.restore(state);
        if ok {
            self.phase = Phase::Live;
        }
        ok
    }

    /// The keep-alive interval passed with nothing to send.
    pub fn on_tick(&mut self, now: i64, random: u64) -> RelayStep {
        let mut out = Vec::new();
        if matches!(self.phase, Phase::Live) {
            self.framer.keepalive(now, random, &mut out);
        }
        RelayStep { out, page: None, done: self.framer.done(now), moved: None }
    }

    fn take(&mut self, text: &str, now: i64, random: u64, out: &mut Vec<u8>) {
        for line in socket::lines(text) {
            match line {
                Line::Hello { high, gen, after } => {
                    self.framer.begin(gen, after, high, out);
                    self.phase =
                        Phase::Replay { after, high, syncs: Vec::new(), snapshot: Vec::new(), held: Vec::new() };
                }
                Line::Durable { seq, data } => self.framer.durable(seq, data, out),
                Line::Live(data) => self.framer.live(data, out),
                Line::Snapshot(data) => {
                    if let Phase::Replay { snapshot, .. } = &mut self.phase {
                        snapshot.push(data.to_owned());
                    }
                }
                Line::Sync(data) => {
                    if let Phase::Replay { syncs, .. } = &mut self.phase {
                        syncs.push(data.to_owned());
                    }
                }
                // The position the page reached (`high` once nothing more
                // up to it is left).
                Line::Ended => self.framer.ended(),
                Line::Probe if matches!(self.phase, Phase::Live) => self.framer.keepalive(now, random, out),
                Line::Probe => {}
                Line::PageEnd { last } => {
                    if let Phase::Replay { after, .. } = &mut self.phase {
                        *after = last;
                    }
                }
                // A held stream moved here: its feed's state, live. A state
                // this framer cannot take ends the stream (the client
                // resumes from its cursor) rather than frame on from a
                // guess.
                Line::Restore(state) => {
                    let restored = serde_json::from_str::<String>(state).is_ok_and(|s| self.restore(&s));
                    if !restored {
                        self.broken = true;
                    }
                }
                // Read by the shell from the step (`RelayStep::moved`).
                Line::Move(ticket) => self.moved = Some(ticket.to_owned()),
            }
        }
    }

    fn finish_replay(&mut self, now: i64, random: u64, out: &mut Vec<u8>) {
        let Phase::Replay { syncs, snapshot, held, .. } = std::mem::replace(&mut self.phase, Phase::Live) else {
            return;
        };
        for data in &syncs {
            self.framer.run_state(data, out);
        }
        for data in &snapshot {
            self.framer.snapshot(data, out);
        }
        self.framer.caught_up(out);
        for message in &held {
            self.take(message, now, random, out);
        }
    }
}

/// Whether two messages are the same bytes, compared eight at a time: a
/// Worker shares frames between relays only for an identical message
/// (`Feed::shared_frames`), and wasm's `memcmp` goes a byte at a time
/// through messages that run to megabytes.
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (wa, wb) = (a.chunks_exact(8), b.chunks_exact(8));
    let word = |w: &[u8]| u64::from_ne_bytes(w.try_into().expect("eight bytes"));
    wa.remainder() == wb.remainder() && wa.zip(wb).all(|(x, y)| word(x) == word(y))
}

/// Whether a message holds a page's end (the hello holds the first).
fn is_page(text: &str) -> bool {
    text.starts_with("P ") || text.contains("\nP ")
}

/// A stored event of run `t.r` as the log holds it, for the protocols'
/// tests.
#[cfg(test)]
pub(crate) fn event_json(
    kind: crate::log::event::Kind,
    agent: &str,
    response: Option<&str>,
    payload: serde_json::Value,
) -> String {
    let mut e = crate::log::event::Event::from_json(kind, "t.r", agent, 0, payload).expect("a valid event");
    e.response_id = response.map(str::to_owned);
    serde_json::to_string(&e).expect("an event serialises")
}

/// Hands a test message to a feed: a stored record (`true`) or a live
/// event.
#[cfg(test)]
pub(crate) fn feed_message<F: Framer>(f: &mut F, (durable, data): &(bool, String), seq: u64, out: &mut Vec<u8>) {
    if *durable {
        f.durable(seq, data, out)
    } else {
        f.live(data, out)
    }
}

/// A moving feed's proof, for its protocol's tests: the feed opened by
/// `open`, moved after each of `messages` in turn (saved, and restored into
/// a fresh one), writes what the unmoved feed writes, byte for byte, and
/// is done when it is. `feed` hands one message over (its seq given).
/// Returns what the unmoved feed wrote.
#[cfg(test)]
pub(crate) fn assert_moves_unchanged<F: Framer, M>(
    open: impl Fn() -> F,
    messages: &[M],
    feed: impl Fn(&mut F, &M, u64, &mut Vec<u8>),
) -> String {
    let start = |f: &mut F, out: &mut Vec<u8>| {
        f.begin(1, 0, 0, out);
        f.caught_up(out);
    };
    let mut whole = Vec::new();
    let mut unmoved = open();
    start(&mut unmoved, &mut whole);
    for (i, m) in messages.iter().enumerate() {
        feed(&mut unmoved, m, i as u64 + 1, &mut whole);
    }
    let whole = String::from_utf8(whole).expect("frames are text");
    for cut in 0..messages.len() {
        let mut out = Vec::new();
        let mut before = open();
        start(&mut before, &mut out);
        for (i, m) in messages[..cut].iter().enumerate() {
            feed(&mut before, m, i as u64 + 1, &mut out);
        }
        let mut after = open();
        assert!(after.restore(&before.save().expect("a moving feed saves its state")), "cut at {cut}");
        for (i, m) in messages.iter().enumerate().skip(cut) {
            feed(&mut after, m, i as u64 + 1, &mut out);
        }
        assert_eq!(String::from_utf8(out).expect("frames are text"), whole, "cut at {cut}");
        assert_eq!(after.done(0), unmoved.done(0), "cut at {cut}");
    }
    whole
}

#[cfg(test)]
mod tests {
    use super::same_bytes;

    #[test]
    fn same_bytes_is_slice_equality() {
        let base: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for len in [0, 1, 7, 8, 9, 15, 16, 17, 999, 1000] {
            let a = &base[..len];
            assert!(same_bytes(a, a));
            assert!(!same_bytes(a, &base[..len.saturating_sub(1)]) || len == 0);
            for at in [0, len / 2, len.saturating_sub(1)] {
                if len == 0 {
                    continue;
                }
                let mut b = a.to_vec();
                b[at] ^= 1;
                assert!(!same_bytes(a, &b), "len {len}, differing at {at}");
            }
        }
    }
}
