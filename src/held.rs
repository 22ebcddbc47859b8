//! The object's end of a held stream (`threadline_durable::feed::held`):
//! during a run the object writes a subscriber's frames to a stream that
//! the Worker passes to its client as it is, and when the run ends it hands
//! the subscriber over to a hibernatable socket the Worker claims with the
//! stream's ticket. The core decides what is written and when a stream
//! moves; this carries the bytes, the keep-alive timer and the pages.
//!
//! Invariant: the hello is given to the held stream in the block that
//! registered it (no publish between), and every access to the core is one
//! synchronous borrow, never held across an `.await`.

use crate::live::{self, Shared};
use crate::relay::{IdentityStream, StreamWriter};
use crate::{ids, now_ms};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;
use threadline_durable::feed::held::{Clock, Frames, Held, Writer};
use threadline_durable::feed::Plan;
use threadline_durable::thread::{Claimed, ClaimedTo, Delivery};
use threadline_durable::{ApiError, Follow};
use worker::{Delay, Response, ResponseBody, State};

/// The header a held stream's answer carries its ticket in (the Worker's
/// own: it never reaches the client).
pub const TICKET: &str = "x-threadline-held";

/// How often the object looks for quiet held streams to keep alive.
const TICK_MS: u64 = 1_000;

/// The client's stream as the object writes it: a native pass-through
/// stream (what is written goes to the Worker's response as it is), and
/// whether its reader went away (the Worker's client left: the writer's
/// `closed` rejected, as it does when the reader cancels, even after the
/// object ended the stream; a stream read to its end resolves it).
pub struct HeldWriter {
    stream: StreamWriter,
    gone: Rc<Cell<bool>>,
}

impl Writer for HeldWriter {
    fn write(&mut self, bytes: &[u8]) -> bool {
        self.stream.write(bytes)
    }

    /// One chunk per message for every held stream of its protocol in this
    /// isolate: one copy out of wasm and one JavaScript object, where a
    /// chunk per stream made 100 of each per publish at 100 subscribers.
    fn write_shared(&mut self, frames: &Rc<[u8]>) -> bool {
        let chunk = CHUNK.with(|last| {
            let mut last = last.borrow_mut();
            match &*last {
                Some((made_of, chunk)) if Rc::ptr_eq(made_of, frames) => chunk.clone(),
                _ => {
                    let chunk = js_sys::Uint8Array::from(&frames[..]);
                    *last = Some((frames.clone(), chunk.clone()));
                    chunk
                }
            }
        });
        self.stream.write_chunk(&chunk)
    }

    fn pending(&self) -> usize {
        self.stream.pending()
    }

    fn close(&mut self) {
        self.stream.close();
    }

    fn is_gone(&self) -> bool {
        self.gone.get()
    }
}

thread_local! {
    /// The frames of the held streams of this isolate's objects, shared
    /// between them (a message is known by its address).
    static FRAMES: Rc<RefCell<Frames>> = Rc::default();
    /// The chunk the last shared frames were written as, with the frames
    /// (held, so their address is not reused while it names the chunk).
    static CHUNK: RefCell<Option<(Rc<[u8]>, js_sys::Uint8Array)>> = const { RefCell::new(None) };
    /// The objects of this isolate whose keep-alive and page task runs (by
    /// their core's address).
    static TENDED: RefCell<std::collections::HashSet<usize>> = RefCell::default();
}

/// Opens a held stream: the subscriber, registered with its hello in one
/// synchronous block, and the answer whose body is its stream.
pub fn hold(core: &Shared, follow: Follow, after: u64, plan: Plan, ping_ms: u64) -> Result<Response, ApiError> {
    let id = ids::subscriber_id();
    open(core, plan, ping_ms, |c, held| {
        let hello = c.subscribe(id, follow, after, held)?;
        c.journal_mut().subscribers().send_to(id, hello);
        Ok(())
    })
}

/// A stream moving here from its relay: registered under its id, and given
/// what was published since the move, in one synchronous block.
fn held_with(
    core: &Shared,
    id: u64,
    follow: Follow,
    plan: Plan,
    kept: Vec<bytes::Bytes>,
    ping_ms: u64,
) -> Result<Response, ApiError> {
    open(core, plan, ping_ms, |c, held| {
        c.journal_mut().subscribers().add(id, follow, held);
        for message in kept {
            c.journal_mut().subscribers().send_to(id, message);
        }
        Ok(())
    })
}

