//! What every protocol reads the same way, parsed and checked apart from any
//! I/O (as mini-redis keeps its parser apart from its connection): JSON
//! bodies, queries, cursors, a send's fields, publish batches, the queue's
//! bodies. A protocol's own bodies are in its folder (`bodies.rs`). What
//! comes back is typed, or a 4xx [`ApiError`] with a stable code; nothing
//! here touches state, so a refused request stores nothing.

use crate::agent::models::Catalog;
use crate::wire::error::ApiError;
use serde_json::Value;

/// A request as the stateless Worker first sees it: its line and headers.
pub struct Head<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// The query string, without its `?`.
    pub query: &'a str,
    /// A request header, by lower-case name.
    pub header: &'a dyn Fn(&str) -> Option<String>,
}

impl Head<'_> {
    /// The declared `Content-Length`.
    pub fn declared_length(&self) -> Option<u64> {
        (self.header)("content-length").and_then(|v| v.trim().parse::<u64>().ok())
    }
}

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
    /// Run now when no run holds the thread (as `reject`), else wait in
    /// the queue (202): agora's default.
    Auto,
    /// Cancel the active run and run this message next.
    Interrupt,
}

/// Largest `pageContext` a send may carry, as JSON.
pub const MAX_PAGE_CONTEXT_BYTES: usize = 16 * 1024;

/// What a send asks of its turn, besides its message: the model, the agent
/// it runs as, the page the person is on, a structured answer, and when
/// it was sent. Checked here for shape; the model and the agent are
/// resolved against the catalogs by the thread.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Asked {
    pub model: Option<String>,
    pub agent: Option<String>,
    /// A JSON object or string, at most [`MAX_PAGE_CONTEXT_BYTES`].
    pub page_context: Option<Value>,
    /// `{schema, name?}`: the answer must be JSON matching `schema`.
    pub output: Option<Value>,
    /// When the person sent it (ms since the epoch), as the client says.
    pub sent_at: Option<i64>,
    /// The files and URLs the message carries (`attachments`).
    pub attachments: Vec<crate::files::spec::AttachmentSpec>,
}

impl Asked {
    fn parse(body: &Value, thread: &str, max_files: usize) -> Result<Asked, ApiError> {
        let string = |k: &str, bad: fn(String) -> ApiError| match body.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(format!("`{k}` must be a string"))),
        };
        let model = string("model", |m| ApiError::model_not_allowed(m.replace("a string", "a catalog model id")))?;
        let agent = string("agent", ApiError::agent_not_found)?;
        let page_context = match body.get("pageContext") {
            None | Some(Value::Null) => None,
            Some(v @ (Value::Object(_) | Value::String(_))) => {
                let size = v.to_string().len();
                if size > MAX_PAGE_CONTEXT_BYTES {
                    return Err(ApiError::invalid_page_context(format!(
                        "`pageContext` is {size} bytes as JSON; at most {MAX_PAGE_CONTEXT_BYTES}"
                    )));
                }
                Some(v.clone())
            }
            Some(_) => return Err(ApiError::invalid_page_context("`pageContext` must be a JSON object or a string")),
        };
        let output = match body.get("output") {
            None | Some(Value::Null) => None,
            Some(o) => Some(output_spec(o)?),
        };
        let sent_at = match body.get("sentAt") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_i64().filter(|t| *t >= 0).ok_or_else(ApiError::invalid_sent_at)?),
        };
        let attachments = crate::files::spec::parse_list(body.get("attachments"), thread, max_files)?;
        Ok(Asked { model, agent, page_context, output, sent_at, attachments })
    }
}

/// `output: {schema, name?}`: `schema` a JSON Schema the validator
/// accepts, `name` 1 to 64 of A-Z a-z 0-9 _ - (the provider's rule).
fn output_spec(o: &Value) -> Result<Value, ApiError> {
    let bad = |m: String| Err(ApiError::invalid_output(m));
    let Some(schema) = o.get("schema").filter(|s| s.is_object()) else {
        return bad("`output` must be {schema, name?} with `schema` a JSON Schema object".to_owned());
    };
    if let Err(e) = crate::json_schema::Schema::compile(schema) {
        return bad(format!("`output.schema` is not a valid JSON Schema: {e}"));
    }
    let name = match o.get("name") {
        None | Some(Value::Null) => "answer".to_owned(),
        Some(Value::String(n))
            if (1..=64).contains(&n.len())
                && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
        {
            n.clone()
        }
        Some(_) => return bad("`output.name` must be 1 to 64 of A-Z a-z 0-9 _ -".to_owned()),
    };
    Ok(serde_json::json!({ "schema": schema, "name": name }))
}

