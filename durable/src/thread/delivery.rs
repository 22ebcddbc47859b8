//! How a subscriber is reached: a hibernatable socket the Worker relays
//! (between runs: the object may sleep), a stream the object writes itself
//! (during a run: no JavaScript per message in the Worker,
//! [`crate::feed::held`]), or, for the moment between the two, a list of
//! what it has missed.
//!
//! Invariants, enforced here and in [`Subscribers`]:
//! - a subscriber is one entry under one id whatever reaches it, so it gets
//!   each publish once, in order, through whichever is current;
//! - a held stream is handed over only at a frame boundary (between two
//!   messages) and only live; what is published after it is kept
//!   ([`Delivery::Moving`]) until its socket is claimed, and sent there
//!   right after the feed's state, in order;
//! - a claim that never comes (the Worker went, the object slept) loses
//!   nothing: the client's stream ends and it resumes from its cursor.

use super::error::Error;
use super::{Follow, Sink, Subscribers, Thread};
use crate::feed::held::{Held, Writer};
use crate::storage::store::Store;
use bytes::Bytes;

/// Most a moving subscriber keeps for its claim; past it the claim is
/// refused (its client resumes from its cursor).
pub const MOVING_MAX_BYTES: usize = 8 << 20;

/// How long a hand-over waits for its claim.
pub const MOVING_MAX_MS: i64 = 30_000;

/// What reaches one subscriber.
pub enum Delivery<S, W: Writer> {
    /// A hibernatable socket the Worker relays.
    Socket(S),
    /// A stream the object writes, and the ticket (secret, known to the
    /// Worker that holds the client's end) its socket will be claimed
    /// with when the run ends.
    Held(Held<W>, String),
    /// Handed over, not yet claimed: the feed's state, and the messages
    /// since; and the held stream it was, ended, while its client's side
    /// may still cancel it (the client left before reading the end: no
    /// claim will come, and it leaves at once rather than after
    /// [`MOVING_MAX_MS`]).
    Moving(Moving, Option<Held<W>>),
}

/// A stream between two ways of reaching its subscriber.
pub struct Moving {
    ticket: String,
    /// A held stream's feed state, for the socket that takes over (`None`:
    /// a socket's stream moving to the object; its relay has the state).
    state: Option<String>,
    kept: Vec<Bytes>,
    size: usize,
    since: i64,
}

impl Moving {
    fn new(ticket: String, state: Option<String>, now: i64) -> Moving {
        Moving { ticket, state, kept: Vec::new(), size: 0, since: now }
    }
}

/// A claimed stream: where it goes next, and what it is sent first, in
/// order.
#[derive(Debug)]
pub struct Claimed {
    pub id: u64,
    pub follow: Follow,
    pub to: ClaimedTo,
}

/// Where a claimed stream goes.
#[derive(Debug)]
pub enum ClaimedTo {
    /// A socket the Worker relays, sent these messages first (a held
    /// stream's feed state, `socket::Line::Restore`, then what was kept).
    Socket(Vec<Bytes>),
    /// A stream the object holds: its feed takes over the relay's state,
    /// and is given what was kept.
    Held { state: String, kept: Vec<Bytes> },
}

impl<S: Sink, W: Writer> Sink for Delivery<S, W> {
    fn send(&mut self, message: Bytes) -> bool {
        match self {
            Delivery::Socket(s) => s.send(message),
            Delivery::Held(h, _) => h.take(&message),
            Delivery::Moving(m, _) => {
                m.size += message.len();
                m.kept.push(message);
                m.size <= MOVING_MAX_BYTES
            }
        }
    }

    fn is_closed(&self) -> bool {
        match self {
            Delivery::Socket(s) => s.is_closed(),
            Delivery::Held(h, _) => h.is_ended(),
            Delivery::Moving(_, held) => held.as_ref().is_some_and(Held::reader_left),
        }
    }

    fn is_held(&self) -> bool {
        matches!(self, Delivery::Held(..))
    }

    fn is_moving(&self) -> bool {
        matches!(self, Delivery::Moving(..))
    }
}

