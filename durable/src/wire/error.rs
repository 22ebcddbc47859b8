//! Errors that reach a client: an HTTP status, a stable machine-readable code
//! and a sentence for people. Serialised as `{"error":{"code","message",...},
//! "code","message"}`.
//!
//! Every code is built here, by a named constructor, so a code is spelled
//! once and its status never drifts between the routes that answer it. The
//! docs/protocols/ and docs/security.md list the same codes.

use serde_json::{json, Map, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    /// Extra fields of the error object, e.g. `runId` on `run_active`.
    pub details: Map<String, Value>,
}

impl ApiError {
    fn new(status: u16, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), details: Map::new() }
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> ApiError {
        self.details.insert(key.to_owned(), value.into());
        self
    }

    /// `{error: {code, message, ...details}, code, message}`: the code and
    /// message also at the top, where agora's client reads them; `error`
    /// for every other reader.
    pub fn body(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("code".into(), self.code.into());
        obj.insert("message".into(), self.message.clone().into());
        for (k, v) in &self.details {
            obj.insert(k.clone(), v.clone());
        }
        json!({ "error": obj, "code": self.code, "message": self.message })
    }

    /// `Retry-After` seconds, when the refusal carries one.
    pub fn retry_after(&self) -> Option<i64> {
        self.details.get("retryAfter").and_then(Value::as_i64)
    }

    /// The `Allow` header of a 405.
    pub fn allow(&self) -> Option<&str> {
        self.details.get("allow").and_then(Value::as_str)
    }
}

/// Refusals of the request itself: routes, ids, bodies, queries.
impl ApiError {
    pub fn not_found_route(message: impl Into<String>) -> ApiError {
        ApiError::new(404, "not_found", message)
    }

    pub fn method_not_allowed(path: &str, allow: &str) -> ApiError {
        ApiError::new(405, "method_not_allowed", format!("{path} takes {allow}")).with("allow", allow)
    }

    pub fn invalid_id(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_id", message)
    }

    pub fn invalid_cursor(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_cursor", message)
    }

    pub fn invalid_query(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_query", message)
    }

    pub fn invalid_body(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_body", message)
    }

    pub fn invalid_json(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_json", message)
    }

    pub fn body_too_large(limit: usize) -> ApiError {
        ApiError::new(413, "body_too_large", format!("the body is over {limit} bytes")).with("limit", limit)
    }

    pub fn message_required(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "message_required", message)
    }

    pub fn message_too_large(limit: usize) -> ApiError {
        ApiError::new(413, "message_too_large", format!("`message` is over {limit} bytes")).with("limit", limit)
    }

    pub fn invalid_mode() -> ApiError {
        ApiError::new(400, "invalid_mode", "`mode` is one of reject, queue, auto, interrupt")
    }

    pub fn thread_required(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "thread_required", message)
    }

    pub fn quota_exceeded() -> ApiError {
        ApiError::new(
            429,
            "quota_exceeded",
            "your budget for this period is spent (GET /agent/quota says when it resets)",
        )
    }

    pub fn agent_not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "agent_not_found", message)
    }

    pub fn invalid_page_context(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_page_context", message)
    }

    pub fn invalid_output(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_output", message)
    }

    pub fn invalid_sent_at() -> ApiError {
        ApiError::new(400, "invalid_sent_at", "`sentAt` must be a time in milliseconds since the epoch")
    }

    pub fn model_not_allowed(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "model_not_allowed", message)
    }

    pub fn invalid_decision(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_decision", message)
    }

    pub fn invalid_position() -> ApiError {
        ApiError::new(400, "invalid_position", "`position` must be a non-negative integer")
    }

    pub fn invalid_batch(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_batch", message)
    }

    pub fn batch_too_large(max_events: usize) -> ApiError {
        ApiError::new(413, "batch_too_large", format!("a batch holds at most {max_events} events"))
    }

    pub fn invalid_event(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_event", message)
    }

    /// The event at `index` of a batch is invalid.
    pub fn invalid_event_at(index: usize, message: impl std::fmt::Display) -> ApiError {
        ApiError::new(400, "invalid_event", format!("event {index}: {message}")).with("index", index)
    }

    pub fn event_too_large(index: usize, size: usize, limit: usize) -> ApiError {
        ApiError::new(413, "event_too_large", format!("event {index}: its payload is {size} bytes, over {limit}"))
            .with("index", index)
    }
}

/// Files: what a send or an upload carries, and reading a stored one.
impl ApiError {
    pub fn file_too_large(max: usize) -> ApiError {
        ApiError::new(413, "file_too_large", format!("a file is at most {max} bytes (MAX_FILE_BYTES)"))
            .with("limit", max)
    }

