//! Durable Streams as threadline's thread views: a thread's log and one
//! run's events read as JSON-mode streams (`/v1/threads/:id`,
//! `/v1/runs/:runId`: [`views`], their live framers in [`stream`]), and the
//! route of the standalone streams (`/v1/stream/*`), which are `streams`'
//! (one object per stream). Offsets, headers, frames and producers are
//! `streams`' too, so both agree on them. A thread read with `view=` is
//! Flue's conversation view (`protocols::flue`).

pub mod stream;
pub mod views;


pub mod server;
use super::{AtWorker, BodyKind, Gate, Target};
use crate::access::{Access, Caller};
use crate::effect::Effect;
use crate::wire::error::ApiError;
use crate::feed::{Plan, Relay};
use crate::input::{self, Head};
use crate::wire::route::Spec;
use crate::settings::{Settings, StreamsAuth};
use crate::wire::reply::Reply;
use crate::storage::store::Store;
use crate::thread::{Answer, Call, Sink, Thread};
use serde::{Deserialize, Serialize};

/// A Durable Streams route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "route", rename_all = "camelCase")]
pub enum Route {
    /// `GET /v1/threads/:threadId`: the thread's log as a JSON-mode stream
    /// (`?offset`, `live=long-poll|sse`, `view=history|updates`).
    Thread { thread: String },
    /// `GET` (read) or `POST` (an agent's idempotent append)
    /// `/v1/runs/:runId`: one run's events (the thread is in the run id).
    Run { thread: String, run: String, append: bool },
    /// `/v1/stream/*`: a standalone stream, one object per path.
    Stream { name: String },
}

use Route as R;

