//! The stateless Worker's end of a subscriber's stream. It opens one socket
//! to the thread's object (the object accepts it with the Hibernation API,
//! so it can sleep while nothing happens), and relays what arrives to the
//! client's response through the core's [`Feed`] (the route's protocol:
//! replay then live, framing, keep-alives). The Worker is billed for CPU, not
//! for waiting: an idle open tab costs nothing here either.
//!
//! What it carries, not decides: the bytes the feed writes, the replay pages
//! it asks for, the keep-alive ticks, and the ends: the client leaving (a
//! write fails, or its stream closes), the socket dropping (the client's
//! stream ends, and it resumes from its cursor: nothing is lost silently),
//! the stream token expiring, the feed saying it is done. Each end closes
//! both sides.

use crate::{http, ids, now_ms};
use futures_util::future::{select, Either};
use futures_util::StreamExt;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use threadline_durable::feed::backlog::{Backlog, ClientVerdict};
use threadline_durable::feed::{Feed, Plan, RelayStep};
use threadline_durable::ApiError;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::JsCast;
use worker::{Delay, Response, WebSocket, WebsocketEvent};

/// Close code of a relay whose client went away (or fell too far behind).
const CLIENT_GONE: u16 = 4000;

/// The relay's keep-alive on the socket (the runtime answers it for the
/// object, which stays asleep).
const SOCKET_PING_MS: i64 = 30_000;

/// A socket unanswered for this long is dead (its object went away without
/// closing it): the client's stream ends, and it resumes from its cursor.
const SOCKET_DEAD_MS: i64 = 2 * SOCKET_PING_MS + 5_000;

/// A promise settled when the client goes away (`request.signal`, with the
/// `enable_request_signal` compatibility flag), or never without one.
pub(crate) fn gone(client: &web_sys::AbortSignal) -> js_sys::Promise {
    let client = client.clone();
    js_sys::Promise::new(&mut |resolve, _| {
        if client.aborted() {
            let _ = resolve.call0(&wasm_bindgen::JsValue::UNDEFINED);
        } else {
            let _ = client.add_event_listener_with_callback("abort", &resolve);
        }
    })
}

/// A long-poll: the first answer the feed gives, or its timeout's.
pub(crate) async fn one_shot(
    ws: WebSocket,
    mut plan: Plan,
    client: js_sys::Promise,
    wait_ms: u64,
) -> Result<Response, ApiError> {
    let deadline = now_ms() + wait_ms as i64;
    let mut events = ws.events().map_err(http::internal)?;
    let mut client = wasm_bindgen_futures::JsFuture::from(client);
    let reply = loop {
        let left = deadline - now_ms();
        if left <= 0 {
            break plan.feed.timeout(now_ms(), ids::random_u64());
        }
        let next = std::pin::pin!(events.next());
        let wait = select(&mut client, Delay::from(Duration::from_millis(left as u64)));
        match select(next, wait).await {
            Either::Left((Some(Ok(WebsocketEvent::Message(m))), _)) => {
                let Some(text) = m.text().or_else(|| m.bytes().and_then(|b| String::from_utf8(b).ok())) else {
                    continue;
                };
                let step = plan.feed.on_message(&text, now_ms(), ids::random_u64());
                if let Some(page) = step.page {
                    let _ = ws.send_with_str(&page);
                }
                if let Some(reply) = plan.feed.reply() {
                    break Some(reply);
                }
            }
            Either::Left((Some(Ok(WebsocketEvent::Close(c))), _)) => {
                break plan.feed.on_close(c.code(), now_ms(), ids::random_u64())
            }
            Either::Left((None | Some(Err(_)), _)) => break plan.feed.on_close(1006, now_ms(), ids::random_u64()),
            // The client left: nobody reads the answer.
            Either::Right((Either::Left(_), _)) => break None,
            Either::Right((Either::Right(_), _)) => break plan.feed.timeout(now_ms(), ids::random_u64()),
        }
    };
    drop(events);
    let _ = ws.close(Some(1000), Some("answered"));
    let reply = reply.unwrap_or_else(|| threadline_durable::Reply::new(204));
    http::reply(reply).map_err(http::internal)
}

/// A live message framed for a pure protocol, and its frames.
struct Framed {
    protocol: &'static str,
    message: Vec<u8>,
    frames: Rc<[u8]>,
}

thread_local! {
    /// The last live message a relay of this isolate framed for a pure
    /// protocol (`Feed::shared_frames`). A publish reaches every
    /// subscriber of the thread that this isolate relays as the same bytes
    /// one after another, so the first relay frames it and the others write
    /// its frames: the core guarantees they are what each would have made.
    /// Only bytes are kept (no JavaScript object crosses requests).
    static FRAMED: RefCell<Option<Framed>> = const { RefCell::new(None) };
}

