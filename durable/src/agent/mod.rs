//! The built-in agent: an orchestrator loop against any OpenAI-compatible
//! streaming Chat Completions API, with HTTP tools, task lists and
//! sub-agents. It is written against the [`Host`] trait (model stream, tool
//! calls, timers, the thread's publish path), so it runs natively in tests
//! against fakes and on workerd against `fetch`.
//!
//! Every event the agent produces goes through [`Host::publish`], which is the
//! thread's one publish path; when that refuses (the run was cancelled or
//! ended) the agent stops where it is.

mod builtin;
pub mod cancel;
pub mod charge;
mod files;
mod host;
pub mod mcp;
pub mod models;
pub mod openai;
pub mod outbound;
pub mod personas;
pub mod quota;
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
type FileCache = std::collections::HashMap<String, files::Read>;

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
pub fn initial_messages(cfg: &AgentConfig, history: Vec<Value>, user: UserTurn) -> Vec<Value> {
    let mut messages = vec![openai::message("system", &cfg.system_prompt)];
    messages.extend(history);
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
    let content = files::user_content(&text, user.attachments, &|sha| format!("{}{sha}", user.files_prefix));
    messages.push(json!({ "role": "user", "content": content }));
    messages
}

/// A user message of the conversation memory: its text and attachments.
pub fn memory_message(text: &str, attachments: &[crate::files::Attachment], files_prefix: &str) -> Value {
    json!({ "role": "user", "content": files::user_content(text, attachments, &|sha| format!("{files_prefix}{sha}")) })
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
    let found = if mcp.is_empty() {
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
        scope: Scope::Run,
        orchestrator: true,
        client: Rc::new(client),
        output: output.clone(),
        files: Rc::default(),
        mcp,
        found: Rc::new(found),
        trace: job.trace,
    };
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
        let mut usage = cp.usage.clone();
        loop {
            if cp.step >= self.cfg.max_steps {
                return Err(Halt::Failed(format!(
                    "step limit reached ({} steps, AGENT_MAX_STEPS)",
                    self.cfg.max_steps
                )));
            }
            let step = self.stream_step(&cp.messages).await?;
            if let Some(u) = &step.usage {
                let mut sum = add_usage(usage.as_ref(), u);
                // The run's usage names its model, for the usage views.
                sum["model"] = self.cfg.model_id.as_ref().unwrap_or(&self.cfg.model).clone().into();
                usage = Some(sum);
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
        let keys = files::keys(messages);
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
        std::borrow::Cow::Owned(files::resolve(messages, &|k| cache.get(k).cloned()))
    }

    /// Streams one model response, publishing deltas as they arrive.
    /// One model call, with its span (GenAI's `chat`) when traces are on.
    async fn stream_step(&self, messages: &[Value]) -> Result<ModelStep, Halt> {
        let start = self.host.now();
        let step = self.model_step(messages).await;
        if let Some(trace) = &self.trace {
            let mut span = trace
                .child(
                    &self.host.new_id("span"),
                    format!("chat {}", self.cfg.model),
                    crate::trace::SpanKind::Client,
                    start,
                    self.host.now(),
                )
                .attr("gen_ai.operation.name", "chat")
                .attr("gen_ai.provider.name", "openai")
                .attr("gen_ai.request.model", self.cfg.model.clone())
                .attr("gen_ai.agent.id", self.agent_id.clone())
                .attr("threadline.thread.id", self.thread_id.clone())
                .attr("threadline.run.id", self.run_id.clone());
            match &step {
                Ok(s) => {
                    if let Some(u) = &s.usage {
                        let n = |k: &str| u[k].as_i64().unwrap_or(0);
                        span = span
                            .attr("gen_ai.usage.input_tokens", n("prompt_tokens"))
                            .attr("gen_ai.usage.output_tokens", n("completion_tokens"));
                    }
                    if let Some(r) = &s.finish {
                        span = span.attr("gen_ai.response.finish_reasons", crate::trace::Attr::Strs(vec![r.clone()]));
                    }
                }
                Err(Halt::Failed(why)) => span = span.failed(Some(why.clone())),
                Err(Halt::Stopped) => span = span.failed(Some("cancelled".to_owned())),
                Err(Halt::Suspended) => {}
            }
            self.host.span(span);
        }
        step
    }

    async fn model_step(&self, messages: &[Value]) -> Result<ModelStep, Halt> {
        let allowed = self.allowed.as_deref();
        let mut defs = self.tools.definitions(allowed, self.orchestrator);
        defs.extend(self.offered_mcp().map(crate::agent::mcp::McpTool::definition));
        defs.extend(self.client.iter().map(|t| {
            json!({ "type": "function", "function": { "name": t.name, "description": t.description, "parameters": t.parameters } })
        }));
        // What the call may use is held before it is made: its request as
        // sent (files counted apart from their bytes) and its output cap.
        let request_bytes = serde_json::to_string(messages).map_or(0, |m| m.len())
            + serde_json::to_string(&defs).map_or(0, |d| d.len());
        let cap = self.cfg.max_output_tokens.unwrap_or(crate::agent::charge::DEFAULT_OUTPUT_CAP);
        let estimate = crate::agent::charge::estimate(request_bytes, files::keys(messages).len(), cap, self.cfg.price);
        let held = self.cancel.run(self.host.hold(self.model_name(), estimate, self.cfg.price)).await;
        let mut meter = match held.ok_or(Halt::Stopped)? {
            Ok(hold) => Meter { host: self.host.clone(), hold, streamed: 0 },
            Err(why) => return Err(self.over_budget(why)),
        };
        let messages = self.with_files(messages).await;
        let mut body = json!({
            "model": self.cfg.model,
            "messages": messages,
            "stream": true,
            "stream_options": { "include_usage": true },
        });
        if let Some(cap) = self.cfg.max_output_tokens {
            body["max_tokens"] = cap.into();
        }
        if !defs.is_empty() {
            body["tools"] = Value::Array(defs);
        }
        if let Some(spec) = self.output.as_ref().filter(|_| self.orchestrator) {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": { "name": spec["name"], "schema": spec["schema"], "strict": false },
            });
        }
        let opened = self.cancel.run(self.host.open_model(body.to_string())).await.ok_or(Halt::Stopped)?;
        let mut stream = match opened {
            Ok(s) => s,
            Err(ModelFailure::Unreachable(why)) => {
                return Err(
                    self.provider_failed(json!({ "content": format!("Could not reach the model provider: {why}") }))
                );
            }
            Err(ModelFailure::Status { status, body }) => {
                return Err(self.provider_failed(json!({
                    "content": format!("The model provider answered HTTP {status}: {body}"),
                    "statusCode": status,
                })));
            }
        };
        let response_id = self.host.new_id("resp");
        self.publish(vec![self.event(Kind::StepStart, json!({}))])?;
        let mut decoder = sse::Decoder::default();
        let mut parser = ChunkParser::default();
        let mut step = ModelStep::default();
        let mut read = 0usize;
        loop {
            let next = {
                use futures_util::future::{select, Either};
                let read = std::pin::pin!(stream.next());
                let stall = std::pin::pin!(self.host.sleep(self.cfg.stall_timeout_ms));
                match self.cancel.run(select(read, stall)).await.ok_or(Halt::Stopped)? {
                    Either::Left((read, _)) => Some(read),
                    Either::Right(_) => None,
                }
            };
            let chunk = match next {
                None => {
                    return Err(self.provider_failed(json!({
                        "content": format!("The model stream stalled: nothing for {} ms (LLM_STALL_TIMEOUT_MS).", self.cfg.stall_timeout_ms),
                    })));
                }
                Some(None) => {
                    if let Some(data) = decoder.finish() {
                        self.apply(&mut parser, &mut step, &data, &response_id)?;
                    }
                    break;
                }
                Some(Some(Err(why))) => {
                    return Err(self.provider_failed(json!({ "content": format!("The model stream broke: {why}") })));
                }
                Some(Some(Ok(bytes))) => bytes,
            };
            read += chunk.len();
            meter.streamed = read;
            if read > self.cfg.max_model_bytes {
                let limit = self.cfg.max_model_bytes;
                return Err(self.provider_failed(json!({
                    "content": format!("The model's answer passed {limit} bytes in one step (MAX_MODEL_BYTES); it was cut off."),
                })));
            }
            for data in decoder.push(&chunk) {
                if self.apply(&mut parser, &mut step, &data, &response_id)? {
                    break;
                }
            }
            if step.done {
                break;
            }
        }
        let mut finish = json!({});
        if let Some(u) = step.usage.as_mut() {
            if let Some(price) = self.cfg.price {
                let cost = price.cost_usd(u);
                u["costUsd"] = cost.into();
                finish["costUsd"] = cost.into();
            }
            finish["usage"] = u.clone();
        }
        if let Some(id) = &self.cfg.model_id {
            finish["model"] = id.clone().into();
        }
        if let Some(r) = &step.finish {
            finish["finishReason"] = r.clone().into();
        }
        // Its charge settles with its step-finish, in the same block.
        self.publish(vec![self.event(Kind::StepFinish, finish)])?;
        meter.settle(step.usage.as_ref().map(crate::agent::charge::Spend::reported));
        step.calls = parser.tool_calls();
        for call in &mut step.calls {
            if let Some((_, id)) = step.ids.iter().find(|(i, _)| *i == call.index) {
                call.id = id.clone();
            }
        }
        Ok(step)
    }

    /// The model a call's charge names: the catalog id, else the
    /// provider's name.
    fn model_name(&self) -> Option<&str> {
        Some(self.cfg.model_id.as_deref().unwrap_or(&self.cfg.model))
    }

    /// The sender's budget refused a model call: the agent stops, saying
    /// why ([`QUOTA_EXCEEDED`]).
    fn over_budget(&self, why: String) -> Halt {
        let payload = json!({ "content": why, "code": QUOTA_EXCEEDED });
        match self.publish(vec![self.event(Kind::Error, payload)]) {
            Ok(()) => Halt::Failed(QUOTA_EXCEEDED.into()),
            Err(h) => h,
        }
    }

    /// Applies one `data:` payload; `true` at `[DONE]`.
    fn apply(
        &self,
        parser: &mut ChunkParser,
        step: &mut ModelStep,
        data: &str,
        response_id: &str,
    ) -> Result<bool, Halt> {
        let events = parser.push(data).map_err(|e| self.provider_failed(json!({ "content": e })))?;
        let mut out = Vec::new();
        for ev in events {
            match ev {
                ModelEvent::Text(t) => {
                    step.text.push_str(&t);
                    let mut e = self.event(Kind::TextDelta, json!({ "text": t }));
                    e.response_id = Some(response_id.to_owned());
                    out.push(e);
                }
                ModelEvent::Reasoning(t) => {
                    let mut e = self.event(Kind::ReasoningDelta, json!({ "text": t }));
                    e.response_id = Some(response_id.to_owned());
                    out.push(e);
                }
                ModelEvent::ToolStart { index, name, .. } => {
                    // The model's call ids are only unique within its answer:
                    // the thread names calls itself (`<threadId>.tc_…`), so a
                    // decision that names only a call finds its thread.
                    let id = crate::wire::ids::scoped(&self.thread_id, &self.host.new_id("tc"));
                    step.ids.push((index, id.clone()));
                    let mut start = json!({ "toolCallId": id, "toolName": name });
                    if let Some(t) = self.offered_mcp().find(|t| t.exposed == name) {
                        start["server"] = t.server.clone().into();
                    }
                    out.push(self.event(Kind::ToolInputStart, start));
                }
                ModelEvent::Finish(r) => step.finish = Some(r),
                ModelEvent::Usage(u) => step.usage = Some(u),
                ModelEvent::Error(msg) => {
                    self.publish(out)?;
                    return Err(self.provider_failed(
                        json!({ "content": format!("The model provider reported an error: {msg}") }),
                    ));
                }
                ModelEvent::Done => step.done = true,
            }
        }
        if !out.is_empty() {
            self.publish(out)?;
        }
        Ok(step.done)
    }

    /// Publishes the provider's `error` event; the run ends with
    /// [`PROVIDER_UNAVAILABLE`].
    fn provider_failed(&self, payload: Value) -> Halt {
        let mut payload = payload;
        payload["provider"] = "openai-compatible".into();
        match self.publish(vec![self.event(Kind::Error, payload)]) {
            Ok(()) => Halt::Failed(PROVIDER_UNAVAILABLE.into()),
            Err(h) => h,
        }
    }

    /// Runs one step's tool calls concurrently. Returns each call's result
    /// text for the model, in call order.
    async fn run_tools(&self, calls: &[openai::ToolCallParts], tasks: &mut Vec<Value>) -> Result<Vec<StepCall>, Halt> {
        let mut results: Vec<Option<(String, Vec<Value>)>> = vec![None; calls.len()];
        let mut waiting: Vec<Option<(String, Value)>> = vec![None; calls.len()];
        // Built-in task tools change the list in order, before the rest run
        // beside each other.
        let mut in_order = Vec::new();
        let mut concurrent = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            let args: Value =
                match serde_json::from_str(if call.arguments.trim().is_empty() { "{}" } else { &call.arguments }) {
                    Ok(v @ Value::Object(_)) => v,
                    Ok(_) | Err(_) => {
                        let msg = format!("the arguments are not a JSON object: {}", excerpt(&call.arguments, 200));
                        self.publish(
                            vec![self.event(Kind::ToolError, json!({ "toolCallId": call.id, "error": msg }))],
                        )?;
                        results[i] = Some((format!("Error: {msg}"), Vec::new()));
                        continue;
                    }
                };
            let resolved = self.resolve(&call.name, &args);
            let mut announced = json!({ "toolCallId": call.id, "toolName": call.name, "args": args });
            if let Ok(kind) = &resolved {
                announced["toolKind"] = kind.label().into();
            }
            if let Ok(ToolKind::Mcp(t)) = &resolved {
                announced["server"] = t.server.clone().into();
                announced["title"] = t.tool.label().into();
            }
            self.publish(vec![self.event(Kind::ToolCall, announced)])?;
            match resolved.map(|kind| self.next(kind)) {
                Ok(Next::Waits(kind)) => {
                    if !self.orchestrator {
                        let msg = format!(
                            "`{}` needs a person's approval, which only the orchestrator can ask for",
                            call.name
                        );
                        self.publish(
                            vec![self.event(Kind::ToolError, json!({ "toolCallId": call.id, "error": msg }))],
                        )?;
                        results[i] = Some((format!("Error: {msg}"), Vec::new()));
                        continue;
                    }
                    let request = confirmation_payload(&kind, call, &args);
                    let request_id = self.host.request_confirmation(&self.agent_id, request)?;
                    waiting[i] = Some((request_id, args));
                }
                Ok(Next::Tasks { create }) => in_order.push((i, create, args)),
                Ok(Next::Remembered(runnable)) => {
                    // Approved for the rest of the thread: it runs without
                    // asking, and says so.
                    let settled = json!({ "toolCallId": call.id, "toolName": call.name, "status": "approved", "decidedVia": "remembered" });
                    self.publish(vec![self.event(Kind::ConfirmationSettled, settled)])?;
                    concurrent.push((i, runnable, args));
                }
                Ok(Next::Runs(runnable)) => concurrent.push((i, runnable, args)),
                Err(msg) => {
                    self.publish(vec![self.event(Kind::ToolError, json!({ "toolCallId": call.id, "error": msg }))])?;
                    results[i] = Some((format!("Error: {msg}"), Vec::new()));
                }
            }
        }
        for (i, create, args) in in_order {
            let out = apply_tasks(tasks, &args, create);
            self.publish(vec![self.event(Kind::TasksUpdate, json!({ "tasks": { "tasks": tasks.clone() } }))])?;
            self.publish(vec![self.event(Kind::ToolResult, json!({ "toolCallId": calls[i].id, "result": out }))])?;
            results[i] = Some((out.to_string(), Vec::new()));
        }
        if !concurrent.is_empty() {
            let names: Vec<&str> = concurrent.iter().map(|(i, _, _)| calls[*i].name.as_str()).collect();
            self.publish(vec![
                self.event(Kind::Status, json!({ "message": format!("Running {}…", names.join(", ")) }))
            ])?;
            let mut running: FuturesUnordered<_> = concurrent
                .into_iter()
                .map(|(i, kind, args)| {
                    let call = &calls[i];
                    async move { (i, self.run_tool(kind, call, args).await) }
                })
                .collect();
            loop {
                let Some((i, outcome)) = self.cancel.run(running.next()).await.ok_or(Halt::Stopped)? else {
                    break;
                };
                results[i] = Some(self.settle(&calls[i].id, outcome?)?);
            }
            self.publish(vec![self.event(Kind::Status, json!({ "message": "" }))])?;
        }
        Ok(calls
            .iter()
            .zip(results.into_iter().zip(waiting))
            .map(|(call, (result, wait))| {
                let (request_id, args) = match wait {
                    Some((rid, args)) => (Some(rid), args),
                    None => (None, Value::Null),
                };
                let (text, images) = result.unwrap_or_default();
                StepCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    args,
                    result: if request_id.is_some() { None } else { Some(text) },
                    request_id,
                    state: None,
                    decision: None,
                    images,
                }
            })
            .collect())
    }

    /// The tool `name` for this agent (the server's, then the client's),
    /// its arguments checked.
    fn resolve(&self, name: &str, args: &Value) -> Result<ToolKind<'_>, String> {
        if let Some(t) = self.offered_mcp().find(|t| t.exposed == name) {
            return Ok(ToolKind::Mcp(t));
        }
        let found = self.tools.resolve(name, args, self.allowed.as_deref(), self.orchestrator);
        match self.client.iter().find(|t| t.name == name) {
            Some(t) if found.is_err() => tools::validate_client(t, args).map(|()| ToolKind::Client(t)),
            _ => found,
        }
    }

    /// The MCP tools this agent offers: the orchestrator's, those its
    /// agent's `tools` name (all without a list).
    fn offered_mcp(&self) -> impl Iterator<Item = &crate::agent::mcp::McpTool> {
        let allowed = self.allowed.as_deref();
        self.found.tools.iter().filter(move |t| self.orchestrator && allowed.is_none_or(|a| a.contains(&t.exposed)))
    }

    /// What a call does next: wait for a person (or the client) first,
    /// change the task list, or run.
    fn next<'t>(&self, kind: ToolKind<'t>) -> Next<'t> {
        match kind {
            ToolKind::AskUser | ToolKind::Client(_) => Next::Waits(kind),
            ToolKind::Http(tool) => match self.host.approval(&tool.name, tool.approval == tools::Approval::Required) {
                Asking::Ask => Next::Waits(kind),
                Asking::Remembered => Next::Remembered(Runnable::Http(tool)),
                Asking::Free => Next::Runs(Runnable::Http(tool)),
            },
            ToolKind::Mcp(tool) => match self.host.approval(&tool.exposed, tool.asks) {
                Asking::Ask => Next::Waits(kind),
                Asking::Remembered => Next::Remembered(Runnable::Mcp(tool)),
                Asking::Free => Next::Runs(Runnable::Mcp(tool)),
            },
            ToolKind::CreateTasks => Next::Tasks { create: true },
            ToolKind::UpdateTasks => Next::Tasks { create: false },
            ToolKind::SpawnAgent => Next::Runs(Runnable::SpawnAgent),
        }
    }

    /// Completes a step that waited for confirmations, with their decisions
    /// (filled into `calls` by the host): an approved call runs (`ask-user`
    /// answers with the person's input), a denied or lapsed one is a
    /// `tool-error` the model is told about. Then the loop goes on.
    async fn finish_suspended_step(&self, cp: &mut Checkpoint, calls: Vec<StepCall>) -> Result<(), Halt> {
        let mut images = Vec::new();
        for call in calls {
            let (content, shown) = match call.result.clone() {
                Some(done) => (done, call.images.clone()),
                None => self.settle_confirmed(&call).await?,
            };
            images.extend(shown);
            cp.messages.push(json!({ "role": "tool", "tool_call_id": call.id, "content": content }));
        }
        self.show_images(cp, images);
        cp.step += 1;
        self.host.checkpoint(cp);
        Ok(())
    }

    async fn settle_confirmed(&self, call: &StepCall) -> Result<(String, Vec<Value>), Halt> {
        let outcome = match call.state.as_deref() {
            Some("approved") => match self.resolve(&call.name, &call.args) {
                Ok(ToolKind::Mcp(tool)) => {
                    let start = self.host.now();
                    let done = self.call_mcp(tool, call.args.clone()).await;
                    self.tool_span(&call.name, &call.id, Some(tool.server.clone()), start, &done);
                    done?
                }
                Ok(ToolKind::AskUser) => Ok(call.decision.clone().unwrap_or(Value::Null).into()),
                // The client ran it: its answer is the result (or the error).
                Ok(ToolKind::Client(_)) => {
                    let d = call.decision.clone().unwrap_or(Value::Null);
                    match d.get("error").and_then(Value::as_str) {
                        Some(e) => Err(e.to_owned()),
                        None => Ok(d.get("result").cloned().unwrap_or(Value::Null).into()),
                    }
                }
                Ok(ToolKind::Http(tool)) => {
                    self.publish(vec![
                        self.event(Kind::Status, json!({ "message": format!("Running {}…", tool.name) }))
                    ])?;
                    let body = json!({ "args": call.args, "toolCallId": call.id, "threadId": self.thread_id, "runId": self.run_id });
                    let limit = self.cfg.max_tool_result_bytes;
                    let start = self.host.now();
                    let answer = self.cancel.run(self.host.call_http_tool(tool, body, limit)).await;
                    let done = answer.map(|a| a.and_then(|a| a.outcome(limit)).map(Done::from)).ok_or(Halt::Stopped);
                    self.tool_span(&call.name, &call.id, None, start, &done);
                    let out = done?;
                    self.publish(vec![self.event(Kind::Status, json!({ "message": "" }))])?;
                    out
                }
                Ok(_) => Err("this tool cannot run after a confirmation".to_owned()),
                Err(e) => Err(e),
            },
            Some("denied") => {
                let reason = call.decision.as_ref().and_then(|d| d["userInput"].as_str()).filter(|r| !r.is_empty());
                Err(match reason {
                    Some(r) => format!("{DENIED}: {r}"),
                    None => format!("{DENIED}."),
                })
            }
            Some("expired") => Err(format!("{EXPIRED} before anyone decided; the tool did not run.")),
            _ => return Err(Halt::Stopped),
        };
        self.settle(&call.id, outcome)
    }

    /// Publishes a call's `tool-result` or `tool-error`; returns what the
    /// model is told.
    ///
    /// Invariant: a stored result stays under `max_tool_result_bytes` as
    /// JSON (a larger one is cut, with a marker the model sees), so no tool
    /// can make a row SQLite refuses.
    fn settle(&self, tool_call_id: &str, outcome: Result<Done, String>) -> Result<(String, Vec<Value>), Halt> {
        let limit = self.cfg.max_tool_result_bytes;
        match outcome {
            Ok(done) => {
                let v = builtin::cap_result(done.value, limit);
                self.publish(vec![self.event(Kind::ToolResult, json!({ "toolCallId": tool_call_id, "result": v }))])?;
                let told = match (done.told, v) {
                    (Some(t), _) => builtin::cap_text(t, limit),
                    (None, Value::String(s)) => s,
                    (None, other) => other.to_string(),
                };
                Ok((told, done.images))
            }
            Err(msg) => {
                let msg = builtin::cap_text(msg, limit);
                self.publish(vec![self.event(Kind::ToolError, json!({ "toolCallId": tool_call_id, "error": msg }))])?;
                Ok((format!("Error: {msg}"), Vec::new()))
            }
        }
    }

    /// After a step's tool messages: the images its tools returned, for a
    /// model that takes images (others are told of them in text).
    fn show_images(&self, cp: &mut Checkpoint, images: Vec<Value>) {
        if images.is_empty() || !self.cfg.input_images {
            return;
        }
        let mut content = vec![json!({ "type": "text", "text": "The images the tools returned:" })];
        content.extend(images);
        cp.messages.push(json!({ "role": "user", "content": content }));
    }

    /// Calls an MCP tool: its result as the call's event and what the model
    /// is told, the images it returned stored as files of the thread; a
    /// server's failure (unreachable, malformed, an error) is a tool error
    /// the model can react to.
    async fn call_mcp(&self, tool: &crate::agent::mcp::McpTool, args: Value) -> Result<Result<Done, String>, Halt> {
        let id = self.mcp.next_id();
        let mut inflight =
            Inflight { host: self.host.clone(), mcp: self.mcp.clone(), server: tool.server.clone(), id, done: false };
        let called = self.mcp.call(&self.host, tool, args, id).await;
        inflight.done = true;
        let result = match called {
            Ok(r) => r,
            Err(f) => return Ok(Err(format!("the MCP server `{}`: {f}", tool.server))),
        };
        let mut stored = Vec::new();
        let mut images = Vec::new();
        for image in crate::agent::mcp::result::images(&result) {
            // Raster images whose bytes agree with their type are kept; any
            // other is named, not stored.
            let raster = crate::files::Types::parse("image/png,image/jpeg,image/gif,image/webp").unwrap_or_default();
            let kept = match crate::files::media::check(&image.media_type, &image.bytes, &raster) {
                Ok(()) => self.host.store_file(image.bytes, &image.media_type).await,
                Err(e) => Err(e.message),
            };
            if let Ok((f, key)) = &kept {
                images.push(json!({ "type": files::FILE_PART, "key": key, "mediaType": f.media_type, "size": f.size }));
            }
            stored.push((image.index, kept.map(|(f, _)| f)));
        }
        Ok(crate::agent::mcp::result::outcome(result, &stored, &self.thread_id).map(|o| Done {
            value: o.result,
            told: Some(o.told),
            images,
        }))
    }

    /// One tool call: `Ok(Ok(result))`, `Ok(Err(tool error))`, or a halt;
    /// with its span (GenAI's `execute_tool`) when traces are on.
    async fn run_tool(
        &self,
        kind: Runnable<'_>,
        call: &openai::ToolCallParts,
        args: Value,
    ) -> Result<Result<Done, String>, Halt> {
        let start = self.host.now();
        let server = match &kind {
            Runnable::Mcp(t) => Some(t.server.clone()),
            _ => None,
        };
        let done = self.call_tool(kind, call, args).await;
        self.tool_span(&call.name, &call.id, server, start, &done);
        done
    }

    /// A tool call's span (GenAI's `execute_tool`), with traces on.
    fn tool_span(
        &self,
        name: &str,
        call_id: &str,
        server: Option<String>,
        start: i64,
        done: &Result<Result<Done, String>, Halt>,
    ) {
        let Some(trace) = &self.trace else { return };
        let mut span = trace
            .child(
                &format!("tool:{call_id}"),
                format!("execute_tool {name}"),
                crate::trace::SpanKind::Internal,
                start,
                self.host.now(),
            )
            .attr("gen_ai.operation.name", "execute_tool")
            .attr("gen_ai.tool.name", name)
            .attr("gen_ai.tool.call.id", call_id)
            .attr("gen_ai.tool.type", if server.is_some() { "extension" } else { "function" })
            .attr("gen_ai.agent.id", self.agent_id.clone())
            .attr("threadline.thread.id", self.thread_id.clone())
            .attr("threadline.run.id", self.run_id.clone());
        if let Some(server) = server {
            span = span.attr("threadline.mcp.server", server).attr("mcp.method.name", "tools/call");
        }
        span = match done {
            Ok(Ok(_)) | Err(Halt::Suspended) => span,
            Ok(Err(why)) | Err(Halt::Failed(why)) => span.failed(Some(why.clone())),
            Err(Halt::Stopped) => span.failed(Some("cancelled".to_owned())),
        };
        self.host.span(span);
    }

    async fn call_tool(
        &self,
        kind: Runnable<'_>,
        call: &openai::ToolCallParts,
        args: Value,
    ) -> Result<Result<Done, String>, Halt> {
        match kind {
            Runnable::Http(tool) => {
                let body =
                    json!({ "args": args, "toolCallId": call.id, "threadId": self.thread_id, "runId": self.run_id });
                let limit = self.cfg.max_tool_result_bytes;
                Ok(self.host.call_http_tool(tool, body, limit).await.and_then(|a| a.outcome(limit)).map(Done::from))
            }
            Runnable::Mcp(tool) => self.call_mcp(tool, args).await,
            Runnable::SpawnAgent => Ok(self.spawn_agent(args).await?.map(Done::from)),
        }
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
        let cp = Checkpoint {
            run_id: self.run_id.clone(),
            thread_id: self.thread_id.clone(),
            step: 0,
            messages,
            tasks: Vec::new(),
            usage: None,
            suspended: None,
            client_tools: Vec::new(),
            output: None,
        };
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

#[derive(Default)]
struct ModelStep {
    /// Our id for each tool call index of the answer.
    ids: Vec<(usize, String)>,
    text: String,
    calls: Vec<openai::ToolCallParts>,
    finish: Option<String>,
    usage: Option<Value>,
    done: bool,
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
