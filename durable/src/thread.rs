//! One conversation thread: what its Durable Object holds and decides.
//!
//! [`Thread`] owns the sequence counter, the run lock, the open text segments
//! and the subscribers, over a synchronous [`Store`]. Every event, whoever
//! produced it (the server, an external agent, the built-in agent), enters
//! through [`Thread::publish_events`], the one publish path, which persists,
//! then fans out.
//!
//! Callers never hold the thread across an `.await`: every method here is
//! synchronous, so each is one block no other request can interleave with.

use crate::coalesce::Coalescer;
use crate::error::ApiError;
use crate::event::{self, Class, Event, FinishStatus, Kind};
use crate::queue::{Queue, QueueItem};
use crate::route;
use crate::runstream::{self, FrameMapper};
use std::rc::Rc;
use crate::reducer::{self, TreeBuilder};
use crate::sse::Frame;
use crate::agent::BackgroundTask;
use crate::confirm::{self, ConfirmState, Confirmation};
use crate::store::{Driver, Record, RunRecord, RunState, Store};
use bytes::Bytes;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// Where a subscriber's bytes go. The Worker's sink is a channel into an SSE
/// response body; tests use a vector.
pub trait Sink {
    /// Queues `chunk`; `false` when the subscriber has gone away.
    fn send(&mut self, chunk: Bytes) -> bool;
    /// `true` once the receiving side is gone.
    fn is_closed(&self) -> bool;
}

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

/// Tunables of a thread.
#[derive(Clone, Debug)]
pub struct Config {
    /// A run with no published event for this long ends with `timeout`.
    pub run_idle_timeout_ms: i64,
    /// After the object restarts, a run still open that publishes nothing for
    /// this long is swept as `crash_interrupted`.
    pub restart_grace_ms: i64,
    /// Most records read per replay page.
    pub replay_page: usize,
    /// `APPROVAL_POLICY`: TTL and approver role per tool.
    pub approval_policy: confirm::Policy,
    /// Who drives the runs this thread starts from its queue.
    pub driver: Driver,
    /// Largest serialised payload of one published event (413 beyond); under
    /// SQLite's 2 MB row limit.
    pub max_event_bytes: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            run_idle_timeout_ms: 10 * 60_000,
            restart_grace_ms: 30_000,
            replay_page: 512,
            approval_policy: confirm::Policy::default(),
            driver: Driver::Webhook,
            max_event_bytes: 1_000_000,
        }
    }
}

const QUEUE_KEY: &str = "queue";

/// The root agent id of every run a thread starts.
pub const ROOT_AGENT: &str = "orchestrator";

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
}

#[derive(Debug)]
struct Active {
    record: RunRecord,
    /// Last time an event was published into the run (ms).
    last_activity: i64,
    /// Set when the run was found open on load: the time it was found.
    found_on_load: Option<i64>,
    /// Confirmations of this run awaiting a person: while any is pending the
    /// run is suspended, and neither the idle timeout nor the restart sweep
    /// applies (the wait may last hours and costs nothing).
    pending: usize,
}

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

pub struct Thread<S: Store, K: Sink> {
    store: S,
    thread_id: String,
    config: Config,
    last_seq: u64,
    active: Option<Active>,
    coalescer: Coalescer,
    /// The active run folded so far: what decides where segments end.
    live_tree: Option<(String, TreeBuilder)>,
    subscribers: Vec<(u64, K)>,
    /// Run-stream subscribers: frames of one run, in agora's envelope.
    run_subscribers: Vec<RunSubscriber<K>>,
    next_subscriber: u64,
    /// Background sub-agents still running (they outlive their run's finish).
    background: Vec<BackgroundTask>,
    queue: Queue,
    /// A message that interrupted the active run: it starts next, first.
    interrupting: Option<QueueItem>,
    /// Runs the thread started on its own (from its queue), for the caller to
    /// drive: signal the webhook or start the built-in agent.
    started: Vec<Started>,
    /// Random ids and tokens (the platform's CSPRNG in the Worker).
    ids: Rc<dyn Fn(&str) -> String>,
    /// When the log last grew (ms): a thread idle past its TTL is deleted.
    last_write_at: i64,
}

struct RunSubscriber<K> {
    id: u64,
    run_id: String,
    mapper: FrameMapper,
    sink: K,
}

/// A run the thread started from its queue, with its publish token.
#[derive(Clone, Debug)]
pub struct Started {
    pub run: RunRecord,
    pub publish_token: String,
}

/// Ids for tests: `prefix-1`, `prefix-2`, ...
fn counter_ids() -> Rc<dyn Fn(&str) -> String> {
    let n = std::cell::Cell::new(0u64);
    Rc::new(move |prefix: &str| {
        n.set(n.get() + 1);
        format!("{prefix}-{}", n.get())
    })
}

/// An event placed in log order, durable (stored, sent with its seq) or live
/// only (sent without an id).
enum Staged {
    Durable(Event),
    Live(Event),
}

pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// Opens a thread over `store`. A run found still open is remembered as
    /// found-on-load: if it stays silent for `restart_grace_ms` it is swept.
    pub fn load(store: S, config: Config, now: i64) -> Result<Self, ApiError> {
        let last_seq = store.last_seq().map_err(ApiError::storage)?;
        let pending = store.pending_confirmations().map_err(ApiError::storage)?;
        let active = store.running().map_err(ApiError::storage)?.map(|record| Active {
            pending: pending.iter().filter(|c| c.run_id == record.run_id).count(),
            record,
            last_activity: now,
            found_on_load: Some(now),
        });
        let mut thread = Thread {
            store,
            thread_id: String::new(),
            config,
            last_seq,
            active,
            coalescer: Coalescer::default(),
            live_tree: None,
            subscribers: Vec::new(),
            run_subscribers: Vec::new(),
            next_subscriber: 1,
            background: Vec::new(),
            queue: Queue::default(),
            interrupting: None,
            started: Vec::new(),
            ids: counter_ids(),
            last_write_at: now,
        };
        if let Some(last) = thread.store.read_range(last_seq.saturating_sub(1), last_seq, 1).map_err(ApiError::storage)?.first() {
            if let Ok(ev) = serde_json::from_str::<Event>(&last.data) {
                thread.last_write_at = ev.ts;
            }
        }
        if let Some(q) = thread.store.meta(QUEUE_KEY).map_err(ApiError::storage)? {
            thread.queue = serde_json::from_str(&q).unwrap_or_default();
        }
        thread.refold_live_tree()?;
        Ok(thread)
    }

    /// Folds the active run's stored events: on load, and after a failed
    /// commit left the in-memory fold ahead of the log.
    fn refold_live_tree(&mut self) -> Result<(), ApiError> {
        self.live_tree = match &self.active {
            Some(a) => {
                let run_id = a.record.run_id.clone();
                let events = self.run_events(&run_id)?;
                Some((run_id, reducer::fold(&events)))
            }
            None => None,
        };
        Ok(())
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    /// The store, for fault injection in tests and for moving it out.
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    pub fn active_run(&self) -> Option<&RunRecord> {
        self.active.as_ref().map(|a| &a.record)
    }

    pub fn subscriber_count(&self) -> usize {
        self.subscribers.len() + self.run_subscribers.len()
    }

    /// Starts a run: the compare-and-set of the thread's run lock. Refused
    /// with 409 `run_active` while another run holds it.
    pub fn start_run(&mut self, start: StartRun, now: i64) -> Result<RunRecord, ApiError> {
        if let Some(a) = &self.active {
            return Err(ApiError::new(409, "run_active", "a run is already active on this thread")
                .with("runId", a.record.run_id.clone()));
        }
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
        };
        let run_start = Event::new(
            Kind::RunStart,
            &start.run_id,
            ROOT_AGENT,
            now,
            json!({ "messageId": start.message_id, "message": record.message }),
        );
        self.live_tree = Some((record.run_id.clone(), TreeBuilder::default()));
        self.commit(vec![run_start], Some(record.clone()))?;
        self.active = Some(Active { record: record.clone(), last_activity: now, found_on_load: None, pending: 0 });
        Ok(record)
    }

    /// Checks a bearer publish token against `run_id`: 401 when absent, 403
    /// when it is not that run's token, 404 for a run the thread never had.
    pub fn authorize_publish(&self, run_id: &str, token: Option<&str>) -> Result<(), ApiError> {
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Err(ApiError::new(401, "unauthorized", "a bearer publish token is required"));
        };
        let run = match &self.active {
            Some(a) if a.record.run_id == run_id => a.record.clone(),
            _ => self
                .store
                .run(run_id)
                .map_err(ApiError::storage)?
                .ok_or_else(|| ApiError::not_found("run_not_found", "no such run on this thread"))?,
        };
        if !constant_time_eq(hash_token(token).as_bytes(), run.token_hash.as_bytes()) {
            return Err(ApiError::new(403, "forbidden", "this token does not publish to this run"));
        }
        Ok(())
    }

    /// Validates and appends a publisher's batch, in order, to `run_id`.
    ///
    /// All or nothing: the first invalid event refuses the batch with 400 and
    /// its `index`, and nothing of it is stored. A finished run refuses with
    /// 409 `run_finished`, so a cancelled agent's late events never land.
    /// `run-start` is the server's; `run-finish` may only end a batch.
    pub fn publish(&mut self, run_id: &str, batch: Vec<Value>, now: i64) -> Result<u64, ApiError> {
        match &self.active {
            Some(a) if a.record.run_id == run_id => {}
            _ => {
                return Err(ApiError::new(409, "run_finished", "this run has finished; nothing was stored")
                    .with("runId", run_id))
            }
        }
        let n = batch.len();
        let mut events = Vec::with_capacity(n);
        for (index, value) in batch.into_iter().enumerate() {
            let invalid = |msg: String| {
                ApiError::bad_request("invalid_event", format!("event {index}: {msg}")).with("index", index)
            };
            let ev = event::parse_published(value, run_id, now).map_err(|e| invalid(e.0))?;
            if ev.kind == Kind::RunStart {
                return Err(invalid("`run-start` is emitted by the server".into()));
            }
            if ev.kind.class() == Class::Coalesced {
                return Err(invalid(format!(
                    "`{}` is made by the server from deltas; publish `text-delta` / `reasoning-delta`",
                    ev.kind.as_str()
                )));
            }
            let size = ev.payload.to_string().len();
            if size > self.config.max_event_bytes {
                return Err(ApiError::new(
                    413,
                    "event_too_large",
                    format!("event {index}: its payload is {size} bytes, over {}", self.config.max_event_bytes),
                )
                .with("index", index));
            }
            if ev.kind == Kind::RunFinish && index + 1 != n {
                return Err(invalid("`run-finish` must be the last event of a batch".into()));
            }
            events.push(ev);
        }
        // An external agent's confirmation requests get thread-scoped ids (the
        // decision route finds the thread from the id); the agent's own id
        // comes back in its webhook callback.
        let mut confirmations = Vec::new();
        for (index, ev) in events.iter_mut().enumerate() {
            if ev.kind != Kind::ConfirmationRequest {
                continue;
            }
            let theirs = ev.str_field("requestId").unwrap_or_default().to_owned();
            let local = route::id(&theirs).map_err(|_| {
                ApiError::bad_request("invalid_event", format!("event {index}: `requestId` must be 1 to 128 of A-Z a-z 0-9 _ -"))
                    .with("index", index)
            })?;
            let (rewritten, record) =
                self.confirmation_event(run_id, &ev.agent_id, ev.payload.clone(), &local, Some(theirs), now)?;
            ev.payload = rewritten.payload;
            confirmations.push(record);
        }
        self.publish_run(run_id, events, now)?;
        self.store_confirmations(confirmations)?;
        Ok(self.last_seq)
    }

    /// Publishes into the active run `run_id` (409 `run_finished` otherwise)
    /// and marks it alive: its idle deadline moves, and a run found open on
    /// load that publishes is not swept.
    pub fn publish_run(&mut self, run_id: &str, events: Vec<Event>, now: i64) -> Result<(), ApiError> {
        let Some(active) = self.active.as_mut().filter(|a| a.record.run_id == run_id) else {
            return Err(ApiError::new(409, "run_finished", "this run has finished; nothing was stored").with("runId", run_id));
        };
        active.last_activity = now;
        active.found_on_load = None;
        self.publish_events(events, now)
    }

    /// The one publish path. Coalesces deltas, assigns seqs, persists the
    /// durable facts (with the run's record when it finishes) in one commit,
    /// and only then sends every frame to every subscriber as one chunk each.
    pub fn publish_events(&mut self, events: Vec<Event>, now: i64) -> Result<(), ApiError> {
        let finished = events.iter().rev().find(|e| e.kind == Kind::RunFinish).cloned();
        let run_update = match (&finished, &self.active) {
            (Some(f), Some(a)) if a.record.run_id == f.run_id => {
                let status: FinishStatus = serde_json::from_value(f.payload["status"].clone())
                    .map_err(|e| ApiError::bad_request("invalid_event", e.to_string()))?;
                let mut rec = a.record.clone();
                rec.state = status.into();
                rec.reason = f.str_field("reason").map(str::to_owned);
                rec.finished_at = Some(now);
                Some(rec)
            }
            _ => None,
        };
        self.commit(events, run_update.clone())?;
        if run_update.is_some() {
            self.active = None;
            self.live_tree = None;
            // In the same block as the run-finish: the next queued message
            // takes the lock before any other request can, exactly once.
            self.start_next(now)?;
        }
        Ok(())
    }

    fn commit(&mut self, events: Vec<Event>, run: Option<RunRecord>) -> Result<(), ApiError> {
        let staged = self.stage(events);
        self.persist_then_send(staged, run)
    }

    /// Puts events in log order, with the blocks of text segments where a
    /// reader's timeline needs them.
    ///
    /// The active run is folded as it goes (`live_tree`), so the thread knows
    /// what a client's reducer does: a delta joins its segment or starts one
    /// (closing the agent's others); a durable fact first flushes its agent's
    /// segments, and ends every segment whose agent's timeline it extends.
    fn stage(&mut self, events: Vec<Event>) -> Vec<Staged> {
        let mut staged = Vec::with_capacity(events.len() + 2);
        for mut ev in events {
            let live = self.live_tree.as_mut().filter(|(run, _)| *run == ev.run_id).map(|(_, t)| t);
            match ev.kind.class() {
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
                Class::Coalesced | Class::Structural if ev.kind == Kind::RunFinish => {
                    staged.extend(self.coalescer.close_run(&ev.run_id).into_iter().map(Staged::Durable));
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
    /// and seqs stay contiguous: on a failed commit `last_seq` does not move.
    fn persist_then_send(&mut self, staged: Vec<Staged>, run: Option<RunRecord>) -> Result<(), ApiError> {
        let mut records = Vec::new();
        let mut wire = Vec::new();
        let mut seq = self.last_seq;
        for s in &staged {
            match s {
                Staged::Durable(ev) => {
                    seq += 1;
                    let data = ev.to_json();
                    Frame::data(&data).id(seq).encode(&mut wire);
                    records.push(Record { seq, run_id: ev.run_id.clone(), kind: ev.kind, data });
                }
                Staged::Live(ev) => Frame::data(&ev.to_json()).encode(&mut wire),
            }
        }
        let runs: Vec<RunRecord> = run.into_iter().collect();
        if !records.is_empty() || !runs.is_empty() {
            if let Err(e) = self.store.commit(&records, &runs) {
                // Nothing was stored and nothing is sent. The deltas folded
                // into open segments are dropped with them: they were never
                // durable, and a segment must not hold text no one was sent.
                self.coalescer = Coalescer::default();
                self.refold_live_tree()?;
                return Err(ApiError::storage(e));
            }
        }
        self.last_seq = seq;
        let newest = staged.iter().map(|s| match s {
            Staged::Durable(e) | Staged::Live(e) => e.ts,
        });
        self.last_write_at = newest.fold(self.last_write_at, i64::max);
        self.fan_out(Bytes::from(wire));
        if !self.run_subscribers.is_empty() {
            self.fan_out_runs(&staged);
        }
        Ok(())
    }

    /// Sends each run-stream subscriber its run's new frames, one chunk each;
    /// a `run-finish` ends the stream (its sink is dropped).
    fn fan_out_runs(&mut self, staged: &[Staged]) {
        self.run_subscribers.retain_mut(|sub| {
            let mut out = Vec::new();
            let mut finished = false;
            for ev in staged.iter().map(|s| match s {
                Staged::Durable(e) | Staged::Live(e) => e,
            }) {
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

    /// Subscribes to one run's frames (agora's run streams), sending those
    /// numbered above `after`. In one synchronous block: the frames the log
    /// and the open segments give so far, then registration for the rest.
    /// Returns the bytes to send first, and the subscription id, or `None`
    /// when the run has ended (the bytes then end with its terminal frame).
    /// 404 `nothing_to_resume` for a run this thread never had.
    pub fn subscribe_run(&mut self, run_id: &str, after: u64, sink: K) -> Result<(Bytes, Option<u64>), ApiError> {
        let record = self
            .store
            .run(run_id)
            .map_err(ApiError::storage)?
            .ok_or_else(|| ApiError::not_found("nothing_to_resume", "no run with this id to resume"))?;
        let mut mapper = FrameMapper::new(&record.agent_id);
        let mut out = Vec::new();
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

    fn fan_out(&mut self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        self.subscribers.retain_mut(|(_, sink)| sink.send(chunk.clone()));
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

    pub fn unsubscribe(&mut self, id: u64) {
        self.subscribers.retain(|(sid, _)| *sid != id);
        self.run_subscribers.retain(|s| s.id != id);
    }

    /// Drops subscribers whose receiving side has gone.
    pub fn prune_subscribers(&mut self) {
        self.subscribers.retain(|(_, s)| !s.is_closed());
        self.run_subscribers.retain(|s| !s.sink.is_closed());
    }

    /// The next replay page of a subscription window: SSE bytes and the new
    /// `after`; an empty page ends the replay.
    pub fn replay_page(&self, after: u64, high: u64) -> Result<(Bytes, u64), ApiError> {
        let records =
            self.store.read_range(after, high, self.config.replay_page).map_err(ApiError::storage)?;
        let mut out = Vec::with_capacity(records.iter().map(|r| r.data.len() + 24).sum());
        let mut last = after;
        for r in &records {
            Frame::data(&r.data).id(r.seq).encode(&mut out);
            last = r.seq;
        }
        Ok((Bytes::from(out), last))
    }

    /// Cancels the active run, if any: `run-finish {cancelled, user_cancelled}`.
    /// Idempotent: returns the cancelled run id, or `None` when nothing ran.
    pub fn cancel(&mut self, now: i64) -> Result<Option<String>, ApiError> {
        let Some(run_id) = self.active.as_ref().map(|a| a.record.run_id.clone()) else {
            return Ok(None);
        };
        self.end_run(&run_id, FinishStatus::Cancelled, "user_cancelled", now)?;
        Ok(Some(run_id))
    }

    /// Ends `run_id` if it is the active run (`false` when it is not). An
    /// interrupted run's open tool calls settle as `tool-interrupted` first.
    pub fn end_run(&mut self, run_id: &str, status: FinishStatus, reason: &str, now: i64) -> Result<bool, ApiError> {
        if self.active.as_ref().is_none_or(|a| a.record.run_id != run_id) {
            return Ok(false);
        }
        // No dangling tool calls: what was in flight settles first, as
        // cancelled or as interrupted. (The live fold holds the whole run: it
        // is refolded from the log when the thread loads.)
        let settle = match status {
            FinishStatus::Cancelled => Some((Kind::ToolError, "cancelled: the run was stopped before this tool call finished")),
            FinishStatus::Interrupted => Some((Kind::ToolInterrupted, "the run was interrupted before this tool call finished")),
            _ => None,
        };
        let mut events = Vec::new();
        if let Some((kind, error)) = settle {
            let open = self.live_tree.as_ref().map(|(_, t)| t.open_tool_calls()).unwrap_or_default();
            for (agent, call) in open {
                events.push(Event::new(kind, run_id, &agent, now, json!({ "toolCallId": call, "error": error })));
            }
        }
        events.push(Event::new(
            Kind::RunFinish,
            run_id,
            ROOT_AGENT,
            now,
            json!({ "status": status.as_str(), "reason": reason }),
        ));
        // Its pending confirmations are settled: no decision applies any more.
        for mut c in self.store.pending_confirmations().map_err(ApiError::storage)? {
            if c.run_id == run_id {
                c.state = ConfirmState::Cancelled;
                self.store.put_confirmation(&c).map_err(ApiError::storage)?;
            }
        }
        self.publish_events(events, now)?;
        Ok(true)
    }

    /// The events of one run, parsed back from the log.
    pub fn run_events(&self, run_id: &str) -> Result<Vec<Event>, ApiError> {
        let records = self.store.run_records(run_id).map_err(ApiError::storage)?;
        Ok(records.iter().filter_map(|r| serde_json::from_str(&r.data).ok()).collect())
    }

    /// Stores open segments that have been quiet for the idle-flush time.
    pub fn flush_idle(&mut self, now: i64) -> Result<(), ApiError> {
        let blocks = self.coalescer.flush_idle(now);
        if blocks.is_empty() {
            return Ok(());
        }
        // The segments stay open: their blocks go straight to the log.
        self.persist_then_send(blocks.into_iter().map(Staged::Durable).collect(), None)
    }

    /// Ends the active run if one of its deadlines has passed; returns the
    /// ended run and its reason, for the caller to tell the agent.
    ///
    /// The restart sweep fires only on a run that was found open when the
    /// thread was loaded and has published nothing since, for
    /// `restart_grace_ms`: a healthy run publishes, which clears the mark.
    /// Its open tool calls get `tool-interrupted`, then `run-finish
    /// {interrupted, crash_interrupted}`. A run silent for
    /// `run_idle_timeout_ms` ends with `run-finish {error, timeout}`.
    pub fn check_run_deadlines(&mut self, now: i64) -> Result<Option<(String, &'static str)>, ApiError> {
        let Some(a) = self.active.as_ref().filter(|a| a.pending == 0) else { return Ok(None) };
        let run_id = a.record.run_id.clone();
        let (status, reason) = if a.found_on_load.is_some_and(|t| now - t >= self.config.restart_grace_ms) {
            (FinishStatus::Interrupted, "crash_interrupted")
        } else if now - a.last_activity >= self.config.run_idle_timeout_ms {
            (FinishStatus::Error, "timeout")
        } else {
            return Ok(None);
        };
        self.end_run(&run_id, status, reason, now)?;
        Ok(Some((run_id, reason)))
    }

    /// When the thread falls idle past `ttl_ms` and may be deleted: never
    /// while a run holds it or a person's decision is awaited.
    pub fn expiry(&self, ttl_ms: i64) -> Option<i64> {
        (ttl_ms > 0 && self.active.is_none() && self.last_seq > 0).then_some(self.last_write_at + ttl_ms)
    }

    /// When the next idle flush is due, if any text is unstored.
    pub fn flush_deadline(&self) -> Option<i64> {
        self.coalescer.next_idle_deadline()
    }

    /// When [`Thread::check_run_deadlines`] next has something to decide.
    pub fn run_deadline(&self) -> Option<i64> {
        self.active.as_ref().filter(|a| a.pending == 0).map(|a| {
            let idle = a.last_activity + self.config.run_idle_timeout_ms;
            match a.found_on_load {
                Some(t) => idle.min(t + self.config.restart_grace_ms),
                None => idle,
            }
        })
    }

    /// Records a background task's state; an ended task leaves the list.
    pub fn set_background(&mut self, task: BackgroundTask) {
        self.background.retain(|t| t.task_id != task.task_id);
        if task.status == "running" {
            self.background.push(task);
        }
    }

    /// Background tasks of the thread still running.
    pub fn background_tasks(&self) -> &[BackgroundTask] {
        &self.background
    }

    /// Publishes a background task's events: allowed while the task runs,
    /// whether or not its run has finished.
    pub fn publish_background(&mut self, task_id: &str, events: Vec<Event>, now: i64) -> Result<(), ApiError> {
        if !self.background.iter().any(|t| t.task_id == task_id) {
            return Err(ApiError::new(409, "task_finished", "this background task has ended"));
        }
        if events.iter().any(|e| e.kind == Kind::RunFinish) {
            return Err(ApiError::bad_request("invalid_event", "a background task cannot finish its run"));
        }
        self.publish_events(events, now)
    }

    /// Adds a model's token usage to the active run's record (stored with its
    /// `run-finish`).
    pub fn record_usage(&mut self, run_id: &str, usage: &Value) {
        if let Some(a) = self.active.as_mut().filter(|a| a.record.run_id == run_id) {
            a.record.usage = Some(usage.to_string());
        }
    }

    /// Stores the built-in agent's checkpoint for the active run.
    pub fn save_checkpoint(&mut self, run_id: &str, data: &str) -> Result<(), ApiError> {
        if self.active.as_ref().is_none_or(|a| a.record.run_id != run_id) {
            return Ok(());
        }
        self.store.save_checkpoint(run_id, data).map_err(ApiError::storage)
    }

    pub fn checkpoint(&self, run_id: &str) -> Result<Option<String>, ApiError> {
        self.store.checkpoint(run_id).map_err(ApiError::storage)
    }

    /// The run was found open when the thread loaded (its driver may be gone).
    pub fn found_on_load(&self) -> bool {
        self.active.as_ref().is_some_and(|a| a.found_on_load.is_some())
    }

    /// Marks the active run as driven by this instance (a resumed built-in run).
    pub fn adopt_active_run(&mut self, now: i64) {
        if let Some(a) = self.active.as_mut() {
            a.found_on_load = None;
            a.last_activity = now;
        }
    }

    /// Whether the active run has tool calls in flight (not safe to resume).
    pub fn active_has_open_tool_calls(&self) -> bool {
        self.live_tree.as_ref().is_some_and(|(_, t)| !t.open_tool_calls().is_empty())
    }

    /// Conversation memory for a new run: earlier runs' user messages, answers
    /// and tool results as chat messages, newest kept first within
    /// `budget_chars`, read run by run (never the whole history at once).
    pub fn history(&self, budget_chars: usize, exclude_run: &str) -> Result<Vec<Value>, ApiError> {
        let mut newest_first: Vec<Vec<Value>> = Vec::new();
        let mut used = 0;
        let mut offset = 0;
        'pages: loop {
            let (runs, _) = self.store.runs_page(offset, 20).map_err(ApiError::storage)?;
            if runs.is_empty() {
                break;
            }
            offset += runs.len();
            for run in runs.iter().filter(|r| r.run_id != exclude_run && !r.replaced) {
                let tree = reducer::fold(&self.run_events(&run.run_id)?);
                let mut answer = String::new();
                if let Some(root) = tree.tree() {
                    for tc in &root.tool_calls {
                        let outcome = match (&tc.result, &tc.error) {
                            (Some(r), _) => r.to_string(),
                            (_, Some(e)) => format!("error: {e}"),
                            _ => "no result".into(),
                        };
                        answer.push_str(&format!("[tool {}({}) → {}]\n", tc.tool_name, tc.args, outcome));
                    }
                    answer.push_str(&root.text_content);
                }
                let cost = run.message.len() + answer.len();
                if used + cost > budget_chars {
                    break 'pages;
                }
                used += cost;
                let mut pair = vec![json!({ "role": "user", "content": run.message })];
                if !answer.is_empty() {
                    pair.push(json!({ "role": "assistant", "content": answer }));
                }
                newest_first.push(pair);
            }
        }
        Ok(newest_first.into_iter().rev().flatten().collect())
    }

    /// The thread's id, as the Worker routed it (request ids embed it).
    pub fn set_thread_id(&mut self, thread_id: &str) {
        if self.thread_id != thread_id {
            self.thread_id = thread_id.to_owned();
        }
    }

    pub fn thread_id(&self) -> &str {
        &self.thread_id
    }

    /// Whether the active run waits for a person.
    pub fn is_suspended(&self) -> bool {
        self.active.as_ref().is_some_and(|a| a.pending > 0)
    }

    /// Whether `tool` was approved with scope `session` on this thread.
    pub fn session_approved(&self, tool: &str) -> Result<bool, ApiError> {
        self.store.session_approved(tool).map_err(ApiError::storage)
    }

    /// Publishes a `confirmation-request` into `run_id` and records it as
    /// pending, with the approval policy's TTL and approver for its tool.
    /// `payload` is the request; its `requestId` is replaced by a
    /// thread-scoped one made from `local_id`. Returns the request id.
    pub fn request_confirmation(
        &mut self,
        run_id: &str,
        agent_id: &str,
        payload: Value,
        local_id: &str,
        agent_request_id: Option<String>,
        now: i64,
    ) -> Result<String, ApiError> {
        let (ev, record) = self.confirmation_event(run_id, agent_id, payload, local_id, agent_request_id, now)?;
        let request_id = record.request_id.clone();
        self.publish_run(run_id, vec![ev], now)?;
        self.store_confirmations(vec![record])?;
        Ok(request_id)
    }

    fn confirmation_event(
        &self,
        run_id: &str,
        agent_id: &str,
        mut payload: Value,
        local_id: &str,
        agent_request_id: Option<String>,
        now: i64,
    ) -> Result<(Event, Confirmation), ApiError> {
        let request_id = confirm::request_id(&self.thread_id, local_id);
        payload["requestId"] = request_id.clone().into();
        let payload = event::canonical_payload(Kind::ConfirmationRequest, payload)
            .map_err(|e| ApiError::bad_request("invalid_event", e.0))?;
        let policy = self.config.approval_policy.get(payload["toolName"].as_str().unwrap_or_default());
        let record = Confirmation {
            request_id: request_id.clone(),
            run_id: run_id.to_owned(),
            agent_id: agent_id.to_owned(),
            tool_call_id: payload["toolCallId"].as_str().unwrap_or_default().to_owned(),
            tool_name: payload["toolName"].as_str().unwrap_or_default().to_owned(),
            input_type: payload["inputType"].as_str().unwrap_or("approval").to_owned(),
            state: ConfirmState::Pending,
            created_at: now,
            expires_at: policy.and_then(|p| p.ttl_ms).map(|ttl| now + ttl),
            approver: policy.and_then(|p| p.approver.clone()),
            decision: None,
            agent_request_id,
        };
        if self.store.confirmation(&request_id).map_err(ApiError::storage)?.is_some() {
            return Err(ApiError::new(409, "duplicate_request", "a confirmation with this requestId exists"));
        }
        Ok((Event::new(Kind::ConfirmationRequest, run_id, agent_id, now, payload), record))
    }

    fn store_confirmations(&mut self, records: Vec<Confirmation>) -> Result<(), ApiError> {
        for record in records {
            self.store.put_confirmation(&record).map_err(ApiError::storage)?;
            if let Some(a) = self.active.as_mut().filter(|a| a.record.run_id == record.run_id) {
                a.pending += 1;
            }
        }
        Ok(())
    }

    /// `POST /instance-ai/confirm/:requestId`: applies a decision.
    ///
    /// 404 for a request this thread does not hold, 410 `confirmation_expired`
    /// once it lapsed, 409 `confirmation_decided` once decided (or settled by
    /// a cancel), 400 for a body that does not fit its input type, 403 when
    /// the decider lacks the approver role (`roles` is `None` when callers are
    /// not authenticated). A `session` approval approves later calls of the
    /// same tool in this thread.
    pub fn decide(&mut self, request_id: &str, body: &Value, roles: Option<&[String]>, now: i64) -> Result<Confirmation, ApiError> {
        let mut c = self
            .store
            .confirmation(request_id)
            .map_err(ApiError::storage)?
            .ok_or_else(|| ApiError::not_found("confirmation_not_found", "no such confirmation request"))?;
        if c.state == ConfirmState::Pending && c.expires_at.is_some_and(|t| t <= now) {
            self.expire(&mut c)?;
        }
        match c.state {
            ConfirmState::Pending => {}
            ConfirmState::Expired => {
                return Err(ApiError::new(410, "confirmation_expired", "this request lapsed before a decision"))
            }
            other => {
                return Err(ApiError::new(409, "confirmation_decided", "this request has already been settled")
                    .with("state", other.as_str()))
            }
        }
        let decision = confirm::check_decision(&c.input_type, body)?;
        if let (Some(role), Some(roles)) = (&c.approver, roles) {
            if !roles.contains(role) {
                return Err(ApiError::new(403, "approver_required", format!("deciding this request needs the `{role}` role")));
            }
        }
        let approved = decision["approved"].as_bool() == Some(true);
        c.state = if approved { ConfirmState::Approved } else { ConfirmState::Denied };
        if approved && decision["scope"] == "session" {
            self.store.approve_for_session(&c.tool_name).map_err(ApiError::storage)?;
        }
        c.decision = Some(decision);
        self.store.put_confirmation(&c).map_err(ApiError::storage)?;
        self.settled(&c.run_id, now);
        Ok(c)
    }

    fn expire(&mut self, c: &mut Confirmation) -> Result<(), ApiError> {
        c.state = ConfirmState::Expired;
        self.store.put_confirmation(c).map_err(ApiError::storage)?;
        let now = c.expires_at.unwrap_or_default();
        self.settled(&c.run_id, now);
        Ok(())
    }

    fn settled(&mut self, run_id: &str, now: i64) {
        if let Some(a) = self.active.as_mut().filter(|a| a.record.run_id == run_id) {
            a.pending = a.pending.saturating_sub(1);
            // The wait is over; the run's deadlines start again from now.
            a.last_activity = now.max(a.last_activity);
            a.found_on_load = None;
        }
    }

    /// Settles every pending confirmation whose time is up; returns them.
    pub fn expire_due(&mut self, now: i64) -> Result<Vec<Confirmation>, ApiError> {
        let mut out = Vec::new();
        for mut c in self.store.pending_confirmations().map_err(ApiError::storage)? {
            if c.expires_at.is_some_and(|t| t <= now) {
                self.expire(&mut c)?;
                out.push(c);
            }
        }
        Ok(out)
    }

    /// The approver roles pending confirmations name.
    pub fn pending_approvers(&self) -> Result<Vec<String>, ApiError> {
        Ok(self.store.pending_confirmations().map_err(ApiError::storage)?.into_iter().filter_map(|c| c.approver).collect())
    }

    /// When the next pending confirmation lapses.
    pub fn next_expiry(&self) -> Result<Option<i64>, ApiError> {
        Ok(self.store.pending_confirmations().map_err(ApiError::storage)?.iter().filter_map(|c| c.expires_at).min())
    }

    /// The confirmation of tool call `tool_call_id` (of `run_id`, if given):
    /// agora's approve/reject routes name the call, not the request.
    pub fn confirmation_for_call(&self, tool_call_id: &str, run_id: Option<&str>) -> Result<Option<Confirmation>, ApiError> {
        let found = self.store.confirmation_by_call(tool_call_id).map_err(ApiError::storage)?;
        Ok(found.filter(|c| run_id.is_none_or(|r| r == c.run_id)))
    }

    pub fn confirmation(&self, request_id: &str) -> Result<Option<Confirmation>, ApiError> {
        self.store.confirmation(request_id).map_err(ApiError::storage)
    }

    /// Replaces the id source (the Worker's is its CSPRNG).
    pub fn set_id_source(&mut self, ids: Rc<dyn Fn(&str) -> String>) {
        self.ids = ids;
    }

    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    /// Runs the thread started on its own since the last call.
    pub fn take_started(&mut self) -> Vec<Started> {
        std::mem::take(&mut self.started)
    }

    fn new_item(&self, message: String, model: Option<String>, now: i64) -> QueueItem {
        let id = route::scoped(&self.thread_id, &(self.ids)("msg"));
        QueueItem { message_id: id.clone(), run_id: id, message, queued_at: now, model }
    }

    fn start_item(&mut self, item: QueueItem, now: i64) -> Result<Started, ApiError> {
        let token = (self.ids)("tlp");
        let run = self.start_run(
            StartRun {
                run_id: item.run_id,
                message_id: item.message_id,
                message: item.message,
                publish_token: token.clone(),
                driver: self.config.driver,
                model: item.model,
            },
            now,
        )?;
        Ok(Started { run, publish_token: token })
    }

    /// Starts the next message when no run holds the thread: an interrupting
    /// one first, else the queue's head (unless paused).
    fn start_next(&mut self, now: i64) -> Result<(), ApiError> {
        if self.active.is_some() {
            return Ok(());
        }
        let next = match self.interrupting.take() {
            Some(item) => Some(item),
            None => {
                let head = self.queue.pop_next();
                if head.is_some() {
                    self.save_queue(now)?;
                }
                head
            }
        };
        if let Some(item) = next {
            let started = self.start_item(item, now)?;
            self.started.push(started);
        }
        Ok(())
    }

    /// Stores the queue and announces it: a durable `queue-updated` with the
    /// whole queue, so every tab sees the same snapshot.
    fn save_queue(&mut self, now: i64) -> Result<(), ApiError> {
        let doc = serde_json::to_string(&self.queue).expect("the queue serialises");
        self.store.set_meta(QUEUE_KEY, Some(&doc)).map_err(ApiError::storage)?;
        let run_id = self.active.as_ref().map_or("thread".to_owned(), |a| a.record.run_id.clone());
        let ev = Event::new(Kind::QueueUpdated, &run_id, ROOT_AGENT, now, serde_json::to_value(&self.queue).expect("serialises"));
        self.commit(vec![ev], None)
    }

    /// `mode: "queue"`: starts the message at once when the thread is free
    /// (and nothing waits before it), else queues it. Returns the item, its
    /// position, and the run when it started.
    pub fn enqueue(&mut self, message: String, model: Option<String>, now: i64) -> Result<(QueueItem, usize, Option<RunRecord>), ApiError> {
        let item = self.new_item(message, model, now);
        if self.active.is_none() && self.queue.items.is_empty() {
            let started = self.start_item(item.clone(), now)?;
            let run = started.run.clone();
            self.started.push(started);
            return Ok((item, 0, Some(run)));
        }
        let position = self.queue.push(item.clone())?;
        self.save_queue(now)?;
        // A paused queue on an idle thread keeps it; otherwise it may start.
        self.start_next(now)?;
        Ok((item, position, None))
    }

    /// `mode: "interrupt"`: cancels the active run and runs this message next.
    /// Returns the item and the run it interrupted.
    pub fn interrupt(&mut self, message: String, model: Option<String>, now: i64) -> Result<(QueueItem, Option<String>), ApiError> {
        let item = self.new_item(message, model, now);
        let Some(active) = self.active.as_ref().map(|a| a.record.run_id.clone()) else {
            let started = self.start_item(item.clone(), now)?;
            self.started.push(started);
            return Ok((item, None));
        };
        self.interrupting = Some(item.clone());
        self.end_run(&active, FinishStatus::Cancelled, "interrupted", now)?;
        Ok((item, Some(active)))
    }

    /// Queue routes: edit, move, remove, pause, resume. Each stores and
    /// announces the new queue.
    pub fn queue_edit(&mut self, message_id: &str, message: String, now: i64) -> Result<(), ApiError> {
        self.queue.edit(message_id, message)?;
        self.save_queue(now)
    }

    pub fn queue_move(&mut self, message_id: &str, position: usize, now: i64) -> Result<(), ApiError> {
        self.queue.move_to(message_id, position)?;
        self.save_queue(now)
    }

    pub fn queue_remove(&mut self, message_id: &str, now: i64) -> Result<(), ApiError> {
        self.queue.remove(message_id)?;
        self.save_queue(now)
    }

    pub fn queue_pause(&mut self, paused: bool, now: i64) -> Result<(), ApiError> {
        self.queue.paused = paused;
        self.save_queue(now)?;
        self.start_next(now)
    }

    /// `regenerate: true`: answers the thread's last user message again under
    /// a new run; the answer it replaces no longer feeds the model.
    pub fn regenerate(&mut self, model: Option<String>, now: i64) -> Result<RunRecord, ApiError> {
        if let Some(a) = &self.active {
            return Err(ApiError::new(409, "run_active", "a run is active; regenerate after it settles")
                .with("runId", a.record.run_id.clone()));
        }
        let (runs, _) = self.store.runs_page(0, 1).map_err(ApiError::storage)?;
        let Some(mut last) = runs.into_iter().next() else {
            return Err(ApiError::bad_request("thread_required", "regenerate needs a thread with a message"));
        };
        last.replaced = true;
        self.store.commit(&[], std::slice::from_ref(&last)).map_err(ApiError::storage)?;
        let item = self.new_item(last.message, model, now);
        let started = self.start_item(item, now)?;
        let run = started.run.clone();
        self.started.push(started);
        Ok(run)
    }

    /// `GET .../status`.
    pub fn status(&self) -> Value {
        let mut v = json!({
            "hasActiveRun": self.active.is_some(),
            "isSuspended": self.is_suspended(),
            "backgroundTasks": self.background,
            "queue": self.queue,
        });
        if let Some(a) = &self.active {
            v["runId"] = a.record.run_id.clone().into();
        }
        v
    }

    /// `GET .../messages`: a page of runs, newest page first (`page` 0),
    /// messages oldest first within it, each assistant message with its agent
    /// tree folded from the log. `nextEventId` is read in the same block, so a
    /// client that connects from `nextEventId - 1` sees nothing twice.
    pub fn messages(&self, thread_id: &str, limit: usize, page: usize) -> Result<Value, ApiError> {
        let (runs, total) =
            self.store.runs_page(page.saturating_mul(limit), limit).map_err(ApiError::storage)?;
        let mut messages = Vec::with_capacity(runs.len() * 2);
        for run in runs.iter().rev().filter(|r| !r.replaced) {
            messages.push(json!({
                "id": run.message_id,
                "runId": run.run_id,
                "role": "user",
                "createdAt": run.created_at,
                "content": run.message,
                "reasoning": "",
                "isStreaming": false,
            }));
            let events = self.run_events(&run.run_id)?;
            let tree = reducer::fold(&events);
            let root = tree.tree();
            messages.push(json!({
                "id": format!("{}:assistant", run.run_id),
                "runId": run.run_id,
                "role": "assistant",
                "createdAt": run.created_at,
                "content": root.as_ref().map(|r| r.text_content.clone()).unwrap_or_default(),
                "reasoning": root.as_ref().map(|r| r.reasoning.clone()).unwrap_or_default(),
                "isStreaming": run.state == RunState::Running,
                "status": run.state.as_str(),
                "usage": run.usage.as_deref().and_then(|u| serde_json::from_str::<Value>(u).ok()),
                "agentTree": root,
            }));
        }
        Ok(json!({
            "threadId": thread_id,
            "messages": messages,
            "nextEventId": self.last_seq + 1,
            "queue": self.queue,
            "page": page,
            "limit": limit,
            "totalRuns": total,
        }))
    }

    /// Rows written since the store was opened.
    pub fn rows_written(&self) -> u64 {
        self.store.rows_written()
    }

    /// Bytes of delta text held in memory, not yet stored.
    pub fn buffered_bytes(&self) -> usize {
        self.coalescer.buffered_bytes()
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
