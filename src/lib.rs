//! # threadline: the Worker
//!
//! The thin wasm side: it carries bytes and timers and asks the core
//! (`durable/`, crate `threadline-durable`) what to do. A tour:
//!
//! - this file: the stateless entry point. It asks the core's
//!   [`Exchange`] what each request needs, step by step (answer it, read its
//!   body, call an object, relay a socket), and carries the steps out.
//! - [`object`]: the `#[durable_object]` shell of a thread: loads the core,
//!   hands it each request, accepts subscriber sockets; [`effects`] carries
//!   out what the core asks of it (the built-in agent, the webhook, the
//!   directory, a wipe) and keeps its timers.
//! - [`live`]: subscriber plumbing on the object's side: the shared core,
//!   subscribers as hibernatable sockets and their attachments.
//! - [`relay`]: the Worker's end of a subscriber's socket: the client's
//!   stream, framed by the core's `feed`, with its keep-alives and ends.
//! - [`store`]: the core's SQL storage on Durable Object SQLite.
//! - [`agent_host`]: the built-in agent's host: model client and tool runner
//!   over `fetch`, timers, the publish path.
//! - [`directory`]: each actor's directory object.
//! - [`stream_object`]: `StreamObject`, one standalone Durable Stream
//!   (`/v1/stream/*`) per object; its live readers are relayed sockets too.
//! - [`files`]: the bucket of the threads' files (R2): stores, streams and
//!   removes bytes at the keys the core names.
//! - [`json_schema`]: the core's JSON Schema engine, on the platform's
//!   JavaScript (`@cfworker/json-schema`).
//! - [`http`], [`ids`]: bytes in and out of the runtime; random ids.

mod agent_host;
mod bucket;
mod charges;
mod client;
mod deliveries;
mod directory;
mod effects;
mod held;
mod http;
mod ids;
mod instance;
mod json_schema;
mod live;
mod object;
mod relay;
mod reports;
mod store;
mod stream_object;
mod telemetry;

pub use directory::Directory;
pub use object::ThreadObject;
use std::rc::Rc;
pub use stream_object::StreamObject;
use threadline_durable::front::{Exchange, Step};
use threadline_durable::wire::forward::{Body, Object, ObjectCall};
use threadline_durable::Head;
use threadline_durable::Var as ConfigVar;
use threadline_durable::{trace, wire::forward, Reply, Settings};
use worker::*;

/// The time in ms since the epoch: `Date.now()`, one call into the
/// runtime with nothing allocated (`worker::Date::now` builds a `Date`
/// object and reads it back, two calls and an object on the JavaScript
/// heap, and a publish asks the time about nine times).
pub(crate) fn now_ms() -> i64 {
    js_sys::Date::now() as i64
}

#[event(start)]
fn start() {
    console_error_panic_hook::set_once();
    json_schema::install();
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
            let s = Settings::from_env(|name| var(env, name));
            for w in threadline_durable::front::warnings(&s) {
                console_warn!("threadline: {w}");
            }
            Rc::new(s)
        })
        .clone()
    })
}

/// Variable `name` as workerd hands it over: a secret or a string var is
/// text; any other `[vars]` value (a TOML table, array, number, boolean)
/// is an object, read as JSON for the core to check.
fn var(env: &Env, name: &str) -> Option<ConfigVar> {
    let v = js_sys::Reflect::get(env, &name.into()).ok().filter(|v| !v.is_undefined() && !v.is_null())?;
    if let Some(text) = v.as_string() {
        return Some(ConfigVar::Text(text));
    }
    let json = js_sys::JSON::stringify(&v).ok()?.as_string()?;
    serde_json::from_str(&json).ok().map(ConfigVar::Value)
}

/// Answers a request, then writes its log line and, with traces on, hands
/// its span to the collector under `waitUntil` (after the answer). The
/// request is read as the runtime hands it over ([`http::Incoming`]).
#[event(fetch)]
async fn main(req: web_sys::Request, env: Env, ctx: Context) -> Result<Response> {
    let settings = settings(&env);
    let req = http::Incoming::new(req);
    let traced = trace::RequestSpan::start(req.header("traceparent").as_deref(), ids::trace_bytes(), now_ms());
    let url = req.raw.url();
    let (_, path, query) = http::url_parts(&url);
    let (resp, route) = answer(&req, &env, &settings, (path, query), &traced.traceparent()).await;
    let status = resp.as_ref().map_or(500, Response::status_code);
    let method = req.method.as_str();
    let span = traced.finish(method, path, route, status, now_ms());
    let fields = trace::RequestLog { method, path, route, status, duration_ms: span.end_ms - span.start_ms };
    telemetry::log(&trace::log_line("request", Some(&span.trace_id()), &fields));
    if let Some(otlp) = &settings.otlp {
        ctx.wait_until(telemetry::export(otlp.clone(), vec![span]));
    }
    resp
}

/// The request's answer: the steps of the core's exchange, carried out;
/// with it, the pattern of the route its path matched.
async fn answer(
    req: &http::Incoming,
    env: &Env,
    settings: &Settings,
    (path, query): (&str, &str),
    traceparent: &str,
) -> (Result<Response>, Option<&'static str>) {
    let header = |name: &str| req.header(name);
    let head = Head { method: &req.method, path, query, header: &header };
    let (x, step) = Exchange::start(&head, settings, now_ms());
    let route = x.finish().route;
    (exchange(req, env, settings, x, step, traceparent).await, route)
}

