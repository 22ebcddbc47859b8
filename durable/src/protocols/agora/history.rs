//! agora's thread detail (`GET /agent/threads/:id`, agora's "Persisted
//! history"): the messages a reload rebuilds its transcript from, as
//! agora's `storedThreadToUiMessages` reads them.
//!
//! A turn is a user row, then one assistant row per model step, as agora's
//! loop stores them (agora's client merges consecutive rows of one `runId`
//! back into one message, so a reloaded turn shows text and tools in the
//! order the live stream did). A step's row holds what that step streamed:
//! its text (`content`), its reasoning and how long it took
//! (`reasoningMs`), the tool calls it made (`{id, name, input, kind?}`,
//! with their `status`: `pending_approval` while a person must decide),
//! their results (`{id, name, output}`, `{..., error}`, or `{..., denied:
//! true, expired?}` for a call a person refused or let lapse), their
//! approvals (`approved`, `rejected`, `expired`, `pending`), and its usage
//! (`{inputTokens, outputTokens, costUsd?}`; absent, never `null`, when the
//! step reported none). The turn's last row is `<runId>:assistant` (the id
//! agora's client gives the merged message, and the messages view's) and
//! carries the turn's own fields: status, agent tree, structured output,
//! model; earlier steps' rows are `<runId>:assistant:step-<n>`.
//!
//! The thread's `activeRunId`, `queue` (agora's shape), pinned `model` and
//! status come with them. Each row also carries the fields n8n's messages
//! view gives a message (`role`, `createdAt`, `isStreaming`, `agentTree`,
//! …), which agora's client ignores and earlier releases sent.

use crate::wire::error::ApiError;
use crate::log::event::{Event, Payload};
use crate::wire::ids::ROOT_AGENT;
use crate::wire::time::rfc3339;
use crate::storage::store::{ConfirmState, RunRecord, RunState, Store};
use crate::thread::conversation::TurnRead;
use crate::thread::tree::Branch;
use crate::thread::{Sink, Status, Thread, REQUESTER};
use serde::Serialize;
use serde_json::{Map, Value};

/// Most runs the detail holds (the newest).
pub const MAX_RUNS: usize = 200;

/// agora's thread detail: the turns' rows (n8n's messages view's fields on
/// each turn's user and last row, agora's after them), with the thread's
/// `queue` in agora's shape, its active run, pinned model and status.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Detail<'t> {
    pub thread_id: &'t str,
    pub messages: Vec<Message>,
    pub next_event_id: u64,
    pub queue: super::queue::View,
    pub page: usize,
    pub limit: usize,
    pub total_runs: usize,
    pub active_run_id: Option<String>,
    pub model: Option<String>,
    pub status: Status,
}

/// One row of the detail.
#[derive(Serialize)]
#[serde(untagged)]
pub enum Message {
    User(UserRow),
    /// A model step before the turn's last (`<runId>:assistant:step-<n>`).
    Step(StepHead),
    /// The turn's last row (`<runId>:assistant`).
    Last(Box<LastRow>),
}

/// The user's message (with the fields the thread's other messages views
/// give it), then what it asked of its turn and the run answering it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserRow {
    id: String,
    role: &'static str,
    created_at: String,
    content: String,
    reasoning: &'static str,
    is_streaming: bool,
    /// Each file with its URL on the request's origin; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    attachments: Option<Vec<Value>>,
    run_id: String,
    sent_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    page_context: Option<Value>,
    /// Extension: where the message stands among its edits; absent when
    /// it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    branch: Option<Branch>,
}

/// An earlier step's row: its place in the turn, then what it streamed.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepHead {
    id: String,
    run_id: String,
    role: &'static str,
    created_at: String,
    #[serde(flatten)]
    row: Row,
}

