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
//! - [`config`], [`ids`], [`http`]: configuration, random ids, JSON answers.
//!
//! Every rule about events lives in `durable/` (crate `threadline-durable`).

mod agent_host;
mod config;
mod http;
mod ids;
mod object;
mod store;

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
