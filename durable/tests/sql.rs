//! Every object class's SQL storage, natively, on SQLite (the engine Durable
//! Objects run): the thread's store answers as the in-memory one does, the
//! directory keeps its threads and its send window, and a stream's log pages
//! its messages by size.

mod support;

use serde_json::json;
use support::lite;
use threadline_durable::files::FileRef;
use threadline_durable::protocols::durable_streams::server::log::{Message, SqlLog, StreamLog};
use threadline_durable::storage::store::{ConfirmState, Confirmation, Driver, FileRow, FileState, SqlStore};
use threadline_durable::streams::offset::Offset;
use threadline_durable::thread::Discard;
use threadline_durable::{
    Caller, Directory, DirectoryOp, Kind, MemoryStore, Record, RunRecord, RunState, Settings, Store, Thread,
};

fn run(id: &str, state: RunState) -> RunRecord {
    RunRecord {
        run_id: id.into(),
        message_id: format!("m-{id}"),
        message: "hello".into(),
        agent_id: "orchestrator".into(),
        state,
        reason: None,
        token_hash: "h".into(),
        created_at: 5,
        finished_at: (state != RunState::Running).then_some(9),
        driver: Driver::Builtin,
        usage: Some("{\"prompt_tokens\":3}".into()),
        model: Some("m".into()),
        replaced: false,
        turn: Default::default(),
        parent: (id == "t.b").then(|| "t.a".into()),
    }
}

fn record(seq: u64, run: &str) -> Record {
    Record {
        seq, run_id: run.into(), kind: Kind::ToolCall, data: json!({ "seq": seq, "text": "é\u{0}x" }).to_string()
    }
}

fn confirmation(id: &str, run: &str, call: &str) -> Confirmation {
    Confirmation {
        request_id: id.into(),
        run_id: run.into(),
        agent_id: "orchestrator".into(),
        tool_call_id: call.into(),
        tool_name: "pay".into(),
        input_type: "approval".into(),
        state: ConfirmState::Pending,
        created_at: 1,
        expires_at: Some(10),
        approver: Some("finance".into()),
        decision: None,
        agent_request_id: None,
        decided_by: None,
        decided_via: None,
    }
}

