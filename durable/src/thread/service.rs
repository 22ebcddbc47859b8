//! Every route of a thread, decided here: the request's body and query are
//! parsed (`request`), the caller admitted (`access`), the thread changed,
//! and the answer built, with the [`Effect`]s the shell must carry out. The
//! object shell only moves bytes in and out and runs the effects; it could
//! be re-implemented on another runtime without re-deciding anything.

use super::{Follow, Sink, StartRun, Started, Thread};
use crate::access::{self, Caller, Facts, Grant};
use crate::agent;
use crate::auth;
use crate::confirm::Confirmation;
use crate::effect::Effect;
use crate::error::ApiError;
use crate::event::{Event, FinishStatus, Kind};
use crate::ids;
use crate::reply::Reply;
use crate::request::{self, BatchShape, Mode, Send, ToolDecision};
use crate::route::Route;
use crate::settings::Settings;
use crate::store::{Driver, RunRecord, Store};
use serde_json::{json, Value};

/// Where a thread keeps the actor who created it.
pub const OWNER_KEY: &str = "owner";
/// Where a thread keeps its pinned model (`PATCH /agent/threads/:id`).
pub const PIN_KEY: &str = "pinned_model";
/// Where a thread keeps the origin of its last accepted send.
pub const SEND_ORIGIN_KEY: &str = "send_origin";

/// One request as the shell received it.
pub struct Incoming<'a> {
    pub route: &'a Route,
    pub caller: &'a Caller,
    /// The query string's pairs.
    pub query: &'a [(String, String)],
    /// A request header, by lower-case name.
    pub header: &'a dyn Fn(&str) -> Option<String>,
    pub body: &'a [u8],
    /// The origin the request came in at (`https://host`).
    pub origin: &'a str,
    /// A fresh random number (a log's generation, cursor jitter).
    pub random: u64,
    /// What the object's shell knows of its own instance (debug stats).
    pub instance: &'a Instance,
}

/// The object's instance, as its shell counts it: reported by the debug
/// stats, so a test can see that an idle thread holds no request and that
/// it was evicted (a new instance answers after it slept).
#[derive(Clone, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    /// A random id drawn when the instance was constructed.
    pub id: String,
    /// Requests and socket events in progress, this one excluded.
    pub inflight: u32,
    /// Events this instance has handled, this one included.
    pub handled: u64,
    /// Events handled by every instance of the object (with
    /// `DEBUG_WAKES=1`, which stores the count: it outlives eviction).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handled_ever: Option<u64>,
    /// In-memory timers and built-in agent loops running (each keeps the
    /// object awake).
    pub tasks: u32,
}

/// What to answer.
#[derive(Debug)]
pub enum Answer {
    Reply(Reply),
    /// A stream: open a subscriber socket following `follow` after seq
    /// `after` (`Thread::subscribe` gives its hello). The Worker relays it to
    /// the client in the route's protocol (`feed`).
    Follow {
        follow: Follow,
        after: u64,
    },
}

/// The answer, and what the shell must do.
#[derive(Debug)]
pub struct Outcome {
    pub answer: Answer,
    pub effects: Vec<Effect>,
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// Serves one request. Refusals are answers too: nothing here fails.
    pub fn handle(&mut self, req: &Incoming, settings: &Settings, now: i64) -> Outcome {
        self.set_thread_id(req.route.thread());
        let mut effects = Vec::new();
        let answer = self.serve(req, settings, now, &mut effects).unwrap_or_else(|e| Answer::Reply(Reply::error(&e)));
        // Whatever the request did may have started a queued message.
        effects.extend(self.launch_started(settings, now));
        Outcome { answer, effects }
    }

    /// The actor who created the thread.
    pub fn owner(&self) -> Result<Option<String>, ApiError> {
        self.store.meta(OWNER_KEY).map_err(ApiError::storage)
    }

    fn admit(&self, route: &Route, caller: &Caller, request: Option<access::Request>) -> Result<Grant, ApiError> {
        // Publishing depends on the run's token only: no read on the hot path.
        let owner = if route.publishes() { None } else { self.owner()? };
        access::decide(route, caller, &Facts { owner: owner.as_deref(), request })
    }

