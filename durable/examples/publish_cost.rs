//! How much CPU the core spends per published event, natively (the Worker
//! runs the same code as wasm). `cargo run --release -p threadline-durable --example publish_cost`
use serde_json::json;
use std::time::Instant;
use threadline_durable::thread::Discard;
use threadline_durable::{Config, MemoryStore, StartRun, Thread};

fn main() {
    let mut t: Thread<MemoryStore, Discard> = Thread::load(MemoryStore::default(), Config::default(), 0).unwrap();
    t.start_run(
        StartRun {
            run_id: "r".into(),
            message_id: "m".into(),
            message: "x".into(),
            publish_token: "k".into(),
            driver: threadline_durable::storage::store::Driver::Webhook,
            model: None,
            turn: Default::default(),
            place: Default::default(),
        },
        0,
    )
    .unwrap();
    let batch = |b: usize| -> Vec<serde_json::Value> {
        (0..1000)
            .map(|i| json!({"type":"tool-call","agentId":"orchestrator","payload":{"toolCallId":format!("m{b}-{i}"),"toolName":"bench","args":{}}}))
            .collect()
    };
    let batches: Vec<_> = (0..60).map(batch).collect();
    let t0 = Instant::now();
    for (i, b) in batches.into_iter().enumerate() {
        t.publish("r", b, i as i64).unwrap();
    }
    let el = t0.elapsed();
    println!("60,000 tool-calls: {:?} ({:.0} events/s)", el, 60_000.0 / el.as_secs_f64());
}