/// Carries out the exchange's steps, from `step`, to the answer.
async fn exchange(
    req: &http::Incoming,
    env: &Env,
    settings: &Settings,
    mut x: Exchange<'_>,
    mut step: Step,
    traceparent: &str,
) -> Result<Response> {
    let raw = &req.raw;
    // The last call's answer, for a step that passes it on as it is.
    let mut last: Option<(u16, Headers, Vec<u8>)> = None;
    let resp = loop {
        step = match step {
            Step::Reply(r) => break http::reply(r)?,
            Step::ReadBody { limit } => {
                let body = http::body(req, limit).await.map_err(|e| e.api(limit));
                x.body(body, &ids::new_id)
            }
            Step::Call(c) => {
                let mut resp = call_traced(env, Some(raw), &c, Some(traceparent)).await?;
                let (status, body) = (resp.status_code(), resp.bytes().await?);
                last = Some((status, resp.headers().clone(), body.clone()));
                x.answer(status, body)
            }
            Step::Respond => match last.take() {
                Some((status, headers, body)) => {
                    break Response::from_bytes(body)?.with_status(status).with_headers(headers)
                }
                None => break http::reply(Reply::new(502))?,
            },
            Step::Pass(c) => break call_traced(env, Some(raw), &c, Some(traceparent)).await?,
            Step::Relay(c, plan) => {
                let socket = call_traced(env, Some(raw), &c, Some(traceparent)).await?;
                let signal = raw.signal();
                let claim: client::Claim = {
                    let (env, raw, c) = (env.clone(), Clone::clone(raw), Rc::new(c));
                    Rc::new(move |ticket: String, state: Option<String>| {
                        let (env, raw, c) = (env.clone(), Clone::clone(&raw), c.clone());
                        Box::pin(async move {
                            let Some(call) = threadline_durable::protocols::claim_call(&c, &ticket, state) else {
                                return Err(worker::Error::RustError("an unreadable context".into()));
                            };
                            call_traced(&env, Some(&raw), &call, None).await
                        })
                    })
                };
                let relayed =
                    client::serve(socket, plan, &signal, settings.ping_ms, settings.streams_long_poll_ms, claim);
                break relayed.await.or_else(|e| http::error(&e))?;
            }
            Step::ReadFiles(form) => {
                let mut body = bucket::body_stream(req);
                let read = threadline_durable::files::read::read(&mut body, form, &settings.files).await;
                if read.is_err() {
                    // Refused midway: the rest is read and dropped, so the
                    // client, still sending, gets the refusal on a sound
                    // connection.
                    bucket::drain(&mut body).await;
                }
                x.files_read(read, &ids::new_id)
            }
            Step::Store(puts) => {
                let stored = bucket::put(env, puts).await;
                x.stored(stored)
            }
            Step::File(plan) => break bucket::serve(env, plan, x.finish().head_only).await?,
        };
    };
    http::discard_body(req).await;
    http::finish(resp, x.finish())
}

/// Makes a call to an object: the client's request (`raw`) as the core
/// names it (method, body, or a subscriber's socket), or an object's own
/// request when there is no client's, with the core's decision in
/// [`forward::HEADER`], set over any copy a client sent.
pub(crate) async fn call(env: &Env, raw: Option<&web_sys::Request>, c: &ObjectCall) -> Result<Response> {
    call_traced(env, raw, c, None).await
}

/// Makes an object's own call, and says whether the object took it (a 2xx
/// answer); why not is logged under `what` and returned.
pub(crate) async fn took(env: &Env, c: &ObjectCall, what: &str) -> std::result::Result<(), String> {
    let why = match call(env, None, c).await {
        Ok(resp) if (200..300).contains(&resp.status_code()) => return Ok(()),
        Ok(resp) => format!("the object answered {}", resp.status_code()),
        Err(e) => e.to_string(),
    };
    console_warn!("{what}: {why}");
    Err(why)
}

/// [`call`], with the `traceparent` the object hangs its work under (the
/// Worker's request span), set over any copy a client sent.
async fn call_traced(
    env: &Env,
    raw: Option<&web_sys::Request>,
    c: &ObjectCall,
    trace: Option<&str>,
) -> Result<Response> {
    let forwarded = match (raw, &c.body) {
        (Some(raw), _) if c.socket => http::socket_request(raw, &raw.url())?,
        (Some(raw), Body::None) => http::forwarded_own(raw, &raw.url(), c.method, None)?,
        (Some(raw), Body::Client) => http::forwarded(raw, &raw.url(), c.method, raw.body().map(Into::into).as_ref())?,
        (Some(raw), Body::Bytes(b)) => {
            http::forwarded_own(raw, &raw.url(), c.method, Some(&js_sys::Uint8Array::from(b.as_slice()).into()))?
        }
        (None, body) => {
            let init = web_sys::RequestInit::new();
            init.set_method(c.method);
            if let Body::Bytes(b) = body {
                init.set_body(&js_sys::Uint8Array::from(b.as_slice()).into());
            }
            web_sys::Request::new_with_str_and_init(&format!("https://object{}", c.path), &init)?
        }
    };
    forwarded.headers().set(forward::HEADER, &c.context)?;
    if let Some(t) = trace {
        forwarded.headers().set("traceparent", t)?;
    }
    let (binding, name) = match &c.object {
        Object::Thread(name) => ("THREAD", name),
        Object::Stream(name) => ("STREAM", name),
        Object::Directory(name) => ("DIRECTORY", name),
    };
    namespace(env, binding)?.get_by_name(name)?.fetch_with_request(Request::from(forwarded)).await
}
