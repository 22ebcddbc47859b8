//! The AI SDK's UI message stream (`ai`'s `useChat` with its
//! `DefaultChatTransport`, `docs/protocols/ai-sdk-ui-message-stream.md`): a send answered
//! with its run's chunks ([`mapping`], [`stream`]), the reconnect of
//! `useChat({resume: true})`, stop, and the history as `UIMessage[]`
//! ([`history`]). The thread holds the history: of what the client sends,
//! only its last message is read ([`bodies::UiChat`]).
//!
//! Invariants, each enforced here:
//! - a user message id the thread has seen starts nothing: the send
//!   follows that message's run while it is active, else 409;
//! - a continuation decides only requests of the message it continues, each
//!   as the confirm route would (the same access rule), the batch whole or
//!   not at all, and its stream begins after the earliest of those
//!   requests, so the client, which holds the message up to them, gets the
//!   rest once;
//! - the history's assistant message of a run has the id its stream's
//!   `start` carries (the run id), and is the fold of the same chunks.

pub mod bodies;
pub mod chunks;
pub mod history;
pub mod mapping;
pub mod stream;

use super::{BodyKind, Gate, Target};
use crate::access::{Access, Caller};
use crate::effect::Effect;
use crate::wire::error::ApiError;
use crate::feed::{Plan, Relay};
use crate::input::{self, ToolOutput};
use crate::thread::fork::Window;
use crate::wire::reply::Reply;
use crate::wire::route::Spec;
use crate::settings::Settings;
use crate::storage::store::Store;
use crate::thread::{Answer, Call, DecisionBody, Follow, Given, Seen, Sender, Sent, Sink, Thread};
use bodies::{UiApproval, UiChat};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// An AI SDK route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "route", rename_all = "camelCase")]
pub enum Route {
    /// `POST /api/chat {id, messages, trigger}`: the thread is the chat's `id`.
    Chat { thread: String },
    /// `GET /api/chat/:id/stream`: `useChat({resume: true})`'s reconnect to
    /// the active run (204 when there is none).
    Stream { thread: String },
    /// `GET /api/chat/:id/runs/:runId/stream?after=&continue=`: one run as a
    /// UI message stream from a point of its log (what a send answers with:
    /// then the point is the route's own, not the query's).
    RunStream { thread: String, run: String, after: Option<u64>, continuing: bool },
    /// `GET /api/chat/:id/messages`: the history as `UIMessage[]`.
    Messages { thread: String },
    /// `POST /api/chat/:id/stop`: cancels the active run.
    Stop { thread: String },
}

use Route as R;

