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
}
