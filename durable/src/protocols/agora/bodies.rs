//! agora's request bodies: a decision on a tool call, and where a send's
//! thread is.

use crate::wire::error::ApiError;
use crate::wire::ids;
use crate::log::queued::QueuePatch;
use crate::input::Mode;
use crate::thread::{DecisionBody, ApprovalScope};
use serde_json::Value;

/// agora's `POST /agent/tool-call/approve|reject {runId?, toolCallId,
/// reason?, via?, remember?}`.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDecision {
    pub tool_call_id: String,
    pub run_id: Option<String>,
    /// Who decided, as the client says (`web` by default).
    pub via: String,
    /// `remember: true` approves the tool for the rest of the thread.
    pub remember: bool,
    pub reason: Option<String>,
}

impl ToolDecision {
    pub fn parse(body: &Value, approve: bool) -> Result<ToolDecision, ApiError> {
        let bad = |m: &str| ApiError::invalid_decision(m.to_owned());
        let Some(call) = body.get("toolCallId").and_then(Value::as_str) else {
            return Err(bad("`toolCallId` is required"));
        };
        let run_id = match body.get("runId") {
            None | Some(Value::Null) => None,
            Some(Value::String(r)) => Some(r.clone()),
            Some(_) => return Err(bad("`runId` must be a string")),
        };
        let via = match body.get("via") {
            None | Some(Value::Null) => "web".to_owned(),
            Some(Value::String(v)) if (1..=64).contains(&v.chars().count()) => v.clone(),
            Some(_) => return Err(bad("`via` is 1 to 64 characters")),
        };
        let remember = match body.get("remember") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) if *b && !approve => return Err(bad("`remember` applies to approvals")),
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(bad("`remember` must be a boolean")),
        };
        let reason = match body.get("reason") {
            None | Some(Value::Null) => None,
            Some(Value::String(r)) => Some(r.clone()),
            Some(_) => return Err(bad("`reason` must be a string")),
        };
        Ok(ToolDecision { tool_call_id: call.to_owned(), run_id, via, remember, reason })
    }

    /// The decision body this amounts to on the confirm route.
    pub fn as_decision(&self, approve: bool) -> Value {
        DecisionBody {
            approved: Some(approve),
            scope: self.remember.then_some(ApprovalScope::Session),
            user_input: self.reason.clone(),
            ..DecisionBody::default()
        }
        .to_value()
    }
}

/// agora's `POST /agent/tool-call/answer|skip {runId?, toolCallId,
/// answer?, answers?}`: a question the agent asked (`ask-user`), answered
/// with text (`answer`), with the confirm route's `answers`, or skipped.
#[derive(Clone, Debug, PartialEq)]
pub struct QuestionAnswer {
    pub tool_call_id: String,
    pub run_id: Option<String>,
    /// The surface it came through (`web` by default).
    pub via: String,
    /// The decision body this amounts to on the confirm route.
    pub decision: Value,
}

impl QuestionAnswer {
    pub fn parse(body: &Value, skip: bool) -> Result<QuestionAnswer, ApiError> {
        let bad = |m: &str| ApiError::invalid_decision(m.to_owned());
        let d = ToolDecision::parse(body, true)?;
        let decision = match (skip, body.get("answers"), body.get("answer")) {
            (true, _, _) => {
                serde_json::json!({ "answers": [{ "questionId": "answer", "selectedOptions": [], "skipped": true }] })
            }
            (false, Some(answers @ Value::Array(_)), _) => serde_json::json!({ "answers": answers }),
            (false, None, Some(Value::String(text))) => {
                serde_json::json!({ "answers": [{ "questionId": "answer", "selectedOptions": [], "customText": text }] })
            }
            _ => return Err(bad("an answer is `answer` (a string) or `answers` (an array)")),
        };
        Ok(QuestionAnswer { tool_call_id: d.tool_call_id, run_id: d.run_id, via: d.via, decision })
    }
}

