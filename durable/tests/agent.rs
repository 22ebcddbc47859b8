//! The built-in agent's loop, natively, against a fake [`Host`]: a scripted
//! model stream, scripted HTTP tools, the thread's real publish path on a
//! memory store. Runs start and resume through the thread's service, as on
//! workerd, and the loop runs each [`Effect::Drive`] the service asks for.

mod support;

use futures_util::future::LocalBoxFuture;
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use support::{actor, serve, Req, T};
use threadline_durable::agent::cancel::CancelToken;
use threadline_durable::agent::{
    self, tools::HttpTool, BackgroundTask, ByteStream, Checkpoint, End, Host, ModelFailure, Scope, Stopped, ToolAnswer,
};
use threadline_durable::{Drive, Effect};
use threadline_durable::{Event, Kind};
use threadline_durable::{Settings, Store};

/// One scripted model answer.
enum Answer {
    /// These chunks, then `[DONE]`.
    Chunks(Vec<Value>),
    /// An HTTP status instead of a stream.
    Status(u16),
    /// Made from the request, as a model would answer it: a compaction's
    /// summary (naming the person's first and last message it folds), or
    /// an answer naming the last user message; its usage counts four bytes
    /// of the request a token.
    Auto,
}

struct Fake {
    thread: RefCell<T>,
    answers: RefCell<VecDeque<Answer>>,
    /// The request bodies the model saw.
    requests: RefCell<Vec<Value>>,
    /// Tool answers by tool name.
    tools: RefCell<Vec<(String, Result<Value, String>)>>,
    /// Tool calls made, by name, with their body.
    calls: RefCell<Vec<(String, Value)>>,
    inflight: Cell<usize>,
    max_inflight: Cell<usize>,
    spawned: RefCell<Vec<LocalBoxFuture<'static, ()>>>,
    ids: Cell<u64>,
    /// Cancelled once the model has been asked this many times.
    cancel_after: Cell<Option<(usize, CancelToken)>>,
    /// The bucket: bytes by the end of their key (a file's hash).
    files: RefCell<Vec<(String, Vec<u8>)>>,
    /// The MCP servers the agent's posts reach.
    mcp: RefCell<FakeMcp>,
    /// Spans the loop recorded, then those the thread's effects carried.
    spans: RefCell<Vec<threadline_durable::trace::Span>>,
    /// Log lines the thread's effects carried.
    logs: RefCell<Vec<String>>,
    /// The charges the thread settled, as delivered to directories.
    charges: RefCell<Vec<threadline_durable::agent::charge::Charge>>,
    /// A compaction's summary request is answered by itself ([`Answer::Auto`],
    /// from no script), or with this status.
    summary_fails: Cell<Option<u16>>,
    /// Cancelled when a summary step is asked for (the loop dies in it).
    cancel_on_summary: RefCell<Option<CancelToken>>,
}

/// MCP servers over Streamable HTTP, in process: `http://<name>/mcp` each,
/// every one offering the same tools (`search`, `delete` (destructive),
/// `chart` (an image), `fail`), two pages of `tools/list`, answers as JSON
/// or (`sse`) as an event stream led by a progress notification.
#[derive(Default)]
struct FakeMcp {
    /// Servers that answer; any other URL is refused.
    up: Vec<String>,
    sse: bool,
    sessions: Vec<String>,
    /// Every request: (server, method, session sent).
    requests: Vec<(String, String, Option<String>)>,
    /// Answer tools/call with JSON that is not JSON-RPC.
    broken: bool,
    /// Send `notifications/tools/list_changed` before each tools/call answer.
    changed: bool,
}

