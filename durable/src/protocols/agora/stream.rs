//! A run's stream in agora's envelope (`GET /agent/chat/:runId/stream`, and
//! the answer of `POST /agent/chat`): `event: meta`, the run's frames
//! numbered by their position in the run, then `done` or `error`
//! (`docs/protocols/agora-streaming-and-http.md`, "The SSE envelope"). The frames are the
//! core's `runstream` mapping, the same live and replayed.

use super::mapping::{self as runstream, FrameMapper};
use crate::log::event::{Event, Payload};
use crate::feed::Framer;
use crate::wire::ids::ROOT_AGENT;
use crate::wire::sse::PING;

/// A run stream's response headers (the SSE set, agora's cache rule and ids).
pub fn headers(thread_id: &str, run_id: &str) -> Vec<(&'static str, String)> {
    let mut headers = crate::wire::sse::headers();
    for (k, v) in
        [("cache-control", "no-cache, no-transform"), ("x-agent-run-id", run_id), ("x-agent-thread-id", thread_id)]
    {
        match headers.iter_mut().find(|(n, _)| *n == k) {
            Some(slot) => slot.1 = v.to_owned(),
            None => headers.push((k, v.to_owned())),
        }
    }
    headers
}

/// A [`RunFrames`]' state as it travels: run, thread, cursor, the mapper's
/// ([`runstream::Saved`]), finished.
type Saved = (String, String, u64, runstream::Saved, bool);

/// A run's agora stream: its numbered frames from a cursor. Its whole state
/// (the mapper's included) travels as [`Saved`], so it moves between the
/// object and a relay at a frame boundary.
pub struct RunFrames {
    run_id: String,
    thread_id: String,
    /// Frames numbered at or below this were seen (`?after=` / `Last-Event-ID`).
    after: u64,
    mapper: FrameMapper,
    finished: bool,
}

impl RunFrames {
    pub fn new(thread_id: &str, run_id: &str, after: u64) -> RunFrames {
        RunFrames {
            run_id: run_id.to_owned(),
            thread_id: thread_id.to_owned(),
            after,
            mapper: FrameMapper::new(ROOT_AGENT),
            finished: false,
        }
    }

    fn event(&mut self, data: &str, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        let Ok(ev) = serde_json::from_str::<Event>(data) else { return };
        if ev.run_id != self.run_id {
            return;
        }
        if let Payload::RunFinish(fin) = &ev.payload {
            runstream::encode(&self.mapper.finish(fin), self.after, out);
            runstream::terminal(fin, out);
            self.finished = true;
        } else {
            runstream::encode(&self.mapper.map(&ev), self.after, out);
        }
    }
}

impl Framer for RunFrames {
    const MOVES: bool = true;

    fn begin(&mut self, _gen: u64, _after: u64, _high: u64, out: &mut Vec<u8>) {
        runstream::meta(&self.run_id, &self.thread_id, out);
    }

    fn durable(&mut self, _seq: u64, data: &str, out: &mut Vec<u8>) {
        self.event(data, out);
    }

    fn live(&mut self, data: &str, out: &mut Vec<u8>) {
        self.event(data, out);
    }

    fn keepalive(&mut self, _now: i64, _random: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(PING);
    }

    fn done(&self, _now: i64) -> bool {
        self.finished
    }

    fn save(&self) -> Option<String> {
        let saved: Saved = (self.run_id.clone(), self.thread_id.clone(), self.after, self.mapper.saved(), self.finished);
        Some(crate::feed::save_tagged("agora", &saved))
    }

