//! # A standalone Durable Stream's server
//!
//! Over the shared wire ([`crate::streams`]: offsets, headers, producers),
//! one standalone stream's decisions (`/v1/stream/*`, one object per stream): create,
//! append, close, read (catch-up, long-poll, SSE), HEAD, DELETE, TTL and
//! forks ([`Streams`]); its storage ([`log`]); a request's steps at its
//! object ([`exchange`]); and its live reads across the hop ([`feeds`]).
//! Pure: the caller passes the time and the request's parts, and gets a
//! [`Reply`] (or a step to carry out).
//!
//! Invariants, each enforced where noted:
//! - persist, then notify: an append's message, its new tail and its
//!   producer state are written in one synchronous block before any reader
//!   is woken ([`Streams::append`]);
//! - a stream past its TTL or `Expires-At` is gone on the next access,
//!   whether or not the alarm has fired yet ([`Streams::live_meta`]);
//! - a stream with live forks is never removed, only soft-deleted (410),
//!   until its last fork releases it ([`Streams::delete`], [`Streams::release`]).

use self::log::{ClosedBy, Message, Meta, StreamLog};
use crate::streams::offset::{Offset, Start};
use crate::streams::producer::{self, Producer, Verdict};
use crate::streams::wire::{self, JsonError, Reply};
use crate::storage::db::StoreError;
use base64::Engine as _;

pub mod exchange;
pub mod feeds;
mod fork;
pub mod log;
pub use fork::{ForkRequest, ForkSource, FORK_PAGE_BYTES};
use serde::{Deserialize, Serialize};

/// Largest body an append or create takes: a message is one SQLite row,
/// and rows stop at 2 MB.
pub const MAX_BODY: usize = 1_900_000;
/// Most bytes one catch-up answer carries (at least one message).
pub const READ_WINDOW: usize = 2 * 1024 * 1024;
/// The only media type a JSON-mode stream stores.
const OCTET: &str = "application/octet-stream";

/// A stream's storage and the side effects its decisions leave for the shell.
pub struct Streams<L: StreamLog> {
    log: L,
    /// A source stream this one no longer reads (it was deleted or expired):
    /// the shell tells that source to drop one fork reference.
    release: Option<String>,
    /// A fork's inheritance is being copied, page by page: the stream does
    /// not exist yet, and another create of its path waits its turn (409).
    copying: bool,
}

/// Maps a storage failure to a 503: nothing was stored.
fn unavailable(e: StoreError) -> Reply {
    Reply::text(503, &format!("storage failed, nothing was stored: {e}"))
}

/// A create's request headers and body.
#[derive(Clone, Debug, Default)]
pub struct CreateRequest {
    pub path: String,
    /// The scheme and host the client reached (`http://host:port`), for `Location`.
    pub origin: String,
    pub content_type: Option<String>,
    pub ttl: Option<String>,
    pub expires_at: Option<String>,
    pub closed: bool,
    pub forked_from: Option<String>,
    pub fork_offset: Option<String>,
    pub fork_sub_offset: Option<String>,
    pub body: Vec<u8>,
}

/// A create checked and not yet answered: a fork first needs its source.
#[derive(Clone, Debug)]
pub struct PreparedCreate {
    req: CreateRequest,
    ttl_seconds: Option<u64>,
    expires_at_ms: Option<i64>,
    /// `Some` for a fork: the source path, offset and sub-offset to ask for.
    pub fork: Option<ForkRequest>,
}

/// An append's request headers and body.
#[derive(Clone, Debug, Default)]
pub struct AppendRequest {
    pub content_type: Option<String>,
    pub seq: Option<String>,
    pub closed: bool,
    pub producer_id: Option<String>,
    pub producer_epoch: Option<String>,
    pub producer_seq: Option<String>,
    pub body: Vec<u8>,
}

/// A read's query and conditional header.
#[derive(Clone, Debug, Default)]
pub struct ReadRequest {
    pub path: String,
    pub offsets: Vec<String>,
    pub live: Option<String>,
    pub cursor: Option<String>,
    pub if_none_match: Option<String>,
}

