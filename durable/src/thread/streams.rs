//! The thread's log, and one run's events, read as Durable Streams
//! (`GET /v1/threads/:threadId`, `GET|POST /v1/runs/:runId`). A catch-up
//! read (and `view=history`) is answered here; a live read (`live=sse`,
//! `live=long-poll`) becomes a subscriber that follows durable records
//! after the offset, which the Worker relays in the protocol's frames
//! (`feed::views`), so the object holds no waiting request.

use super::service::Answer;
use super::{Follow, Sink, Thread};
use crate::error::ApiError;
use crate::protocols::durable_streams::producer::{Producer, ProducerState};
use crate::protocols::durable_streams::views::{self as view, Position, RunAppend, View};
use crate::protocols::durable_streams::wire;
use crate::reply::Reply;
use crate::request::{self, BatchShape};
use crate::settings::Settings;
use crate::store::{Record, RunState, Store};

/// Records one read of the thread log carries at most.
const PAGE: usize = 1000;

/// Which log a read follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    Thread,
    Run(String),
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
    /// answer, the `view=history` snapshot, or a live read's subscription.
    /// `random`: a fresh random number (a new log's generation).
    pub(super) fn view_read(
        &mut self,
        thread: &str,
        run: Option<&str>,
        query: &[(String, String)],
        random: u64,
        settings: &Settings,
    ) -> Result<Answer, ApiError> {
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
            None => false,
            Some("long-poll" | "sse") if !offsets.is_empty() => true,
            Some("long-poll" | "sse") => {
                return Err(ApiError::offset_required("a live read resumes after an offset: pass ?offset="))
            }
            Some(_) => return Err(ApiError::invalid_live("`live` is `long-poll` or `sse`")),
        };
        if which == View::History && live {
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
            return Ok(Answer::Reply(reply));
        }
        if let Scope::Run(run) = &scope {
            self.store.run(run).map_err(ApiError::storage)?.ok_or_else(ApiError::run_not_found)?;
        }
        if live {
            self.make_room(settings.limits.max_subscribers)?;
            let follow = Follow { run: run.map(str::to_owned), durable: true };
            return Ok(Answer::Follow { follow, after });
        }
        let (records, pos) = self.view_batch(&scope, gen, after, tail)?;
        Ok(Answer::Reply(view::batch_reply(&records, pos, None)))
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
