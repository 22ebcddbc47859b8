//! What the built-in agent's loop keeps in the thread, and how a run gets
//! (back) to its loop: the first checkpoint of a new run, the resume of a
//! run whose confirmations are all settled, and the recovery of a run whose
//! loop died with the previous instance of the object.

use super::error::{Error, Setting};
use super::{Config, Sink, Thread};
use crate::agent::{self, BackgroundTask, Checkpoint, Job, Scope};
use crate::effect::{Drive, Effect};
use crate::log::event::{Event, FinishStatus, Kind, Payload};
use crate::settings::Settings;
use crate::storage::store::ConfirmState;
use crate::storage::store::{Driver, RunRecord, RunState, Store};
use serde_json::{json, Value};

/// The built-in agent's side of a thread ([`Thread::agent_loop`]): what its
/// loop stores and publishes through the shell's `agent::Host`, and how a
/// run gets (back) to its loop. Nothing here is a route's: a protocol's
/// routes reach the built-in agent only through the effects the thread
/// hands back.
pub struct AgentLoop<'t, S: Store, K: Sink> {
    thread: &'t mut Thread<S, K>,
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// The built-in agent's side of the thread.
    pub fn agent_loop(&mut self) -> AgentLoop<'_, S, K> {
        AgentLoop { thread: self }
    }
}

