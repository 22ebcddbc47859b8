//! A thread run as AG-UI events (`POST /ag-ui`'s answer and its re-attach,
//! `GET /ag-ui/threads/:id/runs/:runId`): the run's numbered events
//! ([`AguiMapper`], the same live and replayed) after the client's cursor,
//! each with its number as the SSE `id`, until the run finishes or waits for
//! a person.

use super::mapping::{self as agui, AguiMapper};
use crate::log::event::{Event, Payload};
use crate::feed::Framer;
use crate::wire::ids::ROOT_AGENT;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

#[derive(Serialize, Deserialize)]
pub struct AguiFrames {
    run: String,
    /// Events numbered at or below this were seen (`Last-Event-ID`).
    after: u64,
    /// A `resume`'s stream: the requests it answered. It shows the run
    /// after the last of them, under a `RUN_STARTED` of its own.
    resumed: bool,
    unseen: HashSet<String>,
    mapper: AguiMapper,
    live: bool,
    done: bool,
}

impl AguiFrames {
    pub fn new(thread: &str, run: &str, after: u64, resume: &[String]) -> AguiFrames {
        AguiFrames {
            run: run.to_owned(),
            after,
            resumed: !resume.is_empty(),
            unseen: resume.iter().cloned().collect(),
            mapper: {
                let mut m = AguiMapper::new(thread, run, ROOT_AGENT);
                m.answered(resume);
                m
            },
            live: false,
            done: false,
        }
    }

    fn event(&mut self, data: &str, out: &mut Vec<u8>) {
        if self.done {
            return;
        }
        let Ok(ev) = serde_json::from_str::<Event>(data) else { return };
        if ev.run_id != self.run {
            return;
        }
        let gated = !self.unseen.is_empty();
        if let Payload::ConfirmationRequest(req) = &ev.payload {
            self.unseen.remove(&req.request_id);
        }
        for (id, e) in self.mapper.map(&ev) {
            if !gated && id > self.after {
                e.encode(Some(id), out);
            }
        }
        if self.mapper.finished() {
            self.done = true;
        } else if self.live && self.unseen.is_empty() && self.mapper.waiting() {
            self.pause(out);
        }
    }

    /// The run waits for a person: the stream ends with the interrupts.
    fn pause(&mut self, out: &mut Vec<u8>) {
        for e in self.mapper.pause() {
            e.encode(None, out);
        }
        self.done = true;
    }
}

impl Framer for AguiFrames {
    const MOVES: bool = true;

    fn begin(&mut self, _gen: u64, _after: u64, _high: u64, out: &mut Vec<u8>) {
        if self.resumed {
            self.mapper.run_started().encode(None, out);
        }
    }

    fn durable(&mut self, _seq: u64, data: &str, out: &mut Vec<u8>) {
        self.event(data, out);
    }

    fn live(&mut self, data: &str, out: &mut Vec<u8>) {
        self.event(data, out);
    }

    fn caught_up(&mut self, out: &mut Vec<u8>) {
        self.live = true;
        if !self.done && self.unseen.is_empty() && self.mapper.waiting() {
            self.pause(out);
        }
    }

    fn keepalive(&mut self, _now: i64, _random: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(agui::PING);
    }

    fn done(&self, _now: i64) -> bool {
        self.done
    }

    fn save(&self) -> Option<String> {
        Some(crate::feed::save_tagged("agui", self))
    }

    /// Takes over a state of a stream of the same run, else nothing
    /// changes.
    fn restore(&mut self, state: &str) -> bool {
        let Some(agui) = crate::feed::restore_tagged::<AguiFrames>("agui", state) else { return false };
        if agui.run != self.run {
            return false;
        }
        *self = agui;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::{assert_moves_unchanged, event_json as ev, feed_message as feed};
    use crate::log::event::Kind;
    use serde_json::json;

    /// A run's AG-UI stream moved after any message (saved, and taken over
    /// by a stream opened as the route opens one) writes what it would have
    /// written unmoved, byte for byte: text, a sub-agent, tool calls, and
    /// the interrupt it pauses on; from the start, and from a cursor.
    #[test]
    fn a_moved_agui_stream_goes_on_as_if_it_had_not_moved() {
        let root = ROOT_AGENT;
        let messages: Vec<(bool, String)> = vec![
            (true, ev(Kind::RunStart, root, None, json!({"messageId": "m1"}))),
            (true, ev(Kind::StepStart, root, None, json!({}))),
            (false, ev(Kind::TextDelta, root, Some("s"), json!({"text": "He"}))),
            (false, ev(Kind::TextDelta, root, Some("s"), json!({"text": "llo"}))),
            (true, ev(Kind::TextBlock, root, Some("s"), json!({"text": "Hello", "parts": [2, 3]}))),
            (true, ev(Kind::AgentSpawned, "sub", None, json!({"parentId": root, "role": "helper"}))),
            (false, ev(Kind::TextDelta, "sub", Some("x"), json!({"text": "sub text"}))),
            (true, ev(Kind::AgentCompleted, "sub", None, json!({"role": "helper", "result": "ok"}))),
            (true, ev(Kind::ToolInputStart, root, None, json!({"toolCallId": "a", "toolName": "del"}))),
            (true, ev(Kind::StepFinish, root, None, json!({}))),
            (true, ev(Kind::ToolCall, root, None, json!({"toolCallId": "a", "toolName": "del", "args": {}}))),
            (
                true,
                ev(
                    Kind::ConfirmationRequest,
                    root,
                    None,
                    json!({"requestId": "q", "toolCallId": "a", "toolName": "del", "severity": "warning", "inputType": "approval", "message": "ok?"}),
                ),
            ),
        ];
        for after in [0, 4] {
            let whole = assert_moves_unchanged(|| AguiFrames::new("t", "t.r", after, &[]), &messages, feed);
            assert!(whole.contains("RUN_FINISHED") && whole.contains("sub text"), "{whole}");
        }
        let state = AguiFrames::new("t", "t.r", 0, &[]).save().unwrap();
        assert!(!AguiFrames::new("t", "t.other", 0, &[]).restore(&state), "another run's");
        assert!(!AguiFrames::new("t", "t.r", 0, &[]).restore(r#"{"ui":{}}"#), "another protocol's");
    }
}
