//! The thread's journal: its store, its sequence counter, the text segments
//! still open and its subscribers. Events become the log here, and only
//! here.
//!
//! Invariants enforced here:
//! - Persist, then fan out: a durable fact is sent to a subscriber only once
//!   it is stored, in the same synchronous block ([`Journal::append`]); a
//!   commit that fails sends nothing.
//! - Seqs are contiguous: `last_seq` moves only with a commit that stored
//!   every seq up to it.
//! - Replay, then live: a subscriber's hello (its replay's first page, the
//!   open segments so far) is built and the subscriber registered in one
//!   block ([`Journal::subscribe`]), so nothing published can fall between
//!   them.

use super::conversation::{self, Conversation};
use super::error::Error;
use super::run_lock::RunLock;
use super::stored_files::Files;
use super::subscribe::{Follow, FIRST_PAGE};
use super::subscribers::Subscribers;
use super::{Sink, Staged};
use crate::agent::BackgroundTask;
use crate::feed::socket;
use crate::log::coalesce::Coalescer;
use crate::log::event::{self, Class, Event, Kind, Payload};
use crate::log::queued::Queue;
use crate::log::reducer::TreeBuilder;
use crate::storage::store::{Record, RunRecord, RunState, Store, StoreError};
use bytes::Bytes;

pub struct Journal<S: Store, K: Sink> {
    store: S,
    thread_id: String,
    last_seq: u64,
    coalescer: Coalescer,
    /// Every subscriber (a socket the Worker relays to a client), with what
    /// it follows.
    subscribers: Subscribers<K>,
    /// When the log last grew (ms): a thread idle past its TTL is deleted.
    last_write_at: i64,
    /// The conversation's tree as last read.
    trees: super::tree::TreeCache,
    /// What the log's last commits changed of the thread's inbox state
    /// (`thread/inbox.rs`).
    pub(super) marks: Marks,
}

/// What committed events changed of what a thread reports to its inbox:
/// set by [`Journal::append`] once stored, taken by the next report.
#[derive(Debug, Default)]
pub struct Marks {
    /// A run started or ended, a request for a person was made or settled,
    /// the queue, title or branch changed.
    pub changed: bool,
    /// The last event worth a person's reading: a run's end, a request.
    pub answer_id: u64,
    /// The last run that ended: its id, status and time.
    pub finished: Option<(String, event::FinishStatus, i64)>,
    /// What the deployer's webhooks may want to hear of, in log order.
    pub notices: Vec<crate::notify::Notice>,
}

impl<S: Store, K: Sink> Journal<S, K> {
    /// Opens the journal over `store`: its last seq, and when it last grew
    /// (`now` for an empty one).
    pub(super) fn open(store: S, now: i64) -> Result<Self, Error> {
        let last_seq = store.last_seq()?;
        let mut last_write_at = now;
        if let Some(last) = store.read_range(last_seq.saturating_sub(1), last_seq, 1)?.first() {
            if let Ok(ev) = serde_json::from_str::<Event>(&last.data) {
                last_write_at = ev.ts;
            }
        }
        Ok(Journal {
            store,
            thread_id: String::new(),
            last_seq,
            coalescer: Coalescer::default(),
            subscribers: Subscribers::default(),
            last_write_at,
            trees: Default::default(),
            marks: Marks::default(),
        })
    }

    /// The store, to read.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The store, to write what is not the log (confirmations, files,
    /// charges, meta): the log itself grows through [`Journal::append`].
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// The store to write and the thread's id, borrowed together.
    pub(super) fn store_and_id(&mut self) -> (&mut S, &str) {
        (&mut self.store, &self.thread_id)
    }

