//! AG-UI 1.0 (`@ag-ui/core` 1.0.0, `@ag-ui/client` 1.0.0;
//! `docs/protocols/ag-ui-http-agent.md`): a run's events as AG-UI events, and
//! their fold into the `Message[]` an `HttpAgent` ends up holding.
//!
//! One mapping, [`AguiMapper`], serves the live stream, a re-attach and the
//! history route. Its events are numbered by their position in the run (the
//! SSE `id`), the same live and replayed, so a client that re-attaches with
//! `Last-Event-ID: n` gets exactly the events after the nth. Blocks record
//! each delta's length, so a replayed block becomes exactly the
//! `TEXT_MESSAGE_CONTENT`s that went out live.
//!
//! The client verifies the order strictly: a run starts with `RUN_STARTED`;
//! every text message, reasoning message and span, tool call, step and
//! sub-agent is opened before its content and closed before `RUN_FINISHED`.
//! The mapper closes whatever is open before a run's end, an interrupt, or
//! the thing that ends it (a tool call ends its agent's text).
//!
//! | log event | AG-UI events |
//! | --- | --- |
//! | `run-start` | `RUN_STARTED {threadId, runId, input: {messages: [the user's]}}` |
//! | `step-start` / `step-finish` | `STEP_STARTED` / `STEP_FINISHED {stepName: "step-<n>"}` |
//! | text segment | `TEXT_MESSAGE_START` / `_CONTENT` per delta / `_END` (one message id per segment) |
//! | reasoning segment | `REASONING_START`, `REASONING_MESSAGE_START` / `_CONTENT` / `_END`, `REASONING_END` |
//! | `tool-input-start`, `tool-call` | `TOOL_CALL_START`, `TOOL_CALL_ARGS` (the arguments), `TOOL_CALL_END` |
//! | `tool-result`, `tool-error`, `tool-interrupted` | `TOOL_CALL_RESULT` (the result, or the error as its content) |
//! | `agent-spawned` / `agent-completed` | `SUBAGENT_STARTED` / `SUBAGENT_FINISHED` or `SUBAGENT_ERROR`; a sub-agent's events carry `subagentRunId` |
//! | `tasks-update` | `STATE_SNAPSHOT {snapshot: {tasks}}` |
//! | `status`, `thread-title-updated` | `CUSTOM {name: "status" \| "title", value}` |
//! | `confirmation-request` | once nothing else of the step runs: `RUN_FINISHED {outcome: {type: "interrupt", interrupts}}` |
//! | `confirmation-request` (a client tool) | once nothing else of the step runs: `RUN_FINISHED {outcome: {type: "success", pendingToolCallIds}}` |
//! | `run-finish` | `RUN_FINISHED`; cancelled: `outcome: {type: "cancelled"}`; failed: `RUN_ERROR {message, code}` |

#[cfg(test)]
use super::history::AguiMessages;
use super::frames::{
    AguiEvent as A, CustomName, CustomValue, Frame, Interrupt, InterruptMeta, InterruptReason, Role, RunInput,
    RunOutcome, Snapshot, SubagentOutcome, ToolCallMeta, UserMessage,
};
use crate::log::event::{Event, FinishStatus, Kind, Payload};
use crate::log::segment::{Piece, SentText};

use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The headers of an AG-UI stream.
pub const HEADERS: &[(&str, &str)] =
    &[("content-type", "text/event-stream"), ("cache-control", "no-cache"), ("x-accel-buffering", "no")];

/// The keep-alive: an SSE comment, which the client's parser skips.
pub const PING: &[u8] = b": ping\n\n";

/// A text or reasoning message open for one agent.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Open {
    id: String,
    sent: SentText,
}

/// What is open for one agent (the orchestrator, or a sub-agent).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Lane {
    open: Option<Open>,
    step: Option<String>,
    steps: usize,
    /// Tool calls started and not yet ended.
    calls: Vec<String>,
    /// The text message of the current step (tool calls hang from it).
    parent: Option<String>,
}

