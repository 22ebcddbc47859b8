//! Every request body and query the thread takes, parsed and checked here,
//! apart from any I/O (as mini-redis keeps its parser apart from its
//! connection). The shell hands over bytes and the query string; what comes
//! back is typed, or a 4xx [`ApiError`] with a stable code. Nothing here
//! touches state, so a refused request stores nothing.

use crate::error::ApiError;
use crate::ids;
use crate::models::Catalog;
use serde_json::Value;

/// A JSON body: 400 `invalid_json` when empty or not JSON, 413
/// `body_too_large` over `limit` bytes.
pub fn json(bytes: &[u8], limit: usize) -> Result<Value, ApiError> {
    if bytes.len() > limit {
        return Err(ApiError::body_too_large(limit));
    }
    if bytes.is_empty() {
        return Err(ApiError::invalid_json("the body is empty; a JSON body is required"));
    }
    serde_json::from_slice(bytes).map_err(|e| ApiError::invalid_json(format!("the body is not valid JSON: {e}")))
}

/// The query string's pairs, percent-decoded, in order.
pub fn query_pairs(query: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(query.trim_start_matches('?').as_bytes()).into_owned().collect()
}

/// The first value of query parameter `name`.
pub fn query_first(pairs: &[(String, String)], name: &str) -> Option<String> {
    pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

/// Every value of query parameter `name`, in order.
pub fn query_all(pairs: &[(String, String)], name: &str) -> Vec<String> {
    pairs.iter().filter(|(k, _)| k == name).map(|(_, v)| v.clone()).collect()
}

/// What a send does while a run holds the thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// 409 `run_active` (the default).
    Reject,
    /// Wait in the thread's queue (202).
    Queue,
    /// Cancel the active run and run this message next.
    Interrupt,
}

/// What a send asks for, once its body is checked.
#[derive(Clone, Debug, PartialEq)]
pub enum Send {
    /// `regenerate: true`: answer the last user message again.
    Regenerate {
        model: Option<String>,
    },
    Message {
        message: String,
        mode: Mode,
        model: Option<String>,
    },
}

impl Send {
    /// `{message, mode?, model?, regenerate?}` (`POST /instance-ai/chat/:id`,
    /// agora's `POST /agent/chat`). The model is checked against `catalog`;
    /// checks run in this order: model, regenerate, message, size, mode.
    pub fn parse(body: &Value, catalog: &Catalog, max_message_bytes: usize) -> Result<Send, ApiError> {
        let model = match body.get("model") {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) => Some(catalog.check(id).map(|_| id.clone())?),
            Some(_) => return Err(ApiError::model_not_allowed("`model` must be a catalog model id")),
        };
        if body.get("regenerate").and_then(Value::as_bool) == Some(true) {
            return Ok(Send::Regenerate { model });
        }
        let message = match body.get("message") {
            Some(Value::String(m)) if !m.trim().is_empty() => m.clone(),
            Some(Value::String(_)) | None => {
                return Err(ApiError::message_required("`message` must be a non-empty string"))
            }
            Some(_) => return Err(ApiError::message_required("`message` must be a string")),
        };
        if message.len() > max_message_bytes {
            return Err(ApiError::message_too_large(max_message_bytes));
        }
        let mode = match body.get("mode") {
            None | Some(Value::Null) => Mode::Reject,
            Some(Value::String(m)) if m == "reject" => Mode::Reject,
            Some(Value::String(m)) if m == "queue" => Mode::Queue,
            Some(Value::String(m)) if m == "interrupt" => Mode::Interrupt,
            Some(_) => return Err(ApiError::invalid_mode()),
        };
        Ok(Send::Message { message, mode, model })
    }
}

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
        let mut decision = serde_json::json!({ "approved": approve });
        if self.remember {
            decision["scope"] = "session".into();
        }
        if let Some(r) = &self.reason {
            decision["userInput"] = r.clone().into();
        }
        decision
    }
}

/// `PATCH .../queue/:messageId {message}`: the new text.
pub fn queue_edit(body: &Value, max_message_bytes: usize) -> Result<String, ApiError> {
    match body.get("message") {
        Some(Value::String(m)) if !m.trim().is_empty() && m.len() <= max_message_bytes => Ok(m.clone()),
        _ => Err(ApiError::message_required("`message` must be a non-empty string")),
    }
}