impl FakeMcp {
    fn answer(&mut self, req: &agent::Fetch) -> Result<agent::Fetched<Chunks>, String> {
        let server = req.url.trim_start_matches("http://").split('/').next().unwrap_or_default().to_owned();
        if !self.up.contains(&server) {
            return Err(format!("connection refused ({server})"));
        }
        let body: Value = serde_json::from_str(&req.body).unwrap();
        let method = body["method"].as_str().unwrap_or_default().to_owned();
        let session = req.headers.iter().find(|(k, _)| k == "mcp-session-id").map(|(_, v)| v.clone());
        self.requests.push((server.clone(), method.clone(), session.clone()));
        let reply = |status: u16, headers: Vec<(String, String)>, text: String| {
            Ok(agent::Fetched {
                status,
                headers,
                body: Chunks(text.into_bytes().chunks(7).map(<[u8]>::to_vec).collect()),
            })
        };
        if method == "initialize" {
            let id = format!("{server}-s{}", self.sessions.len() + 1);
            self.sessions.push(id.clone());
            let result = json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": server, "version": "1"}});
            let text = json!({"jsonrpc": "2.0", "id": body["id"], "result": result}).to_string();
            return reply(
                200,
                vec![("content-type".into(), "application/json".into()), ("mcp-session-id".into(), id)],
                text,
            );
        }
        if !session.as_ref().is_some_and(|s| self.sessions.contains(s)) {
            return reply(404, vec![], "session not found".into());
        }
        if body.get("id").is_none() {
            return reply(202, vec![], String::new());
        }
        if self.broken && method == "tools/call" {
            return reply(
                200,
                vec![("content-type".into(), "application/json".into())],
                r#"{"hello":"this is not JSON-RPC"}"#.into(),
            );
        }
        let tool = |name: &str, extra: Value| {
            let mut t = json!({"name": name, "description": format!("{name} notes"), "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}});
            if let (Some(t), Some(e)) = (t.as_object_mut(), extra.as_object()) {
                t.extend(e.clone());
            }
            t
        };
        let result = match method.as_str() {
            "tools/list" if body["params"]["cursor"].is_null() => json!({"tools": [
                tool("search", json!({"annotations": {"readOnlyHint": true}})),
                tool("delete", json!({"annotations": {"destructiveHint": true}})),
            ], "nextCursor": "p2"}),
            "tools/list" => json!({"tools": [tool("chart", json!({})), tool("fail", json!({}))]}),
            "tools/call" => match body["params"]["name"].as_str().unwrap_or_default() {
                "search" => {
                    json!({"content": [{"type": "text", "text": format!("found {}", body["params"]["arguments"]["q"])}], "structuredContent": {"hits": 2}})
                }
                "delete" => json!({"content": [{"type": "text", "text": "deleted"}]}),
                "chart" => {
                    json!({"content": [{"type": "image", "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==", "mimeType": "image/png"}]})
                }
                _ => json!({"content": [{"type": "text", "text": "the store is offline"}], "isError": true}),
            },
            _ => {
                return reply(
                    200,
                    vec![("content-type".into(), "application/json".into())],
                    json!({"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32601, "message": "no such method"}})
                        .to_string(),
                )
            }
        };
        let answer = json!({"jsonrpc": "2.0", "id": body["id"], "result": result}).to_string();
        if self.sse {
            let mut text = String::from(
                "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n",
            );
            if self.changed && method == "tools/call" {
                text.push_str("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n");
            }
            text.push_str(&format!("event: message\ndata: {answer}\n\n"));
            return reply(200, vec![("content-type".into(), "text/event-stream".into())], text);
        }
        reply(200, vec![("content-type".into(), "application/json".into())], answer)
    }
}

#[derive(Clone)]
struct Host1 {
    fake: Rc<Fake>,
    run_id: String,
}

struct Chunks(VecDeque<Vec<u8>>);

impl ByteStream for Chunks {
    async fn next(&mut self) -> Option<Result<Vec<u8>, String>> {
        self.0.pop_front().map(Ok)
    }
}

/// A future pending once, so concurrent calls overlap before any ends.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

impl agent::Outbound for Host1 {
    type Stream = Chunks;

    async fn post(&self, req: agent::Fetch) -> Result<agent::Fetched<Chunks>, String> {
        self.fake.mcp.borrow_mut().answer(&req)
    }

    async fn sleep(&self, _ms: u64) {
        // Only the stall timer sleeps; the scripted streams never stall.
        futures_util::future::pending::<()>().await
    }

    fn now(&self) -> i64 {
        1_000
    }
}

impl Host for Host1 {
    async fn open_model(&self, body: String) -> Result<Chunks, ModelFailure> {
        let f = &self.fake;
        f.requests.borrow_mut().push(serde_json::from_str(&body).unwrap());
        if let Some((n, token)) = f.cancel_after.take() {
            if f.requests.borrow().len() >= n {
                token.cancel();
            } else {
                f.cancel_after.set(Some((n, token)));
            }
        }
        let request: Value = serde_json::from_str(&body).unwrap();
        if is_summary(&request) {
            if let Some(token) = f.cancel_on_summary.borrow_mut().take() {
                token.cancel();
            }
        }
        let scripted = if is_summary(&request) {
            f.summary_fails.get().map_or(Answer::Auto, Answer::Status)
        } else {
            f.answers.borrow_mut().pop_front().expect("a scripted answer")
        };
        match scripted {
            Answer::Status(status) => Err(ModelFailure::Status { status, body: "down".into() }),
            Answer::Auto => {
                let chunks = auto_answer(&request);
                let mut out: VecDeque<Vec<u8>> = chunks.iter().map(|c| format!("data: {c}\n\n").into_bytes()).collect();
                out.push_back(b"data: [DONE]\n\n".to_vec());
                Ok(Chunks(out))
            }
            Answer::Chunks(chunks) => {
                let mut out: VecDeque<Vec<u8>> = chunks.iter().map(|c| format!("data: {c}\n\n").into_bytes()).collect();
                out.push_back(b"data: [DONE]\n\n".to_vec());
                Ok(Chunks(out))
            }
        }
    }

    async fn call_http_tool(&self, tool: &HttpTool, body: Value, limit: usize) -> Result<ToolAnswer, String> {
        let f = &self.fake;
        f.calls.borrow_mut().push((tool.name.clone(), body));
        f.inflight.set(f.inflight.get() + 1);
        f.max_inflight.set(f.max_inflight.get().max(f.inflight.get()));
        YieldOnce(false).await;
        f.inflight.set(f.inflight.get() - 1);
        let answer = f.tools.borrow().iter().find(|(n, _)| *n == tool.name).map(|(_, a)| a.clone());
        let value = answer.unwrap_or_else(|| Err(format!("no such tool {}", tool.name)))?;
        let body = value.to_string();
        let truncated = body.len() > limit;
        let body = if truncated { body[..limit].to_owned() } else { body };
        Ok(ToolAnswer { status: 200, body, truncated })
    }

    async fn read_file(&self, key: &str) -> Result<Vec<u8>, String> {
        self.fake
            .files
            .borrow()
            .iter()
            .find(|(k, _)| key.ends_with(k.as_str()))
            .map(|(_, b)| b.clone())
            .ok_or_else(|| format!("no file {key}"))
    }

    async fn store_file(
        &self,
        bytes: Vec<u8>,
        media_type: &str,
    ) -> Result<(threadline_durable::files::FileRef, String), String> {
        let new = threadline_durable::files::NewFile::of(&bytes, media_type, None);
        let key = self
            .fake
            .thread
            .borrow_mut()
            .journal_mut()
            .files_mut()
            .store_agent_file(&new, 7, 1_000)
            .map_err(|e| e.to_string())?;
        self.fake.files.borrow_mut().push((new.sha256.clone(), bytes));
        Ok((new.reference(), key))
    }

    fn new_id(&self, prefix: &str) -> String {
        self.fake.ids.set(self.fake.ids.get() + 1);
        format!("{prefix}_{}", self.fake.ids.get())
    }

    fn publish(&self, scope: &Scope, events: Vec<Event>) -> Result<(), Stopped> {
        self.fake.thread.borrow_mut().agent_loop().publish(&self.run_id, scope, events, 1_000).map_err(|_| Stopped)
    }

    fn checkpoint(&self, cp: &Checkpoint) {
        self.fake.thread.borrow_mut().agent_loop().save_checkpoint(cp).unwrap();
    }

    fn spawn(&self, fut: Pin<Box<dyn Future<Output = ()>>>) {
        self.fake.spawned.borrow_mut().push(fut);
    }

    fn background(&self, task: BackgroundTask) {
        self.fake.thread.borrow_mut().agent_loop().set_background(task);
    }

    fn approval(&self, tool: &str, declared: bool) -> threadline_durable::agent::Asking {
        self.fake.thread.borrow().requests().approval(tool, declared)
    }

    fn request_confirmation(&self, agent_id: &str, payload: Value) -> Result<String, Stopped> {
        let local = self.new_id("cr");
        self.fake
            .thread
            .borrow_mut()
            .agent_loop()
            .request_confirmation(&self.run_id, agent_id, payload, &local, 1_000)
            .map_err(|_| Stopped)
    }

    fn span(&self, span: threadline_durable::trace::Span) {
        self.fake.spans.borrow_mut().push(span);
    }

    async fn hold(
        &self,
        model: Option<&str>,
        spend: threadline_durable::agent::charge::Spend,
        price: Option<threadline_durable::Price>,
    ) -> Result<Option<String>, String> {
        let held = self.fake.thread.borrow_mut().charges().hold(&self.run_id, model, spend, price, 1_000);
        Ok(held.map_err(|e| e.to_string())?.map(|h| h.id))
    }

    fn settle(&self, hold: &str, used: Option<threadline_durable::agent::charge::Spend>, streamed: usize) {
        let effects = self.fake.thread.borrow_mut().charges().settle(hold, used, streamed, 1_000).unwrap();
        for e in effects {
            if let Effect::Charge { charges, .. } = e {
                self.fake.charges.borrow_mut().extend(charges);
            }
        }
    }
}

fn tools_json() -> String {
    json!([
        {"name": "weather", "url": "http://tools/weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
        {"name": "time", "url": "http://tools/time"},
        {"name": "wipe", "url": "http://tools/wipe", "approval": "required", "severity": "destructive"},
    ])
    .to_string()
}

fn settings(extra: &[(&str, &str)]) -> Settings {
    let tools = tools_json();
    // The first value of a name wins: `extra` overrides the defaults.
    let mut vars = extra.to_vec();
    vars.extend_from_slice(&[("LLM_BASE_URL", "http://model"), ("TOOLS", tools.as_str()), ("AGENT_MAX_STEPS", "4")]);
    Settings::from_pairs(&vars)
}

fn fake(settings: &Settings, answers: Vec<Answer>) -> Rc<Fake> {
    Rc::new(Fake {
        thread: RefCell::new(support::thread(settings)),
        answers: RefCell::new(answers.into()),
        requests: RefCell::default(),
        tools: RefCell::new(vec![
            ("weather".into(), Ok(json!({"temp": 21}))),
            ("time".into(), Ok(json!("12:00"))),
            ("wipe".into(), Ok(json!({"wiped": true}))),
        ]),
        calls: RefCell::default(),
        inflight: Cell::new(0),
        max_inflight: Cell::new(0),
        spawned: RefCell::default(),
        ids: Cell::new(0),
        cancel_after: Cell::new(None),
        files: RefCell::default(),
        mcp: RefCell::new(FakeMcp { up: vec!["mcp-a".into(), "mcp-b".into()], ..FakeMcp::default() }),
        spans: RefCell::default(),
        logs: RefCell::default(),
        charges: RefCell::default(),
        summary_fails: Cell::new(None),
        cancel_on_summary: RefCell::default(),
    })
}

/// Whether `request` is a compaction's summary step.
fn is_summary(request: &Value) -> bool {
    request["messages"][0]["content"].as_str().is_some_and(|c| c.starts_with("You compact a conversation"))
}

/// [`Answer::Auto`]'s chunks for `request`.
fn auto_answer(request: &Value) -> Vec<Value> {
    let messages = request["messages"].as_array().unwrap();
    let said = |m: &Value| m["content"].as_str().map(str::to_owned).unwrap_or_else(|| m["content"].to_string());
    let reply = if said(&messages[0]).starts_with("You compact a conversation") {
        let transcript = said(&messages[1]);
        let asked: Vec<String> =
            transcript.lines().filter_map(|l| l.strip_prefix("user: ")).map(|l| l.chars().take(10).collect()).collect();
        // An earlier summary's first message is the first of all.
        let earlier = transcript.split_once("first=").map(|(_, rest)| rest.chars().take(10).collect::<String>());
        let first = earlier.or_else(|| asked.first().cloned()).unwrap_or_default();
        format!("SUMMARY first={first} last={} n={}", asked.last().cloned().unwrap_or_default(), asked.len())
    } else {
        let last = messages.iter().rev().find(|m| m["role"] == "user").map(said).unwrap_or_default();
        format!("answer to {}", last.chars().take(24).collect::<String>())
    };
    let prompt = ((request["messages"].to_string().len() + request["tools"].to_string().len()) / 4) as u64;
    vec![
        text(&reply),
        json!({"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": prompt, "completion_tokens": 10, "total_tokens": prompt + 10}}),
    ]
}

fn text(s: &str) -> Value {
    json!({"choices": [{"delta": {"content": s}}]})
}
fn reasoning(s: &str) -> Value {
    json!({"choices": [{"delta": {"reasoning_content": s}}]})
}
fn call(index: usize, name: &str, args: &str) -> Value {
    json!({"choices": [{"delta": {"tool_calls": [{"index": index, "id": format!("call_{index}"), "function": {"name": name, "arguments": args}}]}}]})
}
fn finish(reason: &str) -> Value {
    json!({"choices": [{"delta": {}, "finish_reason": reason}], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
}

/// Sends `message` through the service and runs every loop it asks for,
/// to the end (background tasks included). Returns the ends, in order.
fn send(f: &Rc<Fake>, s: &Settings, message: &str) -> Vec<End> {
    let outcome = serve(
        &mut f.thread.borrow_mut(),
        s,
        Req::new("POST", "/instance-ai/chat/t1", actor("alice", &[])).body(&json!({"message": message})),
        1_000,
    );
    assert_eq!(support::status(&outcome), 200, "{:?}", outcome.answer);
    drive_all(f, s, outcome.effects)
}

fn drive_all(f: &Rc<Fake>, s: &Settings, effects: Vec<Effect>) -> Vec<End> {
    let mut ends = Vec::new();
    let mut queue: VecDeque<Effect> = effects.into();
    while let Some(e) = queue.pop_front() {
        match e {
            Effect::Drive(d) => {
                ends.push(drive(f, d, CancelToken::default()));
                queue.extend(f.thread.borrow_mut().launch().started(s, 1_000));
            }
            Effect::Telemetry { spans, log } => {
                f.spans.borrow_mut().extend(spans);
                f.logs.borrow_mut().extend(log);
            }
            _ => {}
        }
    }
    let spawned: Vec<_> = f.spawned.borrow_mut().drain(..).collect();
    for fut in spawned {
        futures_executor::block_on(fut);
    }
    ends
}

fn drive(f: &Rc<Fake>, d: Box<Drive>, token: CancelToken) -> End {
    let host = Host1 { fake: f.clone(), run_id: d.job.run_id.clone() };
    futures_executor::block_on(agent::run_orchestrator(host, Rc::new(d.config), d.tools, d.mcp, token, d.job))
}

/// A person cancels the thread's run: its agents are told to stop.
fn cancel_run(f: &Rc<Fake>, s: &Settings) {
    let cancelled = serve(
        &mut f.thread.borrow_mut(),
        s,
        Req::new("POST", "/instance-ai/chat/t1/cancel", actor("alice", &[])),
        1_500,
    );
    assert!(cancelled.effects.iter().any(|e| matches!(e, Effect::StopAgents)));
}

fn events(f: &Rc<Fake>) -> Vec<Event> {
    support::log(&f.thread.borrow())
}

fn kinds(f: &Rc<Fake>) -> Vec<&'static str> {
    events(f).iter().map(|e| e.kind().as_str()).collect()
}

fn finish_of(f: &Rc<Fake>) -> Value {
    events(f).iter().rev().find(|e| e.kind() == Kind::RunFinish).expect("a run-finish").payload_json()
}

#[test]
fn text_and_reasoning_stream_and_the_run_completes() {
    let s = settings(&[]);
    let f = fake(&s, vec![Answer::Chunks(vec![reasoning("thinking"), text("Hel"), text("lo"), finish("stop")])]);
    assert_eq!(send(&f, &s, "hi"), [End::Completed]);
    assert_eq!(
        kinds(&f),
        [
            "run-start",
            "thread-title-updated",
            "step-start",
            "reasoning-block",
            "text-block",
            "step-finish",
            "run-finish"
        ]
    );
    assert_eq!(finish_of(&f), json!({"status": "completed"}));
    let tree = threadline_durable::fold(&events(&f)).tree().unwrap();
    assert_eq!((tree.text_content.as_str(), tree.reasoning.as_str()), ("Hello", "thinking"));
    // The model got the system prompt and the user's message.
    let req = &f.requests.borrow()[0];
    assert_eq!(req["messages"].as_array().unwrap().last().unwrap()["content"], "hi");
    assert_eq!(req["stream"], true);
}

#[test]
fn a_tool_call_runs_and_its_result_feeds_the_next_step() {
    let s = settings(&[]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "weather", "{\"ci"), call(0, "", "ty\":\"Oslo\"}"), finish("tool_calls")]),
            Answer::Chunks(vec![text("21 degrees"), finish("stop")]),
        ],
    );
    assert_eq!(send(&f, &s, "weather?"), [End::Completed]);
    let evs = events(&f);
    let call = evs.iter().find(|e| e.kind() == Kind::ToolCall).unwrap();
    assert_eq!(call.payload_json()["args"], json!({"city": "Oslo"}));
    assert!(call.payload_json()["toolCallId"].as_str().unwrap().starts_with("t1."), "call ids carry their thread");
    assert_eq!(
        evs.iter().find(|e| e.kind() == Kind::ToolResult).unwrap().payload_json()["result"],
        json!({"temp": 21})
    );
    assert_eq!(f.calls.borrow()[0].1["args"], json!({"city": "Oslo"}));
    let second = &f.requests.borrow()[1];
    let tool_msg = second["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool_msg["content"], "{\"temp\":21}");
}

#[test]
fn a_steps_calls_run_concurrently_and_bad_arguments_are_tool_errors() {
    let s = settings(&[]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![
                call(0, "weather", "{\"city\":\"A\"}"),
                call(1, "time", "{}"),
                call(2, "weather", "{\"city\":3}"),
                call(3, "time", "not json"),
                finish("tool_calls"),
            ]),
            Answer::Chunks(vec![text("done"), finish("stop")]),
        ],
    );
    assert_eq!(send(&f, &s, "both"), [End::Completed]);
    assert_eq!(f.max_inflight.get(), 2, "both valid calls were in flight at once");
    let errors: Vec<_> = events(&f).into_iter().filter(|e| e.kind() == Kind::ToolError).collect();
    assert_eq!(errors.len(), 2, "schema violation and invalid JSON");
    let results = events(&f).into_iter().filter(|e| e.kind() == Kind::ToolResult).count();
    assert_eq!(results, 2);
}