    /// Takes over a state of a stream of the same run, else nothing
    /// changes.
    fn restore(&mut self, state: &str) -> bool {
        let Some((run_id, thread_id, after, mapper, finished)) = crate::feed::restore_tagged::<Saved>("agora", state)
        else {
            return false;
        };
        if run_id != self.run_id || thread_id != self.thread_id {
            return false;
        }
        *self = RunFrames { run_id, thread_id, after, mapper: FrameMapper::from_saved(mapper), finished };
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::{assert_moves_unchanged, event_json as ev, feed_message as feed};
    use crate::log::event::Kind;
    use serde_json::json;

    /// A run's agora stream moved after any message (saved, and taken over
    /// by a stream opened as the route opens one) writes what it would have
    /// written unmoved, byte for byte: its numbered frames, a step's finish
    /// (with a cost) and a title held until the step's tools ran, an
    /// approval, a denial (its call's error not repeated) and the run's
    /// end; from the start, and from a cursor.
    #[test]
    fn a_moved_agora_stream_goes_on_as_if_it_had_not_moved() {
        let root = ROOT_AGENT;
        let messages: Vec<(bool, String)> = vec![
            (true, ev(Kind::RunStart, root, None, json!({"messageId": "m1"}))),
            (true, ev(Kind::StepStart, root, None, json!({}))),
            (false, ev(Kind::TextDelta, root, Some("s"), json!({"text": "He"}))),
            (false, ev(Kind::TextDelta, root, Some("s"), json!({"text": "llo"}))),
            (true, ev(Kind::TextBlock, root, Some("s"), json!({"text": "Hello", "parts": [2, 3]}))),
            (true, ev(Kind::ToolCall, root, None, json!({"toolCallId": "a", "toolName": "pay", "args": {"n": 1}}))),
            (
                true,
                ev(
                    Kind::StepFinish,
                    root,
                    None,
                    json!({"usage": {"promptTokens": 3, "completionTokens": 4}, "costUsd": 0.1 + 0.2}),
                ),
            ),
            (true, ev(Kind::ThreadTitleUpdated, root, None, json!({"title": "Paying"}))),
            (
                true,
                ev(
                    Kind::ConfirmationRequest,
                    root,
                    None,
                    json!({"requestId": "q", "toolCallId": "a", "toolName": "pay", "severity": "warning", "inputType": "approval", "message": "ok?"}),
                ),
            ),
            (true, ev(Kind::ToolResult, root, None, json!({"toolCallId": "a", "result": {"ok": true}}))),
            (
                true,
                ev(
                    Kind::ConfirmationRequest,
                    root,
                    None,
                    json!({"requestId": "q2", "toolCallId": "b", "toolName": "wipe", "severity": "warning", "inputType": "approval", "message": "ok?"}),
                ),
            ),
            (
                true,
                ev(
                    Kind::ConfirmationSettled,
                    root,
                    None,
                    json!({"requestId": "q2", "toolCallId": "b", "toolName": "wipe", "status": "denied"}),
                ),
            ),
            // The denied call's error is the denial already sent.
            (true, ev(Kind::ToolError, root, None, json!({"toolCallId": "b", "error": "denied by a person"}))),
            // A call announced before text: its arrival does not end that text.
            (true, ev(Kind::ToolInputStart, root, None, json!({"toolCallId": "c", "toolName": "look"}))),
            (false, ev(Kind::TextDelta, root, Some("w"), json!({"text": "Wa"}))),
            (true, ev(Kind::ToolCall, root, None, json!({"toolCallId": "c", "toolName": "look", "args": {}}))),
            (true, ev(Kind::TextBlock, root, Some("w"), json!({"text": "Wait", "parts": [2, 2]}))),
            (false, ev(Kind::TextDelta, root, Some("u"), json!({"text": "Paid"}))),
            (true, ev(Kind::RunFinish, root, None, json!({"status": "completed"}))),
        ];
        for after in [0, 3] {
            let whole = assert_moves_unchanged(|| RunFrames::new("t", "t.r", after), &messages, feed);
            assert!(whole.contains("Paying") && whole.contains("Paid") && whole.contains("costUsd"), "{whole}");
            assert!(whole.contains("tool-output-denied") && !whole.contains("denied by a person"), "{whole}");
            assert_eq!(whole.matches("\"Wa\"").count(), 1, "{whole}");
        }
        let state = RunFrames::new("t", "t.r", 0).save().unwrap();
        assert!(!RunFrames::new("t", "t.other", 0).restore(&state), "another run's");
        assert!(!RunFrames::new("t", "t.r", 0).restore(r#"{"agui":{}}"#), "another protocol's");
        let mangled = state.replacen(",0],false]", ",-1],false]", 1);
        assert!(mangled != state && !RunFrames::new("t", "t.r", 0).restore(&mangled), "a mangled one");
    }
}
