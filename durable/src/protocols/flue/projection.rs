//! Flue's UI projection of a thread's log: the `ConversationStreamChunk`s
//! of `view=updates`, and the `FlueConversationSnapshot` of `view=history`
//! folded from the same chunks (`@flue/sdk`'s `conversation-stream.ts` is
//! the reference for both, at 1.0.0-beta.9 and at 2.0.3).
//!
//! One wire for both releases of Flue's client: every chunk here is one
//! both reducers apply the same way. So the answer opens with a
//! `message-appended` of its whole skeleton (`purpose`, `display`,
//! `metadata.timestamp`), not `message-started` (1.x's reducer reads its
//! `timestamp`, 2.x's its `metadata`: each would build another message);
//! `stream-checkpoint`, `message-metadata` and `data-part` (1.x refuses
//! them) are never sent; usage is not projected (1.x reads it from
//! `message-completed`, 2.x only from `message-metadata`); and a
//! settlement's `result` rides on its `submission-settled` chunk, where
//! 1.x's `wait()` returns it, but not in `view=history`, as 2.x's reducer
//! drops it.
//!
//! | log                                   | chunks                                              |
//! |---------------------------------------|-----------------------------------------------------|
//! | `run-start`                           | `message-appended` (the user's message), `message-appended` (the answer's skeleton) |
//! | root `text-block`/`reasoning-block`, a delta, a join snapshot | `message-delta` with the text the reader has not had |
//! | root `tool-call`                      | `tool-input`                                        |
//! | root `tool-result`                    | `tool-output`                                       |
//! | root `tool-error`, `tool-interrupted` | `tool-output-error`                                 |
//! | `run-finish`                          | `message-completed`, `submission-settled`           |
//! | `queue-updated` with `dropped`        | `submission-settled` (`aborted`) for each dropped message |
//! | anything else (sub-agents, tasks, titles, the queue, status) | none: the record advances the offset only |
//!
//! A submission is a run (`submissionId` is the run id); the answer's
//! message id is `<runId>:assistant`, as in threadline's own messages view.
//!
//! Invariant (history then updates == history again): [`Conversation`]
//! applies chunks exactly as Flue's reducer does, and `view=history` is
//! that fold of every chunk the durable prefix projects to; `view=updates`
//! after an offset is the same projector fed the same prefix with its
//! output dropped up to the offset. So a reader that applies the snapshot,
//! then the updates, holds what a snapshot read at the end holds.
//!
//! Invariant (no text twice, none lost): a text segment's durable blocks
//! and its join snapshot hold the segment's whole text so far; the
//! projector remembers how many characters of the open root segment the
//! reader has (the durable prefix's, or more once live deltas went out: the
//! [`Resume`] in the offset says how many) and emits only what lies beyond.

use crate::log::event::payload::{RunFinish, RunStart};
use crate::log::event::{Event, FinishStatus, Payload};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;

/// A chunk's ordering token: `batch` is the log record it was projected
/// from (a live delta: the last record before it), `index` its place in it.
/// Live text after record `n` is indexed from [`LIVE_INDEX`] up, by the
/// characters of its segment, so positions only grow on a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Position {
    pub batch: u64,
    pub index: u64,
}

/// Where live text's positions start within a record's window (a record
/// projects to at most a few chunks).
pub const LIVE_INDEX: u64 = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TextKind {
    Text,
    Reasoning,
}

/// A part's lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PartState {
    Streaming,
    Done,
}

/// A tool part's state, with what it carries.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case", rename_all_fields = "camelCase")]
pub enum ToolState {
    InputAvailable { input: Value },
    OutputAvailable { input: Value, output: Value },
    OutputError { input: Value, error_text: String },
}

/// One renderable part of a message (`FlueConversationPart`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case", rename_all_fields = "camelCase")]
pub enum Part {
    Text {
        text: String,
        state: PartState,
    },
    Reasoning {
        text: String,
        state: PartState,
    },
    DynamicTool {
        tool_name: String,
        tool_call_id: String,
        #[serde(flatten)]
        state: ToolState,
    },
    /// An attachment: a stored file by `id` (Flue's client makes its URL,
    /// `/agents/:name/:id/attachments/:fileId`), or a URL.
    File {
        media_type: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        size: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        filename: Option<String>,
    },
}

