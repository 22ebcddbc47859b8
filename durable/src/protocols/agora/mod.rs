//! adonis-agora's streaming and HTTP contract (agora's streaming and HTTP
//! page, `docs/protocols/agora-streaming-and-http.md`): a send that streams its run in
//! agora's envelope ([`mapping`], [`stream`]), the re-attach after a frame
//! number, decisions on a tool call, the thread's detail, the caller's
//! threads and the model catalog.

pub mod bodies;
pub mod mapping;
pub mod stream;

use super::{AtWorker, BodyKind, Target};
use crate::access::{Access, Caller};
use crate::directory::Op;
use crate::effect::Effect;
use crate::error::ApiError;
use crate::feed::{Plan, Relay};
use crate::input::{self, Head};
use crate::reply::Reply;
use crate::route::Spec;
use crate::settings::Settings;
use crate::sse;
use crate::store::Store;
use crate::thread::serve::held;
use crate::thread::{Answer, Call, Given, Sender, Sent, Sink, Thread};
use bodies::ToolDecision;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// An agora route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "route", rename_all = "camelCase")]
pub enum Route {
    /// `GET /agent/models`: the model catalog.
    Models,
    /// `GET /agent/threads`: the caller's threads, from their directory.
    Threads,
    /// `POST /agent/chat {threadId?, message, ...}`: the thread is named in
    /// the body (or new); the answer is the run's stream.
    Chat { thread: String },
    /// `GET /agent/chat/:runId/stream` (the thread is in the run id).
    Stream { thread: String, run: String },
    /// `POST /agent/tool-call/approve|reject {runId?, toolCallId}`: the
    /// thread is in the run id, or in the call id.
    Decision { thread: String, approve: bool },
    /// `GET` (messages, queue, pin) or `PATCH` (`{model}` pin) `/agent/threads/:id`.
    Thread { thread: String, patch: bool },
}

use Route as R;

