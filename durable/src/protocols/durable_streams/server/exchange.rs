//! A standalone stream's object, request by request: which operation a
//! request is ([`StreamOp`]), what it does to the stream ([`Streams`]), and the
//! steps its shell carries out ([`StreamStep`]): answer, accept a live reader's
//! socket, or call another stream's object (a fork's source) and hand the
//! answer back. The shell routes nothing and decides nothing.
//!
//! Invariants enforced here:
//! - persist, then notify: every change a live reader must learn of (an
//!   append, a close, a delete, a release that removes the stream) is
//!   stored before its [`Notice`] is handed to the shell;
//! - a live reader's position, its socket and its first batch are decided
//!   in the one synchronous block of [`StreamExchange::start`];
//! - a fork holds its path from its first page of inheritance, and every
//!   way a fork's create fails releases the reference it took on its source
//!   (once the source answered).

use super::log::StreamLog;
use crate::streams::offset::Offset;
use crate::streams::wire::{self, Reply};
use super::{
    AppendRequest, CreateRequest, ForkRequest, ForkSource, PreparedCreate, ReadPlan, ReadRequest, Streams, MAX_BODY,
};
use crate::wire::forward::{self, Body, ObjectCall, Object};
use serde::{Deserialize, Serialize};

/// What a request to a stream's object is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum StreamOp {
    /// A client's request to the stream at `path` (its method, headers,
    /// query and body say what it asks).
    Client { path: String },
    /// A fork of this stream asks for a page of its inheritance (the body
    /// is the [`ForkRequest`]).
    ForkSource,
    /// A fork of this stream no longer reads it.
    Release,
}

/// Where an object of an earlier release sends its own calls (it names the
/// operation by path): kept so objects of two releases can fork each other
/// during a deploy.
const FORK_SOURCE_PATH: &str = "/_ds/fork-source";
const RELEASE_PATH: &str = "/_ds/release";

impl StreamOp {
    /// The operation a request names: its forwarded one, else an earlier
    /// release's object's call by path.
    pub fn of(forwarded: Option<&str>, path: &str) -> Option<StreamOp> {
        forward::decode(forwarded).or(match path {
            FORK_SOURCE_PATH => Some(StreamOp::ForkSource),
            RELEASE_PATH => Some(StreamOp::Release),
            _ => None,
        })
    }
}

/// A request as the object's shell received it.
pub struct StreamRequest<'a> {
    pub op: StreamOp,
    pub method: &'a str,
    /// The scheme and host the client reached, for `Location`.
    pub origin: &'a str,
    pub query: &'a [(String, String)],
    pub header: &'a dyn Fn(&str) -> Option<String>,
    /// The body, read with [`MAX_BODY`] as its cap (or why it was not).
    pub body: Result<Vec<u8>, StreamBodyError>,
    /// Whether the request asks for a socket (a live read across the hop).
    pub upgrade: bool,
    /// How many live readers the object holds (none: nothing to notify).
    pub readers: usize,
}

/// Why a body was not read.
#[derive(Clone, Debug)]
pub enum StreamBodyError {
    TooLarge,
    Unreadable(String),
}

/// What the shell does next.
pub enum StreamStep {
    Reply(Reply),
    /// Accept a live reader's socket, send it `first`, answer with it
    /// (marking its data `base64` when the stream is binary).
    Socket {
        first: String,
        base64: bool,
    },
    /// Make this call to another stream's object and hand its answer to
    /// [`StreamExchange::answer`].
    Call(ObjectCall),
}

/// What every live reader is sent: one batch's text, and whether their
/// sockets then close (the stream is gone).
#[derive(Clone, Debug)]
pub struct Notice {
    pub text: String,
    pub close: bool,
}

/// What follows an answered request: a source this stream stopped reading
/// (tell it, answer ignored), and when the object's alarm must fire (the
/// stream's expiry).
#[derive(Debug, Default)]
pub struct After {
    pub release: Option<ObjectCall>,
    pub alarm_at: Option<i64>,
}

/// A fork's create, waiting for its source.
struct Fork {
    create: CreateRequest,
    prepared: PreparedCreate,
    ask: ForkRequest,
    /// The inheritance comes in pages, and the first is copied.
    copying: bool,
}

