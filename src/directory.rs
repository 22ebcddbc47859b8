//! `Directory`: an actor's directory object (their inbox, their sends of
//! the last minute, their usage). A shell around the core's `Directory`:
//! every operation arrives decided ([`forward`]) and is answered by the
//! core. The inbox's readers are hibernatable sockets the Worker relays
//! (as a thread's subscribers are): a change the core made is sent to each
//! after the op that made it, and the object sleeps between changes.

use crate::instance::Counts;
use crate::live;
use threadline_durable::{wire::forward, ApiError};
use threadline_durable::{Directory as Core, DirectoryOp as Op};
use worker::*;

/// The tag of an inbox reader's socket.
const TAG: &str = "inbox";

#[durable_object]
pub struct Directory {
    state: State,
    env: Env,
    /// This instance, as the debug stats report it (`DEBUG_WAKES`: events
    /// counted in storage across evictions).
    counts: Counts,
    wakes: bool,
    /// The core over the object's SQLite, or why its storage could not be
    /// opened (every request is then refused with it).
    core: std::result::Result<Core<crate::store::DoSql>, ApiError>,
}

impl DurableObject for Directory {
    fn new(state: State, env: Env) -> Self {
        // The relay's keep-alive is answered without waking the object.
        if let Ok(pair) = WebSocketRequestResponsePair::new(live::PING, live::PONG) {
            state.set_websocket_auto_response(&pair);
        }
        let core = Core::open(crate::store::DoSql(state.storage().sql())).map_err(Into::into);
        let wakes = crate::settings(&env).debug_wakes;
        Directory { state, env, core, counts: Counts::new(), wakes }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        let _event = self.counts.event(&self.state.storage(), self.wakes).await;
        let mut op = forward::decode::<Op>(req.headers().get(forward::HEADER)?.as_deref());
        if let Some(Op::Stats { instance, readers }) = &mut op {
            let facts = self.counts.facts(&self.state.storage(), self.wakes, 0).await;
            *instance = serde_json::to_value(facts).ok();
            *readers = self.state.get_websockets_with_tag(TAG).len();
        }
        let (core, op) = match (&self.core, op) {
            (Err(e), _) => return crate::http::error(e),
            (Ok(_), None) => return crate::http::error(&ApiError::not_found_route("no such operation")),
            (Ok(core), Some(op)) => (core, op),
        };
        if let Op::Follow { after } = op {
            return self.follow(core, after).or_else(|e| crate::http::error(&e));
        }
        let reply = core.handle_at(&op, crate::now_ms());
        self.publish(core);
        // A replayed delivery: answered once the queue has it.
        let outgoing = core.outgoing();
        if !outgoing.is_empty() {
            if let Err(e) = crate::deliveries::enqueue(&self.env, &outgoing).await {
                return crate::http::error(&ApiError::unavailable(format!("the queue did not take it: {e}")));
            }
        }
        crate::http::reply(reply)
    }

    async fn websocket_message(&self, ws: WebSocket, message: WebSocketIncomingMessage) -> Result<()> {
        let _event = self.counts.event(&self.state.storage(), self.wakes).await;
        let WebSocketIncomingMessage::String(text) = message else { return Ok(()) };
        let Ok(core) = &self.core else { return Ok(()) };
        match core.page(&text) {
            Ok(Some(page)) => live::send(&ws, &page),
            Ok(None) => {}
            Err(e) => console_error!("inbox page: {e}"),
        }
        Ok(())
    }

    async fn websocket_close(&self, ws: WebSocket, _code: usize, _reason: String, _clean: bool) -> Result<()> {
        let _event = self.counts.event(&self.state.storage(), self.wakes).await;
        let _ = ws.close(Some(1000), Some("closed"));
        Ok(())
    }

    async fn websocket_error(&self, ws: WebSocket, _error: Error) -> Result<()> {
        let _ = ws.close(Some(1000), Some("closed"));
        Ok(())
    }
}

impl Directory {
    /// Accepts an inbox reader: its socket, and its hello sent on it, in one
    /// synchronous block (no change falls between them).
    fn follow(&self, core: &Core<crate::store::DoSql>, after: Option<u64>) -> std::result::Result<Response, ApiError> {
        let hello = core.follow(after)?;
        let pair = WebSocketPair::new().map_err(crate::http::internal)?;
        self.state.accept_websocket_with_tags(&pair.server, &[TAG]);
        live::send(&pair.server, &hello);
        Response::from_websocket(pair.client).map_err(crate::http::internal)
    }

    /// Sends what the last op changed to every reader.
    fn publish(&self, core: &Core<crate::store::DoSql>) {
        let Some(message) = core.published() else { return };
        for ws in self.state.get_websockets_with_tag(TAG) {
            live::send(&ws, &message);
        }
    }
}