/// Maps a run's events to numbered AG-UI events. Its state serialises
/// whole, so a stream that moves between the object and a relay goes on
/// exactly where it was.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct AguiMapper {
    thread_id: String,
    run_id: String,
    root: String,
    lanes: BTreeMap<String, Lane>,
    #[serde(with = "crate::feed::pairs")]
    segments: HashMap<(String, bool, String), usize>,
    /// Every call ever started (a result needs no start of its own).
    started: HashSet<String>,
    /// Sub-agents started and not finished, in order.
    subagents: Vec<String>,
    /// The root step's calls, which have an outcome, which wait for a person.
    step_calls: Vec<String>,
    settled: HashSet<String>,
    interrupts: Vec<(String, Interrupt)>,
    /// Requests a `resume` answered: the run no longer waits on them, even
    /// before its log shows the outcome.
    answered: HashSet<String>,
    /// Calls of client tools waiting for the client, with their requests.
    client_calls: Vec<(String, String)>,
    /// Every client tool call: its result is the client's own, which it
    /// holds (no `TOOL_CALL_RESULT` is sent for it).
    client_tool_calls: HashSet<String>,
    /// The history's view: the message each client tool result came in.
    client_results: HashMap<String, String>,
    /// The history's view: background sub-agents go on after the run's end,
    /// and their work shows (a stream has ended by then).
    history: bool,
    /// Sub-agents still running when the run ended.
    background: HashSet<String>,
    last_error: Option<String>,
    /// Events numbered so far (the last event's id).
    pub count: u64,
    finished: bool,
    /// Where a stored file's URL points: the history's request origin (a
    /// live stream's are paths on the Worker).
    origin: String,
}

impl AguiMapper {
    pub fn new(thread_id: &str, run_id: &str, root_agent: &str) -> AguiMapper {
        AguiMapper {
            thread_id: thread_id.to_owned(),
            run_id: run_id.to_owned(),
            root: root_agent.to_owned(),
            lanes: BTreeMap::new(),
            segments: HashMap::new(),
            started: HashSet::new(),
            subagents: Vec::new(),
            step_calls: Vec::new(),
            settled: HashSet::new(),
            interrupts: Vec::new(),
            answered: HashSet::new(),
            client_calls: Vec::new(),
            client_tool_calls: HashSet::new(),
            client_results: HashMap::new(),
            history: false,
            background: HashSet::new(),
            last_error: None,
            count: 0,
            finished: false,
            origin: String::new(),
        }
    }

    /// Stored files' URLs on `origin` (the history's).
    pub fn with_origin(mut self, origin: &str) -> AguiMapper {
        self.origin = origin.to_owned();
        self
    }

    pub fn finished(&self) -> bool {
        self.finished
    }

    /// For the history: client tool results shown as the messages the
    /// client sent them in (call id → message id).
    pub fn with_client_results(mut self, results: HashMap<String, String>) -> AguiMapper {
        self.client_results = results;
        self.history = true;
        self
    }

    /// A `resume` answered these requests.
    pub fn answered(&mut self, requests: &[String]) {
        self.answered.extend(requests.iter().cloned());
    }

    /// The requests still waiting for a person.
    fn open_interrupts(&self) -> impl Iterator<Item = &Interrupt> {
        self.interrupts.iter().filter(|(id, _)| !self.answered.contains(id)).map(|(_, i)| i)
    }

    /// Client tool calls still waiting for the client.
    fn open_client_calls(&self) -> impl Iterator<Item = &str> {
        self.client_calls.iter().filter(|(r, _)| !self.answered.contains(r)).map(|(_, c)| c.as_str())
    }

    /// The run waits for a person (or the client) and nothing else of its
    /// step runs.
    pub fn waiting(&self) -> bool {
        !self.finished
            && (self.open_interrupts().next().is_some() || self.open_client_calls().next().is_some())
            && self.step_calls.iter().all(|c| self.settled.contains(c) || self.is_waiting(c))
    }

    fn is_waiting(&self, call: &str) -> bool {
        self.open_interrupts().any(|i| i.tool_call_id.as_deref() == Some(call))
            || self.open_client_calls().any(|c| c == call)
    }

    /// A continuation's `RUN_STARTED` (not numbered: it opens a new client
    /// run over the same thread run).
    pub fn run_started(&self) -> Frame {
        A::RunStarted { thread_id: self.thread_id.clone(), run_id: self.run_id.clone(), input: None }.into()
    }

