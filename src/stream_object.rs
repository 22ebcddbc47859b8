//! `StreamObject`: one standalone Durable Stream (`/v1/stream/*`) per
//! object, named by its path. A shell around the core's
//! [`Streams`] and its request [`StreamExchange`]: it reads a request's parts and
//! body, carries out each step (answer, accept a live reader's socket, call
//! a fork's source), sends live readers the notices the core hands it, and
//! keeps the alarm at the stream's expiry.
//!
//! It holds no waiting request: a live read (`live=sse`, `live=long-poll`)
//! is a hibernatable socket the stateless Worker relays to its client
//! (`durable_streams::server::feeds`), so between appends the object sleeps.
//!
//! Invariant enforced here: every access to the core is one synchronous
//! borrow (never held across an `.await`), so a step and the notices it
//! leaves are one block; notices are sent as soon as the step that stored
//! their change returns.

use crate::now_ms;
use crate::store::DoSql;
use std::cell::RefCell;
use threadline_durable::protocols::durable_streams::server::exchange::{
    self, After, Notice, StreamBodyError, StreamExchange, StreamOp, StreamRequest, StreamStep,
};
use threadline_durable::protocols::durable_streams::server::log::SqlLog;
use threadline_durable::protocols::durable_streams::server::{feeds, Streams, MAX_BODY};
use threadline_durable::streams::wire::{self, Reply};
use threadline_durable::{query_pairs, wire::forward, ApiError};
use worker::*;

type Core = Streams<SqlLog<DoSql>>;

#[durable_object]
pub struct StreamObject {
    env: Env,
    state: State,
    core: RefCell<Option<Core>>,
}

impl DurableObject for StreamObject {
    fn new(state: State, env: Env) -> Self {
        // The relays' keep-alive is answered by the runtime, without waking
        // the object.
        if let Ok(pair) = WebSocketRequestResponsePair::new(crate::live::PING, crate::live::PONG) {
            state.set_websocket_auto_response(&pair);
        }
        StreamObject { env, state, core: RefCell::default() }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        let req = crate::http::Incoming::of(&req);
        let url = req.raw.url();
        let (origin, path, query) = crate::http::url_parts(&url);
        let Some(op) = StreamOp::of(req.header(forward::HEADER).as_deref(), path) else {
            return crate::http::error(&ApiError::not_found_route("no such stream operation"));
        };
        let body = crate::http::body(&req, MAX_BODY).await.map_err(|e| match e {
            crate::http::BodyError::TooLarge => StreamBodyError::TooLarge,
            crate::http::BodyError::Unreadable(e) => StreamBodyError::Unreadable(e),
        });
        let query = query_pairs(query);
        let header = |name: &str| req.header(name);
        let incoming = StreamRequest {
            op,
            method: &req.method,
            origin: &origin,
            query: &query,
            header: &header,
            body,
            upgrade: header("upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket")),
            readers: self.state.get_websockets().len(),
        };
        let (mut x, mut step) = match self.with(|s| StreamExchange::start(s, incoming, now_ms())) {
            Ok(started) => started,
            Err(reply) => return crate::http::reply(reply),
        };
        let resp = loop {
            self.notify(x.notices());
            step = match step {
                StreamStep::Reply(reply) => break crate::http::reply(reply),
                StreamStep::Socket { first, base64 } => break self.accept(&first, base64),
                StreamStep::Call(call) => {
                    let answer = match crate::call(&self.env, None, &call).await {
                        Ok(mut resp) => {
                            let ct = crate::http::header_of(&resp, "content-type");
                            Ok((resp.status_code(), ct, resp.bytes().await.unwrap_or_default()))
                        }
                        Err(e) => Err(e.to_string()),
                    };
                    self.with(|s| x.answer(s, answer, now_ms())).unwrap_or_else(StreamStep::Reply)
                }
            };
        };
        self.after().await;
        resp
    }

    /// A relay asks for the messages after its reader's position.
    async fn websocket_message(&self, ws: WebSocket, message: WebSocketIncomingMessage) -> Result<()> {
        let WebSocketIncomingMessage::String(text) = message else { return Ok(()) };
        if let Some(after) = feeds::parse_page_request(&text) {
            if let Ok(batch) = self.with(|s| s.batch(after, true, now_ms())) {
                let _ = ws.send_with_str(batch.encode());
            }
        }
        Ok(())
    }

    async fn websocket_close(&self, ws: WebSocket, _code: usize, _reason: String, _clean: bool) -> Result<()> {
        let _ = ws.close(Some(1000), Some("closed"));
        Ok(())
    }

    /// The stream's expiry: its readers learn it is gone.
    async fn alarm(&self) -> Result<Response> {
        let readers = self.state.get_websockets().len();
        if let Ok((notices, after)) = self.with(|s| exchange::alarm(s, readers, now_ms())) {
            self.notify(notices);
            self.carry_out(after).await;
        }
        Response::ok("")
    }
}

impl StreamObject {
    /// Runs `f` on the stream, opening its storage on first use.
    fn with<R>(&self, f: impl FnOnce(&mut Core) -> R) -> std::result::Result<R, Reply> {
        let mut slot = self.core.borrow_mut();
        if slot.is_none() {
            let log = SqlLog::open(DoSql(self.state.storage().sql())).map_err(|e| {
                let e = ApiError::from(e);
                Reply::text(503, &format!("{}: {}", e.code, e.message))
            })?;
            *slot = Some(Streams::new(log));
        }
        Ok(f(slot.as_mut().expect("opened above")))
    }

    /// Sends every live reader each notice (then closes them when it says
    /// the stream is gone).
    fn notify(&self, notices: Vec<Notice>) {
        if notices.is_empty() {
            return;
        }
        let sockets = self.state.get_websockets();
        for n in notices {
            for ws in &sockets {
                let _ = ws.send_with_str(&n.text);
                if n.close {
                    let _ = ws.close(Some(1000), Some("the stream is gone"));
                }
            }
        }
    }

    /// A live reader's socket, accepted for hibernation and sent its first batch.
    fn accept(&self, first: &str, base64: bool) -> Result<Response> {
        let pair = WebSocketPair::new()?;
        self.state.accept_web_socket(&pair.server);
        let _ = pair.server.send_with_str(first);
        let resp = Response::from_websocket(pair.client)?;
        if base64 {
            let _ = resp.headers().set(wire::SSE_ENCODING, "base64");
        }
        Ok(resp)
    }

    async fn after(&self) {
        if let Ok(after) = self.with(exchange::after) {
            self.carry_out(after).await;
        }
    }

    /// Releases a source this stream stopped reading, and keeps the alarm at
    /// the stream's expiry.
    async fn carry_out(&self, after: After) {
        if let Some(release) = after.release {
            let _ = crate::call(&self.env, None, &release).await;
        }
        if let Some(at) = after.alarm_at {
            let _ = self.state.storage().set_alarm((at - now_ms()).max(10) + 50).await;
        }
    }
}