/// A user message's parts: its text, and a `file` part per attachment.
fn user_parts(text: &str, list: &[crate::files::Attachment]) -> Vec<Part> {
    let mut parts = Vec::new();
    if !text.is_empty() || list.is_empty() {
        parts.push(Part::Text { text: text.to_owned(), state: PartState::Done });
    }
    for a in list.iter().cloned() {
        let filename = a.name().map(str::to_owned);
        parts.push(match a {
            crate::files::Attachment::File(f) => Part::File {
                media_type: f.media_type,
                id: Some(f.file_id),
                size: Some(f.size),
                url: None,
                filename,
            },
            crate::files::Attachment::Url { url, media_type, .. } => {
                Part::File { media_type, id: None, size: None, url: Some(url), filename }
            }
        });
    }
    parts
}

/// A message's `metadata`: when it was written, and (an extension, in the
/// snapshot only) where it stands among its versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<crate::thread::tree::Branch>,
    /// Extension, in the snapshot only: on a submission's last answer, the
    /// compaction of the model's context made during it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_compacted: Option<Box<crate::log::event::payload::ContextCompacted>>,
}

/// `FlueConversationMessage`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub id: String,
    pub role: &'static str,
    /// Flue 2's `purpose` (`user`, `assistant`): a person's message or the
    /// agent's answer, never a dispatch or an advisory here.
    pub purpose: &'static str,
    /// Flue 2's `display`: every message here is `visible`.
    pub display: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submission_id: Option<String>,
    pub parts: Vec<Part>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SubmissionOutcome {
    Completed,
    Failed,
    Aborted,
}

/// `FlueConversationSettlement`: how one submission (run) ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settlement {
    pub submission_id: String,
    pub outcome: SubmissionOutcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
}

/// One chunk without its envelope (`conversationId`, `position`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case", rename_all_fields = "camelCase")]
pub enum Chunk {
    MessageAppended {
        message: Message,
    },
    MessageDelta {
        message_id: String,
        kind: TextKind,
        delta: String,
    },
    ToolInput {
        message_id: String,
        tool_call_id: String,
        tool_name: String,
        input: Value,
    },
    ToolOutput {
        tool_call_id: String,
        output: Value,
    },
    ToolOutputError {
        tool_call_id: String,
        error_text: String,
    },
    MessageCompleted {
        message_id: String,
    },
    SubmissionSettled {
        #[serde(flatten)]
        settlement: Settlement,
    },
}

/// A chunk as the wire carries it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Envelope<'a> {
    #[serde(flatten)]
    chunk: &'a Chunk,
    conversation_id: &'a str,
    position: Position,
}

/// Writes chunks as one JSON array, the body of a `data` batch.
pub fn json_array(conversation: &str, chunks: &[(Position, Chunk)]) -> Vec<u8> {
    let items: Vec<Envelope> =
        chunks.iter().map(|(position, chunk)| Envelope { chunk, conversation_id: conversation, position: *position }).collect();
    serde_json::to_vec(&items).expect("chunks serialise")
}

/// The materialized conversation: Flue's reducer, in Rust.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Conversation {
    pub messages: Vec<Message>,
    pub settlements: Vec<Settlement>,
}

