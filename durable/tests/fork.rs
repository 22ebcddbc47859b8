//! Forking a thread, natively, through the service as the object shells
//! hand requests over (the source and the fork, each a thread; a call one
//! makes to the other answered as the shell would): the fork's history is
//! the source's path up to the message, read from the source, its runs
//! remember it, and it answers on its own while the source is unchanged.

mod support;

use serde_json::{json, Value};
use std::collections::BTreeMap;
use support::{actor, serve_among, token_of, Req, T};
use threadline_durable::thread::Recall;
use threadline_durable::{Caller, Settings};

fn settings() -> Settings {
    Settings::from_pairs(&[("AGENT_WEBHOOK_URL", "http://hook")])
}

fn alice() -> Caller {
    actor("alice", &[])
}

type Threads = BTreeMap<String, T>;

fn call(
    ts: &mut Threads,
    s: &Settings,
    method: &str,
    path: &str,
    who: Caller,
    body: Option<Value>,
    now: i64,
) -> (u16, Value) {
    let thread = path.split('/').nth(3).expect("a thread path").to_owned();
    ts.entry(thread.clone()).or_insert_with(|| support::thread(s));
    let mut req = Req::new(method, path, who);
    if let Some(b) = &body {
        req = req.body(b);
    }
    let o = serve_among(ts, &thread, s, req, now);
    (support::status(&o), support::json(&o))
}

/// A turn on `thread`, answered `text` by the webhook agent; its run id.
fn turn(ts: &mut Threads, s: &Settings, thread: &str, message: &str, text: &str, now: i64) -> String {
    ts.entry(thread.to_owned()).or_insert_with(|| support::thread(s));
    let path = format!("/instance-ai/chat/{thread}");
    let o = serve_among(ts, thread, s, Req::new("POST", &path, alice()).body(&json!({ "message": message })), now);
    assert_eq!(support::status(&o), 200, "{:?}", o.answer);
    let run = support::json(&o)["runId"].as_str().unwrap().to_owned();
    let token = token_of(&o.effects, &run);
    let publish = format!("/instance-ai/threads/{thread}/runs/{run}/events");
    let batch = json!([
        {"type": "text-delta", "agentId": "orchestrator", "payload": {"text": text}},
        {"type": "run-finish", "agentId": "orchestrator", "payload": {"status": "completed"}},
    ]);
    let req =
        Req::new("POST", &publish, Caller::Nobody).body(&batch).header("authorization", &format!("Bearer {token}"));
    assert_eq!(support::status(&serve_among(ts, thread, s, req, now + 1)), 200);
    run
}

