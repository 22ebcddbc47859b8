//! Who may do what on a thread, natively, as a matrix: every kind of caller
//! (owner, stranger, approver-role holder, stream-token holder, publish-token
//! holder, nobody) × every route × every kind of confirmation request (naming
//! the caller's role, naming another role, naming none, a question and a
//! client tool whatever role the policy or a stored record names, unknown).
//! Each cell
//! runs on a fresh thread through the thread's service, as the object shell
//! hands requests over, and a refusal must leave the log byte-identical.

mod support;

use serde_json::{json, Value};
use support::{actor, serve, Req, T};
use threadline_durable::storage::store::{ConfirmState, Confirmation};
use threadline_durable::thread::Answer;
use threadline_durable::Caller;
use threadline_durable::Effect;
use threadline_durable::{Settings, Store};

fn settings() -> Settings {
    Settings::from_pairs(&[
        ("AGENT_WEBHOOK_URL", "http://hook"),
        ("DEBUG_ROUTES", "1"),
        ("STREAM_TOKEN_SECRET", "0123456789abcdef0123456789abcdef"),
        ("APPROVAL_POLICY", r#"{"pay":{"approver":"finance"},"sue":{"approver":"legal"}}"#),
    ])
}

/// A thread owned by alice: a run held by an external agent, five pending
/// confirmations (approvals naming `finance`, naming `legal`, naming no
/// role; a question on `pay`, whose policy names `finance`; and a client
/// tool's request stored naming `finance`, as the previous release could
/// store one), and one queued message. Returns the thread, the run id, its publish token and the
/// queued message's id.
fn fixture(s: &Settings) -> (T, String, String, String) {
    let mut t = support::thread(s);
    let sent = serve(
        &mut t,
        s,
        Req::new("POST", "/instance-ai/chat/t1", actor("alice", &[])).body(&json!({"message": "hello"})),
        1,
    );
    let run = support::json(&sent)["runId"].as_str().unwrap().to_owned();
    let token = sent
        .effects
        .iter()
        .find_map(|e| match e {
            Effect::Webhook { body, .. } => body["publishToken"].as_str().map(str::to_owned),
            _ => None,
        })
        .expect("the start signal carries the publish token");
    let request = |id: &str, tool: &str| {
        json!({"type": "confirmation-request", "agentId": "orchestrator", "payload": {
            "requestId": id, "toolCallId": format!("c-{tool}"), "toolName": tool, "args": {}, "severity": "warning", "message": "ok?"
        }})
    };
    let mut question = request("r-ask", "pay");
    question["payload"]["toolCallId"] = "c-ask".into();
    question["payload"]["inputType"] = "questions".into();
    question["payload"]["questions"] = json!([{"id": "q1", "question": "which?", "type": "single", "options": ["a"]}]);
    let batch = json!([request("r-pay", "pay"), request("r-sue", "sue"), request("r-wipe", "wipe"), question]);
    let path = format!("/instance-ai/threads/t1/runs/{run}/events");
    let published = serve(
        &mut t,
        s,
        Req::new("POST", &path, Caller::Nobody).body(&batch).header("authorization", &format!("Bearer {token}")),
        2,
    );
    assert_eq!(support::status(&published), 200, "{:?}", published.answer);
    let legacy = Confirmation {
        request_id: "t1.r-ct".into(),
        run_id: run.clone(),
        agent_id: "orchestrator".into(),
        tool_call_id: "c-ct".into(),
        tool_name: "pay".into(),
        input_type: "client-tool".into(),
        state: ConfirmState::Pending,
        created_at: 2,
        expires_at: None,
        approver: Some("finance".into()),
        decision: None,
        agent_request_id: None,
        decided_by: None,
        decided_via: None,
    };
    t.journal_mut().store_mut().put_confirmation(&legacy).unwrap();
    let queued = serve(
        &mut t,
        s,
        Req::new("POST", "/instance-ai/chat/t1", actor("alice", &[]))
            .body(&json!({"message": "later", "mode": "queue"})),
        3,
    );
    let queued_id = support::json(&queued)["messageId"].as_str().unwrap().to_owned();
    (t, run, token, queued_id)
}

/// What a caller gets: allowed (a 2xx, or a stream), or a refusal's status
/// and code.
#[derive(Debug, PartialEq, Clone)]
enum Got {
    Ok,
    /// 204: nothing to say (the AI SDK's reconnect with no run to follow).
    Empty,
    No(u16, String),
}

fn got(o: &threadline_durable::thread::Outcome) -> Got {
    match support::status(o) {
        204 => Got::Empty,
        200..=299 => Got::Ok,
        s => Got::No(s, support::code(o)),
    }
}

fn no(status: u16, code: &str) -> Got {
    Got::No(status, code.into())
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Who {
    Owner,
    Stranger,
    Approver,
    StreamToken,
    Publisher,
    Nobody,
}

const EVERYONE: [Who; 6] = [Who::Owner, Who::Stranger, Who::Approver, Who::StreamToken, Who::Publisher, Who::Nobody];

/// How a route treats callers.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// The owner's only (the thread's not-found code for everyone else).
    Owner(&'static str),
    /// Also a stream-token holder's (it reads the thread's streams).
    Reader(&'static str),
    /// Publishing: the run's token decides (401 without one).
    Publish,
    /// A reader's stream; anyone else is told there is nothing to follow
    /// (204), as for a thread with no run: nothing leaks.
    ReaderElseEmpty,
    /// A decision on a request the holders of a role decide
    /// (`Some("finance")`, another role), the owner decides (`None`), or an
    /// unknown request.
    Decide { role: Option<&'static str>, known: bool, not_found: &'static str },
}

fn expected(kind: Kind, who: Who) -> Got {
    match kind {
        Kind::Owner(nf) => match who {
            Who::Owner => Got::Ok,
            _ => no(404, nf),
        },
        Kind::Reader(nf) => match who {
            Who::Owner | Who::StreamToken => Got::Ok,
            _ => no(404, nf),
        },
        Kind::ReaderElseEmpty => match who {
            Who::Owner | Who::StreamToken => Got::Ok,
            Who::Publisher | Who::Nobody | Who::Stranger | Who::Approver => Got::Empty,
        },
        Kind::Publish => match who {
            Who::Publisher => Got::Ok,
            _ => no(401, "unauthorized"),
        },
        Kind::Decide { role, known, not_found } => match (who, role, known) {
            (_, _, false) => no(404, not_found),
            (Who::Owner, None, true) => Got::Ok,
            (Who::Owner, Some(_), true) => no(403, "approver_required"),
            (Who::Approver, Some("finance"), true) => Got::Ok,
            _ => no(404, not_found),
        },
    }
}

fn caller(who: Who, token: &str) -> (Caller, Option<String>) {
    match who {
        Who::Owner => (actor("alice", &[]), None),
        Who::Stranger => (actor("bob", &[]), None),
        Who::Approver => (actor("carol", &["finance"]), None),
        Who::StreamToken => (Caller::StreamToken { id: "alice".into(), expires_at: i64::MAX }, None),
        Who::Publisher => (Caller::Nobody, Some(format!("Bearer {token}"))),
        Who::Nobody => (Caller::Nobody, None),
    }
}

#[test]
fn every_caller_on_every_route() {
    let s = settings();
    let probe = fixture(&s);
    let (run, queued) = (probe.1.clone(), probe.3.clone());
    let delta = json!([{"type": "text-delta", "agentId": "orchestrator", "payload": {"text": "x"}}]);
    let send = json!({"message": "more", "mode": "queue"});
    let agora_send = json!({"threadId": "t1", "message": "more", "mode": "queue"});
    // The fixture's run is active: the owner answers one of its requests.
    let agui_send = json!({"threadId": "t1", "runId": "r", "messages": [],
        "resume": [{"interruptId": "t1.r-wipe", "status": "resolved", "payload": {"approved": true}}]});
    let ui_send = json!({"id": "t1", "mode": "queue", "messages": [{"id": "m9", "role": "user", "parts": [{"type": "text", "text": "more"}]}]});
    let approve = json!({"approved": true});
    let decide_call = |call: &str| json!({"toolCallId": call, "runId": run});
    let q = |suffix: &str| format!("/instance-ai/threads/t1/queue/{queued}{suffix}");
    let answers = json!({"answers": [{"questionId": "q1", "selectedOptions": ["a"]}]});
    let result = json!({"result": "done"});
    // Each request, who decides it, whether the thread holds it, its answer.
    let decisions = [
        ("pay", Some("finance"), true, &approve),
        ("sue", Some("legal"), true, &approve),
        ("wipe", None, true, &approve),
        ("ask", None, true, &answers),
        ("ct", None, true, &result),
        ("nope", None, false, &approve),
    ];
    let mut routes: Vec<(&str, String, Value, Kind)> = vec![
        ("POST", "/instance-ai/chat/t1".into(), send.clone(), Kind::Owner("thread_not_found")),
        ("POST", "/agent/chat".into(), agora_send, Kind::Owner("thread_not_found")),
        ("POST", "/instance-ai/chat/t1/cancel".into(), Value::Null, Kind::Owner("thread_not_found")),
        ("GET", "/instance-ai/events/t1".into(), Value::Null, Kind::Reader("thread_not_found")),
        ("GET", format!("/agent/chat/{run}/stream"), Value::Null, Kind::Reader("nothing_to_resume")),
        ("GET", "/v1/threads/t1?offset=-1".into(), Value::Null, Kind::Reader("thread_not_found")),
        ("GET", format!("/v1/runs/{run}?offset=-1"), Value::Null, Kind::Reader("thread_not_found")),
        ("POST", format!("/instance-ai/threads/t1/runs/{run}/events"), json!([]), Kind::Publish),
        ("POST", format!("/v1/runs/{run}"), delta, Kind::Publish),
        ("GET", "/instance-ai/threads/t1/status".into(), Value::Null, Kind::Owner("thread_not_found")),
        ("GET", "/instance-ai/threads/t1/messages".into(), Value::Null, Kind::Owner("thread_not_found")),
        ("GET", "/instance-ai/threads/t1/debug/stats".into(), Value::Null, Kind::Owner("thread_not_found")),
        ("POST", "/instance-ai/threads/t1/stream-token".into(), Value::Null, Kind::Owner("thread_not_found")),
        ("DELETE", "/instance-ai/threads/t1".into(), Value::Null, Kind::Owner("thread_not_found")),
        ("GET", "/instance-ai/threads/t1/queue".into(), Value::Null, Kind::Owner("thread_not_found")),
        ("PATCH", q(""), json!({"message": "edited"}), Kind::Owner("thread_not_found")),
        ("DELETE", q(""), Value::Null, Kind::Owner("thread_not_found")),
        ("POST", q("/move"), json!({"position": 0}), Kind::Owner("thread_not_found")),
        ("POST", "/instance-ai/threads/t1/queue/pause".into(), Value::Null, Kind::Owner("thread_not_found")),
        ("POST", "/instance-ai/threads/t1/queue/resume".into(), Value::Null, Kind::Owner("thread_not_found")),
        ("GET", "/agent/threads/t1".into(), Value::Null, Kind::Owner("thread_not_found")),
        ("PATCH", "/agent/threads/t1".into(), json!({"model": null}), Kind::Owner("thread_not_found")),
        ("POST", "/api/chat".into(), ui_send, Kind::Owner("thread_not_found")),
        ("GET", "/api/chat/t1/stream".into(), Value::Null, Kind::ReaderElseEmpty),
        ("GET", format!("/api/chat/t1/runs/{run}/stream"), Value::Null, Kind::Reader("nothing_to_resume")),
        ("GET", "/api/chat/t1/messages".into(), Value::Null, Kind::Owner("thread_not_found")),
        ("POST", "/api/chat/t1/stop".into(), Value::Null, Kind::Owner("thread_not_found")),
        ("POST", "/ag-ui".into(), agui_send, Kind::Owner("thread_not_found")),
        ("GET", format!("/ag-ui/threads/t1/runs/{run}"), Value::Null, Kind::Reader("nothing_to_resume")),
        ("GET", "/ag-ui/threads/t1/messages".into(), Value::Null, Kind::Owner("thread_not_found")),
    ];
    for (tool, role, known, answer) in decisions {
        let kind = |not_found| Kind::Decide { role, known, not_found };
        routes.push((
            "POST",
            format!("/instance-ai/confirm/t1.r-{tool}"),
            answer.clone(),
            kind("confirmation_not_found"),
        ));
        if !std::ptr::eq(answer, &approve) {
            // agora's routes decide approvals only.
            continue;
        }
        routes.push((
            "POST",
            "/agent/tool-call/approve".into(),
            decide_call(&format!("c-{tool}")),
            kind("tool_call_not_found"),
        ));
    }
    let mut cells = 0;
    for (method, path, body, kind) in &routes {
        for who in EVERYONE {
            let (mut t, _, token, _) = fixture(&s);
            let before = t.journal().store().records.clone();
            let (c, authorization) = caller(who, &token);
            let mut req = Req::new(method, path, c);
            if !body.is_null() {
                req = req.body(body);
            }
            if let Some(a) = &authorization {
                req = req.header("authorization", a);
            }
            let outcome = serve(&mut t, &s, req, 10);
            let want = expected(*kind, who);
            // An append to a Durable Stream answers 204: accepted too.
            let answer = match (kind, got(&outcome)) {
                (Kind::Publish, Got::Empty) => Got::Ok,
                (_, g) => g,
            };
            assert_eq!(answer, want, "{who:?} {method} {path}");
            if want != Got::Ok {
                assert_eq!(t.journal().store().records, before, "{who:?} {method} {path}: a refusal stores nothing");
                assert!(outcome.effects.is_empty(), "{who:?} {method} {path}: a refusal does nothing");
            }
            cells += 1;
        }
    }
    assert_eq!(cells, routes.len() * EVERYONE.len());
}

#[test]
fn a_refusal_is_the_answer_an_unknown_id_gets() {
    let s = settings();
    let (mut t, run, _, _) = fixture(&s);
    let mut unknown = support::thread(&s);
    // (n8n's status, messages, events and cancel serve a thread that does
    // not exist yet as an empty one, so on those an id someone owns answers
    // otherwise than a free one: `a_thread_nobody_owns_yet_is_served_empty`.)
    for (method, path) in [
        ("GET", "/agent/threads/t1".to_owned()),
        ("GET", format!("/agent/chat/{run}/stream")),
        ("POST", "/instance-ai/confirm/t1.r-wipe".to_owned()),
    ] {
        let theirs =
            serve(&mut t, &s, Req::new(method, &path, actor("bob", &["finance"])).body(&json!({"approved": true})), 10);
        let none = serve(
            &mut unknown,
            &s,
            Req::new(method, &path, actor("bob", &["finance"])).body(&json!({"approved": true})),
            10,
        );
        assert_eq!(support::json(&theirs), support::json(&none), "{method} {path}");
    }
}

#[test]
fn an_approver_decides_only_requests_naming_a_role_they_hold_and_cannot_widen_it() {
    let s = settings();
    let (mut t, _, _, _) = fixture(&s);
    let carol = || actor("carol", &["finance"]);
    // `scope: "session"` on a request naming no role would approve the tool
    // for the rest of the thread: refused like an unknown id.
    let wipe = serve(
        &mut t,
        &s,
        Req::new("POST", "/instance-ai/confirm/t1.r-wipe", carol())
            .body(&json!({"approved": true, "scope": "session"})),
        10,
    );
    assert_eq!(got(&wipe), no(404, "confirmation_not_found"));
    assert!(!t.requests().session_approved("wipe").unwrap());
    let pay = serve(
        &mut t,
        &s,
        Req::new("POST", "/instance-ai/confirm/t1.r-pay", carol()).body(&json!({"approved": true})),
        10,
    );
    assert_eq!(support::json(&pay)["state"], "approved");
    // The owner still decides the one carol could not.
    let mine = serve(
        &mut t,
        &s,
        Req::new("POST", "/instance-ai/confirm/t1.r-wipe", actor("alice", &[])).body(&json!({"approved": false})),
        11,
    );
    assert_eq!(support::json(&mine)["state"], "denied");
}

#[test]
fn only_an_accepted_send_claims_a_thread() {
    let s = settings();
    let mut t = support::thread(&s);
    for body in [
        json!({}),
        json!({"message": ""}),
        json!({"message": "x", "mode": "later"}),
        json!({"message": "x", "model": "nope"}),
    ] {
        let refused = serve(&mut t, &s, Req::new("POST", "/instance-ai/chat/t1", actor("mallory", &[])).body(&body), 1);
        assert_eq!(support::status(&refused) / 100, 4, "{body}");
        assert_eq!(t.conversation().owner().unwrap(), None, "{body}: a refused send claims nothing");
    }
    let status = serve(&mut t, &s, Req::new("GET", "/instance-ai/threads/t1/status", actor("mallory", &[])), 1);
    assert_eq!(support::json(&status)["hasActiveRun"], false, "a thread nobody owns is an empty one");
    assert_eq!(t.conversation().owner().unwrap(), None, "and a read claims nothing");
    let ok = serve(
        &mut t,
        &s,
        Req::new("POST", "/instance-ai/chat/t1", actor("bob", &[])).body(&json!({"message": "mine"})),
        2,
    );
    assert_eq!(support::status(&ok), 200);
    assert_eq!(t.conversation().owner().unwrap().as_deref(), Some("bob"));
    assert!(matches!(
        serve(&mut t, &s, Req::new("GET", "/instance-ai/threads/t1/status", actor("mallory", &[])), 3).answer,
        Answer::Reply(ref r) if r.status == 404
    ));
}

#[test]
fn a_batch_of_answers_is_admitted_whole_or_not_at_all() {
    let s = settings();
    let resume = |entries: Value| json!({"threadId": "t1", "runId": "r", "messages": [], "resume": entries});
    let wipe = json!({"interruptId": "t1.r-wipe", "status": "resolved", "payload": {"approved": true}});
    let bad_answer = json!({"interruptId": "t1.r-ask", "status": "resolved", "payload": {"answers": "not a list"}});
    let pay = json!({"interruptId": "t1.r-pay", "status": "resolved", "payload": {"approved": true}});
    // An answer that does not fit its request, and one the caller may not
    // give, each after one that would pass on its own.
    for (entries, code) in [(json!([wipe, bad_answer]), "invalid_decision"), (json!([wipe, pay]), "approver_required")]
    {
        let (mut t, _, _, _) = fixture(&s);
        let (records, confirmations) = (t.journal().store().records.clone(), t.journal().store().confirmations.clone());
        let refused = serve(&mut t, &s, Req::new("POST", "/ag-ui", actor("alice", &[])).body(&resume(entries)), 10);
        assert_eq!(support::code(&refused), code);
        assert_eq!(t.journal().store().records, records, "{code}: nothing of the batch is in the log");
        assert_eq!(t.journal().store().confirmations, confirmations, "{code}: no request is decided");
        assert!(refused.effects.is_empty(), "{code}: no agent is told anything");
        assert_eq!(t.requests().get("t1.r-wipe").unwrap().unwrap().state, ConfirmState::Pending);
    }
    // The same batch, every answer fitting: both decided, the agent told of each.
    let (mut t, _, _, _) = fixture(&s);
    let good = json!({"interruptId": "t1.r-ask", "status": "resolved", "payload": {"answers": [{"questionId": "q1", "selectedOptions": ["a"]}]}});
    let ok = serve(&mut t, &s, Req::new("POST", "/ag-ui", actor("alice", &[])).body(&resume(json!([wipe, good]))), 10);
    assert_eq!(support::status(&ok), 200, "{:?}", ok.answer);
    for id in ["t1.r-wipe", "t1.r-ask"] {
        assert_ne!(t.requests().get(id).unwrap().unwrap().state, ConfirmState::Pending, "{id}");
    }
    let told = ok
        .effects
        .iter()
        .filter(|e| matches!(e, Effect::Webhook { body, .. } if body["type"] == "confirmation"))
        .count();
    assert_eq!(told, 2);
}

#[test]
fn a_thread_nobody_owns_yet_is_served_empty_and_stays_nobodys() {
    let s = settings();
    let mut t = support::thread(&s);
    for (method, path) in [
        ("GET", "/instance-ai/threads/t1/status"),
        ("GET", "/instance-ai/threads/t1/messages"),
        ("POST", "/instance-ai/chat/t1/cancel"),
    ] {
        let r = serve(&mut t, &s, Req::new(method, path, actor("mallory", &[])), 1);
        assert_eq!(support::status(&r), 200, "{method} {path}");
        assert!(r.effects.is_empty(), "{method} {path}: nothing is done");
    }
    let events = serve(&mut t, &s, Req::new("GET", "/instance-ai/events/t1", actor("mallory", &[])), 1);
    assert!(
        matches!(events.answer, Answer::Follow { ref follow, .. } if follow.prospect.as_deref() == Some("mallory"))
    );
    assert_eq!(t.conversation().owner().unwrap(), None);
    assert!(t.journal().store().records.is_empty(), "nothing is stored");
    // Routes that are their owner's alone still refuse.
    let delete = serve(&mut t, &s, Req::new("DELETE", "/instance-ai/threads/t1", actor("mallory", &[])), 1);
    assert_eq!(got(&delete), no(404, "thread_not_found"));
}
