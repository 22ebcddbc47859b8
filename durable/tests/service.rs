//! The queue's and the confirmations' rules, natively, through the thread's
//! service as the object shell hands requests over (no workerd needed):
//! busy-thread modes, queue edits, the next message starting in the same
//! block as the run-finish ahead of it, interrupt, regenerate, reloads; and a
//! request's life from pending to decided, lapsed or cancelled.

mod support;

use serde_json::{json, Value};
use support::{actor, serve, token_of, Req, T};
use threadline_durable::Caller;
use threadline_durable::Effect;
use threadline_durable::Kind;
use threadline_durable::{MemoryStore, Settings, Store, Thread};

fn settings() -> Settings {
    Settings::from_pairs(&[("AGENT_WEBHOOK_URL", "http://hook"), ("APPROVAL_POLICY", r#"{"slow":{"ttlMs":1000}}"#)])
}

fn alice() -> Caller {
    actor("alice", &[])
}

fn send(t: &mut T, s: &Settings, body: Value, now: i64) -> (u16, Value, Vec<Effect>) {
    let o = serve(t, s, Req::new("POST", "/instance-ai/chat/t1", alice()).body(&body), now);
    (support::status(&o), support::json(&o), o.effects)
}

fn finish(t: &mut T, s: &Settings, run: &str, token: &str, now: i64) -> Vec<Effect> {
    let path = format!("/instance-ai/threads/t1/runs/{run}/events");
    let body = json!([{"type": "run-finish", "agentId": "orchestrator", "payload": {"status": "completed"}}]);
    let o = serve(
        t,
        s,
        Req::new("POST", &path, Caller::Nobody).body(&body).header("authorization", &format!("Bearer {token}")),
        now,
    );
    assert_eq!(support::status(&o), 200, "{:?}", o.answer);
    o.effects
}

fn queue_ids(t: &T) -> Vec<String> {
    t.conversation().queue().items.iter().map(|i| i.message.clone()).collect()
}

#[test]
fn busy_threads_reject_queue_or_interrupt() {
    let s = settings();
    let mut t = support::thread(&s);
    let (status, first, effects) = send(&mut t, &s, json!({"message": "one"}), 1);
    assert_eq!(status, 200);
    let run = first["runId"].as_str().unwrap().to_owned();
    let token = token_of(&effects, &run);
    let (status, busy, _) = send(&mut t, &s, json!({"message": "two"}), 2);
    assert_eq!(
        (status, busy["error"]["code"].as_str(), busy["error"]["runId"].as_str()),
        (409, Some("run_active"), Some(run.as_str()))
    );
    let (status, queued, effects) = send(&mut t, &s, json!({"message": "two", "mode": "queue"}), 3);
    assert_eq!((status, queued["position"].as_u64()), (202, Some(0)));
    assert!(queued.get("runId").is_none(), "it waits");
    assert!(effects.is_empty());
    let (_, third, _) = send(&mut t, &s, json!({"message": "three", "mode": "queue"}), 4);
    assert_eq!(third["position"], 1);
    // The run's finish starts the head of the queue in the same block.
    let effects = finish(&mut t, &s, &run, &token, 5);
    let next = t.runs().active_run().expect("the next message holds the lock").clone();
    assert_eq!((next.message.as_str(), next.run_id.as_str()), ("two", queued["messageId"].as_str().unwrap()));
    assert!(effects.iter().any(|e| matches!(e, Effect::Webhook { start_of: Some(r), .. } if *r == next.run_id)));
    assert_eq!(queue_ids(&t), ["three"]);
    // Interrupt: the active run is cancelled and this message runs next, first.
    let (status, body, effects) = send(&mut t, &s, json!({"message": "now!", "mode": "interrupt"}), 6);
    assert_eq!((status, body["interrupting"].as_str()), (202, Some(next.run_id.as_str())));
    assert!(effects.iter().any(|e| matches!(e, Effect::StopAgents)));
    assert!(effects.iter().any(
        |e| matches!(e, Effect::Webhook { body, .. } if body["type"] == "cancel" && body["reason"] == "interrupted")
    ));
    assert_eq!(t.runs().active_run().unwrap().message, "now!");
    assert_eq!(queue_ids(&t), ["three"], "the interrupting message did not join the queue");
    let fins: Vec<_> =
        support::log(&t).into_iter().filter(|e| e.kind() == Kind::RunFinish).map(|e| e.payload_json()).collect();
    assert_eq!(fins.last().unwrap(), &json!({"status": "cancelled", "reason": "interrupted"}));
}

#[test]
fn queue_edits_are_stored_and_announced_and_survive_a_reload() {
    let s = settings();
    let mut t = support::thread(&s);
    send(&mut t, &s, json!({"message": "running"}), 1);
    let ids: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|m| {
            send(&mut t, &s, json!({"message": m, "mode": "queue"}), 2).1["messageId"].as_str().unwrap().to_owned()
        })
        .collect();
    let call = |t: &mut T, method: &str, path: String, body: Value| {
        let o = serve(t, &s, Req::new(method, &path, alice()).body(&body), 3);
        (support::status(&o), support::json(&o))
    };
    let q = |id: &str, suffix: &str| format!("/instance-ai/threads/t1/queue/{id}{suffix}");
    assert_eq!(call(&mut t, "PATCH", q(&ids[1], ""), json!({"message": "B"})).0, 200);
    assert_eq!(call(&mut t, "POST", q(&ids[2], "/move"), json!({"position": 0})).0, 200);
    assert_eq!(call(&mut t, "DELETE", q(&ids[0], ""), Value::Null).0, 200);
    assert_eq!(queue_ids(&t), ["c", "B"]);
    let (status, missing) = call(&mut t, "DELETE", q(&ids[0], ""), Value::Null);
    assert_eq!((status, missing["error"]["code"].as_str()), (404, Some("queued_message_not_found")));
    let (status, bad) = call(&mut t, "POST", q(&ids[1], "/move"), json!({"position": -1}));
    assert_eq!((status, bad["error"]["code"].as_str()), (400, Some("invalid_position")));
    assert_eq!(
        call(&mut t, "POST", "/instance-ai/threads/t1/queue/pause".into(), Value::Null).1["queue"]["paused"],
        true
    );
    // Every change is a durable queue-updated carrying the whole queue.
    let last = support::log(&t).into_iter().rfind(|e| e.kind() == Kind::QueueUpdated).unwrap();
    assert_eq!(last.payload_json()["paused"], true);
    assert_eq!(last.payload_json()["items"].as_array().unwrap().len(), 2);
    // A reload (a new instance over the same storage) has the same queue.
    let store = std::mem::take(t.journal_mut().store_mut());
    let reloaded: T = Thread::load(store, s.thread.clone(), 4).unwrap();
    assert_eq!(reloaded.conversation().queue(), t.conversation().queue());
}

#[test]
fn a_paused_queue_waits_and_resuming_starts_its_head() {
    let s = settings();
    let mut t = support::thread(&s);
    let (_, first, effects) = send(&mut t, &s, json!({"message": "one"}), 1);
    let run = first["runId"].as_str().unwrap().to_owned();
    let token = token_of(&effects, &run);
    send(&mut t, &s, json!({"message": "two", "mode": "queue"}), 2);
    serve(&mut t, &s, Req::new("POST", "/instance-ai/threads/t1/queue/pause", alice()), 3);
    finish(&mut t, &s, &run, &token, 4);
    assert!(t.runs().active_run().is_none(), "a paused queue keeps its messages");
    let resumed = serve(&mut t, &s, Req::new("POST", "/instance-ai/threads/t1/queue/resume", alice()), 5);
    assert_eq!(t.runs().active_run().unwrap().message, "two");
    assert!(resumed.effects.iter().any(|e| matches!(e, Effect::Webhook { start_of: Some(_), .. })));
}

#[test]
fn regenerate_answers_the_last_message_again_and_drops_the_old_answer() {
    let s = settings();
    let mut t = support::thread(&s);
    let (status, body, _) = send(&mut t, &s, json!({"regenerate": true}), 1);
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("thread_required")));
    let (_, first, effects) = send(&mut t, &s, json!({"message": "question"}), 2);
    let run = first["runId"].as_str().unwrap().to_owned();
    let (status, _, _) = send(&mut t, &s, json!({"regenerate": true}), 3);
    assert_eq!(status, 409, "not while a run is active");
    finish(&mut t, &s, &run, &token_of(&effects, &run), 4);
    let (status, again, _) = send(&mut t, &s, json!({"regenerate": true}), 5);
    assert_eq!((status, again["regenerated"].as_bool()), (200, Some(true)));
    let active = t.runs().active_run().unwrap();
    assert_eq!((active.message.as_str(), active.run_id != run), ("question", true));
    let (turns, _) = t.conversation().turns(50, 0).unwrap();
    assert!(turns.iter().all(|turn| turn.run.run_id != run), "the replaced answer leaves the messages view");
}