enum Waiting {
    Nothing,
    Source(Box<Fork>),
    /// The source is being released; then `reply` is the answer.
    Releasing(Reply),
}

/// One request's exchange with the stream.
pub struct StreamExchange {
    waiting: Waiting,
    readers: usize,
    notices: Vec<Notice>,
}

impl StreamExchange {
    /// Begins serving `req`: the first step (anything stored is stored).
    pub fn start<L: StreamLog>(streams: &mut Streams<L>, req: StreamRequest, now: i64) -> (StreamExchange, StreamStep) {
        let mut x = StreamExchange { waiting: Waiting::Nothing, readers: req.readers, notices: Vec::new() };
        let step = x.begin(streams, req, now);
        (x, step)
    }

    /// The notices the last step left: send each to every live reader now.
    pub fn notices(&mut self) -> Vec<Notice> {
        std::mem::take(&mut self.notices)
    }

    /// Tells live readers what changed since `prev`, when there are any.
    fn notify<L: StreamLog>(&mut self, streams: &mut Streams<L>, prev: Offset, now: i64) {
        if self.readers > 0 {
            let batch = streams.batch(prev, false, now);
            self.notices.push(Notice { text: batch.encode(), close: batch.gone.is_some() });
        }
    }

    fn begin<L: StreamLog>(&mut self, streams: &mut Streams<L>, req: StreamRequest, now: i64) -> StreamStep {
        let header = |name: &str| (req.header)(name);
        let flag = |name: &str| header(name).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let body = match (req.method, req.body) {
            (_, Ok(b)) => b,
            ("PUT" | "POST", Err(StreamBodyError::TooLarge)) => {
                return StreamStep::Reply(Reply::text(413, &format!("the body is over {MAX_BODY} bytes")))
            }
            ("PUT" | "POST", Err(StreamBodyError::Unreadable(e))) => return StreamStep::Reply(Reply::text(400, &e)),
            (_, Err(_)) => Vec::new(),
        };
        let path = match req.op {
            StreamOp::ForkSource => {
                let reply = match serde_json::from_slice::<ForkRequest>(&body) {
                    Err(e) => Reply::text(400, &e.to_string()),
                    Ok(f) => match streams.fork_source(&f, now) {
                        Ok(src) => Reply::new(200)
                            .header("content-type", "application/json")
                            .body(serde_json::to_vec(&src).expect("a fork's source serialises")),
                        Err(r) => r,
                    },
                };
                return StreamStep::Reply(reply);
            }
            StreamOp::Release => {
                let tail = streams.tail();
                let released = streams.release();
                self.notify(streams, tail.unwrap_or_default(), now);
                return StreamStep::Reply(released.map_or_else(|r| r, |()| Reply::new(204)));
            }
            StreamOp::Client { path } => path,
        };
        match req.method {
            "PUT" => {
                let create = CreateRequest {
                    path,
                    origin: req.origin.to_owned(),
                    content_type: header("content-type").filter(|c| !c.trim().is_empty()),
                    ttl: header(wire::TTL),
                    expires_at: header(wire::EXPIRES_AT),
                    closed: flag(wire::CLOSED),
                    forked_from: header(wire::FORKED_FROM).map(|f| resolve_source(&f)),
                    fork_offset: header(wire::FORK_OFFSET),
                    fork_sub_offset: header(wire::FORK_SUB_OFFSET),
                    body,
                };
                self.create(streams, create, now)
            }
            "POST" => {
                let append = AppendRequest {
                    content_type: header("content-type"),
                    seq: header(wire::SEQ),
                    closed: flag(wire::CLOSED),
                    producer_id: header(wire::PRODUCER_ID),
                    producer_epoch: header(wire::PRODUCER_EPOCH),
                    producer_seq: header(wire::PRODUCER_SEQ),
                    body,
                };
                let tail = streams.tail();
                let (reply, stored) = streams.append(append, now);
                if stored {
                    self.notify(streams, tail.unwrap_or_default(), now);
                }
                StreamStep::Reply(reply)
            }
            "HEAD" => StreamStep::Reply(streams.head(now)),
            "DELETE" => {
                let tail = streams.tail();
                let reply = streams.delete(now);
                self.notify(streams, tail.unwrap_or_default(), now);
                StreamStep::Reply(reply)
            }
            "GET" => {
                let q = |name: &str| crate::input::query_all(req.query, name);
                let read = ReadRequest {
                    path,
                    offsets: q("offset"),
                    live: q("live").into_iter().next(),
                    cursor: q("cursor").into_iter().next(),
                    if_none_match: header("if-none-match"),
                };
                // The read, the reader's socket and its first batch: one block.
                let (after, base64) = match streams.read(&read, now) {
                    ReadPlan::Reply(reply) => return StreamStep::Reply(reply),
                    ReadPlan::Wait { after } => (after, false),
                    ReadPlan::Sse(st) => (st.after, st.base64),
                };
                if !req.upgrade {
                    return StreamStep::Reply(Reply::text(503, "a live read is served over a socket"));
                }
                StreamStep::Socket { first: streams.batch(after, true, now).encode(), base64 }
            }
            _ => StreamStep::Reply(
                Reply::text(405, "Method not allowed").header("allow", "GET, HEAD, PUT, POST, DELETE, OPTIONS"),
            ),
        }
    }

