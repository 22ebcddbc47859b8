//! Run streams in adonis-agora's envelope (`docs/protocols/agora-streaming-and-http.md`, "The SSE envelope"):
//! a run's events mapped to `AgentStreamEvent` frames, each with an SSE `id:`
//! equal to its 1-based position in the run.
//!
//! The same frame must carry the same id on every connection, whether it was
//! sent live (from a delta) or rebuilt later from the log (from a block).
//! Blocks record each delta's length (`parts`), so [`FrameMapper`] turns a
//! block back into exactly the text frames its deltas were; a block that
//! extends text already sent (live deltas, or an earlier flush of the same
//! segment) yields only the parts not yet sent. Only the root agent's events
//! become frames (the envelope has no sub-agents; a sub-agent's work arrives
//! as its spawn call's output).
//!
//! The mapping:
//!
//! | log event | frame |
//! | --- | --- |
//! | `step-start` | `step-start` (after the previous step's `step-finish`) |
//! | `text-delta` / `text-block` | `text {text}` per delta |
//! | `reasoning-delta` / `reasoning-block` | `reasoning {text}` per delta |
//! | `step-finish {usage, costUsd?}` | `step-finish {usage: {inputTokens, outputTokens}, costUsd?}`, held until the step's tools ran |
//! | `tool-call {toolKind?}` | `tool-input-available {id, name, input, toolKind?}` |
//! | `tool-result` | `tool-output {id, output}` |
//! | `tool-error`, `tool-interrupted` | `tool-output-error {id, error, errorText}` (none for a call a person denied or let lapse) |
//! | `confirmation-request` | `approval-requested {id, requestId, toolName, input, approver, expiresAt?}` |
//! | `confirmation-settled` | `approval-settled {id, status (approved, rejected, expired), decidedBy?, decidedVia?, remember?, reason?}`, then for a rejected or lapsed call `tool-output-denied {id, reason}` |
//! | `tasks-update` | `tasks {tasks}` |
//! | `thread-title-updated` | `title {title}`, held until the run's last step finished |
//! | `queue-updated` | `queue {queue: {items, paused}, started?: {messageId, runId}}` ([`super::queue`]) |
//! | `run-finish` | `cancelled` (a cancelled run), then `event: done`; or `event: error {code, message}` |
//!
//! The order is agora's (its streaming page's example, and its server's
//! tests): a step brackets its model call and the tools it called, so a
//! step's `step-finish` is held until the next `step-start` or the run's
//! end; the thread's `title` comes after the last `step-finish`; the
//! queue's handoff is the last event (held frames go before it); a
//! cancelled run's last frame is `cancelled`. Holding depends only on the
//! events, so a frame keeps its number on every connection.

use crate::log::event::payload::RunFinish;
use crate::log::event::{Event, FinishStatus, Kind, Payload};
use crate::log::queued::QueueStart;
use crate::wire::sse::Frame;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashSet;

/// One frame of a run stream, in agora's words (`AgentStreamEvent`): its
/// `kind` first, then its fields in the order agora's client reads them.
/// Serialised in one place ([`encode`]); every frame the mapping makes is
/// one of these.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum AgoraFrame {
    Text {
        text: String,
    },
    Reasoning {
        text: String,
    },
    StepStart {},
    #[serde(rename_all = "camelCase")]
    StepFinish {
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<StepUsage>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
    },
    #[serde(rename_all = "camelCase")]
    ToolInputAvailable {
        id: String,
        name: String,
        input: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_kind: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        server: Option<String>,
    },
    ToolOutput {
        id: String,
        output: Value,
    },
    /// agora's `error`; `errorText` for readers of the AI SDK's word.
    #[serde(rename_all = "camelCase")]
    ToolOutputError {
        id: String,
        error: String,
        error_text: String,
    },
    ToolOutputDenied {
        id: String,
        reason: String,
    },
    #[serde(rename_all = "camelCase")]
    ApprovalRequested {
        id: String,
        request_id: String,
        tool_name: String,
        input: Value,
        input_type: String,
        approver: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        expires_at: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    ApprovalSettled {
        id: String,
        status: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        decided_by: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        decided_via: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        remember: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    Tasks {
        tasks: Value,
    },
    Title {
        title: String,
    },
    /// The queue as agora reads it ([`super::queue`]), and the message a
    /// run's end started.
    Queue {
        queue: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        started: Option<QueueStart>,
    },
    Cancelled {},
}

/// A step's token counts, as the provider reported them.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepUsage {
    pub input_tokens: Value,
    pub output_tokens: Value,
}

