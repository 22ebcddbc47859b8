//! The built-in agent's [`Host`] on workerd: the model client and tool runner
//! over `fetch` (aborted through one `AbortController` per run when the run
//! is cancelled), timers over `setTimeout`, and the thread's publish path.

use crate::ids;
use crate::live::Shared;
use crate::now_ms;
use futures_util::StreamExt;
use serde_json::Value;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;
use threadline_durable::agent::charge::Spend;
use threadline_durable::agent::{
    self, BackgroundTask, ByteStream, Checkpoint, Host, ModelFailure, Scope, Stopped, ToolAnswer,
};
use threadline_durable::files::{FileRef, NewFile};
use threadline_durable::Event;
use threadline_durable::{ModelEndpoint, Price};

/// What a call refused by its sender's budget tells them.
const QUOTA_SPENT: &str = "Your budget for this period is spent.";
use worker::*;

/// One run's host. Cloned into sub-agents and background tasks.
#[derive(Clone)]
pub struct WorkerHost {
    pub env: Env,
    pub core: Shared,
    pub run_id: String,
    pub model: Rc<ModelEndpoint>,
    /// Aborts every fetch of the run (model stream, tools) on cancel.
    pub abort: Rc<RefCell<Option<AbortController>>>,
    /// The threads' files (`FILES`), for the model.
    pub files: Option<Rc<Bucket>>,
    /// Called after each publish: the thread's inbox hears of what changed.
    pub changed: Rc<dyn Fn()>,
}

impl WorkerHost {
    pub fn new(
        env: Env,
        core: Shared,
        run_id: String,
        model: Rc<ModelEndpoint>,
        files: Option<Rc<Bucket>>,
        changed: Rc<dyn Fn()>,
    ) -> WorkerHost {
        let abort = Rc::new(RefCell::new(Some(AbortController::default())));
        WorkerHost { env, core, run_id, model, abort, files, changed }
    }

    /// Aborts the run's in-flight requests.
    pub fn abort(&self) {
        if let Some(c) = self.abort.borrow_mut().take() {
            c.abort();
        }
    }

    fn signal(&self) -> AbortSignal {
        match self.abort.borrow().as_ref() {
            Some(c) => c.signal(),
            None => AbortSignal::abort(),
        }
    }

    async fn post(
        &self,
        url: &str,
        method: &str,
        headers: Headers,
        body: String,
    ) -> std::result::Result<Response, String> {
        let mut init = RequestInit::new();
        let method = Method::from(method.to_ascii_uppercase());
        init.with_method(method).with_headers(headers).with_body(Some(body.into()));
        let req = Request::new_with_init(url, &init).map_err(|e| e.to_string())?;
        Fetch::Request(req).send_with_signal(&self.signal()).await.map_err(|e| e.to_string())
    }
}

/// A streamed response body (a model's, an MCP server's); none for an
/// answer without one.
pub struct BodyStream(Option<worker::ByteStream>);

impl ByteStream for BodyStream {
    async fn next(&mut self) -> Option<std::result::Result<Vec<u8>, String>> {
        self.0.as_mut()?.next().await.map(|r| r.map_err(|e| e.to_string()))
    }
}

/// Reads at most `limit` bytes of a body: the bytes, and whether more followed
/// (the rest is not read).
async fn read_capped(resp: &mut Response, limit: usize) -> std::result::Result<(Vec<u8>, bool), String> {
    let mut stream = resp.stream().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| e.to_string())?;
        let room = limit - out.len();
        if chunk.len() > room {
            out.extend_from_slice(&chunk[..room]);
            return Ok((out, true));
        }
        out.extend_from_slice(&chunk);
    }
    Ok((out, false))
}

fn excerpt(text: &str) -> String {
    let t: String = text.chars().take(300).collect();
    if t.len() < text.len() {
        format!("{t}…")
    } else {
        t
    }
}

impl agent::Outbound for WorkerHost {
    type Stream = BodyStream;

