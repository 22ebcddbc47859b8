//! Subscriptions: what each subscriber's socket gets, in the `feed::socket`
//! format the stateless Worker relays to the client (who frames it for its
//! protocol). The object holds no stream, only sockets: between publishes it
//! can sleep, and it finds its subscribers again on waking
//! ([`Subscribers::add`](super::Subscribers::add)).
//!
//! Invariant (replay then live, no gap, no duplicate): [`Thread::subscribe`]
//! takes the replay window `(after, high]`, the open segments' snapshot, and
//! registers the sink, in one synchronous block: every record above `high`
//! reaches the sink live, every one at or below it is in the window (the
//! hello's first page, then the pages the Worker asks for).

use super::error::Error;
use super::{Journal, Sink, Thread};
use crate::storage::store::Store;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// Records in the hello's page (the pages after it hold `replay_page`).
pub const FIRST_PAGE: usize = 128;

/// What a subscriber follows. Stored with its socket (it survives the
/// object's hibernation), so it stays small.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Follow {
    /// `None`: the thread's log; `Some(run)`: one run's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Durable records only (readers of stored positions): no live events.
    #[serde(default)]
    pub durable: bool,
    /// The actor following a thread that did not exist yet
    /// ([`crate::access::Grant::Prospect`]): the follow ends if another
    /// actor creates the thread ([`Thread::claimed_by`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prospect: Option<String>,
    /// A stream that never moves to the object: a one-shot read (a
    /// long-poll), or a protocol whose feed does not carry its state over
    /// (`feed::Framer::MOVES`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stays: bool,
}

impl Follow {
    pub fn log() -> Follow {
        Follow { run: None, durable: false, prospect: None, stays: false }
    }

    pub fn run(run: &str) -> Follow {
        Follow { run: Some(run.to_owned()), durable: false, prospect: None, stays: false }
    }
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// Registers `sink` (as subscriber `id`) for `follow`, having seen
    /// everything up to `after`, and returns the hello to send it first
    /// ([`Journal::subscribe`](super::Journal::subscribe)): its replay's
    /// first page, the active run's state for a client joining the log
    /// ([`RunLock::snapshot`](super::RunLock::snapshot)), and the open segments' text so far.
    pub fn subscribe(&mut self, id: u64, follow: Follow, after: u64, sink: K) -> Result<Bytes, Error> {
        let sync = self
            .runs
            .snapshot(self.journal.open_segments())
            .map(|state| serde_json::to_string(&state).expect("a run state serialises"));
        self.journal.subscribe(id, follow, after, sink, self.config.replay_page, sync)
    }

    /// The journal: the log's store, counter, open segments and
    /// subscribers, to read.
    pub fn journal(&self) -> &Journal<S, K> {
        &self.journal
    }

    /// The journal, to reach its subscribers and the store's writes that
    /// are not the log (the shell's, the tests').
    pub fn journal_mut(&mut self) -> &mut Journal<S, K> {
        &mut self.journal
    }
}

#[cfg(test)]
mod tests {
    use crate::storage::store::MemoryStore;
    use crate::thread::{Discard, Thread};

    #[test]
    fn the_generation_is_drawn_once_and_stored() {
        let mut t: Thread<MemoryStore, Discard> = Thread::load(MemoryStore::default(), Default::default(), 0).unwrap();
        assert_eq!(t.conversation().stored_generation().unwrap(), None);
        assert_eq!(t.journal_mut().generation(|| 41).unwrap(), 42);
        assert_eq!(t.journal_mut().generation(|| 7).unwrap(), 42);
        // Deleting the log (its meta) draws another.
        t.journal_mut().store_mut().meta.clear();
        assert_eq!(t.journal_mut().generation(|| 7).unwrap(), 8);
    }
}
