//! `StreamObject`: one standalone Durable Stream (`/v1/stream/*`) per
//! object, named by its path. A thin shell around the core's
//! [`Streams`](threadline_durable::protocols::durable_streams::server::Streams): SQLite storage
//! ([`SqlLog`]), live readers' sockets, the TTL alarm, and the calls between
//! a fork and its source object. Every decision is the core's.
//!
//! It holds no waiting request: a live read (`live=sse`, `live=long-poll`)
//! is a hibernatable socket the stateless Worker relays to its client
//! (`streams::live`), so between appends the object sleeps.
//!
//! Invariants enforced here: every access to the core is one synchronous
//! borrow (never held across an `.await`); a live reader's socket is
//! accepted, and sent its first batch, in the same synchronous block as its
//! read is decided; readers are sent an append only after it is stored (the
//! core persists inside `append`, [`Inner::notify`] follows it).

use crate::now_ms;
use serde::Deserialize;
use std::cell::RefCell;
use std::rc::Rc;
use threadline_durable::protocols::durable_streams::offset::Offset;
use threadline_durable::protocols::durable_streams::producer::ProducerState;
use threadline_durable::protocols::durable_streams::server::feeds as live;
use threadline_durable::protocols::durable_streams::server::log::{Message, Meta, StreamLog};
use threadline_durable::protocols::durable_streams::server::{
    AppendRequest, CreateRequest, ForkRequest, ForkSource, ReadPlan, ReadRequest, Streams,
};
use threadline_durable::protocols::durable_streams::wire::{self, Reply};
use threadline_durable::store::{StoreError, StoreResult};
use worker::*;

/// A stream's [`StreamLog`] on Durable Object SQLite.
pub struct SqlLog {
    sql: SqlStorage,
}

fn err(e: worker::Error) -> StoreError {
    StoreError(e.to_string())
}

impl SqlLog {
    /// Opens the log, bringing storage to the current layout first.
    pub fn open(sql: SqlStorage) -> Result<SqlLog, threadline_durable::schema::OpenError> {
        crate::store::open(&sql, &threadline_durable::schema::STREAM)?;
        Ok(SqlLog { sql })
    }

    fn run(&self, q: &str, args: Vec<SqlStorageValue>) -> StoreResult<SqlCursor> {
        let c = self.sql.exec(q, args).map_err(err)?;
        Ok(c)
    }

    fn write(&self, q: &str, args: Vec<SqlStorageValue>) -> StoreResult<()> {
        let c = self.run(q, args)?;
        for _ in c {}
        Ok(())
    }
}

fn int(v: &SqlStorageValue) -> u64 {
    match v {
        SqlStorageValue::Integer(i) => *i as u64,
        SqlStorageValue::Float(f) => *f as u64,
        _ => 0,
    }
}

/// A row of the JSON-valued tables (`ds_meta`, `ds_producers`).
#[derive(Deserialize)]
struct DataRow {
    data: String,
}

impl StreamLog for SqlLog {
    fn meta(&self) -> StoreResult<Option<Meta>> {
        let rows: Vec<DataRow> = self.run("SELECT data FROM ds_meta WHERE k = 1", vec![])?.to_array().map_err(err)?;
        rows.into_iter()
            .next()
            .map(|r| serde_json::from_str(&r.data).map_err(|e| StoreError(e.to_string())))
            .transpose()
    }

    fn put_meta(&mut self, meta: &Meta) -> StoreResult<()> {
        let data = serde_json::to_string(meta).expect("meta serialises");
        self.write(
            "INSERT INTO ds_meta (k, data) VALUES (1, ?) ON CONFLICT (k) DO UPDATE SET data = excluded.data",
            vec![data.into()],
        )
    }

    fn append(&mut self, messages: &[Message]) -> StoreResult<()> {
        for m in messages {
            self.write(
                "INSERT INTO ds_messages (hi, lo, data) VALUES (?, ?, ?)",
                vec![(m.offset.hi as i64).into(), (m.offset.lo as i64).into(), m.data.clone().into()],
            )?;
        }
        Ok(())
    }