#[derive(Debug, Clone, PartialEq)]
struct Tail {
    reasoning: bool,
    response_id: Option<String>,
    /// Text already sent as frames, and how many deltas that was.
    text: String,
    parts: usize,
}

/// A step's `step-finish`, held until its tools ran: what its frame says.
#[derive(Debug, Clone, PartialEq)]
struct HeldStep {
    usage: Option<StepUsage>,
    cost_usd: Option<f64>,
}

/// A [`FrameMapper`]'s state as it travels: its fields in order (root,
/// open text as reasoning/response/text/parts, calls, denied calls, a
/// held step's usage and cost, held titles, frame count), a JSON array
/// with typed members. The cost travels as its bits: a float read back from
/// its shortest decimal text is not always the same float, and the frame
/// must say it the same. Tuples, not derived structs: the structs' derived
/// deserializers took the Worker's bundle 7 KiB gzip up, past its budget.
pub type Saved = (
    String,
    Option<(bool, Option<String>, String, usize)>,
    Vec<String>,
    Vec<String>,
    Option<(Option<(Value, Value)>, Option<u64>)>,
    Vec<String>,
    u64,
);

/// Maps a run's events to numbered frames; the same events always give the
/// same frames with the same numbers.
///
/// Its whole state travels ([`Saved`]), so a stream that moves between the
/// object and a relay goes on exactly where it was. What it holds back is
/// kept as the data of its frames, not as [`AgoraFrame`]s.
#[derive(Debug, Clone)]
pub struct FrameMapper {
    root: String,
    tail: Option<Tail>,
    calls: HashSet<String>,
    /// Calls a person denied, or let lapse: their `tool-error` is the
    /// `tool-output-denied` already sent.
    denied: HashSet<String>,
    /// The last step's `step-finish`, held until its tools ran.
    step_finish: Option<HeldStep>,
    /// `title` frames' titles, held until the last step finished.
    titles: Vec<String>,
    /// Frames produced so far (the last frame's id).
    pub count: u64,
}

impl FrameMapper {
    pub fn new(root_agent: &str) -> FrameMapper {
        FrameMapper {
            root: root_agent.to_owned(),
            tail: None,
            calls: HashSet::new(),
            denied: HashSet::new(),
            step_finish: None,
            titles: Vec::new(),
            count: 0,
        }
    }

    /// The mapper's state as it travels ([`Saved`]).
    pub fn saved(&self) -> Saved {
        let tail = self.tail.as_ref().map(|t| (t.reasoning, t.response_id.clone(), t.text.clone(), t.parts));
        let usage = |u: &StepUsage| (u.input_tokens.clone(), u.output_tokens.clone());
        let step = self.step_finish.as_ref().map(|h| (h.usage.as_ref().map(usage), h.cost_usd.map(f64::to_bits)));
        let (calls, denied) = (self.calls.iter().cloned().collect(), self.denied.iter().cloned().collect());
        (self.root.clone(), tail, calls, denied, step, self.titles.clone(), self.count)
    }

    /// A mapper that goes on from a state [`FrameMapper::saved`] gave.
    pub fn from_saved((root, tail, calls, denied, step, titles, count): Saved) -> FrameMapper {
        let tail = tail.map(|(reasoning, response_id, text, parts)| Tail { reasoning, response_id, text, parts });
        let usage = |(input_tokens, output_tokens)| StepUsage { input_tokens, output_tokens };
        let step_finish = step.map(|(u, bits)| HeldStep { usage: u.map(usage), cost_usd: bits.map(f64::from_bits) });
        let (calls, denied) = (calls.into_iter().collect(), denied.into_iter().collect());
        FrameMapper { root, tail, calls, denied, step_finish, titles, count }
    }

    /// The frames of one event, numbered.
    pub fn map(&mut self, ev: &Event) -> Vec<(u64, AgoraFrame)> {
        let frames = self.frames(ev);
        self.number(frames)
    }

    /// The frames a run's end releases, numbered: the held `step-finish`
    /// and `title`s, then `cancelled` for a cancelled run.
    pub fn finish(&mut self, run_finish: &RunFinish) -> Vec<(u64, AgoraFrame)> {
        let mut frames = self.release(true);
        if run_finish.status == FinishStatus::Cancelled {
            frames.push(AgoraFrame::Cancelled {});
        }
        self.number(frames)
    }