    /// `PUT`: a stream, or a fork of one (whose inheritance its source's
    /// object gives, page by page).
    fn create<L: StreamLog>(&mut self, streams: &mut Streams<L>, create: CreateRequest, now: i64) -> StreamStep {
        let prepared = match streams.prepare_create(create.clone(), now) {
            Ok(p) => p,
            Err(r) => return StreamStep::Reply(r),
        };
        let Some(ask) = prepared.fork.clone() else {
            return StreamStep::Reply(streams.finish_create(prepared, None, now));
        };
        let call = fork_call(&ask);
        self.waiting = Waiting::Source(Box::new(Fork { create, prepared, ask, copying: false }));
        StreamStep::Call(call)
    }

    /// A call's answer: its status, content type and body, or why the object
    /// could not be reached.
    pub fn answer<L: StreamLog>(
        &mut self,
        streams: &mut Streams<L>,
        answer: Result<(u16, Option<String>, Vec<u8>), String>,
        now: i64,
    ) -> StreamStep {
        match std::mem::replace(&mut self.waiting, Waiting::Nothing) {
            Waiting::Source(fork) => self.source_answered(streams, *fork, answer, now),
            Waiting::Releasing(reply) => StreamStep::Reply(reply),
            Waiting::Nothing => StreamStep::Reply(Reply::text(503, "no call was made")),
        }
    }

    fn source_answered<L: StreamLog>(
        &mut self,
        streams: &mut Streams<L>,
        mut fork: Fork,
        answer: Result<(u16, Option<String>, Vec<u8>), String>,
        now: i64,
    ) -> StreamStep {
        let page = match answer {
            Err(e) => Err(Reply::text(503, &format!("the source stream is unavailable: {e}"))),
            Ok((200, _, bytes)) => serde_json::from_slice::<ForkSource>(&bytes)
                .map_err(|_| Reply::text(502, "the source stream answered unreadably")),
            Ok((status, ct, bytes)) => {
                Err(Reply::new(status).header("content-type", ct.unwrap_or_else(|| "text/plain".into())).body(bytes))
            }
        };
        let page = match page {
            Ok(page) => page,
            // Once a page was copied, the fork holds the source; before, a
            // 502 says the source answered (and took the fork's reference),
            // unreadably.
            Err(reply) if fork.copying => {
                streams.abandon_fork_copy();
                return self.release(&fork.ask, reply);
            }
            Err(reply) if reply.status == 502 => return self.release(&fork.ask, reply),
            Err(reply) => return StreamStep::Reply(reply),
        };
        if !page.more {
            let reply = if fork.copying {
                streams.finish_create(fork.prepared, Some(page), now)
            } else {
                // The source was fetched across an await: check again that
                // no other create took the path meanwhile.
                match streams.prepare_create(fork.create.clone(), now) {
                    Ok(p) => streams.finish_create(p, Some(page), now),
                    Err(r) => r,
                }
            };
            return match reply.status {
                201 => StreamStep::Reply(reply),
                _ => self.release(&fork.ask, reply),
            };
        }
        if !fork.copying {
            // A long inheritance comes in pages: the path is held from the
            // first page, so no other create can take it meanwhile.
            if let Err(r) = streams.prepare_create(fork.create.clone(), now).and_then(|_| streams.begin_fork_copy()) {
                return self.release(&fork.ask, r);
            }
            fork.copying = true;
        }
        if let Err(r) = streams.copy_fork_page(&page) {
            return self.release(&fork.ask, r);
        }
        fork.ask.after = page.messages.last().map(|(o, _)| *o);
        let call = fork_call(&fork.ask);
        self.waiting = Waiting::Source(Box::new(fork));
        StreamStep::Call(call)
    }

