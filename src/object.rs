//! The `#[durable_object]` shell of a thread. It loads the core [`Thread`]
//! over SQLite, hands it each request as bytes, and carries out what the
//! core answers: a reply, a subscriber socket to accept, and [`Effect`]s
//! (drive the built-in agent, call the webhook, update the directory,
//! wipe). It keeps the timers (the storage alarm, the idle-flush timer) at
//! the deadlines the core names. It decides nothing.
//!
//! It holds no stream: subscribers are hibernatable sockets the stateless
//! Worker relays to its clients (`live`, `relay`), so with no run and no
//! unflushed text the object sleeps, and wakes for a publish (or a page a
//! relay asks for) for as long as that takes.

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
use threadline_durable::thread::service::{Answer, Incoming, Instance};
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
    state: State,
    storage: Storage,
    settings: Rc<Settings>,
    core: Shared,
    /// Deadline of the armed in-memory idle-flush timer, if one is armed.
    flush_timer: Rc<Cell<Option<i64>>>,
    /// Built-in agent runs driven by this instance: their cancel tokens and
    /// hosts (whose abort controller stops their fetches).
    agents: Rc<RefCell<Vec<(String, CancelToken, WorkerHost)>>>,
    /// The storage alarm this instance knows is set (`None`: not known yet,
    /// read from storage once): arming it reads no storage per event.
    alarm_at: Cell<Option<Option<i64>>>,
    /// This instance, as the debug stats report it.
    instance: String,
    inflight: Cell<u32>,
    handled: Cell<u64>,
}

/// One event in progress on the object (a request, a socket event, an
/// alarm): counted while it runs.
struct Event<'a>(&'a Inner);

impl Drop for Event<'_> {
    fn drop(&mut self) {
        self.0.inflight.set(self.0.inflight.get() - 1);
    }
}

/// Stored count of the events every instance handled (`DEBUG_WAKES`).
const HANDLED_KEY: &str = "debug:handled";

impl DurableObject for ThreadObject {
    fn new(state: State, env: Env) -> Self {
        let settings = crate::settings(&env);
        // The Worker's keep-alive on a subscriber socket is answered by the
        // runtime, without waking the object.
        if let Ok(pair) = WebSocketRequestResponsePair::new(live::PING, live::PONG) {
            state.set_websocket_auto_response(&pair);
        }
        let inner = Inner {
            env,
            storage: state.storage(),
            state,
            settings,
            core: Rc::default(),
            flush_timer: Rc::default(),
            agents: Rc::default(),
            alarm_at: Cell::new(None),
            instance: format!("{:x}", ids::random_u64()),
            inflight: Cell::new(0),
            handled: Cell::new(0),
        };
        ThreadObject { inner: Rc::new(inner) }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        let _event = self.inner.event().await;
        match self.inner.handle(req).await {
            Ok(resp) => Ok(resp),
            Err(e) => http::error(&e),
        }
    }

    async fn websocket_message(&self, ws: WebSocket, message: WebSocketIncomingMessage) -> Result<()> {
        let WebSocketIncomingMessage::String(text) = message else { return Ok(()) };
        let _event = self.inner.event().await;
        match self.inner.load() {
            Ok(effects) => {
                if let Err(e) = self.inner.on_socket_message(&ws, &text) {
                    console_error!("page: {e}");
                }
                self.inner.run(effects).await;
            }
            Err(e) => console_error!("load: {e}"),
        }
        Ok(())
    }

    async fn websocket_close(&self, ws: WebSocket, _code: usize, _reason: String, _clean: bool) -> Result<()> {
        let _event = self.inner.event().await;
        self.inner.socket_gone(&ws);
        Ok(())
    }

    async fn websocket_error(&self, ws: WebSocket, _error: Error) -> Result<()> {
        let _event = self.inner.event().await;
        self.inner.socket_gone(&ws);
        Ok(())
    }

    async fn alarm(&self) -> Result<Response> {
        let _event = self.inner.event().await;
        let inner = &self.inner;
        // The alarm that fired is spent.
        inner.alarm_at.set(Some(None));
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
    /// Counts an event for the debug stats; with `DEBUG_WAKES`, in storage
    /// too (the input gate holds other events while it is written).
    async fn event(&self) -> Event<'_> {
        self.inflight.set(self.inflight.get() + 1);
        self.handled.set(self.handled.get() + 1);
        if self.settings.debug_wakes {
            let n: u64 = self.storage.get(HANDLED_KEY).await.ok().flatten().unwrap_or(0);
            let _ = self.storage.put(HANDLED_KEY, n + 1).await;
        }
        Event(self)
    }