impl<S: Sink, W: Writer> Subscribers<Delivery<S, W>> {
    /// Whether any stream is held (the object writes it).
    pub fn holds(&self) -> bool {
        self.held() > 0
    }

    /// The hand-over: every held stream's feed state is taken and its stream
    /// ends; each becomes [`Delivery::Moving`] under its ticket (keeping the
    /// ended stream, to learn if its client leaves before claiming), or
    /// leaves when its protocol does not move or its client already left.
    /// Returns how many moved.
    pub fn hand_over(&mut self, now: i64) -> usize {
        let mut moved = 0;
        self.retain_mut(|_, _, d| {
            let Delivery::Held(held, ticket) = d else { return true };
            let Some(state) = held.release() else { return false };
            moved += 1;
            let moving = Moving::new(std::mem::take(ticket), Some(state), now);
            if let Delivery::Held(ended, _) = std::mem::replace(d, Delivery::Moving(moving, None)) {
                if let Delivery::Moving(_, left) = d {
                    *left = Some(ended);
                }
            }
            true
        });
        moved
    }

    /// The promotion: every socket is sent the move line with a ticket of
    /// `ticket`'s (its relay claims the stream with it, at that frame
    /// boundary) and becomes [`Delivery::Moving`]; a socket that refuses
    /// leaves. Returns how many move.
    pub fn promote(&mut self, mut ticket: impl FnMut() -> String, now: i64) -> usize {
        let mut moved = 0;
        self.retain_mut(|_, follow, d| {
            let Delivery::Socket(socket) = d else { return true };
            if follow.stays {
                return true;
            }
            let ticket = ticket();
            if !socket.send(Bytes::from(crate::feed::socket::moving(&ticket))) {
                return false;
            }
            moved += 1;
            *d = Delivery::Moving(Moving::new(ticket, None, now), None);
            true
        });
        moved
    }

    /// Whether any subscriber is a socket that may move.
    pub fn has_sockets(&self) -> bool {
        self.iter().any(|(_, follow, d)| !follow.stays && matches!(d, Delivery::Socket(_)))
    }

    /// Subscriber `id`'s socket closed: it leaves if the socket still
    /// reached it, or if its relay was asked to move it and closed without
    /// `moved` (the client went first: no claim will come). A stream that
    /// moved on is not the socket's to end.
    pub fn socket_closed(&mut self, id: u64, moved: bool) {
        self.retain_mut(|i, _, d| {
            i != id
                || match d {
                    Delivery::Socket(_) => false,
                    Delivery::Moving(m, _) => moved || m.state.is_some(),
                    Delivery::Held(..) => true,
                }
        });
    }

    /// Takes the moving subscriber of `ticket` (`None`: no such move, or it
    /// waited too long); moves unclaimed for [`MOVING_MAX_MS`] leave. A
    /// socket's stream goes to the object when `hold` (a run keeps it
    /// awake) and its relay gave its feed's state; else to a socket again.
    fn claim(&mut self, ticket: &str, relay_state: Option<&str>, hold: bool, now: i64) -> Option<Claimed> {
        self.expire_moves(now);
        let (id, follow) = self
            .iter()
            .find(|(_, _, d)| matches!(d, Delivery::Moving(m, _) if m.ticket == ticket))
            .map(|(id, follow, _)| (id, follow.clone()))?;
        let Delivery::Moving(m, _) = self.take(id)? else { return None };
        let to = match (m.state, relay_state) {
            (Some(state), _) => {
                let mut first = Vec::new();
                crate::feed::socket::restore(&state, &mut first);
                ClaimedTo::Socket(std::iter::once(Bytes::from(first)).chain(m.kept).collect())
            }
            (None, Some(state)) if hold => ClaimedTo::Held { state: state.to_owned(), kept: m.kept },
            (None, _) => ClaimedTo::Socket(m.kept),
        };
        Some(Claimed { id, follow, to })
    }