/// The same writes on both stores, and every read compared.
#[test]
fn the_sql_store_answers_as_the_memory_store() {
    let mut sql = SqlStore::open(lite()).unwrap();
    let mut mem = MemoryStore::default();
    let stores: [&mut dyn Store; 2] = [&mut sql, &mut mem];
    for s in stores {
        s.commit(&[record(1, "t.a"), record(2, "t.a")], &[run("t.a", RunState::Running)]).unwrap();
        s.commit(&[record(3, "t.a")], &[run("t.a", RunState::Completed)]).unwrap();
        s.commit(&[record(4, "t.b")], &[run("t.b", RunState::Running)]).unwrap();
        s.put_confirmation(&confirmation("t.r1", "t.b", "c1")).unwrap();
        let mut decided = confirmation("t.r2", "t.b", "c2");
        s.put_confirmation(&decided).unwrap();
        decided.state = ConfirmState::Approved;
        decided.decision = Some(json!({"approved": true}));
        s.put_confirmation(&decided).unwrap();
        s.save_checkpoint("t.b", "{\"step\":1}").unwrap();
        s.save_checkpoint("t.b", "{\"step\":2}").unwrap();
        s.set_meta("owner", Some("alice")).unwrap();
        s.set_meta("pin", Some("m")).unwrap();
        s.set_meta("pin", None).unwrap();
        s.approve_for_session("weather").unwrap();
        s.approve_for_session("weather").unwrap();
    }
    assert_eq!(sql.last_seq().unwrap(), mem.last_seq().unwrap());
    assert_eq!(sql.read_range(1, 4, 2).unwrap(), mem.read_range(1, 4, 2).unwrap());
    assert_eq!(sql.read_range(0, 3, 10).unwrap(), mem.read_range(0, 3, 10).unwrap());
    assert_eq!(sql.run_records("t.a").unwrap(), mem.run_records("t.a").unwrap());
    assert_eq!(sql.run_range("t.a", 1, 1).unwrap(), mem.run_range("t.a", 1, 1).unwrap());
    assert_eq!(sql.run("t.a").unwrap(), mem.run("t.a").unwrap());
    assert_eq!(sql.run("nope").unwrap(), None);
    assert_eq!(sql.running().unwrap(), mem.running().unwrap());
    assert_eq!(sql.runs_page(0, 1).unwrap(), mem.runs_page(0, 1).unwrap());
    assert_eq!(sql.runs_page(1, 5).unwrap(), mem.runs_page(1, 5).unwrap());
    assert_eq!(sql.run_links().unwrap(), mem.run_links().unwrap());
    assert_eq!(sql.run("t.b").unwrap().unwrap().parent.as_deref(), Some("t.a"), "a run keeps its parent");
    assert_eq!(sql.confirmation("t.r2").unwrap(), mem.confirmation("t.r2").unwrap());
    assert_eq!(sql.confirmation_by_call("c1").unwrap(), mem.confirmation_by_call("c1").unwrap());
    assert_eq!(sql.pending_confirmations().unwrap(), mem.pending_confirmations().unwrap());
    assert_eq!(sql.checkpoint("t.b").unwrap().as_deref(), Some("{\"step\":2}"));
    assert_eq!(sql.meta("owner").unwrap().as_deref(), Some("alice"));
    assert_eq!(sql.meta("pin").unwrap(), None);
    assert!(sql.session_approved("weather").unwrap() && !sql.session_approved("other").unwrap());
    assert!(sql.rows_written() > 0, "writes are counted");
}

#[test]
fn an_empty_sql_store_has_nothing() {
    let sql = SqlStore::open(lite()).unwrap();
    assert_eq!(sql.last_seq().unwrap(), 0);
    assert_eq!(sql.running().unwrap(), None);
    assert_eq!(sql.runs_page(0, 10).unwrap(), (vec![], 0));
    assert_eq!(sql.checkpoint("x").unwrap(), None);
}

