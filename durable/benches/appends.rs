//! Where a durable append's time goes in the core, natively (`cargo bench
//! -p threadline-durable --bench appends`): 60 batches of 1,000 tool calls
//! published into one run, as the object's shell hands them over, on
//! SQLite (the engine Durable Objects run, in memory) and on the memory
//! store, the steps of one publish timed apart, and publishes of one event
//! (what a publish costs beside its events). Prints figures; decides
//! nothing (the Worker's own figures are `make bench`'s).

#[path = "../tests/support/mod.rs"]
mod support;

use serde_json::{json, Value};
use std::time::Instant;
use support::{actor, serve, token_of, Req};
use threadline_durable::storage::store::SqlStore;
use threadline_durable::thread::Discard;
use threadline_durable::{Caller, Db, MemoryStore, Settings, Store, Thread};

const BATCHES: usize = 60;
const BATCH: usize = 1_000;

fn batch(b: usize) -> String {
    let events: Vec<Value> = (0..BATCH)
        .map(|i| {
            json!({"type": "tool-call", "agentId": "orchestrator",
                   "payload": {"toolCallId": format!("m{}", b * BATCH + i), "toolName": "bench", "args": {}}})
        })
        .collect();
    serde_json::to_string(&events).unwrap()
}

/// Starts a run on `t`: its publish path, and the bearer its agent holds.
fn start_run<S: Store>(t: &mut Thread<S, Discard>, settings: &Settings) -> (String, String) {
    let chat = Req::new("POST", "/instance-ai/chat/bench", actor("ann", &[])).body(&json!({"message": "go"}));
    let out = serve(t, settings, chat, 1);
    let run = support::json(&out)["runId"].as_str().unwrap().to_owned();
    let token = token_of(&out.effects, &run);
    (format!("/instance-ai/threads/bench/runs/{run}/events"), format!("Bearer {token}"))
}

/// Seconds to publish each of `bodies` into a new run on `t`, through the
/// route.
fn publish_timed<S: Store>(t: &mut Thread<S, Discard>, settings: &Settings, bodies: &[String]) -> f64 {
    let (path, bearer) = start_run(t, settings);
    let t0 = Instant::now();
    for (i, body) in bodies.iter().enumerate() {
        let mut req = Req::new("POST", &path, Caller::Nobody).header("authorization", &bearer);
        req.body = body.clone();
        let out = serve(t, settings, req, 2 + i as i64);
        assert_eq!(support::status(&out), 200, "{:?}", support::json(&out));
    }
    t0.elapsed().as_secs_f64()
}

/// Events per second publishing every batch on `t`, through the route.
fn publish_all<S: Store>(mut t: Thread<S, Discard>, settings: &Settings, bodies: &[String]) -> f64 {
    (BATCHES * BATCH) as f64 / publish_timed(&mut t, settings, bodies)
}

/// The statements one publish of one event runs, once the run is going.
fn statements_of_one_publish(settings: &Settings) -> Vec<String> {
    let db = support::Counted::new();
    let mut t: Thread<SqlStore<support::Counted>, Discard> =
        Thread::load(SqlStore::open(db).unwrap(), settings.thread.clone(), 0).unwrap();
    let (path, bearer) = start_run(&mut t, settings);
    let mut req = Req::new("POST", &path, Caller::Nobody).header("authorization", &bearer);
    req.body = batch(0).replace("},{", "}]!").split('!').next().unwrap().to_owned();
    if !req.body.ends_with(']') {
        req.body.push(']');
    }
    serve(&mut t, settings, req.clone(), 2);
    t.journal().store().db().take();
    serve(&mut t, settings, req, 3);
    t.journal().store().db().take()
}

/// µs per publish of one event through the route, on SQLite: a publish's
/// own cost in the core, beside what its events cost.
fn one_event_publishes(settings: &Settings, n: usize) -> f64 {
    let mut t: Thread<SqlStore<_>, Discard> =
        Thread::load(SqlStore::open(support::lite()).unwrap(), settings.thread.clone(), 0).unwrap();
    let bodies: Vec<String> = (0..n)
        .map(|i| {
            json!([{"type": "tool-call", "agentId": "orchestrator",
                    "payload": {"toolCallId": format!("one{i}"), "toolName": "bench", "args": {}}}])
            .to_string()
        })
        .collect();
    publish_timed(&mut t, settings, &bodies) / n as f64 * 1e6
}

fn main() {
    let settings = Settings::from_pairs(&[
        ("AGENT_WEBHOOK_URL", "http://hook"),
        ("AUTH_MODE", "dev"),
        ("MAX_BATCH_EVENTS", "5000"),
        ("MAX_BATCH_BYTES", "8388608"),
    ]);
    let bodies: Vec<String> = (0..BATCHES).map(batch).collect();

    let ran = statements_of_one_publish(&settings);
    println!("one publish of one event runs {} statements:", ran.len());
    for sql in &ran {
        println!("  {sql}");
    }
    for round in 0..3 {
        println!(
            "round {round}: one publish of one event, through the route on SQLite: {:.1} µs",
            one_event_publishes(&settings, 20_000)
        );
        let sql = Thread::load(SqlStore::open(support::lite()).unwrap(), settings.thread.clone(), 0).unwrap();
        let sqlite = publish_all(sql, &settings, &bodies);
        let mem = Thread::load(MemoryStore::default(), settings.thread.clone(), 0).unwrap();
        let memory = publish_all(mem, &settings, &bodies);
        // The steps of a batch, apart.
        let t0 = Instant::now();
        for body in &bodies {
            let v: Vec<Value> = serde_json::from_str(body).unwrap();
            std::hint::black_box(v);
        }
        let parse = t0.elapsed().as_secs_f64();
        let values: Vec<Vec<Value>> = bodies.iter().map(|b| serde_json::from_str(b).unwrap()).collect();
        let t0 = Instant::now();
        let mut events = Vec::new();
        for batch in &values {
            for v in batch {
                let ev = threadline_durable::parse_published(v.clone(), "r", 1).unwrap();
                std::hint::black_box(ev.payload.encoded_len());
                events.push(ev);
            }
        }
        let typed = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        for ev in &events {
            std::hint::black_box(ev.to_json());
        }
        let to_json = t0.elapsed().as_secs_f64();
        let lite = support::lite();
        lite.run("CREATE TABLE events (seq INTEGER PRIMARY KEY, run_id TEXT, type TEXT, data TEXT)", &[]).unwrap();
        let datas: Vec<String> = events.iter().map(|e| e.to_json()).collect();
        let t0 = Instant::now();
        for (b, chunk) in datas.chunks(BATCH).enumerate() {
            let rows: Vec<Value> =
                chunk.iter().enumerate().map(|(i, d)| json!([b * BATCH + i + 1, "r", "tool-call", d])).collect();
            lite.run(
                "INSERT INTO events (seq, run_id, type, data) SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]') FROM json_each(?)",
                &[Value::Array(rows).to_string().into()],
            )
            .unwrap();
        }
        let insert = t0.elapsed().as_secs_f64();
        let n = (BATCHES * BATCH) as f64;
        let us = |s: f64| s / n * 1e6;
        println!(
            "round {round}: through the route {sqlite:.0}/s on SQLite, {memory:.0}/s on memory | per event: JSON parse {:.2} µs, typed + size {:.2} µs, to_json {:.2} µs, SQLite insert (json_each) {:.2} µs",
            us(parse),
            us(typed),
            us(to_json),
            us(insert)
        );
    }
}