/// A socket event listener, shared by the socket and the relay.
type Listener = Rc<Closure<dyn FnMut(web_sys::Event)>>;

/// The client's stream: written as messages arrive, ticked for keep-alives.
struct Relay {
    plan: Plan,
    ws: WebSocket,
    writer: StreamWriter,
    ended: bool,
    /// Whether the client still reads what is written.
    backlog: Backlog,
    /// When the socket last answered a keep-alive (or opened).
    pong_at: i64,
    /// When the client was last written to: its keep-alive comes after a
    /// quiet interval.
    wrote_at: i64,
    /// The socket's listeners, by event: dropped when the relay ends (they
    /// hold it).
    listeners: Vec<(&'static str, Listener)>,
    /// xorshift state for the feed's jitter (no CSPRNG call per message).
    rng: u64,
    /// The object moved the stream to itself, with this ticket: the relay
    /// ended at that frame boundary and left the client's stream open.
    moved: Option<String>,
    /// Settles [`relay`]'s wait when the relay ends.
    finish: Option<js_sys::Function>,
}

#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    /// workerd's native pass-through stream: what is written goes to the
    /// response with no JavaScript queue or transform between (a write
    /// settles once the connection took it).
    #[wasm_bindgen(js_name = IdentityTransformStream)]
    pub(crate) type IdentityStream;
    #[wasm_bindgen(constructor, js_class = "IdentityTransformStream", catch)]
    pub(crate) fn new() -> Result<IdentityStream, wasm_bindgen::JsValue>;
    #[wasm_bindgen(method, getter)]
    pub(crate) fn readable(this: &IdentityStream) -> web_sys::ReadableStream;
    #[wasm_bindgen(method, getter)]
    pub(crate) fn writable(this: &IdentityStream) -> web_sys::WritableStream;
}

#[wasm_bindgen::prelude::wasm_bindgen(module = "/src/stream_writer.js")]
extern "C" {
    /// A stream's writer with its count of writes not yet taken, kept in
    /// JavaScript (src/stream_writer.js): one call per write.
    type Out;
    #[wasm_bindgen(constructor, catch)]
    fn new(writer: &web_sys::WritableStreamDefaultWriter) -> Result<Out, wasm_bindgen::JsValue>;
    #[wasm_bindgen(method, catch)]
    fn write(this: &Out, chunk: &js_sys::Uint8Array) -> Result<(), wasm_bindgen::JsValue>;
    #[wasm_bindgen(method, getter)]
    fn pending(this: &Out) -> u32;
    #[wasm_bindgen(method, catch)]
    fn close(this: &Out) -> Result<(), wasm_bindgen::JsValue>;
}

/// A client's stream as this isolate writes it (a relay's, or a held
/// stream's in the object): each write queued on the stream's writer, and
/// counted until the connection took it, so the writer knows its backlog.
pub(crate) struct StreamWriter {
    writer: web_sys::WritableStreamDefaultWriter,
    out: Out,
    closed: bool,
}

impl StreamWriter {
    pub(crate) fn new(writer: web_sys::WritableStreamDefaultWriter) -> Result<StreamWriter, wasm_bindgen::JsValue> {
        Ok(StreamWriter { out: Out::new(&writer)?, writer, closed: false })
    }

    /// Queues `bytes`; false once the stream was closed.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> bool {
        !self.closed && self.write_chunk(&js_sys::Uint8Array::from(bytes))
    }

    /// Queues `chunk`, which workerd reads without taking it (it may be
    /// written to other streams too); false once the stream was closed.
    pub(crate) fn write_chunk(&mut self, chunk: &js_sys::Uint8Array) -> bool {
        !self.closed && self.out.write(chunk).is_ok()
    }

    /// Writes the connection has not taken yet.
    pub(crate) fn pending(&self) -> usize {
        self.out.pending() as usize
    }

    /// Ends the stream after what was written.
    pub(crate) fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            let _ = self.out.close();
        }
    }

    /// Leaves the stream open for the next writer (a stream that moves).
    pub(crate) fn release(&self) {
        self.writer.release_lock();
    }
}

