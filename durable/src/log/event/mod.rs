//! The event schema of the Instance AI protocol (`docs/protocols/n8n-instance-ai-streaming-protocol.md`, `docs/protocols/notes-from-source-and-trackers.md` §1).
//!
//! An incoming event is parsed into an [`Event`] whose payload has been checked
//! against the typed schema of its kind and re-serialised in canonical form:
//! unknown payload fields are dropped (as a Zod object schema strips them), so
//! what is stored and replayed is exactly what the schema describes.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Longest accepted `agentId`, `responseId` and identifier-like payload field.
pub const MAX_ID_LEN: usize = 128;

macro_rules! kinds {
    ($( $variant:ident = $name:literal => $class:ident ($payload:ty) ),* $(,)?) => {
        /// Every event type of the protocol.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Kind { $( $variant ),* }

        impl Kind {
            pub const ALL: &'static [Kind] = &[ $( Kind::$variant ),* ];

            /// The wire name, e.g. `"tool-call"`.
            pub fn as_str(self) -> &'static str {
                match self { $( Kind::$variant => $name ),* }
            }

            pub fn parse(name: &str) -> Option<Kind> {
                match name { $( $name => Some(Kind::$variant), )* _ => None }
            }

            /// How the log treats events of this kind.
            pub fn class(self) -> Class {
                match self { $( Kind::$variant => Class::$class ),* }
            }
        }

        /// An event's payload, typed: one variant per [`Kind`], each its
        /// schema's struct. Parsed once, when an event is accepted
        /// ([`parse_published`]) or read back from the log (`Event`'s
        /// `Deserialize`); every reader matches on it, so a new kind is a
        /// compile error in each place that must decide what it means.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Payload { $( $variant($payload) ),* }

        impl Payload {
            pub fn kind(&self) -> Kind {
                match self { $( Payload::$variant(_) => Kind::$variant ),* }
            }

            /// A stored payload of `kind`, read back as its type: through
            /// its JSON text, so each payload type has one deserializer in
            /// the Worker, not one from text and one from a tree (they were
            /// 46 KB of its code). Its error says what is wrong, not where
            /// in the text made here.
            pub fn from_stored(kind: Kind, value: Value) -> Result<Payload, SchemaError> {
                Payload::from_raw(kind, &value.to_string()).map_err(|e| SchemaError(without_position(e.0)))
            }

            /// A stored payload of `kind`, read back as its type straight
            /// from its JSON text (no intermediate tree).
            fn from_raw(kind: Kind, raw: &str) -> Result<Payload, SchemaError> {
                Ok(match kind {
                    $( Kind::$variant => Payload::$variant(
                        serde_json::from_str::<$payload>(raw).map_err(|e| SchemaError(e.to_string()))?,
                    ), )*
                })
            }
        }

        impl Serialize for Payload {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self { $( Payload::$variant(p) => p.serialize(s) ),* }
            }
        }
    };
}

kinds! {
    RunStart = "run-start" => Structural (payload::RunStart),
    RunFinish = "run-finish" => Structural (payload::RunFinish),
    TextDelta = "text-delta" => Ephemeral (payload::TextOut),
    ReasoningDelta = "reasoning-delta" => Ephemeral (payload::TextOut),
    TextBlock = "text-block" => Coalesced (payload::TextOut),
    ReasoningBlock = "reasoning-block" => Coalesced (payload::TextOut),
    ToolInputStart = "tool-input-start" => Structural (payload::ToolInputStart),
    ToolCall = "tool-call" => Structural (payload::ToolCall),
    ToolResult = "tool-result" => Structural (payload::ToolResult),
    ToolError = "tool-error" => Structural (payload::ToolError),
    ToolInterrupted = "tool-interrupted" => Structural (payload::ToolError),
    AgentSpawned = "agent-spawned" => Structural (payload::AgentSpawned),
    AgentCompleted = "agent-completed" => Structural (payload::AgentCompleted),
    ConfirmationRequest = "confirmation-request" => Structural (Box<payload::ConfirmationRequest>),
    ConfirmationSettled = "confirmation-settled" => Structural (payload::ConfirmationSettled),
    TasksUpdate = "tasks-update" => Structural (payload::TasksUpdate),
    Status = "status" => Ephemeral (payload::StatusMsg),
    Error = "error" => Structural (payload::ErrorMsg),
    ThreadTitleUpdated = "thread-title-updated" => Structural (payload::Title),
    FilesystemRequest = "filesystem-request" => Ephemeral (payload::FilesystemRequest),
    QueueUpdated = "queue-updated" => Structural (crate::log::queued::QueueUpdate),
    StepStart = "step-start" => Structural (payload::StepStart),
    StepFinish = "step-finish" => Structural (payload::StepFinish),
    BranchSwitched = "branch-switched" => Structural (payload::BranchSwitched),
    ContextCompacted = "context-compacted" => Structural (payload::ContextCompacted),
    ContextCompactionFailed = "context-compaction-failed" => Structural (payload::ContextCompactionFailed),
}