/// What a read does next.
#[derive(Debug)]
pub enum ReadPlan {
    Reply(Reply),
    /// Long-poll: nothing after `after` yet; the reader waits for the next
    /// append's [`Batch`] (`streams::live::PollFeed`).
    Wait {
        after: Offset,
    },
    /// An SSE connection from `after`: the reader is sent [`Batch`]es
    /// (`streams::live::SseFeed` frames them with [`sse_turn`]).
    Sse(SseState),
}

/// An SSE connection's position.
#[derive(Clone, Debug)]
pub struct SseState {
    pub after: Offset,
    pub base64: bool,
    pub json: bool,
    pub cursor: Option<String>,
}

/// One turn of an SSE connection: bytes to send, then either wait for more
/// (`wait`) or end (`done`).
#[derive(Debug, Default)]
pub struct SseTurn {
    pub bytes: Vec<u8>,
    pub wait: bool,
    pub done: bool,
}

fn is_expired(m: &Meta, now: i64) -> bool {
    m.expires_at_ms.is_some_and(|t| now >= t)
        || m.ttl_seconds.is_some_and(|ttl| now >= m.accessed_ms + ttl as i64 * 1000)
}

/// `^(0|[1-9]\d*)$`: no sign, leading zero, decimal point or exponent.
fn strict_uint(v: &str) -> Option<u64> {
    let ok =
        v == "0" || (!v.is_empty() && !v.starts_with('0') && v.len() <= 15 && v.bytes().all(|b| b.is_ascii_digit()));
    ok.then(|| v.parse().ok()).flatten()
}

fn etag(path: &str, start: &str, end: Offset, closed: bool) -> String {
    let c = if closed { ":c" } else { "" };
    format!("\"{}:{start}:{end}{c}\"", base64::engine::general_purpose::STANDARD.encode(path))
}

impl<L: StreamLog> Streams<L> {
    pub fn new(log: L) -> Streams<L> {
        Streams { log, release: None, copying: false }
    }

    pub fn log(&self) -> &L {
        &self.log
    }

    /// The source this stream stopped referencing, if any (see `release`).
    pub fn take_release(&mut self) -> Option<String> {
        self.release.take()
    }

    /// The stream's metadata, `None` when there is no stream. Enforces
    /// expiry lazily: a stream past its deadline is removed here (or
    /// soft-deleted while forks read it), so no access ever sees it alive.
    pub fn live_meta(&mut self, now: i64) -> Result<Option<Meta>, Reply> {
        let Some(mut m) = self.log.meta().map_err(unavailable)? else { return Ok(None) };
        if is_expired(&m, now) && !m.soft_deleted {
            if m.ref_count > 0 {
                m.soft_deleted = true;
                self.log.put_meta(&m).map_err(unavailable)?;
                return Ok(Some(m));
            }
            self.log.clear().map_err(unavailable)?;
            self.release = m.forked_from;
            return Ok(None);
        }
        Ok(Some(m))
    }

    /// When the alarm should next look at this stream (its expiry).
    pub fn deadline(&self) -> Option<i64> {
        let m = self.log.meta().ok()??;
        if m.soft_deleted {
            return None;
        }
        let ttl = m.ttl_seconds.map(|t| m.accessed_ms + t as i64 * 1000);
        [m.expires_at_ms, ttl].into_iter().flatten().min()
    }

    fn touch(&mut self, m: &mut Meta, now: i64) -> Result<(), Reply> {
        if m.ttl_seconds.is_some() && m.accessed_ms != now {
            m.accessed_ms = now;
            self.log.put_meta(m).map_err(unavailable)?;
        }
        Ok(())
    }