impl Conversation {
    /// Applies one chunk as `applyConversationChunk` does.
    pub fn apply(&mut self, chunk: &Chunk) {
        match chunk {
            Chunk::MessageAppended { message } => match self.messages.iter_mut().find(|m| m.id == message.id) {
                Some(m) => *m = message.clone(),
                None => self.messages.push(message.clone()),
            },
            Chunk::MessageDelta { message_id, kind, delta } => {
                let Some(m) = self.messages.iter_mut().find(|m| &m.id == message_id) else { return };
                match m.parts.last_mut() {
                    Some(Part::Text { text, state: PartState::Streaming }) if *kind == TextKind::Text => text.push_str(delta),
                    Some(Part::Reasoning { text, state: PartState::Streaming }) if *kind == TextKind::Reasoning => {
                        text.push_str(delta)
                    }
                    last => {
                        if let Some(Part::Text { state, .. } | Part::Reasoning { state, .. }) = last {
                            *state = PartState::Done;
                        }
                        let text = delta.clone();
                        m.parts.push(match kind {
                            TextKind::Text => Part::Text { text, state: PartState::Streaming },
                            TextKind::Reasoning => Part::Reasoning { text, state: PartState::Streaming },
                        });
                    }
                }
            }
            Chunk::ToolInput { message_id, tool_call_id, tool_name, input } => {
                let Some(m) = self.messages.iter_mut().find(|m| &m.id == message_id) else { return };
                let known = m.parts.iter().any(|p| matches!(p, Part::DynamicTool { tool_call_id: id, .. } if id == tool_call_id));
                if known {
                    return;
                }
                // A tool call is a block boundary.
                if let Some(Part::Text { state, .. } | Part::Reasoning { state, .. }) = m.parts.last_mut() {
                    *state = PartState::Done;
                }
                m.parts.push(Part::DynamicTool {
                    tool_name: tool_name.clone(),
                    tool_call_id: tool_call_id.clone(),
                    state: ToolState::InputAvailable { input: input.clone() },
                });
            }
            Chunk::ToolOutput { tool_call_id, output } => self.settle_tool(tool_call_id, |input| ToolState::OutputAvailable {
                input,
                output: output.clone(),
            }),
            Chunk::ToolOutputError { tool_call_id, error_text } => {
                self.settle_tool(tool_call_id, |input| ToolState::OutputError { input, error_text: error_text.clone() })
            }
            Chunk::MessageCompleted { message_id } => {
                let Some(m) = self.messages.iter_mut().find(|m| &m.id == message_id) else { return };
                for p in &mut m.parts {
                    if let Part::Text { state, .. } | Part::Reasoning { state, .. } = p {
                        *state = PartState::Done;
                    }
                }
            }
            Chunk::SubmissionSettled { settlement } => {
                // As Flue 2's reducer: the settlement without its `result`
                // (a 1.x reader's `wait()` has it from the chunk).
                let settlement = Settlement { result: None, ..settlement.clone() };
                match self.settlements.iter_mut().find(|s| s.submission_id == settlement.submission_id) {
                    Some(s) => *s = settlement,
                    None => self.settlements.push(settlement),
                }
            }
        }
    }

    /// The last message holding the call settles it.
    fn settle_tool(&mut self, id: &str, to: impl FnOnce(Value) -> ToolState) {
        for m in self.messages.iter_mut().rev() {
            for p in &mut m.parts {
                if let Part::DynamicTool { tool_call_id, state, .. } = p {
                    if tool_call_id == id {
                        let input = match state {
                            ToolState::InputAvailable { input }
                            | ToolState::OutputAvailable { input, .. }
                            | ToolState::OutputError { input, .. } => std::mem::take(input),
                        };
                        *state = to(input);
                        return;
                    }
                }
            }
        }
    }

    /// `FlueConversationSnapshot` at `offset`, of the stream's
    /// `incarnation` (its generation: a thread deleted and made again is
    /// another incarnation).
    pub fn snapshot(&self, conversation: &str, offset: &str, incarnation: &str) -> Value {
        json!({
            "v": 1,
            "conversationId": conversation,
            "offset": offset,
            "incarnation": incarnation,
            "messages": self.messages,
            "settlements": self.settlements,
        })
    }
}

/// How far into the log a reader stands: after record `seq`, holding
/// `chars` characters of the root text segment open there (live text it
/// had beyond the durable prefix; 0 for a plain offset).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resume {
    pub seq: u64,
    pub chars: usize,
}

/// The root agent's open text segment in a run.
#[derive(Debug)]
struct Segment {
    kind: TextKind,
    response: Option<String>,
    /// Its whole text so far.
    text: String,
    /// Characters of it the reader has.
    chars: usize,
}

/// A run that has started and not finished.
#[derive(Debug)]
struct Run {
    root: String,
    answer: String,
    /// The text of the answer's ended segments (with the open one's, the
    /// settlement's `result`).
    text: String,
    segment: Option<Segment>,
}

/// The projector: the log's records and live items in, chunks out.
#[derive(Debug, Default)]
pub struct Projector {
    runs: HashMap<String, Run>,
    /// A reader resuming inside a segment: the characters it has of the
    /// first root text after the offset, until that text is seen.
    pending: Option<usize>,
}

