//! One conversation thread: what its Durable Object holds and decides.
//!
//! [`Thread`] coordinates parts that each own their fields and the rules
//! about them (each tested alone):
//!
//! - [`Journal`] (`journal`): the store, the sequence counter, the open text
//!   segments and the subscribers. Events become the log there and only
//!   there: persisted, then fanned out, in one block.
//! - [`RunLock`] (`run_lock`): the run holding the thread, its fold, its
//!   suspension while a person decides, its deadlines, and the background
//!   agents that outlive it.
//! - [`Subscribers`] (`subscribers`): who follows what, room and probing.
//! - [`Requests`] and [`Decisions`] (`confirmations`): requests waiting for a
//!   person, read and changed.
//! - [`Files`] (`stored_files`), [`Charges`] (`charges`), `Budgets` (`budgets`):
//!   a thread's files, what its model calls cost, and its senders' budgets.
//! - [`Waiting`] (`queue`): the stored queue and an interrupting message,
//!   and what follows a run's end.
//! - [`Conversation`] (`conversation`): the read model every protocol reads
//!   the thread through (which runs a conversation shows is decided there,
//!   once; each protocol shapes its messages view from its turns).
//! - [`tree::Tree`] (`tree`): the conversation as a tree of runs, each
//!   following the turn before it on its path; what the conversation shows
//!   (and a new run's memory) is the active path. `branch` changes it (an
//!   edit, an answer again, a switch), `fork` makes a new thread that
//!   shares its path up to a message.
//! - `meta`: what a thread keeps under meta keys, and the log's generation.
//!
//! This file holds the thread itself: loading, the run lock's
//! compare-and-set and the publish path ([`Thread::publish_events`], the
//! one way a run ends, which decides what starts next in the same block).
//! The operations routes are made of are added by concern: `send` (start,
//! queue, interrupt, regenerate; a client's own message ids), `queue`,
//! `serve` (admission, follow, cancel, decide, delete), `subscribe` (the
//! hello a socket gets first), `lifecycle` (cancel, a run's end) and
//! `telemetry`. What the shell and the built-in agent ask of a thread are
//! views by caller, each its own type: [`AgentLoop`] (`agent`: what the
//! loop stores and publishes, and how a run gets back to it), [`Clock`]
//! (`lifecycle`: waking, the alarm, deadlines, a dead holder) and
//! [`Launch`] (`launch`: starting the agents of the runs the thread
//! started). Why an operation did not happen is an [`error::Error`], in
//! the thread's terms; each protocol answers it over HTTP through
//! `protocols::error`.
//!
//! No protocol is named here: each protocol's routes (`protocols/`) are
//! made of these operations.
//!
//! Callers never hold the thread across an `.await`: every method here is
//! synchronous, so each is one block no other request can interleave with.

mod agent;
mod branch;
mod budgets;
mod charges;
mod confirmations;
pub mod conversation;
pub mod delivery;
pub mod error;
pub mod fork;
mod inbox;
mod journal;
mod launch;
mod lifecycle;
pub mod meta;
mod queue;
mod run_lock;
mod schedules;
pub mod send;
pub mod serve;
mod stored_files;
mod subscribe;
mod subscribers;
mod telemetry;
pub mod tree;

use crate::auth::hash_token;
use crate::effect::Effect;
use crate::log::event::{self, Class, Event, FinishStatus, Kind, Payload};
use crate::storage::store::{Driver, RunRecord, RunState, Store, Turn};
use crate::wire::ids;
use bytes::Bytes;
use error::{Busy, Error};
use serde_json::{json, Value};
use std::rc::Rc;

pub use crate::settings::Config;
pub use crate::wire::ids::ROOT_AGENT;
pub use agent::{client_tools, AgentLoop, Compacting};
use budgets::Budgets;
pub use charges::{keep_charges, Charges, Held};
pub use confirmations::{check_decision, ApprovalScope, By, DecisionBody, Decisions, Requests, REQUESTER};
pub use conversation::{Conversation, Recall};
pub use delivery::{Claimed, ClaimedTo, Delivery};
pub use journal::Journal;
pub use launch::Launch;
pub use lifecycle::Clock;
pub use queue::{QueueEdit, Waiting};
pub use run_lock::{RunLock, RunSnapshot, Status};
pub use send::{Given, Seen, Sender, Sent};
pub use serve::{Admitted, Answer, Call, Consulted, Instance, Outcome};
pub use stored_files::Files;
pub use subscribe::Follow;
pub use subscribers::Subscribers;