/// `POST .../queue/:messageId/move {position}` (0 runs next).
pub fn queue_move(body: &Value) -> Result<usize, ApiError> {
    body.get("position").and_then(Value::as_u64).map(|p| p as usize).ok_or_else(ApiError::invalid_position)
}

/// `PATCH /agent/threads/:id {model}`: a catalog model id to pin, or `null`.
pub fn pin(body: &Value, catalog: &Catalog) -> Result<Option<String>, ApiError> {
    match body.get("model") {
        Some(Value::Null) => Ok(None),
        Some(Value::String(id)) => Ok(Some(catalog.check(id).map(|_| id.clone())?)),
        _ => Err(ApiError::model_not_allowed("`model` must be a catalog model id or null")),
    }
}

/// `GET .../messages?limit&page`: limit 1..=200 (default 50), page from 0.
pub fn messages_page(query: &[(String, String)]) -> Result<(usize, usize), ApiError> {
    let param = |name: &str, default: usize, max: usize| -> Result<usize, ApiError> {
        match query_first(query, name) {
            None => Ok(default),
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| ApiError::invalid_query(format!("`{name}` must be 0..={max}"))),
        }
    };
    Ok((param("limit", 50, 200)?.max(1), param("page", 0, 1_000_000)?))
}

/// The SSE replay cursor: a `Last-Event-ID` header wins, else the query
/// value, else 0 (full history). Either one malformed is 400 `invalid_cursor`.
pub fn cursor(header: Option<&str>, query: Option<&str>) -> Result<u64, ApiError> {
    let parse = |source: &str, v: &str| {
        let v = v.trim();
        if v.is_empty() || v.len() > 15 || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ApiError::invalid_cursor(format!("{source} must be a non-negative integer event id")));
        }
        Ok(v.parse::<u64>().expect("checked digits"))
    };
    match (header.filter(|h| !h.is_empty()), query) {
        (Some(h), _) => parse("Last-Event-ID", h),
        (None, Some(q)) => parse("lastEventId", q),
        (None, None) => Ok(0),
    }
}

/// agora's re-attach cursor: `?after=n` wins over `Last-Event-ID`.
pub fn run_stream_cursor(header: Option<&str>, after: Option<&str>) -> Result<u64, ApiError> {
    match after {
        Some(a) => cursor(None, Some(a)),
        None => cursor(header, None),
    }
}

/// The shape a publish route accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchShape {
    /// `POST .../runs/:runId/events`: an array (possibly empty) or `{events: [...]}`.
    Events,
    /// `POST /v1/runs/:runId`: an array (not empty), `{events: [...]}`, or one event.
    Stream,
}

/// A publish body as its list of events; 413 `batch_too_large` past
/// `max_events`. One parser for both publish routes.
pub fn batch(body: Value, shape: BatchShape, max_events: usize) -> Result<Vec<Value>, ApiError> {
    let items = match (body, shape) {
        (Value::Object(mut o), _) if o.get("events").is_some_and(Value::is_array) => {
            return batch(o.remove("events").unwrap_or_default(), shape, max_events)
        }
        (Value::Array(items), BatchShape::Events) => items,
        (Value::Array(items), BatchShape::Stream) if !items.is_empty() => items,
        (Value::Array(_), BatchShape::Stream) => return Err(ApiError::invalid_batch("an empty batch appends nothing")),
        (v @ Value::Object(_), BatchShape::Stream) => vec![v],
        (_, BatchShape::Events) => {
            return Err(ApiError::invalid_batch("the body must be a JSON array of events (or {\"events\": [...]})"))
        }
        (_, BatchShape::Stream) => {
            return Err(ApiError::invalid_batch("the body must be a JSON event or an array of events"))
        }
    };
    if items.len() > max_events {
        return Err(ApiError::batch_too_large(max_events));
    }
    Ok(items)
}