    fn number(&mut self, frames: Vec<AgoraFrame>) -> Vec<(u64, AgoraFrame)> {
        frames
            .into_iter()
            .map(|f| {
                self.count += 1;
                (self.count, f)
            })
            .collect()
    }

    /// The held `step-finish`, and at the run's end the held `title`s.
    fn release(&mut self, end: bool) -> Vec<AgoraFrame> {
        let step = self.step_finish.take().map(|HeldStep { usage, cost_usd }| AgoraFrame::StepFinish { usage, cost_usd });
        let mut frames: Vec<AgoraFrame> = step.into_iter().collect();
        if end {
            frames.extend(self.titles.drain(..).map(|title| AgoraFrame::Title { title }));
        }
        frames
    }

    fn frames(&mut self, ev: &Event) -> Vec<AgoraFrame> {
        // A child's entry lands in the root's timeline: root text ends there.
        if let Payload::AgentSpawned(spawned) = &ev.payload {
            if spawned.parent_id == self.root {
                self.tail = None;
            }
            return Vec::new();
        }
        if ev.agent_id != self.root && ev.kind() != Kind::QueueUpdated {
            return Vec::new();
        }
        match &ev.payload {
            Payload::TextDelta(t) | Payload::ReasoningDelta(t) if t.snapshot != Some(true) => {
                let reasoning = ev.kind() == Kind::ReasoningDelta;
                let same =
                    self.tail.as_ref().is_some_and(|t| t.reasoning == reasoning && t.response_id == ev.response_id);
                if !same {
                    self.tail =
                        Some(Tail { reasoning, response_id: ev.response_id.clone(), text: String::new(), parts: 0 });
                }
                let tail = self.tail.as_mut().expect("set above");
                tail.text.push_str(&t.text);
                tail.parts += 1;
                vec![text_frame(reasoning, &t.text)]
            }
            // Blocks, and the snapshot a joining client gets: the deltas not sent yet.
            Payload::TextDelta(t) | Payload::ReasoningDelta(t) | Payload::TextBlock(t) | Payload::ReasoningBlock(t) => {
                let reasoning = matches!(ev.payload, Payload::ReasoningDelta(_) | Payload::ReasoningBlock(_));
                let full = t.text.as_str();
                // Numbered frames keep even an empty delta (agora's ids
                // count it), so only the reading is shared (`segment`).
                let parts = crate::log::segment::Piece::of(ev).map(|p| p.parts).unwrap_or_else(|| vec![full.len()]);
                let sent = match &self.tail {
                    Some(t)
                        if t.reasoning == reasoning && t.response_id == ev.response_id && full.starts_with(&t.text) =>
                    {
                        t.parts
                    }
                    _ => 0,
                };
                let mut frames = Vec::new();
                let mut at = 0;
                for (i, len) in parts.iter().enumerate() {
                    let piece = full.get(at..at + len).unwrap_or_default();
                    if i >= sent {
                        frames.push(text_frame(reasoning, piece));
                    }
                    at += len;
                }
                self.tail = Some(Tail {
                    reasoning,
                    response_id: ev.response_id.clone(),
                    text: full.to_owned(),
                    parts: parts.len(),
                });
                frames
            }
            Payload::ToolInputStart(start) => {
                if self.calls.insert(start.tool_call_id.clone()) {
                    self.tail = None;
                }
                Vec::new()
            }
            Payload::ToolCall(call) => {
                if self.calls.insert(call.tool_call_id.clone()) {
                    self.tail = None;
                }
                // An MCP tool names its server.
                vec![AgoraFrame::ToolInputAvailable {
                    id: call.tool_call_id.clone(),
                    name: call.tool_name.clone(),
                    input: call.args.clone(),
                    tool_kind: call.tool_kind.clone(),
                    server: call.server.clone(),
                }]
            }
            Payload::ToolResult(r) => {
                vec![AgoraFrame::ToolOutput { id: r.tool_call_id.clone(), output: r.result.clone() }]
            }
            Payload::ToolError(e) | Payload::ToolInterrupted(e) if self.denied.contains(&e.tool_call_id) => Vec::new(),
            Payload::ToolError(e) | Payload::ToolInterrupted(e) => vec![AgoraFrame::ToolOutputError {
                id: e.tool_call_id.clone(),
                error: e.error.clone(),
                error_text: e.error.clone(),
            }],
            Payload::ConfirmationSettled(c) => {
                let id = c.tool_call_id.as_str();
                let status = c.status.as_str();
                // agora's words: a person's no is `rejected`.
                let word = if status == "denied" { "rejected" } else { status };
                let mut frames = vec![AgoraFrame::ApprovalSettled {
                    id: id.to_owned(),
                    status: word.to_owned(),
                    request_id: c.request_id.clone(),
                    decided_by: c.decided_by.clone(),
                    decided_via: c.decided_via.clone(),
                    remember: c.remember,
                    reason: c.reason.clone(),
                }];
                let reason = match status {
                    "expired" => Some("approval expired".to_owned()),
                    "denied" => Some(c.reason.clone().unwrap_or_else(|| "denied".to_owned())),
                    _ => None,
                };
                if let Some(reason) = reason {
                    self.denied.insert(id.to_owned());
                    frames.push(AgoraFrame::ToolOutputDenied { id: id.to_owned(), reason });
                }
                frames
            }
            Payload::ConfirmationRequest(req) => {
                if self.calls.insert(req.tool_call_id.clone()) {
                    self.tail = None;
                }
                vec![AgoraFrame::ApprovalRequested {
                    id: req.tool_call_id.clone(),
                    request_id: req.request_id.clone(),
                    tool_name: req.tool_name.clone(),
                    input: req.args.clone(),
                    input_type: req.input_type.as_ref().map_or("approval", |t| t.as_str()).to_owned(),
                    approver: req.approver.as_deref().unwrap_or(crate::thread::REQUESTER).to_owned(),
                    expires_at: req.expires_at.map(crate::wire::time::rfc3339),
                }]
            }
            Payload::StepStart(_) => {
                let mut frames = self.release(false);
                frames.push(AgoraFrame::StepStart {});
                frames
            }
            Payload::StepFinish(step) => {
                let usage = step
                    .token_counts()
                    .map(|(input_tokens, output_tokens)| StepUsage { input_tokens, output_tokens });
                let frames = self.release(false);
                self.step_finish = Some(HeldStep { usage, cost_usd: step.cost_usd });
                frames
            }
            Payload::TasksUpdate(tasks) => vec![AgoraFrame::Tasks { tasks: tasks.list_json() }],
            Payload::ThreadTitleUpdated(title) => {
                self.titles.push(title.title.clone());
                Vec::new()
            }
            Payload::QueueUpdated(update) => {
                // The handoff (a message `started`, or the queue paused) is
                // the run's last event: what is held goes before it.
                let handoff = update.started.is_some() || update.queue.paused;
                let mut frames = if handoff { self.release(true) } else { Vec::new() };
                frames.push(AgoraFrame::Queue { queue: super::queue::of(&update.queue), started: update.started.clone() });
                frames
            }
            // The run's start is the stream's `meta`, its end the stream's
            // terminal frame ([`FrameMapper::finish`], [`terminal`]); a
            // sub-agent's work is its spawn call's output; agora's envelope
            // has no status line, error frame (the run's end says why) or
            // filesystem request.
            Payload::RunStart(_)
            | Payload::RunFinish(_)
            | Payload::AgentSpawned(_)
            | Payload::AgentCompleted(_)
            | Payload::Status(_)
            | Payload::Error(_)
            | Payload::FilesystemRequest(_)
            // A switch of branch is the thread's, not a run's: agora's
            // thread detail shows the active path when it is read. A
            // compaction is the model's, not the person's: the thread
            // detail marks it (`contextCompacted`).
            | Payload::BranchSwitched(_)
            | Payload::ContextCompacted(_)
            | Payload::ContextCompactionFailed(_) => Vec::new(),
        }
    }
}

