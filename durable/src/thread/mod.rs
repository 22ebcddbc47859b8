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
//! - [`Files`] (`files`), [`Charges`] (`charges`), `Budgets` (`budgets`):
//!   a thread's files, what its model calls cost, and its senders' budgets.
//! - [`Conversation`] (`conversation`): the read model every protocol reads
//!   the thread through (which runs a conversation shows is decided there,
//!   once).
//! - `meta`: what a thread keeps under meta keys, and the log's generation.
//!
//! This file holds the thread itself: loading, the run lock's
//! compare-and-set, the publish path ([`Thread::publish_events`], the one
//! way a run ends, which decides what starts next in the same block), and
//! the queue's handoff. The operations routes are made of are added by
//! concern: `send` (start, queue, interrupt, regenerate; a client's own
//! message ids; launching runs), `queue`, `serve` (admission, follow,
//! cancel, decide, delete, the alarm), `subscribe` (the hello a socket
//! gets first), `agent` (what the built-in agent's loop stores and how it
//! resumes), `lifecycle` (a run's end, dead holders, deadlines), `status`
//! and `telemetry`. Why an operation did not happen is an [`error::Error`],
//! in the thread's terms; each protocol answers it over HTTP through
//! `protocols::error`.
//!
//! No protocol is named here: each protocol's routes (`protocols/`) are
//! made of these operations.
//!
//! Callers never hold the thread across an `.await`: every method here is
//! synchronous, so each is one block no other request can interleave with.

mod agent;
mod budgets;
mod charges;
mod confirmations;
pub mod conversation;
pub mod error;
mod files;
mod journal;
mod lifecycle;
pub mod meta;
mod queue;
mod run_lock;
pub mod send;
pub mod serve;
mod status;
mod subscribe;
mod subscribers;
mod telemetry;

use crate::auth::{constant_time_eq, hash_token};
use crate::effect::Effect;
use crate::log::event::{self, Class, Event, FinishStatus, Kind, Payload};
use crate::log::queued::{Queue, QueueItem};
use crate::storage::store::{Driver, RunRecord, RunState, Store, Turn};
use crate::wire::ids;
use bytes::Bytes;
use error::{Busy, Error};
use serde_json::{json, Value};
use std::rc::Rc;

pub use crate::settings::Config;
pub use crate::wire::ids::ROOT_AGENT;
use budgets::Budgets;
pub use charges::{keep_charges, Charges, Held};
pub use confirmations::{check_decision, By, Decisions, Requests, REQUESTER};
pub use conversation::Conversation;
pub use files::Files;
pub use journal::Journal;
pub use queue::QueueEdit;
pub use run_lock::RunLock;
pub use send::{Given, Seen, Sender, Sent};
pub use serve::{Admitted, Answer, Call, Instance, Outcome};
pub use subscribe::Follow;
pub use subscribers::Subscribers;

/// Where a subscriber's messages go: the socket the Worker relays from (a
/// hibernatable WebSocket), a vector in tests. Each `send` is one message.
pub trait Sink {
    /// Queues one message; `false` when the subscriber has gone away.
    fn send(&mut self, message: Bytes) -> bool;
    /// `true` once the receiving side is gone.
    fn is_closed(&self) -> bool;
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
}

pub struct Thread<S: Store, K: Sink> {
    /// The store, the sequence counter, the open segments and the
    /// subscribers: where events become the log (persist, then fan out).
    journal: Journal<S, K>,
    config: Config,
    /// The run lock, the run holding it and the background agents.
    runs: RunLock,
    queue: Queue,
    /// A message that interrupted the active run: it starts next, first.
    interrupting: Option<QueueItem>,
    /// Runs the thread started on its own (from its queue), for the service
    /// to launch: signal the webhook or start the built-in agent.
    started: Vec<Started>,
    /// Random ids and tokens (the platform's CSPRNG in the Worker).
    ids: Rc<dyn ids::Random>,
    /// The origin of the last accepted send (publish URLs without
    /// `PUBLIC_URL`), as stored under `send_origin`: loaded on first use.
    send_origin: Option<Option<String>>,
    /// What the thread knows of its senders' budgets (`QUOTA`): learned with
    /// each send, plus what its own turns used since. A queued message is
    /// checked against its sender's as it starts.
    budgets: Budgets,
    /// Effects decided inside the publish path, for the next launch
    /// (`Thread::launch_started`): a run's end, told to its agent.
    outbox: Vec<Effect>,
    /// When undelivered charges are next tried, and the wait before that
    /// (doubled after each failure): `thread/charges.rs`.
    charge_retry: charges::Retry,
}

