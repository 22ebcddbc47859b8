//! The AI SDK's UI message stream (`ai` 7.0.173 and 6.0.325: `ui-message-chunks.ts`,
//! `process-ui-message-stream.ts`; `docs/protocols/ai-sdk-ui-message-stream.md`): a run's
//! events as the chunks `useChat` reads, and the fold of those chunks into
//! the `UIMessage` the client ends up holding.
//!
//! One mapping, [`UiMapper`], serves the live stream, its replay after a
//! reload and the history route: the history folds the same chunks the
//! stream sends ([`fold`]), so a client's message and the history's are the
//! same message. Blocks record each delta's length (`parts`), so a replayed
//! block becomes exactly the `text-delta`s that went out live.
//!
//! The client validates every chunk against a closed schema: an unknown
//! chunk type, a missing required field or a `null` optional field fails
//! the whole response. So the mapper sends only the types below, and omits
//! absent fields.
//!
//! | log event (root agent) | chunks |
//! | --- | --- |
//! | (the stream's start) | `start {messageId: runId}` |
//! | `step-start` / `step-finish {usage}` | `start-step` / `finish-step`, `message-metadata {usage}` |
//! | `text-*` / `reasoning-*` | `text-start`, `text-delta` per delta, `text-end` (the same for reasoning) |
//! | `tool-input-start` | `tool-input-start {dynamic: true}` |
//! | `tool-call` | `tool-input-available {input}` |
//! | `tool-result` | `tool-output-available {output}` |
//! | `tool-error` after a denial | `tool-output-denied` |
//! | `tool-error`, `tool-interrupted` | `tool-output-error {errorText}` |
//! | `confirmation-request` (approval) | `tool-approval-request {approvalId: requestId, toolCallId}` |
//! | `confirmation-request` (text, questions, plan review) | `data-confirmation` (id: the request id) |
//! | `confirmation-request` (a client tool) | nothing: the call's part waits for the client's output |
//! | `tasks-update` | `data-tasks` (id `tasks`) |
//! | `thread-title-updated` | `data-title` (id `title`) |
//! | `agent-spawned` / `agent-completed` (any depth) | `data-agent` (id: the agent id) |
//! | `status` | `data-status`, transient |
//! | `run-finish` | `finish`; cancelled: `abort`, `finish`; failed: `error {errorText}`, `finish` |
//!
//! The stream ends with `data: [DONE]`; a run waiting for a person ends
//! its stream too (`finish`), and the client's answer continues it.

use crate::log::event::payload::ConfirmationRequest;
use crate::log::event::{Event, FinishStatus, Payload};
use crate::log::segment::{Piece, SentText};
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};

/// A `tool-error` that starts with what the agent tells the model of a
/// denial is a denial (`tool-output-denied`); one that says the request
/// expired records no decision (nobody answered).
pub use crate::agent::{DENIED, EXPIRED};

/// The headers of a UI message stream.
pub const HEADERS: &[(&str, &str)] = &[
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("x-vercel-ai-ui-message-stream", "v1"),
    ("x-accel-buffering", "no"),
];

/// The stream's last line.
pub const DONE: &[u8] = b"data: [DONE]\n\n";

/// The keep-alive: an SSE comment, which the client's parser skips.
pub const PING: &[u8] = b": ping\n\n";

