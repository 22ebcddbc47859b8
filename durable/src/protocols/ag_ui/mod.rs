//! AG-UI 1.0 (`@ag-ui/client`'s `HttpAgent`, `docs/protocols/ag-ui-http-agent.md`):
//! a run (`POST /ag-ui`) answered with its AG-UI events ([`mapping`],
//! [`stream`]), interrupts answered by `resume`, client-declared tools, the
//! re-attach by `Last-Event-ID` the protocol lacks, and the history as
//! AG-UI messages ([`history`]).
//!
//! Invariants, each enforced here:
//! - a user message id the thread has seen starts nothing (the same rule,
//!   and the same run id, as the AI SDK's route: one message is one run
//!   whichever protocol sent it);
//! - `resume` decides only requests of one run, each as the confirm route
//!   would (the same access rule), the batch whole or not at all, and its
//!   stream shows that run after the last of them, under a new
//!   `RUN_STARTED`;
//! - the history is the fold of the same numbered events the streams send.

pub mod bodies;
pub mod frames;
pub mod history;
pub mod mapping;
pub mod stream;

use super::{BodyKind, Gate, Target};
use crate::access::Access;
use crate::effect::Effect;
use crate::wire::error::ApiError;
use crate::feed::{Plan, Relay};
use crate::input;
use crate::thread::fork::Window;
use crate::wire::reply::Reply;
use crate::wire::route::Spec;
use crate::settings::Settings;
use crate::storage::store::Store;
use crate::thread::{Answer, Call, Given, Seen, Sender, Sent, Sink, Thread};
use bodies::{AguiResume, AguiRun};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// An AG-UI route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "route", rename_all = "camelCase")]
pub enum Route {
    /// `POST /ag-ui` (`RunAgentInput`): the thread is the body's `threadId`.
    Run { thread: String },
    /// `GET /ag-ui/threads/:id/runs/:runId`: a run's AG-UI stream, after
    /// `Last-Event-ID` (or `?after=`), whole from `RUN_STARTED` without;
    /// `resume` lists the requests a `resume` answered (then the stream
    /// shows the run after the last of them).
    Stream { thread: String, run: String, resume: Option<Vec<String>> },
    /// `GET /ag-ui/threads/:id/messages`: the history as AG-UI messages.
    Messages { thread: String },
}

use Route as R;

