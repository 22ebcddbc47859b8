//! What the native tests share: a sink that keeps its bytes, a thread on a
//! memory store, requests through the thread's service as the object shell
//! hands them over, and an SSE parser.

#![allow(dead_code)]

use bytes::Bytes;
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;
use threadline_durable::protocols::{self, Target};
use threadline_durable::thread::{Answer, Call, Consulted, Outcome};
use threadline_durable::wire::forward;
use threadline_durable::Caller;
use threadline_durable::Event;
use threadline_durable::{MemoryStore, Settings, Sink, Store, Thread};

/// A subscriber whose live bytes the test can read; `closed` simulates a
/// client that went away.
#[derive(Clone, Default)]
pub struct VecSink {
    pub buf: Rc<RefCell<Vec<u8>>>,
    pub closed: Rc<RefCell<bool>>,
}

impl Sink for VecSink {
    fn send(&mut self, chunk: Bytes) -> bool {
        if *self.closed.borrow() {
            return false;
        }
        self.buf.borrow_mut().extend_from_slice(&chunk);
        true
    }
    fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }
}

pub type T = Thread<MemoryStore, VecSink>;

/// A thread on a memory store, configured by `settings`.
pub fn thread(settings: &Settings) -> T {
    Thread::load(MemoryStore::default(), settings.thread.clone(), 0).unwrap()
}

/// The publish token in a run's start signal (the webhook agent's).
pub fn token_of(effects: &[threadline_durable::Effect], run: &str) -> String {
    effects
        .iter()
        .find_map(|e| match e {
            threadline_durable::Effect::Webhook { body, start_of: Some(r) } if r == run => {
                body["publishToken"].as_str().map(str::to_owned)
            }
            _ => None,
        })
        .expect("a start signal for the run")
}

/// An authenticated actor.
pub fn actor(id: &str, roles: &[&str]) -> Caller {
    Caller::Actor { id: id.into(), roles: roles.iter().map(|r| (*r).to_owned()).collect() }
}

/// A request as the object shell hands it to the thread.
#[derive(Clone)]
pub struct Req<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub caller: Caller,
    pub body: String,
    pub headers: Vec<(&'a str, String)>,
    /// Another object's answer, when the request is served again with it.
    pub consulted: Option<(u16, Vec<u8>)>,
}

impl<'a> Req<'a> {
    pub fn new(method: &'a str, path: &'a str, caller: Caller) -> Req<'a> {
        Req { method, path, caller, body: String::new(), headers: Vec::new(), consulted: None }
    }

    pub fn consulted(mut self, status: u16, body: Vec<u8>) -> Req<'a> {
        self.consulted = Some((status, body));
        self
    }

    pub fn body(mut self, body: &Value) -> Req<'a> {
        self.body = body.to_string();
        self
    }

    pub fn header(mut self, name: &'a str, value: &str) -> Req<'a> {
        self.headers.push((name, value.to_owned()));
        self
    }
}

/// Serves `req` on `t` (the path's query string included), as the Worker
/// and the object would: the route found, a body-addressed route addressed
/// from its body, then served on the thread.
pub fn serve<S: Store, K: Sink>(t: &mut Thread<S, K>, settings: &Settings, req: Req, now: i64) -> Outcome {
    let (path, query) = req.path.split_once('?').unwrap_or((req.path, ""));
    let mut route = protocols::parse(req.method, path).0.expect("a valid route");
    if route.target() == Target::Body {
        let body: Value = serde_json::from_str(&req.body).expect("a JSON body");
        route.address(&body, &|prefix| format!("{prefix}_new")).expect("the body names its thread");
    }
    let query = threadline_durable::query_pairs(query);
    let headers = req.headers.clone();
    let header = move |name: &str| headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone());
    let call = Call {
        caller: &req.caller,
        query: &query,
        header: &header,
        body: req.body.as_bytes(),
        origin: "https://threads.test",
        random: 42,
        instance: &Default::default(),
        budget: None,
        files: &[],
        reserve: false,
        consulted: req.consulted.as_ref().map(|(status, body)| Consulted { status: *status, body }),
    };
    protocols::handle(t, &route, &call, settings, now)
}

/// Serves `req` on thread `thread` of `threads`, as the object's shell
/// does: when the core asks another object first (`Answer::Consult`), that
/// object (a thread of `threads`, made empty when missing) answers, and the
/// request is served again with its answer.
pub fn serve_among(
    threads: &mut std::collections::BTreeMap<String, T>,
    thread: &str,
    settings: &Settings,
    req: Req,
    now: i64,
) -> Outcome {
    let first = serve(threads.get_mut(thread).expect("the thread"), settings, req.clone(), now);
    let Answer::Consult(asked) = first.answer else { return first };
    let (status, body) = answer_call(threads, &asked, settings, now, 0);
    serve(threads.get_mut(thread).unwrap(), settings, req.consulted(status, body), now)
}

