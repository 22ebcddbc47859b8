//! The `#[durable_object]` shell: one per thread. It gives the core
//! [`Thread`] a SQLite store, a clock, timers and SSE channels, and does the
//! I/O the core decides on (webhook calls). Every access to the core is one
//! synchronous borrow: no `RefCell` borrow is ever held across an `.await`.

use crate::config::Config;
use crate::http::{self, internal, read_json};
use crate::store::SqlStore;
use crate::{ids, now_ms};
use bytes::Bytes;
use futures_channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use futures_util::{stream, StreamExt};
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;
use crate::agent_host::{ModelEndpoint, WorkerHost};
use threadline_durable::agent::{self, cancel::CancelToken, tools::Toolbox, Checkpoint, Job};
use threadline_durable::event::FinishStatus;
use threadline_durable::store::{Driver, RunState};
use threadline_durable::route::{self, Route};
use threadline_durable::sse::PING;
use threadline_durable::auth::Actor;
use threadline_durable::{ApiError, Sink, StartRun, Store, Thread};
use worker::*;

mod ds_view;

pub type Core = Thread<SqlStore, ChannelSink>;
pub type Shared = Rc<RefCell<Option<Core>>>;

/// A subscriber: the sending half of its SSE response body, and when the
/// runtime last pulled from that body.
///
/// Invariant: a subscriber whose body has not been pulled for `stale_ms`
/// counts as gone. A healthy stream is pulled at least at every keep-alive
/// ping; one whose client left is either dropped by the runtime (its channel
/// closes) or, when the runtime stops pulling without dropping it, goes
/// stale; either way the next publish or subscribe drops it.
pub struct ChannelSink {
    tx: UnboundedSender<Bytes>,
    pulled_at: Rc<Cell<i64>>,
    stale_ms: i64,
}

impl ChannelSink {
    fn new(tx: UnboundedSender<Bytes>, pulled_at: Rc<Cell<i64>>, ping_ms: u64) -> ChannelSink {
        ChannelSink { tx, pulled_at, stale_ms: 2 * ping_ms as i64 + 1_000 }
    }
}

impl Sink for ChannelSink {
    fn send(&mut self, chunk: Bytes) -> bool {
        !self.is_closed() && self.tx.unbounded_send(chunk).is_ok()
    }

    fn is_closed(&self) -> bool {
        self.tx.is_closed() || now_ms() - self.pulled_at.get() > self.stale_ms
    }
}

#[durable_object]
pub struct ThreadObject {
    inner: Rc<Inner>,
}

/// The object's state, shared with the tasks it spawns (the agent loop, the
/// idle-flush timer), which outlive the request that started them.
pub struct Inner {
    env: Env,
    storage: Storage,
    config: Config,
    core: Shared,
    /// Deadline of the armed in-memory idle-flush timer, if one is armed.
    flush_timer: Rc<Cell<Option<i64>>>,
    /// Built-in agent runs driven by this instance: their cancel tokens and
    /// hosts (whose abort controller stops their fetches).
    agents: Rc<RefCell<Vec<(String, CancelToken, WorkerHost)>>>,
    /// The origin of the last request served (for publish URLs).
    last_origin: RefCell<String>,
}

/// Where a thread keeps the actor who created it.
const OWNER_KEY: &str = "owner";

/// Drops subscribers that went away; 429 when the thread still serves `max`.
fn make_room(core: &mut Core, max: usize) -> std::result::Result<(), ApiError> {
    core.prune_subscribers();
    if core.subscriber_count() >= max {
        return Err(ApiError::new(429, "too_many_subscribers", format!("a thread serves at most {max} streams at once"))
            .with("retryAfter", 5));
    }
    Ok(())
}

/// Where a thread keeps its pinned model (`PATCH /agent/threads/:id`).
const PIN_KEY: &str = "pinned_model";

/// What a send did.
enum Sent {
    /// A run started (or regenerated).
    Run { run_id: String, regenerated: bool },
    /// The 202 body of a queued (or interrupting) send.
    Queued(Value),
}

impl DurableObject for ThreadObject {
    fn new(state: State, env: Env) -> Self {
        let config = Config::from_env(&env);
        let inner = Inner {
            env,
            storage: state.storage(),
            config,
            core: Rc::default(),
            flush_timer: Rc::default(),
            agents: Rc::default(),
            last_origin: RefCell::default(),
        };
        ThreadObject { inner: Rc::new(inner) }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        match self.inner.handle(req).await {
            Ok(resp) => Ok(resp),
            Err(e) => http::error(&e),
        }
    }

    async fn alarm(&self) -> Result<Response> {
        if let Err(e) = self.inner.on_alarm().await {
            console_error!("alarm: {e}");
        }
        Response::ok("")
    }
}

impl Inner {
    /// Runs `f` on the core, loading it from storage on first use. The borrow
    /// ends when `f` returns.
    fn with_core<R>(self: &Rc<Self>, f: impl FnOnce(&mut Core) -> R) -> std::result::Result<R, ApiError> {
        let mut slot = self.core.borrow_mut();
        if slot.is_none() {
            let store = SqlStore::open(self.storage.sql()).map_err(internal)?;
            let mut core = Thread::load(store, self.config.thread.clone(), now_ms())?;
            core.set_id_source(Rc::new(|prefix: &str| {
                if prefix == "tlp" { ids::new_token() } else { ids::new_id(prefix) }
            }));
            *slot = Some(core);
        }
        Ok(f(slot.as_mut().expect("loaded above")))
    }

