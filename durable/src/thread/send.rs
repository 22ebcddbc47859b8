//! Sending a message, whichever protocol carries it: the send operation
//! (start, queue, interrupt or regenerate) and a client's own message ids.

use super::error::{Busy, Error, Setting};
use super::meta::OWNER_KEY;
use super::{Journal, RunLock, Sink, StartRun, Started, Thread, QUOTA_EXCEEDED, ROOT_AGENT};
use crate::access::{Caller, Grant};
use crate::agent::models::Catalog;
use crate::agent::quota::Budget;
use crate::effect::Effect;
use crate::files::NewFile;
use crate::input::{Asked, Mode, Send};
use crate::log::event::{Event, FinishStatus, Kind};
use crate::log::queued::Queue;
use crate::settings::Settings;
use crate::storage::store::{Driver, Store, Turn};
use crate::wire::ids;
use serde::Serialize;
use serde_json::{json, Value};

/// Who sends, as the route admitted them, and where the request came in.
#[derive(Clone, Debug)]
pub struct Sender<'a> {
    /// What the admission granted (a private field: a sender is made only
    /// from an admission, [`Sender::of`]).
    grant: Grant,
    pub caller: &'a Caller,
    /// The origin the request came in at (`https://host`).
    pub origin: &'a str,
    /// Their budget, as their directory said (`QUOTA`).
    pub budget: Option<Budget>,
    /// The files the Worker read from the send (`Call::files`).
    pub files: &'a [Option<NewFile>],
    /// Check and reserve only (`Call::reserve`).
    pub reserve: bool,
    /// A fresh random number (the log's generation, when a file is first
    /// reserved).
    pub random: u64,
    /// The `traceparent` the Worker forwarded (its request's span).
    pub trace: Option<String>,
}

impl<'a> Sender<'a> {
    /// The sender of `call`, as the route admitted them.
    pub fn of(admitted: &super::Admitted, call: &super::Call<'a>) -> Sender<'a> {
        Sender {
            grant: admitted.grant(),
            caller: call.caller,
            origin: call.origin,
            budget: call.budget,
            files: call.files,
            reserve: call.reserve,
            random: call.random,
            trace: (call.header)("traceparent").filter(|t| crate::trace::Parent::parse(t).is_some()),
        }
    }
}

/// What a protocol's send names itself: the user message's id and its
/// run's (the client's id kept), the tools the client declared, and the
/// mode when the protocol says it in its own words (over the body's).
#[derive(Debug, Default)]
pub struct Given {
    pub ids: Option<(String, String)>,
    pub client_tools: Vec<Value>,
    pub mode: Option<Mode>,
}

/// What a send did.
#[derive(Debug)]
pub enum Sent {
    /// A run started (or regenerated).
    Run { run_id: String, regenerated: bool },
    /// A queued (or interrupting) send's receipt: its 202.
    Queued(Queued),
    /// Checked, and its files reserved (`Sender::reserve`): the 200 body
    /// the Worker stores the bytes by (`Files::reserve_files`).
    Reserved(Value),
}

/// A send that waits to run: where it stands, in the queue as it is now.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Queued {
    pub queued: bool,
    pub thread_id: String,
    pub message_id: String,
    pub position: usize,
    pub queue: Queue,
    /// The run it started, when it started at once (or, interrupting, the
    /// run it will start once the one it cancels has ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The run an interrupting send cancelled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupting: Option<String>,
}