fn text_frame(reasoning: bool, text: &str) -> AgoraFrame {
    let text = text.to_owned();
    if reasoning {
        AgoraFrame::Reasoning { text }
    } else {
        AgoraFrame::Text { text }
    }
}

/// Appends numbered frames to `out`.
pub fn encode(frames: &[(u64, AgoraFrame)], after: u64, out: &mut Vec<u8>) {
    for (id, f) in frames.iter().filter(|(id, _)| *id > after) {
        Frame::data(&serde_json::to_string(f).expect("a frame serialises")).id(*id).encode(out);
    }
}

/// `event: meta`: the run and thread a stream is of.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Meta<'a> {
    run_id: &'a str,
    thread_id: &'a str,
}

/// `event: error`: why a run failed, in agora's words.
#[derive(Serialize)]
struct Failed<'a> {
    code: &'a str,
    message: &'a str,
}

/// `event: meta` with the run and thread (no id).
pub fn meta(run_id: &str, thread_id: &str, out: &mut Vec<u8>) {
    let data = serde_json::to_string(&Meta { run_id, thread_id }).expect("meta serialises");
    Frame::data(&data).event("meta").expect("a fixed name").encode(out);
}

/// The stream's last frame for a `run-finish`: `done` (a completed run, or
/// a cancelled one: agora's Stop is not a failure, and a client that
/// retries a failed stream must not retry it), or `error {code, message}`.
pub fn terminal(run_finish: &RunFinish, out: &mut Vec<u8>) {
    let status = run_finish.status.as_str();
    let reason = run_finish.reason.as_deref().unwrap_or_default();
    let failed = |code, message| serde_json::to_string(&Failed { code, message }).expect("an error serialises");
    let (name, data) = match (status, reason) {
        ("completed" | "cancelled", _) => ("done", "{}".to_owned()),
        (_, "quota_exceeded") => ("error", failed(reason, "your budget for this period is spent")),
        (_, "structured_output_invalid") => ("error", failed(reason, "the answer did not match the schema asked for")),
        (_, "output_rejected") => ("error", failed(reason, "the output check refused the answer")),
        _ => ("error", failed("run_failed", if reason.is_empty() { status } else { reason })),
    };
    Frame::data(&data).event(name).expect("fixed names").encode(out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(kind: Kind, agent: &str, rid: Option<&str>, payload: Value) -> Event {
        let mut e = Event::from_json(kind, "r", agent, 0, payload).unwrap();
        e.response_id = rid.map(str::to_owned);
        e
    }

    fn texts(frames: &[(u64, AgoraFrame)]) -> Vec<(u64, String)> {
        frames
            .iter()
            .map(|(i, f)| {
                let f = serde_json::to_value(f).unwrap();
                (*i, f["text"].as_str().unwrap_or(f["kind"].as_str().unwrap()).to_owned())
            })
            .collect()
    }

    #[test]
    fn live_deltas_and_replayed_blocks_give_the_same_frames() {
        let live = [
            ev(Kind::StepStart, "o", None, json!({})),
            ev(Kind::TextDelta, "o", Some("s"), json!({"text":"He"})),
            ev(Kind::TextBlock, "o", Some("s"), json!({"text":"He","parts":[2]})), // idle flush
            ev(Kind::TextDelta, "o", Some("s"), json!({"text":"llo"})),
            ev(Kind::TextDelta, "sub", Some("x"), json!({"text":"ignored"})),
            ev(Kind::TextBlock, "o", Some("s"), json!({"text":"Hello","parts":[2,3]})),
            ev(Kind::ToolCall, "o", None, json!({"toolCallId":"t","toolName":"n","args":{}})),
        ];
        let replay: Vec<Event> = live.iter().filter(|e| e.kind() != Kind::TextDelta).cloned().collect();
        let mut a = FrameMapper::new("o");
        let fa: Vec<_> = live.iter().flat_map(|e| a.map(e)).collect();
        let mut b = FrameMapper::new("o");
        let fb: Vec<_> = replay.iter().flat_map(|e| b.map(e)).collect();
        assert_eq!(fa, fb);
        assert_eq!(
            texts(&fa),
            vec![(1, "step-start".into()), (2, "He".into()), (3, "llo".into()), (4, "tool-input-available".into())]
        );
    }

    #[test]
    fn a_joining_client_gets_the_unsent_parts_of_the_open_segment() {
        let mut m = FrameMapper::new("o");
        let snap = ev(Kind::TextDelta, "o", Some("s"), json!({"text":"abc","snapshot":true,"parts":[1,2]}));
        assert_eq!(texts(&m.map(&snap)), vec![(1, "a".into()), (2, "bc".into())]);
        // The block that later stores it sends nothing new.
        assert!(m.map(&ev(Kind::TextBlock, "o", Some("s"), json!({"text":"abc","parts":[1,2]}))).is_empty());
    }

    #[test]
    fn terminal_frames() {
        let mut out = Vec::new();
        let fin = |status, reason: Option<&str>| RunFinish { status, reason: reason.map(str::to_owned), output: None };
        terminal(&fin(FinishStatus::Completed, None), &mut out);
        terminal(&fin(FinishStatus::Error, Some("LLM provider unavailable")), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "event: done\ndata: {}\n\nevent: error\ndata: {\"code\":\"run_failed\",\"message\":\"LLM provider unavailable\"}\n\n"
        );
    }
}