/// Where a subscriber's messages go: the socket the Worker relays from (a
/// hibernatable WebSocket), a vector in tests. Each `send` is one message.
pub trait Sink {
    /// Queues one message; `false` when the subscriber has gone away.
    fn send(&mut self, message: Bytes) -> bool;
    /// `true` once the receiving side is gone.
    fn is_closed(&self) -> bool;
    /// Whether the object writes this subscriber's stream itself
    /// ([`Delivery::Held`]).
    fn is_held(&self) -> bool {
        false
    }
    /// Whether this subscriber's stream is between two ways of reaching it
    /// ([`Delivery::Moving`]).
    fn is_moving(&self) -> bool {
        false
    }
}

/// The message a full thread sends every subscriber to find those whose
/// client left ([`Subscribers::make_room`]): a relay answers it by writing its
/// protocol's keep-alive, and a write is how a stateless Worker learns that
/// its client is gone (it then closes the socket, freeing the slot).
pub const PROBE: &[u8] = crate::feed::socket::PROBE.as_bytes();

/// A sink that keeps nothing: for benchmarks and fuzzing.
pub struct Discard;

impl Sink for Discard {
    fn send(&mut self, _: Bytes) -> bool {
        true
    }

    fn is_closed(&self) -> bool {
        false
    }
}

/// What the caller supplies to start a run (ids come from its random source).
#[derive(Clone, Debug)]
pub struct StartRun {
    pub run_id: String,
    pub message_id: String,
    pub message: String,
    /// The run's publish token; only its hash is stored.
    pub publish_token: String,
    pub driver: Driver,
    /// The model catalog id picked for this run, if any.
    pub model: Option<String>,
    /// What the message asked of its turn.
    pub turn: Turn,
    /// Where the turn joins the conversation.
    pub place: Place,
}

/// Where a new turn joins the conversation's tree.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Place {
    /// After the active path's leaf: a send, a queued message.
    #[default]
    Leaf,
    /// Beside a turn of the tree (an edit, an answer again): after the
    /// point's `parent`, which the run-start names so every client follows.
    Branch(event::payload::BranchPoint),
}

pub struct Thread<S: Store, K: Sink> {
    /// The store, the sequence counter, the open segments and the
    /// subscribers: where events become the log (persist, then fan out).
    journal: Journal<S, K>,
    config: Config,
    /// The run lock, the run holding it and the background agents.
    runs: RunLock,
    /// The queue, and a message that interrupted the active run.
    waiting: Waiting,
    /// Runs the thread started on its own (from its queue), for the service
    /// to launch: signal the webhook or start the built-in agent.
    started: Vec<Started>,
    /// On a fork, the source's turns its history shares, for the request
    /// being served only ([`Thread::share`]).
    shared: Option<conversation::Shared>,
    /// Random ids and tokens (the platform's CSPRNG in the Worker).
    ids: Rc<dyn ids::Random>,
    /// The origin of the last accepted send (publish URLs without
    /// `PUBLIC_URL`).
    send_origin: meta::SendOrigin,
    /// What the thread knows of its senders' budgets (`QUOTA`): learned with
    /// each send, plus what its own turns used since. A queued message is
    /// checked against its sender's as it starts.
    budgets: Budgets,
    /// Effects decided inside the publish path, for the next launch
    /// (`Launch::started`): a run's end, told to its agent.
    outbox: Vec<Effect>,
    /// When undelivered charges are next tried, and the wait before that
    /// (doubled after each failure): `thread/charges.rs`.
    charge_retry: charges::Retry,
    /// What the thread reported to its owner's inbox, and what it owes it
    /// (`thread/inbox.rs`).
    reports: inbox::Reports,
    /// The thread's schedules, soonest first (`thread/schedules.rs`).
    schedules: Vec<crate::schedule::Schedule>,
    /// When a compaction a person asked for started, while it is under way
    /// ([`Thread::compact`]).
    compacting: Option<i64>,
}