    /// `GET .../debug/stats` (with `DEBUG_ROUTES`): the last id, rows
    /// written since the store opened, subscribers (and of them those whose
    /// stream the object holds, and those moving), unstored delta bytes,
    /// the files the thread holds, and the object's instance as its shell
    /// reports it.
    pub fn stats(&mut self, instance: &super::serve::Instance) -> serde_json::Value {
        self.subscribers.prune();
        serde_json::json!({
            "lastEventId": self.last_seq,
            "rowsWritten": self.store.rows_written(),
            "subscribers": self.subscribers.len(),
            "held": self.subscribers.held(),
            "moving": self.subscribers.moving(),
            "bufferedBytes": self.buffered_bytes(),
            "files": self.store.file_count().unwrap_or(0),
            "rows": self.store.table_rows().unwrap_or_default(),
            "instance": instance,
        })
    }

    pub fn thread_id(&self) -> &str {
        &self.thread_id
    }

    /// The thread's id, as the Worker routed it (request ids embed it).
    pub fn set_thread_id(&mut self, thread_id: &str) {
        if self.thread_id != thread_id {
            self.thread_id = thread_id.to_owned();
        }
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Whether the log grew past `seq` while the thread has subscribers
    /// (any of them may have been sent it; one following another branch
    /// was not, and is counted all the same): what the answer to the
    /// request that appended waits a turn for.
    ///
    /// The runtime sends what an object wrote to its streams and sockets
    /// only once the turn that wrote it ends, so what the object does after
    /// in that turn (its answer, its effects) delays every delivery; a yield
    /// to the next turn takes them off the delivery's path, for about a
    /// tenth of a one-event publish's CPU, which with no subscriber buys
    /// nothing (`docs/performance.md`).
    pub fn delivered_after(&self, seq: u64) -> bool {
        self.last_seq > seq && !self.subscribers.is_empty()
    }

    /// When the log last grew (ms).
    pub fn last_write_at(&self) -> i64 {
        self.last_write_at
    }

    /// The conversation as it stands, with `queue` as the thread holds it.
    pub(super) fn conversation<'t>(&'t self, queue: &'t Queue) -> Conversation<'t, S> {
        Conversation::new(&self.store, &self.thread_id, self.last_seq, queue).with_trees(&self.trees)
    }

    /// The thread's files, to read.
    pub fn files(&self) -> Files<'_, &S> {
        Files::new(&self.store, &self.thread_id)
    }

