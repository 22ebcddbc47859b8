//! A thread run as AG-UI events (`POST /ag-ui`'s answer and its re-attach,
//! `GET /ag-ui/threads/:id/runs/:runId`): the run's numbered events
//! ([`AguiMapper`], the same live and replayed) after the client's cursor,
//! each with its number as the SSE `id`, until the run finishes or waits for
//! a person.

use super::mapping::{self as agui, AguiMapper};
use crate::log::event::{Event, Payload};
use crate::feed::Framer;
use crate::wire::ids::ROOT_AGENT;
use std::collections::HashSet;

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
}