/// The bearer token of an `Authorization` header.
pub fn bearer(authorization: Option<&str>) -> Option<&str> {
    authorization.and_then(|h| h.strip_prefix("Bearer ")).map(str::trim).filter(|t| !t.is_empty())
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

/// The AI SDK's `POST /api/chat {id, messages, trigger, messageId?}`: the
/// thread is the chat's `id`.
pub fn ui_chat_thread(body: &Value) -> Result<String, ApiError> {
    match body.get("id") {
        Some(Value::String(t)) => ids::id(t),
        None | Some(Value::Null) => Err(ApiError::thread_required("`id` (the chat id) is required")),
        Some(_) => Err(ApiError::invalid_id("`id` must be a string")),
    }
}

/// What an AI SDK chat request asks for. The thread holds the history: of
/// the client's `messages`, only the last one is read.
#[derive(Clone, Debug, PartialEq)]
pub enum UiChat {
    /// A new user message: its id (the client's) and its text parts joined.
    Message { id: String, text: String },
    /// `trigger: "regenerate-message"`.
    Regenerate,
    /// The assistant message continues after the person answered its
    /// approval requests (tool parts in state `approval-responded`), or the
    /// client ran its own tools (`output-available`, `output-error`).
    Continue { message_id: String, approvals: Vec<UiApproval>, outputs: Vec<ToolOutput> },
}

/// A client tool's outcome, sent back by the client: its result, or its
/// error.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    pub tool_call_id: String,
    pub outcome: Result<Value, String>,
    /// The message that carries it, when the client keeps one (AG-UI's
    /// tool message): the history shows it under the same id.
    pub message_id: Option<String>,
}

/// One answered approval request of a continued message.
#[derive(Clone, Debug, PartialEq)]
pub struct UiApproval {
    /// The approval id: the confirmation's request id.
    pub id: String,
    pub approved: bool,
    pub reason: Option<String>,
}

/// Longest client message id: the run id made from it must be an id too.
pub const MAX_UI_MESSAGE_ID: usize = 100;

impl UiChat {
    /// Checks, in order: `messages` (a non-empty array), `trigger`, the last
    /// message's role, id and parts.
    pub fn parse(body: &Value, max_message_bytes: usize) -> Result<UiChat, ApiError> {
        let Some(Value::Array(messages)) = body.get("messages") else {
            return Err(ApiError::message_required("`messages` must be an array of UI messages"));
        };
        match body.get("trigger").and_then(Value::as_str) {
            Some("regenerate-message") => return Ok(UiChat::Regenerate),
            Some("submit-message") | None => {}
            Some(other) => return Err(ApiError::invalid_body(format!("unknown `trigger` `{other}`"))),
        }
        let Some(last) = messages.last() else {
            return Err(ApiError::message_required("`messages` is empty: send the user's message"));
        };
        let role = last.get("role").and_then(Value::as_str);
        let id = match last.get("id") {
            // An assistant message's id is its run's (`<threadId>.<id>`).
            Some(Value::String(id)) if role == Some("assistant") => ids::run_id(id)?,
            Some(Value::String(id)) if id.len() <= MAX_UI_MESSAGE_ID => ids::id(id)?,
            Some(Value::String(_)) => {
                return Err(ApiError::invalid_id(format!("message ids are at most {MAX_UI_MESSAGE_ID} characters")))
            }
            _ => return Err(ApiError::invalid_body("the last message has no string `id`")),
        };
        let Some(Value::Array(parts)) = last.get("parts") else {
            return Err(ApiError::invalid_body("the last message has no `parts` array"));
        };
        match role {
            Some("user") => {
                let mut text = Vec::new();
                for part in parts {
                    match part.get("type").and_then(Value::as_str) {
                        Some("text") => text.push(part.get("text").and_then(Value::as_str).unwrap_or_default()),
                        Some(kind) => return Err(ApiError::unsupported_part(kind)),
                        None => return Err(ApiError::invalid_body("a message part has no `type`")),
                    }
                }
                let text = text.join("\n");
                if text.trim().is_empty() {
                    return Err(ApiError::message_required("the user message has no text"));
                }
                if text.len() > max_message_bytes {
                    return Err(ApiError::message_too_large(max_message_bytes));
                }
                Ok(UiChat::Message { id, text })
            }
            Some("assistant") => {
                let approvals: Vec<UiApproval> = parts
                    .iter()
                    .filter(|p| p.get("state").and_then(Value::as_str) == Some("approval-responded"))
                    .filter_map(|p| {
                        let a = p.get("approval")?;
                        Some(UiApproval {
                            id: a.get("id")?.as_str()?.to_owned(),
                            approved: a.get("approved")?.as_bool()?,
                            reason: a.get("reason").and_then(Value::as_str).map(str::to_owned),
                        })
                    })
                    .collect();
                let outputs: Vec<ToolOutput> = parts
                    .iter()
                    .filter_map(|p| {
                        let call = p.get("toolCallId")?.as_str()?.to_owned();
                        let outcome = match p.get("state")?.as_str()? {
                            "output-available" => Ok(p.get("output").cloned().unwrap_or(Value::Null)),
                            "output-error" => Err(p.get("errorText")?.as_str()?.to_owned()),
                            _ => return None,
                        };
                        Some(ToolOutput { tool_call_id: call, outcome, message_id: None })
                    })
                    .collect();
                if approvals.is_empty() && outputs.is_empty() {
                    return Err(ApiError::nothing_to_continue(
                        "the last message is the assistant's, with no answered approval request or tool output",
                    ));
                }
                Ok(UiChat::Continue { message_id: id, approvals, outputs })
            }
            _ => Err(ApiError::invalid_body("the last message's `role` must be `user` or `assistant`")),
        }
    }
}