    /// The run's stream ends waiting for a person: everything open closes,
    /// then `RUN_FINISHED` with the interrupts (not numbered).
    pub fn pause(&mut self) -> Vec<Frame> {
        let mut out = Vec::new();
        self.close_all(&mut out);
        let interrupts: Vec<Interrupt> = self.open_interrupts().cloned().collect();
        // Only the client's own tools wait: the run finishes with them open,
        // and the client's tool results continue it.
        let outcome = if interrupts.is_empty() {
            RunOutcome::Success { pending_tool_call_ids: self.open_client_calls().map(str::to_owned).collect() }
        } else {
            RunOutcome::Interrupt { interrupts }
        };
        out.push(self.finished_frame(Some(outcome)));
        out
    }

    fn finished_frame(&self, outcome: Option<RunOutcome>) -> Frame {
        A::RunFinished { thread_id: self.thread_id.clone(), run_id: self.run_id.clone(), outcome }.into()
    }

    /// The numbered events of one log event.
    pub fn map(&mut self, ev: &Event) -> Vec<(u64, Frame)> {
        let mut out = Vec::new();
        if !self.finished || (self.history && self.background.contains(&ev.agent_id)) {
            self.events(ev, &mut out);
        }
        out.into_iter()
            .map(|e| {
                self.count += 1;
                (self.count, e)
            })
            .collect()
    }

    /// `event`, of `agent`'s work: a sub-agent's carries its id.
    fn tag(&self, agent: &str, event: A) -> Frame {
        Frame { event, subagent: (agent != self.root).then(|| agent.to_owned()) }
    }

    fn lane(&mut self, agent: &str) -> &mut Lane {
        self.lanes.entry(agent.to_owned()).or_default()
    }

