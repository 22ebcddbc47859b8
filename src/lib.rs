//! # threadline: the Worker
//!
//! The thin wasm side: it carries bytes and timers and asks the core
//! (`durable/`, crate `threadline-durable`) what to do. A tour:
//!
//! - this file: the stateless entry point. The core's `front` says where a
//!   request goes and who is calling; the request goes to the thread's
//!   Durable Object (one per thread id, `idFromName`), a stream's object, or
//!   the caller's directory, with the caller in one header.
//! - [`object`]: the `#[durable_object]` shell of a thread: loads the core,
//!   hands it each request, accepts subscriber sockets and runs the effects
//!   it asks for, keeps its timers. It holds no stream, so it can sleep.
//! - [`live`]: subscriber plumbing on the object's side: the shared core,
//!   subscribers as hibernatable sockets and their attachments.
//! - [`relay`]: the Worker's end of a subscriber's socket: the client's
//!   stream, framed by the core's `feed`, with its keep-alives and ends.
//! - [`store`]: the core's storage trait on Durable Object SQLite.
//! - [`agent_host`]: the built-in agent's host: model client and tool runner
//!   over `fetch`, timers, the publish path.
//! - [`directory`]: each actor's list of threads and send counter.
//! - [`stream_object`]: `StreamObject`, one standalone Durable Stream
//!   (`/v1/stream/*`) per object; its live readers are relayed sockets too.
//! - [`http`], [`ids`]: bytes in and out of the runtime; random ids.

mod agent_host;
mod directory;
mod http;
mod ids;
mod live;
mod object;
mod relay;
mod store;
mod stream_object;

pub use directory::Directory;
pub use object::ThreadObject;
use std::rc::Rc;
pub use stream_object::StreamObject;
use threadline_durable::access::{Caller, CALLER_HEADER};
use threadline_durable::feed::Plan;
use threadline_durable::front::{self, Dispatch};
use threadline_durable::protocols::durable_streams::server::feeds as stream_live;
use threadline_durable::route::Route;
use threadline_durable::{request, ApiError, Reply, Settings};
use worker::*;

pub(crate) fn now_ms() -> i64 {
    Date::now().as_millis() as i64
}

#[event(start)]
fn start() {
    console_error_panic_hook::set_once();
}

thread_local! {
    /// The configuration, read once per isolate: vars and secrets are fixed
    /// for an isolate's life, and reading them parses JSON (tools, policy,
    /// catalog) and builds the JWT keys, work a request should not repeat.
    static SETTINGS: std::cell::OnceCell<Rc<Settings>> = const { std::cell::OnceCell::new() };
}