/// Each turn follows the one before it on the conversation's path; an
/// answer given again follows what the answer it replaces followed.
#[test]
fn each_turn_follows_the_turn_before_it() {
    let s = settings();
    let mut t = support::thread(&s);
    let (_, first, effects) = send(&mut t, &s, json!({"message": "one"}), 1);
    let one = first["runId"].as_str().unwrap().to_owned();
    assert_eq!(t.runs().active_run().unwrap().parent, None, "the first turn follows none");
    finish(&mut t, &s, &one, &token_of(&effects, &one), 2);
    let (_, second, effects) = send(&mut t, &s, json!({"message": "two"}), 3);
    let two = second["runId"].as_str().unwrap().to_owned();
    assert_eq!(t.runs().active_run().unwrap().parent.as_deref(), Some(one.as_str()));
    finish(&mut t, &s, &two, &token_of(&effects, &two), 4);
    send(&mut t, &s, json!({"regenerate": true}), 5);
    let again = t.runs().active_run().unwrap();
    assert_eq!((again.message.as_str(), again.parent.as_deref()), ("two", Some(one.as_str())));
    let path: Vec<_> = t.conversation().tree().unwrap().path().iter().map(|l| l.run_id.clone()).collect();
    assert_eq!(path, [one, again.run_id.clone()]);
}

