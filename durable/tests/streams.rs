//! The standalone Durable Stream's decisions, natively, with injected time:
//! create/append/read, JSON mode, producers, closing, long-poll and SSE
//! turns, ETag, TTL (lazy expiry), forks and soft delete.

use threadline_durable::feed::Feed;
use threadline_durable::protocols::durable_streams::server::feeds::{PollFeed, SseFeed};
use threadline_durable::protocols::durable_streams::server::log::MemoryLog;
use threadline_durable::protocols::durable_streams::server::{
    AppendRequest, CreateRequest, ReadPlan, ReadRequest, Streams,
};
use threadline_durable::Reply;

fn create(s: &mut Streams<MemoryLog>, ct: &str, body: &str, now: i64) -> Reply {
    let req = CreateRequest {
        path: "/v1/stream/a".into(),
        origin: "http://h".into(),
        content_type: Some(ct.into()),
        body: body.as_bytes().to_vec(),
        ..CreateRequest::default()
    };
    match s.prepare_create(req, now) {
        Ok(p) => s.finish_create(p, None, now),
        Err(r) => r,
    }
}

fn append(s: &mut Streams<MemoryLog>, ct: &str, body: &str, now: i64) -> Reply {
    s.append(
        AppendRequest { content_type: Some(ct.into()), body: body.as_bytes().to_vec(), ..AppendRequest::default() },
        now,
    )
    .0
}

fn read(s: &mut Streams<MemoryLog>, offset: &str, live: Option<&str>, now: i64) -> ReadPlan {
    let req = ReadRequest {
        path: "/v1/stream/a".into(),
        offsets: vec![offset.into()],
        live: live.map(str::to_owned),
        ..ReadRequest::default()
    };
    s.read(&req, now)
}

fn reply(p: ReadPlan) -> Reply {
    match p {
        ReadPlan::Reply(r) => r,
        other => panic!("expected a reply, got {other:?}"),
    }
}

#[test]
fn create_append_read_and_resume() {
    let mut s = Streams::new(MemoryLog::default());
    let r = create(&mut s, "text/plain", "ab", 0);
    assert_eq!(r.status, 201);
    assert_eq!(r.get("location"), Some("http://h/v1/stream/a"));
    let first = r.get("stream-next-offset").unwrap().to_owned();
    assert_eq!(create(&mut s, "text/plain", "", 1).status, 200, "same config: idempotent");
    assert_eq!(create(&mut s, "application/json", "", 1).status, 409, "other config");
    assert_eq!(append(&mut s, "text/plain", "cd", 2).status, 204);
    assert_eq!(append(&mut s, "application/json", "1", 2).status, 409, "content type mismatch");
    assert_eq!(append(&mut s, "text/plain", "", 2).status, 400, "empty body");
    let all = reply(read(&mut s, "-1", None, 3));
    assert_eq!(all.body, b"abcd");
    assert_eq!(all.get("stream-up-to-date"), Some("true"));
    let rest = reply(read(&mut s, &first, None, 3));
    assert_eq!(rest.body, b"cd");
    assert!(rest.get("stream-next-offset").unwrap() > first.as_str());
    // ETag: the same read again is 304.
    let tag = rest.get("etag").unwrap().to_owned();
    let req = ReadRequest {
        path: "/v1/stream/a".into(),
        offsets: vec![first.clone()],
        if_none_match: Some(tag),
        ..ReadRequest::default()
    };
    assert_eq!(reply(s.read(&req, 4)).status, 304);
    assert_eq!(reply(read(&mut s, "junk", None, 3)).status, 400);
}

#[test]
fn json_mode_flattens_arrays() {
    let mut s = Streams::new(MemoryLog::default());
    create(&mut s, "application/json", "[]", 0);
    assert_eq!(append(&mut s, "application/json", "[1,{\"a\":2}]", 1).status, 204);
    assert_eq!(append(&mut s, "application/json", "3", 1).status, 204);
    assert_eq!(append(&mut s, "application/json", "[]", 1).status, 400);
    assert_eq!(append(&mut s, "application/json", "{x", 1).status, 400);
    assert_eq!(reply(read(&mut s, "-1", None, 2)).body, b"[1,{\"a\":2},3]");
}

