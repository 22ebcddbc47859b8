//! The thread's rules, natively: the run lock, the publish path, replay and
//! live with no gap and no duplicate, fold(replay) == fold(live), storage
//! faults, the restart sweep and the idle timeout.

use bytes::Bytes;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::rc::Rc;
use threadline_durable::feed::Relay;
use threadline_durable::protocols::instance_ai::stream::Events;
use threadline_durable::storage::store::{Driver, MemoryStore};
use threadline_durable::{fold, Access, AgentNode, ApiError, Config, Event, Follow, Sink, StartRun, Store, Thread};

/// A subscriber's socket: the messages the thread sent it, in order;
/// `closed` simulates a client that went away.
#[derive(Clone, Default)]
struct VecSink {
    messages: Rc<RefCell<Vec<Bytes>>>,
    closed: Rc<RefCell<bool>>,
}

impl Sink for VecSink {
    fn send(&mut self, message: Bytes) -> bool {
        if *self.closed.borrow() {
            return false;
        }
        self.messages.borrow_mut().push(message);
        true
    }
    fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }
}

type T = Thread<MemoryStore, VecSink>;

fn thread() -> T {
    Thread::load(MemoryStore::default(), Config::default(), 0).unwrap()
}

fn start(t: &mut T, run: &str, now: i64) {
    t.start_run(
        StartRun {
            run_id: run.into(),
            message_id: format!("msg-{run}"),
            message: "hi".into(),
            publish_token: format!("token-{run}"),
            driver: Driver::Webhook,
            model: None,
            turn: Default::default(),
            place: Default::default(),
        },
        now,
    )
    .unwrap();
}