/// agora's `POST /agent/chat {threadId?, ...}`: the thread it names, or a new
/// one (`new_thread`) when none is named. `regenerate` needs a thread.
pub fn agora_chat_thread(body: &Value, new_thread: impl FnOnce() -> String) -> Result<String, ApiError> {
    let named = match body.get("threadId") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(ids::id(t)?),
        Some(_) => return Err(ApiError::invalid_id("`threadId` must be a string")),
    };
    if body.get("regenerate").and_then(Value::as_bool) == Some(true) && named.is_none() {
        return Err(ApiError::thread_required("regenerate needs `threadId`"));
    }
    Ok(named.unwrap_or_else(new_thread))
}

/// agora's `POST /agent/chat` body as the thread's send takes it: agora's
/// `mode` is `auto` unless named (run now, or queue behind the run holding
/// the thread: 202), `interrupt: true` without a mode is `interrupt`, and an
/// interrupt on an idle thread is an `auto` send (it streams, as agora's
/// does). `reject` (409 while a run holds the thread) stays ours to ask for.
pub fn agora_mode(body: &Value, busy: bool) -> Result<Mode, ApiError> {
    let mode = match body.get("mode") {
        None | Some(Value::Null) if body.get("interrupt") == Some(&Value::Bool(true)) => Mode::Interrupt,
        None | Some(Value::Null) => Mode::Auto,
        Some(Value::String(m)) => match m.as_str() {
            "auto" => Mode::Auto,
            "queue" => Mode::Queue,
            "interrupt" => Mode::Interrupt,
            "reject" => Mode::Reject,
            _ => return Err(ApiError::invalid_mode()),
        },
        Some(_) => return Err(ApiError::invalid_mode()),
    };
    Ok(if mode == Mode::Interrupt && !busy { Mode::Auto } else { mode })
}

/// `PATCH /agent/queue/:messageId` (agora's `QueuedMessagePatch`) and
/// `PATCH /agent/threads/:id/queue/:messageId`: new text (`content`, or our
/// `message`), `attachments: null` to drop every file, a new place
/// (`position`, 0 runs next), or several. New attachments cannot be put on a
/// waiting message (400): remove it and send again. `interrupt` is the
/// interrupt route's (`POST /agent/queue/:messageId/interrupt`).
pub fn queue_patch(body: &Value, max_message_bytes: usize) -> Result<QueuePatch, ApiError> {
    let drop_attachments = match body.get("attachments") {
        None => false,
        Some(Value::Null) => true,
        Some(_) => return Err(ApiError::invalid_body("a waiting message's attachments can only be dropped (`null`); remove it and send again")),
    };
    if body.get("interrupt").is_some_and(|v| v != &Value::Bool(false)) {
        return Err(ApiError::invalid_body("interrupt a waiting message with POST /agent/queue/:messageId/interrupt"));
    }
    let text = match (body.get("content"), body.get("message")) {
        (Some(c), Some(m)) if !c.is_null() && !m.is_null() => {
            return Err(ApiError::invalid_body("name the new text once: `content` or `message`"))
        }
        (Some(c), _) if !c.is_null() => Some(c),
        (_, Some(m)) if !m.is_null() => Some(m),
        _ => None,
    };
    let message = text.map(|t| crate::input::queue_text(Some(t), max_message_bytes)).transpose()?;
    let position = match body.get("position") {
        None | Some(Value::Null) => None,
        Some(_) => Some(crate::input::queue_move(body)?),
    };
    if message.is_none() && position.is_none() && !drop_attachments {
        return Err(ApiError::invalid_body("a queued message's edit names `content`, `attachments: null`, `position` or several"));
    }
    Ok(QueuePatch { message, drop_attachments, position })
}

