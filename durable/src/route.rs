//! The HTTP surface as data: paths of seed `000_*` parsed into [`Route`]s, ids
//! checked, cursors parsed. The stateless Worker and the thread's Durable
//! Object share this parser, so both agree on every path.

use crate::error::ApiError;

/// Longest thread or run id.
pub const MAX_ID: usize = 128;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `POST /instance-ai/chat/:threadId`
    Chat { thread: String },
    /// `POST /instance-ai/chat/:threadId/cancel`
    Cancel { thread: String },
    /// `GET /instance-ai/events/:threadId`
    Events { thread: String },
    /// `POST /instance-ai/threads/:threadId/runs/:runId/events`
    Publish { thread: String, run: String },
    /// `GET /instance-ai/threads/:threadId/status`
    Status { thread: String },
    /// `GET /instance-ai/threads/:threadId/messages`
    Messages { thread: String },
    /// `GET /instance-ai/threads/:threadId/debug/stats` (only with `DEBUG_ROUTES`)
    Stats { thread: String },
    /// `POST /instance-ai/confirm/:requestId` (the thread is in the request id)
    Confirm { thread: String, request: String },
    /// `GET /instance-ai/threads/:threadId/queue`
    QueueList { thread: String },
    /// `POST /instance-ai/threads/:threadId/stream-token`
    StreamToken { thread: String },
    /// `DELETE /instance-ai/threads/:threadId`
    Delete { thread: String },
    /// `PATCH` (edit `{message}`) or `DELETE` `/instance-ai/threads/:threadId/queue/:messageId`
    QueueItem { thread: String, message: String, delete: bool },
    /// `POST /instance-ai/threads/:threadId/queue/:messageId/move` `{position}`
    QueueMove { thread: String, message: String },
    /// `POST /instance-ai/threads/:threadId/queue/pause` and `/resume`
    QueuePause { thread: String, paused: bool },
    /// `GET` (messages, queue, pin) or `PATCH` (`{model}` pin) `/agent/threads/:id`
    AgentThread { thread: String, patch: bool },
    /// `POST /agent/threads/:id/chat`: agora's `POST /agent/chat`, routed to
    /// its thread by the Worker.
    AgentChat { thread: String },
    /// `GET /agent/chat/:runId/stream` (the thread is in the run id)
    AgentStream { thread: String, run: String },
    /// `POST /agent/threads/:id/tool-call/approve|reject`: agora's
    /// `/agent/tool-call/approve|reject`, routed by the Worker.
    ToolDecision { thread: String, approve: bool },
    /// `GET /v1/threads/:threadId`: the thread's log as a Durable Stream
    /// (`?offset`, `live=long-poll|sse`, `view=history|updates`).
    StreamThread { thread: String },
    /// `GET` (read) or `POST` (an agent's idempotent append) `/v1/runs/:runId`:
    /// one run's events as a Durable Stream (the thread is in the run id).
    StreamRun { thread: String, run: String, append: bool },
}

impl Route {
    /// The thread the route belongs to.
    pub fn thread(&self) -> &str {
        match self {
            Route::Chat { thread }
            | Route::Cancel { thread }
            | Route::Events { thread }
            | Route::Publish { thread, .. }
            | Route::Status { thread }
            | Route::Messages { thread }
            | Route::Stats { thread }
            | Route::Confirm { thread, .. }
            | Route::QueueList { thread }
            | Route::StreamToken { thread }
            | Route::Delete { thread }
            | Route::QueueItem { thread, .. }
            | Route::QueueMove { thread, .. }
            | Route::QueuePause { thread, .. }
            | Route::AgentThread { thread, .. }
            | Route::AgentChat { thread }
            | Route::AgentStream { thread, .. }
            | Route::ToolDecision { thread, .. }
            | Route::StreamThread { thread }
            | Route::StreamRun { thread, .. } => thread,
        }
    }