impl<S: Store, K: Sink> AgentLoop<'_, S, K> {
    /// Records a background task's state; an ended task leaves the list.
    pub fn set_background(&mut self, task: BackgroundTask) {
        self.thread.runs.set_background(task);
    }

    /// The loop's publish path (its `Host::publish`): into the run, or into
    /// a background task that outlives it. When storage refuses the events,
    /// the loop stops where it is, and nothing else would end the run: it
    /// ends here (`run-finish {error}`), rather than hold the lock until the
    /// idle timeout.
    ///
    /// A `context-compacted` is stored twice in the same block: in the log,
    /// and as the thread's record of the compaction by the run it runs
    /// through, which later runs' memories read.
    pub fn publish(&mut self, run_id: &str, scope: &Scope, events: Vec<Event>, now: i64) -> Result<(), Error> {
        let compactions: Vec<(String, String)> = events
            .iter()
            .filter_map(|e| match &e.payload {
                Payload::ContextCompacted(c) => Some((c.through.clone(), serde_json::to_string(c).ok()?)),
                _ => None,
            })
            .collect();
        let result = match scope {
            Scope::Run => self.thread.publish_run(run_id, events, now),
            Scope::Background(task) => self.publish_background(task, events, now),
            Scope::Compaction => self.publish_compaction(run_id, events, now),
        };
        if let Err(e) = &result {
            if matches!(e, Error::Storage(_)) && *scope != Scope::Compaction {
                let _ = self.thread.end_run(run_id, FinishStatus::Error, "storage refused the run's events", now);
            }
        }
        result?;
        for (through, data) in compactions {
            self.thread.journal.store_mut().put_compaction(&through, &data)?;
        }
        Ok(())
    }

    /// Publishes what a compaction a person asked for came to, into the
    /// (finished) run it runs through; it is no longer in flight.
    fn publish_compaction(&mut self, run_id: &str, events: Vec<Event>, now: i64) -> Result<(), Error> {
        let ours = |e: &Event| matches!(e.kind(), Kind::ContextCompacted | Kind::ContextCompactionFailed);
        if !events.iter().all(ours) || self.thread.conversation().run(run_id)?.is_none() {
            return Err(Error::invalid_event("a compaction publishes only what it came to"));
        }
        self.thread.compacting = None;
        self.thread.publish_events(events, now)
    }

    /// Publishes a background task's events: allowed while the task runs,
    /// whether or not its run has finished.
    fn publish_background(&mut self, task_id: &str, events: Vec<Event>, now: i64) -> Result<(), Error> {
        if !self.thread.runs.background_tasks().iter().any(|t| t.task_id == task_id) {
            return Err(Error::TaskFinished);
        }
        if events.iter().any(|e| e.kind() == Kind::RunFinish) {
            return Err(Error::invalid_event("a background task cannot finish its run"));
        }
        self.thread.publish_events(events, now)
    }

    /// Stores the loop's checkpoint for the active run (and the usage it
    /// carries, on the run's record).
    pub fn save_checkpoint(&mut self, cp: &Checkpoint) -> Result<(), Error> {
        let thread = &mut *self.thread;
        if !thread.runs.holds(&cp.run_id) {
            return Ok(());
        }
        let data = serde_json::to_string(cp).expect("checkpoints serialise");
        thread.journal.store_mut().save_checkpoint(&cp.run_id, &data)?;
        if let Some(c) = &cp.calibration {
            let c = serde_json::to_string(c).expect("a calibration serialises");
            thread.journal.store_mut().set_meta(super::meta::CALIBRATION_KEY, Some(&c))?;
        }
        if let Some(usage) = &cp.usage {
            thread.runs.record_usage(&cp.run_id, usage);
        }
        Ok(())
    }

    /// Publishes a `confirmation-request` of the loop's into `run_id` and
    /// records it as pending ([`Decisions::request`](super::Decisions::request)).
    /// Returns the request id.
    pub fn request_confirmation(
        &mut self,
        run_id: &str,
        agent_id: &str,
        payload: Value,
        local_id: &str,
        now: i64,
    ) -> Result<String, Error> {
        self.thread.decisions().request(run_id, agent_id, payload, local_id, None, now)
    }

    /// Starts the loop on a new run: conversation memory, the first
    /// checkpoint, the thread's title on its first message, then the loop.
    pub(super) fn start(
        &mut self,
        run: &RunRecord,
        client_tools: Vec<Value>,
        settings: &Settings,
        now: i64,
    ) -> Result<Effect, Error> {
        let tools = builtin_ready(settings)?;
        let agents = settings
            .agents
            .as_ref()
            .map_err(|why| Error::Misconfigured { setting: Setting::Agents, why: why.clone() })?;
        agents.get(run.turn.agent.as_deref()).map_err(Error::Input)?;
        let (_, cfg) = settings.turn_config(run.model.as_deref(), run.turn.agent.as_deref());
        let conversation = self.thread.conversation();
        let memory = conversation.history(&run.run_id, &super::Recall::of(&cfg))?;
        // A fork keeps its source's title.
        let first =
            conversation.run_count().map(|total| total == 1).unwrap_or(false) && conversation.forked_from()?.is_none();
        let sent_at = settings.message_timestamps.then(|| run.turn.sent_at.unwrap_or(run.created_at));
        let prefix = conversation.files_prefix()?.unwrap_or_default();
        let user = agent::UserTurn {
            message: &run.message,
            attachments: &run.turn.attachments,
            files_prefix: &prefix,
            page_context: run.turn.page_context.as_ref(),
            sent_at,
        };
        let (messages, layout) = agent::initial_messages(&cfg, memory, Some(user));
        let checkpoint = Checkpoint {
            client_tools,
            output: run.turn.output.clone(),
            context: Some(layout),
            calibration: conversation.calibration()?,
            ..Checkpoint::first(&run.run_id, self.thread.journal.thread_id(), messages)
        };
        self.save_checkpoint(&checkpoint)?;
        if first {
            let title = json!({ "title": agent::title_for(&run.message, &run.turn.attachments) });
            let ev = Event::built(Kind::ThreadTitleUpdated, &run.run_id, &run.agent_id, now, title);
            self.thread.publish_run(&run.run_id, vec![ev], now)?;
        }
        Ok(drive(self.thread, run, checkpoint, tools, settings))
    }

    /// After a restart: a built-in run found open lost its loop with the old
    /// instance. It resumes from its last checkpoint when no tool call was in
    /// flight (re-running a step whose tools had started could repeat their
    /// side effects); otherwise it ends `interrupted`. A suspended run waits
    /// in storage for its decisions: nothing to recover.
    pub fn recovery(&mut self, settings: &Settings, now: i64) -> Result<Vec<Effect>, Error> {
        let thread = &mut *self.thread;
        let Some(run) = thread.runs.active_run().cloned() else { return Ok(Vec::new()) };
        if run.driver != Driver::Builtin
            || run.state != RunState::Running
            || !thread.runs.found_on_load()
            || thread.runs.is_suspended()
        {
            return Ok(Vec::new());
        }
        let checkpoint = thread.conversation().checkpoint(&run.run_id)?;
        match checkpoint {
            Some(cp) if thread.runs.open_tool_calls().is_empty() => match builtin_ready(settings) {
                Ok(tools) => {
                    // Resumed here: no longer a run whose driver went away.
                    thread.runs.spoke(&run.run_id, now);
                    Ok(vec![drive(thread, &run, cp, tools, settings)])
                }
                Err(e) => {
                    thread.end_run(&run.run_id, FinishStatus::Error, &e.to_string(), now)?;
                    Ok(Vec::new())
                }
            },
            _ => {
                thread.end_run(&run.run_id, FinishStatus::Interrupted, "crash_interrupted", now)?;
                Ok(Vec::new())
            }
        }
    }
}

