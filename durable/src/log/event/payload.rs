//! Typed payloads, one per event type (`docs/protocols/notes-from-source-and-trackers.md` §1 "Payloads").
//!
//! Each struct is its kind's payload as stored and sent; field order is
//! the wire order.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// Extension: where a run that branches stands in the conversation (an
    /// edit or a regenerate). Absent, the run follows the active path's
    /// leaf, as every run of before did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<BranchPoint>,
}

/// Where a run that branches joins the conversation: after `parent` (the
/// run whose turn it follows; `null` at the first turn), as an edit of a
/// user message or another answer to one. Reading the log in order, a
/// client knows the whole tree: a `run-start` without one follows the
/// active leaf, with one follows `parent`, and `branch-switched` moves the
/// leaf.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BranchPoint {
    pub parent: Option<String>,
    /// The user message this run's message replaces (an edit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit_of: Option<String>,
    /// The run whose answer this run answers again (a regenerate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regenerates: Option<String>,
}

/// `branch-switched`: the conversation's active path now ends at `leaf`
/// (a run), as a person chose by `messageId` (a message or an answer on
/// the branch they switched to).
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BranchSwitched {
    pub leaf: String,
    pub message_id: String,
}

/// `context-compacted`: the model's context was compacted. From now on the
/// agent sends `summary` in place of the conversation up to and including
/// run `through` (only its first `calls` tool calls, when set: the run was
/// compacted while it ran), `from` being the first run it folded that no
/// summary before it had. Nothing the person sees changes: every history
/// view still shows the whole conversation.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextCompacted {
    pub summary: String,
    pub from: String,
    pub through: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<u32>,
    /// How many messages of the model's context the summary replaced.
    pub messages: u32,
    /// The catalog id (or provider model name) that wrote the summary.
    pub model: String,
    /// The context's estimated tokens before and after.
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// What the summary step used, as its provider reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
    /// A person asked for it (`POST .../compact`); else the context passed
    /// `AGENT_COMPACT_AT`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requested: bool,
}

/// `context-compaction-failed`: a summary step failed; the run went on with
/// the context it had (its oldest turns left out when that was over the
/// model's window, `dropped` of them).
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextCompactionFailed {
    pub reason: String,
    pub tokens: u64,
    #[serde(default)]
    pub dropped: u32,
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Text {
    pub text: String,
}

/// A text or reasoning payload as the server sends it: blocks carry
/// `parts`; the delta that hands a joining client an open segment's text
/// so far carries `snapshot: true` and `parts`.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TextOut {
    pub text: String,
    /// Byte length of each delta the text was built from, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<Vec<usize>>,
    /// Apply as a block: replace the timeline entry this text extends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<bool>,
}

impl TextOut {
    /// Text as a publisher sends it: no parts, not a snapshot.
    pub fn plain(text: impl Into<String>) -> TextOut {
        TextOut { text: text.into(), parts: None, snapshot: None }
    }

    /// Each delta's byte length: the recorded parts, or the whole text
    /// as one delta.
    pub fn part_lengths(&self) -> Vec<usize> {
        self.parts.clone().unwrap_or_else(|| vec![self.text.len()])
    }
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolInputStart {
    pub tool_call_id: String,
    pub tool_name: String,
    /// The MCP server whose tool it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub tool_call_id: String,
    #[serde(default)]
    pub result: Value,
}

/// `tool-error` and `tool-interrupted`.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolError {
    pub tool_call_id: String,
    pub error: String,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSpawned {
    pub parent_id: String,
    pub role: String,
    /// Always present in what the server stores (a publisher that
    /// leaves it out gets `[]`); a log written otherwise may lack it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Destructive,
    Warning,
    Info,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

impl InputType {
    /// The wire name, e.g. `"plan-review"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            InputType::Approval => "approval",
            InputType::Text => "text",
            InputType::Questions => "questions",
            InputType::PlanReview => "plan-review",
            InputType::ClientTool => "client-tool",
        }
    }
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuestionType {
    Single,
    Multi,
    Text,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Question {
    pub id: String,
    pub question: String,
    #[serde(rename = "type")]
    pub kind: QuestionType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DomainAccess {
    pub url: String,
    pub host: String,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CredentialStage {
    Generic,
    Finalize,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CredentialFlow {
    pub stage: CredentialStage,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// The MCP server whose tool asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Who may decide it: a role, or `requester` (the thread's owner).
    /// Set by the server after the publisher's fields (so last on the wire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<String>,
    /// When it lapses (ms since the epoch), if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

/// How a request for a person settled (or that a tool's approval was
/// remembered for the thread, `decidedVia: "remembered"`).
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub id: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub status: String,
}

/// `tasks-update`, stored in the shape it was published in.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TasksUpdate {
    pub tasks: Tasks,
}

impl TasksUpdate {
    /// The task list, in either shape.
    pub fn list(&self) -> &[Task] {
        match &self.tasks {
            Tasks::List(l) | Tasks::Nested(TaskList { tasks: l }) => l,
        }
    }

    /// The task list as JSON (what the protocols show).
    pub fn list_json(&self) -> Value {
        serde_json::to_value(self.list()).expect("tasks serialise")
    }
}

/// The seed's flat list, or the schema's `{tasks: [...]}`.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Tasks {
    List(Vec<Task>),
    Nested(TaskList),
}

/// A task's statuses: the seed's and the schema's.
pub const TASK_STATUSES: &[&str] = &["completed", "in_progress", "pending", "todo", "done", "failed", "cancelled"];

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskList {
    pub tasks: Vec<Task>,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusMsg {
    pub message: String,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepStart {}

/// A model step's end. Field order is the built-in agent's, as its logs
/// have always held it (the wire keeps the order a log was written in).
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepFinish {
    /// What the step cost, when the catalog has the model's prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
    /// The catalog id the step ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
}

impl StepFinish {
    /// The step's prompt and completion token counts as the provider
    /// reported them (`usage.prompt_tokens`, `usage.completion_tokens`,
    /// null when absent), when it reported usage at all.
    pub fn token_counts(&self) -> Option<(Value, Value)> {
        let usage = self.usage.as_ref()?.as_object()?;
        let count = |k: &str| usage.get(k).cloned().unwrap_or(Value::Null);
        Some((count("prompt_tokens"), count("completion_tokens")))
    }
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Title {
    pub title: String,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilesystemRequest {
    pub request_id: String,
    pub operation: String,
    #[serde(default)]
    pub args: Value,
}
