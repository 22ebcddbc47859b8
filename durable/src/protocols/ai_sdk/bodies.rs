//! The AI SDK's chat request (`POST /api/chat {id, messages, trigger}`),
//! checked apart from I/O.

use crate::wire::error::ApiError;
use crate::files::scan::{Raw, Seg, Slot, Slots};
use crate::wire::ids;
use crate::input::{ToolOutput, MAX_CLIENT_MESSAGE_ID};
use serde_json::Value;

/// The AI SDK's `POST /api/chat {id, messages, trigger, messageId?}`: the
/// thread is the chat's `id`.
pub fn ui_chat_thread(body: &Value) -> Result<String, ApiError> {
    match body.get("id") {
        Some(Value::String(t)) => ids::id(t),
        None | Some(Value::Null) => Err(ApiError::thread_required("`id` (the chat id) is required")),
        Some(_) => Err(ApiError::invalid_id("`id` must be a string")),
    }
}

/// Where a chat request carries files: its messages' `file` parts' `url`,
/// as `data:` URLs (`useChat` sends a `FileList` so). Only the last
/// message's are kept: the client sends the whole conversation each time.
pub const SLOTS: Slots = Slots {
    slots: &[Slot {
        path: &[Seg::Key("messages"), Seg::Item, Seg::Key("parts"), Seg::Item, Seg::Key("url")],
        raw: Raw::No,
    }],
    group: Some(&[Seg::Key("messages"), Seg::Item]),
};

/// A `file` part (`{type: "file", mediaType, filename?, url}`) as an
/// attachment in threadline's shape.
fn file_part(part: &Value) -> Value {
    /// An attachment in threadline's shape, as a send reads it.
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Attachment<'a> {
        url: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        media_type: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<&'a str>,
    }
    let text = |k: &str| part.get(k).and_then(Value::as_str);
    let a = Attachment { url: text("url").unwrap_or_default(), media_type: text("mediaType"), name: text("filename") };
    serde_json::to_value(a).expect("an attachment serialises")
}

/// What an AI SDK chat request asks for. The thread holds the history: of
/// the client's `messages`, only the last one is read.
#[derive(Clone, Debug, PartialEq)]
pub enum UiChat {
    /// A new user message: its id (the client's), its text parts joined,
    /// and its `file` parts as attachments. With `messageId` (the client's
    /// `sendMessage({text, messageId})`), it edits that message: `edit_of`.
    Message { id: String, text: String, files: Vec<Value>, edit_of: Option<String> },
    /// `trigger: "regenerate-message"`, with the `messageId` the client's
    /// `regenerate({messageId})` names (an answer, or the user message
    /// whose answer it wants again); none is the last answer.
    Regenerate { message_id: Option<String> },
    /// The assistant message continues after the person answered its
    /// approval requests (tool parts in state `approval-responded`), or the
    /// client ran its own tools (`output-available`, `output-error`).
    Continue { message_id: String, approvals: Vec<UiApproval>, outputs: Vec<ToolOutput> },
}

/// One answered approval request of a continued message.
#[derive(Clone, Debug, PartialEq)]
pub struct UiApproval {
    /// The approval id: the confirmation's request id.
    pub id: String,
    pub approved: bool,
    pub reason: Option<String>,
}

impl UiChat {
    /// Checks, in order: `messages` (a non-empty array), `trigger`, the last
    /// message's role, id and parts.
    pub fn parse(body: &Value, max_message_bytes: usize) -> Result<UiChat, ApiError> {
        let Some(Value::Array(messages)) = body.get("messages") else {
            return Err(ApiError::message_required("`messages` must be an array of UI messages"));
        };
        match body.get("trigger").and_then(Value::as_str) {
            Some("regenerate-message") => {
                return Ok(UiChat::Regenerate { message_id: crate::input::message_ref(body, "messageId")? })
            }
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
            Some(Value::String(id)) if id.len() <= MAX_CLIENT_MESSAGE_ID => ids::id(id)?,
            Some(Value::String(_)) => {
                return Err(ApiError::invalid_id(format!("message ids are at most {MAX_CLIENT_MESSAGE_ID} characters")))
            }
            _ => return Err(ApiError::invalid_body("the last message has no string `id`")),
        };
        let Some(Value::Array(parts)) = last.get("parts") else {
            return Err(ApiError::invalid_body("the last message has no `parts` array"));
        };
        match role {
            Some("user") => {
                let mut text = Vec::new();
                let mut files = Vec::new();
                for part in parts {
                    match part.get("type").and_then(Value::as_str) {
                        Some("text") => text.push(part.get("text").and_then(Value::as_str).unwrap_or_default()),
                        Some("file") => files.push(file_part(part)),
                        Some(kind) => return Err(ApiError::unsupported_part(kind)),
                        None => return Err(ApiError::invalid_body("a message part has no `type`")),
                    }
                }
                let text = text.join("\n");
                if text.trim().is_empty() && files.is_empty() {
                    return Err(ApiError::message_required("the user message has no text"));
                }
                if text.len() > max_message_bytes {
                    return Err(ApiError::message_too_large(max_message_bytes));
                }
                Ok(UiChat::Message { id, text, files, edit_of: crate::input::message_ref(body, "messageId")? })
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ui_chat_bodies() {
        let parse = |b: Value| UiChat::parse(&b, 100);
        let user = |parts: Value| json!({ "id": "c", "messages": [{"id":"m1","role":"user","parts":parts}], "trigger": "submit-message" });
        assert_eq!(
            parse(user(json!([{"type":"text","text":"hi"},{"type":"text","text":"there"}]))).unwrap(),
            UiChat::Message { id: "m1".into(), text: "hi\nthere".into(), files: vec![], edit_of: None }
        );
        assert_eq!(
            parse(user(json!([{"type":"file","mediaType":"image/png","filename":"a.png","url":"threadline:inline:0"}])))
                .unwrap(),
            UiChat::Message {
                id: "m1".into(),
                text: String::new(),
                files: vec![json!({"url": "threadline:inline:0", "mediaType": "image/png", "name": "a.png"})],
                edit_of: None,
            }
        );
        assert_eq!(parse(user(json!([{"type":"source-url","url":"x"}]))).unwrap_err().code, "unsupported_part");
        assert_eq!(parse(user(json!([{"type":"text","text":" "}]))).unwrap_err().code, "message_required");
        assert_eq!(parse(user(json!([{"type":"text","text":"x".repeat(101)}]))).unwrap_err().code, "message_too_large");
        assert_eq!(parse(json!({"messages": []})).unwrap_err().code, "message_required");
        assert_eq!(parse(json!({"messages": "no"})).unwrap_err().code, "message_required");
        assert_eq!(
            parse(json!({"messages": [], "trigger": "regenerate-message"})).unwrap(),
            UiChat::Regenerate { message_id: None }
        );
        assert_eq!(
            parse(json!({"messages": [], "trigger": "regenerate-message", "messageId": "t.r1"})).unwrap(),
            UiChat::Regenerate { message_id: Some("t.r1".into()) }
        );
        let edit = json!({"id": "c", "messages": [{"id":"m1","role":"user","parts":[{"type":"text","text":"new"}]}],
            "trigger": "submit-message", "messageId": "m1"});
        assert_eq!(
            parse(edit).unwrap(),
            UiChat::Message { id: "m1".into(), text: "new".into(), files: vec![], edit_of: Some("m1".into()) }
        );
        let bad = json!({"messages": [], "trigger": "regenerate-message", "messageId": 4});
        assert_eq!(parse(bad).unwrap_err().code, "invalid_message_id");
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
}
