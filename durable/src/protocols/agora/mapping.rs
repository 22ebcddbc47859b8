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
use crate::wire::sse::Frame;
use serde_json::{json, Value};
use std::collections::HashSet;

#[derive(Debug, Clone, PartialEq)]
struct Tail {
    reasoning: bool,
    response_id: Option<String>,
    /// Text already sent as frames, and how many deltas that was.
    text: String,
    parts: usize,
}

/// Maps a run's events to numbered frames; the same events always give the
/// same frames with the same numbers.
#[derive(Debug, Clone)]
pub struct FrameMapper {
    root: String,
    tail: Option<Tail>,
    calls: HashSet<String>,
    /// Calls a person denied, or let lapse: their `tool-error` is the
    /// `tool-output-denied` already sent.
    denied: HashSet<String>,
    /// The last step's `step-finish`, held until its tools ran.
    step_finish: Option<Value>,
    /// `title` frames, held until the last step finished.
    titles: Vec<Value>,
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

    /// The frames of one event, numbered.
    pub fn map(&mut self, ev: &Event) -> Vec<(u64, Value)> {
        let frames = self.frames(ev);
        self.number(frames)
    }

    /// The frames a run's end releases, numbered: the held `step-finish`
    /// and `title`s, then `cancelled` for a cancelled run.
    pub fn finish(&mut self, run_finish: &RunFinish) -> Vec<(u64, Value)> {
        let mut frames = self.release(true);
        if run_finish.status == FinishStatus::Cancelled {
            frames.push(json!({ "kind": "cancelled" }));
        }
        self.number(frames)
    }

    fn number(&mut self, frames: Vec<Value>) -> Vec<(u64, Value)> {
        frames
            .into_iter()
            .map(|f| {
                self.count += 1;
                (self.count, f)
            })
            .collect()
    }

    /// The held `step-finish`, and at the run's end the held `title`s.
    fn release(&mut self, end: bool) -> Vec<Value> {
        let mut frames: Vec<Value> = self.step_finish.take().into_iter().collect();
        if end {
            frames.append(&mut self.titles);
        }
        frames
    }

    fn frames(&mut self, ev: &Event) -> Vec<Value> {
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
                let mut f = json!({ "kind": "tool-input-available", "id": call.tool_call_id, "name": call.tool_name, "input": call.args });
                if let Some(k) = &call.tool_kind {
                    f["toolKind"] = k.clone().into();
                }
                // An MCP tool: its server, by name.
                if let Some(server) = &call.server {
                    f["server"] = server.clone().into();
                }
                vec![f]
            }
            Payload::ToolResult(r) => vec![json!({ "kind": "tool-output", "id": r.tool_call_id, "output": r.result })],
            Payload::ToolError(e) | Payload::ToolInterrupted(e) if self.denied.contains(&e.tool_call_id) => Vec::new(),
            // agora's `error`; `errorText` for readers of the AI SDK's word.
            Payload::ToolError(e) | Payload::ToolInterrupted(e) => {
                vec![json!({ "kind": "tool-output-error", "id": e.tool_call_id, "error": e.error, "errorText": e.error })]
            }
            Payload::ConfirmationSettled(c) => {
                let id = c.tool_call_id.as_str();
                let status = c.status.as_str();
                // agora's words: a person's no is `rejected`.
                let word = if status == "denied" { "rejected" } else { status };
                let mut settled = json!({ "kind": "approval-settled", "id": id, "status": word });
                if let Some(v) = &c.request_id {
                    settled["requestId"] = v.clone().into();
                }
                if let Some(v) = &c.decided_by {
                    settled["decidedBy"] = v.clone().into();
                }
                if let Some(v) = &c.decided_via {
                    settled["decidedVia"] = v.clone().into();
                }
                if let Some(v) = c.remember {
                    settled["remember"] = v.into();
                }
                if let Some(v) = &c.reason {
                    settled["reason"] = v.clone().into();
                }
                let mut frames = vec![settled];
                let reason = match status {
                    "expired" => Some("approval expired".to_owned()),
                    "denied" => Some(c.reason.clone().unwrap_or_else(|| "denied".to_owned())),
                    _ => None,
                };
                if let Some(reason) = reason {
                    self.denied.insert(id.to_owned());
                    frames.push(json!({ "kind": "tool-output-denied", "id": id, "reason": reason }));
                }
                frames
            }
            Payload::ConfirmationRequest(req) => {
                if self.calls.insert(req.tool_call_id.clone()) {
                    self.tail = None;
                }
                let mut f = json!({
                    "kind": "approval-requested",
                    "id": req.tool_call_id,
                    "requestId": req.request_id,
                    "toolName": req.tool_name,
                    "input": req.args,
                    "inputType": req.input_type.as_ref().map_or("approval", |t| t.as_str()),
                    "approver": req.approver.as_deref().unwrap_or(crate::thread::REQUESTER),
                });
                if let Some(at) = req.expires_at {
                    f["expiresAt"] = crate::wire::time::rfc3339(at).into();
                }
                vec![f]
            }
            Payload::StepStart(_) => {
                let mut frames = self.release(false);
                frames.push(json!({ "kind": "step-start" }));
                frames
            }
            Payload::StepFinish(step) => {
                let mut f = json!({ "kind": "step-finish" });
                if let Some((input, output)) = step.token_counts() {
                    f["usage"] = json!({ "inputTokens": input, "outputTokens": output });
                }
                if let Some(c) = step.cost_usd {
                    f["costUsd"] = c.into();
                }
                let frames = self.release(false);
                self.step_finish = Some(f);
                frames
            }
            Payload::TasksUpdate(tasks) => vec![json!({ "kind": "tasks", "tasks": tasks.list_json() })],
            Payload::ThreadTitleUpdated(title) => {
                self.titles.push(json!({ "kind": "title", "title": title.title }));
                Vec::new()
            }
            Payload::QueueUpdated(update) => {
                // The handoff (a message `started`, or the queue paused) is
                // the run's last event: what is held goes before it.
                let handoff = update.started.is_some() || update.queue.paused;
                let mut frames = if handoff { self.release(true) } else { Vec::new() };
                let mut f = json!({ "kind": "queue", "queue": super::queue::of(&update.queue) });
                if let Some(started) = &update.started {
                    f["started"] = json!(started);
                }
                frames.push(f);
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
            | Payload::FilesystemRequest(_) => Vec::new(),
        }
    }
}

