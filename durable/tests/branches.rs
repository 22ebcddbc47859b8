//! Edit and branch, natively, through the thread's service: an edit of an
//! earlier message and another answer to any message are new runs beside
//! the turn they leave, a switch moves the active path, and every history
//! view, the model's memory and the log follow the active path. Nothing
//! stored is rewritten; every refusal keeps the thread as it was.

mod support;

use serde_json::{json, Value};
use support::{actor, serve, token_of, Req, T};
use threadline_durable::log::branches::active_path;
use threadline_durable::{Caller, Effect, Kind, Settings};

fn settings() -> Settings {
    Settings::from_pairs(&[("AGENT_WEBHOOK_URL", "http://hook")])
}

fn alice() -> Caller {
    actor("alice", &[])
}

fn post(t: &mut T, s: &Settings, path: &str, body: Value, now: i64) -> (u16, Value, Vec<Effect>) {
    let o = serve(t, s, Req::new("POST", path, alice()).body(&body), now);
    (support::status(&o), support::json(&o), o.effects)
}

fn get(t: &mut T, s: &Settings, path: &str) -> Value {
    let o = serve(t, s, Req::new("GET", path, alice()), 0);
    assert_eq!(support::status(&o), 200, "{path}");
    support::json(&o)
}

fn send(t: &mut T, s: &Settings, body: Value, now: i64) -> (u16, Value, Vec<Effect>) {
    post(t, s, "/instance-ai/chat/t1", body, now)
}

/// The run a send started, answered with `text` and finished.
fn turn(t: &mut T, s: &Settings, body: Value, text: &str, now: i64) -> String {
    let (status, started, effects) = send(t, s, body.clone(), now);
    assert_eq!(status, 200, "{body} → {started}");
    let run = started["runId"].as_str().unwrap().to_owned();
    let token = token_of(&effects, &run);
    // The external agent is told which turn its run follows.
    let parent = t.conversation().known_run(&run).unwrap().parent;
    let told = effects.iter().find_map(|e| match e {
        Effect::Webhook { body, start_of: Some(r) } if *r == run => Some(body["parentRunId"].clone()),
        _ => None,
    });
    assert_eq!(told, Some(json!(parent)), "{body}");
    let path = format!("/instance-ai/threads/t1/runs/{run}/events");
    let batch = json!([
        {"type": "text-delta", "agentId": "orchestrator", "payload": {"text": text}},
        {"type": "run-finish", "agentId": "orchestrator", "payload": {"status": "completed"}},
    ]);
    let o = serve(
        t,
        s,
        Req::new("POST", &path, Caller::Nobody).body(&batch).header("authorization", &format!("Bearer {token}")),
        now + 1,
    );
    assert_eq!(support::status(&o), 200, "{:?}", o.answer);
    run
}

/// The n8n messages view's `(role, content)` pairs, oldest first.
fn shown(t: &mut T, s: &Settings) -> Vec<(String, String)> {
    let view = get(t, s, "/instance-ai/threads/t1/messages");
    view["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap().to_owned(), m["content"].as_str().unwrap().to_owned()))
        .collect()
}

fn said(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(r, c)| ((*r).to_owned(), (*c).to_owned())).collect()
}

/// A thread of four answered turns: its runs and user message ids.
fn four(t: &mut T, s: &Settings) -> (Vec<String>, Vec<String>) {
    let mut runs = Vec::new();
    for (i, (ask, answer)) in [("one", "A1"), ("two", "A2"), ("three", "A3"), ("four", "A4")].into_iter().enumerate() {
        runs.push(turn(t, s, json!({"message": ask}), answer, 10 * i as i64 + 1));
    }
    let messages = t.conversation().turns(10, 0).unwrap().0.iter().map(|turn| turn.run.message_id.clone()).collect();
    (runs, messages)
}

/// The model's memory for `run`: its path's turns before it.
fn memory(t: &T, run: &str) -> Vec<String> {
    let recall = threadline_durable::thread::Recall { max_bytes: 100_000, age_turns: 0, age_bytes: 0 };
    let memory = t.conversation().history(run, &recall).unwrap().messages();
    memory.iter().map(|m| m["content"].as_str().unwrap_or_default().to_owned()).collect()
}