    /// Checks a create's headers; answers an existing stream (200 when the
    /// configuration matches, 409 otherwise). A fork comes back with the
    /// source to ask; anything else goes straight to [`Self::finish_create`].
    pub fn prepare_create(&mut self, req: CreateRequest, now: i64) -> Result<PreparedCreate, Reply> {
        if req.ttl.is_some() && req.expires_at.is_some() {
            return Err(Reply::text(400, "Cannot specify both Stream-TTL and Stream-Expires-At"));
        }
        let ttl_seconds = match req.ttl.as_deref() {
            None => None,
            Some(v) => Some(strict_uint(v).ok_or_else(|| Reply::text(400, "Invalid Stream-TTL value"))?),
        };
        let expires_at_ms = match req.expires_at.as_deref() {
            None => None,
            Some(v) => {
                Some(wire::parse_rfc3339(v).ok_or_else(|| Reply::text(400, "Invalid Stream-Expires-At timestamp"))?)
            }
        };
        let fork_offset = match req.fork_offset.as_deref() {
            None => None,
            Some(v) => Some(Offset::parse(v).ok_or_else(|| Reply::text(400, "Invalid Stream-Fork-Offset format"))?),
        };
        let sub_offset = match req.fork_sub_offset.as_deref() {
            None => 0,
            Some(_) if req.forked_from.is_none() => {
                return Err(Reply::text(400, "Stream-Fork-Sub-Offset requires Stream-Forked-From"));
            }
            Some(v) => strict_uint(v).ok_or_else(|| Reply::text(400, "Invalid Stream-Fork-Sub-Offset format"))?,
        };
        if req.body.len() > MAX_BODY {
            return Err(Reply::text(413, &format!("the body is over {MAX_BODY} bytes")));
        }
        if let Some(existing) = self.live_meta(now)? {
            if existing.soft_deleted {
                return Err(Reply::text(
                    409,
                    "stream was deleted but still has active forks — path cannot be reused until all forks are removed",
                ));
            }
            let ct =
                |c: Option<&str>| c.map(wire::media_type).filter(|c| !c.is_empty()).unwrap_or_else(|| OCTET.into());
            let same = (req.forked_from.is_some() && req.content_type.is_none()
                || ct(req.content_type.as_deref()) == ct(Some(&existing.content_type)))
                && ttl_seconds == existing.ttl_seconds
                && req.expires_at == existing.expires_at
                && req.closed == existing.closed
                && req.forked_from == existing.forked_from
                && (fork_offset.is_none() || fork_offset == existing.fork_offset)
                && sub_offset == existing.fork_sub_offset;
            if !same {
                return Err(Reply::text(409, "Stream already exists with different configuration"));
            }
            let mut r = Reply::new(200)
                .header("content-type", existing.content_type.clone())
                .header(wire::NEXT_OFFSET, existing.tail.to_string());
            if existing.closed {
                r.set(wire::CLOSED, "true");
            }
            return Err(r);
        }
        if self.copying {
            return Err(Reply::text(409, "this stream is being created (a fork is copying its source)"));
        }
        let fork = req.forked_from.clone().map(|source| ForkRequest {
            source,
            offset: fork_offset,
            sub_offset,
            paged: true,
            after: None,
        });
        Ok(PreparedCreate { req, ttl_seconds, expires_at_ms, fork })
    }

