//! What a thread tells outside itself: its owner's inbox (their directory:
//! `directory::inbox`) what it is (running, waiting for them and for what,
//! finished and how, its queue, title, last activity and spend), and the
//! deployer's webhooks what happened (`notify`), through the queue.
//!
//! Both are outboxes in the thread's storage (meta `inbox`), kept until
//! taken (the directory answered; the queue accepted the deliveries) and
//! tried again by the alarm meanwhile.
//!
//! Invariants enforced here:
//! - a report is made after the state it describes is committed (the shell
//!   asks [`Thread::report`] after every request, alarm, publish and a
//!   run's end) and kept until the directory took it: an unreachable
//!   directory loses nothing, the alarm tries again (doubling the wait up
//!   to [`RETRY_MAX_MS`]), and the reports owed are stored (meta `inbox`)
//!   once a delivery failed, with the last one taken once one succeeded;
//! - reports carry a version that only grows: the directory takes each
//!   once, in order, and one that arrives twice changes nothing;
//! - a report is the thread's state, not a delta: a thread whose instance
//!   went away between a commit and its report finds, when it loads again,
//!   that its state differs from what it last reported, and reports it.

use super::error::Error;
use super::{meta, Sink, Thread};
use crate::directory::inbox::{LastRun, Report, State, Wait};
use crate::effect::Effect;
use crate::notify::{Delivery, Notice};
use crate::storage::store::Store;
use serde::{Deserialize, Serialize};

/// First retry of a report the directory did not take, doubled up to
/// [`RETRY_MAX_MS`].
const RETRY_MS: i64 = 1_000;
const RETRY_MAX_MS: i64 = 300_000;

/// Most reports kept for the directory: past it, the oldest are dropped
/// (each report is the whole state: the newest says where the thread is).
const KEPT: usize = 50;

