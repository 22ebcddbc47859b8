//! MCP's messages as this client sends and reads them, apart from I/O:
//! JSON-RPC 2.0 requests and notifications, the answer to a request as the
//! Streamable HTTP transport delivers it (one JSON message, or an SSE
//! stream of messages that ends with the response), and the few MCP types
//! a tool client needs (`initialize`, `tools/list`, `tools/call`).
//!
//! The types are written here rather than taken from the official Rust SDK
//! (`rmcp`): its model types come with `tokio`, `chrono` and `tracing` as
//! required dependencies, which neither build for a Worker without a
//! runtime nor belong in its bundle. Only what a tool client reads is
//! typed; every other field is kept as JSON.

use crate::wire::sse;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The protocol version this client asks for at `initialize`.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// The versions it speaks: a server may answer with any of these.
pub const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

/// A JSON-RPC request.
pub fn request(id: u64, method: &str, params: Value) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string()
}

/// A JSON-RPC notification (no id, no answer).
pub fn notification(method: &str, params: Value) -> String {
    let mut n = json!({ "jsonrpc": "2.0", "method": method });
    if !params.is_null() {
        n["params"] = params;
    }
    n.to_string()
}

/// The `initialize` request's params.
pub fn initialize_params() -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": { "name": "threadline", "version": env!("CARGO_PKG_VERSION") },
    })
}

/// A tool a server offers (`tools/list`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default = "empty_schema")]
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
}

fn empty_schema() -> Value {
    json!({ "type": "object", "properties": {} })
}

/// What a tool says of itself (hints: a server may be wrong, so they only
/// ever add an approval, never waive one a policy asks for).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
}

impl Tool {
    /// Destructive (`destructiveHint: true`) and not read-only.
    pub fn destructive(&self) -> bool {
        let a = self.annotations.clone().unwrap_or_default();
        a.destructive_hint == Some(true) && a.read_only_hint != Some(true)
    }

    pub fn read_only(&self) -> bool {
        self.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true)
    }

    /// Its name for people: its title, else its annotations', else its name.
    pub fn label(&self) -> &str {
        self.title
            .as_deref()
            .or_else(|| self.annotations.as_ref().and_then(|a| a.title.as_deref()))
            .unwrap_or(&self.name)
    }
}

/// A page of `tools/list`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsPage {
    #[serde(default)]
    pub tools: Vec<Tool>,
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// What a `tools/call` returned.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallResult {
    #[serde(default)]
    pub content: Vec<Value>,
    #[serde(default)]
    pub structured_content: Option<Value>,
    #[serde(default)]
    pub is_error: bool,
}

/// Why a request got no result.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// The server answered with a JSON-RPC error.
    Rpc { code: i64, message: String },
    /// The answer is not what the protocol says it is.
    Malformed(String),
    /// The server forgot the session (404 with a session id): initialize
    /// again.
    SessionGone,
    /// No answer: unreachable, a non-2xx status, cut off, too slow.
    Transport(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Rpc { code, message } => write!(f, "the server answered error {code}: {message}"),
            Failure::Malformed(why) => write!(f, "the server's answer is not valid JSON-RPC: {why}"),
            Failure::SessionGone => f.write_str("the server no longer knows this session"),
            Failure::Transport(why) => f.write_str(why),
        }
    }
}

/// Notifications a server sent on the way to its answer that a client acts
/// on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Heard {
    /// `notifications/tools/list_changed`: the tool list must be read again.
    pub tools_changed: bool,
}

/// Reads the answer to request `id` as it arrives: one JSON message (or a
/// batch), or an SSE stream whose events are messages, the response among
/// them (notifications and requests before it are noted or skipped).
#[derive(Debug)]
pub struct RpcAnswer {
    id: u64,
    sse: Option<sse::Decoder>,
    json: Vec<u8>,
    pub heard: Heard,
}

/// Largest answer read (a tool's result is capped later, at its own limit).
pub const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;

impl RpcAnswer {
    /// The answer to `id`, delivered with `content_type`.
    pub fn new(id: u64, content_type: &str) -> RpcAnswer {
        let sse = content_type.to_ascii_lowercase().starts_with("text/event-stream").then(sse::Decoder::default);
        RpcAnswer { id, sse, json: Vec::new(), heard: Heard::default() }
    }

    /// The next bytes: the result once it has arrived.
    pub fn push(&mut self, bytes: &[u8]) -> Option<Result<Value, Failure>> {
        match &mut self.sse {
            Some(sse) => {
                for data in sse.push(bytes) {
                    if let Some(done) = self.message(&data) {
                        return Some(done);
                    }
                }
                None
            }
            None => {
                if self.json.len() + bytes.len() > MAX_ANSWER_BYTES {
                    return Some(Err(Failure::Transport(format!("the answer is over {MAX_ANSWER_BYTES} bytes"))));
                }
                self.json.extend_from_slice(bytes);
                None
            }
        }
    }