    /// Moves unclaimed for [`MOVING_MAX_MS`] leave: their Worker went, or
    /// its claim came too late.
    fn expire_moves(&mut self, now: i64) {
        self.retain_mut(|_, _, d| !matches!(d, Delivery::Moving(m, _) if now - m.since > MOVING_MAX_MS));
    }

    /// Keep-alives for the held streams that have been quiet; the ended
    /// ones leave. Whether any is still held.
    pub fn tick_held(&mut self) -> bool {
        self.retain_mut(|_, _, d| match d {
            Delivery::Held(h, _) => h.tick(),
            _ => true,
        });
        self.holds()
    }

    /// The held streams that asked for a replay page: `(id, follow, after,
    /// high)`.
    pub fn wanted_pages(&mut self) -> Vec<(u64, Follow, u64, u64)> {
        let mut wanted = Vec::new();
        for (id, follow, d) in self.iter_mut() {
            if let Delivery::Held(h, _) = d {
                if let Some((after, high)) = h.wanted_page() {
                    wanted.push((id, follow.clone(), after, high));
                }
            }
        }
        wanted
    }

    /// Gives subscriber `id` one message (a replay page it asked for).
    pub fn send_to(&mut self, id: u64, message: Bytes) {
        self.retain_mut(|i, _, d| i != id || d.send(message.clone()));
    }
}

/// An agent's run that has published nothing for this long no longer
/// keeps its held streams: they move to sockets, and the object may sleep
/// until the next publish.
pub const QUIET_MS: i64 = 2_000;

impl<S: Store, K: Sink> Thread<S, K> {
    /// Whether a stream opened at `now` is held by the object: a run keeps
    /// it awake anyway ([`RunLock::keeps_awake`](super::RunLock::keeps_awake)).
    pub fn holds_streams(&self, now: i64) -> bool {
        self.runs.keeps_awake(now, QUIET_MS)
    }
}

impl<S: Store, D: Sink, W: Writer> Thread<S, Delivery<D, W>> {
    /// What the object does after each event it handled, and on its
    /// keep-alive ticks: once no run keeps it awake (the run ended, or its
    /// agent went quiet), its held streams move to sockets so that it can
    /// sleep ([`Subscribers::hand_over`]). Returns how many moved.
    ///
    /// The other way, while a run is busy
    /// ([`RunLock::busy`](super::RunLock::busy)), the streams its sockets
    /// carry move to it ([`Subscribers::promote`]): their relays claim them.
    /// A single publish after a quiet spell moves nothing: each move is a
    /// request, and the streams would move back after [`QUIET_MS`].
    pub fn settle(&mut self, now: i64) -> usize {
        let subscribers = self.journal.subscribers();
        subscribers.expire_moves(now);
        if self.runs.keeps_awake(now, QUIET_MS) {
            if !self.runs.busy(now, QUIET_MS) || !subscribers.has_sockets() {
                return 0;
            }
            let ids = self.ids.clone();
            return subscribers.promote(|| ids.token(), now);
        }
        if !subscribers.holds() {
            return 0;
        }
        subscribers.hand_over(now)
    }

    /// A stream's claim, by the ticket its move was given, with the state
    /// of the relay that claims it (a socket's stream moving to the
    /// object). `None`: no stream waits for this claim.
    pub fn claim_stream(&mut self, ticket: &str, relay_state: Option<&str>, now: i64) -> Option<Claimed> {
        let hold = self.holds_streams(now);
        self.journal.subscribers().claim(ticket, relay_state, hold, now)
    }

    /// A new held stream's ticket (a bearer secret: whoever holds it may
    /// claim the stream's socket).
    pub fn held_ticket(&self) -> String {
        self.ids.token()
    }

