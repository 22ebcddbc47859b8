//! The inbox: every thread of the caller with its live state, kept by their
//! directory (`directory::inbox`), and read marks.
//!
//! - `GET /v1/inbox`: a page of rows as JSON (`?limit`, `?cursor`,
//!   `?state=idle|running|waiting|unread`), newest change first; with
//!   `Accept: text/event-stream`, the changes as SSE (`id:` each change's
//!   seq, `event: thread`, the row as data; `Last-Event-ID` resumes after
//!   it, none replays every change kept); with `offset` (and `live=sse` or
//!   `live=long-poll`), a JSON-mode Durable Stream of the same changes.
//! - `POST /instance-ai/threads/:threadId/read {eventId}`: the caller has
//!   read the thread up to `eventId`; the row's `unread` says whether a
//!   run's end or a request for them lies after it.
//!
//! Streams are relayed: the directory object accepts a socket per reader
//! (so it sleeps between changes) and the Worker frames what it sends
//! (`stream`). Each caller reads their own directory only: a thread of
//! another's is not in it (404).

mod stream;

use super::{AtWorker, BodyKind, Gate, Target};
use crate::access::{Access, Caller};
use crate::directory::inbox::{self, Page};
use crate::directory::Op;
use crate::effect::Effect;
use crate::feed::{Plan, Relay};
use crate::input::{self, Head};
use crate::protocols::durable_streams::stream::{LongPoll, SseView};
use crate::settings::Settings;
use crate::storage::store::Store;
use crate::streams::offset::{Offset, Start};
use crate::thread::{Answer, Call, Sink, Thread};
use crate::wire::error::ApiError;
use crate::wire::reply::Reply;
use crate::wire::route::Spec;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An inbox route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "route", rename_all = "camelCase")]
pub enum Route {
    /// `GET /v1/inbox`.
    Inbox,
    /// `POST /instance-ai/threads/:threadId/read`.
    #[serde(rename_all = "camelCase")]
    Read {
        thread: String,
        #[serde(default)]
        event_id: u64,
    },
    /// `POST /debug/inbox/outage?ms=N` (with `DEBUG_ROUTES`): the caller's
    /// directory refuses their threads' reports for `ms`.
    Outage,
    /// `GET /debug/inbox/stats` (with `DEBUG_ROUTES`): the caller's
    /// directory's instance and readers.
    Stats,
}

use Route as R;

impl super::Protocol for Route {
    const ROUTES: &'static [Spec<Route>] = &[
        Spec { path: "/v1/inbox", methods: &["GET"], build: |_, _| Ok(R::Inbox) },
        Spec {
            path: "/instance-ai/threads/:threadId/read",
            methods: &["POST"],
            build: |p, _| Ok(R::Read { thread: p.thread("threadId")?, event_id: 0 }),
        },
        Spec { path: "/debug/inbox/outage", methods: &["POST"], build: |_, _| Ok(R::Outage) },
        Spec { path: "/debug/inbox/stats", methods: &["GET"], build: |_, _| Ok(R::Stats) },
    ];

    fn target(&self) -> Target {
        Target::Worker
    }

    fn thread(&self) -> &str {
        match self {
            R::Inbox | R::Outage | R::Stats => "",
            R::Read { thread, .. } => thread,
        }
    }

    fn access(&self) -> Access {
        Access::Owner
    }

    fn body(&self) -> BodyKind {
        match self {
            R::Inbox | R::Outage | R::Stats => BodyKind::None,
            R::Read { .. } => BodyKind::Json,
        }
    }

    /// A read mark's body: `{eventId}`, a whole number.
    fn address(&mut self, body: &Value, _new_id: &dyn Fn(&str) -> String) -> Result<(), ApiError> {
        if let R::Read { event_id, .. } = self {
            *event_id = body
                .get("eventId")
                .and_then(Value::as_u64)
                .ok_or_else(|| ApiError::invalid_body("`eventId` must be a whole number: the last event read"))?;
        }
        Ok(())
    }

    fn serve<S: Store, K: Sink>(
        &self,
        _t: &mut Thread<S, K>,
        _call: &Call,
        _gate: &Gate,
        _settings: &Settings,
        _now: i64,
        _effects: &mut Vec<Effect>,
    ) -> Result<Answer, ApiError> {
        Err(ApiError::not_found_route("the inbox is answered by the caller's directory"))
    }

    fn at_worker(&self, caller: &Caller, head: &Head, settings: &Settings, now: i64) -> Result<AtWorker, ApiError> {
        if caller.id().is_none() {
            return Err(ApiError::unauthorized("the inbox is kept per signed-in caller".to_owned()));
        }
        match self {
            R::Outage | R::Stats if !settings.debug_routes => Err(ApiError::debug_routes_off()),
            R::Stats => Ok(AtWorker::Directory(Op::Stats { instance: None, readers: 0 })),
            R::Outage => {
                let ms = input::query_first(&input::query_pairs(head.query), "ms")
                    .and_then(|v| v.parse::<i64>().ok())
                    .filter(|ms| (0..=600_000).contains(ms))
                    .ok_or_else(|| ApiError::invalid_query("`ms` must be a whole number from 0 to 600000"))?;
                Ok(AtWorker::Directory(Op::Outage { until: now + ms }))
            }
            R::Read { thread, event_id } => {
                Ok(AtWorker::Directory(Op::Read { thread_id: thread.clone(), event_id: *event_id }))
            }
            R::Inbox => inbox_read(head, now),
        }
    }

    fn directory_reply(&self, body: &[u8]) -> Result<Reply, ApiError> {
        if body.is_empty() {
            return Ok(Reply::new(204));
        }
        if let Ok(read) = serde_json::from_slice::<stream::CatchUp>(body) {
            return Ok(stream::catch_up(&read));
        }
        let answer: Value = serde_json::from_slice(body).map_err(ApiError::unavailable)?;
        Ok(Reply::json(200, &answer))
    }
}