    /// The body ended: the result, or why there is none.
    pub fn finish(&mut self) -> Result<Value, Failure> {
        if let Some(sse) = &mut self.sse {
            if let Some(done) = sse.finish().and_then(|data| self.message(&data)) {
                return done;
            }
            return Err(Failure::Transport("the server's event stream ended without an answer".into()));
        }
        let text = std::mem::take(&mut self.json);
        let text = String::from_utf8_lossy(&text);
        match self.message(&text) {
            Some(done) => done,
            None => Err(Failure::Malformed(format!("no response with id {} in {}", self.id, excerpt(&text)))),
        }
    }

    /// One JSON-RPC message (or a batch): the result when it is the answer.
    fn message(&mut self, text: &str) -> Option<Result<Value, Failure>> {
        let v: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => return Some(Err(Failure::Malformed(format!("{e}: {}", excerpt(text))))),
        };
        let messages = match v {
            Value::Array(batch) => batch,
            one => vec![one],
        };
        for m in messages {
            if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
                return Some(Err(Failure::Malformed(format!(
                    "a message without `jsonrpc: \"2.0\"`: {}",
                    excerpt(&m.to_string())
                ))));
            }
            match (m.get("id"), m.get("method").and_then(Value::as_str)) {
                (_, Some("notifications/tools/list_changed")) => self.heard.tools_changed = true,
                // Other notifications (progress, logging) and the server's
                // own requests carry nothing this client waits for.
                (_, Some(_)) => {}
                (Some(id), None) if id.as_u64() == Some(self.id) => {
                    if let Some(e) = m.get("error") {
                        let code = e.get("code").and_then(Value::as_i64).unwrap_or(0);
                        let message = e.get("message").and_then(Value::as_str).unwrap_or("no message").to_owned();
                        return Some(Err(Failure::Rpc { code, message }));
                    }
                    return Some(match m.get("result") {
                        Some(r) => Ok(r.clone()),
                        None => Err(Failure::Malformed("a response with neither `result` nor `error`".into())),
                    });
                }
                (Some(_), None) => {}
                (None, None) => {
                    return Some(Err(Failure::Malformed(format!(
                        "not a JSON-RPC message: {}",
                        excerpt(&m.to_string())
                    ))))
                }
            }
        }
        None
    }
}

fn excerpt(s: &str) -> String {
    let t: String = s.chars().take(200).collect();
    if t.len() < s.len() {
        format!("{t}…")
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(id: u64, content_type: &str, body: &str, chunk: usize) -> (Result<Value, Failure>, Heard) {
        let mut a = RpcAnswer::new(id, content_type);
        for c in body.as_bytes().chunks(chunk) {
            if let Some(done) = a.push(c) {
                return (done, a.heard);
            }
        }
        (a.finish(), a.heard)
    }

    #[test]
    fn json_and_sse_answers() {
        let json = r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}"#;
        assert_eq!(read(3, "application/json", json, 5).0, Ok(json!({"tools": []})));
        let sse = "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n\
                   event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n\
                   data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\n";
        for chunk in [1, 7, 1000] {
            let (result, heard) = read(7, "text/event-stream", sse, chunk);
            assert_eq!(result, Ok(json!({"content": []})), "chunks of {chunk}");
            assert!(heard.tools_changed);
        }
        let batch = r#"[{"jsonrpc":"2.0","method":"x"},{"jsonrpc":"2.0","id":2,"result":1}]"#;
        assert_eq!(read(2, "application/json; charset=utf-8", batch, 3).0, Ok(json!(1)));
    }

    #[test]
    fn errors_and_malformed_answers() {
        let rpc = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad args"}}"#;
        assert_eq!(
            read(1, "application/json", rpc, 9).0,
            Err(Failure::Rpc { code: -32602, message: "bad args".into() })
        );
        for bad in [
            r#"{"hello":"this is not JSON-RPC"}"#,
            "not json",
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":9,"result":1}"#,
        ] {
            let (r, _) = read(1, "application/json", bad, 4);
            assert!(matches!(r, Err(Failure::Malformed(_))), "{bad}: {r:?}");
        }
        let cut = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n";
        assert!(matches!(read(1, "text/event-stream", cut, 4).0, Err(Failure::Transport(_))));
        let junk = "data: {nope\n\n";
        assert!(matches!(read(1, "text/event-stream", junk, 4).0, Err(Failure::Malformed(_))));
    }

    #[test]
    fn tools_and_their_hints() {
        let page: ToolsPage = serde_json::from_value(json!({"tools": [
            {"name": "del", "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": true}},
            {"name": "ro", "title": "Read only", "annotations": {"destructiveHint": true, "readOnlyHint": true}},
            {"name": "plain"}
        ], "nextCursor": "c2"}))
        .unwrap();
        assert!(page.tools[0].destructive() && !page.tools[1].destructive() && !page.tools[2].destructive());
        assert_eq!(page.tools[1].label(), "Read only");
        assert_eq!(page.tools[2].input_schema, json!({"type": "object", "properties": {}}));
        assert_eq!(page.next_cursor.as_deref(), Some("c2"));
        assert_eq!(
            notification("notifications/initialized", Value::Null),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        );
    }
}
