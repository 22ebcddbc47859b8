//! The built-in agent: an orchestrator loop against any OpenAI-compatible
//! streaming Chat Completions API, with HTTP tools, task lists and
//! sub-agents. It is written against the [`Host`] trait (model stream, tool
//! calls, timers, the thread's publish path), so it runs natively in tests
//! against fakes and on workerd against `fetch`.
//!
//! Every event the agent produces goes through [`Host::publish`], which is the
//! thread's one publish path; when that refuses (the run was cancelled or
//! ended) the agent stops where it is.

mod attachments;
mod builtin;
mod calls;
pub mod cancel;
pub mod charge;
mod compact;
pub mod context;
mod host;
pub mod mcp;
pub mod models;
pub mod openai;
pub mod outbound;
pub mod personas;
pub mod quota;
mod step;
pub mod tools;
pub mod usage;

use crate::log::event::{Event, Kind};
use crate::wire::sse;
use builtin::{add_usage, apply_tasks, confirmation_payload, excerpt};
use cancel::CancelToken;
use futures_util::stream::{FuturesUnordered, StreamExt};
use openai::{ChunkParser, ModelEvent};
use serde_json::{json, Value};
use std::rc::Rc;
use tools::{ToolKind, Toolbox};

pub use host::*;

/// One agent's loop, orchestrator or sub-agent.
struct Agent<H: Host> {
    host: H,
    cfg: Rc<AgentConfig>,
    tools: Rc<Toolbox>,
    cancel: CancelToken,
    thread_id: String,
    run_id: String,
    agent_id: String,
    scope: Scope,
    /// HTTP tools this agent may call (`None`: all); built-ins are the
    /// orchestrator's.
    allowed: Option<Vec<String>>,
    orchestrator: bool,
    /// The tools the client declared with the run's message (the
    /// orchestrator's only).
    client: Rc<Vec<tools::ClientTool>>,
    /// The structured answer the run must give (the orchestrator's only).
    output: Option<Value>,
    /// The bytes of the files its messages refer to, read once per run.
    files: Rc<std::cell::RefCell<FileCache>>,
    /// The isolate's MCP servers, and the tools they offered this run (the
    /// orchestrator's only).
    mcp: crate::agent::mcp::Shared,
    found: Rc<crate::agent::mcp::Discovered>,
    /// Where its spans hang (`None`: traces are off).
    trace: Option<crate::trace::RunTrace>,
    /// A summary step of this loop failed: it is not asked for again
    /// before the run ends (each try is a paid call).
    compact_failed: std::cell::Cell<bool>,
}

/// A settled call: the value its event carries, what the model is told
/// when that says more than the value (an MCP result), and the images it
/// is shown (`threadline_file` parts).
#[derive(Debug, Default)]
struct Done {
    value: Value,
    told: Option<String>,
    images: Vec<Value>,
}

impl From<Value> for Done {
    fn from(value: Value) -> Done {
        Done { value, ..Done::default() }
    }
}

/// An MCP call in flight: dropped before it completed (the run was
/// cancelled, its time ran out), it tells its server
/// `notifications/cancelled`, on a request the run's abort does not stop.
struct Inflight<H: Host> {
    host: H,
    mcp: crate::agent::mcp::Shared,
    server: String,
    id: u64,
    done: bool,
}

impl<H: Host> Drop for Inflight<H> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (host, mcp, server, id) = (self.host.clone(), self.mcp.clone(), std::mem::take(&mut self.server), self.id);
        self.host.spawn(Box::pin(async move { mcp.cancelled(&host, &server, id, "the run was cancelled").await }));
    }
}

/// A model call's hold, settled once, however the call ends: with what the
/// provider reported, or (dropped first: cancelled, failed, stalled, cut)
/// as a call cut after `streamed` bytes.
struct Meter<H: Host> {
    host: H,
    hold: Option<String>,
    streamed: usize,
}

impl<H: Host> Meter<H> {
    fn settle(&mut self, used: Option<crate::agent::charge::Spend>) {
        if let Some(hold) = self.hold.take() {
            self.host.settle(&hold, used, self.streamed);
        }
    }
}

impl<H: Host> Drop for Meter<H> {
    fn drop(&mut self) {
        self.settle(None);
    }
}

