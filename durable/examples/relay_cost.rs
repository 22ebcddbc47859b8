//! How much CPU a relay spends turning the object's socket messages into a
//! client's SSE frames (the events route), natively: the Worker runs the
//! same code as wasm once per subscriber per publish.
//! `cargo run --release -p threadline-durable --example relay_cost`
use std::time::Instant;
use threadline_durable::feed::{socket, Relay};
use threadline_durable::protocols::instance_ai::stream::Events;

fn main() {
    let mut hello = Vec::new();
    socket::hello(0, 0, 0, &mut hello);
    socket::page_end(0, &mut hello);
    // One publish of 1,000 tool calls, as the object sends it.
    let mut message = Vec::new();
    for i in 0..1000u64 {
        let event = format!(
            r#"{{"type":"tool-call","runId":"t.run_0123456789abcdef01234567","agentId":"orchestrator","ts":1796073870136,"payload":{{"toolCallId":"m{i}","toolName":"bench","args":{{}}}}}}"#
        );
        socket::durable(i + 1, &event, &mut message);
    }
    let message = String::from_utf8(message).expect("feed lines are UTF-8");
    let mut relay = Relay::new(Events);
    relay.on_message(std::str::from_utf8(&hello).expect("UTF-8"), 0, 0);
    let rounds = 600;
    let start = Instant::now();
    let mut written = 0;
    for _ in 0..rounds {
        written += relay.on_message(&message, 0, 0).out.len();
    }
    let elapsed = start.elapsed();
    println!(
        "{rounds} messages of {} bytes (1,000 events each): {elapsed:?}, {:.1} µs per message, {:.0} MB/s of frames written",
        message.len(),
        elapsed.as_secs_f64() * 1e6 / rounds as f64,
        written as f64 / elapsed.as_secs_f64() / 1e6,
    );
}