/// How `GET /v1/inbox` is read: a Durable Stream from an `offset`, SSE
/// (`Accept: text/event-stream`), else a page of rows.
fn inbox_read(head: &Head, now: i64) -> Result<AtWorker, ApiError> {
    let query = input::query_pairs(head.query);
    let offsets: Vec<&str> = query.iter().filter(|(k, _)| k == "offset").map(|(_, v)| v.as_str()).collect();
    let live = input::query_first(&query, "live");
    let cursor = input::query_first(&query, "cursor");
    if !offsets.is_empty() || live.is_some() {
        let after = match Start::from_query(&offsets).map_err(|e| ApiError::invalid_offset(e.message()))? {
            None | Some(Start::Beginning) => Some(0),
            Some(Start::Now) => None,
            Some(Start::After(o)) if o.hi != inbox::GENERATION => return Err(ApiError::stale_offset()),
            Some(Start::After(o)) => Some(o.lo),
        };
        let plan = match live.as_deref() {
            None => {
                let after = after.unwrap_or(u64::MAX);
                return Ok(AtWorker::Directory(Op::Changes { after, limit: inbox::REPLAY_PAGE }));
            }
            Some("sse") => Plan::new(Box::new(Relay::new(SseView::new(None, cursor, now))), crate::wire::sse::headers()),
            Some("long-poll") => Plan::new(Box::new(Relay::new(LongPoll::new(None, cursor))), Vec::new()).one_shot(),
            Some(_) => return Err(ApiError::invalid_query("`live` is `sse` or `long-poll`")),
        };
        return Ok(AtWorker::Follow { op: Op::Follow { after }, plan });
    }
    let sse = (head.header)("accept").is_some_and(|a| a.contains("text/event-stream"));
    if sse {
        let after = match (head.header)("last-event-id") {
            None => 0,
            Some(id) => id.trim().parse::<u64>().map_err(|_| {
                ApiError::invalid_query("`Last-Event-ID` is not an id this stream sent (a change's number)")
            })?,
        };
        let plan = Plan::new(Box::new(Relay::new(stream::Changes)), crate::wire::sse::headers());
        return Ok(AtWorker::Follow { op: Op::Follow { after: Some(after) }, plan });
    }
    Ok(AtWorker::Directory(Op::Inbox { page: Page::from_query(&query)? }))
}

/// The offset after change `seq`.
pub fn offset(seq: u64) -> String {
    Offset::new(inbox::GENERATION, seq).to_string()
}