impl Relay {
    /// A random number for the feed (cursor jitter: unpredictable enough,
    /// not secret).
    fn random(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// Ends the relay when its client stopped reading; true while it reads.
    fn reading(&mut self, now: i64) -> bool {
        match self.backlog.observe(self.writer.pending(), now) {
            ClientVerdict::Reading => true,
            ClientVerdict::Stalled => {
                self.end(CLIENT_GONE, "the client stopped reading");
                false
            }
            ClientVerdict::TooFar => {
                self.end(CLIENT_GONE, "the client fell too far behind");
                false
            }
        }
    }

    fn write(&mut self, bytes: &[u8], now: i64) {
        if bytes.is_empty() || self.ended || !self.reading(now) {
            return;
        }
        self.writer.write(bytes);
        self.backlog.wrote();
        self.wrote_at = now;
    }

    /// A feed message from the object (binary frames of UTF-8, no
    /// transcoding): framed here, or (live on a pure
    /// protocol) written as the frames another relay of this isolate made
    /// from the same message.
    fn on_bytes(&mut self, message: Vec<u8>, now: i64) {
        let protocol = self.plan.feed.shared_frames();
        if let Some(protocol) = protocol {
            let shared = FRAMED.with(|f| {
                f.borrow()
                    .as_ref()
                    .filter(|c| c.protocol == protocol && threadline_durable::feed::same_bytes(&c.message, &message))
                    .map(|c| c.frames.clone())
            });
            if let Some(frames) = shared {
                self.write(&frames, now);
                return;
            }
        }
        let Ok(text) = String::from_utf8(message) else { return };
        let random = self.random();
        let step = self.plan.feed.on_message(&text, now, random);
        match protocol {
            Some(protocol) if step.page.is_none() && !step.done && step.moved.is_none() => {
                let frames: Rc<[u8]> = Rc::from(step.out);
                self.write(&frames, now);
                FRAMED.with(|f| *f.borrow_mut() = Some(Framed { protocol, message: text.into_bytes(), frames }));
            }
            _ => self.step(step, now),
        }
    }

    fn step(&mut self, step: threadline_durable::feed::RelayStep, now: i64) {
        self.write(&step.out, now);
        if let Some(page) = step.page {
            let _ = self.ws.send_with_str(&page);
        }
        if step.done {
            self.end(1000, "done");
        } else if let Some(ticket) = step.moved {
            // The client's stream goes on from the object: it stays open.
            self.moved = Some(ticket);
            self.end(threadline_durable::feed::socket::MOVED, "moved");
        }
    }

    fn end(&mut self, code: u16, reason: &str) {
        if self.ended {
            return;
        }
        self.ended = true;
        if let Some(finish) = self.finish.take() {
            let _ = finish.call0(&wasm_bindgen::JsValue::UNDEFINED);
        }
        let socket: &web_sys::WebSocket = self.ws.as_ref();
        let listeners = std::mem::take(&mut self.listeners);
        for (kind, l) in &listeners {
            let _ = socket.remove_event_listener_with_callback(kind, (**l).as_ref().unchecked_ref());
        }
        let _ = self.ws.close(Some(code), Some(reason));
        if self.moved.is_none() {
            self.writer.close();
        }
        // A listener may be the one running now: it is dropped on a later
        // turn, never while it runs.
        wasm_bindgen_futures::spawn_local(async move { drop(listeners) });
    }
}

/// The feed a relay is left with once it gave its own back.
struct Spent;

impl Feed for Spent {
    fn on_message(&mut self, _text: &str, _now: i64, _random: u64) -> RelayStep {
        RelayStep::default()
    }
    fn on_tick(&mut self, _now: i64, _random: u64) -> RelayStep {
        RelayStep::default()
    }
    fn reply(&mut self) -> Option<threadline_durable::Reply> {
        None
    }
    fn timeout(&self, _now: i64, _random: u64) -> Option<threadline_durable::Reply> {
        None
    }
}

/// Most a moving relay waits for its queued writes to be taken before the
/// next leg writes after them.
const DRAIN_MS: i64 = 5_000;

/// Relays socket `ws` to the client's stream through `writer`, until one of
/// its ends. Returns the plan, and the ticket of a move: the object asked
/// for the stream (a run began), at a frame boundary; the client's stream is
/// then still open, its writes taken, and `writer` released for the next
/// leg. Without a move, the client's stream is closed.
pub(crate) async fn relay(
    ws: WebSocket,
    plan: Plan,
    signal: web_sys::AbortSignal,
    ping_ms: u64,
    writer: web_sys::WritableStreamDefaultWriter,
) -> (Option<String>, Plan) {
    let closed = writer.closed();
    let writer = match StreamWriter::new(writer.clone()) {
        Ok(w) => w,
        Err(_) => {
            let _ = writer.close();
            let _ = ws.close(Some(1011), Some("the stream could not be written"));
            return (None, plan);
        }
    };
    let client = gone(&signal);
    let until = plan.until;
    let mut finish = None;
    let finished = js_sys::Promise::new(&mut |resolve, _| finish = Some(resolve));
    let relay = Rc::new(RefCell::new(Relay {
        plan,
        ws: ws.clone(),
        writer,
        ended: false,
        backlog: Backlog::new(now_ms(), ping_ms),
        pong_at: now_ms(),
        wrote_at: now_ms(),
        listeners: Vec::new(),
        rng: ids::random_u64() | 1,
        moved: None,
        finish,
    }));
    let socket: &web_sys::WebSocket = ws.as_ref();
    let on_message = {
        let relay = relay.clone();
        Closure::<dyn FnMut(web_sys::Event)>::new(move |e: web_sys::Event| {
            let Some(m) = e.dyn_ref::<web_sys::MessageEvent>() else { return };
            let data = m.data();
            let mut r = relay.borrow_mut();
            let now = now_ms();
            match data.as_string() {
                // The runtime's answer to the socket's keep-alive.
                Some(text) if text == crate::live::PONG => r.pong_at = now,
                Some(text) => r.on_bytes(text.into_bytes(), now),
                None => r.on_bytes(js_sys::Uint8Array::new(&data).to_vec(), now),
            }
        })
    };
    let on_close = {
        let relay = relay.clone();
        Closure::<dyn FnMut(web_sys::Event)>::new(move |_| relay.borrow_mut().end(1000, "the thread closed the stream"))
    };
    let on_message = Rc::new(on_message);
    let on_close = Rc::new(on_close);
    for (kind, l) in [("message", &on_message), ("close", &on_close), ("error", &on_close)] {
        let _ = socket.add_event_listener_with_callback(kind, (**l).as_ref().unchecked_ref());
        relay.borrow_mut().listeners.push((kind, l.clone()));
    }
    // The client leaving aborts its request's signal (and makes a write to
    // its stream fail, settling the writer's `closed`): the socket is
    // closed, so the object drops the subscriber at once rather than
    // sending into the void.
    {
        let relay = relay.clone();
        let closed = wasm_bindgen_futures::JsFuture::from(closed);
        let client = wasm_bindgen_futures::JsFuture::from(client);
        wasm_bindgen_futures::spawn_local(async move {
            let _ = select(closed, client).await;
            relay.borrow_mut().end(CLIENT_GONE, "the client went away");
        });
    }
    // Keep-alives for the client, and the socket's (answered by the runtime);
    // the stream ends with the token that opened it.
    {
        let relay = relay.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let ping_ms = ping_ms as i64;
            let mut next_socket_ping = now_ms() + SOCKET_PING_MS;
            loop {
                let next_keepalive = relay.borrow().wrote_at + ping_ms;
                let wake = next_keepalive.min(next_socket_ping).min(until.unwrap_or(i64::MAX));
                Delay::from(Duration::from_millis((wake - now_ms()).max(0) as u64)).await;
                let now = now_ms();
                let mut r = relay.borrow_mut();
                if r.ended {
                    break;
                }
                if until.is_some_and(|t| now >= t) {
                    r.end(1000, "the stream token expired");
                    break;
                }
                if !r.reading(now) {
                    break;
                }
                if now >= r.wrote_at + ping_ms {
                    // Quiet for the interval: the protocol's keep-alive (a
                    // feed that writes nothing waits another interval).
                    r.wrote_at = now;
                    let random = r.random();
                    let step = r.plan.feed.on_tick(now, random);
                    r.step(step, now);
                }
                if now - r.pong_at > SOCKET_DEAD_MS {
                    r.end(1011, "the object stopped answering");
                    break;
                }
                if now >= next_socket_ping {
                    next_socket_ping = now + SOCKET_PING_MS;
                    let _ = r.ws.send_with_str(crate::live::PING);
                }
            }
        });
    }
    let _ = wasm_bindgen_futures::JsFuture::from(finished).await;
    let (moved, plan) = {
        let mut r = relay.borrow_mut();
        (r.moved.take(), std::mem::replace(&mut r.plan, Plan::new(Box::new(Spent), Vec::new())))
    };
    if moved.is_some() {
        let deadline = now_ms() + DRAIN_MS;
        while relay.borrow().writer.pending() > 0 && now_ms() < deadline && !signal.aborted() {
            Delay::from(Duration::from_millis(1)).await;
        }
        relay.borrow().writer.release();
    }
    (moved, plan)
}
