//! n8n Instance AI's streaming protocol (n8n's streaming protocol,
//! `docs/protocols/n8n-instance-ai-streaming-protocol.md`), the primary one: its routes at the
//! paths it names. The log's events are its events (`event`), so its stream
//! is the log itself ([`stream::Events`]) and its history is the thread's
//! messages with their agent trees (`Thread::messages`).

pub mod history;
pub mod stream;

use crate::access::{Access, Caller};
use crate::directory::Op;
use super::{AtWorker, Gate};
use crate::auth;
use crate::effect::Effect;
use crate::wire::error::ApiError;
use crate::feed::{Plan, Relay};
use crate::input::{self, BatchShape, Head};
use crate::wire::reply::Reply;
use crate::wire::route::Spec;
use crate::settings::Settings;
use crate::wire::sse;
use crate::storage::store::Store;
use crate::log::queued::QueuePatch;
use crate::thread::fork::Window;
use crate::thread::{Answer, Call, Follow, Given, QueueEdit, Sender, Sent, Sink, Thread};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// An Instance AI route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "route", rename_all = "camelCase")]
pub enum Route {
    /// `POST /instance-ai/chat/:threadId`
    Chat { thread: String },
    /// `POST /instance-ai/chat/:threadId/cancel`
    Cancel { thread: String },
    /// `GET /instance-ai/events/:threadId`
    Events { thread: String },
    /// `POST /instance-ai/threads/:threadId/runs/:runId/events`
    Publish { thread: String, run: String },
    /// `GET /instance-ai/threads/:threadId/status`
    Status { thread: String },
    /// `GET /instance-ai/threads/:threadId/messages`
    Messages { thread: String },
    /// `GET /instance-ai/threads/:threadId/usage`: what its runs used, per model
    Usage { thread: String },
    /// `GET /instance-ai/usage`: what the caller's turns used, per model
    /// (their directory; `?days=`, 1 to 31, default 30)
    ActorUsage,
    /// `GET /instance-ai/threads/:threadId/debug/stats` (only with `DEBUG_ROUTES`)
    Stats { thread: String },
    /// `POST /instance-ai/confirm/:requestId` (the thread is in the request id)
    Confirm { thread: String, request: String },
    /// `GET /instance-ai/threads/:threadId/queue`
    QueueList { thread: String },
    /// `POST /instance-ai/threads/:threadId/stream-token`
    StreamToken { thread: String },
    /// `DELETE /instance-ai/threads/:threadId`
    Delete { thread: String },
    /// `POST /instance-ai/threads/:threadId/queue/pause` and `/resume`
    QueuePause { thread: String, paused: bool },
    /// `PATCH` (edit `{message}`) or `DELETE` `/instance-ai/threads/:threadId/queue/:messageId`
    QueueItem { thread: String, message: String, delete: bool },
    /// `POST /instance-ai/threads/:threadId/queue/:messageId/move` `{position}`
    QueueMove { thread: String, message: String },
    /// `POST /instance-ai/threads/:threadId/branch` `{messageId}`: the
    /// active path through that message or answer
    Branch { thread: String },
    /// `POST /instance-ai/threads/:threadId/fork` `{messageId, threadId?}`:
    /// a new thread sharing this one's history up to that message
    Fork { thread: String },
    /// `POST /instance-ai/threads/:threadId/compact`: the conversation
    /// folded into a summary now
    Compact { thread: String },
    /// `GET` (list) or `POST` (add `{message, cron | at | everySeconds}`)
    /// `/instance-ai/threads/:threadId/schedules`
    Schedules { thread: String, add: bool },
    /// `DELETE /instance-ai/threads/:threadId/schedules/:scheduleId`
    Unschedule { thread: String, schedule: String },
    /// A fork's new thread takes the source's offer (an object's own call:
    /// no path reaches it).
    Adopt { thread: String },
    /// Turns `start..end` of a source's path through `run`, which a fork
    /// of it shares (an object's own call: no path reaches it).
    SharedTurns { thread: String, run: String, start: usize, end: usize },
}

use Route as R;

