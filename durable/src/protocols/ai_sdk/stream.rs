//! A run as the AI SDK's UI message stream (`POST /api/chat`'s answer,
//! `GET /api/chat/:id/stream`): `start {messageId: runId}`, the run's
//! chunks ([`UiMapper`], the same live and replayed), then `data: [DONE]`
//! once the run finished or waits for a person.

use super::mapping::{self as uistream, UiMapper};
use crate::log::event::Event;
use crate::feed::Framer;
use crate::wire::ids::ROOT_AGENT;

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
}