/// How long a compaction a person asked for holds off another: past it, a
/// compaction whose loop died is taken as over.
const COMPACTING_FOR_MS: i64 = 120_000;

/// What `POST .../compact` came to.
#[derive(Debug)]
pub enum Compacting {
    /// The summary step runs; its `context-compacted` follows in the log.
    Started { through: String, turns: usize, effect: Effect },
    /// The memory holds no turn the summary does not cover already.
    Nothing,
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// `POST .../compact`: folds the conversation the next run would
    /// remember (the active path, up to its leaf) into a summary now, as
    /// the built-in agent does past `AGENT_COMPACT_AT`. 409 `run_active`
    /// while a run holds the thread (a run compacts its own context), 409
    /// `compaction_active` while one asked for is under way.
    pub fn compact(&mut self, _: &super::Admitted, settings: &Settings, now: i64) -> Result<Compacting, Error> {
        self.runs.check_free(super::error::Busy::Compact)?;
        if self.compacting.is_some_and(|at| now - at < COMPACTING_FOR_MS) {
            return Err(Error::CompactionActive);
        }
        let tools = builtin_ready(settings)?;
        let conversation = self.conversation();
        let Some(leaf) = conversation.leaf()? else { return Ok(Compacting::Nothing) };
        let run = conversation.known_run(&leaf)?;
        let (_, cfg) = settings.turn_config(run.model.as_deref(), run.turn.agent.as_deref());
        let memory = conversation.memory_through(&leaf, &super::Recall::of(&cfg))?;
        let (messages, layout) = agent::initial_messages(&cfg, memory, None);
        let turns = layout.turns.len();
        if turns == 0 {
            return Ok(Compacting::Nothing);
        }
        let checkpoint = Checkpoint {
            context: Some(layout),
            calibration: conversation.calibration()?,
            ..Checkpoint::first(&leaf, self.journal.thread_id(), messages)
        };
        let mut effect = drive(self, &run, checkpoint, tools, settings);
        if let Effect::Drive(d) = &mut effect {
            d.job.compact = true;
        }
        self.compacting = Some(now);
        Ok(Compacting::Started { through: leaf, turns, effect })
    }
}

/// Refuses a send whose model's window cannot hold the system prompt, the
/// tools and the message with room for an answer (400 `context_too_small`):
/// such a run could only fail.
pub(super) fn check_fits(
    settings: &Settings,
    model: Option<&str>,
    agent: Option<&str>,
    message: &str,
) -> Result<(), Error> {
    let (_, cfg) = settings.turn_config(model, agent);
    let tools = settings
        .tools
        .as_ref()
        .map(|t| Value::Array(t.definitions(cfg.allowed_tools.as_deref(), true)).to_string().len())
        .unwrap_or(0);
    let bytes = cfg.system_prompt.len() + message.len() + tools + 64;
    let needed = agent::context::estimate(bytes, 0, None);
    let limit = cfg.budget().limit();
    if needed > limit {
        let model = cfg.model_id.clone().unwrap_or(cfg.model);
        return Err(Error::ContextTooSmall { model, needed, limit });
    }
    Ok(())
}