    async fn handle(self: &Rc<Self>, mut req: Request) -> std::result::Result<Response, ApiError> {
        let route = Route::parse(req.method().as_ref(), &req.path())?;
        // Set by the stateless Worker, which removes any a client sent.
        let actor = req.headers().get(crate::ACTOR_HEADER).ok().flatten().map(|id| Actor {
            id,
            roles: req
                .headers()
                .get(crate::ROLES_HEADER)
                .ok()
                .flatten()
                .map(|r| r.split(',').filter(|x| !x.is_empty()).map(str::to_owned).collect())
                .unwrap_or_default(),
        });
        let loaded_before = self.core.borrow().is_some();
        self.with_core(|c| c.set_thread_id(route.thread()))?;
        if let Ok(url) = req.url() {
            *self.last_origin.borrow_mut() = url.origin().ascii_serialization();
        }
        if !loaded_before {
            // First request of this instance: a built-in run found open lost
            // its loop with the old instance. It is resumed or swept before
            // this request is served, so a send is never refused by a dead
            // holder of the thread.
            self.recover_builtin_run();
        }
        self.admit(&route, actor.as_ref())?;
        let resp = match &route {
            Route::Chat { thread } => self.chat(thread, &mut req).await,
            Route::Cancel { .. } => self.cancel().await,
            Route::Publish { run, .. } => self.publish(run, &mut req).await,
            Route::Events { .. } => self.events(&req),
            Route::Status { .. } => self.with_core(|c| http::json(200, &c.status()).map_err(internal))?,
            Route::Messages { thread } => self.messages(thread, &req),
            Route::Stats { .. } => self.stats(),
            Route::Confirm { request, .. } => self.confirm(request, actor.as_ref(), &mut req).await,
            Route::StreamToken { thread } => self.stream_token(thread, actor.as_ref()),
            Route::Delete { thread } => {
                self.delete_thread(thread).await?;
                return http::json(200, &json!({ "ok": true, "deleted": thread })).map_err(internal);
            }
            Route::QueueList { .. } => {
                self.with_core(|c| http::json(200, &json!({ "queue": c.queue() })).map_err(internal))?
            }
            Route::QueueItem { message, delete, .. } => self.queue_item(message, *delete, &mut req).await,
            Route::QueueMove { message, .. } => self.queue_move(message, &mut req).await,
            Route::QueuePause { paused, .. } => {
                let paused = *paused;
                self.with_core(|c| c.queue_pause(paused, now_ms()))??;
                self.queue_answer()
            }
            Route::AgentThread { thread, patch } => self.agent_thread(thread, *patch, &mut req).await,
            Route::AgentChat { thread } => self.agent_chat(thread, &mut req).await,
            Route::AgentStream { thread, run } => self.agent_stream(thread, run, &req),
            Route::ToolDecision { approve, .. } => self.tool_decision(*approve, actor.as_ref(), &mut req).await,
            Route::StreamThread { thread } => self.stream_read(thread, None, &req).await,
            Route::StreamRun { thread, run, append: false } => self.stream_read(thread, Some(run), &req).await,
            Route::StreamRun { run, append: true, .. } => self.stream_append(run, &mut req).await,
        };
        // Whatever the request did may have started a queued message.
        self.launch_started().await;
        if !loaded_before {
            // A run found open needs its deadline on the alarm.
            self.arm_alarm().await;
        }
        resp
    }

    /// `POST /instance-ai/chat/:threadId` `{message, mode?, model?, regenerate?}`.
    ///
    /// `mode`: `reject` (default: 409 `run_active` while a run holds the
    /// thread), `queue` (202; starts at once when the thread is free, else
    /// waits in the thread's queue) or `interrupt` (cancels the active run and
    /// runs this message next). `regenerate: true` answers the last user
    /// message again. `model` picks a catalog model for this turn only.
    async fn chat(self: &Rc<Self>, thread: &str, req: &mut Request) -> std::result::Result<Response, ApiError> {
        let body = read_json(req, self.config.max_body_bytes).await?;
        match self.start_message(thread, &body).await? {
            Sent::Run { run_id, regenerated } => {
                let mut out = json!({ "runId": run_id });
                if regenerated {
                    out["regenerated"] = true.into();
                }
                http::json(200, &out).map_err(internal)
            }
            Sent::Queued(out) => http::json(202, &out).map_err(internal),
        }
    }

    /// agora's `POST /agent/chat`: the same send, with the run streamed in the
    /// response (a queued send answers 202 as on the other route).
    async fn agent_chat(self: &Rc<Self>, thread: &str, req: &mut Request) -> std::result::Result<Response, ApiError> {
        let body = read_json(req, self.config.max_body_bytes).await?;
        match self.start_message(thread, &body).await? {
            Sent::Run { run_id, .. } => self.run_stream(thread, &run_id, 0),
            Sent::Queued(out) => http::json(202, &out).map_err(internal),
        }
    }

    /// `GET /agent/chat/:runId/stream?after=n` (or `Last-Event-ID`; `after` wins).
    fn agent_stream(self: &Rc<Self>, thread: &str, run: &str, req: &Request) -> std::result::Result<Response, ApiError> {
        let url = req.url().map_err(internal)?;
        let after = url.query_pairs().find(|(k, _)| k == "after").map(|(_, v)| v.into_owned());
        let header = req.headers().get("last-event-id").ok().flatten();
        let after = match after {
            Some(a) => route::cursor(None, Some(&a))?,
            None => route::cursor(header.as_deref(), None)?,
        };
        self.run_stream(thread, run, after)
    }

    /// A run's frames in agora's envelope: `meta`, the frames above `after`,
    /// then live frames until its `done` / `error`. Closing the connection
    /// never cancels the run.
    fn run_stream(self: &Rc<Self>, thread: &str, run: &str, after: u64) -> std::result::Result<Response, ApiError> {
        let (tx, rx) = unbounded();
        let max = self.config.max_subscribers;
        let pulled_at = Rc::new(Cell::new(now_ms()));
        let sink = ChannelSink::new(tx, pulled_at.clone(), self.config.ping_ms);
        let (replay, sub) = self.with_core(|c| {
            make_room(c, max)?;
            c.subscribe_run(run, after, sink)
        })??;
        let mut head = Vec::new();
        threadline_durable::runstream::meta(run, thread, &mut head);
        head.extend_from_slice(&replay);
        let first = stream::iter([Bytes::from(head)]);
        let body: std::pin::Pin<Box<dyn futures_util::Stream<Item = Bytes>>> = match sub {
            Some(_) => Box::pin(first.chain(live_body(rx, self.config.ping_ms))),
            None => Box::pin(first),
        };
        let body = Unsubscribe { inner: body, core: self.core.clone(), id: sub.unwrap_or(0), pulled_at }.map(Ok::<Bytes, worker::Error>);
        let headers = sse_headers(&[("cache-control", "no-cache, no-transform"), ("x-agent-run-id", run), ("x-agent-thread-id", thread)]);
        Ok(Response::from_stream(body).map_err(internal)?.with_headers(headers))
    }