/// A held stream framed by `plan`'s feed, registered by `register` with
/// the core, and the answer that carries it to the Worker with its ticket.
fn open(
    core: &Shared,
    plan: Plan,
    ping_ms: u64,
    register: impl FnOnce(&mut crate::live::Core, Delivery<live::WsSink, HeldWriter>) -> Result<(), ApiError>,
) -> Result<Response, ApiError> {
    let transform = IdentityStream::new().map_err(|e| ApiError::unavailable(format!("{e:?}")))?;
    let writer = transform.writable().get_writer().map_err(|e| ApiError::unavailable(format!("{e:?}")))?;
    let gone = Rc::new(Cell::new(false));
    {
        let gone = gone.clone();
        let closed = writer.closed();
        wasm_bindgen_futures::spawn_local(async move {
            if wasm_bindgen_futures::JsFuture::from(closed).await.is_err() {
                gone.set(true);
            }
        });
    }
    let stream = StreamWriter::new(writer).map_err(|e| ApiError::unavailable(format!("{e:?}")))?;
    let writer = HeldWriter { stream, gone };
    let clock: Clock = Rc::new(now_ms);
    let tick_ms = plan.tick_ms.unwrap_or(ping_ms);
    let held = Held::new(plan.feed, writer, tick_ms, ids::random_u64(), FRAMES.with(Rc::clone), clock);
    let ticket = {
        let mut slot = core.borrow_mut();
        let c = slot.as_mut().ok_or_else(ApiError::thread_not_found)?;
        let ticket = c.held_ticket();
        register(c, Delivery::Held(held, ticket.clone()))?;
        ticket
    };
    wasm_bindgen_futures::spawn_local(pages(core.clone()));
    tend(core.clone(), tick_ms);
    let resp = Response::from_body(ResponseBody::Stream(transform.readable())).map_err(crate::http::internal)?;
    let h = worker::Headers::new();
    let _ = h.set(TICKET, &ticket);
    Ok(resp.with_headers(h))
}

/// Serves the replay pages held streams ask for, one each per turn,
/// yielding between them as a relay's round trip would, until none asks.
async fn pages(core: Shared) {
    loop {
        let more = core.borrow_mut().as_mut().map(|c| c.serve_held_pages());
        match more {
            Some(Ok(true)) => Delay::from(Duration::from_millis(0)).await,
            Some(Err(e)) => {
                worker::console_error!("held page: {e:?}");
                break;
            }
            _ => break,
        }
    }
}

/// Keeps the held streams alive, and moves them once no run keeps the
/// object awake, for as long as any is held (one task per object, waking at
/// least twice per keep-alive interval).
fn tend(core: Shared, tick_ms: u64) {
    let key = Rc::as_ptr(&core) as usize;
    if !TENDED.with(|t| t.borrow_mut().insert(key)) {
        return;
    }
    let every = TICK_MS.min(tick_ms / 2).max(10);
    wasm_bindgen_futures::spawn_local(async move {
        loop {
            Delay::from(Duration::from_millis(every)).await;
            let holds = core.borrow_mut().as_mut().is_some_and(|c| {
                c.settle(now_ms());
                c.journal_mut().subscribers().tick_held()
            });
            if !holds {
                break;
            }
        }
        TENDED.with(|t| t.borrow_mut().remove(&key));
    });
}

/// Claims a moving stream by its ticket, with the claiming relay's feed
/// state when a socket's stream moves here: a held stream when the core
/// says so and the route's feed takes the state; else a socket, sent what
/// the core lists first (a held stream's state, then what it missed). 410
/// `stream_moved` when no stream waits for this claim (the Worker ends the
/// client's stream, which resumes from its cursor).
pub fn claim(state: &State, core: &Shared, claim: Claim<'_>, ping_ms: u64) -> Result<Response, ApiError> {
    let claimed = core.borrow_mut().as_mut().and_then(|c| c.claim_stream(claim.ticket, claim.relay_state, now_ms()));
    let Some(Claimed { id, follow, to }) = claimed else { return Err(ApiError::stream_moved()) };
    let first = match to {
        ClaimedTo::Held { state: relay_state, kept } => {
            match threadline_durable::protocols::held_plan(
                claim.route,
                claim.query,
                claim.last_event_id,
                &relay_state,
                now_ms(),
            ) {
                Some(plan) => return held_with(core, id, follow, plan, kept, ping_ms),
                // The route's feed refused the relay's state: a socket, the
                // relay framing on as before.
                None => kept,
            }
        }
        ClaimedTo::Socket(first) => first,
    };
    let (client, server) = live::accept(state, id, &follow).map_err(crate::http::internal)?;
    for message in &first {
        live::send(&server, message);
    }
    {
        let mut slot = core.borrow_mut();
        let c = slot.as_mut().ok_or_else(ApiError::thread_not_found)?;
        c.journal_mut().subscribers().add(id, follow, Delivery::Socket(live::WsSink::new(server)));
    }
    Response::from_websocket(client).map_err(crate::http::internal)
}

/// A claim as the object's request carries it.
pub struct Claim<'a> {
    pub ticket: &'a str,
    pub relay_state: Option<&'a str>,
    pub route: &'a threadline_durable::protocols::Route,
    pub query: &'a [(String, String)],
    pub last_event_id: Option<&'a str>,
}

/// After each event the object handled: with no run in progress, its held
/// streams move (the Worker claims each socket as its stream ends).
pub fn settle(core: &Shared) {
    if let Some(c) = core.borrow_mut().as_mut() {
        c.settle(now_ms());
    }
}