/// AG-UI's `POST /ag-ui` body (`RunAgentInput`): the thread is `threadId`.
pub fn agui_thread(body: &Value) -> Result<String, ApiError> {
    match body.get("threadId") {
        Some(Value::String(t)) => ids::id(t),
        None | Some(Value::Null) => Err(ApiError::thread_required("`threadId` is required")),
        Some(_) => Err(ApiError::invalid_id("`threadId` must be a string")),
    }
}

/// A message's `content` as text: a string, or its text parts joined.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// What an AG-UI run asks for. As on the AI SDK route, the thread holds the
/// history: of the client's `messages` only the last one is read.
#[derive(Clone, Debug, PartialEq)]
pub enum AguiRun {
    /// A new user message: the client's id and its text.
    Message { id: String, text: String },
    /// Answers to the interrupts a run stopped at (`resume`).
    Resume(Vec<AguiResume>),
    /// The client ran its own tools: the tool messages that end `messages`.
    ToolResults(Vec<ToolOutput>),
}

/// One `resume` entry: an interrupt (a confirmation's request id), resolved
/// with a payload, or cancelled.
#[derive(Clone, Debug, PartialEq)]
pub struct AguiResume {
    pub interrupt_id: String,
    pub resolved: bool,
    pub payload: Option<Value>,
}

impl AguiRun {
    /// Checks `messages` (an array), then `resume` when present, else the
    /// last message: a user message with an id and text content.
    pub fn parse(body: &Value, max_message_bytes: usize) -> Result<AguiRun, ApiError> {
        let Some(Value::Array(messages)) = body.get("messages") else {
            return Err(ApiError::message_required("`messages` must be an array of AG-UI messages"));
        };
        match body.get("resume") {
            None | Some(Value::Null) => {}
            Some(Value::Array(entries)) if !entries.is_empty() => {
                let mut out = Vec::new();
                for e in entries {
                    let id = e.get("interruptId").and_then(Value::as_str);
                    let status = e.get("status").and_then(Value::as_str);
                    match (id, status) {
                        (Some(id), Some(s @ ("resolved" | "cancelled"))) => out.push(AguiResume {
                            interrupt_id: id.to_owned(),
                            resolved: s == "resolved",
                            payload: e.get("payload").filter(|p| !p.is_null()).cloned(),
                        }),
                        _ => {
                            return Err(ApiError::invalid_decision(
                                "each `resume` entry needs `interruptId` and `status` (`resolved` or `cancelled`)",
                            ))
                        }
                    }
                }
                return Ok(AguiRun::Resume(out));
            }
            Some(_) => return Err(ApiError::invalid_decision("`resume` must be a non-empty array")),
        }
        let Some(last) = messages.last() else {
            return Err(ApiError::message_required("`messages` is empty: send the user's message"));
        };
        let results: Vec<ToolOutput> = messages
            .iter()
            .rev()
            .take_while(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
            .filter_map(|m| {
                let call = m.get("toolCallId")?.as_str()?.to_owned();
                let outcome = match m.get("error").and_then(Value::as_str) {
                    Some(e) => Err(e.to_owned()),
                    None => Ok(Value::String(content_text(m.get("content")))),
                };
                let message_id = m.get("id").and_then(Value::as_str).map(str::to_owned);
                Some(ToolOutput { tool_call_id: call, outcome, message_id })
            })
            .collect();
        if !results.is_empty() {
            return Ok(AguiRun::ToolResults(results.into_iter().rev().collect()));
        }
        if last.get("role").and_then(Value::as_str) != Some("user") {
            return Err(ApiError::message_required("the last message must be the user's (or send `resume`)"));
        }
        let id = match last.get("id") {
            Some(Value::String(id)) if id.len() <= MAX_UI_MESSAGE_ID => ids::id(id)?,
            Some(Value::String(_)) => {
                return Err(ApiError::invalid_id(format!("message ids are at most {MAX_UI_MESSAGE_ID} characters")))
            }
            _ => return Err(ApiError::invalid_body("the last message has no string `id`")),
        };
        let text = match last.get("content") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(parts)) => {
                let mut text = Vec::new();
                for part in parts {
                    match part.get("type").and_then(Value::as_str) {
                        Some("text") => text.push(part.get("text").and_then(Value::as_str).unwrap_or_default()),
                        Some(kind) => return Err(ApiError::unsupported_part(kind)),
                        None => return Err(ApiError::invalid_body("a content part has no `type`")),
                    }
                }
                text.join("\n")
            }
            _ => return Err(ApiError::message_required("the user message has no `content`")),
        };
        if text.trim().is_empty() {
            return Err(ApiError::message_required("the user message has no text"));
        }
        if text.len() > max_message_bytes {
            return Err(ApiError::message_too_large(max_message_bytes));
        }
        Ok(AguiRun::Message { id, text })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn agui_inputs() {
        let parse = |b: Value| AguiRun::parse(&b, 100);
        let user = |content: Value| json!({"threadId":"t","runId":"r","messages":[{"id":"m1","role":"user","content":content}]});
        assert_eq!(parse(user(json!("hi"))).unwrap(), AguiRun::Message { id: "m1".into(), text: "hi".into() });
        assert_eq!(
            parse(user(json!([{"type":"text","text":"a"},{"type":"text","text":"b"}]))).unwrap(),
            AguiRun::Message { id: "m1".into(), text: "a\nb".into() }
        );
        assert_eq!(parse(user(json!([{"type":"image","source":{}}]))).unwrap_err().code, "unsupported_part");
        assert_eq!(parse(user(json!(""))).unwrap_err().code, "message_required");
        assert_eq!(parse(json!({"threadId":"t"})).unwrap_err().code, "message_required");
        let resume =
            json!({"messages":[],"resume":[{"interruptId":"q","status":"resolved","payload":{"approved":true}}]});
        assert_eq!(
            parse(resume).unwrap(),
            AguiRun::Resume(vec![AguiResume {
                interrupt_id: "q".into(),
                resolved: true,
                payload: Some(json!({"approved":true}))
            }])
        );
        assert_eq!(parse(json!({"messages":[],"resume":[{"status":"nope"}]})).unwrap_err().code, "invalid_decision");
        assert_eq!(agui_thread(&json!({})).unwrap_err().code, "thread_required");
    }