/// Why a turn did not run, or a queue paused: its sender's budget is spent.
pub const QUOTA_EXCEEDED: &str = "quota_exceeded";

/// A run the thread started, with its publish token, waiting to be launched.
#[derive(Clone, Debug)]
pub struct Started {
    pub run: RunRecord,
    pub publish_token: String,
    /// The tools the client declared with the message (built-in runs).
    pub client_tools: Vec<serde_json::Value>,
}

/// An event placed in log order, durable (stored, sent with its seq) or live
/// only (sent without an id).
enum Staged {
    Durable(Event),
    Live(Event),
}

impl Staged {
    fn event(&self) -> &Event {
        match self {
            Staged::Durable(e) | Staged::Live(e) => e,
        }
    }
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// Opens a thread over `store`. A run found still open is remembered as
    /// found-on-load: if it stays silent for `restart_grace_ms` it is swept.
    pub fn load(store: S, config: Config, now: i64) -> Result<Self, Error> {
        let pending = store.pending_confirmations()?;
        let running = store.running()?;
        let waiting = running.as_ref().map_or(0, |r| pending.iter().filter(|c| c.run_id == r.run_id).count());
        let mut thread = Thread {
            journal: Journal::open(store, now)?,
            budgets: Budgets::new(config.quota_period),
            config,
            runs: RunLock::found(running, waiting, now),
            waiting: Waiting::default(),
            started: Vec::new(),
            shared: None,
            ids: Rc::new(ids::Counter::default()),
            send_origin: meta::SendOrigin::default(),
            outbox: Vec::new(),
            charge_retry: charges::Retry::default(),
            reports: inbox::Reports::default(),
            schedules: Vec::new(),
            compacting: None,
        };
        thread.waiting = Waiting::load(thread.journal.store())?;
        thread.schedules = schedules::load(thread.journal.store())?;
        let Thread { journal, runs, waiting, .. } = &mut thread;
        runs.refold(|run| journal.conversation(waiting.queue()).run_events(run))?;
        thread.charges().charges_on_load(now)?;
        Ok(thread)
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The run lock: the run holding it, whether it waits for a person,
    /// the background agents.
    pub fn runs(&self) -> &RunLock {
        &self.runs
    }

    /// Replaces the id source (the Worker's is its CSPRNG).
    pub fn set_id_source(&mut self, ids: Rc<dyn ids::Random>) {
        self.ids = ids;
    }

    /// Starts a run: the compare-and-set of the thread's run lock. Refused
    /// with 409 `run_active` while another run holds it.
    pub fn start_run(&mut self, start: StartRun, now: i64) -> Result<RunRecord, Error> {
        self.runs.check_free(Busy::Start)?;
        // The new turn follows the active path's leaf, or the turn it
        // branches from; it becomes the leaf.
        let parent = match &start.place {
            Place::Leaf => self.conversation().leaf()?,
            Place::Branch(point) => point.parent.clone(),
        };
        let record = RunRecord {
            run_id: start.run_id.clone(),
            message_id: start.message_id.clone(),
            message: start.message,
            agent_id: ROOT_AGENT.to_owned(),
            state: RunState::Running,
            reason: None,
            token_hash: hash_token(&start.publish_token),
            created_at: now,
            finished_at: None,
            driver: start.driver,
            usage: None,
            model: start.model,
            replaced: false,
            turn: start.turn,
            parent,
        };
        let mut payload = json!({ "messageId": start.message_id, "message": record.message });
        if let Some(agent) = &record.turn.agent {
            payload["agent"] = agent.clone().into();
        }
        if !record.turn.attachments.is_empty() {
            // References: a client reads each at `/v1/threads/:id/files/:fileId`.
            payload["attachments"] = serde_json::to_value(&record.turn.attachments).unwrap_or_default();
        }
        if let Place::Branch(point) = &start.place {
            payload["branch"] = serde_json::to_value(point).unwrap_or_default();
        }
        let run_start = Event::built(Kind::RunStart, &start.run_id, ROOT_AGENT, now, payload);
        self.runs.fold_from_start(&record.run_id);
        self.commit_at_leaf(&record.run_id, vec![run_start], Some(record.clone()))?;
        self.runs.take(record.clone(), now)?;
        Ok(record)
    }

    /// Validates and appends a publisher's batch, in order, to `run_id`.
    ///
    /// All or nothing: the first invalid event refuses the batch with 400 and
    /// its `index`, and nothing of it is stored. A finished run refuses with
    /// 409 `run_finished`, so a cancelled agent's late events never land.
    /// `run-start` is the server's; `run-finish` may only end a batch.
    pub fn publish(&mut self, run_id: &str, batch: Vec<Value>, now: i64) -> Result<u64, Error> {
        if !self.runs.holds(run_id) {
            return Err(Error::RunFinished { run_id: run_id.to_owned() });
        }
        let n = batch.len();
        let mut events = Vec::with_capacity(n);
        for (index, value) in batch.into_iter().enumerate() {
            let ev = event::parse_published(value, run_id, now).map_err(|e| Error::invalid_event_at(index, e))?;
            // A run's start and a switch of branch are the thread's own
            // word: an agent that published one could move clients' views.
            if matches!(ev.kind(), Kind::RunStart | Kind::BranchSwitched | Kind::ContextCompacted) {
                let kind = ev.kind().as_str();
                return Err(Error::invalid_event_at(index, format!("`{kind}` is emitted by the server")));
            }
            if ev.kind().class() == Class::Coalesced {
                return Err(Error::invalid_event_at(
                    index,
                    format!(
                        "`{}` is made by the server from deltas; publish `text-delta` / `reasoning-delta`",
                        ev.kind().as_str()
                    ),
                ));
            }
            let size = ev.payload.encoded_len();
            if size > self.config.max_event_bytes {
                return Err(Error::EventTooLarge { index, size, limit: self.config.max_event_bytes });
            }
            if ev.kind() == Kind::RunFinish && index + 1 != n {
                return Err(Error::invalid_event_at(index, "`run-finish` must be the last event of a batch"));
            }
            events.push(ev);
        }
        // An external agent's confirmation requests get thread-scoped ids (the
        // decision route finds the thread from the id); the agent's own id
        // comes back in its webhook callback.
        let mut confirmations = Vec::new();
        for (index, ev) in events.iter_mut().enumerate() {
            let Payload::ConfirmationRequest(request) = &ev.payload else { continue };
            let theirs = request.request_id.clone();
            let local = ids::id(&theirs)
                .map_err(|_| Error::invalid_event_at(index, "`requestId` must be 1 to 128 of A-Z a-z 0-9 _ -"))?;
            let (rewritten, record) =
                self.decisions().event(run_id, &ev.agent_id, ev.payload_json(), &local, Some(theirs), now)?;
            ev.payload = rewritten.payload;
            confirmations.push(record);
        }
        self.publish_run(run_id, events, now)?;
        self.decisions().store_pending(confirmations)?;
        Ok(self.journal.last_seq())
    }
    /// The conversation as it stands, to read (in this synchronous block):
    /// what protocols see of the thread.
    pub fn conversation(&self) -> conversation::Conversation<'_, S> {
        let c = self.journal.conversation(self.waiting.queue());
        match &self.shared {
            Some(shared) => c.with_shared(shared),
            None => c,
        }
    }

