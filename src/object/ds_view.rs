//! The thread's Durable Streams views: `GET /v1/threads/:threadId` (the
//! log, `view=history|updates`) and `GET|POST /v1/runs/:runId` (one run's
//! events; an agent's idempotent append). Every rule (offsets and their
//! generation, frames, headers, producer checks) is the core's
//! ([`threadline_durable::streams::view`]); this file reads the log, waits
//! for publishes and shapes responses.
//!
//! Invariant (no gap, no duplicate): a live read registers its waker in the
//! same synchronous block as its first read, and every later read starts
//! strictly after the position the previous one reached. A publish stores
//! before it fans out, so a wake always finds the new records stored.

use super::{make_room, ChannelSink, Inner, Unsubscribe};
use crate::http::{self, internal, query_all, read_json};
use crate::ids::random_u64;
use crate::now_ms;
use bytes::Bytes;
use futures_channel::mpsc::{unbounded, UnboundedReceiver};
use futures_util::future::{select, Either};
use futures_util::{stream, StreamExt};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;
use threadline_durable::store::{Record, RunState, Store};
use threadline_durable::streams::producer::{Producer, ProducerState};
use threadline_durable::streams::view::{self, Position, RunAppend, View};
use threadline_durable::streams::wire;
use threadline_durable::ApiError;
use worker::*;

/// Records one read of the thread log carries at most.
const PAGE: usize = 1000;

struct Query {
    offsets: Vec<String>,
    live: Option<String>,
    cursor: Option<String>,
    view: Option<String>,
    tail: Option<String>,
}

fn query(req: &Request) -> std::result::Result<Query, ApiError> {
    let url = req.url().map_err(internal)?;
    let first = |name: &str| query_all(&url, name).into_iter().next();
    Ok(Query {
        offsets: query_all(&url, "offset"),
        live: first("live"),
        cursor: first("cursor"),
        view: first("view"),
        tail: first("tail"),
    })
}

/// Which log a read follows.
#[derive(Clone)]
enum Scope {
    Thread,
    Run(String),
}

/// The records after `after` and the position they leave the reader at.
fn read_batch(
    c: &super::Core,
    scope: &Scope,
    gen: u64,
    after: u64,
    tail: Option<usize>,
) -> std::result::Result<(Vec<Record>, Position), ApiError> {
    let last = c.last_seq();
    match scope {
        Scope::Thread => {
            let records = c.store().read_range(after, last, PAGE).map_err(ApiError::storage)?;
            let seq = records.last().map_or(after, |r| r.seq);
            Ok((records, Position { gen, seq, up_to_date: seq >= last, closed: false }))
        }
        Scope::Run(run) => {
            let record = c
                .store()
                .run(run)
                .map_err(ApiError::storage)?
                .ok_or_else(|| ApiError::not_found("run_not_found", "no run with this id"))?;
            // `tail=N` is a bounded diagnostic read of the run's suffix;
            // every other read pages through the run's index after `after`.
            let (records, up_to_date) = match tail {
                Some(n) => {
                    let mut all: Vec<Record> =
                        c.store().run_records(run).map_err(ApiError::storage)?.into_iter().filter(|r| r.seq > after).collect();
                    (all.split_off(all.len().saturating_sub(n)), true)
                }
                None => {
                    let page = c.store().run_range(run, after, PAGE).map_err(ApiError::storage)?;
                    let full = page.len() == PAGE;
                    (page, !full)
                }
            };
            let seq = if up_to_date { last.max(after) } else { records.last().map_or(after, |r| r.seq) };
            // Closed once its `run-finish` is stored: the run record's state
            // changes in the same commit as that event.
            let closed = record.state != RunState::Running && up_to_date;
            Ok((records, Position { gen, seq, up_to_date, closed }))
        }
    }
}