    fn read(&self, after: Offset, up_to: Offset, max_bytes: usize) -> StoreResult<Vec<Message>> {
        let (ah, al, uh, ul) = (
            after.hi as i64,
            after.lo as i64,
            up_to.hi.min(i64::MAX as u64) as i64,
            up_to.lo.min(i64::MAX as u64) as i64,
        );
        let cursor = self.run(
            "SELECT hi, lo, data FROM ds_messages WHERE (hi, lo) > (?, ?) AND (hi, lo) <= (?, ?) ORDER BY hi, lo",
            vec![ah.into(), al.into(), uh.into(), ul.into()],
        )?;
        let mut out = Vec::new();
        let mut size = 0;
        for row in cursor.raw() {
            let row = row.map_err(err)?;
            let data = match row.get(2) {
                Some(SqlStorageValue::Blob(b)) => b.clone(),
                Some(SqlStorageValue::String(s)) => s.clone().into_bytes(),
                _ => Vec::new(),
            };
            if !out.is_empty() && size + data.len() > max_bytes {
                break;
            }
            size += data.len();
            out.push(Message { offset: Offset::new(int(&row[0]), int(&row[1])), data });
        }
        Ok(out)
    }

    fn producer(&self, id: &str) -> StoreResult<Option<ProducerState>> {
        let rows: Vec<DataRow> =
            self.run("SELECT data FROM ds_producers WHERE id = ?", vec![id.into()])?.to_array().map_err(err)?;
        Ok(rows.into_iter().next().and_then(|r| serde_json::from_str(&r.data).ok()))
    }

    fn put_producer(&mut self, id: &str, state: &ProducerState) -> StoreResult<()> {
        let data = serde_json::to_string(state).expect("state serialises");
        self.write(
            "INSERT INTO ds_producers (id, data) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET data = excluded.data",
            vec![id.into(), data.into()],
        )
    }

    fn clear(&mut self) -> StoreResult<()> {
        self.write("DELETE FROM ds_messages", vec![])?;
        self.write("DELETE FROM ds_producers", vec![])?;
        self.write("DELETE FROM ds_meta", vec![])
    }
}

#[durable_object]
pub struct StreamObject {
    inner: Rc<Inner>,
}

pub struct Inner {
    env: Env,
    state: State,
    storage: Storage,
    core: RefCell<Option<Streams<SqlLog>>>,
}

impl DurableObject for StreamObject {
    fn new(state: State, env: Env) -> Self {
        // The relays' keep-alive is answered by the runtime, without waking
        // the object.
        if let Ok(pair) = WebSocketRequestResponsePair::new(crate::live::PING, crate::live::PONG) {
            state.set_websocket_auto_response(&pair);
        }
        let inner = Inner { env, storage: state.storage(), state, core: RefCell::default() };
        StreamObject { inner: Rc::new(inner) }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        let reply = match self.inner.handle(req).await {
            Ok(r) => r,
            Err(reply) => reply,
        };
        match reply {
            Answer::Reply(r) => crate::http::reply(r),
            Answer::Response(r) => Ok(r),
        }
    }

    /// A relay asks for the messages after its reader's position.
    async fn websocket_message(&self, ws: WebSocket, message: WebSocketIncomingMessage) -> Result<()> {
        let WebSocketIncomingMessage::String(text) = message else { return Ok(()) };
        if let Some(after) = live::parse_page_request(&text) {
            if let Ok(batch) = self.inner.with(|s| s.batch(after, true, now_ms())) {
                let _ = ws.send_with_str(batch.encode());
            }
        }
        Ok(())
    }

    async fn websocket_close(&self, ws: WebSocket, _code: usize, _reason: String, _clean: bool) -> Result<()> {
        let _ = ws.close(Some(1000), Some("closed"));
        Ok(())
    }

