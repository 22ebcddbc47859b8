//! # threadline: the Worker
//!
//! The thin wasm side. A tour:
//!
//! - this file: the stateless entry point. It parses the route (with the
//!   core's [`Route`] parser, so ids are checked before anything is
//!   forwarded) and forwards the request to the thread's Durable Object, one
//!   per thread id (`idFromName(threadId)`).
//! - [`object`]: the `#[durable_object]` shell around the core `Thread`:
//!   timers, SSE channels, webhook calls.
//! - [`store`]: the core's storage trait on Durable Object SQLite.
//! - [`agent_host`]: the built-in agent's host: model client and tool runner
//!   over `fetch`, timers, the publish path.
//! - [`directory`]: each actor's list of threads (`GET /agent/threads`).
//! - [`stream_object`]: `StreamObject`, one standalone Durable Stream
//!   (`/v1/stream/*`) per object; `object::ds_view` serves a thread's log and
//!   a run's events as Durable Streams (`/v1/threads`, `/v1/runs`).
//! - [`config`], [`ids`], [`http`]: configuration, random ids, JSON answers.
//!
//! Every rule about events lives in `durable/` (crate `threadline-durable`).

mod agent_host;
mod config;
mod directory;
mod http;
mod ids;
mod object;
mod store;
mod stream_object;

pub use directory::Directory;
pub use object::ThreadObject;
pub use stream_object::StreamObject;
use threadline_durable::auth::{self, Actor};
use threadline_durable::route::Route;
use threadline_durable::ApiError;
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
    static CONFIG: std::cell::OnceCell<std::rc::Rc<config::Config>> = const { std::cell::OnceCell::new() };
}

fn config(env: &Env) -> std::rc::Rc<config::Config> {
    CONFIG.with(|c| c.get_or_init(|| std::rc::Rc::new(config::Config::from_env(env))).clone())
}

/// Headers the Worker sets on what it forwards to a thread: who is calling.
/// Any a client sent are removed first.
pub(crate) const ACTOR_HEADER: &str = "x-threadline-actor";
pub(crate) const ROLES_HEADER: &str = "x-threadline-roles";

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let config = config(&env);
    let config = config.as_ref();
    if req.path().starts_with("/v1/stream/") {
        return streams(req, &env, config).await;
    }
    let origin = req.headers().get("origin").ok().flatten();
    let allowed = origin.as_deref().filter(|o| {
        config.allowed_origins.iter().any(|a| a == "*" || a == o.trim_end_matches('/'))
    });
    let head = req.method() == Method::Head;
    let resp = if req.method() == Method::Options {
        // CORS preflight: answered here, never forwarded.
        Response::empty()?.with_status(if allowed.is_some() { 204 } else { 403 })
    } else {
        match route(req, &env, config).await {
            Ok(resp) => resp,
            Err(e) => http::error(&e)?,
        }
    };
    // HEAD: the answer's status and headers, no body (an SSE route's stream
    // is dropped, which ends its subscription).
    let resp = if head { Response::empty()?.with_status(resp.status_code()).with_headers(resp.headers().clone()) } else { resp };
    let headers = http::mutable_headers(&resp)?;
    headers.set("x-content-type-options", "nosniff")?;
    if let Some(o) = allowed {
        headers.set("access-control-allow-origin", o)?;
        headers.set("vary", "Origin")?;
        headers.set("access-control-allow-methods", "GET, POST, PATCH, DELETE, OPTIONS")?;
        headers.set(
            "access-control-allow-headers",
            "authorization, content-type, last-event-id, producer-id, producer-epoch, producer-seq",
        )?;
        headers.set(
            "access-control-expose-headers",
            "x-agent-run-id, x-agent-thread-id, retry-after, stream-next-offset, stream-up-to-date, stream-cursor, stream-closed, producer-epoch, producer-seq, producer-expected-seq, producer-received-seq",
        )?;
        headers.set("access-control-max-age", "600")?;
    }
    Ok(resp.with_headers(headers))
}

