//! adonis-agora's streaming and HTTP contract (agora's streaming and HTTP
//! page, `docs/protocols/agora-streaming-and-http.md`): a send that streams its run in
//! agora's envelope ([`mapping`], [`stream`]), the re-attach after a frame
//! number, decisions on a tool call, the thread's detail, the caller's
//! threads and the model catalog.

pub mod bodies;
pub mod catalog;
pub mod history;
pub mod mapping;
pub mod queue;
pub mod stream;

use super::{AtWorker, BodyKind, Gate, Target};
use crate::access::{Access, Caller};
use crate::directory::Op;
use crate::effect::Effect;
use crate::wire::error::ApiError;
use crate::feed::{Plan, Relay};
use crate::input::{self, Head};
use crate::wire::reply::Reply;
use crate::wire::route::Spec;
use crate::settings::Settings;
use crate::wire::sse;
use crate::storage::store::{Confirmation, Store};
use crate::thread::fork::Window;
use crate::thread::serve::held;
use crate::log::queued::QueuePatch;
use crate::thread::{Answer, Call, Given, QueueEdit, Sender, Sent, Sink, Thread};
use bodies::{QuestionAnswer, ToolDecision};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// An agora route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "route", rename_all = "camelCase")]
pub enum Route {
    /// `GET /agent/models?agent=`: the model catalog, as the caller (and
    /// the agent) may use it.
    Models,
    /// `GET /agent/agents`: the agents (personas) a turn may run as.
    Agents,
    /// `GET /agent/quota`: the caller's budget and what they used of it.
    Quota,
    /// `GET /agent/threads`: the caller's threads, from their directory.
    Threads,
    /// `POST /agent/chat {threadId?, message, ...}`: the thread is named in
    /// the body (or new); the answer is the run's stream.
    Chat { thread: String },
    /// `GET /agent/chat/:runId/stream` (the thread is in the run id).
    Stream { thread: String, run: String },
    /// `POST /agent/chat/:runId/cancel`.
    Cancel { thread: String, run: String },
    /// `POST /agent/tool-call/approve|reject {runId?, toolCallId}`: the
    /// thread is in the run id, or in the call id.
    Decision { thread: String, approve: bool },
    /// `POST /agent/tool-call/answer|skip {runId?, toolCallId, answer?}`: a
    /// question the agent asked.
    Question { thread: String, skip: bool },
    /// `GET` (the detail), `PATCH` (`{model}` pin) or `DELETE` `/agent/threads/:id`.
    Thread { thread: String, method: ThreadMethod },
    /// `GET` (the queue) or `DELETE` (every waiting message) `/agent/threads/:id/queue`.
    Queue { thread: String, clear: bool },
    /// `POST /agent/threads/:id/queue/pause|resume`.
    QueuePause { thread: String, paused: bool },
    /// `PATCH {message?, position?}` or `DELETE` `/agent/queue/:messageId`
    /// (agora's), or the same under `/agent/threads/:id/queue/:messageId`
    /// (the thread named twice; kept for clients of the first form).
    QueueItem { thread: String, message: String, delete: bool },
    /// `POST /agent/threads/:id/queue/:messageId/move {position}`.
    QueueMove { thread: String, message: String },
    /// `POST /agent/queue/:messageId/interrupt`: run a waiting message now
    /// (the run holding the thread is cancelled for it).
    QueueInterrupt { thread: String, message: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThreadMethod {
    Get,
    Patch,
    Delete,
}

use Route as R;

impl super::Protocol for Route {
    const ROUTES: &'static [Spec<Route>] = &[
        Spec { path: "/agent/models", methods: &["GET"], build: |_, _| Ok(R::Models) },
        Spec { path: "/agent/agents", methods: &["GET"], build: |_, _| Ok(R::Agents) },
        Spec { path: "/agent/quota", methods: &["GET"], build: |_, _| Ok(R::Quota) },
        Spec { path: "/agent/threads", methods: &["GET"], build: |_, _| Ok(R::Threads) },
        Spec { path: "/agent/chat", methods: &["POST"], build: |_, _| Ok(R::Chat { thread: String::new() }) },
        Spec {
            path: "/agent/chat/:runId/stream",
            methods: &["GET"],
            build: |p, _| {
                let (thread, run) = p.scoped("runId", ApiError::nothing_to_resume)?;
                Ok(R::Stream { thread, run })
            },
        },
        Spec {
            path: "/agent/chat/:runId/cancel",
            methods: &["POST"],
            build: |p, _| {
                let (thread, run) = p.scoped("runId", ApiError::run_not_found)?;
                Ok(R::Cancel { thread, run })
            },
        },
        Spec {
            path: "/agent/tool-call/approve",
            methods: &["POST"],
            build: |_, _| Ok(R::Decision { thread: String::new(), approve: true }),
        },
        Spec {
            path: "/agent/tool-call/reject",
            methods: &["POST"],
            build: |_, _| Ok(R::Decision { thread: String::new(), approve: false }),
        },
        Spec {
            path: "/agent/tool-call/answer",
            methods: &["POST"],
            build: |_, _| Ok(R::Question { thread: String::new(), skip: false }),
        },
        Spec {
            path: "/agent/tool-call/skip",
            methods: &["POST"],
            build: |_, _| Ok(R::Question { thread: String::new(), skip: true }),
        },
        Spec {
            path: "/agent/threads/:id",
            methods: &["GET", "PATCH", "DELETE"],
            build: |p, method| {
                let method = match method {
                    "PATCH" => ThreadMethod::Patch,
                    "DELETE" => ThreadMethod::Delete,
                    _ => ThreadMethod::Get,
                };
                Ok(R::Thread { thread: p.thread("id")?, method })
            },
        },
        Spec {
            path: "/agent/threads/:id/queue",
            methods: &["GET", "DELETE"],
            build: |p, method| Ok(R::Queue { thread: p.thread("id")?, clear: method == "DELETE" }),
        },
        Spec {
            path: "/agent/threads/:id/queue/pause",
            methods: &["POST"],
            build: |p, _| Ok(R::QueuePause { thread: p.thread("id")?, paused: true }),
        },
        Spec {
            path: "/agent/threads/:id/queue/resume",
            methods: &["POST"],
            build: |p, _| Ok(R::QueuePause { thread: p.thread("id")?, paused: false }),
        },
        Spec {
            path: "/agent/threads/:id/queue/:messageId",
            methods: &["PATCH", "DELETE"],
            build: |p, method| {
                let (thread, message) = (p.thread("id")?, crate::wire::ids::run_id(p.raw("messageId"))?);
                Ok(R::QueueItem { thread, message, delete: method == "DELETE" })
            },
        },
        Spec {
            path: "/agent/threads/:id/queue/:messageId/move",
            methods: &["POST"],
            build: |p, _| Ok(R::QueueMove { thread: p.thread("id")?, message: crate::wire::ids::run_id(p.raw("messageId"))? }),
        },
        // A queued message's id names its thread (`<threadId>.<id>`).
        Spec {
            path: "/agent/queue/:messageId",
            methods: &["PATCH", "DELETE"],
            build: |p, method| {
                let (thread, message) = p.scoped("messageId", ApiError::queued_message_not_found)?;
                Ok(R::QueueItem { thread, message, delete: method == "DELETE" })
            },
        },
        Spec {
            path: "/agent/queue/:messageId/interrupt",
            methods: &["POST"],
            build: |p, _| {
                let (thread, message) = p.scoped("messageId", ApiError::queued_message_not_found)?;
                Ok(R::QueueInterrupt { thread, message })
            },
        },
    ];

    fn target(&self) -> Target {
        match self {
            R::Models | R::Agents | R::Quota | R::Threads => Target::Worker,
            R::Chat { .. } | R::Decision { .. } | R::Question { .. } => Target::Body,
            _ => Target::Thread,
        }
    }

    fn thread(&self) -> &str {
        match self {
            R::Models | R::Agents | R::Quota | R::Threads => "",
            R::Chat { thread }
            | R::Stream { thread, .. }
            | R::Cancel { thread, .. }
            | R::Decision { thread, .. }
            | R::Question { thread, .. }
            | R::Thread { thread, .. }
            | R::Queue { thread, .. }
            | R::QueuePause { thread, .. }
            | R::QueueItem { thread, .. }
            | R::QueueMove { thread, .. }
            | R::QueueInterrupt { thread, .. } => thread,
        }
    }

    fn access(&self) -> Access {
        match self {
            R::Chat { .. } => Access::Send,
            R::Stream { .. } => Access::Reader,
            R::Decision { .. } | R::Question { .. } => Access::Decide,
            _ => Access::Owner,
        }
    }

    fn not_found(&self) -> ApiError {
        match self {
            R::Stream { .. } => ApiError::nothing_to_resume(),
            R::Cancel { .. } => ApiError::run_not_found(),
            R::Decision { .. } | R::Question { .. } => ApiError::tool_call_not_found(),
            _ => ApiError::thread_not_found(),
        }
    }

    fn body(&self) -> BodyKind {
        match self {
            R::Chat { .. } => BodyKind::Send(crate::files::spec::SLOTS),
            R::Decision { .. }
            | R::Question { .. }
            | R::Thread { method: ThreadMethod::Patch, .. }
            | R::QueueItem { delete: false, .. }
            | R::QueueMove { .. } => BodyKind::Json,
            _ => BodyKind::None,
        }
    }

    fn attachments(&self, body: &Value) -> Result<Vec<Value>, ApiError> {
        Ok(crate::files::spec::own(body))
    }

    fn address(&mut self, body: &Value, new_id: &dyn Fn(&str) -> String) -> Result<(), ApiError> {
        match self {
            R::Chat { thread } => *thread = bodies::agora_chat_thread(body, || new_id("thr"))?,
            R::Decision { thread, .. } | R::Question { thread, .. } => *thread = bodies::agora_decision_thread(body)?,
            _ => {}
        }
        Ok(())
    }

    fn plan(&self, query: &[(String, String)], last_event_id: Option<&str>, _: i64) -> Result<Option<Plan>, ApiError> {
        let R::Stream { thread, run } = self else { return Ok(None) };
        let after = input::run_stream_cursor(last_event_id, input::query_first(query, "after").as_deref())?;
        Ok(Some(run_plan(thread, run, after)))
    }

    /// The send's answer names its run: the Worker follows it with the run's
    /// stream, from its first frame.
    fn after_send(&self, reply: &Reply) -> Option<(Plan, Route)> {
        let R::Chat { thread } = self else { return None };
        if reply.status != 200 {
            return None;
        }
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Started {
            run_id: String,
        }
        let Started { run_id: run } = serde_json::from_slice(&reply.body).ok()?;
        Some((run_plan(thread, &run, 0), R::Stream { thread: thread.clone(), run }))
    }

    fn shows_turns(&self, _: &[(String, String)]) -> Option<Window> {
        match self {
            R::Thread { method: ThreadMethod::Get | ThreadMethod::Patch, .. } => {
                Some(Window::Page { limit: history::MAX_RUNS, page: 0 })
            }
            _ => None,
        }
    }

    fn head(&self) -> Option<Reply> {
        matches!(self, R::Stream { .. }).then(|| Reply::with_headers(200, sse::HEADERS))
    }

    fn at_worker(&self, caller: &Caller, head: &Head, settings: &Settings, now: i64) -> Result<AtWorker, ApiError> {
        let roles = caller.roles();
        match self {
            R::Models => {
                let catalog = settings.catalog.as_ref().map_err(|e| ApiError::invalid_models(e.clone()))?;
                let agents = settings.agents.as_ref().map_err(|e| ApiError::invalid_agents(e.clone()))?;
                let asked = input::query_first(&input::query_pairs(head.query), "agent");
                let (_, agent) = agents.get(asked.as_deref())?;
                let locked = agent.locked.as_ref().map(|l| (l.model.as_str(), l.reason.as_deref()));
                let view = catalog::models(catalog.view(&agent.picker(roles)), locked);
                Ok(AtWorker::Reply(Reply::json(200, &serde_json::to_value(view).expect("a catalog serialises"))))
            }
            R::Agents => {
                let agents = settings.agents.as_ref().map_err(|e| ApiError::invalid_agents(e.clone()))?;
                let list = serde_json::to_value(catalog::agents(agents)).expect("agents serialise");
                Ok(AtWorker::Reply(Reply::json(200, &list)))
            }
            R::Quota if caller.id().is_some() => {
                match settings.quota.as_ref().map_err(|e| ApiError::invalid_quota(e.clone()))? {
                    Some(q) => Ok(AtWorker::Directory(Op::Quota { quota: q.clone(), limit: q.limit_for(roles), now })),
                    // No `QUOTA`: no limit, and nothing counted.
                    None => {
                        let report = catalog::quota(catalog::QuotaView::unlimited());
                        Ok(AtWorker::Reply(Reply::json(200, &serde_json::to_value(report).expect("a quota serialises"))))
                    }
                }
            }
            // The inbox's rows, every thread in one answer up to a page of
            // 500 (`?limit`, `?cursor` page on; `X-Next-Cursor` says where).
            R::Threads if caller.id().is_some() => {
                let mut page = crate::directory::inbox::Page::from_query(&input::query_pairs(head.query))?;
                page.limit = page.limit.or(Some(crate::directory::inbox::MAX_PAGE));
                Ok(AtWorker::Directory(Op::Inbox { page }))
            }
            _ => Err(ApiError::not_found_route("this route is answered on its thread")),
        }
    }

    /// `GET /agent/threads` and `GET /agent/quota` in agora's shapes
    /// ([`catalog`]).
    fn directory_reply(&self, body: &[u8]) -> Result<Reply, ApiError> {
        match self {
            R::Quota => {
                let view: catalog::QuotaView = serde_json::from_slice(body).map_err(ApiError::unavailable)?;
                Ok(Reply::json(200, &serde_json::to_value(catalog::quota(view)).expect("a quota serialises")))
            }
            _ => {
                let listed: catalog::Listed = serde_json::from_slice(body).map_err(ApiError::unavailable)?;
                let rows = serde_json::to_value(catalog::threads(listed.rows)).expect("rows serialise");
                let reply = Reply::json(200, &rows);
                Ok(match listed.next_cursor {
                    Some(cursor) => reply.header("x-next-cursor", cursor),
                    None => reply,
                })
            }
        }
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
        let limit = settings.limits.max_body_bytes;
        let json_body = || input::json(call.body, limit);
        // Every queue route answers agora's bare `{items, paused}`.
        let queue = |t: &Thread<S, K>| Answer::json(200, &queue::of(t.conversation().queue()));
        match self {
            R::Chat { thread } => {
                let who = Sender::of(gate.admitted()?, call);
                let body = json_body()?;
                let mode = bodies::agora_mode(&body, t.runs().active_run().is_some())?;
                match t.send(&body, Given { mode: Some(mode), ..Given::default() }, who, settings, now, effects)? {
                    // The Worker follows this answer with the run's stream
                    // (`after_send`).
                    Sent::Run { run_id, .. } => Ok(Answer::json(200, &json!({ "runId": run_id, "threadId": thread }))),
                    Sent::Queued(receipt) => Ok(Answer::json(202, &queued(receipt))),
                    Sent::Reserved(body) => Ok(Answer::json(200, &body)),
                }
            }
            // The whole run: frames are numbered by their position in it, and
            // the Worker leaves out those the client saw.
            R::Stream { run, .. } => {
                Ok(t.follow_run(run, 0, settings)?)
            }
            R::Cancel { run, .. } => {
                t.conversation().known_run(run)?;
                let active = t.runs().active_run().is_some_and(|r| r.run_id == *run);
                let cancelled = if active { t.cancel_run(gate.admitted()?, settings, now, false, effects)? } else { None };
                // agora's `{aborted}`; `cancelled` for readers of the first form.
                let aborted = cancelled.is_some();
                Ok(Answer::json(200, &json!({ "aborted": aborted, "ok": true, "runId": run, "cancelled": aborted })))
            }
            R::Decision { approve, .. } => {
                let d = ToolDecision::parse(&json_body()?, *approve)?;
                let c = self.request(t, call, &d.tool_call_id, d.run_id.as_deref(), settings, now, effects)?;
                if c.input_type != "approval" {
                    return Err(ApiError::invalid_decision(
                        "this tool call asks a question: answer it with POST /agent/tool-call/answer",
                    ));
                }
                let c = t.decide_as(call.caller, &d.via, &c.request_id, &d.as_decision(*approve), settings, now, effects)?;
                let body = json!({ "ok": true, "runId": c.run_id, "toolCallId": c.tool_call_id, "status": c.state.as_str() });
                Ok(Answer::json(200, &body))
            }
            R::Question { skip, .. } => {
                let a = QuestionAnswer::parse(&json_body()?, *skip)?;
                let c = self.request(t, call, &a.tool_call_id, a.run_id.as_deref(), settings, now, effects)?;
                if !matches!(c.input_type.as_str(), "text" | "questions") {
                    return Err(ApiError::invalid_decision(
                        "this tool call asks for an approval: decide it with POST /agent/tool-call/approve or reject",
                    ));
                }
                let c = t.decide_as(call.caller, &a.via, &c.request_id, &a.decision, settings, now, effects)?;
                let body = json!({ "ok": true, "runId": c.run_id, "toolCallId": c.tool_call_id, "status": if *skip { "skipped" } else { "answered" } });
                Ok(Answer::json(200, &body))
            }
            R::Thread { method, thread } => {
                match method {
                    ThreadMethod::Delete => {
                        t.delete(gate.admitted()?, now, effects)?;
                        return Ok(Answer::json(200, &json!({ "ok": true, "deleted": thread })));
                    }
                    ThreadMethod::Patch => {
                        let catalog = settings.catalog.as_ref().map_err(|e| ApiError::invalid_models(e.clone()))?;
                        let pin = input::pin(&json_body()?, catalog)?;
                        t.set_pin(pin.as_deref())?;
                    }
                    ThreadMethod::Get => {}
                }
                Ok(Answer::json(200, &history::detail(t, call.origin)?))
            }
            R::Queue { clear, .. } => {
                if *clear {
                    t.edit_queue(gate.admitted()?, QueueEdit::Clear, now)?;
                }
                Ok(queue(t))
            }
            R::QueuePause { paused, .. } => {
                let before = t.runs().active_run().map(|r| r.run_id.clone());
                t.edit_queue(gate.admitted()?, QueueEdit::Pause(*paused), now)?;
                // `runId`: the head started on resume.
                let run_id = t.runs().active_run().map(|r| r.run_id.clone()).filter(|r| Some(r) != before.as_ref());
                let view = queue::view(t.conversation().queue());
                Ok(Answer::json(200, &queue::Changed { view, interrupting: None, run_id }))
            }
            R::QueueItem { message, delete: true, .. } => {
                t.edit_queue(gate.admitted()?, QueueEdit::Remove { message_id: message }, now)?;
                Ok(queue(t))
            }
            R::QueueItem { message, delete: false, .. } => {
                // One change, stored and announced once.
                let patch = bodies::queue_patch(&json_body()?, settings.limits.max_message_bytes)?;
                t.edit_queue(gate.admitted()?, QueueEdit::Patch { message_id: message, patch }, now)?;
                Ok(queue(t))
            }
            R::QueueInterrupt { message, .. } => {
                let interrupted = t.queue_interrupt(message, settings, now, effects)?;
                let run_id = interrupted.is_none().then(|| message.clone());
                let view = queue::view(t.conversation().queue());
                Ok(Answer::json(200, &queue::Changed { view, interrupting: interrupted, run_id }))
            }
            R::QueueMove { message, .. } => {
                let position = input::queue_move(&json_body()?)?;
                let patch = QueuePatch { position: Some(position), ..QueuePatch::default() };
                t.edit_queue(gate.admitted()?, QueueEdit::Patch { message_id: message, patch }, now)?;
                Ok(queue(t))
            }
            R::Models | R::Agents | R::Quota | R::Threads => {
                Err(ApiError::not_found_route("this route is answered by the Worker"))
            }
        }
    }
}

impl Route {
    /// The request a decision route names by its tool call (of `run`, when
    /// given), once requests whose time is up have settled and the caller is
    /// admitted for it: 404 `tool_call_not_found` for one the thread does
    /// not hold, or a caller who may not decide it.
    #[allow(clippy::too_many_arguments)]
    fn request<S: Store, K: Sink>(
        &self,
        t: &mut Thread<S, K>,
        call: &Call,
        tool_call_id: &str,
        run: Option<&str>,
        settings: &Settings,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Confirmation, ApiError> {
        effects.extend(t.clock().settle_lapsed(settings, now)?);
        let found = t.requests().for_call(tool_call_id, run)?;
        t.admit(Access::Decide, super::Protocol::not_found(self), call.caller, Some(held(found.as_ref())))?;
        found.ok_or_else(ApiError::tool_call_not_found)
    }
}

/// Where agora mounts its routes unless told otherwise (agora's
/// `config.path`); the route table is written under it.
pub const MOUNT: &str = "agent";

/// `AGORA_PATH` read: its segments (`api/agent` for `/api/agent/...`),
/// each of letters, digits, `-`, `_` or `.`; refused when a path under it
/// could be another protocol's route (the two would answer each other's
/// paths).
pub fn mount_path(var: Option<&str>) -> Result<String, String> {
    let Some(raw) = var else { return Ok(MOUNT.to_owned()) };
    let path = raw.trim().trim_matches('/');
    let segment_ok = |s: &str| {
        !s.is_empty() && s != "." && s != ".." && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    if path.len() > 100 || !path.split('/').all(segment_ok) {
        return Err(format!("AGORA_PATH `{raw}` is not a path of letters, digits, `-`, `_` and `.` segments"));
    }
    // A pattern holds paths under the mount when its first segments
    // match the mount's (a `*` matches the rest).
    let holds = |pattern: &str| {
        let mut want = pattern.trim_start_matches('/').split('/');
        for seg in path.split('/') {
            match want.next() {
                Some("*") => return true,
                Some(w) if w == seg || w.starts_with(':') => {}
                _ => return false,
            }
        }
        true
    };
    let taken = super::table().into_iter().find(|(_, pattern)| !pattern.starts_with("/agent/") && holds(pattern));
    if let Some((_, pattern)) = taken {
        return Err(format!("AGORA_PATH `{raw}` holds paths of another protocol's route ({pattern})"));
    }
    Ok(path.to_owned())
}

/// Where agora's routes are mounted under `settings` (`AGORA_PATH`), or
/// why the path it names is refused (agora's routes then stay under
/// `/agent`).
pub fn mount(settings: &Settings) -> Result<&str, &str> {
    settings.agora_mount.get_or_init(|| mount_path(settings.agora_path.as_deref())).as_deref().map_err(String::as_str)
}

/// The path a request names as agora's table knows it: under `mount`
/// rewritten to `/agent/...`; `None` for `/agent/...` itself when agora is
/// mounted elsewhere (no route there); any other path as it is.
pub fn mounted<'p>(path: &'p str, mount: &str) -> Option<std::borrow::Cow<'p, str>> {
    use std::borrow::Cow;
    if mount == MOUNT {
        return Some(Cow::Borrowed(path));
    }
    let under = |m: &str| path.strip_prefix('/').and_then(|p| p.strip_prefix(m)).filter(|r| r.is_empty() || r.starts_with('/'));
    if let Some(rest) = under(mount) {
        return Some(Cow::Owned(format!("/{MOUNT}{rest}")));
    }
    if under(MOUNT).is_some() {
        return None;
    }
    Some(Cow::Borrowed(path))
}

/// A queued send's 202 in agora's words: its queue as agora reads it, and
/// `runId` only when the message started at once (an interrupting send's
/// message starts once the run it cancels has ended: `interrupting`).
fn queued(receipt: crate::thread::send::Queued) -> Value {
    let run_id = receipt.run_id.filter(|_| receipt.interrupting.is_none());
    let body = Queued {
        queued: receipt.queued,
        thread_id: receipt.thread_id,
        message_id: receipt.message_id,
        position: receipt.position,
        queue: queue::of(&receipt.queue),
        run_id,
        interrupting: receipt.interrupting,
    };
    serde_json::to_value(body).expect("a receipt serialises")
}

/// A queued send's receipt with its queue in agora's words.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Queued {
    queued: bool,
    thread_id: String,
    message_id: String,
    position: usize,
    queue: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    interrupting: Option<String>,
}

