//! The subscriber plumbing of a thread's object: the core it shares with its
//! tasks ([`Shared`]), the sink a subscriber's SSE body reads from
//! ([`ChannelSink`]), and the bodies that carry what the core decided: the
//! events route (replay pages, snapshot, live), a run stream, and a Durable
//! Streams view (long-poll waits and SSE turns). The object, the agent host
//! and the views import this; it imports none of them.
//!
//! Invariant: every access to the core is one synchronous borrow, never held
//! across an `.await`.

use crate::now_ms;
use crate::store::SqlStore;
use bytes::Bytes;
use futures_channel::mpsc::{UnboundedReceiver, UnboundedSender};
use futures_util::future::{select, Either};
use futures_util::{stream, Stream, StreamExt};
use std::cell::{Cell, RefCell};
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;
use threadline_durable::reply::Reply;
use threadline_durable::sse::PING;
use threadline_durable::thread::streams::{ViewCursor, ViewTurn};
use threadline_durable::{Sink, Subscription, Thread};
use worker::Delay;

pub type Core = Thread<SqlStore, ChannelSink>;
/// The thread, shared by the object's requests and the tasks it spawns
/// (the agent loop, timers); `None` until first loaded, and after a wipe.
pub type Shared = Rc<RefCell<Option<Core>>>;

pub type Body = Pin<Box<dyn Stream<Item = Bytes>>>;

/// A subscriber: the sending half of its SSE response body, and when the
/// runtime last pulled from that body.
///
/// Invariant: a subscriber whose body has not been pulled for `stale_ms`
/// counts as gone. A healthy stream is pulled at least at every keep-alive
/// ping; one whose client left is either dropped by the runtime (its channel
/// closes) or, when the runtime stops pulling without dropping it, goes
/// stale; either way the next publish or subscribe drops it.
pub struct ChannelSink {
    tx: UnboundedSender<Bytes>,
    pulled_at: Rc<Cell<i64>>,
    stale_ms: i64,
}

impl Sink for ChannelSink {
    fn send(&mut self, chunk: Bytes) -> bool {
        !self.is_closed() && self.tx.unbounded_send(chunk).is_ok()
    }

    fn is_closed(&self) -> bool {
        self.tx.is_closed() || now_ms() - self.pulled_at.get() > self.stale_ms
    }
}

/// What a subscriber's response body reads: the receiving end of its
/// sink, and when it was last pulled.
pub struct Channel {
    pub rx: UnboundedReceiver<Bytes>,
    pulled_at: Rc<Cell<i64>>,
}

/// A new subscriber's two ends: the sink the core sends into, and what the
/// response body reads.
pub fn channel(ping_ms: u64) -> (ChannelSink, Channel) {
    let (tx, rx) = futures_channel::mpsc::unbounded();
    let pulled_at = Rc::new(Cell::new(now_ms()));
    let sink = ChannelSink { tx, pulled_at: pulled_at.clone(), stale_ms: 2 * ping_ms as i64 + 1_000 };
    (sink, Channel { rx, pulled_at })
}

/// The live part of an SSE body: what the thread sends the subscriber, with
/// a keep-alive comment whenever it is quiet for `ping_ms`. Ends when the
/// thread drops the subscriber (a run stream after its terminal frame), or
/// at `until` (the stream token that opened it expires).
fn live_body(rx: UnboundedReceiver<Bytes>, ping_ms: u64, until: Option<i64>) -> impl Stream<Item = Bytes> {
    stream::unfold(rx, move |mut rx| async move {
        let left = until.map_or(i64::MAX, |t| t - now_ms());
        if left <= 0 {
            return None;
        }
        let next = std::pin::pin!(rx.next());
        let wait = (ping_ms as i64).min(left) as u64;
        match select(next, Delay::from(Duration::from_millis(wait))).await {
            Either::Left((Some(chunk), _)) => Some((chunk, rx)),
            Either::Left((None, _)) => None,
            Either::Right(_) if until.is_some_and(|t| now_ms() >= t) => None,
            Either::Right(_) => Some((Bytes::from_static(PING), rx)),
        }
    })
}

/// The events route: replay pages (read lazily: rows at or below `high`
/// never change, and everything above it is already queued on the channel),
/// then the open segments' snapshot, then live.
pub fn events_body(core: Shared, sub: Subscription, ch: Channel, ping_ms: u64, until: Option<i64>) -> Body {
    let pages = stream::unfold((core.clone(), sub.after, sub.high), |(core, after, high)| async move {
        if after >= high {
            return None;
        }
        let page = core.borrow().as_ref().map(|c| c.replay_page(after, high));
        match page {
            Some(Ok((bytes, last))) if !bytes.is_empty() => Some((bytes, (core, last, high))),
            Some(Err(e)) => {
                worker::console_error!("replay: {e}");
                None
            }
            _ => None,
        }
    });
    let snapshot = stream::iter((!sub.snapshot.is_empty()).then_some(sub.snapshot));
    let body = pages.chain(snapshot).chain(live_body(ch.rx, ping_ms, until));
    unsubscribing(core, sub.id, ch.pulled_at, Box::pin(body))
}

