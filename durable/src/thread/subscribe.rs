//! Subscriptions: what each subscriber's socket gets, in the `feed::wire`
//! format the stateless Worker relays to the client (who frames it for its
//! protocol). The object holds no stream, only sockets: between publishes it
//! can sleep, and it finds its subscribers again on waking
//! ([`Thread::resubscribe`]).
//!
//! Invariant (replay then live, no gap, no duplicate): [`Thread::subscribe`]
//! takes the replay window `(after, high]`, the open segments' snapshot, and
//! registers the sink, in one synchronous block: every record above `high`
//! reaches the sink live, every one at or below it is in the window (the
//! hello's first page, then the pages the Worker asks for).

use super::{Sink, Staged, Subscriber, Thread};
use crate::error::ApiError;
use crate::feed::wire;
use crate::store::{Record, RunState, Store};
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
    /// Durable records only (the Durable Streams views): no live events.
    #[serde(default)]
    pub durable: bool,
}

impl Follow {
    pub fn log() -> Follow {
        Follow { run: None, durable: false }
    }

    pub fn run(run: &str) -> Follow {
        Follow { run: Some(run.to_owned()), durable: false }
    }
}

impl<S: Store, K: Sink> Thread<S, K> {
    pub fn subscriber_count(&self) -> usize {
        self.subscribers.len()
    }

    /// Makes room for one more stream: drops subscribers that went away,
    /// then refuses with 429 `too_many_subscribers` at `max`, probing every
    /// subscriber ([`super::PROBE`]) so that those whose client left are
    /// found and leave, and a retry finds the room.
    pub fn make_room(&mut self, max: usize) -> Result<(), ApiError> {
        self.prune_subscribers();
        if self.subscriber_count() >= max {
            for sub in &mut self.subscribers {
                sub.sink.send(Bytes::from_static(super::PROBE));
            }
            return Err(ApiError::too_many_subscribers(max));
        }
        Ok(())
    }

    /// Registers `sink` (as subscriber `id`) for `follow`, having seen
    /// everything up to `after`, and returns the hello to send it first: the
    /// window `(after, last_seq]`, its first page, and (unless it follows
    /// durable records only) the open segments' text so far.
    pub fn subscribe(&mut self, id: u64, follow: Follow, after: u64, sink: K) -> Result<Bytes, ApiError> {
        let high = self.last_seq;
        let gen = crate::protocols::durable_streams::views::stored_generation(&self.store)?.unwrap_or(0);
        let mut out = Vec::new();
        wire::hello(high, gen, after, &mut out);
        // A short first page: the Worker frames a whole message before it
        // writes, so the client's first byte waits for this page only; the
        // pages it asks for next are full ones.
        self.page_into(&follow, after, high, FIRST_PAGE.min(self.config.replay_page), &mut out)?;
        if let Some(run) = &follow.run {
            // Its `run-finish` is stored in the same commit as the state.
            if self.store.run(run).map_err(ApiError::storage)?.is_some_and(|r| r.state != RunState::Running) {
                wire::ended(&mut out);
            }
        }
        if !follow.durable {
            for ev in self.coalescer.snapshots() {
                if follow.run.as_ref().is_none_or(|r| *r == ev.run_id) {
                    wire::snapshot(&ev.to_json(), &mut out);
                }
            }
        }
        self.subscribers.push(Subscriber { id, follow, sink });
        Ok(Bytes::from(out))
    }

    /// Registers a subscriber again after the object slept: its socket and
    /// what it follows outlived the instance; its replay is the Worker's.
    pub fn resubscribe(&mut self, id: u64, follow: Follow, sink: K) {
        self.subscribers.retain(|s| s.id != id);
        self.subscribers.push(Subscriber { id, follow, sink });
    }

    /// The next replay page of `follow`: records in `(after, high]`, and
    /// where the page ends (`high` once nothing more is left up to it).
    pub fn replay_page(&self, follow: &Follow, after: u64, high: u64) -> Result<Bytes, ApiError> {
        let mut out = Vec::new();
        self.page_into(follow, after, high, self.config.replay_page, &mut out)?;
        Ok(Bytes::from(out))
    }

    /// A subscriber's follow, by id.
    pub fn follow_of(&self, id: u64) -> Option<&Follow> {
        self.subscribers.iter().find(|s| s.id == id).map(|s| &s.follow)
    }

    fn page_into(
        &self,
        follow: &Follow,
        after: u64,
        high: u64,
        limit: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), ApiError> {
        let records: Vec<Record> = match &follow.run {
            None => self.store.read_range(after, high, limit),
            Some(run) => {
                self.store.run_range(run, after, limit).map(|r| r.into_iter().filter(|r| r.seq <= high).collect())
            }
        }
        .map_err(ApiError::storage)?;
        for r in &records {
            wire::durable(r.seq, &r.data, out);
        }
        let last = match records.last() {
            Some(r) if records.len() == limit && r.seq < high => r.seq,
            _ => high,
        };
        wire::page_end(last, out);
        Ok(())
    }

    pub fn unsubscribe(&mut self, id: u64) {
        self.subscribers.retain(|s| s.id != id);
    }

    /// Drops subscribers whose receiving side has gone.
    pub fn prune_subscribers(&mut self) {
        self.subscribers.retain(|s| !s.sink.is_closed());
    }

    /// Sends each subscriber this publish's message: the whole `message` to
    /// those that follow the log, and to a run's followers when it holds an
    /// event of that run; `durable` (its stored records only) to those that
    /// follow durable records, when there are any.
    pub(super) fn fan_out(&mut self, staged: &[Staged], message: Bytes, durable: Bytes) {
        if message.is_empty() {
            return;
        }
        self.subscribers.retain_mut(|sub| {
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