/// The turn's last row: the answer (the last step's text and reasoning,
/// its state and the agent tree folded from the log), the last step's
/// fields, then the turn's.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastRow {
    id: String,
    run_id: String,
    role: &'static str,
    created_at: String,
    content: String,
    reasoning: String,
    is_streaming: bool,
    status: &'static str,
    agent_tree: Option<crate::log::reducer::AgentNode>,
    reasoning_ms: i64,
    tool_calls: Vec<Call>,
    tool_results: Vec<CallResult>,
    approvals: Vec<Approval>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<Value>,
    model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_name: Option<String>,
    /// Extension: where the answer stands among the answers to its
    /// message (run ids, as `regenerate` with `messageId` takes them);
    /// absent when it is the only one.
    #[serde(skip_serializing_if = "Option::is_none")]
    branch: Option<Branch>,
    /// Extension: the compaction of the model's context made during the
    /// turn (a quiet marker: the conversation shown is whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    context_compacted: Option<crate::log::event::payload::ContextCompacted>,
}

/// The thread's detail; a message's `attachments` carry their URL on
/// `origin`. Each turn's earlier steps come before its last row.
pub fn detail<'t, S: Store, K: Sink>(t: &'t Thread<S, K>, origin: &str) -> Result<Detail<'t>, ApiError> {
    let conversation = t.conversation();
    let (turns, total) = conversation.turns(MAX_RUNS, 0)?;
    let mut messages = Vec::with_capacity(turns.len() * 2);
    for turn in &turns {
        let run = &turn.run;
        messages.push(Message::User(user_row(turn, turn.thread(conversation.thread_id()), origin)));
        let mut rows = steps(t, run, &turn.events)?;
        let last = rows.pop().expect("a turn has one row at least");
        let at = rfc3339(run.created_at);
        for (n, row) in rows.into_iter().enumerate() {
            messages.push(Message::Step(StepHead {
                id: format!("{}:assistant:step-{}", run.run_id, n + 1),
                run_id: run.run_id.clone(),
                role: "assistant",
                created_at: at.clone(),
                row,
            }));
        }
        messages.push(Message::Last(Box::new(last_row(turn, last))));
    }
    Ok(Detail {
        thread_id: conversation.thread_id(),
        messages,
        next_event_id: conversation.last_seq() + 1,
        queue: super::queue::view(conversation.queue()),
        page: 0,
        limit: MAX_RUNS,
        total_runs: total,
        active_run_id: t.runs().active_run().map(|r| r.run_id.clone()),
        model: conversation.pin()?,
        status: t.runs().status(conversation.queue()),
    })
}

/// The user's message of `turn`, with what it asked of its turn and the
/// run answering it.
fn user_row(turn: &TurnRead, thread_id: &str, origin: &str) -> UserRow {
    let run = &turn.run;
    let attachments = &run.turn.attachments;
    UserRow {
        id: run.message_id.clone(),
        role: "user",
        created_at: rfc3339(run.created_at),
        content: run.message.clone(),
        reasoning: "",
        is_streaming: false,
        attachments: (!attachments.is_empty())
            .then(|| attachments.iter().map(|a| a.to_json(origin, thread_id)).collect()),
        run_id: run.run_id.clone(),
        sent_at: rfc3339(run.turn.sent_at.unwrap_or(run.created_at)),
        agent: run.turn.agent.clone(),
        page_context: run.turn.page_context.clone(),
        branch: turn.branches.message.clone(),
    }
}

/// The turn's last row: the answer n8n's view gives, with the last step's
/// row and the turn's own fields.
fn last_row(turn: &TurnRead, last: Row) -> LastRow {
    let run = &turn.run;
    LastRow {
        id: format!("{}:assistant", run.run_id),
        run_id: run.run_id.clone(),
        role: "assistant",
        created_at: rfc3339(run.created_at),
        content: last.content,
        reasoning: last.reasoning,
        is_streaming: run.state == RunState::Running,
        status: run.state.as_str(),
        agent_tree: turn.root(),
        reasoning_ms: last.reasoning_ms,
        tool_calls: last.tool_calls,
        tool_results: last.tool_results,
        approvals: last.approvals,
        usage: last.usage,
        output: last.output,
        model: run.model.clone(),
        agent: run.turn.agent.clone(),
        agent_name: run.turn.agent.clone(),
        branch: turn.branches.answer.clone(),
        context_compacted: turn.compacted(),
    }
}

/// One model step of the root agent, as its row says it.
#[derive(Default)]
struct StepRow {
    /// Text segments by response id: a later block of a segment replaces
    /// the one it extends.
    text: Vec<(Option<String>, String)>,
    reasoning: Vec<(Option<String>, String)>,
    reasoning_ms: i64,
    calls: Vec<Called>,
    usage: Option<Usage>,
}