    pub fn too_many_files(max: usize) -> ApiError {
        ApiError::new(400, "too_many_files", format!("a message carries at most {max} files (MAX_FILES_PER_MESSAGE)"))
            .with("limit", max)
    }

    pub fn unsupported_media_type(media_type: &str, accepted: &[String]) -> ApiError {
        ApiError::new(
            415,
            "unsupported_media_type",
            format!("files of type `{media_type}` are not accepted (FILE_TYPES: {})", accepted.join(", ")),
        )
        .with("mediaType", media_type)
    }

    pub fn file_type_mismatch(declared: &str, found: &str) -> ApiError {
        ApiError::new(415, "file_type_mismatch", format!("a file declared as `{declared}` holds {found}"))
            .with("mediaType", declared)
    }

    pub fn invalid_file(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_file", message)
    }

    /// A file this thread does not hold (another thread's included).
    pub fn file_not_found() -> ApiError {
        ApiError::new(404, "file_not_found", "no such file on this thread")
    }

    pub fn unsupported_attachment(model: &str, media_type: &str, input: &str) -> ApiError {
        ApiError::new(
            400,
            "unsupported_attachment",
            format!(
                "the model `{model}` does not take `{input}` input: a file of type `{media_type}` cannot be sent to it"
            ),
        )
        .with("model", model)
        .with("mediaType", media_type)
    }

    /// A file being removed (an unsent upload past its grace period) is
    /// sent again: retry once the removal is done.
    pub fn file_busy() -> ApiError {
        ApiError::new(409, "file_busy", "this file is being removed; send it again in a moment").with("retryAfter", 1)
    }

    pub fn range_not_satisfiable(size: u64) -> ApiError {
        ApiError::new(416, "range_not_satisfiable", format!("the file is {size} bytes")).with("size", size)
    }
}

/// Answers about a thread's state: what does not exist, what is busy, what
/// has ended. A thread that is not the caller's answers exactly as one that
/// does not exist (see `access`).
impl ApiError {
    /// A held stream's claim that no hand-over waits for (its object
    /// restarted, or the claim came too late): the client resumes from its
    /// cursor.
    pub fn stream_moved() -> ApiError {
        ApiError::new(410, "stream_moved", "no stream waits for this claim")
    }

    pub fn thread_not_found() -> ApiError {
        ApiError::new(404, "thread_not_found", "no such thread")
    }

    pub fn invalid_schedule(message: String) -> ApiError {
        ApiError::new(400, "invalid_schedule", message)
    }

    pub fn schedule_not_found() -> ApiError {
        ApiError::new(404, "schedule_not_found", "no schedule with this id on this thread")
    }

    pub fn too_many_schedules(max: usize) -> ApiError {
        ApiError::new(409, "too_many_schedules", format!("a thread holds at most {max} schedules"))
    }

    pub fn dead_letter_not_found() -> ApiError {
        ApiError::new(404, "dead_letter_not_found", "no dead letter with this id")
    }

    pub fn nothing_to_resume() -> ApiError {
        ApiError::new(404, "nothing_to_resume", "no run with this id to resume")
    }

    pub fn confirmation_not_found() -> ApiError {
        ApiError::new(404, "confirmation_not_found", "no such confirmation request")
    }

    pub fn tool_call_not_found() -> ApiError {
        ApiError::new(404, "tool_call_not_found", "no confirmation for this tool call")
    }

    pub fn invalid_message_id(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_message_id", message)
    }

    pub fn thread_exists() -> ApiError {
        ApiError::new(409, "thread_exists", "a thread with this id exists: fork into a new one")
    }

    pub fn compaction_active() -> ApiError {
        ApiError::new(409, "compaction_active", "the conversation is being compacted already")
    }

    pub fn context_too_small(model: &str, needed: u64, limit: u64) -> ApiError {
        ApiError::new(
            400,
            "context_too_small",
            format!(
                "the model `{model}` takes {limit} tokens (its window less its answer's room); the system prompt, the tools and this message alone are about {needed}"
            ),
        )
    }

    pub fn message_not_found() -> ApiError {
        ApiError::new(404, "message_not_found", "no message with this id in the thread")
    }

    pub fn not_an_answer() -> ApiError {
        ApiError::new(400, "not_an_answer", "`messageId` names a user message: only an answer is regenerated")
    }

    pub fn not_a_user_message() -> ApiError {
        ApiError::new(400, "not_a_user_message", "`editOf` names an answer: only a user message is edited")
    }

