//! A step's tool calls: each resolved to its tool (HTTP, MCP, built-in,
//! the client's), asked for a person's approval where it must be, run beside
//! the others, and settled with its result or error, as events and as what
//! the model is told.

use super::*;

impl<H: Host> Agent<H> {
    /// Runs one step's tool calls concurrently. Returns each call's result
    /// text for the model, in call order.
    pub(super) async fn run_tools(
        &self,
        calls: &[openai::ToolCallParts],
        tasks: &mut Vec<Value>,
    ) -> Result<Vec<StepCall>, Halt> {
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
    pub(super) fn resolve(&self, name: &str, args: &Value) -> Result<ToolKind<'_>, String> {
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
    pub(super) fn offered_mcp(&self) -> impl Iterator<Item = &crate::agent::mcp::McpTool> {
        let allowed = self.allowed.as_deref();
        self.found.tools.iter().filter(move |t| self.orchestrator && allowed.is_none_or(|a| a.contains(&t.exposed)))
    }

    /// What a call does next: wait for a person (or the client) first,
    /// change the task list, or run.
    pub(super) fn next<'t>(&self, kind: ToolKind<'t>) -> Next<'t> {
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
    pub(super) async fn finish_suspended_step(&self, cp: &mut Checkpoint, calls: Vec<StepCall>) -> Result<(), Halt> {
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

    pub(super) async fn settle_confirmed(&self, call: &StepCall) -> Result<(String, Vec<Value>), Halt> {
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
    pub(super) fn settle(
        &self,
        tool_call_id: &str,
        outcome: Result<Done, String>,
    ) -> Result<(String, Vec<Value>), Halt> {
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
    pub(super) fn show_images(&self, cp: &mut Checkpoint, images: Vec<Value>) {
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
    pub(super) async fn call_mcp(
        &self,
        tool: &crate::agent::mcp::McpTool,
        args: Value,
    ) -> Result<Result<Done, String>, Halt> {
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
                images.push(
                    json!({ "type": attachments::FILE_PART, "key": key, "mediaType": f.media_type, "size": f.size }),
                );
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
    pub(super) async fn run_tool(
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
    pub(super) fn tool_span(
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

    pub(super) async fn call_tool(
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
}