    /// agora's `POST /agent/tool-call/approve|reject {runId?, toolCallId,
    /// reason?, via?, remember?}`: decides the call's confirmation, as
    /// `POST /instance-ai/confirm/:requestId` does.
    async fn tool_decision(self: &Rc<Self>, approve: bool, actor: Option<&Actor>, req: &mut Request) -> std::result::Result<Response, ApiError> {
        let roles = actor.map(|a| a.roles.clone()).unwrap_or_default();
        let body = read_json(req, self.config.max_body_bytes).await?;
        let bad = |m: &str| ApiError::bad_request("invalid_decision", m.to_owned());
        let Some(call) = body.get("toolCallId").and_then(Value::as_str) else { return Err(bad("`toolCallId` is required")) };
        let run = match body.get("runId") {
            None | Some(Value::Null) => None,
            Some(Value::String(r)) => Some(r.clone()),
            Some(_) => return Err(bad("`runId` must be a string")),
        };
        let via = match body.get("via") {
            None | Some(Value::Null) => "web".to_owned(),
            Some(Value::String(v)) if (1..=64).contains(&v.chars().count()) => v.clone(),
            Some(_) => return Err(bad("`via` is 1 to 64 characters")),
        };
        let remember = match body.get("remember") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) if *b && !approve => return Err(bad("`remember` applies to approvals")),
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(bad("`remember` must be a boolean")),
        };
        let reason = match body.get("reason") {
            None | Some(Value::Null) => None,
            Some(Value::String(r)) => Some(r.clone()),
            Some(_) => return Err(bad("`reason` must be a string")),
        };
        let c = self.with_core(|core| {
            let c = core
                .confirmation_for_call(call, run.as_deref())?
                .ok_or_else(|| ApiError::not_found("tool_call_not_found", "no confirmation for this tool call"))?;
            let mut decision = json!({ "approved": approve });
            if remember {
                decision["scope"] = "session".into();
            }
            if let Some(r) = &reason {
                decision["userInput"] = r.clone().into();
            }
            if c.input_type != "approval" {
                return Err(bad("this tool call asks for input: answer it with POST /instance-ai/confirm/:requestId"));
            }
            // `via` is checked, as agora does; the decision records who and how
            // once callers are authenticated (the Trust issue).
            let _ = &via;
            core.decide(&c.request_id, &decision, Some(&roles), now_ms())
        })??;
        self.after_settled(&c).await;
        http::json(200, &json!({ "ok": true, "runId": c.run_id, "toolCallId": c.tool_call_id, "status": c.state.as_str() }))
            .map_err(internal)
    }

    /// Starts, queues or regenerates: see [`Inner::chat`].
    async fn start_message(self: &Rc<Self>, thread: &str, body: &Value) -> std::result::Result<Sent, ApiError> {
        let body = body.clone();
        if let Some(e) = &self.config.policy_error {
            return Err(ApiError::new(503, "invalid_approval_policy", e.clone()));
        }
        let catalog = self.config.catalog.as_ref().map_err(|e| ApiError::new(503, "invalid_models", e.clone()))?;
        if self.config.thread.driver == Driver::Builtin {
            self.builtin_ready()?;
        }
        let model = match body.get("model") {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) => Some(catalog.check(id).map(|_| id.clone())?),
            Some(_) => return Err(ApiError::bad_request("model_not_allowed", "`model` must be a catalog model id")),
        };
        let pin = self.with_core(|c| c.store().meta(PIN_KEY).ok().flatten())?;
        let model = Some(catalog.pick(model.as_deref(), pin.as_deref())?.to_owned());
        let now = now_ms();
        if body.get("regenerate").and_then(Value::as_bool) == Some(true) {
            let run = self.with_core(|c| c.regenerate(model, now))??;
            self.launch_started().await;
            return Ok(Sent::Run { run_id: run.run_id, regenerated: true });
        }
        let message = match body.get("message") {
            Some(Value::String(m)) if !m.trim().is_empty() => m.clone(),
            Some(Value::String(_)) | None => {
                return Err(ApiError::bad_request("message_required", "`message` must be a non-empty string"))
            }
            Some(_) => return Err(ApiError::bad_request("message_required", "`message` must be a string")),
        };
        if message.len() > self.config.max_message_bytes {
            return Err(ApiError::new(
                413,
                "message_too_large",
                format!("`message` is over {} bytes", self.config.max_message_bytes),
            ));
        }
        let mode = match body.get("mode") {
            None | Some(Value::Null) => "reject",
            Some(Value::String(m)) if ["reject", "queue", "interrupt"].contains(&m.as_str()) => m.as_str(),
            Some(_) => return Err(ApiError::bad_request("invalid_mode", "`mode` is one of reject, queue, interrupt")),
        };
        let resp = match mode {
            "reject" => {
                let token = ids::new_token();
                let run = self.with_core(|c| {
                    c.start_run(
                        StartRun {
                            run_id: threadline_durable::route::scoped(thread, &ids::new_id("run")),
                            message_id: ids::new_id("msg"),
                            message,
                            publish_token: token.clone(),
                            driver: c.config().driver,
                            model,
                        },
                        now,
                    )
                })??;
                self.launch(thread, &run, &token).await;
                Sent::Run { run_id: run.run_id, regenerated: false }
            }
            "queue" => {
                let (item, position, started) = self.with_core(|c| c.enqueue(message, model, now))??;
                self.launch_started().await;
                Sent::Queued(self.queued_reply(thread, &item.message_id, position, started.map(|r| r.run_id))?)
            }
            _ => {
                let (item, interrupted) = self.with_core(|c| c.interrupt(message, model, now))??;
                if let Some(old) = &interrupted {
                    self.stop_agents();
                    self.tell_agent(json!({ "type": "cancel", "runId": old, "reason": "interrupted" })).await;
                }
                self.launch_started().await;
                let mut body = self.queued_reply(thread, &item.message_id, 0, Some(item.run_id.clone()))?;
                if let Some(old) = interrupted {
                    body["interrupting"] = old.into();
                }
                Sent::Queued(body)
            }
        };
        Ok(resp)
    }

    /// The 202 body of a queued send: `{queued, threadId, messageId,
    /// position, queue: {items, paused}, runId?}`.
    fn queued_reply(self: &Rc<Self>, thread: &str, message_id: &str, position: usize, run_id: Option<String>) -> std::result::Result<Value, ApiError> {
        let queue = self.with_core(|c| serde_json::to_value(c.queue()).expect("the queue serialises"))?;
        let mut body = json!({ "queued": true, "threadId": thread, "messageId": message_id, "position": position, "queue": queue });
        if let Some(run_id) = run_id {
            body["runId"] = run_id.into();
        }
        Ok(body)
    }

    /// Drives runs the thread started on its own (from its queue).
    async fn launch_started(self: &Rc<Self>) {
        let Ok(started) = self.with_core(|c| (c.thread_id().to_owned(), c.take_started())) else { return };
        let (thread, runs) = started;
        for s in runs {
            self.launch(&thread, &s.run, &s.publish_token).await;
        }
    }

    /// Gets a new run going: the built-in agent, or the external agent's
    /// start signal. A run whose agent cannot start ends at once with an
    /// error, rather than lock the thread.
    async fn launch(self: &Rc<Self>, thread: &str, run: &threadline_durable::RunRecord, token: &str) {
        self.register(thread, run).await;
        let failed = match run.driver {
            Driver::Builtin => self.builtin_ready().and_then(|tools| self.start_builtin(thread, run, tools)).err().map(|e| e.message),
            Driver::Webhook => match &self.config.webhook_url {
                None => Some("no agent webhook is configured".to_owned()),
                Some(hook) => {
                    let publish_url = format!("{}/instance-ai/threads/{thread}/runs/{}/events", self.origin(), run.run_id);
                    let signal = json!({
                        "type": "run",
                        "threadId": thread,
                        "runId": run.run_id,
                        "messageId": run.message_id,
                        "message": run.message,
                        "agentId": run.agent_id,
                        "model": run.model,
                        "publishUrl": publish_url,
                        "publishToken": token,
                    });
                    post_json(hook, &signal).await.err().map(|why| format!("agent webhook failed: {why}"))
                }
            },
        };
        if let Some(msg) = failed {
            let reason = if run.driver == Driver::Webhook { "agent webhook failed" } else { "agent failed to start" };
            let _ = self.with_core(|c| {
                let now = now_ms();
                let err = threadline_durable::Event::new(
                    threadline_durable::Kind::Error,
                    &run.run_id,
                    &run.agent_id,
                    now,
                    json!({ "content": msg }),
                );
                c.publish_run(&run.run_id, vec![err], now)?;
                c.end_run(&run.run_id, FinishStatus::Error, reason, now)
            });
            // Its end may start the next queued message.
            Box::pin(self.launch_started()).await;
        }
        self.arm_alarm().await;
    }

    /// Lists the thread in its actor's directory (best effort: the thread
    /// works without it).
    async fn register(self: &Rc<Self>, thread: &str, run: &threadline_durable::RunRecord) {
        let Some(owner) = self.owner() else { return };
        let body = json!({ "threadId": thread, "title": agent::title_from(&run.message), "at": run.created_at });
        if let Err(e) = crate::directory_call(&self.env, &owner, "/register", Some(body)).await {
            console_warn!("directory: {e}");
        }
    }

    /// The actor who created the thread.
    fn owner(self: &Rc<Self>) -> Option<String> {
        self.with_core(|c| c.store().meta(OWNER_KEY).ok().flatten()).ok().flatten()
    }

    /// Who may use this thread. It belongs to the actor who created it (with
    /// its first send); anyone else, and anyone on a thread that does not
    /// exist, gets the same 404, so existence does not leak. A decision may
    /// also come from a holder of the approver role a pending request names.
    fn admit(self: &Rc<Self>, route: &Route, actor: Option<&Actor>) -> std::result::Result<(), ApiError> {
        // The same answer as each route gives for an id it does not know.
        let not_found = || match route {
            Route::AgentStream { .. } => ApiError::not_found("nothing_to_resume", "no run with this id to resume"),
            Route::Confirm { .. } => ApiError::not_found("confirmation_not_found", "no such confirmation request"),
            Route::ToolDecision { .. } => ApiError::not_found("tool_call_not_found", "no confirmation for this tool call"),
            _ => ApiError::not_found("thread_not_found", "no such thread"),
        };
        let Some(actor) = actor else {
            // Only publishing goes without a caller: its token is checked.
            return if matches!(route, Route::Publish { .. } | Route::StreamRun { append: true, .. }) {
                Ok(())
            } else {
                Err(not_found())
            };
        };
        self.with_core(|c| {
            let owner = c.store().meta(OWNER_KEY).map_err(ApiError::storage)?;
            match (route, owner) {
                (_, Some(owner)) if owner == actor.id => Ok(()),
                (Route::Chat { .. } | Route::AgentChat { .. }, None) => {
                    c.store_mut().set_meta(OWNER_KEY, Some(&actor.id)).map_err(ApiError::storage)
                }
                (Route::Confirm { .. } | Route::ToolDecision { .. }, Some(_)) => {
                    let approver = c.pending_approvers()?.iter().any(|role| actor.roles.contains(role));
                    if approver { Ok(()) } else { Err(not_found()) }
                }
                _ => Err(not_found()),
            }
        })?
    }

    /// `POST .../stream-token`: a short-lived, read-only token for this
    /// thread's event and run streams, for clients that cannot send headers.
    fn stream_token(self: &Rc<Self>, thread: &str, actor: Option<&Actor>) -> std::result::Result<Response, ApiError> {
        let key = self.config.stream_key.as_deref().ok_or_else(|| {
            ApiError::new(503, "stream_tokens_not_configured", "set STREAM_TOKEN_SECRET (or AUTH_JWT_SECRET)")
        })?;
        let actor = actor.map(|a| a.id.as_str()).unwrap_or_default();
        let (token, expires_at) = threadline_durable::auth::issue_stream_token(key, thread, actor, now_ms());
        http::json(200, &json!({ "token": token, "expiresAt": expires_at })).map_err(internal)
    }

    /// Deletes the thread: its log, queue, confirmations and state; its
    /// subscribers' streams end, its agents stop, its directory entry goes.
    async fn delete_thread(self: &Rc<Self>, thread: &str) -> std::result::Result<(), ApiError> {
        let owner = self.owner();
        self.stop_agents();
        // Dropping the core drops every subscriber's sender: their streams end.
        *self.core.borrow_mut() = None;
        self.storage.delete_all().await.map_err(internal)?;
        let _ = self.storage.delete_alarm().await;
        if let Some(owner) = owner {
            let _ = crate::directory_call(&self.env, &owner, "/unregister", Some(json!({ "threadId": thread }))).await;
        }
        Ok(())
    }

    /// Stops the built-in agents of this instance and aborts their fetches.
    fn stop_agents(self: &Rc<Self>) {
        for (_, token, host) in self.agents.borrow_mut().drain(..) {
            token.cancel();
            host.abort();
        }
    }

    /// The origin publish URLs are built on: `PUBLIC_URL`, else the origin of
    /// the last request this object served.
    fn origin(self: &Rc<Self>) -> String {
        match &self.config.public_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => self.last_origin.borrow().clone(),
        }
    }

    async fn cancel(self: &Rc<Self>) -> std::result::Result<Response, ApiError> {
        let cancelled = self.with_core(|c| c.cancel(now_ms()))??;
        // The built-in agent (and its sub-agents, background ones too) stop
        // and their fetches are aborted; the run's events end with the
        // `run-finish` just stored.
        self.stop_agents();
        if let Some(run_id) = &cancelled {
            self.tell_agent(json!({ "type": "cancel", "runId": run_id, "reason": "user_cancelled" })).await;
        }
        let mut body = json!({ "ok": true, "cancelled": cancelled.is_some() });
        if let Some(run_id) = cancelled {
            body["runId"] = run_id.into();
        }
        http::json(200, &body).map_err(internal)
    }

    async fn publish(self: &Rc<Self>, run: &str, req: &mut Request) -> std::result::Result<Response, ApiError> {
        // Read the whole body before answering, whatever the answer.
        let body = read_json(req, self.config.max_batch_bytes).await;
        let token = req
            .headers()
            .get("authorization")
            .ok()
            .flatten()
            .and_then(|h| h.strip_prefix("Bearer ").map(str::to_owned));
        self.with_core(|c| c.authorize_publish(run, token.as_deref()))??;
        let batch = match body? {
            Value::Array(items) => items,
            Value::Object(mut o) if o.get("events").is_some_and(Value::is_array) => {
                match o.remove("events") {
                    Some(Value::Array(items)) => items,
                    _ => unreachable!("checked is_array"),
                }
            }
            _ => {
                return Err(ApiError::bad_request(
                    "invalid_batch",
                    "the body must be a JSON array of events (or {\"events\": [...]})",
                ))
            }
        };
        if batch.len() > self.config.max_batch_events {
            return Err(ApiError::new(
                413,
                "batch_too_large",
                format!("a batch holds at most {} events", self.config.max_batch_events),
            ));
        }
        let accepted = batch.len();
        let last = self.with_core(|c| c.publish(run, batch, now_ms()))??;
        self.arm_flush_timer();
        http::json(200, &json!({ "ok": true, "accepted": accepted, "lastEventId": last })).map_err(internal)
    }

    /// `GET /instance-ai/events/:threadId`: replay after the cursor, then live.
    fn events(self: &Rc<Self>, req: &Request) -> std::result::Result<Response, ApiError> {
        let header = req.headers().get("last-event-id").ok().flatten();
        let url = req.url().map_err(internal)?;
        let query = url.query_pairs().find(|(k, _)| k == "lastEventId").map(|(_, v)| v.into_owned());
        let after = route::cursor(header.as_deref(), query.as_deref())?;
        let (tx, rx) = unbounded();
        let max = self.config.max_subscribers;
        let pulled_at = Rc::new(Cell::new(now_ms()));
        let sink = ChannelSink::new(tx, pulled_at.clone(), self.config.ping_ms);
        let sub = self.with_core(|c| {
            make_room(c, max)?;
            Ok::<_, ApiError>(c.subscribe(after, sink))
        })??;

        // Replay pages are read lazily: rows at or below `high` never change,
        // and everything above it is already queued on the channel.
        let core = self.core.clone();
        let replay = stream::unfold((core, sub.after, sub.high), |(core, after, high)| async move {
            if after >= high {
                return None;
            }
            let page = core.borrow().as_ref().map(|c| c.replay_page(after, high));
            match page {
                Some(Ok((bytes, last))) if !bytes.is_empty() => Some((bytes, (core, last, high))),
                Some(Err(e)) => {
                    console_error!("replay: {e}");
                    None
                }
                _ => None,
            }
        });
        let snapshot = stream::iter((!sub.snapshot.is_empty()).then_some(sub.snapshot));
        let live = live_body(rx, self.config.ping_ms);
        let body = Unsubscribe { inner: Box::pin(replay.chain(snapshot).chain(live)), core: self.core.clone(), id: sub.id, pulled_at }
            .map(Ok::<Bytes, worker::Error>);

        Ok(Response::from_stream(body).map_err(internal)?.with_headers(sse_headers(&[])))
    }

    fn messages(self: &Rc<Self>, thread: &str, req: &Request) -> std::result::Result<Response, ApiError> {
        let url = req.url().map_err(internal)?;
        let param = |name: &str, default: usize, max: usize| -> std::result::Result<usize, ApiError> {
            match url.query_pairs().find(|(k, _)| k == name) {
                None => Ok(default),
                Some((_, v)) => v
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n <= max)
                    .ok_or_else(|| ApiError::bad_request("invalid_query", format!("`{name}` must be 0..={max}"))),
            }
        };
        let limit = param("limit", 50, 200)?.max(1);
        let page = param("page", 0, 1_000_000)?;
        let body = self.with_core(|c| c.messages(thread, limit, page))??;
        http::json(200, &body).map_err(internal)
    }

    fn stats(self: &Rc<Self>) -> std::result::Result<Response, ApiError> {
        if !self.config.debug_routes {
            return Err(ApiError::not_found("not_found", "debug routes are off (DEBUG_ROUTES)"));
        }
        let body = self.with_core(|c| {
            c.prune_subscribers();
            json!({
                "lastEventId": c.last_seq(),
                "rowsWritten": c.rows_written(),
                "subscribers": c.subscriber_count(),
                "bufferedBytes": c.buffered_bytes(),
            })
        })?;
        http::json(200, &body).map_err(internal)
    }

    async fn on_alarm(self: &Rc<Self>) -> std::result::Result<(), ApiError> {
        let first = self.core.borrow().is_none();
        if first {
            self.with_core(|_| ())?;
            self.recover_builtin_run();
        }
        let now = now_ms();
        let stale = self.with_core(|c| c.expiry(self.config.thread_ttl_ms).is_some_and(|t| t <= now))?;
        if stale {
            // Idle past THREAD_TTL_DAYS: the thread goes, as on DELETE.
            let thread = self.with_core(|c| c.thread_id().to_owned())?;
            return self.delete_thread(&thread).await;
        }
        let expired = self.with_core(|c| c.expire_due(now))??;
        for c in &expired {
            self.after_settled(c).await;
        }
        let ended = self.with_core(|c| {
            c.flush_idle(now)?;
            c.check_run_deadlines(now)
        })??;
        if let Some((run_id, reason)) = ended {
            self.tell_agent(json!({ "type": "cancel", "runId": run_id, "reason": reason })).await;
        }
        self.arm_alarm().await;
        Ok(())
    }

    /// Keeps the storage alarm at the active run's next deadline. Alarms
    /// survive eviction and restarts, so a silent run always ends.
    async fn arm_alarm(self: &Rc<Self>) {
        arm_alarm(&self.core, &self.storage, self.config.heartbeat_ms, self.config.thread_ttl_ms).await
    }

    /// Arms the in-memory timer that stores trailing deltas after the idle
    /// time. In memory on purpose: an alarm is a storage write per segment.
    fn arm_flush_timer(self: &Rc<Self>) {
        arm_flush_timer(self.core.clone(), self.flush_timer.clone());
    }

    fn queue_answer(self: &Rc<Self>) -> std::result::Result<Response, ApiError> {
        self.with_core(|c| http::json(200, &json!({ "ok": true, "queue": c.queue() })).map_err(internal))?
    }

    /// `PATCH .../queue/:messageId {message}` edits; `DELETE` removes.
    async fn queue_item(self: &Rc<Self>, message_id: &str, delete: bool, req: &mut Request) -> std::result::Result<Response, ApiError> {
        if delete {
            self.with_core(|c| c.queue_remove(message_id, now_ms()))??;
            return self.queue_answer();
        }
        let body = read_json(req, self.config.max_body_bytes).await?;
        let text = match body.get("message") {
            Some(Value::String(m)) if !m.trim().is_empty() && m.len() <= self.config.max_message_bytes => m.clone(),
            _ => return Err(ApiError::bad_request("message_required", "`message` must be a non-empty string")),
        };
        self.with_core(|c| c.queue_edit(message_id, text, now_ms()))??;
        self.queue_answer()
    }

    /// `POST .../queue/:messageId/move {position}` (0 runs next).
    async fn queue_move(self: &Rc<Self>, message_id: &str, req: &mut Request) -> std::result::Result<Response, ApiError> {
        let body = read_json(req, self.config.max_body_bytes).await?;
        let Some(position) = body.get("position").and_then(Value::as_u64) else {
            return Err(ApiError::bad_request("invalid_position", "`position` must be a non-negative integer"));
        };
        self.with_core(|c| c.queue_move(message_id, position as usize, now_ms()))??;
        self.queue_answer()
    }

    /// `GET /agent/threads/:id`: messages with their trees, the queue, the
    /// pinned model, the run state. `PATCH {model}` pins a catalog model
    /// (`null` unpins); a pin outlives the turn.
    async fn agent_thread(self: &Rc<Self>, thread: &str, patch: bool, req: &mut Request) -> std::result::Result<Response, ApiError> {
        if patch {
            let body = read_json(req, self.config.max_body_bytes).await?;
            let catalog = self.config.catalog.as_ref().map_err(|e| ApiError::new(503, "invalid_models", e.clone()))?;
            let pin = match body.get("model") {
                Some(Value::Null) => None,
                Some(Value::String(id)) => Some(catalog.check(id).map(|_| id.clone())?),
                _ => return Err(ApiError::bad_request("model_not_allowed", "`model` must be a catalog model id or null")),
            };
            self.with_core(|c| c.store_mut().set_meta(PIN_KEY, pin.as_deref()).map_err(ApiError::storage))??;
        }
        let body = self.with_core(|c| {
            let mut view = c.messages(thread, 200, 0)?;
            view["model"] = c.store().meta(PIN_KEY).ok().flatten().into();
            view["status"] = c.status();
            Ok::<_, ApiError>(view)
        })??;
        http::json(200, &body).map_err(internal)
    }

    /// `POST /instance-ai/confirm/:requestId`: records the decision, then
    /// resumes the built-in agent (once every confirmation of its step is
    /// settled) or tells the external agent through its webhook.
    async fn confirm(self: &Rc<Self>, request: &str, actor: Option<&Actor>, req: &mut Request) -> std::result::Result<Response, ApiError> {
        let body = read_json(req, self.config.max_body_bytes).await?;
        let roles = actor.map(|a| a.roles.clone()).unwrap_or_default();
        let c = self.with_core(|core| core.decide(request, &body, Some(&roles), now_ms()))??;
        self.after_settled(&c).await;
        let body = json!({ "ok": true, "requestId": c.request_id, "state": c.state.as_str() });
        http::json(200, &body).map_err(internal)
    }

    /// A confirmation was decided or lapsed: its run goes on.
    async fn after_settled(self: &Rc<Self>, c: &threadline_durable::confirm::Confirmation) {
        let driver = self.with_core(|core| core.store().run(&c.run_id).ok().flatten().map(|r| r.driver)).ok().flatten();
        match driver {
            Some(Driver::Builtin) => self.resume_if_ready(&c.run_id),
            Some(Driver::Webhook) => {
                let mut decision = c.decision.clone().unwrap_or_else(|| json!({ "approved": false }));
                decision["state"] = c.state.as_str().into();
                self.tell_agent(json!({
                    "type": "confirmation",
                    "runId": c.run_id,
                    "requestId": c.agent_request_id.clone().unwrap_or_else(|| c.request_id.clone()),
                    "toolCallId": c.tool_call_id,
                    "decision": decision,
                }))
                .await;
            }
            None => {}
        }
        self.arm_alarm().await;
    }

    /// Resumes a suspended built-in run once every confirmation its step
    /// waits for is settled, with the decisions filled into the checkpoint.
    fn resume_if_ready(self: &Rc<Self>, run_id: &str) {
        let ready = self.with_core(|core| {
            let run = core.active_run().filter(|r| r.run_id == run_id)?.clone();
            let mut cp: Checkpoint = serde_json::from_str(&core.checkpoint(run_id).ok()??).ok()?;
            let calls = cp.suspended.as_mut()?;
            for call in calls.iter_mut() {
                if let Some(rid) = &call.request_id {
                    let c = core.confirmation(rid).ok()??;
                    if c.state == threadline_durable::confirm::ConfirmState::Pending {
                        return None;
                    }
                    call.state = Some(c.state.as_str().to_owned());
                    call.decision = c.decision;
                }
            }
            Some((run, cp))
        });
        let Ok(Some((run, cp))) = ready else { return };
        match self.builtin_ready() {
            Ok(tools) => {
                let thread = cp.thread_id.clone();
                self.drive(&thread, &run, tools, cp);
            }
            Err(e) => console_error!("resume: {e}"),
        }
    }

    /// Checks the built-in agent can run: a model is configured and `TOOLS`
    /// parses. Refusals are 503s with their own codes, before any run starts.
    fn builtin_ready(self: &Rc<Self>) -> std::result::Result<Rc<Toolbox>, ApiError> {
        if self.config.llm_base_url.is_none() {
            return Err(ApiError::new(
                503,
                "agent_not_configured",
                "no agent is configured: set LLM_BASE_URL (built-in agent) or AGENT_WEBHOOK_URL (external agent)",
            ));
        }
        Toolbox::parse(self.config.tools_json.as_deref())
            .map(Rc::new)
            .map_err(|e| ApiError::new(503, "invalid_tools", e))
    }

    /// Starts the built-in agent on a new run: conversation memory, the first
    /// checkpoint, the thread's title on its first message, then the loop.
    fn start_builtin(self: &Rc<Self>, thread: &str, run: &threadline_durable::RunRecord, tools: Rc<Toolbox>) -> std::result::Result<(), ApiError> {
        let cfg = &self.config.agent;
        let (history, first) = self.with_core(|c| {
            let history = c.history(cfg.history_chars, &run.run_id)?;
            let first = c.store().runs_page(0, 2).map(|(_, total)| total == 1).unwrap_or(false);
            Ok::<_, ApiError>((history, first))
        })??;
        let checkpoint = Checkpoint {
            run_id: run.run_id.clone(),
            thread_id: thread.to_owned(),
            step: 0,
            messages: agent::initial_messages(cfg, history, &run.message),
            tasks: Vec::new(),
            usage: None,
            suspended: None,
        };
        let data = serde_json::to_string(&checkpoint).expect("checkpoints serialise");
        self.with_core(|c| {
            c.save_checkpoint(&run.run_id, &data)?;
            if first {
                let title = threadline_durable::Event::new(
                    threadline_durable::Kind::ThreadTitleUpdated,
                    &run.run_id,
                    &run.agent_id,
                    now_ms(),
                    json!({ "title": agent::title_from(&run.message) }),
                );
                c.publish_run(&run.run_id, vec![title], now_ms())?;
            }
            Ok::<_, ApiError>(())
        })??;
        self.drive(thread, run, tools, checkpoint);
        Ok(())
    }

    /// Runs the orchestrator for `run` from `checkpoint`, detached.
    fn drive(self: &Rc<Self>, thread: &str, run: &threadline_durable::RunRecord, tools: Rc<Toolbox>, checkpoint: Checkpoint) {
        let entry = self.config.catalog.as_ref().ok().and_then(|c| {
            let id = run.model.as_deref().unwrap_or(&c.default);
            c.models.get(id).map(|m| (id.to_owned(), m.clone()))
        });
        let mut cfg = self.config.agent.clone();
        let mut endpoint = ModelEndpoint {
            base_url: self.config.llm_base_url.clone().unwrap_or_default(),
            api_key: self.config.llm_api_key.clone(),
        };
        if let Some((id, m)) = entry {
            cfg.model = m.model.clone();
            if let Some(url) = m.base_url {
                endpoint.base_url = url;
            }
            if let Some(key) = self.config.model_keys.get(&id) {
                endpoint.api_key = Some(key.clone());
            }
        }
        let cfg = Rc::new(cfg);
        let host = WorkerHost::new(self.core.clone(), run.run_id.clone(), Rc::new(endpoint));
        let token = CancelToken::default();
        self.agents.borrow_mut().push((run.run_id.clone(), token.clone(), host.clone()));
        let job = Job {
            thread_id: thread.to_owned(),
            run_id: run.run_id.clone(),
            root_agent: run.agent_id.clone(),
            checkpoint,
            usage: None,
        };
        let run_id = run.run_id.clone();
        let inner = self.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let end = agent::run_orchestrator(host, cfg, tools, token, job).await;
            if end != agent::End::Stopped {
                // Keep the token while background sub-agents of this run go on.
                let background = inner
                    .core
                    .borrow()
                    .as_ref()
                    .is_some_and(|c| c.background_tasks().iter().any(|t| t.run_id == run_id));
                if !background {
                    inner.agents.borrow_mut().retain(|(r, _, _)| *r != run_id);
                }
            }
            // The run's end may have started the next queued message.
            inner.launch_started().await;
            // Suspended: the alarm now waits for the first confirmation to lapse.
            inner.arm_alarm().await;
            inner.arm_flush_timer();
        });
    }

    /// A built-in run found open when this instance loaded had its loop in a
    /// dead instance. It resumes from its last checkpoint when no tool call
    /// was in flight (re-running a step whose tools had started could repeat
    /// their side effects); otherwise it is swept as interrupted.
    fn recover_builtin_run(self: &Rc<Self>) {
        let found = self.core.borrow().as_ref().and_then(|c| {
            let run = c.active_run()?;
            // A suspended run waits in storage for its decisions: nothing to recover.
            (run.driver == Driver::Builtin && run.state == RunState::Running && c.found_on_load() && !c.is_suspended())
                .then(|| run.clone())
        });
        let Some(run) = found else { return };
        let now = now_ms();
        let plan = self.with_core(|c| {
            let checkpoint = c.checkpoint(&run.run_id)?.and_then(|d: String| serde_json::from_str::<Checkpoint>(&d).ok());
            match checkpoint {
                Some(cp) if !c.active_has_open_tool_calls() => {
                    c.adopt_active_run(now);
                    Ok(Some(cp))
                }
                _ => {
                    c.end_run(&run.run_id, FinishStatus::Interrupted, "crash_interrupted", now)?;
                    Ok::<_, ApiError>(None)
                }
            }
        });
        match (plan, self.builtin_ready()) {
            (Ok(Ok(Some(cp))), Ok(tools)) => {
                let thread = cp.thread_id.clone();
                self.drive(&thread, &run, tools, cp);
            }
            (Ok(Ok(Some(_))), Err(e)) => {
                let _ = self.with_core(|c| c.end_run(&run.run_id, FinishStatus::Error, &e.message, now));
            }
            (Ok(Err(e)), _) | (Err(e), _) => console_error!("recover run: {e}"),
            _ => {}
        }
    }

    /// Tells the external agent something (cancel, timeout); best effort.
    async fn tell_agent(self: &Rc<Self>, message: Value) {
        if let Some(hook) = &self.config.webhook_url {
            if let Err(e) = post_json(hook, &message).await {
                console_warn!("webhook: {e}");
            }
        }
    }
}