impl super::Protocol for Route {
    const ROUTES: &'static [Spec<Route>] = &[
        Spec { path: "/ag-ui", methods: &["POST"], build: |_, _| Ok(R::Run { thread: String::new() }) },
        Spec {
            path: "/ag-ui/threads/:id/messages",
            methods: &["GET"],
            build: |p, _| Ok(R::Messages { thread: p.thread("id")? }),
        },
        Spec {
            path: "/ag-ui/threads/:id/runs/:runId",
            methods: &["GET"],
            build: |p, _| {
                let thread = p.thread("id")?;
                let run = crate::wire::ids::run_id(p.raw("runId"))?;
                if crate::wire::ids::thread_of(&run) != Some(thread.as_str()) {
                    return Err(ApiError::nothing_to_resume());
                }
                Ok(R::Stream { thread, run, resume: None })
            },
        },
    ];

    fn target(&self) -> Target {
        match self {
            R::Run { .. } => Target::Body,
            _ => Target::Thread,
        }
    }

    fn thread(&self) -> &str {
        match self {
            R::Run { thread } | R::Stream { thread, .. } | R::Messages { thread } => thread,
        }
    }

    fn access(&self) -> Access {
        match self {
            R::Run { .. } => Access::Send,
            R::Stream { .. } => Access::Reader,
            R::Messages { .. } => Access::Owner,
        }
    }

    fn not_found(&self) -> ApiError {
        match self {
            R::Stream { .. } => ApiError::nothing_to_resume(),
            _ => ApiError::thread_not_found(),
        }
    }

    fn body(&self) -> BodyKind {
        match self {
            R::Run { .. } => BodyKind::Send(bodies::SLOTS),
            _ => BodyKind::None,
        }
    }

    fn attachments(&self, body: &Value) -> Result<Vec<Value>, ApiError> {
        Ok(match AguiRun::parse(body, usize::MAX)? {
            AguiRun::Message { files, .. } => files,
            _ => Vec::new(),
        })
    }

    fn address(&mut self, body: &Value, _: &dyn Fn(&str) -> String) -> Result<(), ApiError> {
        if let R::Run { thread } = self {
            *thread = bodies::agui_thread(body)?;
        }
        Ok(())
    }

    fn plan(&self, query: &[(String, String)], last_event_id: Option<&str>, _: i64) -> Result<Option<Plan>, ApiError> {
        let R::Stream { thread, run, resume } = self else { return Ok(None) };
        let after = input::run_stream_cursor(last_event_id, input::query_first(query, "after").as_deref())?;
        let resume = match resume {
            Some(r) => r.clone(),
            None => input::query_first(query, "resume")
                .map(|r| r.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect())
                .unwrap_or_default(),
        };
        Ok(Some(agui_plan(thread, run, after, &resume)))
    }

    /// A run's answer names the run to follow, after the requests it resumed.
    fn after_send(&self, reply: &Reply) -> Option<(Plan, Route)> {
        let R::Run { thread } = self else { return None };
        if reply.status != 200 {
            return None;
        }
        let FollowBody { follow: FollowRun { run_id, resume } } = serde_json::from_slice(&reply.body).ok()?;
        let plan = agui_plan(thread, &run_id, 0, &resume);
        Some((plan, R::Stream { thread: thread.clone(), run: run_id, resume: Some(resume) }))
    }

    fn shows_turns(&self, query: &[(String, String)]) -> Option<Window> {
        match self {
            R::Messages { .. } => input::messages_page(query).ok().map(|(limit, page)| Window::Page { limit, page }),
            _ => None,
        }
    }

    fn head(&self) -> Option<Reply> {
        matches!(self, R::Stream { .. }).then(|| Reply::with_headers(200, mapping::HEADERS))
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
            R::Run { .. } => {
                let who = Sender::of(gate.admitted()?, call);
                let body = input::json(call.body, settings.limits.max_body_bytes)?;
                run(t, &body, who, settings, now, effects)
            }
            // The run's stream, replayed from the start (the Worker drops
            // what the cursor says was seen).
            R::Stream { run, .. } => {
                Ok(t.follow_run(run, 0, settings)?)
            }
            R::Messages { .. } => {
                let (limit, page) = input::messages_page(call.query)?;
                Ok(Answer::json(200, &history::messages(t, limit, page, call.origin)?))
            }
        }
    }
}

/// What an AG-UI run follows: the thread run's stream, after the requests
/// `resume` answered (none for a new run).
fn follow(run_id: &str, resumed: &[String]) -> Answer {
    let follow = FollowRun { run_id: run_id.to_owned(), resume: resumed.to_vec() };
    Answer::json(200, &serde_json::to_value(FollowBody { follow }).expect("a follow serialises"))
}

/// What a run's answer tells the Worker to follow ([`Protocol::after_send`]):
/// written by the object, read back by the Worker, one type for both.
#[derive(Serialize, Deserialize)]
struct FollowBody {
    follow: FollowRun,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FollowRun {
    run_id: String,
    resume: Vec<String>,
}

/// How the Worker relays a run as AG-UI events.
fn agui_plan(thread: &str, run: &str, after: u64, resume: &[String]) -> Plan {
    let headers = mapping::HEADERS.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
    Plan::new(Box::new(Relay::new(stream::AguiFrames::new(thread, run, after, resume))), headers)
}

/// The confirm route's decision body for an AG-UI answer to a request of
/// `input_type`: `payload` is `{approved, reason?}` for an approval or a plan
/// review, `{answers}` for questions and text; `cancelled` declines.
pub fn decision(input_type: &str, r: &AguiResume) -> Value {
    // What the client answered; a payload that is no object answers nothing.
    let given: Answered = r.payload.clone().and_then(|p| serde_json::from_value(p).ok()).unwrap_or_default();
    let user_input = given.reason.as_ref().and_then(Value::as_str).map(str::to_owned);
    let d = match input_type {
        "text" | "questions" if r.resolved => {
            Decision { approved: None, answers: Some(given.answers.unwrap_or(Value::Null)), user_input }
        }
        "text" | "questions" => Decision { approved: Some(false), answers: Some(json!([])), user_input },
        _ => {
            let approved = r.resolved && given.approved.as_ref().and_then(Value::as_bool) != Some(false);
            Decision { approved: Some(approved), answers: None, user_input }
        }
    };
    serde_json::to_value(d).expect("a decision serialises")
}

/// What an AG-UI client's `resume[].payload` answers (its fields as sent:
/// one of another type counts as absent where it is read).
#[derive(Default, Deserialize)]
struct Answered {
    approved: Option<Value>,
    answers: Option<Value>,
    reason: Option<Value>,
}

/// The confirm route's decision body.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Decision {
    #[serde(skip_serializing_if = "Option::is_none")]
    approved: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    answers: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_input: Option<String>,
}

