//! `StreamObject`: one standalone Durable Stream (`/v1/stream/*`) per
//! object, named by its path. A thin shell around the core's
//! [`Streams`](threadline_durable::streams::stream::Streams): SQLite storage
//! ([`SqlLog`]), the waits of long-poll and SSE, the TTL alarm, and the calls
//! between a fork and its source object. Every decision is the core's.
//!
//! Invariants enforced here: every access to the core is one synchronous
//! borrow (never held across an `.await`); readers are woken only after an
//! append is stored (the core persists inside `append`, the wake follows it).

use crate::now_ms;
use bytes::Bytes;
use futures_channel::oneshot;
use futures_util::stream;
use serde::Deserialize;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use threadline_durable::store::{StoreError, StoreResult};
use threadline_durable::streams::log::{Message, Meta, StreamLog};
use threadline_durable::streams::offset::Offset;
use threadline_durable::streams::producer::ProducerState;
use threadline_durable::streams::stream::{
    AppendRequest, CreateRequest, ForkRequest, ForkSource, ReadPlan, ReadRequest, SseState, Streams,
};
use threadline_durable::streams::wire::{self, Reply};
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
    storage: Storage,
    core: RefCell<Option<Streams<SqlLog>>>,
    /// Readers waiting for the next append (long-polls, SSE connections).
    waiters: RefCell<Vec<oneshot::Sender<()>>>,
    long_poll_ms: u64,
}

impl DurableObject for StreamObject {
    fn new(state: State, env: Env) -> Self {
        let long_poll_ms = crate::settings(&env).streams_long_poll_ms;
        let inner = Inner {
            env,
            storage: state.storage(),
            core: RefCell::default(),
            waiters: RefCell::default(),
            long_poll_ms,
        };
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

    async fn alarm(&self) -> Result<Response> {
        let now = now_ms();
        let _ = self.inner.with(|s| s.live_meta(now).map(|_| ()));
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

    fn wake(&self) {
        for w in self.waiters.borrow_mut().drain(..) {
            let _ = w.send(());
        }
    }

    /// Waits for the next append, or `ms`; true when woken by an append.
    async fn wait(&self, ms: u64) -> bool {
        let (tx, rx) = oneshot::channel();
        {
            let mut waiters = self.waiters.borrow_mut();
            // Readers that went away while waiting leave a cancelled sender.
            waiters.retain(|w| !w.is_canceled());
            waiters.push(tx);
        }
        let tick = Delay::from(Duration::from_millis(ms));
        matches!(futures_util::future::select(rx, tick).await, futures_util::future::Either::Left((Ok(()), _)))
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
        let url = req.url().map_err(|e| Reply::text(400, &e.to_string()))?;
        let path = url.path().to_owned();
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
                let r = self.with(|s| s.release())?;
                self.wake();
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
                let (reply, stored) = self.with(|s| s.append(a, now))?;
                if stored {
                    self.wake();
                }
                reply.into()
            }
            (Method::Head, _) => self.with(|s| s.head(now))?.into(),
            (Method::Delete, _) => {
                let r = self.with(|s| s.delete(now))?;
                self.wake();
                r.into()
            }
            (Method::Get, _) => self.read(&req, &url, path).await?,
            _ => Reply::text(405, "Method not allowed").header("allow", "GET, HEAD, PUT, POST, DELETE, OPTIONS").into(),
        };
        self.after().await;
        Ok(answer)
    }

    async fn create(self: &Rc<Self>, req: &mut Request, path: String, now: i64) -> Reply {
        let origin = req.url().map(|u| u.origin().ascii_serialization()).unwrap_or_default();
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

    async fn read(self: &Rc<Self>, req: &Request, url: &Url, path: String) -> std::result::Result<Answer, Answer> {
        let pairs = threadline_durable::request::query_pairs(url.query().unwrap_or_default());
        let q = |name: &str| threadline_durable::request::query_all(&pairs, name);
        let r = ReadRequest {
            path,
            offsets: q("offset"),
            live: q("live").into_iter().next(),
            cursor: q("cursor").into_iter().next(),
            if_none_match: header(req, "if-none-match"),
        };
        let plan = self.with(|s| s.read(&r, now_ms()))?;
        match plan {
            ReadPlan::Reply(reply) => Ok(reply.into()),
            ReadPlan::Wait { after } => {
                self.wait(self.long_poll_ms).await;
                let jitter = jitter();
                Ok(self.with(|s| s.long_poll_result(&r, after, now_ms(), jitter))?.into())
            }
            ReadPlan::Sse(st) => {
                let base64 = st.base64;
                let mut headers = crate::http::sse_headers();
                if base64 {
                    headers.push((wire::SSE_ENCODING, "base64".to_owned()));
                }
                let resp = crate::http::stream(Box::pin(sse_body(self.clone(), st)), &headers)
                    .map_err(|e| Reply::text(503, &e.to_string()))?;
                Ok(Answer::Response(resp))
            }
        }
    }
}

/// A body, never more than the protocol's limit held (413 past it).
async fn read_body(req: &mut Request) -> std::result::Result<Vec<u8>, Reply> {
    let limit = threadline_durable::streams::stream::MAX_BODY;
    crate::http::body(req, limit).await.map_err(|e| match e {
        crate::http::BodyError::TooLarge => Reply::text(413, &format!("the body is over {limit} bytes")),
        crate::http::BodyError::Unreadable(e) => Reply::text(400, &e),
    })
}

fn jitter() -> u64 {
    wire::cursor_jitter(crate::ids::random_u64())
}

/// An SSE body: turns of the core, waiting for appends (or the long-poll
/// interval, which sends a keep-alive control event) between them; ends when
/// the stream closes at the client's position, goes away, or after
/// [`wire::SSE_RECYCLE_MS`].
fn sse_body(inner: Rc<Inner>, st: SseState) -> impl futures_util::Stream<Item = Bytes> {
    let opened = now_ms();
    stream::unfold((inner, st, false, false), move |(inner, mut st, waited, done)| async move {
        if done || now_ms() - opened > wire::SSE_RECYCLE_MS {
            return None;
        }
        if waited {
            inner.wait(inner.long_poll_ms).await;
        }
        let j = jitter();
        let turn = match inner.with(|s| s.sse_step(&mut st, now_ms(), j)) {
            Ok(t) => t,
            Err(_) => return None,
        };
        if turn.bytes.is_empty() && turn.done {
            return None;
        }
        Some((Bytes::from(turn.bytes), (inner, st, turn.wait, turn.done)))
    })
}

/// Calls another stream's object (a fork's source) on an internal path.
async fn call(env: &Env, stream: &str, path: &str, body: Option<serde_json::Value>) -> Result<Response> {
    let stub = env.durable_object("STREAM")?.get_by_name(stream)?;
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