    /// Publishes into the active run `run_id` (409 `run_finished` otherwise)
    /// and marks it alive: its idle deadline moves, and a run found open on
    /// load that publishes is not swept.
    ///
    /// A refused publish (a storage error: 503) leaves the run as it was: an
    /// external agent told 503 may retry; a built-in agent's refused publish
    /// ends its run (`AgentLoop::publish`).
    pub fn publish_run(&mut self, run_id: &str, events: Vec<Event>, now: i64) -> Result<(), Error> {
        if !self.runs.holds(run_id) {
            return Err(Error::RunFinished { run_id: run_id.to_owned() });
        }
        self.publish_events(events, now)?;
        self.runs.spoke(run_id, now);
        Ok(())
    }
    /// Publishes an appender's batch into run `run_id` and, with it, the
    /// appender's new state (`key`, its JSON): one synchronous block, so the
    /// storage commits both or neither, and a retried append is recognised
    /// exactly when its batch is in the log. Returns the last seq.
    pub fn publish_as(
        &mut self,
        run_id: &str,
        batch: Vec<Value>,
        producer: Option<(String, String)>,
        now: i64,
    ) -> Result<u64, Error> {
        let last = self.publish(run_id, batch, now)?;
        if let Some((key, state)) = producer {
            self.journal.store_mut().set_meta(&key, Some(&state))?;
        }
        Ok(last)
    }