    /// Parses `method` + `path`: 404 `not_found` for unknown paths, 405
    /// `method_not_allowed` for a known path with another method, 400
    /// `invalid_id` for a malformed thread or run id.
    pub fn parse(method: &str, path: &str) -> Result<Route, ApiError> {
        let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let (route, allowed): (Route, &[&str]) = match segs.as_slice() {
            ["instance-ai", "chat", t] => (Route::Chat { thread: id(t)? }, &["POST"]),
            ["instance-ai", "chat", t, "cancel"] => (Route::Cancel { thread: id(t)? }, &["POST"]),
            ["instance-ai", "events", t] => (Route::Events { thread: id(t)? }, &["GET"]),
            ["instance-ai", "threads", t, "runs", r, "events"] => {
                (Route::Publish { thread: id(t)?, run: run_id(r)? }, &["POST"])
            }
            ["instance-ai", "threads", t, "status"] => (Route::Status { thread: id(t)? }, &["GET"]),
            ["instance-ai", "threads", t, "messages"] => (Route::Messages { thread: id(t)? }, &["GET"]),
            ["instance-ai", "threads", t, "debug", "stats"] => (Route::Stats { thread: id(t)? }, &["GET"]),
            ["instance-ai", "confirm", r] => {
                let thread = crate::confirm::thread_of(r)?;
                (Route::Confirm { thread: thread.to_owned(), request: (*r).to_owned() }, &["POST"])
            }
            ["instance-ai", "threads", t, "queue"] => (Route::QueueList { thread: id(t)? }, &["GET"]),
            ["instance-ai", "threads", t, "stream-token"] => (Route::StreamToken { thread: id(t)? }, &["POST"]),
            ["instance-ai", "threads", t] => (Route::Delete { thread: id(t)? }, &["DELETE"]),
            ["instance-ai", "threads", t, "queue", action @ ("pause" | "resume")] => {
                (Route::QueuePause { thread: id(t)?, paused: *action == "pause" }, &["POST"])
            }
            ["instance-ai", "threads", t, "queue", m] => (
                Route::QueueItem { thread: id(t)?, message: run_id(m)?, delete: method == "DELETE" },
                &["PATCH", "DELETE"],
            ),
            ["instance-ai", "threads", t, "queue", m, "move"] => {
                (Route::QueueMove { thread: id(t)?, message: run_id(m)? }, &["POST"])
            }
            ["agent", "threads", t] => {
                (Route::AgentThread { thread: id(t)?, patch: method == "PATCH" }, &["GET", "PATCH"])
            }
            ["agent", "threads", t, "chat"] => (Route::AgentChat { thread: id(t)? }, &["POST"]),
            ["agent", "threads", t, "tool-call", action @ ("approve" | "reject")] => {
                (Route::ToolDecision { thread: id(t)?, approve: *action == "approve" }, &["POST"])
            }
            ["agent", "chat", r, "stream"] => {
                let nothing = || ApiError::not_found("nothing_to_resume", "no run with this id to resume");
                let thread = thread_of(r).ok_or_else(nothing)?;
                (Route::AgentStream { thread: thread.to_owned(), run: (*r).to_owned() }, &["GET"])
            }
            ["v1", "threads", t] => (Route::StreamThread { thread: id(t)? }, &["GET"]),
            ["v1", "runs", r] => {
                run_id(r)?;
                let thread = thread_of(r).ok_or_else(|| ApiError::not_found("run_not_found", "no run with this id"))?;
                (Route::StreamRun { thread: thread.to_owned(), run: (*r).to_owned(), append: method == "POST" }, &["GET", "POST"])
            }
            _ => return Err(ApiError::not_found("not_found", format!("no route for {path}"))),
        };
        let head_of_get = allowed.contains(&"GET") && method == "HEAD";
        if !(allowed.contains(&method) || head_of_get) {
            let allow = allowed.join(", ");
            return Err(ApiError::new(405, "method_not_allowed", format!("{path} takes {allow}")).with("allow", allow));
        }
        Ok(route)
    }
}