/// A [`Projector`]'s state as it travels (a moving stream's, between two
/// messages): each running run as (run id, root agent, answer, the text of
/// its ended segments, its open segment as (reasoning, response, text,
/// characters the reader has)), and the characters a resuming reader holds.
/// Typed tuples, not derived structs: derived deserializers weigh several
/// KiB in the Worker's bundle, near its budget.
pub type Saved = (Vec<(String, String, String, String, Option<(bool, Option<String>, String, usize)>)>, Option<usize>);

impl Projector {
    pub fn new() -> Projector {
        Projector::default()
    }

    /// Its state as it travels ([`Saved`]).
    pub fn saved(&self) -> Saved {
        let segment = |s: &Segment| (s.kind == TextKind::Reasoning, s.response.clone(), s.text.clone(), s.chars);
        let runs = self
            .runs
            .iter()
            .map(|(id, r)| (id.clone(), r.root.clone(), r.answer.clone(), r.text.clone(), r.segment.as_ref().map(segment)))
            .collect();
        (runs, self.pending)
    }

    /// A projector that goes on from a state [`Projector::saved`] gave.
    pub fn from_saved((runs, pending): Saved) -> Projector {
        let segment = |(reasoning, response, text, chars)| Segment {
            kind: if reasoning { TextKind::Reasoning } else { TextKind::Text },
            response,
            text,
            chars,
        };
        let runs = runs
            .into_iter()
            .map(|(id, root, answer, text, open)| (id, Run { root, answer, text, segment: open.map(segment) }))
            .collect();
        Projector { runs, pending }
    }

    /// A reader resumes with `chars` characters of the root segment open at
    /// its offset.
    pub fn resume_inside(&mut self, chars: usize) {
        self.pending = (chars > 0).then_some(chars);
    }

    /// Characters of the open root segment of the running run the reader
    /// has, when that segment has any (the `.chars` of a live offset).
    pub fn live_chars(&self) -> usize {
        self.runs.values().filter_map(|r| r.segment.as_ref()).map(|s| s.chars).max().unwrap_or(0)
    }

    /// One stored record or live item (`data`: its event's JSON). A record
    /// that does not parse is skipped: the log only holds what its schema
    /// admitted.
    pub fn item(&mut self, data: &str) -> Vec<Chunk> {
        match serde_json::from_str::<Event>(data) {
            Ok(e) => self.event(&e),
            Err(_) => Vec::new(),
        }
    }

