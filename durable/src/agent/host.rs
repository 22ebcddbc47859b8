//! What the agent loop needs from where it runs, and what it hands back:
//! the [`Host`] (model stream, tool calls, timers, the thread's publish
//! path), the run's configuration and its [`Checkpoint`]. The Durable Object
//! implements it over `fetch`; the tests implement it with fakes.

use super::{builtin, tools};
use crate::agent::charge::Spend;
use crate::agent::models::Price;
pub use crate::agent::outbound::{ByteStream, Fetch, Fetched, Outbound};
use crate::log::event::Event;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

/// Why a completion request did not start streaming.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelFailure {
    /// No answer: connection refused, reset, DNS...
    Unreachable(String),
    /// A non-2xx answer, with a body excerpt.
    Status { status: u16, body: String },
}

/// Where an agent's events go: the run (until it ends) or a background task
/// (which outlives its run's `run-finish`).
#[derive(Clone, Debug, PartialEq)]
pub enum Scope {
    Run,
    Background(String),
    /// A compaction a person asked for, between runs: it publishes its
    /// `context-compacted` (or why it failed) into the run it runs through.
    Compaction,
}

/// The publish path refused: the run (or task) may not publish any more.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stopped;

/// What the loop needs from the platform.
#[allow(async_fn_in_trait)]
pub trait Host: Outbound {
    /// `POST {LLM_BASE_URL}/chat/completions` with `body`, streaming.
    async fn open_model(&self, body: String) -> Result<Self::Stream, ModelFailure>;
    /// Calls an HTTP tool with `{args, toolCallId, threadId, runId}`, within
    /// the tool's `timeoutMs` for the whole answer, reading at most `limit`
    /// bytes of its body: the answer (the loop decides what it means), or
    /// why there is none (unreachable, timed out).
    async fn call_http_tool(&self, tool: &tools::HttpTool, body: Value, limit: usize) -> Result<ToolAnswer, String>;
    /// The bytes of a thread's file (its object's key), for the model.
    async fn read_file(&self, key: &str) -> Result<Vec<u8>, String>;
    /// Stores bytes a tool returned as a file of the thread, attached (it is
    /// part of the run's record): its reference and its object's key.
    async fn store_file(&self, bytes: Vec<u8>, media_type: &str) -> Result<(crate::files::FileRef, String), String>;
    fn new_id(&self, prefix: &str) -> String;
    /// The thread's publish path.
    fn publish(&self, scope: &Scope, events: Vec<Event>) -> Result<(), Stopped>;
    /// Stores the run's progress after a completed step.
    fn checkpoint(&self, checkpoint: &Checkpoint);
    /// Runs a detached future (a background sub-agent).
    fn spawn(&self, fut: Pin<Box<dyn Future<Output = ()>>>);
    /// A background task started or ended (`status.backgroundTasks`).
    fn background(&self, task: BackgroundTask);
    /// Whether calling `tool` first needs a person's approval: declared
    /// `approval: "required"` (`declared`) or required by `APPROVAL_POLICY`,
    /// and not already approved for the thread's session (`Remembered`).
    fn approval(&self, tool: &str, declared: bool) -> Asking;
    /// Publishes a `confirmation-request` (its payload without `requestId`)
    /// and records it pending; returns the request id.
    fn request_confirmation(&self, agent_id: &str, payload: Value) -> Result<String, Stopped>;
    /// A finished span of the run (a model or tool call), for export; only
    /// called with traces on.
    fn span(&self, span: crate::trace::Span);
    /// Holds what a model call may use (`spend`, at `price`, on `model`)
    /// for the actor whose turn the run is, before the call is made
    /// ([`crate::agent::charge`]): the hold's id to settle it with (`None`: nobody
    /// to charge), or why the call must not be made (their budget has
    /// nothing left, or could not be asked).
    async fn hold(&self, model: Option<&str>, spend: Spend, price: Option<Price>) -> Result<Option<String>, String>;
    /// A held call ended: what its provider reported, or `None` for a call
    /// cut before it did (`streamed` bytes came back).
    fn settle(&self, hold: &str, used: Option<Spend>, streamed: usize);
}

/// An HTTP tool's answer as it arrived.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolAnswer {
    pub status: u16,
    /// The body as text, at most the limit the call was made with.
    pub body: String,
    /// The body went on past the limit (only its first bytes are here).
    pub truncated: bool,
}

impl ToolAnswer {
    /// What the answer means for the model: a 2xx JSON body is the result;
    /// a body past the limit is cut, with a marker the model sees; anything
    /// else is a tool error with the status and an excerpt.
    pub fn outcome(self, limit: usize) -> Result<Value, String> {
        if !(200..300).contains(&self.status) {
            return Err(format!("HTTP {}: {}", self.status, builtin::excerpt(&self.body, 300)));
        }
        if self.truncated {
            return Ok(Value::String(builtin::truncated(&self.body, limit, None)));
        }
        serde_json::from_str(&self.body).map_err(|_| {
            format!("HTTP {} with a body that is not JSON: {}", self.status, builtin::excerpt(&self.body, 300))
        })
    }
}

/// An entry of `status.backgroundTasks`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackgroundTask {
    pub task_id: String,
    pub role: String,
    pub agent_id: String,
    /// `running | completed | failed | cancelled`
    pub status: String,
    pub started_at: i64,
    pub run_id: String,
}