/// Thread and run ids: 1 to [`MAX_ID`] of `A-Z a-z 0-9 _ -`.
pub fn id(raw: &str) -> Result<String, ApiError> {
    let ok = !raw.is_empty()
        && raw.len() <= MAX_ID
        && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(raw.to_owned())
    } else {
        Err(ApiError::bad_request(
            "invalid_id",
            format!("ids are 1 to {MAX_ID} characters of A-Z, a-z, 0-9, `_` and `-`"),
        ))
    }
}

/// Run (and tool call) ids the server makes carry their thread:
/// `<threadId>.<local id>`, so a route that names only a run finds its
/// thread. Plain ids are accepted too (runs of older threads, agents' own).
pub fn run_id(raw: &str) -> Result<String, ApiError> {
    match raw.split_once('.') {
        Some((thread, local)) if raw.len() <= 2 * MAX_ID + 1 => {
            id(thread)?;
            id(local)?;
            Ok(raw.to_owned())
        }
        Some(_) => Err(ApiError::bad_request("invalid_id", "run ids are `<threadId>.<id>`")),
        None => id(raw),
    }
}

/// The thread a scoped id (`<threadId>.<id>`) belongs to.
pub fn thread_of(scoped: &str) -> Option<&str> {
    let (thread, local) = scoped.split_once('.')?;
    (id(thread).is_ok() && id(local).is_ok()).then_some(thread)
}

/// `<threadId>.<local>`.
pub fn scoped(thread: &str, local: &str) -> String {
    if thread.is_empty() { local.to_owned() } else { format!("{thread}.{local}") }
}

/// The SSE replay cursor: a `Last-Event-ID` header wins, else `?lastEventId`,
/// else 0 (full history). Either one malformed is 400 `invalid_cursor`.
pub fn cursor(header: Option<&str>, query: Option<&str>) -> Result<u64, ApiError> {
    let parse = |source: &str, v: &str| {
        let v = v.trim();
        if v.is_empty() || v.len() > 15 || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ApiError::bad_request(
                "invalid_cursor",
                format!("{source} must be a non-negative integer event id"),
            ));
        }
        Ok(v.parse::<u64>().expect("checked digits"))
    };
    match (header.filter(|h| !h.is_empty()), query) {
        (Some(h), _) => parse("Last-Event-ID", h),
        (None, Some(q)) => parse("lastEventId", q),
        (None, None) => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_seed_paths() {
        assert_eq!(Route::parse("POST", "/instance-ai/chat/t1").unwrap(), Route::Chat { thread: "t1".into() });
        assert_eq!(
            Route::parse("POST", "/instance-ai/threads/t1/runs/run_2/events").unwrap(),
            Route::Publish { thread: "t1".into(), run: "run_2".into() }
        );
        assert_eq!(Route::parse("GET", "/instance-ai/events/t-1").unwrap().thread(), "t-1");
    }

    #[test]
    fn refuses_with_the_right_code() {
        let code = |m, p| Route::parse(m, p).unwrap_err().code;
        assert_eq!(code("GET", "/nope"), "not_found");
        assert_eq!(code("GET", "/instance-ai/chat/t1"), "method_not_allowed");
        assert_eq!(code("POST", "/instance-ai/chat/bad%20id"), "invalid_id");
        assert_eq!(code("POST", "/instance-ai/chat/"), "invalid_id");
        assert_eq!(code("POST", &format!("/instance-ai/chat/{}", "x".repeat(129))), "invalid_id");
    }

    #[test]
    fn durable_stream_paths() {
        assert_eq!(Route::parse("GET", "/v1/threads/t1").unwrap(), Route::StreamThread { thread: "t1".into() });
        assert_eq!(
            Route::parse("POST", "/v1/runs/t1.run_ab").unwrap(),
            Route::StreamRun { thread: "t1".into(), run: "t1.run_ab".into(), append: true }
        );
        assert_eq!(Route::parse("GET", "/v1/runs/plain").unwrap_err().code, "run_not_found");
        assert_eq!(Route::parse("GET", "/v1/runs/a.b.c").unwrap_err().code, "invalid_id");
        assert_eq!(Route::parse("DELETE", "/v1/threads/t1").unwrap_err().code, "method_not_allowed");
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
}