    /// The thread's files, to change.
    pub fn files_mut(&mut self) -> Files<'_, &mut S> {
        Files::new(&mut self.store, &self.thread_id)
    }

    /// The log's generation, drawn from `draw` if none was
    /// ([`super::meta::generation`]).
    pub fn generation(&mut self, draw: impl FnOnce() -> u64) -> Result<u64, Error> {
        super::meta::generation(&mut self.store, draw)
    }

    /// Its subscribers: register one again after the object slept
    /// (`add`), drop one (`remove`), count them.
    pub fn subscribers(&mut self) -> &mut Subscribers<K> {
        &mut self.subscribers
    }

    /// The text of every segment still open and not yet stored: one id-less
    /// delta each, holding the segment's whole text so far and
    /// `snapshot: true`.
    pub fn open_segments(&self) -> Vec<Event> {
        self.coalescer.snapshots()
    }

    /// Bytes of delta text held in memory, not yet stored.
    pub fn buffered_bytes(&self) -> usize {
        self.coalescer.buffered_bytes()
    }

    /// When the next idle flush is due, if any text is unstored.
    pub fn flush_deadline(&self) -> Option<i64> {
        self.coalescer.next_idle_deadline()
    }

    /// Puts events in log order, with the blocks of text segments where a
    /// reader's timeline needs them.
    ///
    /// The active run is folded as it goes (`live`: the run and its tree),
    /// so the thread knows what a client's reducer does: a delta joins its
    /// segment or starts one (closing the agent's others); a durable fact
    /// first flushes its agent's segments, and ends every segment whose
    /// agent's timeline it extends. A run's end leaves the segments of its
    /// `background` agents open: they go on.
    pub(super) fn stage(
        &mut self,
        events: Vec<Event>,
        live_tree: &mut Option<(String, TreeBuilder)>,
        background: &[BackgroundTask],
    ) -> Vec<Staged> {
        let mut staged = Vec::with_capacity(events.len() + 2);
        for mut ev in events {
            let live = live_tree.as_mut().filter(|(run, _)| *run == ev.run_id).map(|(_, t)| t);
            match ev.kind().class() {
                Class::Ephemeral => {
                    // Distinct from every other segment of this agent: no two of
                    // its segments open before the same durable seq.
                    let fresh = format!("seg-{}", self.last_seq + staged.len() as u64 + 1);
                    let closed = self.coalescer.push_delta(&mut ev, || fresh);
                    staged.extend(closed.into_iter().map(Staged::Durable));
                    if let Some(tree) = live {
                        tree.apply(&ev);
                    }
                    staged.push(Staged::Live(ev));
                }
                Class::Coalesced | Class::Structural if ev.kind() == Kind::RunFinish => {
                    // A run's end clears its transient status lines, for
                    // every reader: a live one (n8n's editor keeps the last
                    // `status` it saw) and a replay (which has none) agree.
                    if let Some(tree) = live {
                        for agent in tree.with_status_message() {
                            let clear = Event::new(
                                Payload::Status(event::payload::StatusMsg { message: String::new() }),
                                &ev.run_id,
                                &agent,
                                ev.ts,
                            );
                            tree.apply(&clear);
                            staged.push(Staged::Live(clear));
                        }
                    }
                    let going_on: Vec<&str> =
                        background.iter().filter(|t| t.run_id == ev.run_id).map(|t| t.agent_id.as_str()).collect();
                    let closed = self.coalescer.close_run(&ev.run_id, &going_on);
                    staged.extend(closed.into_iter().map(Staged::Durable));
                    staged.push(Staged::Durable(ev));
                }
                Class::Coalesced | Class::Structural if ev.kind() == Kind::AgentCompleted => {
                    // An agent that ended has nothing more to say.
                    let closed = self.coalescer.close_agent(&ev.run_id, &ev.agent_id);
                    staged.extend(closed.into_iter().map(Staged::Durable));
                    if let Some(tree) = live {
                        tree.apply(&ev);
                    }
                    staged.push(Staged::Durable(ev));
                }
                Class::Coalesced | Class::Structural => {
                    let mut blocks = self.coalescer.flush_agent(&ev.run_id, &ev.agent_id);
                    if let Some(tree) = live {
                        let agents = self.coalescer.open_agents(&ev.run_id);
                        let before: Vec<_> = agents.iter().map(|a| tree.timeline_len(a)).collect();
                        tree.apply(&ev);
                        for (agent, len) in agents.iter().zip(before) {
                            if tree.timeline_len(agent) != len {
                                blocks.extend(self.coalescer.close_agent(&ev.run_id, agent));
                            }
                        }
                    }
                    staged.extend(blocks.into_iter().map(Staged::Durable));
                    staged.push(Staged::Durable(ev));
                }
            }
        }
        staged
    }

    /// Assigns seqs, stores the durable facts (and `run`) in one commit, and
    /// only then sends every frame to every subscriber, one chunk each.
    ///
    /// Invariant: a fact is sent only once stored (never in neither store),
    /// and seqs stay contiguous: on a failed commit `last_seq` does not move,
    /// nothing is sent, and the deltas folded into open segments are dropped
    /// with them (they were never durable, and a segment must not hold text
    /// no one was sent): the caller refolds what it folded ahead.
    pub(super) fn append(&mut self, staged: Vec<Staged>, run: Option<RunRecord>) -> Result<(), StoreError> {
        let mut records = Vec::new();
        // The message every subscriber gets, and the one of those that
        // follow durable records only.
        let mut message = Vec::new();
        let mut durable = Vec::new();
        let mut seq = self.last_seq;
        let mut marks = Marks::default();
        for s in &staged {
            match s {
                Staged::Durable(ev) => {
                    seq += 1;
                    marks.saw(seq, ev);
                    let data = ev.to_json();
                    socket::durable(seq, &data, &mut message);
                    socket::durable(seq, &data, &mut durable);
                    records.push(Record { seq, run_id: ev.run_id.clone(), kind: ev.kind(), data });
                }
                Staged::Live(ev) => socket::live(&ev.to_json(), &mut message),
            }
        }
        let runs: Vec<RunRecord> = run.into_iter().collect();
        if !records.is_empty() || !runs.is_empty() {
            if let Err(e) = self.store.commit(&records, &runs) {
                self.coalescer = Coalescer::default();
                return Err(e);
            }
        }
        self.last_seq = seq;
        self.marks.merge(marks);
        self.last_write_at = staged.iter().map(|s| s.event().ts).fold(self.last_write_at, i64::max);
        self.subscribers.fan_out(&staged, Bytes::from(message), Bytes::from(durable));
        Ok(())
    }

    /// Stores open segments that have been quiet for the idle-flush time
    /// (they stay open: their blocks go straight to the log).
    pub(super) fn flush_idle(&mut self, now: i64) -> Result<(), StoreError> {
        let blocks = self.coalescer.flush_idle(now);
        if blocks.is_empty() {
            return Ok(());
        }
        self.append(blocks.into_iter().map(Staged::Durable).collect(), None)
    }

    /// Registers `sink` (as subscriber `id`) for `follow`, having seen
    /// everything up to `after`, and returns the hello to send it first: the
    /// window `(after, last_seq]`, its first page of at most `page`, then
    /// (unless it follows durable records only) `sync`, the active run's
    /// state for a client joining the log, and the open segments' text so
    /// far. One block: nothing published falls between the hello and the
    /// registration.
    pub(super) fn subscribe(
        &mut self,
        id: u64,
        follow: Follow,
        after: u64,
        sink: K,
        page: usize,
        sync: Option<String>,
    ) -> Result<Bytes, Error> {
        let high = self.last_seq;
        let gen = super::meta::stored_generation(&self.store)?.unwrap_or(0);
        let mut out = Vec::new();
        socket::hello(high, gen, after, &mut out);
        // A short first page: the Worker frames a whole message before it
        // writes, so the client's first byte waits for this page only; the
        // pages it asks for next are full ones.
        self.page_into(&follow, after, high, FIRST_PAGE.min(page), &mut out)?;
        if let Some(run) = &follow.run {
            // Its `run-finish` is stored in the same commit as the state.
            if self.store.run(run)?.is_some_and(|r| r.state != RunState::Running) {
                socket::ended(&mut out);
            }
        }
        if !follow.durable && follow.run.is_none() {
            if let Some(state) = sync {
                socket::sync(&state, &mut out);
            }
        }
        if !follow.durable {
            for ev in self.coalescer.snapshots() {
                if follow.run.as_ref().is_none_or(|r| *r == ev.run_id) {
                    socket::snapshot(&ev.to_json(), &mut out);
                }
            }
        }
        self.subscribers.add(id, follow, sink);
        Ok(Bytes::from(out))
    }

    /// The next replay page of `follow`, at most `limit` records: records in
    /// `(after, high]`, and where the page ends (`high` once nothing more is
    /// left up to it).
    pub fn replay_page(&self, follow: &Follow, after: u64, high: u64, limit: usize) -> Result<Bytes, Error> {
        let mut out = Vec::new();
        self.page_into(follow, after, high, limit, &mut out)?;
        Ok(Bytes::from(out))
    }

    fn page_into(&self, follow: &Follow, after: u64, high: u64, limit: usize, out: &mut Vec<u8>) -> Result<(), Error> {
        let records: Vec<Record> = match &follow.run {
            None => self.store.read_range(after, high, limit),
            Some(run) => {
                self.store.run_range(run, after, limit).map(|r| r.into_iter().filter(|r| r.seq <= high).collect())
            }
        }?;
        for r in &records {
            socket::durable(r.seq, &r.data, out);
        }
        let last = match records.last() {
            Some(r) if records.len() == limit && r.seq < high => r.seq,
            _ => high,
        };
        socket::page_end(last, out);
        Ok(())
    }
}

