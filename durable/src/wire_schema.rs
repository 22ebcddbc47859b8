//! The wire schema as a JSON Schema document, generated from the core's own
//! types so the TypeScript client never drifts from them.
//!
//! `client/schema/threadline.schema.json` is checked in; this test fails when
//! it is not what the types generate (run it with `THREADLINE_BLESS=1` to
//! rewrite it, then `npm run --prefix client gen` for the TypeScript types).
//! Test-only: the derives behind it (`schemars`) are dev-dependencies, so the
//! Worker's wasm carries none of this.

use crate::log::event::{payload as p, Kind};
use schemars::generate::SchemaSettings;
use schemars::{Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

/// The payload type of each kind: the same mapping as `event::Payload`,
/// exhaustive so a new kind cannot be left out.
fn payload(kind: Kind, g: &mut SchemaGenerator) -> Schema {
    match kind {
        Kind::RunStart => g.subschema_for::<p::RunStart>(),
        Kind::RunFinish => g.subschema_for::<p::RunFinish>(),
        Kind::TextDelta | Kind::ReasoningDelta | Kind::TextBlock | Kind::ReasoningBlock => {
            g.subschema_for::<p::TextOut>()
        }
        Kind::ToolInputStart => g.subschema_for::<p::ToolInputStart>(),
        Kind::ToolCall => g.subschema_for::<p::ToolCall>(),
        Kind::ToolResult => g.subschema_for::<p::ToolResult>(),
        Kind::ToolError | Kind::ToolInterrupted => g.subschema_for::<p::ToolError>(),
        Kind::AgentSpawned => g.subschema_for::<p::AgentSpawned>(),
        Kind::AgentCompleted => g.subschema_for::<p::AgentCompleted>(),
        Kind::ConfirmationRequest => g.subschema_for::<p::ConfirmationRequest>(),
        Kind::ConfirmationSettled => g.subschema_for::<p::ConfirmationSettled>(),
        Kind::TasksUpdate => g.subschema_for::<p::TasksUpdate>(),
        Kind::Status => g.subschema_for::<p::StatusMsg>(),
        Kind::Error => g.subschema_for::<p::ErrorMsg>(),
        Kind::ThreadTitleUpdated => g.subschema_for::<p::Title>(),
        Kind::FilesystemRequest => g.subschema_for::<p::FilesystemRequest>(),
        Kind::QueueUpdated => g.subschema_for::<crate::log::queued::QueueUpdate>(),
        Kind::StepStart => g.subschema_for::<p::StepStart>(),
        Kind::StepFinish => g.subschema_for::<p::StepFinish>(),
        Kind::BranchSwitched => g.subschema_for::<p::BranchSwitched>(),
        Kind::ContextCompacted => g.subschema_for::<p::ContextCompacted>(),
        Kind::ContextCompactionFailed => g.subschema_for::<p::ContextCompactionFailed>(),
    }
}

/// `run-start` → `RunStartEvent`.
fn event_def_name(kind: Kind) -> String {
    let mut out = String::new();
    for word in kind.as_str().split('-') {
        let mut c = word.chars();
        if let Some(first) = c.next() {
            out.extend(first.to_uppercase());
            out.push_str(c.as_str());
        }
    }
    out + "Event"
}

fn generate() -> Value {
    let mut g = SchemaSettings::draft2020_12().into_generator();
    let mut defs = Map::new();
    let mut variants = Vec::new();
    for &kind in Kind::ALL {
        let payload = payload(kind, &mut g);
        let name = event_def_name(kind);
        // The envelope of `event::Event`, one variant per kind.
        defs.insert(
            name.clone(),
            json!({
                "type": "object",
                "description": format!("A `{}` event ({:?}).", kind.as_str(), kind.class()),
                "properties": {
                    "type": { "const": kind.as_str() },
                    "runId": { "type": "string" },
                    "agentId": { "type": "string" },
                    "responseId": { "type": "string" },
                    "ts": { "type": "integer", "description": "Epoch milliseconds, stamped by the server." },
                    "payload": payload,
                },
                "required": ["type", "runId", "agentId", "ts", "payload"],
                "additionalProperties": false,
            }),
        );
        variants.push(json!({ "$ref": format!("#/$defs/{name}") }));
    }
    defs.insert("ThreadEvent".into(), json!({ "oneOf": variants }));
    let tree = g.subschema_for::<crate::log::reducer::AgentNode>();
    let queue = g.subschema_for::<crate::log::queued::Queue>();
    for (k, v) in g.take_definitions(true) {
        defs.insert(k, v);
    }
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Threadline",
        "description": "The threadline wire types, generated from the Rust core (durable/src/wire_schema.rs). Do not edit.",
        "type": "object",
        "properties": {
            "event": { "$ref": "#/$defs/ThreadEvent" },
            "agentTree": tree,
            "queue": queue,
        },
        "$defs": defs,
    })
}