impl Inner {
    /// `GET /v1/threads/:threadId` and `GET /v1/runs/:runId`.
    pub(super) async fn stream_read(
        self: &Rc<Self>,
        thread: &str,
        run: Option<&str>,
        req: &Request,
    ) -> std::result::Result<Response, ApiError> {
        let q = query(req)?;
        let scope = run.map_or(Scope::Thread, |r| Scope::Run(r.to_owned()));
        let tail = view::tail_param(q.tail.as_deref())?;
        let view = match scope {
            Scope::Thread if tail.is_some() => {
                return Err(ApiError::bad_request(
                    "tail_not_supported",
                    "a conversation cannot be resumed from a suffix: read view=history, then view=updates",
                ))
            }
            Scope::Thread => View::parse(q.view.as_deref(), !q.offsets.is_empty())?,
            Scope::Run(_) if q.view.is_some() => {
                return Err(ApiError::bad_request("invalid_view", "a run's stream has no views"))
            }
            Scope::Run(_) => View::Log,
        };
        let live = match q.live.as_deref() {
            None => None,
            Some(l @ ("long-poll" | "sse")) if !q.offsets.is_empty() => Some(l.to_owned()),
            Some("long-poll" | "sse") => {
                return Err(ApiError::bad_request("offset_required", "a live read resumes after an offset: pass ?offset="))
            }
            Some(_) => return Err(ApiError::bad_request("invalid_live", "`live` is `long-poll` or `sse`")),
        };
        if view == View::History && live.is_some() {
            return Err(ApiError::bad_request("invalid_live", "view=history is one snapshot; follow it with view=updates"));
        }
        let draw = random_u64();
        let offsets: Vec<&str> = q.offsets.iter().map(String::as_str).collect();
        // A live read registers its waker in the same block as its first read.
        let (tx, rx) = unbounded();
        let pulled_at = Rc::new(Cell::new(now_ms()));
        let sink = ChannelSink::new(tx, pulled_at.clone(), self.config.ping_ms);
        let max = self.config.max_subscribers;
        let first = self.with_core(|c| {
            let gen = view::generation(c.store_mut(), || draw)?;
            let last = c.last_seq();
            let after = view::resolve(&offsets, gen, last)?.unwrap_or(0);
            if view == View::History {
                let mut body = c.messages(thread, 1000, 0)?;
                body["offset"] = view::offset(gen, last).into();
                return Ok((Vec::new(), Position { gen, seq: last, up_to_date: true, closed: false }, Some(body), None));
            }
            let (records, pos) = read_batch(c, &scope, gen, after, tail)?;
            let sub = if live.is_some() {
                make_room(c, max)?;
                Some(c.subscribe(pos.seq, sink).id)
            } else {
                None
            };
            Ok::<_, ApiError>((records, pos, None, sub))
        })??;
        let (records, pos, history, sub) = first;
        if let Some(body) = history {
            let resp = http::json(200, &body).map_err(internal)?;
            let _ = resp.headers().set(wire::NEXT_OFFSET, &view::offset(pos.gen, pos.seq));
            let _ = resp.headers().set(wire::UP_TO_DATE, "true");
            return Ok(resp);
        }
        let Some(live) = live else {
            return http::reply(view::batch_reply(&records, pos, None)).map_err(internal);
        };
        let sub = sub.expect("live reads subscribe");
        let jitter = wire::cursor_jitter(random_u64());
        if live == "long-poll" {
            let result = self.long_poll(&scope, records, pos, rx, q.cursor.as_deref(), jitter).await;
            self.with_core(|c| c.unsubscribe(sub))?;
            return http::reply(result?).map_err(internal);
        }
        let mut head = Vec::new();
        let cursor = wire::response_cursor(q.cursor.as_deref(), now_ms(), jitter);
        view::sse_batch(&records, pos, &cursor, &mut head);
        let body = sse_body(self.clone(), scope, pos, rx, q.cursor.clone(), Bytes::from(head));
        let body = Unsubscribe { inner: Box::pin(body), core: self.core.clone(), id: sub, pulled_at }.map(Ok::<Bytes, worker::Error>);
        let headers = http::ds_sse_headers();
        Ok(Response::from_stream(body).map_err(internal)?.with_headers(headers))
    }

    /// A long-poll: answers at once with what is there, else waits for a
    /// publish that stores records (deltas wake it but store none) or the
    /// long-poll interval, then answers 204.
    async fn long_poll(
        self: &Rc<Self>,
        scope: &Scope,
        records: Vec<Record>,
        pos: Position,
        mut rx: UnboundedReceiver<Bytes>,
        cursor: Option<&str>,
        jitter: u64,
    ) -> std::result::Result<threadline_durable::streams::Reply, ApiError> {
        let cursor_now = || Some(wire::response_cursor(cursor, now_ms(), jitter));
        if !records.is_empty() || pos.closed || !pos.up_to_date {
            return Ok(view::batch_reply(&records, pos, cursor_now()));
        }
        let deadline = now_ms() + self.config.streams_long_poll_ms as i64;
        loop {
            let left = deadline - now_ms();
            if left <= 0 {
                return Ok(view::timeout_reply(pos, cursor_now().unwrap_or_default()));
            }
            let next = std::pin::pin!(rx.next());
            match select(next, Delay::from(Duration::from_millis(left as u64))).await {
                Either::Left((Some(_), _)) => {
                    while rx.try_recv().is_ok() {}
                    let (records, next) = self.with_core(|c| read_batch(c, scope, pos.gen, pos.seq, None))??;
                    if !records.is_empty() || next.closed {
                        return Ok(view::batch_reply(&records, next, cursor_now()));
                    }
                }
                Either::Left((None, _)) => {
                    return Err(ApiError::not_found("thread_not_found", "the thread was deleted"));
                }
                Either::Right(_) => return Ok(view::timeout_reply(pos, cursor_now().unwrap_or_default())),
            }
        }
    }