/// Files read from the bucket, by key (or why one could not be).
type FileCache = std::collections::HashMap<String, attachments::FileBytes>;

/// Why an agent's loop stopped early.
enum Halt {
    Failed(String),
    Stopped,
    /// Tool calls wait for confirmations; the checkpoint holds the step.
    Suspended,
}

impl From<Stopped> for Halt {
    fn from(_: Stopped) -> Halt {
        Halt::Stopped
    }
}

/// What the orchestrator needs to run (or resume) a run.
#[derive(Clone, Debug)]
pub struct Job {
    pub thread_id: String,
    pub run_id: String,
    pub root_agent: String,
    pub checkpoint: Checkpoint,
    pub usage: Option<Value>,
    /// Where the run's model and tool spans hang (`None`: traces are off).
    pub trace: Option<crate::trace::RunTrace>,
    /// Only compact the conversation, as a person asked
    /// (`POST .../compact`): `run_id` is the run it runs through.
    pub compact: bool,
}

/// A new turn's user message, and what it says of itself.
#[derive(Clone, Copy, Debug)]
pub struct UserTurn<'a> {
    pub message: &'a str,
    /// The files and URLs the message carries.
    pub attachments: &'a [crate::files::Attachment],
    /// Where the thread's files are (their keys: this and the hash).
    pub files_prefix: &'a str,
    /// The page the person is on (agora's `pageContext`): context for this
    /// turn only.
    pub page_context: Option<&'a Value>,
    /// When it was sent (ms), with `AGENT_MESSAGE_TIMESTAMPS`.
    pub sent_at: Option<i64>,
}

