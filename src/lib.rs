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

pub use directory::Directory;
pub use object::ThreadObject;
use threadline_durable::route::Route;
use worker::*;

pub(crate) fn now_ms() -> i64 {
    Date::now().as_millis() as i64
}

#[event(start)]
fn start() {
    console_error_panic_hook::set_once();
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let resp = match route(req, &env).await {
        Ok(resp) => resp,
        Err(e) => http::error(&e)?,
    };
    // A response forwarded from the object has immutable headers: copy them.
    let headers = Headers::new();
    for (k, v) in resp.headers().entries() {
        headers.set(&k, &v)?;
    }
    headers.set("x-content-type-options", "nosniff")?;
    Ok(resp.with_headers(headers))
}

async fn route(req: Request, env: &Env) -> std::result::Result<Response, threadline_durable::ApiError> {
    if req.path() == "/agent/models" {
        return models(&req, env);
    }
    if req.path() == "/agent/threads" {
        if req.method() != Method::Get {
            return Err(threadline_durable::ApiError::new(405, "method_not_allowed", "/agent/threads takes GET").with("allow", "GET"));
        }
        let stub = env
            .durable_object("DIRECTORY")
            .and_then(|ns| ns.get_by_name(directory::LOCAL_ACTOR))
            .map_err(http::internal)?;
        let mut resp = stub.fetch_with_str("https://directory/threads").await.map_err(http::internal)?;
        let body: serde_json::Value = resp.json().await.map_err(http::internal)?;
        return http::json(200, &body).map_err(http::internal);
    }
    let req = match (req.method(), req.path().as_str()) {
        (Method::Post, "/agent/chat") => agora_chat(req).await?,
        (Method::Post, "/agent/tool-call/approve") => agora_decision(req, "approve").await?,
        (Method::Post, "/agent/tool-call/reject") => agora_decision(req, "reject").await?,
        _ => req,
    };
    let route = Route::parse(req.method().as_ref(), &req.path())?;
    let stub = env
        .durable_object("THREAD")
        .and_then(|ns| ns.get_by_name(route.thread()))
        .map_err(http::internal)?;
    stub.fetch_with_request(req).await.map_err(http::internal)
}

/// `GET /agent/models`: the model catalog (`LLM_MODELS`, or the one `LLM_MODEL`).
fn models(req: &Request, env: &Env) -> std::result::Result<Response, threadline_durable::ApiError> {
    if req.method() != Method::Get {
        return Err(threadline_durable::ApiError::new(405, "method_not_allowed", "/agent/models takes GET").with("allow", "GET"));
    }
    let config = config::Config::from_env(env);
    let catalog = config
        .catalog
        .map_err(|e| threadline_durable::ApiError::new(503, "invalid_models", e))?;
    http::json(200, &catalog.view()).map_err(http::internal)
}

/// Reads a small JSON body in the stateless Worker (to find the thread).
async fn small_json(req: &mut Request) -> std::result::Result<(Vec<u8>, serde_json::Value), threadline_durable::ApiError> {
    let bytes = req
        .bytes()
        .await
        .map_err(|e| threadline_durable::ApiError::bad_request("invalid_body", e.to_string()))?;
    if bytes.len() > 256 * 1024 {
        return Err(threadline_durable::ApiError::new(413, "body_too_large", "the body is over 262144 bytes"));
    }
    let json = serde_json::from_slice(&bytes)
        .map_err(|e| threadline_durable::ApiError::bad_request("invalid_json", format!("the body is not valid JSON: {e}")))?;
    Ok((bytes, json))
}

/// Re-addresses a request to `path` on the same origin, with `body`.
fn readdress(req: &Request, path: &str, body: Vec<u8>) -> std::result::Result<Request, threadline_durable::ApiError> {
    let mut url = req.url().map_err(http::internal)?;
    url.set_path(path);
    let mut init = RequestInit::new();
    init.with_method(req.method()).with_headers(req.headers().clone()).with_body(Some(js_sys::Uint8Array::from(body.as_slice()).into()));
    Request::new_with_init(url.as_str(), &init).map_err(http::internal)
}

/// agora's `POST /agent/chat {threadId?, ...}`: a new thread when none is
/// named; routed to `/agent/threads/:id/chat`.
async fn agora_chat(mut req: Request) -> std::result::Result<Request, threadline_durable::ApiError> {
    let (bytes, body) = small_json(&mut req).await?;
    let thread = match body.get("threadId") {
        None | Some(serde_json::Value::Null) => ids::new_id("thr"),
        Some(serde_json::Value::String(t)) => threadline_durable::route::id(t)?,
        Some(_) => return Err(threadline_durable::ApiError::bad_request("invalid_id", "`threadId` must be a string")),
    };
    if body.get("regenerate").and_then(|v| v.as_bool()) == Some(true) && body.get("threadId").is_none_or(|t| t.is_null()) {
        return Err(threadline_durable::ApiError::bad_request("thread_required", "regenerate needs `threadId`"));
    }
    readdress(&req, &format!("/agent/threads/{thread}/chat"), bytes)
}

/// agora's `POST /agent/tool-call/approve|reject {runId?, toolCallId}`: the
/// thread is in the run id, or in the call id the built-in agent made.
async fn agora_decision(mut req: Request, action: &str) -> std::result::Result<Request, threadline_durable::ApiError> {
    let (bytes, body) = small_json(&mut req).await?;
    let str_of = |k: &str| body.get(k).and_then(|v| v.as_str());
    let thread = str_of("runId")
        .and_then(threadline_durable::route::thread_of)
        .or_else(|| str_of("toolCallId").and_then(threadline_durable::route::thread_of))
        .ok_or_else(|| threadline_durable::ApiError::not_found("tool_call_not_found", "no confirmation for this tool call"))?
        .to_owned();
    readdress(&req, &format!("/agent/threads/{thread}/tool-call/{action}"), bytes)
}