    fn events(&mut self, ev: &Event, out: &mut Vec<Frame>) {
        let agent = ev.agent_id.as_str();
        // A sub-agent's events count only while it is open (a background
        // one may outlive the run).
        let open = self.subagents.iter().any(|s| s == agent) || self.background.contains(agent);
        if agent != self.root && ev.kind() != Kind::AgentSpawned && !open {
            return;
        }
        match &ev.payload {
            Payload::RunStart(start) => {
                let messages = match &start.message {
                    Some(message) => {
                        let attachments = start.attachments.as_deref().unwrap_or_default();
                        let content = user_content(message, attachments, &self.origin, &self.thread_id);
                        vec![UserMessage { id: start.message_id.clone(), role: Role::User, content }]
                    }
                    None => Vec::new(),
                };
                let (thread_id, run_id) = (self.thread_id.clone(), self.run_id.clone());
                let input = RunInput { thread_id: thread_id.clone(), run_id: run_id.clone(), messages, tools: [], context: [] };
                out.push(A::RunStarted { thread_id, run_id, input: Some(input) }.into());
            }
            Payload::StepStart(_) => {
                self.close_text(agent, out);
                let lane = self.lane(agent);
                let mut events = Vec::new();
                if let Some(step_name) = lane.step.take() {
                    events.push(A::StepFinished { step_name });
                }
                lane.steps += 1;
                let name = format!("step-{}", lane.steps);
                lane.step = Some(name.clone());
                lane.parent = None;
                events.push(A::StepStarted { step_name: name });
                out.extend(events.into_iter().map(|e| self.tag(agent, e)));
                if agent == self.root {
                    self.step_calls.clear();
                }
            }
            Payload::StepFinish(_) => {
                self.close_text(agent, out);
                if let Some(step_name) = self.lane(agent).step.take() {
                    out.push(self.tag(agent, A::StepFinished { step_name }));
                }
            }
            Payload::TextDelta(_) | Payload::ReasoningDelta(_) | Payload::TextBlock(_) | Payload::ReasoningBlock(_) => {
                self.text(ev, out)
            }
            Payload::ToolInputStart(start) => {
                self.close_text(agent, out);
                self.start_call(agent, &start.tool_call_id, &start.tool_name, start.server.as_deref(), out);
            }
            Payload::ToolCall(call) => {
                self.close_text(agent, out);
                let id = &call.tool_call_id;
                self.start_call(agent, id, &call.tool_name, call.server.as_deref(), out);
                let delta = call.args.to_string();
                out.push(self.tag(agent, A::ToolCallArgs { tool_call_id: id.clone(), delta }));
                self.end_call(agent, id, out);
            }
            Payload::ToolResult(r) => {
                let content = match &r.result {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let client_content = if r.result.is_null() { String::new() } else { content.clone() };
                self.tool_end(agent, &r.tool_call_id, client_content, content, out);
            }
            Payload::ToolError(e) | Payload::ToolInterrupted(e) => {
                self.tool_end(agent, &e.tool_call_id, e.error.clone(), format!("Error: {}", e.error), out);
            }
            Payload::ConfirmationRequest(req) => {
                self.close_text(agent, out);
                let call = req.tool_call_id.clone();
                let input_type = req.input_type.as_ref().map_or("approval", |t| t.as_str());
                if input_type == crate::storage::store::CLIENT_TOOL {
                    if agent == self.root && !call.is_empty() && !self.step_calls.contains(&call) {
                        self.step_calls.push(call.clone());
                    }
                    self.client_tool_calls.insert(call.clone());
                    self.client_calls.push((req.request_id.clone(), call));
                    return;
                }
                let interrupt = Interrupt {
                    id: req.request_id.clone(),
                    reason: if input_type == "approval" {
                        InterruptReason::ToolApproval
                    } else {
                        InterruptReason::InputRequired
                    },
                    message: req.message.clone(),
                    response_schema: response_schema(input_type, req.questions.as_deref()),
                    metadata: InterruptMeta {
                        input_type: input_type.to_owned(),
                        tool_name: req.tool_name.clone(),
                        args: req.args.clone(),
                    },
                    tool_call_id: (!call.is_empty()).then(|| call.clone()),
                };
                if !call.is_empty() && agent == self.root && !self.step_calls.contains(&call) {
                    self.step_calls.push(call);
                }
                self.interrupts.push((req.request_id.clone(), interrupt));
            }
            Payload::AgentSpawned(spawned) => {
                if self.subagents.iter().any(|s| s == agent) {
                    return;
                }
                let parent = spawned.parent_id.as_str();
                self.close_text(parent, out);
                let nested = parent != self.root && self.subagents.iter().any(|s| s == parent);
                out.push(
                    A::SubagentStarted {
                        subagent_run_id: agent.to_owned(),
                        name: spawned.role.clone(),
                        description: spawned.goal.clone().filter(|g| !g.is_empty()),
                        parent_subagent_run_id: nested.then(|| parent.to_owned()),
                    }
                    .into(),
                );
                self.subagents.push(agent.to_owned());
            }
            Payload::AgentCompleted(done) => {
                self.close_lane(agent, out);
                self.subagents.retain(|s| s != agent);
                self.background.remove(agent);
                let subagent_run_id = agent.to_owned();
                out.push(match &done.error {
                    Some(error) => A::SubagentError { subagent_run_id, message: error.clone() }.into(),
                    None => A::SubagentFinished {
                        subagent_run_id,
                        outcome: SubagentOutcome::Success,
                        result: (!done.result.is_null()).then(|| done.result.clone()),
                    }
                    .into(),
                });
            }
            Payload::TasksUpdate(tasks) => {
                out.push(A::StateSnapshot { snapshot: Snapshot { tasks: tasks.list_json() } }.into());
            }
            Payload::Status(status) => {
                if agent == self.root {
                    let value = CustomValue::Status { message: status.message.clone() };
                    out.push(A::Custom { name: CustomName::Status, value }.into());
                }
            }
            Payload::ThreadTitleUpdated(title) => {
                let value = CustomValue::Title { title: title.title.clone() };
                out.push(A::Custom { name: CustomName::Title, value }.into());
            }
            Payload::Error(error) => {
                if !error.content.is_empty() {
                    self.last_error = Some(error.content.clone());
                }
            }
            Payload::RunFinish(fin) => {
                self.finished = true;
                if matches!(fin.status, FinishStatus::Completed | FinishStatus::Cancelled) {
                    self.close_all(out);
                }
                match fin.status {
                    FinishStatus::Completed => out.push(self.finished_frame(None)),
                    FinishStatus::Cancelled => out.push(self.finished_frame(Some(RunOutcome::Cancelled))),
                    FinishStatus::Error | FinishStatus::Interrupted => {
                        let status = fin.status.as_str();
                        let reason = fin.reason.clone().unwrap_or_default();
                        let message = match (self.last_error.take(), reason.is_empty()) {
                            (Some(e), _) => e,
                            (None, false) => reason,
                            (None, true) => format!("the run ended: {status}"),
                        };
                        out.push(A::RunError { message, code: status.to_owned() }.into());
                    }
                }
            }
            // Not part of an AG-UI run: a confirmation's settlement shows as
            // its call's result, a queue as its own runs, a filesystem
            // request is the n8n gateway's.
            Payload::ConfirmationSettled(_) | Payload::QueueUpdated(_) | Payload::FilesystemRequest(_) => {}
            // A switch of branch is no run's: an AG-UI client sends the
            // messages it shows, and `connect` reads the active path. A
            // compaction is the model's context, marked on the history's
            // messages (`contextCompacted`); AG-UI has no event for it.
            Payload::BranchSwitched(_) | Payload::ContextCompacted(_) | Payload::ContextCompactionFailed(_) => {}
        }
    }

    /// A call's end (`tool-result`, `tool-error`, `tool-interrupted`): its
    /// `TOOL_CALL_END`, then its result. A client tool's result is the
    /// client's own (`client_content`, shown only by the history under the
    /// client's message id); any other's is `content`.
    fn tool_end(&mut self, agent: &str, call: &str, client_content: String, content: String, out: &mut Vec<Frame>) {
        self.close_text(agent, out);
        self.end_call(agent, call, out);
        if agent == self.root {
            self.settled.insert(call.to_owned());
            self.interrupts.retain(|(_, i)| i.tool_call_id.as_deref() != Some(call));
            self.client_calls.retain(|(_, c)| c != call);
        }
        if self.client_tool_calls.contains(call) {
            // The client ran it and holds its result: only the
            // history shows it, under the client's message id.
            let Some(message_id) = self.client_results.get(call).cloned() else { return };
            let (tool_call_id, content) = (call.to_owned(), client_content);
            out.push(A::ToolCallResult { message_id, tool_call_id, content, role: Role::Tool }.into());
            return;
        }
        let message_id = format!("{call}.result");
        let result = A::ToolCallResult { message_id, tool_call_id: call.to_owned(), content, role: Role::Tool };
        out.push(self.tag(agent, result));
    }

    /// A call's `TOOL_CALL_START` (an MCP tool's names its server in
    /// `metadata.mcpServer`).
    fn start_call(&mut self, agent: &str, call: &str, name: &str, server: Option<&str>, out: &mut Vec<Frame>) {
        if !self.started.insert(call.to_owned()) {
            return;
        }
        if agent == self.root && !self.step_calls.iter().any(|c| c == call) {
            self.step_calls.push(call.to_owned());
        }
        let lane = self.lane(agent);
        lane.calls.push(call.to_owned());
        let parent = lane.parent.clone();
        let e = A::ToolCallStart {
            tool_call_id: call.to_owned(),
            tool_call_name: name.to_owned(),
            parent_message_id: parent,
            metadata: server.map(|s| ToolCallMeta { mcp_server: s.to_owned() }),
        };
        out.push(self.tag(agent, e));
    }

    fn end_call(&mut self, agent: &str, call: &str, out: &mut Vec<Frame>) {
        let lane = self.lane(agent);
        if let Some(i) = lane.calls.iter().position(|c| c == call) {
            lane.calls.remove(i);
            out.push(self.tag(agent, A::ToolCallEnd { tool_call_id: call.to_owned() }));
        }
    }

    fn close_text(&mut self, agent: &str, out: &mut Vec<Frame>) {
        let Some(open) = self.lane(agent).open.take() else { return };
        if open.sent.reasoning {
            out.push(self.tag(agent, A::ReasoningMessageEnd { message_id: open.id.clone() }));
            out.push(self.tag(agent, A::ReasoningEnd { message_id: open.id }));
        } else {
            out.push(self.tag(agent, A::TextMessageEnd { message_id: open.id }));
        }
    }

    /// Closes what one agent has open: text, calls, its step.
    fn close_lane(&mut self, agent: &str, out: &mut Vec<Frame>) {
        self.close_text(agent, out);
        let calls = std::mem::take(&mut self.lane(agent).calls);
        for tool_call_id in calls {
            out.push(self.tag(agent, A::ToolCallEnd { tool_call_id }));
        }
        if let Some(step_name) = self.lane(agent).step.take() {
            out.push(self.tag(agent, A::StepFinished { step_name }));
        }
    }

    /// Closes everything: every sub-agent still open finishes (a background
    /// one goes on after the run: `suspended`), then the root's lane.
    fn close_all(&mut self, out: &mut Vec<Frame>) {
        for agent in std::mem::take(&mut self.subagents).into_iter().rev() {
            self.close_lane(&agent, out);
            let subagent_run_id = agent.clone();
            out.push(A::SubagentFinished { subagent_run_id, outcome: SubagentOutcome::Suspended, result: None }.into());
            if self.history {
                self.background.insert(agent);
            }
        }
        let root = self.root.clone();
        self.close_lane(&root, out);
    }

    fn text(&mut self, ev: &Event, out: &mut Vec<Frame>) {
        let Some(piece) = Piece::of(ev) else { return };
        let agent = ev.agent_id.clone();
        let reasoning = piece.reasoning;
        if !self.lane(&agent).open.as_ref().is_some_and(|o| o.sent.continues(&piece, &ev.response_id)) {
            self.close_text(&agent, out);
            let key = (agent.clone(), reasoning, ev.response_id.clone().unwrap_or_default());
            let n = self.segments.entry(key.clone()).or_insert(0);
            let id = format!("{}.{}.{}.{}", self.run_id, if reasoning { "r" } else { "t" }, key.2, n);
            *n += 1;
            if reasoning {
                out.push(self.tag(&agent, A::ReasoningStart { message_id: id.clone() }));
                let start = A::ReasoningMessageStart { message_id: id.clone(), role: Role::Reasoning };
                out.push(self.tag(&agent, start));
            } else {
                let start = A::TextMessageStart { message_id: id.clone(), role: Role::Assistant };
                out.push(self.tag(&agent, start));
                self.lane(&agent).parent = Some(id.clone());
            }
            self.lane(&agent).open = Some(Open { id, sent: SentText::new(reasoning, ev.response_id.clone()) });
        }
        let open = self.lanes.get_mut(&agent).and_then(|l| l.open.as_mut()).expect("opened above");
        let (id, deltas) = (open.id.clone(), open.sent.advance(&piece));
        for delta in deltas {
            let message_id = id.clone();
            let content = if reasoning {
                A::ReasoningMessageContent { message_id, delta }
            } else {
                A::TextMessageContent { message_id, delta }
            };
            out.push(self.tag(&agent, content));
        }
    }
}

/// What an answer to a request looks like (`resume[].payload`).
fn response_schema(input_type: &str, questions: Option<&[crate::log::event::payload::Question]>) -> Value {
    match input_type {
        "approval" => json!({
            "type": "object",
            "properties": { "approved": { "type": "boolean" }, "reason": { "type": "string" } },
            "required": ["approved"],
        }),
        _ => {
            let mut s = json!({
                "type": "object",
                "properties": { "answers": { "type": "array", "items": { "type": "object", "properties": {
                    "questionId": { "type": "string" },
                    "selectedOptions": { "type": "array", "items": { "type": "string" } },
                    "customText": { "type": "string" },
                    "skipped": { "type": "boolean" },
                }, "required": ["questionId"] } } },
            });
            if let (Some(q), Some(schema)) = (questions, s.as_object_mut()) {
                schema.insert("x-questions".into(), json!(q));
            }
            s
        }
    }
}

/// A user message's `content`: its text, or, with attachments (the
/// `run-start`'s), its text part and a media part for each (AG-UI 1.0:
/// `image` for images, `document` otherwise, by URL).
pub fn user_content(text: &str, list: &[crate::files::Attachment], origin: &str, thread: &str) -> Value {
    if list.is_empty() {
        return Value::String(text.to_owned());
    }
    let mut parts = Vec::new();
    if !text.is_empty() {
        parts.push(Part::Text { text: text.to_owned() });
    }
    for a in list {
        let source = Source { kind: "url", value: a.url(origin, thread), mime_type: a.media_type().to_owned() };
        let (file_id, size) = match a {
            crate::files::Attachment::File(f) => (Some(f.file_id.clone()), Some(f.size)),
            _ => (None, None),
        };
        let metadata = PartMeta { file_id, size, filename: a.name().map(str::to_owned) };
        parts.push(if crate::files::media::inline(a.media_type()) {
            Part::Image { source, metadata }
        } else {
            Part::Document { source, metadata }
        });
    }
    serde_json::to_value(parts).expect("message parts serialise")
}

/// A part of a user message's content.
#[derive(serde::Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Part {
    Text { text: String },
    Image { source: Source, metadata: PartMeta },
    Document { source: Source, metadata: PartMeta },
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Source {
    #[serde(rename = "type")]
    kind: &'static str,
    value: String,
    mime_type: String,
}

/// A stored file's id and size, and the name it was sent with.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct PartMeta {
    #[serde(skip_serializing_if = "Option::is_none")]
    file_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    filename: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: Kind, agent: &str, rid: Option<&str>, payload: Value) -> Event {
        let mut e = Event::from_json(kind, "t.r", agent, 0, payload).unwrap();
        e.response_id = rid.map(str::to_owned);
        e
    }

    fn value(frame: &Frame) -> Value {
        serde_json::to_value(frame).unwrap()
    }

    fn types(events: &[(u64, Frame)]) -> Vec<String> {
        events.iter().map(|(_, e)| value(e)["type"].as_str().unwrap().to_owned()).collect()
    }

    #[test]
    fn live_and_replayed_runs_are_the_same_numbered_events() {
        let live = [
            ev(Kind::RunStart, "o", None, json!({"messageId":"m1","message":"hi"})),
            ev(Kind::StepStart, "o", None, json!({})),
            ev(Kind::ReasoningDelta, "o", Some("s"), json!({"text":"Hm"})),
            ev(Kind::ReasoningBlock, "o", Some("s"), json!({"text":"Hm","parts":[2]})),
            ev(Kind::TextDelta, "o", Some("s"), json!({"text":"He"})),
            ev(Kind::TextDelta, "o", Some("s"), json!({"text":"llo"})),
            ev(Kind::TextBlock, "o", Some("s"), json!({"text":"Hello","parts":[2,3]})),
            ev(Kind::ToolInputStart, "o", None, json!({"toolCallId":"c","toolName":"n"})),
            ev(Kind::StepFinish, "o", None, json!({})),
            ev(Kind::ToolCall, "o", None, json!({"toolCallId":"c","toolName":"n","args":{"a":1}})),
            ev(Kind::ToolResult, "o", None, json!({"toolCallId":"c","result":{"ok":true}})),
            ev(Kind::RunFinish, "o", None, json!({"status":"completed"})),
        ];
        let replay: Vec<Event> =
            live.iter().filter(|e| !matches!(e.kind(), Kind::TextDelta | Kind::ReasoningDelta)).cloned().collect();
        let a: Vec<_> = {
            let mut m = AguiMapper::new("t", "t.r", "o");
            live.iter().flat_map(|e| m.map(e)).collect()
        };
        let b: Vec<_> = {
            let mut m = AguiMapper::new("t", "t.r", "o");
            replay.iter().flat_map(|e| m.map(e)).collect()
        };
        assert_eq!(a, b);
        assert_eq!(
            types(&a),
            [
                "RUN_STARTED",
                "STEP_STARTED",
                "REASONING_START",
                "REASONING_MESSAGE_START",
                "REASONING_MESSAGE_CONTENT",
                "REASONING_MESSAGE_END",
                "REASONING_END",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "TOOL_CALL_START",
                "STEP_FINISHED",
                "TOOL_CALL_ARGS",
                "TOOL_CALL_END",
                "TOOL_CALL_RESULT",
                "RUN_FINISHED"
            ]
        );
        assert_eq!(a.iter().map(|(i, _)| *i).collect::<Vec<_>>(), (1..=17).collect::<Vec<u64>>());
        let mut fold = AguiMessages::default();
        a.iter().for_each(|(_, e)| fold.apply(e));
        assert_eq!(
            serde_json::to_string(&fold.messages).unwrap(),
            json!([
                {"id":"m1","role":"user","content":"hi"},
                {"id":"t.r.r.s.0","role":"reasoning","content":"Hm"},
                {"id":"t.r.t.s.0","role":"assistant","content":"Hello","toolCalls":[
                    {"id":"c","type":"function","function":{"name":"n","arguments":"{\"a\":1}"}}
                ]},
                {"id":"c.result","toolCallId":"c","role":"tool","content":"{\"ok\":true}"}
            ])
            .to_string()
        );
    }

    #[test]
    fn an_approval_interrupts_once_the_step_is_settled_and_everything_is_closed() {
        let mut m = AguiMapper::new("t", "t.r", "o");
        for e in [
            ev(Kind::RunStart, "o", None, json!({"messageId":"m1"})),
            ev(Kind::StepStart, "o", None, json!({})),
            ev(Kind::ToolInputStart, "o", None, json!({"toolCallId":"a","toolName":"del"})),
            ev(Kind::StepFinish, "o", None, json!({})),
            ev(Kind::ToolCall, "o", None, json!({"toolCallId":"a","toolName":"del","args":{}})),
            ev(
                Kind::ConfirmationRequest,
                "o",
                None,
                json!({"requestId":"q","toolCallId":"a","toolName":"del","severity":"warning","inputType":"approval","message":"ok?"}),
            ),
        ] {
            m.map(&e);
        }
        assert!(m.waiting());
        let end = m.pause();
        let last = value(end.last().unwrap());
        assert_eq!(last["outcome"]["interrupts"][0]["id"], "q");
        assert_eq!(last["outcome"]["interrupts"][0]["reason"], "tool_approval");
        let failed = m.map(&ev(Kind::RunFinish, "o", None, json!({"status":"error","reason":"boom"})));
        assert_eq!(types(&failed), ["RUN_ERROR"]);
    }

    #[test]
    fn sub_agents_are_attributed_and_closed() {
        let mut m = AguiMapper::new("t", "t.r", "o");
        let out: Vec<_> = [
            ev(Kind::RunStart, "o", None, json!({"messageId":"m1"})),
            ev(Kind::AgentSpawned, "sub", None, json!({"parentId":"o","role":"researcher"})),
            ev(Kind::StepStart, "sub", None, json!({})),
            ev(Kind::TextDelta, "sub", Some("x"), json!({"text":"hi"})),
            ev(Kind::RunFinish, "o", None, json!({"status":"completed"})),
        ]
        .iter()
        .flat_map(|e| m.map(e))
        .collect();
        assert_eq!(
            types(&out),
            [
                "RUN_STARTED",
                "SUBAGENT_STARTED",
                "STEP_STARTED",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "STEP_FINISHED",
                "SUBAGENT_FINISHED",
                "RUN_FINISHED"
            ]
        );
        assert!(out[2..7].iter().all(|(_, e)| e.subagent.as_deref() == Some("sub")));
        // A stream ignores what a background sub-agent does after the run's
        // end; the history shows it.
        let later = ev(Kind::TextDelta, "sub", Some("y"), json!({"text":" more"}));
        assert!(m.map(&later).is_empty());
        let mut h = AguiMapper::new("t", "t.r", "o").with_client_results(HashMap::new());
        let events = [
            ev(Kind::RunStart, "o", None, json!({"messageId":"m1"})),
            ev(Kind::AgentSpawned, "sub", None, json!({"parentId":"o","role":"researcher"})),
            ev(Kind::RunFinish, "o", None, json!({"status":"completed"})),
            later,
            ev(Kind::AgentCompleted, "sub", None, json!({"role":"researcher","result":"done"})),
        ];
        let mut fold = AguiMessages::default();
        events.iter().flat_map(|e| h.map(e)).for_each(|(_, e)| fold.apply(&e));
        assert_eq!(
            serde_json::to_string(&fold.messages).unwrap(),
            json!([{"id":"t.r.t.y.0","role":"assistant","content":" more","subagentRunId":"sub"}]).to_string()
        );
    }
}