#[test]
fn an_edit_answers_from_the_path_up_to_the_edited_message() {
    let s = settings();
    let mut t = support::thread(&s);
    let (runs, messages) = four(&mut t, &s);
    let edited = turn(&mut t, &s, json!({"message": "two, edited", "editOf": messages[1]}), "B2", 100);
    assert_eq!(memory(&t, &edited), ["one", "A1"], "the model sees the path before the edited message only");
    let run = t.conversation().known_run(&edited).unwrap();
    assert_eq!((run.message.as_str(), run.parent.as_deref()), ("two, edited", Some(runs[0].as_str())));
    assert_ne!(run.message_id, messages[1], "an edit is a message of its own");
    assert_eq!(
        shown(&mut t, &s),
        said(&[("user", "one"), ("assistant", "A1"), ("user", "two, edited"), ("assistant", "B2")])
    );
    // Nothing stored was rewritten: the old branch is whole.
    assert_eq!(t.conversation().run_count().unwrap(), 5);
    assert_eq!(t.conversation().known_run(&runs[3]).unwrap().parent.as_deref(), Some(runs[2].as_str()));
    // Its run-start says where it joins, so a live client follows.
    let start = support::log(&t).into_iter().rfind(|e| e.kind() == Kind::RunStart).unwrap();
    let start = serde_json::to_value(&start).unwrap();
    assert_eq!(start["payload"]["branch"], json!({"parent": runs[0], "editOf": messages[1]}));
}

#[test]
fn each_history_says_where_a_message_stands_among_its_siblings() {
    let s = settings();
    let mut t = support::thread(&s);
    let (runs, messages) = four(&mut t, &s);
    turn(&mut t, &s, json!({"message": "two, edited", "editOf": messages[1]}), "B2", 100);
    let view = get(&mut t, &s, "/instance-ai/threads/t1/messages");
    assert_eq!(view["messages"][1]["runId"], runs[0].as_str(), "the first turn is kept");
    let m = view["messages"].as_array().unwrap();
    assert!(m[0].get("branch").is_none() && m[1].get("branch").is_none(), "no sibling, no field");
    let edit_id = m[2]["id"].as_str().unwrap();
    assert_eq!(m[2]["branch"], json!({"index": 1, "count": 2, "ids": [messages[1], edit_id]}));
    assert_eq!(view["totalRuns"], 2, "the active path's runs");
}

#[test]
fn a_switch_moves_the_active_path_and_says_so_in_the_log() {
    let s = settings();
    let mut t = support::thread(&s);
    let (runs, messages) = four(&mut t, &s);
    let edited = turn(&mut t, &s, json!({"message": "two, edited", "editOf": messages[1]}), "B2", 100);
    let seq = t.conversation().last_seq();
    // Back to the first version of the second message: its newest turn.
    let (status, body, _) = post(&mut t, &s, "/instance-ai/threads/t1/branch", json!({"messageId": messages[1]}), 200);
    assert_eq!((status, body["leaf"].as_str()), (200, Some(runs[3].as_str())));
    assert_eq!(shown(&mut t, &s).len(), 8, "all four turns again");
    let log = support::log(&t);
    let switched = serde_json::to_value(log.last().unwrap()).unwrap();
    assert_eq!(switched["type"], "branch-switched");
    assert_eq!(switched["payload"], json!({"leaf": runs[3], "messageId": messages[1]}));
    assert_eq!(t.conversation().last_seq(), seq + 1, "one event");
    // A switch to the path already active stores nothing.
    post(&mut t, &s, "/instance-ai/threads/t1/branch", json!({"messageId": runs[2]}), 201);
    assert_eq!(t.conversation().last_seq(), seq + 1);
    // And forth, by the answer's id.
    let (_, body, _) = post(&mut t, &s, "/instance-ai/threads/t1/branch", json!({"messageId": edited}), 202);
    assert_eq!(body["leaf"], edited);
    assert_eq!(shown(&mut t, &s)[2].1, "two, edited");
    // A new message follows the chosen leaf.
    let next = turn(&mut t, &s, json!({"message": "five"}), "A5", 300);
    assert_eq!(t.conversation().known_run(&next).unwrap().parent.as_deref(), Some(edited.as_str()));
    assert_eq!(memory(&t, &next), ["one", "A1", "two, edited", "B2"]);
}

#[test]
fn any_answer_is_given_again_beside_the_one_it_answers_again() {
    let s = settings();
    let mut t = support::thread(&s);
    let (runs, messages) = four(&mut t, &s);
    let again = turn(&mut t, &s, json!({"regenerate": true, "messageId": runs[0]}), "A1'", 100);
    let run = t.conversation().known_run(&again).unwrap();
    assert_eq!((run.message_id.as_str(), run.parent.as_deref()), (messages[0].as_str(), None));
    assert_eq!(shown(&mut t, &s), said(&[("user", "one"), ("assistant", "A1'")]));
    assert!(memory(&t, &again).is_empty(), "the first message has nothing before it");
    let view = get(&mut t, &s, "/instance-ai/threads/t1/messages");
    assert_eq!(view["messages"][1]["branch"], json!({"index": 1, "count": 2, "ids": [runs[0], again]}));
    assert!(view["messages"][0].get("branch").is_none(), "one message, answered twice");
    // The last answer, as before: no `messageId`.
    let last = turn(&mut t, &s, json!({"regenerate": true}), "A1''", 200);
    assert_eq!(t.conversation().known_run(&last).unwrap().parent, None);
    assert_eq!(get(&mut t, &s, "/instance-ai/threads/t1/messages")["messages"][1]["branch"]["count"], 3);
    // Every answer's tokens count in the thread's usage.
    assert_eq!(t.conversation().run_count().unwrap(), 6);
}