impl Payload {
    /// A text or reasoning payload: its text, whether it is reasoning, and
    /// whether it is a delta (rather than a block). `None` for other kinds.
    pub fn text(&self) -> Option<(&payload::TextOut, bool, bool)> {
        match self {
            Payload::TextDelta(t) => Some((t, false, true)),
            Payload::ReasoningDelta(t) => Some((t, true, true)),
            Payload::TextBlock(t) => Some((t, false, false)),
            Payload::ReasoningBlock(t) => Some((t, true, false)),
            _ => None,
        }
    }
}

/// The three classes of `docs/protocols/notes-from-source-and-trackers.md` §1 "Durable log".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Sent live without an `id:`, never stored one by one.
    Ephemeral,
    /// Stored with a seq; produced by coalescing deltas.
    Coalesced,
    /// Stored with a seq and sent live with its id.
    Structural,
}

impl Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Kind::parse(&name).ok_or_else(|| serde::de::Error::custom(format!("unknown event type `{name}`")))
    }
}

/// One event as it is stored and sent: the protocol's envelope.
///
/// Field order is the wire order; `data:` lines are this struct serialised:
/// `{type, runId, agentId, responseId?, ts, payload}`, the type named by the
/// payload's variant.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub run_id: String,
    pub agent_id: String,
    pub response_id: Option<String>,
    /// Epoch milliseconds, stamped by the server at publish.
    pub ts: i64,
    pub payload: Payload,
}

impl Event {
    pub fn new(payload: Payload, run_id: &str, agent_id: &str, ts: i64) -> Event {
        Event { run_id: run_id.to_owned(), agent_id: agent_id.to_owned(), response_id: None, ts, payload }
    }

    /// An event from a payload in its stored form (a text's `parts` and
    /// `snapshot` included), read as the log reads it back: the server's own
    /// JSON-built events and the tests' fixtures are made so.
    pub fn from_json(kind: Kind, run_id: &str, agent_id: &str, ts: i64, payload: Value) -> Result<Event, SchemaError> {
        Ok(Event::new(Payload::from_stored(kind, payload)?, run_id, agent_id, ts))
    }

    /// An event the server builds as JSON (the agent's, the thread's), read
    /// as the log reads it back. Total: a payload that does not fit its
    /// kind's schema (a bug, or a model's odd tool arguments carried into
    /// it) becomes an `error` event that says so, never a trap.
    pub fn built(kind: Kind, run_id: &str, agent_id: &str, ts: i64, payload: Value) -> Event {
        Event::from_json(kind, run_id, agent_id, ts, payload).unwrap_or_else(|e| {
            let content = format!("an invalid `{}` event was left out: {e}", kind.as_str());
            let error =
                payload::ErrorMsg { content, status_code: None, code: Some("invalid_event".into()), provider: None };
            Event::new(Payload::Error(error), run_id, agent_id, ts)
        })
    }

    pub fn kind(&self) -> Kind {
        self.payload.kind()
    }

    /// The payload as JSON, as it is stored and sent.
    pub fn payload_json(&self) -> Value {
        serde_json::to_value(&self.payload).expect("a payload always serialises")
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an Event always serialises")
    }
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Event", 6)?;
        st.serialize_field("type", &self.kind())?;
        st.serialize_field("runId", &self.run_id)?;
        st.serialize_field("agentId", &self.agent_id)?;
        if let Some(rid) = &self.response_id {
            st.serialize_field("responseId", rid)?;
        }
        st.serialize_field("ts", &self.ts)?;
        st.serialize_field("payload", &self.payload)?;
        st.end()
    }
}

