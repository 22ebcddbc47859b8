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
    ($( $variant:ident = $name:literal => $class:ident ),* $(,)?) => {
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
    };
}

kinds! {
    RunStart = "run-start" => Structural,
    RunFinish = "run-finish" => Structural,
    TextDelta = "text-delta" => Ephemeral,
    ReasoningDelta = "reasoning-delta" => Ephemeral,
    TextBlock = "text-block" => Coalesced,
    ReasoningBlock = "reasoning-block" => Coalesced,
    ToolInputStart = "tool-input-start" => Structural,
    ToolCall = "tool-call" => Structural,
    ToolResult = "tool-result" => Structural,
    ToolError = "tool-error" => Structural,
    ToolInterrupted = "tool-interrupted" => Structural,
    AgentSpawned = "agent-spawned" => Structural,
    AgentCompleted = "agent-completed" => Structural,
    ConfirmationRequest = "confirmation-request" => Structural,
    ConfirmationSettled = "confirmation-settled" => Structural,
    TasksUpdate = "tasks-update" => Structural,
    Status = "status" => Ephemeral,
    Error = "error" => Structural,
    ThreadTitleUpdated = "thread-title-updated" => Structural,
    FilesystemRequest = "filesystem-request" => Ephemeral,
    QueueUpdated = "queue-updated" => Structural,
    StepStart = "step-start" => Structural,
    StepFinish = "step-finish" => Structural,
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
/// Field order is the wire order; `data:` lines are this struct serialised.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    #[serde(rename = "type")]
    pub kind: Kind,
    pub run_id: String,
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// Epoch milliseconds, stamped by the server at publish.
    pub ts: i64,
    pub payload: Value,
}

impl Event {
    pub fn new(kind: Kind, run_id: &str, agent_id: &str, ts: i64, payload: Value) -> Event {
        Event { kind, run_id: run_id.to_owned(), agent_id: agent_id.to_owned(), response_id: None, ts, payload }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an Event always serialises")
    }