#[test]
fn a_call_that_needs_approval_suspends_the_run_and_a_decision_resumes_it() {
    let s = settings(&[]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "wipe", "{}"), finish("tool_calls")]),
            Answer::Chunks(vec![text("wiped"), finish("stop")]),
        ],
    );
    assert_eq!(send(&f, &s, "wipe it"), [End::Suspended]);
    assert!(f.thread.borrow().runs().is_suspended());
    assert!(f.calls.borrow().is_empty(), "nothing ran before the decision");
    let request = events(&f).iter().find(|e| e.kind() == Kind::ConfirmationRequest).unwrap().payload_json();
    assert_eq!(request["severity"], "destructive");
    let rid = request["requestId"].as_str().unwrap().to_owned();
    // The decision arrives (any instance, any time later): the run resumes.
    let path = format!("/instance-ai/confirm/{rid}");
    let decided = serve(
        &mut f.thread.borrow_mut(),
        &s,
        Req::new("POST", &path, actor("alice", &[])).body(&json!({"approved": true})),
        2_000,
    );
    assert_eq!(support::status(&decided), 200);
    assert!(decided.effects.iter().any(|e| matches!(e, Effect::Drive(_))), "the decision resumes the loop");
    assert_eq!(drive_all(&f, &s, decided.effects), [End::Completed]);
    assert_eq!(f.calls.borrow()[0].0, "wipe");
    assert_eq!(finish_of(&f)["status"], "completed");
}

#[test]
fn a_denied_call_is_an_error_the_model_is_told() {
    let s = settings(&[]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "wipe", "{}"), finish("tool_calls")]),
            Answer::Chunks(vec![text("ok, not wiping"), finish("stop")]),
        ],
    );
    send(&f, &s, "wipe it");
    let rid = events(&f).iter().find(|e| e.kind() == Kind::ConfirmationRequest).unwrap().payload_json()["requestId"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/instance-ai/confirm/{rid}");
    let body = json!({"approved": false, "userInput": "not today"});
    let decided =
        serve(&mut f.thread.borrow_mut(), &s, Req::new("POST", &path, actor("alice", &[])).body(&body), 2_000);
    assert_eq!(drive_all(&f, &s, decided.effects), [End::Completed]);
    assert!(f.calls.borrow().is_empty());
    let err = events(&f).into_iter().find(|e| e.kind() == Kind::ToolError).unwrap();
    assert!(err.payload_json()["error"].as_str().unwrap().contains("not today"));
    let told = &f.requests.borrow()[1]["messages"];
    assert!(told.to_string().contains("denied this tool call: not today"));
}

#[test]
fn a_sub_agent_runs_with_only_its_tools_and_answers_its_parent() {
    let s = settings(&[]);
    let spawn = r#"{"role":"researcher","instructions":"find the weather","tools":["weather"]}"#;
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "spawn-agent", spawn), finish("tool_calls")]),
            Answer::Chunks(vec![text("sunny"), finish("stop")]),
            Answer::Chunks(vec![text("the researcher says sunny"), finish("stop")]),
        ],
    );
    assert_eq!(send(&f, &s, "delegate"), [End::Completed]);
    let evs = events(&f);
    let spawned = evs.iter().find(|e| e.kind() == Kind::AgentSpawned).unwrap();
    assert_eq!(spawned.payload_json()["role"], "researcher");
    let child = spawned.agent_id.clone();
    let done = evs.iter().find(|e| e.kind() == Kind::AgentCompleted).unwrap();
    assert_eq!((done.agent_id.as_str(), done.payload_json()["result"].as_str()), (child.as_str(), Some("sunny")));
    // The child saw only its own tool; the parent got the child's answer.
    let child_tools: Vec<_> =
        f.requests.borrow()[1]["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].clone()).collect();
    assert_eq!(child_tools, [json!("weather")]);
    assert!(f.requests.borrow()[2]["messages"].to_string().contains("sunny"));
    let tree = threadline_durable::fold(&evs).tree().unwrap();
    assert_eq!(tree.children.len(), 1);
}

#[test]
fn a_background_sub_agent_outlives_its_run() {
    let s = settings(&[]);
    let spawn = r#"{"role":"watcher","instructions":"watch","tools":[],"background":true}"#;
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "spawn-agent", spawn), finish("tool_calls")]),
            Answer::Chunks(vec![text("started a watcher"), finish("stop")]),
            Answer::Chunks(vec![text("watched"), finish("stop")]),
        ],
    );
    assert_eq!(send(&f, &s, "watch"), [End::Completed]);
    let evs = events(&f);
    let fin = evs.iter().position(|e| e.kind() == Kind::RunFinish).unwrap();
    let done = evs.iter().position(|e| e.kind() == Kind::AgentCompleted).unwrap();
    assert!(done > fin, "the background agent completed after its run finished");
    assert!(f.thread.borrow().runs().background_tasks().is_empty(), "and left the list");
}