    /// Creates the stream (with `source` for a fork) and answers 201.
    /// A fork whose inheritance came in pages has its earlier pages stored
    /// already ([`Self::copy_fork_page`]); `source` is its last page. A new
    /// stream starts from clean rows: what a crashed earlier create left
    /// under this path (it never got its meta) is cleared first.
    pub fn finish_create(&mut self, p: PreparedCreate, source: Option<ForkSource>, now: i64) -> Reply {
        if !std::mem::replace(&mut self.copying, false) {
            if let Err(e) = self.log.clear() {
                return unavailable(e);
            }
        }
        let req = p.req;
        let given = req.content_type.as_deref().filter(|c| valid_media_type(c));
        let mut meta = Meta {
            path: req.path.clone(),
            content_type: given.unwrap_or(OCTET).to_owned(),
            ttl_seconds: p.ttl_seconds,
            expires_at: req.expires_at.clone(),
            expires_at_ms: p.expires_at_ms,
            created_ms: now,
            accessed_ms: now,
            closed: req.closed,
            closed_by: None,
            forked_from: None,
            fork_offset: None,
            fork_sub_offset: 0,
            ref_count: 0,
            soft_deleted: false,
            tail: Offset::ZERO,
            writer_seq: None,
        };
        let mut messages = Vec::new();
        if let Some(src) = &source {
            if let Some(c) = given {
                if wire::media_type(c) != wire::media_type(&src.content_type) {
                    return Reply::text(409, "Content type mismatch with source stream");
                }
            }
            meta.content_type = given.unwrap_or(&src.content_type).to_owned();
            if p.ttl_seconds.is_none() && p.expires_at_ms.is_none() {
                meta.ttl_seconds = src.ttl_seconds;
                meta.expires_at = src.expires_at.clone();
                meta.expires_at_ms = src.expires_at_ms;
            }
            meta.forked_from = p.fork.as_ref().map(|f| f.source.clone());
            meta.fork_offset = Some(src.offset);
            meta.tail = src.offset;
            match decode_messages(&src.messages) {
                Ok(decoded) => messages.extend(decoded),
                Err(r) => return r,
            }
            if let Some(prefix) = &src.prefix {
                let Ok(data) = base64::engine::general_purpose::STANDARD.decode(prefix) else {
                    return Reply::text(502, "the source stream sent an unreadable message");
                };
                // The reference server's framing: 4 length bytes and a newline.
                meta.tail = Offset::new(meta.tail.hi, meta.tail.lo + data.len() as u64 + 5);
                meta.fork_sub_offset = p.fork.as_ref().map_or(0, |f| f.sub_offset);
                messages.push(Message { offset: meta.tail, data });
            }
        }
        if !req.body.is_empty() {
            let data = if wire::is_json(&meta.content_type) {
                match wire::json_append(&req.body, true) {
                    Ok(d) => d,
                    Err(e) => return json_refusal(e),
                }
            } else {
                req.body.clone()
            };
            if !data.is_empty() {
                meta.tail = Offset::new(meta.tail.hi, meta.tail.lo + data.len() as u64 + 5);
                messages.push(Message { offset: meta.tail, data });
            }
        }
        // One block: messages and metadata land together.
        if let Err(e) = self.log.append(&messages).and_then(|_| self.log.put_meta(&meta)) {
            return unavailable(e);
        }
        let mut r = Reply::new(201)
            .header("content-type", meta.content_type.clone())
            .header(wire::NEXT_OFFSET, meta.tail.to_string())
            .header("location", format!("{}{}", req.origin, req.path));
        if meta.closed {
            r.set(wire::CLOSED, "true");
        }
        r
    }

    /// `DELETE`: 204, or 404 / 410. With live forks the stream is only
    /// soft-deleted: reads answer 410 and the path stays taken until they go.
    pub fn delete(&mut self, now: i64) -> Reply {
        let m = match self.live_meta(now) {
            Ok(Some(m)) => m,
            Ok(None) => return Reply::text(404, "Stream not found"),
            Err(r) => return r,
        };
        if m.soft_deleted {
            return Reply::text(410, "Stream is gone");
        }
        let result = if m.ref_count > 0 {
            let mut m = m;
            m.soft_deleted = true;
            self.log.put_meta(&m)
        } else {
            self.release = m.forked_from.clone();
            self.log.clear()
        };
        match result {
            Ok(()) => Reply::new(204),
            Err(e) => unavailable(e),
        }
    }

