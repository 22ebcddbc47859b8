//! A run as the AI SDK's UI message stream (`POST /api/chat`'s answer,
//! `GET /api/chat/:id/stream`): `start {messageId: runId}`, the run's
//! chunks ([`UiMapper`], the same live and replayed), then `data: [DONE]`
//! once the run finished or waits for a person.

use super::mapping::{self as uistream, UiMapper};
use crate::log::event::Event;
use crate::feed::Framer;
use crate::wire::ids::ROOT_AGENT;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
pub struct UiFrames {
    /// The run followed; `None` until the first event names it (the
    /// reconnect route asks the thread for its active run).
    run: Option<String>,
    mapper: UiMapper,
    started: bool,
    live: bool,
    done: bool,
}

impl UiFrames {
    /// A run's stream from its start, or (`continuing`) the rest of a
    /// message the client holds.
    pub fn new(run: Option<&str>, continuing: bool) -> UiFrames {
        let mapper = if continuing { UiMapper::continuing(ROOT_AGENT) } else { UiMapper::new(ROOT_AGENT) };
        UiFrames { run: run.map(str::to_owned), mapper, started: false, live: false, done: false }
    }

    fn start(&mut self, out: &mut Vec<u8>) {
        if let (false, Some(run)) = (self.started, &self.run) {
            UiMapper::start(run).encode(out);
            self.started = true;
        }
    }

    fn event(&mut self, data: &str, out: &mut Vec<u8>) {
        if self.done {
            return;
        }
        let Ok(ev) = serde_json::from_str::<Event>(data) else { return };
        match &self.run {
            Some(run) if *run != ev.run_id => return,
            Some(_) => {}
            None => self.run = Some(ev.run_id.clone()),
        }
        self.start(out);
        for chunk in self.mapper.map(&ev) {
            chunk.encode(out);
        }
        if self.mapper.finished() {
            self.end(out);
        } else if self.live && self.mapper.waiting() {
            self.pause(out);
        }
    }

    /// The run waits for a person: the stream ends; the client's answer (or
    /// a reconnect) continues the message.
    fn pause(&mut self, out: &mut Vec<u8>) {
        for chunk in self.mapper.pause() {
            chunk.encode(out);
        }
        self.end(out);
    }

    fn end(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(uistream::DONE);
        self.done = true;
    }
}

impl Framer for UiFrames {
    const MOVES: bool = true;

    fn begin(&mut self, _gen: u64, _after: u64, _high: u64, out: &mut Vec<u8>) {
        self.start(out);
    }

    fn durable(&mut self, _seq: u64, data: &str, out: &mut Vec<u8>) {
        self.event(data, out);
    }

    fn live(&mut self, data: &str, out: &mut Vec<u8>) {
        self.event(data, out);
    }

    fn caught_up(&mut self, out: &mut Vec<u8>) {
        self.live = true;
        if !self.done && self.mapper.waiting() {
            self.pause(out);
        }
    }

    fn keepalive(&mut self, _now: i64, _random: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(uistream::PING);
    }

    fn done(&self, _now: i64) -> bool {
        self.done
    }

    fn save(&self) -> Option<String> {
        Some(crate::feed::save_tagged("ui", self))
    }