#[test]
fn cancel_stops_the_loop_and_nothing_more_is_published() {
    let s = settings(&[]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "weather", "{\"city\":\"A\"}"), finish("tool_calls")]),
            Answer::Chunks(vec![text("never"), finish("stop")]),
        ],
    );
    let outcome = serve(
        &mut f.thread.borrow_mut(),
        &s,
        Req::new("POST", "/instance-ai/chat/t1", actor("alice", &[])).body(&json!({"message": "x"})),
        1_000,
    );
    let Some(Effect::Drive(d)) = outcome.effects.into_iter().find(|e| matches!(e, Effect::Drive(_))) else {
        panic!("no drive")
    };
    let token = CancelToken::default();
    f.cancel_after.set(Some((2, token.clone())));
    // A person cancels while the second step is asked for.
    cancel_run(&f, &s);
    assert_eq!(drive(&f, d, token), End::Stopped);
    assert_eq!(finish_of(&f), json!({"status": "cancelled", "reason": "user_cancelled"}));
    assert!(!kinds(&f).contains(&"text-block"), "nothing after the cancel");
}

#[test]
fn the_step_limit_ends_the_run_with_an_error() {
    let s = settings(&[("AGENT_MAX_STEPS", "2")]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "time", "{}"), finish("tool_calls")]),
            Answer::Chunks(vec![call(0, "time", "{}"), finish("tool_calls")]),
        ],
    );
    assert!(matches!(&send(&f, &s, "loop")[..], [End::Failed(why)] if why.contains("step limit")));
    assert_eq!(finish_of(&f)["status"], "error");
    assert_eq!(f.requests.borrow().len(), 2);
}

#[test]
fn a_provider_error_ends_the_run_with_its_reason() {
    let s = settings(&[]);
    let f = fake(&s, vec![Answer::Status(503)]);
    assert_eq!(send(&f, &s, "hi"), [End::Failed(agent::PROVIDER_UNAVAILABLE.into())]);
    let err = events(&f).into_iter().find(|e| e.kind() == Kind::Error).unwrap();
    assert_eq!(err.payload_json()["statusCode"], 503);
    assert_eq!(finish_of(&f), json!({"status": "error", "reason": agent::PROVIDER_UNAVAILABLE}));
}

#[test]
fn a_huge_tool_answer_is_cut_with_a_marker_the_model_sees() {
    let s = settings(&[("MAX_TOOL_RESULT_BYTES", "10000")]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "time", "{}"), finish("tool_calls")]),
            Answer::Chunks(vec![text("ok"), finish("stop")]),
        ],
    );
    f.tools.borrow_mut()[1].1 = Ok(json!({"data": "y".repeat(3_000_000)}));
    assert_eq!(send(&f, &s, "big"), [End::Completed]);
    let result = events(&f).into_iter().find(|e| e.kind() == Kind::ToolResult).unwrap();
    assert!(result.payload_json().to_string().len() <= 10_100, "{} bytes", result.payload_json().to_string().len());
    assert!(result.payload_json()["result"].as_str().unwrap().contains("[truncated by threadline"));
    let told = f.requests.borrow()[1]["messages"].to_string();
    assert!(told.contains("truncated by threadline"), "the model sees the marker");
}

#[test]
fn a_model_answer_past_its_limit_ends_the_run() {
    let s = settings(&[("MAX_MODEL_BYTES", "20000")]);
    let f = fake(&s, vec![Answer::Chunks((0..100).map(|_| text(&"w".repeat(500))).collect())]);
    assert_eq!(send(&f, &s, "ramble"), [End::Failed(agent::PROVIDER_UNAVAILABLE.into())]);
    let err = events(&f).into_iter().find(|e| e.kind() == Kind::Error).unwrap();
    assert!(err.payload_json()["content"].as_str().unwrap().contains("MAX_MODEL_BYTES"));
}

#[test]
fn a_refused_publish_ends_the_built_in_run() {
    let s = settings(&[]);
    let f = fake(&s, vec![Answer::Chunks(vec![text("hi"), finish("stop")])]);
    let outcome = serve(
        &mut f.thread.borrow_mut(),
        &s,
        Req::new("POST", "/instance-ai/chat/t1", actor("alice", &[])).body(&json!({"message": "x"})),
        1_000,
    );
    let Some(Effect::Drive(d)) = outcome.effects.into_iter().find(|e| matches!(e, Effect::Drive(_))) else {
        panic!("no drive")
    };
    // Storage refuses the loop's next write; the run must not hold the lock.
    f.thread.borrow_mut().journal_mut().store_mut().fail_commits = 1;
    assert_eq!(drive(&f, d, CancelToken::default()), End::Stopped);
    assert!(f.thread.borrow().runs().active_run().is_none());
    assert_eq!(finish_of(&f), json!({"status": "error", "reason": "storage refused the run's events"}));
}

#[test]
fn the_next_queued_message_runs_when_a_run_ends() {
    let s = settings(&[]);
    let f = fake(
        &s,
        vec![Answer::Chunks(vec![text("first"), finish("stop")]), Answer::Chunks(vec![text("second"), finish("stop")])],
    );
    let first = serve(
        &mut f.thread.borrow_mut(),
        &s,
        Req::new("POST", "/instance-ai/chat/t1", actor("alice", &[])).body(&json!({"message": "one"})),
        1_000,
    );
    let queued = serve(
        &mut f.thread.borrow_mut(),
        &s,
        Req::new("POST", "/instance-ai/chat/t1", actor("alice", &[])).body(&json!({"message": "two", "mode": "queue"})),
        1_000,
    );
    assert_eq!(support::status(&queued), 202);
    assert!(queued.effects.is_empty(), "it waits for the run ahead");
    assert_eq!(drive_all(&f, &s, first.effects), [End::Completed, End::Completed]);
    let starts: Vec<_> = events(&f)
        .into_iter()
        .filter(|e| e.kind() == Kind::RunStart)
        .map(|e| e.payload_json()["message"].clone())
        .collect();
    assert_eq!(starts, [json!("one"), json!("two")]);
    // The second run remembered the first.
    assert!(f.requests.borrow()[1]["messages"].to_string().contains("first"));
}

#[test]
fn a_client_tool_call_waits_for_the_clients_result_which_feeds_the_model() {
    let s = settings(&[]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "locate", "{}"), finish("tool_calls")]),
            Answer::Chunks(vec![text("you are in Oslo"), finish("stop")]),
        ],
    );
    let tools = json!([{"name": "locate", "description": "Where the user is", "parameters": {"type": "object", "properties": {}}}]);
    let body = json!({"threadId": "t1", "runId": "r1", "tools": tools,
        "messages": [{"id": "m1", "role": "user", "content": "where am I"}]});
    let sent =
        serve(&mut f.thread.borrow_mut(), &s, Req::new("POST", "/ag-ui", actor("alice", &[])).body(&body), 1_000);
    assert_eq!(support::status(&sent), 200, "{:?}", sent.answer);
    let run = support::json(&sent)["follow"]["runId"].as_str().unwrap().to_owned();
    assert_eq!(drive_all(&f, &s, sent.effects), [End::Suspended]);
    assert!(f.requests.borrow()[0]["tools"].to_string().contains("\"locate\""), "offered to the model");
    assert!(f.calls.borrow().is_empty(), "the server does not run a client's tool");
    let request = events(&f).iter().find(|e| e.kind() == Kind::ConfirmationRequest).unwrap().payload_json();
    assert_eq!(request["inputType"], "client-tool");
    let call = request["toolCallId"].as_str().unwrap().to_owned();
    // The checkpoint keeps the tools: a run resumed after a restart offers them.
    let cp = f.thread.borrow().conversation().checkpoint(&run).unwrap().unwrap();
    assert_eq!(cp.client_tools, tools.as_array().unwrap().clone());
    // The client's tool message: its content is the result.
    let mut answer = body.clone();
    answer["messages"] = json!([{"id": "m1", "role": "user", "content": "where am I"},
        {"id": "tr1", "role": "tool", "toolCallId": call, "content": "Oslo"}]);
    let resumed =
        serve(&mut f.thread.borrow_mut(), &s, Req::new("POST", "/ag-ui", actor("alice", &[])).body(&answer), 2_000);
    assert_eq!(support::status(&resumed), 200, "{:?}", resumed.answer);
    assert_eq!(drive_all(&f, &s, resumed.effects), [End::Completed]);
    let result = events(&f).into_iter().find(|e| e.kind() == Kind::ToolResult).unwrap();
    assert_eq!(result.payload_json()["result"], "Oslo");
    assert!(f.requests.borrow()[1]["messages"].to_string().contains("Oslo"), "the model is told");
    // A tool name the server already uses is refused.
    let mut clash = body.clone();
    clash["tools"] = json!([{"name": "wipe", "description": "mine"}]);
    clash["messages"][0]["id"] = "m2".into();
    let refused =
        serve(&mut f.thread.borrow_mut(), &s, Req::new("POST", "/ag-ui", actor("alice", &[])).body(&clash), 3_000);
    assert_eq!(support::code(&refused), "invalid_client_tools");
}

// ---- MCP servers -------------------------------------------------------

fn mcp_settings(extra: &[(&str, &str)]) -> Settings {
    let servers = json!([
        {"name": "mcp-a", "url": "http://mcp-a/mcp"},
        {"name": "mcp-b", "url": "http://mcp-b/mcp", "allow": ["search"]},
    ])
    .to_string();
    let mut vars: Vec<(&str, &str)> = vec![("MCP_SERVERS", &servers)];
    vars.extend_from_slice(extra);
    settings(&vars)
}

