//! Subscriptions: replay then live with no gap and no duplicate, for the
//! thread's log (the events route) and for one run's frames (agora's run
//! streams), and the fan-out of every publish to them.

use super::{RunSubscriber, Sink, Staged, Thread};
use crate::error::ApiError;
use crate::event::Kind;
use crate::runstream::{self, FrameMapper};
use crate::sse::Frame;
use crate::store::Store;
use bytes::Bytes;

/// A subscriber's replay window, taken when it registered.
#[derive(Clone, Debug, PartialEq)]
pub struct Subscription {
    pub id: u64,
    /// Replay records with `after < seq <= high`, page by page.
    pub after: u64,
    pub high: u64,
    /// Sent after the replay: open segments' text so far, as id-less deltas.
    pub snapshot: Bytes,
}

impl<S: Store, K: Sink> Thread<S, K> {
    pub fn subscriber_count(&self) -> usize {
        self.subscribers.len() + self.run_subscribers.len()
    }

    /// Makes room for one more stream: drops subscribers that went away,
    /// then refuses with 429 `too_many_subscribers` at `max`.
    pub fn make_room(&mut self, max: usize) -> Result<(), ApiError> {
        self.prune_subscribers();
        if self.subscriber_count() >= max {
            return Err(ApiError::too_many_subscribers(max));
        }
        Ok(())
    }

    /// Registers a subscriber that has seen everything up to `after`.
    ///
    /// In one synchronous block: note the replay window `(after, last_seq]`,
    /// take the open segments' text so far, and register the sink. Every fact
    /// with a seq above `last_seq` is sent to the sink live, every one at or
    /// below it is in the window: no gap and no duplicate, whatever is
    /// published while the caller pages through the replay.
    pub fn subscribe(&mut self, after: u64, sink: K) -> Subscription {
        let id = self.next_subscriber;
        self.next_subscriber += 1;
        let mut snapshot = Vec::new();
        for ev in self.coalescer.snapshots() {
            Frame::data(&ev.to_json()).encode(&mut snapshot);
        }
        self.subscribers.push((id, sink));
        Subscription { id, after, high: self.last_seq, snapshot: Bytes::from(snapshot) }
    }

    /// The next replay page of a subscription window: SSE bytes and the new
    /// `after`; an empty page ends the replay.
    pub fn replay_page(&self, after: u64, high: u64) -> Result<(Bytes, u64), ApiError> {
        let records = self.store.read_range(after, high, self.config.replay_page).map_err(ApiError::storage)?;
        let mut out = Vec::with_capacity(records.iter().map(|r| r.data.len() + 24).sum());
        let mut last = after;
        for r in &records {
            Frame::data(&r.data).id(r.seq).encode(&mut out);
            last = r.seq;
        }
        Ok((Bytes::from(out), last))
    }

    /// Subscribes to one run's frames (agora's run streams), sending those
    /// numbered above `after`. In one synchronous block: the `meta` frame,
    /// the frames the log and the open segments give so far, then
    /// registration for the rest. Returns the bytes to send first, and the
    /// subscription id, or `None` when the run has ended (the bytes then end
    /// with its terminal frame). 404 `nothing_to_resume` for a run this
    /// thread never had.
    pub fn subscribe_run(&mut self, run_id: &str, after: u64, sink: K) -> Result<(Bytes, Option<u64>), ApiError> {
        let record = self.store.run(run_id).map_err(ApiError::storage)?.ok_or_else(ApiError::nothing_to_resume)?;
        let mut mapper = FrameMapper::new(&record.agent_id);
        let mut out = Vec::new();
        runstream::meta(run_id, &self.thread_id, &mut out);
        let mut finish = None;
        for ev in self.run_events(run_id)? {
            if ev.kind == Kind::RunFinish {
                finish = Some(ev.payload);
                break;
            }
            runstream::encode(&mapper.map(&ev), after, &mut out);
        }
        if let Some(payload) = finish {
            runstream::terminal(&payload, &mut out);
            return Ok((Bytes::from(out), None));
        }
        for snap in self.coalescer.snapshots().iter().filter(|e| e.run_id == run_id) {
            runstream::encode(&mapper.map(snap), after, &mut out);
        }
        let id = self.next_subscriber;
        self.next_subscriber += 1;
        self.run_subscribers.push(RunSubscriber { id, run_id: run_id.to_owned(), mapper, sink });
        Ok((Bytes::from(out), Some(id)))
    }

    pub fn unsubscribe(&mut self, id: u64) {
        self.subscribers.retain(|(sid, _)| *sid != id);
        self.run_subscribers.retain(|s| s.id != id);
    }

    /// Drops subscribers whose receiving side has gone.
    pub fn prune_subscribers(&mut self) {
        self.subscribers.retain(|(_, s)| !s.is_closed());
        self.run_subscribers.retain(|s| !s.sink.is_closed());
    }

    pub(super) fn fan_out(&mut self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        self.subscribers.retain_mut(|(_, sink)| sink.send(chunk.clone()));
    }

    /// Sends each run-stream subscriber its run's new frames, one chunk each;
    /// a `run-finish` ends the stream (its sink is dropped).
    pub(super) fn fan_out_runs(&mut self, staged: &[Staged]) {
        self.run_subscribers.retain_mut(|sub| {
            let mut out = Vec::new();
            let mut finished = false;
            for ev in staged.iter().map(Staged::event) {
                if ev.run_id != sub.run_id || finished {
                    continue;
                }
                if ev.kind == Kind::RunFinish {
                    runstream::terminal(&ev.payload, &mut out);
                    finished = true;
                } else {
                    runstream::encode(&sub.mapper.map(ev), 0, &mut out);
                }
            }
            let alive = out.is_empty() || sub.sink.send(Bytes::from(out));
            alive && !finished
        });
    }
}
