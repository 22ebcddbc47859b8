//! Property-based fuzzing of everything that reads outside input: paths,
//! cursors, published events, decision bodies, tokens. None may panic; a
//! refused batch must leave the thread's log byte-identical.

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use threadline_durable::auth::{self, Verifier};
use threadline_durable::protocols::{self, Target};
use threadline_durable::storage::store::{Driver, MemoryStore};
use threadline_durable::thread::Discard;
use threadline_durable::{cursor, parse_published, run_id, thread_of, Config, Event, StartRun, Thread};

/// Arbitrary JSON, biased toward the shapes the schema cares about.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        "[a-zA-Z_\\-]{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            "text-delta",
            "tool-call",
            "run-finish",
            "run-start",
            "confirmation-request",
            "text-block",
            "__proto__",
            "orchestrator",
            "completed",
            "approval",
            "questions",
        ])
        .prop_map(|s| Value::String(s.to_owned())),
        ".{0,40}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop::sample::select(vec![
                        "type",
                        "agentId",
                        "responseId",
                        "payload",
                        "text",
                        "toolCallId",
                        "toolName",
                        "args",
                        "result",
                        "status",
                        "reason",
                        "requestId",
                        "severity",
                        "message",
                        "inputType",
                        "tasks",
                        "__proto__",
                        "x",
                    ]),
                    inner,
                ),
                0..7,
            )
            .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect::<Map<_, _>>())),
        ]
    })
}

fn thread() -> Thread<MemoryStore, Discard> {
    let mut t = Thread::load(MemoryStore::default(), Config::default(), 0).unwrap();
    t.start_run(
        StartRun {
            run_id: "r".into(),
            message_id: "m".into(),
            message: "hi".into(),
            publish_token: "k".into(),
            driver: Driver::Webhook,
            model: None,
            turn: Default::default(),
            place: Default::default(),
        },
        0,
    )
    .unwrap();
    t
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    #[test]
    fn paths_and_cursors_never_panic(method in "[A-Z]{0,7}", path in "(/[a-zA-Z0-9._%~\\-]{0,20}){0,8}", h in ".{0,20}", q in ".{0,20}") {
        if let (Ok(r), _) = protocols::parse(&method, &path) {
            prop_assert!(r.target() != Target::Thread || !r.thread().is_empty());
        }
        let _ = cursor(Some(&h), Some(&q));
        let _ = run_id(&h);
        let _ = thread_of(&q);
    }

    #[test]
    fn events_parse_or_refuse(v in json_value()) {
        if let Ok(ev) = parse_published(v, "r", 1) {
            // What is accepted serialises and parses back to itself.
            let back: Event = serde_json::from_str(&ev.to_json()).unwrap();
            prop_assert_eq!(back, ev);
        }
    }

    #[test]
    fn refused_batches_leave_the_log_byte_identical(batch in prop::collection::vec(json_value(), 0..6)) {
        let mut t = thread();
        let before: Vec<_> = t.journal().store().records.clone();
        let runs_before = t.journal().store().runs.clone();
        match t.publish("r", batch, 5) {
            Ok(_) => {}
            Err(e) => {
                let e = threadline_durable::wire::error::ApiError::from(e);
                prop_assert!(e.status >= 400 && e.status < 500, "{e}");
                prop_assert_eq!(&t.journal().store().records, &before);
                prop_assert_eq!(&t.journal().store().runs, &runs_before);
            }
        }
    }

    #[test]
    fn decisions_and_tokens_never_panic(body in json_value(), kind in prop::sample::select(vec!["approval", "text", "questions", "plan-review"]), token in ".{0,80}") {
        if let Err(e) = threadline_durable::thread::check_decision(kind, &body) {
            prop_assert_eq!(threadline_durable::wire::error::ApiError::from(e).status, 400);
        }
        let v = Verifier::new(Some("0123456789abcdef0123456789abcdef"), None, None, None).unwrap();
        prop_assert!(v.verify(&token, 0).is_err());
        prop_assert!(auth::verify_stream_token(b"k", &token, "t", 0).is_err());
    }
}