fn offered(f: &Rc<Fake>, request: usize) -> Vec<String> {
    f.requests.borrow()[request]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

fn methods(f: &Rc<Fake>, method: &str) -> usize {
    f.mcp.borrow().requests.iter().filter(|(_, m, _)| m == method).count()
}

#[test]
fn mcp_tools_are_discovered_named_apart_and_called() {
    let s = mcp_settings(&[]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "mcp-b__search", r#"{"q":"milk"}"#), finish("tool_calls")]),
            Answer::Chunks(vec![text("found"), finish("stop")]),
        ],
    );
    assert_eq!(send(&f, &s, "find milk"), [End::Completed]);
    let tools = offered(&f, 0);
    for name in ["mcp-a__search", "mcp-a__delete", "mcp-a__chart", "mcp-a__fail", "mcp-b__search"] {
        assert!(tools.contains(&name.to_owned()), "{name} in {tools:?}");
    }
    assert!(!tools.contains(&"mcp-b__delete".to_owned()), "mcp-b allows `search` only");
    assert!(tools.contains(&"weather".to_owned()), "the HTTP tools stay");
    let description = f.requests.borrow()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp-a__search")
        .unwrap()["function"]["description"]
        .clone();
    assert_eq!(description, "search notes (MCP server `mcp-a`)");
    // The call: on mcp-b, in its session, with the server's name in its events.
    let (server, _, session) = f.mcp.borrow().requests.iter().find(|(_, m, _)| m == "tools/call").cloned().unwrap();
    assert_eq!((server.as_str(), session.as_deref()), ("mcp-b", Some("mcp-b-s2")));
    let call = events(&f).into_iter().find(|e| e.kind() == Kind::ToolCall).unwrap().payload_json();
    assert_eq!((call["server"].as_str(), call["toolKind"].as_str()), (Some("mcp-b"), Some("read")));
    let start = events(&f).into_iter().find(|e| e.kind() == Kind::ToolInputStart).unwrap().payload_json();
    assert_eq!(start["server"], "mcp-b");
    let result = events(&f).into_iter().find(|e| e.kind() == Kind::ToolResult).unwrap().payload_json();
    assert_eq!(result["result"]["structuredContent"], json!({"hits": 2}));
    assert_eq!(result["result"]["content"][0]["text"], "found \"milk\"");
    let told = f.requests.borrow()[1]["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap()
        ["content"]
        .clone();
    assert_eq!(told, "found \"milk\"\nStructured result: {\"hits\":2}");
    // Two pages of tools/list per server; the next run uses the cache.
    assert_eq!(methods(&f, "tools/list"), 4, "two pages from each server");
}

#[test]
fn the_tool_list_is_cached_until_its_ttl_or_a_change() {
    let s = mcp_settings(&[]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "mcp-a__search", "{}"), finish("tool_calls")]),
            Answer::Chunks(vec![text("a"), finish("stop")]),
            Answer::Chunks(vec![text("b"), finish("stop")]),
            Answer::Chunks(vec![text("c"), finish("stop")]),
        ],
    );
    f.mcp.borrow_mut().sse = true;
    f.mcp.borrow_mut().changed = true;
    assert_eq!(send(&f, &s, "one"), [End::Completed]);
    let listed = methods(&f, "tools/list");
    assert_eq!(methods(&f, "initialize"), 2, "one session per server");
    // The call's SSE answer said the list changed: the next run reads it again.
    assert_eq!(send(&f, &s, "two"), [End::Completed]);
    assert!(methods(&f, "tools/list") > listed, "list_changed refreshes the list");
    let listed = methods(&f, "tools/list");
    assert_eq!(send(&f, &s, "three"), [End::Completed]);
    assert_eq!(methods(&f, "tools/list"), listed, "a fresh list is used again");
    assert_eq!(methods(&f, "initialize"), 2, "sessions are kept");
}

#[test]
fn a_destructive_mcp_tool_asks_first_unless_the_policy_says_otherwise() {
    let s = mcp_settings(&[]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "mcp-a__delete", r#"{"q":"n1"}"#), finish("tool_calls")]),
            Answer::Chunks(vec![text("done"), finish("stop")]),
        ],
    );
    assert_eq!(send(&f, &s, "delete it"), [End::Suspended]);
    assert_eq!(methods(&f, "tools/call"), 0, "nothing ran before the decision");
    let request = events(&f).iter().find(|e| e.kind() == Kind::ConfirmationRequest).unwrap().payload_json();
    assert_eq!((request["server"].as_str(), request["severity"].as_str()), (Some("mcp-a"), Some("destructive")));
    assert!(request["message"].as_str().unwrap().contains("MCP server `mcp-a`"));
    let rid = request["requestId"].as_str().unwrap().to_owned();
    let decided = serve(
        &mut f.thread.borrow_mut(),
        &s,
        Req::new("POST", &format!("/instance-ai/confirm/{rid}"), actor("alice", &[])).body(&json!({"approved": true})),
        2_000,
    );
    assert_eq!(drive_all(&f, &s, decided.effects), [End::Completed]);
    assert_eq!(methods(&f, "tools/call"), 1, "it ran once, approved");
    let result = events(&f).into_iter().find(|e| e.kind() == Kind::ToolResult).unwrap().payload_json();
    assert_eq!(result["result"], "deleted");

    let policy = json!({"mcp-a__delete": {"required": false}}).to_string();
    let s = mcp_settings(&[("APPROVAL_POLICY", &policy)]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "mcp-a__delete", "{}"), finish("tool_calls")]),
            Answer::Chunks(vec![text("done"), finish("stop")]),
        ],
    );
    assert_eq!(send(&f, &s, "delete it"), [End::Completed], "the policy waives it by name");
}

#[test]
fn an_mcp_image_is_a_file_of_the_thread_the_model_sees() {
    let s = mcp_settings(&[]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "mcp-a__chart", "{}"), finish("tool_calls")]),
            Answer::Chunks(vec![text("a chart"), finish("stop")]),
        ],
    );
    assert_eq!(send(&f, &s, "draw"), [End::Completed]);
    let result = events(&f).into_iter().find(|e| e.kind() == Kind::ToolResult).unwrap().payload_json();
    let image = &result["result"]["content"][0];
    assert_eq!(image["mediaType"], "image/png");
    let file_id = image["fileId"].as_str().unwrap();
    assert!(image["url"].as_str().unwrap().ends_with(file_id));
    assert_eq!(f.thread.borrow().journal().store().file_count().unwrap(), 1, "kept as a file of the thread");
    let next = f.requests.borrow()[1]["messages"].clone();
    let shown = next.as_array().unwrap().last().unwrap().clone();
    assert_eq!(shown["role"], "user");
    assert!(shown["content"][1]["image_url"]["url"].as_str().unwrap().starts_with("data:image/png;base64,iVBOR"));
    // A model that takes no images is told of it in text only.
    let models = json!({"default": "m", "models": {"m": {"model": "m", "input": ["text"]}}}).to_string();
    let s = mcp_settings(&[("LLM_MODELS", &models)]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "mcp-a__chart", "{}"), finish("tool_calls")]),
            Answer::Chunks(vec![text("ok"), finish("stop")]),
        ],
    );
    assert_eq!(send(&f, &s, "draw"), [End::Completed]);
    let next = f.requests.borrow()[1]["messages"].clone();
    assert_eq!(next.as_array().unwrap().last().unwrap()["role"], "tool");
}

#[test]
fn mcp_failures_are_tool_errors_and_a_server_down_leaves_its_tools_out() {
    // isError, then a malformed answer: tool errors the model reacts to.
    let s = mcp_settings(&[]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "mcp-a__fail", "{}"), finish("tool_calls")]),
            Answer::Chunks(vec![call(0, "mcp-a__search", "{}"), finish("tool_calls")]),
            Answer::Chunks(vec![text("sorry"), finish("stop")]),
        ],
    );
    f.mcp.borrow_mut().up.retain(|s| s == "mcp-a");
    // mcp-b is down: its tools are left out, and the run says so.
    assert_eq!(send(&f, &s, "try"), [End::Completed]);
    let errors: Vec<Value> =
        events(&f).into_iter().filter(|e| e.kind() == Kind::ToolError).map(|e| e.payload_json()).collect();
    assert_eq!(errors[0]["error"], "the store is offline");
    assert!(!offered(&f, 0).iter().any(|t| t.starts_with("mcp-b")));
    // The status that said mcp-b is unavailable went out live (it is not
    // stored); the run still completed with mcp-a's tools.
    assert_eq!(finish_of(&f)["status"], "completed");

    let f2 = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "mcp-a__search", "{}"), finish("tool_calls")]),
            Answer::Chunks(vec![text("x"), finish("stop")]),
        ],
    );
    f2.mcp.borrow_mut().broken = true;
    assert_eq!(send(&f2, &s, "try"), [End::Completed]);
    let error = events(&f2).into_iter().find(|e| e.kind() == Kind::ToolError).unwrap().payload_json();
    let msg = error["error"].as_str().unwrap();
    assert!(msg.contains("mcp-a") && msg.contains("not valid JSON-RPC"), "{msg}");
}