/// The n8n messages view's user messages and answers, in order.
fn said(ts: &mut Threads, s: &Settings, thread: &str) -> Vec<String> {
    let (status, view) = call(ts, s, "GET", &format!("/instance-ai/threads/{thread}/messages"), alice(), None, 0);
    assert_eq!(status, 200, "{view}");
    view["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap().to_owned()).collect()
}

fn source(ts: &mut Threads, s: &Settings) -> Vec<String> {
    ["one", "two", "three"]
        .iter()
        .enumerate()
        .map(|(i, q)| turn(ts, s, "src", q, &format!("A{}", i + 1), 10 * i as i64 + 1))
        .collect()
}

#[test]
fn a_fork_shares_the_source_s_path_and_answers_on_its_own() {
    let s = settings();
    let mut ts = Threads::new();
    let runs = source(&mut ts, &s);
    let (status, forked) = call(
        &mut ts,
        &s,
        "POST",
        "/instance-ai/threads/src/fork",
        alice(),
        Some(json!({"messageId": runs[1], "threadId": "f1"})),
        100,
    );
    assert_eq!(status, 201, "{forked}");
    assert_eq!(forked["threadId"], "f1");
    assert_eq!(forked["forkedFrom"]["threadId"], "src");
    assert_eq!(forked["forkedFrom"]["runId"], runs[1].as_str());
    // Its history is the source's path up to the message, read from the source.
    assert_eq!(said(&mut ts, &s, "f1"), ["one", "A1", "two", "A2"]);
    assert_eq!(ts["f1"].conversation().run_count().unwrap(), 0, "nothing of it was copied");
    // It keeps the source's title, in its log.
    let log = support::log(&ts["f1"]);
    assert_eq!(log.len(), 1, "its log starts with its title alone");
    assert_eq!(serde_json::to_value(&log[0]).unwrap()["payload"], json!({"title": "one"}));
    // Its own turn follows, remembering the shared history.
    let own = turn(&mut ts, &s, "f1", "four", "B4", 200);
    let memory: Vec<String> = ts["f1"]
        .conversation()
        .history(&own, &Recall { max_bytes: 100_000, age_turns: 0, age_bytes: 0 })
        .unwrap()
        .messages()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(memory, ["one", "A1", "two", "A2"]);
    assert_eq!(said(&mut ts, &s, "f1"), ["one", "A1", "two", "A2", "four", "B4"]);
    // The source is as it was; the fork is its caller's.
    assert_eq!(said(&mut ts, &s, "src"), ["one", "A1", "two", "A2", "three", "A3"]);
    assert_eq!(ts["f1"].conversation().owner().unwrap().as_deref(), Some("alice"));
    // A fork of the fork, at its own turn: both shared histories, in order.
    let (status, _) = call(
        &mut ts,
        &s,
        "POST",
        "/instance-ai/threads/f1/fork",
        alice(),
        Some(json!({"messageId": own, "threadId": "f2"})),
        300,
    );
    assert_eq!(status, 201);
    assert_eq!(said(&mut ts, &s, "f2"), ["one", "A1", "two", "A2", "four", "B4"]);
}

#[test]
fn a_fork_at_a_user_message_keeps_its_turn_and_pages_through_both_histories() {
    let s = settings();
    let mut ts = Threads::new();
    source(&mut ts, &s);
    let first = ts["src"].conversation().turns(10, 0).unwrap().0[0].run.message_id.clone();
    let (status, forked) =
        call(&mut ts, &s, "POST", "/instance-ai/threads/src/fork", alice(), Some(json!({"messageId": first})), 100);
    assert_eq!(status, 201);
    let fork = forked["threadId"].as_str().unwrap().to_owned();
    assert_eq!(said(&mut ts, &s, &fork), ["one", "A1"]);
    turn(&mut ts, &s, &fork, "two, elsewhere", "C2", 200);
    let page = |ts: &mut Threads, n: usize| {
        let (_, v) =
            call(ts, &s, "GET", &format!("/instance-ai/threads/{fork}/messages?limit=1&page={n}"), alice(), None, 0);
        (v["messages"][0]["content"].as_str().unwrap().to_owned(), v["totalRuns"].as_u64().unwrap())
    };
    assert_eq!(page(&mut ts, 0), ("two, elsewhere".to_owned(), 2));
    assert_eq!(page(&mut ts, 1), ("one".to_owned(), 2));
}

#[test]
fn bad_forks_are_refused_and_make_nothing() {
    let s = settings();
    let mut ts = Threads::new();
    let runs = source(&mut ts, &s);
    let fork = |ts: &mut Threads, who: Caller, body: Value| {
        call(ts, &s, "POST", "/instance-ai/threads/src/fork", who, Some(body), 100)
    };
    let code = |r: (u16, Value)| (r.0, r.1["error"]["code"].as_str().unwrap_or_default().to_owned());
    assert_eq!(code(fork(&mut ts, alice(), json!({"messageId": "nope"}))), (404, "message_not_found".into()));
    assert_eq!(code(fork(&mut ts, alice(), json!({}))), (400, "invalid_message_id".into()));
    assert_eq!(
        code(fork(&mut ts, alice(), json!({"messageId": runs[0], "threadId": "a b"}))),
        (400, "invalid_id".into())
    );
    assert_eq!(
        code(fork(&mut ts, alice(), json!({"messageId": runs[0], "threadId": "src"}))),
        (409, "thread_exists".into())
    );
    assert_eq!(
        code(fork(&mut ts, actor("mallory", &[]), json!({"messageId": runs[0]}))),
        (404, "thread_not_found".into())
    );
    // Into a thread that has a log (and someone else's): refused, kept.
    turn(&mut ts, &s, "busy", "mine", "M", 50);
    assert_eq!(
        code(fork(&mut ts, alice(), json!({"messageId": runs[0], "threadId": "busy"}))),
        (409, "thread_exists".into())
    );
    assert_eq!(said(&mut ts, &s, "busy"), ["mine", "M"]);
    assert_eq!(code(fork(&mut ts, alice(), json!({"messageId": runs[0], "threadId": "f"}))).0, 201);
    assert_eq!(
        code(fork(&mut ts, alice(), json!({"messageId": runs[1], "threadId": "f"}))),
        (409, "thread_exists".into())
    );
    assert_eq!(said(&mut ts, &s, "f"), ["one", "A1"], "the first fork stays");
    // While a run holds the source, it does not fork.
    ts.get_mut("src").unwrap();
    let o = serve_among(
        &mut ts,
        "src",
        &s,
        Req::new("POST", "/instance-ai/chat/src", alice()).body(&json!({"message": "four"})),
        200,
    );
    assert_eq!(support::status(&o), 200);
    assert_eq!(code(fork(&mut ts, alice(), json!({"messageId": runs[0]}))), (409, "run_active".into()));
}

#[test]
fn a_fork_whose_source_is_gone_shows_its_own_turns() {
    let s = settings();
    let mut ts = Threads::new();
    let runs = source(&mut ts, &s);
    call(
        &mut ts,
        &s,
        "POST",
        "/instance-ai/threads/src/fork",
        alice(),
        Some(json!({"messageId": runs[0], "threadId": "f"})),
        100,
    );
    turn(&mut ts, &s, "f", "mine", "M", 200);
    let (status, _) = call(&mut ts, &s, "DELETE", "/instance-ai/threads/src", alice(), None, 300);
    assert_eq!(status, 200);
    ts.remove("src");
    assert_eq!(said(&mut ts, &s, "f"), ["mine", "M"]);
}

/// A new thread whose storage fails while it adopts the offer keeps
/// nothing of it: the same fork is made again, whole.
#[test]
fn a_fork_that_fails_to_store_is_not_half_made() {
    let s = settings();
    let mut ts = Threads::new();
    let runs = source(&mut ts, &s);
    let mut f = support::thread(&s);
    f.journal_mut().store_mut().fail_commits = 1;
    ts.insert("f".into(), f);
    let body = json!({"messageId": runs[0], "threadId": "f"});
    let (status, _) = call(&mut ts, &s, "POST", "/instance-ai/threads/src/fork", alice(), Some(body.clone()), 100);
    assert_eq!(status, 503);
    let c = ts["f"].conversation();
    assert_eq!((c.owner().unwrap(), c.forked_from().unwrap(), c.last_seq()), (None, None, 0), "nothing kept");
    let (status, _) = call(&mut ts, &s, "POST", "/instance-ai/threads/src/fork", alice(), Some(body), 101);
    assert_eq!(status, 201);
    assert_eq!(said(&mut ts, &s, "f"), ["one", "A1"]);
}