    pub fn run_not_found() -> ApiError {
        ApiError::new(404, "run_not_found", "no run with this id")
    }

    pub fn queued_message_not_found() -> ApiError {
        ApiError::new(404, "queued_message_not_found", "no queued message with this id")
    }

    pub fn debug_routes_off() -> ApiError {
        ApiError::new(404, "not_found", "debug routes are off (DEBUG_ROUTES)")
    }

    pub fn run_active(run_id: &str, message: &str) -> ApiError {
        ApiError::new(409, "run_active", message.to_owned()).with("runId", run_id)
    }

    pub fn run_finished(run_id: &str) -> ApiError {
        ApiError::new(409, "run_finished", "this run has finished; nothing was stored").with("runId", run_id)
    }

    /// The AI SDK's send named a user message the thread already answered.
    pub fn message_already_sent(run_id: &str) -> ApiError {
        ApiError::new(
            409,
            "message_already_sent",
            "this message was sent before and its answer is over; send it with a new id",
        )
        .with("runId", run_id)
    }

    /// The AI SDK's continuation answered no request of its message.
    pub fn nothing_to_continue(message: impl Into<String>) -> ApiError {
        ApiError::new(409, "nothing_to_continue", message)
    }

    /// The tools a client declared with its message cannot be offered.
    pub fn invalid_client_tools(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_client_tools", message)
    }

    /// A part of a user message the thread cannot take (only text is).
    pub fn unsupported_part(kind: &str) -> ApiError {
        ApiError::new(
            400,
            "unsupported_part",
            format!("user message parts of type `{kind}` are not supported: send text"),
        )
        .with("partType", kind)
    }

    pub fn task_finished() -> ApiError {
        ApiError::new(409, "task_finished", "this background task has ended")
    }

    pub fn duplicate_request() -> ApiError {
        ApiError::new(409, "duplicate_request", "a confirmation with this requestId exists")
    }

    pub fn confirmation_expired() -> ApiError {
        ApiError::new(410, "confirmation_expired", "this request lapsed before a decision")
    }

    pub fn confirmation_decided(state: &str) -> ApiError {
        ApiError::new(409, "confirmation_decided", "this request has already been settled").with("state", state)
    }

    pub fn queue_full(message: impl Into<String>) -> ApiError {
        ApiError::new(429, "queue_full", message)
    }

    /// The queue, stored whole as one row, would pass `limit` bytes.
    pub fn queue_too_large(size: usize, limit: usize) -> ApiError {
        ApiError::new(413, "queue_too_large", format!("the queue would be {size} bytes, over its {limit}-byte limit (MAX_QUEUE_BYTES); remove or shorten queued messages"))
            .with("limit", limit)
    }

    pub fn too_many_subscribers(max: usize) -> ApiError {
        ApiError::new(429, "too_many_subscribers", format!("a thread serves at most {max} streams at once"))
            .with("retryAfter", 5)
    }

    pub fn rate_limited(per_minute: i64, retry_after: i64) -> ApiError {
        ApiError::new(429, "rate_limited", format!("at most {per_minute} sends a minute; retry in {retry_after} s"))
            .with("retryAfter", retry_after)
    }
}

/// Who is calling, and with what.
impl ApiError {
    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(401, "unauthorized", message)
    }

    pub fn token_in_url() -> ApiError {
        ApiError::new(
            401,
            "token_in_url",
            "a bearer JWT is refused in a URL (logs, history and Referer headers keep URLs); ask POST /instance-ai/threads/:threadId/stream-token for a stream token",
        )
    }

    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(403, "forbidden", message)
    }

    /// A JWT whose claims cannot name an actor safely: a `sub` with edge
    /// spaces or control characters, a role with a comma or control
    /// characters.
    pub fn invalid_claims(message: impl Into<String>) -> ApiError {
        ApiError::new(401, "invalid_claims", message)
    }

    /// A caller without the role a route needs (`STREAMS_ROLE`).
    pub fn role_required(role: &str) -> ApiError {
        ApiError::new(403, "role_required", format!("this route needs the `{role}` role"))
    }

    pub fn approver_required(role: &str) -> ApiError {
        ApiError::new(403, "approver_required", format!("deciding this request needs the `{role}` role"))
    }
}

/// The deployment or the platform cannot serve the request (503): never bad
/// input.
impl ApiError {
    /// A storage failure: nothing of the request was stored.
    pub fn storage(err: impl std::fmt::Display) -> ApiError {
        ApiError::new(503, "storage_unavailable", format!("storage failed, nothing was stored: {err}"))
    }