impl super::Protocol for Route {
    const ROUTES: &'static [Spec<Route>] = &[
        Spec { path: "/instance-ai/chat/:threadId", methods: &["POST"], build: |p, _| Ok(R::Chat { thread: p.thread("threadId")? }) },
        Spec {
            path: "/instance-ai/chat/:threadId/cancel",
            methods: &["POST"],
            build: |p, _| Ok(R::Cancel { thread: p.thread("threadId")? }),
        },
        Spec { path: "/instance-ai/events/:threadId", methods: &["GET"], build: |p, _| Ok(R::Events { thread: p.thread("threadId")? }) },
        Spec {
            path: "/instance-ai/threads/:threadId/runs/:runId/events",
            methods: &["POST"],
            build: |p, _| Ok(R::Publish { thread: p.thread("threadId")?, run: crate::wire::ids::run_id(p.raw("runId"))? }),
        },
        Spec {
            path: "/instance-ai/threads/:threadId/status",
            methods: &["GET"],
            build: |p, _| Ok(R::Status { thread: p.thread("threadId")? }),
        },
        Spec {
            path: "/instance-ai/threads/:threadId/messages",
            methods: &["GET"],
            build: |p, _| Ok(R::Messages { thread: p.thread("threadId")? }),
        },
        Spec {
            path: "/instance-ai/threads/:threadId/usage",
            methods: &["GET"],
            build: |p, _| Ok(R::Usage { thread: p.thread("threadId")? }),
        },
        Spec { path: "/instance-ai/usage", methods: &["GET"], build: |_, _| Ok(R::ActorUsage) },
        Spec {
            path: "/instance-ai/threads/:threadId/debug/stats",
            methods: &["GET"],
            build: |p, _| Ok(R::Stats { thread: p.thread("threadId")? }),
        },
        Spec {
            path: "/instance-ai/confirm/:requestId",
            methods: &["POST"],
            build: |p, _| {
                let (thread, request) = p.scoped("requestId", ApiError::confirmation_not_found)?;
                Ok(R::Confirm { thread, request })
            },
        },
        Spec {
            path: "/instance-ai/threads/:threadId/schedules",
            methods: &["GET", "POST"],
            build: |p, m| Ok(R::Schedules { thread: p.thread("threadId")?, add: m == "POST" }),
        },
        Spec {
            path: "/instance-ai/threads/:threadId/schedules/:scheduleId",
            methods: &["DELETE"],
            build: |p, _| {
                let schedule = crate::wire::ids::id(p.raw("scheduleId")).map_err(|_| ApiError::schedule_not_found())?;
                Ok(R::Unschedule { thread: p.thread("threadId")?, schedule })
            },
        },
        Spec {
            path: "/instance-ai/threads/:threadId/queue",
            methods: &["GET"],
            build: |p, _| Ok(R::QueueList { thread: p.thread("threadId")? }),
        },
        Spec {
            path: "/instance-ai/threads/:threadId/stream-token",
            methods: &["POST"],
            build: |p, _| Ok(R::StreamToken { thread: p.thread("threadId")? }),
        },
        Spec { path: "/instance-ai/threads/:threadId", methods: &["DELETE"], build: |p, _| Ok(R::Delete { thread: p.thread("threadId")? }) },
        Spec {
            path: "/instance-ai/threads/:threadId/queue/pause",
            methods: &["POST"],
            build: |p, _| Ok(R::QueuePause { thread: p.thread("threadId")?, paused: true }),
        },
        Spec {
            path: "/instance-ai/threads/:threadId/queue/resume",
            methods: &["POST"],
            build: |p, _| Ok(R::QueuePause { thread: p.thread("threadId")?, paused: false }),
        },
        Spec {
            path: "/instance-ai/threads/:threadId/queue/:messageId",
            methods: &["PATCH", "DELETE"],
            build: |p, method| {
                let (thread, message) = (p.thread("threadId")?, crate::wire::ids::run_id(p.raw("messageId"))?);
                Ok(R::QueueItem { thread, message, delete: method == "DELETE" })
            },
        },
        Spec {
            path: "/instance-ai/threads/:threadId/queue/:messageId/move",
            methods: &["POST"],
            build: |p, _| {
                Ok(R::QueueMove { thread: p.thread("threadId")?, message: crate::wire::ids::run_id(p.raw("messageId"))? })
            },
        },
        Spec {
            path: "/instance-ai/threads/:threadId/branch",
            methods: &["POST"],
            build: |p, _| Ok(R::Branch { thread: p.thread("threadId")? }),
        },
        Spec {
            path: "/instance-ai/threads/:threadId/fork",
            methods: &["POST"],
            build: |p, _| Ok(R::Fork { thread: p.thread("threadId")? }),
        },
        Spec {
            path: "/instance-ai/threads/:threadId/compact",
            methods: &["POST"],
            build: |p, _| Ok(R::Compact { thread: p.thread("threadId")? }),
        },
    ];

    fn target(&self) -> super::Target {
        match self {
            R::ActorUsage => super::Target::Worker,
            _ => super::Target::Thread,
        }
    }

    fn thread(&self) -> &str {
        match self {
            R::ActorUsage => "",
            R::Chat { thread }
            | R::Cancel { thread }
            | R::Events { thread }
            | R::Publish { thread, .. }
            | R::Status { thread }
            | R::Messages { thread }
            | R::Usage { thread }
            | R::Stats { thread }
            | R::Confirm { thread, .. }
            | R::QueueList { thread }
            | R::StreamToken { thread }
            | R::Delete { thread }
            | R::QueuePause { thread, .. }
            | R::QueueItem { thread, .. }
            | R::QueueMove { thread, .. }
            | R::Branch { thread }
            | R::Fork { thread }
            | R::Compact { thread }
            | R::Schedules { thread, .. }
            | R::Unschedule { thread, .. }
            | R::Adopt { thread }
            | R::SharedTurns { thread, .. } => thread,
        }
    }

    /// n8n's events, status, messages and cancel serve a thread that does
    /// not exist yet as an empty one (its editor opens the stream before
    /// the first message); every other route is its owner's.
    fn access(&self) -> Access {
        match self {
            R::Chat { .. } => Access::Send,
            R::Events { .. } => Access::ReaderOrNew,
            R::Status { .. } | R::Messages { .. } | R::Cancel { .. } => Access::OwnerOrNew,
            R::Publish { .. } => Access::Publish,
            R::Confirm { .. } => Access::Decide,
            // A fork's new thread is claimed as a send claims a thread.
            R::Adopt { .. } => Access::Send,
            R::SharedTurns { .. } => Access::Object,
            _ => Access::Owner,
        }
    }

    fn not_found(&self) -> ApiError {
        match self {
            R::Confirm { .. } => ApiError::confirmation_not_found(),
            _ => ApiError::thread_not_found(),
        }
    }

    fn body(&self) -> super::BodyKind {
        use super::BodyKind::*;
        match self {
            R::Publish { .. } => Batch,
            R::Events { .. }
            | R::Status { .. }
            | R::Messages { .. }
            | R::Usage { .. }
            | R::ActorUsage
            | R::Stats { .. }
            | R::QueueList { .. }
            | R::SharedTurns { .. }
            | R::Compact { .. }
            | R::Schedules { add: false, .. }
            | R::Unschedule { .. }
            | R::Delete { .. } => None,
            R::Chat { .. } => Send(crate::files::spec::SLOTS),
            _ => Json,
        }
    }

    fn attachments(&self, body: &serde_json::Value) -> Result<Vec<serde_json::Value>, ApiError> {
        Ok(crate::files::spec::own(body))
    }

    fn plan(&self, _: &[(String, String)], _: Option<&str>, _: i64) -> Result<Option<Plan>, ApiError> {
        Ok(match self {
            R::Events { .. } => Some(Plan::new(Box::new(Relay::new(stream::Events)), sse::headers())),
            _ => None,
        })
    }

    /// A fork makes a thread, as a send does: it counts among the caller's
    /// sends per minute.
    fn counts_as_send(&self) -> bool {
        matches!(self, R::Chat { .. } | R::Fork { .. })
    }

    fn shows_turns(&self, query: &[(String, String)]) -> Option<Window> {
        match self {
            R::Messages { .. } => input::messages_page(query).ok().map(|(limit, page)| Window::Page { limit, page }),
            R::SharedTurns { start, end, .. } => Some(Window::Range { start: *start, end: *end }),
            _ => None,
        }
    }

    fn head(&self) -> Option<Reply> {
        matches!(self, R::Events { .. }).then(|| Reply::with_headers(200, sse::HEADERS))
    }

    /// `GET /instance-ai/usage` asks the caller's directory: an
    /// unauthenticated caller (`AUTH_MODE=none`) has none.
    fn at_worker(&self, caller: &Caller, head: &Head, _: &Settings, now: i64) -> Result<AtWorker, ApiError> {
        match self {
            R::ActorUsage if caller.id().is_some() => {
                let days = match input::query_first(&input::query_pairs(head.query), "days") {
                    None => 30,
                    Some(d) => d.parse::<i64>().ok().filter(|d| (1..=31).contains(d)).ok_or_else(|| {
                        ApiError::invalid_query("`days` must be a whole number of days from 1 to 31")
                    })?,
                };
                Ok(AtWorker::Directory(Op::Totals { since: now - days * 86_400_000 }))
            }
            R::ActorUsage => Err(ApiError::unauthorized("usage is kept per signed-in caller".to_owned())),
            _ => Err(ApiError::not_found_route("this route is answered on its thread")),
        }
    }

    fn directory_reply(&self, body: &[u8]) -> Result<Reply, ApiError> {
        let totals: serde_json::Value = serde_json::from_slice(body).map_err(ApiError::unavailable)?;
        Ok(Reply::json(200, &totals))
    }

    fn serve<S: Store, K: Sink>(
        &self,
        t: &mut Thread<S, K>,
        call: &Call,
        gate: &Gate,
        settings: &Settings,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Answer, ApiError> {
        let limits = &settings.limits;
        let json_body = || input::json(call.body, limits.max_body_bytes);
        let ok = |v: serde_json::Value| Ok(Answer::json(200, &v));
        match self {
            // A decision is admitted for the request it names.
            R::Confirm { request, .. } => {
                let body = json_body()?;
                let c = t.decide_as(call.caller, "web", request, &body, settings, now, effects)?;
                ok(json!({ "ok": true, "requestId": c.request_id, "state": c.state.as_str() }))
            }
            R::Chat { .. } => {
                let who = Sender::of(gate.admitted()?, call);
                match t.send(&json_body()?, Given::default(), who, settings, now, effects)? {
                    Sent::Run { run_id, regenerated } => Ok(Answer::json(200, &Started { run_id, regenerated })),
                    Sent::Queued(queued) => Ok(Answer::json(202, &serde_json::to_value(queued).expect("a receipt serialises"))),
                    Sent::Reserved(body) => ok(body),
                }
            }
            R::Cancel { .. } => {
                // `?background=true`: also stop background agents that
                // outlived a run that already completed.
                let background = input::query_first(call.query, "background").is_some_and(|v| v == "true" || v == "1");
                let cancelled = t.cancel_run(gate.admitted()?, settings, now, background, effects)?;
                Ok(Answer::json(200, &Cancelled { ok: true, cancelled: cancelled.is_some(), run_id: cancelled }))
            }
            R::Events { .. } => {
                let grant = gate.admitted()?.grant();
                let query = input::query_first(call.query, "lastEventId");
                let after = input::cursor((call.header)("last-event-id").as_deref(), query.as_deref())?;
                let mut follow = Follow::log();
                if grant == crate::access::Grant::Prospect {
                    follow.prospect = call.caller.id().map(str::to_owned);
                }
                Ok(t.follow(follow, after, settings)?)
            }
            R::Publish { run, .. } => {
                t.runs().authorize(run, input::bearer((call.header)("authorization").as_deref()), |id| t.conversation().run(id))?;
                let body = input::json(call.body, limits.max_batch_bytes)?;
                let batch = input::batch(body, BatchShape::Events, limits.max_batch_events)?;
                let accepted = batch.len();
                let last = t.publish(run, batch, now)?;
                ok(json!({ "ok": true, "accepted": accepted, "lastEventId": last }))
            }
            R::Status { .. } => {
                Ok(Answer::json(200, &t.runs().status(t.conversation().queue())))
            }
            R::Messages { .. } => {
                let (limit, page) = input::messages_page(call.query)?;
                Ok(Answer::json(200, &history::messages(t, limit, page, call.origin)?))
            }
            R::Usage { .. } => {
                ok(t.conversation().usage()?)
            }
            R::ActorUsage => Err(ApiError::not_found_route("this route is answered by the Worker")),
            R::Stats { .. } => {
                if !settings.debug_routes {
                    return Err(ApiError::debug_routes_off());
                }
                ok(t.journal_mut().stats(call.instance))
            }
            R::StreamToken { thread } => {
                let key = settings.stream_key.as_deref().ok_or_else(ApiError::stream_tokens_not_configured)?;
                let actor = call.caller.id().unwrap_or_default();
                let (token, expires_at) = auth::issue_stream_token(key, thread, actor, now, settings.stream_token_ttl_ms);
                ok(json!({ "token": token, "expiresAt": expires_at }))
            }
            R::Delete { thread } => {
                t.delete(gate.admitted()?, now, effects)?;
                ok(json!({ "ok": true, "deleted": thread }))
            }
            R::QueueList { .. } => {
                ok(json!({ "queue": t.conversation().queue() }))
            }
            R::Schedules { add: false, .. } => {
                let list: Vec<_> = t.schedules().iter().map(crate::schedule::Schedule::view).collect();
                ok(json!({ "schedules": list }))
            }
            R::Schedules { add: true, .. } => {
                let s = t.add_schedule(gate.admitted()?, &json_body()?, limits.max_message_bytes, now)?;
                let view = s.view();
                Ok(Answer::json(201, &json!({ "scheduleId": s.schedule_id, "nextAt": view.get("nextAt") })))
            }
            R::Unschedule { schedule, .. } => {
                t.remove_schedule(gate.admitted()?, schedule)?;
                Ok(Answer::json(200, &json!({ "ok": true, "removed": schedule })))
            }
            R::QueueItem { message, delete: true, .. } => {
                t.edit_queue(gate.admitted()?, QueueEdit::Remove { message_id: message }, now)?;
                ok(json!({ "ok": true, "queue": t.conversation().queue() }))
            }
            R::QueueItem { message, delete: false, .. } => {
                let text = input::queue_edit(&json_body()?, limits.max_message_bytes)?;
                let patch = QueuePatch { message: Some(text), ..QueuePatch::default() };
                t.edit_queue(gate.admitted()?, QueueEdit::Patch { message_id: message, patch }, now)?;
                ok(json!({ "ok": true, "queue": t.conversation().queue() }))
            }
            R::QueueMove { message, .. } => {
                let position = input::queue_move(&json_body()?)?;
                let patch = QueuePatch { position: Some(position), ..QueuePatch::default() };
                t.edit_queue(gate.admitted()?, QueueEdit::Patch { message_id: message, patch }, now)?;
                ok(json!({ "ok": true, "queue": t.conversation().queue() }))
            }
            R::QueuePause { paused, .. } => {
                t.edit_queue(gate.admitted()?, QueueEdit::Pause(*paused), now)?;
                ok(json!({ "ok": true, "queue": t.conversation().queue() }))
            }
            R::Compact { .. } => match t.compact(gate.admitted()?, settings, now)? {
                crate::thread::Compacting::Started { through, turns, effect } => {
                    effects.push(effect);
                    Ok(Answer::json(202, &json!({ "ok": true, "compacting": true, "through": through, "turns": turns })))
                }
                crate::thread::Compacting::Nothing => ok(json!({ "ok": true, "compacting": false })),
            },
            R::Branch { .. } => {
                let message_id = input::message_ref(&json_body()?, "messageId")?
                    .ok_or_else(|| ApiError::invalid_message_id("`messageId` is required"))?;
                let leaf = t.switch_branch(gate.admitted()?, &message_id, now)?;
                Ok(Answer::json(200, &Switched { ok: true, leaf }))
            }
            R::Fork { .. } => match call.consulted {
                // The source checks and offers; the new thread adopts.
                None => {
                    let (message_id, thread_id) = input::fork(&json_body()?)?;
                    let recall = crate::thread::Recall::of(&settings.turn_config(None, None).1);
                    let offer = t.fork_offer(gate.admitted()?, &message_id, thread_id, call.random, &recall)?;
                    let adopt = Route::Adopt { thread: offer.thread_id.clone() };
                    let body = serde_json::to_vec(&offer).expect("an offer serialises");
                    Ok(Answer::Consult(super::object_call(super::Route::InstanceAi(adopt), call.caller.clone(), body)))
                }
                // The new thread's answer: made (201), or its refusal.
                Some(adopted) => {
                    let status = if adopted.status == 200 { 201 } else { adopted.status };
                    Ok(Answer::Reply(Reply::json_bytes(status, adopted.body.to_vec())))
                }
            },
            R::Adopt { .. } => {
                let offer = serde_json::from_slice(call.body).map_err(|e| ApiError::invalid_body(e.to_string()))?;
                Ok(Answer::json(200, &t.adopt(gate.admitted()?, call.caller, offer, now)?))
            }
            R::SharedTurns { run, start, end, .. } => Ok(Answer::json(200, &t.shared_turns(run, *start, *end)?)),
        }
    }
}

/// `POST .../chat`'s answer for a run that started: its id, and whether it
/// answers the last message again.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Started {
    run_id: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    regenerated: bool,
}

/// `POST .../branch`'s answer: the active path's new leaf (a run id).
#[derive(serde::Serialize)]
struct Switched {
    ok: bool,
    leaf: String,
}

/// `POST .../cancel`'s answer: whether a run was cancelled, and which.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Cancelled {
    ok: bool,
    cancelled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_id: Option<String>,
}