/// A call the step made, as its `tool-call` said it.
struct Called {
    id: String,
    name: String,
    input: Value,
    kind: Option<String>,
}

/// How a call ended, as its run's log says.
enum Ended {
    Output(Value),
    Error(String),
}

/// A step's row: what it streamed, its calls with their results and
/// approvals, and its usage.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    content: String,
    reasoning: String,
    reasoning_ms: i64,
    tool_calls: Vec<Call>,
    tool_results: Vec<CallResult>,
    approvals: Vec<Approval>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
    /// The turn's structured output, on its last row.
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Call {
    id: String,
    name: String,
    input: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_kind: Option<String>,
    status: &'static str,
}

/// agora's result of a call: keyed `id`, with the call's name; a refused or
/// lapsed call is `denied` (`expired` too), an error carries its text.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CallResult {
    id: String,
    tool_call_id: String,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    denied: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expired: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_error: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Approval {
    tool_call_id: String,
    approver: String,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    /// How it settled, who decided, through which surface.
    #[serde(flatten)]
    settlement: Map<String, Value>,
}

/// What the step's model call used (absent, never `null`, when it reported
/// none).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Usage {
    input_tokens: u64,
    output_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    cost_usd: Option<f64>,
}

fn put(segments: &mut Vec<(Option<String>, String)>, rid: &Option<String>, text: &str) {
    match segments.iter_mut().rev().find(|(r, _)| r == rid && rid.is_some()) {
        Some((_, held)) if text.starts_with(held.as_str()) => *held = text.to_owned(),
        _ => segments.push((rid.clone(), text.to_owned())),
    }
}

/// The turn's rows, one per model step of its root agent (at least one).
fn steps<S: Store, K: Sink>(t: &Thread<S, K>, run: &RunRecord, events: &[Event]) -> Result<Vec<Row>, ApiError> {
    let mut steps: Vec<StepRow> = vec![StepRow::default()];
    let mut started = false;
    let mut results: Vec<(String, Ended)> = Vec::new();
    let mut output = Value::Null;
    let mut before = run.created_at;
    for ev in events {
        let root = ev.agent_id == ROOT_AGENT;
        let step = steps.last_mut().expect("one step at least");
        match &ev.payload {
            Payload::StepStart(_) if root => {
                if started {
                    steps.push(StepRow::default());
                }
                started = true;
            }
            Payload::TextBlock(t) if root => put(&mut step.text, &ev.response_id, &t.text),
            // A reasoning segment is stored as it closes: it took from the
            // event before it until then.
            Payload::ReasoningBlock(t) if root => {
                put(&mut step.reasoning, &ev.response_id, &t.text);
                step.reasoning_ms += (ev.ts - before).max(0);
            }
            Payload::ToolCall(call) if root => step.calls.push(Called {
                id: call.tool_call_id.clone(),
                name: call.tool_name.clone(),
                input: call.args.clone(),
                kind: call.tool_kind.clone(),
            }),
            Payload::ToolResult(r) if root => results.push((r.tool_call_id.clone(), Ended::Output(r.result.clone()))),
            Payload::ToolError(e) | Payload::ToolInterrupted(e) if root => {
                results.push((e.tool_call_id.clone(), Ended::Error(e.error.clone())))
            }
            Payload::StepFinish(finish) if root => {
                if let Some((input, output)) = finish.token_counts() {
                    step.usage = Some(Usage {
                        input_tokens: input.as_u64().unwrap_or(0),
                        output_tokens: output.as_u64().unwrap_or(0),
                        cost_usd: finish.cost_usd,
                    });
                }
            }
            Payload::RunFinish(fin) => output = fin.output.clone().unwrap_or(Value::Null),
            // A sub-agent's steps are its spawn call's; live-only text is
            // in the blocks; the rest is not part of a row.
            Payload::StepStart(_)
            | Payload::TextBlock(_)
            | Payload::ReasoningBlock(_)
            | Payload::ToolCall(_)
            | Payload::ToolResult(_)
            | Payload::ToolError(_)
            | Payload::ToolInterrupted(_)
            | Payload::StepFinish(_)
            | Payload::RunStart(_)
            | Payload::TextDelta(_)
            | Payload::ReasoningDelta(_)
            | Payload::ToolInputStart(_)
            | Payload::AgentSpawned(_)
            | Payload::AgentCompleted(_)
            | Payload::ConfirmationRequest(_)
            | Payload::ConfirmationSettled(_)
            | Payload::TasksUpdate(_)
            | Payload::Status(_)
            | Payload::Error(_)
            | Payload::ThreadTitleUpdated(_)
            | Payload::FilesystemRequest(_)
            | Payload::QueueUpdated(_)
            | Payload::BranchSwitched(_)
            | Payload::ContextCompacted(_)
            | Payload::ContextCompactionFailed(_) => {}
        }
        if ev.kind().class() != crate::log::event::Class::Ephemeral {
            before = ev.ts;
        }
    }
    let last = steps.len() - 1;
    let mut rows = Vec::with_capacity(steps.len());
    for (i, step) in steps.into_iter().enumerate() {
        let mut row = row(t, run, step, &results)?;
        if i == last && !output.is_null() {
            row.output = Some(output.clone());
        }
        rows.push(row);
    }
    Ok(rows)
}