/// What a send asks for, once its body is checked.
#[derive(Clone, Debug, PartialEq)]
pub enum Send {
    /// `regenerate: true`: answer a user message again, the one `answer`
    /// (`messageId`: an answer's id) answered, else the active path's last.
    Regenerate { asked: Asked, answer: Option<String> },
    Message {
        message: String,
        mode: Mode,
        asked: Asked,
        /// `editOf`: the user message this one replaces, on a branch of
        /// its own beside it.
        edit_of: Option<String>,
    },
}

impl Send {
    /// `{message, mode?, model?, agent?, pageContext?, output?, sentAt?,
    /// attachments?, regenerate?, messageId?, editOf?}` (`POST
    /// /instance-ai/chat/:id`, agora's `POST /agent/chat`) on `thread`.
    /// Checks run in this order: what is asked of the turn, regenerate
    /// (with the answer it names), message, size, mode, the message it
    /// edits. A message with attachments may have no text.
    pub fn parse(body: &Value, max_message_bytes: usize, thread: &str, max_files: usize) -> Result<Send, ApiError> {
        let asked = Asked::parse(body, thread, max_files)?;
        if body.get("regenerate").and_then(Value::as_bool) == Some(true) {
            let answer = message_ref(body, "messageId")?;
            return Ok(Send::Regenerate { asked, answer });
        }
        let message = match body.get("message") {
            Some(Value::String(m)) if !m.trim().is_empty() || !asked.attachments.is_empty() => m.clone(),
            None | Some(Value::Null) if !asked.attachments.is_empty() => String::new(),
            Some(Value::String(_)) | None | Some(Value::Null) => {
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
            Some(Value::String(m)) if m == "auto" => Mode::Auto,
            Some(Value::String(m)) if m == "interrupt" => Mode::Interrupt,
            Some(_) => return Err(ApiError::invalid_mode()),
        };
        let edit_of = message_ref(body, "editOf")?;
        Ok(Send::Message { message, mode, asked, edit_of })
    }
}

/// `POST .../fork {messageId, threadId?}`: the message to fork at, and the
/// new thread's id when the caller names one.
pub fn fork(body: &Value) -> Result<(String, Option<String>), ApiError> {
    let message_id =
        message_ref(body, "messageId")?.ok_or_else(|| ApiError::invalid_message_id("`messageId` is required"))?;
    let thread_id = match body.get("threadId") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(crate::wire::ids::id(id)?),
        Some(_) => return Err(ApiError::invalid_id("`threadId` must be a thread id")),
    };
    Ok((message_id, thread_id))
}

/// A body's reference to a message of the thread (`messageId`, `editOf`):
/// absent or `null`, or an id of 1 to 256 bytes; anything else is 400
/// `invalid_message_id`.
pub fn message_ref(body: &Value, field: &str) -> Result<Option<String>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(id)) if (1..=256).contains(&id.len()) => Ok(Some(id.clone())),
        Some(_) => Err(ApiError::invalid_message_id(format!("`{field}` must be a message id (1 to 256 bytes)"))),
    }
}

/// The most bytes a route that reads no body takes: room for `{}` and
/// whitespace, as a `fetch` with a JSON body sends on a body-less route.
pub const NO_BODY_BYTES: usize = 64;

/// A route that reads no body takes none, or an empty JSON object (or
/// `null`); anything else is 400 `invalid_body`, never silently dropped.
pub fn no_body(body: &[u8]) -> Result<(), ApiError> {
    let empty = match std::str::from_utf8(body).map(str::trim) {
        Ok("" | "null") => true,
        Ok(text) => matches!(serde_json::from_str::<Value>(text), Ok(Value::Object(o)) if o.is_empty()),
        Err(_) => false,
    };
    if empty {
        Ok(())
    } else {
        Err(ApiError::invalid_body("this route reads no body: send none, or `{}`"))
    }
}

/// `PATCH .../queue/:messageId {message}`: the new text.
pub fn queue_edit(body: &Value, max_message_bytes: usize) -> Result<String, ApiError> {
    queue_text(body.get("message"), max_message_bytes)
}