    /// `payload[key]` as a string, if it is one.
    pub fn str_field(&self, key: &str) -> Option<&str> {
        self.payload.get(key).and_then(Value::as_str)
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
    let payload = canonical_payload(kind, incoming.payload.unwrap_or(Value::Object(Map::new())))?;
    Ok(Event {
        kind,
        run_id: run_id.to_owned(),
        agent_id: incoming.agent_id,
        response_id: incoming.response_id,
        ts,
        payload,
    })
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

/// Checks `payload` against the schema of `kind` and returns its canonical form.
pub fn canonical_payload(kind: Kind, payload: Value) -> Result<Value, SchemaError> {
    reject_proto_keys(&payload)?;
    if !payload.is_object() {
        return err("`payload` must be a JSON object");
    }
    fn reshape<T: Serialize + for<'de> Deserialize<'de>>(v: Value) -> Result<Value, SchemaError> {
        let typed: T = serde_json::from_value(v).map_err(|e| SchemaError(e.to_string()))?;
        Ok(serde_json::to_value(typed).expect("schema types serialise"))
    }
    use schema::*;
    match kind {
        Kind::RunStart => reshape::<RunStart>(payload),
        Kind::RunFinish => reshape::<RunFinish>(payload),
        Kind::TextDelta | Kind::ReasoningDelta | Kind::TextBlock | Kind::ReasoningBlock => reshape::<Text>(payload),
        Kind::ToolInputStart => reshape::<ToolInputStart>(payload),
        Kind::ToolCall => reshape::<ToolCall>(payload),
        Kind::ToolResult => reshape::<ToolResult>(payload),
        Kind::ToolError | Kind::ToolInterrupted => reshape::<ToolError>(payload),
        Kind::AgentSpawned => reshape::<AgentSpawned>(payload),
        Kind::AgentCompleted => reshape::<AgentCompleted>(payload),
        Kind::ConfirmationRequest => reshape::<ConfirmationRequest>(payload),
        Kind::ConfirmationSettled => reshape::<ConfirmationSettled>(payload),
        Kind::TasksUpdate => tasks_update(payload),
        Kind::Status => reshape::<StatusMsg>(payload),
        Kind::Error => reshape::<ErrorMsg>(payload),
        Kind::ThreadTitleUpdated => reshape::<Title>(payload),
        Kind::FilesystemRequest => reshape::<FilesystemRequest>(payload),
        Kind::QueueUpdated => reshape::<crate::queued::Queue>(payload),
        Kind::StepStart => reshape::<StepStart>(payload),
        Kind::StepFinish => reshape::<StepFinish>(payload),
    }
}

/// `tasks-update` comes in two shapes, and each is stored and re-emitted
/// as it was published: the seed's flat `{tasks: [...]}` (statuses
/// `completed`, `in_progress`, `pending`) and n8n's schema's nested
/// `{tasks: {tasks: [...]}}` (`todo`, `in_progress`, `done`, `failed`,
/// `cancelled`). Readers take the list from either ([`task_list`]).
fn tasks_update(payload: Value) -> Result<Value, SchemaError> {
    let Some(tasks) = payload.get("tasks") else {
        return err("missing field `tasks`");
    };
    let stored: schema::Tasks = match tasks {
        Value::Array(_) => schema::Tasks::List(
            serde_json::from_value(tasks.clone()).map_err(|e| SchemaError(format!("`tasks`: {e}")))?,
        ),
        Value::Object(o) => schema::Tasks::Nested(schema::TaskList {
            tasks: serde_json::from_value(o.get("tasks").cloned().unwrap_or(Value::Null))
                .map_err(|e| SchemaError(format!("`tasks.tasks`: {e}")))?,
        }),
        _ => return err("`tasks` is a list of tasks, or `{tasks: [...]}`"),
    };
    let list = match &stored {
        schema::Tasks::List(l) | schema::Tasks::Nested(schema::TaskList { tasks: l }) => l,
    };
    if let Some(t) = list.iter().find(|t| !schema::TASK_STATUSES.contains(&t.status.as_str())) {
        return err(format!("unknown task status `{}`", t.status));
    }
    let stored = schema::TasksUpdate { tasks: stored };
    Ok(serde_json::to_value(stored).expect("schema types serialise"))
}

/// The task list of a stored `tasks-update` payload, in either shape.
pub fn task_list(payload: &Value) -> Value {
    match &payload["tasks"] {
        Value::Array(_) => payload["tasks"].clone(),
        nested => nested["tasks"].clone(),
    }
}

pub use schema::FinishStatus;

/// Typed payloads, one per event type (`docs/protocols/notes-from-source-and-trackers.md` §1 "Payloads").
pub mod schema {
    use serde::{Deserialize, Serialize};
    use serde_json::Value;

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct RunStart {
        pub message_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub message_group_id: Option<String>,
        /// Extension: the user's message that started the run, so every
        /// client on the thread (another tab, another device) shows it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub message: Option<String>,
        /// The agent the turn runs as, when its send named one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub agent: Option<String>,
        /// The files and URLs the message carries (references: a stored
        /// file is read at `/v1/threads/:threadId/files/:fileId`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub attachments: Option<Vec<crate::files::Attachment>>,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
    #[serde(rename_all = "lowercase")]
    pub enum FinishStatus {
        Completed,
        Cancelled,
        Error,
        Interrupted,
    }

    impl FinishStatus {
        pub fn as_str(self) -> &'static str {
            match self {
                FinishStatus::Completed => "completed",
                FinishStatus::Cancelled => "cancelled",
                FinishStatus::Error => "error",
                FinishStatus::Interrupted => "interrupted",
            }
        }
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct RunFinish {
        pub status: FinishStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub reason: Option<String>,
        /// A structured run's answer, as JSON (a send's `output`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub output: Option<Value>,
    }

    /// `text-delta`, `reasoning-delta`, `text-block`, `reasoning-block`.
    /// Publishers send `{text}`. The server adds `parts` to blocks (each
    /// delta's byte length) and `snapshot: true` to the delta that hands a
    /// joining client an open segment's text so far (see `coalesce`).
    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    pub struct Text {
        pub text: String,
    }

    /// A text or reasoning payload as the server sends it: blocks carry
    /// `parts`; the delta that hands a joining client an open segment's text
    /// so far carries `snapshot: true` and `parts`.
    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    pub struct TextOut {
        pub text: String,
        /// Byte length of each delta the text was built from, in order.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub parts: Option<Vec<usize>>,
        /// Apply as a block: replace the timeline entry this text extends.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub snapshot: Option<bool>,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ToolInputStart {
        pub tool_call_id: String,
        pub tool_name: String,
        /// The MCP server whose tool it is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub server: Option<String>,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ToolCall {
        pub tool_call_id: String,
        pub tool_name: String,
        #[serde(default)]
        pub args: Value,
        /// What kind of tool it is for people (`read`, `action`, ...).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tool_kind: Option<String>,
        /// The MCP server whose tool it is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub server: Option<String>,
        /// The tool's name for people (an MCP tool's title).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub title: Option<String>,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ToolResult {
        pub tool_call_id: String,
        #[serde(default)]
        pub result: Value,
    }

    /// `tool-error` and `tool-interrupted`.
    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ToolError {
        pub tool_call_id: String,
        pub error: String,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct AgentSpawned {
        pub parent_id: String,
        pub role: String,
        #[serde(default)]
        pub tools: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub task_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub kind: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub subtitle: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub goal: Option<String>,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
    #[serde(rename_all = "lowercase")]
    pub enum AgentEnd {
        Completed,
        Cancelled,
        Error,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct AgentCompleted {
        pub role: String,
        #[serde(default)]
        pub result: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub error: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub status: Option<AgentEnd>,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum Severity {
        Destructive,
        Warning,
        Info,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "kebab-case")]
    pub enum InputType {
        Approval,
        Text,
        Questions,
        PlanReview,
        /// A tool the client declared (AG-UI's frontend actions, the AI
        /// SDK's client-side tools): the client runs it and sends its result.
        ClientTool,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum QuestionType {
        Single,
        Multi,
        Text,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    pub struct Question {
        pub id: String,
        pub question: String,
        #[serde(rename = "type")]
        pub kind: QuestionType,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub options: Option<Vec<String>>,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    pub struct DomainAccess {
        pub url: String,
        pub host: String,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum CredentialStage {
        Generic,
        Finalize,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    pub struct CredentialFlow {
        pub stage: CredentialStage,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ConfirmationRequest {
        pub request_id: String,
        pub tool_call_id: String,
        pub tool_name: String,
        #[serde(default)]
        pub args: Value,
        pub severity: Severity,
        pub message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub input_type: Option<InputType>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub questions: Option<Vec<Question>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub intro_message: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tasks: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub credential_requests: Option<Vec<Value>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub credential_flow: Option<CredentialFlow>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub setup_requests: Option<Vec<Value>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub domain_access: Option<DomainAccess>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub project_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub workflow_id: Option<String>,
        /// Who may decide it: a role, or `requester` (the thread's owner).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub approver: Option<String>,
        /// When it lapses (ms since the epoch), if it does.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub expires_at: Option<i64>,
        /// The MCP server whose tool asks.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub server: Option<String>,
    }

    /// How a request for a person settled (or that a tool's approval was
    /// remembered for the thread, `decidedVia: "remembered"`).
    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ConfirmationSettled {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub request_id: Option<String>,
        pub tool_call_id: String,
        #[serde(default)]
        pub tool_name: String,
        /// `approved`, `denied` or `expired`.
        pub status: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub decided_by: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub decided_via: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub remember: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub reason: Option<String>,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    pub struct Task {
        pub id: String,
        pub description: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub detail: Option<String>,
        pub status: String,
    }

    /// `tasks-update`, stored in the shape it was published in.
    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    pub struct TasksUpdate {
        pub tasks: Tasks,
    }

    /// The seed's flat list, or the schema's `{tasks: [...]}`.
    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    pub enum Tasks {
        List(Vec<Task>),
        Nested(TaskList),
    }

    /// A task's statuses: the seed's and the schema's.
    pub const TASK_STATUSES: &[&str] = &["completed", "in_progress", "pending", "todo", "done", "failed", "cancelled"];

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    pub struct TaskList {
        pub tasks: Vec<Task>,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    pub struct StatusMsg {
        pub message: String,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ErrorMsg {
        pub content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub status_code: Option<u16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub code: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub provider: Option<String>,
    }

    /// Extensions: a model step's bounds (the agora run streams' `step-start`
    /// / `step-finish`). Clients of the Instance AI protocol may ignore them.
    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    pub struct StepStart {}

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct StepFinish {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub usage: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub finish_reason: Option<String>,
        /// What the step cost, when the catalog has the model's prices.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cost_usd: Option<f64>,
        /// The catalog id the step ran on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub model: Option<String>,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    pub struct Title {
        pub title: String,
    }

    #[cfg_attr(test, derive(schemars::JsonSchema))]
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct FilesystemRequest {
        pub request_id: String,
        pub operation: String,
        #[serde(default)]
        pub args: Value,
    }
}

/// The length of `v`'s compact JSON text, exactly `serde_json::to_string(v)`'s,
/// without writing it: a publish checks every event's payload against
/// `MAX_EVENT_BYTES`, and serialising a payload only to measure it cost a
/// batch of 1,000 events a twelfth of its time.
pub fn encoded_len(v: &Value) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => {
            let mut counter = Counter(0);
            serde_json::to_writer(&mut counter, n).expect("a number serialises");
            counter.0
        }
        Value::String(s) => string_len(s),
        Value::Array(items) => 2 + items.len().saturating_sub(1) + items.iter().map(encoded_len).sum::<usize>(),
        Value::Object(map) => {
            2 + map.len().saturating_sub(1) + map.iter().map(|(k, v)| string_len(k) + 1 + encoded_len(v)).sum::<usize>()
        }
    }
}

/// A quoted JSON string's length as serde_json escapes it: `"` and `\` and
/// the short escapes take two bytes, other control characters six
/// (`\u00XX`), everything else (UTF-8 included) itself.
fn string_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | 0x08 | 0x09 | 0x0a | 0x0c | 0x0d => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
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
        let samples = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(-12345678901234i64),
            json!(u64::MAX),
            json!(1.5),
            json!(-0.0),
            json!(1e300),
            json!(0.1),
            json!(""),
            json!("plain"),
            json!("quote \" back \\ slash"),
            json!("\u{0}\u{1}\u{8}\t\n\u{b}\u{c}\r\u{1f} \u{7f}"),
            json!("naïve ☃ 𝄞 \u{2028}"),
            json!([]),
            json!([1, "two", [3, {}], null]),
            json!({}),
            json!({"k\"ey": {"nested": [true, false, {"x": -1.25e-7}]}, "ünï": "v"}),
        ];
        for v in samples {
            assert_eq!(encoded_len(&v), v.to_string().len(), "{v}");
        }
    }

    proptest::proptest! {
        #[test]
        fn encoded_len_matches_any_value(v in arb_json()) {
            proptest::prop_assert_eq!(encoded_len(&v), v.to_string().len());
        }
    }

    fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|f| json!(f)),
            any::<String>().prop_map(Value::String),
            "[\\x00-\\x20\"\\\\a-z]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                proptest::collection::btree_map(any::<String>(), inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
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
        assert_eq!(Kind::ALL.len(), 23);
    }

    #[test]
    fn stamps_run_and_ts_and_strips_unknown_fields() {
        let ev = parse(json!({"type":"tool-call","agentId":"a1","runId":"forged","ts":1,
            "payload":{"toolCallId":"t1","toolName":"x","args":{"k":1},"extra":true}}))
        .unwrap();
        assert_eq!(ev.run_id, "run_1");
        assert_eq!(ev.ts, 1000);
        assert_eq!(ev.payload, json!({"toolCallId":"t1","toolName":"x","args":{"k":1}}));
        assert_eq!(
            ev.to_json(),
            r#"{"type":"tool-call","runId":"run_1","agentId":"a1","ts":1000,"payload":{"toolCallId":"t1","toolName":"x","args":{"k":1}}}"#
        );
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
            flat.payload,
            json!({"tasks":[{"id":"t1","description":"d","status":"completed"},{"id":"t2","description":"e","status":"pending"}]}),
            "stored as it was published"
        );
        assert_eq!(task_list(&flat.payload)[1]["status"], "pending");
        let nested = parse(json!({"type":"tasks-update","agentId":"a","payload":{"tasks":{"tasks":[
            {"id":"t1","description":"d","status":"in_progress"}]}}}))
        .unwrap();
        assert_eq!(nested.payload["tasks"]["tasks"][0]["status"], "in_progress");
        assert_eq!(task_list(&nested.payload)[0]["id"], "t1");
        assert!(parse(json!({"type":"tasks-update","agentId":"a","payload":{"tasks":[{"id":"t","description":"d","status":"weird"}]}})).is_err());
    }

    #[test]
    fn confirmation_request_keeps_rich_fields() {
        let ev = parse(json!({"type":"confirmation-request","agentId":"a","payload":{
            "requestId":"cr","toolCallId":"t","toolName":"x","args":{},"severity":"warning","message":"ok?",
            "inputType":"questions","questions":[{"id":"q1","question":"Which?","type":"single","options":["a","b"]}],
            "domainAccess":{"url":"https://x.test/a","host":"x.test"}}}))
        .unwrap();
        assert_eq!(ev.payload["inputType"], "questions");
        assert_eq!(ev.payload["questions"][0]["type"], "single");
        assert_eq!(ev.payload["domainAccess"]["host"], "x.test");
    }
}