/// The system, history and user messages of a new run: the page context
/// as a system message of its own (this turn's), and the time the message
/// was sent before its text when the deployment tells the model.
pub fn initial_messages(
    cfg: &AgentConfig,
    memory: context::Memory,
    user: Option<UserTurn>,
) -> (Vec<Value>, context::Layout) {
    let (mut messages, layout) = remembered(cfg, memory);
    let Some(user) = user else { return (messages, layout) };
    let before = messages.len();
    if let Some(page) = user.page_context {
        let page = match page {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        messages.push(openai::message(
            "system",
            &format!("The person is looking at this page (context for this message only):\n{page}"),
        ));
    }
    let text = match user.sent_at {
        Some(at) => format!("[sent {}]\n{}", crate::wire::time::rfc3339(at), user.message),
        None => user.message.to_owned(),
    };
    let content = attachments::user_content(&text, user.attachments, &|sha| format!("{}{sha}", user.files_prefix));
    messages.push(json!({ "role": "user", "content": content }));
    let intro = messages.len() - before;
    (messages, context::Layout { intro, ..layout })
}

/// The system prompt, then what the conversation's memory holds (its
/// summary in the head, after the prompt; its turns), and where each came from.
fn remembered(cfg: &AgentConfig, memory: context::Memory) -> (Vec<Value>, context::Layout) {
    let mut messages = vec![openai::message("system", &cfg.system_prompt)];
    let mut layout = context::Layout { head: 1, ..context::Layout::default() };
    if let Some(summary) = &memory.summary {
        messages.push(context::summary_message(summary));
        layout.head = 2;
        layout.summary = Some(summary.clone());
    }
    for (run_id, turn) in memory.turns.into_iter().filter(|(_, m)| !m.is_empty()) {
        layout.turns.push(context::Span { run_id, messages: turn.len() });
        messages.extend(turn);
    }
    (messages, layout)
}

/// A user message of the conversation memory: its text and attachments.
pub fn memory_message(text: &str, attachments: &[crate::files::Attachment], files_prefix: &str) -> Value {
    json!({ "role": "user", "content": attachments::user_content(text, attachments, &|sha| format!("{files_prefix}{sha}")) })
}

/// A thread title from its first message: its text's first words, else
/// (a message of files only) its first file's name.
pub fn title_for(message: &str, attachments: &[crate::files::Attachment]) -> String {
    match attachments.iter().find_map(crate::files::Attachment::name) {
        Some(name) if message.trim().is_empty() => title_from(name),
        _ if message.trim().is_empty() && !attachments.is_empty() => "Attachment".to_owned(),
        _ => title_from(message),
    }
}

/// A thread title from its first message: its first words, at most 60 chars.
pub fn title_from(message: &str) -> String {
    let mut title = String::new();
    for word in message.split_whitespace() {
        if title.len() + word.len() + 1 > 60 {
            break;
        }
        if !title.is_empty() {
            title.push(' ');
        }
        title.push_str(word);
    }
    if title.is_empty() {
        message.chars().take(60).collect()
    } else {
        title
    }
}

/// Runs the orchestrator to the end of the run and publishes its
/// `run-finish` (unless it was stopped). Returns how it ended.
pub async fn run_orchestrator<H: Host>(
    host: H,
    cfg: Rc<AgentConfig>,
    tools: Rc<Toolbox>,
    mcp: crate::agent::mcp::Shared,
    cancel: CancelToken,
    job: Job,
) -> End {
    // Checked when the message was sent: what still parses is offered.
    let client = tools.client_tools(&job.checkpoint.client_tools).unwrap_or_default();
    let output = job.checkpoint.output.clone();
    // The MCP servers' tools (cached per isolate); a server that cannot be
    // asked leaves its tools out, and the run says so.
    let found = if mcp.is_empty() || job.compact {
        crate::agent::mcp::Discovered::default()
    } else {
        let mut taken: Vec<String> = tools
            .definitions(None, true)
            .iter()
            .filter_map(|d| d["function"]["name"].as_str().map(str::to_owned))
            .collect();
        taken.extend(client.iter().map(|t| t.name.clone()));
        let Some(found) = cancel.run(mcp.discover(&host, &taken)).await else { return End::Stopped };
        for (server, why) in &found.unavailable {
            let message =
                format!("The MCP server `{server}` is unavailable ({why}): its tools are left out of this run.");
            let status =
                Event::built(Kind::Status, &job.run_id, &job.root_agent, host.now(), json!({ "message": message }));
            if host.publish(&Scope::Run, vec![status]).is_err() {
                return End::Stopped;
            }
        }
        found
    };
    let agent = Agent {
        host: host.clone(),
        allowed: cfg.allowed_tools.clone(),
        cfg,
        tools,
        cancel,
        thread_id: job.thread_id,
        run_id: job.run_id.clone(),
        agent_id: job.root_agent.clone(),
        scope: if job.compact { Scope::Compaction } else { Scope::Run },
        orchestrator: true,
        client: Rc::new(client),
        output: output.clone(),
        files: Rc::default(),
        mcp,
        found: Rc::new(found),
        trace: job.trace,
        compact_failed: Default::default(),
    };
    if job.compact {
        agent.compact_requested(job.checkpoint).await;
        return End::Completed;
    }
    let mut answer = None;
    let outcome = match agent.run(job.checkpoint).await {
        Ok(text) => match &output {
            Some(spec) => agent.structured(spec, &text).await.map(|v| answer = Some(v)),
            None => Ok(()),
        },
        Err(h) => Err(h),
    };
    let (end, reason) = match outcome {
        Ok(()) => (End::Completed, None),
        Err(Halt::Stopped) => return End::Stopped,
        Err(Halt::Suspended) => return End::Suspended,
        Err(Halt::Failed(reason)) => (End::Failed(reason.clone()), Some(reason)),
    };
    let status = if end == End::Completed { "completed" } else { "error" };
    let mut payload = json!({ "status": status });
    if let Some(r) = reason {
        payload["reason"] = r.into();
    }
    if let Some(v) = answer {
        payload["output"] = v;
    }
    let fin = Event::built(Kind::RunFinish, &job.run_id, &job.root_agent, host.now(), payload);
    match host.publish(&Scope::Run, vec![fin]) {
        Ok(()) => end,
        Err(Stopped) => End::Stopped,
    }
}

/// What one of a step's calls does next.
enum Next<'t> {
    /// Waits for a person (or the client): a confirmation is requested.
    Waits(ToolKind<'t>),
    /// Changes the task list (`create-tasks`, `update-tasks`), in order,
    /// before the step's other calls run.
    Tasks { create: bool },
    /// Runs now, beside the step's other calls.
    Runs(Runnable<'t>),
    /// Runs now: its approval is remembered for the thread.
    Remembered(Runnable<'t>),
}

/// A call that runs beside the others of its step.
enum Runnable<'t> {
    Http(&'t tools::HttpTool),
    Mcp(&'t crate::agent::mcp::McpTool),
    SpawnAgent,
}

/// What the model is told of a call a person denied (the UI stream maps a
/// `tool-error` starting so to a denial).
pub const DENIED: &str = "The user denied this tool call";

/// What the model is told of a call whose approval nobody gave in time.
pub const EXPIRED: &str = "The approval request expired";

/// The reason a run ends with when the provider cannot be used.
pub const PROVIDER_UNAVAILABLE: &str = "LLM provider unavailable";

/// Why a run stopped before a model call: its sender's budget has nothing
/// left (or could not be asked).
pub const QUOTA_EXCEEDED: &str = "quota_exceeded";

/// Why a structured run failed: its answer did not match the schema asked
/// for, or the deployment's output check refused it.
pub const STRUCTURED_OUTPUT_INVALID: &str = "structured_output_invalid";
pub const OUTPUT_REJECTED: &str = "output_rejected";

impl<H: Host> Agent<H> {
    /// A structured run's answer: `text` as JSON matching `spec.schema`,
    /// then accepted by `OUTPUT_CHECK_URL` when one is set (it answers
    /// `{ok: true}`, or `{ok: false, reason?}`; anything else refuses).
    /// A refusal publishes an `error` with its code and fails the run with it.
    async fn structured(&self, spec: &Value, text: &str) -> Result<Value, Halt> {
        let fail = |code: &str, why: String| -> Halt {
            match self.publish(vec![self.event(Kind::Error, json!({ "content": why, "code": code }))]) {
                Ok(()) => Halt::Failed(code.to_owned()),
                Err(h) => h,
            }
        };
        let value: Value = match serde_json::from_str(text.trim()) {
            Ok(v) => v,
            Err(e) => return Err(fail(STRUCTURED_OUTPUT_INVALID, format!("The answer is not JSON: {e}"))),
        };
        let valid = crate::json_schema::Schema::compile(&spec["schema"])
            .and_then(|v| v.check(&value, 20).map_err(|failed| failed.to_string()));
        if let Err(why) = valid {
            return Err(fail(STRUCTURED_OUTPUT_INVALID, format!("The answer does not match its schema: {why}")));
        }
        let Some(url) = &self.cfg.output_check_url else { return Ok(value) };
        let check = tools::HttpTool {
            name: "output-check".into(),
            description: String::new(),
            parameters: json!({}),
            url: url.clone(),
            method: "POST".into(),
            headers: Default::default(),
            timeout_ms: 10_000,
            approval: tools::Approval::Never,
            severity: None,
            kind: None,
        };
        let body = json!({ "threadId": self.thread_id, "runId": self.run_id, "name": spec["name"], "output": value });
        let answer = self.cancel.run(self.host.call_http_tool(&check, body, 64 * 1024)).await.ok_or(Halt::Stopped)?;
        match answer.and_then(|a| a.outcome(64 * 1024)) {
            Ok(v) if v["ok"] == true => Ok(value),
            Ok(v) => {
                let reason = v["reason"].as_str().unwrap_or("the output check refused the answer");
                Err(fail(OUTPUT_REJECTED, format!("The answer was refused: {reason}")))
            }
            Err(e) => Err(fail(OUTPUT_REJECTED, format!("The output check failed: {e}"))),
        }
    }

    /// The run's usage with a call's added; it names the run's model, for
    /// the usage views.
    fn add_usage(&self, acc: Option<&Value>, used: &Value) -> Value {
        let mut sum = add_usage(acc, used);
        sum["model"] = self.model_name().unwrap_or_default().into();
        sum
    }

    fn event(&self, kind: Kind, payload: Value) -> Event {
        Event::built(kind, &self.run_id, &self.agent_id, self.host.now(), payload)
    }

    fn publish(&self, events: Vec<Event>) -> Result<(), Halt> {
        if self.cancel.is_cancelled() {
            return Err(Halt::Stopped);
        }
        Ok(self.host.publish(&self.scope, events)?)
    }

    /// The loop: stream a step, run its tool calls, feed results back, until
    /// the model answers without tools or the step limit. Returns the final
    /// answer's text.
    async fn run(&self, mut cp: Checkpoint) -> Result<String, Halt> {
        if let Some(calls) = cp.suspended.take() {
            self.finish_suspended_step(&mut cp, calls).await?;
        }
        loop {
            if cp.step >= self.cfg.max_steps {
                return Err(Halt::Failed(format!(
                    "step limit reached ({} steps, AGENT_MAX_STEPS)",
                    self.cfg.max_steps
                )));
            }
            // The context fits the model's window first: compacted, or
            // (a summary that failed) cut, or the run fails saying so.
            self.fit(&mut cp).await?;
            let mut usage = cp.usage.clone();
            let step = self.stream_step(&cp.messages).await?;
            if let Some(prompt) = step.usage.as_ref().and_then(|u| u["prompt_tokens"].as_u64()) {
                cp.calibration = Some(context::Calibration { estimated: step.estimated, reported: prompt });
            }
            if let Some(u) = &step.usage {
                usage = Some(self.add_usage(usage.as_ref(), u));
            }
            if step.finish.as_deref() == Some("length") {
                self.publish(vec![self.event(
                    Kind::Error,
                    json!({ "content": "The model's answer was cut off at its output length limit (finish_reason: length).", "code": "length" }),
                )])?;
                return Err(Halt::Failed("model output truncated (finish_reason: length)".into()));
            }
            if step.calls.is_empty() {
                cp.step += 1;
                cp.usage = usage;
                if self.orchestrator {
                    self.host.checkpoint(&cp);
                }
                return Ok(step.text);
            }
            let tool_calls: Vec<Value> = step
                .calls
                .iter()
                .map(|c| json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.arguments } }))
                .collect();
            let content = if step.text.is_empty() { Value::Null } else { Value::String(step.text.clone()) };
            cp.messages.push(json!({ "role": "assistant", "content": content, "tool_calls": tool_calls }));
            let results = self.run_tools(&step.calls, &mut cp.tasks).await?;
            if results.iter().any(|r| r.request_id.is_some()) {
                // Some calls wait for a person: store the step and stop here.
                cp.usage = usage;
                cp.suspended = Some(results);
                self.host.checkpoint(&cp);
                return Err(Halt::Suspended);
            }
            let mut images = Vec::new();
            for r in results {
                images.extend(r.images);
                cp.messages
                    .push(json!({ "role": "tool", "tool_call_id": r.id, "content": r.result.unwrap_or_default() }));
            }
            self.show_images(&mut cp, images);
            cp.step += 1;
            cp.usage = usage.clone();
            if self.orchestrator {
                self.host.checkpoint(&cp);
            }
        }
    }

    /// `messages` as the provider takes them: each stored file's reference
    /// replaced by its bytes (read once per run).
    async fn with_files<'m>(&self, messages: &'m [Value]) -> std::borrow::Cow<'m, [Value]> {
        let keys = attachments::keys(messages);
        if keys.is_empty() {
            return std::borrow::Cow::Borrowed(messages);
        }
        for key in keys {
            if self.files.borrow().contains_key(&key) {
                continue;
            }
            let read = self.host.read_file(&key).await.map(Rc::new);
            self.files.borrow_mut().insert(key, read);
        }
        let cache = self.files.borrow();
        std::borrow::Cow::Owned(attachments::resolve(messages, &|k| cache.get(k).cloned()))
    }

    /// `spawn-agent`: a sub-agent with its own id and only the named tools.
    async fn spawn_agent(&self, args: Value) -> Result<Result<Value, String>, Halt> {
        let role = args["role"].as_str().unwrap_or("helper").to_owned();
        let instructions = args["instructions"].as_str().unwrap_or_default().to_owned();
        let requested: Vec<String> = args["tools"]
            .as_array()
            .map(|a| a.iter().filter_map(|t| t.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        // A sub-agent gets at most its parent's tools: the HTTP tools the
        // turn's agent may call (all of them when its agent names none).
        let known = self.tools.http_names();
        let mine = |t: &String| self.allowed.as_ref().is_none_or(|a| a.contains(t));
        if let Some(bad) = requested.iter().find(|t| !known.contains(t)) {
            return Ok(Err(format!("spawn-agent: there is no HTTP tool named `{bad}`")));
        }
        if let Some(bad) = requested.iter().find(|t| !mine(t)) {
            return Ok(Err(format!("spawn-agent: `{bad}` is not one of this agent's tools, so it cannot give it")));
        }
        let background = args["background"].as_bool() == Some(true);
        let child_id = self.host.new_id("agent");
        let task_id = background.then(|| self.host.new_id("task"));
        let sub = Agent {
            host: self.host.clone(),
            cfg: self.cfg.clone(),
            tools: self.tools.clone(),
            cancel: self.cancel.clone(),
            thread_id: self.thread_id.clone(),
            run_id: self.run_id.clone(),
            agent_id: child_id.clone(),
            scope: task_id.clone().map_or(Scope::Run, Scope::Background),
            allowed: Some(requested.clone()),
            orchestrator: false,
            client: Rc::new(Vec::new()),
            output: None,
            files: Rc::default(),
            mcp: self.mcp.clone(),
            found: Rc::default(),
            trace: self.trace,
            compact_failed: Default::default(),
        };
        let mut spawned = json!({ "parentId": self.agent_id, "role": role, "tools": requested });
        if let Some(t) = &task_id {
            spawned["taskId"] = t.clone().into();
        }
        // Announced on the run's scope: it lands in the tree before the
        // orchestrator's tool result.
        self.publish(vec![sub.event(Kind::AgentSpawned, spawned)])?;
        let messages = vec![
            openai::message(
                "system",
                &format!("You are a sub-agent with the role \"{role}\". {}", self.cfg.system_prompt),
            ),
            openai::message("user", &instructions),
        ];
        let cp = Checkpoint::first(&self.run_id, &self.thread_id, messages);
        match task_id {
            None => {
                let outcome = sub.run(cp).await;
                Ok(sub.complete(&role, outcome))
            }
            Some(task_id) => {
                let task = BackgroundTask {
                    task_id: task_id.clone(),
                    role: role.clone(),
                    agent_id: child_id.clone(),
                    status: "running".into(),
                    started_at: self.host.now(),
                    run_id: self.run_id.clone(),
                };
                self.host.background(task.clone());
                let host = self.host.clone();
                self.host.spawn(Box::pin(async move {
                    let outcome = sub.run(cp).await;
                    let status = match &outcome {
                        Ok(_) => "completed",
                        Err(Halt::Stopped | Halt::Suspended) => "cancelled",
                        Err(Halt::Failed(_)) => "failed",
                    };
                    let _ = sub.complete(&role, outcome);
                    host.background(BackgroundTask { status: status.into(), ..task });
                }));
                Ok(Ok(json!({ "taskId": task_id, "agentId": child_id, "status": "running" })))
            }
        }
    }

    /// Publishes a sub-agent's `agent-completed`; its result for the parent.
    fn complete(&self, role: &str, outcome: Result<String, Halt>) -> Result<Value, String> {
        let (payload, result) = match outcome {
            Ok(text) => (json!({ "role": role, "result": text, "status": "completed" }), Ok(Value::String(text))),
            Err(Halt::Failed(why)) => (
                json!({ "role": role, "result": null, "error": why, "status": "error" }),
                Err(format!("the sub-agent failed: {why}")),
            ),
            Err(Halt::Stopped | Halt::Suspended) => (
                json!({ "role": role, "result": null, "status": "cancelled" }),
                Err("the sub-agent was cancelled".to_owned()),
            ),
        };
        let _ = self.host.publish(&self.scope, vec![self.event(Kind::AgentCompleted, payload)]);
        result
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_message_of_files_only_is_titled_by_its_first_file() {
        use crate::files::{Attachment, NewFile};
        let file = |name: Option<&str>| Attachment::File(NewFile::of(b"x", "text/plain", name).reference());
        assert_eq!(title_for("", &[file(Some("report.csv")), file(Some("b.txt"))]), "report.csv");
        assert_eq!(title_for(" ", &[file(None)]), "Attachment");
        assert_eq!(title_for("what is this", &[file(Some("a.png"))]), "what is this");
    }

    use super::*;

    #[test]
    fn titles() {
        assert_eq!(title_from("  Build me a weather   workflow please "), "Build me a weather workflow please");
        assert!(title_from(&"word ".repeat(40)).len() <= 60);
        assert_eq!(title_from(&"x".repeat(100)).len(), 60);
    }
}