#[test]
fn producers_close_and_long_poll() {
    let mut s = Streams::new(MemoryLog::default());
    create(&mut s, "text/plain", "", 0);
    let p = |epoch: &str, seq: &str, body: &str, closed: bool| AppendRequest {
        content_type: Some("text/plain".into()),
        producer_id: Some("w".into()),
        producer_epoch: Some(epoch.into()),
        producer_seq: Some(seq.into()),
        closed,
        body: body.as_bytes().to_vec(),
        ..AppendRequest::default()
    };
    assert_eq!(s.append(p("0", "0", "x", false), 1).0.status, 200);
    assert_eq!(s.append(p("0", "0", "x", false), 1).0.status, 204, "duplicate");
    assert_eq!(s.append(p("0", "2", "y", false), 1).0.status, 409, "gap");
    assert_eq!(s.append(p("1", "1", "y", false), 1).0.status, 400, "new epoch starts at 0");
    assert_eq!(s.append(p("1", "0", "y", false), 1).0.status, 200);
    assert_eq!(s.append(p("0", "1", "z", false), 1).0.status, 403, "stale epoch");
    let tail = reply(read(&mut s, "-1", None, 2)).get("stream-next-offset").unwrap().to_owned();
    assert_eq!(reply(read(&mut s, "-1", None, 2)).body, b"xy");
    // Caught up: a long-poll waits; nothing came, so 204 at the same offset.
    let ReadPlan::Wait { after } = read(&mut s, &tail, Some("long-poll"), 3) else { panic!("should wait") };
    let req = ReadRequest { path: "/v1/stream/a".into(), offsets: vec![tail.clone()], ..ReadRequest::default() };
    let mut poll = PollFeed::new(req);
    let step = poll.on_message(&s.batch(after, true, 3).encode(), 3, 1);
    assert_eq!((step.page, poll.reply()), (None, None), "nothing new: it waits");
    let timed_out = poll.timeout(4, 1).unwrap();
    assert_eq!((timed_out.status, timed_out.get("stream-next-offset")), (204, Some(tail.as_str())));
    // Close with the producer's last append; its retry is a duplicate, others learn it is closed.
    assert_eq!(s.append(p("1", "1", "end", true), 5).0.get("stream-closed"), Some("true"));
    assert_eq!(s.append(p("1", "1", "end", true), 5).0.status, 204);
    assert_eq!(append(&mut s, "text/plain", "late", 6).status, 409);
    let closed = reply(read(&mut s, "-1", None, 7));
    assert_eq!(closed.get("stream-closed"), Some("true"));
}

/// A live SSE reader as the Worker relays it: the object's first batch,
/// then a batch per append, framed by the feed.
#[test]
fn sse_turns_pair_data_with_control_and_end_when_closed() {
    let mut s = Streams::new(MemoryLog::default());
    create(&mut s, "text/plain", "a", 0);
    append(&mut s, "text/plain", "b\nc", 1);
    let ReadPlan::Sse(st) = read(&mut s, "-1", Some("sse"), 2) else { panic!("sse") };
    let mut feed = SseFeed::new(None);
    let first = feed.on_message(&s.batch(st.after, true, 2).encode(), 3, 1);
    let text = String::from_utf8(first.out).unwrap();
    assert_eq!(text.matches("event: data").count(), 2);
    assert_eq!(text.matches("event: control").count(), 2);
    assert!(text.contains("data:b\ndata:c\n"));
    assert!(!first.done && first.page.is_none());
    // Quiet: a keep-alive tick is a lone control event.
    let tick = String::from_utf8(feed.on_tick(4, 1).out).unwrap();
    assert_eq!((tick.matches("event: control").count(), tick.matches("event: data").count()), (1, 0));
    // Closing is an append with no body: its batch ends the stream.
    let prev = s.tail().unwrap();
    s.append(AppendRequest { closed: true, ..AppendRequest::default() }, 4);
    let end = feed.on_message(&s.batch(prev, false, 5).encode(), 5, 1);
    assert!(end.done);
    assert!(String::from_utf8(end.out).unwrap().contains("\"streamClosed\":true"));
    // Binary streams travel as base64.
    let mut b = Streams::new(MemoryLog::default());
    create(&mut b, "application/octet-stream", "\u{1}", 0);
    let ReadPlan::Sse(st) = read(&mut b, "-1", Some("sse"), 1) else { panic!("sse") };
    assert!(st.base64);
    let mut feed = SseFeed::new(None);
    let out = feed.on_message(&b.batch(st.after, true, 2).encode(), 2, 1).out;
    assert!(String::from_utf8(out).unwrap().contains("data:AQ==\n"));
}

