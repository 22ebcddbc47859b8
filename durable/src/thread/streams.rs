//! The thread's log, and one run's events, read as Durable Streams
//! (`GET /v1/threads/:threadId`, `GET|POST /v1/runs/:runId`), in the shape
//! the standalone stream object uses: the core answers a read with a
//! [`ViewPlan`] (a reply now, or a wait), and drives a waiting read with
//! [`Thread::view_poll`] (long-poll) and [`Thread::view_step`] (SSE); the
//! shell only waits for the thread's publishes and the clock.
//!
//! Invariant (no gap, no duplicate): a live read registers for wakes in the
//! same synchronous block as its first read (`Thread::view_read` returns the
//! position, and the shell subscribes before it awaits anything), and every
//! later read starts strictly after the position the previous one reached.
//! A publish stores before it fans out, so a wake always finds the new
//! records stored.

use super::{Sink, Thread};
use crate::error::ApiError;
use crate::reply::Reply;
use crate::request::{self, BatchShape};
use crate::settings::Settings;
use crate::store::{Record, RunState, Store};
use crate::streams::producer::{Producer, ProducerState};
use crate::streams::view::{self, Position, RunAppend, View};
use crate::streams::wire;

/// Records one read of the thread log carries at most.
const PAGE: usize = 1000;

/// Which log a read follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    Thread,
    Run(String),
}

/// A live read's state between turns.
#[derive(Clone, Debug)]
pub struct ViewCursor {
    pub scope: Scope,
    pub pos: Position,
    /// The client's `cursor` parameter (echoed into response cursors).
    pub client_cursor: Option<String>,
    /// When the read began (SSE connections are recycled).
    pub opened: i64,
}

/// What a Durable Streams read does.
#[derive(Debug)]
pub enum ViewPlan {
    /// Answer now.
    Reply(Reply),
    /// A long-poll with nothing to return yet: wait for a publish or
    /// `STREAMS_LONG_POLL_MS`, then [`Thread::view_poll`].
    Wait(ViewCursor),
    /// An SSE read: send the `first` turn, then drive it with
    /// [`Thread::view_step`].
    Sse { first: ViewTurn, cursor: ViewCursor },
}