/// What follows a finished run ([`Thread::handoff`]).
struct Handoff {
    queue: Queue,
    item: Option<QueueItem>,
    interrupting: bool,
    /// The run's last event before its `run-finish`.
    event: Event,
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

use meta::QUEUE_KEY;

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
            queue: Queue::default(),
            interrupting: None,
            started: Vec::new(),
            ids: Rc::new(ids::Counter::default()),
            send_origin: None,
            outbox: Vec::new(),
            charge_retry: charges::Retry::default(),
        };
        if let Some(q) = thread.journal.store().meta(QUEUE_KEY)? {
            thread.queue = serde_json::from_str(&q).unwrap_or_default();
        }
        thread.refold_live_tree()?;
        thread.charges().charges_on_load(now)?;
        Ok(thread)
    }

    /// Folds the active run's stored events: on load, and after a failed
    /// commit left the in-memory fold ahead of the log.
    fn refold_live_tree(&mut self) -> Result<(), Error> {
        let conversation = self.journal.conversation(&self.queue);
        self.runs.refold(|run| conversation.run_events(run))
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn last_seq(&self) -> u64 {
        self.journal.last_seq()
    }

    /// The run lock: the run holding it, whether it waits for a person,
    /// the background agents.
    pub fn runs(&self) -> &RunLock {
        &self.runs
    }

    /// The thread's id, as the Worker routed it (request ids embed it).
    pub fn set_thread_id(&mut self, thread_id: &str) {
        self.journal.set_thread_id(thread_id);
    }

    pub fn thread_id(&self) -> &str {
        self.journal.thread_id()
    }

    /// Replaces the id source (the Worker's is its CSPRNG).
    pub fn set_id_source(&mut self, ids: Rc<dyn ids::Random>) {
        self.ids = ids;
    }

    /// Starts a run: the compare-and-set of the thread's run lock. Refused
    /// with 409 `run_active` while another run holds it.
    pub fn start_run(&mut self, start: StartRun, now: i64) -> Result<RunRecord, Error> {
        self.runs.check_free(Busy::Start)?;
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
        };
        let mut payload = json!({ "messageId": start.message_id, "message": record.message });
        if let Some(agent) = &record.turn.agent {
            payload["agent"] = agent.clone().into();
        }
        if !record.turn.attachments.is_empty() {
            // References: a client reads each at `/v1/threads/:id/files/:fileId`.
            payload["attachments"] = serde_json::to_value(&record.turn.attachments).unwrap_or_default();
        }
        let run_start = Event::built(Kind::RunStart, &start.run_id, ROOT_AGENT, now, payload);
        self.runs.fold_from_start(&record.run_id);
        self.commit(vec![run_start], Some(record.clone()))?;
        self.runs.take(record.clone(), now)?;
        Ok(record)
    }

    /// Checks a bearer publish token against `run_id`: 401 when absent, 403
    /// when it is not that run's token, 404 for a run the thread never had.
    pub fn authorize_publish(&self, run_id: &str, token: Option<&str>) -> Result<(), Error> {
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Err(Error::PublishTokenMissing);
        };
        let run = match self.runs.active_run() {
            Some(r) if r.run_id == run_id => r.clone(),
            _ => self.journal.store().run(run_id)?.ok_or(Error::RunNotFound)?,
        };
        if !constant_time_eq(hash_token(token).as_bytes(), run.token_hash.as_bytes()) {
            return Err(Error::PublishTokenWrong);
        }
        Ok(())
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
            if ev.kind() == Kind::RunStart {
                return Err(Error::invalid_event_at(index, "`run-start` is emitted by the server"));
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
        self.journal.conversation(&self.queue)
    }

    /// Publishes into the active run `run_id` (409 `run_finished` otherwise)
    /// and marks it alive: its idle deadline moves, and a run found open on
    /// load that publishes is not swept.
    ///
    /// A refused publish (a storage error: 503) leaves the run as it was: an
    /// external agent told 503 may retry; a built-in agent's refused publish
    /// ends its run (`Thread::publish_agent`).
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
            (Some(_), Some((run_id, _))) => self.handoff(run_id, now),
            _ => None,
        };
        let before = self.queue.clone();
        if let Some(h) = &handoff {
            let at = events.iter().rposition(|e| e.kind() == Kind::RunFinish).unwrap_or(events.len());
            events.insert(at, h.event.clone());
            if h.queue != self.queue {
                self.store_queue(&h.queue)?;
            }
        }
        if let Err(e) = self.commit(events, run_update.clone()) {
            if handoff.as_ref().is_some_and(|h| h.queue != before) {
                let _ = self.store_queue(&before);
            }
            return Err(e);
        }
        if let Some(rec) = &run_update {
            let told = telemetry::run_ended(self.journal.thread_id(), self.config.tracing, rec);
            self.outbox.push(told);
            self.runs.release();
        }
        if let Some(h) = handoff {
            self.queue = h.queue;
            if h.interrupting {
                self.interrupting = None;
            }
            if let Some(item) = h.item {
                self.start_item(item, now)?;
            }
        }
        Ok(())
    }

    /// What follows the end of run `run_id`: an interrupting message, else
    /// the queue's head (unless the queue is paused, or its sender's budget
    /// is spent, which pauses it); `None` when nothing waits.
    fn handoff(&self, run_id: &str, now: i64) -> Option<Handoff> {
        let (queue, item, interrupting) = match self.interrupting.clone() {
            Some(item) => (self.queue.clone(), Some(item), true),
            None if self.queue.items.is_empty() => return None,
            None => {
                let (queue, item) = self.take_next(now);
                (queue, item, false)
            }
        };
        let started = item
            .as_ref()
            .map(|i| crate::log::queued::QueueStart { message_id: i.message_id.clone(), run_id: i.run_id.clone() });
        let update = crate::log::queued::QueueUpdate { queue: queue.clone(), started, dropped: Vec::new() };
        let event = Event::new(Payload::QueueUpdated(update), run_id, ROOT_AGENT, now);
        Some(Handoff { queue, item, interrupting, event })
    }

    /// The queue once its head is taken, and the head: none while the queue
    /// is paused, and none when the head's sender has spent their budget,
    /// which pauses the queue (`quota_exceeded`) until it is resumed.
    fn take_next(&self, now: i64) -> (Queue, Option<QueueItem>) {
        let mut queue = self.queue.clone();
        let Some(head) = queue.items.first().filter(|_| !queue.paused) else { return (queue, None) };
        if head.turn.actor.as_deref().is_some_and(|a| self.budgets.over(a, now)) {
            queue.paused = true;
            queue.paused_reason = Some(QUOTA_EXCEEDED.to_owned());
            queue.paused_at = Some(now);
            return (queue, None);
        }
        let item = queue.pop_next();
        (queue, item)
    }

    fn store_queue(&mut self, queue: &Queue) -> Result<(), Error> {
        let doc = serde_json::to_string(queue).expect("the queue serialises");
        Ok(self.journal.store_mut().set_meta(QUEUE_KEY, Some(&doc))?)
    }

    /// Stages `events` and appends them (with `run`) to the journal: stored,
    /// then sent. A failed commit kept nothing, and the active run's fold,
    /// which went ahead of the log, is folded again from it.
    fn commit(&mut self, events: Vec<Event>, run: Option<RunRecord>) -> Result<(), Error> {
        let (live_tree, background) = self.runs.staging();
        let staged = self.journal.stage(events, live_tree, background);
        self.append(staged, run)
    }

    fn append(&mut self, staged: Vec<Staged>, run: Option<RunRecord>) -> Result<(), Error> {
        if let Err(e) = self.journal.append(staged, run) {
            self.refold_live_tree()?;
            return Err(Error::Storage(e));
        }
        Ok(())
    }
}
