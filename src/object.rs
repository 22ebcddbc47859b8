//! The `#[durable_object]` shell of a thread. It loads the core [`Thread`]
//! over SQLite, hands it each request as bytes, and carries out what the
//! core answers: a reply, a stream to open, and [`Effect`]s (drive the
//! built-in agent, call the webhook, update the directory, wipe). It keeps
//! the timers (the storage alarm, the idle-flush timer) at the deadlines the
//! core names. It decides nothing.

use crate::agent_host::WorkerHost;
use crate::http;
use crate::live::{self, Core, Shared};
use crate::store::SqlStore;
use crate::{ids, now_ms};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;
use threadline_durable::access::{Caller, CALLER_HEADER};
use threadline_durable::agent::{self, cancel::CancelToken};
use threadline_durable::effect::{Drive, Effect};
use threadline_durable::request;
use threadline_durable::route::Route;
use threadline_durable::thread::service::{Answer, Incoming};
use threadline_durable::thread::streams::ViewPlan;
use threadline_durable::{ApiError, Settings, Thread};
use worker::*;

#[durable_object]
pub struct ThreadObject {
    inner: Rc<Inner>,
}

/// The object's state, shared with the tasks it spawns (the agent loop, the
/// idle-flush timer), which outlive the request that started them.
pub struct Inner {
    env: Env,
    storage: Storage,
    settings: Rc<Settings>,
    core: Shared,
    /// Deadline of the armed in-memory idle-flush timer, if one is armed.
    flush_timer: Rc<Cell<Option<i64>>>,
    /// Built-in agent runs driven by this instance: their cancel tokens and
    /// hosts (whose abort controller stops their fetches).
    agents: Rc<RefCell<Vec<(String, CancelToken, WorkerHost)>>>,
}

impl DurableObject for ThreadObject {
    fn new(state: State, env: Env) -> Self {
        let settings = crate::settings(&env);
        let inner = Inner {
            env,
            storage: state.storage(),
            settings,
            core: Rc::default(),
            flush_timer: Rc::default(),
            agents: Rc::default(),
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
        let inner = &self.inner;
        let effects = inner.load().and_then(|mut effects| {
            effects.extend(inner.with_core(|c| c.on_alarm(&inner.settings, now_ms()))??);
            Ok(effects)
        });
        match effects {
            Ok(effects) => inner.run(effects).await,
            Err(e) => console_error!("alarm: {e}"),
        }
        Response::ok("")
    }
}

impl Inner {
    /// Runs `f` on the loaded core. The borrow ends when `f` returns.
    fn with_core<R>(&self, f: impl FnOnce(&mut Core) -> R) -> std::result::Result<R, ApiError> {
        let mut slot = self.core.borrow_mut();
        let core = slot.as_mut().ok_or_else(ApiError::thread_not_found)?;
        Ok(f(core))
    }

    /// Loads the core from storage on this instance's first event. A
    /// built-in run found open lost its loop with the old instance: the core
    /// says whether it resumes or ends (`Thread::recovery`), before anything
    /// else is served, so a send is never refused by a dead holder.
    fn load(&self) -> std::result::Result<Vec<Effect>, ApiError> {
        if self.core.borrow().is_some() {
            return Ok(Vec::new());
        }
        let store = SqlStore::open(self.storage.sql())?;
        let mut core = Thread::load(store, self.settings.thread.clone(), now_ms())?;
        core.set_id_source(Rc::new(
            |prefix: &str| if prefix == "tlp" { ids::new_token() } else { ids::new_id(prefix) },
        ));
        let effects = core.recovery(&self.settings, now_ms())?;
        *self.core.borrow_mut() = Some(core);
        Ok(effects)
    }