impl Marks {
    /// What stored event `ev`, at `seq`, changes.
    fn saw(&mut self, seq: u64, ev: &Event) {
        use crate::notify::Notice;
        use serde_json::json;
        const QUOTA: &str = crate::agent::QUOTA_EXCEEDED;
        match &ev.payload {
            Payload::RunFinish(fin) => {
                self.answer_id = seq;
                self.finished = Some((ev.run_id.clone(), fin.status, ev.ts));
                self.changed = true;
                let event = match fin.status {
                    event::FinishStatus::Completed | event::FinishStatus::Cancelled => "run.finished",
                    event::FinishStatus::Error | event::FinishStatus::Interrupted => "run.failed",
                };
                let data = json!({ "runId": ev.run_id, "status": fin.status.as_str(), "reason": fin.reason });
                self.notices.push(Notice { event, data });
                if fin.reason.as_deref() == Some(QUOTA) {
                    self.notices.push(Notice { event: "quota.exceeded", data: json!({ "runId": ev.run_id }) });
                }
            }
            Payload::ConfirmationRequest(req) => {
                self.answer_id = seq;
                self.changed = true;
                let kind = req.input_type.as_ref().map_or("approval", |t| t.as_str());
                let data =
                    json!({ "runId": ev.run_id, "requestId": req.request_id, "toolName": req.tool_name, "kind": kind });
                self.notices.push(Notice { event: "confirmation.requested", data });
            }
            Payload::ConfirmationSettled(settled) => {
                self.changed = true;
                if settled.status == "expired" {
                    let data =
                        json!({ "runId": ev.run_id, "requestId": settled.request_id, "toolName": settled.tool_name });
                    self.notices.push(Notice { event: "confirmation.expired", data });
                }
            }
            Payload::QueueUpdated(update) => {
                self.changed = true;
                if update.queue.paused && update.queue.paused_reason.as_deref() == Some(QUOTA) {
                    let data = json!({ "queued": update.queue.items.len() });
                    self.notices.push(Notice { event: "quota.exceeded", data });
                }
            }
            Payload::RunStart(_) | Payload::ThreadTitleUpdated(_) | Payload::BranchSwitched(_) => self.changed = true,
            _ => {}
        }
    }