    #[test]
    fn ui_chat_bodies() {
        let parse = |b: Value| UiChat::parse(&b, 100);
        let user = |parts: Value| json!({ "id": "c", "messages": [{"id":"m1","role":"user","parts":parts}], "trigger": "submit-message" });
        assert_eq!(
            parse(user(json!([{"type":"text","text":"hi"},{"type":"text","text":"there"}]))).unwrap(),
            UiChat::Message { id: "m1".into(), text: "hi\nthere".into() }
        );
        assert_eq!(parse(user(json!([{"type":"file","url":"x"}]))).unwrap_err().code, "unsupported_part");
        assert_eq!(parse(user(json!([{"type":"text","text":" "}]))).unwrap_err().code, "message_required");
        assert_eq!(parse(user(json!([{"type":"text","text":"x".repeat(101)}]))).unwrap_err().code, "message_too_large");
        assert_eq!(parse(json!({"messages": []})).unwrap_err().code, "message_required");
        assert_eq!(parse(json!({"messages": "no"})).unwrap_err().code, "message_required");
        assert_eq!(parse(json!({"messages": [], "trigger": "regenerate-message"})).unwrap(), UiChat::Regenerate);
        assert_eq!(parse(json!({"messages": [{"id":"a b","role":"user","parts":[]}]})).unwrap_err().code, "invalid_id");
        let responded = json!({"messages": [{"id":"t.r1","role":"assistant","parts":[
            {"type":"step-start"},
            {"type":"dynamic-tool","toolCallId":"t","state":"approval-responded","approval":{"id":"q","approved":false,"reason":"no"}}
        ]}]});
        assert_eq!(
            parse(responded).unwrap(),
            UiChat::Continue {
                message_id: "t.r1".into(),
                approvals: vec![UiApproval { id: "q".into(), approved: false, reason: Some("no".into()) }],
                outputs: vec![]
            }
        );
        let plain = json!({"messages": [{"id":"r1","role":"assistant","parts":[{"type":"text","text":"x"}]}]});
        assert_eq!(parse(plain).unwrap_err().code, "nothing_to_continue");
        assert_eq!(ui_chat_thread(&json!({})).unwrap_err().code, "thread_required");
        assert_eq!(ui_chat_thread(&json!({"id": "t1"})).unwrap(), "t1");
    }

