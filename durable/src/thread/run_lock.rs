//! The thread's run lock, and what the thread knows of the run holding it:
//! its record, when it last spoke, how many requests of it wait for a
//! person, its fold so far, and the background sub-agents that outlive it.
//!
//! Invariants enforced here:
//! - At most one run holds the lock: [`RunLock::take`] is the compare-and-set
//!   (409 `run_active` while another holds it), and only
//!   [`RunLock::release`] frees it.
//! - A run waiting for a person (`pending > 0`) is suspended: neither its
//!   idle timeout nor the restart sweep applies ([`RunLock::due`]); the wait
//!   may last hours and costs nothing.
//! - The fold (`live_tree`) is of the run holding the lock, or of none.

use super::error::{Busy, Error};
use crate::agent::BackgroundTask;
use crate::auth::{constant_time_eq, hash_token};
use crate::log::event::{Event, FinishStatus};
use crate::log::queued::Queue;
use crate::log::reducer::{self, AgentNode, TreeBuilder};
use crate::settings::Config;
use crate::storage::store::{Driver, RunRecord};
use serde::Serialize;

/// A time long before any other.
const NEVER: i64 = i64::MIN / 2;

#[derive(Debug)]
struct Active {
    record: RunRecord,
    /// Last time an event was published into the run (ms).
    last_activity: i64,
    /// The publish before the last one this instance saw (ms; the run's
    /// start at first, never a load): two within a quiet interval make the
    /// run busy ([`RunLock::busy`]).
    prev_publish: i64,
    last_publish: i64,
    /// Set when the run was found open on load: the time it was found.
    found_on_load: Option<i64>,
    /// Confirmations of this run awaiting a person.
    pending: usize,
}

/// A live run's state as a joining client needs it ([`RunLock::snapshot`]),
/// carried to the relay on the subscriber's socket; each protocol frames it
/// in its own words, or not at all.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSnapshot {
    pub run_id: String,
    pub agent_tree: AgentNode,
    /// The run waits on a person (or a client's tool).
    pub suspended: bool,
    pub background_tasks: Vec<BackgroundTask>,
}

/// Whether a run holds the thread, and what waits ([`RunLock::status`]).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub has_active_run: bool,
    pub is_suspended: bool,
    pub background_tasks: Vec<BackgroundTask>,
    pub queue: Queue,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

#[derive(Debug, Default)]
pub struct RunLock {
    active: Option<Active>,
    /// The active run folded so far: what decides where segments end.
    live_tree: Option<(String, TreeBuilder)>,
    /// Background sub-agents still running (they outlive their run's finish).
    background: Vec<BackgroundTask>,
}

impl RunLock {
    /// The lock as a thread loading finds it: `running` still holds it (found
    /// open, at `now`), with `pending` requests of it waiting for a person.
    /// Its fold is made by [`RunLock::refold`].
    pub(super) fn found(running: Option<RunRecord>, pending: usize, now: i64) -> RunLock {
        let active = running.map(|record| Active {
            record,
            last_activity: now,
            prev_publish: NEVER,
            last_publish: NEVER,
            found_on_load: Some(now),
            pending,
        });
        RunLock { active, live_tree: None, background: Vec::new() }
    }