    fn merge(&mut self, later: Marks) {
        self.changed |= later.changed;
        self.notices.extend(later.notices);
        self.answer_id = self.answer_id.max(later.answer_id);
        if later.finished.is_some() {
            self.finished = later.finished;
        }
    }
}

/// Publishes `events`, none of them a run's end, into `run_id` while it holds
/// the lock (409 `run_finished` otherwise): staged with the run's fold,
/// stored, then sent, and the run marked alive. A run's end is the thread's
/// to publish (`Thread::publish_events`): what follows it is decided with it.
///
/// A failed commit keeps nothing and refolds the run from the log.
pub(super) fn publish_in_run<S: Store, K: Sink>(
    journal: &mut Journal<S, K>,
    runs: &mut RunLock,
    run_id: &str,
    events: Vec<Event>,
    now: i64,
) -> Result<(), Error> {
    if !runs.holds(run_id) {
        return Err(Error::RunFinished { run_id: run_id.to_owned() });
    }
    debug_assert!(events.iter().all(|e| e.kind() != Kind::RunFinish), "a run's end is the thread's to publish");
    let (live_tree, background) = runs.staging();
    let staged = journal.stage(events, live_tree, background);
    if let Err(e) = journal.append(staged, None) {
        runs.refold(|run| conversation::run_events(&journal.store, run))?;
        return Err(Error::Storage(e));
    }
    runs.spoke(run_id, now);
    Ok(())
}
