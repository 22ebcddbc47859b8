//! The thread's subscribers: each socket the Worker relays to a client,
//! with what it follows. This part owns the list and its rules: who gets
//! which part of a publish, when a subscriber is gone, how many there may
//! be, and whose follows end when the thread gets an owner. It holds no
//! log: what a new subscriber is sent first is `subscribe.rs`'s.

use super::error::Error;
use super::{Follow, Sink, Staged};
use bytes::Bytes;

struct Subscriber<K> {
    id: u64,
    follow: Follow,
    sink: K,
}

/// Every subscriber of one thread.
pub struct Subscribers<K> {
    list: Vec<Subscriber<K>>,
}

impl<K> Default for Subscribers<K> {
    fn default() -> Self {
        Subscribers { list: Vec::new() }
    }
}

impl<K: Sink> Subscribers<K> {
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// How many streams the object writes itself.
    pub fn held(&self) -> usize {
        self.list.iter().filter(|s| s.sink.is_held()).count()
    }

    /// How many streams are moving (not claimed yet).
    pub fn moving(&self) -> usize {
        self.list.iter().filter(|s| s.sink.is_moving()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Registers `sink` as subscriber `id`, replacing one of that id (a
    /// socket found again after the object slept).
    pub fn add(&mut self, id: u64, follow: Follow, sink: K) {
        self.list.retain(|s| s.id != id);
        self.list.push(Subscriber { id, follow, sink });
    }

    pub fn remove(&mut self, id: u64) {
        self.list.retain(|s| s.id != id);
    }

    /// Each subscriber: its id, what it follows, what reaches it.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &Follow, &K)> {
        self.list.iter().map(|s| (s.id, &s.follow, &s.sink))
    }

    /// Each subscriber, to change what reaches it.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (u64, &Follow, &mut K)> {
        self.list.iter_mut().map(|s| (s.id, &s.follow, &mut s.sink))
    }

    /// Keeps the subscribers `keep` says to, in order.
    pub(super) fn retain_mut(&mut self, mut keep: impl FnMut(u64, &Follow, &mut K) -> bool) {
        self.list.retain_mut(|s| keep(s.id, &s.follow, &mut s.sink));
    }

    /// Unregisters subscriber `id`, giving back what reached it.
    pub(super) fn take(&mut self, id: u64) -> Option<K> {
        let at = self.list.iter().position(|s| s.id == id)?;
        Some(self.list.remove(at).sink)
    }

    /// Drops subscribers whose receiving side has gone.
    pub fn prune(&mut self) {
        self.list.retain(|s| !s.sink.is_closed());
    }

    /// Makes room for one more stream: drops subscribers that went away,
    /// then refuses with 429 `too_many_subscribers` at `max`, probing every
    /// subscriber ([`super::PROBE`]) so that those whose client left are
    /// found and leave, and a retry finds the room.
    pub fn make_room(&mut self, max: usize) -> Result<(), Error> {
        self.prune();
        if self.list.len() >= max {
            for sub in &mut self.list {
                sub.sink.send(Bytes::from_static(super::PROBE));
            }
            return Err(Error::TooManySubscribers { max });
        }
        Ok(())
    }

    /// The thread became `actor`'s: every follow of it from before it
    /// existed that another actor made ends (their ids: the shell ends their
    /// streams), and `actor`'s own are now the owner's.
    pub(super) fn claimed_by(&mut self, actor: &str) -> Vec<u64> {
        let mut ended = Vec::new();
        self.list.retain_mut(|sub| match sub.follow.prospect.as_deref() {
            Some(a) if a == actor => {
                sub.follow.prospect = None;
                true
            }
            Some(_) => {
                ended.push(sub.id);
                false
            }
            None => true,
        });
        ended
    }

    /// Sends each subscriber this publish's message: the whole `message` to
    /// those that follow the log, and to a run's followers when it holds an
    /// event of that run; `durable` (its stored records only) to those that
    /// follow durable records, when there are any. A subscriber whose sink
    /// refuses is dropped.
    pub(super) fn fan_out(&mut self, staged: &[Staged], message: Bytes, durable: Bytes) {
        if message.is_empty() {
            return;
        }
        self.list.retain_mut(|sub| {
            if let Some(run) = &sub.follow.run {
                if !staged.iter().any(|s| s.event().run_id == *run) {
                    return true;
                }
            }
            let chunk = if sub.follow.durable { &durable } else { &message };
            chunk.is_empty() || sub.sink.send(chunk.clone())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::event::{Event, Kind};
    use serde_json::json;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A sink that keeps what it gets, and can be closed from outside.
    #[derive(Clone, Default)]
    struct Kept {
        got: Rc<RefCell<Vec<Bytes>>>,
        closed: Rc<RefCell<bool>>,
    }

    impl Sink for Kept {
        fn send(&mut self, message: Bytes) -> bool {
            self.got.borrow_mut().push(message);
            !*self.closed.borrow()
        }

        fn is_closed(&self) -> bool {
            *self.closed.borrow()
        }
    }

    fn staged(run: &str) -> Vec<Staged> {
        let ev = Event::from_json(Kind::Status, run, "o", 0, json!({"message": "x"})).unwrap();
        vec![Staged::Live(ev)]
    }

    #[test]
    fn each_follower_gets_its_part_and_a_refusing_sink_leaves() {
        let (log, run, other, durable) = (Kept::default(), Kept::default(), Kept::default(), Kept::default());
        let mut subs = Subscribers::default();
        subs.add(1, Follow::log(), log.clone());
        subs.add(2, Follow::run("r1"), run.clone());
        subs.add(3, Follow::run("r2"), other.clone());
        subs.add(4, Follow { run: None, durable: true, prospect: None, stays: false }, durable.clone());
        subs.fan_out(&staged("r1"), Bytes::from_static(b"all"), Bytes::new());
        assert_eq!(log.got.borrow().as_slice(), [Bytes::from_static(b"all")]);
        assert_eq!(run.got.borrow().len(), 1, "a run's follower gets a message holding its run");
        assert!(other.got.borrow().is_empty(), "another run's follower gets nothing");
        assert!(durable.got.borrow().is_empty(), "nothing stored: nothing for a durable follower");
        // A sink that refuses is dropped; one of the same id replaces it.
        *log.closed.borrow_mut() = true;
        subs.fan_out(&staged("r1"), Bytes::from_static(b"more"), Bytes::from_static(b"stored"));
        assert_eq!(durable.got.borrow().as_slice(), [Bytes::from_static(b"stored")]);
        assert_eq!(subs.len(), 3);
        subs.add(2, Follow::log(), Kept::default());
        assert_eq!(subs.len(), 3);
    }

    #[test]
    fn room_is_made_by_probing_and_a_claim_ends_other_prospects() {
        let (a, b) = (Kept::default(), Kept::default());
        let mut subs = Subscribers::default();
        let prospect = |who: &str| Follow { run: None, durable: false, prospect: Some(who.to_owned()), stays: false };
        subs.add(1, prospect("ann"), a.clone());
        subs.add(2, prospect("bob"), b.clone());
        let err = subs.make_room(2).unwrap_err();
        assert!(matches!(err, super::Error::TooManySubscribers { max: 2 }), "{err:?}");
        assert_eq!(a.got.borrow().as_slice(), [Bytes::from_static(super::super::PROBE)]);
        *b.closed.borrow_mut() = true;
        assert!(subs.make_room(2).is_ok(), "a gone subscriber is pruned");
        subs.add(2, prospect("bob"), Kept::default());
        assert_eq!(subs.claimed_by("ann"), [2]);
        assert_eq!(subs.len(), 1);
    }
}