/// An object's own call, answered by its thread as its shell would: a
/// thread that asks another object first (a fork of a fork) gets its
/// answer, and serves the call again with it.
fn answer_call(
    threads: &mut std::collections::BTreeMap<String, T>,
    asked: &forward::ObjectCall,
    settings: &Settings,
    now: i64,
    depth: usize,
) -> (u16, Vec<u8>) {
    assert!(depth < 8, "objects ask each other in a loop");
    let ctx: protocols::Context = forward::decode(Some(&asked.context)).expect("the call's context");
    let forward::Object::Thread(other) = &asked.object else { panic!("a thread is asked") };
    let body = match &asked.body {
        forward::Body::Bytes(b) => b.clone(),
        _ => Vec::new(),
    };
    let mut consulted: Option<(u16, Vec<u8>)> = None;
    loop {
        let target = threads.entry(other.clone()).or_insert_with(|| thread_of(settings));
        let headers = |_: &str| None;
        let call = Call {
            caller: &ctx.caller,
            query: &[],
            header: &headers,
            body: &body,
            origin: "https://object",
            random: 7,
            instance: &Default::default(),
            budget: None,
            files: &[],
            reserve: false,
            consulted: consulted.as_ref().map(|(status, body)| Consulted { status: *status, body }),
        };
        match protocols::handle(target, &ctx.route, &call, settings, now).answer {
            Answer::Reply(r) => return (r.status, r.body),
            Answer::Consult(next) if consulted.is_none() => {
                consulted = Some(answer_call(threads, &next, settings, now, depth + 1));
            }
            other => panic!("an object's call is answered with a reply, not {other:?}"),
        }
    }
}

/// An empty thread configured by `settings`.
fn thread_of(settings: &Settings) -> T {
    thread(settings)
}

/// The status of an outcome (a stream opened counts as 200).
pub fn status(o: &Outcome) -> u16 {
    match &o.answer {
        Answer::Reply(r) => r.status,
        _ => 200,
    }
}

/// The JSON body of a reply outcome.
pub fn json(o: &Outcome) -> Value {
    match &o.answer {
        Answer::Reply(r) => serde_json::from_slice(&r.body).unwrap_or(Value::Null),
        other => panic!("not a reply: {other:?}"),
    }
}

/// The error code of a refusal.
pub fn code(o: &Outcome) -> String {
    json(o)["error"]["code"].as_str().unwrap_or_default().to_owned()
}

/// Parses SSE bytes into `(id, event)` pairs.
pub fn parse(bytes: &[u8]) -> Vec<(Option<u64>, Event)> {
    let text = std::str::from_utf8(bytes).unwrap();
    let mut out = Vec::new();
    for frame in text.split("\n\n").filter(|f| !f.is_empty()) {
        let mut id = None;
        let mut data = None;
        for line in frame.lines() {
            if let Some(v) = line.strip_prefix("id: ") {
                id = Some(v.parse().unwrap());
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = Some(v.to_owned());
            }
        }
        if let Some(d) = data {
            out.push((id, serde_json::from_str(&d).unwrap()));
        }
    }
    out
}

/// The thread's durable log, parsed.
pub fn log(t: &T) -> Vec<Event> {
    t.journal().store().records.iter().map(|r| serde_json::from_str(&r.data).unwrap()).collect()
}

/// An in-memory SQLite (the engine Durable Objects run) as the core's
/// [`Db`](threadline_durable::Db).
pub struct Lite(pub rusqlite::Connection);

/// A fresh, empty in-memory SQLite.
pub fn lite() -> Lite {
    Lite(rusqlite::Connection::open_in_memory().unwrap())
}

impl threadline_durable::Db for Lite {
    fn run(
        &self,
        sql: &str,
        args: &[threadline_durable::Value],
    ) -> threadline_durable::storage::store::StoreResult<threadline_durable::Rows> {
        use rusqlite::types::{Value as V, ValueRef};
        use threadline_durable::{failed, Rows, Value};
        let mut stmt = self.0.prepare(sql).map_err(failed)?;
        let params: Vec<V> = args
            .iter()
            .map(|a| match a {
                Value::Null => V::Null,
                Value::Int(i) => V::Integer(*i),
                Value::Real(f) => V::Real(*f),
                Value::Text(s) => V::Text(s.clone()),
                Value::Blob(b) => V::Blob(b.clone()),
            })
            .collect();
        let columns = stmt.column_count();
        let before = self.0.total_changes();
        let mut rows = stmt.query(rusqlite::params_from_iter(params)).map_err(failed)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(failed)? {
            let mut values = Vec::with_capacity(columns);
            for i in 0..columns {
                values.push(match row.get_ref(i).map_err(failed)? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(i) => Value::Int(i),
                    ValueRef::Real(f) => Value::Real(f),
                    ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(b) => Value::Blob(b.to_vec()),
                });
            }
            out.push(values);
        }
        drop(rows);
        Ok(Rows { rows: out, written: self.0.total_changes() - before })
    }
}

/// SQLite that keeps the statements it runs (their first words).
pub struct Counted(pub Lite, RefCell<Vec<String>>);

impl Counted {
    pub fn new() -> Counted {
        Counted(lite(), RefCell::default())
    }

    /// The statements run since the last take.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.1.borrow_mut())
    }
}

impl threadline_durable::Db for Counted {
    fn run(
        &self,
        sql: &str,
        args: &[threadline_durable::Value],
    ) -> threadline_durable::storage::store::StoreResult<threadline_durable::Rows> {
        self.1.borrow_mut().push(sql.split_whitespace().take(6).collect::<Vec<_>>().join(" "));
        threadline_durable::Db::run(&self.0, sql, args)
    }
}