/// Keeps the storage alarm at the thread's next deadline: the active run's
/// idle or restart deadline, the heartbeat while the built-in agent runs, the
/// next confirmation to lapse. Alarms survive eviction and restarts.
async fn arm_alarm(core: &Shared, storage: &Storage, heartbeat: i64, ttl_ms: i64) {
    let deadline = core.borrow().as_ref().and_then(|c| {
        let running_builtin = c.active_run().is_some_and(|r| r.driver == Driver::Builtin) && !c.is_suspended();
        // While the built-in agent runs, an alarm every few seconds keeps
        // the object resident (an outbound fetch alone does not). A
        // suspended run needs no heartbeat: it waits in storage.
        let run = c.run_deadline().map(|d| if running_builtin { d.min(now_ms() + heartbeat) } else { d });
        let expiry = c.next_expiry().ok().flatten();
        [run, expiry, c.expiry(ttl_ms)].into_iter().flatten().min()
    });
    let Some(deadline) = deadline else { return };
    arm_at(storage, deadline).await;
}

/// Moves the alarm earlier to `deadline` (or sets it).
async fn arm_at(storage: &Storage, deadline: i64) {
    let current = storage.get_alarm().await.ok().flatten();
    let now = now_ms();
    if current.is_none_or(|t| t > deadline || t < now) {
        // An i64 alarm time is an offset from now, not an epoch time.
        if let Err(e) = storage.set_alarm((deadline - now).max(10)).await {
            console_error!("set_alarm: {e}");
        }
    }
}