    fn event(&mut self, e: &Event) -> Vec<Chunk> {
        let run_id = e.run_id.as_str();
        match &e.payload {
            Payload::RunStart(start) => {
                // What the reader held ended with its segment.
                self.pending = None;
                self.start(e, start)
            }
            Payload::RunFinish(fin) => {
                self.pending = None;
                let Some(run) = self.runs.remove(run_id) else { return Vec::new() };
                finish(run_id, run, fin)
            }
            Payload::QueueUpdated(update) => {
                // Messages dropped from the queue never run: each submission
                // settles aborted, so a `wait()` on it ends.
                update
                    .dropped
                    .iter()
                    .map(|id| Chunk::SubmissionSettled {
                        settlement: Settlement {
                            submission_id: id.clone(),
                            outcome: SubmissionOutcome::Aborted,
                            result: None,
                            error: Some(json!({ "message": "removed from the queue before it ran" })),
                        },
                    })
                    .collect()
            }
            Payload::TextBlock(t) | Payload::ReasoningBlock(t) | Payload::TextDelta(t) | Payload::ReasoningDelta(t) => {
                let reasoning = matches!(e.payload, Payload::ReasoningBlock(_) | Payload::ReasoningDelta(_));
                let kind = if reasoning { TextKind::Reasoning } else { TextKind::Text };
                let whole = matches!(e.payload, Payload::TextBlock(_) | Payload::ReasoningBlock(_)) || t.snapshot == Some(true);
                let Some(run) = self.runs.get_mut(run_id).filter(|r| r.root == e.agent_id) else { return Vec::new() };
                let pending = self.pending.take();
                run.text_item(kind, e.response_id.as_deref(), &t.text, whole, pending).into_iter().collect()
            }
            Payload::ToolCall(call) => {
                let Some(run) = self.runs.get_mut(run_id).filter(|r| r.root == e.agent_id) else { return Vec::new() };
                run.end_segment();
                self.pending = None;
                vec![Chunk::ToolInput {
                    message_id: run.answer.clone(),
                    tool_call_id: call.tool_call_id.clone(),
                    tool_name: call.tool_name.clone(),
                    input: call.args.clone(),
                }]
            }
            Payload::ToolResult(r) => {
                if self.runs.get(run_id).is_none_or(|run| run.root != e.agent_id) {
                    return Vec::new();
                }
                vec![Chunk::ToolOutput { tool_call_id: r.tool_call_id.clone(), output: r.result.clone() }]
            }
            Payload::ToolError(err) | Payload::ToolInterrupted(err) => {
                if self.runs.get(run_id).is_none_or(|run| run.root != e.agent_id) {
                    return Vec::new();
                }
                vec![Chunk::ToolOutputError { tool_call_id: err.tool_call_id.clone(), error_text: err.error.clone() }]
            }
            // A message's parts are its text, reasoning and tool calls; the
            // rest of a run (its steps, requests, sub-agents, status and
            // errors, which its settlement carries) is not part of one.
            Payload::ToolInputStart(_)
            | Payload::StepStart(_)
            | Payload::StepFinish(_)
            | Payload::AgentSpawned(_)
            | Payload::AgentCompleted(_)
            | Payload::ConfirmationRequest(_)
            | Payload::ConfirmationSettled(_)
            | Payload::TasksUpdate(_)
            | Payload::Status(_)
            | Payload::Error(_)
            | Payload::ThreadTitleUpdated(_)
            | Payload::FilesystemRequest(_) => Vec::new(),
            // A switch of branch starts no submission: a Flue client reads
            // the active path from the history it loads. A compaction is the
            // model's context: the history marks it (`metadata.contextCompacted`).
            Payload::BranchSwitched(_) | Payload::ContextCompacted(_) | Payload::ContextCompactionFailed(_) => Vec::new(),
        }
    }

    /// A run's start: the person's message, then the answer's skeleton.
    fn start(&mut self, e: &Event, start: &RunStart) -> Vec<Chunk> {
        let run_id = e.run_id.as_str();
        let answer = format!("{run_id}:assistant");
        let timestamp = crate::wire::time::rfc3339(e.ts);
        let mut out = Vec::new();
        if let Some(text) = &start.message {
            out.push(Chunk::MessageAppended {
                message: Message {
                    id: start.message_id.clone(),
                    role: "user",
                    purpose: "user",
                    display: "visible",
                    submission_id: Some(run_id.to_owned()),
                    parts: user_parts(text, start.attachments.as_deref().unwrap_or_default()),
                    metadata: Some(Metadata { timestamp: Some(timestamp.clone()), branch: None, context_compacted: None }),
                },
            });
        }
        // The answer's skeleton, whole: what 2.x's `message-started`
        // would make, and what 1.x upserts as it is.
        out.push(Chunk::MessageAppended {
            message: Message {
                id: answer.clone(),
                role: "assistant",
                purpose: "assistant",
                display: "visible",
                submission_id: Some(run_id.to_owned()),
                parts: Vec::new(),
                metadata: Some(Metadata { timestamp: Some(timestamp), branch: None, context_compacted: None }),
            },
        });
        let run = Run { root: e.agent_id.clone(), answer, text: String::new(), segment: None };
        self.runs.insert(run_id.to_owned(), run);
        out
    }
}

impl Run {
    /// Root text: a delta adds to the open segment; a block or a join
    /// snapshot holds the segment's whole text, of which only what the
    /// reader lacks goes out.
    fn text_item(&mut self, kind: TextKind, response: Option<&str>, text: &str, whole: bool, pending: Option<usize>) -> Option<Chunk> {
        let same = self.segment.as_ref().is_some_and(|s| s.kind == kind && s.response.as_deref() == response);
        if !same {
            self.end_segment();
            self.segment = Some(Segment { kind, response: response.map(str::to_owned), text: String::new(), chars: 0 });
        }
        let segment = self.segment.as_mut().expect("set above");
        if let Some(had) = pending {
            segment.chars = segment.chars.max(had);
        }
        let delta: String = if whole {
            let total = text.chars().count();
            let fresh: String = text.chars().skip(segment.chars).collect();
            segment.chars = segment.chars.max(total);
            segment.text = text.to_owned();
            fresh
        } else {
            segment.chars += text.chars().count();
            segment.text.push_str(text);
            text.to_owned()
        };
        if delta.is_empty() {
            return None;
        }
        Some(Chunk::MessageDelta { message_id: self.answer.clone(), kind, delta })
    }