async fn route(req: Request, env: &Env, config: &config::Config) -> std::result::Result<Response, ApiError> {
    let path = req.path();
    // External agents publish with their run's publish token, checked by the thread.
    let publishing = req.method() == Method::Post
        && ((path.starts_with("/instance-ai/threads/") && path.ends_with("/events")) || path.starts_with("/v1/runs/"));
    let actor = if publishing { None } else { Some(caller(&req, config, &path)?) };
    let actor_id = actor.as_ref().map(|a| a.id.as_str()).unwrap_or_default();
    match path.as_str() {
        "/agent/models" => return models(&req, config),
        "/agent/threads" => return thread_list(&req, env, actor_id).await,
        _ => {}
    }
    let (req, body) = match (req.method(), path.as_str()) {
        (Method::Post, "/agent/chat") => agora_chat(req).await?,
        (Method::Post, "/agent/tool-call/approve") => agora_decision(req, "approve").await?,
        (Method::Post, "/agent/tool-call/reject") => agora_decision(req, "reject").await?,
        _ => read_body(req).await?,
    };
    let route = Route::parse(req.method().as_ref(), &req.path())?;
    if req.method() == Method::Head && matches!(route, Route::Events { .. } | Route::AgentStream { .. }) {
        // A stream's headers, without opening one.
        let headers = Headers::new();
        let _ = headers.set("content-type", "text/event-stream");
        let _ = headers.set("cache-control", "no-cache");
        return Ok(Response::empty().map_err(http::internal)?.with_headers(headers));
    }
    if matches!(route, Route::Chat { .. } | Route::AgentChat { .. }) {
        admit(env, config, actor_id).await?;
    }
    let forwarded = forward(&req, body, actor.as_ref())?;
    let stub = env
        .durable_object("THREAD")
        .and_then(|ns| ns.get_by_name(route.thread()))
        .map_err(http::internal)?;
    stub.fetch_with_request(forwarded).await.map_err(http::internal)
}

/// Who is calling. A browser's EventSource cannot send headers, so the
/// events and run-stream routes also take a stream token in `?token=`: short
/// lived, for one thread, read-only. A full JWT in a URL is refused: URLs
/// end up in logs, browser history and `Referer` headers, where a long-lived
/// credential must never be.
fn caller(req: &Request, config: &config::Config, path: &str) -> std::result::Result<Actor, ApiError> {
    let url = req.url().map_err(http::internal)?;
    let token = url.query_pairs().find(|(k, _)| k == "token").map(|(_, v)| v.into_owned());
    if let Some(token) = token {
        if auth::looks_like_jwt(&token) {
            return Err(ApiError::new(
                401,
                "token_in_url",
                "a bearer JWT is refused in a URL (logs, history and Referer headers keep URLs); ask POST /instance-ai/threads/:threadId/stream-token for a stream token",
            ));
        }
        let thread = stream_thread(path).ok_or_else(|| {
            ApiError::new(401, "unauthorized", "stream tokens are accepted on the events and run-stream routes only")
        })?;
        let key = config.stream_key.as_deref().ok_or_else(|| {
            ApiError::new(503, "stream_tokens_not_configured", "set STREAM_TOKEN_SECRET (or AUTH_JWT_SECRET)")
        })?;
        return auth::verify_stream_token(key, &token, &thread, now_ms());
    }
    let authorization = req.headers().get("authorization").ok().flatten();
    config.auth.authenticate(authorization.as_deref(), now_ms())
}

/// The thread of a route that takes stream tokens (GET events, GET run stream).
fn stream_thread(path: &str) -> Option<String> {
    match Route::parse("GET", path).ok()? {
        Route::Events { thread } | Route::AgentStream { thread, .. } | Route::StreamThread { thread } => Some(thread),
        Route::StreamRun { thread, append: false, .. } => Some(thread),
        _ => None,
    }
}