    fn catalog() -> Catalog {
        Catalog::parse(None, "m").unwrap()
    }

    #[test]
    fn sends_in_check_order() {
        let c = catalog();
        let code = |b: Value| Send::parse(&b, &c, 10).unwrap_err().code;
        assert_eq!(code(json!({"model": "nope", "message": ""})), "model_not_allowed");
        assert_eq!(Send::parse(&json!({"regenerate": true}), &c, 10).unwrap(), Send::Regenerate { model: None });
        assert_eq!(code(json!({"message": "  "})), "message_required");
        assert_eq!(code(json!({"message": 3})), "message_required");
        assert_eq!(code(json!({"message": "x".repeat(11)})), "message_too_large");
        assert_eq!(code(json!({"message": "hi", "mode": "later"})), "invalid_mode");
        assert_eq!(
            Send::parse(&json!({"message": "hi", "mode": "queue", "model": "m"}), &c, 10).unwrap(),
            Send::Message { message: "hi".into(), mode: Mode::Queue, model: Some("m".into()) }
        );
    }

    #[test]
    fn bodies_and_queries() {
        assert_eq!(json(b"", 10).unwrap_err().code, "invalid_json");
        assert_eq!(json(b"{", 10).unwrap_err().code, "invalid_json");
        assert_eq!(json(b"[1,2,3,4,5]", 3).unwrap_err().code, "body_too_large");
        let q = query_pairs("?a=1&b=x%20y&a=2");
        assert_eq!(query_all(&q, "a"), ["1", "2"]);
        assert_eq!(query_first(&q, "b").as_deref(), Some("x y"));
        assert_eq!(messages_page(&query_pairs("limit=0&page=2")).unwrap(), (1, 2));
        assert_eq!(messages_page(&query_pairs("limit=201")).unwrap_err().code, "invalid_query");
        assert_eq!(queue_move(&json!({"position": -1})).unwrap_err().code, "invalid_position");
        assert_eq!(queue_edit(&json!({"message": ""}), 5).unwrap_err().code, "message_required");
    }

    #[test]
    fn cursor_precedence_and_errors() {
        assert_eq!(cursor(None, None), Ok(0));
        assert_eq!(cursor(Some("7"), Some("3")), Ok(7));
        assert_eq!(cursor(None, Some("3")), Ok(3));
        assert_eq!(cursor(Some(""), Some("3")), Ok(3));
        for bad in ["-1", "abc", "1.5", "9999999999999999"] {
            assert_eq!(cursor(Some(bad), None).unwrap_err().code, "invalid_cursor");
            assert_eq!(cursor(None, Some(bad)).unwrap_err().code, "invalid_cursor");
        }
    }

    #[test]
    fn one_batch_parser_for_both_publish_routes() {
        assert_eq!(batch(json!([]), BatchShape::Events, 5).unwrap().len(), 0);
        assert_eq!(batch(json!({"events": [{}]}), BatchShape::Events, 5).unwrap().len(), 1);
        assert_eq!(batch(json!({}), BatchShape::Events, 5).unwrap_err().code, "invalid_batch");
        assert_eq!(batch(json!([]), BatchShape::Stream, 5).unwrap_err().code, "invalid_batch");
        assert_eq!(batch(json!({"type": "x"}), BatchShape::Stream, 5).unwrap().len(), 1);
        assert_eq!(batch(json!([1, 2, 3]), BatchShape::Events, 2).unwrap_err().code, "batch_too_large");
        assert_eq!(batch(json!(3), BatchShape::Stream, 2).unwrap_err().code, "invalid_batch");
    }

    #[test]
    fn tool_decisions() {
        let d = ToolDecision::parse(&json!({"toolCallId": "t.c", "remember": true, "reason": "ok"}), true).unwrap();
        assert_eq!(d.as_decision(true), json!({"approved": true, "scope": "session", "userInput": "ok"}));
        assert!(ToolDecision::parse(&json!({"toolCallId": "c", "remember": true}), false).is_err());
        assert!(ToolDecision::parse(&json!({"toolCallId": "c", "via": ""}), true).is_err());
        assert!(ToolDecision::parse(&json!({}), true).is_err());
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
}