    /// The one publish path. Coalesces deltas, assigns seqs, persists the
    /// durable facts (with the run's record when it finishes) in one commit,
    /// and only then sends every frame to every subscriber as one chunk each.
    ///
    /// When the active run finishes, what follows is decided before its
    /// terminal event is written, and announced as the run's last event
    /// before it (`queue-updated` with the queue and the message that
    /// `started`, or the queue paused and why), so the run's own stream
    /// carries the handoff; the next message takes the lock in the same
    /// block, exactly once.
    pub fn publish_events(&mut self, mut events: Vec<Event>, now: i64) -> Result<(), Error> {
        let finished = events.iter().rev().find_map(|e| match &e.payload {
            Payload::RunFinish(fin) => Some((e.run_id.clone(), fin.clone())),
            _ => None,
        });
        let run_update = finished
            .as_ref()
            .and_then(|(run_id, fin)| self.runs.finished_record(run_id, fin.status, fin.reason.clone(), now));
        let handoff = match (&run_update, &finished) {
            (Some(_), Some((run_id, _))) => self.waiting.handoff(run_id, &self.budgets, now),
            _ => None,
        };
        let before = self.waiting.queue().clone();
        if let Some(h) = &handoff {
            let at = events.iter().rposition(|e| e.kind() == Kind::RunFinish).unwrap_or(events.len());
            events.insert(at, h.event.clone());
            if h.queue != before {
                Waiting::store(self.journal.store_mut(), &h.queue)?;
            }
        }
        if let Err(e) = self.commit(events, run_update.clone()) {
            if handoff.as_ref().is_some_and(|h| h.queue != before) {
                let _ = Waiting::store(self.journal.store_mut(), &before);
            }
            return Err(e);
        }
        if let Some(rec) = &run_update {
            let told = telemetry::run_ended(self.journal.thread_id(), self.config.tracing, rec);
            self.outbox.push(told);
            self.runs.release();
            // Nothing resumes a finished run: its checkpoint (its context,
            // up to a window's worth) is not kept.
            self.journal.store_mut().delete_checkpoint(&rec.run_id)?;
        }
        if let Some(h) = handoff {
            self.waiting.handed_off(&h);
            if let Some(item) = h.item {
                self.start_item(item, Place::Leaf, now)?;
            }
        }
        Ok(())
    }

    /// [`Thread::commit`], with the active path's leaf moved to `leaf` (a
    /// run that starts, a switch of branch): the leaf moves with the events
    /// that say so, or not at all.
    fn commit_at_leaf(&mut self, leaf: &str, events: Vec<Event>, run: Option<RunRecord>) -> Result<(), Error> {
        let before = self.journal.store().meta(meta::LEAF_KEY)?;
        self.journal.store_mut().set_meta(meta::LEAF_KEY, Some(leaf))?;
        if let Err(e) = self.commit(events, run) {
            self.journal.store_mut().set_meta(meta::LEAF_KEY, before.as_deref())?;
            return Err(e);
        }
        Ok(())
    }

    /// Stages `events` and appends them (with `run`) to the journal: stored,
    /// then sent. A failed commit kept nothing, and the active run's fold,
    /// which went ahead of the log, is folded again from it.
    fn commit(&mut self, events: Vec<Event>, run: Option<RunRecord>) -> Result<(), Error> {
        let (live_tree, background) = self.runs.staging();
        let staged = self.journal.stage(events, live_tree, background);
        if let Err(e) = self.journal.append(staged, run) {
            self.runs.refold(|run| self.journal.conversation(self.waiting.queue()).run_events(run))?;
            return Err(Error::Storage(e));
        }
        Ok(())
    }
}
