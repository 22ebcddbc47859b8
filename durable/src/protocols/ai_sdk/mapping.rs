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

use super::chunks::{
    AgentData, AgentStatus, Chunk, FinishReason, Mcp, Metadata, StatusData, TasksData, TitleData, ToolMetadata, Usage,
};
use crate::log::event::payload::ConfirmationRequest;
use crate::log::event::{Event, FinishStatus, Payload};
use crate::log::segment::{Piece, SentText};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
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

/// A `finish`. It carries (empty) metadata so that the client writes its
/// message out: a `start-step` is shown only at the client's next write,
/// and `finish` without metadata is none, so the history and the client
/// agree on a run that ended right after a step began.
fn finish(reason: FinishReason) -> Chunk {
    Chunk::Finish { finish_reason: reason, message_metadata: Metadata::default() }
}

/// The text or reasoning part open on the stream.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Open {
    /// The chunk id the part was started with.
    id: String,
    sent: SentText,
}

/// Maps a run's events to UI message chunks; the same events always give
/// the same chunks. Its state serialises whole, so a stream that moves
/// between the object and a relay goes on exactly where it was.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UiMapper {
    root: String,
    open: Option<Open>,
    /// Segments started per (kind, response id): part ids are unique.
    #[serde(with = "crate::feed::pairs")]
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
    agents: HashMap<String, AgentData>,
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
    pub fn start(message_id: &str) -> Chunk {
        Chunk::Start { message_id: message_id.to_owned() }
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
    pub fn pause(&mut self) -> Vec<Chunk> {
        let mut out = Vec::new();
        self.close(&mut out);
        out.push(finish(FinishReason::ToolCalls));
        out
    }

    /// The chunks of one event.
    pub fn map(&mut self, ev: &Event) -> Vec<Chunk> {
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
                let data = AgentData {
                    agent_id: ev.agent_id.clone(),
                    parent_id: Some(spawned.parent_id.clone()),
                    role: spawned.role.clone(),
                    status: AgentStatus::Running,
                    title: spawned.title.clone(),
                    goal: spawned.goal.clone(),
                    kind: spawned.kind.clone(),
                    error: None,
                    result: None,
                };
                self.agents.insert(ev.agent_id.clone(), data.clone());
                out.push(Chunk::DataAgent { id: ev.agent_id.clone(), data });
            }
            Payload::AgentCompleted(done) => {
                let mut data = self.agents.get(&ev.agent_id).cloned().unwrap_or_else(|| AgentData {
                    agent_id: ev.agent_id.clone(),
                    parent_id: None,
                    role: done.role.clone(),
                    status: AgentStatus::Running,
                    title: None,
                    goal: None,
                    kind: None,
                    error: None,
                    result: None,
                });
                data.status = if done.error.is_some() { AgentStatus::Failed } else { AgentStatus::Completed };
                if let Some(error) = &done.error {
                    data.error = Some(error.clone());
                } else if !done.result.is_null() {
                    data.result = Some(done.result.clone());
                }
                self.agents.insert(ev.agent_id.clone(), data.clone());
                out.push(Chunk::DataAgent { id: ev.agent_id.clone(), data });
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
                    out.push(Chunk::StartStep);
                }
            }
            Payload::StepFinish(step) => {
                if root {
                    self.close(&mut out);
                    out.push(Chunk::FinishStep);
                    if let Some((input_tokens, output_tokens)) = step.token_counts() {
                        let usage = Some(Usage { input_tokens, output_tokens });
                        out.push(Chunk::MessageMetadata { message_metadata: Metadata { usage } });
                    }
                }
            }
            Payload::ToolInputStart(start) => {
                if root {
                    self.close(&mut out);
                    let id = &start.tool_call_id;
                    self.step_call(id);
                    if self.calls.insert(id.clone()) {
                        out.push(Chunk::ToolInputStart {
                            tool_call_id: id.clone(),
                            tool_name: start.tool_name.clone(),
                            dynamic: true,
                            mcp: mcp(start.server.as_deref(), None),
                        });
                    }
                }
            }
            Payload::ToolCall(call) => {
                if root {
                    self.close(&mut out);
                    let id = &call.tool_call_id;
                    self.step_call(id);
                    self.calls.insert(id.clone());
                    out.push(Chunk::ToolInputAvailable {
                        tool_call_id: id.clone(),
                        tool_name: call.tool_name.clone(),
                        input: call.args.clone(),
                        dynamic: true,
                        mcp: mcp(call.server.as_deref(), call.title.as_deref()),
                    });
                }
            }
            Payload::ToolResult(r) => {
                if root {
                    let id = &r.tool_call_id;
                    self.outcome(id, &mut out);
                    out.push(Chunk::ToolOutputAvailable {
                        tool_call_id: id.clone(),
                        output: r.result.clone(),
                        dynamic: true,
                    });
                }
            }
            Payload::ToolError(e) | Payload::ToolInterrupted(e) => {
                if root {
                    let id = &e.tool_call_id;
                    self.outcome(id, &mut out);
                    // A continuation starts after the request: its call is the
                    // client's, asked for approval.
                    if (self.approvals.contains(id) || self.continuing) && e.error.starts_with(DENIED) {
                        out.push(Chunk::ToolOutputDenied { tool_call_id: id.clone() });
                    } else {
                        let error = if e.error.is_empty() { "the tool call did not complete" } else { &e.error };
                        out.push(Chunk::ToolOutputError {
                            tool_call_id: id.clone(),
                            error_text: error.to_owned(),
                            dynamic: true,
                        });
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
                    out.push(Chunk::DataTasks { id: "tasks", data: TasksData { tasks: tasks.list_json() } });
                }
            }
            Payload::ThreadTitleUpdated(title) => {
                if root {
                    out.push(Chunk::DataTitle { id: "title", data: TitleData { title: title.title.clone() } });
                }
            }
            Payload::Status(status) => {
                if root {
                    let data = StatusData { message: status.message.clone() };
                    out.push(Chunk::DataStatus { data, transient: true });
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
                    FinishStatus::Completed => out.push(finish(FinishReason::Stop)),
                    FinishStatus::Cancelled => {
                        let reason = if reason.is_empty() { "cancelled".to_owned() } else { reason };
                        out.push(Chunk::Abort { reason });
                        out.push(finish(FinishReason::Other));
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
                        out.push(Chunk::MessageMetadata { message_metadata: Metadata::default() });
                        out.push(Chunk::Error { error_text: error });
                        out.push(finish(FinishReason::Error));
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
            // A switch of branch is no run's: the AI SDK's client holds its
            // own messages, and a reload reads the active path.
            Payload::BranchSwitched(_) => {}
            // The model's context, marked quietly on the answer; a failed
            // compaction changed nothing the person sees.
            Payload::ContextCompacted(c) => {
                if root {
                    out.push(Chunk::DataContextCompacted { id: c.through.clone(), data: Box::new(c.clone()) });
                }
            }
            Payload::ContextCompactionFailed(_) => {}
        }
        out
    }

    /// A request for a person: an approval is the call's
    /// `tool-approval-request`; a client tool waits for the client's
    /// output; any other request is a `data-confirmation` part.
    fn confirmation(&mut self, req: &ConfirmationRequest, out: &mut Vec<Chunk>) {
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
                out.push(Chunk::ToolInputAvailable {
                    tool_call_id: call.clone(),
                    tool_name: req.tool_name.clone(),
                    input: req.args.clone(),
                    dynamic: true,
                    mcp: None,
                });
            }
            self.approvals.insert(call.clone());
            out.push(Chunk::ToolApprovalRequest { approval_id: req.request_id.clone(), tool_call_id: call.clone() });
        } else {
            out.push(Chunk::DataConfirmation { id: req.request_id.clone(), data: Box::new(req.clone()) });
        }
    }

    fn step_call(&mut self, id: &str) {
        if !self.step_calls.iter().any(|c| c == id) {
            self.step_calls.push(id.to_owned());
        }
    }

    /// A call's outcome: the client must hold its part first.
    fn outcome(&mut self, id: &str, out: &mut Vec<Chunk>) {
        self.close(out);
        self.settled.insert(id.to_owned());
        self.waiting.remove(id);
        if !self.calls.contains(id) && !self.continuing {
            self.calls.insert(id.to_owned());
            out.push(Chunk::ToolInputStart {
                tool_call_id: id.to_owned(),
                tool_name: "unknown".into(),
                dynamic: true,
                mcp: None,
            });
        }
    }

    /// Ends the open text or reasoning part.
    fn close(&mut self, out: &mut Vec<Chunk>) {
        if let Some(open) = self.open.take() {
            let id = open.id;
            out.push(if open.sent.reasoning { Chunk::ReasoningEnd { id } } else { Chunk::TextEnd { id } });
        }
    }

    fn text(&mut self, ev: &Event, out: &mut Vec<Chunk>) {
        let Some(piece) = Piece::of(ev) else { return };
        let reasoning = piece.reasoning;
        if !self.open.as_ref().is_some_and(|o| o.sent.continues(&piece, &ev.response_id)) {
            self.close(out);
            let key = (reasoning, ev.response_id.clone().unwrap_or_default());
            let n = self.segments.entry(key.clone()).or_insert(0);
            let id = format!("{}-{}-{}", if reasoning { "r" } else { "t" }, key.1, n);
            *n += 1;
            let start_id = id.clone();
            out.push(if reasoning { Chunk::ReasoningStart { id: start_id } } else { Chunk::TextStart { id: start_id } });
            self.open = Some(Open { id, sent: SentText::new(reasoning, ev.response_id.clone()) });
        }
        let open = self.open.as_mut().expect("opened above");
        for delta in open.sent.advance(&piece) {
            let id = open.id.clone();
            out.push(if reasoning { Chunk::ReasoningDelta { id, delta } } else { Chunk::TextDelta { id, delta } });
        }
    }
}

