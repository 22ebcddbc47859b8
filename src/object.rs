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
use crate::instance::{Counts, Event};
use crate::live::{self, Core, Shared};
use crate::store::DoSql;
use crate::{ids, now_ms};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use threadline_durable::agent::cancel::CancelToken;
use threadline_durable::protocols::{self, Context};
use threadline_durable::storage::store::SqlStore;
use threadline_durable::thread::{Answer, Call, Consulted, Delivery};
use threadline_durable::Effect;
use threadline_durable::{query_pairs, wire::forward, ApiError, Settings, Thread};
use worker::*;

#[durable_object]
pub struct ThreadObject {
    inner: Rc<Inner>,
}

/// The object's state, shared with the tasks it spawns (the agent loop, the
/// idle-flush timer), which outlive the request that started them.
pub struct Inner {
    pub(crate) env: Env,
    pub(crate) state: State,
    pub(crate) storage: Storage,
    pub(crate) settings: Rc<Settings>,
    pub(crate) core: Shared,
    /// Deadline of the armed in-memory idle-flush timer, if one is armed.
    pub(crate) flush_timer: Rc<Cell<Option<i64>>>,
    /// Built-in agent runs driven by this instance: their cancel tokens and
    /// hosts (whose abort controller stops their fetches).
    pub(crate) agents: Rc<RefCell<Vec<(String, CancelToken, WorkerHost)>>>,
    /// The storage alarm this instance knows is set (`None`: not known yet,
    /// read from storage once): arming it reads no storage per event.
    pub(crate) alarm_at: Cell<Option<Option<i64>>>,
    /// This instance, as the debug stats report it.
    counts: Counts,
}

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
            counts: Counts::new(),
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
                if let Err(e) = live::page(&self.inner.core, &ws, &text) {
                    console_error!("page: {e}");
                }
                self.inner.run(effects).await;
            }
            Err(e) => console_error!("load: {e}"),
        }
        Ok(())
    }

    async fn websocket_close(&self, ws: WebSocket, code: usize, _reason: String, _clean: bool) -> Result<()> {
        let _event = self.inner.event().await;
        live::gone(&self.inner.core, &ws, code);
        Ok(())
    }

    async fn websocket_error(&self, ws: WebSocket, _error: Error) -> Result<()> {
        let _event = self.inner.event().await;
        live::gone(&self.inner.core, &ws, 1006);
        Ok(())
    }

    async fn alarm(&self) -> Result<Response> {
        let _event = self.inner.event().await;
        let inner = &self.inner;
        // The alarm that fired is spent.
        inner.alarm_at.set(Some(None));
        let effects = inner.load().and_then(|mut effects| {
            effects.extend(inner.with_core(|c| c.clock().alarm(&inner.settings, now_ms()))??);
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
    async fn event(&self) -> Event<'_> {
        self.counts.event(&self.storage, self.settings.debug_wakes).await
    }

    /// Runs `f` on the loaded core. The borrow ends when `f` returns.
    pub(crate) fn with_core<R>(&self, f: impl FnOnce(&mut Core) -> R) -> std::result::Result<R, ApiError> {
        let mut slot = self.core.borrow_mut();
        let core = slot.as_mut().ok_or_else(ApiError::thread_not_found)?;
        Ok(f(core))
    }

    /// Loads the core from storage on this instance's first event. A
    /// built-in run found open lost its loop with the old instance: the core
    /// says whether it resumes or ends (`Thread::recovery`), before anything
    /// else is served, so a send is never refused by a dead holder.
    pub(crate) fn load(&self) -> std::result::Result<Vec<Effect>, ApiError> {
        if self.core.borrow().is_some() {
            return Ok(Vec::new());
        }
        let store = SqlStore::open(DoSql(self.storage.sql()))?;
        let mut core = Thread::load(store, self.settings.thread.clone(), now_ms())?;
        core.set_id_source(Rc::new(ids::Csprng));
        // Subscribers whose sockets outlived the last instance: the object
        // slept, it did not restart.
        let sockets = live::sockets(&self.state);
        if !sockets.is_empty() {
            core.clock().woke(now_ms());
        }
        for (a, sink) in sockets {
            core.journal_mut().subscribers().add(a.id, a.follow, Delivery::Socket(sink));
        }
        let effects = core.agent_loop().recovery(&self.settings, now_ms())?;
        *self.core.borrow_mut() = Some(core);
        Ok(effects)
    }

    async fn handle(self: &Rc<Self>, req: Request) -> std::result::Result<Response, ApiError> {
        let req = http::Incoming::of(&req);
        let context = forward::decode::<Context>(req.header(forward::HEADER).as_deref())
            .ok_or_else(|| ApiError::not_found_route("no route"))?;
        let limit = context.route.body().limit(&self.settings.limits);
        let body = http::body(&req, limit).await.map_err(|e| e.api(limit))?;
        let url = req.raw.url();
        let (origin, _, query) = http::url_parts(&url);
        let query = query_pairs(query);
        let header = |name: &str| req.header(name);
        let tasks = u32::from(self.flush_timer.get().is_some()) + self.agents.borrow().len() as u32;
        let instance = match context.route.reads_instance() {
            true => self.counts.facts(&self.storage, self.settings.debug_wakes, tasks).await,
            false => Default::default(),
        };
        let mut effects = self.load()?;
        if let Some(ticket) = &context.claim {
            // A moving stream, claimed by the Worker that holds its client.
            let last_event_id = header("last-event-id");
            let claim = crate::held::Claim {
                ticket,
                relay_state: context.state.as_deref(),
                route: &context.route,
                query: &query,
                last_event_id: last_event_id.as_deref(),
            };
            let resp = crate::held::claim(&self.state, &self.core, claim, self.settings.ping_ms);
            self.run(effects).await;
            return resp;
        }
        let random = ids::random_u64();
        let logged = self.with_core(|c| c.journal().last_seq())?;
        let upgrade = req.header("upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
        // The core may ask another object first (a fork's source); the
        // request is then served again with that answer, once.
        let mut consulted: Option<(u16, Vec<u8>)> = None;
        let outcome = loop {
            let call = Call {
                caller: &context.caller,
                query: &query,
                header: &header,
                body: &body,
                origin: &origin,
                random,
                instance: &instance,
                budget: context.budget,
                files: &context.files,
                reserve: context.reserve,
                consulted: consulted.as_ref().map(|(status, body)| Consulted { status: *status, body }),
            };
            let outcome = self.with_core(|c| protocols::handle(c, &context.route, &call, &self.settings, now_ms()))?;
            match outcome.answer {
                Answer::Consult(asked) if consulted.is_none() => {
                    effects.extend(outcome.effects);
                    let mut resp = crate::call(&self.env, None, &asked).await.map_err(http::internal)?;
                    consulted = Some((resp.status_code(), resp.bytes().await.map_err(http::internal)?));
                }
                _ => break outcome,
            }
        };
        // What this request appended is written to its subscribers by now,
        // but workerd sends it only once this turn ends and its SQL commits
        // (persist, then fan out): the answer and the effects wait for the
        // next turn, so the delivery does not wait for them (with no
        // subscriber, there is no delivery to wait for).
        let delivered = self.with_core(|c| c.journal().delivered_after(logged)).unwrap_or(false);
        if delivered && matches!(outcome.answer, Answer::Reply(_)) {
            Delay::from(std::time::Duration::ZERO).await;
        }
        // A subscriber is registered (and sent its hello) in the same
        // synchronous block as its answer was decided; effects come after.
        let resp = match outcome.answer {
            Answer::Reply(r) => http::reply(r).map_err(http::internal),
            Answer::Follow { .. } if !upgrade => Err(ApiError::unavailable("a stream is served over a socket")),
            Answer::Follow { follow, after } => live::subscribe(&self.state, &self.core, follow, after),
            Answer::Hold { follow, after, plan } => {
                crate::held::hold(&self.core, follow, after, plan, self.settings.ping_ms)
            }
            Answer::Consult(_) => Err(ApiError::unavailable("the thread asked another object twice for one request")),
        };
        effects.extend(outcome.effects);
        self.run(effects).await;
        resp
    }
}