fn arm_flush_timer(core: Shared, timer: Rc<Cell<Option<i64>>>) {
    let Some(deadline) = core.borrow().as_ref().and_then(|c| c.flush_deadline()) else { return };
    if timer.get().is_some_and(|armed| armed <= deadline) {
        return;
    }
    timer.set(Some(deadline));
    let wait = (deadline - now_ms()).max(0) as u64;
    wasm_bindgen_futures::spawn_local(async move {
        Delay::from(Duration::from_millis(wait)).await;
        if timer.get() == Some(deadline) {
            timer.set(None);
        }
        let result = core.borrow_mut().as_mut().map(|c| c.flush_idle(now_ms()));
        if let Some(Err(e)) = result {
            console_error!("idle flush: {e}");
        }
        arm_flush_timer(core, timer);
    });
}

/// The live part of an SSE body: what the thread sends the subscriber, with
/// a keep-alive comment whenever it is quiet for `ping_ms`. Ends when the
/// thread drops the subscriber (a run stream after its terminal frame).
fn live_body(rx: UnboundedReceiver<Bytes>, ping_ms: u64) -> impl futures_util::Stream<Item = Bytes> {
    stream::unfold(rx, move |mut rx| async move {
        use futures_util::future::{select, Either};
        let next = std::pin::pin!(rx.next());
        let tick = Delay::from(Duration::from_millis(ping_ms));
        match select(next, tick).await {
            Either::Left((Some(chunk), _)) => Some((chunk, rx)),
            Either::Left((None, _)) => None,
            Either::Right(_) => Some((Bytes::from_static(PING), rx)),
        }
    })
}