/// One turn of an SSE view: bytes to send, then wait for a wake (`wait`)
/// or end (`done`).
#[derive(Debug, Default)]
pub struct ViewTurn {
    pub bytes: Vec<u8>,
    pub wait: bool,
    pub done: bool,
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// The records after `after` and the position they leave the reader at.
    fn view_batch(
        &self,
        scope: &Scope,
        gen: u64,
        after: u64,
        tail: Option<usize>,
    ) -> Result<(Vec<Record>, Position), ApiError> {
        let last = self.last_seq;
        match scope {
            Scope::Thread => {
                let records = self.store.read_range(after, last, PAGE).map_err(ApiError::storage)?;
                let seq = records.last().map_or(after, |r| r.seq);
                Ok((records, Position { gen, seq, up_to_date: seq >= last, closed: false }))
            }
            Scope::Run(run) => {
                let record = self.store.run(run).map_err(ApiError::storage)?.ok_or_else(ApiError::run_not_found)?;
                // `tail=N` is a bounded diagnostic read of the run's suffix;
                // every other read pages through the run's index after `after`.
                let (records, up_to_date) = match tail {
                    Some(n) => {
                        let mut all: Vec<Record> = self
                            .store
                            .run_records(run)
                            .map_err(ApiError::storage)?
                            .into_iter()
                            .filter(|r| r.seq > after)
                            .collect();
                        (all.split_off(all.len().saturating_sub(n)), true)
                    }
                    None => {
                        let page = self.store.run_range(run, after, PAGE).map_err(ApiError::storage)?;
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

    /// `GET /v1/threads/:threadId` and `GET /v1/runs/:runId`: a catch-up
    /// answer, the `view=history` snapshot, or the start of a live read.
    /// `random`: a fresh random number (a new log's generation, jitter).
    pub fn view_read(
        &mut self,
        thread: &str,
        run: Option<&str>,
        query: &[(String, String)],
        random: u64,
        settings: &Settings,
        now: i64,
    ) -> Result<ViewPlan, ApiError> {
        let q = |name: &str| request::query_first(query, name);
        let offsets = request::query_all(query, "offset");
        let scope = run.map_or(Scope::Thread, |r| Scope::Run(r.to_owned()));
        let tail = view::tail_param(q("tail").as_deref())?;
        let which = match scope {
            Scope::Thread if tail.is_some() => return Err(ApiError::tail_not_supported()),
            Scope::Thread => View::parse(q("view").as_deref(), !offsets.is_empty())?,
            Scope::Run(_) if q("view").is_some() => return Err(ApiError::invalid_view("a run's stream has no views")),
            Scope::Run(_) => View::Log,
        };
        let live = match q("live").as_deref() {
            None => None,
            Some(l @ ("long-poll" | "sse")) if !offsets.is_empty() => Some(l.to_owned()),
            Some("long-poll" | "sse") => {
                return Err(ApiError::offset_required("a live read resumes after an offset: pass ?offset="))
            }
            Some(_) => return Err(ApiError::invalid_live("`live` is `long-poll` or `sse`")),
        };
        if which == View::History && live.is_some() {
            return Err(ApiError::invalid_live("view=history is one snapshot; follow it with view=updates"));
        }
        let offsets: Vec<&str> = offsets.iter().map(String::as_str).collect();
        let gen = view::generation(&mut self.store, || random)?;
        let last = self.last_seq;
        let after = view::resolve(&offsets, gen, last)?.unwrap_or(0);
        if which == View::History {
            let mut body = self.messages(thread, 1000, 0)?;
            body["offset"] = view::offset(gen, last).into();
            let reply = Reply::json(200, &body)
                .header(wire::NEXT_OFFSET, view::offset(gen, last))
                .header(wire::UP_TO_DATE, "true");
            return Ok(ViewPlan::Reply(reply));
        }
        let (records, pos) = self.view_batch(&scope, gen, after, tail)?;
        let Some(live) = live else { return Ok(ViewPlan::Reply(view::batch_reply(&records, pos, None))) };
        self.make_room(settings.limits.max_subscribers)?;
        let cursor = ViewCursor { scope, pos, client_cursor: q("cursor"), opened: now };
        let jitter = wire::cursor_jitter(random);
        let response_cursor = wire::response_cursor(cursor.client_cursor.as_deref(), now, jitter);
        if live == "long-poll" {
            if !records.is_empty() || pos.closed || !pos.up_to_date {
                return Ok(ViewPlan::Reply(view::batch_reply(&records, pos, Some(response_cursor))));
            }
            return Ok(ViewPlan::Wait(cursor));
        }
        let mut bytes = Vec::new();
        view::sse_batch(&records, pos, &response_cursor, &mut bytes);
        let first = ViewTurn { bytes, wait: pos.up_to_date, done: pos.closed };
        Ok(ViewPlan::Sse { first, cursor })
    }

    /// A long-poll after a wake: the records that arrived (or the run's
    /// close), or `None` to wait on (a delta wakes it but stores nothing).
    pub fn view_poll(&self, c: &ViewCursor, jitter: u64, now: i64) -> Result<Option<Reply>, ApiError> {
        let (records, next) = self.view_batch(&c.scope, c.pos.gen, c.pos.seq, None)?;
        if records.is_empty() && !next.closed {
            return Ok(None);
        }
        let cursor = wire::response_cursor(c.client_cursor.as_deref(), now, jitter);
        Ok(Some(view::batch_reply(&records, next, Some(cursor))))
    }

    /// A long-poll that waited its full time: 204 at the same position.
    pub fn view_timeout(c: &ViewCursor, jitter: u64, now: i64) -> Reply {
        view::timeout_reply(c.pos, wire::response_cursor(c.client_cursor.as_deref(), now, jitter))
    }

    /// One turn of an SSE view, after the previous turn's wait (`woke`: a
    /// publish woke it, read what is new; otherwise the keep-alive interval
    /// passed: a control event) or straight away when it did not ask to
    /// wait (a paged catch-up goes on). The read ends with the turn that
    /// reports the run closed, or after [`wire::SSE_RECYCLE_MS`] (clients
    /// resume from their offset).
    pub fn view_step(&self, c: &mut ViewCursor, woke: bool, jitter: u64, now: i64) -> ViewTurn {
        if c.pos.closed || now - c.opened > wire::SSE_RECYCLE_MS {
            return ViewTurn { done: true, ..ViewTurn::default() };
        }
        let cursor = wire::response_cursor(c.client_cursor.as_deref(), now, jitter);
        let mut bytes = Vec::new();
        if !woke && c.pos.up_to_date {
            view::sse_batch(&[], c.pos, &cursor, &mut bytes);
            return ViewTurn { bytes, wait: true, done: false };
        }
        let Ok((records, next)) = self.view_batch(&c.scope, c.pos.gen, c.pos.seq, None) else {
            return ViewTurn { done: true, ..ViewTurn::default() };
        };
        if records.is_empty() && !next.closed && next.seq == c.pos.seq {
            c.pos = next;
            return ViewTurn { wait: true, ..ViewTurn::default() };
        }
        c.pos = next;
        view::sse_batch(&records, c.pos, &cursor, &mut bytes);
        ViewTurn { bytes, wait: c.pos.up_to_date, done: c.pos.closed }
    }

    /// `POST /v1/runs/:runId`: an external agent appends events to its run
    /// with its publish token, through the thread's one publish path. With
    /// `Producer-Id`/`-Epoch`/`-Seq` a retried batch lands once: the
    /// producer's state is stored in the same synchronous block as the
    /// batch it admits, so both land or neither does.
    pub fn view_append(
        &mut self,
        run: &str,
        header: &dyn Fn(&str) -> Option<String>,
        body: &[u8],
        random: u64,
        settings: &Settings,
        now: i64,
    ) -> Result<Reply, ApiError> {
        let producer = Producer::from_headers(
            header(wire::PRODUCER_ID).as_deref(),
            header(wire::PRODUCER_EPOCH).as_deref(),
            header(wire::PRODUCER_SEQ).as_deref(),
        )
        .map_err(ApiError::invalid_producer)?;
        self.authorize_publish(run, request::bearer(header("authorization").as_deref()))?;
        let limits = &settings.limits;
        let batch =
            request::batch(request::json(body, limits.max_batch_bytes)?, BatchShape::Stream, limits.max_batch_events)?;
        let gen = view::generation(&mut self.store, || random)?;
        let state: Option<ProducerState> = match &producer {
            Some(p) => self
                .store
                .meta(&view::producer_key(run, &p.id))
                .map_err(ApiError::storage)?
                .and_then(|v| serde_json::from_str(&v).ok()),
            None => None,
        };
        match view::check_producer(run, producer.as_ref(), state.as_ref(), gen, self.last_seq, now) {
            Err(refusal) => {
                let (e, headers) = *refusal;
                let mut reply = Reply::error(&e);
                for (k, v) in headers {
                    reply.set(k, v);
                }
                Ok(reply)
            }
            Ok(RunAppend::Duplicate(reply)) => Ok(reply),
            Ok(RunAppend::Publish(admitted)) => {
                let last = self.publish(run, batch, now)?;
                if let Some((key, s)) = admitted {
                    let json = serde_json::to_string(&s).expect("state serialises");
                    self.store.set_meta(&key, Some(&json)).map_err(ApiError::storage)?;
                }
                let closed = self.store.run(run).ok().flatten().is_some_and(|r| r.state != RunState::Running);
                let mut reply = Reply::new(if producer.is_some() { 200 } else { 204 })
                    .header(wire::NEXT_OFFSET, view::offset(gen, last));
                if let Some(p) = &producer {
                    reply = reply
                        .header(wire::PRODUCER_EPOCH, p.epoch.to_string())
                        .header(wire::PRODUCER_SEQ, p.seq.to_string());
                }
                if closed {
                    reply.set(wire::CLOSED, "true");
                }
                Ok(reply)
            }
        }
    }
}