fn text_frame(reasoning: bool, text: &str) -> Value {
    json!({ "kind": if reasoning { "reasoning" } else { "text" }, "text": text })
}

/// Appends numbered frames to `out`.
pub fn encode(frames: &[(u64, Value)], after: u64, out: &mut Vec<u8>) {
    for (id, f) in frames.iter().filter(|(id, _)| *id > after) {
        Frame::data(&f.to_string()).id(*id).encode(out);
    }
}

/// `event: meta` with the run and thread (no id).
pub fn meta(run_id: &str, thread_id: &str, out: &mut Vec<u8>) {
    let data = json!({ "runId": run_id, "threadId": thread_id }).to_string();
    Frame::data(&data).event("meta").expect("a fixed name").encode(out);
}

/// The stream's last frame for a `run-finish`: `done` (a completed run, or
/// a cancelled one: agora's Stop is not a failure, and a client that
/// retries a failed stream must not retry it), or `error {code, message}`.
pub fn terminal(run_finish: &RunFinish, out: &mut Vec<u8>) {
    let status = run_finish.status.as_str();
    let reason = run_finish.reason.as_deref().unwrap_or_default();
    let (name, data) = match (status, reason) {
        ("completed" | "cancelled", _) => ("done", json!({})),
        (_, "quota_exceeded") => ("error", json!({ "code": reason, "message": "your budget for this period is spent" })),
        (_, "structured_output_invalid") => {
            ("error", json!({ "code": reason, "message": "the answer did not match the schema asked for" }))
        }
        (_, "output_rejected") => ("error", json!({ "code": reason, "message": "the output check refused the answer" })),
        _ => (
            "error",
            json!({ "code": "run_failed", "message": if reason.is_empty() { status.to_owned() } else { reason.to_owned() } }),
        ),
    };
    Frame::data(&data.to_string()).event(name).expect("fixed names").encode(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: Kind, agent: &str, rid: Option<&str>, payload: Value) -> Event {
        let mut e = Event::from_json(kind, "r", agent, 0, payload).unwrap();
        e.response_id = rid.map(str::to_owned);
        e
    }

    fn texts(frames: &[(u64, Value)]) -> Vec<(u64, String)> {
        frames.iter().map(|(i, f)| (*i, f["text"].as_str().unwrap_or(f["kind"].as_str().unwrap()).to_owned())).collect()
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
