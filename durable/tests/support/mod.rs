//! What the native tests share: a sink that keeps its bytes, a thread on a
//! memory store, requests through the thread's service as the object shell
//! hands them over, and an SSE parser.

#![allow(dead_code)]

use bytes::Bytes;
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;
use threadline_durable::access::Caller;
use threadline_durable::event::Event;
use threadline_durable::request;
use threadline_durable::route::Route;
use threadline_durable::thread::service::{Answer, Incoming, Outcome};
use threadline_durable::{MemoryStore, Settings, Sink, Thread};

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

/// An authenticated actor.
pub fn actor(id: &str, roles: &[&str]) -> Caller {
    Caller::Actor { id: id.into(), roles: roles.iter().map(|r| (*r).to_owned()).collect() }
}

/// A request as the object shell hands it to the thread.
pub struct Req<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub caller: Caller,
    pub body: String,
    pub headers: Vec<(&'a str, String)>,
}

impl<'a> Req<'a> {
    pub fn new(method: &'a str, path: &'a str, caller: Caller) -> Req<'a> {
        Req { method, path, caller, body: String::new(), headers: Vec::new() }
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

/// Serves `req` on `t` (the path's query string included).
pub fn serve(t: &mut T, settings: &Settings, req: Req, now: i64) -> Outcome {
    let (path, query) = req.path.split_once('?').unwrap_or((req.path, ""));
    let route = Route::parse(req.method, path).expect("a valid route");
    let query = request::query_pairs(query);
    let headers = req.headers.clone();
    let header = move |name: &str| headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone());
    let incoming = Incoming {
        route: &route,
        caller: &req.caller,
        query: &query,
        header: &header,
        body: req.body.as_bytes(),
        origin: "https://threads.test",
        random: 42,
        instance: &Default::default(),
    };
    t.handle(&incoming, settings, now)
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
    t.store().records.iter().map(|r| serde_json::from_str(&r.data).unwrap()).collect()
}