/// A thread whose external agent's run waits on two confirmations: `once`
/// (no TTL) and `slow` (lapses after 1 s, by the policy).
fn suspended(s: &Settings) -> (T, String, String) {
    let mut t = support::thread(s);
    let (_, first, effects) = send(&mut t, s, json!({"message": "careful"}), 1);
    let run = first["runId"].as_str().unwrap().to_owned();
    let token = token_of(&effects, &run);
    let req = |id: &str, tool: &str, input: &str| {
        json!({"type": "confirmation-request", "agentId": "orchestrator", "payload": {
            "requestId": id, "toolCallId": format!("c-{id}"), "toolName": tool, "args": {}, "severity": "warning",
            "message": "ok?", "inputType": input, "questions": [{"id": "q1", "question": "which?", "type": "single", "options": ["a", "b"]}]
        }})
    };
    let path = format!("/instance-ai/threads/t1/runs/{run}/events");
    let batch =
        json!([req("once", "drop", "approval"), req("slow", "slow", "approval"), req("ask", "ask-user", "questions")]);
    serve(
        &mut t,
        s,
        Req::new("POST", &path, Caller::Nobody).body(&batch).header("authorization", &format!("Bearer {token}")),
        2,
    );
    assert!(t.runs().is_suspended());
    (t, run, token)
}

fn decide(t: &mut T, s: &Settings, id: &str, body: Value, now: i64) -> (u16, Value, Vec<Effect>) {
    let path = format!("/instance-ai/confirm/t1.{id}");
    let o = serve(t, s, Req::new("POST", &path, alice()).body(&body), now);
    (support::status(&o), support::json(&o), o.effects)
}