/// Runs per actor per minute, counted by the actor's directory object.
async fn admit(env: &Env, config: &config::Config, actor: &str) -> std::result::Result<(), ApiError> {
    if config.runs_per_minute <= 0 {
        return Ok(());
    }
    let body = serde_json::json!({ "limit": config.runs_per_minute, "now": now_ms() });
    let mut resp = directory_call(env, actor, "/admit", Some(body)).await?;
    if resp.status_code() == 429 {
        let answer: serde_json::Value = resp.json().await.map_err(http::internal)?;
        let retry = answer["retryAfter"].as_i64().unwrap_or(60).max(1);
        let err = ApiError::new(429, "rate_limited", format!("at most {} sends a minute; retry in {retry} s", config.runs_per_minute))
            .with("retryAfter", retry);
        return Err(err);
    }
    Ok(())
}

pub(crate) async fn directory_call(
    env: &Env,
    actor: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> std::result::Result<Response, ApiError> {
    let stub = env
        .durable_object("DIRECTORY")
        .and_then(|ns| ns.get_by_name(&format!("actor:{actor}")))
        .map_err(http::internal)?;
    let mut init = RequestInit::new();
    if let Some(b) = body {
        let headers = Headers::new();
        let _ = headers.set("content-type", "application/json");
        init.with_method(Method::Post).with_headers(headers).with_body(Some(b.to_string().into()));
    }
    let req = Request::new_with_init(&format!("https://directory{path}"), &init).map_err(http::internal)?;
    stub.fetch_with_request(req).await.map_err(http::internal)
}

/// `GET /agent/threads`: the caller's threads, newest first.
async fn thread_list(req: &Request, env: &Env, actor: &str) -> std::result::Result<Response, ApiError> {
    if req.method() != Method::Get {
        return Err(ApiError::new(405, "method_not_allowed", "/agent/threads takes GET").with("allow", "GET"));
    }
    let mut resp = directory_call(env, actor, "/threads", None).await?;
    let body: serde_json::Value = resp.json().await.map_err(http::internal)?;
    http::json(200, &body).map_err(http::internal)
}

/// Reads the body (small: every route's body is capped), so the request can
/// be re-sent with the caller's identity.
async fn read_body(mut req: Request) -> std::result::Result<(Request, Option<Vec<u8>>), ApiError> {
    let body = match req.method() {
        Method::Get | Method::Head | Method::Delete | Method::Options => None,
        _ => Some(req.bytes().await.map_err(|e| ApiError::bad_request("invalid_body", e.to_string()))?),
    };
    Ok((req, body))
}

/// The request as the thread gets it: the caller's identity in our headers,
/// any copies of them a client sent removed.
fn forward(req: &Request, body: Option<Vec<u8>>, actor: Option<&Actor>) -> std::result::Result<Request, ApiError> {
    let headers = Headers::new();
    for (k, v) in req.headers().entries() {
        if !k.starts_with("x-threadline-") {
            let _ = headers.set(&k, &v);
        }
    }
    if let Some(a) = actor {
        let _ = headers.set(ACTOR_HEADER, &a.id);
        let _ = headers.set(ROLES_HEADER, &a.roles.join(","));
    }
    let mut init = RequestInit::new();
    init.with_method(req.method()).with_headers(headers);
    if let Some(b) = body {
        init.with_body(Some(js_sys::Uint8Array::from(b.as_slice()).into()));
    }
    let url = req.url().map_err(http::internal)?;
    Request::new_with_init(url.as_str(), &init).map_err(http::internal)
}

/// `GET /agent/models`: the model catalog (`LLM_MODELS`, or the one `LLM_MODEL`).
fn models(req: &Request, config: &config::Config) -> std::result::Result<Response, ApiError> {
    if req.method() != Method::Get {
        return Err(ApiError::new(405, "method_not_allowed", "/agent/models takes GET").with("allow", "GET"));
    }
    let catalog = config.catalog.as_ref().map_err(|e| ApiError::new(503, "invalid_models", e.clone()))?;
    http::json(200, &catalog.view()).map_err(http::internal)
}

/// Reads a small JSON body in the stateless Worker (to find the thread).
async fn small_json(req: &mut Request) -> std::result::Result<(Vec<u8>, serde_json::Value), ApiError> {
    let bytes = req
        .bytes()
        .await
        .map_err(|e| ApiError::bad_request("invalid_body", e.to_string()))?;
    if bytes.len() > 256 * 1024 {
        return Err(ApiError::new(413, "body_too_large", "the body is over 262144 bytes"));
    }
    let json = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request("invalid_json", format!("the body is not valid JSON: {e}")))?;
    Ok((bytes, json))
}

