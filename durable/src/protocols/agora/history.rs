//! agora's thread detail (`GET /agent/threads/:id`, agora's "Persisted
//! history"): the messages a reload rebuilds its transcript from. A user
//! message carries what it asked of its turn (agent, page context, when it
//! was sent); an assistant message what its turn streamed: text, reasoning
//! and how long it took (`reasoningMs`), its tool calls with their status
//! (`pending_approval` while a person must decide, so a client learns the
//! pending call from here), their results, its approvals, its structured
//! output and usage. The thread's `activeRunId`, `queue`, pinned `model` and
//! status come with them.

use crate::error::ApiError;
use crate::event::{Event, Kind};
use crate::ids::ROOT_AGENT;
use crate::quota::rfc3339;
use crate::store::{ConfirmState, RunRecord, RunState, Store};
use crate::thread::{Sink, Thread, REQUESTER};
use serde_json::{json, Value};

/// Most runs the detail holds (the newest).
pub const MAX_RUNS: usize = 200;

/// The thread's messages view (`Thread::messages`, every field of which
/// it keeps: an older client reads it as before), with agora's fields; a
/// message's `attachments` carry their URL on `origin`.
pub fn detail<S: Store, K: Sink>(t: &Thread<S, K>, origin: &str) -> Result<Value, ApiError> {
    let merge = |into: &mut Value, extra: Value| {
        if let (Some(into), Value::Object(extra)) = (into.as_object_mut(), extra) {
            into.extend(extra);
        }
    };
    let mut view = t.messages_with(MAX_RUNS, 0, origin, &mut |run, events, user, assistant| {
        merge(user, user_message(run));
        merge(assistant, assistant_message(t, run, events)?);
        Ok(())
    })?;
    view["activeRunId"] = t.active_run().map(|r| r.run_id.clone()).into();
    view["model"] = t.pin()?.into();
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

/// What an assistant message's turn streamed, beyond its text.
fn assistant_message<S: Store, K: Sink>(t: &Thread<S, K>, run: &RunRecord, events: &[Event]) -> Result<Value, ApiError> {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    let mut approvals = Vec::new();
    let mut reasoning_ms = 0i64;
    let mut output = Value::Null;
    let mut before = run.created_at;
    for ev in events {
        let p = &ev.payload;
        let id = p["toolCallId"].as_str().unwrap_or_default();
        match ev.kind {
            // A reasoning segment is stored as it closes: it took from the
            // event before it until then.
            Kind::ReasoningBlock if ev.agent_id == ROOT_AGENT => reasoning_ms += (ev.ts - before).max(0),
            Kind::ToolCall if ev.agent_id == ROOT_AGENT => {
                let mut c = json!({ "id": id, "name": p["toolName"], "input": p["args"] });
                if let Some(k) = p.get("toolKind") {
                    c["toolKind"] = k.clone();
                }
                calls.push(c);
            }
            Kind::ToolResult if ev.agent_id == ROOT_AGENT => {
                results.push(json!({ "toolCallId": id, "output": p["result"] }));
            }
            Kind::ToolError | Kind::ToolInterrupted if ev.agent_id == ROOT_AGENT => {
                results.push(json!({ "toolCallId": id, "error": p["error"], "isError": true }));
            }
            Kind::RunFinish => output = p.get("output").cloned().unwrap_or(Value::Null),
            _ => {}
        }
        if ev.kind.class() != crate::event::Class::Ephemeral {
            before = ev.ts;
        }
    }
    for c in &mut calls {
        let id = c["id"].as_str().unwrap_or_default().to_owned();
        let result = results.iter().find(|r| r["toolCallId"] == id.as_str());
        let request = t.store().confirmation_by_call(&id).map_err(ApiError::storage)?;
        let status = match (&request, result) {
            (Some(r), _) if r.state == ConfirmState::Pending => {
                if r.input_type == "approval" { "pending_approval" } else { "pending_input" }
            }
            (Some(r), _) if r.state == ConfirmState::Denied => "denied",
            (Some(r), _) if r.state == ConfirmState::Expired => "expired",
            (_, Some(r)) if r["isError"] == true => "error",
            (_, Some(_)) => "completed",
            _ if run.state == RunState::Running => "running",
            _ => "cancelled",
        };
        c["status"] = status.into();
        if let Some(r) = request.filter(|r| r.input_type == "approval") {
            let mut a = json!({
                "toolCallId": id,
                "approver": r.approver.clone().unwrap_or_else(|| REQUESTER.to_owned()),
                "status": r.state.as_str(),
            });
            if let Some(at) = r.expires_at {
                a["expiresAt"] = rfc3339(at).into();
            }
            if let Value::Object(fields) = &mut a {
                fields.extend(r.settlement());
            }
            approvals.push(a);
        }
    }
    let mut m = json!({
        "reasoningMs": reasoning_ms,
        "toolCalls": calls,
        "toolResults": results,
        "approvals": approvals,
        "model": run.model,
    });
    if !output.is_null() {
        m["output"] = output;
    }
    if let Some(a) = &run.turn.agent {
        m["agent"] = a.clone().into();
    }
    Ok(m)
}
