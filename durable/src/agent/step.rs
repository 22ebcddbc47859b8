//! One model step of an agent: the completion streamed from the provider,
//! its text and reasoning published as they arrive, its usage metered and
//! charged, its tool calls assembled, and its `step-finish`.

use super::*;

#[derive(Default)]
pub(super) struct ModelStep {
    /// Our id for each tool call index of the answer.
    pub(super) ids: Vec<(usize, String)>,
    pub(super) text: String,
    pub(super) calls: Vec<openai::ToolCallParts>,
    pub(super) finish: Option<String>,
    pub(super) usage: Option<Value>,
    pub(super) done: bool,
    /// The request's raw estimate ([`context::raw_estimate`](crate::agent::context::raw_estimate)),
    /// for the provider's count to correct.
    pub(super) estimated: u64,
    /// A step nobody sees (the summary of a compaction): its text is not
    /// published, nor its start and finish.
    pub(super) quiet: bool,
}

/// What a model call is for: a step of the agent (its tools offered, its
/// text published), or a quiet one (a summary) with its own answer cap.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Ask {
    pub(super) quiet: bool,
    pub(super) max_tokens: Option<u64>,
}

impl<H: Host> Agent<H> {
    /// Streams one model response, publishing deltas as they arrive.
    /// One model call, with its span (GenAI's `chat`) when traces are on.
    pub(super) async fn stream_step(&self, messages: &[Value]) -> Result<ModelStep, Halt> {
        self.traced_step(messages, Ask::default()).await
    }