#[test]
fn a_request_is_decided_once_and_the_agent_is_told() {
    let s = settings();
    let (mut t, run, _) = suspended(&s);
    for body in [json!({}), json!({"approved": "yes"}), json!({"approved": true, "scope": "forever"}), json!([1])] {
        assert_eq!(decide(&mut t, &s, "once", body.clone(), 3).0, 400, "{body}");
    }
    let (status, body, effects) = decide(&mut t, &s, "once", json!({"approved": true, "scope": "session"}), 3);
    assert_eq!((status, body["state"].as_str()), (200, Some("approved")));
    let told = effects.iter().find_map(|e| match e {
        Effect::Webhook { body, .. } => Some(body.clone()),
        _ => None,
    });
    let told = told.expect("the external agent is told");
    assert_eq!(
        (told["type"].as_str(), told["requestId"].as_str(), told["runId"].as_str()),
        (Some("confirmation"), Some("once"), Some(run.as_str()))
    );
    assert_eq!(told["decision"], json!({"approved": true, "scope": "session", "state": "approved"}));
    assert!(!t.requests().needs_approval("drop", true), "a session approval covers later calls");
    let (status, again, _) = decide(&mut t, &s, "once", json!({"approved": false}), 4);
    assert_eq!((status, again["error"]["state"].as_str()), (409, Some("approved")));
    // Questions need answers; then they are recorded.
    assert_eq!(decide(&mut t, &s, "ask", json!({"approved": true}), 5).0, 400);
    let answers = json!({"answers": [{"questionId": "q1", "selectedOptions": ["b"]}]});
    assert_eq!(decide(&mut t, &s, "ask", answers, 5).0, 200);
    assert_eq!(
        t.requests().get("t1.ask").unwrap().unwrap().decision.unwrap()["answers"][0]["selectedOptions"],
        json!(["b"])
    );
    assert!(t.runs().is_suspended(), "still waiting for `slow`");
}

#[test]
fn a_request_lapses_at_its_ttl_and_a_late_decision_is_410() {
    let s = settings();
    let (mut t, _, _) = suspended(&s);
    let no_ttl = Settings::from_pairs(&[("THREAD_TTL_DAYS", "0")]);
    assert_eq!(t.clock().next_alarm(2, &no_ttl), Some(1_002), "the alarm waits for the first lapse");
    let effects = t.clock().alarm(&s, 1_002).unwrap();
    assert!(effects
        .iter()
        .any(|e| matches!(e, Effect::Webhook { body, .. } if body["decision"]["state"] == "expired")));
    let (status, body, _) = decide(&mut t, &s, "slow", json!({"approved": true}), 1_003);
    assert_eq!((status, body["error"]["code"].as_str()), (410, Some("confirmation_expired")));
}

#[test]
fn a_decision_that_arrives_after_the_ttl_but_before_the_alarm_settles_it_and_lets_the_run_go_on() {
    let s = settings();
    let (mut t, _, _) = suspended(&s);
    let (status, _, effects) = decide(&mut t, &s, "slow", json!({"approved": true}), 5_000);
    assert_eq!(status, 410);
    assert!(
        effects.iter().any(|e| matches!(e, Effect::Webhook { body, .. } if body["decision"]["state"] == "expired")),
        "the agent learns it lapsed"
    );
}

#[test]
fn cancel_while_suspended_settles_every_request() {
    let s = settings();
    let (mut t, _, _) = suspended(&s);
    let cancelled = serve(&mut t, &s, Req::new("POST", "/instance-ai/chat/t1/cancel", alice()), 3);
    assert_eq!(support::json(&cancelled)["cancelled"], true);
    for id in ["once", "slow", "ask"] {
        let (status, body, _) = decide(&mut t, &s, id, json!({"approved": true}), 4);
        assert_eq!((status, body["error"]["state"].as_str()), (409, Some("cancelled")), "{id}");
    }
    assert!(!t.runs().is_suspended());
    let fin = support::log(&t).into_iter().rev().find(|e| e.kind() == Kind::RunFinish).unwrap();
    assert_eq!(fin.payload_json(), json!({"status": "cancelled", "reason": "user_cancelled"}));
}