    /// `HEAD`: the stream's metadata, never cached.
    pub fn head(&mut self, now: i64) -> Reply {
        let m = match self.live_meta(now) {
            Ok(Some(m)) => m,
            Ok(None) => return Reply::text(404, ""),
            Err(r) => return r,
        };
        if m.soft_deleted {
            return Reply::text(410, "");
        }
        let mut r = Reply::new(200)
            .header(wire::NEXT_OFFSET, m.tail.to_string())
            .header("cache-control", "no-store")
            .header("content-type", m.content_type.clone())
            .header("etag", etag(&m.path, "-1", m.tail, m.closed));
        if m.closed {
            r.set(wire::CLOSED, "true");
        }
        if let Some(t) = m.ttl_seconds {
            r.set(wire::TTL, t.to_string());
        }
        if let Some(e) = &m.expires_at {
            r.set(wire::EXPIRES_AT, e.clone());
        }
        r
    }

    /// `POST`: appends (and/or closes). The second value is true when
    /// something was stored or the stream closed: the shell wakes readers.
    pub fn append(&mut self, req: AppendRequest, now: i64) -> (Reply, bool) {
        match self.append_inner(req, now) {
            Ok(r) => r,
            Err(r) => (r, false),
        }
    }

    fn append_inner(&mut self, req: AppendRequest, now: i64) -> Result<(Reply, bool), Reply> {
        let producer = Producer::from_headers(
            req.producer_id.as_deref(),
            req.producer_epoch.as_deref(),
            req.producer_seq.as_deref(),
        )
        .map_err(|m| Reply::text(400, m))?;
        if req.body.len() > MAX_BODY {
            return Err(Reply::text(413, &format!("the body is over {MAX_BODY} bytes")));
        }
        let Some(mut m) = self.live_meta(now)? else { return Err(Reply::text(404, "Stream not found")) };
        if m.soft_deleted {
            return Err(Reply::text(410, "Stream is gone"));
        }
        let closing_only = req.body.is_empty() && req.closed;
        if !closing_only {
            if req.body.is_empty() {
                return Err(Reply::text(400, "Empty body"));
            }
            let Some(ct) = req.content_type.as_deref() else {
                return Err(Reply::text(400, "Content-Type header is required"));
            };
            if !m.closed && wire::media_type(ct) != wire::media_type(&m.content_type) {
                return Err(Reply::text(409, "Content-type mismatch"));
            }
        }
        let closed_reply = |m: &Meta| {
            Reply::text(409, "Stream is closed")
                .header(wire::CLOSED, "true")
                .header(wire::NEXT_OFFSET, m.tail.to_string())
        };
        if m.closed {
            // A producer retrying the append that closed the stream gets
            // its duplicate answer; anyone else learns it is closed.
            if let (Some(p), Some(by)) = (&producer, &m.closed_by) {
                if by.id == p.id && by.epoch == p.epoch && by.seq == p.seq {
                    return Ok((
                        producer_headers(Reply::new(204), p.epoch, p.seq)
                            .header(wire::NEXT_OFFSET, m.tail.to_string())
                            .header(wire::CLOSED, "true"),
                        false,
                    ));
                }
            }
            if closing_only && producer.is_none() {
                return Ok((
                    Reply::new(204).header(wire::NEXT_OFFSET, m.tail.to_string()).header(wire::CLOSED, "true"),
                    false,
                ));
            }
            return Err(closed_reply(&m));
        }
        let mut accepted = None;
        if let Some(p) = &producer {
            let state = self.log.producer(&p.id).map_err(unavailable)?;
            match producer::check(state.as_ref(), p, now) {
                Verdict::Accept(s) => accepted = Some(s),
                Verdict::Duplicate { last_seq } => {
                    return Ok((producer_headers(Reply::new(204), p.epoch, last_seq), false));
                }
                Verdict::StaleEpoch { current } => {
                    return Err(
                        Reply::text(403, "Stale producer epoch").header(wire::PRODUCER_EPOCH, current.to_string())
                    );
                }
                Verdict::EpochSeqNotZero => return Err(Reply::text(400, "New epoch must start with sequence 0")),
                Verdict::Gap { expected, received } => {
                    return Err(Reply::text(409, "Producer sequence gap")
                        .header(wire::PRODUCER_EXPECTED_SEQ, expected.to_string())
                        .header(wire::PRODUCER_RECEIVED_SEQ, received.to_string()));
                }
            }
        }
        if let Some(seq) = &req.seq {
            if m.writer_seq.as_ref().is_some_and(|last| seq.as_str() <= last.as_str()) {
                return Err(Reply::text(409, "Sequence conflict"));
            }
        }
        let mut message = None;
        if !closing_only {
            let data = if wire::is_json(&m.content_type) {
                wire::json_append(&req.body, false).map_err(json_refusal)?
            } else {
                req.body
            };
            m.tail = Offset::new(m.tail.hi, m.tail.lo + data.len() as u64 + 5);
            message = Some(Message { offset: m.tail, data });
            if let Some(seq) = req.seq {
                m.writer_seq = Some(seq);
            }
        }
        if req.closed {
            m.closed = true;
            m.closed_by = producer.as_ref().map(|p| ClosedBy { id: p.id.clone(), epoch: p.epoch, seq: p.seq });
        }
        if m.ttl_seconds.is_some() {
            m.accessed_ms = now;
        }
        // Persist, then notify: message, tail and producer state in one block.
        let write = |log: &mut L| -> Result<(), StoreError> {
            if let Some(msg) = &message {
                log.append(std::slice::from_ref(msg))?;
            }
            if let (Some(p), Some(s)) = (&producer, &accepted) {
                log.put_producer(&p.id, s)?;
            }
            log.put_meta(&m)
        };
        write(&mut self.log).map_err(unavailable)?;
        let status = if producer.is_some() && !closing_only { 200 } else { 204 };
        let mut r = Reply::new(status).header(wire::NEXT_OFFSET, m.tail.to_string());
        if let Some(p) = &producer {
            r = producer_headers(r, p.epoch, p.seq);
        }
        if req.closed {
            r.set(wire::CLOSED, "true");
        }
        Ok((r, true))
    }