#[test]
fn bad_branch_requests_are_refused_and_keep_the_thread() {
    let s = settings();
    let mut t = support::thread(&s);
    let (runs, messages) = four(&mut t, &s);
    let seq = t.conversation().last_seq();
    let cases = [
        (json!({"message": "x", "editOf": "nope"}), 404, "message_not_found"),
        (json!({"message": "x", "editOf": runs[1]}), 400, "not_a_user_message"),
        (json!({"message": "x", "editOf": 5}), 400, "invalid_message_id"),
        (json!({"regenerate": true, "messageId": "nope"}), 404, "message_not_found"),
        (json!({"regenerate": true, "messageId": messages[1]}), 400, "not_an_answer"),
    ];
    for (body, status, code) in cases {
        let (got, answer, _) = send(&mut t, &s, body.clone(), 100);
        assert_eq!((got, answer["error"]["code"].as_str()), (status, Some(code)), "{body}");
    }
    for (body, status, code) in [
        (json!({"messageId": "nope"}), 404, "message_not_found"),
        (json!({}), 400, "invalid_message_id"),
        (json!({"messageId": ["x"]}), 400, "invalid_message_id"),
    ] {
        let (got, answer, _) = post(&mut t, &s, "/instance-ai/threads/t1/branch", body.clone(), 100);
        assert_eq!((got, answer["error"]["code"].as_str()), (status, Some(code)), "{body}");
    }
    assert_eq!(t.conversation().last_seq(), seq, "nothing stored");
    // Another actor's thread is not theirs to branch.
    let o = serve(
        &mut t,
        &s,
        Req::new("POST", "/instance-ai/threads/t1/branch", actor("mallory", &[])).body(&json!({"messageId": runs[0]})),
        100,
    );
    assert_eq!(support::status(&o), 404);
}

#[test]
fn the_tree_changes_only_while_no_run_holds_the_thread() {
    let s = settings();
    let mut t = support::thread(&s);
    let (runs, messages) = four(&mut t, &s);
    let (_, started, effects) = send(&mut t, &s, json!({"message": "five"}), 100);
    let five = started["runId"].as_str().unwrap().to_owned();
    // The run waits on a person: an edit does not settle the request, it is refused.
    let token = token_of(&effects, &five);
    let ask = json!([{"type": "confirmation-request", "agentId": "orchestrator", "payload": {
        "requestId": "q", "toolCallId": "c-q", "toolName": "drop", "args": {}, "severity": "warning",
        "message": "ok?", "inputType": "approval"}}]);
    let path = format!("/instance-ai/threads/t1/runs/{five}/events");
    serve(
        &mut t,
        &s,
        Req::new("POST", &path, Caller::Nobody).body(&ask).header("authorization", &format!("Bearer {token}")),
        101,
    );
    assert!(t.runs().is_suspended());
    let seq = t.conversation().last_seq();
    for body in [
        json!({"message": "x", "editOf": messages[1]}),
        json!({"message": "x", "editOf": messages[1], "mode": "queue"}),
        json!({"regenerate": true, "messageId": runs[0]}),
    ] {
        let (status, answer, _) = send(&mut t, &s, body.clone(), 102);
        assert_eq!((status, answer["error"]["code"].as_str()), (409, Some("run_active")), "{body}");
    }
    let (status, _, _) = post(&mut t, &s, "/instance-ai/threads/t1/branch", json!({"messageId": messages[1]}), 102);
    assert_eq!(status, 409);
    assert_eq!(t.conversation().last_seq(), seq, "nothing stored");
    assert_eq!(t.conversation().request_for_call("c-q").unwrap().unwrap().state.as_str(), "pending");
}

