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
use serde::{Deserialize, Serialize};

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

#[derive(Serialize, Deserialize)]
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

/// An agora run stream's state between two messages ([`Framer::save`]).
#[derive(Serialize)]
struct Saving<'a> {
    agora: &'a RunFrames,
}

#[derive(Deserialize)]
struct Saved {
    agora: RunFrames,
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
        Some(serde_json::to_string(&Saving { agora: self }).expect("an agora stream's state serialises"))
    }

    /// Takes over a state of a stream of the same run, else nothing
    /// changes.
    fn restore(&mut self, state: &str) -> bool {
        let Ok(Saved { agora }) = serde_json::from_str::<Saved>(state) else { return false };
        if agora.run_id != self.run_id || agora.thread_id != self.thread_id {
            return false;
        }
        *self = agora;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::assert_moves_unchanged;
    use crate::log::event::Kind;
    use serde_json::json;

    fn ev(kind: Kind, rid: Option<&str>, payload: serde_json::Value) -> String {
        let mut e = Event::from_json(kind, "t.r", ROOT_AGENT, 0, payload).unwrap();
        e.response_id = rid.map(str::to_owned);
        serde_json::to_string(&e).unwrap()
    }

    /// A run's agora stream moved after any message (saved, and taken over
    /// by a stream opened as the route opens one) writes what it would have
    /// written unmoved, byte for byte: its numbered frames, a step's finish
    /// and a title held until the step's tools ran, an approval and the
    /// run's end; from the start, and from a cursor.
    #[test]
    fn a_moved_agora_stream_goes_on_as_if_it_had_not_moved() {
        let messages: Vec<(bool, String)> = vec![
            (true, ev(Kind::RunStart, None, json!({"messageId": "m1"}))),
            (true, ev(Kind::StepStart, None, json!({}))),
            (false, ev(Kind::TextDelta, Some("s"), json!({"text": "He"}))),
            (false, ev(Kind::TextDelta, Some("s"), json!({"text": "llo"}))),
            (true, ev(Kind::TextBlock, Some("s"), json!({"text": "Hello", "parts": [2, 3]}))),
            (true, ev(Kind::ToolCall, None, json!({"toolCallId": "a", "toolName": "pay", "args": {"n": 1}}))),
            (true, ev(Kind::StepFinish, None, json!({"usage": {"promptTokens": 3, "completionTokens": 4}}))),
            (true, ev(Kind::ThreadTitleUpdated, None, json!({"title": "Paying"}))),
            (
                true,
                ev(
                    Kind::ConfirmationRequest,
                    None,
                    json!({"requestId": "q", "toolCallId": "a", "toolName": "pay", "severity": "warning", "inputType": "approval", "message": "ok?"}),
                ),
            ),
            (true, ev(Kind::ToolResult, None, json!({"toolCallId": "a", "result": {"ok": true}}))),
            (false, ev(Kind::TextDelta, Some("u"), json!({"text": "Paid"}))),
            (true, ev(Kind::RunFinish, None, json!({"status": "completed"}))),
        ];
        let feed = |f: &mut RunFrames, (durable, data): &(bool, String), seq: u64, out: &mut Vec<u8>| {
            if *durable {
                f.durable(seq, data, out)
            } else {
                f.live(data, out)
            }
        };
        for after in [0, 3] {
            let whole = assert_moves_unchanged(|| RunFrames::new("t", "t.r", after), &messages, feed);
            assert!(whole.contains("Paying") && whole.contains("Paid"), "{whole}");
        }
        let state = RunFrames::new("t", "t.r", 0).save().unwrap();
        assert!(!RunFrames::new("t", "t.other", 0).restore(&state), "another run's");
        assert!(!RunFrames::new("t", "t.r", 0).restore(r#"{"agui":{}}"#), "another protocol's");
    }
}