    async fn post(&self, req: agent::Fetch) -> std::result::Result<agent::Fetched<BodyStream>, String> {
        let headers = Headers::new();
        for (k, v) in &req.headers {
            headers.set(k, v).map_err(|e| format!("header `{k}`: {e}"))?;
        }
        let mut init = RequestInit::new();
        init.with_method(Method::Post).with_headers(headers).with_body(Some(req.body.into()));
        let request = Request::new_with_init(&req.url, &init).map_err(|e| e.to_string())?;
        let sent = if req.detached {
            Fetch::Request(request).send().await
        } else {
            Fetch::Request(request).send_with_signal(&self.signal()).await
        };
        let mut resp = sent.map_err(|e| e.to_string())?;
        let status = resp.status_code();
        let headers = resp.headers().entries().collect();
        Ok(agent::Fetched { status, headers, body: BodyStream(resp.stream().ok()) })
    }

    async fn sleep(&self, ms: u64) {
        Delay::from(Duration::from_millis(ms)).await
    }

    fn now(&self) -> i64 {
        now_ms()
    }
}

impl Host for WorkerHost {
    async fn open_model(&self, body: String) -> std::result::Result<BodyStream, ModelFailure> {
        let headers = Headers::new();
        let _ = headers.set("content-type", "application/json");
        let _ = headers.set("accept", "text/event-stream");
        if let Some(key) = &self.model.api_key {
            let _ = headers.set("authorization", &format!("Bearer {key}"));
        }
        let url = format!("{}/chat/completions", self.model.base_url.trim_end_matches('/'));
        let mut resp = self.post(&url, "POST", headers, body).await.map_err(ModelFailure::Unreachable)?;
        let status = resp.status_code();
        if !(200..300).contains(&status) {
            let body = resp.text().await.unwrap_or_default();
            return Err(ModelFailure::Status { status, body: excerpt(&body) });
        }
        resp.stream().map(|s| BodyStream(Some(s))).map_err(|e| ModelFailure::Unreachable(e.to_string()))
    }

    async fn read_file(&self, key: &str) -> std::result::Result<Vec<u8>, String> {
        let bucket = self.files.as_ref().ok_or("no FILES bucket is bound")?;
        crate::bucket::read(bucket, key).await
    }

    async fn store_file(&self, bytes: Vec<u8>, media_type: &str) -> std::result::Result<(FileRef, String), String> {
        let bucket = self.files.as_ref().ok_or("no FILES bucket is bound")?;
        let new = NewFile::of(&bytes, media_type, None);
        let key = {
            let mut slot = self.core.borrow_mut();
            let core = slot.as_mut().ok_or("the thread is gone")?;
            core.journal_mut()
                .files_mut()
                .store_agent_file(&new, ids::random_u64(), now_ms())
                .map_err(|e| e.to_string())?
        };
        crate::bucket::put_one(bucket, &key, bytes, media_type, &new.sha256).await?;
        Ok((new.reference(), key))
    }

    async fn call_http_tool(
        &self,
        tool: &agent::tools::HttpTool,
        body: Value,
        limit: usize,
    ) -> std::result::Result<ToolAnswer, String> {
        let headers = Headers::new();
        let _ = headers.set("content-type", "application/json");
        for (k, v) in &tool.headers {
            headers.set(k, v).map_err(|e| format!("header `{k}`: {e}"))?;
        }
        // The timeout covers the whole answer, its body included.
        let call = async {
            let mut resp = self.post(&tool.url, &tool.method, headers, body.to_string()).await?;
            let status = resp.status_code();
            let (body, truncated) = read_capped(&mut resp, limit).await?;
            Ok(ToolAnswer { status, body: String::from_utf8_lossy(&body).into_owned(), truncated })
        };
        let timeout = Delay::from(Duration::from_millis(tool.timeout_ms));
        use futures_util::future::{select, Either};
        match select(std::pin::pin!(call), timeout).await {
            Either::Left((r, _)) => r,
            Either::Right(_) => Err(format!("the tool did not answer within {} ms", tool.timeout_ms)),
        }
    }

    fn new_id(&self, prefix: &str) -> String {
        ids::new_id(prefix)
    }