    fn serve(
        &mut self,
        req: &Incoming,
        settings: &Settings,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Answer, ApiError> {
        let route = req.route;
        let json_body = |limit: usize| request::json(req.body, limit);
        let limits = &settings.limits;
        if route.decides() {
            return self.decision(req, settings, now, effects).map(Answer::Reply);
        }
        if let Route::UiStream { .. } = route {
            // A thread that is not the caller's answers as one with no run.
            let granted = match self.admit(route, req.caller, None) {
                Ok(_) => true,
                Err(e) if e.status == 404 => false,
                Err(e) => return Err(e),
            };
            return self.ui_stream(granted, settings);
        }
        let grant = self.admit(route, req.caller, None)?;
        let ok = |v: Value| Ok(Answer::Reply(Reply::json(200, &v)));
        match route {
            Route::Chat { thread } | Route::AgentChat { thread } => {
                let body = json_body(limits.max_body_bytes)?;
                let sent = self.send(
                    thread,
                    &body,
                    Given::default(),
                    (grant, req.caller, req.origin),
                    settings,
                    now,
                    effects,
                )?;
                match (sent, route) {
                    // agora's send answers with the run's stream: the Worker
                    // follows this answer with it (`Route::streams_its_run`).
                    (Sent::Run { run_id, .. }, Route::AgentChat { .. }) => {
                        ok(json!({ "runId": run_id, "threadId": thread }))
                    }
                    (Sent::Run { run_id, regenerated }, _) => {
                        let mut out = json!({ "runId": run_id });
                        if regenerated {
                            out["regenerated"] = true.into();
                        }
                        ok(out)
                    }
                    (Sent::Queued(body), _) => Ok(Answer::Reply(Reply::json(202, &body))),
                }
            }
            Route::AgentStream { run, .. } => {
                self.store.run(run).map_err(ApiError::storage)?.ok_or_else(ApiError::nothing_to_resume)?;
                self.make_room(settings.limits.max_subscribers)?;
                // The whole run: frames are numbered by their position in it.
                Ok(Answer::Follow { follow: Follow::run(run), after: 0 })
            }
            Route::Events { .. } => {
                let query = request::query_first(req.query, "lastEventId");
                let after = request::cursor((req.header)("last-event-id").as_deref(), query.as_deref())?;
                self.make_room(settings.limits.max_subscribers)?;
                Ok(Answer::Follow { follow: Follow::log(), after })
            }
            Route::UiChat { thread } => {
                let body = json_body(limits.max_body_bytes)?;
                self.ui_chat(thread, &body, (grant, req.caller, req.origin), settings, now, effects)
            }
            Route::UiRunStream { run, .. } => self.ui_run_stream(run, req.query, settings),
            Route::UiMessages { .. } => {
                let (limit, page) = request::messages_page(req.query)?;
                ok(self.ui_messages(limit, page)?)
            }
            Route::UiStream { .. } => unreachable!("served above"),
            Route::AguiRun { thread } => {
                let body = json_body(limits.max_body_bytes)?;
                self.agui_run(thread, &body, (grant, req.caller, req.origin), settings, now, effects)
            }
            Route::AguiStream { run, .. } => self.agui_stream(run, settings),
            Route::AguiMessages { .. } => {
                let (limit, page) = request::messages_page(req.query)?;
                ok(self.agui_messages(limit, page)?)
            }
            Route::Cancel { .. } | Route::UiStop { .. } => {
                let cancelled = self.cancel(now)?;
                // The built-in agent (and its sub-agents, background ones too)
                // stop and their fetches are aborted; the run's events end
                // with the `run-finish` just stored.
                effects.push(Effect::StopAgents);
                let mut body = json!({ "ok": true, "cancelled": cancelled.is_some() });
                if let Some(run_id) = cancelled {
                    effects.extend(tell_agent(
                        settings,
                        json!({ "type": "cancel", "runId": run_id, "reason": "user_cancelled" }),
                    ));
                    body["runId"] = run_id.into();
                }
                ok(body)
            }
            Route::Publish { run, .. } => {
                self.authorize_publish(run, request::bearer((req.header)("authorization").as_deref()))?;
                let batch =
                    request::batch(json_body(limits.max_batch_bytes)?, BatchShape::Events, limits.max_batch_events)?;
                let accepted = batch.len();
                let last = self.publish(run, batch, now)?;
                ok(json!({ "ok": true, "accepted": accepted, "lastEventId": last }))
            }
            Route::Status { .. } => ok(self.status()),
            Route::Messages { thread } => {
                let (limit, page) = request::messages_page(req.query)?;
                ok(self.messages(thread, limit, page)?)
            }
            Route::Stats { .. } if settings.debug_routes => ok(self.stats(req.instance)),
            Route::Stats { .. } => Err(ApiError::debug_routes_off()),
            Route::StreamToken { thread } => {
                let key = settings.stream_key.as_deref().ok_or_else(ApiError::stream_tokens_not_configured)?;
                let actor = req.caller.id().unwrap_or_default();
                let (token, expires_at) =
                    auth::issue_stream_token(key, thread, actor, now, settings.stream_token_ttl_ms);
                ok(json!({ "token": token, "expiresAt": expires_at }))
            }
            Route::Delete { thread } => {
                effects.push(Effect::StopAgents);
                effects.push(Effect::Wipe);
                if let Some(owner) = self.owner()? {
                    effects.push(Effect::Unregister { owner, thread_id: thread.clone() });
                }
                ok(json!({ "ok": true, "deleted": thread }))
            }
            Route::QueueList { .. } => ok(json!({ "queue": self.queue })),
            Route::QueueItem { message, delete: true, .. } => {
                self.queue_remove(message, now)?;
                ok(json!({ "ok": true, "queue": self.queue }))
            }
            Route::QueueItem { message, delete: false, .. } => {
                let text = request::queue_edit(&json_body(limits.max_body_bytes)?, limits.max_message_bytes)?;
                self.queue_edit(message, text, now)?;
                ok(json!({ "ok": true, "queue": self.queue }))
            }
            Route::QueueMove { message, .. } => {
                let position = request::queue_move(&json_body(limits.max_body_bytes)?)?;
                self.queue_move(message, position, now)?;
                ok(json!({ "ok": true, "queue": self.queue }))
            }
            Route::QueuePause { paused, .. } => {
                self.queue_pause(*paused, now)?;
                ok(json!({ "ok": true, "queue": self.queue }))
            }
            Route::AgentThread { thread, patch } => {
                if *patch {
                    let catalog = settings.catalog.as_ref().map_err(|e| ApiError::invalid_models(e.clone()))?;
                    let pin = request::pin(&json_body(limits.max_body_bytes)?, catalog)?;
                    self.store.set_meta(PIN_KEY, pin.as_deref()).map_err(ApiError::storage)?;
                }
                let mut view = self.messages(thread, 200, 0)?;
                view["model"] = self.store.meta(PIN_KEY).map_err(ApiError::storage)?.into();
                view["status"] = self.status();
                ok(view)
            }
            Route::StreamThread { thread } => self.view_read(thread, None, req.query, req.random, settings),
            Route::StreamRun { thread, run, append: false } => {
                self.view_read(thread, Some(run), req.query, req.random, settings)
            }
            Route::StreamRun { run, append: true, .. } => {
                self.view_append(run, req.header, req.body, req.random, settings, now).map(Answer::Reply)
            }
            Route::Confirm { .. } | Route::ToolDecision { .. } => unreachable!("decisions are served above"),
        }
    }

    /// `POST /instance-ai/chat/:threadId` and agora's `POST /agent/chat`:
    /// starts, queues or regenerates (`request::Send`).
    ///
    /// `mode`: `reject` (default: 409 `run_active` while a run holds the
    /// thread), `queue` (202; starts at once when the thread is free, else
    /// waits in the thread's queue) or `interrupt` (cancels the active run and
    /// runs this message next). A send that is refused stores nothing; the
    /// first accepted send of a thread makes its caller the owner.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn send(
        &mut self,
        thread: &str,
        body: &Value,
        given: Given,
        (grant, caller, origin): (Grant, &Caller, &str),
        settings: &Settings,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Sent, ApiError> {
        if let Some(e) = &settings.policy_error {
            return Err(ApiError::invalid_approval_policy(e.clone()));
        }
        let catalog = settings.catalog.as_ref().map_err(|e| ApiError::invalid_models(e.clone()))?;
        if self.config.driver == Driver::Builtin {
            Self::builtin_ready(settings)?;
        }
        let send = Send::parse(body, catalog, settings.limits.max_message_bytes)?;
        let pin = self.store.meta(PIN_KEY).map_err(ApiError::storage)?;
        let pick = |model: Option<&str>| catalog.pick(model, pin.as_deref()).map(|m| Some(m.to_owned()));
        // An accepted send claims a thread nobody owns, and its origin is
        // where the runs it starts tell their agent to publish (unless
        // PUBLIC_URL says): never another request's Host.
        let claim = |t: &mut Self| -> Result<(), ApiError> {
            if let (Grant::Claim, Some(id)) = (grant, caller.id()) {
                t.store.set_meta(OWNER_KEY, Some(id)).map_err(ApiError::storage)?;
            }
            t.record_send_origin(origin)
        };
        let sent = match send {
            Send::Regenerate { model } => {
                let model = pick(model.as_deref())?;
                let run = self.regenerate(model, now)?;
                claim(self)?;
                Sent::Run { run_id: run.run_id, regenerated: true }
            }
            Send::Message { message, mode: Mode::Reject, model } => {
                let model = pick(model.as_deref())?;
                let token = (self.ids)("tlp");
                let (message_id, run_id) =
                    given.ids.unwrap_or_else(|| ((self.ids)("msg"), ids::scoped(thread, &(self.ids)("run"))));
                let start = StartRun {
                    run_id,
                    message_id,
                    message,
                    publish_token: token.clone(),
                    driver: self.config.driver,
                    model,
                };
                let run = self.start_run(start, now)?;
                claim(self)?;
                self.started.push(Started { run: run.clone(), publish_token: token, client_tools: given.client_tools });
                Sent::Run { run_id: run.run_id, regenerated: false }
            }
            Send::Message { message, mode: Mode::Queue, model } => {
                let model = pick(model.as_deref())?;
                let (item, position, started) = self.enqueue(message, model, given.ids, now)?;
                claim(self)?;
                Sent::Queued(self.queued_reply(thread, &item.message_id, position, started.map(|r| r.run_id)))
            }
            Send::Message { message, mode: Mode::Interrupt, model } => {
                let model = pick(model.as_deref())?;
                let (item, interrupted) = self.interrupt(message, model, given.ids, now)?;
                claim(self)?;
                let mut body = self.queued_reply(thread, &item.message_id, 0, Some(item.run_id.clone()));
                if let Some(old) = interrupted {
                    effects.push(Effect::StopAgents);
                    effects.extend(tell_agent(
                        settings,
                        json!({ "type": "cancel", "runId": old, "reason": "interrupted" }),
                    ));
                    body["interrupting"] = old.into();
                }
                Sent::Queued(body)
            }
        };
        Ok(sent)
    }

    /// The 202 body of a queued send: `{queued, threadId, messageId,
    /// position, queue: {items, paused}, runId?}`.
    fn queued_reply(&self, thread: &str, message_id: &str, position: usize, run_id: Option<String>) -> Value {
        let mut body = json!({ "queued": true, "threadId": thread, "messageId": message_id, "position": position, "queue": self.queue });
        if let Some(run_id) = run_id {
            body["runId"] = run_id.into();
        }
        body
    }

    /// `POST /instance-ai/confirm/:requestId` and agora's
    /// `POST /agent/tool-call/approve|reject`: finds the request, admits the
    /// caller for that request, records the decision, and lets its run go on.
    fn decision(
        &mut self,
        req: &Incoming,
        settings: &Settings,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Reply, ApiError> {
        // A request whose time is up settles first.
        effects.extend(self.settle_lapsed(settings, now)?);
        let limit = settings.limits.max_body_bytes;
        match req.route {
            Route::Confirm { request, .. } => {
                let found = self.confirmation(request)?;
                self.admit(req.route, req.caller, Some(held(found.as_ref())))?;
                let body = request::json(req.body, limit)?;
                let c = self.decide(request, &body, now)?;
                effects.extend(self.after_settled(&c, settings)?);
                Ok(Reply::json(200, &json!({ "ok": true, "requestId": c.request_id, "state": c.state.as_str() })))
            }
            Route::ToolDecision { approve, .. } => {
                let d = ToolDecision::parse(&request::json(req.body, limit)?, *approve)?;
                let found = self.confirmation_for_call(&d.tool_call_id, d.run_id.as_deref())?;
                self.admit(req.route, req.caller, Some(held(found.as_ref())))?;
                let c = found.ok_or_else(ApiError::tool_call_not_found)?;
                if c.input_type != "approval" {
                    return Err(ApiError::invalid_decision(
                        "this tool call asks for input: answer it with POST /instance-ai/confirm/:requestId",
                    ));
                }
                // `via` is checked, as agora does; who decided is the caller.
                let c = self.decide(&c.request_id, &d.as_decision(*approve), now)?;
                effects.extend(self.after_settled(&c, settings)?);
                let body =
                    json!({ "ok": true, "runId": c.run_id, "toolCallId": c.tool_call_id, "status": c.state.as_str() });
                Ok(Reply::json(200, &body))
            }
            _ => unreachable!("only decision routes decide"),
        }
    }

    /// A confirmation was decided or lapsed: its run goes on. The built-in
    /// agent resumes once every request of its step is settled; an external
    /// agent is told through its webhook.
    pub(super) fn after_settled(&self, c: &Confirmation, settings: &Settings) -> Result<Vec<Effect>, ApiError> {
        let driver = self.store.run(&c.run_id).map_err(ApiError::storage)?.map(|r| r.driver);
        Ok(match driver {
            Some(Driver::Builtin) => self.resume_if_ready(&c.run_id, settings)?.into_iter().collect(),
            Some(Driver::Webhook) => tell_agent(settings, c.webhook_signal()),
            None => Vec::new(),
        })
    }

    /// The alarm: the thread's TTL, lapsed confirmations, idle flushes and
    /// run deadlines, each decided here.
    pub fn on_alarm(&mut self, settings: &Settings, now: i64) -> Result<Vec<Effect>, ApiError> {
        if self.expiry(settings.thread_ttl_ms).is_some_and(|t| t <= now) {
            // Idle past THREAD_TTL_DAYS: the thread goes, as on DELETE.
            let mut effects = vec![Effect::StopAgents, Effect::Wipe];
            if let Some(owner) = self.owner()? {
                effects.push(Effect::Unregister { owner, thread_id: self.thread_id.clone() });
            }
            return Ok(effects);
        }
        let mut effects = self.settle_lapsed(settings, now)?;
        self.flush_idle(now)?;
        if let Some((run_id, reason)) = self.check_run_deadlines(now)? {
            effects.extend(tell_agent(settings, json!({ "type": "cancel", "runId": run_id, "reason": reason })));
        }
        effects.extend(self.launch_started(settings, now));
        Ok(effects)
    }

    /// Launches the runs the thread started (a send, or the queue when a run
    /// ended): lists the thread in its owner's directory, then starts the
    /// built-in agent or signals the external one. A run whose agent cannot
    /// start ends at once with an error rather than lock the thread.
    pub fn launch_started(&mut self, settings: &Settings, now: i64) -> Vec<Effect> {
        let mut effects = Vec::new();
        while !self.started.is_empty() {
            for s in std::mem::take(&mut self.started) {
                effects.extend(self.launch(s, settings, now));
            }
        }
        effects
    }

    fn launch(&mut self, s: Started, settings: &Settings, now: i64) -> Vec<Effect> {
        let run = &s.run;
        let mut effects = Vec::new();
        if let Ok(Some(owner)) = self.owner() {
            let title = agent::title_from(&run.message);
            effects.push(Effect::Register { owner, thread_id: self.thread_id.clone(), title, at: run.created_at });
        }
        let started = match run.driver {
            Driver::Builtin => self.start_builtin(run, s.client_tools.clone(), settings, now).map_err(|e| e.message),
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
            Err(why) => self.launch_failed(&run.run_id, &why, now),
        }
        effects
    }

    /// The origin of the last accepted send, stored (meta `send_origin`)
    /// when it changes.
    fn record_send_origin(&mut self, origin: &str) -> Result<(), ApiError> {
        if self.send_origin()?.as_deref() == Some(origin) || origin.is_empty() {
            return Ok(());
        }
        self.store.set_meta(SEND_ORIGIN_KEY, Some(origin)).map_err(ApiError::storage)?;
        self.send_origin = Some(Some(origin.to_owned()));
        Ok(())
    }

    fn send_origin(&mut self) -> Result<Option<String>, ApiError> {
        if self.send_origin.is_none() {
            self.send_origin = Some(self.store.meta(SEND_ORIGIN_KEY).map_err(ApiError::storage)?);
        }
        Ok(self.send_origin.clone().flatten())
    }

    /// The external agent's start signal: where and how to publish
    /// (`PUBLIC_URL`, else the origin of the send that started the run).
    fn start_signal(&mut self, run: &RunRecord, token: &str, settings: &Settings) -> Value {
        let origin = settings.public_url.clone().or_else(|| self.send_origin().ok().flatten()).unwrap_or_default();
        json!({
            "type": "run",
            "threadId": self.thread_id,
            "runId": run.run_id,
            "messageId": run.message_id,
            "message": run.message,
            "agentId": run.agent_id,
            "model": run.model,
            "publishUrl": format!("{origin}/instance-ai/threads/{}/runs/{}/events", self.thread_id, run.run_id),
            "publishToken": token,
        })
    }

    /// A run's agent could not start (`why`): the run ends with an `error`
    /// event and `run-finish {error}`; the next queued message may start.
    pub fn launch_failed(&mut self, run_id: &str, why: &str, now: i64) {
        let Some(run) = self.active_run().filter(|r| r.run_id == run_id).cloned() else { return };
        let reason = if run.driver == Driver::Webhook { "agent webhook failed" } else { "agent failed to start" };
        let err = Event::new(Kind::Error, run_id, &run.agent_id, now, json!({ "content": why }));
        // A storage failure here leaves the run to its idle timeout.
        if self.publish_run(run_id, vec![err], now).is_ok() {
            let _ = self.end_run(run_id, FinishStatus::Error, reason, now);
        }
    }
}

/// What a protocol's send names itself: the user message's id and its
/// run's (the client's id kept), and the tools the client declared.
#[derive(Debug, Default)]
pub(super) struct Given {
    pub ids: Option<(String, String)>,
    pub client_tools: Vec<Value>,
}

/// What a send did.
pub(super) enum Sent {
    /// A run started (or regenerated).
    Run { run_id: String, regenerated: bool },
    /// The 202 body of a queued (or interrupting) send.
    Queued(Value),
}

/// The request a decision route names, as access sees it.
pub(super) fn held(c: Option<&Confirmation>) -> access::Request<'_> {
    match c {
        Some(c) => access::Request::Held { decider: c.decider() },
        None => access::Request::Unknown,
    }
}

/// A signal to the external agent, when there is one.
fn tell_agent(settings: &Settings, body: Value) -> Vec<Effect> {
    if settings.webhook_url.is_some() {
        vec![Effect::Webhook { body, start_of: None }]
    } else {
        Vec::new()
    }
}