    /// Takes over a state of a stream of the same run (or, for the
    /// reconnect route, which learns its run from the first event, of any
    /// run of the thread), else nothing changes.
    fn restore(&mut self, state: &str) -> bool {
        let Some(ui) = crate::feed::restore_tagged::<UiFrames>("ui", state) else { return false };
        if self.run.is_some() && ui.run.is_some() && self.run != ui.run {
            return false;
        }
        *self = ui;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::{assert_moves_unchanged, event_json as ev, feed_message as feed};
    use crate::log::event::Kind;
    use serde_json::json;

    /// A run's stream moved after any message (saved, and taken over by a
    /// stream opened as the route opens one) writes what it would have
    /// written unmoved, byte for byte: open text, tool calls, a sub-agent
    /// whose result is `null`, a pause for a person.
    #[test]
    fn a_moved_ui_stream_goes_on_as_if_it_had_not_moved() {
        let messages: Vec<(bool, String)> = vec![
            (true, ev(Kind::RunStart, ROOT_AGENT, None, json!({"messageId": "m", "messageGroupId": "g"}))),
            (true, ev(Kind::StepStart, ROOT_AGENT, None, json!({}))),
            (false, ev(Kind::TextDelta, ROOT_AGENT, Some("s"), json!({"text": "He"}))),
            (false, ev(Kind::TextDelta, ROOT_AGENT, Some("s"), json!({"text": "llo"}))),
            (true, ev(Kind::TextBlock, ROOT_AGENT, Some("s"), json!({"text": "Hello", "parts": [2, 3]}))),
            (true, ev(Kind::AgentSpawned, "sub", None, json!({"parentId": ROOT_AGENT, "role": "helper"}))),
            (true, ev(Kind::AgentCompleted, "sub", None, json!({"role": "helper", "result": null}))),
            (true, ev(Kind::ToolCall, ROOT_AGENT, None, json!({"toolCallId": "t1", "toolName": "n", "args": {"a": 1}}))),
            (true, ev(Kind::ToolResult, ROOT_AGENT, None, json!({"toolCallId": "t1", "result": {"ok": true}}))),
            (false, ev(Kind::TextDelta, ROOT_AGENT, Some("u"), json!({"text": "Now"}))),
            (true, ev(Kind::StepFinish, ROOT_AGENT, None, json!({}))),
            (true, ev(Kind::RunFinish, ROOT_AGENT, None, json!({"status": "completed"}))),
        ];
        let opens: [fn() -> UiFrames; 2] = [|| UiFrames::new(Some("t.r"), false), || UiFrames::new(None, false)];
        for open in opens {
            let whole = assert_moves_unchanged(open, &messages, feed);
            assert!(whole.ends_with(std::str::from_utf8(uistream::DONE).unwrap()), "{whole}");
        }
        // Another run's state, or another protocol's, is refused.
        let state = UiFrames::new(Some("t.r"), false).save().unwrap();
        assert!(!UiFrames::new(Some("t.other"), false).restore(&state));
        assert!(!UiFrames::new(Some("t.r"), false).restore(""), "Instance AI's state");
        assert!(!UiFrames::new(Some("t.r"), false).restore(r#"{"view":"durable_streams"}"#));
    }

    /// A stream that pauses for a person moves with what it waits on: the
    /// moved stream pauses where the unmoved one does.
    #[test]
    fn a_moved_ui_stream_pauses_where_it_would_have() {
        let ask = ev(Kind::ConfirmationRequest, ROOT_AGENT, None, json!({"requestId": "q", "toolCallId": "t1", "toolName": "n", "args": {}, "severity": "warning", "message": "ok?"}));
        let call = ev(Kind::ToolCall, ROOT_AGENT, None, json!({"toolCallId": "t1", "toolName": "n", "args": {}}));
        let finish = ev(Kind::StepFinish, ROOT_AGENT, None, json!({}));
        let mut whole = Vec::new();
        let mut unmoved = UiFrames::new(Some("t.r"), false);
        unmoved.caught_up(&mut whole);
        let mut moved = UiFrames::new(Some("t.r"), false);
        let mut out = Vec::new();
        moved.caught_up(&mut out);
        for (seq, data) in [(1, &call), (2, &ask)] {
            unmoved.durable(seq, data, &mut whole);
            moved.durable(seq, data, &mut out);
        }
        let mut after = UiFrames::new(Some("t.r"), false);
        assert!(after.restore(&moved.save().unwrap()));
        unmoved.durable(3, &finish, &mut whole);
        after.durable(3, &finish, &mut out);
        assert_eq!(out, whole);
        assert!(unmoved.done(0) && after.done(0), "both paused: {}", String::from_utf8_lossy(&whole));
    }
}