    /// The run holding the lock.
    /// Checks a bearer publish token against `run_id` (the active run, else
    /// the one `stored` finds): refused when absent, when it is not that
    /// run's token, and for a run the thread never had.
    pub fn authorize(
        &self,
        run_id: &str,
        token: Option<&str>,
        stored: impl FnOnce(&str) -> Result<Option<RunRecord>, Error>,
    ) -> Result<(), Error> {
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Err(Error::PublishTokenMissing);
        };
        let run = match self.active_run() {
            Some(r) if r.run_id == run_id => r.clone(),
            _ => stored(run_id)?.ok_or(Error::RunNotFound)?,
        };
        if !constant_time_eq(hash_token(token).as_bytes(), run.token_hash.as_bytes()) {
            return Err(Error::PublishTokenWrong);
        }
        Ok(())
    }

    /// The active run's state, for a client joining the thread's log: its
    /// id, agent tree so far, whether it waits on a person, and the
    /// background tasks. `open` are the journal's open segments. A protocol
    /// with a frame for it (Instance AI's `run-sync`) sends it after the
    /// replay, live-only and without an id, so a client rebuilds its run
    /// state from it instead of from a replay it may have skipped.
    ///
    /// Invariant: the tree holds what the log holds, never the text of a
    /// segment still open: that follows it as the segment's snapshot delta,
    /// which a client adds to the tree it took (so each piece of text is
    /// shown once, whether a client joins mid-answer or reconnects).
    pub fn snapshot(&self, open: Vec<Event>) -> Option<RunSnapshot> {
        let run_id = self.holder()?;
        let open: Vec<_> = open
            .into_iter()
            .filter(|e| e.run_id == run_id)
            .map(|e| {
                let text = e.payload.text().map(|(t, _, _)| t.text.clone()).unwrap_or_default();
                let kind = e.kind();
                (e.agent_id, kind, e.response_id, text)
            })
            .collect();
        let tree = self.tree_without(&open)?;
        Some(RunSnapshot {
            run_id: run_id.to_owned(),
            agent_tree: tree,
            suspended: self.is_suspended(),
            background_tasks: self.background_tasks().to_vec(),
        })
    }

    /// What a thread says of its run lock and queue (`GET .../status`).
    pub fn status(&self, queue: &Queue) -> Status {
        Status {
            has_active_run: self.holder().is_some(),
            is_suspended: self.is_suspended(),
            background_tasks: self.background_tasks().to_vec(),
            queue: queue.clone(),
            run_id: self.holder().map(str::to_owned),
        }
    }

    pub fn active_run(&self) -> Option<&RunRecord> {
        self.active.as_ref().map(|a| &a.record)
    }

    /// The id of the run holding the lock.
    pub fn holder(&self) -> Option<&str> {
        self.active_run().map(|r| r.run_id.as_str())
    }

    /// Whether `run_id` holds the lock.
    pub fn holds(&self, run_id: &str) -> bool {
        self.holder() == Some(run_id)
    }

    /// Whether the active run waits for a person.
    pub fn is_suspended(&self) -> bool {
        self.active.as_ref().is_some_and(|a| a.pending > 0)
    }

    /// The run was found open when the thread loaded (its driver may be gone).
    pub fn found_on_load(&self) -> bool {
        self.active.as_ref().is_some_and(|a| a.found_on_load.is_some())
    }

    /// Refused with 409 `run_active` while a run holds the lock.
    pub(super) fn check_free(&self, why: Busy) -> Result<(), Error> {
        match self.holder() {
            Some(run) => Err(Error::run_active(run, why)),
            None => Ok(()),
        }
    }

    /// Starts folding `run_id`, about to take the lock (its `run-start` is
    /// folded as it is committed).
    pub(super) fn fold_from_start(&mut self, run_id: &str) {
        self.live_tree = Some((run_id.to_owned(), TreeBuilder::default()));
    }

    /// Takes the lock for `record` (its `run-start` stored): the
    /// compare-and-set, refused while another run holds it.
    pub(super) fn take(&mut self, record: RunRecord, now: i64) -> Result<(), Error> {
        self.check_free(Busy::Start)?;
        self.active = Some(Active {
            record,
            last_activity: now,
            prev_publish: NEVER,
            last_publish: now,
            found_on_load: None,
            pending: 0,
        });
        Ok(())
    }

    /// Frees the lock: its run's `run-finish` is stored.
    pub(super) fn release(&mut self) {
        self.active = None;
        self.live_tree = None;
    }

    /// The run holding the lock as its finish stores it.
    pub(super) fn finished_record(
        &self,
        run_id: &str,
        status: FinishStatus,
        reason: Option<String>,
        now: i64,
    ) -> Option<RunRecord> {
        let a = self.active.as_ref().filter(|a| a.record.run_id == run_id)?;
        let mut rec = a.record.clone();
        rec.state = status.into();
        rec.reason = reason;
        rec.finished_at = Some(now);
        Some(rec)
    }

    /// Whether a run keeps the object awake at `now`: the built-in agent's
    /// (its loop runs in the object) unless it waits for a person, or any
    /// run that published within `quiet_ms`.
    pub fn keeps_awake(&self, now: i64, quiet_ms: i64) -> bool {
        self.active
            .as_ref()
            .is_some_and(|a| (a.record.driver == Driver::Builtin && a.pending == 0) || now - a.last_activity < quiet_ms)
    }

    /// Whether a run is busy at `now`: the built-in agent's (its loop runs
    /// in the object) unless it waits for a person, or one whose last two
    /// publishes (or its start and first) both fall within `quiet_ms`. A
    /// single publish into a quiet run is not: an agent that publishes now
    /// and then lets the object sleep between.
    pub fn busy(&self, now: i64, quiet_ms: i64) -> bool {
        self.active
            .as_ref()
            .is_some_and(|a| (a.record.driver == Driver::Builtin && a.pending == 0) || now - a.prev_publish < quiet_ms)
    }

    /// `run_id` published: its idle deadline moves, and a run found open on
    /// load that publishes is not swept.
    pub(super) fn spoke(&mut self, run_id: &str, now: i64) {
        if let Some(a) = self.active_of(run_id) {
            a.prev_publish = a.last_publish;
            a.last_publish = now;
            a.last_activity = now;
            a.found_on_load = None;
        }
    }

    /// A request of `run_id` now waits for a person: the run is suspended.
    pub(super) fn suspend(&mut self, run_id: &str) {
        if let Some(a) = self.active_of(run_id) {
            a.pending += 1;
        }
    }

    /// A request of `run_id` was settled: once none waits the run goes on,
    /// its deadlines counted again from `now`.
    pub(super) fn settled(&mut self, run_id: &str, now: i64) {
        if let Some(a) = self.active_of(run_id) {
            a.pending = a.pending.saturating_sub(1);
            a.last_activity = now.max(a.last_activity);
            a.found_on_load = None;
        }
    }

    /// The object woke from sleep (its subscribers' sockets outlived the
    /// last instance): it did not restart, so an external agent's run found
    /// open is alive elsewhere, and only its idle timeout applies. (A
    /// built-in run never lets its object sleep: one found open lost its
    /// loop.)
    pub fn woke(&mut self, now: i64) {
        if let Some(a) = self.active.as_mut().filter(|a| a.record.driver == Driver::Webhook) {
            a.found_on_load = None;
            a.last_activity = a.last_activity.max(now);
        }
    }

    /// Adds a model's token usage to the active run's record (stored with its
    /// `run-finish`).
    pub(super) fn record_usage(&mut self, run_id: &str, usage: &serde_json::Value) {
        if let Some(a) = self.active_of(run_id) {
            a.record.usage = Some(usage.to_string());
        }
    }

    /// Whether the run holding the lock is a dead holder: found open when
    /// the thread loaded, waiting for no person, and the log silent since
    /// `last_write_at` for `restart_grace_ms`.
    pub(super) fn dead_holder(&self, last_write_at: i64, config: &Config, now: i64) -> bool {
        self.active.as_ref().is_some_and(|a| {
            a.found_on_load.is_some() && a.pending == 0 && now - last_write_at >= config.restart_grace_ms
        })
    }

    /// When [`RunLock::due`] next has something to decide.
    pub fn deadline(&self, config: &Config) -> Option<i64> {
        self.active.as_ref().filter(|a| a.pending == 0).map(|a| {
            let idle = a.last_activity + config.run_idle_timeout_ms;
            match a.found_on_load {
                Some(t) => idle.min(t + config.restart_grace_ms),
                None => idle,
            }
        })
    }

    /// The run that must end at `now`, how and why: a run found open on
    /// load and silent for `restart_grace_ms` is interrupted
    /// (`crash_interrupted`); one silent for `run_idle_timeout_ms` errs
    /// (`timeout`). A suspended run has no deadline.
    pub(super) fn due(&self, config: &Config, now: i64) -> Option<(String, FinishStatus, &'static str)> {
        let a = self.active.as_ref().filter(|a| a.pending == 0)?;
        let ending = if a.found_on_load.is_some_and(|t| now - t >= config.restart_grace_ms) {
            (FinishStatus::Interrupted, "crash_interrupted")
        } else if now - a.last_activity >= config.run_idle_timeout_ms {
            (FinishStatus::Error, "timeout")
        } else {
            return None;
        };
        Some((a.record.run_id.clone(), ending.0, ending.1))
    }

    /// The tool calls of the active run in flight, by agent.
    pub fn open_tool_calls(&self) -> Vec<(String, String)> {
        self.live_tree.as_ref().map(|(_, t)| t.open_tool_calls()).unwrap_or_default()
    }

    /// The active run's agent tree without the text of the segments still
    /// open (`open`: agent, kind, response id, text), which follows it.
    pub(super) fn tree_without(
        &self,
        open: &[(String, crate::log::event::Kind, Option<String>, String)],
    ) -> Option<AgentNode> {
        let run = self.holder()?;
        self.live_tree.as_ref().filter(|(r, _)| r == run).and_then(|(_, t)| t.tree_without(open))
    }

    /// Folds the active run again from its stored `events` (`None` when no
    /// run holds the lock): on load, and after a failed commit left the
    /// fold ahead of the log.
    pub(super) fn refold(&mut self, events: impl FnOnce(&str) -> Result<Vec<Event>, Error>) -> Result<(), Error> {
        self.live_tree = match self.holder().map(str::to_owned) {
            Some(run_id) => {
                let events = events(&run_id)?;
                Some((run_id, reducer::fold(&events)))
            }
            None => None,
        };
        Ok(())
    }

    /// The fold to stage events with, and the background agents whose
    /// segments a run's end leaves open.
    pub(super) fn staging(&mut self) -> (&mut Option<(String, TreeBuilder)>, &[BackgroundTask]) {
        (&mut self.live_tree, &self.background)
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

    fn active_of(&mut self, run_id: &str) -> Option<&mut Active> {
        self.active.as_mut().filter(|a| a.record.run_id == run_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> RunRecord {
        RunRecord::running(id)
    }

    fn config() -> Config {
        Config { run_idle_timeout_ms: 100, restart_grace_ms: 50, ..Config::default() }
    }

    #[test]
    fn one_run_holds_the_lock_until_it_is_released() {
        let mut lock = RunLock::default();
        lock.take(record("r1"), 0).unwrap();
        let refused = lock.take(record("r2"), 1).unwrap_err();
        assert!(matches!(refused, Error::RunActive { ref run_id, why: Busy::Start } if run_id == "r1"));
        assert!(lock.holds("r1") && !lock.holds("r2"));
        lock.release();
        assert_eq!(lock.holder(), None);
        lock.take(record("r2"), 2).unwrap();
        assert!(lock.holds("r2"));
    }

    /// A run that waits for a person has no deadline; once the last request
    /// settles, its idle timeout counts from the settling.
    #[test]
    fn a_suspended_run_has_no_deadline_and_its_clock_restarts_when_settled() {
        let mut lock = RunLock::default();
        lock.take(record("r1"), 0).unwrap();
        assert_eq!(lock.deadline(&config()), Some(100));
        lock.suspend("r1");
        lock.suspend("r1");
        assert!(lock.is_suspended());
        assert_eq!(lock.deadline(&config()), None);
        assert_eq!(lock.due(&config(), 10_000), None, "waits as long as it takes");
        lock.settled("r1", 500);
        assert!(lock.is_suspended(), "one request still waits");
        lock.settled("r1", 700);
        assert_eq!(lock.deadline(&config()), Some(800));
        assert_eq!(lock.due(&config(), 799), None);
        assert_eq!(lock.due(&config(), 800), Some(("r1".into(), FinishStatus::Error, "timeout")));
    }

    /// A run found open on load is swept after the restart grace unless it
    /// speaks (or the object only woke, for an external agent's run).
    #[test]
    fn a_run_found_on_load_is_swept_unless_it_speaks() {
        let found = || RunLock::found(Some(record("r1")), 0, 1_000);
        let lock = found();
        assert!(lock.found_on_load());
        assert_eq!(lock.due(&config(), 1_050), Some(("r1".into(), FinishStatus::Interrupted, "crash_interrupted")));
        let mut spoke = found();
        spoke.spoke("r1", 1_010);
        assert_eq!(spoke.due(&config(), 1_050), None);
        let mut woke = found();
        woke.woke(1_020);
        assert!(!woke.found_on_load(), "an external agent's run lives elsewhere");
        assert!(lock.dead_holder(1_000, &config(), 1_050));
        assert!(
            !RunLock::found(Some(record("r1")), 1, 1_000).dead_holder(1_000, &config(), 9_999),
            "it waits for a person"
        );
    }

    #[test]
    fn background_tasks_are_listed_while_they_run() {
        let mut lock = RunLock::default();
        let task = |status: &str| BackgroundTask {
            task_id: "t1".into(),
            role: "researcher".into(),
            agent_id: "a1".into(),
            status: status.into(),
            started_at: 0,
            run_id: "r1".into(),
        };
        lock.set_background(task("running"));
        lock.set_background(task("running"));
        assert_eq!(lock.background_tasks().len(), 1);
        lock.set_background(task("completed"));
        assert!(lock.background_tasks().is_empty());
    }
}
