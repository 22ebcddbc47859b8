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
//! status come with them.

use crate::wire::error::ApiError;
use crate::log::event::{Event, Payload};
use crate::wire::ids::ROOT_AGENT;
use crate::wire::time::rfc3339;
use crate::storage::store::{ConfirmState, RunRecord, RunState, Store};
use crate::thread::{Sink, Thread, REQUESTER};
use serde::Serialize;
use serde_json::{json, Map, Value};

/// Most runs the detail holds (the newest).
pub const MAX_RUNS: usize = 200;

/// The thread's messages view (`Thread::messages`, whose fields a turn's
/// last row keeps) with agora's rows; a message's `attachments` carry their
/// URL on `origin`.
pub fn detail<S: Store, K: Sink>(t: &Thread<S, K>, origin: &str) -> Result<Value, ApiError> {
    let merge = |into: &mut Value, extra: Value| {
        if let (Some(into), Value::Object(extra)) = (into.as_object_mut(), extra) {
            into.extend(extra);
        }
    };
    // Each run's earlier steps, by run, put before its last row below.
    let mut earlier: Vec<(String, Vec<Value>)> = Vec::new();
    let mut view = t.conversation().messages_with::<ApiError>(MAX_RUNS, 0, origin, &mut |run, events, user, assistant| {
        merge(user, user_message(run));
        let mut rows: Vec<Value> = steps(t, run, events)?
            .into_iter()
            .map(|r| serde_json::to_value(r).expect("a row serialises"))
            .collect();
        let last = rows.pop().unwrap_or_default();
        if let Some(o) = assistant.as_object_mut() {
            // Agora's fields, not the n8n tree's: the step's text and usage.
            o.remove("usage");
        }
        merge(assistant, last);
        merge(assistant, run_fields(run));
        let at = rfc3339(run.created_at);
        for (n, row) in rows.iter_mut().enumerate() {
            let head = json!({
                "id": format!("{}:assistant:step-{}", run.run_id, n + 1),
                "runId": run.run_id,
                "role": "assistant",
                "createdAt": at,
            });
            let fields = std::mem::take(row);
            *row = head;
            merge(row, fields);
        }
        earlier.push((run.run_id.clone(), rows));
        Ok(())
    })?;
    if let Some(messages) = view["messages"].as_array_mut() {
        let mut out = Vec::with_capacity(messages.len());
        for m in messages.drain(..) {
            if m["role"] == "assistant" {
                if let Some((_, rows)) = earlier.iter_mut().find(|(r, _)| m["runId"] == r.as_str()) {
                    out.append(rows);
                }
            }
            out.push(m);
        }
        *messages = out;
    }
    view["queue"] = super::queue::of(t.queue());
    view["activeRunId"] = t.runs().active_run().map(|r| r.run_id.clone()).into();
    view["model"] = t.conversation().pin()?.into();
    view["status"] = t.status();
    Ok(view)
}

/// What a user message asked of its turn, and the run answering it.
fn user_message(run: &RunRecord) -> Value {
    let mut m = json!({ "runId": run.run_id, "sentAt": rfc3339(run.turn.sent_at.unwrap_or(run.created_at)) });
    if let Some(a) = &run.turn.agent {
        m["agent"] = a.clone().into();
    }
    if let Some(p) = &run.turn.page_context {
        m["pageContext"] = p.clone();
    }
    m
}

/// The turn's own fields, on its last row.
fn run_fields(run: &RunRecord) -> Value {
    let mut m = json!({ "model": run.model });
    if let Some(a) = &run.turn.agent {
        m["agent"] = a.clone().into();
        m["agentName"] = a.clone().into();
    }
    m
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
            | Payload::QueueUpdated(_) => {}
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