#[test]
fn a_directory_lists_threads_and_keeps_the_send_window() {
    let d = Directory::open(lite()).unwrap();
    let ok = |r: threadline_durable::Reply| assert_eq!(r.status / 100, 2, "{r:?}");
    ok(d.handle(&DirectoryOp::Register { thread_id: "a".into(), title: "first".into(), at: 1 }));
    ok(d.handle(&DirectoryOp::Register { thread_id: "b".into(), title: "second".into(), at: 2 }));
    ok(d.handle(&DirectoryOp::Register { thread_id: "a".into(), title: "ignored".into(), at: 3 }));
    let list = d.handle(&DirectoryOp::List);
    let rows: serde_json::Value = serde_json::from_slice(&list.body).unwrap();
    let brief = |r: &serde_json::Value| {
        json!({"threadId": r["threadId"], "title": r["title"], "createdAt": r["createdAt"], "updatedAt": r["updatedAt"],
               "runs": r["runs"], "state": r["state"], "unread": r["unread"]})
    };
    assert_eq!(
        rows["rows"].as_array().unwrap().iter().map(brief).collect::<Vec<_>>(),
        [
            json!({"threadId": "a", "title": "first", "createdAt": 1, "updatedAt": 3, "runs": 2, "state": "idle", "unread": false}),
            json!({"threadId": "b", "title": "second", "createdAt": 2, "updatedAt": 2, "runs": 1, "state": "idle", "unread": false}),
        ]
    );
    ok(d.handle(&DirectoryOp::Unregister { thread_id: "a".into() }));
    let rows: serde_json::Value = serde_json::from_slice(&d.handle(&DirectoryOp::List).body).unwrap();
    assert_eq!(rows["rows"].as_array().unwrap().len(), 1);
    // Two sends a minute: the third waits until the first leaves the window.
    ok(d.handle(&DirectoryOp::Admit { limit: 2, now: 1_000, since: None }));
    ok(d.handle(&DirectoryOp::Admit { limit: 2, now: 2_000, since: None }));
    let refused = d.handle(&DirectoryOp::Admit { limit: 2, now: 31_000, since: None });
    assert_eq!(refused.status, 429);
    let retry: serde_json::Value = serde_json::from_slice(&refused.body).unwrap();
    assert_eq!(retry["retryAfter"], 30);
    ok(d.handle(&DirectoryOp::Admit { limit: 2, now: 61_001, since: None }));
    // A budget: the turns' usage since the period began (the older one is
    // not counted), told with the send's admission and by GET /agent/quota.
    let usage = |at: i64, tokens: u64, cost_usd: f64, model: Option<&str>| DirectoryOp::Usage {
        at,
        tokens,
        cost_usd,
        model: model.map(str::to_owned),
        input_tokens: tokens / 2,
        output_tokens: tokens - tokens / 2,
    };
    ok(d.handle(&usage(10, 500, 0.5, Some("m1"))));
    ok(d.handle(&usage(3_700_000, 40, 0.25, Some("m1"))));
    ok(d.handle(&usage(3_800_000, 2, 0.0, Some("m2"))));
    // An op from a Worker of before (no model, no split) still counts.
    let old: DirectoryOp =
        serde_json::from_value(serde_json::json!({"op": "usage", "at": 3_800_001, "tokens": 8, "costUsd": 0.0}))
            .unwrap();
    ok(d.handle(&old));
    let admitted = d.handle(&DirectoryOp::Admit { limit: 0, now: 3_900_000, since: Some(3_600_000) });
    assert_eq!(admitted.status, 200);
    let used: serde_json::Value = serde_json::from_slice(&admitted.body).unwrap();
    assert_eq!(used, serde_json::json!({"used": {"tokens": 50, "costUsd": 0.25}}));
    // The actor's totals per model since a time (GET /instance-ai/usage).
    let totals = d.handle(&DirectoryOp::Totals { since: 3_600_000 });
    let totals: serde_json::Value = serde_json::from_slice(&totals.body).unwrap();
    assert_eq!(
        totals,
        serde_json::json!({
            "models": [
                {"model": null, "runs": 1, "inputTokens": 0, "outputTokens": 0, "totalTokens": 8},
                {"model": "m1", "runs": 1, "inputTokens": 20, "outputTokens": 20, "totalTokens": 40, "costUsd": 0.25},
                {"model": "m2", "runs": 1, "inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
            ],
            "total": {"runs": 3, "inputTokens": 21, "outputTokens": 21, "totalTokens": 50, "costUsd": 0.25},
            "since": "1970-01-01T01:00:00.000Z",
        })
    );
    let quota = threadline_durable::Quota::parse(Some(r#"{"period":"hour","tokens":100}"#)).unwrap().unwrap();
    let limit = quota.limit_for(&[]);
    let view = d.handle(&DirectoryOp::Quota { quota, limit, now: 3_900_000 });
    let view: serde_json::Value = serde_json::from_slice(&view.body).unwrap();
    assert_eq!(view["used"]["tokens"], 50);
    assert_eq!(view["resetsAt"], "1970-01-01T02:00:00.000Z");
}

/// A model call's charge, as a thread delivers it.
fn charge(id: &str, run: &str, at: i64, input: u64, output: u64) -> threadline_durable::agent::charge::Charge {
    threadline_durable::agent::charge::Charge {
        id: id.into(),
        actor: "alice".into(),
        run_id: run.into(),
        at,
        model: Some("m1".into()),
        spend: threadline_durable::agent::charge::Spend { input_tokens: input, output_tokens: output, cost_usd: 0.0 },
        held: false,
        estimated: false,
        price: None,
    }
}

#[test]
fn a_directory_counts_each_charge_once_and_holds_calls_against_the_limit() {
    use threadline_durable::agent::charge::Spend;
    use threadline_durable::Limit;
    let d = Directory::open(lite()).unwrap();
    let used = |d: &Directory<_>| -> serde_json::Value {
        let r = d.handle(&DirectoryOp::Admit { limit: 0, now: 10, since: Some(0) });
        serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["used"]["tokens"].clone()
    };
    // A charge sent twice (a retried delivery) counts once.
    let first = DirectoryOp::Charge { charges: vec![charge("t/c1", "r1", 1, 60, 40), charge("t/c2", "r1", 2, 5, 5)] };
    assert_eq!(d.handle(&first).status, 204);
    assert_eq!(d.handle(&first).status, 204);
    assert_eq!(used(&d), 110);
    // Turns are runs, however many calls each made.
    let totals: serde_json::Value = serde_json::from_slice(&d.handle(&DirectoryOp::Totals { since: 0 }).body).unwrap();
    assert_eq!(totals["total"]["runs"], 1);
    // Holds: granted while what is used and held is under the limit; the
    // same hold twice holds once; a charge takes its hold's place.
    let limit = Limit { tokens: Some(200), cost_usd: None };
    let hold = |id: &str, tokens: u64| DirectoryOp::Hold {
        id: id.into(),
        at: 5,
        spend: Spend { input_tokens: tokens, output_tokens: 0, cost_usd: 0.0 },
        limit,
        since: 0,
    };
    assert_eq!(d.handle(&hold("t/h1", 4_000)).status, 200, "110 used, nothing held: under 200");
    assert_eq!(d.handle(&hold("t/h1", 4_000)).status, 200, "the same hold again");
    // However many calls start at once, none more is held.
    for i in 2..7 {
        let refused = d.handle(&hold(&format!("t/h{i}"), 1));
        assert_eq!(refused.status, 429, "hold {i}");
    }
    assert_eq!(used(&d), 110, "a hold is not usage");
    let settle = DirectoryOp::Charge { charges: vec![charge("t/h1", "r2", 6, 30, 20)] };
    assert_eq!(d.handle(&settle).status, 204);
    assert_eq!(used(&d), 160);
    assert_eq!(d.handle(&hold("t/h7", 4_000)).status, 200, "the hold settled for less: room again");
    assert_eq!(d.handle(&hold("t/h8", 1)).status, 429);
    // A held charge (still in flight) counts as nothing until settled.
    let mut held = charge("t/h9", "r3", 7, 1_000, 0);
    held.held = true;
    assert_eq!(d.handle(&DirectoryOp::Charge { charges: vec![held] }).status, 204);
    assert_eq!(used(&d), 160);
}

#[test]
fn a_stream_log_pages_its_messages_by_size() {
    let mut log = SqlLog::open(lite()).unwrap();
    assert_eq!(log.meta().unwrap(), None);
    let messages: Vec<Message> =
        (1..=5).map(|i| Message { offset: Offset::new(1, i * 10), data: vec![b'a' + i as u8; 100] }).collect();
    log.append(&messages).unwrap();
    let all = log.read(Offset::ZERO, Offset::new(1, 50), 10_000).unwrap();
    assert_eq!(all, messages);
    let page = log.read(Offset::new(1, 10), Offset::new(1, 50), 250).unwrap();
    assert_eq!(page, messages[1..3], "whole messages up to the size, after the offset");
    let one = log.read(Offset::ZERO, Offset::new(1, 50), 1).unwrap();
    assert_eq!(one.len(), 1, "at least one message, however small the size");
    log.clear().unwrap();
    assert!(log.read(Offset::ZERO, Offset::new(9, 9), 10_000).unwrap().is_empty());
}

/// A thread's report, as it makes them.
fn report(
    thread: &str,
    version: u64,
    state: threadline_durable::directory::inbox::State,
    at: i64,
) -> threadline_durable::directory::inbox::Report {
    threadline_durable::directory::inbox::Report {
        thread_id: thread.into(),
        version,
        event_id: version * 10,
        title: format!("title of {thread}"),
        state,
        answer_id: if state == threadline_durable::directory::inbox::State::Idle { version * 10 } else { 0 },
        created_at: 1,
        updated_at: at,
        runs: 1,
        ..Default::default()
    }
}

fn body(r: &threadline_durable::Reply) -> serde_json::Value {
    serde_json::from_slice(&r.body).unwrap()
}

#[test]
fn an_inbox_takes_each_report_once_in_order_and_logs_every_change() {
    use threadline_durable::directory::inbox::{Page, State};
    let d = Directory::open(lite()).unwrap();
    let reports = |rs: Vec<_>| d.handle(&DirectoryOp::Report { reports: rs });
    assert_eq!(reports(vec![report("a", 1, State::Running, 10)]).status, 204);
    assert_eq!(reports(vec![report("b", 1, State::Running, 11)]).status, 204);
    // A retry carries what was not taken with what is new: the taken one
    // changes nothing, the new one is logged once.
    reports(vec![report("a", 1, State::Running, 10), report("a", 2, State::Waiting, 12)]);
    // A late report (below the version held) changes nothing.
    reports(vec![report("a", 1, State::Running, 10)]);
    let published = String::from_utf8(d.published().unwrap().to_vec()).unwrap();
    let seqs: Vec<u64> = threadline_durable::feed::socket::lines(&published)
        .filter_map(|l| match l {
            threadline_durable::feed::socket::Line::Durable { seq, .. } => Some(seq),
            _ => None,
        })
        .collect();
    assert_eq!(seqs, [1, 2, 3], "one change per report taken: {published}");
    assert!(d.published().is_none(), "taken once");
    let page = body(&d.handle(&DirectoryOp::Inbox { page: Page::default() }));
    assert_eq!(page["eventId"], 3);
    let states: Vec<_> =
        page["rows"].as_array().unwrap().iter().map(|r| (r["threadId"].clone(), r["state"].clone())).collect();
    assert_eq!(states, [(json!("a"), json!("waiting")), (json!("b"), json!("running"))], "newest change first");
    // Waiting only.
    let waiting = body(&d.handle(&DirectoryOp::Inbox {
        page: Page { state: Some(threadline_durable::directory::inbox::Filter::Waiting), ..Page::default() },
    }));
    assert_eq!(waiting["rows"].as_array().unwrap().len(), 1);
    // A finished run is unread until read up to it; a mark never moves back
    // nor past what the thread reported.
    reports(vec![report("a", 3, State::Idle, 13)]);
    let row = |id: &str| {
        let page = body(&d.handle(&DirectoryOp::Inbox { page: Page::default() }));
        page["rows"].as_array().unwrap().iter().find(|r| r["threadId"] == id).cloned().unwrap()
    };
    assert_eq!((row("a")["unread"].clone(), row("a")["answerId"].clone()), (json!(true), json!(30)));
    let read = d.handle(&DirectoryOp::Read { thread_id: "a".into(), event_id: 10_000 });
    assert_eq!(read.status, 200);
    assert_eq!((body(&read)["readEventId"].clone(), body(&read)["unread"].clone()), (json!(30), json!(false)));
    let back = d.handle(&DirectoryOp::Read { thread_id: "a".into(), event_id: 5 });
    assert_eq!(body(&back)["readEventId"], 30, "never back");
    assert_eq!(d.handle(&DirectoryOp::Read { thread_id: "nobody's".into(), event_id: 1 }).status, 404);
    // Deleted: out of listings, in the log once.
    d.published();
    d.handle(&DirectoryOp::Unregister { thread_id: "b".into() });
    d.handle(&DirectoryOp::Unregister { thread_id: "b".into() });
    let gone = String::from_utf8(d.published().unwrap().to_vec()).unwrap();
    assert_eq!(gone.matches("\"deleted\":true").count(), 1, "{gone}");
    assert_eq!(body(&d.handle(&DirectoryOp::List))["rows"].as_array().unwrap().len(), 1);
    // A reader from any point gets every change after it, in order.
    let hello = String::from_utf8(d.follow(Some(2)).unwrap().to_vec()).unwrap();
    let lines: Vec<_> = threadline_durable::feed::socket::lines(&hello).collect();
    assert!(matches!(lines[0], threadline_durable::feed::socket::Line::Hello { after: 2, .. }), "{hello}");
    let replayed: Vec<u64> = lines
        .iter()
        .filter_map(|l| match l {
            threadline_durable::feed::socket::Line::Durable { seq, .. } => Some(*seq),
            _ => None,
        })
        .collect();
    assert_eq!(replayed, [3, 4, 5, 6]);
    // From now: nothing replayed.
    let now = String::from_utf8(d.follow(None).unwrap().to_vec()).unwrap();
    assert!(!now.contains("\nD "), "{now}");
}

#[test]
fn an_inbox_pages_through_many_threads_without_a_ceiling() {
    use threadline_durable::directory::inbox::{Page, State};
    let d = Directory::open(lite()).unwrap();
    let all: Vec<_> = (0..450).map(|i| report(&format!("t{i:03}"), 1, State::Idle, 1_000 + (i % 7))).collect();
    d.handle(&DirectoryOp::Report { reports: all });
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = body(
            &d.handle(&DirectoryOp::Inbox { page: Page { limit: Some(100), cursor: cursor.clone(), state: None } }),
        );
        seen.extend(page["rows"].as_array().unwrap().iter().map(|r| r["threadId"].as_str().unwrap().to_owned()));
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen.len(), 450);
    let unique: std::collections::HashSet<_> = seen.iter().collect();
    assert_eq!(unique.len(), 450, "no row twice across pages");
    // The change log keeps every thread's newest change past its window.
    let hello = String::from_utf8(d.follow(Some(0)).unwrap().to_vec()).unwrap();
    assert!(hello.contains("\nP "), "a first page");
}

#[test]
fn records_are_stored_byte_for_byte_across_statements() {
    let mut store = SqlStore::open(lite()).unwrap();
    // Multi-byte text, escapes, quotes and a run id with a quote in it,
    // large enough that the batch spans several statements (1.5 MB each).
    let big = "ü€😀\\\"'\n".repeat(40_000);
    let records: Vec<Record> = (1..=12)
        .map(|seq| Record {
            seq,
            run_id: if seq % 2 == 0 { "r\"1".into() } else { "r2".into() },
            kind: if seq % 3 == 0 { Kind::TextBlock } else { Kind::ToolCall },
            data: json!({ "seq": seq, "text": big, "none": "\u{0}" }).to_string(),
        })
        .collect();
    store.commit(&records, &[]).unwrap();
    assert_eq!(store.read_range(0, 12, 100).unwrap(), records);
    assert_eq!(store.last_seq().unwrap(), 12);
}

fn file(id: &str, state: FileState, reserved_at: i64) -> FileRow {
    let file = FileRef {
        file_id: id.into(),
        media_type: "text/plain".into(),
        size: 3,
        name: None,
        sha256: format!("{id}-hash"),
    };
    FileRow { file, state, reserved_at }
}

/// What the alarm asks on every request is remembered, and forgotten by
/// every write to its table: after each write, the SQL store answers as
/// the memory store does, and asking again runs no statement.
#[test]
fn remembered_answers_follow_every_write() {
    let mut sql = SqlStore::open(support::Counted::new()).unwrap();
    let mut mem = MemoryStore::default();
    let check = |sql: &SqlStore<support::Counted>, mem: &MemoryStore, step: &str| {
        assert_eq!(sql.pending_confirmations().unwrap(), mem.pending_confirmations().unwrap(), "{step}");
        for state in [FileState::Reserved, FileState::Attached, FileState::Deleting] {
            assert_eq!(sql.oldest_file(state).unwrap(), mem.oldest_file(state).unwrap(), "{step}: {state:?}");
        }
        sql.db().take();
        sql.pending_confirmations().unwrap();
        sql.oldest_file(FileState::Reserved).unwrap();
        sql.oldest_file(FileState::Deleting).unwrap();
        assert_eq!(sql.db().take(), Vec::<String>::new(), "{step}: asked again, nothing is read");
    };
    check(&sql, &mem, "empty");
    let mut decided = confirmation("r1", "t.a", "c1");
    type Write = Box<dyn Fn(&mut dyn Store)>;
    let steps: Vec<(&str, Write)> = vec![
        ("a confirmation asked", Box::new(|s| s.put_confirmation(&confirmation("r1", "t.a", "c1")).unwrap())),
        ("another asked", Box::new(|s| s.put_confirmation(&confirmation("r2", "t.a", "c2")).unwrap())),
        ("the first decided", {
            decided.state = ConfirmState::Approved;
            let decided = decided.clone();
            Box::new(move |s| s.put_confirmation(&decided).unwrap())
        }),
        ("a file reserved", Box::new(|s| s.put_file(&file("f1", FileState::Reserved, 50)).unwrap())),
        ("an older one reserved", Box::new(|s| s.put_file(&file("f2", FileState::Reserved, 40)).unwrap())),
        ("the older one being removed", Box::new(|s| s.put_file(&file("f2", FileState::Deleting, 40)).unwrap())),
        ("the first attached", Box::new(|s| s.put_file(&file("f1", FileState::Attached, 50)).unwrap())),
        ("the older one removed", Box::new(|s| s.delete_file("f2").unwrap())),
    ];
    for (step, write) in &steps {
        write(&mut sql);
        write(&mut mem);
        check(&sql, &mem, step);
    }
}

/// A publish into a going run, and the alarm's next deadline asked after
/// it as the object asks on every request, run one statement: the insert.
#[test]
fn a_publish_and_its_alarm_deadline_run_one_statement() {
    let settings = Settings::from_pairs(&[("AGENT_WEBHOOK_URL", "http://hook"), ("AUTH_MODE", "dev")]);
    let mut t: Thread<SqlStore<support::Counted>, Discard> =
        Thread::load(SqlStore::open(support::Counted::new()).unwrap(), settings.thread.clone(), 0).unwrap();
    let chat =
        support::Req::new("POST", "/instance-ai/chat/t1", support::actor("ann", &[])).body(&json!({"message": "go"}));
    let out = support::serve(&mut t, &settings, chat, 1);
    let run = support::json(&out)["runId"].as_str().unwrap().to_owned();
    let bearer = format!("Bearer {}", support::token_of(&out.effects, &run));
    let path = format!("/instance-ai/threads/t1/runs/{run}/events");
    let publish = |t: &mut Thread<SqlStore<support::Counted>, Discard>, i: u32, now: i64| {
        let mut req = support::Req::new("POST", &path, Caller::Nobody).header("authorization", &bearer);
        req.body = json!([{"type": "tool-call", "agentId": "orchestrator",
                           "payload": {"toolCallId": format!("m{i}"), "toolName": "x", "args": {}}}])
        .to_string();
        assert_eq!(support::status(&support::serve(t, &settings, req, now)), 200);
        t.clock().next_alarm(now, &settings)
    };
    let first = publish(&mut t, 0, 2);
    assert!(first.is_some(), "a going run has a deadline");
    t.journal().store().db().take();
    for i in 1..4 {
        publish(&mut t, i, 2 + i64::from(i));
        let ran = t.journal().store().db().take();
        assert_eq!(ran.len(), 1, "{ran:?}");
        assert!(ran[0].starts_with("INSERT INTO events"), "{ran:?}");
    }
}