/// A client's user message, by the client's id.
#[derive(Debug)]
pub enum Seen {
    /// Not seen: the run it will start.
    New(String),
    /// Its run is active: the send follows it.
    Active(String),
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// Sends a message: starts, queues or regenerates. `body` is the send's
    /// JSON, `{message, mode?, model?, regenerate?}` (`input::Send`): a
    /// protocol whose body says more, or says it another way, passes what
    /// it asks for in this shape.
    ///
    /// `mode`: `reject` (default: 409 `run_active` while a run holds the
    /// thread), `queue` (202; starts at once when the thread is free, else
    /// waits in the thread's queue), `auto` (`reject`'s start when no run
    /// holds the thread, else `queue`'s 202) or `interrupt` (cancels the
    /// active run and runs this message next). A send that is refused stores nothing; the
    /// first accepted send of a thread makes its caller the owner.
    pub fn send(
        &mut self,
        body: &Value,
        given: Given,
        who: Sender,
        settings: &Settings,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Sent, Error> {
        let catalog = ready_to_send(self.config.driver, settings)?;
        let mut send =
            Send::parse(body, settings.limits.max_message_bytes, self.journal.thread_id(), settings.files.max_files)
                .map_err(Error::Input)?;
        if let (Send::Message { mode, .. }, Some(given)) = (&mut send, given.mode) {
            *mode = given;
        }
        if let Send::Message { mode: mode @ Mode::Auto, .. } = &mut send {
            *mode = if self.runs.active_run().is_some() { Mode::Queue } else { Mode::Reject };
        }
        // An edit waits for no run: it changes the tree, which changes only
        // while no run holds the thread (`branch`).
        if let Send::Message { mode, edit_of: Some(_), .. } = &mut send {
            *mode = Mode::Reject;
        }
        let (Send::Regenerate { asked, .. } | Send::Message { asked, .. }) = &send;
        let (model, mut turn) =
            resolve_turn(self.conversation().pin()?, self.config.tracing, asked, &who, catalog, settings)?;
        // Where the turn joins the tree, checked before anything is kept.
        let point = match &send {
            Send::Regenerate { answer, .. } => Some(self.regenerate_point(answer.as_deref())?),
            Send::Message { edit_of: Some(id), .. } => Some(self.edit_point(id)?),
            Send::Message { edit_of: None, .. } => None,
        };
        turn.attachments = match (&send, &point) {
            // An answer again to a message, with its files.
            (Send::Regenerate { .. }, Some(point)) => point.run.turn.attachments.clone(),
            _ => self.journal.files().attachments_of(&asked.attachments, who.files, who.reserve)?,
        };
        super::stored_files::check_model_input(catalog, model.as_deref(), &turn.attachments)?;
        if let (Send::Message { message, .. }, Driver::Builtin) = (&send, self.config.driver) {
            super::agent::check_fits(settings, model.as_deref(), turn.agent.as_deref(), message)?;
        }
        if let (Some(budget), Some(actor)) = (who.budget, &turn.actor) {
            self.budgets.learn(actor, budget);
        }
        let spent = turn.actor.as_deref().is_some_and(|a| self.budgets.over(a, now));
        if who.reserve {
            return reserve_send(&mut self.journal, &self.runs, &send, spent, who, now);
        }
        self.clock().replace_dead_holder(now)?;
        self.journal.files_mut().attach_files(&turn.attachments)?;
        // The thread becomes the sender's: other actors' follows of it from
        // before it existed end before any of its events is sent.
        self.end_others_follows(who.grant, who.caller);
        let thread = self.journal.thread_id().to_owned();
        let sent = match (send, point) {
            (Send::Regenerate { .. }, point) => {
                // (Its point was found above: a regenerate always has one.)
                let point = point.ok_or(Error::NothingToRegenerate)?;
                let run = self.regenerate(model, turn, point, now)?;
                self.claim(who)?;
                if spent {
                    self.end_over_quota(&run.run_id, now)?;
                }
                Sent::Run { run_id: run.run_id, regenerated: true }
            }
            // (`auto` was resolved above.)
            (Send::Message { message, mode: Mode::Reject | Mode::Auto, .. }, point) => {
                let token = self.ids.token();
                let (message_id, run_id) =
                    given.ids.unwrap_or_else(|| (self.ids.id("msg"), ids::scoped(&thread, &self.ids.id("run"))));
                let turn = Turn { sent_at: turn.sent_at.or(Some(now)), ..turn };
                let start = StartRun {
                    run_id,
                    message_id,
                    message,
                    publish_token: token.clone(),
                    driver: self.config.driver,
                    model,
                    turn,
                    place: point.map(|p| p.place).unwrap_or_default(),
                };
                let run = self.start_run(start, now)?;
                self.claim(who)?;
                self.started.push(Started { run: run.clone(), publish_token: token, client_tools: given.client_tools });
                if spent {
                    self.end_over_quota(&run.run_id, now)?;
                }
                Sent::Run { run_id: run.run_id, regenerated: false }
            }
            // A queued message is checked now, not when it starts.
            (Send::Message { mode: Mode::Queue | Mode::Interrupt, .. }, _) if spent => {
                return Err(Error::QuotaExceeded)
            }
            (Send::Message { message, mode: Mode::Queue, .. }, _) => {
                let (item, position, started) = self.enqueue(message, model, turn, given.ids, now)?;
                self.claim(who)?;
                Sent::Queued(Queued {
                    queued: true,
                    thread_id: self.journal.thread_id().to_owned(),
                    message_id: item.message_id,
                    position,
                    queue: self.waiting.queue().clone(),
                    run_id: started.map(|r| r.run_id),
                    interrupting: None,
                })
            }
            (Send::Message { message, mode: Mode::Interrupt, .. }, _) => {
                let (item, interrupted) = self.interrupt(message, model, turn, given.ids, now)?;
                self.claim(who)?;
                if let Some(old) = &interrupted {
                    effects.push(Effect::StopAgents);
                    effects.extend(tell_agent(settings, crate::webhook::cancel(old, "interrupted")));
                }
                Sent::Queued(Queued {
                    queued: true,
                    thread_id: self.journal.thread_id().to_owned(),
                    message_id: item.message_id,
                    position: 0,
                    queue: self.waiting.queue().clone(),
                    run_id: Some(item.run_id),
                    interrupting: interrupted,
                })
            }
        };
        Ok(sent)
    }

    /// A turn whose sender's budget is spent ends as it starts, with an
    /// `error` and `run-finish {error, quota_exceeded}`; its agent never runs.
    fn end_over_quota(&mut self, run_id: &str, now: i64) -> Result<(), Error> {
        self.started.retain(|s| s.run.run_id != run_id);
        let why = json!({ "content": "Your budget for this period is spent.", "code": QUOTA_EXCEEDED });
        let err = Event::built(Kind::Error, run_id, ROOT_AGENT, now, why);
        self.publish_run(run_id, vec![err], now)?;
        self.end_run(run_id, FinishStatus::Error, QUOTA_EXCEEDED, now)?;
        Ok(())
    }

    /// An accepted send claims a thread nobody owns, and its origin is
    /// where the runs it starts tell their agent to publish (unless
    /// `PUBLIC_URL` says): never another request's Host.
    pub(super) fn claim(&mut self, who: Sender) -> Result<(), Error> {
        self.take_ownership(who.grant, who.caller)?;
        self.send_origin.record(self.journal.store_mut(), who.origin)
    }

    /// A caller admitted to claim the thread (`Grant::Claim`) owns it now;
    /// other actors' follows of it from before end.
    pub(super) fn take_ownership(&mut self, grant: Grant, caller: &Caller) -> Result<(), Error> {
        if let (Grant::Claim, Some(id)) = (grant, caller.id()) {
            self.journal.store_mut().set_meta(OWNER_KEY, Some(id))?;
            self.end_others_follows(grant, caller);
        }
        Ok(())
    }

    /// A claiming caller's: every follow another actor made of the thread
    /// before it existed ends (`Subscribers::claimed_by`). Idempotent.
    fn end_others_follows(&mut self, grant: Grant, caller: &Caller) {
        if let (Grant::Claim, Some(id)) = (grant, caller.id()) {
            let ended = self.journal.subscribers().claimed_by(id);
            if !ended.is_empty() {
                self.outbox.push(Effect::EndFollows { ids: ended });
            }
        }
    }

    /// The run of the client's user message `id` (`<thread>.u_<id>`, so
    /// finding it needs no scan). A message the thread has seen starts
    /// nothing: its run while active, else 409 `message_already_sent` (also
    /// while it waits in the queue). One message is one run, whichever
    /// protocol sent it.
    pub fn message_run(&self, id: &str) -> Result<Seen, Error> {
        let run_id = ids::client_message_run(self.journal.thread_id(), id);
        if let Some(run) = self.journal.store().run(&run_id)? {
            if self.runs.active_run().is_some_and(|a| a.run_id == run.run_id) {
                return Ok(Seen::Active(run.run_id));
            }
            return Err(Error::MessageAlreadySent { run_id: run.run_id.clone() });
        }
        if self.waiting.queue().items.iter().any(|i| i.message_id == id) {
            return Err(Error::MessageAlreadySent { run_id: run_id.clone() });
        }
        Ok(Seen::New(run_id))
    }
}

/// The turn a send asks for: the agent it runs as (400 `agent_not_found`
/// for one the deployment does not offer), its model (a locked agent's,
/// else the send's pick, the pin, the agent's, the default; 400
/// `model_not_allowed` for one the caller or the agent may not use), and
/// what is stored with the message.
fn resolve_turn(
    pin: Option<String>,
    tracing: bool,
    asked: &Asked,
    who: &Sender,
    catalog: &Catalog,
    settings: &Settings,
) -> Result<(Option<String>, Turn), Error> {
    let agents =
        settings.agents.as_ref().map_err(|why| Error::Misconfigured { setting: Setting::Agents, why: why.clone() })?;
    let (agent_id, agent) = agents.get(asked.agent.as_deref()).map_err(Error::Input)?;
    let model = catalog
        .pick(asked.model.as_deref(), pin.as_deref(), &agent.picker(who.caller.roles()))
        .map_err(Error::Input)?
        .to_owned();
    let turn = Turn {
        agent: asked.agent.as_ref().map(|_| agent_id.to_owned()),
        page_context: asked.page_context.clone(),
        output: asked.output.clone(),
        sent_at: asked.sent_at,
        actor: match who.caller {
            Caller::Actor { id, .. } => Some(id.clone()),
            _ => None,
        },
        attachments: Vec::new(),
        trace: who.trace.clone().filter(|_| tracing),
    };
    Ok((Some(model), turn))
}

/// A send checked as far as it can be before it is made (its files'
/// bytes are stored between this and the send): refused as the send
/// would be now, else its inline files reserved.
fn reserve_send<S: Store, K: Sink>(
    journal: &mut Journal<S, K>,
    runs: &RunLock,
    send: &Send,
    spent: bool,
    who: Sender,
    now: i64,
) -> Result<Sent, Error> {
    let busy = runs.active_run().map(|r| r.run_id.clone());
    match send {
        Send::Regenerate { .. } | Send::Message { mode: Mode::Reject | Mode::Auto, .. } if busy.is_some() => {
            let run = busy.unwrap_or_default();
            return Err(Error::run_active(&run, Busy::Start));
        }
        Send::Message { mode: Mode::Queue | Mode::Interrupt, .. } if spent => return Err(Error::QuotaExceeded),
        _ => {}
    }
    let new: Vec<NewFile> = who.files.iter().flatten().cloned().collect();
    journal.files_mut().reserve_files(&new, who.origin, who.random, now).map(Sent::Reserved)
}

/// What a send needs before it is read: a readable policy and catalog,
/// and (for the built-in agent) a model and tools. Refusals are 503s.
fn ready_to_send(driver: Driver, settings: &Settings) -> Result<&crate::agent::models::Catalog, Error> {
    if let Some(e) = &settings.policy_error {
        return Err(Error::Misconfigured { setting: Setting::ApprovalPolicy, why: e.clone() });
    }
    let catalog =
        settings.catalog.as_ref().map_err(|why| Error::Misconfigured { setting: Setting::Models, why: why.clone() })?;
    if driver == Driver::Builtin {
        super::agent::builtin_ready(settings)?;
    }
    Ok(catalog)
}

/// A signal to the external agent, when there is one.
pub(super) fn tell_agent(settings: &Settings, body: Value) -> Vec<Effect> {
    if settings.webhook_url.is_some() {
        vec![Effect::Webhook { body, start_of: None }]
    } else {
        Vec::new()
    }
}