/// A step's row: its text, reasoning, calls with their results and
/// approvals, and usage.
fn row<S: Store, K: Sink>(
    t: &Thread<S, K>,
    run: &RunRecord,
    step: StepRow,
    results: &[(String, Ended)],
) -> Result<Row, ApiError> {
    let join = |segments: &[(Option<String>, String)]| segments.iter().map(|(_, s)| s.as_str()).collect::<String>();
    let mut calls = Vec::with_capacity(step.calls.len());
    let mut out_results = Vec::new();
    let mut approvals = Vec::new();
    for c in step.calls {
        let id = c.id;
        let result = results.iter().find(|(r, _)| *r == id).map(|(_, v)| v);
        let request = t.conversation().request_for_call(&id)?;
        let state = request.as_ref().map(|r| r.state);
        let status = match (&request, result) {
            (Some(r), _) if r.state == ConfirmState::Pending => {
                if r.input_type == "approval" { "pending_approval" } else { "pending_input" }
            }
            (Some(r), _) if r.state == ConfirmState::Denied => "denied",
            (Some(r), _) if r.state == ConfirmState::Expired => "expired",
            (_, Some(Ended::Error(_))) => "error",
            (_, Some(Ended::Output(_))) => "completed",
            _ if run.state == RunState::Running => "running",
            _ => "cancelled",
        };
        let named = |r: CallResult| CallResult { id: id.clone(), tool_call_id: id.clone(), name: c.name.clone(), ..r };
        let none = CallResult {
            id: String::new(),
            tool_call_id: String::new(),
            name: String::new(),
            denied: None,
            expired: None,
            error: None,
            is_error: None,
            output: None,
        };
        let ended = match (state, result) {
            (Some(ConfirmState::Denied | ConfirmState::Expired), _) => Some(named(CallResult {
                denied: Some(true),
                expired: (state == Some(ConfirmState::Expired)).then_some(true),
                ..none
            })),
            (_, Some(Ended::Error(e))) => {
                Some(named(CallResult { error: Some(e.clone()), is_error: Some(true), ..none }))
            }
            (_, Some(Ended::Output(v))) => Some(named(CallResult { output: Some(v.clone()), ..none })),
            _ => None,
        };
        out_results.extend(ended);
        if let Some(r) = request.filter(|r| r.input_type == "approval") {
            approvals.push(Approval {
                tool_call_id: id.clone(),
                approver: r.approver.clone().unwrap_or_else(|| REQUESTER.to_owned()),
                status: match r.state {
                    ConfirmState::Denied => "rejected",
                    s => s.as_str(),
                },
                expires_at: r.expires_at.map(rfc3339),
                settlement: r.settlement(),
            });
        }
        calls.push(Call { id, name: c.name, input: c.input, tool_kind: c.kind.clone(), kind: c.kind, status });
    }
    Ok(Row {
        content: join(&step.text),
        reasoning: join(&step.reasoning),
        reasoning_ms: step.reasoning_ms,
        tool_calls: calls,
        tool_results: out_results,
        approvals,
        usage: step.usage,
        output: None,
    })
}