#[test]
fn a_suspended_run_waits_through_a_reload() {
    let s = settings();
    let (mut t, run, _) = suspended(&s);
    let store: MemoryStore = std::mem::take(t.journal_mut().store_mut());
    let mut reloaded: T = Thread::load(store, s.thread.clone(), 10_000_000).unwrap();
    assert!(reloaded.runs().is_suspended(), "its pending requests are in storage");
    assert_eq!(
        reloaded.clock().check_run_deadlines(20_000_000).unwrap(),
        None,
        "no sweep or timeout while a person decides"
    );
    let (status, _, _) = decide(&mut reloaded, &s, "once", json!({"approved": true}), 20_000_001);
    assert_eq!(status, 200);
    assert_eq!(reloaded.runs().active_run().unwrap().run_id, run);
}

#[test]
fn the_stored_queue_stays_under_its_byte_limit_and_a_refusal_changes_nothing() {
    let s = Settings::from_pairs(&[("AGENT_WEBHOOK_URL", "http://hook"), ("MAX_QUEUE_BYTES", "200000")]);
    let mut t = support::thread(&s);
    send(&mut t, &s, json!({"message": "running"}), 1);
    // Escape-heavy text: 5,000 characters take 30,000 bytes as JSON.
    let heavy = "\u{1}".repeat(5_000);
    let mut accepted = 0;
    let refusal = loop {
        let (status, body, _) = send(&mut t, &s, json!({"message": heavy, "mode": "queue"}), 2);
        if status != 202 {
            break (status, body);
        }
        accepted += 1;
    };
    assert_eq!(refusal.0, 413);
    assert_eq!(
        (refusal.1["error"]["code"].as_str(), refusal.1["error"]["limit"].as_u64()),
        (Some("queue_too_large"), Some(200_000))
    );
    assert_eq!(accepted, 6, "six fit in 200 KB");
    assert_eq!(t.conversation().queue().items.len(), accepted, "memory holds what storage holds");
    let stored: threadline_durable::Queue =
        serde_json::from_str(&t.journal().store().meta("queue").unwrap().unwrap()).unwrap();
    assert_eq!(&stored, t.conversation().queue());
    // The queue goes on working: a small message fits, and an edit that
    // shrinks an item is always allowed.
    assert_eq!(send(&mut t, &s, json!({"message": "small", "mode": "queue"}), 3).0, 202);
    let first = t.conversation().queue().items[0].message_id.clone();
    let path = format!("/instance-ai/threads/t1/queue/{first}");
    let edited = serve(&mut t, &s, Req::new("PATCH", &path, alice()).body(&json!({"message": "short now"})), 4);
    assert_eq!(support::status(&edited), 200);
}

/// The reports a due [`Thread::report`] carries.
fn reported(t: &mut T, now: i64) -> Vec<threadline_durable::directory::inbox::Report> {
    match t.report(now).unwrap() {
        Some(Effect::Report { actor, reports }) => {
            assert_eq!(actor, "alice", "to the owner's directory");
            reports
        }
        None => Vec::new(),
        Some(other) => panic!("{other:?}"),
    }
}

