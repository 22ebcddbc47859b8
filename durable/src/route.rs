//! The HTTP surface as data: the paths of the protocols
//! (`docs/protocols/000-instance-ai.md`, `001-agora.md`, `004-flue.md`)
//! parsed into [`Route`]s, ids checked. The stateless Worker and the thread's
//! Durable Object share this parser, so both agree on every path.

use crate::error::ApiError;
use crate::ids::{id, run_id, thread_of};

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
    /// `POST /api/chat/:id`: the AI SDK's `POST /api/chat {id, messages}`,
    /// routed to its thread by the Worker.
    UiChat { thread: String },
    /// `GET /api/chat/:id/stream`: `useChat({resume: true})`'s reconnect to
    /// the active run (204 when there is none).
    UiStream { thread: String },
    /// `GET /api/chat/:id/runs/:runId/stream?after=&continue=`: one run as a
    /// UI message stream, from a point of its log (what a send answers with).
    UiRunStream { thread: String, run: String },
    /// `GET /api/chat/:id/messages`: the history as `UIMessage[]`.
    UiMessages { thread: String },
    /// `POST /api/chat/:id/stop`: cancels the active run.
    UiStop { thread: String },
    /// `POST /ag-ui/threads/:id/run`: AG-UI's `POST /ag-ui`, routed to its
    /// thread by the Worker.
    AguiRun { thread: String },
    /// `GET /ag-ui/threads/:id/runs/:runId`: re-attach to a run's AG-UI
    /// stream (`Last-Event-ID` or `?after=`; whole from `RUN_STARTED` without).
    AguiStream { thread: String, run: String },
    /// `GET /ag-ui/threads/:id/messages`: the history as AG-UI messages.
    AguiMessages { thread: String },
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
            | Route::StreamRun { thread, .. }
            | Route::UiChat { thread }
            | Route::UiStream { thread }
            | Route::UiRunStream { thread, .. }
            | Route::UiMessages { thread }
            | Route::UiStop { thread }
            | Route::AguiRun { thread }
            | Route::AguiStream { thread, .. }
            | Route::AguiMessages { thread } => thread,
        }
    }

    /// Publishing routes: an external agent appends to its run with the
    /// run's publish token, and needs no caller.
    pub fn publishes(&self) -> bool {
        matches!(self, Route::Publish { .. } | Route::StreamRun { append: true, .. })
    }

    /// Routes that read the thread's streams: the ones a stream token opens.
    pub fn reads_stream(&self) -> bool {
        matches!(
            self,
            Route::Events { .. }
                | Route::AgentStream { .. }
                | Route::StreamThread { .. }
                | Route::StreamRun { append: false, .. }
                | Route::UiStream { .. }
                | Route::UiRunStream { .. }
                | Route::AguiStream { .. }
        )
    }

    /// Routes that decide a confirmation.
    pub fn decides(&self) -> bool {
        matches!(self, Route::Confirm { .. } | Route::ToolDecision { .. })
    }

    /// Routes that send a message (and may create the thread).
    pub fn sends(&self) -> bool {
        matches!(self, Route::Chat { .. } | Route::AgentChat { .. } | Route::UiChat { .. } | Route::AguiRun { .. })
    }

    /// What this route answers for an id it does not know; a thread that is
    /// not the caller's answers the same, so existence does not leak.
    pub fn not_found(&self) -> ApiError {
        match self {
            Route::AgentStream { .. } | Route::UiRunStream { .. } | Route::AguiStream { .. } => {
                ApiError::nothing_to_resume()
            }
            Route::Confirm { .. } => ApiError::confirmation_not_found(),
            Route::ToolDecision { .. } => ApiError::tool_call_not_found(),
            _ => ApiError::thread_not_found(),
        }
    }

    /// The most body bytes this route reads: the shell refuses a larger
    /// declared length before reading, and stops a chunked body at it.
    pub fn body_limit(&self, limits: &crate::settings::Limits) -> usize {
        match self {
            Route::Publish { .. } | Route::StreamRun { append: true, .. } => limits.max_batch_bytes,
            Route::Events { .. }
            | Route::Status { .. }
            | Route::Messages { .. }
            | Route::Stats { .. }
            | Route::QueueList { .. }
            | Route::Delete { .. }
            | Route::AgentStream { .. }
            | Route::StreamThread { .. }
            | Route::StreamRun { append: false, .. }
            | Route::UiStream { .. }
            | Route::UiRunStream { .. }
            | Route::UiMessages { .. }
            | Route::AguiStream { .. }
            | Route::AguiMessages { .. } => 0,
            _ => limits.max_body_bytes,
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
                let thread = thread_of(r).ok_or_else(ApiError::confirmation_not_found)?;
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
                let thread = thread_of(r).ok_or_else(ApiError::nothing_to_resume)?;
                (Route::AgentStream { thread: thread.to_owned(), run: (*r).to_owned() }, &["GET"])
            }
            ["api", "chat", t] => (Route::UiChat { thread: id(t)? }, &["POST"]),
            ["api", "chat", t, "stream"] => (Route::UiStream { thread: id(t)? }, &["GET"]),
            ["api", "chat", t, "messages"] => (Route::UiMessages { thread: id(t)? }, &["GET"]),
            ["api", "chat", t, "stop"] => (Route::UiStop { thread: id(t)? }, &["POST"]),
            ["api", "chat", t, "runs", r, "stream"] => {
                let thread = id(t)?;
                run_id(r)?;
                if thread_of(r) != Some(thread.as_str()) {
                    return Err(ApiError::nothing_to_resume());
                }
                (Route::UiRunStream { thread, run: (*r).to_owned() }, &["GET"])
            }
            ["ag-ui", "threads", t, "run"] => (Route::AguiRun { thread: id(t)? }, &["POST"]),
            ["ag-ui", "threads", t, "messages"] => (Route::AguiMessages { thread: id(t)? }, &["GET"]),
            ["ag-ui", "threads", t, "runs", r] => {
                let thread = id(t)?;
                run_id(r)?;
                if thread_of(r) != Some(thread.as_str()) {
                    return Err(ApiError::nothing_to_resume());
                }
                (Route::AguiStream { thread, run: (*r).to_owned() }, &["GET"])
            }
            ["v1", "threads", t] => (Route::StreamThread { thread: id(t)? }, &["GET"]),
            ["v1", "runs", r] => {
                run_id(r)?;
                let thread = thread_of(r).ok_or_else(ApiError::run_not_found)?;
                (
                    Route::StreamRun { thread: thread.to_owned(), run: (*r).to_owned(), append: method == "POST" },
                    &["GET", "POST"],
                )
            }
            _ => return Err(ApiError::not_found_route(format!("no route for {path}"))),
        };
        let head_of_get = allowed.contains(&"GET") && method == "HEAD";
        if !(allowed.contains(&method) || head_of_get) {
            return Err(ApiError::method_not_allowed(path, &allowed.join(", ")));
        }
        Ok(route)
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
}
