//! A run's end and the thread's clocks: a run found open after a restart
//! (its holder dead or alive), cancel, the one way a run ends (`end_run`,
//! which settles what was in flight first), idle flushes, run deadlines,
//! the thread's TTL and the alarm that serves them all.

use super::send::tell_agent;
use super::*;
use crate::settings::Settings;

/// The result a tool call in flight when its run was cancelled settles
/// with (n8n's own words for it): a result, not an error, so no call is
/// left dangling and none reads as failed.
pub const CANCELLED_RESULT: &str = "[Tool call cancelled. User said: \"Run aborted\"]";

impl<S: Store, K: Sink> Thread<S, K> {
    /// Cancels the active run, if any: `run-finish {cancelled, user_cancelled}`.
    /// Idempotent: returns the cancelled run id, or `None` when nothing ran.
    pub fn cancel(&mut self, now: i64) -> Result<Option<String>, Error> {
        let Some(run_id) = self.runs.holder().map(str::to_owned) else {
            return Ok(None);
        };
        self.end_run(&run_id, FinishStatus::Cancelled, "user_cancelled", now)?;
        Ok(Some(run_id))
    }

    /// Ends `run_id` if it is the active run (`false` when it is not). Its
    /// open tool calls settle first: a cancelled run's as cancelled tool
    /// results ([`CANCELLED_RESULT`], seed line 363), an interrupted run's
    /// as `tool-interrupted`.
    pub fn end_run(&mut self, run_id: &str, status: FinishStatus, reason: &str, now: i64) -> Result<bool, Error> {
        if !self.runs.holds(run_id) {
            return Ok(false);
        }
        // No dangling tool calls: what was in flight settles first, as
        // cancelled or as interrupted. (The live fold holds the whole run: it
        // is refolded from the log when the thread loads.)
        use event::payload::{RunFinish, ToolError, ToolResult};
        let settle = |call: &str| match status {
            FinishStatus::Cancelled => {
                Some(Payload::ToolResult(ToolResult { tool_call_id: call.to_owned(), result: CANCELLED_RESULT.into() }))
            }
            FinishStatus::Interrupted => Some(Payload::ToolInterrupted(ToolError {
                tool_call_id: call.to_owned(),
                error: "the run was interrupted before this tool call finished".into(),
            })),
            FinishStatus::Completed | FinishStatus::Error => None,
        };
        let mut events = Vec::new();
        let open = self.runs.open_tool_calls();
        for (agent, call) in open {
            if let Some(payload) = settle(&call) {
                events.push(Event::new(payload, run_id, &agent, now));
            }
        }
        let fin = RunFinish { status, reason: Some(reason.to_owned()), output: None };
        events.push(Event::new(Payload::RunFinish(fin), run_id, ROOT_AGENT, now));
        self.publish_events(events, now)?;
        // Its pending confirmations are settled: no decision applies any more.
        self.decisions().cancel_of(run_id)?;
        Ok(true)
    }
}

/// The thread's clocks ([`Thread::clock`]), the shell's to run: waking from
/// sleep, the storage alarm and what it serves (the TTL, lapsed requests,
/// charges to retry, files to sweep, idle segments, run deadlines), when
/// it next fires, and the holder found dead by a send.
pub struct Clock<'t, S: Store, K: Sink> {
    thread: &'t mut Thread<S, K>,
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// The thread's clocks.
    pub fn clock(&mut self) -> Clock<'_, S, K> {
        Clock { thread: self }
    }
}