    /// One model call with its span: `chat {model}`, or `compact {model}`
    /// for a quiet one.
    pub(super) async fn traced_step(&self, messages: &[Value], ask: Ask) -> Result<ModelStep, Halt> {
        let start = self.host.now();
        let step = self.model_step(messages, ask).await;
        if let Some(trace) = &self.trace {
            let name = if ask.quiet { "compact" } else { "chat" };
            let mut span = trace
                .child(
                    &self.host.new_id("span"),
                    format!("{name} {}", self.cfg.model),
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

    /// The tools a step offers the model, as sent.
    pub(super) fn definitions(&self) -> Vec<Value> {
        let allowed = self.allowed.as_deref();
        let mut defs = self.tools.definitions(allowed, self.orchestrator);
        defs.extend(self.offered_mcp().map(crate::agent::mcp::McpTool::definition));
        defs.extend(self.client.iter().map(|t| {
            json!({ "type": "function", "function": { "name": t.name, "description": t.description, "parameters": t.parameters } })
        }));
        defs
    }

    pub(super) async fn model_step(&self, messages: &[Value], ask: Ask) -> Result<ModelStep, Halt> {
        let defs = if ask.quiet { Vec::new() } else { self.definitions() };
        // What the call may use is held before it is made: its request as
        // sent (files counted apart from their bytes) and its output cap.
        let request_bytes = serde_json::to_string(messages).map_or(0, |m| m.len())
            + serde_json::to_string(&defs).map_or(0, |d| d.len());
        let max_tokens = ask.max_tokens.or(self.cfg.max_output_tokens);
        let cap = max_tokens.unwrap_or(crate::agent::charge::DEFAULT_OUTPUT_CAP);
        let files = attachments::keys(messages).len();
        let estimate = crate::agent::charge::estimate(request_bytes, files, cap, self.cfg.price);
        let held = self.cancel.run(self.host.hold(self.model_name(), estimate, self.cfg.price)).await;
        let mut meter = match held.ok_or(Halt::Stopped)? {
            Ok(hold) => Meter { host: self.host.clone(), hold, streamed: 0 },
            Err(why) if ask.quiet => return Err(Halt::Failed(why)),
            Err(why) => return Err(self.over_budget(why)),
        };
        let messages = self.with_files(messages).await;
        let mut body = json!({
            "model": self.cfg.model,
            "messages": messages,
            "stream": true,
            "stream_options": { "include_usage": true },
        });
        if let Some(cap) = max_tokens {
            body["max_tokens"] = cap.into();
        }
        if !defs.is_empty() {
            body["tools"] = Value::Array(defs);
        }
        if let Some(spec) = self.output.as_ref().filter(|_| self.orchestrator && !ask.quiet) {
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
                    self.failed(ask.quiet, json!({ "content": format!("Could not reach the model provider: {why}") }))
                );
            }
            Err(ModelFailure::Status { status, body }) => {
                return Err(self.failed(
                    ask.quiet,
                    json!({
                        "content": format!("The model provider answered HTTP {status}: {body}"),
                        "statusCode": status,
                    }),
                ));
            }
        };
        let response_id = self.host.new_id("resp");
        if !ask.quiet {
            self.publish(vec![self.event(Kind::StepStart, json!({}))])?;
        }
        let mut decoder = sse::Decoder::default();
        let mut parser = ChunkParser::default();
        let mut step = ModelStep {
            estimated: crate::agent::context::raw_estimate(request_bytes, files),
            quiet: ask.quiet,
            ..ModelStep::default()
        };
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
                    return Err(self.failed(ask.quiet, json!({
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
                    return Err(self.failed(ask.quiet, json!({ "content": format!("The model stream broke: {why}") })));
                }
                Some(Some(Ok(bytes))) => bytes,
            };
            read += chunk.len();
            meter.streamed = read;
            if read > self.cfg.max_model_bytes {
                let limit = self.cfg.max_model_bytes;
                return Err(self.failed(ask.quiet, json!({
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
        if !ask.quiet {
            self.publish(vec![self.event(Kind::StepFinish, finish)])?;
        }
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
    pub(super) fn model_name(&self) -> Option<&str> {
        Some(self.cfg.model_id.as_deref().unwrap_or(&self.cfg.model))
    }

    /// The sender's budget refused a model call: the agent stops, saying
    /// why ([`QUOTA_EXCEEDED`]).
    pub(super) fn over_budget(&self, why: String) -> Halt {
        let payload = json!({ "content": why, "code": QUOTA_EXCEEDED });
        match self.publish(vec![self.event(Kind::Error, payload)]) {
            Ok(()) => Halt::Failed(QUOTA_EXCEEDED.into()),
            Err(h) => h,
        }
    }

    /// Applies one `data:` payload; `true` at `[DONE]`.
    pub(super) fn apply(
        &self,
        parser: &mut ChunkParser,
        step: &mut ModelStep,
        data: &str,
        response_id: &str,
    ) -> Result<bool, Halt> {
        let events = parser.push(data).map_err(|e| self.failed(step.quiet, json!({ "content": e })))?;
        let mut out = Vec::new();
        for ev in events {
            match ev {
                ModelEvent::Text(t) if step.quiet => step.text.push_str(&t),
                ModelEvent::Reasoning(_) if step.quiet => {}
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
                    return Err(self.failed(
                        step.quiet,
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

    /// A failed call: the provider's `error` published (the run ends), or,
    /// for a quiet step, only why (the person saw nothing of the step).
    pub(super) fn failed(&self, quiet: bool, payload: Value) -> Halt {
        match quiet {
            true => {
                Halt::Failed(payload.get("content").and_then(Value::as_str).unwrap_or("the call failed").to_owned())
            }
            false => self.provider_failed(payload),
        }
    }

    /// Publishes the provider's `error` event; the run ends with
    /// [`PROVIDER_UNAVAILABLE`].
    pub(super) fn provider_failed(&self, payload: Value) -> Halt {
        let mut payload = payload;
        payload["provider"] = "openai-compatible".into();
        match self.publish(vec![self.event(Kind::Error, payload)]) {
            Ok(()) => Halt::Failed(PROVIDER_UNAVAILABLE.into()),
            Err(h) => h,
        }
    }
}