/// The envelope as stored: the payload is typed by its `type`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    #[serde(rename = "type")]
    kind: Kind,
    run_id: String,
    agent_id: String,
    #[serde(default)]
    response_id: Option<String>,
    ts: i64,
    /// The payload's text, parsed once by its kind's type.
    payload: Box<serde_json::value::RawValue>,
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let stored = Stored::deserialize(d)?;
        let payload = Payload::from_raw(stored.kind, stored.payload.get()).map_err(serde::de::Error::custom)?;
        Ok(Event {
            run_id: stored.run_id,
            agent_id: stored.agent_id,
            response_id: stored.response_id,
            ts: stored.ts,
            payload,
        })
    }
}

/// What a publisher sends: `{type, agentId, responseId?, payload}`.
/// `runId` and `ts` are the server's to stamp.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Incoming {
    #[serde(rename = "type")]
    kind: String,
    agent_id: String,
    #[serde(default)]
    response_id: Option<String>,
    #[serde(default)]
    payload: Option<Value>,
}

/// Why an event was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError(pub String);

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, SchemaError> {
    Err(SchemaError(msg.into()))
}

/// Parses and validates one published event, stamping `run_id` and `ts`.
pub fn parse_published(value: Value, run_id: &str, ts: i64) -> Result<Event, SchemaError> {
    if !value.is_object() {
        return err("an event must be a JSON object");
    }
    let incoming: Incoming = serde_json::from_value(value).map_err(|e| SchemaError(e.to_string()))?;
    let Some(kind) = Kind::parse(&incoming.kind) else {
        return err(format!("unknown event type `{}`", incoming.kind));
    };
    check_id("agentId", &incoming.agent_id)?;
    if let Some(rid) = &incoming.response_id {
        check_id("responseId", rid)?;
    }
    let payload = accept_payload(kind, incoming.payload.unwrap_or(Value::Object(Map::new())))?;
    Ok(Event { run_id: run_id.to_owned(), agent_id: incoming.agent_id, response_id: incoming.response_id, ts, payload })
}

fn check_id(field: &str, id: &str) -> Result<(), SchemaError> {
    if id.is_empty() || id.len() > MAX_ID_LEN {
        return err(format!("`{field}` must be 1 to {MAX_ID_LEN} characters"));
    }
    if id.chars().any(char::is_control) {
        return err(format!("`{field}` must not contain control characters"));
    }
    Ok(())
}

/// A serde_json error's message without its ` at line L column C`.
fn without_position(why: String) -> String {
    match why.rfind(" at line ") {
        Some(at) if why[at..].contains(" column ") => why[..at].to_owned(),
        _ => why,
    }
}

/// Rejects object keys that poison JavaScript prototypes in clients that fold
/// events with plain objects (`docs/protocols/notes-from-source-and-trackers.md` §1, reducer rules).
fn reject_proto_keys(v: &Value) -> Result<(), SchemaError> {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                if k == "__proto__" {
                    return err("object key `__proto__` is not allowed");
                }
                reject_proto_keys(child)?;
            }
            Ok(())
        }
        Value::Array(items) => items.iter().try_for_each(reject_proto_keys),
        _ => Ok(()),
    }
}

/// Checks a publisher's `payload` against the schema of `kind` and returns it
/// typed. Unknown fields are dropped (as a Zod object schema strips them);
/// what a publisher may not set (a text's `parts` and `snapshot`, which are
/// the server's) is not read. Free-form fields the protocols carry through
/// untouched (a call's `args`, a result, a run's `output`) stay JSON values
/// inside the typed payload.
pub fn accept_payload(kind: Kind, payload: Value) -> Result<Payload, SchemaError> {
    reject_proto_keys(&payload)?;
    if !payload.is_object() {
        return err("`payload` must be a JSON object");
    }
    // What a publisher may not set, or sets in a shape of its own, is read
    // here; every other kind is read as the log reads it back.
    let text = |v: Value| typed::<payload::Text>(v).map(|t| payload::TextOut::plain(t.text));
    Ok(match kind {
        Kind::TextDelta => Payload::TextDelta(text(payload)?),
        Kind::ReasoningDelta => Payload::ReasoningDelta(text(payload)?),
        Kind::TextBlock => Payload::TextBlock(text(payload)?),
        Kind::ReasoningBlock => Payload::ReasoningBlock(text(payload)?),
        Kind::TasksUpdate => Payload::TasksUpdate(tasks_update(payload)?),
        Kind::AgentSpawned => {
            let mut spawned: payload::AgentSpawned = typed(payload)?;
            spawned.tools.get_or_insert_with(Vec::new);
            Payload::AgentSpawned(spawned)
        }
        _ => Payload::from_stored(kind, payload)?,
    })
}