/// What the thread keeps of its reports (meta `inbox`): one write per
/// report the directory took (and one per failed delivery), none to make
/// one. A report made and lost with the instance before its directory took
/// it is made again: the next instance finds its state differs from the
/// one last taken.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Reports {
    /// The last report the directory took (stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken: Option<Report>,
    /// Reports the directory has not taken yet, oldest first (stored once a
    /// delivery failed, so an instance that goes meanwhile loses none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<Report>,
    /// The last report made (what the thread said it is).
    #[serde(skip)]
    last: Option<Report>,
    /// Webhook deliveries the queue has not taken yet, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deliveries: Vec<Delivery>,
    /// When pending reports are next tried, and the wait before that.
    #[serde(skip)]
    retry: Option<(i64, i64)>,
    /// When owed deliveries are next handed to the queue, and the wait.
    #[serde(skip)]
    delivery_retry: Option<(i64, i64)>,
    /// Read from storage.
    #[serde(skip)]
    loaded: bool,
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// The report to send the owner's directory now, if the thread's state
    /// changed since it last reported (or reports are owed): the reports
    /// not yet taken, oldest first. `None` for a thread nobody owns.
    pub fn report(&mut self, now: i64) -> Result<Option<Effect>, Error> {
        // Asked after every publish: nothing is read unless a report may be
        // due (loading reads storage once per instance).
        self.load_reports()?;
        if !self.journal.marks.changed && self.reports.last.is_some() {
            return Ok(None);
        }
        let Some(owner) = self.conversation().owner()? else { return Ok(None) };
        let mut next = self.inbox_state(now)?;
        let last = self.reports.last.clone();
        // Only what a person sees counts: not the event id or time alone.
        let same = last.as_ref().is_some_and(|l| {
            Report { version: l.version, event_id: l.event_id, updated_at: l.updated_at, ..next.clone() } == *l
        });
        self.journal.marks.changed = false;
        if same {
            return Ok(None);
        }
        // Above every version made before, by this instance or one that went
        // before its report was acknowledged (the clock moves on).
        next.version = last.map_or(1, |l| l.version + 1).max(now.max(0) as u64);
        self.reports.pending.push(next.clone());
        if self.reports.pending.len() > KEPT {
            let over = self.reports.pending.len() - KEPT;
            self.reports.pending.drain(..over);
        }
        self.reports.last = Some(next);
        Ok(Some(Effect::Report { actor: owner, reports: self.reports.pending.clone() }))
    }

    /// Whether the owner's directory ever took a report of this thread (a
    /// thread's first report is worth waiting for: until then the thread is
    /// not in its owner's inbox).
    pub fn reported_before(&self) -> bool {
        self.reports.taken.is_some()
    }

    /// The directory took every report up to `version`.
    pub fn reported(&mut self, version: u64) -> Result<(), Error> {
        self.load_reports()?;
        self.reports.retry = None;
        let Some(taken) = self.reports.pending.iter().find(|r| r.version == version).cloned() else { return Ok(()) };
        self.reports.pending.retain(|r| r.version > version);
        self.reports.taken = Some(taken);
        self.store_reports()
    }

    /// The directory could not be told: the reports owed are stored, and
    /// the alarm tries again.
    pub fn report_failed(&mut self, now: i64) -> Result<(), Error> {
        let wait = self.reports.retry.map_or(RETRY_MS, |(_, w)| (w * 2).min(RETRY_MAX_MS));
        self.reports.retry = Some((now + wait, wait));
        self.store_reports()
    }

    /// When owed reports or deliveries are next tried (the alarm's).
    pub fn report_deadline(&self) -> Option<i64> {
        let reports = self.reports.retry.filter(|_| !self.reports.pending.is_empty()).map(|(at, _)| at);
        let deliveries = self.reports.delivery_retry.filter(|_| !self.reports.deliveries.is_empty()).map(|(at, _)| at);
        reports.into_iter().chain(deliveries).min()
    }

    /// The webhook deliveries of what the log's last commits did (for the
    /// endpoints of `WEBHOOKS` that want it), kept until the queue takes
    /// them: the deliveries owed, oldest first. `None` when none is owed.
    pub fn deliveries(&mut self, now: i64) -> Result<Option<Effect>, Error> {
        let notices = std::mem::take(&mut self.journal.marks.notices);
        let endpoints = self.config.webhooks.clone();
        if notices.is_empty() || endpoints.is_empty() {
            return Ok(None);
        }
        self.load_reports()?;
        let owner = self.conversation().owner()?;
        let thread = self.journal.thread_id().to_owned();
        let ids = self.ids.clone();
        for n in &notices {
            let made = Delivery::of(n, &thread, owner.as_deref(), &endpoints, now, &mut || ids.id("msg"));
            self.reports.deliveries.extend(made);
        }
        self.store_reports()?;
        Ok(Some(Effect::Enqueue { deliveries: self.reports.deliveries.clone() }))
    }

    /// The thread is being deleted: the deliveries of `thread.deleted`, and
    /// of anything else owed (handed to the queue before the wipe; what it
    /// does not take goes with the thread).
    pub(super) fn deleted_deliveries(&mut self, now: i64) -> Result<Option<Effect>, Error> {
        self.journal.marks.notices.push(Notice { event: "thread.deleted", data: serde_json::json!({}) });
        self.deliveries(now)
    }

    /// The queue took these deliveries (by id).
    pub fn enqueued(&mut self, ids: &[String]) -> Result<(), Error> {
        self.load_reports()?;
        self.reports.delivery_retry = None;
        let before = self.reports.deliveries.len();
        self.reports.deliveries.retain(|d| !ids.contains(&d.id));
        if self.reports.deliveries.len() != before {
            self.store_reports()?;
        }
        Ok(())
    }

    /// The queue could not take the deliveries: the alarm tries again.
    pub fn enqueue_failed(&mut self, now: i64) {
        let wait = self.reports.delivery_retry.map_or(RETRY_MS, |(_, w)| (w * 2).min(RETRY_MAX_MS));
        self.reports.delivery_retry = Some((now + wait, wait));
    }

    /// The alarm: owed reports and deliveries whose retry is due, again.
    pub(super) fn reports_due(&mut self, now: i64) -> Result<Vec<Effect>, Error> {
        let mut out = Vec::new();
        let due = |retry: Option<(i64, i64)>| retry.is_some_and(|(at, _)| at <= now);
        if due(self.reports.delivery_retry) && !self.reports.deliveries.is_empty() {
            out.push(Effect::Enqueue { deliveries: self.reports.deliveries.clone() });
        }
        if due(self.reports.retry) && !self.reports.pending.is_empty() {
            if let Some(owner) = self.conversation().owner()? {
                out.push(Effect::Report { actor: owner, reports: self.reports.pending.clone() });
            }
        }
        Ok(out)
    }

    fn load_reports(&mut self) -> Result<(), Error> {
        if self.reports.loaded {
            return Ok(());
        }
        let stored = self.journal.store().meta(meta::INBOX_KEY)?;
        let mut reports: Reports = stored.and_then(|s| serde_json::from_str(&s).ok()).unwrap_or_default();
        reports.loaded = true;
        reports.last = reports.pending.last().cloned().or_else(|| reports.taken.clone());
        // A new instance checks its state against what it last reported
        // (the last instance may have gone between a commit and its report).
        self.journal.marks.changed = true;
        // Owed by an instance of before: tried at the next chance.
        if !reports.pending.is_empty() {
            reports.retry = Some((0, RETRY_MS / 2));
        }
        if !reports.deliveries.is_empty() {
            reports.delivery_retry = Some((0, RETRY_MS / 2));
        }
        self.reports = reports;
        Ok(())
    }

    fn store_reports(&mut self) -> Result<(), Error> {
        let text = serde_json::to_string(&self.reports).expect("reports serialise");
        Ok(self.journal.store_mut().set_meta(meta::INBOX_KEY, Some(&text))?)
    }

    /// The thread's state as its inbox row shows it (version 0: unnumbered).
    fn inbox_state(&mut self, now: i64) -> Result<Report, Error> {
        let last = self.reports.last.clone().unwrap_or_default();
        // A request waits for the person while its run goes on (the run
        // holding the thread, or one of its agents working in the
        // background): one left by a run that ended waits for nobody.
        let pending = self.journal.store().pending_confirmations()?;
        let live = |run: &str| self.runs.holds(run) || self.runs.background_tasks().iter().any(|t| t.run_id == run);
        let waiting = pending.iter().filter(|c| live(&c.run_id)).min_by_key(|c| c.created_at).map(|c| Wait {
            request_id: c.request_id.clone(),
            kind: c.input_type.clone(),
            tool_name: c.tool_name.clone(),
            expires_at: c.expires_at,
        });
        let run_id = self.runs.holder().map(str::to_owned);
        let state = match (&waiting, &run_id) {
            (Some(_), _) => State::Waiting,
            (None, Some(_)) => State::Running,
            (None, None) => State::Idle,
        };
        let marks = &self.journal.marks;
        let last_run = match &marks.finished {
            Some((run_id, status, at)) => {
                Some(LastRun { run_id: run_id.clone(), status: status.as_str().to_owned(), at: *at })
            }
            None => last.last_run.clone(),
        };
        let answer_id = marks.answer_id.max(last.answer_id);
        let ended = last_run.as_ref().map(|r| &r.run_id) != last.last_run.as_ref().map(|r| &r.run_id);
        let conversation = self.conversation();
        let (tokens, cost_usd) = if ended || last.version == 0 {
            let used = conversation.usage()?;
            let total = &used["total"];
            (total["totalTokens"].as_u64().unwrap_or(0), total["costUsd"].as_f64().unwrap_or(0.0))
        } else {
            (last.tokens, last.cost_usd)
        };
        let title = conversation.title()?.unwrap_or_default();
        let runs = conversation.run_count()? as u64;
        let created_at = match last.created_at {
            0 => self.journal.store().runs_page(0, 1)?.0.first().map_or(now, |r| r.created_at),
            at => at,
        };
        Ok(Report {
            thread_id: self.journal.thread_id().to_owned(),
            version: 0,
            event_id: self.journal.last_seq(),
            title,
            state,
            run_id,
            last_run,
            waiting,
            queued: self.waiting.queue().items.len() as u64,
            answer_id,
            created_at,
            updated_at: self.journal.last_write_at(),
            runs,
            tokens,
            cost_usd,
        })
    }
}