    async fn handle(self: &Rc<Self>, mut req: Request) -> std::result::Result<Response, ApiError> {
        let route = Route::parse(req.method().as_ref(), &req.path())?;
        let caller = Caller::from_header(http::header(&req, CALLER_HEADER).as_deref());
        let limit = route.body_limit(&self.settings.limits);
        let body = http::body(&mut req, limit).await.map_err(|e| e.api(limit))?;
        let url = req.url().map_err(http::internal)?;
        let query = request::query_pairs(url.query().unwrap_or_default());
        let origin = url.origin().ascii_serialization();
        let header = |name: &str| http::header(&req, name);
        let mut effects = self.load()?;
        let incoming = Incoming {
            route: &route,
            caller: &caller,
            query: &query,
            header: &header,
            body: &body,
            origin: &origin,
            random: ids::random_u64(),
        };
        let outcome = self.with_core(|c| c.handle(&incoming, &self.settings, now_ms()))?;
        // The stream is opened (its subscriber registered) in the same
        // synchronous block as the answer was decided; effects come after.
        let resp = self.answer(outcome.answer).await;
        effects.extend(outcome.effects);
        self.run(effects).await;
        resp
    }

    /// Turns the core's answer into a response; streams subscribe here.
    async fn answer(self: &Rc<Self>, answer: Answer) -> std::result::Result<Response, ApiError> {
        let ping = self.settings.ping_ms;
        let max = self.settings.limits.max_subscribers;
        match answer {
            Answer::Reply(r) => http::reply(r).map_err(http::internal),
            Answer::Events { after, until } => {
                let (sink, ch) = live::channel(ping);
                let sub = self.with_core(|c| {
                    c.make_room(max)?;
                    Ok::<_, ApiError>(c.subscribe(after, sink))
                })??;
                http::stream(live::events_body(self.core.clone(), sub, ch, ping, until), &http::sse_headers())
                    .map_err(http::internal)
            }
            Answer::RunStream { run, after, headers, until } => {
                let (sink, ch) = live::channel(ping);
                let (head, sub) = self.with_core(|c| {
                    c.make_room(max)?;
                    c.subscribe_run(&run, after, sink)
                })??;
                http::stream(live::run_body(self.core.clone(), head, sub, ch, ping, until), &headers)
                    .map_err(http::internal)
            }
            Answer::View(ViewPlan::Reply(r), _) => http::reply(r).map_err(http::internal),
            Answer::View(ViewPlan::Wait(cursor), _) => {
                let (sink, ch) = live::channel(ping);
                let sub = self.with_core(|c| c.subscribe(cursor.pos.seq, sink).id)?;
                let reply =
                    live::view_long_poll(&self.core, sub, cursor, ch.rx, self.settings.streams_long_poll_ms).await;
                http::reply(reply).map_err(http::internal)
            }
            Answer::View(ViewPlan::Sse { first, cursor }, until) => {
                let (sink, ch) = live::channel(ping);
                let sub = self.with_core(|c| c.subscribe(cursor.pos.seq, sink).id)?;
                let body = live::view_sse_body(self.core.clone(), sub, first, cursor, ch, ping, until);
                http::stream(body, &http::sse_headers()).map_err(http::internal)
            }
        }
    }

    /// Carries out the core's effects in order, then keeps the timers at the
    /// core's deadlines.
    async fn run(self: &Rc<Self>, effects: Vec<Effect>) {
        let mut queue = VecDeque::from(effects);
        while let Some(effect) = queue.pop_front() {
            match effect {
                Effect::Drive(d) => self.drive(d),
                Effect::StopAgents => self.stop_agents(),
                Effect::Webhook { body, start_of } => {
                    let Some(hook) = &self.settings.webhook_url else { continue };
                    if let Err(why) = post_json(hook, &body, self.settings.webhook_timeout_ms).await {
                        console_warn!("webhook: {why}");
                        if let Some(run) = start_of {
                            let now = now_ms();
                            let more = self.with_core(|c| {
                                c.launch_failed(&run, &format!("agent webhook failed: {why}"), now);
                                c.launch_started(&self.settings, now)
                            });
                            queue.extend(more.unwrap_or_default());
                        }
                    }
                }
                Effect::Register { owner, thread_id, title, at } => {
                    let body = serde_json::json!({ "threadId": thread_id, "title": title, "at": at });
                    if let Err(e) = crate::directory_call(&self.env, &owner, "/register", Some(body)).await {
                        console_warn!("directory: {e}");
                    }
                }
                Effect::Unregister { owner, thread_id } => {
                    let body = serde_json::json!({ "threadId": thread_id });
                    let _ = crate::directory_call(&self.env, &owner, "/unregister", Some(body)).await;
                }
                Effect::Wipe => {
                    // Dropping the core drops every subscriber's sender: their streams end.
                    *self.core.borrow_mut() = None;
                    if let Err(e) = self.storage.delete_all().await {
                        console_error!("delete: {e}");
                    }
                    let _ = self.storage.delete_alarm().await;
                }
            }
        }
        self.arm_alarm().await;
        self.arm_flush_timer();
    }