/// The agent's configuration (`LLM_*`, `AGENT_*`).
#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub model: String,
    /// The catalog id the turn picked: labels its usage.
    pub model_id: Option<String>,
    /// The picked model's prices.
    pub price: Option<crate::agent::models::Price>,
    /// The HTTP tools the turn's agent may call (`None`: all).
    pub allowed_tools: Option<Vec<String>>,
    /// `OUTPUT_CHECK_URL`: a structured answer is accepted there first.
    pub output_check_url: Option<String>,
    pub max_steps: u32,
    pub stall_timeout_ms: u64,
    pub system_prompt: String,
    /// The picked model's context window, in tokens (its catalog
    /// `contextWindow`, else `AGENT_CONTEXT_WINDOW`).
    pub context_window: u64,
    /// The share of the window past which the context is compacted
    /// (`AGENT_COMPACT_AT`).
    pub compact_at: f64,
    /// A tool result older than this many turns is sent as a stub when it
    /// is larger than `age_bytes` (`AGENT_TOOL_RESULT_AGE_TURNS`, 0: never).
    pub age_turns: usize,
    pub age_bytes: usize,
    /// Largest tool result kept (JSON bytes): a longer one is cut, with a
    /// marker the model sees (`MAX_TOOL_RESULT_BYTES`).
    pub max_tool_result_bytes: usize,
    /// Most bytes one model step may stream (`MAX_MODEL_BYTES`).
    pub max_model_bytes: usize,
    /// The model takes images (its catalog `input`): images a tool returns
    /// are shown to it.
    pub input_images: bool,
    /// The picked model's output cap (`maxOutputTokens`), sent as
    /// `max_tokens`; none sent without one.
    pub max_output_tokens: Option<u64>,
}

impl AgentConfig {
    /// The model's budget: its window, its answer's room, where it compacts.
    pub fn budget(&self) -> crate::agent::context::Budget {
        let output = self.max_output_tokens.unwrap_or(crate::agent::charge::DEFAULT_OUTPUT_CAP);
        crate::agent::context::Budget::new(self.context_window, output, self.compact_at)
    }
}

impl Default for AgentConfig {
    fn default() -> AgentConfig {
        AgentConfig {
            model: "fake-model".into(),
            model_id: None,
            price: None,
            allowed_tools: None,
            output_check_url: None,
            max_steps: 20,
            stall_timeout_ms: 30_000,
            system_prompt: "You are a helpful assistant. Use tools when they help; plan multi-step work with create-tasks; delegate focused work with spawn-agent.".into(),
            context_window: crate::agent::context::DEFAULT_CONTEXT_WINDOW,
            compact_at: 0.75,
            age_turns: 4,
            age_bytes: 2_000,
            max_tool_result_bytes: 256 * 1024,
            max_model_bytes: 8 * 1024 * 1024,
            input_images: true,
            max_output_tokens: None,
        }
    }
}

/// Whether a call waits for a person's approval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asking {
    Ask,
    /// It would, but the tool was approved for the rest of the thread.
    Remembered,
    Free,
}

/// A run's progress, stored after each completed step so a restarted object
/// can resume it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub run_id: String,
    #[serde(default)]
    pub thread_id: String,
    /// Steps completed.
    pub step: u32,
    /// The conversation sent to the model, tool results included.
    pub messages: Vec<Value>,
    #[serde(default)]
    pub tasks: Vec<Value>,
    #[serde(default)]
    pub usage: Option<Value>,
    /// A step waiting for confirmations: its calls, some done, some pending.
    #[serde(default)]
    pub suspended: Option<Vec<StepCall>>,
    /// The tools the client declared with the run's message, as it sent
    /// them (thread storage v3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_tools: Vec<Value>,
    /// `{schema, name}`: the run's answer must be JSON matching `schema`
    /// (thread storage v4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Where `messages` came from, so a compaction knows what it may fold
    /// (thread storage v11; a run of before has none and never compacts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<crate::agent::context::Layout>,
    /// The provider's count of the thread's last call against its
    /// estimate, which corrects the next ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<crate::agent::context::Calibration>,
}

impl Checkpoint {
    /// The checkpoint a loop starts from: `messages`, no step taken yet.
    pub fn first(run_id: &str, thread_id: &str, messages: Vec<Value>) -> Checkpoint {
        Checkpoint {
            run_id: run_id.to_owned(),
            thread_id: thread_id.to_owned(),
            step: 0,
            messages,
            tasks: Vec::new(),
            usage: None,
            suspended: None,
            client_tools: Vec::new(),
            output: None,
            context: None,
            calibration: None,
        }
    }
}

/// One tool call of a suspended step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepCall {
    pub id: String,
    pub name: String,
    pub args: Value,
    /// What the model is told, once the call is settled.
    pub result: Option<String>,
    /// The confirmation this call waits for.
    pub request_id: Option<String>,
    /// Filled in when the run resumes: `approved | denied | expired | cancelled`.
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub decision: Option<Value>,
    /// Images the call returned, for the model (`threadline_file` content
    /// parts: references to the thread's files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Value>,
}

/// How a run ended, for its `run-finish`.
#[derive(Clone, Debug, PartialEq)]
pub enum End {
    Completed,
    Failed(String),
    /// Waiting for a person: the run stays active, its state in storage.
    Suspended,
    /// Cancelled or ended elsewhere: publish nothing more.
    Stopped,
}