    /// The stream's expiry: its readers learn it is gone.
    async fn alarm(&self) -> Result<Response> {
        let now = now_ms();
        let tail = self.inner.with(|s| s.tail()).ok().flatten();
        let _ = self.inner.with(|s| s.live_meta(now).map(|_| ()));
        self.inner.notify(tail.unwrap_or_default());
        self.inner.after().await;
        Response::ok("")
    }
}

enum Answer {
    Reply(Reply),
    Response(Response),
}

impl From<Reply> for Answer {
    fn from(r: Reply) -> Answer {
        Answer::Reply(r)
    }
}

fn header(req: &Request, name: &str) -> Option<String> {
    req.headers().get(name).ok().flatten()
}

/// `Stream-Forked-From` names a stream by path relative to the mount root
/// (`/v1/stream/a`), by full URL, or by name alone (`a`).
pub fn resolve_source(raw: &str) -> String {
    let path = match Url::parse(raw) {
        Ok(u) if u.has_host() => u.path().to_owned(),
        _ => raw.to_owned(),
    };
    if path.starts_with("/v1/stream/") {
        path
    } else {
        format!("/v1/stream/{}", path.trim_start_matches('/'))
    }
}

impl Inner {
    fn with<R>(&self, f: impl FnOnce(&mut Streams<SqlLog>) -> R) -> std::result::Result<R, Reply> {
        let mut slot = self.core.borrow_mut();
        if slot.is_none() {
            let log = SqlLog::open(self.storage.sql()).map_err(|e| {
                let e = threadline_durable::ApiError::from(e);
                Reply::text(503, &format!("{}: {}", e.code, e.message))
            })?;
            *slot = Some(Streams::new(log));
        }
        Ok(f(slot.as_mut().expect("opened above")))
    }

    /// Sends every live reader what changed since `prev` (the tail before
    /// the change): an append's messages, the stream's close, or its end
    /// (then the sockets close). Called only after the change is stored.
    fn notify(&self, prev: Offset) {
        let sockets = self.state.get_websockets();
        if sockets.is_empty() {
            return;
        }
        let Ok(batch) = self.with(|s| s.batch(prev, false, now_ms())) else { return };
        let text = batch.encode();
        for ws in &sockets {
            let _ = ws.send_with_str(&text);
            if batch.gone.is_some() {
                let _ = ws.close(Some(1000), Some("the stream is gone"));
            }
        }
    }

    /// After an operation: release a source this stream stopped reading,
    /// and keep the alarm at the stream's expiry.
    async fn after(&self) {
        if let Ok(Some(source)) = self.with(|s| s.take_release()) {
            let _ = call(&self.env, &source, "/_ds/release", None).await;
        }
        let deadline = self.with(|s| s.deadline()).ok().flatten();
        if let Some(d) = deadline {
            let _ = self.storage.set_alarm((d - now_ms()).max(10) + 50).await;
        }
    }