    /// `GET`: catch-up, or the start of a long-poll or SSE read.
    pub fn read(&mut self, req: &ReadRequest, now: i64) -> ReadPlan {
        match self.read_inner(req, now) {
            Ok(p) => p,
            Err(r) => ReadPlan::Reply(r),
        }
    }

    fn read_inner(&mut self, req: &ReadRequest, now: i64) -> Result<ReadPlan, Reply> {
        let Some(mut m) = self.live_meta(now)? else { return Err(Reply::text(404, "Stream not found")) };
        if m.soft_deleted {
            return Err(Reply::text(410, "Stream is gone"));
        }
        let offsets: Vec<&str> = req.offsets.iter().map(String::as_str).collect();
        let start = Start::from_query(&offsets).map_err(|e| Reply::text(400, e.message()))?;
        let live = req.live.as_deref();
        if let Some(mode) = live.filter(|l| matches!(*l, "long-poll" | "sse")) {
            if start.is_none() {
                let which = if mode == "sse" { "SSE" } else { "Long-poll" };
                return Err(Reply::text(400, &format!("{which} requires offset parameter")));
            }
        }
        self.touch(&mut m, now)?;
        let after = match start {
            None | Some(Start::Beginning) => Offset::ZERO,
            Some(Start::Now) => m.tail,
            Some(Start::After(o)) => o,
        };
        if live == Some("sse") {
            return Ok(ReadPlan::Sse(SseState {
                after,
                base64: !wire::is_text(&m.content_type),
                json: wire::is_json(&m.content_type),
                cursor: req.cursor.clone(),
            }));
        }
        let json = wire::is_json(&m.content_type);
        if start == Some(Start::Now) && live != Some("long-poll") {
            let mut r = Reply::new(200)
                .header(wire::NEXT_OFFSET, m.tail.to_string())
                .header(wire::UP_TO_DATE, "true")
                .header("cache-control", "no-store")
                .header("content-type", m.content_type.clone())
                .body(if json { b"[]".to_vec() } else { Vec::new() });
            if m.closed {
                r.set(wire::CLOSED, "true");
            }
            return Ok(ReadPlan::Reply(r));
        }
        let messages = self.log.read(after, m.tail, READ_WINDOW).map_err(unavailable)?;
        if live == Some("long-poll") && messages.is_empty() && after == m.tail {
            if m.closed {
                return Ok(ReadPlan::Reply(
                    Reply::new(204)
                        .header(wire::NEXT_OFFSET, m.tail.to_string())
                        .header(wire::UP_TO_DATE, "true")
                        .header(wire::CLOSED, "true"),
                ));
            }
            return Ok(ReadPlan::Wait { after });
        }
        Ok(ReadPlan::Reply(self.data_reply(&m, req, messages, now)))
    }

