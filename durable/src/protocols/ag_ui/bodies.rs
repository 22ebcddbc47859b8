//! AG-UI's `RunAgentInput` (`POST /ag-ui`), checked apart from I/O.

use crate::wire::error::ApiError;
use crate::files::scan::{Raw, Seg, Slot, Slots};
use crate::wire::ids;
use crate::input::{ToolOutput, MAX_CLIENT_MESSAGE_ID};
use serde_json::Value;

/// AG-UI's `POST /ag-ui` body (`RunAgentInput`): the thread is `threadId`.
pub fn agui_thread(body: &Value) -> Result<String, ApiError> {
    match body.get("threadId") {
        Some(Value::String(t)) => ids::id(t),
        None | Some(Value::Null) => Err(ApiError::thread_required("`threadId` is required")),
        Some(_) => Err(ApiError::invalid_id("`threadId` must be a string")),
    }
}

/// Where a run's input carries files: its messages' media parts'
/// `source.value` when `source.type` is `data` (AG-UI 1.0), and a legacy
/// `binary` part's `data` (base64) or `url`. Only the last message's are
/// kept: the client sends the whole conversation each time.
pub const SLOTS: Slots = Slots {
    slots: &[
        Slot {
            path: &[Seg::Key("messages"), Seg::Item, Seg::Key("content"), Seg::Item, Seg::Key("source"), Seg::Key("value")],
            raw: Raw::When("type", "data"),
        },
        Slot { path: &[Seg::Key("messages"), Seg::Item, Seg::Key("content"), Seg::Item, Seg::Key("data")], raw: Raw::Always },
        Slot { path: &[Seg::Key("messages"), Seg::Item, Seg::Key("content"), Seg::Item, Seg::Key("url")], raw: Raw::No },
    ],
    group: Some(&[Seg::Key("messages"), Seg::Item]),
};

/// A media part (`image`, `document`, `audio`, `video` with a `source`, or
/// the older `binary`) as an attachment in threadline's shape.
fn media_part(part: &Value) -> Result<Value, ApiError> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let meta = part.get("metadata").cloned().unwrap_or(Value::Null);
    let name = text(part, "filename").or_else(|| text(&meta, "filename")).or_else(|| text(&meta, "name"));
    let mut a = serde_json::Map::new();
    if let Some(source) = part.get("source") {
        let value = text(source, "value").unwrap_or_default();
        match source.get("type").and_then(Value::as_str) {
            Some("data") => a.insert("data".into(), value.into()),
            Some("url") => a.insert("url".into(), value.into()),
            // A provider's handle: only a file of this thread is one here.
            Some("file") => a.insert("fileId".into(), value.into()),
            _ => return Err(ApiError::invalid_file("a media part's `source.type` is `data`, `url` or `file`")),
        };
        if let Some(m) = text(source, "mimeType") {
            a.insert("mediaType".into(), m.into());
        }
    } else {
        for (from, to) in [("data", "data"), ("url", "url"), ("id", "fileId"), ("mimeType", "mediaType")] {
            if let Some(v) = text(part, from) {
                a.insert(to.into(), v.into());
            }
        }
    }
    if let Some(n) = name {
        a.insert("name".into(), n.into());
    }
    Ok(Value::Object(a))
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
    /// A new user message: the client's id, its text, and its media parts
    /// as attachments; `earlier`, the ids of the user messages the client
    /// holds before it (where it diverges from the thread's active path, the
    /// message is an edit there: [`edit_point`]).
    Message { id: String, text: String, files: Vec<Value>, earlier: Vec<String> },
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
            Some(Value::String(id)) if id.len() <= MAX_CLIENT_MESSAGE_ID => ids::id(id)?,
            Some(Value::String(_)) => {
                return Err(ApiError::invalid_id(format!("message ids are at most {MAX_CLIENT_MESSAGE_ID} characters")))
            }
            _ => return Err(ApiError::invalid_body("the last message has no string `id`")),
        };
        let mut files = Vec::new();
        let text = match last.get("content") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(parts)) => {
                let mut text = Vec::new();
                for part in parts {
                    match part.get("type").and_then(Value::as_str) {
                        Some("text") => text.push(part.get("text").and_then(Value::as_str).unwrap_or_default()),
                        Some("image" | "document" | "audio" | "video" | "binary") => files.push(media_part(part)?),
                        Some(kind) => return Err(ApiError::unsupported_part(kind)),
                        None => return Err(ApiError::invalid_body("a content part has no `type`")),
                    }
                }
                text.join("\n")
            }
            _ => return Err(ApiError::message_required("the user message has no `content`")),
        };
        if text.trim().is_empty() && files.is_empty() {
            return Err(ApiError::message_required("the user message has no text"));
        }
        if text.len() > max_message_bytes {
            return Err(ApiError::message_too_large(max_message_bytes));
        }
        let earlier = messages[..messages.len() - 1]
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_owned))
            .collect();
        Ok(AguiRun::Message { id, text, files, earlier })
    }
}