/// How the Worker relays a run's stream: agora's envelope after frame `after`.
fn run_plan(thread: &str, run: &str, after: u64) -> Plan {
    Plan::new(Box::new(Relay::new(stream::RunFrames::new(thread, run, after))), stream::headers(thread, run))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mount_path_is_checked_and_paths_under_it_are_agoras() {
        assert_eq!(mount_path(None).unwrap(), "agent");
        assert_eq!(mount_path(Some("/api/agent/")).unwrap(), "api/agent");
        assert_eq!(mount_path(Some("v1/agora")).unwrap(), "v1/agora");
        for bad in ["a b", "x/../y", "", "/", "v1", "instance-ai/chat", "agents", "agents/default", "api", "v1/stream/x/y"] {
            assert!(mount_path(Some(bad)).is_err(), "{bad}");
        }
        assert_eq!(mounted("/agent/chat", "agent").unwrap(), "/agent/chat");
        assert_eq!(mounted("/api/agent/chat", "api/agent").unwrap(), "/agent/chat");
        assert_eq!(mounted("/api/agent", "api/agent").unwrap(), "/agent");
        assert!(mounted("/agent/chat", "api/agent").is_none());
        assert_eq!(mounted("/api/agentx/chat", "api/agent").unwrap(), "/api/agentx/chat");
        assert_eq!(mounted("/instance-ai/chat/t", "api/agent").unwrap(), "/instance-ai/chat/t");
        assert_eq!(mounted("/agents/default/t", "api/agent").unwrap(), "/agents/default/t");
    }
}