/// A suspended built-in run whose confirmations are all settled resumes:
/// the decisions are filled into its checkpoint's suspended step.
pub(super) fn resume_if_ready<S: Store, K: Sink>(
    thread: &Thread<S, K>,
    run_id: &str,
    settings: &Settings,
) -> Result<Option<Effect>, Error> {
    let Some(run) = thread.runs.active_run().filter(|r| r.run_id == run_id).cloned() else { return Ok(None) };
    let Some(mut cp) = thread.conversation().checkpoint(run_id)? else { return Ok(None) };
    let Some(calls) = cp.suspended.as_mut() else { return Ok(None) };
    let requests = thread.requests();
    for call in calls.iter_mut() {
        if let Some(rid) = &call.request_id {
            let Some(c) = requests.get(rid)? else { return Ok(None) };
            if c.state == ConfirmState::Pending {
                return Ok(None);
            }
            call.state = Some(c.state.as_str().to_owned());
            call.decision = c.decision;
        }
    }
    let tools = builtin_ready(settings)?;
    Ok(Some(drive(thread, &run, cp, tools, settings)))
}

/// The loop's effect for `run` from `checkpoint`.
fn drive<S: Store, K: Sink>(
    thread: &Thread<S, K>,
    run: &RunRecord,
    checkpoint: Checkpoint,
    tools: std::rc::Rc<agent::tools::Toolbox>,
    settings: &Settings,
) -> Effect {
    let (endpoint, config) = settings.turn_config(run.model.as_deref(), run.turn.agent.as_deref());
    let thread_id = thread.journal.thread_id();
    let job = Job {
        thread_id: thread_id.to_owned(),
        run_id: run.run_id.clone(),
        root_agent: run.agent_id.clone(),
        checkpoint,
        usage: None,
        trace: thread.config.tracing.then(|| super::telemetry::run_trace(thread_id, run)),
        compact: false,
    };
    Effect::Drive(Box::new(Drive { job, endpoint, config, tools, mcp: settings.mcp.clone() }))
}

/// The tools a client declared with its message (`[{name, description,
/// parameters}]`, the shape protocols' clients declare them in), checked
/// against the server's; offered to the built-in agent only.
///
/// Invariant: a client tool's name is no server tool's and no
/// `APPROVAL_POLICY` entry's (400 `invalid_client_tools`). Its result is
/// the thread owner's to give (`Confirmation::decider`), so a policy that
/// names an approver for the name would mean nothing for it, and a deployer
/// who wrote one must not believe it applies.
pub fn client_tools(config: &Config, declared: Option<&Value>, settings: &Settings) -> Result<Vec<Value>, Error> {
    let declared = match declared {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(Error::InvalidClientTools("`tools` must be an array".into())),
    };
    if declared.is_empty() || config.driver != Driver::Builtin {
        return Ok(Vec::new());
    }
    let tools = builtin_ready(settings)?.client_tools(declared).map_err(Error::InvalidClientTools)?;
    if let Some(t) = tools.iter().find(|t| config.approval_policy.get(&t.name).is_some()) {
        return Err(Error::InvalidClientTools(format!(
            "client tool name `{}` is taken: APPROVAL_POLICY names it, and a client tool's result is the thread owner's alone",
            t.name
        )));
    }
    Ok(declared.clone())
}

/// Whether the built-in agent can run: a model is configured and `TOOLS`
/// parses. Refusals are 503s with their own codes.
pub fn builtin_ready(settings: &Settings) -> Result<std::rc::Rc<agent::tools::Toolbox>, Error> {
    if settings.llm.is_none() {
        return Err(Error::AgentNotConfigured);
    }
    settings.tools.clone().map_err(|why| Error::Misconfigured { setting: Setting::Tools, why })
}