    /// `POST /v1/runs/:runId`: an external agent appends events to its run
    /// with its publish token, through the thread's one publish path. With
    /// `Producer-Id`/`-Epoch`/`-Seq` a retried batch lands once: the
    /// producer's state is stored in the same synchronous block as the
    /// batch it admits, so both land or neither does.
    pub(super) async fn stream_append(self: &Rc<Self>, run: &str, req: &mut Request) -> std::result::Result<Response, ApiError> {
        // Read the whole body before answering, whatever the answer.
        let body = read_json(req, self.config.max_batch_bytes).await;
        let header = |n: &str| req.headers().get(n).ok().flatten();
        let token = header("authorization").and_then(|h| h.strip_prefix("Bearer ").map(str::to_owned));
        let producer = Producer::from_headers(
            header(wire::PRODUCER_ID).as_deref(),
            header(wire::PRODUCER_EPOCH).as_deref(),
            header(wire::PRODUCER_SEQ).as_deref(),
        )
        .map_err(|m| ApiError::bad_request("invalid_producer", m))?;
        self.with_core(|c| c.authorize_publish(run, token.as_deref()))??;
        let batch = view::run_batch(body?)?;
        if batch.len() > self.config.max_batch_events {
            return Err(ApiError::new(413, "batch_too_large", format!("a batch holds at most {} events", self.config.max_batch_events)));
        }
        let draw = random_u64();
        let now = now_ms();
        let outcome = self.with_core(|c| {
            let gen = view::generation(c.store_mut(), || draw)?;
            let state: Option<ProducerState> = match &producer {
                Some(p) => c
                    .store()
                    .meta(&view::producer_key(run, &p.id))
                    .map_err(ApiError::storage)?
                    .and_then(|v| serde_json::from_str(&v).ok()),
                None => None,
            };
            match view::check_producer(run, producer.as_ref(), state.as_ref(), gen, c.last_seq(), now) {
                Err(refusal) => Ok(Err(refusal)),
                Ok(RunAppend::Duplicate(reply)) => Ok(Ok(reply)),
                Ok(RunAppend::Publish(admitted)) => {
                    let last = c.publish(run, batch, now)?;
                    if let Some((key, s)) = admitted {
                        let json = serde_json::to_string(&s).expect("state serialises");
                        c.store_mut().set_meta(&key, Some(&json)).map_err(ApiError::storage)?;
                    }
                    let closed = c.store().run(run).ok().flatten().is_some_and(|r| r.state != RunState::Running);
                    let mut reply = threadline_durable::streams::Reply::new(if producer.is_some() { 200 } else { 204 })
                        .header(wire::NEXT_OFFSET, view::offset(gen, last));
                    if let Some(p) = &producer {
                        reply = reply.header(wire::PRODUCER_EPOCH, p.epoch.to_string()).header(wire::PRODUCER_SEQ, p.seq.to_string());
                    }
                    if closed {
                        reply = reply.header(wire::CLOSED, "true");
                    }
                    Ok::<_, ApiError>(Ok(reply))
                }
            }
        })??;
        self.arm_flush_timer();
        match outcome {
            Ok(reply) => http::reply(reply).map_err(internal),
            Err(refusal) => {
                let (e, headers) = *refusal;
                let resp = http::error(&e).map_err(internal)?;
                for (k, v) in headers {
                    let _ = resp.headers().set(k, &v);
                }
                Ok(resp)
            }
        }
    }
}

/// The live part of an SSE view: after the first batch, the records each
/// publish stores, a keep-alive control event when quiet for the ping
/// interval; ends when the run closes, the thread goes away, or after
/// [`wire::SSE_RECYCLE_MS`].
fn sse_body(
    inner: Rc<Inner>,
    scope: Scope,
    pos: Position,
    rx: UnboundedReceiver<Bytes>,
    client_cursor: Option<String>,
    head: Bytes,
) -> impl futures_util::Stream<Item = Bytes> {
    let opened = now_ms();
    let ping = inner.config.ping_ms;
    stream::unfold((inner, scope, pos, rx, Some(head)), move |(inner, scope, mut pos, mut rx, head)| {
        let client_cursor = client_cursor.clone();
        async move {
            if let Some(h) = head {
                return Some((h, (inner, scope, pos, rx, None)));
            }
            if pos.closed || now_ms() - opened > wire::SSE_RECYCLE_MS {
                return None;
            }
            let jitter = wire::cursor_jitter(random_u64());
            loop {
                // A paged catch-up goes on without waiting.
                if pos.up_to_date {
                    let next = std::pin::pin!(rx.next());
                    match select(next, Delay::from(Duration::from_millis(ping))).await {
                        Either::Left((Some(_), _)) => while rx.try_recv().is_ok() {},
                        Either::Left((None, _)) => return None,
                        Either::Right(_) => {
                            let mut out = Vec::new();
                            let cursor = wire::response_cursor(client_cursor.as_deref(), now_ms(), jitter);
                            view::sse_batch(&[], pos, &cursor, &mut out);
                            return Some((Bytes::from(out), (inner, scope, pos, rx, None)));
                        }
                    }
                }
                let read = inner.with_core(|c| read_batch(c, &scope, pos.gen, pos.seq, None));
                let Ok(Ok((records, next))) = read else { return None };
                if records.is_empty() && !next.closed && next.seq == pos.seq {
                    pos = next;
                    continue;
                }
                pos = next;
                let mut out = Vec::new();
                let cursor = wire::response_cursor(client_cursor.as_deref(), now_ms(), jitter);
                view::sse_batch(&records, pos, &cursor, &mut out);
                return Some((Bytes::from(out), (inner, scope, pos, rx, None)));
            }
        }
    })
}