    fn data_reply(&self, m: &Meta, req: &ReadRequest, messages: Vec<Message>, now: i64) -> Reply {
        data_reply(&Tail::of(m), req, &messages, now)
    }

    /// Where the stream stands, and what follows `after` (at most
    /// [`READ_WINDOW`] bytes): what a live reader is sent when it opens, a
    /// page it asks for, and every append (`prev`: the tail before it).
    pub fn batch(&mut self, after: Offset, page: bool, now: i64) -> Batch {
        let gone = |status| Batch { prev: after, page, gone: Some(status), ..Batch::default() };
        let m = match self.live_meta(now) {
            Ok(Some(m)) if !m.soft_deleted => m,
            Ok(Some(_)) => return gone(410),
            Ok(None) => return gone(404),
            Err(_) => return gone(503),
        };
        let Ok(messages) = self.log.read(after, m.tail, READ_WINDOW) else { return gone(503) };
        Batch {
            prev: after,
            page,
            tail: m.tail,
            closed: m.closed,
            gone: None,
            content_type: m.content_type,
            messages: messages.into_iter().map(|x| (x.offset, wire::base64(&x.data))).collect(),
        }
    }

    /// The stream's tail, without any side effect (`None`: no stream).
    pub fn tail(&self) -> Option<Offset> {
        self.log.meta().ok().flatten().map(|m| m.tail)
    }
}

/// What a data answer needs of the stream's metadata.
#[derive(Clone, Debug, Default)]
pub struct Tail {
    pub path: String,
    pub content_type: String,
    pub tail: Offset,
    pub closed: bool,
}

impl Tail {
    fn of(m: &Meta) -> Tail {
        Tail { path: m.path.clone(), content_type: m.content_type.clone(), tail: m.tail, closed: m.closed }
    }
}

/// A read's data answer: `messages` (the first ones after the read's
/// offset), with the offset reached, the ETag and the up-to-date and closed
/// flags.
pub fn data_reply(m: &Tail, req: &ReadRequest, messages: &[Message], now: i64) -> Reply {
    let end = messages.last().map_or(m.tail, |x| x.offset);
    let up_to_date = end >= m.tail;
    let closed = m.closed && up_to_date;
    let start = req.offsets.first().map_or("-1", String::as_str);
    let tag = etag(&m.path, start, end, closed);
    if req.if_none_match.as_deref() == Some(tag.as_str()) {
        return Reply::new(304).header("etag", tag);
    }
    let body = if wire::is_json(&m.content_type) {
        wire::json_array(messages.iter().map(|x| x.data.as_slice()))
    } else {
        messages.iter().flat_map(|x| x.data.iter().copied()).collect()
    };
    let mut r = Reply::new(200)
        .header("content-type", m.content_type.clone())
        .header(wire::NEXT_OFFSET, end.to_string())
        .header("etag", tag)
        .header("cache-control", "no-store")
        .body(body);
    if req.live.as_deref() == Some("long-poll") {
        r.set(wire::CURSOR, wire::response_cursor(req.cursor.as_deref(), now, 1));
    }
    if up_to_date {
        r.set(wire::UP_TO_DATE, "true");
    }
    if closed {
        r.set(wire::CLOSED, "true");
    }
    r
}