/// One chunk as an SSE event.
pub fn encode(chunk: &Value, out: &mut Vec<u8>) {
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(chunk.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// A `finish`. It carries (empty) metadata so that the client writes its
/// message out: a `start-step` is shown only at the client's next write,
/// and `finish` without metadata is none, so the history and the client
/// agree on a run that ended right after a step began.
fn finish(reason: &str) -> Value {
    json!({ "type": "finish", "finishReason": reason, "messageMetadata": {} })
}

/// The text or reasoning part open on the stream.
#[derive(Debug, Clone)]
struct Open {
    /// The chunk id the part was started with.
    id: String,
    sent: SentText,
}

/// Maps a run's events to UI message chunks; the same events always give
/// the same chunks.
#[derive(Debug, Clone)]
pub struct UiMapper {
    root: String,
    open: Option<Open>,
    /// Segments started per (kind, response id): part ids are unique.
    segments: HashMap<(bool, String), usize>,
    /// Tool calls the client holds a part for.
    calls: HashSet<String>,
    /// Calls with an approval request, by call id.
    approvals: HashSet<String>,
    /// The current step's calls, and which have an outcome.
    step_calls: Vec<String>,
    settled: HashSet<String>,
    /// Calls waiting for a person.
    waiting: HashSet<String>,
    /// What a sub-agent part holds, by agent id.
    agents: HashMap<String, Value>,
    /// The last `error` event's text (a failed run's `errorText`).
    last_error: Option<String>,
    /// Continuing a message the client holds: calls before the window are
    /// its, so an outcome needs no part first.
    continuing: bool,
    finished: bool,
}

impl UiMapper {
    pub fn new(root_agent: &str) -> UiMapper {
        UiMapper {
            root: root_agent.to_owned(),
            open: None,
            segments: HashMap::new(),
            calls: HashSet::new(),
            approvals: HashSet::new(),
            step_calls: Vec::new(),
            settled: HashSet::new(),
            waiting: HashSet::new(),
            agents: HashMap::new(),
            last_error: None,
            continuing: false,
            finished: false,
        }
    }

    /// A mapper for the rest of a message the client already holds.
    pub fn continuing(root_agent: &str) -> UiMapper {
        UiMapper { continuing: true, ..UiMapper::new(root_agent) }
    }

    /// The stream's first chunk.
    pub fn start(message_id: &str) -> Value {
        json!({ "type": "start", "messageId": message_id })
    }

    /// The run has finished (its `run-finish` was mapped).
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// The run waits for a person, and nothing of its step is still
    /// running: a live stream ends here ([`Self::pause`]), and the client's
    /// answer continues the message.
    pub fn waiting(&self) -> bool {
        !self.finished
            && !self.waiting.is_empty()
            && self.step_calls.iter().all(|c| self.settled.contains(c) || self.waiting.contains(c))
    }

    /// The chunks that end a stream paused for a person.
    pub fn pause(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        self.close(&mut out);
        out.push(finish("tool-calls"));
        out
    }

    /// The chunks of one event.
    pub fn map(&mut self, ev: &Event) -> Vec<Value> {
        let mut out = Vec::new();
        if self.finished {
            return out;
        }
        // Sub-agents show as data parts, whatever their depth; the rest of
        // a sub-agent's work is its own (only its end shows).
        let root = ev.agent_id == self.root;
        match &ev.payload {
            Payload::AgentSpawned(spawned) => {
                if spawned.parent_id == self.root {
                    self.close(&mut out);
                }
                let mut data = json!({ "agentId": ev.agent_id, "parentId": spawned.parent_id, "role": spawned.role, "status": "running" });
                for (k, v) in [("title", &spawned.title), ("goal", &spawned.goal), ("kind", &spawned.kind)] {
                    if let Some(v) = v {
                        data[k] = v.clone().into();
                    }
                }
                self.agents.insert(ev.agent_id.clone(), data.clone());
                out.push(json!({ "type": "data-agent", "id": ev.agent_id, "data": data }));
            }
            Payload::AgentCompleted(done) => {
                let mut data = self
                    .agents
                    .get(&ev.agent_id)
                    .cloned()
                    .unwrap_or_else(|| json!({ "agentId": ev.agent_id, "role": done.role }));
                data["status"] = if done.error.is_some() { "failed" } else { "completed" }.into();
                if let Some(error) = &done.error {
                    data["error"] = error.clone().into();
                } else if !done.result.is_null() {
                    data["result"] = done.result.clone();
                }
                self.agents.insert(ev.agent_id.clone(), data.clone());
                out.push(json!({ "type": "data-agent", "id": ev.agent_id, "data": data }));
            }
            Payload::TextDelta(_) | Payload::ReasoningDelta(_) | Payload::TextBlock(_) | Payload::ReasoningBlock(_) => {
                if root {
                    self.text(ev, &mut out);
                }
            }
            Payload::StepStart(_) => {
                if root {
                    self.close(&mut out);
                    self.step_calls.clear();
                    out.push(json!({ "type": "start-step" }));
                }
            }
            Payload::StepFinish(step) => {
                if root {
                    self.close(&mut out);
                    out.push(json!({ "type": "finish-step" }));
                    if let Some((input, output)) = step.token_counts() {
                        let usage = json!({ "inputTokens": input, "outputTokens": output });
                        out.push(json!({ "type": "message-metadata", "messageMetadata": { "usage": usage } }));
                    }
                }
            }
            Payload::ToolInputStart(start) => {
                if root {
                    self.close(&mut out);
                    let id = &start.tool_call_id;
                    self.step_call(id);
                    if self.calls.insert(id.clone()) {
                        let mut chunk = json!({ "type": "tool-input-start", "toolCallId": id, "toolName": start.tool_name, "dynamic": true });
                        mcp_server(start.server.as_deref(), None, &mut chunk);
                        out.push(chunk);
                    }
                }
            }
            Payload::ToolCall(call) => {
                if root {
                    self.close(&mut out);
                    let id = &call.tool_call_id;
                    self.step_call(id);
                    self.calls.insert(id.clone());
                    let mut available = json!({
                        "type": "tool-input-available",
                        "toolCallId": id,
                        "toolName": call.tool_name,
                        "input": call.args,
                        "dynamic": true,
                    });
                    mcp_server(call.server.as_deref(), call.title.as_deref(), &mut available);
                    out.push(available);
                }
            }
            Payload::ToolResult(r) => {
                if root {
                    let id = &r.tool_call_id;
                    self.outcome(id, &mut out);
                    out.push(json!({ "type": "tool-output-available", "toolCallId": id, "output": r.result, "dynamic": true }));
                }
            }
            Payload::ToolError(e) | Payload::ToolInterrupted(e) => {
                if root {
                    let id = &e.tool_call_id;
                    self.outcome(id, &mut out);
                    // A continuation starts after the request: its call is the
                    // client's, asked for approval.
                    if (self.approvals.contains(id) || self.continuing) && e.error.starts_with(DENIED) {
                        out.push(json!({ "type": "tool-output-denied", "toolCallId": id }));
                    } else {
                        let error = if e.error.is_empty() { "the tool call did not complete" } else { &e.error };
                        out.push(
                            json!({ "type": "tool-output-error", "toolCallId": id, "errorText": error, "dynamic": true }),
                        );
                    }
                }
            }
            Payload::ConfirmationRequest(req) => {
                if root {
                    self.confirmation(req, &mut out);
                }
            }
            Payload::TasksUpdate(tasks) => {
                if root {
                    out.push(json!({ "type": "data-tasks", "id": "tasks", "data": { "tasks": tasks.list_json() } }));
                }
            }
            Payload::ThreadTitleUpdated(title) => {
                if root {
                    out.push(json!({ "type": "data-title", "id": "title", "data": { "title": title.title } }));
                }
            }
            Payload::Status(status) => {
                if root {
                    out.push(
                        json!({ "type": "data-status", "data": { "message": status.message }, "transient": true }),
                    );
                }
            }
            Payload::Error(error) => {
                if root && !error.content.is_empty() {
                    self.last_error = Some(error.content.clone());
                }
            }
            Payload::RunFinish(fin) => {
                self.close(&mut out);
                self.finished = true;
                let reason = fin.reason.clone().unwrap_or_default();
                match fin.status {
                    FinishStatus::Completed => out.push(finish("stop")),
                    FinishStatus::Cancelled => {
                        let reason = if reason.is_empty() { "cancelled".to_owned() } else { reason };
                        out.push(json!({ "type": "abort", "reason": reason }));
                        out.push(finish("other"));
                    }
                    FinishStatus::Error | FinishStatus::Interrupted => {
                        let status = fin.status.as_str();
                        let error = match (self.last_error.take(), reason.is_empty()) {
                            (Some(e), _) => e,
                            (None, false) => reason,
                            (None, true) => format!("the run ended: {status}"),
                        };
                        // The client stops reading at `error`: what it holds
                        // is written out first.
                        out.push(json!({ "type": "message-metadata", "messageMetadata": {} }));
                        out.push(json!({ "type": "error", "errorText": error }));
                        out.push(finish("error"));
                    }
                }
            }
            // The message's `start` is the stream's own (it names the
            // message); a settlement shows as its call's outcome; the queue
            // and the n8n gateway's requests are not part of a UI message.
            Payload::RunStart(_)
            | Payload::ConfirmationSettled(_)
            | Payload::QueueUpdated(_)
            | Payload::FilesystemRequest(_) => {}
        }
        out
    }

    /// A request for a person: an approval is the call's
    /// `tool-approval-request`; a client tool waits for the client's
    /// output; any other request is a `data-confirmation` part.
    fn confirmation(&mut self, req: &ConfirmationRequest, out: &mut Vec<Value>) {
        self.close(out);
        let call = &req.tool_call_id;
        let input_type = req.input_type.as_ref().map_or("approval", |t| t.as_str());
        if !call.is_empty() {
            self.step_call(call);
            self.waiting.insert(call.clone());
        }
        if input_type == crate::storage::store::CLIENT_TOOL {
            // The client runs it: its part is `input-available`, and
            // the client's `addToolOutput` continues the message.
        } else if input_type == "approval" && !call.is_empty() {
            if !self.calls.contains(call) && !self.continuing {
                self.calls.insert(call.clone());
                out.push(json!({
                    "type": "tool-input-available",
                    "toolCallId": call,
                    "toolName": req.tool_name,
                    "input": req.args,
                    "dynamic": true,
                }));
            }
            self.approvals.insert(call.clone());
            out.push(json!({ "type": "tool-approval-request", "approvalId": req.request_id, "toolCallId": call }));
        } else {
            out.push(json!({ "type": "data-confirmation", "id": req.request_id, "data": req }));
        }
    }

    fn step_call(&mut self, id: &str) {
        if !self.step_calls.iter().any(|c| c == id) {
            self.step_calls.push(id.to_owned());
        }
    }

    /// A call's outcome: the client must hold its part first.
    fn outcome(&mut self, id: &str, out: &mut Vec<Value>) {
        self.close(out);
        self.settled.insert(id.to_owned());
        self.waiting.remove(id);
        if !self.calls.contains(id) && !self.continuing {
            self.calls.insert(id.to_owned());
            out.push(json!({ "type": "tool-input-start", "toolCallId": id, "toolName": "unknown", "dynamic": true }));
        }
    }

    /// Ends the open text or reasoning part.
    fn close(&mut self, out: &mut Vec<Value>) {
        if let Some(open) = self.open.take() {
            let kind = if open.sent.reasoning { "reasoning-end" } else { "text-end" };
            out.push(json!({ "type": kind, "id": open.id }));
        }
    }

    fn text(&mut self, ev: &Event, out: &mut Vec<Value>) {
        let Some(piece) = Piece::of(ev) else { return };
        let reasoning = piece.reasoning;
        if !self.open.as_ref().is_some_and(|o| o.sent.continues(&piece, &ev.response_id)) {
            self.close(out);
            let key = (reasoning, ev.response_id.clone().unwrap_or_default());
            let n = self.segments.entry(key.clone()).or_insert(0);
            let id = format!("{}-{}-{}", if reasoning { "r" } else { "t" }, key.1, n);
            *n += 1;
            out.push(json!({ "type": if reasoning { "reasoning-start" } else { "text-start" }, "id": id }));
            self.open = Some(Open { id, sent: SentText::new(reasoning, ev.response_id.clone()) });
        }
        let open = self.open.as_mut().expect("opened above");
        let kind = if reasoning { "reasoning-delta" } else { "text-delta" };
        for delta in open.sent.advance(&piece) {
            out.push(json!({ "type": kind, "id": open.id, "delta": delta }));
        }
    }
}

/// The message a client holds after reading `chunks` (the AI SDK's
/// `processUIMessageStream`, for the chunks [`UiMapper`] sends), as JSON
/// without the fields the client leaves undefined.
#[derive(Debug, Default, Clone)]
pub struct UiMessage {
    pub id: String,
    pub parts: Vec<Value>,
    pub metadata: Option<Value>,
    active: HashMap<String, usize>,
}

impl UiMessage {
    pub fn new(id: &str) -> UiMessage {
        UiMessage { id: id.to_owned(), ..UiMessage::default() }
    }

    /// Applies one chunk.
    pub fn apply(&mut self, chunk: &Value) {
        let kind = chunk["type"].as_str().unwrap_or_default();
        let id = chunk["id"].as_str().unwrap_or_default().to_owned();
        let call = chunk["toolCallId"].as_str().unwrap_or_default();
        match kind {
            "start" => {
                if let Some(m) = chunk["messageId"].as_str() {
                    self.id = m.to_owned();
                }
            }
            "start-step" => self.parts.push(json!({ "type": "step-start" })),
            "finish-step" => self.active.clear(),
            "text-start" => {
                self.active.insert(id, self.parts.len());
                self.parts.push(json!({ "type": "text", "text": "", "state": "streaming" }));
            }
            "reasoning-start" => {
                self.active.insert(id.clone(), self.parts.len());
                // Reasoning parts keep their chunk id; text parts do not.
                self.parts.push(json!({ "type": "reasoning", "id": id, "text": "", "state": "streaming" }));
            }
            "text-delta" | "reasoning-delta" => {
                if let Some(&i) = self.active.get(&id) {
                    let text = format!(
                        "{}{}",
                        self.parts[i]["text"].as_str().unwrap_or_default(),
                        chunk["delta"].as_str().unwrap_or_default()
                    );
                    self.parts[i]["text"] = text.into();
                }
            }
            "text-end" | "reasoning-end" => {
                if let Some(i) = self.active.remove(&id) {
                    self.parts[i]["state"] = "done".into();
                }
            }
            "tool-input-start" | "tool-input-available" => {
                let state = if kind == "tool-input-start" { "input-streaming" } else { "input-available" };
                let part = match self.step_tool(call) {
                    Some(i) => &mut self.parts[i],
                    None => {
                        self.parts.push(json!({ "type": "dynamic-tool", "toolCallId": call }));
                        self.parts.last_mut().expect("pushed")
                    }
                };
                part["toolName"] = chunk["toolName"].clone();
                part["state"] = state.into();
                let obj = part.as_object_mut().expect("a part is an object");
                for k in ["output", "errorText"] {
                    obj.remove(k);
                }
                match chunk.get("input") {
                    Some(input) => obj.insert("input".into(), input.clone()),
                    None => obj.remove("input"),
                };
            }
            "tool-approval-request" => {
                if let Some(i) = self.tool(call) {
                    self.parts[i]["state"] = "approval-requested".into();
                    self.parts[i]["approval"] = json!({ "id": chunk["approvalId"] });
                }
            }
            "tool-output-available" | "tool-output-error" | "tool-output-denied" => {
                let Some(i) = self.tool(call) else { return };
                let part = self.parts[i].as_object_mut().expect("a part is an object");
                part.remove("output");
                part.remove("errorText");
                let state = kind.trim_start_matches("tool-");
                part.insert("state".into(), state.into());
                match kind {
                    "tool-output-available" => {
                        part.insert("output".into(), chunk["output"].clone());
                    }
                    "tool-output-error" => {
                        part.insert("errorText".into(), chunk["errorText"].clone());
                    }
                    _ => {}
                }
                // The decision the client recorded with its answer.
                let expired = chunk["errorText"].as_str().is_some_and(|e| e.starts_with(EXPIRED));
                if let Some(Value::Object(approval)) = part.get_mut("approval") {
                    if !approval.contains_key("approved") && !expired {
                        approval.insert("approved".into(), (kind != "tool-output-denied").into());
                    }
                }
            }
            "message-metadata" | "finish" => {
                if let Some(m) = chunk.get("messageMetadata").filter(|m| !m.is_null()) {
                    let mut merged = self.metadata.take().unwrap_or_else(|| Value::Object(Map::new()));
                    merge(&mut merged, m);
                    self.metadata = Some(merged);
                }
            }
            k if k.starts_with("data-") => {
                if chunk["transient"].as_bool() == Some(true) {
                    return;
                }
                let existing = (!id.is_empty())
                    .then(|| self.parts.iter_mut().find(|p| p["type"] == kind && p["id"] == id.as_str()));
                match existing.flatten() {
                    Some(part) => part["data"] = chunk["data"].clone(),
                    None => self.parts.push(chunk.clone()),
                }
            }
            _ => {}
        }
    }

    /// The message as the client's JSON.
    pub fn to_json(&self) -> Value {
        let mut m = json!({ "id": self.id, "role": "assistant", "parts": self.parts });
        if let Some(meta) = &self.metadata {
            m["metadata"] = meta.clone();
        }
        m
    }

    /// A tool part of the current step (after the last `step-start`).
    fn step_tool(&self, call: &str) -> Option<usize> {
        let from = self.parts.iter().rposition(|p| p["type"] == "step-start").map_or(0, |i| i + 1);
        (from..self.parts.len())
            .find(|&i| self.parts[i]["type"] == "dynamic-tool" && self.parts[i]["toolCallId"] == call)
    }

    /// A tool part anywhere in the message (the current step first).
    fn tool(&self, call: &str) -> Option<usize> {
        self.step_tool(call)
            .or_else(|| self.parts.iter().rposition(|p| p["type"] == "dynamic-tool" && p["toolCallId"] == call))
    }
}

/// The AI SDK's `mergeObjects`: objects merge key by key, anything else
/// replaces.
fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

/// A run's assistant message, folded from its stored events.
pub fn fold(run_id: &str, root_agent: &str, events: &[Event]) -> UiMessage {
    let mut mapper = UiMapper::new(root_agent);
    let mut message = UiMessage::new(run_id);
    message.apply(&UiMapper::start(run_id));
    for ev in events {
        for chunk in mapper.map(ev) {
            message.apply(&chunk);
        }
    }
    // A denial's reason is in the error the model was told.
    let errors = events.iter().filter_map(|e| if let Payload::ToolError(error) = &e.payload { Some(error) } else { None });
    for e in errors {
        let Some(rest) = e.error.strip_prefix(DENIED) else { continue };
        let call = e.tool_call_id.as_str();
        if let Some(i) = message.tool(call) {
            if let Value::Object(approval) = &mut message.parts[i]["approval"] {
                approval.insert("approved".into(), false.into());
                if let Some(reason) = rest.strip_prefix(": ").filter(|r| !r.is_empty()) {
                    approval.insert("reason".into(), reason.into());
                }
            }
        }
    }
    message
}

/// The user message of a run, as the client sent it.
pub fn user_message(message_id: &str, text: &str) -> Value {
    json!({ "id": message_id, "role": "user", "parts": [{ "type": "text", "text": text }] })
}

/// An MCP tool's call names its server (`toolMetadata.mcpServer`, which
/// the client keeps on the tool part) and its title.
fn mcp_server(server: Option<&str>, title: Option<&str>, chunk: &mut Value) {
    if let Some(server) = server {
        chunk["toolMetadata"] = json!({ "mcpServer": server });
        let title = title.unwrap_or_default();
        chunk["title"] = if title.is_empty() { server.to_owned() } else { format!("{title} ({server})") }.into();
    }
}

/// A user message with its attachments as `file` parts, each with the URL
/// the same client reads it at (on `origin`): the files first, then the
/// text, as `sendMessage({ text, files })` builds the message.
pub fn user_message_with(
    message_id: &str,
    text: &str,
    attachments: &[crate::files::Attachment],
    origin: &str,
    thread: &str,
) -> Value {
    let mut m = user_message(message_id, text);
    if attachments.is_empty() {
        return m;
    }
    let mut parts: Vec<Value> = attachments
        .iter()
        .map(|a| {
            let mut part = json!({ "type": "file", "mediaType": a.media_type(), "url": a.url(origin, thread) });
            if let Some(name) = a.name() {
                part["filename"] = name.into();
            }
            part
        })
        .collect();
    if !text.is_empty() {
        parts.extend(m["parts"].as_array().cloned().unwrap_or_default());
    }
    m["parts"] = Value::Array(parts);
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::event::Kind;

    fn ev(kind: Kind, agent: &str, rid: Option<&str>, payload: Value) -> Event {
        let mut e = Event::from_json(kind, "r", agent, 0, payload).unwrap();
        e.response_id = rid.map(str::to_owned);
        e
    }

    fn chunks(m: &mut UiMapper, events: &[Event]) -> Vec<Value> {
        events.iter().flat_map(|e| m.map(e)).collect()
    }

    #[test]
    fn live_deltas_and_replayed_blocks_give_the_same_chunks() {
        let live = [
            ev(Kind::StepStart, "o", None, json!({})),
            ev(Kind::ReasoningDelta, "o", Some("s"), json!({"text":"Hm"})),
            ev(Kind::ReasoningBlock, "o", Some("s"), json!({"text":"Hm","parts":[2]})),
            ev(Kind::TextDelta, "o", Some("s"), json!({"text":"He"})),
            ev(Kind::TextBlock, "o", Some("s"), json!({"text":"He","parts":[2]})), // idle flush
            ev(Kind::TextDelta, "o", Some("s"), json!({"text":"llo"})),
            ev(Kind::TextDelta, "sub", Some("x"), json!({"text":"ignored"})),
            ev(Kind::TextBlock, "o", Some("s"), json!({"text":"Hello","parts":[2,3]})),
            ev(Kind::ToolInputStart, "o", None, json!({"toolCallId":"t","toolName":"n"})),
            ev(Kind::StepFinish, "o", None, json!({})),
            ev(Kind::ToolCall, "o", None, json!({"toolCallId":"t","toolName":"n","args":{"a":1}})),
            ev(Kind::ToolResult, "o", None, json!({"toolCallId":"t","result":{"ok":true}})),
            ev(Kind::RunFinish, "o", None, json!({"status":"completed"})),
        ];
        let replay: Vec<Event> =
            live.iter().filter(|e| !matches!(e.kind(), Kind::TextDelta | Kind::ReasoningDelta)).cloned().collect();
        let a = chunks(&mut UiMapper::new("o"), &live);
        let b = chunks(&mut UiMapper::new("o"), &replay);
        assert_eq!(a, b);
        let types: Vec<&str> = a.iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "start-step",
                "reasoning-start",
                "reasoning-delta",
                "reasoning-end",
                "text-start",
                "text-delta",
                "text-delta",
                "text-end",
                "tool-input-start",
                "finish-step",
                "tool-input-available",
                "tool-output-available",
                "finish"
            ]
        );
        let mut m = UiMessage::new("x");
        a.iter().for_each(|c| m.apply(c));
        assert_eq!(
            m.to_json()["parts"],
            json!([
                {"type":"step-start"},
                {"type":"reasoning","id":"r-s-0","text":"Hm","state":"done"},
                {"type":"text","text":"Hello","state":"done"},
                {"type":"dynamic-tool","toolCallId":"t","toolName":"n","state":"output-available","input":{"a":1},"output":{"ok":true}}
            ])
        );
    }

    #[test]
    fn a_run_waiting_for_approval_pauses_once_its_step_is_settled() {
        let mut m = UiMapper::new("o");
        let first = [
            ev(Kind::StepStart, "o", None, json!({})),
            ev(Kind::ToolInputStart, "o", None, json!({"toolCallId":"a","toolName":"del"})),
            ev(Kind::ToolInputStart, "o", None, json!({"toolCallId":"b","toolName":"get"})),
            ev(Kind::StepFinish, "o", None, json!({})),
            ev(Kind::ToolCall, "o", None, json!({"toolCallId":"a","toolName":"del","args":{}})),
            ev(
                Kind::ConfirmationRequest,
                "o",
                None,
                json!({"requestId":"q","toolCallId":"a","toolName":"del","severity":"warning","message":"ok?","inputType":"approval"}),
            ),
            ev(Kind::ToolCall, "o", None, json!({"toolCallId":"b","toolName":"get","args":{}})),
        ];
        chunks(&mut m, &first);
        assert!(!m.waiting(), "b is still running");
        chunks(&mut m, &[ev(Kind::ToolResult, "o", None, json!({"toolCallId":"b","result":1}))]);
        assert!(m.waiting());
        let denied = ev(Kind::ToolError, "o", None, json!({"toolCallId":"a","error":format!("{DENIED}: no")}));
        let out = chunks(&mut m, std::slice::from_ref(&denied));
        assert_eq!(out, [json!({"type":"tool-output-denied","toolCallId":"a"})]);
        assert!(!m.waiting());
        // The history shows the denial with its reason.
        let mut all = first.to_vec();
        all.push(ev(Kind::ToolResult, "o", None, json!({"toolCallId":"b","result":1})));
        all.push(denied);
        let folded = fold("run", "o", &all).to_json();
        let part = folded["parts"].as_array().unwrap().iter().find(|p| p["toolCallId"] == "a").unwrap().clone();
        assert_eq!(
            part,
            json!({"type":"dynamic-tool","toolCallId":"a","toolName":"del","state":"output-denied","input":{},"approval":{"id":"q","approved":false,"reason":"no"}})
        );
    }

    #[test]
    fn finishes_by_status() {
        let fin = |status: &str| {
            let mut m = UiMapper::new("o");
            chunks(
                &mut m,
                &[
                    ev(Kind::Error, "o", None, json!({"content":"boom"})),
                    ev(Kind::RunFinish, "o", None, json!({"status":status,"reason":"why"})),
                ],
            )
        };
        assert_eq!(fin("completed"), [finish("stop")]);
        assert_eq!(fin("cancelled"), [json!({"type":"abort","reason":"why"}), finish("other")]);
        assert_eq!(
            fin("error"),
            [
                json!({"type":"message-metadata","messageMetadata":{}}),
                json!({"type":"error","errorText":"boom"}),
                finish("error")
            ]
        );
    }

    #[test]
    fn data_parts_replace_by_id() {
        let mut msg = UiMessage::new("m");
        msg.apply(&json!({"type":"data-tasks","id":"tasks","data":{"tasks":[1]}}));
        msg.apply(&json!({"type":"data-status","data":{"message":"x"},"transient":true}));
        msg.apply(&json!({"type":"data-tasks","id":"tasks","data":{"tasks":[1,2]}}));
        assert_eq!(msg.parts, [json!({"type":"data-tasks","id":"tasks","data":{"tasks":[1,2]}})]);
    }
}