/// The message a client holds after reading `chunks` (the AI SDK's
/// `processUIMessageStream`, for the chunks [`UiMapper`] sends), as JSON
/// without the fields the client leaves undefined.
#[derive(Debug, Default, Clone)]
pub struct UiMessage {
    pub id: String,
    pub parts: Vec<Part>,
    pub metadata: Option<Value>,
    active: HashMap<String, usize>,
}

/// One part of a message (the AI SDK's `UIMessagePart`), in the order of
/// fields its client gives it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case", rename_all_fields = "camelCase")]
pub enum Part {
    StepStart,
    Text {
        text: String,
        /// A user's text part has none.
        #[serde(skip_serializing_if = "Option::is_none")]
        state: Option<PartState>,
    },
    /// Reasoning parts keep their chunk id; text parts do not.
    Reasoning { id: String, text: String, state: PartState },
    DynamicTool(ToolPart),
    File {
        media_type: String,
        url: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        filename: Option<String>,
    },
    /// A `data-*` part, as its chunk said it: replaced by a later one of the
    /// same kind and id.
    #[serde(untagged)]
    Data(DataPart),
}

/// A text or reasoning part's lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PartState {
    Streaming,
    Done,
}

/// A tool call's part: its input, the approval the client was asked for,
/// and its outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolPart {
    pub tool_call_id: String,
    pub tool_name: String,
    pub state: ToolState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<ToolApproval>,
    /// What the tool gave (`null` included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_text: Option<String>,
}