    fn publish(&self, scope: &Scope, events: Vec<Event>) -> std::result::Result<(), Stopped> {
        let published = {
            let mut slot = self.core.borrow_mut();
            let Some(core) = slot.as_mut() else { return Err(Stopped) };
            core.agent_loop().publish(&self.run_id, scope, events, now_ms()).map_err(|e| {
                if !e.is_conflict() {
                    console_error!("agent publish: {e}");
                }
                Stopped
            })
        };
        (self.changed)();
        published
    }

    fn checkpoint(&self, cp: &Checkpoint) {
        let mut slot = self.core.borrow_mut();
        let Some(core) = slot.as_mut() else { return };
        if let Err(e) = core.agent_loop().save_checkpoint(cp) {
            console_error!("checkpoint: {e}");
        }
    }

    fn spawn(&self, fut: Pin<Box<dyn Future<Output = ()>>>) {
        wasm_bindgen_futures::spawn_local(fut);
    }

    fn background(&self, task: BackgroundTask) {
        if let Some(core) = self.core.borrow_mut().as_mut() {
            core.agent_loop().set_background(task);
        }
    }

    fn approval(&self, tool: &str, declared: bool) -> agent::Asking {
        self.core.borrow().as_ref().map_or(agent::Asking::Ask, |core| core.requests().approval(tool, declared))
    }

    fn span(&self, span: threadline_durable::trace::Span) {
        crate::telemetry::record([span]);
    }

    async fn hold(
        &self,
        model: Option<&str>,
        spend: Spend,
        price: Option<Price>,
    ) -> std::result::Result<Option<String>, String> {
        let held = {
            let mut slot = self.core.borrow_mut();
            let core = slot.as_mut().ok_or("the thread is gone")?;
            core.charges().hold(&self.run_id, model, spend, price, now_ms()).map_err(|e| e.to_string())?
        };
        let Some(held) = held else { return Ok(None) };
        let Some((actor, op)) = held.ask else { return Ok(Some(held.id)) };
        let call = threadline_durable::front::directory_call(&actor, &op);
        let answer = crate::call(&self.env, None, &call).await.map(|r| r.status_code());
        match answer {
            Ok(200..=299) => Ok(Some(held.id)),
            // Refused: the directory holds nothing, and nothing was used.
            Ok(429) => {
                if let Some(Err(e)) = self.core.borrow_mut().as_mut().map(|c| c.charges().release(&held.id)) {
                    console_error!("release: {e}");
                }
                Err(QUOTA_SPENT.to_owned())
            }
            // Unknown: the directory may hold it. The call is not made, and
            // a charge of nothing drops any hold it took.
            other => {
                self.settle(&held.id, Some(Spend::default()), 0);
                Err(match other {
                    Ok(status) => format!("The budget could not be checked: the directory answered {status}."),
                    Err(e) => format!("The budget could not be checked: {e}."),
                })
            }
        }
    }

    fn settle(&self, hold: &str, used: Option<Spend>, streamed: usize) {
        let settled = self.core.borrow_mut().as_mut().map(|c| c.charges().settle(hold, used, streamed, now_ms()));
        match settled {
            Some(Ok(effects)) => {
                let (env, core) = (self.env.clone(), self.core.clone());
                wasm_bindgen_futures::spawn_local(async move {
                    for effect in effects {
                        if let threadline_durable::Effect::Charge { actor, charges } = effect {
                            crate::charges::deliver(&env, &core, &actor, charges).await;
                        }
                    }
                });
            }
            Some(Err(e)) => console_error!("settle: {e}"),
            None => {}
        }
    }

    fn request_confirmation(&self, agent_id: &str, payload: Value) -> std::result::Result<String, Stopped> {
        let requested = {
            let mut slot = self.core.borrow_mut();
            let Some(core) = slot.as_mut() else { return Err(Stopped) };
            let local = ids::new_id("cr");
            core.agent_loop().request_confirmation(&self.run_id, agent_id, payload, &local, now_ms()).map_err(|e| {
                console_error!("confirmation: {e}");
                Stopped
            })
        };
        (self.changed)();
        requested
    }
}