    /// The open segment ends (a tool call, another segment, the end).
    fn end_segment(&mut self) {
        if let Some(s) = self.segment.take() {
            if s.kind == TextKind::Text {
                self.text.push_str(&s.text);
            }
        }
    }
}

/// A run's end: its answer completes, and its submission settles.
fn finish(run_id: &str, mut run: Run, fin: &RunFinish) -> Vec<Chunk> {
    run.end_segment();
    let status = fin.status.as_str();
    let reason = fin.reason.clone();
    let (outcome, result, error) = match fin.status {
        FinishStatus::Completed => {
            let result = fin.output.clone().unwrap_or_else(|| Value::String(run.text.clone()));
            (SubmissionOutcome::Completed, Some(result), None)
        }
        FinishStatus::Cancelled => (SubmissionOutcome::Aborted, None, reason.map(|m| json!({ "message": m }))),
        FinishStatus::Error | FinishStatus::Interrupted => {
            (SubmissionOutcome::Failed, None, Some(json!({ "message": reason.unwrap_or_else(|| format!("the run ended {status}")) })))
        }
    };
    vec![
        Chunk::MessageCompleted { message_id: run.answer },
        Chunk::SubmissionSettled { settlement: Settlement { submission_id: run_id.to_owned(), outcome, result, error } },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: &str, agent: &str, response: Option<&str>, payload: Value) -> String {
        let mut e = json!({ "type": kind, "runId": "t.run_1", "agentId": agent, "ts": 1_796_185_800_000_i64, "payload": payload });
        if let Some(r) = response {
            e["responseId"] = r.into();
        }
        e.to_string()
    }

    fn fold(items: &[String]) -> (Conversation, Vec<Chunk>) {
        let mut p = Projector::new();
        let mut c = Conversation::default();
        let mut all = Vec::new();
        for i in items {
            for chunk in p.item(i) {
                c.apply(&chunk);
                all.push(chunk);
            }
        }
        (c, all)
    }

    #[test]
    fn a_run_projects_to_flues_lifecycle() {
        let items = vec![
            ev("run-start", "root", None, json!({ "messageId": "m1", "message": "hi" })),
            ev("reasoning-block", "root", Some("r1"), json!({ "text": "think" })),
            ev("text-block", "root", Some("r1"), json!({ "text": "Hel" })),
            ev("text-block", "root", Some("r1"), json!({ "text": "Hello" })),
            ev("tool-call", "root", None, json!({ "toolCallId": "c1", "toolName": "weather", "args": { "city": "Oslo" } })),
            ev("tool-call", "child", None, json!({ "toolCallId": "c2", "toolName": "x", "args": {} })),
            ev("tool-result", "root", None, json!({ "toolCallId": "c1", "result": { "sunny": true } })),
            ev("step-finish", "root", None, json!({ "usage": { "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 } })),
            ev("thread-title-updated", "root", None, json!({ "title": "x" })),
            ev("run-finish", "root", None, json!({ "status": "completed" })),
        ];
        let (c, chunks) = fold(&items);
        let snap = c.snapshot("t", "o", "1");
        assert_eq!(snap["messages"][0], json!({
            "id": "m1", "role": "user", "purpose": "user", "display": "visible", "submissionId": "t.run_1",
            "parts": [{ "type": "text", "text": "hi", "state": "done" }],
            "metadata": { "timestamp": "2026-12-02T04:30:00.000Z" },
        }));
        assert_eq!(snap["messages"][1]["parts"], json!([
            { "type": "reasoning", "text": "think", "state": "done" },
            { "type": "text", "text": "Hello", "state": "done" },
            { "type": "dynamic-tool", "toolName": "weather", "toolCallId": "c1", "state": "output-available",
              "input": { "city": "Oslo" }, "output": { "sunny": true } },
        ]));
        assert_eq!(
            (&snap["messages"][1]["purpose"], &snap["messages"][1]["display"], &snap["messages"][1]["metadata"]),
            (&json!("assistant"), &json!("visible"), &json!({ "timestamp": "2026-12-02T04:30:00.000Z" })),
            "the skeleton both releases upsert; no usage",
        );
        // The result rides on the chunk (1.x's wait), not in the history (2.x's fold).
        assert_eq!(snap["settlements"], json!([{ "submissionId": "t.run_1", "outcome": "completed" }]));
        let settled = chunks.iter().find_map(|c| if let Chunk::SubmissionSettled { settlement } = c { Some(settlement) } else { None });
        assert_eq!(settled.unwrap().result, Some(json!("Hello")));
        assert!(chunks.iter().all(|c| serde_json::to_value(c).unwrap()["type"] != "message-started"));
        let deltas: Vec<&str> =
            chunks.iter().filter_map(|c| if let Chunk::MessageDelta { delta, .. } = c { Some(delta.as_str()) } else { None }).collect();
        assert_eq!(deltas, ["think", "Hel", "lo"], "a block sends only what the reader lacks");
    }

    #[test]
    fn live_deltas_then_their_block_never_double_the_text() {
        let start = ev("run-start", "root", None, json!({ "messageId": "m1", "message": "hi" }));
        let mut p = Projector::new();
        p.item(&start);
        let d = |t: &str| ev("text-delta", "root", Some("r1"), json!({ "text": t }));
        assert_eq!(p.item(&d("He")).len(), 1);
        assert_eq!(p.item(&d("llo")).len(), 1);
        assert_eq!(p.live_chars(), 5);
        assert!(p.item(&ev("text-block", "root", Some("r1"), json!({ "text": "Hello" }))).is_empty());
        // A reader that resumes holding 5 characters: the join snapshot
        // sends what came after.
        let mut q = Projector::new();
        q.item(&start);
        q.resume_inside(5);
        let snap = ev("text-delta", "root", Some("r1"), json!({ "text": "Hello world", "snapshot": true }));
        match q.item(&snap).as_slice() {
            [Chunk::MessageDelta { delta, .. }] => assert_eq!(delta, " world"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn endings_settle_as_flue_names_them() {
        for (status, outcome) in [("cancelled", "aborted"), ("error", "failed"), ("interrupted", "failed")] {
            let items = vec![
                ev("run-start", "root", None, json!({ "messageId": "m1" })),
                ev("run-finish", "root", None, json!({ "status": status, "reason": "why" })),
            ];
            let (c, _) = fold(&items);
            let s = c.snapshot("t", "o", "1");
            assert_eq!(s["settlements"][0]["outcome"], outcome);
            assert_eq!(s["settlements"][0]["error"]["message"], "why");
            assert_eq!(s["messages"].as_array().unwrap().len(), 1, "a run without a message shows its answer only");
        }
    }

    #[test]
    fn dropped_messages_settle_aborted() {
        let e = json!({ "type": "queue-updated", "runId": "thread", "agentId": "root", "ts": 0,
            "payload": { "items": [], "paused": false, "dropped": ["t.m2", "t.m3"] } });
        let (c, _) = fold(&[e.to_string()]);
        let s = c.snapshot("t", "o", "1");
        assert_eq!(s["settlements"].as_array().unwrap().len(), 2);
        assert_eq!(s["settlements"][1]["submissionId"], "t.m3");
        assert_eq!(s["settlements"][1]["outcome"], "aborted");
        // A queue change that drops nothing settles nothing.
        let plain = json!({ "type": "queue-updated", "runId": "thread", "agentId": "root", "ts": 0, "payload": { "items": [], "paused": false } });
        assert!(fold(&[plain.to_string()]).1.is_empty());
    }

    #[test]
    fn chunks_carry_their_envelope() {
        let chunks = vec![(Position { batch: 3, index: 0 }, Chunk::ToolOutput { tool_call_id: "c".into(), output: json!(1) })];
        let text = String::from_utf8(json_array("t", &chunks)).unwrap();
        assert_eq!(text, r#"[{"type":"tool-output","toolCallId":"c","output":1,"conversationId":"t","position":{"batch":3,"index":0}}]"#);
    }
}