impl super::Protocol for Route {
    const ROUTES: &'static [Spec<Route>] = &[
        Spec { path: "/api/chat", methods: &["POST"], build: |_, _| Ok(R::Chat { thread: String::new() }) },
        Spec { path: "/api/chat/:id/stream", methods: &["GET"], build: |p, _| Ok(R::Stream { thread: p.thread("id")? }) },
        Spec { path: "/api/chat/:id/messages", methods: &["GET"], build: |p, _| Ok(R::Messages { thread: p.thread("id")? }) },
        Spec { path: "/api/chat/:id/stop", methods: &["POST"], build: |p, _| Ok(R::Stop { thread: p.thread("id")? }) },
        Spec {
            path: "/api/chat/:id/runs/:runId/stream",
            methods: &["GET"],
            build: |p, _| {
                let thread = p.thread("id")?;
                let run = crate::wire::ids::run_id(p.raw("runId"))?;
                if crate::wire::ids::thread_of(&run) != Some(thread.as_str()) {
                    return Err(ApiError::nothing_to_resume());
                }
                Ok(R::RunStream { thread, run, after: None, continuing: false })
            },
        },
    ];

    fn target(&self) -> Target {
        match self {
            R::Chat { .. } => Target::Body,
            _ => Target::Thread,
        }
    }

    fn thread(&self) -> &str {
        match self {
            R::Chat { thread } | R::Stream { thread } | R::RunStream { thread, .. } | R::Messages { thread } | R::Stop { thread } => {
                thread
            }
        }
    }

    fn access(&self) -> Access {
        match self {
            R::Chat { .. } => Access::Send,
            R::Stream { .. } | R::RunStream { .. } => Access::Reader,
            R::Messages { .. } | R::Stop { .. } => Access::Owner,
        }
    }

    fn not_found(&self) -> ApiError {
        match self {
            R::RunStream { .. } => ApiError::nothing_to_resume(),
            _ => ApiError::thread_not_found(),
        }
    }

    /// The resume route answers a thread that is not the caller's (or
    /// none at all) as one with no run: 204, as the AI SDK expects.
    fn refused<S: Store, K: Sink>(&self, e: ApiError, _: &Thread<S, K>) -> Result<Answer, ApiError> {
        match self {
            R::Stream { .. } if e.status == 404 => Ok(Answer::Reply(Reply::new(204))),
            _ => Err(e),
        }
    }

    fn body(&self) -> BodyKind {
        match self {
            R::Chat { .. } => BodyKind::Send(bodies::SLOTS),
            R::Stop { .. } => BodyKind::Json,
            _ => BodyKind::None,
        }
    }

    fn attachments(&self, body: &Value) -> Result<Vec<Value>, ApiError> {
        Ok(match UiChat::parse(body, usize::MAX)? {
            UiChat::Message { files, .. } => files,
            _ => Vec::new(),
        })
    }

    fn address(&mut self, body: &Value, _: &dyn Fn(&str) -> String) -> Result<(), ApiError> {
        if let R::Chat { thread } = self {
            *thread = bodies::ui_chat_thread(body)?;
        }
        Ok(())
    }

    fn plan(&self, query: &[(String, String)], _: Option<&str>, _: i64) -> Result<Option<Plan>, ApiError> {
        Ok(match self {
            R::Stream { .. } => Some(ui_plan(None, false)),
            R::RunStream { run, after: None, .. } => {
                let continuing = input::query_first(query, "continue").as_deref() == Some("true");
                Some(ui_plan(Some(run), continuing))
            }
            R::RunStream { run, continuing, .. } => Some(ui_plan(Some(run), *continuing)),
            _ => None,
        })
    }

    /// A send's answer names the run to follow and from where.
    fn after_send(&self, reply: &Reply) -> Option<(Plan, Route)> {
        let R::Chat { thread } = self else { return None };
        if reply.status != 200 {
            return None;
        }
        let FollowBody { follow: FollowRun { run_id, after, continuing } } = serde_json::from_slice(&reply.body).ok()?;
        let plan = ui_plan(Some(&run_id), continuing);
        Some((plan, R::RunStream { thread: thread.clone(), run: run_id, after: Some(after), continuing }))
    }

    fn shows_turns(&self, query: &[(String, String)]) -> Option<Window> {
        match self {
            R::Messages { .. } => input::messages_page(query).ok().map(|(limit, page)| Window::Page { limit, page }),
            _ => None,
        }
    }

    fn head(&self) -> Option<Reply> {
        matches!(self, R::Stream { .. } | R::RunStream { .. }).then(|| Reply::with_headers(200, mapping::HEADERS))
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
        match self {
            R::Chat { .. } => {
                let who = Sender::of(gate.admitted()?, call);
                let body = input::json(call.body, settings.limits.max_body_bytes)?;
                chat(t, &body, who, settings, now, effects)
            }
            R::Stream { .. } => match t.runs().active_run().map(|r| r.run_id.clone()) {
                Some(run) => Ok(t.follow(Follow::run(&run), 0, settings)?),
                None => Ok(Answer::Reply(Reply::new(204))),
            },
            R::RunStream { run, after, .. } => {
                let after = match after {
                    Some(a) => *a,
                    None => input::cursor(None, input::query_first(call.query, "after").as_deref())?,
                };
                Ok(t.follow_run(run, after, settings)?)
            }
            R::Messages { .. } => {
                let (limit, page) = input::messages_page(call.query)?;
                Ok(Answer::json(200, &history::messages(t, limit, page, call.origin)?))
            }
            R::Stop { .. } => {
                let cancelled = t.cancel_run(gate.admitted()?, settings, now, false, effects)?;
                Ok(Answer::json(200, &Stopped { ok: true, cancelled: cancelled.is_some(), run_id: cancelled }))
            }
        }
    }
}

/// What a send answers: the run the Worker follows, from a point of its log.
fn follow_body(run_id: &str, after: u64, continuing: bool) -> Answer {
    let follow = FollowRun { run_id: run_id.to_owned(), after, continuing };
    Answer::json(200, &serde_json::to_value(FollowBody { follow }).expect("a follow serialises"))
}

