//! What a thread's object carries out for its core: the effects it asks for
//! (drive the built-in agent, stop it, call the webhook, tell a directory,
//! wipe storage, remove files) and the timers at the deadlines it names (the storage
//! alarm, the in-memory idle-flush timer). It decides nothing: each effect
//! is done as said, and what the core must know of its outcome (a start
//! signal that failed) is handed back to it.

use crate::agent_host::WorkerHost;
use crate::live::{self, Shared};
use crate::now_ms;
use crate::object::Inner;
use crate::store::DoSql;
use serde_json::Value;
use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;
use threadline_durable::agent::{self, cancel::CancelToken};
use threadline_durable::storage::store::SqlStore;
use threadline_durable::{ApiError, Drive, Effect};
use worker::*;

impl Inner {
    /// Carries out the core's effects in order, then keeps the timers at the
    /// core's deadlines.
    pub(crate) async fn run(self: &Rc<Self>, effects: Vec<Effect>) {
        let mut queue = VecDeque::from(effects);
        while let Some(effect) = queue.pop_front() {
            match effect {
                Effect::Drive(d) => self.drive(d),
                Effect::StopAgents => self.stop_agents(),
                Effect::Webhook { body, start_of } => {
                    let Some(hook) = &self.settings.webhook_url else { continue };
                    if let Err(why) = post_json(hook, &body, self.settings.webhook_timeout_ms).await {
                        console_warn!("webhook: {why}");
                        if let Some(run) = start_of {
                            let now = now_ms();
                            let more = self.with_core(|c| {
                                c.launch().failed(&run, &format!("agent webhook failed: {why}"), now);
                                c.launch().started(&self.settings, now)
                            });
                            queue.extend(more.unwrap_or_default());
                        }
                    }
                }
                Effect::Directory { actor, op } => {
                    let call = threadline_durable::front::directory_call(&actor, &op);
                    if let Err(e) = crate::call(&self.env, None, &call).await {
                        console_warn!("directory: {e}");
                    }
                }
                Effect::Report { actor, reports } => self.deliver_reports(actor, reports),
                Effect::Enqueue { deliveries } => self.enqueue(deliveries).await,
                Effect::Charge { actor, charges } => {
                    crate::charges::deliver(&self.env, &self.core, &actor, charges).await
                }
                Effect::EndFollows { ids } => {
                    for ws in self.state.get_websockets_with_tag(live::TAG) {
                        if live::attachment(&ws).is_some_and(|a| ids.contains(&a.id)) {
                            let _ = ws.close(Some(live::GONE), Some("another actor created the thread"));
                        }
                    }
                }
                Effect::Wipe { files } => {
                    // Charges their directories did not take outlive the
                    // thread: they are stored again after the wipe, and the
                    // alarm delivers them.
                    let owed =
                        self.with_core(|c| c.charges().owed_charges()).ok().and_then(|r| r.ok()).unwrap_or_default();
                    // The thread is gone: its subscribers' streams end.
                    *self.core.borrow_mut() = None;
                    for ws in self.state.get_websockets_with_tag(live::TAG) {
                        let _ = ws.close(Some(live::GONE), Some("the thread was deleted"));
                    }
                    if let Err(e) = self.storage.delete_all().await {
                        console_error!("delete: {e}");
                    }
                    let _ = self.storage.delete_alarm().await;
                    self.alarm_at.set(Some(None));
                    if !owed.is_empty() {
                        let kept =
                            SqlStore::open(DoSql(self.storage.sql())).map_err(ApiError::from).and_then(|mut s| {
                                threadline_durable::thread::keep_charges(&mut s, &owed).map_err(ApiError::from)
                            });
                        match kept {
                            Ok(()) => self.arm_alarm().await,
                            Err(e) => console_error!("charges: {e}"),
                        }
                    }
                    // Its files, under the generation that is now gone: a
                    // thread re-created under the same id has another.
                    if let Some(prefix) = files {
                        if let Err(e) = crate::bucket::delete_prefix(&self.env, &prefix).await {
                            console_error!("files: {e}");
                        }
                    }
                }
                Effect::Telemetry { spans, log } => {
                    if let Some(line) = log {
                        crate::telemetry::log(&line);
                    }
                    crate::telemetry::record(spans);
                }
                Effect::DeleteFiles { keys, ids } => match crate::bucket::delete(&self.env, &keys).await {
                    Ok(()) => {
                        if let Err(e) = self
                            .with_core(|c| c.journal_mut().files_mut().files_deleted(&ids))
                            .and_then(|r| r.map_err(ApiError::from))
                        {
                            console_error!("files: {e}");
                        }
                    }
                    // Asked again by a later alarm.
                    Err(e) => console_error!("files: {e}"),
                },
            }
        }
        // The spans of this instance's runs so far (the loop's and the
        // thread's), to the collector after the answer.
        if let Some(otlp) = &self.settings.otlp {
            let spans = crate::telemetry::take();
            if !spans.is_empty() {
                self.state.wait_until(crate::telemetry::export(otlp.clone(), spans));
            }
        }
        self.report().await;
        self.arm_alarm().await;
        self.arm_flush_timer();
        crate::held::settle(&self.core);
    }

