//! The subscriber plumbing of a thread's object: the core it shares with its
//! tasks ([`Shared`]), and subscribers as hibernatable WebSockets
//! ([`WsSink`]). The object holds no stream: each subscriber is a socket the
//! stateless Worker relays to its client, accepted with the Hibernation API
//! so the object can sleep between publishes, its [`Attachment`] (who it is,
//! what it follows) kept with the socket so a woken object finds its
//! subscribers again. The object, the agent host and the views import this;
//! it imports none of them.
//!
//! Invariant: every access to the core is one synchronous borrow, never held
//! across an `.await`.

use crate::store::DoSql;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use threadline_durable::storage::store::SqlStore;
use threadline_durable::thread::Delivery;
use threadline_durable::{ApiError, Follow, Sink, Thread};
use worker::{State, WebSocket, WebSocketPair};

pub type Core = Thread<SqlStore<DoSql>, Delivery<WsSink, crate::held::HeldWriter>>;
/// The thread, shared by the object's requests and the tasks it spawns
/// (the agent loop, timers); `None` until first loaded, and after a wipe.
pub type Shared = Rc<RefCell<Option<Core>>>;

/// The tag every subscriber socket carries.
pub const TAG: &str = "sub";

/// The relay's keep-alive on a socket, and the runtime's answer to it
/// (`setWebSocketAutoResponse`: answered without waking the object).
pub const PING: &str = "ping";
pub const PONG: &str = "pong";

/// The close code of a subscriber whose thread was deleted.
pub use threadline_durable::feed::socket::GONE;

/// What a subscriber socket keeps across the object's sleep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Attachment {
    pub id: u64,
    pub follow: Follow,
}

/// A subscriber: the object's end of its socket. A send that fails means
/// the Worker's end is gone; its close event unregisters it too.
pub struct WsSink(WebSocket);

#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    /// A socket, for `send` with bytes made once for many sockets.
    type RawSocket;
    #[wasm_bindgen(method, js_name = send, catch)]
    fn send_bytes(this: &RawSocket, data: &js_sys::Uint8Array) -> Result<(), wasm_bindgen::JsValue>;
}

thread_local! {
    /// The last message copied out to JavaScript, kept with the bytes it
    /// came from (holding them keeps their address from being reused): a
    /// publish's fan-out sends one message to many sockets, and copies it
    /// out once.
    static LAST: std::cell::RefCell<Option<(Bytes, js_sys::Uint8Array)>> = const { std::cell::RefCell::new(None) };
}

/// The message as JavaScript bytes, copied once per message. Messages
/// travel as binary frames: no text transcoding on either side (they are
/// the UTF-8 lines of `feed::socket`).
fn js_bytes(message: &Bytes) -> js_sys::Uint8Array {
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((bytes, js)) = last.as_ref() {
            if bytes.as_ptr() == message.as_ptr() && bytes.len() == message.len() {
                return js.clone();
            }
        }
        let js = js_sys::Uint8Array::from(&message[..]);
        *last = Some((message.clone(), js.clone()));
        js
    })
}

/// Sends one message on a socket.
fn send_on(ws: &WebSocket, message: &Bytes) -> bool {
    use wasm_bindgen::JsCast;
    let socket: &web_sys::WebSocket = ws.as_ref();
    socket.unchecked_ref::<RawSocket>().send_bytes(&js_bytes(message)).is_ok()
}

impl Sink for WsSink {
    fn send(&mut self, message: Bytes) -> bool {
        send_on(&self.0, &message)
    }

    fn is_closed(&self) -> bool {
        false
    }
}

/// A new subscriber's socket pair: the Worker's end, and the object's end,
/// accepted for hibernation and carrying its attachment.
pub fn accept(state: &State, id: u64, follow: &Follow) -> worker::Result<(WebSocket, WebSocket)> {
    let pair = WebSocketPair::new()?;
    state.accept_websocket_with_tags(&pair.server, &[TAG]);
    pair.server.serialize_attachment(Attachment { id, follow: follow.clone() })?;
    Ok((pair.client, pair.server))
}

impl WsSink {
    pub fn new(ws: WebSocket) -> WsSink {
        WsSink(ws)
    }
}

/// The subscribers that outlived the object's last instance.
pub fn sockets(state: &State) -> Vec<(Attachment, WsSink)> {
    state
        .get_websockets_with_tag(TAG)
        .into_iter()
        .filter_map(|ws| Some((ws.deserialize_attachment::<Attachment>().ok()??, WsSink(ws))))
        .collect()
}

/// A socket's attachment.
pub fn attachment(ws: &WebSocket) -> Option<Attachment> {
    ws.deserialize_attachment().ok().flatten()
}

/// Sends one message on a socket (a replay page).
pub fn send(ws: &WebSocket, message: &Bytes) {
    send_on(ws, message);
}

/// Accepts a subscriber: its socket, registered with the core (which sends
/// its hello) in the same synchronous block, and the Worker's end as the
/// answer.
pub fn subscribe(state: &State, core: &Shared, follow: Follow, after: u64) -> Result<worker::Response, ApiError> {
    let id = crate::ids::subscriber_id();
    let (client, server) = accept(state, id, &follow).map_err(crate::http::internal)?;
    let hello = core.borrow_mut().as_mut().ok_or_else(ApiError::thread_not_found)?.subscribe(
        id,
        follow,
        after,
        Delivery::Socket(WsSink::new(server.clone())),
    )?;
    send(&server, &hello);
    worker::Response::from_websocket(client).map_err(crate::http::internal)
}

/// A subscriber's relay went away: it is unregistered (a sleeping object is
/// not woken for it: a closed socket is not among those it finds on waking).
pub fn gone(core: &Shared, ws: &WebSocket, code: usize) {
    if let (Some(a), Some(core)) = (attachment(ws), core.borrow_mut().as_mut()) {
        let moved = code == usize::from(threadline_durable::feed::socket::MOVED);
        core.journal_mut().subscribers().socket_closed(a.id, moved);
    }
    let _ = ws.close(Some(1000), Some("closed"));
}

/// A relay asks for the next replay page of its subscription.
pub fn page(core: &Shared, ws: &WebSocket, text: &str) -> Result<(), ApiError> {
    let Some((after, high)) = threadline_durable::feed::socket::parse_page_request(text) else { return Ok(()) };
    let Some(a) = attachment(ws) else { return Ok(()) };
    let page = {
        let core = core.borrow();
        let core = core.as_ref().ok_or_else(ApiError::thread_not_found)?;
        core.journal().replay_page(&a.follow, after, high, core.config().replay_page)?
    };
    send(ws, &page);
    Ok(())
}