    async fn handle(self: &Rc<Self>, mut req: Request) -> std::result::Result<Answer, Answer> {
        let path = req.path();
        let now = now_ms();
        let answer: Answer = match (req.method(), path.as_str()) {
            (Method::Post, "/_ds/fork-source") => {
                let f: ForkRequest = req.json().await.map_err(|e| Reply::text(400, &e.to_string()))?;
                match self.with(|s| s.fork_source(&f, now))? {
                    Ok(src) => Reply::new(200)
                        .header("content-type", "application/json")
                        .body(serde_json::to_vec(&src).expect("serialises"))
                        .into(),
                    Err(r) => r.into(),
                }
            }
            (Method::Post, "/_ds/release") => {
                let tail = self.with(|s| s.tail())?;
                let r = self.with(|s| s.release())?;
                self.notify(tail.unwrap_or_default());
                match r {
                    Ok(()) => Reply::new(204).into(),
                    Err(r) => r.into(),
                }
            }
            (Method::Put, _) => self.create(&mut req, path, now).await.into(),
            (Method::Post, _) => {
                let body = read_body(&mut req).await?;
                let a = AppendRequest {
                    content_type: header(&req, "content-type"),
                    seq: header(&req, wire::SEQ),
                    closed: header(&req, wire::CLOSED).is_some_and(|v| v.eq_ignore_ascii_case("true")),
                    producer_id: header(&req, wire::PRODUCER_ID),
                    producer_epoch: header(&req, wire::PRODUCER_EPOCH),
                    producer_seq: header(&req, wire::PRODUCER_SEQ),
                    body,
                };
                let tail = self.with(|s| s.tail())?;
                let (reply, stored) = self.with(|s| s.append(a, now))?;
                if stored {
                    self.notify(tail.unwrap_or_default());
                }
                reply.into()
            }
            (Method::Head, _) => self.with(|s| s.head(now))?.into(),
            (Method::Delete, _) => {
                let tail = self.with(|s| s.tail())?;
                let r = self.with(|s| s.delete(now))?;
                self.notify(tail.unwrap_or_default());
                r.into()
            }
            (Method::Get, _) => self.read(&req, path).await?,
            _ => Reply::text(405, "Method not allowed").header("allow", "GET, HEAD, PUT, POST, DELETE, OPTIONS").into(),
        };
        self.after().await;
        Ok(answer)
    }

    async fn create(self: &Rc<Self>, req: &mut Request, path: String, now: i64) -> Reply {
        let origin = crate::http::url_parts(&req.inner().url()).0.into_owned();
        let body = match read_body(req).await {
            Ok(b) => b,
            Err(r) => return r,
        };
        let c = CreateRequest {
            path,
            origin,
            content_type: header(req, "content-type").filter(|c| !c.trim().is_empty()),
            ttl: header(req, wire::TTL),
            expires_at: header(req, wire::EXPIRES_AT),
            closed: header(req, wire::CLOSED).is_some_and(|v| v.eq_ignore_ascii_case("true")),
            forked_from: header(req, wire::FORKED_FROM).map(|f| resolve_source(&f)),
            fork_offset: header(req, wire::FORK_OFFSET),
            fork_sub_offset: header(req, wire::FORK_SUB_OFFSET),
            body,
        };
        let prepared = match self.with(|s| s.prepare_create(c.clone(), now)) {
            Ok(Ok(p)) => p,
            Ok(Err(r)) | Err(r) => return r,
        };
        let Some(fork) = prepared.fork.clone() else {
            return self.with(|s| s.finish_create(prepared, None, now)).unwrap_or_else(|r| r);
        };
        let mut ask = fork.clone();
        let release = || call(&self.env, &fork.source, "/_ds/release", None);
        let mut page = match self.fork_page(&ask).await {
            Ok(p) => p,
            Err(r) => {
                if r.status == 502 {
                    // It answered (and took the fork's reference), unreadably.
                    let _ = release().await;
                }
                return r;
            }
        };
        let reply = if page.more {
            // A long inheritance comes in pages: the path is held from the
            // first page, so no other create can take it meanwhile.
            if let Err(r) = self.with(|s| s.prepare_create(c, now).and_then(|_| s.begin_fork_copy())).and_then(|r| r) {
                let _ = release().await;
                return r;
            }
            while page.more {
                if let Err(r) = self.with(|s| s.copy_fork_page(&page)).and_then(|r| r) {
                    let _ = release().await;
                    return r;
                }
                ask.after = page.messages.last().map(|(o, _)| *o);
                page = match self.fork_page(&ask).await {
                    Ok(p) => p,
                    Err(r) => {
                        let _ = self.with(|s| s.abandon_fork_copy());
                        let _ = release().await;
                        return r;
                    }
                };
            }
            self.with(|s| s.finish_create(prepared, Some(page), now)).unwrap_or_else(|r| r)
        } else {
            // The source was fetched across an await: check again that no
            // other create took the path meanwhile.
            let result = self.with(|s| match s.prepare_create(c, now) {
                Ok(p) => s.finish_create(p, Some(page), now),
                Err(r) => r,
            });
            result.unwrap_or_else(|r| r)
        };
        if reply.status != 201 {
            let _ = release().await;
        }
        reply
    }

