//! Object-held delivery: a subscriber's stream the thread's object writes
//! itself, while it is awake for a run.
//!
//! Between runs a subscriber is a hibernatable socket that the stateless
//! Worker relays (the object may sleep). During a run the object is awake
//! anyway (the built-in agent runs in it, or an agent publishes into it), so
//! a subscriber that connects then is [`Held`]: the object runs the
//! route's [`Feed`] itself and writes the frames to a stream that the Worker
//! passes to the client as it is. workerd moves those bytes with no
//! JavaScript in the Worker per message, and one publish costs the object
//! one write per subscriber (frames made once for every subscriber of a pure
//! protocol, [`Frames`]).
//!
//! When the run ends, the held streams move to sockets (the hand-over):
//! each feed's state is taken at a frame boundary ([`Held::release`]), its
//! stream closed, and the messages published until the Worker claims its
//! socket are kept for it (`thread::Delivery::Moving`); the socket's first
//! message restores the state (`socket::Line::Restore`), then come the kept
//! ones. The client's stream never breaks: what the object wrote, then what
//! the relay writes, with neither a gap nor a duplicate. A feed whose
//! protocol does not move ([`super::Framer::save`]) ends its stream there
//! instead, and the client resumes from its cursor, as after any drop; so
//! only a protocol whose stream moves ([`super::Framer::MOVES`]) is held.

use super::backlog::{Backlog, ClientVerdict};
use super::{Feed, RelayStep};
use bytes::Bytes;
use std::cell::RefCell;
use std::rc::Rc;

/// The client's end of a held stream, as the object writes it.
pub trait Writer {
    /// Queues `bytes` for the client; `false` once its stream is gone.
    fn write(&mut self, bytes: &[u8]) -> bool;
    /// Queues a message's frames that every held stream of a pure protocol
    /// is written ([`Frames`]): the same allocation for each, so a writer
    /// may write them to all its streams as one chunk of its own (holding
    /// `frames` while it keeps that chunk, so that the address, which says
    /// it is the same message, is not reused). `false` once the stream is
    /// gone.
    fn write_shared(&mut self, frames: &Rc<[u8]>) -> bool {
        self.write(frames)
    }
    /// Writes the client's connection has not taken yet.
    fn pending(&self) -> usize;
    /// Ends the stream, after what was written.
    fn close(&mut self);
    /// Whether the client's side went away: its reader cancelled the
    /// stream, before or after the object ended it (a stream read to its
    /// end is not gone).
    fn is_gone(&self) -> bool {
        false
    }
}

/// The frames the last message made for a pure protocol, kept for the other
/// held streams of that protocol: a publish reaches each subscriber as the
/// same `Bytes` (one allocation, cloned), so its address says it is the
/// same message, and holding it keeps the address from being reused.
#[derive(Default)]
pub struct Frames {
    last: Option<(&'static str, Bytes, Rc<[u8]>)>,
}

impl Frames {
    fn get(&self, protocol: &'static str, message: &Bytes) -> Option<Rc<[u8]>> {
        let (p, m, frames) = self.last.as_ref()?;
        (*p == protocol && m.as_ptr() == message.as_ptr() && m.len() == message.len()).then(|| frames.clone())
    }
}

/// A clock, in milliseconds.
pub type Clock = Rc<dyn Fn() -> i64>;

/// One held subscriber: its feed, its stream, and whether it is read.
pub struct Held<W: Writer> {
    feed: Box<dyn Feed>,
    writer: W,
    backlog: Backlog,
    tick_ms: i64,
    wrote_at: i64,
    /// xorshift state for the feed's jitter (unpredictable enough, not
    /// secret).
    rng: u64,
    /// The replay page the feed asked for, for the object to serve.
    wants: Option<(u64, u64)>,
    ended: bool,
    frames: Rc<RefCell<Frames>>,
    clock: Clock,
}

impl<W: Writer> Held<W> {
    /// A stream framed by `feed` (a keep-alive after `tick_ms` of quiet),
    /// written to `writer`; `frames` is shared by the object's held streams.
    pub fn new(
        feed: Box<dyn Feed>,
        writer: W,
        tick_ms: u64,
        seed: u64,
        frames: Rc<RefCell<Frames>>,
        clock: Clock,
    ) -> Self {
        let now = clock();
        Held {
            feed,
            writer,
            backlog: Backlog::new(now, tick_ms),
            tick_ms: tick_ms as i64,
            wrote_at: now,
            rng: seed | 1,
            wants: None,
            ended: false,
            frames,
            clock,
        }
    }