/// Where a new message joins when the client's `earlier` user messages are
/// not the thread's active path (`path`, its user message ids in order): at
/// the first place they differ, or after the client's last when it holds
/// fewer, the new message replaces the path's message there: an edit of
/// it (`Some(its id)`). A client that sends no earlier message, or the
/// whole path, appends (`None`).
pub fn edit_point(earlier: &[String], path: &[String]) -> Option<String> {
    if earlier.is_empty() {
        return None;
    }
    let same = earlier.iter().zip(path).take_while(|(a, b)| a == b).count();
    path.get(same).filter(|_| same < earlier.len() || earlier.len() < path.len()).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn agui_inputs() {
        let parse = |b: Value| AguiRun::parse(&b, 100);
        let user = |content: Value| json!({"threadId":"t","runId":"r","messages":[{"id":"m1","role":"user","content":content}]});
        assert_eq!(
            parse(user(json!("hi"))).unwrap(),
            AguiRun::Message { id: "m1".into(), text: "hi".into(), files: vec![], earlier: vec![] }
        );
        assert_eq!(
            parse(user(json!([{"type":"text","text":"a"},{"type":"text","text":"b"}]))).unwrap(),
            AguiRun::Message { id: "m1".into(), text: "a\nb".into(), files: vec![], earlier: vec![] }
        );
        let media = json!([
            {"type":"image","source":{"type":"data","value":"threadline:inline:0","mimeType":"image/png"},"metadata":{"filename":"a.png"}},
            {"type":"document","source":{"type":"url","value":"https://x/y.pdf","mimeType":"application/pdf"}},
            {"type":"binary","mimeType":"text/plain","data":"aGk=","filename":"hi.txt"},
        ]);
        let AguiRun::Message { files, .. } = parse(user(media)).unwrap() else { panic!("a message") };
        assert_eq!(files[0], json!({"data": "threadline:inline:0", "mediaType": "image/png", "name": "a.png"}));
        assert_eq!(files[1], json!({"url": "https://x/y.pdf", "mediaType": "application/pdf"}));
        assert_eq!(files[2], json!({"data": "aGk=", "mediaType": "text/plain", "name": "hi.txt"}));
        assert_eq!(parse(user(json!([{"type":"image","source":{}}]))).unwrap_err().code, "invalid_file");
        assert_eq!(parse(user(json!([{"type":"sticker"}]))).unwrap_err().code, "unsupported_part");
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
    fn messages_that_leave_the_active_path_are_an_edit_where_they_leave_it() {
        let ids = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let path = ids(&["u1", "u2", "u3"]);
        assert_eq!(edit_point(&[], &path), None, "only the new message: it follows");
        assert_eq!(edit_point(&ids(&["u1", "u2", "u3"]), &path), None, "the whole path: it follows");
        assert_eq!(edit_point(&ids(&["u1"]), &path).as_deref(), Some("u2"), "fewer: it replaces the next");
        assert_eq!(edit_point(&ids(&["u1", "x2", "x3"]), &path).as_deref(), Some("u2"), "they differ at the second");
        assert_eq!(edit_point(&ids(&["x1"]), &path).as_deref(), Some("u1"));
        assert_eq!(edit_point(&ids(&["u1", "u2", "u3", "u4"]), &path), None, "more than the path: it follows");
        let body = json!({"messages": [
            {"id": "u1", "role": "user", "content": "a"}, {"id": "a1", "role": "assistant", "content": "b"},
            {"id": "u2", "role": "user", "content": "c"}]});
        let AguiRun::Message { earlier, .. } = AguiRun::parse(&body, 100).unwrap() else { panic!("a message") };
        assert_eq!(earlier, ["u1"]);
    }
}