/// Appends that land while a reader is still paging through a long stream
/// are neither lost nor doubled: their batch starts past the reader, who
/// asks for pages until it reaches them.
#[test]
fn a_reader_behind_pages_to_the_tail_and_sees_each_message_once() {
    let mut s = Streams::new(MemoryLog::default());
    let chunk = "x".repeat(600_000);
    create(&mut s, "text/plain", &chunk, 0);
    for i in 1..6 {
        append(&mut s, "text/plain", &chunk, i);
    }
    let ReadPlan::Sse(st) = read(&mut s, "-1", Some("sse"), 10) else { panic!("sse") };
    let mut feed = SseFeed::new(None);
    let mut out = Vec::new();
    let mut step = feed.on_message(&s.batch(st.after, true, 10).encode(), 10, 1);
    out.extend_from_slice(&step.out);
    // An append while the reader is behind: its batch is a gap, held back.
    let prev = s.tail().unwrap();
    append(&mut s, "text/plain", "live", 11);
    let live = feed.on_message(&s.batch(prev, false, 11).encode(), 11, 1);
    assert!(live.out.is_empty() && live.page.is_none(), "a gap while a page is pending writes nothing");
    let mut pages = 0;
    while let Some(p) = step.page.take() {
        pages += 1;
        let after = threadline_durable::protocols::durable_streams::server::feeds::parse_page_request(&p).unwrap();
        step = feed.on_message(&s.batch(after, true, 12).encode(), 12, 1);
        out.extend_from_slice(&step.out);
    }
    assert!(pages >= 1, "the stream is read in windows");
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.matches("event: data").count(), 7, "six chunks and the live append, once each");
    let tail = s.tail().unwrap().to_string();
    let last_control = text.rsplit("event: control\n").next().unwrap();
    assert!(last_control.contains(&tail) && last_control.contains("\"upToDate\":true"), "{last_control}");
}

#[test]
fn ttl_is_enforced_lazily_and_slides_on_access() {
    let mut s = Streams::new(MemoryLog::default());
    let req = CreateRequest {
        path: "/v1/stream/a".into(),
        content_type: Some("text/plain".into()),
        ttl: Some("2".into()),
        ..CreateRequest::default()
    };
    let p = s.prepare_create(req, 0).unwrap();
    assert_eq!(s.finish_create(p, None, 0).status, 201);
    assert_eq!(s.deadline(), Some(2000));
    assert_eq!(append(&mut s, "text/plain", "x", 1500).status, 204, "a write renews the TTL");
    assert_eq!(s.head(3000).status, 200);
    assert_eq!(s.head(3600).status, 404, "expired: gone on the next access");
    for (ttl, ok) in [("60", true), ("0060", false), ("+60", false), ("1e3", false), ("6.5", false)] {
        let mut s = Streams::new(MemoryLog::default());
        let req = CreateRequest { path: "/v1/stream/a".into(), ttl: Some(ttl.into()), ..CreateRequest::default() };
        assert_eq!(s.prepare_create(req, 0).is_ok(), ok, "{ttl}");
    }
}