/// One payload type, from a publisher's JSON object (the checks of
/// [`accept_payload`]).
pub fn accept<T: for<'de> Deserialize<'de>>(payload: Value) -> Result<T, SchemaError> {
    reject_proto_keys(&payload)?;
    if !payload.is_object() {
        return err("`payload` must be a JSON object");
    }
    typed(payload)
}

fn typed<T: for<'de> Deserialize<'de>>(v: Value) -> Result<T, SchemaError> {
    serde_json::from_value(v).map_err(|e| SchemaError(e.to_string()))
}

/// `tasks-update` comes in two shapes, and each is stored and re-emitted
/// as it was published: the seed's flat `{tasks: [...]}` (statuses
/// `completed`, `in_progress`, `pending`) and n8n's schema's nested
/// `{tasks: {tasks: [...]}}` (`todo`, `in_progress`, `done`, `failed`,
/// `cancelled`). Readers take the list from either ([`payload::TasksUpdate::list`]).
fn tasks_update(payload: Value) -> Result<payload::TasksUpdate, SchemaError> {
    let Some(tasks) = payload.get("tasks") else {
        return err("missing field `tasks`");
    };
    let stored: payload::Tasks = match tasks {
        Value::Array(_) => payload::Tasks::List(
            serde_json::from_value(tasks.clone()).map_err(|e| SchemaError(format!("`tasks`: {e}")))?,
        ),
        Value::Object(o) => payload::Tasks::Nested(payload::TaskList {
            tasks: serde_json::from_value(o.get("tasks").cloned().unwrap_or(Value::Null))
                .map_err(|e| SchemaError(format!("`tasks.tasks`: {e}")))?,
        }),
        _ => return err("`tasks` is a list of tasks, or `{tasks: [...]}`"),
    };
    let stored = payload::TasksUpdate { tasks: stored };
    if let Some(t) = stored.list().iter().find(|t| !payload::TASK_STATUSES.contains(&t.status.as_str())) {
        return err(format!("unknown task status `{}`", t.status));
    }
    Ok(stored)
}

pub use payload::FinishStatus;

pub mod payload;

impl Payload {
    /// The length of the payload's compact JSON text, exactly
    /// `serde_json::to_string`'s, counted as it is written rather than
    /// written into a buffer: a publish checks every event's payload against
    /// `MAX_EVENT_BYTES`.
    pub fn encoded_len(&self) -> usize {
        let mut counter = Counter(0);
        serde_json::to_writer(&mut counter, self).expect("a payload always serialises");
        counter.0
    }
}