thread_local! {
    /// The object namespaces, looked up once per isolate: a binding is fixed
    /// for the isolate's life (it is not an I/O object: any request may use
    /// it), and `Env::durable_object` checks its type by comparing names
    /// across the boundary on every call.
    static NAMESPACES: std::cell::RefCell<Vec<(&'static str, ObjectNamespace)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The object namespace bound as `binding`.
pub(crate) fn namespace(env: &Env, binding: &'static str) -> Result<ObjectNamespace> {
    if let Some(ns) = NAMESPACES.with(|n| n.borrow().iter().find(|(b, _)| *b == binding).map(|(_, ns)| ns.clone())) {
        return Ok(ns);
    }
    let ns = env.durable_object(binding)?;
    NAMESPACES.with(|n| n.borrow_mut().push((binding, ns.clone())));
    Ok(ns)
}

pub(crate) fn settings(env: &Env) -> Rc<Settings> {
    SETTINGS.with(|c| {
        c.get_or_init(|| {
            let s = Settings::from_vars(|name| env.var(name).ok().map(|v| v.to_string()));
            for w in s.warnings() {
                console_warn!("threadline: {w}");
            }
            Rc::new(s)
        })
        .clone()
    })
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let settings = settings(&env);
    if front::is_stream_path(&req.path()) {
        return streams(req, &env, &settings).await;
    }
    let cors = front::cors(http::header(&req, "origin").as_deref(), &settings);
    let head = req.method() == Method::Head;
    let raw = Clone::clone(req.inner());
    let resp = match route(req, &env, &settings, cors.is_some()).await {
        Ok(resp) => resp,
        Err(e) => http::error(&e)?,
    };
    http::discard_body(raw).await;
    // HEAD: the answer's status and headers, no body (an SSE route's stream
    // is dropped, which ends its subscription).
    let resp = if head {
        Response::empty()?.with_status(resp.status_code()).with_headers(resp.headers().clone())
    } else {
        resp
    };
    let headers = http::mutable_headers(&resp)?;
    for (k, v) in front::SECURITY_HEADERS {
        headers.set(k, v)?;
    }
    for (k, v) in cors.iter().flatten() {
        headers.set(k, v)?;
    }
    Ok(resp.with_headers(headers))
}

async fn route(
    mut req: Request,
    env: &Env,
    settings: &Settings,
    cors_allowed: bool,
) -> std::result::Result<Response, ApiError> {
    let path = req.path();
    let query = request::query_pairs(&http::query(&req));
    let token = request::query_first(&query, "token");
    let authorization = http::header(&req, "authorization");
    let (dispatch, caller) =
        front::plan(req.method().as_ref(), &path, token.as_deref(), authorization.as_deref(), settings, now_ms())?;
    match dispatch {
        Dispatch::Preflight => {
            Ok(Response::empty().map_err(http::internal)?.with_status(if cors_allowed { 204 } else { 403 }))
        }
        Dispatch::Stream => streams(req, env, settings).await.map_err(http::internal),
        Dispatch::Models => {
            let catalog = settings.catalog.as_ref().map_err(|e| ApiError::invalid_models(e.clone()))?;
            http::reply(Reply::json(200, &catalog.view())).map_err(http::internal)
        }
        Dispatch::ThreadList => {
            let mut resp = directory_call(env, caller.id().unwrap_or_default(), "/threads", None).await?;
            let body: serde_json::Value = resp.json().await.map_err(http::internal)?;
            http::reply(Reply::json(200, &body)).map_err(http::internal)
        }
        Dispatch::AgoraChat | Dispatch::AgoraDecision { .. } | Dispatch::UiChat | Dispatch::AguiRun => {
            let limit = settings.limits.max_body_bytes;
            let body = http::body(&mut req, limit).await.map_err(|e| e.api(limit))?;
            let json = request::json(&body, limit)?;
            let path = match dispatch {
                Dispatch::AgoraChat => {
                    format!("/agent/threads/{}/chat", request::agora_chat_thread(&json, || ids::new_id("thr"))?)
                }
                Dispatch::AgoraDecision { approve } => {
                    let action = if approve { "approve" } else { "reject" };
                    format!("/agent/threads/{}/tool-call/{action}", request::agora_decision_thread(&json)?)
                }
                Dispatch::UiChat => format!("/api/chat/{}", request::ui_chat_thread(&json)?),
                Dispatch::AguiRun => format!("/ag-ui/threads/{}/run", request::agui_thread(&json)?),
                _ => unreachable!(),
            };
            let route = Route::parse("POST", &path)?;
            let resp = to_thread(&req, &route, &path, &caller, Forward::Body(body), env, settings).await?;
            follow_send(&req, &route, &caller, resp, env, settings).await
        }
        Dispatch::Thread(route) => {
            if let Some(reply) = front::head_reply(req.method().as_ref(), &route) {
                return http::reply(reply).map_err(http::internal);
            }
            let last_event_id = http::header(&req, "last-event-id");
            if let Some(plan) = Plan::of(&route, &query, last_event_id.as_deref(), &caller, now_ms())? {
                let resp = to_thread(&req, &route, &path, &caller, Forward::Socket, env, settings).await?;
                return relay::serve(
                    resp,
                    plan,
                    &req.inner().signal(),
                    settings.ping_ms,
                    settings.streams_long_poll_ms,
                )
                .await;
            }
            // The body goes to the object as it arrives, never held here: the
            // object reads it with the route's cap (a declared length over it
            // is refused now, before anything is read).
            let limit = route.body_limit(&settings.limits);
            if http::declared_length(&req).is_some_and(|n| n > limit as u64) {
                return Err(ApiError::body_too_large(limit));
            }
            to_thread(&req, &route, &path, &caller, Forward::Stream, env, settings).await
        }
    }
}

/// agora's and the AI SDK's sends answer with the run they started, as a
/// stream: the Worker follows the thread's answer with that run's stream
/// (`Plan::after_send` says which).
async fn follow_send(
    req: &Request,
    route: &Route,
    caller: &Caller,
    mut resp: Response,
    env: &Env,
    settings: &Settings,
) -> std::result::Result<Response, ApiError> {
    if resp.status_code() != 200 || !route.sends() {
        return Ok(resp);
    }
    let headers = resp.headers().clone();
    let body = resp.bytes().await.map_err(http::internal)?;
    let reply = Reply::new(200).body(body);
    let Some((plan, path)) = Plan::after_send(route, &reply) else {
        return Ok(Response::from_bytes(reply.body).map_err(http::internal)?.with_headers(headers));
    };
    let stream = Route::parse("GET", path.split('?').next().unwrap_or_default())?;
    let socket = to_thread(req, &stream, &path, caller, Forward::Socket, env, settings).await?;
    relay::serve(socket, plan, &req.inner().signal(), settings.ping_ms, settings.streams_long_poll_ms).await
}

/// What a forwarded request carries: a (capped) body read here, the
/// client's body as it streams in, or a request for a subscriber socket.
enum Forward {
    Body(Vec<u8>),
    Stream,
    Socket,
}

/// Forwards a request to its thread's object with the caller attached
/// (any copy of the caller header a client sent is dropped). Sends are
/// counted against the caller's per-minute limit first.
async fn to_thread(
    req: &Request,
    route: &threadline_durable::route::Route,
    path: &str,
    caller: &Caller,
    body: Forward,
    env: &Env,
    settings: &Settings,
) -> std::result::Result<Response, ApiError> {
    if route.sends() && settings.runs_per_minute > 0 {
        let key = front::rate_key(caller, http::header(req, "cf-connecting-ip").as_deref(), settings);
        admit(env, settings, &key).await?;
    }
    // The object's URL: this request's origin, the route's path, and the
    // path's own query if it has one (a send's follow-up stream), else this
    // request's.
    let raw = req.inner();
    let own = raw.url();
    let (origin, _, own_query) = http::url_parts(&own);
    let (path, query) = path.split_once('?').unwrap_or((path, own_query));
    let url = match query {
        "" => format!("{origin}{path}"),
        q => format!("{origin}{path}?{q}"),
    };
    let method = raw.method();
    let forwarded = match body {
        Forward::Body(b) if b.is_empty() => http::forwarded(raw, &url, &method, None),
        Forward::Body(b) => http::forwarded(raw, &url, &method, Some(&js_sys::Uint8Array::from(b.as_slice()).into())),
        Forward::Stream => http::forwarded(raw, &url, &method, raw.body().map(Into::into).as_ref()),
        Forward::Socket => http::socket_request(raw, &url),
    }
    .map_err(http::internal)?;
    // Set over any copy the client sent: the one header the object trusts.
    forwarded.headers().set(CALLER_HEADER, &caller.to_header()).map_err(|e| http::internal(e.into()))?;
    let stub = namespace(env, "THREAD").and_then(|ns| ns.get_by_name(route.thread())).map_err(http::internal)?;
    stub.fetch_with_request(Request::from(forwarded)).await.map_err(http::internal)
}

/// Sends per actor per minute, counted by the actor's directory object.
async fn admit(env: &Env, settings: &Settings, actor: &str) -> std::result::Result<(), ApiError> {
    let body = serde_json::json!({ "limit": settings.runs_per_minute, "now": now_ms() });
    let mut resp = directory_call(env, actor, "/admit", Some(body)).await?;
    if resp.status_code() == 429 {
        let answer: serde_json::Value = resp.json().await.map_err(http::internal)?;
        let retry = answer["retryAfter"].as_i64().unwrap_or(60).max(1);
        return Err(ApiError::rate_limited(settings.runs_per_minute, retry));
    }
    Ok(())
}

pub(crate) async fn directory_call(
    env: &Env,
    actor: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> std::result::Result<Response, ApiError> {
    let stub =
        namespace(env, "DIRECTORY").and_then(|ns| ns.get_by_name(&format!("actor:{actor}"))).map_err(http::internal)?;
    let mut init = RequestInit::new();
    if let Some(b) = body {
        let headers = Headers::new();
        let _ = headers.set("content-type", "application/json");
        init.with_method(Method::Post).with_headers(headers).with_body(Some(b.to_string().into()));
    }
    let req = Request::new_with_init(&format!("https://directory{path}"), &init).map_err(http::internal)?;
    stub.fetch_with_request(req).await.map_err(http::internal)
}

/// `/v1/stream/*`: the standalone Durable Streams server, one `StreamObject`
/// per stream path. CORS is open to any origin (the protocol's browser
/// clients read streams cross-origin; nothing here rides on cookies) and
/// every answer carries the protocol's security headers.
async fn streams(req: Request, env: &Env, settings: &Settings) -> Result<Response> {
    let raw = Clone::clone(req.inner());
    let resp = streams_inner(req, env, settings).await;
    http::discard_body(raw).await;
    resp
}

async fn streams_inner(req: Request, env: &Env, settings: &Settings) -> Result<Response> {
    use threadline_durable::protocols::durable_streams::wire::COMMON_HEADERS;
    let finish = |resp: Response| -> Result<Response> {
        let headers = http::mutable_headers(&resp)?;
        for (k, v) in COMMON_HEADERS {
            headers.set(k, v)?;
        }
        Ok(resp.with_headers(headers))
    };
    let authorization = http::header(&req, "authorization");
    if let Err(e) = front::stream_access(req.method().as_ref(), authorization.as_deref(), settings, now_ms()) {
        return finish(http::error(&e)?);
    }
    if req.method() == Method::Options {
        return finish(Response::empty()?.with_status(204));
    }
    let limit = threadline_durable::protocols::durable_streams::server::MAX_BODY;
    if http::header(&req, "content-length").and_then(|v| v.trim().parse::<u64>().ok()).is_some_and(|n| n > limit as u64)
    {
        return finish(http::reply(Reply::text(413, &format!("the body is over {limit} bytes")))?);
    }
    let path = req.path();
    if path.len() <= "/v1/stream/".len() {
        return finish(http::error(&ApiError::not_found_route("a stream path is /v1/stream/<name>"))?);
    }
    let stub = namespace(env, "STREAM")?.get_by_name(&path)?;
    let query = request::query_pairs(&http::query(&req));
    let if_none_match = http::header(&req, "if-none-match");
    let long_poll_ms = settings.streams_long_poll_ms;
    let Some(plan) = stream_live::plan(req.method().as_ref(), &path, &query, if_none_match.as_deref(), long_poll_ms)
    else {
        return finish(stub.fetch_with_request(req).await?);
    };
    // A live read: the object answers with a reader's socket (or refuses),
    // and this Worker relays it, so the object can sleep meanwhile.
    let socket = http::socket_request(req.inner(), &req.inner().url())?;
    let socket = stub.fetch_with_request(Request::from(socket)).await?;
    let resp = relay::serve(socket, plan, &req.inner().signal(), settings.ping_ms, long_poll_ms).await;
    finish(match resp {
        Ok(r) => r,
        Err(e) => http::error(&e)?,
    })
}