fn sse_headers(extra: &[(&str, &str)]) -> Headers {
    let headers = Headers::new();
    for (k, v) in [("content-type", "text/event-stream"), ("cache-control", "no-cache"), ("connection", "keep-alive"), ("x-accel-buffering", "no")]
        .iter()
        .chain(extra)
    {
        let _ = headers.set(k, v);
    }
    headers
}

/// An SSE body that unregisters its subscriber when the client goes away
/// (the runtime drops the stream when the response is cancelled).
struct Unsubscribe {
    inner: std::pin::Pin<Box<dyn futures_util::Stream<Item = Bytes>>>,
    core: Shared,
    id: u64,
    /// Shared with the subscriber's sink: when the runtime last pulled.
    pulled_at: Rc<Cell<i64>>,
}

impl futures_util::Stream for Unsubscribe {
    type Item = Bytes;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Bytes>> {
        self.pulled_at.set(now_ms());
        self.inner.poll_next_unpin(cx)
    }
}

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        // If the core is busy (it never is across an await, but a drop could
        // in principle run inside a borrow), the closed channel is pruned on
        // the next publish or subscribe instead.
        if let Ok(mut slot) = self.core.try_borrow_mut() {
            if let Some(c) = slot.as_mut() {
                c.unsubscribe(self.id);
            }
        }
    }
}

/// POSTs JSON; an error unless the answer is 2xx.
async fn post_json(url: &str, body: &Value) -> std::result::Result<(), String> {
    let headers = Headers::new();
    let _ = headers.set("content-type", "application/json");
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers).with_body(Some(body.to_string().into()));
    let req = Request::new_with_init(url, &init).map_err(|e| e.to_string())?;
    let mut resp = Fetch::Request(req).send().await.map_err(|e| e.to_string())?;
    let status = resp.status_code();
    if (200..300).contains(&status) {
        Ok(())
    } else {
        let text = resp.text().await.unwrap_or_default();
        Err(format!("HTTP {status}: {}", text.chars().take(200).collect::<String>()))
    }
}