impl<S: Store, K: Sink> Clock<'_, S, K> {
    /// The object woke from sleep ([`RunLock::woke`](super::RunLock::woke)).
    pub fn woke(&mut self, now: i64) {
        self.thread.runs.woke(now);
    }

    /// The alarm: the thread's TTL, lapsed confirmations, idle flushes and
    /// run deadlines, each decided here.
    pub fn alarm(&mut self, settings: &Settings, now: i64) -> Result<Vec<Effect>, Error> {
        if self.expiry(settings.thread_ttl_ms).is_some_and(|t| t <= now) {
            // Idle past THREAD_TTL_DAYS: the thread goes, as on DELETE.
            let mut effects = Vec::new();
            self.thread.delete(&Admitted::by_the_thread(), now, &mut effects)?;
            return Ok(effects);
        }
        let mut effects = self.settle_lapsed(settings, now)?;
        effects.extend(self.thread.charges().charge_alarm(now)?);
        effects.extend(self.thread.reports_due(now)?);
        self.thread.fire_schedules(now)?;
        effects.extend(self.thread.journal.files_mut().sweep_files(settings.files.grace_ms, now)?);
        self.flush_idle(now)?;
        if let Some((run_id, reason)) = self.check_run_deadlines(now)? {
            effects.extend(tell_agent(settings, crate::webhook::cancel(&run_id, reason)));
        }
        effects.extend(self.thread.launch().started(settings, now));
        Ok(effects)
    }

    /// Settles the requests whose time is up (their runs go on), so a late
    /// decision meets 410 and no run is left waiting.
    pub fn settle_lapsed(&mut self, settings: &Settings, now: i64) -> Result<Vec<Effect>, Error> {
        let mut effects = Vec::new();
        for lapsed in self.thread.decisions().expire_due(now)? {
            effects.extend(super::serve::after_settled(self.thread, &lapsed, settings)?);
        }
        Ok(effects)
    }

    /// Whether the run holding the thread is a dead holder: found open when
    /// the thread loaded (its driver went with the last instance, or it
    /// runs elsewhere), silent since, for `restart_grace_ms` past its last
    /// event, and waiting for no person.
    pub fn dead_holder(&self, now: i64) -> bool {
        let thread = &*self.thread;
        thread.runs.dead_holder(thread.journal.last_write_at(), &thread.config, now)
    }

    /// Replaces a dead holder ([`Clock::dead_holder`]): it ends as the
    /// restart sweep would end it (`run-finish {interrupted,
    /// crash_interrupted}`), so the send or resume that found it is not
    /// refused, nor queued behind it for ever. An external agent is told.
    pub fn replace_dead_holder(&mut self, now: i64) -> Result<(), Error> {
        if !self.dead_holder(now) {
            return Ok(());
        }
        let thread = &mut *self.thread;
        let Some(run) = thread.runs.active_run().cloned() else { return Ok(()) };
        thread.end_run(&run.run_id, FinishStatus::Interrupted, "crash_interrupted", now)?;
        if run.driver == Driver::Webhook {
            let body = crate::webhook::cancel(&run.run_id, "crash_interrupted");
            thread.outbox.push(Effect::Webhook { body, start_of: None });
        }
        Ok(())
    }

    /// When undelivered charges are next tried.
    pub fn charge_deadline(&self) -> Option<i64> {
        self.thread.charge_retry.next_at()
    }

    /// Stores open segments that have been quiet for the idle-flush time.
    pub fn flush_idle(&mut self, now: i64) -> Result<(), Error> {
        if let Err(e) = self.thread.journal.flush_idle(now) {
            let Thread { journal, runs, waiting, .. } = &mut *self.thread;
            runs.refold(|run| journal.conversation(waiting.queue()).run_events(run))?;
            return Err(Error::Storage(e));
        }
        Ok(())
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
    pub fn check_run_deadlines(&mut self, now: i64) -> Result<Option<(String, &'static str)>, Error> {
        let Some((run_id, status, reason)) = self.thread.runs.due(&self.thread.config, now) else { return Ok(None) };
        self.thread.end_run(&run_id, status, reason, now)?;
        Ok(Some((run_id, reason)))
    }

    /// When the thread falls idle past `ttl_ms` and may be deleted: never
    /// while a run holds it, a person's decision is awaited, or it holds
    /// schedules.
    pub fn expiry(&self, ttl_ms: i64) -> Option<i64> {
        (ttl_ms > 0
            && self.thread.runs.holder().is_none()
            && self.thread.journal.last_seq() > 0
            && self.thread.schedules.is_empty())
        .then_some(self.thread.journal.last_write_at() + ttl_ms)
    }

    /// When the storage alarm should next fire: the active run's idle or
    /// restart deadline, a heartbeat every `heartbeat_ms` while the built-in
    /// agent runs (an outbound fetch alone does not keep the object
    /// resident; a suspended run needs none, it waits in storage), the next
    /// confirmation to lapse, the next unsent upload to remove, the next
    /// try of undelivered charges and of owed inbox reports, the next
    /// schedule, and the thread's TTL.
    pub fn next_alarm(&self, now: i64, settings: &crate::settings::Settings) -> Option<i64> {
        let running_builtin = self.thread.runs.active_run().is_some_and(|r| r.driver == Driver::Builtin)
            && !self.thread.runs.is_suspended();
        let run = self.thread.runs.deadline(&self.thread.config).map(|d| {
            if running_builtin {
                d.min(now + settings.heartbeat_ms)
            } else {
                d
            }
        });
        let expiry = self.thread.requests().next_expiry().ok().flatten();
        let sweep = self.thread.journal.files().next_sweep(settings.files.grace_ms);
        let owed = self.thread.report_deadline();
        [
            run,
            expiry,
            sweep,
            self.expiry(settings.thread_ttl_ms),
            self.charge_deadline(),
            owed,
            self.thread.schedule_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}