/// Where a tool part stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolState {
    InputStreaming,
    InputAvailable,
    ApprovalRequested,
    OutputAvailable,
    OutputError,
    OutputDenied,
}

/// The approval a client was asked for, and, once it answered, its answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolApproval {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A `data-*` part: its kind and id (what a later one replaces it by), and
/// the chunk as sent.
#[derive(Clone, Debug, PartialEq)]
pub struct DataPart {
    kind: &'static str,
    id: Option<String>,
    chunk: Value,
}

impl Serialize for DataPart {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.chunk.serialize(serializer)
    }
}

/// How a tool call ended ([`UiMessage::tool_output`]).
enum Outcome {
    Output(Value),
    Error(String),
    Denied,
}

impl UiMessage {
    pub fn new(id: &str) -> UiMessage {
        UiMessage { id: id.to_owned(), ..UiMessage::default() }
    }

    /// Applies one chunk.
    pub fn apply(&mut self, chunk: &Chunk) {
        match chunk {
            Chunk::Start { message_id } => self.id = message_id.clone(),
            Chunk::StartStep => self.parts.push(Part::StepStart),
            Chunk::FinishStep => self.active.clear(),
            Chunk::TextStart { id } => {
                self.active.insert(id.clone(), self.parts.len());
                self.parts.push(Part::Text { text: String::new(), state: Some(PartState::Streaming) });
            }
            Chunk::ReasoningStart { id } => {
                self.active.insert(id.clone(), self.parts.len());
                self.parts.push(Part::Reasoning { id: id.clone(), text: String::new(), state: PartState::Streaming });
            }
            Chunk::TextDelta { id, delta } | Chunk::ReasoningDelta { id, delta } => {
                if let Some(Part::Text { text, .. } | Part::Reasoning { text, .. }) =
                    self.active.get(id).map(|&i| &mut self.parts[i])
                {
                    text.push_str(delta);
                }
            }
            Chunk::TextEnd { id } | Chunk::ReasoningEnd { id } => match self.active.remove(id).map(|i| &mut self.parts[i]) {
                Some(Part::Text { state, .. }) => *state = Some(PartState::Done),
                Some(Part::Reasoning { state, .. }) => *state = PartState::Done,
                _ => {}
            },
            Chunk::ToolInputStart { tool_call_id: call, tool_name, .. } => {
                self.tool_input(call, tool_name, ToolState::InputStreaming, None)
            }
            Chunk::ToolInputAvailable { tool_call_id: call, tool_name, input, .. } => {
                self.tool_input(call, tool_name, ToolState::InputAvailable, Some(input))
            }
            Chunk::ToolApprovalRequest { approval_id, tool_call_id: call } => {
                if let Some(part) = self.tool(call) {
                    part.state = ToolState::ApprovalRequested;
                    part.approval = Some(ToolApproval { id: approval_id.clone(), approved: None, reason: None });
                }
            }
            Chunk::ToolOutputAvailable { tool_call_id: call, output, .. } => {
                self.tool_output(call, Outcome::Output(output.clone()))
            }
            Chunk::ToolOutputError { tool_call_id: call, error_text, .. } => {
                self.tool_output(call, Outcome::Error(error_text.clone()))
            }
            Chunk::ToolOutputDenied { tool_call_id: call } => self.tool_output(call, Outcome::Denied),
            Chunk::MessageMetadata { message_metadata: m } | Chunk::Finish { message_metadata: m, .. } => {
                let m = serde_json::to_value(m).expect("metadata serialises");
                let mut merged = self.metadata.take().unwrap_or_else(|| Value::Object(Map::new()));
                merge(&mut merged, &m);
                self.metadata = Some(merged);
            }
            Chunk::DataAgent { .. }
            | Chunk::DataTasks { .. }
            | Chunk::DataTitle { .. }
            | Chunk::DataStatus { .. }
            | Chunk::DataConfirmation { .. }
            | Chunk::DataQueued { .. }
            | Chunk::DataContextCompacted { .. } => {
                let Some((kind, id, transient)) = chunk.data_part() else { return };
                if transient {
                    return;
                }
                let part = DataPart {
                    kind,
                    id: id.map(str::to_owned),
                    chunk: serde_json::to_value(chunk).expect("a chunk serialises"),
                };
                let same = |p: &Part| matches!(p, Part::Data(d) if d.kind == kind && d.id.is_some() && d.id == part.id);
                match self.parts.iter_mut().find(|p| same(p)) {
                    Some(existing) => *existing = Part::Data(part),
                    None => self.parts.push(Part::Data(part)),
                }
            }
            // What the client's message does not keep.
            Chunk::Abort { .. } | Chunk::Error { .. } => {}
        }
    }