    /// Serves the replay pages held streams asked for, one page each;
    /// whether any asked (more may follow: the object yields between
    /// pages, as a relay's round trip would).
    pub fn serve_held_pages(&mut self) -> Result<bool, Error> {
        let wanted = self.journal.subscribers().wanted_pages();
        for (id, follow, after, high) in &wanted {
            let page = self.journal.replay_page(follow, *after, *high, self.config.replay_page)?;
            self.journal.subscribers().send_to(*id, page);
        }
        Ok(!wanted.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::held::tests::Kept;
    use crate::feed::socket;
    use crate::feed::{Framer, Relay};
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A socket that keeps its messages.
    #[derive(Clone, Default)]
    struct Socket(Rc<RefCell<Vec<Bytes>>>);

    impl Sink for Socket {
        fn send(&mut self, message: Bytes) -> bool {
            self.0.borrow_mut().push(message);
            true
        }
        fn is_closed(&self) -> bool {
            false
        }
    }

    /// Each record as `<seq>;`, a count carried across moves.
    #[derive(Default)]
    struct Seqs(u64);

    impl Framer for Seqs {
        fn durable(&mut self, seq: u64, _data: &str, out: &mut Vec<u8>) {
            self.0 += 1;
            out.extend_from_slice(format!("{seq}#{};", self.0).as_bytes());
        }
        fn live(&mut self, _data: &str, _out: &mut Vec<u8>) {}
        fn keepalive(&mut self, _now: i64, _random: u64, _out: &mut Vec<u8>) {}
        fn save(&self) -> Option<String> {
            Some(self.0.to_string())
        }
        fn restore(&mut self, state: &str) -> bool {
            state.parse().map(|n| self.0 = n).is_ok()
        }
    }

    type D = Delivery<Socket, Kept>;

    fn held(kept: &Kept) -> Held<Kept> {
        Held::new(Box::new(Relay::new(Seqs::default())), kept.clone(), 1_000, 1, Rc::default(), Rc::new(|| 0))
    }

    fn record(seq: u64) -> Bytes {
        let mut m = Vec::new();
        socket::durable(seq, "{}", &mut m);
        Bytes::from(m)
    }

    fn hello() -> Bytes {
        let mut m = Vec::new();
        socket::hello(0, 1, 0, &mut m);
        Bytes::from(m)
    }

    /// A relay's frames for the messages a socket got.
    fn relayed(relay: &mut Relay<Seqs>, got: &[Bytes]) -> String {
        let mut out = String::new();
        for m in got {
            out += &String::from_utf8(relay.on_message(std::str::from_utf8(m).unwrap(), 0, 0).out).unwrap();
        }
        out
    }

    #[test]
    fn held_then_handed_over_then_claimed_goes_on_where_it_stopped() {
        let kept = Kept::default();
        let mut subs = Subscribers::<D>::default();
        subs.add(7, Follow::log(), Delivery::Held(held(&kept), "t1".into()));
        subs.send_to(7, hello());
        subs.fan_out(&[], record(1), Bytes::new());
        assert_eq!(subs.held(), 1);
        assert_eq!(subs.hand_over(100), 1);
        assert!(kept.closed.get(), "the held stream ended");
        // Published before the claim: kept for it.
        subs.fan_out(&[], record(2), Bytes::new());
        assert!(subs.claim("nope", None, false, 200).is_none());
        let Claimed { id, follow, to: ClaimedTo::Socket(first) } = subs.claim("t1", None, false, 200).unwrap() else {
            panic!("a held stream's claim is a socket")
        };
        assert_eq!((id, follow), (7, Follow::log()));
        assert!(subs.claim("t1", None, false, 200).is_none(), "claimed once");
        let mut relay = Relay::new(Seqs::default());
        assert_eq!(String::from_utf8(kept.out.borrow().clone()).unwrap(), "1#1;");
        assert_eq!(relayed(&mut relay, &first), "2#2;", "the count goes on from the object's");
    }

    #[test]
    fn a_socket_promoted_is_claimed_as_held_with_its_relays_state_or_stays_a_socket() {
        let socket = Socket::default();
        let mut subs = Subscribers::<D>::default();
        subs.add(3, Follow::log(), Delivery::Socket(socket.clone()));
        let stays = Socket::default();
        let once = Follow { stays: true, ..Follow::log() };
        subs.add(4, once, Delivery::Socket(stays.clone()));
        let mut tickets = vec!["m2".to_owned(), "m1".to_owned()];
        assert_eq!(subs.promote(|| tickets.pop().unwrap(), 0), 1, "a long-poll stays");
        assert_eq!(socket.0.borrow().last().unwrap().as_ref(), b"M m1\n");
        assert!(stays.0.borrow().is_empty());
        subs.fan_out(&[], record(5), Bytes::new());
        assert_eq!(socket.0.borrow().len(), 1, "nothing more on the socket once it moves");
        let c = subs.claim("m1", Some("4"), true, 10).unwrap();
        let ClaimedTo::Held { state, kept } = c.to else { panic!("held") };
        assert_eq!((state.as_str(), kept), ("4", vec![record(5)]));
        // Without a run to hold it, or a state, a move goes back to a socket.
        let mut subs = Subscribers::<D>::default();
        subs.add(3, Follow::log(), Delivery::Socket(Socket::default()));
        let mut n = 0;
        subs.promote(
            || {
                n += 1;
                format!("m{n}")
            },
            0,
        );
        let c = subs.claim("m1", Some("4"), false, 10).unwrap();
        assert!(matches!(c.to, ClaimedTo::Socket(ref m) if m.is_empty()));
    }

    #[test]
    fn an_unclaimed_move_expires_and_a_socket_close_spares_a_moved_stream() {
        let mut subs = Subscribers::<D>::default();
        subs.add(1, Follow::log(), Delivery::Socket(Socket::default()));
        subs.promote(|| "m".into(), 0);
        subs.socket_closed(1, true);
        assert_eq!(subs.len(), 1, "the old socket's close leaves the moving stream");
        assert!(subs.claim("m", None, false, MOVING_MAX_MS + 1).is_none());
        assert!(subs.is_empty(), "expired");
        // A relay whose client left before it could claim closes its socket
        // as gone: the move leaves at once.
        subs.add(2, Follow::log(), Delivery::Socket(Socket::default()));
        subs.promote(|| "m2".into(), 0);
        subs.socket_closed(2, false);
        assert!(subs.is_empty());
    }

    #[test]
    fn a_held_stream_whose_client_leaves_around_its_hand_over_frees_its_place_at_once() {
        // Left before the hand-over: nothing to move.
        let kept = Kept::default();
        let mut subs = Subscribers::<D>::default();
        subs.add(1, Follow::log(), Delivery::Held(held(&kept), "t1".into()));
        subs.send_to(1, hello());
        kept.gone.set(true);
        assert_eq!(subs.hand_over(0), 0);
        assert!(subs.is_empty());
        // Left after it, before reading the end: no claim will come.
        let (read, left) = (Kept::default(), Kept::default());
        subs.add(2, Follow::log(), Delivery::Held(held(&read), "t2".into()));
        subs.add(3, Follow::log(), Delivery::Held(held(&left), "t3".into()));
        subs.send_to(2, hello());
        subs.send_to(3, hello());
        assert_eq!(subs.hand_over(0), 2);
        assert!(read.closed.get() && left.closed.get());
        subs.make_room(3).unwrap();
        assert_eq!((subs.len(), subs.moving()), (2, 2), "both wait for their claims");
        left.gone.set(true);
        subs.make_room(3).unwrap();
        assert_eq!(subs.len(), 1, "its place is free");
        assert!(subs.claim("t3", None, false, 1).is_none());
        assert!(subs.claim("t2", None, false, 1).is_some(), "a stream read to its end is claimed");
    }

    #[test]
    fn a_moving_stream_that_misses_too_much_leaves() {
        let mut subs = Subscribers::<D>::default();
        subs.add(1, Follow::log(), Delivery::Socket(Socket::default()));
        subs.promote(|| "m".into(), 0);
        let big = Bytes::from(vec![b'x'; MOVING_MAX_BYTES / 2 + 1]);
        subs.fan_out(&[], big.clone(), Bytes::new());
        assert_eq!(subs.len(), 1);
        subs.fan_out(&[], big, Bytes::new());
        assert!(subs.is_empty(), "its client resumes from its cursor");
    }
}