impl super::Protocol for Route {
    const ROUTES: &'static [Spec<Route>] = &[
        Spec { path: "/agent/models", methods: &["GET"], build: |_, _| Ok(R::Models) },
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
            path: "/agent/threads/:id",
            methods: &["GET", "PATCH"],
            build: |p, method| Ok(R::Thread { thread: p.thread("id")?, patch: method == "PATCH" }),
        },
    ];

    fn target(&self) -> Target {
        match self {
            R::Models | R::Threads => Target::Worker,
            R::Chat { .. } | R::Decision { .. } => Target::Body,
            R::Stream { .. } | R::Thread { .. } => Target::Thread,
        }
    }

    fn thread(&self) -> &str {
        match self {
            R::Models | R::Threads => "",
            R::Chat { thread } | R::Stream { thread, .. } | R::Decision { thread, .. } | R::Thread { thread, .. } => {
                thread
            }
        }
    }

    fn access(&self) -> Access {
        match self {
            R::Chat { .. } => Access::Send,
            R::Stream { .. } => Access::Reader,
            R::Decision { .. } => Access::Decide,
            R::Models | R::Threads | R::Thread { .. } => Access::Owner,
        }
    }

    fn not_found(&self) -> ApiError {
        match self {
            R::Stream { .. } => ApiError::nothing_to_resume(),
            R::Decision { .. } => ApiError::tool_call_not_found(),
            _ => ApiError::thread_not_found(),
        }
    }

    fn body(&self) -> BodyKind {
        match self {
            R::Chat { .. } | R::Decision { .. } | R::Thread { patch: true, .. } => BodyKind::Json,
            _ => BodyKind::None,
        }
    }

    fn address(&mut self, body: &Value, new_id: &dyn Fn(&str) -> String) -> Result<(), ApiError> {
        match self {
            R::Chat { thread } => *thread = bodies::agora_chat_thread(body, || new_id("thr"))?,
            R::Decision { thread, .. } => *thread = bodies::agora_decision_thread(body)?,
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
        let body: Value = serde_json::from_slice(&reply.body).ok()?;
        let run = body["runId"].as_str()?;
        Some((run_plan(thread, run, 0), R::Stream { thread: thread.clone(), run: run.to_owned() }))
    }

    fn head(&self) -> Option<Reply> {
        matches!(self, R::Stream { .. }).then(|| Reply::with_headers(200, sse::HEADERS))
    }

    fn at_worker(&self, caller: &Caller, _: &Head, settings: &Settings) -> Result<AtWorker, ApiError> {
        match self {
            R::Models => {
                let catalog = settings.catalog.as_ref().map_err(|e| ApiError::invalid_models(e.clone()))?;
                Ok(AtWorker::Reply(Reply::json(200, &catalog.view())))
            }
            R::Threads if caller.id().is_some() => Ok(AtWorker::Directory(Op::List)),
            _ => Err(ApiError::not_found_route("this route is answered on its thread")),
        }
    }

    /// `GET /agent/threads`: `{threads: [{threadId, title, createdAt,
    /// updatedAt, runs}]}`, newest first.
    fn directory_reply(&self, body: &[u8]) -> Result<Reply, ApiError> {
        let listed: Value = serde_json::from_slice(body).map_err(ApiError::unavailable)?;
        Ok(Reply::json(200, &json!({ "threads": listed["rows"] })))
    }

    fn serve<S: Store, K: Sink>(
        &self,
        t: &mut Thread<S, K>,
        call: &Call,
        settings: &Settings,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Answer, ApiError> {
        let limit = settings.limits.max_body_bytes;
        let admit = |t: &Thread<S, K>| t.admit(self.access(), self.not_found(), call.caller, None);
        match self {
            R::Chat { thread } => {
                let who = Sender { grant: admit(t)?, caller: call.caller, origin: call.origin };
                let body = input::json(call.body, limit)?;
                match t.send(&body, Given::default(), who, settings, now, effects)? {
                    // The Worker follows this answer with the run's stream
                    // (`after_send`).
                    Sent::Run { run_id, .. } => Ok(Answer::json(200, &json!({ "runId": run_id, "threadId": thread }))),
                    Sent::Queued(body) => Ok(Answer::json(202, &body)),
                }
            }
            // The whole run: frames are numbered by their position in it, and
            // the Worker leaves out those the client saw.
            R::Stream { run, .. } => {
                admit(t)?;
                t.follow_run(run, 0, settings)
            }
            R::Decision { approve, .. } => {
                // A request whose time is up settles first.
                effects.extend(t.settle_lapsed(settings, now)?);
                let d = ToolDecision::parse(&input::json(call.body, limit)?, *approve)?;
                let found = t.confirmation_for_call(&d.tool_call_id, d.run_id.as_deref())?;
                t.admit(Access::Decide, self.not_found(), call.caller, Some(held(found.as_ref())))?;
                let c = found.ok_or_else(ApiError::tool_call_not_found)?;
                if c.input_type != "approval" {
                    return Err(ApiError::invalid_decision(
                        "this tool call asks for input: answer it with POST /instance-ai/confirm/:requestId",
                    ));
                }
                // `via` is checked, as agora does; who decided is the caller.
                let decision = d.as_decision(*approve);
                let c = t.decide_as(call.caller, &c.request_id, &decision, settings, now, effects)?;
                let body = json!({ "ok": true, "runId": c.run_id, "toolCallId": c.tool_call_id, "status": c.state.as_str() });
                Ok(Answer::json(200, &body))
            }
            R::Thread { patch, .. } => {
                admit(t)?;
                if *patch {
                    let catalog = settings.catalog.as_ref().map_err(|e| ApiError::invalid_models(e.clone()))?;
                    let pin = input::pin(&input::json(call.body, limit)?, catalog)?;
                    t.set_pin(pin.as_deref())?;
                }
                let mut view = t.messages(200, 0)?;
                view["model"] = t.pin()?.into();
                view["status"] = t.status();
                Ok(Answer::json(200, &view))
            }
            R::Models | R::Threads => Err(ApiError::not_found_route("this route is answered by the Worker")),
        }
    }
}

/// How the Worker relays a run's stream: agora's envelope after frame `after`.
fn run_plan(thread: &str, run: &str, after: u64) -> Plan {
    Plan::new(Box::new(Relay::new(stream::RunFrames::new(thread, run, after))), stream::headers(thread, run))
}