#[test]
fn a_publisher_cannot_move_the_active_path() {
    let s = settings();
    let mut t = support::thread(&s);
    let (_, started, effects) = send(&mut t, &s, json!({"message": "one"}), 1);
    let run = started["runId"].as_str().unwrap().to_owned();
    let token = token_of(&effects, &run);
    let forged =
        json!([{"type": "branch-switched", "agentId": "orchestrator", "payload": {"leaf": "x", "messageId": "y"}}]);
    let path = format!("/instance-ai/threads/t1/runs/{run}/events");
    let o = serve(
        &mut t,
        &s,
        Req::new("POST", &path, Caller::Nobody).body(&forged).header("authorization", &format!("Bearer {token}")),
        2,
    );
    assert_eq!((support::status(&o), support::code(&o).as_str()), (400, "invalid_event"));
}

/// The log read in order, as a client that replays it
/// ([`active_path`]).
fn path_from_log(t: &T) -> Vec<String> {
    active_path(&support::log(t))
}

/// Two hundred edits, answers again, switches and sends in a seeded random
/// order: after each, the active path is a chain from a first turn to the
/// stored leaf, the history shows it (and only it), a client replaying the
/// log finds the same path, every position names its own message among its
/// siblings, and the newest run's memory is its path before it.
#[test]
fn any_sequence_of_branch_operations_keeps_one_path_the_log_and_the_views_agree_on() {
    let s = settings();
    let mut t = support::thread(&s);
    let mut seed: u64 = 0x5eed;
    let mut next = |n: usize| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) as usize % n
    };
    let mut runs: Vec<String> = Vec::new();
    let mut messages: Vec<String> = Vec::new();
    let mut now = 1;
    for step in 0..200 {
        now += 10;
        let op = if runs.is_empty() { 0 } else { next(4) };
        match op {
            0 => runs.push(turn(&mut t, &s, json!({"message": format!("m{step}")}), &format!("a{step}"), now)),
            1 => {
                let of = messages[next(messages.len())].clone();
                runs.push(turn(
                    &mut t,
                    &s,
                    json!({"message": format!("e{step}"), "editOf": of}),
                    &format!("a{step}"),
                    now,
                ));
            }
            2 => {
                let of = runs[next(runs.len())].clone();
                runs.push(turn(&mut t, &s, json!({"regenerate": true, "messageId": of}), &format!("r{step}"), now));
            }
            _ => {
                let to =
                    if next(2) == 0 { runs[next(runs.len())].clone() } else { messages[next(messages.len())].clone() };
                let (status, _, _) = post(&mut t, &s, "/instance-ai/threads/t1/branch", json!({"messageId": to}), now);
                assert_eq!(status, 200, "step {step}");
            }
        }
        if op != 3 {
            let newest = t.conversation().known_run(runs.last().unwrap()).unwrap();
            if !messages.contains(&newest.message_id) {
                messages.push(newest.message_id.clone());
            }
        }
        let tree = t.conversation().tree().unwrap();
        let path: Vec<String> = tree.path().iter().map(|l| l.run_id.clone()).collect();
        // One chain, from a first turn to the leaf.
        let records: Vec<_> = path.iter().map(|r| t.conversation().known_run(r).unwrap()).collect();
        assert_eq!(records[0].parent, None, "step {step}: the path starts at a first turn");
        for pair in records.windows(2) {
            assert_eq!(pair[1].parent.as_deref(), Some(pair[0].run_id.as_str()), "step {step}");
        }
        assert_eq!(t.conversation().leaf().unwrap().as_deref(), path.last().map(String::as_str), "step {step}");
        // The log says the same.
        assert_eq!(path_from_log(&t), path, "step {step}: a client replaying the log");
        // The history shows the path, and only it.
        let view = get(&mut t, &s, "/instance-ai/threads/t1/messages?limit=200");
        let shown: Vec<&str> =
            view["messages"].as_array().unwrap().iter().filter_map(|m| m["runId"].as_str()).collect();
        assert_eq!(shown, path.iter().map(String::as_str).collect::<Vec<_>>(), "step {step}");
        for m in view["messages"].as_array().unwrap() {
            if let Some(b) = m.get("branch") {
                let own = m["runId"].as_str().or(m["id"].as_str()).unwrap();
                assert_eq!(b["ids"][b["index"].as_u64().unwrap() as usize], own, "step {step}: {m}");
                assert_eq!(b["ids"].as_array().unwrap().len() as u64, b["count"].as_u64().unwrap());
            }
        }
        // The newest run's memory is its own path before it.
        if op != 3 {
            let newest = runs.last().unwrap();
            let before: Vec<String> = tree.path_to(newest).iter().rev().skip(1).map(|l| l.run_id.clone()).collect();
            let remembered = memory(&t, newest).iter().filter(|m| m.starts_with(['m', 'e'])).count();
            assert_eq!(remembered, before.len(), "step {step}: one user message per turn before it");
        }
    }
    assert_eq!(t.conversation().run_count().unwrap(), runs.len(), "every run kept");
}