#[test]
fn a_session_the_server_forgot_is_initialized_again() {
    let s = mcp_settings(&[]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![text("first"), finish("stop")]),
            Answer::Chunks(vec![call(0, "mcp-a__search", "{}"), finish("tool_calls")]),
            Answer::Chunks(vec![text("second"), finish("stop")]),
        ],
    );
    assert_eq!(send(&f, &s, "one"), [End::Completed]);
    f.mcp.borrow_mut().sessions.clear();
    assert_eq!(send(&f, &s, "two"), [End::Completed]);
    assert!(events(&f).iter().any(|e| e.kind() == Kind::ToolResult), "the call succeeded");
    assert_eq!(methods(&f, "initialize"), 3, "mcp-a initialized again after its 404");
}

#[test]
fn a_runs_spans_hang_under_the_request_that_sent_it_with_genai_attributes() {
    use threadline_durable::trace::{Attr, Parent};
    let s = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "wipe", "{}"), finish("tool_calls")]),
            Answer::Chunks(vec![text("wiped"), finish("stop")]),
        ],
    );
    let sent_by = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let outcome = serve(
        &mut f.thread.borrow_mut(),
        &s,
        Req::new("POST", "/instance-ai/chat/t1", actor("alice", &[]))
            .header("traceparent", sent_by)
            .body(&json!({"message": "wipe it"})),
        1_000,
    );
    assert_eq!(drive_all(&f, &s, outcome.effects), [End::Suspended]);
    let rid = events(&f).iter().find(|e| e.kind() == Kind::ConfirmationRequest).unwrap().payload_json()["requestId"]
        .as_str()
        .unwrap()
        .to_owned();
    let decided = serve(
        &mut f.thread.borrow_mut(),
        &s,
        Req::new("POST", &format!("/instance-ai/confirm/{rid}"), actor("alice", &[])).body(&json!({"approved": true})),
        2_000,
    );
    assert_eq!(drive_all(&f, &s, decided.effects), [End::Completed]);
    let spans = f.spans.borrow();
    let mut names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["await_decision wipe", "chat fake-model", "chat fake-model", "execute_tool wipe", "invoke_agent threadline"]
    );
    let request = Parent::parse(sent_by).unwrap();
    let named = |n: &str| spans.iter().find(|s| s.name == n).unwrap();
    let run = spans.last().unwrap();
    assert_eq!(run.name, "invoke_agent threadline", "the run's span is recorded when it ends");
    assert_eq!(run.parent, Some(request.span), "the run hangs under the request that sent it");
    for span in spans.iter() {
        assert_eq!(span.trace, request.trace, "{}", span.name);
        if span.id != run.id {
            assert_eq!(span.parent, Some(run.id), "{} hangs under the run", span.name);
        }
    }
    let attr = |span: &threadline_durable::trace::Span, key: &str| {
        span.attrs.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone())
    };
    let chat = named("chat fake-model");
    assert_eq!(attr(chat, "gen_ai.operation.name"), Some(Attr::Str("chat".into())));
    assert_eq!(attr(chat, "gen_ai.request.model"), Some(Attr::Str("fake-model".into())));
    assert_eq!(attr(chat, "gen_ai.usage.input_tokens"), Some(Attr::Int(3)));
    assert_eq!(attr(chat, "gen_ai.usage.output_tokens"), Some(Attr::Int(2)));
    assert_eq!(attr(chat, "gen_ai.response.finish_reasons"), Some(Attr::Strs(vec!["tool_calls".into()])));
    let tool = named("execute_tool wipe");
    assert_eq!(attr(tool, "gen_ai.tool.name"), Some(Attr::Str("wipe".into())));
    let call_id = events(&f).iter().find(|e| e.kind() == Kind::ToolCall).unwrap().payload_json()["toolCallId"].clone();
    assert_eq!(attr(tool, "gen_ai.tool.call.id"), Some(Attr::Str(call_id.as_str().unwrap().into())));
    assert_eq!(attr(named("await_decision wipe"), "threadline.confirmation.state"), Some(Attr::Str("approved".into())));
    assert_eq!(attr(run, "gen_ai.usage.input_tokens"), Some(Attr::Int(6)), "the run's usage sums its calls");
    // One log line for the run, naming its trace.
    let logs = f.logs.borrow();
    assert_eq!(logs.len(), 1);
    let line: Value = serde_json::from_str(&logs[0]).unwrap();
    assert_eq!(line["msg"], "run");
    assert_eq!(line["traceId"], "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(line["status"], "completed");
}

#[test]
fn without_an_endpoint_no_span_is_recorded_but_the_run_is_logged() {
    let s = settings(&[]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "weather", r#"{"city":"Oslo"}"#), finish("tool_calls")]),
            Answer::Chunks(vec![text("sunny"), finish("stop")]),
        ],
    );
    assert_eq!(send(&f, &s, "weather?"), [End::Completed]);
    assert!(f.spans.borrow().is_empty());
    assert_eq!(f.logs.borrow().len(), 1);
}

/// What each model call cost, as the thread delivered it: `(actor, input,
/// output, estimated)` in order.
fn charged(f: &Rc<Fake>) -> Vec<(String, u64, u64, bool)> {
    f.charges
        .borrow()
        .iter()
        .map(|c| (c.actor.clone(), c.spend.input_tokens, c.spend.output_tokens, c.estimated))
        .collect()
}

#[test]
fn every_model_call_of_a_turn_is_charged_to_its_sender_sub_agents_included() {
    let s = settings(&[]);
    let spawn = r#"{"role":"researcher","instructions":"find the weather","tools":["weather"]}"#;
    let big = json!({"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 6000, "completion_tokens": 40}});
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "spawn-agent", spawn), finish("tool_calls")]),
            Answer::Chunks(vec![text("sunny"), big]),
            Answer::Chunks(vec![text("the researcher says sunny"), finish("stop")]),
        ],
    );
    assert_eq!(send(&f, &s, "delegate"), [End::Completed]);
    let alice = |i, o| ("alice".to_owned(), i, o, false);
    assert_eq!(charged(&f), [alice(3, 2), alice(6000, 40), alice(3, 2)]);
    let ids: std::collections::BTreeSet<_> = f.charges.borrow().iter().map(|c| c.id.clone()).collect();
    assert_eq!(ids.len(), 3, "each call its own charge");
    assert!(f.charges.borrow().iter().all(|c| !c.held && c.run_id == f.charges.borrow()[0].run_id));
}

#[test]
fn a_background_sub_agent_is_charged_to_the_turn_that_spawned_it_after_its_run_ended() {
    let s = settings(&[]);
    let spawn = r#"{"role":"watcher","instructions":"watch","tools":[],"background":true}"#;
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "spawn-agent", spawn), finish("tool_calls")]),
            Answer::Chunks(vec![text("started a watcher"), finish("stop")]),
            Answer::Chunks(vec![text("watched"), finish("stop")]),
        ],
    );
    assert_eq!(send(&f, &s, "watch"), [End::Completed]);
    assert_eq!(charged(&f).len(), 3);
    assert!(charged(&f).iter().all(|(actor, ..)| actor == "alice"));
}

#[test]
fn a_step_cut_by_length_is_charged() {
    let s = settings(&[]);
    let f = fake(&s, vec![Answer::Chunks(vec![text("and so on and"), finish("length")])]);
    assert!(matches!(&send(&f, &s, "ramble")[..], [End::Failed(_)]));
    assert_eq!(charged(&f), [("alice".to_owned(), 3, 2, false)]);
}

#[test]
fn a_call_cut_before_its_provider_reported_is_charged_its_request_and_what_it_streamed() {
    let s = settings(&[("MAX_MODEL_BYTES", "20000")]);
    let f = fake(&s, vec![Answer::Chunks((0..100).map(|_| text(&"w".repeat(500))).collect())]);
    assert_eq!(send(&f, &s, "ramble"), [End::Failed(agent::PROVIDER_UNAVAILABLE.into())]);
    let [(actor, input, output, estimated)] = &charged(&f)[..] else { panic!("{:?}", charged(&f)) };
    assert_eq!(actor, "alice");
    assert!(*estimated);
    let request = f.requests.borrow()[0].to_string().len() as u64;
    assert!(*input >= request / 4, "the request counted: {input} tokens for {request} bytes");
    assert!(*output >= 20_000 / 3 && *output < 30_000 / 3, "what streamed counted: {output}");
}

#[test]
fn a_cancelled_run_is_charged_for_the_call_it_made() {
    let s = settings(&[]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "weather", "{\"city\":\"A\"}"), finish("tool_calls")]),
            Answer::Chunks(vec![text("never"), finish("stop")]),
        ],
    );
    let outcome = serve(
        &mut f.thread.borrow_mut(),
        &s,
        Req::new("POST", "/instance-ai/chat/t1", actor("alice", &[])).body(&json!({"message": "x"})),
        1_000,
    );
    let Some(Effect::Drive(d)) = outcome.effects.into_iter().find(|e| matches!(e, Effect::Drive(_))) else {
        panic!("no drive")
    };
    let token = CancelToken::default();
    f.cancel_after.set(Some((2, token.clone())));
    assert_eq!(drive(&f, d, token), End::Stopped);
    // The first call answered; the second was made, then cancelled.
    let got = charged(&f);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0], ("alice".to_owned(), 3, 2, false));
    assert!(got[1].3 && got[1].1 > 0 && got[1].2 == 0, "{:?}", got[1]);
}

