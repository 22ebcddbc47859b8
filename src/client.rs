//! A client's stream in the stateless Worker: one response, written by
//! whichever leg the thread's object serves it on now.
//!
//! - **held**: during a run the object writes the stream itself; its bytes
//!   are piped to the client as they are (workerd moves them: no JavaScript
//!   runs here per message);
//! - **relayed**: between runs the object sleeps and the stream is a
//!   hibernatable socket this Worker relays (`relay`), framing the
//!   object's messages for the client's protocol.
//!
//! The object moves a stream from one leg to the other at a frame boundary
//! and keeps what is published meanwhile: a held stream ends, and this
//! claims its socket with the stream's ticket (the socket's first message
//! restores the feed the object ran); a relayed socket says `M <ticket>`,
//! and this claims the held stream with its feed's state. The client sees
//! one stream, with neither a gap nor a duplicate; a claim that finds
//! nothing (the object restarted) ends the stream, and the client resumes
//! from its cursor.
//!
//! What it carries, not decides: which leg comes next is the object's
//! answer to each claim.

use crate::relay::{self, IdentityStream};
use crate::{http, now_ms};
use futures_util::future::{select, Either};
use std::rc::Rc;
use std::time::Duration;
use threadline_durable::feed::Plan;
use threadline_durable::ApiError;
use worker::{Delay, Response, ResponseBody, WebSocket};

/// Claims a moving stream of the client's object: its ticket and the
/// relay's feed state; the object's answer. The streams of one run claim
/// at once when it goes quiet; what is published meanwhile waits in the
/// object and is delivered in order.
pub type Claim = Rc<
    dyn Fn(String, Option<String>) -> std::pin::Pin<Box<dyn std::future::Future<Output = worker::Result<Response>>>>,
>;

/// Where the stream is served now.
enum Leg {
    /// The object writes it: its answer's body, and the ticket its socket
    /// will be claimed with.
    Held { body: web_sys::ReadableStream, ticket: String },
    /// A socket this Worker relays.
    Relayed(WebSocket),
}

impl Leg {
    /// The leg the object's answer opens (`None`: a refusal, or nothing to
    /// claim).
    fn of(resp: Response) -> Option<Leg> {
        if resp.status_code() == 200 {
            let ticket = http::header_of(&resp, crate::held::TICKET)?;
            let body = web_sys::Response::from(resp).body()?;
            return Some(Leg::Held { body, ticket });
        }
        if resp.status_code() != 101 {
            return None;
        }
        let ws = resp.websocket()?;
        ws.accept().ok()?;
        // The object's messages are binary: read them as bytes, not blobs.
        let socket: &web_sys::WebSocket = ws.as_ref();
        socket.set_binary_type(web_sys::BinaryType::Arraybuffer);
        Some(Leg::Relayed(ws))
    }
}

/// Serves a stream the object answered for: the client's response (its
/// refusal as it is), or for a one-shot protocol (a long-poll) its reply.
/// `client` aborts when the client goes away.
pub async fn serve(
    resp: Response,
    plan: Plan,
    client: &web_sys::AbortSignal,
    ping_ms: u64,
    long_poll_ms: u64,
    claim: Claim,
) -> Result<Response, ApiError> {
    let held = resp.status_code() == 200 && http::header_of(&resp, crate::held::TICKET).is_some();
    if resp.status_code() != 101 && !held {
        // The object refused (a 4xx of its own): that is the answer.
        return Ok(resp);
    }
    let mut plan = plan;
    for name in plan.pass {
        if let Some(v) = http::header_of(&resp, name) {
            plan.headers.push((name, v));
        }
    }
    let Some(leg) = Leg::of(resp) else { return Err(ApiError::unavailable("the object answered no stream")) };
    if plan.one_shot {
        let Leg::Relayed(ws) = leg else { return Err(ApiError::unavailable("a long-poll is answered over a socket")) };
        return relay::one_shot(ws, plan, relay::gone(client), long_poll_ms).await;
    }
    let transform = IdentityStream::new().map_err(|e| ApiError::unavailable(format!("{e:?}")))?;
    let headers = plan.headers.clone();
    let tick_ms = plan.tick_ms.unwrap_or(ping_ms);
    wasm_bindgen_futures::spawn_local(drive(leg, plan, client.clone(), tick_ms, transform.writable(), claim));
    let resp = Response::from_body(ResponseBody::Stream(transform.readable())).map_err(http::internal)?;
    let h = worker::Headers::new();
    for (k, v) in &headers {
        let _ = h.set(k, v);
    }
    Ok(resp.with_headers(h))
}

/// Serves the client's stream leg after leg, until one ends it.
async fn drive(
    mut leg: Leg,
    mut plan: Plan,
    signal: web_sys::AbortSignal,
    tick_ms: u64,
    writable: web_sys::WritableStream,
    claim: Claim,
) {
    loop {
        let answer = match leg {
            Leg::Held { body, ticket } => {
                if !pipe(&body, &writable, &signal, plan.until).await {
                    break;
                }
                claim(ticket, None).await
            }
            Leg::Relayed(ws) => {
                let Ok(writer) = writable.get_writer() else { return };
                let (moved, back) = relay::relay(ws, plan, signal.clone(), tick_ms, writer).await;
                plan = back;
                // Without a move the relay closed the client's stream.
                let Some(ticket) = moved else { return };
                claim(ticket, plan.feed.save()).await
            }
        };
        match answer.ok().and_then(Leg::of) {
            Some(next) => leg = next,
            // Nothing to claim (a feed that was done, a protocol that does
            // not move, an object that restarted): the stream ends.
            None => break,
        }
    }
    if let Ok(writer) = writable.get_writer() {
        let _ = writer.close();
    }
}

/// Pipes a held stream to the client's until the object ends it (true),
/// or the client leaves, or its stream token expires (false: the object's
/// next write fails, and it drops the subscriber).
async fn pipe(
    body: &web_sys::ReadableStream,
    writable: &web_sys::WritableStream,
    signal: &web_sys::AbortSignal,
    until: Option<i64>,
) -> bool {
    let Ok(stop) = web_sys::AbortController::new() else { return false };
    let options = web_sys::StreamPipeOptions::new();
    options.set_prevent_close(true);
    let _ = js_sys::Reflect::set(&options, &"signal".into(), &stop.signal());
    let piped = wasm_bindgen_futures::JsFuture::from(body.pipe_to_with_options(writable, &options));
    let client = wasm_bindgen_futures::JsFuture::from(relay::gone(signal));
    // No expiry: a future that never settles (a timer that long would
    // overflow setTimeout's range and fire at once).
    let expiry = async move {
        match until {
            Some(t) => Delay::from(Duration::from_millis((t - now_ms()).max(0) as u64)).await,
            None => futures_util::future::pending::<()>().await,
        }
    };
    match select(piped, select(client, std::pin::pin!(expiry))).await {
        Either::Left((Ok(_), _)) => true,
        Either::Left((Err(_), _)) => false,
        Either::Right(_) => {
            stop.abort();
            false
        }
    }
}