    /// A tool call's input, streaming or whole: its part (this step's, or a
    /// new one) takes the tool's name, the state and the input, and loses
    /// any outcome.
    fn tool_input(&mut self, call: &str, tool_name: &str, state: ToolState, input: Option<&Value>) {
        let at = match self.step_tool(call) {
            Some(i) => i,
            None => {
                self.parts.push(Part::DynamicTool(ToolPart {
                    tool_call_id: call.to_owned(),
                    tool_name: String::new(),
                    state,
                    input: None,
                    approval: None,
                    output: None,
                    error_text: None,
                }));
                self.parts.len() - 1
            }
        };
        let Part::DynamicTool(part) = &mut self.parts[at] else { unreachable!("step_tool finds tool parts") };
        part.tool_name = tool_name.to_owned();
        part.state = state;
        part.output = None;
        part.error_text = None;
        part.input = input.cloned();
    }

    /// A tool call's outcome: its part's state (`output-available`,
    /// `output-error`, `output-denied`) and what it carries; an approval the
    /// client asked for records whether it was given (unless it lapsed).
    fn tool_output(&mut self, call: &str, outcome: Outcome) {
        let Some(part) = self.tool(call) else { return };
        let expired = matches!(&outcome, Outcome::Error(e) if e.starts_with(EXPIRED));
        let denied = matches!(outcome, Outcome::Denied);
        (part.state, part.output, part.error_text) = match outcome {
            Outcome::Output(output) => (ToolState::OutputAvailable, Some(output), None),
            Outcome::Error(error) => (ToolState::OutputError, None, Some(error)),
            Outcome::Denied => (ToolState::OutputDenied, None, None),
        };
        // The decision the client recorded with its answer.
        if let Some(approval) = part.approval.as_mut().filter(|a| a.approved.is_none() && !expired) {
            approval.approved = Some(!denied);
        }
    }