    /// One page of a fork's inheritance, from its source's object.
    async fn fork_page(&self, ask: &ForkRequest) -> std::result::Result<ForkSource, Reply> {
        let body = serde_json::to_value(ask).expect("serialises");
        let mut resp = call(&self.env, &ask.source, "/_ds/fork-source", Some(body))
            .await
            .map_err(|e| Reply::text(503, &format!("the source stream is unavailable: {e}")))?;
        let status = resp.status_code();
        let bytes = resp.bytes().await.unwrap_or_default();
        if status != 200 {
            let ct = resp.headers().get("content-type").ok().flatten().unwrap_or_else(|| "text/plain".into());
            return Err(Reply::new(status).header("content-type", ct).body(bytes));
        }
        serde_json::from_slice::<ForkSource>(&bytes)
            .map_err(|_| Reply::text(502, "the source stream answered unreadably"))
    }

    async fn read(self: &Rc<Self>, req: &Request, path: String) -> std::result::Result<Answer, Answer> {
        let pairs = threadline_durable::request::query_pairs(&crate::http::query(req));
        let q = |name: &str| threadline_durable::request::query_all(&pairs, name);
        let r = ReadRequest {
            path,
            offsets: q("offset"),
            live: q("live").into_iter().next(),
            cursor: q("cursor").into_iter().next(),
            if_none_match: header(req, "if-none-match"),
        };
        let upgrade = header(req, "upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
        // The read, the reader's socket and its first batch: one block.
        let now = now_ms();
        let (after, base64) = match self.with(|s| s.read(&r, now))? {
            ReadPlan::Reply(reply) => return Ok(reply.into()),
            ReadPlan::Wait { after } => (after, false),
            ReadPlan::Sse(st) => (st.after, st.base64),
        };
        if !upgrade {
            return Err(Reply::text(503, "a live read is served over a socket").into());
        }
        let pair = WebSocketPair::new().map_err(|e| Reply::text(503, &e.to_string()))?;
        self.state.accept_web_socket(&pair.server);
        let first = self.with(|s| s.batch(after, true, now))?;
        let _ = pair.server.send_with_str(first.encode());
        let resp = Response::from_websocket(pair.client).map_err(|e| Reply::text(503, &e.to_string()))?;
        if base64 {
            let _ = resp.headers().set(wire::SSE_ENCODING, "base64");
        }
        Ok(Answer::Response(resp))
    }
}

/// A body, never more than the protocol's limit held (413 past it).
async fn read_body(req: &mut Request) -> std::result::Result<Vec<u8>, Reply> {
    let limit = threadline_durable::protocols::durable_streams::server::MAX_BODY;
    crate::http::body(req, limit).await.map_err(|e| match e {
        crate::http::BodyError::TooLarge => Reply::text(413, &format!("the body is over {limit} bytes")),
        crate::http::BodyError::Unreadable(e) => Reply::text(400, &e),
    })
}

/// Calls another stream's object (a fork's source) on an internal path.
async fn call(env: &Env, stream: &str, path: &str, body: Option<serde_json::Value>) -> Result<Response> {
    let stub = crate::namespace(env, "STREAM")?.get_by_name(stream)?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post);
    if let Some(b) = body {
        let headers = Headers::new();
        headers.set("content-type", "application/json")?;
        init.with_headers(headers).with_body(Some(b.to_string().into()));
    }
    let req = Request::new_with_init(&format!("https://stream{path}"), &init)?;
    stub.fetch_with_request(req).await
}