    /// Runs the orchestrator on `d.job`, detached. When the loop ends, the
    /// run's end may have started the next queued message.
    fn drive(self: &Rc<Self>, d: Box<Drive>) {
        let Drive { job, endpoint, config, tools } = *d;
        let run_id = job.run_id.clone();
        let host = WorkerHost::new(self.core.clone(), run_id.clone(), Rc::new(endpoint));
        let token = CancelToken::default();
        self.agents.borrow_mut().push((run_id.clone(), token.clone(), host.clone()));
        let inner = self.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let end = agent::run_orchestrator(host, Rc::new(config), tools, token, job).await;
            // Keep the token while background sub-agents of this run go on.
            let background =
                inner.with_core(|c| c.background_tasks().iter().any(|t| t.run_id == run_id)).unwrap_or(false);
            if end != agent::End::Stopped && !background {
                inner.agents.borrow_mut().retain(|(r, _, _)| *r != run_id);
            }
            let effects = inner.with_core(|c| c.launch_started(&inner.settings, now_ms())).unwrap_or_default();
            inner.run(effects).await;
        });
    }

    /// Stops the built-in agents of this instance and aborts their fetches.
    fn stop_agents(&self) {
        for (_, token, host) in self.agents.borrow_mut().drain(..) {
            token.cancel();
            host.abort();
        }
    }

    /// Keeps the storage alarm at the core's next deadline (alarms survive
    /// eviction and restarts, so a silent run always ends). Only moves it
    /// earlier, or sets it when none is pending.
    async fn arm_alarm(&self) {
        let now = now_ms();
        let deadline = self
            .core
            .borrow()
            .as_ref()
            .and_then(|c| c.next_alarm(now, self.settings.heartbeat_ms, self.settings.thread_ttl_ms));
        let Some(deadline) = deadline else { return };
        let current = self.storage.get_alarm().await.ok().flatten();
        if current.is_none_or(|t| t > deadline || t < now) {
            // An i64 alarm time is an offset from now, not an epoch time.
            if let Err(e) = self.storage.set_alarm((deadline - now).max(10)).await {
                console_error!("set_alarm: {e}");
            }
        }
    }

    /// Arms the in-memory timer that stores trailing deltas after the idle
    /// time. In memory on purpose: an alarm is a storage write per segment.
    fn arm_flush_timer(&self) {
        arm_flush_timer(self.core.clone(), self.flush_timer.clone());
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

/// POSTs JSON; an error unless a 2xx answer arrives within `timeout_ms`
/// (the fetch is aborted then).
async fn post_json(url: &str, body: &Value, timeout_ms: u64) -> std::result::Result<(), String> {
    let headers = Headers::new();
    let _ = headers.set("content-type", "application/json");
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers).with_body(Some(body.to_string().into()));
    let req = Request::new_with_init(url, &init).map_err(|e| e.to_string())?;
    let abort = AbortController::default();
    let signal = abort.signal();
    let call = async {
        let mut resp = Fetch::Request(req).send_with_signal(&signal).await.map_err(|e| e.to_string())?;
        let status = resp.status_code();
        if (200..300).contains(&status) {
            Ok(())
        } else {
            let text = resp.text().await.unwrap_or_default();
            Err(format!("HTTP {status}: {}", text.chars().take(200).collect::<String>()))
        }
    };
    use futures_util::future::{select, Either};
    let out = match select(std::pin::pin!(call), Delay::from(Duration::from_millis(timeout_ms))).await {
        Either::Left((r, _)) => r,
        Either::Right(_) => {
            abort.abort();
            Err(format!("no answer within {timeout_ms} ms (AGENT_WEBHOOK_TIMEOUT_MS)"))
        }
    };
    out
}