    /// The object's storage was written by a newer release than this code:
    /// refused, never misread (a rolling deploy; the new code will serve it).
    pub fn storage_too_new(class: &str, stored: u32, current: u32) -> ApiError {
        ApiError::new(
            503,
            "storage_too_new",
            format!("this {class}'s storage is at layout version {stored}, newer than this code reads ({current}); retry once the deploy completes"),
        )
        .with("storedVersion", stored)
        .with("codeVersion", current)
        .with("retryAfter", 5)
    }

    /// The platform failed (a binding, a subrequest the shell needed).
    pub fn unavailable(err: impl std::fmt::Display) -> ApiError {
        ApiError::new(503, "unavailable", format!("the thread is unavailable: {err}"))
    }

    pub fn auth_not_configured() -> ApiError {
        ApiError::new(
            503,
            "auth_not_configured",
            "no authentication is configured: set AUTH_JWT_SECRET or AUTH_JWKS, or AUTH_MODE=none to run without",
        )
    }

    pub fn auth_misconfigured(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "auth_misconfigured", message)
    }

    pub fn stream_tokens_not_configured() -> ApiError {
        ApiError::new(503, "stream_tokens_not_configured", "set STREAM_TOKEN_SECRET (or AUTH_JWT_SECRET)")
    }

    pub fn agent_not_configured() -> ApiError {
        ApiError::new(
            503,
            "agent_not_configured",
            "no agent is configured: set LLM_BASE_URL (built-in agent) or AGENT_WEBHOOK_URL (external agent)",
        )
    }

    pub fn invalid_tools(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "invalid_tools", message)
    }

    pub fn invalid_models(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "invalid_models", message)
    }

    pub fn invalid_agents(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "invalid_agents", message)
    }

    pub fn invalid_quota(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "invalid_quota", message)
    }

    pub fn invalid_approval_policy(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "invalid_approval_policy", message)
    }

    pub fn misconfigured(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "misconfigured", message)
    }
}

/// The thread and run logs read as Durable Streams.
impl ApiError {
    pub fn invalid_offset(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_offset", message)
    }

    pub fn stale_offset() -> ApiError {
        ApiError::new(
            410,
            "stale_offset",
            "this offset belongs to an earlier incarnation of this log (it was deleted and re-created); read from offset=-1",
        )
    }

    /// Flue's answer to an offset its stream no longer serves (another
    /// incarnation's, or past the head): its client reads again from `-1`.
    pub fn offset_gone() -> ApiError {
        ApiError::new(
            416,
            "stream_offset_gone",
            "this offset is not in this conversation's stream; read history again, or from offset=-1",
        )
    }

    /// Flue's `uid: null` (create only) on a conversation that exists.
    pub fn agent_instance_exists(uid: &str) -> ApiError {
        ApiError::new(
            409,
            "agent_instance_exists",
            "this conversation exists already; send without `uid: null` to continue it",
        )
        .with("meta", serde_json::json!({ "uid": uid }))
    }

    /// Flue's `uid` naming an incarnation this conversation is not.
    pub fn agent_instance_not_found() -> ApiError {
        ApiError::new(404, "agent_instance_not_found", "this conversation is not the incarnation `uid` names")
    }

    pub fn offset_required(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "offset_required", message)
    }

    pub fn invalid_live(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_live", message)
    }

    pub fn invalid_view(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_view", message)
    }

    pub fn invalid_tail() -> ApiError {
        ApiError::new(400, "invalid_tail", "`tail` must be an integer from 1 to 10000")
    }

    pub fn tail_not_supported() -> ApiError {
        ApiError::new(
            400,
            "tail_not_supported",
            "a conversation cannot be resumed from a suffix: read view=history, then view=updates",
        )
    }

    pub fn invalid_producer(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_producer", message)
    }

    pub fn stale_producer_epoch(epoch: u64, current: u64) -> ApiError {
        ApiError::new(403, "stale_producer_epoch", format!("producer epoch {epoch} is older than {current}"))
            .with("currentEpoch", current)
    }

    pub fn producer_epoch_seq() -> ApiError {
        ApiError::new(400, "producer_epoch_seq", "a new producer epoch must start at Producer-Seq 0")
    }

    pub fn producer_seq_gap(expected: u64, received: u64) -> ApiError {
        ApiError::new(409, "producer_seq_gap", format!("expected Producer-Seq {expected}, got {received}"))
            .with("expectedSeq", expected)
            .with("receivedSeq", received)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code, self.message)
    }
}

impl std::error::Error for ApiError {}