    /// The instance's facts, for the debug stats (the asking event excluded
    /// from those in progress).
    async fn instance(&self) -> Instance {
        let handled_ever = match self.settings.debug_wakes {
            true => self.storage.get(HANDLED_KEY).await.ok().flatten(),
            false => None,
        };
        let timer = u32::from(self.flush_timer.get().is_some());
        Instance {
            id: self.instance.clone(),
            inflight: self.inflight.get().saturating_sub(1),
            handled: self.handled.get(),
            handled_ever,
            tasks: timer + self.agents.borrow().len() as u32,
        }
    }

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
        // Subscribers whose sockets outlived the last instance: the object
        // slept, it did not restart.
        let sockets = live::sockets(&self.state);
        if !sockets.is_empty() {
            core.woke(now_ms());
        }
        for (a, sink) in sockets {
            core.resubscribe(a.id, a.follow, sink);
        }
        let effects = core.recovery(&self.settings, now_ms())?;
        *self.core.borrow_mut() = Some(core);
        Ok(effects)
    }

    async fn handle(self: &Rc<Self>, mut req: Request) -> std::result::Result<Response, ApiError> {
        let route = Route::parse(req.method().as_ref(), &req.path())?;
        let caller = Caller::from_header(http::header(&req, CALLER_HEADER).as_deref());
        let limit = route.body_limit(&self.settings.limits);
        let body = http::body(&mut req, limit).await.map_err(|e| e.api(limit))?;
        let url = req.inner().url();
        let (origin, _, query) = http::url_parts(&url);
        let query = request::query_pairs(query);
        let header = |name: &str| http::header(&req, name);
        let instance = self.instance().await;
        let mut effects = self.load()?;
        let incoming = Incoming {
            route: &route,
            caller: &caller,
            query: &query,
            header: &header,
            body: &body,
            origin: &origin,
            random: ids::random_u64(),
            instance: &instance,
        };
        let upgrade = http::header(&req, "upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
        let outcome = self.with_core(|c| c.handle(&incoming, &self.settings, now_ms()))?;
        // A subscriber is registered (and sent its hello) in the same
        // synchronous block as its answer was decided; effects come after.
        let resp = self.answer(outcome.answer, upgrade);
        effects.extend(outcome.effects);
        self.run(effects).await;
        resp
    }

    /// Turns the core's answer into a response: a reply, or a subscriber's
    /// socket (the Worker asked for one).
    fn answer(&self, answer: Answer, upgrade: bool) -> std::result::Result<Response, ApiError> {
        match answer {
            Answer::Reply(r) => http::reply(r).map_err(http::internal),
            Answer::Follow { .. } if !upgrade => Err(ApiError::unavailable("a stream is served over a socket")),
            Answer::Follow { follow, after } => {
                let id = ids::subscriber_id();
                let (client, server) = live::accept(&self.state, id, &follow).map_err(http::internal)?;
                let hello = self.with_core(|c| c.subscribe(id, follow, after, live::WsSink::new(server.clone())))??;
                live::send(&server, &hello);
                Response::from_websocket(client).map_err(http::internal)
            }
        }
    }

    /// A subscriber's relay went away: it is unregistered (a sleeping
    /// object is not woken for it: a closed socket is not among those it
    /// finds on waking).
    fn socket_gone(&self, ws: &WebSocket) {
        if let (Some(a), Some(core)) = (live::attachment(ws), self.core.borrow_mut().as_mut()) {
            core.unsubscribe(a.id);
        }
        let _ = ws.close(Some(1000), Some("closed"));
    }

    /// A relay asks for the next replay page of its subscription.
    fn on_socket_message(&self, ws: &WebSocket, text: &str) -> std::result::Result<(), ApiError> {
        let Some((after, high)) = threadline_durable::feed::wire::parse_page_request(text) else { return Ok(()) };
        let Some(a) = live::attachment(ws) else { return Ok(()) };
        let page = self.with_core(|c| c.replay_page(&a.follow, after, high))??;
        live::send(ws, &page);
        Ok(())
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
                    // The thread is gone: its subscribers' streams end.
                    *self.core.borrow_mut() = None;
                    for ws in self.state.get_websockets_with_tag(live::TAG) {
                        let _ = ws.close(Some(live::GONE), Some("the thread was deleted"));
                    }
                    if let Err(e) = self.storage.delete_all().await {
                        console_error!("delete: {e}");
                    }
                    let _ = self.storage.delete_alarm().await;
                    self.alarm_at.set(Some(None));
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
        let current = match self.alarm_at.get() {
            Some(known) => known,
            None => self.storage.get_alarm().await.ok().flatten(),
        };
        self.alarm_at.set(Some(current));
        if current.is_none_or(|t| t > deadline || t < now) {
            // An i64 alarm time is an offset from now, not an epoch time.
            let at = now + (deadline - now).max(10);
            match self.storage.set_alarm(at - now).await {
                Ok(()) => self.alarm_at.set(Some(Some(at))),
                Err(e) => {
                    self.alarm_at.set(None);
                    console_error!("set_alarm: {e}");
                }
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