    /// Runs the orchestrator on `d.job`, detached. When the loop ends, the
    /// run's end may have started the next queued message.
    fn drive(self: &Rc<Self>, d: Box<Drive>) {
        let Drive { job, endpoint, config, tools, mcp } = *d;
        let run_id = job.run_id.clone();
        let files = crate::bucket::bucket(&self.env).ok().map(Rc::new);
        let weak = Rc::downgrade(self);
        let changed: Rc<dyn Fn()> = Rc::new(move || {
            if let Some(inner) = weak.upgrade() {
                inner.report_later();
            }
        });
        let host =
            WorkerHost::new(self.env.clone(), self.core.clone(), run_id.clone(), Rc::new(endpoint), files, changed);
        let token = CancelToken::default();
        self.agents.borrow_mut().push((run_id.clone(), token.clone(), host.clone()));
        let inner = self.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let end = agent::run_orchestrator(host, Rc::new(config), tools, mcp, token, job).await;
            // Keep the token while background sub-agents of this run go on.
            let background =
                inner.with_core(|c| c.runs().background_tasks().iter().any(|t| t.run_id == run_id)).unwrap_or(false);
            if end != agent::End::Stopped && !background {
                inner.agents.borrow_mut().retain(|(r, _, _)| *r != run_id);
            }
            let effects = inner.with_core(|c| c.launch().started(&inner.settings, now_ms())).unwrap_or_default();
            inner.run(effects).await;
        });
    }

    /// Stops the built-in agents of this instance and aborts their fetches.
    fn stop_agents(&self) {
        for (_, token, host) in self.agents.borrow_mut().drain(..) {
            token.cancel();
            host.abort();
        }
    }

    /// Keeps the storage alarm at the core's next deadline (alarms survive
    /// eviction and restarts, so a silent run always ends). Only moves it
    /// earlier, or sets it when none is pending.
    pub(crate) async fn arm_alarm(&self) {
        let now = now_ms();
        let deadline = self.core.borrow_mut().as_mut().and_then(|c| c.clock().next_alarm(now, &self.settings));
        let Some(deadline) = deadline else { return };
        let current = match self.alarm_at.get() {
            Some(known) => known,
            None => self.storage.get_alarm().await.ok().flatten(),
        };
        self.alarm_at.set(Some(current));
        if current.is_none_or(|t| t > deadline || t < now) {
            // An i64 alarm time is an offset from now, not an epoch time.
            let at = now + (deadline - now).max(10);
            match self.storage.set_alarm(at - now).await {
                Ok(()) => self.alarm_at.set(Some(Some(at))),
                Err(e) => {
                    self.alarm_at.set(None);
                    console_error!("set_alarm: {e}");
                }
            }
        }
    }

    /// Arms the in-memory timer that stores trailing deltas after the idle
    /// time. In memory on purpose: an alarm is a storage write per segment.
    fn arm_flush_timer(&self) {
        arm_flush_timer(self.core.clone(), self.flush_timer.clone());
    }
}

fn arm_flush_timer(core: Shared, timer: Rc<Cell<Option<i64>>>) {
    let Some(deadline) = core.borrow().as_ref().and_then(|c| c.journal().flush_deadline()) else { return };
    if timer.get().is_some_and(|armed| armed <= deadline) {
        return;
    }
    timer.set(Some(deadline));
    let wait = (deadline - now_ms()).max(0) as u64;
    wasm_bindgen_futures::spawn_local(async move {
        Delay::from(Duration::from_millis(wait)).await;
        if timer.get() == Some(deadline) {
            timer.set(None);
        }
        let result = core.borrow_mut().as_mut().map(|c| c.clock().flush_idle(now_ms()));
        if let Some(Err(e)) = result {
            console_error!("idle flush: {e}");
        }
        arm_flush_timer(core, timer);
    });
}

/// POSTs JSON; an error unless a 2xx answer arrives within `timeout_ms`
/// (the fetch is aborted then).
async fn post_json(url: &str, body: &Value, timeout_ms: u64) -> std::result::Result<(), String> {
    let headers = Headers::new();
    let _ = headers.set("content-type", "application/json");
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers).with_body(Some(body.to_string().into()));
    let req = Request::new_with_init(url, &init).map_err(|e| e.to_string())?;
    let abort = AbortController::default();
    let signal = abort.signal();
    let call = async {
        let mut resp = Fetch::Request(req).send_with_signal(&signal).await.map_err(|e| e.to_string())?;
        let status = resp.status_code();
        if (200..300).contains(&status) {
            Ok(())
        } else {
            let text = resp.text().await.unwrap_or_default();
            Err(format!("HTTP {status}: {}", text.chars().take(200).collect::<String>()))
        }
    };
    use futures_util::future::{select, Either};
    let out = match select(std::pin::pin!(call), Delay::from(Duration::from_millis(timeout_ms))).await {
        Either::Left((r, _)) => r,
        Either::Right(_) => {
            abort.abort();
            Err(format!("no answer within {timeout_ms} ms (AGENT_WEBHOOK_TIMEOUT_MS)"))
        }
    };
    out
}