#[test]
fn forks_copy_their_prefix_and_hold_their_source() {
    let mut src = Streams::new(MemoryLog::default());
    create(&mut src, "text/plain", "first", 0);
    let mid = reply(read(&mut src, "-1", None, 1)).get("stream-next-offset").unwrap().to_owned();
    append(&mut src, "text/plain", "second", 1);
    let fork_req = CreateRequest {
        path: "/v1/stream/f".into(),
        forked_from: Some("/v1/stream/a".into()),
        fork_offset: Some(mid.clone()),
        ..CreateRequest::default()
    };
    let mut fork = Streams::new(MemoryLog::default());
    let prepared = fork.prepare_create(fork_req, 2).unwrap();
    let source = src.fork_source(prepared.fork.as_ref().unwrap(), 2).unwrap();
    assert_eq!(fork.finish_create(prepared, Some(source), 2).status, 201);
    let req = ReadRequest { path: "/v1/stream/f".into(), offsets: vec!["-1".into()], ..ReadRequest::default() };
    assert_eq!(reply(fork.read(&req, 3)).body, b"first");
    // The source is only soft-deleted while its fork lives.
    assert_eq!(src.delete(4).status, 204);
    assert_eq!(reply(read(&mut src, "-1", None, 5)).status, 410);
    assert_eq!(src.delete(5).status, 410);
    assert_eq!(fork.delete(6).status, 204);
    assert_eq!(fork.take_release().as_deref(), Some("/v1/stream/a"));
    src.release().unwrap();
    assert_eq!(reply(read(&mut src, "-1", None, 7)).status, 404, "gone with its last fork");
}

#[test]
fn a_long_source_is_forked_page_by_page_and_reads_the_same() {
    use threadline_durable::protocols::durable_streams::server::FORK_PAGE_BYTES;
    let mut src = Streams::new(MemoryLog::default());
    create(&mut src, "text/plain", "", 0);
    let chunk = "x".repeat(300_000);
    for _ in 0..10 {
        append(&mut src, "text/plain", &chunk, 1);
    }
    let fork_req = CreateRequest {
        path: "/v1/stream/f".into(),
        forked_from: Some("/v1/stream/a".into()),
        ..CreateRequest::default()
    };
    let mut fork = Streams::new(MemoryLog::default());
    let prepared = fork.prepare_create(fork_req.clone(), 2).unwrap();
    let mut ask = prepared.fork.clone().unwrap();
    let mut page = src.fork_source(&ask, 2).unwrap();
    let mut pages = 1;
    fork.begin_fork_copy().unwrap();
    while page.more {
        let bytes: usize = page.messages.iter().map(|(_, d)| d.len() * 3 / 4).sum();
        assert!(bytes <= FORK_PAGE_BYTES + 300_000, "a page holds about one page: {bytes}");
        fork.copy_fork_page(&page).unwrap();
        // Meanwhile the path is taken.
        assert_eq!(fork.prepare_create(fork_req.clone(), 2).unwrap_err().status, 409);
        ask.after = page.messages.last().map(|(o, _)| *o);
        page = src.fork_source(&ask, 2).unwrap();
        pages += 1;
    }
    assert!(pages > 3, "{pages} pages");
    assert_eq!(fork.finish_create(prepared, Some(page), 2).status, 201);
    assert_eq!(read_all(&mut fork, "/v1/stream/f"), read_all(&mut src, "/v1/stream/a"), "the fork reads as its source");
    assert_eq!(read_all(&mut fork, "/v1/stream/f").len(), 3_000_000, "every byte, once");
    // One reference was taken, by the first page.
    assert_eq!(src.delete(4).status, 204);
    assert_eq!(reply(read(&mut src, "-1", None, 5)).status, 410, "soft-deleted while its fork lives");
}

/// A whole stream, read catch-up page by catch-up page.
fn read_all(s: &mut Streams<MemoryLog>, path: &str) -> Vec<u8> {
    let mut body = Vec::new();
    let mut offset = "-1".to_owned();
    loop {
        let req = ReadRequest { path: path.into(), offsets: vec![offset.clone()], ..ReadRequest::default() };
        let r = reply(s.read(&req, 3));
        body.extend_from_slice(&r.body);
        offset = r.get("stream-next-offset").unwrap().to_owned();
        if r.get("stream-up-to-date") == Some("true") {
            return body;
        }
    }
}