    fn random(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// Whether the stream has ended (its client left or stopped reading,
    /// or its feed is done).
    pub fn is_ended(&self) -> bool {
        self.ended || self.writer.is_gone()
    }

    /// Whether the client's side cancelled the stream, even after it ended
    /// (a hand-over's stream whose client left before reading the end).
    pub fn reader_left(&self) -> bool {
        self.writer.is_gone()
    }

    fn end(&mut self) {
        if !self.ended {
            self.ended = true;
            self.writer.close();
        }
    }

    fn write(&mut self, bytes: &[u8], now: i64) {
        self.put(bytes.is_empty(), now, |w| w.write(bytes));
    }

    fn write_shared(&mut self, frames: &Rc<[u8]>, now: i64) {
        self.put(frames.is_empty(), now, |w| w.write_shared(frames));
    }

    /// Writes with `write` unless there is nothing to write, the stream has
    /// ended, or its client stopped reading (which ends it).
    fn put(&mut self, empty: bool, now: i64, write: impl FnOnce(&mut W) -> bool) {
        if empty || self.ended {
            return;
        }
        match self.backlog.observe(self.writer.pending(), now) {
            ClientVerdict::Reading => {}
            ClientVerdict::Stalled | ClientVerdict::TooFar => return self.end(),
        }
        if write(&mut self.writer) {
            self.backlog.wrote();
            self.wrote_at = now;
        } else {
            self.end();
        }
    }

    fn step(&mut self, step: RelayStep, now: i64) {
        self.write(&step.out, now);
        if let Some(page) = step.page.as_deref().and_then(super::socket::parse_page_request) {
            self.wants = Some(page);
        }
        if step.done {
            self.end();
        }
    }

    /// Takes one message of the thread's (what a socket would carry: the
    /// hello, a replay page, a publish). `false` once the stream has ended.
    pub fn take(&mut self, message: &Bytes) -> bool {
        if self.ended {
            return false;
        }
        let now = (self.clock)();
        let protocol = self.feed.shared_frames();
        if let Some(protocol) = protocol {
            let shared = self.frames.borrow().get(protocol, message);
            if let Some(frames) = shared {
                self.write_shared(&frames, now);
                return !self.ended;
            }
        }
        let Ok(text) = std::str::from_utf8(message) else {
            self.end();
            return false;
        };
        let random = self.random();
        let step = self.feed.on_message(text, now, random);
        match protocol {
            Some(protocol) if step.page.is_none() && !step.done => {
                let frames: Rc<[u8]> = Rc::from(step.out);
                self.write_shared(&frames, now);
                self.frames.borrow_mut().last = Some((protocol, message.clone(), frames));
            }
            _ => self.step(step, now),
        }
        !self.ended
    }

    /// The keep-alive, when the stream has been quiet for its interval;
    /// `false` once the stream has ended.
    pub fn tick(&mut self) -> bool {
        let now = (self.clock)();
        if !self.ended && now - self.wrote_at >= self.tick_ms {
            let random = self.random();
            let step = self.feed.on_tick(now, random);
            self.step(step, now);
            // A quiet stream's backlog is observed even with nothing to say.
            if !self.ended && matches!(self.backlog.observe(self.writer.pending(), now), ClientVerdict::Stalled) {
                self.end();
            }
        }
        !self.ended
    }

    /// The next replay page the feed asked for (`(after, high]`), once.
    pub fn wanted_page(&mut self) -> Option<(u64, u64)> {
        if self.ended {
            return None;
        }
        self.wants.take()
    }

    /// The hand-over: the feed's state at this frame boundary (`None` for a
    /// feed still replaying, whose protocol does not move, or whose client
    /// already left), and the stream ends after what was written.
    pub fn release(&mut self) -> Option<String> {
        let state = if self.is_ended() || self.wants.is_some() { None } else { self.feed.save() };
        self.end();
        state
    }
}

/// A held stream dropped without a hand-over (its subscriber left the
/// list: the thread was claimed by another actor, or wiped) ends: its
/// client resumes from its cursor.
impl<W: Writer> Drop for Held<W> {
    fn drop(&mut self) {
        if !self.ended {
            self.ended = true;
            self.writer.close();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::feed::{socket, Framer, Relay};
    use std::cell::Cell;

    /// A stream that keeps what is written, and can stop being read.
    #[derive(Clone, Default)]
    pub struct Kept {
        pub out: Rc<RefCell<Vec<u8>>>,
        pub closed: Rc<Cell<bool>>,
        /// Its reader cancelled it.
        pub gone: Rc<Cell<bool>>,
        pub pending: Rc<Cell<usize>>,
        /// The shared frames it was written, as they came.
        pub shared: Rc<RefCell<Vec<Rc<[u8]>>>>,
    }

    impl Writer for Kept {
        fn write(&mut self, bytes: &[u8]) -> bool {
            self.out.borrow_mut().extend_from_slice(bytes);
            !self.closed.get()
        }
        fn write_shared(&mut self, frames: &Rc<[u8]>) -> bool {
            self.shared.borrow_mut().push(frames.clone());
            self.write(frames)
        }
        fn pending(&self) -> usize {
            self.pending.get()
        }
        fn close(&mut self) {
            self.closed.set(true);
        }
        fn is_gone(&self) -> bool {
            self.gone.get()
        }
    }

    /// A protocol that writes each record as `<seq>:<data>;`, its live
    /// events as `L<data>;`, and carries a count across a hand-over.
    #[derive(Default)]
    struct Counted {
        n: u64,
    }

    impl Framer for Counted {
        const MOVES: bool = true;
        fn durable(&mut self, seq: u64, data: &str, out: &mut Vec<u8>) {
            self.n += 1;
            out.extend_from_slice(format!("{seq}:{data}#{};", self.n).as_bytes());
        }
        fn live(&mut self, data: &str, out: &mut Vec<u8>) {
            out.extend_from_slice(format!("L{data};").as_bytes());
        }
        fn keepalive(&mut self, _now: i64, _random: u64, out: &mut Vec<u8>) {
            out.extend_from_slice(b"K;");
        }
        fn save(&self) -> Option<String> {
            Some(self.n.to_string())
        }
        fn restore(&mut self, state: &str) -> bool {
            state.parse().map(|n| self.n = n).is_ok()
        }
    }

    /// A clock the test sets.
    fn clock() -> (Rc<Cell<i64>>, Clock) {
        let now = Rc::new(Cell::new(0));
        let read = now.clone();
        (now, Rc::new(move || read.get()))
    }

    fn held(clock: Clock, frames: Rc<RefCell<Frames>>) -> (Held<Kept>, Kept) {
        let kept = Kept::default();
        (Held::new(Box::new(Relay::new(Counted::default())), kept.clone(), 100, 7, frames, clock), kept)
    }

    fn message(f: impl FnOnce(&mut Vec<u8>)) -> Bytes {
        let mut m = Vec::new();
        f(&mut m);
        Bytes::from(m)
    }

    #[test]
    fn replays_asks_for_pages_goes_live_and_hands_over_its_state() {
        let (now, clock) = clock();
        let (mut h, kept) = held(clock.clone(), Rc::default());
        // The hello's page reaches 1 of (0, 2]: the feed asks for the rest.
        assert!(h.take(&message(|m| {
            socket::hello(2, 1, 0, m);
            socket::durable(1, "a", m);
            socket::page_end(1, m);
        })));
        assert_eq!(h.wanted_page(), Some((1, 2)));
        assert_eq!(h.wanted_page(), None, "asked once");
        // A publish while replaying waits for the replay.
        assert!(h.take(&message(|m| socket::durable(3, "c", m))));
        assert!(h.take(&message(|m| {
            socket::durable(2, "b", m);
            socket::page_end(2, m);
        })));
        assert_eq!(String::from_utf8(kept.out.borrow().clone()).unwrap(), "1:a#1;2:b#2;3:c#3;");
        // Quiet for the interval: a keep-alive.
        now.set(99);
        h.tick();
        assert!(kept.out.borrow().ends_with(b"3:c#3;"));
        now.set(200);
        h.tick();
        assert!(kept.out.borrow().ends_with(b"K;"));
        // The hand-over: the state, and the stream ends.
        assert_eq!(h.release().as_deref(), Some("3"));
        assert!(kept.closed.get());
        // A relay takes over from it: the count goes on.
        let mut relay = Relay::new(Counted::default());
        let mut m = Vec::new();
        socket::restore("3", &mut m);
        socket::durable(4, "d", &mut m);
        let step = relay.on_message(std::str::from_utf8(&m).unwrap(), 0, 0);
        assert_eq!(String::from_utf8(step.out).unwrap(), "4:d#4;");
        assert!(!step.done);
    }

    #[test]
    fn a_state_its_framer_refuses_ends_the_relay() {
        let mut relay = Relay::new(Counted::default());
        let mut m = Vec::new();
        socket::restore("not a count", &mut m);
        assert!(relay.on_message(std::str::from_utf8(&m).unwrap(), 0, 0).done);
    }

    #[test]
    fn a_feed_still_replaying_does_not_move() {
        let (mut h, _) = held(Rc::new(|| 0), Rc::default());
        h.take(&message(|m| {
            socket::hello(9, 1, 0, m);
            socket::page_end(4, m);
        }));
        assert_eq!(h.release(), None, "it asked for a page: its client resumes from its cursor");
    }

    #[test]
    fn a_client_that_stops_reading_ends_its_stream() {
        let (now, clock) = clock();
        let (mut h, kept) = held(clock, Rc::default());
        h.take(&message(|m| socket::hello(0, 1, 0, m)));
        kept.pending.set(3);
        assert!(h.take(&message(|m| socket::durable(1, "a", m))));
        // Its write is queued behind the others, and none is taken.
        kept.pending.set(4);
        now.set(10_000);
        assert!(!h.take(&message(|m| socket::durable(2, "b", m))), "nothing drained for the stale time");
        assert!(kept.closed.get());
        assert!(!h.tick());
        assert_eq!(h.release(), None);
    }

    /// A pure protocol: each record as its data.
    struct Pure;

    impl Framer for Pure {
        const PURE: bool = true;
        fn durable(&mut self, _seq: u64, data: &str, out: &mut Vec<u8>) {
            out.extend_from_slice(data.as_bytes());
        }
        fn live(&mut self, _data: &str, _out: &mut Vec<u8>) {}
        fn keepalive(&mut self, _now: i64, _random: u64, _out: &mut Vec<u8>) {}
    }

    #[test]
    fn a_pure_protocols_frames_are_made_once_per_message() {
        let frames = Rc::<RefCell<Frames>>::default();
        let mut streams: Vec<(Held<Kept>, Kept)> = (0..3)
            .map(|_| {
                let kept = Kept::default();
                let h = Held::new(Box::new(Relay::new(Pure)), kept.clone(), 100, 1, frames.clone(), Rc::new(|| 0));
                (h, kept)
            })
            .collect();
        for (h, _) in &mut streams {
            h.take(&message(|m| socket::hello(0, 1, 0, m)));
        }
        let one = message(|m| socket::durable(1, "x", m));
        for (h, _) in &mut streams {
            h.take(&one);
        }
        assert!(frames.borrow().get(std::any::type_name::<Pure>(), &one).is_some());
        // Another message of the same bytes is framed again, not mistaken.
        let same_bytes = message(|m| socket::durable(1, "x", m));
        assert!(frames.borrow().get(std::any::type_name::<Pure>(), &same_bytes).is_none());
        for (_, kept) in &streams {
            assert_eq!(kept.out.borrow().as_slice(), b"x");
        }
        // Every stream was handed the one allocation, so a writer can share
        // what it makes of it.
        let first = streams[0].1.shared.borrow()[0].clone();
        for (_, kept) in &streams {
            let shared = kept.shared.borrow();
            assert_eq!(shared.len(), 1);
            assert!(Rc::ptr_eq(&shared[0], &first));
        }
    }
}