/// `POST /ag-ui`: a new user message, or the answers to a run's
/// interrupts, or the client's own tools' results. Answers what the Worker
/// follows ([`follow`]).
fn run<S: Store, K: Sink>(
    t: &mut Thread<S, K>,
    body: &Value,
    who: Sender,
    settings: &Settings,
    now: i64,
    effects: &mut Vec<Effect>,
) -> Result<Answer, ApiError> {
    match AguiRun::parse(body, settings.limits.max_message_bytes)? {
        AguiRun::Message { id, text, files, earlier } => {
            // Messages that leave the active path: an edit where they leave it.
            let path: Vec<String> =
                t.conversation().tree()?.path().into_iter().map(|l| l.message_id.clone()).collect();
            let edit_of = bodies::edit_point(&earlier, &path);
            let run_id = match t.message_run(&id)? {
                Seen::New(run_id) => run_id,
                // Sent already, with its files: nothing to store.
                Seen::Active(_) if who.reserve => return Ok(Answer::json(200, &json!({ "reserved": [] }))),
                Seen::Active(run_id) => return Ok(follow(&run_id, &[])),
            };
            let client_tools = crate::thread::client_tools(t.config(), body.get("tools"), settings)?;
            let send = json!({ "message": text, "attachments": files, "editOf": edit_of });
            match t.send(&send, Given { ids: Some((id, run_id)), client_tools, mode: None }, who, settings, now, effects)? {
                Sent::Reserved(body) => Ok(Answer::json(200, &body)),
                Sent::Run { run_id, .. } => Ok(follow(&run_id, &[])),
                // An AG-UI send names no mode: it starts a run or is refused.
                Sent::Queued(queued) => Ok(Answer::json(202, &serde_json::to_value(queued).expect("a receipt serialises"))),
            }
        }
        AguiRun::Resume(answers) => {
            let mut run: Option<String> = None;
            let mut decisions = Vec::new();
            for a in &answers {
                let c = t.requests().get(&a.interrupt_id)?.ok_or_else(ApiError::confirmation_not_found)?;
                match &run {
                    Some(r) if *r != c.run_id => {
                        return Err(ApiError::invalid_decision("`resume` answers the interrupts of one run"))
                    }
                    _ => run = Some(c.run_id.clone()),
                }
                let decision = decision(&c.input_type, a);
                decisions.push((c, decision));
            }
            t.decide_batch(who.caller, &decisions, settings, now, effects)?;
            let resumed: Vec<String> = decisions.into_iter().map(|(c, _)| c.request_id).collect();
            let run = run.ok_or_else(ApiError::confirmation_not_found)?;
            Ok(follow(&run, &resumed))
        }
        AguiRun::ToolResults(outputs) => {
            // The run waiting on the client: the active one.
            let run = t
                .runs()
                .holder()
                .map(str::to_owned)
                .ok_or_else(|| ApiError::nothing_to_continue("no run of this thread waits for a client tool"))?;
            let answers = t.requests().client_tool_answers(&run, &outputs)?;
            if answers.is_empty() {
                return Err(ApiError::nothing_to_continue("no tool result answers a call the run waits for"));
            }
            t.decide_batch(who.caller, &answers, settings, now, effects)?;
            let resumed: Vec<String> = answers.into_iter().map(|(c, _)| c.request_id).collect();
            Ok(follow(&run, &resumed))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_answers_become_decisions() {
        let r = |resolved, payload: Value| AguiResume { interrupt_id: "q".into(), resolved, payload: Some(payload) };
        assert_eq!(decision("approval", &r(true, json!({}))), json!({"approved": true}));
        assert_eq!(
            decision("approval", &r(true, json!({"approved": false, "reason": "no"}))),
            json!({"approved": false, "userInput": "no"})
        );
        assert_eq!(decision("approval", &r(false, json!({}))), json!({"approved": false}));
        assert_eq!(
            decision("questions", &r(true, json!({"answers": [{"questionId": "q1"}]}))),
            json!({"answers": [{"questionId": "q1"}]})
        );
        assert_eq!(decision("questions", &r(false, json!({}))), json!({"approved": false, "answers": []}));
    }
}