/// Parses SSE bytes into `(id, event)` pairs: the messages, as an
/// EventSource's onmessage gets them (a named `run-sync` is not one).
fn parse(bytes: &[u8]) -> Vec<(Option<u64>, Event)> {
    let text = std::str::from_utf8(bytes).unwrap();
    let mut out = Vec::new();
    for frame in text.split("\n\n").filter(|f| !f.is_empty() && !f.starts_with("event:")) {
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

/// One SSE connection as the Worker relays it: the hello, then the socket's
/// messages in order, with the replay pages the relay asks for answered
/// when the test steps.
struct Conn {
    sink: VecSink,
    relay: Relay<Events>,
    /// The SSE bytes the client has received.
    out: Vec<u8>,
    /// Socket messages already relayed.
    taken: usize,
    page: Option<(u64, u64)>,
    cursor: u64,
}

impl Conn {
    fn open(t: &mut T, cursor: u64) -> Conn {
        let sink = VecSink::default();
        let id = NEXT.with(|n| {
            n.set(n.get() + 1);
            n.get()
        });
        let hello = t.subscribe(id, Follow::log(), cursor, sink.clone()).unwrap();
        let mut c = Conn { sink, relay: Relay::new(Events), out: Vec::new(), taken: 0, page: None, cursor };
        c.relay_message(&hello);
        c
    }

    fn relay_message(&mut self, message: &[u8]) {
        let step = self.relay.on_message(std::str::from_utf8(message).unwrap(), 0, 0);
        self.out.extend_from_slice(&step.out);
        if let Some(p) = step.page {
            self.page = threadline_durable::feed::socket::parse_page_request(&p);
        }
    }

    /// Relays the socket's messages that arrived.
    fn pump(&mut self) {
        let messages: Vec<Bytes> = self.sink.messages.borrow()[self.taken..].to_vec();
        self.taken += messages.len();
        for m in messages {
            self.relay_message(&m);
        }
    }

    /// Answers one replay page; `false` once the replay is done.
    fn step(&mut self, t: &T) -> bool {
        self.pump();
        let Some((after, high)) = self.page.take() else { return false };
        let page = t.journal().replay_page(&Follow::log(), after, high, t.config().replay_page).unwrap();
        self.relay_message(&page);
        true
    }

    fn drain(&mut self, t: &T) {
        while self.step(t) {}
    }

    /// Everything the client has received, in order.
    fn received(&mut self) -> Vec<(Option<u64>, Event)> {
        self.pump();
        parse(&self.out)
    }
}

thread_local! {
    static NEXT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn tree(events: &[Event]) -> Option<AgentNode> {
    fold(events).tree()
}

fn durable_log(t: &T) -> Vec<Event> {
    t.journal().store().records.iter().map(|r| serde_json::from_str(&r.data).unwrap()).collect()
}

#[test]
fn run_lock_is_a_compare_and_set() {
    let mut t = thread();
    start(&mut t, "r1", 0);
    let err: ApiError = t
        .start_run(
            StartRun {
                run_id: "r2".into(),
                message_id: "m".into(),
                message: "x".into(),
                publish_token: "k".into(),
                driver: Driver::Webhook,
                model: None,
                turn: Default::default(),
                place: Default::default(),
            },
            1,
        )
        .unwrap_err()
        .into();
    assert_eq!((err.status, err.code), (409, "run_active"));
    assert_eq!(err.details["runId"], "r1");
    assert_eq!(t.cancel(2).unwrap().as_deref(), Some("r1"));
    assert_eq!(t.cancel(3).unwrap(), None, "idempotent");
    start(&mut t, "r2", 4);
    assert_eq!(t.runs().active_run().unwrap().run_id, "r2");
}

#[test]
fn publish_tokens_are_scoped_to_their_run() {
    let mut t = thread();
    start(&mut t, "r1", 0);
    assert_eq!(authorize(&t, "r1", None).unwrap_err().status, 401);
    assert_eq!(authorize(&t, "r1", Some("token-r2")).unwrap_err().status, 403);
    assert_eq!(authorize(&t, "nope", Some("token-r1")).unwrap_err().status, 404);
    authorize(&t, "r1", Some("token-r1")).unwrap();
    // A finished run still knows its token: the answer is 409, not 403.
    t.cancel(1).unwrap();
    authorize(&t, "r1", Some("token-r1")).unwrap();
    let e: ApiError =
        t.publish("r1", vec![json!({"type":"status","agentId":"a","payload":{"message":"x"}})], 2).unwrap_err().into();
    assert_eq!((e.status, e.code), (409, "run_finished"));
}

#[test]
fn invalid_batch_stores_nothing_and_names_the_index() {
    let mut t = thread();
    start(&mut t, "r1", 0);
    let before = t.journal().store().records.len();
    let e: ApiError = t
        .publish(
            "r1",
            vec![
                json!({"type":"text-delta","agentId":"a","responseId":"s","payload":{"text":"x"}}),
                json!({"type":"tool-call","agentId":"a","payload":{"toolCallId":"t","toolName":"n","args":{}}}),
                json!({"type":"tool-call","agentId":"a","payload":{}}),
            ],
            1,
        )
        .unwrap_err()
        .into();
    assert_eq!((e.status, e.code), (400, "invalid_event"));
    assert_eq!(e.details["index"], 2);
    assert_eq!(t.journal().store().records.len(), before);
    assert_eq!(t.journal().buffered_bytes(), 0, "the refused batch's delta was not buffered");
}

#[test]
fn storage_fault_sends_nothing_and_keeps_seqs_contiguous() {
    let mut t = thread();
    start(&mut t, "r1", 0);
    let mut c = Conn::open(&mut t, 0);
    t.journal_mut().store_mut().fail_commits = 1;
    let e: ApiError = t
        .publish(
            "r1",
            vec![json!({"type":"tool-call","agentId":"a","payload":{"toolCallId":"t","toolName":"n","args":{}}})],
            1,
        )
        .unwrap_err()
        .into();
    assert_eq!((e.status, e.code), (503, "storage_unavailable"));
    assert_eq!(t.journal().last_seq(), 1);
    assert!(c.sink.messages.borrow().is_empty(), "nothing sent that was not stored");
    t.publish(
        "r1",
        vec![json!({"type":"tool-call","agentId":"a","payload":{"toolCallId":"t2","toolName":"n","args":{}}})],
        2,
    )
    .unwrap();
    let seqs: Vec<u64> = t.journal().store().records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, vec![1, 2]);
    // The subscriber got the replay (1), then 2 live: the refused fact never.
    let ids: Vec<_> = c.received().into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, [Some(1), Some(2)]);
}

/// A request that appended waits a turn before answering only when the
/// thread has a subscriber the append may have gone to (the yield keeps
/// its answer off the delivery's path; with nobody subscribed it is CPU
/// for nothing).
#[test]
fn an_append_is_delivered_after_only_with_a_subscriber() {
    let mut t = thread();
    start(&mut t, "r1", 0);
    let call = |i: u32| {
        vec![
            json!({"type":"tool-call","agentId":"a","payload":{"toolCallId":format!("t{i}"),"toolName":"n","args":{}}}),
        ]
    };
    let before = t.journal().last_seq();
    t.publish("r1", call(1), 1).unwrap();
    assert!(!t.journal().delivered_after(before), "no subscriber: nothing was delivered");
    let mut c = Conn::open(&mut t, 0);
    let before = t.journal().last_seq();
    assert!(!t.journal().delivered_after(before), "nothing appended yet");
    t.publish("r1", call(2), 2).unwrap();
    assert!(t.journal().delivered_after(before), "appended, and sent to the subscriber");
    assert_eq!(c.received().last().map(|(id, _)| *id), Some(Some(before + 1)));
}

#[test]
fn closed_subscribers_are_dropped_on_the_next_send() {
    let mut t = thread();
    start(&mut t, "r1", 0);
    let a = Conn::open(&mut t, 0);
    let _b = Conn::open(&mut t, 0);
    assert_eq!(t.journal_mut().subscribers().len(), 2);
    *a.sink.closed.borrow_mut() = true;
    t.journal_mut().subscribers().prune();
    assert_eq!(t.journal_mut().subscribers().len(), 1);
    t.journal_mut().subscribers().remove(2);
    assert_eq!(t.journal_mut().subscribers().len(), 0);
}

/// A full thread refuses the next subscriber and probes those it has: each
/// relay answers with its keep-alive (a write is how a Worker finds a client
/// that left), while a relay still replaying writes nothing extra.
#[test]
fn a_full_thread_probes_its_subscribers() {
    let mut t = thread();
    start(&mut t, "r1", 0);
    let mut a = Conn::open(&mut t, 0);
    a.drain(&t);
    let before = a.out.len();
    let err = ApiError::from(t.journal_mut().subscribers().make_room(1).unwrap_err());
    assert_eq!(err.code, "too_many_subscribers");
    a.pump();
    assert_eq!(&a.out[before..], threadline_durable::PING, "the probe is answered with the keep-alive");
    // The client left: its relay ends and unsubscribes; the room is back.
    t.journal_mut().subscribers().remove(NEXT.with(|n| n.get()));
    assert!(t.journal_mut().subscribers().make_room(1).is_ok());
}

#[test]
fn restart_sweep_interrupts_open_tool_calls_but_spares_a_healthy_run() {
    let config = Config { restart_grace_ms: 1_000, ..Config::default() };
    let mut t = thread();
    start(&mut t, "r1", 0);
    t.publish(
        "r1",
        vec![
            json!({"type":"tool-call","agentId":"orchestrator","payload":{"toolCallId":"open","toolName":"n","args":{}}}),
            json!({"type":"agent-spawned","agentId":"sub","payload":{"parentId":"orchestrator","role":"r","tools":[]}}),
            json!({"type":"tool-call","agentId":"sub","payload":{"toolCallId":"sub-open","toolName":"n","args":{}}}),
        ],
        1,
    )
    .unwrap();
    let store = std::mem::take(t.journal_mut().store_mut());

    // Healthy: it publishes after the restart, within the grace.
    let mut healthy: T = Thread::load(clone_store(&store), config.clone(), 10_000).unwrap();
    assert_eq!(healthy.runs().deadline(healthy.config()), Some(11_000));
    healthy
        .publish("r1", vec![json!({"type":"status","agentId":"orchestrator","payload":{"message":"alive"}})], 10_500)
        .unwrap();
    assert_eq!(healthy.clock().check_run_deadlines(20_000).unwrap(), None);
    assert!(healthy.runs().active_run().is_some());

    // Silent: swept after the grace, not before.
    let mut dead: T = Thread::load(store, config, 10_000).unwrap();
    assert_eq!(dead.clock().check_run_deadlines(10_999).unwrap(), None);
    assert_eq!(dead.clock().check_run_deadlines(11_000).unwrap(), Some(("r1".into(), "crash_interrupted")));
    let log = durable_log(&dead);
    let tail: Vec<_> = log[log.len() - 3..].iter().map(|e| (e.kind().as_str(), e.payload_json())).collect();
    assert_eq!(tail[0].0, "tool-interrupted");
    assert_eq!(tail[0].1["toolCallId"], "open");
    assert_eq!(tail[1].1["toolCallId"], "sub-open");
    assert_eq!(tail[2], ("run-finish", json!({"status":"interrupted","reason":"crash_interrupted"})));
    assert_eq!(dead.journal().store().running().unwrap(), None);
}

#[test]
fn a_dead_holder_is_replaced_by_the_next_resume_and_the_handoff_is_the_runs_last_event() {
    let config = Config { restart_grace_ms: 1_000, ..Config::default() };
    let mut t: T = Thread::load(MemoryStore::default(), config.clone(), 0).unwrap();
    t.journal_mut().set_thread_id("t");
    start(&mut t, "r1", 0);
    let (item, position, started) = t.enqueue("next".into(), None, Default::default(), None, 5).unwrap();
    assert_eq!((position, started.is_none()), (0, true));
    let store = std::mem::take(t.journal_mut().store_mut());

    // The object restarted: the run is found open, its agent gone with the
    // old instance. Within the grace of its last event it may be alive.
    let mut after: T = Thread::load(store, config, 500).unwrap();
    after.journal_mut().set_thread_id("t");
    assert!(!after.clock().dead_holder(900));
    after.clock().replace_dead_holder(900).unwrap();
    assert_eq!(after.runs().active_run().unwrap().run_id, "r1");
    // Silent past the grace: the resume replaces it, and the queue's head starts.
    // A sender on a thread nobody owns is let in to resume its queue.
    let sender = threadline_durable::Caller::Actor { id: "u".into(), roles: Vec::new() };
    let admitted = after.admit(Access::Send, ApiError::thread_not_found(), &sender, None).unwrap();
    after.edit_queue(&admitted, threadline_durable::thread::QueueEdit::Pause(false), 1_500).unwrap();
    assert_eq!(after.runs().active_run().unwrap().run_id, item.run_id);
    let log = durable_log(&after);
    let r1: Vec<_> = log.iter().filter(|e| e.run_id == "r1").collect();
    let (handoff, finish) = (r1[r1.len() - 2], r1[r1.len() - 1]);
    assert_eq!(finish.payload_json(), json!({"status": "interrupted", "reason": "crash_interrupted"}));
    // What follows is announced in the finishing run, before its finish.
    assert_eq!(handoff.kind().as_str(), "queue-updated");
    assert_eq!(handoff.payload_json()["started"], json!({"messageId": item.message_id, "runId": item.run_id}));
    assert_eq!(handoff.payload_json()["items"], json!([]));
}

fn clone_store(s: &MemoryStore) -> MemoryStore {
    let mut copy = MemoryStore::default();
    copy.records = s.records.clone();
    copy.runs = s.runs.clone();
    copy
}

#[test]
fn idle_timeout_ends_a_silent_run() {
    let mut t: T =
        Thread::load(MemoryStore::default(), Config { run_idle_timeout_ms: 100, ..Config::default() }, 0).unwrap();
    start(&mut t, "r1", 0);
    t.publish("r1", vec![json!({"type":"status","agentId":"orchestrator","payload":{"message":"x"}})], 50).unwrap();
    assert_eq!(t.runs().deadline(t.config()), Some(150));
    assert_eq!(t.clock().check_run_deadlines(149).unwrap(), None);
    assert_eq!(t.clock().check_run_deadlines(150).unwrap(), Some(("r1".into(), "timeout")));
    assert_eq!(durable_log(&t).last().unwrap().payload_json(), json!({"status":"error","reason":"timeout"}));
}

#[test]
fn a_thousand_deltas_cost_one_row() {
    let mut t = thread();
    start(&mut t, "r1", 0);
    let before = t.journal().store().rows_written();
    for chunk in 0..10 {
        let batch = (0..100)
            .map(|i| json!({"type":"text-delta","agentId":"orchestrator","responseId":"s","payload":{"text":format!("{chunk}-{i} ")}}))
            .collect();
        t.publish("r1", batch, 1).unwrap();
    }
    assert_eq!(t.journal().store().rows_written(), before, "deltas are not stored one by one");
    t.publish("r1", vec![json!({"type":"run-finish","agentId":"orchestrator","payload":{"status":"completed"}})], 2)
        .unwrap();
    // The block, run-finish, and the run's record.
    assert_eq!(t.journal().store().rows_written() - before, 3);
}

// ---------------------------------------------------------------------------
// The contract: whatever the interleaving of publishes, idle flushes,
// connects, replay pages and reconnects, every connection receives each
// durable fact above its cursor exactly once and in order, and every client
// folds the same tree as one that never disconnected and as the stored log.

#[derive(Clone, Debug)]
enum Op {
    /// Publish a batch of event templates.
    Publish(Vec<Tmpl>),
    /// Advance the clock by this many ms and run the idle flush.
    Idle(i64),
    /// Read one replay page of client `i`.
    Page(usize),
    /// Client `i` drops and reconnects from the max id it has seen.
    Reconnect(usize),
}

#[derive(Clone, Debug)]
enum Tmpl {
    Text { agent: u8, seg: u8, text: String },
    Reasoning { agent: u8, seg: u8, text: String },
    TextNoId { agent: u8, text: String },
    ToolCall { agent: u8, id: u8 },
    ToolResult { agent: u8, id: u8 },
    Spawn { agent: u8 },
    Status,
}

fn agent_name(a: u8) -> String {
    if a == 0 {
        "orchestrator".into()
    } else {
        format!("sub{a}")
    }
}

fn render(t: &Tmpl) -> Value {
    match t {
        Tmpl::Text { agent, seg, text } => {
            json!({"type":"text-delta","agentId":agent_name(*agent),"responseId":format!("s{seg}"),"payload":{"text":text}})
        }
        Tmpl::Reasoning { agent, seg, text } => {
            json!({"type":"reasoning-delta","agentId":agent_name(*agent),"responseId":format!("s{seg}"),"payload":{"text":text}})
        }
        Tmpl::TextNoId { agent, text } => {
            json!({"type":"text-delta","agentId":agent_name(*agent),"payload":{"text":text}})
        }
        Tmpl::ToolCall { agent, id } => {
            json!({"type":"tool-call","agentId":agent_name(*agent),"payload":{"toolCallId":format!("t{agent}-{id}"),"toolName":"n","args":{"id":id}}})
        }
        Tmpl::ToolResult { agent, id } => {
            json!({"type":"tool-result","agentId":agent_name(*agent),"payload":{"toolCallId":format!("t{agent}-{id}"),"result":id}})
        }
        Tmpl::Spawn { agent } => {
            json!({"type":"agent-spawned","agentId":agent_name(*agent),"payload":{"parentId":"orchestrator","role":"helper","tools":[]}})
        }
        Tmpl::Status => json!({"type":"status","agentId":"orchestrator","payload":{"message":"working"}}),
    }
}

fn tmpl() -> impl Strategy<Value = Tmpl> {
    let agent = 0u8..3;
    let text = "[a-z ]{1,6}";
    prop_oneof![
        4 => (agent.clone(), 0u8..3, text).prop_map(|(agent, seg, text)| Tmpl::Text { agent, seg, text }),
        2 => (agent.clone(), 0u8..3, text).prop_map(|(agent, seg, text)| Tmpl::Reasoning { agent, seg, text }),
        1 => (agent.clone(), text).prop_map(|(agent, text)| Tmpl::TextNoId { agent, text }),
        1 => (agent.clone(), 0u8..4).prop_map(|(agent, id)| Tmpl::ToolCall { agent, id }),
        1 => (agent.clone(), 0u8..4).prop_map(|(agent, id)| Tmpl::ToolResult { agent, id }),
        1 => (1u8..3).prop_map(|agent| Tmpl::Spawn { agent }),
        1 => Just(Tmpl::Status),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop::collection::vec(tmpl(), 1..6).prop_map(Op::Publish),
        1 => prop_oneof![Just(100i64), Just(3_000i64)].prop_map(Op::Idle),
        3 => (0usize..3).prop_map(Op::Page),
        2 => (0usize..3).prop_map(Op::Reconnect),
    ]
}

/// A client across reconnects: its sessions' events folded in order.
struct Client {
    conn: Conn,
    seen: Vec<Event>,
    max_id: u64,
}

impl Client {
    /// Takes what the current connection delivered into `seen`, checking the
    /// durable ids are exactly `cursor+1, cursor+2, ...`.
    fn absorb(&mut self) {
        let mut expect = self.conn.cursor + 1;
        for (id, e) in self.conn.received() {
            if let Some(id) = id {
                assert_eq!(id, expect, "gap or duplicate at cursor {}", self.conn.cursor);
                expect += 1;
                self.max_id = id;
            }
            self.seen.push(e);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    #[test]
    fn replay_and_live_agree(ops in prop::collection::vec(op(), 1..60)) {
        let mut t = thread();
        let mut now = 0;
        start(&mut t, "r1", now);
        let reference = Conn::open(&mut t, 0);
        let mut clients: Vec<Client> = (0..3)
            .map(|_| Client { conn: Conn::open(&mut t, 0), seen: Vec::new(), max_id: 0 })
            .collect();
        for op in ops {
            match op {
                Op::Publish(batch) => {
                    now += 10;
                    t.publish("r1", batch.iter().map(render).collect(), now).unwrap();
                }
                Op::Idle(ms) => {
                    now += ms;
                    t.clock().flush_idle(now).unwrap();
                }
                Op::Page(i) => {
                    clients[i].conn.step(&t);
                }
                Op::Reconnect(i) => {
                    let c = &mut clients[i];
                    c.conn.drain(&t); // what was in flight arrives before the drop
                    c.absorb();
                    *c.conn.sink.closed.borrow_mut() = true;
                    t.journal_mut().subscribers().prune();
                    c.conn = Conn::open(&mut t, c.max_id);
                }
            }
        }
        now += 10;
        t.publish("r1", vec![json!({"type":"run-finish","agentId":"orchestrator","payload":{"status":"completed"}})], now).unwrap();

        let stored = durable_log(&t);
        let expected = tree(&stored);
        let mut reference = reference;
        reference.drain(&t);
        let live: Vec<Event> = reference.received().into_iter().map(|(_, e)| e).collect();
        prop_assert_eq!(&tree(&live), &expected, "fold(live) == fold(replay)");
        for c in &mut clients {
            c.conn.drain(&t);
            c.absorb();
            prop_assert_eq!(c.max_id, t.journal().last_seq());
            prop_assert_eq!(&tree(&c.seen), &expected, "a reconnecting client renders what a never-disconnected one does");
        }
    }
}

/// Flue's catch-up `view=updates`: a page ends only between records (one
/// record is one atomic batch of chunks), and reading on from each page's
/// offset yields every chunk once, in order.
#[test]
fn flue_catch_up_pages_never_split_a_record() {
    use threadline_durable::protocols::flue::history;
    let mut t = thread();
    start(&mut t, "r1", 0);
    let root = t.journal().store().records[0].data.clone();
    let root: Value = serde_json::from_str(&root).unwrap();
    let agent = root["agentId"].as_str().unwrap().to_owned();
    // Each tool-call projects to one chunk, each run-finish to two: more
    // chunks than a page, in records of different sizes.
    for i in 0..(history::PAGE_CHUNKS + 5) {
        let call = json!({"type":"tool-call","agentId":agent,"payload":{"toolCallId":format!("c{i}"),"toolName":"n","args":{}}});
        t.publish("r1", vec![call], 1).unwrap();
    }
    t.publish("r1", vec![json!({"type":"run-finish","agentId":agent,"payload":{"status":"completed"}})], 2).unwrap();
    let gen = t.journal_mut().generation(|| 7).unwrap();
    let read = |t: &T, from: &str| {
        let resume = history::resume(from, gen, t.journal().last_seq()).unwrap();
        let r = history::updates(t, "c", gen, from, resume, None).unwrap();
        let chunks: Vec<Value> = serde_json::from_slice(&r.body).unwrap();
        (chunks, r.get("stream-next-offset").unwrap().to_owned(), r.get("stream-up-to-date") == Some("true"))
    };
    let (mut all, mut at, mut done) = (Vec::new(), "-1".to_owned(), false);
    let mut pages = 0;
    while !done {
        let (chunks, next, up) = read(&t, &at);
        let last_batch = chunks.last().map(|c| c["position"]["batch"].as_u64().unwrap());
        if !up {
            let end = threadline_durable::protocols::durable_streams::views::offset(gen, last_batch.unwrap());
            assert_eq!(next, end, "a page that is not the last ends at its last record");
        }
        all.extend(chunks);
        at = next;
        done = up;
        pages += 1;
    }
    assert!(pages >= 2, "the log took more than one page");
    let (one, _, _) = read(&t, "-1");
    assert!(one.len() < all.len());
    let positions: Vec<(u64, u64)> = all
        .iter()
        .map(|c| (c["position"]["batch"].as_u64().unwrap(), c["position"]["index"].as_u64().unwrap()))
        .collect();
    let mut sorted = positions.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(positions, sorted, "every chunk once, in order");
    let settled = all.iter().filter(|c| c["type"] == "submission-settled").count();
    assert_eq!(settled, 1);
    let finished_batch = all.iter().find(|c| c["type"] == "message-completed").unwrap()["position"]["batch"].clone();
    let same: Vec<&Value> = all.iter().filter(|c| c["position"]["batch"] == finished_batch).collect();
    assert_eq!(same.len(), 2, "the run-finish's two chunks travel together");
}

/// A publisher's token checked as the publish routes check it, answered as
/// they answer it.
#[allow(clippy::result_large_err)] // the closure returns the thread's own error, as the routes' do
fn authorize(t: &Thread<MemoryStore, VecSink>, run_id: &str, token: Option<&str>) -> Result<(), ApiError> {
    t.runs().authorize(run_id, token, |id| t.conversation().run(id)).map_err(ApiError::from)
}