#[test]
fn a_sub_agent_gets_at_most_its_agents_tools() {
    let agents = r#"{"support":{"label":"Support","tools":["weather"]}}"#;
    let s = settings(&[("AGENTS", agents)]);
    let spawn = r#"{"role":"r","instructions":"go","tools":["time"]}"#;
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "spawn-agent", spawn), finish("tool_calls")]),
            Answer::Chunks(vec![text("I may not"), finish("stop")]),
        ],
    );
    let outcome = serve(
        &mut f.thread.borrow_mut(),
        &s,
        Req::new("POST", "/instance-ai/chat/t1", actor("alice", &[]))
            .body(&json!({"message": "x", "agent": "support"})),
        1_000,
    );
    assert_eq!(support::status(&outcome), 200, "{:?}", outcome.answer);
    assert_eq!(drive_all(&f, &s, outcome.effects), [End::Completed]);
    let err = events(&f).into_iter().find(|e| e.kind() == Kind::ToolError).expect("the spawn is refused");
    assert!(
        err.payload_json()["error"].as_str().unwrap().contains("`time` is not one of this agent's tools"),
        "{err:?}"
    );
    assert!(!events(&f).iter().any(|e| e.kind() == Kind::AgentSpawned), "no sub-agent ran");
    assert!(f.calls.borrow().is_empty());
}

// ---------------------------------------------------------------------------
// Long conversations: the context within the model's window.

/// A catalog of one model with a `window`-token context and a 200-token
/// answer; tool results never age (unless `extra` says).
fn windowed(window: u64, extra: &[(&str, &str)]) -> Settings {
    let models = json!({"default": "small", "models": {"small": {"model": "m", "contextWindow": window, "maxOutputTokens": 200}}}).to_string();
    let mut vars: Vec<(&str, &str)> = extra.to_vec();
    vars.push(("AGENT_TOOL_RESULT_AGE_TURNS", "0"));
    let leaked: &'static str = Box::leak(models.into_boxed_str());
    vars.push(("LLM_MODELS", leaked));
    settings(&vars)
}

fn unmetered(reason: &str) -> Value {
    json!({"choices": [{"delta": {}, "finish_reason": reason}]})
}

/// What the fake provider counts a request as: four bytes of its messages
/// and tools a token, and the answer's room it asks for.
fn provider_tokens(request: &Value) -> u64 {
    ((request["messages"].to_string().len() + request["tools"].to_string().len()) / 4) as u64
        + request["max_tokens"].as_u64().unwrap_or(0)
}

fn content(m: &Value) -> String {
    m["content"].as_str().map(str::to_owned).unwrap_or_else(|| m["content"].to_string())
}

/// The model's requests that were no summary step's.
fn answers_asked(f: &Rc<Fake>) -> Vec<Value> {
    f.requests.borrow().iter().filter(|r| !is_summary(r)).cloned().collect()
}

fn compactions(f: &Rc<Fake>) -> Vec<Value> {
    events(f).iter().filter(|e| e.kind() == Kind::ContextCompacted).map(Event::payload_json).collect()
}

/// A message of about 400 characters that names its turn.
fn long_message(i: usize) -> String {
    format!("message {i}: {}", "words of a long conversation ".repeat(14))
}