/// Re-addresses a request to `path` on the same origin; the body goes along.
fn readdress(req: &Request, path: &str, body: Vec<u8>) -> std::result::Result<(Request, Option<Vec<u8>>), ApiError> {
    let mut url = req.url().map_err(http::internal)?;
    url.set_path(path);
    let mut init = RequestInit::new();
    init.with_method(req.method()).with_headers(req.headers().clone());
    let req = Request::new_with_init(url.as_str(), &init).map_err(http::internal)?;
    Ok((req, Some(body)))
}

/// agora's `POST /agent/chat {threadId?, ...}`: a new thread when none is
/// named; routed to `/agent/threads/:id/chat`.
async fn agora_chat(mut req: Request) -> std::result::Result<(Request, Option<Vec<u8>>), ApiError> {
    let (bytes, body) = small_json(&mut req).await?;
    let thread = match body.get("threadId") {
        None | Some(serde_json::Value::Null) => ids::new_id("thr"),
        Some(serde_json::Value::String(t)) => threadline_durable::route::id(t)?,
        Some(_) => return Err(ApiError::bad_request("invalid_id", "`threadId` must be a string")),
    };
    if body.get("regenerate").and_then(|v| v.as_bool()) == Some(true) && body.get("threadId").is_none_or(|t| t.is_null()) {
        return Err(ApiError::bad_request("thread_required", "regenerate needs `threadId`"));
    }
    readdress(&req, &format!("/agent/threads/{thread}/chat"), bytes)
}

/// agora's `POST /agent/tool-call/approve|reject {runId?, toolCallId}`: the
/// thread is in the run id, or in the call id the built-in agent made.
async fn agora_decision(mut req: Request, action: &str) -> std::result::Result<(Request, Option<Vec<u8>>), ApiError> {
    let (bytes, body) = small_json(&mut req).await?;
    let str_of = |k: &str| body.get(k).and_then(|v| v.as_str());
    let thread = str_of("runId")
        .and_then(threadline_durable::route::thread_of)
        .or_else(|| str_of("toolCallId").and_then(threadline_durable::route::thread_of))
        .ok_or_else(|| ApiError::not_found("tool_call_not_found", "no confirmation for this tool call"))?
        .to_owned();
    readdress(&req, &format!("/agent/threads/{thread}/tool-call/{action}"), bytes)
}

/// `/v1/stream/*`: the standalone Durable Streams server, one `StreamObject`
/// per stream path. CORS is open to any origin (the protocol's browser
/// clients read streams cross-origin; nothing here rides on cookies) and
/// every answer carries the protocol's security headers. Auth: with
/// `STREAMS_AUTH=none` (dev and the conformance suite) anyone may use it;
/// otherwise every request needs a caller the Worker's auth accepts.
async fn streams(req: Request, env: &Env, config: &config::Config) -> Result<Response> {
    use threadline_durable::streams::wire::COMMON_HEADERS;
    let finish = |resp: Response| -> Result<Response> {
        let headers = http::mutable_headers(&resp)?;
        for (k, v) in COMMON_HEADERS {
            headers.set(k, v)?;
        }
        Ok(resp.with_headers(headers))
    };
    if req.method() == Method::Options {
        return finish(Response::empty()?.with_status(204));
    }
    if !config.streams_open {
        let authorization = req.headers().get("authorization").ok().flatten();
        if let Err(e) = config.auth.authenticate(authorization.as_deref(), now_ms()) {
            return finish(http::error(&e)?);
        }
    }
    let path = req.path();
    if path.len() <= "/v1/stream/".len() {
        let e = ApiError::not_found("not_found", "a stream path is /v1/stream/<name>");
        return finish(http::error(&e)?);
    }
    let stub = env.durable_object("STREAM")?.get_by_name(&path)?;
    finish(stub.fetch_with_request(req).await?)
}