    /// The message as the client's JSON.
    pub fn to_json(&self) -> Value {
        #[derive(Serialize)]
        struct Message<'a> {
            id: &'a str,
            role: &'static str,
            parts: &'a [Part],
            #[serde(skip_serializing_if = "Option::is_none")]
            metadata: Option<&'a Value>,
        }
        let m = Message { id: &self.id, role: "assistant", parts: &self.parts, metadata: self.metadata.as_ref() };
        serde_json::to_value(m).expect("a message serialises")
    }

    /// A tool part of the current step (after the last `step-start`).
    fn step_tool(&self, call: &str) -> Option<usize> {
        let from = self.parts.iter().rposition(|p| matches!(p, Part::StepStart)).map_or(0, |i| i + 1);
        (from..self.parts.len()).find(|&i| is_tool(&self.parts[i], call))
    }

    /// A tool part anywhere in the message (the current step first).
    fn tool(&mut self, call: &str) -> Option<&mut ToolPart> {
        let at = self.step_tool(call).or_else(|| self.parts.iter().rposition(|p| is_tool(p, call)))?;
        match &mut self.parts[at] {
            Part::DynamicTool(part) => Some(part),
            _ => None,
        }
    }
}

/// Whether `part` is tool call `call`'s.
fn is_tool(part: &Part, call: &str) -> bool {
    matches!(part, Part::DynamicTool(t) if t.tool_call_id == call)
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
        if let Some(approval) = message.tool(call).and_then(|part| part.approval.as_mut()) {
            approval.approved = Some(false);
            if let Some(reason) = rest.strip_prefix(": ").filter(|r| !r.is_empty()) {
                approval.reason = Some(reason.to_owned());
            }
        }
    }
    message
}

/// The user message of a run, as the client sent it.
pub fn user_message(message_id: &str, text: &str) -> Value {
    user_json(message_id, vec![Part::Text { text: text.to_owned(), state: None }])
}

/// A user message of `parts`, as the client's JSON.
fn user_json(message_id: &str, parts: Vec<Part>) -> Value {
    #[derive(Serialize)]
    struct Message<'a> {
        id: &'a str,
        role: &'static str,
        parts: Vec<Part>,
    }
    serde_json::to_value(Message { id: message_id, role: "user", parts }).expect("a message serialises")
}

/// An MCP tool's call names its server (`toolMetadata.mcpServer`) and its
/// title: the tool's, with the server's name, else the server's.
fn mcp(server: Option<&str>, title: Option<&str>) -> Option<Mcp> {
    let server = server?;
    let title = title.unwrap_or_default();
    Some(Mcp {
        tool_metadata: ToolMetadata { mcp_server: server.to_owned() },
        title: if title.is_empty() { server.to_owned() } else { format!("{title} ({server})") },
    })
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
    let text = Part::Text { text: text.to_owned(), state: None };
    if attachments.is_empty() {
        return user_json(message_id, vec![text]);
    }
    let mut parts: Vec<Part> = attachments
        .iter()
        .map(|a| Part::File {
            media_type: a.media_type().to_owned(),
            url: a.url(origin, thread),
            filename: a.name().map(str::to_owned),
        })
        .collect();
    if !matches!(&text, Part::Text { text, .. } if text.is_empty()) {
        parts.push(text);
    }
    user_json(message_id, parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use crate::log::event::Kind;

    fn ev(kind: Kind, agent: &str, rid: Option<&str>, payload: Value) -> Event {
        let mut e = Event::from_json(kind, "r", agent, 0, payload).unwrap();
        e.response_id = rid.map(str::to_owned);
        e
    }

    fn chunks(m: &mut UiMapper, events: &[Event]) -> Vec<Chunk> {
        events.iter().flat_map(|e| m.map(e)).collect()
    }

    fn values(chunks: &[Chunk]) -> Vec<Value> {
        chunks.iter().map(|c| serde_json::to_value(c).unwrap()).collect()
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
        let a_values = values(&a);
        let types: Vec<&str> = a_values.iter().map(|c| c["type"].as_str().unwrap()).collect();
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
        assert_eq!(values(&out), [json!({"type":"tool-output-denied","toolCallId":"a"})]);
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
            values(&chunks(
                &mut m,
                &[
                    ev(Kind::Error, "o", None, json!({"content":"boom"})),
                    ev(Kind::RunFinish, "o", None, json!({"status":status,"reason":"why"})),
                ],
            ))
        };
        let finish = |reason: &str| json!({ "type": "finish", "finishReason": reason, "messageMetadata": {} });
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
        msg.apply(&Chunk::DataTasks { id: "tasks", data: TasksData { tasks: json!([1]) } });
        msg.apply(&Chunk::DataStatus { data: StatusData { message: "x".into() }, transient: true });
        msg.apply(&Chunk::DataTasks { id: "tasks", data: TasksData { tasks: json!([1, 2]) } });
        assert_eq!(msg.to_json()["parts"], json!([{"type":"data-tasks","id":"tasks","data":{"tasks":[1,2]}}]));
    }
}