/// A long-poll's answer when nothing new came: 204 at `after`, closed when
/// the stream was closed there.
pub fn nothing_new(req: &ReadRequest, after: Offset, closed: bool, now: i64, jitter: u64) -> Reply {
    let mut r = Reply::new(204)
        .header(wire::NEXT_OFFSET, after.to_string())
        .header(wire::UP_TO_DATE, "true")
        .header(wire::CURSOR, wire::response_cursor(req.cursor.as_deref(), now, jitter));
    if closed {
        r.set(wire::CLOSED, "true");
    }
    r
}

/// One turn of an SSE connection over `messages` (those after `st.after`):
/// one `data` event per message, each followed by its `control` event (a
/// client that collects data up to each control event can parse every
/// batch, §5.8), or a lone `control` event when there are none. Done once
/// the control event reports the stream closed at the client's position.
pub fn sse_turn(st: &mut SseState, messages: &[Message], tail: Offset, closed: bool, cursor: &str) -> SseTurn {
    let mut out = Vec::new();
    for msg in messages {
        let payload = if st.base64 {
            wire::base64(&msg.data)
        } else if st.json {
            String::from_utf8_lossy(&wire::json_array([msg.data.as_slice()])).into_owned()
        } else {
            String::from_utf8_lossy(&msg.data).into_owned()
        };
        wire::sse_event("data", &payload, &mut out);
        st.after = msg.offset;
        let at_tail = st.after >= tail;
        wire::sse_control(&st.after.to_string(), Some(cursor), at_tail, closed && at_tail, &mut out);
    }
    if messages.is_empty() && st.after < tail {
        // The client named an offset past every message (it cannot be
        // reached): report the tail.
        st.after = tail;
    }
    let at_tail = st.after >= tail;
    let closed = closed && at_tail;
    if messages.is_empty() {
        wire::sse_control(&st.after.to_string(), Some(cursor), at_tail, closed, &mut out);
    }
    SseTurn { bytes: out, wait: at_tail && !closed, done: closed }
}

/// What a live reader is sent: where the stream stands and the messages
/// after `prev`, or that the stream is gone. JSON over the socket between
/// a stream's object and the Worker relaying it (`streams::live`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// The messages follow this offset.
    pub prev: Offset,
    /// An answer to the reader (its first batch, or a page it asked for),
    /// not an append.
    #[serde(default)]
    pub page: bool,
    #[serde(default)]
    pub tail: Offset,
    #[serde(default)]
    pub closed: bool,
    /// The stream is gone: 404, 410 (soft-deleted while forks read it), or
    /// 503 (storage failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gone: Option<u16>,
    #[serde(default)]
    pub content_type: String,
    /// `[offset, base64 data]` pairs.
    #[serde(default)]
    pub messages: Vec<(Offset, String)>,
}

/// A fork page's messages, decoded.
fn decode_messages(messages: &[(Offset, String)]) -> Result<Vec<Message>, Reply> {
    messages
        .iter()
        .map(|(offset, data)| {
            base64::engine::general_purpose::STANDARD
                .decode(data)
                .map(|data| Message { offset: *offset, data })
                .map_err(|_| Reply::text(502, "the source stream sent an unreadable message"))
        })
        .collect()
}

fn producer_headers(r: Reply, epoch: u64, seq: u64) -> Reply {
    r.header(wire::PRODUCER_EPOCH, epoch.to_string()).header(wire::PRODUCER_SEQ, seq.to_string())
}

fn json_refusal(e: JsonError) -> Reply {
    match e {
        JsonError::Invalid => Reply::text(400, "Invalid JSON"),
        JsonError::EmptyArray => Reply::text(400, "Empty arrays are not allowed"),
    }
}

/// `^[\w-]+/[\w-]+`, the reference server's test of a Content-Type: a
/// create without one (or with junk) stores `application/octet-stream`.
fn valid_media_type(c: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    let Some((a, b)) = c.split_once('/') else { return false };
    !a.is_empty() && a.bytes().all(word) && b.bytes().next().is_some_and(word)
}