#[test]
fn a_thread_reports_each_state_to_its_owners_inbox_until_taken() {
    use threadline_durable::directory::inbox::State;
    let s = settings();
    let mut t = support::thread(&s);
    assert!(reported(&mut t, 0).is_empty(), "nobody owns an empty thread");
    let (_, first, effects) = send(&mut t, &s, json!({"message": "careful"}), 1);
    let run = first["runId"].as_str().unwrap().to_owned();
    let token = token_of(&effects, &run);
    let running = reported(&mut t, 1);
    assert_eq!(running.len(), 1);
    assert_eq!(
        (running[0].version, running[0].state, running[0].run_id.as_deref()),
        (1, State::Running, Some(run.as_str()))
    );
    assert_eq!(running[0].title, "careful");
    assert!(reported(&mut t, 1).is_empty(), "nothing changed: nothing to say");
    // The directory did not take it: the alarm tries again, with what is new.
    t.report_failed(2).unwrap();
    let retry_at = t.report_deadline().expect("a retry");
    assert!(retry_at > 2);
    let path = format!("/instance-ai/threads/t1/runs/{run}/events");
    let ask = json!([{"type": "confirmation-request", "agentId": "orchestrator", "payload": {
        "requestId": "r1", "toolCallId": "c1", "toolName": "drop", "args": {}, "severity": "warning",
        "message": "ok?", "inputType": "approval"}}]);
    let auth = format!("Bearer {token}");
    serve(&mut t, &s, Req::new("POST", &path, Caller::Nobody).body(&ask).header("authorization", &auth), 3);
    let owed = reported(&mut t, 3);
    assert_eq!(owed.iter().map(|r| r.version).collect::<Vec<_>>(), [1, 3], "the one not taken, then the new one");
    let waiting = &owed[1];
    assert_eq!(waiting.state, State::Waiting);
    let wait = waiting.waiting.as_ref().unwrap();
    assert_eq!((wait.kind.as_str(), wait.tool_name.as_str()), ("approval", "drop"));
    assert!(waiting.answer_id > 0, "a request is worth reading");
    t.reported(3).unwrap();
    assert_eq!(t.report_deadline(), None, "nothing owed");
    // Decided, then finished: idle, with the run's end to read.
    decide(&mut t, &s, "r1", json!({"approved": true}), 4);
    finish(&mut t, &s, &run, &token, 5);
    let done = reported(&mut t, 5);
    let last = done.last().unwrap();
    assert_eq!(last.state, State::Idle);
    assert_eq!(
        last.last_run.as_ref().map(|r| (r.run_id.as_str(), r.status.as_str())),
        Some((run.as_str(), "completed"))
    );
    assert_eq!(last.answer_id, t.conversation().last_seq(), "the run's end is the last thing to read");
    t.reported(last.version).unwrap();
    // Reloaded from storage: what it reported is kept, nothing is said twice.
    let store = std::mem::take(t.journal_mut().store_mut());
    let mut again = Thread::load(store, s.thread.clone(), 6).unwrap();
    again.journal_mut().set_thread_id("t1");
    assert!(reported(&mut again, 6).is_empty(), "the state it last reported is the state it has");
    // A report made, then the instance gone before its directory answered:
    // the next instance finds its state is not the one taken, and says it
    // again, above every version made before.
    let (_, second, _) = send(&mut again, &s, json!({"message": "again"}), 7);
    let lost = reported(&mut again, 7);
    assert_eq!(lost.last().unwrap().state, State::Running);
    let store = std::mem::take(again.journal_mut().store_mut());
    let mut third: T = Thread::load(store, s.thread.clone(), 8).unwrap();
    third.journal_mut().set_thread_id("t1");
    let said = reported(&mut third, 8);
    assert_eq!(said.len(), 1);
    assert_eq!(said[0].run_id.as_deref(), second["runId"].as_str());
    assert!(said[0].version > lost.last().unwrap().version, "above the one that may have been taken");
}

