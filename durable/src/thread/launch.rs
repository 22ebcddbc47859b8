//! Launching the runs a send (or the queue) started: the shell's, after
//! each request, alarm and agent webhook. A run's agent starts: the
//! built-in loop, or the external agent's webhook; a run whose agent cannot
//! start ends at once. (The owner's inbox hears of the run from the
//! thread's report: `thread/inbox.rs`.)

use super::{Sink, Started, Thread};
use crate::effect::Effect;
use crate::log::event::{Event, FinishStatus, Kind};
use crate::settings::Settings;
use crate::storage::store::{Driver, RunRecord, Store};
use serde_json::{json, Value};

/// The runs a thread started, to launch ([`Thread::launch`]).
pub struct Launch<'t, S: Store, K: Sink> {
    thread: &'t mut Thread<S, K>,
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// The runs the thread started, to launch.
    pub fn launch(&mut self) -> Launch<'_, S, K> {
        Launch { thread: self }
    }
}

impl<S: Store, K: Sink> Launch<'_, S, K> {
    /// Launches the runs the thread started (a send, or the queue when a run
    /// ended): starts the built-in agent or signals the external one. A run whose agent cannot
    /// start ends at once with an error rather than lock the thread.
    pub fn started(&mut self, settings: &Settings, now: i64) -> Vec<Effect> {
        let mut effects = std::mem::take(&mut self.thread.outbox);
        while !self.thread.started.is_empty() {
            for s in std::mem::take(&mut self.thread.started) {
                effects.extend(self.one(s, settings, now));
            }
        }
        effects
    }

    fn one(&mut self, s: Started, settings: &Settings, now: i64) -> Vec<Effect> {
        let run = &s.run;
        let mut effects = Vec::new();
        let started = match run.driver {
            Driver::Builtin => {
                self.thread.agent_loop().start(run, s.client_tools.clone(), settings, now).map_err(|e| e.to_string())
            }
            Driver::Webhook => match &settings.webhook_url {
                None => Err("no agent webhook is configured".to_owned()),
                Some(_) => Ok(Effect::Webhook {
                    body: self.start_signal(run, &s.publish_token, settings),
                    start_of: Some(run.run_id.clone()),
                }),
            },
        };
        match started {
            Ok(effect) => effects.push(effect),
            Err(why) => self.failed(&run.run_id, &why, now),
        }
        effects
    }

    /// The external agent's start signal, its publish URL on `PUBLIC_URL`,
    /// else on the origin of the send that started the run.
    fn start_signal(&mut self, run: &RunRecord, token: &str, settings: &Settings) -> Value {
        let origin = settings
            .public_url
            .clone()
            .or_else(|| self.thread.send_origin.get(self.thread.journal.store()).ok().flatten())
            .unwrap_or_default();
        crate::webhook::start(self.thread.journal.thread_id(), run, token, &origin)
    }

    /// A run's agent could not start (`why`): the run ends with an `error`
    /// event and `run-finish {error}`; the next queued message may start.
    pub fn failed(&mut self, run_id: &str, why: &str, now: i64) {
        let Some(run) = self.thread.runs.active_run().filter(|r| r.run_id == run_id).cloned() else { return };
        let reason = if run.driver == Driver::Webhook { "agent webhook failed" } else { "agent failed to start" };
        let err = Event::built(Kind::Error, run_id, &run.agent_id, now, json!({ "content": why }));
        // A storage failure here leaves the run to its idle timeout.
        if self.thread.publish_run(run_id, vec![err], now).is_ok() {
            let _ = self.thread.end_run(run_id, FinishStatus::Error, reason, now);
        }
    }
}