/// A waiting message's new text: a non-empty string within the limit.
pub fn queue_text(text: Option<&Value>, max_message_bytes: usize) -> Result<String, ApiError> {
    match text {
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

/// Longest message id a client may choose (the AI SDK's, AG-UI's): the run
/// id made from it must be an id too.
pub const MAX_CLIENT_MESSAGE_ID: usize = 100;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sends_in_check_order() {
        let code = |b: Value| Send::parse(&b, 10, "t", 10).unwrap_err().code;
        assert_eq!(code(json!({"model": 3, "message": ""})), "model_not_allowed");
        assert_eq!(code(json!({"agent": 3})), "agent_not_found");
        assert_eq!(
            Send::parse(&json!({"regenerate": true}), 10, "t", 10).unwrap(),
            Send::Regenerate { asked: Asked::default(), answer: None }
        );
        assert_eq!(
            Send::parse(&json!({"regenerate": true, "messageId": "run-1"}), 10, "t", 10).unwrap(),
            Send::Regenerate { asked: Asked::default(), answer: Some("run-1".into()) }
        );
        assert_eq!(code(json!({"regenerate": true, "messageId": 7})), "invalid_message_id");
        assert_eq!(code(json!({"regenerate": true, "messageId": ""})), "invalid_message_id");
        assert_eq!(code(json!({"message": "hi", "editOf": "x".repeat(257)})), "invalid_message_id");
        assert_eq!(code(json!({"message": "  "})), "message_required");
        assert_eq!(code(json!({"message": 3})), "message_required");
        assert_eq!(code(json!({"message": "x".repeat(11)})), "message_too_large");
        assert_eq!(code(json!({"message": "hi", "mode": "later"})), "invalid_mode");
        let asked = Asked { model: Some("m".into()), ..Asked::default() };
        assert_eq!(
            Send::parse(&json!({"message": "hi", "mode": "queue", "model": "m"}), 10, "t", 10).unwrap(),
            Send::Message { message: "hi".into(), mode: Mode::Queue, asked: asked.clone(), edit_of: None }
        );
        assert_eq!(
            Send::parse(&json!({"message": "hi", "mode": "queue", "model": "m", "editOf": "m1"}), 10, "t", 10).unwrap(),
            Send::Message { message: "hi".into(), mode: Mode::Queue, asked, edit_of: Some("m1".into()) }
        );
    }

    #[test]
    fn what_a_turn_is_asked() {
        let code = |b: Value| Send::parse(&b, 10, "t", 10).unwrap_err().code;
        assert_eq!(code(json!({"pageContext": 5})), "invalid_page_context");
        assert_eq!(code(json!({"pageContext": "x".repeat(MAX_PAGE_CONTEXT_BYTES)})), "invalid_page_context");
        assert_eq!(code(json!({"output": {"name": "x"}})), "invalid_output");
        assert_eq!(code(json!({"output": {"schema": {"type": 5}}})), "invalid_output");
        assert_eq!(code(json!({"output": {"schema": {}, "name": "a b"}})), "invalid_output");
        assert_eq!(code(json!({"sentAt": "yesterday"})), "invalid_sent_at");
        let Send::Message { asked, .. } = Send::parse(
            &json!({"message": "hi", "agent": "a", "pageContext": {"url": "/x"}, "output": {"schema": {"type": "object"}}, "sentAt": 5}),
            10,
            "t",
            10,
        )
        .unwrap() else {
            panic!("a message")
        };
        assert_eq!(asked.agent.as_deref(), Some("a"));
        assert_eq!(asked.output, Some(json!({"schema": {"type": "object"}, "name": "answer"})));
        assert_eq!((asked.page_context, asked.sent_at), (Some(json!({"url": "/x"})), Some(5)));
    }

    #[test]
    fn attachments_may_stand_in_for_text() {
        let id = "f_2cf24dba5fb0a30e26e83b2ac5b9e29e";
        let Send::Message { message, asked, .. } =
            Send::parse(&json!({"attachments": [{"fileId": id}]}), 10, "t", 10).unwrap()
        else {
            panic!("a message")
        };
        assert_eq!(message, "");
        assert_eq!(asked.attachments.len(), 1);
        let code = |b: Value| Send::parse(&b, 10, "t", 1).unwrap_err().code;
        assert_eq!(code(json!({"message": "", "attachments": []})), "message_required");
        assert_eq!(code(json!({"message": "x", "attachments": [{"fileId": id}, {"fileId": id}]})), "too_many_files");
        assert_eq!(code(json!({"message": "x", "attachments": "nope"})), "invalid_file");
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
}