impl super::Protocol for Route {
    const ROUTES: &'static [Spec<Route>] = &[
        Spec { path: "/v1/threads/:threadId", methods: &["GET"], build: |p, _| Ok(R::Thread { thread: p.thread("threadId")? }) },
        Spec {
            path: "/v1/runs/:runId",
            methods: &["GET", "POST"],
            build: |p, method| {
                let run = crate::wire::ids::run_id(p.raw("runId"))?;
                let thread = crate::wire::ids::thread_of(&run).ok_or_else(ApiError::run_not_found)?.to_owned();
                Ok(R::Run { thread, run, append: method == "POST" })
            },
        },
        Spec {
            path: "/v1/stream/*",
            methods: &["GET", "PUT", "POST", "DELETE", "OPTIONS"],
            build: |p, _| Ok(R::Stream { name: format!("/v1/stream/{}", p.raw("*")) }),
        },
    ];

    fn target(&self) -> Target {
        match self {
            R::Stream { .. } => Target::Worker,
            _ => Target::Thread,
        }
    }

    fn thread(&self) -> &str {
        match self {
            R::Thread { thread } | R::Run { thread, .. } => thread,
            R::Stream { .. } => "",
        }
    }

    fn access(&self) -> Access {
        match self {
            R::Run { append: true, .. } => Access::Publish,
            R::Thread { .. } | R::Run { .. } => Access::Reader,
            // Its callers are its own (`identify`).
            R::Stream { .. } => Access::Owner,
        }
    }

    fn body(&self) -> BodyKind {
        match self {
            R::Run { append: true, .. } => BodyKind::Batch,
            _ => BodyKind::None,
        }
    }

    fn plan(&self, query: &[(String, String)], _: Option<&str>, now: i64) -> Result<Option<Plan>, ApiError> {
        let run = match self {
            R::Thread { .. } => None,
            R::Run { run, append: false, .. } => Some(run.clone()),
            _ => return Ok(None),
        };
        let cursor = input::query_first(query, "cursor");
        Ok(match input::query_first(query, "live").as_deref() {
            Some("sse") => {
                Some(Plan::new(Box::new(Relay::new(stream::SseView::new(run, cursor, now))), crate::wire::sse::headers()))
            }
            Some("long-poll") => Some(Plan::new(Box::new(Relay::new(stream::LongPoll::new(run, cursor))), Vec::new()).one_shot()),
            _ => None,
        })
    }

    /// Who may use `/v1/stream/*` (`STREAMS_AUTH`): nobody when it is unset
    /// (404, as for any route that does not exist), anyone with `none`, and
    /// with `jwt` authenticated callers holding `STREAMS_ROLE` (401 without
    /// a valid token, 403 `role_required` without the role). A CORS
    /// preflight carries no credentials: it is answered wherever the route
    /// is on.
    fn identify(&self, head: &Head, settings: &Settings, now: i64) -> Option<Result<Caller, ApiError>> {
        let R::Stream { .. } = self else { return None };
        Some(match &settings.streams_auth {
            StreamsAuth::Off => {
                Err(ApiError::not_found_route("no route for /v1/stream/*: the Durable Streams server is off (STREAMS_AUTH)"))
            }
            StreamsAuth::Invalid(e) => Err(ApiError::misconfigured(e.clone())),
            _ if head.method == "OPTIONS" => Ok(Caller::Nobody),
            StreamsAuth::Open => Ok(Caller::Nobody),
            StreamsAuth::Role(role) => settings.auth.authenticate((head.header)("authorization").as_deref(), now).and_then(|actor| {
                if actor.roles.iter().any(|r| r == role) {
                    Ok(Caller::actor(actor))
                } else {
                    Err(ApiError::role_required(role))
                }
            }),
        })
    }

    /// A standalone stream's answers carry the protocol's headers (its CORS
    /// is open to any origin: its browser clients read streams cross-origin,
    /// and nothing here rides on cookies).
    fn own_headers(&self) -> Option<&'static [(&'static str, &'static str)]> {
        matches!(self, R::Stream { .. }).then_some(crate::streams::wire::COMMON_HEADERS)
    }

    fn at_worker(&self, _: &Caller, head: &Head, settings: &Settings, _: i64) -> Result<AtWorker, ApiError> {
        let R::Stream { name } = self else { return Err(ApiError::not_found_route("this route is answered on its thread")) };
        if head.method == "OPTIONS" {
            return Ok(AtWorker::Reply(Reply::new(204)));
        }
        let limit = crate::protocols::durable_streams::server::MAX_BODY;
        if head.declared_length().is_some_and(|n| n > limit as u64) {
            return Ok(AtWorker::Reply(Reply::text(413, &format!("the body is over {limit} bytes"))));
        }
        let query = input::query_pairs(head.query);
        let if_none_match = (head.header)("if-none-match");
        let live = crate::protocols::durable_streams::server::feeds::plan(head.method, name, &query, if_none_match.as_deref(), settings.streams_long_poll_ms);
        let context = crate::wire::forward::encode(&crate::protocols::durable_streams::server::exchange::StreamOp::Client { path: name.clone() });
        Ok(AtWorker::Stream { name: name.clone(), context, live })
    }

    fn serve<S: Store, K: Sink>(
        &self,
        t: &mut Thread<S, K>,
        call: &Call,
        _: &Gate,
        settings: &Settings,
        now: i64,
        _: &mut Vec<Effect>,
    ) -> Result<Answer, ApiError> {
        match self {
            R::Thread { .. } => {
                let answer = views::read(t, None, call.query, call.random, settings)?;
                // A fork's log goes on from its source's at the fork: said as
                // a forked stream says it.
                Ok(match (answer, t.conversation().forked_from()?) {
                    (Answer::Reply(r), Some(from)) => Answer::Reply(
                        r.header(crate::streams::wire::FORKED_FROM, format!("/v1/threads/{}", from.thread_id))
                            .header(crate::streams::wire::FORK_OFFSET, from.offset),
                    ),
                    (answer, _) => answer,
                })
            }
            R::Run { run, append: false, .. } => views::read(t, Some(run), call.query, call.random, settings),
            R::Run { run, append: true, .. } => {
                views::append(t, run, call.header, call.body, call.random, settings, now).map(Answer::Reply)
            }
            R::Stream { .. } => Err(ApiError::not_found_route("a standalone stream is answered by its own object")),
        }
    }
}
