//! The events route (`GET /instance-ai/events/:threadId`): every durable
//! event with its seq as the SSE `id:`, live events without one, a `: ping`
//! comment when quiet (`docs/protocols/000-instance-ai.md`).

use super::Framer;
use crate::sse::{Frame, PING};

#[derive(Debug, Default)]
pub struct Events;

impl Framer for Events {
    fn durable(&mut self, seq: u64, data: &str, out: &mut Vec<u8>) {
        Frame::data(data).id(seq).encode(out);
    }

    fn live(&mut self, data: &str, out: &mut Vec<u8>) {
        Frame::data(data).encode(out);
    }

    fn keepalive(&mut self, _now: i64, _random: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(PING);
    }
}