    /// Tells the source the fork no longer holds it, then answers `reply`.
    fn release(&mut self, ask: &ForkRequest, reply: Reply) -> StreamStep {
        self.waiting = Waiting::Releasing(reply);
        StreamStep::Call(release_call(&ask.source))
    }
}

/// What follows every answered request, and the alarm: a source to
/// release, and when the alarm must fire.
pub fn after<L: StreamLog>(streams: &mut Streams<L>) -> After {
    After { release: streams.take_release().map(|source| release_call(&source)), alarm_at: streams.deadline() }
}

/// The object's alarm: the stream's expiry, which its readers learn of.
pub fn alarm<L: StreamLog>(streams: &mut Streams<L>, readers: usize, now: i64) -> (Vec<Notice>, After) {
    let tail = streams.tail();
    let _ = streams.live_meta(now);
    let mut x = StreamExchange { waiting: Waiting::Nothing, readers, notices: Vec::new() };
    x.notify(streams, tail.unwrap_or_default(), now);
    (x.notices, after(streams))
}

/// A page of a fork's inheritance, asked of its source's object.
fn fork_call(ask: &ForkRequest) -> ObjectCall {
    ObjectCall {
        object: Object::Stream(ask.source.clone()),
        method: "POST",
        context: forward::encode(&StreamOp::ForkSource),
        body: Body::Bytes(serde_json::to_vec(ask).expect("a fork request serialises")),
        socket: false,
        path: FORK_SOURCE_PATH,
    }
}

/// A source stream told that a fork no longer reads it.
fn release_call(source: &str) -> ObjectCall {
    ObjectCall {
        object: Object::Stream(source.to_owned()),
        method: "POST",
        context: forward::encode(&StreamOp::Release),
        body: Body::None,
        socket: false,
        path: RELEASE_PATH,
    }
}

/// `Stream-Forked-From` names a stream by path relative to the mount root
/// (`/v1/stream/a`), by full URL (its path), or by name alone (`a`).
pub fn resolve_source(raw: &str) -> String {
    let path = match raw.split_once("://") {
        Some((_, rest)) => {
            let path = rest.find('/').map_or("/", |i| &rest[i..]);
            path.split(['?', '#']).next().unwrap_or_default()
        }
        None => raw,
    };
    if path.starts_with("/v1/stream/") {
        path.to_owned()
    } else {
        format!("/v1/stream/{}", path.trim_start_matches('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_named_by_path_url_or_name() {
        assert_eq!(resolve_source("/v1/stream/a/b"), "/v1/stream/a/b");
        assert_eq!(resolve_source("http://host:8787/v1/stream/a?x=1"), "/v1/stream/a");
        assert_eq!(resolve_source("https://host/other"), "/v1/stream/other");
        assert_eq!(resolve_source("a"), "/v1/stream/a");
        assert_eq!(resolve_source("/a"), "/v1/stream/a");
    }

    #[test]
    fn operations_by_header_or_by_an_earlier_release_s_path() {
        let client = forward::encode(&StreamOp::Client { path: "/v1/stream/a".into() });
        assert_eq!(StreamOp::of(Some(&client), "/whatever"), Some(StreamOp::Client { path: "/v1/stream/a".into() }));
        assert_eq!(StreamOp::of(None, "/_ds/fork-source"), Some(StreamOp::ForkSource));
        assert_eq!(StreamOp::of(None, "/_ds/release"), Some(StreamOp::Release));
        assert_eq!(StreamOp::of(None, "/v1/stream/a"), None, "a client's request always carries its operation");
    }
}