/// Counts what is written.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_len_is_the_serialised_length() {
        let ev = parse(json!({"type":"tool-result","agentId":"a","payload":{"toolCallId":"t\"1","result":
            {"k\"ey": {"nested": [true, false, {"x": -1.25e-7}]}, "ünï": "naïve ☃ 𝄞 \u{2028}\u{1}", "n": u64::MAX}}}))
        .unwrap();
        assert_eq!(ev.payload.encoded_len(), serde_json::to_string(&ev.payload).unwrap().len());
    }

    use serde_json::json;

    fn parse(v: Value) -> Result<Event, SchemaError> {
        parse_published(v, "run_1", 1000)
    }

    #[test]
    fn every_kind_round_trips_its_name() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.as_str()), Some(*k));
        }
        assert_eq!(Kind::ALL.len(), 26);
    }

    #[test]
    fn stamps_run_and_ts_and_strips_unknown_fields() {
        let ev = parse(json!({"type":"tool-call","agentId":"a1","runId":"forged","ts":1,
            "payload":{"toolCallId":"t1","toolName":"x","args":{"k":1},"extra":true}}))
        .unwrap();
        assert_eq!(ev.run_id, "run_1");
        assert_eq!(ev.ts, 1000);
        assert_eq!(ev.payload_json(), json!({"toolCallId":"t1","toolName":"x","args":{"k":1}}));
        assert_eq!(
            ev.to_json(),
            r#"{"type":"tool-call","runId":"run_1","agentId":"a1","ts":1000,"payload":{"toolCallId":"t1","toolName":"x","args":{"k":1}}}"#
        );
    }

    #[test]
    fn a_stored_event_reads_back_to_the_same_bytes() {
        let stored = r#"{"type":"confirmation-request","runId":"r","agentId":"a","responseId":"s","ts":5,"payload":{"requestId":"cr","toolCallId":"t","toolName":"x","args":{"k":[1,2]},"severity":"info","message":"ok?","server":"docs","approver":"requester","expiresAt":9}}"#;
        let ev: Event = serde_json::from_str(stored).unwrap();
        assert_eq!(ev.kind(), Kind::ConfirmationRequest);
        assert_eq!(ev.to_json(), stored);
        // A payload that does not fit its kind does not read back.
        assert!(serde_json::from_str::<Event>(r#"{"type":"status","runId":"r","agentId":"a","ts":1,"payload":{}}"#)
            .is_err());
    }

    #[test]
    fn a_server_built_event_that_does_not_fit_becomes_an_error_event() {
        let ev = Event::built(Kind::TasksUpdate, "r", "a", 1, json!({"tasks": {"tasks": [{"id": 1}]}}));
        let Payload::Error(e) = &ev.payload else { panic!("an error event: {ev:?}") };
        assert_eq!(e.code.as_deref(), Some("invalid_event"));
        assert!(e.content.contains("tasks-update"), "{}", e.content);
    }

    #[test]
    fn refuses_bad_shapes_with_a_reason() {
        let cases = [
            json!([]),
            json!({"type":"nope","agentId":"a"}),
            json!({"type":"tool-call","agentId":"a","payload":{"toolName":"x"}}),
            json!({"type":"tool-call","agentId":"","payload":{"toolCallId":"t","toolName":"x"}}),
            json!({"type":"run-finish","agentId":"a","payload":{"status":"done"}}),
            json!({"type":"text-delta","agentId":"a","payload":{"text":5}}),
            json!({"type":"text-delta","agentId":"a","payload":"hi"}),
            json!({"type":"confirmation-request","agentId":"a","payload":{"requestId":"r","toolCallId":"t","toolName":"x","severity":"loud","message":"m"}}),
            json!({"type":"tool-result","agentId":"a","payload":{"toolCallId":"t","result":{"__proto__":{"x":1}}}}),
        ];
        for c in cases {
            assert!(parse(c.clone()).is_err(), "accepted {c}");
        }
    }

    #[test]
    fn tasks_update_accepts_the_seed_and_the_schema_shapes() {
        let flat = parse(json!({"type":"tasks-update","agentId":"a","payload":{"tasks":[
            {"id":"t1","description":"d","status":"completed"},{"id":"t2","description":"e","status":"pending"}]}}))
        .unwrap();
        assert_eq!(
            flat.payload_json(),
            json!({"tasks":[{"id":"t1","description":"d","status":"completed"},{"id":"t2","description":"e","status":"pending"}]}),
            "stored as it was published"
        );
        let Payload::TasksUpdate(tasks) = &flat.payload else { panic!("a tasks-update") };
        assert_eq!(tasks.list()[1].status, "pending");
        let nested = parse(json!({"type":"tasks-update","agentId":"a","payload":{"tasks":{"tasks":[
            {"id":"t1","description":"d","status":"in_progress"}]}}}))
        .unwrap();
        assert_eq!(nested.payload_json()["tasks"]["tasks"][0]["status"], "in_progress");
        let Payload::TasksUpdate(tasks) = &nested.payload else { panic!("a tasks-update") };
        assert_eq!(tasks.list_json()[0]["id"], "t1");
        assert!(parse(json!({"type":"tasks-update","agentId":"a","payload":{"tasks":[{"id":"t","description":"d","status":"weird"}]}})).is_err());
    }

    #[test]
    fn confirmation_request_keeps_rich_fields() {
        let ev = parse(json!({"type":"confirmation-request","agentId":"a","payload":{
            "requestId":"cr","toolCallId":"t","toolName":"x","args":{},"severity":"warning","message":"ok?",
            "inputType":"questions","questions":[{"id":"q1","question":"Which?","type":"single","options":["a","b"]}],
            "domainAccess":{"url":"https://x.test/a","host":"x.test"}}}))
        .unwrap();
        let p = ev.payload_json();
        assert_eq!(p["inputType"], "questions");
        assert_eq!(p["questions"][0]["type"], "single");
        assert_eq!(p["domainAccess"]["host"], "x.test");
    }
}