#[test]
fn checked_in_schema_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../client/schema/threadline.schema.json");
    let generated = serde_json::to_string_pretty(&generate()).unwrap() + "\n";
    if std::env::var_os("THREADLINE_BLESS").is_some() {
        std::fs::write(path, &generated).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "{path} is stale: run `THREADLINE_BLESS=1 cargo test -p threadline-durable wire_schema` \
         and `npm run --prefix client gen`"
    );
}

#[test]
fn every_kind_has_a_variant_and_payload_schemas_accept_canonical_payloads() {
    let doc = generate();
    let defs = doc["$defs"].as_object().unwrap();
    assert_eq!(doc["$defs"]["ThreadEvent"]["oneOf"].as_array().unwrap().len(), Kind::ALL.len());
    // A canonical payload of every kind validates against its generated schema.
    let samples = [
        (Kind::RunStart, json!({"messageId": "m1"})),
        (Kind::RunStart, json!({"messageId": "m2", "branch": {"parent": null, "editOf": "m1"}})),
        (Kind::RunStart, json!({"messageId": "m1", "branch": {"parent": "r0", "regenerates": "r1"}})),
        (Kind::BranchSwitched, json!({"leaf": "r1", "messageId": "m1"})),
        (
            Kind::ContextCompacted,
            json!({"summary": "s", "from": "r1", "through": "r2", "messages": 4, "model": "m", "tokensBefore": 900, "tokensAfter": 300}),
        ),
        (Kind::ContextCompactionFailed, json!({"reason": "HTTP 500", "tokens": 900})),
        (Kind::RunFinish, json!({"status": "completed"})),
        (Kind::TextBlock, json!({"text": "hi", "parts": [2]})),
        (Kind::TextDelta, json!({"text": "hi", "snapshot": true, "parts": [2]})),
        (Kind::TasksUpdate, json!({"tasks": [{"id": "t", "description": "d", "status": "pending"}]})),
        (Kind::ToolCall, json!({"toolCallId": "c", "toolName": "n", "args": {"a": 1}})),
        (Kind::QueueUpdated, json!({"items": [], "paused": false})),
        (Kind::ConfirmationSettled, json!({"toolCallId": "c", "status": "approved", "decidedVia": "remembered"})),
    ];
    for (kind, raw) in samples {
        let typed = crate::log::event::Payload::from_stored(kind, raw).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        let canonical = serde_json::to_value(typed).expect("a payload serialises");
        let event = json!({"type": kind.as_str(), "runId": "r", "agentId": "a", "ts": 1, "payload": canonical});
        let mut schema = defs[&event_def_name(kind)].clone();
        schema["$defs"] = Value::Object(defs.clone());
        let validator = jsonschema::validator_for(&schema).unwrap();
        assert!(validator.is_valid(&event), "{kind:?}: {event}");
        let bad = json!({"type": kind.as_str(), "runId": "r", "agentId": "a", "ts": 1});
        assert!(!validator.is_valid(&bad), "{kind:?} without payload must fail");
    }
}