/// What a send's answer tells the Worker to follow ([`Protocol::after_send`]):
/// written by the object, read back by the Worker, one type for both.
#[derive(Serialize, Deserialize)]
struct FollowBody {
    follow: FollowRun,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FollowRun {
    run_id: String,
    after: u64,
    #[serde(rename = "continue")]
    continuing: bool,
}

/// How the Worker relays a run as a UI message stream.
fn ui_plan(run: Option<&str>, continuing: bool) -> Plan {
    let headers = mapping::HEADERS.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
    Plan::new(Box::new(Relay::new(stream::UiFrames::new(run, continuing))), headers)
}

/// `POST /api/chat`: a new user message (sent with the client's id), a
/// regenerate, or the continuation of an assistant message whose approval
/// requests the person answered (or whose client tools ran). Answers what
/// the Worker follows, or, for a queued message, a stream that says so.
fn chat<S: Store, K: Sink>(
    t: &mut Thread<S, K>,
    body: &Value,
    who: Sender,
    settings: &Settings,
    now: i64,
    effects: &mut Vec<Effect>,
) -> Result<Answer, ApiError> {
    let options = |extra: Value| {
        let mut send = extra;
        for k in ["mode", "model"] {
            if let Some(v) = body.get(k) {
                send[k] = v.clone();
            }
        }
        send
    };
    let sent = match UiChat::parse(body, settings.limits.max_message_bytes)? {
        UiChat::Message { text, files, edit_of: Some(edit_of), .. } => {
            // An edit is a message of its own beside the one it replaces
            // (the client keeps its id; the history names the new one).
            let client_tools = crate::thread::client_tools(t.config(), body.get("tools"), settings)?;
            let send = options(json!({ "message": text, "attachments": files, "editOf": edit_of }));
            t.send(&send, Given { ids: None, client_tools, mode: None }, who, settings, now, effects)?
        }
        UiChat::Message { id, text, files, edit_of: None } => {
            let run_id = match t.message_run(&id)? {
                Seen::New(run_id) => run_id,
                // Sent already, with its files: nothing to store.
                Seen::Active(_) if who.reserve => return Ok(Answer::json(200, &json!({ "reserved": [] }))),
                Seen::Active(run_id) => return Ok(follow_body(&run_id, 0, false)),
            };
            let client_tools = crate::thread::client_tools(t.config(), body.get("tools"), settings)?;
            let send = options(json!({ "message": text, "attachments": files }));
            t.send(&send, Given { ids: Some((id, run_id)), client_tools, mode: None }, who, settings, now, effects)?
        }
        UiChat::Regenerate { message_id } => {
            // The client answers a user message again by its id too: the
            // answer to it is the one given again.
            let answer = match message_id {
                Some(id) => Some(t.conversation().answer_to(&id)?.unwrap_or(id)),
                None => None,
            };
            let send = options(json!({ "regenerate": true, "messageId": answer }));
            t.send(&send, Given::default(), who, settings, now, effects)?
        }
        UiChat::Continue { message_id, approvals, outputs } => {
            return resume(t, &message_id, &approvals, &outputs, who.caller, settings, now, effects);
        }
    };
    Ok(match sent {
        Sent::Reserved(body) => Answer::json(200, &body),
        Sent::Run { run_id, .. } => follow_body(&run_id, 0, false),
        Sent::Queued(queued) => {
            let mut out = Vec::new();
            let data = serde_json::to_value(queued).expect("a receipt serialises");
            chunks::Chunk::DataQueued { data, transient: true }.encode(&mut out);
            out.extend_from_slice(mapping::DONE);
            Answer::Reply(Reply::with_headers(200, mapping::HEADERS).body(out))
        }
    })
}

/// Decides the answered requests of run `message_id` (a batch admitted
/// whole) and follows the run from its earliest one.
#[allow(clippy::too_many_arguments)]
fn resume<S: Store, K: Sink>(
    t: &mut Thread<S, K>,
    message_id: &str,
    approvals: &[UiApproval],
    outputs: &[ToolOutput],
    caller: &Caller,
    settings: &Settings,
    now: i64,
    effects: &mut Vec<Effect>,
) -> Result<Answer, ApiError> {
    let run = t.conversation().run(message_id)?.ok_or_else(|| {
        ApiError::nothing_to_continue("the assistant message to continue is not a run of this thread")
    })?;
    let mut answers = Vec::new();
    for a in approvals {
        let Some(c) = t.requests().get(&a.id)?.filter(|c| c.run_id == run.run_id) else { continue };
        let decision = DecisionBody { approved: Some(a.approved), user_input: a.reason.clone(), ..DecisionBody::default() };
        answers.push((c, decision.to_value()));
    }
    // The client's own tools: its outcomes settle their requests.
    answers.extend(t.requests().client_tool_answers(&run.run_id, outputs)?);
    if answers.is_empty() {
        return Err(ApiError::nothing_to_continue(
            "no answered approval request or client tool call belongs to this message",
        ));
    }
    t.decide_batch(caller, &answers, settings, now, effects)?;
    let requests: Vec<&str> = answers.iter().map(|(c, _)| c.request_id.as_str()).collect();
    // The stream goes on after the earliest request the client answered.
    let records = t.conversation().run_records(&run.run_id)?;
    let after = records
        .iter()
        .filter(|r| r.data.contains("\"confirmation-request\"") && requests.iter().any(|q| r.data.contains(q)))
        .map(|r| r.seq)
        .min()
        .unwrap_or(t.conversation().last_seq());
    Ok(follow_body(&run.run_id, after, true))
}

/// `POST .../stop`'s answer: whether a run was cancelled, and which.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Stopped {
    ok: bool,
    cancelled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_id: Option<String>,
}

