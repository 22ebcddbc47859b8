//! The inbox's changes in its readers' frames: SSE with each change's seq
//! as its `id:` (`Last-Event-ID` resumes after it), and a Durable Streams
//! catch-up read (live Durable Streams reads are `durable_streams`' views,
//! whose records are these changes).

use crate::feed::Framer;
use crate::protocols::durable_streams::views::{self, Position};
use crate::storage::store::Record;
use crate::wire::reply::Reply;
use crate::wire::sse;
use serde_json::Value;

/// SSE: one `event: thread` per change, its row as data, its seq as id.
pub struct Changes;

impl Framer for Changes {
    const PURE: bool = true;

    fn durable(&mut self, seq: u64, data: &str, out: &mut Vec<u8>) {
        // A row's JSON holds no line break: JSON escapes them.
        if let Ok(frame) = sse::Frame::data(data).id(seq).event("thread") {
            frame.encode(out);
        }
    }

    /// The inbox has no live-only items.
    fn live(&mut self, _data: &str, _out: &mut Vec<u8>) {}

    fn keepalive(&mut self, _now: i64, _random: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(sse::PING);
    }
}

/// The directory's answer to a catch-up read (`Op::Changes`).
#[derive(serde::Deserialize)]
pub struct CatchUp {
    /// Each `[seq, row]`, in order.
    pub changes: Vec<(u64, Value)>,
    pub after: u64,
    pub high: u64,
}

/// A catch-up read: the changes after `after` as a JSON array, at the
/// offset of the last, up to date when it reached `high`.
pub fn catch_up(read: &CatchUp) -> Reply {
    let records: Vec<Record> = read
        .changes
        .iter()
        .map(|(seq, row)| Record { seq: *seq, run_id: String::new(), kind: crate::log::event::Kind::RunStart, data: row.to_string() })
        .collect();
    let (after, high) = (read.after, read.high);
    let seq = records.last().map_or(after.min(high), |r| r.seq);
    let pos = Position { gen: crate::directory::inbox::GENERATION, seq, up_to_date: seq >= high, closed: false };
    views::batch_reply(&records, pos, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_one_sse_event_with_its_seq() {
        let mut out = Vec::new();
        Changes.durable(7, r#"{"threadId":"t1","state":"running"}"#, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "event: thread\nid: 7\ndata: {\"threadId\":\"t1\",\"state\":\"running\"}\n\n"
        );
    }

    #[test]
    fn a_catch_up_read_is_a_json_array_at_its_last_offset() {
        let read = |v: Value| serde_json::from_value::<CatchUp>(v).unwrap();
        let r = catch_up(&read(serde_json::json!({"changes": [[4, {"threadId": "a"}], [6, {"threadId": "b"}]], "after": 3, "high": 9})));
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body, serde_json::json!([{"threadId": "a"}, {"threadId": "b"}]));
        let next = r.headers.iter().find(|(k, _)| *k == crate::streams::wire::NEXT_OFFSET).unwrap();
        assert_eq!(next.1, super::super::offset(6));
        assert!(r.headers.iter().all(|(k, _)| *k != crate::streams::wire::UP_TO_DATE), "6 < 9: more to read");
        let done = catch_up(&read(serde_json::json!({"changes": [], "after": 9, "high": 9})));
        assert!(done.headers.iter().any(|(k, v)| *k == crate::streams::wire::UP_TO_DATE && v == "true"));
    }
}