#[test]
fn the_model_never_receives_more_than_its_window_and_later_turns_start_from_the_summary() {
    let s = windowed(2_000, &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")]);
    let f = fake(&s, (0..30).map(|_| Answer::Auto).collect());
    for i in 0..30 {
        assert_eq!(send(&f, &s, &long_message(i)), [End::Completed], "turn {i}");
    }
    for r in f.requests.borrow().iter() {
        assert!(provider_tokens(r) <= 2_000, "a request of {} tokens", provider_tokens(r));
    }
    let done = compactions(&f);
    assert!(done.len() >= 3, "a long conversation compacts again and again: {}", done.len());
    // Each summary folds the one before it in.
    assert!(done[1]["summary"].as_str().unwrap().contains("first=message 0"), "{}", done[1]);
    // The last turn: the agent's instructions first, then the summary, then
    // the turns after it, then the message.
    let asked = answers_asked(&f);
    let last = asked.last().unwrap()["messages"].as_array().unwrap().clone();
    assert_eq!(last[0]["role"], "system");
    assert!(content(&last[0]).starts_with("You are a helpful assistant"), "the instructions stay first");
    assert!(content(&last[1]).starts_with("Summary of the earlier conversation"), "{}", last[1]);
    assert!(content(&last[1]).contains("SUMMARY first=message 0"), "the summary reaches back to the start");
    assert!(content(last.last().unwrap()).starts_with("message 29"));
    // Nothing the person sees is removed.
    let (turns, total) = f.thread.borrow().conversation().turns(100, 0).unwrap();
    assert_eq!((turns.len(), total), (30, 30));
    // The summary steps are charged to the run like any call.
    // (every answer of the fake says 10 tokens: 30 answers and the summaries).
    let usage = f.thread.borrow().conversation().usage().unwrap();
    assert_eq!(usage["total"]["outputTokens"], (30 + done.len()) * 10, "{usage}");
    // Each summary step is a span of its own beside the run's chat spans.
    let spans = f.spans.borrow();
    assert_eq!(spans.iter().filter(|s| s.name == "compact m").count(), done.len());
    assert_eq!(spans.iter().filter(|s| s.name == "chat m").count(), 30);
}

#[test]
fn a_run_compacts_its_own_steps_and_never_parts_a_call_from_its_result() {
    let s = windowed(2_500, &[]);
    let f = fake(
        &s,
        vec![
            // (No usage reported: the estimate stands as it is.)
            Answer::Chunks(vec![call(0, "weather", "{\"city\":\"A\"}"), unmetered("tool_calls")]),
            Answer::Chunks(vec![call(0, "weather", "{\"city\":\"B\"}"), unmetered("tool_calls")]),
            Answer::Chunks(vec![call(0, "weather", "{\"city\":\"C\"}"), unmetered("tool_calls")]),
            Answer::Chunks(vec![text("done"), unmetered("stop")]),
        ],
    );
    f.tools.borrow_mut()[0].1 = Ok(json!({"report": "cloudy and mild ".repeat(190)}));
    assert_eq!(send(&f, &s, "three cities"), [End::Completed]);
    let done = compactions(&f);
    assert!(!done.is_empty(), "the run's own results passed the threshold");
    let run = events(&f)[0].run_id.clone();
    assert_eq!(done[0]["through"], run.as_str(), "it folds the run's own steps");
    assert!(done[0]["calls"].as_u64().unwrap() >= 1);
    for r in answers_asked(&f) {
        let messages = r["messages"].as_array().unwrap();
        assert!(provider_tokens(&r) <= 2_500, "{}", provider_tokens(&r));
        assert!(messages.iter().any(|m| content(m) == "three cities"), "the run's message stays");
        for (i, m) in messages.iter().enumerate().filter(|(_, m)| m["role"] == "tool") {
            let id = &m["tool_call_id"];
            let called = messages[..i]
                .iter()
                .any(|a| a["tool_calls"].as_array().is_some_and(|calls| calls.iter().any(|c| &c["id"] == id)));
            assert!(called, "result {id} was sent without its call");
        }
    }
    assert_eq!(finish_of(&f)["status"], "completed");
}

/// Sends long messages until a run's loop dies in a summary step (its
/// token is cancelled there); returns that run's id.
fn until_a_summary_dies(f: &Rc<Fake>, s: &Settings) -> String {
    let token = CancelToken::default();
    *f.cancel_on_summary.borrow_mut() = Some(token.clone());
    for i in 0..20 {
        f.answers.borrow_mut().extend((0..2).map(|_| Answer::Auto));
        let outcome = serve(
            &mut f.thread.borrow_mut(),
            s,
            Req::new("POST", "/instance-ai/chat/t1", actor("alice", &[])).body(&json!({"message": long_message(i)})),
            1_000,
        );
        let Some(Effect::Drive(d)) = outcome.effects.into_iter().find(|e| matches!(e, Effect::Drive(_))) else {
            panic!("no drive")
        };
        let run = d.job.run_id.clone();
        if drive(f, d, token.clone()) == End::Stopped {
            assert!(is_summary(f.requests.borrow().last().unwrap()), "it died in its summary step");
            return run;
        }
    }
    panic!("no run compacted")
}

/// The loop dies while the summary is being written (the instance went
/// away): the run resumes from its checkpoint after the restart and
/// compacts once.
#[test]
fn a_restart_mid_compaction_compacts_once() {
    let s = windowed(2_000, &[]);
    let f = fake(&s, vec![]);
    let run = until_a_summary_dies(&f, &s);
    let requests = f.requests.borrow().len();
    assert!(compactions(&f).iter().all(|c| c["through"] != run.as_str()), "nothing of it was stored");
    let before = compactions(&f).len();
    // The object restarts: the run is found open and resumed.
    let store = std::mem::take(f.thread.borrow_mut().journal_mut().store_mut());
    let mut after: T = threadline_durable::Thread::load(store, s.thread.clone(), 5_000).unwrap();
    after.journal_mut().set_thread_id("t1");
    let effects = after.agent_loop().recovery(&s, 5_000).unwrap();
    *f.thread.borrow_mut() = after;
    f.answers.borrow_mut().extend((0..4).map(|_| Answer::Auto));
    assert_eq!(drive_all(&f, &s, effects), [End::Completed]);
    assert_eq!(compactions(&f).len(), before + 1, "compacted once");
    let summaries = f.requests.borrow().iter().skip(requests).filter(|r| is_summary(r)).count();
    assert_eq!(summaries, 1, "the summary was asked for again, once");
    assert_eq!(finish_of(&f)["status"], "completed");
}

#[test]
fn cancel_during_compaction_stops_the_run_and_keeps_nothing_of_it() {
    let s = windowed(2_000, &[]);
    let f = fake(&s, vec![]);
    let run = until_a_summary_dies(&f, &s);
    cancel_run(&f, &s);
    assert!(compactions(&f).iter().all(|c| c["through"] != run.as_str()));
    let ours: Vec<Event> = events(&f).into_iter().filter(|e| e.run_id == run).collect();
    assert!(ours.iter().all(|e| e.kind() != Kind::ContextCompacted));
    assert_eq!(ours.last().unwrap().payload_json(), json!({"status": "cancelled", "reason": "user_cancelled"}));
}

#[test]
fn a_summary_that_fails_leaves_the_run_going_and_says_why() {
    let s = windowed(2_000, &[]);
    let f = fake(&s, (0..12).map(|_| Answer::Auto).collect());
    f.summary_fails.set(Some(500));
    for i in 0..12 {
        assert_eq!(send(&f, &s, &long_message(i)), [End::Completed], "turn {i}");
    }
    assert!(compactions(&f).is_empty());
    let failed: Vec<Value> =
        events(&f).iter().filter(|e| e.kind() == Kind::ContextCompactionFailed).map(Event::payload_json).collect();
    assert!(!failed.is_empty());
    assert!(
        failed[0]["reason"].as_str().unwrap().contains("summary step failed: The model provider answered HTTP 500"),
        "{}",
        failed[0]
    );
    assert!(!kinds(&f).contains(&"error"), "a quiet step's failure is no error of the run");
    // Over the window, the oldest turns were left out: no call passed it.
    assert!(failed.iter().any(|f| f["dropped"].as_u64().unwrap() > 0));
    for r in f.requests.borrow().iter() {
        assert!(provider_tokens(r) <= 2_000);
    }
}

#[test]
fn a_window_too_small_for_the_prompt_and_the_message_refuses_the_send() {
    let s = windowed(600, &[]);
    let f = fake(&s, vec![]);
    let outcome = serve(
        &mut f.thread.borrow_mut(),
        &s,
        Req::new("POST", "/instance-ai/chat/t1", actor("alice", &[])).body(&json!({"message": "x".repeat(2_000)})),
        1_000,
    );
    assert_eq!(support::status(&outcome), 400);
    assert_eq!(support::code(&outcome), "context_too_small");
    assert!(events(&f).is_empty(), "nothing was stored");
    assert!(f.requests.borrow().is_empty());
}

#[test]
fn large_tool_results_age_in_blocks_and_the_prefix_stays_stable_between_runs() {
    let s = windowed(100_000, &[("AGENT_TOOL_RESULT_AGE_TURNS", "2")]);
    let f = fake(&s, vec![]);
    f.tools.borrow_mut()[0].1 = Ok(json!({"report": "sunny ".repeat(600)}));
    let mut firsts = Vec::new();
    for i in 0..8 {
        f.answers.borrow_mut().extend([
            Answer::Chunks(vec![call(0, "weather", &format!("{{\"city\":\"C{i}\"}}")), finish("tool_calls")]),
            Answer::Chunks(vec![text(&format!("report {i}")), finish("stop")]),
        ]);
        let at = f.requests.borrow().len();
        send(&f, &s, &format!("weather {i}"));
        firsts.push(f.requests.borrow()[at]["messages"].as_array().unwrap().clone());
    }
    // The eighth run remembers seven turns: the oldest four (two blocks of
    // two) are stubs, the newest three whole.
    let memory: Vec<String> = firsts[7].iter().filter(|m| m["role"] == "assistant").map(content).collect();
    assert_eq!(memory.len(), 7);
    let stubs =
        memory.iter().filter(|m| m.contains("left out here: the whole result is in the thread's history")).count();
    assert_eq!(stubs, 4, "{memory:#?}");
    assert!(memory[6].contains("sunny sunny"), "the newest is whole");
    // Within a block, what was sent before is sent again unchanged: the
    // seventh run's request, but its own message, begins the eighth's.
    let (a, b) = (&firsts[6], &firsts[7]);
    assert_eq!(b[..a.len() - 1], a[..a.len() - 1], "a stable prefix for the provider's cache");
}

#[test]
fn an_edit_before_a_compaction_remembers_its_own_path_not_the_summary() {
    let s = windowed(2_000, &[]);
    let f = fake(&s, (0..30).map(|_| Answer::Auto).collect());
    for i in 0..10 {
        send(&f, &s, &long_message(i));
    }
    assert!(!compactions(&f).is_empty());
    let (turns, _) = f.thread.borrow().conversation().turns(100, 0).unwrap();
    let second = turns[1].run.message_id.clone();
    let outcome = serve(
        &mut f.thread.borrow_mut(),
        &s,
        Req::new("POST", "/instance-ai/chat/t1", actor("alice", &[]))
            .body(&json!({"message": "message 1, edited", "editOf": second})),
        1_000,
    );
    assert_eq!(support::status(&outcome), 200, "{:?}", outcome.answer);
    drive_all(&f, &s, outcome.effects);
    let asked = answers_asked(&f);
    let first = asked.last().unwrap()["messages"].as_array().unwrap();
    assert!(first.iter().all(|m| !content(m).starts_with("Summary of the earlier")), "no summary of another path");
    assert!(content(&first[1]).starts_with("message 0"), "its path: the first turn, then the edit");
    assert_eq!(content(first.last().unwrap()), "message 1, edited");
}

#[test]
fn a_person_asks_for_a_compaction_between_runs() {
    let s = windowed(100_000, &[]);
    let f = fake(&s, (0..3).map(|_| Answer::Auto).collect());
    for i in 0..3 {
        send(&f, &s, &format!("turn {i}"));
    }
    let compact = |now| {
        serve(
            &mut f.thread.borrow_mut(),
            &s,
            Req::new("POST", "/instance-ai/threads/t1/compact", actor("alice", &[])),
            now,
        )
    };
    let asked = compact(2_000);
    assert_eq!(support::status(&asked), 202, "{:?}", asked.answer);
    assert_eq!(support::json(&asked)["turns"], 3);
    // One at a time: a second waits for the first.
    let again = compact(2_001);
    assert_eq!((support::status(&again), support::code(&again)), (409, "compaction_active".into()));
    // Nobody else's thread.
    let other = serve(
        &mut f.thread.borrow_mut(),
        &s,
        Req::new("POST", "/instance-ai/threads/t1/compact", actor("mallory", &[])),
        2_002,
    );
    assert_eq!(support::status(&other), 404);
    drive_all(&f, &s, asked.effects);
    let done = compactions(&f);
    assert_eq!(done.len(), 1);
    assert_eq!((done[0]["requested"].as_bool(), done[0]["messages"].as_u64()), (Some(true), Some(6)));
    let leaf = f.thread.borrow().conversation().leaf().unwrap().unwrap();
    assert_eq!(done[0]["through"], leaf.as_str(), "it runs through the conversation's last turn");
    // Its event is the leaf run's, after its finish; nothing else was published.
    let last = events(&f).pop().unwrap();
    assert_eq!((last.kind(), last.run_id.as_str()), (Kind::ContextCompacted, leaf.as_str()));
    // Nothing left to fold; the next turn starts from the summary alone.
    assert_eq!(support::json(&compact(3_000))["compacting"], false);
    f.answers.borrow_mut().push_back(Answer::Auto);
    send(&f, &s, "turn 3");
    let first = answers_asked(&f).last().unwrap()["messages"].as_array().unwrap().clone();
    assert_eq!(first.iter().map(|m| m["role"].as_str().unwrap()).collect::<Vec<_>>(), ["system", "system", "user"]);
    assert!(content(&first[1]).contains("SUMMARY first=turn 0 last=turn 2 n=3"), "{}", content(&first[1]));
    // While a run holds the thread, it compacts its own context.
    f.answers.borrow_mut().push_back(Answer::Chunks(vec![call(0, "wipe", "{}"), finish("tool_calls")]));
    send(&f, &s, "wipe it");
    let busy = compact(4_000);
    assert_eq!((support::status(&busy), support::code(&busy)), (409, "run_active".into()));
}

#[test]
fn a_tool_result_larger_than_the_window_is_cut_to_fit_and_the_run_completes() {
    let s = windowed(4_000, &[]);
    let f = fake(
        &s,
        vec![
            Answer::Chunks(vec![call(0, "weather", "{\"city\":\"A\"}"), unmetered("tool_calls")]),
            Answer::Chunks(vec![text("done"), unmetered("stop")]),
        ],
    );
    f.tools.borrow_mut()[0].1 = Ok(json!({"report": "y".repeat(100_000)}));
    assert_eq!(send(&f, &s, "a big one"), [End::Completed]);
    let last = answers_asked(&f).pop().unwrap();
    assert!(provider_tokens(&last) <= 4_000, "{}", provider_tokens(&last));
    let result = last["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").map(content).unwrap();
    assert!(result.ends_with(threadline_durable::agent::context::CUT_TO_FIT), "{}", &result[result.len() - 100..]);
    // The history keeps the whole result.
    let stored = events(&f).into_iter().find(|e| e.kind() == Kind::ToolResult).unwrap().payload_json();
    assert!(stored.to_string().len() > 100_000);
}