/// agora's `POST /agent/tool-call/approve|reject {runId?, toolCallId}`: the
/// thread is in the run id, or in the call id the built-in agent made.
pub fn agora_decision_thread(body: &Value) -> Result<String, ApiError> {
    let str_of = |k: &str| body.get(k).and_then(Value::as_str);
    str_of("runId")
        .and_then(ids::thread_of)
        .or_else(|| str_of("toolCallId").and_then(ids::thread_of))
        .map(str::to_owned)
        .ok_or_else(ApiError::tool_call_not_found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_decisions() {
        let d = ToolDecision::parse(&json!({"toolCallId": "t.c", "remember": true, "reason": "ok"}), true).unwrap();
        assert_eq!(d.as_decision(true), json!({"approved": true, "scope": "session", "userInput": "ok"}));
        assert!(ToolDecision::parse(&json!({"toolCallId": "c", "remember": true}), false).is_err());
        assert!(ToolDecision::parse(&json!({"toolCallId": "c", "via": ""}), true).is_err());
        assert!(ToolDecision::parse(&json!({}), true).is_err());
        let a = QuestionAnswer::parse(&json!({"toolCallId": "t.c", "answer": "blue"}), false).unwrap();
        assert_eq!(a.decision["answers"][0]["customText"], "blue");
        let s = QuestionAnswer::parse(&json!({"toolCallId": "t.c"}), true).unwrap();
        assert_eq!(s.decision["answers"][0]["skipped"], true);
        assert_eq!(QuestionAnswer::parse(&json!({"toolCallId": "t.c", "answer": 3}), false).unwrap_err().code, "invalid_decision");
    }

    #[test]
    fn agora_threads() {
        assert_eq!(agora_chat_thread(&json!({}), || "new".into()).unwrap(), "new");
        assert_eq!(agora_chat_thread(&json!({"threadId": "t1"}), || "new".into()).unwrap(), "t1");
        assert_eq!(agora_chat_thread(&json!({"regenerate": true}), || "n".into()).unwrap_err().code, "thread_required");
        assert_eq!(agora_chat_thread(&json!({"threadId": 5}), || "n".into()).unwrap_err().code, "invalid_id");
        assert_eq!(agora_decision_thread(&json!({"toolCallId": "t1.tc_1"})).unwrap(), "t1");
        assert_eq!(agora_decision_thread(&json!({"runId": "x"})).unwrap_err().code, "tool_call_not_found");
    }

    #[test]
    fn agora_sends_and_queue_edits() {
        let mode = |body: Value, busy| agora_mode(&body, busy);
        assert_eq!(mode(json!({"message": "m"}), true).unwrap(), Mode::Auto);
        assert_eq!(mode(json!({"interrupt": true}), true).unwrap(), Mode::Interrupt);
        assert_eq!(mode(json!({"interrupt": true}), false).unwrap(), Mode::Auto);
        assert_eq!(mode(json!({"mode": "interrupt"}), false).unwrap(), Mode::Auto);
        assert_eq!(mode(json!({"mode": "queue", "interrupt": true}), true).unwrap(), Mode::Queue);
        assert_eq!(mode(json!({"mode": "reject"}), true).unwrap(), Mode::Reject);
        assert_eq!(mode(json!({"mode": "later"}), true).unwrap_err().code, "invalid_mode");
        assert_eq!(mode(json!({"mode": 1}), true).unwrap_err().code, "invalid_mode");
        let e = queue_patch(&json!({"message": "new", "position": 0}), 100).unwrap();
        assert_eq!(e, QueuePatch { message: Some("new".into()), drop_attachments: false, position: Some(0) });
        let e = queue_patch(&json!({"content": "agora's", "attachments": null}), 100).unwrap();
        assert_eq!(e, QueuePatch { message: Some("agora's".into()), drop_attachments: true, position: None });
        assert_eq!(queue_patch(&json!({"content": "a", "message": "b"}), 100).unwrap_err().code, "invalid_body");
        assert_eq!(queue_patch(&json!({"content": 5}), 100).unwrap_err().code, "message_required");
        assert_eq!(queue_patch(&json!({"interrupt": true}), 100).unwrap_err().code, "invalid_body");
        assert!(queue_patch(&json!({"interrupt": false, "position": 0}), 100).is_ok());
        assert_eq!(queue_patch(&json!({}), 100).unwrap_err().code, "invalid_body");
        assert_eq!(queue_patch(&json!({"attachments": []}), 100).unwrap_err().code, "invalid_body");
        assert_eq!(queue_patch(&json!({"attachments": null, "position": 1}), 100).unwrap().position, Some(1));
        assert_eq!(queue_patch(&json!({"position": -1}), 100).unwrap_err().code, "invalid_position");
        assert_eq!(queue_patch(&json!({"message": ""}), 100).unwrap_err().code, "message_required");
    }
}