#[test]
fn a_schedule_fires_as_the_owner_on_the_alarm_and_waits_in_the_queue_behind_a_run() {
    let s = settings();
    let mut t = support::thread(&s);
    let (_, first, effects) = send(&mut t, &s, json!({"message": "first"}), 1_000);
    let run = first["runId"].as_str().unwrap().to_owned();
    let token = token_of(&effects, &run);
    finish(&mut t, &s, &run, &token, 1_500);
    let o = serve(
        &mut t,
        &s,
        Req::new("POST", "/instance-ai/threads/t1/schedules", alice())
            .body(&json!({"message": "tick", "everySeconds": 2})),
        2_000,
    );
    assert_eq!(support::status(&o), 201, "{:?}", o.answer);
    let id = support::json(&o)["scheduleId"].as_str().unwrap().to_owned();
    assert_eq!(t.clock().next_alarm(2_000, &s), Some(4_000), "the alarm is kept at the next firing");
    // Someone else's thread: 404, as every owner route.
    let theirs = serve(&mut t, &s, Req::new("GET", "/instance-ai/threads/t1/schedules", actor("bob", &[])), 2_000);
    assert_eq!(support::status(&theirs), 404);
    // Not yet.
    t.clock().alarm(&s, 3_999).unwrap();
    assert!(t.runs().holder().is_none());
    // Fires: a run as alice starts.
    t.clock().alarm(&s, 4_000).unwrap();
    let holder = t.runs().active_run().cloned().expect("the schedule's run");
    assert_eq!((holder.message.as_str(), holder.turn.actor.as_deref()), ("tick", Some("alice")));
    // The next firing finds the thread busy: it waits in the queue.
    t.clock().alarm(&s, 6_000).unwrap();
    assert_eq!(queue_ids(&t), ["tick"], "queued behind the run, not lost");
    // An alarm that fires again at the same time (at least once) sends nothing twice.
    t.clock().alarm(&s, 6_000).unwrap();
    assert_eq!(queue_ids(&t), ["tick"]);
    let list = serve(&mut t, &s, Req::new("GET", "/instance-ai/threads/t1/schedules", alice()), 6_000);
    assert_eq!(support::json(&list)["schedules"][0]["fired"], 2);
    // Removed: no more firings; the thread's schedules survive a reload meanwhile.
    let store = std::mem::take(t.journal_mut().store_mut());
    let mut t: T = Thread::load(store, s.thread.clone(), 6_500).unwrap();
    t.journal_mut().set_thread_id("t1");
    assert_eq!(t.schedules().len(), 1);
    let gone =
        serve(&mut t, &s, Req::new("DELETE", &format!("/instance-ai/threads/t1/schedules/{id}"), alice()), 6_500);
    assert_eq!(support::status(&gone), 200);
    assert_eq!(
        support::status(&serve(
            &mut t,
            &s,
            Req::new("DELETE", &format!("/instance-ai/threads/t1/schedules/{id}"), alice()),
            6_500
        )),
        404
    );
    assert_eq!(t.schedules().len(), 0);
    let bad = serve(
        &mut t,
        &s,
        Req::new("POST", "/instance-ai/threads/t1/schedules", alice())
            .body(&json!({"message": "x", "cron": "61 * * * *"})),
        7_000,
    );
    assert_eq!(support::code(&bad), "invalid_schedule");
}

#[test]
fn a_request_left_by_a_run_that_ended_waits_for_nobody() {
    use threadline_durable::directory::inbox::State;
    let s = settings();
    let (mut t, run, token) = suspended(&s);
    assert_eq!(reported(&mut t, 3).last().unwrap().state, State::Waiting);
    finish(&mut t, &s, &run, &token, 4);
    let after = reported(&mut t, 4);
    assert_eq!(after.last().map(|r| (r.state, r.waiting.is_none())), Some((State::Idle, true)));
}

#[test]
fn a_firing_a_full_queue_cannot_take_is_dropped_and_the_schedule_moves_on() {
    // The smallest queue the setting allows: a few long messages fill it.
    let s = Settings::from_pairs(&[("AGENT_WEBHOOK_URL", "http://hook"), ("MAX_QUEUE_BYTES", "1000")]);
    let mut t = support::thread(&s);
    send(&mut t, &s, json!({"message": "holds the thread"}), 1_000);
    let long = "x".repeat(400);
    let o = serve(
        &mut t,
        &s,
        Req::new("POST", "/instance-ai/threads/t1/schedules", alice())
            .body(&json!({"message": long, "everySeconds": 1})),
        1_000,
    );
    assert_eq!(support::status(&o), 201, "{:?}", o.answer);
    let mut at = 2_000;
    while t.schedules()[0].dropped == 0 {
        assert!(at < 20_000, "the queue never filled");
        t.clock().alarm(&s, at).unwrap();
        at += 1_000;
    }
    let queued = queue_ids(&t).len();
    // The alarm that could not queue it still moved the schedule on: the
    // next deadline is a period away, not now.
    let fired_at = at - 1_000;
    assert_eq!(t.schedule_deadline(), Some(fired_at + 1_000));
    assert!(t.clock().next_alarm(fired_at, &s).is_some_and(|d| d > fired_at));
    t.clock().alarm(&s, at).unwrap();
    assert_eq!(queue_ids(&t).len(), queued, "nothing more fits");
    assert_eq!(t.schedules()[0].dropped, 2);
    let list = serve(&mut t, &s, Req::new("GET", "/instance-ai/threads/t1/schedules", alice()), at);
    assert_eq!(support::json(&list)["schedules"][0]["dropped"], 2);
}