/// A run stream: its first bytes (`meta`, the frames so far), then live
/// frames until the terminal one, or just the first bytes of a finished run.
pub fn run_body(core: Shared, head: Bytes, sub: Option<u64>, ch: Channel, ping_ms: u64, until: Option<i64>) -> Body {
    let first = stream::iter([head]);
    match sub {
        Some(id) => unsubscribing(core, id, ch.pulled_at, Box::pin(first.chain(live_body(ch.rx, ping_ms, until)))),
        None => Box::pin(first),
    }
}

/// A Durable Streams long-poll: waits for a publish that stores records
/// (a delta wakes it but stores none) or `wait_ms`, then answers.
pub async fn view_long_poll(
    core: &Shared,
    sub: u64,
    cursor: ViewCursor,
    mut rx: UnboundedReceiver<Bytes>,
    wait_ms: u64,
) -> Reply {
    let jitter = || threadline_durable::streams::wire::cursor_jitter(crate::ids::random_u64());
    let deadline = now_ms() + wait_ms as i64;
    let reply = loop {
        let left = deadline - now_ms();
        if left <= 0 {
            break Core::view_timeout(&cursor, jitter(), now_ms());
        }
        let next = std::pin::pin!(rx.next());
        match select(next, Delay::from(Duration::from_millis(left as u64))).await {
            Either::Left((Some(_), _)) => {
                while rx.try_recv().is_ok() {}
                let polled = core.borrow().as_ref().map(|c| c.view_poll(&cursor, jitter(), now_ms()));
                match polled {
                    Some(Ok(Some(reply))) => break reply,
                    Some(Ok(None)) => continue,
                    Some(Err(e)) => break Reply::error(&e),
                    None => break Reply::error(&threadline_durable::ApiError::thread_not_found()),
                }
            }
            Either::Left((None, _)) => break Reply::error(&threadline_durable::ApiError::thread_not_found()),
            Either::Right(_) => break Core::view_timeout(&cursor, jitter(), now_ms()),
        }
    };
    if let Some(c) = core.borrow_mut().as_mut() {
        c.unsubscribe(sub);
    }
    reply
}

/// A Durable Streams SSE view: the first turn, then turns of the core after
/// each wake (a publish) or keep-alive interval.
pub fn view_sse_body(
    core: Shared,
    sub: u64,
    first: ViewTurn,
    cursor: ViewCursor,
    ch: Channel,
    ping_ms: u64,
    until: Option<i64>,
) -> Body {
    struct St {
        core: Shared,
        cursor: ViewCursor,
        rx: UnboundedReceiver<Bytes>,
        wait: bool,
        done: bool,
    }
    let head = stream::iter((!first.bytes.is_empty()).then(|| Bytes::from(first.bytes)));
    let st = St { core: core.clone(), cursor, rx: ch.rx, wait: first.wait, done: first.done };
    let turns = stream::unfold(st, move |mut st| async move {
        loop {
            let left = until.map_or(i64::MAX, |t| t - now_ms());
            if st.done || left <= 0 {
                return None;
            }
            let woke = if st.wait {
                let next = std::pin::pin!(st.rx.next());
                match select(next, Delay::from(Duration::from_millis((ping_ms as i64).min(left) as u64))).await {
                    Either::Left((Some(_), _)) => {
                        while st.rx.try_recv().is_ok() {}
                        true
                    }
                    Either::Left((None, _)) => return None,
                    Either::Right(_) => false,
                }
            } else {
                true
            };
            let jitter = threadline_durable::streams::wire::cursor_jitter(crate::ids::random_u64());
            let turn = st.core.borrow().as_ref().map(|c| c.view_step(&mut st.cursor, woke, jitter, now_ms()))?;
            st.wait = turn.wait;
            st.done = turn.done;
            if !turn.bytes.is_empty() {
                return Some((Bytes::from(turn.bytes), st));
            }
        }
    });
    unsubscribing(core, sub, ch.pulled_at, Box::pin(head.chain(turns)))
}

/// Wraps an SSE body so it unregisters its subscriber when the client goes
/// away (the runtime drops the body when the response is cancelled), and
/// records every pull (see [`ChannelSink`]).
fn unsubscribing(core: Shared, id: u64, pulled_at: Rc<Cell<i64>>, inner: Body) -> Body {
    Box::pin(Unsubscribe { inner, core, id, pulled_at })
}

struct Unsubscribe {
    inner: Body,
    core: Shared,
    id: u64,
    pulled_at: Rc<Cell<i64>>,
}

impl Stream for Unsubscribe {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Bytes>> {
        self.pulled_at.set(now_ms());
        self.inner.poll_next_unpin(cx)
    }
}

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        // If the core is busy (it never is across an await, but a drop could
        // in principle run inside a borrow), the closed channel is pruned on
        // the next publish or subscribe instead.
        if let Ok(mut slot) = self.core.try_borrow_mut() {
            if let Some(c) = slot.as_mut() {
                c.unsubscribe(self.id);
            }
        }
    }
}
